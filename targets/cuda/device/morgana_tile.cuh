// morgana_tile.cuh: the tile API (docs/lowering.md) for NVIDIA GPUs, in CUDA C++.
//
// The code morgana generates calls these functions; each implements one statement of the kernel IR with the
// meaning targets/lower/kernel_ir.h gives it, for every thread of the block together. The compiler embeds this file
// and hands it to NVRTC by name, so it includes nothing and needs no include path.
//
// Threads stride over the result (thread i takes elements, or runs of neighbours, i, i + blockDim.x, ...; the
// generated kernel tells the compiler blockDim.x: assume_threads); matmuls run on the target's matrix instruction
// where the lowering chose one (else a dot product per element over shared memory), loads are cp.async where
// 16-byte copies are proved, reductions fold by warps where a group has a warp's worth of elements. Two promises the lowering
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

// The max of the reference interpreter: a NaN in either operand is the result. On the GPU one instruction
// (max.NaN, sm_80 and later, every CUDA target morgana has: mma.sync needs the same), where the comparison and select
// of the host's form are three: a row max is a chain of these.
__device__ __forceinline__ float max_nan(float a, float b) {
#ifdef MG_HOST_EMULATION
  return (a != a || a >= b) ? a : b;
#else
  float y;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
#endif
}

// exp(x), for the exp op, silu and the rescaling of running-max accumulators: one multiply and the special-function
// unit's base-2 exponential (ex2.approx.ftz, relative error below 2^-22; rounding x log2(e) adds |x log2(e)| 2^-24,
// under 1e-5 wherever the result is a normal f32), where expf spends about ten instructions on its last ulp: in
// attention the exponentials of the score tile are the largest share of a warp's non-matrix instructions. Results
// below the smallest normal f32 flush to zero; -inf gives 0 and +inf, NaN pass through as in expf.
__device__ __forceinline__ float fast_exp(float x) {
#ifdef MG_HOST_EMULATION
  return expf(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
#endif
}

// exp(x - y) as fast_exp computes it, with x log2(e) - y log2(e) rounded once by a fused multiply-add (y log2(e) is
// one product per row where y is a row's max): the softmax's exp(s - max) in two instructions instead of three. The
// rounding of y log2(e) adds |y log2(e)| 2^-24 to the exponent (2e-5 relative at |y| = 200, the unsafe-softmax
// probe's logits); infinities and NaN give what fast_exp(x - y) gives.
__device__ __forceinline__ float fast_exp_diff(float x, float y) {
#ifdef MG_HOST_EMULATION
  return expf(x - y);
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaf(x, 1.4426950408889634f, -(y * 1.4426950408889634f))));
  return r;
#endif
}

// x as a value of type H holds it (rounded to nearest): the running max of an online-softmax accumulator is held in
// its max's element type, so that its sums are relative to exactly the max a block saves beside them (see
// verify/interpreter.h, accumulate).
template <class H>
__device__ __forceinline__ float held(float x) {
  return to_f32(from_f32<H>(x));
}
// The factor exp(m - held m) that puts the first iteration's sums on the held max: 1 where nothing is rounded (a
// max held in f32: lowering says so for maxima loaded from a tensor of their type, already its values).
template <class H>
__device__ __forceinline__ float held_scale(float m, float h) {
  return fast_exp(m - h);
}
template <>
__device__ __forceinline__ float held_scale<float>(float, float) {
  return 1.0f;
}

// The kernel runs exactly N threads per block in x (the launch's block size, from the kernel IR): the compiler then
// knows every tile loop's trip count (`for (i = threadIdx.x; i < n; i += blockDim.x)`), unrolls it and folds its
// index math (measured: a third fewer instructions in cp.async loops).
template <int N>
__device__ __forceinline__ void assume_threads() {
#ifndef MG_HOST_EMULATION
  __builtin_assume(blockDim.x == N);
  __builtin_assume(threadIdx.x < N);
#endif
}

// ---- shapes and indices ----

template <int D0, int D1, int D2, int D3>
struct Shape {
  static constexpr int d0 = D0, d1 = D1, d2 = D2, d3 = D3;
  static constexpr int size = D0 * D1 * D2 * D3;
  static constexpr bool swizzled = false, transposed = false;
};

// A 16-bit tile in shared memory whose rows' 16-byte chunks are permuted (lowering's Tile::swizzled: written only by
// 16-byte loads and elementwise ops, read only by ldmatrix): chunk c of row r is stored at chunk c ^ ((r / group) %
// span), C the chunks per row (even), span = gcd(C, 8), group = 8 / span. Unswizzled, 8 consecutive rows start in
// only 8 / span of the 8 16-byte bank groups (rows of 128 or 256 bytes all in one: 8-way bank conflicts; of 96
// bytes in four: 2-way); the XOR, which stays inside the row's aligned runs of span chunks, spreads the 8 rows an
// ldmatrix matrix reads over all 8.
template <int D0, int D1, int D2, int D3>
struct Swizzled : Shape<D0, D1, D2, D3> {
  static constexpr bool swizzled = true;
};

// A matmul's B operand held as Bᵀ (lowering's Stmt::trans_b): tile S stores rows of N along K, as a transposed input
// lies in memory (loaded with 16-byte copies along K); B, [K, N], is [S::d3, S::d2]. Its element (k, n) is S's (n, k).
template <class S>
struct Transposed {
  typedef S stored;
  static constexpr int d0 = S::d0, d1 = S::d1, d2 = S::d3, d3 = S::d2, size = S::size;
  static constexpr bool swizzled = S::swizzled, transposed = true;
};

// Where the element at (row, col) of a tile of shape S is stored, the tile seen as rows of S::d3 (row counting
// across the leading dims): the form the hot loops use, whose swizzle term depends on the row alone (hoisted where
// the row is loop-invariant).
template <class S>
__device__ __forceinline__ int stored_at(int row, int col) {
  if constexpr (!S::swizzled) {
    return row * S::d3 + col;
  } else {
    constexpr int per = 8, chunks = S::d3 / per, span = chunks % 8 == 0 ? 8 : chunks % 4 == 0 ? 4 : 2, group = 8 / span;
    static_assert(S::d3 % per == 0 && chunks % 2 == 0, "lowering swizzles rows of an even number of 16-byte chunks");
    // (r / group) % span written as (r % 8) / group (equal: span * group == 8), so that the compiler sees the term
    // repeat every 8 rows and hoists it out of loops whose row steps by a multiple of 8 (ldmatrix's k-steps, a load's
    // passes).
    const unsigned r = static_cast<unsigned>(row), c = static_cast<unsigned>(col);
    return static_cast<int>(r * S::d3 + ((c / per) ^ ((r % 8) / group)) * per + c % per);
  }
}
// The same for element e (row-major index); unsigned division: e is never negative, and extents are mostly powers of 2.
template <class S>
__device__ __forceinline__ int stored_at(int e) {
  if constexpr (!S::swizzled) return e;
  const unsigned u = static_cast<unsigned>(e);
  return stored_at<S>(static_cast<int>(u / S::d3), static_cast<int>(u % S::d3));
}

template <bool C, class A, class B>
struct Pick {
  typedef A type;
};
template <class A, class B>
struct Pick<false, A, B> {
  typedef B type;
};

template <i64 N0, i64 N1, i64 N2, i64 N3, i64 S0, i64 S1, i64 S2, i64 S3>
struct Global {
  static constexpr i64 n0 = N0, n1 = N1, n2 = N2, n3 = N3;
  static constexpr i64 s0 = S0, s1 = S1, s2 = S2, s3 = S3;
  // The type element offsets are computed in: int where every element's offset (and every origin plus a tile
  // extent, bounded by the same) fits, which saves the 64-bit multiply-adds of every access.
  typedef typename Pick<((N0 - 1) * S0 + (N1 - 1) * S1 + (N2 - 1) * S2 + (N3 - 1) * S3) < (i64{1} << 30), int, i64>::type
      index;
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
  // Unsigned: flat indices are never negative, and dividing by the (mostly power-of-two) extents is then a shift.
  unsigned u = static_cast<unsigned>(e);
  Idx x;
  x.i3 = static_cast<int>(u % S::d3);
  u /= S::d3;
  x.i2 = static_cast<int>(u % S::d2);
  u /= S::d2;
  x.i1 = static_cast<int>(u % S::d1);
  x.i0 = static_cast<int>(u / S::d1);
  return x;
}

// The element of a tile of shape S that index x (of a shape S broadcasts to) reads: index 0 along S's 1-dims.
template <class S>
__device__ __forceinline__ int broadcast_offset(const Idx& x) {
  return (((S::d0 == 1 ? 0 : x.i0) * S::d1 + (S::d1 == 1 ? 0 : x.i1)) * S::d2 + (S::d2 == 1 ? 0 : x.i2)) * S::d3 +
         (S::d3 == 1 ? 0 : x.i3);
}

// The index in tensor G of element x of a tile placed at origin (o0..o3), in G's index type.
template <class G>
struct GlobalIdx {
  typedef typename G::index I;
  I g0, g1, g2, g3;
  __device__ __forceinline__ GlobalIdx(i64 o0, i64 o1, i64 o2, i64 o3, const Idx& x)
      : g0(static_cast<I>(o0) + x.i0), g1(static_cast<I>(o1) + x.i1), g2(static_cast<I>(o2) + x.i2),
        g3(static_cast<I>(o3) + x.i3) {}
  // Its element offset in G.
  __device__ __forceinline__ I offset() const {
    return g0 * static_cast<I>(G::s0) + g1 * static_cast<I>(G::s1) + g2 * static_cast<I>(G::s2) +
           g3 * static_cast<I>(G::s3);
  }
  // Whether it lies inside G along the dims in MASK (bit d: dim d is checked).
  template <int MASK>
  __device__ __forceinline__ bool inside() const {
    return (!(MASK & 1) || g0 < G::n0) && (!(MASK & 2) || g1 < G::n1) && (!(MASK & 4) || g2 < G::n2) &&
           (!(MASK & 8) || g3 < G::n3);
  }
};

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

// One vector of a load: VEC bytes from `from` to `to` as COPY says, or `pad` in each element where the vector lies
// outside the tensor (`from` is then not read).
template <int VEC, int COPY, class T>
__device__ __forceinline__ void copy_vector(T* to, const T* from, bool inside, float pad) {
  typedef typename Vec<VEC>::type V;
  if (inside) {
    if constexpr (COPY != copy_sync)
      cp_async_16(to, from);
    else
      *reinterpret_cast<V*>(to) = *reinterpret_cast<const V*>(from);
  } else {
    const T fill = from_f32<T>(pad);
    for (int j = 0; j < VEC / static_cast<int>(sizeof(T)); ++j) to[j] = fill;
  }
}

// The vector path of load for a tile of rows (S::d0 == S::d1 == 1) no wider than the block's threads in vectors:
// each thread keeps one vector column and walks the rows `step` apart, so that its global and shared addresses
// advance by constants (immediate offsets once unrolled) instead of being recomputed from a flat index per vector
// (measured on the H100: ~13 instructions per 16-byte copy in the flat form, ~20 for rows of 6 vectors). Where the
// row's vectors do not divide the threads, the last blockDim.x % row_vectors threads sit the walk out. blockDim.x is
// known to the compiler (assume_threads), so the walk's trip count is too.
template <class S, class G, int MASK, int VEC, int COPY, class T>
__device__ __forceinline__ void load_rows(T* dst, const T* __restrict__ src, i64 o0, i64 o1, i64 o2, i64 o3,
                                          float pad) {
  constexpr int per = VEC / sizeof(T), row_vectors = S::d3 / per, rows = S::d2;
  typedef typename G::index I;
  const int step = blockDim.x / row_vectors, passes = (rows + step - 1) / step;
  if (threadIdx.x >= static_cast<unsigned>(step * row_vectors)) {
    if constexpr (COPY == copy_async) async_wait<0>();
    return;
  }
  const int col = static_cast<int>(threadIdx.x % row_vectors) * per, row0 = static_cast<int>(threadIdx.x / row_vectors);
  const GlobalIdx<G> g(o0, o1, o2, o3, Idx{0, 0, row0, col});
  // Dims 0, 1 and 3 stay the thread's own along the walk; dim 2 advances.
  const bool fixed_inside = g.template inside<MASK & ~4>();
  // Both addresses advance by constants: the global one by `step` rows of the tensor, the shared one by `step` rows
  // of the tile when the swizzle term (which repeats every 8 rows, stored_at) stays the same.
  const T* from = src + g.offset();
  T* to = dst + stored_at<S>(row0, col);
  const bool same_swizzle = step % 8 == 0 || !S::swizzled;
#pragma unroll 8
  for (int k = 0, row = row0; k < passes; ++k, row += step) {
    if (rows % step != 0 && row >= rows) break;
    copy_vector<VEC, COPY>(same_swizzle ? to : dst + stored_at<S>(row, col), from,
                           fixed_inside && (!(MASK & 4) || g.g2 + static_cast<I>(k * step) < static_cast<I>(G::n2)),
                           pad);
    from += static_cast<i64>(step) * G::s2;
    to += step * S::d3;
  }
  if constexpr (COPY == copy_async) async_wait<0>();
}

