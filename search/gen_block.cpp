#include "search/gen_block.h"

#include <algorithm>
#include <array>

namespace morgana::search::gen {

using ir::ExprKind;
using ir::Graph;
using ir::OpKind;

const std::vector<Structure>& BlockGraphs::structures(const Skeleton& sk, const ir::BlockParams& rep, int later,
                                                      const std::vector<KTensor>& kt, const Graph& kg) {
  bool final = later == 0;
  uint64_t key = ir::hash_mix(static_cast<uint64_t>(later), rep.threads);
  for (TensorId t : sk.operands) {
    key = ir::hash_mix(key, kt[t].expr);
    for (int d = 0; d < kt[t].labels.rank; ++d)
      key = ir::hash_mix(key, label_key(kt[t].labels.dims[static_cast<size_t>(d)]));
    key = ir::hash_mix(key, kt[t].labels.rank);
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
  b.budget = t_.sh.options.max_block_ops * (1 + later);
  std::vector<ir::TensorType> types;
  for (TensorId t : sk.operands) {
    types.push_back(kg.type(t));
    b.operand_exprs.push_back(kt[t].expr);
  }
  b.g = Graph::make_block(rep, types);
  if (add_iters(b, kt)) body_dfs(b, Rank{}, found);
  return memo_.emplace(key, std::move(found)).first->second;
}

// One iterator per operand: imap and fmap cut the skeleton's axes wherever the operand has them.
bool BlockGraphs::add_iters(Block& b, const std::vector<KTensor>& kt) {
  for (size_t o = 0; o < b.sk->operands.size(); ++o) {
    const KTensor& k = kt[b.sk->operands[o]];
    std::array<int8_t, ir::kGridDims> imap{ir::kPhi, ir::kPhi, ir::kPhi};
    int8_t fmap = ir::kPhi;
    BTensor t;
    t.iter = true;
    t.expr = k.expr;
    t.shift = k.shift;
    t.labels = k.labels;
    t.dist = k.dist;
    t.eclass = t_.class_of(k.expr);
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
      return t_.drop(prune::shape);
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

// Tries one block op (body or epilogue); on success the op is appended and its tensor recorded.
bool BlockGraphs::block_try(Block& b, OpCode op, std::initializer_list<TensorId> operands, const ir::Attrs& a,
                            bool epilogue) {
  const Generator::Shared& sh = t_.sh;
  ++t_.stats.states;
  const ir::OpInfo& info = ir::op_info(op);
  const BTensor& x = b.bt[*operands.begin()];
  const BTensor* y = operands.size() > 1 ? &b.bt[*(operands.begin() + 1)] : nullptr;
  if (y ? !scalar_operands_ok(op, x.scalar, y->scalar, y->shift, sh.scaled_outputs)
        : !scalar_consumer_ok(x.scalar, op, sh.scaled_outputs))
    return t_.drop(prune::scalar);
  if (!t_.shift_ok(op, x.shift, x.expr, y ? y->shift : false, x.shifted)) return false;
  Label reduced;
  const std::optional<Labels> labels = block_labels(op, a, &x.labels, y ? &y->labels : nullptr, sh.joints, &reduced);
  if (!labels || !spec_reduces(reduced, sh.reduced_axes)) return t_.drop(prune::axes);
  if (Pruned r = joint_rule(op, sh.joints.any_joint(x.labels), y && sh.joints.any_joint(y->labels),
                              sh.joints.is_joint(reduced)))
    return t_.drop(r);
  BTensor t;
  t.labels = *labels;
  t.epilogue = epilogue;
  if (Pruned r = partial_state(op, x, y, reduced.unit() ? -1 : b.h.bit(reduced), b.h, t)) return t_.drop(r);
  // An elementwise op over two values of the e-graph: its term is one e-node over their classes, so the
  // oracle answers before the op is built (most candidate ops end here).
  if (info.kind == OpKind::Binary && sh.options.abstract_pruning && !x.shift && !y->shift &&
      x.eclass != UINT32_MAX && y->eclass != UINT32_MAX &&
      !t_.oracle().is_subexpr_class(t_.oracle().class_of_node(ir::binary_kind(op), 0, x.eclass, y->eclass)))
    return t_.drop(prune::abstract);
  size_t before = b.g.nodes().size();
  ir::ExprId e = t_.append_checked(b.g, op, std::span<const TensorId>(operands.begin(), operands.size()), a, b.ex,
                                   b.operand_exprs);
  if (e == ir::kNoExpr) return false;
  t.expr = e;
  t.shift = t_.arena.node(e).kind == ExprKind::Shift;
  // The same value again (same term, axes and partial state) is redundant, unless the op changes what the
  // abstraction hides: constants (scalar ops) and max subtraction.
  bool hides = info.field == ir::FieldSem::ScaleConst || info.field == ir::FieldSem::AddConst || (y && y->shift);
  uint32_t cls = t.shift ? UINT32_MAX : t_.class_of(e);
  if (!hides && redundant(b.bt, t, cls)) {
    b.g.truncate(before);
    return t_.drop(prune::redundant);
  }
  t.cls = hides ? UINT32_MAX : cls;
  t.eclass = cls;
  t.dist = t_.distance_of_class(cls);
  for (TensorId o : operands) t_.check_step(b.bt[o].dist, e);
  b.bt.push_back(t);
  b.ex.push_back(e);
  for (TensorId o : operands) ++b.bt[o].uses;
  ++b.compute_ops;
  return true;
}

void BlockGraphs::block_undo(Block& b) {
  const ir::Node& n = b.g.nodes().back();
  for (TensorId o : b.g.operands(n)) --b.bt[o].uses;
  b.bt.resize(n.results_begin);
  b.ex.resize(n.results_begin);
  if (ir::op_info(n.op).kind != OpKind::Save && ir::op_info(n.op).kind != OpKind::Iter) --b.compute_ops;
  b.g.truncate(b.g.nodes().size() - 1);
}

// Block ops over the stage's tensors, in canonical order after `last`. Only an op whose newest operand ties
// with `last`'s needs its full rank to decide; `extend` ranks the ones that are kept.
template <class F>
void BlockGraphs::for_each_block_op(Block& b, Rank last, bool epilogue, F&& f) {
  // The block-level binary and matmul ops, from the op table once.
  static const std::vector<OpCode> pair_ops = [] {
    std::vector<OpCode> ops;
    for (const ir::OpInfo& info : ir::all_ops())
      if ((info.levels & ir::kBlockLevel) && (info.kind == OpKind::Binary || info.kind == OpKind::Matmul))
        ops.push_back(static_cast<OpCode>(&info - ir::all_ops().data()));
    return ops;
  }();
  TensorId n = static_cast<TensorId>(b.bt.size());
  auto eligible = [&](TensorId t) { return b.bt[t].epilogue == epilogue; };
  auto after_last = [&](std::span<const TensorId> operands, OpCode op, const ir::Attrs& at) {
    uint32_t newest = *std::max_element(operands.begin(), operands.end()) + 1;
    if (newest != last.newest) return newest > last.newest;
    return last < rank_of(operands, op, attr_key(at));
  };
  for (TensorId a = 0; a < n; ++a) {
    if (!eligible(a)) continue;
    t_.for_each_unary_like(b.g.type(a), b.bt[a].labels, b.bt[a].expr, [&](OpCode op, const ir::Attrs& at) {
      if (!ir::op_at_level(op, ir::kBlockLevel)) return;
      if (after_last(std::array<TensorId, 1>{a}, op, at)) f(op, {a}, at);
    });
    for (TensorId c = 0; c < n; ++c) {
      if (a == c || !eligible(c) || std::max(a, c) + 1 < last.newest) continue;
      for (OpCode op : pair_ops) {
        const ir::OpInfo& info = ir::op_info(op);
        if (info.kind == OpKind::Binary && (info.facts & ir::kCommutative) != 0 && a > c) continue;
        if (after_last(std::array<TensorId, 2>{a, c}, op, ir::Attrs{})) f(op, {a, c}, ir::Attrs{});
      }
      // A concat along a dim a matmul contracts (A's last, B's second to last) where the two axes join.
      // Copies: f extends b (b.bt grows and may move) before the second dim is looked at (ASan found the dangling
      // references in scripts/test's sanitized run).
      const Labels la = b.bt[a].labels, lc = b.bt[c].labels;
      if (t_.sh.joints.empty() || la.rank != lc.rank || la.rank < 2) continue;
      for (int d : {la.rank - 1, la.rank - 2}) {
        if (!t_.sh.joints.of(la.dims[static_cast<size_t>(d)], lc.dims[static_cast<size_t>(d)])) continue;
        ir::Attrs at;
        at.dim = d;
        if (after_last(std::array<TensorId, 2>{a, c}, OpCode::concat, at)) f(OpCode::concat, {a, c}, at);
      }
    }
  }
}

// Every next op of the stage (body or epilogue) in canonical order after `last`; `next` continues from it.
template <class Next>
void BlockGraphs::extend(Block& b, Rank last, bool epilogue, Next&& next) {
  TensorId pending = pending_scalar(b);
  auto try_op = [&](OpCode op, std::initializer_list<TensorId> ops, const ir::Attrs& a) {
    if (t_.stopped()) return;
    if (pending != kNone && std::find(ops.begin(), ops.end(), pending) == ops.end()) {
      t_.drop(prune::scalar);
      return;
    }
    if (!block_try(b, op, ops, a, epilogue)) return;
    if (b.too_far())
      t_.drop(prune::distance);
    else
      next(rank_of(std::span<const TensorId>(ops.begin(), ops.size()), op, attr_key(a)));
    block_undo(b);
  };
  for_each_block_op(b, last, epilogue, try_op);
}

void BlockGraphs::body_dfs(Block& b, Rank last, std::vector<Structure>& found) {
  if (t_.stopped()) return;
  if (b.too_far()) {
    t_.drop(prune::distance);
    return;
  }
  close_body(b, found);
  if (b.compute_ops + 1 >= t_.sh.options.max_block_ops) return;
  // Open values (not yet consumed) each need an accumulator; iterators must be consumed in the body.
  if (Pruned r = width_rule(b)) {
    t_.drop(r);
    return;
  }
  extend(b, last, false, [&](Rank r) { body_dfs(b, r, found); });
}

// Accumulators: every open body value gets one (and a max that some rescaling sum uses may get one too).
void BlockGraphs::close_body(Block& b, std::vector<Structure>& found) {
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
  if (b.compute_ops + static_cast<int>(open.size()) > t_.sh.options.max_block_ops) return;
  for (TensorId t : open)
    if (t_.sh.joints.any_joint(b.bt[t].labels)) {
      t_.drop(prune::concat);  // a concat is there to be contracted in the body
      return;
    }
  // Per open value, its accumulator choices: (op, rescale partner).
  std::vector<std::vector<std::pair<OpCode, TensorId>>> choices;
  for (TensorId t : open) {
    std::vector<std::pair<OpCode, TensorId>> c = accumulator_choices(b, b.bt[t], shifts);
    if (c.empty()) {
      t_.drop(prune::accumulator);
      return;
    }
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
      if (t_.stopped()) return;
      bool ok = true;
      for (size_t i = 0; i < open.size() && ok; ++i)
        ok = add_acc(b, choices[i][pick[i]].first, open[i], choices[i][pick[i]].second);
      for (size_t i = 0; i < optional.size() && ok; ++i)
        if (mask >> i & 1) ok = add_acc(b, OpCode::acc_max, optional[i], 0);
      for (TensorId m : loose_maxes) ok = ok && b.bt[m].uses > 0;
      if (ok && b.compute_ops <= t_.sh.options.max_block_ops) epilogue_dfs(b, Rank{}, found);
      while (b.g.nodes().size() > mark) block_undo(b);
    }
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == choices[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
}

bool BlockGraphs::add_acc(Block& b, OpCode op, TensorId x, TensorId partner) {
  ++t_.stats.states;
  if (!scalar_consumer_ok(b.bt[x].scalar, op, t_.sh.scaled_outputs)) return t_.drop(prune::scalar);
  BTensor t = accumulated(b.bt[x], b.h);
  std::array<TensorId, 2> operands{x, partner};
  ir::ExprId e = t_.append_checked(
      b.g, op, std::span<const TensorId>(operands.data(), op == OpCode::acc_rescale_sum ? 2 : 1), {}, b.ex,
      b.operand_exprs);
  if (e == ir::kNoExpr) return false;
  t.expr = e;
  t.shift = op == OpCode::acc_max;
  t.eclass = t.shift ? UINT32_MAX : t_.class_of(e);
  t.dist = t_.distance(e);
  t_.check_step(b.bt[x].dist, e);
  b.bt.push_back(t);
  b.ex.push_back(e);
  ++b.bt[x].uses;
  if (op == OpCode::acc_rescale_sum) ++b.bt[partner].uses;
  ++b.compute_ops;
  return true;
}

void BlockGraphs::epilogue_dfs(Block& b, Rank last, std::vector<Structure>& found) {
  if (t_.stopped()) return;
  try_saves(b, found);
  if (b.compute_ops >= t_.sh.options.max_block_ops) return;
  // Without a for-loop the accumulators change nothing, so an op after them is the same graph as the op
  // before them: canonically every op is in the body.
  if (b.h.loop < 0) return;
  extend(b, last, true, [&](Rank r) { epilogue_dfs(b, r, found); });
}

// Savers for every open epilogue value (saver_map gives each its omap).
void BlockGraphs::try_saves(Block& b, std::vector<Structure>& found) {
  std::vector<TensorId> open;
  for (TensorId t = 0; t < b.bt.size(); ++t) {
    const BTensor& x = b.bt[t];
    if (x.uses == 0 && !x.epilogue) return;  // cannot happen after close_body; kept for safety
    if (x.uses == 0) open.push_back(t);
    if (x.uses == 0 && !scalar_consumer_ok(x.scalar, OpCode::save, t_.sh.scaled_outputs)) {
      t_.drop(prune::scalar);
      return;
    }
  }
  if (open.empty() || open.size() > static_cast<size_t>(kMaxSaves)) return;
  if (Pruned r = saves_rule(b, open, t_.sh.spec.outputs().size())) {
    t_.drop(r);
    return;
  }
  size_t mark = b.g.nodes().size();
  bool ok = true;
  for (TensorId t : open) {
    const BTensor& x = b.bt[t];
    if (Pruned r = save_value_rule(x, b.final, [&] { return t_.equivalent(x.expr); })) {
      ok = t_.drop(r);
      break;
    }
    std::optional<ir::Attrs> a = saver_map(b, x, t_.sh.axes);
    if (!a) {
      ok = t_.drop(prune::omap);
      break;
    }
    ++t_.stats.states;
    try {
      b.g.add1(OpCode::save, {t}, *a);
    } catch (const UserError&) {
      ok = t_.drop(prune::shape);
      break;
    }
    const ir::ExprId saved = x.expr;  // before the push_back below, which may move what x refers to
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

}  // namespace morgana::search::gen
