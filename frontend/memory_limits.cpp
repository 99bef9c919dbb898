#include "frontend/memory_limits.h"

#include <unistd.h>

#include <cstdio>

#include "ir/diagnostic.h"

namespace morgana::frontend {

namespace {

struct Footprint {
  int64_t bytes = 0;     // all kernel-level tensors
  ir::TensorId largest = 0;
  int64_t largest_bytes = 0;
};

// Each tensor is within ir::kMaxElements (2^48) and there are fewer than 2^16 of them at 16 bytes or less an element,
// so no sum here overflows 64 bits. `bytes_per_element` of 0: each tensor in its own dtype.
Footprint footprint(const ir::Graph& g, int64_t bytes_per_element) {
  Footprint f;
  for (ir::TensorId t = 0; t < g.num_tensors(); ++t) {
    const ir::TensorType& type = g.type(t);
    const int64_t b = type.numel() * (bytes_per_element > 0 ? bytes_per_element : ir::dtype_bytes(type.dtype));
    f.bytes += b;
    if (b > f.largest_bytes) f.largest = t, f.largest_bytes = b;
  }
  return f;
}

std::string gib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string tensor_name(const ir::Graph& g, ir::TensorId t) {
  const std::string& n = g.name(t);
  return (n.empty() ? std::string("a tensor") : "'" + n + "'") + " " + g.type(t).str();
}

}  // namespace

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

void check_fits_host(const ir::Graph& g, int64_t bytes_per_element, int copies, const std::string& what) {
  const int64_t memory = host_memory_bytes();
  if (memory == 0) return;
  const Footprint f = footprint(g, bytes_per_element);
  if (f.bytes <= memory / copies) return;
  throw UserError(what + " would hold " + gib(f.bytes * copies) + " (its largest tensor, " + tensor_name(g, f.largest) +
                      ", alone " + gib(f.largest_bytes) + "), more than this machine's " + gib(memory) + " of memory",
                  g.loc(g.tensor(f.largest).producer));
}

void check_fits_device(const ir::Graph& g, const targets::Target& t) {
  const Footprint f = footprint(g, 0);
  if (f.bytes <= t.memory.dram_bytes) return;
  throw UserError("'" + g.name() + "' needs " + gib(f.bytes) + " of device memory for its tensors (the largest, " +
                      tensor_name(g, f.largest) + ", " + gib(f.largest_bytes) + "), more than " + t.identity.name +
                      "'s " + gib(t.memory.dram_bytes) + " (dram_bytes in its target file)",
                  g.loc(g.tensor(f.largest).producer));
}

}  // namespace morgana::frontend
