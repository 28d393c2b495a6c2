"""What the CUDA backend makes of the decode W4A16 kernels (kernels/quant_gemm.py w4a16_gemv and
w4a16_mma), checked on the generated CUDA source and, where nvcc is installed, on its PTX for sm_90a --
no GPU needed. The point of both kernels is few instructions per weight byte, which depends on nvcc
merging each thread's run of elements into one shared-memory access:

- the f16 conversions of the CUDA prelude go through libdevice, not inline asm (nvcc does not merge
  loads or stores across an asm statement): no f16 `asm("cvt...` in the source;
- a value cast to f16 and stored to an f16 buffer is converted once (no tl_f2h(tl_rh(...)));
- PTX: 4 weight bytes per thread in one ld.shared.v4.u8, the fp16 weight tile of w4a16_mma stored
  16 bytes at a time (st.shared.v4.u32), one int -> float conversion per weight byte;
- w4a16_gemv_h2 (CUDA only, imported source): 16 weight bytes per row in one ld.shared.v4.u32, 8
  fma.rn.f16x2 per word of 8 weights and no int -> float conversion; its bit operations are checked
  on a numpy model (every byte value, each weight position exactly), the exact imported C++ text runs
  on the host (its three asm helpers replaced by _Float16 code) against float64, and it is refused off CUDA.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_w4a16_cuda_source.py
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
try:
    import tilelang  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "compiler", "python"))
import tilelang  # noqa: E402
from tilelang import toolchain  # noqa: E402

NVCC = os.environ.get("TL_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


@pytest.fixture(scope="module", autouse=True)
def env():
    try:
        os.environ.setdefault("TL_PACK", toolchain.tl_pack_path())
    except Exception as e:  # noqa: BLE001 - no build: skip like the neighbours
        pytest.skip(f"no tl-pack ({e})")
    build = os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build"))
    os.environ.setdefault("TL_CACHE_DIR", os.path.join(build, "tilelang-cache"))


def sm90a_parts(prog):
    """The CUDA source of each compiled variant, by its "// ---- NAME" header (skips without a toolkit)."""
    try:
        src = tilelang.compile(prog, target="cuda").get_kernel_source()
    except Exception as e:  # noqa: BLE001
        if "no CUDA compiler" in str(e):  # NVRTC and nvcc both absent; a failed compile is a failure
            pytest.skip(f"no CUDA toolchain: {e}")
        raise
    return {p.split("\n", 1)[0].strip(): p.split("\n", 1)[1] for p in src.split("// ---- ")[1:]}


def sm90a_source(prog):
    parts = sm90a_parts(prog)
    sm90 = [body for name, body in parts.items() if name.startswith("main_kernel.sm_90a.cu")]
    assert sm90, list(parts)
    return sm90[0]


def ptx_of(source, tmp_path):
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    r = subprocess.run([NVCC, "-arch=sm_90a", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return (tmp_path / "k.ptx").read_text()


def count(ptx, op):
    return len(re.findall(r"^\s*" + re.escape(op) + r"\s", ptx, re.M))


def test_gemv_source_and_ptx(tmp_path):
    from kernels import quant_gemm as qg
    # 64 threads, 16 rows, 128 weights (64 bytes) per k-step: 4 rows x 4 bytes per thread and step
    s = sm90a_source(qg.w4a16_gemv(1, 8192, 8192, block_N=16, block_K=128, threads=64, num_stages=4,
                                   magic_round=True))
    assert 'asm("cvt.f32.f16' not in s and 'asm("cvt.rn.f16.f32' not in s
    assert "12582912.0f" in s  # the rounding constant survives printing (the CPU and CUDA keep the adds)
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "ld.shared.v4.u8") >= 3, "weight bytes not loaded 4 at a time"
    assert count(ptx, "ld.shared.u8") <= 2
    assert count(ptx, "cvt.rn.f32.s16") == 16  # one int -> float conversion per byte (16 bytes per thread)
    assert count(ptx, "ld.shared.v4.f32") >= 4  # a byte's A terms (a0, a1 - 16 a0, -8 a0) in one load


def test_mma_source_and_ptx(tmp_path):
    from kernels import quant_gemm as qg
    s = sm90a_source(qg.w4a16_mma(16, 8192, 8192, block_N=32, num_stages=4, threads=128, magic_round=True))
    assert 'asm("cvt.f32.f16' not in s and 'asm("cvt.rn.f16.f32' not in s
    assert "tl_f2h(tl_rh(" not in s  # T.cast(x, f16) stored to an f16 tile: one conversion
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "ld.shared.v4.u8") == 4 and count(ptx, "ld.shared.u8") == 0
    assert count(ptx, "st.shared.v4.u32") >= 8 and count(ptx, "st.shared.u16") == 0
    assert count(ptx, "cvt.rn.f32.s16") == 16
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 8


# ---- w4a16_gemv_h2 (CUDA only: imported CUDA source) ---------------------------------------------

def _f16_fma(a, b, c):
    """a * b + c on float16 arrays, rounded once (float64 holds the exact value for fp16 operands)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float16)


