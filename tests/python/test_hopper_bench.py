"""tools/bench/hopper_bench.py (issue #11's H200 benchmark) without a GPU: its --self-test runs
every benchmark group at tiny sizes on the CPU device (the same factories, configs, argument
order and float64 references as on the H200, numpy standing in for the peers), and its checks
must reject a kernel given its arguments in the wrong order.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_hopper_bench.py
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("tilelang_runtime")
from _helpers import ROOT, build_dir, use_tl_pack  # noqa: E402 - sys.path: the repo root, tilelang

BENCH = os.path.join(ROOT, "tools", "bench", "hopper_bench.py")
sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))


@pytest.fixture(scope="module")
def env():
    """The environment of a hopper_bench.py subprocess: this process's, with TL_PACK (tl-pack itself even where
    the caller's TL_PACK says otherwise), TL_CACHE_DIR and compiler/python on PYTHONPATH; skips without tl-pack
    (use_tl_pack also sets this process's TL_PACK / TL_CACHE_DIR unless set)."""
    tl_pack = use_tl_pack()
    e = dict(os.environ, TL_PACK=tl_pack)
    e.setdefault("TL_CACHE_DIR", os.path.join(build_dir(), "tilelang-cache"))
    paths = [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]
    e["PYTHONPATH"] = os.pathsep.join(paths + [os.path.join(ROOT, "compiler", "python")])
    return e


def test_self_test_runs_every_group_on_the_cpu(env, tmp_path):
    out = tmp_path / "self.json"
    r = subprocess.run([sys.executable, BENCH, "--self-test", "--json", str(out)], env=env, capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "self-test: 13 rows, 0 problems" in r.stdout
    data = json.loads(out.read_text())
    machine, rows = data[0], data[1:]
    assert machine["device"] == "cpu" and machine["copy_bandwidth_TBps"] > 0
    assert set(machine["matrix_rates"]) == {"bfloat16", "float16"}
    groups = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
        assert row["ours_err"] < 1e-2, row
        assert row["peers"]["numpy"]["err"] < 1e-2, row
        assert row["floor_ms"] > 0 and 0 < row["of_floor"]["ours"]
        # ratio and rates are consistent with the times
        assert row["rate"]["ours"] == pytest.approx(
            (row["flops"] if row["unit"] == "TFLOP/s" else row["min_bytes"]) / row["ours_ms"] / 1e9)
    assert {g: len(v) for g, v in groups.items()} == {"gemm": 4, "attention": 4, "w4a16": 3, "norm": 2}
    # the table has one line per row and the floors in it
    assert r.stdout.count("| GEMM ") == 4 and "(compute)" in r.stdout and "(memory)" in r.stdout
    # the W4A16 decode rows (M = 1, 16) carry their read floor: every read_sum config exact and timed, the peer
    # read exact and timed, the ratios the times' (the prefill row has none)
    for row in groups["w4a16"]:
        rf = row.get("read_floor")
        if row["params"]["M"] > 16:
            assert rf is None, row["label"]
            continue
        assert rf["bytes"] == 512 * 512 // 2 + 512 * 4 * 2
        assert len(rf["configs"]) == 3 and all(e["err"] == 0.0 and e["ms"] > 0 for e in rf["configs"]), rf
        assert rf["ms"] == min(e["ms"] for e in rf["configs"]) and rf["peer"]["err"] == 0.0
        assert rf["ours_over_read"] == pytest.approx(row["ours_ms"] / rf["ms"])
        assert rf["ours_over_peer_read"] == pytest.approx(row["ours_ms"] / rf["peer"]["ms"])
    assert "W4A16 decode read floor" in r.stdout and r.stdout.count("| W4A16 g128 ") == 3 + 2


def test_checks_reject_wrong_argument_order(env):
    """The correctness check is what gates timing: swapped GEMM operands and an RMSNorm weight
    that is not the one the reference uses must both fail it."""
    import numpy as np
    import hopper_bench as hb
    be = hb.NumpyBackend()
    rng = np.random.default_rng(3)
    case = hb.gemm_case(64, 64, 64, "float16", [(64, 64, 32, 128, 2)])
    k, _ = hb.compile_case(case, case.configs[0], "cpu")
    x = case.make(be, rng)
    out = be.nan(*case.out_spec)
    k(*case.args(x, out))
    assert case.check(be, x, out) < 1e-3
    out = be.nan(*case.out_spec)
    k(x["B"], x["A"], out)
    assert case.check(be, x, out) > 0.5
    norm = hb.norm_case("rmsnorm", 4, 256, [(1, 128, "shared", 1)])
    k, _ = hb.compile_case(norm, norm.configs[0], "cpu")
    x = norm.make(be, rng)
    out = be.nan(*norm.out_spec)
    k(*norm.args(x, out))
    assert norm.check(be, x, out) < 1e-2
    w = be.randn((256,), "bfloat16", rng)
    k(x["X"], w, out)
    assert norm.check(be, x, out) > 0.5


@pytest.mark.parametrize("argv, msg", [
    (["--gemm-shapes", "4096x4096"], "--gemm-shapes: expected MxNxK (three positive integers), got '4096x4096'"),
    (["--gemm-shapes", "4096x4096x0"], "got '4096x4096x0'"),
    (["--gemm-configs", "[(128, 256, 64"], "--gemm-configs: not a Python literal"),
    (["--gemm-configs", "[(128, 256, 64, 256)]"], "--gemm-configs: bad config (128, 256, 64, 256)"),
    (["--gemm-configs", "[(128, 256, 64, 256, 3, 0, 1, 2)]"], "--gemm-configs: bad config"),
    (["--gemm-configs", "(128, 256, 64, 256, 3)"], "--gemm-configs: bad config 128"),
    (["--w4-ms", "1,16.5"], "--w4-ms: expected comma-separated positive integers (M values), got '16.5'"),
    (["--fa-configs", "((128, 128"], "--fa-configs: expected a tuple of"),
])
def test_bad_command_lines_are_usage_errors(argv, msg):
    """A malformed override is argparse's usage error (exit 2, the argument named), not a traceback."""
    r = subprocess.run([sys.executable, BENCH, *argv, "--precompile", "--only", "norm"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_gemm_overrides_parse():
    import hopper_bench as hb
    assert hb.parse_gemm_shapes("4096x4096x4096,16x8192x8192") == ((4096, 4096, 4096), (16, 8192, 8192))
    assert hb.parse_gemm_configs("[(128, 256, 64, 256, 3, 0, 1, 'persistent', 'cluster2'), [64, 64, 32, 128, 2]]") == (
        (128, 256, 64, 256, 3, 0, 1, "persistent", "cluster2"), (64, 64, 32, 128, 2))
    # every built-in GEMM config passes the check the override gets
    for cfgs in (hb.GEMM_CONFIGS_LARGE, hb.GEMM_CONFIGS_M128, hb.GEMM_CONFIGS_M16):
        assert hb.parse_gemm_configs(repr(list(cfgs))) == tuple(cfgs)


PROFILE = os.path.join(ROOT, "tools", "bench", "profile_kernel.py")


@pytest.mark.parametrize("argv, msg", [
    # m16b without STAGE_GROUPS (was an IndexError), BN not whole tiles per consumer warp (was silently truncated)
    (["w4a16", "16", "8192", "8192", "16", "128", "128", "4", "288", "m16b", "132"], "w4a16 m16b: expected"),
    (["w4a16", "16", "8192", "8192", "16", "136", "128", "4", "288", "m16b", "132", "1"],
     "w4a16 m16b: BN=136 must be a multiple of 16 x (THREADS / 32 - 1) = 128"),
    (["w4a16", "16", "8192", "8192.0", "16", "128", "128", "4", "288", "m16b", "132", "1"], "expected integers"),
    (["gemm", "4096", "4096", "4096", "bfloat16", "128", "256", "64", "256", "3", "0", "1", "cluster2", "swap"],
     "gemm: one VARIANT first"),
    (["gemm", "4096", "4096", "4096", "bfloat16", "128", "256", "64", "256", "3", "0", "2", "cluster2"],
     "cluster2 is matmul's"),
])
def test_profile_kernel_bad_command_lines_are_usage_errors(argv, msg):
    """Checked before torch is imported (so here, without torch or a GPU)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p] +
                                      [os.path.join(ROOT, "compiler", "python")])  # kernels.* import tilelang
    r = subprocess.run([sys.executable, PROFILE, *argv], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_profile_kernel_gemm_cluster2():
    """hopper_bench's 'cluster2' element (after or before 'persistent') is matmul(cluster=2) there too."""
    import argparse
    import hopper_bench as hb
    import profile_kernel as pk
    ap = argparse.ArgumentParser()
    head = ["4096", "4096", "4096", "bfloat16", "128", "256", "64", "256", "3", "0", "1"]
    for tail, pc in ((["cluster2"], None), (["persistent", "cluster2"], {"tl.persistent": True}),
                     (["cluster2", "persistent"], {"tl.persistent": True})):
        prog, pass_configs, split, _, _, _ = pk.gemm_program(ap, head + tail)
        assert "hint cluster 2" in prog.script() and pass_configs == pc and split == 1, tail
    prog, pass_configs, _, _, _, _ = pk.gemm_program(ap, head + ["persistent"])
    assert "hint cluster" not in prog.script() and pass_configs == {"tl.persistent": True}
    # every GEMM config of hopper_bench is a valid command line here, with the bench's pass_configs (h62: "bulk"
    # was an argument error)
    for M, cfgs in ((4096, hb.GEMM_CONFIGS_LARGE), (128, hb.GEMM_CONFIGS_M128), (16, hb.GEMM_CONFIGS_M16)):
        case = hb.gemm_case(M, 8192, 8192, "bfloat16", cfgs)
        for cfg in cfgs:
            cfg7 = list(cfg[:7]) + [0, 1][len(cfg[5:7]):]
            _, pass_configs, _, _, _, _ = pk.gemm_program(ap, [str(M), "8192", "8192", "bfloat16"] +
                                                         [str(v) for v in cfg7] + list(cfg[7:]))
            assert pass_configs == case.pass_configs(cfg), cfg


def test_every_full_size_case_has_a_fitting_config():
    import hopper_bench as hb
    cases = hb.all_cases()
    assert len(cases) == 10 + 8 + 3 + 2
    for c in cases:
        fitting = [cfg for cfg in c.configs if hb.fits(c, cfg)]
        assert fitting, c.label
    labels = {c.label for c in cases}
    assert "GEMM bfloat16 16x8192x8192" in labels and "W4A16 g128 1x8192x8192" in labels
    assert "FA fwd bfloat16 B1 H32 S16384 D64 causal" in labels


def test_flash_attention_variants_pick_their_pass_configs():
    """An FA config's "nows" / "persistent" element becomes its tilelang.compile pass_configs; the rest none."""
    import hopper_bench as hb
    case = next(c for c in hb.all_cases(only=("attention",)) if c.label == "FA fwd bfloat16 B4 H32 S4096 D128")
    assert case.pass_configs((128, 64, 256, 2, "nows")) == {"tl.disable_warp_specialized": True}
    assert case.pass_configs((128, 128, 256, 3, "pingpong", "persistent")) == {"tl.persistent": True}
    assert case.pass_configs((128, 128, 256, 2, "pingpong")) is None
    assert any("persistent" in cfg for cfg in case.configs)


def test_read_floor_configs_fit_the_full_size_decode_rows():
    """Every W4_READ_CONFIGS entry divides the N = K = 8192 buffers (n_w = 2^23, n_s = 2^18 int32 words), at most
    10 of them (device time), on both decode rows and no other; a config that does not divide is refused with
    the reason."""
    import hopper_bench as hb
    from read_floor import read_sum, read_sum_fits
    rows = {c.params["M"]: getattr(c, "read_floor", None) for c in hb.all_cases(only=("w4a16",))}
    assert rows[128] is None
    for M in (1, 16):
        rf = rows[M]
        assert (rf.n_w, rf.n_s, rf.nbytes) == (1 << 23, 1 << 18, 8192 * 4096 + 8192 * 64 * 2)
        assert 0 < len(rf.configs) <= 10 and all(rf.fits(cfg) for cfg in rf.configs), rf.configs
    assert "not 1000 blocks" in read_sum_fits(1 << 23, 1 << 18, 1000, 256, 4, 1024, 1)
    assert "16-byte vector per thread" in read_sum_fits(1 << 23, 1 << 18, 512, 256, 1, 512, 1)
    with pytest.raises(ValueError, match="read_sum: cols=6"):
        read_sum(1 << 23, 1 << 18, 512, 256, 4, 6, 1)


def test_read_floor_check_rejects_a_wrong_reduction(env):
    """The read floor is only timed when its sums are exact: read_sum on the CPU matches read_sum_ref; one wrong
    sum, or a block that read another block's scales, fails the check; through run_read_floor such a config (and
    a peer read giving a wrong total) is not timed, and read_floor_problems reports it."""
    import numpy as np
    import hopper_bench as hb
    be = hb.NumpyBackend()
    case = hb.w4_case(1, 512, 512, [], read_configs=hb.TINY["w4_read_cfgs"])
    rf = case.read_floor
    x = case.make(be, np.random.default_rng(7))
    cfg = rf.configs[0]
    k, _ = hb.compile_case(rf, cfg, "cpu")
    out = rf.out(be, cfg)
    args = rf.args(x, out, cfg)
    assert args[0].base is not None and np.shares_memory(args[0], x["W"]) and np.shares_memory(args[1], x["S"])
    k(*args)
    assert rf.check(be, x, out, cfg) == 0.0
    out[3, 0] += 1
    assert rf.check(be, x, out, cfg) == pytest.approx(1 / out.size)
    k(args[0], np.roll(args[1], 1, axis=0), out)  # each block sums one step's slice of S from the wrong place
    assert rf.check(be, x, out, cfg) > 0

    good_args = rf.args
    rf.args = lambda x_, o, c: [good_args(x_, o, c)[0], np.roll(good_args(x_, o, c)[1], 1, axis=0), o]
    rf.peer = lambda be_, x_: (lambda: (np.int64(1), np.int64(2)))
    rf.configs = [cfg]
    entry = hb.run_read_floor(rf, be, "cpu", x, lambda *_: None)
    assert entry["configs"][0]["err"] > 0 and "ms" not in entry["configs"][0] and "ms" not in entry
    assert entry["peer"]["err"] == 1.0 and "ms" not in entry["peer"]
    problems = hb.read_floor_problems({"label": case.label, "read_floor": entry})
    assert len(problems) == 2 and "no read_sum config both exact and timed" in problems[0], problems
    assert hb.read_floor_problems({"label": case.label}) == [f"{case.label}: no read floor"]


def test_precompile_includes_the_read_floor_kernels(monkeypatch):
    """The device compiles nothing: --precompile builds every read_sum config of the decode rows too."""
    import hopper_bench as hb
    seen = []
    monkeypatch.setattr(hb, "compile_case", lambda c, cfg, target: seen.append((c.label, tuple(cfg))) or (None, 0.0))
    cases = [c for c in hb.all_cases(only=("w4a16",))]
    for c in cases:
        c.configs = []
    assert hb.precompile(cases, 1) == 0
    assert seen == [(f"W4A16 g128 {M}x8192x8192 read floor", tuple(cfg)) for M in (1, 16) for cfg in hb.W4_READ_CONFIGS]


def test_read_sum_sm90a_loads_16_bytes(env, tmp_path):
    """read_sum for sm_90a moves the buffers in 16-byte pieces, no spills: serial (stages 1): ld.global.nc.v4
    into shared memory; pipelined with 1 KiB tile rows: TMA boxes (cp.async.bulk.tensor) for W and S, no
    per-thread loads; with 4 KiB rows (over TMA's 256-element box): 16-byte cp.async for W."""
    import re
    import tilelang
    from _helpers import NVCC, ptx_of, ptxas_v, source_parts
    from read_floor import read_sum
    for cfg in ((512, 256, 4, 1024, 1), (512, 256, 16, 256, 3), (512, 256, 4, 1024, 3)):
        src = tilelang.compile(read_sum(1 << 23, 1 << 18, *cfg), target="sm_90a").get_kernel_source()
        parts = source_parts(src)
        src = parts.get("main_kernel.sm_90a.cu", src)
        ptx = ptx_of(src, tmp_path)  # skips without nvcc
        info = ptxas_v(src, tmp_path)
        assert "0 bytes spill stores" in info, (cfg, info)
        ldg = len(re.findall(r"ld\.global\.nc\.v4\.u32", ptx))
        tma = len(re.findall(r"cp\.async\.bulk\.tensor\.2d", ptx))
        cpa = len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx))
        narrow = re.findall(r"ld\.global(?:\.nc)?\.(?:u32|b32|s32|v2)", ptx)
        assert not narrow, (cfg, narrow)
        if cfg[4] == 1:
            assert ldg > 0 and tma == 0 and cpa == 0, (cfg, ldg, tma, cpa)
        elif cfg[3] <= 256:
            assert tma > 0 and ldg == 0 and cpa == 0, (cfg, ldg, tma, cpa)
        else:
            assert cpa > 0 and ldg == 0, (cfg, ldg, tma, cpa)


def test_floor_is_the_larger_of_bytes_and_flops():
    import hopper_bench as hb
    rows = [{"group": "gemm", "dtype": "bfloat16", "unit": "TFLOP/s", "flops": 2e12, "min_bytes": 1e9,
             "ours_ms": 4.0, "peers": {"cuBLAS": {"ms": 2.0}}},
            {"group": "norm", "dtype": "bfloat16", "unit": "TB/s", "flops": 0.0, "min_bytes": 4e9,
             "ours_ms": 2.0, "peers": {"torch": {"ms": 1.0}}}]
    rates = hb.matrix_rates_from(rows)
    assert rates["bfloat16"] == pytest.approx(1e15)  # the best GEMM time: cuBLAS, 2e12 FLOP in 2 ms
    hb.add_floors(rows, 4e12, rates)
    assert rows[0]["floor_ms"] == pytest.approx(2.0) and rows[0]["floor_bound"] == "compute"
    assert rows[0]["of_floor"]["ours"] == pytest.approx(0.5)
    assert rows[1]["floor_ms"] == pytest.approx(1.0) and rows[1]["floor_bound"] == "memory"
    assert rows[1]["rate"]["ours"] == pytest.approx(2.0) and rows[1]["of_floor"]["torch"] == pytest.approx(1.0)
    # --only attention: no GEMM row, so no matrix rate; the FLOP-bound row gets no floor rather than its bytes' time
    fa = [{"group": "attention", "dtype": "bfloat16", "unit": "TFLOP/s", "flops": 1e12, "min_bytes": 1e8,
           "ours_ms": 2.0, "peers": {"SDPA-cuDNN": {"ms": 1.8}}, "label": "FA", "ours_cfg": None, "ours_err": 1e-3}]
    hb.add_floors(fa, 4e12, hb.matrix_rates_from(fa))
    assert fa[0]["floor_ms"] is None and fa[0]["floor_bound"].startswith("no matrix rate")
    assert fa[0]["of_floor"]["ours"] is None and fa[0]["rate"]["ours"] == pytest.approx(500.0)
    assert "| n/a (no matrix rate: no GEMM row in this run) | n/a |" in hb.table(fa, {"device": "x"})


@pytest.mark.parametrize("M,N,K,panel", [(320, 192, 64, 2), (256, 256, 128, 3)])
def test_rasterized_gemm_matches_numpy(env, M, N, K, panel):
    """matmul(raster=P): every output block is computed once, by the block the panel order maps
    to it (row blocks not a multiple of the panel included)."""
    import numpy as np
    import tilelang
    from kernels import gemm
    rng = np.random.default_rng(panel)
    k = tilelang.compile(gemm.matmul(M, N, K, dtype="float16", out_dtype="float16", block_M=64, block_N=64,
                                     raster=panel), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    k(a, b, c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3
    with pytest.raises(ValueError, match="raster=2 needs static M and N"):
        gemm.matmul("M", N, K, raster=2)


def test_lut_w4a16_matches_numpy_at_edges(env):
    """w4_lut_matmul with M and N not multiples of the tile (zero-scale columns past N stay finite)."""
    import numpy as np
    import tilelang
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(5)
    M, N, K = 13, 96, 384
    k = tilelang.compile(qg.w4_lut_matmul(M, N, K, block_N=64, num_stages=2), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    packed, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, 128)
    s16 = scales.astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    k(a, packed, s16, c)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s16.astype(np.float64), 128)
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3


@pytest.mark.parametrize("M,N,K,cfg", [
    (1, 40, 512, dict(block_N=16, block_K=128, threads=64)),                    # N not a multiple of block_N
    (3, 48, 768, dict(block_N=16, block_K=256, threads=128, magic_round=True)),  # 2 groups per k-step
    (3, 24, 512, dict(block_M=4, block_N=16, block_K=256, threads=128)),         # M < block_M
    (16, 32, 256, dict(block_M=2, block_N=16, block_K=64, threads=64, magic_round=True)),  # block_K < group
])
def test_w4a16_gemv_matches_numpy(env, M, N, K, cfg):
    """w4a16_gemv (bench kind "gemv", manifest w4a16_g128_gemv*) against the float64 product of A and the
    dequantized weights, both nibble splits (floor, and the rounding constant CUDA uses); the random
    weights cover every byte value, so every pair of signed nibbles is decoded."""
    import numpy as np
    import tilelang
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(M * 1000 + N)
    k = tilelang.compile(qg.w4a16_gemv("M", N, K, num_stages=2, **cfg), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    q = rng.integers(-8, 8, size=(N, K))  # every nibble value, -8 included (quantize_ref never makes it)
    u = (q & 0xF).astype(np.uint8)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    assert len(np.unique(packed)) == 256
    s16 = (rng.random((N, K // 128)) * 0.05 + 0.01).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    k(a, packed, s16, c)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s16.astype(np.float64), 128)
    assert np.isfinite(c).all()
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3


def test_w4a16_gemv_rejects_bad_tiles():
    from kernels import quant_gemm as qg
    with pytest.raises(ValueError, match="block_K=96 and group_size=128: one must divide the other"):
        qg.w4a16_gemv(1, 64, 768, block_K=96)
    with pytest.raises(ValueError, match="K=640 must be a multiple of group_size=128 and block_K=256"):
        qg.w4a16_gemv(1, 64, 640, block_K=256)
    with pytest.raises(ValueError, match="block_K a multiple of 8, got K=512, block_K=12"):
        qg.w4a16_gemv(1, 64, 512, block_K=12)


@pytest.mark.parametrize("M,N,K,cfg", [
    (16, 40, 512, dict(block_N=32)),                                # N not a multiple of block_N
    (5, 64, 256, dict(block_N=32, num_stages=2, magic_round=True)),  # M < block_M
    (20, 48, 384, dict(block_N=16, threads=64, magic_round=True)),   # two row blocks, the second partial
])
def test_w4a16_mma_matches_numpy(env, M, N, K, cfg):
    """w4a16_mma (bench kind "mma", manifest w4a16_g128_mma): exact integer weights in the gemm tile, the
    group scales applied to each k-step's accumulator, against float64 on every byte value."""
    import numpy as np
    import tilelang
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(M * 1000 + N)
    k = tilelang.compile(qg.w4a16_mma("M", N, K, **cfg), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    q = rng.integers(-8, 8, size=(N, K))
    u = (q & 0xF).astype(np.uint8)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    assert len(np.unique(packed)) == 256
    s16 = (rng.random((N, K // 128)) * 0.05 + 0.01).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    k(a, packed, s16, c)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s16.astype(np.float64), 128)
    assert np.isfinite(c).all()
    assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3
    with pytest.raises(ValueError, match="K=200 must be a multiple of group_size=128"):
        qg.w4a16_mma(1, 64, 200)


@pytest.mark.parametrize("M,N,K,split,cfg", [
    (16, 64, 1024, 2, dict(block_N=32, num_stages=3)),
    # partial row and column tiles, two groups per k-step
    (5, 96, 1024, 4, dict(block_N=64, num_stages=2, groups_per_step=2, workspace=True)),
    (20, 48, 1024, 8, dict(block_N=32, threads=64, workspace=True)),  # two row blocks, one group per split
    (3, 32, 768, 3, dict(block_N=32, num_stages=2, workspace=True)),  # 6 groups: 3 splits of 2
])
def test_w4a16_mma_split_k_matches_numpy(env, M, N, K, split, cfg):
    """w4a16_mma(split_k=S) (bench configs (..., kind, S)): S blocks per output tile over K / S each, float32
    atomics into the workspace, one cast -- against float64 on random weights, scales and activations, called
    three times (the workspace is zero at every call: no result doubles; the caller's is zero afterwards)."""
    import numpy as np
    import tilelang
    from kernels import quant_gemm as qg
    rng = np.random.default_rng(M * 1000 + N + split)
    k = tilelang.compile(qg.w4a16_mma("M", N, K, magic_round=True, split_k=split, **cfg), target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    q = rng.integers(-8, 8, size=(N, K))
    u = (q & 0xF).astype(np.uint8)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    s16 = (rng.random((N, K // 128)) * 0.05 + 0.01).astype(np.float16)
    ref = qg.quant_matmul_ref(a.astype(np.float64), q, s16.astype(np.float64), 128)
    wk = np.zeros((M, N), np.float32)
    for _ in range(3):
        c = np.full((M, N), np.nan, np.float16)
        k(a, packed, s16, c, *([wk] if cfg.get("workspace") else []))
        assert np.isfinite(c).all()
        assert np.abs(c - ref).max() / np.abs(ref).max() < 2e-3
        assert not wk.any()
    # a workspace that is not zero adds into the result (what the bench's zero check guards against)
    if cfg.get("workspace"):
        wk[:] = 1000.0
        k(a, packed, s16, c, wk)
        assert np.abs(c.astype(np.float64) - ref - 1000.0).max() < 1.0 and not wk.any()


@pytest.mark.parametrize("kw,msg", [
    (dict(split_k=3), "split_k=3 must be a positive int with split_k * groups_per_step (3 * 1) dividing "
                      "K / group_size = 8"),
    (dict(split_k=2, groups_per_step=2, K=768), "split_k=2 must be a positive int with split_k * groups_per_step "
                                                "(2 * 2) dividing K / group_size = 6"),
    (dict(split_k=0), "split_k=0 must be a positive int"),
    (dict(split_k=2.0), "split_k=2.0 must be a positive int"),
])
def test_w4a16_mma_split_k_rejects_bad_splits(kw, msg):
    from kernels import quant_gemm as qg
    args = dict(M=16, N=64, K=1024)
    args.update(kw)
    with pytest.raises(ValueError) as info:
        qg.w4a16_mma(**args)
    assert str(info.value).startswith("w4a16_mma: " + msg), str(info.value)


def test_w4a16_split_config_checks_the_workspace(env):
    """hopper_bench's split-K W4A16 configs: a fresh zeroed workspace per config as the 5th argument; the check
    after the first call also requires it to be zero again."""
    import numpy as np
    import hopper_bench as hb
    be = hb.NumpyBackend()
    cfg = (16, 32, 128, 2, 128, "mma", 4)
    case = hb.w4_case(16, 64, 512, [cfg])
    assert hb.fits(case, cfg) and not hb.fits(case, (16, 32, 128, 2, 128, "mma", 3))  # 4 groups
    k, _ = hb.compile_case(case, cfg, "cpu")
    x = case.make(be, np.random.default_rng(5))
    out = be.nan(*case.out_spec)
    args = case.args(x, out, cfg)
    assert len(args) == 5 and args[4].dtype == np.float32 and not args[4].any()
    k(*args)
    assert case.check(be, x, out) < 1e-2
    args[4][:] = 1.0  # as if the cast kernel had not zeroed it
    x["_w"] = args[4]
    assert case.check(be, x, out) == float("inf")


def test_canaries_drop_the_configs_that_hang_or_fail():
    """--canary-timeout's parent (run_canaries): each unproven config (UNPROVEN: GEMM "tma_store", FlashAttention
    "persistent", ...) runs once in a child per kind of row; a child that outlives the timeout is killed and
    its config dropped from every row ("hung"), a child that exits nonzero drops it with its last line, one
    that exits 0 keeps it. The children here are stand-ins (sleep / exit 3 / exit 0) chosen by config."""
    import hopper_bench as hb
    cases = hb.all_cases(only=("gemm", "attention"), gemm_shapes=((4096, 4096, 4096), (128, 8192, 8192)))
    plan = hb.canary_plan(cases)
    assert plan and all(hb.unproven(c, cfg) for c, cfg in plan)
    # one child per config and kind of row: GEMM's first fitting row; attention's first causal and non-causal
    gemm_bulk = [cfg for c, cfg in plan if c.group == "gemm"]
    assert len(gemm_bulk) == len(set(gemm_bulk))
    assert all("bulk" in cfg or "gemm_pingpong" in cfg or "tma_store" in cfg for cfg in gemm_bulk)
    fa = [(c.params["causal"], cfg) for c, cfg in plan if c.group == "attention"]
    assert len(fa) == len(set(fa)) and {causal for causal, _ in fa} == {False, True}
    assert all("persistent" in cfg for _, cfg in fa)
    hang, fail = gemm_bulk[0], fa[0][1]

    def command(case, cfg):
        if cfg == hang:
            return [sys.executable, "-c", "import time; time.sleep(60)"]
        if cfg == fail:
            return [sys.executable, "-c", "print('canary: rel. error 3.1e-01'); raise SystemExit(3)"]
        return [sys.executable, "-c", "pass"]

    lines = []
    dropped = hb.run_canaries(cases, [], timeout_s=3, jobs=8, log=lines.append, command=command)
    assert {cfg for _, cfg in dropped} == {hang, fail}, dropped
    # dropped from every row that lists the config, with the reason
    rows_with_hang = [c.label for c in cases if c.group == "gemm" and hang in [tuple(x) for x in c.configs]]
    assert rows_with_hang and all((label, hang) in dropped for label in rows_with_hang)
    assert "hung: no result within 3 s (killed)" in dropped[(rows_with_hang[0], hang)]
    fail_why = next(w for (_, cfg), w in dropped.items() if cfg == fail)
    assert "failed (exit 3): canary: rel. error 3.1e-01" in fail_why
    assert any("config(s) dropped" in line for line in lines)


def test_canary_child_argv_drops_the_parents_own_options():
    import hopper_bench as hb
    argv = ["--only", "gemm", "--json", "x.json", "--canary-timeout", "60", "--budget-s=300", "--canary-jobs", "2",
            "--gemm-shapes", "4096x4096x4096"]
    assert hb.canary_child_argv(argv) == ["--only", "gemm", "--gemm-shapes", "4096x4096x4096"]


def test_canary_one_runs_a_config_on_the_cpu(env):
    """The child itself (--self-test selects the CPU device and the tiny rows): exit 0 with the error printed for a
    correct config, 4 for a config the row does not list."""
    import hopper_bench as hb
    case = hb.all_cases(tiny=True, only=("gemm",))[0]
    cfg = next(c for c in case.configs if hb.fits(case, c) and "tma_store" in c)
    r = subprocess.run([sys.executable, BENCH, "--self-test", "--only", "gemm", "--canary-one",
                        json.dumps([case.label, list(cfg)])], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"canary: {case.label} cfg={tuple(cfg)}: rel. error" in r.stdout
    r = subprocess.run([sys.executable, BENCH, "--self-test", "--only", "gemm", "--canary-one",
                        json.dumps([case.label, [1, 2, 3]])], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 4 and "canary: no row" in r.stdout, r.stdout + r.stderr


def test_worst_block_error_finds_one_misplaced_tile():
    """The canary child's full check (_worst_block_err, torch on the device; numpy here, the same operators): one
    128 x 128 tile of C stored in another tile's place -- in an 8192^2 C 1/4096 of the elements, ~2 % of its
    Frobenius norm, at the 2e-2 bound of a whole-matrix error -- is an error of ~1.4 in its block; bf16 rounding
    is not."""
    import numpy as np
    import hopper_bench as hb
    rng = np.random.default_rng(5)
    ref = rng.standard_normal((512, 384)).astype(np.float32)
    rounded = ref * (1 + rng.uniform(-2 ** -8, 2 ** -8, ref.shape).astype(np.float32))
    assert hb._worst_block_err(rounded, ref, (128, 128)) < 5e-3
    swapped = rounded.copy()
    swapped[128:256, 0:128], swapped[256:384, 256:384] = rounded[256:384, 256:384], rounded[128:256, 0:128]
    assert hb.rel_err(swapped, ref) < 1.0 and hb._worst_block_err(swapped, ref, (128, 128)) > 1.0
    nan = rounded.copy()
    nan[-1, -1] = np.nan
    assert hb._worst_block_err(nan, ref, (128, 128)) == float("inf")
    # attention's blocks: (batch * heads, S, D) in 64-row blocks; one head's rows 64..127 from another head
    o = rng.standard_normal((6, 256, 64)).astype(np.float32)
    bad = o.copy()
    bad[3, 64:128] = o[4, 64:128]
    assert hb._worst_block_err(o, o, (64, 64)) == 0.0 and hb._worst_block_err(bad, o, (64, 64)) > 1.0


def test_profile_list_picks_the_missed_rows_slowest_first(tmp_path):
    """--profile-list (hopper_bench.sh profile-best's choice of what ncu looks at): the GEMM / attention rows where
    ours is slower than the first peer, slowest ratio first, capped; split-K configs profile their split kernel."""
    def row(group, label, ours, peer, cfg):
        first = "cuBLAS" if group == "gemm" else "SDPA-cuDNN"
        return {"group": group, "label": label, "ours_ms": ours, "ours_cfg": cfg,
                "peers": {first: {"ms": peer}, "other": {"ms": ours * 10}}}
    rows = [row("gemm", "GEMM bfloat16 4096x4096x4096", 0.190, 0.182, [128, 256, 64, 256, 3, 0, 1, "persistent"]),
            row("gemm", "GEMM bfloat16 8192x8192x8192", 1.47, 1.48, [128, 256, 64, 256, 4, 8]),  # met: not listed
            row("gemm", "GEMM bfloat16 128x8192x8192", 0.050, 0.044, [128, 128, 64, 256, 5, 0, 2]),
            row("attention", "FA fwd bfloat16 B4 H32 S4096 D128 causal", 1.06, 0.94, [128, 64, 256, 2, "nows"]),
            row("w4a16", "W4A16 g128 128x8192x8192", 0.06, 0.04, [128, 128, 128, 4, 256, "wgmma_sp", 2]),  # not GEMM
            {"group": "attention", "label": "FA failed", "peers": {"SDPA-cuDNN": {"ms": 1.0}}}]  # no ours: skipped
    path = tmp_path / "b.json"
    path.write_text(json.dumps([{"kind": "machine"}] + rows))
    r = subprocess.run([sys.executable, BENCH, "--profile-list", str(path), "--profile-max", "2"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [ln.split(" ", 2)[:2] for ln in lines] == [["gemm_bfloat16_128x8192x8192", "^main_k0"],
                                                     ["fa_fwd_bfloat16_b4_h32_s4096_d128_causal", "^main"]]
    assert json.loads(lines[1].split(" ", 2)[2]) == ["FA fwd bfloat16 B4 H32 S4096 D128 causal", [128, 64, 256, 2, "nows"]]
    r = subprocess.run([sys.executable, BENCH, "--profile-list", str(path)], capture_output=True, text=True, timeout=120)
    assert len(r.stdout.strip().splitlines()) == 3 and "gemm_bfloat16_4096x4096x4096 ^main " in r.stdout


def test_hopper_bench_sh_profile_one_needs_a_spec():
    """hopper_bench.sh profile-one SPEC [NAME] (ncu on one '[label, cfg]' on the device): without a spec it says what
    it expects and exits 2 before looking for a GPU, a torch or an ncu; the script parses."""
    sh = os.path.join(ROOT, "tools", "device", "hopper_bench.sh")
    assert subprocess.run(["bash", "-n", sh], capture_output=True, timeout=60).returncode == 0
    r = subprocess.run(["bash", sh, "profile-one"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "profile-one: expected SPEC ('[label, cfg]') [NAME]" in r.stderr


def test_profile_regex_names_the_kernel_ncu_profiles():
    """--profile-regex '[label, cfg]' (hopper_bench.sh profile-one): the split kernel of a split-K GEMM config,
    main_kernel for any other (attention configs' 7th element is a string); an unknown row or config exits 4."""
    def regex(label, cfg):
        return subprocess.run([sys.executable, BENCH, "--profile-regex", json.dumps([label, cfg])], capture_output=True,
                              text=True, timeout=120)
    r = regex("GEMM bfloat16 128x8192x8192", [128, 128, 64, 256, 5, 0, 2])
    assert (r.returncode, r.stdout.strip()) == (0, "^main_k0"), r.stderr
    r = regex("GEMM bfloat16 8192x8192x1024", [128, 256, 64, 256, 3, 8, 1, "persistent", "tma_store"])
    assert (r.returncode, r.stdout.strip()) == (0, "^main"), r.stderr
    r = regex("FA fwd bfloat16 B4 H32 S4096 D128", [128, 128, 256, 2, "overlap", "pingpong", "persistent"])
    assert (r.returncode, r.stdout.strip()) == (0, "^main"), r.stderr
    r = regex("GEMM bfloat16 8192x8192x1024", [128, 128, 64, 128, 4, 0, 1, "persistent", "gemm_pingpong", "cluster2"])
    assert r.returncode == 4 and "no row 'GEMM bfloat16 8192x8192x1024' with config" in r.stderr
