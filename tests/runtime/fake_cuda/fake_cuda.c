/* A fake CUDA driver for the runtime's tests: built as libcuda.so.1 in a folder of its own, found through
 * LD_LIBRARY_PATH, it implements the entry points the runtime dlsyms with host memory and a text "code
 * object", so that selection, lazy loading, shared-memory opt-in, resource checks, launches and unloading are
 * tested on a machine without a GPU.
 *
 * Devices come from MG_FAKE_DEVICES, a comma-separated list of compute capabilities ("8.0,9.0"; default
 * "9.0"; empty: no GPU, cuInit fails with CUDA_ERROR_NO_DEVICE). Each gets the attributes of a real GPU of
 * that capability (table below), which fake_cuda_set_attribute() can override.
 *
 * A code object is NUL-terminated text:
 *   fake sm_90a                                   first line: the arch it claims to be
 *   func NAME [params=N] [regs=N] [smem=N] [maxthreads=N] [impl=add_f32|add_f32_bad] [n=N] [launch_result=N]
 *   fail CODE MESSAGE                             cuModuleLoadDataEx fails with CODE and MESSAGE as JIT log
 * A function with impl= computes on the (host) buffers when launched: out[i] = a[i] + b[i] for i < n, the
 * _bad one gets element 0 wrong, so that a caller's check can be seen to catch a wrong result.
 *
 * Calls that matter to the tests are recorded as lines of text: fake_cuda_log() returns them.
 * Like the real driver, every entry point but the error-string ones fails with CUDA_ERROR_NOT_INITIALIZED
 * before cuInit. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_IMAGE = 200,
  INVALID_CONTEXT = 201,
  NO_BINARY_FOR_GPU = 209,
  INVALID_PTX = 218,
  INVALID_HANDLE = 400,
  NOT_FOUND = 500,
  LAUNCH_OUT_OF_RESOURCES = 701,
  CONTEXT_IS_DESTROYED = 709
};

#define MAX_DEVICES 8
#define MAX_FUNCS 16
#define MAX_ATTR 128

struct context {
  int device;
  int refs;
  int alive;
  unsigned long long id;
};

struct function {
  char name[64];
  int params, regs, smem, maxthreads, max_dynamic, n;
  int launch_result; /* what cuLaunchKernel returns: a launch failure on demand */
  char impl[64];
  struct module* module;
};

struct module {
  struct context* ctx;
  unsigned long long ctx_id;
  char arch[64];
  int nfuncs;
  struct function funcs[MAX_FUNCS];
  struct module* next;
};

struct event {
  double ms;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int device_count;
static char device_names[MAX_DEVICES][64];
static int attrs[MAX_DEVICES][MAX_ATTR];
static struct context contexts[MAX_DEVICES];
static unsigned long long next_context_id = 100;
static struct module* modules; /* every module not yet unloaded */
static char* log_text;
static size_t log_len, log_cap;

static __thread struct context* current;
static __thread struct context* stack[16];
static __thread int stack_depth;

/* ---- the log ---- */

static void record(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  pthread_mutex_lock(&mu);
  if (log_len + (size_t)n + 1 > log_cap) {
    size_t cap = (log_cap + (size_t)n + 1) * 2;
    char* grown = realloc(log_text, cap);
    if (grown == NULL) {
      pthread_mutex_unlock(&mu);
      return;
    }
    log_text = grown;
    log_cap = cap;
  }
  memcpy(log_text + log_len, line, (size_t)n);
  log_len += (size_t)n;
  log_text[log_len] = 0;
  pthread_mutex_unlock(&mu);
}

/* Copies the log (NUL-terminated, cut to cap - 1 bytes) and returns its full length. */
size_t fake_cuda_log(char* buf, size_t cap) {
  pthread_mutex_lock(&mu);
  size_t len = log_len;
  if (buf != NULL && cap > 0) {
    size_t n = len < cap - 1 ? len : cap - 1;
    if (n > 0) memcpy(buf, log_text, n);
    buf[n] = 0;
  }
  pthread_mutex_unlock(&mu);
  return len;
}

void fake_cuda_clear_log(void) {
  pthread_mutex_lock(&mu);
  log_len = 0;
  if (log_text != NULL) log_text[0] = 0;
  pthread_mutex_unlock(&mu);
}

void fake_cuda_set_attribute(int ordinal, int attribute, int value) {
  if (ordinal >= 0 && ordinal < MAX_DEVICES && attribute >= 0 && attribute < MAX_ATTR)
    attrs[ordinal][attribute] = value;
}

/* ---- devices ---- */

struct known_gpu {
  int major, minor;
  const char* name;
  int sms, optin;
};

/* Real GPUs of each capability: SM count and opt-in shared memory per block. */
static const struct known_gpu known[] = {
    {8, 0, "NVIDIA A100-SXM4-80GB", 108, 166912},
    {8, 6, "NVIDIA GeForce RTX 3090", 82, 101376},
    {8, 9, "NVIDIA L40S", 142, 101376},
    {9, 0, "NVIDIA H200", 132, 232448},
    {12, 0, "NVIDIA GeForce RTX 5090", 170, 101376},
};

static void add_device(int major, int minor) {
  if (device_count >= MAX_DEVICES) return;
  int d = device_count++;
  int* a = attrs[d];
  snprintf(device_names[d], sizeof device_names[d], "Fake GPU %d.%d", major, minor);
  a[1] = 1024;                                   /* max threads per block */
  a[2] = 1024, a[3] = 1024, a[4] = 64;           /* max block dims */
  a[5] = 2147483647, a[6] = 65535, a[7] = 65535; /* max grid dims */
  a[8] = 49152;                                  /* shared memory per block without opting in */
  a[10] = 32;                                    /* warp size */
  a[12] = 65536;                                 /* registers per block */
  a[16] = 16;                                    /* SMs */
  a[75] = major, a[76] = minor;
  a[97] = 49152; /* opt-in limit */
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i) {
    if (known[i].major == major && known[i].minor == minor) {
      snprintf(device_names[d], sizeof device_names[d], "%s", known[i].name);
      a[16] = known[i].sms;
      a[97] = known[i].optin;
    }
  }
  contexts[d].device = d;
}

