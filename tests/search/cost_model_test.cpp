// Hand cases for the cost model (docs/cost-model.md): each test states the relation it expects and prints the
// numbers behind it, so a failure (or a recalibration) shows what moved. Runs from the source root.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "ir/parser.h"
#include "search/cost_model.h"
#include "targets/target.h"
#include "tests/common/golden.h"

namespace morgana::search {
namespace {

const targets::Target& target(const std::string& name) {
  static const targets::Target h200 = targets::find_target("h200", "targets");
  static const targets::Target h100 = targets::find_target("h100", "targets");
  static const targets::Target a100 = targets::find_target("a100", "targets");
  return name == "h200" ? h200 : name == "h100" ? h100 : a100;
}

ir::Graph parse(const std::string& src) {
  return ir::parse_module(src, "<test>").programs.at(0);
}

Cost cost(const std::string& src, const std::string& t = "h200") {
  return estimate(parse(src), target(t));
}

Cost cost_file(const std::string& path, const std::string& t = "h200") {
  return estimate(ir::parse_file(path).programs.at(0), target(t));
}

// (a) The same row-split f32 matmul (compute-bound on the vector units: W is small and stays in L2) over 132
// and over 96 blocks. One wave either way on a 132-SM H200; each SM then works on one block, so the grid
// whose blocks are 1/132 of the work finishes sooner than the one whose blocks are 1/96: expected ratio about
// 132/96.
std::string row_split(int blocks, int rows_per_block) {
  std::string rows = std::to_string(blocks * rows_per_block);
  return "kernel rows(X: f32[" + rows +
         ",4096], W: f32[4096,64]) {\n"
         "  Y = block(X, W) grid=[" +
         std::to_string(blocks) +
         ",1,1] threads=128 loop=128 {\n"
         "    x = iter(X, imap=[0,-,-], fmap=1)\n"
         "    w = iter(W, imap=[-,-,-], fmap=0)\n"
         "    p = matmul(x, w)\n"
         "    a = acc_sum(p)\n"
         "    save(a, omap=[0,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, FullWaveOf132BlocksBeats96Blocks) {
  ASSERT_EQ(target("h200").execution.sms, 132) << "the case is written for the H200's 132 SMs";
  Cost c132 = cost(row_split(132, 64));
  Cost c96 = cost(row_split(96, 88));
  EXPECT_LT(c132.total_us, c96.total_us) << c132.str() << c96.str();
  double ratio = c96.kernels[0].compute_us / c132.kernels[0].compute_us;
  EXPECT_NEAR(ratio, 132.0 / 96.0, 0.01) << "compute ratio " << ratio << "\n" << c132.str() << c96.str();
  std::cout << "132 blocks: " << c132.total_us << " us, 96 blocks: " << c96.total_us << " us\n";
}

// (b) exp(exp(X)) as one block op versus two predefined kernels. The pair also writes the intermediate and
// reads it back and pays a second launch: expected difference at least one launch overhead.
TEST(CostModel, OneKernelBeatsTwo) {
  Cost two = cost(
      "kernel two(X: f16[4096,4096]) {\n"
      "  A = exp(X)\n"
      "  B = exp(A)\n"
      "  return B\n"
      "}\n");
  Cost one = cost(
      "kernel one(X: f16[4096,4096]) {\n"
      "  B = block(X) grid=[4096,1,1] threads=128 loop=1 {\n"
      "    x = iter(X, imap=[0,-,-])\n"
      "    a = exp(x)\n"
      "    b = exp(a)\n"
      "    c = acc_sum(b)\n"
      "    save(c, omap=[0,-,-])\n"
      "  }\n"
      "  return B\n"
      "}\n");
  ASSERT_EQ(two.kernels.size(), 2u);
  EXPECT_LT(one.total_us + target("h200").cost.launch_overhead_us, two.total_us) << one.str() << two.str();
  std::cout << "one kernel " << one.total_us << " us, two kernels " << two.total_us << " us\n";
}

// (c) A large memory-bound elementwise kernel runs at the achievable DRAM bandwidth:
// f32[16384,8192] read + written = 2 x 536870912 B = 1073.7 MB; / (4800 GB/s x 0.885) = 252.8 us. Within 10%
// (the rest: barrier latency and one launch).
const char* kExp =
    "kernel e(X: f32[16384,8192]) {\n"
    "  Y = exp(X)\n"
    "  return Y\n"
    "}\n";

TEST(CostModel, ElementwiseIsBytesOverBandwidth) {
  const auto& t = target("h200");
  Cost c = cost(kExp);
  double bytes = 2.0 * 16384 * 8192 * 4;
  double ideal_us = bytes / (t.memory.dram_bandwidth_gbps * 1e9 * t.cost.dram_efficiency) * 1e6;
  EXPECT_NEAR(c.total_us, ideal_us, 0.1 * ideal_us) << "ideal " << ideal_us << " us\n" << c.str();
  std::cout << "exp f32[16384,8192]: " << c.total_us << " us, bytes/bandwidth " << ideal_us << " us\n";
}

// (d) A large f16 matmul's compute is its FLOPs at the achievable tensor peak: 2 x 8192^3 = 1.0995 TFLOP / (989 TF
// x 0.67) = 1659 us. Within 10% (wave quantization). The total adds the latency of its K loop's statement passes
// (barrier_ns each, fitted to generated code), which a library kernel would hide.
TEST(CostModel, LargeMatmulIsFlopsOverTensorPeak) {
  const auto& t = target("h200");
  Cost c = cost(
      "kernel mm(X: f16[8192,8192], W: f16[8192,8192]) {\n"
      "  Y = matmul(X, W)\n"
      "  return Y\n"
      "}\n");
  double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  double ideal_us = flops / (t.peak.f16_tensor * 1e12 * t.cost.tensor_efficiency) * 1e6;
  EXPECT_DOUBLE_EQ(c.kernels[0].tensor_flops, flops) << c.str();
  EXPECT_NEAR(c.kernels[0].compute_us, ideal_us, 0.1 * ideal_us) << "ideal " << ideal_us << " us\n" << c.str();
  EXPECT_GE(c.total_us, c.kernels[0].compute_us) << c.str();
  std::cout << "matmul 8192^3 f16: " << c.total_us << " us, FLOPs/peak " << ideal_us << " us\n";
}

// (e) The memory-bound kernel of (c) on the A100 is slower by about the ratio of achievable DRAM bandwidths:
// (4800 x 0.885) / (2039 x 0.88) = 2.367. Within 10%.
TEST(CostModel, A100SlowerByBandwidthRatio) {
  const auto &h = target("h200"), &a = target("a100");
  double expected = (h.memory.dram_bandwidth_gbps * h.cost.dram_efficiency) /
                    (a.memory.dram_bandwidth_gbps * a.cost.dram_efficiency);
  Cost ch = cost(kExp, "h200"), ca = cost(kExp, "a100");
  double ratio = ca.total_us / ch.total_us;
  EXPECT_NEAR(ratio, expected, 0.1 * expected) << ch.str() << ca.str();
  std::cout << "a100 " << ca.total_us << " us / h200 " << ch.total_us << " us = " << ratio
            << " (bandwidth ratio " << expected << ")\n";
}

// (f) The fused RMSNorm+Linear μGraph against its spec (an rms_norm kernel, then a matmul kernel): both
// stream W (50.3 MB) once; the spec adds a launch, the normalized X's round trip and the matmul's longer K
// loop.
TEST(CostModel, FusedRmsNormLinearBeatsSpec) {
  Cost fused = cost_file("examples/mugraphs/rmsnorm_linear_fused.mg");
  Cost spec = cost_file("examples/rmsnorm_linear_b1.mg");
  EXPECT_LT(fused.total_us, spec.total_us) << fused.str() << spec.str();
  std::cout << "rmsnorm+linear fused " << fused.total_us << " us, spec " << spec.total_us << " us\n";
}

// (g) Split-KV decode attention (1024 blocks over heads x KV splits) against the same computation on 8 blocks
// of 8 heads each: K and V (134 MB) then stream through 8 SMs, whose shared-memory fill rate, not DRAM,
// limits.
TEST(CostModel, SplitKvAttentionBeatsFewSms) {
  Cost split = cost_file("examples/mugraphs/attention_decode_split_kv.mg");
  Cost few = cost(
      "kernel attention_decode_few_sms(Q: f16[64,1,128], K: f16[64,128,4096], V: f16[64,4096,128]) {\n"
      "  Os, Ls, Ms = block(Q, K, V) grid=[8,1,1] threads=128 loop=128 {\n"
      "    q = iter(Q, imap=[0,-,-])\n"
      "    k = iter(K, imap=[0,-,-], fmap=2)\n"
      "    v = iter(V, imap=[0,-,-], fmap=1)\n"
      "    s = matmul(q, k)\n"
      "    m = reduce_max(s, dim=2)\n"
      "    d = sub(s, m)\n"
      "    e = exp(d)\n"
      "    l = reduce_sum(e, dim=2)\n"
      "    o = matmul(e, v)\n"
      "    M = acc_max(m)\n"
      "    Lacc = acc_rescale_sum(l, m)\n"
      "    Oacc = acc_rescale_sum(o, m)\n"
      "    save(Oacc, omap=[0,-,-])\n"
      "    save(Lacc, omap=[0,-,-])\n"
      "    save(M, omap=[0,-,-])\n"
      "  }\n"
      "  Mg = reduce_max(Ms, dim=1)\n"
      "  Dm = sub(Ms, Mg)\n"
      "  Wt = exp(Dm)\n"
      "  OW = mul(Os, Wt)\n"
      "  LW = mul(Ls, Wt)\n"
      "  Num = reduce_sum(OW, dim=1)\n"
      "  Den = reduce_sum(LW, dim=1)\n"
      "  O = div(Num, Den)\n"
      "  return O\n"
      "}\n");
  ASSERT_TRUE(few.feasible()) << few.str();
  EXPECT_LT(split.total_us, few.total_us) << split.str() << few.str();
  std::cout << "decode attention split-KV " << split.total_us << " us, 8 blocks " << few.total_us << " us\n";
}

// (h) The sector rule: reading X f16[65536,64] in 8-column strips (16 B of each 128-byte row) moves a whole 32-byte
// sector per row piece at the target's one-sector efficiency (0.73 on the H200: 32 / 0.73 = 43.8 B per 16 useful),
// 2.74 times the bytes of blocks that take whole rows.
std::string copy_of(const std::string& grid, const std::string& imap) {
  return "kernel copy(X: f16[65536,64]) {\n"
         "  Y = block(X) grid=[" + grid + "] threads=128 loop=1 {\n"
         "    x = iter(X, imap=[" + imap + "])\n"
         "    a = acc_sum(x)\n"
         "    save(a, omap=[" + imap + "])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, NarrowColumnStripsPayWholeSectors) {
  const auto& t = target("h200");
  ASSERT_EQ(t.memory.dram_sector_bytes, 32) << "the case is written for 32-byte sectors";
  Cost strips = cost(copy_of("8,512,1", "1,0,-")), rows = cost(copy_of("512,1,1", "0,-,-"));
  EXPECT_DOUBLE_EQ(rows.kernels[0].dram_read_bytes, 65536.0 * 64 * 2) << rows.str();
  EXPECT_DOUBLE_EQ(strips.kernels[0].dram_read_bytes, 65536.0 * 8 * 32 / t.cost.dram_short_run_efficiency)
      << strips.str();
  EXPECT_LT(rows.total_us, strips.total_us) << strips.str() << rows.str();
  std::cout << "8-column strips " << strips.total_us << " us, whole rows " << rows.total_us << " us\n";
}

// Loads are requested in whole L2 lines (l2_line_bytes): a GEMV's weight strips of 48 f16 columns (96-byte rows,
// one and a half lines each on average) count twice their bytes against the per-warp stream limit, 64-column strips
// (whole lines) their bytes; measured on the H100 (ncu, session 12): rmsnorm_linear's 128 blocks of 48 columns
// drew 36 GB/s of lines per SM, as gated_mlp's 64-byte rows did, and ran 22.2 us against 20.6 for 96 blocks of 64.
std::string gemv_strips(int blocks, int columns) {
  return "kernel gemv(X: f16[2,4096], W: f16[4096," + std::to_string(blocks * columns) + "]) {\n"
         "  Y = block(X, W) grid=[" + std::to_string(blocks) + ",1,1] threads=128 loop=32 {\n"
         "    x = iter(X, imap=[-,-,-], fmap=1)\n"
         "    w = iter(W, imap=[1,-,-], fmap=0)\n"
         "    p = matmul(x, w)\n"
         "    a = acc_sum(p)\n"
         "    save(a, omap=[1,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, LoadsAreRequestedInWholeLines) {
  const auto& t = target("h100");
  ASSERT_EQ(t.memory.l2_line_bytes, 128) << "the case is written for 128-byte lines";
  const KernelCost narrow = cost(gemv_strips(128, 48), "h100").kernels[0];
  const KernelCost wide = cost(gemv_strips(96, 64), "h100").kernels[0];
  const double x_bytes = 2.0 * 4096 * 2;  // X: whole rows, read by every block
  // Whole lines, or the sectors short runs move where those are more (dram_short_run_efficiency: 2% on the H100).
  EXPECT_NEAR((wide.line_bytes - 96 * x_bytes) / (4096.0 * 64 * 2 * 96), 1.0, 0.02) << wide.label;
  EXPECT_NEAR((narrow.line_bytes - 128 * x_bytes) / (4096.0 * 48 * 2 * 128), 2.0, 0.02) << narrow.label;
  // Not asserted: that the wide strips come out faster, as measured. Until session 13 this case ran on the A100's
  // file (the test's target lookup gave it for every name but h200), where they do; on the H100's the model ranks
  // them 1% slower (22.78 against 22.58 us), rmsnorm_linear's known mis-rank (bench/notes-fast-kernels-1.md).
}

// The copy engine requests a box's sectors, not a whole line per row: in the warps' stream floor its loads count their
// bytes. Strips of 32 f16 columns (64-byte rows) priced with the engine and without it ([async] tma off): the same
// memory time, and the engine's floor counts the W strips once where the threads' counts the lines their rows touch
// (twice the bytes). Measured on the H200: gated_mlp as one kernel of 128 blocks of 32-column strips (the engine
// moving both weights) ran 19.3-19.6 us against 20.7-21.1 for the two-kernel split-K form the model had ranked
// first because of the line count (bench/notes-fast-kernels-1.md, session 33).
TEST(CostModel, TheCopyEngineRequestsTheBytesOfItsRows) {
  targets::Target threads_only = target("h200");
  ASSERT_TRUE(threads_only.async.tma) << "the case is written for a target with the copy engine";
  threads_only.async.tma = false;
  const std::string src = gemv_strips(128, 32);
  const KernelCost engine = cost(src, "h200").kernels[0];
  const KernelCost threads = estimate(parse(src), threads_only).kernels[0];
  const double w_bytes = 4096.0 * 32 * 2 * 128;
  ASSERT_GT(engine.stages, 1) << "the engine moves pipelined loads only";
  EXPECT_GE(engine.engine_bytes, w_bytes) << engine.label;
  // A 64-byte row touches a whole 128-byte line: W's lines are about twice its bytes (the bytes count what its short
  // runs move, a little more than the rows; X's 256-byte rows are whole lines).
  EXPECT_GT(engine.engine_line_bytes - engine.engine_bytes, 0.8 * w_bytes) << engine.label;
  EXPECT_EQ(threads.engine_bytes, 0) << threads.label;
  EXPECT_NEAR(engine.memory_us, threads.memory_us, 1e-9);
  EXPECT_LT(engine.stream_us, 0.7 * threads.stream_us) << engine.label << " against " << threads.label;
}

// Tensors replicated over grid dims share the L2: two weights of 32 MiB each, each re-read by both row halves of
// X, fit a 50 MiB L2 alone but not together, so their second reads come from DRAM (gated_mlp's form that splits X's
// rows measured 30.7 us against 27.5 for one pass over the weights, H100, session 12); one of them alone is re-read
// from L2.
TEST(CostModel, ReplicatedTensorsShareTheL2) {
  const auto& t = target("h100");
  auto two_weights = [](int weights) {
    std::string src = "kernel g(X: f16[8,4096], W1: f16[4096,4096]" +
                      std::string(weights == 2 ? ", W2: f16[4096,4096]" : "") + ") {\n  Y = block(X, W1" +
                      (weights == 2 ? ", W2" : "") + ") grid=[2,128,1] threads=128 loop=16 {\n" +
                      "    x = iter(X, imap=[0,-,-], fmap=1)\n    w1 = iter(W1, imap=[-,1,-], fmap=0)\n" +
                      (weights == 2 ? "    w2 = iter(W2, imap=[-,1,-], fmap=0)\n" : "") +
                      "    p = matmul(x, w1)\n" + (weights == 2 ? "    q = matmul(x, w2)\n    r = add(p, q)\n" : "    r = exp(p)\n") +
                      "    a = acc_sum(r)\n    save(a, omap=[0,1,-])\n  }\n  return Y\n}\n";
    return src;
  };
  const double weight = 4096.0 * 4096 * 2;
  ASSERT_LT(weight, static_cast<double>(t.memory.l2_bytes / t.memory.l2_domains));
  ASSERT_GT(2 * weight, static_cast<double>(t.memory.l2_bytes / t.memory.l2_domains));
  const KernelCost one = cost(two_weights(1), "h100").kernels[0];
  const KernelCost two = cost(two_weights(2), "h100").kernels[0];
  EXPECT_GT(one.l2_reread_bytes, 0.9 * weight) << one.label;
  EXPECT_EQ(two.l2_reread_bytes, 0) << two.label;
  EXPECT_GT(two.dram_read_bytes, 2 * 2 * weight * 0.99) << two.label;
}

// A for-loop pipelines only loads that move whole 16-byte asynchronous copies: the same accumulation over 32
// iterations of rows of 8 f16 (16 bytes) is pipelined. Over rows of one f16 (the split-KV combine's partial sums)
// it is not; the lowering loads all iterations' tiles before the loop where they fit (targets::preload_fits, up to
// kMaxPreloadIterations), so the block waits once; past that every iteration waits for its load.
std::string column_sum(int columns, int loop) {
  const std::string n = std::to_string(columns), l = std::to_string(loop);
  return "kernel sum(X: f16[" + l + ",512," + n + "]) {\n"
         "  Y = block(X) grid=[512,1,1] threads=128 loop=" + l + " {\n"
         "    x = iter(X, imap=[1,-,-], fmap=0)\n"
         "    a = acc_sum(x)\n"
         "    save(a, omap=[1,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

// A loop of one-element rows (narrower than an asynchronous copy) is not pipelined; short enough, its loads go
// straight into each thread's registers, all iterations' at once (the lowering's element layout: one wait, no
// shared memory, no barrier); too long for that, it waits for every iteration's loads.
TEST(CostModel, LoopsWaitForLoadsNarrowerThanAnAsyncCopyUnlessInRegisters) {
  const auto& t = target("h200");
  const int many = static_cast<int>(targets::kMaxPreloadIterations) * 2;
  Cost vectors = cost(column_sum(8, 32)), elements = cost(column_sum(1, 32)), long_loop = cost(column_sum(1, many));
  EXPECT_GT(vectors.kernels[0].stages, 1) << vectors.str();
  EXPECT_FALSE(vectors.kernels[0].preloaded) << vectors.str();
  EXPECT_FALSE(vectors.kernels[0].loads_in_registers) << vectors.str();
  EXPECT_EQ(elements.kernels[0].stages, 1) << elements.str();
  EXPECT_TRUE(elements.kernels[0].loads_in_registers) << elements.str();
  EXPECT_EQ(elements.kernels[0].smem_bytes, 0) << elements.str();
  EXPECT_DOUBLE_EQ(elements.kernels[0].latency_us, t.cost.iteration_latency_us) << elements.str();
  EXPECT_FALSE(long_loop.kernels[0].loads_in_registers) << long_loop.str();
  EXPECT_EQ(long_loop.kernels[0].stages, 1) << long_loop.str();
  EXPECT_FALSE(long_loop.kernels[0].preloaded) << long_loop.str();
  EXPECT_DOUBLE_EQ(long_loop.kernels[0].latency_us, many * t.cost.iteration_latency_us) << long_loop.str();
  std::cout << "32 iterations of 16-byte rows " << vectors.total_us << " us, of 2-byte rows (in registers) "
            << elements.total_us << " us; " << many << " iterations of 2-byte rows " << long_loop.total_us << " us\n";
}

// A split-KV combine of one row per block folds its partial results in the registers of the threads that hold them
// (examples/mugraphs/gqa_b1_split_kv_blocks.mg, the search's gqa_b1 form): no shared memory, one wait for all of
// its loads, one level of its chain per iteration. A combine of several rows per block, whose [rows, 1] maxima
// rescale [rows, 64] partial outputs, is not held so: its tiles go through shared memory, a load level and a fold
// level every iteration.
TEST(CostModel, CombinesOfOneRowFoldInRegisters) {
  const auto& t = target("h100");
  const Cost one_row = cost_file("examples/mugraphs/gqa_b1_split_kv_blocks.mg", "h100");
  ASSERT_EQ(one_row.kernels.size(), 2u);
  const KernelCost& combine = one_row.kernels[1];
  EXPECT_TRUE(combine.loads_in_registers) << one_row.str();
  EXPECT_EQ(combine.smem_bytes, 0) << one_row.str();
  EXPECT_EQ(combine.barriers_per_block, combine.loop + 1) << one_row.str();  // a fold step each, the division
  EXPECT_DOUBLE_EQ(combine.latency_us, t.cost.iteration_latency_us) << one_row.str();
  EXPECT_FALSE(one_row.kernels[0].loads_in_registers) << one_row.str();

  const Cost rows = cost(
      "kernel c(Ls: f16[2,256,16], Os: f16[2,256,1024], Ms: f16[2,256,16]) {\n"
      "  O = block(Ls, Os, Ms) grid=[2,64,1] threads=128 loop=16 {\n"
      "    l = iter(Ls, imap=[0,1,-], fmap=2)\n"
      "    o = iter(Os, imap=[0,1,-], fmap=2)\n"
      "    m = iter(Ms, imap=[0,1,-], fmap=2)\n"
      "    L = acc_rescale_sum(l, m)\n"
      "    A = acc_rescale_sum(o, m)\n"
      "    y = div(A, L)\n"
      "    save(y, omap=[0,1,-])\n"
      "  }\n"
      "  return O\n"
      "}\n",
      "h100");
  EXPECT_FALSE(rows.kernels[0].loads_in_registers) << rows.str();
  EXPECT_GT(rows.kernels[0].smem_bytes, 0) << rows.str();
  EXPECT_GE(rows.kernels[0].barriers_per_block, 2 * rows.kernels[0].loop) << rows.str();
}

// Row tiles the lowering would hold in registers must fit together where most are live (keep_rows_in_registers'
// liveness): a flash body of 128 rows on 4 warps (two 16-row tasks a warp) with 64 keys an iteration holds its
// probabilities (read again after P·V), P·V and the output accumulator at once, 64 registers each, past three
// quarters of a thread's: the lowering keeps the score chain in shared memory, and so does the model. With 32 keys
// an iteration they fit.
TEST(CostModel, RowTilesMustFitTheRegistersTogether) {
  auto flash = [](int keys) {
    return cost("kernel f(Q: f16[16,256,64], K: f16[16,64,4096], V: f16[16,4096,64]) {\n"
                "  Ls, Os, Ms = block(Q, K, V) grid=[16,2,8] threads=128 loop=" + std::to_string(512 / keys) + " {\n"
                "    q = iter(Q, imap=[0,1,-])\n"
                "    k = iter(K, imap=[0,-,2], fmap=2)\n"
                "    v = iter(V, imap=[0,-,1], fmap=1)\n"
                "    s = matmul(q, k)\n"
                "    m = reduce_max(s, dim=2)\n"
                "    d = sub(s, m)\n"
                "    e = exp(d)\n"
                "    o = matmul(e, v)\n"
                "    l = reduce_sum(e, dim=2)\n"
                "    Oacc = acc_rescale_sum(o, m)\n"
                "    Lacc = acc_rescale_sum(l, m)\n"
                "    M = acc_max(m)\n"
                "    save(Oacc, omap=[0,1,2])\n"
                "    save(Lacc, omap=[0,1,2])\n"
                "    save(M, omap=[0,1,2])\n"
                "  }\n"
                "  return Os, Ls, Ms\n"
                "}\n",
                "h100")
        .kernels[0];
  };
  const KernelCost wide = flash(64), narrow = flash(32);
  EXPECT_EQ(wide.row_reductions_per_block, 0) << wide.label;  // the reductions pass over shared memory
  EXPECT_GT(narrow.row_reductions_per_block, 0) << narrow.label;
  EXPECT_GT(wide.time_us, narrow.time_us);
}

// A statement pass costs more the more elements each thread handles (pass_element_ns): the same chain over tiles of
// twice the rows counts twice the elements per thread, and the barrier levels stay the same.
std::string exp_rows(int rows) {
  return "kernel e(X: f16[" + std::to_string(rows * 4) + ",128]) {\n"
         "  Y = block(X) grid=[1,1,1] threads=128 loop=4 {\n"
         "    x = iter(X, imap=[-,-,-], fmap=0)\n"
         "    y = exp(x)\n"
         "    a = acc_sum(y)\n"
         "    save(a, omap=[-,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, PassesCostPerElementEachThreadHandles) {
  Cost small = cost(exp_rows(32)), large = cost(exp_rows(64));
  EXPECT_EQ(small.kernels[0].barriers_per_block, large.kernels[0].barriers_per_block);
  // exp and acc_sum each handle 32 x 128 elements over the block's threads, in each of 4 iterations.
  const double threads = static_cast<double>(small.kernels[0].threads);
  EXPECT_DOUBLE_EQ(small.kernels[0].pass_elements_per_block, 4 * 2 * 32 * 128 / threads) << small.str();
  EXPECT_DOUBLE_EQ(large.kernels[0].pass_elements_per_block, 2 * small.kernels[0].pass_elements_per_block);
  if (target("h200").cost.pass_element_ns > 0) {
    EXPECT_LT(small.total_us, large.total_us);
  }
}

// The lowering folds unaries into their neighbours (fuse_elementwise), and the model counts the same passes: here
// square folds into the sum, sqrt into the sum's write, and rms_norm is two passes (sum of squares, scaling).
TEST(CostModel, FoldedUnariesAddNoBarrierLevel) {
  auto levels = [](const std::string& body) {
    // Rows of 96: not a multiple of a warp's runs (targets::element_run: 2 here), so the tiles stay in shared
    // memory and every pass shows.
    return cost("kernel f(X: f16[64,96]) {\n"
                "  Y = block(X) grid=[4,1,1] threads=128 loop=1 {\n"
                "    x = iter(X, imap=[0,-,-])\n" +
                body +
                "    save(a, omap=[0,-,-])\n"
                "  }\n"
                "  return Y\n"
                "}\n")
        .kernels[0]
        .barriers_per_block;
  };
  // The sum of the squares and the division: square folds into the sum and sqrt into its write, so the chain
  // costs what the sum and the division alone cost.
  const int64_t folded =
      levels("    q = square(x)\n    r = reduce_sum(q, dim=1)\n    s = sqrt(r)\n    y = div(x, s)\n"
             "    a = acc_sum(y)\n");
  EXPECT_EQ(folded, levels("    r = reduce_sum(x, dim=1)\n    y = div(x, r)\n    a = acc_sum(y)\n"));
  // The square read twice keeps its pass.
  EXPECT_EQ(levels("    q = square(x)\n    r = reduce_sum(q, dim=1)\n    s = sqrt(r)\n    y = div(q, s)\n"
                   "    a = acc_sum(y)\n"),
            folded + 1);
  // rms_norm: the sum of squares, then the scaling.
  EXPECT_EQ(levels("    y = rms_norm(x, dim=1)\n    a = acc_sum(y)\n"), folded);
}

// A chain of elementwise ops whose every reader takes registers (the lowering's element layout) makes no pass over
// shared memory and adds no barrier level; a reader that needs the tile in shared memory (a reduction to groups
// inside rows) brings both back.
TEST(CostModel, ElementwiseChainsInRegistersAddNoBarrierLevel) {
  auto kernel = [](const std::string& body) {
    return cost("kernel f(X: f16[8,4096], Z: f16[8,4096]) {\n"
                "  Y = block(X, Z) grid=[8,1,1] threads=512 loop=1 {\n"
                "    x = iter(X, imap=[0,-,-])\n"
                "    z = iter(Z, imap=[0,-,-])\n"
                "    d = sub(x, z)\n"
                "    e = mul(d, x)\n" +
                body +
                "    save(a, omap=[0,-,-])\n"
                "  }\n"
                "  return Y\n"
                "}\n")
        .kernels[0];
  };
  // The loads' level and the accumulator's (the output's) only.
  const search::KernelCost chain = kernel("    a = acc_sum(e)\n");
  EXPECT_EQ(chain.barriers_per_block, 2);
  EXPECT_EQ(chain.pass_elements_per_block, 4096 / 512);
  // e read by a reduction to two groups per row: e, and so d, in shared memory, a pass and a level each.
  const search::KernelCost grouped =
      kernel("    g = reduce_sum(e, dim=1, to=2)\n    r = reduce_sum(g, dim=1)\n    y = div(e, r)\n    a = acc_sum(y)\n");
  EXPECT_GE(grouped.barriers_per_block, chain.barriers_per_block + 2);
  EXPECT_GE(grouped.pass_elements_per_block, chain.pass_elements_per_block + 2 * 4096 / 512);
}

// Memory and compute overlap imperfectly: a one-wave kernel's throughput time is the longer of the two plus
// overlap_miss of the shorter. A pipelined loop's barrier chain counts as compute, and one stage's memory time shows
// (the first stage lands before any math), and where memory is the longer also one iteration's share of compute (the
// last iteration's math follows the last copy); without a pipeline, at least 1/b of the shorter shows with b blocks
// resident per SM (a block's loads overlap only other blocks' math); and the warps' stream limit is a floor.
TEST(CostModel, ShorterOfMemoryAndComputeShowsByOverlapMiss) {
  const auto& t = target("h200");
  for (int rows : {64, 8}) {
    const KernelCost k = cost(row_split(132, rows)).kernels[0];
    SCOPED_TRACE(k.label + ", " + std::to_string(k.stages) + " stages");
    ASSERT_EQ(k.waves, 1);
    const bool pipelined = k.stages > 1;
    const double busy = k.compute_us + (pipelined ? k.barrier_us : 0);
    // A pipelined loop's chain shows through the miss in full from chain_shown_at of the memory time on.
    const double shown = k.compute_us + (pipelined ? k.barrier_us * std::min(1.0, k.barrier_us / (t.cost.chain_shown_at *
                                                                                                   k.memory_us))
                                                   : 0);
    const double miss =
        pipelined ? t.cost.overlap_miss : std::max(t.cost.overlap_miss, 1.0 / static_cast<double>(k.blocks_per_sm));
    const double throughput = std::max(std::max(k.memory_us, busy) + miss * std::min(k.memory_us, shown) +
                                           (pipelined ? (k.memory_us + (k.memory_us >= busy ? busy : 0)) /
                                                            static_cast<double>(k.loop)
                                                      : 0),
                                       k.stream_us);
    EXPECT_NEAR(k.time_us, throughput + (pipelined ? 0 : k.barrier_us) + k.latency_us + k.launch_us, 1e-9);
  }
  EXPECT_GT(t.cost.overlap_miss, 0) << "h200 inherits the H100's fitted overlap_miss";
  EXPECT_GT(t.cost.chain_shown_at, 0) << "and chain_shown_at";
}

// A pipelined loop's barrier chain hides behind its loads while it is short next to them: decode attention with one
// head per block (one-row tiles through shared memory, five barriers per 64 KiB iteration) against four heads per
// block (rows in registers, one barrier per iteration). Measured on the H100 (bench/notes-fast-kernels-1.md, session
// 15): 52.70 against 56.54 us; with the chain always in full the model ranked them the other way.
TEST(CostModel, ShortBarrierChainsHideBehindPipelinedLoads) {
  const Cost one_head = cost_file("bench/variants/attention_decode_head_per_block_64x2.mg", "h100");
  const Cost four_heads = cost_file("bench/variants/attention_decode_four_heads_16x8.mg", "h100");
  targets::Target always = target("h100");
  always.cost.chain_shown_at = 0;
  const Cost one_head_always =
      estimate(ir::parse_file("bench/variants/attention_decode_head_per_block_64x2.mg").programs.at(0), always);
  const KernelCost& flash = one_head.kernels[0];
  ASSERT_GT(flash.stages, 1) << one_head.str();
  EXPECT_LT(flash.barrier_us, 0.5 * flash.memory_us) << one_head.str();  // short next to its loads
  EXPECT_LT(one_head.total_us, one_head_always.total_us) << one_head.str() << one_head_always.str();
  EXPECT_LT(one_head.total_us, four_heads.total_us) << one_head.str() << four_heads.str();
}

// Row reductions in registers are steps of a block's chain: a split-KV flash kernel at one warp per scheduler pays
// them every iteration, so the same keys in half as many iterations are faster (H100, ncu: 7.90 us against 9.86),
// and the term widens the gap the model sees between them.
TEST(CostModel, RowReductionsAreStepsOfTheChain) {
  const std::string loop4 = "bench/variants/gqa_b1_splitkv_loop4.mg", loop8 = "bench/variants/gqa_b1_splitkv_loop8.mg";
  const Cost four = cost_file(loop4, "h100"), eight = cost_file(loop8, "h100");
  EXPECT_EQ(four.kernels[0].row_reductions_per_block, 2 * 4) << four.str();  // the max and the sum, every iteration
  EXPECT_EQ(eight.kernels[0].row_reductions_per_block, 2 * 8) << eight.str();
  EXPECT_LT(four.total_us, eight.total_us) << four.str() << eight.str();
  targets::Target without = target("h100");
  without.cost.row_reduction_ns = 0;
  const Cost four_without = estimate(ir::parse_file(loop4).programs.at(0), without);
  const Cost eight_without = estimate(ir::parse_file(loop8).programs.at(0), without);
  EXPECT_GT(eight.total_us - four.total_us, eight_without.total_us - four_without.total_us)
      << four.str() << eight.str() << four_without.str() << eight_without.str();
}

// ... and a warp reduces each of the row blocks it holds in turn: gqa_b8's flash kernel with 128 query rows per block
// (two blocks of the instruction's 16 rows per warp) pays twice the steps of the 64-row form for the same products,
// and runs 10% longer (H200, ncu, session 34: 30.9 against 28.2 us); the model ranks the 64-row form first.
TEST(CostModel, RowReductionsCountTheRowBlocksOfEachWarp) {
  const Cost q128 = cost_file("bench/variants/gqa_b8_splitkv_q128_s8_l8.mg", "h200");
  const Cost q64 = cost_file("bench/variants/gqa_b8_splitkv_q64_s4_l8.mg", "h200");
  EXPECT_EQ(q128.kernels[0].row_reductions_per_block, 2 * 8 * 2) << q128.str();  // max and sum, 8 iterations, 2 blocks
  EXPECT_EQ(q64.kernels[0].row_reductions_per_block, 2 * 8) << q64.str();
  EXPECT_LT(q64.kernels[0].time_us, q128.kernels[0].time_us) << q64.str() << q128.str();
}

// An rms_norm over its matmul operand's contraction dim (ir::norm_scaled_after) is its sum alone: one barrier level
// and no normalized tile, as the lowering builds it; the same norm over the other dim still writes its tile.
TEST(CostModel, NormsScaledAfterTheMatmulAreOneLevel) {
  std::ifstream in("tests/gpu/specs/flash_qknorm.mg");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Without Q's norm, whose levels (computed before the loop) would set the matmul's depth either way.
  std::string scaled_text = text;
  scaled_text.erase(scaled_text.find("    qn = rms_norm(q, dim=2)\n"), 28);
  scaled_text.replace(scaled_text.find("matmul(qn, kn)"), 14, "matmul(q, kn)");
  std::string other = scaled_text;
  other.replace(other.find("kn = rms_norm(k, dim=1)"), 23, "kn = rms_norm(k, dim=2)");
  const Cost scaled = cost(scaled_text), written = cost(other);
  ASSERT_TRUE(scaled.feasible() && written.feasible());
  const int64_t loop = 2;
  EXPECT_EQ(written.kernels[0].barriers_per_block - scaled.kernels[0].barriers_per_block, loop)
      << scaled.str() << written.str();
  EXPECT_LT(scaled.kernels[0].smem_bytes, written.kernels[0].smem_bytes) << scaled.str() << written.str();
}

// A block whose tiles cannot fit the opt-in shared memory is infeasible, not cheap.
TEST(CostModel, OversizedBlockIsInfeasible) {
  Cost c = cost(
      "kernel big(X: f32[4096,4096]) {\n"
      "  Y = block(X) grid=[1,1,1] threads=128 loop=1 {\n"
      "    x = iter(X, imap=[-,-,-])\n"
      "    a = acc_sum(x)\n"
      "    save(a, omap=[-,-,-])\n"
      "  }\n"
      "  return Y\n"
      "}\n");
  EXPECT_FALSE(c.feasible()) << c.str();
  EXPECT_TRUE(std::isinf(c.total_us)) << c.str();
}

// The full breakdown of one example, so that any change to the model shows up as a reviewed diff
// (MORGANA_BLESS=1 rewrites the file).
TEST(CostModelGolden, RmsNormLinearFused) {
  morgana::testing::expect_golden("tests/golden/search/rmsnorm_linear_fused.h200.txt",
                                  cost_file("examples/mugraphs/rmsnorm_linear_fused.mg").str());
}

}  // namespace
}  // namespace morgana::search

namespace morgana::search {
namespace {

// Rows that are part of an L2 line (96-byte slices of a 12 KiB row) take a request for each line they touch, which
// the cost model prices per request on each busy SM (partial_line_request_ns); rows of whole 128-byte lines cost
// nothing extra (ncu on the H100: rmsnorm_linear's 48-column W tiles, 2.5x the L2 requests of 64-column ones).
std::string column_slices(int blocks) {
  return "kernel slices(W: f16[256,6144]) {\n"
         "  Y = block(W) grid=[" + std::to_string(blocks) + ",1,1] threads=128 loop=1 {\n"
         "    w = iter(W, imap=[1,-,-])\n"
         "    a = acc_sum(w)\n"
         "    save(a, omap=[1,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, RowsOfPartLinesCostTheirExtraRequests) {
  const KernelCost part = cost(column_slices(128), "h100").kernels[0];  // 48 columns: 96-byte rows
  const KernelCost whole = cost(column_slices(96), "h100").kernels[0];  // 64 columns: 128-byte rows
  EXPECT_GT(part.partial_line_bytes, 0) << part.label;
  EXPECT_EQ(whole.partial_line_bytes, 0) << whole.label;
  EXPECT_GT(target("h100").cost.partial_line_request_ns, 0);
}


// A kernel is priced where it stands: a combine folding partial results that a previous kernel left in the
// workspace loads them into registers, the same block op over a spec input streams it through the copy engine
// (sm_90a TMA). So the search must price a last op's sizes in its program (generator best_sizes; H100
// gqa_h16_d80_k1024's combine grids tie alone at 5.17 us, in the program the best is 3.89), and the context hash
// it memoises them by tells the two apart.
// The end of a program: a block op folding P's rows over `loop` iterations, its result returned.
std::string fold_of_p(int blocks, int threads, int loop) {
  return "  Y = block(P) grid=[" + std::to_string(blocks) + ",1,1] threads=" + std::to_string(threads) +
         " loop=" + std::to_string(loop) +
         " {\n"
         "    p = iter(P, imap=[0,-,-], fmap=1)\n"
         "    a = acc_sum(p)\n"
         "    save(a, omap=[0,-,-])\n"
         "  }\n"
         "  return Y\n"
         "}\n";
}

TEST(CostModel, AKernelIsPricedWithItsOperandsAsTheKernelsBeforeLeaveThem) {
  const ir::Graph after = parse("kernel after(X: f32[64,2048]) {\n  P = exp(X)\n" + fold_of_p(64, 128, 8));
  const ir::Graph alone = parse("kernel alone(P: f32[64,2048]) {\n" + fold_of_p(64, 128, 8));
  const ir::Node& fold_after = after.nodes()[after.nodes().size() - 2];
  const ir::Node& fold_alone = alone.nodes()[alone.nodes().size() - 2];
  ASSERT_EQ(fold_after.op, ir::OpCode::block);
  ASSERT_EQ(fold_alone.op, ir::OpCode::block);
  const KernelCost in_program = estimate_kernel(after, fold_after, target("h100"));
  const KernelCost by_itself = estimate_kernel(alone, fold_alone, target("h100"));
  EXPECT_TRUE(in_program.loads_in_registers) << estimate(after, target("h100")).str();
  EXPECT_FALSE(by_itself.loads_in_registers) << estimate(alone, target("h100")).str();
  EXPECT_NE(in_program.time_us, by_itself.time_us);
  EXPECT_NE(kernel_context_hash(after, after.operands(fold_after)), kernel_context_hash(alone, alone.operands(fold_alone)));
  // estimate() is the sum of its kernels, each priced where it stands.
  const Cost whole = estimate(after, target("h100"));
  ASSERT_EQ(whole.kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(whole.kernels[1].time_us, in_program.time_us);
}

// Blocks start one after another device-wide (block_dispatch_ns): the same fold in 4096 one-warp blocks pays their
// dispatch, in 1024 four-warp blocks far less of it (H100: gqa_b8's combine 5.28 us under ncu as 4096 blocks of 32
// threads, 4.51 as 1024 of 128; the model without the term had them 4.16 against 5.13).
std::string row_fold(int rows_per_block) {
  return "kernel fold(X: f32[4096,256]) {\n  P = exp(X)\n" + fold_of_p(4096 / rows_per_block, 32 * rows_per_block, 4);
}

TEST(CostModel, ManySmallBlocksPayTheirDispatch) {
  targets::Target undispatched = target("h100");
  ASSERT_GT(undispatched.cost.block_dispatch_ns, 0);
  undispatched.cost.block_dispatch_ns = 0;
  const ir::Graph one_row = parse(row_fold(1)), four_rows = parse(row_fold(4));
  // The fold is the second kernel (its operand a previous kernel's result, folded in registers).
  const double one = estimate(one_row, target("h100")).kernels[1].time_us,
               one_free = estimate(one_row, undispatched).kernels[1].time_us;
  const double four = estimate(four_rows, target("h100")).kernels[1].time_us,
               four_free = estimate(four_rows, undispatched).kernels[1].time_us;
  EXPECT_GT(one - one_free, four - four_free) << estimate(one_row, undispatched).str() << one << " " << one_free << " " << four << " " << four_free;
}

// A flash kernel keeps its score, probability and output tiles in registers; they, not only its accumulators, decide
// how many of its blocks share an SM (H100: qknorm_b8's 512-block form priced at 65 registers ran at 212, two
// blocks per SM, in two waves, 32.5 us against 27.2 for the 256-block form the model had ranked second).
TEST(CostModel, RowTilesCountInTheRegisters) {
  const Cost c = cost_file("examples/mugraphs/gqa_b1_flash.mg", "h100");
  ASSERT_FALSE(c.kernels.empty());
  const KernelCost& flash = c.kernels[0];
  EXPECT_GE(flash.regs_per_thread, 96) << c.str();
}

}  // namespace
}  // namespace morgana::search

namespace morgana::search {
namespace {

// A block reading a latent cache as Cᵀ for the scores and as C for P·C (multi-head latent attention's split kernel)
// loads each tile of it once (the lowering's pass 3e): the cache's bytes count once, as for a block that reads it
// through one operand. Read through the transpose by anything but matmuls' B, the view is loaded apart (element by
// element) and counts again.
TEST(CostModel, ACacheReadAsItsTransposeAndAsItIsCountsOnce) {
  std::ifstream in("tests/gpu/specs/transposed_latent.mg");
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const KernelCost both = cost(src, "h100").kernels[0];
  const double cache = 512.0 * 64 * 2, queries = 8.0 * 64 * 2;
  EXPECT_DOUBLE_EQ(both.dram_read_bytes, cache + queries) << both.label;
  EXPECT_DOUBLE_EQ(both.smem_fill_bytes, 32.0 * 64 * 2 * 4 + queries) << both.label;

  std::string apart = src;
  apart.replace(apart.find("s = matmul(q, kt)"), 17, "kx = exp(kt)\n    s = matmul(q, kx)");
  const KernelCost twice = cost(apart, "h100").kernels[0];
  EXPECT_GT(twice.dram_read_bytes, 2 * cache) << twice.label;
}

}  // namespace
}  // namespace morgana::search
