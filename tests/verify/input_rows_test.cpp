// The cheap mode's inputs: whatever columns a row is drawn in and in whatever order, each element read is
// random_at(seed, input, index); rows stored interleaved must not overwrite each other's columns.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ir/parser.h"
#include "verify/input_rows.h"

namespace morgana::verify {
namespace {

TEST(InputRows, EveryDrawnElementIsItsRandomValue) {
  ir::Graph g = ir::parse_module(R"(kernel k(A: f16[3,50,64], B: f16[7,5]) {
  C = add_scalar(A, s=1)
  return C
}
)",
                                 "t.mg")
                    .programs[0];
  std::mt19937_64 rng(3);
  for (int phase = 0; phase < 40; ++phase) {
    FieldDomain d(static_cast<uint64_t>(phase));
    uint64_t seed = 100 + static_cast<uint64_t>(phase);
    InputRows inputs(g, {1, 0});
    std::vector<Columns> columns;
    for (ir::TensorId t : g.inputs()) {
      auto width = static_cast<int32_t>(g.type(t).dim(g.type(t).rank - 1));
      Columns c;
      if (phase % 4 == 0) c = {0, width - 1, 17 % width, 42 % width};  // the cheap mode's kind of sample
      for (int32_t j = 0; j < width; ++j)
        if (phase % 4 != 0 && rng() % (1 + phase % 5) == 0) c.push_back(j);
      if (c.empty()) c.push_back(0);
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
      columns.push_back(std::move(c));
    }
    std::vector<Columns> asked = columns;
    inputs.begin(d, seed, phase % 7 == 6 ? std::vector<Columns>{} : std::move(columns));
    if (phase % 7 == 6) asked = {};
    for (size_t k = 0; k < g.inputs().size(); ++k) {
      const ir::TensorType& ty = g.type(g.inputs()[k]);
      int64_t width = ty.dim(ty.rank - 1), rows = ty.numel() / width;
      std::vector<int64_t> order(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) order[static_cast<size_t>(r)] = r;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<const FieldValue*> row(static_cast<size_t>(rows));
      for (int64_t r : order) row[static_cast<size_t>(r)] = inputs.row(k, r * width);
      for (int64_t r = 0; r < rows; ++r) {
        Columns all(static_cast<size_t>(width));
        for (int32_t j = 0; j < width; ++j) all[static_cast<size_t>(j)] = j;
        for (int32_t c : asked.empty() ? all : asked[k])
          ASSERT_EQ(row[static_cast<size_t>(r)][c], d.random_at(seed, k, static_cast<uint64_t>(r * width + c), k == 0))
              << "phase " << phase << " input " << k << " row " << r << " column " << c;
      }
    }
  }
}

}  // namespace
}  // namespace morgana::verify
