#!/usr/bin/env python3
"""Time hand-edited variants of a program's generated CUDA against each other, on the GPU machine.

    python3 bench/probes/harness.py OUT.cu VARIANT.cu...      (on any machine: writes one CUDA program)
    nvcc -O3 -arch=sm_90a -I targets/cuda/device -o /tmp/h OUT.cu -lcuda && /tmp/h

Each VARIANT.cu is `morgana compile SPEC --emit cuda` output for a target without the copy engine ([async] tma =
false: the harness builds no tensor maps), possibly edited by hand: its header comment says the parameters and, per
kernel, the grid, block and shared memory it is launched with (edit those lines too when a change needs another
launch shape). The program launches each variant's kernels in order on the same inputs, checks every output against
the first variant's (max |difference| and the largest |value|), then times each: all launches of a pass over 8
rotated input sets in one CUDA graph, median of 30 replays, microseconds per pass. A variant whose text holds
`// harness: programmatic launch` launches its kernels after the first with programmatic dependent launch (sm_90;
the griddepcontrol instructions in its kernels are the variant's own); a kernel line of the header that ends in
`cluster [x,y,z]` launches that kernel in thread-block clusters of that shape (sm_90). This is how a change to the
lowering is tried by hand before it is built (bench/notes-fast-kernels-2.md). With HARNESS_PROFILE=N in the environment
it only checks, then launches each variant N times (for ncu).
"""
import re
import sys

DTYPES = {"f16": ("__half", 2), "bf16": ("__nv_bfloat16", 2), "f32": ("float", 4)}


def parse(path):
    text = open(path).read()
    params, kernels, prefix = [], [], None
    for m in re.finditer(r"^//   (\w+): (input|output) (\w+)\[([\d,]+)\]$", text, re.M):
        dims = [int(d) for d in m.group(4).split(",")]
        n = 1
        for d in dims:
            n *= d
        params.append((m.group(1), m.group(2), m.group(3), n))
    ws = re.search(r"^//   workspace: workspace (\d+) bytes$", text, re.M)
    for m in re.finditer(r"^//   (\w+) grid \[(\d+),(\d+),(\d+)\] block \[(\d+),(\d+),(\d+)\] shared (\d+) B"
                         r"(?: cluster \[(\d+),(\d+),(\d+)\])?", text, re.M):
        cluster = [int(m.group(i)) for i in range(9, 12)] if m.group(9) else None
        kernels.append((m.group(1), [int(m.group(i)) for i in range(2, 5)], [int(m.group(i)) for i in range(5, 8)],
                        int(m.group(8)), cluster))
    prog = re.search(r"^// program (\w+),", text, re.M).group(1)
    if "TensorMap" in text.split("#include \"morgana_tile.cuh\"")[1]:
        sys.exit(f"{path}: uses the copy engine (TensorMap parameters); emit it for a target with [async] tma = false")
    return text, prog, params, int(ws.group(1)) if ws else 0, kernels, "// harness: programmatic launch" in text


