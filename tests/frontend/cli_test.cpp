// The `morgana` binary as a user runs it: exit codes (0 ok, 1 user error), messages on stderr, help text.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "search/result_io.h"
#include "tests/common/command.h"
#include "tests/common/golden.h"

namespace {

using Result = morgana::testing::CommandResult;  // out: stdout, then stderr

// A file of this test process: in a folder of its own (removed at exit), so that test runs side by side (two
// clones, two build folders) never read each other's files.
class ScratchDir {
 public:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() / ("morgana_cli_test_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::string scratch(const std::string& name) {
  static const ScratchDir dir;
  return dir.file(name);
}

// `env` is prepended to the command line, e.g. "XDG_CACHE_HOME=/tmp/x".
Result run(const std::string& args, const std::string& env = "") {
  const char* bin = std::getenv("MORGANA_BIN");
  EXPECT_NE(bin, nullptr) << "MORGANA_BIN is set by meson";
  Result r =
      morgana::testing::run_command(env + " " + std::string(bin) + " " + args + " 2>" + scratch("err"));
  std::array<char, 4096> buf{};
  size_t n;
  FILE* e = fopen(scratch("err").c_str(), "r");
  while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.out.append(buf.data(), n);
  if (e) fclose(e);
  return r;
}

// `args` fails as the user's mistake (exit 1) with `message` in what it prints.
void expect_user_error(const std::string& args, const std::string& message) {
  Result r = run(args);
  EXPECT_EQ(r.code, 1) << args;
  EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
}

TEST(Cli, CheckOnABrokenFileExitsOneWithLocation) {
  Result r = run("check tests/errors/01_unknown_op.mg");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("tests/errors/01_unknown_op.mg:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
}

TEST(Cli, FmtRoundTripsAnExample) {
  Result a = run("fmt examples/attention_decode.mg");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("kernel attention_decode("), std::string::npos);
  // Its header comment too: fmt never loses text, and the shipped file is canonical.
  EXPECT_EQ(a.out.rfind("# ", 0), 0u) << a.out;
  Result c = run("fmt --check examples/attention_decode.mg");
  EXPECT_EQ(c.code, 0) << c.out;
}

TEST(Cli, CheckAndEvalSucceedOnAnExample) {
  Result c = run("check examples/lora.mg");
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("ok\n"), std::string::npos);
  Result e = run("eval examples/lora.mg --seed 3");
  EXPECT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("sum="), std::string::npos) << e.out;
}

TEST(Cli, CheckWithATargetPrintsTheCostEstimate) {
  Result c = run("check examples/mugraphs/attention_decode_split_kv.mg --target h200 --target a100");
  EXPECT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("attention_decode_split_kv: cost on h200: "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("attention_decode_split_kv: cost on a100: "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("#0 block -> Os, Ls, Ms: 1024 blocks"), std::string::npos) << c.out;
  Result bad = run("check examples/lora.mg --target nosuchgpu");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("nosuchgpu"), std::string::npos) << bad.out;
}

TEST(Cli, HelpAndUsageErrors) {
  EXPECT_EQ(run("--help").code, 0);
  Result h = run("eval --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--seed"), std::string::npos);
  EXPECT_EQ(run("frobnicate").code, 1);
  EXPECT_EQ(run("check").code, 1);
  EXPECT_EQ(run("check /nonexistent/file.mg").code, 1);
  EXPECT_EQ(run("eval examples/lora.mg --precision f16").code, 1);
  EXPECT_EQ(run("").code, 1);
}

TEST(Cli, TargetsListsTheShippedFiles) {
  Result r = run("targets");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("h200"), std::string::npos);
  EXPECT_NE(r.out.find("gfx942"), std::string::npos);
}

}  // namespace

TEST(Cli, VerifyAcceptsAMuGraphOfItsSpecAndExplainsAMismatch) {
  Result ok = run("verify examples/lora.mg examples/mugraphs/lora_concat.mg --trials 1");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("equivalent (1 trial, "), std::string::npos) << ok.out;
  Result bad = run("verify examples/lora.mg examples/gated_mlp.mg");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("interfaces differ"), std::string::npos) << bad.out;
}

// The default verdict is the sound one (every output element); the sampled mode is asked for and says what it
// left out.
TEST(Cli, VerifyComparesEveryElementUnlessAskedToSample) {
  Result full = run("verify examples/gqa_b1.mg examples/mugraphs/gqa_b1_split_kv.mg --trials 1");
  EXPECT_EQ(full.code, 0) << full.out;
  EXPECT_NE(full.out.find("equivalent (1 trial, 32768 output elements each)"), std::string::npos) << full.out;
  Result sampled = run("verify examples/gqa_b1.mg examples/mugraphs/gqa_b1_split_kv.mg --sampled");
  EXPECT_EQ(sampled.code, 0) << sampled.out;
  EXPECT_NE(sampled.out.find("equivalent on a sample (3 trials, "), std::string::npos) << sampled.out;
  EXPECT_NE(sampled.out.find(" of 32768 output elements each, "), std::string::npos) << sampled.out;
  EXPECT_NE(sampled.out.find("the other output elements were not compared"), std::string::npos) << sampled.out;
  Result both = run("verify examples/gqa_b1.mg examples/mugraphs/gqa_b1_split_kv.mg --sampled --full");
  EXPECT_EQ(both.code, 1) << both.out;
  EXPECT_NE(both.out.find("--full and --sampled exclude each other"), std::string::npos) << both.out;
}

