// The search's fallback when it finds no complete fused candidate (docs/search.md, "Partial fusion"): the spec's ops
// in their order, cut into windows of consecutive ops, each window searched as a spec of its own (its operands from
// outside as inputs, its values used after it as outputs); the cheapest cover of the ops by windows, stitched into
// one kernel graph, becomes a candidate like any other and is verified against the whole spec. What a window search
// cannot fuse comes back as its ops as written, so every stretch of ops has a window with an answer; the spec as
// written stays a candidate beside the stitch (search.cpp), so the answer never costs more than it by the model.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/block_rules.h"
#include "ir/graph.h"
#include "targets/target.h"

namespace morgana::search {

// The compute ops of a kernel graph (no inputs, no outputs), in node order (a topological order).
std::vector<ir::NodeId> compute_ops(const ir::Graph& g);

// What ops [first, last) of `ops` (compute_ops(spec)) read from before them (in first-use order) and leave to later
// ops or the spec's outputs (in node order): spec tensors.
struct WindowInterface {
  std::vector<ir::TensorId> inputs, outputs;
};
WindowInterface window_interface(const ir::Graph& spec, const std::vector<ir::NodeId>& ops, size_t first,
                                 size_t last);
// Those ops as a spec of their own, with window_interface's inputs and outputs in order and the spec's names.
ir::Graph window_spec(const ir::Graph& spec, const std::vector<ir::NodeId>& ops, size_t first, size_t last);

// Appends program `from`'s ops to `into`, its inputs bound to `args`; returns the tensors of `from`'s outputs.
std::vector<ir::TensorId> inline_program(ir::Graph& into, const ir::Graph& from, std::span<const ir::TensorId> args);

struct PartialFusion {
  ir::Graph graph;     // the stitched program
  double cost_us = 0;  // search::estimate of it
  std::string summary; // which windows were fused into how many kernels, for the report
};

// A window search: the best verified μGraph of `window` (whose inputs alias as `aliases` says) within
// `time_limit_s`, or none.
using WindowSearch = std::function<std::optional<ir::Graph>(const ir::Graph& window, const ir::InputAliases& aliases,
                                                            double time_limit_s)>;

// The cheapest cover of the spec's ops by windows of at most `max_window` ops (fewer than the spec has), each window
// searched once with `search_window`, each with an equal share of what is left of `time_limit_s`; none when the spec has fewer than two ops or
// some stretch of ops has no window with an answer.
// `aliases`: which of the spec's inputs view another's memory (ir::InputAliases); each window's inputs alias alike
// where both ends of an alias are its inputs.
std::optional<PartialFusion> partial_fusion(const ir::Graph& spec, const targets::Target& target, size_t max_window,
                                            double time_limit_s, const WindowSearch& search_window,
                                            const ir::InputAliases& aliases = {});

}  // namespace morgana::search
