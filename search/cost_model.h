// The search's cost model: estimates how long a μGraph takes on one target from the hardware description
// alone (bytes per memory level over bandwidth, FLOPs over the matching unit's peak, occupancy and wave
// quantization, barriers, launches). It ranks verified candidates before anything is timed, so what matters
// is that it orders candidates the way the GPU would; docs/cost-model.md gives every term, its constants and
// what it ignores.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/block_rules.h"
#include "ir/graph.h"
#include "targets/target.h"

namespace morgana::search {

// One kernel launch: a `block` op, or a predefined kernel-level op under the default tiling of
// docs/cost-model.md.
struct KernelCost {
  std::string label;  // "block -> Y" or "matmul -> Y"
  // Launch shape and occupancy.
  int64_t blocks = 0;
  int64_t threads = 0;
  int64_t loop = 1;
  int64_t smem_bytes = 0;       // estimated shared memory per block
  int64_t regs_per_thread = 0;  // estimated
  int64_t blocks_per_sm = 0;    // resident blocks per SM; 0 when the kernel cannot run (see `infeasible`)
  int64_t waves = 0;
  int64_t stage_bytes = 0;  // shared memory of the loop's loads (one buffer): what software pipelining doubles
  int64_t stream_bytes = 0;  // of those, what the DRAM streams per block (targets::stream_share of each tile)
  int64_t stages = 1;       // buffers those loads get (targets::pipeline_stages, the lowering's rule)
  bool synchronous_loads = false;  // some loop load is not of whole 16-byte vectors: the loop is not pipelined
  bool preloaded = false;  // ... but all its iterations' tiles are loaded before it (targets::preload_fits)
  bool library = false;     // a predefined op, priced as a library kernel (its loads always pipelined)
  bool loads_in_registers = false;  // the loop's loads go straight to registers, all iterations' at once (a combine
                                    // folding in registers): no buffers, one round trip
  // Traffic and work, totals over the kernel.
  double dram_read_bytes = 0;
  double dram_write_bytes = 0;
  double l2_reread_bytes = 0;  // re-reads of replicated tiles served by L2 instead of DRAM
  double line_bytes = 0;       // bytes of the whole L2 lines the loaded rows touch (target l2_line_bytes)
  double partial_line_bytes = 0;  // of those, the bytes beyond the rows' own: lines requested for part of them
  double engine_bytes = 0;       // of the loads, those the copy engine can move when the loop is pipelined ([async]
                                 // tma, targets::engine_takes_rows), and
  double engine_line_bytes = 0;  // the whole L2 lines their rows touch: requested by the engine, not by the warps
  double smem_fill_bytes = 0;  // bytes loaded into shared memory per block (all its iterations)
  double tensor_flops = 0;     // executed on matrix instructions, padded to their shapes
  double vector_flops = 0;
  int64_t barriers_per_block = 0;
  int64_t row_reductions_per_block = 0;  // reductions of register rows (warp shuffles), every iteration's counted
  // Elements a thread handles in the statement passes of one block's chain: per barrier level, the largest tile
  // computed there over the block's threads, summed over the levels of every iteration (block ops only).
  double pass_elements_per_block = 0;
  // Time, microseconds. time_us = waves' throughput time + barrier and load latency + launch.
  double memory_us = 0;   // DRAM, L2 and shared-memory fill: the slowest, summed over waves
  double compute_us = 0;  // tensor + vector on the busiest SM, summed over waves
  double stream_us = 0;   // the warps' stream limit (warp_stream_gbps, whole L2 lines), summed over waves: each
                          // wave's throughput time is at least its share
  double barrier_us = 0;
  double latency_us = 0;  // waiting for loads: each iteration of an unpipelined loop, the prologue of a pipelined one
  double launch_us = 0;
  double time_us = 0;
  std::string infeasible;  // why the kernel cannot launch on this target; empty when it can
};

struct Cost {
  std::string target;
  std::vector<KernelCost> kernels;
  double total_us = 0;  // infinity when a kernel is infeasible
  bool feasible() const;
  // The per-kernel breakdown, one block of lines per kernel; stable text for golden tests.
  std::string str() const;
};

// Estimates `mugraph` (a kernel graph) on `t`. `aliases`: which of its inputs view another's memory (the search's
// transposed inputs, ir::InputAliases); a block reading one memory twice loads it once (ir::equal_iters).
Cost estimate(const ir::Graph& mugraph, const targets::Target& t, std::span<const ir::InputAlias> aliases = {});

// The cost of one kernel op `n` of `mugraph` where it stands: what estimate() adds up for it.
KernelCost estimate_kernel(const ir::Graph& mugraph, const ir::Node& n, const targets::Target& t,
                           std::span<const ir::InputAlias> aliases = {});

// All a kernel's cost reads of the graph around it (besides its own body and attributes): each of its operands'
// type, the op that produced it (a spec input streams differently from a previous kernel's result) and which
// operands view one memory (ir::operand_views). A memo of kernel costs keyed by the body, the attributes and this
// hash of the kernel's operands is exact.
uint64_t kernel_context_hash(const ir::Graph& mugraph, std::span<const ir::TensorId> operands,
                             std::span<const ir::InputAlias> aliases = {});

}  // namespace morgana::search
