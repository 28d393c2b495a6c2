"""pass_configs={"tl.persistent": ...} (this project's key; upstream TileLang has none): the sm_90a warp-specialized
GEMM built as a persistent kernel for one compile, as TL_CUDA_PERSISTENT does for a whole tl-pack build.

- The sm_90a CUDA source (no GPU needed) of kernels.gemm.matmul 512^3 in 128x128 tiles (16 output tiles): without
  the key no tile loop; True -> both roles loop over the tiles with stride min(16, 132 SMs x 1 block) = 16; 2 ->
  stride 2 (a grid of 2 blocks, 8 tiles each); the PassConfigKey member is the same key; False builds the
  non-persistent kernel even where the environment says TL_CUDA_PERSISTENT=1, which otherwise applies (each form
  is its own cache entry: a stale hit would fail these checks). ptxas (where nvcc is installed) compiles the
  persistent kernel without spills.
- The persistent kernel's epilogue: the consumers' stores by default; with pass_configs {"tl.bulk_store": True}
  (opt-in, TL_CUDA_BULK_STORE=1: a build switch of the cache key) warp 0's bulk copies.
- pass_configs {"tl.tma_store": True} (opt-in, TL_CUDA_TMA_STORE=1): the staged epilogue tile 128B-swizzled and
  stored by thread 0's TMA tensor stores, in tl.bulk_store's place.
- pass_configs {"tl.gemm_pingpong": True} (opt-in, TL_CUDA_GEMM_PINGPONG=1: a build switch of the cache key): a
  persistent 128-thread GEMM as two consumer warpgroups on alternate tiles (384 threads, order barriers 3/4); without
  tl.persistent, or for a 256-thread block, the kernel is the one built without the key; a non-bool is refused.
- Bad values are refused naming the key and what it takes (1 is ambiguous: the environment's 1 means 132 SMs).
- On the CPU target the key changes nothing: the same GEMM against float64.
- hopper_bench's "persistent" GEMM configs carry the key; the 8192x8192x1024 one is persistent on sm_90a, and a
  config whose epilogue tile does not fit outside the stages stays warp-specialized (not persistent).

Run: PYTHONPATH=compiler/python:build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_persistent_pass_config.py
"""
import os
import re
import sys
import warnings

import numpy as np
import pytest

from _helpers import NVCC, ROOT, cuda_kernel_source, ptxas_v, source_parts  # sys.path: repo root, tilelang
import tilelang  # noqa: E402
from tilelang.errors import TileLangError  # noqa: E402

from kernels import gemm  # noqa: E402
from kernels._util import from_bf16_bits, to_bf16_bits  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build


def program():
    return gemm.matmul(512, 512, 512, dtype="bfloat16", out_dtype="bfloat16", block_M=128, block_N=128,
                       block_K=64, num_stages=3, threads=256)


def sm90a_source(monkeypatch, pass_configs=None):
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")
    parts = source_parts(cuda_kernel_source(program(), pass_configs=pass_configs))  # skips without a CUDA compiler
    return next(v for n, v in parts.items() if n.endswith(".sm_90a.cu"))


def tile_strides(src):
    """The persistent tile loops' (bound, stride): one per role (producer and consumers)."""
    return re.findall(r"for \(int tl_tile = bx; tl_tile < (\d+); tl_tile \+= (\d+)\)", src)


