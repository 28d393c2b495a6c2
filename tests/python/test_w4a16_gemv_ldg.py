"""kernels/quant_gemm.py w4a16_gemv_ldg (issue #11, W4A16 decode at M = 1, CUDA only: imported CUDA source),
checked without a GPU:

- the exact imported C++ text runs on the host (its fp16 asm helpers replaced by _Float16 code, its cp.async
  copies by memcpy into a ring whose bytes remember the thread that copied them: a thread that copies into
  or reads another thread's slot, or past the ring, fails), driven like the tile program (every block, every thread slot, the 32 lanes' partial
  sums added per row) against float64 and against _host_emulation's bit-level numpy model of the
  per-32-weight arithmetic it shares with w4a16_gemv_h2;
- the generated CUDA source and its PTX for sm_90a at N = K = 8192 (hopper_bench's "ldg" configs): every
  weight byte in a 16-byte cp.async (512 contiguous bytes per warp and copy) into the thread's own ring
  slots, one commit group per unit and one wait_group(prefetch) before each (no block barrier but the
  epilogue's), 8 fma.rn.f16x2 and 4 lop3 per word of 8 weights, no int -> float conversion, and ptxas: at
  most 128 registers (at least 4 blocks of 128 threads per SM), at most one 8-byte spill;
- bad tiles and non-CUDA targets are refused naming the argument.

Run: PYTHONPATH=compiler/python:build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest \
     tests/python/test_w4a16_gemv_ldg.py
"""
import re

import numpy as np
import pytest

from _helpers import count, ptx_of, ptxas_v_of_ptx, sm90a_kernel_source  # sys.path: the repo root, tilelang
from _host_emulation import (CUDA_HOST_PRELUDE, SHARED_RING_CHECK, W4H2_HELPERS,  # host stand-ins, the model
                             put_every_byte_value, run_host, w4a16_h2_model)
import tilelang  # noqa: E402

pytestmark = pytest.mark.usefixtures("tl_pack_env")  # conftest.py: skips without a tl-pack build

# the tl_w4l_* helpers on the host (_host_emulation.SHARED_RING_CHECK: the block's shared ring, "shared addresses"
# are offsets into it, each byte remembers the thread that copied into it; the device threads run at once, these
# one after another, so slots that alias would pass here but race there: a copy or read of another thread's byte
# or past the ring's end aborts): the cp.async copies as memcpy (complete at once: the waits are no-ops), the
# loads as plain reads, the lop3 as its expression
_HOST_LOADS = r"""
static inline unsigned tl_w4l_saddr(const void* p) { return tl_host_saddr(p); }
static inline void tl_w4l_cp16(unsigned dst, const void* src) { tl_host_cp_async(dst, src, 16); }
static inline void tl_w4l_cp4(unsigned dst, const void* src) { tl_host_cp_async(dst, src, 4); }
static inline void tl_w4l_commit() {}
#define TL_W4L_WAIT(n) ((void)(n))
static inline uint4 tl_w4l_ldring(unsigned p) { return tl_host_ld_shared<uint4>(p); }
static inline unsigned tl_w4l_ldring4(unsigned p) { return tl_host_ld_shared<unsigned>(p); }
static inline uint4 tl_w4l_lda(const unsigned short* p) { uint4 v; std::memcpy(&v, p, 16); return v; }
static inline unsigned tl_w4l_lo(unsigned x) { return tl_host_and_xor(x, 0x000f000fu, 0x64086408u); }
static inline unsigned tl_w4l_hi(unsigned x) { return tl_host_and_xor(x, 0x00f000f0u, 0x64806480u); }
"""


def _device_part(src):
    """The imported text without its asm helpers (_host_emulation's stand-ins and _HOST_LOADS replace them)."""
    from kernels import quant_gemm as qg
    head = qg._W4H2_HELPERS + qg._W4L_HELPERS
    assert src.startswith(head)
    return src[len(head):]


