#include "verify/exponent_use.h"

namespace morgana::verify {

namespace {

using ir::FieldSem;

// Does operand `k` of an op with field semantics `f` need its v part, given whether the result's is needed?
bool operand_needs(FieldSem f, size_t k, bool result_needs) {
  switch (f) {
    case FieldSem::Exp:
    case FieldSem::Uninterpreted:
    case FieldSem::Max:
    case FieldSem::Composite:
      return true;
    case FieldSem::RescaleSum:
      return k == 1 || result_needs;  // exp(m_t - M) reads the max operand's v part
    default:
      return result_needs;
  }
}

// Marks the operands of every node of `g` from the needs of its results, last node first. `block_op` handles a
// `block` node (kernel level) given its results' needs.
template <class BlockOp>
void propagate(const ir::Graph& g, std::vector<char>& need, BlockOp&& block_op) {
  for (size_t i = g.nodes().size(); i-- > 0;) {
    const ir::Node& n = g.node(static_cast<ir::NodeId>(i));
    auto ops = g.operands(n);
    if (n.op == ir::OpCode::block) {
      block_op(n);
      continue;
    }
    bool result_needs = false;
    for (int r = 0; r < n.num_results; ++r) result_needs = result_needs || need[g.result(n, r)];
    FieldSem f = ir::op_info(n.op).field;
    for (size_t k = 0; k < ops.size(); ++k)
      if (operand_needs(f, k, result_needs)) need[ops[k]] = 1;
  }
}

}  // namespace

ExponentUse exponent_use(const ir::Graph& g) {
  ExponentUse use;
  use.kernel.assign(g.num_tensors(), 0);
  use.body.resize(g.bodies().size());
  propagate(g, use.kernel, [&](const ir::Node& n) {
    const ir::Graph& body = g.body(n);
    std::vector<char>& need = use.body[n.attrs.index];
    need.assign(body.num_tensors(), 0);
    // A save's value is needed as much as the block result it becomes.
    int result = 0;
    for (const ir::Node& s : body.nodes())
      if (s.op == ir::OpCode::save) need[body.result(s)] = use.kernel[g.result(n, result++)];
    propagate(body, need, [](const ir::Node&) {});
    // An iterator reads a block operand: that operand is needed as much as any of its iterators.
    auto operands = g.operands(n);
    for (const ir::Node& it : body.nodes())
      if (it.op == ir::OpCode::iter && need[body.result(it)]) use.kernel[operands[it.attrs.index]] = 1;
  });
  return use;
}

}  // namespace morgana::verify