TEST(Cli, VerifyFloatCheckRunsAfterTheFieldVerdict) {
  Result r = run("verify examples/lora.mg examples/mugraphs/lora_concat.mg --trials 1 --float");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("float check passed"), std::string::npos) << r.out;
  Result s = run("verify examples/lora.mg examples/mugraphs/lora_concat.mg --trials 1 --float --sampled");
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("float check (sampled, "), std::string::npos) << s.out;
}

namespace {

// `morgana compile` for two targets makes one bundle that `morgana inspect` shows with a variant per target plus
// the PTX fallback. Skipped where NVRTC is not installed (the message says so).
TEST(Cli, CompileTwoTargetsAndInspect) {
  std::string out = scratch("compile.mgb");
  std::remove(out.c_str());
  Result c = run("compile tests/gpu/specs/ragged_matmul.mg --target h200 --target a100 -o " + out);
  if (c.code != 0 && c.out.find("NVRTC (the CUDA runtime compiler) was not found") != std::string::npos)
    GTEST_SKIP() << c.out;
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("wrote " + out), std::string::npos) << c.out;
  Result i = run("inspect " + out);
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("h200 cubin sm_90a"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("a100 cubin sm_80"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("a100 ptx compute_80"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("input     X f16[3, 5, 1000]"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("output    Y f16[3, 5, 77]"), std::string::npos) << i.out;
  std::remove(out.c_str());
}

// optimize's file names the targets it was searched for, even one, so compile needs no --target to build for
// exactly those (issue: `compile best.mg` built for every NVIDIA target and failed where the tiles did not fit).
TEST(Cli, OptimizeThenCompileKeepsTheTarget) {
  std::string best = scratch("lora_best.mg"), bundle = scratch("lora_best.mgb");
  Result o = run("optimize examples/lora.mg --target h100 --no-cache -q -o " + best);
  ASSERT_EQ(o.code, 0) << o.out;
  std::string text = morgana::testing::read_file(best);
  EXPECT_NE(text.find(") for [h100] {"), std::string::npos) << text;
  Result c = run("compile " + best + " -o " + bundle);
  if (c.code != 0 && c.out.find("NVRTC (the CUDA runtime compiler) was not found") != std::string::npos)
    GTEST_SKIP() << c.out;
  ASSERT_EQ(c.code, 0) << c.out;
  Result i = run("inspect " + bundle);
  ASSERT_EQ(i.code, 0) << i.out;
  EXPECT_NE(i.out.find("h100 cubin sm_90a"), std::string::npos) << i.out;
  EXPECT_EQ(i.out.find("a100"), std::string::npos) << i.out;
  std::remove(best.c_str());
  std::remove(bundle.c_str());
}

// Lowering unrolls loops of up to lower::kMaxUnrolledLoop iterations; where ptxas then reports that a kernel
// spills registers, `morgana compile` lowers the program again with that kernel's loop rolled and compiles it again,
// and says so. The spill depends on NVRTC's register allocation (132 bytes for this kernel with NVRTC 13 on sm_90a),
// so the test asks only that every spill is followed by a compile with the loops rolled, which does not spill.
TEST(Cli, CompileRollsTheShortLoopsOfKernelsThatSpill) {
  std::string out = scratch("spills.mgb");
  Result c = run("compile tests/frontend/data/flash_short_loop.mg --target h100 --no-ptx -o " + out);
  if (c.code != 0 && c.out.find("NVRTC (the CUDA runtime compiler) was not found") != std::string::npos)
    GTEST_SKIP() << c.out;
  ASSERT_EQ(c.code, 0) << c.out;
  const bool spilled = c.out.find("flash_short_loop_k0_t3 spills") != std::string::npos;
  const size_t again = c.out.find("again, the short loops of flash_short_loop_k0_t3 rolled");
  EXPECT_EQ(spilled, again != std::string::npos) << c.out;
  if (again != std::string::npos) {
    const std::string line = c.out.substr(again, c.out.find('\n', again) - again);
    EXPECT_EQ(line.find("spills"), std::string::npos) << c.out;
  }
  std::remove(out.c_str());
}

// optimize for two targets writes one program per target; verify checks each (labelled with its `for` list) or the
// one --target names, check costs on a target only the programs for it, eval evaluates the one --target names; a
// target no program is for, or a REF of several programs, is an error naming the file (issue: "verify compares
// files holding one kernel each", check costing both programs on h200 under one label).
TEST(Cli, VerifyCheckAndEvalPickTheProgramForATarget) {
  std::string best = scratch("lora_two.mg");
  Result o = run("optimize examples/lora.mg --target h100 --target a100 --no-cache -q -o " + best);
  ASSERT_EQ(o.code, 0) << o.out;
  Result all = run("verify examples/lora.mg " + best + " --trials 1");
  EXPECT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("lora for [h100]:\nequivalent"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("lora for [a100]:\nequivalent"), std::string::npos) << all.out;
  Result one = run("verify examples/lora.mg " + best + " --trials 1 --target a100");
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_EQ(one.out.find(" for ["), std::string::npos) << one.out;
  EXPECT_EQ(one.out.rfind("equivalent", 0), 0u) << one.out;
  Result none = run("verify examples/lora.mg " + best + " --target h200");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find(best + ": no program for target 'h200' (it holds lora for [h100], lora for [a100])"),
            std::string::npos)
      << none.out;
  Result two_refs = run("verify " + best + " examples/lora.mg");
  EXPECT_EQ(two_refs.code, 1);
  EXPECT_NE(two_refs.out.find(best + ": holds 2 programs; verify's REF is one spec"), std::string::npos)
      << two_refs.out;
  Result check = run("check " + best + " --target h100");
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_NE(check.out.find("lora for [h100]: cost on h100"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("lora for [a100]: cost"), std::string::npos) << check.out;
  Result eval = run("eval " + best + " --target a100");
  EXPECT_EQ(eval.code, 0) << eval.out;
  EXPECT_NE(eval.out.find("kernel lora for [a100] (seed 1"), std::string::npos) << eval.out;
  EXPECT_EQ(eval.out.find("for [h100]"), std::string::npos) << eval.out;
  std::remove(best.c_str());
}

// The report's cost breakdown names each kernel by its results as the printed μGraph names them (issue: "#0 block ->
// :" with the names left empty for a searched candidate's tensors).
TEST(Cli, OptimizeReportNamesKernelsLikeItsMuGraph) {
  const std::string best_file = scratch("gqa_b1_best.mg");
  Result o = run("optimize examples/gqa_b1.mg --target h100 --no-cache -o " + best_file);
  std::remove(best_file.c_str());
  ASSERT_EQ(o.code, 0) << o.out;
  const size_t best = o.out.find("best μGraph");
  ASSERT_NE(best, std::string::npos) << o.out;
  const std::string report = o.out.substr(best);
  EXPECT_NE(report.find("#1 block -> O: "), std::string::npos) << report;
  const size_t first = report.find("#0 block -> ");
  ASSERT_NE(first, std::string::npos) << report;
  const std::string names = report.substr(first + 12, report.find(':', first) - first - 12);
  EXPECT_FALSE(names.empty()) << report;
  EXPECT_NE(report.find("\n  " + names + " = block("), std::string::npos)
      << "'" << names << "' are not the results of a block op of the printed μGraph\n" << report;
}

// Small things a user meets first (issue 19 item 8): a missing positional argument is named as the usage line names
// it, not as Boost's --file; a negative seed is refused instead of wrapping to 2^64 - 1; a file that cannot be read
// says why; an output into a missing folder fails before the search or the compile, not after; check takes -t.
TEST(Cli, ArgumentsAndFilesGetPlainErrors) {
  Result no_file = run("fmt");
  EXPECT_EQ(no_file.code, 1);
  EXPECT_NE(no_file.out.find("missing FILE (usage: morgana fmt FILE"), std::string::npos) << no_file.out;
  Result no_cand = run("verify examples/lora.mg");
  EXPECT_EQ(no_cand.code, 1);
  EXPECT_NE(no_cand.out.find("missing CAND (usage: morgana verify REF.mg CAND.mg"), std::string::npos) << no_cand.out;
  Result seed = run("eval examples/lora.mg --seed -1");
  EXPECT_EQ(seed.code, 1);
  EXPECT_NE(seed.out.find("'-1'"), std::string::npos) << seed.out;
  EXPECT_NE(seed.out.find("--seed"), std::string::npos) << seed.out;
  Result missing = run("check examples/no_such_spec.mg");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("examples/no_such_spec.mg"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("cannot open file: no such file"), std::string::npos) << missing.out;
  Result folder = run("check examples");
  EXPECT_EQ(folder.code, 1);
  EXPECT_NE(folder.out.find("cannot read: it is a folder"), std::string::npos) << folder.out;
  Result optimize = run("optimize examples/gqa_b8.mg --target h100 --no-cache -o /nonexistent_dir/best.mg");
  EXPECT_EQ(optimize.code, 1);
  EXPECT_NE(optimize.out.find("cannot write /nonexistent_dir/best.mg: the folder /nonexistent_dir does not exist"),
            std::string::npos)
      << optimize.out;
  EXPECT_EQ(optimize.out.find("states"), std::string::npos) << "it searched first\n" << optimize.out;
  Result compile = run("compile examples/lora.mg --target h100 -o /nonexistent_dir/lora.mgb");
  EXPECT_EQ(compile.code, 1);
  EXPECT_NE(compile.out.find("the folder /nonexistent_dir does not exist"), std::string::npos) << compile.out;
  EXPECT_EQ(compile.out.find("compiled"), std::string::npos) << "it compiled first\n" << compile.out;
  Result t = run("check examples/lora.mg -t h100");
  EXPECT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("lora: cost on h100"), std::string::npos) << t.out;
  // --help lists positional arguments by their usage names, apart from the options.
  Result help = run("verify --help");
  EXPECT_EQ(help.code, 0) << help.out;
  EXPECT_NE(help.out.find("arguments:\n  REF "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("\n  CAND "), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--ref"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--cand"), std::string::npos) << help.out;
  Result merge_help = run("merge --help");
  EXPECT_NE(merge_help.out.find("\n  FILES... "), std::string::npos) << merge_help.out;
  // targets takes --targets-dir like every other command (and still --dir).
  Result targets = run("targets --targets-dir targets");
  EXPECT_EQ(targets.code, 0) << targets.out;
  EXPECT_NE(targets.out.find("h100"), std::string::npos) << targets.out;
}

// Every command's --help shows at least one example, whose example files ship with the repository; a mistyped
// option or command gets the likely intended one; --shard names what was given when it is not one --target.
TEST(Cli, EveryHelpShowsAnExampleAndTyposGetAHint) {
  for (const std::string command : {"fmt", "check", "eval", "verify", "targets", "inspect", "optimize", "merge",
                                    "compile", "run", "devices"}) {
    Result h = run(command + " --help");
    EXPECT_EQ(h.code, 0) << h.out;
    const size_t at = h.out.find("\nexamples:\n  morgana " + command);
    ASSERT_NE(at, std::string::npos) << h.out;
    const std::string examples = h.out.substr(at, h.out.find("\n\n", at + 1) - at);
    for (size_t p = examples.find("examples/"); p != std::string::npos; p = examples.find("examples/", p + 1)) {
      const std::string path = examples.substr(p, examples.find_first_of(" `\n", p) - p);
      EXPECT_TRUE(std::filesystem::exists(path)) << command << " --help names " << path;
    }
  }
  expect_user_error("check examples/lora.mg --tagret h100",
                    "error: unknown option '--tagret' for `morgana check`; did you mean '--target'?");
  Result far = run("check examples/lora.mg --frobnicate");
  EXPECT_EQ(far.code, 1);
  EXPECT_NE(far.out.find("unknown option '--frobnicate'"), std::string::npos) << far.out;
  EXPECT_EQ(far.out.find("did you mean"), std::string::npos) << far.out;
  expect_user_error("optimise examples/lora.mg", "unknown command 'optimise'; did you mean 'optimize'?");
  expect_user_error("optimize examples/lora.mg --shard 0/2 -o " + scratch("s.result"),
                    "give exactly one --target (one job array per target); given: none (without it the search would "
                    "cover ");
}

TEST(Cli, EmitCudaPrintsReadableSource) {
  Result c = run("compile tests/gpu/specs/ragged_matmul.mg --target h200 --emit cuda");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("extern \"C\" __global__"), std::string::npos) << c.out;
  Result bad = run("compile tests/gpu/specs/ragged_matmul.mg --target h200 --emit llvm");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("unknown --emit stage 'llvm'"), std::string::npos) << bad.out;
}