// dst = the tile of src at origin (o0..o3); elements outside the tensor along the masked dims read `pad`.
// VEC > sizeof(T): each thread moves VEC bytes per access (lowering proved the alignment: the last dim is
// contiguous, and every origin, stride and extent is a multiple of the vector; a masked last dim holds whole
// vectors); COPY (mg::Copy): how the vectors move.
template <class S, class G, int MASK, int VEC, int COPY, class T>
__device__ __forceinline__ void load(T* dst, const T* __restrict__ src, i64 o0, i64 o1, i64 o2, i64 o3, float pad) {
  if constexpr (VEC > static_cast<int>(sizeof(T))) {
    static_assert(G::s3 == 1 && S::d3 % (VEC / sizeof(T)) == 0, "vector loads need a contiguous, whole last dim");
    static_assert(COPY == copy_sync || VEC == 16, "cp.async.cg moves 16 bytes");
    constexpr int per = VEC / sizeof(T), vectors = S::size / per, row_vectors = S::d3 / per;
    if constexpr (S::d0 * S::d1 == 1) {
      if (blockDim.x >= row_vectors) {
        load_rows<S, G, MASK, VEC, COPY>(dst, src, o0, o1, o2, o3, pad);
        return;
      }
    }
#pragma unroll 4
    for (int i = threadIdx.x; i < vectors; i += blockDim.x) {
      const int e = i * per;
      const Idx x = unflatten<S>(e);
      const GlobalIdx<G> g(o0, o1, o2, o3, x);
      const bool inside = g.template inside<MASK>();
      copy_vector<VEC, COPY>(dst + stored_at<S>(e), inside ? src + g.offset() : src, inside, pad);
    }
    if constexpr (COPY == copy_async) async_wait<0>();
  } else {
    static_assert(!S::swizzled, "lowering swizzles only tiles written by 16-byte loads");
    const T fill = from_f32<T>(pad);
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const Idx x = unflatten<S>(e);
      const GlobalIdx<G> g(o0, o1, o2, o3, x);
      dst[e] = g.template inside<MASK>() ? src[g.offset()] : fill;
    }
  }
}

// A tile's origin in the four dims of the tile API.
struct Origin {
  i64 o[4];
};

// The tiles of N iterations of a loop whose loads the threads copy element by element (lowering: a preload, pass
// pipeline_loads), into N consecutive buffers of dst; at(i) gives iteration i's origin. Each thread issues the loads
// of all N iterations before it stores any, so the block waits for one round trip instead of N.
template <class S, class G, int MASK, int N, class T, class At>
__device__ __forceinline__ void load_iterations(T* dst, const T* __restrict__ src, At at, float pad) {
  static_assert(!S::swizzled, "lowering swizzles only tiles written by 16-byte loads");
  const T fill = from_f32<T>(pad);
  for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
    const Idx x = unflatten<S>(e);
    T v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const Origin o = at(i);
      const GlobalIdx<G> g(o.o[0], o.o[1], o.o[2], o.o[3], x);
      v[i] = g.template inside<MASK>() ? src[g.offset()] : fill;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i * S::size + e] = v[i];
  }
}

// ---- copies by the copy engine (sm_90's bulk tensor copies, TMA): one thread asks, the engine moves the tile ----

// The copy engine's description of one tensor (shape, strides, element type, box, swizzle). The runtime builds it
// from the parameter the caller passed (cuTensorMapEncodeTiled) and a kernel takes it by value after the program's
// parameters (__grid_constant__: its address is then a parameter's). Host emulation keeps the tensor itself instead.
#ifdef MG_HOST_EMULATION
struct TensorMap {
  const unsigned char* base;
  int rank;
  i64 dims[4];     // elements, innermost first
  i64 strides[4];  // bytes, innermost first
};
#else
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};
#endif

// A barrier in shared memory that copy-engine loads complete on: a phase ends when its `arrivals` requests have
// arrived and the bytes each announced have landed. Thread 0 initialises the kernel's `count` barriers; the block
// waits for it (and the initialisation is made visible to the engine) before any load.
__device__ __forceinline__ void barriers_init(unsigned long long* bars, int count, int arrivals) {
#ifndef MG_HOST_EMULATION
  if (threadIdx.x == 0) {
    for (int i = 0; i < count; ++i)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(bars + i))),
                   "r"(arrivals)
                   : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
#endif
  __syncthreads();
}

// Waits until the phase of barrier `bar` of parity `parity` has completed (use n of a buffer's barrier has parity
// n % 2): the copy-engine loads of that use have landed, visible to this thread.
__device__ __forceinline__ void tma_wait(unsigned long long* bar, int parity) {
#ifndef MG_HOST_EMULATION
  asm volatile(
      "{\n.reg .pred done;\nmg_wait:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n@!done bra mg_wait;\n}\n" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(bar))),
      "r"(parity)
      : "memory");
#endif
}

// One box of the tensor `map` describes at coordinates c (innermost first) into dst, counted on bar.
template <int RANK>
__device__ __forceinline__ void tensor_box(void* dst, const TensorMap& map, unsigned long long* bar, const int (&c)[4]) {
#ifndef MG_HOST_EMULATION
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  const void* m = &map;
  if constexpr (RANK == 1)
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::"r"(d),
                 "l"(m), "r"(c[0]), "r"(b)
                 : "memory");
  else if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(d),
                 "l"(m), "r"(c[0]), "r"(c[1]), "r"(b)
                 : "memory");
  else if constexpr (RANK == 3)
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(d),
        "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(b)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(d),
        "l"(m), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(b)
        : "memory");
#endif
}

// dst = the tile of shape S at coordinates c0 (innermost) .. c3 of the RANK-dim tensor `map` describes, moved by the
// copy engine on thread 0's request: boxes of BOX rows of the tile's dim 2 (one box when BOX == S::d2), their bytes
// announced to `bar` first, so that its phase completes when the whole tile has landed (tma_wait). Elements outside
// the tensor read 0. The map's swizzle writes the tile's layout (lowering checked: rows of 32, 64 or 128 bytes are
// mg::Swizzled's, each buffer on a multiple of 8 rows' bytes).
template <class S, int RANK, int BOX, class T>
__device__ __forceinline__ void load_tma(T* dst, const TensorMap& map, unsigned long long* bar, i64 c0, i64 c1,
                                         i64 c2, i64 c3) {
  if (threadIdx.x != 0) return;
#ifdef MG_HOST_EMULATION
  (void)bar;
  const i64 origin[4] = {c3, c2, c1, c0};  // in the tile's dims
  for (int e = 0; e < S::size; ++e) {
    const Idx x = unflatten<S>(e);
    const i64 at[4] = {origin[0] + x.i0, origin[1] + x.i1, origin[2] + x.i2, origin[3] + x.i3};
    bool inside = true;
    i64 offset = 0;
    for (int d = 0; d < 4; ++d) {
      const int inner = 3 - d;  // the tensor dim, innermost first
      if (inner >= map.rank) continue;
      inside = inside && at[d] >= 0 && at[d] < map.dims[inner];
      offset += at[d] * map.strides[inner];
    }
    T v{};
    if (inside) mg_host_copy(&v, map.base + offset, sizeof(T));
    dst[stored_at<S>(e)] = v;
  }
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(static_cast<unsigned>(S::size * sizeof(T)))
               : "memory");
#pragma unroll 1
  for (int r = 0; r < S::d2; r += BOX) {
    const int c[4] = {static_cast<int>(c0), static_cast<int>(c1 + (RANK >= 2 ? r : 0)), static_cast<int>(c2),
                      static_cast<int>(c3)};
    tensor_box<RANK>(dst + r * S::d3, map, bar, c);
  }
#endif
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
      const GlobalIdx<G> g(o0, o1, o2, o3, x);
      if (!g.template inside<MASK>()) continue;
      unsigned w[VEC / 4];
#pragma unroll
      for (int j = 0; j < VEC / 4; ++j) w[j] = 0;
#pragma unroll
      for (int j = 0; j < per; ++j) w[j * sizeof(U) / 4] |= word_bits(convert<U>(src[e + j])) << (8 * (j * sizeof(U) % 4));
      Vec<VEC>::store(dst + g.offset(), w);
    }
  } else {
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const Idx x = unflatten<S>(e);
      const GlobalIdx<G> g(o0, o1, o2, o3, x);
      if (g.template inside<MASK>())
        dst[g.offset()] = convert<U>(src[e]);
    }
  }
}

// Elementwise statements take runs of V neighbours along the last dim per thread step: one index computation and
// one vector access per run instead of one per element (V: the largest of 8, 4, 2 dividing the last dim; a run never
// crosses a row, nor a swizzled tile's 16-byte chunk).
template <class S>
__host__ __device__ constexpr int run_length() {
  return S::d3 % 8 == 0 ? 8 : S::d3 % 4 == 0 ? 4 : S::d3 % 2 == 0 ? 2 : 1;
}
// V elements in one access (two for 32 bytes): tiles start 16-byte aligned and runs start at multiples of V.
template <int V, class T>
struct alignas(V * sizeof(T) < 16 ? V * sizeof(T) : 16) Run {
  T v[V];
};
// Element j of the run of V at index x of S's shape, read from a tile of shape SA that broadcasts to it.
template <int V, class SA, class TA>
__device__ __forceinline__ void read_run(float (&out)[V], const TA* a, const Idx& x) {
  if constexpr (SA::d3 == 1) {
    const float y = to_f32(a[broadcast_offset<SA>(x)]);
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = y;
  } else {
    const Run<V, TA> r = *reinterpret_cast<const Run<V, TA>*>(a + broadcast_offset<SA>(x));
#pragma unroll
    for (int j = 0; j < V; ++j) out[j] = to_f32(r.v[j]);
  }
}
template <int V, class S, class TD>
__device__ __forceinline__ void write_run(TD* dst, int e, const float (&y)[V]) {
  Run<V, TD> r;
#pragma unroll
  for (int j = 0; j < V; ++j) r.v[j] = from_f32<TD>(y[j]);
  *reinterpret_cast<Run<V, TD>*>(dst + stored_at<S>(e)) = r;
}

// dst = f(a), elementwise (a has dst's shape). dst is f32, or 16-bit where lowering stored a matmul operand in the
// type its matrix instruction takes (rounded once here instead of at every fragment load).
template <class S, class TD, class TA, class F>
__device__ __forceinline__ void unary(TD* dst, const TA* a, F f) {
  static_assert(!S::swizzled || sizeof(TD) == 2, "lowering swizzles only 16-bit tiles");
  constexpr int V = run_length<S>();
  for (int i = threadIdx.x; i < S::size / V; i += blockDim.x) {
    float y[V];
    read_run<V, S>(y, a, unflatten<S>(i * V));
#pragma unroll
    for (int j = 0; j < V; ++j) y[j] = f(y[j]);
    write_run<V, S>(dst, i * V, y);
  }
}