def test_persistent_per_compile(monkeypatch, tmp_path):
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)
    plain = sm90a_source(monkeypatch)
    assert "setmaxnreg.inc" in plain and "__launch_bounds__(384, 1)" in plain  # warp-specialized
    assert tile_strides(plain) == [] and "tl_tile" not in plain
    on = sm90a_source(monkeypatch, {"tl.persistent": True})
    assert tile_strides(on) == [("16", "16"), ("16", "16")], tile_strides(on)
    assert "setmaxnreg.inc" in on
    # no named barrier ends a tile (the next tile's post-drain one orders the epilogue tile's reuse)
    assert on.count("bar.sync 1, 256;") == plain.count("bar.sync 1, 256;") == 2
    two = sm90a_source(monkeypatch, {tilelang.PassConfigKey.TL_PERSISTENT: 2})
    assert tile_strides(two) == [("16", "2"), ("16", "2")], tile_strides(two)
    assert tile_strides(sm90a_source(monkeypatch, {"tl.persistent": np.int64(4)})) == [("16", "4")] * 2
    assert "tl_tile" not in sm90a_source(monkeypatch, {"tl.persistent": False})
    monkeypatch.setenv("TL_CUDA_PERSISTENT", "1")  # the whole-build switch: applies without the key ...
    assert tile_strides(sm90a_source(monkeypatch)) == [("16", "16")] * 2
    assert "tl_tile" not in sm90a_source(monkeypatch, {"tl.persistent": False})  # ... the key overrides it
    assert tile_strides(sm90a_source(monkeypatch, {"tl.persistent": 2})) == [("16", "2")] * 2
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(two, tmp_path, "persistent")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


def test_bulk_store_epilogue_switch(monkeypatch, tmp_path):
    """The persistent GEMM's epilogue with pass_configs {"tl.bulk_store": True} (opt-in: not yet run on a GPU):
    warp 0's per-row bulk copies (cp.async.bulk, the .read wait before the next tile's post-drain barrier, the
    full wait after the tile loop); by default, or with TL_CUDA_BULK_STORE=0, the consumers' 16-byte stores.
    It is a build switch, in the bundle cache key (the source here is always regenerated: the key is checked by
    membership), so a device A/B against a warm cache gets its own bundles."""
    from tilelang import compiler
    assert "TL_CUDA_BULK_STORE" in compiler.BUILD_SWITCHES
    assert compiler.build_env_for({"tl.bulk_store": True}) == {"TL_CUDA_BULK_STORE": "1"}
    assert compiler.build_env_for({tilelang.PassConfigKey.TL_BULK_STORE: False}) == {"TL_CUDA_BULK_STORE": "0"}
    with pytest.raises(TileLangError, match=r"tl.bulk_store.*True or False, got 'yes'"):
        compiler.build_env_for({"tl.bulk_store": "yes"})
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)
    monkeypatch.delenv("TL_CUDA_BULK_STORE", raising=False)
    default = sm90a_source(monkeypatch, {"tl.persistent": True})
    assert "tl_bulk_store(&" not in default and "cp.async.bulk.global" not in default
    on = sm90a_source(monkeypatch, {"tl.persistent": True, "tl.bulk_store": True})
    assert on.count("tl_bulk_store(&C[") == 1 and "cp.async.bulk.global.shared::cta.bulk_group" in on
    loop = on.rindex("for (int tl_tile = bx;")
    assert loop < on.index("tl_bulk_wait_read<0>();", loop) < on.index("bar.sync 1, 256;", loop) \
        < on.index("tl_bulk_store(&C[", loop) < on.index("tl_bulk_commit();", loop) < on.index("tl_bulk_wait<0>();", loop)
    monkeypatch.setenv("TL_CUDA_BULK_STORE", "0")
    off = sm90a_source(monkeypatch, {"tl.persistent": True})
    assert "tl_bulk_store(&" not in off and "cp.async.bulk.global" not in off
    assert tile_strides(off) == tile_strides(on) == [("16", "16"), ("16", "16")]
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(on, tmp_path, "bulk")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


