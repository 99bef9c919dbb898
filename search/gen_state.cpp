#include "search/gen_state.h"

#include <cstring>

namespace morgana::search::gen {

Rank rank_of(std::span<const TensorId> operands, OpCode op, uint64_t attr_key) {
  Rank r;
  uint64_t h = ir::hash_mix(0x5eed, static_cast<uint64_t>(op));
  for (TensorId t : operands) {
    r.newest = std::max(r.newest, t + 1);
    h = ir::hash_mix(h, t);
  }
  r.rest = ir::hash_mix(h, attr_key);
  return r;
}

uint64_t attr_key(const ir::Attrs& a) {
  uint64_t h = ir::hash_mix(static_cast<uint64_t>(a.dim), static_cast<uint64_t>(a.to));
  uint64_t s;
  std::memcpy(&s, &a.s, sizeof s);
  return ir::hash_mix(h, s);
}

Header header_of(const Skeleton& sk) {
  Header h;
  for (size_t g = 0; g < sk.grid.size(); ++g) {
    h.axes.push_back(sk.grid[g]);
    h.grid_of.push_back(static_cast<int>(g));
  }
  if (!sk.loop.unit()) {
    h.loop = h.bit(sk.loop);
    if (h.loop < 0) {
      h.axes.push_back(sk.loop);
      h.grid_of.push_back(-1);
      h.loop = static_cast<int>(h.axes.size()) - 1;
    }
  }
  return h;
}

TensorId pending_scalar(const Block& b) {
  if (b.bt.empty()) return kNone;
  const BTensor& t = b.bt.back();
  return t.uses == 0 && t.scalar != OpCode::input ? static_cast<TensorId>(b.bt.size() - 1) : kNone;
}

bool has_axis_in(const BTensor& t, uint8_t bits, const Header& h) {
  for (int d = 0; d < t.labels.rank; ++d) {
    int bit = h.bit(t.labels.dims[static_cast<size_t>(d)]);
    if (bit >= 0 && (bits >> bit & 1)) return true;
  }
  return false;
}

bool has_loop_dim(const Header& h, const BTensor& x) {
  const Label& l = h.axes[static_cast<size_t>(h.loop)];
  for (int d = 0; d < x.labels.rank; ++d)
    if (x.labels.dims[static_cast<size_t>(d)] == l) return true;
  return false;
}

bool grid_cuts(const Skeleton& sk, const Label& l) {
  return std::find(sk.grid.begin(), sk.grid.end(), l) != sk.grid.end();
}

}  // namespace morgana::search::gen
