// Abstract expressions: the hash-consing arena, its printer and parser, and the abstraction of graphs. The
// abstraction of an op is read from its op-table row (kind and field semantics); the only per-op data is the
// short table of uninterpreted unary ops that have a term kind of their own.
#include "ir/abstract_expr.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "ir/diagnostic.h"

namespace morgana::ir {

namespace {

constexpr int kArity[] = {
#define X(kind, arity) arity,
    MORGANA_EXPR_KINDS(X)
#undef X
};

constexpr std::string_view kKindNames[] = {
#define X(kind, arity) #kind,
    MORGANA_EXPR_KINDS(X)
#undef X
};

}  // namespace

int expr_arity(ExprKind k) {
  return kArity[static_cast<size_t>(k)];
}
std::string_view expr_kind_name(ExprKind k) {
  return kKindNames[static_cast<size_t>(k)];
}

size_t ExprNodeHash::operator()(const ExprNode& n) const {
  uint64_t h = hash_mix(static_cast<uint64_t>(n.kind), static_cast<uint64_t>(n.payload));
  h = hash_mix(h, (static_cast<uint64_t>(n.a) << 32) | n.b);
  return static_cast<size_t>(h);
}

// --- the arena ---

ExprId ExprArena::intern(const ExprNode& n) {
  auto [it, inserted] = index_.try_emplace(n, static_cast<ExprId>(nodes_.size()));
  if (inserted) {
    MG_CHECK(nodes_.size() < kNoExpr, "expression arena is full");
    nodes_.push_back(n);
  }
  return it->second;
}

ExprId ExprArena::var(uint32_t input_index) {
  return intern({ExprKind::Var, input_index, kNoExpr, kNoExpr});
}
ExprId ExprArena::one() {
  return intern({ExprKind::One, 0, kNoExpr, kNoExpr});
}
ExprId ExprArena::shift() {
  return intern({ExprKind::Shift, 0, kNoExpr, kNoExpr});
}

// A max-derived value is neutral: x ± Shift = x, x · Shift = x, x / Shift = x, Shift / x = One / x (the same
// convention as for scalars: a per-row constant factor or summand does not matter for pruning).
ExprId ExprArena::add(ExprId a, ExprId b) {
  if (is(a, ExprKind::Shift)) return b;
  if (is(b, ExprKind::Shift)) return a;
  if (is(a, ExprKind::Cat)) return cat(add(nodes_[a].a, b), add(nodes_[a].b, b));
  if (is(b, ExprKind::Cat)) return cat(add(a, nodes_[b].a), add(a, nodes_[b].b));
  return intern({ExprKind::Add, 0, a, b});
}

ExprId ExprArena::mul(ExprId a, ExprId b) {
  if (is(a, ExprKind::Shift) || is(a, ExprKind::One)) return b;
  if (is(b, ExprKind::Shift) || is(b, ExprKind::One)) return a;
  if (is(a, ExprKind::Cat)) return cat(mul(nodes_[a].a, b), mul(nodes_[a].b, b));
  if (is(b, ExprKind::Cat)) return cat(mul(a, nodes_[b].a), mul(a, nodes_[b].b));
  return intern({ExprKind::Mul, 0, a, b});
}

ExprId ExprArena::div(ExprId a, ExprId b) {
  if (is(b, ExprKind::Shift) || is(b, ExprKind::One)) return a;
  if (is(a, ExprKind::Shift)) a = one();
  if (is(a, ExprKind::Cat)) return cat(div(nodes_[a].a, b), div(nodes_[a].b, b));
  if (is(b, ExprKind::Cat)) return cat(div(a, nodes_[b].a), div(a, nodes_[b].b));
  return intern({ExprKind::Div, 0, a, b});
}

ExprId ExprArena::cat(ExprId a, ExprId b) {
  if (a == b) return a;
  return intern({ExprKind::Cat, 0, a, b});
}

ExprId ExprArena::unary(ExprKind k, ExprId x) {
  MG_CHECK(k == ExprKind::Exp || k == ExprKind::Sqrt || k == ExprKind::Silu || k == ExprKind::Gelu ||
               k == ExprKind::Relu,
           "unary() takes Exp, Sqrt, Silu, Gelu or Relu");
  if (is(x, ExprKind::Shift)) return x;
  if (is(x, ExprKind::Cat)) return cat(unary(k, nodes_[x].a), unary(k, nodes_[x].b));
  return intern({k, 0, x, kNoExpr});
}

ExprId ExprArena::other(OpCode op, ExprId x) {
  if (is(x, ExprKind::Shift)) return x;
  if (is(x, ExprKind::Cat)) return cat(other(op, nodes_[x].a), other(op, nodes_[x].b));
  return intern({ExprKind::Other, static_cast<int64_t>(op), x, kNoExpr});
}

ExprId ExprArena::sum(int64_t k, ExprId x) {
  MG_CHECK(k >= 1, "Sum over an empty range");
  if (k == 1 || is(x, ExprKind::Shift)) return x;
  if (is(x, ExprKind::Cat)) return cat(sum(k, nodes_[x].a), sum(k, nodes_[x].b));
  if (is(x, ExprKind::Sum)) return sum(k * nodes_[x].payload, nodes_[x].a);
  return intern({ExprKind::Sum, k, x, kNoExpr});
}

ExprId ExprArena::rms(int64_t k, ExprId x) {
  MG_CHECK(k >= 1, "Rms over an empty range");
  if (is(x, ExprKind::Shift)) return x;
  if (is(x, ExprKind::Cat)) return cat(rms(k, nodes_[x].a), rms(k, nodes_[x].b));
  return intern({ExprKind::Rms, k, x, kNoExpr});
}

ExprId ExprArena::make(const ExprNode& n) {
  switch (n.kind) {
    case ExprKind::Var:
      return var(static_cast<uint32_t>(n.payload));
    case ExprKind::One:
      return one();
    case ExprKind::Shift:
      return shift();
    case ExprKind::Add:
      return add(n.a, n.b);
    case ExprKind::Mul:
      return mul(n.a, n.b);
    case ExprKind::Div:
      return div(n.a, n.b);
    case ExprKind::Cat:
      return cat(n.a, n.b);
    case ExprKind::Exp:
    case ExprKind::Sqrt:
    case ExprKind::Silu:
    case ExprKind::Gelu:
    case ExprKind::Relu:
      return unary(n.kind, n.a);
    case ExprKind::Other:
      return other(static_cast<OpCode>(n.payload), n.a);
    case ExprKind::Sum:
      return sum(n.payload, n.a);
    case ExprKind::Rms:
      return rms(n.payload, n.a);
  }
  MG_CHECK(false, "unknown expression kind");
  return kNoExpr;
}

std::string ExprArena::str(ExprId e) const {
  const ExprNode& n = node(e);
  switch (n.kind) {
    case ExprKind::Var:
      return "x" + std::to_string(n.payload);
    case ExprKind::One:
    case ExprKind::Shift:
      return std::string(expr_kind_name(n.kind));
    case ExprKind::Other:
      return std::string(op_name(static_cast<OpCode>(n.payload))) + "(" + str(n.a) + ")";
    case ExprKind::Sum:
    case ExprKind::Rms:
      return std::string(expr_kind_name(n.kind)) + "(" + std::to_string(n.payload) + ", " + str(n.a) + ")";
    default:
      break;
  }
  std::string s = std::string(expr_kind_name(n.kind)) + "(" + str(n.a);
  if (expr_arity(n.kind) == 2) s += ", " + str(n.b);
  return s + ")";
}

namespace {

class TermParser {
 public:
  TermParser(ExprArena& arena, std::string_view text) : arena_(arena), s_(text) {}

