// The saturated e-graph behind SubexprOracle. A small equality-saturation engine written for this one job:
// e-nodes are (kind, payload, child e-classes), e-classes are union-find ids, congruence is restored by
// re-canonicalising every e-node after each round (the graphs are small: thousands to a hundred thousand
// e-nodes). Rules are plain C++ over the e-graph, each written in both directions where the axiom is an
// equation; every rule is listed in docs/abstract-expressions.md.
#include "search/subexpr_oracle.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <chrono>
#include <deque>
#include <map>
#include <unordered_map>

#include "ir/diagnostic.h"

namespace morgana::search {

using namespace ir;  // the e-graph is built of the abstract expressions' terms throughout

namespace {

using Key = SubexprOracle::Key;
constexpr uint32_t kNone = UINT32_MAX;

uint64_t key_hash(const Key& k) {
  uint64_t h = hash_mix(static_cast<uint64_t>(k.kind), static_cast<uint64_t>(k.payload));
  return hash_mix(h, (static_cast<uint64_t>(k.a) << 32) | k.b);
}

struct KeyHash {
  size_t operator()(const Key& k) const { return static_cast<size_t>(key_hash(k)); }
};

// Sizes above this are never made by merging sums: a guard against runaway products, far above any tensor
// extent.
constexpr int64_t kMaxSumSize = int64_t{1} << 40;

// Distinct reduction sizes of a target that get an invariance bit (see invariance()); sizes beyond this many
// count as "not invariant", which only makes the oracle stricter.
constexpr size_t kMaxSizes = 128;
using SizeMask = std::bitset<kMaxSizes>;

class EGraph {
 public:
  uint32_t find(uint32_t c) const {
    while (uf_[c] != c) c = uf_[c];
    return c;
  }

  uint32_t find_compress(uint32_t c) {
    uint32_t r = find(c);
    while (uf_[c] != r) {
      uint32_t next = uf_[c];
      uf_[c] = r;
      c = next;
    }
    return r;
  }

  Key canon(Key k) {
    if (k.a != kNone) k.a = find_compress(k.a);
    if (k.b != kNone) k.b = find_compress(k.b);
    return k;
  }

  uint32_t one() { return add({ExprKind::One, 0, kNone, kNone}); }

  // Adds an e-node (children are e-classes) and returns its e-class. The identities the arena also applies
  // hold here by construction: Mul(x, One) = x, Div(x, One) = x, Sum(1, x) = x.
  uint32_t add(Key k) {
    k = canon(k);
    if (k.kind == ExprKind::Sum && k.payload == 1) return k.a;
    if (one_ != kNone) {
      uint32_t one = find_compress(one_);
      if (k.kind == ExprKind::Mul && k.b == one) return k.a;
      if (k.kind == ExprKind::Mul && k.a == one) return k.b;
      if (k.kind == ExprKind::Div && k.b == one) return k.a;
    }
    auto it = memo_.find(k);
    if (it != memo_.end()) return find_compress(it->second);
    auto c = static_cast<uint32_t>(uf_.size());
    uf_.push_back(c);
    nodes_.push_back(k);
    node_class_.push_back(c);
    memo_.emplace(k, c);
    if (k.kind == ExprKind::One) one_ = c;
    ++added_;
    return c;
  }

  bool merge(uint32_t a, uint32_t b) {
    a = find_compress(a);
    b = find_compress(b);
    if (a == b) return false;
    if (b < a) std::swap(a, b);
    uf_[b] = a;  // the older class stays the representative: deterministic ids
    ++merges_;
    return true;
  }

