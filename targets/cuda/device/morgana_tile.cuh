// morgana_tile.cuh: the tile API (docs/lowering.md) for NVIDIA GPUs, in CUDA C++.
//
// The code morgana generates calls these functions; each implements one statement of the kernel IR with the
// meaning targets/lower/kernel_ir.h gives it, for every thread of the block together. The compiler embeds this file
// and hands it to NVRTC by name, so it includes nothing and needs no include path.
//
// These are the straightforward versions: threads stride over the elements of the result (thread i takes elements
// i, i + blockDim.x, ...), a matmul element is a dot product over shared memory, a reduction folds one output
// element per thread in order. Faster versions (mma.sync / wgmma matmuls, cp.async loads, warp-cooperative
// reductions) replace a function here without changing its signature or the emitter. Two promises the lowering
// relies on: a function reads an element's inputs and writes that element from the same thread (so an elementwise
// op may write over its operand), and a function that needs threads to exchange data synchronises inside.
//
// Shapes are compile-time: Shape<D0,D1,D2,D3> for a tile (dims aligned at the last; a smaller rank has leading 1s),
// Global<N0..N3, S0..S3> for a tensor's extents and element strides. Tiles are dense row-major arrays.
#ifndef MORGANA_TILE_CUH
#define MORGANA_TILE_CUH

#ifndef MG_WARP_SIZE
#error "the generated source defines MG_WARP_SIZE (from the target file) before including morgana_tile.cuh"
#endif

