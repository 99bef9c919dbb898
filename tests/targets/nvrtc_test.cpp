// The NVRTC toolchain: cubins and PTX for each CUDA arch the target files name, and compile errors that point at
// the generated line and the μGraph node it came from. Skipped (with the reason) where no NVRTC is installed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/diagnostic.h"
#include "targets/cuda/nvrtc.h"

namespace morgana::cuda {
namespace {

// A kernel that uses an in-memory header, as generated code uses the device tile library.
constexpr std::string_view kHeader = "#pragma once\nnamespace mgt { __device__ inline float twice(float x) { return 2.0f * x; } }\n";
constexpr std::string_view kSource =
    "#include \"mgt/twice.cuh\"\n"
    "extern \"C\" __global__ void scale(const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = mgt::twice(x[i]);\n"
    "}\n";

#define SKIP_WITHOUT_NVRTC()                                      \
  do {                                                            \
    std::string why;                                              \
    if (nvrtc_version(&why).empty()) GTEST_SKIP() << why;         \
  } while (0)

NvrtcOutput compile(std::string_view source, const std::string& arch, std::span<const std::string> origin = {}) {
  SourceHeader h{"mgt/twice.cuh", kHeader};
  NvrtcInput in;
  in.source = source;
  in.headers = std::span<const SourceHeader>(&h, 1);
  in.line_origin = origin;
  in.arch = arch;
  return nvrtc_compile(in);
}

TEST(Nvrtc, CubinForEveryCudaTargetArch) {
  SKIP_WITHOUT_NVRTC();
  for (std::string arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(arch);
    NvrtcOutput out = compile(kSource, arch);
    ASSERT_GE(out.code.size(), 4u);
    EXPECT_EQ(out.code[0], 0x7f);  // ELF
    EXPECT_EQ(out.code[1], 'E');
    EXPECT_EQ(out.code[2], 'L');
    EXPECT_EQ(out.code[3], 'F');
  }
}

TEST(Nvrtc, PtxIsTextWithItsTerminator) {
  SKIP_WITHOUT_NVRTC();
  NvrtcOutput out = compile(kSource, "compute_80");
  ASSERT_FALSE(out.code.empty());
  EXPECT_EQ(out.code.back(), 0);
  std::string ptx(reinterpret_cast<const char*>(out.code.data()));
  EXPECT_NE(ptx.find(".target sm_80"), std::string::npos);
  EXPECT_NE(ptx.find(".entry scale"), std::string::npos);
}

TEST(Nvrtc, CompileErrorNamesTheGeneratedLineAndTheNode) {
  SKIP_WITHOUT_NVRTC();
  std::string bad = std::string(kSource);
  bad.replace(bad.find("mgt::twice(x[i])"), 16, "mgt::twice(x[i], 3)");
  std::vector<std::string> origin = {"", "", "", "node 'y' (spec.mg:4:3)", ""};
  try {
    compile(bad, "sm_90a", origin);
    FAIL() << "expected a compile error";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("NVRTC failed to compile the generated CUDA for sm_90a"), std::string::npos) << m;
    EXPECT_NE(m.find("morgana.cu(4): error"), std::string::npos) << m;
    EXPECT_NE(m.find("generated line 4:   if (i < n) y[i] = mgt::twice(x[i], 3);"), std::string::npos) << m;
    EXPECT_NE(m.find("from μGraph node 'y' (spec.mg:4:3)"), std::string::npos) << m;
  }
}

TEST(Nvrtc, RejectsWhatIsNotAnArch) {
  EXPECT_TRUE(is_cubin_arch("sm_90a"));
  EXPECT_TRUE(is_cubin_arch("sm_120"));
  EXPECT_TRUE(is_ptx_arch("compute_80"));
  EXPECT_FALSE(is_cubin_arch("sm_9"));
  EXPECT_FALSE(is_cubin_arch("gfx942"));
  EXPECT_FALSE(is_ptx_arch("compute_80ab"));
  EXPECT_EQ(cuda_arch_number("sm_90a"), 90);
  EXPECT_EQ(cuda_arch_number("compute_80"), 80);
  EXPECT_EQ(cuda_arch_number("sm_120"), 120);
  EXPECT_EQ(cuda_arch_number("gfx942"), 0);
  SKIP_WITHOUT_NVRTC();
  EXPECT_THROW(compile(kSource, "gfx942"), UserError);
}

}  // namespace
}  // namespace morgana::cuda
