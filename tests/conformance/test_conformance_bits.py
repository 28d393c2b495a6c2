"""Conformance: fp8 buffers (nearest-even, saturating, NaN), T.reinterpret dequantization (fp4 and int4
GEMMs as upstream's dequantize examples write them) and a partial copy out of a gemm accumulator,
on every target, against float64 numpy models (fp8: tilelang.fp8's encode_numpy / decode_numpy)."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_bits as KB
from tilelang.fp8 import FORMATS, decode_numpy, encode_numpy


def fp8_table(dtype):
    """float64 value of each of the 256 patterns (tilelang.fp8's model, checked on its own in
    tests/python/frontend/test_frontend_fp8.py)."""
    return decode_numpy(np.arange(256), dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_fp8_stores_and_loads(target, rng, dtype):
    finite = fp8_table(dtype)[np.isfinite(fp8_table(dtype))]
    srt = np.sort(finite)
    ties = (srt[1:] + srt[:-1]) / 2
    x = np.concatenate([finite, ties, rng.standard_normal(1000) * np.exp2(rng.integers(-12, 12, 1000)),
                        [1e6, -1e6, np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = np.concatenate([x, np.ones((-len(x)) % 128, np.float32)])
    x[x == 0] = 1.0  # the sign of a zero is not kept; compare nonzero values
    kernel = tlc_util.compile(KB.fp8_roundtrip(len(x), dtype), out_idx=[1, 2], target=target)
    q, y = kernel(x)
    np.testing.assert_array_equal(np.asarray(q), encode_numpy(x, dtype))
    tlc_util.assert_equal_nan(y, fp8_table(dtype)[np.asarray(q).astype(np.int64)])


def test_per_token_cast_to_fp8(target, rng):
    M, N = 24, 256
    kernel = tlc_util.compile(KB.per_token_cast_to_fp8(M, N, 8), out_idx=[1, 2], target=target)
    x, x64 = tlc_util.random(rng, (M, N), "float32")
    q, s = kernel(x)
    amax = np.maximum(np.abs(x64.reshape(M, 2, 128)).max(-1), 1e-4)
    tlc_util.assert_close(s, amax / 448.0, rtol=1e-6, atol=0)
    y = np.clip(x.reshape(M, 2, 128) / np.asarray(s, np.float32)[..., None], -448.0, 448.0).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(q), encode_numpy(y.reshape(M, N), "float8_e4m3fn"))


def test_reinterpret_every_16_bit_pattern_as_float16(target):
    kernel = tlc_util.compile(KB.u16_to_f16(65536), out_idx=[1], target=target)
    bits = np.arange(65536, dtype=np.uint16)
    # bit-exact but for NaN payloads (a NaN stays a NaN)
    tlc_util.assert_equal_nan(kernel(bits), bits.view(np.float16), signed_zeros=True)


def _unpack(q):
    n, k2 = q.shape
    return np.stack((q & 0x0F, q >> 4), axis=-1).reshape(n, k2 * 2).astype(np.int64)


@pytest.mark.parametrize("kind", ["fp4", "int4"])
def test_dequantize_gemm(target, rng, kind):
    M, N, K = 64, 96, 128
    kernel = tlc_util.compile(KB.dequant_gemm(M, N, K, kind), out_idx=[2], target=target)
    q = rng.integers(0, 256, (N, K // 2)).astype(np.uint8)
    v = _unpack(q)
    if kind == "fp4":
        a, a64 = tlc_util.random(rng, (M, K), "float16")
        b = (((v >> 3) << 15) | ((((v & 6) >> 1) + 14) << 10) | ((v & 1) << 9)).astype(np.uint16)
        ref = b.view(np.float16).astype(np.float64) @ a64.T
        tlc_util.assert_close(kernel(a, q), ref, rtol=1e-4, atol=1e-3)
    else:
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        ref = np.where(v >= 8, v - 16, v).astype(np.float64) @ a.astype(np.float64).T
        np.testing.assert_array_equal(np.asarray(kernel(a, q)), ref)


def test_partial_copy_of_a_gemm_accumulator(target, rng):
    H, valid, D, N = 16, 4, 32, 32
    kernel = tlc_util.compile(KB.partial_head_gemm(H, valid, D, N), out_idx=[2], target=target)
    q, q64 = tlc_util.random(rng, (valid, D), "float16")
    k, k64 = tlc_util.random(rng, (N, D), "float16")
    tlc_util.assert_close(kernel(q, k), q64 @ k64.T, "float16", rtol=2e-3, atol=2e-2)
