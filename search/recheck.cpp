#include "search/recheck.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <thread>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "search/cost_model.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"

namespace morgana::search {

namespace {

struct Read {
  ir::Graph graph;
  bool is_spec = false;
  RankedCandidate ranked;  // as it will be written back: printed and priced here
  size_t rank = 0;         // 1-based, in the file
};

std::string candidate_name(size_t rank) {
  return "candidate " + std::to_string(rank);
}

// Parses and prices every candidate of `result`, cheapest first (stable: ties keep the file's order). Returns "" or
// what is wrong. Cheap next to any check, so a damaged candidate fails before a check runs.
std::string read_candidates(const std::string& canonical_spec, const targets::Target& target,
                            const SearchResult& result, std::vector<Read>& read, size_t* failed) {
  if (result.spec != canonical_spec) return "it was searched for another spec";
  if (result.target != target.identity.name) return "it was searched for target " + result.target;
  for (size_t i = 0; i < result.top.size(); ++i) {
    Read r;
    r.rank = i + 1;
    if (failed) *failed = r.rank;  // until it has passed
    try {
      ir::Module m = ir::parse_module(result.top[i].mugraph, candidate_name(r.rank));
      if (m.programs.size() != 1) return candidate_name(r.rank) + " does not hold one program";
      r.graph = std::move(m.programs[0]);
    } catch (const UserError& e) {
      return candidate_name(r.rank) + " does not parse: " + e.render();
    }
    r.is_spec = ir::print(r.graph) == canonical_spec;
    const Cost cost = estimate(r.graph, target);
    if (!cost.feasible()) return candidate_name(r.rank) + " cannot run on " + target.identity.name + ": " + cost.str();
    r.ranked = result.top[i];
    // The file's hash stays: it is the search's tie-break between equal costs, and a wrong one can only reorder ties.
    r.ranked.mugraph = ir::print(r.graph);
    r.ranked.cost_us = cost.total_us;
    r.ranked.cost = cost.str();
    read.push_back(std::move(r));
  }
  if (failed) *failed = 0;
  std::stable_sort(read.begin(), read.end(),
                   [](const Read& a, const Read& b) { return a.ranked.cost_us < b.ranked.cost_us; });
  return "";
}

}  // namespace

std::string reprice_result(const ir::Graph& spec, const targets::Target& target, SearchResult& result) {
  std::vector<Read> read;
  if (std::string problem = read_candidates(ir::print(spec), target, result, read, nullptr); !problem.empty())
    return problem;
  for (size_t i = 0; i < read.size(); ++i) result.top[i] = std::move(read[i].ranked);
  return "";
}

std::string recheck_result(const ir::Graph& spec, const targets::Target& target, SearchResult& result,
                           const RecheckOptions& options, size_t* failed) {
  if (failed) *failed = 0;
  std::vector<Read> read;
  if (std::string problem = read_candidates(ir::print(spec), target, result, read, failed); !problem.empty())
    return problem;
  if (!options.keep_others && read.size() > 1) read.resize(1);

  const verify::EquivalenceOptions cheap = cheap_check(result.options), full = full_check(result.options);
  // The best gets the full exact check (every output element), which holds the cheap one (a sample of them) that
  // the search ran first only as a filter: on qknorm_b8 the cheap check alone is 6 s of a hit's 17. The others get
  // the cheap one. The checks are independent: a few at a time on their own threads, the longest first.
  std::vector<std::pair<size_t, bool>> jobs;  // (candidate, full?)
  for (size_t i = 0; i < read.size(); ++i)
    if (!read[i].is_spec) jobs.push_back({i, i == 0});
  const size_t window = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::optional<verify::Verdict>> cheap_verdict(read.size()), full_verdict(read.size());
  for (size_t from = 0; from < jobs.size(); from += window) {
    const size_t to = std::min(jobs.size(), from + window);
    std::vector<std::future<verify::Verdict>> running;
    for (size_t k = from; k < to; ++k)
      running.push_back(std::async(std::launch::async, [&, k] {
        return verify::equivalent(spec, read[jobs[k].first].graph, jobs[k].second ? full : cheap);
      }));
    for (size_t k = from; k < to; ++k)
      (jobs[k].second ? full_verdict : cheap_verdict)[jobs[k].first] = running[k - from].get();
  }

  std::unique_ptr<verify::FloatReference> float_ref;  // the spec's side, made once
  for (size_t i = 0; i < read.size(); ++i) {
    Read& r = read[i];
    if (r.is_spec) {
      r.ranked.verification = kSpecAsWritten;
      continue;
    }
    for (const auto* v : {&cheap_verdict[i], &full_verdict[i]})
      if (*v && !(*v)->equivalent()) {
        if (failed) *failed = r.rank;
        return candidate_name(r.rank) + " fails the " + ((*v)->sampled ? "cheap" : "full") +
               " exact check: " + (*v)->str();
      }
    // Only now: the float check's interpreters take the spec's interface for granted, which the exact check has
    // just confirmed.
    if (!float_ref)
      float_ref = std::make_unique<verify::FloatReference>(
          spec, verify::FloatCheckOptions{.seed = result.options.seed, .sampled = true});
    const verify::FloatCheck fc = float_ref->check(r.graph);
    if (!fc.pass) {
      if (failed) *failed = r.rank;
      return candidate_name(r.rank) + " fails the float check: " + fc.message;
    }
    char buf[200];
    if (full_verdict[i])
      std::snprintf(buf, sizeof buf, "full exact 1 trial; float check max error %.3g of tolerance", fc.error);
    else
      std::snprintf(buf, sizeof buf, "cheap exact %d trials; float check max error %.3g of tolerance", cheap.trials,
                    fc.error);
    r.ranked.verification = std::string(buf) + " (checked again when read back)";
  }
  result.top.clear();
  for (Read& r : read) result.top.push_back(std::move(r.ranked));
  return "";
}

}  // namespace morgana::search
