// The kernel IR: what lowering makes of a μGraph, and what every target's emitter renders (docs/lowering.md).
//
// A LoweredProgram is the list of GPU kernels one μGraph becomes, in execution order, with the parameter list every
// kernel takes. Each kernel is one block op: a launch geometry and three straight-line statement lists (prologue,
// a for-loop body run `loop` times, epilogue) over tiles, written against a small target-neutral tile API: load a
// tile from a tensor, elementwise ops, tile matmul, row reduction, concat, accumulate, store, barrier. Tiles live
// in the block's shared memory at offsets the shared-memory plan chose; tensors live in global memory in their IR
// element type; arithmetic is f32. Every statement names the μGraph node it came from.
//
// Each statement is cooperative: all threads of the block execute it together (a target's tile library decides
// which thread does what), and explicit Barrier statements order statements that touch the same shared memory.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/diagnostic.h"
#include "ir/dtype.h"
#include "ir/op_table.h"

namespace morgana::lower {

// The μGraph node a kernel or statement came from.
struct Origin {
  std::string node;  // the node's name: "p" in a user's block graph, "A" for a predefined op the lowering tiled
  std::string text;  // the statement it stands for, for comments: "p = matmul(x, w)"
  SourceLoc loc;
  // "node 'p' (spec.mg:12:5)", or "node 'p'" when the position is unknown.
  std::string str() const;
};

// Kernel parameters, in the order every kernel of a program takes them (the parameter contract): the program's
// inputs, then its outputs in return order, then one workspace buffer when workspace_bytes > 0.
enum class Role : uint8_t { input, output, workspace };
struct Param {
  std::string name;  // an identifier, distinct within the program
  Role role = Role::input;
  ir::DType dtype = ir::DType::f32;  // the workspace is raw bytes; it is described as f32[workspace_bytes / 4]
  std::vector<int64_t> shape, strides;  // strides in elements
};

// A kernel-level tensor in global memory: a parameter, or a region of the workspace.
struct GlobalTensor {
  std::string name;
  ir::DType dtype = ir::DType::f32;
  std::vector<int64_t> shape, strides;  // strides in elements
  int param = -1;                       // index into LoweredProgram::params
  int64_t offset = 0;                   // bytes from the parameter's start (workspace regions)
};

enum class Space : uint8_t {
  shared,  // the block's dynamic shared memory
  global,  // the block's own slice of a scratch region of the workspace: only for tiles that do not fit in
           // shared memory, when the caller allows spilling (LowerOptions::spill_to_global)
  registers,  // the threads' registers, in the C fragments of a matrix instruction tiled over the block's warps
              // (Tile::layout says which thread holds which element). No offset, no barriers: every statement that
              // touches a register tile works in its layout, so each thread reads back only what it wrote.
};

// Which thread holds which element of a register tile [.., M, N] (the tile library's mg::Fragments): the C fragments
// of matrix instruction `atom`, a warp task being one batch's row block of the atom's m rows by atoms_n atoms along
// N; the block's warps form teams of k_split, team w taking tasks w, w + teams, ... A tile of N == 1 (a row vector:
// one value per row, as a row reduction gives) is held like a column of the C fragment, every lane and value of a
// row holding that row's value. Tiles of one layout with whole rows per task (atoms_n * n == N, k_split 1) meet
// in elementwise statements, row reductions and accumulators without any thread exchanging data.
//
// With `fold`, the tile instead holds the running results of a Reduce accumulated across the for-loop (pass
// fold_across_loop; the tile library's mg::LoopFold): each thread keeps, per result element its warp (by_warps) or
// it folds, the part it read; a Publish combines them once, after the loop. atom, atoms_n and k_split are unused.
//
// With `elements`, each thread holds the elements an elementwise statement over the tile's shape deals it (pass
// keep_elements_in_registers; the tile library's mg::Elements): runs of neighbours along the last dim, run i to
// thread i % threads. Loads, elementwise statements, stores and whole-row reductions work on it; atom, atoms_n and
// k_split are unused.
struct RegisterLayout {
  int atom = -1;  // index into the target's [[matrix]] list
  int64_t atoms_n = 1;
  int64_t k_split = 1;
  bool fold = false;
  bool elements = false;
  int64_t run = 0;  // elements: each thread's runs of this many neighbours (targets::element_run)
};

// A dense row-major array the block works on.
struct Tile {
  std::string name;                 // an identifier, distinct within the kernel
  ir::DType dtype = ir::DType::f32;  // a loaded tile keeps its tensor's type; computed tiles are f32
  std::vector<int64_t> shape;
  Space space = Space::shared;
  int64_t offset = 0;  // bytes from the start of the block's shared memory or scratch slice (set by the plan)
  // Buffers the tile rotates through (pass pipeline_loads): the loop body works on buffer it % stages while the
  // load of a later iteration fills the next one. Buffer i starts at offset + i * stage_bytes().
  int64_t stages = 1;
  RegisterLayout layout;  // Space::registers only
  // A 16-bit shared tile written only by 16-byte loads or elementwise ops and read only by matrix instructions'
  // operand loads (ldmatrix) has the 16-byte chunks of each row permuted (pass choose_instructions; the tile
  // library's mg::Swizzled says how), so that the 8 rows one ldmatrix matrix reads hit distinct banks.
  bool swizzled = false;
  // Written by the copy engine (Stmt::tensor_map): each buffer starts at a multiple of kCopyEngineAlign, so that the
  // engine's address-based swizzle lands the chunks where mg::Swizzled reads them.
  bool copy_engine = false;
  Origin from;

