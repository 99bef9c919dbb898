#include "targets/lower/kernel_ir.h"

#include <algorithm>
#include <utility>

#include "ir/printer.h"
#include "targets/lower/passes.h"

namespace morgana::lower {

std::string Origin::str() const {
  std::string s = "node '" + node + "'";
  if (loc.known()) s += " (" + loc.str() + ")";
  return s;
}

int64_t Tile::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Tile::stage_bytes() const { return numel() * ir::dtype_bytes(dtype); }

int64_t Tile::bytes() const { return stage_bytes() * stages; }

std::string_view role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::workspace: return "workspace";
  }
  return "?";
}

std::string_view stmt_name(StmtKind k) {
  switch (k) {
    case StmtKind::Load: return "load";
    case StmtKind::Store: return "store";
    case StmtKind::Unary: return "unary";
    case StmtKind::Binary: return "binary";
    case StmtKind::Matmul: return "matmul";
    case StmtKind::Reduce: return "reduce";
    case StmtKind::Concat: return "concat";
    case StmtKind::Accumulate: return "accumulate";
    case StmtKind::Barrier: return "barrier";
    case StmtKind::AsyncWait: return "async_wait";
    case StmtKind::Publish: return "publish";
  }
  return "?";
}

std::vector<int> stmt_reads(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::Load:
    case StmtKind::Barrier:
    case StmtKind::AsyncWait: return {};
    case StmtKind::Store:
    case StmtKind::Unary: return {s.a};
    case StmtKind::Publish: return s.parts >= 0 ? std::vector<int>{s.a, s.parts} : std::vector<int>{s.a};
    case StmtKind::Binary:
    case StmtKind::Concat: return {s.a, s.b};
    case StmtKind::Matmul: {
      std::vector<int> r{s.a, s.b};
      if (s.accumulate) r.push_back(s.dst);
      if (s.scale >= 0) r.push_back(s.scale);
      return r;
    }
    case StmtKind::Reduce: {
      std::vector<int> r{s.a};
      if (s.accumulate) r.push_back(s.dst);
      if (s.parts >= 0) r.push_back(s.parts);
      return r;
    }
    case StmtKind::Accumulate:
      if (s.scale >= 0) return {s.b, s.dst, s.state};  // x goes into dst by the matmul after it
      return s.state >= 0 ? std::vector<int>{s.a, s.b, s.dst, s.state} : std::vector<int>{s.a, s.dst};
  }
  return {};
}

std::vector<int> stmt_writes(const Stmt& s) {
  switch (s.kind) {
    case StmtKind::Store:
    case StmtKind::Barrier:
    case StmtKind::AsyncWait: return {};
    case StmtKind::Accumulate:
      if (s.scale >= 0) return {s.dst, s.state, s.scale};
      return s.state >= 0 ? std::vector<int>{s.dst, s.state} : std::vector<int>{s.dst};
    case StmtKind::Reduce:
    case StmtKind::Publish: return s.parts >= 0 ? std::vector<int>{s.dst, s.parts} : std::vector<int>{s.dst};
    default: return {s.dst};
  }
}

std::map<int, std::pair<int64_t, int64_t>> access_spans(const std::vector<const Stmt*>& order,
                                                         const std::function<bool(int)>& keep) {
  std::map<int, std::pair<int64_t, int64_t>> span;
  for (size_t i = 0; i < order.size(); ++i) {
    for (int t : stmt_tiles(*order[i]))
      if (keep(t)) {
        const auto at = static_cast<int64_t>(i);
        auto [it, fresh] = span.emplace(t, std::make_pair(at, at));
        it->second.second = std::max(it->second.second, at);
      }
  }
  return span;
}

Stmt sync_stmt(StmtKind kind, const Origin& from, int pending) {
  Stmt s;
  s.kind = kind;
  s.from = from;
  s.pending = pending;
  return s;
}

int largest_at_register_peak(int64_t positions, const std::map<int, AccessSpan>& spans,
                             const std::function<bool(int64_t, int, const AccessSpan&)>& live,
                             const std::function<int64_t(int)>& registers, const targets::Target& target) {
  for (int64_t i = 0; i < positions; ++i) {
    int64_t total = 0, largest_regs = -1;
    int largest = -1;
    for (const auto& [t, sp] : spans) {
      if (!live(i, t, sp)) continue;
      const int64_t r = registers(t);
      total += r;
      if (r > largest_regs) largest = t, largest_regs = r;
    }
    if (!targets::register_tiles_fit(target, total, largest_regs)) return largest;
  }
  return -1;
}