  ExprId parse() {
    ExprId e = term();
    skip();
    if (i_ != s_.size()) fail("unexpected text after the expression");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) {
    throw UserError("abstract expression '" + std::string(s_) + "', offset " + std::to_string(i_) + ": " +
                    msg);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip();
    if (i_ >= s_.size() || s_[i_] != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string_view word() {
    skip();
    size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    if (b == i_) fail("expected a name");
    return s_.substr(b, i_ - b);
  }
  int64_t number() {
    skip();
    size_t b = i_;
    int64_t v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) v = v * 10 + (s_[i_++] - '0');
    if (b == i_ || v < 1) fail("expected a positive size");
    return v;
  }

  ExprId term() {
    std::string_view w = word();
    if (w.size() > 1 && w[0] == 'x' && std::isdigit(static_cast<unsigned char>(w[1]))) {
      uint32_t v = 0;
      for (char c : w.substr(1)) {
        if (!std::isdigit(static_cast<unsigned char>(c))) fail("bad input name");
        v = v * 10 + static_cast<uint32_t>(c - '0');
      }
      return arena_.var(v);
    }
    for (size_t k = 0; k < std::size(kKindNames); ++k) {
      if (w != kKindNames[k]) continue;
      auto kind = static_cast<ExprKind>(k);
      ExprNode n{kind, 0, kNoExpr, kNoExpr};
      if (kind == ExprKind::Var || kind == ExprKind::Other)
        fail("write inputs as x0, x1, ... and other ops by name");
      if (expr_arity(kind) == 0) return arena_.make(n);
      expect('(');
      if (kind == ExprKind::Sum || kind == ExprKind::Rms) {
        n.payload = number();
        expect(',');
      }
      n.a = term();
      if (expr_arity(kind) == 2) {
        expect(',');
        n.b = term();
      }
      expect(')');
      return arena_.make(n);
    }
    std::optional<OpCode> op = op_by_name(w);
    if (!op || op_info(*op).kind != OpKind::Unary) fail("unknown term '" + std::string(w) + "'");
    expect('(');
    ExprId x = term();
    expect(')');
    return arena_.other(*op, x);
  }

  ExprArena& arena_;
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

ExprId ExprArena::parse(std::string_view text) {
  return TermParser(*this, text).parse();
}

// --- abstraction of graphs ---

namespace {


// A stretch of a tensor along one dim whose elements all have the expression `e`.
struct Piece {
  int64_t len;
  ExprId e;
};

// The pieces of tensor `t` along dim `d`: concats along `d` (also nested ones) split it, anything else is one
// piece. This is how a concat that feeds a matmul, a reduction or an elementwise op is seen through.
void pieces_along(const Graph& g, TensorId t, int d, std::span<const ExprId> exprs, std::vector<Piece>& out) {
  const Node& p = g.node(g.tensor(t).producer);
  if (op_info(p.op).kind == OpKind::Concat && p.attrs.dim == d) {
    auto ops = g.operands(p);
    pieces_along(g, ops[0], d, exprs, out);
    pieces_along(g, ops[1], d, exprs, out);
    return;
  }
  out.push_back({g.type(t).dim(d), exprs[t]});
}

bool made_by_concat(const Graph& g, TensorId t) {
  return op_info(g.node(g.tensor(t).producer).op).kind == OpKind::Concat;
}

// Calls f(len, ea, eb) for each stretch where neither a's nor b's piece changes (equal total lengths).
template <class F>
void zip_pieces(const std::vector<Piece>& a, const std::vector<Piece>& b, F&& f) {
  size_t i = 0, j = 0;
  int64_t used_a = 0, used_b = 0;
  while (i < a.size() && j < b.size()) {
    int64_t len = std::min(a[i].len - used_a, b[j].len - used_b);
    f(len, a[i].e, b[j].e);
    used_a += len;
    used_b += len;
    if (used_a == a[i].len) ++i, used_a = 0;
    if (used_b == b[j].len) ++j, used_b = 0;
  }
}

ExprId binary_expr(OpCode op, ExprId a, ExprId b, ExprArena& ar) {
  switch (binary_kind(op)) {
    case ExprKind::Add:
      return ar.add(a, b);
    case ExprKind::Mul:
      return ar.mul(a, b);
    case ExprKind::Div:
      return ar.div(a, b);
    default:
      return ar.shift();
  }
}

ExprId unary_expr(OpCode op, ExprId x, ExprArena& ar) {
  switch (op_info(op).field) {
    case FieldSem::Exp:
      return ar.unary(ExprKind::Exp, x);
    case FieldSem::Square:
      return ar.mul(x, x);
    case FieldSem::ScaleConst:
    case FieldSem::AddConst:
      return x;  // scalars do not matter for pruning
    case FieldSem::Uninterpreted:
      // The op table's `abstract` column names the term (op_table.h, AbsTerm).
      switch (op_info(op).abstract) {
        case AbsTerm::Sqrt: return ar.unary(ExprKind::Sqrt, x);
        case AbsTerm::InvSqrt: return ar.div(ar.one(), ar.unary(ExprKind::Sqrt, x));
        case AbsTerm::Silu: return ar.unary(ExprKind::Silu, x);
        case AbsTerm::Gelu: return ar.unary(ExprKind::Gelu, x);
        case AbsTerm::Relu: return ar.unary(ExprKind::Relu, x);
        case AbsTerm::ByField:
        case AbsTerm::Other: return ar.other(op, x);
      }
      break;
    default:
      break;
  }
  MG_CHECK(false, "no abstraction for unary op " + std::string(op_name(op)));
  return kNoExpr;
}

// Elementwise binary op with numpy broadcasting; when an operand is a concat, the two operands are cut into
// stretches along the concat dim and the op applies piece by piece.
ExprId elementwise(const Graph& g, const Node& n, TensorId out, std::span<const ExprId> ex, ExprArena& ar) {
  TensorId a = g.operands(n)[0], b = g.operands(n)[1];
  int r = g.type(out).rank;
  int d = -1;
  for (TensorId t : {a, b})
    if (d < 0 && made_by_concat(g, t)) d = g.node(g.tensor(t).producer).attrs.dim + (r - g.type(t).rank);
  if (d < 0) return binary_expr(n.op, ex[a], ex[b], ar);
  auto cut = [&](TensorId t) {
    std::vector<Piece> p;
    int dt = d - (r - g.type(t).rank);
    if (dt < 0 || (g.type(t).dim(dt) == 1 && g.type(out).dim(d) != 1))
      p.push_back({g.type(out).dim(d), ex[t]});  // broadcast along d
    else
      pieces_along(g, t, dt, ex, p);
    return p;
  };
  ExprId result = kNoExpr;
  zip_pieces(cut(a), cut(b), [&](int64_t, ExprId ea, ExprId eb) {
    ExprId e = binary_expr(n.op, ea, eb, ar);
    result = result == kNoExpr ? e : ar.cat(result, e);
  });
  return result;
}

// Sum over the inner dim; a concat along the inner dim of either operand splits the sum into one per stretch.
ExprId matmul(const Graph& g, const Node& n, std::span<const ExprId> ex, ExprArena& ar) {
  TensorId a = g.operands(n)[0], b = g.operands(n)[1];
  std::vector<Piece> pa, pb;
  pieces_along(g, a, g.type(a).rank - 1, ex, pa);
  pieces_along(g, b, g.type(b).rank - 2, ex, pb);
  ExprId result = kNoExpr;
  zip_pieces(pa, pb, [&](int64_t len, ExprId ea, ExprId eb) {
    ExprId e = ar.sum(len, ar.mul(ea, eb));
    result = result == kNoExpr ? e : ar.add(result, e);
  });
  return result;
}

ExprId reduce(const Graph& g, const Node& n, std::span<const ExprId> ex, ExprArena& ar) {
  if (op_info(n.op).field == FieldSem::Max) return ar.shift();
  TensorId x = g.operands(n)[0];
  int64_t to = n.attrs.to;
  std::vector<Piece> p;
  pieces_along(g, x, n.attrs.dim, ex, p);
  bool aligned = true;
  for (const Piece& q : p) aligned = aligned && q.len % to == 0;
  if (!aligned) return ar.sum(g.type(x).dim(n.attrs.dim) / to, ex[x]);
  // Element j of the result sums positions j, j+to, ...: len/to of them in each piece.
  ExprId result = kNoExpr;
  for (const Piece& q : p) {
    ExprId e = ar.sum(q.len / to, q.e);
    result = result == kNoExpr ? e : ar.add(result, e);
  }
  return result;
}

}  // namespace

ExprKind binary_kind(OpCode op) {
  switch (op_info(op).field) {
    case FieldSem::Add:
    case FieldSem::Sub:
      return ExprKind::Add;  // signs are ignored
    case FieldSem::Mul:
      return ExprKind::Mul;
    case FieldSem::Div:
      return ExprKind::Div;
    case FieldSem::Max:
      return ExprKind::Shift;
    default:
      break;
  }
  MG_CHECK(false, "no abstraction for binary op " + std::string(op_name(op)));
  return ExprKind::Shift;
}

ExprId abstract_node(const Graph& g, const Node& n, int result, std::span<const ExprId> ex,
                     std::span<const ExprId> operand_exprs, ExprArena& ar) {
  const OpInfo& info = op_info(n.op);
  auto ops = g.operands(n);
  auto in = [&](int i) {
    ExprId e = ex[ops[static_cast<size_t>(i)]];
    MG_CHECK(e != kNoExpr, "operand of " + std::string(info.name) + " has no expression yet");
    return e;
  };
  MG_CHECK(result >= 0 && result < n.num_results, "abstract_node: no such result");
  switch (info.kind) {
    case OpKind::Input:
      return ar.var(n.attrs.index);
    case OpKind::Unary:
      return unary_expr(n.op, in(0), ar);
    case OpKind::Binary:
      return elementwise(g, n, g.result(n, result), ex, ar);
    case OpKind::Matmul:
      return matmul(g, n, ex, ar);
    case OpKind::Reduce:
      return reduce(g, n, ex, ar);
    case OpKind::Norm: {
      ExprId x = in(0);
      return ar.div(x, ar.rms(g.type(ops[0]).dim(n.attrs.dim), x));
    }
    case OpKind::Softmax: {
      ExprId e = ar.unary(ExprKind::Exp, in(0));
      return ar.div(e, ar.sum(g.type(ops[0]).dim(n.attrs.dim), e));
    }
    case OpKind::Concat:
      return ar.cat(in(0), in(1));
    case OpKind::Transpose:
      return in(0);  // a transpose moves elements, and every element of a tensor has the one expression
    case OpKind::Iter:
      MG_CHECK(n.attrs.index < operand_exprs.size(), "iter over a block operand without an expression");
      return operand_exprs[n.attrs.index];
    case OpKind::Save:
      return in(0);
    case OpKind::Accum:
      if (info.field == FieldSem::Max) return ar.shift();
      return ar.sum(g.block_params().loop, in(0));  // acc_sum and acc_rescale_sum: a sum over the loop
    case OpKind::Output:
    case OpKind::Block:
      break;
  }
  MG_CHECK(false, "abstract_node: " + std::string(info.name) + " has no per-node abstraction");
  return kNoExpr;
}

std::vector<ExprId> abstract_block_exprs(const Graph& body, std::span<const ExprId> operand_exprs,
                                         ExprArena& ar) {
  std::vector<ExprId> ex(body.num_tensors(), kNoExpr);
  for (const Node& n : body.nodes())
    for (int i = 0; i < n.num_results; ++i)
      ex[body.result(n, i)] = abstract_node(body, n, i, ex, operand_exprs, ar);
  return ex;
}

GraphExprs abstract_graph(const Graph& g, ExprArena& ar) {
  MG_CHECK(!g.is_block(), "abstract_graph takes a kernel graph");
  GraphExprs out;
  out.tensors.assign(g.num_tensors(), kNoExpr);
  out.bodies.resize(g.bodies().size());
  for (const Node& n : g.nodes()) {
    if (n.op != OpCode::block) {
      for (int i = 0; i < n.num_results; ++i)
        out.tensors[g.result(n, i)] = abstract_node(g, n, i, out.tensors, {}, ar);
      continue;
    }
    std::vector<ExprId> operands;
    for (TensorId t : g.operands(n)) operands.push_back(out.tensors[t]);
    const Graph& body = g.body(n);
    std::vector<ExprId>& be = out.bodies[n.attrs.index];
    be = abstract_block_exprs(body, operands, ar);
    for (int i = 0; i < n.num_results; ++i)
      out.tensors[g.result(n, i)] = be[body.outputs()[static_cast<size_t>(i)]];
  }
  return out;
}

std::vector<ExprId> abstract_exprs(const Graph& g, ExprArena& ar) {
  return abstract_graph(g, ar).tensors;
}

std::vector<ExprId> output_exprs(const Graph& g, ExprArena& ar) {
  std::vector<ExprId> ex = abstract_exprs(g, ar);
  std::vector<ExprId> out;
  for (TensorId t : g.outputs()) out.push_back(ex[t]);
  return out;
}

}  // namespace morgana::ir