namespace mg {

typedef long long i64;

// The warp size of the target, for functions that use warp-level operations (none does yet).
constexpr int kWarpSize = MG_WARP_SIZE;

// ---- element types: 16-bit floats are stored as their bits; all arithmetic is f32 ----

struct f16 {
  unsigned short bits;
};
struct bf16 {
  unsigned short bits;
};

// f16 <-> f32 by PTX. MG_HOST_EMULATION is defined only by the test harness that compiles generated code for the
// host (tests/targets/cuda/host_prelude.h), which supplies the two conversions instead.
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(f16 x) {
#ifdef MG_HOST_EMULATION
  return mg_host_f16_to_f32(x.bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#endif
}
__device__ __forceinline__ float to_f32(bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }

template <class T>
struct FromF32;
template <>
struct FromF32<float> {
  __device__ __forceinline__ static float cvt(float x) { return x; }
};
template <>
struct FromF32<f16> {
  __device__ __forceinline__ static f16 cvt(float x) {
    f16 r;
#ifdef MG_HOST_EMULATION
    r.bits = mg_host_f32_to_f16(x);
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
#endif
    return r;
  }
};
template <>
struct FromF32<bf16> {
  // Round to nearest, ties to even; a NaN stays a (quiet) NaN instead of rounding into infinity.
  __device__ __forceinline__ static bf16 cvt(float x) {
    unsigned u = __float_as_uint(x);
    bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      r.bits = static_cast<unsigned short>((u >> 16) | 0x40u);
      return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.bits = static_cast<unsigned short>(u >> 16);
    return r;
  }
};
template <class T>
__device__ __forceinline__ T from_f32(float x) {
  return FromF32<T>::cvt(x);
}

// A value as another storage type: a plain copy when the types agree (no rounding through f32 needed).
template <class To, class From>
struct Convert {
  __device__ __forceinline__ static To cvt(From x) { return from_f32<To>(to_f32(x)); }
};
template <class T>
struct Convert<T, T> {
  __device__ __forceinline__ static T cvt(T x) { return x; }
};
template <class To, class From>
__device__ __forceinline__ To convert(From x) {
  return Convert<To, From>::cvt(x);
}

// The max of the reference interpreter: a NaN in the running value stays.
__device__ __forceinline__ float max_nan(float a, float b) { return (a != a || a >= b) ? a : b; }

// ---- shapes and indices ----

template <int D0, int D1, int D2, int D3>
struct Shape {
  static constexpr int d0 = D0, d1 = D1, d2 = D2, d3 = D3;
  static constexpr int size = D0 * D1 * D2 * D3;
};

template <i64 N0, i64 N1, i64 N2, i64 N3, i64 S0, i64 S1, i64 S2, i64 S3>
struct Global {
  static constexpr i64 n0 = N0, n1 = N1, n2 = N2, n3 = N3;
  static constexpr i64 s0 = S0, s1 = S1, s2 = S2, s3 = S3;
};

template <class S>
__host__ __device__ constexpr int extent(int d) {
  return d == 0 ? S::d0 : d == 1 ? S::d1 : d == 2 ? S::d2 : S::d3;
}
// Elements of S after dim d (the stride of dim d in a dense row-major tile).
template <class S>
__host__ __device__ constexpr int inner(int d) {
  return d >= 3 ? 1 : extent<S>(3) * (d >= 2 ? 1 : extent<S>(2) * (d >= 1 ? 1 : extent<S>(1)));
}

struct Idx {
  int i0, i1, i2, i3;
};

template <class S>
__device__ __forceinline__ Idx unflatten(int e) {
  Idx x;
  x.i3 = e % S::d3;
  e /= S::d3;
  x.i2 = e % S::d2;
  e /= S::d2;
  x.i1 = e % S::d1;
  x.i0 = e / S::d1;
  return x;
}

// The element of a tile of shape S that index x (of a shape S broadcasts to) reads: index 0 along S's 1-dims.
template <class S>
__device__ __forceinline__ int broadcast_offset(const Idx& x) {
  return (((S::d0 == 1 ? 0 : x.i0) * S::d1 + (S::d1 == 1 ? 0 : x.i1)) * S::d2 + (S::d2 == 1 ? 0 : x.i2)) * S::d3 +
         (S::d3 == 1 ? 0 : x.i3);
}

// Whether the element at origin o + x lies inside G along the dims in MASK (bit d: dim d is checked).
template <class G, int MASK>
__device__ __forceinline__ bool inside(i64 g0, i64 g1, i64 g2, i64 g3) {
  return (!(MASK & 1) || g0 < G::n0) && (!(MASK & 2) || g1 < G::n1) && (!(MASK & 4) || g2 < G::n2) &&
         (!(MASK & 8) || g3 < G::n3);
}

// ---- statements ----

// dst = the tile of src at origin (o0..o3); elements outside the tensor along the masked dims read `pad`.
template <class S, class G, int MASK, class T>
__device__ __forceinline__ void load(T* dst, const T* __restrict__ src, i64 o0, i64 o1, i64 o2, i64 o3, float pad) {
  const T fill = from_f32<T>(pad);
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const Idx x = unflatten<S>(e);
    const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
    dst[e] = inside<G, MASK>(g0, g1, g2, g3) ? src[g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3 * G::s3] : fill;
  }
}

// The tile src written into dst at origin (o0..o3), converted to dst's type; elements outside along the masked
// dims are dropped.
template <class S, class G, int MASK, class U, class T>
__device__ __forceinline__ void store(U* __restrict__ dst, const T* src, i64 o0, i64 o1, i64 o2, i64 o3) {
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const Idx x = unflatten<S>(e);
    const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
    if (inside<G, MASK>(g0, g1, g2, g3)) dst[g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3 * G::s3] = convert<U>(src[e]);
  }
}

// dst = f(a), elementwise (a has dst's shape).
template <class S, class TA, class F>
__device__ __forceinline__ void unary(float* dst, const TA* a, F f) {
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) dst[e] = f(to_f32(a[e]));
}

// dst = f(a, b), elementwise; a and b broadcast to dst's shape.
template <class S, class SA, class SB, class TA, class TB, class F>
__device__ __forceinline__ void binary(float* dst, const TA* a, const TB* b, F f) {
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const Idx x = unflatten<S>(e);
    dst[e] = f(to_f32(a[broadcast_offset<SA>(x)]), to_f32(b[broadcast_offset<SB>(x)]));
  }
}

