// The CUDA dialect table and the CUDA entry points of code generation (codegen.h).
#include "ir/diagnostic.h"
#include "targets/cuda/codegen.h"
#include "targets/lower/lower.h"

namespace morgana::cuda {

namespace {

void require_nvidia(const targets::Target& t) {
  if (t.identity.vendor != "nvidia")
    throw UserError("target '" + t.identity.name + "' is an " + t.identity.vendor +
                    " GPU; CUDA code is generated for nvidia targets only");
}

// What morgana_tile.cuh's mg::matmul_atom implements (mma.sync with ldmatrix, f16 and bf16).
constexpr std::string_view kMatrixOps[] = {"mma.sync.aligned.m16n8k16"};

}  // namespace

const lower::Dialect& cuda_dialect() {
  static const lower::Dialect kCuda = {
      .language = "CUDA C++",
      .extern_c = "extern \"C\"",
      .kernel_qualifier = "__global__",
      // Min. 1 block per SM: without it ptxas caps registers for occupancy and spills (seen: 40 registers, 20 bytes
      // spilled, in a kernel of three tensor-core matmuls that needs 71).
      .launch_bounds = "__launch_bounds__({}, 1)",
      .restrict_qualifier = "__restrict__",
      .shared_declaration = "extern __shared__ __align__(16) unsigned char {}[];",
      .engine_shared_declaration = "extern __shared__ __align__(1024) unsigned char {}[];",
      .tensor_map_param = "const __grid_constant__ mg::TensorMap {}",
      .threads_hint = "mg::assume_threads<{}>();",
      .block_index = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
      .barrier = "__syncthreads();",
      .byte_type = "unsigned char",
      .index_type = "long long",
      .loop_index_type = "int",
      .unroll = "#pragma unroll",
      .storage_type = {"mg::f16", "mg::bf16", "float"},
      .define = "#define {}",
      .include = "#include \"{}\"",
      .host_device = "__host__ __device__",
      .matrix_ops = kMatrixOps,
      .exp = "mg::fast_exp",
      .sqrt = "sqrtf",
      .rsqrt = "rsqrtf",
      .erf = "erff",
      .exp_of_difference = "mg::fast_exp_diff",
  };
  return kCuda;
}

lower::LoweredProgram lower(const ir::Graph& g, const targets::Target& target, const lower::LowerOptions& options) {
  require_nvidia(target);
  lower::LowerOptions o = options;
  o.matrix_ops.assign(cuda_dialect().matrix_ops.begin(), cuda_dialect().matrix_ops.end());
  return lower::lower(g, target, o);
}

lower::GeneratedSource emit_cuda(const lower::LoweredProgram& p, const targets::Target& target) {
  require_nvidia(target);
  if (p.target != target.identity.name)
    throw UserError("program '" + p.name + "' was lowered for target '" + p.target + "', not '" +
                    target.identity.name + "'; lower it for the target it is emitted for");
  return lower::emit(p, target, cuda_dialect(), cuda_device_headers());
}

}  // namespace morgana::cuda
