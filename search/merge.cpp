// merge_results (search.h): the shards of one search, combined into what the unsharded search returns. Each
// shard ran the tasks i mod n and kept its best `top`, so the best `top` of the union of their lists is the
// best `top` overall; the counters add up and the wall clock is that of the slowest shard.
#include <algorithm>
#include <set>

#include "ir/diagnostic.h"
#include "search/cache.h"
#include "search/search.h"

namespace morgana::search {

namespace {

std::string shard_name(const SearchResult& r) {
  return "shard " + std::to_string(r.options.shard.index) + "/" + std::to_string(r.options.shard.count);
}

// Throws unless `r` is a shard of the same search as `first`.
void check_same_search(const SearchResult& first, const SearchResult& r) {
  auto differ = [&](const std::string& what) {
    throw UserError("cannot merge " + shard_name(r) + " with " + shard_name(first) + ": they differ in " +
                    what + " (shards of one search share everything but the shard index)");
  };
  if (r.target != first.target) differ("target (" + r.target + " vs " + first.target + ")");
  if (r.spec != first.spec) differ("spec");
  SearchOptions a = answer_options(r.options), b = answer_options(first.options);
  a.shard.index = b.shard.index;
  if (a.shard.count != b.shard.count)
    differ("shard count (" + std::to_string(a.shard.count) + " vs " + std::to_string(b.shard.count) + ")");
  if (a != b) differ("search options");
  // The key also covers the target file's content and morgana's version.
  if (unsharded_key(r.key) != unsharded_key(first.key))
    differ("cache key (another morgana version or another content of the target file)");
}

}  // namespace

SearchResult merge_results(const std::vector<SearchResult>& shards) {
  if (shards.empty()) throw UserError("nothing to merge: no shard results");
  const SearchResult& first = shards.front();
  for (const SearchResult& r : shards) check_same_search(first, r);
  // In index order, so that the merged result does not depend on the order the files were given in.
  const int count = first.options.shard.count;
  std::vector<const SearchResult*> by_index(static_cast<size_t>(count), nullptr);
  for (const SearchResult& r : shards) {
    int i = r.options.shard.index;
    MG_CHECK(i >= 0 && i < count, "shard index out of range in a result");  // read_result checks this
    if (by_index[static_cast<size_t>(i)])
      throw UserError("shard " + std::to_string(i) + "/" + std::to_string(count) + " of target " +
                      first.target + " is given twice");
    by_index[static_cast<size_t>(i)] = &r;
  }
  std::string missing;
  for (int i = 0; i < count; ++i)
    if (!by_index[static_cast<size_t>(i)]) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
  if (!missing.empty())
    throw UserError("the search for target " + first.target + " has " + std::to_string(count) +
                    " shards but shard(s) " + missing + " of them are missing");

  const SearchResult& zero = *by_index[0];
  SearchResult m;
  m.spec = zero.spec;
  m.target = zero.target;
  m.key = unsharded_key(zero.key);
  m.options = zero.options;
  m.options.shard = {};
  std::set<uint64_t> hashes;
  for (const SearchResult* r : by_index) {
    for (const RankedCandidate& c : r->top)
      if (hashes.insert(c.hash).second) m.top.push_back(c);
    SearchStats& s = m.stats;
    s.states += r->stats.states;
    for (const auto& [rule, n] : r->stats.pruned) s.pruned[rule] += n;
    s.complete += r->stats.complete;
    s.verified += r->stats.verified;
    s.rejected += r->stats.rejected;
    s.tasks_total += r->stats.tasks_total;
    s.tasks_done += r->stats.tasks_done;
    s.seconds = std::max(s.seconds, r->stats.seconds);
    s.verify_seconds = std::max(s.verify_seconds, r->stats.verify_seconds);
    s.timed_out = s.timed_out || r->stats.timed_out;
    s.unverified_for_time += r->stats.unverified_for_time;  // nonzero: some shard's list was cut (below: by how much)
  }
  std::sort(m.top.begin(), m.top.end(), [](const RankedCandidate& a, const RankedCandidate& b) {
    return a.cost_us != b.cost_us ? a.cost_us < b.cost_us : a.hash < b.hash;
  });
  if (m.top.size() > static_cast<size_t>(std::max(0, m.options.top)))
    m.top.resize(static_cast<size_t>(m.options.top));
  if (m.stats.unverified_for_time)
    m.stats.unverified_for_time = static_cast<uint64_t>(std::max(0, m.options.top - static_cast<int>(m.top.size())));
  return m;
}

}  // namespace morgana::search
