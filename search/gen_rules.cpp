#include "search/gen_rules.h"

#include <algorithm>

namespace morgana::search::gen {

using ir::OpKind;

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

bool scalar_operands_ok(OpCode op, OpCode a_scalar, OpCode b_scalar, bool b_shift, bool scaled_outputs) {
  if (!scalar_consumer_ok(a_scalar, op, scaled_outputs) || !scalar_consumer_ok(b_scalar, op, scaled_outputs))
    return false;
  if (op == OpCode::sub && a_scalar != OpCode::input && !b_shift) return false;
  return b_scalar == OpCode::input || op != OpCode::sub;
}

bool spec_reduces(const Label& l, const std::vector<uint16_t>& reduced_axes) {
  if (l.unit() || l.stacked()) return true;
  return std::find(reduced_axes.begin(), reduced_axes.end(), l.axis) != reduced_axes.end();
}

std::optional<Labels> concat_labels(const Labels& a, const Labels& b, int dim, const JoinedAxes& joints) {
  if (a.rank != b.rank || dim < 0 || dim >= a.rank) return std::nullopt;
  const std::optional<Label> joint = joints.of(a.dims[static_cast<size_t>(dim)], b.dims[static_cast<size_t>(dim)]);
  if (!joint) return std::nullopt;
  for (int d = 0; d < a.rank; ++d)
    if (d != dim && !(a.dims[static_cast<size_t>(d)] == b.dims[static_cast<size_t>(d)])) return std::nullopt;
  Labels l = a;
  l.dims[static_cast<size_t>(dim)] = *joint;
  return l;
}

std::optional<Labels> block_labels(OpCode op, const ir::Attrs& attrs, const Labels* a, const Labels* b,
                                   const JoinedAxes& joints, Label* reduced) {
  if (op == OpCode::concat) return concat_labels(*a, *b, attrs.dim, joints);
  return infer_labels(op, attrs, a, b, reduced);
}

Pruned joint_rule(OpCode op, bool x_joint, bool y_joint, bool reduced_joint) {
  if (!x_joint && !y_joint) return nullptr;
  return op == OpCode::matmul && reduced_joint ? nullptr : prune::concat;
}

Pruned kernel_prefix_rule(int open, int farthest, int outputs, int ops_left, int max_block_ops) {
  if (open > outputs + 4 * ops_left) return prune::dead_end;
  if (farthest > ops_left * std::max(1, max_block_ops)) return prune::distance;
  return nullptr;
}

Pruned partial_state(OpCode op, const BTensor& x, const BTensor* y, int reduced_bit, const Header& h, BTensor& t) {
  const ir::OpInfo& info = ir::op_info(op);
  const auto bit = [](int b) { return static_cast<uint8_t>(1u << b); };
  switch (info.kind) {
    case OpKind::Unary:
      if (x.psum && !(info.field == ir::FieldSem::ScaleConst)) return prune::partial;
      if (info.field == ir::FieldSem::ScaleConst || info.field == ir::FieldSem::AddConst) {
        if (x.scalar_chain >= kMaxScalarChain) return prune::scalar;
        t.scalar_chain = static_cast<uint8_t>(x.scalar_chain + 1);
        t.scalar = op;
      }
      t.psum = x.psum;
      t.maxdep = x.maxdep;
      t.squared = info.field == ir::FieldSem::Square;
      return nullptr;
    case OpKind::Norm:
      if (x.psum || reduced_bit >= 0) return prune::partial;
      t.maxdep = x.maxdep;
      return nullptr;
    case OpKind::Reduce:
      if (op == OpCode::reduce_max) {
        if (x.psum) return prune::partial;
        if (x.shifted) return prune::shift;
        if (reduced_bit >= 0) t.pmax = bit(reduced_bit);
      } else {
        if (x.squared && reduced_bit < 0) return prune::norm;
        t.psum = x.psum;
        t.maxdep = x.maxdep;
        if (reduced_bit >= 0) t.psum |= bit(reduced_bit);
      }
      return nullptr;
    case OpKind::Binary:
      if (y->shift) {  // sub(x, max): x's state
        t.psum = x.psum;
        t.shifted = true;
        t.maxdep = y->pmax;
        if (x.psum) return prune::partial;
        if (x.shifted) return prune::shift;
        return nullptr;
      }
      if (op == OpCode::add || op == OpCode::sub) {
        if (x.psum != y->psum || x.maxdep != y->maxdep) return prune::partial;
        t.psum = x.psum;
        t.maxdep = x.maxdep;
      } else {
        t.maxdep = op == OpCode::div && x.maxdep == y->maxdep ? 0 : x.maxdep | y->maxdep;
        if (x.psum && y->psum) return prune::partial;
        if (op == OpCode::div && y->psum) return prune::partial;
        if ((x.psum && has_axis_in(*y, x.psum, h)) || (y->psum && has_axis_in(x, y->psum, h))) return prune::partial;
        t.psum = x.psum | y->psum;
      }
      return nullptr;
    case OpKind::Matmul:
      if (x.psum && y->psum) return prune::partial;
      if ((x.psum && has_axis_in(*y, x.psum, h)) || (y->psum && has_axis_in(x, y->psum, h))) return prune::partial;
      t.psum = x.psum | y->psum;
      t.maxdep = x.maxdep | y->maxdep;
      if (reduced_bit >= 0) t.psum |= bit(reduced_bit);
      return nullptr;
    case OpKind::Concat:
      if (x.psum || x.pmax || x.maxdep || y->psum || y->pmax || y->maxdep) return prune::partial;
      return nullptr;
    default:
      return prune::unbuilt;
  }
}

bool redundant(const std::vector<BTensor>& bt, const BTensor& t, uint32_t cls) {
  for (const BTensor& o : bt)
    if ((o.expr == t.expr || (cls != UINT32_MAX && o.cls == cls)) && o.labels == t.labels && o.psum == t.psum &&
        o.pmax == t.pmax && o.epilogue == t.epilogue && !o.iter && o.scalar == OpCode::input)
      return true;
  return false;
}

Pruned width_rule(const Block& b) {
  int open = 0;
  for (const BTensor& t : b.bt)
    if (t.uses == 0 && !t.iter) ++open;
  return open > kMaxOpen ? prune::width : nullptr;
}

std::vector<std::pair<OpCode, TensorId>> accumulator_choices(const Block& b, const BTensor& x,
                                                             const std::vector<TensorId>& shifts) {
  std::vector<std::pair<OpCode, TensorId>> c;
  const int lb = b.h.loop;
  if (lb < 0) {
    c.push_back({x.shift ? OpCode::acc_max : OpCode::acc_sum, 0});
  } else if (x.shift) {
    if (x.pmax >> lb & 1) c.push_back({OpCode::acc_max, 0});
  } else if ((x.psum >> lb & 1) && !has_loop_dim(b.h, x)) {
    if (x.maxdep >> lb & 1) {
      for (TensorId m : shifts)
        if (b.bt[m].pmax >> lb & 1) c.push_back({OpCode::acc_rescale_sum, m});
    } else {
      c.push_back({OpCode::acc_sum, 0});
    }
  }
  return c;
}

BTensor accumulated(const BTensor& x, const Header& h) {
  BTensor t = x;
  t.scalar = OpCode::input;
  t.uses = 0;
  t.iter = false;
  t.epilogue = true;
  t.scalar_chain = 0;
  if (h.loop_completes_axis()) {
    const auto keep = static_cast<uint8_t>(~(1u << h.loop));
    t.psum &= keep;
    t.pmax &= keep;
    t.maxdep &= keep;
  }
  return t;
}

Pruned saves_rule(const Block& b, const std::vector<TensorId>& open, size_t outputs) {
  if (b.final && open.size() != outputs) return prune::final;
  uint8_t maxes = 0, scaled = 0;
  for (TensorId t : open) (b.bt[t].shift ? maxes : scaled) |= b.bt[t].shift ? b.bt[t].pmax : b.bt[t].maxdep;
  if ((scaled & ~maxes) != 0) return prune::shift;
  return nullptr;
}

int64_t extent_of(const Label& l, const SpecAxes& axes) {
  return l.stacked() ? static_cast<int64_t>(l.parts) : axes.extent[l.axis];
}

std::optional<ir::Attrs> saver_map(const Block& b, const BTensor& x, const SpecAxes& axes) {
  ir::Attrs a;
  std::array<bool, ir::kMaxRank> used{};
  const auto dims = [&](int d) -> const Label& { return x.labels.dims[static_cast<size_t>(d)]; };
  for (size_t g = 0; g < b.sk->grid.size(); ++g) {
    const Label& l = b.sk->grid[g];
    int bit = b.h.bit(l);
    int dim = -1;
    for (int d = 0; d < x.labels.rank; ++d)
      if (dims(d) == l) dim = d;
    if (dim < 0 && ((x.psum | x.pmax) >> bit & 1)) {
      for (int d = 0; d < x.labels.rank; ++d) {
        if (used[static_cast<size_t>(d)] || grid_cuts(*b.sk, dims(d))) continue;
        if (dim < 0 || extent_of(dims(dim), axes) != 1) dim = d;
      }
    }
    if (dim < 0 || used[static_cast<size_t>(dim)]) return std::nullopt;
    used[static_cast<size_t>(dim)] = true;
    a.map[g] = static_cast<int8_t>(dim);
  }
  return a;
}

}  // namespace morgana::search::gen
