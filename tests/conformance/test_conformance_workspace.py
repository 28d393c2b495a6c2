"""Conformance: T.alloc_global workspaces across two kernels of one function, and a convolution
through T.im2col and buffer views, on every target against numpy float64."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_workspace as KW
from tlc_util import assert_close, random


@pytest.mark.parametrize("M,N", [(50, 300), (7, 129)])
def test_split_logsumexp(target, rng, M, N):
    kernel = tlc_util.compile(KW.split_logsumexp(M, N, 16, 64), out_idx=[1], target=target)
    x, x64 = random(rng, (M, N), "float32", scale=3.0)
    ref = x64.max(1) + np.log(np.exp(x64 - x64.max(1, keepdims=True)).sum(1))
    assert_close(kernel(x), ref, rtol=1e-5, atol=1e-5)


def _conv_ref(x, w, S, D, P):
    N, H, W, C = x.shape
    K, F = w.shape[0], w.shape[3]
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    xp = np.pad(x, ((0, 0), (P, P), (P, P), (0, 0)))
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh * D:kh * D + S * (OH - 1) + 1:S, kw * D:kw * D + S * (OW - 1) + 1:S, :]
            out += np.einsum("nhwc,cf->nhwf", patch, w[kh, kw])
    return out


@pytest.mark.parametrize("N,H,W,C,F,K,S,D,P", [(2, 9, 7, 8, 24, 3, 2, 1, 1), (1, 12, 10, 16, 40, 3, 1, 2, 2)])
def test_conv2d_im2col(target, rng, N, H, W, C, F, K, S, D, P):
    kernel = tlc_util.compile(KW.conv2d_im2col(N, H, W, C, F, K, S, D, P, 64, 32, 32), out_idx=[2],
                              target=target)
    x, x64 = random(rng, (N, H, W, C), "float16")
    w, w64 = random(rng, (K, K, C, F), "float16")
    assert_close(kernel(x, w), _conv_ref(x64, w64, S, D, P), "float16", rtol=1e-2, atol=3e-2)