def test_tma_store_epilogue_switch(monkeypatch, tmp_path):
    """pass_configs {"tl.tma_store": True} (opt-in: never run on a GPU yet): the persistent GEMM's staged epilogue
    tile 128B-swizzled and stored by thread 0's TMA tensor stores (128x128 bf16 tiles: two boxes of 128x64 a tile,
    a tensor map of C after A's and B's), with the bulk store's waits around them; it takes tl.bulk_store's place
    where both are set; by default, or with TL_CUDA_TMA_STORE=0, the consumers' 16-byte stores. A build switch of
    the cache key; a non-bool refused."""
    from tilelang import compiler
    assert "TL_CUDA_TMA_STORE" in compiler.BUILD_SWITCHES
    assert compiler.build_env_for({"tl.tma_store": True}) == {"TL_CUDA_TMA_STORE": "1"}
    assert compiler.build_env_for({tilelang.PassConfigKey.TL_TMA_STORE: False}) == {"TL_CUDA_TMA_STORE": "0"}
    with pytest.raises(TileLangError, match=r"pass_configs\['tl.tma_store'\] must be True or False, got 'on'"):
        compiler.build_env_for({"tl.tma_store": "on"})
    for var in ("TL_CUDA_PERSISTENT", "TL_CUDA_BULK_STORE", "TL_CUDA_TMA_STORE"):
        monkeypatch.delenv(var, raising=False)
    default = sm90a_source(monkeypatch, {"tl.persistent": True})
    assert "tl_tma_store_2d" not in default and "cp.async.bulk.tensor.2d.global" not in default
    for configs in ({"tl.persistent": True, "tl.tma_store": True},
                    {"tl.persistent": True, "tl.tma_store": True, "tl.bulk_store": True}):
        on = sm90a_source(monkeypatch, configs)
        assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in on and "tl_bulk_store(&" not in on
        assert on.count("tl_tma_store_2d(&tl_tmap2, &tl_epi_C_f[") == 2, on
        assert "const __grid_constant__ tl_tensor_map tl_tmap2" in on
        loop = on.rindex("for (int tl_tile = bx;")
        assert loop < on.index("tl_bulk_wait_read<0>();", loop) < on.index("bar.sync 1, 256;", loop) \
            < on.index("tl_tma_store_2d(", loop) < on.index("tl_bulk_commit();", loop) \
            < on.index("tl_bulk_wait<0>();", loop)
    monkeypatch.setenv("TL_CUDA_TMA_STORE", "0")
    off = sm90a_source(monkeypatch, {"tl.persistent": True})
    assert "tl_tma_store_2d" not in off
    assert tile_strides(off) == tile_strides(on) == [("16", "16"), ("16", "16")]
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(on, tmp_path, "tma_store")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


def test_gemm_pingpong_switch(monkeypatch, tmp_path):
    """pass_configs {"tl.gemm_pingpong": True} (opt-in: not yet run on a GPU) on a persistent 128x128 GEMM of one
    128-thread warpgroup: the ping-pong schedule (two consumer warpgroups each on its own tile, 384 threads, the
    order barriers 3/4, warpgroup 1's tile loop offset by one tile); ignored without tl.persistent and for a
    256-thread block (the same source as without the key); a build switch of the cache key; a non-bool refused."""
    from tilelang import compiler
    assert "TL_CUDA_GEMM_PINGPONG" in compiler.BUILD_SWITCHES
    assert compiler.build_env_for({"tl.gemm_pingpong": True}) == {"TL_CUDA_GEMM_PINGPONG": "1"}
    assert compiler.build_env_for({tilelang.PassConfigKey.TL_GEMM_PINGPONG: False}) == {"TL_CUDA_GEMM_PINGPONG": "0"}
    for bad in ("yes", 2, 1.0, None):
        with pytest.raises(TileLangError, match=r"pass_configs\['tl.gemm_pingpong'\] must be True or False, got "):
            compiler.build_env_for({"tl.gemm_pingpong": bad})
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)
    monkeypatch.delenv("TL_CUDA_GEMM_PINGPONG", raising=False)
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")

    def source(threads, pass_configs):
        prog = gemm.matmul(512, 512, 512, dtype="bfloat16", out_dtype="bfloat16", block_M=128, block_N=128,
                           block_K=64, num_stages=4, threads=threads)
        parts = source_parts(cuda_kernel_source(prog, pass_configs=pass_configs))
        return next(v for n, v in parts.items() if n.endswith(".sm_90a.cu"))

    on = source(128, {"tl.persistent": True, "tl.gemm_pingpong": True})
    coop = source(128, {"tl.persistent": True})
    assert "__launch_bounds__(384, 1)" in on and "if (tl_tid >= 256) {" in on
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in on
    for b in ("bar.sync 3, 256;", "bar.arrive 3, 256;", "bar.sync 4, 256;", "bar.arrive 4, 256;", "bar.sync 2, 128;"):
        assert b in on, b
    assert "for (int tl_tile = (bx + 16); tl_tile < 16; tl_tile += 32)" in on  # warpgroup 1: t_1, t_3, ...
    assert "bar.sync 3, 256;" not in coop and "__launch_bounds__(256," in coop
    assert source(128, {"tl.gemm_pingpong": True}) == source(128, None)  # not persistent: ignored
    assert source(256, {"tl.persistent": True, "tl.gemm_pingpong": True}) == source(256, {"tl.persistent": True})
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(on, tmp_path, "pingpong")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info
        assert "Used 168 registers" in info, info


