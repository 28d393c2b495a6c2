"""kernels/w4a16_m16.py (issue #11, W4A16 decode at M <= 16, CUDA only: imported CUDA source), checked
without a GPU:

- pack_w4a16_m16 + the fragment-level numpy model of the CUDA source's index arithmetic (per tile, chunk,
  lane and k16-step: the decoded registers placed in the PTX ISA's m16n8k16 A / B / C fragment positions,
  per-group partials times the repacked scale pairs) equal A @ (q * s)^T in float64 on random inputs
  (M < 16 rows too, group 64 and 128);
- the repacked byte of explicit (row, k) positions is the docstring's formula;
- the int4 -> fp16 constants of tl_w4m_decode give every nibble exactly (fp16 arithmetic in numpy);
- the imported source, compiled by nvcc for sm_90a with a one-line wrapper kernel: ptxas reports no spills
  and the registers hopper_bench's configs assume; the PTX holds the 16-byte coherent ld.global weight loads,
  cp.async activation copies, 8 mma.sync per 16 weight bytes and no int -> float conversion;
- bad tiles are refused naming the argument.

Run: PYTHONPATH=compiler/python /usr/bin/python3 -m pytest tests/python/test_w4a16_m16.py
"""
import os
import re

import numpy as np
import pytest

from _helpers import NVCC, cuda_kernel_source, ptx_of, ptxas_v, use_tl_pack  # sys.path: the repo root, tilelang
from _host_emulation import BLOCK_THREADS, CUDA_HOST_PRELUDE, W4M_HELPERS, run_block_threads  # host stand-ins of CUDA

from kernels import w4a16_m16 as wm  # noqa: E402
from kernels.quant_gemm import quantize_ref  # noqa: E402


def _case(rng, M, N, K, gs):
    a = rng.standard_normal((M, K)).astype(np.float16)
    w, s, q = quantize_ref(rng.standard_normal((N, K)), 4, gs)
    s = s.astype(np.float16)
    ref = a.astype(np.float64) @ (q * np.repeat(s.astype(np.float64), gs, axis=1)).T
    return a, w, s, ref


