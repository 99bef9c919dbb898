// `morgana inspect` on a bundle written here: what it prints, and exit 1 with the reader's message on a bad
// file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "tests/common/command.h"
#include "tests/runtime/samples.h"

namespace morgana::bundle {
namespace {

using Outcome = morgana::testing::CommandResult;  // out: stdout and stderr together

Outcome inspect(const std::string& args) {
  const char* bin = std::getenv("MORGANA_BIN");
  EXPECT_NE(bin, nullptr) << "MORGANA_BIN is set by meson";
  return morgana::testing::run_command(std::string(bin ? bin : "morgana") + " inspect " + args + " 2>&1");
}

class Inspect : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("morgana_inspect_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(Inspect, PrintsProgramsKernelsParametersAndVariants) {
  std::string path = (dir_ / "multi.mgb").string();
  Bundle b = samples::multi();
  b.programs[0].kernels[0].tensor_maps = {TensorMap{2, {1, 1, 256, 128}, 0}};
  ASSERT_TRUE(write_bundle_file(path, b).ok());
  Outcome r = inspect(path);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* line : {"bundle format version 2: 3 program(s), 4 variant(s)\n",
                           "    tensor map 0 of v  box [1, 1, 256, 128]  swizzle 0\n",
                           "program 0: attention  workspace 266240 bytes  variants 0, 1, 3\n",
                           "  kernel 0: attention_k0  grid 32x8x2  block 128x1x1  dynamic smem 49152 bytes\n",
                           "    workspace ws f32[2, 8, 32, 130] strides [33280, 4160, 130, 1]\n",
                           "    input     s f32[] strides []\n",
                           "variant 2: mi300x hsaco gfx942:sramecc+:xnack-  200 bytes  crc64 "})
    EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << r.out;
  Outcome m = inspect(path + " --mugraph");
  EXPECT_NE(m.out.find("    # μGraph für Aufmerksamkeit — 注意力 ✓\n"), std::string::npos) << m.out;
}

TEST_F(Inspect, BadFileExitsOneWithTheReadersMessage) {
  std::string path = (dir_ / "bad.mgb").string();
  ASSERT_TRUE(write_bundle_file(path, samples::tiny()).ok());
  std::filesystem::resize_file(path, 100);
  Outcome r = inspect(path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("error: " + path + ": truncated: header says the file has "), std::string::npos)
      << r.out;
  Outcome missing = inspect((dir_ / "none.mgb").string());
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("cannot open: No such file or directory"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace morgana::bundle
