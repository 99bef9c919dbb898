// Transposed inputs (search/input_views.h): the search sees a transpose of an input as an input of its own, and
// every answer gets the transpose back over the original input.
#include <gtest/gtest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "search/input_views.h"
#include "search/search.h"
#include "verify/equivalence.h"

namespace morgana::search {
namespace {

ir::Graph linear_t() { return ir::parse_file("tests/search/specs/linear_transposed.mg").programs.at(0); }

TEST(InputViews, ATransposedInputIsAnInputOfItsOwn) {
  const ir::Graph s = linear_t();
  const std::optional<InputViews> v = view_inputs(s);
  ASSERT_TRUE(v);
  // W is read only through its transpose: the viewed spec has the view (strides swapped) and not W.
  EXPECT_EQ(ir::print(v->spec),
            "kernel linear_t(X: f16[16,256], Wt: f16[256,512]{1,256}) {\n"
            "  Y = matmul(X, Wt)\n"
            "  return Y\n"
            "}\n");
  // The spec as written comes back from its viewed form unchanged.
  EXPECT_EQ(ir::print(restore_views(v->spec, s, *v)), ir::print(s));
  EXPECT_FALSE(view_inputs(v->spec));
}

TEST(InputViews, AnInputReadBothWaysStaysBesideItsView) {
  const ir::Graph s = ir::parse_module(R"(kernel latent(Q: f16[4,1,32], C: f16[64,32]) {
  Ct = transpose(C)
  A = matmul(Q, Ct)
  S = softmax(A, dim=2)
  O = matmul(S, C)
  return O
}
)").programs.at(0);
  const std::optional<InputViews> v = view_inputs(s);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->spec.inputs().size(), 3u);
  EXPECT_EQ(v->spec.name(v->spec.inputs()[1]), "C");
  EXPECT_EQ(v->spec.name(v->spec.inputs()[2]), "Ct");
  EXPECT_EQ(ir::print(restore_views(v->spec, s, *v)), ir::print(s));
  // The cost model is told that Ct views C's memory, transposed; Q and C are their own.
  ASSERT_EQ(v->aliases.size(), 3u);
  EXPECT_EQ(v->aliases[0].input, 0u);
  EXPECT_FALSE(v->aliases[0].transposed);
  EXPECT_EQ(v->aliases[1].input, 1u);
  EXPECT_FALSE(v->aliases[1].transposed);
  EXPECT_EQ(v->aliases[2].input, 1u);
  EXPECT_TRUE(v->aliases[2].transposed);
}

// The search fuses the product into one block graph that reads W through the view, and answers over W.
TEST(InputViews, TheSearchFusesOverTheViewAndAnswersOverTheInput) {
  SearchOptions o;
  o.threads = 2;
  o.top = 2;
  const ir::Graph s = linear_t();
  SearchResult r = search(s, targets::find_target("h100", "targets"), o);
  EXPECT_GT(r.stats.complete, 0u);
  ASSERT_TRUE(r.found());
  EXPECT_EQ(r.spec, ir::print(s));
  const ir::Graph best = ir::parse_module(r.top[0].mugraph).programs.at(0);
  EXPECT_NE(r.top[0].mugraph.find("  Wt = transpose(W)\n  Y = block(X, Wt)"), std::string::npos) << r.top[0].mugraph;
  EXPECT_EQ(r.top[0].hash, best.hash());
  EXPECT_TRUE(verify::equivalent(s, best, {2, 7, true}).equivalent());
}

}  // namespace
}  // namespace morgana::search
