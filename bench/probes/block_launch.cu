// Probe: what one more block costs. A kernel whose every thread reads one f32 and writes it back (so the time is
// the launch and the scheduling of blocks, not bytes), with N blocks of T threads, one CUDA graph of 8 launches on
// rotated buffers, median of 30 replays, us per launch. If blocks were free, the time would not depend on N while
// all fit in one wave (N <= sms x blocks per SM).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
__global__ void touch(const float* __restrict__ in, float* __restrict__ out) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i] * 2.0f;
}
int main() {
  const int kSets = 8, kReps = 30;
  const long long most = 16384LL * 256;
  std::vector<float*> in(kSets), out(kSets);
  for (int s = 0; s < kSets; ++s) { cudaMalloc(&in[s], most * 4); cudaMalloc(&out[s], most * 4); cudaMemset(in[s], 0, most * 4); }
  cudaStream_t st; cudaStreamCreate(&st);
  for (int threads : {32, 64, 128, 256}) {
    for (int blocks : {132, 264, 528, 1056, 2112, 4224, 8448, 16384}) {
      if ((long long)blocks * threads > most) continue;
      cudaGraph_t g; cudaGraphExec_t ge;
      cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
      for (int s = 0; s < kSets; ++s) touch<<<blocks, threads, 0, st>>>(in[s], out[s]);
      cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ge, g, 0);
      for (int w = 0; w < 3; ++w) cudaGraphLaunch(ge, st);
      cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
      std::vector<float> t;
      for (int r = 0; r < kReps; ++r) {
        cudaEventRecord(a, st); cudaGraphLaunch(ge, st); cudaEventRecord(b, st); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000 / kSets);
      }
      std::sort(t.begin(), t.end());
      printf("threads %4d blocks %6d: %.2f us per launch\n", threads, blocks, t[kReps / 2]);
      cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
    }
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) { printf("CUDA error %s\n", cudaGetErrorString(e)); return 1; }
  return 0;
}
