// The kernel level of the generator's walk, and the spec's analysis it starts from. The pieces it is built of:
// search/gen_state.h (what a prefix knows of its values), search/gen_rules.h (the pruning rules),
// search/gen_space.h (skeletons, sizes, tasks), search/gen_terms.h (the task's terms and counters) and
// search/gen_block.h (a block op's block graphs).
#include "search/generator.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "ir/abstract_expr.h"
#include "ir/diagnostic.h"
#include "search/axes.h"
#include "search/cost_model.h"
#include "search/gen_block.h"
#include "search/gen_rules.h"
#include "search/gen_space.h"
#include "search/gen_terms.h"
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

using namespace gen;  // the walk's state, rules and space, written for it

// One task's depth-first exploration (one thread): kernel ops in canonical order, each a predefined op or a
// block op (its block graphs from BlockGraphs, instantiated at every size), until the spec's outputs are there.
class Explorer {
 public:
  Explorer(const Generator::Shared& sh, GenStats& stats, const std::function<void(Candidate&&)>& sink,
           const std::atomic<bool>& stop, const double* bound)
      : sh_(sh), t_(sh, stats, stop), blocks_(t_), sink_(sink), bound_(bound) {
    for (TensorId t : sh.spec.inputs()) {
      TensorId k = kg_.add_input(sh.spec.type(t), sh.spec.name(t));
      KTensor kt;
      kt.expr = t_.arena.var(static_cast<uint32_t>(kt_.size()));
      kt.labels = sh.axes.tensors[t];
      kt.dist = t_.distance(kt.expr);
      kt_.resize(k + 1);
      kt_[k] = kt;
    }
    kg_.set_name(sh.spec.name());
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

 private:
  int max_kernel_ops() const { return sh_.options.max_kernel_ops; }
  bool is_input(TensorId t) const { return t < sh_.spec.inputs().size(); }

  void kernel_step(int ops_done, Rank last) {
    if (t_.stopped()) return;
    if (complete()) return;  // every spec output is there: nothing more may be added
    if (ops_done >= max_kernel_ops()) return;
    int open = 0;
    for (TensorId t = 0; t < kt_.size(); ++t)
      if (kt_[t].uses == 0 && !is_input(t)) ++open;
    if (Pruned r = kernel_prefix_rule(open, farthest_open(kt_), static_cast<int>(sh_.spec.outputs().size()),
                                      max_kernel_ops() - ops_done, sh_.options.max_block_ops)) {
      t_.drop(r);
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
      for (int d = 0; d < k.labels.rank; ++d)
        sig = ir::hash_mix(sig, label_key(k.labels.dims[static_cast<size_t>(d)]));
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
      if (last_op && sk.operands != needed) {
        t_.drop(prune::dead_end);
        return;
      }
      if (block_op(sk, ops_done, &last)) live.push_back(sk);
    });
    if (!t_.stopped()) live_skeletons_.emplace(sig, std::move(live));
  }

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
        if (!t_.equivalent(kt_[t].expr)) continue;
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
    ++t_.stats.complete;
    Candidate c;
    c.hash = g.hash();
    c.structure = structure_hash(g);
    Cost cost = estimate(g, sh_.target, sh_.aliases);
    if (!cost.feasible()) {
      t_.drop(prune::infeasible);
      return true;
    }
    c.cost_us = cost.total_us;
    c.graph = std::move(g);
    sink_(std::move(c));
    return true;
  }

  // Appends a predefined kernel op; false (counted) when it is pruned.
  bool predefined(OpCode op, const std::vector<TensorId>& operands, const Attrs& a, Rank* rank,
                  const Rank* last = nullptr) {
    ++t_.stats.states;
    Rank r = rank_of(operands, op, attr_key(a));
    if (last && !(*last < r)) return t_.drop(prune::canonical);
    const KTensor& x = kt_[operands[0]];
    const KTensor* y = operands.size() > 1 ? &kt_[operands[1]] : nullptr;
    if (!t_.shift_ok(op, x.shift, x.expr, y ? y->shift : false, x.shifted)) return false;
    Label reduced;
    auto labels = infer_labels(op, a, &x.labels, y ? &y->labels : nullptr, &reduced);
    if (!labels || !spec_reduces(reduced, sh_.reduced_axes)) return t_.drop(prune::axes);
    std::vector<ExprId> ex(kt_.size());
    for (TensorId i = 0; i < kt_.size(); ++i) ex[i] = kt_[i].expr;
    ExprId e = t_.append_checked(kg_, op, operands, a, ex, {});
    if (e == ir::kNoExpr) return false;
    TensorId t = kg_.result(kg_.nodes().back());
    KTensor k;
    k.expr = e;
    k.labels = *labels;
    k.shift = t_.arena.node(e).kind == ExprKind::Shift;
    k.shifted = op == OpCode::sub && y && y->shift;
    k.dist = t_.distance(e);
    for (TensorId o : operands) t_.check_step(kt_[o].dist, e);
    kt_.resize(t + 1);
    kt_[t] = k;
    for (TensorId o : operands) ++kt_[o].uses;
    *rank = r;
    return true;
  }

  void undo_kernel() {
    const ir::Node& n = kg_.nodes().back();
    for (TensorId o : kg_.operands(n)) --kt_[o].uses;
    kt_.resize(n.results_begin);
    kg_.truncate(kg_.nodes().size() - 1);
  }

  // Predefined kernel ops over the current tensors: the op table's unary, binary, matmul, reduce and norm rows.
  template <class F>
  void for_each_predefined(F&& f) {
    size_t n = kt_.size();
    for (TensorId a = 0; a < n; ++a) {
      if (kt_[a].labels.any_stacked()) continue;
      t_.for_each_unary_like(kg_.type(a), kt_[a].labels, kt_[a].expr,
                             [&](OpCode op, const Attrs& at) { f(op, {a}, at); });
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

  // Skeletons over the current kernel tensors: operand sets (1..4 tensors, in id order), each with
  // skeletons_over's grid axes and loop axis.
  template <class F>
  void for_each_skeleton(F&& f) {
    std::vector<TensorId> pool;
    for (TensorId t = 0; t < kt_.size(); ++t) pool.push_back(t);
    std::vector<TensorId> pick;
    std::function<void(size_t)> subsets = [&](size_t from) {
      if (!pick.empty()) skeletons_over(pick, kt_, f);
      if (pick.size() == 4) return;
      for (size_t i = from; i < pool.size(); ++i) {
        pick.push_back(pool[i]);
        subsets(i + 1);
        pick.pop_back();
      }
    };
    subsets(0);
  }

  // Enumerates the block graphs of `sk` at representative sizes, then instantiates each at every size and
  // continues the kernel graph with it. Whether the skeleton has any block graph.
  bool block_op(const Skeleton& sk, int ops_done, const Rank* last = nullptr) {
    std::vector<ir::BlockParams> sizes = instantiations(sk, sh_.axes, sh_.max_blocks, sh_.threads);
    if (sizes.empty()) return t_.drop(prune::grid);
    bool final = ops_done + 1 == max_kernel_ops();
    const std::vector<Structure>& bodies =
        blocks_.structures(sk, sizes.front(), max_kernel_ops() - ops_done - 1, kt_, kg_);
    for (const Structure& st : bodies) {
      for (const ir::BlockParams& p : final ? best_sizes(sk, st.body, sizes) : sizes) {
        if (t_.stopped()) return true;
        instantiate(sk, st.body, st.scaled, p, ops_done, final, last);
      }
    }
    return !bodies.empty();
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
    uint64_t key = ir::hash_mix(body.hash(), kernel_context_hash(kg_, sk.operands, sh_.aliases));
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
      KernelCost c = estimate_kernel(kg_, kg_.node(static_cast<ir::NodeId>(before)), sh_.target, sh_.aliases);
      kg_.truncate(before);
      if (c.infeasible.empty()) timed.push_back({c.time_us, i});
    }
    std::sort(timed.begin(), timed.end());
    std::vector<ir::BlockParams> best;
    for (size_t i = 0; i < timed.size() && i < kSizesPerStructure; ++i) best.push_back(sizes[timed[i].second]);
    return best_sizes_.emplace(key, std::move(best)).first->second;
  }

  // Rebuilds `body` with the grid sizes and loop count `p`, checks it against the target and the abstraction at
  // those sizes, and continues the kernel graph with the block op.
  void instantiate(const Skeleton& sk, const Graph& body, const std::vector<bool>& scaled, const ir::BlockParams& p,
                   int ops_done, bool final, const Rank* last) {
    ++t_.stats.states;
    std::vector<ir::TensorType> types;
    std::vector<ExprId> oex;
    for (TensorId t : sk.operands) {
      types.push_back(kg_.type(t));
      oex.push_back(kt_[t].expr);
    }
    std::optional<Graph> replayed = replay(body, p, types);
    if (!replayed) {
      t_.drop(prune::shape);
      return;
    }
    Graph g = std::move(*replayed);
    // Tile sizes change the sums' sizes in the terms: check the saved values again.
    std::vector<ExprId> bex = ir::abstract_block_exprs(g, oex, t_.arena);
    for (TensorId t : g.outputs())
      if (final ? !t_.equivalent(bex[t]) : !t_.subexpr(bex[t])) {
        t_.drop(prune::abstract);
        return;
      }
    size_t before = kg_.nodes().size();
    std::vector<TensorId> res;
    try {
      res = kg_.add_block(sk.operands, std::move(g));
    } catch (const UserError&) {
      t_.drop(prune::shape);
      return;
    }
    const ir::Node& node = kg_.node(static_cast<ir::NodeId>(before));
    Rank r = rank_of(sk.operands, OpCode::block, kg_.body(node).hash());
    if (last && !(*last < r)) {
      kg_.truncate(before);
      t_.drop(prune::canonical);
      return;
    }
    detail::Work w = detail::block_work(kg_, node, sh_.target, sh_.aliases);
    if (w.k.smem_bytes > targets::block_smem_limit(sh_.target)) {
      kg_.truncate(before);
      t_.drop(prune::smem);
      return;
    }
    // The results' labels: the tiles' labels, with stacked dims where a grid dim stacked partial results.
    const Graph& bg = kg_.body(node);
    for (size_t i = 0; i < res.size(); ++i) {
      const ir::Node& save = bg.node(bg.tensor(bg.outputs()[i]).producer);
      TensorId src = bg.operands(save)[0];
      KTensor k;
      k.expr = bex[bg.outputs()[i]];
      k.shift = t_.arena.node(k.expr).kind == ExprKind::Shift;
      k.maxdep = scaled[i];
      k.dist = t_.distance(k.expr);
      k.labels = tile_labels(bg, src, sk, kt_, sh_.joints);
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
    if (bound_ && *bound_ < INFINITY && estimate(kg_, sh_.target, sh_.aliases).total_us > *bound_) {
      t_.drop(prune::cost);
    } else {
      kernel_step(ops_done + 1, r);
    }
    for (TensorId o : sk.operands) --kt_[o].uses;
    kt_.resize(res.front());
    kg_.truncate(before);
  }

  const Generator::Shared& sh_;
  Terms t_;
  BlockGraphs blocks_;
  const std::function<void(Candidate&&)>& sink_;
  const double* bound_ = nullptr;
  Graph kg_;
  std::vector<KTensor> kt_;
  std::unordered_map<uint64_t, std::vector<Skeleton>> live_skeletons_;
  std::unordered_map<uint64_t, std::vector<ir::BlockParams>> best_sizes_;
};

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

// What the oracle's distance may assume of the candidates (FusedOps): the generator builds no softmax, a concat
// only where it joins axes (joined_axes), and a matmul that sums over a real axis only where some input has that
// axis last and some input has it second to last. Every op keeps a label at its place counted from the right
// (elementwise ops broadcast right-aligned, a matmul keeps its operands' two last places, a reduction leaves
// a unit label), so the places an axis can take are the ones it has in the inputs.
FusedOps fused_ops(const Generator::Shared& sh) {
  FusedOps f;
  f.softmax = false;
  f.concat = !sh.joints.empty();
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

// The joined axes (Shared::joints): for each add of two matmul results in the spec whose products contract
// different axes, those axes joined both ways round, each a new axis id with the sum of their extents.
void joined_axes(Generator::Shared& sh) {
  const Graph& spec = sh.spec;
  auto contracted = [&](TensorId t) -> uint16_t {
    const ir::Node& p = spec.node(spec.tensor(t).producer);
    if (p.op != OpCode::matmul) return 0;
    const Labels& a = sh.axes.tensors[spec.operands(p)[0]];
    return a.dims[static_cast<size_t>(a.rank - 1)].axis;
  };
  for (const ir::Node& n : spec.nodes()) {
    if (n.op != OpCode::add) continue;
    const uint16_t k1 = contracted(spec.operands(n)[0]), k2 = contracted(spec.operands(n)[1]);
    if (k1 == 0 || k2 == 0 || k1 == k2) continue;
    for (auto [a, b] : {std::pair{k1, k2}, std::pair{k2, k1}}) {
      if (sh.joints.of(Label{a, 0, 0}, Label{b, 0, 0})) continue;
      const auto id = static_cast<uint16_t>(sh.axes.extent.size());
      sh.axes.extent.push_back(sh.axes.extent[a] + sh.axes.extent[b]);
      sh.joints.list.push_back({a, b, id});
    }
  }
}

}  // namespace

Generator::Generator(const Graph& spec, const targets::Target& target, const SearchOptions& options,
                     ir::InputAliases aliases)
    : shared_(std::make_unique<Shared>()) {
  Shared& sh = *shared_;
  sh.spec = spec;
  sh.target = target;
  sh.options = options;
  sh.aliases = std::move(aliases);
  if (spec.outputs().empty()) throw UserError("the spec returns nothing");
  for (const ir::Node& n : spec.nodes())
    if (n.op == OpCode::block) throw UserError("the spec already has block ops; give the search a plain kernel graph");
  sh.axes = analyze_axes(spec);
  joined_axes(sh);
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
  for (const JoinedAxes::Joint& j : sh.joints.list) sh.reduced_axes.push_back(j.id);  // both its axes are contracted
  sh.max_blocks = target.execution.sms * std::max<int64_t>(1, target.execution.max_blocks_per_sm);
  sh.threads = std::min(4 * target.execution.warp_size, target.execution.max_threads_per_block);
  std::vector<Labels> input_labels;
  for (TensorId t : spec.inputs()) input_labels.push_back(sh.axes.tensors[t]);
  sh.tasks = root_tasks(input_labels);
}

Generator::~Generator() = default;

size_t Generator::num_tasks() const { return shared_->tasks.size(); }

void Generator::explore(size_t task, GenStats& stats, const std::function<void(Candidate&&)>& sink,
                        const std::atomic<bool>& stop, const double* bound) const {
  Explorer e(*shared_, stats, sink, stop, bound);
  e.run(shared_->tasks.at(task));
}

}  // namespace morgana::search
