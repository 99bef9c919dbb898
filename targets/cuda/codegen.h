// CUDA code generation: what the NVRTC toolchain, `morgana compile` and the bundle writer call.
//
//   lower::LoweredProgram p = cuda::lower(graph, target);      // kernels, launch geometry, parameters
//   lower::GeneratedSource src = cuda::emit_cuda(p, target);   // CUDA C++ text + the headers it includes
//   nvrtcCreateProgram(&prog, src.text.c_str(), name, src.headers.size(), <texts>, <names>);
//   nvrtcCompileProgram(prog, {"-arch=sm_90a", "-std=c++17"});  // the target's identity.arch
//
// Every kernel of a program takes the program's parameters in order (inputs, outputs, then the workspace when
// workspace_bytes > 0), launches with its own grid, block and dynamic shared memory, and the kernels run in order
// on one stream. Kernels whose dynamic shared memory exceeds 48 KiB need cuFuncSetAttribute(
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) before launch.
#pragma once

#include <span>

#include "ir/graph.h"
#include "targets/lower/emit.h"
#include "targets/lower/kernel_ir.h"
#include "targets/lower/lower.h"
#include "targets/target.h"

namespace morgana::cuda {

// lower::lower for an NVIDIA target (a UserError for any other vendor).
lower::LoweredProgram lower(const ir::Graph& g, const targets::Target& target,
                            const lower::LowerOptions& options = {});

// CUDA C++ for a program lowered for `target`: one extern "C" __global__ function per kernel, named by its entry
// symbol. Compiles with NVRTC given the returned headers and no include path.
lower::GeneratedSource emit_cuda(const lower::LoweredProgram& p, const targets::Target& target);

// The device tile library (targets/cuda/device), embedded at build time.
std::span<const lower::EmbeddedHeader> cuda_device_headers();

// The spellings of CUDA C++ the emitter uses.
const lower::Dialect& cuda_dialect();

}  // namespace morgana::cuda
