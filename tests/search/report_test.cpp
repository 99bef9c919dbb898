// The report and the progress line (search/report.h). The reports are golden files under tests/golden/search/
// (MORGANA_BLESS=1 rewrites them); the progress line is short enough to state inline. Runs from the source
// root.
#include <gtest/gtest.h>

#include "search/report.h"
#include "tests/common/golden.h"
#include "tests/search/synthetic_results.h"

namespace morgana::search {
namespace {

const std::string kGolden = "tests/golden/search/";

TEST(ReportGolden, AFinishedSearch) {
  SearchResult r = testing::shard_result(0, 1);
  r.top.push_back(testing::candidate(5, 40.125, testing::kMatmulSpec));
  morgana::testing::expect_golden(kGolden + "report_found.txt", render_report(r, false));
}

TEST(ReportGolden, AShardCutShortThatFoundNothing) {
  SearchResult r = testing::shard_result(2, 4);
  r.top.clear();
  r.stats.timed_out = true;
  r.options.time_limit_s = 0.5;
  r.options.abstract_pruning = false;
  morgana::testing::expect_golden(kGolden + "report_timed_out.txt", render_report(r, false));
}

TEST(Report, SaysWhenTheTimeLimitLeftPlacesUnverified) {
  SearchResult r = testing::shard_result(0, 1);
  r.options.time_limit_s = 30;
  r.stats.unverified_for_time = 3;
  std::string out = render_report(r, false);
  EXPECT_NE(out.find("warning: the time limit (30 s) came before the checks of 3 more candidates: the best passed "
                     "every check, the list below is shorter than --top (this result is not cached)\n"),
            std::string::npos)
      << out;
}

TEST(Report, TimingOnlyWhenAskedFor) {
  SearchResult r = testing::shard_result(0, 1);
  std::string with = render_report(r, true), without = render_report(r, false);
  EXPECT_NE(with.find("\n  time 1.50 s (verification 0.50 s)\n"), std::string::npos) << with;
  EXPECT_EQ(without.find("time"), std::string::npos) << without;
}

TEST(Report, SummaryLine) {
  SearchResult r = testing::shard_result(1, 4);
  EXPECT_EQ(render_summary(r), "h200: best 11.00 us, 2 verified of 6 complete, 2000 states");
  r.top.clear();
  r.stats.timed_out = true;
  EXPECT_EQ(render_summary(r), "h200: no verified μGraph, 2 verified of 6 complete, 2000 states, cut short by the "
                               "time limit");
}

TEST(Report, ProgressLine) {
  Progress p;
  p.states = 1234567;
  p.pruned = 912345;
  p.complete = 12;
  p.verified = 3;
  p.tasks_done = 17;
  p.tasks_total = 40;
  p.best_cost_us = 41.3;
  p.elapsed_s = 12.34;
  EXPECT_EQ(render_progress("h200", p),
            "search h200: 1.2M states, 912.3k pruned, 12 complete, tasks 17/40, 12.3 s");
  EXPECT_EQ(render_progress("a100", Progress{}), "search a100: 0 states, 0 pruned, 0 complete, tasks 0/0, 0.0 s");
  // After the enumeration the line says the candidates are being checked (most of many searches' time).
  p.verifying = true;
  p.rejected = 1;
  EXPECT_EQ(render_progress("h200", p),
            "search h200: checking candidates, 3 verified, 1 rejected, best 41.30 us (of 12 complete), 12.3 s");
  p.verified = 0;
  p.best_cost_us = 0;
  EXPECT_EQ(render_progress("h200", p),
            "search h200: checking candidates, 0 verified, 1 rejected, best - (of 12 complete), 12.3 s");
}

TEST(Report, CompactCounts) {
  EXPECT_EQ(compact_count(999), "999");
  EXPECT_EQ(compact_count(1000), "1.0k");
  EXPECT_EQ(compact_count(999949), "999.9k");
  EXPECT_EQ(compact_count(999950), "1.0M");
  EXPECT_EQ(compact_count(4500000000ull), "4.5G");
  EXPECT_EQ(compact_count(UINT64_MAX), "18.4E");
}

}  // namespace
}  // namespace morgana::search
