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

// The warp size of the target (target file), for the functions that work by whole warps.
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

// ---- global <-> shared copies ----

template <int VEC>
struct Vec;
// VEC bytes as one access: the unsigned type of that width, and a global store of that width from words (inline
// PTX: the compiler splits a plain 16-byte struct store of converted values into 4-byte stores).
template <>
struct Vec<4> {
  typedef unsigned type;
  __device__ __forceinline__ static void store(void* p, const unsigned* w) { *static_cast<unsigned*>(p) = w[0]; }
};
template <>
struct Vec<8> {
  typedef uint2 type;
  __device__ __forceinline__ static void store(void* p, const unsigned* w) {
#ifdef MG_HOST_EMULATION
    mg_host_copy(p, w, 8);
#else
    asm volatile("st.global.v2.b32 [%0], {%1, %2};\n" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
#endif
  }
};
template <>
struct Vec<16> {
  typedef uint4 type;
  __device__ __forceinline__ static void store(void* p, const unsigned* w) {
#ifdef MG_HOST_EMULATION
    mg_host_copy(p, w, 16);
#else
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
#endif
  }
};

// An element's bits, to pack elements into the words of a vector access.
__device__ __forceinline__ unsigned word_bits(f16 x) { return x.bits; }
__device__ __forceinline__ unsigned word_bits(bf16 x) { return x.bits; }
__device__ __forceinline__ unsigned word_bits(float x) { return __float_as_uint(x); }

// One 16-byte asynchronous copy global -> shared (cp.async.cg: cached in L2 only, the data is used once per
// block).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src) {
#ifdef MG_HOST_EMULATION
  mg_host_copy(dst, src, 16);
#else
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#endif
}
// The kernel IR's AsyncWait: closes the batch of copies issued since the last one (a cp.async group) and waits until
// at most PENDING batches of this thread are incomplete.
template <int PENDING>
__device__ __forceinline__ void async_wait() {
#ifndef MG_HOST_EMULATION
  asm volatile("cp.async.commit_group;\ncp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
#endif
}

// How a load moves its tile: plain loads and stores; asynchronous copies waited for before the load returns; or
// asynchronous copies left in flight, part of the batch the next async_wait closes (pipelined loads).
enum Copy { copy_sync = 0, copy_async = 1, copy_async_batch = 2 };

// dst = the tile of src at origin (o0..o3); elements outside the tensor along the masked dims read `pad`.
// VEC > sizeof(T): each thread moves VEC bytes per access (lowering proved the alignment: the last dim is
// contiguous, and every origin, stride and extent is a multiple of the vector; a masked last dim holds whole
// vectors); COPY (mg::Copy): how the vectors move.
template <class S, class G, int MASK, int VEC, int COPY, class T>
__device__ __forceinline__ void load(T* dst, const T* __restrict__ src, i64 o0, i64 o1, i64 o2, i64 o3, float pad) {
  if constexpr (VEC > static_cast<int>(sizeof(T))) {
    static_assert(G::s3 == 1 && S::d3 % (VEC / sizeof(T)) == 0, "vector loads need a contiguous, whole last dim");
    static_assert(COPY == copy_sync || VEC == 16, "cp.async.cg moves 16 bytes");
    constexpr int per = VEC / sizeof(T), vectors = S::size / per;
    typedef typename Vec<VEC>::type V;
#pragma unroll 4
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
      const int e = i * per;
      const Idx x = unflatten<S>(e);
      const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
      if (inside<G, MASK>(g0, g1, g2, g3)) {
        const T* from = src + g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3;
        if constexpr (COPY != copy_sync)
          cp_async_16(dst + e, from);
        else
          *reinterpret_cast<V*>(dst + e) = *reinterpret_cast<const V*>(from);
      } else {
        const T fill = from_f32<T>(pad);
        for (int j = 0; j < per; ++j) dst[e + j] = fill;
      }
    }
    if constexpr (COPY == copy_async) async_wait<0>();
  } else {
    const T fill = from_f32<T>(pad);
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const Idx x = unflatten<S>(e);
      const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
      dst[e] = inside<G, MASK>(g0, g1, g2, g3) ? src[g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3 * G::s3] : fill;
    }
  }
}

