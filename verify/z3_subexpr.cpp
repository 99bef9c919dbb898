// Z3 encoding of the sub-expression question (see z3_subexpr.h). Each axiom of search/subexpr_oracle.cpp appears
// here once, as a quantified formula whose triggers are its left and right sides, so that Z3's E-matching
// plays the role of the e-graph's rule application and Z3's congruence closure the role of its rebuild. Z3
// answers "unsat" when the query is derivable and "unknown (incomplete quantifiers)" when E-matching
// saturates without deriving it.
#include "verify/z3_subexpr.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <vector>

#include "ir/diagnostic.h"

namespace morgana::verify {

using ir::ExprArena;
using ir::ExprId;
using ir::ExprKind;
using ir::ExprNode;

namespace {

// Sizes beyond which split axioms are not generated (products of pairs of sizes are added to the universe).
constexpr int64_t kMaxSize = int64_t{1} << 40;

}  // namespace

struct Z3SubexprChecker::Impl {
  Impl(const ExprArena& a, unsigned timeout_ms)
      : arena(a),
        ctx(),
        E(ctx.uninterpreted_sort("Expr")),
        I(ctx.int_sort()),
        B(ctx.bool_sort()),
        var(ctx.function("var", I, E)),
        one(ctx.constant("one", E)),
        shift(ctx.constant("shift", E)),
        add(ctx.function("add", E, E, E)),
        mul(ctx.function("mul", E, E, E)),
        div(ctx.function("div", E, E, E)),
        other(ctx.function("other", I, E, E)),
        sum(ctx.function("sum", I, E, E)),
        rms(ctx.function("rms", I, E, E)),
        R(ctx.function("R", E, B)),
        Inv(ctx.function("Inv", I, E, B)),
        solver(ctx) {
    for (const char* name : {"exp", "sqrt", "silu", "gelu", "relu"})
      unary.push_back(ctx.function(name, E, E));
    z3::params p(ctx);
    p.set("mbqi", false);  // E-matching only: "unknown" then means the instantiation saturated
    p.set("timeout", timeout_ms);
    solver.set(p);
    axioms();
  }

  z3::expr forall(std::vector<z3::expr> vars, std::vector<std::vector<z3::expr>> triggers, z3::expr body) {
    std::vector<Z3_app> bound;
    for (const z3::expr& v : vars) bound.push_back(Z3_to_app(ctx, v));
    std::vector<Z3_pattern> pats;
    for (const auto& t : triggers) {
      std::vector<Z3_ast> terms(t.begin(), t.end());
      pats.push_back(Z3_mk_pattern(ctx, static_cast<unsigned>(terms.size()), terms.data()));
    }
    Z3_ast q = Z3_mk_forall_const(ctx, 0, static_cast<unsigned>(bound.size()), bound.data(),
                                  static_cast<unsigned>(pats.size()), pats.data(), body);
    ctx.check_error();
    return z3::expr(ctx, q);
  }

  z3::expr num(int64_t v) { return ctx.int_val(v); }

  // An equation used in both directions: triggers on either side.
  void equation(std::vector<z3::expr> vars, const z3::expr& lhs, const z3::expr& rhs) {
    solver.add(forall(vars, {{lhs}, {rhs}}, lhs == rhs));
  }