std::optional<PrivateAccess> private_access(const Kernel& k, const Stmt& s, int tile) {
  const bool elementwise = s.kind == StmtKind::Unary || s.kind == StmtKind::Binary;
  if (!elementwise && s.kind != StmtKind::Accumulate) return std::nullopt;
  if (tile != s.dst && tile != s.a && tile != s.b && tile != s.state) return std::nullopt;
  const Tile& d = k.tiles[static_cast<size_t>(s.dst)];
  const Tile& t = k.tiles[static_cast<size_t>(tile)];
  for (const Tile* x : {&d, &t})
    if (x->space != Space::shared || x->swizzled || x->stages != 1) return std::nullopt;
  if (t.shape != d.shape) return std::nullopt;
  // An accumulator whose running max is per row shares it between threads: nothing of it is private.
  if (s.state >= 0 && k.tiles[static_cast<size_t>(s.state)].shape != d.shape) return std::nullopt;
  const int64_t run = elementwise ? targets::elementwise_run(d.shape.back()) : 1;
  return PrivateAccess{d.shape, run, t.offset, ir::dtype_bytes(t.dtype)};
}

std::vector<int> stmt_tiles(const Stmt& s) {
  std::vector<int> touched = stmt_writes(s), reads = stmt_reads(s);
  touched.insert(touched.end(), reads.begin(), reads.end());
  return touched;
}

bool stmt_touches(const Stmt& s, int tile) { return std::ranges::count(stmt_tiles(s), tile) > 0; }

bool stmt_writes_tile(const Stmt& s, int tile) { return std::ranges::count(stmt_writes(s), tile) > 0; }

void swap_addressed_dims(Stmt& s, LoweredProgram& p, int d1, int d2) {
  const auto a = static_cast<size_t>(d1), b = static_cast<size_t>(d2);
  GlobalTensor g = p.tensors[static_cast<size_t>(s.tensor)];
  std::swap(g.shape[a], g.shape[b]);
  std::swap(g.strides[a], g.strides[b]);
  std::swap(s.origin[a], s.origin[b]);
  const uint32_t ma = 1u << d1, mb = 1u << d2;
  s.mask = (s.mask & ~(ma | mb)) | (s.mask & ma ? mb : 0) | (s.mask & mb ? ma : 0);
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const GlobalTensor& t = p.tensors[i];
    if (t.param == g.param && t.offset == g.offset && t.dtype == g.dtype && t.shape == g.shape && t.strides == g.strides) {
      s.tensor = static_cast<int>(i);
      return;
    }
  }
  g.name += "_dims" + std::to_string(d1) + std::to_string(d2);
  s.tensor = static_cast<int>(p.tensors.size());
  p.tensors.push_back(std::move(g));
}

TileUses tile_uses(const Kernel& k, int tile) {
  TileUses u;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *list) {
      if (std::ranges::count(stmt_reads(s), tile)) u.readers.push_back(&s);
      if (stmt_writes_tile(s, tile)) u.writers.push_back(&s);
    }
  return u;
}

Tile parts_tile(const Kernel& k, const Stmt& s, std::vector<int64_t> shape) {
  Tile parts;
  parts.name = k.tiles[static_cast<size_t>(s.dst)].name + "_parts";
  parts.shape = std::move(shape);
  parts.from = s.from;
  return parts;
}

bool reduces_whole_rows(const Kernel& k, const Stmt& s) {
  return s.kind == StmtKind::Reduce && s.to == 1 &&
         s.dim == static_cast<int>(k.tiles[static_cast<size_t>(s.a)].shape.size()) - 1;
}

float apply_maps(const std::vector<ElementMap>& maps, float x) {
  for (const ElementMap& m : maps) x = static_cast<float>(ir::op_info(m.op).unary(x, m.scalar));
  return x;
}

void drop_unused_tiles(Kernel& k) {
  std::vector<int> renumbered(k.tiles.size(), -1);
  for (const auto* section : {&k.prologue, &k.body, &k.epilogue})
    for (const Stmt& s : *section) {
      for (int t : stmt_reads(s)) renumbered[static_cast<size_t>(t)] = 0;
      for (int t : stmt_writes(s)) renumbered[static_cast<size_t>(t)] = 0;
    }
  std::vector<Tile> kept;
  for (size_t t = 0; t < k.tiles.size(); ++t)
    if (renumbered[t] == 0) {
      renumbered[t] = static_cast<int>(kept.size());
      kept.push_back(std::move(k.tiles[t]));
    }
  k.tiles = std::move(kept);
  for (auto* section : {&k.prologue, &k.body, &k.epilogue})
    for (Stmt& s : *section)
      for (int* t : {&s.dst, &s.a, &s.b, &s.state, &s.parts, &s.scale})
        if (*t >= 0) *t = renumbered[static_cast<size_t>(*t)];
}

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string affine(const Affine& a) {
  static const char* const kBlock[3] = {"bx", "by", "bz"};
  std::string s;
  for (int g = 0; g < 3; ++g)
    if (a.block[static_cast<size_t>(g)])
      s += (s.empty() ? "" : "+") + std::to_string(a.block[static_cast<size_t>(g)]) + "*" + kBlock[g];
  if (a.loop) s += (s.empty() ? "" : "+") + std::to_string(a.loop) + "*it";
  return s.empty() ? "0" : s;
}

