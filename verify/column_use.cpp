#include "verify/column_use.h"

#include <algorithm>
#include <iterator>
#include <numeric>

namespace morgana::verify {

namespace {

using ir::OpKind;

int64_t last_dim(const ir::TensorType& t) { return t.dim(t.rank - 1); }

Columns every(int64_t width) {
  Columns c(static_cast<size_t>(width));
  std::iota(c.begin(), c.end(), 0);
  return c;
}

void add(Columns& to, const Columns& from) {
  if (!from.empty() && to != from) to = column_union(to, from);
}

// The columns `f` maps `r` to, below `width`, sorted and distinct.
template <class F>
Columns mapped(const Columns& r, int64_t width, F&& f) {
  Columns out;
  for (int32_t c : r) f(c, [&](int64_t x) {
      if (x >= 0 && x < width) out.push_back(static_cast<int32_t>(x));
    });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The columns of operand `k` of node `n` that result columns `r` read (the lazy interpreter's compute()).
Columns operand_columns(const ir::Graph& g, const ir::Node& n, size_t k, const Columns& r) {
  const ir::TensorType& in = g.type(g.operands(n)[k]);
  const ir::TensorType& out = g.type(g.result(n));
  const int64_t width = last_dim(in);
  const bool along_last = n.attrs.dim == out.rank - 1;
  switch (ir::op_info(n.op).kind) {
    case OpKind::Unary:
      return r;
    case OpKind::Binary:
    case OpKind::Accum:  // acc_rescale_sum's max operand broadcasts like a binary op's
      return width == 1 ? Columns{0} : r;
    case OpKind::Matmul:
      return k == 0 ? every(width) : r;
    case OpKind::Reduce:
      if (!along_last) return r;
      return mapped(r, width, [&](int64_t c, auto&& emit) {
        for (int64_t x = c; x < width; x += n.attrs.to) emit(x);  // column c sums c, c + to, c + 2 to, ...
      });
    case OpKind::Norm:
    case OpKind::Softmax:
      return along_last ? every(width) : r;
    case OpKind::Concat: {
      if (!along_last) return r;
      int64_t n0 = last_dim(g.type(g.operands(n)[0]));
      return mapped(r, width, [&](int64_t c, auto&& emit) { emit(k == 0 ? c : c - n0); });
    }
    default:
      return every(width);
  }
}

// Marks the operands of every node of `g` from the columns of its results, last node first. `block_op` handles a
// `block` node (kernel level).
template <class BlockOp>
void propagate(const ir::Graph& g, std::vector<Columns>& need, BlockOp&& block_op) {
  for (size_t i = g.nodes().size(); i-- > 0;) {
    const ir::Node& n = g.node(static_cast<ir::NodeId>(i));
    OpKind kind = ir::op_info(n.op).kind;
    if (kind == OpKind::Block) {
      block_op(n);
      continue;
    }
    if (kind == OpKind::Input || kind == OpKind::Output || kind == OpKind::Iter) continue;
    const Columns& r = need[g.result(n)];
    if (r.empty()) continue;
    auto ops = g.operands(n);
    for (size_t k = 0; k < ops.size(); ++k) add(need[ops[k]], operand_columns(g, n, k, r));
  }
}

// Whether a tile's last dim is split across blocks or for-loop iterations (its origin along it varies).
bool splits_last(const ir::Attrs& a, int rank) {
  return a.fmap == rank - 1 || std::count(a.map.begin(), a.map.end(), static_cast<int8_t>(rank - 1)) > 0;
}

}  // namespace

ColumnUse column_use(const ir::Graph& g, const std::vector<Columns>& outputs) {
  ColumnUse use;
  use.kernel.resize(g.num_tensors());
  use.body.resize(g.bodies().size());
  for (size_t o = 0; o < outputs.size(); ++o) add(use.kernel[g.outputs()[o]], outputs[o]);
  propagate(g, use.kernel, [&](const ir::Node& n) {
    const ir::Graph& body = g.body(n);
    std::vector<Columns>& need = use.body[n.attrs.index];
    need.assign(body.num_tensors(), {});
    // A save writes its tile at a multiple of the tile's width when the grid splits the last dim.
    int result = 0;
    for (const ir::Node& s : body.nodes()) {
      if (s.op != ir::OpCode::save) continue;
      const ir::TensorType& tile = body.type(body.operands(s)[0]);
      int64_t tile_last = last_dim(tile);
      bool split = splits_last(s.attrs, tile.rank);
      add(need[body.operands(s)[0]], mapped(use.kernel[g.result(n, result++)], tile_last, [&](int64_t c, auto&& emit) {
            emit(split ? c % tile_last : c);
          }));
    }
    propagate(body, need, [](const ir::Node&) {});
    // An iterator reads its operand at the tile's columns plus the tile's origin, a multiple of its width.
    auto operands = g.operands(n);
    for (const ir::Node& it : body.nodes()) {
      if (it.op != ir::OpCode::iter || need[body.result(it)].empty()) continue;
      const ir::TensorType& tile = body.type(body.result(it));
      ir::TensorId src = operands[it.attrs.index];
      int64_t tile_last = last_dim(tile), full_last = last_dim(g.type(src));
      bool split = splits_last(it.attrs, tile.rank);
      add(use.kernel[src], mapped(need[body.result(it)], full_last, [&](int64_t c, auto&& emit) {
            for (int64_t origin = 0; origin < (split ? full_last : 1); origin += tile_last) emit(origin + c);
          }));
    }
  });
  return use;
}

Columns column_union(const Columns& a, const Columns& b) {
  Columns u;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(u));
  return u;
}

ColumnUse all_columns(const ir::Graph& g) {
  ColumnUse use;
  for (ir::TensorId t = 0; t < g.num_tensors(); ++t) use.kernel.push_back(every(last_dim(g.type(t))));
  for (const ir::Graph& body : g.bodies()) {
    use.body.emplace_back();
    for (ir::TensorId t = 0; t < body.num_tensors(); ++t) use.body.back().push_back(every(last_dim(body.type(t))));
  }
  return use;
}

}  // namespace morgana::verify