  // Restores the invariants: every e-node canonical and unique, congruent e-nodes in one e-class.
  void rebuild() {
    for (;;) {
      bool changed = false;
      memo_.clear();
      std::vector<Key> kept;
      std::vector<uint32_t> kept_class;
      kept.reserve(nodes_.size());
      kept_class.reserve(nodes_.size());
      uint32_t one = one_ == kNone ? kNone : find_compress(one_);
      for (size_t i = 0; i < nodes_.size(); ++i) {
        Key k = canon(nodes_[i]);
        uint32_t c = find_compress(node_class_[i]);
        if (one != kNone && ((k.kind == ExprKind::Mul && (k.a == one || k.b == one)) ||
                             (k.kind == ExprKind::Div && k.b == one))) {
          changed |= merge(c, k.kind == ExprKind::Mul && k.a == one ? k.b : k.a);
          continue;
        }
        auto [it, inserted] = memo_.try_emplace(k, c);
        if (inserted) {
          kept.push_back(k);
          kept_class.push_back(c);
        } else if (find_compress(it->second) != c) {
          changed |= merge(it->second, c);
        }
      }
      nodes_ = std::move(kept);
      node_class_ = std::move(kept_class);
      if (!changed) break;
    }
    for (uint32_t& c : node_class_) c = find_compress(c);
    for (auto& [k, c] : memo_) c = find_compress(c);
    index();
  }

  // Per e-class, its e-nodes (valid from one rebuild to the next).
  std::span<const uint32_t> nodes_of(uint32_t c) const {
    return {by_class_.data() + start_[c], start_[c + 1] - start_[c]};
  }
  const Key& node(uint32_t i) const { return nodes_[i]; }
  uint32_t node_class(uint32_t i) const { return node_class_[i]; }
  size_t num_nodes() const { return nodes_.size(); }
  size_t num_ids() const { return uf_.size(); }
  size_t added() const { return added_; }
  size_t merges() const { return merges_; }

 private:
  void index() {
    start_.assign(uf_.size() + 1, 0);
    for (uint32_t c : node_class_) ++start_[c + 1];
    for (size_t i = 1; i < start_.size(); ++i) start_[i] += start_[i - 1];
    by_class_.assign(nodes_.size(), 0);
    std::vector<uint32_t> fill(start_.begin(), start_.end() - 1);
    for (size_t i = 0; i < nodes_.size(); ++i) by_class_[fill[node_class_[i]]++] = static_cast<uint32_t>(i);
  }

  std::vector<uint32_t> uf_;
  std::vector<Key> nodes_;
  std::vector<uint32_t> node_class_;
  std::unordered_map<Key, uint32_t, KeyHash> memo_;
  std::vector<uint32_t> start_, by_class_;
  uint32_t one_ = kNone;
  size_t added_ = 0, merges_ = 0;
};

// Saturates an e-graph under A_eq. See docs/abstract-expressions.md for the rules and for "invariant".
class Saturator {
 public:
  // `reductions`: the e-classes of the target's Sum and Rms sub-terms with their sizes.
  Saturator(EGraph& g, OracleLimits limits, std::vector<std::pair<uint32_t, int64_t>> reductions)
      : g_(g), limits_(limits), reductions_(std::move(reductions)) {
    for (const auto& r : reductions_) sizes_.push_back(r.second);
    std::sort(sizes_.begin(), sizes_.end());
    sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
    if (sizes_.size() > kMaxSizes) sizes_.resize(kMaxSizes);
  }

  OracleStats run() {
    OracleStats st;
    for (st.iterations = 0; st.iterations < limits_.max_iterations; ++st.iterations) {
      g_.rebuild();
      invariance();
      size_t added = g_.added(), merges = g_.merges();
      size_t n = g_.num_nodes();
      bool full = false;
      for (uint32_t i = 0; i < n && !full; ++i) {
        apply(i);
        full = g_.num_nodes() > limits_.max_nodes;
      }
      if (g_.added() == added && g_.merges() == merges) {
        st.saturated = true;
        break;
      }
      if (full) {
        ++st.iterations;
        break;
      }
    }
    g_.rebuild();
    return st;
  }

 private:
  // Kinds of the e-nodes in e-class c, for matching.
  template <class F>
  void each(uint32_t c, ExprKind kind, F&& f) {
    // Copy the e-node: applying a rule appends to the node vector.
    for (uint32_t i : g_.nodes_of(c)) {
      Key k = g_.node(i);
      if (k.kind == kind) f(k);
    }
  }