/* NVRTC (CUDA 13) dlopens whatever libcuda.so.1 the process finds, calls cuInit and then asks for the driver's
 * private export table; a driver without this entry point crashes it. Saying "not supported" (801) lets it carry
 * on without the driver, as it does on a machine with none, so that compiling still works beside the fake. */
CUresult cuGetExportTable(const void** table, const void* id) {
  (void)id;
  if (table) *table = NULL;
  return 801;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  const char* forced = getenv("MG_FAKE_INIT_RESULT");
  if (forced != NULL) return atoi(forced);
  pthread_mutex_lock(&mu);
  if (!initialized) {
    const char* list = getenv("MG_FAKE_DEVICES");
    if (list == NULL) list = "9.0";
    while (*list != 0) {
      int major = 0, minor = 0, used = 0;
      if (sscanf(list, "%d.%d%n", &major, &minor, &used) != 2) break;
      add_device(major, minor);
      list += used;
      if (*list == ',') ++list;
    }
    initialized = 1;
  }
  int count = device_count;
  pthread_mutex_unlock(&mu);
  record("init devices=%d", count);
  return count == 0 ? NO_DEVICE : SUCCESS;
}

#define NEED_INIT()                                                \
  do {                                                             \
    if (!initialized || device_count == 0) return NOT_INITIALIZED; \
  } while (0)

CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  NEED_INIT();
  *count = device_count;
  return SUCCESS;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  NEED_INIT();
  if (ordinal < 0 || ordinal >= device_count) return INVALID_DEVICE;
  *d = ordinal;
  return SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  NEED_INIT();
  if (d < 0 || d >= device_count) return INVALID_DEVICE;
  snprintf(name, (size_t)len, "%s", device_names[d]);
  return SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice d) {
  NEED_INIT();
  if (d < 0 || d >= device_count) return INVALID_DEVICE;
  if (attribute < 0 || attribute >= MAX_ATTR) return INVALID_VALUE;
  *value = attrs[d][attribute];
  return SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  NEED_INIT();
  (void)d;
  *bytes = (size_t)80 << 30;
  return SUCCESS;
}

/* ---- contexts: one primary context per device; releasing the last reference destroys it ---- */

static void destroy_modules_of(struct context* c) {
  struct module** m = &modules;
  while (*m != NULL) {
    if ((*m)->ctx == c) {
      struct module* dead = *m;
      *m = dead->next;
      free(dead);
    } else {
      m = &(*m)->next;
    }
  }
}

CUresult cuDevicePrimaryCtxRetain(struct context** out, CUdevice d) {
  NEED_INIT();
  if (d < 0 || d >= device_count) return INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  struct context* c = &contexts[d];
  if (c->refs++ == 0) {
    c->alive = 1;
    c->id = next_context_id++; /* the handle stays, the id is new: as with the real driver */
  }
  unsigned long long id = c->id;
  pthread_mutex_unlock(&mu);
  *out = c;
  record("retain device=%d ctx=%llu", d, id);
  return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  NEED_INIT();
  if (d < 0 || d >= device_count) return INVALID_DEVICE;
  pthread_mutex_lock(&mu);
  struct context* c = &contexts[d];
  if (c->refs > 0 && --c->refs == 0) {
    c->alive = 0;
    destroy_modules_of(c);
  }
  pthread_mutex_unlock(&mu);
  record("release device=%d", d);
  return SUCCESS;
}

