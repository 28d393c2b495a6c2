"""W4A16 prefill (issue #11, M = 128): kernels/quant_gemm.py w4a16_wgmma(scale_weights=True[, packed_k=True])
and pack_w4a16_wgmma, without a GPU.

- numerics: the tile program on the CPU against float64 with the weights rounded to the activation dtype
  (dtype(q * s), the bench's reference: the pack into wgmma's registers rounds q * s once), every byte value,
  fp16 and bf16, partial row/column tiles, split-K (the workspace left zero by every call);
- exactness: a one-hot A reads single weights back: C == dtype(q * s) bit for bit;
- pack_w4a16_wgmma: a byte permutation within each group row that puts lane t's weights (fragment column pairs
  2 t + 8 h + 16 s) in bytes [t * group / 8, (t + 1) * group / 8);
- the sm_90a source / PTX / ptxas of hopper_bench's prefill configs: warp-specialized (a TMA producer warpgroup,
  no block barrier in the consumers' k-loop, every consumer thread releasing a stage), register-A wgmma
  m64n{block_M}k16 (8 per group), one accumulator (no C^T_k, no rescale), two 16-byte shared loads of weights per
  thread and group with packed_k, no spills or local memory;
- the bench wiring (kinds "wgmma_s" / "wgmma_sp": the repacked weights passed to "wgmma_sp");
- bad arguments are refused naming the argument.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_w4a16_prefill.py
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
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
try:
    import tilelang  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "compiler", "python"))
import tilelang  # noqa: E402
from tilelang import toolchain  # noqa: E402

from kernels import quant_gemm as qg  # noqa: E402
from kernels._util import as_f64, from_bf16_bits, to_bf16_bits  # noqa: E402

NVCC = os.environ.get("TL_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


@pytest.fixture(scope="module")
def env():
    try:
        os.environ.setdefault("TL_PACK", toolchain.tl_pack_path())
    except Exception as e:  # noqa: BLE001 - no build: skip like the neighbours
        pytest.skip(f"no tl-pack ({e})")
    build = os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build"))
    os.environ.setdefault("TL_CACHE_DIR", os.path.join(build, "tilelang-cache"))


def _weights(rng, N, K, group):
    """Packed W (quant_matmul's layout) with every byte value in its first rows, the integer weights, float64 scales."""
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, group)
    rows = -(-256 // W.shape[1])  # every byte value, over the first rows
    W[:rows].reshape(-1)[:256] = np.arange(256, dtype=np.uint8)
    nib = np.stack([W[:rows] & 15, W[:rows] >> 4], axis=2).reshape(rows, -1).astype(np.int64)
    q[:rows] = np.where(nib >= 8, nib - 16, nib)
    return W, scales, q


def _dtype_arrays(dtype, a, s):
    """(A, Scales) as the kernel takes them, their exact float64 values and the rounding to dtype."""
    if dtype == "bfloat16":
        ab, sb = to_bf16_bits(a), to_bf16_bits(s)

        def rnd(w):
            return from_bf16_bits(to_bf16_bits(w)).astype(np.float64)
        return ab, sb, as_f64(ab, dtype), as_f64(sb, dtype), rnd
    a16, s16 = a.astype(np.float16), s.astype(np.float16)
    return a16, s16, a16.astype(np.float64), s16.astype(np.float64), lambda w: w.astype(np.float16).astype(np.float64)


def _out(M, N, dtype):
    return np.full((M, N), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((M, N), np.nan, np.float16)


@pytest.mark.parametrize("M,N,K,block_M,block_N,split,packed,dtype", [
    (128, 128, 512, 128, 64, 2, True, "float16"),    # the bench's 128x64 split-2 shape, scaled down
    (77, 192, 512, 128, 128, 1, True, "float16"),    # M < block_M, N not a multiple of block_N
    (130, 128, 1024, 64, 128, 4, False, "float16"),  # two row blocks, the second partial; natural packing
    (40, 128, 512, 32, 64, 2, True, "bfloat16"),
])
def test_prefill_matches_float64_on_the_cpu(env, M, N, K, block_M, block_N, split, packed, dtype):
    rng = np.random.default_rng(M + N + K + split)
    k = tilelang.compile(qg.w4a16_wgmma("M", N, K, dtype=dtype, block_M=block_M, block_N=block_N, num_stages=3,
                                        magic_round=True, split_k=split, workspace=split > 1, scale_weights=True,
                                        packed_k=packed), target="cpu")
    W, scales, q = _weights(rng, N, K, 128)
    a, s, a64, s64, rnd = _dtype_arrays(dtype, rng.standard_normal((M, K)), scales)
    ref = qg.quant_matmul_ref(a64, q, s64, 128, rnd)
    unrounded = qg.quant_matmul_ref(a64, q, s64, 128)
    wk = np.zeros((M, N), np.float32)
    for _ in range(2):
        c = _out(M, N, dtype)
        k(a, qg.pack_w4a16_wgmma(W) if packed else W, s, c, *([wk] if split > 1 else []))
        got = as_f64(c, dtype)
        assert np.isfinite(got).all()
        # float32 accumulation, one rounding of C to dtype
        tol = 8e-3 if dtype == "bfloat16" else 1e-3
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < tol
        assert not wk.any()  # the cast kernel wrote the workspace back to zero
    if dtype == "bfloat16":
        # the weights ARE rounded to bf16 (8-bit significands): closer to the rounded reference than to q * s
        assert np.linalg.norm(got - ref) < np.linalg.norm(got - unrounded)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prefill_reads_back_the_rounded_weights_exactly(env, dtype):
    """A one-hot row of A picks one weight per output: C[m, n] = dtype(q[n, k_m] * s[n, g]) exactly (one product
    in float32, then C's rounding of a value already in dtype) -- every position of a group (the fragment's
    column pairs and the packed byte order), every byte value, scales that make q * s round."""
    rng = np.random.default_rng(7)
    N, K = 64, 256
    W, scales, q = _weights(rng, N, K, 128)
    i = np.arange(128)
    ks = 2 * i + i % 2  # 128 distinct positions over both groups, both nibbles, every lane's run
    M = len(ks)
    a = np.zeros((M, K))
    a[np.arange(M), ks] = 1.0
    a, s, a64, s64, rnd = _dtype_arrays(dtype, a, scales)
    k = tilelang.compile(qg.w4a16_wgmma(M, N, K, dtype=dtype, block_M=128, block_N=64, num_stages=2,
                                        magic_round=True, scale_weights=True, packed_k=True), target="cpu")
    c = _out(M, N, dtype)
    k(a, qg.pack_w4a16_wgmma(W), s, c)
    want = rnd(q[:, ks].T * s64[:, ks // 128].T)
    np.testing.assert_array_equal(as_f64(c, dtype), want)
    assert (want != q[:, ks].T * s64[:, ks // 128].T).any()  # the rounding of q * s was exercised


def test_pack_puts_each_lanes_weights_in_one_run():
    rng = np.random.default_rng(3)
    for group in (32, 64, 128, 256):
        N, K = 8, 4 * group
        W = rng.integers(0, 256, size=(N, K // 2), dtype=np.uint8)
        P = qg.pack_w4a16_wgmma(W, group)
        assert P.shape == W.shape and P.dtype == np.uint8
        nb = group // 2
        for g in range(K // group):
            # the same bytes per group row, permuted (nibbles untouched)
            assert (np.sort(P[:, g * nb:(g + 1) * nb], axis=1) == np.sort(W[:, g * nb:(g + 1) * nb], axis=1)).all()
            for j in range(0, group, 2):  # fragment column pair j = 16 s + 8 h + 2 t
                t = (j >> 1) & 3
                pos = ((j >> 1) & 3) * (group // 8) + (j >> 4) * 2 + ((j >> 3) & 1)
                assert t * (group // 8) <= pos < (t + 1) * (group // 8)  # lane t's run
                assert (P[:, g * nb + pos] == W[:, g * nb + j // 2]).all()


def test_pingpong_source(env):
    """pingpong=True (bench kind "wgmma_spp"): in the consumers' k-loop warpgroup 0 waits for its turn on named
    barrier 2 (not at the first k-step), warpgroup 1 on 3; the group's wgmmas are issued and committed, then
    the turn is handed over (bar.arrive on the other's barrier) before the wgmma.wait_group."""
    s = _sm90a_source(qg.w4a16_wgmma(128, 8192, 8192, block_M=128, block_N=128, num_stages=4, magic_round=True,
                                     split_k=2, workspace=True, scale_weights=True, packed_k=True, pingpong=True))
    loop = s.split("// consumers", 1)[1].split("for (int k = ", 1)[1]
    s2, s3 = loop.index("bar.sync 2, 256;"), loop.index("bar.sync 3, 256;")
    issue = loop.index("wgmma.mma_async", s3)
    commit = loop.index("wgmma.commit_group", issue)
    a3, a2 = loop.index("bar.arrive 3, 256;", commit), loop.index("bar.arrive 2, 256;", commit)
    wait = loop.index("wgmma.wait_group", a2)
    assert s2 < s3 < issue < commit < a3 < a2 < wait
    assert loop.index("W_s[") < s2  # the decode (the weight bytes read from the stage) before the turn


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"w4a16_wgmma: packed_k needs group_size a multiple of 32 and no "
                                         r"permute_k, got group_size=16, permute_k=False"):
        qg.w4a16_wgmma(16, 64, 512, group_size=16, packed_k=True)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: packed_k needs .* got group_size=128, permute_k=True"):
        qg.w4a16_wgmma(16, 64, 512, packed_k=True, permute_k=True)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: pingpong needs block_N=128 \(two consumer warpgroups take "
                                         r"turns\), got block_N=64"):
        qg.w4a16_wgmma(128, 64, 512, block_M=128, block_N=64, scale_weights=True, pingpong=True)
    with pytest.raises(ValueError, match=r"w4a16_wgmma: split_k=3 must be a positive int dividing K / group_size = 4"):
        qg.w4a16_wgmma(128, 64, 512, block_M=128, split_k=3, scale_weights=True)
    with pytest.raises(ValueError, match=r"pack_w4a16_wgmma: W must be a 2-D uint8 array \[N, K/2\], got int8"):
        qg.pack_w4a16_wgmma(np.zeros((4, 64), np.int8))
    with pytest.raises(ValueError, match=r"pack_w4a16_wgmma: group_size=48 must be a multiple of 32"):
        qg.pack_w4a16_wgmma(np.zeros((4, 64), np.uint8), 48)
    with pytest.raises(ValueError, match=r"pack_w4a16_wgmma: group_size=128 .* W's 96 bytes per row"):
        qg.pack_w4a16_wgmma(np.zeros((4, 96), np.uint8), 128)


def test_bench_kinds_pass_the_repacked_weights(env):
    """hopper_bench's "wgmma_sp" configs get pack_w4a16_wgmma(W) (made once per case, outside the timing),
    "wgmma_s" the plain W; both checked against the bench's float64 reference on the CPU device."""
    import hopper_bench as hb
    be = hb.NumpyBackend()
    cfgs = [(128, 64, 128, 2, 128, "wgmma_sp", 2), (128, 64, 128, 2, 128, "wgmma_s"),
            (64, 128, 128, 2, 256, "wgmma_spp")]
    case = hb.w4_case(128, 128, 512, cfgs)
    x = case.make(be, np.random.default_rng(5))
    x["_be"] = be
    for cfg in cfgs:
        assert hb.fits(case, cfg)
        k, _ = hb.compile_case(case, cfg, "cpu")
        out = be.nan(*case.out_spec)
        args = case.args(x, out, cfg)
        packed = cfg[5] in ("wgmma_sp", "wgmma_spp")
        assert (args[1] is x["W"]) != packed
        if packed:
            assert (args[1] == qg.pack_w4a16_wgmma(x["W"])).all()
        k(*args)
        assert case.check(be, x, out) < 1e-3
    assert any(c[5] == "wgmma_sp" for c in hb.W4_CONFIGS_PREFILL)
    full = hb.w4_case(128, hb.W4_NK, hb.W4_NK, hb.W4_CONFIGS_PREFILL)
    assert all(hb.fits(full, c) for c in hb.W4_CONFIGS_PREFILL if c[5] in ("wgmma_s", "wgmma_sp", "wgmma_spp"))


# ---- the sm_90a variant ------------------------------------------------------------------------------------

def _sm90a_source(prog):
    try:
        src = tilelang.compile(prog, target="cuda").get_kernel_source()
    except Exception as e:  # noqa: BLE001
        if "no CUDA compiler" in str(e):  # NVRTC and nvcc both absent; a failed compile is a failure
            pytest.skip(f"no CUDA toolchain: {e}")
        raise
    parts = {p.split("\n", 1)[0].strip(): p.split("\n", 1)[1] for p in src.split("// ---- ")[1:]}
    sm90 = [body for name, body in parts.items() if ".sm_90a.cu" in name and name.startswith(("main_kernel", "main_k0"))]
    assert sm90, list(parts)
    return sm90[0]


def _count(ptx, op):
    return len(re.findall(r"^\s*" + re.escape(op) + r"[\s.]", ptx, re.M))


@pytest.mark.parametrize("block_M,block_N,stages,split,packed", [(128, 128, 4, 2, True), (128, 64, 2, 2, True),
                                                                 (128, 64, 4, 1, True), (128, 128, 4, 2, False)])
def test_prefill_source_ptx_and_registers(env, tmp_path, block_M, block_N, stages, split, packed):
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    s = _sm90a_source(qg.w4a16_wgmma(128, 8192, 8192, block_M=block_M, block_N=block_N, num_stages=stages,
                                     magic_round=True, split_k=split, workspace=split > 1, scale_weights=True,
                                     packed_k=packed))
    per_thread = block_M * block_N // (2 * block_N)  # accumulator slots per thread (64 rows per warpgroup)
    assert f"float Ct[{per_thread}]" in s and "Ct_k" not in s  # one accumulator, no per-group product
    assert f"wgmma.mma_async.sync.aligned.m64n{block_M}k16.f32.f16.f16" in s
    assert '"r"(tl_ra[0]), "r"(tl_ra[1]), "r"(tl_ra[2]), "r"(tl_ra[3])' in s  # register operand A
    assert "tl_pack_f16x2(W_q[" in s  # q * s packed from float32: one rounding per weight
    # warp-specialized (WarpSpecializeSyncLoop): a TMA producer warpgroup, the consumers with more registers and
    # no block barrier in the k-loop; every consumer thread releases a stage (it loads the weight bytes from it)
    assert "setmaxnreg.dec.sync.aligned.u32 40" in s and "setmaxnreg.inc.sync.aligned.u32" in s
    assert re.search(r"tl_mbar_init\(&tl_mbar\d+_empty\[tl_i\], %d\)" % (2 * block_N), s)  # T arrivals
    loop = s[s.index("// consumers"):]
    assert "__syncthreads" not in loop
    cu = tmp_path / "k.cu"
    cu.write_text(s)
    r = subprocess.run([NVCC, "-arch=sm_90a", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ptx = (tmp_path / "k.ptx").read_text()
    assert _count(ptx, "wgmma.mma_async") == 8  # one group (k = 128) per k-step: 8 m64nNk16, in one unit
    assert _count(ptx, "wgmma.wait_group") == 1
    assert _count(ptx, "cvt.rn.f16x2.f32") == 32  # 64 weights per thread and group, packed in pairs
    assert _count(ptx, "cvt.rn.f32.s16") == 32  # one int -> float conversion per weight byte
    if packed:
        assert _count(ptx, "ld.shared.v4.u32") == 2 and _count(ptx, "ld.shared.u8") == 0  # rows r and r + 8
    else:
        assert _count(ptx, "ld.shared.u8") == 32
    assert "ld.local" not in ptx and "st.local" not in ptx
    r = subprocess.run([NVCC, "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
    bounds = re.search(r"__launch_bounds__\((\d+), (\d+)\)", s)
    assert bounds, "not warp-specialized: no __launch_bounds__(threads, blocks)"
    threads, blocks = int(bounds.group(1)), int(bounds.group(2))
    assert threads == 2 * block_N + 128  # the consumers + one TMA producer warpgroup
    assert regs * threads * blocks <= 65536, r.stderr  # ptxas fixes the count at entry (setmaxnreg moves them)
    assert "0 bytes spill stores, 0 bytes spill loads" in r.stderr
