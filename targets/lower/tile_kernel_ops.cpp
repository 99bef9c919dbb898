// Pass 2 of the lowering: every predefined kernel-level op becomes an equivalent `block` op, so that one block-graph
// lowering handles everything (and a test can prove each tiling equivalent to its op with verify::equivalent).
//
// The tilings are deliberately plain (a later issue tunes them from the cost model):
//   - elementwise ops, concat and copies: tiles of about threads*8 elements, each dim cut into a divisor of its
//     extent, so no tile is ragged (a masked tile reads 0, and a division of padded lanes would divide by 0);
//   - matmul: grid over N, M and the largest batch dim, the for-loop over K; ragged edges masked (the padded zeros
//     add nothing to a sum, and padded rows or columns are never stored);
//   - reduce_sum/reduce_max, softmax, rms_norm: the reduced dim whole in one tile when it fits, so a max is never
//     taken over padding and folds in the spec's order; otherwise the for-loop walks it in chunks that divide it.
//     softmax and rms_norm whose rows cannot fit are expanded into their parts first.
// Tile sizes shrink until the block's shared-memory plan fits the target's default per-block shared memory; when
// even the smallest does not, the largest that fits the opt-in limit is used.
#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>

#include "ir/printer.h"
#include "targets/lower/lower.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

using ir::Attrs;
using ir::Graph;
using ir::kPhi;
using ir::OpCode;
using ir::OpKind;
using ir::TensorId;
using ir::TensorType;

// Elementwise tiles hold about this many elements per thread.
constexpr int64_t kElemsPerThread = 8;
// Preferred matmul tile (M, N, K) before shrinking to fit.
constexpr int64_t kMatmulTile[3] = {64, 64, 32};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::clamp<int64_t>(cap, 1, n); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

// The divisors of n, ascending.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> lo, hi;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) hi.push_back(n / d);
    }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

// How the grid cuts a result: parts per result dim, and which grid dim (x, y, z) takes which result dim.
struct Split {
  std::vector<int64_t> parts;
  std::array<int8_t, ir::kGridDims> omap{kPhi, kPhi, kPhi};
  std::array<int64_t, ir::kGridDims> grid{1, 1, 1};
  int64_t parts_of(int d) const { return parts[static_cast<size_t>(d)]; }
};

// Gives the split dims to grid dims, most parts first (x allows the largest grids). At most three dims may be split.
Split make_split(std::vector<int64_t> parts) {
  Split s;
  s.parts = std::move(parts);
  std::vector<int> dims;
  for (int d = static_cast<int>(s.parts.size()) - 1; d >= 0; --d)
    if (s.parts[static_cast<size_t>(d)] > 1) dims.push_back(d);
  MG_CHECK(dims.size() <= static_cast<size_t>(ir::kGridDims), "more split dims than grid dims");
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int a, int b) { return s.parts[static_cast<size_t>(a)] > s.parts[static_cast<size_t>(b)]; });
  for (size_t g = 0; g < dims.size(); ++g) {
    s.omap[g] = static_cast<int8_t>(dims[g]);
    s.grid[g] = s.parts[static_cast<size_t>(dims[g])];
  }
  return s;
}

// Parts per dim such that each tile dim divides its extent and a tile holds at most `budget` elements (filled from
// the last dim, which is contiguous). Dims in `whole` are never split. If more than three dims would be split, the
// smallest of them is kept whole.
std::vector<int64_t> divisor_parts(std::span<const int64_t> shape, int64_t budget, const std::vector<bool>& whole) {
  std::vector<int64_t> tile(shape.size());
  int64_t left = std::max<int64_t>(budget, 1);
  for (size_t d = 0; d < shape.size(); ++d)
    if (whole[d]) left = std::max<int64_t>(left / shape[d], 1);
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    auto u = static_cast<size_t>(d);
    if (whole[u]) {
      tile[u] = shape[u];
      continue;
    }
    tile[u] = largest_divisor_at_most(shape[u], left);
    left = std::max<int64_t>(left / tile[u], 1);
  }
  for (;;) {
    int split = 0, smallest = -1;
    for (size_t d = 0; d < shape.size(); ++d)
      if (tile[d] != shape[d]) {
        ++split;
        if (smallest < 0 || shape[d] < shape[static_cast<size_t>(smallest)]) smallest = static_cast<int>(d);
      }
    if (split <= ir::kGridDims) break;
    tile[static_cast<size_t>(smallest)] = shape[static_cast<size_t>(smallest)];
  }
  std::vector<int64_t> parts(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) parts[d] = shape[d] / tile[d];
  return parts;
}

