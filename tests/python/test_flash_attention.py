"""kernels/attention.py flash_attention (issue #11's FlashAttention forward).

- On the CPU device against float64 softmax(Q K^T / sqrt(d)) V (kernels.attention.attention_ref) on fresh
  random inputs: causal with seq_q != seq_kv (past_len = seq_kv - seq_q > 0: the diagonal is offset, so the
  KV blocks that need the per-score mask are not the square ones), sequence lengths that are not multiples
  of block_M / block_N (a ragged last query block, a KV block crossing seq_kv), seq_q / seq_kv as T.dynamic
  symbols (one kernel, several lengths: the block-uniform mask test and the reversed causal block order
  are runtime expressions there), GQA, fp16 and bf16, the LSE output.
- The sm_90a CUDA source (no GPU needed) of hopper_bench's configs: causal grids walk the query blocks
  last-first (bq = ceildiv(seq_q, block_M) - 1 - bx), the per-score mask sits under a block-uniform
  `if (masked)` (and is absent without causality when seq_kv is a static multiple of block_N), masked scores are
  -inf so no exponent has a select, and O leaves through shared memory in 16-byte stores; ptxas (where nvcc is
  installed) compiles it without spills.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_flash_attention.py
"""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from _helpers import NVCC, count, cuda_kernel_source, ptx_of, ptxas_v, source_parts  # sys.path: the repo root, tilelang
import tilelang  # noqa: E402

from kernels import attention  # noqa: E402
from kernels._util import from_bf16_bits, rand  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build
RNG = np.random.default_rng()
# P is rounded to 16 bits before P.V (as on GPUs), O once more at the store.
TOL = {"bfloat16": 1.5e-2, "float16": 3e-3}


def decoded(x, dtype):
    return from_bf16_bits(x).astype(np.float64) if dtype == "bfloat16" else x.astype(np.float64)


