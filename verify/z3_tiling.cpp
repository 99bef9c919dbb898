// Tiling proofs with Z3 (see z3_tiling.h). The index arithmetic is the interpreter's (verify/interpreter.h,
// tile_origin): along dim d, a tile's origin is the sum over grid dims g mapped to d of b_g · tile_d (times
// the loop count when the for-loop also walks d), plus t · tile_d for the for-loop's iteration t when fmap =
// d; the element touched is the origin plus the tile index.
#include "verify/z3_tiling.h"

#include <z3++.h>

#include <algorithm>

#include "ir/diagnostic.h"
#include "ir/printer.h"

namespace morgana::verify {

namespace {

// One side of the tiling: the element a (block, iteration, tile index) touches along each dim is
// sum_k coef_k · v_k + i_d, where the v_k are the grid coordinates mapped to d and the for-loop iteration
// when it walks d. A save has no iteration term.
struct Term {
  int64_t coef;
  int var;  // 0..2: grid coordinate x, y, z; 3: the for-loop iteration
};

struct Access {
  std::string what;  // "save 'y'", "iter 'x'"
  ir::TensorType tile, full;
  std::vector<std::vector<Term>> terms;  // per dim
  bool uses_loop = false;
};

class Prover {
 public:
  Prover(const BlockTiling& t, unsigned timeout_ms, TilingProof& out)
      : t_(t), timeout_(timeout_ms), out_(out) {}

  void run() {
    for (const SaveTiling& s : t_.saves) {
      Access a = save_access(s);
      at_most_once(a);
      covers(a, "writes every element of ", "is never written");
    }
    for (const IterTiling& it : t_.iters) {
      Access a = iter_access(it);
      if (!it.mask) in_bounds(a);
      covers(a, "reads every element of ", "is never read");
    }
  }

 private:
  using Vec = std::vector<z3::expr>;

  Access save_access(const SaveTiling& s) {
    Access a{"save '" + s.name + "'", s.tile, s.result, {}, false};
    for (int d = 0; d < s.tile.rank; ++d) {
      a.terms.emplace_back();
      for (int g = 0; g < ir::kGridDims; ++g)
        if (s.omap[static_cast<size_t>(g)] == d) a.terms.back().push_back({s.tile.dim(d), g});
    }
    return a;
  }

  Access iter_access(const IterTiling& it) {
    Access a{"iter '" + it.name + "'", it.tile, it.operand, {}, true};
    for (int d = 0; d < it.tile.rank; ++d) {
      a.terms.emplace_back();
      int64_t loop_parts = it.fmap == d ? t_.params.loop : 1;
      if (it.fmap == d) a.terms.back().push_back({it.tile.dim(d), 3});
      for (int g = 0; g < ir::kGridDims; ++g)
        if (it.imap[static_cast<size_t>(g)] == d) a.terms.back().push_back({it.tile.dim(d) * loop_parts, g});
    }
    return a;
  }

  Vec ints(const std::string& prefix, int n) {
    Vec v;
    for (int i = 0; i < n; ++i) v.push_back(ctx_.int_const((prefix + std::to_string(i)).c_str()));
    return v;
  }
  z3::expr num(int64_t v) { return ctx_.int_val(v); }
  int64_t range(int var) const {
    return var < ir::kGridDims ? t_.params.grid[static_cast<size_t>(var)] : t_.params.loop;
  }

  // Fresh variables for one (block, iteration, tile index): 3 grid coordinates and the iteration, then the
  // tile index, with their ranges asserted into `dom`.
  struct Point {
    Vec v, i;
  };
  Point point(const std::string& p, const Access& a, z3::expr& dom) {
    Point pt{ints(p + "b", ir::kGridDims + 1), ints(p + "i", a.tile.rank)};
    for (int k = 0; k <= ir::kGridDims; ++k)
      dom = dom && pt.v[static_cast<size_t>(k)] >= 0 && pt.v[static_cast<size_t>(k)] < num(range(k));
    for (int d = 0; d < a.tile.rank; ++d)
      dom = dom && pt.i[static_cast<size_t>(d)] >= 0 && pt.i[static_cast<size_t>(d)] < num(a.tile.dim(d));
    return pt;
  }
  Vec element(const Access& a, const Point& pt) {
    Vec e;
    for (int d = 0; d < a.tile.rank; ++d) {
      z3::expr x = pt.i[static_cast<size_t>(d)];
      for (const Term& t : a.terms[static_cast<size_t>(d)])
        x = x + num(t.coef) * pt.v[static_cast<size_t>(t.var)];
      e.push_back(x);
    }
    return e;
  }
  z3::expr inside(const Vec& e, const ir::TensorType& t) {
    z3::expr r = ctx_.bool_val(true);
    for (int d = 0; d < t.rank; ++d)
      r = r && e[static_cast<size_t>(d)] >= 0 && e[static_cast<size_t>(d)] < num(t.dim(d));
    return r;
  }

