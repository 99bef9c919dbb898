#include "ir/block_rules.h"

#include <algorithm>
#include <array>

namespace morgana::ir {

std::vector<BlockSection> block_sections(const Graph& body) {
  const bool looping = body.block_params().loop > 1;
  std::vector<BlockSection> sec(body.num_tensors(), BlockSection::prologue);
  for (const Node& n : body.nodes()) {
    BlockSection s = BlockSection::prologue;
    const OpKind kind = op_info(n.op).kind;
    if (kind == OpKind::Iter)
      s = looping && n.attrs.fmap != kPhi ? BlockSection::body : BlockSection::prologue;
    else if (kind == OpKind::Accum)
      s = BlockSection::epilogue;
    else
      for (TensorId t : body.operands(n)) s = std::max(s, sec[t]);
    for (int i = 0; i < n.num_results; ++i) sec[body.result(n, i)] = s;
  }
  return sec;
}

namespace {

// The nodes that read tensor t, one entry per operand slot.
std::vector<NodeId> readers(const Graph& body, TensorId t) {
  std::vector<NodeId> r;
  for (NodeId id = 0; id < body.nodes().size(); ++id)
    for (TensorId o : body.operands(body.node(id)))
      if (o == t) r.push_back(id);
  return r;
}

}  // namespace

bool matmul_fused_into_acc(const Graph& body, const std::vector<BlockSection>& sections, NodeId matmul) {
  const Node& n = body.node(matmul);
  if (n.op != OpCode::matmul || body.block_params().loop <= 1) return false;
  const TensorId r = body.result(n);
  const std::vector<NodeId> users = readers(body, r);
  return sections[r] == BlockSection::body && users.size() == 1 && body.node(users[0]).op == OpCode::acc_sum;
}

std::optional<NodeId> norm_scaled_after(const Graph& body, const std::vector<BlockSection>& sections, NodeId norm) {
  const Node& n = body.node(norm);
  if (n.op != OpCode::rms_norm) return std::nullopt;
  const TensorId r = body.result(n);
  const std::vector<NodeId> users = readers(body, r);
  if (users.size() != 1) return std::nullopt;
  const Node& m = body.node(users[0]);
  if (m.op != OpCode::matmul || matmul_fused_into_acc(body, sections, users[0]) ||
      sections[body.result(m)] != sections[r])
    return std::nullopt;
  const TensorType& x = body.type(r);
  const int contraction = body.operands(m)[0] == r ? x.rank - 1 : x.rank - 2;
  if (n.attrs.dim != contraction || body.type(body.result(m)).numel() > x.numel()) return std::nullopt;
  return users[0];
}

std::vector<uint8_t> matmul_operands_scaled_after(const Graph& body) {
  std::vector<uint8_t> bits(body.nodes().size(), 0);
  const std::vector<BlockSection> sections = block_sections(body);
  for (NodeId id = 0; id < body.nodes().size(); ++id) {
    std::optional<NodeId> m = norm_scaled_after(body, sections, id);
    if (!m) continue;
    const TensorId r = body.result(body.node(id));
    auto ops = body.operands(body.node(*m));
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i] == r) bits[*m] |= static_cast<uint8_t>(1u << i);
  }
  return bits;
}

namespace {

// The batch dims above 1 of a shape, and whether its row dim has extent 1.
struct BatchShape {
  int above_one = 0, dim = -1;
  bool one_row = false;
};
BatchShape batch_shape(std::span<const int64_t> shape) {
  BatchShape b;
  const int r = static_cast<int>(shape.size());
  for (int d = 0; d + 2 < r; ++d)
    if (shape[static_cast<size_t>(d)] > 1) {
      ++b.above_one;
      b.dim = d;
    }
  b.one_row = r >= 2 && shape[static_cast<size_t>(r - 2)] == 1;
  return b;
}

}  // namespace

bool folds(std::span<const int64_t> shape, const UnitRowFold& fold) {
  const BatchShape b = batch_shape(shape);
  return static_cast<int>(shape.size()) == fold.rank && b.above_one == 1 && b.dim == fold.dim && b.one_row;
}

