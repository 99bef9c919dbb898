// The one emitter: renders a LoweredProgram as GPU C++ source for a dialect (docs/lowering.md). Everything that
// differs between GPU languages is data in a Dialect table; the tile API the code calls (mg::load, mg::matmul, ...)
// is the same for every target, and each target family implements it in its own device tile library, which the
// compiler embeds (EmbeddedHeader) so that no include path is needed at run time. CUDA is targets/cuda; HIP will be
// a second Dialect table and tile library, not a second emitter.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "targets/lower/kernel_ir.h"
#include "targets/target.h"

namespace morgana::lower {

// A header the generated source includes, with its text (embedded in the compiler at build time).
struct EmbeddedHeader {
  std::string_view name;  // as the source includes it: "morgana_tile.cuh"
  std::string_view text;
};

// Spellings of one GPU language. Patterns hold one "{}" where the value goes.
struct Dialect {
  std::string_view language;                   // "CUDA C++", for the comment header
  std::string_view extern_c;                   // linkage that keeps entry symbols unmangled
  std::string_view kernel_qualifier;           // "__global__"
  std::string_view launch_bounds;              // "__launch_bounds__({})": threads per block
  std::string_view restrict_qualifier;         // "__restrict__"
  std::string_view shared_declaration;         // "extern __shared__ __align__(16) unsigned char {}[];": the name
  std::string_view engine_shared_declaration;  // the same aligned to kCopyEngineAlign, for kernels whose loads use
                                               // the copy engine (Kernel::tensor_maps)
  std::string_view tensor_map_param;           // "const __grid_constant__ mg::TensorMap {}": a tensor map by value
  std::string_view threads_hint;               // "mg::assume_threads<{}>();": tells the compiler the block's thread
                                               // count (every launch uses exactly it), so loops over a tile unroll
  std::array<std::string_view, 3> block_index;  // "blockIdx.x", "blockIdx.y", "blockIdx.z"
  std::string_view barrier;                    // "__syncthreads();"
  std::string_view byte_type;                  // "unsigned char": raw memory (the workspace)
  std::string_view index_type;                 // "long long": offsets into global memory
  std::string_view loop_index_type;            // "int": the for-loop's iteration (a 32-bit buffer index it % stages
                                               // is a multiply-shift; a 64-bit one a long sequence every iteration)
  std::string_view unroll;                     // "#pragma unroll": the next loop is unrolled whole (Kernel::unroll)
  std::array<std::string_view, 3> storage_type;  // per ir::DType (f16, bf16, f32): "mg::f16", "mg::bf16", "float"
  std::string_view define;                     // "#define {}": a constant the tile library reads ("MG_WARP_SIZE 32")
  std::string_view include;                    // "#include \"{}\"": a header by name
  std::string_view host_device;                // "__host__ __device__": functions both sides may call (lane maps)
  // Matrix instructions (a target's [[matrix]] `op`) the tile library implements, as mg::matmul_atom<Atom>.
  std::span<const std::string_view> matrix_ops;
  // Math functions of f32 arguments, used in elementwise expressions.
  std::string_view exp, sqrt, rsqrt, erf;
  // exp(x - y) as one function of two arguments, for a subtraction whose next step is exp (the softmax's
  // exp(s - max)); empty: the two steps are emitted apart.
  std::string_view exp_of_difference;
};

struct GeneratedSource {
  std::string text;
  // Where each line came from, index = line - 1: "node 'p' (spec.mg:12:5)", or "" for lines of no node.
  std::vector<std::string> line_origin;
  std::vector<EmbeddedHeader> headers;  // the headers the text includes, to hand to the compiler
};

// Renders `p` (lowered for `target`) in `dialect`, including `headers`.
GeneratedSource emit(const LoweredProgram& p, const targets::Target& target, const Dialect& dialect,
                     std::span<const EmbeddedHeader> headers);

// The shortest decimal that reads back as the same f32, as a C++ float literal: "0.5f", "-1e-06f".
std::string float_literal(double v);

}  // namespace morgana::lower