// The tile src written into dst at origin (o0..o3), converted to dst's type; elements outside along the masked
// dims are dropped. VEC > sizeof(U): VEC bytes of U per global access, as for load.
template <class S, class G, int MASK, int VEC, class U, class T>
__device__ __forceinline__ void store(U* __restrict__ dst, const T* src, i64 o0, i64 o1, i64 o2, i64 o3) {
  if constexpr (VEC > static_cast<int>(sizeof(U))) {
    static_assert(G::s3 == 1 && S::d3 % (VEC / sizeof(U)) == 0, "vector stores need a contiguous, whole last dim");
    constexpr int per = VEC / sizeof(U), vectors = S::size / per;
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
      const int e = i * per;
      const Idx x = unflatten<S>(e);
      const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
      if (!inside<G, MASK>(g0, g1, g2, g3)) continue;
      unsigned w[VEC / 4];
#pragma unroll
      for (int j = 0; j < VEC / 4; ++j) w[j] = 0;
#pragma unroll
      for (int j = 0; j < per; ++j) w[j * sizeof(U) / 4] |= word_bits(convert<U>(src[e + j])) << (8 * (j * sizeof(U) % 4));
      Vec<VEC>::store(dst + g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3, w);
    }
  } else {
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const Idx x = unflatten<S>(e);
      const i64 g0 = o0 + x.i0, g1 = o1 + x.i1, g2 = o2 + x.i2, g3 = o3 + x.i3;
      if (inside<G, MASK>(g0, g1, g2, g3))
        dst[g0 * G::s0 + g1 * G::s1 + g2 * G::s2 + g3 * G::s3] = convert<U>(src[e]);
    }
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

// ---- matmul on tensor cores: mma.sync m16n8k16 with ldmatrix ----
//
// Atom is the struct the emitter writes from the target file's [[matrix]] row (shape and lane layouts). Operands
// come from shared memory with ldmatrix, whose distribution of a 16x16 A block (.x4) and of a 16x8 B block stored
// k-major (.x2.trans) is fixed by the PTX ISA; the static_asserts below prove at compile time that it is the
// distribution the target file describes, so a wrong layout row fails to compile instead of computing garbage. The
// accumulator is placed by the file's C layout.

// Two 16-bit elements (their word_bits) as one fragment register, the first in the low half.
__device__ __forceinline__ unsigned pack2(unsigned lo, unsigned hi) { return lo | (hi << 16); }

// What ldmatrix gives lane `lane` as its value v (two 16-bit values per register): for .x4 (A), register r from
// matrix r (rows 0-7 / 8-15 alternate, then columns 8-15), row lane/4, columns 2*(lane%4) + {0,1}; for .x2.trans
// (B stored as k rows of n), register r holds rows (k) 8r + 2*(lane%4) + {0,1} of column (n) lane/4.
__host__ __device__ constexpr int ldsm_a_row(int lane, int v) { return lane / 4 + 8 * ((v / 2) % 2); }
__host__ __device__ constexpr int ldsm_a_col(int lane, int v) { return 2 * (lane % 4) + v % 2 + 8 * (v / 4); }
__host__ __device__ constexpr int ldsm_b_row(int lane, int v) { return 8 * (v / 2) + 2 * (lane % 4) + v % 2; }
__host__ __device__ constexpr int ldsm_b_col(int lane, int v) { return lane / 4; }

template <class Atom>
__host__ __device__ constexpr bool ldmatrix_matches() {
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int v = 0; v < Atom::a_values; ++v)
      if (Atom::a_row(lane, v) != ldsm_a_row(lane, v) || Atom::a_col(lane, v) != ldsm_a_col(lane, v)) return false;
    for (int v = 0; v < Atom::b_values; ++v)
      if (Atom::b_row(lane, v) != ldsm_b_row(lane, v) || Atom::b_col(lane, v) != ldsm_b_col(lane, v)) return false;
  }
  return true;
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
#ifdef MG_HOST_EMULATION
  mg_host_ldmatrix(r, 4, false, p);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#endif
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], const void* p) {
#ifdef MG_HOST_EMULATION
  mg_host_ldmatrix(r, 2, true, p);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
#endif
}

template <class T>
struct MmaType;
template <>
struct MmaType<f16> {
  static constexpr bool bf = false;
};
template <>
struct MmaType<bf16> {
  static constexpr bool bf = true;
};

// d = a·b + d for one 16x8x16 atom, f32 accumulate.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef MG_HOST_EMULATION
  mg_host_mma_m16n8k16(d, a, b, MmaType<T>::bf);
