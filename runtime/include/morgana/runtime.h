/* The morgana runtime: the whole public API, in C (C99, usable from C++).
 *
 * A program built by `morgana compile` ships as a bundle file. This library opens the bundle, sees which GPU
 * the calling thread's current CUDA context belongs to, picks the binary variant that runs there, loads it
 * lazily and launches a program's kernels, in order, on the caller's stream with the caller's device
 * pointers. It needs libc and libdl only: it dlopens libcuda.so.1 when it first needs the GPU and never links
 * it.
 *
 * Conventions (docs/runtime-api.md is the guide):
 * - Every function that can fail returns an mg_status; on failure mg_last_error() holds one line saying why.
 *   Nothing here aborts or exits the process, and no C++ exception leaves the library.
 * - Strings and pointers the library returns stay valid until the bundle they came from is closed.
 * - A bundle may be used from many threads at once; only mg_bundle_close must not race with other calls on
 *   the same bundle.
 */
#ifndef MORGANA_RUNTIME_H
#define MORGANA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a function, struct or enum of this header changes incompatibly. */
#define MG_RUNTIME_API_VERSION 1

#if defined(__GNUC__)
#define MG_API __attribute__((visibility("default")))
#else
#define MG_API
#endif

/* The outcome of a call. The values are fixed; new codes may be added, so treat any value other than MG_OK as
 * a failure. */
typedef enum mg_status {
  MG_OK = 0,
  MG_ERROR_INVALID_ARGUMENT = 1, /* a NULL pointer, an index out of range, the wrong number of arguments */
  MG_ERROR_IO = 2,               /* the bundle file could not be read */
  MG_ERROR_BAD_BUNDLE = 3,       /* the bundle is damaged or breaks a rule of docs/bundle-format.md */
  MG_ERROR_NO_DRIVER = 4,        /* libcuda.so.1 could not be loaded, or it lacks an entry point */
  MG_ERROR_NO_DEVICE = 5,        /* the driver sees no GPU, or the device ordinal is out of range */
  MG_ERROR_NO_CONTEXT = 6,       /* no CUDA context is current on the calling thread */
  MG_ERROR_NO_VARIANT = 7,       /* the bundle has no code that runs on this GPU */
  MG_ERROR_NOT_FOUND = 8,        /* no program of that name */
  MG_ERROR_RESOURCES = 9,        /* a kernel needs more shared memory, threads or grid than the GPU has */
  MG_ERROR_DRIVER = 10,          /* a driver call failed; the message names the call and the CUDA error */
  MG_ERROR_LAUNCH = 11,          /* cuLaunchKernel refused a kernel */
  MG_ERROR_OUT_OF_MEMORY = 12,   /* host memory ran out */
  MG_ERROR_INTERNAL = 13         /* a bug in the runtime; the message says where */
} mg_status;

typedef enum mg_dtype { MG_DTYPE_F16 = 1, MG_DTYPE_BF16 = 2, MG_DTYPE_F32 = 3 } mg_dtype;
typedef enum mg_role { MG_ROLE_INPUT = 1, MG_ROLE_OUTPUT = 2, MG_ROLE_WORKSPACE = 3 } mg_role;
/* cubin: SASS for one sm_XY; ptx: PTX for compute_XY, compiled by the driver at load; hsaco: AMDGPU code. */
typedef enum mg_variant_kind {
  MG_VARIANT_CUBIN = 1,
  MG_VARIANT_PTX = 2,
  MG_VARIANT_HSACO = 3
} mg_variant_kind;
typedef enum mg_vendor { MG_VENDOR_NVIDIA = 1, MG_VENDOR_AMD = 2 } mg_vendor;

#define MG_MAX_RANK 8

/* An open bundle, and one program in it (owned by the bundle). */
typedef struct mg_bundle mg_bundle;
typedef struct mg_program mg_program;

/* A program: what a caller launches by name. Its parameters are its inputs, then its outputs, then (when
 * workspace_bytes > 0) one workspace parameter; launch arguments are the inputs and outputs in that order and
 * the workspace is passed on its own. */
typedef struct mg_program_info {
  const char* name;
  const char* mugraph;      /* the μGraph it was lowered from (UTF-8 text), for inspection */
  size_t num_inputs;        /* args[0 .. num_inputs) */
  size_t num_outputs;       /* args[num_inputs .. num_inputs + num_outputs) */
  size_t num_params;        /* num_inputs + num_outputs, plus 1 when workspace_bytes > 0 */
  uint64_t workspace_bytes; /* the size of the scratch buffer every launch needs; 0 for none */
  size_t num_kernels;       /* launched in order on one stream */
  size_t num_variants;      /* code objects holding its kernels (see mg_program_variant) */
} mg_program_info;

/* One parameter. Shapes and strides count elements. The role and dtype values are the bundle format's. */
typedef struct mg_param_info {
  const char* name;
  mg_role role;
  mg_dtype dtype;
  uint32_t rank; /* 0 ..= MG_MAX_RANK; shape and strides hold `rank` entries */
  int64_t shape[MG_MAX_RANK];
  int64_t strides[MG_MAX_RANK];
  /* Bytes from the first element to the end of the last: the smallest buffer that holds the tensor. */
  uint64_t span_bytes;
} mg_param_info;

