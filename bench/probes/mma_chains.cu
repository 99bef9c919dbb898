// Probe: the [[matrix]] timing facts of mma.sync.aligned.m16n8k16 (f16 in, f32 accumulate) that the tiling rule
// reads (targets::matmul_tiling; docs/targets.md `latency_cycles`, `issue_cycles`). One warp per scheduler (4 warps
// per block, one block per SM on every SM) runs C independent accumulator chains for 4096 steps; cycles per step
// over C give the latency of a dependent mma (C = 1) and the issue interval of independent ones (large C).
#include <cuda_runtime.h>
#include <cstdio>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kSteps = 4096;

template <int C>
__global__ void __launch_bounds__(128, 1) chains(float* out, long long* cycles) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float d[C][4] = {};
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 4
  for (int s = 0; s < kSteps; ++s)
#pragma unroll
    for (int c = 0; c < C; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  const long long t1 = clock64();
  float s = 0;
  for (int c = 0; c < C; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x % 32 == 0) cycles[blockIdx.x * 4 + threadIdx.x / 32] = t1 - t0;
}

template <int C>
int run(int sms, float* out, long long* cycles, long long* host) {
  chains<C><<<sms, 128>>>(out, cycles);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(host, cycles, sizeof(long long) * sms * 4, cudaMemcpyDeviceToHost));
  long long worst = 0;
  for (int i = 0; i < sms * 4; ++i) worst = host[i] > worst ? host[i] : worst;
  printf("%2d chains: %6.2f cycles per step, %5.2f per mma\n", C, double(worst) / kSteps, double(worst) / kSteps / C);
  return 0;
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  const int sms = p.multiProcessorCount;
  float* out; long long* cycles;
  CK(cudaMalloc(&out, sizeof(float) * sms * 128));
  CK(cudaMalloc(&cycles, sizeof(long long) * sms * 4));
  static long long host[4096];
  printf("%s: mma.sync m16n8k16 f16->f32, one warp per scheduler, %d steps (slowest warp)\n", p.name, kSteps);
  run<1>(sms, out, cycles, host); run<1>(sms, out, cycles, host);
  run<2>(sms, out, cycles, host); run<3>(sms, out, cycles, host); run<4>(sms, out, cycles, host);
  run<6>(sms, out, cycles, host); run<8>(sms, out, cycles, host); run<12>(sms, out, cycles, host);
  run<16>(sms, out, cycles, host);
  return 0;
}