  z3::solver solver() {
    z3::solver s(ctx_);
    z3::params p(ctx_);
    p.set("timeout", timeout_);
    s.set(p);
    return s;
  }

  std::string values(const z3::model& m, const Vec& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + m.eval(v[i], true).to_string();
    return s;
  }
  std::string where(const z3::model& m, const Access& a, const Point& pt) {
    std::string s = "block (" + values(m, {pt.v[0], pt.v[1], pt.v[2]}) + ")";
    if (a.uses_loop) s += ", iteration " + m.eval(pt.v[3], true).to_string();
    return s + ", tile index [" + values(m, pt.i) + "]";
  }

  // Records the outcome of a claim whose negation was asserted in `s`; `explain` turns a model into text.
  template <class F>
  void decide(z3::solver& s, const std::string& claim, F&& explain) {
    ++out_.claims;
    switch (s.check()) {
      case z3::unsat:
        return;
      case z3::sat:
        out_.refuted.push_back(claim + ": " + explain(s.get_model()));
        return;
      case z3::unknown:
        out_.unknown.push_back(claim + ": " + s.reason_unknown());
        return;
    }
  }

  // Two different (block, tile index) pairs never write the same in-bounds element (quantifier-free).
  void at_most_once(const Access& a) {
    z3::expr dom = ctx_.bool_val(true);
    Point p = point("", a, dom), q = point("o", a, dom);
    Vec e = element(a, p), f = element(a, q);
    z3::expr differ = ctx_.bool_val(false), same = ctx_.bool_val(true);
    for (int k = 0; k < ir::kGridDims; ++k)
      differ = differ || p.v[static_cast<size_t>(k)] != q.v[static_cast<size_t>(k)];
    for (size_t d = 0; d < p.i.size(); ++d) differ = differ || p.i[d] != q.i[d];
    for (size_t d = 0; d < e.size(); ++d) same = same && e[d] == f[d];
    z3::solver z = solver();
    z.add(dom && differ && same && inside(e, a.full));
    decide(z, a.what + " writes each element at most once", [&](const z3::model& m) {
      return "element [" + values(m, e) + "] is written by " + where(m, a, p) + " and by " + where(m, a, q);
    });
  }

  void in_bounds(const Access& a) {
    z3::expr dom = ctx_.bool_val(true);
    Point p = point("", a, dom);
    Vec e = element(a, p);
    z3::solver z = solver();
    z.add(dom && !inside(e, a.full));
    decide(z, a.what + " reads within " + a.full.str(),
           [&](const z3::model& m) { return where(m, a, p) + " reads element [" + values(m, e) + "]"; });
  }

