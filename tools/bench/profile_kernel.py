#!/usr/bin/env python3
"""One of our benchmark kernels, launched a few times on the GPU, for a profiler (ncu) to look at.

  python3 tools/bench/profile_kernel.py gemm M N K DTYPE BM BN BK THREADS STAGES [RASTER [SPLIT [VARIANT...]]]
      (SPLIT > 1: kernels.gemm.matmul_splitk with the caller's workspace, as hopper_bench's split-K configs;
      each call launches main_k0, the split kernel, then main_k1, the cast: `ncu -k regex:main_k0`;
      VARIANT partials | swap | swap-partials as hopper_bench's 8th config element: reduce="partials"
      (W [SPLIT, M, N], no zeroing), swap_ab=True (SPLIT 1 with swap: matmul(swap_ab=True), one kernel);
      then, in any order, as hopper_bench's later elements: persistent (pass_configs {"tl.persistent": True},
      the sm_90a kernel over min(tiles, 132 x blocks per SM) blocks) and cluster2 (matmul(cluster=2): clusters
      of 2 blocks multicasting the shared TMA tile; SPLIT 1 only) and gemm_pingpong (with persistent: pass_configs
      {"tl.gemm_pingpong": True}, a 128-thread block as two consumer warpgroups on alternate tiles) and bulk
      (pass_configs {"tl.bulk_store": True}: the epilogue as per-row bulk copies) and tma_store (pass_configs
      {"tl.tma_store": True}: the epilogue as TMA tensor stores), e.g. `... 0 1 persistent cluster2`)
  python3 tools/bench/profile_kernel.py attention B H S D CAUSAL BM BN THREADS STAGES [VARIANT]
      (VARIANT overlap | nows | pingpong | overlap+pingpong as hopper_bench's FA config elements after the 4th:
      flash_attention(overlap=True) / (pingpong=True), or
      pass_configs tl.disable_warp_specialized)
  python3 tools/bench/profile_kernel.py w4a16 M N K BM BN BK STAGES THREADS KIND [SPLIT]   (hopper_bench's
      W4_CONFIGS_* tuple after the shape: KIND gemv | h2 | ldg | m1 | mma | mma_h2 | mma_h2g2 | wgmma | wgmma_p | lut | stage | plain;
      group size 128, fp16; SPLIT > 1: w4a16_mma / w4a16_wgmma (split_k=SPLIT) with the caller's workspace, main_k0 then main_k1)
  python3 tools/bench/profile_kernel.py w4a16 M N K 16 BN 128 DEPTH THREADS m16|m16r SPLIT WK   (kernels.w4a16_m16,
      CUDA only: hopper_bench's "m16" / "m16r" (ring=True) tuple; the random weights repacked by pack_w4a16_m16 first; one kernel, main_kernel,
      at any SPLIT)
  python3 tools/bench/profile_kernel.py w4a16 M N K M BN 128 STAGES THREADS m16b BLOCKS STAGE_GROUPS [ef]   (kernels.w4a16_bulk,
      CUDA sm_90 only: hopper_bench's "m16b" tuple; the weights repacked by pack_w4a16_m16, the workspace [N, 16] and
      semaphores [N / 16] zero; one kernel, main_kernel, a persistent grid of BLOCKS)

The kernel is compiled the way tools/bench/hopper_bench.py compiles it (tilelang.compile(target=
"cuda"), so a config the bench precompiled is a cache hit), the inputs are random torch tensors on
cuda:0, and the kernel runs `--reps` times (default 3). tools/device/hopper_bench.sh profile runs
it under `ncu --launch-skip 1 --launch-count 1` (the second launch: the first one loads the module).
"""
import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)


def _ints(ap, what, vals):
    try:
        return [int(v) for v in vals]
    except ValueError:
        ap.error(f"{what}: expected integers, got {' '.join(vals)!r}")