TEST(Cli, CompileForAnAmdTargetSaysWhyNot) {
  Result c = run("compile tests/gpu/specs/ragged_matmul.mg --target mi300x -o " + scratch("amd.mgb"));
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.out.find("target 'mi300x' is an amd GPU"), std::string::npos) << c.out;
}

// Without an NVIDIA driver (CI, this test's environment points the loader at an empty folder), `morgana run` and
// `morgana devices` fail cleanly with the runtime's message.
TEST(Cli, RunWithoutADriverFailsCleanly) {
  if (std::getenv("MORGANA_TEST_HAS_GPU")) GTEST_SKIP() << "a GPU is present";
  Result d = run("devices");
  EXPECT_EQ(d.code, 1) << d.out;
  EXPECT_NE(d.out.find("no NVIDIA driver found"), std::string::npos) << d.out;
  Result r = run("run tests/runtime/does-not-exist.mgb --check");
  EXPECT_EQ(r.code, 1) << r.out;
}

}  // namespace

namespace {

// One name, a program per target list: `compile` builds each program only for the targets it names, by default for
// every target the lists name, and refuses a target no program is for. --emit needs no NVRTC.
TEST(Cli, CompileBuildsEachProgramOnlyForItsTargets) {
  const std::string file = scratch("for_targets.mg");
  std::ofstream(file) << "kernel mm(X: f16[64,256], W: f16[256,128]) for [h200] {\n"
                         "  Y = matmul(X, W)\n"
                         "  return Y\n"
                         "}\n"
                         "kernel mm(X: f16[64,256], W: f16[256,128]) for [a100, h100] {\n"
                         "  Y = matmul(X, W)\n"
                         "  Z = relu(Y)\n"
                         "  return Z\n"
                         "}\n";
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  Result all = run("compile " + file + " --emit kernel-ir");
  ASSERT_EQ(all.code, 0) << all.out;
  EXPECT_EQ(count(all.out, "program mm for target "), 3u) << all.out;
  EXPECT_EQ(count(all.out, "program mm for target h200\n"), 1u) << all.out;
  EXPECT_EQ(count(all.out, "program mm for target a100\n"), 1u) << all.out;
  EXPECT_EQ(count(all.out, "program mm for target h100\n"), 1u) << all.out;
  EXPECT_EQ(count(all.out, "output Z "), 2u) << "the relu program serves a100 and h100\n" << all.out;

  Result one = run("compile " + file + " --emit kernel-ir --target a100");
  ASSERT_EQ(one.code, 0) << one.out;
  EXPECT_EQ(count(one.out, "program mm for target "), 1u) << one.out;
  EXPECT_EQ(count(one.out, "output Z "), 1u) << one.out;

  Result none = run("compile " + file + " --emit kernel-ir --target rtx4090");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find("error: no program is for target 'rtx4090' (a program with a 'for' list is built only for "
                          "the targets it names: mm for [h200]; mm for [a100, h100])"),
            std::string::npos)
      << none.out;
  std::remove(file.c_str());
}

}  // namespace

