#include "search/gen_terms.h"

#include "ir/diagnostic.h"

namespace morgana::search::gen {

Terms::Terms(const Generator::Shared& shared, GenStats& task_stats, const std::atomic<bool>& stop)
    : sh(shared), stats(task_stats), stop_(stop) {}

Terms::~Terms() {
  for (const auto& [r, n] : pruned_) stats.pruned[r] += n;
}

bool Terms::drop(Pruned rule) {
  if (rule == nullptr || *rule == '\0') return false;
  for (auto& [r, n] : pruned_)
    if (r == rule) {
      ++n;
      return false;
    }
  pruned_.emplace_back(rule, 1);
  return false;
}

bool Terms::exp_of_is_subexpr(ir::ExprId e) {
  return sh.oracle->is_subexpr(arena, arena.unary(ir::ExprKind::Exp, e), classes_);
}

void Terms::check_step(int operand_dist, ir::ExprId result) const {
#ifndef NDEBUG
  if (!sh.options.abstract_pruning || class_of(result) == UINT32_MAX) return;
  MG_CHECK(operand_dist <= distance(result) + 1,
           "generator: an op moved a value more than one step towards the spec (" + arena.str(result) + ")");
#else
  (void)operand_dist;
  (void)result;
#endif
}

bool Terms::shift_ok(OpCode op, bool a_shift, ir::ExprId a_expr, bool b_shift, bool a_shifted) {
  Pruned r = shift_rule(op, a_shift, b_shift, a_shifted, sh.safe_exp, [&] { return exp_of_is_subexpr(a_expr); });
  return r == nullptr || drop(r);
}

ir::ExprId Terms::append_checked(ir::Graph& g, OpCode op, std::span<const TensorId> operands, const ir::Attrs& a,
                                 std::span<const ir::ExprId> ex, std::span<const ir::ExprId> operand_exprs) {
  size_t before = g.nodes().size();
  try {
    g.add1(op, operands, a);
  } catch (const UserError&) {
    drop(prune::shape);
    return ir::kNoExpr;
  }
  ir::ExprId e = ir::abstract_node(g, g.node(static_cast<ir::NodeId>(before)), 0, ex, operand_exprs, arena);
  if (!subexpr(e)) {
    g.truncate(before);
    drop(prune::abstract);
    return ir::kNoExpr;
  }
  return e;
}

}  // namespace morgana::search::gen