def gemm_program(ap, args):
    """The gemm command line (after `gemm`) -> (program, pass_configs, split, partials, dtype, (M, N, K));
    a malformed one is ap.error."""
    from kernels import gemm
    if len(args) < 9:
        ap.error(f"gemm: expected M N K DTYPE BM BN BK THREADS STAGES [RASTER [SPLIT [VARIANT...]]], got {' '.join(args)!r}")
    M, N, K = _ints(ap, "gemm M N K", args[:3])
    dtype = args[3]
    bm, bn, bk, threads, stages = _ints(ap, "gemm BM BN BK THREADS STAGES", args[4:9])
    raster, split = _ints(ap, "gemm RASTER SPLIT", args[9:11]) + [0, 1][len(args[9:11]):]
    rest = args[11:]
    flags = [v for v in rest if v in ("persistent", "cluster2", "gemm_pingpong", "bulk", "tma_store")]  # hopper_bench's later elements
    variants = [v for v in rest if v not in flags]
    if len(variants) > 1 or (variants and rest[0] != variants[0]):
        ap.error(f"gemm: one VARIANT first, then only 'persistent' / 'cluster2' / 'gemm_pingpong' / 'bulk' / 'tma_store', "
                 f"got {' '.join(rest)!r}")
    variant = variants[0] if variants else ""
    if variant not in ("", "partials", "swap", "swap-partials"):
        ap.error(f"gemm VARIANT {variant!r} not in partials | swap | swap-partials | persistent | cluster2")
    cluster = 2 if "cluster2" in flags else 1
    if cluster > 1 and split > 1:
        ap.error("gemm: cluster2 is matmul's (SPLIT 1), not matmul_splitk's")
    pass_configs = {**({"tl.persistent": True} if "persistent" in flags else {}),
                    **({"tl.gemm_pingpong": True} if "gemm_pingpong" in flags else {}),
                    **({"tl.bulk_store": True} if "bulk" in flags else {}),
                    **({"tl.tma_store": True} if "tma_store" in flags else {})} or None
    partials = variant in ("partials", "swap-partials")
    if split > 1:
        prog = gemm.matmul_splitk(M, N, K, split, dtype=dtype, out_dtype=dtype, block_M=bm, block_N=bn,
                                  block_K=bk, num_stages=stages, threads=threads, workspace=True,
                                  reduce="partials" if partials else "atomic",
                                  swap_ab=variant.startswith("swap"))
    else:
        prog = gemm.matmul(M, N, K, dtype=dtype, out_dtype=dtype, block_M=bm, block_N=bn, block_K=bk,
                           num_stages=stages, threads=threads, raster=raster, swap_ab=variant == "swap",
                           cluster=cluster)
    return prog, pass_configs, split, partials, dtype, (M, N, K)


def m16b_program(ap, M, N, K, bn, bk, stages, threads, split, rest):
    """The m16b command line's kernel (rest: the arguments after SPLIT = BLOCKS: STAGE_GROUPS [ef])."""
    from kernels import w4a16_bulk
    cw = threads // 32 - 1
    if not rest or rest[1:] not in ([], ["ef"]):
        ap.error(f"w4a16 m16b: expected ... m16b BLOCKS STAGE_GROUPS [ef] after the tuple's first five, "
                 f"got {' '.join(rest)!r} after BLOCKS")
    if threads % 32 or cw < 1 or bn % (16 * cw):
        ap.error(f"w4a16 m16b: BN={bn} must be a multiple of 16 x (THREADS / 32 - 1) = {16 * max(cw, 1)} "
                 f"(THREADS={threads}: one producer warp and whole 16-row tiles per consumer warp)")
    try:
        return w4a16_bulk.w4a16_bulk(M, N, K, group_size=bk, tn=bn // 16 // cw, cw=cw,
                                     stage_groups=_ints(ap, "w4a16 m16b STAGE_GROUPS", rest[:1])[0], stages=stages,
                                     blocks=split, workspace=True, evict_first=rest[1:] == ["ef"])
    except ValueError as e:
        ap.error(str(e))


