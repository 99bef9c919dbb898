#include "ir/block_rules.h"

#include <algorithm>

namespace morgana::ir {

std::vector<BlockSection> block_sections(const Graph& body) {
  const bool looping = body.block_params().loop > 1;
  std::vector<BlockSection> sec(body.num_tensors(), BlockSection::prologue);
  for (const Node& n : body.nodes()) {
    BlockSection s = BlockSection::prologue;
    const OpKind kind = op_info(n.op).kind;
    if (kind == OpKind::Iter)
      s = looping && n.attrs.fmap != kPhi ? BlockSection::body : BlockSection::prologue;
    else if (kind == OpKind::Accum)
      s = BlockSection::epilogue;
    else
      for (TensorId t : body.operands(n)) s = std::max(s, sec[t]);
    for (int i = 0; i < n.num_results; ++i) sec[body.result(n, i)] = s;
  }
  return sec;
}

namespace {

// The nodes that read tensor t, one entry per operand slot.
std::vector<NodeId> readers(const Graph& body, TensorId t) {
  std::vector<NodeId> r;
  for (NodeId id = 0; id < body.nodes().size(); ++id)
    for (TensorId o : body.operands(body.node(id)))
      if (o == t) r.push_back(id);
  return r;
}

}  // namespace

bool matmul_fused_into_acc(const Graph& body, const std::vector<BlockSection>& sections, NodeId matmul) {
  const Node& n = body.node(matmul);
  if (n.op != OpCode::matmul || body.block_params().loop <= 1) return false;
  const TensorId r = body.result(n);
  const std::vector<NodeId> users = readers(body, r);
  return sections[r] == BlockSection::body && users.size() == 1 && body.node(users[0]).op == OpCode::acc_sum;
}

std::optional<NodeId> norm_scaled_after(const Graph& body, const std::vector<BlockSection>& sections, NodeId norm) {
  const Node& n = body.node(norm);
  if (n.op != OpCode::rms_norm) return std::nullopt;
  const TensorId r = body.result(n);
  const std::vector<NodeId> users = readers(body, r);
  if (users.size() != 1) return std::nullopt;
  const Node& m = body.node(users[0]);
  if (m.op != OpCode::matmul || matmul_fused_into_acc(body, sections, users[0]) ||
      sections[body.result(m)] != sections[r])
    return std::nullopt;
  const TensorType& x = body.type(r);
  const int contraction = body.operands(m)[0] == r ? x.rank - 1 : x.rank - 2;
  if (n.attrs.dim != contraction || body.type(body.result(m)).numel() > x.numel()) return std::nullopt;
  return users[0];
}

std::vector<uint8_t> matmul_operands_scaled_after(const Graph& body) {
  std::vector<uint8_t> bits(body.nodes().size(), 0);
  const std::vector<BlockSection> sections = block_sections(body);
  for (NodeId id = 0; id < body.nodes().size(); ++id) {
    std::optional<NodeId> m = norm_scaled_after(body, sections, id);
    if (!m) continue;
    const TensorId r = body.result(body.node(id));
    auto ops = body.operands(body.node(*m));
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i] == r) bits[*m] |= static_cast<uint8_t>(1u << i);
  }
  return bits;
}

}  // namespace morgana::ir
