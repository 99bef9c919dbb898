#include "search/axes.h"

#include <numeric>

#include "ir/diagnostic.h"

namespace morgana::search {

using ir::OpKind;

std::string Label::str() const {
  std::string inner = axis == 0 ? "1" : "a" + std::to_string(axis);
  if (!stacked()) return inner;
  return "a" + std::to_string(over) + "/" + std::to_string(parts) + "x[" + inner + "]";
}

bool Labels::any_stacked() const {
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<size_t>(i)].stacked()) return true;
  return false;
}

std::string Labels::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? "," : "") + dims[static_cast<size_t>(i)].str();
  return s + "]";
}

namespace {

// Union-find over the (tensor, dim) slots of the spec.
class Slots {
 public:
  explicit Slots(const ir::Graph& g) : g_(g) {
    first_.resize(g.num_tensors() + 1);
    for (size_t t = 0; t < g.num_tensors(); ++t) first_[t + 1] = first_[t] + g.type(static_cast<uint32_t>(t)).rank;
    parent_.resize(first_.back());
    std::iota(parent_.begin(), parent_.end(), 0u);
  }
  uint32_t slot(ir::TensorId t, int d) const { return first_[t] + static_cast<uint32_t>(d); }
  uint32_t find(uint32_t s) {
    while (parent_[s] != s) s = parent_[s] = parent_[parent_[s]];
    return s;
  }
  // Unifies two dims of equal extent > 1 (extent-1 dims broadcast and stay unit).
  void unite(ir::TensorId a, int da, ir::TensorId b, int db) {
    if (g_.type(a).dim(da) != g_.type(b).dim(db) || g_.type(a).dim(da) == 1) return;
    parent_[find(slot(a, da))] = find(slot(b, db));
  }
  const std::vector<uint32_t>& first() const { return first_; }

 private:
  const ir::Graph& g_;
  std::vector<uint32_t> first_;
  std::vector<uint32_t> parent_;
};

}  // namespace

SpecAxes analyze_axes(const ir::Graph& spec) {
  Slots s(spec);
  for (const ir::Node& n : spec.nodes()) {
    const ir::OpInfo& info = ir::op_info(n.op);
    auto ops = spec.operands(n);
    if (n.num_results == 0) continue;
    ir::TensorId out = spec.result(n);
    int r = spec.type(out).rank;
    switch (info.kind) {
      case OpKind::Unary:
      case OpKind::Norm:
      case OpKind::Softmax:
        for (int d = 0; d < r; ++d) s.unite(ops[0], d, out, d);
        break;
      case OpKind::Binary:
        for (ir::TensorId o : ops)
          for (int d = 0; d < spec.type(o).rank; ++d) s.unite(o, d, out, d + (r - spec.type(o).rank));
        break;
      case OpKind::Matmul: {
        const auto &ta = spec.type(ops[0]), &tb = spec.type(ops[1]);
        for (int d = 0; d < ta.rank - 2; ++d) s.unite(ops[0], d, out, d + (r - ta.rank));
        for (int d = 0; d < tb.rank - 2; ++d) s.unite(ops[1], d, out, d + (r - tb.rank));
        s.unite(ops[0], ta.rank - 2, out, r - 2);
        s.unite(ops[1], tb.rank - 1, out, r - 1);
        s.unite(ops[0], ta.rank - 1, ops[1], tb.rank - 2);
        break;
      }
      case OpKind::Transpose:
        for (int d = 0; d < r - 2; ++d) s.unite(ops[0], d, out, d);
        s.unite(ops[0], r - 2, out, r - 1);
        s.unite(ops[0], r - 1, out, r - 2);
        break;
      case OpKind::Reduce:
      case OpKind::Concat:
        for (ir::TensorId o : ops)
          for (int d = 0; d < r; ++d)
            if (d != n.attrs.dim) s.unite(o, d, out, d);
        break;
      default:
        break;
    }
  }
  // Number the classes 1, 2, ... in slot order, so ids follow the spec's text.
  SpecAxes axes;
  axes.extent.push_back(1);
  std::vector<uint16_t> id(s.first().back(), 0);
  axes.tensors.resize(spec.num_tensors());
  for (ir::TensorId t = 0; t < spec.num_tensors(); ++t) {
    const ir::TensorType& ty = spec.type(t);
    Labels& l = axes.tensors[t];
    l.rank = ty.rank;
    for (int d = 0; d < ty.rank; ++d) {
      if (ty.dim(d) == 1) continue;
      uint32_t root = s.find(s.slot(t, d));
      if (id[root] == 0) {
        if (axes.extent.size() >= 0xffff) throw UserError("the spec has too many axes for the search");
        id[root] = static_cast<uint16_t>(axes.extent.size());
        axes.extent.push_back(ty.dim(d));
      }
      l.dims[static_cast<size_t>(d)].axis = id[root];
    }
  }
  return axes;
}