std::optional<UnitRowFold> unit_row_fold(const Graph& body) {
  std::optional<UnitRowFold> fold;
  bool product = false;
  for (const Node& n : body.nodes()) {
    if (n.op == OpCode::save) continue;
    for (int i = 0; i < n.num_results; ++i) {
      const TensorType& t = body.type(body.result(n, i));
      const BatchShape b = batch_shape(t.shape());
      if (b.above_one == 0) continue;
      if (b.above_one > 1 || !b.one_row) return std::nullopt;
      const UnitRowFold f{t.rank, b.dim};
      if (fold && (fold->rank != f.rank || fold->dim != f.dim)) return std::nullopt;
      fold = f;
    }
    // A concat of folding values would need its dim mapped per operand; none is needed yet.
    if (op_info(n.op).kind == OpKind::Concat && fold) return std::nullopt;
    if (op_info(n.op).kind == OpKind::Matmul) {
      if (batch_shape(body.type(body.operands(n)[1]).shape()).above_one > 0) return std::nullopt;
      product = product || batch_shape(body.type(body.operands(n)[0]).shape()).above_one > 0;
    }
  }
  if (!product) return std::nullopt;
  return fold;
}

int folded_dim(int d, const UnitRowFold& fold) {
  const int row = fold.rank - 2;
  return d == fold.dim ? row : d == row ? fold.dim : d;
}

Graph with_rows_folded(const Graph& body, const UnitRowFold& fold) {
  Graph g = body;
  for (Node& n : g.nodes_) {
    if (n.op == OpCode::save) continue;
    // A reduction over a folding value names its dim as folded.
    const OpKind kind = op_info(n.op).kind;
    if ((kind == OpKind::Reduce || kind == OpKind::Norm) && folds(body.type(body.operands(n)[0]).shape(), fold))
      n.attrs.dim = static_cast<decltype(n.attrs.dim)>(folded_dim(n.attrs.dim, fold));
    for (int i = 0; i < n.num_results; ++i) {
      TensorType& t = g.tensors_[g.result(n, i)].type;
      if (!folds(t.shape(), fold)) continue;
      std::swap(t.dims[static_cast<size_t>(fold.dim)], t.dims[static_cast<size_t>(t.rank - 2)]);
      t.set_row_major_strides();
    }
  }
  return g;
}

namespace {

// The two pieces of `t` along `dim` when a concat along it made `t`.
std::optional<std::pair<TensorId, TensorId>> concat_pieces(const Graph& g, TensorId t, int dim) {
  const Node& p = g.node(g.tensor(t).producer);
  if (p.op != OpCode::concat || p.attrs.dim != dim) return std::nullopt;
  return std::pair{g.operands(p)[0], g.operands(p)[1]};
}

// The pieces of the matmul `n`'s operands, when it splits.
std::optional<std::array<TensorId, 4>> split_pieces(const Graph& g, const Node& n) {
  if (n.op != OpCode::matmul) return std::nullopt;
  const TensorId a = g.operands(n)[0], b = g.operands(n)[1];
  const int ra = g.type(a).rank, rb = g.type(b).rank;
  const auto l = concat_pieces(g, a, ra - 1), r = concat_pieces(g, b, rb - 2);
  if (!l || !r || g.type(l->first).dim(ra - 1) != g.type(r->first).dim(rb - 2)) return std::nullopt;
  return std::array{l->first, l->second, r->first, r->second};
}

}  // namespace

std::optional<Graph> with_contracted_concats_split(const Graph& body) {
  std::vector<int> readers(body.num_tensors(), 0), split_readers(body.num_tensors(), 0);
  bool any = false;
  for (const Node& n : body.nodes()) {
    for (TensorId t : body.operands(n)) ++readers[t];
    if (split_pieces(body, n)) {
      any = true;
      for (TensorId t : body.operands(n)) ++split_readers[t];
    }
  }
  if (!any) return std::nullopt;
  Graph g = Graph::make_block(body.block_params(),
                              std::vector<TensorType>(body.operand_types().begin(), body.operand_types().end()));
  std::vector<TensorId> at(body.num_tensors(), 0);  // body's tensors in g
  auto mapped = [&](std::span<const TensorId> ts) {
    std::vector<TensorId> out;
    for (TensorId t : ts) out.push_back(at[t]);
    return out;
  };
  for (NodeId id = 0; id < body.nodes().size(); ++id) {
    const Node& n = body.node(id);
    const size_t before = g.nodes().size();
    if (n.op == OpCode::concat && readers[body.result(n)] == split_readers[body.result(n)]) continue;  // split away
    if (std::optional<std::array<TensorId, 4>> p = split_pieces(body, n)) {
      const TensorId ac = g.add1(OpCode::matmul, std::array{at[(*p)[0]], at[(*p)[2]]});
      const TensorId bd = g.add1(OpCode::matmul, std::array{at[(*p)[1]], at[(*p)[3]]});
      at[body.result(n)] = g.add1(OpCode::add, std::array{ac, bd});
    } else if (n.op == OpCode::iter) {
      at[body.result(n)] = g.add_iter(n.attrs.index, n.attrs.map, n.attrs.fmap, n.attrs.mask);
    } else {
      const std::vector<TensorId> rs = g.add(n.op, mapped(body.operands(n)), n.attrs);
      for (int i = 0; i < n.num_results; ++i) at[body.result(n, i)] = rs[static_cast<size_t>(i)];
    }
    for (size_t k = before; k < g.nodes().size(); ++k) g.set_loc(static_cast<NodeId>(k), body.loc(id));
    for (int i = 0; i < n.num_results; ++i)
      if (!body.name(body.result(n, i)).empty()) g.set_name(at[body.result(n, i)], body.name(body.result(n, i)));
  }
  return g;
}