  uint32_t mk(ExprKind kind, uint32_t a, uint32_t b = kNone, int64_t payload = 0) {
    return g_.add({kind, payload, a, b});
  }
  uint32_t A(uint32_t a, uint32_t b) { return mk(ExprKind::Add, a, b); }
  uint32_t M(uint32_t a, uint32_t b) { return mk(ExprKind::Mul, a, b); }
  uint32_t D(uint32_t a, uint32_t b) { return mk(ExprKind::Div, a, b); }
  uint32_t S(int64_t k, uint32_t a) { return mk(ExprKind::Sum, a, kNone, k); }
  void eq(uint32_t c, uint32_t x) { g_.merge(c, x); }

  const std::vector<int64_t>& divisors(int64_t k) {
    auto [it, inserted] = divisors_.try_emplace(k);
    if (inserted)
      for (int64_t d = 2; d * d <= k; ++d)
        if (k % d == 0) {
          it->second.push_back(d);
          if (d * d != k) it->second.push_back(k / d);
        }
    return it->second;
  }

  // inv(y, k): y counts as constant along the axis a Sum(k, ·) walks ("not reduced" by it). y is invariant
  // for k when it is built by Add, Mul, Div and Sqrt from One and from the target's own reductions of size k:
  // the Sum(k, ·) and Rms(k, ·) sub-terms of the target as written (nested sums merged), whose e-classes were
  // recorded when the target was inserted. So a spec normaliser such as Rms(n, x) or a softmax denominator
  // Sum(n, Exp(s)) moves in and out of a Sum(n, ·), and nothing else does: not a sum over a part of the axis
  // (Sum(256, ·) inside Sum(4096, ·); the split e-nodes Sum(16, Sum(256, ·)) of a reduction do not count),
  // not a factor that merely contains a reduction under Exp or another transcendental op (Exp(Sum(128, q·k))
  // is constant along the head dim, not the key axis), and not a reduction the target does not have. Monotone
  // in the e-graph, so saturation stays order-independent. A least fixpoint: an e-class is invariant if any
  // of its e-nodes is.
  void invariance() {
    inv_.assign(g_.num_ids(), SizeMask());
    for (const auto& [cls, size] : reductions_) {
      auto it = std::lower_bound(sizes_.begin(), sizes_.end(), size);
      if (it != sizes_.end() && *it == size) inv_[g_.find(cls)].set(static_cast<size_t>(it - sizes_.begin()));
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t i = 0; i < g_.num_nodes(); ++i) {
        const Key& k = g_.node(i);
        SizeMask m;
        switch (k.kind) {
          case ExprKind::One:
          case ExprKind::Shift:
            m.set();
            break;
          case ExprKind::Add:
          case ExprKind::Mul:
          case ExprKind::Div:
            m = inv_[k.a] & inv_[k.b];
            break;
          case ExprKind::Sqrt:
            m = inv_[k.a];
            break;
          default:
            break;
        }
        SizeMask& c = inv_[g_.node_class(i)];
        if ((m & ~c).any()) {
          c |= m;
          changed = true;
        }
      }
    }
  }

  bool inv(uint32_t y, int64_t k) const {
    auto it = std::lower_bound(sizes_.begin(), sizes_.end(), k);
    if (it == sizes_.end() || *it != k) return false;
    return inv_[g_.find(y)].test(static_cast<size_t>(it - sizes_.begin()));
  }

