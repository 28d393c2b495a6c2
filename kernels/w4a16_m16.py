"""W4A16 decode at M <= 16 on mma.sync with the weights repacked offline into mma fragment order
(Marlin-style; CUDA only: the kernel body is imported CUDA source, T.import_source + T.call_extern).

Why: w4a16_wgmma (kernels/quant_gemm.py) stages every weight tile through shared memory, decodes it
with a T.Parallel and runs one synchronous wgmma per group (37.5 us at 16 x 8192 x 8192 on the H200;
the copy floor of its 34.6 MB is 8.3 us). The problem is memory-bound: the SMs must keep enough weight
bytes in flight and spend few instructions per byte. Here each thread's 16-byte global load of the
repacked weights IS its mma.sync m16n8k16 operand A (swap-AB: the weights are the 16-row operand, the
M <= 16 activation rows the two n8 operands) for 4 consecutive k16 steps of one 16-row tile: no shared
memory for the weights, no layout shuffle, loads straight into registers D groups ahead (TN *
group_size / 64 16-byte loads per group and thread; coherent ld.global, not .nc, so ptxas cannot sink
them past the per-group block barrier to their use). The int4 -> fp16 decode is
w4a16_gemv_h2's: (x & 0x000f000f) ^ 0x64086408 is the half2 (1024 + (q0 + 8), 1024 + (q4 + 8)) and one
fma.rn.f16x2 gives (q0, q4) exactly; the repacking puts the 8 nibbles of each 32-bit word where the 4
registers of the mma A fragment need them, so a word costs 4 LOP3 + 1 shift + 4 HFMA2 and no permute.
The k order inside each 64-wide chunk is permuted (the sum over k does not care), identically for the
weights and the activations: fragment k16-step s, thread t = lane % 4, element e of its b0..b3 takes
physical k = 16 t + 4 s + e, so a thread's activations of a chunk are one contiguous 32-byte run per row
(two conflict-free 16-byte shared loads, shared by all TN tiles of the warp). The block's activation
rows of each warp's next groups come through a (D + 2)-slot cp.async ring in shared memory (one block
barrier per group). Per group the mma chain starts from zero into
a float32 partial (exact integer-weight products), added to the float32 total times the two group
scales of the thread's rows (one 4-byte load of a repacked scale pair).

Block: WN x WK warps; warp (wn, wk) owns TN 16-row tiles (rows bx * block_N + 16 (wn TN + i)) and a
contiguous 1/WK of the block's groups; the WK partial sums meet in shared memory at the end (no global
atomics inside the block). split_k S > 1: grid z = S, block z takes K / group_size / S groups and adds
its float32 [M, block_N] result into a float32 workspace with atomics; the last block of a tile (a
semaphore per tile) rounds the sum into C and zeroes the workspace and the semaphore again -- one kernel
(the 16:58 ncu round: a split-K cast kernel and its launch gap cost ~10 us at these sizes).

ring=True (_source_ring, hopper_bench kind "m16r"): the same tile, but the weights and scale pairs stream
through a per-thread cp.async ring in shared memory: each thread copies its own 16-byte fragments of group
gi + depth (LDGSTS; the 17:45 ncu of the register variant: 1.34 TB/s, one block of 512 threads per SM) into
its own slots and reads group gi's back with one 16-byte ld.shared per fragment after cp.async.wait_group,
which ptxas cannot move. Bytes in flight are then depth x block_N x group / 2 per block whatever the
registers (77-85 at 2 tiles per warp: 2 blocks of 256 or 4 of 128 threads per SM); the group loop is not
unrolled (slots by running indices). One lop3 per (x & m) ^ c (both variants).

Arguments: A [M, K] fp16 (M <= 16 per block row; rows >= M read as zero), Wp [N / 16, 8 K] uint8 and
Sp [N / 16, 16 K / group_size] fp16 from pack_w4a16_m16(W, Scales) (W [N, K/2] uint8 two signed nibbles
per byte low first, Scales [N, K / group_size] fp16: quant_gemm's packing), C [M, N]."""

import numpy as np

import tilelang.language as T

from kernels.gemm import _dim

# the fp16 pair helper and the decode constants are w4a16_gemv_h2's (kernels/quant_gemm.py).
# tl_w4m_lop3: (x & M) ^ C as ONE lop3 (truth table 0x6a = (a & b) ^ c): written in C with both constants
# immediate, ptxas emits two LOP3 (one immediate each) -- 4 extra instructions per decoded word (H20's finding)
_FMA = r"""
template <unsigned M, unsigned C>
__device__ __forceinline__ unsigned tl_w4m_lop3(unsigned x) {
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(x), "n"(M), "n"(C));
  return r;
}
__device__ __forceinline__ unsigned tl_w4m_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ unsigned short tl_w4m_f2h(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float tl_w4m_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
"""

# one 32-bit word of repacked weights -> the 4 registers of an m16n8k16 A fragment (exact integers)
_DECODE = r"""
__device__ __forceinline__ void tl_w4m_decode(unsigned x, unsigned* r) {
  const unsigned y = x >> 8;
  r[0] = tl_w4m_fma(tl_w4m_lop3<0x000f000fu, 0x64086408u>(x), 0x3c003c00u, 0xe408e408u);  // (n0, n4): x - 1032
  r[1] = tl_w4m_fma(tl_w4m_lop3<0x00f000f0u, 0x64806480u>(x), 0x2c002c00u, 0xd480d480u);  // (n1, n5): x / 16 - 72
  r[2] = tl_w4m_fma(tl_w4m_lop3<0x000f000fu, 0x64086408u>(y), 0x3c003c00u, 0xe408e408u);  // (n2, n6)
  r[3] = tl_w4m_fma(tl_w4m_lop3<0x00f000f0u, 0x64806480u>(y), 0x2c002c00u, 0xd480d480u);  // (n3, n7)
}
"""

