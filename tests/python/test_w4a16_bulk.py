"""kernels/w4a16_bulk.py (issue #11: the W4A16 decode weight stream on Hopper bulk copies, CUDA sm_90 only),
checked without a GPU:

- the stream-K schedule covers every (tile-block, group) unit exactly once, each block's share within one
  unit of the mean, stages never longer than stage_groups nor crossing a tile-block;
- the EXACT imported C++ text runs on the host: every thread of a block a std::thread, the bulk copies a
  memcpy that completes its mbarrier's transaction bytes, the mbarriers emulated with the PTX ISA's phase
  and parity rules (arrive, expect_tx, complete_tx, try_wait.parity), mma.sync as a warp-collective
  m16n8k16, named barrier 1 for the consumer warps; blocks one after another, so the last block of a
  tile-block rounds it: C equals A @ (q * s)^T in float64 on random data (M = 1, 5, 9, 16; group 64 and
  128; rings that wrap several times; ranges that start and end inside tile-blocks; more blocks than
  units), and the workspace and semaphores are zero afterwards;
- the source compiled by nvcc for sm_90a: ptxas reports no spills and at most the registers that keep one
  block of the bench's configs resident; the PTX holds the 1-D bulk copies with complete_tx, mbarrier
  expect_tx / try_wait.parity, the mma.sync count per group, the 16-byte red for the split sums and no
  per-thread cp.async / ld.global of weights; the SASS (where cuobjdump exists) UBLKCP and SYNCS;
- the tile program at the bench shape (tl-pack): one kernel, the grid of `blocks`, the call per thread;
- bad arguments are refused naming the argument.

Run: PYTHONPATH=compiler/python /usr/bin/python3 -m pytest tests/python/test_w4a16_bulk.py
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _helpers import NVCC, ROOT, cuda_kernel_source, ptx_of, ptxas_v, use_tl_pack  # noqa: E402 - sys.path: repo, tilelang
from _host_emulation import BLOCK_THREADS, CUDA_HOST_PRELUDE, W4M_HELPERS, run_block_threads  # noqa: E402

from kernels import w4a16_bulk as wb  # noqa: E402
from kernels import w4a16_m16 as wm  # noqa: E402
from kernels.quant_gemm import quantize_ref  # noqa: E402


def _case(rng, M, N, K, gs):
    a = rng.standard_normal((M, K)).astype(np.float16)
    w, s, q = quantize_ref(rng.standard_normal((N, K)), 4, gs)
    s = s.astype(np.float16)
    ref = a.astype(np.float64) @ (q * np.repeat(s.astype(np.float64), gs, axis=1)).T
    return a, w, s, ref


@pytest.mark.parametrize("N,K,gs,tn,cw,sg,blocks", [(8192, 8192, 128, 2, 8, 2, 132), (8192, 8192, 128, 1, 4, 4, 132),
                                                    (512, 1024, 64, 1, 2, 3, 7), (64, 256, 128, 1, 1, 1, 9)])
def test_schedule_covers_every_unit_once(N, K, gs, tn, cw, sg, blocks):
    ng, ntb = K // gs, N // 16 // (tn * cw)
    seen = np.zeros((ntb, ng), int)
    sched = wb.schedule(N, K, gs, tn, cw, sg, blocks)
    per_block = []
    for pieces in sched:
        n = 0
        for tb, ga, gb, st in pieces:
            assert 0 <= ga < gb <= ng and sum(st) == gb - ga and all(1 <= x <= sg for x in st)
            seen[tb, ga:gb] += 1
            n += gb - ga
        per_block.append(n)
    assert (seen == 1).all()
    assert max(per_block) - min(per_block) <= 1


# ---- the exact imported C++ on the host (on top of _host_emulation's block threads, mma.sync and W4M_HELPERS)

_HOST_BULK = r"""
#include <cstdint>
#include <string>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sched.h>
typedef unsigned char* tl_w4b_sptr;  // shared addresses: plain pointers here
static tl_w4b_sptr tl_w4b_saddr(const void* p) { return (tl_w4b_sptr)p; }
// an mbarrier as the PTX ISA describes it: pending arrivals and transaction bytes of the current phase; the
// phase completes when both reach zero; try_wait.parity(P) passes when the phase of parity P has completed,
// i.e. the current phase's parity differs from P
struct HostBar { int expected = 0, pending = 0; long long tx = 0; unsigned phase = 0; bool live = false; };
static std::mutex g_bar_mu;
static std::map<unsigned char*, HostBar> g_bars;
static int g_bulk_bytes_bad = 0;  // a bulk copy whose size or addresses are not multiples of 16
static int g_consumer_threads = 0;  // threads below it consume; this one (the producer's lane 0) arms the slots
static std::atomic<int> g_armed{0}, g_blocked_at{-1};
static std::atomic<bool> g_prod_done{false};
static void host_bar_check(HostBar& b) {
  if (b.pending == 0 && b.tx == 0) { ++b.phase; b.pending = b.expected; }
}
static HostBar& host_bar(unsigned char* p) {
  auto it = g_bars.find(p);
  if (it == g_bars.end() || !it->second.live) { std::fprintf(stderr, "mbarrier used before init\n"); std::abort(); }
  return it->second;
}
static void tl_w4b_bar_init(tl_w4b_sptr b, unsigned count) {
  std::lock_guard<std::mutex> l(g_bar_mu);
  if ((uintptr_t)b % 8) { std::fprintf(stderr, "misaligned mbarrier\n"); std::abort(); }
  HostBar h; h.expected = h.pending = (int)count; h.live = true;
  g_bars[b] = h;
}
static void tl_w4b_fence_init() {}
static void __trap() { std::abort(); }
static void tl_w4b_arrive_tx(tl_w4b_sptr b, unsigned bytes) {
  ++g_armed;
  std::lock_guard<std::mutex> l(g_bar_mu);
  HostBar& h = host_bar(b);
  h.tx += bytes;
  --h.pending;
  host_bar_check(h);
}
static void tl_w4b_arrive(tl_w4b_sptr b) {
  std::lock_guard<std::mutex> l(g_bar_mu);
  HostBar& h = host_bar(b);
  --h.pending;
  if (h.pending < 0) { std::fprintf(stderr, "too many arrivals\n"); std::abort(); }
  host_bar_check(h);
}
// issue-ahead probe: the consumers' first waits are held back until the producer's lane 0 finds an empty
// barrier not yet released (or has finished); g_blocked_at then says how many slots it had armed. A ring that
// works arms all `stages` slots before it needs a consumer (the device showed time per slot independent of
// stages: this pins that the protocol is not what serializes)
static void tl_w4b_wait(tl_w4b_sptr b, unsigned parity) {
  if (tl_host_tid < g_consumer_threads)
    while (g_blocked_at.load() < 0 && !g_prod_done.load()) sched_yield();
  for (bool first = true;; first = false) {
    {
      std::lock_guard<std::mutex> l(g_bar_mu);
      if ((host_bar(b).phase & 1u) != parity) return;
    }
    if (first && tl_host_tid == g_consumer_threads && g_blocked_at.load() < 0) g_blocked_at = g_armed.load();
    sched_yield();
  }
}
static void tl_w4b_bulk(tl_w4b_sptr dst, const void* src, unsigned bytes, tl_w4b_sptr bar) {
  if (bytes % 16 || (uintptr_t)dst % 16 || (uintptr_t)src % 16 || bytes == 0) g_bulk_bytes_bad = 1;
  std::memcpy(dst, src, bytes);
  std::lock_guard<std::mutex> l(g_bar_mu);
  HostBar& h = host_bar(bar);
  h.tx -= bytes;
  if (h.tx < 0) { std::fprintf(stderr, "complete_tx beyond expect_tx\n"); std::abort(); }
  host_bar_check(h);
}
static void tl_w4b_bulk_hint(tl_w4b_sptr dst, const void* src, unsigned bytes, tl_w4b_sptr bar,
                             unsigned long long policy) {
  if (policy != 0x5eedULL) g_bulk_bytes_bad = 1;  // the policy made by tl_w4b_evict_first
  tl_w4b_bulk(dst, src, bytes, bar);
}
static unsigned long long tl_w4b_evict_first() { return 0x5eedULL; }
// cp.async (16 bytes, both addresses 16-byte aligned) lands at once; its arrive.noinc is a plain arrival
static int g_cp_bad = 0;
static void tl_w4b_cp16(tl_w4b_sptr dst, const void* src) {
  if ((uintptr_t)dst % 16 || (uintptr_t)src % 16) g_cp_bad = 1;
  std::memcpy(dst, src, 16);
}
static void tl_w4b_cp_arrive(tl_w4b_sptr b) { tl_w4b_arrive(b); }
static void tl_w4b_cp_wait_all() {}
static std::barrier<>* g_consumer_bar;
static void tl_w4b_csync(int) { g_consumer_bar->arrive_and_wait(); }
static void __syncwarp() { tl_host_warp_bar[tl_host_tid >> 5]->arrive_and_wait(); }
"""


def _host_main(name, M, N, K, gs, tn, cw, blocks, smem):
    threads = 32 * (cw + 1)
    return f"""