  int64_t numel() const;
  int64_t stage_bytes() const;  // one buffer
  int64_t bytes() const;        // all buffers
};

// A position along one dim of a tensor, as a function of the block index and the for-loop iteration:
// block[0]*bx + block[1]*by + block[2]*bz + loop*it.
struct Affine {
  std::array<int64_t, 3> block{};
  int64_t loop = 0;
  bool operator==(const Affine&) const = default;
};

enum class StmtKind : uint8_t {
  Load,        // dst[i] = tensor[origin + i] where inside the tensor along the masked dims, else pad
  Store,       // tensor[origin + i] = a[i], converted to the tensor's type, where inside along the masked dims
  Unary,       // dst = op(a), elementwise; `scalar` for mul_scalar/add_scalar
  Binary,      // dst = op(a, b), elementwise, numpy broadcasting (shapes aligned at the last dim)
  Matmul,      // dst = a·b (batched over the leading dims, which broadcast); with `accumulate`, dst += a·b after
               // the first iteration
  Reduce,      // dst = reduce_sum/reduce_max of a over `dim`, to `to` groups (docs/spec-language.md)
  Concat,      // dst = a ‖ b along `dim`
  Accumulate,  // first iteration: dst = a (and state = b); after: acc_sum dst += a, acc_max dst = max(dst, a),
               // acc_rescale_sum M' = max(state, b), dst = dst*exp(state - M') + a*exp(b - M'), state = M'
  Barrier,     // every thread of the block arrives before any continues
  AsyncWait,   // closes the batch of asynchronous loads issued since the last AsyncWait, then waits until this
               // thread's copies are complete except those of the newest `pending` batches; a Barrier then
               // publishes them to the block
  Publish,     // dst (shared) = a (registers): each warp stores its fragments, the k_split warps that computed
               // parts of one element adding theirs in turn, or with `parts` meeting there all at once (the
               // statement synchronises inside itself); of a fold tile, the lanes' parts of each element combined
};

// One elementwise unary op (square, exp, mul_scalar, ...) folded into a statement's reads or writes (pass
// fuse_elementwise), so that it costs no pass over the tile of its own.
struct ElementMap {
  ir::OpCode op = ir::OpCode::input;
  double scalar = 0;  // mul_scalar, add_scalar
  bool operator==(const ElementMap&) const = default;
};

struct Stmt {
  StmtKind kind = StmtKind::Barrier;
  ir::OpCode op = ir::OpCode::input;  // Unary/Binary: the op; Reduce: reduce_sum|reduce_max; Accumulate: acc_*
  int dst = -1;                       // tile written (all but Store and Barrier)
  int a = -1, b = -1;                 // tiles read (Store: a is stored; Accumulate: a = x, b = m)
  int state = -1;                     // Accumulate acc_rescale_sum: the running max, shaped like b
  // Accumulate acc_rescale_sum: the type the running max is held in, m's element type (verify/interpreter.h,
  // accumulate: the sums are relative to the max rounded as a saved acc_max of the same m is); f32 (nothing to
  // round) where m is loaded from a tensor of that type, whose values it already holds.
  ir::DType held = ir::DType::f32;
  // Pass accumulate_rescaled_products: an acc_rescale_sum whose x is a register matmul's product, taken apart so
  // that the product goes straight into the accumulator as FlashAttention accumulates P·V into O. The Accumulate
  // (a = -1) only moves the running max on and rescales dst (cleared on the first iteration), and writes x's factor
  // exp(m - M') per row into register row vector `scale`; the Matmul after it (dst: the accumulator, accumulating
  // every iteration) multiplies its A operand's rows by `scale` as they become fragments.
  int scale = -1;
  // Matmul (pass norms_from_fragments, QK-norm's queries): each row of the product is multiplied by these maps of
  // the sum of squares of A's row, taken from the fragments the matrix instruction is fed: an rms_norm's
  // rsqrt(sum * (1/n) + eps), whose reduction and multiply the pass removed.
  std::optional<std::vector<ElementMap>> norm_rows;
  int tensor = -1;                    // Load/Store: index into LoweredProgram::tensors
  std::vector<Affine> origin;         // Load/Store: one per dim of the tensor
  uint32_t mask = 0;                  // Load/Store: bit d set when dim d needs a bounds check
  double pad = 0;                     // Load: value read outside the tensor (the IR's masked reads are 0)
  int dim = 0;                        // Reduce, Concat: the dim of the tiles
  int64_t to = 1;                     // Reduce
  double scalar = 0;                  // Unary mul_scalar, add_scalar
  // Unary, Binary, Reduce (pass fuse_elementwise): maps applied in order to each element of operand `a` as it is
  // read (pre), and to each result element before it is written (post).
  std::vector<ElementMap> pre, post;
  bool trans_b = false;               // Matmul: tile b holds Bᵀ, rows of N along K (pass load_transposed_operands)
  bool accumulate = false;            // Matmul; Reduce into a fold tile (RegisterLayout::fold): after the first
                                      // iteration dst folds this iteration's result into its value
  int64_t ahead = 0;                  // Load: of iteration it + ahead, into its buffer; skipped past the last one.
                                      // In the prologue it is 0.
  int64_t iterations = 1;             // Load: fills the buffers of `iterations` consecutive iterations from
                                      // it + ahead (a preload of a loop's synchronous loads: pipeline_loads)
  bool batch = false;                 // Load: its asynchronous copies stay in flight until the next AsyncWait of
                                      // the section closes their batch (pass pipeline_loads); else it waits itself
  int pending = 0;                    // AsyncWait
  // Thread-level choices (pass choose_instructions, docs/lowering.md "The thread level"):
  int atom = -1;             // Matmul: index into the target's [[matrix]] list of the instruction it runs on, or
                             // -1 for the scalar routine
  int64_t atoms_n = 1;       // Matmul with an atom: a warp's task is one row block of the atom's m rows by atoms_n
                             // atoms along N (its accumulators stay in registers across K)
  int64_t k_split = 1;       // Matmul into registers: warps that share each task, each taking 1/k_split of K
  int64_t vector_bytes = 0;  // Load/Store: bytes each thread moves per global access (0: one element at a time)
  bool async = false;        // Load: asynchronous copies (cp.async) straight into shared memory
  // Load (pass use_copy_engine): moved by the copy engine (TMA) through Kernel::tensor_maps[tensor_map], in boxes of
  // box_rows rows of the tile's second-to-last dim, and counted on the barrier of its buffer instead of a cp.async
  // batch; -1: by the threads.
  int tensor_map = -1;
  int64_t box_rows = 0;
  bool by_warps = false;     // Reduce: each output folded by a whole warp (lanes stride the group, then shuffles)
  // Reduce by_warps with fewer outputs than the block has warps: a team of `team` warps (a power of two) folds each
  // output, and their warps' folds meet in shared tile `parts` (f32[outputs, team]) behind a barrier inside the
  // statement (mg::team_reduce); 1 and -1 otherwise. A Reduce of a register tile of RegisterLayout::elements also
  // leaves its warps' folds in `parts` (f32[rows, warps per row], mg::regs_reduce_rows). A Publish of a K split over
  // k_split warps may leave parts 1.. in `parts` (f32[k_split - 1, elements], pass publish_split_parts_at_once).
  int64_t team = 1;
  int parts = -1;
  Origin from;
};

// A tensor as the copy engine sees it (NVIDIA's TMA, target [async] tma): the runtime builds the map from the
// parameter the caller passes (its shape, strides and type) and from the box and swizzle here, and the kernel takes it
// by value after the program's parameters.
struct TensorMapUse {
  int param = -1;             // index into LoweredProgram::params
  std::vector<int64_t> box;   // elements per box along each dim of the parameter, outermost first; each 1..256
  int64_t swizzle_bytes = 0;  // 0, or 32, 64, 128: rows of that many bytes with their 16-byte chunks permuted as
                              // mg::Swizzled permutes them (the engine permutes by shared-memory address)
  bool operator==(const TensorMapUse&) const = default;
};

inline constexpr int64_t kCopyEngineAlign = 1024;  // the engine's widest swizzle pattern: 8 rows of 128 bytes

struct Kernel {
  std::string entry;  // the entry symbol: an identifier, unique in the program
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};  // threads per block (x only, for now)
  int64_t smem_bytes = 0;                 // dynamic shared memory per block
  int64_t scratch_bytes = 0;              // global scratch per block (spilled tiles); 0 normally
  int64_t scratch_offset = 0;             // where block 0's scratch slice starts in the workspace; block
                                          // (bx,by,bz) uses the slice ((bz*grid_y + by)*grid_x + bx)
  int64_t loop = 1;                       // trip count of the body
  bool unroll = false;                    // the loop is unrolled whole: one of at most kMaxUnrolledLoop
                                          // iterations (lower.h), or one whose loads go straight into registers,
                                          // all iterations' loads out before the first is used (element_registers)
  std::vector<Tile> tiles;
  std::vector<TensorMapUse> tensor_maps;  // the copy engine's view of the tensors its Loads name (Stmt::tensor_map)
  // Copy-engine loads complete on barriers in shared memory at barrier_offset, one per pipeline buffer, each awaiting
  // barrier_arrivals requests per phase (the loads of one iteration); 0 barriers when no load uses the engine.
  int64_t barriers = 0, barrier_arrivals = 0, barrier_offset = 0;
  std::vector<Stmt> prologue, body, epilogue;  // body runs for it = 0 .. loop-1
  Origin from;                                 // the block op
};

