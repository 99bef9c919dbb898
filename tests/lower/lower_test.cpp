// Tests of the target-neutral lowering (targets/lower), run from the source root, over every example spec and
// μGraph, the ragged specs in tests/lower/specs and the verifier catalogue's true rewrites, for every CUDA target:
//   - lowering succeeds, or fails with exactly the diagnostic in tests/golden/lower/cuda_infeasible.txt (μGraphs
//     whose tiles cannot fit a target's shared memory), and the program keeps the parameter contract;
//   - the tiled graph (every predefined op made a block op) passes the structural verifier and is equivalent to
//     the program (verify::equivalent, full mode);
//   - the lowered program, run by the CPU executor of the kernel IR (which also checks barriers, the
//     shared-memory plan and bounds), matches the float reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <unordered_set>

#include "ir/printer.h"
#include "ir/verify.h"
#include "targets/cuda/codegen.h"
#include "ir/block_rules.h"
#include "targets/lower/interpret.h"
#include "targets/lower/lower.h"
#include "tests/common/golden.h"
#include "tests/lower/common.h"
#include "verify/equivalence.h"
#include "verify/float_check.h"
#include "verify/float_domain.h"

namespace morgana::testing {
namespace {

// The CUDA back end's matrix instruction (targets/cuda/dialect.cpp): matmuls then take the thread level's paths.
const lower::LowerOptions kWithMma{.spill_to_global = false, .matrix_ops = {"mma.sync.aligned.m16n8k16"}};

bool identifier(const std::string& s) { return std::regex_match(s, std::regex("[A-Za-z_][A-Za-z0-9_]*")); }

// What the runtime relies on: the parameter order and names, entry symbols, launch limits, and a shared-memory
// plan whose tiles lie inside the kernel's allocation.
void check_contract(const lower::LoweredProgram& p, const ir::Graph& g, const targets::Target& t) {
  ASSERT_EQ(p.name, g.name());
  size_t n_in = g.inputs().size(), n_out = g.outputs().size();
  ASSERT_EQ(p.params.size(), n_in + n_out + (p.workspace_bytes > 0 ? 1 : 0));
  std::unordered_set<std::string> names, entries;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const lower::Param& q = p.params[i];
    lower::Role want = i < n_in ? lower::Role::input : i < n_in + n_out ? lower::Role::output : lower::Role::workspace;
    EXPECT_EQ(q.role, want) << q.name;
    EXPECT_TRUE(identifier(q.name)) << q.name;
    EXPECT_TRUE(names.insert(q.name).second) << "parameter name twice: " << q.name;
    if (i < n_in + n_out) {
      const ir::TensorType& type = g.type(i < n_in ? g.inputs()[i] : g.outputs()[i - n_in]);
      EXPECT_EQ(q.dtype, type.dtype);
      EXPECT_EQ(q.shape, std::vector<int64_t>(type.shape().begin(), type.shape().end()));
    }
  }
  EXPECT_EQ(p.workspace_bytes % 256, 0);
  for (const lower::GlobalTensor& gt : p.tensors) {
    EXPECT_EQ(gt.offset % 256, 0) << gt.name;
    if (p.params[static_cast<size_t>(gt.param)].role == lower::Role::workspace) {
      int64_t bytes = ir::dtype_bytes(gt.dtype);
      for (int64_t d : gt.shape) bytes *= d;
      EXPECT_LE(gt.offset + bytes, p.workspace_bytes) << gt.name;
    }
  }
  for (const lower::Kernel& k : p.kernels) {
    EXPECT_TRUE(identifier(k.entry)) << k.entry;
    EXPECT_TRUE(entries.insert(k.entry).second) << "entry twice: " << k.entry;
    EXPECT_LE(k.block[0] * k.block[1] * k.block[2], t.execution.max_threads_per_block) << k.entry;
    EXPECT_LE(k.smem_bytes, lower::shared_memory_limit(t)) << k.entry;
    for (int64_t d : k.grid) EXPECT_GE(d, 1);
    for (const lower::Tile& tile : k.tiles) {
      if (tile.space == lower::Space::registers) continue;
      EXPECT_EQ(tile.offset % 16, 0) << k.entry << " " << tile.name;
      EXPECT_LE(tile.offset + tile.bytes(), k.smem_bytes) << k.entry << " " << tile.name;
    }
  }
}

TEST(Lower, EveryProgramLowersOnEveryCudaTarget) {
  std::vector<targets::Target> targets = cuda_targets();
  ASSERT_EQ(targets.size(), 4u);
  std::string failures;
  int lowered = 0;
  for (const TestProgram& tp : test_programs())
    for (const targets::Target& t : targets) {
      SCOPED_TRACE(tp.id + " on " + t.identity.name);
      try {
        lower::LoweredProgram p = lower::lower(tp.graph, t);
        check_contract(p, tp.graph, t);
        ++lowered;
      } catch (const UserError& e) {
        failures += t.identity.name + " " + tp.id + ": " + e.render() + "\n";
      }
    }
  EXPECT_GE(lowered, 200);
  expect_golden("tests/golden/lower/cuda_infeasible.txt", failures);
}

// The distinct tilings the CUDA targets give a program (their default shared memory and warp size agree, so
// usually one), each with a target that produced it.
std::vector<std::pair<lower::TiledGraph, const targets::Target*>> distinct_tilings(
    const ir::Graph& g, const std::vector<targets::Target>& targets) {
  std::vector<std::pair<lower::TiledGraph, const targets::Target*>> out;
  std::set<std::string> seen;
  for (const targets::Target& t : targets) {
    lower::TiledGraph tiled = lower::tile_kernel_ops(g, t);
    if (seen.insert(ir::print(tiled.graph)).second) out.emplace_back(std::move(tiled), &t);
  }
  return out;
}

// Element operations (a multiply-add counts one) the reference interpreter spends on a graph, roughly: what a
// full equivalence check or a CPU run costs.
double work(const ir::Graph& g) {
  double reps = 1;
  if (g.is_block()) {
    const ir::BlockParams& p = g.block_params();
    reps = static_cast<double>(p.grid[0] * p.grid[1] * p.grid[2] * p.loop);
  }
  double w = 0;
  for (const ir::Node& n : g.nodes()) {
    if (n.op == ir::OpCode::block) {
      w += work(g.body(n));
      continue;
    }
    if (n.num_results == 0 || n.op == ir::OpCode::input) continue;
    double out = static_cast<double>(g.type(g.result(n)).numel());
    if (n.op == ir::OpCode::matmul) {
      const ir::TensorType& a = g.type(g.operands(n)[0]);
      out *= static_cast<double>(a.dim(a.rank - 1));
    }
    w += out * reps;
  }
  return w;
}

// Programs above this much work (the attention, MLP and RMSNorm+Linear examples at full size) take seconds to
// minutes to check on a CPU; they run when MORGANA_TEST_LARGE=1 (meson test --setup large).
constexpr double kLargeWork = 2e7;
bool large_enabled() {
  const char* v = std::getenv("MORGANA_TEST_LARGE");
  return v && std::string(v) == "1";
}

TEST(Lower, TiledGraphsAreEquivalentToTheirPrograms) {
  std::vector<targets::Target> targets = cuda_targets();
  int checked = 0;
  for (const TestProgram& tp : test_programs()) {
    SCOPED_TRACE(tp.id);
    if (work(tp.graph) > kLargeWork && !large_enabled()) continue;
    for (const auto& [tiled, t] : distinct_tilings(tp.graph, targets)) {
      std::vector<ir::VerifyIssue> issues = ir::verify(tiled.graph);
      EXPECT_TRUE(issues.empty()) << ir::format_issue(tiled.graph, issues[0]) << "\n" << ir::print(tiled.graph);
      // The tiled μGraph goes into bundles as text: it must parse back to itself.
      std::string text = ir::print(tiled.graph);
      EXPECT_EQ(ir::print(ir::parse_module(text, "tiled.mg")), text);
      verify::EquivalenceOptions o;
      o.full = true;
      o.trials = 2;
      verify::Verdict v = verify::equivalent(tp.graph, tiled.graph, o);
      EXPECT_TRUE(v.equivalent()) << "tiling for " << t->identity.name << ": " << v.str() << "\n"
                                  << ir::print(tiled.graph);
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

TEST(Lower, CpuExecutionMatchesTheFloatReference) {
  std::vector<targets::Target> targets = cuda_targets();
  int runs = 0, registers = 0;
  for (const TestProgram& tp : test_programs()) {
    if (work(tp.graph) > kLargeWork && !large_enabled()) continue;
    std::vector<verify::FloatArray> in = verify::random_inputs(tp.graph, 7);
    std::vector<verify::FloatArray> want = verify::eval_float(tp.graph, in);
    std::set<std::string> seen;
    for (const targets::Target& t : targets) {
      SCOPED_TRACE(tp.id + " on " + t.identity.name);
      // With the scalar routines, and with matrix instructions (their results in register tiles, published).
      for (const lower::LowerOptions& options : {lower::LowerOptions{}, kWithMma}) {
        lower::LoweredProgram p;
        try {
          p = lower::lower(tp.graph, t, options);
        } catch (const UserError&) {
          continue;  // infeasible on this target: the golden list above
        }
        std::string text = lower::print(p);
        if (!seen.insert(text.substr(text.find('\n'))).second) continue;  // same kernels as another target's
        std::vector<std::vector<double>> got = run_on_cpu(p, in);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));
        ++runs;
        registers += text.find("in registers") != std::string::npos;
      }
    }
  }
  EXPECT_GE(runs, 30);
  EXPECT_GE(registers, 10);
}

}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {

// A decode-shaped RMSNorm+Linear (one row; 32 columns of W per block, so the matmul is one warp task of four atoms).
constexpr const char* kOneTaskFold = R"(kernel fold(X: f16[1,4096], W: f16[4096,6144]) {
  Y = block(X, W) grid=[192,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
)";

int staged_tiles(const lower::Kernel& k) {
  int n = 0;
  for (const lower::Tile& t : k.tiles) n += t.stages > 1;
  return n;
}

// The for-loop's 16-byte loads get 2 to 4 buffers (later iterations' cp.async batches issued before this one's math)
// when that costs no block the SM would run, and stay single where it would.
// rmsnorm_linear as 128 blocks of 48 columns (its searched pick on the H100): W's tile has 96-byte rows.
constexpr const char* kFortyEightColumns = R"(kernel rl(X: f16[2,4096], W: f16[4096,6144]) {
  Y = block(X, W) grid=[128,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(W, imap=[1,-,-], fmap=0)
    q = square(x)
    m = matmul(x, w)
    s = reduce_sum(q, dim=1)
    a = acc_sum(m)
    b = acc_sum(s)
    c = mul_scalar(b, s=0.000244140625)
    d = add_scalar(c, s=1e-06)
    r = rsqrt(d)
    y = mul(a, r)
    save(y, omap=[1,-,-])
  }
  return Y
}
)";