OperandView view_of(const Graph& g, TensorId t, std::span<const InputAlias> aliases) {
  const Node& producer = g.node(g.tensor(t).producer);
  if (producer.op == OpCode::input && producer.attrs.index < aliases.size()) {
    const InputAlias& a = aliases[producer.attrs.index];
    return {g.inputs()[a.input], a.transposed};
  }
  if (producer.op == OpCode::transpose) {
    OperandView v = view_of(g, g.operands(producer)[0], aliases);
    v.transposed = !v.transposed;
    return v;
  }
  return {t, false};
}

std::vector<OperandView> operand_views(const Graph& kernel_graph, const Node& block,
                                       std::span<const InputAlias> aliases) {
  std::vector<OperandView> views;
  for (TensorId t : kernel_graph.operands(block)) views.push_back(view_of(kernel_graph, t, aliases));
  return views;
}

namespace {

// Dim d of a view's tensor as the other view numbers it: the last two swapped where exactly one is transposed.
int8_t across_views(int8_t d, int rank, bool swap) {
  if (!swap || d == kPhi) return d;
  if (d == rank - 1) return static_cast<int8_t>(rank - 2);
  if (d == rank - 2) return static_cast<int8_t>(rank - 1);
  return d;
}

}  // namespace

bool transposed_layout(std::span<const int64_t> shape, std::span<const int64_t> strides) {
  const size_t r = shape.size();
  return r >= 2 && strides.size() == r && strides[r - 1] != 1 && strides[r - 2] == 1 && shape[r - 1] > 1;
}

bool read_only_as_matmul_b(const Graph& body, TensorId t) {
  bool read = false;
  for (const Node& n : body.nodes()) {
    const auto ops = body.operands(n);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i] != t) continue;
      if (n.op != OpCode::matmul || i != 1 || ops[0] == t) return false;
      read = true;
    }
  }
  return read;
}

std::vector<int> equal_iters(const Graph& body, std::span<const OperandView> views) {
  std::vector<int> same(body.nodes().size(), -1);
  for (NodeId j = 0; j < body.nodes().size(); ++j) {
    const Node& y = body.node(j);
    if (y.op != OpCode::iter) continue;
    const OperandView& vy = views[y.attrs.index];
    const TensorType& ty = body.type(body.result(y));
    for (NodeId i = 0; i < j && same[j] < 0; ++i) {
      const Node& x = body.node(i);
      if (x.op != OpCode::iter || same[i] >= 0) continue;
      const OperandView& vx = views[x.attrs.index];
      const TensorType& tx = body.type(body.result(x));
      if (vx.tensor != vy.tensor || tx.dtype != ty.dtype || tx.rank != ty.rank || x.attrs.mask != y.attrs.mask)
        continue;
      const bool swap = vx.transposed != vy.transposed;
      const int r = tx.rank;
      if (swap && (r < 2 || !read_only_as_matmul_b(body, body.result(vx.transposed ? x : y)))) continue;
      bool equal = across_views(x.attrs.fmap, r, swap) == y.attrs.fmap;
      for (int gd = 0; gd < kGridDims; ++gd)
        equal = equal && across_views(x.attrs.map[static_cast<size_t>(gd)], r, swap) == y.attrs.map[static_cast<size_t>(gd)];
      for (int d = 0; d < r; ++d)
        equal = equal && tx.dim(d) == ty.dim(across_views(static_cast<int8_t>(d), r, swap));
      if (equal) same[j] = static_cast<int>(i);
    }
  }
  return same;
}

}  // namespace morgana::ir
