"""Conformance: stores and loads past a tensor's extent in T.Parallel, no user guard
(upstream's safe-memory semantics: dropped writes, zero reads), dynamic and static sizes."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_edges as E
from tlc_util import assert_close, random


def _ref(x64):
    left = np.zeros_like(x64)
    left[:, 1:] = x64[:, :-1]
    return 2.0 * x64 + left


def test_parallel_direct_static(target, rng):
    M, N = 77, 45
    kernel = tlc_util.compile(E.parallel_direct(M, N, 32, 16), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32")
    assert_close(kernel(x), _ref(x64))


def test_parallel_direct_dynamic(target, rng):
    N = 70
    kernel = tlc_util.compile(E.parallel_direct_dynamic(N, 32, 32), out_idx=[1], target=target)
    for m in (100, 33, 1, 64):
        x, x64 = random(rng, (m, N), "float32")
        assert_close(kernel(x), _ref(x64), what=f"m={m}")


@pytest.mark.parametrize("M,N,K", [(100, 70, 50), (37, 130, 33)])
def test_gemm_parallel_epilogue(target, rng, M, N, K):
    kernel = tlc_util.compile(E.gemm_parallel_epilogue(M, N, K, 64, 64, 32), out_idx=[3], target=target)
    a, a64 = random(rng, (M, K), "float16")
    b, b64 = random(rng, (K, N), "float16")
    bias, bias64 = random(rng, (N,), "float16")
    assert_close(kernel(a, b, bias), np.maximum(a64 @ b64 + bias64, 0.0), "float16")


def test_scalar_read_modify_write_outside_parallel(target, rng):
    N, K = 6, 24
    kernel = tlc_util.compile(E.scalar_read_modify_write(N, K), out_idx=[1], target=target)
    x, x64 = random(rng, (N, K), "float32")
    y = np.ones(N)
    for k in range(K):
        y = y * 0.5 + x64[:, k]
    assert_close(kernel(x), y + x64.sum(axis=1))
