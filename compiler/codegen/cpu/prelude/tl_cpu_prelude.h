// ---- tilelang CPU prelude ---------------------------------------------------
// Pasted verbatim into every generated kernel source (after the CPU kernel
// ABI header), so a generated file is self-contained: one file in, one shared
// object out, nothing but libc and libm.
//
// Rules for this file (it becomes part of every kernel library):
//  * everything has internal linkage (static / static templates): the library
//    exports only tl_cpu_library_query;
//  * no static locals in inline functions, no objects with constructors
//    (would create STB_GNU_UNIQUE symbols or .init_array entries);
//  * the ISA is chosen by the host compiler's -march (x86-64-v2/v3/v4), never
//    at run time: one source, three libraries.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#define TL_INLINE static inline __attribute__((always_inline))
#define TL_RESTRICT __restrict__

#if defined(__AVX512F__)
#define TL_ISA_LEVEL "x86-64-v4"
#elif defined(__AVX2__) && defined(__FMA__)
#define TL_ISA_LEVEL "x86-64-v3"
#else
#define TL_ISA_LEVEL "x86-64-v2"
#endif

// ---- f16 / bf16 ------------------------------------------------------------
// Storage is uint16_t; values are computed in f32 and rounded (nearest-even)
// where they are stored or cast. v3/v4 have F16C; v2 uses the bit tricks
// (F. Giesen, "half_float_fast3_rtne"), checked bit-exactly against F16C in
// tests/compiler/codegen_cpu.
TL_INLINE float tl_bits_f32(uint32_t u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
TL_INLINE uint32_t tl_f32_bits(float f) { uint32_t u; __builtin_memcpy(&u, &f, 4); return u; }

TL_INLINE float tl_f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1fu) return tl_bits_f32(sign | 0x7f800000u | (man << 13));  // inf, nan
  if (exp != 0) return tl_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24 is exact in f32.
  const float mag = (float)man * 5.9604644775390625e-8f;
  return tl_bits_f32(sign | tl_f32_bits(mag));
#endif
}

TL_INLINE uint16_t tl_f32_to_f16(float f) {
#if defined(__F16C__)
  return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  uint32_t x = tl_f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x47800000u) {  // >= 65536 or inf: inf; nan: quiet, upper payload kept (as F16C)
    return (uint16_t)(sign | (x > 0x7f800000u ? 0x7e00u | ((x >> 13) & 0x3ffu) : 0x7c00u));
  }
  if (x < 0x38800000u) {  // below 2^-14: subnormal or zero; let the FPU round
    const float r = tl_bits_f32(x) + 0.5f;
    return (uint16_t)(sign | (tl_f32_bits(r) - 0x3f000000u));
  }
  const uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;  // rebias exponent by (15 - 127), round to nearest even
  return (uint16_t)(sign | (x >> 13));
#endif
}

TL_INLINE float tl_bf16_to_f32(uint16_t h) { return tl_bits_f32((uint32_t)h << 16); }

