// The generated CUDA computes the right numbers: each small test program is lowered for a CUDA target, emitted,
// compiled for the host together with the real tile library (tests/targets/cuda/host_prelude.h maps the CUDA
// keywords to host C++ and runs each block's threads as fibers that switch at every barrier), run, and compared
// with the reference interpreter. It checks what the NVRTC test cannot: the tile library's index arithmetic, broadcasting,
// type conversions and accumulators, and the emitter's arguments, on three threads per block (so every thread
// strides over elements and the library's own barriers matter). Needs MORGANA_HOST_CXX (meson sets it to the
// build's C++ compiler); skipped without it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

#include "targets/cuda/codegen.h"
#include "tests/common/golden.h"
#include "tests/lower/common.h"

namespace morgana::testing {
namespace {

// Threads per emulated block: few enough to be quick, odd so that no tile size is a multiple of it. A kernel with
// warp-level instructions (tensor-core matmuls, warp reductions) runs with two whole warps instead; the tile library
// divides the work among however many warps a block has. One with register tiles runs with all its threads.
constexpr unsigned kThreads = 3;

// Kernels that ran with tensor-core matmuls and warp reductions, so the test can insist those paths were covered.
int atom_kernels = 0, warp_reduce_kernels = 0, register_tile_kernels = 0, register_chain_kernels = 0,
    copy_engine_kernels = 0, loop_fold_kernels = 0, team_reduce_kernels = 0, fragment_norm_kernels = 0,
    split_parts_kernels = 0;

unsigned emulated_threads(const lower::Kernel& k, const targets::Target& t) {
  bool atoms = false, warps = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *list) {
      atoms = atoms || s.atom >= 0;
      warps = warps || s.by_warps;
    }
  atom_kernels += atoms;
  warp_reduce_kernels += warps;
  // Statements other than a matmul working on register tiles (pass keep_rows_in_registers): row reductions,
  // elementwise ops and accumulators in the C layout, shuffles across the lanes of a row.
  bool chain = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *list)
      chain = chain || (s.kind == lower::StmtKind::Reduce &&
                        k.tiles[static_cast<size_t>(s.dst)].space == lower::Space::registers);
  register_chain_kernels += chain;
  // Reductions folded across the loop in registers (pass fold_across_loop).
  bool loop_fold = false;
  for (const lower::Stmt& s : k.body) loop_fold = loop_fold || (s.kind == lower::StmtKind::Reduce && s.accumulate);
  loop_fold_kernels += loop_fold;
  // Reductions folded by teams of warps (pass fold_by_teams); run with two warps, each output gets a team of two
  // (mg::Fold::team halves the team to the warps the block has).
  bool teams = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *list) teams = teams || s.team > 1;
  team_reduce_kernels += teams;
  // Matmuls taking rms-norm factors of A's rows from their fragments (pass norms_from_fragments): shuffles across the
  // lanes of a row.
  bool norms = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *list) norms = norms || s.norm_rows;
  fragment_norm_kernels += norms;
  // K-split matmuls whose warps' parts meet in a shared tile all at once (pass publish_split_parts_at_once).
  bool split_parts = false;
  for (const auto* list : {&k.prologue, &k.body, &k.epilogue})
    for (const lower::Stmt& s : *list) split_parts = split_parts || (s.kind == lower::StmtKind::Publish && s.parts >= 0);
  split_parts_kernels += split_parts;
  copy_engine_kernels += !k.tensor_maps.empty();
  // Register tiles are tiled over the warps the kernel was lowered for (mg::Fragments): all of its threads.
  for (const lower::Tile& tile : k.tiles)
    if (tile.space == lower::Space::registers) {
      ++register_tile_kernels;
      return static_cast<unsigned>(k.block[0]);
    }
  // Two warps: work divided among warps (matmul tasks, reduction outputs) is exercised.
  return atoms || warps ? 2 * static_cast<unsigned>(t.execution.warp_size) : kThreads;
}

int64_t elements(const ir::Graph& g) {
  int64_t n = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) n += g.type(static_cast<ir::TensorId>(i)).numel();
  return n;
}

double load_value(const unsigned char* p, ir::DType t) {
  uint16_t h;
  switch (t) {
    case ir::DType::f32: return std::bit_cast<float>(*reinterpret_cast<const uint32_t*>(p));
    case ir::DType::f16: std::memcpy(&h, p, 2); return static_cast<double>(std::bit_cast<_Float16>(h));
    case ir::DType::bf16: std::memcpy(&h, p, 2); return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
  }
  return 0;
}