CUresult cuCtxSetCurrent(struct context* c) {
  NEED_INIT();
  current = c;
  return SUCCESS;
}

CUresult cuCtxGetCurrent(struct context** c) {
  NEED_INIT();
  *c = current;
  return SUCCESS;
}

CUresult cuCtxPushCurrent_v2(struct context* c) {
  NEED_INIT();
  if (c == NULL || !c->alive) return INVALID_CONTEXT;
  if (stack_depth >= 16) return INVALID_VALUE;
  stack[stack_depth++] = current;
  current = c;
  return SUCCESS;
}

CUresult cuCtxPopCurrent_v2(struct context** c) {
  NEED_INIT();
  if (stack_depth == 0) return INVALID_CONTEXT;
  if (c != NULL) *c = current;
  current = stack[--stack_depth];
  return SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* d) {
  NEED_INIT();
  if (current == NULL || !current->alive) return INVALID_CONTEXT;
  *d = current->device;
  return SUCCESS;
}

CUresult cuCtxGetId(struct context* c, unsigned long long* id) {
  NEED_INIT();
  if (c == NULL) return INVALID_CONTEXT;
  if (!c->alive) return CONTEXT_IS_DESTROYED;
  *id = c->id;
  return SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  NEED_INIT();
  return current != NULL && current->alive ? SUCCESS : INVALID_CONTEXT;
}

/* ---- modules and functions ---- */

static int parse_function(const char* line, struct function* f) {
  memset(f, 0, sizeof *f);
  f->maxthreads = 1024;
  f->regs = 32;
  f->n = 0;
  int used = 0;
  if (sscanf(line, "func %63s%n", f->name, &used) != 1) return 0;
  const char* p = line + used;
  char key[32], value[64];
  while (sscanf(p, " %31[^=]=%63s%n", key, value, &used) == 2) {
    p += used;
    if (strcmp(key, "params") == 0)
      f->params = atoi(value);
    else if (strcmp(key, "regs") == 0)
      f->regs = atoi(value);
    else if (strcmp(key, "smem") == 0)
      f->smem = atoi(value);
    else if (strcmp(key, "maxthreads") == 0)
      f->maxthreads = atoi(value);
    else if (strcmp(key, "n") == 0)
      f->n = atoi(value);
    else if (strcmp(key, "launch_result") == 0)
      f->launch_result = atoi(value);
    else if (strcmp(key, "impl") == 0)
      snprintf(f->impl, sizeof f->impl, "%s", value);
    else
      return 0;
  }
  return 1;
}

CUresult cuModuleLoadDataEx(struct module** out, const void* image, unsigned n, int* options, void** values) {
  NEED_INIT();
  struct context* c = current;
  if (c == NULL || !c->alive) return INVALID_CONTEXT;
  char* log = NULL;
  size_t log_size = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == 5) log = values[i];
    if (options[i] == 6) log_size = (size_t)(uintptr_t)values[i];
  }
  /* Read as a C string, as the driver reads PTX: an image without its NUL runs off its end (ASan sees it). */
  char* text = strdup(image);
  if (text == NULL) return OUT_OF_MEMORY;
  struct module* m = calloc(1, sizeof *m);
  if (m == NULL) {
    free(text);
    return OUT_OF_MEMORY;
  }
  CUresult result = SUCCESS;
  char* save = NULL;
  char* line = strtok_r(text, "\n", &save);
  if (line == NULL || sscanf(line, "fake %63s", m->arch) != 1) result = INVALID_IMAGE;
  while (result == SUCCESS && (line = strtok_r(NULL, "\n", &save)) != NULL) {
    int code = 0, used = 0;
    if (sscanf(line, "fail %d %n", &code, &used) == 1) {
      if (log != NULL && log_size > 0) snprintf(log, log_size, "%s", line + used);
      result = code;
    } else if (strncmp(line, "func ", 5) == 0 && m->nfuncs < MAX_FUNCS) {
      struct function* f = &m->funcs[m->nfuncs++];
      if (!parse_function(line, f)) result = INVALID_IMAGE;
      f->module = m;
      f->max_dynamic = attrs[c->device][8] - f->smem;
    }
  }
  record("load %s device=%d ctx=%llu result=%d", m->arch[0] ? m->arch : "?", c->device, c->id, result);
  free(text);
  if (result != SUCCESS) {
    free(m);
    return result;
  }
  m->ctx = c;
  m->ctx_id = c->id;
  pthread_mutex_lock(&mu);
  m->next = modules;
  modules = m;
  pthread_mutex_unlock(&mu);
  *out = m;
  return SUCCESS;
}

