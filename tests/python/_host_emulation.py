"""Host (CPU) emulation of the CUDA pieces that the W4A16 kernels' imported CUDA sources use, so that their exact
C++ text can run on the host against float64 without a GPU, plus the numpy model of their fp16 decode arithmetic.
Shared by test_w4a16_cuda_source.py, test_w4a16_gemv_ldg.py, test_w4a16_m1.py, test_w4a16_m16.py and
test_w4a16_bulk.py (imported, never collected). Each test file keeps its own adapters: the kernel's asm helper
names (tl_w4k_*, ...) mapped onto the tl_host_* functions below, and its own main() that drives the kernel
function; the tl_w4m_* adapters that w4a16_m16 and w4a16_bulk share are W4M_HELPERS here.

What is modelled (PTX ISA semantics):
- fp16 <-> float conversions with round-to-nearest-even (cvt.rn.f16.f32; _Float16 on the host);
- fma.rn.f16x2 (tl_host_fma_f16x2): per 16-bit half, a * b + c rounded once to fp16. The product of two fp16
  values and the sum are formed in double, which holds them exactly unless the exponents of a * b and c lie
  more than ~29 binades apart; the double is then rounded straight to fp16 (no intermediate float rounding);
- prmt.b32 / __byte_perm (selector bits 2:0 of each nibble; the sign-replicate mode, bit 3, is not modelled);
- lop3.b32 of the decode's form (x & mask) ^ const (tl_host_and_xor);
- mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (tl_host_mma_m16n8k16, with SHARED_BLOCK_THREADS): a
  warp-collective operation: each lane puts its A (4 x b32), B (2 x b32) fragment registers on a per-warp table,
  the warp meets at a barrier, every lane rebuilds the 16 x 16 A and 16 x 8 B tiles from the PTX ISA fragment
  layouts (groupID g = lane / 4, t = lane % 4: A a0..a3 at rows g, g + 8, g, g + 8 and columns 2t, 2t, 2t + 8,
  2t + 8 (+0, +1 for the two halves); B b0 at rows 2t, 2t + 1, b1 at 2t + 8, 2t + 9 of column g) and computes its
  four C / D elements (rows g, g, g + 8, g + 8; columns 2t, 2t + 1, 2t, 2t + 1);
- a thread block: every thread a std::thread (tl_host_run_block), __syncthreads a std::barrier over the block,
  and a per-warp barrier for the mma; thread_local tl_host_tid is threadIdx.x;
- shared memory as a byte array whose "shared addresses" (cvta.to.shared) are offsets into it
  (SHARED_RING_CHECK): cp.async copies complete at once (commit / wait_group are no-ops) and every byte of the
  per-thread ring range remembers the thread that copied into it: a copy into or read of another thread's ring
  byte, a misaligned access or one past the end aborts the program (exit 3). On the device the threads run at
  once, so a ring slot that two threads share would race; here they would run one after another and pass.

What is not modelled: the tensor cores' own accumulation order and internal precision (the emulated mma sums
the 16 exact fp16 products in double and rounds to float once per mma: the hardware may round differently, so
tests compare against float64 with a tolerance, never bit for bit); cp.async asynchrony (a wait_group placed too
late is not detected, only the ring ownership is); memory ordering and visibility between threads beyond the
barriers and the atomics the harness defines; warp divergence and the .aligned requirement (every lane of a warp
must reach the mma, as here, or the emulation deadlocks); bank conflicts and anything about timing.
"""
import shutil
import subprocess

import numpy as np
import pytest

# ---- C++ text ----------------------------------------------------------------------------------------------

