"""float8_e4m3fn / float8_e5m2 buffers (fp8.py): u8 bit patterns in Tile IR, decoded at loads and
encoded at stores (round to nearest even, saturating as upstream's CUDA casts, NaN kept).
Checked on the CPU against the frontend's numpy model of the formats (tilelang.fp8.encode_numpy /
decode_numpy), which is itself checked against IEEE binary16 decodings of every pattern."""

import numpy as np
import pytest

import fe_util
import tilelang
import tilelang.language as T
from tilelang.dtypes import canonical
from tilelang.errors import display_path
from tilelang.fp8 import FORMATS, decode_numpy, encode_numpy

THIS = display_path(__file__)
KB = fe_util.load(fe_util.REPO / "tests" / "conformance" / "tlc_kernels_bits.py")  # fp8_roundtrip


def table(dtype):
    """float64 value of each of the 256 patterns (the frontend's numpy model, tilelang.fp8)."""
    return decode_numpy(np.arange(256), dtype).astype(np.float64)


def half_model(dtype):
    """An independent model of the formats' 256 patterns: each one moved bit field by bit field into an
    IEEE binary16 pattern that numpy decodes (e5m2 is binary16's upper byte; e4m3fn's normals get
    their exponent rebiased by 8, its subnormals are m * 2^-9, and only S.1111.111 is NaN)."""
    b = np.arange(256, dtype=np.uint16)
    if dtype == "float8_e5m2":
        return (b << 8).view(np.float16).astype(np.float64)
    s, e, m = b >> 7, (b >> 3) & 15, b & 7
    v = ((e + 8) << 10 | m << 7).view(np.float16).astype(np.float64)
    v = np.where(e == 0, m * 2.0 ** -9, v)
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v)


def interesting_floats(dtype, rng):
    vals = table(dtype)
    finite = vals[np.isfinite(vals)]
    mids = (np.sort(finite)[1:] + np.sort(finite)[:-1]) / 2  # exact ties between neighbours
    big = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, -1e-30])
    rand = rng.standard_normal(2048) * np.exp2(rng.integers(-12, 12, 2048))
    x = np.concatenate([finite, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), big, rand])
    x = x.astype(np.float32)
    return np.concatenate([x, np.zeros((-len(x)) % 128, np.float32)])


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_stores_round_to_nearest_even_and_saturate_loads_decode_exactly(dtype):
    x = interesting_floats(dtype, np.random.default_rng(21))
    kernel = tilelang.compile(KB.fp8_roundtrip(len(x), dtype), out_idx=[1, 2], target="cpu")
    q, y = kernel(x)
    want = encode_numpy(x, dtype)
    zero = (x == 0) | (np.abs(x) < 1e-20)
    np.testing.assert_array_equal(q[~zero], want[~zero])
    assert np.all(q[zero] & 0x7F == 0)  # +-0 (the sign of a zero is not kept)
    decoded = table(dtype)[q.astype(np.int64)]
    np.testing.assert_array_equal(np.isnan(y), np.isnan(decoded))
    np.testing.assert_array_equal(y[~np.isnan(y)], decoded[~np.isnan(decoded)])


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_numpy_model_decodes_every_pattern_as_ieee_half_does(dtype):
    # The references above are tilelang.fp8's numpy model; this pins the model to the formats
    # themselves, independently of its tables.
    got, want = table(dtype), half_model(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    largest = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}[dtype]
    assert got[FORMATS[dtype][3]] == largest == np.nanmax(got[np.isfinite(got)])


@tilelang.jit(target="cpu")
def per_row_cast_to_fp8(X, blk_m=4):
    # upstream's example_per_token_cast_to_fp8, one group per row block
    M, N = T.const("M, N")
    X: T.Tensor((M, N), "float32")
    X_fp8 = T.empty((M, N), T.float8_e4m3fn)
    X_s = T.empty((M,), "float32")
    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        y = T.alloc_fragment((blk_m, N), "float32")
        amax = T.alloc_fragment((blk_m,), "float32")
        y_fp8 = T.alloc_fragment((blk_m, N), T.float8_e4m3fn)
        T.copy(X[bx * blk_m, 0], y)
        T.reduce_absmax(y, amax, dim=1)
        for i in T.Parallel(blk_m):
            amax[i] = T.max(amax[i], 1e-4) / 448.0
        for i, j in T.Parallel(blk_m, N):
            y[i, j] = T.clamp(y[i, j] / amax[i], -448.0, 448.0)
        T.copy(y, y_fp8)                       # float32 -> fp8: converted element-wise
        T.copy(y_fp8, X_fp8[bx * blk_m, 0])    # fp8 -> fp8: bytes
        T.copy(amax, X_s[bx * blk_m])
    return X_fp8, X_s