def run(k, B, H, Hkv, Sq, Skv, D, causal, dtype, with_lse):
    q, q64 = rand(RNG, (B, H, Sq, D), dtype)
    kk, k64 = rand(RNG, (B, Hkv, Skv, D), dtype)
    v, v64 = rand(RNG, (B, Hkv, Skv, D), dtype)
    o = np.full((B, H, Sq, D), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((B, H, Sq, D), np.nan, dtype)
    args = [q, kk, v, o]
    if with_lse:
        args.append(np.full((B, H, Sq), np.nan, np.float32))
    k(*args)
    o_ref, lse_ref = attention.attention_ref(q64, k64, v64, causal)
    got = decoded(o, dtype)
    assert np.isfinite(got).all(), "rows left unwritten or NaN"
    err = np.abs(got - o_ref).max() / np.abs(o_ref).max()
    assert err < TOL[dtype], (Sq, Skv, causal, dtype, err)
    if with_lse:
        lse = args[4].astype(np.float64)
        assert np.abs(lse - lse_ref).max() < 1e-3 * np.abs(lse_ref).max() + 1e-3, np.abs(lse - lse_ref).max()


# (heads, kv_heads, seq_q, seq_kv, dim, causal, block_M, block_N, dtype, with_lse)
CASES = [
    (2, 2, 64, 192, 64, True, 32, 32, "float16", False),      # past_len 128: only the last KV blocks are masked
    (4, 2, 50, 177, 32, True, 32, 32, "bfloat16", True),      # past_len 127, both lengths ragged, GQA
    (2, 1, 100, 100, 64, True, 32, 64, "float16", True),       # square, ragged, block_N > block_M
    (2, 2, 37, 100, 32, False, 32, 32, "bfloat16", False),     # KV block crossing seq_kv
    (2, 2, 64, 128, 64, False, 32, 32, "float16", True),       # static multiple of block_N: no mask at all
    (1, 1, 96, 96, 32, True, 64, 32, "float16", False),        # block_M = 2 block_N: two masked blocks per row block
]


@pytest.mark.parametrize("H,Hkv,Sq,Skv,D,causal,bm,bn,dtype,lse", CASES)
def test_static_lengths_match_float64_on_the_cpu(H, Hkv, Sq, Skv, D, causal, bm, bn, dtype, lse):
    prog = attention.flash_attention(2, H, Hkv, Sq, Skv, D, is_causal=causal, with_lse=lse, block_M=bm,
                                     block_N=bn, num_stages=2, threads=128, dtype=dtype)
    run(tilelang.compile(prog, target="cpu"), 2, H, Hkv, Sq, Skv, D, causal, dtype, lse)


# flash_attention(overlap=True) (FA3's schedule: S_k issued with P_{k-1} V_{k-1}, n_blocks + 1 steps); on
# the CPU the gemms are synchronous, so this checks the restructured loop: the shifted V copy, the unused
# last S, the first step without P V, causal and ragged lengths, D = 64 and 128.
OVERLAP_CASES = [
    (2, 2, 64, 192, 64, True, 32, 32, "bfloat16", False),
    (2, 1, 100, 100, 128, True, 32, 64, "bfloat16", True),
    (2, 2, 37, 100, 128, False, 32, 32, "float16", False),
    (2, 2, 64, 128, 64, False, 64, 32, "bfloat16", True),
    (1, 1, 32, 32, 64, True, 32, 32, "float16", False),       # one KV block: steps 0 and 1 only
]


@pytest.mark.parametrize("H,Hkv,Sq,Skv,D,causal,bm,bn,dtype,lse", OVERLAP_CASES)
def test_overlap_matches_float64_on_the_cpu(H, Hkv, Sq, Skv, D, causal, bm, bn, dtype, lse):
    prog = attention.flash_attention(2, H, Hkv, Sq, Skv, D, is_causal=causal, with_lse=lse, block_M=bm,
                                     block_N=bn, num_stages=2, threads=128, dtype=dtype, overlap=True)
    run(tilelang.compile(prog, target="cpu"), 2, H, Hkv, Sq, Skv, D, causal, dtype, lse)


# flash_attention(pingpong=True): the hint T.warpgroup_pingpong() changes only the sm_90a schedule (the two
# consumer warpgroups take turns issuing their gemms); everywhere else it is ignored, so on the CPU the
# numbers are those of the kernel without it, bit for bit, and right against float64. This only shows that
# the hint is ignored on the CPU; the pingpong protocol itself (the named-barrier turns, its refusals, the
# sm_90a source) is tested by WarpSpecialize.FlashAttentionPingpong* in the C++ lowering tests
# (tests/compiler/gpu_lowering), which run the warp-specialized kernel in the SIMT interpreter.
PINGPONG_CASES = [
    (2, 2, 100, 100, 64, True, 64, 32, "bfloat16", False, False),
    (2, 1, 64, 192, 128, True, 64, 64, "bfloat16", True, False),
    (2, 2, 37, 100, 64, False, 64, 32, "float16", False, True),
    (1, 1, 96, 96, 128, True, 64, 64, "bfloat16", False, True),
]


@pytest.mark.parametrize("H,Hkv,Sq,Skv,D,causal,bm,bn,dtype,lse,overlap", PINGPONG_CASES)
def test_pingpong_matches_plain_on_the_cpu(H, Hkv, Sq, Skv, D, causal, bm, bn, dtype, lse, overlap):
    kw = dict(is_causal=causal, with_lse=lse, block_M=bm, block_N=bn, num_stages=2, threads=128, dtype=dtype,
              overlap=overlap)
    pp = tilelang.compile(attention.flash_attention(2, H, Hkv, Sq, Skv, D, pingpong=True, **kw), target="cpu")
    plain = tilelang.compile(attention.flash_attention(2, H, Hkv, Sq, Skv, D, **kw), target="cpu")
    run(pp, 2, H, Hkv, Sq, Skv, D, causal, dtype, lse)
    assert_bit_equal(pp, plain, H, Hkv, Sq, Skv, D, dtype, lse)


def assert_bit_equal(k1, k2, H, Hkv, Sq, Skv, D, dtype, lse):
    """Two compiled flash_attention kernels give the same O (and LSE) bit for bit on one fresh random input."""
    q, _ = rand(RNG, (2, H, Sq, D), dtype)
    kk, _ = rand(RNG, (2, Hkv, Skv, D), dtype)
    v, _ = rand(RNG, (2, Hkv, Skv, D), dtype)
    outs = []
    for k in (k1, k2):
        o = np.zeros((2, H, Sq, D), np.uint16 if dtype == "bfloat16" else dtype)
        args = [q, kk, v, o] + ([np.zeros((2, H, Sq), np.float32)] if lse else [])
        k(*args)
        outs.append(args[3:])
    for a, b in zip(*outs):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("H,Hkv,Sq,Skv,D,causal,bm,bn,dtype,lse,overlap", PINGPONG_CASES)
def test_own_o_tile_matches_plain_on_the_cpu(H, Hkv, Sq, Skv, D, causal, bm, bn, dtype, lse, overlap):
    """own_o_tile=True (O stored from acc_o through the lowering's own staging, not Q_s; the persistent
    sm_90a kernel's producer then loads Q: WarpSpecialize.PersistentFlashAttention* in the C++ lowering tests)
    gives the same numbers bit for bit, ragged query blocks and LSE included."""
    kw = dict(is_causal=causal, with_lse=lse, block_M=bm, block_N=bn, num_stages=2, threads=128, dtype=dtype,
              overlap=overlap)
    own = tilelang.compile(attention.flash_attention(2, H, Hkv, Sq, Skv, D, own_o_tile=True, **kw), target="cpu")
    plain = tilelang.compile(attention.flash_attention(2, H, Hkv, Sq, Skv, D, **kw), target="cpu")
    assert_bit_equal(own, plain, H, Hkv, Sq, Skv, D, dtype, lse)
    run(own, 2, H, Hkv, Sq, Skv, D, causal, dtype, lse)


def test_own_o_tile_falls_back_where_it_does_not_fit():
    """128x128 D128 bf16 at 3 stages: Q, O and 6 K/V tiles exceed 220 KiB, so O stays in Q_s (the same
    program as without the flag); at 2 stages O gets its own staging (no copy into Q_s)."""
    kw = dict(block_M=128, block_N=128, threads=256, dtype="bfloat16", overlap=True)
    three = attention.flash_attention(4, 32, 32, 4096, 4096, 128, num_stages=3, **kw)
    assert tilelang.emit(attention.flash_attention(4, 32, 32, 4096, 4096, 128, num_stages=3, own_o_tile=True, **kw),
                         "fa") == tilelang.emit(three, "fa")
    two = tilelang.emit(attention.flash_attention(4, 32, 32, 4096, 4096, 128, num_stages=2, own_o_tile=True, **kw), "fa")
    assert "copy acc_o -> Q_s" in tilelang.emit(three, "fa")
    assert "copy acc_o -> Q_s" not in two and "copy acc_o -> O[" in two


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("bm,bn", [(32, 32), (64, 32)])
def test_causal_rows_without_keys_are_zero_on_the_cpu(overlap, bm, bn):
    """seq_q > seq_kv (past_len < 0): query rows i < seq_q - seq_kv see no key. In the KV block crossing the
    diagonal such a row is masked whole, its m stays at the finite start value and its p must come out 0:
    masked scores are -inf, so exp2(s * scale - m * scale) is 0 without a select. O of those rows is 0 (l = 0), the others
    match float64; the rows straddle block boundaries (bm = 32, 64) and partly fill query blocks. This fails
    if m starts at -inf (r and p become NaN); a finite masked score with no select is not reliably caught on
    the CPU: contracted into an FMA, s * scale - m * scale leaves a rounding residue of about 1e30 * 2^-24
    instead of 0, whose exp2 happens to be 0 or inf."""
    Sq, Skv, D = 100, 61, 32
    for dtype in ("float16", "bfloat16"):
        k = tilelang.compile(attention.flash_attention(2, 2, 1, Sq, Skv, D, is_causal=True, block_M=bm, block_N=bn,
                                                       num_stages=2, threads=128, dtype=dtype, overlap=overlap),
                             target="cpu")
        q, q64 = rand(RNG, (2, 2, Sq, D), dtype)
        kk, k64 = rand(RNG, (2, 1, Skv, D), dtype)
        v, v64 = rand(RNG, (2, 1, Skv, D), dtype)
        o = np.full((2, 2, Sq, D), 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full((2, 2, Sq, D), np.nan, dtype)
        k(q, kk, v, o)
        got = decoded(o, dtype)
        empty = Sq - Skv  # rows 0 .. empty - 1 see no key
        assert np.array_equal(got[:, :, :empty], np.zeros_like(got[:, :, :empty])), got[:, :, :empty].max()
        with np.errstate(invalid="ignore"):
            o_ref, _ = attention.attention_ref(q64, k64, v64, True)
        err = np.abs(got[:, :, empty:] - o_ref[:, :, empty:]).max() / np.abs(o_ref[:, :, empty:]).max()
        assert err < TOL[dtype], (dtype, err)


@pytest.mark.parametrize("causal", [True, False])
def test_dynamic_lengths_match_float64_on_the_cpu(causal):
    """One kernel for every (seq_q, seq_kv): multiples of the blocks, ragged, seq_q < seq_kv (past_len > 0),
    a single row, a single block."""
    prog = attention.flash_attention("B", 4, 2, "SQ", "SKV", 32, is_causal=causal, with_lse=True, block_M=32,
                                     block_N=32, num_stages=2, threads=128, dtype="float16")
    k = tilelang.compile(prog, target="cpu")
    for sq, skv in ((64, 64), (45, 130), (1, 33), (96, 160), (32, 32), (70, 70)):
        run(k, 1 + (sq % 2), 4, 2, sq, skv, 32, causal, "float16", True)


def sm90a_source(prog, monkeypatch, pass_configs=None):
    # sm_90a only, as hopper_bench.sh compiles (128 x 128 tiles exceed sm_80's shared memory)
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")
    parts = source_parts(cuda_kernel_source(prog, pass_configs=pass_configs))  # skips without a CUDA compiler
    return next(v for n, v in parts.items() if n.endswith(".sm_90a.cu"))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("bm,bn,threads,stages", [(128, 64, 256, 2), (128, 128, 256, 2)])
def test_sm90a_source(causal, bm, bn, threads, stages, tmp_path, monkeypatch):
    """hopper_bench's configs at B4 H32 S4096 D128 bf16: what runs on the H200."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, 128, is_causal=causal, block_M=bm,
                                                 block_N=bn, num_stages=stages, threads=threads,
                                                 dtype="bfloat16"), monkeypatch)
    body = src.split("__global__", 1)[1]
    loop = body.split("for (int k = 0;", 1)[1]
    if causal:
        assert f"const int bq = ({4096 // bm - 1} - bx);" in body  # longest query block first
        assert "if (masked) {" in loop
        # Masked scores are -inf (0xff800000), so masked and unmasked blocks share one exponent loop without
        # a select (nvcc branched around each of a select's exp2: 64 branches per thread per masked block),
        # and the per-score causal test is the diagonal alone (no `< 4096` seq_kv compare).
        assert re.search(r"\(valid \? acc_s\[[^;]*\] : __int_as_float\(0xff800000\)\)", loop), loop[:4000]
        assert "? tl_ex2" not in loop and "e+30f) ?" not in loop
        assert len(re.findall(r"= tl_ex2\(\(\(acc_s\[", loop)) == 1
        assert re.search(r"const bool valid = \(\(\(bq \* \d+\) \+ i\) >= \(\(k \* \d+\) \+ j\)\);", loop), loop[:4000]
    else:
        assert "masked" not in body and "valid" not in body and "e+30f)) ? tl_ex2" not in body
    assert re.search(r"tl_ex2\(\(\(acc_s\[[^;]*\] \* \(0\.127517\d*f\)\) - m_s\[", loop), loop[:3000]
    # O through Q_s's memory: 16-byte vector stores into O, no per-element store
    assert re.search(r"\*reinterpret_cast<tl_v16\*>\(&O\[[^;]*\]\) = \*reinterpret_cast<const tl_v16\*>\(&Q_s\[", body)
    assert not re.search(r"\bO\[[^;]*\] = tl_f2bf", body)
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(src, tmp_path, "fa")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


@pytest.mark.parametrize("causal,bm,bn,D,threads,overlap,pingpong", [
    (False, 128, 128, 128, 256, True, False), (False, 128, 128, 128, 256, True, True),
    (True, 128, 128, 128, 256, True, False), (True, 128, 128, 128, 256, False, True),
    (True, 192, 128, 64, 384, False, False)])
def test_sm90a_persistent_source_no_spills(causal, bm, bn, D, threads, overlap, pingpong, tmp_path, monkeypatch):
    """pass_configs {"tl.persistent": True} at hopper_bench's shapes: the consumers re-read the thread index at the
    top of each tile through an asm volatile move (SLet::opaque), so nvcc cannot hoist the addresses computed from
    it out of the tile loop; with them hoisted and live across it, these kernels spilled 84-208 bytes (0 without
    the tile loop). The re-read is inside the consumers' tile loop, before anything reads the index."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, D, is_causal=causal, block_M=bm, block_N=bn,
                                                 num_stages=2, threads=threads, dtype="bfloat16", overlap=overlap,
                                                 pingpong=pingpong), monkeypatch, {"tl.persistent": True})
    loops = [m.start() for m in re.finditer(r"for \(int tl_tile = bx; tl_tile < \d+; tl_tile \+= \d+\) \{", src)]
    assert len(loops) == 2, loops  # the producer's and the consumers'
    consumer_tile = src[loops[1]:]
    m = re.match(r"for [^\n]*\n\s*int (tl_tid_opq\d+);\n\s*asm volatile\(\"mov\.b32 %0, %1;\" : \"=r\"\(\1\) : "
                 r"\"r\"\(tl_tid\)\);\n\s*const int tl_tid = \1;\n", consumer_tile)
    assert m, consumer_tile[:600]
    assert "tl_tid_opq" not in src[:loops[1]]  # the producer keeps its one read (it runs in one thread)
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(src, tmp_path, "fa_persistent")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