// The copy engine (pass 6b) takes a pipelined load of a kernel input where it writes the tile as the tile library
// reads it: rows of 128 bytes keep their swizzle (the engine's 128-byte one), 96-byte rows lose it (2-way ldmatrix
// conflicts), 256-byte rows stay swizzled on cp.async; a target without the engine (a100) keeps every load on
// cp.async; one barrier per buffer, one request per engine load of an iteration.
TEST(Lower, CopyEngineLoadsWhereItWritesTheTileAsRead) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  targets::Target a100 = targets::load_target("targets/cuda/a100.toml");
  auto lowered = [&](const ir::Graph& g, const targets::Target& t) { return lower::lower(g, t, kWithMma); };
  ir::Graph wide = std::move(ir::parse_file("bench/variants/rmsnorm_linear_b1_96x64_loop16.mg").programs[0]);
  lower::LoweredProgram p = lowered(wide, h100);
  const lower::Kernel& k = p.kernels[0];
  ASSERT_EQ(k.tensor_maps.size(), 2u) << lower::print(p);
  EXPECT_EQ(k.tensor_maps[0], (lower::TensorMapUse{0, {2, 256}, 0}));    // X: rows of 512 bytes, unswizzled
  EXPECT_EQ(k.tensor_maps[1], (lower::TensorMapUse{1, {256, 64}, 128}));  // W: 128-byte rows, swizzled
  EXPECT_EQ(k.barriers, 4);
  EXPECT_EQ(k.barrier_arrivals, 2);
  EXPECT_EQ(k.barrier_offset % 8, 0);
  for (const lower::Tile& t : k.tiles)
    if (t.copy_engine) {
      EXPECT_EQ(t.offset % lower::kCopyEngineAlign, 0) << t.name;
    }
  const std::string ir = lower::print(p);
  EXPECT_NE(ir.find("copy engine, tensor map 1, boxes of 256 rows"), std::string::npos) << ir;
  EXPECT_TRUE(lowered(wide, a100).kernels[0].tensor_maps.empty());

  ir::Graph narrow = std::move(ir::parse_module(kFortyEightColumns).programs[0]);
  lower::LoweredProgram q = lowered(narrow, h100);
  ASSERT_EQ(q.kernels[0].tensor_maps.size(), 1u) << lower::print(q);
  EXPECT_EQ(q.kernels[0].tensor_maps[0], (lower::TensorMapUse{1, {256, 48}, 0}));  // 4 boxes per 1024-row stage
  for (const lower::Tile& t : q.kernels[0].tiles)
    if (t.copy_engine) {
      EXPECT_FALSE(t.swizzled) << t.name;
    }

  ir::Graph fused = std::move(ir::parse_file("examples/mugraphs/rmsnorm_linear_fused.mg").programs[0]);
  lower::LoweredProgram f = lowered(fused, h100);
  for (const lower::TensorMapUse& m : f.kernels[0].tensor_maps)
    EXPECT_NE(m.param, 1) << "W's 256-byte rows stay on cp.async\n" << lower::print(f);
}

