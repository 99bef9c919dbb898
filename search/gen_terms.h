// What both levels of the generator's walk share within one task (private to the generator): the spec's
// analysis (Generator::Shared), the task's own term arena with its memo of e-classes, the questions asked of the
// spec's e-graph, and the counters of what the rules prune.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "ir/abstract_expr.h"
#include "search/axes.h"
#include "search/gen_rules.h"
#include "search/gen_state.h"
#include "search/generator.h"
#include "search/subexpr_oracle.h"

namespace morgana::search {

struct Generator::Shared {
  ir::Graph spec;
  targets::Target target;
  SearchOptions options;
  ir::InputAliases aliases;  // which spec inputs view another's memory: the cost model's business
  SpecAxes axes;
  ir::ExprArena arena;  // the spec's terms; the oracle's arena
  std::unique_ptr<SubexprOracle> oracle;
  std::vector<ir::ExprId> out_exprs;
  std::vector<Labels> out_labels;
  // Where the spec applies a constant: mul_scalar and add_scalar take (op, value) only on a value of the
  // e-class the spec applies it to (the spec's own scalar ops, and each rms_norm's 1/n and eps, which apply to
  // the sum of squares).
  struct ScalarUse {
    ir::OpCode op;
    double s;
    uint32_t cls;
  };
  std::vector<ScalarUse> scalar_uses;
  bool scaled_outputs = false;         // the spec has explicit scalar ops, so an output may end with one
  std::vector<uint16_t> reduced_axes;  // axes the spec sums, maximises or normalises over
  bool safe_exp = false;               // the spec's exps come from softmax: each exp must take a max-subtracted value
  std::vector<double> eps;             // rms_norm epsilons
  gen::JoinedAxes joints;  // where a concat may join two axes (gen_state.h); empty: the generator builds no concat
  int64_t max_blocks = 0;
  int64_t threads = 0;
  std::vector<gen::Task> tasks;
};

namespace gen {

class Terms {
 public:
  Terms(const Generator::Shared& sh, GenStats& stats, const std::atomic<bool>& stop);
  ~Terms();  // adds the counts to the task's stats
  Terms(const Terms&) = delete;
  Terms& operator=(const Terms&) = delete;

  const Generator::Shared& sh;
  GenStats& stats;
  ir::ExprArena arena;  // the task's terms

  bool stopped() const { return stop_.load(std::memory_order_relaxed); }
  // Counts a prefix `rule` dropped (nullptr and prune::unbuilt are not counted); returns false, so that a rule's
  // verdict can end a `bool` step: `return terms.drop(prune::axes);`.
  bool drop(Pruned rule);
  const SubexprOracle& oracle() const { return *sh.oracle; }

  // The spec's e-graph's answers about the task's terms, through the memo of their e-classes.
  uint32_t class_of(ir::ExprId e) const { return sh.oracle->class_of(arena, e, classes_); }
  bool equivalent(ir::ExprId e) const { return sh.oracle->is_equivalent(arena, e, classes_); }
  // Whether `e` is a sub-expression of the spec's outputs (always, with abstract pruning off).
  bool subexpr(ir::ExprId e) const {
    return !sh.options.abstract_pruning || sh.oracle->is_subexpr(arena, e, classes_);
  }
  bool exp_of_is_subexpr(ir::ExprId e);
  // The distance bound (SubexprOracle::distance): a value nothing has consumed yet must still become part of
  // an output, through at least its distance in ops. Off with abstract pruning, whose e-graph it reads.
  uint8_t distance(ir::ExprId e) const {
    return sh.options.abstract_pruning ? static_cast<uint8_t>(sh.oracle->distance(arena, e, classes_)) : 0;
  }
  uint8_t distance_of_class(uint32_t cls) const {
    return sh.options.abstract_pruning ? static_cast<uint8_t>(sh.oracle->distance_of_class(cls)) : 0;
  }
  // An op never brings a value more than one step closer (the oracle's distances are built so); checked in
  // debug builds, where the search tests run, because a violation would silently lose candidates.
  void check_step(int operand_dist, ir::ExprId result) const;

  // shift_rule (gen_rules.h) with the e-graph's answer, counted; true when the op is kept.
  bool shift_ok(OpCode op, bool a_shift, ir::ExprId a_expr, bool b_shift, bool a_shifted);
  // Appends `op` to `g` and returns its result's term; kNoExpr (counted, and the op removed again) when the shape
  // rule refuses it or the term is not a sub-expression of the spec's. `ex`: the terms of g's tensors so far.
  ir::ExprId append_checked(ir::Graph& g, OpCode op, std::span<const TensorId> operands, const ir::Attrs& a,
                            std::span<const ir::ExprId> ex, std::span<const ir::ExprId> operand_exprs);

  // Unary, reduce and norm ops on one tensor of type `t`: attributes from the spec's constants and the tensor's
  // dims. `t` and `l` are copies: `f` appends to the graph and tensor records they come from, which may move them.
  template <class F>
  void for_each_unary_like(const ir::TensorType t, const Labels l, ir::ExprId e, F&& f);

 private:
  const std::atomic<bool>& stop_;
  // Rules are string literals: counted by pointer here, turned into the stats' map once per task (~Terms).
  std::vector<std::pair<const char*, uint64_t>> pruned_;
  mutable SubexprOracle::TermClasses classes_;  // e-classes of arena's terms, by ExprId
};

template <class F>
void Terms::for_each_unary_like(const ir::TensorType t, const Labels l, ir::ExprId e, F&& f) {
  // The e-class decides which constants apply (Shared::scalar_uses); looked up once, and only when needed.
  uint32_t cls = UINT32_MAX - 1;
  for (const ir::OpInfo& info : ir::all_ops()) {
    OpCode op = static_cast<OpCode>(&info - ir::all_ops().data());
    if (info.kind == ir::OpKind::Unary) {
      if (info.attrs & ir::kAttrS) {
        if (cls == UINT32_MAX - 1) cls = class_of(e);
        for (const auto& u : sh.scalar_uses) {
          if (u.op != op || u.cls != cls) continue;
          ir::Attrs a;
          a.s = u.s;
          f(op, a);
        }
      } else {
        f(op, ir::Attrs{});
      }
    } else if (info.kind == ir::OpKind::Reduce || info.kind == ir::OpKind::Norm) {
      for (int d = 0; d < t.rank; ++d) {
        if (t.dim(d) == 1 || l.dims[static_cast<size_t>(d)].unit()) continue;
        ir::Attrs a;
        a.dim = d;
        if (info.kind == ir::OpKind::Norm) {
          for (double eps : sh.eps) {
            a.eps = eps;
            f(op, a);
          }
        } else {
          f(op, a);
        }
      }
    }
  }
}

}  // namespace gen
}  // namespace morgana::search