def test_the_key_is_known():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown key warns
        from tilelang.pass_config import check_pass_configs
        assert check_pass_configs({"tl.persistent": True}) == {"tl.persistent": True}


@pytest.mark.parametrize("value,msg", [
    (1, "pass_configs['tl.persistent'] = 1 is ambiguous"),
    (-3, "pass_configs['tl.persistent'] must be True, False or a number of SMs >= 2, got -3 (int)"),
    ("yes", "pass_configs['tl.persistent'] must be True, False or a number of SMs >= 2, got 'yes' (str)"),
    (2.5, "pass_configs['tl.persistent'] must be True, False or a number of SMs >= 2, got 2.5 (float)"),
    (2**31, "got 2147483648 (int)"),
])
def test_bad_values_are_refused(value, msg):
    with pytest.raises(TileLangError) as info:
        tilelang.compile(program(), target="cpu", pass_configs={"tl.persistent": value})
    assert msg in str(info.value)


def test_cpu_target_unchanged():
    k = tilelang.compile(gemm.matmul(96, 64, 128, dtype="bfloat16", out_dtype="bfloat16", block_M=32, block_N=32,
                                     block_K=32, num_stages=2, threads=128), target="cpu",
                         pass_configs={"tl.persistent": True})
    rng = np.random.default_rng()
    A, B = to_bf16_bits(rng.standard_normal((96, 128))), to_bf16_bits(rng.standard_normal((128, 64)))
    C = np.full((96, 64), 0x7FC0, np.uint16)
    k(A, B, C)
    ref = from_bf16_bits(A).astype(np.float64) @ from_bf16_bits(B).astype(np.float64)
    got = from_bf16_bits(C).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 4e-3