// Inputs are exactly representable in their type, so bf16 is the upper half of the f32 bits.
void store_value(unsigned char* p, ir::DType t, double v) {
  float f = static_cast<float>(v);
  uint16_t h;
  switch (t) {
    case ir::DType::f32: std::memcpy(p, &f, 4); return;
    case ir::DType::f16: h = std::bit_cast<uint16_t>(static_cast<_Float16>(f)); std::memcpy(p, &h, 2); return;
    case ir::DType::bf16: h = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); std::memcpy(p, &h, 2); return;
  }
}

// extern "C" mg_run_<entry>(args, gx, gy, gz, threads): launches one kernel with its parameters from `args`.
std::string runners(const lower::LoweredProgram& p) {
  const lower::Dialect& d = cuda::cuda_dialect();
  std::string out;
  for (const lower::Kernel& k : p.kernels) {
    std::string args;
    for (size_t i = 0; i < p.params.size(); ++i) {
      const lower::Param& q = p.params[i];
      std::string type = q.role == lower::Role::workspace ? std::string(d.byte_type)
                                                          : std::string(d.storage_type[static_cast<size_t>(q.dtype)]);
      args += std::string(i ? ", " : "") + "(" + (q.role == lower::Role::input ? "const " : "") + type + "*)a[" +
              std::to_string(i) + "]";
    }
    // The copy engine's tensor maps: on the host, the tensor itself (base, shape and byte strides innermost first),
    // as the runtime would describe it to the driver.
    for (const lower::TensorMapUse& m : k.tensor_maps) {
      const lower::Param& q = p.params[static_cast<size_t>(m.param)];
      const int64_t es = ir::dtype_bytes(q.dtype);
      std::string dims, strides;
      for (size_t i = q.shape.size(); i-- > 0;) {
        dims += std::to_string(q.shape[i]) + ", ";
        strides += std::to_string(q.strides[i] * es) + ", ";
      }
      args += ", mg::TensorMap{(const unsigned char*)a[" + std::to_string(m.param) + "], " +
              std::to_string(q.shape.size()) + ", {" + dims + "}, {" + strides + "}}";
    }
    out += "extern \"C\" void mg_run_" + k.entry +
           "(void** a, long gx, long gy, long gz, unsigned threads) {\n"
           "  mg_host::launch(gx, gy, gz, threads, [&] { " + k.entry + "(" + args + "); });\n}\n";
  }
  return out;
}

class Library {
 public:
  explicit Library(const std::string& path) : h_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (h_) dlclose(h_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* get(const std::string& name) const { return h_ ? dlsym(h_, name.c_str()) : nullptr; }
  bool ok() const { return h_ != nullptr; }

 private:
  void* h_;
};

using Run = void (*)(void**, long, long, long, unsigned);

void run_and_compare(const Library& lib, const lower::LoweredProgram& p, const ir::Graph& g, const targets::Target& t) {
  std::vector<verify::FloatArray> in = verify::random_inputs(g, 11);
  std::vector<verify::FloatArray> want = verify::eval_float(g, in);
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<void*> args;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const lower::Param& q = p.params[i];
    int64_t es = ir::dtype_bytes(q.dtype);
    int64_t bytes = q.role == lower::Role::workspace ? p.workspace_bytes : lower::param_span(q) * es;
    buffers.emplace_back(static_cast<size_t>(bytes), 0xff);
    if (q.role == lower::Role::input) {
      std::vector<double> mem = to_memory(in[i].data, q, lower::param_span(q));
      for (size_t e = 0; e < mem.size(); ++e) store_value(buffers.back().data() + e * static_cast<size_t>(es), q.dtype, mem[e]);
    }
  }
  for (auto& b : buffers) args.push_back(b.data());
  for (const lower::Kernel& k : p.kernels) {
    auto run = reinterpret_cast<Run>(lib.get("mg_run_" + k.entry));
    ASSERT_NE(run, nullptr) << k.entry;
    run(args.data(), k.grid[0], k.grid[1], k.grid[2], emulated_threads(k, t));
  }
  size_t out = 0;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const lower::Param& q = p.params[i];
    if (q.role != lower::Role::output) continue;
    std::vector<double> mem(static_cast<size_t>(lower::param_span(q)));
    for (size_t e = 0; e < mem.size(); ++e)
      mem[e] = load_value(buffers[i].data() + e * static_cast<size_t>(ir::dtype_bytes(q.dtype)), q.dtype);
    expect_close(from_memory(mem, q), want[out], p.name + " output " + q.name);
    ++out;
  }
}