@pytest.mark.parametrize("K,group,rows,warps,depth,prefetch", [(8192, 128, 4, 4, 2, 4), (2048, 128, 2, 2, 1, 3),
                                                               (3072, 64, 3, 2, 1, 5), (4096, 256, 4, 1, 4, 1),
                                                               (2048, 32, 1, 2, 2, 2)])
def test_gemv_ldg_source_runs_on_the_host(tmp_path, K, group, rows, warps, depth, prefetch):
    """The exact C++ text, every thread slot of every block, against float64 and the bit-level model:
    each ring slot, each row, each slice and group boundary lands on the right weights and scales."""
    from kernels import quant_gemm as qg
    N, threads = 2 * rows * warps, 32 * warps
    src = _device_part(qg._w4ldg_source("ldgdot", K, group, rows, depth, prefetch, threads))
    G, BN = K // group, rows * warps
    main = f"""
int main() {{
  const int N = {N}, K = {K}, G = {G}, BN = {BN}, T = {threads}, R = {rows};
  std::vector<unsigned short> A(K), S(N * G);
  std::vector<unsigned char> W(N * K / 2);
  if (fread(A.data(), 2, K, stdin) != (size_t)K || fread(W.data(), 1, W.size(), stdin) != W.size() ||
      fread(S.data(), 2, S.size(), stdin) != S.size()) return 2;
  std::vector<float> C(N);
  for (int bx = 0; bx < N / BN; ++bx) {{
    std::vector<float> part(R * T, -1e30f);  // every slot written: a missed one shows
    std::vector<unsigned> ring({(prefetch + 1) * depth * 5} * T, 0xffffffffu);  // the tile program's shared ring
    tl_host_smem = reinterpret_cast<unsigned char*>(ring.data());
    tl_host_smem_size = tl_host_ring1 = ring.size() * 4;  // all of it per-thread ring slots
    tl_host_ring0 = 0;
    tl_host_owner.assign(ring.size() * 4, -1);
    for (int t = 0; t < T; ++t) {{
      tl_host_tid = t;
      ldgdot(&W[(size_t)bx * BN * (K / 2)], A.data(), &S[(size_t)bx * BN * G], ring.data(), part.data(), t);
    }}
    for (int n = 0; n < BN; ++n) {{  // the tile program's red[n, l] = part[n % R, (n / R) * 32 + l], reduce_sum
      float r = 0.f;
      for (int l = 0; l < 32; ++l) r += part[(n % R) * T + (n / R) * 32 + l];
      C[bx * BN + n] = r;
    }}
  }}
  fwrite(C.data(), 4, N, stdout);
  return 0;
}}
"""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((1, K)).astype(np.float16)
    W, scales, q = qg.quantize_ref(rng.standard_normal((N, K)), 4, group)
    put_every_byte_value(W, q, 1)  # every byte value in a row
    S = scales.astype(np.float16)
    S[:, ::3] *= 4  # scales that differ per group (a wrong group index shows)
    out = run_host(tmp_path, CUDA_HOST_PRELUDE + SHARED_RING_CHECK + W4H2_HELPERS + _HOST_LOADS + src + main,
                   [A.tobytes(), np.ascontiguousarray(W).tobytes(), S.tobytes()])
    got = np.frombuffer(out, np.float32).astype(np.float64)
    ref = qg.quant_matmul_ref(A.astype(np.float64), q, S.astype(np.float64), group)[0]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3  # fp16 products, 8 per half, float32 after
    np.testing.assert_allclose(got, w4a16_h2_model(A, W, S, group)[0], rtol=1e-5, atol=1e-5)