// `x` inside the maps, innermost first: "rsqrt(add_scalar(x, 1e-06))".
std::string mapped(const std::vector<ElementMap>& maps, std::string x) {
  for (const ElementMap& m : maps)
    x = std::string(ir::op_name(m.op)) + "(" + x +
        (ir::op_info(m.op).attrs & ir::kAttrS ? ", " + ir::format_number(m.scalar) : "") +
        ")";
  return x;
}

std::string stmt(const LoweredProgram& p, const Kernel& k, const Stmt& s) {
  auto t = [&](int i) { return k.tiles[static_cast<size_t>(i)].name; };
  // The value an elementwise statement or reduction writes, with the maps folded into it.
  auto value = [&](const std::string& v) { return t(s.dst) + " = " + mapped(s.post, v); };
  const std::string a = s.a >= 0 ? mapped(s.pre, t(s.a)) : std::string();
  auto at = [&]() {
    std::string o;
    for (size_t d = 0; d < s.origin.size(); ++d) o += (d ? ", " : "") + affine(s.origin[d]);
    return p.tensors[static_cast<size_t>(s.tensor)].name + "[" + o + "]" +
           (s.mask ? " mask " + std::to_string(s.mask) : "");
  };
  std::string op(ir::op_name(s.op));
  // The thread level's choices (choose_instructions), as comments.
  auto access = [&]() {
    if (s.tensor_map >= 0)
      return "  # copy engine, tensor map " + std::to_string(s.tensor_map) + ", boxes of " + std::to_string(s.box_rows) +
             " rows";
    if (s.vector_bytes == 0) return std::string();
    return "  # " + std::to_string(s.vector_bytes) + "-byte accesses" + (s.async ? ", cp.async" : "") +
           (s.batch ? ", batched" : "");
  };
  auto warp_tiling = [&]() {
    if (s.atom < 0) return std::string();
    return "  # matrix instruction " + std::to_string(s.atom + 1) + " of the target, " + std::to_string(s.atoms_n) +
           " atoms per warp task" + (s.k_split > 1 ? ", K split over " + std::to_string(s.k_split) + " warps" : "");
  };
  auto b_operand = [&]() { return s.trans_b ? "transpose(" + t(s.b) + ")" : t(s.b); };
  switch (s.kind) {
    case StmtKind::Load:
      return t(s.dst) + " = load " + at() + (s.ahead ? " of iteration it+" + std::to_string(s.ahead) : "") +
             (s.iterations > 1 ? " of iterations it+" + std::to_string(s.ahead) + " .. it+" +
                                     std::to_string(s.ahead + s.iterations - 1)
                               : "") +
             access();
    case StmtKind::Store: return "store " + at() + " = " + t(s.a) + access();
    case StmtKind::Unary: return value(mapped({{s.op, s.scalar}}, a));
    case StmtKind::Binary: return value(op + "(" + a + ", " + t(s.b) + ")");
    case StmtKind::Matmul:
      if (s.scale >= 0)
        return t(s.dst) + " += matmul(" + t(s.a) + " * " + t(s.scale) + ", " + b_operand() + ")" + warp_tiling() +
               "  # A's rows scaled";
      return t(s.dst) + (s.accumulate ? " += " : " = ") + "matmul(" + t(s.a) + ", " + b_operand() + ")" +
             (s.norm_rows ? " * " + mapped(*s.norm_rows, "row_sum_squares(" + t(s.a) + ")") : "") + warp_tiling() +
             (s.norm_rows ? "  # row norms from its fragments" : "");
    case StmtKind::Reduce:
      if (s.accumulate)
        return t(s.dst) + " fold= " + op + "(" + a + ", dim=" + std::to_string(s.dim) + ", to=" + std::to_string(s.to) +
               ")" + (s.by_warps ? "  # by warps" : "");
      return value(op + "(" + a + ", dim=" + std::to_string(s.dim) + ", to=" + std::to_string(s.to) + ")") +
             (s.team > 1   ? "  # by teams of " + std::to_string(s.team) + " warps, their folds met in " + t(s.parts)
              : s.by_warps ? "  # by warps"
                           : "");
    case StmtKind::Concat: return t(s.dst) + " = concat(" + t(s.a) + ", " + t(s.b) + ", dim=" + std::to_string(s.dim) + ")";
    case StmtKind::Accumulate:
      if (s.scale >= 0)
        return t(s.dst) + " = rescale(" + t(s.dst) + ", " + t(s.b) + ", max " + t(s.state) + "), " + t(s.scale) +
               " = its product's factor" +
               (s.held != ir::DType::f32 ? "  # max held as " + std::string(ir::dtype_name(s.held)) : "");
      return t(s.dst) + " = " + op + "(" + t(s.a) + (s.b >= 0 ? ", " + t(s.b) + ", max " + t(s.state) : "") + ")" +
             (s.b >= 0 && s.held != ir::DType::f32 ? "  # max held as " + std::string(ir::dtype_name(s.held)) : "");
    case StmtKind::Barrier: return "barrier";
    case StmtKind::AsyncWait: return "async_wait pending " + std::to_string(s.pending);
    case StmtKind::Publish:
      return t(s.dst) + " = publish(" + t(s.a) + ")" + (s.parts >= 0 ? "  # K's parts met in " + t(s.parts) : "");
  }
  return "?";
}

}  // namespace

