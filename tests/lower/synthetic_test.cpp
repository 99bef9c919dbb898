// The lowering on synthetic targets (tests/lower/targets): a 64-wide warp with 64 KiB of shared memory, and a GPU
// with 4 KiB (8 KiB opt-in) of shared memory. Nothing may assume a warp of 32 or a shared-memory size: default
// tilings follow the target, results stay right, and a μGraph whose tiles do not fit is a precise user error.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "targets/cuda/codegen.h"
#include "targets/lower/lower.h"
#include "tests/lower/common.h"
#include "verify/equivalence.h"

namespace morgana::testing {
namespace {

// The source root is their folder of target files: they inherit the shipped targets/cuda files.
targets::Target wave64() { return targets::load_target("tests/lower/targets/wave64.toml", "."); }
targets::Target tiny() { return targets::load_target("tests/lower/targets/tiny.toml", "."); }

// Lowers and runs every program small enough for a quick CPU run that fits `t`; returns how many ran.
int run_all(const targets::Target& t, int64_t max_elements) {
  int runs = 0;
  for (const TestProgram& tp : test_programs()) {
    int64_t elements = 0;
    for (size_t i = 0; i < tp.graph.num_tensors(); ++i) elements += tp.graph.type(static_cast<ir::TensorId>(i)).numel();
    if (elements > max_elements) continue;
    SCOPED_TRACE(tp.id + " on " + t.identity.name);
    lower::LoweredProgram p;
    try {
      p = lower::lower(tp.graph, t);
    } catch (const UserError& e) {
      // Only hand-written block ops may be too big; predefined ops always find a tiling.
      EXPECT_NE(e.message().find("block op"), std::string::npos) << e.render();
      continue;
    }
    for (const lower::Kernel& k : p.kernels) {
      EXPECT_LE(k.smem_bytes, lower::shared_memory_limit(t)) << k.entry;
      EXPECT_LE(k.block[0], t.execution.max_threads_per_block) << k.entry;
    }
    verify::EquivalenceOptions o;
    o.full = true;
    lower::TiledGraph tiled = lower::tile_kernel_ops(tp.graph, t);
    verify::Verdict v = verify::equivalent(tp.graph, tiled.graph, o);
    EXPECT_TRUE(v.equivalent()) << v.str() << "\n" << ir::print(tiled.graph);
    std::vector<verify::FloatArray> in = verify::random_inputs(tp.graph, 3);
    std::vector<verify::FloatArray> want = verify::eval_float(tp.graph, in);
    std::vector<std::vector<double>> got = run_on_cpu(p, in);
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
    ++runs;
  }
  return runs;
}

TEST(SyntheticTarget, Warp64TilesFollowTheTarget) {
  targets::Target t = wave64();
  ASSERT_EQ(t.execution.warp_size, 64);
  EXPECT_EQ(lower::default_threads(t), 256);  // four waves
  ir::Graph g = std::move(ir::parse_file("tests/lower/specs/matmul_ragged.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(g, t);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].block[0], 256);
  lower::GeneratedSource src = cuda::emit_cuda(p, t);
  EXPECT_NE(src.text.find("#define MG_WARP_SIZE 64\n"), std::string::npos);
  EXPECT_NE(src.text.find("__launch_bounds__(256, 1)"), std::string::npos);
  EXPECT_GE(run_all(t, 1 << 20), 30);
}

TEST(SyntheticTarget, SmallSharedMemoryShrinksDefaultTilings) {
  targets::Target t = tiny();
  EXPECT_GE(run_all(t, 1 << 20), 30);
  // The examples' specs still lower, with every block within 8 KiB.
  for (const char* f : {"examples/attention_decode.mg", "examples/gqa_b8.mg", "examples/rmsnorm_linear_b8.mg"}) {
    SCOPED_TRACE(f);
    lower::LoweredProgram p = lower::lower(ir::parse_file(f).programs[0], t);
    for (const lower::Kernel& k : p.kernels) EXPECT_LE(k.smem_bytes, 8192) << k.entry;
  }
}

TEST(SyntheticTarget, TilesThatDoNotFitAreAUserErrorAtTheBlockOp) {
  try {
    lower::lower(ir::parse_file("examples/mugraphs/gqa_b1_flash.mg").programs[0], tiny());
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(e.render(),
              "examples/mugraphs/gqa_b1_flash.mg:6:7: error: block op 'O': its tiles need 140544 bytes of shared "
              "memory, but a block may use 8192 on target 'tiny' (smem_per_block_optin); live together: "
              "e f32[1,64,256] (65536 B), v f16[1,256,64] (32768 B), o f32[1,64,64] (16384 B), ...; use smaller "
              "tiles (a larger grid or more loop iterations)");
  }
}

TEST(SyntheticTarget, SpillingToGlobalMemoryRunsWhatDoesNotFit) {
  targets::Target t = tiny();
  ir::Graph g = std::move(ir::parse_file("tests/lower/specs/flash_small.mg").programs[0]);
  EXPECT_THROW(lower::lower(g, t), UserError);
  lower::LowerOptions o;
  o.spill_to_global = true;
  lower::LoweredProgram p = lower::lower(g, t, o);
  ASSERT_EQ(p.kernels.size(), 1u);
  const lower::Kernel& k = p.kernels[0];
  EXPECT_LE(k.smem_bytes, 8192);
  EXPECT_GT(k.scratch_bytes, 0);
  EXPECT_GE(p.workspace_bytes, k.scratch_offset + k.scratch_bytes * k.grid[0] * k.grid[1] * k.grid[2]);
  EXPECT_NE(cuda::emit_cuda(p, t).text.find("mg_scratch"), std::string::npos);
  expect_matches_reference(g, p, 5, "O");
  // Every μGraph that does not fit runs once spilled (the scratch slices of many blocks must not collide).
  int spilled = 0;
  for (const TestProgram& tp : test_programs()) {
    if (tp.graph.num_tensors() == 0 || tp.id.find("examples/") == 0) continue;  // small programs only
    try {
      lower::lower(tp.graph, t);
      continue;
    } catch (const UserError&) {
    }
    SCOPED_TRACE(tp.id);
    lower::LoweredProgram sp = lower::lower(tp.graph, t, o);
    std::vector<verify::FloatArray> x = verify::random_inputs(tp.graph, 5);
    std::vector<verify::FloatArray> r = verify::eval_float(tp.graph, x);
    std::vector<std::vector<double>> c = run_on_cpu(sp, x);
    for (size_t i = 0; i < c.size(); ++i) expect_close(c[i], r[i], "output " + std::to_string(i));
    ++spilled;
  }
  EXPECT_GE(spilled, 1);
}

TEST(SyntheticTarget, TooManyThreadsIsAUserError) {
  ir::Module m = ir::parse_module(
      "kernel k(X: f32[4096]) {\n"
      "  Y = block(X) grid=[1,1,1] threads=2048 {\n"
      "    x = iter(X, imap=[-,-,-])\n"
      "    a = acc_sum(x)\n"
      "    save(a, omap=[-,-,-])\n"
      "  }\n"
      "  return Y\n"
      "}\n",
      "k.mg");
  try {
    lower::lower(m.programs[0], wave64());
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_EQ(e.render(), "k.mg:2:7: error: block op 'Y': threads=2048 exceeds the 1024 threads per block of target 'wave64'");
  }
}

TEST(SyntheticTarget, CudaCodeIsForNvidiaTargetsOnly) {
  targets::Target amd = targets::load_target("targets/hip/mi300x.toml");
  ir::Graph g = std::move(ir::parse_file("tests/lower/specs/concat_odd.mg").programs[0]);
  EXPECT_THROW(cuda::lower(g, amd), UserError);
  lower::LoweredProgram p = lower::lower(g, amd);  // the lowering itself is target-neutral
  EXPECT_GT(p.kernels.size(), 0u);
  EXPECT_THROW(cuda::emit_cuda(p, amd), UserError);
  EXPECT_THROW(cuda::emit_cuda(p, wave64()), UserError);  // lowered for another target
}

}  // namespace
}  // namespace morgana::testing