namespace {

// Runs `morgana ARGS`, which must fail with exit code 1 and print `message`.
// `optimize` refuses bad arguments before any search starts.
TEST(Cli, OptimizeArgumentErrorsNameTheOption) {
  const std::string lora = "optimize examples/lora.mg --target h200 -o " + scratch("x.mg") + " ";
  for (std::string shard : {"3/2", "a/b", "0/0", "1", "-1/2", "1/2/3", "0/"})
    expect_user_error(lora + "--shard " + shard,
                      "error: --shard needs i/n (shard i of n, 0 <= i < n, e.g. --shard 0/4), not '" + shard + "'");
  expect_user_error(lora + "--target a100 --shard 0/2", "give exactly one --target");
  expect_user_error(lora + "--top 0", "--top must be >= 1");
  expect_user_error(lora + "--time-limit 0", "--time-limit must be a positive number");
  expect_user_error("optimize examples/lora.mg --target h200", "--output");
  expect_user_error("optimize examples/lora.mg --target nosuchgpu -o " + scratch("x.mg"), "nosuchgpu");
}

TEST(Cli, OptimizeAndMergeAreListedWithTheirOptions) {
  Result usage = run("--help");
  EXPECT_NE(usage.out.find("  optimize SPEC"), std::string::npos) << usage.out;
  EXPECT_NE(usage.out.find("  merge SHARDS"), std::string::npos) << usage.out;
  Result opt = run("optimize --help");
  EXPECT_EQ(opt.code, 0);
  for (const char* o : {"--time-limit", "--threads", "--max-kernel-ops", "--max-block-ops", "--top", "--shard",
                        "--no-cache", "--quiet", "--no-abstract-pruning", "--target", "--output", "--measure",
                        "--measure-top", "--device"})
    EXPECT_NE(opt.out.find(o), std::string::npos) << o << "\n" << opt.out;
  Result merge = run("merge --help");
  EXPECT_EQ(merge.code, 0);
  EXPECT_NE(merge.out.find("--report"), std::string::npos) << merge.out;
}

// Merging the shard files of tests/golden/search/shards/ (written by tests/search/result_io_test.cpp): three shards
// of a search for h200 and a whole one for a100, given in any order.
const std::string kShards = "tests/golden/search/shards/";

TEST(Cli, MergeWritesTheBestMuGraphPerTarget) {
  const std::string out = scratch("merged.mg");
  std::remove(out.c_str());
  Result one = run("merge " + kShards + "matmul.h200.2-of-3.result " + kShards + "matmul.h200.0-of-3.result " +
                   kShards + "matmul.h200.1-of-3.result -o " + out);
  ASSERT_EQ(one.code, 0) << one.out;
  // The files' costs are made up; the merge prices every candidate again with the target file here.
  EXPECT_NE(one.out.find("h200: best "), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("h200: best 10.00 us"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find(" us, 6 verified of 18 complete, 6000 states\n"), std::string::npos) << one.out;
  std::string best = morgana::testing::read_file(out);
  EXPECT_EQ(best.rfind("# best μGraph found by morgana ", 0), 0u) << best;
  EXPECT_NE(best.find(" us on h200\nkernel matmul(X: f16[64,4096], W: f16[4096,1024]) for [h200] {\n"
                      "  P = block(X, W)"),
            std::string::npos)
      << best;
  EXPECT_EQ(run("check " + out).code, 0);

  Result two = run("merge " + kShards + "matmul.h200.*-of-3.result " + kShards + "matmul.a100.result -o " + out +
                   " --report");
  ASSERT_EQ(two.code, 0) << two.out;
  EXPECT_NE(two.out.find("search matmul for h200\n"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("\nsearch matmul for a100\n"), std::string::npos) << two.out;
  best = morgana::testing::read_file(out);
  EXPECT_NE(best.find("kernel matmul(X: f16[64,4096], W: f16[4096,1024]) for [h200] {\n"), std::string::npos)
      << best;
  EXPECT_NE(best.find("kernel matmul(X: f16[64,4096], W: f16[4096,1024]) for [a100] {\n  Y = matmul(X, W)\n"),
            std::string::npos)
      << best;
  Result check = run("check " + out);
  EXPECT_EQ(check.code, 0) << check.out;
  std::remove(out.c_str());
}

TEST(Cli, MergeRefusesMissingRepeatedAndDamagedShards) {
  const std::string out = scratch("merged_bad.mg");
  std::remove(out.c_str());
  Result missing = run("merge " + kShards + "matmul.h200.0-of-3.result " + kShards + "matmul.h200.2-of-3.result -o " +
                       out);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("error: the search for target h200 has 3 shards but shard(s) 1 of them are missing (the "
                             "files for h200: " +
                             kShards + "matmul.h200.0-of-3.result, " + kShards + "matmul.h200.2-of-3.result)"),
            std::string::npos)
      << missing.out;
  Result twice = run("merge " + kShards + "matmul.h200.*-of-3.result " + kShards + "matmul.h200.1-of-3.result -o " +
                     out);
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.out.find("shard 1/3 of target h200 is given twice"), std::string::npos) << twice.out;

  const std::string damaged = scratch("damaged.result");
  std::string text = morgana::testing::read_file(kShards + "matmul.a100.result");
  std::ofstream(damaged) << text.substr(0, text.size() - 10);
  Result bad = run("merge " + damaged + " -o " + out);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find(damaged + ": error: "), std::string::npos) << bad.out;
  EXPECT_FALSE(std::ifstream(out).good()) << "nothing is written when the merge fails";
  std::remove(damaged.c_str());
}

}  // namespace

