// What `optimize --measure` times (frontend/measure.h): the best-ranked candidate of each form first, then the next
// best, in rank order; and how a measurement reorders the result.
#include <gtest/gtest.h>

#include <string>

#include "frontend/measure.h"

namespace morgana::frontend {
namespace {

// A one-block-op candidate whose block exps (and, with `scale`, scales) its tile; `grid` blocks split the rows.
std::string blocked(int grid, bool scale = false) {
  return "kernel k(X: f16[64,64]) {\n"
         "  Y = block(X) grid=[" + std::to_string(grid) + ",1,1] threads=128 loop=1 {\n"
         "    x = iter(X, imap=[0,-,-])\n"
         "    e = exp(x)\n" +
         std::string(scale ? "    f = mul_scalar(e, s=2)\n    a = acc_sum(f)\n" : "    a = acc_sum(e)\n") +
         "    save(a, omap=[0,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

const char* const kPredefined = "kernel k(X: f16[64,64]) {\n  Y = exp(X)\n  return Y\n}\n";

search::SearchResult ranked(const std::vector<std::string>& mugraphs) {
  search::SearchResult r;
  double cost = 10;
  for (const std::string& g : mugraphs) r.top.push_back(search::RankedCandidate{g, 0, cost++, "", ""});
  return r;
}

TEST(Measure, FormsIgnoreGridsButNotOps) {
  EXPECT_EQ(candidate_form(blocked(2)), candidate_form(blocked(8)));
  EXPECT_NE(candidate_form(blocked(2)), candidate_form(blocked(2, true)));
  // The same ops in another order, or accumulated otherwise, are the same form.
  const std::string reordered = "kernel k(X: f16[64,64]) {\n"
                                "  Y = block(X) grid=[2,1,1] threads=128 loop=2 {\n"
                                "    x = iter(X, imap=[0,-,-], fmap=1)\n"
                                "    f = mul_scalar(x, s=2)\n"
                                "    e = exp(f)\n"
                                "    a = acc_max(e)\n"
                                "    save(a, omap=[0,-,-])\n"
                                "  }\n"
                                "  return Y\n"
                                "}\n";
  EXPECT_EQ(candidate_form(reordered), candidate_form(blocked(4, true)));
  EXPECT_NE(candidate_form(blocked(2)), candidate_form(kPredefined));
}

TEST(Measure, FinalistsAreEachFormsBestThenTheNextBest) {
  // Ranks 1-3 are one form, 4 and 5 two others. Half the finalists (rounded up) at most go to forms' best.
  const search::SearchResult r = ranked({blocked(2), blocked(4), blocked(8), kPredefined, blocked(2, true)});
  EXPECT_EQ(choose_finalists(r, 1), (std::vector<int>{0}));
  EXPECT_EQ(choose_finalists(r, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(choose_finalists(r, 3), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(choose_finalists(r, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(choose_finalists(r, 5), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(choose_finalists(r, 9), (std::vector<int>{0, 1, 2, 3, 4}));
  // qknorm_h8_d128_k1024's shape: six variants of one form ranked first, another form 7th; five finalists.
  const search::SearchResult q =
      ranked({blocked(2), blocked(4), blocked(8), blocked(16), blocked(32), blocked(64), kPredefined});
  EXPECT_EQ(choose_finalists(q, 5), (std::vector<int>{0, 1, 2, 3, 6}));
}

TEST(Measure, TheChosenCandidateMovesToTheFront) {
  search::SearchResult r = ranked({blocked(2), blocked(4), blocked(8), kPredefined, blocked(2, true)});
  Measurement m;
  for (int rank : {1, 4, 5}) {
    MeasuredCandidate c;
    c.rank = rank;
    c.ok = true;
    c.median_us = rank == 4 ? 1.0 : 2.0;
    m.rows.push_back(c);
  }
  m.chosen = 1;  // rows[1]: rank 4
  m.device = "a GPU";
  m.target = "h100";
  EXPECT_NE(render_measurement(m).find("chosen: candidate 4 (1.00 us measured) over the cost model's first (2.00 us"),
            std::string::npos)
      << render_measurement(m);
  apply_measurement(m, r);
  EXPECT_EQ(r.top[0].mugraph, kPredefined);
  EXPECT_EQ(r.top[1].mugraph, blocked(2));
  EXPECT_EQ(r.top[4].mugraph, blocked(2, true));
}

}  // namespace
}  // namespace morgana::frontend
