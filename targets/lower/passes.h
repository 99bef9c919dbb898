// The passes behind lower.h, each in its own file. Internal to targets/lower.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "targets/lower/kernel_ir.h"
#include "targets/target.h"

namespace morgana::lower {

// A block op as lower_block sees it: its body, where its operands and results live, and where it came from.
struct BlockSite {
  const ir::Graph* body = nullptr;
  std::vector<int> operand_tensors;  // LoweredProgram::tensors index of each block operand
  std::vector<int> result_tensors;   // ... of each result (save), in order
  std::vector<std::string> operand_names;  // the operands' names in the kernel graph, for printed statements
  Origin from;            // the block op
  bool made_by_lowering;  // a predefined op tiled by tile_kernel_ops: statements are attributed to `from`
};

// Pass 3: one kernel per block op: sections (prologue, loop body, epilogue), one tile per block-level value
// (accumulators of a one-iteration loop and a matmul feeding only an acc_sum share their operand's tile),
// statements in node order with each load placed just before its first use. Offsets and barriers come later.
Kernel lower_block(const BlockSite& site);

// Pass 3a (fuse_elementwise.cpp): elementwise unary statements folded into the statement that writes their operand
// (Stmt::post) or the one that reads their result (Stmt::pre), so a chain of them costs one pass over its tile.
void fuse_elementwise(Kernel& k);
// Pass 3c (transposed_operands.cpp): a tile loaded from a transposed view and read only as matmuls' B is loaded as
// the memory holds it (its last two dims swapped, from the tensor the view transposes; added to `p` if it is not
// there) and read as Bᵀ (Stmt::trans_b), so its loads move 16 bytes along K instead of one strided element.
void load_transposed_operands(Kernel& k, LoweredProgram& p);
// Pass 3d (unit_rows.cpp): batch elements as rows (ir::unit_row_fold): in a block graph whose batched values hold
// one row per batch element and whose matmuls share B across the batch, those tiles have their batch dim and row
// dim swapped, and their loads and stores address views with the same dims swapped (added to `p` as needed).
void fold_unit_rows(Kernel& k, LoweredProgram& p, const ir::Graph& body);
// Pass 3e (equal_loads.cpp): loads of one section that fill tiles of one type and shape from the same elements are
// one load; the later tile's readers read the earlier one (multi-head latent attention's cache, read as Cᵀ and as C).
void merge_equal_loads(Kernel& k, const LoweredProgram& p);
// Pass 3b: software pipelining of the for-loop. Where the target has asynchronous copies and the loop runs more than
// once, every body load that can move 16 bytes per access gets a second buffer: the prologue issues iteration 0's
// copies, each iteration first issues those of the next one into the other buffer and then waits for its own
// (AsyncWait, pending 1), so loads overlap the body's math. Left as is when the second buffers do not fit the
// target's shared memory or cost resident blocks; then (and in the prologue) a section's asynchronous loads are
// batched: moved to its start, closed by one AsyncWait.
void pipeline_loads(Kernel& k, const LoweredProgram& p, const targets::Target& target);
// Pass 6-: pipelining tried again once the register passes have taken computed tiles out of shared memory. At pass 3b
// every tile was still there, so a loop whose buffers fit only beside its tiles' register form (a d = 128 flash
// kernel of 128 keys an iteration: five f32 [64,128] tiles) stayed unpipelined, waiting a DRAM round trip each
// iteration, while the cost model, which prices tiles where they end up, priced it pipelined.
void pipeline_loads_again(Kernel& k, const LoweredProgram& p, const targets::Target& target);

// The widest global access (16, 8 or 4 bytes; 0: one element at a time) of a load or store whose alignment holds for
// every block and iteration: last dim contiguous; the tile's last extent, every other stride, every coefficient of
// the origin along the last dim and the tensor's offset multiples of it; a masked last dim a multiple of it.
int64_t global_access_bytes(const Stmt& s, const GlobalTensor& g, const Tile& tile);

// Pass 4, first half: liveness-based offsets of the tiles in `space` (a tile may reuse the space of tiles that are
// dead, an elementwise op may write over an operand that dies there); returns the bytes the block needs there.
int64_t assign_offsets(Kernel& k, Space space = Space::shared);

// Whether `after`, a changed copy of `before`, costs nothing of the shared memory (both planned by assign_offsets):
// it fits the target's limit and loses no block the grid would run at once on an SM. A second block on the SM
// overlaps its loads with this one's math as well as a second buffer or an earlier load does, and also its math with
// this one's barriers (measured on the H100: doubling 64 KiB tiles took rmsnorm_linear_b8 from 87 to 161 us,
// gated_mlp from 76 to 127, at one block per SM instead of the two or three its grid gave each). Residency beyond the
// grid's blocks per SM is worth nothing. Registers are not known yet; both counts ignore them. Used by pipeline_loads
// (extra buffers, batched loads) and use_copy_engine (aligned tiles, barriers).
bool costs_nothing(Kernel& before, Kernel& after, const targets::Target& target);

// For each statement s of k's prologue, body and epilogue that `applies` to: `change` alters a copy of the kernel
// (`with`, its copy of s), which replaces k where it costs nothing. The passes that add a small shared tile to a
// statement (fold_by_teams, publish_split_parts_at_once) take it this way.
void change_where_free(Kernel& k, const targets::Target& target, const std::function<bool(const Stmt& s)>& applies,
                       const std::function<void(Kernel& with, Stmt& s)>& change);

// Pass 4: assign_offsets, then, when the bytes exceed the target's limit, either a UserError naming the block op,
// or with `spill`, moving the largest tiles live at the peak to global scratch until the rest fits.
void plan_shared_memory(Kernel& k, const targets::Target& target, bool spill);

// Pass 7: a barrier before each statement that reads shared memory written, or writes shared memory touched, since
// the last barrier, and at the end of a loop body that runs more than once.
void insert_barriers(Kernel& k);

// Pass 5, the thread level's instruction choices: for each matmul the target's matrix instruction (one of
// `matrix_ops`, with lane layouts, scope of one warp, operand types and N, K multiples of its shape, operands in
// shared memory, whole warps per block), for each load and store the widest global access (16, 8 or 4 bytes) whose
// alignment the tensor's strides, the tile's shape and the origin's coefficients prove, and cp.async for 16-byte
// loads into shared memory where the target has it.
void choose_instructions(Kernel& k, const LoweredProgram& p, const targets::Target& target,
                         const std::vector<std::string>& matrix_ops);

// targets::matmul_tiling for matmul statement s on its matrix instruction Stmt::atom (the tile library's
// mg::WarpTiling computes the same from the template arguments the emitter passes).
using targets::MatmulTiling;
MatmulTiling matmul_tiling(const Stmt& s, const Kernel& k, const targets::Target& target);

// Pass 6a (row_registers.cpp): chains over rows that warps own, in registers. A matmul on a matrix instruction whose
// row blocks give every warp rows of its own computes whole rows per warp task into a register tile, and the
// elementwise ops, last-dim row reductions, accumulators and matmuls (as A, when the C layout feeds A) that follow
// it work on those registers too, as far as every reader of a tile can take it from registers and the tiles live
// at once fit three quarters of a thread's registers. Their statements then run in the tile's layout: no shared
// memory, no barriers.
void keep_rows_in_registers(Kernel& k, const targets::Target& target);

// Whether the C fragments of matrix instruction m, two atoms per K step, are A's fragments of the same lane under a
// fixed renaming of values (the same for every lane), so a register tile can be a matmul's A without an exchange.
bool c_fragments_feed_a(const targets::MatrixInstr& m, int64_t warp_size);

// The register passes' fit test (row_registers.cpp, element_registers.cpp): at each of `positions` statements, the
// tiles of `spans` that `live(position, tile, span)` accepts hold `registers(tile)` registers each; returns the largest
// of them at the first position where they fail targets::register_tiles_fit, or -1.
using AccessSpan = std::pair<int64_t, int64_t>;
int largest_at_register_peak(int64_t positions, const std::map<int, AccessSpan>& spans,
                             const std::function<bool(int64_t, int, const AccessSpan&)>& live,
                             const std::function<int64_t(int)>& registers, const targets::Target& target);

// Pass 6 (registers.cpp): a matmul on a matrix instruction whose result can live in registers writes a register
// tile (Space::registers) instead of its shared one, and a Publish stores it there where it is first needed: the
// accumulator of a for-loop (accumulating across iterations without shared-memory traffic, published at the start
// of the epilogue), or any matmul whose tasks leave warps idle (they split K). Accumulators may take a quarter of
// the target's registers per thread.
void keep_matmuls_in_registers(Kernel& k, const targets::Target& target);

// Pass 6b (copy_engine.cpp): where the target has a copy engine ([async] tma), each pipelined load of a box of a
// kernel parameter that the engine can write exactly as the tile is read (Stmt::tensor_map) is moved by it on one
// thread's request, completing on a barrier per pipeline buffer (Kernel::barriers) instead of a cp.async batch.
void use_copy_engine(Kernel& k, const LoweredProgram& p, const targets::Target& target);

// Pass 6c (loop_folds.cpp): a reduction in the for-loop whose only reader is an accumulator of the same fold
// (acc_sum of reduce_sum, acc_max of reduce_max) folds into a register tile across the iterations
// (RegisterLayout::fold, Stmt::accumulate), each thread keeping its part of the elements it reads, and a Publish at
// the start of the epilogue combines the parts into the accumulator: no shuffles, shared results or barriers for it
// in the loop.
void fold_across_loop(Kernel& k, const targets::Target& target);

// Pass 6d (element_registers.cpp): chains of loads, elementwise statements, stores and whole-row reductions over
// one shape keep their tiles in registers, each thread the runs an elementwise statement deals it
// (RegisterLayout::elements); no shared memory or barriers between them.
void keep_elements_in_registers(Kernel& k, const LoweredProgram& p, const targets::Target& target);

// Pass 6e (team_reductions.cpp): a reduction folded by warps with fewer outputs than the block has warps takes a
// team of warps per output and a small shared tile where their folds meet, where that tile costs no busy block.
void fold_by_teams(Kernel& k, const targets::Target& target);

// Pass 6j (registers.cpp): a Publish of a matmul's K split over warps meets the parts in a small shared tile all at
// once (one barrier; mg::Fragments::publish(dst, parts)) instead of adding them in turns (k_split - 1 barriers), where
// that tile costs no busy block.
void publish_split_parts_at_once(Kernel& k, const targets::Target& target);

// Pass 6f (own_accumulators.cpp): an online-softmax accumulator in shared memory keeps a running max per element
// (its state tile of the accumulator's shape) instead of per row, where that costs no busy block: each thread then
// reads and writes only its own elements, and the statement needs no barrier.
void own_accumulator_state(Kernel& k, const targets::Target& target);

// Pass 6g (rescaled_products.cpp): an online-softmax accumulator in registers whose x is a register-A matmul's
// product that nothing else reads takes the product by the matrix instruction: the accumulator is rescaled first
// (Stmt::scale gets x's factor per row), and the matmul adds A·B into it with A's rows scaled by that factor. No
// tile for the product, no additions of it.
void accumulate_rescaled_products(Kernel& k);

// Pass 6i (fragment_norms.cpp): a matmul on a matrix instruction whose product is scaled by the rms-norm factors of
// its A operand's rows (ir::norm_scaled_after: QK-norm's queries) takes the sums of squares from the A fragments it
// is fed (Stmt::norm_rows): the reduction over the shared tile, its barrier and the multiply go.
void norms_from_fragments(Kernel& k, const targets::Target& target);

// Pass 6h (wait_by_first_use.cpp): a section's batch of asynchronous copies (pass 3b) goes out as one batch per
// statement that first reads its tiles, each waited for just before that statement instead of all at the section's
// start (sections without pipeline buffers).
void wait_by_first_use(Kernel& k);

// Shared memory a block graph needs once lowered (passes 3 and 4), for the tiling pass's fit test.
int64_t block_smem_bytes(const ir::Graph& body);

}  // namespace morgana::lower
