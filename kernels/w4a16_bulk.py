"""W4A16 decode (M <= 16) whose weight stream is driven by Hopper bulk copies (sm_90 only; CUDA: the block
body is imported CUDA source, T.import_source + T.call_extern). Same repacked weights and the same fragment
math as kernels/w4a16_m16.py (pack_w4a16_m16; its tl_w4m_decode / tl_w4m_mma), a different way of feeding
them.

Why (issue #11; BENCHMARKS session 8): every earlier decode kernel (w4a16_gemv_ldg, w4a16_m1, w4a16_m16 and
its ring variant) plateaus at 1.9-2.1 TB/s with DRAM 37-44 % busy at 1-2 blocks per SM: the bytes in
flight per SM are bounded by what each thread can keep outstanding (16-byte cp.async per thread and
fragment, or registers), and every thread spends issue slots on copies. Here lane 0 of a producer warp
issues `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes` copies of whole contiguous weight
runs (the TMA engine moves them; no tensor map: 1-D bulk copies, sizes and addresses multiples of 16 bytes)
into a ring of `stages` shared-memory slots, `stages` x block_N x stage_groups x group / 2 weight bytes in
flight per block whatever the registers; the slot's small parts (scale pairs, activation rows) are the
producer warp's 16-byte cp.async, spread over its 32 lanes. Completion on a "full" mbarrier per slot (33
arrivals: lane 0's arrive.expect_tx of the weight bytes, then each lane's cp.async.mbarrier.arrive.noinc
once its cp.async landed; the bulk copies' complete_tx), the consumer warps wait on it (try_wait.parity),
read the slot with ld.shared and release it on an "empty" mbarrier (one arrive per warp after __syncwarp),
which the producer warp waits on before it refills the slot. No fence.proxy.async: the slots are only
written by the async proxy / cp.async and read by generic loads after the mbarrier wait.

Why only the weights as bulk copies (session 9, H200): with every tile's weights, every tile's 32-byte scale
pairs and every activation row a bulk copy (48 per 16 KiB slot at M=16) all configs were correct but
1.5-2.3x slower than the per-thread rings, and the time did not depend on the ring depth (3..7 stages: 49.5
us) -- it fit ~13 us + ~49 ns per bulk copy of a block (7 configs within ~5 %; at 2 blocks per SM the
per-SM copy count doubled and the time did not: a per-issuing-thread cost, not the SM's TMA unit). The
protocol itself runs `stages` slots ahead (test_w4a16_bulk holds the consumers back and counts the slots
armed before the producer first waits). So: one bulk copy per tile and slot, stage_groups KiB each (a tile's
K range is contiguous in pack_w4a16_m16's Wp), nothing small through the bulk engine.

Work split (persistent, stream-K): the output channels form N / block_N tile-blocks of block_N / 16
16-row tiles; a work unit is (tile-block, group); the blocks x units are cut into `blocks` equal
contiguous ranges of the unit order (tile-block major, group minor), so block b streams a contiguous K
range of one tile-block, then the next: per tile of the tile-block one bulk copy of stage_groups KiB of
weights (pack_w4a16_m16's Wp row of a 16-row tile is its K range, 512 bytes per 64 k); its stage_groups x
32 bytes of scale pairs and the activation rows (stage_groups x group fp16 of A each, shared by all the
tiles of the slot; rows >= M are never copied and read as zero by the consumers) by cp.async.
A stage never crosses a tile-block boundary (the last one of a range may be shorter). `blocks` = the SM
count (132 on the H200) gives one block per SM and every SM the same number of weight bytes to +-1 unit.

Consumers: cw warps; warp w owns tiles w tn .. w tn + tn - 1 of the tile-block; per group and 64-wide chunk
a lane reads its 16-byte A fragment of each tile (4 k16-steps, w4a16_m16's layout) and the B fragments
(activation rows g and 8 + g, halves 16 t .. 16 t + 15 of the chunk: a row stride of stage_groups x group
+ 8 halves keeps the 16-byte reads conflict-free), decodes (4 LOP3 + 1 shift + 4 HFMA2 per word) and runs
the m16n8k16 mma.sync (the second n8 half only when M > 8; at M <= 8 the even and odd k16-steps run as
two chains instead, so a warp still has 2 tn independent mma chains); per group a float32 partial times the
scale pair. M is static: one instantiation of the body. At the end of each range piece (a tile-block's groups of this block) the float32 sums go to the
workspace Wk [N, 16] with 16-byte red.global.add.v4.f32 (row n, position 4 t + 2 j + e holds activation row
8 j + 2 t + e: a lane's 4 values of one weight row are adjacent), then the block adds its group count to
the tile-block's semaphore Sem[tile-block]; the block whose count completes K / group rounds the
tile-block's sums into C (fp16) and zeroes the workspace rows and the semaphore again (one kernel; the
consumer warps meet on named barrier 1, the producer never waits for them).

Arguments: A [M, K] fp16 (M <= 16), Wp [N / 16, 8 K] uint8 and Sp [N / 16, 16 K / group_size] fp16 from
pack_w4a16_m16, C [M, N] fp16; workspace=True: also Wk [N, 16] float32 and Sem [N / 16] int32, zero before the
first call and left zero by every call (else T.alloc_global, zeroed per call)."""

