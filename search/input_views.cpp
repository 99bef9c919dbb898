#include "search/input_views.h"

#include <algorithm>

#include "search/inliner.h"

namespace morgana::search {

namespace {

bool transposes_input(const ir::Graph& g, const ir::Node& n) {
  return n.op == ir::OpCode::transpose && g.node(g.tensor(g.operands(n)[0]).producer).op == ir::OpCode::input;
}

}  // namespace

std::optional<InputViews> view_inputs(const ir::Graph& spec) {
  InputViews v;
  for (ir::NodeId id = 0; id < spec.nodes().size(); ++id)
    if (transposes_input(spec, spec.node(id))) v.transposes.push_back(id);
  if (v.transposes.empty()) return std::nullopt;
  v.spec.set_name(spec.name());
  Inliner in(v.spec, spec, true);
  std::vector<char> read(spec.num_tensors(), 0);
  for (const ir::Node& n : spec.nodes())
    if (!transposes_input(spec, n))
      for (ir::TensorId o : spec.operands(n)) read[o] = 1;
  for (ir::TensorId t : spec.inputs())
    if (read[t]) {
      v.aliases.push_back({static_cast<uint32_t>(v.kept.size()), false});
      v.kept.push_back(t);
      in.bind(t, v.spec.add_input(spec.type(t), spec.name(t)));
    }
  for (ir::NodeId id : v.transposes) {
    const ir::TensorId t = spec.result(spec.node(id));
    const auto source = std::find(v.kept.begin(), v.kept.end(), spec.operands(spec.node(id))[0]);
    v.aliases.push_back(source != v.kept.end() ? ir::InputAlias{static_cast<uint32_t>(source - v.kept.begin()), true}
                                               : ir::InputAlias{static_cast<uint32_t>(v.aliases.size()), false});
    in.bind(t, v.spec.add_input(spec.type(t), spec.name(t)));
  }
  for (const ir::Node& n : spec.nodes())
    if (n.op != ir::OpCode::input && n.op != ir::OpCode::output && !transposes_input(spec, n)) in.copy(n);
  for (ir::TensorId o : spec.outputs()) v.spec.add_output(in.at(o));
  return v;
}

ir::Graph restore_views(const ir::Graph& candidate, const ir::Graph& spec, const InputViews& views) {
  ir::Graph g;
  g.set_name(candidate.name());
  g.set_for_targets(candidate.for_targets());
  Inliner in(g, candidate, true);
  std::vector<ir::TensorId> input_at(spec.num_tensors(), 0);
  const auto& inputs = candidate.inputs();
  for (ir::TensorId t : spec.inputs()) input_at[t] = g.add_input(spec.type(t), spec.name(t));
  for (size_t i = 0; i < views.kept.size(); ++i) in.bind(inputs[i], input_at[views.kept[i]]);
  for (size_t j = 0; j < views.transposes.size(); ++j) {
    const ir::Node& n = spec.node(views.transposes[j]);
    const ir::TensorId t = g.add1(ir::OpCode::transpose, {input_at[spec.operands(n)[0]]}, n.attrs);
    g.set_name(t, spec.name(spec.result(n)));
    in.bind(inputs[views.kept.size() + j], t);
  }
  for (const ir::Node& n : candidate.nodes())
    if (n.op != ir::OpCode::input && n.op != ir::OpCode::output) in.copy(n);
  for (ir::TensorId o : candidate.outputs()) g.add_output(in.at(o));
  return g;
}

}  // namespace morgana::search
