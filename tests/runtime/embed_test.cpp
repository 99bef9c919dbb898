// The embedding example (examples/embed) as a user would run it: against the fake driver, where a kernel the
// fake computes (impl=add_f32) is checked against the example's own CPU reference, a wrong one is caught and
// an unknown program is summarised; and with no driver at all, where it must fail cleanly with the runtime's
// message after listing the bundle (which needs no GPU).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tests/common/command.h"
#include "tests/runtime/runtime_testing.h"

namespace morgana::runtime::testing {
namespace {

using Outcome = morgana::testing::CommandResult;  // out: stdout and stderr together

// Runs the example with `env` (assignments, shell syntax) in front of it.
Outcome embed(const std::string& env, const std::string& args) {
  const char* bin = std::getenv("MORGANA_EMBED_BIN");
  EXPECT_NE(bin, nullptr) << "MORGANA_EMBED_BIN is set by meson";
  return morgana::testing::run_command(env + " " + std::string(bin ? bin : "embed") + " " + args + " 2>&1");
}

// "add" (c = a + b over f32[1000]) for an H200, computed by the fake with `impl`; named `name`.
Bundle add_bundle(const std::string& name, const std::string& impl) {
  Bundle b;
  b.variants.push_back(variant("h200", VariantKind::cubin, "sm_90a",
                               "func " + name + "_k0 params=3 impl=" + impl + " n=1000\n"));
  b.programs.push_back(simple_program(name, {0}, 1000));
  return b;
}

class Embed : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("morgana_embed_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    const char* fake = std::getenv("MORGANA_FAKE_CUDA_DIR");
    ASSERT_NE(fake, nullptr) << "MORGANA_FAKE_CUDA_DIR is set by meson";
    fake_env_ = "LD_LIBRARY_PATH='" + std::string(fake) + "' MG_FAKE_DEVICES=";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const Bundle& b) {
    const std::string path = (dir_ / "test.mgb").string();
    EXPECT_TRUE(bundle::write_bundle_file(path, b).ok());
    return path;
  }

  std::filesystem::path dir_;
  std::string fake_env_;  // followed by the fake GPUs' compute capabilities
};

TEST_F(Embed, RunsAndChecksAKnownProgram) {
  Outcome r = embed(fake_env_ + "9.0", write(add_bundle("add", "add_f32")) + " --program add");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("program add: 1 kernel(s), workspace 0 bytes, code: cubin sm_90a (h200)\n"
                       "  input     a f32[1000] strides [1]\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("GPU 0 of 1: NVIDIA H200 (sm_90), 132 SMs, driver 13.0\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("running add with cubin sm_90a (built for h200)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output c: add reference, max abs error 0 (tolerance 0.00"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("): OK\n"), std::string::npos) << r.out;
}

TEST_F(Embed, CatchesAWrongResult) {
  Outcome r = embed(fake_env_ + "9.0", write(add_bundle("add", "add_f32_bad")) + " --program add");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("output c: add reference, max abs error 1 (tolerance 0.00"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("): MISMATCH\n  1 of 1000 elements differ\n"), std::string::npos) << r.out;
}

TEST_F(Embed, SummarisesAnUnknownProgram) {
  Outcome r = embed(fake_env_ + "9.0", write(add_bundle("mystery", "add_f32")) + " --program mystery");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("output c: no CPU reference for this program; sum "), std::string::npos) << r.out;
}

TEST_F(Embed, ListsWithoutRunning) {
  Outcome r = embed(fake_env_ + "9.0", write(add_bundle("add", "add_f32")));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("  output    c f32[1000] strides [1]\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("running"), std::string::npos) << r.out;
}

TEST_F(Embed, NoCodeForThisGpu) {
  Outcome r = embed(fake_env_ + "8.0", write(add_bundle("add", "add_f32")) + " --program add");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(
      r.out.find("error: no code for NVIDIA GPU compute capability 8.0 (sm_80) in program 'add': the bundle "
                 "has cubin sm_90a (h200); add a target for this GPU or include PTX (MG_ERROR_NO_VARIANT)\n"),
      std::string::npos)
      << r.out;
}

TEST_F(Embed, FailsCleanlyWithoutADriver) {
  const std::string empty = (dir_ / "no-driver-here").string();
  std::filesystem::create_directories(empty);
  Outcome r =
      embed("LD_LIBRARY_PATH='" + empty + "'", write(add_bundle("add", "add_f32")) + " --program add");
  // This process's own library path leads to the fake (meson adds it), so ask the child: if it got as far as
  // a GPU, a real driver is installed in the default path and there is nothing to test here.
  if (r.out.find("\nGPU 0 of ") != std::string::npos)
    GTEST_SKIP() << "a libcuda.so.1 is reachable on this machine";
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("program add: 1 kernel(s)"), std::string::npos) << "the bundle is listed first\n"
                                                                       << r.out;
  EXPECT_NE(
      r.out.find("error: no NVIDIA driver found (libcuda.so.1 could not be loaded: libcuda.so.1: cannot open "
                 "shared object file: No such file or directory) (MG_ERROR_NO_DRIVER)\n"),
      std::string::npos)
      << r.out;
}

TEST_F(Embed, BadBundle) {
  const std::string path = (dir_ / "junk.mgb").string();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs("junk", f);
  std::fclose(f);
  Outcome r = embed("", path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out, "error: " + path +
                       ": not a morgana bundle (the file does not start with the bundle magic bytes) "
                       "(MG_ERROR_BAD_BUNDLE)\n");
}

}  // namespace
}  // namespace morgana::runtime::testing
