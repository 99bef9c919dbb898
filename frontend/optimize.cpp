#include "frontend/optimize.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "frontend/files.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "search/cache.h"
#include "search/recheck.h"
#include "search/report.h"
#include "search/result_io.h"

namespace morgana::frontend {

namespace {

// The progress line is redrawn in place; more than a few redraws a second only costs terminal time.
constexpr auto kProgressInterval = std::chrono::milliseconds(200);

// Clears the progress line however the search ends (an exception included), so an error message starts on a
// clean line.
struct ProgressLine {
  const std::function<void(const std::string&)>& show;
  ~ProgressLine() {
    if (show) show("");
  }
};

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

Optimized optimize_for(const ir::Graph& spec, const targets::Target& target, const OptimizeOptions& options) {
  // The key and the result files hold the spec without a target list: the list says where a program is used,
  // not what it computes.
  ir::Graph plain = spec;
  plain.set_for_targets({});
  const std::string canonical = ir::print(plain);
  const std::string key = search::cache_key(canonical, target, options.search);
  if (options.use_cache)
    if (std::optional<search::SearchResult> hit = search::cache_lookup(key)) {
      // Whoever can write the cache folder could have written this entry, checksum and all: it is checked as the
      // search checked it before it is believed (search/recheck.h).
      std::string problem =
          search::recheck_result(plain, target, *hit, {.keep_others = options.keep_cached_candidates});
      if (problem.empty()) return {std::move(*hit), true};
      std::cerr << "morgana: warning: the cached result for " << target.identity.name
                << " failed its re-verification and was removed (" << problem << "); searching again\n";
      search::cache_discard(key);
    }

  search::ProgressFn on_progress;
  std::chrono::steady_clock::time_point last{};
  if (options.progress)
    on_progress = [&](const search::Progress& p) {
      auto now = std::chrono::steady_clock::now();
      if (now - last < kProgressInterval) return;
      last = now;
      options.progress(search::render_progress(target.identity.name, p));
    };
  Optimized o;
  {
    ProgressLine line{options.progress};
    o.result = search::search(plain, target, options.search, on_progress);
  }
  o.result.spec = canonical;
  o.result.target = target.identity.name;
  o.result.key = key;
  o.result.options = options.search;
  if (options.use_cache) search::cache_store(o.result);
  return o;
}

search::Shard parse_shard(const std::string& text, const std::string& option) {
  auto number = [&](std::string_view s, int& v) {
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  size_t slash = text.find('/');
  search::Shard s;
  if (slash == std::string::npos || !number(std::string_view(text).substr(0, slash), s.index) ||
      !number(std::string_view(text).substr(slash + 1), s.count) || s.count < 1 || s.index < 0 ||
      s.index >= s.count)
    throw UserError(option + " needs i/n (shard i of n, 0 <= i < n, e.g. " + option + " 0/4), not '" + text +
                    "'");
  return s;
}

std::string best_mugraphs(const std::vector<search::SearchResult>& results) {
  struct Group {
    std::string text;  // the μGraph without a target list, to find identical ones
    ir::Graph graph;
    std::vector<const search::SearchResult*> results;
  };
  std::vector<Group> groups;
  for (const search::SearchResult& r : results) {
    MG_CHECK(r.found(), "best_mugraphs of a search that found nothing");
    ir::Graph g = std::move(ir::parse_module(r.top[0].mugraph, "best μGraph for " + r.target).programs.at(0));
    g.set_for_targets({});
    std::string text = ir::print(g);
    auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.text == text; });
    if (same == groups.end()) {
      groups.push_back({text, std::move(g), {}});
      same = groups.end() - 1;
    }
    same->results.push_back(&r);
  }
  std::string out;
  for (Group& grp : groups) {
    std::string costs;
    std::vector<std::string> targets;
    for (const search::SearchResult* r : grp.results) {
      costs += (costs.empty() ? "" : ", ") + fixed2(r->top[0].cost_us) + " us on " + r->target;
      targets.push_back(r->target);
    }
    if (!out.empty()) out += "\n";
    out += "# best μGraph found by morgana " MORGANA_VERSION " optimize; estimated " + costs + "\n";
    // Always the targets it was searched for, however many: `morgana compile` of the file then builds for exactly
    // those (a μGraph sized for an h100's shared memory need not fit an a100's).
    grp.graph.set_for_targets(targets);
    out += ir::print(grp.graph);
  }
  return out;
}

std::string targets_without_result(const std::vector<search::SearchResult>& results) {
  std::string missing;
  for (const search::SearchResult& r : results)
    if (!r.found()) missing += (missing.empty() ? "" : ", ") + r.target;
  return missing;
}

std::vector<search::SearchResult> merge_shard_files(const std::vector<std::string>& files,
                                                   const std::filesystem::path& targets_dir, const ir::Graph* spec) {
  std::vector<ShardText> texts;
  for (const std::string& f : files) texts.push_back({f, read_text_file(f)});
  return merge_shards(texts, targets_dir, spec);
}

std::vector<search::SearchResult> merge_shards(const std::vector<ShardText>& texts,
                                              const std::filesystem::path& targets_dir, const ir::Graph* spec) {
  const std::string expected = spec ? ir::print(*spec) : "";
  std::vector<std::string> order;  // targets, as they first appear
  std::map<std::string, std::vector<search::SearchResult>> shards;
  std::map<std::string, std::vector<std::string>> names;  // target -> its files, in the order of `shards`
  for (const ShardText& shard : texts) {
    const std::string& f = shard.name;
    search::SearchResult r = search::read_result(shard.text, f);
    if (spec && r.spec != expected)
      throw UserError("this result was searched for another spec than the one --spec gives", {f, 0, 0});
    if (!shards.count(r.target)) order.push_back(r.target);
    names[r.target].push_back(f);
    shards[r.target].push_back(std::move(r));
  }
  auto file_list = [&](const std::string& t) {
    std::string list;
    for (const std::string& f : names[t]) list += (list.empty() ? "" : ", ") + f;
    return list;
  };
  auto merge = [&](const std::string& t) {
    try {
      return search::merge_results(shards[t]);
    } catch (const UserError& e) {
      throw UserError(e.message() + " (the files for " + t + ": " + file_list(t) + ")");
    }
  };
  std::vector<search::SearchResult> merged;
  for (const std::string& t : order) {
    merge(t);  // a missing, repeated or foreign shard is refused before anything else
    const targets::Target target = targets::find_target(t, targets_dir);
    // Shard files come back from a cluster's job runner: nothing in them is believed (search/recheck.h). Each
    // shard's candidates are priced here, the union cut to the best few by those prices, and the few checked as the
    // search checks what it keeps, the best with the full exact check. The spec is the one the files hold
    // (merge_results has made sure they hold one); --spec ties it to the user's.
    const ir::Graph files_spec =
        std::move(ir::parse_module(shards[t].front().spec, names[t].front() + " (its spec)").programs.at(0));
    for (size_t i = 0; i < shards[t].size(); ++i)
      if (std::string problem = search::reprice_result(files_spec, target, shards[t][i]); !problem.empty())
        throw UserError("the shard's result cannot be used: " + problem +
                            " (was the file edited or damaged? search that shard again)",
                        {names[t][i], 0, 0});
    search::SearchResult m = merge(t);
    size_t failed = 0;
    if (std::string problem = search::recheck_result(files_spec, target, m, {}, &failed); !problem.empty()) {
      std::string file = file_list(t);  // the candidate's own file where it is known
      for (size_t i = 0; failed && i < shards[t].size(); ++i)
        for (const search::RankedCandidate& c : shards[t][i].top)
          if (c.mugraph == m.top.at(failed - 1).mugraph) file = names[t][i];
      throw UserError("the shard's result fails its re-verification: " + problem +
                          " (was the file edited or damaged? search that shard again)",
                      {file, 0, 0});
    }
    merged.push_back(std::move(m));
  }
  return merged;
}

}  // namespace morgana::frontend
