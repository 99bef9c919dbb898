// Turns each kernel's work (kernel_work.cpp) into time: occupancy from threads, shared memory and registers;
// waves; per wave the slowest of DRAM, L2, shared-memory fill and compute on the busiest SM; barrier latency
// per wave; load latency of one block's chain (each iteration unless the loop is pipelined); one launch per kernel.
// docs/cost-model.md derives each step.
#include "search/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "search/kernel_work.h"

namespace morgana::search {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Resident blocks per SM, or 0 with the reason in k.infeasible.
int64_t blocks_per_sm(KernelCost& k, const targets::Target& t) {
  const auto& ex = t.execution;
  const auto& mem = t.memory;
  // Threads are scheduled in whole warps, so a block occupies its thread count rounded up to the warp size.
  const int64_t threads = ceil_div(k.threads, ex.warp_size) * ex.warp_size;
  if (k.threads > ex.max_threads_per_block) {
    k.infeasible = "threads " + std::to_string(k.threads) + " exceed max_threads_per_block " +
                   std::to_string(ex.max_threads_per_block);
    return 0;
  }
  if (k.smem_bytes > mem.smem_per_block_optin) {
    k.infeasible = "shared memory " + std::to_string(k.smem_bytes) + " B exceeds smem_per_block_optin " +
                   std::to_string(mem.smem_per_block_optin);
    return 0;
  }
  if (k.regs_per_thread * threads > t.registers.regs_per_block) {
    k.infeasible = "registers " + std::to_string(k.regs_per_thread * threads) + " exceed regs_per_block " +
                   std::to_string(t.registers.regs_per_block);
    return 0;
  }
  return targets::resident_blocks_per_sm(t, k.threads, k.smem_bytes, k.regs_per_thread);
}

struct WaveTime {
  double memory_s = 0;
  double compute_s = 0;
  double stream_s = 0;  // the wave's warps streaming its tiles at warp_stream_gbps: a floor on the whole wave
};

// One wave of `nb` blocks. Bandwidth shared by the device (DRAM, L2) is spent by all of the wave's blocks; an
// SM's own resources (shared-memory fill, tensor and vector units) serve only the blocks resident on it, so
// the busiest SM (ceil(nb / sms) blocks) sets the compute and fill time.
WaveTime wave_time(const detail::Work& w, int64_t nb, const targets::Target& t) {
  const KernelCost& k = w.k;
  const double sms = static_cast<double>(t.execution.sms);
  const double blocks = static_cast<double>(k.blocks);
  const double share = static_cast<double>(nb) / blocks;  // fraction of the kernel in this wave
  const double busiest = static_cast<double>(ceil_div(nb, t.execution.sms));
  const double dram_rate = t.memory.dram_bandwidth_gbps * 1e9 * t.cost.dram_efficiency;
  const double l2_rate = t.cost.l2_bandwidth_gbps * 1e9;
  const double fill_rate = t.cost.smem_bandwidth_gbps_per_sm * 1e9;
  const double dram = k.dram_read_bytes + k.dram_write_bytes;
  WaveTime wt;
  wt.memory_s = std::max({share * dram / dram_rate, share * (dram + k.l2_reread_bytes) / l2_rate,
                          busiest * k.smem_fill_bytes / fill_rate});
  // Rows that are part of an L2 line take a request for a whole line each, which the L2 serves (neighbouring blocks
  // hit the rest) but which costs time beyond the bytes (ncu on the H100: rmsnorm_linear's 96-byte W rows, 2.5x the
  // requests of 128-byte ones for the same DRAM bytes, 1.25 us slower; gated_mlp's 64-byte rows, 2x, 1.15 us).
  // Priced per request on each busy SM.
  if (t.cost.partial_line_request_ns > 0 && t.memory.l2_line_bytes > 0)
    wt.memory_s += share * k.partial_line_bytes / static_cast<double>(t.memory.l2_line_bytes) /
                   std::min(static_cast<double>(nb), sms) * t.cost.partial_line_request_ns * 1e-9;
  // A resident warp moves tiles through its loop (copies, waits, barriers, the math between them) at about
  // warp_stream_gbps, so a wave of few warps cannot draw the device's bandwidth however little it computes
  // (docs/cost-model.md, "Warps that stream"). It is requested in whole L2 lines: rows that are not whole lines
  // (96-byte rows touch one and a half on average) cost the lines they touch. The rate is measured on whole loops,
  // their math and waits included, so it bounds the wave's time from below rather than adding to it.
  // Loads the copy engine moves (a pipelined loop's, docs/lowering.md "Loads by the copy engine") stream at the
  // block's pace all the same, but the engine requests a box's sectors, not whole lines per row: their bytes count.
  if (t.cost.warp_stream_gbps > 0) {
    const double warps = static_cast<double>(nb) * static_cast<double>(ceil_div(k.threads, t.execution.warp_size));
    const double engine_lines = k.stages > 1 ? k.engine_line_bytes - k.engine_bytes : 0;
    const double requested =
        std::max(dram + k.l2_reread_bytes, k.line_bytes - engine_lines + k.dram_write_bytes);
    wt.stream_s = share * requested / (warps * t.cost.warp_stream_gbps * 1e9);
  }
  // Per block, device-wide seconds times sms = seconds on one SM's share of the units.
  const double per_block_s = (w.tensor_s + w.vector_s) / blocks * sms;
  wt.compute_s = busiest * per_block_s;
  return wt;
}

KernelCost time_kernel(detail::Work w, const targets::Target& t) {
  KernelCost& k = w.k;
  k.launch_us = t.cost.launch_overhead_us;
  k.blocks_per_sm = k.blocks > 0 ? blocks_per_sm(k, t) : 0;
  if (k.blocks_per_sm <= 0) {
    if (k.infeasible.empty()) k.infeasible = "no block fits on an SM";
    k.time_us = std::numeric_limits<double>::infinity();
    return k;
  }
  // Whether the loop's loads are pipelined: the lowering's own rule (targets::pipeline_stages). The kernel as
  // generated then holds the extra buffers, and fewer of its blocks may fit an SM; the waves stay the same
  // (pipeline_stages adds buffers only where no busy block is lost).
  // A loop with loads the threads copy synchronously is not pipelined; where all its iterations' tiles fit, the
  // lowering loads them before the loop (targets::preload_fits): one wait for loads per block instead of one per
  // iteration.
  if (k.loads_in_registers) {
    // Nothing to pipeline or preload in shared memory: the unrolled loop's loads all go out at its start.
  } else if (k.synchronous_loads)
    k.preloaded = targets::preload_fits(t, k.blocks, k.threads, k.smem_bytes, k.stage_bytes, k.loop);
  else
    k.stages = targets::pipeline_stages(t, k.blocks, k.threads, k.smem_bytes, k.stage_bytes, k.loop, k.stream_bytes);
  const int64_t buffers = k.preloaded ? k.loop : k.stages;
  if (buffers > 1) {
    k.smem_bytes += (buffers - 1) * k.stage_bytes;
    k.blocks_per_sm = targets::resident_blocks_per_sm(t, k.threads, k.smem_bytes, k.regs_per_thread);
  }
  const int64_t per_wave = t.execution.sms * k.blocks_per_sm;
  const int64_t full = k.blocks / per_wave, rest = k.blocks % per_wave;
  k.waves = full + (rest > 0 ? 1 : 0);
  // Barriers are latency: each wave pays one block's chain of them (barrier_ns: one statement pass over shared
  // memory behind its barrier, as generated code makes it; a predefined op is generated code too). Blocks resident
  // on the same SM run their chains side by side, each as long (measured: two co-resident blocks of half the work
  // each are no faster than one). A pipelined loop runs its chain while the next iterations' loads are in flight,
  // so the chain overlaps the memory time like compute does; an unpipelined one waits for its loads, then runs it.
  // A reduction of register rows needs no barrier, but its shuffles are a step of the block's chain all the same
  // (row_reduction_ns; H100: a flash kernel with two per iteration at 1 warp per scheduler costs ~0.5 us per extra
  // iteration of the same work, one barrier's 0.1 of it).
  const double chain_s = (static_cast<double>(k.barriers_per_block) * t.cost.barrier_ns +
                          static_cast<double>(k.row_reductions_per_block) * t.cost.row_reduction_ns +
                          k.pass_elements_per_block * t.cost.pass_element_ns) *
                         1e-9;
  double throughput_s = 0, memory_s = 0, compute_s = 0, stream_s = 0;
  auto add = [&](int64_t nb, double count) {
    WaveTime wt = wave_time(w, nb, t);
    memory_s += count * wt.memory_s;
    compute_s += count * wt.compute_s;
    stream_s += count * wt.stream_s;
    const double busy = wt.compute_s + (k.stages > 1 ? chain_s : 0);
    // Memory and compute overlap, but not perfectly: a fraction of the shorter one shows (overlap_miss). Without a
    // pipeline, a block's loads overlap only other blocks' math: with b blocks resident per SM, at least 1/b of the
    // shorter one shows (measured on the H100: attention_decode's Q·K as one unpipelined 128 KiB block per SM in
    // four waves, 61.7 us, against 56.2 pipelined at four blocks per SM, which the model had reversed).
    const double miss = k.stages > 1 ? t.cost.overlap_miss
                                     : std::max(t.cost.overlap_miss, 1.0 / static_cast<double>(k.blocks_per_sm));
    // A pipelined loop's first stage lands before any math starts: one stage's memory time shows (rmsnorm_linear on
    // the H100: 32 iterations of 128 rows 20.9 us, 16 of 256 rows 22.6, 4 of 1024 rows 23.6; gated_mlp at 8, 16,
    // 32: 28.3, 28.2, 27.5). Where memory is the longer, the last iteration also computes after its copies land, so
    // one iteration's math shows too; where the math is the longer, that iteration's copies landed long before
    // (H100, ncu: a d=128 QK-norm flash kernel of 2 iterations, 8.4 us busy, ran as its busy time plus one stage).
    const double drain =
        k.stages > 1 ? (wt.memory_s + (wt.memory_s >= busy ? busy : 0)) / static_cast<double>(k.loop) : 0;
    // The chain of a pipelined loop hides behind its loads while it is short next to them (the copies of later
    // iterations are in flight while the block synchronises): it shows in full from chain_shown_at of the memory
    // time on, in proportion below (H100: decode attention's one-row flash kernel with 5 barriers per iteration of
    // 64 KiB ran 50.1 us against 50.9 for one barrier per iteration of 4 heads' 16 KiB).
    double chain_shown = chain_s;
    if (k.stages > 1 && t.cost.chain_shown_at > 0 && wt.memory_s > 0)
      chain_shown *= std::min(1.0, chain_s / (t.cost.chain_shown_at * wt.memory_s));
    const double busy_shown = wt.compute_s + (k.stages > 1 ? chain_shown : 0);
    const double overlapped = std::max(wt.memory_s, busy) + miss * std::min(wt.memory_s, busy_shown) + drain;
    throughput_s += count * std::max(overlapped, wt.stream_s);
  };
  if (full > 0) add(per_wave, static_cast<double>(full));
  if (rest > 0) add(rest, 1);
  // Blocks start one after another device-wide: a grid of many short blocks takes its blocks' dispatch at least
  // (H100, bench/probes/block_launch.cu: a kernel of 32-128-thread blocks that each move one element per thread
  // runs 1.41 us at 132 blocks, 2.31 at 2112, 3.60 at 4224, 10.9 at 16384).
  throughput_s = std::max(throughput_s, static_cast<double>(k.blocks) * t.cost.block_dispatch_ns * 1e-9);
  k.memory_us = memory_s * 1e6;
  k.compute_us = compute_s * 1e6;
  k.stream_us = stream_s * 1e6;
  k.barrier_us = static_cast<double>(k.waves) * chain_s * 1e6;
  // Loads are latency too: a block of an unpipelined loop waits for each iteration's, of a pipelined one for the
  // first only. Counted for one block's chain: blocks of later waves overlap earlier ones' waits (docs/cost-model.md,
  // "Load latency"; the constant is measured per target).
  const bool waits_once = k.stages > 1 || k.preloaded || k.library || k.loads_in_registers;
  k.latency_us = static_cast<double>(waits_once ? 1 : k.loop) * t.cost.iteration_latency_us;
  k.time_us = throughput_s * 1e6 + (k.stages > 1 ? 0 : k.barrier_us) + k.latency_us + k.launch_us;
  return k;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d, e);
  return buf;
}

}  // namespace