def main():
    out, variants = sys.argv[1], sys.argv[2:]
    parsed = [parse(v) for v in variants]
    params = parsed[0][2]
    src = ["#include <cuda_runtime.h>", "#include <cuda_fp16.h>", "#include <cstdio>", "#include <cstdlib>",
           "#include <vector>", "#include <algorithm>", "#include <cmath>", "#define MG_WARP_SIZE 32",
           '#include "morgana_tile.cuh"']
    for i, (text, prog, p, ws, kernels, _) in enumerate(parsed):
        assert [x[:4] for x in p] == [x[:4] for x in params], f"{variants[i]}: other parameters than {variants[0]}"
        body = text.split('#include "morgana_tile.cuh"', 1)[1].replace(prog + "_", f"v{i}_")
        src.append(f"// ---- variant {i}: {variants[i]}")
        src.append(body)
    src.append(r'''
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
constexpr int kSets = 8, kReps = 30;
struct Buf { void* p; size_t bytes; };
static float to_float(const void* p, int dtype_bytes, bool bf, size_t i) {
  if (dtype_bytes == 4) return ((const float*)p)[i];
  unsigned short b = ((const unsigned short*)p)[i];
  if (bf) { unsigned u = unsigned(b) << 16; float f; memcpy(&f, &u, 4); return f; }
  return __half2float(*(const __half*)&b);
}
''')
    # inputs: kSets sets; outputs and workspace per variant
    src.append("int main() {")
    src.append("  srand(1);")
    src.append("  std::vector<Buf> in[kSets];")
    for name, role, dt, n in params:
        if role != "input":
            continue
        ty, b = DTYPES[dt]
        src.append(f"  {{ std::vector<unsigned char> h({n} * {b});")
        src.append(f"    for (long long i = 0; i < {n}; ++i) {{ float v = (rand() / (float)RAND_MAX) * 2 - 1;")
        if dt == "f16":
            src.append("      __half x = __float2half(v); memcpy(&h[i * 2], &x, 2); }")
        elif dt == "bf16":
            src.append("      unsigned u; memcpy(&u, &v, 4); unsigned short s = u >> 16; memcpy(&h[i * 2], &s, 2); }")
        else:
            src.append("      memcpy(&h[i * 4], &v, 4); }")
        src.append(f"    for (int s = 0; s < kSets; ++s) {{ void* d; CK(cudaMalloc(&d, h.size())); "
                   f"CK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice)); in[s].push_back({{d, h.size()}}); }} }}")
    outs = [(name, dt, n) for name, role, dt, n in params if role == "output"]
    src.append(f"  const int nv = {len(parsed)};")
    src.append("  std::vector<std::vector<Buf>> out(nv); std::vector<void*> ws(nv);")
    for i, (_, _, _, wsb, _, _) in enumerate(parsed):
        for name, dt, n in outs:
            src.append(f"  {{ void* d; CK(cudaMalloc(&d, {n} * {DTYPES[dt][1]})); out[{i}].push_back({{d, {n} * {DTYPES[dt][1]}}}); }}")
        src.append(f"  CK(cudaMalloc(&ws[{i}], {max(wsb, 256)}));")
    src.append("  cudaStream_t st; CK(cudaStreamCreate(&st));")
    for i, (_, _, p, wsb, kernels, programmatic) in enumerate(parsed):
        src.append(f"  auto launch{i} = [&](int s) {{")
        for ki, (kname, grid, block, smem, cluster) in enumerate(kernels):
            kname = kname.replace(parsed[i][1] + "_", f"v{i}_")
            if smem > 48 * 1024:
                src.append(f"    static bool attr = false; if (!attr) {{ CK(cudaFuncSetAttribute({kname}, "
                           f"cudaFuncAttributeMaxDynamicSharedMemorySize, {smem})); attr = true; }}")
            args, ii, oi = [], 0, 0
            for name, role, dt, n in p:
                ty = "mg::" + dt if dt != "f32" else "float"
                if role == "input":
                    args.append(f"(const {ty}*)in[s][{ii}].p")
                    ii += 1
                else:
                    args.append(f"({ty}*)out[{i}][{oi}].p")
                    oi += 1
            if wsb > 0:  # the kernels take a workspace pointer only where the program has a workspace
                args.append(f"(unsigned char*)ws[{i}]")
            if cluster:
                # A thread-block cluster (sm_90), set by hand on the kernel's header line (`cluster [x,y,z]`); more
                # than 8 blocks need the non-portable size allowed.
                if cluster[0] * cluster[1] * cluster[2] > 8:
                    src.append(f"    static bool np{ki} = false; if (!np{ki}) {{ CK(cudaFuncSetAttribute({kname}, "
                               f"cudaFuncAttributeNonPortableClusterSizeAllowed, 1)); np{ki} = true; }}")
                src.append("    { cudaLaunchConfig_t c = {}; cudaLaunchAttribute a[1]; "
                           "a[0].id = cudaLaunchAttributeClusterDimension; "
                           f"a[0].val.clusterDim.x = {cluster[0]}; a[0].val.clusterDim.y = {cluster[1]}; "
                           f"a[0].val.clusterDim.z = {cluster[2]}; "
                           f"c.gridDim = dim3({grid[0]},{grid[1]},{grid[2]}); c.blockDim = dim3({block[0]},{block[1]},{block[2]}); "
                           f"c.dynamicSmemBytes = {smem}; c.stream = st; c.attrs = a; c.numAttrs = 1; "
                           f"CK(cudaLaunchKernelEx(&c, {kname}, {', '.join(args)})); }}")
            elif programmatic and ki > 0:
                # Programmatic dependent launch (sm_90): the kernel may start while the one before finishes; it
                # waits for it with griddepcontrol.wait (written into the variant by hand).
                src.append("    { cudaLaunchConfig_t c = {}; cudaLaunchAttribute a[1]; "
                           "a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; "
                           "a[0].val.programmaticStreamSerializationAllowed = 1; "
                           f"c.gridDim = dim3({grid[0]},{grid[1]},{grid[2]}); c.blockDim = dim3({block[0]},{block[1]},{block[2]}); "
                           f"c.dynamicSmemBytes = {smem}; c.stream = st; c.attrs = a; c.numAttrs = 1; "
                           f"CK(cudaLaunchKernelEx(&c, {kname}, {', '.join(args)})); }}")
            else:
                src.append(f"    {kname}<<<dim3({grid[0]},{grid[1]},{grid[2]}), dim3({block[0]},{block[1]},{block[2]}), "
                           f"{smem}, st>>>({', '.join(args)});")
        src.append("  };")
    # check
    src.append("  std::vector<std::vector<std::vector<unsigned char>>> host(nv);")
    for i in range(len(parsed)):
        src.append(f"  launch{i}(0); CK(cudaGetLastError()); CK(cudaStreamSynchronize(st));")
        src.append(f"  for (auto& b : out[{i}]) {{ std::vector<unsigned char> h(b.bytes); "
                   f"CK(cudaMemcpy(h.data(), b.p, b.bytes, cudaMemcpyDeviceToHost)); host[{i}].push_back(h); }}")
    for oi, (name, dt, n) in enumerate(outs):
        b, bf = DTYPES[dt][1], "true" if dt == "bf16" else "false"
        src.append(f"  for (int v = 1; v < nv; ++v) {{ double md = 0, mx = 0; bool nan = false;")
        src.append(f"    for (long long i = 0; i < {n}; ++i) {{ float x = to_float(host[0][{oi}].data(), {b}, {bf}, i), "
                   f"y = to_float(host[v][{oi}].data(), {b}, {bf}, i); if (y != y) nan = true; "
                   f"md = std::max(md, (double)fabsf(x - y)); mx = std::max(mx, (double)fabsf(x)); }}")
        src.append(f'    printf("variant %d output {name}: max |diff| %.3g (largest |value| %.3g)%s\\n", v, md, mx, '
                   f'nan ? " NaN!" : ""); }}')
    # under a profiler (HARNESS_PROFILE=N): N launches of each variant on rotated sets, no timing
    src.append('  if (const char* np = getenv("HARNESS_PROFILE")) {')
    for i in range(len(parsed)):
        src.append(f"    for (int r = 0; r < atoi(np); ++r) launch{i}(r % kSets);")
    src.append("    CK(cudaStreamSynchronize(st)); return 0;\n  }")
    # time
    for i, v in enumerate(variants):
        src.append("  {")
        src.append("    cudaGraph_t g; cudaGraphExec_t ge;")
        src.append("    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));")
        src.append(f"    for (int s = 0; s < kSets; ++s) launch{i}(s);")
        src.append("    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));")
        src.append("    for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, st));")
        src.append("    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); std::vector<float> t;")
        src.append("    for (int r = 0; r < kReps; ++r) { CK(cudaEventRecord(a, st)); CK(cudaGraphLaunch(ge, st)); "
                   "CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); "
                   "t.push_back(ms * 1000 / kSets); }")
        src.append("    std::sort(t.begin(), t.end());")
        src.append(f'    printf("variant {i} ({v}): %.2f us per pass (min %.2f)\\n", t[kReps / 2], t[0]);')
        src.append("  }")
    src.append("  return 0;\n}")
    open(out, "w").write("\n".join(src) + "\n")


if __name__ == "__main__":
    main()
