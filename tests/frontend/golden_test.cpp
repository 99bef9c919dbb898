// Golden tests over the shipped examples and the error corpus (run from the source root):
//   - every examples/**/*.mg prints (fmt) and reports (check) exactly as tests/golden/<path>.{print,check} says,
//     and printing is a fixed point;
//   - every μGraph that names its spec with a "# spec: PATH" line computes the same outputs as the spec;
//   - every tests/errors/*.mg fails with exactly the diagnostic in its .expected file.
// MORGANA_BLESS=1 rewrites the expected files.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "frontend/report.h"
#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tests/common/golden.h"
#include "verify/float_domain.h"

namespace fs = std::filesystem;

namespace morgana {
namespace {

std::vector<fs::path> files_under(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Examples, PrintAndCheckMatchGoldenFiles) {
  std::vector<fs::path> files = files_under("examples", ".mg");
  ASSERT_GE(files.size(), 10u);
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    ir::Module m = ir::parse_file(f);
    std::string printed = ir::print(m);
    EXPECT_EQ(ir::print(ir::parse_module(printed, f.string())), printed) << "printing is not a fixed point";
    testing::expect_golden(fs::path("tests/golden") / (f.string() + ".print"), printed);
    testing::expect_golden(fs::path("tests/golden") / (f.string() + ".check"), frontend::check_report(m));
  }
}

TEST(Examples, MuGraphsComputeTheirSpecs) {
  std::regex spec_line(R"(#\s*spec:\s*(\S+))");
  int pairs = 0;
  for (const fs::path& f : files_under("examples", ".mg")) {
    std::string text = testing::read_file(f);
    std::smatch match;
    if (!std::regex_search(text, match, spec_line)) continue;
    SCOPED_TRACE(f.string() + " vs " + match[1].str());
    ++pairs;
    ir::Graph mu = std::move(ir::parse_file(f).programs[0]);
    ir::Graph spec = std::move(ir::parse_file(match[1].str()).programs[0]);
    for (uint64_t seed : {1, 2}) {
      std::vector<verify::FloatArray> in = verify::random_inputs(spec, seed);
      std::vector<verify::FloatArray> want = verify::eval_float(spec, in), got = verify::eval_float(mu, in);
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(want[i].type.shape().size(), got[i].type.shape().size());
        EXPECT_LE(verify::max_scaled_error(got[i], want[i], 1e-12, 1e-9), 1.0) << "output " << i << " seed " << seed;
      }
    }
    frontend::EvalOptions eo;
    ir::Module ms, mm;
    ms.programs.push_back(std::move(spec));
    mm.programs.push_back(std::move(mu));
    auto checksums = [](std::string r) { return r.substr(r.find('\n')); };  // drop the "kernel NAME" line
    EXPECT_EQ(checksums(frontend::eval_report(mm, eo)), checksums(frontend::eval_report(ms, eo)));
  }
  EXPECT_GE(pairs, 3) << "expected at least split-K, fused RMSNorm+Linear and split-KV attention";
}

TEST(Errors, EachMalformedSpecGivesItsExactDiagnostic) {
  std::vector<fs::path> files = files_under("tests/errors", ".mg");
  EXPECT_GE(files.size(), 15u);
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    std::string got;
    try {
      ir::parse_file(f);
      ADD_FAILURE() << "parsed without error";
      continue;
    } catch (const UserError& e) {
      got = e.render() + "\n";
    }
    fs::path expected = f;
    expected.replace_extension(".expected");
    testing::expect_golden(expected, got);
    EXPECT_NE(got.find(f.string() + ":"), std::string::npos) << "the diagnostic must name file:line:column";
  }
}

}  // namespace
}  // namespace morgana
