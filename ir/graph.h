// Kernel graphs and block graphs (μGraph levels 1 and 2) in one arena-based structure.
//
// The search builds graphs op by op millions of times, so: nodes and tensors live in flat vectors of plain data
// and refer to each other by 32-bit ids; an op is appended with its result types inferred eagerly; nodes never change
// once appended; a prefix is restored by truncation; every tensor carries a structural hash computed when it is
// made, so the canonical hash of a graph is a fold over its outputs. Names are optional side data for the printer.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/diagnostic.h"
#include "ir/op_table.h"
#include "ir/type.h"

namespace morgana::ir {

using NodeId = uint32_t;
using TensorId = uint32_t;

inline constexpr int kGridDims = 3;  // x, y, z
inline constexpr int8_t kPhi = -1;   // "replicated" in an imap, "no for-loop dim" in an fmap

struct Attrs {
  int32_t dim = 0;
  int64_t to = 1;
  double s = 0.0;
  double eps = 1e-6;
  std::array<int8_t, kGridDims> map{kPhi, kPhi, kPhi};  // iter: imap; save: omap
  int8_t fmap = kPhi;
  bool mask = false;
  uint8_t shape_rank = 0;  // save: explicit output extent when nonzero
  std::array<int64_t, kMaxRank> shape{};
  uint32_t index = 0;  // input: parameter position; iter: block operand position; block: body index

  bool operator==(const Attrs&) const = default;
};

// The header of a block graph: launch grid, threads per block, for-loop trip count.
struct BlockParams {
  std::array<int64_t, kGridDims> grid{1, 1, 1};
  int64_t threads = 128;
  int64_t loop = 1;
  bool operator==(const BlockParams&) const = default;
};

struct Node {
  OpCode op;
  uint16_t num_operands = 0;
  uint16_t num_results = 0;
  uint32_t operands_begin = 0;  // into Graph::operand_pool
  TensorId results_begin = 0;   // results are consecutive tensor ids
  Attrs attrs;
  uint64_t hash = 0;
};

struct Tensor {
  TensorType type;
  NodeId producer = 0;
  uint16_t result_index = 0;
  uint64_t hash = 0;
};

class Graph {
 public:
  // A kernel graph (level 1) or a block graph (level 2, the body of a `block` op).
  explicit Graph(Level level = kKernelLevel) : level_(level) {}
  static Graph make_block(BlockParams params, std::vector<TensorType> operand_types);

  Level level() const { return level_; }
  bool is_block() const { return level_ == kBlockLevel; }

  // Program name (kernel graphs).
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // Kernel graphs: the targets this program is for (`kernel f(...) for [h200, h100] {`), so that one file can
  // hold a best μGraph per GPU; empty means every target. Side data like the name: printed, not hashed.
  const std::vector<std::string>& for_targets() const { return for_targets_; }
  void set_for_targets(std::vector<std::string> targets) { for_targets_ = std::move(targets); }

  // --- building: each throws UserError (without location) when the op does not fit its operands ---
  TensorId add_input(TensorType type, std::string name = {});
  std::vector<TensorId> add(OpCode op, std::span<const TensorId> operands, const Attrs& attrs = {});
  TensorId add1(OpCode op, std::span<const TensorId> operands, const Attrs& attrs = {});
  TensorId add1(OpCode op, std::initializer_list<TensorId> operands, const Attrs& attrs = {}) {
    return add1(op, std::span<const TensorId>(operands.begin(), operands.size()), attrs);
  }
  // A `block` op: its results are the body's saves in order.
  std::vector<TensorId> add_block(std::span<const TensorId> operands, Graph body);
  // Block level: an input iterator over block operand `operand`.
  TensorId add_iter(uint32_t operand, std::array<int8_t, kGridDims> imap, int8_t fmap, bool mask = false);
  // Marks `t` as a graph result (kernel level: an output node).
  void add_output(TensorId t);

