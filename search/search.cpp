#include "search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <unordered_set>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "search/cost_model.h"
#include "search/generator.h"
#include "search/input_views.h"
#include "search/partial_fusion.h"
#include "search/pool.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"

namespace morgana::search {

namespace {

// Candidates one task keeps (its cheapest): enough that a few failing verification still leave the best.
constexpr size_t kKeepPerTask = 64;

bool cheaper(const Candidate& a, const Candidate& b) {
  return a.cost_us != b.cost_us ? a.cost_us < b.cost_us : a.hash < b.hash;
}

// The cheapest kKeepPerTask candidates of one task, in (cost, hash) order, and what a new candidate must beat
// to be kept (the generator reads it through bound_ptr() and prunes prefixes that cost more).
class TaskBest {
 public:
  void add(Candidate&& c) {
    if (best_.size() == kKeepPerTask && !cheaper(c, best_.back())) return;
    auto at = std::lower_bound(best_.begin(), best_.end(), c, cheaper);
    if (at != best_.end() && at->hash == c.hash) return;
    best_.insert(at, std::move(c));
    if (best_.size() > kKeepPerTask) best_.pop_back();
    if (best_.size() == kKeepPerTask) bound_ = best_.back().cost_us;
  }
  std::vector<Candidate>& items() { return best_; }
  const double* bound_ptr() const { return &bound_; }

