// Abstract expressions (paper §4, docs/abstract-expressions.md): what one element of a tensor is, as a term
// over the program's input elements, forgetting indices, constants and signs. The search prunes a μGraph
// prefix unless every tensor's term is a sub-expression of the spec's output term (search/subexpr_oracle.h).
//
// Terms live hash-consed in an ExprArena and are named by 32-bit ids, so equal terms have equal ids. The
// constructors normalise a few things that are identities of the abstraction itself (Shift is neutral, One is
// the unit of Mul, Sum(1, x) = x, nested Sums merge, Cat distributes); everything else is left to the
// e-graph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace morgana::ir {

using ExprId = uint32_t;
inline constexpr ExprId kNoExpr = UINT32_MAX;

// X(kind, arity). Var: an element of input `payload`. One: the constant 1 (only as the numerator of rsqrt's
// reciprocal). Shift: a max-derived value (reduce_max, acc_max and what is computed only from them), neutral
// in every operation. Other: an uninterpreted unary op with no kind of its own (payload: its OpCode). Sum and
// Rms: payload is the reduction size k. Cat: an element of a concat, which is an element of either part.
#define MORGANA_EXPR_KINDS(X) \
  X(Var, 0)                   \
  X(One, 0)                   \
  X(Shift, 0)                 \
  X(Add, 2)                   \
  X(Mul, 2)                   \
  X(Div, 2)                   \
  X(Exp, 1)                   \
  X(Sqrt, 1)                  \
  X(Silu, 1)                  \
  X(Gelu, 1)                  \
  X(Relu, 1)                  \
  X(Other, 1)                 \
  X(Sum, 1)                   \
  X(Rms, 1)                   \
  X(Cat, 2)

enum class ExprKind : uint8_t {
#define X(kind, arity) kind,
  MORGANA_EXPR_KINDS(X)
#undef X
};

int expr_arity(ExprKind k);
std::string_view expr_kind_name(ExprKind k);

struct ExprNode {
  ExprKind kind = ExprKind::Var;
  int64_t payload = 0;  // Var: input index; Sum/Rms: reduction size; Other: OpCode; else 0
  ExprId a = kNoExpr, b = kNoExpr;
  bool operator==(const ExprNode&) const = default;
};

struct ExprNodeHash {
  size_t operator()(const ExprNode& n) const;
};

class ExprArena {
 public:
  ExprId var(uint32_t input_index);
  ExprId one();
  ExprId shift();
  ExprId add(ExprId a, ExprId b);
  ExprId mul(ExprId a, ExprId b);
  ExprId div(ExprId a, ExprId b);
  ExprId cat(ExprId a, ExprId b);
  // Exp, Sqrt, Silu, Gelu or Relu.
  ExprId unary(ExprKind k, ExprId x);
  ExprId other(OpCode op, ExprId x);
  ExprId sum(int64_t k, ExprId x);
  ExprId rms(int64_t k, ExprId x);
  // Any node, through the constructor of its kind (so with the same normalisation).
  ExprId make(const ExprNode& n);

  const ExprNode& node(ExprId e) const { return nodes_.at(e); }
  size_t size() const { return nodes_.size(); }

  // "Sum(4096, Mul(x0, x1))"; inputs print as x0, x1, ...; Other prints its op's name: "tanh(x0)".
  std::string str(ExprId e) const;
  // Reads the printed form back (whitespace-insensitive). Throws UserError on malformed text.
  ExprId parse(std::string_view text);

 private:
  ExprId intern(const ExprNode& n);
  bool is(ExprId e, ExprKind k) const { return nodes_[e].kind == k; }

  std::vector<ExprNode> nodes_;
  std::unordered_map<ExprNode, ExprId, ExprNodeHash> index_;
};

// --- abstraction of graphs ---

// The expressions of every tensor of a kernel graph (by TensorId) and of every tensor of each block body (by
// body index, then TensorId within the body). Output nodes make no tensor; their entries stay kNoExpr.
struct GraphExprs {
  std::vector<ExprId> tensors;
  std::vector<std::vector<ExprId>> bodies;
};
GraphExprs abstract_graph(const Graph& kernel_graph, ExprArena& arena);
// The kernel-level part of abstract_graph.
std::vector<ExprId> abstract_exprs(const Graph& kernel_graph, ExprArena& arena);
// A block graph's tensors, given the expressions of its block op's operands (the kernel tensors its iters
// read).
std::vector<ExprId> abstract_block_exprs(const Graph& block_graph, std::span<const ExprId> operand_exprs,
                                         ExprArena& arena);
// One node, for graphs built op by op: the expression of result `result` of `n` (a node of `g` that is not a
// `block` op), given the expressions of the tensors of `g` made before it (indexed by TensorId) and, in a
// block graph, of the block op's operands.
ExprId abstract_node(const Graph& g, const Node& n, int result, std::span<const ExprId> tensor_exprs,
                     std::span<const ExprId> operand_exprs, ExprArena& arena);
// The term kind of an elementwise binary op over plain operands: Add for add and sub (signs are ignored),
// Mul, Div; Shift (a max) otherwise. The term is that one node over the operands' terms, but where an operand
// is Shift (neutral) or a concat (its pieces combine piece by piece).
ExprKind binary_kind(OpCode op);
// The spec's output expressions, in return order (the oracle's roots).
std::vector<ExprId> output_exprs(const Graph& kernel_graph, ExprArena& arena);

}  // namespace morgana::ir
