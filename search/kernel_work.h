// Internal to the cost model: what one kernel does (launch shape, traffic, FLOPs, barriers), before any
// timing. Block ops are read from their block graphs; predefined kernel-level ops get the default tiling
// described in docs/cost-model.md. cost_model.cpp turns the result into time.
#pragma once

#include <span>

#include "ir/graph.h"
#include "search/cost_model.h"
#include "targets/target.h"

namespace morgana::search::detail {

// A kernel's launch shape, traffic and work (KernelCost without occupancy and time), plus the seconds its
// tensor FLOPs take at the device's achievable tensor rate (the rate depends on each matmul's dtype).
struct Work {
  KernelCost k;
  double tensor_s = 0;
  // Device-wide seconds of the vector FLOPs: passes over shared memory (and the scalar matmul routine) at the
  // target's vector_efficiency, statements on rows in registers at the vector peak.
  double vector_s = 0;
  int64_t row_register_peak = 0;  // registers a thread holds of row tiles at the busiest statement (block ops)
};

Work block_work(const ir::Graph& g, const ir::Node& n, const targets::Target& t,
                std::span<const ir::InputAlias> aliases = {});
Work predefined_work(const ir::Graph& g, const ir::Node& n, const targets::Target& t);

// One application of `op`: tensor-core FLOPs (padded to the chosen instruction's shape) and the seconds they
// take device-wide, or vector FLOPs, whichever path is faster.
struct Flops {
  double tensor = 0;
  double tensor_s = 0;
  double vector = 0;
};
Flops op_flops(ir::OpCode op, std::span<const ir::TensorType> in, std::span<const ir::TensorType> out,
               const targets::Target& t);

// Achievable rates in FLOP/s: the tensor peak for `dtype` times tensor_efficiency (0 when the target records
// none), and the f32 vector peak.
double tensor_rate(const targets::Target& t, ir::DType dtype);
double vector_rate(const targets::Target& t);

}  // namespace morgana::search::detail