static int is_loaded(const struct module* m) {
  for (const struct module* it = modules; it != NULL; it = it->next)
    if (it == m) return 1;
  return 0;
}

CUresult cuModuleUnload(struct module* m) {
  NEED_INIT();
  pthread_mutex_lock(&mu);
  int loaded = is_loaded(m);
  CUresult result = SUCCESS;
  char arch[64] = "?";
  unsigned long long id = 0;
  if (!loaded) {
    result = INVALID_HANDLE;
  } else if (current != m->ctx) {
    result = INVALID_CONTEXT; /* unloading belongs in the module's context */
  } else {
    snprintf(arch, sizeof arch, "%s", m->arch);
    id = m->ctx_id;
    struct module** p = &modules;
    while (*p != m) p = &(*p)->next;
    *p = m->next;
    free(m);
  }
  pthread_mutex_unlock(&mu);
  record("unload %s ctx=%llu result=%d", arch, id, result);
  return result;
}

CUresult cuModuleGetFunction(struct function** out, struct module* m, const char* name) {
  NEED_INIT();
  pthread_mutex_lock(&mu);
  CUresult result = is_loaded(m) ? NOT_FOUND : INVALID_HANDLE;
  for (int i = 0; result == NOT_FOUND && i < m->nfuncs; ++i) {
    if (strcmp(m->funcs[i].name, name) == 0) {
      *out = &m->funcs[i];
      result = SUCCESS;
    }
  }
  pthread_mutex_unlock(&mu);
  return result;
}

CUresult cuFuncGetAttribute(int* value, int attribute, struct function* f) {
  NEED_INIT();
  switch (attribute) {
    case 0:
      *value = f->maxthreads;
      return SUCCESS;
    case 1:
      *value = f->smem;
      return SUCCESS;
    case 4:
      *value = f->regs;
      return SUCCESS;
    case 8:
      *value = f->max_dynamic;
      return SUCCESS;
    default:
      return INVALID_VALUE;
  }
}

CUresult cuFuncSetAttribute(struct function* f, int attribute, int value) {
  NEED_INIT();
  record("setattr %s attr=%d value=%d", f->name, attribute, value);
  if (attribute != 8) return INVALID_VALUE;
  const int* a = attrs[f->module->ctx->device];
  if (value < 0 || value + f->smem > a[97]) return INVALID_VALUE;
  f->max_dynamic = value;
  return SUCCESS;
}

static void run_impl(const struct function* f, void** params) {
  if (f->params < 3) return;
  const float* a = (const float*)(uintptr_t)(*(CUdeviceptr*)params[0]);
  const float* b = (const float*)(uintptr_t)(*(CUdeviceptr*)params[1]);
  float* out = (float*)(uintptr_t)(*(CUdeviceptr*)params[2]);
  for (int i = 0; i < f->n; ++i) out[i] = a[i] + b[i];
  if (strcmp(f->impl, "add_f32_bad") == 0 && f->n > 0) out[0] += 1.0f;
}

CUresult cuLaunchKernel(struct function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void* stream, void** params, void** extra) {
  NEED_INIT();
  (void)extra;
  struct context* c = current;
  if (c == NULL || !c->alive) return INVALID_CONTEXT;
  pthread_mutex_lock(&mu);
  int loaded = is_loaded(f->module);
  pthread_mutex_unlock(&mu);
  if (!loaded) return INVALID_HANDLE;
  if (f->module->ctx != c) return INVALID_CONTEXT;
  const int* a = attrs[c->device];
  unsigned long long threads = (unsigned long long)bx * by * bz;
  if (threads > (unsigned long long)f->maxthreads || threads > (unsigned long long)a[1])
    return LAUNCH_OUT_OF_RESOURCES;
  if ((int)smem > f->max_dynamic) return INVALID_VALUE; /* more dynamic shared memory than opted in to */
  if (f->launch_result != 0) return f->launch_result;

  char args[512] = "";
  size_t used = 0;
  for (int i = 0; i < f->params && used < sizeof args - 24; ++i)
    used +=
        (size_t)snprintf(args + used, sizeof args - used, "%s%llx", i ? "," : "", *(CUdeviceptr*)params[i]);
  record("launch %s ctx=%llu grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%llx args=%s", f->name, c->id, gx,
         gy, gz, bx, by, bz, smem, (unsigned long long)(uintptr_t)stream, args);
  if (f->impl[0] != 0) run_impl(f, params);
  return SUCCESS;
}

