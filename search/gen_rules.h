// The generator's pruning rules (docs/search.md, "Pruning"), each a function of the partial-result state
// (search/gen_state.h) that can be read and tested on its own. A rule returns the name it is counted under in
// the search report (one of `prune::`), or nullptr when it keeps the prefix; the walk (search/generator.cpp,
// search/gen_block.cpp) applies them in the order the docs list and counts what they drop. Rules that ask the
// spec's e-graph take its answers as arguments, so none of them needs the oracle itself.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "ir/op_table.h"
#include "search/gen_state.h"

namespace morgana::search::gen {

// The report's names of the rules, one pointer per name.
namespace prune {
inline constexpr const char* abstract = "abstract";
inline constexpr const char* accumulator = "accumulator";
inline constexpr const char* axes = "axes";
inline constexpr const char* canonical = "canonical";
inline constexpr const char* concat = "concat";
inline constexpr const char* cost = "cost";
inline constexpr const char* dead_end = "dead-end";
inline constexpr const char* distance = "distance";
inline constexpr const char* final = "final";
inline constexpr const char* grid = "grid";
inline constexpr const char* infeasible = "infeasible";
inline constexpr const char* norm = "norm";
inline constexpr const char* omap = "omap";
inline constexpr const char* partial = "partial";
inline constexpr const char* redundant = "redundant";
inline constexpr const char* scalar = "scalar";
inline constexpr const char* shape = "shape";
inline constexpr const char* shift = "shift";
inline constexpr const char* smem = "smem";
inline constexpr const char* unsafe = "unsafe";
inline constexpr const char* width = "width";
// Not a rule: an op kind the block level does not build; dropped without being counted.
inline constexpr const char* unbuilt = "";
}  // namespace prune

using Pruned = const char*;  // a prune:: name, or nullptr: kept

// ---- scalar: where a constant goes ----
// Where a scalar op's result may go. A constant factor commutes with every linear op (matmul, sums,
// accumulators, products), so canonically it is applied after them, right before what does not commute: a
// non-linear op (exp, rsqrt, silu, ...; and the max and subtraction of a softmax), an added constant, or, when
// the spec itself scales its result (`scaled_outputs`), a saver. An added constant feeds only a non-linear op
// (x·a + b is the canonical affine form), or a saver likewise. `scalar` is OpCode::input for a value that is no
// scalar op's result.
bool scalar_consumer_ok(OpCode scalar, OpCode consumer, bool scaled_outputs);
// The same for a binary op: a scaled value is only ever the minuend of a max subtraction.
bool scalar_operands_ok(OpCode op, OpCode a_scalar, OpCode b_scalar, bool b_shift, bool scaled_outputs);

// ---- shift, unsafe: what a max may do ----
// Ops with a max-derived (Shift) operand: max values only stabilise an exp (online softmax), so a max is only
// taken of values an exp of which the spec has, and only subtracted from such values. When the spec's exps come
// from a softmax (`safe_exp`) an exp takes only a max-subtracted value (`a_shifted`): an exp of unbounded logits
// overflows, which the float check would reject anyway. `exp_of_a_is_subexpr()` asks the e-graph whether exp(a)
// is a sub-expression of the spec's; it is called only where the answer decides.
template <class ExpOfAIsSubexpr>
Pruned shift_rule(OpCode op, bool a_shift, bool b_shift, bool a_shifted, bool safe_exp,
                  ExpOfAIsSubexpr&& exp_of_a_is_subexpr) {
  const ir::OpInfo& info = ir::op_info(op);
  if (info.kind == ir::OpKind::Binary) {
    if (!a_shift && !b_shift) return nullptr;
    if (op == OpCode::sub && !a_shift && b_shift && exp_of_a_is_subexpr()) return nullptr;
    return prune::shift;
  }
  if (a_shift || b_shift) return prune::shift;
  if (op == OpCode::reduce_max && !exp_of_a_is_subexpr()) return prune::shift;
  if (info.field == ir::FieldSem::Exp && safe_exp && !a_shifted) return prune::unsafe;
  return nullptr;
}

// ---- axes ----
// Only an axis the spec itself reduces may be reduced (summing over any other mixes elements the spec keeps
// apart, and nothing afterwards can separate them again). `reduced_axes`: the axes the spec sums, maximises or
// normalises over.
bool spec_reduces(const Label& l, const std::vector<uint16_t>& reduced_axes);

// ---- concat: joined axes ----
// The labels of concat(a, b) along `dim`: the operands agree on every other dim, and `dim` takes the axis that
// `joints` joins their axes there into; nullopt when they disagree or those axes do not join.
std::optional<Labels> concat_labels(const Labels& a, const Labels& b, int dim, const JoinedAxes& joints);
// The labels of a block op's result from its operands' (b null for a unary op): a concat's by concat_labels, any
// other op's by infer_labels (search/axes.h), which also gives the axis it reduces (`reduced`, may be null).
std::optional<Labels> block_labels(OpCode op, const ir::Attrs& attrs, const Labels* a, const Labels* b,
                                   const JoinedAxes& joints, Label* reduced);
// A concat exists to be contracted: a value with a joined axis (`x_joint`, `y_joint`: an operand has one) is
// read only by a matmul over that axis (`reduced_joint`), and is never accumulated or saved.
Pruned joint_rule(OpCode op, bool x_joint, bool y_joint, bool reduced_joint);

// ---- dead-end, distance: kernel prefixes that cannot be completed ----
// `open`: kernel tensors no op has consumed yet (inputs aside); each must be consumed by an op still to come
// (a block op reads at most four) or be one of the spec's `outputs`. `farthest`: the largest
// distance of an open tensor (inputs included); each kernel op still to come takes a value at most a block
// graph's ops closer to an output.
Pruned kernel_prefix_rule(int open, int farthest, int outputs, int ops_left, int max_block_ops);

// ---- scalar, partial, norm, shift: a block op's partial state ----
// The state of block op `op`'s result `t` (psum, pmax, maxdep, shifted, squared, scalar chain) from its
// operands `x` and `y` (null for a unary op), where `reduced_bit` is the header bit of the axis it reduces (-1:
// none, or not an axis of this block). A partial reduction (a sum or max over one block's or one iteration's
// part of an axis) may be scaled, summed with values partial the same way, multiplied by values constant along
// that axis and accumulated; nothing else. Values scaled by a partial max need sums with the same scaling, and
// a quotient of two cancels it. A sum of squares over a whole axis is what rms_norm computes: the block op
// takes it in one (`norm`). A concat joins whole values only.
Pruned partial_state(OpCode op, const BTensor& x, const BTensor* y, int reduced_bit, const Header& h, BTensor& t);

// ---- redundant ----
// Whether `t` (made by an op that does not hide constants or a max subtraction) is a value `bt` already has:
// the same term or e-class, axes, partial state and stage.
bool redundant(const std::vector<BTensor>& bt, const BTensor& t, uint32_t cls);

// ---- width ----
// Body values computed but not yet consumed, each of which needs an accumulator.
Pruned width_rule(const Block& b);

// ---- accumulator ----
// The accumulators open body value `x` may take: (op, rescale partner). Without a for-loop a value is summed
// (acc_sum, or acc_max for a max) as it is. With one: a max partial over the loop's axis takes acc_max; a sum
// partial over that axis with no dim on it takes acc_sum, or, when it is scaled by the iteration's own max,
// acc_rescale_sum with one of the running maxima `shifts` partial over the loop. Empty: no accumulator fits.
std::vector<std::pair<OpCode, TensorId>> accumulator_choices(const Block& b, const BTensor& x,
                                                             const std::vector<TensorId>& shifts);
// The state of an accumulator's result: its operand's, in the epilogue; a loop that completes its axis
// completes the partial state over it.
BTensor accumulated(const BTensor& x, const Header& h);

// ---- final, shift: which values a block saves ----
// The rules on the set of open epilogue values a block saves (`open`, ids into b.bt): a last block op saves
// exactly the spec's `outputs` (count here, each value in save_value_rule); a value scaled by a partial max is
// saved only together with that max.
Pruned saves_rule(const Block& b, const std::vector<TensorId>& open, size_t outputs);
// One saved value: in a last block op it must be a spec output (complete, not a max, and equivalent to one by
// the e-graph: `equivalent()`, asked only then); a complete max is of no use outside.
template <class Equivalent>
Pruned save_value_rule(const BTensor& x, bool final, Equivalent&& equivalent) {
  if (final && (x.shift || x.psum || x.maxdep || !equivalent())) return prune::final;
  if (x.shift && !x.pmax) return prune::shift;
  return nullptr;
}

// ---- omap ----
// A saver's omap: each grid dim cuts the output dim with its axis, or stacks partial results along a free dim:
// one of extent 1 if there is one (a new outer axis), else the last free one, so that a combine can give each
// row its own block and walk the parts along that dim. Stacked along a free dim of rows, the parts would be the
// outer part of the rows, which no grid dim of a combine cuts row by row (qknorm_h8_d128_k1024: 64 rows a head not
// cut by the grid; its per-row combine was out of reach and the split-KV flash form with it, 11.0 us on the H100
// against the 13.5 of the form found). nullopt (`omap`): some grid dim would write copies.
std::optional<ir::Attrs> saver_map(const Block& b, const BTensor& x, const SpecAxes& axes);

// The extent of an axis, or the number of parts of a stacked label.
int64_t extent_of(const Label& l, const SpecAxes& axes);

}  // namespace morgana::search::gen
