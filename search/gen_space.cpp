#include "search/gen_space.h"

#include <algorithm>

#include "ir/diagnostic.h"
#include "search/gen_rules.h"

namespace morgana::search::gen {

using ir::Graph;

void skeletons_over(const std::vector<TensorId>& ops, const std::vector<KTensor>& kt,
                    const std::function<void(const Skeleton&)>& f) {
  std::vector<Label> axes;
  for (TensorId t : ops)
    for (int d = 0; d < kt[t].labels.rank; ++d) {
      Label l = partition(kt[t].labels.dims[static_cast<size_t>(d)]);
      if (l.unit()) continue;
      if (std::find(axes.begin(), axes.end(), l) == axes.end()) axes.push_back(l);
    }
  std::sort(axes.begin(), axes.end(), [](const Label& a, const Label& b) {
    return std::tie(a.over, a.axis, a.parts) < std::tie(b.over, b.axis, b.parts);
  });
  size_t n = axes.size();
  // Stacked dims must be cut into their partial results by the grid or the loop.
  auto covers_stacked = [&](const std::vector<Label>& grid, const Label& loop) {
    for (const Label& l : axes)
      if (l.stacked() && !(l == loop) && std::find(grid.begin(), grid.end(), l) == grid.end()) return false;
    return true;
  };
  std::vector<Label> grid;
  std::function<void(size_t)> rec = [&](size_t from) {
    for (size_t li = 0; li <= n; ++li) {
      Label loop = li == n ? Label{} : axes[li];
      if (!covers_stacked(grid, loop)) continue;
      f(Skeleton{ops, grid, loop});
    }
    if (grid.size() == static_cast<size_t>(ir::kGridDims)) return;
    for (size_t i = from; i < n; ++i) {
      grid.push_back(axes[i]);
      rec(i + 1);
      grid.pop_back();
    }
  };
  rec(0);
}

std::vector<Task> root_tasks(const std::vector<Labels>& input_labels) {
  std::vector<KTensor> kt;
  for (const Labels& l : input_labels) {
    KTensor k;
    k.labels = l;
    kt.push_back(k);
  }
  std::vector<Task> tasks;
  tasks.push_back(Task{});  // "a predefined op first"
  std::vector<TensorId> pick;
  size_t n = kt.size();
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) > 4) continue;
    pick.clear();
    for (TensorId t = 0; t < n; ++t)
      if (mask >> t & 1) pick.push_back(t);
    skeletons_over(pick, kt, [&](const Skeleton& sk) { tasks.push_back(Task{true, sk}); });
  }
  return tasks;
}

namespace {

// Divisors of n above 1, ascending (1 would not cut the axis).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> lo, hi;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      lo.push_back(i);
      if (i * i != n) hi.push_back(n / i);
    }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  lo.erase(lo.begin());
  return lo;
}

}  // namespace

std::vector<ir::BlockParams> instantiations(const Skeleton& sk, const SpecAxes& axes, int64_t max_blocks,
                                            int64_t threads) {
  std::vector<ir::BlockParams> out;
  ir::BlockParams p;
  p.threads = threads;
  std::function<void(size_t, int64_t)> rec = [&](size_t g, int64_t blocks) {
    if (g == sk.grid.size()) {
      if (sk.loop.unit()) {
        p.loop = 1;
        out.push_back(p);
        return;
      }
      int64_t rem = extent_of(sk.loop, axes);
      for (size_t i = 0; i < sk.grid.size(); ++i)
        if (sk.grid[i] == sk.loop) rem /= p.grid[i];
      if (sk.loop.stacked()) {
        if (rem == static_cast<int64_t>(sk.loop.parts)) {
          p.loop = rem;
          out.push_back(p);
        }
        return;
      }
      bool looped = false;
      for (int64_t l = 2; l <= std::min(rem, kMaxLoop); l *= 2)
        if (rem % l == 0) {
          p.loop = l;
          out.push_back(p);
          looped = true;
        }
      // Never first: the first size is the one the skeleton's block graphs are found at, with its loop.
      if (looped && grid_cuts(sk, sk.loop)) {
        p.loop = 1;
        out.push_back(p);
      }
      return;
    }
    const Label& l = sk.grid[g];
    std::vector<int64_t> sizes =
        l.stacked() ? std::vector<int64_t>{static_cast<int64_t>(l.parts)} : divisors(extent_of(l, axes));
    for (int64_t s : sizes) {
      if (blocks * s > max_blocks) break;
      p.grid[g] = s;
      rec(g + 1, blocks * s);
    }
    p.grid[g] = 1;
  };
  rec(0, 1);
  return out;
}

std::optional<Graph> replay(const Graph& body, const ir::BlockParams& p, const std::vector<ir::TensorType>& types) {
  Graph g = Graph::make_block(p, types);
  try {
    for (const ir::Node& n : body.nodes()) {
      if (n.op == OpCode::iter)
        g.add_iter(n.attrs.index, n.attrs.map, p.loop == 1 ? ir::kPhi : n.attrs.fmap, n.attrs.mask);
      else
        g.add(n.op, body.operands(n), n.attrs);
    }
  } catch (const UserError&) {
    return std::nullopt;
  }
  return g;
}

uint64_t structure_hash(const Graph& g) {
  uint64_t h = 0x51;
  for (const ir::Node& n : g.nodes()) {
    h = ir::hash_mix(h, static_cast<uint64_t>(n.op));
    for (TensorId t : g.operands(n)) h = ir::hash_mix(h, t);
    if (n.op == OpCode::block) {
      const Graph& b = g.body(n);
      for (const ir::Node& bn : b.nodes()) {
        h = ir::hash_mix(h, static_cast<uint64_t>(bn.op));
        for (TensorId t : b.operands(bn)) h = ir::hash_mix(h, t);
        h = ir::hash_mix(h, static_cast<uint64_t>(bn.attrs.dim));
        for (int8_t m : bn.attrs.map) h = ir::hash_mix(h, static_cast<uint64_t>(m + 2));
        h = ir::hash_mix(h, static_cast<uint64_t>(bn.attrs.fmap + 2));
      }
    }
  }
  return h;
}

Labels tile_labels(const Graph& bg, TensorId t, const Skeleton& sk, const std::vector<KTensor>& kt,
                   const JoinedAxes& joints) {
  const ir::Node& n = bg.node(bg.tensor(t).producer);
  auto ops = bg.operands(n);
  if (n.op == OpCode::iter) {
    Labels l = kt[sk.operands[n.attrs.index]].labels;
    for (int d = 0; d < l.rank; ++d)
      if (l.dims[static_cast<size_t>(d)].stacked())
        l.dims[static_cast<size_t>(d)] = Label{l.dims[static_cast<size_t>(d)].axis, 0, 0};
    return l;
  }
  if (ir::op_info(n.op).kind == ir::OpKind::Accum) return tile_labels(bg, ops[0], sk, kt, joints);
  Labels a = tile_labels(bg, ops[0], sk, kt, joints);
  Labels b;
  if (ops.size() > 1) b = tile_labels(bg, ops[1], sk, kt, joints);
  const std::optional<Labels> l = block_labels(n.op, n.attrs, &a, ops.size() > 1 ? &b : nullptr, joints, nullptr);
  MG_CHECK(l.has_value(), "generator: labels of a built block graph do not agree");
  return *l;
}

}  // namespace morgana::search::gen