// dst = f(a, b), elementwise; a and b broadcast to dst's shape. dst as for unary.
template <class S, class SA, class SB, class TD, class TA, class TB, class F>
__device__ __forceinline__ void binary(TD* dst, const TA* a, const TB* b, F f) {
  static_assert(!S::swizzled || sizeof(TD) == 2, "lowering swizzles only 16-bit tiles");
  constexpr int V = run_length<S>();
  for (int i = threadIdx.x; i < S::size / V; i += blockDim.x) {
    const Idx x = unflatten<S>(i * V);
    float ya[V], yb[V];
    read_run<V, SA>(ya, a, x);
    read_run<V, SB>(yb, b, x);
#pragma unroll
    for (int j = 0; j < V; ++j) ya[j] = f(ya[j], yb[j]);
    write_run<V, S>(dst, i * V, ya);
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
    const TB* pb = b + ((SB::d0 == 1 ? 0 : x.i0) * SB::d1 + (SB::d1 == 1 ? 0 : x.i1)) * (K * N) +
                   (SB::transposed ? x.i3 * K : x.i3);
    constexpr int k_step = SB::transposed ? 1 : N;  // Bᵀ holds a column of B as a row
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += to_f32(pa[k]) * to_f32(pb[k * k_step]);
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

// ldmatrix.x4 (TRANS: .trans) of four 8x8 16-bit matrices, lane l addressing row l % 8 of matrix l / 8.
template <bool TRANS = false>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
#ifdef MG_HOST_EMULATION
  mg_host_ldmatrix(r, 4, TRANS, p);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}
// ldmatrix.x2 (TRANS: .trans) of two 8x8 16-bit matrices, lanes 0-15 addressing their rows.
template <bool TRANS>
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* p) {
#ifdef MG_HOST_EMULATION
  mg_host_ldmatrix(r, 2, TRANS, p);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
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

// d = a·b + d for one 16x8x16 atom, f32 accumulate. A register-only instruction: not volatile, so the compiler
// may schedule it among the fragment loads.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef MG_HOST_EMULATION
  mg_host_mma_m16n8k16(d, a, b, MmaType<T>::bf);
#else
  if constexpr (MmaType<T>::bf)
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Whether every register of operand OP's layout ('a' or 'c') holds two neighbours of a row (value 2i + 1 one column
// right of value 2i, at an even column): then its values move a register's pair per access (an f32 A tile read, a
// register tile's row stored).
template <class Atom, char OP>
__host__ __device__ constexpr bool values_pair() {
  constexpr int values = OP == 'a' ? Atom::a_values : Atom::c_values;
  if (values % 2 != 0) return false;
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int v = 0; v < values; v += 2) {
      const int r0 = OP == 'a' ? Atom::a_row(lane, v) : Atom::c_row(lane, v);
      const int r1 = OP == 'a' ? Atom::a_row(lane, v + 1) : Atom::c_row(lane, v + 1);
      const int c0 = OP == 'a' ? Atom::a_col(lane, v) : Atom::c_col(lane, v);
      const int c1 = OP == 'a' ? Atom::a_col(lane, v + 1) : Atom::c_col(lane, v + 1);
      if (r1 != r0 || c1 != c0 + 1 || c0 % 2 != 0) return false;
    }
  return true;
}

// The A fragment of rows m0.. and columns k0.. of a row-major [M, K] tile. Rows past M read row M-1 instead
// (their results are never stored; A's rows are independent). An f32 tile (softmax probabilities feeding P·V)
// is converted to the instruction's type in registers, element by element through the file's A layout.
template <class Atom, class SA, class T, class TA>
__device__ __forceinline__ void load_a(unsigned (&a)[4], const TA* tile, int m0, int k0, int lane) {
  constexpr int M = SA::d2, K = SA::d3;
  if constexpr (sizeof(TA) == 2) {
    // Lanes 8j..8j+7 address the rows of matrix j: rows 0-7 and 8-15 of the atom, then the same at column 8.
    int row = m0 + lane % 8 + 8 * ((lane / 8) % 2);
    row = row < M ? row : M - 1;
    ldmatrix_x4(a, tile + stored_at<SA>(row, k0 + 8 * (lane / 16)));
  } else if constexpr (sizeof(TA) == 4 && K % 2 == 0 && values_pair<Atom, 'a'>()) {
    static_assert(!SA::swizzled, "lowering swizzles only 16-bit tiles");
    // Each register's two values are neighbours in a row: one 8-byte shared load and one packing conversion per
    // register (the f32 tile starts 16-byte aligned; rows of even K keep every pair 8-byte aligned).
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      int row = m0 + Atom::a_row(lane, 2 * r);
      row = row < M ? row : M - 1;
      const Run<2, float> f = *reinterpret_cast<const Run<2, float>*>(tile + row * K + k0 + Atom::a_col(lane, 2 * r));
      a[r] = pack2(word_bits(from_f32<T>(f.v[0])), word_bits(from_f32<T>(f.v[1])));
    }
  } else {
    static_assert(!SA::swizzled, "lowering swizzles only 16-bit tiles");
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
// file's B layout, converted, for an f32 tile. Held as Bᵀ (SB transposed), the atom's 8 columns of B are 8 rows of
// the tile: ldmatrix without .trans, lanes 0-7 addressing them at K column k0, lanes 8-15 at k0 + 8.
template <class Atom, class SB, class T, class TB>
__device__ __forceinline__ void load_b(unsigned (&b)[2], const TB* tile, int k0, int n0, int lane) {
  constexpr int N = SB::d3, K = SB::d2;
  if constexpr (sizeof(TB) == 2 && SB::transposed) {
    ldmatrix_x2<false>(b, tile + stored_at<typename SB::stored>(n0 + lane % 8, k0 + 8 * ((lane / 8) % 2)));
  } else if constexpr (sizeof(TB) == 2) {
    ldmatrix_x2<true>(b, tile + stored_at<SB>(k0 + lane % 16, n0));
  } else {
    static_assert(!SB::swizzled, "lowering swizzles only 16-bit tiles");
    // B's element (k, n): in row k of N, or held as Bᵀ, in row n of K.
    auto at = [](int k, int n) { return SB::transposed ? n * K + k : k * N + n; };
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      unsigned h[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int v = 2 * r + half;
        h[half] = word_bits(from_f32<T>(tile[at(k0 + Atom::b_row(lane, v), n0 + Atom::b_col(lane, v))]));
      }
      b[r] = pack2(h[0], h[1]);
    }
  }
}