bool Cost::feasible() const {
  return std::all_of(kernels.begin(), kernels.end(),
                     [](const KernelCost& k) { return k.infeasible.empty(); });
}

std::string Cost::str() const {
  std::string s = "cost on " + target + ": " + fmt("%.3f", total_us) + " us in " +
                  std::to_string(kernels.size()) + (kernels.size() == 1 ? " kernel\n" : " kernels\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelCost& k = kernels[i];
    s += "#" + std::to_string(i) + " " + k.label + ": " + std::to_string(k.blocks) + " blocks x " +
         std::to_string(k.threads) + " threads, loop " + std::to_string(k.loop) + "; smem " +
         std::to_string(k.smem_bytes) + " B, " + std::to_string(k.regs_per_thread) + " regs/thread, " +
         std::to_string(k.blocks_per_sm) + " blocks/SM, " + std::to_string(k.waves) +
         (k.waves == 1 ? " wave\n" : " waves\n");
    if (!k.infeasible.empty()) {
      s += "   infeasible: " + k.infeasible + "\n";
      continue;
    }
    s += fmt("   dram read %.3f MB, write %.3f MB; l2 re-read %.3f MB; smem fill %.3f MB/block\n",
             k.dram_read_bytes * 1e-6, k.dram_write_bytes * 1e-6, k.l2_reread_bytes * 1e-6,
             k.smem_fill_bytes * 1e-6);
    s += fmt("   tensor %.4f GFLOP, vector %.4f GFLOP; ", k.tensor_flops * 1e-9, k.vector_flops * 1e-9) +
         std::to_string(k.barriers_per_block) + " barriers/block\n";
    // A pipelined loop's barrier chain sits inside the max, beside compute (time_kernel).
    const char* time_line =
        k.stages > 1
            ? "   time %.3f us = max per wave of (memory %.3f, compute %.3f + barriers %.3f) + load latency %.3f"
            : "   time %.3f us = max per wave of (memory %.3f, compute %.3f) + barriers %.3f + load latency %.3f";
    s += fmt(time_line, k.time_us, k.memory_us, k.compute_us, k.barrier_us, k.latency_us) +
         fmt(" + launch %.3f\n", k.launch_us) +
         (k.stream_us > 0 ? fmt("   warps' stream floor %.3f us (per wave, at least)\n", k.stream_us) : "") +
         (k.stages > 1 ? "   loads pipelined, " + std::to_string(k.stages) + " buffers\n" : "") +
         (k.preloaded ? "   loads of all " + std::to_string(k.loop) + " iterations before the loop\n" : "") +
         (k.loads_in_registers ? "   loads of all " + std::to_string(k.loop) + " iterations into registers\n" : "");
  }
  return s;
}

