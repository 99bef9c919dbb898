#include "search/report.h"

#include <cstdio>

#include "ir/parser.h"
#include "ir/printer.h"

namespace morgana::search {

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Kernel launches of a μGraph.
size_t kernel_count(const ir::Graph& g) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes()) n += ir::launches_kernel(g, node);
  return n;
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

std::string with_newline(const std::string& s) {
  return s.empty() || s.back() == '\n' ? s : s + "\n";
}

std::string counts(const SearchStats& s) {
  uint64_t pruned = 0;
  std::string by_rule;
  for (const auto& [rule, n] : s.pruned) {
    pruned += n;
    by_rule += (by_rule.empty() ? "" : ", ") + rule + " " + std::to_string(n);
  }
  std::string out = "  states " + std::to_string(s.states) + ", complete " + std::to_string(s.complete) +
                    ", verified " + std::to_string(s.verified) + ", rejected " + std::to_string(s.rejected) +
                    ", tasks " + std::to_string(s.tasks_done) + "/" + std::to_string(s.tasks_total) + "\n";
  out += "  pruned " + std::to_string(pruned) + (by_rule.empty() ? "" : " (" + by_rule + ")") + "\n";
  return out;
}

std::string options_line(const SearchOptions& o) {
  return "  options: kernel ops <= " + std::to_string(o.max_kernel_ops) + ", block ops <= " +
         std::to_string(o.max_block_ops) + ", top " + std::to_string(o.top) + ", " +
         std::to_string(o.trials) + " trials, seed " + std::to_string(o.seed) +
         (o.abstract_pruning ? "" : ", abstract pruning off") + "\n";
}

std::string candidates_table(const std::vector<RankedCandidate>& top, const std::string& where) {
  char row[160];
  std::snprintf(row, sizeof row, "  %4s  %10s  %7s  %s\n", "rank", "cost (us)", "kernels", "verification");
  std::string out = row;
  for (size_t i = 0; i < top.size(); ++i) {
    const RankedCandidate& c = top[i];
    size_t kernels = kernel_count(
        ir::parse_module(c.mugraph, where + ", candidate " + std::to_string(i + 1)).programs.at(0));
    std::snprintf(row, sizeof row, "  %4zu  %10s  %7zu  ", i + 1, fixed(c.cost_us, 2).c_str(), kernels);
    out += row + first_line(c.verification) + "\n";
  }
  return out;
}

}  // namespace

std::string compact_count(uint64_t n) {
  if (n < 1000) return std::to_string(n);
  const char* units = "kMGTPE";
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 999.95 && u < 5) {
    v /= 1000;
    ++u;
  }
  return fixed(v, 1) + units[u];
}

std::string render_report(const SearchResult& r, bool with_timing) {
  const std::string where = "search result for " + r.target;
  const ir::Module spec = ir::parse_module(r.spec, where + ", spec");
  std::string name = spec.programs.empty() ? "?" : spec.programs[0].name();
  std::string out = "search " + name + " for " + r.target;
  if (r.options.shard.count > 1)
    out += " (shard " + std::to_string(r.options.shard.index) + "/" + std::to_string(r.options.shard.count) +
           ")";
  out += "\n" + options_line(r.options) + counts(r.stats);
  if (with_timing)
    out += "  time " + fixed(r.stats.seconds, 2) + " s (verification " + fixed(r.stats.verify_seconds, 2) + " s)\n";
  if (r.stats.timed_out)
    out += "warning: the time limit (" + ir::format_number(r.options.time_limit_s) +
           " s) cut the search short: a longer one may find a faster μGraph (this result is not cached)\n";
  if (r.stats.unverified_for_time)
    out += "warning: the time limit (" + ir::format_number(r.options.time_limit_s) + " s) came before the checks of " +
           std::to_string(r.stats.unverified_for_time) + " more candidate" +
           (r.stats.unverified_for_time == 1 ? "" : "s") +
           ": the best passed every check, the list below is shorter than --top (this result is not cached)\n";
  if (!r.found()) return out + "no verified μGraph found\n";
  out += "top " + std::to_string(r.top.size()) + " candidate" + (r.top.size() == 1 ? "" : "s") + ":\n";
  out += candidates_table(r.top, where);
  out += "best μGraph (" + fixed(r.top[0].cost_us, 2) + " us):\n" + with_newline(r.top[0].mugraph);
  return out + "cost breakdown:\n" + with_newline(r.top[0].cost);
}

std::string render_summary(const SearchResult& r) {
  return r.target + ": " + (r.found() ? "best " + fixed(r.top[0].cost_us, 2) + " us" : "no verified μGraph") + ", " +
         std::to_string(r.stats.verified) + " verified of " + std::to_string(r.stats.complete) + " complete, " +
         std::to_string(r.stats.states) + " states" + (r.stats.timed_out ? ", cut short by the time limit" : "");
}

std::string render_progress(const std::string& target, const Progress& p) {
  std::string best = "best " + (p.best_cost_us > 0 ? fixed(p.best_cost_us, 2) + " us" : std::string("-"));
  std::string elapsed = fixed(p.elapsed_s, 1) + " s";
  // Verification is most of many searches' time: say it is happening and how far it got.
  if (p.verifying)
    return "search " + target + ": checking candidates, " + compact_count(p.verified) + " verified, " +
           compact_count(p.rejected) + " rejected, " + best + " (of " + compact_count(p.complete) + " complete), " +
           elapsed;
  return "search " + target + ": " + compact_count(p.states) + " states, " + compact_count(p.pruned) + " pruned, " +
         compact_count(p.complete) + " complete, tasks " + std::to_string(p.tasks_done) + "/" +
         std::to_string(p.tasks_total) + ", " + elapsed;
}

}  // namespace morgana::search
