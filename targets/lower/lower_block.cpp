// Pass 3 of the lowering: one block graph -> one kernel of the kernel IR, exactly as docs/spec-language.md
// ("Meaning") and verify/interpreter.h define a block op:
//   - prologue: iterators without a for-loop dim and everything computed from them alone (the same in every
//     iteration, so computed once);
//   - body, run `loop` times: the loads and ops that depend on the iteration, and the accumulators, which take
//     their operand in the first iteration and fold it in after (no identity element such as -inf is needed);
//   - epilogue: the ops after the accumulators, and the saves.
// With one iteration an accumulator is its operand, and shares its tile; a matmul whose only use is an acc_sum
// accumulates straight into the accumulator (dst += a·b), as a tensor-core matmul will.
#include <algorithm>
#include <map>
#include <optional>
#include <unordered_set>

#include "ir/block_rules.h"
#include "ir/printer.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

namespace {

using ir::Graph;
using ir::Node;
using ir::OpCode;
using ir::OpKind;
using ir::TensorId;

// The sections of a kernel (ir::BlockSection), as indices of their statement lists.
constexpr int kBody = static_cast<int>(ir::BlockSection::body);
constexpr int kEpilogue = static_cast<int>(ir::BlockSection::epilogue);

class BlockLowering {
 public:
  explicit BlockLowering(const BlockSite& site)
      : site_(site), g_(*site.body), names_(ir::printed_names(g_)), tile_(g_.num_tensors(), -1) {}

  Kernel run() {
    const ir::BlockParams& p = g_.block_params();
    k_.grid = p.grid;
    k_.block = {p.threads, 1, 1};
    k_.loop = p.loop;
    k_.from = site_.from;
    sections();
    count_uses();
    std::vector<Stmt> stmts[3];
    for (ir::NodeId id = 0; id < g_.nodes().size(); ++id) node(id, stmts);
    // Place each load just before the first statement of its section that reads its tile; loads whose tiles are
    // first read in a later section (a loop-invariant tile used in the loop) end their section.
    std::vector<Stmt>* out[3] = {&k_.prologue, &k_.body, &k_.epilogue};
    for (int s = 0; s < 3; ++s) {
      auto place = [&](int tile) {
        for (Load& l : loads_)
          if (l.section == s && !l.placed && l.stmt.dst == tile) {
            out[s]->push_back(l.stmt);
            l.placed = true;
          }
      };
      for (Stmt& st : stmts[s]) {
        for (int t : stmt_reads(st)) place(t);
        out[s]->push_back(std::move(st));
      }
      for (Load& l : loads_)
        if (l.section == s && !l.placed) {
          out[s]->push_back(l.stmt);
          l.placed = true;
        }
    }
    return std::move(k_);
  }

 private:
  struct Load {
    Stmt stmt;
    int section;
    bool placed = false;
  };

  bool looping() const { return g_.block_params().loop > 1; }

  // Which section computes each value (ir::block_sections), as the index of its statement list.
  void sections() { sections_ = ir::block_sections(g_); }
  int sec(TensorId t) const { return static_cast<int>(sections_[t]); }

