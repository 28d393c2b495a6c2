"""Conformance: elementwise, softmax, norms, reductions, cumsum, top-k on every target."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_basic as K
from tlc_util import assert_close, random


@pytest.mark.parametrize("in_dtype,out_dtype", [("float32", "float32"), ("float16", "float32"),
                                                 ("float16", "float16")])
def test_elementwise_add(target, rng, in_dtype, out_dtype):
    M, N = 100, 70
    kernel = tlc_util.compile(K.elementwise_add(M, N, 32, 32, in_dtype, out_dtype), out_idx=[2], target=target)
    a, a64 = random(rng, (M, N), in_dtype)
    b, b64 = random(rng, (M, N), in_dtype)
    assert_close(kernel(a, b), a64 + b64, out_dtype)


def test_axpby_guarded(target, rng):
    M, N = 77, 45
    kernel = tlc_util.compile(K.axpby_guarded(M, N, 32, 16), out_idx=[2], target=target)
    x, x64 = random(rng, (M, N), "float32")
    y, y64 = random(rng, (M, N), "float32")
    alpha, beta = 1.5, -0.25
    ref = np.float32(alpha) * x64 + np.float32(beta) * y64
    assert_close(kernel(x, y, alpha, beta), np.where(ref > 0, ref, ref * 0.5), rtol=1e-5, atol=1e-5)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_softmax(target, rng):
    M, N = 50, 100
    kernel = tlc_util.compile(K.softmax(M, N, block_M=8, BN=128), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32", scale=3.0)
    assert_close(kernel(x), _softmax(x64), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_online_softmax(target, rng, dtype):
    M, N = 10, 300
    kernel = tlc_util.compile(K.online_softmax(M, N, block_N=128, dtype=dtype), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), dtype, scale=3.0)
    assert_close(kernel(x), _softmax(x64), dtype, atol=1e-3 if dtype == "float16" else 1e-6)


def test_rms_norm(target, rng):
    M, N, eps = 50, 200, 1e-6
    kernel = tlc_util.compile(K.rms_norm(M, N, blk_m=4, eps=eps), out_idx=[2], target=target)
    a, a64 = random(rng, (M, N), "float32")
    w, w64 = random(rng, (N,), "float32")
    ref = a64 / np.sqrt((a64 ** 2).mean(axis=1, keepdims=True) + eps) * w64
    assert_close(kernel(a, w), ref, rtol=1e-4, atol=1e-4)


def test_layer_norm(target, rng):
    M, N, eps = 50, 200, 1e-5
    kernel = tlc_util.compile(K.layer_norm(M, N, blk_m=4, eps=eps), out_idx=[3], target=target)
    x, x64 = random(rng, (M, N), "float16", scale=2.0)
    g, g64 = random(rng, (N,), "float16")
    b, b64 = random(rng, (N,), "float16")
    mean = x64.mean(axis=1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=1, keepdims=True) + eps) * g64 + b64
    assert_close(kernel(x, g, b), ref, "float16", rtol=1e-2, atol=2e-2)


_NP_REDUCE = {"sum": lambda x, a: x.sum(axis=a), "max": lambda x, a: x.max(axis=a),
              "min": lambda x, a: x.min(axis=a), "abssum": lambda x, a: np.abs(x).sum(axis=a),
              "absmax": lambda x, a: np.abs(x).max(axis=a)}


@pytest.mark.parametrize("op", ["sum", "max", "min", "abssum", "absmax"])
def test_row_reduce(target, rng, op):
    M, N = 50, 150
    kernel = tlc_util.compile(K.row_reduce(M, N, 8, 64, op), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32")
    assert_close(kernel(x), _NP_REDUCE[op](x64, 1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["sum", "max"])
def test_col_reduce(target, rng, op):
    M, N = 150, 50
    kernel = tlc_util.compile(K.col_reduce(M, N, 32, 16, op), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32")
    assert_close(kernel(x), _NP_REDUCE[op](x64, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_rows(target, rng, reverse):
    M, N = 50, 90
    kernel = tlc_util.compile(K.cumsum_rows(M, N, 8, reverse=reverse), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32")
    ref = np.flip(np.cumsum(np.flip(x64, 1), axis=1), 1) if reverse else np.cumsum(x64, axis=1)
    assert_close(kernel(x), ref, rtol=1e-4, atol=1e-4)


def test_cumsum_chunked(target, rng):
    M, N = 50, 90
    kernel = tlc_util.compile(K.cumsum_chunked(M, N, 8, 32), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32")
    assert_close(kernel(x), np.cumsum(x64, axis=1), rtol=1e-4, atol=1e-4)


def test_topk(target, rng):
    M, N, k = 70, 100, 6
    kernel = tlc_util.compile(K.topk(M, N, k, blk_m=16), out_idx=[1, 2], target=target)
    x, x64 = random(rng, (M, N), "float32")
    gates, idx = kernel(x)
    ref_idx = np.argsort(-x64, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(idx, ref_idx)
    assert_close(gates, np.take_along_axis(x64, ref_idx, axis=1), rtol=0, atol=0)
