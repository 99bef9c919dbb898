// The lowering pipeline (lower.h) and the program's layout: parameters (the contract every kernel follows),
// where each kernel-level tensor lives, and the kernels' entry symbols.
#include "targets/lower/lower.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "ir/block_rules.h"
#include "ir/printer.h"
#include "ir/verify.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

// Intermediate tensors start at multiples of 256 bytes in the workspace, the alignment CUDA and HIP give every
// allocation, so a kernel sees the same alignment whether a tensor is a parameter or a workspace region.
constexpr int64_t kWorkspaceAlign = 256;

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

std::vector<int64_t> dims(const ir::TensorType& t) { return {t.shape().begin(), t.shape().end()}; }
std::vector<int64_t> strides(const ir::TensorType& t) {
  return {t.strides.begin(), t.strides.begin() + t.rank};
}

}  // namespace

LoweredProgram lower(const ir::Graph& g, const targets::Target& target, const LowerOptions& options) {
  ir::verify_or_throw(g);
  TiledGraph tiled = tile_kernel_ops(g, target);
  std::vector<ir::VerifyIssue> issues = ir::verify(tiled.graph);
  MG_CHECK(issues.empty(), "tile_kernel_ops made an invalid graph: " +
                               (issues.empty() ? std::string() : ir::format_issue(tiled.graph, issues[0])));
  return lower_tiled(tiled, target, options);
}