// The B fragments of two neighbouring atoms (columns n0.. and n0 + 8..) of a 16-bit row-major [K, N] tile in one
// ldmatrix.x4.trans: lanes 0-15 address rows k0..k0+15 at column n0, lanes 16-31 the same rows at column n0 + 8.
// Held as Bᵀ: ldmatrix.x4 without .trans, matrix j (lanes 8j..8j+7) the rows n0 + 8 (j / 2).. at K column
// k0 + 8 (j % 2), so that its registers come out in the same order.
template <class SB, class TB>
__device__ __forceinline__ void load_b_pair(unsigned (&b0)[2], unsigned (&b1)[2], const TB* tile, int k0, int n0,
                                            int lane) {
  unsigned r[4];
  if constexpr (SB::transposed)
    ldmatrix_x4<false>(r, tile + stored_at<typename SB::stored>(n0 + 8 * (lane / 16) + lane % 8,
                                                                 k0 + 8 * ((lane / 8) % 2)));
  else
    ldmatrix_x4<true>(r, tile + stored_at<SB>(k0 + lane % 16, n0 + 8 * (lane / 16)));
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

// acc[j] += a · B(k0.., n0 + j * n..) for the ATOMS_N atoms of a task's row, one A fragment serving all: 16-bit B
// tiles give two neighbouring atoms' fragments per ldmatrix.x4.trans, others one atom's through the file's layout.
template <class Atom, class SB, class T, int ATOMS_N, class TB>
__device__ __forceinline__ void mma_atoms(float (&acc)[ATOMS_N][Atom::c_values], const unsigned (&a)[4], const TB* b,
                                          int k0, int n0, int lane) {
  if constexpr (sizeof(TB) == 2 && ATOMS_N % 2 == 0 && Atom::n == 8) {
#pragma unroll
    for (int j = 0; j < ATOMS_N; j += 2) {
      unsigned fb0[2], fb1[2];
      load_b_pair<SB>(fb0, fb1, b, k0, n0 + j * Atom::n, lane);
      mma_16816<T>(acc[j], a, fb0);
      mma_16816<T>(acc[j + 1], a, fb1);
    }
  } else {
#pragma unroll
    for (int j = 0; j < ATOMS_N; ++j) {
      unsigned fb[2];
      load_b<Atom, SB, T>(fb, b, k0, n0 + j * Atom::n, lane);
      mma_16816<T>(acc[j], a, fb);
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

// How warps share a matmul result on matrix instructions (lowering's choice, Stmt::atoms_n and Stmt::k_split; a
// register tile's RegisterLayout): a task is one row block of Atom::m rows by ATOMS_N atoms of Atom::n columns of one
// batch, so each A fragment serves ATOMS_N atoms; the warps form WARPS / SPLIT teams, team w % teams taking tasks
// w, w + teams, ... and part w / teams of each task's K steps. Warps past teams * SPLIT have no task. A row vector
// (N == 1, one value per row: a row reduction's result) is held like column 0 of a C fragment, one atom per task.
template <class Atom, class S, int ATOMS_N, int SPLIT, int WARPS>
struct WarpTiling {
  static constexpr int M = S::d2, N = S::d3;
  static constexpr bool row_vector = N == 1;
  static_assert(row_vector ? ATOMS_N == 1 && SPLIT == 1 : N % (Atom::n * ATOMS_N) == 0,
                "lowering chose the tiling for N");
  static constexpr int row_blocks = (M + Atom::m - 1) / Atom::m, groups_n = row_vector ? 1 : N / (Atom::n * ATOMS_N);
  static constexpr int tasks = S::d0 * S::d1 * row_blocks * groups_n, teams = WARPS / SPLIT;
  static constexpr int per_warp = (tasks + teams - 1) / teams;
  // Whether a warp's i-th task exists. Always, when the teams divide the tasks: said at compile time, so that the
  // compiler sees every register tile rewritten whole in each iteration instead of carried across the loop.
  __device__ __forceinline__ static bool has(int task) { return tasks % teams == 0 || task < tasks; }
  // The task a warp computes as its task `task` where tiles hold whole rows (register chains): a warp without that
  // task repeats the last one, whose values it never stores, instead of skipping. Skipping would keep its registers'
  // old values on that path, and so every register tile of the chain alive across the loop (spills).
  __device__ __forceinline__ static int computed(int task) { return has(task) ? task : tasks - 1; }
};

// What a task's matmul does besides the products with the A fragments it loads: nothing.
struct NoSums {
  template <class T>
  __device__ __forceinline__ void on_a(const unsigned (&)[4]) {}
};

// acc[j] (+)= the task's product over K steps [k_first, k_first + k_steps) for atom j of the task: ATOMS_N
// accumulators of Atom::c_values in registers, A loaded once per K step and shared by the atoms; `sums` sees each A
// fragment (NoSums: nothing; RowSums: the sums of squares of A's rows).
template <class Atom, class S, class SA, class SB, int ATOMS_N, class TA, class TB, class Sums = NoSums>
__device__ __forceinline__ void mma_task(float (&acc)[ATOMS_N][Atom::c_values], const TA* a, const TB* b, int task,
                                         int k_first, int k_steps, int lane, Sums&& sums = Sums{}) {
  typedef typename Type16<TA, TB>::type T;  // the 16-bit operand's type (lowering allows one f32 operand)
  constexpr int M = S::d2, N = S::d3, K = SA::d3;
  constexpr int groups_n = N / (Atom::n * ATOMS_N), row_blocks = (M + Atom::m - 1) / Atom::m;
  const int ng = task % groups_n, mb = task / groups_n % row_blocks, bt = task / groups_n / row_blocks;
  const int b0 = bt / S::d1, b1 = bt % S::d1;
  const TA* pa = a + ((SA::d0 == 1 ? 0 : b0) * SA::d1 + (SA::d1 == 1 ? 0 : b1)) * (M * K);
  const TB* pb = b + ((SB::d0 == 1 ? 0 : b0) * SB::d1 + (SB::d1 == 1 ? 0 : b1)) * (K * N);
  const int m0 = mb * Atom::m, n0 = ng * ATOMS_N * Atom::n;
  // Unrolled by 4: a swizzled tile's chunk pattern repeats every 4 k-steps (64 columns), so the unrolled steps'
  // fragment addresses differ by constants.
#pragma unroll 4
  for (int step = k_first; step < k_first + k_steps; ++step) {
    const int k0 = step * Atom::k;
    unsigned fa[4];
    load_a<Atom, SA, T>(fa, pa, m0, k0, lane);
    sums.template on_a<T>(fa);
    mma_atoms<Atom, SB, T>(acc, fa, pb, k0, n0, lane);
  }
}

// Where value v of atom j of `lane` sits in task `task` of S: batch bt (S::d0 * S::d1 of them), row and column. A row
// vector (N == 1) holds column 0 in every value of a row. Past M: false, or with CLAMP_ROWS row M - 1 (an index for
// computing on every value a thread holds, so that a register tile is rewritten whole instead of partly kept from
// the last iteration, which would keep it alive across the loop; values of rows past M are never stored).
template <class Atom, class S, int ATOMS_N, bool CLAMP_ROWS>
__device__ __forceinline__ bool task_place(int task, int j, int v, int lane, int& bt, int& row, int& col) {
  constexpr int M = S::d2, N = S::d3, groups_n = N == 1 ? 1 : N / (Atom::n * ATOMS_N);
  constexpr int row_blocks = (M + Atom::m - 1) / Atom::m;
  const int ng = task % groups_n, mb = task / groups_n % row_blocks;
  bt = task / groups_n / row_blocks;
  row = mb * Atom::m + Atom::c_row(lane, v);
  col = N == 1 ? 0 : ng * ATOMS_N * Atom::n + j * Atom::n + Atom::c_col(lane, v);
  if (M % Atom::m != 0 && row >= M) {
    if constexpr (!CLAMP_ROWS) return false;
    row = M - 1;
  }
  return true;
}
// The same as a flat index of S (-1 past M without CLAMP_ROWS): shared-memory tiles of the C layout.
template <class Atom, class S, int ATOMS_N, bool CLAMP_ROWS = false>
__device__ __forceinline__ int task_element(int task, int j, int v, int lane) {
  int bt, row, col;
  if (!task_place<Atom, S, ATOMS_N, CLAMP_ROWS>(task, j, v, lane, bt, row, col)) return -1;
  return (bt * S::d2 + row) * S::d3 + col;
}
// The same as an index of S's four dims, for addressing (global stores, broadcast operands): no division by the
// extents, which a flat index would need (by 80 or 96 for head dims that are not powers of two: four instructions an
// element, in the epilogue of every attention kernel of such a head dim).
template <class Atom, class S, int ATOMS_N, bool CLAMP_ROWS = false>
__device__ __forceinline__ bool task_index(int task, int j, int v, int lane, Idx& x) {
  int bt, row, col;
  if (!task_place<Atom, S, ATOMS_N, CLAMP_ROWS>(task, j, v, lane, bt, row, col)) return false;
  x.i0 = bt / S::d1;
  x.i1 = bt % S::d1;
  x.i2 = row;
  x.i3 = col;
  return true;
}
template <class Atom, class S, int ATOMS_N>
__device__ __forceinline__ Idx held_index(int task, int j, int v, int lane) {
  Idx x;
  task_index<Atom, S, ATOMS_N, true>(task, j, v, lane, x);
  return x;
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
  typedef WarpTiling<Atom, S, ATOMS_N, 1, 1> Tiling;
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

__device__ __forceinline__ float shfl_xor(float v, int mask) {
#ifdef MG_HOST_EMULATION
  return mg_host_shfl_xor(v, mask);
#else
  return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

// The folds of reductions and accumulators.
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return max_nan(a, b); }
};
// A reduction's default element maps (kernel IR Stmt::pre, Stmt::post): none.
struct NoMap {
  __device__ __forceinline__ float operator()(float x) const { return x; }
};

// ---- tiles in registers (kernel IR Space::registers) ----

// Which bits of (lane, value) of the C layout leave the row unchanged: the lanes and values that share a row.
template <class Atom>
__host__ __device__ constexpr bool row_free_lane_bit(int b) {
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int v = 0; v < Atom::c_values; ++v)
      if (Atom::c_row(lane ^ (1 << b), v) != Atom::c_row(lane, v)) return false;
  return true;
}
template <class Atom>
__host__ __device__ constexpr bool row_free_value_bit(int b) {
  for (int lane = 0; lane < kWarpSize; ++lane)
    for (int v = 0; v < Atom::c_values; ++v)
      if (Atom::c_row(lane, v ^ (1 << b)) != Atom::c_row(lane, v)) return false;
  return true;
}
template <class Atom>
__host__ __device__ constexpr int row_free_lanes() {
  int mask = 0;
  for (int b = 0; (1 << b) < kWarpSize; ++b)
    if (row_free_lane_bit<Atom>(b)) mask |= 1 << b;
  return mask;
}
template <class Atom>
__host__ __device__ constexpr int row_free_values() {
  int mask = 0;
  for (int b = 0; (1 << b) < Atom::c_values; ++b)
    if (row_free_value_bit<Atom>(b)) mask |= 1 << b;
  return mask;
}
__host__ __device__ constexpr int bits_set(int x) { return x == 0 ? 0 : (x & 1) + bits_set(x >> 1); }

// r[v] (a value per C value of one lane) folded with the values and lanes that hold the same row (row_free_values,
// row_free_lanes): afterwards each r[v] is the fold of its whole row, in every lane that holds part of it.
template <class Atom, class Op>
__device__ __forceinline__ void fold_row_shares(float (&r)[Atom::c_values], Op op) {
  constexpr int values = row_free_values<Atom>(), lanes = row_free_lanes<Atom>();
#pragma unroll
  for (int b = 1; b < Atom::c_values; b *= 2)
    if (values & b) {
      float t[Atom::c_values];
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) t[v] = op(r[v], r[v ^ b]);
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) r[v] = t[v];
    }
#pragma unroll
  for (int b = 1; b < kWarpSize; b *= 2)
    if (lanes & b)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) r[v] = op(r[v], shfl_xor(r[v], b));
}

// A's fragment from C fragments of the same lane (P of P·V from S's accumulators, FlashAttention-style): value v of
// A's K step s is value c_value of C atom s * (k / n) + c_atom. Found from lane 0; c_feeds_a checks every lane.
template <class Atom>
__host__ __device__ constexpr int c_for_a(int v) {
  for (int j = 0; j < Atom::k / Atom::n; ++j)
    for (int w = 0; w < Atom::c_values; ++w)
      if (Atom::c_row(0, w) == Atom::a_row(0, v) && j * Atom::n + Atom::c_col(0, w) == Atom::a_col(0, v))
        return j * Atom::c_values + w;
  return -1;
}
// c_for_a of every A value, as a table the compiler folds into register names.
template <class Atom>
struct CForA {
  int x[Atom::a_values];
  __host__ __device__ constexpr CForA() : x{} {
    for (int v = 0; v < Atom::a_values; ++v) x[v] = c_for_a<Atom>(v);
  }
};
template <class Atom>
__host__ __device__ constexpr bool c_feeds_a() {
  for (int v = 0; v < Atom::a_values; ++v) {
    const int x = c_for_a<Atom>(v);
    if (x < 0) return false;
    for (int lane = 0; lane < kWarpSize; ++lane)
      if (Atom::c_row(lane, x % Atom::c_values) != Atom::a_row(lane, v) ||
          x / Atom::c_values * Atom::n + Atom::c_col(lane, x % Atom::c_values) != Atom::a_col(lane, v))
        return false;
  }
  return true;
}

// The value of 16-bit element `half` (0: the low one) of a fragment register, in f32.
template <class T>
__device__ __forceinline__ float fragment_value(unsigned r, int half) {
  T x;
  x.bits = static_cast<unsigned short>(r >> (16 * half));
  return to_f32(x);
}

// Sums of squares of A's rows over a task's K steps, taken from the fragments the matrix instruction is fed (lowering
// pass norms_from_fragments: QK-norm's query factors without a pass over shared memory or a barrier): rows[v] for the
// row of C value v, through A's renaming to C values (c_for_a). finish() combines the lanes and values that share a
// row (the C layout's row-free ones) and scales the task's accumulators by post(row sum).
template <class Atom>
struct RowSums {
  static_assert(c_feeds_a<Atom>(), "the target file's A layout does not follow its C rows (lowering checks)");
  float rows[Atom::c_values] = {};

  template <class T>
  __device__ __forceinline__ void on_a(const unsigned (&a)[4]) {
    constexpr CForA<Atom> map{};
#pragma unroll
    for (int v = 0; v < Atom::a_values; ++v) {
      const float x = fragment_value<T>(a[v / 2], v % 2);
      rows[map.x[v] % Atom::c_values] += x * x;
    }
  }
  template <int ATOMS_N, class Post>
  __device__ __forceinline__ void finish(float (&acc)[ATOMS_N][Atom::c_values], Post post) {
    fold_row_shares<Atom>(rows, SumOp());
#pragma unroll
    for (int v = 0; v < Atom::c_values; ++v) {
      const float factor = post(rows[v]);
#pragma unroll
      for (int j = 0; j < ATOMS_N; ++j) acc[j][v] *= factor;
    }
  }
};

// A tile [S] of f32 held in registers, in the C fragments of Atom tiled over the block's WARPS warps as WarpTiling
// says: a matmul's result (mma() runs the matmul into the registers, accumulating across a kernel's for-loop
// without touching shared memory; A may itself be a register tile of whole rows), or what statements over whole
// rows computed from one (mg::regs_*). publish() stores it to a shared tile, the SPLIT warps of a task adding their
// parts in turn (SPLIT - 1 barriers, every thread must call it), or with a parts tile all at once (one barrier).
template <class Atom, class S, int ATOMS_N, int SPLIT, int WARPS>
struct Fragments {
  static_assert(Atom::m == 16 && Atom::n == 8 && Atom::k == 16, "morgana_tile.cuh implements m16n8k16");
  static_assert(ldmatrix_matches<Atom>(), "the target file's A/B lane layouts are not ldmatrix's");
  typedef WarpTiling<Atom, S, ATOMS_N, SPLIT, WARPS> Tiling;
  typedef Atom atom;
  typedef S shape;
  static constexpr int atoms_n = ATOMS_N, warps = WARPS;
  float acc[Tiling::per_warp][ATOMS_N][Atom::c_values];

  // Whether this lane's value v is the one copy of its element that writes it out: a row vector holds each row in
  // every lane and value of the row.
  __device__ __forceinline__ static bool writes(int lane, int v) {
    return !Tiling::row_vector || ((lane & row_free_lanes<Atom>()) == 0 && (v & row_free_values<Atom>()) == 0);
  }

  template <class SA, class SB, class TA, class TB>
  __device__ __forceinline__ void mma(const TA* a, const TB* b, bool accumulate) {
    mma_each_task<SA, SB, NoSums>(a, b, accumulate, [](NoSums&, float (&)[ATOMS_N][Atom::c_values]) {});
  }

  // The product of two shared tiles, A 16-bit, with each row times post(the sum of squares of A's row): an rms_norm's
  // factor (lowering pass norms_from_fragments), taken from the fragments the instruction is fed.
  template <class SA, class SB, class TA, class TB, class Post>
  __device__ __forceinline__ void mma_row_normed(const TA* a, const TB* b, Post post) {
    static_assert(SPLIT == 1 && sizeof(TA) == 2, "lowering takes row norms from 16-bit A fragments of whole K");
    mma_each_task<SA, SB, RowSums<Atom>>(
        a, b, false, [&](RowSums<Atom>& sums, float (&acc_i)[ATOMS_N][Atom::c_values]) { sums.finish(acc_i, post); });
  }

