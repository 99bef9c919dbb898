// Microbenchmark: DRAM bandwidth of reading V f16[64,4096,128] in column strips of WB bytes per row (grid: 64 heads
// x 256/WB strips, each block all 4096 rows) versus in row chunks of whole 256-byte rows (same number of blocks).
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int H = 64, N = 4096, D = 128, ROWB = D * 2;

template <int WB>
__global__ void strips(const uint4* __restrict__ v, unsigned* out) {
  constexpr int C = WB / 16;              // 16-byte chunks per row piece
  constexpr int RPI = 128 / C;            // rows per pass of the block
  const int h = blockIdx.x, s = blockIdx.y;
  const uint4* base = v + (size_t)h * N * (ROWB / 16) + s * C;
  unsigned acc = 0;
  const int c = threadIdx.x % C, r0 = threadIdx.x / C;
#pragma unroll 8
  for (int r = r0; r < N; r += RPI) {
    uint4 x = base[(size_t)r * (ROWB / 16) + c];
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  atomicXor(out, acc);
}

// Same blocks count as strips<WB>: splits = 256/WB blocks per head, each reading N/splits whole rows.
template <int WB>
__global__ void rows(const uint4* __restrict__ v, unsigned* out) {
  constexpr int SPLITS = ROWB / WB, R = N / SPLITS, CH = ROWB / 16;
  const int h = blockIdx.x, s = blockIdx.y;
  const uint4* base = v + ((size_t)h * N + (size_t)s * R) * CH;
  unsigned acc = 0;
#pragma unroll 8
  for (int i = threadIdx.x; i < R * CH; i += 128) {
    uint4 x = base[i];
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  atomicXor(out, acc);
}

template <class K>
float time_it(K kernel, dim3 grid, std::vector<uint4*>& bufs, unsigned* out) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 8; ++i) kernel<<<grid, 128>>>(bufs[i % bufs.size()], out);
  const int iters = 200;
  std::vector<float> ts;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a);
    kernel<<<grid, 128>>>(bufs[i % bufs.size()], out);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms * 1000);
  }
  std::sort(ts.begin(), ts.end());
  return ts[iters / 2];
}

int main() {
  const size_t bytes = (size_t)H * N * ROWB;
  std::vector<uint4*> bufs(6);
  std::vector<uint32_t> host(bytes / 4);
  for (size_t i = 0; i < host.size(); ++i) host[i] = (uint32_t)(i * 2654435761u);
  for (auto& p : bufs) { CK(cudaMalloc(&p, bytes)); CK(cudaMemcpy(p, host.data(), bytes, cudaMemcpyHostToDevice)); }
  unsigned* out; CK(cudaMalloc(&out, 4));
  printf("V %zu MB, 6 rotating copies; median of 200 launches\n", bytes >> 20);
  printf("%-10s %8s %10s %10s\n", "layout", "blocks", "us", "GB/s");
  auto report = [&](const char* name, int blocks, float us) { printf("%-10s %8d %10.1f %10.0f\n", name, blocks, us, bytes / us / 1e3); };
  report("strip16", H * 16, time_it(strips<16>, dim3(H, 16), bufs, out));
  report("rows/16", H * 16, time_it(rows<16>, dim3(H, 16), bufs, out));
  report("strip32", H * 8, time_it(strips<32>, dim3(H, 8), bufs, out));
  report("rows/8", H * 8, time_it(rows<32>, dim3(H, 8), bufs, out));
  report("strip64", H * 4, time_it(strips<64>, dim3(H, 4), bufs, out));
  report("rows/4", H * 4, time_it(rows<64>, dim3(H, 4), bufs, out));
  report("strip128", H * 2, time_it(strips<128>, dim3(H, 2), bufs, out));
  report("rows/2", H * 2, time_it(rows<128>, dim3(H, 2), bufs, out));
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