  void apply(uint32_t i) {
    const Key n = g_.node(i);
    const uint32_t c = g_.node_class(i), a = n.a, b = n.b;
    const int64_t k = n.payload;
    switch (n.kind) {
      case ExprKind::Add:
        eq(c, A(b, a));                                                    // commutativity
        each(a, ExprKind::Add, [&](Key x) { eq(c, A(x.a, A(x.b, b))); });  // associativity, both ways
        each(b, ExprKind::Add, [&](Key y) { eq(c, A(A(a, y.a), y.b)); });
        each(a, ExprKind::Mul, [&](Key x) {  // x·z + y·z = (x + y)·z
          each(b, ExprKind::Mul, [&](Key y) {
            if (g_.find(x.b) == g_.find(y.b)) eq(c, M(A(x.a, y.a), x.b));
          });
        });
        each(a, ExprKind::Div, [&](Key x) {  // x/z + y/z = (x + y)/z
          each(b, ExprKind::Div, [&](Key y) {
            if (g_.find(x.b) == g_.find(y.b)) eq(c, D(A(x.a, y.a), x.b));
          });
        });
        each(a, ExprKind::Sum, [&](Key x) {  // Sum(k, x) + Sum(k, y) = Sum(k, x + y)
          each(b, ExprKind::Sum, [&](Key y) {
            if (x.payload == y.payload) eq(c, S(x.payload, A(x.a, y.a)));
          });
        });
        break;
      case ExprKind::Mul:
        eq(c, M(b, a));
        each(a, ExprKind::Mul, [&](Key x) { eq(c, M(x.a, M(x.b, b))); });
        each(b, ExprKind::Mul, [&](Key y) { eq(c, M(M(a, y.a), y.b)); });
        // Distributivity, except over a square: expanding (x + y)·(x + y) gives the pairwise products, and
        // through them the products of every sub-sum with every other (nTrans's Rms of a three-term sum:
        // 71,000 e-nodes after 8 rounds and still growing, against 312 saturated without). A square is
        // computed whole.
        if (g_.find(a) != g_.find(b)) each(a, ExprKind::Add, [&](Key x) { eq(c, A(M(x.a, b), M(x.b, b))); });
        each(b, ExprKind::Div, [&](Key y) { eq(c, D(M(a, y.a), y.b)); });        // x·(y/z) = (x·y)/z
        each(a, ExprKind::Sum, [&](Key x) {  // Sum(k, x)·y = Sum(k, x·y), y invariant
          if (inv(b, x.payload)) eq(c, S(x.payload, M(x.a, b)));
        });
        break;
      case ExprKind::Div:
        each(a, ExprKind::Add, [&](Key x) { eq(c, A(D(x.a, b), D(x.b, b))); });
        each(a, ExprKind::Mul, [&](Key x) { eq(c, M(x.a, D(x.b, b))); });
        if (g_.find(a) != g_.find(g_.one())) eq(c, M(a, D(g_.one(), b)));  // x/z = x·(One/z)
        each(a, ExprKind::Div, [&](Key x) { eq(c, D(x.a, M(x.b, b))); });  // (x/y)/z = x/(y·z)
        each(b, ExprKind::Mul, [&](Key y) { eq(c, D(D(a, y.a), y.b)); });
        each(a, ExprKind::Sum, [&](Key x) {  // Sum(k, x)/y = Sum(k, x/y), y invariant
          if (inv(b, x.payload)) eq(c, S(x.payload, D(x.a, b)));
        });
        break;
      case ExprKind::Sum:
        each(a, ExprKind::Sum, [&](Key x) {  // Sum(j, Sum(k, x)) = Sum(j·k, x)
          if (x.payload <= kMaxSumSize / k) eq(c, S(k * x.payload, x.a));
        });
        for (int64_t d : divisors(k)) eq(c, S(k / d, S(d, a)));  // and the split, for every divisor
        each(a, ExprKind::Add, [&](Key x) { eq(c, A(S(k, x.a), S(k, x.b))); });
        each(a, ExprKind::Mul, [&](Key x) {
          if (inv(x.b, k)) eq(c, M(S(k, x.a), x.b));
        });
        each(a, ExprKind::Div, [&](Key x) {
          if (inv(x.b, k)) eq(c, D(S(k, x.a), x.b));
        });
        break;
      case ExprKind::Rms:  // Rms(k, x) = Sqrt(Sum(k, x·x))
        eq(c, mk(ExprKind::Sqrt, S(k, M(a, a))));
        break;
      case ExprKind::Sqrt:
        each(a, ExprKind::Sum, [&](Key x) {
          each(x.a, ExprKind::Mul, [&](Key y) {
            if (g_.find(y.a) == g_.find(y.b)) eq(c, mk(ExprKind::Rms, y.a, kNone, x.payload));
          });
        });
        break;
      default:
        break;
    }
  }

