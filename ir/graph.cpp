#include "ir/graph.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "ir/diagnostic.h"

namespace morgana::ir {

uint64_t hash_mix(uint64_t h, uint64_t v) {
  // splitmix64-style finalizer over the running state; cheap and well distributed.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

namespace {

uint64_t hash_type(uint64_t h, const TensorType& t) {
  h = hash_mix(h, static_cast<uint64_t>(t.dtype) << 8 | t.rank);
  for (int i = 0; i < t.rank; ++i) {
    h = hash_mix(h, static_cast<uint64_t>(t.dims[static_cast<size_t>(i)]));
    h = hash_mix(h, static_cast<uint64_t>(t.strides[static_cast<size_t>(i)]));
  }
  return h;
}

uint64_t hash_attrs(uint64_t h, OpCode op, const Attrs& a) {
  const OpInfo& info = op_info(op);
  h = hash_mix(h, static_cast<uint64_t>(op));
  if (info.attrs & kAttrDim) h = hash_mix(h, static_cast<uint64_t>(a.dim));
  if (info.attrs & kAttrTo) h = hash_mix(h, static_cast<uint64_t>(a.to));
  if (info.attrs & kAttrS) h = hash_mix(h, std::bit_cast<uint64_t>(a.s));
  if (info.attrs & kAttrEps) h = hash_mix(h, std::bit_cast<uint64_t>(a.eps));
  if (info.attrs & (kAttrImap | kAttrOmap))
    for (int8_t m : a.map) h = hash_mix(h, static_cast<uint64_t>(m + 2));
  if (info.attrs & kAttrFmap) h = hash_mix(h, static_cast<uint64_t>(a.fmap + 2));
  if (info.attrs & kAttrMask) h = hash_mix(h, a.mask);
  if (info.attrs & kAttrShape) {
    h = hash_mix(h, a.shape_rank);
    for (int i = 0; i < a.shape_rank; ++i) h = hash_mix(h, static_cast<uint64_t>(a.shape[static_cast<size_t>(i)]));
  }
  if (info.kind == OpKind::Input || info.kind == OpKind::Iter) h = hash_mix(h, a.index);
  return h;
}

}  // namespace

Graph Graph::make_block(BlockParams params, std::vector<TensorType> operand_types) {
  Graph g(kBlockLevel);
  g.params_ = params;
  g.operand_types_ = std::move(operand_types);
  return g;
}

std::vector<TensorId> Graph::append(OpCode op, std::span<const TensorId> operands, const Attrs& attrs,
                                    std::span<const TensorType> result_types, uint64_t extra_hash) {
  MG_CHECK(operands.size() < 65536 && result_types.size() < 65536, "too many operands or results");
  // Kernel-level tensors hold a block's tiles, so checking them bounds every tensor (issue 17: a matmul of two
  // addressable operands can make one that is not).
  if (!is_block())
    for (const TensorType& t : result_types)
      if (std::string problem = t.addressable_problem(); !problem.empty())
        throw UserError("the result " + t.str() + ": " + problem);
  Node n;
  n.op = op;
  n.num_operands = static_cast<uint16_t>(operands.size());
  n.num_results = static_cast<uint16_t>(result_types.size());
  n.operands_begin = static_cast<uint32_t>(operand_pool_.size());
  n.results_begin = static_cast<TensorId>(tensors_.size());
  n.attrs = attrs;
  uint64_t h = hash_attrs(extra_hash, op, attrs);
  for (TensorId t : operands) {
    MG_CHECK(t < tensors_.size(), "operand refers to a tensor that does not exist yet");
    h = hash_mix(h, tensors_[t].hash);
    operand_pool_.push_back(t);
  }
  if (op == OpCode::input) h = hash_type(h, result_types[0]);
  n.hash = h;
  auto id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(n);
  std::vector<TensorId> results;
  for (size_t i = 0; i < result_types.size(); ++i) {
    Tensor t;
    t.type = result_types[i];
    t.producer = id;
    t.result_index = static_cast<uint16_t>(i);
    t.hash = hash_mix(h, i);
    results.push_back(static_cast<TensorId>(tensors_.size()));
    tensors_.push_back(t);
  }
  return results;
}

TensorId Graph::add_input(TensorType type, std::string name) {
  MG_CHECK(!is_block(), "add_input on a block graph (use add_iter)");
  Attrs a;
  a.index = static_cast<uint32_t>(inputs_.size());
  TensorId t = append(OpCode::input, {}, a, std::span<const TensorType>(&type, 1), 0)[0];
  inputs_.push_back(t);
  if (!name.empty()) set_name(t, std::move(name));
  return t;
}

std::vector<TensorId> Graph::add(OpCode op, std::span<const TensorId> operands, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  MG_CHECK(info.kind != OpKind::Block && info.kind != OpKind::Input,
           "use add_block / add_input for " + std::string(info.name));
  if (!(info.levels & level_))
    throw UserError("'" + std::string(info.name) + "' is not allowed in a " +
                    (is_block() ? "block graph" : "kernel graph"));
  std::vector<TensorType> in;
  in.reserve(operands.size());
  for (TensorId t : operands) {
    MG_CHECK(t < tensors_.size(), "operand refers to a tensor that does not exist yet");
    in.push_back(tensors_[t].type);
  }
  std::vector<TensorType> out = infer_types(op, in, attrs, is_block() ? this : nullptr, nullptr);
  std::vector<TensorId> results = append(op, operands, attrs, out, 0);
  if (info.kind == OpKind::Save) outputs_.push_back(results[0]);
  return results;
}

TensorId Graph::add1(OpCode op, std::span<const TensorId> operands, const Attrs& attrs) {
  std::vector<TensorId> r = add(op, operands, attrs);
  MG_CHECK(r.size() == 1, "add1 on an op with several results");
  return r[0];
}

std::vector<TensorId> Graph::add_block(std::span<const TensorId> operands, Graph body) {
  MG_CHECK(!is_block(), "block op inside a block graph");
  MG_CHECK(body.is_block(), "block body must be a block graph");
  std::vector<TensorType> in;
  for (TensorId t : operands) in.push_back(type(t));
  std::vector<TensorType> out = infer_types(OpCode::block, in, {}, nullptr, &body);
  Attrs a;
  a.index = static_cast<uint32_t>(bodies_.size());
  uint64_t body_hash = body.hash();
  bodies_.push_back(std::move(body));
  return append(OpCode::block, operands, a, out, body_hash);
}

TensorId Graph::add_iter(uint32_t operand, std::array<int8_t, kGridDims> imap, int8_t fmap, bool mask) {
  MG_CHECK(is_block(), "iter outside a block graph");
  Attrs a;
  a.index = operand;
  a.map = imap;
  a.fmap = fmap;
  a.mask = mask;
  std::vector<TensorType> out = infer_types(OpCode::iter, {}, a, this, nullptr);
  return append(OpCode::iter, {}, a, out, 0)[0];
}

void Graph::add_output(TensorId t) {
  MG_CHECK(!is_block(), "block graphs return through save");
  MG_CHECK(t < tensors_.size(), "output refers to a tensor that does not exist");
  append(OpCode::output, std::span<const TensorId>(&t, 1), {}, {}, 0);
  outputs_.push_back(t);
}

const std::string& Graph::name(TensorId t) const {
  static const std::string kEmpty;
  return t < names_.size() ? names_[t] : kEmpty;
}

void Graph::set_name(TensorId t, std::string n) {
  MG_CHECK(t < tensors_.size(), "set_name on a tensor that does not exist");
  if (names_.size() <= t) names_.resize(t + 1);
  names_[t] = std::move(n);
}

SourceLoc Graph::loc(NodeId n) const {
  if (n >= locs_.size() || locs_[n].first == 0) return {};
  return {loc_file_, locs_[n].first, locs_[n].second};
}

void Graph::set_loc(NodeId n, const SourceLoc& loc) {
  MG_CHECK(n < nodes_.size(), "set_loc on a node that does not exist");
  if (!loc.known()) return;
  loc_file_ = loc.file;
  if (locs_.size() <= n) locs_.resize(n + 1);
  locs_[n] = {loc.line, loc.column};
}

uint64_t Graph::hash() const {
  uint64_t h = hash_mix(level_, outputs_.size());
  if (is_block()) {
    for (int64_t g : params_.grid) h = hash_mix(h, static_cast<uint64_t>(g));
    h = hash_mix(h, static_cast<uint64_t>(params_.threads));
    h = hash_mix(h, static_cast<uint64_t>(params_.loop));
    for (const TensorType& t : operand_types_) h = hash_type(h, t);
  }
  for (TensorId t : outputs_) h = hash_mix(h, tensors_[t].hash);
  return h;
}

bool serves_target(const Graph& program, std::string_view target) {
  const std::vector<std::string>& list = program.for_targets();
  return list.empty() || std::find(list.begin(), list.end(), target) != list.end();
}

bool launches_kernel(const Graph& g, const Node& n) {
  if (n.op == OpCode::input || n.op == OpCode::output) return false;
  if (n.op != OpCode::transpose) return true;
  return std::find(g.outputs().begin(), g.outputs().end(), g.result(n)) != g.outputs().end();
}

void Graph::truncate(size_t num_nodes) {
  if (num_nodes >= nodes_.size()) return;
  const Node& first = nodes_[num_nodes];
  TensorId keep_tensors = first.results_begin;
  uint32_t keep_operands = first.operands_begin;
  size_t keep_bodies = bodies_.size();
  for (size_t i = num_nodes; i < nodes_.size(); ++i)
    if (nodes_[i].op == OpCode::block) keep_bodies = std::min<size_t>(keep_bodies, nodes_[i].attrs.index);
  nodes_.resize(num_nodes);
  tensors_.resize(keep_tensors);
  operand_pool_.resize(keep_operands);
  bodies_.resize(keep_bodies);
  if (names_.size() > keep_tensors) names_.resize(keep_tensors);
  if (locs_.size() > num_nodes) locs_.resize(num_nodes);
  std::erase_if(inputs_, [&](TensorId t) { return t >= keep_tensors; });
  // Outputs are the operands of output nodes (kernel level) or the results of save nodes (block level).
  outputs_.clear();
  for (const Node& n : nodes_) {
    if (n.op == OpCode::output) outputs_.push_back(operand_pool_[n.operands_begin]);
    if (n.op == OpCode::save) outputs_.push_back(n.results_begin);
  }
}

}  // namespace morgana::ir
