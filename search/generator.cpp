#include "search/generator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "ir/abstract_expr.h"
#include "ir/diagnostic.h"
#include "search/axes.h"
#include "search/cost_model.h"
#include "search/kernel_work.h"
#include "search/subexpr_oracle.h"

namespace morgana::search {

using ir::Attrs;
using ir::ExprArena;
using ir::ExprId;
using ir::ExprKind;
using ir::Graph;
using ir::OpCode;
using ir::OpKind;
using ir::TensorId;

void GenStats::add(const GenStats& o) {
  states += o.states;
  complete += o.complete;
  for (const auto& [k, v] : o.pruned) pruned[k] += v;
}

namespace {

constexpr int kMaxSaves = 4;      // results of one block op
constexpr int kMaxScalarChain = 2;
constexpr int kMaxOpen = 3;         // body values computed but not yet consumed, at any point  // scalar ops (mul_scalar, add_scalar) in a row
constexpr int64_t kMaxLoop = 64;    // the for-loop walks at most this many chunks
constexpr size_t kSizesPerStructure = 3;  // a last block op's cheapest sizes that become candidates

// Canonical order (paper §4): an op's rank is (its newest operand, then the rest of what it is); a graph is
// canonical when its ops' ranks strictly increase, which every DAG has exactly one way of being.
struct Rank {
  uint32_t newest = 0;
  uint64_t rest = 0;
  auto operator<=>(const Rank&) const = default;
};
Rank rank_of(std::span<const TensorId> operands, OpCode op, uint64_t attr_key) {
  Rank r;
  uint64_t h = ir::hash_mix(0x5eed, static_cast<uint64_t>(op));
  for (TensorId t : operands) {
    r.newest = std::max(r.newest, t + 1);
    h = ir::hash_mix(h, t);
  }
  r.rest = ir::hash_mix(h, attr_key);
  return r;
}
uint64_t attr_key(const Attrs& a) {
  uint64_t h = ir::hash_mix(static_cast<uint64_t>(a.dim), static_cast<uint64_t>(a.to));
  uint64_t s;
  std::memcpy(&s, &a.s, sizeof s);
  return ir::hash_mix(h, s);
}

// A kernel-level tensor of the candidate.
struct KTensor {
  ExprId expr = ir::kNoExpr;
  Labels labels;
  bool shift = false;
  bool shifted = false;  // x - max
  bool maxdep = false;   // partial results scaled by their own part's max (combine them with that max)
  uint8_t dist = 0;      // SubexprOracle::distance: ops it still needs, at least, to become an output
  int uses = 0;
};

// A block op before its tile sizes are chosen: its operands (kernel tensors) and the axes the grid dims and the
// for-loop cut.
struct Skeleton {
  std::vector<TensorId> operands;
  std::vector<Label> grid;  // grid x, y, z in order
  Label loop;               // unit: no for-loop
};

// A block graph found at representative sizes, and which of its saved values are partial results scaled by
// their own part's max.
struct Structure {
  Graph body;
  std::vector<bool> scaled;
};

// A task: one block-op skeleton as the first kernel op, or (block false) every predefined op first.
struct Task {
  bool block = false;
  Skeleton sk;
};

// A block-level tensor while the block graph is built.
struct BTensor {
  ExprId expr = ir::kNoExpr;
  Labels labels;
  uint8_t psum = 0;  // partial sums over these header axes (bits index Header::axes)
  uint8_t pmax = 0;  // partial maxima (the tensor is then a Shift)
  bool shift = false;
  bool iter = false;
  bool epilogue = false;
  uint8_t scalar_chain = 0;
  OpCode scalar = OpCode::input;  // mul_scalar or add_scalar when the tensor is one's result
  uint32_t cls = UINT32_MAX;     // e-class of expr in the spec's e-graph (SubexprOracle::class_of), where the
                                 // op shows what it computes (not a scalar op or a max subtraction)
  uint32_t eclass = UINT32_MAX;  // e-class of expr, always (UINT32_MAX: not in the e-graph)
  bool shifted = false;           // x - max: its max is taken already
  uint8_t maxdep = 0;             // scaled by exp(-m) for a max m that is partial over these header axes
  bool squared = false;           // square(x)
  uint8_t dist = 0;               // SubexprOracle::distance
  int uses = 0;
};

// Where a scalar op's result may go. A constant factor commutes with every linear op (matmul, sums,
// accumulators, products), so canonically it is applied after them, right before what does not commute: a
// non-linear op (exp, rsqrt, silu, ...; and the max and subtraction of a softmax), an added constant, or, when
// the spec itself scales its result, a saver. An added constant feeds only a non-linear op (x·a + b is the
// canonical affine form), or a saver likewise.
bool scalar_consumer_ok(OpCode scalar, OpCode consumer, bool scaled_outputs) {
  if (scalar == OpCode::input) return true;
  const ir::OpInfo& c = ir::op_info(consumer);
  if (consumer == OpCode::save) return scaled_outputs;
  if (c.kind == OpKind::Unary && c.field != ir::FieldSem::ScaleConst && c.field != ir::FieldSem::AddConst)
    return true;
  if (scalar == OpCode::mul_scalar)
    return consumer == OpCode::add_scalar || consumer == OpCode::reduce_max || consumer == OpCode::sub;
  return false;
}
// The same for a binary op: a scaled value is only ever the minuend of a max subtraction.
bool scalar_operands_ok(OpCode op, OpCode a_scalar, OpCode b_scalar, bool b_shift, bool scaled_outputs) {
  if (!scalar_consumer_ok(a_scalar, op, scaled_outputs) || !scalar_consumer_ok(b_scalar, op, scaled_outputs))
    return false;
  if (op == OpCode::sub && a_scalar != OpCode::input && !b_shift) return false;
  return b_scalar == OpCode::input || op != OpCode::sub;
}

}  // namespace

struct Generator::Shared {
  Graph spec;
  targets::Target target;
  SearchOptions options;
  SpecAxes axes;
  ExprArena arena;  // the spec's terms; the oracle's arena
  std::unique_ptr<SubexprOracle> oracle;
  std::vector<ExprId> out_exprs;
  std::vector<Labels> out_labels;
  // Where the spec applies a constant: mul_scalar and add_scalar take (op, value) only on a value of the
  // e-class the spec applies it to (the spec's own scalar ops, and each rms_norm's 1/n and eps, which apply to
  // the sum of squares).
  struct ScalarUse {
    OpCode op;
    double s;
    uint32_t cls;
  };
  std::vector<ScalarUse> scalar_uses;
  bool scaled_outputs = false;   // the spec has explicit scalar ops, so an output may end with one
  std::vector<uint16_t> reduced_axes;  // axes the spec sums, maximises or normalises over
  bool safe_exp = false;  // the spec's exps come from softmax: each exp must take a max-subtracted value
  std::vector<double> eps;      // rms_norm epsilons
  int64_t max_blocks = 0;
  int64_t threads = 0;
  std::vector<Task> tasks;
};

namespace {

// One task's depth-first exploration (one thread).
class Explorer {
 public:
  Explorer(const Generator::Shared& sh, GenStats& stats, const std::function<void(Candidate&&)>& sink,
           const std::atomic<bool>& stop, const double* bound)
      : sh_(sh), stats_(stats), sink_(sink), stop_(stop), bound_(bound) {
    for (TensorId t : sh.spec.inputs()) {
      TensorId k = kg_.add_input(sh.spec.type(t), sh.spec.name(t));
      KTensor kt;
      kt.expr = arena_.var(static_cast<uint32_t>(kt_.size()));
      kt.labels = sh.axes.tensors[t];
      kt.dist = distance(kt.expr);
      kt_.resize(k + 1);
      kt_[k] = kt;
    }
    kg_.set_name(sh.spec.name());
  }
  ~Explorer() {
    for (const auto& [r, n] : pruned_) stats_.pruned[r] += n;
  }

  void run(const Task& task) {
    if (task.block) {
      block_op(task.sk, 0);
      return;
    }
    for_each_predefined([&](OpCode op, std::vector<TensorId> operands, const Attrs& a) {
      Rank r;
      if (!predefined(op, operands, a, &r)) return;
      kernel_step(1, r);
      undo_kernel();
    });
  }

  // Every task's first op, in a fixed order.
  static std::vector<Task> root_tasks(const Generator::Shared& sh);

 private:
  // Rules are string literals: counted by pointer here, turned into the stats' map once per task (~Explorer).
  void prune(const char* rule) {
    for (auto& [r, n] : pruned_)
      if (r == rule) {
        ++n;
        return;
      }
    pruned_.emplace_back(rule, 1);
  }
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }
  int max_kernel_ops() const { return sh_.options.max_kernel_ops; }