std::string print(const LoweredProgram& p) {
  std::string out = "program " + p.name + " for target " + p.target + "\n";
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Param& q = p.params[i];
    out += "  param " + std::to_string(i) + " " + std::string(role_name(q.role)) + " " + q.name + " " +
           std::string(ir::dtype_name(q.dtype)) + list(q.shape) + " strides " + list(q.strides) + "\n";
  }
  out += "  workspace " + std::to_string(p.workspace_bytes) + " bytes\n";
  for (const GlobalTensor& t : p.tensors) {
    // Strides where they are not row-major (a transpose's view of its operand's memory).
    std::vector<int64_t> row_major(t.shape.size(), 1);
    for (size_t d = t.shape.size(); d-- > 1;) row_major[d - 1] = row_major[d] * t.shape[d];
    out += "  tensor " + t.name + " " + std::string(ir::dtype_name(t.dtype)) + list(t.shape) +
           (t.strides != row_major ? " strides " + list(t.strides) : "") + " in " +
           p.params[static_cast<size_t>(t.param)].name + (t.offset ? " + " + std::to_string(t.offset) : "") + "\n";
  }
  for (const Kernel& k : p.kernels) {
    out += "kernel " + k.entry + " grid " + list({k.grid.begin(), k.grid.end()}) + " block " +
           list({k.block.begin(), k.block.end()}) + " smem " + std::to_string(k.smem_bytes) + " loop " +
           std::to_string(k.loop) + (k.unroll ? " unrolled" : "") + "  # " + k.from.str() + "\n";
    for (size_t i = 0; i < k.tensor_maps.size(); ++i) {
      const TensorMapUse& m = k.tensor_maps[i];
      out += "  tensor map " + std::to_string(i) + " of " + p.params[static_cast<size_t>(m.param)].name + " box " +
             list(m.box) + (m.swizzle_bytes ? " swizzle " + std::to_string(m.swizzle_bytes) : "") + "\n";
    }
    if (k.barriers)
      out += "  " + std::to_string(k.barriers) + " copy-engine barriers @" + std::to_string(k.barrier_offset) + ", " +
             std::to_string(k.barrier_arrivals) + " requests per phase\n";
    if (k.scratch_bytes)
      out += "  scratch " + std::to_string(k.scratch_bytes) + " bytes per block at workspace + " +
             std::to_string(k.scratch_offset) + "\n";
    for (const Tile& t : k.tiles)
      out += "  tile " + t.name + " " + std::string(ir::dtype_name(t.dtype)) + list(t.shape) +
             (t.space == Space::registers && t.layout.fold       ? " in registers, folds across the loop"
              : t.space == Space::registers && t.layout.elements ? " in registers, each thread its elements' runs"
              : t.space == Space::registers
                  ? " in registers of matrix instruction " + std::to_string(t.layout.atom + 1) + ", " +
                        std::to_string(t.layout.atoms_n) + " atoms per warp task" +
                        (t.layout.k_split > 1 ? ", K split " + std::to_string(t.layout.k_split) : "")
                  : (t.space == Space::global ? " scratch @" : " @") + std::to_string(t.offset)) +
             (t.stages > 1 ? " stages " + std::to_string(t.stages) : "") + (t.swizzled ? " swizzled" : "") + "\n";
    const std::pair<const char*, const std::vector<Stmt>*> sections[] = {
        {"prologue", &k.prologue}, {"body", &k.body}, {"epilogue", &k.epilogue}};
    for (const auto& [name, stmts] : sections) {
      if (stmts->empty()) continue;
      out += "  " + std::string(name) + ":\n";
      for (const Stmt& s : *stmts) out += "    " + stmt(p, k, s) + "\n";
    }
  }
  return out;
}

}  // namespace morgana::lower