namespace {

// A spec whose search takes about a second per target: the tests of the search's commands use it.
const char* const kSmallSpec =
    "kernel rmsnorm_linear_small(X: f16[4,256], W: f16[256,384]) {\n"
    "  N = rms_norm(X, dim=1)\n"
    "  Y = matmul(N, W)\n"
    "  return Y\n"
    "}\n";

// The real search on a spec small enough for a test (about a second per target), in a cache of its own: a search,
// the same again from the cache, and two shards merged into the same best μGraph.
TEST(Cli, OptimizeCachesAndShardsMergeToTheSameAnswer) {
  char tmpl[] = "/tmp/morgana_cli_test_cache_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string cache = std::string("XDG_CACHE_HOME=") + tmpl;
  std::ofstream(std::string(tmpl) + "/spec.mg") << kSmallSpec;
  const std::string spec = "optimize " + std::string(tmpl) + "/spec.mg --target h200 --threads 2 ";
  const std::string best = std::string(tmpl) + "/best.mg", again = std::string(tmpl) + "/again.mg",
                    merged = std::string(tmpl) + "/merged.mg";
  Result first = run(spec + "-o " + best, cache);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_NE(first.out.find("search rmsnorm_linear_small for h200\n"), std::string::npos) << first.out;
  EXPECT_EQ(first.out.find("(from the cache"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("wrote " + best), std::string::npos) << first.out;

  Result second = run(spec + "-o " + again, cache);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("(from the cache: this search ran before"), std::string::npos) << second.out;
  EXPECT_EQ(morgana::testing::read_file(again), morgana::testing::read_file(best));

  for (int i = 0; i < 2; ++i) {
    Result shard = run(spec + "--shard " + std::to_string(i) + "/2 -o " + tmpl + "/s" + std::to_string(i) + ".result",
                       cache);
    ASSERT_EQ(shard.code, 0) << shard.out;
    EXPECT_NE(shard.out.find("(shard " + std::to_string(i) + "/2)"), std::string::npos) << shard.out;
  }
  Result merge = run("merge " + std::string(tmpl) + "/s1.result " + tmpl + "/s0.result -o " + merged);
  ASSERT_EQ(merge.code, 0) << merge.out;
  EXPECT_EQ(morgana::testing::read_file(merged), morgana::testing::read_file(best));
  EXPECT_EQ(run("check " + merged).code, 0);
  std::filesystem::remove_all(tmpl);
}

}  // namespace