typedef struct mg_variant_info {
  const char* target; /* the target file it was compiled for, e.g. "h200" */
  mg_variant_kind kind;
  const char* arch; /* "sm_90a", "compute_80", "gfx942:sramecc+:xnack-" */
  uint64_t payload_bytes;
} mg_variant_info;

typedef struct mg_device_info {
  mg_vendor vendor;
  int ordinal;
  char name[256];         /* "NVIDIA H200" */
  char arch[64];          /* what a bundle's code must match: "sm_90" on NVIDIA */
  int cc_major, cc_minor; /* NVIDIA compute capability */
  int sm_count;
  int max_threads_per_block;
  int smem_per_block;       /* shared memory a block gets without opting in (48 KiB on current GPUs) */
  int smem_per_block_optin; /* the most a block can opt in to; the runtime opts in when a kernel needs it */
  int driver_version;       /* the CUDA version the driver supports, e.g. 13000 */
} mg_device_info;

/* ---- errors ---- */

/* "MG_ERROR_NO_DRIVER"; "MG_STATUS_UNKNOWN" for a value not in mg_status. Never NULL. */
MG_API const char* mg_status_name(mg_status status);

/* The message of the most recent failed call on this thread (successful calls leave it alone); "" before the
 * first failure. Never NULL; valid until the next failing call on this thread. */
MG_API const char* mg_last_error(void);

/* MG_RUNTIME_API_VERSION of the library actually loaded, to compare with the header's. */
MG_API int mg_runtime_api_version(void);

/* ---- bundles (no GPU or driver needed) ---- */

/* Reads and checks a bundle file. On failure *out is NULL. */
MG_API mg_status mg_bundle_open(const char* path, mg_bundle** out);

/* The same from bytes in memory; the bytes are copied, so the caller may free them when this returns. */
MG_API mg_status mg_bundle_open_memory(const void* data, size_t size, mg_bundle** out);

/* Unloads the modules this bundle loaded (in contexts that are still alive) and frees it. NULL is allowed.
 * Every mg_program and string taken from the bundle becomes invalid. */
MG_API void mg_bundle_close(mg_bundle* bundle);

MG_API size_t mg_bundle_program_count(const mg_bundle* bundle);

/* The index-th program in bundle order. A name appears more than once when each copy serves other GPUs. */
MG_API mg_status mg_bundle_program(const mg_bundle* bundle, size_t index, const mg_program** out);

MG_API mg_status mg_program_describe(const mg_program* program, mg_program_info* out);
MG_API mg_status mg_program_param(const mg_program* program, size_t index, mg_param_info* out);
MG_API mg_status mg_program_variant(const mg_program* program, size_t index, mg_variant_info* out);

/* ---- on the GPU of the calling thread's current CUDA context ---- */

/* The program called `name` that runs on the current context's GPU: of the programs with that name, the one
 * holding the best variant for the device (docs/runtime-api.md, "Choosing the code"). MG_ERROR_NOT_FOUND when
 * no program has the name, MG_ERROR_NO_VARIANT when none runs here. */
MG_API mg_status mg_bundle_select_program(mg_bundle* bundle, const char* name, const mg_program** out);

/* Loads the program's code for the current context now rather than at its first launch (a PTX variant is
 * compiled by the driver then, which can take tens of milliseconds) and checks its kernels against the
 * device. When `variant` is not NULL it receives the index (for mg_program_variant) of the variant chosen. */
MG_API mg_status mg_program_prepare(const mg_program* program, size_t* variant);

/* Launches the program's kernels in order on `stream` (a CUstream of the current context; NULL is the
 * context's default stream). args[i] is the device pointer (a CUdeviceptr cast to void*) of parameter i, for
 * the num_inputs + num_outputs inputs and outputs; `workspace` is a device buffer of at least
 * workspace_bytes, or NULL when the program needs none. Every buffer must start at a multiple of 16 bytes
 * (cudaMalloc and PyTorch give 256): the kernels move 16 bytes per access; MG_ERROR_INVALID_ARGUMENT otherwise. Returns once the kernels are queued; the buffers must
 * stay alive until they have run. The first launch in a context loads the code (see mg_program_prepare). */
MG_API mg_status mg_program_launch(const mg_program* program, void* stream, void* const* args, size_t nargs,
                                   void* workspace);

/* mg_bundle_select_program, then mg_program_launch. */
MG_API mg_status mg_bundle_launch(mg_bundle* bundle, const char* name, void* stream, void* const* args,
                                  size_t nargs, void* workspace);

/* ---- devices ---- */

/* The number of GPUs the driver sees (loads the driver on first use). */
MG_API mg_status mg_device_count(int* count);

/* What the runtime knows of device `ordinal`, or of the current context's device when `ordinal` is -1. */
MG_API mg_status mg_device_describe(int ordinal, mg_device_info* out);

#ifdef __cplusplus
}
#endif

#endif /* MORGANA_RUNTIME_H */