  EGraph& g_;
  OracleLimits limits_;
  std::vector<std::pair<uint32_t, int64_t>> reductions_;
  std::vector<int64_t> sizes_;  // distinct sizes of reductions_, sorted: the bit positions of SizeMask
  std::vector<SizeMask> inv_;
  std::map<int64_t, std::vector<int64_t>> divisors_;
};

// Inserts a target term; records its reductions (Sum and Rms sub-terms) with their sizes.
uint32_t insert(EGraph& g, const ExprArena& ar, ExprId e, std::unordered_map<ExprId, uint32_t>& memo,
                std::vector<std::pair<uint32_t, int64_t>>& reductions) {
  auto it = memo.find(e);
  if (it != memo.end()) return it->second;
  const ExprNode& n = ar.node(e);
  MG_CHECK(n.kind != ExprKind::Cat, "a Cat below the top of a target expression");
  Key k{n.kind, n.payload, kNone, kNone};
  if (n.a != kNoExpr) k.a = insert(g, ar, n.a, memo, reductions);
  if (n.b != kNoExpr) k.b = insert(g, ar, n.b, memo, reductions);
  uint32_t c = g.add(k);
  if (n.kind == ExprKind::Sum || n.kind == ExprKind::Rms) reductions.emplace_back(c, n.payload);
  memo.emplace(e, c);
  return c;
}

void split_cats(const ExprArena& ar, ExprId e, std::vector<ExprId>& out) {
  if (ar.node(e).kind == ExprKind::Cat) {
    split_cats(ar, ar.node(e).a, out);
    split_cats(ar, ar.node(e).b, out);
  } else {
    out.push_back(e);
  }
}

// Per e-class, the distance to a target (SubexprOracle::distance): a shortest path over "is a child of an
// e-node of" from every class to the targets' classes, by 0-1 BFS from the targets down. A step costs one op,
// except where one op makes two nested e-nodes at once: rsqrt is Div(One, Sqrt), and where `fused_ops` allows
// them a matmul is Sum over Mul, softmax is Div(Exp, Sum(Exp)), and a matmul or reduction over a concat's
// pieces adds the pieces' sums. Those outer steps (Div(One, ·) over a class with a Sqrt e-node, Div(·, ...)
// over one with Exp, Sum over one with Mul, Add over one with Sum) cost nothing, so that every op costs at
// most one and the distance stays a lower bound. The arena merges nested sums, so a sum over a Sum(b, x)
// value makes Sum(k, x) directly: a class holding Sum(b, X) is also one step from every class holding
// Sum(k, X) with b | k.
std::vector<uint8_t> target_distances(const EGraph& g, const std::vector<uint32_t>& roots,
                                      FusedOps fused_ops) {
  constexpr uint32_t kFar = 255;
  size_t n = g.num_ids();
  std::vector<uint8_t> has(n, 0);  // kinds present in a class: bit 0 Mul, 1 Sqrt, 2 Sum, 3 Exp
  uint32_t one = kNone;
  // Per class X, the (k, class) of every Sum(k, X) e-node.
  std::unordered_map<uint32_t, std::vector<std::pair<int64_t, uint32_t>>> sums_over;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Key& k = g.node(i);
    uint32_t c = g.node_class(i);
    if (k.kind == ExprKind::One) one = c;
    if (k.kind == ExprKind::Mul) has[c] |= 1;
    if (k.kind == ExprKind::Sqrt) has[c] |= 2;
    if (k.kind == ExprKind::Exp) has[c] |= 8;
    if (k.kind == ExprKind::Sum) {
      has[c] |= 4;
      sums_over[k.a].emplace_back(k.payload, c);
    }
  }
  std::vector<uint32_t> dist(n, kFar);
  std::deque<uint32_t> work;
  for (uint32_t r : roots) {
    r = g.find(r);
    if (dist[r] != 0) dist[r] = 0, work.push_front(r);
  }
  auto relax = [&](uint32_t c, uint32_t d, uint32_t w) {
    if (d + w >= dist[c]) return;
    dist[c] = d + w;
    if (w == 0)
      work.push_front(c);
    else
      work.push_back(c);
  };
  while (!work.empty()) {
    uint32_t p = work.front();
    work.pop_front();
    uint32_t d = dist[p];
    if (d + 1 >= kFar) continue;
    for (uint32_t i : g.nodes_of(p)) {
      const Key& k = g.node(i);
      for (uint32_t ch : {k.a, k.b}) {
        if (ch == kNone) continue;
        bool fused = (k.kind == ExprKind::Sum && (has[ch] & 1) && fused_ops.matmul) ||
                     (k.kind == ExprKind::Div && ch == k.b && k.a == one && (has[ch] & 2)) ||
                     (k.kind == ExprKind::Div && ch == k.a && (has[ch] & 8) && fused_ops.softmax) ||
                     (k.kind == ExprKind::Add && (has[ch] & 4) && fused_ops.concat);
        relax(ch, d, fused ? 0 : 1);
      }
      if (k.kind == ExprKind::Sum)
        if (auto it = sums_over.find(k.a); it != sums_over.end())
          for (const auto& [b, c] : it->second)
            if (b < k.payload && k.payload % b == 0) relax(c, d, 1);
    }
  }
  return std::vector<uint8_t>(dist.begin(), dist.end());
}

}  // namespace