  // Each of this warp's tasks: its part of K's steps into its accumulators, a fresh Sums seeing the A fragments,
  // then finish(sums, the task's accumulators).
  template <class SA, class SB, class Sums, class TA, class TB, class Finish>
  __device__ __forceinline__ void mma_each_task(const TA* a, const TB* b, bool accumulate, Finish finish) {
    constexpr int K = SA::d3;
    static_assert(K % (Atom::k * SPLIT) == 0, "lowering chose the tiling for K");
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
    const int team = warp % Tiling::teams, part = warp / Tiling::teams;
    if (part >= SPLIT) return;
#pragma unroll
    for (int i = 0; i < Tiling::per_warp; ++i) {
      int task = team + i * Tiling::teams;
      if constexpr (SPLIT == 1 && Tiling::groups_n == 1)
        task = Tiling::computed(task);
      else if (!Tiling::has(task))
        break;
      if (!accumulate) clear(i);
      constexpr int k_steps = K / Atom::k / SPLIT;
      Sums sums;
      mma_task<Atom, S, SA, SB, ATOMS_N>(acc[i], a, b, task, part * k_steps, k_steps, lane, sums);
      finish(sums, acc[i]);
    }
  }

  // The same with A in registers: the C fragments of a register tile of the same rows (whole rows per task), each
  // K step's A fragment renamed from two of its atoms and converted to B's 16-bit type.
  template <class SA, class SB, class SP, int AN, class TB>
  __device__ __forceinline__ void mma(const Fragments<Atom, SP, AN, 1, WARPS>& a, const TB* b, bool accumulate) {
    mma_from_registers<SA, SB>(a, b, accumulate, [](int, int) { return 1.0f; });
  }
  // The same with A's rows scaled by a row vector of the same rows (value v of a C fragment is in the row of the
  // row vector's value v) before the conversion: an online-softmax accumulator taking P·V with P's rows times
  // exp(m - M') (lowering pass accumulate_rescaled_products).
  template <class SA, class SB, class SP, int AN, class SR, class TB>
  __device__ __forceinline__ void mma(const Fragments<Atom, SP, AN, 1, WARPS>& a,
                                      const Fragments<Atom, SR, 1, 1, WARPS>& rows, const TB* b, bool accumulate) {
    static_assert(Fragments<Atom, SR, 1, 1, WARPS>::Tiling::row_vector &&
                      Fragments<Atom, SR, 1, 1, WARPS>::Tiling::tasks == Tiling::tasks,
                  "the scale is a row vector of A's rows");
    mma_from_registers<SA, SB>(a, b, accumulate, [&](int i, int v) { return rows.acc[i][0][v]; });
  }

  template <class SA, class SB, class SP, int AN, class TB, class Scale>
  __device__ __forceinline__ void mma_from_registers(const Fragments<Atom, SP, AN, 1, WARPS>& a, const TB* b,
                                                     bool accumulate, Scale scale) {
    typedef Fragments<Atom, SP, AN, 1, WARPS> FA;
    typedef typename FA::Tiling TA;
    constexpr int K = SA::d3, N = S::d3;
    static_assert(SPLIT == 1 && Tiling::groups_n == 1 && TA::groups_n == 1 && FA::warps == WARPS &&
                      TA::tasks == Tiling::tasks && K == FA::atoms_n * Atom::n,
                  "A and the result hold the same whole rows in the same warps");
    static_assert(c_feeds_a<Atom>(), "the target file's C layout does not feed A (lowering checks c_fragments_feed_a)");
    const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
    for (int i = 0; i < Tiling::per_warp; ++i) {
      const int task = Tiling::computed(warp + i * WARPS);
      if (!accumulate) clear(i);
      const int bt = task / Tiling::row_blocks;
      const TB* pb = b + ((SB::d0 == 1 ? 0 : bt / S::d1) * SB::d1 + (SB::d1 == 1 ? 0 : bt % S::d1)) * (K * N);
#pragma unroll
      for (int step = 0; step < K / Atom::k; ++step) {
        unsigned fa[Atom::a_values / 2];
#pragma unroll
        for (int r = 0; r < Atom::a_values / 2; ++r) {
          unsigned h[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            constexpr int per_step = Atom::k / Atom::n;
            constexpr CForA<Atom> map{};
            const int x = map.x[2 * r + half], v = x % Atom::c_values;
            h[half] = word_bits(from_f32<TB>(a.acc[i][step * per_step + x / Atom::c_values][v] * scale(i, v)));
          }
          fa[r] = pack2(h[0], h[1]);
        }
        mma_atoms<Atom, SB, TB>(acc[i], fa, pb, step * Atom::k, 0, lane);
      }
    }
  }

  __device__ __forceinline__ void clear(int i) {
#pragma unroll
    for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) acc[i][j][v] = 0.0f;
  }

  // f(e, x) for each element this thread writes out: x its part (or whole value) of element e of the shared tile.
  template <class Fn>
  __device__ __forceinline__ void for_each_written(Fn f) const {
    const int lane = threadIdx.x % kWarpSize, team = threadIdx.x / kWarpSize % Tiling::teams;
#pragma unroll
    for (int i = 0; i < Tiling::per_warp; ++i) {
      const int task = team + i * Tiling::teams;
      if (!Tiling::has(task)) break;
#pragma unroll
      for (int j = 0; j < ATOMS_N; ++j)
#pragma unroll
        for (int v = 0; v < Atom::c_values; ++v) {
          const int e = task_element<Atom, S, ATOMS_N>(task, j, v, lane);
          if (e >= 0 && writes(lane, v)) f(e, acc[i][j][v]);
        }
    }
  }

  __device__ __forceinline__ void publish(float* dst) const {
    const int part = threadIdx.x / kWarpSize / Tiling::teams;
#pragma unroll 1
    for (int turn = 0; turn < SPLIT; ++turn) {
      if (part == turn) for_each_written([&](int e, float x) { dst[e] = turn == 0 ? x : dst[e] + x; });
      if (turn + 1 < SPLIT) __syncthreads();
    }
  }

  // publish() with the parts met side by side in `parts` (f32[SPLIT - 1, S::size], lowering pass
  // publish_split_parts_at_once): the warps of parts 1.. store theirs at once, and after one barrier the warp of
  // part 0, whose lanes hold the same elements, adds them to its own in publish()'s order (the same sums, bit for
  // bit) and stores the element. One barrier and two steps instead of SPLIT - 1 barriers and SPLIT turns, which kept
  // all but one warp waiting (bench/notes-fast-kernels-1.md, session 30). Every thread must call it.
  __device__ __forceinline__ void publish(float* dst, float* parts) const {
    static_assert(SPLIT > 1, "a task of one part has nothing to meet");
    const int part = threadIdx.x / kWarpSize / Tiling::teams;
    if (part > 0 && part < SPLIT) for_each_written([&](int e, float x) { parts[(part - 1) * S::size + e] = x; });
    __syncthreads();
    if (part == 0)
      for_each_written([&](int e, float x) {
#pragma unroll
        for (int p = 1; p < SPLIT; ++p) x += parts[(p - 1) * S::size + e];
        dst[e] = x;
      });
  }
};

// Statements whose result is a register tile of whole rows per warp task (lowering pass keep_rows_in_registers):
// each thread computes the elements it holds, reading its operands from registers of the same layout or from
// shared tiles, so no thread waits for another.

// An operand in shared memory, read at the element of the result (broadcast like mg::binary's).
template <class S, class T>
struct Smem {
  const T* p;
};
template <class S, class T>
__device__ __forceinline__ Smem<S, T> smem(const T* p) {
  return {p};
}

// Operand x's value at value v of atom j of the thread's task i, whose index in the result is e (flat) and x.
template <class Atom, class S, int ATOMS_N, int SPLIT, int WARPS>
__device__ __forceinline__ float at(const Fragments<Atom, S, ATOMS_N, SPLIT, WARPS>& f, int i, int j, int v,
                                    const Idx&) {
  return f.acc[i][S::d3 == 1 ? 0 : j][v];
}
template <class S, class T>
__device__ __forceinline__ float at(const Smem<S, T>& s, int, int, int, const Idx& x) {
  return to_f32(s.p[broadcast_offset<S>(x)]);
}

// fn(i, j, v, x) for every value the thread holds of F: value v of atom j of its task i, at index x of F's shape
// (rows past M at row M - 1's index).
template <class F, class Fn>
__device__ __forceinline__ void for_each_held(Fn fn) {
  typedef typename F::Tiling Tiling;
  static_assert(Tiling::teams == F::warps && Tiling::groups_n == 1, "whole rows per warp task");
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int i = 0; i < Tiling::per_warp; ++i) {
    const int task = Tiling::computed(warp + i * F::warps);
#pragma unroll
    for (int j = 0; j < F::atoms_n; ++j)
#pragma unroll
      for (int v = 0; v < F::atom::c_values; ++v) {
        fn(i, j, v, held_index<typename F::atom, typename F::shape, F::atoms_n>(task, j, v, lane));
      }
  }
}

template <class F, class A, class Fn>
__device__ __forceinline__ void regs_unary(F& dst, const A& a, Fn f) {
  for_each_held<F>([&](int i, int j, int v, const Idx& x) { dst.acc[i][j][v] = f(at(a, i, j, v, x)); });
}
template <class F, class A, class B, class Fn>
__device__ __forceinline__ void regs_binary(F& dst, const A& a, const B& b, Fn f) {
  for_each_held<F>(
      [&](int i, int j, int v, const Idx& x) { dst.acc[i][j][v] = f(at(a, i, j, v, x), at(b, i, j, v, x)); });
}

// dst (a row vector) = the rows of x folded: each thread folds its atoms and the values of a row it holds, then
// the lanes that share the row combine by shuffles (the C layout says which: row_free_lanes).
// `pre` maps each element before the fold, `post` each row's result.
template <class F, class X, class Op, class Pre, class Post>
__device__ __forceinline__ void regs_reduce(F& dst, const X& x, Op op, Pre pre, Post post) {
  typedef typename X::atom Atom;
  typedef typename X::Tiling Tiling;
  static_assert(F::Tiling::row_vector && F::Tiling::tasks == Tiling::tasks && Tiling::groups_n == 1,
                "a row vector of the same rows");
  static_assert((1 << bits_set(row_free_lanes<Atom>())) * (1 << bits_set(row_free_values<Atom>())) == Atom::n,
                "the lanes and values of a row cover it");
#pragma unroll
  for (int i = 0; i < Tiling::per_warp; ++i) {
    float r[Atom::c_values];
#pragma unroll
    for (int v = 0; v < Atom::c_values; ++v) {
      r[v] = pre(x.acc[i][0][v]);
#pragma unroll
      for (int j = 1; j < X::atoms_n; ++j) r[v] = op(r[v], pre(x.acc[i][j][v]));
    }
    fold_row_shares<Atom>(r, op);
#pragma unroll
    for (int v = 0; v < Atom::c_values; ++v) dst.acc[i][0][v] = post(r[v]);
  }
}
template <class F, class X, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void regs_reduce_sum(F& dst, const X& x, Pre pre = {}, Post post = {}) {
  regs_reduce(dst, x, SumOp(), pre, post);
}
template <class F, class X, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void regs_reduce_max(F& dst, const X& x, Pre pre = {}, Post post = {}) {
  regs_reduce(dst, x, MaxOp(), pre, post);
}

// An accumulator: the first iteration takes x, later ones fold it in.
template <class F, class X, class Op>
__device__ __forceinline__ void regs_accumulate(F& acc, const X& x, bool first, Op op) {
  for_each_held<F>([&](int i, int j, int v, const Idx& e) {
    const float y = at(x, i, j, v, e);
    acc.acc[i][j][v] = first ? y : op(acc.acc[i][j][v], y);
  });
}
template <class F, class X>
__device__ __forceinline__ void regs_acc_sum(F& acc, const X& x, bool first) {
  regs_accumulate(acc, x, first, SumOp());
}
template <class F, class X>
__device__ __forceinline__ void regs_acc_max(F& acc, const X& x, bool first) {
  regs_accumulate(acc, x, first, MaxOp());
}

