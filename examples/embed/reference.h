/* CPU references for programs this example knows, and the number formats of their tensors. A program is known
 * by its name (those of the .mg files in examples/) and must have the shapes that name implies; anything else
 * is run and summarised by a checksum instead of checked. */
#ifndef EMBED_REFERENCE_H
#define EMBED_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include <morgana/runtime.h>

/* Round to nearest even, as the GPU converts. */
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

/* A tensor on the host as floats, laid out like the device buffer: element (i, j, ...) is at
 * values[i * strides[0] + j * strides[1] + ...]. */
struct tensor {
  mg_param_info info;
  float* values;
  size_t count; /* span_bytes / element size */
};

/* Writes the expected outputs of `program` into `expected` (laid out like the real outputs). Returns the
 * name of the reference used, or NULL when the program is not one this example knows. */
const char* reference_compute(const char* program, const struct tensor* inputs, size_t n_inputs,
                              struct tensor* expected, size_t n_outputs);

#endif
