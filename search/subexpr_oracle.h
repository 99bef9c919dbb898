// The sub-expression checker the search prunes with (paper §4; docs/abstract-expressions.md). Built once per
// spec: the spec's output expressions go into an e-graph that is saturated under A_eq (bounded by iterations
// and nodes); the e-classes that are sub-expressions of an output under A_sub are marked. A query then only
// looks its term up, bottom-up, in a frozen hash table of the saturated e-graph: no allocation in the common
// case, no mutation, safe to call from many threads at once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/abstract_expr.h"

namespace morgana::search {

struct OracleLimits {
  int max_iterations = 40;    // rounds of "apply every rule to every e-node, then restore congruence"
  size_t max_nodes = 150000;  // e-nodes; the round in which this is passed is the last
};

// The ops the queried graphs may contain that make two nested e-nodes at once (rsqrt, Div(One, Sqrt(x)),
// always may). distance() lets each take its outer step for free, so it is a lower bound for graphs within
// this list; leaving out what a caller never builds makes it tighter (a matmul's free step makes every
// product one step from a sum of products, which is most of a norm or an attention).
struct FusedOps {
  bool matmul = true;   // Sum(k, Mul(a, b))
  bool softmax = true;  // Div(Exp(x), Sum(k, Exp(x)))
  bool concat = true;   // an op over a concat's pieces adds one sum per piece: Add(Sum(k1, ..), Sum(k2, ..))
};

struct OracleStats {
  int iterations = 0;
  size_t nodes = 0;            // e-nodes after the final rebuild
  size_t classes = 0;          // e-classes
  size_t subexpr_classes = 0;  // e-classes that are sub-expressions of an output
  bool saturated = false;      // no rule changed the e-graph in the last round (else a bound stopped it)
  double build_ms = 0;
};

class SubexprOracle {
 public:
  // `targets`: the spec's output expressions in `arena`. A Cat at the top of one (a concat output)
  // contributes each part as a target. The arena must outlive the oracle when the one-argument queries are
  // used.
  SubexprOracle(const ir::ExprArena& arena, std::span<const ir::ExprId> targets, OracleLimits limits = {},
                FusedOps fused_ops = {});

  // Whether `e` is a sub-expression of a target under A_eq ∪ A_sub. Shift (a max-derived value) always is; a
  // Cat is when each part is.
  bool is_subexpr(ir::ExprId e) const { return is_subexpr(*arena_, e); }
  bool is_subexpr(const ir::ExprArena& arena, ir::ExprId e) const;
  // Whether `e` equals a target under A_eq (a whole μGraph output, for instance).
  bool is_equivalent(ir::ExprId e) const { return is_equivalent(*arena_, e); }
  bool is_equivalent(const ir::ExprArena& arena, ir::ExprId e) const;

  // The e-class of `e` in the saturated e-graph (terms equal under A_eq share it), or UINT32_MAX when `e` is not
  // in the e-graph. The search uses it to spot a second way of computing a value it already has.
  uint32_t class_of(const ir::ExprArena& arena, ir::ExprId e) const;

  // A lower bound on the number of ops (of the op table, each abstracted as in abstract_node) that any
  // computation must still apply to a value of term `e` before a result equivalent to a target: the length of
  // the shortest path from e's e-class up to a target's class, where a step is one e-node that has the class
  // as a child (docs/abstract-expressions.md, "Distance to a target"). 0 when e has no e-class (Shift, Cat,
  // not in the e-graph): no bound. The search prunes a prefix whose open values are further from the targets
  // than the ops it may still add.
  int distance(const ir::ExprArena& arena, ir::ExprId e) const { return distance_of_class(class_of(arena, e)); }
  int distance_of_class(uint32_t cls) const { return cls < dist_.size() ? dist_[cls] : 0; }
  bool is_subexpr_class(uint32_t cls) const { return cls < sub_.size() && sub_[cls]; }

  // The same queries for a caller that asks about many terms of one arena sharing sub-terms (the search: each
  // new op's term is one e-node over terms it has asked about before). `memo` remembers the e-class of every
  // term looked up, by ir::ExprId, so a query costs one table probe for its new top node. One memo per arena and
  // thread.
  struct TermClasses {
    static constexpr uint32_t kUnseen = UINT32_MAX - 1;
    std::vector<uint32_t> cls;  // by ir::ExprId: kUnseen, UINT32_MAX (not in the e-graph) or the e-class
    bool get(ir::ExprId e, uint32_t& v) const {
      if (e >= cls.size() || cls[e] == kUnseen) return false;
      v = cls[e];
      return true;
    }
    void put(ir::ExprId e, uint32_t v) {
      if (e >= cls.size()) cls.resize(std::max<size_t>(2 * cls.size(), e + 1), kUnseen);
      cls[e] = v;
    }
  };
  uint32_t class_of(const ir::ExprArena& arena, ir::ExprId e, TermClasses& memo) const;
  // The e-class of one e-node over e-classes (UINT32_MAX: none): what class_of finds for a term whose
  // children have these classes, without making the term.
  uint32_t class_of_node(ir::ExprKind kind, int64_t payload, uint32_t a, uint32_t b = UINT32_MAX) const {
    return find_node(Key{kind, payload, a, b});
  }
  bool is_subexpr(const ir::ExprArena& arena, ir::ExprId e, TermClasses& memo) const;
  bool is_equivalent(const ir::ExprArena& arena, ir::ExprId e, TermClasses& memo) const;
  int distance(const ir::ExprArena& arena, ir::ExprId e, TermClasses& memo) const {
    return distance_of_class(class_of(arena, e, memo));
  }

  const OracleStats& stats() const { return stats_; }

  // The frozen e-graph's lookup key: a node kind, its payload and its children's e-classes.
  struct Key {
    ir::ExprKind kind = ir::ExprKind::Var;
    int64_t payload = 0;
    uint32_t a = UINT32_MAX, b = UINT32_MAX;
    bool operator==(const Key&) const = default;
  };

 private:
  struct Slot {
    Key key;
    uint32_t cls = UINT32_MAX;  // UINT32_MAX: empty
  };
  struct Memo;

  uint32_t find_node(const Key& k) const;
  // The e-class of `e` (UINT32_MAX: none), and the two queries, with either memo kind.
  template <class M>
  uint32_t lookup(const ir::ExprArena& arena, ir::ExprId e, M& memo) const;
  template <class M>
  bool subexpr_with(const ir::ExprArena& arena, ir::ExprId e, M& memo) const;
  template <class M>
  bool equivalent_with(const ir::ExprArena& arena, ir::ExprId e, M& memo) const;

  const ir::ExprArena* arena_;
  std::vector<Slot> table_;    // open addressing, power-of-two size
  std::vector<uint8_t> sub_;   // per e-class: a sub-expression of a target
  std::vector<uint8_t> root_;  // per e-class: a target itself
  std::vector<uint8_t> dist_;  // per e-class: distance() (sub-expression classes; saturates at 255)
  OracleStats stats_;
};

}  // namespace morgana::search