#else
  if constexpr (MmaType<T>::bf)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The A fragment of rows m0.. and columns k0.. of a row-major [M, K] tile. Rows past M read row M-1 instead
// (their results are never stored; A's rows are independent). An f32 tile (softmax probabilities feeding P·V)
// is converted to the instruction's type in registers, element by element through the file's A layout.
template <class Atom, int M, int K, class T, class TA>
__device__ __forceinline__ void load_a(unsigned (&a)[4], const TA* tile, int m0, int k0, int lane) {
  if constexpr (sizeof(TA) == 2) {
    // Lanes 8j..8j+7 address the rows of matrix j: rows 0-7 and 8-15 of the atom, then the same at column 8.
    int row = m0 + lane % 8 + 8 * ((lane / 8) % 2);
    row = row < M ? row : M - 1;
    ldmatrix_x4(a, tile + row * K + k0 + 8 * (lane / 16));
  } else {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      unsigned h[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int v = 2 * r + half;
        int row = m0 + Atom::a_row(lane, v);
        row = row < M ? row : M - 1;
        h[half] = word_bits(from_f32<T>(to_f32(tile[row * K + k0 + Atom::a_col(lane, v)])));
      }
      a[r] = pack2(h[0], h[1]);
    }
  }
}

// The B fragment of rows k0.. and columns n0.. of a row-major [K, N] tile: ldmatrix.trans for 16-bit tiles (lanes
// 0-15 address rows k0..k0+15 of the atom's 8 columns; lanes 16-31 repeat them), element by element through the
// file's B layout, converted, for an f32 tile.
template <class Atom, int N, class T, class TB>
__device__ __forceinline__ void load_b(unsigned (&b)[2], const TB* tile, int k0, int n0, int lane) {
  if constexpr (sizeof(TB) == 2) {
    ldmatrix_x2_trans(b, tile + (k0 + lane % 16) * N + n0);
  } else {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      unsigned h[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int v = 2 * r + half;
        h[half] = word_bits(from_f32<T>(tile[(k0 + Atom::b_row(lane, v)) * N + n0 + Atom::b_col(lane, v)]));
      }
      b[r] = pack2(h[0], h[1]);
    }
  }
}

template <class TA, class TB>
struct Type16 {
  typedef TB type;
};
template <class TB>
struct Type16<float, TB> {
  typedef TB type;
};
template <class TA>
struct Type16<TA, float> {
  typedef TA type;
};

// How warps share a matmul on matrix instructions (lowering's choice, Stmt::atoms_n and Stmt::k_split): a task is one
// row block of Atom::m rows by ATOMS_N atoms of Atom::n columns of one batch, so each A fragment serves ATOMS_N
// atoms; the warps form WARPS / SPLIT teams, team w % teams taking tasks w, w + teams, ... and part w / teams of each
// task's K steps. Warps past teams * SPLIT have no task.
template <class Atom, class S, int K, int ATOMS_N, int SPLIT, int WARPS>
struct WarpTiling {
  static constexpr int M = S::d2, N = S::d3;
  static_assert(N % (Atom::n * ATOMS_N) == 0 && K % (Atom::k * SPLIT) == 0, "lowering chose the tiling for N and K");
  static constexpr int row_blocks = (M + Atom::m - 1) / Atom::m, groups_n = N / (Atom::n * ATOMS_N);
  static constexpr int tasks = S::d0 * S::d1 * row_blocks * groups_n, teams = WARPS / SPLIT;
  static constexpr int per_warp = (tasks + teams - 1) / teams, k_steps = K / Atom::k / SPLIT;
};