// A query's memo of the e-classes of its sub-terms (terms are DAGs). Lives on the stack; spills to a map only
// for terms with very many distinct sub-terms.
struct SubexprOracle::Memo {
  static constexpr size_t kSlots = 64;
  std::array<ExprId, kSlots> keys;
  std::array<uint32_t, kSlots> vals;
  size_t used = 0;
  std::unordered_map<ExprId, uint32_t> spill;

  Memo() { keys.fill(kNoExpr); }
  bool get(ExprId e, uint32_t& v) const {
    for (size_t i = e & (kSlots - 1), n = 0; n < kSlots; i = (i + 1) & (kSlots - 1), ++n) {
      if (keys[i] == e) {
        v = vals[i];
        return true;
      }
      if (keys[i] == kNoExpr) break;
    }
    if (spill.empty()) return false;
    auto it = spill.find(e);
    if (it == spill.end()) return false;
    v = it->second;
    return true;
  }
  void put(ExprId e, uint32_t v) {
    if (used + 1 >= kSlots / 2) {
      spill.emplace(e, v);
      return;
    }
    size_t i = e & (kSlots - 1);
    while (keys[i] != kNoExpr) i = (i + 1) & (kSlots - 1);
    keys[i] = e;
    vals[i] = v;
    ++used;
  }
};