import tilelang.language as T

from kernels.w4a16_m16 import _DECODE, _FMA, _MMA

# Hopper-only primitives. The bundle of a plain target "cuda" also holds sm_80 / sm_89 cubins and compute_80
# PTX: there the helpers are empty and the kernel body traps (no bulk copies, no expect_tx before sm_90).
_BULK = r"""
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TL_W4B_SM90 1
#endif
typedef unsigned tl_w4b_sptr;  // a shared-window address
__device__ __forceinline__ tl_w4b_sptr tl_w4b_saddr(const void* p) {
  unsigned d;
  asm("{ .reg .u64 q; cvta.to.shared.u64 q, %1; cvt.u32.u64 %0, q; }" : "=r"(d) : "l"(p));
  return d;
}
__device__ __forceinline__ void tl_w4b_bar_init(tl_w4b_sptr b, unsigned count) {
#ifdef TL_W4B_SM90
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(count) : "memory");
#endif
}
// the initialized barriers visible to the async proxy (the bulk copies' complete_tx) before any copy
__device__ __forceinline__ void tl_w4b_fence_init() {
#ifdef TL_W4B_SM90
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void tl_w4b_arrive_tx(tl_w4b_sptr b, unsigned bytes) {
#ifdef TL_W4B_SM90
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void tl_w4b_arrive(tl_w4b_sptr b) {
#ifdef TL_W4B_SM90
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(b) : "memory");
#endif
}
// until the phase of parity `parity` has completed (a fresh barrier: parity 1 passes at once)
__device__ __forceinline__ void tl_w4b_wait(tl_w4b_sptr b, unsigned parity) {
#ifdef TL_W4B_SM90
  unsigned ok;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(b), "r"(parity) : "memory");
  } while (!ok);
#endif
}
__device__ __forceinline__ void tl_w4b_bulk(tl_w4b_sptr dst, const void* src, unsigned bytes, tl_w4b_sptr bar) {
#ifdef TL_W4B_SM90
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
#endif
}
// the same with an L2 cache policy (createpolicy): the weights are read once
__device__ __forceinline__ void tl_w4b_bulk_hint(tl_w4b_sptr dst, const void* src, unsigned bytes, tl_w4b_sptr bar,
                                                 unsigned long long policy) {
#ifdef TL_W4B_SM90
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy) : "memory");
#endif
}
__device__ __forceinline__ unsigned long long tl_w4b_evict_first() {
  unsigned long long p = 0;
#ifdef TL_W4B_SM90
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
#endif
  return p;
}
// one 16-byte per-thread copy (L2 only: the activations are L2-resident, read by every block)
__device__ __forceinline__ void tl_w4b_cp16(tl_w4b_sptr dst, const void* src) {
#ifdef TL_W4B_SM90
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
#endif
}
// an arrival on the mbarrier once this thread's earlier cp.async have landed (.noinc: one of the `count`
// arrivals the barrier was initialized with)
__device__ __forceinline__ void tl_w4b_cp_arrive(tl_w4b_sptr b) {
#ifdef TL_W4B_SM90
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(b) : "memory");
#endif
}
__device__ __forceinline__ void tl_w4b_cp_wait_all() {
#ifdef TL_W4B_SM90
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// the consumer warps only (the producer warp never joins): named barrier 1
__device__ __forceinline__ void tl_w4b_csync(int threads) {
  asm volatile("bar.sync 1, %0;" :: "r"(threads) : "memory");
}
"""