  // --- reading ---
  std::span<const Node> nodes() const { return nodes_; }
  const Node& node(NodeId n) const { return nodes_.at(n); }
  size_t num_tensors() const { return tensors_.size(); }
  const Tensor& tensor(TensorId t) const { return tensors_.at(t); }
  const TensorType& type(TensorId t) const { return tensors_.at(t).type; }
  std::span<const TensorId> operands(const Node& n) const {
    return {operand_pool_.data() + n.operands_begin, n.num_operands};
  }
  TensorId result(const Node& n, int i = 0) const { return n.results_begin + static_cast<TensorId>(i); }
  // Kernel level: tensors returned, in order. Block level: the results of the save nodes, in order.
  std::span<const TensorId> outputs() const { return outputs_; }
  // Kernel level: the input tensors in parameter order.
  std::span<const TensorId> inputs() const { return inputs_; }

  // Block level only.
  const BlockParams& block_params() const { return params_; }
  std::span<const TensorType> operand_types() const { return operand_types_; }

  // Kernel level only: block graphs of `block` ops (Node::attrs.index).
  const Graph& body(const Node& n) const { return bodies_.at(n.attrs.index); }
  std::span<const Graph> bodies() const { return bodies_; }

  // Names for printing. An empty name means "make one up".
  const std::string& name(TensorId t) const;
  void set_name(TensorId t, std::string n);

  // Where a node was written, so that later stages (lowering, generated code) can point back at the source. The
  // parser records it; nodes built in code have none (line 0). Side data like names: not hashed, not printed.
  SourceLoc loc(NodeId n) const;
  void set_loc(NodeId n, const SourceLoc& loc);

  // Structural hash of the whole graph (outputs in order, block headers, operand types). Graphs that print the
  // same hash the same.
  uint64_t hash() const;

  // Drops every node from `num_nodes` on (and the tensors, operands and outputs they made).
  void truncate(size_t num_nodes);

 private:
  friend Graph with_rows_folded(const Graph& body, const struct UnitRowFold& fold);
  std::vector<TensorId> append(OpCode op, std::span<const TensorId> operands, const Attrs& attrs,
                               std::span<const TensorType> result_types, uint64_t extra_hash);

  Level level_;
  std::string name_;
  std::vector<std::string> for_targets_;
  std::vector<Node> nodes_;
  std::vector<Tensor> tensors_;
  std::vector<TensorId> operand_pool_;
  std::vector<TensorId> outputs_;
  std::vector<TensorId> inputs_;
  std::vector<std::string> names_;  // parallel to tensors_, may be shorter
  // Source positions: one file per graph (a graph comes from one file), (line, column) per node; may be shorter.
  std::string loc_file_;
  std::vector<std::pair<uint32_t, uint32_t>> locs_;
  BlockParams params_;
  std::vector<TensorType> operand_types_;
  std::vector<Graph> bodies_;
};

// A spec file: one or more programs.
struct Module {
  std::vector<Graph> programs;
};

// Whether `program` is for `target`: it names it in its `for` list, or has no list.
bool serves_target(const Graph& program, std::string_view target);

// Whether kernel-level node `n` of `g` launches a kernel: every op but inputs, outputs and views. A transpose is a
// view of its operand's memory (its readers read that), unless it is returned: then it is copied out.
bool launches_kernel(const Graph& g, const Node& n);

// Shape rule of one op, derived from its kind. `ctx` is the enclosing block graph for block-level ops (needed by
// iter and save), `body` the block graph of a `block` op. Throws UserError without location.
std::vector<TensorType> infer_types(OpCode op, std::span<const TensorType> operands, const Attrs& attrs,
                                    const Graph* ctx, const Graph* body);

// Number of parts a grid/for-loop split cuts input dim `d` of an iter into, and the resulting tile extent.
int64_t iter_parts(const BlockParams& p, const Attrs& a, int d);

uint64_t hash_mix(uint64_t h, uint64_t v);

}  // namespace morgana::ir
