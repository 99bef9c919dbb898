// Every program the lowering tests walk (tests/lower/common.h) compiles with NVRTC, through the compiler's own
// toolchain (targets/cuda/nvrtc.h), for every CUDA target that can hold it, for that target's architecture (sm_80,
// sm_89, sm_90a), with the embedded tile library and no include path, and without a warning; a program that does
// not fit a target compiles with its tiles spilled to global memory. Skipped when NVRTC is not installed.
#include <gtest/gtest.h>

#include <set>

#include "targets/cuda/codegen.h"
#include "targets/cuda/nvrtc.h"
#include "tests/lower/common.h"

namespace morgana::testing {
namespace {

TEST(Nvrtc, EveryGeneratedProgramCompiles) {
  std::string why;
  if (cuda::nvrtc_version(&why).empty()) GTEST_SKIP() << why;
  std::set<std::string> archs;
  int compiled = 0;
  for (const TestProgram& tp : test_programs())
    for (const targets::Target& t : cuda_targets()) {
      SCOPED_TRACE(tp.id + " on " + t.identity.name);
      lower::LoweredProgram p;
      try {
        p = cuda::lower(tp.graph, t);
      } catch (const UserError&) {
        // Does not fit this target (tests/golden/lower/cuda_infeasible.txt): compile it with spilled tiles.
        lower::LowerOptions o;
        o.spill_to_global = true;
        p = cuda::lower(tp.graph, t, o);
      }
      lower::GeneratedSource src = cuda::emit_cuda(p, t);
      std::vector<cuda::SourceHeader> headers;
      for (const lower::EmbeddedHeader& h : src.headers) headers.push_back({h.name, h.text});
      const std::string file_name = p.name + ".cu";  // NvrtcInput holds views: keep what they see alive
      cuda::NvrtcInput in;
      in.source = src.text;
      in.file_name = file_name;
      in.headers = headers;
      in.line_origin = src.line_origin;
      in.arch = t.identity.arch;
      try {
        cuda::NvrtcOutput out = cuda::nvrtc_compile(in);
        EXPECT_TRUE(out.log.empty()) << "NVRTC warnings:\n" << out.log;
        EXPECT_GT(out.code.size(), 0u);
      } catch (const UserError& e) {
        ADD_FAILURE() << e.what();
      }
      archs.insert(t.identity.arch);
      ++compiled;
    }
  EXPECT_EQ(archs, (std::set<std::string>{"sm_80", "sm_89", "sm_90a"}));
  EXPECT_GE(compiled, 100);
}

}  // namespace
}  // namespace morgana::testing
