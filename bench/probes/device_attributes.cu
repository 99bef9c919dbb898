// Device report: what the CUDA driver says about each visible GPU, in the key names of the target files
// (targets/cuda/*.toml, docs/targets.md), so that a target file's device-reported numbers can cite this
// program's output. No kernel is launched; the driver API alone (cuDeviceGetAttribute, cuDeviceTotalMem).
//
// Build and run (no -arch needed: nothing is compiled for the GPU):
//   nvcc -O2 -o /tmp/device_attributes bench/probes/device_attributes.cu -lcuda && /tmp/device_attributes
//
// Output, per device: its name, compute capability and the driver's CUDA version, then one line per value,
//   attr <key> = <value>       a value the driver reports; <key> is the target file's key where it has one
//                              (sms, smem_per_sm, l2_bytes, dram_bytes, ...), else a name of its own with the
//                              unit (sm_clock_khz, mem_clock_khz, mem_bus_width_bits, clusters)
//   derived <key> = <value>    arithmetic on the values above, the formula after it
// max_regs_per_thread is not a device attribute (it is a limit of the compute capability: 255 for cc 8.0
// to 9.0 in the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability"), so it is not
// printed.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Every CUresult is checked: a failure names the call and the driver's error, and the program exits non-zero.
void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown CUresult";
  if (cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "";
  std::fprintf(stderr, "error: %s failed: %s (%d) %s\n", what, name, static_cast<int>(r), text);
  std::exit(1);
}

int attribute(CUdevice dev, CUdevice_attribute a, const char* what) {
  int v = 0;
  check(cuDeviceGetAttribute(&v, a, dev), what);
  return v;
}

struct Attr {
  const char* key;  // the target file's key, or a name with its unit
  CUdevice_attribute attr;
  const char* api_name;
};

// In the order of the target file's sections: [execution], [memory], [registers], then what has no key.
const Attr kAttrs[] = {
    {"sms", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"},
    {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE, "CU_DEVICE_ATTRIBUTE_WARP_SIZE"},
    {"max_threads_per_block", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
     "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"},
    {"max_threads_per_sm", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
     "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"},
    {"max_blocks_per_sm", CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
     "CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"},
    {"smem_per_block_default", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
     "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"},
    {"smem_per_block_optin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
     "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"},
    {"smem_per_sm", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
     "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"},
    {"smem_reserved_per_block", CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
     "CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK"},
    {"l2_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"},
    {"regs_per_block", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
     "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"},
    {"regs_per_sm", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
     "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"},
    {"mem_bus_width_bits", CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
     "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"},
    {"mem_clock_khz", CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"},
    {"sm_clock_khz", CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "CU_DEVICE_ATTRIBUTE_CLOCK_RATE"},
    {"clusters", CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, "CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH"},
};

}  // namespace

int main() {
  check(cuInit(0), "cuInit");
  int driver = 0;
  check(cuDriverGetVersion(&driver), "cuDriverGetVersion");
  int count = 0;
  check(cuDeviceGetCount(&count), "cuDeviceGetCount");
  std::printf("# bench/probes/device_attributes.cu: %d device(s), driver CUDA version %d.%d (%d)\n", count,
              driver / 1000, (driver % 1000) / 10, driver);
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    check(cuDeviceGet(&dev, i), "cuDeviceGet");
    char name[256] = {};
    check(cuDeviceGetName(name, static_cast<int>(sizeof name) - 1, dev), "cuDeviceGetName");
    const int major =
        attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR");
    const int minor =
        attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR");
    std::printf("device %d: %s\n", i, name);
    std::printf("compute_capability = %d.%d (sm_%d%d)\n", major, minor, major, minor);
    std::printf("driver_version = %d\n", driver);

    int values[sizeof kAttrs / sizeof kAttrs[0]];
    for (size_t k = 0; k < sizeof kAttrs / sizeof kAttrs[0]; ++k) {
      values[k] = attribute(dev, kAttrs[k].attr, kAttrs[k].api_name);
      std::printf("attr %s = %d\n", kAttrs[k].key, values[k]);
    }
    size_t total = 0;
    check(cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
    std::printf("attr dram_bytes = %zu\n", total);

    auto value_of = [&](const char* key) {
      for (size_t k = 0; k < sizeof kAttrs / sizeof kAttrs[0]; ++k)
        if (std::strcmp(kAttrs[k].key, key) == 0) return static_cast<double>(values[k]);
      std::fprintf(stderr, "error: no attribute %s\n", key);
      std::exit(1);
    };
    const double bus_bits = value_of("mem_bus_width_bits"), mem_khz = value_of("mem_clock_khz");
    const double sm_khz = value_of("sm_clock_khz");
    // Double data rate: two transfers per memory clock on every bit of the bus.
    std::printf(
        "derived dram_bandwidth_gbps = %.1f (2 x mem_clock_khz x 1e3 x mem_bus_width_bits / 8 / 1e9)\n",
        2.0 * mem_khz * 1e3 * bus_bits / 8.0 / 1e9);
    // 32 banks of 4 bytes each, one access per bank per clock (CUDA C++ Programming Guide, "Shared Memory").
    std::printf("derived smem_bandwidth_gbps_per_sm = %.1f (32 banks x 4 B x sm_clock_khz x 1e3 / 1e9)\n",
                32.0 * 4.0 * sm_khz * 1e3 / 1e9);
  }
  return 0;
}
