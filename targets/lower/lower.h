// Target-neutral lowering of a μGraph to the kernel IR (targets/lower/kernel_ir.h). The pipeline, one pass each
// (docs/lowering.md):
//   1. ir::verify_or_throw                  the input is a valid kernel graph
//   2. tile_kernel_ops                      every predefined kernel-level op becomes an equivalent block op, with
//                                           a default tiling chosen from the target; outputs that are inputs or
//                                           returned twice get a copy
//   3. lower_block (per block op)           block graph -> one kernel: sections, tiles, statements
//   3b. pipeline_loads (per kernel)        loads of the next iteration issued before this one's math (cp.async,
//                                           two buffers)
//   4. plan_shared_memory (per kernel)      tile offsets; a block op whose tiles do not fit is a UserError
//                                           (or, if allowed, spills tiles to global scratch)
//   5. insert_barriers (per kernel)         barriers between statements that share shared memory
//   6. choose_instructions (per kernel)     the thread level: tensor-core atoms for matmuls, vector width and
//                                           asynchronous copies for loads and stores
// then the program's parameters, workspace layout and entry symbols.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "targets/lower/kernel_ir.h"
#include "targets/target.h"

namespace morgana::lower {

struct LowerOptions {
  // A block op whose tiles exceed the target's shared memory is a UserError (the μGraph is not valid for the
  // target). With this set, its largest tiles go to a per-block scratch region of the workspace in global memory
  // instead: slow, but it runs, which helps to try a hand-written μGraph. The search never needs it.
  bool spill_to_global = false;
  // The matrix instructions (targets' [[matrix]] `op`) the back end's tile library implements; a matmul runs on
  // one of them when the target has it with lane layouts and the tiles fit its shape, else on the scalar routine.
  std::vector<std::string> matrix_ops;
  // Loops of at most kMaxUnrolledLoop iterations are unrolled whole (Kernel::unroll), except in the kernels named
  // here (entry symbols): the compile driver names those whose unrolled code spilled registers, and lowers again.
  std::set<std::string> keep_rolled;
};

// The longest loop lowering unrolls whole: the buffer rotation (it % stages), the first iteration's selects and the
// loop counter fold into constants, and the compiler schedules across iterations (H100: a 4-iteration flash
// kernel's 2.14 M warp instructions became 1.78 M, 12.96 -> 11.97 us; bench/notes-fast-kernels-2.md, session 19).
// Longer loops stay rolled: their code grows with the trip count and their gain shrinks.
inline constexpr int64_t kMaxUnrolledLoop = 4;

// Lowers `g` for `target`. Throws morgana::UserError when the graph is invalid or does not fit the target (tiles
// beyond shared memory unless spilling is allowed, too many threads), naming the block op and its source position.
LoweredProgram lower(const ir::Graph& g, const targets::Target& target, const LowerOptions& options = {});

// The result of pass 2: a kernel graph whose ops are all block ops (besides inputs and outputs).
struct TiledGraph {
  ir::Graph graph;
  // Per node of `graph`: the statement of the predefined op it was made from ("A = matmul(Q, K)"), or empty for
  // a block op the user wrote.
  std::vector<std::string> made_from;
};

// Pass 2 on its own, for tests (the result is equivalent to `g`) and --dump-after.
TiledGraph tile_kernel_ops(const ir::Graph& g, const targets::Target& target);

// Passes 3-5 and the program layout, on the output of pass 2.
LoweredProgram lower_tiled(const TiledGraph& tiled, const targets::Target& target,
                           const LowerOptions& options = {});

// The threads per block the default tilings use: four warps (waves), within the target's limit.
int64_t default_threads(const targets::Target& target);

// The most dynamic shared memory a block may use on `target` (targets::block_smem_limit: the opt-in limit).
int64_t shared_memory_limit(const targets::Target& target);

}  // namespace morgana::lower