Cost estimate(const ir::Graph& mugraph, const targets::Target& t, std::span<const ir::InputAlias> aliases) {
  MG_CHECK(!mugraph.is_block(), "the cost model takes a kernel graph");
  Cost c;
  c.target = t.identity.name;
  for (const ir::Node& n : mugraph.nodes()) {
    if (!ir::launches_kernel(mugraph, n)) continue;
    c.kernels.push_back(estimate_kernel(mugraph, n, t, aliases));
    c.total_us += c.kernels.back().time_us;
  }
  return c;
}

KernelCost estimate_kernel(const ir::Graph& mugraph, const ir::Node& n, const targets::Target& t,
                           std::span<const ir::InputAlias> aliases) {
  detail::Work w = ir::op_info(n.op).kind == ir::OpKind::Block ? detail::block_work(mugraph, n, t, aliases)
                                                                : detail::predefined_work(mugraph, n, t);
  return time_kernel(std::move(w), t);
}

uint64_t kernel_context_hash(const ir::Graph& mugraph, std::span<const ir::TensorId> operands,
                             std::span<const ir::InputAlias> aliases) {
  uint64_t h = 0;
  std::vector<ir::OperandView> views;
  for (ir::TensorId o : operands) views.push_back(ir::view_of(mugraph, o, aliases));
  for (size_t i = 0; i < operands.size(); ++i) {
    // Which earlier operand reads the same memory, if any, and whether transposed against it.
    size_t first = 0;
    while (views[first].tensor != views[i].tensor) ++first;
    h = ir::hash_mix(h, (static_cast<uint64_t>(first) << 1) | (views[first].transposed != views[i].transposed));
  }
  for (ir::TensorId o : operands) {
    const ir::TensorType& type = mugraph.type(o);
    h = ir::hash_mix(h, static_cast<uint64_t>(type.dtype));
    for (int64_t d : type.shape()) h = ir::hash_mix(h, static_cast<uint64_t>(d));
    h = ir::hash_mix(h, static_cast<uint64_t>(mugraph.node(mugraph.tensor(o).producer).op));
  }
  return h;
}

}  // namespace morgana::search