// An iterator over block operand `operand` (type `t`) for a result cut by `s`: `dim_of(d)` is the operand dim that
// result dim d corresponds to, or -1. A grid dim splits that operand dim when the extents agree; a broadcast dim
// (extent 1) is replicated. Masked when some split of the operand does not divide its dim.
TensorId add_iter(Graph& body, uint32_t operand, const TensorType& t, const TensorType& out, const Split& s,
                  const std::function<int(int)>& dim_of, int8_t fmap = kPhi) {
  Attrs a;
  a.fmap = fmap;
  for (int g = 0; g < ir::kGridDims; ++g) {
    int d = s.omap[static_cast<size_t>(g)];
    if (d == kPhi || s.grid[static_cast<size_t>(g)] == 1) continue;
    int od = dim_of(d);
    if (od >= 0 && t.dim(od) == out.dim(d)) a.map[static_cast<size_t>(g)] = static_cast<int8_t>(od);
  }
  for (int d = 0; d < t.rank; ++d)
    if (t.dim(d) % ir::iter_parts(body.block_params(), a, d) != 0) a.mask = true;
  return body.add_iter(operand, a.map, a.fmap, a.mask);
}

// Saves `t` as the block's next result, of type `out`, cut by `s`; `shape=` when the tiles overhang the result.
void add_save(Graph& body, TensorId t, const TensorType& out, const Split& s) {
  Attrs a;
  a.map = s.omap;
  const TensorType& tile = body.type(t);
  bool ragged = false;
  for (int d = 0; d < out.rank; ++d) ragged = ragged || tile.dim(d) * s.parts_of(d) != out.dim(d);
  if (ragged) {
    a.shape_rank = out.rank;
    for (int d = 0; d < out.rank; ++d) a.shape[static_cast<size_t>(d)] = out.dim(d);
  }
  body.add(OpCode::save, std::span<const TensorId>(&t, 1), a);
}

TensorId named(Graph& body, TensorId t, const std::string& name) {
  body.set_name(t, name);
  return t;
}

// Builds the block graph of one tiling choice; `level` 0 is the preferred (largest) tiling, each further level a
// smaller one; nullopt when there is no smaller one.
using Builder = std::function<std::optional<Graph>(int level)>;

class Tiler {
 public:
  Tiler(const Graph& g, const targets::Target& target)
      : g_(g),
        names_(ir::printed_names(g)),
        threads_(default_threads(target)),
        default_limit_(std::min(target.memory.smem_per_block_default, shared_memory_limit(target))),
        optin_limit_(shared_memory_limit(target)),
        target_name_(target.identity.name) {
    out_.set_name(g.name());
    for (const std::string& n : names_) used_.insert(n);
  }

  TiledGraph run() {
    map_.assign(g_.num_tensors(), 0);
    for (ir::NodeId id = 0; id < g_.nodes().size(); ++id) {
      const ir::Node& n = g_.node(id);
      loc_ = g_.loc(id);
      if (n.op == OpCode::input) {
        TensorId t = out_.add_input(g_.type(g_.result(n)), names_[g_.result(n)]);
        mark(loc_, "");
        map_[g_.result(n)] = t;
      } else if (n.op == OpCode::output) {
        continue;  // outputs are added at the end, after copies are made
      } else if (n.op == OpCode::block) {
        std::vector<TensorId> ops;
        for (TensorId t : g_.operands(n)) ops.push_back(map_[t]);
        std::vector<TensorId> rs = out_.add_block(ops, g_.body(n));
        mark(loc_, "");
        for (int i = 0; i < n.num_results; ++i) {
          map_[g_.result(n, i)] = rs[static_cast<size_t>(i)];
          out_.set_name(rs[static_cast<size_t>(i)], names_[g_.result(n, i)]);
        }
      } else if (n.op == OpCode::transpose) {
        // A view: no kernel; its readers read the operand's memory with the strides swapped (lower_tiled).
        TensorId t = out_.add1(OpCode::transpose, {map_[g_.operands(n)[0]]}, n.attrs);
        out_.set_name(t, names_[g_.result(n)]);
        mark(loc_, "");
        map_[g_.result(n)] = t;
      } else {
        std::vector<TensorId> ops;
        for (TensorId t : g_.operands(n)) ops.push_back(map_[t]);
        std::string stmt = ir::print_node(g_, n, names_);
        map_[g_.result(n)] = op(n.op, n.attrs, ops, names_[g_.result(n)], stmt);
      }
    }
    // Every output gets a buffer of its own: a returned input or view, or a tensor returned twice, is copied.
    std::unordered_set<TensorId> taken;
    for (TensorId t : g_.outputs()) {
      TensorId nt = map_[t];
      const bool made = out_.tensor(nt).producer < out_.nodes().size();
      const OpCode by = made ? out_.node(out_.tensor(nt).producer).op : OpCode::input;
      if (by == OpCode::input || by == OpCode::transpose || taken.count(nt)) {
        std::string name = fresh(names_[t] + "_copy");
        loc_ = {};
        nt = copy(nt, name, "return " + names_[t]);
      }
      taken.insert(nt);
      out_.add_output(nt);
      mark({}, "");
    }
    return {std::move(out_), std::move(made_from_)};
  }

