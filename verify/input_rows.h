// The random inputs of a cheap equivalence check. Both programs read the same arrays, and a row (a slice along the
// last dim) is drawn on its first use, in the columns the programs can read (column_use.h), so what the sampled
// outputs never reach costs nothing (in attention, all but a few rows of Q and all but a few columns of V). Element
// i of input k is FieldDomain::random_at(seed, k, i) however it is reached: the values do not depend on the order
// of use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "verify/column_use.h"
#include "verify/field.h"
#include "verify/huge_pages.h"

namespace morgana::verify {

class InputRows {
 public:
  // `with_q[k]`: input k's Z_q part can matter to one of the programs (exponent_use.h); otherwise it is drawn as 0.
  InputRows(const ir::Graph& g, std::vector<char> with_q) : with_q_(std::move(with_q)) {
    for (ir::TensorId t : g.inputs()) {
      const ir::TensorType& ty = g.type(t);
      inputs_.push_back({ty.dim(ty.rank - 1), huge_page_array<FieldValue>(static_cast<size_t>(ty.numel())),
                         std::vector<char>(static_cast<size_t>(ty.numel() / ty.dim(ty.rank - 1))), {}, true});
    }
  }

  // From now on rows are drawn in columns `columns[k]` of input k (all columns if `columns` is empty), in the trial
  // of `domain` and `seed`; nothing is drawn yet.
  void begin(const FieldDomain& domain, uint64_t seed, std::vector<Columns> columns) {
    domain_ = &domain;
    seed_ = seed;
    for (size_t k = 0; k < inputs_.size(); ++k) {
      Input& in = inputs_[k];
      std::fill(in.drawn.begin(), in.drawn.end(), 0);
      in.columns = columns.empty() ? Columns{} : std::move(columns[k]);
      in.all = columns.empty() || static_cast<int64_t>(in.columns.size()) == in.width;
    }
  }

  // Element `flat` of input `k`, which starts a row (LazyInterpreter's InputFn); that row is drawn if it was not.
  const FieldValue* row(size_t k, int64_t flat) {
    Input& in = inputs_[k];
    auto r = static_cast<size_t>(flat / in.width);
    FieldValue* p = in.data.get() + flat;
    if (!in.drawn[r]) {
      if (in.all)
        domain_->random_fill(seed_, k, static_cast<uint64_t>(flat), p, static_cast<size_t>(in.width), with_q_[k]);
      else
        for (int32_t c : in.columns) p[c] = domain_->random_at(seed_, k, static_cast<uint64_t>(flat + c), with_q_[k]);
      in.drawn[r] = 1;
    }
    return p;
  }

 private:
  struct Input {
    int64_t width;  // of a row
    std::unique_ptr<FieldValue[], HugePageFree> data;
    std::vector<char> drawn;  // per row
    Columns columns;          // drawn in a row, unless `all`
    bool all = true;
  };
  std::vector<char> with_q_;
  std::vector<Input> inputs_;
  const FieldDomain* domain_ = nullptr;
  uint64_t seed_ = 0;
};

}  // namespace morgana::verify