_MMA = r"""
__device__ __forceinline__ void tl_w4m_mma(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint4 tl_w4m_ldg(const void* p) {
  uint4 v;
  // read once: no L1 line. Not .nc on purpose: a coherent load may not move past the __syncthreads() that
  // separates its issue (depth groups ahead) from its use, so ptxas cannot sink it next to the mma
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void tl_w4m_cp16(void* dst, const void* src, int bytes) {
  unsigned d;
  asm("{ .reg .u64 p; cvta.to.shared.u64 p, %1; cvt.u32.u64 %0, p; }" : "=r"(d) : "l"(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
}
// the ring variant's copies take 32-bit shared-window addresses made once (tl_w4m_saddr): a generic pointer per
// copy costs its own conversion
typedef unsigned tl_w4m_sptr;
__device__ __forceinline__ tl_w4m_sptr tl_w4m_saddr(const void* p) {
  unsigned d;
  asm("{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }" : "=r"(d) : "l"(p));
  return d;
}
__device__ __forceinline__ void tl_w4m_cp16s(tl_w4m_sptr d, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(d), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tl_w4m_cp4s(tl_w4m_sptr d, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(d), "l"(src) : "memory");
}
// the ring variant's epilogue: 16-byte atomics (red.v4.f32, sm_90) and accesses -- a quarter of the requests
__device__ __forceinline__ void tl_w4m_red4(float* p, const float* v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
#else  // the bundle's sm_80 variant: no vector red
  for (int e = 0; e < 4; ++e) atomicAdd(p + e, v[e]);
#endif
}
__device__ __forceinline__ void tl_w4m_ldcg4(const float* p, float* v) {
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "l"(p));
}
__device__ __forceinline__ void tl_w4m_st4z(float* p) {
  asm volatile("st.global.v4.f32 [%0], {%1, %1, %1, %1};" :: "l"(p), "f"(0.f) : "memory");
}
__device__ __forceinline__ void tl_w4m_st4h(unsigned short* p, const float* v) {
  const unsigned lo = tl_w4m_f2h(v[0]) | (unsigned)tl_w4m_f2h(v[1]) << 16;
  const unsigned hi = tl_w4m_f2h(v[2]) | (unsigned)tl_w4m_f2h(v[3]) << 16;
  asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(p), "r"(lo), "r"(hi) : "memory");
}
__device__ __forceinline__ void tl_w4m_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tl_w4m_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
__device__ __forceinline__ float tl_w4m_ldcg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned tl_w4m_ldg32(const void* p) {
  unsigned v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));  // coherent, as tl_w4m_ldg
  return v;
}
"""


