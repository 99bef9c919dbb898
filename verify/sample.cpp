#include "verify/sample.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "verify/splitmix.h"

namespace morgana::verify {

Sample choose_sample(const ir::Graph& g, uint64_t seed, int trial) {
  Sample s;
  uint64_t state = seed ^ 0x5851f42d4c957f2dULL;
  for (ir::TensorId t : g.outputs()) {
    const ir::TensorType& ty = g.type(t);
    std::vector<std::vector<int64_t>> coords(static_cast<size_t>(ty.rank));
    for (int d = 0; d < ty.rank; ++d) {
      int64_t n = ty.dim(d);
      auto rnd = [&] { return static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(n)); };
      std::set<int64_t> c;
      if (n <= 2) {
        for (int64_t i = 0; i < n; ++i) c.insert(i);
      } else if (d == ty.rank - 1) {
        c = {0, n - 1, rnd(), rnd()};
      } else {
        c = {trial == 0 ? n - 1 : rnd()};
      }
      coords[static_cast<size_t>(d)].assign(c.begin(), c.end());
    }
    s.columns.emplace_back(coords.back().begin(), coords.back().end());
    std::vector<int64_t> flat{0};
    for (int d = 0; d < ty.rank; ++d) {
      std::vector<int64_t> next;
      for (int64_t f : flat)
        for (int64_t c : coords[static_cast<size_t>(d)]) next.push_back(f * ty.dim(d) + c);
      flat = std::move(next);
    }
    s.elements.push_back(std::move(flat));
  }
  return s;
}

Sample sample_union(const Sample& a, const Sample& b) {
  Sample u;
  for (size_t o = 0; o < a.elements.size(); ++o) {
    std::vector<int64_t> e;
    std::set_union(a.elements[o].begin(), a.elements[o].end(), b.elements[o].begin(), b.elements[o].end(),
                   std::back_inserter(e));
    u.elements.push_back(std::move(e));
    u.columns.push_back(column_union(a.columns[o], b.columns[o]));
  }
  return u;
}

}  // namespace morgana::verify