  void axioms() {
    z3::expr x = ctx.constant("x", E), y = ctx.constant("y", E), z = ctx.constant("z", E);
    z3::expr j = ctx.int_const("j"), k = ctx.int_const("k");
    // A_eq
    solver.add(forall({x, y}, {{add(x, y)}}, add(x, y) == add(y, x)));
    solver.add(forall({x, y}, {{mul(x, y)}}, mul(x, y) == mul(y, x)));
    equation({x, y, z}, add(add(x, y), z), add(x, add(y, z)));
    equation({x, y, z}, mul(mul(x, y), z), mul(x, mul(y, z)));
    equation({x, y, z}, mul(add(x, y), z), add(mul(x, z), mul(y, z)));
    equation({x, y, z}, add(div(x, z), div(y, z)), div(add(x, y), z));
    equation({x, y, z}, mul(x, div(y, z)), div(mul(x, y), z));
    equation({x, y, z}, div(div(x, y), z), div(x, mul(y, z)));
    // One is the unit of Mul (x/z = x·(One/z) is the instance y = One of the rule above, with Mul(x, One) =
    // x).
    solver.add(forall({x}, {{mul(x, one)}}, mul(x, one) == x));
    solver.add(forall({x}, {{div(x, one)}}, div(x, one) == x));
    solver.add(forall({x, z}, {{div(x, z)}}, div(x, z) == mul(x, div(one, z))));
    solver.add(forall({x}, {{sum(num(1), x)}}, sum(num(1), x) == x));
    solver.add(forall({j, k, x}, {{sum(j, sum(k, x))}}, sum(j, sum(k, x)) == sum(j * k, x)));
    equation({k, x, y}, sum(k, add(x, y)), add(sum(k, x), sum(k, y)));
    for (auto [lhs, rhs] :
         {std::pair{sum(k, mul(x, y)), mul(sum(k, x), y)}, std::pair{sum(k, div(x, y)), div(sum(k, x), y)}})
      solver.add(forall({k, x, y}, {{lhs}, {rhs}}, z3::implies(Inv(k, y), lhs == rhs)));
    equation({k, x}, rms(k, x), unary[1](sum(k, mul(x, x))));
    // A_sub: R is closed downwards over every child.
    for (const z3::func_decl& f : {add, mul, div})
      solver.add(forall({x, y}, {{f(x, y)}}, z3::implies(R(f(x, y)), R(x) && R(y))));
    for (const z3::func_decl& f : unary) solver.add(forall({x}, {{f(x)}}, z3::implies(R(f(x)), R(x))));
    for (const z3::func_decl& f : {sum, rms, other})
      solver.add(forall({k, x}, {{f(k, x)}}, z3::implies(R(f(k, x)), R(x))));
  }

  // Inv(k, ·) for one reduction size of the target: One and Shift are invariant, and Add, Mul, Div, Sqrt of
  // invariant terms are.
  void invariance_rules(int64_t size) {
    z3::expr x = ctx.constant("x", E), y = ctx.constant("y", E), k = num(size);
    solver.add(Inv(k, one));
    solver.add(Inv(k, shift));
    for (const z3::func_decl& f : {add, mul, div})
      solver.add(forall({x, y}, {{f(x, y)}}, z3::implies(Inv(k, x) && Inv(k, y), Inv(k, f(x, y)))));
    solver.add(forall({x}, {{unary[1](x)}}, z3::implies(Inv(k, x), Inv(k, unary[1](x)))));
  }

  // Split axioms Sum(n, x) = Sum(n/d, Sum(d, x)) for every size n of the universe and divisor d: the universe
  // holds the sizes seen so far in targets and queries, their pairwise products (what merging nested sums can
  // make) and all their divisors.
  void add_sizes(const std::set<int64_t>& seen_sizes) {
    std::set<int64_t> u;
    for (int64_t a : seen_sizes)
      for (int64_t b : seen_sizes) {
        u.insert(a);
        if (a <= kMaxSize / b) u.insert(a * b);
      }
    z3::expr x = ctx.constant("x", E);
    for (int64_t n : u)
      for (int64_t d = 2; d * d <= n; ++d) {
        if (n % d) continue;
        for (int64_t m : {d, n / d}) {
          if (!split_done.insert({n, m}).second) continue;
          solver.add(forall({x}, {{sum(num(n), x)}}, sum(num(n), x) == sum(num(n / m), sum(num(m), x))));
        }
      }
  }

  void collect_sizes(ExprId e, std::set<int64_t>& out) {
    const ExprNode& n = arena.node(e);
    if (n.kind == ExprKind::Sum || n.kind == ExprKind::Rms) out.insert(n.payload);
    if (n.a != ir::kNoExpr) collect_sizes(n.a, out);
    if (n.b != ir::kNoExpr) collect_sizes(n.b, out);
  }

  void collect_reductions(ExprId e, std::set<std::pair<int64_t, ExprId>>& out) {
    const ExprNode& n = arena.node(e);
    if (n.kind == ExprKind::Sum || n.kind == ExprKind::Rms) out.insert({n.payload, e});
    if (n.a != ir::kNoExpr) collect_reductions(n.a, out);
    if (n.b != ir::kNoExpr) collect_reductions(n.b, out);
  }

