"""W4A16 decode at M = 1 on mma.sync with the weights in quant_gemm's own packing (W [N, K/2] uint8, two
signed nibbles per byte low first, Scales [N, K / group_size] fp16: no repacking), CUDA only (the kernel
body is imported CUDA source, T.import_source + T.call_extern).

Why (issue #11, ncu of w4a16_gemv_ldg at 1 x 8192 x 8192 on the H200: 17 us, DRAM 43.7 %, 5.23 M warp
instructions issued at 0.47 per scheduler): at 4 TB/s an SM receives ~15 bytes per cycle, and
w4a16_gemv_ldg spends ~80 warp instructions per 512 weight bytes (per word of 8 weights 4 LOP3, a shift,
4 HFMA2 to exact integers and 4 HFMA2 products, plus the per-chunk sums), so its warps cannot consume
what DRAM could deliver. Here the dot products go to the tensor cores and the int4 -> fp16 decode is one
LOP3 per pair of weights, with NO fp16 subtraction of the bias:

- a warp owns tn 16-row tiles (the mma's M = 16 rows of W) and a contiguous 1/wk of K; per 128-wide chunk
  of k, lane (g = lane / 4, t = lane % 4) holds bytes 16 t .. 16 t + 15 of the chunk's 64 bytes of rows g
  and g + 8 (weights 32 t .. 32 t + 31 of the chunk): the 4 lanes of a quad read a row's 64 contiguous
  bytes, a warp 1 KiB per tile and chunk, each lane 16-byte cp.async copies into its own slots of a shared
  ring `depth` chunks ahead (w4a16_gemv_ldg's per-thread ring: no barrier, cp.async.wait_group only;
  ptxas cannot sink a cp.async past the wait that counts it, as it sinks register prefetches);
- word x of a lane's 16 bytes (weights 8 m .. 8 m + 7 of its 32) gives the 4 A-fragment registers
  lo(x) = (x & 0x000f000f) ^ 0x64086408 = (1032 + n0, 1032 + n4), hi(x) = (x & 0x00f000f0) ^ 0x54805480 =
  (72 + n1, 72 + n5) (fp16 64 + (u ^ 8): the nibble lands on units of 1), lo(x >> 8) = (1032 + n2, 1032 + n6),
  hi(x >> 8) = (72 + n3, 72 + n7): one LOP3 per register, a shift per word. Two m16n8k16 per word pair
  (rows g, g + 8): mma (m, 0) takes (lo(x), lo(x'), hi(x), hi(x')), mma (m, 1) the shifted ones; the k order
  inside the chunk is permuted identically for the activations (the sum does not care): lane t's B registers
  of mma (m, h) are the activation pairs (a[8 m + 2 h], a[8 m + 2 h + 4]) and (a[8 m + 2 h + 1], a[8 m + 2 h
  + 5]) of its 32 (every column n of B the same: M = 1; the lanes of a quad hold equal results);
- the biases: 1032 on even k (low nibbles), 72 on odd k, so the chunk's mma chain computes
  sum_k (b_k + n_k) a_k with exact products and float32 sums; the chain STARTS from -beta_c, beta_c =
  1032 sum_even a_k + 72 sum_odd a_k over the chunk (float32, computed once per block), so it ends at
  sum_k n_k a_k; then acc_row += scale(row, group) * d (one FFMA per row and chunk);
- the block stages the activations once (16 KiB at K = 8192; each 64-byte run of 32 permuted into B pairs
  by 16 PRMT) with the 4 per-lane partials of -beta, and the pairs (scale row g, scale row g + 8) of its
  tiles (one 4-byte load per tile and chunk), their global loads issued BEFORE the first weight chunks'
  cp.async (in order: asm volatile) so the barrier they gate waits for them, not behind the weights;
  one barrier, then no other until the epilogue, where the wk
  warps of a row add their float32 sums in shared memory and one thread per row stores C in fp16.

Per warp, tile and chunk (1 KiB of weights): 2 cp.async, 2 + 4 ld.shared.v4 (weights, activation pairs),
32 LOP3, 8 shifts, 8 mma.sync, the scale pair's load, 2 conversions and 2 FFMA (sm_90a SASS of 1 x 2 x 8 at
depth 3: 888 instructions for the warp's 8 chunks and the prologue; w4a16_gemv_ldg issues ~160 per KiB).

Grid N / (16 tn wn), block 32 wn wk threads (wn warps of rows x wk of K). Shared memory: 2 K (activation
pairs) + K / 8 (beta partials) + 32 tn wn K / group_size (scale pairs) + 32 wn wk (depth + 1) tn 32
(weight rings) + 64 tn wn wk (reduction) bytes.

Numerics: products exact; per chunk a float32 tensor-core chain around +-beta (a cancellation of ~8 bits of
the float32 sum: ~2^-16 relative to the chunk's partial, below fp16's 2^-11), float32 across chunks, one
fp16 rounding of C."""