def _source(name, K, group_size, tn, wn, wk, depth, gw, split):
    """CUDA C++ of one thread's whole block-tile (the function the tile program calls once per thread).
    The thread's slot `tid` gives its warp (wn, wk) and lane; gw groups per warp; weights: depth groups
    loaded ahead into registers; activations: the block's rows of each warp's next groups copied by all
    threads into a (depth + 2)-deep shared ring with cp.async (zero-filled rows >= M). split (split-K over
    blocks): each block adds its float32 tile into the workspace wk with atomics and counts itself in its
    tile's semaphore; the last of the split blocks rounds the sum into out and leaves wk and the semaphore
    zero (one kernel: no cast kernel, no launch gap). Else fp16 stores."""
    gc = group_size // 64  # 64-wide chunks per group
    kc = K // 64  # chunks per 16-row tile (its row of Wp holds kc * 512 bytes)
    ng = K // group_size
    block_n = 16 * tn * wn
    threads = 32 * wn * wk
    rs = block_n + 4  # row stride of the reduction buffer (floats): conflict-free fragment writes
    nb = depth + 1  # register ring of loaded weight groups
    na = depth + 2  # shared ring of activation groups (the slot written was read two iterations ago)
    ast = group_size + 8  # activation row stride (halves): 16 bytes past 128 -> conflict-free 16-byte reads
    aslot = wk * 16 * ast  # halves per ring slot (the wk warps' groups)
    nvec = wk * 16 * group_size // 8  # 16-byte copies per ring slot
    if split:
        store = "atomicAdd(wks + (size_t)row * N + n0 + nl, v);"
        fixup = f"""
  __threadfence();  // this block's atomics before its count
  __syncthreads();
  int* last = reinterpret_cast<int*>(smem);  // red is read: its first word is free
  if (tid == 0) *last = atomicAdd(sem, 1) == {split} - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();  // the other blocks' sums before the reads
  for (int idx = tid; idx < {16 * block_n}; idx += {threads}) {{
    const int m = idx / {block_n}, nl = idx % {block_n}, row = row0 + m;
    if (row < M) {{
      float* p = wks + (size_t)row * N + n0 + nl;
      out[(size_t)row * N + n0 + nl] = tl_w4m_f2h(tl_w4m_ldcg(p));
      *p = 0.f;  // for the next call
    }}
  }}
  if (tid == 0) *sem = 0;"""
    else:
        store = "out[(size_t)row * N + n0 + nl] = tl_w4m_f2h(v);"
        fixup = ""
    return f"""
__device__ __forceinline__ void {name}(const unsigned short* __restrict__ a, const unsigned char* __restrict__ wp,
    const unsigned short* __restrict__ sp, unsigned short* __restrict__ out, float* smem, int M, int N, int tile0,
    int row0, int g0, int tid{", float* wks, int* sem" if split else ""}) {{
  const int lane = tid & 31, warp = tid >> 5;
  const int wn = warp % {wn}, wk = warp / {wn};
  const int g = lane >> 2, t = lane & 3;
  const int gbase = g0 + wk * {gw};  // the warp's first group
  const int tile = tile0 + wn * {tn};  // the warp's first 16-row tile
  unsigned short* as = reinterpret_cast<unsigned short*>(smem);  // [{na}][{wk}][16][{ast}] activations
  const unsigned char* w0 = wp + (size_t)tile * {kc * 512} + 16 * lane;
  const unsigned char* s0 = reinterpret_cast<const unsigned char*>(sp) + (size_t)tile * {ng * 32} + 4 * g;
  uint4 wb[{nb}][{tn}][{gc}];
  unsigned sb[{nb}][{tn}];
  float tot[{tn}][2][4];
#pragma unroll
  for (int i = 0; i < {tn}; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) tot[i][j][e] = 0.f;
#define TL_W4M_LOADW(B, GI)                                                                     \\
  do {{                                                                                          \\
    const int gg = gbase + (GI);                                                                \\
    _Pragma("unroll") for (int c = 0; c < {gc}; ++c)                                            \\
      _Pragma("unroll") for (int i = 0; i < {tn}; ++i)                                          \\
        wb[B][i][c] = tl_w4m_ldg(w0 + (size_t)i * {kc * 512} + (size_t)(gg * {gc} + c) * 512);   \\
    _Pragma("unroll") for (int i = 0; i < {tn}; ++i)                                            \\
      sb[B][i] = tl_w4m_ldg32(s0 + (size_t)i * {ng * 32} + (size_t)gg * 32);                    \\
  }} while (0)
  // activation group GI of every warp of the block into ring slot GI % {na} (one commit group)
#define TL_W4M_LOADA(GI)                                                                        \\
  do {{                                                                                          \\
    unsigned short* slot = as + ((GI) % {na}) * {aslot};                                        \\
    for (int v = tid; v < {nvec}; v += {threads}) {{                                             \\
      const int q = v / {16 * group_size // 8}, m = (v / {group_size // 8}) % 16, x = v % {group_size // 8}; \\
      const int row = row0 + m;                                                                 \\
      const unsigned short* src = a + (size_t)(row < M ? row : 0) * {K}                         \\
          + (size_t)(g0 + q * {gw} + (GI)) * {group_size} + 8 * x;                              \\
      tl_w4m_cp16(slot + (q * 16 + m) * {ast} + 8 * x, src, row < M ? 16 : 0);                  \\
    }}                                                                                           \\
    tl_w4m_commit();                                                                            \\
  }} while (0)
#pragma unroll
  for (int d = 0; d < {depth}; ++d) {{
    if (d < {gw}) TL_W4M_LOADW(d, d);
    if (d < {gw}) TL_W4M_LOADA(d); else tl_w4m_commit();
  }}
  for (int gi0 = 0; gi0 < {gw}; gi0 += {nb}) {{
#pragma unroll
    for (int r = 0; r < {nb}; ++r) {{
      const int gi = gi0 + r;
      if (gi < {gw}) {{
        if (gi + {depth} < {gw}) {{
          TL_W4M_LOADW((r + {depth}) % {nb}, gi + {depth});
          TL_W4M_LOADA(gi + {depth});
        }} else {{
          tl_w4m_commit();
        }}
        tl_w4m_wait<{depth}>();  // this thread's copies of group gi have landed
        __syncthreads();  // and everyone's
        const unsigned short* ar = as + (gi % {na}) * {aslot} + wk * {16 * ast} + 16 * t;
        float part[{tn}][2][4];
#pragma unroll
        for (int i = 0; i < {tn}; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) part[i][j][e] = 0.f;
#pragma unroll
        for (int c = 0; c < {gc}; ++c) {{
          // B fragments of k16-step s: row g (j = 0) and row 8 + g (j = 1), halves 16 t + 4 s .. + 3
          const uint4 x0 = *reinterpret_cast<const uint4*>(ar + g * {ast} + 64 * c);
          const uint4 x1 = *reinterpret_cast<const uint4*>(ar + g * {ast} + 64 * c + 8);
          const uint4 y0 = *reinterpret_cast<const uint4*>(ar + (8 + g) * {ast} + 64 * c);
          const uint4 y1 = *reinterpret_cast<const uint4*>(ar + (8 + g) * {ast} + 64 * c + 8);
          const unsigned bj[2][4][2] = {{{{{{x0.x, x0.y}}, {{x0.z, x0.w}}, {{x1.x, x1.y}}, {{x1.z, x1.w}}}},
                                        {{{{y0.x, y0.y}}, {{y0.z, y0.w}}, {{y1.x, y1.y}}, {{y1.z, y1.w}}}}}};
#pragma unroll
          for (int i = 0; i < {tn}; ++i) {{
            const unsigned words[4] = {{wb[r][i][c].x, wb[r][i][c].y, wb[r][i][c].z, wb[r][i][c].w}};
#pragma unroll
            for (int s = 0; s < 4; ++s) {{
              unsigned fa[4];
              tl_w4m_decode(words[s], fa);
              tl_w4m_mma(part[i][0], fa, bj[0][s][0], bj[0][s][1]);
              tl_w4m_mma(part[i][1], fa, bj[1][s][0], bj[1][s][1]);
            }}
          }}
        }}
#pragma unroll
        for (int i = 0; i < {tn}; ++i) {{
          const float slo = tl_w4m_h2f((unsigned short)(sb[r][i] & 0xffffu));  // row g of the tile
          const float shi = tl_w4m_h2f((unsigned short)(sb[r][i] >> 16));  // row g + 8
#pragma unroll
          for (int j = 0; j < 2; ++j) {{
            tot[i][j][0] += part[i][j][0] * slo;
            tot[i][j][1] += part[i][j][1] * slo;
            tot[i][j][2] += part[i][j][2] * shi;
            tot[i][j][3] += part[i][j][3] * shi;
          }}
        }}
      }}
    }}
  }}
#undef TL_W4M_LOADW
#undef TL_W4M_LOADA
  tl_w4m_wait<0>();
  __syncthreads();  // the activation ring is free: the reduction buffer reuses it
  float* red = smem;  // [{wk} * 16][{rs}]
  // C^T fragment (row n of the tile, column m): e = 0, 1: (g, 2 t + e); e = 2, 3: (g + 8, 2 t + e - 2);
  // n8 operand j holds activation rows 8 j .. 8 j + 7. The {wk} warps of a column meet in red.
#pragma unroll
  for (int i = 0; i < {tn}; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {{
        const int m = 8 * j + 2 * t + (e & 1), nl = (wn * {tn} + i) * 16 + g + 8 * (e >> 1);
        red[(wk * 16 + m) * {rs} + nl] = tot[i][j][e];
      }}
  __syncthreads();
  const int n0 = tile0 * 16;
  for (int idx = tid; idx < {16 * block_n}; idx += {threads}) {{
    const int m = idx / {block_n}, nl = idx % {block_n}, row = row0 + m;
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < {wk}; ++q) v += red[(q * 16 + m) * {rs} + nl];
    if (row < M) {store}
  }}{fixup}
}}
"""


