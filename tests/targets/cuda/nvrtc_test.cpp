// Every program the lowering tests walk (tests/lower/common.h) compiles with NVRTC, through the compiler's own
// toolchain (targets/cuda/nvrtc.h), for every CUDA target that can hold it, for that target's architecture (sm_80,
// sm_89, sm_90a), with the embedded tile library and no include path, and without a warning; a program that does
// not fit a target compiles with its tiles spilled to global memory. Skipped when NVRTC is not installed. A source
// that another target of the same architecture already generated (h200 lowers as h100 does; only the header comment
// names the target) is compiled once: NVRTC is most of this test's time.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "targets/cuda/codegen.h"
#include "targets/cuda/nvrtc.h"
#include "tests/lower/common.h"

namespace morgana::testing {
namespace {

TEST(Nvrtc, EveryGeneratedProgramCompiles) {
  std::string why;
  if (cuda::nvrtc_version(&why).empty()) GTEST_SKIP() << why;
  std::set<std::string> archs, seen;
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
      std::string key = t.identity.arch + "\n" + src.text;
      const std::string named = "target " + t.identity.name + " (";
      if (size_t at = key.find(named); at != std::string::npos) key.replace(at, named.size(), "target (");
      if (!seen.insert(std::move(key)).second) continue;
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

// ptxas's resource report (NvrtcInput::resource_report) names every kernel of a cubin with its registers, and
// ptxas_resources reads spills from it; the compile driver rolls the short loops of kernels that spill.
TEST(Nvrtc, ResourceReportNamesEveryKernel) {
  constexpr const char* kLog =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'p_k0_t3' for 'sm_90a'\n"
      "ptxas info    : Function properties for p_k0_t3\n"
      "ptxas         .     136 bytes stack frame, 132 bytes spill stores, 128 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 136 bytes cumulative stack size\n"
      "ptxas info    : Compiling entry function 'p_k1_t6' for 'sm_90a'\n"
      "ptxas info    : Function properties for p_k1_t6\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers\n";
  std::vector<cuda::KernelResources> r = cuda::ptxas_resources(kLog);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].entry, "p_k0_t3");
  EXPECT_EQ(r[0].registers, 255);
  EXPECT_EQ(r[0].spill_store_bytes, 132);
  EXPECT_EQ(r[0].spill_load_bytes, 128);
  EXPECT_EQ(r[1].entry, "p_k1_t6");
  EXPECT_EQ(r[1].registers, 40);
  EXPECT_EQ(r[1].spill_store_bytes, 0);
  EXPECT_TRUE(cuda::ptxas_resources("").empty());

  std::string why;
  if (cuda::nvrtc_version(&why).empty()) GTEST_SKIP() << why;
  const targets::Target h100 = targets::load_target("targets/cuda/h100.toml");
  ir::Graph g = std::move(ir::parse_file("examples/mugraphs/gqa_b1_split_kv_blocks.mg").programs[0]);
  lower::LoweredProgram p = cuda::lower(g, h100);
  lower::GeneratedSource src = cuda::emit_cuda(p, h100);
  std::vector<cuda::SourceHeader> headers;
  for (const lower::EmbeddedHeader& h : src.headers) headers.push_back({h.name, h.text});
  cuda::NvrtcInput in;
  in.source = src.text;
  in.headers = headers;
  in.arch = h100.identity.arch;
  in.resource_report = true;
  std::vector<cuda::KernelResources> got = cuda::ptxas_resources(cuda::nvrtc_compile(in).log);
  ASSERT_EQ(got.size(), p.kernels.size());
  for (const lower::Kernel& k : p.kernels) {
    auto it = std::find_if(got.begin(), got.end(), [&](const cuda::KernelResources& x) { return x.entry == k.entry; });
    ASSERT_NE(it, got.end()) << k.entry;
    EXPECT_GT(it->registers, 0) << k.entry;
    EXPECT_EQ(it->spill_store_bytes, 0) << k.entry;
  }
}

}  // namespace
}  // namespace morgana::testing
