// Loading the CUDA driver with dlopen and reading devices and contexts through it (cuda_driver.h).
#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>

namespace morgana::runtime::cuda {
namespace {

constexpr const char* kLibrary = "libcuda.so.1";  // the soname every NVIDIA driver installs

struct Loaded {
  Driver driver{};
  Error error;
};

// Binds `fn` to the symbol `name`. POSIX guarantees that a dlsym result converts to a function pointer.
template <typename F>
bool bind(void* lib, const char* name, F& fn) {
  void* p = dlsym(lib, name);
  fn = reinterpret_cast<F>(p);
  return p != nullptr;
}

Loaded load() {
  Loaded l;
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    l.error =
        failure(MG_ERROR_NO_DRIVER, std::string("no NVIDIA driver found (") + kLibrary +
                                        " could not be loaded: " + (why ? why : "unknown reason") + ")");
    return l;
  }
  // The library is never closed: contexts and modules the process holds live inside it.
  Driver& d = l.driver;
  const char* missing = nullptr;
  auto need = [&](const char* name, auto& fn) {
    if (!bind(lib, name, fn) && missing == nullptr) missing = name;
  };
#define MORGANA_BIND(fn) need(#fn, d.fn)
  MORGANA_BIND(cuGetErrorName);
  MORGANA_BIND(cuGetErrorString);
  MORGANA_BIND(cuInit);
  MORGANA_BIND(cuDriverGetVersion);
  MORGANA_BIND(cuDeviceGet);
  MORGANA_BIND(cuDeviceGetCount);
  MORGANA_BIND(cuDeviceGetName);
  MORGANA_BIND(cuDeviceGetAttribute);
  MORGANA_BIND(cuDeviceTotalMem_v2);
  MORGANA_BIND(cuDevicePrimaryCtxRetain);
  MORGANA_BIND(cuDevicePrimaryCtxRelease_v2);
  MORGANA_BIND(cuCtxGetCurrent);
  MORGANA_BIND(cuCtxSetCurrent);
  MORGANA_BIND(cuCtxPushCurrent_v2);
  MORGANA_BIND(cuCtxPopCurrent_v2);
  MORGANA_BIND(cuCtxGetDevice);
  MORGANA_BIND(cuCtxSynchronize);
  MORGANA_BIND(cuModuleLoadDataEx);
  MORGANA_BIND(cuModuleGetFunction);
  MORGANA_BIND(cuModuleUnload);
  MORGANA_BIND(cuFuncGetAttribute);
  MORGANA_BIND(cuFuncSetAttribute);
  MORGANA_BIND(cuLaunchKernel);
  MORGANA_BIND(cuMemAlloc_v2);
  MORGANA_BIND(cuMemFree_v2);
  MORGANA_BIND(cuMemcpyHtoD_v2);
  MORGANA_BIND(cuMemcpyDtoH_v2);
  MORGANA_BIND(cuMemsetD8_v2);
  MORGANA_BIND(cuStreamSynchronize);
  MORGANA_BIND(cuEventCreate);
  MORGANA_BIND(cuEventRecord);
  MORGANA_BIND(cuEventSynchronize);
  MORGANA_BIND(cuEventDestroy_v2);
#undef MORGANA_BIND
  if (!bind(lib, "cuEventElapsedTime_v2", d.cuEventElapsedTime))
    need("cuEventElapsedTime", d.cuEventElapsedTime);
  bind(lib, "cuCtxGetId", d.cuCtxGetId);
  bind(lib, "cuTensorMapEncodeTiled", d.cuTensorMapEncodeTiled);
  // Streams and graphs are optional as a set: has_graphs() reads the last, cleared when any is missing.
  bool graphs = true;
#define MORGANA_BIND_OPTIONAL(fn) graphs = bind(lib, #fn, d.fn) && graphs
  MORGANA_BIND_OPTIONAL(cuStreamCreate);
  MORGANA_BIND_OPTIONAL(cuStreamDestroy_v2);
  MORGANA_BIND_OPTIONAL(cuStreamBeginCapture_v2);
  MORGANA_BIND_OPTIONAL(cuStreamEndCapture);
  MORGANA_BIND_OPTIONAL(cuGraphInstantiateWithFlags);
  MORGANA_BIND_OPTIONAL(cuGraphLaunch);
  MORGANA_BIND_OPTIONAL(cuGraphExecDestroy);
  MORGANA_BIND_OPTIONAL(cuGraphDestroy);
#undef MORGANA_BIND_OPTIONAL
  if (!graphs) d.cuGraphDestroy = nullptr;
  if (missing != nullptr) {
    l.error =
        failure(MG_ERROR_NO_DRIVER, std::string("the NVIDIA driver is too old: ") + kLibrary + " has no " +
                                        missing + " (install a driver for CUDA 12 or later)");
    return l;
  }

  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    const bool no_gpu = r == CUDA_ERROR_NO_DEVICE;
    l.error = d.error(no_gpu ? MG_ERROR_NO_DEVICE : MG_ERROR_DRIVER, r,
                      no_gpu ? "no NVIDIA GPU found: cuInit" : "the NVIDIA driver failed to start: cuInit");
    return l;
  }
  if (CUresult r = d.cuDriverGetVersion(&d.version); r != CUDA_SUCCESS)
    l.error = d.error(MG_ERROR_DRIVER, r, "cuDriverGetVersion");
  return l;
}

}  // namespace

