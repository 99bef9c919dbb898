#include "ir/op_table.h"

#include <cmath>

#include "ir/diagnostic.h"

namespace morgana::ir {

namespace {

// Float semantics of the elementwise ops. gelu is the exact (erf) form.
namespace fsem {
double exp(double x, double) { return std::exp(x); }
double sqrt(double x, double) { return std::sqrt(x); }
double rsqrt(double x, double) { return 1.0 / std::sqrt(x); }
double square(double x, double) { return x * x; }
double silu(double x, double) { return x / (1.0 + std::exp(-x)); }
double gelu(double x, double) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double relu(double x, double) { return x > 0 ? x : 0.0; }
double mul_scalar(double x, double s) { return x * s; }
double add_scalar(double x, double s) { return x + s; }
double add(double a, double b) { return a + b; }
double sub(double a, double b) { return a - b; }
double mul(double a, double b) { return a * b; }
double div(double a, double b) { return a / b; }
double max(double a, double b) { return std::isnan(a) || a >= b ? a : b; }
}  // namespace fsem

// Per-op float functions, by the row's id. Rows without one get nullptr.
template <OpCode op>
constexpr UnaryFn unary_of() {
  switch (op) {
    case OpCode::exp: return fsem::exp;
    case OpCode::sqrt: return fsem::sqrt;
    case OpCode::rsqrt: return fsem::rsqrt;
    case OpCode::square: return fsem::square;
    case OpCode::silu: return fsem::silu;
    case OpCode::gelu: return fsem::gelu;
    case OpCode::relu: return fsem::relu;
    case OpCode::mul_scalar: return fsem::mul_scalar;
    case OpCode::add_scalar: return fsem::add_scalar;
    default: return nullptr;
  }
}

constexpr BinaryFn binary_of(FieldSem f) {
  switch (f) {
    case FieldSem::Add: return fsem::add;
    case FieldSem::Sub: return fsem::sub;
    case FieldSem::Mul: return fsem::mul;
    case FieldSem::Div: return fsem::div;
    case FieldSem::Max: return fsem::max;
    case FieldSem::RescaleSum: return fsem::add;
    default: return nullptr;
  }
}

constexpr OpInfo kOps[] = {
#define X(id, kind, arity, levels, attrs, required, facts, field, abs)                                       \
  OpInfo{#id,           OpKind::kind,           arity,                      levels,                      \
         attrs,         required,               facts,                      FieldSem::field,             \
         AbsTerm::abs,  unary_of<OpCode::id>(), binary_of(FieldSem::field)},
    MORGANA_OPS(X)
#undef X
};

constexpr AttrName kAttrNames[] = {
    {kAttrDim, "dim"},   {kAttrTo, "to"},     {kAttrS, "s"},       {kAttrEps, "eps"},     {kAttrImap, "imap"},
    {kAttrFmap, "fmap"}, {kAttrOmap, "omap"}, {kAttrMask, "mask"}, {kAttrShape, "shape"},
};

}  // namespace

const OpInfo& op_info(OpCode op) {
  auto i = static_cast<size_t>(op);
  MG_CHECK(i < std::size(kOps), "op code out of range");
  return kOps[i];
}

std::span<const OpInfo> all_ops() { return kOps; }

std::optional<OpCode> op_by_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (kOps[i].name == name) return static_cast<OpCode>(i);
  return std::nullopt;
}

std::span<const AttrName> attr_names() { return kAttrNames; }

}  // namespace morgana::ir