def _layout(group_size, tn, cw, stage_groups, stages, rows=16):
    """Byte offsets of one ring slot and of the whole buffer: (weights, activations, scales, slot, barriers,
    flag, total). Slot = [tiles][stage_groups][8 group bytes] weights, [rows][stage_groups group + 8] fp16
    activation rows (rows = M: rows >= M are never copied nor read), [tiles][stage_groups][32 bytes] scale
    pairs (every part a multiple of 16 bytes)."""
    tiles = tn * cw
    unit = 8 * group_size  # weight bytes of one (tile, group): 16 rows x group / 2
    wts = tiles * stage_groups * unit
    arow = (stage_groups * group_size + 8) * 2
    act = rows * arow
    sc = tiles * stage_groups * 32
    slot = wts + act + sc
    bars = stages * slot
    flag = bars + 16 * stages
    total = flag + 16
    return wts, act, sc, slot, bars, flag, total


def smem_bytes(group_size=128, tn=2, cw=8, stage_groups=1, stages=7, M=16):
    """Shared bytes of one block at M activation rows (the ring, 2 mbarriers per slot, the finalizer flag)."""
    return _layout(group_size, tn, cw, stage_groups, stages, M)[-1]


def _source(name, N, K, group_size, tn, cw, stage_groups, stages, blocks, rows=16, evict_first=False):
    """CUDA C++ of the whole block (called once per thread with its index tid; warps 0 .. cw - 1 consume,
    warp cw produces); the ring holds `rows` activation rows (the call's M must not exceed it). evict_first:
    the weight bulk copies carry an L2 evict_first policy."""
    gc = group_size // 64  # 64-wide chunks per group
    kc = K // 64
    ng = K // group_size
    tiles = tn * cw  # 16-row tiles per tile-block
    ntb = N // 16 // tiles
    units = ntb * ng
    unit = 8 * group_size
    sg = stage_groups
    wts, act, _, slot, bars, flag, _ = _layout(group_size, tn, cw, sg, stages, rows)
    arow_h = sg * group_size + 8  # activation row stride (halves)
    two = "true" if rows > 8 else "false"
    nch = 1 if rows > 8 else 2  # mma chains per (tile, n8 half)

    def psum(e):  # the k-group's partial sum of element e: the two chains' where there are two
        return f"part[0][i][j][{e}] + part[1][i][j][{e}]" if nch == 2 else f"part[0][i][j][{e}]"

    # read-once weights as L2 evict_first (their lines replace each other, not the L2's other lines); the scales
    # and activation rows go by the producer warp's cp.async, without a policy
    wcopy = "tl_w4b_bulk_hint" if evict_first else "tl_w4b_bulk"
    pol_decl = "const unsigned long long pol = tl_w4b_evict_first();" if evict_first else ""
    pol_arg = ", pol" if evict_first else ""
    ct = 32 * cw  # consumer threads
    return f"""
template <bool TWO>
__device__ __forceinline__ void {name}_body(const unsigned short* __restrict__ a, const unsigned char* __restrict__ wp,
    const unsigned short* __restrict__ sp, unsigned short* __restrict__ out, unsigned char* smem, int M, int bid,
    int tid, float* __restrict__ wks, int* __restrict__ sem) {{
  const int warp = tid >> 5, lane = tid & 31;
  const tl_w4b_sptr s0 = tl_w4b_saddr(smem);
  const tl_w4b_sptr full0 = s0 + {bars}, empty0 = full0 + {8 * stages};
  int* flag = reinterpret_cast<int*>(smem + {flag});
  if (tid == 0) {{
    for (int s = 0; s < {stages}; ++s) {{
      tl_w4b_bar_init(full0 + 8 * s, 33);  // lane 0's arrive.expect_tx + 32 lanes' cp.async arrive.noinc; the bulk bytes
      tl_w4b_bar_init(empty0 + 8 * s, {cw});  // one arrive per consumer warp
    }}
    tl_w4b_fence_init();
  }}
  __syncthreads();
  // this block's units [u0, u1) of {units} (tile-block tb = u / {ng}, group u % {ng})
  const int u0 = (int)((long long)bid * {units} / {blocks}), u1 = (int)((long long)(bid + 1) * {units} / {blocks});
  if (warp == {cw}) {{  // producer warp: lane 0 the weight bulk copies, all 32 lanes the small parts
    int slot = 0;
    unsigned par = 0;
    {pol_decl}
    for (int u = u0; u < u1;) {{
      const int tb = u / {ng}, ga = u % {ng};
      const int gb = u1 - u < {ng} - ga ? ga + u1 - u : {ng};
      const unsigned char* wsrc = wp + (size_t)tb * {tiles * kc * 512} + (size_t)ga * {unit};
      const unsigned char* ssrc = reinterpret_cast<const unsigned char*>(sp) + (size_t)tb * {tiles * ng * 32} + ga * 32;
      const unsigned short* asrc = a + (size_t)ga * {group_size};
      for (int g = ga; g < gb; g += {sg}) {{
        const int gn = gb - g < {sg} ? gb - g : {sg};
        const tl_w4b_sptr full = full0 + 8 * slot, base = s0 + slot * {slot};
        tl_w4b_wait(empty0 + 8 * slot, par ^ 1u);  // the consumers released the slot's previous round
        if (lane == 0) {{
          // ONE bulk copy per tile (its gn groups are contiguous in pack_w4a16_m16's Wp row): the session-9
          // H200 times grew by ~50 ns per bulk copy of a block whatever its size (module docstring), so only
          // the big weight runs go through the bulk engine
          tl_w4b_arrive_tx(full, gn * {tiles * unit});
#pragma unroll 1
          for (int i = 0; i < {tiles}; ++i)
            {wcopy}(base + i * {sg * unit}, wsrc + (size_t)i * {kc * 512}, gn * {unit}, full{pol_arg});
        }}
        // the scale pairs ({tiles} x gn x 32 bytes) and the M activation rows (gn x {group_size * 2} bytes each):
        // 16-byte cp.async spread over the warp's lanes, then each lane's arrive.noinc on the full barrier
#pragma unroll 1
        for (int gl = 0; gl < gn; ++gl) {{
          for (int q = lane; q < {tiles * 2}; q += 32)
            tl_w4b_cp16(base + {wts + act} + (q >> 1) * {sg * 32} + gl * 32 + 16 * (q & 1),
                        ssrc + (size_t)(q >> 1) * {ng * 32} + gl * 32 + 16 * (q & 1));
          for (int q = lane; q < M * {group_size // 8}; q += 32)
            tl_w4b_cp16(base + {wts} + (q / {group_size // 8}) * {2 * arow_h} + gl * {group_size * 2} +
                            16 * (q % {group_size // 8}),
                        asrc + (size_t)(q / {group_size // 8}) * {K} + gl * {group_size} + 8 * (q % {group_size // 8}));
        }}
        tl_w4b_cp_arrive(full);
        wsrc += {sg * unit};
        ssrc += {sg * 32};
        asrc += {sg * group_size};
        if (++slot == {stages}) {{
          slot = 0;
          par ^= 1u;
        }}
      }}
      u += gb - ga;
    }}
    tl_w4b_cp_wait_all();  // no thread leaves with its copies in flight
    return;
  }}
  // consumers: warp owns tiles warp * {tn} + i of each tile-block
  const int g = lane >> 2, t = lane & 3;
  const bool ok0 = g < M, ok1 = TWO && 8 + g < M;  // activation rows g, 8 + g exist (else zero operands)
  int slot = 0;
  unsigned par = 0;
  for (int u = u0; u < u1;) {{
    const int tb = u / {ng}, ga = u % {ng};
    const int gb = u1 - u < {ng} - ga ? ga + u1 - u : {ng};
    float tot[{tn}][2][4];
#pragma unroll
    for (int i = 0; i < {tn}; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) tot[i][j][e] = 0.f;
    for (int g0 = ga; g0 < gb; g0 += {sg}) {{
      const int gn = gb - g0 < {sg} ? gb - g0 : {sg};
      tl_w4b_wait(full0 + 8 * slot, par);  // the slot's bytes have landed
      const unsigned char* base = smem + slot * {slot};
      const unsigned char* wr = base + warp * {tn * sg * unit} + 16 * lane;
      const unsigned short* ar = reinterpret_cast<const unsigned short*>(base + {wts}) + g * {arow_h} + 16 * t;
      const unsigned char* sr = base + {wts + act} + warp * {tn * sg * 32} + 4 * g;
#pragma unroll
      for (int gl = 0; gl < {sg}; ++gl) {{
        if ({int(sg == 1)} || gl < gn) {{  // a stage's last group may be missing (never with one group per stage)
          // M <= 8 (one n8 half): two mma chains per tile (even / odd k16-steps), else the n8 halves are two
          // already -- half the dependent mma latency per group without more registers at M > 8
          float part[{nch}][{tn}][2][4];
#pragma unroll
          for (int h = 0; h < {nch}; ++h)
#pragma unroll
            for (int i = 0; i < {tn}; ++i)
#pragma unroll
              for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) part[h][i][j][e] = 0.f;
#pragma unroll
          for (int c = 0; c < {gc}; ++c) {{
            // B fragments of k16-step s: row g (j = 0) and row 8 + g (j = 1), halves 16 t + 4 s .. + 3
            const unsigned short* a0 = ar + gl * {group_size} + 64 * c;
            const uint4 z = {{0u, 0u, 0u, 0u}};
            const uint4 x0 = ok0 ? *reinterpret_cast<const uint4*>(a0) : z;
            const uint4 x1 = ok0 ? *reinterpret_cast<const uint4*>(a0 + 8) : z;
            const uint4 y0 = ok1 ? *reinterpret_cast<const uint4*>(a0 + {8 * arow_h}) : z;
            const uint4 y1 = ok1 ? *reinterpret_cast<const uint4*>(a0 + {8 * arow_h + 8}) : z;
            const unsigned bj[2][4][2] = {{{{{{x0.x, x0.y}}, {{x0.z, x0.w}}, {{x1.x, x1.y}}, {{x1.z, x1.w}}}},
                                          {{{{y0.x, y0.y}}, {{y0.z, y0.w}}, {{y1.x, y1.y}}, {{y1.z, y1.w}}}}}};
#pragma unroll
            for (int i = 0; i < {tn}; ++i) {{
              const uint4 wv = *reinterpret_cast<const uint4*>(wr + i * {sg * unit} + (gl * {gc} + c) * 512);
              const unsigned words[4] = {{wv.x, wv.y, wv.z, wv.w}};
#pragma unroll
              for (int s = 0; s < 4; ++s) {{
                unsigned fa[4];
                tl_w4m_decode(words[s], fa);
                tl_w4m_mma(part[s % {nch}][i][0], fa, bj[0][s][0], bj[0][s][1]);
                if (TWO) tl_w4m_mma(part[s % {nch}][i][1], fa, bj[1][s][0], bj[1][s][1]);
              }}
            }}
          }}
#pragma unroll
          for (int i = 0; i < {tn}; ++i) {{
            const unsigned sv = *reinterpret_cast<const unsigned*>(sr + i * {sg * 32} + gl * 32);
            const float slo = tl_w4m_h2f((unsigned short)(sv & 0xffffu));  // row g of the tile
            const float shi = tl_w4m_h2f((unsigned short)(sv >> 16));  // row g + 8
#pragma unroll
            for (int j = 0; j < 2; ++j) {{
              tot[i][j][0] += ({psum(0)}) * slo;
              tot[i][j][1] += ({psum(1)}) * slo;
              tot[i][j][2] += ({psum(2)}) * shi;
              tot[i][j][3] += ({psum(3)}) * shi;
            }}
          }}
        }}
      }}
      __syncwarp();  // every lane's reads of the slot done
      if (lane == 0) tl_w4b_arrive(empty0 + 8 * slot);
      if (++slot == {stages}) {{
        slot = 0;
        par ^= 1u;
      }}
    }}
    // this piece's sums into the workspace: C^T fragment element (i, j, e) is weight row g + 8 (e >> 1) of
    // tile i, activation row 8 j + 2 t + (e & 1), at position 4 t + 2 j + (e & 1) of the row's 16 floats
    const int tile0 = tb * {tiles} + warp * {tn};
#pragma unroll
    for (int i = 0; i < {tn}; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {{
        const float v[4] = {{tot[i][0][2 * h], tot[i][0][2 * h + 1], tot[i][1][2 * h], tot[i][1][2 * h + 1]}};
        if (2 * t < M) tl_w4m_red4(wks + (size_t)((tile0 + i) * 16 + g + 8 * h) * 16 + 4 * t, v);
      }}
    __threadfence();  // the atomics before the count
    tl_w4b_csync({ct});
    if (tid == 0) *flag = atomicAdd(sem + tb, gb - ga) + (gb - ga) == {ng};
    tl_w4b_csync({ct});
    if (*flag) {{  // every group of tile-block tb is in: C, and the workspace and semaphore zero again
      __threadfence();
      for (int idx = tid; idx < {tiles * 64}; idx += {ct}) {{
        const int q = idx / {tiles * 16}, n = tb * {tiles * 16} + idx % {tiles * 16}, m0 = 2 * q;
        float* p = wks + (size_t)n * 16 + 4 * q;  // activation rows 2 q, 2 q + 1, 8 + 2 q, 9 + 2 q
        float v[4];
        tl_w4m_ldcg4(p, v);
        if (m0 < M) out[(size_t)m0 * {N} + n] = tl_w4m_f2h(v[0]);
        if (m0 + 1 < M) out[(size_t)(m0 + 1) * {N} + n] = tl_w4m_f2h(v[1]);
        if (m0 + 8 < M) out[(size_t)(m0 + 8) * {N} + n] = tl_w4m_f2h(v[2]);
        if (m0 + 9 < M) out[(size_t)(m0 + 9) * {N} + n] = tl_w4m_f2h(v[3]);
        tl_w4m_st4z(p);
      }}
      if (tid == 0) sem[tb] = 0;
    }}
    u += gb - ga;
  }}
}}

__device__ __forceinline__ void {name}(const unsigned short* __restrict__ a, const unsigned char* __restrict__ wp,
    const unsigned short* __restrict__ sp, unsigned short* __restrict__ out, float* smem, int M, int bid, int tid,
    float* wks, int* sem) {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // bulk copies and mbarrier transaction counts need sm_90
#else
  if (M > {rows}) __trap();  // the ring holds {rows} activation rows
  unsigned char* s = reinterpret_cast<unsigned char*>(smem);
  // rows <= 8 (the ring's, = the program's static M): activation rows 0 .. 7 only, one n8 mma per k16-step;
  // one instantiation per kernel (the other would only cost code and registers)
  {name}_body<{two}>(a, wp, sp, out, s, M, bid, tid, wks, sem);
#endif
}}
"""


