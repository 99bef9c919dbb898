// The NVRTC toolchain: compiles generated CUDA C++ in-process to a cubin for one sm_XY, or to PTX for one
// compute_XY. NVRTC is loaded with dlopen on first use, so morgana builds and runs without a CUDA toolkit and only
// `morgana compile` for an NVIDIA target needs one (any CUDA >= 12 with NVRTC). Where it looks: $MORGANA_NVRTC
// (a file), $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, then the dynamic linker's search path.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace morgana::cuda {

// A header the source may #include by `name`, handed to NVRTC from memory.
struct SourceHeader {
  std::string_view name;
  std::string_view text;
};

struct NvrtcInput {
  std::string_view source;                 // viewed: must outlive the call
  std::string file_name = "morgana.cu";    // the name NVRTC's messages use (owned: often built on the spot)
  std::span<const SourceHeader> headers;
  // Per line of `source` (index = line - 1): where it came from, e.g. "node 'p' (spec.mg:12:5)"; may be empty.
  std::span<const std::string> line_origin;
  std::string arch;  // "sm_90a" gives a cubin, "compute_80" gives PTX
  // A cubin's log also carries ptxas's resource report (-Xptxas=-v: registers and spills per kernel), for
  // ptxas_resources; an NVRTC that does not take the option compiles without it.
  bool resource_report = false;
};

struct NvrtcOutput {
  std::vector<uint8_t> code;  // the cubin, or the PTX text with its terminating NUL (as cuModuleLoadData wants it)
  std::string log;            // NVRTC's messages (warnings), possibly empty
};

// Throws morgana::UserError when NVRTC cannot be loaded, rejects the arch, or the source does not compile; the
// message carries NVRTC's log with each diagnostic followed by the generated line it names and that line's origin.
NvrtcOutput nvrtc_compile(const NvrtcInput& in);

// One kernel of ptxas's resource report (NvrtcInput::resource_report).
struct KernelResources {
  std::string entry;  // the entry function
  int registers = 0;
  int64_t spill_store_bytes = 0, spill_load_bytes = 0;
};
// The kernels an NVRTC log reports, in its order; none when it holds no report.
std::vector<KernelResources> ptxas_resources(std::string_view log);

// "13.0", or an empty string with `why` set when NVRTC cannot be loaded.
std::string nvrtc_version(std::string* why = nullptr);

// True for "sm_NN[a]" (cubin) and "compute_NN[a]" (PTX).
bool is_cubin_arch(std::string_view arch);
bool is_ptx_arch(std::string_view arch);
// The NN of either (90 for sm_90a: compute capability 9.0), or 0 for anything else.
int cuda_arch_number(std::string_view arch);

}  // namespace morgana::cuda