  // Every element of `full` is touched. Stated directly this is ∃e ∀(block, iteration, index), which Z3's
  // integer quantifier reasoning does not decide in reasonable time for these sizes, so it is proved with a
  // witness instead: along each dim, the element is decoded in mixed radix over the terms sorted by
  // coefficient (tile index = e mod c_1, next digit = (e div c_1) mod n_1, ..., the last digit e div c_last),
  // and Z3 checks, quantifier-free, that for every element of `full` the decoded point lies in its ranges and
  // touches exactly that element. When the witness fails somewhere, the element Z3 names is checked directly
  // (quantifier-free: is any point mapped to it?) and is a counterexample only if none is; otherwise the
  // search for a failing element goes on around it.
  void covers(const Access& a, const std::string& claim, const std::string& missing) {
    const std::string name = a.what + " " + claim + a.full.str();
    Vec e = ints("e", a.full.rank);
    z3::expr ok = ctx_.bool_val(true);
    for (int d = 0; d < a.full.rank; ++d) {
      std::vector<Term> terms = a.terms[static_cast<size_t>(d)];
      std::sort(terms.begin(), terms.end(), [](const Term& x, const Term& y) { return x.coef < y.coef; });
      std::vector<std::pair<int64_t, int64_t>> digits = {{1, a.tile.dim(d)}};  // (coefficient, range)
      for (const Term& t : terms) digits.push_back({t.coef, range(t.var)});
      z3::expr ed = e[static_cast<size_t>(d)], rebuilt = num(0);
      for (size_t k = 0; k < digits.size(); ++k) {
        auto [coef, n] = digits[k];
        z3::expr digit = k + 1 < digits.size() ? z3::mod(ed / num(coef), num(n)) : ed / num(coef);
        ok = ok && digit >= 0 && digit < num(n);
        rebuilt = rebuilt + num(coef) * digit;
      }
      ok = ok && rebuilt == ed;
    }
    z3::solver z = solver();
    z.add(inside(e, a.full) && !ok);
    ++out_.claims;
    for (int round = 0; round < 64; ++round) {
      z3::check_result r = z.check();
      if (r == z3::unsat) return;
      if (r == z3::unknown) {
        out_.unknown.push_back(name + ": " + z.reason_unknown());
        return;
      }
      z3::model m = z.get_model();
      Vec at;
      for (const z3::expr& x : e) at.push_back(m.eval(x, true));
      // Is any point mapped to `at`?
      z3::expr dom = ctx_.bool_val(true);
      Point p = point("w", a, dom);
      Vec f = element(a, p);
      z3::solver w = solver();
      z3::expr hit = dom;
      for (size_t d = 0; d < f.size(); ++d) hit = hit && f[d] == at[d];
      w.add(hit);
      z3::check_result hr = w.check();
      if (hr == z3::unsat) {
        out_.refuted.push_back(name + ": element [" + values(m, e) + "] " + missing);
        return;
      }
      if (hr == z3::unknown) break;
      z3::expr same = ctx_.bool_val(true);
      for (size_t d = 0; d < e.size(); ++d) same = same && e[d] == at[d];
      z.add(!same);
    }
    out_.unknown.push_back(name + ": the decoding witness fails and no unreached element was found");
  }

  const BlockTiling& t_;
  unsigned timeout_;
  TilingProof& out_;
  z3::context ctx_;
};

}  // namespace

BlockTiling tiling_of(const ir::Graph& g) {
  MG_CHECK(g.is_block(), "tiling_of takes a block graph");
  BlockTiling t;
  t.params = g.block_params();
  std::vector<std::string> names = ir::printed_names(g);
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::OpCode::iter) {
      IterTiling it;
      it.name = names[g.result(n)];
      it.operand = g.operand_types()[n.attrs.index];
      it.tile = g.type(g.result(n));
      it.imap = n.attrs.map;
      it.fmap = n.attrs.fmap;
      it.mask = n.attrs.mask;
      t.iters.push_back(it);
    } else if (n.op == ir::OpCode::save) {
      SaveTiling s;
      ir::TensorId tile = g.operands(n)[0];
      s.name = names[tile];
      s.tile = g.type(tile);
      s.result = g.type(g.result(n));
      s.omap = n.attrs.map;
      t.saves.push_back(s);
    }
  }
  return t;
}

TilingProof prove_tiling(const BlockTiling& tiling, unsigned timeout_ms) {
  for (const SaveTiling& s : tiling.saves)
    MG_CHECK(s.tile.rank == s.result.rank, "save '" + s.name + "': tile and result ranks differ");
  for (const IterTiling& it : tiling.iters)
    MG_CHECK(it.tile.rank == it.operand.rank, "iter '" + it.name + "': tile and operand ranks differ");
  TilingProof out;
  Prover(tiling, timeout_ms, out).run();
  return out;
}

TilingProof prove_tiling(const ir::Graph& block_graph, unsigned timeout_ms) {
  return prove_tiling(tiling_of(block_graph), timeout_ms);
}

}  // namespace morgana::verify