// dst = a·b over the last two dims, batched over the first two (which broadcast); with `accumulate`, dst += a·b.
// S = [B0, B1, M, N], SA = [A0, A1, M, K], SB = [C0, C1, K, N].
template <class S, class SA, class SB, class TA, class TB>
__device__ __forceinline__ void matmul(float* dst, const TA* a, const TB* b, bool accumulate) {
  constexpr int M = S::d2, N = S::d3, K = SA::d3;
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const Idx x = unflatten<S>(e);
    const TA* pa = a + ((SA::d0 == 1 ? 0 : x.i0) * SA::d1 + (SA::d1 == 1 ? 0 : x.i1)) * (M * K) + x.i2 * K;
    const TB* pb = b + ((SB::d0 == 1 ? 0 : x.i0) * SB::d1 + (SB::d1 == 1 ? 0 : x.i1)) * (K * N) + x.i3;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_f32(pa[k]) * to_f32(pb[k * N]);
    dst[e] = accumulate ? dst[e] + acc : acc;
  }
}

// Folds dim DIM of x (shape SX) to TO groups: element j of the result folds x[j], x[j + TO], x[j + 2 TO], ... in
// that order (the reference interpreter's order), one result element per thread.
template <class SX, class SY, int DIM, int TO, class T, class Op>
__device__ __forceinline__ void reduce(float* dst, const T* x, Op op) {
  constexpr int n = extent<SX>(DIM), in = inner<SX>(DIM), groups = n / TO;
  for (int e = threadIdx.x; e < SY::size; e += blockDim.x) {
    const int i = e % in, j = e / in % TO, o = e / in / TO;
    const T* p = x + (o * n + j) * in + i;
    float acc = to_f32(p[0]);
    for (int k = 1; k < groups; ++k) acc = op(acc, to_f32(p[k * TO * in]));
    dst[e] = acc;
  }
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return max_nan(a, b); }
};

template <class SX, class SY, int DIM, int TO, class T>
__device__ __forceinline__ void reduce_sum(float* dst, const T* x) {
  reduce<SX, SY, DIM, TO>(dst, x, SumOp());
}
template <class SX, class SY, int DIM, int TO, class T>
__device__ __forceinline__ void reduce_max(float* dst, const T* x) {
  reduce<SX, SY, DIM, TO>(dst, x, MaxOp());
}

// dst = a ‖ b along dim DIM.
template <class S, class SA, class SB, int DIM, class TD, class TA, class TB>
__device__ __forceinline__ void concat(TD* dst, const TA* a, const TB* b) {
  constexpr int n = extent<S>(DIM), n0 = extent<SA>(DIM), n1 = extent<SB>(DIM), in = inner<S>(DIM);
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const int i = e % in, j = e / in % n, o = e / in / n;
    dst[e] = j < n0 ? convert<TD>(a[(o * n0 + j) * in + i]) : convert<TD>(b[(o * n1 + j - n0) * in + i]);
  }
}

// Accumulators: the first iteration takes x, later ones fold it in.
template <class S, class T>
__device__ __forceinline__ void acc_sum(float* acc, const T* x, bool first) {
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) acc[e] = first ? to_f32(x[e]) : acc[e] + to_f32(x[e]);
}
template <class S, class T>
__device__ __forceinline__ void acc_max(float* acc, const T* x, bool first) {
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) acc[e] = first ? to_f32(x[e]) : max_nan(acc[e], to_f32(x[e]));
}

// The online-softmax accumulator: with M the running max of m (shape SM, broadcast to S) and M' = max(M, m),
// acc = acc * exp(M - M') + x * exp(m - M'), then M = M'.
template <class S, class SM, class T, class TM>
__device__ __forceinline__ void acc_rescale_sum(float* acc, float* run_max, const T* x, const TM* m, bool first) {
  if (first) {
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) acc[e] = to_f32(x[e]);
    for (int e = threadIdx.x; e < SM::size; e += blockDim.x) run_max[e] = to_f32(m[e]);
    return;
  }
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const int j = broadcast_offset<SM>(unflatten<S>(e));
    const float mj = to_f32(m[j]), old = run_max[j], next = max_nan(old, mj);
    acc[e] = acc[e] * expf(old - next) + to_f32(x[e]) * expf(mj - next);
  }
  __syncthreads();  // every thread has read the old maxima before they change
  for (int e = threadIdx.x; e < SM::size; e += blockDim.x) run_max[e] = max_nan(run_max[e], to_f32(m[e]));
}

}  // namespace mg

#endif  // MORGANA_TILE_CUH
