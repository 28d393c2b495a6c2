"""Conformance: GEMM in every transpose and input dtype, dynamic M, fused epilogues,
split-K with atomics, int4-weight dequantization GEMM."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_gemm as K
from tlc_util import assert_close, random

M, N, KK = 100, 72, 80   # none a multiple of the 64 x 64 x 32 tile


@pytest.mark.parametrize("in_dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("trans_A,trans_B", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm(target, rng, in_dtype, trans_A, trans_B):
    prog = K.matmul(M, N, KK, 64, 64, 32, trans_A, trans_B, in_dtype=in_dtype)
    kernel = tlc_util.compile(prog, out_idx=[2], target=target)
    tlc_util.expect_matrix_cores(kernel, in_dtype != "float32")  # HIP: MFMA / WMMA for 16-bit inputs
    a, a64 = random(rng, (KK, M) if trans_A else (M, KK), in_dtype)
    b, b64 = random(rng, (N, KK) if trans_B else (KK, N), in_dtype)
    ref = (a64.T if trans_A else a64) @ (b64.T if trans_B else b64)
    assert_close(kernel(a, b), ref, "float32", rtol=1e-3, atol=1e-3)


def test_gemm_dynamic_m(target, rng):
    kernel = tlc_util.compile(K.matmul_dynamic_m(N, KK, 64, 64, 32), out_idx=[2], target=target)
    b, b64 = random(rng, (KK, N), "float16")
    for m in (1, 63, 130):  # one compiled kernel, several M
        a, a64 = random(rng, (m, KK), "float16")
        assert_close(kernel(a, b), a64 @ b64, "float16", rtol=1e-2, atol=2e-2, what=f"M={m}")


_ACT = {"relu": lambda x: np.maximum(x, 0),
        "gelu": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))),
        "silu": lambda x: x / (1 + np.exp(-x))}


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_gemm_bias_act(target, rng, act):
    kernel = tlc_util.expect_matrix_cores(
        tlc_util.compile(K.matmul_bias_act(M, N, KK, 64, 64, 32, act=act), out_idx=[3], target=target))
    a, a64 = random(rng, (M, KK), "float16")
    b, b64 = random(rng, (KK, N), "float16")
    bias, bias64 = random(rng, (N,), "float16")
    assert_close(kernel(a, b, bias), _ACT[act](a64 @ b64 + bias64), "float16", rtol=1e-2, atol=2e-2)


@pytest.mark.parametrize("tile_atomic", [False, True])
def test_gemm_splitk(target, rng, tile_atomic):
    m, n, k = 100, 72, 200
    kernel = tlc_util.compile(K.matmul_splitk(m, n, k, 64, 64, 32, split_k=3, tile_atomic=tile_atomic),
                              target=target)
    a, a64 = random(rng, (m, k), "float16")
    b, b64 = random(rng, (k, n), "float16")
    c = np.zeros((m, n), dtype=np.float32)  # accumulated in place by atomics
    kernel(a, b, c)
    assert_close(c, a64 @ b64, "float32", rtol=1e-3, atol=1e-3)


def test_dequant_gemm_int4(target, rng):
    m, n, k, group = 100, 72, 80, 32
    prog = K.dequant_gemm_int4(m, n, k, 64, 64, 32, group_size=group)
    kernel = tlc_util.compile(prog, out_idx=[3], target=target)
    a, a64 = random(rng, (m, k), "float16")
    w = rng.integers(-8, 8, size=(n, k))                     # signed int4 weights
    nib = (w & 0xF).astype(np.uint8)
    packed = np.ascontiguousarray(nib[:, 0::2] | (nib[:, 1::2] << 4))  # low nibble = even k
    scale, scale64 = random(rng, (n, (k + group - 1) // group), "float16", scale=0.1)
    wdq = w * np.repeat(scale64, group, axis=1)[:, :k]
    # The kernel rounds each dequantized weight to float16 before the GEMM.
    wdq = wdq.astype(np.float16).astype(np.float64)
    assert_close(kernel(a, packed, scale), a64 @ wdq.T, "float32", rtol=2e-3, atol=2e-3)