  z3::expr term(ExprId e) {
    const ExprNode& n = arena.node(e);
    switch (n.kind) {
      case ExprKind::Var:
        return var(num(n.payload));
      case ExprKind::One:
        return one;
      case ExprKind::Shift:
        return shift;
      case ExprKind::Add:
        return add(term(n.a), term(n.b));
      case ExprKind::Mul:
        return mul(term(n.a), term(n.b));
      case ExprKind::Div:
        return div(term(n.a), term(n.b));
      case ExprKind::Exp:
        return unary[0](term(n.a));
      case ExprKind::Sqrt:
        return unary[1](term(n.a));
      case ExprKind::Silu:
        return unary[2](term(n.a));
      case ExprKind::Gelu:
        return unary[3](term(n.a));
      case ExprKind::Relu:
        return unary[4](term(n.a));
      case ExprKind::Other:
        return other(num(n.payload), term(n.a));
      case ExprKind::Sum:
        return sum(num(n.payload), term(n.a));
      case ExprKind::Rms:
        return rms(num(n.payload), term(n.a));
      case ExprKind::Cat:
        break;
    }
    MG_CHECK(false, "a Cat below the top of an expression");
    return one;
  }

  const ExprArena& arena;
  z3::context ctx;
  z3::sort E, I, B;
  z3::func_decl var;
  z3::expr one, shift;
  z3::func_decl add, mul, div, other, sum, rms, R, Inv;
  std::vector<z3::func_decl> unary;  // exp, sqrt, silu, gelu, relu
  z3::solver solver;
  std::set<int64_t> sizes;
  std::set<std::pair<int64_t, int64_t>> split_done;
};

Z3SubexprChecker::Z3SubexprChecker(const ExprArena& arena, std::span<const ExprId> targets,
                                   unsigned timeout_ms)
    : impl_(std::make_unique<Impl>(arena, timeout_ms)) {
  Impl& m = *impl_;
  std::vector<ExprId> parts;
  auto split = [&](auto&& self, ExprId e) -> void {
    if (arena.node(e).kind == ExprKind::Cat) {
      self(self, arena.node(e).a);
      self(self, arena.node(e).b);
    } else {
      parts.push_back(e);
    }
  };
  for (ExprId t : targets) split(split, t);
  std::set<std::pair<int64_t, ExprId>> reductions;
  for (ExprId t : parts) {
    m.solver.add(m.R(m.term(t)));
    m.collect_sizes(t, m.sizes);
    m.collect_reductions(t, reductions);
  }
  std::set<int64_t> inv_sizes;
  for (const auto& [size, e] : reductions) {
    m.solver.add(m.Inv(m.num(size), m.term(e)));
    inv_sizes.insert(size);
  }
  for (int64_t s : inv_sizes) m.invariance_rules(s);
  m.add_sizes(m.sizes);
}

Z3SubexprChecker::~Z3SubexprChecker() = default;

Z3SubexprAnswer Z3SubexprChecker::is_subexpr(ExprId e) {
  Impl& m = *impl_;
  const ExprNode& n = m.arena.node(e);
  if (n.kind == ExprKind::Shift) return {true, false, "convention", 0};
  if (n.kind == ExprKind::Cat) {
    Z3SubexprAnswer a = is_subexpr(n.a);
    if (!a.proved) return a;
    Z3SubexprAnswer b = is_subexpr(n.b);
    b.ms += a.ms;
    return b;
  }
  size_t before = m.sizes.size();
  m.collect_sizes(e, m.sizes);
  if (m.sizes.size() != before) m.add_sizes(m.sizes);
  auto t0 = std::chrono::steady_clock::now();
  m.solver.push();
  m.solver.add(!m.R(m.term(e)));
  z3::check_result r = m.solver.check();
  Z3SubexprAnswer a;
  a.proved = r == z3::unsat;
  if (r == z3::unsat) {
    a.z3_result = "unsat";
  } else if (r == z3::sat) {
    a.z3_result = "sat";
  } else {
    std::string why = m.solver.reason_unknown();
    a.z3_result = "unknown " + (why.starts_with("(") ? why : "(" + why + ")");
    a.timed_out = why.find("incomplete quantifiers") == std::string::npos;
  }
  m.solver.pop();
  a.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

}  // namespace morgana::verify
