// The sub-expression question of search/subexpr_oracle.h asked of Z3, as an independent cross-check of the
// e-graph (built only when Meson finds Z3: MORGANA_HAVE_Z3). docs/abstract-expressions.md, "Z3 cross-check",
// describes the encoding: an uninterpreted sort of terms, one function per term kind, A_eq as quantified
// equations with E-matching patterns (both directions of each rule as triggers), A_sub as a predicate R ("is
// a sub-expression of a target") closed downwards over children, and the invariance side condition as a
// predicate Inv(k, y) seeded with the target's own reductions. A query e is proved when R(target) ∧ axioms ∧
// ¬R(e) is unsatisfiable. This is one solver call per query (milliseconds to seconds): a test oracle, never
// the search's.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "ir/abstract_expr.h"

namespace morgana::verify {

struct Z3SubexprAnswer {
  bool proved = false;     // Z3 showed e is a sub-expression (unsat)
  bool timed_out = false;  // neither proved nor saturated within the time limit ("unknown" for a reason other
                           // than incomplete quantifiers)
  std::string z3_result;   // "unsat", "sat", or "unknown (<reason>)"
  double ms = 0;
};

class Z3SubexprChecker {
 public:
  // `targets` as for search::SubexprOracle. The arena must outlive the checker.
  Z3SubexprChecker(const ir::ExprArena& arena, std::span<const ir::ExprId> targets,
                   unsigned timeout_ms = 10000);
  ~Z3SubexprChecker();
  Z3SubexprChecker(const Z3SubexprChecker&) = delete;
  Z3SubexprChecker& operator=(const Z3SubexprChecker&) = delete;

  // The same conventions as the oracle: Shift is always a sub-expression, a Cat when each part is.
  Z3SubexprAnswer is_subexpr(ir::ExprId e);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace morgana::verify