std::string Driver::result_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr)
    return "CUDA error " + std::to_string(r);
  std::string out = name;
  if (cuGetErrorString != nullptr && cuGetErrorString(r, &text) == CUDA_SUCCESS && text != nullptr)
    out += std::string(" (") + text + ")";
  return out;
}

Error Driver::error(mg_status status, CUresult r, std::string_view what) const {
  return failure(status, std::string(what) + ": " + result_text(r));
}

const Driver* load_driver(Error* error) {
  static const Loaded loaded = load();  // initialised once, thread-safe (C++ static initialisation)
  if (!loaded.error.ok()) {
    if (error != nullptr) *error = loaded.error;
    return nullptr;
  }
  return &loaded.driver;
}

Error describe_device(const Driver& d, CUdevice device, Device* out) {
  Device dev;
  dev.handle = device;
  char name[256] = {};
  if (CUresult r = d.cuDeviceGetName(name, sizeof name - 1, device); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuDeviceGetName");
  dev.name = name;
  struct {
    int attribute;
    int* value;
  } const reads[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &dev.cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &dev.cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &dev.sm_count},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &dev.warp_size},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &dev.max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &dev.max_block[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + 1, &dev.max_block[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + 2, &dev.max_block[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &dev.max_grid[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + 1, &dev.max_grid[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + 2, &dev.max_grid[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &dev.smem_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &dev.smem_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &dev.regs_per_block},
  };
  for (const auto& read : reads) {
    if (CUresult r = d.cuDeviceGetAttribute(read.value, read.attribute, device); r != CUDA_SUCCESS)
      return d.error(MG_ERROR_DRIVER, r, "cuDeviceGetAttribute(" + std::to_string(read.attribute) + ")");
  }
  // A CUdevice is an ordinal in every driver so far, but the API does not promise it: find it.
  int count = 0;
  if (d.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
    for (int i = 0; i < count; ++i) {
      CUdevice h = 0;
      if (d.cuDeviceGet(&h, i) == CUDA_SUCCESS && h == device) {
        dev.ordinal = i;
        break;
      }
    }
  }
  *out = std::move(dev);
  return {};
}

Error current_context(const Driver& d, CurrentContext* out) {
  CurrentContext c;
  if (CUresult r = d.cuCtxGetCurrent(&c.context); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuCtxGetCurrent");
  if (c.context == nullptr)
    return failure(
        MG_ERROR_NO_CONTEXT,
        "no CUDA context is current on this thread (make one current first, e.g. with cudaSetDevice "
        "or cuCtxSetCurrent)");
  if (d.cuCtxGetId != nullptr) {
    if (CUresult r = d.cuCtxGetId(c.context, &c.id); r != CUDA_SUCCESS)
      return d.error(MG_ERROR_DRIVER, r, "cuCtxGetId");
  }
  if (CUresult r = d.cuCtxGetDevice(&c.device); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuCtxGetDevice");
  *out = c;
  return {};
}

Error use_primary_context(const Driver& d, int ordinal, CUcontext* out) {
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    return failure(MG_ERROR_NO_DEVICE,
                   "no GPU " + std::to_string(ordinal) + " (the driver sees " + std::to_string(count) + ")");
  CUdevice device = 0;
  if (CUresult r = d.cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuDeviceGet");
  CUcontext ctx = nullptr;
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&ctx, device); r != CUDA_SUCCESS)
    return d.error(MG_ERROR_DRIVER, r, "cuDevicePrimaryCtxRetain");
  if (CUresult r = d.cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) {
    d.cuDevicePrimaryCtxRelease_v2(device);
    return d.error(MG_ERROR_DRIVER, r, "cuCtxSetCurrent");
  }
  *out = ctx;
  return {};
}

}  // namespace morgana::runtime::cuda
