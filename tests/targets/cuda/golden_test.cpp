// The generated CUDA of a few small programs, compared with tests/golden/cuda/*.cu (MORGANA_BLESS=1 rewrites
// them after review), and the properties every generated source has: a line origin per line, statement lines that
// point back at their μGraph node, and the embedded tile library exactly as in the source tree.
#include <gtest/gtest.h>

#include <algorithm>

#include "targets/cuda/codegen.h"
#include "tests/common/golden.h"
#include "tests/lower/common.h"

namespace morgana::testing {
namespace {

// A user μGraph with an online-softmax accumulator, a ragged batched matmul with masks, and a spec of several
// kernels with a workspace and rms_norm.
const char* const kGoldenPrograms[] = {
    "tests/verify/catalogue/true/07_online_softmax.mg",
    "tests/lower/specs/matmul_ragged.mg",
    "examples/ntrans.mg",
};

std::string source_of(const fs::path& file, const targets::Target& t) {
  std::string text;
  for (const ir::Graph& g : ir::parse_file(file).programs) text += cuda::emit_cuda(cuda::lower(g, t), t).text;
  return text;
}

TEST(CudaGolden, GeneratedSourceMatchesTheGoldenFiles) {
  targets::Target t = targets::load_target("targets/cuda/h100.toml");
  for (const char* f : kGoldenPrograms) {
    SCOPED_TRACE(f);
    expect_golden(fs::path("tests/golden/cuda") / (fs::path(f).stem().string() + ".cu"), source_of(f, t));
  }
}

TEST(CudaGolden, EveryLineKnowsWhereItCameFrom) {
  targets::Target t = targets::load_target("targets/cuda/a100.toml");
  for (const TestProgram& tp : test_programs()) {
    SCOPED_TRACE(tp.id);
    lower::LoweredProgram p;
    try {
      p = cuda::lower(tp.graph, t);
    } catch (const UserError&) {
      continue;
    }
    lower::GeneratedSource src = cuda::emit_cuda(p, t);
    ASSERT_EQ(static_cast<size_t>(std::count(src.text.begin(), src.text.end(), '\n')), src.line_origin.size());
    size_t start = 0;
    for (size_t i = 0; i < src.line_origin.size(); ++i) {
      size_t end = src.text.find('\n', start);
      std::string line = src.text.substr(start, end - start);
      start = end + 1;
      // Every tile-API call and barrier names the node it implements.
      bool call = line.find("mg::") != std::string::npos && line.find("using ") == std::string::npos &&
                  line.find("reinterpret_cast") == std::string::npos;
      if (call || line.find("__syncthreads") != std::string::npos) {
        EXPECT_EQ(src.line_origin[i].rfind("node '", 0), 0u) << "line " << i + 1 << ": " << line;
      }
    }
  }
}

TEST(CudaGolden, TheTileLibraryIsEmbeddedAsWritten) {
  std::span<const lower::EmbeddedHeader> headers = cuda::cuda_device_headers();
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_EQ(headers[0].name, "morgana_tile.cuh");
  EXPECT_EQ(std::string(headers[0].text), read_file("targets/cuda/device/morgana_tile.cuh"));
  // NVRTC gets no include path: the library may include nothing.
  EXPECT_EQ(std::string(headers[0].text).find("#include"), std::string::npos);
  targets::Target t = targets::load_target("targets/cuda/h200.toml");
  lower::GeneratedSource src =
      cuda::emit_cuda(cuda::lower(ir::parse_file("tests/lower/specs/concat_odd.mg").programs[0], t), t);
  ASSERT_EQ(src.headers.size(), 1u);
  EXPECT_NE(src.text.find("#include \"morgana_tile.cuh\"\n"), std::string::npos);
}

}  // namespace
}  // namespace morgana::testing