TEST(Lower, LoadsArePipelinedOnlyWhereItCostsNoBusyBlock) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph small = std::move(ir::parse_file("tests/verify/catalogue/true/07_online_softmax.mg").programs[1]);
  lower::LoweredProgram p = lower::lower(small, h100);
  ASSERT_EQ(p.kernels[0].loop, 4);
  EXPECT_EQ(staged_tiles(p.kernels[0]), 1) << lower::print(p);
  const std::string ir = lower::print(p);
  EXPECT_NE(ir.find("stages 4"), std::string::npos) << ir;  // four iterations, tiny tiles: four buffers
  EXPECT_NE(ir.find("of iteration it+3"), std::string::npos) << ir;
  EXPECT_NE(ir.find("async_wait pending 3"), std::string::npos) << ir;

  // 48 blocks, one per SM: buffers cost nothing the grid would use, though residency drops from 3 blocks to 1.
  ir::Graph fold = std::move(ir::parse_file("examples/mugraphs/rmsnorm_linear_fused.mg").programs[0]);
  lower::LoweredProgram q = lower::lower(fold, h100);
  EXPECT_EQ(staged_tiles(q.kernels[0]), 2) << lower::print(q);

  // 192 blocks need two per SM; a second 64 KiB buffer of W would leave room for one.
  ir::Graph one = std::move(ir::parse_module(kOneTaskFold).programs[0]);
  lower::LoweredProgram r = lower::lower(one, h100);
  EXPECT_EQ(staged_tiles(r.kernels[0]), 0) << lower::print(r);
  EXPECT_EQ(targets::resident_blocks_per_sm(h100, r.kernels[0].block[0], r.kernels[0].smem_bytes, 0), 3);
}


}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {


const lower::Stmt* find_stmt(const std::vector<lower::Stmt>& list, lower::StmtKind kind) {
  for (const lower::Stmt& s : list)
    if (s.kind == kind) return &s;
  return nullptr;
}

// The epilogue's Publish of register tile `regs`, if any.
const lower::Stmt* publish_of(const lower::Kernel& k, int regs) {
  for (const lower::Stmt& s : k.epilogue)
    if (s.kind == lower::StmtKind::Publish && s.a == regs) return &s;
  return nullptr;
}

// The accumulator of a for-loop's matmul stays in registers across the loop and is published to shared memory once,
// at the start of the epilogue; where the tasks leave warps idle, they split K.
TEST(Lower, LoopMatmulAccumulatorsLiveInRegisters) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph fold = std::move(ir::parse_file("examples/mugraphs/rmsnorm_linear_fused.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(fold, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  const lower::Stmt* mm = find_stmt(k.body, lower::StmtKind::Matmul);
  ASSERT_NE(mm, nullptr);
  const lower::Tile& acc = k.tiles[static_cast<size_t>(mm->dst)];
  EXPECT_EQ(acc.space, lower::Space::registers) << lower::print(p);
  EXPECT_EQ(mm->atoms_n, 4);  // 128 columns: 16 atoms, 4 tasks of 4 for 4 warps
  EXPECT_EQ(mm->k_split, 1);
  const lower::Stmt* publish = publish_of(k, mm->dst);
  ASSERT_NE(publish, nullptr) << lower::print(p);
  EXPECT_EQ(k.tiles[static_cast<size_t>(publish->dst)].space, lower::Space::shared);

  ir::Graph one = std::move(ir::parse_module(kOneTaskFold).programs[0]);
  lower::LoweredProgram q = lower::lower(one, h100, kWithMma);
  const lower::Stmt* split = find_stmt(q.kernels[0].body, lower::StmtKind::Matmul);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->k_split, 4) << lower::print(q);  // one task, four warps: each takes a quarter of K
  const std::string ir = lower::print(q);
  EXPECT_NE(ir.find("K split over 4 warps"), std::string::npos) << ir;
  EXPECT_NE(ir.find("in registers"), std::string::npos) << ir;
  // Its Publish meets the other three warps' parts in a shared tile at once (pass publish_split_parts_at_once).
  const lower::Stmt* met = publish_of(q.kernels[0], split->dst);
  ASSERT_NE(met, nullptr) << ir;
  ASSERT_GE(met->parts, 0) << ir;
  const lower::Tile& parts = q.kernels[0].tiles[static_cast<size_t>(met->parts)];
  EXPECT_EQ(parts.space, lower::Space::shared);
  EXPECT_EQ(parts.shape,
            (std::vector<int64_t>{3, q.kernels[0].tiles[static_cast<size_t>(met->dst)].numel()}));
  EXPECT_NE(ir.find("K's parts met in " + parts.name), std::string::npos) << ir;
  expect_matches_reference(one, q, 3, "Y");

  // Too many accumulators for a quarter of the registers: the matmul keeps its shared tile.
  targets::Target few = h100;
  few.registers.max_regs_per_thread = 32;
  lower::LoweredProgram r = lower::lower(fold, few, kWithMma);
  const lower::Stmt* shared = find_stmt(r.kernels[0].body, lower::StmtKind::Matmul);
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(r.kernels[0].tiles[static_cast<size_t>(shared->dst)].space, lower::Space::shared);
  EXPECT_EQ(publish_of(r.kernels[0], shared->dst), nullptr);
}

// A reduction whose only reader is an accumulator of the same fold (the fused RMSNorm's sum of squares) folds into
// registers across the loop: no Accumulate and no shared result in the body, one Publish of the parts into the
// accumulator at the start of the epilogue, and the same numbers.
TEST(Lower, LoopReductionsFoldInRegisters) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph fused = std::move(ir::parse_file("examples/mugraphs/rmsnorm_linear_fused.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(fused, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  const lower::Stmt* reduce = find_stmt(k.body, lower::StmtKind::Reduce);
  ASSERT_NE(reduce, nullptr) << lower::print(p);
  EXPECT_TRUE(reduce->accumulate) << lower::print(p);
  const lower::Tile& fold = k.tiles[static_cast<size_t>(reduce->dst)];
  EXPECT_EQ(fold.space, lower::Space::registers);
  EXPECT_TRUE(fold.layout.fold);
  EXPECT_EQ(find_stmt(k.body, lower::StmtKind::Accumulate), nullptr) << lower::print(p);
  const lower::Stmt* publish = publish_of(k, reduce->dst);
  ASSERT_NE(publish, nullptr) << lower::print(p);
  EXPECT_EQ(k.tiles[static_cast<size_t>(publish->dst)].space, lower::Space::shared);
  // The pipeline's two barriers per iteration are left (the copies landed; the buffers free for reuse), none for
  // the reduction and its accumulator.
  int barriers = 0;
  for (const lower::Stmt& s : k.body) barriers += s.kind == lower::StmtKind::Barrier;
  EXPECT_EQ(barriers, 2) << lower::print(p);
  const std::string printed = lower::print(p);
  EXPECT_NE(printed.find("fold= reduce_sum(square("), std::string::npos) << printed;
  EXPECT_NE(printed.find("in registers, folds across the loop"), std::string::npos) << printed;
  expect_matches_reference(fused, p, 5, "Y");
  const std::string cuda = cuda::emit_cuda(p, h100).text;
  EXPECT_NE(cuda.find("mg::LoopFold<"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find(".fold("), std::string::npos) << cuda;

  // X's two rows: an ldmatrix matrix reads at most two distinct rows, so the copy engine takes the tile unswizzled.
  const lower::Tile& x = k.tiles[static_cast<size_t>(reduce->a)];
  EXPECT_FALSE(x.swizzled) << printed;
  EXPECT_NE(printed.find("tensor map 0 of X box [2,256]"), std::string::npos) << printed;

  // Sixteen rows: the tile the matmul takes as A is swizzled against bank conflicts, and the sum of squares reads
  // it as it is (whole rows: the swizzle permutes chunks within a row).
  const std::string sixteen = std::regex_replace(
      std::regex_replace(read_file("examples/mugraphs/rmsnorm_linear_fused.mg"), std::regex("f16\\[2,4096\\]"),
                         "f16[16,4096]"),
      std::regex("rmsnorm_linear_fused"), "rmsnorm_linear_fused16");
  ir::Graph fused16 = std::move(ir::parse_module(sixteen).programs[0]);
  lower::LoweredProgram p16 = lower::lower(fused16, h100, kWithMma);
  const lower::Stmt* reduce16 = find_stmt(p16.kernels[0].body, lower::StmtKind::Reduce);
  ASSERT_NE(reduce16, nullptr);
  EXPECT_TRUE(p16.kernels[0].tiles[static_cast<size_t>(reduce16->a)].swizzled) << lower::print(p16);
  expect_matches_reference(fused16, p16, 6, "Y");
  EXPECT_NE(cuda::emit_cuda(p16, h100).text.find("mg::Swizzled<1, 1, 16, 256>"), std::string::npos);

  // No registers to spare: the reduction and its accumulator stay as written.
  targets::Target few = h100;
  few.registers.max_regs_per_thread = 2;
  lower::LoweredProgram q = lower::lower(fused, few, kWithMma);
  const lower::Stmt* kept = find_stmt(q.kernels[0].body, lower::StmtKind::Reduce);
  ASSERT_NE(kept, nullptr);
  EXPECT_FALSE(kept->accumulate);
  EXPECT_NE(find_stmt(q.kernels[0].body, lower::StmtKind::Accumulate), nullptr) << lower::print(q);
}

// A chain of loads, elementwise statements, row norms and a store over one shape (nTrans) keeps its tiles in
// registers, each thread the runs its elementwise statements take: no shared tile but the row sums, their warps'
// folds and the norms' scales, and barriers only around the reductions.
TEST(Lower, ElementwiseChainsStayInRegisters) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph ntrans = std::move(ir::parse_file("examples/mugraphs/ntrans_fused.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(ntrans, h100);
  ASSERT_EQ(p.kernels.size(), 1u);
  const lower::Kernel& k = p.kernels[0];
  int element_tiles = 0;
  for (const lower::Tile& t : k.tiles) {
    if (t.shape != std::vector<int64_t>{1, 4096}) continue;
    EXPECT_EQ(t.space, lower::Space::registers) << t.name << "\n" << lower::print(p);
    EXPECT_TRUE(t.layout.elements) << t.name;
    ++element_tiles;
  }
  EXPECT_GE(element_tiles, 5) << lower::print(p);
  int barriers = 0, reduces = 0;
  for (const lower::Stmt& s : k.prologue) {
    barriers += s.kind == lower::StmtKind::Barrier;
    EXPECT_NE(s.kind, lower::StmtKind::AsyncWait) << lower::print(p);  // no copies into shared memory are left
    if (s.kind == lower::StmtKind::Load) {
      EXPECT_FALSE(s.async);
    }
    if (s.kind != lower::StmtKind::Reduce) continue;
    ++reduces;
    ASSERT_GE(s.parts, 0);
    // 4096 elements in runs of 8: two warps' runs per 512 elements, 16 per row.
    EXPECT_EQ(k.tiles[static_cast<size_t>(s.parts)].shape, (std::vector<int64_t>{1, 16})) << lower::print(p);
  }
  EXPECT_EQ(reduces, 2);
  EXPECT_LE(barriers, 3) << lower::print(p);
  expect_matches_reference(ntrans, p, 9, "Y");
  const std::string cuda = cuda::emit_cuda(p, h100).text;
  for (const char* call : {"mg::Elements<", "mg::load_elems<", "mg::regs_reduce_sum(", "mg::store_elems<"})
    EXPECT_NE(cuda.find(call), std::string::npos) << call << "\n" << cuda;

  // Too few registers for any tile: all in shared memory.
  targets::Target few = h100;
  few.registers.max_regs_per_thread = 8;
  lower::LoweredProgram q = lower::lower(ntrans, few);
  for (const lower::Tile& t : q.kernels[0].tiles) EXPECT_NE(t.space, lower::Space::registers) << t.name;
  expect_matches_reference(ntrans, q, 10, "Y");
}

// A reduction with fewer outputs than warps, of a tile that stays in shared memory (groups inside rows, which no
// warp's runs hold alone): each output is folded by a team of warps, whose folds meet in a small shared tile;
// enough outputs for a warp each keep a warp per output.
TEST(Lower, FewOutputReductionsFoldByTeamsOfWarps) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  constexpr const char* kGroups = R"(kernel groups(X: f16[8,4096]) {
  Y = block(X) grid=[GRID,1,1] threads=512 loop=1 {
    x = iter(X, imap=[0,-,-])
    y = reduce_sum(x, dim=1, to=2)
    z = acc_sum(y)
    save(z, omap=[0,-,-])
  }
  return Y
}
)";
  // kGroups with X of `shape` over a grid of `blocks` blocks.
  auto groups = [&](const std::string& shape, const std::string& blocks) {
    return std::move(ir::parse_module(std::regex_replace(std::regex_replace(kGroups, std::regex("8,4096"), shape),
                                                         std::regex("GRID"), blocks))
                         .programs[0]);
  };
  ir::Graph one_row = groups("8,4096", "8");
  lower::LoweredProgram p = lower::lower(one_row, h100);
  const lower::Kernel& k = p.kernels[0];
  const lower::Stmt* reduce = find_stmt(k.prologue, lower::StmtKind::Reduce);
  ASSERT_NE(reduce, nullptr) << lower::print(p);
  EXPECT_TRUE(reduce->by_warps);
  EXPECT_EQ(reduce->team, 8) << lower::print(p);  // two outputs, sixteen warps, 2048 elements each
  ASSERT_GE(reduce->parts, 0);
  const lower::Tile& parts = k.tiles[static_cast<size_t>(reduce->parts)];
  EXPECT_EQ(parts.space, lower::Space::shared);
  EXPECT_EQ(parts.shape, (std::vector<int64_t>{2, 8}));
  const std::string printed = lower::print(p);
  EXPECT_NE(printed.find("# by teams of 8 warps, their folds met in " + parts.name), std::string::npos) << printed;
  expect_matches_reference(one_row, p, 7, "Y");
  const std::string cuda = cuda::emit_cuda(p, h100).text;
  EXPECT_NE(cuda.find("mg::team_reduce_sum<S_x, S_y, 3, 2, 8>(t_y, t_" + parts.name + ", t_x"), std::string::npos)
      << cuda;

  // Two rows per block: four outputs, teams of four.
  ir::Graph two_rows = groups("8,4096", "4");
  lower::LoweredProgram q = lower::lower(two_rows, h100);
  const lower::Stmt* reduce2 = find_stmt(q.kernels[0].prologue, lower::StmtKind::Reduce);
  ASSERT_NE(reduce2, nullptr) << lower::print(q);
  EXPECT_EQ(reduce2->team, 4) << lower::print(q);
  expect_matches_reference(two_rows, q, 8, "Y");

  // Groups of 256 (a warp's lanes fold eight elements each): a team's barrier costs more than it saves.
  ir::Graph short_groups = groups("8,512", "8");
  lower::LoweredProgram sg = lower::lower(short_groups, h100);
  const lower::Stmt* reduce_short = find_stmt(sg.kernels[0].prologue, lower::StmtKind::Reduce);
  ASSERT_NE(reduce_short, nullptr) << lower::print(sg);
  EXPECT_TRUE(reduce_short->by_warps);
  EXPECT_EQ(reduce_short->team, 1) << lower::print(sg);

  // Eight rows, sixteen outputs for sixteen warps: a warp each, no shared tile.
  ir::Graph rows = groups("8,1024", "1");
  lower::LoweredProgram r = lower::lower(rows, h100);
  const lower::Stmt* reduce16 = find_stmt(r.kernels[0].prologue, lower::StmtKind::Reduce);
  ASSERT_NE(reduce16, nullptr) << lower::print(r);
  EXPECT_TRUE(reduce16->by_warps);
  EXPECT_EQ(reduce16->team, 1);
  EXPECT_EQ(reduce16->parts, -1);
}

// A split-KV combine's loop. Its partial outputs (rows of whole 16-byte vectors) go straight into each thread's
// registers, one plain load per iteration in an unrolled body, so that all iterations' loads go out together (pass
// keep_elements_in_registers), and their accumulator folds them there with a running max per element, in runs
// short enough that every thread of the block has one (targets::element_run). Its loads that cannot be vectors
// (rows of one f16: the partial sums and maxima) load every iteration's tiles before the loop where they fit
// (mg::load_iterations, one statement each). No asynchronous copy is left, so no wait. The CPU execution of the
// same program is checked against the float reference in CpuExecutionMatchesTheFloatReference
// (examples/mugraphs/qknorm_b1_flash.mg), with its race checks.
TEST(Lower, CombineLoopsLoadIntoRegistersAndPreloadNarrowRows) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph split = std::move(ir::parse_file("examples/mugraphs/qknorm_b1_flash.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(split, h100);
  const lower::Kernel& combine = p.kernels.back();
  ASSERT_GT(combine.loop, 1) << lower::print(p);
  EXPECT_TRUE(combine.unroll) << lower::print(p);
  EXPECT_NE(lower::print(p).find(" unrolled "), std::string::npos);
  int register_loads = 0, element_loads = 0;
  for (const lower::Stmt& s : combine.body) {
    if (s.kind != lower::StmtKind::Load) continue;
    const lower::Tile& dst = combine.tiles[static_cast<size_t>(s.dst)];
    EXPECT_EQ(dst.space, lower::Space::registers) << lower::print(p);
    EXPECT_TRUE(dst.layout.elements);
    EXPECT_EQ(dst.layout.run, targets::element_run(dst.numel(), dst.shape.back(), combine.block[0]));
    // 64 partial outputs: the block's threads cut to 32 (targets::block_threads), each with a run of two, not
    // eight on eight threads
    EXPECT_EQ(combine.block[0], 32) << lower::print(p);
    EXPECT_EQ(dst.layout.run, 2);
    EXPECT_LE(s.vector_bytes, dst.layout.run * 2);               // f16: a thread's access within its run
    EXPECT_FALSE(s.async || s.batch);
    EXPECT_EQ(s.ahead, 0);
    ++register_loads;
  }
  EXPECT_EQ(register_loads, 1) << lower::print(p);  // the partial outputs
  for (const lower::Stmt& s : combine.prologue) {
    if (s.kind != lower::StmtKind::Load) continue;
    EXPECT_FALSE(s.batch);
    EXPECT_EQ(s.iterations, combine.loop);
    EXPECT_EQ(combine.tiles[static_cast<size_t>(s.dst)].stages, combine.loop);
    ++element_loads;
  }
  EXPECT_EQ(element_loads, 2) << lower::print(p);  // the running sums and maxima
  EXPECT_NE(lower::print(p).find("of iterations it+0 .. it+" + std::to_string(combine.loop - 1)), std::string::npos);
  for (const auto* list : {&combine.prologue, &combine.body, &combine.epilogue})
    EXPECT_EQ(find_stmt(*list, lower::StmtKind::AsyncWait), nullptr) << lower::print(p);
  // Both accumulators keep a running max per element: the partial outputs' in registers beside the accumulator,
  // the sums' (read broadcast by the division, so not in the layout) in shared memory (pass
  // own_accumulator_state). Each thread touches only its own elements of tiles loaded before the loop or in its
  // registers: the body needs no barrier, not even a closing one.
  int owned = 0, in_registers = 0;
  for (const lower::Stmt& s : combine.body)
    if (s.kind == lower::StmtKind::Accumulate && s.state >= 0) {
      const lower::Tile &acc = combine.tiles[static_cast<size_t>(s.dst)],
                        &state = combine.tiles[static_cast<size_t>(s.state)];
      EXPECT_EQ(state.shape, acc.shape);
      EXPECT_EQ(state.space, acc.space);
      in_registers += acc.space == lower::Space::registers;
      ++owned;
    }
  EXPECT_EQ(owned, 2) << lower::print(p);
  EXPECT_EQ(in_registers, 1) << lower::print(p);
  EXPECT_EQ(find_stmt(combine.body, lower::StmtKind::Barrier), nullptr) << lower::print(p);
}

// A combine of one query row per block: the row's running sum and maximum are tiles of one element, which every
// thread holds in its registers (a thread without a run of its own computes on a copy of the last) and reads
// broadcast where it folds its own elements of the partial outputs and divides them: their loads go straight into
// registers like the partial outputs', nothing is preloaded, and the kernel uses no shared memory and no barrier.
// The CPU execution matches the float reference in CpuExecutionMatchesTheFloatReference.
TEST(Lower, OneRowCombinesFoldTheirScalarsInEveryThread) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph split = std::move(ir::parse_file("examples/mugraphs/gqa_b1_split_kv_blocks.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(split, h100);
  const lower::Kernel& combine = p.kernels.back();
  ASSERT_EQ(combine.loop, 16) << lower::print(p);
  EXPECT_TRUE(combine.unroll);
  EXPECT_EQ(combine.smem_bytes, 0) << lower::print(p);
  int scalars = 0;
  for (const lower::Tile& t : combine.tiles) {
    EXPECT_EQ(t.space, lower::Space::registers) << t.name << "\n" << lower::print(p);
    EXPECT_TRUE(t.layout.elements);
    scalars += t.numel() == 1;
  }
  EXPECT_EQ(scalars, 4);  // the loaded sum and maximum, the running sum and its running maximum
  int loads = 0;
  for (const lower::Stmt& s : combine.body)
    if (s.kind == lower::StmtKind::Load) {
      EXPECT_EQ(s.iterations, 1);
      EXPECT_EQ(s.ahead, 0);
      ++loads;
    }
  EXPECT_EQ(loads, 3) << lower::print(p);
  EXPECT_EQ(find_stmt(combine.prologue, lower::StmtKind::Load), nullptr) << lower::print(p);
  for (const auto* list : {&combine.prologue, &combine.body, &combine.epilogue}) {
    EXPECT_EQ(find_stmt(*list, lower::StmtKind::Barrier), nullptr) << lower::print(p);
    EXPECT_EQ(find_stmt(*list, lower::StmtKind::AsyncWait), nullptr) << lower::print(p);
  }
}

// Loops of at most kMaxUnrolledLoop iterations are unrolled whole, except in the kernels LowerOptions::keep_rolled
// names (the compile driver's answer to a spill); a combine whose loads go into registers stays unrolled whatever
// its length (element_registers: its per-iteration registers need the unrolled loop).
TEST(Lower, ShortLoopsAreUnrolledUnlessKeptRolled) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph split = std::move(ir::parse_file("examples/mugraphs/gqa_b1_split_kv_blocks.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(split, h100);
  ASSERT_EQ(p.kernels.size(), 2u);
  const lower::Kernel &flash = p.kernels[0], &combine = p.kernels[1];
  ASSERT_EQ(flash.loop, 4);
  ASSERT_LE(flash.loop, lower::kMaxUnrolledLoop);
  EXPECT_TRUE(flash.unroll) << lower::print(p);
  ASSERT_GT(combine.loop, lower::kMaxUnrolledLoop);
  EXPECT_TRUE(combine.unroll);
  lower::LowerOptions rolled;
  rolled.keep_rolled = {flash.entry, combine.entry};
  lower::LoweredProgram r = lower::lower(split, h100, rolled);
  EXPECT_FALSE(r.kernels[0].unroll) << lower::print(r);
  EXPECT_TRUE(r.kernels[1].unroll);
}

// Accumulators that fold tiles the loop computes (a one-row flash kernel's row sums and P·V, which stay in shared
// memory) keep their elements in registers, each thread its runs, with a running max per element beside them: no
// shared accumulator, no barrier before the saves. The CPU execution (race checks included) matches the float
// reference.
TEST(Lower, AccumulatorsOfComputedTilesKeepTheirElementsInRegisters) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph g = std::move(ir::parse_file("examples/mugraphs/attention_decode_one_row_flash.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(g, h100);
  ASSERT_EQ(p.kernels.size(), 2u);
  auto accumulators = [](const lower::Kernel& k, lower::Space space) {
    int n = 0;
    for (const lower::Stmt& s : k.body) {
      if (s.kind != lower::StmtKind::Accumulate) continue;
      const lower::Tile& acc = k.tiles[static_cast<size_t>(s.dst)];
      EXPECT_EQ(acc.space, space) << acc.name;
      if (space == lower::Space::registers) {
        EXPECT_TRUE(acc.layout.elements) << acc.name;
        if (s.state >= 0) {
          const lower::Tile& state = k.tiles[static_cast<size_t>(s.state)];
          EXPECT_EQ(state.space, lower::Space::registers);
          EXPECT_EQ(state.shape, acc.shape);
        }
      }
      ++n;
    }
    return n;
  };
  EXPECT_EQ(accumulators(p.kernels[0], lower::Space::registers), 3) << lower::print(p);
  EXPECT_EQ(find_stmt(p.kernels[0].epilogue, lower::StmtKind::Barrier), nullptr) << lower::print(p);
  expect_matches_reference(g, p, 5, "O");
}

// A pipelined loop's first stages go out with the prologue's own loads, before the prologue computes on them
// (QK-norm's rms_norm of Q): the prologue's batch first, closed without waiting, then the stages' batches, the last of
// which waits for the prologue's (the oldest group: cp.async groups complete in order). The stage buffers then live
// beside the prologue's tiles.
TEST(Lower, PipelinedLoopsIssueTheirFirstStagesBeforeThePrologueComputes) {
  targets::Target a100 = targets::load_target("targets/cuda/a100.toml");
  ir::Graph flash = std::move(ir::parse_file("examples/mugraphs/qknorm_b1_flash.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(flash, a100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  int64_t stages = 1;
  for (const lower::Tile& t : k.tiles) stages = std::max(stages, t.stages);
  ASSERT_GE(stages, 2) << lower::print(p);
  std::vector<int> waits;
  size_t first_compute = k.prologue.size(), last_load = 0;
  for (size_t i = 0; i < k.prologue.size(); ++i) {
    const lower::Stmt& s = k.prologue[i];
    if (s.kind == lower::StmtKind::Load) last_load = i;
    else if (s.kind == lower::StmtKind::AsyncWait) waits.push_back(s.pending);
    else if (s.kind != lower::StmtKind::Barrier) first_compute = std::min(first_compute, i);
  }
  EXPECT_LT(last_load, first_compute) << lower::print(p);
  ASSERT_EQ(waits.size(), static_cast<size_t>(stages)) << lower::print(p);
  EXPECT_EQ(waits.front(), 1) << lower::print(p);  // the prologue's batch: closed, not waited for
  for (size_t i = 1; i + 1 < waits.size(); ++i) EXPECT_EQ(waits[i], static_cast<int>(i) + 1) << lower::print(p);
  EXPECT_EQ(waits.back(), stages - 1) << lower::print(p);  // ... until the last stage's batch
  // Q's tile and the stage buffers do not share bytes.
  const lower::Tile* q = nullptr;
  for (const lower::Tile& t : k.tiles)
    if (t.name == "q") q = &t;
  ASSERT_NE(q, nullptr);
  for (const lower::Tile& t : k.tiles)
    if (t.stages > 1) {
      EXPECT_TRUE(t.offset + t.bytes() <= q->offset || q->offset + q->bytes() <= t.offset) << t.name << "\n"
                                                                                            << lower::print(p);
    }
}

// Every thread waits for a loop iteration's copy-engine buffers itself (mg::tma_wait with the body's AsyncWait), so a
// loop whose loads all go through the engine needs no barrier between that wait and the buffers' readers; the
// closing barrier stays (the next iteration's copy refills the buffer this one read).
TEST(Lower, CopyEngineLoadsNeedNoBarrierBeforeTheirReaders) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph flash = std::move(ir::parse_file("bench/variants/mqa_q512_d64_k1024_flash_8x8_l2.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(flash, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  ASSERT_FALSE(k.tensor_maps.empty()) << lower::print(p);
  int barriers = 0;
  for (const lower::Stmt& s : k.body) {
    if (s.kind == lower::StmtKind::Load) {
      EXPECT_GE(s.tensor_map, 0) << lower::print(p);
    }
    barriers += s.kind == lower::StmtKind::Barrier;
  }
  EXPECT_EQ(barriers, 1) << lower::print(p);
  EXPECT_EQ(k.body.back().kind, lower::StmtKind::Barrier) << lower::print(p);
}

TEST(Lower, UnpipelinedLoadsAreBatched) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph one = std::move(ir::parse_module(kOneTaskFold).programs[0]);
  lower::LoweredProgram p = lower::lower(one, h100);
  const std::vector<lower::Stmt>& body = p.kernels[0].body;
  ASSERT_GE(body.size(), 4u) << lower::print(p);
  EXPECT_EQ(body[0].kind, lower::StmtKind::Load);
  EXPECT_EQ(body[1].kind, lower::StmtKind::Load);
  EXPECT_TRUE(body[0].batch && body[1].batch);
  EXPECT_EQ(body[2].kind, lower::StmtKind::AsyncWait);
  EXPECT_EQ(body[2].pending, 0);
  EXPECT_EQ(body[3].kind, lower::StmtKind::Barrier);
}


}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {

// Elementwise unaries fold into the statement that writes their operand (post maps) or the one reduction or
// elementwise statement that reads their result (pre maps); a unary whose result two statements read keeps its pass.
TEST(Lower, ElementwiseUnariesFoldIntoTheirNeighbours) {
  const char* const kChain = R"(
kernel chain(X: f16[64,256]) {
  T = block(X) grid=[4,1,1] threads=128 loop=1 {
    x = iter(X, imap=[0,-,-])
    e = exp(x)
    s = mul_scalar(e, s=2)
    r = reduce_sum(s, dim=1)
    q = sqrt(r)
    y = mul(e, q)
    t = relu(y)
    a = acc_sum(t)
    save(a, omap=[0,-,-])
  }
  return T
}
)";
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph g = std::move(ir::parse_module(kChain).programs[0]);
  lower::LoweredProgram p = lower::lower(g, h100);
  const std::string ir = lower::print(p);
  EXPECT_NE(ir.find("e = exp(x)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("q = sqrt(reduce_sum(mul_scalar(e, 2), dim=1, to=1))"), std::string::npos) << ir;
  EXPECT_NE(ir.find("t = relu(mul(e, q))"), std::string::npos) << ir;
  int computing = 0;
  const lower::Kernel& k = p.kernels[0];
  for (const auto* section : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *section)
      computing += s.kind == lower::StmtKind::Unary || s.kind == lower::StmtKind::Binary ||
                   s.kind == lower::StmtKind::Reduce;
  EXPECT_EQ(computing, 3) << ir;
  for (const lower::Tile& t : p.kernels[0].tiles) EXPECT_TRUE(t.name != "s" && t.name != "r" && t.name != "y") << ir;
  expect_matches_reference(g, p, 5, "T");
}

// An rms_norm over a matmul operand's contraction dim, computed where the matmul is, leaves the operand as loaded and
// scales the product (ir::norm_scaled_after): K's column norms scale the scores' columns, X's row norms the rows, and
// both where both operands are such norms. A norm computed once before the loop (flash_qknorm's Q) still writes its
// normalized tile.
TEST(Lower, NormsOverTheContractionDimScaleTheProduct) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph g = std::move(ir::parse_file("tests/lower/specs/column_norms.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(g, h100);
  const std::string ir = lower::print(p);
  EXPECT_NE(ir.find("s_unscaled = matmul(q, k)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("e = exp(mul_scalar(mul(s_unscaled, kn_rms), 0.25))"), std::string::npos) << ir;
  EXPECT_NE(ir.find("p_unscaled = matmul(x, w)"), std::string::npos) << ir;
  EXPECT_NE(ir.find("p = mul(p_unscaled, xn_rms)"), std::string::npos) << ir;
  for (const lower::Kernel& k : p.kernels)
    for (const lower::Tile& t : k.tiles) EXPECT_TRUE(t.name != "kn" && t.name != "xn") << ir;
  std::vector<verify::FloatArray> in = verify::random_inputs(g, 5);
  std::vector<verify::FloatArray> want = verify::eval_float(g, in);
  std::vector<std::vector<double>> got = run_on_cpu(p, in);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i], "output " + std::to_string(i));

  // Both operands normalized over the contraction dim (QK-norm's scores in one pass): the product takes both
  // factors. (One was lost until the H100 bench caught it on an unseen qknorm shape: 2.4e-2 relative error.)
  ir::Graph both = std::move(ir::parse_file("tests/lower/specs/both_norms.mg").programs[0]);
  lower::LoweredProgram b = lower::lower(both, h100);
  const std::string bir = lower::print(b);
  EXPECT_NE(bir.find("s_scaled_once = mul(s_unscaled, qn_rms)"), std::string::npos) << bir;
  EXPECT_NE(bir.find("s = mul(s_scaled_once, kn_rms)"), std::string::npos) << bir;
  expect_matches_reference(both, b, 5, "S");

  ir::Graph flash = std::move(ir::parse_file("tests/gpu/specs/flash_qknorm.mg").programs[0]);
  lower::LoweredProgram f = lower::lower(flash, h100);
  const std::string fir = lower::print(f);
  EXPECT_NE(fir.find("qn = mul(q, qn_rms)"), std::string::npos) << fir;
  EXPECT_NE(fir.find("s_unscaled = matmul(qn, k)"), std::string::npos) << fir;
  expect_matches_reference(flash, f, 5, "O");
}


}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {

// acc_rescale_sum(P·V, m) of a flash kernel: the product goes straight into the accumulator by the matrix
// instruction (pass accumulate_rescaled_products): a rescale-only Accumulate writes the per-row factor, then the
// matmul accumulates into the accumulator's tile with A's rows scaled by it; the product has no tile of its own.
// The running sum's acc_rescale_sum (x a row reduction, not a product) stays whole. Only where P is no wider than
// the product (keys an iteration <= head dim): flash_small's 64 keys into 32 columns keep the product's tile.
TEST(Lower, FlashProductsGoStraightIntoTheirAccumulator) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph flash = std::move(ir::parse_file("examples/mugraphs/gqa_b1_split_kv_blocks.mg").programs[0]);
  lower::LoweredProgram p = lower::lower(flash, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  const std::string ir = lower::print(p);
  int rescale = -1, product = -1, whole = 0;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const lower::Stmt& s = k.body[i];
    if (s.kind == lower::StmtKind::Accumulate && s.scale >= 0) {
      EXPECT_EQ(s.a, -1) << ir;
      rescale = static_cast<int>(i);
    } else if (s.kind == lower::StmtKind::Accumulate && s.op == ir::OpCode::acc_rescale_sum) {
      ++whole;
    }
    if (s.kind == lower::StmtKind::Matmul && s.scale >= 0) product = static_cast<int>(i);
  }
  ASSERT_GE(rescale, 0) << ir;
  ASSERT_EQ(product, rescale + 1) << ir;
  EXPECT_EQ(whole, 1) << ir;
  const lower::Stmt &r = k.body[static_cast<size_t>(rescale)], &m = k.body[static_cast<size_t>(product)];
  EXPECT_EQ(m.dst, r.dst);
  EXPECT_EQ(m.scale, r.scale);
  EXPECT_TRUE(m.accumulate);
  EXPECT_EQ(k.tiles[static_cast<size_t>(r.scale)].shape, k.tiles[static_cast<size_t>(r.state)].shape);
  EXPECT_EQ(k.tiles[static_cast<size_t>(r.dst)].space, lower::Space::registers);
  EXPECT_LE(k.tiles[static_cast<size_t>(m.a)].shape.back(), k.tiles[static_cast<size_t>(m.dst)].shape.back());
  EXPECT_NE(ir.find("  # A's rows scaled"), std::string::npos) << ir;

  // flash_small: P·V in registers from P in registers, as above, but P [32,64] is wider than the product [32,32].
  ir::Graph wide_p = std::move(ir::parse_file("tests/lower/specs/flash_small.mg").programs[0]);
  lower::LoweredProgram q = lower::lower(wide_p, h100, kWithMma);
  const std::string small = lower::print(q);
  EXPECT_EQ(small.find("rescale("), std::string::npos) << small;
  bool register_product = false;
  for (const lower::Stmt& s : q.kernels[0].body)
    register_product = register_product || (s.kind == lower::StmtKind::Matmul &&
                                             q.kernels[0].tiles[static_cast<size_t>(s.a)].space == lower::Space::registers &&
                                             q.kernels[0].tiles[static_cast<size_t>(s.dst)].space == lower::Space::registers);
  EXPECT_TRUE(register_product) << small;
}

// A d = 128 flash kernel of 128 keys an iteration: at pass 3b its five f32 [64,128] tiles are still in shared memory
// and two buffers of K and V do not fit beside them; once the register passes have taken the tiles out, they do, and
// the loop is pipelined (the cost model, which prices tiles where they end up, priced it so all along).
constexpr const char* kWideFlash = R"(
kernel wide_flash(Q: f16[8,128,128], K: f16[8,128,2048], V: f16[8,2048,128]) {
  Ls, Os, Ms = block(Q, K, V) grid=[8,2,8] threads=128 loop=2 {
    q = iter(Q, imap=[0,1,-])
    k = iter(K, imap=[0,-,2], fmap=2)
    v = iter(V, imap=[0,-,1], fmap=1)
    s = matmul(q, k)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    M = acc_max(m)
    save(L, omap=[0,1,2])
    save(A, omap=[0,1,2])
    save(M, omap=[0,1,2])
  }
  return Ls, Os, Ms
}
)";

TEST(Lower, LoopsArePipelinedOnceRegisterTilesLeaveSharedMemory) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph wide = std::move(ir::parse_module(kWideFlash).programs[0]);
  lower::LoweredProgram p = lower::lower(wide, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  ASSERT_EQ(k.loop, 2);
  EXPECT_EQ(staged_tiles(k), 2) << lower::print(p);  // K's and V's tiles, two buffers each
  EXPECT_LE(k.smem_bytes, targets::block_smem_limit(h100)) << lower::print(p);
}

// A split-KV flash block of one iteration: Q and K are read by the norms and Q·Kᵀ, V only by P·V. Its copies go out
// as one batch per first reader, and V is waited for (then published by a barrier) just before P·V, after the
// softmax, instead of with Q and K at the start.
constexpr const char* kOneIterationFlash = R"(
kernel one_iteration_flash(Q: f16[8,64,128], K: f16[8,128,1024], V: f16[8,1024,128]) {
  Ls, Os, Ms = block(Q, K, V) grid=[8,1,16] threads=128 loop=1 {
    q = iter(Q, imap=[0,1,-])
    k = iter(K, imap=[0,-,2])
    v = iter(V, imap=[0,-,1])
    qn = rms_norm(q, dim=2)
    kn = rms_norm(k, dim=1)
    s = matmul(qn, kn)
    m = reduce_max(s, dim=2)
    d = sub(s, m)
    e = exp(d)
    l = reduce_sum(e, dim=2)
    o = matmul(e, v)
    L = acc_rescale_sum(l, m)
    A = acc_rescale_sum(o, m)
    M = acc_max(m)
    save(L, omap=[0,1,2])
    save(A, omap=[0,1,2])
    save(M, omap=[0,1,2])
  }
  return Ls, Os, Ms
}
)";

TEST(Lower, CopiesAreWaitedForWhereTheirTilesAreFirstRead) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph g = std::move(ir::parse_module(kOneIterationFlash).programs[0]);
  lower::LoweredProgram p = lower::lower(g, h100, kWithMma);
  const lower::Kernel& k = p.kernels[0];
  const std::string ir = lower::print(p);
  std::vector<lower::Stmt> all = k.prologue;
  all.insert(all.end(), k.body.begin(), k.body.end());
  int loads = 0, waits = 0, v_load = -1, v_reader = -1, max_at = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    const lower::Stmt& s = all[i];
    if (s.kind == lower::StmtKind::Load) {
      ++loads;
      if (p.tensors[static_cast<size_t>(s.tensor)].name == "V") v_load = s.dst;
    }
    if (s.kind == lower::StmtKind::AsyncWait) {
      ++waits;
      EXPECT_EQ(s.pending, 3) << ir;  // three batches: Q, K, V
    }
    if (s.kind == lower::StmtKind::Reduce && s.op == ir::OpCode::reduce_max) max_at = static_cast<int>(i);
    if (v_load >= 0 && v_reader < 0 && lower::stmt_touches(s, v_load) && s.kind != lower::StmtKind::Load)
      v_reader = static_cast<int>(i);
  }
  ASSERT_EQ(loads, 3) << ir;
  EXPECT_EQ(waits, 6) << ir;  // three close the batches, three wait for them
  ASSERT_GE(v_reader, 2) << ir;
  EXPECT_EQ(all[static_cast<size_t>(v_reader) - 1].kind, lower::StmtKind::Barrier) << ir;
  EXPECT_EQ(all[static_cast<size_t>(v_reader) - 2].kind, lower::StmtKind::AsyncWait) << ir;
  ASSERT_GE(max_at, 0) << ir;
  EXPECT_LT(max_at, v_reader) << ir;  // the softmax's row max is computed before V is waited for
}


}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {

// X·Wᵀ with W as PyTorch stores a linear layer's weight: the block reads W's tiles as they lie (16-byte copies along
// K, asynchronous; here on a100, which has no copy engine), and the matmul reads the tile as Bᵀ. A view read by
// anything but matmuls' B keeps its strided loads.
constexpr const char* kLinearTransposed = R"(kernel linear_t(X: f16[16,256], W: f16[512,256]) {
  Wt = transpose(W)
  Y = block(X, Wt) grid=[8,1,1] threads=128 loop=4 {
    x = iter(X, imap=[-,-,-], fmap=1)
    w = iter(Wt, imap=[1,-,-], fmap=0)
    p = matmul(x, w)
    a = acc_sum(p)
    save(a, omap=[1,-,-])
  }
  return Y
}
)";

TEST(Lower, TransposedOperandsAreLoadedAsTheyLie) {
  targets::Target a100 = targets::load_target("targets/cuda/a100.toml");
  ir::Graph g = std::move(ir::parse_module(kLinearTransposed).programs[0]);
  lower::LoweredProgram p = lower::lower(g, a100, kWithMma);
  const std::string text = lower::print(p);
  EXPECT_NE(text.find("  tensor Wt f16[256,512] strides [1,256] in W\n"), std::string::npos) << text;
  EXPECT_NE(text.find("w = load W[64*bx, 64*it]  # 16-byte accesses, cp.async"), std::string::npos) << text;
  EXPECT_NE(text.find("matmul(x, transpose(w))"), std::string::npos) << text;
  EXPECT_NE(text.find("tile w f16[64,64]"), std::string::npos) << text;

  // The same view also read by an elementwise op: loaded through the view's strides, element by element.
  std::string both = kLinearTransposed;
  both.replace(both.find("    a = acc_sum(p)"), 0, "    w2 = exp(w)\n    p2 = matmul(x, w2)\n    q = add(p, p2)\n");
  both.replace(both.find("a = acc_sum(p)"), 14, "a = acc_sum(q)");
  ir::Graph g2 = std::move(ir::parse_module(both).programs[0]);
  const std::string text2 = lower::print(lower::lower(g2, a100, kWithMma));
  EXPECT_EQ(text2.find("transpose("), std::string::npos) << text2;
  EXPECT_NE(text2.find("w = load Wt["), std::string::npos) << text2;
}


}  // namespace
}  // namespace morgana::testing

