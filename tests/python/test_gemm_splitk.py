"""kernels/gemm.py matmul_splitk (issue #11's skinny GEMMs, M = 16 and 128 by 8192 x 8192): K split over
split_k blocks per output tile, float32 atomics into a float32 workspace (a T.alloc_global one zeroed per
call, or the caller's, which the cast kernel leaves zero), then a cast kernel.

- On the CPU device against float64 on fresh random inputs, with M, N and K that are not multiples of
  the tiles (a split whose k-steps run past K reads zeros), for bf16, fp16 and f32, M as a T.dynamic
  symbol, and every split count from 1 to the number of k-steps; called three times (the workspace is
  zero at every call, so a later call gives the same result, not a multiple; the caller's is zero after).
- reduce="partials" (each split's tile stored into its own slice W[z], summed in order by the second kernel; the
  caller's workspace starts NaN and each slice must hold exactly its split's partial product) and swap_ab=True
  (C^T = B^T A^T per block, stored transposed; matmul's one-kernel form and matmul_splitk's) on the same cases.
- Bad split counts, dtypes and reduce modes are rejected naming the argument and the allowed range.
- The sm_90a CUDA source (no GPU needed): the split kernel runs wgmma on TMA-loaded tiles (M = 128
  tiles) or mma.sync (M = 16 tiles) and adds its tile into the float32 workspace with f32x2 vector
  atomics (red.global.add.v2.f32); a second kernel casts; ptxas (where nvcc is installed) compiles
  both without spills.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_gemm_splitk.py
"""
import os
import re
import sys

import numpy as np
import pytest

from _helpers import NVCC, ROOT, cuda_kernel_source, ptx_of, ptxas_v, source_parts  # sys.path: repo root, tilelang
import tilelang  # noqa: E402

from kernels import gemm  # noqa: E402
from kernels._util import from_bf16_bits, to_bf16_bits  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build
RNG = np.random.default_rng()


def operands(M, N, K, dtype):
    a, b = RNG.standard_normal((M, K)), RNG.standard_normal((K, N))
    if dtype == "bfloat16":
        A, B = to_bf16_bits(a), to_bf16_bits(b)
        return A, B, from_bf16_bits(A).astype(np.float64), from_bf16_bits(B).astype(np.float64)
    A, B = a.astype(dtype), b.astype(dtype)
    return A, B, A.astype(np.float64), B.astype(np.float64)


def decoded(C, dtype):
    return from_bf16_bits(C).astype(np.float64) if dtype == "bfloat16" else C.astype(np.float64)


def rel(got, ref):
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


# (M, N, K, split_k, block_M, block_N, block_K, dtype): ragged M, N and K; the last split partly or
# wholly past K (K = 320 is 5 k-steps of 64: 3 splits of 2 steps); M as a dynamic symbol in one.
CASES = [(37, 200, 320, 3, 16, 64, 64, "bfloat16"), (64, 128, 256, 4, 64, 64, 32, "float16"),
         (5, 96, 100, 2, 16, 32, 32, "float32"), (130, 72, 192, 6, 64, 32, 32, "bfloat16")]
# rounding once to 16 bits: ~2^-9 (bf16) / 2^-12 (fp16) relative; f32 output: summation order only
TOL = {"bfloat16": 4e-3, "float16": 5e-4, "float32": 1e-5}


