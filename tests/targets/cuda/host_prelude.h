// Host emulation of the CUDA that morgana generates, for tests on machines without a GPU: included before a
// generated source, it turns the CUDA keywords the emitter and the tile library use into host C++, and runs each
// block's threads as fibers (ucontext) on the calling thread, switching at every barrier (__syncthreads() and the
// warp-level instructions' exchanges). Shared memory is one global buffer, filled with NaN before every block so
// that a read before a write shows.
//
// Why fibers and not OS threads: a block of 64 OS threads on a 2-core machine spent most of its time in the kernel
// (every barrier woke 32-64 threads through futexes; 5 of 7 minutes of the suite were system time under ASan).
// Fibers switch in user space, run deterministically, and turn a barrier that not every thread reaches (a hang with
// threads) into an abort that names the block.
#pragma once

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <math.h>
#include <vector>

#include "ptx_isa_model.h"

#define MG_HOST_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

struct mg_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local mg_dim3 threadIdx, blockIdx;
inline mg_dim3 blockDim;

// Larger than any target's shared memory per block. C language linkage: the kernels are extern "C", and so is the
// block-scope `extern __shared__ ... mg_smem[]` they declare (clang refuses a definition of another linkage). One
// definition: the prelude is included by the one source file of an emulated program.
extern "C" {
alignas(1024) unsigned char mg_smem[1 << 18];
}

struct uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

namespace mg_host {
// A barrier of `expected` fibers: the last to arrive opens it (a new generation) and goes on; the others yield to
// the scheduler until they see the new generation.
struct Barrier {
  unsigned expected = 0, arrived = 0;
  unsigned long generation = 0;
};

// One emulated thread. Stacks are mapped once with a guard page below and reused by every block.
struct Fiber {
  ucontext_t context;
  unsigned char* stack = nullptr;
  mg_dim3 index;
  bool done = false;
};
// A kernel's frame (its register tiles, an emulated instruction's gathered operands) takes a few KiB. Small stacks
// also keep fiber switches cheap under ASan, whose swapcontext clears the shadow of the stack it switches to (by
// remapping it, for a stack over 512 KiB).
inline constexpr size_t kGuardBytes = 1 << 16;  // at least a page on every Linux machine
inline constexpr size_t kStackBytes = 1 << 16;
inline std::vector<Fiber> fibers;
inline size_t current = 0;
inline ucontext_t scheduler;
inline unsigned long progress = 0;  // arrivals and finished fibers: a round of the block without any is a deadlock
inline void* kernel_object = nullptr;

inline Barrier block_barrier;
inline std::vector<Barrier> warp_barriers;

inline void arrive_and_wait(Barrier& b) {
  ++progress;
  if (++b.arrived == b.expected) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  const unsigned long waiting_for = b.generation;
  while (b.generation == waiting_for) swapcontext(&fibers[current].context, &scheduler);
}

// Warp-level instructions exchange values between the lanes of one warp through these slots, between two
// arrivals at the warp's barrier (every lane posts, every lane reads, then the slots may be reused).
struct WarpSlots {
  const void* addr[mg_isa::kLanes];
  unsigned a[mg_isa::kLanes][4];
  unsigned b[mg_isa::kLanes][2];
  float c[mg_isa::kLanes][4];
};
inline std::vector<WarpSlots> warp_slots;
inline int lane() { return static_cast<int>(threadIdx.x) % mg_isa::kLanes; }
inline int warp() { return static_cast<int>(threadIdx.x) / mg_isa::kLanes; }
inline void warp_sync() { arrive_and_wait(warp_barriers[static_cast<size_t>(warp())]); }

template <class F>
void run_fiber() {
  (*static_cast<F*>(kernel_object))();
  fibers[current].done = true;
  ++progress;
}  // returns to `scheduler` (uc_link)

inline void make_stacks(unsigned threads) {
  while (fibers.size() < threads) {
    void* m = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, kGuardBytes, PROT_NONE) != 0) {
      std::perror("host emulation: fiber stack");
      std::abort();
    }
    fibers.emplace_back();
    fibers.back().stack = static_cast<unsigned char*>(m) + kGuardBytes;
  }
}