# Shared bytes a block may use: 163 KiB, not sm_90's 227: every CUDA bundle (also TL_CUDA_TARGET=sm_90a) carries
# compute_80 PTX, whose lowering of the same tile program must fit sm_80's opt-in limit (tl-pack refuses the
# program otherwise), although that variant only traps. A plain target "cuda" also builds sm_89 (99 KiB): compile
# the deeper rings for "sm_90a" (as hopper_bench does through TL_CUDA_TARGET).
SMEM_LIMIT = 163 * 1024


def check_args(M, N, K, group_size, tn, cw, stage_groups, stages, blocks):
    """The static checks of w4a16_bulk (ValueError naming the argument); returns the shared bytes."""
    if not isinstance(M, int) or not 1 <= M <= 16:
        raise ValueError(f"w4a16_bulk: M={M} must be an int in 1..16 (one 16-row activation block)")
    for arg, v in (("N", N), ("K", K), ("group_size", group_size)):  # printed into the C source as they are
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"w4a16_bulk: {arg}={v!r} must be a positive int")
    if group_size % 64 or K % group_size:
        raise ValueError(f"w4a16_bulk: group_size={group_size} must be a multiple of 64 dividing K={K}")
    for arg, v in (("tn", tn), ("cw", cw), ("stage_groups", stage_groups), ("stages", stages), ("blocks", blocks)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"w4a16_bulk: {arg}={v} must be a positive int")
    if N % (16 * tn * cw):
        raise ValueError(f"w4a16_bulk: N={N} must be a multiple of block_N = 16 * tn * cw = {16 * tn * cw} "
                         f"(tn={tn}, cw={cw})")
    if cw > 31:
        raise ValueError(f"w4a16_bulk: cw={cw} consumer warps + 1 producer exceed 1024 threads")
    smem = smem_bytes(group_size, tn, cw, stage_groups, stages, M)
    if smem > SMEM_LIMIT:
        raise ValueError(f"w4a16_bulk: stages={stages} x stage_groups={stage_groups} need {smem} bytes of shared "
                         f"memory (tn={tn}, cw={cw}, M={M}); at most {SMEM_LIMIT} fit")
    return smem


