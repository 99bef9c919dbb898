// Shared helpers of the lowering tests (run from the source root): the programs every test walks, the CUDA targets,
// and host buffers in a parameter's memory order.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <cmath>

#include "ir/parser.h"
#include "targets/lower/interpret.h"
#include "targets/lower/kernel_ir.h"
#include "targets/target.h"
#include "verify/float_check.h"
#include "verify/float_domain.h"

namespace morgana::testing {

namespace fs = std::filesystem;

struct TestProgram {
  std::string id;  // "examples/gqa_b1.mg" or "tests/verify/catalogue/true/01_split_k.mg:cand"
  ir::Graph graph;
};

inline std::vector<fs::path> mg_files(const fs::path& dir, bool recursive) {
  std::vector<fs::path> out;
  auto add = [&](const fs::directory_entry& e) {
    if (e.is_regular_file() && e.path().extension() == ".mg") out.push_back(e.path());
  };
  if (recursive)
    for (const auto& e : fs::recursive_directory_iterator(dir)) add(e);
  else
    for (const auto& e : fs::directory_iterator(dir)) add(e);
  std::sort(out.begin(), out.end());
  return out;
}

// Every example spec and μGraph, the ragged specs of tests/lower/specs and tests/gpu/specs, and both programs of
// every true rewrite of the verifier's catalogue (small user-written μGraphs with masks, to= reductions, online
// softmax).
inline std::vector<TestProgram> test_programs() {
  std::vector<fs::path> files = mg_files("examples", true);
  for (const fs::path& f : mg_files("tests/lower/specs", false)) files.push_back(f);
  for (const fs::path& f : mg_files("tests/gpu/specs", false)) files.push_back(f);
  for (const fs::path& f : mg_files("tests/verify/catalogue/true", false)) files.push_back(f);
  std::vector<TestProgram> out;
  for (const fs::path& f : files) {
    ir::Module m = ir::parse_file(f);
    for (ir::Graph& g : m.programs)
      out.push_back({f.string() + (m.programs.size() > 1 ? ":" + g.name() : ""), std::move(g)});
  }
  return out;
}

inline std::vector<targets::Target> cuda_targets() { return targets::load_all_targets("targets/cuda"); }

// A logical row-major array as the buffer of a parameter with strides (memory order), and back.
inline std::vector<double> to_memory(const std::vector<double>& logical, const lower::Param& p, int64_t span) {
  std::vector<double> mem(static_cast<size_t>(span), 0.0);
  for (size_t e = 0; e < logical.size(); ++e) {
    int64_t flat = static_cast<int64_t>(e), off = 0;
    for (size_t d = p.shape.size(); d-- > 0;) {
      off += flat % p.shape[d] * p.strides[d];
      flat /= p.shape[d];
    }
    mem[static_cast<size_t>(off)] = logical[e];
  }
  return mem;
}

inline std::vector<double> from_memory(const std::vector<double>& mem, const lower::Param& p) {
  int64_t n = 1;
  for (int64_t d : p.shape) n *= d;
  std::vector<double> logical(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t flat = e, off = 0;
    for (size_t d = p.shape.size(); d-- > 0;) {
      off += flat % p.shape[d] * p.strides[d];
      flat /= p.shape[d];
    }
    logical[static_cast<size_t>(e)] = mem[static_cast<size_t>(off)];
  }
  return logical;
}

// Runs `p` on the CPU executor with the reference interpreter's random inputs; returns the outputs in logical order.
inline std::vector<std::vector<double>> run_on_cpu(const lower::LoweredProgram& p, const std::vector<verify::FloatArray>& in) {
  std::vector<std::vector<double>> mem;
  for (size_t i = 0; i < in.size(); ++i) mem.push_back(to_memory(in[i].data, p.params[i], lower::param_span(p.params[i])));
  std::vector<std::vector<double>> out = lower::execute(p, mem);
  for (size_t i = 0; i < out.size(); ++i) out[i] = from_memory(out[i], p.params[in.size() + i]);
  return out;
}

// The float check's tolerance (verify/float_check.h): |c - r| <= rtol*|r| + rtol*max|r| + floor.
inline void expect_close(const std::vector<double>& got, const verify::FloatArray& want, const std::string& what) {
  verify::Tolerance tol = verify::float_tolerance(want.type.dtype);
  double scale = 0;
  for (double r : want.data) scale = std::max(scale, std::fabs(r));
  ASSERT_EQ(got.size(), want.data.size()) << what;
  for (size_t e = 0; e < got.size(); ++e) {
    double r = want.data[e], c = got[e];
    double allowed = tol.rtol * std::fabs(r) + tol.rtol * scale + tol.floor;
    if (!(std::fabs(c - r) <= allowed)) {
      ADD_FAILURE() << what << " element " << want.type.index_str(static_cast<int64_t>(e)) << ": got " << c
                    << ", reference " << r << " (allowed error " << allowed << ")";
      return;
    }
  }
}

// Runs one-output program `p`, lowered from `g`, on the CPU executor with the random inputs of `seed`, and compares
// its output with the float reference of `g`.
inline void expect_matches_reference(const ir::Graph& g, const lower::LoweredProgram& p, uint64_t seed,
                                     const std::string& what) {
  std::vector<verify::FloatArray> in = verify::random_inputs(g, seed);
  std::vector<verify::FloatArray> want = verify::eval_float(g, in);
  std::vector<std::vector<double>> got = run_on_cpu(p, in);
  ASSERT_EQ(got.size(), 1u) << what;
  expect_close(got[0], want[0], what);
}

}  // namespace morgana::testing