def test_upstream_style_per_token_cast_matches_numpy():
    x = np.random.default_rng(22).standard_normal((24, 160)).astype(np.float32)
    q, s = per_row_cast_to_fp8(x)
    assert q.dtype == np.uint8 and q.shape == x.shape  # numpy has no fp8: the bit patterns
    want_s = np.maximum(np.abs(x.astype(np.float64)).max(1), 1e-4) / 448.0
    np.testing.assert_allclose(s, want_s, rtol=1e-6)
    y = np.clip(x / s[:, None], -448.0, 448.0).astype(np.float32)
    np.testing.assert_array_equal(q, encode_numpy(y, "float8_e4m3fn"))
    # dequantized, the values are within fp8's half-ulp of the input
    back = table("float8_e4m3fn")[q.astype(np.int64)] * s[:, None]
    np.testing.assert_allclose(back, x, rtol=2.0 ** -4, atol=s.max() * 2.0 ** -9)


def fp8_gemm():
    @T.prim_func
    def main(A: T.Tensor((32, 32), T.float8_e4m3fn), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((32, 32), T.float8_e4m3fn)
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a)
            T.gemm(a, a, c)  # MARK-fp8-gemm
    return main


def test_other_tile_ops_on_fp8_name_the_op_and_line():
    with pytest.raises(tilelang.TileLangSyntaxError) as info:
        fp8_gemm()
    line = fe_util.marker_line(__file__, "# MARK-fp8-gemm")
    assert str(info.value) == (f"{THIS}:{line}: unsupported feature: T.gemm on float8_e4m3fn buffer a (fp8 "
                               "buffers take element loads and stores, T.copy and T.fill; convert to "
                               "float16/float32 first)")
    with pytest.raises(tilelang.TileLangSyntaxError, match="unsupported feature: dtype float8_e4m3fnuz"):
        canonical(T.float8_e4m3fnuz)  # the other fp8/fp4 variants stay unknown to Tile IR


def cast_values(n, dtype):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = T.cast(X[bx * 128 + i], dtype)  # the value rounded to fp8
    return main


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_cast_to_fp8_is_the_rounded_value(dtype):
    x = interesting_floats(dtype, np.random.default_rng(23))
    y = tilelang.compile(cast_values(len(x), dtype), out_idx=[1], target="cpu")(x)
    want = table(dtype)[encode_numpy(x, dtype).astype(np.int64)]
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    nonzero = ~np.isnan(want) & (want != 0)
    np.testing.assert_array_equal(y[nonzero], want[nonzero])
    assert np.all(y[want == 0] == 0)  # (a zero's sign is not kept)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_numpy_helpers_match_the_kernels(dtype):
    x = interesting_floats(dtype, np.random.default_rng(24))
    q, y = tilelang.compile(KB.fp8_roundtrip(len(x), dtype), out_idx=[1, 2], target="cpu")(x)
    zero = x == 0
    np.testing.assert_array_equal(encode_numpy(x, dtype)[~zero], q[~zero])
    np.testing.assert_array_equal(decode_numpy(q, dtype), y)


def scale_fp8(n):
    @T.prim_func
    def main(X: T.Tensor((n,), T.float8_e4m3fn), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 64), threads=64) as bx:
            for i in T.Parallel(64):
                Y[bx * 64 + i] = X[bx * 64 + i] * 2.0
    return main


def test_profiler_supplies_fp8_inputs_as_rounded_floats():
    kernel = tilelang.compile(scale_fp8(256), out_idx=[1], target="cpu")
    profiler = kernel.get_profiler(tilelang.TensorSupplyType.Uniform)
    seen = []

    def ref(x):  # numpy callers see fp8 as its bit patterns
        seen.append(decode_numpy(x, "float8_e4m3fn"))
        return seen[-1].astype(np.float64) * 2
    profiler.assert_allclose(ref, atol=0, rtol=0)
    values = seen[0]
    assert values.min() >= -1 and values.max() <= 1 and len(np.unique(values)) > 50  # uniform(-1, 1), rounded