  // Only an axis the spec itself reduces may be reduced (summing over any other mixes elements the spec keeps
  // apart, and nothing afterwards can separate them again).
  bool spec_reduces(const Label& l) const {
    if (l.unit() || l.stacked()) return true;
    return std::find(sh_.reduced_axes.begin(), sh_.reduced_axes.end(), l.axis) != sh_.reduced_axes.end();
  }

  // Oracle queries about this explorer's terms, through its memo of their e-classes.
  uint32_t class_of(ExprId e) const { return sh_.oracle->class_of(arena_, e, classes_); }
  bool equivalent(ExprId e) const { return sh_.oracle->is_equivalent(arena_, e, classes_); }
  bool subexpr(ExprId e) const {
    return !sh_.options.abstract_pruning || sh_.oracle->is_subexpr(arena_, e, classes_);
  }

  // The distance bound (SubexprOracle::distance): a value nothing has consumed yet must still become part of
  // an output, through at least its distance in ops. Off with abstract pruning, whose e-graph it reads.
  uint8_t distance(ExprId e) const {
    return sh_.options.abstract_pruning ? static_cast<uint8_t>(sh_.oracle->distance(arena_, e, classes_)) : 0;
  }
  template <class T>
  static int farthest_open(const std::vector<T>& values) {
    int far = 0;
    for (const T& v : values)
      if (v.uses == 0) far = std::max<int>(far, v.dist);
    return far;
  }
  // An op never brings a value more than one step closer (the oracle's distances are built so); checked in
  // debug builds, where the search tests run, because a violation would silently lose candidates.
  void check_step(int operand_dist, ExprId result) const {
#ifndef NDEBUG
    if (!sh_.options.abstract_pruning || class_of(result) == UINT32_MAX) return;
    MG_CHECK(
        operand_dist <= distance(result) + 1,
        "generator: an op moved a value more than one step towards the spec (" + arena_.str(result) + ")");
#else
    (void)operand_dist;
    (void)result;
#endif
  }

  // ---------------- kernel level ----------------

  void kernel_step(int ops_done, Rank last) {
    if (stopped()) return;
    if (complete()) return;  // every spec output is there: nothing more may be added
    if (ops_done >= max_kernel_ops()) return;
    // Each tensor not yet consumed must be consumed by what follows (or be an output): one more op consumes at
    // most two and makes one.
    int open = 0;
    for (TensorId t = 0; t < kt_.size(); ++t)
      if (kt_[t].uses == 0 && !is_input(t)) ++open;
    if (open > static_cast<int>(sh_.spec.outputs().size()) + 4 * (max_kernel_ops() - ops_done)) {
      prune("dead-end");
      return;
    }
    // Each kernel op still to come takes a value at most a block graph's ops closer to an output.
    if (farthest_open(kt_) > (max_kernel_ops() - ops_done) * std::max(1, sh_.options.max_block_ops)) {
      prune("distance");
      return;
    }
    for_each_predefined([&](OpCode op, std::vector<TensorId> operands, const Attrs& a) {
      Rank r;
      if (!predefined(op, operands, a, &r, &last)) return;
      kernel_step(ops_done + 1, r);
      undo_kernel();
    });
    // The last op reads exactly the tensors nothing has read yet (inputs included): it must consume them all,
    // and a second read of a tensor an earlier op read would only redo that op's work.
    std::vector<TensorId> needed;
    bool last_op = ops_done + 1 == max_kernel_ops();
    if (last_op)
      for (TensorId t = 0; t < kt_.size(); ++t)
        if (kt_[t].uses == 0) needed.push_back(t);
    // Which skeletons have block graphs depends only on the tensors' terms and axes, not on the sizes earlier
    // block ops took: the first visit of a kernel state records them, the next instantiations reuse the list.
    uint64_t sig = ir::hash_mix(static_cast<uint64_t>(ops_done), last.newest);
    for (const KTensor& k : kt_) {
      sig = ir::hash_mix(sig, ir::hash_mix(k.expr, static_cast<uint64_t>(k.uses > 0)));
      for (int d = 0; d < k.labels.rank; ++d) sig = ir::hash_mix(sig, label_key(k.labels.dims[static_cast<size_t>(d)]));
    }
    auto known = live_skeletons_.find(sig);
    if (known != live_skeletons_.end()) {
      for (const Skeleton& sk : known->second) block_op(sk, ops_done, &last);
      return;
    }
    std::vector<Skeleton> live;
    for_each_skeleton([&](const Skeleton& sk) {
      // A block op's rank ends with its body's hash, checked once the body is built (instantiate).
      if (rank_of(sk.operands, OpCode::block, 0).newest < last.newest) return;
      if (last_op && sk.operands != needed) return prune("dead-end");
      if (block_op(sk, ops_done, &last)) live.push_back(sk);
    });
    if (!stopped()) live_skeletons_.emplace(sig, std::move(live));
  }

  bool is_input(TensorId t) const { return t < sh_.spec.inputs().size(); }

  // Whether the kernel graph holds every spec output (and nothing unused); emits the candidate when so.
  bool complete() {
    const auto outs = sh_.spec.outputs();
    std::vector<TensorId> found;
    for (size_t o = 0; o < outs.size(); ++o) {
      TensorId hit = UINT32_MAX;
      for (TensorId t = static_cast<TensorId>(sh_.spec.inputs().size()); t < kt_.size(); ++t) {
        if (kt_[t].uses != 0 || std::find(found.begin(), found.end(), t) != found.end()) continue;
        if (kg_.type(t).shape().size() != sh_.spec.type(outs[o]).shape().size()) continue;
        if (!std::equal(kg_.type(t).shape().begin(), kg_.type(t).shape().end(),
                        sh_.spec.type(outs[o]).shape().begin()))
          continue;
        if (!(kt_[t].labels == sh_.out_labels[o])) continue;
        if (!equivalent(kt_[t].expr)) continue;
        hit = t;
        break;
      }
      if (hit == UINT32_MAX) return false;
      found.push_back(hit);
    }
    for (TensorId t = 0; t < kt_.size(); ++t)
      if (kt_[t].uses == 0 && std::find(found.begin(), found.end(), t) == found.end()) return false;
    Graph g = kg_;
    for (TensorId t : found) g.add_output(t);
    ++stats_.complete;
    Candidate c;
    c.hash = g.hash();
    c.structure = structure_hash(g);
    Cost cost = estimate(g, sh_.target);
    if (!cost.feasible()) {
      prune("infeasible");
      return true;
    }
    c.cost_us = cost.total_us;
    c.graph = std::move(g);
    sink_(std::move(c));
    return true;
  }

  // The same for every choice of grid sizes and loop counts: the ops and their wiring.
  static uint64_t structure_hash(const Graph& g) {
    uint64_t h = 0x51;
    for (const ir::Node& n : g.nodes()) {
      h = ir::hash_mix(h, static_cast<uint64_t>(n.op));
      for (TensorId t : g.operands(n)) h = ir::hash_mix(h, t);
      if (n.op == OpCode::block) {
        const Graph& b = g.body(n);
        for (const ir::Node& bn : b.nodes()) {
          h = ir::hash_mix(h, static_cast<uint64_t>(bn.op));
          for (TensorId t : b.operands(bn)) h = ir::hash_mix(h, t);
          h = ir::hash_mix(h, static_cast<uint64_t>(bn.attrs.dim));
          for (int8_t m : bn.attrs.map) h = ir::hash_mix(h, static_cast<uint64_t>(m + 2));
          h = ir::hash_mix(h, static_cast<uint64_t>(bn.attrs.fmap + 2));
        }
      }
    }
    return h;
  }

  // Appends a predefined kernel op; false (counted) when it is pruned.
  bool predefined(OpCode op, const std::vector<TensorId>& operands, const Attrs& a, Rank* rank,
                  const Rank* last = nullptr) {
    ++stats_.states;
    Rank r = rank_of(operands, op, attr_key(a));
    if (last && !(*last < r)) {
      prune("canonical");
      return false;
    }
    const KTensor& x = kt_[operands[0]];
    const KTensor* y = operands.size() > 1 ? &kt_[operands[1]] : nullptr;
    if (!shift_rule(op, x.shift, x.expr, y ? y->shift : false, x.shifted)) return false;
    Label reduced;
    auto labels = infer_labels(op, a, &x.labels, y ? &y->labels : nullptr, &reduced);
    if (!labels || !spec_reduces(reduced)) {
      prune("axes");
      return false;
    }
    std::vector<ExprId> ex(kt_.size());
    for (TensorId i = 0; i < kt_.size(); ++i) ex[i] = kt_[i].expr;
    ExprId e = append_checked(kg_, op, operands, a, ex, {});
    if (e == ir::kNoExpr) return false;
    TensorId t = kg_.result(kg_.nodes().back());
    KTensor k;
    k.expr = e;
    k.labels = *labels;
    k.shift = arena_.node(e).kind == ExprKind::Shift;
    k.shifted = op == OpCode::sub && y && y->shift;
    k.dist = distance(e);
    for (TensorId o : operands) check_step(kt_[o].dist, e);
    kt_.resize(t + 1);
    kt_[t] = k;
    for (TensorId o : operands) ++kt_[o].uses;
    *rank = r;
    return true;
  }