namespace {

// Broadcasting of two labels: equal, or one of them unit.
std::optional<Label> broadcast(const Label& a, const Label& b) {
  if (a == b) return a;
  if (a.stacked() || b.stacked()) return std::nullopt;
  if (a.unit()) return b;
  if (b.unit()) return a;
  return std::nullopt;
}

// Numpy broadcasting of a's and b's dims (aligned on the right) into out's dims, but for the last `skip` of them
// (a matmul's two matrix dims). False when two aligned dims disagree.
bool broadcast_leading(const Labels& a, const Labels& b, int skip, Labels& out) {
  for (int d = 0; d < out.rank - skip; ++d) {
    int da = d - (out.rank - a.rank), db = d - (out.rank - b.rank);
    auto l = broadcast(da >= 0 ? a.dims[static_cast<size_t>(da)] : Label{},
                       db >= 0 ? b.dims[static_cast<size_t>(db)] : Label{});
    if (!l) return false;
    out.dims[static_cast<size_t>(d)] = *l;
  }
  return true;
}

}  // namespace

std::optional<Labels> infer_labels(ir::OpCode op, const ir::Attrs& attrs, const Labels* a, const Labels* b,
                                   Label* reduced) {
  const ir::OpInfo& info = ir::op_info(op);
  if (reduced) *reduced = Label{};
  if (a->any_stacked() || (b && b->any_stacked())) return std::nullopt;
  switch (info.kind) {
    case OpKind::Unary:
      return *a;
    case OpKind::Norm:
      if (attrs.dim < 0 || attrs.dim >= a->rank) return std::nullopt;
      if (reduced) *reduced = a->dims[static_cast<size_t>(attrs.dim)];
      return *a;
    case OpKind::Binary: {
      Labels out;
      out.rank = std::max(a->rank, b->rank);
      if (!broadcast_leading(*a, *b, 0, out)) return std::nullopt;
      return out;
    }
    case OpKind::Matmul: {
      if (a->rank < 2 || b->rank < 2) return std::nullopt;
      Label ka = a->dims[a->rank - 1u], kb = b->dims[b->rank - 2u];
      if (!(ka == kb)) return std::nullopt;
      if (reduced) *reduced = ka;
      Labels out;
      out.rank = std::max(a->rank, b->rank);
      if (!broadcast_leading(*a, *b, 2, out)) return std::nullopt;
      out.dims[out.rank - 2u] = a->dims[a->rank - 2u];
      out.dims[out.rank - 1u] = b->dims[b->rank - 1u];
      return out;
    }
    case OpKind::Transpose: {
      if (a->rank < 2) return std::nullopt;
      Labels out = *a;
      std::swap(out.dims[a->rank - 1u], out.dims[a->rank - 2u]);
      return out;
    }
    case OpKind::Reduce: {
      if (attrs.dim < 0 || attrs.dim >= a->rank || attrs.to != 1) return std::nullopt;
      Labels out = *a;
      if (reduced) *reduced = a->dims[static_cast<size_t>(attrs.dim)];
      out.dims[static_cast<size_t>(attrs.dim)] = Label{};
      return out;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace morgana::search