@pytest.mark.parametrize("M,N,K,gs", [(16, 32, 256, 128), (9, 48, 384, 64), (1, 16, 128, 128)])
def test_model_of_the_source_matches_float64(M, N, K, gs):
    a, w, s, ref = _case(np.random.default_rng(M * 1000 + N), M, N, K, gs)
    wp, sp = wm.pack_w4a16_m16(w, s)
    assert wp.shape == (N // 16, 8 * K) and sp.shape == (N // 16, 16 * K // gs)
    out = wm.w4a16_m16_model(a, wp, sp, N, K, gs)
    assert out.shape == (M, N)
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < 1e-12, err


def test_packed_positions_follow_the_formula():
    rng = np.random.default_rng(7)
    N, K = 32, 256
    q = rng.integers(-8, 8, size=(N, K))
    u = (q & 0xF).astype(np.uint8)
    w = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    wp, _ = wm.pack_w4a16_m16(w, np.ones((N, K // 128), np.float16))
    for _ in range(300):
        T_, c, ln, s, p = (int(rng.integers(n)) for n in (N // 16, K // 64, 32, 4, 8))
        g, t = ln >> 2, ln & 3
        row = 16 * T_ + g + 8 * (p & 1)
        k = 64 * c + 16 * t + 4 * s + 2 * ((p >> 1) & 1) + (p >> 2)
        byte = wp[T_, c * 512 + 16 * ln + 4 * s + p // 2]
        assert (byte >> (4 * (p & 1))) & 15 == u[row, k], (T_, c, ln, s, p)


def test_decode_constants_are_exact():
    # tl_w4m_decode: low nibble n: half(0x6400 | (n ^ 8)) * 1 + half(0xe408) = q; high nibble: half(0x6400 |
    # ((n ^ 8) << 4)) * half(0x2c00) + half(0xd480) = q (q = n as a signed nibble), rounded in fp16
    h = lambda bits: np.array([bits], np.uint16).view(np.float16)[0]  # noqa: E731
    for n in range(16):
        qv = n - 16 if n >= 8 else n
        lo = np.float16(h(0x6400 | (n ^ 8)) * h(0x3c00) + h(0xe408))
        hi = np.float16(h(0x6400 | ((n ^ 8) << 4)) * h(0x2c00) + h(0xd480))
        assert lo == qv and hi == qv, (n, lo, hi)


def _wrapped_source(tn, wn, wk, depth, split, K=8192, gs=128):
    gw = K // gs // split // wk
    src = wm._FMA + wm._DECODE + wm._MMA + wm._source("f", K, gs, tn, wn, wk, depth, gw, split if split > 1 else 0)
    bn = 16 * tn * wn
    smem = wm._smem_bytes(gs, tn, wn, wk, depth)
    ws = ", float* wk, int* sem" if split > 1 else ""
    wa = ", wk, sem + blockIdx.x" if split > 1 else ""
    return (src +
            f'\nextern "C" __global__ void __launch_bounds__({32 * wn * wk}) k(const unsigned short* a, '
            f"const unsigned char* w, const unsigned short* s, unsigned short* o, int M, int N{ws}) {{\n"
            f"  __shared__ __align__(16) float red[{smem // 4}];\n"
            f"  f(a, w, s, o, red, M, N, blockIdx.x * {bn // 16}, blockIdx.y * 16, blockIdx.z * {K // gs // split}, "
            f"threadIdx.x{wa});\n}}\n")


# hopper_bench's "m16" configs (tn, wn, wk, depth, split) whose ptxas allocation leaves no spills; launch bounds as
# the CUDA printer's (threads only)
@pytest.mark.parametrize("cfg,max_regs", [((1, 4, 4, 3, 1), 128), ((1, 4, 4, 2, 1), 128), ((4, 2, 4, 1, 2), 255)])
def test_source_compiles_for_sm90a_without_spills(tmp_path, cfg, max_regs):
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    src = _wrapped_source(*cfg)
    info = ptxas_v(src, tmp_path)
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    assert regs <= max_regs, (cfg, regs)
    ptx = ptx_of(src, tmp_path)
    tn, wn, wk, depth, split = cfg
    mma = len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32", ptx))
    # per group: tn tiles x 2 chunks x 4 k16-steps x 2 n8 halves, in the loop unrolled depth + 1 times
    assert mma == tn * 2 * 4 * 2 * (depth + 1), mma
    assert len(re.findall(r"ld\.global\.L1::no_allocate\.v4\.u32", ptx)) >= tn * 2 * depth
    assert "ld.global.nc" not in ptx  # .nc loads could be sunk past the block barrier to their use
    assert "cp.async.cg.shared.global" in ptx
    assert not re.search(r"cvt\.rn\.f(16|32)\.[su](8|16|32)", ptx), "an int -> float conversion per weight"
    assert len(re.findall(r"fma\.rn\.f16x2", ptx)) == 4 * 4 * tn * 2 * (depth + 1)


def _wrapped_ring_source(tn, wn, wk, depth, split, K=8192, gs=128):
    """_source_ring in a one-line kernel (dynamic shared memory: the rings exceed 48 KiB)."""
    gw = K // gs // split // wk
    src = wm._FMA + wm._DECODE + wm._MMA + wm._source_ring("f", K, gs, tn, wn, wk, depth, gw, split if split > 1 else 0)
    bn = 16 * tn * wn
    ws = ", float* wk, int* sem" if split > 1 else ""
    wa = ", wk, sem + blockIdx.x" if split > 1 else ""
    return (src +
            f'\nextern "C" __global__ void __launch_bounds__({32 * wn * wk}) k(const unsigned short* a, '
            f"const unsigned char* w, const unsigned short* s, unsigned short* o, int M, int N{ws}) {{\n"
            f"  extern __shared__ __align__(16) float red[];\n"
            f"  f(a, w, s, o, red, M, N, blockIdx.x * {bn // 16}, blockIdx.y * 16, blockIdx.z * {K // gs // split}, "
            f"threadIdx.x{wa});\n}}\n")


# hopper_bench's "m16r" configs (tn, wn, wk, depth, split), the registers that let its blocks per SM be resident
# (2 x 256 or 4 x 128 threads: <= 128; 2 x 128: <= 255) and their shared bytes (the rings)
@pytest.mark.parametrize("cfg,max_regs,smem", [((2, 8, 1, 3, 8), 128, 95488), ((2, 4, 1, 2, 8), 128, 45056),
                                               ((4, 4, 1, 3, 8), 255, 95488), ((2, 4, 2, 2, 4), 128, 90112)])
def test_ring_source_compiles_for_sm90a_without_spills(tmp_path, cfg, max_regs, smem):
    tn, wn, wk, depth, split = cfg
    assert wm._smem_bytes(128, tn, wn, wk, depth, True) == smem
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    src = _wrapped_ring_source(*cfg)
    info = ptxas_v(src, tmp_path)
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    assert regs <= max_regs, (cfg, regs)
    ptx = ptx_of(src, tmp_path)
    # the group loop is not unrolled: one group's tn tiles x 2 chunks x 4 k16-steps x 2 n8 halves
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32", ptx)) == tn * 16
    # no weight or scale load into registers: all through the ring (16-byte and 4-byte cp.async)
    assert not re.search(r"ld\.global(\.\w+)*\.v4\.u32", ptx) and "ld.global.u32" not in ptx
    # the epilogue's 16-byte atomics (split) or 8-byte fp16 stores
    assert ("red.global.add.v4.f32" in ptx) == (split > 1) and "st.global.v2.u32" in ptx
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4;", ptx)) == tn * (depth + 1)
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) >= (tn * 2 + 1) * (depth + 1)
    assert len(re.findall(r"ld\.shared\.v4\.u32", ptx)) == tn * 2 + 8  # per group: the weights, A's 4 x 2 chunks
    # one lop3 per (x & m) ^ c (written in C: two LOP3), one fma.rn.f16x2 per fragment register
    assert len(re.findall(r"lop3\.b32 %r\d+, %r\d+, \d+, \d+, 0x6a;", ptx)) == 4 * 4 * tn * 2
    assert len(re.findall(r"fma\.rn\.f16x2", ptx)) == 4 * 4 * tn * 2


def test_ring_tile_program_at_the_bench_shape(tmp_path):
    """hopper_bench's first m16r config (16, 256, 128, 3, 256, "m16r", 8, 1) at 16 x 8192 x 8192 as the tile
    compiler emits it: one kernel, the ring variant's function, 95488 shared bytes; ptxas: no spills, at most
    128 registers (two blocks of 256 threads per SM)."""
    src = _compiled_source(wm.w4a16_m16(16, 8192, 8192, tn=2, wn=8, wk=1, depth=3, split_k=8, workspace=True,
                                        ring=True))
    assert src.count("__global__") == 1
    assert re.search(r"tl_w4m16r_k8192_g128_t2_n8_k1_d3_w8_s8\(&A\[0\], &Wp\[0\], &Sp\[0\], &C\[0\], &red\[0\], 16, "
                     r"8192, \(bx \* 16\), \(by \* 16\), \(bz \* 8\), \(\(2 \* p\) \+ h\), &Wk\[0\], ", src), src[-1500:]
    if not os.access(NVCC, os.X_OK):
        return
    info = ptxas_v(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    assert int(re.search(r"Used (\d+) registers", info).group(1)) <= 128, info


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"group_size=96 must be a multiple of 64"):
        wm.w4a16_m16(16, 256, 768, group_size=96)
    with pytest.raises(ValueError, match=r"N=200 must be a multiple of block_N = 16 \* tn \* wn = 128"):
        wm.w4a16_m16(16, 200, 8192)
    with pytest.raises(ValueError, match=r"split_k \* wk = 4 \* 4 must divide K / group_size = 8"):
        wm.w4a16_m16(16, 256, 1024, split_k=4, wk=4)
    with pytest.raises(ValueError, match=r"W must be uint8 \[N, K/2\] with N % 16 == 0"):
        wm.pack_w4a16_m16(np.zeros((8, 64), np.uint8), np.zeros((8, 1), np.float16))


# ---- the exact imported C++ text on the host: every thread of a block a std::thread, mma.sync a warp-collective
# ---- emulation of the PTX ISA's m16n8k16 fragments, __syncthreads a block barrier (_host_emulation: CUDA_HOST_PRELUDE,
# ---- BLOCK_THREADS, and W4M_HELPERS: the tl_w4m_* helpers on the host)


def _host_main(name, split, M, N, K, gs, tn, wn, wk, depth, S, smem):
    threads = 32 * wn * wk
    wk_args = ", wk.data(), sem.data() + by * 16 * " + str(N // (16 * tn * wn)) + " + bx" if split else ""
    return f"""
int main(int argc, char** argv) {{
  std::vector<unsigned short> a({M} * {K}), sp({N // 16} * {16 * K // gs});
  std::vector<unsigned char> wp({N // 16} * {8 * K});
  std::vector<unsigned short> out({M} * {N});
  std::vector<float> wk({M} * {N}, 0.f);  // the split-K workspace and semaphores: zero before, zero after
  std::vector<int> sem({M} * {N // (16 * tn * wn)}, 0);
  FILE* f = std::fopen(argv[1], "rb");
  if (std::fread(a.data(), 2, a.size(), f) != a.size() || std::fread(wp.data(), 1, wp.size(), f) != wp.size() ||
      std::fread(sp.data(), 2, sp.size(), f) != sp.size()) return 2;
  std::fclose(f);
  std::memset(out.data(), 0, out.size() * sizeof(out[0]));
  std::vector<float> smem({smem // 4});
  for (int bz = 0; bz < {S}; ++bz)
    for (int by = 0; by < {(M + 15) // 16}; ++by)
      for (int bx = 0; bx < {N // (16 * tn * wn)}; ++bx) {{
        std::fill(smem.begin(), smem.end(), 12345.f);  // stale values must not leak into a result
        tl_host_run_block({threads}, [&](int tid) {{
          {name}(a.data(), wp.data(), sp.data(), out.data(), smem.data(), {M}, {N}, bx * {tn * wn}, by * 16,
                 bz * {K // gs // S}, tid{wk_args});
        }});
      }}
  f = std::fopen(argv[2], "wb");
  std::fwrite(out.data(), sizeof(out[0]), out.size(), f);
  std::fclose(f);
  for (float v : wk) if (v != 0.f) return 3;
  for (int v : sem) if (v != 0) return 4;
  return 0;
}}
"""


@pytest.mark.parametrize("M,N,K,gs,tn,wn,wk,depth,S,ring", [
    (16, 64, 1024, 128, 1, 4, 4, 3, 1, False),  # hopper_bench's single-kernel config, a small K
    (9, 128, 1024, 128, 2, 2, 2, 2, 2, False),  # M < 16 (rows >= M zero, not stored), split-K atomics
    (16, 128, 768, 64, 2, 2, 2, 1, 1, False),  # group 64 (one chunk per group), depth 1, 2 blocks
    (5, 32, 2048, 128, 1, 2, 2, 2, 2, False),  # the ring wraps several times (8 groups per warp)
    # ring=True (_source_ring: weights and scale pairs through the per-thread shared ring)
    (16, 128, 2048, 128, 2, 4, 1, 3, 2, True),  # hopper_bench's m16r shape (wk 1), split-K, 8 groups: wraps twice
    (11, 64, 1536, 64, 2, 2, 2, 2, 1, True),  # group 64 (2 copies per thread of 1 activation row), M < 16, wk 2
    (3, 256, 1024, 128, 4, 4, 1, 1, 2, True),  # depth 1 (2 weight slots), 4 tiles per warp
    (16, 64, 2048, 128, 1, 4, 2, 4, 1, True),  # depth 4: half of a warp's 8 groups in flight
    (7, 256, 512, 64, 2, 8, 1, 2, 1, True),  # 128 activation copies for 256 threads (the guarded half)
])
def test_exact_source_runs_on_the_host(tmp_path, M, N, K, gs, tn, wn, wk, depth, S, ring):
    a, w, s, ref = _case(np.random.default_rng(M + N + K), M, N, K, gs)
    wp, sp = wm.pack_w4a16_m16(w, s)
    gw = K // gs // S // wk
    name = "tl_w4m16_host"
    body = (wm._source_ring if ring else wm._source)(name, K, gs, tn, wn, wk, depth, gw, S if S > 1 else 0)
    src = (CUDA_HOST_PRELUDE + BLOCK_THREADS + W4M_HELPERS + wm._DECODE + body +
           _host_main(name, S > 1, M, N, K, gs, tn, wn, wk, depth, S, wm._smem_bytes(gs, tn, wn, wk, depth, ring)))
    r, out_bin = run_block_threads(tmp_path, src, [a.tobytes(), wp.tobytes(), sp.tobytes()])
    assert r.returncode == 0, f"exit {r.returncode} (3: workspace, 4: semaphore not left zero) {r.stderr}"
    out = np.fromfile(out_bin, np.float16).reshape(M, N).astype(np.float64)
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < 2e-3, err  # float32 sums, fp16 output


def _compiled_source(prog):
    use_tl_pack()  # skips without a tl-pack build (the model and host tests above need none)
    return cuda_kernel_source(prog)  # skips without a CUDA compiler


def test_tile_program_at_the_bench_shape(tmp_path):
    """hopper_bench's single-kernel config at 16 x 8192 x 8192: one call per thread with its own slot, the
    tensors passed as global pointers, 512 threads; ptxas: no spills, at most 128 registers (one block of
    512 threads per SM: 3 groups x 32 bytes of weights in flight per thread, 48 KiB per SM)."""
    src = _compiled_source(wm.w4a16_m16(16, 8192, 8192, tn=1, wn=4, wk=4, depth=3, split_k=1))
    assert "__launch_bounds__(512) main_kernel(unsigned short* __restrict__ A, unsigned char* __restrict__ Wp, " \
           "unsigned short* __restrict__ Sp, unsigned short* __restrict__ C)" in src
    call = re.search(r"tl_w4m16_k8192_g128_t1_n4_k4_d3_w16_s1\(&A\[0\], &Wp\[0\], &Sp\[0\], &C\[0\], &red\[0\], 16, "
                     r"8192, \(bx \* 4\), \(by \* 16\), 0, \(\(2 \* p\) \+ h\)\);", src)
    assert call, src[-3000:]
    assert re.search(r"const int tl_row\d+ = \(\(tl_rs\d+ \* 256\) \+ \(tl_tid / 2\)\);", src)  # slot 2 p + h = tid
    if not os.access(NVCC, os.X_OK):
        return
    info = ptxas_v(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    assert int(re.search(r"Used (\d+) registers", info).group(1)) <= 128, info


def test_refused_off_cuda():
    import tilelang
    from tilelang.errors import TileLangError
    use_tl_pack()  # skips without a tl-pack build
    with pytest.raises(TileLangError, match=r"call_extern"):
        tilelang.compile(wm.w4a16_m16(16, 64, 1024, tn=1, wn=4, wk=4, depth=3, split_k=1), target="cpu")


def test_split_k_is_one_kernel():
    """split_k 2 with the caller's workspace: one kernel (no cast kernel), the workspace and the tile's semaphore
    element [16 by, bx] passed to the imported function."""
    src = _compiled_source(wm.w4a16_m16(16, 8192, 8192, tn=1, wn=8, wk=2, depth=4, split_k=2, workspace=True))
    assert src.count("__global__") == 1, src.count("__global__")
    assert "float* __restrict__ Wk, int* __restrict__ Sem)" in src
    assert re.search(r"tl_w4m16_k8192_g128_t1_n8_k2_d4_w16_s2\(&A\[0\], &Wp\[0\], &Sp\[0\], &C\[0\], &red\[0\], 16, "
                     r"8192, \(bx \* 8\), \(by \* 16\), \(bz \* 32\), \(\(2 \* p\) \+ h\), &Wk\[0\], "
                     r"&Sem\[\(\(\(by \* 16\) \* 64\) \+ bx\)\]\);", src), src[-1500:]
