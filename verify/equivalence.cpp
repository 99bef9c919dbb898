#include "verify/equivalence.h"

#include <chrono>
#include <exception>
#include <future>

#include "ir/printer.h"
#include "verify/column_use.h"
#include "verify/exponent_use.h"
#include "verify/field.h"
#include "verify/input_rows.h"
#include "verify/interpreter.h"
#include "verify/lazy_interpreter.h"
#include "verify/sample.h"
#include "verify/splitmix.h"

#include <map>
#include <optional>

namespace morgana::verify {

namespace {


std::string value_str(const FieldDomain& d, const FieldValue& v) { return std::to_string(d.canonical(v.u)) + " (mod p)"; }

bool same_shape(const ir::TensorType& a, const ir::TensorType& b) {
  return a.rank == b.rank && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
}

// Inputs and outputs must line up one to one, with equal shapes and element types.
std::string interface_mismatch(const ir::Graph& ref, const ir::Graph& cand) {
  auto side = [](const char* what, std::span<const ir::TensorId> r, std::span<const ir::TensorId> c,
                 const ir::Graph& rg, const ir::Graph& cg) -> std::string {
    if (r.size() != c.size())
      return std::string("the reference has ") + std::to_string(r.size()) + " " + what + "s, the candidate " +
             std::to_string(c.size());
    for (size_t i = 0; i < r.size(); ++i)
      if (!same_shape(rg.type(r[i]), cg.type(c[i])) || rg.type(r[i]).dtype != cg.type(c[i]).dtype)
        return std::string(what) + " " + std::to_string(i) + " is " + rg.type(r[i]).str() + " in the reference but " +
               cg.type(c[i]).str() + " in the candidate";
    return "";
  };
  std::string m = side("input", ref.inputs(), cand.inputs(), ref, cand);
  return m.empty() ? side("output", ref.outputs(), cand.outputs(), ref, cand) : m;
}

std::vector<Array<FieldValue>> run_side(Interpreter<FieldDomain>& interp, const ir::Graph& g,
                                        const std::vector<Array<FieldValue>>& inputs, const char* side, int trial) {
  try {
    return interp.run(g, inputs);
  } catch (const FieldDivisionByZero&) {
    throw FieldDivisionByZero(std::string("the ") + side + " divides by a zero residue in trial " +
                              std::to_string(trial));
  }
}

template <class L>
FieldValue lazy_side(L& li, size_t o, int64_t i, const char* side, int trial) {
  try {
    return li.output(o, i);
  } catch (const FieldDivisionByZero&) {
    throw FieldDivisionByZero(std::string("the ") + side + " divides by a zero residue in trial " +
                              std::to_string(trial));
  }
}

struct BlockRef {
  ir::NodeId node;
  std::array<int64_t, ir::kGridDims> block;
};

// Every block of every block op of `g`, the last block op's first: chasing a consumer's blocks reaches its
// producers' blocks on the way, and a producer's element cannot be chased through its consumer (propagate()).
std::vector<BlockRef> all_blocks(const ir::Graph& g) {
  std::vector<BlockRef> out;
  for (ir::NodeId n = g.nodes().size(); n-- > 0;) {
    if (g.node(n).op != ir::OpCode::block) continue;
    const ir::BlockParams& p = g.body(g.node(n)).block_params();
    for (int64_t z = 0; z < p.grid[2]; ++z)
      for (int64_t y = 0; y < p.grid[1]; ++y)
        for (int64_t x = 0; x < p.grid[0]; ++x) out.push_back({n, {x, y, z}});
  }
  return out;
}

// The output that `t` is, if any.
std::optional<size_t> output_index(const ir::Graph& g, ir::TensorId t) {
  for (size_t o = 0; o < g.outputs().size(); ++o)
    if (g.outputs()[o] == t) return o;
  return std::nullopt;
}

// A free coordinate of dim `d` of tensor `t`, in [lo, lo + n): random, but where `t` is an output and `d` its last
// dim, one of the sample's columns in that range if there is one. An element in a sampled column is checked by the
// interpreters that make the sampled columns alone, which already hold what the sample computed.
int64_t free_coordinate(const ir::Graph& g, ir::TensorId t, int d, int64_t lo, int64_t n, const Sample& sample,
                        uint64_t& rng) {
  auto rnd = [&](size_t k) { return static_cast<size_t>(splitmix64(rng) % static_cast<uint64_t>(k)); };
  std::optional<size_t> o = output_index(g, t);
  if (o && d == g.type(t).rank - 1) {
    const Columns& cols = sample.columns[*o];
    auto first = std::lower_bound(cols.begin(), cols.end(), lo), last = std::lower_bound(cols.begin(), cols.end(), lo + n);
    if (first != last) return first[static_cast<std::ptrdiff_t>(rnd(static_cast<size_t>(last - first)))] - lo;
  }
  return static_cast<int64_t>(rnd(static_cast<size_t>(n)));
}

// Follows element `flat` of tensor `t` forward through kernel-level ops to a graph output, choosing free
// coordinates with free_coordinate(); nullopt if the path enters another block op or reaches no output.
std::optional<std::pair<size_t, int64_t>> propagate(const ir::Graph& g, ir::TensorId t, int64_t flat,
                                                    const Sample& sample, uint64_t& rng) {
  for (int guard = 0; guard < 64; ++guard) {
    if (std::optional<size_t> o = output_index(g, t)) return std::make_pair(*o, flat);
    // The first consumer that is not a block op.
    const ir::Node* next = nullptr;
    size_t pos = 0;
    for (const ir::Node& n : g.nodes()) {
      auto ops = g.operands(n);
      for (size_t k = 0; k < ops.size() && !next; ++k)
        if (ops[k] == t && n.op != ir::OpCode::block && n.op != ir::OpCode::output) {
          next = &n;
          pos = k;
        }
      if (next) break;
    }
    if (!next) return std::nullopt;
    const ir::TensorType& in = g.type(t);
    ir::TensorId r = g.result(*next);
    const ir::TensorType& out = g.type(r);
    Index idx = unflatten(in, flat), o{};
    auto rnd = [&](int j) { return free_coordinate(g, r, j, 0, out.dim(j), sample, rng); };
    const ir::OpInfo& info = ir::op_info(next->op);
    switch (info.kind) {
      case OpKind::Unary:
      case OpKind::Norm:
      case OpKind::Softmax:
        o = idx;
        break;
      case OpKind::Binary:
        for (int j = 0; j < out.rank; ++j) {
          int i = j - (out.rank - in.rank);
          o[static_cast<size_t>(j)] = (i < 0 || in.dim(i) != out.dim(j)) ? rnd(j) : idx[static_cast<size_t>(i)];
        }
        break;
      case OpKind::Matmul: {
        for (int j = 0; j < out.rank - 2; ++j) {
          int i = j - (out.rank - in.rank);
          o[static_cast<size_t>(j)] = (i < 0 || in.dim(i) != out.dim(j)) ? rnd(j) : idx[static_cast<size_t>(i)];
        }
        auto r2 = static_cast<size_t>(out.rank - 2), r1 = static_cast<size_t>(out.rank - 1);
        if (pos == 0) {
          o[r2] = idx[static_cast<size_t>(in.rank - 2)];
          o[r1] = rnd(out.rank - 1);
        } else {
          o[r2] = rnd(out.rank - 2);
          o[r1] = idx[static_cast<size_t>(in.rank - 1)];
        }
        break;
      }
      case OpKind::Reduce:
        o = idx;
        o[static_cast<size_t>(next->attrs.dim)] %= next->attrs.to;
        break;
      case OpKind::Transpose:
        o = idx;
        std::swap(o[static_cast<size_t>(out.rank - 1)], o[static_cast<size_t>(out.rank - 2)]);
        break;
      case OpKind::Concat:
        o = idx;
        if (pos == 1) o[static_cast<size_t>(next->attrs.dim)] += g.type(g.operands(*next)[0]).dim(next->attrs.dim);
        break;
      default:
        return std::nullopt;
    }
    t = r;
    flat = flatten(out, o);
  }
  return std::nullopt;
}

// A random element of block `br`'s first saved tile (in a sampled column where it can be), followed to an output.
std::optional<std::pair<size_t, int64_t>> propagate_from_block(const ir::Graph& g, const BlockRef& br, uint64_t seed,
                                                               const Sample& sample) {
  uint64_t rng = seed ^ (static_cast<uint64_t>(br.node) << 40) ^
                 static_cast<uint64_t>(br.block[0] + 4096 * (br.block[1] + 4096 * br.block[2]));
  const ir::Node& n = g.node(br.node);
  const ir::Graph& body = g.body(n);
  for (ir::NodeId s = 0; s < body.nodes().size(); ++s) {
    const ir::Node& save = body.node(s);
    if (save.op != ir::OpCode::save) continue;
    const ir::TensorType& tile = body.type(body.operands(save)[0]);
    ir::TensorId result = g.result(n, 0);
    const ir::TensorType& out = g.type(result);
    Index origin{}, idx{};
    for (int gd = 0; gd < ir::kGridDims; ++gd) {
      int8_t d = save.attrs.map[static_cast<size_t>(gd)];
      if (d != ir::kPhi) origin[static_cast<size_t>(d)] = br.block[static_cast<size_t>(gd)] * tile.dim(d);
    }
    for (int d = 0; d < tile.rank; ++d) {
      auto ud = static_cast<size_t>(d);
      idx[ud] = origin[ud] + free_coordinate(g, result, d, origin[ud], tile.dim(d), sample, rng);
      if (idx[ud] >= out.dim(d)) idx[ud] = out.dim(d) - 1;  // ragged edge
    }
    return propagate(g, result, flatten(out, idx), sample, rng);
  }
  return std::nullopt;
}

}  // namespace

std::string Verdict::str() const {
  switch (kind) {
    case Equivalent: {
      std::string t = std::to_string(trials) + " trial" + (trials == 1 ? "" : "s") + ", ";
      if (!sampled) return "equivalent (" + t + std::to_string(elements_checked) + " output elements each)";
      // A sampled verdict says what it did not compare: it is evidence, not the full check's answer.
      std::string s = "equivalent on a sample (" + t + std::to_string(elements_checked) + " of " +
                      std::to_string(elements_total) + " output elements each";
      if (blocks_total) s += ", " + std::to_string(blocks_covered) + "/" + std::to_string(blocks_total) + " blocks reached";
      return s + "); the other output elements were not compared (the full check compares them all)";
    }
    case Different: return "NOT equivalent: " + evidence;
    case InterfaceMismatch: return "NOT equivalent (interfaces differ): " + evidence;
    case Inconclusive: return "inconclusive: " + evidence;
  }
  return "?";
}

Verdict equivalent(const ir::Graph& ref, const ir::Graph& cand, const EquivalenceOptions& opts) {
  auto start = std::chrono::steady_clock::now();
  Verdict v;
  auto done = [&](Verdict::Kind k, std::string evidence) {
    v.kind = k;
    v.evidence = std::move(evidence);
    v.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return v;
  };
  if (std::string m = interface_mismatch(ref, cand); !m.empty()) return done(Verdict::InterfaceMismatch, m);
  v.sampled = !opts.full;
  for (ir::TensorId t : ref.outputs()) v.elements_total += ref.type(t).numel();
  std::vector<std::string> names = ir::printed_names(ref);
  auto differs = [&](size_t o, int64_t i, int trial, const FieldDomain& domain, const FieldValue& w,
                     const FieldValue& g) {
    ir::TensorId t = ref.outputs()[o];
    return done(Verdict::Different, "output " + std::to_string(o) + " (" + names[t] + ": " + ref.type(t).str() +
                                        ") differs at " + ref.type(t).index_str(i) + " in trial " +
                                        std::to_string(trial) + ": reference " + value_str(domain, w) +
                                        ", candidate " + value_str(domain, g));
  };
  // Which Z_q parts can matter (the cheap mode skips the others), once for all trials. An input's Z_q part is
  // drawn only if one of the two programs can use it.
  ExponentUse ref_use = exponent_use(ref), cand_use = exponent_use(cand);
  std::vector<char> input_q(ref.inputs().size());
  for (size_t in = 0; in < input_q.size(); ++in)
    input_q[in] = ref_use.kernel[ref.inputs()[in]] || cand_use.kernel[cand.inputs()[in]];
  std::optional<InputRows> input_rows;  // the cheap mode's
  if (!opts.full) input_rows.emplace(ref, input_q);
  Arena arena;  // the cheap mode's rows, its memory reused by every trial
  // The cheap mode's blocks of the candidate, and which of them some trial has reached.
  std::vector<BlockRef> blocks = opts.full ? std::vector<BlockRef>{} : all_blocks(cand);
  std::vector<char> covered(blocks.size());
  v.blocks_total = static_cast<int64_t>(blocks.size());
  for (int trial = 0; trial < opts.trials; ++trial) {
    // Each trial's randomness (inputs, ω, oracle key) comes from (seed, trial) alone. Inputs are drawn per element
    // from (trial, input, index), so any order of generation gives the same values.
    uint64_t trial_seed = opts.seed * 0x100000001b3ULL + static_cast<uint64_t>(trial) * 0x9e3779b97f4a7c15ULL;
    FieldDomain domain(trial_seed);
    auto input = [&](size_t in, int64_t flat) { return input_rows->row(in, flat); };
    using Lazy = LazyInterpreter<FieldDomain, decltype(input)>;
    try {
      if (opts.full) {
        std::vector<Array<FieldValue>> inputs;
        for (size_t in = 0; in < ref.inputs().size(); ++in) {
          Array<FieldValue> a = make_array<FieldValue>(ref.type(ref.inputs()[in]), {});
          domain.random_fill(trial_seed, in, 0, a.data.data(), a.data.size(), true);  // the eager run keeps Z_q
          inputs.push_back(std::move(a));
        }
        // The two sides at once, the reference's on a thread of its own. A FieldDomain has scratch accumulators and
        // cannot be shared, so that side gets a domain of its own; made from the same seed, it computes the same
        // values. A division by zero on either side is reported as before, the reference's if both divide.
        auto reference = std::async(std::launch::async, [&] {
          FieldDomain own(trial_seed);
          Interpreter<FieldDomain> interp(own);
          return run_side(interp, ref, inputs, "reference", trial);
        });
        std::vector<Array<FieldValue>> got;
        std::exception_ptr cand_error;
        try {
          Interpreter<FieldDomain> interp(domain);
          got = run_side(interp, cand, inputs, "candidate", trial);
        } catch (...) {
          cand_error = std::current_exception();
        }
        std::vector<Array<FieldValue>> want = reference.get();  // rethrows the reference's error
        if (cand_error) std::rethrow_exception(cand_error);
        ++v.trials;
        v.elements_checked = 0;
        for (size_t o = 0; o < want.size(); ++o) {
          v.elements_checked += static_cast<int64_t>(want[o].data.size());
          // Outputs compare in Z_p: the Z_q part feeds exp's exponent and is an oracle value after an exp.
          for (size_t i = 0; i < want[o].data.size(); ++i)
            if (want[o].data[i].u != got[o].data[i].u)
              return differs(o, static_cast<int64_t>(i), trial, domain, want[o].data[i], got[o].data[i]);
        }
      } else {
        Sample sample = choose_sample(cand, trial_seed, trial);
        // Rows hold the sampled output columns only, and what they read (column_use.h): attention's sample reads
        // 4 of V's 64 columns, so only those are drawn and multiplied.
        ColumnUse ref_cols = column_use(ref, sample.columns), cand_cols = column_use(cand, sample.columns);
        std::vector<Columns> input_cols;
        for (size_t in = 0; in < ref.inputs().size(); ++in)
          input_cols.push_back(
              column_union(ref_cols.kernel[ref.inputs()[in]], cand_cols.kernel[cand.inputs()[in]]));
        input_rows->begin(domain, trial_seed, std::move(input_cols));
        arena.reset();  // the last trial's interpreters are gone
        Lazy lref(domain, ref, input, ref_use, std::move(ref_cols), &arena);
        Lazy lcand(domain, cand, input, cand_use, std::move(cand_cols), &arena);
        ++v.trials;
        v.elements_checked = 0;
        auto check = [&](Lazy& r, Lazy& c, size_t o, int64_t i) -> bool {
          FieldValue w = lazy_side(r, o, i, "reference", trial), g = lazy_side(c, o, i, "candidate", trial);
          ++v.elements_checked;
          if (w.u == g.u) return true;
          differs(o, i, trial, domain, w, g);
          return false;
        };
        for (size_t o = 0; o < sample.elements.size(); ++o)
          for (int64_t i : sample.elements[o])
            if (!check(lref, lcand, o, i)) return v;
        // Blocks that no trial's sample has reached yet: follow one of their elements forward to an output, each
        // block in one trial (block k in trial k mod trials), so that the trials share the work instead of each
        // reaching every block again. An element in a sampled column is checked by the interpreters above;
        // another gets a second pair of interpreters that make whole rows (and whole input rows from here on).
        std::optional<Lazy> whole_ref, whole_cand;
        for (size_t k = 0; k < blocks.size(); ++k) {
          const BlockRef& br = blocks[k];
          auto reached = [&] {
            return lcand.block_evaluated(br.node, br.block) ||
                   (whole_cand && whole_cand->block_evaluated(br.node, br.block));
          };
          if (covered[k] || (covered[k] = reached())) continue;
          if (static_cast<int>(k % static_cast<size_t>(opts.trials)) != trial) continue;
          std::optional<std::pair<size_t, int64_t>> out = propagate_from_block(cand, br, trial_seed, sample);
          if (!out) continue;
          const Columns& cols = sample.columns[out->first];
          const ir::TensorType& out_type = cand.type(cand.outputs()[out->first]);
          auto col = static_cast<int32_t>(out->second % out_type.dim(out_type.rank - 1));
          bool sampled_column = std::binary_search(cols.begin(), cols.end(), col);
          if (!sampled_column && !whole_cand) {
            input_rows->begin(domain, trial_seed, {});
            whole_ref.emplace(domain, ref, input, ref_use, all_columns(ref), &arena);
            whole_cand.emplace(domain, cand, input, cand_use, all_columns(cand), &arena);
          }
          if (!(sampled_column ? check(lref, lcand, out->first, out->second)
                               : check(*whole_ref, *whole_cand, out->first, out->second)))
            return v;
          covered[k] = reached();
        }
        v.blocks_covered = std::count(covered.begin(), covered.end(), 1);
      }
    } catch (const FieldDivisionByZero& e) {
      return done(Verdict::Inconclusive, e.what());
    }
  }
  return done(Verdict::Equivalent, "");
}

}  // namespace morgana::verify