@pytest.mark.parametrize("workspace", [False, True])
@pytest.mark.parametrize("M,N,K,split,bm,bn,bk,dtype", CASES)
def test_splitk_matches_float64_on_the_cpu(M, N, K, split, bm, bn, bk, dtype, workspace):
    dynamic = M == 37
    prog = gemm.matmul_splitk("M" if dynamic else M, N, K, split, dtype=dtype, out_dtype=dtype, block_M=bm,
                              block_N=bn, block_K=bk, num_stages=2, threads=128, cast_block=(4, 64),
                              workspace=workspace)
    assert [p.name for p in prog.params] == (["A", "B", "C", "W"] if workspace else ["A", "B", "C"])
    k = tilelang.compile(prog, target="cpu")
    assert len(k.kernel_names) == 2  # the split kernel, then the cast
    A, B, a, b = operands(M, N, K, dtype)
    W = np.zeros((M, N), np.float32)
    ref = a @ b
    for _ in range(3):  # the workspace is zero at every call (a leftover would double the next result)
        C = np.full((M, N), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((M, N), np.nan, dtype)
        k(A, B, C, W) if workspace else k(A, B, C)
        c = decoded(C, dtype)
        assert np.isfinite(c).all()
        assert rel(c, ref) < TOL[dtype], (M, N, K, split, dtype, rel(c, ref))
        assert not W.any()  # the caller's workspace: zero again after every call


@pytest.mark.parametrize("workspace", [False, True])
@pytest.mark.parametrize("M,N,K,split,bm,bn,bk,dtype", CASES)
def test_splitk_partials_matches_float64_on_the_cpu(M, N, K, split, bm, bn, bk, dtype, workspace):
    """reduce="partials": split z stores its tile into W[z] (plain stores), the second kernel adds the slices.
    The caller's workspace starts NaN: every element the sum reads must have been written by the split kernel;
    each slice holds exactly its split's partial product (k-steps z * per .. (z + 1) * per - 1, zeros past K)."""
    dynamic = M == 37
    prog = gemm.matmul_splitk("M" if dynamic else M, N, K, split, dtype=dtype, out_dtype=dtype, block_M=bm,
                              block_N=bn, block_K=bk, num_stages=2, threads=128, cast_block=(4, 64),
                              workspace=workspace, reduce="partials")
    assert [p.name for p in prog.params] == (["A", "B", "C", "W"] if workspace else ["A", "B", "C"])
    k = tilelang.compile(prog, target="cpu")
    assert len(k.kernel_names) == 2  # the split kernel, then the sum of the slices
    A, B, a, b = operands(M, N, K, dtype)
    ref = a @ b
    per = -(-(-(-K // bk)) // split) * bk  # K columns per split
    for _ in range(2):  # no zeroing needed between calls: the slices are overwritten, not added into
        W = np.full((split, M, N), np.nan, np.float32)
        C = np.full((M, N), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((M, N), np.nan, dtype)
        k(A, B, C, W) if workspace else k(A, B, C)
        c = decoded(C, dtype)
        assert np.isfinite(c).all()
        assert rel(c, ref) < TOL[dtype], (M, N, K, split, dtype, rel(c, ref))
        if workspace:
            for z in range(split):
                sl = slice(z * per, (z + 1) * per)
                bound = 2e-5 * (np.abs(a[:, sl]) @ np.abs(b[sl, :]))  # float32 summation of <= 128 products
                assert (np.abs(W[z] - a[:, sl] @ b[sl, :]) <= bound).all(), z


@pytest.mark.parametrize("split", [1, 3])
@pytest.mark.parametrize("M,N,K,bm,bn,bk,dtype", [(16, 128, 256, 16, 64, 64, "bfloat16"),
                                                  (5, 200, 320, 16, 64, 128, "float16"),
                                                  (13, 64, 100, 8, 32, 32, "float32")])
def test_swap_ab_matches_float64_on_the_cpu(M, N, K, bm, bn, bk, dtype, split):
    """swap_ab=True: each block computes C^T = B^T A^T and stores it transposed -- matmul (one kernel, split 1)
    and matmul_splitk (atomic and partials); ragged M, N and K."""
    A, B, a, b = operands(M, N, K, dtype)
    ref = a @ b
    progs = []
    if split == 1:
        progs.append(gemm.matmul(M, N, K, dtype=dtype, out_dtype=dtype, block_M=bm, block_N=bn, block_K=bk,
                                 num_stages=2, threads=128, swap_ab=True))
    else:
        for reduce in ("atomic", "partials"):
            progs.append(gemm.matmul_splitk(M, N, K, split, dtype=dtype, out_dtype=dtype, block_M=bm, block_N=bn,
                                            block_K=bk, num_stages=2, threads=128, swap_ab=True, reduce=reduce,
                                            cast_block=(4, 64)))
    for prog in progs:
        k = tilelang.compile(prog, target="cpu")
        C = np.full((M, N), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((M, N), np.nan, dtype)
        k(A, B, C)
        c = decoded(C, dtype)
        assert np.isfinite(c).all()
        assert rel(c, ref) < TOL[dtype], (M, N, K, split, dtype, rel(c, ref))


def test_swap_ab_refuses_what_it_does_not_do():
    with pytest.raises(ValueError) as info:
        gemm.matmul(16, 128, 256, dtype="float16", trans_B=True, swap_ab=True)
    assert str(info.value) == ("matmul: swap_ab takes no trans_A/trans_B, bias, act, batch or raster, got "
                               "trans_A=False, trans_B=True, bias=False, act='none', batch=None, raster=0")


def test_every_split_count_gives_the_product():
    M, N, K, bk = 20, 64, 192, 32  # 6 k-steps
    A, B, a, b = operands(M, N, K, "float32")
    ref = a @ b
    for split in range(1, 7):
        k = tilelang.compile(gemm.matmul_splitk(M, N, K, split, dtype="float32", block_M=16, block_N=32,
                                                block_K=bk, num_stages=2, threads=128), target="cpu")
        C = np.full((M, N), np.nan, np.float32)
        k(A, B, C)
        assert rel(C.astype(np.float64), ref) < 1e-5, split


@pytest.mark.parametrize("kw,msg", [
    (dict(split_k=0), "matmul_splitk: split_k=0 must be an int in [1, 4] (K=256 is 4 k-steps of block_K=64)"),
    (dict(split_k=5), "matmul_splitk: split_k=5 must be an int in [1, 4] (K=256 is 4 k-steps of block_K=64)"),
    (dict(split_k=2, dtype="int8"), "matmul_splitk: dtype 'int8' not in ['bfloat16', 'float16', 'float32']"),
    (dict(split_k=2, K="K"), "matmul_splitk: N and K must be ints, got N=128, K='K'"),
    (dict(split_k=2, reduce="tree"), "matmul_splitk: reduce='tree' not in ['atomic', 'partials']"),
])
def test_bad_arguments_are_named(kw, msg):
    args = dict(M=16, N=128, K=256, block_K=64)
    args.update(kw)
    with pytest.raises(ValueError) as info:
        gemm.matmul_splitk(**args)
    assert str(info.value) == msg


def sm90a_sources(prog):
    return source_parts(cuda_kernel_source(prog))  # skips without a CUDA compiler


def ptxas_info(source, tmp_path, name):
    return ptxas_v(source, tmp_path, name) if os.access(NVCC, os.X_OK) else None


@pytest.mark.parametrize("M,bm,bn,bk,threads,stages,split,mma", [
    (128, 128, 128, 64, 256, 3, 4, r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.bf16\.bf16"),
    (16, 16, 64, 128, 128, 4, 2, r"tl_mma_bf16\(|mma_sync<"),  # mma.sync m16n8k16 (either printer spelling)
])
def test_sm90a_source(M, bm, bn, bk, threads, stages, split, mma, tmp_path):
    """The hopper_bench configs' kernels: what runs on the H200 (the caller's workspace)."""
    parts = sm90a_sources(gemm.matmul_splitk(M, 8192, 8192, split, dtype="bfloat16", out_dtype="bfloat16",
                                             block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
                                             threads=threads, workspace=True))
    k0 = parts["main_k0.sm_90a.cu"]
    assert re.search(mma, k0.split("__global__", 1)[1]), mma
    assert k0.count("tl_tma_load_2d(&A_s") >= 1 and k0.count("tl_tma_load_2d(&B_s") >= 1
    # float32 atomics of the accumulator into the workspace W, no 16-bit rounding: neighbouring column pairs
    # of the accumulator (slots 2s, 2s + 1) as one f32x2 vector atomic (red.global.add.v2.f32 on sm_90)
    assert re.search(r"float\* __restrict__ W", k0)
    pair = re.search(r"tl_atomic_add_f32x2\(&W\[[^;]*\], \(float\)\(C_f\[([^;]*)\]\), \(float\)\(C_f\[([^;]*)\]\)\);", k0)
    assert pair and pair.group(2) == f"({pair.group(1)} + 1)", k0[-3000:]
    body = k0.split("__global__", 1)[1]
    assert "tl_f2bf" not in body and "atomicAdd(" not in body
    # each split walks its own 8192 / split / block_K k-steps
    steps = 8192 // bk // split
    assert f"(bz * {steps})" in k0, k0
    k1 = parts.get("main_k1.sm_90a.cu") or parts["main_k1.cu"]
    # W read in 16-byte accesses into shared memory, C written from there, zeros written back 16 bytes at a time
    assert re.search(r"\*reinterpret_cast<tl_v16\*>\(&w_s\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&W\[", k1), k1
    assert re.search(r"C\[[^;]*\] = tl_f2bf\(\(\(float\)\(w_s\[", k1), k1
    assert re.search(r"\*reinterpret_cast<tl_v16\*>\(&W\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&z_s\[", k1), k1
    for name, s in (("k0", k0), ("k1", k1)):
        info = ptxas_info(s, tmp_path, name)
        if info is not None:
            assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info
    if os.access(NVCC, os.X_OK):
        ptx = ptx_of(k0, tmp_path, "k0")
        # every accumulator element in exactly one pair: bm * bn / threads / 2 vector atomics per thread
        assert len(re.findall(r"red\.global\.add\.v2\.f32", ptx)) == bm * bn // threads // 2
        assert not re.search(r"(atom|red)\.global\.add\.f32", ptx)


def test_hopper_bench_split_config_checks_the_workspace():
    """hopper_bench's split-K configs: the kernel gets a fresh zeroed workspace per config, the check after the
    first call also requires it to be zero again (else the timed calls would add into leftovers)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import hopper_bench as hb
    be = hb.NumpyBackend()
    cfg = (16, 64, 64, 128, 2, 0, 3)
    case = hb.gemm_case(16, 128, 192, "float16", [cfg])
    k, _ = hb.compile_case(case, cfg, "cpu")
    x = case.make(be, np.random.default_rng(5))
    out = be.nan(*case.out_spec)
    args = case.args(x, out, cfg)
    assert len(args) == 4 and args[3].dtype == np.float32 and not args[3].any()
    k(*args)
    assert case.check(be, x, out) < 1e-3
    args = case.args(x, out, cfg)
    k(*args)
    args[3][3, 5] = 1.0  # a workspace the call did not leave zero
    assert case.check(be, x, out) == float("inf")
    assert case.check(be, x, out) < 1e-3  # checked once, for the config that was just called