namespace morgana::testing {
namespace {

// Attention against one cache shared by four heads of one query row each (multi-head latent attention's form): the
// heads become the rows of one product (tiles [4,1,x] held as [1,4,x]), Q and the partial results addressed
// through views with the two dims swapped. A product whose B differs per head keeps its batch.
TEST(Lower, BatchElementsOfOneRowBecomeTheRowsOfASharedProduct) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Module m = ir::parse_file("tests/verify/catalogue/true/28_latent_attention_split.mg");
  const ir::Graph& cand = m.programs.at(1);
  std::vector<std::optional<ir::UnitRowFold>> folds;
  for (const ir::Node& n : cand.nodes())
    if (n.op == ir::OpCode::block) folds.push_back(ir::unit_row_fold(cand.body(n)));
  ASSERT_EQ(folds.size(), 2u);
  ASSERT_TRUE(folds[0]);
  EXPECT_EQ(folds[0]->rank, 3);
  EXPECT_EQ(folds[0]->dim, 0);
  EXPECT_FALSE(folds[1]);  // the combine has no product: it keeps its shapes
  const std::string text = lower::print(lower::lower(cand, h100, kWithMma));
  EXPECT_NE(text.find("  tile q f16[1,4,16]"), std::string::npos) << text;
  EXPECT_NE(text.find("  tile o f32[1,4,16]"), std::string::npos) << text;
  EXPECT_NE(text.find("q = load Q_dims01[0, 0, 0]"), std::string::npos) << text;
  EXPECT_NE(text.find("store P_dims01[1*bx, 0, 0] = ao"), std::string::npos) << text;
  EXPECT_NE(text.find("  tensor P_dims01 f16[2,4,16] strides [16,32,1] in workspace\n"), std::string::npos) << text;
  // The combine reads P as saved: its tiles [1,2,16] have no batch above 1.
  EXPECT_NE(text.find("p = load P[1*bx, 0, 0]"), std::string::npos) << text;

