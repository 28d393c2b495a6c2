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
import re

import numpy as np
import pytest

from _helpers import count, cuda_kernel_source, ptx_of, source_parts  # sys.path: the repo root, tilelang
from _host_emulation import (CUDA_HOST_PRELUDE, W4H2_HELPERS, byte_perm, decode_w4_f16x2,  # host stand-ins, models
                             put_every_byte_value, run_host, signed_nibbles, w4a16_h2_model)
import tilelang  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build


def sm90a_parts(prog):
    """The CUDA source of each compiled variant, by its "// ---- NAME" header (skips without a CUDA compiler)."""
    return source_parts(cuda_kernel_source(prog))


def sm90a_source(prog):
    parts = sm90a_parts(prog)
    sm90 = [body for name, body in parts.items() if name.startswith("main_kernel.sm_90a.cu")]
    assert sm90, list(parts)
    return sm90[0]


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

def test_gemv_h2_decoder_model_matches_float64():
    """The bit operations of w4a16_gemv_h2's imported source (the constants are asserted in the source
    below): every byte value decodes to its two signed nibbles, paired with the right activations."""
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(3)
    M, N, K, group = 2, 24, 512, 128
    A = rng.standard_normal((M, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, group)
    put_every_byte_value(W, q, 0)  # K / 2 = 256 bytes: the whole row
    S = scales.astype(np.float16)
    ref = qg.quant_matmul_ref(A.astype(np.float64), q, S.astype(np.float64), group)
    got = w4a16_h2_model(A, W, S, group)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3  # fp16 products, 8 per half, float32 after
    # a single weight: exact (one product, no fp16 accumulation error)
    A1 = np.zeros((1, K), np.float16)
    for k in (0, 1, 2, 5, 7, 8, 31, 32, 100, 511):
        A1[:] = 0
        A1[0, k] = 1.0
        np.testing.assert_array_equal(w4a16_h2_model(A1, W, S, group)[0],
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
    q04, q15, q26, q37 = decode_w4_f16x2(words)
    c = lambda v: v.astype(np.uint64)  # noqa: E731
    out = np.stack([byte_perm(c(q04), c(q15), 0x5410), byte_perm(c(q26), c(q37), 0x5410),
                    byte_perm(c(q04), c(q15), 0x7632), byte_perm(c(q26), c(q37), 0x7632)], axis=-1)  # [N, words, 4]
    return out.reshape(N, -1).astype(np.uint32).view(np.float16).reshape(N, -1)


def test_mma_h2_dequant_model_is_exact():
    """Every byte value at every position of a 16-byte run becomes its two signed nibbles, in k order."""
    from kernels import quant_gemm as qg
    W = np.arange(256, dtype=np.uint8).reshape(16, 16)
    W = np.concatenate([W, np.roll(W, 5, axis=1)])
    np.testing.assert_array_equal(_deq32_model(W).astype(np.int64), signed_nibbles(W))
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


def _host_run(tmp_path, source, main, inputs):
    """Compiles `source` (CUDA text of the kernels above, without its asm helpers) with the host stand-ins
    (_host_emulation: CUDA_HOST_PRELUDE, W4H2_HELPERS) and `main`, runs it on the byte strings `inputs` (stdin),
    returns stdout bytes (skips without a host C++ compiler with _Float16)."""
    return run_host(tmp_path, CUDA_HOST_PRELUDE + W4H2_HELPERS + source + main, inputs)


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
    put_every_byte_value(W, q, 0)
    S = scales.astype(np.float16)
    out = _host_run(tmp_path, src, main, [A.tobytes(), np.ascontiguousarray(W).tobytes(), S.tobytes()])
    got = np.frombuffer(out, np.float32).astype(np.float64)
    ref = qg.quant_matmul_ref(A.astype(np.float64), q, S.astype(np.float64), group)[0]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3
    np.testing.assert_allclose(got, w4a16_h2_model(A, W, S, group)[0], rtol=1e-5, atol=1e-5)  # the numpy model agrees


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
    np.testing.assert_array_equal(out.astype(np.int64), signed_nibbles(W))


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
    put_every_byte_value(W, q, 0)
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