def _cuda():
    import torch
    return torch, torch.device("cuda", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("gemm", "attention", "w4a16"))
    ap.add_argument("args", nargs="+")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    # the command line is checked (ap.error) before torch is imported or the GPU touched
    pass_configs = None  # attention "nows": the sm_90a kernel without the producer warpgroup; gemm "persistent"
    if a.kind == "gemm":
        prog, pass_configs, split, partials, dtype, (M, N, K) = gemm_program(ap, a.args)
        torch, dev = _cuda()
        t = getattr(torch, dtype)
        args = [torch.randn((M, K), device=dev, dtype=t), torch.randn((K, N), device=dev, dtype=t),
                torch.empty((M, N), device=dev, dtype=t)]
        if split > 1 and partials:
            args.append(torch.empty((split, M, N), device=dev, dtype=torch.float32))  # any contents
        elif split > 1:
            args.append(torch.zeros((M, N), device=dev, dtype=torch.float32))  # every call leaves it zero
    elif a.kind == "w4a16":
        from kernels import quant_gemm
        if len(a.args) < 9:
            ap.error(f"w4a16: expected M N K BM BN BK STAGES THREADS KIND [...], got {' '.join(a.args)!r}")
        M, N, K, bm, bn, bk, stages, threads = _ints(ap, "w4a16 M N K BM BN BK STAGES THREADS", a.args[:8])
        kind = a.args[8]
        split = _ints(ap, "w4a16 SPLIT", a.args[9:10])[0] if len(a.args) > 9 else 1
        if kind in ("mma", "mma_h2", "mma_h2g2"):
            prog = quant_gemm.w4a16_mma(M, N, K, group_size=bk, block_M=bm, block_N=bn, num_stages=stages,
                                        threads=threads, magic_round=True, h2_dequant=kind != "mma",
                                        groups_per_step=2 if kind == "mma_h2g2" else 1, split_k=split,
                                        workspace=split > 1)
        elif kind in ("wgmma", "wgmma_p", "wgmma_s", "wgmma_sp", "wgmma_spp"):  # block_N: 64 per warpgroup
            # (threads = 2 * block_N); _p: permute_k; _s: scale_weights (prefill); _sp: and packed_k (random
            # bytes: any packing); _spp: and pingpong
            prog = quant_gemm.w4a16_wgmma(M, N, K, group_size=bk, block_M=bm, block_N=bn, num_stages=stages,
                                          threads=threads, magic_round=True, split_k=split, workspace=split > 1,
                                          permute_k=kind == "wgmma_p", scale_weights=kind in ("wgmma_s", "wgmma_sp", "wgmma_spp"),
                                          packed_k=kind in ("wgmma_sp", "wgmma_spp"), pingpong=kind == "wgmma_spp")
        elif kind == "ldg":  # BN = rows * warps, BK = 1024 * depth, STAGES = prefetch, THREADS = 32 * warps
            prog = quant_gemm.w4a16_gemv_ldg(M, N, K, rows=bn // (threads // 32), warps=threads // 32,
                                             depth=bk // 1024, prefetch=stages)
        elif kind == "m1":  # (1, BN, WK, DEPTH, THREADS, "m1") as hopper_bench's tuple: BN = 16 tn wn, THREADS = 32 wn wk
            from kernels import w4a16_m1
            wn = threads // 32 // bk
            prog = w4a16_m1.w4a16_m1(M, N, K, tn=bn // 16 // wn, wn=wn, wk=bk, depth=stages)
        elif kind == "h2":
            prog = quant_gemm.w4a16_gemv_h2(M, N, K, block_N=bn, block_K=bk, num_stages=stages, threads=threads)
        elif kind == "gemv":
            prog = quant_gemm.w4a16_gemv(M, N, K, block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
                                         threads=threads, magic_round=True)
        elif kind in ("m16", "m16r"):  # (16, BN, group, depth, threads, "m16", split, wk) as hopper_bench's
            from kernels import w4a16_m16
            wk = int(a.args[10])
            wn = threads // 32 // wk
            prog = w4a16_m16.w4a16_m16(M, N, K, group_size=bk, tn=bn // 16 // wn, wn=wn, wk=wk, depth=stages,
                                       split_k=split, workspace=split > 1, ring=kind == "m16r")
        elif kind == "m16b":  # (M, BN, group, stages, 32 (cw + 1), "m16b", blocks, stage_groups) as hopper_bench's
            from kernels import w4a16_m16
            prog = m16b_program(ap, M, N, K, bn, bk, stages, threads, split, a.args[10:])
        elif kind == "lut":
            prog = quant_gemm.w4_lut_matmul(M, N, K, group_size=bk, block_M=bm, block_N=bn, num_stages=stages,
                                            threads=threads)
        else:
            prog = quant_gemm.quant_matmul(M, N, K, bits=4, group_size=128, block_M=bm, block_N=bn, block_K=bk,
                                           num_stages=stages, threads=threads, stage_scales=(kind == "stage"))
        torch, dev = _cuda()
        args = [torch.randn((M, K), device=dev, dtype=torch.float16),
                torch.randint(0, 256, (N, K // 2), device=dev, dtype=torch.uint8),
                (torch.rand((N, K // 128), device=dev) * 0.05 + 0.01).to(torch.float16),
                torch.empty((M, N), device=dev, dtype=torch.float16)]
        if kind == "m16b":  # (A, Wp, Sp, C, Wk, Sem): pack_w4a16_m16's layout, the zero workspace and semaphores
            wp, sp = w4a16_m16.pack_w4a16_m16(args[1].cpu().numpy(), args[2].cpu().numpy())
            args[1], args[2] = torch.as_tensor(wp).to(dev), torch.as_tensor(sp).to(dev)
            args.append(torch.zeros((N, 16), device=dev, dtype=torch.float32))
            args.append(torch.zeros((N // 16,), device=dev, dtype=torch.int32))
        if (kind.startswith("mma") or kind.startswith("wgmma")) and split > 1:
            args.append(torch.zeros((M, N), device=dev, dtype=torch.float32))  # every call leaves it zero
        if kind in ("m16", "m16r"):  # (A, Wp, Sp, C[, Wk]): the weights and scales in pack_w4a16_m16's layout
            wp, sp = w4a16_m16.pack_w4a16_m16(args[1].cpu().numpy(), args[2].cpu().numpy())
            args[1], args[2] = torch.as_tensor(wp).to(dev), torch.as_tensor(sp).to(dev)
            if split > 1:  # the one-kernel split-K's workspace and per-tile semaphores: zero, left zero
                args.append(torch.zeros((M, N), device=dev, dtype=torch.float32))
                args.append(torch.zeros((M, N // bn), device=dev, dtype=torch.int32))
    else:
        from kernels import attention
        B, H, S, D = (int(v) for v in a.args[:4])
        causal = a.args[4].lower() in ("1", "true", "causal")
        bm, bn, threads, stages = (int(v) for v in a.args[5:9])
        variant = a.args[9] if len(a.args) > 9 else ""
        if variant not in ("", "overlap", "nows", "pingpong", "overlap+pingpong"):
            ap.error(f"attention VARIANT {variant!r} not in overlap | nows | pingpong | overlap+pingpong")
        prog = attention.flash_attention(B, H, H, S, S, D, causal, block_M=bm, block_N=bn, threads=threads,
                                         num_stages=stages, dtype="bfloat16", overlap="overlap" in variant,
                                         pingpong="pingpong" in variant)
        if variant == "nows":
            pass_configs = {"tl.disable_warp_specialized": True}
        torch, dev = _cuda()
        args = [torch.randn((B, H, S, D), device=dev, dtype=torch.bfloat16) for _ in range(3)]
        args.append(torch.empty((B, H, S, D), device=dev, dtype=torch.bfloat16))
    import tilelang
    k = tilelang.compile(prog, target="cuda", pass_configs=pass_configs)
    for _ in range(a.reps):
        k(*args)
    torch.cuda.synchronize()
    print(f"profile_kernel: {a.kind} {' '.join(a.args)}: {a.reps} launches done")


if __name__ == "__main__":
    main()
