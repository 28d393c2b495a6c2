"""T.Kernel(..., cluster_dims=2) (upstream TileLang's spelling) and kernels.gemm.matmul(cluster=2): the sm_90a
warp-specialized GEMM as thread-block clusters of 2 blocks whose producers multicast the tile both blocks load
(compiler/lowering/gpu/src/cluster.cc). No GPU needed: the generated sm_90a CUDA source, nvcc/ptxas where installed
(no spills, the same registers as without the cluster), the fallbacks, and the CPU target's numbers (the hint is a
no-op there). The clustered kernel's numbers are checked on the H200 by hopper_bench's "cluster2" configs.

Run: PYTHONPATH=compiler/python:build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_cluster_multicast.py
"""
import os
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _helpers import NVCC, ROOT, cuda_kernel_source, ptxas_v  # noqa: E402 - also puts the repo root and tilelang on sys.path
import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.errors import TileLangError  # noqa: E402

from kernels import gemm  # noqa: E402
from kernels._util import from_bf16_bits, to_bf16_bits  # noqa: E402

# the tests that compile (tilelang.compile through tl-pack) take conftest.py's tl_pack_env: skipped without a build;
# the Tile IR text, the frontend's and matmul's argument checks and hopper_bench's configs need none
compiles = pytest.mark.usefixtures("tl_pack_env")


def sm90a_source(monkeypatch, program, pass_configs=None):
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)
    monkeypatch.delenv("TL_CUDA_CLUSTER", raising=False)
    return cuda_kernel_source(program, pass_configs=pass_configs).split(".sm_90a.cu", 1)[1]


def mm(M=512, N=1024, K=512, cluster=2, **kw):
    cfg = dict(dtype="bfloat16", out_dtype="bfloat16", block_M=128, block_N=256, block_K=64, num_stages=3, threads=256)
    cfg.update(kw)
    return gemm.matmul(M, N, K, cluster=cluster, **cfg)


CLUSTER_MARKS = ("__cluster_dims__(2, 1, 1)", "tl_tma_load_2d_mc(&", "tl_mbar_arrive_peer(&", "tl_cluster_sync();")


def test_tile_ir_hint():
    text = mm().script()
    assert "    hint cluster 2" in text
    assert "hint cluster" not in mm(cluster=1).script()


@compiles
def test_raster0_multicasts_a(monkeypatch, tmp_path):
    """Raster 0: blocks 2j, 2j + 1 are adjacent column blocks of one row block: A's box (128 x 64) is multicast in
    two halves always (a tensor map of 64-row boxes), B's behind the run-time coordinate test."""
    src = sm90a_source(monkeypatch, mm())
    for mark in CLUSTER_MARKS:
        assert mark in src, mark
    assert src.count("  tl_cluster_sync();\n") == 2  # after the barrier inits, before exit
    assert "tl_mbar_wait(&" not in src and "tl_mbar_wait_bounded(&" in src
    assert re.search(r"\(bx \^ 1\)", src), "B's peer coordinates (bx ^ 1)"
    assert "const __grid_constant__ tl_tensor_map tl_tmap2" in src
    plain = sm90a_source(monkeypatch, mm(cluster=1))
    for mark in CLUSTER_MARKS:
        assert mark not in plain, mark
    if os.access(NVCC, os.X_OK):
        regs = []
        for name, s in (("cluster", src), ("plain", plain)):
            v = ptxas_v(s, tmp_path, name)
            assert "0 bytes spill stores" in v and "0 bytes spill loads" in v, v
            regs.append(re.findall(r"Used (\d+) registers", v))
        assert regs[0] == regs[1], regs


@compiles
def test_raster_panel_multicasts_b(monkeypatch):
    """A rasterized order with an even panel: tiles 2j, 2j + 1 are two row blocks of one column block, so the B tile
    is the shared one, found at run time by evaluating the boxes' coordinates (the raster order's index math) for the
    block index ^ 1 as well."""
    src = sm90a_source(monkeypatch, mm(M=1024, N=1024, raster=2))
    for mark in CLUSTER_MARKS:
        assert mark in src, mark
    assert "(ids ^ 1)" in src


@compiles
def test_persistent_cluster(monkeypatch):
    src = sm90a_source(monkeypatch, mm(M=1024, N=1024), {"tl.persistent": 4})
    for mark in CLUSTER_MARKS:
        assert mark in src, mark
    assert re.findall(r"for \(int tl_tile = bx; tl_tile < (\d+); tl_tile \+= (\d+)\)", src) == [("32", "4")] * 2
    assert "(tl_tile ^ 1)" in src


@compiles
def test_fallbacks(monkeypatch):
    # N / block_N = 3 column blocks: no cluster along x covers the grid; the kernel is the plain one
    odd = sm90a_source(monkeypatch, mm(N=768))
    assert "__cluster_dims__" not in odd and "setmaxnreg.inc" in odd
    # TL_CUDA_CLUSTER=0 at build time ignores the hint (in the cache key: a stale hit would fail this)
    assert "__cluster_dims__" in sm90a_source(monkeypatch, mm())
    monkeypatch.setenv("TL_CUDA_CLUSTER", "0")
    off = tilelang.compile(mm(), target="cuda").get_kernel_source().split(".sm_90a.cu", 1)[1]
    assert "__cluster_dims__" not in off and "setmaxnreg.inc" in off


@pytest.mark.parametrize("dims", [3, (1, 2), (2, 2), (2, 1, 2), 0, True, "2"])
def test_bad_cluster_dims(dims):
    with pytest.raises(TileLangError) as info:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=64, cluster_dims=dims):
                pass
    assert "cluster_dims" in str(info.value) and "not supported" in str(info.value)


def test_matmul_bad_cluster():
    with pytest.raises(ValueError, match="cluster=3 must be 1 or 2"):
        mm(cluster=3)


@compiles
def test_cpu_target_unchanged():
    k = tilelang.compile(gemm.matmul(96, 64, 128, dtype="bfloat16", out_dtype="bfloat16", block_M=32, block_N=32,
                                     block_K=32, num_stages=2, threads=128, cluster=2), target="cpu")
    rng = np.random.default_rng(3)
    A, B = to_bf16_bits(rng.standard_normal((96, 128))), to_bf16_bits(rng.standard_normal((128, 64)))
    C = np.full((96, 64), 0x7FC0, np.uint16)
    k(A, B, C)
    ref = from_bf16_bits(A).astype(np.float64) @ from_bf16_bits(B).astype(np.float64)
    got = from_bf16_bits(C).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 4e-3


def test_hopper_bench_cluster_configs():
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import hopper_bench as hb
    large = [c for c in hb.GEMM_CONFIGS_LARGE if "cluster2" in c[7:]]
    m128 = [c for c in hb.GEMM_CONFIGS_M128 if "cluster2" in c[7:]]
    assert len(large) >= 3 and len(m128) >= 1
    case = hb.gemm_case(4096, 4096, 4096, "bfloat16", hb.GEMM_CONFIGS_LARGE)
    # the bench keeps no persistent cluster config (12-20 % slower on the H200); the program must still carry both
    for cfg in large + [(128, 256, 64, 256, 3, 0, 1, "persistent", "cluster2")]:
        assert "hint cluster 2" in case.program(cfg).script(), cfg
        assert case.pass_configs(cfg) == ({"tl.persistent": True} if "persistent" in cfg[7:] else None), cfg
    assert "hint cluster" not in case.program((128, 256, 64, 256, 3, 0, 1, "persistent")).script()