def test_sm90a_only_kernel_drops_the_implied_ptx(tmp_path, monkeypatch):
    """FA3's non-causal D128 tile, 128 x 176: sm_90a's own lowering fits it in its 227 KiB (P in registers), the
    shared lowering behind the compute_80 PTX (mma.sync, 163 KiB) does not. A target naming sm_90a alone
    builds the sm_90a cubin and drops the PTX it only implied; a target that names another arch (\"cuda\":
    sm_80, sm_89, sm_90a) still fails, naming the shared memory and the buffer."""
    prog = attention.flash_attention(4, 32, 32, 4096, 4096, 128, block_M=128, block_N=176, num_stages=2,
                                     threads=256, dtype="bfloat16", overlap=True)
    try:
        k = tilelang.compile(prog, target="sm_90a")
    except Exception as e:  # noqa: BLE001
        if "no CUDA compiler" in str(e):
            pytest.skip(f"no CUDA toolchain: {e}")
        raise
    out = subprocess.run([os.environ.get("TL_PACK", "tl-pack"), "inspect", "--json", k.bundle_path],
                         capture_output=True, text=True, check=True).stdout
    import json
    variants = [v["id"] for v in json.loads(out)["kernels"][0]["variants"]]
    assert variants == ["cuda.sm_90a"], variants
    with pytest.raises(tilelang.TileLangCompileError, match=r"RESOURCE_EXHAUSTED.*bytes of shared memory.*acc_s_cast"):
        tilelang.compile(prog, target="cuda")


