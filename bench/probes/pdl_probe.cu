// Probe: does programmatic dependent launch (griddepcontrol, sm_90) shorten a streaming kernel followed by a small
// kernel that reads its results, when both are in one CUDA graph (the bench's protocol)? Prints the time per pass of
// the stream kernel alone, stream + combine, stream + combine launched with programmatic stream serialization (the
// combine waits in griddepcontrol.wait; the stream kernel triggers its dependents at its start), and the combine
// alone. Measured 2026-11-26 on the H100: 77.3 / 78.6 / 78.4 / 2.4 us and 77.0 / 78.3 / 78.9 / 2.3 us: the second
// kernel costs ~1.3 us in the graph and dependent launch takes none of it.
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
__global__ void __launch_bounds__(128) stream_sum(const int4* __restrict__ in, float* __restrict__ part, long long n_per_block, int trigger) {
  if (trigger) asm volatile("griddepcontrol.launch_dependents;");
  const int4* p = in + blockIdx.x * n_per_block;
  float acc = 0;
  for (long long i = threadIdx.x; i < n_per_block; i += blockDim.x * 4) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = i + u * blockDim.x < n_per_block ? __ldcs(p + i + u * blockDim.x) : make_int4(0,0,0,0);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc += __int_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(~0u, acc, o);
  if ((threadIdx.x & 31) == 0) part[blockIdx.x * 4 + threadIdx.x / 32] = acc;
}
__global__ void __launch_bounds__(512) combine(const float* __restrict__ part, float* __restrict__ out, int wait) {
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
  float s = 0;
  for (int i = threadIdx.x; i < 4 * 128; i += blockDim.x) s += part[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
int main() {
  const int blocks = 128; const long long bytes = 134217728; long long n = bytes / 16 / blocks;
  const int sets = 3;
  std::vector<int4*> in(sets); for (auto& p : in) { cudaMalloc(&p, bytes); cudaMemset(p, 1, bytes); }
  float *part, *out; cudaMalloc(&part, 4 * 128 * 4); cudaMalloc(&out, 128 * 512 * 4);
  cudaStream_t s; cudaStreamCreate(&s);
  for (int mode = 0; mode < 4; ++mode) {  // 0 A only, 1 A;B plain, 2 A;B pdl, 3 B only
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    for (int r = 0; r < sets; ++r) {
      if (mode != 3) stream_sum<<<blocks, 128, 0, s>>>(in[r], part, n, mode == 2);
      if (mode == 1 || mode == 3) combine<<<128, 512, 0, s>>>(part, out, 0);
      if (mode == 2) {
        cudaLaunchConfig_t cfg = {}; cfg.gridDim = 128; cfg.blockDim = 512; cfg.stream = s;
        cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1; cfg.attrs = at; cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, combine, (const float*)part, out, 1);
      }
    }
    cudaStreamEndCapture(s, &g); cudaGraphInstantiate(&ge, g, 0);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int w = 0; w < 5; ++w) cudaGraphLaunch(ge, s);
    std::vector<float> t;
    for (int r = 0; r < 30; ++r) { cudaEventRecord(a, s); cudaGraphLaunch(ge, s); cudaEventRecord(b, s); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000 / sets); }
    std::sort(t.begin(), t.end());
    printf("mode %d (%s): median %.2f us per pass, err %s\n", mode, mode==0?"stream only":mode==1?"stream;combine":mode==2?"stream;combine PDL":"combine only", t[15], cudaGetErrorString(cudaGetLastError()));
  }
}
