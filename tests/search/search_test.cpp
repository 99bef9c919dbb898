// The search end to end on small specs (tests/search/specs): it finds the fused μGraphs by enumeration, every
// returned μGraph passed verification, the answer does not depend on the thread count, and the abstract-expression
// pruning is what keeps the space small.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"
#include "search/generator.h"
#include "search/search.h"
#include "targets/target.h"
#include "verify/equivalence.h"

namespace morgana::search {
namespace {

ir::Graph spec(const std::string& name) { return ir::parse_file("tests/search/specs/" + name + ".mg").programs.at(0); }
targets::Target h200() { return targets::find_target("h200", "targets"); }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

SearchOptions small(int threads = 2) {
  SearchOptions o;
  o.threads = threads;
  o.top = 2;
  return o;
}

TEST(Search, FindsRmsNormLinearInOneKernel) {
  SearchResult r = search(spec("rmsnorm_linear_small"), h200(), small());
  ASSERT_TRUE(r.found());
  const std::string& best = r.top[0].mugraph;
  EXPECT_EQ(count(best, "= block("), 1) << best;
  EXPECT_EQ(count(best, "matmul("), 1) << best;
  // The spec's output name survives (callers bind outputs by name).
  EXPECT_NE(best.find("\n  return Y\n"), std::string::npos) << best;
  EXPECT_NE(best.find("  Y = block(X, W)"), std::string::npos) << best;
  EXPECT_FALSE(r.stats.timed_out);
  EXPECT_GT(r.stats.complete, 0u);
}

// The time limit bounds verification too: once the best candidate has passed every check, no further check starts
// past the limit; the result says how many places of the list are empty for that reason.
TEST(Search, TheTimeLimitBoundsVerificationOnceTheBestIsVerified) {
  SearchOptions o;
  o.threads = 1;  // a window of one check at a time
  // Checks run while the enumeration does: with a list of 5 they kept up in about one run in ten on the 2-core
  // machine (all verified before the limit, none left for time). A list of 20 is more than the window verifies in
  // the limit's time.
  o.top = 20;
  // The enumeration stops at the watcher's first look (50 ms), with hundreds of candidates by then on an idle
  // machine; a loaded one under the sanitizers may have none (CI saw only the spec as written once), so the limit
  // doubles until the enumeration found more than the list holds. (Searching again in one process answers the
  // checks faster than the first time: retrying a run that verified everything does not help.)
  SearchResult r;
  for (o.time_limit_s = 0.08;; o.time_limit_s *= 2) {
    r = search(spec("rmsnorm_linear_small"), h200(), o);
    if (r.stats.complete > 2u * static_cast<unsigned>(o.top) || o.time_limit_s > 5) break;
  }
  ASSERT_TRUE(r.found());
  EXPECT_NE(r.top[0].verification.find("full exact"), std::string::npos) << r.top[0].verification;
  EXPECT_GT(r.stats.unverified_for_time, 0u);
  EXPECT_EQ(r.top.size() + r.stats.unverified_for_time, static_cast<size_t>(o.top));
  EXPECT_LT(r.stats.seconds, o.time_limit_s + 2.0);
}

// The spec as written (its ops as predefined kernels) is always a candidate: with a budget too small for any fused
// form there is still an answer, and it is the spec itself (issue 14: "no verified μGraph found").
TEST(Search, TheSpecAsWrittenIsAlwaysACandidate) {
  SearchOptions o = small();
  o.max_kernel_ops = 1;
  o.max_block_ops = 1;  // no one-op block graph computes rms_norm and the matmul
  ir::Graph s = spec("rmsnorm_linear_small");
  SearchResult r = search(s, h200(), o);
  EXPECT_EQ(r.stats.complete, 0u);
  ASSERT_TRUE(r.found());
  EXPECT_EQ(r.top[0].mugraph, ir::print(s));
  EXPECT_NE(r.top[0].verification.find("the spec as written"), std::string::npos) << r.top[0].verification;
  // With the default budget the fused form is cheaper, and the spec is behind it.
  SearchResult fused = search(s, h200(), small());
  ASSERT_TRUE(fused.found());
  EXPECT_NE(fused.top[0].mugraph, ir::print(s));
  EXPECT_LT(fused.top[0].cost_us, r.top[0].cost_us);
}

TEST(Search, FindsGatedMlpInOneKernel) {
  SearchResult r = search(spec("gated_mlp_small"), h200(), small());
  ASSERT_TRUE(r.found());
  const std::string& best = r.top[0].mugraph;
  EXPECT_EQ(count(best, "= block("), 1) << best;
  EXPECT_EQ(count(best, "matmul("), 2) << best;
  EXPECT_EQ(count(best, "silu("), 1) << best;
}

TEST(Search, FindsAttentionInOneKernelWithMaxSubtraction) {
  SearchResult r = search(spec("attention_small"), h200(), small());
  ASSERT_TRUE(r.found());
  const std::string& best = r.top[0].mugraph;
  EXPECT_EQ(count(best, "= block("), 1) << best;
  // The float check with large logits rejects a softmax without its max subtracted.
  EXPECT_EQ(count(best, "reduce_max("), 1) << best;
  EXPECT_EQ(count(best, "exp("), 1) << best;
}

TEST(Search, FindsNTransInOneKernelAndCompletes) {
  // Elementwise ops around two norms: many small programs compute the output; the distance bound and the
  // saturated e-graph (no expanded squares) keep the space small enough to finish.
  SearchOptions o = small();
  o.max_kernel_ops = 1;
  o.max_block_ops = 8;
  SearchResult r = search(spec("ntrans_small"), h200(), o);
  ASSERT_TRUE(r.found());
  EXPECT_FALSE(r.stats.timed_out);
  EXPECT_GT(r.stats.pruned["distance"], 0u);
  const std::string& best = r.top[0].mugraph;
  EXPECT_EQ(count(best, "= block("), 1) << best;
  EXPECT_EQ(count(best, "rms_norm("), 2) << best;
}

// Every candidate the generator emits for attention_heads_small, printed: enumerated once for the tests of its
// split-KV forms below, each of which looks for its own pattern in them.
const std::vector<std::string>& attention_heads_candidates() {
  static const std::vector<std::string> texts = [] {
    Generator gen(spec("attention_heads_small"), h200(), small());
    std::atomic<bool> stop{false};
    std::vector<std::string> out;
    for (size_t task = 0; task < gen.num_tasks(); ++task) {
      GenStats stats;
      gen.explore(task, stats, [&](Candidate&& c) { out.push_back(ir::print(c.graph)); }, stop);
    }
    return out;
  }();
  return texts;
}

// Split-KV over a grid that also cuts the heads: the partial row sums stack their splits along their unit dim and
// the partial P·V along V's columns, and the combining block op slices both (and the running maxes) by the same
// split with one loop. The generator must produce that form (before the search ranks it).
TEST(Search, GeneratesSplitKvWhoseGridAlsoCutsTheHeads) {
  int split_kv = 0;
  std::string example;
  for (const std::string& text : attention_heads_candidates())
    if (count(text, "= block(") == 2 && count(text, "iter(K, imap=[0,-,2], fmap=2)") == 1 &&
        count(text, "save(") == 4 && count(text, "acc_rescale_sum(") == 4) {
      if (example.empty()) example = text;
      ++split_kv;
    }
  ASSERT_GT(split_kv, 0);
  // Its combine loops over the splits of all three partial results.
  EXPECT_EQ(count(example, "fmap=2)"), 4) << example;  // K's keys, then the three partial results' splits
}

// A split-KV form whose grid leaves each head's rows whole stacks its partial results along the last free dim, not
// along the rows: its combine can then give every row its own block and walk the splits (along the rows, the
// splits would be the rows' outer part, which no combine grid cuts row by row).
TEST(Search, SplitKvWithWholeRowsCombinesRowByRow) {
  int row_combines = 0, rows_stacked = 0;
  for (const std::string& text : attention_heads_candidates()) {
    if (count(text, "= block(") != 2 || count(text, "iter(Q, imap=[0,-,-])") != 1 ||
        count(text, "iter(K, imap=[0,2,-], fmap=2)") != 1)
      continue;
    rows_stacked += count(text, "omap=[0,1,-])") >= 3 && count(text, "save(") == 4;
    row_combines += count(text, "omap=[0,2,-])") == 3 && count(text, "grid=[8,64,1]") == 1;
  }
  EXPECT_GT(row_combines, 0);
  EXPECT_EQ(rows_stacked, 0);
}

// A split-KV block may take its part of the keys in one iteration: the loop's block graph without the loop (no
// fmap), which the generator offered only with loops of 2 and more (qknorm_h8_d128_k1024: 10.7 us on the H100 in
// one iteration against the 13.9 of the two-kernel form found instead).
TEST(Search, SplitKvBlocksAlsoTakeTheirPartInOneIteration) {
  int found = 0;
  std::string example;
  for (const std::string& text : attention_heads_candidates())
    if (count(text, "= block(") == 2 && count(text, "iter(K, imap=[0,-,2])") == 1 && count(text, "fmap=") == 3 &&
        count(text, "acc_rescale_sum(") == 4 && count(text, "acc_max(") == 1) {
      if (example.empty()) example = text;
      ++found;
    }
  ASSERT_GT(found, 0);
  EXPECT_EQ(count(example, "loop=1 {"), 1) << example;  // the split block; its combine loops over the splits
}

// LoRA's concat form, (X‖XA)·(W;B) = XW + (XA)B: one matmul over the joined K‖R axis instead of two (issue 14
// item 6). The generator builds it in one kernel (XA computed in every block; the two-kernel form of
// examples/mugraphs/lora_concat.mg reads X again after the kernel that made XA, which the generator's last op never
// does), and each form it emits passes the exact check. The cost model prices it as the lowering builds it (the sum
// of the pieces' products, ir::with_contracted_concats_split), so it costs what its twin among the sums of products
// costs (its statements come in another order: 3.62 us on the H100 against the twin's 3.94, which --measure sees).
TEST(Search, GeneratesLorasConcatForm) {
  const ir::Graph s = spec("lora_small");
  Generator gen(s, h200(), small());
  std::atomic<bool> stop{false};
  std::vector<Candidate> concat;
  size_t all = 0;
  for (size_t task = 0; task < gen.num_tasks(); ++task) {
    GenStats stats;
    gen.explore(task, stats, [&](Candidate&& c) {
      ++all;
      if (count(ir::print(c.graph), "concat(") == 2) concat.push_back(std::move(c));
    }, stop);
  }
  ASSERT_FALSE(concat.empty()) << "of " << all << " candidates";
  for (const Candidate& c : concat) {
    const std::string text = ir::print(c.graph);
    EXPECT_EQ(count(text, "= block("), 1) << text;
    EXPECT_EQ(count(text, "matmul("), 2) << "XA, then the one product over K‖R\n" << text;
    EXPECT_EQ(count(text, "dim=0)") + count(text, "dim=1)"), 2) << text;
  }
  std::sort(concat.begin(), concat.end(), [](const Candidate& a, const Candidate& b) { return a.cost_us < b.cost_us; });
  for (size_t i = 0; i < concat.size() && i < 4; ++i)
    EXPECT_TRUE(verify::equivalent(s, concat[i].graph, {2, 11, true}).equivalent()) << ir::print(concat[i].graph);
  std::printf("%zu concat forms of %zu candidates; cheapest %.2f us:\n%s", concat.size(), all, concat[0].cost_us,
              ir::print(concat[0].graph).c_str());
}

TEST(Search, ThreadCountDoesNotChangeTheAnswer) {
  SearchResult one = search(spec("gated_mlp_small"), h200(), small(1));
  SearchResult two = search(spec("gated_mlp_small"), h200(), small(2));
  ASSERT_TRUE(one.found());
  EXPECT_EQ(one.top, two.top);
  EXPECT_EQ(one.stats.states, two.stats.states);
  EXPECT_EQ(one.stats.pruned, two.stats.pruned);
}

TEST(Search, ShardsSplitTheTasks) {
  SearchResult whole = search(spec("gated_mlp_small"), h200(), small());
  uint64_t tasks = 0, states = 0;
  double best = INFINITY;
  for (int i = 0; i < 4; ++i) {
    SearchOptions o = small();
    o.shard = {i, 4};
    SearchResult part = search(spec("gated_mlp_small"), h200(), o);
    tasks += part.stats.tasks_total;
    states += part.stats.states;
    if (part.found()) best = std::min(best, part.top[0].cost_us);
  }
  EXPECT_EQ(tasks, whole.stats.tasks_total);
  EXPECT_EQ(states, whole.stats.states);
  ASSERT_TRUE(whole.found());
  EXPECT_EQ(best, whole.top[0].cost_us);
}

TEST(Search, AbstractPruningCutsTheSpace) {
  // The same space (one kernel, block graphs of four ops) with and without the sub-expression check.
  SearchOptions on = small(), off = small();
  on.max_kernel_ops = off.max_kernel_ops = 1;
  on.max_block_ops = off.max_block_ops = 4;
  off.abstract_pruning = false;
  off.top = 0;
  SearchResult a = search(spec("rmsnorm_linear_small"), h200(), on);
  SearchResult b = search(spec("rmsnorm_linear_small"), h200(), off);
  ASSERT_TRUE(a.found());
  EXPECT_FALSE(b.stats.timed_out);
  EXPECT_GT(b.stats.states, 5 * a.stats.states) << a.stats.states << " with, " << b.stats.states << " without";
}

TEST(Search, RejectsABadShard) {
  SearchOptions o = small();
  o.shard = {4, 4};
  EXPECT_THROW(search(spec("gated_mlp_small"), h200(), o), UserError);
}

}  // namespace
}  // namespace morgana::search
