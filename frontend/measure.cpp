#include "frontend/measure.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "frontend/compile.h"
#include "frontend/device_program.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "morgana/runtime.h"
#include "runtime/bundle.h"

namespace morgana::frontend {

namespace {

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// "sm_90a" -> "90", "sm_90" -> "90": the compute capability an arch names, without the arch-specific suffix.
std::string capability(const std::string& arch) {
  std::string digits;
  for (char c : arch)
    if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
  return digits;
}

// One candidate's row: compiled for `target` alone (no PTX: the GPU is the target's), loaded, checked, timed.
MeasuredCandidate measure_one(const search::RankedCandidate& c, int rank, const targets::Target& target,
                              const MeasureOptions& o) {
  MeasuredCandidate row;
  row.rank = rank;
  row.estimate_us = c.cost_us;
  try {
    ir::Module m = ir::parse_module(c.mugraph, fmt("candidate %d", rank));
    CompileOptions co;
    co.targets = {target};
    co.ptx_fallback = false;
    std::vector<uint8_t> bytes = bundle::write_bundle(compile_programs(m.programs, co));
    std::unique_ptr<DeviceProgram> p = DeviceProgram::open_bytes(bytes, "", o.device, o.seed);
    CheckResult check = p->check();
    row.check_worst = check.worst;
    if (!check.pass) {
      row.problem = fmt("outputs differ from the CPU reference (%.2f of the tolerance)", check.worst);
      return row;
    }
    Timing t = p->time_replays(o.warmup, o.replays);
    row.median_us = t.median_us;
    row.min_us = t.min_us;
    row.sets = t.sets;
    row.ok = true;
  } catch (const UserError& e) {
    row.problem = e.message();
  } catch (const std::exception& e) {
    row.problem = std::string("internal error: ") + e.what();
  }
  return row;
}

// Why this machine's GPU `device` cannot stand in for `target` (no driver, no GPU, another compute capability or
// SM count), with the GPU described in `info` where there is one; empty when it can.
std::string local_gpu_mismatch(const targets::Target& target, int device, mg_device_info* info) {
  int count = 0;
  if (mg_status s = mg_device_count(&count); s != MG_OK)
    return std::string("no GPU to measure on: ") + mg_last_error();
  if (device < 0 || device >= count) return fmt("no CUDA device %d (this machine has %d)", device, count);
  if (mg_status s = mg_device_describe(device, info); s != MG_OK)
    return std::string("cannot read the GPU: ") + mg_last_error();
  const bool nvidia = target.identity.vendor == "nvidia" && info->vendor == MG_VENDOR_NVIDIA;
  if (!nvidia || capability(target.identity.arch) != capability(info->arch) ||
      info->sm_count != target.execution.sms)
    return fmt("this machine's GPU %d is %s (%s, %d SMs), not what %s describes (%s, %lld SMs)", device,
               info->name, info->arch, info->sm_count, target.identity.name.c_str(),
               target.identity.arch.c_str(), static_cast<long long>(target.execution.sms));
  return "";
}

}  // namespace

std::string candidate_form(const std::string& mugraph) {
  ir::Module m = ir::parse_module(mugraph, "candidate");
  std::string form;
  for (const ir::Graph& g : m.programs)
    for (const ir::Node& n : g.nodes()) {
      const ir::OpKind kind = ir::op_info(n.op).kind;
      if (kind == ir::OpKind::Input || kind == ir::OpKind::Output) continue;
      if (kind != ir::OpKind::Block) {
        form += std::string(ir::op_name(n.op)) + "; ";
        continue;
      }
      // What the block computes: its ops as a multiset (not how it loops: iterators, accumulators and saves aside).
      std::multiset<std::string> ops;
      for (const ir::Node& b : g.body(n).nodes()) {
        const ir::OpKind k = ir::op_info(b.op).kind;
        if (k != ir::OpKind::Iter && k != ir::OpKind::Save && k != ir::OpKind::Accum)
          ops.insert(std::string(ir::op_name(b.op)));
      }
      form += "block {";
      for (const std::string& o : ops) form += " " + o;
      form += " }; ";
    }
  return form;
}

std::vector<int> choose_finalists(const search::SearchResult& result, int count) {
  const int n = static_cast<int>(result.top.size());
  std::vector<char> taken(static_cast<size_t>(n), 0);
  std::set<std::string> forms;
  // At most half the finalists (rounded up) go to other forms' best; the rest to the best-ranked others (the model
  // also misranks variants of one form: gqa_h8_d128_k2048_scaled's loop-4 variant, ranked 2nd, ran 13.8 us
  // against 15.2 for the first).
  const int by_form = (count + 1) / 2;
  int chosen = 0;
  for (int i = 0; i < n && chosen < by_form; ++i)
    if (forms.insert(candidate_form(result.top[static_cast<size_t>(i)].mugraph)).second) {
      taken[static_cast<size_t>(i)] = 1;
      ++chosen;
    }
  for (int i = 0; i < n && chosen < count; ++i)
    if (!taken[static_cast<size_t>(i)]) {
      taken[static_cast<size_t>(i)] = 1;
      ++chosen;
    }
  std::vector<int> finalists;
  for (int i = 0; i < n; ++i)
    if (taken[static_cast<size_t>(i)]) finalists.push_back(i);
  return finalists;
}

Measurement measure_candidates(const search::SearchResult& result, const targets::Target& target,
                               const MeasureOptions& o) {
  Measurement m;
  m.target = result.target;
  mg_device_info info{};
  m.skipped = local_gpu_mismatch(target, o.device, &info);
  if (!m.skipped.empty()) return m;
  m.device = fmt("%s (device %d)", info.name, o.device);
  const std::vector<int> finalists = choose_finalists(result, o.top);
  const int n = static_cast<int>(finalists.size());
  for (int i = 0; i < n; ++i) {
    const int at = finalists[static_cast<size_t>(i)];
    m.rows.push_back(measure_one(result.top[static_cast<size_t>(at)], at + 1, target, o));
    const MeasuredCandidate& r = m.rows.back();
    if (o.progress)
      o.progress(r.ok ? fmt("measured candidate %d of %d for %s (rank %d): %.2f us", i + 1, n,
                            target.identity.name.c_str(), r.rank, r.median_us)
                      : fmt("measured candidate %d of %d for %s (rank %d): %s", i + 1, n,
                            target.identity.name.c_str(), r.rank, r.problem.c_str()));
    if (r.ok && (m.chosen < 0 || r.median_us < m.rows[static_cast<size_t>(m.chosen)].median_us)) m.chosen = i;
  }
  return m;
}

std::string render_measurement(const Measurement& m) {
  if (!m.skipped.empty())
    return "not measured on " + m.target + ": " + m.skipped + "; the cost model's choice stands\n";
  std::string out =
      "measured on " + m.device + " for " + m.target +
      " (each compiled for it, checked against the CPU reference, then timed: one CUDA graph of a "
      "launch per input set, sets over 2x L2, median of replays):\n";
  out += "  rank   estimate (us)   measured (us)   min (us)   check\n";
  for (size_t i = 0; i < m.rows.size(); ++i) {
    const MeasuredCandidate& r = m.rows[i];
    const char* mark = static_cast<int>(i) == m.chosen ? "  <- chosen" : "";
    if (r.ok)
      out += fmt("  %4d   %13.2f   %13.2f   %8.2f   %.2f of the tolerance%s\n", r.rank, r.estimate_us,
                 r.median_us, r.min_us, r.check_worst, mark);
    else
      out +=
          fmt("  %4d   %13.2f               -          -   %s\n", r.rank, r.estimate_us, r.problem.c_str());
  }
  // rows[0] is the cost model's first (choose_finalists keeps rank order, and the first is its form's best).
  if (m.chosen < 0)
    out += "no candidate passed; the cost model's choice stands\n";
  else if (m.rows[static_cast<size_t>(m.chosen)].rank == 1)
    out += "the cost model's choice is the fastest measured\n";
  else
    out += fmt("chosen: candidate %d (%.2f us measured) over the cost model's first (%s)\n",
               m.rows[static_cast<size_t>(m.chosen)].rank, m.rows[static_cast<size_t>(m.chosen)].median_us,
               m.rows[0].ok ? fmt("%.2f us measured", m.rows[0].median_us).c_str() : m.rows[0].problem.c_str());
  return out;
}

void apply_measurement(const Measurement& m, search::SearchResult& result) {
  if (m.chosen < 0) return;
  const int at = m.rows[static_cast<size_t>(m.chosen)].rank - 1;
  if (at <= 0 || at >= static_cast<int>(result.top.size())) return;
  std::rotate(result.top.begin(), result.top.begin() + at, result.top.begin() + at + 1);
}

}  // namespace morgana::frontend
