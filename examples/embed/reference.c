/* CPU references and number formats (reference.h). Plain loops in float: the point is a result to compare
 * against, not speed. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- number formats ---- */

float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13); /* inf, NaN */
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (magnitude >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past the largest half: inf */
  if (magnitude < 0x38800000u) {                                   /* below the smallest normal half */
    float scaled = fabsf(f) * 16777216.0f;                         /* in units of 2^-24 */
    return (uint16_t)(sign | (uint16_t)nearbyintf(scaled));
  }
  uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u); /* round to nearest even */
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u); /* NaN stays NaN */
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/* ---- dense row-major matrices, optionally batched ---- */

struct mat {
  int64_t batch, rows, cols;
  float* v;
};

static int mat_alloc(struct mat* m, int64_t batch, int64_t rows, int64_t cols) {
  m->batch = batch, m->rows = rows, m->cols = cols;
  m->v = calloc((size_t)(batch * rows * cols), sizeof(float));
  return m->v != NULL;
}

/* A rank-2 or rank-3 tensor as a batch of matrices; 0 when it has another rank. */
static int mat_from(struct mat* m, const struct tensor* t) {
  const mg_param_info* p = &t->info;
  if (p->rank != 2 && p->rank != 3) return 0;
  int64_t batch = p->rank == 3 ? p->shape[0] : 1, bs = p->rank == 3 ? p->strides[0] : 0;
  int64_t rows = p->shape[p->rank - 2], cols = p->shape[p->rank - 1];
  int64_t rs = p->strides[p->rank - 2], cs = p->strides[p->rank - 1];
  if (!mat_alloc(m, batch, rows, cols)) return 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        m->v[(b * rows + i) * cols + j] = t->values[b * bs + i * rs + j * cs];
  return 1;
}

/* Stores m into t when their shapes agree. */
static int mat_to(const struct mat* m, struct tensor* t) {
  const mg_param_info* p = &t->info;
  if (p->rank != 2 && p->rank != 3) return 0;
  int64_t batch = p->rank == 3 ? p->shape[0] : 1, bs = p->rank == 3 ? p->strides[0] : 0;
  if (batch != m->batch || p->shape[p->rank - 2] != m->rows || p->shape[p->rank - 1] != m->cols) return 0;
  int64_t rs = p->strides[p->rank - 2], cs = p->strides[p->rank - 1];
  for (int64_t b = 0; b < m->batch; ++b)
    for (int64_t i = 0; i < m->rows; ++i)
      for (int64_t j = 0; j < m->cols; ++j)
        t->values[b * bs + i * rs + j * cs] = m->v[(b * m->rows + i) * m->cols + j];
  return 1;
}

static int matmul(struct mat* c, const struct mat* a, const struct mat* b) {
  if (a->batch != b->batch || a->cols != b->rows || !mat_alloc(c, a->batch, a->rows, b->cols)) return 0;
  for (int64_t n = 0; n < a->batch; ++n)
    for (int64_t i = 0; i < a->rows; ++i)
      for (int64_t k = 0; k < a->cols; ++k) {
        float x = a->v[(n * a->rows + i) * a->cols + k];
        const float* brow = &b->v[(n * b->rows + k) * b->cols];
        float* crow = &c->v[(n * c->rows + i) * c->cols];
        for (int64_t j = 0; j < b->cols; ++j) crow[j] += x * brow[j];
      }
  return 1;
}

/* rms_norm over the last dim: x * rsqrt(mean(x^2) + 1e-6), docs/spec-language.md. */
static void rms_norm_rows(struct mat* m) {
  for (int64_t r = 0; r < m->batch * m->rows; ++r) {
    float* row = &m->v[r * m->cols];
    double sum = 0;
    for (int64_t j = 0; j < m->cols; ++j) sum += (double)row[j] * row[j];
    float scale = (float)(1.0 / sqrt(sum / (double)m->cols + 1e-6));
    for (int64_t j = 0; j < m->cols; ++j) row[j] *= scale;
  }
}

static int starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Each reference takes the inputs as matrices and fills out[0]; returns 0 when the shapes do not fit. */
static int ref_matmul(struct mat* in, struct mat* out) {
  return matmul(out, &in[0], &in[1]);
}