  void count_uses() {
    uses_.assign(g_.num_tensors(), 0);
    user_.assign(g_.num_tensors(), 0);
    for (ir::NodeId id = 0; id < g_.nodes().size(); ++id)
      for (TensorId t : g_.operands(g_.node(id))) {
        ++uses_[t];
        user_[t] = id;
      }
  }

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 2; used_.count(n); ++i) n = base + "_" + std::to_string(i);
    used_.insert(n);
    return n;
  }

  // A new tile, named after its value; names stay distinct (they become identifiers in generated code) even when
  // a graph built in code repeats one.
  int new_tile(const std::string& name, ir::DType dtype, std::span<const int64_t> shape, const Origin& from) {
    Tile t;
    t.name = fresh(name);
    t.dtype = dtype;
    t.shape.assign(shape.begin(), shape.end());
    t.from = from;
    k_.tiles.push_back(std::move(t));
    return static_cast<int>(k_.tiles.size() - 1);
  }

  Origin origin(const Node& n) const {
    Origin o;
    std::string text = ir::print_node(g_, n, names_, site_.operand_names);
    if (site_.made_by_lowering) {
      o = site_.from;
      o.text = text;
      return o;
    }
    o.node = n.op == OpCode::save ? "save(" + names_[g_.operands(n)[0]] + ")" : names_[g_.result(n)];
    o.text = text;
    o.loc = g_.loc(static_cast<ir::NodeId>(&n - g_.nodes().data()));
    return o;
  }

  // A matmul whose only use is an acc_sum in a loop of several iterations accumulates into it directly.
  bool fused_into_acc(const Node& n) const {
    return ir::matmul_fused_into_acc(g_, sections_, static_cast<ir::NodeId>(&n - g_.nodes().data()));
  }

  // The origin of the tile of `n` (an iter or a save) along each dim of its tensor, by the rule of
  // verify::tile_origin: grid parts outside, loop parts inside.
  std::vector<Affine> tile_origin(const Node& n, const ir::TensorType& tile, bool with_loop) const {
    const ir::BlockParams& p = g_.block_params();
    std::vector<Affine> o(static_cast<size_t>(tile.rank));
    for (int d = 0; d < tile.rank; ++d) {
      Affine& a = o[static_cast<size_t>(d)];
      bool walks = with_loop && n.attrs.fmap == d;
      for (int g = 0; g < ir::kGridDims; ++g)
        if (n.attrs.map[static_cast<size_t>(g)] == d)
          a.block[static_cast<size_t>(g)] = tile.dim(d) * (walks ? p.loop : 1);
      if (walks) a.loop = tile.dim(d);
    }
    return o;
  }

  // Dims along which some tile reaches past the tensor (a ragged split): those need a bounds check.
  uint32_t bounds_mask(const Node& n, const ir::TensorType& tile, const ir::TensorType& full, bool with_loop) const {
    const ir::BlockParams& p = g_.block_params();
    uint32_t mask = 0;
    for (int d = 0; d < tile.rank; ++d) {
      int64_t parts = 1;
      for (int g = 0; g < ir::kGridDims; ++g)
        if (n.attrs.map[static_cast<size_t>(g)] == d) parts *= p.grid[static_cast<size_t>(g)];
      if (with_loop && n.attrs.fmap == d) parts *= p.loop;
      if (parts * tile.dim(d) > full.dim(d)) mask |= 1u << d;
    }
    return mask;
  }

  void node(ir::NodeId id, std::vector<Stmt>* stmts) {
    const Node& n = g_.node(id);
    const ir::OpInfo& info = ir::op_info(n.op);
    Origin from = origin(n);
    auto ops = g_.operands(n);
    auto in = [&](int i) { return tile_[ops[static_cast<size_t>(i)]]; };
    TensorId r = n.num_results ? g_.result(n) : 0;
    Stmt s;
    s.op = n.op;
    s.from = from;
    switch (info.kind) {
      case OpKind::Iter: {
        const ir::TensorType& t = g_.type(r);
        const ir::TensorType& full = g_.operand_types()[n.attrs.index];
        tile_[r] = new_tile(names_[r], t.dtype, t.shape(), from);
        s.kind = StmtKind::Load;
        s.dst = tile_[r];
        s.tensor = site_.operand_tensors.at(n.attrs.index);
        s.origin = tile_origin(n, t, true);
        s.mask = bounds_mask(n, t, full, true);
        loads_.push_back({std::move(s), sec(r)});
        return;
      }
      case OpKind::Save: {
        const ir::TensorType& tile = g_.type(ops[0]);
        s.kind = StmtKind::Store;
        s.a = in(0);
        s.tensor = site_.result_tensors.at(saves_++);
        s.origin = tile_origin(n, tile, false);
        s.mask = bounds_mask(n, tile, g_.type(r), false);
        stmts[kEpilogue].push_back(std::move(s));
        return;
      }
      case OpKind::Accum: {
        // An acc_rescale_sum's running max is held in its max's element type (Stmt::held), but a max loaded from a
        // tensor of that type (a split-KV combine's) already is one of its values, and so is every max of them:
        // holding it would only cost two conversions an element and iteration.
        const bool loaded_max = n.op == OpCode::acc_rescale_sum &&
                                ir::op_info(g_.node(g_.tensor(ops[1]).producer).op).kind == OpKind::Iter;
        const ir::DType held =
            n.op == OpCode::acc_rescale_sum && !loaded_max ? g_.type(ops[1]).dtype : ir::DType::f32;
        // One iteration: the accumulator is its operand, but for an acc_rescale_sum whose max is held narrower than
        // f32 (its sums are relative to the rounded max). Fused matmul: already the acc tile.
        const bool held_narrow = held != ir::DType::f32;
        if ((!looping() && !held_narrow) || fused_into_acc(g_.node(g_.tensor(ops[0]).producer))) {
          tile_[r] = in(0);
          return;
        }
        tile_[r] = new_tile(names_[r], ir::DType::f32, g_.type(r).shape(), from);
        s.kind = StmtKind::Accumulate;
        s.dst = tile_[r];
        s.a = in(0);
        if (n.op == OpCode::acc_rescale_sum) {
          s.b = in(1);
          s.state = new_tile(names_[r] + "_max", ir::DType::f32, g_.type(ops[1]).shape(), from);
          s.held = held;
        }
        stmts[looping() ? kBody : static_cast<int>(ir::BlockSection::prologue)].push_back(std::move(s));
        return;
      }
      case OpKind::Norm: {
        // x * rsqrt(sum(x^2) * (1/n) + eps), op for op as the reference interpreter evaluates it.
        const ir::TensorType& t = g_.type(r);
        std::vector<int64_t> row(t.shape().begin(), t.shape().end());
        row[static_cast<size_t>(n.attrs.dim)] = 1;
        int sq = new_tile(names_[r] + "_sq", ir::DType::f32, t.shape(), from);
        int rs = new_tile(names_[r] + "_rms", ir::DType::f32, row, from);
        tile_[r] = new_tile(names_[r], ir::DType::f32, t.shape(), from);
        auto unary = [&](int dst, int a, OpCode op, double scalar) {
          Stmt u;
          u.kind = StmtKind::Unary;
          u.op = op;
          u.dst = dst;
          u.a = a;
          u.scalar = scalar;
          u.from = from;
          stmts[sec(r)].push_back(std::move(u));
        };
        unary(sq, in(0), OpCode::square, 0);
        Stmt red;
        red.kind = StmtKind::Reduce;
        red.op = OpCode::reduce_sum;
        red.dst = rs;
        red.a = sq;
        red.dim = n.attrs.dim;
        red.from = from;
        stmts[sec(r)].push_back(std::move(red));
        unary(rs, rs, OpCode::mul_scalar, 1.0 / static_cast<double>(t.dim(n.attrs.dim)));
        unary(rs, rs, OpCode::add_scalar, n.attrs.eps);
        unary(rs, rs, OpCode::rsqrt, 0);
        if (std::optional<ir::NodeId> m = ir::norm_scaled_after(g_, sections_, id)) {
          // The matmul reads x itself and scales its product by rs: x's normalized copy is never written.
          tile_[r] = in(0);
          scale_after_[*m].push_back(rs);  // both operands of one matmul may be normalized this way (QK-norm)
          return;
        }
        s.kind = StmtKind::Binary;
        s.op = OpCode::mul;
        s.dst = tile_[r];
        s.a = in(0);
        s.b = rs;
        stmts[sec(r)].push_back(std::move(s));
        return;
      }
      default:
        break;
    }
    // Ops that compute one new tile: in f32, except a concat of tiles of one type, which only moves data.
    bool fused = fused_into_acc(n);
    const Node* acc = fused ? &g_.node(user_[r]) : nullptr;
    ir::DType dtype = ir::DType::f32;
    if (info.kind == OpKind::Concat && k_.tiles[static_cast<size_t>(in(0))].dtype == k_.tiles[static_cast<size_t>(in(1))].dtype)
      dtype = k_.tiles[static_cast<size_t>(in(0))].dtype;
    // A product scaled after (ir::norm_scaled_after) leaves its name to the scaled tile below.
    auto scale = scale_after_.find(id);
    const bool scaled = scale != scale_after_.end();
    tile_[r] = new_tile(fused ? names_[g_.result(*acc)] : names_[r] + (scaled ? "_unscaled" : ""), dtype,
                        g_.type(r).shape(), fused ? origin(*acc) : from);
    s.dst = tile_[r];
    s.a = in(0);
    switch (info.kind) {
      case OpKind::Unary:
        s.kind = StmtKind::Unary;
        s.scalar = n.attrs.s;
        break;
      case OpKind::Binary:
        s.kind = StmtKind::Binary;
        s.b = in(1);
        break;
      case OpKind::Matmul:
        s.kind = StmtKind::Matmul;
        s.b = in(1);
        s.accumulate = fused;
        break;
      case OpKind::Reduce:
        s.kind = StmtKind::Reduce;
        s.dim = n.attrs.dim;
        s.to = n.attrs.to;
        break;
      case OpKind::Concat:
        s.kind = StmtKind::Concat;
        s.b = in(1);
        s.dim = n.attrs.dim;
        break;
      default:
        MG_CHECK(false, "lower_block: unexpected op '" + std::string(info.name) + "' in a block graph");
    }
    stmts[sec(r)].push_back(std::move(s));
    if (scaled) {
      // matmul(x, y) of operands left unnormalized (ir::norm_scaled_after): its product times each norm's factors
      // (x's row factors scale its rows, y's column factors its columns; broadcast by shape).
      const std::vector<int>& factors = scale->second;
      for (size_t i = 0; i < factors.size(); ++i) {
        Stmt m;
        m.kind = StmtKind::Binary;
        m.op = OpCode::mul;
        m.a = tile_[r];
        m.b = factors[i];
        m.from = from;
        const bool last = i + 1 == factors.size();
        tile_[r] = new_tile(last ? names_[r] : names_[r] + "_scaled_once", ir::DType::f32, g_.type(r).shape(), from);
        m.dst = tile_[r];
        stmts[sec(r)].push_back(std::move(m));
      }
    }
  }

  const BlockSite& site_;
  const Graph& g_;
  std::vector<std::string> names_;
  std::unordered_set<std::string> used_;
  std::vector<int> tile_;  // block tensor -> tile
  std::vector<ir::BlockSection> sections_;
  std::vector<int> uses_;
  std::vector<ir::NodeId> user_;  // the last node that uses each tensor
  std::vector<Load> loads_;
  std::map<ir::NodeId, std::vector<int>> scale_after_;  // matmul -> the rms factor tiles its product is scaled by
  size_t saves_ = 0;
  Kernel k_;
};

}  // namespace

Kernel lower_block(const BlockSite& site) { return BlockLowering(site).run(); }

int64_t block_smem_bytes(const ir::Graph& body) {
  BlockSite site;
  site.body = &body;
  site.operand_tensors.assign(body.operand_types().size(), 0);
  site.result_tensors.assign(body.outputs().size(), 0);
  site.made_by_lowering = false;
  Kernel k = lower_block(site);
  fuse_elementwise(k);
  return assign_offsets(k);
}

}  // namespace morgana::lower
