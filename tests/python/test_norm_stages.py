"""kernels/norm.py rms_norm and softmax in every staging form the H200 benchmark picks from (issue #11's
bandwidth rows): "fragment", "shared" (W staged in shared memory, or read from global memory where it is
used: w_in_shared=False), "pipelined" (a cp.async row pipeline with 2 and 3 stages), on the CPU device
against float64 on fresh random inputs, with M not a multiple of the rows a block covers (the last block
is partial) and bf16 as well as f32 data.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_norm_stages.py
"""
import numpy as np
import pytest

import _helpers  # noqa: F401  - sys.path: the repo root, tilelang
import tilelang  # noqa: E402

from kernels import norm  # noqa: E402
from kernels._util import from_bf16_bits, to_bf16_bits  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build
RNG = np.random.default_rng()


def data(shape, dtype, scale=2.0):
    x = RNG.standard_normal(shape) * scale
    if dtype == "bfloat16":
        bits = to_bf16_bits(x)
        return bits, from_bf16_bits(bits).astype(np.float64)
    return x.astype(dtype), x.astype(dtype).astype(np.float64)


def out(shape, dtype):
    return np.full(shape, 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full(shape, np.nan, dtype)


def decoded(y, dtype):
    return from_bf16_bits(y).astype(np.float64) if dtype == "bfloat16" else y.astype(np.float64)


def rel(got, ref):
    return np.linalg.norm(got - ref) / np.linalg.norm(ref)


TOL = {"bfloat16": 8e-3, "float32": 1e-5}
# (block_M, threads, stage, rows_per_block, num_stages, w_in_shared)
STAGES = [(2, 64, "fragment", 1, 2, True), (1, 64, "shared", 1, 2, True), (2, 64, "shared", 1, 2, False),
          (1, 64, "pipelined", 3, 2, True), (2, 128, "pipelined", 2, 3, True)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("bm,threads,stage,rows,stages,w_in_shared", STAGES)
def test_rms_norm_stages_match_float64(bm, threads, stage, rows, stages, w_in_shared, dtype):
    M, N = 13, 256  # 13 rows: the last block of every form is partial
    X, x = data((M, N), dtype)
    W, w = data((N,), dtype, scale=1.0)
    k = tilelang.compile(norm.rms_norm(M, N, dtype=dtype, block_M=bm, threads=threads, stage=stage,
                                       rows_per_block=rows, num_stages=stages, w_in_shared=w_in_shared),
                         target="cpu")
    Y = out((M, N), dtype)
    k(X, W, Y)
    y = decoded(Y, dtype)
    assert np.isfinite(y).all()
    assert rel(y, norm.rms_norm_ref(x, w)) < TOL[dtype], (stage, w_in_shared, dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("bm,threads,stage,rows,stages", [s[:5] for s in STAGES if s[5]])
def test_softmax_stages_match_float64(bm, threads, stage, rows, stages, dtype):
    M, N = 13, 256
    X, x = data((M, N), dtype, scale=4.0)
    k = tilelang.compile(norm.softmax(M, N, dtype=dtype, block_M=bm, threads=threads, stage=stage,
                                      rows_per_block=rows, num_stages=stages), target="cpu")
    Y = out((M, N), dtype)
    k(X, Y)
    y = decoded(Y, dtype)
    assert np.isfinite(y).all()
    assert rel(y, norm.softmax_ref(x)) < TOL[dtype], (stage, dtype)