static int ref_rmsnorm_linear(struct mat* in, struct mat* out) {
  rms_norm_rows(&in[0]);
  return matmul(out, &in[0], &in[1]);
}

static int ref_gated_mlp(struct mat* in, struct mat* out) {
  struct mat g = {0, 0, 0, NULL}, u = {0, 0, 0, NULL};
  int ok = matmul(&g, &in[0], &in[1]) && matmul(&u, &in[0], &in[2]);
  if (ok) {
    for (int64_t i = 0; i < g.batch * g.rows * g.cols; ++i) g.v[i] = g.v[i] / (1.0f + expf(-g.v[i])) * u.v[i];
    *out = g;
    g.v = NULL;
  }
  free(g.v);
  free(u.v);
  return ok;
}

static int ref_lora(struct mat* in, struct mat* out) {
  struct mat xw = {0, 0, 0, NULL}, xa = {0, 0, 0, NULL}, xab = {0, 0, 0, NULL};
  int ok = matmul(&xw, &in[0], &in[1]) && matmul(&xa, &in[0], &in[2]) && matmul(&xab, &xa, &in[3]) &&
           xw.rows == xab.rows && xw.cols == xab.cols;
  if (ok) {
    for (int64_t i = 0; i < xw.batch * xw.rows * xw.cols; ++i) xw.v[i] += xab.v[i];
    *out = xw;
    xw.v = NULL;
  }
  free(xw.v);
  free(xa.v);
  free(xab.v);
  return ok;
}

static const struct {
  const char* prefix; /* the program's name starts with it */
  size_t inputs;
  int (*compute)(struct mat* in, struct mat* out);
} matrix_references[] = {
    {"matmul", 2, ref_matmul},
    {"rmsnorm_linear", 2, ref_rmsnorm_linear},
    {"gated_mlp", 3, ref_gated_mlp},
    {"lora", 4, ref_lora},
};

/* add: elementwise over equal shapes, in any layout. */
static int ref_add(const struct tensor* in, struct tensor* out) {
  const mg_param_info* p = &out->info;
  for (int k = 0; k < 2; ++k) {
    if (in[k].info.rank != p->rank) return 0;
    for (uint32_t d = 0; d < p->rank; ++d)
      if (in[k].info.shape[d] != p->shape[d]) return 0;
  }
  int64_t n = 1, index[MG_MAX_RANK] = {0};
  for (uint32_t d = 0; d < p->rank; ++d) n *= p->shape[d];
  for (int64_t e = 0; e < n; ++e) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (uint32_t d = 0; d < p->rank; ++d) {
      oa += index[d] * in[0].info.strides[d];
      ob += index[d] * in[1].info.strides[d];
      oc += index[d] * p->strides[d];
    }
    out->values[oc] = in[0].values[oa] + in[1].values[ob];
    for (int d = (int)p->rank - 1; d >= 0 && ++index[d] == p->shape[d]; --d) index[d] = 0;
  }
  return 1;
}

const char* reference_compute(const char* program, const struct tensor* inputs, size_t n_inputs,
                              struct tensor* expected, size_t n_outputs) {
  if (n_outputs != 1) return NULL;
  if (strcmp(program, "add") == 0) return n_inputs == 2 && ref_add(inputs, expected) ? "add" : NULL;
  for (size_t r = 0; r < sizeof matrix_references / sizeof matrix_references[0]; ++r) {
    if (!starts_with(program, matrix_references[r].prefix) || n_inputs != matrix_references[r].inputs)
      continue;
    struct mat in[4], out = {0, 0, 0, NULL};
    size_t loaded = 0;
    int ok = 1;
    for (; loaded < n_inputs && ok; ++loaded) ok = mat_from(&in[loaded], &inputs[loaded]);
    if (!ok) --loaded; /* the failed one owns nothing */
    ok = ok && matrix_references[r].compute(in, &out) && mat_to(&out, expected);
    for (size_t i = 0; i < loaded; ++i) free(in[i].v);
    free(out.v);
    return ok ? matrix_references[r].prefix : NULL;
  }
  return NULL;
}
