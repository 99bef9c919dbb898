// The one op table (STYLE.md rule 1). Every op is one row of MORGANA_OPS; the enum, the printer's and parser's
// keywords, the attribute schema, the shape rules (by kind), the verifier's checks, both interpreters' dispatch
// (float semantics below; the finite-field interpreter reads `field`) and the search's op list derive from it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace morgana::ir {

// Where an op may appear.
enum Level : uint8_t { kKernelLevel = 1, kBlockLevel = 2 };

// The shape rule and interpreter strategy an op follows.
enum class OpKind : uint8_t {
  Input,    // a kernel-graph parameter
  Output,   // marks a kernel-graph result
  Unary,    // elementwise, one operand, optional scalar attribute
  Binary,   // elementwise with numpy broadcasting
  Matmul,   // [..., m, k] x [..., k, n] -> [..., m, n], batch dims broadcast
  Reduce,   // over one dim, to `to` groups (default 1): dim keeps, shrinks to `to`
  Norm,     // rms_norm over one dim
  Softmax,  // composite, kept whole at kernel level
  Concat,   // two operands along one dim
  Transpose,  // swaps the last two dims; a view (no data moves: its readers read the operand's memory)
  Block,    // a graph-defined kernel (holds a block graph)
  Iter,     // block level: input iterator (imap, fmap); attrs.index names the block operand it reads
  Save,     // block level: output saver (omap)
  Accum,    // block level: for-loop accumulator
};

// Attribute keys. An op's row says which it accepts and which it requires.
enum Attr : uint32_t {
  kAttrDim = 1u << 0,    // int dim (negative counts from the end in text)
  kAttrTo = 1u << 1,     // reduce result size along dim (default 1)
  kAttrS = 1u << 2,      // scalar factor or summand
  kAttrEps = 1u << 3,    // rms_norm epsilon (default 1e-6)
  kAttrImap = 1u << 4,   // iter: per grid dim, the input dim it splits or φ
  kAttrFmap = 1u << 5,   // iter: the input dim the for-loop walks, or φ
  kAttrOmap = 1u << 6,   // save: per grid dim, the output dim it splits
  kAttrMask = 1u << 7,   // iter: ragged edges read as zero instead of being an error
  kAttrShape = 1u << 8,  // save: the output extent when it is smaller than tile x parts (ragged edges)
};

// Algebraic facts the search and verifier use.
enum Fact : uint8_t {
  kCommutative = 1u << 0,
  kAssociative = 1u << 1,
};

// How the finite-field interpreter and the abstract expressions treat an op (paper §5: the Lax fragment is
// multilinear ops, division and exp; everything else is an uninterpreted function).
enum class FieldSem : uint8_t {
  None,           // structural (input, output, iter, save, block)
  Add,            // add, sum reductions and accumulators
  Sub,
  Mul,
  Div,
  Exp,
  Square,         // mul(x, x)
  ScaleConst,     // multiply by an exact rational constant
  AddConst,       // add an exact rational constant
  Matmul,         // sum of products
  Composite,      // defined by expansion into other ops (rms_norm, softmax)
  Uninterpreted,  // keyed random oracle (sqrt, rsqrt, silu, gelu, relu, max)
  Max,            // uninterpreted binary max, used by reduce_max and acc_max
  RescaleSum,     // online-softmax accumulator: sum_t x_t * exp(m_t - max_t m_t)
  Structural,     // moves data without computing (concat, transpose)
};

// The abstract-expression term (ir/abstract_expr.h) of an uninterpreted unary op. ByField: derived from the op's
// kind and FieldSem; Other: an opaque Other(op, x) term; InvSqrt: Div(One, Sqrt(x)), so rsqrt and 1/sqrt agree.
enum class AbsTerm : uint8_t { ByField, Other, Sqrt, InvSqrt, Silu, Gelu, Relu };

using UnaryFn = double (*)(double x, double s);
using BinaryFn = double (*)(double a, double b);

