"""T.reinterpret / tvm.tirx.reinterpret (upstream's dequantize examples): bits read as another dtype,
written as Tile IR expressions (language/reinterpret.py). Checked bit-exactly on the CPU."""

import numpy as np
import pytest

import fe_util
import tilelang
import tilelang.language as T
from tilelang.errors import display_path

THIS = display_path(__file__)
# The dequantize GEMMs (upstream's fp4 and w4a8 converters written with tvm.tirx) are the conformance suite's.
KB = fe_util.load(fe_util.REPO / "tests" / "conformance" / "tlc_kernels_bits.py")


def unpack_nibbles(q):
    n, k2 = q.shape
    return np.stack((q & 0x0F, q >> 4), axis=-1).reshape(n, k2 * 2).astype(np.int64)


def ref_fp4(q):
    f4 = unpack_nibbles(q)
    bits = ((f4 >> 3) << 15) | ((((f4 & 6) >> 1) + 14) << 10) | ((f4 & 1) << 9)
    return bits.astype(np.uint16).view(np.float16).astype(np.float64)


def ref_i4(q):
    v = unpack_nibbles(q)
    return np.where(v >= 8, v - 16, v).astype(np.float64)


def test_fp4_dequant_gemm_matches_numpy():
    rng = np.random.default_rng(11)
    M, N, K = 64, 96, 128
    kernel = tilelang.compile(KB.dequant_gemm(M, N, K, "fp4"), out_idx=[2], target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    q = rng.integers(0, 256, (N, K // 2)).astype(np.uint8)
    ct = kernel(a, q)
    ref = ref_fp4(q) @ a.astype(np.float64).T
    np.testing.assert_allclose(ct, ref, rtol=1e-4, atol=1e-3)


def test_int4_dequant_gemm_is_exact():
    rng = np.random.default_rng(12)
    M, N, K = 64, 64, 128
    kernel = tilelang.compile(KB.dequant_gemm(M, N, K, "int4"), out_idx=[2], target="cpu")
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    q = rng.integers(0, 256, (N, K // 2)).astype(np.uint8)
    np.testing.assert_array_equal(kernel(a, q), ref_i4(q) @ a.astype(np.float64).T)


def bits_to(n, src, dst):
    @T.prim_func
    def main(X: T.Tensor((n,), src), Y: T.Tensor((n,), dst)):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = T.reinterpret(dst, X[bx * 256 + i])
    return main


@pytest.mark.parametrize("src", ["uint16", "int16"])
def test_every_16_bit_pattern_reads_as_the_same_half(src):
    kernel = tilelang.compile(bits_to(65536, src, "float16"), out_idx=[1], target="cpu")
    bits = np.arange(65536, dtype=np.uint16)
    got = kernel(bits.view(np.dtype(src)))
    want = bits.view(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], bits[~nan])  # -0.0, subnormals, inf included


def test_integers_of_one_width_keep_their_bits():
    kernel = tilelang.compile(bits_to(256, "uint8", "int8"), out_idx=[1], target="cpu")
    x = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(kernel(x), x.view(np.int8))
    kernel = tilelang.compile(bits_to(512, "int32", "uint32"), out_idx=[1], target="cpu")
    y = np.random.default_rng(13).integers(-2**31, 2**31, 512).astype(np.int32)
    np.testing.assert_array_equal(kernel(y), y.view(np.uint32))


def float_bits():
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                Y[i] = T.reinterpret("int32", X[i])  # MARK-float-bits
    return main


def test_other_reinterpretations_name_the_dtypes_and_line():
    with pytest.raises(tilelang.TileLangSyntaxError) as info:
        float_bits()
    line = fe_util.marker_line(__file__, "# MARK-float-bits")
    assert str(info.value) == (f"{THIS}:{line}: unsupported feature: T.reinterpret from float32 to int32 "
                               "(supported: integers of one width, and a 16-bit integer to float16)")


def thread_level(thread="threadIdx.x"):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.thread_binding(0, 64, thread)  # MARK-thread-binding
            X[tx] = T.cast(tx, "float32") * 2.0
    return main


def test_thread_level_tir_runs_per_thread_and_names_what_it_lacks():
    # thread-level TIR (language/threads.py; more in test_frontend_threads.py): one store per thread
    x = np.zeros(64, np.float32)
    tilelang.compile(thread_level(), target="cpu")(x)
    np.testing.assert_array_equal(x, np.arange(64) * 2.0)
    with pytest.raises(tilelang.TileLangError) as info:
        thread_level("blockIdx.x")
    line = fe_util.marker_line(__file__, "# MARK-thread-binding")
    assert str(info.value) == (f"{THIS}:{line}: unsupported feature: T.thread_binding(thread='blockIdx.x') "
                               "(only threadIdx.x/y/z; block indices come from T.Kernel)")