# hopper_bench's "ldg" configs at N = K = 8192 (rows, warps, depth, prefetch): depth 1 and 2, 128 and 256
# threads, 4 and 8 rows, 4 and 8 units ahead (the other three compile alike: 67-88 registers, no spill)
@pytest.mark.parametrize("rows,warps,depth,prefetch", [(4, 4, 2, 4), (4, 4, 1, 8), (4, 8, 2, 4), (8, 4, 2, 4)])
def test_gemv_ldg_source_and_ptx(tmp_path, rows, warps, depth, prefetch):
    from kernels import quant_gemm as qg
    K = 8192
    s = sm90a_kernel_source(qg.w4a16_gemv_ldg(1, 8192, K, rows=rows, warps=warps, depth=depth, prefetch=prefetch))
    for const in ("0x64086408u", "0x64806480u", "0x3c003c00u", "0xe408e408u", "0x2c002c00u", "0xd480d480u",
                  "0x000f000fu", "0x00f000f0u", "0x5410", "0x7632"):
        assert const in s, const  # the numpy model's constants
    assert f"tl_w4a16_ldg_k{K}_g128_r{rows}_d{depth}_p{prefetch}_t{32 * warps}(" in s
    ptx = ptx_of(s, tmp_path)
    per_thread = rows * K // 1024  # 16-byte chunks of weights per thread: K / 2 bytes of each row over 32 lanes
    units = per_thread // depth
    assert count(ptx, "cp.async.cg.shared.global.L2::256B") == per_thread  # 16 weight bytes each
    assert count(ptx, "cp.async.ca.shared.global") == per_thread  # each chunk's 4-byte scale pair
    assert count(ptx, "cp.async.commit_group;") == units + prefetch  # a group per unit (+ the empty tail ones)
    assert count(ptx, "cp.async.wait_group") == units and f"cp.async.wait_group {prefetch};" in ptx
    assert count(ptx, "ld.shared.v4.u32") == per_thread  # each chunk read once from the thread's own slot
    assert count(ptx, "ld.global.nc.v4.u32") == 4 * K // 1024  # the lane's activations, once per slice
    assert count(ptx, "fma.rn.f16x2") == 32 * per_thread  # 8 per word: 4 to exact integers, 4 products
    assert count(ptx, "lop3.b32") == 16 * per_thread  # (x & m) ^ c: one LOP3 per nibble pair
    assert count(ptx, "cvt.rn.f32.s16") == 0 and count(ptx, "bar.sync") == 1  # no int -> float; the epilogue's
    assert "ld.local" not in ptx and "st.local" not in ptx
    info = ptxas_v_of_ptx(tmp_path)
    regs = [int(v) for v in re.findall(r"Used (\d+) registers", info)]
    assert regs and max(regs) <= 128, info  # 4+ blocks of 128 threads per SM
    # the ring lives in shared memory, nothing in local memory; ptxas's own occupancy target (80 registers:
    # 6 blocks of 128 or 3 of 256 threads per SM) may spill one 64-bit value, no more
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", info)]
    assert spills and max(spills) <= 8, info


def test_gemv_ldg_refused_off_cuda_and_bad_tiles():
    from kernels import quant_gemm as qg
    with pytest.raises(tilelang.TileLangUnimplementedFeature, match=r"calls extern function 'tl_w4a16_ldg_\w+', "
                                                                    r"target cpu"):
        tilelang.compile(qg.w4a16_gemv_ldg(1, 64, 2048), target="cpu")
    with pytest.raises(ValueError, match=r"K=3072 must be a multiple of 1024 \* depth = 2048"):
        qg.w4a16_gemv_ldg(1, 64, 3072)
    with pytest.raises(ValueError, match=r"N=40 must be a multiple of rows \* warps = 16"):
        qg.w4a16_gemv_ldg(1, 40, 2048)
    with pytest.raises(ValueError, match=r"group_size=48 must be a multiple of 32 dividing K=2048 an even number"):
        qg.w4a16_gemv_ldg(1, 64, 2048, group_size=48)
    with pytest.raises(ValueError, match=r"group_size=1024 must be a multiple of 32 dividing K=3072 an even number"):
        qg.w4a16_gemv_ldg(1, 64, 3072, group_size=1024, depth=1)  # 3 groups: no 4-byte scale pairs
    with pytest.raises(ValueError, match=r"prefetch=0 must be >= 1"):
        qg.w4a16_gemv_ldg(1, 64, 2048, prefetch=0)
