// Probe: how fast can a grid of blocks stream a weight matrix W f16[K,N] through shared memory with cp.async, as the
// GEMV-shaped kernels (rmsnorm_linear, gated_mlp) do, for different tilings: columns per block (a strip of each row),
// K split over grid.y, rows per pipeline stage, stages, threads. No arithmetic beyond one shared load per copied chunk,
// so the time is the memory system's for that tiling: the ceiling a kernel of that tiling can reach.
// Reference rows: a plain read of the whole tensor (16-byte loads, grid-stride, several in flight) and cudaMemcpy.
// W rotates over copies larger than 2x L2; each configuration is a CUDA graph of 30 launches, median of 15 replays.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

constexpr int K = 4096, N = 6144;

__device__ __forceinline__ void cp16(void* s, const void* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g));
}

// Block (x, y): columns [x*CH*8, +CH*8), rows [y*K/KS, +K/KS), in stages of R rows, S stages deep: the loads of the
// next S-1 stages stay in flight while a stage is consumed.
template <int CH, int T, int S>
__global__ void __launch_bounds__(T) strip_s(const uint4* __restrict__ w, unsigned* out, int R, int KS) {
  extern __shared__ uint4 sm[];
  const int rows = K / KS, iters = rows / R, per_stage = R * CH;
  const uint4* base = w + (size_t)blockIdx.y * rows * (N / 8) + blockIdx.x * CH;
  const int c = threadIdx.x % CH, r0 = threadIdx.x / CH, step = T / CH;
  auto load = [&](int it) {
    uint4* dst = sm + (it % S) * per_stage;
    const uint4* src = base + (size_t)it * R * (N / 8);
    if (r0 < step)
      for (int r = r0; r < R; r += step) cp16(dst + r * CH + c, src + (size_t)r * (N / 8) + c);
    asm volatile("cp.async.commit_group;\n");
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) if (s < iters) load(s); else asm volatile("cp.async.commit_group;\n");
  unsigned acc = 0;
  for (int it = 0; it < iters; ++it) {
    if (it + S - 1 < iters) load(it + S - 1); else asm volatile("cp.async.commit_group;\n");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1));
    __syncthreads();
    const uint4* cur = sm + (it % S) * per_stage;
    for (int i = threadIdx.x; i < per_stage; i += T) acc ^= cur[i].x;
    __syncthreads();
  }
  if (acc == 0x12345678u) atomicXor(out, acc);
}

__global__ void plain_read(const uint4* __restrict__ w, unsigned* out, size_t n) {
  unsigned acc = 0;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = w[i], b = w[i + stride], c = w[i + 2 * stride], d = w[i + 3 * stride];
    acc ^= a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) acc ^= w[i].x;
  if (acc == 0x12345678u) atomicXor(out, acc);
}

template <class F>
float graph_us(F launch_one, int copies) {
  cudaStream_t st; CK(cudaStreamCreate(&st));
  for (int i = 0; i < 3; ++i) launch_one(st, i % copies);
  CK(cudaStreamSynchronize(st));
  const int per_graph = 30;
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < per_graph; ++i) launch_one(st, i % copies);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ts;
  for (int rep = 0; rep < 16; ++rep) {
    CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms; cudaEventElapsedTime(&ms, a, b);
    if (rep) ts.push_back(ms * 1000 / per_graph);
  }
  std::sort(ts.begin(), ts.end());
  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g)); CK(cudaStreamDestroy(st));
  return ts[ts.size() / 2];
}

int main() {
  const size_t bytes = (size_t)K * N * 2;
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  const int copies = (int)(3 * (size_t)p.l2CacheSize / bytes) + 2;
  std::vector<uint4*> w(copies);
  for (auto& x : w) { CK(cudaMalloc(&x, bytes)); CK(cudaMemset(x, 1, bytes)); }
  unsigned* out; CK(cudaMalloc(&out, 4));
  printf("%s, %d SMs; W f16[%d,%d] %.1f MB, %d rotating copies; CUDA graph of 30 launches, median of 15\n", p.name,
         p.multiProcessorCount, K, N, bytes / 1e6, copies);
  auto row = [&](const char* what, float us) { printf("%-58s %8.2f us %7.0f GB/s\n", what, us, bytes / us / 1e3); };
  uint4* dst; CK(cudaMalloc(&dst, bytes));
  row("cudaMemcpy D2D (read+write bytes counted: x2)", graph_us([&](cudaStream_t s, int i) {
        cudaMemcpyAsync(dst, w[i], bytes, cudaMemcpyDeviceToDevice, s); }, copies) / 2);
  for (int blocks : {p.multiProcessorCount * 4, p.multiProcessorCount * 8})
    for (int t : {256, 512}) {
      char name[80]; snprintf(name, sizeof name, "plain read, %d blocks x %d threads", blocks, t);
      row(name, graph_us([&](cudaStream_t s, int i) { plain_read<<<blocks, t, 0, s>>>(w[i], out, bytes / 16); }, copies));
    }
  auto run = [&](auto kernel, int ch, int t, int R, int S, int KS) {
    const int smem = R * ch * 16 * S;
    if (smem > p.sharedMemPerBlockOptin) return;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    dim3 grid(N / (ch * 8), KS);
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, t, smem));
    char name[120];
    snprintf(name, sizeof name, "cols %3d KS %2d rows/stage %4d S %d T %d: %4d blocks %dx/SM %3d KB", ch * 8, KS, R, S, t,
             grid.x * grid.y, per_sm, smem / 1024);
    row(name, graph_us([&](cudaStream_t s, int i) { kernel<<<grid, t, smem, s>>>(w[i], out, R, KS); }, copies));
  };
#define RUN(CH, T, S, R, KS) run(strip_s<CH, T, S>, CH, T, R, S, KS)
  // today's rmsnorm_linear_b1 pick and its fastest timed form
  RUN(6, 128, 2, 1024, 1);
  RUN(8, 128, 2, 256, 1);
  RUN(8, 128, 3, 256, 1);
  // 48 columns, smaller stages, deeper
  RUN(6, 128, 2, 256, 1); RUN(6, 128, 4, 256, 1); RUN(6, 128, 4, 128, 1); RUN(6, 128, 8, 64, 1);
  // 64 columns, K split to fill the SMs
  RUN(8, 128, 4, 128, 1); RUN(8, 128, 4, 128, 2); RUN(8, 128, 4, 64, 2); RUN(8, 128, 4, 64, 4);
  RUN(8, 256, 4, 128, 2);
  // wider strips, K split
  RUN(16, 128, 4, 64, 4); RUN(16, 128, 4, 32, 4); RUN(16, 128, 4, 64, 8); RUN(16, 256, 4, 64, 4);
  RUN(32, 128, 4, 32, 8); RUN(32, 256, 4, 32, 8); RUN(32, 128, 4, 16, 16);
  RUN(64, 256, 4, 16, 16); RUN(64, 256, 4, 8, 32);
  // 32 columns (2 chunks)
  RUN(4, 128, 4, 256, 1); RUN(4, 128, 4, 128, 1);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return 0;
}