struct LoweredProgram {
  std::string name;    // the kernel graph's name
  std::string target;  // the target file's name
  std::vector<Param> params;
  int64_t workspace_bytes = 0;
  std::vector<GlobalTensor> tensors;
  std::vector<Kernel> kernels;  // in execution order
  std::string mugraph;          // the μGraph that was lowered (every op a block op), printed
};

std::string_view role_name(Role r);
std::string_view stmt_name(StmtKind k);
// Tiles a statement reads and writes (barriers none).
std::vector<int> stmt_reads(const Stmt& s);
std::vector<int> stmt_writes(const Stmt& s);
// Both: the tiles a statement touches (writes first).
std::vector<int> stmt_tiles(const Stmt& s);
// Whether s reads or writes `tile`; whether it writes it.
bool stmt_touches(const Stmt& s, int tile);
bool stmt_writes_tile(const Stmt& s, int tile);
// The statements of the kernel (all sections) that read tile t, and those that write it, each once.
struct TileUses {
  std::vector<const Stmt*> readers, writers;
};
TileUses tile_uses(const Kernel& k, int tile);
// Load or Store `s` (of a tile whose dims d1 and d2 were swapped) made to address its tensor through a view with the
// same two dims swapped: the view (added to `p` unless an equal tensor is there), its origin and bounds mask.
void swap_addressed_dims(Stmt& s, LoweredProgram& p, int d1, int d2);
// A Barrier, or an AsyncWait that closes the batch before it and waits for all but `pending` batches, attributed to
// `from`.
Stmt sync_stmt(StmtKind kind, const Origin& from, int pending = 0);