def test_hopper_bench_persistent_configs(monkeypatch):
    """hopper_bench's "persistent" GEMM configs compile with the key, the others without; at 8192x8192x1024 the
    128x256x64 3-stage one is persistent over 132 blocks (2048 tiles), and 4 stages -- whose epilogue tile has no
    shared memory outside the stages -- stays the warp-specialized non-persistent kernel (not one without its
    producer warpgroup)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import hopper_bench as hb
    persistent = [c for c in hb.GEMM_CONFIGS_LARGE + hb.GEMM_CONFIGS_M128 + hb.GEMM_CONFIGS_M16 if "persistent" in c[7:]]
    assert len(persistent) >= 3
    case = hb.gemm_case(8192, 8192, 1024, "bfloat16", hb.GEMM_CONFIGS_LARGE)
    for cfg in case.configs:  # "tma_store" / "gemm_pingpong": the opt-in tl.tma_store / tl.gemm_pingpong besides
        want = {**({"tl.persistent": True} if "persistent" in cfg[7:] else {}),
                **({"tl.bulk_store": True} if "bulk" in cfg[7:] else {}),
                **({"tl.tma_store": True} if "tma_store" in cfg[7:] else {}),
                **({"tl.gemm_pingpong": True} if "gemm_pingpong" in cfg[7:] else {})}
        assert case.pass_configs(cfg) == (want or None), cfg
    assert any("tma_store" in c[7:] and "persistent" in c[7:] for c in case.configs)
    assert any("gemm_pingpong" in c[7:] and "persistent" in c[7:] for c in case.configs)
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)

    def source(cfg, pass_configs):
        src = cuda_kernel_source(case.program(cfg), pass_configs=pass_configs)  # skips without a CUDA compiler
        return src.split(".sm_90a.cu", 1)[1]

    cfg = (128, 256, 64, 256, 3, 0, 1, "persistent")
    assert cfg in hb.GEMM_CONFIGS_LARGE
    src = source(cfg, case.pass_configs(cfg))
    assert tile_strides(src) == [("2048", "132")] * 2 and "__launch_bounds__(384, 1)" in src
    # The ping-pong configs (128x128x64, 128 threads): two consumer warpgroups on alternate tiles of 132 blocks.
    for cfg in [c for c in case.configs if "gemm_pingpong" in c[7:]]:
        pp = source(cfg, case.pass_configs(cfg))
        assert "bar.sync 4, 256;" in pp and "__launch_bounds__(384, 1)" in pp, cfg
        # warpgroup 1's tiles: b + 132, b + 3 * 132, ... (b: bx, or the rasterized order's linear block index)
        assert re.search(r"for \(int tl_tile = \(\w+ \+ 132\); tl_tile < 4096; tl_tile \+= 264\)", pp), cfg
    four = source((128, 256, 64, 256, 4), {"tl.persistent": True})
    assert "tl_tile" not in four and "__launch_bounds__(384, 1)" in four and "setmaxnreg.inc" in four


def test_persistent_ring_switch(monkeypatch, tmp_path):
    """TL_CUDA_PERSISTENT_RING=1 (opt-in, a build switch of the cache key): a persistent kernel's ring of stages
    continues across its tiles -- 64 k-steps over 3 stages ((64 - 1) % 3 == 0) restarted per tile make each
    tile's first fill wait for the previous tile's last k-step -- instead of restarting per tile (the default:
    no slower on the H200, 2026-12-05): the producer's stage and the consumers' stage index read the ring;
    ptxas compiles both without spills."""
    from tilelang import compiler
    assert "TL_CUDA_PERSISTENT_RING" in compiler.BUILD_SWITCHES
    monkeypatch.delenv("TL_CUDA_PERSISTENT", raising=False)
    monkeypatch.delenv("TL_CUDA_PERSISTENT_RING", raising=False)
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")

    def source():
        prog = gemm.matmul(1024, 1024, 4096, dtype="bfloat16", out_dtype="bfloat16", block_M=128, block_N=256,
                           block_K=64, num_stages=3, threads=256)
        parts = source_parts(cuda_kernel_source(prog, pass_configs={"tl.persistent": True}))
        return next(v for n, v in parts.items() if n.endswith(".sm_90a.cu"))

    restart = source()
    assert "tl_ring" not in restart and "tl_ws_ring" not in restart
    assert "const int tl_ws_s = ((k - 0) % 3);" in restart and "const int tl_stage_0 = ((k - 0) % 3);" in restart
    monkeypatch.setenv("TL_CUDA_PERSISTENT_RING", "1")
    ring = source()
    assert "const int tl_ws_s = (((k - 0) + tl_ws_ring) % 3);" in ring
    assert "tl_ws_ring = ((tl_ws_ring + (64 - 0)) % 3);" in ring and "tl_ring = ((tl_ring + (64 - 0)) % 3);" in ring
    assert "const int tl_stage_0 = (((k - 0) + tl_ring) % 3);" in ring
    if os.access(NVCC, os.X_OK):
        for name, src in (("ring", ring), ("restart", restart)):
            info = ptxas_v(src, tmp_path, name)
            assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info