 private:
  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 2; used_.count(n); ++i) n = base + std::to_string(i);
    used_.insert(n);
    return n;
  }

  // Records the source position and origin of the node just appended to the output graph.
  void mark(const SourceLoc& loc, const std::string& from) {
    auto id = static_cast<ir::NodeId>(out_.nodes().size() - 1);
    out_.set_loc(id, loc);
    made_from_.resize(out_.nodes().size());
    made_from_[id] = from;
  }

  TensorId add_block(const std::vector<TensorId>& operands, Graph body, const std::string& name,
                     const std::string& from) {
    for (size_t i = 0; i < body.nodes().size(); ++i) body.set_loc(static_cast<ir::NodeId>(i), loc_);
    std::vector<TensorId> rs = out_.add_block(operands, std::move(body));
    MG_CHECK(rs.size() == 1, "a tiled op saves one result");
    out_.set_name(rs[0], name);
    mark(loc_, from);
    return rs[0];
  }

  ir::BlockParams params(const Split& s, int64_t loop = 1) const {
    ir::BlockParams p;
    p.grid = s.grid;
    p.threads = threads_;
    p.loop = loop;
    return p;
  }

  // Picks the first tiling whose shared memory fits the default limit, else the largest that fits the opt-in
  // limit; nullopt when none fits.
  std::optional<Graph> choose(const Builder& build) const {
    std::optional<Graph> fallback;
    for (int level = 0;; ++level) {
      std::optional<Graph> body = build(level);
      if (!body) break;
      int64_t bytes = block_smem_bytes(*body);
      if (bytes <= default_limit_) return body;
      if (!fallback && bytes <= optin_limit_) fallback = std::move(body);
    }
    return fallback;
  }

  Graph choose_or_throw(const Builder& build, const std::string& stmt) const {
    std::optional<Graph> body = choose(build);
    if (!body)
      throw UserError("'" + stmt + "': no tiling of this op fits the " + std::to_string(optin_limit_) +
                          " bytes of shared memory a block may use on target '" + target_name_ + "'",
                      loc_);
    return std::move(*body);
  }

  // Appends predefined op `op` on `ops` to the output graph as a block op; returns its result.
  TensorId op(OpCode op, const Attrs& a, const std::vector<TensorId>& ops, const std::string& name,
              const std::string& stmt) {
    std::vector<TensorId> operands = ops;  // the block's operands: each tensor once
    std::optional<Graph> body;
    switch (ir::op_info(op).kind) {
      case OpKind::Unary:
      case OpKind::Binary:
        body = elementwise(op, a, operands, stmt);
        break;
      case OpKind::Matmul:
        body = matmul(operands, stmt);
        break;
      case OpKind::Reduce:
        body = reduce(op, a, operands[0], stmt);
        break;
      case OpKind::Concat:
        body = concat(a, operands, stmt);
        break;
      case OpKind::Norm:
      case OpKind::Softmax:
        body = choose(row_op(op, a, operands[0]));
        if (!body) return expand(op, a, operands[0], name, stmt);
        break;
      default:
        MG_CHECK(false, "tile_kernel_ops: unexpected op " + std::string(ir::op_name(op)));
    }
    return add_block(operands, std::move(*body), name, stmt);
  }

  // A row op too large for one tile per row, as its parts (the interpreter's definition, op for op), each tiled.
  TensorId expand(OpCode op, const Attrs& a, TensorId x, const std::string& name, const std::string& stmt) {
    auto add = [&](OpCode o, std::vector<TensorId> ops, const Attrs& at, const std::string& part) {
      return this->op(o, at, ops, part == "" ? name : fresh(name + "_" + part), stmt);
    };
    Attrs dim;
    dim.dim = a.dim;
    if (op == OpCode::softmax) {
      TensorId m = add(OpCode::reduce_max, {x}, dim, "max");
      TensorId d = add(OpCode::sub, {x, m}, {}, "shifted");
      TensorId e = add(OpCode::exp, {d}, {}, "exp");
      TensorId s = add(OpCode::reduce_sum, {e}, dim, "sum");
      return add(OpCode::div, {e, s}, {}, "");
    }
    TensorId sq = add(OpCode::square, {x}, {}, "square");
    TensorId s = add(OpCode::reduce_sum, {sq}, dim, "sum");
    Attrs inv_n, eps;
    inv_n.s = 1.0 / static_cast<double>(out_.type(x).dim(a.dim));
    eps.s = a.eps;
    TensorId ms = add(OpCode::mul_scalar, {s}, inv_n, "mean");
    TensorId r = add(OpCode::rsqrt, {add(OpCode::add_scalar, {ms}, eps, "eps")}, {}, "rsqrt");
    return add(OpCode::mul, {x, r}, {}, "");
  }

  // Block operands without repeats (the text form lists each operand once), and each op operand's position.
  static std::vector<TensorId> unique(const std::vector<TensorId>& ops, std::vector<uint32_t>& index) {
    std::vector<TensorId> u;
    for (TensorId t : ops) {
      auto it = std::find(u.begin(), u.end(), t);
      index.push_back(static_cast<uint32_t>(it - u.begin()));
      if (it == u.end()) u.push_back(t);
    }
    return u;
  }

  std::vector<TensorType> types(const std::vector<TensorId>& ops) const {
    std::vector<TensorType> ts;
    for (TensorId t : ops) ts.push_back(out_.type(t));
    return ts;
  }

  Graph elementwise(OpCode op, const Attrs& a, std::vector<TensorId>& ops, const std::string& stmt) {
    std::vector<uint32_t> index;
    ops = unique(ops, index);
    std::vector<TensorType> in = types(ops);
    TensorType out = ir::infer_types(op, index.size() == 1 ? std::vector<TensorType>{in[index[0]]}
                                                           : std::vector<TensorType>{in[index[0]], in[index[1]]},
                                     a, nullptr, nullptr)[0];
    return choose_or_throw(
        [&, out](int level) -> std::optional<Graph> {
          int64_t budget = (threads_ * kElemsPerThread) >> level;
          if (budget == 0) return std::nullopt;
          Split s = make_split(divisor_parts(out.shape(), budget, std::vector<bool>(out.rank, false)));
          Graph body = Graph::make_block(params(s), in);
          std::vector<TensorId> its;
          for (uint32_t i = 0; i < ops.size(); ++i) {
            int shift = out.rank - in[i].rank;
            its.push_back(named(body, add_iter(body, i, in[i], out, s, [shift](int d) { return d - shift; }),
                                std::string(1, static_cast<char>('x' + i))));
          }
          std::vector<TensorId> args;
          for (uint32_t i : index) args.push_back(its[i]);
          TensorId z = named(body, body.add1(op, args, a), "z");
          add_save(body, named(body, body.add1(OpCode::acc_sum, {z}), "acc"), out, s);
          return body;
        },
        stmt);
  }

  Graph matmul(std::vector<TensorId>& ops, const std::string& stmt) {
    std::vector<uint32_t> index;
    std::vector<TensorId> uops = unique(ops, index);
    ops = uops;
    std::vector<TensorType> in = types(uops);
    const TensorType &A = in[index[0]], &B = in[index[1]];
    TensorType out = ir::infer_types(OpCode::matmul, std::vector<TensorType>{A, B}, {}, nullptr, nullptr)[0];
    int r = out.rank, ra = A.rank, rb = B.rank;
    int64_t M = out.dim(r - 2), N = out.dim(r - 1), K = A.dim(ra - 1);
    // The grid takes the largest batch dim whole (one batch element per block); other batch dims stay in the tile.
    int batch = -1;
    for (int d = 0; d < r - 2; ++d)
      if (out.dim(d) > 1 && (batch < 0 || out.dim(d) > out.dim(batch))) batch = d;
    return choose_or_throw(
        [&, out, M, N, K, batch](int level) -> std::optional<Graph> {
          int64_t t[3] = {kMatmulTile[0], kMatmulTile[1], kMatmulTile[2]};
          for (int l = 0; l < level; ++l) {
            int big = t[2] * 2 >= std::max(t[0], t[1]) ? 2 : t[0] >= t[1] ? 0 : 1;
            if (t[big] == 1) return std::nullopt;
            t[big] /= 2;
          }
          std::vector<int64_t> parts(static_cast<size_t>(r), 1);
          parts[static_cast<size_t>(r - 2)] = ceil_div(M, t[0]);
          parts[static_cast<size_t>(r - 1)] = ceil_div(N, t[1]);
          if (batch >= 0) parts[static_cast<size_t>(batch)] = out.dim(batch);
          int64_t loop = ceil_div(K, t[2]);
          Split s = make_split(parts);
          Graph body = Graph::make_block(params(s, loop), in);
          auto a_dim = [&](int d) { return d == r - 2 ? ra - 2 : d < r - 2 && d - (r - ra) >= 0 ? d - (r - ra) : -1; };
          auto b_dim = [&](int d) { return d == r - 1 ? rb - 1 : d < r - 2 && d - (r - rb) >= 0 ? d - (r - rb) : -1; };
          auto fm = [&](int d) { return loop > 1 ? static_cast<int8_t>(d) : kPhi; };
          // Two iterators even for matmul(X, X): each side tiles the operand its own way.
          TensorId ta = named(body, add_iter(body, index[0], A, out, s, a_dim, fm(ra - 1)), "a");
          TensorId tb = named(body, add_iter(body, index[1], B, out, s, b_dim, fm(rb - 2)), "b");
          TensorId p = named(body, body.add1(OpCode::matmul, {ta, tb}), "p");
          add_save(body, named(body, body.add1(OpCode::acc_sum, {p}), "acc"), out, s);
          return body;
        },
        stmt);
  }

  // reduce_sum / reduce_max over `a.dim` to `a.to` groups. The reduced dim is whole in the tile when it fits;
  // otherwise the for-loop walks it in L chunks, L a divisor of n/to, so each chunk holds whole groups and no chunk
  // is padded.
  Graph reduce(OpCode op, const Attrs& a, TensorId x, const std::string& stmt) {
    TensorType in = out_.type(x);
    TensorType out = ir::infer_types(op, std::vector<TensorType>{in}, a, nullptr, nullptr)[0];
    int64_t n = in.dim(a.dim);
    std::vector<int64_t> loops = divisors(n / a.to);
    OpCode acc = op == OpCode::reduce_max ? OpCode::acc_max : OpCode::acc_sum;
    int64_t row_budget = std::max<int64_t>(threads_ * kElemsPerThread / n, 1);
    int row_levels = 0;
    while ((row_budget >> row_levels) > 1) ++row_levels;
    return choose_or_throw(
        [&, in, out, loops, row_budget, row_levels](int level) -> std::optional<Graph> {
          int64_t rows = level <= row_levels ? std::max<int64_t>(row_budget >> level, 1) : 1;
          size_t li = level <= row_levels ? 0 : static_cast<size_t>(level - row_levels);
          if (li >= loops.size()) return std::nullopt;
          int64_t loop = loops[li];
          std::vector<bool> whole(static_cast<size_t>(in.rank), false);
          whole[static_cast<size_t>(a.dim)] = true;
          Split s = make_split(divisor_parts(out.shape(), rows * out.dim(a.dim), whole));
          Graph body = Graph::make_block(params(s, loop), {in});
          TensorId t = named(body, add_iter(body, 0, in, out, s, [](int d) { return d; },
                                            loop > 1 ? static_cast<int8_t>(a.dim) : kPhi),
                             "x");
          TensorId r = named(body, body.add1(op, {t}, a), "r");
          add_save(body, named(body, body.add1(acc, {r}), "acc"), out, s);
          return body;
        },
        stmt);
  }

  // softmax or rms_norm with whole rows in the tile.
  Builder row_op(OpCode op, const Attrs& a, TensorId x) {
    TensorType in = out_.type(x);
    int64_t n = in.dim(a.dim);
    int64_t row_budget = std::max<int64_t>(threads_ * kElemsPerThread / n, 1);
    return [this, op, a, in, row_budget](int level) -> std::optional<Graph> {
      int64_t rows = row_budget >> level;
      if (rows == 0) return std::nullopt;
      std::vector<bool> whole(static_cast<size_t>(in.rank), false);
      whole[static_cast<size_t>(a.dim)] = true;
      Split s = make_split(divisor_parts(in.shape(), rows * in.dim(a.dim), whole));
      Graph body = Graph::make_block(params(s), {in});
      TensorId t = named(body, add_iter(body, 0, in, in, s, [](int d) { return d; }), "x");
      TensorId y;
      if (op == OpCode::rms_norm) {
        y = named(body, body.add1(OpCode::rms_norm, {t}, a), "y");
      } else {
        Attrs dim;
        dim.dim = a.dim;
        TensorId m = named(body, body.add1(OpCode::reduce_max, {t}, dim), "m");
        TensorId d = named(body, body.add1(OpCode::sub, {t, m}), "d");
        TensorId e = named(body, body.add1(OpCode::exp, {d}), "e");
        TensorId l = named(body, body.add1(OpCode::reduce_sum, {e}, dim), "l");
        y = named(body, body.add1(OpCode::div, {e, l}), "y");
      }
      add_save(body, named(body, body.add1(OpCode::acc_sum, {y}), "acc"), in, s);
      return body;
    };
  }

  Graph concat(const Attrs& a, std::vector<TensorId>& ops, const std::string& stmt) {
    std::vector<uint32_t> index;
    ops = unique(ops, index);
    std::vector<TensorType> in = types(ops);
    TensorType out = ir::infer_types(OpCode::concat, std::vector<TensorType>{in[index[0]], in[index[1]]}, a,
                                     nullptr, nullptr)[0];
    int64_t row_budget = std::max<int64_t>(threads_ * kElemsPerThread / out.dim(a.dim), 1);
    return choose_or_throw(
        [&, out, in, index, row_budget](int level) -> std::optional<Graph> {
          int64_t rows = row_budget >> level;
          if (rows == 0) return std::nullopt;
          std::vector<bool> whole(static_cast<size_t>(out.rank), false);
          whole[static_cast<size_t>(a.dim)] = true;
          Split s = make_split(divisor_parts(out.shape(), rows * out.dim(a.dim), whole));
          Graph body = Graph::make_block(params(s), in);
          std::vector<TensorId> its;
          for (uint32_t i = 0; i < in.size(); ++i)
            its.push_back(named(body, add_iter(body, i, in[i], out, s, [](int d) { return d; }),
                                std::string(1, static_cast<char>('x' + i))));
          TensorId c = named(body, body.add1(OpCode::concat, {its[index[0]], its[index[1]]}, a), "z");
          add_save(body, named(body, body.add1(OpCode::acc_sum, {c}), "acc"), out, s);
          return body;
        },
        stmt);
  }

  TensorId copy(TensorId x, const std::string& name, const std::string& stmt) {
    TensorType t = out_.type(x);
    TensorType out = t;
    out.set_row_major_strides();
    Graph copied = choose_or_throw(
        [&, t, out](int level) -> std::optional<Graph> {
          int64_t budget = (threads_ * kElemsPerThread) >> level;
          if (budget == 0) return std::nullopt;
          Split s = make_split(divisor_parts(t.shape(), budget, std::vector<bool>(t.rank, false)));
          Graph body = Graph::make_block(params(s), {t});
          TensorId it = named(body, add_iter(body, 0, t, out, s, [](int d) { return d; }), "x");
          add_save(body, named(body, body.add1(OpCode::acc_sum, {it}), "acc"), out, s);
          return body;
        },
        stmt);
    return add_block({x}, std::move(copied), name, stmt);
  }

  const Graph& g_;
  std::vector<std::string> names_;
  int64_t threads_, default_limit_, optin_limit_;
  std::string target_name_;
  Graph out_;
  std::vector<std::string> made_from_;
  std::vector<TensorId> map_;
  std::unordered_set<std::string> used_;
  SourceLoc loc_;
};

}  // namespace

int64_t default_threads(const targets::Target& target) {
  return std::min<int64_t>(4 * target.execution.warp_size, target.execution.max_threads_per_block);
}

int64_t shared_memory_limit(const targets::Target& target) { return targets::block_smem_limit(target); }

TiledGraph tile_kernel_ops(const Graph& g, const targets::Target& target) {
  MG_CHECK(!g.is_block(), "tile_kernel_ops takes a kernel graph");
  return Tiler(g, target).run();
}

}  // namespace morgana::lower