// A temporary folder holding the tile library, removed at the end.
class WorkDir {
 public:
  WorkDir() : path_(fs::temp_directory_path() / ("morgana_host_emulation_" + std::to_string(getpid()))) {
    fs::create_directories(path_);
    for (const lower::EmbeddedHeader& h : cuda::cuda_device_headers())
      std::ofstream(path_ / std::string(h.name), std::ios::binary) << h.text;
  }
  ~WorkDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Lowers the programs of one file for `t`, compiles them for the host in one library, runs and checks each.
// Returns how many ran.
int emulate_file(const std::string& file, const std::vector<const TestProgram*>& list, const targets::Target& t,
                 const lower::LowerOptions& options, const WorkDir& dir, const char* cxx) {
  SCOPED_TRACE(file + " on " + t.identity.name);
  std::string source = "#include \"host_prelude.h\"\n";
  std::vector<std::pair<lower::LoweredProgram, const ir::Graph*>> lowered;
  for (const TestProgram* tp : list) {
    try {
      lowered.emplace_back(cuda::lower(tp->graph, t, options), &tp->graph);
    } catch (const UserError&) {
      continue;
    }
    source += cuda::emit_cuda(lowered.back().first, t).text + runners(lowered.back().first);
  }
  if (lowered.empty()) return 0;
  fs::path cpp = dir.path() / "prog.cpp", so = dir.path() / (fs::path(file).stem().string() + ".so"),
           log = dir.path() / "log.txt";
  std::ofstream(cpp) << source;
  std::string cmd = std::string(cxx) + " -std=c++20 -O1 -pthread -shared -fPIC -w -I" + dir.path().string() + " -I" +
                    (fs::current_path() / "tests/targets/cuda").string() + " -o " + so.string() + " " +
                    cpp.string() + " > " + log.string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << read_file(log);
    return 0;
  }
  Library lib(so.string());
  if (!lib.ok()) {
    ADD_FAILURE() << dlerror();
    return 0;
  }
  for (const auto& [p, g] : lowered) {
    SCOPED_TRACE(p.name);
    run_and_compare(lib, p, *g, t);
  }
  return static_cast<int>(lowered.size());
}

TEST(HostEmulation, GeneratedCudaComputesTheReference) {
  const char* cxx = std::getenv("MORGANA_HOST_CXX");
  if (!cxx || !*cxx) GTEST_SKIP() << "MORGANA_HOST_CXX is not set";
  targets::Target t = targets::load_target("targets/cuda/h100.toml");
  WorkDir dir;
  // Programs by file: one compile per file (a catalogue file holds a reference and a candidate).
  std::map<std::string, std::vector<const TestProgram*>> by_file;
  std::vector<TestProgram> programs = test_programs();
  for (const TestProgram& tp : programs)
    if (elements(tp.graph) <= (1 << 18)) by_file[tp.id.substr(0, tp.id.find(':'))].push_back(&tp);
  int ran = 0;
  for (const auto& [file, list] : by_file) ran += emulate_file(file, list, t, {}, dir, cxx);
  EXPECT_GE(ran, 40);
  EXPECT_GE(atom_kernels, 10);
  EXPECT_GE(warp_reduce_kernels, 5);
  EXPECT_GE(register_tile_kernels, 5);
  EXPECT_GE(register_chain_kernels, 4);
  EXPECT_GE(copy_engine_kernels, 4);
  EXPECT_GE(loop_fold_kernels, 1);
  EXPECT_GE(team_reduce_kernels, 1);
  EXPECT_GE(fragment_norm_kernels, 1);
  EXPECT_GE(split_parts_kernels, 2);
  std::printf("%d programs; %d kernels with tensor-core matmuls, %d with warp reductions, %d with register tiles, "
              "%d with row reductions in registers, %d with copy-engine loads, %d with reductions folded across "
              "the loop, %d with reductions by teams of warps, %d with row norms from fragments, %d with K-split "
              "parts met at once\n",
              ran, atom_kernels, warp_reduce_kernels, register_tile_kernels, register_chain_kernels,
              copy_engine_kernels, loop_fold_kernels, team_reduce_kernels, fragment_norm_kernels,
              split_parts_kernels);
}

// Tiles spilled to each block's slice of global scratch (LowerOptions::spill_to_global) on a target too small for
// them.
TEST(HostEmulation, SpilledTilesComputeTheReference) {
  const char* cxx = std::getenv("MORGANA_HOST_CXX");
  if (!cxx || !*cxx) GTEST_SKIP() << "MORGANA_HOST_CXX is not set";
  targets::Target t = targets::load_target("tests/lower/targets/tiny.toml", ".");  // it inherits targets/cuda/a100
  WorkDir dir;
  TestProgram tp{"flash_small", std::move(ir::parse_file("tests/lower/specs/flash_small.mg").programs[0])};
  lower::LowerOptions o;
  o.spill_to_global = true;
  EXPECT_EQ(emulate_file("tests/lower/specs/flash_small.mg", {&tp}, t, o, dir, cxx), 1);
}

}  // namespace
}  // namespace morgana::testing