 private:
  std::vector<Candidate> best_;
  double bound_ = INFINITY;
};

// The (kernel ops, block ops) limits of the deepening passes: with one kernel op, block graphs of 6, 8, 10, ... ops
// and finally the maximum; then the maximum block ops with every larger kernel-op count. The one-kernel-op passes are
// cheap (QKNorm: 2.7 s for all four together, single-threaded) and give an answer early; deepening the block ops
// again at two kernel ops would not: QKNorm's (2, 6..10) passes cost 1.5x its (2, 12) pass, for nothing a complete
// (2, 12) pass does not find again.
std::vector<std::pair<int, int>> deepening(int max_kernel, int max_block) {
  std::vector<std::pair<int, int>> passes;
  for (int x = std::min(6, max_block); x < max_block; x += 2) passes.push_back({1, x});
  for (int k = 1; k <= max_kernel; ++k) passes.push_back({k, max_block});
  return passes;
}

// Gives `g`'s outputs the names the spec's outputs have (the search's own tensors have none, and printing would call
// them t6): callers bind outputs by name (bundles, the C API). A name another tensor of `g` already has is left out.
void name_outputs_like(const ir::Graph& spec, ir::Graph& g) {
  std::unordered_set<std::string> used;
  for (ir::TensorId t = 0; t < g.num_tensors(); ++t)
    if (!g.name(t).empty()) used.insert(g.name(t));
  for (size_t o = 0; o < spec.outputs().size() && o < g.outputs().size(); ++o) {
    const std::string& want = spec.name(spec.outputs()[o]);
    ir::TensorId t = g.outputs()[o];
    if (want.empty() || !g.name(t).empty() || used.count(want)) continue;
    g.set_name(t, want);
    used.insert(want);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The widest window of the partial-fusion fallback, in spec ops: a window search is a search of its own, and the
// windows of n ops number about n times this.
constexpr size_t kPartialFusionWindow = 4;
// The partial-fusion fallback searches windows until this share of the time limit has passed. It runs only when no
// fused candidate costs less than the spec as written, and what costs more is never verified, so the checks after it
// are the stitch's alone (each window's best passed its own already): 2 s for multi-head latent attention on the
// 2-core machine, 6-7 s at 32 heads and 8192 tokens (bench/unseen/mla_h32_k8192.mg), which 30% of a 30 s limit
// still holds.
constexpr double kPartialFusionEnd = 0.7;
// A window search keeps one candidate, so its checks are short (a second or two): its enumeration may use most of its
// share (mla_decode's three-op window of scale, softmax and P·C needs 2.6 s of enumeration on the 2-core machine; at
// half of its 5 s share it was cut).
constexpr double kWindowEnumerationShare = 0.8;

// The search; `partial` allows the partial-fusion fallback (off in its own window searches); `aliases`: which of the
// spec's inputs view another's memory (a transposed input searched as an input of its own), for the cost model;
// `enumeration_share`: of the time limit, what the enumeration may use.
SearchResult search_impl(const ir::Graph& spec, const targets::Target& target, const SearchOptions& options,
                         const ProgressFn& on_progress, bool partial, const ir::InputAliases& aliases,
                         double enumeration_share) {
  auto t0 = std::chrono::steady_clock::now();
  if (options.shard.count < 1 || options.shard.index < 0 || options.shard.index >= options.shard.count)
    throw UserError("--shard: index must be in 0..count-1");
  // Transposes of inputs are searched as inputs of their own (input_views.h), and put back in every answer.
  if (std::optional<InputViews> views = view_inputs(spec)) {
    SearchResult viewed =
        search_impl(views->spec, target, options, on_progress, partial, views->aliases, enumeration_share);
    viewed.spec = ir::print(spec);
    for (RankedCandidate& c : viewed.top) {
      const ir::Graph g = restore_views(ir::parse_module(c.mugraph).programs[0], spec, *views);
      c.mugraph = ir::print(g);
      c.hash = g.hash();
      c.cost = estimate(g, target).str();
    }
    return viewed;
  }
  SearchResult result;
  result.spec = ir::print(spec);
  result.target = target.identity.name;
  result.options = options;

  std::atomic<bool> stop{false}, finished{false};
  std::atomic<uint64_t> done{0}, total{0}, complete{0};
  // What the progress line shows besides: states and pruned prefixes of the finished tasks (a task's counters are
  // its own until it ends), then the verification's counts.
  std::atomic<uint64_t> states_done{0}, pruned_done{0}, verified{0}, rejected{0};
  std::atomic<bool> verifying{false};
  std::atomic<double> best_cost{0};
  // The time limit and the progress line, from one thread of their own, until the search returns or throws.
  std::thread watcher([&] {
    double last = 0;
    while (!finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      double el = seconds_since(t0);
      if (el > options.time_limit_s * enumeration_share) stop = true;
      if (on_progress && el - last >= 0.2) {
        last = el;
        Progress p;
        p.states = states_done;
        p.pruned = pruned_done;
        p.complete = complete;
        p.tasks_done = done;
        p.tasks_total = total;
        p.verifying = verifying;
        p.verified = verified;
        p.rejected = rejected;
        p.best_cost_us = best_cost;
        p.elapsed_s = el;
        on_progress(p);
      }
    }
  });
  struct JoinWatcher {
    std::atomic<bool>& finished;
    std::thread& watcher;
    ~JoinWatcher() {
      finished = true;
      watcher.join();
    }
  } join_watcher{finished, watcher};

  // Iterative deepening over the kernel-graph and block-graph sizes: small spaces first, so that what a time
  // limit leaves is the best of a complete smaller space rather than one corner of the largest. The last pass
  // enumerates a superset of the others, so when it completes the answer is the same as its alone.
  std::vector<Candidate> all;
  GenStats counts;  // over every pass
  TaskPool pool(options.threads);
  for (auto [kernel_ops, block_ops] : deepening(options.max_kernel_ops, options.max_block_ops)) {
    SearchOptions pass = options;
    pass.max_kernel_ops = kernel_ops;
    pass.max_block_ops = block_ops;
    auto gen = std::make_unique<Generator>(spec, target, pass, aliases);
    std::vector<size_t> tasks;
    for (size_t t = 0; t < gen->num_tasks(); ++t)
      if (static_cast<int>(t % static_cast<size_t>(options.shard.count)) == options.shard.index) tasks.push_back(t);
    total += tasks.size();
    std::vector<TaskBest> found(tasks.size());
    std::vector<GenStats> stats(tasks.size());
    // One pool task per generator task; each writes only its own slot, so nothing needs a lock.
    std::vector<TaskPool::Task> roots;
    for (size_t i = 0; i < tasks.size(); ++i)
      roots.push_back([&, i](TaskPool::Worker&) {
        gen->explore(tasks[i], stats[i], [&](Candidate&& c) {
          complete.fetch_add(1, std::memory_order_relaxed);
          found[i].add(std::move(c));
        }, stop, found[i].bound_ptr());
        states_done.fetch_add(stats[i].states, std::memory_order_relaxed);
        uint64_t pruned = 0;
        for (const auto& [rule, n] : stats[i].pruned) pruned += n;
        pruned_done.fetch_add(pruned, std::memory_order_relaxed);
        if (!stop) done.fetch_add(1);
      });
    pool.run(std::move(roots), stop);
    for (size_t i = 0; i < tasks.size(); ++i) {
      counts.add(stats[i]);
      for (Candidate& c : found[i].items()) all.push_back(std::move(c));
    }
    if (stop) break;
  }
  result.stats.timed_out = stop.load();
  verifying = true;
  result.stats.states = counts.states;
  result.stats.complete = counts.complete;
  result.stats.pruned = std::move(counts.pruned);
  result.stats.tasks_total = total;
  result.stats.tasks_done = done;

  // No complete fused candidate cheaper than the spec as written (a spec the generator cannot fuse within its limits,
  // or only into forms that lose): the best partial fusion, the spec's ops in windows searched apart and stitched
  // (docs/search.md, "Partial fusion"), until kPartialFusionEnd of the limit. Unsharded only: each shard would search
  // the windows again.
  uint64_t partial_hash = 0;
  std::string partial_summary;
  const double partial_time_s = options.time_limit_s * kPartialFusionEnd - seconds_since(t0);
  const Cost as_written = estimate(spec, target, aliases);
  const bool fused_beats_spec = std::any_of(all.begin(), all.end(), [&](const Candidate& c) {
    return !as_written.feasible() || c.cost_us < as_written.total_us;
  });
  if (partial && !fused_beats_spec && options.shard.count == 1 && partial_time_s > 0) {
    SearchOptions window_options = options;
    window_options.top = 1;
    auto search_window = [&](const ir::Graph& window, const ir::InputAliases& window_aliases,
                             double limit_s) -> std::optional<ir::Graph> {
      window_options.time_limit_s = limit_s;
      SearchResult r =
          search_impl(window, target, window_options, {}, false, window_aliases, kWindowEnumerationShare);
      // A window cut short makes the answer depend on timing, like the enumeration's own limit.
      result.stats.timed_out = result.stats.timed_out || r.stats.timed_out;
      if (!r.found()) return std::nullopt;
      return std::move(ir::parse_module(r.top[0].mugraph).programs[0]);
    };
    std::optional<PartialFusion> p =
        partial_fusion(spec, target, kPartialFusionWindow, partial_time_s, search_window, aliases);
    // Every window back as its ops as written is the spec itself, which is a candidate below.
    if (p && p->graph.hash() != spec.hash()) {
      partial_hash = p->graph.hash();
      partial_summary = std::move(p->summary);
      all.push_back({std::move(p->graph), p->cost_us, partial_hash, partial_hash});
    }
  }

  // The spec as written (its ops as predefined kernels) is always a candidate: a valid spec never ends without an
  // answer (a spec with more ops than --max-kernel-ops keeps has no complete fused candidate at all), and no answer
  // costs more by the cost model than what the user wrote. It is the reference, so it needs no check.
  const uint64_t spec_hash = spec.hash();
  if (as_written.feasible())
    all.push_back({spec, as_written.total_us, spec_hash, spec_hash});

  // Everything found, in (cost, hash) order, independent of which thread found what.
  std::sort(all.begin(), all.end(), cheaper);
  all.erase(std::unique(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) { return a.hash == b.hash; }),
            all.end());
  // What costs more than the spec as written can never be the answer (the spec is a candidate): not verified, not
  // listed (multi-head latent attention's two-kernel forms, 12x the spec, took a third of its checks' time).
  if (as_written.feasible())
    all.erase(std::remove_if(all.begin(), all.end(), [&](const Candidate& c) { return c.cost_us > as_written.total_us; }),
              all.end());

  // Verification in cost order (docs/search.md, "Verification"): every kept candidate passes the cheap exact
  // check and the float check; the best one also passes the full exact check (if it fails, the next candidate
  // takes its place). A structure that fails once is not tried again at other sizes.
  auto verify_start = std::chrono::steady_clock::now();
  std::vector<uint64_t> failed;
  std::unique_ptr<verify::FloatReference> float_ref;  // the spec's side of the float checks, made once
  const verify::EquivalenceOptions cheap = cheap_check(options), full = full_check(options);
  auto ranked = [&](const Candidate& c, std::string verification) {
    RankedCandidate r;
    ir::Graph named = c.graph;
    name_outputs_like(spec, named);
    // Every other tensor under the name the printer gives it, so that the cost breakdown names kernels as the printed
    // μGraph does (the search's own tensors have none: "#0 block -> , ,"). Done here, once per reported candidate,
    // not in the cost model, which prices every state of the search.
    const std::vector<std::string> printed = ir::printed_names(named);
    for (ir::TensorId t = 0; t < named.num_tensors(); ++t)
      if (named.name(t).empty()) named.set_name(t, printed[t]);
    r.mugraph = ir::print(named);
    r.hash = c.hash;
    r.cost_us = c.cost_us;
    r.cost = estimate(named, target, aliases).str();
    r.verification = std::move(verification);
    return r;
  };
  auto has_failed = [&](const Candidate& c) {
    return std::find(failed.begin(), failed.end(), c.structure) != failed.end();
  };
  // The cheap checks run a window at a time on the pool's threads (each check is self-contained): the next
  // candidates in cost order whose structure has not failed. The outcome is the sequential one; at worst a window
  // checks a candidate that an earlier failure in it then excludes, and that verdict goes unused.
  const size_t window = static_cast<size_t>(std::max(1, pool.threads()));
  std::vector<std::optional<verify::Verdict>> cheap_verdict(all.size());
  // The time limit bounds verification too: once the best candidate has passed every check, a window of cheap checks
  // starts only if it can end within the limit, judged by the longest window so far (the candidates are mostly the
  // same structure at other sizes, so their checks cost alike).
  double longest_window_s = 0;
  auto window_fits = [&] { return seconds_since(t0) + longest_window_s <= options.time_limit_s; };
  auto check_window = [&](size_t from) {
    auto window_start = std::chrono::steady_clock::now();
    std::vector<size_t> batch;
    for (size_t i = from; i < all.size() && batch.size() < window; ++i)
      if (!cheap_verdict[i] && !has_failed(all[i])) batch.push_back(i);
    std::vector<std::future<verify::Verdict>> running;
    for (size_t i : batch)
      running.push_back(
          std::async(std::launch::async, [&, i] { return verify::equivalent(spec, all[i].graph, cheap); }));
    for (size_t k = 0; k < batch.size(); ++k) cheap_verdict[batch[k]] = running[k].get();
    longest_window_s = std::max(longest_window_s, seconds_since(window_start));
  };
  for (size_t i = 0; i < all.size(); ++i) {
    const Candidate& c = all[i];
    if (static_cast<int>(result.top.size()) >= options.top) break;
    if (has_failed(c)) continue;
    bool best = result.top.empty();
    if (c.hash == spec_hash) {
      if (result.top.empty()) best_cost = c.cost_us;
      result.top.push_back(ranked(c, std::string(kSpecAsWritten)));
      continue;
    }
    if (!cheap_verdict[i] && !best && !window_fits()) {
      result.stats.unverified_for_time = static_cast<uint64_t>(options.top) - result.top.size();
      break;
    }
    if (!cheap_verdict[i]) check_window(i);
    const verify::Verdict& v = *cheap_verdict[i];
    // The float check before the full exact one: it is cheaper, and what it catches (overflow) is what the
    // exact checks cannot see.
    verify::FloatCheck fc;
    if (v.equivalent()) {
      // Sampled: a structured sample of output elements, computed on demand (GQA b8: 0.1 s instead of 30 s).
      if (!float_ref)
        float_ref = std::make_unique<verify::FloatReference>(
            spec, verify::FloatCheckOptions{.seed = options.seed, .sampled = true});
      fc = float_ref->check(c.graph);
    }
    verify::Verdict f;
    if (v.equivalent() && fc.pass && best) f = verify::equivalent(spec, c.graph, full);
    if (!v.equivalent() || !fc.pass || !f.equivalent()) {
      ++result.stats.rejected;
      ++rejected;
      failed.push_back(c.structure);
      continue;
    }
    ++result.stats.verified;
    ++verified;
    if (best) best_cost = c.cost_us;
    char buf[200];
    std::snprintf(buf, sizeof buf, "cheap exact %d trials%s; float check max error %.3g of tolerance",
                  options.trials, best ? ", full exact 1 trial" : "", fc.error);
    result.top.push_back(ranked(c, buf + (c.hash == partial_hash ? "; " + partial_summary : std::string())));
  }
  result.stats.verify_seconds = seconds_since(verify_start);
  result.stats.seconds = seconds_since(t0);
  return result;
}

}  // namespace

SearchResult search(const ir::Graph& spec, const targets::Target& target, const SearchOptions& options,
                    const ProgressFn& on_progress) {
  return search_impl(spec, target, options, on_progress, true, {}, kEnumerationShare);
}

}  // namespace morgana::search