int main(int argc, char** argv) {{
  // 16-byte aligned like the device allocations (the bulk copies' global addresses must be)
  auto alloc = [](size_t n) {{ return static_cast<unsigned char*>(std::aligned_alloc(256, (n + 255) / 256 * 256)); }};
  unsigned short* a = (unsigned short*)alloc({M} * {K} * 2);
  unsigned char* wp = alloc({N // 16} * {8 * K});
  unsigned short* sp = (unsigned short*)alloc({N // 16} * {16 * K // gs} * 2);
  std::vector<unsigned short> out({M} * {N}, 0x7e00);  // NaN: every element must be written
  std::vector<float> wk({N} * 16, 0.f);  // the workspace and semaphores: zero before, zero after
  std::vector<int> sem({N // 16}, 0);
  FILE* f = std::fopen(argv[1], "rb");
  if (std::fread(a, 2, {M * K}, f) != {M * K} || std::fread(wp, 1, {N // 16 * 8 * K}, f) != {N // 16 * 8 * K} ||
      std::fread(sp, 2, {N // 16 * 16 * K // gs}, f) != {N // 16 * 16 * K // gs}) return 2;
  std::fclose(f);
  float* smem = (float*)alloc({smem});
  std::vector<int> ahead;  // per block: slots armed when the producer first waited for a release (-1: never)
  for (int bx = 0; bx < {blocks}; ++bx) {{
    std::barrier<> consumers({32 * cw});
    g_consumer_bar = &consumers;
    for (int i = 0; i < {smem // 4}; ++i) smem[i] = 12345.f;  // stale values must not leak into a result
    g_bars.clear();
    g_consumer_threads = {32 * cw};
    g_armed = 0;
    g_blocked_at = -1;
    g_prod_done = false;
    tl_host_run_block({threads}, [&](int tid) {{
      {name}(a, wp, sp, out.data(), smem, {M}, bx, tid, wk.data(), sem.data());
      if (tid == {32 * cw}) g_prod_done = true;
    }});
    ahead.push_back(g_blocked_at.load());
  }}
  f = std::fopen(argv[2], "wb");
  std::fwrite(out.data(), sizeof(out[0]), out.size(), f);
  std::fclose(f);
  f = std::fopen((std::string(argv[2]) + ".ahead").c_str(), "w");
  for (int v : ahead) std::fprintf(f, "%d\\n", v);
  std::fclose(f);
  if (g_bulk_bytes_bad || g_cp_bad) return 5;
  for (float v : wk) if (v != 0.f) return 3;
  for (int v : sem) if (v != 0) return 4;
  return 0;
}}
"""


@pytest.mark.parametrize("M,N,K,gs,tn,cw,sg,stages,blocks,ef", [
    (16, 128, 1024, 128, 2, 2, 2, 3, 3, False),  # M = 16: both n8 halves; ranges start and end inside tile-blocks
    (1, 128, 2048, 128, 1, 2, 2, 2, 5, False),  # M = 1 (one n8 half, one lane of four adds); 2 slots wrap often
    (9, 64, 1536, 64, 1, 2, 3, 2, 4, True),  # group 64 (one chunk per group), M in 9..16, short last stages, hint
    (5, 256, 1024, 128, 2, 4, 1, 4, 7, False),  # 4 consumer warps, one group per slot, 7 blocks over 2 tile-blocks
    (16, 32, 256, 128, 1, 1, 4, 2, 6, True),  # one consumer warp, 4 units over 6 blocks: two stream nothing
])
def test_exact_source_runs_on_the_host(tmp_path, M, N, K, gs, tn, cw, sg, stages, blocks, ef):
    a, w, s, ref = _case(np.random.default_rng(M + N + K + blocks), M, N, K, gs)
    wp, sp = wm.pack_w4a16_m16(w, s)
    name = "tl_w4b_host"
    smem = wb.smem_bytes(gs, tn, cw, sg, stages, M)  # the ring sized for M rows
    src = (CUDA_HOST_PRELUDE + BLOCK_THREADS + W4M_HELPERS + _HOST_BULK + wm._DECODE +
           wb._source(name, N, K, gs, tn, cw, sg, stages, blocks, M, ef) + _host_main(name, M, N, K, gs, tn, cw, blocks, smem))
    r, out_bin = run_block_threads(tmp_path, src, [a.tobytes(), wp.tobytes(), sp.tobytes()])
    assert r.returncode == 0, (f"exit {r.returncode} (3: workspace, 4: semaphore not left zero, 5: a bulk copy not "
                               f"16-byte sized / aligned) {r.stderr}")
    out = np.fromfile(out_bin, np.float16).reshape(M, N).astype(np.float64)
    assert np.isfinite(out).all()
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < 2e-3, err  # float32 sums, fp16 output
    # the ring runs ahead: with the consumers held back, the producer arms every one of the `stages` slots (or
    # all of its block's slots, then never waits) before it first needs a release
    ahead = [int(x) for x in open(f"{out_bin}.ahead").read().split()]
    slots = [sum(len(st) for *_, st in pieces) for pieces in wb.schedule(N, K, gs, tn, cw, sg, blocks)]
    assert ahead == [stages if n > stages else -1 for n in slots], (ahead, slots, stages)


def _wrapped_source(M, N, K, gs, tn, cw, sg, stages, blocks):
    src = wm._FMA + wm._DECODE + wm._MMA + wb._BULK + wb._source("f", N, K, gs, tn, cw, sg, stages, blocks, M)
    return src + (f'\nextern "C" __global__ void __launch_bounds__({32 * (cw + 1)}) k(const unsigned short* a, '
                  f"const unsigned char* w, const unsigned short* s, unsigned short* o, int M, float* wk, int* sem) {{\n"
                  f"  extern __shared__ __align__(16) float buf[];\n"
                  f"  f(a, w, s, o, buf, M, blockIdx.x, threadIdx.x, wk, sem);\n}}\n")


def _bench_configs():
    """hopper_bench's "m16b" configs as (M, (tn, cw, stage_groups, stages, blocks), evict_first)."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import hopper_bench as hb
    out = []
    for c in hb.W4_CONFIGS_DECODE:
        if c[5] == "m16b":
            cw = c[4] // 32 - 1
            out.append((c[0], (c[1] // 16 // cw, cw, c[7], c[3], c[6]), c[8:9] == ("ef",)))
    return out


# every hopper_bench "m16b" config as the tile compiler emits it (the bench's compile): no spills, registers
# that keep its blocks resident (one per SM; two at 264 blocks). ptxas picks its own register target without a
# min-blocks launch bound (96 at 288 threads): the second mma chain per tile is kept for M <= 8 only, where it
# costs no spill
@pytest.mark.parametrize("M,cfg,ef", _bench_configs())
def test_source_compiles_for_sm90a_without_spills(tmp_path, monkeypatch, M, cfg, ef):
    tn, cw, sg, stages, blocks = cfg
    assert wb.check_args(M, 8192, 8192, 128, *cfg) <= (wb.SMEM_LIMIT if blocks <= 132 else 232448 // 2 - 1024)
    src = _compiled_source(monkeypatch, wb.w4a16_bulk(M, 8192, 8192, tn=tn, cw=cw, stage_groups=sg, stages=stages,
                                                      blocks=blocks, workspace=True, evict_first=ef))
    ptx = ptx_of(src, tmp_path)  # skips without nvcc
    info = ptxas_v(src, tmp_path)  # k.cubin, for cuobjdump below
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info
    regs = int(re.search(r"Used (\d+) registers", info).group(1))
    per_sm = max(1, blocks // 132)
    assert regs <= 255 and regs * 32 * (cw + 1) * per_sm <= 65536, (cfg, regs)
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx and "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    assert "fence.mbarrier_init.release.cluster" in ptx
    hinted = len(re.findall(r"complete_tx::bytes\.L2::cache_hint", ptx))
    bulk = len(re.findall(r"cp\.async\.bulk\.shared::cluster\.global\.mbarrier::complete_tx::bytes", ptx))
    assert ("createpolicy.fractional.L2::evict_first.b64" in ptx) == ef and hinted == (1 if ef else 0), hinted
    # ONE bulk copy site (a tile's weight run; loop not unrolled): each bulk copy cost its thread ~50 ns on the
    # device whatever its size, so the scales and activation rows are the producer warp's 16-byte cp.async
    # (two loops, which nvcc may unroll), each lane's arrive.noinc completing the slot's full barrier with lane
    # 0's expect_tx
    assert bulk == 1, bulk
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[", ptx)) >= 2
    assert "cp.async.mbarrier.arrive.noinc.shared::cta.b64" in ptx and "cp.async.wait_all" in ptx
    # no global loads of weights by the consumers: everything comes through the ring
    assert "cp.async.ca" not in ptx and not re.search(r"ld\.global(\.\w+)*\.v4\.u32", ptx)
    # per group and tile: 2 chunks x 4 k16-steps x (2 n8 halves when M > 8, else 1), unrolled over the stage's
    # groups (one body: M is static)
    mma = len(re.findall(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.f16\.f16\.f32", ptx))
    assert mma == sg * tn * 2 * 4 * (2 if M > 8 else 1), mma
    assert "red.global.add.v4.f32" in ptx
    assert not re.search(r"cvt\.rn\.f(16|32)\.[su](8|16|32)", ptx), "an int -> float conversion per weight"
    cuobjdump = shutil.which("cuobjdump") or next(
        (c for c in ("/usr/local/cuda/bin/cuobjdump", "/usr/bin/cuobjdump") if os.access(c, os.X_OK)), None)
    if cuobjdump:
        sass = subprocess.run([cuobjdump, "-sass", str(tmp_path / "k.cubin")], capture_output=True, text=True).stdout
        assert "UBLKCP" in sass and "SYNCS" in sass


def test_source_compiles_for_sm80_as_a_trap(tmp_path):
    """The bundle of target "cuda" also builds sm_80: the helpers are empty there and the body traps."""
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    cu = tmp_path / "k.cu"
    cu.write_text(_wrapped_source(16, 8192, 8192, 128, 2, 8, 1, 7, 132))
    r = subprocess.run([NVCC, "-arch=sm_80", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ptx = (tmp_path / "k.ptx").read_text()
    assert "trap;" in ptx and "cp.async.bulk" not in ptx and "mbarrier" not in ptx


def _compiled_source(monkeypatch, prog):
    """The kernel's CUDA source for sm_90a alone (the bench's TL_CUDA_TARGET): the ring needs more shared memory
    than the sm_80 / sm_89 members of a plain "cuda" bundle allow. Skips without a tl-pack build or a CUDA
    compiler."""
    use_tl_pack()
    monkeypatch.setenv("TL_CUDA_TARGET", "sm_90a")
    return cuda_kernel_source(prog)


def test_tile_program_at_the_bench_shape(tmp_path, monkeypatch):
    """hopper_bench's first m16b config at 16 x 8192 x 8192 as the tile compiler emits it: one kernel of 132
    blocks x 288 threads, the call per thread with its own slot and the caller's workspace; ptxas: no spills."""
    src = _compiled_source(monkeypatch, wb.w4a16_bulk(16, 8192, 8192, tn=2, cw=8, stage_groups=1, stages=7,
                                                      blocks=132, workspace=True))
    assert src.count("__global__") == 1
    assert "__launch_bounds__(288) main_kernel(" in src
    assert re.search(r"tl_w4b_n8192_k8192_g128_t2_c8_s1_d7_b132\(&A\[0\], &Wp\[0\], &Sp\[0\], &C\[0\], &buf\[0\], 16, "
                     r"bx, \(\(2 \* p\) \+ h\), &Wk\[0\], &Sem\[0\]\);", src), src[-1500:]
    if not os.access(NVCC, os.X_OK):
        return
    info = ptxas_v(src, tmp_path)
    assert "0 bytes spill stores, 0 bytes spill loads" in info, info


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"M=17 must be an int in 1..16"):
        wb.w4a16_bulk(17, 256, 1024)
    with pytest.raises(ValueError, match=r"group_size=96 must be a multiple of 64"):
        wb.w4a16_bulk(16, 256, 768, group_size=96)
    with pytest.raises(ValueError, match=r"N=200 must be a multiple of block_N = 16 \* tn \* cw = 256"):
        wb.w4a16_bulk(16, 200, 8192)
    with pytest.raises(ValueError, match=r"stages=0 must be a positive int"):
        wb.w4a16_bulk(16, 256, 1024, stages=0)
    with pytest.raises(ValueError, match=r"stages=8 x stage_groups=4 need \d+ bytes of shared memory"):
        wb.w4a16_bulk(16, 8192, 8192, stages=8, stage_groups=4)
    with pytest.raises(ValueError, match=r"blocks=0 must be a positive int"):
        wb.w4a16_bulk(1, 256, 1024, blocks=0)
    # N, K and group_size are printed into the C source: a float (8192.0) would reach it
    with pytest.raises(ValueError, match=r"N=8192.0 must be a positive int"):
        wb.w4a16_bulk(16, 8192.0, 8192)
    with pytest.raises(ValueError, match=r"K=0 must be a positive int"):
        wb.w4a16_bulk(16, 256, 0)
    with pytest.raises(ValueError, match=r"group_size=128.0 must be a positive int"):
        wb.check_args(16, 256, 1024, 128.0, 2, 8, 1, 7, 132)
    with pytest.raises(ValueError, match=r"out_dtype must be float16"):
        wb.w4a16_bulk(16, 256, 1024, out_dtype="float32")


def test_bench_wiring(monkeypatch):
    """hopper_bench's "m16b" path off-GPU: fits only its own M's row, the program is w4a16_bulk with the tuple's
    tn / cw / stage_groups / stages / blocks, the arguments are (A, Wp, Sp, C, Wk [N, 16] zero, Sem [N / 16] zero)
    with pack_w4a16_m16's layout, and --w4-kinds / --w4-ms keep exactly the asked rows and kinds."""
    sys.path.insert(0, os.path.join(ROOT, "tools", "bench"))
    import hopper_bench as hb
    cfg16 = (16, 128, 128, 6, 160, "m16b", 132, 2)
    cfg1 = (1, 64, 128, 9, 160, "m16b", 132, 4)
    case = hb.w4_case(16, 512, 512, (cfg16, cfg1))
    assert hb.fits(case, cfg16) and not hb.fits(case, cfg1)
    assert hb.w4_split_of(cfg16, 512) == 1
    seen = {}
    monkeypatch.setattr(wb, "w4a16_bulk", lambda *a, **k: seen.update(args=a, kw=k) or "prog")
    assert case.program(cfg16) == "prog"
    assert seen["args"] == (16, 512, 512) and seen["kw"] == dict(group_size=128, tn=2, cw=4, stage_groups=2, stages=6,
                                                                 blocks=132, workspace=True, evict_first=False)
    monkeypatch.undo()
    be = hb.NumpyBackend()
    x = case.make(be, np.random.default_rng(0))
    o = np.zeros((16, 512), np.float16)
    args = case.args(x, o, cfg16)
    assert len(args) == 6
    wp, sp = wm.pack_w4a16_m16(x["W"], x["S"])
    assert np.array_equal(args[1], wp) and np.array_equal(args[2], sp)
    assert args[4].shape == (512, 16) and args[4].dtype == np.float32 and not args[4].any()
    assert args[5].shape == (32,) and args[5].dtype == np.int32 and not args[5].any()
    assert x["_w"] is args[4]
    cases = hb.select_w4(hb.all_cases(tiny=True, only=("w4a16",)), "m16b,ldg", "1,16")
    assert [c.params["M"] for c in cases] == [1, 16]
    assert all(str(cfg[5]) in ("m16b", "ldg") for c in cases for cfg in c.configs)
    assert any(cfg[5] == "m16b" for cfg in cases[1].configs)
