// Rules about a block graph that both the lowering (targets/lower) and the cost model (search/kernel_work.cpp) apply,
// so that the search prices what the lowering builds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ir/graph.h"

namespace morgana::ir {

// Where a block graph computes each value (docs/spec-language.md, "Meaning"): the prologue (iterators without a
// for-loop dim and everything computed from them alone, computed once), the body (what depends on the iteration,
// run `loop` times; with one iteration iterators are the prologue's) and the epilogue (the accumulators' results
// and all after them).
enum class BlockSection : uint8_t { prologue, body, epilogue };
std::vector<BlockSection> block_sections(const Graph& body);

// A matmul whose only use is an acc_sum in a loop of several iterations accumulates into it directly.
bool matmul_fused_into_acc(const Graph& body, const std::vector<BlockSection>& sections, NodeId matmul);

// The matmul that reads rms_norm `norm`'s operand x unnormalized and scales its product instead, when there is one:
// the norm's one reader, in the same section (a norm computed once before the loop stays there), not accumulated
// across iterations, with the norm over its contraction dim, so that its factors r are constant along the sum:
// matmul(x * r, y) = matmul(x, y) * r for r over x's rows ([.., m, 1]), matmul(y, x * r) = matmul(y, x) * r for r
// over x's columns ([.., 1, n]). Taken where the product is no larger than x: the normalized copy of x (a pass over
// it in shared memory and a barrier before the matmul reads it) becomes a pass over the product, which stays where
// the matmul leaves it (registers, on a matrix instruction). QK-norm attention's keys: the scores scaled per column.
std::optional<NodeId> norm_scaled_after(const Graph& body, const std::vector<BlockSection>& sections, NodeId norm);

// Per node of `body`, for a matmul: bit i set when its operand i is an rms_norm's result that norm_scaled_after leaves
// unnormalized: the matmul reads the norm's operand as it is and scales its product in f32, so the normalized
// operand is never rounded to a 16-bit type for the matrix instruction (the device-precision reference follows).
std::vector<uint8_t> matmul_operands_scaled_after(const Graph& body);

// Batch elements as rows (docs/lowering.md, "Batch elements as rows"). A matmul whose A holds one row per batch
// element (decode: one query row per head) and whose B the batch shares (a 2-D operand: multi-head latent attention's
// cache, a weight) would run each element's single row in a matrix instruction of m rows and hold its result padded
// alike. When every value of a block graph either has no batch dims above 1, or has exactly one (`dim`, in values of
// rank `rank`) and a single row, and at least one such matmul exists and every matmul's B has no batch dims above 1,
// the lowering swaps that batch dim with the row dim in every such value: the batch elements become the rows of one
// product. A value's memory order does not change (the row dim it swaps with has extent 1); loads and stores address
// their tensors through views with the two dims swapped. The cost model prices the block graph as folded.
struct UnitRowFold {
  int rank = 0;  // of the values that fold
  int dim = 0;   // their one batch dim above 1
};
std::optional<UnitRowFold> unit_row_fold(const Graph& body);
// Whether a value (or a lowering tile) of shape `shape` folds under `fold`: rank fold.rank, extent 1 at rank - 2, and
// fold.dim its only batch dim above 1.
bool folds(std::span<const int64_t> shape, const UnitRowFold& fold);
// Dim `d` of a value that folds, as the folded value numbers it (fold.dim and rank - 2 trade places): a reduction's.
int folded_dim(int d, const UnitRowFold& fold);
// `body` with every value that folds retyped as folded (dims fold.dim and rank - 2 swapped): what the cost model
// prices. Not a valid block graph (its iterators' shapes no longer follow their maps); for estimates only.
Graph with_rows_folded(const Graph& body, const UnitRowFold& fold);

// A matmul of two concats along the dim it contracts, whose pieces pair up (a's extent there is c's), is the sum of
// the pieces' products: matmul(concat(a, b), concat(c, d)) = add(matmul(a, c), matmul(b, d)) (LoRA's concat form,
// (X‖XA)·(W;B)). The lowering builds a block graph so, and the cost model prices it so: a concat that only feeds
// such products is never copied into a tile of its own (as a tile it costs a copy through shared memory, a
// type of its own when its pieces' types differ, and reads without the layouts matrix instructions want: 13.5 us
// on the H100 against 3.6 split so, examples/lora.mg). nullopt when `body` has no such matmul.
std::optional<Graph> with_contracted_concats_split(const Graph& body);

// Whether a tensor of `shape` and `strides` is a transposed view: its last dim strided, the one before it contiguous.
bool transposed_layout(std::span<const int64_t> shape, std::span<const int64_t> strides);
// Whether value t of `body` is read, and only as matmuls' B (never as the same matmul's A too). A tile of a transposed
// view read so is loaded as the memory holds it, rows of N along K (the lowering's pass 3c), and priced so.
bool read_only_as_matmul_b(const Graph& body, TensorId t);

// Loads of equal elements. A block op's operands may be views of one kernel-level tensor: the same tensor twice, or a
// tensor and its transpose (multi-head latent attention reads its cache C as Cᵀ for the scores and as C for P·C).
// OperandView is where operand i comes from: the tensor it reads through at most one transpose.
struct OperandView {
  TensorId tensor = 0;
  bool transposed = false;
  bool operator==(const OperandView&) const = default;
};
// Inputs of a kernel graph that view another input's memory: the search sees each transpose of a spec input as an
// input of its own (search/input_views.h), and tells the cost model so. Per input position, the position of the
// input whose memory it reads (itself if none) and whether through a transpose; empty: every input its own.
struct InputAlias {
  uint32_t input = 0;
  bool transposed = false;
};
using InputAliases = std::vector<InputAlias>;
// The memory kernel-level tensor t reads (through an input's alias, then a transpose).
OperandView view_of(const Graph& kernel_graph, TensorId t, std::span<const InputAlias> aliases = {});
std::vector<OperandView> operand_views(const Graph& kernel_graph, const Node& block,
                                       std::span<const InputAlias> aliases = {});
// Per node of `body`: for an iterator that reads the same elements as an earlier iterator of the block, that one's
// node id; -1 otherwise. Two iterators read the same elements when their operands view one tensor, their maps agree
// and their tiles are equal, up to the last two dims' swap where one view is transposed; a transposed one must be
// read only as matmuls' B (the lowering then loads it as the memory holds it, pass 3c, and the two loads are equal,
// pass 3e, which merges them). The lowering loads such a tile once; the cost model counts it once.
std::vector<int> equal_iters(const Graph& body, std::span<const OperandView> views);

}  // namespace morgana::ir