# Any C++17 compiler with _Float16 (g++ >= 12 or clang++ on x86-64).
CUDA_HOST_PRELUDE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __restrict__
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static thread_local int tl_host_tid;  // threadIdx.x
static inline float tl_host_h2f(unsigned short h) { _Float16 f; std::memcpy(&f, &h, 2); return (float)f; }
static inline unsigned short tl_host_f2h(float v) {
  _Float16 f = (_Float16)v;
  unsigned short h;
  std::memcpy(&h, &f, 2);
  return h;
}
// fma.rn.f16x2: per half, the exact a * b + c of fp16 operands (in double) rounded once to fp16
static inline unsigned tl_host_fma_f16x2(unsigned a, unsigned b, unsigned c) {
  unsigned d = 0;
  for (int sh = 0; sh < 32; sh += 16) {
    _Float16 x, y, z;
    const unsigned short xa = (a >> sh) & 0xffff, yb = (b >> sh) & 0xffff, zc = (c >> sh) & 0xffff;
    std::memcpy(&x, &xa, 2);
    std::memcpy(&y, &yb, 2);
    std::memcpy(&z, &zc, 2);
    const _Float16 r = (_Float16)((double)x * (double)y + (double)z);
    unsigned short bits;
    std::memcpy(&bits, &r, 2);
    d |= (unsigned)bits << sh;
  }
  return d;
}
static inline unsigned tl_host_and_xor(unsigned x, unsigned mask, unsigned c) { return (x & mask) ^ c; }  // lop3
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {  // CUDA's, selector bits 2:0 per byte
  unsigned char in[8];
  std::memcpy(in, &x, 4);
  std::memcpy(in + 4, &y, 4);
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned(in[(s >> (4 * n)) & 7]) << (8 * n);
  return r;
}
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
"""

# After CUDA_HOST_PRELUDE: the block's shared memory and the per-thread ring check. The harness's main() points
# tl_host_smem at the block's shared bytes, sets tl_host_smem_size and the ring's byte range [ring0, ring1), and
# fills tl_host_owner with ring1 - ring0 entries of -1 before each block.
SHARED_RING_CHECK = r"""
static unsigned char* tl_host_smem;
static size_t tl_host_smem_size, tl_host_ring0, tl_host_ring1;
static std::vector<int> tl_host_owner;  // per ring byte: the thread that copied into it (-1: none yet)
static inline void tl_host_shared_access(unsigned a, unsigned n, bool write) {
  if (a % n || a + n > tl_host_smem_size) { fprintf(stderr, "shared access %u+%u out of range\n", a, n); std::exit(3); }
  if (a < tl_host_ring0 || a >= tl_host_ring1) return;
  for (unsigned i = a; i < a + n; ++i) {
    int& owner = tl_host_owner[i - tl_host_ring0];
    if (owner != tl_host_tid && (!write || owner != -1)) {
      fprintf(stderr, "thread %d touches ring byte %u of thread %d\n", tl_host_tid, i, owner);
      std::exit(3);
    }
    owner = tl_host_tid;
  }
}
static inline unsigned tl_host_saddr(const void* p) { return (unsigned)((const unsigned char*)p - tl_host_smem); }
// cp.async of n bytes, complete at once
static inline void tl_host_cp_async(unsigned dst, const void* src, unsigned n) {
  tl_host_shared_access(dst, n, true);
  std::memcpy(tl_host_smem + dst, src, n);
}
static inline void tl_host_st_shared(unsigned dst, const void* v, unsigned n) {
  tl_host_shared_access(dst, n, true);
  std::memcpy(tl_host_smem + dst, v, n);
}
template <class T> static inline T tl_host_ld_shared(unsigned p) {
  tl_host_shared_access(p, sizeof(T), false);
  T v;
  std::memcpy(&v, tl_host_smem + p, sizeof(T));
  return v;
}
"""

# After CUDA_HOST_PRELUDE: a block of std::threads (C++20, -pthread: std::barrier) and the warp-collective mma.
BLOCK_THREADS = r"""
#include <barrier>
#include <functional>
#include <thread>
static std::barrier<>* tl_host_block_bar;
static std::vector<std::barrier<>*> tl_host_warp_bar;
static unsigned tl_host_mma_a[64][32][4], tl_host_mma_b[64][32][2];  // [warp][lane]: the lanes' fragment registers
static void __syncthreads() { tl_host_block_bar->arrive_and_wait(); }
// runs body(tid) on `threads` concurrent threads (tl_host_tid = tid), with the block and warp barriers set up
static void tl_host_run_block(int threads, const std::function<void(int)>& body) {
  std::barrier<> block(threads);
  tl_host_block_bar = &block;
  std::vector<std::barrier<>*> wb;
  for (int w = 0; w < (threads + 31) / 32; ++w) wb.push_back(new std::barrier<>(32));
  tl_host_warp_bar = wb;
  std::vector<std::thread> ts;
  for (int tid = 0; tid < threads; ++tid)
    ts.emplace_back([&body, tid] {
      tl_host_tid = tid;
      body(tid);
    });
  for (auto& t : ts) t.join();
  for (auto* b : wb) delete b;
}
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: d += A B, A and B from the warp's fragment registers
// (PTX ISA fragment layouts: groupID g = lane / 4, t = lane % 4); every lane of the warp must call it
static void tl_host_mma_m16n8k16(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  const int lane = tl_host_tid & 31, warp = tl_host_tid >> 5;
  for (int i = 0; i < 4; ++i) tl_host_mma_a[warp][lane][i] = a[i];
  tl_host_mma_b[warp][lane][0] = b0;
  tl_host_mma_b[warp][lane][1] = b1;
  tl_host_warp_bar[warp]->arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    const unsigned* r = tl_host_mma_a[warp][l];
    const unsigned* rb = tl_host_mma_b[warp][l];
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int i = 0; i < 4; ++i) {
      A[rows[i]][cols[i]] = tl_host_h2f(r[i] & 0xffff);
      A[rows[i]][cols[i] + 1] = tl_host_h2f(r[i] >> 16);
    }
    B[2 * t][g] = tl_host_h2f(rb[0] & 0xffff);
    B[2 * t + 1][g] = tl_host_h2f(rb[0] >> 16);
    B[2 * t + 8][g] = tl_host_h2f(rb[1] & 0xffff);
    B[2 * t + 9][g] = tl_host_h2f(rb[1] >> 16);
  }
  tl_host_warp_bar[warp]->arrive_and_wait();  // every lane has read the table: the next mma may overwrite it
  const int g = lane >> 2, t = lane & 3;
  const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    double s = d[e];
    for (int k = 0; k < 16; ++k) s += (double)A[rr[e]][k] * B[k][cc[e]];  // exact products and sums of fp16
    d[e] = (float)s;
  }
}
"""

# After CUDA_HOST_PRELUDE: host stand-ins for kernels.quant_gemm._W4H2_HELPERS (the fp16x2 asm helpers that
# w4a16_gemv_h2, w4a16_mma(h2_dequant=True) and w4a16_gemv_ldg import)
W4H2_HELPERS = r"""
static inline unsigned tl_w4h2_fma(unsigned a, unsigned b, unsigned c) { return tl_host_fma_f16x2(a, b, c); }
static inline float tl_w4h2_sum(unsigned v) { return tl_host_h2f(v & 0xffff) + tl_host_h2f(v >> 16); }
static inline float tl_w4h2_h2f(unsigned short v) { return tl_host_h2f(v); }
"""


# After CUDA_HOST_PRELUDE + BLOCK_THREADS: host stand-ins for kernels.w4a16_m16's tl_w4m_* helpers (fp16x2 fma,
# mma.sync, 16-byte loads and cp.async copies that land at once, the split-K atomics and 4-wide workspace
# accesses), which w4a16_m16 and w4a16_bulk import
W4M_HELPERS = r"""
#include <atomic>
#include <cstddef>
static unsigned tl_w4m_fma(unsigned a, unsigned b, unsigned c) { return tl_host_fma_f16x2(a, b, c); }
static unsigned short tl_w4m_f2h(float f) { return tl_host_f2h(f); }
static float tl_w4m_h2f(unsigned short h) { return tl_host_h2f(h); }
static void tl_w4m_mma(float* d, const unsigned* a, unsigned b0, unsigned b1) { tl_host_mma_m16n8k16(d, a, b0, b1); }
static uint4 tl_w4m_ldg(const void* p) { uint4 v; std::memcpy(&v, p, 16); return v; }
static unsigned tl_w4m_ldg32(const void* p) { unsigned v; std::memcpy(&v, p, 4); return v; }
static void tl_w4m_cp16(void* dst, const void* src, int bytes) {
  if (bytes) std::memcpy(dst, src, 16); else std::memset(dst, 0, 16);
}
typedef unsigned char* tl_w4m_sptr;  // the ring variant's shared addresses: plain pointers here
static tl_w4m_sptr tl_w4m_saddr(const void* p) { return (tl_w4m_sptr)p; }
static void tl_w4m_cp16s(tl_w4m_sptr dst, const void* src, int bytes) { tl_w4m_cp16(dst, src, bytes); }
static void tl_w4m_cp4s(tl_w4m_sptr dst, const void* src) { std::memcpy(dst, src, 4); }
template <unsigned M, unsigned C> static unsigned tl_w4m_lop3(unsigned x) { return tl_host_and_xor(x, M, C); }
static void tl_w4m_commit() {}
template <int N> static void tl_w4m_wait() {}
static void atomicAdd(float* p, float v) { std::atomic_ref<float>(*p).fetch_add(v); }
static int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
static void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static float tl_w4m_ldcg(const float* p) { return std::atomic_ref<const float>(*p).load(); }
static void tl_w4m_red4(float* p, const float* v) { for (int e = 0; e < 4; ++e) atomicAdd(p + e, v[e]); }
static void tl_w4m_ldcg4(const float* p, float* v) { for (int e = 0; e < 4; ++e) v[e] = tl_w4m_ldcg(p + e); }
static void tl_w4m_st4z(float* p) { for (int e = 0; e < 4; ++e) p[e] = 0.f; }
static void tl_w4m_st4h(unsigned short* p, const float* v) { for (int e = 0; e < 4; ++e) p[e] = tl_host_f2h(v[e]); }
"""

# ---- building and running the host programs --------------------------------------------------------------------

def run_host(tmp_path, code, inputs, name="h2_host"):
    """Compiles the C++17 program `code` (CUDA_HOST_PRELUDE + ... + main) and runs it with the byte strings
    `inputs` on stdin; returns its stdout. Skips without a host C++ compiler or one without _Float16."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    cc = tmp_path / f"{name}.cc"
    cc.write_text(code)
    exe = tmp_path / name
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(cc)], capture_output=True, text=True)
    if r.returncode != 0 and "_Float16" in r.stderr:
        pytest.skip(f"{cxx} has no _Float16")
    assert r.returncode == 0, r.stderr[-3000:]
    p = subprocess.run([str(exe)], input=b"".join(inputs), capture_output=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def run_block_threads(tmp_path, code, inputs, timeout=300):
    """Compiles the C++20 program `code` (CUDA_HOST_PRELUDE + BLOCK_THREADS + ... + a main(argc, argv) that reads
    argv[1] and writes argv[2]) with g++ and runs it on the concatenated byte strings `inputs`. Returns
    (CompletedProcess, path of the output file): the caller checks the exit status (its own codes). Skips
    without g++."""
    gxx = shutil.which("g++")
    if not gxx:
        pytest.skip("no g++")
    (tmp_path / "h.cc").write_text(code)
    r = subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", "-o", str(tmp_path / "h"),
                        str(tmp_path / "h.cc")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(tmp_path / "in.bin", "wb") as f:
        f.write(b"".join(inputs))
    out = tmp_path / "out.bin"
    r = subprocess.run([str(tmp_path / "h"), str(tmp_path / "in.bin"), str(out)], capture_output=True, text=True,
                       timeout=timeout)
    return r, out


# ---- numpy: int4 weights and the fp16 decode arithmetic ------------------------------------------------------

def signed_nibbles(w):
    """The signed int4 values of packed uint8 weights (low nibble first): [..., B] -> [..., 2 B] int64."""
    u = np.stack([w & 15, w >> 4], axis=-1).reshape(*w.shape[:-1], -1).astype(np.int64)
    return np.where(u >= 8, u - 16, u)


def put_every_byte_value(w, q, row):
    """Weights w [N, K/2] (uint8) and their int4 values q [N, K] (from kernels.quant_gemm.quantize_ref): row `row`
    gets every byte value 0..255 in its first 256 bytes, q follows."""
    w[row, :256] = np.arange(256, dtype=np.uint8)
    q[row] = signed_nibbles(w[row])


def f16_fma(a, b, c):
    """a * b + c on float16 arrays, rounded once (float64 holds the exact value for fp16 operands)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float16)


def halves(u):
    """The low and high fp16 halves of uint32 words."""
    u = np.asarray(u, np.uint32)
    return (u & 0xFFFF).astype(np.uint16).view(np.float16), (u >> 16).astype(np.uint16).view(np.float16)


def fma_f16x2(a, b, c):
    """fma.rn.f16x2 on uint32 arrays."""
    (al, ah), (bl, bh), (cl, ch) = halves(a), halves(b), halves(c)
    lo, hi = f16_fma(al, bl, cl), f16_fma(ah, bh, ch)
    return lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << 16)


def byte_perm(x, y, sel):
    """__byte_perm (prmt.b32 without the sign-replicate mode) on uint64 arrays holding 32-bit words."""
    src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(sel >> (4 * i)) & 0xF] << (8 * i) for i in range(4)).astype(np.uint32)


def decode_w4_f16x2(x):
    """The fp16x2 decode of 8 int4 weights per uint32 word (low nibble first) that the h2 kernels' C++ does with
    one lop3 and one fma.rn.f16x2 per result: (x & 0x000f000f) ^ 0x64086408 is fp16 1032 + n, times 1 minus 1032;
    (x & 0x00f000f0) ^ 0x64806480 is 1152 + 16 n, times 1/16 minus 72. Returns the words of the weights at byte
    offsets (0, 2) low nibbles, (0, 2) high nibbles, (1, 3) low, (1, 3) high: k = 0 and 4, 1 and 5, 2 and 6, 3
    and 7 of the word, each the exact signed nibble in fp16."""
    x = np.asarray(x, np.uint32)
    y = x >> np.uint32(8)
    one, m1032 = np.uint32(0x3C003C00), np.uint32(0xE408E408)
    sixteenth, m72 = np.uint32(0x2C002C00), np.uint32(0xD480D480)
    return (fma_f16x2((x & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032),
            fma_f16x2((x & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72),
            fma_f16x2((y & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032),
            fma_f16x2((y & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72))


def w4a16_h2_model(A, W, S, group):
    """numpy model of w4a16_gemv_h2's imported per-thread function (the per-32-weight arithmetic w4a16_gemv_ldg
    shares), bit for bit up to the float32 sums: A [M, K] f16, W [N, K/2] uint8, S [N, K/group] f16 ->
    C [M, N] float64: each word of 8 weights decoded (decode_w4_f16x2), its fp16 products with the activations
    accumulated by fma.rn.f16x2 in two fp16x2 registers per 32 weights, those summed in float32 and scaled."""
    M, K = A.shape
    N = W.shape[0]
    words = np.ascontiguousarray(W).view(np.uint32).reshape(N, K // 32, 4)  # [n, chunk, word]
    out = np.zeros((M, N))
    for m in range(M):
        a = np.ascontiguousarray(A[m]).view(np.uint32).reshape(K // 32, 4, 4)  # [chunk, uint4, xyzw]
        h0 = np.zeros((N, K // 32), np.uint32)
        h1 = np.zeros((N, K // 32), np.uint32)
        for i in range(4):
            vx, vy, vz, vw = (a[:, i, j].astype(np.uint64) for j in range(4))
            ap = [byte_perm(vx, vz, 0x5410), byte_perm(vx, vz, 0x7632), byte_perm(vy, vw, 0x5410),
                  byte_perm(vy, vw, 0x7632)]
            q0, q1, q2, q3 = decode_w4_f16x2(words[:, :, i])
            h0 = fma_f16x2(q0, ap[0][None, :], h0)
            h1 = fma_f16x2(q1, ap[1][None, :], h1)
            h0 = fma_f16x2(q2, ap[2][None, :], h0)
            h1 = fma_f16x2(q3, ap[3][None, :], h1)
        part = sum(h.astype(np.float32) for hh in (h0, h1) for h in halves(hh))  # [n, chunk] float32
        s = S.astype(np.float32)[:, (np.arange(K // 32) * 32) // group]
        out[m] = (s * part).astype(np.float64).sum(axis=1)
    return out
