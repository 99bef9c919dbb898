// The partial-fusion fallback (search/partial_fusion.h): windows of a spec's ops as specs of their own, programs
// inlined into one kernel graph, and the search answering with a stitched, verified program where the generator
// finds no complete fused candidate.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "search/input_views.h"
#include "search/partial_fusion.h"
#include "search/search.h"
#include "verify/equivalence.h"

namespace morgana::search {
namespace {

ir::Graph lora() { return ir::parse_file("tests/search/specs/lora_small.mg").programs.at(0); }

TEST(PartialFusion, AWindowIsASpecOfItsOwn) {
  const ir::Graph s = lora();
  const std::vector<ir::NodeId> ops = compute_ops(s);
  ASSERT_EQ(ops.size(), 4u);
  // XAB and Y read XA (made before), B (an input) and XW (made before), in that order, and leave Y.
  EXPECT_EQ(ir::print(window_spec(s, ops, 2, 4)),
            "kernel lora_small(XA: f16[16,16], B: f16[16,1024], XW: f16[16,1024]) {\n"
            "  XAB = matmul(XA, B)\n"
            "  Y = add(XW, XAB)\n"
            "  return Y\n"
            "}\n");
  // XW and XA both go on to later ops.
  const WindowInterface io = window_interface(s, ops, 0, 2);
  ASSERT_EQ(io.inputs.size(), 3u);
  EXPECT_EQ(io.outputs.size(), 2u);
}

TEST(PartialFusion, InliningEveryOneOpWindowGivesTheSpecBack) {
  const ir::Graph s = lora();
  const std::vector<ir::NodeId> ops = compute_ops(s);
  ir::Graph g;
  g.set_name(s.name());
  std::vector<ir::TensorId> at(s.num_tensors());
  for (ir::TensorId i : s.inputs()) at[i] = g.add_input(s.type(i), s.name(i));
  for (size_t i = 0; i < ops.size(); ++i) {
    const WindowInterface io = window_interface(s, ops, i, i + 1);
    std::vector<ir::TensorId> args;
    for (ir::TensorId t : io.inputs) args.push_back(at[t]);
    const std::vector<ir::TensorId> outs = inline_program(g, window_spec(s, ops, i, i + 1), args);
    ASSERT_EQ(outs.size(), io.outputs.size());
    for (size_t o = 0; o < outs.size(); ++o) at[io.outputs[o]] = outs[o];
  }
  for (ir::TensorId o : s.outputs()) g.add_output(at[o]);
  EXPECT_EQ(g.hash(), s.hash());
}

// One kernel op of at most three block ops cannot hold LoRA's four ops: no complete fused candidate, and the answer
// is the windows searched apart and stitched, verified against the whole spec, cheaper than the spec as written.
TEST(PartialFusion, TheSearchAnswersWithAPartialFusionWhereNothingFusesWhole) {
  SearchOptions o;
  o.threads = 2;
  o.top = 2;
  o.max_kernel_ops = 1;
  o.max_block_ops = 3;
  const ir::Graph s = lora();
  const targets::Target h200 = targets::find_target("h200", "targets");
  SearchResult r = search(s, h200, o);
  EXPECT_EQ(r.stats.complete, 0u);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_NE(r.top[0].verification.find("partial fusion of the spec's 4 ops"), std::string::npos)
      << r.top[0].verification;
  EXPECT_NE(r.top[0].verification.find("full exact"), std::string::npos) << r.top[0].verification;
  EXPECT_NE(r.top[1].verification.find("the spec as written"), std::string::npos) << r.top[1].verification;
  EXPECT_LT(r.top[0].cost_us, r.top[1].cost_us);
  const ir::Graph best = ir::parse_module(r.top[0].mugraph).programs.at(0);
  EXPECT_NE(r.top[0].mugraph.find("= block("), std::string::npos) << r.top[0].mugraph;
  EXPECT_NE(r.top[0].mugraph.find("\n  return Y\n"), std::string::npos) << r.top[0].mugraph;
  EXPECT_TRUE(verify::equivalent(s, best, {1, 7, true}).equivalent());
  // Sharded searches leave the fallback out (each shard would search the windows again): the spec as written.
  o.shard = {0, 2};
  SearchResult shard = search(s, h200, o);
  ASSERT_TRUE(shard.found());
  EXPECT_EQ(shard.top[0].mugraph, ir::print(s));
}

}  // namespace
}  // namespace morgana::search

namespace morgana::search {
namespace {

// Multi-head latent attention's spec as the search sees it (its cache's transpose an input of its own, viewing C):
// every window that reads both the view and C is told so (ir::InputAliases), so its search prices the fused core with
// the cache loaded once; a window with the view alone is told nothing. Windows are searched narrowest first.
TEST(PartialFusion, WindowsKnowWhichInputsViewOneMemory) {
  const ir::Graph spec = ir::parse_module(R"(kernel latent(Q: f16[4,1,16], W: f16[4,16,32], C: f16[64,32]) {
  Ql = matmul(Q, W)
  Ct = transpose(C)
  A = matmul(Ql, Ct)
  S = softmax(A, dim=2)
  L = matmul(S, C)
  return L
}
)").programs.at(0);
  const std::optional<InputViews> views = view_inputs(spec);
  ASSERT_TRUE(views);
  ASSERT_EQ(views->aliases.size(), 4u);  // Q, W, C, then Ct (InputViews.AnInputReadBothWaysStaysBesideItsView)

  std::vector<std::string> seen;
  auto record = [&](const ir::Graph& window, const ir::InputAliases& aliases, double) -> std::optional<ir::Graph> {
    std::string s = std::to_string(compute_ops(window).size()) + ":";
    for (size_t i = 0; i < aliases.size(); ++i)
      if (aliases[i].input != i) s += " " + window.name(window.inputs()[i]) + "=" + (aliases[i].transposed ? "T(" : "(") +
                                      window.name(window.inputs()[aliases[i].input]) + ")";
    seen.push_back(s);
    return window;
  };
  const targets::Target h100 = targets::find_target("h100", "targets");
  ASSERT_TRUE(partial_fusion(views->spec, h100, 4, 10.0, record, views->aliases));
  // Ops: Ql, A (reads Ct), S, L (reads C). Widths 1..3 (fewer than the spec's 4 ops), in that order.
  const std::vector<std::string> want = {"1:", "1:", "1:", "1:", "2:", "2:", "2:", "3:", "3: Ct=T(C)"};
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace morgana::search