// acc[j] (+)= the task's product over K steps [k_first, k_first + k_steps) for atom j of the task: ATOMS_N
// accumulators of Atom::c_values in registers, A loaded once per K step and shared by the atoms.
template <class Atom, class S, class SA, class SB, int ATOMS_N, class TA, class TB>
__device__ __forceinline__ void mma_task(float (&acc)[ATOMS_N][Atom::c_values], const TA* a, const TB* b, int task,
                                         int k_first, int k_steps, int lane) {
  typedef typename Type16<TA, TB>::type T;  // the 16-bit operand's type (lowering allows one f32 operand)
  constexpr int M = S::d2, N = S::d3, K = SA::d3;
  constexpr int groups_n = N / (Atom::n * ATOMS_N), row_blocks = (M + Atom::m - 1) / Atom::m;
  const int ng = task % groups_n, mb = task / groups_n % row_blocks, bt = task / groups_n / row_blocks;
  const int b0 = bt / S::d1, b1 = bt % S::d1;
  const TA* pa = a + ((SA::d0 == 1 ? 0 : b0) * SA::d1 + (SA::d1 == 1 ? 0 : b1)) * (M * K);
  const TB* pb = b + ((SB::d0 == 1 ? 0 : b0) * SB::d1 + (SB::d1 == 1 ? 0 : b1)) * (K * N);
  const int m0 = mb * Atom::m, n0 = ng * ATOMS_N * Atom::n;
#pragma unroll 2
  for (int step = k_first; step < k_first + k_steps; ++step) {
    const int k0 = step * Atom::k;
    unsigned fa[4];
    load_a<Atom, M, K, T>(fa, pa, m0, k0, lane);
#pragma unroll
    for (int j = 0; j < ATOMS_N; ++j) {
      unsigned fb[2];
      load_b<Atom, N, T>(fb, pb, k0, n0 + j * Atom::n, lane);
      mma_16816<T>(acc[j], fa, fb);
    }
  }
}

// Element (row, col) of the task's [M, N] batch slice that value v of atom j of `lane` holds, or -1 past M.
template <class Atom, class S, int ATOMS_N>
__device__ __forceinline__ int task_element(int task, int j, int v, int lane) {
  constexpr int M = S::d2, N = S::d3, groups_n = N / (Atom::n * ATOMS_N), row_blocks = (M + Atom::m - 1) / Atom::m;
  const int ng = task % groups_n, mb = task / groups_n % row_blocks, bt = task / groups_n / row_blocks;
  const int row = mb * Atom::m + Atom::c_row(lane, v), col = ng * ATOMS_N * Atom::n + j * Atom::n + Atom::c_col(lane, v);
  return row < M ? (bt * M + row) * N + col : -1;
}

// dst = a·b (with `accumulate`, dst += a·b) on matrix instructions, batched like mg::matmul, dst in shared memory:
// each warp task reads dst (when accumulating) and writes it once through the C layout. (Splitting K among idle
// warps here, their partials meeting through shared-memory atomics, was measured on the H100 and was slower:
// gated_mlp 75 -> 95 us; bench/notes-fast-kernels-1.md. Split K lives in mg::Fragments, whose partials meet once.)
template <class Atom, class S, class SA, class SB, int ATOMS_N, class TA, class TB>
__device__ __forceinline__ void matmul_atom(float* dst, const TA* a, const TB* b, bool accumulate) {
  static_assert(Atom::m == 16 && Atom::n == 8 && Atom::k == 16, "morgana_tile.cuh implements m16n8k16");
  static_assert(ldmatrix_matches<Atom>(), "the target file's A/B lane layouts are not ldmatrix's");
  constexpr int K = SA::d3;
  typedef WarpTiling<Atom, S, K, ATOMS_N, 1, 1> Tiling;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  for (int task = warp; task < Tiling::tasks; task += warps) {
    float acc[ATOMS_N][Atom::c_values];
#pragma unroll
    for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) {
        const int e = task_element<Atom, S, ATOMS_N>(task, j, v, lane);
        acc[j][v] = accumulate && e >= 0 ? dst[e] : 0.0f;
      }
    mma_task<Atom, S, SA, SB, ATOMS_N>(acc, a, b, task, 0, K / Atom::k, lane);
#pragma unroll
    for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) {
        const int e = task_element<Atom, S, ATOMS_N>(task, j, v, lane);
        if (e >= 0) dst[e] = acc[j][v];
      }
  }
}

// A matmul's f32 result [S] held in registers (kernel IR Space::registers), in the C fragments of Atom, tiled over
// the block's WARPS warps as WarpTiling says; K is the reduction extent. mma() runs the matmul into the registers
// (accumulating across a kernel's for-loop without touching shared memory); publish() stores the result to a shared
// tile once, the SPLIT warps of a task adding their parts in turn (SPLIT - 1 barriers, every thread must call it).
template <class Atom, class S, int K, int ATOMS_N, int SPLIT, int WARPS>
struct Fragments {
  static_assert(Atom::m == 16 && Atom::n == 8 && Atom::k == 16, "morgana_tile.cuh implements m16n8k16");
  static_assert(ldmatrix_matches<Atom>(), "the target file's A/B lane layouts are not ldmatrix's");
  typedef WarpTiling<Atom, S, K, ATOMS_N, SPLIT, WARPS> Tiling;
  float acc[Tiling::per_warp][ATOMS_N][Atom::c_values];