def _halves(u):
    u = np.asarray(u, np.uint32)
    return (u & 0xFFFF).astype(np.uint16).view(np.float16), (u >> 16).astype(np.uint16).view(np.float16)


def _fma2(a, b, c):  # fma.rn.f16x2 on uint32 arrays
    (al, ah), (bl, bh), (cl, ch) = _halves(a), _halves(b), _halves(c)
    lo, hi = _f16_fma(al, bl, cl), _f16_fma(ah, bh, ch)
    return lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << 16)


def _prmt(x, y, sel):  # __byte_perm
    src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(sel >> (4 * i)) & 0xF] << (8 * i) for i in range(4)).astype(np.uint32)


def _h2_model(A, W, S, group):
    """numpy model of w4a16_gemv_h2's imported per-thread function, bit for bit up to the float32 sums:
    A [M, K] f16, W [N, K/2] uint8, S [N, K/group] f16 -> C [M, N] float64."""
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
            ap = [_prmt(vx, vz, 0x5410), _prmt(vx, vz, 0x7632), _prmt(vy, vw, 0x5410), _prmt(vy, vw, 0x7632)]
            x = words[:, :, i]
            y = x >> np.uint32(8)
            one, m1032 = np.uint32(0x3C003C00), np.uint32(0xE408E408)
            sixteenth, m72 = np.uint32(0x2C002C00), np.uint32(0xD480D480)
            q0 = _fma2((x & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032)
            q1 = _fma2((x & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72)
            q2 = _fma2((y & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032)
            q3 = _fma2((y & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72)
            h0 = _fma2(q0, ap[0][None, :], h0)
            h1 = _fma2(q1, ap[1][None, :], h1)
            h0 = _fma2(q2, ap[2][None, :], h0)
            h1 = _fma2(q3, ap[3][None, :], h1)
        part = sum(h.astype(np.float32) for hh in (h0, h1) for h in _halves(hh))  # [n, chunk] float32
        s = S.astype(np.float32)[:, (np.arange(K // 32) * 32) // group]
        out[m] = (s * part).astype(np.float64).sum(axis=1)
    return out


def test_gemv_h2_decoder_model_matches_float64():
    """The bit operations of w4a16_gemv_h2's imported source (the constants are asserted in the source
    below): every byte value decodes to its two signed nibbles, paired with the right activations."""
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(3)
    M, N, K, group = 2, 24, 512, 128
    A = rng.standard_normal((M, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, group)
    W[0] = np.arange(256, dtype=np.uint8)  # every byte value
    nib = np.stack([W[0] & 15, W[0] >> 4], axis=1).reshape(-1).astype(np.int64)
    q[0] = np.where(nib >= 8, nib - 16, nib)
    S = scales.astype(np.float16)
    ref = qg.quant_matmul_ref(A.astype(np.float64), q, S.astype(np.float64), group)
    got = _h2_model(A, W, S, group)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3  # fp16 products, 8 per half, float32 after
    # a single weight: exact (one product, no fp16 accumulation error)
    A1 = np.zeros((1, K), np.float16)
    for k in (0, 1, 2, 5, 7, 8, 31, 32, 100, 511):
        A1[:] = 0
        A1[0, k] = 1.0
        np.testing.assert_array_equal(_h2_model(A1, W, S, group)[0],
                                      (q[:, k] * S.astype(np.float32)[:, k // group]).astype(np.float32))


@pytest.mark.parametrize("block_N,block_K,threads,rows", [(16, 256, 128, 1), (32, 256, 128, 2), (64, 256, 128, 4),
                                                          (32, 512, 256, 2)])
def test_gemv_h2_source_and_ptx(tmp_path, block_N, block_K, threads, rows):
    from kernels import quant_gemm as qg
    s = sm90a_source(qg.w4a16_gemv_h2(1, 8192, 8192, block_N=block_N, block_K=block_K, threads=threads))
    for const in ("0x64086408u", "0x64806480u", "0x3c003c00u", "0xe408e408u", "0x2c002c00u", "0xd480d480u",
                  "0x000f000fu", "0x00f000f0u", "0x5410", "0x7632"):
        assert const in s, const  # the numpy model's constants
    assert f"tl_w4a16_h2_r{rows}_" in s
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "fma.rn.f16x2") == 32 * rows  # 8 per word: 4 to exact integers, 4 products
    assert count(ptx, "ld.shared.v4.u32") >= rows + 4  # 16 weight bytes per row, 64 bytes of A, 16 at a time
    assert count(ptx, "cvt.rn.f32.s16") == 0 and count(ptx, "ld.shared.u8") == 0  # no int -> float per byte
    assert "ld.local" not in ptx and "st.local" not in ptx


def test_gemv_h2_refused_off_cuda_and_bad_tiles():
    from kernels import quant_gemm as qg
    with pytest.raises(tilelang.TileLangUnimplementedFeature, match=r"calls extern function 'tl_w4a16_h2_r1_\w+', "
                                                                    r"target cpu"):
        tilelang.compile(qg.w4a16_gemv_h2(1, 64, 512), target="cpu")
    with pytest.raises(ValueError, match=r"block_K=96 must be a multiple of 32 dividing K=512"):
        qg.w4a16_gemv_h2(1, 64, 512, block_K=96)
    with pytest.raises(ValueError, match=r"block_N=8 a multiple of threads / 8 = 16"):
        qg.w4a16_gemv_h2(1, 64, 512, block_N=8)
    with pytest.raises(ValueError, match=r"group_size=48 must be a multiple of 32"):
        qg.w4a16_gemv_h2(1, 64, 480, group_size=48)


def _deq32_model(W):
    """numpy model of w4a16_mma(h2_dequant=True)'s imported tl_w4h2_deq32: W [N, 16 m] uint8 -> [N, 32 m] fp16."""
    N = W.shape[0]
    words = np.ascontiguousarray(W).view(np.uint32)  # [N, 4 m]
    one, m1032 = np.uint32(0x3C003C00), np.uint32(0xE408E408)
    sixteenth, m72 = np.uint32(0x2C002C00), np.uint32(0xD480D480)
    x = words
    y = x >> np.uint32(8)
    q04 = _fma2((x & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032)
    q15 = _fma2((x & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72)
    q26 = _fma2((y & np.uint32(0x000F000F)) ^ np.uint32(0x64086408), one, m1032)
    q37 = _fma2((y & np.uint32(0x00F000F0)) ^ np.uint32(0x64806480), sixteenth, m72)
    c = lambda v: v.astype(np.uint64)  # noqa: E731
    out = np.stack([_prmt(c(q04), c(q15), 0x5410), _prmt(c(q26), c(q37), 0x5410),
                    _prmt(c(q04), c(q15), 0x7632), _prmt(c(q26), c(q37), 0x7632)], axis=-1)  # [N, words, 4]
    return out.reshape(N, -1).astype(np.uint32).view(np.float16).reshape(N, -1)


def test_mma_h2_dequant_model_is_exact():
    """Every byte value at every position of a 16-byte run becomes its two signed nibbles, in k order."""
    from kernels import quant_gemm as qg
    W = np.arange(256, dtype=np.uint8).reshape(16, 16)
    W = np.concatenate([W, np.roll(W, 5, axis=1)])
    nib = np.stack([W & 15, W >> 4], axis=-1).reshape(W.shape[0], -1).astype(np.int64)
    np.testing.assert_array_equal(_deq32_model(W).astype(np.int64), np.where(nib >= 8, nib - 16, nib))
    with pytest.raises(ValueError, match=r"h2_dequant needs float16 \(got bfloat16\)"):
        qg.w4a16_mma(16, 64, 512, dtype="bfloat16", h2_dequant=True)


@pytest.mark.parametrize("block_N,threads", [(32, 128), (64, 256)])
def test_mma_h2_source_and_ptx(tmp_path, block_N, threads):
    from kernels import quant_gemm as qg
    s = sm90a_source(qg.w4a16_mma(16, 8192, 8192, block_N=block_N, num_stages=4, threads=threads, h2_dequant=True))
    for const in ("0x64086408u", "0x64806480u", "0xe408e408u", "0xd480d480u", "0x5410", "0x7632"):
        assert const in s, const
    ptx = ptx_of(s, tmp_path)
    calls = block_N * 4 // threads  # 16-byte calls per thread and k-step
    assert count(ptx, "fma.rn.f16x2") == 16 * calls  # 4 per word of 8 weights, to exact integers
    assert count(ptx, "st.shared.v4.u32") >= 4 * calls  # the fp16 tile 16 bytes at a time
    assert count(ptx, "cvt.rn.f32.s16") == 0 and "ld.local" not in ptx
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 8


_HOST_PRELUDE = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
struct uint4 { unsigned x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {  // CUDA's, selector bits 2:0 per byte
  unsigned char in[8];
  std::memcpy(in, &x, 4);
  std::memcpy(in + 4, &y, 4);
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned(in[(s >> (4 * n)) & 7]) << (8 * n);
  return r;
}
static inline _Float16 h16(unsigned bits) { unsigned short b = bits & 0xffff; _Float16 f; std::memcpy(&f, &b, 2); return f; }
static inline unsigned b16(_Float16 f) { unsigned short b; std::memcpy(&b, &f, 2); return b; }
// fma.rn.f16x2: the exact a * b + c of fp16 operands fits a double; one rounding to fp16
static inline unsigned tl_w4h2_fma(unsigned a, unsigned b, unsigned c) {
  auto f = [](unsigned x, unsigned y, unsigned z) { return b16((_Float16)((double)h16(x) * (double)h16(y) + (double)h16(z))); };
  return f(a, b, c) | (f(a >> 16, b >> 16, c >> 16) << 16);
}
static inline float tl_w4h2_sum(unsigned v) { return (float)h16(v) + (float)h16(v >> 16); }
static inline float tl_w4h2_h2f(unsigned short v) { return (float)h16(v); }
"""


def _host_run(tmp_path, source, main, inputs):
    """Compiles `source` (CUDA text of the kernels above, without its asm helpers) with the host prelude
    and `main`, runs it on the byte strings `inputs` (stdin), returns stdout bytes."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no host C++ compiler")
    cc = tmp_path / "h2_host.cc"
    cc.write_text(_HOST_PRELUDE + source + main)
    exe = tmp_path / "h2_host"
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-o", str(exe), str(cc)], capture_output=True, text=True)
    if r.returncode != 0 and "_Float16" in r.stderr:
        pytest.skip(f"{cxx} has no _Float16")
    assert r.returncode == 0, r.stderr[-3000:]
    p = subprocess.run([str(exe)], input=b"".join(inputs), capture_output=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


@pytest.mark.parametrize("block_N,block_K,threads", [(16, 256, 128), (32, 256, 128), (32, 512, 256)])
def test_gemv_h2_source_runs_on_the_host(tmp_path, block_N, block_K, threads):
    """The exact C++ text w4a16_gemv_h2 imports (its three asm helpers replaced by host fp16 code), driven
    with the tile program's slot mapping over a whole [N, K] problem, against float64."""
    from kernels import quant_gemm as qg
    N, K, group = 64, 1024, 128
    chunks, nbytes = block_K // 32, block_K // 2
    rstride = threads // chunks
    rows, groups = block_N // rstride, K // group
    name = "h2dot"
    src = qg._w4h2_source(name, rows, rstride * nbytes, rstride * groups, threads)[len(qg._W4H2_HELPERS):]
    main = f"""
int main() {{
  const int N = {N}, K = {K}, BN = {block_N}, BK = {block_K}, NB = {nbytes}, CH = {chunks}, RS = {rstride}, G = {groups};
  std::vector<unsigned short> A(K), S(N * G);
  std::vector<unsigned char> W(N * K / 2);
  if (fread(A.data(), 2, K, stdin) != (size_t)K || fread(W.data(), 1, W.size(), stdin) != W.size() ||
      fread(S.data(), 2, S.size(), stdin) != S.size()) return 2;
  std::vector<float> C(N);
  for (int bx = 0; bx < N / BN; ++bx) {{
    std::vector<float> acc({rows} * {threads}, 0.f);
    std::vector<unsigned short> S_all(BN * G);
    for (int n = 0; n < BN; ++n) for (int g = 0; g < G; ++g) S_all[n * G + g] = S[(bx * BN + n) * G + g];
    for (int k = 0; k < K / BK; ++k) {{
      std::vector<unsigned char> W_s(BN * NB);  // the k-step's tiles, as the TMA copies place them
      for (int n = 0; n < BN; ++n) std::memcpy(&W_s[n * NB], &W[(bx * BN + n) * (K / 2) + k * NB], NB);
      const unsigned short* A_s = &A[k * BK];
      for (int t = 0; t < {threads}; ++t)  // the T.Parallel slot t = 2 p + h
        {name}(&W_s[(t / CH) * NB + (t % CH) * 16], &A_s[(t % CH) * 32], &S_all[(t / CH) * G + (k * BK + (t % CH) * 32) / {group}],
               &acc[t]);
    }}
    for (int n = 0; n < BN; ++n) {{
      float r = 0.f;
      for (int c = 0; c < CH; ++c) r += acc[(n / RS) * {threads} + (n % RS) * CH + c];
      C[bx * BN + n] = r;
    }}
  }}
  fwrite(C.data(), 4, N, stdout);
  return 0;
}}
"""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((1, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, group)
    W[0, :256] = np.arange(256, dtype=np.uint8)
    nib = np.stack([W[0] & 15, W[0] >> 4], axis=1).reshape(-1).astype(np.int64)
    q[0] = np.where(nib >= 8, nib - 16, nib)
    S = scales.astype(np.float16)
    out = _host_run(tmp_path, src, main, [A.tobytes(), np.ascontiguousarray(W).tobytes(), S.tobytes()])
    got = np.frombuffer(out, np.float32).astype(np.float64)
    ref = qg.quant_matmul_ref(A.astype(np.float64), q, S.astype(np.float64), group)[0]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3
    np.testing.assert_allclose(got, _h2_model(A, W, S, group)[0], rtol=1e-5, atol=1e-5)  # the numpy model agrees


def test_mma_h2_dequant_source_runs_on_the_host(tmp_path):
    """The exact C++ text of w4a16_mma(h2_dequant=True)'s tl_w4h2_deq32 on the host: every byte value at
    every position of a 16-byte run decodes to its two signed nibbles in k order."""
    from kernels import quant_gemm as qg
    src = qg._W4H2_DEQUANT[len(qg._W4H2_HELPERS):]
    W = np.arange(256, dtype=np.uint8).reshape(16, 16)
    W = np.concatenate([W, np.roll(W, 5, axis=1), np.roll(W, 11, axis=0)])
    main = f"""
int main() {{
  unsigned char w[{W.size}];
  if (fread(w, 1, sizeof w, stdin) != sizeof w) return 2;
  for (int r = 0; r < {W.shape[0]}; ++r) {{
    alignas(16) unsigned short out[32];
    alignas(16) unsigned char row[16];
    std::memcpy(row, w + 16 * r, 16);
    tl_w4h2_deq32(row, out);
    fwrite(out, 2, 32, stdout);
  }}
  return 0;
}}
"""
    out = np.frombuffer(_host_run(tmp_path, src, main, [W.tobytes()]), np.float16).reshape(W.shape[0], 32)
    nib = np.stack([W & 15, W >> 4], axis=-1).reshape(W.shape[0], -1).astype(np.int64)
    np.testing.assert_array_equal(out.astype(np.int64), np.where(nib >= 8, nib - 16, nib))


@pytest.mark.parametrize("M,N,K", [(16, 64, 512), (5, 96, 1024)])
def test_mma_two_groups_per_step_matches_float64(M, N, K):
    """w4a16_mma(groups_per_step=2) on the CPU (the float dequantization; the tile program is the same for
    h2_dequant but for the extern call): two groups' tiles and accumulators per k-step, each scaled by its
    own group scale."""
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(5)
    k = tilelang.compile(qg.w4a16_mma(M, N, K, block_N=32, num_stages=3, threads=128, groups_per_step=2),
                         out_idx=[3], target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, 128)
    s = scales.astype(np.float16)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s.astype(np.float64), 128)
    got = np.asarray(k(a, W, s), np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-3  # fp16 output rounding
    with pytest.raises(ValueError, match=r"groups_per_step=3 must be 1 or 2"):
        qg.w4a16_mma(M, N, K, groups_per_step=3)


def test_mma_h2_two_groups_per_step_ptx(tmp_path):
    from kernels import quant_gemm as qg
    s = sm90a_source(qg.w4a16_mma(16, 8192, 8192, block_N=32, num_stages=4, threads=128, h2_dequant=True,
                                  groups_per_step=2))
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "fma.rn.f16x2") == 32  # two 16-byte calls per thread and k-step
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 16  # two k=128 gemms
    assert "ld.local" not in ptx


@pytest.mark.parametrize("block_N,gps,split", [(32, 2, 4), (64, 2, 8), (32, 1, 2)])
def test_mma_h2_split_k_source_and_ptx(tmp_path, block_N, gps, split):
    """w4a16_mma(h2_dequant=True, split_k=S, workspace=True), hopper_bench's split configs at M=16, N=K=8192:
    main_k0 walks its own 64 / S groups (TMA coordinates offset by bz * 64 / S groups, the scales of its
    groups only) and adds its float32 tile into the workspace as f32x2 vector atomics (no 16-bit rounding);
    main_k1 rounds the workspace into C and writes zeros back, 16 bytes at a time."""
    from kernels import quant_gemm as qg
    parts = sm90a_parts(qg.w4a16_mma(16, 8192, 8192, block_N=block_N, num_stages=4, threads=128, h2_dequant=True,
                                     groups_per_step=gps, split_k=split, workspace=True))
    k0 = parts["main_k0.sm_90a.cu"]
    groups = 64 // split
    assert f"(bz * {groups})" in k0 and f"tl_tma_load_2d(&W_s1[0], &tl_tmap1" in k0
    assert re.search(r"S_all\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&Scales\[[^;]*\(bz \* " + str(groups), k0)
    assert re.search(r"tl_atomic_add_f32x2\(&Wk\[[^;]*\], \(float\)\(C_f\[", k0)
    k1 = parts.get("main_k1.sm_90a.cu") or parts["main_k1.cu"]
    assert re.search(r"\*reinterpret_cast<tl_v16\*>\(&w_s\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&Wk\[", k1)
    assert re.search(r"C\[[^;]*\] = tl_f2h\(\(\(float\)\(w_s\[", k1)
    assert re.search(r"\*reinterpret_cast<tl_v16\*>\(&Wk\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&z_s\[", k1)
    ptx = ptx_of(k0, tmp_path)
    calls = block_N * 4 // 128  # 16-byte dequantization calls per thread and group
    assert count(ptx, "fma.rn.f16x2") == 16 * calls * gps
    # every accumulator element in exactly one pair: 16 * block_N / 128 threads / 2 vector atomics per thread
    assert len(re.findall(r"red\.global\.add\.v2\.f32", ptx)) == 16 * block_N // 128 // 2
    assert not re.search(r"(atom|red)\.global\.add\.f32", ptx)
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 8 * gps
    assert "ld.local" not in ptx


# ---- w4a16_wgmma (the weights decoded into wgmma's register operand A) -------------------------------

@pytest.mark.parametrize("M,N,K,block_M,block_N,split,permute", [(16, 128, 512, 16, 64, 1, False),
                                                                 (5, 128, 1024, 16, 128, 2, False),
                                                                 (1, 64, 512, 8, 64, 4, False),
                                                                 (5, 128, 1024, 16, 64, 2, True)])
def test_wgmma_matches_float64_on_the_cpu(M, N, K, block_M, block_N, split, permute):
    """w4a16_wgmma's tile program on the CPU (the same program the sm_90a lowering takes; the exact sm_90a
    lowering runs in the SIMT interpreter in tests/compiler/gpu_lowering/w4a16_wgmma_test.cc): C^T = W A^T
    with per-group scales on the accumulator, stored transposed, split-K through the workspace (left zero
    by each call, so a second call gives the same C)."""
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(M + K + split)
    k = tilelang.compile(qg.w4a16_wgmma(M, N, K, block_M=block_M, block_N=block_N, num_stages=3, magic_round=True,
                                        split_k=split, workspace=split > 1, permute_k=permute), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, 128)
    W[0, :256] = np.arange(256, dtype=np.uint8)  # every byte value
    nib = np.stack([W[0] & 15, W[0] >> 4], axis=1).reshape(-1).astype(np.int64)
    q[0] = np.where(nib >= 8, nib - 16, nib)
    s = scales.astype(np.float16)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s.astype(np.float64), 128)
    for _ in range(2):
        c = np.full((M, N), np.nan, np.float16)
        args = [a, W, s, c] + ([np.zeros((M, N), np.float32)] if split > 1 else [])
        k(*args)
        got = c.astype(np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-3  # fp16 output rounding
        if split > 1:
            assert not args[4].any()  # the cast kernel wrote the workspace back to zero


def test_wgmma_bad_arguments_are_named():
    from kernels import quant_gemm as qg
    with pytest.raises(ValueError, match=r"w4a16_wgmma: block_N=32 must be a positive multiple of 64"):
        qg.w4a16_wgmma(16, 64, 512, block_N=32)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: threads=256 must be 2 \* block_N = 128"):
        qg.w4a16_wgmma(16, 64, 512, threads=256)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: block_M=12 must be a multiple of 8"):
        qg.w4a16_wgmma(16, 64, 512, block_M=12)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: split_k=3 must be a positive int dividing K / group_size = 4"):
        qg.w4a16_wgmma(16, 64, 512, split_k=3)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: dtype must be float16 or bfloat16"):
        qg.w4a16_wgmma(16, 64, 512, dtype="float32")


@pytest.mark.parametrize("block_M,block_N,split,permute", [(16, 64, 1, False), (16, 128, 4, False), (8, 64, 4, False),
                                                           (16, 64, 4, True)])
def test_wgmma_source_and_ptx(tmp_path, block_M, block_N, split, permute):
    """hopper_bench's w4a16_wgmma configs at N = K = 8192: wgmma.mma_async m64n{block_M}k16 with the four A
    registers packed from the register array W_f (no shared tile of dequantized weights: the only shared
    stores are the scales' staging), one weight byte load and int -> float conversion per pair of weights,
    the weights packed from float32 registers (no f16 round trip each), no local memory."""
    from kernels import quant_gemm as qg
    parts = sm90a_parts(qg.w4a16_wgmma(16, 8192, 8192, block_M=block_M, block_N=block_N, num_stages=4,
                                       magic_round=True, split_k=split, workspace=split > 1, permute_k=permute))
    s = parts["main_kernel.sm_90a.cu" if split == 1 else "main_k0.sm_90a.cu"]
    assert f"float W_q[{block_N * 128 // (2 * block_N)}]" in s  # 64 weights per thread and group
    assert "W_q = reinterpret_cast" not in s and "W_f[" not in s  # the f16 copy W_f forwarded: W_q packed
    assert f"wgmma.mma_async.sync.aligned.m64n{block_M}k16.f32.f16.f16" in s
    assert '"r"(tl_ra[0]), "r"(tl_ra[1]), "r"(tl_ra[2]), "r"(tl_ra[3])' in s
    assert "tl_pack_f16x2(W_q[" in s
    if split > 1:
        assert re.search(r"atomicAdd\(&Wk\[[^;]*\], Ct\[", s)  # float32 atomics of the accumulator
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.f16.f16" % block_M) == 8  # k = 128: 8 k-steps
    assert count(ptx, "cvt.rn.f16x2.f32") == 32  # 64 weights, packed in pairs
    assert count(ptx, "cvt.rn.f32.s16") == 32  # one int -> float conversion per weight byte (32 per group)
    if permute:
        # permute_k: a lane's weights of a row are one 16-byte run: two 16-byte loads per thread and group
        # (rows r and r + 8), no byte loads (those are 4-way bank conflicts: bytes 4 apart in 64-byte rows)
        assert count(ptx, "ld.shared.v4.u32") == 2 and count(ptx, "ld.shared.u8") == 0
        assert count(ptx, "cvt.rn.f16.f32") <= 32  # + the permuted copy of A (16 elements per thread)
    else:
        # both weights of a byte from one shared load: the layout loop's column is base | (slot % 2), so
        # nvcc sees (j >> 1) as one index for both
        assert count(ptx, "ld.shared.u8") == 32
        # no fp16 weight tile: the only shared stores are the scales' staging before the k loop
        assert count(ptx, "st.shared.u16") == 0 and count(ptx, "st.shared.b16") == 0
        assert len(re.findall(r"^\s*st\.shared", ptx, re.M)) <= 8
        assert count(ptx, "cvt.rn.f16.f32") <= 16  # no f16 round trip per weight (the scales' and C's only)
    assert "ld.local" not in ptx and "st.local" not in ptx
