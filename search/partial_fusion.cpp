#include "search/partial_fusion.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "search/cost_model.h"
#include "search/inliner.h"

namespace morgana::search {

namespace {

bool is_compute(ir::OpCode op) { return op != ir::OpCode::input && op != ir::OpCode::output; }

// The aliases of a window's inputs: a spec input viewing another spec input's memory keeps that alias where the other
// is an input of the window too.
ir::InputAliases window_aliases(const ir::Graph& spec, const ir::InputAliases& aliases, const WindowInterface& io) {
  ir::InputAliases w;
  if (aliases.empty()) return w;
  auto spec_input = [&](ir::TensorId t) -> std::optional<uint32_t> {
    const ir::Node& producer = spec.node(spec.tensor(t).producer);
    if (producer.op != ir::OpCode::input) return std::nullopt;
    return producer.attrs.index;
  };
  for (size_t i = 0; i < io.inputs.size(); ++i) {
    ir::InputAlias a{static_cast<uint32_t>(i), false};
    if (const std::optional<uint32_t> p = spec_input(io.inputs[i]); p && *p < aliases.size())
      for (size_t j = 0; j < io.inputs.size(); ++j)
        if (spec_input(io.inputs[j]) == aliases[*p].input) a = {static_cast<uint32_t>(j), aliases[*p].transposed};
    w.push_back(a);
  }
  return w;
}

}  // namespace

std::vector<ir::NodeId> compute_ops(const ir::Graph& g) {
  std::vector<ir::NodeId> ops;
  for (ir::NodeId id = 0; id < g.nodes().size(); ++id)
    if (is_compute(g.node(id).op)) ops.push_back(id);
  return ops;
}

WindowInterface window_interface(const ir::Graph& spec, const std::vector<ir::NodeId>& ops, size_t first,
                                 size_t last) {
  WindowInterface io;
  std::vector<char> inside(spec.num_tensors(), 0), seen(spec.num_tensors(), 0), read_after(spec.num_tensors(), 0);
  for (size_t i = first; i < last; ++i) {
    const ir::Node& n = spec.node(ops[i]);
    for (ir::TensorId o : spec.operands(n))
      if (!inside[o] && !seen[o]) {
        seen[o] = 1;
        io.inputs.push_back(o);
      }
    for (int r = 0; r < n.num_results; ++r) inside[spec.result(n, r)] = 1;
  }
  for (size_t i = last; i < ops.size(); ++i)
    for (ir::TensorId o : spec.operands(spec.node(ops[i]))) read_after[o] = 1;
  for (ir::TensorId o : spec.outputs()) read_after[o] = 1;
  for (size_t i = first; i < last; ++i) {
    const ir::Node& n = spec.node(ops[i]);
    for (int r = 0; r < n.num_results; ++r)
      if (read_after[spec.result(n, r)]) io.outputs.push_back(spec.result(n, r));
  }
  return io;
}

ir::Graph window_spec(const ir::Graph& spec, const std::vector<ir::NodeId>& ops, size_t first, size_t last) {
  const WindowInterface io = window_interface(spec, ops, first, last);
  ir::Graph w;
  w.set_name(spec.name());
  Inliner in(w, spec, true);
  for (ir::TensorId t : io.inputs) in.bind(t, w.add_input(spec.type(t), spec.name(t)));
  for (size_t i = first; i < last; ++i) in.copy(spec.node(ops[i]));
  for (ir::TensorId t : io.outputs) w.add_output(in.at(t));
  return w;
}

std::vector<ir::TensorId> inline_program(ir::Graph& into, const ir::Graph& from, std::span<const ir::TensorId> args) {
  MG_CHECK(args.size() == from.inputs().size(), "inline_program: one argument per input");
  Inliner in(into, from, false);
  for (size_t i = 0; i < args.size(); ++i) in.bind(from.inputs()[i], args[i]);
  for (const ir::Node& n : from.nodes())
    if (is_compute(n.op)) in.copy(n);
  std::vector<ir::TensorId> outs;
  for (ir::TensorId o : from.outputs()) outs.push_back(in.at(o));
  return outs;
}

std::optional<PartialFusion> partial_fusion(const ir::Graph& spec, const targets::Target& target, size_t max_window,
                                            double time_limit_s, const WindowSearch& search_window,
                                            const ir::InputAliases& aliases) {
  const std::vector<ir::NodeId> ops = compute_ops(spec);
  const size_t n = ops.size();
  if (n < 2) return std::nullopt;
  max_window = std::min(max_window, n - 1);
  // Every window [first, last) of at most max_window ops, searched once, narrowest first: a window of one or two ops
  // is searched in milliseconds to seconds, and what the narrow ones leave goes to the wide ones, whose enumerations
  // are the longest (multi-head latent attention's core, four ops, takes seconds where the time allows it).
  // Each window's best and its cost (priced with the window's aliases), or no graph.
  struct WindowBest {
    std::optional<ir::Graph> graph;
    double cost_us = INFINITY;
  };
  std::map<std::pair<size_t, size_t>, WindowBest> best;
  size_t windows = 0;
  for (size_t first = 0; first < n; ++first) windows += std::min(max_window, n - first);
  // Each window gets an equal share of the time left, so what a quick window leaves goes to the windows after it. A
  // window search checks its best whatever its share (nothing unverified comes back), so one started with less time
  // left than the last one took would overrun the limit: past width 1 (which always gives a cover) such windows are
  // left out.
  const auto start = std::chrono::steady_clock::now();
  size_t searched = 0;
  double last_took = 0;
  for (size_t width = 1; width <= max_window; ++width)
    for (size_t first = 0; first + width <= n; ++first) {
      const double used = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double left = std::max(0.0, time_limit_s - used);
      const double each_s = left / static_cast<double>(windows - searched++);
      if (width > 1 && left < last_took) continue;
      const ir::InputAliases w = window_aliases(spec, aliases, window_interface(spec, ops, first, first + width));
      WindowBest& b = best[{first, first + width}];
      b.graph = search_window(window_spec(spec, ops, first, first + width), w, each_s);
      if (b.graph) {
        const Cost c = estimate(*b.graph, target, w);
        if (c.feasible()) b.cost_us = c.total_us;
      }
      last_took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - used;
    }
  // The cheapest cover: cost[i] of ops [0, i), a window ending at i taken after the cover of its start.
  std::vector<double> cost(n + 1, INFINITY);
  std::vector<size_t> from(n + 1, 0);
  cost[0] = 0;
  for (size_t last = 1; last <= n; ++last)
    for (size_t first = last >= max_window ? last - max_window : 0; first < last; ++first) {
      const double c = best[{first, last}].cost_us;  // infinite without a feasible answer
      if (cost[first] + c < cost[last]) {
        cost[last] = cost[first] + c;
        from[last] = first;
      }
    }
  if (!std::isfinite(cost[n])) return std::nullopt;
  std::vector<std::pair<size_t, size_t>> cover;
  for (size_t last = n; last > 0; last = from[last]) cover.insert(cover.begin(), {from[last], last});

  PartialFusion p;
  p.graph.set_name(spec.name());
  p.graph.set_for_targets(spec.for_targets());
  std::vector<ir::TensorId> at(spec.num_tensors(), 0);  // every tensor a window reads is bound before it
  for (ir::TensorId i : spec.inputs()) at[i] = p.graph.add_input(spec.type(i), spec.name(i));
  for (auto [first, last] : cover) {
    const WindowInterface io = window_interface(spec, ops, first, last);
    const ir::Graph& w = *best[{first, last}].graph;
    MG_CHECK(io.inputs.size() == w.inputs().size() && io.outputs.size() == w.outputs().size(),
             "partial_fusion: a window's best has another interface than its spec");
    std::vector<ir::TensorId> args;
    for (ir::TensorId t : io.inputs) args.push_back(at[t]);
    const std::vector<ir::TensorId> outs = inline_program(p.graph, w, args);
    for (size_t o = 0; o < outs.size(); ++o) at[io.outputs[o]] = outs[o];
    size_t kernels = 0;
    for (const ir::Node& k : w.nodes()) kernels += ir::launches_kernel(w, k);
    p.summary += std::string(p.summary.empty() ? "" : ", ") +
                 (last - first > 1 ? "ops " + std::to_string(first + 1) + "-" + std::to_string(last)
                                   : "op " + std::to_string(first + 1)) +
                 " in " + std::to_string(kernels) + (kernels == 1 ? " kernel" : " kernels");
  }
  for (ir::TensorId o : spec.outputs()) p.graph.add_output(at[o]);
  for (size_t o = 0; o < spec.outputs().size(); ++o)
    if (!spec.name(spec.outputs()[o]).empty()) p.graph.set_name(p.graph.outputs()[o], spec.name(spec.outputs()[o]));
  const Cost total = estimate(p.graph, target, aliases);
  if (!total.feasible()) return std::nullopt;
  p.cost_us = total.total_us;
  p.summary = "partial fusion of the spec's " + std::to_string(n) + " ops, windows searched apart: " + p.summary;
  return p;
}

}  // namespace morgana::search
