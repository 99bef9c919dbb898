/* Loading the CUDA driver for the example (driver.h). */
#define _POSIX_C_SOURCE 200809L

#include "driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ISO C has no conversion from void* to a function pointer; POSIX guarantees the bytes are one. */
static int bind(void* lib, const char* name, void* slot, size_t size) {
  void* p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "error: libcuda.so.1 has no %s\n", name);
    return -1;
  }
  memcpy(slot, &p, size);
  return 0;
}

#define BIND(fn) (bind(lib, #fn, &d->fn, sizeof d->fn) == 0)

int driver_load(struct driver* d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "error: %s\n", dlerror());
    return -1;
  }
  if (!(BIND(cuInit) && BIND(cuDeviceGet) && BIND(cuDevicePrimaryCtxRetain) &&
        BIND(cuDevicePrimaryCtxRelease_v2) && BIND(cuCtxSetCurrent) && BIND(cuCtxSynchronize) &&
        BIND(cuMemAlloc_v2) && BIND(cuMemFree_v2) && BIND(cuMemcpyHtoD_v2) && BIND(cuMemcpyDtoH_v2) &&
        BIND(cuMemsetD8_v2) && BIND(cuGetErrorName)))
    return -1;
  return driver_check(d, d->cuInit(0), "cuInit");
}

int driver_check(const struct driver* d, CUresult r, const char* what) {
  const char* name = NULL;
  if (r == 0) return 0;
  if (d->cuGetErrorName == NULL || d->cuGetErrorName(r, &name) != 0 || name == NULL)
    name = "unknown CUDA error";
  fprintf(stderr, "error: %s: %s (%d)\n", what, name, r);
  return -1;
}