// Runs `kernel` (a callable that calls the kernel function) on every block of the grid, `threads` threads each.
// The scheduler resumes the block's unfinished fibers in turn, in thread order on one round and in reverse on the
// next, so that a missing barrier between a writer and a reader shows whichever of the two comes first.
template <class F>
void launch(long gx, long gy, long gz, unsigned threads, F kernel) {
  blockDim = {threads, 1, 1};
  kernel_object = &kernel;
  make_stacks(threads);
  for (long z = 0; z < gz; ++z)
    for (long y = 0; y < gy; ++y)
      for (long x = 0; x < gx; ++x) {
        std::memset(mg_smem, 0xff, sizeof mg_smem);
        block_barrier = Barrier{threads};
        // One barrier per warp, of the lanes that warp has.
        warp_barriers.clear();
        for (unsigned first = 0; first < threads; first += mg_isa::kLanes)
          warp_barriers.push_back(Barrier{std::min<unsigned>(mg_isa::kLanes, threads - first)});
        warp_slots.assign(warp_barriers.size(), WarpSlots{});
        blockIdx = {static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z)};
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = fibers[t];
          f.index = {t, 0, 0};
          f.done = false;
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack;
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = &scheduler;
          makecontext(&f.context, &run_fiber<F>, 0);
        }
        for (unsigned live = threads, round = 0; live > 0; ++round) {
          const unsigned long before = progress;
          for (unsigned k = 0; k < threads; ++k) {
            current = round % 2 == 0 ? k : threads - 1 - k;
            if (fibers[current].done) continue;
            threadIdx = fibers[current].index;
            swapcontext(&scheduler, &fibers[current].context);
            if (fibers[current].done) --live;
          }
          if (live > 0 && progress == before) {
            std::fprintf(stderr,
                         "host emulation: block (%ld, %ld, %ld) deadlocked: %u of %u threads wait at a barrier "
                         "that the others never reach\n",
                         x, y, z, live, threads);
            std::abort();
          }
        }
      }
}
}  // namespace mg_host

inline void __syncthreads() { mg_host::arrive_and_wait(mg_host::block_barrier); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float mg_host_f16_to_f32(unsigned short bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }
inline unsigned short mg_host_f32_to_f16(float x) { return std::bit_cast<unsigned short>(static_cast<_Float16>(x)); }

// ---- the instructions the tile library reaches through inline PTX on a GPU ----

inline void mg_host_copy(void* dst, const void* src, int bytes) { std::memcpy(dst, src, static_cast<size_t>(bytes)); }

inline unsigned short mg_host_bits(const void* p) {
  unsigned short h;
  std::memcpy(&h, p, 2);
  return h;
}

// ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16 on a row address per lane (mg_isa::ldmatrix_element).
inline void mg_host_ldmatrix(unsigned* r, int count, bool trans, const void* row_address) {
  using namespace mg_host;
  WarpSlots& w = warp_slots[static_cast<size_t>(warp())];
  w.addr[lane()] = row_address;
  warp_sync();
  for (int j = 0; j < count; ++j) {
    unsigned short h[2];
    for (int e = 0; e < 2; ++e) {
      const mg_isa::RowCol rc = mg_isa::ldmatrix_element(lane(), e, trans);
      const unsigned char* row = static_cast<const unsigned char*>(w.addr[8 * j + rc.row]);
      h[e] = mg_host_bits(row + 2 * rc.col);
    }
    r[j] = static_cast<unsigned>(h[0]) | (static_cast<unsigned>(h[1]) << 16);
  }
  warp_sync();
}

inline float mg_host_half(unsigned reg, int e, bool bf16) {
  const unsigned short h = static_cast<unsigned short>(reg >> (16 * e));
  return bf16 ? std::bit_cast<float>(static_cast<unsigned>(h) << 16) : mg_host_f16_to_f32(h);
}

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, d: the whole warp's fragments are
// gathered into A, B and C by the ISA's maps, and each lane takes its elements of D = A·B + C.
inline void mg_host_mma_m16n8k16(float* d, const unsigned* a, const unsigned* b, bool bf16) {
  using namespace mg_host;
  WarpSlots& w = warp_slots[static_cast<size_t>(warp())];
  std::memcpy(w.a[lane()], a, sizeof w.a[0]);
  std::memcpy(w.b[lane()], b, sizeof w.b[0]);
  std::memcpy(w.c[lane()], d, sizeof w.c[0]);
  warp_sync();
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < mg_isa::kLanes; ++l) {
    for (int i = 0; i < 8; ++i) {
      const mg_isa::RowCol rc = mg_isa::mma_m16n8k16_a(l, i);
      A[rc.row][rc.col] = mg_host_half(w.a[l][i / 2], i % 2, bf16);
    }
    for (int i = 0; i < 4; ++i) {
      const mg_isa::RowCol rb = mg_isa::mma_m16n8k16_b(l, i);
      B[rb.row][rb.col] = mg_host_half(w.b[l][i / 2], i % 2, bf16);
      const mg_isa::RowCol rc = mg_isa::mma_m16n8k16_c(l, i);
      C[rc.row][rc.col] = w.c[l][i];
    }
  }
  for (int i = 0; i < 4; ++i) {
    const mg_isa::RowCol rc = mg_isa::mma_m16n8k16_c(lane(), i);
    float sum = C[rc.row][rc.col];
    for (int k = 0; k < 16; ++k) sum += A[rc.row][k] * B[k][rc.col];
    d[i] = sum;
  }
  warp_sync();
}

// __shfl_xor_sync over the whole warp.
inline float mg_host_shfl_xor(float v, int mask) {
  using namespace mg_host;
  WarpSlots& w = warp_slots[static_cast<size_t>(warp())];
  w.c[lane()][0] = v;
  warp_sync();
  const float other = w.c[lane() ^ mask][0];
  warp_sync();
  return other;
}