  // Appends `op` to `g` and returns its result's term; kNoExpr (counted, and the op removed again) when the shape
  // rule refuses it or the term is not a sub-expression of the spec's. `ex`: the terms of g's tensors so far.
  ExprId append_checked(Graph& g, OpCode op, std::span<const TensorId> operands, const Attrs& a,
                        std::span<const ExprId> ex, std::span<const ExprId> operand_exprs) {
    size_t before = g.nodes().size();
    try {
      g.add1(op, operands, a);
    } catch (const UserError&) {
      prune("shape");
      return ir::kNoExpr;
    }
    ExprId e = ir::abstract_node(g, g.node(static_cast<ir::NodeId>(before)), 0, ex, operand_exprs, arena_);
    if (!subexpr(e)) {
      g.truncate(before);
      prune("abstract");
      return ir::kNoExpr;
    }
    return e;
  }

  void undo_kernel() {
    const ir::Node& n = kg_.nodes().back();
    for (TensorId o : kg_.operands(n)) --kt_[o].uses;
    kt_.resize(n.results_begin);
    kg_.truncate(kg_.nodes().size() - 1);
  }

  // Ops with a max-derived (Shift) operand: max values only stabilise an exp (online softmax), so a max is only
  // taken of values an exp of which the spec has, and only subtracted from such values.
  bool shift_rule(OpCode op, bool a_shift, ExprId a_expr, bool b_shift, bool a_shifted) {
    const ir::OpInfo& info = ir::op_info(op);
    if (info.kind == OpKind::Binary) {
      if (!a_shift && !b_shift) return true;
      if (op == OpCode::sub && !a_shift && b_shift && exp_of_is_subexpr(a_expr)) return true;
      prune("shift");
      return false;
    }
    if (a_shift || b_shift) {
      prune("shift");
      return false;
    }
    if (op == OpCode::reduce_max && !exp_of_is_subexpr(a_expr)) {
      prune("shift");
      return false;
    }
    if (info.field == ir::FieldSem::Exp && sh_.safe_exp && !a_shifted) {
      prune("unsafe");  // softmax is defined as safe; an exp of unbounded logits overflows (the float check)
      return false;
    }
    return true;
  }
  bool exp_of_is_subexpr(ExprId e) {
    return sh_.oracle->is_subexpr(arena_, arena_.unary(ExprKind::Exp, e), classes_);
  }

  // Predefined kernel ops over the current tensors: the op table's unary, binary, matmul, reduce and norm rows.
  template <class F>
  void for_each_predefined(F&& f) {
    size_t n = kt_.size();
    for (TensorId a = 0; a < n; ++a) {
      if (kt_[a].labels.any_stacked()) continue;
      for_each_unary_like(kg_.type(a), kt_[a].labels, kt_[a].expr, [&](OpCode op, const Attrs& at) { f(op, {a}, at); });
      for (TensorId b = 0; b < n; ++b) {
        if (a == b || kt_[b].labels.any_stacked()) continue;
        for (const ir::OpInfo& info : ir::all_ops()) {
          if (!(info.levels & ir::kKernelLevel)) continue;
          OpCode op = static_cast<OpCode>(&info - ir::all_ops().data());
          if (info.kind == OpKind::Binary && ((info.facts & ir::kCommutative) == 0 || a < b)) f(op, {a, b}, Attrs{});
          if (info.kind == OpKind::Matmul) f(op, {a, b}, Attrs{});
        }
      }
    }
  }

