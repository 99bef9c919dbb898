// The random inputs of a cheap equivalence check (and, as RowStore, of the sampled float check). Both programs read
// the same arrays, and a row (a slice along the last dim) is drawn on its first use, in the columns the programs can
// read (column_use.h), so what the sampled outputs never reach costs nothing (in attention, all but a few rows of Q
// and all but a few columns of V). Element i of input k is FieldDomain::random_at(seed, k, i) (in the float check,
// random_input's value) however it is reached: the values do not depend on the order of use.
//
// An input read in a few columns only is stored with its rows interleaved: row r starts r·d elements into the
// array, d the least stride at which no two rows' columns share an element (no difference of two columns is a
// multiple of d; 4 for columns {0, 17, 42, 63}). Its 64-wide rows then take 4 elements each instead of 64, and the
// pages never read are never touched: for V in attention, 0.5 MB instead of 8 MB that the kernel must zero.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "verify/column_use.h"
#include "verify/field.h"
#include "verify/huge_pages.h"

namespace morgana::verify {

// The storage and layout above, for inputs of element type V however their values are made: the caller draws a row
// when it is first read.
template <class V>
class RowStore {
 public:
  explicit RowStore(const ir::Graph& g) {
    for (ir::TensorId t : g.inputs()) {
      const ir::TensorType& ty = g.type(t);
      Input in;
      in.width = ty.dim(ty.rank - 1);
      in.drawn.resize(static_cast<size_t>(ty.numel() / in.width));
      inputs_.push_back(std::move(in));
    }
  }

  // From now on rows hold columns `columns[k]` of input k (all columns if `columns` is empty); nothing is drawn yet.
  void layout(std::vector<Columns> columns) {
    for (size_t k = 0; k < inputs_.size(); ++k) {
      Input& in = inputs_[k];
      std::fill(in.drawn.begin(), in.drawn.end(), 0);
      in.columns = columns.empty() ? Columns{} : std::move(columns[k]);
      in.all = columns.empty() || static_cast<int64_t>(in.columns.size()) == in.width;
      in.stride = in.all ? in.width : interleaving_stride(in.columns, in.width);
      // Rows of an earlier layout may sit in the other array: interpreters of that layout evaluate no more.
      auto need = static_cast<size_t>((static_cast<int64_t>(in.drawn.size()) - 1) * in.stride + in.width);
      Storage& st = in.all ? in.whole : in.interleaved;
      if (st.size < need) st = {huge_page_array<V>(need), need};
      in.base = st.data.get();
    }
  }

  // Element `flat` of input `k`, which starts a row (LazyInterpreter's InputFn). A row not drawn yet is drawn first:
  // draw(p, columns, width) sets p[c] for each column c in `columns`, or for every c < width when `columns` is null.
  template <class Draw>
  const V* row(size_t k, int64_t flat, Draw&& draw) {
    Input& in = inputs_[k];
    auto r = static_cast<size_t>(flat / in.width);
    V* p = in.base + static_cast<int64_t>(r) * in.stride;
    if (!in.drawn[r]) {
      draw(p, in.all ? nullptr : &in.columns, in.width);
      in.drawn[r] = 1;
    }
    return p;
  }

 private:
  // The least stride at which rows holding `columns` (sorted) do not overlap; `width` at most.
  static int64_t interleaving_stride(const Columns& columns, int64_t width) {
    std::vector<char> difference(static_cast<size_t>(width), 0);
    for (size_t i = 0; i < columns.size(); ++i)
      for (size_t j = i + 1; j < columns.size(); ++j) difference[static_cast<size_t>(columns[j] - columns[i])] = 1;
    for (auto d = std::max<int64_t>(1, static_cast<int64_t>(columns.size()));; ++d) {
      bool clash = false;
      for (int64_t m = d; m < width && !clash; m += d) clash = difference[static_cast<size_t>(m)];
      if (!clash) return d;
    }
  }

  struct Storage {
    std::unique_ptr<V[], HugePageFree> data;
    size_t size = 0;
  };
  struct Input {
    int64_t width = 0;        // of a row
    std::vector<char> drawn;  // per row
    Columns columns;          // drawn in a row, unless `all`
    bool all = true;
    int64_t stride = 0;  // between the starts of consecutive rows in `base`
    V* base = nullptr;
    Storage whole, interleaved;  // rows `width` apart; rows interleaved
  };
  std::vector<Input> inputs_;
};

// The cheap equivalence check's inputs: finite-field values, drawn per trial.
class InputRows {
 public:
  // `with_q[k]`: input k's Z_q part can matter to one of the programs (exponent_use.h); otherwise it is drawn as 0.
  InputRows(const ir::Graph& g, std::vector<char> with_q) : rows_(g), with_q_(std::move(with_q)) {}

  // From now on rows are drawn in columns `columns[k]` of input k (all columns if `columns` is empty), in the trial
  // of `domain` and `seed`; nothing is drawn yet.
  void begin(const FieldDomain& domain, uint64_t seed, std::vector<Columns> columns) {
    domain_ = &domain;
    seed_ = seed;
    rows_.layout(std::move(columns));
  }

  // Element `flat` of input `k`, which starts a row (LazyInterpreter's InputFn); that row is drawn if it was not.
  const FieldValue* row(size_t k, int64_t flat) {
    return rows_.row(k, flat, [&](FieldValue* p, const Columns* columns, int64_t width) {
      auto first = static_cast<uint64_t>(flat);
      if (!columns)
        domain_->random_fill(seed_, k, first, p, static_cast<size_t>(width), with_q_[k]);
      else
        for (int32_t c : *columns) p[c] = domain_->random_at(seed_, k, first + static_cast<uint64_t>(c), with_q_[k]);
    });
  }

 private:
  RowStore<FieldValue> rows_;
  std::vector<char> with_q_;
  const FieldDomain* domain_ = nullptr;
  uint64_t seed_ = 0;
};

}  // namespace morgana::verify