// X(id, kind, arity (-1 = variadic), levels, accepted attrs, required attrs, facts, field, abstract term)
#define MORGANA_OPS(X)                                                                                       \
  X(input,           Input,   0,  kKernelLevel,               0,                                 0,         0,                           None,          ByField) \
  X(output,          Output,  1,  kKernelLevel,               0,                                 0,         0,                           None,          ByField) \
  X(matmul,          Matmul,  2,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Matmul,        ByField) \
  X(exp,             Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Exp,           ByField) \
  X(sqrt,            Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Uninterpreted, Sqrt)    \
  X(rsqrt,           Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Uninterpreted, InvSqrt) \
  X(square,          Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Square,        ByField) \
  X(silu,            Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Uninterpreted, Silu)    \
  X(gelu,            Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Uninterpreted, Gelu)    \
  X(relu,            Unary,   1,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Uninterpreted, Relu)    \
  X(mul_scalar,      Unary,   1,  kKernelLevel | kBlockLevel, kAttrS,                            kAttrS,    0,                           ScaleConst,    ByField) \
  X(add_scalar,      Unary,   1,  kKernelLevel | kBlockLevel, kAttrS,                            kAttrS,    0,                           AddConst,      ByField) \
  X(add,             Binary,  2,  kKernelLevel | kBlockLevel, 0,                                 0,         kCommutative | kAssociative, Add,           ByField) \
  X(sub,             Binary,  2,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Sub,           ByField) \
  X(mul,             Binary,  2,  kKernelLevel | kBlockLevel, 0,                                 0,         kCommutative | kAssociative, Mul,           ByField) \
  X(div,             Binary,  2,  kKernelLevel | kBlockLevel, 0,                                 0,         0,                           Div,           ByField) \
  X(reduce_sum,      Reduce,  1,  kKernelLevel | kBlockLevel, kAttrDim | kAttrTo,                kAttrDim,  0,                           Add,           ByField) \
  X(reduce_max,      Reduce,  1,  kKernelLevel | kBlockLevel, kAttrDim | kAttrTo,                kAttrDim,  0,                           Max,           ByField) \
  X(rms_norm,        Norm,    1,  kKernelLevel | kBlockLevel, kAttrDim | kAttrEps,               kAttrDim,  0,                           Composite,     ByField) \
  X(softmax,         Softmax, 1,  kKernelLevel,               kAttrDim,                          kAttrDim,  0,                           Composite,     ByField) \
  X(concat,          Concat,  2,  kKernelLevel | kBlockLevel, kAttrDim,                          kAttrDim,  0,                           Structural,    ByField) \
  X(transpose,       Transpose, 1, kKernelLevel,               0,                                 0,         0,                           Structural,    ByField) \
  X(block,           Block,   -1, kKernelLevel,               0,                                 0,         0,                           None,          ByField) \
  X(iter,            Iter,    0,  kBlockLevel,                kAttrImap | kAttrFmap | kAttrMask, kAttrImap, 0,                           None,          ByField) \
  X(save,            Save,    1,  kBlockLevel,                kAttrOmap | kAttrShape,            0,         0,                           None,          ByField) \
  X(acc_sum,         Accum,   1,  kBlockLevel,                0,                                 0,         0,                           Add,           ByField) \
  X(acc_max,         Accum,   1,  kBlockLevel,                0,                                 0,         0,                           Max,           ByField) \
  X(acc_rescale_sum, Accum,   2,  kBlockLevel,                0,                                 0,         0,                           RescaleSum,    ByField)

enum class OpCode : uint8_t {
#define X(id, kind, arity, levels, attrs, required, facts, field, abs) id,
  MORGANA_OPS(X)
#undef X
};

struct OpInfo {
  std::string_view name;
  OpKind kind;
  int arity;
  uint8_t levels;
  uint32_t attrs;
  uint32_t required;
  uint8_t facts;
  FieldSem field;
  AbsTerm abstract;
  // Float semantics. Unary ops: y = unary(x, s). Binary ops, reductions and accumulators: the combining function
  // (a fold starts from the first element, so no identity element is needed).
  UnaryFn unary;
  BinaryFn binary;
};

inline constexpr int kNumOps = 0
#define X(id, kind, arity, levels, attrs, required, facts, field, abs) +1
    MORGANA_OPS(X)
#undef X
    ;

const OpInfo& op_info(OpCode op);
std::span<const OpInfo> all_ops();
std::optional<OpCode> op_by_name(std::string_view name);
inline std::string_view op_name(OpCode op) { return op_info(op).name; }
inline bool op_at_level(OpCode op, Level l) { return (op_info(op).levels & l) != 0; }

// Attribute names in text, in the order the printer writes them.
struct AttrName {
  Attr key;
  std::string_view name;
};
std::span<const AttrName> attr_names();

}  // namespace morgana::ir
