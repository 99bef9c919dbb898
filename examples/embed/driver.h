/* The few CUDA driver calls this example makes itself: a device context and device buffers. An application
 * that already uses CUDA has these; the morgana runtime only launches in whatever context is current.
 * Loaded with dlopen, like the runtime does, so the example builds without the CUDA toolkit. */
#ifndef EMBED_DRIVER_H
#define EMBED_DRIVER_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;

struct driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t bytes);
  CUresult (*cuGetErrorName)(CUresult result, const char** name);
};

/* Loads libcuda.so.1 and its entry points; returns 0, or prints why not and returns -1. */
int driver_load(struct driver* d);

/* Prints "error: WHAT: CUDA_ERROR_..." and returns -1 when r is not CUDA_SUCCESS (0), else returns 0. */
int driver_check(const struct driver* d, CUresult r, const char* what);

#endif
