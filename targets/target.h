// Hardware descriptions: one TOML file per GPU (targets/cuda/h100.toml, targets/hip/mi300x.toml, ...), loaded
// and validated into a Target. Every hardware fact morgana uses (SM count, warp size, shared memory limits,
// matrix instructions, peak rates, cost-model constants) comes from these files, never from constants in the
// code, so supporting a new GPU is writing a file. The schema, inheritance rules and error messages are in
// docs/targets.md.
#pragma once

#include <bit>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace morgana::ir {
class Graph;
}

namespace morgana::targets {

// Strings below are validated against fixed vocabularies (see docs/targets.md) so consumers may compare them
// directly: vendor is "nvidia" or "amd", scope is "warp", "warpgroup" or "wave", operand sources are
// "registers" or "shared", element types are names such as "f16", "bf16", "f32", "tf32", "xf32", "fp8_e4m3".

struct Identity {
  std::string name;    // equals the file's stem; never inherited
  std::string vendor;  // "nvidia" | "amd"
  std::string arch;    // compiler target: sm_NN[a] for nvidia, gfxNNN for amd
  std::string family;  // marketing generation, e.g. "hopper", "cdna3"; informational
  std::string description;
};

struct Execution {
  int64_t sms = 0;  // streaming multiprocessors (nvidia) or compute units (amd)
  int64_t warp_size = 0;
  int64_t max_threads_per_block = 0;
  int64_t max_threads_per_sm = 0;
  int64_t max_blocks_per_sm = 0;
};

struct Memory {
  int64_t smem_per_block_default = 0;   // bytes a block gets without opting in
  int64_t smem_per_block_optin = 0;     // bytes a block may request with an explicit opt-in
  int64_t smem_per_sm = 0;              // bytes per SM/CU, shared by its resident blocks
  int64_t smem_reserved_per_block = 0;  // bytes the runtime keeps per resident block
  int64_t l2_bytes = 0;                 // total over the device
  int64_t l2_domains = 1;               // separate L2 caches, each serving a part of the SMs (XCDs)
  int64_t mall_bytes = 0;               // memory-side last-level cache (AMD Infinity Cache); 0 if none
  double dram_bandwidth_gbps = 0;       // vendor peak, GB/s (1e9 bytes)
  int64_t dram_bytes = 0;
  int64_t dram_sector_bytes = 0;        // the unit DRAM traffic moves in: a partial one costs a whole one
  int64_t l2_line_bytes = 0;            // the unit loads are requested in (an L2 cache line); 0: not modelled
};

struct Registers {
  int64_t regs_per_sm = 0;  // 32-bit registers
  int64_t regs_per_block = 0;
  int64_t max_regs_per_thread = 0;
};

// One matrix (tensor-core / MFMA) instruction: D[m×n] = A[m×k]·B[k×n] + C over the lanes of `scope`.
struct MatrixInstr {
  std::string op;  // instruction as the emitter will spell it, e.g. "mma.sync.aligned.m16n8k16"
  int64_t m = 0;
  int64_t n = 0;  // smallest N; instructions with a range of N (wgmma) also set n_max and n_step
  int64_t n_max = 0;
  int64_t n_step = 0;
  int64_t k = 0;
  std::vector<std::string> ab_types;  // element types A and B may have (both take the same one)
  std::string acc;                    // accumulator (C/D) element type
  std::string scope;                  // lanes that execute it together: "warp" | "warpgroup" | "wave"
  std::vector<std::string> a_from;    // where operand A may live: "registers", "shared"
  std::vector<std::string> b_from;
  // Lane layouts (docs/targets.md, "Lane layouts"), CuTe-style as data: for operand X (a: m×k, b: k×n, c: m×n,
  // c also being D), the weight of each bit of (lane, value) on the row and on the column of the element that
  // value `value` of lane `lane` holds, lane bits first. Empty when the file gives none; lowering uses only
  // instructions that have them.
  std::vector<int64_t> a_rows, a_cols, b_rows, b_cols, c_rows, c_cols;