// The online-softmax step's factors for the rows of task i of a register accumulator (running max run_max, a row
// vector): M' = max(M, m) held in H, alpha = exp(M - M') for the accumulator (0 on the first iteration), beta =
// exp(m - M') for this iteration's x; run_max moves on to M'. Once per row value the thread holds, not per element.
template <class H, class R, class Mx>
__device__ __forceinline__ void rescale_factors(R& run_max, const Mx& m, int i, int task, int lane, bool first,
                                                float (&alpha)[R::atom::c_values], float (&beta)[R::atom::c_values]) {
  typedef typename R::atom Atom;
#pragma unroll
  for (int v = 0; v < Atom::c_values; ++v) {
    const float mj = at(m, i, 0, v, held_index<Atom, typename R::shape, 1>(task, 0, v, lane));
    const float old = run_max.acc[i][0][v], next = held<H>(first ? mj : max_nan(old, mj));
    alpha[v] = first ? 0.0f : fast_exp_diff(old, next);
    beta[v] = first ? held_scale<H>(mj, next) : fast_exp_diff(mj, next);
    run_max.acc[i][0][v] = next;
  }
}

// fn(i, task, lane) for each task i of the warp tasks this thread holds of register accumulator F, whose running
// max R is a row vector of the same rows: the loop the two online-softmax statements below share.
template <class F, class R, class Fn>
__device__ __forceinline__ void for_each_row_task(Fn fn) {
  typedef typename R::Tiling RT;
  static_assert(RT::row_vector && RT::tasks == F::Tiling::tasks, "the running max is a row vector of the rows");
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int i = 0; i < RT::per_warp; ++i) fn(i, RT::computed(warp + i * F::warps), lane);
}

// The online-softmax accumulator (mg::acc_rescale_sum) on registers, its running max a row vector beside it.
template <class H, class F, class R, class X, class Mx>
__device__ __forceinline__ void regs_acc_rescale_sum(F& acc, R& run_max, const X& x, const Mx& m, bool first) {
  typedef typename F::atom Atom;
  for_each_row_task<F, R>([&](int i, int task, int lane) {
    float alpha[Atom::c_values], beta[Atom::c_values];
    rescale_factors<H>(run_max, m, i, task, lane, first, alpha, beta);
#pragma unroll
    for (int j = 0; j < F::atoms_n; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) {
        const float y = at(x, i, j, v, held_index<Atom, typename F::shape, F::atoms_n>(task, j, v, lane));
        acc.acc[i][j][v] = first ? y * beta[v] : acc.acc[i][j][v] * alpha[v] + y * beta[v];
      }
  });
}

// The first half of regs_acc_rescale_sum for an accumulator whose product the matrix instruction adds itself
// (Fragments::mma with a row scale; lowering pass accumulate_rescaled_products): the running max moves on to M',
// acc is rescaled by exp(M - M') (cleared on the first iteration), and `scale` gets the product's factor exp(m - M')
// per row (held_scale on the first iteration), the factors the whole statement would apply.
template <class H, class F, class R, class X>
__device__ __forceinline__ void regs_rescale(F& acc, R& run_max, R& scale, const X& m, bool first) {
  typedef typename F::atom Atom;
  for_each_row_task<F, R>([&](int i, int task, int lane) {
    float alpha[Atom::c_values];
    rescale_factors<H>(run_max, m, i, task, lane, first, alpha, scale.acc[i][0]);
#pragma unroll
    for (int j = 0; j < F::atoms_n; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; ++v) acc.acc[i][j][v] = first ? 0.0f : acc.acc[i][j][v] * alpha[v];
  });
}

// The register tile f written into dst at origin (o0..o3), converted to dst's type, as mg::store: each element by
// the one thread that writes it; two neighbouring elements per access where the C layout pairs them and the
// lowering proved VEC-byte alignment for at least two (VEC as for mg::store; a masked last dim holds whole vectors).
template <class G, int MASK, int VEC, class U, class F>
__device__ __forceinline__ void store_regs(U* __restrict__ dst, const F& f, i64 o0, i64 o1, i64 o2, i64 o3) {
  typedef typename F::Tiling Tiling;
  typedef typename F::atom Atom;
  constexpr bool pairs = VEC >= static_cast<int>(2 * sizeof(U)) && G::s3 == 1 && F::shape::d3 % 2 == 0 &&
                         !Tiling::row_vector && values_pair<Atom, 'c'>();
  constexpr int step = pairs ? 2 : 1;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int i = 0; i < Tiling::per_warp; ++i) {
    const int task = warp + i * F::warps;
    if (!Tiling::has(task)) break;
#pragma unroll
    for (int j = 0; j < F::atoms_n; ++j)
#pragma unroll
      for (int v = 0; v < Atom::c_values; v += step) {
        Idx x;
        if (!task_index<Atom, typename F::shape, F::atoms_n>(task, j, v, lane, x) || !F::writes(lane, v)) continue;
        const GlobalIdx<G> g(o0, o1, o2, o3, x);
        if (!g.template inside<MASK>()) continue;
        U* to = dst + g.offset();
        if constexpr (pairs) {
          Run<2, U> r;
          r.v[0] = from_f32<U>(f.acc[i][j][v]);
          r.v[1] = from_f32<U>(f.acc[i][j][v + 1]);
          *reinterpret_cast<Run<2, U>*>(to) = r;
        } else {
          *to = from_f32<U>(f.acc[i][j][v]);
        }
      }
  }
}

// The run a lane of LANES lanes folding a contiguous group of N elements of T reads per access: the longest of 16, 8
// and 4 bytes whose runs the lanes divide the group into evenly (1: element by element). Runs that LANES lanes divide
// evenly, any power-of-two fraction of them divides evenly too.
template <class T, int N, int LANES = kWarpSize>
__host__ __device__ constexpr int warp_fold_run() {
  for (int v = 16 / static_cast<int>(sizeof(T)); v >= 2 && v * static_cast<int>(sizeof(T)) >= 4; v /= 2)
    if (N % (v * LANES) == 0) return v;
  return 1;
}

// acc folded over the lanes of a warp by a shuffle tree of the warp's size; every lane ends with the whole fold.
template <class Op>
__device__ __forceinline__ float warp_fold(float acc, Op op) {
#pragma unroll
  for (int mask = kWarpSize / 2; mask > 0; mask /= 2) acc = op(acc, shfl_xor(acc, mask));
  return acc;
}

// Folds dim DIM of x (shape SX) to TO groups: element j of the result folds x[j], x[j + TO], x[j + 2 TO], ...
// Without BY_WARPS one thread folds each result element, in that order (the reference interpreter's order). With
// BY_WARPS (lowering: the group has at least a warp's worth of elements) a warp folds each result element: lane l
// folds elements l, l + warp, ... of the group, then a shuffle tree of the warp's size combines the lanes. Sums
// then differ from the in-order fold by rounding only; a max is the same. `pre` maps each element of x as it is
// read, `post` each folded result before it is written.
//
// Split in two so that a fold can run over several tiles before its result is written (mg::LoopFold): part() is
// what this thread contributes to result element e (BY_WARPS: its lane's partial fold; else the whole fold), and
// finish() combines a warp's lanes (BY_WARPS) and writes. Result elements are dealt round robin to the block's warps
// (BY_WARPS) or threads: this thread's are first(), first() + step(), ...
//
// With TEAM > 1 (lowering: fewer results than warps, groups of at least TEAM warps' worth), a team of TEAM warps
// folds each result element, its lanes striding the group together; mg::team_reduce combines the team's warps.
template <class SX, class SY, int DIM, int TO, bool BY_WARPS, int TEAM = 1>
struct Fold {
  static constexpr int n = extent<SX>(DIM), in = inner<SX>(DIM), groups = n / TO, lanes_max = kWarpSize * TEAM;
  static_assert(!BY_WARPS || groups >= lanes_max, "lowering folds by warps only groups of a team's lanes or more");
  static_assert(TEAM == 1 || (BY_WARPS && (TEAM & (TEAM - 1)) == 0 && TEAM <= kWarpSize),
                "a team is a power of two of warps, at most a warp's lanes (they combine its folds)");
  // A swizzled tile's chunks are permuted within each row: a fold of whole rows may ignore it (its vector path reads
  // a row's elements in any order); the others read each element where stored_at puts it.
  // Warps per result element: TEAM, which lowering sized for the block it launches (a compile-time constant, so that
  // the team's lane arithmetic folds away); the host emulation runs kernels with fewer warps and halves it while the
  // block has fewer warps than results x team.
  __device__ __forceinline__ static int team() {
#ifdef MG_HOST_EMULATION
    int t = TEAM;
    while (t > 1 && t * SY::size > static_cast<int>(blockDim.x) / kWarpSize) t /= 2;
    return t;
#else
    return TEAM;
#endif
  }
  __device__ __forceinline__ static int first() {
    return BY_WARPS ? static_cast<int>(threadIdx.x) / kWarpSize / team() : static_cast<int>(threadIdx.x);
  }
  __device__ __forceinline__ static int step() {
    return BY_WARPS ? static_cast<int>(blockDim.x) / kWarpSize / team() : static_cast<int>(blockDim.x);
  }

  template <class T, class Op, class Pre>
  __device__ __forceinline__ static float part(int e, const T* x, Op op, Pre pre) {
    if constexpr (BY_WARPS) {
      // This lane's place among its team's lanes, and their number.
      const int t = team(), lanes = kWarpSize * t;
      const int lane = static_cast<int>(threadIdx.x) / kWarpSize % t * kWarpSize + threadIdx.x % kWarpSize;
      constexpr int V = warp_fold_run<T, n, lanes_max>();
      if constexpr (in == 1 && TO == 1 && V > 1) {
        // Contiguous groups (the last dim folded whole): each lane reads runs of V neighbours, one vector access per
        // run (run l, l + lanes, ... of the group; tiles start 16-byte aligned and n is a multiple of V * lanes).
        const Run<V, T>* p = reinterpret_cast<const Run<V, T>*>(x + e * n);
        Run<V, T> r = p[lane];
        float acc = pre(to_f32(r.v[0]));
#pragma unroll
        for (int u = 1; u < V; ++u) acc = op(acc, pre(to_f32(r.v[u])));
#pragma unroll
        for (int k = lane + lanes; k < n / V; k += lanes) {
          r = p[k];
#pragma unroll
          for (int u = 0; u < V; ++u) acc = op(acc, pre(to_f32(r.v[u])));
        }
        return acc;
      } else {
        const int i = e % in, j = e / in % TO, o = e / in / TO, first = (o * n + j) * in + i;
        float acc = pre(to_f32(x[stored_at<SX>(first + lane * TO * in)]));
        // Unrolled so that the loads of several steps are in flight before their folds: a fold waits on each
        // shared load otherwise (the order of the folds is unchanged).
#pragma unroll 8
        for (int k = lane + lanes; k < groups; k += lanes) acc = op(acc, pre(to_f32(x[stored_at<SX>(first + k * TO * in)])));
        return acc;
      }
    } else {
      const int i = e % in, j = e / in % TO, o = e / in / TO, first = (o * n + j) * in + i;
      float acc = pre(to_f32(x[stored_at<SX>(first)]));
      // A thread's whole fold: unrolled for the same reason (qknorm's K norm over 64 rows of a column, one thread
      // per column, waited ~30 cycles on every load).
#pragma unroll 8
      for (int k = 1; k < groups; ++k) acc = op(acc, pre(to_f32(x[stored_at<SX>(first + k * TO * in)])));
      return acc;
    }
  }

  // Every lane of a warp calls it for the same e (BY_WARPS): the shuffle tree needs them all.
  template <class Op, class Post>
  __device__ __forceinline__ static void finish(float* dst, int e, float acc, Op op, Post post) {
    if constexpr (BY_WARPS) {
      acc = warp_fold(acc, op);
      if (threadIdx.x % kWarpSize == 0) dst[e] = post(acc);
    } else {
      dst[e] = post(acc);
    }
  }
};

