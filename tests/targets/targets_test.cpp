// Tests of the hardware-description loader (targets/target.h): the shipped target files load with the numbers
// we expect, inheritance merges key by key, and every malformed file under bad/ is rejected with exactly the
// diagnostic in its sibling .expected file. Run from the project source root (meson's workdir) so the paths
// in diagnostics are relative and stable. MORGANA_BLESS=1 rewrites the .expected files instead of comparing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "ir/diagnostic.h"
#include "targets/target.h"
#include "tests/targets/cuda/ptx_isa_model.h"

namespace morgana::targets {
namespace {

namespace fs = std::filesystem;

const fs::path kTargets = "targets";
const fs::path kBad = "tests/targets/bad";
const fs::path kGood = "tests/targets/good";

bool blessing() {
  const char* v = std::getenv("MORGANA_BLESS");
  return v != nullptr && std::string_view(v) == "1";
}

// Compares `actual` with the golden file, or rewrites the golden file when blessing.
void expect_golden(const fs::path& golden, const std::string& actual) {
  if (blessing()) {
    std::ofstream(golden) << actual;
    std::cout << "note: MORGANA_BLESS=1: rewrote " << golden.generic_string() << "\n";
    return;
  }
  std::ifstream in(golden);
  ASSERT_TRUE(in) << "no golden file " << golden << "; create it with MORGANA_BLESS=1, then review the diff";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(expected.str(), actual) << "golden file " << golden;
}

// The diagnostic a load produces, as a user would see it; fails the test if the load succeeds.
// The folder of target files is the source root: the fixtures under bad/ reach targets/cuda/h100.toml as their base.
std::string load_error(const fs::path& file) {
  try {
    load_target(file, ".");
  } catch (const UserError& e) {
    return e.render() + "\n";
  }
  ADD_FAILURE() << file << " loaded, but it should have been rejected";
  return "";
}

const MatrixInstr* find_matrix(const Target& t, std::string_view op) {
  for (const auto& m : t.matrix)
    if (m.op == op) return &m;
  return nullptr;
}

TEST(Targets, EveryShippedFileLoads) {
  std::vector<fs::path> files = list_target_files(kTargets);
  EXPECT_GE(files.size(), 6u);
  for (const auto& f : files) {
    try {
      Target t = load_target(f);
      EXPECT_EQ(t.identity.name, f.stem().string());
    } catch (const UserError& e) {
      ADD_FAILURE() << e.render();
    }
  }
}

// The files' convention, which TOML parsers cannot see: every number carries a trailing comment naming its
// source.
// The lane layouts of mma.sync m16n8k16 in the shipped files are the PTX ISA's, element by element (the model in
// tests/targets/cuda/ptx_isa_model.h is written in the ISA's own terms, not as bit weights).
TEST(Targets, MmaLaneLayoutsAreThePtxIsas) {
  auto at = [](const std::vector<int64_t>& w, int lane, int v) {
    int64_t sum = 0;
    const uint64_t bits = static_cast<uint64_t>(lane) | (static_cast<uint64_t>(v) << 5);
    for (size_t b = 0; b < w.size(); ++b) sum += ((bits >> b) & 1) * w[b];
    return sum;
  };
  int checked = 0;
  for (const auto& f : list_target_files(kTargets)) {
    Target t = load_target(f);
    for (const MatrixInstr& m : t.matrix) {
      if (m.op != "mma.sync.aligned.m16n8k16") continue;
      ASSERT_TRUE(m.has_lane_layouts()) << f;
      ASSERT_EQ(t.execution.warp_size, mg_isa::kLanes);
      for (int lane = 0; lane < mg_isa::kLanes; ++lane) {
        for (int v = 0; v < 8; ++v) {
          EXPECT_EQ(at(m.a_rows, lane, v), mg_isa::mma_m16n8k16_a(lane, v).row) << f << " A lane " << lane << " v " << v;
          EXPECT_EQ(at(m.a_cols, lane, v), mg_isa::mma_m16n8k16_a(lane, v).col) << f << " A lane " << lane << " v " << v;
        }
        for (int v = 0; v < 4; ++v) {
          EXPECT_EQ(at(m.b_rows, lane, v), mg_isa::mma_m16n8k16_b(lane, v).row) << f << " B lane " << lane << " v " << v;
          EXPECT_EQ(at(m.b_cols, lane, v), mg_isa::mma_m16n8k16_b(lane, v).col) << f << " B lane " << lane << " v " << v;
          EXPECT_EQ(at(m.c_rows, lane, v), mg_isa::mma_m16n8k16_c(lane, v).row) << f << " C lane " << lane << " v " << v;
          EXPECT_EQ(at(m.c_cols, lane, v), mg_isa::mma_m16n8k16_c(lane, v).col) << f << " C lane " << lane << " v " << v;
        }
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 3);  // a100, h100 (h200 inherits it), rtx4090
}

TEST(Targets, EveryNumberHasASource) {
  const std::regex number_line(R"(^\s*\w+\s*=\s*[-+]?[0-9])");
  for (const auto& f : list_target_files(kTargets)) {
    std::ifstream in(f);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (std::regex_search(line, number_line) && line.find('#') == std::string::npos)
        ADD_FAILURE() << f.generic_string() << ":" << n << ": number without a source comment: " << line;
  }
}

TEST(Targets, ListIsRecursiveAndSorted) {
  std::vector<std::string> names;
  for (const auto& f : list_target_files(kTargets)) names.push_back(f.generic_string());
  std::vector<std::string> expected = {"targets/cuda/a100.toml",  "targets/cuda/h100.toml",
                                       "targets/cuda/h200.toml",  "targets/cuda/rtx4090.toml",
                                       "targets/hip/mi250x.toml", "targets/hip/mi300x.toml"};
  EXPECT_EQ(names, expected);
}

// The one matmul tiling rule (lowering and cost model): decode attention's Q·K of 4 heads x 512 keys on 4 warps has
// 64 tasks of 4 atoms, 256 accumulator registers a thread, so its accumulators stay in shared memory; 128 keys take
// 64 (over the quarter of 255 that loop accumulators get; row chains allow a third). A result narrower than one atom
// still counts one task (no division by zero).
TEST(Targets, MatmulTilingAndTheRegisterRule) {
  const Target t = load_target("targets/cuda/h100.toml");
  const MatrixInstr* mma = find_matrix(t, "mma.sync.aligned.m16n8k16");
  ASSERT_NE(mma, nullptr);
  MatmulTiling wide = matmul_tiling(t, *mma, 4, 1, 512, 16, 4);
  EXPECT_EQ(wide.atoms_n, 4);
  EXPECT_EQ(wide.tasks, 64);
  EXPECT_EQ(wide.k_split, 1);
  EXPECT_EQ(wide.registers, 256);
  EXPECT_FALSE(accumulators_fit(t, wide));
  MatmulTiling narrow = matmul_tiling(t, *mma, 4, 1, 128, 16, 4);
  EXPECT_EQ(narrow.registers, 64);
  EXPECT_FALSE(accumulators_fit(t, narrow));  // 64 x 4 > 255
  MatmulTiling split = matmul_tiling(t, *mma, 1, 1, 32, 512, 4);  // one task: the other warps take parts of K
  EXPECT_EQ(split.tasks, 1);
  EXPECT_EQ(split.k_split, 4);
  EXPECT_TRUE(accumulators_fit(t, split));
  MatmulTiling tiny = matmul_tiling(t, *mma, 1, 8, 4, 128, 4);
  EXPECT_GE(tiny.tasks, 1);
  EXPECT_GE(tiny.registers, 1);
}

TEST(Targets, H200InheritsFromH100) {
  Target t = find_target("h200", kTargets);
  EXPECT_EQ(t.file, fs::path("targets/cuda/h200.toml"));
  ASSERT_EQ(t.bases.size(), 1u);
  EXPECT_EQ(t.bases[0], fs::path("targets/cuda/h100.toml"));
  EXPECT_EQ(t.identity.name, "h200");
  EXPECT_EQ(t.identity.vendor, "nvidia");  // inherited
  EXPECT_EQ(t.identity.arch, "sm_90a");    // inherited
  EXPECT_EQ(t.execution.sms, 132);
  EXPECT_EQ(t.execution.warp_size, 32);
  EXPECT_EQ(t.memory.smem_per_block_default, 49152);
  EXPECT_EQ(t.memory.smem_per_block_optin, 232448);
  EXPECT_EQ(t.memory.smem_per_sm, 233472);
  EXPECT_EQ(t.memory.smem_reserved_per_block, 1024);
  EXPECT_EQ(t.memory.l2_bytes, 62914560);  // overridden: 60 MiB against the H100's 50
  EXPECT_EQ(t.memory.dram_bandwidth_gbps, 4800);
  EXPECT_EQ(t.registers.max_regs_per_thread, 255);  // inherited
  EXPECT_TRUE(t.async.wgmma && t.async.tma && t.async.clusters);
  EXPECT_EQ(t.peak.f16_tensor, 989);
  EXPECT_DOUBLE_EQ(t.cost.dram_efficiency, 0.885);
  EXPECT_DOUBLE_EQ(t.cost.barrier_ns, 100);  // inherited from [cost] of h100 while two keys are overridden
  EXPECT_EQ(t.async.max_stages, 8);          // [async] overridden key by key: tma etc. inherited
  EXPECT_EQ(t.async.in_flight_bytes, 6000000);

  const MatrixInstr* wgmma = find_matrix(t, "wgmma.mma_async.m64nNk16");
  ASSERT_NE(wgmma, nullptr);
  EXPECT_EQ(wgmma->scope, "warpgroup");
  EXPECT_EQ(wgmma->m, 64);
  EXPECT_EQ(wgmma->k, 16);
  EXPECT_TRUE(wgmma->supports_n(8));
  EXPECT_TRUE(wgmma->supports_n(256));
  EXPECT_TRUE(wgmma->supports_n(136));
  EXPECT_FALSE(wgmma->supports_n(12));
  EXPECT_FALSE(wgmma->supports_n(264));
  EXPECT_EQ(wgmma->b_from, std::vector<std::string>{"shared"});
  const MatrixInstr* mma = find_matrix(t, "mma.sync.aligned.m16n8k16");
  ASSERT_NE(mma, nullptr);
  EXPECT_TRUE(mma->supports_n(8));
  EXPECT_FALSE(mma->supports_n(16));
}

TEST(Targets, H100) {
  Target t = find_target("h100", kTargets);
  EXPECT_TRUE(t.bases.empty());
  EXPECT_EQ(t.memory.l2_bytes, 52428800);
  EXPECT_EQ(t.memory.dram_bandwidth_gbps, 3350);
  EXPECT_EQ(t.matrix.size(), 2u);
  EXPECT_EQ(t.async.max_stages, 4);
  EXPECT_EQ(t.async.in_flight_bytes, 0);
}

// The one pipelining rule (targets::pipeline_stages): as many buffers as fit without costing a busy block, up to
// [async] max_stages, and where the target gives in_flight_bytes, no more than the fewest whose copies in flight
// over the resident blocks reach it, counting what the DRAM streams (a tile every block reads is L2's).
TEST(Targets, PipelinesKeepTheTargetsBytesInFlight) {
  const Target h100 = find_target("h100", kTargets), h200 = find_target("h200", kTargets);
  // A GEMV stream: 96 blocks of 128 threads, 16 KiB of weights and 512 B of broadcast activations per stage.
  const int64_t smem = 20480, stage = 16384 + 512, stream = 16384 + stream_share(512, 96, 96);
  EXPECT_EQ(stream_share(512, 96, 96), 0);    // every block reads it
  EXPECT_EQ(stream_share(512, 2, 96), 512);   // some blocks share it: counted in full
  EXPECT_EQ(stream_share(512, 1, 1), 512);    // the only block reads it
  EXPECT_EQ(pipeline_stages(h100, 96, 128, smem, stage, 32, stream), 4);  // no in_flight_bytes: the cap
  // 6 MB over 96 x 16 KiB per stage: 4 stages ahead, 5 buffers.
  EXPECT_EQ(pipeline_stages(h200, 96, 128, smem, stage, 32, stream), 5);
  // 128 blocks: 3 ahead suffice.
  EXPECT_EQ(pipeline_stages(h200, 128, 128, smem, stage, 32, stream), 4);
  // A small grid would need ~46 ahead: the cap, and never more than the loop's iterations.
  EXPECT_EQ(pipeline_stages(h200, 8, 128, smem, stage, 32, stream), h200.async.max_stages);
  EXPECT_EQ(pipeline_stages(h200, 8, 128, smem, stage, 3, stream), 3);
  // Big stages: at least two buffers, and none where two do not fit.
  EXPECT_EQ(pipeline_stages(h200, 132, 128, smem, 1 << 16, 32, 1 << 16), 2);
  EXPECT_EQ(pipeline_stages(h200, 132, 128, smem, block_smem_limit(h200), 32, 1 << 16), 1);
  EXPECT_EQ(pipeline_stages(h200, 96, 128, smem, stage, 1, stream), 1);  // a loop of one
}

// The one threads rule (targets::block_threads): a grid that leaves SMs idle gets more threads per block, up to
// half the block limit, unless it has matmuls (whose warp tilings the block's warps set).
TEST(Targets, SmallGridsWithoutMatmulsGetMoreThreads) {
  const Target t = find_target("h100", kTargets);
  ASSERT_EQ(t.execution.max_threads_per_block, 1024);
  const int64_t big = int64_t{1} << 20;  // tiles that give every thread plenty
  EXPECT_EQ(block_threads(t, 8, 128, false, 1, big), 512);
  EXPECT_EQ(block_threads(t, 8, 32, false, 1, big), 512);
  EXPECT_EQ(block_threads(t, 8, 128, true, 1, big), 128);
  EXPECT_EQ(block_threads(t, t.execution.sms, 128, false, 1, big), 128);
  EXPECT_EQ(block_threads(t, 8, 512, false, 1, big), 512);
}

// ... and a block that loops (a combine) fewer, down to a warp, where its largest tile would leave a thread fewer
// than two elements; a block with matmuls, or without a loop, keeps its threads.
TEST(Targets, CombinesOfSmallTilesGetFewerThreads) {
  const Target t = find_target("h100", kTargets);
  const int64_t many = 4 * t.execution.sms, warp = t.execution.warp_size;
  EXPECT_EQ(block_threads(t, many, 128, false, 16, 128), 64);   // one row of 128 columns, 16 splits
  EXPECT_EQ(block_threads(t, many, 128, false, 8, 80), warp);   // one row of 80
  EXPECT_EQ(block_threads(t, many, 128, false, 8, 1), warp);
  EXPECT_EQ(block_threads(t, many, 128, false, 8, 256), 128);
  EXPECT_EQ(block_threads(t, many, 128, false, 1, 128), 128);   // no loop
  EXPECT_EQ(block_threads(t, many, 128, true, 8, 128), 128);    // matmuls
  EXPECT_EQ(block_threads(t, 64, 128, false, 8, 1024), 512);    // raised for the idle SMs, then kept: two each
  EXPECT_EQ(block_threads(t, 64, 128, false, 8, 512), 256);
}

TEST(Targets, A100AndRtx4090) {
  Target a = find_target("a100", kTargets);
  EXPECT_EQ(a.identity.arch, "sm_80");
  EXPECT_EQ(a.execution.sms, 108);
  EXPECT_EQ(a.memory.smem_per_block_optin, 166912);
  EXPECT_FALSE(a.async.wgmma);
  ASSERT_EQ(a.matrix.size(), 1u);
  EXPECT_EQ(a.matrix[0].ab_types, (std::vector<std::string>{"f16", "bf16"}));

  Target g = find_target("rtx4090", kTargets);
  EXPECT_EQ(g.identity.arch, "sm_89");
  EXPECT_EQ(g.execution.sms, 128);
  EXPECT_EQ(g.execution.max_threads_per_sm, 1536);
  EXPECT_EQ(g.memory.smem_per_block_optin, 101376);
}

TEST(Targets, Mi250xAndMi300x) {
  Target g = find_target("mi250x", kTargets);
  EXPECT_EQ(g.identity.vendor, "amd");
  EXPECT_EQ(g.identity.arch, "gfx90a");
  EXPECT_EQ(g.execution.sms, 110);
  EXPECT_EQ(g.execution.warp_size, 64);
  EXPECT_EQ(g.memory.smem_per_block_optin, 65536);

  Target t = find_target("mi300x", kTargets);
  ASSERT_EQ(t.bases.size(), 1u);
  EXPECT_EQ(t.bases[0], fs::path("targets/hip/mi250x.toml"));
  EXPECT_EQ(t.identity.arch, "gfx942");
  EXPECT_EQ(t.identity.family, "cdna3");
  EXPECT_EQ(t.execution.sms, 304);
  EXPECT_EQ(t.execution.warp_size, 64);
  EXPECT_EQ(t.memory.smem_per_sm, 65536);
  EXPECT_EQ(t.memory.l2_domains, 8);
  EXPECT_EQ(t.memory.mall_bytes, 268435456);
  EXPECT_EQ(t.peak.f16_tensor, 1307);
  ASSERT_EQ(t.matrix.size(), 4u);  // inherited from mi250x
  for (const auto& m : t.matrix) EXPECT_EQ(m.scope, "wave");
  const MatrixInstr* mfma = find_matrix(t, "v_mfma_f32_32x32x8f16");
  ASSERT_NE(mfma, nullptr);
  EXPECT_EQ(mfma->m, 32);
  EXPECT_EQ(mfma->n, 32);
  EXPECT_EQ(mfma->k, 8);
}

// good/child.toml overrides some keys of good/parent.toml and replaces its [[matrix]] list;
// good/sub/grandchild.toml reaches child.toml by a relative path.
TEST(Targets, InheritanceMergesKeyByKey) {
  Target parent = load_target(kGood / "parent.toml");
  Target child = load_target(kGood / "child.toml");
  EXPECT_EQ(child.identity.name, "child");
  EXPECT_EQ(child.identity.description, parent.identity.description);
  EXPECT_EQ(child.execution.sms, 7);
  EXPECT_EQ(parent.execution.sms, 4);
  EXPECT_EQ(child.execution.warp_size, parent.execution.warp_size);
  EXPECT_EQ(child.memory.l2_bytes, 2048);
  EXPECT_EQ(child.memory.smem_per_sm, parent.memory.smem_per_sm);
  EXPECT_EQ(parent.matrix.size(), 2u);
  ASSERT_EQ(child.matrix.size(), 1u);  // arrays replace wholesale
  EXPECT_EQ(child.matrix[0].op, "child.op");
  EXPECT_TRUE(parent.matrix[1].supports_n(8));
  EXPECT_FALSE(parent.matrix[1].supports_n(9));
  EXPECT_TRUE(load_target(kGood / "cleared.toml").matrix.empty());

  Target grandchild = load_target(kGood / "sub" / "grandchild.toml", kGood);  // its base is in the folder above
  // Without the folder of target files, a file's bases must be in its own folder.
  EXPECT_THROW(load_target(kGood / "sub" / "grandchild.toml"), UserError);
  EXPECT_EQ(grandchild.bases,
            (std::vector<fs::path>{"tests/targets/good/child.toml", "tests/targets/good/parent.toml"}));
  EXPECT_EQ(grandchild.identity.name, "grandchild");
  EXPECT_EQ(grandchild.execution.sms, 7);
  EXPECT_EQ(grandchild.memory.l2_bytes, 4096);
  EXPECT_EQ(grandchild.matrix.size(), 1u);
}

TEST(Targets, CycleIsDetected) {
  EXPECT_THROW(load_target(kBad / "cycle_a.toml"), UserError);
  EXPECT_THROW(load_target(kBad / "self_base.toml"), UserError);
}

TEST(Targets, FindTargetReportsUnknownNames) {
  try {
    find_target("h2OO", kTargets);
    FAIL() << "found a target that does not exist";
  } catch (const UserError& e) {
    EXPECT_EQ(e.render(),
              "error: unknown target 'h2OO'; did you mean 'h200'? (known: a100, h100, h200, rtx4090, mi250x, "
              "mi300x)");
  }
  EXPECT_THROW(list_target_files("no/such/dir"), UserError);
}

TEST(Targets, Table) {
  expect_golden("tests/targets/table.expected", render_targets_table(load_all_targets(kTargets)));
}

// Every file under bad/ must be rejected with exactly the diagnostic in <name>.expected.
std::vector<std::string> bad_files() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kBad, ec))
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Targets, EnoughMalformedFiles) {
  EXPECT_GE(bad_files().size(), 8u) << "run from the project source root";
}

class BadTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(BadTarget, IsRejectedWithExpectedDiagnostic) {
  fs::path file = kBad / (GetParam() + ".toml");
  expect_golden(kBad / (GetParam() + ".expected"), load_error(file));
}

INSTANTIATE_TEST_SUITE_P(Bad, BadTarget, ::testing::ValuesIn(bad_files()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace morgana::targets

namespace morgana::targets {
namespace {

// Issue 17, reproducer 3: a target that reserves no shared memory per block (`smem_reserved_per_block = 0`, which
// the schema allows) and a kernel without shared memory divided by zero (SIGFPE, exit 136, no message).
TEST(Occupancy, ABlockWithoutSharedMemoryOnATargetThatReservesNoneIsNotLimitedByIt) {
  Target t = load_target("targets/cuda/h100.toml");
  t.memory.smem_reserved_per_block = 0;
  EXPECT_EQ(resident_blocks_per_sm(t, 128, 0, 32), std::min<int64_t>(t.execution.max_blocks_per_sm,
                                                                        t.execution.max_threads_per_sm / 128));
  EXPECT_EQ(resident_blocks_per_sm(t, 128, 1024, 32), std::min<int64_t>({t.execution.max_blocks_per_sm,
                                                                           t.execution.max_threads_per_sm / 128,
                                                                           t.memory.smem_per_sm / 1024}));
}

}  // namespace
}  // namespace morgana::targets