namespace {

// Issue 17's first two reproducers: a cache entry edited to hold a program that computes something else (its
// checksum fixed up, here by writing it with write_result) and a shard file edited the same way. The cache hit is
// checked again, fails, is reported and replaced by a fresh search; the merge refuses the file.
TEST(Cli, EditedCacheEntriesAndShardFilesAreCheckedAgain) {
  char tmpl[] = "/tmp/morgana_cli_test_tamper_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, cache = "XDG_CACHE_HOME=" + dir;
  std::ofstream(dir + "/spec.mg") << kSmallSpec;
  // The best μGraph made to compute something else at about its cost (so that it stays first when priced again):
  // the mean's 1/256 made 1/128, or the norm an exp.
  auto edit = [&](const std::string& file) {
    morgana::search::SearchResult r = morgana::search::read_result(morgana::testing::read_file(file), file);
    ASSERT_FALSE(r.top.empty());
    std::string& g = r.top.at(0).mugraph;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"s=0.00390625", "s=0.0078125"},
                                   {"rms_norm(t0, dim=1)", "exp(t0)"}})
      if (size_t at = g.find(from); at != std::string::npos) {
        g.replace(at, from.size(), to);
        std::ofstream(file) << morgana::search::write_result(r);
        return;
      }
    FAIL() << "nothing to edit in " << g;
  };
  const std::string spec = "optimize " + dir + "/spec.mg --target h200 --threads 2 ";
  Result first = run(spec + "-o " + dir + "/best.mg", cache);
  ASSERT_EQ(first.code, 0) << first.out;
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/morgana")) entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u);
  edit(entries[0]);

  Result second = run(spec + "-o " + dir + "/again.mg", cache);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("morgana: warning: the cached result for h200 failed its re-verification and was removed "
                            "(candidate 1 fails the full exact check: NOT equivalent"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(second.out.find("(from the cache"), std::string::npos) << second.out;
  EXPECT_EQ(morgana::testing::read_file(dir + "/again.mg"), morgana::testing::read_file(dir + "/best.mg"));
  // The fresh search's answer took the entry's place.
  Result third = run(spec + "-o " + dir + "/third.mg", cache);
  ASSERT_EQ(third.code, 0) << third.out;
  EXPECT_NE(third.out.find("(from the cache"), std::string::npos) << third.out;
  EXPECT_NE(third.out.find("(checked again when read back)"), std::string::npos) << third.out;
  EXPECT_EQ(third.out.find("warning"), std::string::npos) << third.out;

  for (int i = 0; i < 2; ++i) {
    Result shard = run(spec + "--shard " + std::to_string(i) + "/2 -o " + dir + "/s" + std::to_string(i) + ".result",
                       cache);
    ASSERT_EQ(shard.code, 0) << shard.out;
  }
  Result good = run("merge " + dir + "/s0.result " + dir + "/s1.result --spec " + dir + "/spec.mg -o " + dir +
                    "/merged.mg");
  ASSERT_EQ(good.code, 0) << good.out;
  EXPECT_EQ(morgana::testing::read_file(dir + "/merged.mg"), morgana::testing::read_file(dir + "/best.mg"));
  std::filesystem::remove(dir + "/merged.mg");

  // The shard that found the answer, edited: its best stays the merged best, and the merge names the file.
  const std::string answer = morgana::testing::read_file(dir + "/s0.result").find("s=0.00390625") != std::string::npos
                                 ? dir + "/s0.result"
                                 : dir + "/s1.result";
  edit(answer);
  Result bad = run("merge " + dir + "/s0.result " + dir + "/s1.result -o " + dir + "/merged.mg");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find(answer + ": error: the shard's result fails its re-verification: candidate 1 fails the "
                                  "full exact check: NOT equivalent"),
            std::string::npos)
      << bad.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/merged.mg")) << "nothing is written when the merge fails";

  // --spec ties the files to the user's spec: a result searched for another one is refused.
  std::ofstream(dir + "/other.mg") << "kernel rmsnorm_linear_small(X: f16[4,256], W: f16[256,384]) {\n"
                                      "  Y = matmul(X, W)\n"
                                      "  return Y\n"
                                      "}\n";
  Result other = run("merge " + dir + "/s0.result --spec " + dir + "/other.mg -o " + dir + "/merged.mg");
  EXPECT_EQ(other.code, 1) << other.out;
  EXPECT_NE(other.out.find(dir + "/s0.result: error: this result was searched for another spec than the one --spec gives"),
            std::string::npos)
      << other.out;
  std::filesystem::remove_all(dir);
}