LoweredProgram lower_tiled(const TiledGraph& tiled, const targets::Target& target, const LowerOptions& options) {
  const ir::Graph& g = tiled.graph;
  std::vector<std::string> names = ir::printed_names(g);
  LoweredProgram p;
  p.name = g.name();
  p.target = target.identity.name;
  p.mugraph = ir::print(g);

  std::vector<int> tensor_of(g.num_tensors(), -1);
  std::unordered_set<std::string> param_names;
  auto add_param = [&](ir::TensorId t, Role role) {
    MG_CHECK(tensor_of[t] < 0, "a tensor is two parameters; tile_kernel_ops copies such outputs");
    const ir::TensorType& type = g.type(t);
    p.params.push_back({names[t], role, type.dtype, dims(type), strides(type)});
    param_names.insert(names[t]);
    tensor_of[t] = static_cast<int>(p.tensors.size());
    p.tensors.push_back({names[t], type.dtype, dims(type), strides(type), static_cast<int>(p.params.size() - 1), 0});
  };
  for (ir::TensorId t : g.inputs()) add_param(t, Role::input);
  for (ir::TensorId t : g.outputs()) add_param(t, Role::output);

  // Every other tensor a kernel makes lives in the workspace, each in its own aligned region. A transpose is a view:
  // the memory of its operand, its last two dims and strides swapped.
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::OpCode::transpose) {
      ir::TensorId t = g.result(n);
      GlobalTensor view = p.tensors[static_cast<size_t>(tensor_of[g.operands(n)[0]])];
      const size_t r = view.shape.size();
      std::swap(view.shape[r - 1], view.shape[r - 2]);
      std::swap(view.strides[r - 1], view.strides[r - 2]);
      view.name = names[t];
      tensor_of[t] = static_cast<int>(p.tensors.size());
      p.tensors.push_back(std::move(view));
      continue;
    }
    if (n.op != ir::OpCode::block) continue;
    for (int i = 0; i < n.num_results; ++i) {
      ir::TensorId t = g.result(n, i);
      if (tensor_of[t] >= 0) continue;
      const ir::TensorType& type = g.type(t);
      int64_t offset = align_up(p.workspace_bytes, kWorkspaceAlign);
      p.workspace_bytes = offset + type.numel() * ir::dtype_bytes(type.dtype);
      tensor_of[t] = static_cast<int>(p.tensors.size());
      p.tensors.push_back({names[t], type.dtype, dims(type), strides(type), -1, offset});
    }
  }
  for (ir::NodeId id = 0; id < g.nodes().size(); ++id) {
    const ir::Node& n = g.node(id);
    if (n.op != ir::OpCode::block) continue;
    // A concat read only by products over its dim is never a tile: the sum of the pieces' products instead.
    const std::optional<ir::Graph> split = ir::with_contracted_concats_split(g.body(n));
    const ir::Graph& body = split ? *split : g.body(n);
    BlockSite site;
    site.body = &body;
    std::string results;
    for (int i = 0; i < n.num_results; ++i) {
      site.result_tensors.push_back(tensor_of[g.result(n, i)]);
      results += (i ? "," : "") + names[g.result(n, i)];
    }
    for (ir::TensorId t : g.operands(n)) {
      site.operand_tensors.push_back(tensor_of[t]);
      site.operand_names.push_back(names[t]);
    }
    const std::string& made_from = id < tiled.made_from.size() ? tiled.made_from[id] : std::string();
    site.made_by_lowering = !made_from.empty();
    site.from = {results, made_from.empty() ? ir::print_node(g, n, names) : made_from, g.loc(id)};
    if (body.block_params().threads > target.execution.max_threads_per_block)
      throw UserError("block op '" + results + "': threads=" + std::to_string(body.block_params().threads) +
                          " exceeds the " + std::to_string(target.execution.max_threads_per_block) +
                          " threads per block of target '" + target.identity.name + "'",
                      site.from.loc);
    Kernel k = lower_block(site);
    load_transposed_operands(k, p);
    fold_unit_rows(k, p, body);
    merge_equal_loads(k, p);
    fuse_elementwise(k);
    k.block[0] = targets::block_threads(target, body);
    pipeline_loads(k, p, target);
    plan_shared_memory(k, target, options.spill_to_global);
    choose_instructions(k, p, target, options.matrix_ops);
    keep_rows_in_registers(k, target);
    keep_matmuls_in_registers(k, target);
    pipeline_loads_again(k, p, target);
    use_copy_engine(k, p, target);
    fold_across_loop(k, target);
    keep_elements_in_registers(k, p, target);
    fold_by_teams(k, target);
    publish_split_parts_at_once(k, target);
    own_accumulator_state(k, target);
    accumulate_rescaled_products(k);
    norms_from_fragments(k, target);
    wait_by_first_use(k);
    plan_shared_memory(k, target, options.spill_to_global);  // again: register tiles free shared memory
    insert_barriers(k);
    k.entry = p.name + "_k" + std::to_string(p.kernels.size()) + "_" + names[g.result(n)];
    if (k.loop >= 2 && k.loop <= kMaxUnrolledLoop && !options.keep_rolled.contains(k.entry)) k.unroll = true;
    p.kernels.push_back(std::move(k));
  }

  // Spilled tiles: one scratch region after the intermediates, shared by the kernels (they run one after another),
  // a slice per block.
  int64_t scratch = 0;
  for (const Kernel& k : p.kernels) scratch = std::max(scratch, k.scratch_bytes * k.grid[0] * k.grid[1] * k.grid[2]);
  if (scratch > 0) {
    int64_t offset = align_up(p.workspace_bytes, kWorkspaceAlign);
    for (Kernel& k : p.kernels) k.scratch_offset = offset;
    p.workspace_bytes = offset + scratch;
  }
  if (p.workspace_bytes > 0) {
    p.workspace_bytes = align_up(p.workspace_bytes, kWorkspaceAlign);
    std::string name = "workspace";
    for (int i = 2; param_names.count(name); ++i) name = "workspace" + std::to_string(i);
    p.params.push_back({name, Role::workspace, ir::DType::f32, {p.workspace_bytes / 4}, {1}});
    // Every tensor without a parameter lives there: the intermediates, views of them (transposes, and the passes'
    // views with dims swapped, swap_addressed_dims).
    for (GlobalTensor& t : p.tensors)
      if (t.param < 0) t.param = static_cast<int>(p.params.size() - 1);
  }
  return p;
}

}  // namespace morgana::lower