def _ring_bytes(group_size, tn, wn, wk, depth):
    """(activation ring, weight ring, scale ring) bytes of the ring variant: depth + 2 activation slots
    (block-shared: the slot written was read two barriers ago), depth + 1 weight and scale slots (each
    thread reads only the slots it copied: the slot written is the one it finished the group before)."""
    threads = 32 * wn * wk
    act = (depth + 2) * wk * 16 * (group_size + 8) * 2
    wts = (depth + 1) * tn * (group_size // 64) * threads * 16
    sc = (depth + 1) * tn * threads * 4
    return act, wts, sc


def _source_ring(name, K, group_size, tn, wn, wk, depth, gw, split):
    """_source's block tile with the weights (and scale pairs) streamed through a per-thread cp.async ring in
    shared memory instead of registers: a thread copies its own 16-byte fragments of group gi + depth into its
    own slots (LDGSTS: nothing waits on them until cp.async.wait_group, which ptxas cannot move), then reads
    group gi's back with 16-byte ld.shared (the fragment as loaded: no ldmatrix, no shuffle). Bytes in flight
    per thread: depth * tn * group_size / 4 (+ the scales), independent of registers; the loop is not
    unrolled (slots by running offsets), so the registers are the accumulators and one group's operands."""
    gc = group_size // 64
    kc = K // 64
    ng = K // group_size
    block_n = 16 * tn * wn
    threads = 32 * wn * wk
    rs = block_n + 4
    nw = depth + 1
    na = depth + 2
    ast = group_size + 8
    aslot = wk * 16 * ast
    nvec = wk * 16 * group_size // 8
    act_b, wts_b, _ = _ring_bytes(group_size, tn, wn, wk, depth)
    wslot = tn * gc * threads * 16  # bytes of one weight slot (all threads)
    sslot = tn * threads * 4
    nact = -(-nvec // threads)  # activation copies per thread and group
    if split:
        store = "tl_w4m_red4(wks + (size_t)row * N + n0 + nl, v);"
        fixup = f"""
  __threadfence();  // this block's atomics before its count
  __syncthreads();
  int* last = reinterpret_cast<int*>(smem);  // red is read: its first word is free
  if (tid == 0) *last = atomicAdd(sem, 1) == {split} - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();  // the other blocks' sums before the reads
  for (int idx = tid; idx < {4 * block_n}; idx += {threads}) {{
    const int m = idx / {block_n // 4}, nl = 4 * (idx % {block_n // 4}), row = row0 + m;
    if (row < M) {{
      float* p = wks + (size_t)row * N + n0 + nl;
      float v[4];
      tl_w4m_ldcg4(p, v);
      tl_w4m_st4h(out + (size_t)row * N + n0 + nl, v);
      tl_w4m_st4z(p);  // for the next call
    }}
  }}
  if (tid == 0) *sem = 0;"""
    else:
        store = "tl_w4m_st4h(out + (size_t)row * N + n0 + nl, v);"
        fixup = ""
    return f"""
__device__ __forceinline__ void {name}(const unsigned short* __restrict__ a, const unsigned char* __restrict__ wp,
    const unsigned short* __restrict__ sp, unsigned short* __restrict__ out, float* smem, int M, int N, int tile0,
    int row0, int g0, int tid{", float* wks, int* sem" if split else ""}) {{
  const int lane = tid & 31, warp = tid >> 5;
  const int wn = warp % {wn}, wk = warp / {wn};
  const int g = lane >> 2, t = lane & 3;
  const int gbase = g0 + wk * {gw};  // the warp's first group
  const int tile = tile0 + wn * {tn};  // the warp's first 16-row tile
  unsigned short* as = reinterpret_cast<unsigned short*>(smem);  // [{na}][{wk}][16][{ast}] activations
  // this thread's weight slots [{nw}][{tn}][{gc}] x 16 bytes ({threads} threads apart: a warp's 32 lanes are
  // 512 contiguous bytes, conflict-free) and scale-pair slots [{nw}][{tn}] x 4 bytes
  unsigned char* ws = reinterpret_cast<unsigned char*>(smem) + {act_b} + 16 * tid;
  unsigned char* ss = reinterpret_cast<unsigned char*>(smem) + {act_b + wts_b} + 4 * tid;
  const tl_w4m_sptr as_s = tl_w4m_saddr(as), ws_s = tl_w4m_saddr(ws), ss_s = tl_w4m_saddr(ss);
  const unsigned char* w0 = wp + (size_t)tile * {kc * 512} + (size_t)gbase * {gc * 512} + 16 * lane;
  const unsigned char* s0 = reinterpret_cast<const unsigned char*>(sp) + (size_t)tile * {ng * 32} + gbase * 32 + 4 * g;
  float tot[{tn}][2][4];
#pragma unroll
  for (int i = 0; i < {tn}; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) tot[i][j][e] = 0.f;
  // weights and scale pairs of the warp's group at SRC / SSRC into slot SL (this thread's copies only; constant
  // offsets from one source and one destination address per group)
#define TL_W4M_LOADW(SL, SRC, SSRC)                                                             \\
  do {{                                                                                          \\
    const unsigned char* src = (SRC);                                                           \\
    const unsigned char* ssrc = (SSRC);                                                         \\
    const tl_w4m_sptr dst = ws_s + (SL) * {wslot};                                              \\
    const tl_w4m_sptr sdst = ss_s + (SL) * {sslot};                                             \\
    _Pragma("unroll") for (int i = 0; i < {tn}; ++i) {{                                         \\
      _Pragma("unroll") for (int c = 0; c < {gc}; ++c)                                          \\
        tl_w4m_cp16s(dst + (i * {gc} + c) * {threads * 16}, src + i * {kc * 512} + c * 512, 16); \\
      tl_w4m_cp4s(sdst + i * {threads * 4}, ssrc + i * {ng * 32});                              \\
    }}                                                                                           \\
  }} while (0)
  // this thread's share of the block's activation copies (the same for every group but the column):
  // copy v = tid + {threads} it: warp-group q, row m, 16-byte column x; rows >= M zero-filled
  const unsigned short* asrc[{nact}];
  int adst[{nact}], abytes[{nact}];
#pragma unroll
  for (int it = 0; it < {nact}; ++it) {{
    const int v = tid + it * {threads};
    const int q = v / {16 * group_size // 8}, m = (v / {group_size // 8}) % 16, x = v % {group_size // 8};
    const int row = row0 + m;
    asrc[it] = a + (size_t)(row < M ? row : 0) * {K} + (size_t)(g0 + q * {gw}) * {group_size} + 8 * x;
    adst[it] = 2 * ((q * 16 + m) * {ast} + 8 * x);  // bytes
    abytes[it] = row < M ? 16 : 0;
  }}
  // the activations at column offset OFF (halves) of every warp's group into ring slot SL (block-shared)
#define TL_W4M_LOADA(SL, OFF)                                                                   \\
  do {{                                                                                          \\
    _Pragma("unroll") for (int it = 0; it < {nact}; ++it)                                       \\
      if ({int(nvec % threads == 0)} || tid + it * {threads} < {nvec})                          \\
        tl_w4m_cp16s(as_s + (SL) * {2 * aslot} + adst[it], asrc[it] + (OFF), abytes[it]);       \\
  }} while (0)
#pragma unroll
  for (int d = 0; d < {depth}; ++d) {{
    if (d < {gw}) {{
      TL_W4M_LOADW(d, w0 + d * {gc * 512}, s0 + d * 32);
      TL_W4M_LOADA(d, d * {group_size});
    }}
    tl_w4m_commit();
  }}
  // group gi + {depth}'s sources (running pointers) and slots: weights (gi + {depth}) % {nw} = the slot of group
  // gi - 1 (pw), activations (gi + {depth}) % {na} = the slot of group gi - 2 (pa2)
  const unsigned char* wnx = w0 + {depth * gc * 512};
  const unsigned char* snx = s0 + {depth * 32};
  int anx = {depth * group_size};
  int rw = 0, ra = 0, pw = {nw - 1}, pa1 = {na - 1}, pa2 = {na - 2};
#pragma unroll 1
  for (int gi = 0; gi < {gw}; ++gi) {{
    if (gi + {depth} < {gw}) {{
      TL_W4M_LOADW(pw, wnx, snx);
      TL_W4M_LOADA(pa2, anx);
      wnx += {gc * 512};
      snx += 32;
      anx += {group_size};
    }}
    tl_w4m_commit();
    tl_w4m_wait<{depth}>();  // this thread's copies of group gi have landed
    __syncthreads();  // and everyone's activations
    const unsigned short* ar = as + ra * {aslot} + wk * {16 * ast} + 16 * t;
    const unsigned char* wr = ws + rw * {tn * gc * threads * 16};
    float part[{tn}][2][4];
#pragma unroll
    for (int i = 0; i < {tn}; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[i][j][e] = 0.f;
#pragma unroll
    for (int c = 0; c < {gc}; ++c) {{
      // B fragments of k16-step s: row g (j = 0) and row 8 + g (j = 1), halves 16 t + 4 s .. + 3
      const uint4 x0 = *reinterpret_cast<const uint4*>(ar + g * {ast} + 64 * c);
      const uint4 x1 = *reinterpret_cast<const uint4*>(ar + g * {ast} + 64 * c + 8);
      const uint4 y0 = *reinterpret_cast<const uint4*>(ar + (8 + g) * {ast} + 64 * c);
      const uint4 y1 = *reinterpret_cast<const uint4*>(ar + (8 + g) * {ast} + 64 * c + 8);
      const unsigned bj[2][4][2] = {{{{{{x0.x, x0.y}}, {{x0.z, x0.w}}, {{x1.x, x1.y}}, {{x1.z, x1.w}}}},
                                    {{{{y0.x, y0.y}}, {{y0.z, y0.w}}, {{y1.x, y1.y}}, {{y1.z, y1.w}}}}}};
#pragma unroll
      for (int i = 0; i < {tn}; ++i) {{
        const uint4 wv = *reinterpret_cast<const uint4*>(wr + (i * {gc} + c) * {threads * 16});
        const unsigned words[4] = {{wv.x, wv.y, wv.z, wv.w}};
#pragma unroll
        for (int s = 0; s < 4; ++s) {{
          unsigned fa[4];
          tl_w4m_decode(words[s], fa);
          tl_w4m_mma(part[i][0], fa, bj[0][s][0], bj[0][s][1]);
          tl_w4m_mma(part[i][1], fa, bj[1][s][0], bj[1][s][1]);
        }}
      }}
    }}
#pragma unroll
    for (int i = 0; i < {tn}; ++i) {{
      const unsigned sv = *reinterpret_cast<const unsigned*>(ss + (rw * {tn} + i) * {threads * 4});
      const float slo = tl_w4m_h2f((unsigned short)(sv & 0xffffu));  // row g of the tile
      const float shi = tl_w4m_h2f((unsigned short)(sv >> 16));  // row g + 8
#pragma unroll
      for (int j = 0; j < 2; ++j) {{
        tot[i][j][0] += part[i][j][0] * slo;
        tot[i][j][1] += part[i][j][1] * slo;
        tot[i][j][2] += part[i][j][2] * shi;
        tot[i][j][3] += part[i][j][3] * shi;
      }}
    }}
    pw = rw;
    pa2 = pa1;
    pa1 = ra;
    rw = rw == {nw - 1} ? 0 : rw + 1;
    ra = ra == {na - 1} ? 0 : ra + 1;
  }}
#undef TL_W4M_LOADW
#undef TL_W4M_LOADA
  tl_w4m_wait<0>();
  __syncthreads();  // the rings are free: the reduction buffer reuses them
  float* red = smem;  // [{wk} * 16][{rs}]
#pragma unroll
  for (int i = 0; i < {tn}; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {{
        const int m = 8 * j + 2 * t + (e & 1), nl = (wn * {tn} + i) * 16 + g + 8 * (e >> 1);
        red[(wk * 16 + m) * {rs} + nl] = tot[i][j][e];
      }}
  __syncthreads();
  const int n0 = tile0 * 16;
  for (int idx = tid; idx < {4 * block_n}; idx += {threads}) {{  // 4 consecutive columns per thread
    const int m = idx / {block_n // 4}, nl = 4 * (idx % {block_n // 4}), row = row0 + m;
    float v[4] = {{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int q = 0; q < {wk}; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] += red[(q * 16 + m) * {rs} + nl + e];
    if (row < M) {store}
  }}{fixup}
}}
"""


def _smem_bytes(group_size, tn, wn, wk, depth, ring=False):
    """The shared bytes of one block: the activation ring (ring=True: and the weight and scale rings),
    reused by the reduction buffer."""
    rings = sum(_ring_bytes(group_size, tn, wn, wk, depth)) if ring else (depth + 2) * wk * 16 * (group_size + 8) * 2
    red = wk * 16 * (16 * tn * wn + 4) * 4
    return max(rings, red)


def w4a16_m16(M, N, K, group_size=128, out_dtype=None, tn=4, wn=2, wk=4, depth=1, split_k=1, workspace=False,
              ring=False):
    """The kernel described in the module docstring. tn: 16-row tiles per warp; wn x wk warps per block
    (block_N = 16 tn wn output channels, 32 wn wk threads); depth: groups of weights loaded ahead by each
    thread (depth * tn * group_size / 64 16-byte loads in flight per thread); split_k: blocks along K
    (a divisor of K / group_size, as is wk of the groups of one block), summed in one kernel: float32
    atomics into the workspace Wk [M, N], a per-tile semaphore Sem [M, N / block_N] (element [16 by, bx]
    counts the blocks of tile (bx, by)); the last block rounds the tile into C and zeroes both again.
    Signature: (A, Wp, Sp, C); with split_k > 1 and workspace=True (A, Wp, Sp, C, Wk, Sem), both zero
    before the first call and left zero by every call (workspace=False: T.alloc_global, zeroed per call).
    ring=True: the weights and scale pairs through a per-thread cp.async ring in shared memory (_source_ring:
    depth groups in flight that ptxas cannot sink to their use; hopper_bench kind "m16r"); else in registers."""
    if group_size % 64 or K % group_size:
        raise ValueError(f"w4a16_m16: group_size={group_size} must be a multiple of 64 dividing K={K}")
    block_n = 16 * tn * wn
    if tn < 1 or wn < 1 or wk < 1 or N % block_n:
        raise ValueError(f"w4a16_m16: N={N} must be a multiple of block_N = 16 * tn * wn = {block_n} "
                         f"(tn={tn}, wn={wn}, wk={wk} positive)")
    ng = K // group_size
    if not isinstance(split_k, int) or split_k < 1 or ng % (split_k * wk):
        raise ValueError(f"w4a16_m16: split_k * wk = {split_k} * {wk} must divide K / group_size = {ng}")
    if depth < 1:
        raise ValueError(f"w4a16_m16: depth={depth} must be at least 1")
    out_dtype = out_dtype or "float16"
    if out_dtype != "float16":
        raise ValueError(f"w4a16_m16: out_dtype must be float16, got {out_dtype}")
    M = _dim(M)
    groups = ng // split_k  # groups of one block
    gw = groups // wk  # groups of one warp
    threads = 32 * wn * wk
    split = split_k if split_k > 1 else 0
    name = f"tl_w4m16{'r' if ring else ''}_k{K}_g{group_size}_t{tn}_n{wn}_k{wk}_d{depth}_w{gw}_s{split_k}"
    src = _FMA + _DECODE + _MMA + (_source_ring if ring else _source)(name, K, group_size, tn, wn, wk, depth, gw,
                                                                      split)
    smem = _smem_bytes(group_size, tn, wn, wk, depth, ring)

    @T.macro
    def tile(A, Wp, Sp, C, bx, by, g0, Wk, Sem):
        red = T.alloc_shared((smem // 16, 4), "float32")  # the activation ring, then the reduction buffer
        T.import_source(src)
        # one call per thread (slot 2 p + h: the default layout gives each thread one slot; the function
        # takes its warp and lane from the slot)
        for p, h in T.Parallel(threads // 2, 2):
            if split:
                T.call_extern(name, T.address_of(A[0, 0]), T.address_of(Wp[0, 0]), T.address_of(Sp[0, 0]),
                              T.address_of(C[0, 0]), T.address_of(red[0, 0]), M, N, bx * (block_n // 16),
                              by * 16, g0, 2 * p + h, T.address_of(Wk[0, 0]), T.address_of(Sem[by * 16, bx]),
                              dtype="handle")
            else:
                T.call_extern(name, T.address_of(A[0, 0]), T.address_of(Wp[0, 0]), T.address_of(Sp[0, 0]),
                              T.address_of(C[0, 0]), T.address_of(red[0, 0]), M, N, bx * (block_n // 16),
                              by * 16, g0, 2 * p + h, dtype="handle")

    grid = (N // block_n, T.ceildiv(M, 16))
    if split_k == 1:
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N // 16, 8 * K), "uint8"),
                 Sp: T.Tensor((N // 16, 16 * ng), "float16"), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(*grid, threads=threads) as (bx, by):
                tile(A, Wp, Sp, C, bx, by, 0, None, None)
        return main
    if workspace:
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N // 16, 8 * K), "uint8"),
                 Sp: T.Tensor((N // 16, 16 * ng), "float16"), C: T.Tensor((M, N), out_dtype),
                 Wk: T.Tensor((M, N), "float32"), Sem: T.Tensor((M, N // block_n), "int32")):
            with T.Kernel(*grid, split_k, threads=threads) as (bx, by, bz):
                tile(A, Wp, Sp, C, bx, by, bz * groups, Wk, Sem)
        return main

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N // 16, 8 * K), "uint8"),
             Sp: T.Tensor((N // 16, 16 * ng), "float16"), C: T.Tensor((M, N), out_dtype)):
        Wk = T.alloc_global((M, N), "float32")
        Sem = T.alloc_global((M, N // block_n), "int32")
        with T.Kernel(*grid, split_k, threads=threads) as (bx, by, bz):
            tile(A, Wp, Sp, C, bx, by, bz * groups, Wk, Sem)

    return main


def pack_w4a16_m16(W, Scales):
    """quant_gemm's packing (W [N, K/2] uint8, two signed nibbles per byte, low first; Scales [N, K / g])
    -> (Wp [N / 16, 8 K] uint8, Sp [N / 16, 16 K / g]) for w4a16_m16 (numpy in, numpy out; N % 16 == 0,
    K % 64 == 0). Wp row T (16-row tile T) holds K / 64 chunks of 512 bytes; chunk c, lane l = 4 g + t,
    word s (bytes 4 s .. 4 s + 3 of the lane's 16) holds nibbles p = 0..7 (nibble p = bits 4 p .. 4 p + 3):
    weight (row 16 T + g + 8 (p & 1), k = 64 c + 16 t + 4 s + 2 ((p >> 1) & 1) + (p >> 2)) -- the
    m16n8k16 A fragment registers (n0, n4), (n1, n5), (n2, n6), (n3, n7) of k16-step s under the k
    permutation of the module docstring. Sp row T: group G, g: the pair (Scales[16 T + g, G],
    Scales[16 T + 8 + g, G])."""
    W = np.asarray(W)
    Scales = np.asarray(Scales)
    N, K2 = W.shape
    K = 2 * K2
    if N % 16 or K % 64 or W.dtype != np.uint8:
        raise ValueError(f"pack_w4a16_m16: W must be uint8 [N, K/2] with N % 16 == 0 and K % 64 == 0, got "
                         f"{W.dtype} {W.shape}")
    if Scales.ndim != 2 or Scales.shape[0] != N or K % Scales.shape[1]:
        raise ValueError(f"pack_w4a16_m16: Scales must be [N={N}, K / group_size], got {Scales.shape}")
    nib = np.empty((N, K), np.uint8)
    nib[:, 0::2] = W & 15
    nib[:, 1::2] = W >> 4
    nt, kc = N // 16, K // 64
    # axes (T, r, g, c, t, s, e_hi, e_lo): row 16 T + 8 r + g, k = 64 c + 16 t + 4 s + 2 e_hi + e_lo
    a = nib.reshape(nt, 2, 8, kc, 4, 4, 2, 2)
    # byte bb = 2 e_lo + e_hi of word s holds (r = 0, r = 1) as (low, high) nibble
    a = a.transpose(0, 3, 2, 4, 5, 7, 6, 1)
    wp = (a[..., 0] | (a[..., 1] << 4)).astype(np.uint8).reshape(nt, kc * 512)
    ng = Scales.shape[1]
    sp = Scales.reshape(nt, 2, 8, ng).transpose(0, 3, 2, 1).reshape(nt, ng * 16)
    return np.ascontiguousarray(wp), np.ascontiguousarray(sp)


def w4a16_m16_model(A, Wp, Sp, N, K, group_size):
    """numpy model of the CUDA source's index arithmetic, fragment for fragment: per 16-row tile,
    chunk, lane and k16-step it decodes the lane's word the way tl_w4m_decode's registers come out,
    places them in the m16n8k16 A / B / C fragment positions of the PTX ISA and accumulates per group
    in float64 (the CUDA accumulates in float32) -- returns C [M, N] float64. Slow; for small shapes."""
    A = np.asarray(A, np.float64)
    M = A.shape[0]
    Ap = np.zeros((16, K))
    Ap[:M] = A
    nt, kc, gc = N // 16, K // 64, group_size // 64
    out = np.zeros((16, N))
    lanes = np.arange(32)
    g, t = lanes >> 2, lanes & 3
    for T_ in range(nt):
        part = np.zeros((16, 16))  # [n in tile, m]
        tot = np.zeros((16, 16))
        for c in range(kc):
            for s in range(4):
                a_frag = np.zeros((16, 16))  # W tile [row, logical k]
                b_frag = np.zeros((16, 16))  # [logical k, m]
                for ln in range(32):
                    word = int.from_bytes(bytes(Wp[T_, c * 512 + 16 * ln + 4 * s: c * 512 + 16 * ln + 4 * s + 4]),
                                          "little")
                    q = [((word >> (4 * p)) & 15) - 16 * (((word >> (4 * p)) & 15) >= 8) for p in range(8)]
                    regs = [(q[0], q[4]), (q[1], q[5]), (q[2], q[6]), (q[3], q[7])]  # tl_w4m_decode's r[0..3]
                    gg, tt = g[ln], t[ln]
                    a_frag[gg, 2 * tt: 2 * tt + 2] = regs[0]
                    a_frag[gg + 8, 2 * tt: 2 * tt + 2] = regs[1]
                    a_frag[gg, 2 * tt + 8: 2 * tt + 10] = regs[2]
                    a_frag[gg + 8, 2 * tt + 8: 2 * tt + 10] = regs[3]
                    for j in range(2):  # b0 b1 = halves 16 t + 4 s + (0, 1), b2 b3 = + (2, 3) of row 8 j + g
                        k0 = c * 64 + 16 * tt + 4 * s
                        b_frag[2 * tt: 2 * tt + 2, 8 * j + gg] = Ap[8 * j + gg, k0: k0 + 2]
                        b_frag[2 * tt + 8: 2 * tt + 10, 8 * j + gg] = Ap[8 * j + gg, k0 + 2: k0 + 4]
                part += a_frag @ b_frag
            if (c + 1) % gc == 0:
                G = c // gc
                pairs = np.asarray(Sp[T_, G * 16: G * 16 + 16], np.float64).reshape(8, 2)
                srow = np.concatenate([pairs[:, 0], pairs[:, 1]])  # rows g, then g + 8
                tot += part * srow[:, None]
                part[:] = 0
        out[:, T_ * 16: T_ * 16 + 16] = tot.T
    return out[:M]