import tilelang.language as T

from kernels.gemm import _dim

_HELPERS = r"""
__device__ __forceinline__ unsigned tl_w4k_saddr(const void* p) {  // generic -> shared window address
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
__device__ __forceinline__ void tl_w4k_cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void tl_w4k_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
#define TL_W4K_WAIT(n) asm volatile("cp.async.wait_group %0;" :: "n"(n) : "memory")
__device__ __forceinline__ uint4 tl_w4k_ld16(unsigned p) {  // 16 shared bytes in one load
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(p));
  return v;
}
__device__ __forceinline__ unsigned tl_w4k_ld4(unsigned p) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(p));
  return v;
}
__device__ __forceinline__ uint4 tl_w4k_ldg16(const void* p) {  // read-only, L1-cached (the whole block's)
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned short tl_w4k_ldg2(const unsigned short* p) {  // in order with the cp.asyncs
  unsigned short v;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ void tl_w4k_st16(unsigned p, unsigned x, unsigned y, unsigned z, unsigned w) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(p), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
__device__ __forceinline__ void tl_w4k_st4(unsigned p, unsigned x) {
  asm volatile("st.shared.u32 [%0], %1;" :: "r"(p), "r"(x) : "memory");
}
__device__ __forceinline__ unsigned tl_w4k_lo(unsigned x) {  // (x & 0x000f000f) ^ 0x64086408: 1032 + n
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(x), "n"(0x000f000fu), "n"(0x64086408u));
  return r;
}
__device__ __forceinline__ unsigned tl_w4k_hi(unsigned x) {  // (x & 0x00f000f0) ^ 0x54805480: 72 + n
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(x), "n"(0x00f000f0u), "n"(0x54805480u));
  return r;
}
__device__ __forceinline__ float tl_w4k_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short tl_w4k_f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ void tl_w4k_mma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                           unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// the first mma of a chain: C = (c, c, c, c), D a fresh fragment (no register copies of c)
__device__ __forceinline__ void tl_w4k_mma0(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                            unsigned b0, unsigned b1, float c) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%10, %10, %10, %10};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c));
}
__device__ __forceinline__ void tl_w4k_sync() { __syncthreads(); }
"""


def smem_bytes(K, group_size, tn, wn, wk, depth):
    """Shared bytes of one block: activation pairs, -beta partials, scale pairs, weight rings, reduction."""
    threads = 32 * wn * wk
    return 2 * K + K // 8 + 32 * tn * wn * (K // group_size) + threads * (depth + 1) * tn * 32 + 64 * tn * wn * wk


