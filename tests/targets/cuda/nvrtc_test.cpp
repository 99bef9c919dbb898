// Every program the lowering tests walk (tests/lower/common.h) compiles with NVRTC for every CUDA target that can
// hold it, for that target's architecture (sm_80, sm_89, sm_90a), with the embedded tile library and no include
// path. Skipped when libnvrtc.so is not installed.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "targets/cuda/codegen.h"
#include "tests/lower/common.h"
#include "tests/targets/cuda/nvrtc.h"

namespace morgana::testing {
namespace {

TEST(Nvrtc, EveryGeneratedProgramCompiles) {
  Nvrtc nvrtc;
  if (!nvrtc.available()) GTEST_SKIP() << "libnvrtc.so not found in $CUDA_HOME/lib64 or /usr/local/cuda/lib64";
  std::set<std::string> archs;
  int compiled = 0;
  for (const TestProgram& tp : test_programs())
    for (const targets::Target& t : cuda_targets()) {
      SCOPED_TRACE(tp.id + " on " + t.identity.name);
      lower::LoweredProgram p;
      try {
        p = cuda::lower(tp.graph, t);
      } catch (const UserError&) {
        continue;  // does not fit this target (tests/golden/lower/cuda_infeasible.txt)
      }
      lower::GeneratedSource src = cuda::emit_cuda(p, t);
      Nvrtc::Result r = nvrtc.compile(src, p.name + ".cu", t.identity.arch);
      EXPECT_TRUE(r.ok) << r.log << "\n" << src.text;
      EXPECT_TRUE(r.log.empty()) << "NVRTC warnings:\n" << r.log;
      EXPECT_GT(r.cubin_bytes, 0u);
      archs.insert(t.identity.arch);
      ++compiled;
    }
  EXPECT_EQ(archs, (std::set<std::string>{"sm_80", "sm_89", "sm_90a"}));
  EXPECT_GE(compiled, 100);
}

}  // namespace
}  // namespace morgana::testing