// The elements of a 16-byte access to a tile of T.
template <class T>
__host__ __device__ constexpr int chunk_elements() {
  return 16 / static_cast<int>(sizeof(T));
}

// A fold over the rows of each matrix of a tile (dst[b][c] = the fold of x[b][0..R)[c]: QK-norm's sums of squares of
// K's columns): a thread per 16-byte chunk of a row folds the chunk's columns down its share of the rows, one vector
// access per row, and the P lanes that share a chunk combine their folds by shuffles. A thread per column element by
// element spent about 12 instructions per element on the swizzle's address arithmetic, the scalar load and its
// conversion (qknorm_b8 on the H100: 17.5 M warp instructions in its flash kernel against 8.8 M for gqa_b8's).
// The P lanes of a chunk read it in P rows: rows of a swizzled tile put them in distinct banks.
template <class SX, class SY, class T, class Op, class Pre, class Post>
__device__ __forceinline__ void fold_rows_by_chunks(float* dst, const T* x, Op op, Pre pre, Post post) {
  constexpr int V = chunk_elements<T>(), C = SX::d3 / V, R = SX::d2, items = SX::d0 * SX::d1 * C;
  const int threads = static_cast<int>(blockDim.x);
  int P = 1;  // lanes per chunk: a power of two within a warp, at most the rows, all chunks at once where they fit
  while (P * 2 <= kWarpSize && P * 2 * items <= threads && P * 2 <= R) P *= 2;
  // Every thread runs the same number of rounds (the shuffles need whole warps); a slot past the chunks folds the
  // last one again and writes nothing.
  for (int base = 0; base < items * P; base += threads) {
    const int slot = base + static_cast<int>(threadIdx.x), item = slot / P < items ? slot / P : items - 1, part = slot % P;
    const int b = item / C, c = item % C;
    float acc[V];
    {
      const Run<V, T> r = *reinterpret_cast<const Run<V, T>*>(x + stored_at<SX>(b * R + part, c * V));
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] = pre(to_f32(r.v[u]));
    }
#pragma unroll 4
    for (int row = part + P; row < R; row += P) {
      const Run<V, T> r = *reinterpret_cast<const Run<V, T>*>(x + stored_at<SX>(b * R + row, c * V));
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] = op(acc[u], pre(to_f32(r.v[u])));
    }
    for (int mask = P / 2; mask > 0; mask /= 2)
#pragma unroll
      for (int u = 0; u < V; ++u) acc[u] = op(acc[u], shfl_xor(acc[u], mask));
    if (part == 0 && slot < items * P)
#pragma unroll
      for (int u = 0; u < V; ++u) dst[b * SX::d3 + c * V + u] = post(acc[u]);
  }
}

// Whether rows of N elements of T are short rows for a warp: a power of two of 16-byte chunks, fewer than its lanes.
template <class T, int N>
__host__ __device__ constexpr bool short_rows() {
  constexpr int V = chunk_elements<T>(), C = N / V;
  return N % V == 0 && C > 1 && C < kWarpSize && (C & (C - 1)) == 0;
}

// A fold of whole short rows (the last dim, to one result each; rows of a swizzled tile in any order of their
// chunks): a lane per 16-byte chunk, kWarpSize / C rows per warp at a time, a shuffle tree of C lanes per row. A warp
// per row with its shuffle tree of the warp's size, row after row, was a chain of dependent shuffles: QK-norm's
// 64 rows of Q (128 bytes each) cost its flash kernel ~3 us of its 10.8 on the H100 (qknorm_b1, ncu; 6.8 without
// the norm).
template <class SX, class SY, class T, class Op, class Pre, class Post>
__device__ __forceinline__ void fold_short_rows(float* dst, const T* x, Op op, Pre pre, Post post) {
  constexpr int V = chunk_elements<T>(), C = SX::d3 / V, per_warp = kWarpSize / C, rows = SX::size / SX::d3;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int step = static_cast<int>(blockDim.x) / kWarpSize * per_warp;
  // Every lane of a warp runs the same rounds (the shuffles need them all); a row past the last folds it again and
  // writes nothing.
#pragma unroll 4
  for (int base = warp * per_warp; base < rows; base += step) {
    const int row = base + lane / C, c = lane % C;
    const Run<V, T> r = *reinterpret_cast<const Run<V, T>*>(x + (row < rows ? row : rows - 1) * SX::d3 + c * V);
    float acc = pre(to_f32(r.v[0]));
#pragma unroll
    for (int u = 1; u < V; ++u) acc = op(acc, pre(to_f32(r.v[u])));
#pragma unroll
    for (int mask = C / 2; mask > 0; mask /= 2) acc = op(acc, shfl_xor(acc, mask));
    if (c == 0 && row < rows) dst[row] = post(acc);
  }
}

template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T, class Op, class Pre, class Post>
__device__ __forceinline__ void reduce(float* dst, const T* x, Op op, Pre pre, Post post) {
  if constexpr (DIM == 2 && TO == 1 && !BY_WARPS && SX::d2 > 1 && SX::d3 % chunk_elements<T>() == 0) {
    fold_rows_by_chunks<SX, SY>(dst, x, op, pre, post);
  } else if constexpr (DIM == 3 && TO == 1 && BY_WARPS && short_rows<T, SX::d3>()) {
    fold_short_rows<SX, SY>(dst, x, op, pre, post);
  } else {
    typedef Fold<SX, SY, DIM, TO, BY_WARPS> F;
    for (int e = F::first(); e < SY::size; e += F::step()) F::finish(dst, e, F::part(e, x, op, pre), op, post);
  }
}

// A reduction of fewer results than the block has warps (lowering: Stmt::team): a team of TEAM warps folds each
// result element (mg::Fold), each warp's fold goes to parts[e * TEAM + its place in the team] (a shared tile of
// SY::size * TEAM floats), and after one barrier a thread per element combines its team's folds in order. Every
// thread of the block must call it (it synchronises inside). The sums differ from the in-order fold by rounding only.
template <class SX, class SY, int DIM, int TO, int TEAM, class T, class Op, class Pre, class Post>
__device__ __forceinline__ void team_reduce(float* dst, float* parts, const T* x, Op op, Pre pre, Post post) {
  typedef Fold<SX, SY, DIM, TO, true, TEAM> F;
  const int team = F::team(), member = static_cast<int>(threadIdx.x) / kWarpSize % team;
  for (int e = F::first(); e < SY::size; e += F::step()) {
    const float acc = warp_fold(F::part(e, x, op, pre), op);
    if (threadIdx.x % kWarpSize == 0) parts[e * TEAM + member] = acc;
  }
  __syncthreads();
  // A warp per element combines the team's folds: lane m < team takes member m's, a shuffle tree of the team's size
  // (masks below it keep lanes 0 .. team-1 among themselves).
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  for (int e = static_cast<int>(threadIdx.x) / kWarpSize; e < SY::size; e += static_cast<int>(blockDim.x) / kWarpSize) {
    float acc = parts[e * TEAM + (lane < team ? lane : 0)];
#pragma unroll
    for (int mask = TEAM / 2; mask > 0; mask /= 2)
      if (mask < team) acc = op(acc, shfl_xor(acc, mask));
    if (lane == 0) dst[e] = post(acc);
  }
}

// A reduction whose results an accumulator of the same fold (acc_sum of a reduce_sum, acc_max of a reduce_max) adds
// up over the for-loop (lowering pass fold_across_loop, kernel IR RegisterLayout::fold): each thread keeps its
// part of its result elements (mg::Fold) in registers across the iterations, and publish() combines the lanes and
// writes the accumulator once, after the loop. No shared memory, no barrier, no shuffle in the loop.
template <class SX, class SY, int DIM, int TO, bool BY_WARPS, int THREADS, class Op>
struct LoopFold {
  typedef Fold<SX, SY, DIM, TO, BY_WARPS> F;
  static constexpr int owners = BY_WARPS ? THREADS / kWarpSize : THREADS;
  static constexpr int slots = (SY::size + owners - 1) / owners;
  float acc[slots];

  template <class T, class Pre = NoMap>
  __device__ __forceinline__ void fold(const T* x, bool first, Pre pre = {}) {
#pragma unroll
    for (int s = 0; s < slots; ++s) {
      const int e = F::first() + s * owners;
      if (e < SY::size) {
        const float v = F::part(e, x, Op(), pre);
        acc[s] = first ? v : Op()(acc[s], v);
      }
    }
  }

  __device__ __forceinline__ void publish(float* dst) const {
#pragma unroll
    for (int s = 0; s < slots; ++s) {
      const int e = F::first() + s * owners;
      if (e < SY::size) F::finish(dst, e, acc[s], Op(), NoMap());
    }
  }
};

template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void reduce_sum(float* dst, const T* x, Pre pre = {}, Post post = {}) {
  reduce<SX, SY, DIM, TO, BY_WARPS>(dst, x, SumOp(), pre, post);
}
template <class SX, class SY, int DIM, int TO, bool BY_WARPS, class T, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void reduce_max(float* dst, const T* x, Pre pre = {}, Post post = {}) {
  reduce<SX, SY, DIM, TO, BY_WARPS>(dst, x, MaxOp(), pre, post);
}
template <class SX, class SY, int DIM, int TO, int TEAM, class T, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void team_reduce_sum(float* dst, float* parts, const T* x, Pre pre = {}, Post post = {}) {
  team_reduce<SX, SY, DIM, TO, TEAM>(dst, parts, x, SumOp(), pre, post);
}
template <class SX, class SY, int DIM, int TO, int TEAM, class T, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void team_reduce_max(float* dst, float* parts, const T* x, Pre pre = {}, Post post = {}) {
  team_reduce<SX, SY, DIM, TO, TEAM>(dst, parts, x, MaxOp(), pre, post);
}

// ---- tiles held by the threads that compute their elements (lowering pass keep_elements_in_registers) ----
//
// A tile of shape S in registers, dealt in runs: run i of V = RUN neighbours (flat elements i*V .. i*V+V-1, inside
// one row) belongs to thread i % THREADS, as its run i / THREADS. Lowering takes RUN as elementwise statements deal
// a shared tile's elements (mg::unary, mg::binary: run_length<S>()), shortened where those runs would leave threads
// of the block without one (targets::element_run). Loads from global memory, elementwise statements, accumulators
// and stores then need neither shared memory nor barriers; a reduction of whole rows exchanges one value per warp
// and row.
template <class S, int THREADS, int RUN = run_length<S>()>
struct Elements {
  static_assert(RUN > 0 && S::d3 % RUN == 0, "a run lies in one row");
  typedef S shape;
  static constexpr int V = RUN, runs = S::size / V, per = (runs + THREADS - 1) / THREADS;
  float v[per][V];
  // The flat index of this thread's run j, and whether the tile has it (the last runs may not reach every thread).
  __device__ __forceinline__ static int run(int j) { return static_cast<int>(threadIdx.x) + j * THREADS; }
  __device__ __forceinline__ static bool has(int j) { return runs % THREADS == 0 || run(j) < runs; }
  // The run a thread computes as its run j: its own, or where the tile has none, a copy of the last one. Loads and
  // register math then run on every thread without a branch (only stores and cross-thread folds ask has(j)), so
  // that the compiler can issue a combining loop's loads of every iteration before the first result is needed:
  // guarded, each load waited for its own latency (H100: a split-KV combine of one 64-column row per block, 64 of
  // 128 threads with a run, 7.5 us against 4.0 for two rows per block with every thread busy).
  __device__ __forceinline__ static int computed_run(int j) { return has(j) ? run(j) : runs - 1; }
};