  template <class SA, class SB, class TA, class TB>
  __device__ __forceinline__ void mma(const TA* a, const TB* b, bool accumulate) {
    static_assert(SA::d3 == K, "the tiling was chosen for this K");
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int team = warp % Tiling::teams, part = warp / Tiling::teams;
    if (part >= SPLIT) return;
#pragma unroll
    for (int i = 0; i < Tiling::per_warp; ++i) {
      const int task = team + i * Tiling::teams;
      if (task >= Tiling::tasks) break;
      if (!accumulate)
#pragma unroll
        for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
          for (int v = 0; v < Atom::c_values; ++v) acc[i][j][v] = 0.0f;
      mma_task<Atom, S, SA, SB, ATOMS_N>(acc[i], a, b, task, part * Tiling::k_steps, Tiling::k_steps, lane);
    }
  }

  __device__ __forceinline__ void publish(float* dst) const {
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int team = warp % Tiling::teams, part = warp / Tiling::teams;
#pragma unroll 1
    for (int turn = 0; turn < SPLIT; ++turn) {
      if (part == turn)
#pragma unroll
        for (int i = 0; i < Tiling::per_warp; ++i) {
          const int task = team + i * Tiling::teams;
          if (task >= Tiling::tasks) break;
#pragma unroll
          for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
            for (int v = 0; v < Atom::c_values; ++v) {
              const int e = task_element<Atom, S, ATOMS_N>(task, j, v, lane);
              if (e >= 0) dst[e] = turn == 0 ? acc[i][j][v] : dst[e] + acc[i][j][v];
            }
        }
      if (turn + 1 < SPLIT) __syncthreads();
    }
  }
};

__device__ __forceinline__ float shfl_xor(float v, int mask) {
#ifdef MG_HOST_EMULATION
  return mg_host_shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

// Folds dim DIM of x (shape SX) to TO groups: element j of the result folds x[j], x[j + TO], x[j + 2 TO], ...
// Without BY_WARPS one thread folds each result element, in that order (the reference interpreter's order). With
// BY_WARPS (lowering: the group has at least a warp's worth of elements) a warp folds each result element: lane l
// folds elements l, l + warp, ... of the group, then a shuffle tree of the warp's size combines the lanes. Sums
// then differ from the in-order fold by rounding only; a max is the same.
template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T, class Op>
__device__ __forceinline__ void reduce(float* dst, const T* x, Op op) {
  constexpr int n = extent<SX>(DIM), in = inner<SX>(DIM), groups = n / TO;
  if constexpr (BY_WARPS) {
    static_assert(groups >= kWarpSize, "lowering folds by warps only groups of a warp or more");
    const int lane = threadIdx.x % kWarpSize, warps = blockDim.x / kWarpSize;
    for (int e = threadIdx.x / kWarpSize; e < SY::size; e += warps) {
      const int i = e % in, j = e / in % TO, o = e / in / TO;
      const T* p = x + (o * n + j) * in + i;
      float acc = to_f32(p[lane * TO * in]);
      for (int k = lane + kWarpSize; k < groups; k += kWarpSize) acc = op(acc, to_f32(p[k * TO * in]));
#pragma unroll
      for (int mask = kWarpSize / 2; mask > 0; mask /= 2) acc = op(acc, shfl_xor(acc, mask));
      if (lane == 0) dst[e] = acc;
    }
  } else {
    for (int e = threadIdx.x; e < SY::size; e += blockDim.x) {
      const int i = e % in, j = e / in % TO, o = e / in / TO;
      const T* p = x + (o * n + j) * in + i;
      float acc = to_f32(p[0]);
      for (int k = 1; k < groups; ++k) acc = op(acc, to_f32(p[k * TO * in]));
      dst[e] = acc;
    }
  }
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return max_nan(a, b); }
};

template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T>
__device__ __forceinline__ void reduce_sum(float* dst, const T* x) {
  reduce<SX, SY, DIM, TO, BY_WARPS>(dst, x, SumOp());
}
template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T>
__device__ __forceinline__ void reduce_max(float* dst, const T* x) {
  reduce<SX, SY, DIM, TO, BY_WARPS>(dst, x, MaxOp());
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