  bool has_lane_layouts() const { return !c_rows.empty(); }
  // Values each lane holds of an operand whose lane layout is `layout` (a_rows, b_rows or c_rows): the layout's
  // weights beyond the lane bits of a warp of `warp_size`.
  static int64_t lane_values(const std::vector<int64_t>& layout, int64_t warp_size) {
    const int lane_bits = std::countr_zero(static_cast<uint64_t>(warp_size));
    return int64_t{1} << (static_cast<int>(layout.size()) - lane_bits);
  }

  bool supports_n(int64_t candidate) const {
    return candidate >= n && candidate <= n_max && (candidate - n) % n_step == 0;
  }
};

struct Async {
  bool cp_async = false;  // asynchronous global->shared copies (cp.async)
  bool tma = false;       // tensor memory accelerator bulk copies
  bool wgmma = false;     // warpgroup matrix instructions
  bool clusters = false;  // thread-block clusters with distributed shared memory
  // How deep a for-loop's asynchronous loads are pipelined (targets::pipeline_stages; both optional): at most
  // `max_stages` buffers, and where `in_flight_bytes` > 0 no more than keep that many bytes requested across the
  // blocks resident at once (about the DRAM's bandwidth times its latency under load).
  int64_t max_stages = 4;
  int64_t in_flight_bytes = 0;
};

// Dense peak rates in TFLOP/s; 0 means not recorded (or not supported).
struct Peak {
  double f16_tensor = 0;
  double bf16_tensor = 0;
  double tf32_tensor = 0;
  double fp8_tensor = 0;
  double f32_vector = 0;
  double f64_vector = 0;
};

// Calibration constants for the cost model; see docs/targets.md for how each is meant to be used.
struct Cost {
  double launch_overhead_us = 0;  // per extra kernel in a captured graph
  double barrier_ns = 0;          // one block-wide barrier
  double dram_efficiency = 0;     // achievable fraction of dram_bandwidth_gbps
  double tensor_efficiency = 0;   // achievable fraction of the tensor peaks
  double l2_bandwidth_gbps = 0;   // device-wide
  double smem_bandwidth_gbps_per_sm = 0;
  double dram_short_run_efficiency = 0;  // DRAM efficiency of a tile row that is one sector of its operand's row
  double iteration_latency_us = 0;  // what a for-loop iteration whose loads are not pipelined waits for them
  double pass_element_ns = 0;  // a statement pass over shared memory, per element each thread handles (optional)
  double overlap_miss = 0;     // fraction of the shorter of a wave's memory and compute time not hidden (optional)
  double vector_efficiency = 1;  // achievable fraction of the f32 vector peak for generated elementwise, reduction
                                 // and scalar matmul code (optional)
  double warp_stream_gbps = 0;   // loads one resident warp of generated code streams through its loop; 0: no limit (optional)
  double partial_line_request_ns = 0;  // an SM's time per L2 line request beyond its bytes' whole lines (rows of
                                       // part of a line); 0: not modelled (optional)
  double chain_shown_at = 0;  // the share of a pipelined loop's memory time from which its barrier chain shows in
                              // full through overlap_miss (in proportion below); 0: always in full (optional)
  double row_reduction_ns = 0;  // one row reduction of register rows (warp shuffles) in a block's chain, beside its
                                // barriers; 0: not modelled (optional)
  double block_dispatch_ns = 0;  // the device's time to start one more block of a grid (blocks start one after the
                                 // other, device-wide): a kernel takes at least blocks x this; 0: not modelled (optional)
};

struct Target {
  std::filesystem::path file;                // the file that was loaded
  std::vector<std::filesystem::path> bases;  // its base chain, nearest first
  Identity identity;
  Execution execution;
  Memory memory;
  Registers registers;
  std::vector<MatrixInstr> matrix;
  Async async;
  Peak peak;
  Cost cost;
};

// The most dynamic shared memory one block may use: smem_per_block_optin. The per-block reservation
// (smem_reserved_per_block) is not part of it: on NVIDIA the opt-in limit already excludes it (H100: 232448 = the
// SM's 233472 less 1024), and it is charged against the SM's capacity (resident_blocks_per_sm). The lowering's
// shared-memory plan and the search's generator both use this.
int64_t block_smem_limit(const Target& t);

// Blocks of `threads` threads, `smem_bytes` of dynamic shared memory and `regs_per_thread` registers that one SM
// (CU) holds at once: the least of the thread, shared-memory (with the per-block reservation), register and block
// limits; threads count in whole warps. 0 when one block exceeds a per-block limit. The one occupancy rule: the
// search's cost model and the lowering's pipelining decision both use it.
int64_t resident_blocks_per_sm(const Target& t, int64_t threads, int64_t smem_bytes, int64_t regs_per_thread);

// Blocks of a kernel of `blocks` blocks that one SM runs at once: resident_blocks_per_sm, but no more than the grid
// gives each SM.
int64_t busy_blocks_per_sm(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes);

// Threads a block op's kernel runs with: the block graph's `threads`, raised by doublings up to half the target's
// max_threads_per_block while the grid gives fewer blocks than the target has SMs, for a block graph without
// matmuls (whose warp tilings the block's warps set): its statements then divide each tile among more threads and
// more warps hide each other's latency. Then, for a block with a for-loop (`loop` > 1: a combine, whose work is
// folding every iteration into each element), halved down to a warp while the block's largest tile
// (`largest_tile` elements) would leave a thread fewer than two: a split-KV combine of one 128-column row per block
// folds each element on a thread of its own at 128 threads, and whole programs ran 2-5% faster with fewer (H100,
// same μGraphs: gqa_b1 8.1 -> 7.64 us, qknorm_b2_k2048 7.87 -> 7.46, qknorm_h8_d128_k1024 9.76 -> 9.48). A
// loop-free block keeps its threads: its rows' reductions want whole warps of runs (mg::regs_reduce_rows). The one
// rule: the lowering launches with it, the cost model prices it.
int64_t block_threads(const Target& t, int64_t blocks, int64_t threads, bool has_matmul, int64_t loop,
                      int64_t largest_tile);
// The same read off a block graph (its grid, threads and ops).
int64_t block_threads(const Target& t, const ir::Graph& body);

// Bytes one asynchronous global->shared copy moves (cp.async.cg; PTX ISA): a loop's loads are pipelined only when
// they move whole copies, so the cost model and the lowering agree on which loops wait for their loads.
constexpr int64_t kAsyncCopyBytes = 16;
// Bytes a lane reads per operand-fragment load of a matrix instruction (ldmatrix: one 16-byte row of an 8x8 matrix
// per lane; the tile library loads A and B that way): a matmul on one reads its operand tiles a whole fragment row
// at a time, where an elementwise pass reads element by element.
constexpr int64_t kFragmentLoadBytes = 16;
// Elements an elementwise statement deals a thread per step along a tile's last dim of extent `last` (the tile
// library's mg::run_length: the largest of 8, 4, 2 dividing it), and the f32 registers a thread holds of a tile of
// `numel` elements kept in registers in runs (mg::Elements: whole runs, the last ones on fewer threads). The
// lowering's element layout and the cost model both read them.
constexpr int64_t elementwise_run(int64_t last) { return last % 8 == 0 ? 8 : last % 4 == 0 ? 4 : last % 2 == 0 ? 2 : 1; }
// The run of a tile kept in registers in that layout (mg::Elements): elementwise_run, halved while the runs would
// leave threads of the block without one (a split-KV combine's [2, 64] partial outputs on 128 threads: runs of
// one), so that no thread folds eight elements' work that a thread per element shares.
constexpr int64_t element_run(int64_t numel, int64_t last, int64_t threads) {
  int64_t run = elementwise_run(last);
  while (run > 1 && numel / run < threads) run /= 2;
  return run;
}
constexpr int64_t element_registers(int64_t numel, int64_t last, int64_t threads) {
  const int64_t run = element_run(numel, last, threads);
  return (numel / run + threads - 1) / threads * run;
}

// Buffers a for-loop's asynchronous loads get (software pipelining, docs/lowering.md): the most, up to the target's
// [async] max_stages and the loop's iterations, for which the block's shared memory (`smem_bytes` with one buffer,
// plus `stage_bytes` per extra buffer) fits and costs no busy block; where the target gives [async] in_flight_bytes,
// no more than the fewest (at least 2) whose copies in flight across the blocks resident at once reach it (more only
// queue at the DRAM: measured on the H200, bench/notes-fast-kernels-1.md, session 34), counting what the DRAM
// delivers per stage: `stream_bytes`, the stage's tiles less those every block reads (stream_share); a loop whose
// every tile is such a broadcast (stream_bytes 0) asks nothing of the DRAM and gets max_stages. 1 (not
// pipelined) when not even two buffers fit, when the target has no asynchronous copies or the loop runs once. The
// one pipelining rule: the lowering applies it, the cost model prices it.
int64_t pipeline_stages(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes, int64_t stage_bytes,
                        int64_t loop, int64_t stream_bytes);

// The DRAM bytes a block's load of a tile of `bytes` streams, where `replicas` of the grid's `blocks` read the same
// tile (its position does not move along some grid dims): none when every block of a grid of several reads it (a
// broadcast operand such as a GEMV's activation rows: L2 serves all but the first), else all of them. Tiles that
// only some blocks share count in full: measured on the H200 (session 34), dividing their bytes among the sharers
// gave gqa_b8's flash kernel 7 buffers instead of 4 and cost it 28%.
constexpr int64_t stream_share(int64_t bytes, int64_t replicas, int64_t blocks) {
  return blocks > 1 && replicas >= blocks ? 0 : bytes;
}

// Whether the copy engine ([async] tma) can write a pipelined tile's rows as the tile library reads them: rows of a
// whole number of 16-byte vectors and at most kEngineMaxBox elements; a tile read through ldmatrix (`swizzled`) has
// rows of 32, 64 or 128 bytes (the engine's swizzles are mg::Swizzled there), or goes unswizzled where that costs at
// most 2-way bank conflicts: the 8 rows an ldmatrix matrix reads, row_bytes/16 chunks apart, share bank groups
// gcd(chunks, 8)-fold, no more than the tile has rows. The row rule of the lowering's copy engine pass (which also
// asks the tensor's strides and the buffers' alignment); the cost model reads it to know which loads the engine
// moves.
constexpr int64_t kEngineMaxBox = 256;  // elements per box dim (cuTensorMapEncodeTiled's limit)
// The engine's swizzle for rows of `row_bytes` (its 32-, 64- and 128-byte patterns are mg::Swizzled's), 0 for none.
constexpr int64_t engine_swizzle_bytes(int64_t row_bytes) {
  return row_bytes == 32 || row_bytes == 64 || row_bytes == 128 ? row_bytes : 0;
}
bool engine_takes_rows(const Target& t, int64_t row_bytes, int64_t row_elements, int64_t rows, bool swizzled);

// Whether a for-loop with loads its threads must copy synchronously (rows not of whole 16-byte vectors: a split-KV
// combine's running sums and maxima) has all its iterations' tiles loaded before it runs: where they fit the
// block's shared memory together (`smem_bytes` with one iteration's, plus `loop_bytes` per further iteration) and
// cost no busy block, for loops of up to kMaxPreloadIterations (the prologue holds one load per iteration). The block
// then waits for one round trip instead of one per iteration. The one preload rule: the lowering applies it
// (pipeline_loads), the cost model prices it.
constexpr int64_t kMaxPreloadIterations = 32;
bool preload_fits(const Target& t, int64_t blocks, int64_t threads, int64_t smem_bytes, int64_t loop_bytes,
                  int64_t loop);

// How the warps of a block share a matmul on matrix instruction `mi` (the lowering's Stmt tiling and the tile
// library's mg::WarpTiling): tasks of one row block by atoms_n atoms along N (up to four: an A fragment then serves
// four products), k_split warps per task when there are warps to spare (the largest power of two that gives every
// warp work and divides the K steps), and the f32 accumulator registers each thread then holds. `batches` x `rows`
// x `cols` is the result, `k` the reduced extent.
struct MatmulTiling {
  int64_t atoms_n = 1, tasks = 1, k_split = 1, registers = 0;
};
MatmulTiling matmul_tiling(const Target& t, const MatrixInstr& mi, int64_t batches, int64_t rows, int64_t cols,
                           int64_t k, int64_t warps);
// Whether a matmul's accumulators may live in registers: at most a quarter of a thread's registers, leaving the rest
// to operands and addresses. The one rule: the lowering keeps them there when it holds (else it accumulates in a
// shared tile, reading and writing every padded fragment each call), the cost model prices both.
bool accumulators_fit(const Target& t, const MatmulTiling& tiling);
// The same rule for any f32 accumulators a thread keeps across a loop (the lowering's loop folds): `registers` of
// them per thread.
bool accumulator_registers_fit(const Target& t, int64_t registers);
// Whether a loop's loads of one tile may go straight into the registers of the threads that compute on it (the
// lowering's element layout, pass keep_elements_in_registers; a split-KV combine's partial results): the loop short
// enough to unroll (the preload's bound, kMaxPreloadIterations) and every iteration's values of the tile,
// `registers` of them a thread (element_registers) at `dtype_bytes` each, in half a thread's registers together. The
// one rule: the lowering takes the loads so, the cost model prices the loop without shared memory or barriers.
bool loop_loads_fit_registers(const Target& t, int64_t loop, int64_t registers, int64_t dtype_bytes);
// Whether tiles a pass keeps in registers fit beside the rest of a thread's work: at the liveness peak, `live`
// registers of them at most three quarters of a thread's, and the largest one `largest` at most a third (checked with
// ptxas -v on every attention candidate of the examples and on tests/gpu/specs, bench/notes-fast-kernels-1.md: a
// 64-register S tile beside 64-register accumulators fits without spills in 241 registers, a 128-register S spills).
bool register_tiles_fit(const Target& t, int64_t live, int64_t largest);

// Loads, merges (see `base`) and validates one target file. Throws morgana::UserError with file:line:column
// of the offending key or value; when the fault lies in a base file, the location points into that file. Every
// base must lie inside the folder `root` (default: the file's own folder), the folder of target files.
Target load_target(const std::filesystem::path& file, const std::filesystem::path& root = {});

// Every *.toml below `dir`, recursively, sorted by path. Throws UserError when `dir` is not a directory.
std::vector<std::filesystem::path> list_target_files(const std::filesystem::path& dir);

// Loads every file list_target_files(dir) returns, in that order.
std::vector<Target> load_all_targets(const std::filesystem::path& dir);

// Loads the target called `name` (its file stem) from below `dir`. Throws UserError for an unknown name (with
// the closest known name as a hint) or a name that two files share.
Target find_target(std::string_view name, const std::filesystem::path& dir);

// The table `morgana targets` prints: a header line, then one aligned line per target with name, vendor,
// arch, SM/CU count, warp size, shared memory opt-in and DRAM bandwidth. Ends with a newline.
std::string render_targets_table(const std::vector<Target>& targets);

}  // namespace morgana::targets
