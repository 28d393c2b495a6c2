"""kernels/w4a16_m1.py (issue #11, W4A16 decode at M = 1 on mma.sync, CUDA only: imported CUDA source),
checked without a GPU:

- the exact imported C++ text runs on the host: every thread of a block a std::thread, mma.sync a
  warp-collective emulation of the PTX ISA's m16n8k16 fragments (exact products, double sums rounded to
  float per mma), __syncthreads a block barrier, the shared "window" a byte array (a cp.async copy or ring
  read of another thread's ring bytes fails: threads run concurrently, an aliasing slot would race),
  against float64 on random inputs with every byte value in a row and scales that differ per group;
- the -beta bias constants and the decode constants give every nibble exactly (numpy fp16);
- the generated CUDA source for sm_90a at N = K = 8192 (hopper_bench's "m1" configs): PTX counts (16-byte
  cp.async per 16 weight bytes, one LOP3 per A register, 8 mma.sync per tile and chunk, no fma.rn.f16x2 on
  the weights) and ptxas: registers for the configured warps per SM, no spills;
- bad tiles are refused naming the argument.

Run: PYTHONPATH=compiler/python:build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_w4a16_m1.py
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_w4a16_cuda_source import NVCC, count, env, ptx_of, sm90a_parts, tilelang  # noqa: E402,F401

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

from kernels import w4a16_m1 as wm  # noqa: E402
from kernels.quant_gemm import quantize_ref, quant_matmul_ref  # noqa: E402

_HOST = r"""
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __restrict__
struct uint4 { unsigned x, y, z, w; };
static std::barrier<>* g_block_bar;
static std::vector<std::barrier<>*> g_warp_bar;
static unsigned g_a[32][32][4], g_b[32][32][2];  // [warp][lane]: the operands the lanes put on the table
static thread_local int t_tid;
static unsigned char* g_smem;  // the block's shared memory; "shared addresses" are offsets into it
static size_t g_smem_size, g_ring0, g_ring1;  // the weight rings' byte range
static std::vector<int> g_owner;  // per ring byte: the thread that copied into it (-1: none yet)
static float h2f(unsigned short h) { _Float16 f; std::memcpy(&f, &h, 2); return (float)f; }
static unsigned short f2h(float v) { _Float16 f = (_Float16)v; unsigned short h; std::memcpy(&h, &f, 2); return h; }
static void check(unsigned a, unsigned n, bool write) {
  if (a % n || a + n > g_smem_size) { fprintf(stderr, "shared access %u+%u out of range\n", a, n); std::exit(3); }
  if (a < g_ring0 || a >= g_ring1) return;
  for (unsigned i = a; i < a + n; ++i) {
    if (g_owner[i - g_ring0] != t_tid && (!write || g_owner[i - g_ring0] != -1)) {
      fprintf(stderr, "thread %d touches ring byte %u of thread %d\n", t_tid, i, g_owner[i - g_ring0]);
      std::exit(3);
    }
    g_owner[i - g_ring0] = t_tid;
  }
}
static unsigned tl_w4k_saddr(const void* p) { return (unsigned)((const unsigned char*)p - g_smem); }
static void tl_w4k_cp16(unsigned dst, const void* src) { check(dst, 16, true); std::memcpy(g_smem + dst, src, 16); }
static void tl_w4k_commit() {}
#define TL_W4K_WAIT(n) ((void)(n))
static uint4 tl_w4k_ld16(unsigned p) { check(p, 16, false); uint4 v; std::memcpy(&v, g_smem + p, 16); return v; }
static unsigned tl_w4k_ld4(unsigned p) { check(p, 4, false); unsigned v; std::memcpy(&v, g_smem + p, 4); return v; }
static uint4 tl_w4k_ldg16(const void* p) { uint4 v; std::memcpy(&v, p, 16); return v; }
static unsigned short tl_w4k_ldg2(const unsigned short* p) { return *p; }
static void tl_w4k_st16(unsigned p, unsigned x, unsigned y, unsigned z, unsigned w) {
  check(p, 16, true);
  const unsigned v[4] = {x, y, z, w};
  std::memcpy(g_smem + p, v, 16);
}
static void tl_w4k_st4(unsigned p, unsigned x) { check(p, 4, true); std::memcpy(g_smem + p, &x, 4); }
static unsigned tl_w4k_lo(unsigned x) { return (x & 0x000f000fu) ^ 0x64086408u; }
static unsigned tl_w4k_hi(unsigned x) { return (x & 0x00f000f0u) ^ 0x54805480u; }
static float tl_w4k_h2f(unsigned short h) { return h2f(h); }
static unsigned short tl_w4k_f2h(float f) { return f2h(f); }
static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static void tl_w4k_sync() { g_block_bar->arrive_and_wait(); }
// mma.sync.m16n8k16.row.col f32.f16.f16.f32 (PTX ISA fragment layouts: groupID g = lane / 4, t = lane % 4)
static void tl_w4k_mma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  const int lane = t_tid & 31, warp = t_tid >> 5;
  const unsigned a[4] = {a0, a1, a2, a3};
  for (int i = 0; i < 4; ++i) g_a[warp][lane][i] = a[i];
  g_b[warp][lane][0] = b0;
  g_b[warp][lane][1] = b1;
  g_warp_bar[warp]->arrive_and_wait();
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l >> 2, t = l & 3;
    const unsigned* r = g_a[warp][l];
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int i = 0; i < 4; ++i) {
      A[rows[i]][cols[i]] = h2f(r[i] & 0xffff);
      A[rows[i]][cols[i] + 1] = h2f(r[i] >> 16);
    }
    B[2 * t][g] = h2f(g_b[warp][l][0] & 0xffff);
    B[2 * t + 1][g] = h2f(g_b[warp][l][0] >> 16);
    B[2 * t + 8][g] = h2f(g_b[warp][l][1] & 0xffff);
    B[2 * t + 9][g] = h2f(g_b[warp][l][1] >> 16);
  }
  g_warp_bar[warp]->arrive_and_wait();
  const int g = lane >> 2, t = lane & 3;
  const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    double s = d[e];
    for (int k = 0; k < 16; ++k) s += (double)A[rr[e]][k] * B[k][cc[e]];
    d[e] = (float)s;
  }
}
static void tl_w4k_mma0(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1,
                        float c) {
  for (int e = 0; e < 4; ++e) d[e] = c;
  tl_w4k_mma(d, a0, a1, a2, a3, b0, b1);
}
"""


def _host_main(name, N, K, gs, tn, wn, wk, depth):
    threads, bn = 32 * wn * wk, 16 * tn * wn
    smem = wm.smem_bytes(K, gs, tn, wn, wk, depth)
    ring0 = 2 * K + K // 8 + 32 * tn * wn * (K // gs)
    ring1 = ring0 + threads * (depth + 1) * tn * 32
    return f"""
