/* Embedding the morgana runtime in a C program: open a bundle, list its programs, run one on the GPU with
 * buffers this program owns, and check the result against a CPU computation (examples/embed/README.md).
 *
 *   embed BUNDLE                  list the programs and their parameters
 *   embed BUNDLE --program NAME   also run NAME on GPU 0 (--device N for another) and check or summarise it
 *
 * Exit status: 0 success, 1 an error (printed with the runtime's message) or a result that does not match. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <morgana/runtime.h>

#include "driver.h"
#include "reference.h"

#define MAX_PARAMS 256

static const char* dtype_name(mg_dtype d) {
  return d == MG_DTYPE_F16 ? "f16" : d == MG_DTYPE_BF16 ? "bf16" : "f32";
}

static const char* role_name(mg_role r) {
  return r == MG_ROLE_INPUT ? "input" : r == MG_ROLE_OUTPUT ? "output" : "workspace";
}

static const char* kind_name(mg_variant_kind k) {
  return k == MG_VARIANT_CUBIN ? "cubin" : k == MG_VARIANT_PTX ? "ptx" : "hsaco";
}

static size_t element_bytes(mg_dtype d) {
  return d == MG_DTYPE_F32 ? 4 : 2;
}

/* Prints the runtime's message for a failed call and returns 1 (the exit status). */
static int fail(mg_status s) {
  fprintf(stderr, "error: %s (%s)\n", mg_last_error(), mg_status_name(s));
  return 1;
}

static void print_dims(const int64_t* v, uint32_t rank) {
  printf("[");
  for (uint32_t i = 0; i < rank; ++i) printf("%s%lld", i ? ", " : "", (long long)v[i]);
  printf("]");
}

static int list_programs(const mg_bundle* bundle) {
  size_t n = mg_bundle_program_count(bundle);
  for (size_t p = 0; p < n; ++p) {
    const mg_program* program;
    mg_program_info info;
    mg_status s = mg_bundle_program(bundle, p, &program);
    if (s == MG_OK) s = mg_program_describe(program, &info);
    if (s != MG_OK) return fail(s);
    printf("program %s: %zu kernel(s), workspace %llu bytes, code:", info.name, info.num_kernels,
           (unsigned long long)info.workspace_bytes);
    for (size_t v = 0; v < info.num_variants; ++v) {
      mg_variant_info variant;
      if ((s = mg_program_variant(program, v, &variant)) != MG_OK) return fail(s);
      printf("%s %s %s (%s)", v ? "," : "", kind_name(variant.kind), variant.arch, variant.target);
    }
    printf("\n");
    for (size_t i = 0; i < info.num_params; ++i) {
      mg_param_info param;
      if ((s = mg_program_param(program, i, &param)) != MG_OK) return fail(s);
      printf("  %-9s %s %s", role_name(param.role), param.name, dtype_name(param.dtype));
      print_dims(param.shape, param.rank);
      printf(" strides ");
      print_dims(param.strides, param.rank);
      printf("\n");
    }
  }
  return 0;
}