def _source(name, K, group_size, tn, wn, wk, depth):
    """CUDA C++ of one thread of a block (called once per thread slot tid): the prologue (weights of the
    first `depth` chunks in flight, activations/beta/scales staged, one barrier), the chunk loop, the epilogue
    (the wk warps of a row added in shared memory, C stored in fp16)."""
    threads = 32 * wn * wk
    kb = K // 2  # bytes of a weight row
    nch = K // 128  # 128-wide chunks of k
    cw = nch // wk  # chunks of one warp
    ng = K // group_size
    tiles = tn * wn
    bn = 16 * tiles
    ring = depth + 1
    o_beta = 2 * K
    o_scl = o_beta + K // 8
    o_ring = o_scl + 32 * tiles * ng
    o_red = o_ring + threads * ring * tn * 32
    # the group of chunk c = wk cw + j: split when the warp's chunks are whole groups (constant offsets per j)
    nruns, npairs = K // 32, tiles * 8 * ng  # the block's activation runs and scale pairs
    nr, ns = -(-nruns // threads), -(-npairs // threads)  # per thread
    grp = (f"wk * {cw * 128 // group_size}u + (unsigned)(j * 128 / {group_size})" if (cw * 128) % group_size == 0
           else f"c * 128u / {group_size}u")
    return _HELPERS + f"""
__device__ __forceinline__ void {name}(const unsigned char* __restrict__ w, const unsigned short* __restrict__ a,
    const unsigned short* __restrict__ s, unsigned short* __restrict__ out, unsigned* smem, int tid) {{
  // w, s, out: the block's first row of W, of Scales, its first output
  const unsigned lane = tid & 31, warp = tid >> 5, wn = warp % {wn}, wk = warp / {wn};
  const unsigned g = lane >> 2, t = lane & 3;
  const unsigned sm = tl_w4k_saddr(smem);
  // act [{nch}][4 t][4 m] x 16 bytes: lane t's B pairs of chunk c; beta [{nch}][4 t] float (-beta partials);
  // scl [{tiles}][{ng}][8 g] u32: (scale of row 16 i + g, of row 16 i + g + 8) of a group
  const unsigned act = sm, beta = sm + {o_beta}u, scl = sm + {o_scl}u;
  // this thread's weight slots [{ring}][{tn}][2 h] x 16 bytes, {threads} threads apart (conflict-free)
  const unsigned rw = sm + {o_ring}u + tid * 16u;
  const unsigned char* wt = w + (16u * wn * {tn} + g) * {kb}u + wk * {cw * 64}u + t * 16u;
  // the prologue's loads first (they gate the block barrier), then the first weight chunks behind them:
  // scale pairs idx = (i * 8 + gg) * {ng} + grp (consecutive groups of a row: coalesced), activation runs
  // q = 4 chunk + t (32 activations each), held in registers until the weights are on their way
  unsigned short sl[{ns}], sh[{ns}];
#pragma unroll
  for (int r = 0; r < {ns}; ++r) {{
    const unsigned idx = tid + r * {threads}u, grp = idx % {ng}u, i = idx / {ng}u / 8u, gg = idx / {ng}u % 8u;
    if ({int(ns * threads == npairs)} || idx < {npairs}u) {{
      sl[r] = tl_w4k_ldg2(s + (16u * i + gg) * {ng}u + grp);
      sh[r] = tl_w4k_ldg2(s + (16u * i + gg + 8u) * {ng}u + grp);
    }}
  }}
  uint4 ax[{nr}][4];
#pragma unroll
  for (int r = 0; r < {nr}; ++r) {{
    const unsigned q = tid + r * {threads}u;
    if ({int(nr * threads == nruns)} || q < {nruns}u) {{
#pragma unroll
      for (int m = 0; m < 4; ++m) ax[r][m] = tl_w4k_ldg16(a + q * 32u + 8u * m);
    }}
  }}
#pragma unroll
  for (int v = 0; v < {depth}; ++v) {{  // chunks 0 .. depth - 1 of the warp: one commit group each
    if (v < {cw}) {{
#pragma unroll
      for (int i = 0; i < {tn}; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          tl_w4k_cp16(rw + ((v * {tn} + i) * 2 + h) * {threads * 16}u, wt + (16 * i + 8 * h) * {kb}u + v * 64u);
    }}
    tl_w4k_commit();
  }}
  // run q -> 4 x 4 B pairs (a[8m], a[8m+4]), (a[8m+1], a[8m+5]), (a[8m+2], a[8m+6]), (a[8m+3], a[8m+7]) and
  // its -beta partial; the scale pairs (row g, row g + 8)
#pragma unroll
  for (int r = 0; r < {nr}; ++r) {{
    const unsigned q = tid + r * {threads}u;
    if ({int(nr * threads == nruns)} || q < {nruns}u) {{
      float ev = 0.f, od = 0.f;
#pragma unroll
      for (int m = 0; m < 4; ++m) {{
        const uint4 x = ax[r][m];
        tl_w4k_st16(act + q * 64u + 16u * m, __byte_perm(x.x, x.z, 0x5410), __byte_perm(x.x, x.z, 0x7632),
                    __byte_perm(x.y, x.w, 0x5410), __byte_perm(x.y, x.w, 0x7632));
        const unsigned v[4] = {{x.x, x.y, x.z, x.w}};
#pragma unroll
        for (int e = 0; e < 4; ++e) {{
          ev += tl_w4k_h2f((unsigned short)(v[e] & 0xffffu));
          od += tl_w4k_h2f((unsigned short)(v[e] >> 16));
        }}
      }}
      tl_w4k_st4(beta + q * 4u, __float_as_uint(-(1032.f * ev + 72.f * od)));
    }}
  }}
#pragma unroll
  for (int r = 0; r < {ns}; ++r) {{
    const unsigned idx = tid + r * {threads}u, grp = idx % {ng}u, i = idx / {ng}u / 8u, gg = idx / {ng}u % 8u;
    if ({int(ns * threads == npairs)} || idx < {npairs}u)
      tl_w4k_st4(scl + ((i * {ng}u + grp) * 8u + gg) * 4u, (unsigned)sl[r] | ((unsigned)sh[r] << 16));
  }}
  tl_w4k_sync();
  float acc[{tn}][2];
#pragma unroll
  for (int i = 0; i < {tn}; ++i) acc[i][0] = acc[i][1] = 0.f;
#pragma unroll
  for (int j = 0; j < {cw}; ++j) {{
    const int v = j + {depth};
    if (v < {cw}) {{  // chunk j + depth into the slot chunk j - 1 freed
#pragma unroll
      for (int i = 0; i < {tn}; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          tl_w4k_cp16(rw + (((v % {ring}) * {tn} + i) * 2 + h) * {threads * 16}u, wt + (16 * i + 8 * h) * {kb}u + v * 64u);
    }}
    tl_w4k_commit();
    const unsigned c = wk * {cw}u + j;  // the chunk of k
    uint4 b[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) b[m] = tl_w4k_ld16(act + (4u * c + t) * 64u + 16u * m);
    const uint4 bp = tl_w4k_ld16(beta + c * 16u);
    const float nb = (__uint_as_float(bp.x) + __uint_as_float(bp.y)) + (__uint_as_float(bp.z) + __uint_as_float(bp.w));
    TL_W4K_WAIT({depth});  // chunk j's copies have landed (depth newer groups may still fly)
#pragma unroll
    for (int i = 0; i < {tn}; ++i) {{
      const uint4 x0 = tl_w4k_ld16(rw + (((j % {ring}) * {tn} + i) * 2 + 0) * {threads * 16}u);  // row g
      const uint4 x1 = tl_w4k_ld16(rw + (((j % {ring}) * {tn} + i) * 2 + 1) * {threads * 16}u);  // row g + 8
      const unsigned wa[4] = {{x0.x, x0.y, x0.z, x0.w}}, wb[4] = {{x1.x, x1.y, x1.z, x1.w}};
      const unsigned bb[4][4] = {{{{b[0].x, b[0].y, b[0].z, b[0].w}}, {{b[1].x, b[1].y, b[1].z, b[1].w}},
                                 {{b[2].x, b[2].y, b[2].z, b[2].w}}, {{b[3].x, b[3].y, b[3].z, b[3].w}}}};
      float d[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {{
        const unsigned p = wa[m], q = wb[m], p8 = p >> 8, q8 = q >> 8;
        if (m == 0)  // the chain starts from -beta
          tl_w4k_mma0(d, tl_w4k_lo(p), tl_w4k_lo(q), tl_w4k_hi(p), tl_w4k_hi(q), bb[m][0], bb[m][1], nb);
        else
          tl_w4k_mma(d, tl_w4k_lo(p), tl_w4k_lo(q), tl_w4k_hi(p), tl_w4k_hi(q), bb[m][0], bb[m][1]);
        tl_w4k_mma(d, tl_w4k_lo(p8), tl_w4k_lo(q8), tl_w4k_hi(p8), tl_w4k_hi(q8), bb[m][2], bb[m][3]);
      }}
      const unsigned sc = tl_w4k_ld4(scl + (((wn * {tn}u + i) * {ng}u + {grp}) * 8u + g) * 4u);
      acc[i][0] += tl_w4k_h2f((unsigned short)(sc & 0xffffu)) * d[0];
      acc[i][1] += tl_w4k_h2f((unsigned short)(sc >> 16)) * d[2];
    }}
  }}
  // the wk warps of a row meet in red [{wk}][{bn}] (lane t == 0 of each quad: the quad's lanes hold equal sums)
  const unsigned red = sm + {o_red}u;
  if (t == 0) {{
#pragma unroll
    for (int i = 0; i < {tn}; ++i) {{
      tl_w4k_st4(red + (wk * {bn}u + (wn * {tn}u + i) * 16u + g) * 4u, __float_as_uint(acc[i][0]));
      tl_w4k_st4(red + (wk * {bn}u + (wn * {tn}u + i) * 16u + g + 8u) * 4u, __float_as_uint(acc[i][1]));
    }}
  }}
  tl_w4k_sync();
  if (tid < {bn}) {{
    float r = 0.f;
#pragma unroll
    for (int k = 0; k < {wk}; ++k) r += __uint_as_float(tl_w4k_ld4(red + (k * {bn}u + tid) * 4u));
    out[tid] = tl_w4k_f2h(r);
  }}
}}
"""


def w4a16_m1(M, N, K, group_size=128, out_dtype=None, tn=1, wn=2, wk=8, depth=3):
    """W4A16 decode for M = 1 (see the module docstring): A [1, K] fp16, W [N, K/2] uint8, Scales [N, K /
    group_size] fp16, C [1, N] fp16 -- w4a16_gemv_ldg's signature and packing. tn 16-row tiles per warp, wn
    warps of rows and wk of K per block (block_N = 16 tn wn, 32 wn wk threads), depth chunks of 128 k (tn KiB
    per warp) in flight per warp beyond the one in use."""
    if M != 1:
        raise ValueError(f"w4a16_m1: M={M} must be 1 (one activation row; the bench's decode rows)")
    if not isinstance(group_size, int) or group_size % 128 or K % group_size:
        raise ValueError(f"w4a16_m1: group_size={group_size} must be a multiple of 128 dividing K={K}")
    if min(tn, wn, wk, depth) < 1 or 32 * wn * wk > 1024:
        raise ValueError(f"w4a16_m1: tn={tn}, wn={wn}, wk={wk}, depth={depth} must be >= 1 with 32 wn wk <= 1024 "
                         f"threads")
    if (K // 128) % wk or K % 1024:
        raise ValueError(f"w4a16_m1: K={K} must be a multiple of 1024 whose 128-wide chunks wk={wk} divides")
    block_n = 16 * tn * wn
    if not isinstance(N, int) or N % block_n:
        raise ValueError(f"w4a16_m1: N={N} must be a multiple of 16 tn wn = {block_n}")
    out_dtype = out_dtype or "float16"
    if out_dtype != "float16":
        raise ValueError(f"w4a16_m1: out_dtype must be float16, got {out_dtype}")
    smem = smem_bytes(K, group_size, tn, wn, wk, depth)
    if smem > 227 * 1024:
        raise ValueError(f"w4a16_m1: {smem} shared bytes per block exceed sm_90's 232448 (fewer wk, tn or depth)")
    threads = 32 * wn * wk
    ng = K // group_size
    name = f"tl_w4a16_m1_k{K}_g{group_size}_t{tn}_n{wn}_k{wk}_d{depth}"
    src = _source(name, K, group_size, tn, wn, wk, depth)
    M = _dim(M)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, ng), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(N // block_n, threads=threads) as bx:
            buf = T.alloc_shared((smem // 4,), "uint32")
            T.import_source(src)
            # one call per thread (slot 2 p + h: the default layout gives each thread one slot; the function
            # takes its warp and lane from the slot)
            for p, h in T.Parallel(threads // 2, 2):
                T.call_extern(name, T.address_of(W[bx * block_n, 0]), T.address_of(A[0, 0]),
                              T.address_of(Scales[bx * block_n, 0]), T.address_of(C[0, bx * block_n]),
                              T.address_of(buf[0]), 2 * p + h, dtype="handle")

    return main