SubexprOracle::SubexprOracle(const ExprArena& arena, std::span<const ExprId> targets, OracleLimits limits,
                             FusedOps fused_ops)
    : arena_(&arena) {
  auto t0 = std::chrono::steady_clock::now();
  EGraph g;
  std::vector<ExprId> parts;
  for (ExprId t : targets) split_cats(arena, t, parts);
  std::unordered_map<ExprId, uint32_t> memo;
  std::vector<uint32_t> roots;
  std::vector<std::pair<uint32_t, int64_t>> reductions;
  for (ExprId t : parts) roots.push_back(insert(g, arena, t, memo, reductions));

  stats_ = Saturator(g, limits, std::move(reductions)).run();

  // Freeze: every e-node keyed by its canonical form, and the sub-expression closure of the roots under A_sub
  // (every child of every e-node of a sub-expression e-class is one).
  size_t cap = 16;
  while (cap < 2 * g.num_nodes()) cap *= 2;
  table_.assign(cap, Slot{});
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Key& k = g.node(i);
    size_t h = static_cast<size_t>(key_hash(k)) & (cap - 1);
    while (table_[h].cls != kNone) h = (h + 1) & (cap - 1);
    table_[h] = {k, g.node_class(i)};
  }
  sub_.assign(g.num_ids(), 0);
  root_.assign(g.num_ids(), 0);
  std::vector<uint32_t> work;
  for (uint32_t r : roots) {
    r = g.find(r);
    root_[r] = 1;
    if (!sub_[r]) sub_[r] = 1, work.push_back(r);
  }
  while (!work.empty()) {
    uint32_t c = work.back();
    work.pop_back();
    for (uint32_t i : g.nodes_of(c))
      for (uint32_t ch : {g.node(i).a, g.node(i).b})
        if (ch != kNone && !sub_[ch]) sub_[ch] = 1, work.push_back(ch);
  }
  dist_ = target_distances(g, roots, fused_ops);
  stats_.nodes = g.num_nodes();
  for (uint32_t c = 0; c < g.num_ids(); ++c) {
    if (g.find(c) != c) continue;
    ++stats_.classes;
    stats_.subexpr_classes += sub_[c];
  }
  stats_.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

uint32_t SubexprOracle::find_node(const Key& k) const {
  size_t mask = table_.size() - 1;
  for (size_t h = static_cast<size_t>(key_hash(k)) & mask;; h = (h + 1) & mask) {
    const Slot& s = table_[h];
    if (s.cls == kNone) return kNone;
    if (s.key == k) return s.cls;
  }
}

// Both memo kinds (a query's own Memo, a caller's TermClasses) go through these three.
template <class M>
uint32_t SubexprOracle::lookup(const ExprArena& ar, ExprId e, M& memo) const {
  uint32_t v;
  if (memo.get(e, v)) return v;
  const ExprNode& n = ar.node(e);
  Key k{n.kind, n.payload, kNone, kNone};
  v = kNone;
  if (n.kind != ExprKind::Cat && (n.a == kNoExpr || (k.a = lookup(ar, n.a, memo)) != kNone) &&
      (n.b == kNoExpr || (k.b = lookup(ar, n.b, memo)) != kNone))
    v = find_node(k);
  memo.put(e, v);
  return v;
}

template <class M>
bool SubexprOracle::subexpr_with(const ExprArena& ar, ExprId e, M& memo) const {
  const ExprNode& n = ar.node(e);
  if (n.kind == ExprKind::Shift) return true;
  if (n.kind == ExprKind::Cat) return subexpr_with(ar, n.a, memo) && subexpr_with(ar, n.b, memo);
  return is_subexpr_class(lookup(ar, e, memo));
}

template <class M>
bool SubexprOracle::equivalent_with(const ExprArena& ar, ExprId e, M& memo) const {
  const ExprNode& n = ar.node(e);
  if (n.kind == ExprKind::Cat) return equivalent_with(ar, n.a, memo) && equivalent_with(ar, n.b, memo);
  uint32_t c = lookup(ar, e, memo);
  return c != kNone && root_[c];
}

uint32_t SubexprOracle::class_of(const ExprArena& ar, ExprId e) const {
  Memo memo;
  return lookup(ar, e, memo);
}

bool SubexprOracle::is_subexpr(const ExprArena& ar, ExprId e) const {
  Memo memo;
  return subexpr_with(ar, e, memo);
}

bool SubexprOracle::is_equivalent(const ExprArena& ar, ExprId e) const {
  Memo memo;
  return equivalent_with(ar, e, memo);
}

uint32_t SubexprOracle::class_of(const ExprArena& ar, ExprId e, TermClasses& memo) const {
  return lookup(ar, e, memo);
}

bool SubexprOracle::is_subexpr(const ExprArena& ar, ExprId e, TermClasses& memo) const {
  return subexpr_with(ar, e, memo);
}

bool SubexprOracle::is_equivalent(const ExprArena& ar, ExprId e, TermClasses& memo) const {
  return equivalent_with(ar, e, memo);
}

}  // namespace morgana::search