int main(int argc, char** argv) {{
  std::vector<unsigned short> a({K}), s({N} * {K // gs}), out({N}, 0x7e00);  // NaN: a missed store shows
  std::vector<unsigned char> w({N} * {K // 2});
  FILE* f = std::fopen(argv[1], "rb");
  if (std::fread(a.data(), 2, a.size(), f) != a.size() || std::fread(w.data(), 1, w.size(), f) != w.size() ||
      std::fread(s.data(), 2, s.size(), f) != s.size()) return 2;
  std::fclose(f);
  std::vector<unsigned> smem({smem // 4});
  g_smem = reinterpret_cast<unsigned char*>(smem.data());
  g_smem_size = {smem};
  g_ring0 = {ring0};
  g_ring1 = {ring1};
  for (int bx = 0; bx < {N // bn}; ++bx) {{
    std::barrier<> block({threads});
    g_block_bar = &block;
    std::vector<std::barrier<>*> wb;
    for (int i = 0; i < {threads // 32}; ++i) wb.push_back(new std::barrier<>(32));
    g_warp_bar = wb;
    std::fill(smem.begin(), smem.end(), 0x7fc00000u);  // NaN: stale or unwritten shared words show
    g_owner.assign(g_ring1 - g_ring0, -1);
    std::vector<std::thread> ts;
    for (int tid = 0; tid < {threads}; ++tid)
      ts.emplace_back([&, tid] {{
        t_tid = tid;
        {name}(w.data() + (size_t)bx * {bn} * {K // 2}, a.data(), s.data() + (size_t)bx * {bn} * {K // gs},
               out.data() + bx * {bn}, smem.data(), tid);
      }});
    for (auto& t : ts) t.join();
    for (auto* b : wb) delete b;
  }}
  f = std::fopen(argv[2], "wb");
  std::fwrite(out.data(), 2, out.size(), f);
  std::fclose(f);
  return 0;
}}
"""


@pytest.mark.parametrize("N,K,gs,tn,wn,wk,depth", [
    (64, 2048, 128, 1, 2, 8, 3),  # hopper_bench's 1 x 2 x 8 shape at a small K: 2 chunks per warp, depth past them
    (64, 4096, 256, 2, 1, 4, 2),  # 2 tiles per warp, group 256 (2 chunks per scale), the ring wraps 3 times
    (96, 3072, 128, 1, 3, 2, 1),  # 3 warps of rows, depth 1, 12 chunks per warp
    (32, 1024, 128, 2, 1, 1, 4),  # one warp of K: every chunk of the row in one warp
    (32, 4096, 128, 1, 2, 1, 2),  # 64 threads: 2 activation runs and 8 scale pairs staged per thread
])
def test_exact_source_runs_on_the_host(tmp_path, N, K, gs, tn, wn, wk, depth):
    gxx = shutil.which("g++")
    if not gxx:
        pytest.skip("no g++")
    rng = np.random.default_rng(N + K + gs + tn)
    a = rng.standard_normal((1, K)).astype(np.float16)
    w, s, q = quantize_ref(rng.standard_normal((N, K)), 4, gs)
    w[1, :256] = np.arange(256, dtype=np.uint8)  # every byte value in a row
    nib = np.stack([w[1] & 15, w[1] >> 4], axis=1).reshape(-1).astype(np.int64)
    q[1] = np.where(nib >= 8, nib - 16, nib)
    s = s.astype(np.float16)
    s[:, ::3] *= 4  # scales that differ per group (a wrong group index shows)
    ref = quant_matmul_ref(a.astype(np.float64), q, s.astype(np.float64), gs)[0]
    name = "tl_w4m1_host"
    src = wm._source(name, K, gs, tn, wn, wk, depth)
    assert src.startswith(wm._HELPERS)
    code = _HOST + src[len(wm._HELPERS):] + _host_main(name, N, K, gs, tn, wn, wk, depth)
    (tmp_path / "h.cc").write_text(code)
    r = subprocess.run([gxx, "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", "-o", str(tmp_path / "h"),
                        str(tmp_path / "h.cc")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(tmp_path / "in.bin", "wb") as f:
        f.write(a.tobytes() + np.ascontiguousarray(w).tobytes() + s.tobytes())
    r = subprocess.run([str(tmp_path / "h"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode} {r.stderr}"
    got = np.fromfile(tmp_path / "out.bin", np.float16).astype(np.float64)
    assert np.isfinite(got).all()
    # float32 sums around +-beta, one fp16 rounding: well inside fp16's own precision of the result
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-3, err
    np.testing.assert_allclose(got, ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())


def test_decode_constants_and_biases_are_exact():
    """lo(x) = (x & 0x000f000f) ^ 0x64086408 is fp16 1032 + n, hi(x) = (x & 0x00f000f0) ^ 0x54805480 is
    72 + n for every signed nibble n (u ^ 8 = n + 8): the biases -beta removes."""
    u = np.arange(16, dtype=np.uint32)
    n = np.where(u >= 8, u.astype(np.int64) - 16, u.astype(np.int64))
    lo = ((u & 0xF) ^ 0x6408).astype(np.uint16).view(np.float16).astype(np.float64)
    hi = (((u << 4) & 0xF0) ^ 0x5480).astype(np.uint16).view(np.float16).astype(np.float64)
    np.testing.assert_array_equal(lo, 1032 + n)
    np.testing.assert_array_equal(hi, 72 + n)


def _cuda_source(prog):
    parts = sm90a_parts(prog)
    if not parts:
        return tilelang.compile(prog, target="cuda").get_kernel_source()
    sm90 = [body for name, body in parts.items() if name.startswith("main_kernel.sm_90a.cu")]
    assert sm90, list(parts)
    return sm90[0]


# hopper_bench's "m1" configs at N = K = 8192: (tn, wn, wk, depth, most registers)
@pytest.mark.parametrize("tn,wn,wk,depth,max_regs", [(1, 2, 8, 3, 64), (2, 1, 8, 3, 128), (1, 1, 8, 4, 128)])
def test_source_ptx_and_ptxas(tmp_path, tn, wn, wk, depth, max_regs):
    K, N = 8192, 8192
    s = _cuda_source(wm.w4a16_m1(1, N, K, tn=tn, wn=wn, wk=wk, depth=depth))
    assert f"tl_w4a16_m1_k{K}_g128_t{tn}_n{wn}_k{wk}_d{depth}(" in s
    ptx = ptx_of(s, tmp_path)
    cw = K // 128 // wk  # chunks per warp
    assert count(ptx, "cp.async.cg.shared.global.L2::256B") == 2 * tn * cw  # rows g and g + 8 per tile and chunk
    assert count(ptx, "cp.async.commit_group;") == cw + depth
    assert count(ptx, "cp.async.wait_group") == cw and f"cp.async.wait_group {depth};" in ptx
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 8 * tn * cw
    assert count(ptx, "lop3.b32") == 32 * tn * cw  # one per A register: no fp16 fix-up of the decode
    assert count(ptx, "fma.rn.f16x2") == 0
    assert "ld.local" not in ptx and "st.local" not in ptx
    r = subprocess.run([os.path.join(os.path.dirname(NVCC), "ptxas"), "-arch=sm_90a", "-v", "-o",
                        str(tmp_path / "k.cubin"), str(tmp_path / "k.ptx")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    regs = [int(v) for v in re.findall(r"Used (\d+) registers", r.stderr)]
    assert regs and max(regs) <= max_regs, r.stderr
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", r.stderr)]
    assert spills and max(spills) == 0, r.stderr


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"M=16 must be 1"):
        wm.w4a16_m1(16, 64, 2048)
    with pytest.raises(ValueError, match=r"group_size=64 must be a multiple of 128 dividing K=2048"):
        wm.w4a16_m1(1, 64, 2048, group_size=64)
    with pytest.raises(ValueError, match=r"K=3072 must be a multiple of 1024 whose 128-wide chunks wk=5 divides"):
        wm.w4a16_m1(1, 64, 3072, wk=5)
    with pytest.raises(ValueError, match=r"N=40 must be a multiple of 16 tn wn = 32"):
        wm.w4a16_m1(1, 40, 2048)
    with pytest.raises(ValueError, match=r"depth=0 must be >= 1"):
        wm.w4a16_m1(1, 64, 2048, depth=0)
    with pytest.raises(ValueError, match=r"shared bytes per block exceed"):
        wm.w4a16_m1(1, 8192, 65536, tn=4, wn=2, wk=16, depth=8)
    with pytest.raises(tilelang.TileLangUnimplementedFeature, match=r"calls extern function 'tl_w4a16_m1_\w+', "
                                                                    r"target cpu"):
        tilelang.compile(wm.w4a16_m1(1, 64, 2048), target="cpu")