// Issue 17, reproducer 4: a tensor this machine or the target cannot hold is the user's error (exit 1, the tensor,
// the bytes and the limit named), found before anything is allocated: eval had tried to map terabytes and ended in
// "internal error: std::bad_alloc".
TEST(Cli, TensorsTooLargeForTheMachineOrTheTargetAreUserErrors) {
  const std::string spec = scratch("too_large.mg");
  std::ofstream(spec) << "kernel k(X: f16[65536,65536,65536]) {\n  Y = exp(X)\n  return Y\n}\n";
  Result eval = run("eval " + spec);
  EXPECT_EQ(eval.code, 1) << eval.out;
  EXPECT_NE(eval.out.find(spec + ":1:10: error: evaluating 'k' would hold 4194304.0 GiB (its largest tensor, 'X' "
                                 "f16[65536,65536,65536], alone 2097152.0 GiB), more than this machine's "),
            std::string::npos)
      << eval.out;
  Result verify = run("verify " + spec + " " + spec);
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find("error: checking 'k' would hold "), std::string::npos) << verify.out;
  Result compile = run("compile " + spec + " --target h100 -o " + scratch("too_large.mgb"));
  EXPECT_EQ(compile.code, 1) << compile.out;
  EXPECT_NE(compile.out.find(spec + ":1:10: error: 'k' needs 1048576.0 GiB of device memory for its tensors (the "
                                    "largest, 'X' f16[65536,65536,65536], 524288.0 GiB), more than h100's 80.0 GiB "
                                    "(dram_bytes in its target file)"),
            std::string::npos)
      << compile.out;
  Result optimize = run("optimize " + spec + " --target h100 --no-cache -q -o " + scratch("too_large_best.mg"));
  EXPECT_EQ(optimize.code, 1) << optimize.out;
  EXPECT_NE(optimize.out.find("error: searching 'k' would hold "), std::string::npos) << optimize.out;
  std::remove(spec.c_str());
}

