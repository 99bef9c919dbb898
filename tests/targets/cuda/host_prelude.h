// Host emulation of the CUDA that morgana generates, for tests on machines without a GPU: included before a
// generated source, it turns the CUDA keywords the emitter and the tile library use into host C++, and runs each
// block's threads as OS threads with a real barrier for __syncthreads(). Shared memory is one global buffer, filled
// with NaN before every block so that a read before a write shows. Compile with -std=c++20 -pthread.
#pragma once

#include <barrier>
#include <bit>
#include <cmath>
#include <cstring>
#include <math.h>
#include <thread>
#include <vector>

#define MG_HOST_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __align__(n) __attribute__((aligned(n)))

struct mg_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local mg_dim3 threadIdx, blockIdx;
inline mg_dim3 blockDim;

// Larger than any target's shared memory per block.
alignas(16) inline unsigned char mg_smem[1 << 18];

namespace mg_host {
inline std::barrier<>* block_barrier = nullptr;

// Runs `kernel` (a callable that calls the kernel function) on every block of the grid, `threads` threads each.
template <class F>
void launch(long gx, long gy, long gz, unsigned threads, F kernel) {
  blockDim = {threads, 1, 1};
  for (long z = 0; z < gz; ++z)
    for (long y = 0; y < gy; ++y)
      for (long x = 0; x < gx; ++x) {
        std::memset(mg_smem, 0xff, sizeof mg_smem);
        std::barrier<> bar(threads);
        block_barrier = &bar;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockIdx = {static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z)};
            kernel();
          });
        for (std::thread& t : ts) t.join();
      }
}
}  // namespace mg_host

inline void __syncthreads() { mg_host::block_barrier->arrive_and_wait(); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float mg_host_f16_to_f32(unsigned short bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
inline unsigned short mg_host_f32_to_f16(float x) { return std::bit_cast<unsigned short>(static_cast<_Float16>(x)); }