// For each tile `keep` accepts, the positions of its first and last access (read or write) among `order` (a kernel's
// statements in order: prologue, body, epilogue), for the register passes' liveness.
std::map<int, std::pair<int64_t, int64_t>> access_spans(const std::vector<const Stmt*>& order,
                                                         const std::function<bool(int)>& keep);

// The shared f32 tile of `shape` where reduction s's warps leave their folds (Stmt::parts), named after its result.
Tile parts_tile(const Kernel& k, const Stmt& s, std::vector<int64_t> shape);

// Whether s is a reduction of whole rows (the last dim of its operand, to one group): its result does not depend on
// where in its row each element is stored, so it may read a swizzled tile as it is (mg::Swizzled permutes 16-byte
// chunks within each row).
bool reduces_whole_rows(const Kernel& k, const Stmt& s);

// Where a statement touches a shared tile only at the elements each thread computes itself: an elementwise statement
// (Unary, Binary) or an accumulator (Accumulate) over a shared, unswizzled result of shape `shape`, at its result,
// at an operand of that same shape (not broadcast), or at an accumulator's running max of that shape (pass
// own_accumulator_state); the tiles single-buffered. The tile library deals such a statement's elements to threads
// by the result's shape alone (mg::unary, mg::binary: runs of targets::elementwise_run neighbours; the accumulators
// element by element), so two accesses with equal PrivateAccess touch the same bytes from the same threads: a
// statement may read or overwrite what an earlier one wrote there without a barrier (insert_barriers, and the CPU
// executor's race check).
struct PrivateAccess {
  std::vector<int64_t> shape;  // the statement's result shape: how elements are dealt to threads
  int64_t run = 1;             // in runs of this many neighbours (elementwise statements: targets::elementwise_run;
                               // accumulators deal element by element)
  int64_t offset = 0;          // where the tile starts in shared memory
  int64_t element_bytes = 0;
  bool operator==(const PrivateAccess&) const = default;
};
std::optional<PrivateAccess> private_access(const Kernel& k, const Stmt& s, int tile);

// x after the maps, in order, computed in f32 as the tile library does.
float apply_maps(const std::vector<ElementMap>& maps, float x);
// Tiles no statement touches are removed, and the statements' tile indices renumbered.
void drop_unused_tiles(Kernel& k);

// A readable dump of the kernel IR, for debugging and --dump-after.
std::string print(const LoweredProgram& p);

}  // namespace morgana::lower
