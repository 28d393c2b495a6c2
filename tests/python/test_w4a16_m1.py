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
import re

import numpy as np
import pytest

from _helpers import count, ptx_of, ptxas_v_of_ptx, sm90a_kernel_source  # sys.path: the repo root, tilelang
from _host_emulation import (BLOCK_THREADS, CUDA_HOST_PRELUDE, SHARED_RING_CHECK,  # host stand-ins of CUDA
                             put_every_byte_value, run_block_threads)
import tilelang  # noqa: E402

from kernels import w4a16_m1 as wm  # noqa: E402
from kernels.quant_gemm import quantize_ref, quant_matmul_ref  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build

# the tl_w4k_* helpers on the host (_host_emulation: CUDA_HOST_PRELUDE, SHARED_RING_CHECK, BLOCK_THREADS): the
# shared "window" a byte array whose ring bytes remember the thread that copied them, cp.async copies complete at
# once, mma.sync the warp-collective m16n8k16 emulation, the block barrier a std::barrier
_HOST = r"""
static unsigned tl_w4k_saddr(const void* p) { return tl_host_saddr(p); }
static void tl_w4k_cp16(unsigned dst, const void* src) { tl_host_cp_async(dst, src, 16); }
static void tl_w4k_commit() {}
#define TL_W4K_WAIT(n) ((void)(n))
static uint4 tl_w4k_ld16(unsigned p) { return tl_host_ld_shared<uint4>(p); }
static unsigned tl_w4k_ld4(unsigned p) { return tl_host_ld_shared<unsigned>(p); }
static uint4 tl_w4k_ldg16(const void* p) { uint4 v; std::memcpy(&v, p, 16); return v; }
static unsigned short tl_w4k_ldg2(const unsigned short* p) { return *p; }
static void tl_w4k_st16(unsigned p, unsigned x, unsigned y, unsigned z, unsigned w) {
  const unsigned v[4] = {x, y, z, w};
  tl_host_st_shared(p, v, 16);
}
static void tl_w4k_st4(unsigned p, unsigned x) { tl_host_st_shared(p, &x, 4); }
static unsigned tl_w4k_lo(unsigned x) { return tl_host_and_xor(x, 0x000f000fu, 0x64086408u); }
static unsigned tl_w4k_hi(unsigned x) { return tl_host_and_xor(x, 0x00f000f0u, 0x54805480u); }
static float tl_w4k_h2f(unsigned short h) { return tl_host_h2f(h); }
static unsigned short tl_w4k_f2h(float f) { return tl_host_f2h(f); }
static void tl_w4k_sync() { __syncthreads(); }
static void tl_w4k_mma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  const unsigned a[4] = {a0, a1, a2, a3};
  tl_host_mma_m16n8k16(d, a, b0, b1);
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
  tl_host_smem = reinterpret_cast<unsigned char*>(smem.data());
  tl_host_smem_size = {smem};
  tl_host_ring0 = {ring0};
  tl_host_ring1 = {ring1};
  for (int bx = 0; bx < {N // bn}; ++bx) {{
    std::fill(smem.begin(), smem.end(), 0x7fc00000u);  // NaN: stale or unwritten shared words show
    tl_host_owner.assign(tl_host_ring1 - tl_host_ring0, -1);
    tl_host_run_block({threads}, [&](int tid) {{
      {name}(w.data() + (size_t)bx * {bn} * {K // 2}, a.data(), s.data() + (size_t)bx * {bn} * {K // gs},
             out.data() + bx * {bn}, smem.data(), tid);
    }});
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
    rng = np.random.default_rng(N + K + gs + tn)
    a = rng.standard_normal((1, K)).astype(np.float16)
    w, s, q = quantize_ref(rng.standard_normal((N, K)), 4, gs)
    put_every_byte_value(w, q, 1)  # every byte value in a row
    s = s.astype(np.float16)
    s[:, ::3] *= 4  # scales that differ per group (a wrong group index shows)
    ref = quant_matmul_ref(a.astype(np.float64), q, s.astype(np.float64), gs)[0]
    name = "tl_w4m1_host"
    src = wm._source(name, K, gs, tn, wn, wk, depth)
    assert src.startswith(wm._HELPERS)
    code = (CUDA_HOST_PRELUDE + SHARED_RING_CHECK + BLOCK_THREADS + _HOST + src[len(wm._HELPERS):] +
            _host_main(name, N, K, gs, tn, wn, wk, depth))
    r, out = run_block_threads(tmp_path, code, [a.tobytes(), np.ascontiguousarray(w).tobytes(), s.tobytes()])
    assert r.returncode == 0, f"exit {r.returncode} {r.stderr}"
    got = np.fromfile(out, np.float16).astype(np.float64)
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


# hopper_bench's "m1" configs at N = K = 8192: (tn, wn, wk, depth, most registers)
@pytest.mark.parametrize("tn,wn,wk,depth,max_regs", [(1, 2, 8, 3, 64), (2, 1, 8, 3, 128), (1, 1, 8, 4, 128)])
def test_source_ptx_and_ptxas(tmp_path, tn, wn, wk, depth, max_regs):
    K, N = 8192, 8192
    s = sm90a_kernel_source(wm.w4a16_m1(1, N, K, tn=tn, wn=wn, wk=wk, depth=depth))
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
    info = ptxas_v_of_ptx(tmp_path)
    regs = [int(v) for v in re.findall(r"Used (\d+) registers", info)]
    assert regs and max(regs) <= max_regs, info
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", info)]
    assert spills and max(spills) == 0, info


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