  // One query row per head against per-head keys (decode attention): nothing folds.
  const ir::Graph decode = ir::parse_module(R"(kernel d(Q: f16[4,1,16], K: f16[4,16,32]) {
  S = block(Q, K) grid=[4,1,1] threads=32 loop=1 {
    q = iter(Q, imap=[0,-,-])
    k = iter(K, imap=[0,-,-])
    s = matmul(q, k)
    a = acc_sum(s)
    save(a, omap=[0,-,-])
  }
  return S
}
)").programs.at(0);
  for (const ir::Node& n : decode.nodes())
    if (n.op == ir::OpCode::block) {
      EXPECT_FALSE(ir::unit_row_fold(decode.body(n)));
    }
}


// LoRA's concat form (X‖XA)·(W;B) is built as the sum of the pieces' products: no concat tile, two products and
// their sum (as a tile the concat costs a copy and an f32 tile of mixed pieces: 13.5 us on the H100 against 3.6).
TEST(Lower, ContractedConcatsAreTheSumOfTheirPiecesProducts) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Module m = ir::parse_file("tests/verify/catalogue/true/29_lora_concat_in_block.mg");
  const ir::Graph& cand = m.programs.at(1);
  const ir::Graph& body = cand.body(cand.node(cand.tensor(cand.outputs()[0]).producer));
  const std::optional<ir::Graph> split = ir::with_contracted_concats_split(body);
  ASSERT_TRUE(split.has_value());
  int concats = 0, matmuls = 0, adds = 0;
  for (const ir::Node& n : split->nodes()) {
    concats += n.op == ir::OpCode::concat;
    matmuls += n.op == ir::OpCode::matmul;
    adds += n.op == ir::OpCode::add;
  }
  EXPECT_EQ(concats, 0);
  EXPECT_EQ(matmuls, 3) << "XA, XA·B, X·W";
  EXPECT_EQ(adds, 1);
  const std::string text = lower::print(lower::lower(cand, h100, kWithMma));
  EXPECT_EQ(text.find("= concat("), std::string::npos) << text;
  // The crossed orders (wrong/35) pair stretches of unequal length: nothing splits, the concat stays a tile.
  ir::Module w = ir::parse_file("tests/verify/catalogue/wrong/35_concat_stretches_crossed.mg");
  const ir::Graph& crossed = w.programs.at(1);
  EXPECT_FALSE(ir::with_contracted_concats_split(crossed.body(crossed.node(crossed.tensor(crossed.outputs()[0]).producer))));
}

