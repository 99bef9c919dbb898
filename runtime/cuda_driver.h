// The CUDA driver API, loaded at run time. Nothing in morgana links libcuda or includes cuda.h: load_driver()
// dlopens libcuda.so.1 once per process and looks up the entry points below, so that a program embedding the
// runtime starts (and can open bundles) on a machine without an NVIDIA driver and fails with a clear message
// only when it asks for the GPU. The runtime's loader uses it, and so may morgana's own tools (`morgana run`
// allocates buffers and times kernels through it).
//
// The types and constants are the few the runtime needs, with the values of the driver's ABI, which NVIDIA
// keeps stable across versions (they are in cuda.h). They live in this namespace so that a file including
// cuda.h as well sees no clash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "error.h"

namespace morgana::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;

// CUdevice_attribute values.
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;  // Y and Z follow
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;   // Y and Z follow
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
inline constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;

// CUstream flags and CUstreamCaptureMode values (capture needs a stream other than the legacy default one).
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

// CUfunction_attribute values.
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;  // what the kernel's registers allow
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;      // static shared memory
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// The copy engine's tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned) and the cuTensorMapEncodeTiled enum
// values the runtime passes (CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion; interleave and
// out-of-bounds fill are 0: none, zeros).
struct alignas(64) CUtensorMap {
  uint64_t opaque[16];
};
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7;
inline constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
inline constexpr int CU_TENSOR_MAP_SWIZZLE_NONE = 0;  // 32, 64, 128 bytes: 1, 2, 3
inline constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2;

// CUjit_option values for cuModuleLoadDataEx: where the PTX compiler writes its error log.
inline constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
inline constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// The entry points. Each member is named after the symbol it is bound to: the versioned one where cuda.h maps
// the plain name to it (cuMemAlloc -> cuMemAlloc_v2), because the unversioned symbols keep the old 32-bit
// ABI.
struct Driver {
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem_v2)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxPushCurrent_v2)(CUcontext);
  CUresult (*cuCtxPopCurrent_v2)(CUcontext*);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree_v2)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH_v2)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventDestroy_v2)(CUevent);
  // cuEventElapsedTime_v2 (CUDA 12.8) where the driver has it, else the original cuEventElapsedTime.
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  // Optional: null on drivers older than CUDA 12.0. A context's id is unique for the life of the process,
  // unlike its handle, which a new context may reuse after the old one is destroyed.
  CUresult (*cuCtxGetId)(CUcontext, unsigned long long*);
  // Optional: null on drivers older than CUDA 12.0; kernels that use the copy engine need it.
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, int data_type, uint32_t rank, void* address, const uint64_t* dims,
                                     const uint64_t* strides, const uint32_t* box, const uint32_t* element_strides,
                                     int interleave, int swizzle, int l2_promotion, int oob_fill);
  // Optional: streams and CUDA graphs, for tools that time programs as a framework replays them (`morgana
  // optimize --measure`); the runtime itself never needs them. All bound or all null (has_graphs()).
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy_v2)(CUstream);
  CUresult (*cuStreamBeginCapture_v2)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  bool has_graphs() const { return cuGraphDestroy != nullptr; }

  int version = 0;  // cuDriverGetVersion: 13000 for CUDA 13.0

  // "CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for execution on the device)"
  std::string result_text(CUresult r) const;
  // Error{status, "<what>: <result_text(r)>"}
  Error error(mg_status status, CUresult r, std::string_view what) const;
};

// Loads libcuda.so.1, binds the entry points and calls cuInit(0), on the first call in the process; every
// later call returns the same outcome (the library stays loaded until the process ends). Thread-safe. On
// failure returns nullptr and sets *error: MG_ERROR_NO_DRIVER when the library cannot be loaded ("no NVIDIA
// driver found (libcuda.so.1 could not be loaded: <dlerror>)") or lacks an entry point, MG_ERROR_NO_DEVICE
// when cuInit finds no GPU, MG_ERROR_DRIVER for any other cuInit failure.
const Driver* load_driver(Error* error);

// What the runtime reads of a device to pick code and check launches.
struct Device {
  CUdevice handle = 0;
  int ordinal = -1;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int warp_size = 0;
  int max_threads_per_block = 0;
  int max_block[3] = {0, 0, 0};
  int max_grid[3] = {0, 0, 0};
  int smem_per_block = 0;        // without opting in
  int smem_per_block_optin = 0;  // the most a kernel may opt in to
  int regs_per_block = 0;
};

Error describe_device(const Driver& d, CUdevice device, Device* out);

// The calling thread's current context, its unique id (0 when the driver has no cuCtxGetId) and its device.
// MG_ERROR_NO_CONTEXT when no context is current.
struct CurrentContext {
  CUcontext context = nullptr;
  unsigned long long id = 0;
  CUdevice device = 0;
};
Error current_context(const Driver& d, CurrentContext* out);

// Retains device `ordinal`'s primary context and makes it current on this thread, as the CUDA runtime API
// does on first use; undo with cuDevicePrimaryCtxRelease_v2. For tools that own no context of their own
// (`morgana run`, tests); the runtime itself launches only in the caller's context.
Error use_primary_context(const Driver& d, int ordinal, CUcontext* out);

}  // namespace morgana::runtime::cuda