// Operand x of an elementwise statement on Elements, as the V values of run j at index x: the register tile's own
// run (a tile of one element, which every thread holds, broadcast), or a shared tile read there (broadcast along
// its 1-dims).
template <int V, class S, int N, int R>
__device__ __forceinline__ void run_of(float (&out)[V], const Elements<S, N, R>& r, int j, const Idx&) {
  static_assert(S::size == 1 || V == Elements<S, N, R>::V, "lowering reads registers of the result's shape or of one element");
#pragma unroll
  for (int u = 0; u < V; ++u) out[u] = S::size == 1 ? r.v[0][0] : r.v[j][u];
}
template <int V, class SA, class TA>
__device__ __forceinline__ void run_of(float (&out)[V], const Smem<SA, TA>& a, int, const Idx& x) {
  read_run<V, SA>(out, a.p, x);
}

// Elements of T one global access of VEC bytes moves (1: element by element).
template <int VEC, class T>
__host__ __device__ constexpr int vector_elements() {
  return VEC > static_cast<int>(sizeof(T)) ? VEC / static_cast<int>(sizeof(T)) : 1;
}

// fn(j, u, g) for each vector of PER elements of this thread's runs of E (an mg::Elements) placed at origin
// (o0..o3) of tensor G: run j, first element u of the run, and that element's index g in G. PER divides V: both
// divide the last dim, and lowering proved the alignment as for load.
// STORES: only the runs the tile has (a store); else every run j, a thread without one on a copy of the last
// (Elements::computed_run).
template <class E, class G, int PER, bool STORES, class Fn>
__device__ __forceinline__ void for_each_vector(i64 o0, i64 o1, i64 o2, i64 o3, Fn fn) {
  static_assert(E::V % PER == 0, "a vector never crosses a run");
#pragma unroll
  for (int j = 0; j < E::per; ++j) {
    if (STORES && !E::has(j)) continue;
    const Idx x = unflatten<typename E::shape>((STORES ? E::run(j) : E::computed_run(j)) * E::V);
#pragma unroll
    for (int u = 0; u < E::V; u += PER) fn(j, u, GlobalIdx<G>(o0, o1, o2, o3, Idx{x.i0, x.i1, x.i2, x.i3 + u}));
  }
}

// dst = the tile of src at origin (o0..o3) (elements outside along the masked dims read `pad`), each thread loading
// its own runs straight into registers, VEC bytes per access.
template <class G, int MASK, int VEC, class S, int N, int R, class T>
__device__ __forceinline__ void load_elems(Elements<S, N, R>& dst, const T* __restrict__ src, i64 o0, i64 o1, i64 o2,
                                           i64 o3, float pad) {
  constexpr int per = vector_elements<VEC, T>();
  for_each_vector<Elements<S, N, R>, G, per, false>(o0, o1, o2, o3, [&](int j, int u, const GlobalIdx<G>& g) {
    if (!g.template inside<MASK>()) {
#pragma unroll
      for (int w = 0; w < per; ++w) dst.v[j][u + w] = pad;
    } else if constexpr (per > 1) {
      const Run<per, T> r = *reinterpret_cast<const Run<per, T>*>(src + g.offset());
#pragma unroll
      for (int w = 0; w < per; ++w) dst.v[j][u + w] = to_f32(r.v[w]);
    } else {
      dst.v[j][u] = to_f32(src[g.offset()]);
    }
  });
}

// The tile written into dst at origin (o0..o3), converted to dst's type, each thread storing its own runs; elements
// outside along the masked dims are dropped. VEC as for load_elems.
template <class G, int MASK, int VEC, class U, class S, int N, int R>
__device__ __forceinline__ void store_elems(U* __restrict__ dst, const Elements<S, N, R>& src, i64 o0, i64 o1, i64 o2,
                                            i64 o3) {
  constexpr int per = vector_elements<VEC, U>();
  for_each_vector<Elements<S, N, R>, G, per, true>(o0, o1, o2, o3, [&](int j, int u, const GlobalIdx<G>& g) {
    if (!g.template inside<MASK>()) return;
    if constexpr (per > 1) {
      unsigned w[VEC / 4];
#pragma unroll
      for (int q = 0; q < VEC / 4; ++q) w[q] = 0;
#pragma unroll
      for (int q = 0; q < per; ++q)
        w[q * sizeof(U) / 4] |= word_bits(from_f32<U>(src.v[j][u + q])) << (8 * (q * sizeof(U) % 4));
      Vec<VEC>::store(dst + g.offset(), w);
    } else {
      dst[g.offset()] = from_f32<U>(src.v[j][u]);
    }
  });
}

// fn(j, x) for each run j of E, x the index of the run's first element: every thread's, those without one on a copy of
// the last (Elements::computed_run), since fn only computes in registers.
template <class E, class Fn>
__device__ __forceinline__ void for_each_run(Fn fn) {
#pragma unroll
  for (int j = 0; j < E::per; ++j) fn(j, unflatten<typename E::shape>(E::computed_run(j) * E::V));
}

template <class S, int N, int R, class A, class Fn>
__device__ __forceinline__ void regs_unary(Elements<S, N, R>& dst, const A& a, Fn f) {
  typedef Elements<S, N, R> E;
  for_each_run<E>([&](int j, const Idx& x) {
    float y[E::V];
    run_of(y, a, j, x);
#pragma unroll
    for (int u = 0; u < E::V; ++u) dst.v[j][u] = f(y[u]);
  });
}
template <class S, int N, int R, class A, class B, class Fn>
__device__ __forceinline__ void regs_binary(Elements<S, N, R>& dst, const A& a, const B& b, Fn f) {
  typedef Elements<S, N, R> E;
  for_each_run<E>([&](int j, const Idx& x) {
    float ya[E::V], yb[E::V];
    run_of(ya, a, j, x);
    run_of(yb, b, j, x);
#pragma unroll
    for (int u = 0; u < E::V; ++u) dst.v[j][u] = f(ya[u], yb[u]);
  });
}

// Accumulators on Elements (lowering pass keep_elements_in_registers): each thread folds its own runs across the
// loop; x is registers of S or a shared tile read at each element (broadcast along its 1-dims).
template <class S, int N, int R, class X, class Op>
__device__ __forceinline__ void elems_accumulate(Elements<S, N, R>& acc, const X& x, bool first, Op op) {
  typedef Elements<S, N, R> E;
  for_each_run<E>([&](int j, const Idx& at) {
    float y[E::V];
    run_of(y, x, j, at);
#pragma unroll
    for (int u = 0; u < E::V; ++u) acc.v[j][u] = first ? y[u] : op(acc.v[j][u], y[u]);
  });
}
template <class S, int N, int R, class X>
__device__ __forceinline__ void regs_acc_sum(Elements<S, N, R>& acc, const X& x, bool first) {
  elems_accumulate(acc, x, first, SumOp());
}
template <class S, int N, int R, class X>
__device__ __forceinline__ void regs_acc_max(Elements<S, N, R>& acc, const X& x, bool first) {
  elems_accumulate(acc, x, first, MaxOp());
}
// The online-softmax accumulator on Elements, its running max one per element (run_max, the same layout): only
// the thread that holds an element reads or writes its state.
template <class H, class S, int N, int R, class X, class M>
__device__ __forceinline__ void regs_acc_rescale_sum(Elements<S, N, R>& acc, Elements<S, N, R>& run_max, const X& x,
                                                     const M& m, bool first) {
  typedef Elements<S, N, R> E;
  for_each_run<E>([&](int j, const Idx& at) {
    float y[E::V], mj[E::V];
    run_of(y, x, j, at);
    run_of(mj, m, j, at);
#pragma unroll
    for (int u = 0; u < E::V; ++u) {
      if (first) {
        const float next = held<H>(mj[u]);
        acc.v[j][u] = y[u] * held_scale<H>(mj[u], next);
        run_max.v[j][u] = next;
      } else {
        const float old = run_max.v[j][u], next = held<H>(max_nan(old, mj[u]));
        acc.v[j][u] = acc.v[j][u] * fast_exp(old - next) + y[u] * fast_exp(mj[u] - next);
        run_max.v[j][u] = next;
      }
    }
  });
}

// dst (shared, one value per row) = the rows of x folded (the last dim, whole). Lowering keeps x in registers only
// where a row holds a multiple of a warp's runs, so the runs a warp holds at each j lie in one row: each thread
// folds its run, the warp folds its lanes by shuffles, lane 0 leaves the warp's fold in parts (one per warp and j:
// W = S::d3 / (V * warp) per row, in row order), and after one barrier a thread per row combines its W folds in
// order. `pre` maps each element before the fold, `post` each row's result. Every thread must call it.
template <class Op, class S, int N, int R, class Pre, class Post>
__device__ __forceinline__ void regs_reduce_rows(float* dst, float* parts, const Elements<S, N, R>& x, Op op, Pre pre,
                                                 Post post) {
  typedef Elements<S, N, R> E;
  static_assert(S::d3 % (E::V * kWarpSize) == 0 && N % kWarpSize == 0, "a warp's runs lie in one row");
  constexpr int W = S::d3 / (E::V * kWarpSize), rows = S::size / S::d3;
#pragma unroll
  for (int j = 0; j < E::per; ++j) {
    if (!E::has(j)) continue;
    float acc = pre(x.v[j][0]);
#pragma unroll
    for (int u = 1; u < E::V; ++u) acc = op(acc, pre(x.v[j][u]));
    acc = warp_fold(acc, op);
    if (threadIdx.x % kWarpSize == 0) parts[E::run(j) / kWarpSize] = acc;
  }
  __syncthreads();
  for (int r = static_cast<int>(threadIdx.x); r < rows; r += N) {
    float acc = parts[r * W];
#pragma unroll
    for (int m = 1; m < W; ++m) acc = op(acc, parts[r * W + m]);
    dst[r] = post(acc);
  }
}
template <class S, int N, int R, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void regs_reduce_sum(float* dst, float* parts, const Elements<S, N, R>& x, Pre pre = {},
                                                Post post = {}) {
  regs_reduce_rows(dst, parts, x, SumOp(), pre, post);
}
template <class S, int N, int R, class Pre = NoMap, class Post = NoMap>
__device__ __forceinline__ void regs_reduce_max(float* dst, float* parts, const Elements<S, N, R>& x, Pre pre = {},
                                                Post post = {}) {
  regs_reduce_rows(dst, parts, x, MaxOp(), pre, post);
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

// The online-softmax accumulator: with M the running max of m (shape SM, broadcast to S) and M' = max(M, m) held in
// H (m's element type; the first iteration's M' = m so held), acc = acc * exp(M - M') + x * exp(m - M'), then
// M = M'. The running max has shape SR: SM (one per row of m, which
// several threads read before one rewrites it: a barrier inside), or S (lowering: pass own_accumulator_state; one
// per accumulator element, which only its thread touches: no barrier).
template <class S, class SM, class SR, class H, class T, class TM>
__device__ __forceinline__ void acc_rescale_sum(float* acc, float* run_max, const T* x, const TM* m, bool first) {
  if constexpr (SR::size == S::size) {
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const float mj = to_f32(m[broadcast_offset<SM>(unflatten<S>(e))]);
      if (first) {
        const float next = held<H>(mj);
        acc[e] = to_f32(x[e]) * held_scale<H>(mj, next);
        run_max[e] = next;
      } else {
        const float old = run_max[e], next = held<H>(max_nan(old, mj));
        acc[e] = acc[e] * fast_exp(old - next) + to_f32(x[e]) * fast_exp(mj - next);
        run_max[e] = next;
      }
    }
  } else {
    for (int e = threadIdx.x; e < S::size; e += blockDim.x) {
      const int j = broadcast_offset<SM>(unflatten<S>(e));
      const float mj = to_f32(m[j]);
      if (first) {
        acc[e] = to_f32(x[e]) * held_scale<H>(mj, held<H>(mj));
      } else {
        const float old = run_max[j], next = held<H>(max_nan(old, mj));
        acc[e] = acc[e] * fast_exp(old - next) + to_f32(x[e]) * fast_exp(mj - next);
      }
    }
    if (!first) __syncthreads();  // every thread has read the old maxima before they change
    for (int e = threadIdx.x; e < SM::size; e += blockDim.x)
      run_max[e] = held<H>(first ? to_f32(m[e]) : max_nan(run_max[e], to_f32(m[e])));
  }
}

}  // namespace mg

#endif  // MORGANA_TILE_CUH