def w4a16_bulk(M, N, K, group_size=128, out_dtype=None, tn=2, cw=8, stage_groups=1, stages=7, blocks=132,
               workspace=False, evict_first=False):
    """The kernel of the module docstring (CUDA sm_90 only). tn: 16-row tiles per consumer warp; cw: consumer
    warps (block_N = 16 tn cw output channels per tile-block; 32 (cw + 1) threads); stage_groups: groups of K
    per ring slot (stage_groups KiB of weights per tile and bulk copy at group 128); stages: ring slots;
    blocks: the grid (persistent; the SM count for one block per SM). Signature (A, Wp, Sp, C), with
    workspace=True (A, Wp, Sp, C, Wk, Sem): Wk [N, 16] float32, Sem [N / 16] int32 (element tb counts the
    groups summed into tile-block tb), zero before the first call and left zero by every call. evict_first: the
    weight bulk copies with an L2 evict_first policy (read once: their lines evict each other rather than
    the L2's other lines -- e.g. dirty ones whose write-back would share the DRAM with the weight stream)."""
    smem = check_args(M, N, K, group_size, tn, cw, stage_groups, stages, blocks)
    out_dtype = out_dtype or "float16"
    if out_dtype != "float16":
        raise ValueError(f"w4a16_bulk: out_dtype must be float16, got {out_dtype}")
    ng = K // group_size
    threads = 32 * (cw + 1)
    name = f"tl_w4b_n{N}_k{K}_g{group_size}_t{tn}_c{cw}_s{stage_groups}_d{stages}_b{blocks}{'_ef' if evict_first else ''}"
    src = _FMA + _DECODE + _MMA + _BULK + _source(name, N, K, group_size, tn, cw, stage_groups, stages, blocks, M,
                                                        evict_first)

    @T.macro
    def body(A, Wp, Sp, C, Wk, Sem, bx):
        buf = T.alloc_shared((smem // 16, 4), "float32")  # the ring, the mbarriers, the finalizer flag
        T.import_source(src)
        # one call per thread (slot 2 p + h = the thread's index: warps 0 .. cw - 1 consume, warp cw produces)
        for p, h in T.Parallel(threads // 2, 2):
            T.call_extern(name, T.address_of(A[0, 0]), T.address_of(Wp[0, 0]), T.address_of(Sp[0, 0]),
                          T.address_of(C[0, 0]), T.address_of(buf[0, 0]), M, bx, 2 * p + h, T.address_of(Wk[0, 0]),
                          T.address_of(Sem[0]), dtype="handle")

    if workspace:
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N // 16, 8 * K), "uint8"),
                 Sp: T.Tensor((N // 16, 16 * ng), "float16"), C: T.Tensor((M, N), out_dtype),
                 Wk: T.Tensor((N, 16), "float32"), Sem: T.Tensor((N // 16,), "int32")):
            with T.Kernel(blocks, threads=threads) as bx:
                body(A, Wp, Sp, C, Wk, Sem, bx)
        return main

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N // 16, 8 * K), "uint8"),
             Sp: T.Tensor((N // 16, 16 * ng), "float16"), C: T.Tensor((M, N), out_dtype)):
        Wk = T.alloc_global((N, 16), "float32")
        Sem = T.alloc_global((N // 16,), "int32")
        with T.Kernel(blocks, threads=threads) as bx:
            body(A, Wp, Sp, C, Wk, Sem, bx)

    return main


def schedule(N, K, group_size=128, tn=2, cw=8, stage_groups=2, blocks=132):
    """The kernel's work split, for tests and tuning: per block the list of (tile-block, first group, end
    group, [groups of each ring stage]) it streams, in order."""
    ng = K // group_size
    units = N // 16 // (tn * cw) * ng
    out = []
    for b in range(blocks):
        u, u1 = b * units // blocks, (b + 1) * units // blocks
        pieces = []
        while u < u1:
            tb, ga = divmod(u, ng)
            gb = min(ng, ga + (u1 - u))
            pieces.append((tb, ga, gb, [min(stage_groups, gb - g) for g in range(ga, gb, stage_groups)]))
            u += gb - ga
        out.append(pieces)
    return out