  // Unary, reduce and norm ops on one tensor of type `t`: attributes from the spec's constants and the tensor's
  // dims. `t` and `l` are copies: `f` appends to the graph and tensor records they come from, which may move them.
  template <class F>
  void for_each_unary_like(const ir::TensorType t, const Labels l, ExprId e, F&& f) {
    // The e-class decides which constants apply (Shared::scalar_uses); looked up once, and only when needed.
    uint32_t cls = UINT32_MAX - 1;
    for (const ir::OpInfo& info : ir::all_ops()) {
      OpCode op = static_cast<OpCode>(&info - ir::all_ops().data());
      if (info.kind == OpKind::Unary) {
        if (info.attrs & ir::kAttrS) {
          if (cls == UINT32_MAX - 1) cls = class_of(e);
          for (const auto& u : sh_.scalar_uses) {
            if (u.op != op || u.cls != cls) continue;
            Attrs a;
            a.s = u.s;
            f(op, a);
          }
        } else {
          f(op, Attrs{});
        }
      } else if (info.kind == OpKind::Reduce || info.kind == OpKind::Norm) {
        for (int d = 0; d < t.rank; ++d) {
          if (t.dim(d) == 1 || l.dims[static_cast<size_t>(d)].unit()) continue;
          Attrs a;
          a.dim = d;
          if (info.kind == OpKind::Norm) {
            for (double eps : sh_.eps) {
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

  // ---------------- block ops ----------------

  // What a block op slices a stacked dim by: the split that made its partial results (the axis they are partial
  // over and the number of parts), whichever dim of theirs holds the parts. A split-KV flash kernel whose grid also
  // cuts the heads stacks its row sums along their unit dim and its P·V along V's columns; one loop over the splits
  // combines both. Unstacked labels are their own partition.
  static Label partition(const Label& l) { return l.stacked() ? Label{0, l.over, l.parts} : l; }

  // Skeletons over the current kernel tensors: operand sets (1..4 tensors, in id order), then grid axes (up to
  // three, in label order) and the loop axis, from the labels of the operands.
  template <class F>
  void for_each_skeleton(F&& f) {
    std::vector<TensorId> pool;
    for (TensorId t = 0; t < kt_.size(); ++t) pool.push_back(t);
    std::vector<TensorId> pick;
    std::function<void(size_t)> subsets = [&](size_t from) {
      if (!pick.empty()) skeletons_of(pick, f);
      if (pick.size() == 4) return;
      for (size_t i = from; i < pool.size(); ++i) {
        pick.push_back(pool[i]);
        subsets(i + 1);
        pick.pop_back();
      }
    };
    subsets(0);
  }

 public:
  template <class F>
  static void skeletons_over(const std::vector<TensorId>& ops, const std::vector<KTensor>& kt, F&& f) {
    std::vector<Label> axes;
    for (TensorId t : ops)
      for (int d = 0; d < kt[t].labels.rank; ++d) {
        Label l = partition(kt[t].labels.dims[static_cast<size_t>(d)]);
        if (l.unit()) continue;
        if (std::find(axes.begin(), axes.end(), l) == axes.end()) axes.push_back(l);
      }
    std::sort(axes.begin(), axes.end(), [](const Label& a, const Label& b) {
      return std::tie(a.over, a.axis, a.parts) < std::tie(b.over, b.axis, b.parts);
    });
    size_t n = axes.size();
    // Stacked dims must be cut into their partial results by the grid or the loop.
    auto covers_stacked = [&](const std::vector<Label>& grid, const Label& loop) {
      for (const Label& l : axes)
        if (l.stacked() && !(l == loop) && std::find(grid.begin(), grid.end(), l) == grid.end()) return false;
      return true;
    };
    std::vector<Label> grid;
    std::function<void(size_t)> rec = [&](size_t from) {
      for (size_t li = 0; li <= n; ++li) {
        Label loop = li == n ? Label{} : axes[li];
        if (!covers_stacked(grid, loop)) continue;
        Skeleton sk{ops, grid, loop};
        f(sk);
      }
      if (grid.size() == static_cast<size_t>(ir::kGridDims)) return;
      for (size_t i = from; i < n; ++i) {
        grid.push_back(axes[i]);
        rec(i + 1);
        grid.pop_back();
      }
    };
    rec(0);
  }

 private:
  template <class F>
  void skeletons_of(const std::vector<TensorId>& ops, F&& f) {
    skeletons_over(ops, kt_, f);
  }

  // The header of a skeleton: its distinct axes, which grid dim cuts each (-1: none) and which the loop cuts.
  // A stacked dim is cut by its partition's axis (partition()).
  struct Header {
    std::vector<Label> axes;
    std::vector<int> grid_of;
    int loop = -1;  // index into axes
    int bit(const Label& l) const {
      const Label p = partition(l);
      for (size_t i = 0; i < axes.size(); ++i)
        if (axes[i] == p) return static_cast<int>(i);
      return -1;
    }
  };
  static Header header_of(const Skeleton& sk) {
    Header h;
    for (size_t g = 0; g < sk.grid.size(); ++g) {
      h.axes.push_back(sk.grid[g]);
      h.grid_of.push_back(static_cast<int>(g));
    }
    if (!sk.loop.unit()) {
      h.loop = h.bit(sk.loop);
      if (h.loop < 0) {
        h.axes.push_back(sk.loop);
        h.grid_of.push_back(-1);
        h.loop = static_cast<int>(h.axes.size()) - 1;
      }
    }
    return h;
  }

  int64_t extent_of(const Label& l) const {
    return l.stacked() ? static_cast<int64_t>(l.parts) : sh_.axes.extent[l.axis];
  }

  // The grid sizes and loop counts a skeleton may take: divisors of the axes' extents, stacked dims cut into
  // exactly their parts, at most the target's resident-block capacity in total.
  std::vector<ir::BlockParams> instantiations(const Skeleton& sk) const {
    std::vector<ir::BlockParams> out;
    ir::BlockParams p;
    p.threads = sh_.threads;
    auto divisors = [](int64_t n) {
      std::vector<int64_t> lo, hi;
      for (int64_t i = 1; i * i <= n; ++i)
        if (n % i == 0) {
          lo.push_back(i);
          if (i * i != n) hi.push_back(n / i);
        }
      lo.insert(lo.end(), hi.rbegin(), hi.rend());
      lo.erase(lo.begin());  // 1: that grid dim would not cut its axis
      return lo;
    };
    std::function<void(size_t, int64_t)> rec = [&](size_t g, int64_t blocks) {
      if (g == sk.grid.size()) {
        if (sk.loop.unit()) {
          p.loop = 1;
          out.push_back(p);
          return;
        }
        int64_t rem = extent_of(sk.loop);
        for (size_t i = 0; i < sk.grid.size(); ++i)
          if (sk.grid[i] == sk.loop) rem /= p.grid[i];
        if (sk.loop.stacked()) {
          if (rem == static_cast<int64_t>(sk.loop.parts)) {
            p.loop = rem;
            out.push_back(p);
          }
          return;
        }
        bool looped = false;
        for (int64_t l = 2; l <= std::min(rem, kMaxLoop); l *= 2)
          if (rem % l == 0) {
            p.loop = l;
            out.push_back(p);
            looped = true;
          }
        // Where the grid cuts the loop's axis too (a split-KV block), its part may also be taken in one
        // iteration: the same block graph without a for-loop (replay drops the iterators' fmaps). Never first:
        // the first size is the one block_op finds the skeleton's block graphs at, with its loop.
        if (looped && std::find(sk.grid.begin(), sk.grid.end(), sk.loop) != sk.grid.end()) {
          p.loop = 1;
          out.push_back(p);
        }
        return;
      }
      const Label& l = sk.grid[g];
      std::vector<int64_t> sizes = l.stacked() ? std::vector<int64_t>{static_cast<int64_t>(l.parts)}
                                               : divisors(extent_of(l));
      for (int64_t s : sizes) {
        if (blocks * s > sh_.max_blocks) break;
        p.grid[g] = s;
        rec(g + 1, blocks * s);
      }
      p.grid[g] = 1;
    };
    rec(0, 1);
    return out;
  }

  // The state of building one block graph.
  struct Block {
    const Skeleton* sk = nullptr;
    Header h;
    Graph g;
    std::vector<BTensor> bt;
    std::vector<ExprId> ex;
    std::vector<ExprId> operand_exprs;
    int compute_ops = 0;
    bool final = false;
    int budget = 0;  // compute ops this block and the kernel ops after it may apply to its values, at most
    // Whether some open value is further from the spec's outputs than the ops that may still be added.
    bool too_far() const { return compute_ops + farthest_open(bt) > budget; }
  };

  // Enumerates the block graphs of `sk` at representative sizes, then instantiates each at every size and
  // continues the kernel graph with it.
  // Whether the skeleton has any block graph.
  bool block_op(const Skeleton& sk, int ops_done, const Rank* last = nullptr) {
    std::vector<ir::BlockParams> sizes = instantiations(sk);
    if (sizes.empty()) {
      prune("grid");
      return false;
    }
    bool final = ops_done + 1 == max_kernel_ops();
    const std::vector<Structure>& bodies = structures(sk, sizes.front(), max_kernel_ops() - ops_done - 1);
    for (const Structure& st : bodies) {
      for (const ir::BlockParams& p : final ? best_sizes(sk, st.body, sizes) : sizes) {
        if (stopped()) return true;
        instantiate(sk, st.body, st.scaled, p, ops_done, final, last);
      }
    }
    return !bodies.empty();
  }

  // Memoised: the block graphs of a skeleton (at the representative sizes `rep`), with `later` kernel ops
  // after it.
  const std::vector<Structure>& structures(const Skeleton& sk, const ir::BlockParams& rep, int later) {
    bool final = later == 0;
    uint64_t key = ir::hash_mix(static_cast<uint64_t>(later), rep.threads);
    for (TensorId t : sk.operands) {
      key = ir::hash_mix(key, kt_[t].expr);
      // Labels without their part counts: a structure found for one split replays at any other.
      for (int d = 0; d < kt_[t].labels.rank; ++d) key = ir::hash_mix(key, label_key(kt_[t].labels.dims[static_cast<size_t>(d)]));
      key = ir::hash_mix(key, kt_[t].labels.rank);
    }
    for (const Label& l : sk.grid) key = ir::hash_mix(key, label_key(l));
    key = ir::hash_mix(key, label_key(sk.loop));
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    std::vector<Structure> found;
    Block b;
    b.sk = &sk;
    b.h = header_of(sk);
    b.final = final;
    b.budget = sh_.options.max_block_ops * (1 + later);
    std::vector<ir::TensorType> types;
    for (TensorId t : sk.operands) {
      types.push_back(kg_.type(t));
      b.operand_exprs.push_back(kt_[t].expr);
    }
    b.g = Graph::make_block(rep, types);
    if (add_iters(b)) body_dfs(b, Rank{}, found);
    return memo_.emplace(key, std::move(found)).first->second;
  }

  static uint64_t label_key(const Label& l) { return (uint64_t{l.axis} << 16 | l.over) + 1; }

  // One iterator per operand: imap and fmap cut the skeleton's axes wherever the operand has them.
  bool add_iters(Block& b) {
    for (size_t o = 0; o < b.sk->operands.size(); ++o) {
      const KTensor& k = kt_[b.sk->operands[o]];
      std::array<int8_t, ir::kGridDims> imap{ir::kPhi, ir::kPhi, ir::kPhi};
      int8_t fmap = ir::kPhi;
      BTensor t;
      t.iter = true;
      t.expr = k.expr;
      t.shift = k.shift;
      t.labels = k.labels;
      t.dist = k.dist;
      t.eclass = class_of(k.expr);
      for (int d = 0; d < k.labels.rank; ++d) {
        Label l = k.labels.dims[static_cast<size_t>(d)];
        int bit = l.unit() ? -1 : b.h.bit(l);
        if (bit < 0) {
          if (l.stacked()) return false;
          continue;
        }
        if (int g = b.h.grid_of[static_cast<size_t>(bit)]; g >= 0) {
          if (imap[static_cast<size_t>(g)] != ir::kPhi) return false;  // two dims of one operand on one axis
          imap[static_cast<size_t>(g)] = static_cast<int8_t>(d);
        }
        if (bit == b.h.loop) {
          if (fmap != ir::kPhi) return false;
          fmap = static_cast<int8_t>(d);
        }
        if (l.stacked()) {
          t.labels.dims[static_cast<size_t>(d)] = Label{l.axis, 0, 0};
          (k.shift ? t.pmax : t.psum) |= static_cast<uint8_t>(1u << bit);
          if (k.maxdep) t.maxdep |= static_cast<uint8_t>(1u << bit);
        }
      }
      try {
        b.g.add_iter(static_cast<uint32_t>(o), imap, fmap);
      } catch (const UserError&) {
        prune("shape");
        return false;
      }
      b.bt.push_back(t);
      b.ex.push_back(t.expr);
    }
    // Every grid dim and the loop must cut some operand.
    for (size_t i = 0; i < b.h.axes.size(); ++i) {
      bool cut = false;
      for (const BTensor& t : b.bt)
        for (int d = 0; d < t.labels.rank; ++d)
          cut |= t.labels.dims[static_cast<size_t>(d)] == b.h.axes[i] || ((t.psum | t.pmax) >> i & 1);
      if (!cut) return false;
    }
    return true;
  }

  bool has_axis_in(const BTensor& t, uint8_t bits, const Header& h) const {
    for (int d = 0; d < t.labels.rank; ++d) {
      int bit = h.bit(t.labels.dims[static_cast<size_t>(d)]);
      if (bit >= 0 && (bits >> bit & 1)) return true;
    }
    return false;
  }

  // Tries one block op (body or epilogue); on success the op is appended and its tensor recorded.
  bool block_try(Block& b, OpCode op, std::initializer_list<TensorId> operands, const Attrs& a, bool epilogue) {
    ++stats_.states;
    const ir::OpInfo& info = ir::op_info(op);
    const BTensor& x = b.bt[*operands.begin()];
    const BTensor* y = operands.size() > 1 ? &b.bt[*(operands.begin() + 1)] : nullptr;
    if (y ? !scalar_operands_ok(op, x.scalar, y->scalar, y->shift, sh_.scaled_outputs)
          : !scalar_consumer_ok(x.scalar, op, sh_.scaled_outputs))
      return prune("scalar"), false;
    if (!shift_rule(op, x.shift, x.expr, y ? y->shift : false, x.shifted)) return false;
    Label reduced;
    auto labels = infer_labels(op, a, &x.labels, y ? &y->labels : nullptr, &reduced);
    if (!labels || !spec_reduces(reduced)) {
      prune("axes");
      return false;
    }
    BTensor t;
    t.labels = *labels;
    t.epilogue = epilogue;
    int rbit = reduced.unit() ? -1 : b.h.bit(reduced);
    // Partial reductions: a value reduced over only this block's (or iteration's) part of an axis.
    switch (info.kind) {
      case OpKind::Unary:
        if (x.psum && !(info.field == ir::FieldSem::ScaleConst)) return prune("partial"), false;
        if (info.field == ir::FieldSem::ScaleConst || info.field == ir::FieldSem::AddConst) {
          if (x.scalar_chain >= kMaxScalarChain) return prune("scalar"), false;
          t.scalar_chain = static_cast<uint8_t>(x.scalar_chain + 1);
          t.scalar = op;
        }
        t.psum = x.psum;
        t.maxdep = x.maxdep;
        t.squared = info.field == ir::FieldSem::Square;
        break;
      case OpKind::Norm:
        if (x.psum || rbit >= 0) return prune("partial"), false;
        t.maxdep = x.maxdep;
        break;
      case OpKind::Reduce:
        if (op == OpCode::reduce_max) {
          if (x.psum) return prune("partial"), false;
          if (x.shifted) return prune("shift"), false;
          if (rbit >= 0) t.pmax = static_cast<uint8_t>(1u << rbit);
        } else {
          // A sum of squares over a whole axis is what rms_norm computes: the block op does it in one.
          if (x.squared && rbit < 0) return prune("norm"), false;
          t.psum = x.psum;
          t.maxdep = x.maxdep;
          if (rbit >= 0) t.psum |= static_cast<uint8_t>(1u << rbit);
        }
        break;
      case OpKind::Binary:
        if (y->shift) {  // sub(x, max): x's state
          t.psum = x.psum;
          t.shifted = true;
          t.maxdep = y->pmax;
          if (x.psum) return prune("partial"), false;
          if (x.shifted) return prune("shift"), false;
          break;
        }
        // Values scaled by a partial max: sums need the same scaling, a quotient of two cancels it.
        if (op == OpCode::add || op == OpCode::sub) {
          if (x.psum != y->psum || x.maxdep != y->maxdep) return prune("partial"), false;
          t.psum = x.psum;
          t.maxdep = x.maxdep;
        } else {
          t.maxdep = op == OpCode::div && x.maxdep == y->maxdep ? 0 : x.maxdep | y->maxdep;
          if (x.psum && y->psum) return prune("partial"), false;
          if (op == OpCode::div && y->psum) return prune("partial"), false;
          if ((x.psum && has_axis_in(*y, x.psum, b.h)) || (y->psum && has_axis_in(x, y->psum, b.h)))
            return prune("partial"), false;
          t.psum = x.psum | y->psum;
        }
        break;
      case OpKind::Matmul:
        if (x.psum && y->psum) return prune("partial"), false;
        if ((x.psum && has_axis_in(*y, x.psum, b.h)) || (y->psum && has_axis_in(x, y->psum, b.h)))
          return prune("partial"), false;
        t.psum = x.psum | y->psum;
        t.maxdep = x.maxdep | y->maxdep;
        if (rbit >= 0) t.psum |= static_cast<uint8_t>(1u << rbit);
        break;
      default:
        return false;
    }
    // An elementwise op over two values of the e-graph: its term is one e-node over their classes, so the
    // oracle answers before the op is built (most candidate ops end here).
    if (info.kind == OpKind::Binary && sh_.options.abstract_pruning && !x.shift && !y->shift &&
        x.eclass != UINT32_MAX && y->eclass != UINT32_MAX &&
        !sh_.oracle->is_subexpr_class(sh_.oracle->class_of_node(ir::binary_kind(op), 0, x.eclass, y->eclass)))
      return prune("abstract"), false;
    size_t before = b.g.nodes().size();
    ExprId e = append_checked(b.g, op, std::span<const TensorId>(operands.begin(), operands.size()), a, b.ex,
                              b.operand_exprs);
    if (e == ir::kNoExpr) return false;
    t.expr = e;
    t.shift = arena_.node(e).kind == ExprKind::Shift;
    // The same value again (same term, axes and partial state) is redundant, unless the op changes what the
    // abstraction hides: constants (scalar ops) and max subtraction.
    bool hides = info.field == ir::FieldSem::ScaleConst || info.field == ir::FieldSem::AddConst ||
                 (y && y->shift);
    uint32_t cls = t.shift ? UINT32_MAX : class_of(e);
    if (!hides)
      for (const BTensor& o : b.bt)
        if ((o.expr == e || (cls != UINT32_MAX && o.cls == cls)) && o.labels == t.labels && o.psum == t.psum &&
            o.pmax == t.pmax && o.epilogue == epilogue && !o.iter && o.scalar == OpCode::input) {
          b.g.truncate(before);
          prune("redundant");
          return false;
        }
    t.cls = hides ? UINT32_MAX : cls;
    t.eclass = cls;
    t.dist = sh_.options.abstract_pruning ? static_cast<uint8_t>(sh_.oracle->distance_of_class(cls)) : 0;
    for (TensorId o : operands) check_step(b.bt[o].dist, e);
    b.bt.push_back(t);
    b.ex.push_back(e);
    for (TensorId o : operands) ++b.bt[o].uses;
    ++b.compute_ops;
    return true;
  }

  void block_undo(Block& b) {
    const ir::Node& n = b.g.nodes().back();
    for (TensorId o : b.g.operands(n)) --b.bt[o].uses;
    b.bt.resize(n.results_begin);
    b.ex.resize(n.results_begin);
    if (ir::op_info(n.op).kind != OpKind::Save && ir::op_info(n.op).kind != OpKind::Iter) --b.compute_ops;
    b.g.truncate(b.g.nodes().size() - 1);
  }

  // Block ops over the stage's tensors from `lo` on, in canonical order after `last`. Only an op whose newest
  // operand ties with `last`'s needs its full rank to decide; `extend` ranks the ones that are kept.
  template <class F>
  void for_each_block_op(Block& b, TensorId lo, Rank last, bool epilogue, F&& f) {
    // The block-level binary and matmul ops, from the op table once.
    static const std::vector<OpCode> pair_ops = [] {
      std::vector<OpCode> ops;
      for (const ir::OpInfo& info : ir::all_ops())
        if ((info.levels & ir::kBlockLevel) && (info.kind == OpKind::Binary || info.kind == OpKind::Matmul))
          ops.push_back(static_cast<OpCode>(&info - ir::all_ops().data()));
      return ops;
    }();
    TensorId n = static_cast<TensorId>(b.bt.size());
    auto eligible = [&](TensorId t) { return t >= lo && b.bt[t].epilogue == epilogue; };
    auto after_last = [&](std::span<const TensorId> operands, OpCode op, const Attrs& at) {
      uint32_t newest = *std::max_element(operands.begin(), operands.end()) + 1;
      if (newest != last.newest) return newest > last.newest;
      return last < rank_of(operands, op, attr_key(at));
    };
    for (TensorId a = lo; a < n; ++a) {
      if (!eligible(a)) continue;
      for_each_unary_like(b.g.type(a), b.bt[a].labels, b.bt[a].expr, [&](OpCode op, const Attrs& at) {
        if (!ir::op_at_level(op, ir::kBlockLevel)) return;
        if (after_last(std::array<TensorId, 1>{a}, op, at)) f(op, {a}, at);
      });
      for (TensorId c = lo; c < n; ++c) {
        if (a == c || !eligible(c) || std::max(a, c) + 1 < last.newest) continue;
        for (OpCode op : pair_ops) {
          const ir::OpInfo& info = ir::op_info(op);
          if (info.kind == OpKind::Binary && (info.facts & ir::kCommutative) != 0 && a > c) continue;
          if (after_last(std::array<TensorId, 2>{a, c}, op, Attrs{})) f(op, {a, c}, Attrs{});
        }
      }
    }
  }

  static constexpr TensorId kNone = UINT32_MAX;
  // A scalar op's result is consumed by the very next op (scalar_consumer_ok says which): a constant belongs to
  // the op it feeds, and leaving it open would only multiply the ways of writing the same graph.
  static TensorId pending_scalar(const Block& b) {
    if (b.bt.empty()) return kNone;
    const BTensor& t = b.bt.back();
    return t.uses == 0 && t.scalar != OpCode::input ? static_cast<TensorId>(b.bt.size() - 1) : kNone;
  }

  void body_dfs(Block& b, Rank last, std::vector<Structure>& found) {
    if (stopped()) return;
    if (b.too_far()) return prune("distance");
    close_body(b, found);
    if (b.compute_ops + 1 >= sh_.options.max_block_ops) return;
    // Open values (not yet consumed) each need an accumulator; iterators must be consumed in the body.
    int open = 0;
    for (const BTensor& t : b.bt)
      if (t.uses == 0 && !t.iter) ++open;
    if (open > kMaxOpen) return prune("width");
    extend(b, last, false, [&](Rank r) { body_dfs(b, r, found); });
  }

  // Every next op of the stage (body or epilogue) in canonical order after `last`; `next` continues from it.
  template <class Next>
  void extend(Block& b, Rank last, bool epilogue, Next&& next) {
    TensorId pending = pending_scalar(b);
    auto try_op = [&](OpCode op, std::initializer_list<TensorId> ops, const Attrs& a) {
      if (stopped()) return;
      if (pending != kNone && std::find(ops.begin(), ops.end(), pending) == ops.end()) return prune("scalar");
      if (!block_try(b, op, ops, a, epilogue)) return;
      if (b.too_far())
        prune("distance");
      else
        next(rank_of(std::span<const TensorId>(ops.begin(), ops.size()), op, attr_key(a)));
      block_undo(b);
    };
    for_each_block_op(b, 0, last, epilogue, try_op);
  }

  // Accumulators: every open body value gets one (and a max that some rescaling sum uses may get one too).
  void close_body(Block& b, std::vector<Structure>& found) {
    std::vector<TensorId> open, shifts, loose_maxes;
    int lb = b.h.loop;
    for (TensorId t = 0; t < b.bt.size(); ++t) {
      const BTensor& x = b.bt[t];
      // A running max (over the loop) that nothing consumed yet may still serve a rescaling sum or be
      // accumulated itself: it is optional below and must be used by one of the two.
      bool loop_max = x.shift && lb >= 0 && (x.pmax >> lb & 1);
      if (x.shift) shifts.push_back(t);
      if (x.uses == 0 && loop_max) {
        loose_maxes.push_back(t);
        continue;
      }
      // An unused iterator is an error, unless it reads partial results the loop combines (a combining step
      // accumulates its iterators directly).
      if (x.uses == 0 && x.iter && !(lb >= 0 && (x.psum >> lb & 1))) return;
      if (x.uses == 0) open.push_back(t);
    }
    if (open.empty() || static_cast<int>(open.size()) > kMaxSaves) return;
    if (b.compute_ops + static_cast<int>(open.size()) > sh_.options.max_block_ops) return;
    // Per open value, its accumulator choices: (op, rescale partner).
    std::vector<std::vector<std::pair<OpCode, TensorId>>> choices;
    for (TensorId t : open) {
      const BTensor& x = b.bt[t];
      std::vector<std::pair<OpCode, TensorId>> c;
      if (lb < 0) {
        c.push_back({x.shift ? OpCode::acc_max : OpCode::acc_sum, 0});
      } else if (x.shift) {
        if (x.pmax >> lb & 1) c.push_back({OpCode::acc_max, 0});
      } else if ((x.psum >> lb & 1) && !loop_dim(b, x)) {
        // A value scaled by the iteration's own max needs the rescaling sum; any other the plain one.
        if (x.maxdep >> lb & 1) {
          for (TensorId m : shifts)
            if (b.bt[m].pmax >> lb & 1) c.push_back({OpCode::acc_rescale_sum, m});
        } else {
          c.push_back({OpCode::acc_sum, 0});
        }
      }
      if (c.empty()) return prune("accumulator");
      choices.push_back(std::move(c));
    }
    // Maxima consumed in the body may also be accumulated (their running max is saved for a combining step).
    std::vector<TensorId> optional;
    if (lb >= 0)
      for (TensorId m : shifts)
        if (b.bt[m].pmax >> lb & 1) optional.push_back(m);
    std::vector<size_t> pick(choices.size(), 0);
    size_t mark = b.g.nodes().size();
    while (true) {
      for (uint32_t mask = 0; mask < (1u << optional.size()); ++mask) {
        if (stopped()) return;
        bool ok = true;
        for (size_t i = 0; i < open.size() && ok; ++i)
          ok = add_acc(b, choices[i][pick[i]].first, open[i], choices[i][pick[i]].second);
        for (size_t i = 0; i < optional.size() && ok; ++i)
          if (mask >> i & 1) ok = add_acc(b, OpCode::acc_max, optional[i], 0);
        for (TensorId m : loose_maxes) ok = ok && b.bt[m].uses > 0;
        if (ok && b.compute_ops <= sh_.options.max_block_ops)
          epilogue_dfs(b, Rank{}, found);
        while (b.g.nodes().size() > mark) block_undo(b);
      }
      size_t i = 0;
      while (i < pick.size() && ++pick[i] == choices[i].size()) pick[i++] = 0;
      if (i == pick.size()) break;
    }
  }

  bool loop_dim(const Block& b, const BTensor& x) const {
    const Label& l = b.h.axes[static_cast<size_t>(b.h.loop)];
    for (int d = 0; d < x.labels.rank; ++d)
      if (x.labels.dims[static_cast<size_t>(d)] == l) return true;
    return false;
  }

  bool add_acc(Block& b, OpCode op, TensorId x, TensorId partner) {
    ++stats_.states;
    if (!scalar_consumer_ok(b.bt[x].scalar, op, sh_.scaled_outputs)) return prune("scalar"), false;
    BTensor t = b.bt[x];
    t.scalar = OpCode::input;
    t.uses = 0;
    t.iter = false;
    t.epilogue = true;
    t.scalar_chain = 0;
    int lb = b.h.loop;
    if (lb >= 0 && b.h.grid_of[static_cast<size_t>(lb)] < 0) {  // the loop completes its axis
      t.psum &= static_cast<uint8_t>(~(1u << lb));
      t.pmax &= static_cast<uint8_t>(~(1u << lb));
      t.maxdep &= static_cast<uint8_t>(~(1u << lb));
    }
    std::array<TensorId, 2> operands{x, partner};
    ExprId e = append_checked(b.g, op, std::span<const TensorId>(operands.data(), op == OpCode::acc_rescale_sum ? 2 : 1),
                              {}, b.ex, b.operand_exprs);
    if (e == ir::kNoExpr) return false;
    t.expr = e;
    t.shift = op == OpCode::acc_max;
    t.eclass = t.shift ? UINT32_MAX : class_of(e);
    t.dist = distance(e);
    check_step(b.bt[x].dist, e);
    b.bt.push_back(t);
    b.ex.push_back(e);
    ++b.bt[x].uses;
    if (op == OpCode::acc_rescale_sum) ++b.bt[partner].uses;
    ++b.compute_ops;
    return true;
  }

  void epilogue_dfs(Block& b, Rank last, std::vector<Structure>& found) {
    if (stopped()) return;
    try_saves(b, found);
    if (b.compute_ops >= sh_.options.max_block_ops) return;
    // Without a for-loop the accumulators change nothing, so an op after them is the same graph as the op
    // before them: canonically every op is in the body.
    if (b.h.loop < 0) return;
    extend(b, last, true, [&](Rank r) { epilogue_dfs(b, r, found); });
  }

  // Savers for every open epilogue value; the omap follows the axes: a grid dim cuts the output dim with its
  // axis, or stacks partial results along the first free dim.
  void try_saves(Block& b, std::vector<Structure>& found) {
    std::vector<TensorId> open;
    for (TensorId t = 0; t < b.bt.size(); ++t) {
      const BTensor& x = b.bt[t];
      if (x.uses == 0 && !x.epilogue) return;  // cannot happen after close_body; kept for safety
      if (x.uses == 0) open.push_back(t);
      if (x.uses == 0 && !scalar_consumer_ok(x.scalar, OpCode::save, sh_.scaled_outputs)) return prune("scalar");
    }
    if (open.empty() || open.size() > static_cast<size_t>(kMaxSaves)) return;
    if (b.final && open.size() != sh_.spec.outputs().size()) return prune("final");
    // Partial results scaled by their part's max are of use only together with that max.
    uint8_t maxes = 0, scaled = 0;
    for (TensorId t : open) (b.bt[t].shift ? maxes : scaled) |= b.bt[t].shift ? b.bt[t].pmax : b.bt[t].maxdep;
    if ((scaled & ~maxes) != 0) return prune("shift");
    size_t mark = b.g.nodes().size();
    bool ok = true;
    for (TensorId t : open) {
      const BTensor& x = b.bt[t];
      if (b.final && (x.shift || x.psum || x.maxdep || !equivalent(x.expr))) {
        ok = false;
        prune("final");
        break;
      }
      if (x.shift && !x.pmax) {  // a complete max is of no use outside
        ok = false;
        prune("shift");
        break;
      }
      Attrs a;
      std::array<bool, ir::kMaxRank> used{};
      for (size_t g = 0; g < b.sk->grid.size() && ok; ++g) {
        const Label& l = b.sk->grid[g];
        int bit = b.h.bit(l);
        int dim = -1;
        for (int d = 0; d < x.labels.rank; ++d)
          if (x.labels.dims[static_cast<size_t>(d)] == l) dim = d;
        // Partial results stack along a free dim of extent 1 if there is one (a new outer axis), else along the
        // last free dim: a combine can then give each row its own block and walk the parts along that dim. Stacked
        // along a free dim of rows, the parts would be the outer part of the rows, which no grid dim of a combine
        // cuts row by row (qknorm_h8_d128_k1024: 64 rows a head not cut by the grid; its per-row combine was out
        // of reach and the split-KV flash form with it, 11.0 us on the H100 against the 13.5 of the form found).
        if (dim < 0 && ((x.psum | x.pmax) >> bit & 1)) {
          for (int d = 0; d < x.labels.rank; ++d) {
            const Label& ld = x.labels.dims[static_cast<size_t>(d)];
            if (used[static_cast<size_t>(d)] || grid_label(b, ld)) continue;
            if (dim < 0 || extent_of(x.labels.dims[static_cast<size_t>(dim)]) != 1) dim = d;
          }
        }
        if (dim < 0 || used[static_cast<size_t>(dim)]) {
          ok = false;
          prune("omap");
          break;
        }
        used[static_cast<size_t>(dim)] = true;
        a.map[g] = static_cast<int8_t>(dim);
      }
      if (!ok) break;
      ++stats_.states;
      try {
        b.g.add1(OpCode::save, {t}, a);
      } catch (const UserError&) {
        ok = false;
        prune("shape");
        break;
      }
      const ExprId saved = x.expr;  // before the push_back below, which may move what x refers to
      b.bt.push_back(BTensor{});
      b.ex.push_back(saved);
      ++b.bt[t].uses;
    }
    if (ok) {
      Structure st{b.g, {}};
      for (TensorId t : open) st.scaled.push_back(b.bt[t].maxdep != 0);
      found.push_back(std::move(st));
    }
    while (b.g.nodes().size() > mark) {
      const ir::Node& n = b.g.nodes().back();
      --b.bt[b.g.operands(n)[0]].uses;
      b.bt.pop_back();
      b.ex.pop_back();
      b.g.truncate(b.g.nodes().size() - 1);
    }
  }

  bool grid_label(const Block& b, const Label& l) const {
    return std::find(b.sk->grid.begin(), b.sk->grid.end(), l) != b.sk->grid.end();
  }

  // Rebuilds `body` with the grid sizes and loop count `p`, checks it against the target and the abstraction at
  // those sizes, and continues the kernel graph with the block op.
  // `body` rebuilt with the grid sizes and loop count `p`; nullopt when the shapes do not divide.
  static std::optional<Graph> replay(const Graph& body, const ir::BlockParams& p,
                                     const std::vector<ir::TensorType>& types) {
    Graph g = Graph::make_block(p, types);
    try {
      for (const ir::Node& n : body.nodes()) {
        if (n.op == OpCode::iter)
          g.add_iter(n.attrs.index, n.attrs.map, p.loop == 1 ? ir::kPhi : n.attrs.fmap, n.attrs.mask);
        else
          g.add(n.op, body.operands(n), n.attrs);
      }
    } catch (const UserError&) {
      return std::nullopt;
    }
    return g;
  }

  // The sizes a last block op is worth instantiating at: its kernel's own cost decides (the kernels before it
  // are fixed), so only the cheapest few become candidates. Each size is priced where the op stands, its operands
  // as the kernels before it leave them (a combine reading partial results from the workspace runs unlike one
  // reading spec inputs: H100 gqa_h16_d80_k1024's combine grids tie alone at 5.17 us, where in the program the
  // best is 3.89). Memoised by the body's structure, the sizes offered and the kernel's context hash (by
  // content, never by address: a key that depends on where a body lies in memory makes the search depend on the
  // allocator).
  const std::vector<ir::BlockParams>& best_sizes(const Skeleton& sk, const Graph& body,
                                                 const std::vector<ir::BlockParams>& sizes) {
    std::vector<ir::TensorType> types;
    for (TensorId t : sk.operands) types.push_back(kg_.type(t));
    uint64_t key = ir::hash_mix(body.hash(), kernel_context_hash(kg_, sk.operands));
    for (const ir::BlockParams& p : sizes) {
      for (int64_t g : p.grid) key = ir::hash_mix(key, static_cast<uint64_t>(g));
      key = ir::hash_mix(ir::hash_mix(key, static_cast<uint64_t>(p.threads)), static_cast<uint64_t>(p.loop));
    }
    if (auto it = best_sizes_.find(key); it != best_sizes_.end()) return it->second;
    std::vector<std::pair<double, size_t>> timed;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::optional<Graph> g = replay(body, sizes[i], types);
      if (!g) continue;
      const size_t before = kg_.nodes().size();
      try {
        kg_.add_block(sk.operands, std::move(*g));
      } catch (const UserError&) {
        continue;
      }
      KernelCost c = estimate_kernel(kg_, kg_.node(static_cast<ir::NodeId>(before)), sh_.target);
      kg_.truncate(before);
      if (c.infeasible.empty()) timed.push_back({c.time_us, i});
    }
    std::sort(timed.begin(), timed.end());
    std::vector<ir::BlockParams> best;
    for (size_t i = 0; i < timed.size() && i < kSizesPerStructure; ++i) best.push_back(sizes[timed[i].second]);
    return best_sizes_.emplace(key, std::move(best)).first->second;
  }

  void instantiate(const Skeleton& sk, const Graph& body, const std::vector<bool>& scaled, const ir::BlockParams& p,
                   int ops_done, bool final, const Rank* last) {
    ++stats_.states;
    std::vector<ir::TensorType> types;
    std::vector<ExprId> oex;
    for (TensorId t : sk.operands) {
      types.push_back(kg_.type(t));
      oex.push_back(kt_[t].expr);
    }
    std::optional<Graph> replayed = replay(body, p, types);
    if (!replayed) return prune("shape");
    Graph g = std::move(*replayed);
    // Tile sizes change the sums' sizes in the terms: check the saved values again.
    std::vector<ExprId> bex = ir::abstract_block_exprs(g, oex, arena_);
    for (TensorId t : g.outputs())
      if (final ? !equivalent(bex[t]) : !subexpr(bex[t])) return prune("abstract");
    size_t before = kg_.nodes().size();
    std::vector<TensorId> res;
    try {
      res = kg_.add_block(sk.operands, std::move(g));
    } catch (const UserError&) {
      return prune("shape");
    }
    const ir::Node& node = kg_.node(static_cast<ir::NodeId>(before));
    Rank r = rank_of(sk.operands, OpCode::block, kg_.body(node).hash());
    if (last && !(*last < r)) {
      kg_.truncate(before);
      return prune("canonical");
    }
    detail::Work w = detail::block_work(kg_, node, sh_.target);
    if (w.k.smem_bytes > targets::block_smem_limit(sh_.target)) {
      kg_.truncate(before);
      return prune("smem");
    }
    // The results' labels: the tiles' labels, with stacked dims where a grid dim stacked partial results.
    const Graph& bg = kg_.body(node);
    for (size_t i = 0; i < res.size(); ++i) {
      const ir::Node& save = bg.node(bg.tensor(bg.outputs()[i]).producer);
      TensorId src = bg.operands(save)[0];
      KTensor k;
      k.expr = bex[bg.outputs()[i]];
      k.shift = arena_.node(k.expr).kind == ExprKind::Shift;
      k.maxdep = scaled[i];
      k.dist = distance(k.expr);
      k.labels = tile_labels(bg, src, sk);
      for (size_t gi = 0; gi < sk.grid.size(); ++gi) {
        int d = save.attrs.map[gi];
        Label& l = k.labels.dims[static_cast<size_t>(d)];
        if (l == sk.grid[gi]) continue;
        const Label& axis = sk.grid[gi];
        l = Label{l.axis, axis.stacked() ? axis.over : axis.axis, static_cast<uint32_t>(p.grid[gi])};
      }
      kt_.resize(res[i] + 1);
      kt_[res[i]] = k;
    }
    for (TensorId o : sk.operands) ++kt_[o].uses;
    // Branch and bound: kernels only add time, so a prefix that already costs more than every candidate this
    // task keeps cannot place one (the bound is the task's own, so the result does not depend on threads).
    if (bound_ && *bound_ < INFINITY && estimate(kg_, sh_.target).total_us > *bound_) {
      prune("cost");
    } else {
      kernel_step(ops_done + 1, r);
    }
    for (TensorId o : sk.operands) --kt_[o].uses;
    kt_.resize(res.front());
    kg_.truncate(before);
  }

  // The labels of block tensor `t`, recomputed from the body (the generator's per-tensor state is gone by now).
  Labels tile_labels(const Graph& bg, TensorId t, const Skeleton& sk) const {
    const ir::Node& n = bg.node(bg.tensor(t).producer);
    auto ops = bg.operands(n);
    if (n.op == OpCode::iter) {
      Labels l = kt_[sk.operands[n.attrs.index]].labels;
      for (int d = 0; d < l.rank; ++d)
        if (l.dims[static_cast<size_t>(d)].stacked())
          l.dims[static_cast<size_t>(d)] = Label{l.dims[static_cast<size_t>(d)].axis, 0, 0};
      return l;
    }
    if (ir::op_info(n.op).kind == OpKind::Accum) return tile_labels(bg, ops[0], sk);
    Labels a = tile_labels(bg, ops[0], sk);
    Labels b2;
    if (ops.size() > 1) b2 = tile_labels(bg, ops[1], sk);
    auto l = infer_labels(n.op, n.attrs, &a, ops.size() > 1 ? &b2 : nullptr, nullptr);
    MG_CHECK(l.has_value(), "generator: labels of a built block graph do not agree");
    return *l;
  }

  const Generator::Shared& sh_;
  GenStats& stats_;
  const std::function<void(Candidate&&)>& sink_;
  const std::atomic<bool>& stop_;
  const double* bound_ = nullptr;
  std::vector<std::pair<const char*, uint64_t>> pruned_;
  ExprArena arena_;
  mutable SubexprOracle::TermClasses classes_;  // e-classes of arena_'s terms, by ExprId
  Graph kg_;
  std::vector<KTensor> kt_;
  std::unordered_map<uint64_t, std::vector<Structure>> memo_;
  std::unordered_map<uint64_t, std::vector<Skeleton>> live_skeletons_;
  std::unordered_map<uint64_t, std::vector<ir::BlockParams>> best_sizes_;
};

std::vector<Task> Explorer::root_tasks(const Generator::Shared& sh) {
  // The first op of every candidate: block ops over the spec inputs (one task per skeleton), then predefined ops.
  std::vector<Task> tasks;
  std::vector<KTensor> kt;
  for (TensorId t : sh.spec.inputs()) {
    KTensor k;
    k.labels = sh.axes.tensors[t];
    kt.push_back(k);
  }
  tasks.push_back(Task{});  // "a predefined op first"
  std::vector<TensorId> pick;
  size_t n = kt.size();
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) > 4) continue;
    pick.clear();
    for (TensorId t = 0; t < n; ++t)
      if (mask >> t & 1) pick.push_back(t);
    skeletons_over(pick, kt, [&](const Skeleton& sk) {
      tasks.push_back(Task{true, sk});
    });
  }
  return tasks;
}

// The constants a candidate may need, with the e-class each applies to: the spec's scalars, and each
// rms_norm's 1/n and eps (both on the sum of squares: rsqrt(sum(x²)·1/n + eps)).
void collect_constants(Generator::Shared& sh) {
  std::vector<ExprId> ex = ir::abstract_exprs(sh.spec, sh.arena);
  auto add = [&](OpCode op, double s, ExprId on) {
    uint32_t cls = sh.oracle->class_of(sh.arena, on);
    if (cls == UINT32_MAX) return;  // not a term of the spec's e-graph: no candidate could use it
    for (const auto& u : sh.scalar_uses)
      if (u.op == op && u.s == s && u.cls == cls) return;
    sh.scalar_uses.push_back({op, s, cls});
  };
  for (const ir::Node& n : sh.spec.nodes()) {
    const ir::OpInfo& info = ir::op_info(n.op);
    if (n.num_operands == 0) continue;
    ExprId x = ex[sh.spec.operands(n)[0]];
    if (info.attrs & ir::kAttrS) {
      add(n.op, n.attrs.s, x);
      sh.scaled_outputs = true;
    }
    if (info.kind == OpKind::Norm) {
      int64_t len = sh.spec.type(sh.spec.operands(n)[0]).dim(n.attrs.dim);
      ExprId sq = sh.arena.sum(len, sh.arena.mul(x, x));
      add(OpCode::mul_scalar, 1.0 / static_cast<double>(len), sq);
      add(OpCode::add_scalar, n.attrs.eps, sq);
      if (std::find(sh.eps.begin(), sh.eps.end(), n.attrs.eps) == sh.eps.end()) sh.eps.push_back(n.attrs.eps);
    }
  }
}

// What the oracle's distance may assume of the candidates (FusedOps): the generator builds no softmax and
// no concat (for_each_predefined), and a matmul that sums over a real axis only where some input has that
// axis last and some input has it second to last. Every op keeps a label at its place counted from the right
// (elementwise ops broadcast right-aligned, a matmul keeps its operands' two last places, a reduction leaves
// a unit label), so the places an axis can take are the ones it has in the inputs.
FusedOps fused_ops(const Generator::Shared& sh) {
  FusedOps f;
  f.softmax = false;
  f.concat = false;
  f.matmul = false;
  for (TensorId a : sh.spec.inputs())
    for (TensorId b : sh.spec.inputs()) {
      const Labels &la = sh.axes.tensors[a], &lb = sh.axes.tensors[b];
      if (la.rank < 1 || lb.rank < 2) continue;
      const Label& k = la.dims[la.rank - 1u];
      if (!k.unit() && k == lb.dims[lb.rank - 2u]) f.matmul = true;
    }
  return f;
}

}  // namespace

Generator::Generator(const Graph& spec, const targets::Target& target, const SearchOptions& options)
    : shared_(std::make_unique<Shared>()) {
  Shared& sh = *shared_;
  sh.spec = spec;
  sh.target = target;
  sh.options = options;
  if (spec.outputs().empty()) throw UserError("the spec returns nothing");
  for (const ir::Node& n : spec.nodes())
    if (n.op == OpCode::block) throw UserError("the spec already has block ops; give the search a plain kernel graph");
  sh.axes = analyze_axes(spec);
  sh.out_exprs = ir::output_exprs(spec, sh.arena);
  sh.oracle = std::make_unique<SubexprOracle>(sh.arena, sh.out_exprs, OracleLimits{}, fused_ops(sh));
  for (TensorId t : spec.outputs()) sh.out_labels.push_back(sh.axes.tensors[t]);
  collect_constants(sh);
  for (const ir::Node& n : spec.nodes()) {
    const ir::OpInfo& info = ir::op_info(n.op);
    if (info.kind == OpKind::Softmax) sh.safe_exp = true;
    if (n.num_operands == 0 || n.num_results == 0) continue;
    const Labels& in = sh.axes.tensors[spec.operands(n)[0]];
    int d = -1;
    if (info.kind == OpKind::Matmul) d = in.rank - 1;
    if (info.kind == OpKind::Reduce || info.kind == OpKind::Norm || info.kind == OpKind::Softmax) d = n.attrs.dim;
    if (d < 0 || d >= in.rank) continue;
    uint16_t a = in.dims[static_cast<size_t>(d)].axis;
    if (a != 0 && std::find(sh.reduced_axes.begin(), sh.reduced_axes.end(), a) == sh.reduced_axes.end())
      sh.reduced_axes.push_back(a);
  }
  sh.max_blocks = target.execution.sms * std::max<int64_t>(1, target.execution.max_blocks_per_sm);
  sh.threads = std::min(4 * target.execution.warp_size, target.execution.max_threads_per_block);
  sh.tasks = Explorer::root_tasks(sh);
}

Generator::~Generator() = default;

size_t Generator::num_tasks() const { return shared_->tasks.size(); }

void Generator::explore(size_t task, GenStats& stats, const std::function<void(Candidate&&)>& sink,
                        const std::atomic<bool>& stop, const double* bound) const {
  Explorer e(*shared_, stats, sink, stop, bound);
  e.run(shared_->tasks.at(task));
}

}  // namespace morgana::search