/* Deterministic values in [-1, 1): the same inputs on every run and machine (xorshift64*). */
static float next_random(uint64_t* state) {
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  uint64_t r = *state * 0x2545f4914f6cdd1dull;
  return (float)((double)(r >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* One parameter's buffers: on the device, and as floats on the host. */
struct buffer {
  mg_param_info info;
  CUdeviceptr device;
  struct tensor host;
};

static float decode(mg_dtype d, const unsigned char* p) {
  uint16_t h;
  float f;
  if (d == MG_DTYPE_F32) {
    memcpy(&f, p, 4);
    return f;
  }
  memcpy(&h, p, 2);
  return d == MG_DTYPE_F16 ? half_to_float(h) : bf16_to_float(h);
}

static void encode(mg_dtype d, float f, unsigned char* p) {
  uint16_t h;
  if (d == MG_DTYPE_F32) {
    memcpy(p, &f, 4);
    return;
  }
  h = d == MG_DTYPE_F16 ? float_to_half(f) : float_to_bf16(f);
  memcpy(p, &h, 2);
}

/* Compares an output with its reference: |got - want| <= tolerance * max(1, max |want|), since the GPU sums
 * in another order and rounds the result to the output's type. */
static int check(const struct buffer* out, const struct tensor* want, const char* reference) {
  double tolerance = out->info.dtype == MG_DTYPE_F32 ? 1e-3 : out->info.dtype == MG_DTYPE_F16 ? 1e-2 : 3e-2;
  double scale = 1.0, worst = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < want->count; ++i)
    if (fabs(want->values[i]) > scale) scale = fabs(want->values[i]);
  for (size_t i = 0; i < want->count; ++i) {
    double err = fabs((double)out->host.values[i] - want->values[i]);
    if (!(err <= tolerance * scale)) { /* also catches NaN: an element the program never wrote */
      ++bad;
      if (isnan(err) || err > worst) worst = isnan(err) ? INFINITY : err;
    } else if (err > worst) {
      worst = err;
    }
  }
  printf("output %s: %s reference, max abs error %.3g (tolerance %.3g): %s\n", out->info.name, reference,
         worst, tolerance * scale, bad == 0 ? "OK" : "MISMATCH");
  if (bad > 0) printf("  %zu of %zu elements differ\n", bad, want->count);
  return bad == 0 ? 0 : 1;
}

static void checksum(const struct buffer* out) {
  double sum = 0, abs_sum = 0;
  for (size_t i = 0; i < out->host.count; ++i) {
    sum += out->host.values[i];
    abs_sum += fabs(out->host.values[i]);
  }
  printf("output %s: no CPU reference for this program; sum %.6g, sum of |x| %.6g\n", out->info.name, sum,
         abs_sum);
}

/* Runs `name` on the current context's GPU with fresh buffers, then checks or summarises its outputs. */
static int run(const struct driver* d, mg_bundle* bundle, const char* name) {
  const mg_program* program;
  mg_program_info info;
  mg_variant_info variant;
  size_t chosen = 0;
  mg_status s = mg_bundle_select_program(bundle, name, &program);
  if (s == MG_OK) s = mg_program_describe(program, &info);
  if (s == MG_OK) s = mg_program_prepare(program, &chosen); /* load the code before making buffers */
  if (s == MG_OK) s = mg_program_variant(program, chosen, &variant);
  if (s != MG_OK) return fail(s);
  printf("running %s with %s %s (built for %s)\n", info.name, kind_name(variant.kind), variant.arch,
         variant.target);

  /* Static: bookkeeping for MAX_PARAMS parameters is about 100 KB, too much for a small stack. */
  static struct buffer buffers[MAX_PARAMS];
  static struct tensor inputs[MAX_PARAMS], expected[MAX_PARAMS];
  static void* args[MAX_PARAMS];
  size_t n = 0, first_out = info.num_inputs;
  int status = 1;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  memset(buffers, 0, sizeof buffers);
  memset(expected, 0, sizeof expected);
  if (info.num_params > MAX_PARAMS) {
    fprintf(stderr, "error: %zu parameters, this example handles %d\n", info.num_params, MAX_PARAMS);
    return 1;
  }
  for (; n < info.num_params; ++n) {
    struct buffer* b = &buffers[n];
    if ((s = mg_program_param(program, n, &b->info)) != MG_OK) {
      fail(s);
      goto done;
    }
    size_t bytes = b->info.span_bytes > 0 ? (size_t)b->info.span_bytes : 1,
           esize = element_bytes(b->info.dtype);
    b->host.info = b->info;
    b->host.count = (size_t)b->info.span_bytes / esize;
    b->host.values = calloc(b->host.count + 1, sizeof(float));
    unsigned char* staging = malloc(bytes);
    if (b->host.values == NULL || staging == NULL) {
      free(staging);
      fprintf(stderr, "error: out of host memory\n");
      goto done;
    }
    if (driver_check(d, d->cuMemAlloc_v2(&b->device, bytes), "cuMemAlloc") != 0) {
      free(staging);
      goto done;
    }
    if (b->info.role == MG_ROLE_INPUT) {
      for (size_t i = 0; i < b->host.count; ++i) {
        encode(b->info.dtype, next_random(&seed), staging + i * esize);
        b->host.values[i] =
            decode(b->info.dtype, staging + i * esize); /* the reference sees the rounded value */
      }
      if (driver_check(d, d->cuMemcpyHtoD_v2(b->device, staging, bytes), "cuMemcpyHtoD") != 0) {
        free(staging);
        goto done;
      }
    } else if (driver_check(d, d->cuMemsetD8_v2(b->device, 0xff, bytes), "cuMemsetD8") != 0) {
      free(staging); /* outputs start as NaN, so an element the program never writes shows up */
      goto done;
    }
    free(staging);
    if (b->info.role != MG_ROLE_WORKSPACE) args[n] = (void*)(uintptr_t)b->device;
  }

  /* The launch: inputs then outputs in args, the workspace on its own, the context's default stream. */
  void* workspace = info.workspace_bytes > 0 ? (void*)(uintptr_t)buffers[info.num_params - 1].device : NULL;
  if ((s = mg_program_launch(program, NULL, args, info.num_inputs + info.num_outputs, workspace)) != MG_OK) {
    fail(s);
    goto done;
  }
  if (driver_check(d, d->cuCtxSynchronize(), "cuCtxSynchronize") != 0) goto done;

  /* Read the outputs back, then compare them with the CPU's answer for the same inputs. */
  for (size_t o = first_out; o < first_out + info.num_outputs; ++o) {
    struct buffer* b = &buffers[o];
    size_t esize = element_bytes(b->info.dtype);
    unsigned char* staging = malloc(b->info.span_bytes > 0 ? (size_t)b->info.span_bytes : 1);
    if (staging == NULL) goto done;
    if (driver_check(d, d->cuMemcpyDtoH_v2(staging, b->device, (size_t)b->info.span_bytes), "cuMemcpyDtoH") !=
        0) {
      free(staging);
      goto done;
    }
    for (size_t i = 0; i < b->host.count; ++i) b->host.values[i] = decode(b->info.dtype, staging + i * esize);
    free(staging);
  }
  for (size_t i = 0; i < info.num_inputs; ++i) inputs[i] = buffers[i].host;
  for (size_t o = 0; o < info.num_outputs; ++o) {
    expected[o] = buffers[first_out + o].host;
    expected[o].values = calloc(expected[o].count + 1, sizeof(float));
    if (expected[o].values == NULL) goto done;
  }
  const char* reference = reference_compute(info.name, inputs, info.num_inputs, expected, info.num_outputs);
  status = 0;
  for (size_t o = 0; o < info.num_outputs; ++o) {
    if (reference != NULL)
      status |= check(&buffers[first_out + o], &expected[o], reference);
    else
      checksum(&buffers[first_out + o]);
  }

done:
  for (size_t o = 0; o < MAX_PARAMS; ++o) free(expected[o].values);
  for (size_t i = 0; i < MAX_PARAMS; ++i) {
    if (buffers[i].device != 0) d->cuMemFree_v2(buffers[i].device);
    free(buffers[i].host.values);
  }
  return status;
}

int main(int argc, char** argv) {
  const char* path = NULL;
  const char* program = NULL;
  int ordinal = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--program") == 0 && i + 1 < argc) {
      program = argv[++i];
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      ordinal = atoi(argv[++i]);
    } else if (argv[i][0] != '-' && path == NULL) {
      path = argv[i];
    } else {
      path = NULL;
      break;
    }
  }
  if (path == NULL) {
    fprintf(stderr, "usage: %s BUNDLE [--program NAME [--device N]]\n", argv[0]);
    return 2;
  }

  /* Opening and inspecting a bundle needs no GPU. */
  mg_bundle* bundle = NULL;
  mg_status s = mg_bundle_open(path, &bundle);
  if (s != MG_OK) return fail(s);
  printf("bundle %s: %zu program(s)\n", path, mg_bundle_program_count(bundle));
  int status = list_programs(bundle);
  if (status != 0 || program == NULL) {
    mg_bundle_close(bundle);
    return status;
  }

  /* Running does. Asking the runtime first gives its message when there is no driver or no GPU. */
  int count = 0;
  mg_device_info device;
  struct driver d;
  CUcontext ctx = NULL;
  CUdevice dev = 0;
  memset(&d, 0, sizeof d);
  if ((s = mg_device_count(&count)) != MG_OK || (s = mg_device_describe(ordinal, &device)) != MG_OK) {
    mg_bundle_close(bundle);
    return fail(s);
  }
  printf("GPU %d of %d: %s (%s), %d SMs, driver %d.%d\n", ordinal, count, device.name, device.arch,
         device.sm_count, device.driver_version / 1000, device.driver_version % 1000 / 10);

  /* The application's own context; a program using the CUDA runtime API would have one already. */
  status = 1;
  if (driver_load(&d) == 0 && driver_check(&d, d.cuDeviceGet(&dev, ordinal), "cuDeviceGet") == 0 &&
      driver_check(&d, d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain") == 0) {
    if (driver_check(&d, d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent") == 0) status = run(&d, bundle, program);
    /* Close the bundle while its context lives, so that it can unload its code (docs/runtime-api.md). */
    mg_bundle_close(bundle);
    bundle = NULL;
    d.cuDevicePrimaryCtxRelease_v2(dev);
  }
  mg_bundle_close(bundle);
  return status;
}