// `optimize --measure` where the target's GPU is not there: without a driver, with a GPU of another kind, and with
// a GPU of the right kind that cannot run what the search found (the fake driver loads no real code object). Each
// time the cost model's choice stands, the report says why, and the file written is the unmeasured answer.
TEST(Cli, OptimizeMeasureFallsBackToTheCostModelAndSaysWhy) {
  if (std::getenv("MORGANA_TEST_HAS_GPU")) GTEST_SKIP() << "a GPU is present";
  char tmpl[] = "/tmp/morgana_cli_test_measure_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, cache = "XDG_CACHE_HOME=" + dir;
  std::ofstream(dir + "/spec.mg") << kSmallSpec;
  const std::string spec = "optimize " + dir + "/spec.mg --target h200 --threads 2 ";
  Result plain = run(spec + "-o " + dir + "/plain.mg", cache);
  ASSERT_EQ(plain.code, 0) << plain.out;

  Result none = run(spec + "--measure -o " + dir + "/none.mg", cache);
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_NE(none.out.find("not measured on h200: no GPU to measure on: no NVIDIA driver found"), std::string::npos)
      << none.out;
  EXPECT_NE(none.out.find("the cost model's choice stands"), std::string::npos) << none.out;
  EXPECT_EQ(morgana::testing::read_file(dir + "/none.mg"), morgana::testing::read_file(dir + "/plain.mg"));

  const char* fake = std::getenv("MORGANA_FAKE_CUDA_DIR");
  ASSERT_NE(fake, nullptr) << "MORGANA_FAKE_CUDA_DIR is set by meson";
  const std::string driver = cache + " LD_LIBRARY_PATH=" + fake;
  Result other = run(spec + "--measure -o " + dir + "/other.mg", driver + " MG_FAKE_DEVICES=8.0");
  ASSERT_EQ(other.code, 0) << other.out;
  EXPECT_NE(other.out.find("not measured on h200: this machine's GPU 0 is"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("not what h200 describes (sm_90a, 132 SMs)"), std::string::npos) << other.out;

  Result same = run(spec + "--measure --measure-top 2 -o " + dir + "/same.mg", driver + " MG_FAKE_DEVICES=9.0");
  ASSERT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("measured on NVIDIA H200 (device 0) for h200"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("measured candidate 2 of 2 for h200"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("no candidate passed; the cost model's choice stands"), std::string::npos) << same.out;
  EXPECT_EQ(morgana::testing::read_file(dir + "/same.mg"), morgana::testing::read_file(dir + "/plain.mg"));

  expect_user_error(spec + "--measure --shard 0/2 -o " + dir + "/x.result", "--measure chooses among a whole search");
  expect_user_error(spec + "--measure --measure-top 0 -o " + dir + "/x.mg", "--measure-top must be >= 1");
  std::filesystem::remove_all(dir);
}

}  // namespace