@pytest.mark.parametrize("causal,stages", [(False, 2), (True, 2), (False, 3)])
def test_sm90a_192_row_d64_source(causal, stages, tmp_path, monkeypatch):
    """FA3's D64 tile as hopper_bench runs it: 192 query rows over three consumer warpgroups (384 + 128 producer
    threads) at S = 4096, which 192 does not divide (22 query blocks, the last one 64 rows: its Q rows past
    the end are not loaded, its O rows past the end not stored). Warp-specialized, P in registers, and
    ptxas fits it in the 128 registers a thread 512 threads leave at entry without spilling."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, 64, is_causal=causal, block_M=192,
                                                 block_N=128, num_stages=stages, threads=384, dtype="bfloat16"),
                       monkeypatch)
    assert "__launch_bounds__(512" in src and "setmaxnreg.inc" in src and "setmaxnreg.dec" in src
    # The ragged query block: Q's rows and O's rows are guarded by the static 4096 (rows past it are not read
    # and not written), per 16-byte chunk.
    assert re.search(r"\(\(\(b[xq] \* 192\) \+ \(tl_e\d+ / 8\)\) < 4096\)\)\)\) \{\s*\*reinterpret_cast<tl_v16\*>\(&Q_s\[", src)
    assert re.search(r"\(\(\(b[xq] \* 192\) \+ \(tl_e\d+ / 8\)\) < 4096\)\)\)\) \{\s*\*reinterpret_cast<tl_v16\*>\(&O\[", src)
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(src, tmp_path, "fa192")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info


@pytest.mark.parametrize("causal,bm,bn,D", [(False, 128, 64, 128), (True, 128, 64, 128), (False, 128, 128, 64),
                                           (False, 128, 128, 128)])
def test_sm90a_overlap_source(causal, bm, bn, D, tmp_path, monkeypatch):
    """flash_attention(overlap=True) at hopper_bench's shapes: the S and P V wgmma groups are committed without
    a wait (two commits, no wait_group between them), wait_group 1 retires S alone, the kernel stays
    warp-specialized (every group retired within its k-step), and ptxas neither spills nor serializes."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, D, is_causal=causal, block_M=bm,
                                                 block_N=bn, num_stages=2, threads=256, dtype="bfloat16",
                                                 overlap=True), monkeypatch)
    assert "setmaxnreg.inc" in src and "__launch_bounds__(384" in src
    loop = src.split("bar.sync 1, 256;", 1)[1]
    s_at = loop.index("acc_s += Q_s * K_s")
    pv_at = loop.index("acc_o += acc_s_cast (registers) * V_s")
    assert "wgmma.wait_group" not in loop[s_at:pv_at], "S's group is waited for before P V is issued"
    assert "wgmma.wait_group.sync.aligned 1;" in loop[pv_at:]
    # S is issued only in the steps that have a KV block (k < n_blocks); the last step (k = n_blocks) issues
    # P_{n-1} V_{n-1} alone -- before, it issued S on K_{n-1} again and dropped it (half a k-step of tensor work
    # per query block).
    assert loop.count("acc_s += Q_s * K_s") == 1 and loop.count("acc_o += acc_s_cast (registers) * V_s") == 2
    assert re.search(r"if \(\(k < [^{]*\{\s*\{  // wgmma\.\S+ k-step: acc_s \+= Q_s \* K_s", loop), loop[:2000]
    last = loop[loop.rindex("acc_s += Q_s * K_s"):]
    assert re.search(r"\} else \{\s*if \(\(k > 0\)\) \{\s*\{  // wgmma\.\S+ k-step: acc_o \+= acc_s_cast", last)
    # P is cast at the end of step k and read by P V at step k + 1, after S_{k+1} overwrote acc_s: the copy
    # stays, packed -- bf16x2 registers, half of acc_s's f32 ones (at 128x128 64 f32 scores per thread would
    # cost 64 more registers and spill) -- one cvt.rn.bf16x2.f32 per slot pair, which P V reads unpacked.
    pairs = bm * bn // 256 // 2
    assert f"unsigned acc_s_cast[{pairs}];" in src
    assert re.search(r"acc_s_cast\[tl_pj\] = tl_pack_bf16x2\(\(float\)\(acc_s\[[^;]*\]\), \(float\)\(acc_s\[[^;]*\]\)\);",
                     loop), loop[pv_at:pv_at + 3000]
    assert not re.search(r"acc_s_cast\[[^;]*\] = (tl_rbf|acc_s)", src)
    assert "tl_pack_bf16x2(acc_s_cast[" not in src
    assert re.search(r"unsigned tl_ra_0_0\[4\] = \{acc_s_cast\[\d+\], acc_s_cast\[\d+\]", src)
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(src, tmp_path, "fa3")
        assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info
        assert "serialized" not in info, info  # C7510 / C7515 / C7519
        # C7517 ("warpgroup.wait is injected ... to allow use of registers defined by GMMA", an info line):
        # e.g. O rescaled between S's issue and P V's (FA3's order above D 128) waits for S there
        assert "injected" not in info, info