// The latent cache read as Cᵀ (the scores) and as C (P·C) in one block: once pass 3c loads the transposed tile as
// the memory holds it, the two loads are equal and pass 3e keeps one; P·C reads the scores' tile. ir::equal_iters,
// which the cost model prices by, says the same of the block graph.
TEST(Lower, EqualLoadsOfOneSectionAreOneLoad) {
  targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Module m = ir::parse_file("tests/gpu/specs/transposed_latent.mg");
  const ir::Graph& g = m.programs.at(0);
  const std::string text = lower::print(lower::lower(g, h100, kWithMma));
  const std::string core = text.substr(0, text.find("kernel latent_k1"));
  EXPECT_EQ(core.find("v = load"), std::string::npos) << core;
  EXPECT_EQ(core.find("tile v "), std::string::npos) << core;
  EXPECT_NE(core.find("matmul(q, transpose(kt))"), std::string::npos) << core;
  EXPECT_NE(core.find("matmul(e, kt)"), std::string::npos) << core;

  const auto first_block = std::ranges::find(g.nodes(), ir::OpCode::block, &ir::Node::op);
  ASSERT_NE(first_block, g.nodes().end());
  const ir::Node& block = *first_block;
  const ir::Graph& body = g.body(block);
  const std::vector<int> same = ir::equal_iters(body, ir::operand_views(g, block));
  std::vector<std::string> pairs;
  for (size_t i = 0; i < same.size(); ++i)
    if (same[i] >= 0)
      pairs.push_back(body.name(body.result(body.node(static_cast<ir::NodeId>(i)))) + "=" +
                      body.name(body.result(body.node(static_cast<ir::NodeId>(same[i])))));
  EXPECT_EQ(pairs, std::vector<std::string>{"v=kt"});
}

}  // namespace
}  // namespace morgana::testing