TL_INLINE uint16_t tl_f32_to_bf16(float f) {
  const uint32_t x = tl_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet nan
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// A float that takes the nearest f16 / bf16 value (casts to f16/bf16 keep
// the value in float registers but must round like a store would).
TL_INLINE float tl_round_f16(float f) { return tl_f16_to_f32(tl_f32_to_f16(f)); }
TL_INLINE float tl_round_bf16(float f) { return tl_bf16_to_f32(tl_f32_to_bf16(f)); }

// ---- integer division with Python semantics ----------------------------------
// Tile IR's `/` and `%` on integers are floor division and modulo. Division by
// zero is undefined (as on the GPU backends).
template <class T> static inline T tl_floordiv(T a, T b) {
  if ((T)-1 > (T)0) return a / b;  // unsigned
  T q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? (T)(q - 1) : q;
}
template <class T> static inline T tl_floormod(T a, T b) {
  if ((T)-1 > (T)0) return a % b;
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;
}
template <class T> static inline T tl_ceildiv(T a, T b) {
  if ((T)-1 > (T)0) return (T)(a / b + (a % b != 0));
  return (T)-tl_floordiv<T>((T)-a, b);
}
template <class T> static inline T tl_lowest() {
  return (T)-1 > (T)0 ? (T)0 : (T)((T)1 << (sizeof(T) * 8 - 1));
}
template <class T> static inline T tl_highest() { return (T)~tl_lowest<T>(); }
// Float `%` with Python semantics: the result has the divisor's sign.
TL_INLINE float tl_fmod_floor(float a, float b) { return a - floorf(a / b) * b; }
TL_INLINE double tl_fmod_floor(double a, double b) { return a - floor(a / b) * b; }
template <class T> static inline T tl_max(T a, T b) { return a > b ? a : b; }
template <class T> static inline T tl_min(T a, T b) { return a < b ? a : b; }
TL_INLINE float tl_max(float a, float b) { return fmaxf(a, b); }
TL_INLINE float tl_min(float a, float b) { return fminf(a, b); }
TL_INLINE double tl_max(double a, double b) { return fmax(a, b); }
TL_INLINE double tl_min(double a, double b) { return fmin(a, b); }
TL_INLINE float tl_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
TL_INLINE double tl_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
TL_INLINE float tl_rsqrt(float x) { return 1.0f / sqrtf(x); }
TL_INLINE double tl_rsqrt(double x) { return 1.0 / sqrt(x); }
template <class T> static inline T tl_abs(T x) { return x < 0 ? (T)-x : x; }
TL_INLINE float tl_abs(float x) { return fabsf(x); }
TL_INLINE double tl_abs(double x) { return fabs(x); }

// ---- atomics -----------------------------------------------------------------
// Blocks of one launch run concurrently on several threads, so atomic_add is a
// real atomic: integers use fetch_add, floats a compare-exchange loop on the
// element's own storage (relaxed: atomic_add orders nothing else).
template <class T> static inline void tl_atomic_add_int(T* p, T v) {
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
template <class T> static inline void tl_atomic_add_float(T* p, T v) {
  T old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  for (;;) {
    T next = old + v;
    if (__atomic_compare_exchange(p, &old, &next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}
TL_INLINE void tl_atomic_add_f16(uint16_t* p, float v) {
  uint16_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    uint16_t next = tl_f32_to_f16(tl_f16_to_f32(old) + v);
    if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}
TL_INLINE void tl_atomic_add_bf16(uint16_t* p, float v) {
  uint16_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    uint16_t next = tl_f32_to_bf16(tl_bf16_to_f32(old) + v);
    if (__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}

// ---- GEMM: packed panels + register-blocked microkernel -----------------------
// C[M,N] (+)= A[M,K] * B[K,N] for one block's tiles. A and B are first packed
// into f32 panels (converting f16/bf16 on the way; this also absorbs
// transposes, which are just strides), then a MR x NR microkernel runs over
// the panels in BLIS order (N panels outer, so one B panel stays in L1 while
// every A panel streams past it). C is f32 row-major with leading dimension ldc.
//   v4: 8 x 32 (16 zmm accumulators)   v3: 6 x 16 (12 ymm)   v2: 4 x 8 plain C
// v4's 8 rows divide the power-of-two tiles tile programs use (64, 128, 256
// rows): 14 x 32 ran as fast on a panel in L1 (170 GFLOP/s on one Sapphire
// Rapids core) but padded a 128-row tile to 140 (2026-12-05: 128x256 fp32
// tiles 12 % faster with 8 rows, 256x256 6 %, 112x256 equal).
// The emitter sizes scratch from its own table of these shapes
// (kMicrokernelShapes) and the generated source static_asserts it.
#if defined(__AVX512F__)
#define TL_MR 8
#define TL_NR 32
#elif defined(__AVX2__) && defined(__FMA__)
#define TL_MR 6
#define TL_NR 16
#else
#define TL_MR 4
#define TL_NR 8
#endif

// Element kinds the packer reads.
#define TL_KIND_F32 0
#define TL_KIND_F16 1
#define TL_KIND_BF16 2

template <int KIND> static inline float tl_ld_f32(const void* p, long i) {
  if (KIND == TL_KIND_F32) return ((const float*)p)[i];
  if (KIND == TL_KIND_F16) return tl_f16_to_f32(((const uint16_t*)p)[i]);
  return tl_bf16_to_f32(((const uint16_t*)p)[i]);
}

// Floats of scratch a gemm of this shape needs (A panels, then B panels
// starting on a 64-byte boundary). The code generator sizes scratch for the
// largest MR/NR of all ISA levels and static_asserts this against it.
static constexpr long tl_gemm_pack_floats(long M, long N, long K) {
  const long a = ((M + TL_MR - 1) / TL_MR) * TL_MR * K;
  return ((a + 15) & ~15L) + ((N + TL_NR - 1) / TL_NR) * TL_NR * K;
}

// ---- Packing: operand tiles -> f32 panels --------------------------------------
// out[p][k][c] = src[x * xs + k * ks] with x = p * W + c for x < X, else 0
// (W = TL_MR for A, where x is the row i; W = TL_NR for B, where x is the
// column j). Three forms, chosen by the strides at run time:
//  - ks == 1 (k contiguous: A row-major, B transposed): V rows of V k-values
//    each are loaded as vectors (converted to f32) and transposed in registers;
//  - xs == 1 (x contiguous: B row-major, A transposed) where W is a multiple
//    of the vector width (not v3's 6-row A panels): each source row k is read
//    once, front to back, into every panel (k outer, so the hardware
//    prefetcher sees one stream per row instead of one 4 KiB stride per k;
//    RISK: its stores go to panels W * K floats apart, a multiple of 4 KiB,
//    so one k's stores share an L1 set -- measured only on Sapphire Rapids'
//    12-way L1, not on the 8-way L1 of AMD's Zen 2/3);
//  - anything else, and the k tail of the first form: element by element.
// Why: a block repacks its operand tiles at every k-step, so the pack is paid
// once per 2 * TL_NR (A) or 2 * BM (B) FLOPs of the microkernel; element-wise
// it cost a quarter of a 112x256x128 fp32 block's time (perf, 2026-12-05).
// Bit-exact with tl_ld_f32: the vector conversions are the same roundings.
// The vector forms, by width: tl_pack_vec<8> (AVX2 + F16C: v3 and v4) and
// tl_pack_vec<16> (AVX-512: v4). A panel of W <= 8 lanes (v4's A panels) is
// transposed 8 wide, so no shuffle works on padding rows.
template <int V> struct tl_pack_vec;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TL_PACK_VECTORS 1
template <> struct tl_pack_vec<8> {
  typedef __m256 T;
  TL_INLINE T zero() { return _mm256_setzero_ps(); }
  template <int KIND> TL_INLINE T load(const void* p, long i) {
    if (KIND == TL_KIND_F32) return _mm256_loadu_ps((const float*)p + i);
    const __m128i h = _mm_loadu_si128((const __m128i*)((const uint16_t*)p + i));
    if (KIND == TL_KIND_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // Lanes [0, L) of v at p. No vmaskmovps: it is microcoded and slow on AMD's Zen 2/3.
  template <int L> TL_INLINE void store(float* p, T v) {
    if (L == 8) {
      _mm256_storeu_ps(p, v);
    } else if (L == 6) {
      _mm_storeu_ps(p, _mm256_castps256_ps128(v));
      _mm_storel_pi((__m64*)(p + 4), _mm256_extractf128_ps(v, 1));
    } else {
      float t[8];
      _mm256_storeu_ps(t, v);
      for (int i = 0; i < L; ++i) p[i] = t[i];
    }
  }
  // r[i] = row i (8 values) -> r[j] = column j.
  TL_INLINE void transpose(T r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4h + c]: low 128 bits column c, high column c + 4, of rows 4h .. 4h + 3.
    for (int h = 0; h < 2; ++h) {
      u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
      u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
      u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
      u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
      r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
      r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
  }
};
#endif
#if defined(__AVX512F__)
template <> struct tl_pack_vec<16> {
  typedef __m512 T;
  TL_INLINE T zero() { return _mm512_setzero_ps(); }
  template <int KIND> TL_INLINE T load(const void* p, long i) {
    if (KIND == TL_KIND_F32) return _mm512_loadu_ps((const float*)p + i);
    const __m256i h = _mm256_loadu_si256((const __m256i*)((const uint16_t*)p + i));
    if (KIND == TL_KIND_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  template <int L> TL_INLINE void store(float* p, T v) {
    if (L == 16) _mm512_storeu_ps(p, v);
    else _mm512_mask_storeu_ps(p, (__mmask16)((1u << L) - 1u), v);
  }
  TL_INLINE void transpose(T r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + c], 128-bit block b = column 4b + c of rows 4i .. 4i + 3.
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
      const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
      u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    // A 4x4 transpose of 128-bit blocks among u[c], u[4 + c], u[8 + c], u[12 + c].
    for (int c = 0; c < 4; ++c) {
      const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
      const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
      const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
      r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
      r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
      r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
      r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
  }
};
#define TL_PACK_WIDEST 16
#else
#define TL_PACK_WIDEST 8
#endif

// Element by element: the generic strides, and k in [k0, k1) of one panel.
template <int KIND, int W>
TL_INLINE void tl_pack_panel_scalar(int X, int x0, int k0, int k1, const void* src, long xs, long ks,
                                    float* TL_RESTRICT out) {
  for (int k = k0; k < k1; ++k) {
    for (int c = 0; c < W; ++c) {
      const int x = x0 + c;
      out[(long)k * W + c] = x < X ? tl_ld_f32<KIND>(src, (long)x * xs + (long)k * ks) : 0.0f;
    }
  }
}

#if defined(TL_PACK_VECTORS)
// Lanes [G * V, min(W, (G + 1) * V)) of one panel, k in [0, K - K % V): rows
// x0 + G * V + r, transposed V k-values at a time.
template <int KIND, int W, int V, int G>
TL_INLINE void tl_pack_panel_group(int X, int x0, int K, const void* src, long xs, float* TL_RESTRICT out) {
  typedef tl_pack_vec<V> P;
  constexpr int L = W - G * V < V ? W - G * V : V;
  const int xg = x0 + G * V;
  for (int k0 = 0; k0 + V <= K; k0 += V) {
    typename P::T r[V];
    for (int i = 0; i < V; ++i)
      r[i] = (i < L && xg + i < X) ? P::template load<KIND>(src, (long)(xg + i) * xs + k0) : P::zero();
    P::transpose(r);
    for (int j = 0; j < V; ++j) P::template store<L>(out + (long)(k0 + j) * W + G * V, r[j]);
  }
}
#endif

template <int KIND, int W>
static void tl_pack_panels(int X, int K, const void* src, long xs, long ks, float* TL_RESTRICT out) {
  const long panel = (long)W * K;
#if defined(TL_PACK_VECTORS)
  constexpr int V = W <= 8 ? 8 : TL_PACK_WIDEST;
  typedef tl_pack_vec<V> P;
  static_assert(W <= 2 * V, "a panel is at most two transposed groups wide");
  if (ks == 1) {
    const int kv = K - K % V;
    for (int x0 = 0; x0 < X; x0 += W, out += panel) {
      tl_pack_panel_group<KIND, W, V, 0>(X, x0, K, src, xs, out);
      if constexpr (W > V) tl_pack_panel_group<KIND, W, V, 1>(X, x0, K, src, xs, out);
      tl_pack_panel_scalar<KIND, W>(X, x0, kv, K, src, xs, 1, out);
    }
    return;
  }
  if (xs == 1 && W % V == 0) {
    const int full = X / W;  // panels with every column inside
    for (int k = 0; k < K; ++k) {
      const long row = (long)k * ks;
      float* TL_RESTRICT o = out + (long)k * W;
      for (int p = 0; p < full; ++p, o += panel) {
        for (int v = 0; v < W; v += V) P::template store<V>(o + v, P::template load<KIND>(src, row + (long)p * W + v));
      }
    }
    if (full * W < X) tl_pack_panel_scalar<KIND, W>(X, full * W, 0, K, src, xs, ks, out + (long)full * panel);
    return;
  }
#endif
  for (int x0 = 0; x0 < X; x0 += W, out += panel) tl_pack_panel_scalar<KIND, W>(X, x0, 0, K, src, xs, ks, out);
}

// A(i, k) = a[i * rs + k * cs]  ->  out[panel][k][r], zero-padded rows.
template <int KIND>
static void tl_pack_a(int M, int K, const void* a, long rs, long cs, float* TL_RESTRICT out) {
  tl_pack_panels<KIND, TL_MR>(M, K, a, rs, cs, out);
}

// B(k, j) = b[k * rs + j * cs]  ->  out[panel][k][c], zero-padded columns.
template <int KIND>
static void tl_pack_b(int N, int K, const void* b, long rs, long cs, float* TL_RESTRICT out) {
  tl_pack_panels<KIND, TL_NR>(N, K, b, cs, rs, out);
}

// One MR x NR tile of C over K packed steps. acc = 0 overwrites C.
static inline void tl_ukernel(int K, const float* TL_RESTRICT a, const float* TL_RESTRICT b,
                              float* TL_RESTRICT c, long ldc, int acc) {
#if defined(__AVX512F__)
  __m512 c0[TL_MR], c1[TL_MR];
#pragma GCC unroll 8
  for (int r = 0; r < TL_MR; ++r) {
    c0[r] = acc ? _mm512_loadu_ps(c + r * ldc) : _mm512_setzero_ps();
    c1[r] = acc ? _mm512_loadu_ps(c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int k = 0; k < K; ++k, a += TL_MR, b += TL_NR) {
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
    for (int r = 0; r < TL_MR; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      c0[r] = _mm512_fmadd_ps(ar, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(ar, b1, c1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < TL_MR; ++r) {
    _mm512_storeu_ps(c + r * ldc, c0[r]);
    _mm512_storeu_ps(c + r * ldc + 16, c1[r]);
  }
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 c0[TL_MR], c1[TL_MR];
#pragma GCC unroll 6
  for (int r = 0; r < TL_MR; ++r) {
    c0[r] = acc ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
    c1[r] = acc ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
  }
  for (int k = 0; k < K; ++k, a += TL_MR, b += TL_NR) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < TL_MR; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      c0[r] = _mm256_fmadd_ps(ar, b0, c0[r]);
      c1[r] = _mm256_fmadd_ps(ar, b1, c1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < TL_MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, c0[r]);
    _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
  }
#else
  // Plain loops: the host compiler keeps the 4 x 8 accumulator in SSE registers.
  float t[TL_MR][TL_NR];
  for (int r = 0; r < TL_MR; ++r)
    for (int j = 0; j < TL_NR; ++j) t[r][j] = acc ? c[r * ldc + j] : 0.0f;
  for (int k = 0; k < K; ++k, a += TL_MR, b += TL_NR)
    for (int r = 0; r < TL_MR; ++r)
      for (int j = 0; j < TL_NR; ++j) t[r][j] += a[r] * b[j];
  for (int r = 0; r < TL_MR; ++r)
    for (int j = 0; j < TL_NR; ++j) c[r * ldc + j] = t[r][j];
#endif
}

static void tl_gemm_packed(int M, int N, int K, const float* pa, const float* pb, float* c, long ldc,
                           int acc) {
  for (int j0 = 0; j0 < N; j0 += TL_NR) {
    const float* b = pb + (long)(j0 / TL_NR) * TL_NR * K;
    const int nr = N - j0 < TL_NR ? N - j0 : TL_NR;
    for (int i0 = 0; i0 < M; i0 += TL_MR) {
      const float* a = pa + (long)(i0 / TL_MR) * TL_MR * K;
      const int mr = M - i0 < TL_MR ? M - i0 : TL_MR;
      float* ct = c + (long)i0 * ldc + j0;
      if (mr == TL_MR && nr == TL_NR) {
        tl_ukernel(K, a, b, ct, ldc, acc);
        continue;
      }
      // Edge tile: run the full microkernel on a local tile, copy back the valid part.
      float t[TL_MR * TL_NR] __attribute__((aligned(64)));
      for (int r = 0; r < TL_MR; ++r)
        for (int j = 0; j < TL_NR; ++j) t[r * TL_NR + j] = (acc && r < mr && j < nr) ? ct[r * ldc + j] : 0.0f;
      tl_ukernel(K, a, b, t, TL_NR, 1);
      for (int r = 0; r < mr; ++r)
        for (int j = 0; j < nr; ++j) ct[r * ldc + j] = t[r * TL_NR + j];
    }
  }
}

// A tile copied from a rank-2 tensor straight into panels (a shared buffer
// whose layout inference chose GEMM panels), with edge guards: the element
// (x, k) of the operand -- x the panel dim (A's i, B's j) -- is tensor element
// (p, q) = x_is_p ? (x, k) : (k, x), at base[p * sp + q * sq] when
// 0 <= p < pn and 0 <= q < qn, else 0. W is TL_MR for A panels, TL_NR for B.
// Only edge tiles come here; whole tiles use tl_pack_a/tl_pack_b.
template <int KIND>
static void tl_pack_guarded(int X, int K, int W, int x_is_p, const void* base, long sp, long sq, long p0, long pn,
                            long q0, long qn, float* TL_RESTRICT out) {
  for (int x0 = 0; x0 < X; x0 += W, out += (long)W * K) {
    for (int k = 0; k < K; ++k) {
      for (int c = 0; c < W; ++c) {
        const int x = x0 + c;
        const long p = p0 + (x_is_p ? x : k), q = q0 + (x_is_p ? k : x);
        const int inside = x < X && (unsigned long)p < (unsigned long)pn && (unsigned long)q < (unsigned long)qn;
        out[(long)k * W + c] = inside ? tl_ld_f32<KIND>(base, p * sp + q * sq) : 0.0f;
      }
    }
  }
}

// The entry the generated code calls for f32 accumulators. An operand whose
// buffer already holds panels is passed as `a_panels` / `b_panels` (else 0)
// and is not packed again. `scratch` holds at least
// tl_gemm_pack_floats(M, N, K) floats, 64-byte aligned.
template <int KA, int KB>
static void tl_gemm(int M, int N, int K, const float* a_panels, const void* a, long a_rs, long a_cs,
                    const float* b_panels, const void* b, long b_rs, long b_cs, float* c, long ldc, int acc,
                    float* scratch) {
  const long a_floats = ((M + TL_MR - 1) / TL_MR) * TL_MR * (long)K;
  float* pa = scratch;
  float* pb = scratch + ((a_floats + 15) & ~15L);
  if (a_panels == 0) tl_pack_a<KA>(M, K, a, a_rs, a_cs, pa);
  if (b_panels == 0) tl_pack_b<KB>(N, K, b, b_rs, b_cs, pb);
  tl_gemm_packed(M, N, K, a_panels != 0 ? a_panels : pa, b_panels != 0 ? b_panels : pb, c, ldc, acc);
}
// ---- end of prelude ----------------------------------------------------------