@pytest.mark.parametrize("causal,bn,D,overlap", [(False, 128, 128, False), (True, 128, 128, False),
                                               (True, 64, 64, False), (False, 64, 128, True)])
def test_sm90a_pingpong_source(causal, bn, D, overlap, tmp_path, monkeypatch):
    """flash_attention(pingpong=True) at hopper_bench's shapes (two consumer warpgroups): in the consumers'
    k-loop warpgroup 0 waits for its turn on named barrier 2 (not at the first k-step), warpgroup 1 on 3,
    the first gemm's wgmmas are issued and committed, the turn is handed over (bar.arrive on the other's
    barrier; warpgroup 1 not at the last k-step) before any wgmma.wait_group; ptxas compiles it without
    spills (the plain loop) or serialization."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, D, is_causal=causal, block_M=128,
                                                 block_N=bn, num_stages=2, threads=256, dtype="bfloat16",
                                                 overlap=overlap, pingpong=True), monkeypatch)
    assert "setmaxnreg.inc" in src and "__launch_bounds__(384" in src
    consumers = src.split("// consumers", 1)[1]
    loop = consumers.split("for (int k = ", 1)[1]
    s2, s3 = loop.index("bar.sync 2, 256;"), loop.index("bar.sync 3, 256;")
    issue = loop.index("wgmma.mma_async", s3)
    commit = loop.index("wgmma.commit_group", issue)
    a3, a2 = loop.index("bar.arrive 3, 256;", commit), loop.index("bar.arrive 2, 256;", commit)
    assert s2 < s3 < issue < commit < a3 < a2
    assert "wgmma.wait_group" not in loop[issue:a2]
    assert loop.count("bar.sync 2, 256;") == 1 and loop.count("bar.sync 3, 256;") == 1
    # With pingpong the overlap loop keeps one step body (S issued at every step, the last one's dropped:
    # _overlapped_k_loop's uniform_steps, 2-7 % faster on the H200 than the branched step kinds with the
    # pingpong): the turn is handed over on its two paths (S_k with or without P_{k-1} V_{k-1}), not four.
    assert src.count("bar.arrive") == (4 if overlap else 2)
    if overlap:
        assert not re.search(r"if \(\(k < [^{]*\{\s*\{  // wgmma\.\S+ k-step: acc_s \+= Q_s \* K_s", loop)
    if os.access(NVCC, os.X_OK):
        info = ptxas_v(src, tmp_path, "fa_pp")
        if not overlap:
            assert "0 bytes spill stores" in info and "0 bytes spill loads" in info, info
        assert "serialized" not in info, info


# The printer's wgmma B descriptors (compiler/codegen/cuda/src/printer.cc, kWgmmaPrelude): built once per
# gemm from k-step 0's address (tl_db0) and moved by (a - a0) / 16 for every k-step and n-tile.
DESC_CHECK = r"""
#include <cstdio>
#define __device__
#define __forceinline__ inline
%s
%s
int main() {
  const unsigned long long bits[] = {0x4000004000010000ULL, 0x4000004004000000ULL, 0x0000000800010000ULL};
  long bad = 0;
  for (unsigned long long b : bits)
    for (unsigned a0 = 0; a0 < (1u << 18); a0 += 16) {
      const unsigned long long d0 = tl_wgmma_desc(a0, b);
      for (unsigned a = a0 %% 4096; a < (1u << 18); a += 4096 + 16 * (a0 %% 7))  // below and above a0
        if (tl_wgmma_desc_at(d0, a0, a) != tl_wgmma_desc(a, b) && bad++ < 5) std::printf("a0 %%u a %%u\n", a0, a);
    }
  std::printf("bad %%ld\n", bad);
  return bad != 0;
}
"""


def test_sm90a_wgmma_b_descriptor_per_gemm(tmp_path, monkeypatch):
    """The 128x128 D128 bf16 kernel's wgmmas take their B descriptor from tl_wgmma_desc_at(tl_db0, tl_sb0, ...),
    one 64-bit add of a constant, not the mask, shift, widening and or of each operand address: the PTX
    holds one or.b64 per gemm in the k-loop (2) plus Q's eight A descriptors outside it (24 before: 16 in
    the loop). The helper equals tl_wgmma_desc at every 16-byte aligned address pair of the 18-bit shared
    window, a below a0 as well (host-compiled)."""
    src = sm90a_source(attention.flash_attention(4, 32, 32, 4096, 4096, 128, block_M=128, block_N=128,
                                                 num_stages=2, threads=256, dtype="bfloat16"), monkeypatch)
    assert "tl_wgmma_desc(tl_sb +" not in src
    assert src.count("tl_wgmma_desc_at(tl_db0, tl_sb0, tl_sb + ") == 16 and src.count("tl_wgmma_desc(tl_sb0, ") == 2
    desc = re.search(r"^.*unsigned long long tl_wgmma_desc\(unsigned addr.*$", src, re.M).group(0)
    at = re.search(r"^.*unsigned long long tl_wgmma_desc_at\(.*$", src, re.M).group(0)
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx:
        (tmp_path / "desc.cc").write_text(DESC_CHECK % (desc, at))
        r = subprocess.run([cxx, "-O1", "-o", str(tmp_path / "desc"), str(tmp_path / "desc.cc")], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        r = subprocess.run([str(tmp_path / "desc")], capture_output=True, text=True)
        assert r.returncode == 0 and "bad 0" in r.stdout, r.stdout
    if os.access(NVCC, os.X_OK):
        ptx = ptx_of(src, tmp_path, "fa_desc")
        assert count(ptx, "or.b64") <= 10, count(ptx, "or.b64")


def test_disable_warp_specialized_pass_config(monkeypatch):
    """pass_configs={"tl.disable_warp_specialized": True} builds the sm_90a kernel without the producer
    warpgroup (hopper_bench's "nows" FlashAttention configs); each form is its own cache entry, and the
    environment's TL_CUDA_WS is part of the key as well."""
    monkeypatch.delenv("TL_CUDA_WS", raising=False)
    prog = attention.flash_attention(1, 2, 2, 256, 256, 64, block_M=128, block_N=64, num_stages=2, threads=256,
                                     dtype="bfloat16")
    ws = sm90a_source(prog, monkeypatch)
    assert "__launch_bounds__(384" in ws and "setmaxnreg.inc" in ws
    for off in (sm90a_source(prog, monkeypatch, {"tl.disable_warp_specialized": True}),
                sm90a_source(prog, monkeypatch, {tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True})):
        assert "__launch_bounds__(256" in off and "setmaxnreg" not in off
    assert "setmaxnreg.inc" in sm90a_source(prog, monkeypatch, {"tl.disable_warp_specialized": False})
    monkeypatch.setenv("TL_CUDA_WS", "0")  # the whole-build switch, now in the cache key too
    assert "setmaxnreg" not in sm90a_source(prog, monkeypatch)
