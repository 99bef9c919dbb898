// Probe: how fast can one kernel read gated_mlp_b16_n2048's weights (two f16[4096,2048], 33.5 MB) in the bench's
// protocol (one CUDA graph per pass over input sets rotated beyond 2x L2, median of replays), by the way blocks
// split the work? Plain 16-byte loads (ld.global.cs), UNROLL loads in flight per thread, a trivial fold so nothing
// is optimised away. Patterns:
//   strips C   : 2048/C blocks, each all 4096 rows of C columns of both matrices (2C bytes per row): the one-kernel
//                gated MLP's tiling
//   strips C/Kk: as strips C with K split in k (2048/C*k blocks): the split-K forms
//   rows B     : B blocks, each a contiguous run of whole rows: the floor of any tiling
// Prints the median us per pass and the rate against the bytes read. Other shapes: -DPROBE_K=4096 -DPROBE_N=4096
// reads gated_mlp's two [4096,4096] weights (67 MB); -DPROBE_N=3072 reads as many bytes as rmsnorm_linear's one
// [4096,6144] (50.3 MB; the rows floor does not depend on how the bytes are split into matrices).
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <functional>

#ifndef PROBE_K
#define PROBE_K 4096
#endif
#ifndef PROBE_N
#define PROBE_N 2048
#endif
constexpr int K = PROBE_K, N = PROBE_N;
constexpr long long kMatrixBytes = (long long)K * N * 2;

template <int UNROLL>
__global__ void strips(const uint4* __restrict__ a, const uint4* __restrict__ b, unsigned* out, int cols, int ksplit) {
  // Block: column strip (blockIdx.x % strips), K part (blockIdx.x / strips). 16-byte chunks per row piece: cols / 8.
  const int nstrips = N / cols, strip = blockIdx.x % nstrips, part = blockIdx.x / nstrips;
  const int chunks = cols / 8, rows = K / ksplit, row0 = part * rows;
  const int total = rows * chunks * 2;  // both matrices
  unsigned acc = 0;
  for (int i0 = threadIdx.x; i0 < total; i0 += blockDim.x * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = i0 + u * blockDim.x;
      if (i < total) {
        const int m = i & 1, e = i >> 1, r = e / chunks, c = e % chunks;
        const uint4* p = (m ? b : a) + (long long)(row0 + r) * (N / 8) + strip * chunks + c;
        v[u] = __ldcs(p);
      } else {
        v[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

template <int UNROLL>
__global__ void rows(const uint4* __restrict__ a, const uint4* __restrict__ b, unsigned* out) {
  const long long per = kMatrixBytes / 16;  // chunks per matrix
  const long long total = 2 * per, each = (total + gridDim.x - 1) / gridDim.x;
  const long long lo = blockIdx.x * each, hi = lo + each < total ? lo + each : total;
  unsigned acc = 0;
  for (long long i0 = lo + threadIdx.x; i0 < hi; i0 += (long long)blockDim.x * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long i = i0 + (long long)u * blockDim.x;
      v[u] = i < hi ? __ldcs(i < per ? a + i : b + (i - per)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

int main() {
  const int sets = 4;  // 4 x 2 matrices: 134 MB at the default shape, more than 2x the H100's 50 MB L2
  std::vector<uint4*> A(sets), B(sets);
  for (int s = 0; s < sets; ++s) {
    cudaMalloc(&A[s], kMatrixBytes); cudaMalloc(&B[s], kMatrixBytes);
    cudaMemset(A[s], 1, kMatrixBytes); cudaMemset(B[s], 2, kMatrixBytes);
  }
  unsigned* out; cudaMalloc(&out, 1 << 16);
  cudaStream_t st; cudaStreamCreate(&st);
  auto time = [&](const char* name, std::function<void(int)> launch) {
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
    for (int s = 0; s < sets; ++s) launch(s);
    cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int w = 0; w < 5; ++w) cudaGraphLaunch(ge, st);
    std::vector<float> t;
    for (int r = 0; r < 41; ++r) {
      cudaEventRecord(e0, st); cudaGraphLaunch(ge, st); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms * 1000 / sets);
    }
    std::sort(t.begin(), t.end());
    printf("%-28s %7.2f us  %6.0f GB/s  (%s)\n", name, t[20], 2 * kMatrixBytes / (t[20] * 1e3),
           cudaGetErrorString(cudaGetLastError()));
  };
  char name[64];
  for (int threads : {256, 512})
    for (int cols : {16, 32, 64})
      for (int ks : {1, 2, 4}) {
        const int blocks = N / cols * ks;
        if (blocks < 128 || blocks > 512) continue;
        snprintf(name, sizeof name, "strips %d/K%d t%d (%d bl) u8", cols, ks, threads, blocks);
        time(name, [&](int s) { strips<8><<<blocks, threads, 0, st>>>(A[s], B[s], out, cols, ks); });
        snprintf(name, sizeof name, "strips %d/K%d t%d (%d bl) u16", cols, ks, threads, blocks);
        time(name, [&](int s) { strips<16><<<blocks, threads, 0, st>>>(A[s], B[s], out, cols, ks); });
      }
  for (int threads : {256, 512})
    for (int blocks : {128, 132, 264, 528}) {
      snprintf(name, sizeof name, "rows t%d (%d bl) u8", threads, blocks);
      time(name, [&](int s) { rows<8><<<blocks, threads, 0, st>>>(A[s], B[s], out); });
      snprintf(name, sizeof name, "rows t%d (%d bl) u16", threads, blocks);
      time(name, [&](int s) { rows<16><<<blocks, threads, 0, st>>>(A[s], B[s], out); });
    }
  // What zeroing a few counters costs in the graph: a 4 KiB memset node before the stream kernel.
  unsigned* counters; cudaMalloc(&counters, 4096);
  time("rows t512 (132 bl) u8 + memset", [&](int s) {
    cudaMemsetAsync(counters, 0, 4096, st);
    rows<8><<<132, 512, 0, st>>>(A[s], B[s], out);
  });
  time("memset 4 KiB alone", [&](int s) { cudaMemsetAsync(counters, 0, 4096, st); });
  return 0;
}