/* ---- the copy engine's tensor maps: checked like the driver's, recorded, and the address kept in the map ---- */

CUresult cuTensorMapEncodeTiled(unsigned long long* map, int type, unsigned rank, void* address,
                                const unsigned long long* dims, const unsigned long long* strides,
                                const unsigned* box, const unsigned* element_strides, int interleave, int swizzle,
                                int l2, int oob) {
  NEED_INIT();
  if (map == NULL || ((uintptr_t)map & 63) != 0 || rank < 1 || rank > 5 || ((uintptr_t)address & 15) != 0)
    return INVALID_VALUE;
  char text[512];
  size_t used = (size_t)snprintf(text, sizeof text, "tensormap type=%d rank=%u dims=", type, rank);
  for (unsigned i = 0; i < rank; ++i) {
    if (box[i] < 1 || box[i] > 256 || element_strides[i] != 1) return INVALID_VALUE;
    if (i > 0 && (strides[i - 1] & 15) != 0) return INVALID_VALUE;
    used += (size_t)snprintf(text + used, sizeof text - used, "%s%llu", i ? "," : "", dims[i]);
  }
  used += (size_t)snprintf(text + used, sizeof text - used, " strides=");
  for (unsigned i = 0; i + 1 < rank; ++i)
    used += (size_t)snprintf(text + used, sizeof text - used, "%s%llu", i ? "," : "", strides[i]);
  used += (size_t)snprintf(text + used, sizeof text - used, " box=");
  for (unsigned i = 0; i < rank; ++i)
    used += (size_t)snprintf(text + used, sizeof text - used, "%s%u", i ? "," : "", box[i]);
  snprintf(text + used, sizeof text - used, " swizzle=%d interleave=%d l2=%d oob=%d", swizzle, interleave, l2, oob);
  record("%s", text);
  memset(map, 0, 128);
  map[0] = (unsigned long long)(uintptr_t)address;
  return SUCCESS;
}

/* ---- memory, streams, events: host memory and immediate completion ---- */

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  NEED_INIT();
  if (current == NULL) return INVALID_CONTEXT;
  void* mem = calloc(1, bytes ? bytes : 1);
  if (mem == NULL) return OUT_OF_MEMORY;
  *p = (CUdeviceptr)(uintptr_t)mem;
  return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_INIT();
  free((void*)(uintptr_t)p);
  return SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  NEED_INIT();
  memcpy((void*)(uintptr_t)dst, src, bytes);
  return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  NEED_INIT();
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t bytes) {
  NEED_INIT();
  memset((void*)(uintptr_t)dst, value, bytes);
  return SUCCESS;
}

CUresult cuStreamSynchronize(void* stream) {
  NEED_INIT();
  (void)stream;
  return SUCCESS;
}

CUresult cuEventCreate(struct event** e, unsigned flags) {
  NEED_INIT();
  (void)flags;
  *e = calloc(1, sizeof **e);
  return *e != NULL ? SUCCESS : OUT_OF_MEMORY;
}

CUresult cuEventRecord(struct event* e, void* stream) {
  NEED_INIT();
  (void)stream;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  e->ms = (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
  return SUCCESS;
}

CUresult cuEventSynchronize(struct event* e) {
  NEED_INIT();
  (void)e;
  return SUCCESS;
}

CUresult cuEventElapsedTime_v2(float* ms, struct event* start, struct event* end) {
  NEED_INIT();
  *ms = (float)(end->ms - start->ms);
  return SUCCESS;
}

CUresult cuEventDestroy_v2(struct event* e) {
  NEED_INIT();
  free(e);
  return SUCCESS;
}

/* ---- error strings ---- */

static const struct {
  CUresult code;
  const char* name;
  const char* text;
} errors[] = {
    {SUCCESS, "CUDA_SUCCESS", "no error"},
    {INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
};

static CUresult lookup(CUresult code, const char** out, int text) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; ++i) {
    if (errors[i].code == code) {
      *out = text ? errors[i].text : errors[i].name;
      return SUCCESS;
    }
  }
  *out = NULL;
  return INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult code, const char** out) {
  return lookup(code, out, 0);
}

CUresult cuGetErrorString(CUresult code, const char** out) {
  return lookup(code, out, 1);
}
