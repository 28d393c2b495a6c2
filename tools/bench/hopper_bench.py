#!/usr/bin/env python3
"""Issue #11 benchmarks on the H200, in one run: every row measured against its peers in the same
process on the same random inputs, each output checked against a float64 numpy reference before
it is timed, then the median of many timed runs after warm-up (CUDA events, L2 flushed before
every run).

  GEMM bf16 and fp16 (fp32 accumulation, output in the input dtype), M x N x K = 4096^3, 8192^3,
      8192x8192x1024, 128x8192x8192, 16x8192x8192: ours (kernels/gemm.py matmul, or matmul_splitk for
      the split-K configs, the best of the tile configs listed below for that shape) vs torch.matmul
      (cuBLAS) and a Triton matmul (below).
  FlashAttention forward bf16, D = 128 and 64, causal and not, B=4 H=32 S=4096 and B=1 H=32
      S=16384: ours (kernels/attention.py flash_attention) vs torch SDPA with the cuDNN and the
      flash backends.
  W4A16 (int4 weights two per byte, fp16 scales per group of 128 along K), M = 1, 16, 128 and
      N = K = 8192: ours (kernels/quant_gemm.py) vs fp16 cuBLAS (F.linear) on the dequantized weights.
      Beside each decode row (M = 1, 16) its read floor: the same packed weights and scales only read (and
      summed, checked exactly) by a tile program (tools/bench/read_floor.py read_sum, W4_READ_CONFIGS) and by
      torch's int32 sum, timed like the row ("ours / read floor": the row's time over the pure read's).
  RMSNorm and softmax over rows of 16384 x 8192 bf16: ours (kernels/norm.py) vs
      torch.nn.functional.rms_norm / torch.softmax; and the device copy bandwidth (copy_, clone).

Each row also gets its roofline floor: t_min = max(fewest bytes that must move / measured copy
bandwidth, FLOPs / best measured matrix rate of that dtype in this run), and the fraction of it
reached (t_min / t). Output: a markdown table on stdout, every measurement (all tile configs,
errors, times) as JSON in --json.

  python3 tools/bench/hopper_bench.py --json OUT.json [--only gemm,attention,w4a16,norm]
  python3 tools/bench/hopper_bench.py --precompile [--jobs 2]   no GPU, no torch: compiles every kernel
                                        for CUDA into the cache (TL_CUDA_TARGET, TL_PACK, TL_CACHE_DIR as
                                        for tests/conformance), so the device compiles nothing
  python3 tools/bench/hopper_bench.py --self-test               no GPU, no torch: tiny shapes on the CPU
                                        device with numpy peers; proves kernel selection, argument
                                        order, references, floors and the table (tests/python/
                                        test_hopper_bench.py runs it)
Environment: PYTHONPATH with tilelang (compiler/python) and tilelang_runtime.
tools/device/hopper_bench.sh stages everything for the device call.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # read_floor (the W4A16 read floor)

GROUPS = ("gemm", "attention", "w4a16", "norm")

# GEMM tile configs (block_M, block_N, block_K, threads, num_stages[, raster[, split_k]]), by M; raster P > 0:
# blocks walked in panels of P row blocks (kernels.gemm.matmul raster=); split_k S > 1: kernels.gemm.matmul_splitk
# (S blocks per output tile, each over 1/S of K, float32 atomics into a float32 workspace, then a kernel that
# rounds it into C and writes zeros back: both kernels are inside the timed call; the workspace is zeroed once
# when allocated, outside it, and every call leaves it zero); an 8th element "partials": matmul_splitk(reduce=
# "partials") -- each split stores its tile into its own float32 slice W[z] (plain 16-byte stores, no atomics),
# the second kernel adds the slices in order and rounds (W needs no zeroing: the bench passes it NaN-filled);
# "swap" / "swap-partials": matmul_splitk(swap_ab=True), or matmul(swap_ab=True) at split 1 (one kernel, C stored
# directly) -- C^T = B^T A^T, N on wgmma's 64-row M side, block_M the wgmma N (16 at M = 16: A's tile has no rows
# of zeros, a stage is ~80-90 % B).
# "persistent" as the 8th element (or the 9th, after partials / swap): pass_configs {"tl.persistent": True} -- the
# sm_90a warp-specialized kernel over min(tiles, 132 SMs x blocks per SM) blocks, each looping over output tiles
# b, b + G, ... (the producer fills the next tile's stages during the consumers' epilogue); only changes kernels
# with more tiles than that (17:40, TL_CUDA_PERSISTENT=1 for the whole build: K = 1024 0.91 -> 0.95 of cuBLAS).
# "cluster2" as an element after the 7th (with or without "persistent"): matmul(cluster=2) -- on sm_90a the
# warp-specialized kernel as thread-block clusters of 2 blocks along the grid's x (blocks / tiles 2j, 2j + 1) whose
# producers each load half of the operand tile both blocks need and multicast it into both (raster 0: the A row block,
# a rasterized order with an even panel: the B column block), as cuBLAS's nvjet 1x2-cluster kernels do; a kernel whose
# x extent (raster 0: N / block_N; else the tile count) is odd builds without the cluster (its build notes say why).
# "bulk" as an element after the 7th: pass_configs {"tl.bulk_store": True} (opt-in, session 11; H200 2026-12-05: 3-25 %
# slower than without) -- the staged epilogue stored by warp 0 as one cp.async.bulk copy per tile row; persistent, its wait is
# deferred to the next tile's epilogue, so the store overlaps the next k-loop.
# "tma_store" as an element after the 7th: pass_configs {"tl.tma_store": True} (opt-in, session 14; H100 2026-12-05: the
# best config on the six large rows by 0.4-0.7 %, i.e. noise) -- the staged epilogue tile 128B-swizzled and stored by thread 0's TMA tensor stores (one box per 64-column panel;
# persistent, the wait deferred to the next tile's epilogue); takes "bulk"'s place.
# "gemm_pingpong" as an element after the 7th (with "persistent"): pass_configs {"tl.gemm_pingpong": True} (opt-in,
# session 12; H200 2026-12-05: 2-64 % slower than the best cooperative kernel, 7 % faster than the cooperative 128x128 at
# K = 1024) -- a 128-thread block (128x128 tile) as CUTLASS's ping-pong schedule: two consumer
# warpgroups on alternate tiles of the persistent block (384 threads), one's epilogue under the other's k-loop;
# with "cluster2" (session 15) as clusters of 2 persistent blocks whose producers multicast the shared operand tile
# (none listed: measured slower on the H100, below; `--gemm-configs` still takes them).
# The best one is reported.
# Pruned after the H200 table of 2026-12-04 19:50 (session 10), so the whole table fits one device call with its
# validation: a config stays where it came within 10 % of the row's best on some row (the ratio in brackets is
# its best), plus one split-K config of each reduction (atomic, partials) per skinny list, whose factory paths
# --self-test runs. Dropped (best ratio): 128x256x32 3 st. (1.41) and rasterized (1.45), 128x128x32/128 (1.43),
# 128x128x64/256 3 st. (1.18), 128x128x64/128 4 st. (1.15); M = 128: 128x64x64/256 (1.60), 64x64 (1.31),
# 128x128x32 (2.66), split 4 (1.24-1.28), 128x256 split 4 partials (1.53), 128x64 split 2 (1.21) and partials
# (1.21), 64x128 split 2 (1.37); M = 16: the 16x64 / 16x128 / 16x32 / 64x64 tiles without swap (1.26-1.66),
# their splits 2-8 (1.22-1.60), 64x128 / 64x256 split 4 (1.19-1.26), 16x256 swap-partials (1.23).
GEMM_CONFIGS_LARGE = ((128, 256, 64, 256, 3), (128, 128, 64, 128, 3),  # [1.01], [1.02]
                      # deeper pipelines for the warp-specialized loop (the producer runs up to S stages ahead):
                      # 128x256x64 at 4 stages is 196 KiB of shared memory (sm_90a only)
                      (128, 256, 64, 256, 4), (128, 256, 64, 256, 4, 8),  # [1.00], 8192^3's best
                      # persistent tiles (per compile; the epilogue tile needs its own shared memory, so 128x256x64
                      # takes 3 stages: 144 + 64 KiB; at 4 it would stay non-persistent): 4096^3's and K = 1024's
                      # best, rasterized, and 128x128 tiles at 4 stages (128 + 32 KiB)
                      (128, 256, 64, 256, 3, 0, 1, "persistent"), (128, 256, 64, 256, 3, 8, 1, "persistent"),
                      (128, 128, 64, 256, 4, 0, 1, "persistent"), (128, 128, 64, 128, 4, 0, 1, "persistent"),  # [1.03], [1.09]
                      # 2-block clusters with TMA multicast (session 9): the 4-stage configs with the cluster (raster 0:
                      # A multicast; raster 8: B). H200 2026-12-04 17:13: 2-6 % slower than without; with "persistent"
                      # 12-20 % slower (those configs dropped)
                      (128, 256, 64, 256, 4, 8, 1, "cluster2"), (128, 256, 64, 256, 4, 0, 1, "cluster2"),  # [1.06], [1.02]
                      # cuBLAS's nvjet_..._256x128_64x4_1x2 shape: 256x128 tiles (2 consumer warpgroups of 128 rows),
                      # pairs of column blocks sharing the 256-row A tile (32 of a stage's 48 KiB multicast: 2/3 of
                      # A's L2 reads saved per pair instead of 1/3 with 128x256), and the same without the cluster
                      (256, 128, 64, 256, 4, 0, 1, "cluster2"),  # [1.01]
                      (256, 128, 64, 256, 3, 0, 1, "persistent"),  # [1.04]
                      # session 14: the TMA-store epilogue (CUTLASS's: the staged tile 128B-swizzled, one TMA tensor
                      # store per 64-column panel by thread 0, the persistent form's wait deferred a tile) on the
                      # persistent winners and the non-persistent 8192^3 winner -- in place of session 11's per-row
                      # bulk-store configs, 3-25 % slower than without on the H200 (2026-12-05; "bulk" still works).
                      # H100 2026-12-05 (session 15): the best on all six large rows, by 0.4-0.7 %
                      (128, 256, 64, 256, 3, 0, 1, "persistent", "tma_store"), (128, 256, 64, 256, 3, 8, 1, "persistent", "tma_store"),
                      (128, 256, 64, 256, 4, 8, 1, "tma_store"),
                      # session 12 (H200 2026-12-05: 1.02-1.64 of the row's best; H100 session 15: 1.08-1.33): the
                      # ping-pong schedule of 128x128x64 tiles (two consumer warpgroups each on its own tile; 4 stages
                      # + two epilogue tiles: 196 KiB of shared memory), and with the TMA-store epilogue (each
                      # warpgroup's thread 0 stores its own tile). Dropped (H100 session 15, best ratio): rasterized
                      # (1.18), 3 stages (1.31), and session 14's 64x256 ping-pong tiles in all three forms (1.24).
                      (128, 128, 64, 128, 4, 0, 1, "persistent", "gemm_pingpong"),
                      (128, 128, 64, 128, 4, 0, 1, "persistent", "gemm_pingpong", "tma_store"),
                      # Dropped after one H100 run (session 15, 2026-12-05 10:49; correct, best ratio 1.21): the ping-pong
                      # with 2-block clusters, (128, 128, 64, 128, 4, 0|8, 1, "persistent", "gemm_pingpong", "cluster2"
                      # [, "tma_store"]) -- the ping-pong's 128x128 tiles are L2-bound there (ncu at 8192^3: L2
                      # throughput 91 %, hit rate 55 %), but multicasting the shared tile made it 3-16 % slower in
                      # block order (18-49 % rasterized), as the cooperative kernel's clusters were on the H200.
                      )
GEMM_CONFIGS_M128 = ((128, 64, 128, 128, 4),  # [1.03]
                     # split-K over the warp-specialized wgmma loop, atomic and per-split partials [1.15], [1.20]
                     (128, 128, 64, 256, 5, 0, 2), (128, 128, 64, 256, 5, 0, 2, "partials"),
                     # one kernel, no split (ncu 16:58: the split kernel alone is 45.7 us, the call ~55 us): 128 blocks
                     # of 128x64, 192 KiB pipelines -- the best [1.00]
                     (128, 64, 64, 128, 8),
                     # persistent (128 tiles: one per block, but the epilogue tile out of the stages' memory: 192 + 16 KiB)
                     (128, 64, 64, 128, 8, 0, 1, "persistent"),  # [1.00]
                     # 2-block clusters (session 9): the pair shares A (M = 128: the one row block), multicast as
                     # two half boxes, so A is read from the L2 by 64 clusters instead of 128 blocks [1.09]
                     (128, 64, 64, 128, 8, 0, 1, "cluster2"))
GEMM_CONFIGS_M16 = ((64, 64, 128, 128, 6),  # 64-row tiles at 6 stages of 32 KiB [1.12]
                    # swap-AB (16-row A tiles: 18 KiB per 64x128 stage, 2 blocks of 6 stages per SM): split 4, atomic
                    # and per-split partials [1.14], [1.21]
                    (16, 128, 64, 128, 6, 0, 4, "swap"), (16, 128, 64, 128, 6, 0, 4, "swap-partials"),
                    # one kernel, no split (ncu 16:58: the split kernel alone is 38.4 us at 3.58 TB/s, the call ~52 us):
                    # 128 blocks of 64 columns, swap-AB at 8 stages of 16 KiB of B + 4 KiB of A (128 KiB of B in flight
                    # per SM, as the split config's 2 blocks x 4 stages) -- the best [1.00]
                    (16, 64, 128, 128, 8, 0, 1, "swap"),
                    # the swap-AB one persistent (128 tiles, one per block: its epilogue tile out of the stages'
                    # memory; 17:40 with TL_CUDA_PERSISTENT=1 for the whole build: bf16 0.99 -> 1.00) [1.00]
                    (16, 64, 128, 128, 8, 0, 1, "swap", "persistent"))
GEMM_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (128, 8192, 8192), (16, 8192, 8192))
# FlashAttention (block_M, block_N, threads, num_stages). Since 6ef9f64 P stays in registers (wgmma register
# operand A), so no P tile in shared memory; ptxas sm_90a / blocks per SM (registers and shared bytes):
# d128: 128x64/256 128 regs 98 KB -> 2 (16 warps); 64x64/128 128 regs 82 KB -> 2; 128x96/256 158 regs -> 1;
# 128x128/256 178 regs 164 KB -> 1; 128x176/256 235 regs 213 KB -> 1 (the largest tile, 8 warps).
# d64: 128x128/256 128 regs 82 KB -> 2 (16 warps); 128x96/256 128 regs 66 KB -> 2; 64x64/128 95 regs -> 5;
# 128x176/256 197 regs 107 KB -> 1. (176 and 96 divide neither S = 4096 nor 16384: `fits` never ran them.)
# 3 stages: d128 128x64/256 128 regs 128 KB -> 1, 128x128/256 169 regs 224 KB -> 1 (the same one block as
# 2 stages, one more K/V tile in flight); d64 128x128/256 112 KB -> 2.
# Variants (5th+ elements): "nows": pass_configs {"tl.disable_warp_specialized": True} (no producer warpgroup: two
# blocks per SM at 128x64 / 64x64); "overlap": flash_attention(overlap=True), FA3's intra-warpgroup overlap of S_k with
# P_{k-1} V_{k-1} (P kept as packed bf16x2 registers since session 10: 128x128 D128 no longer spills); "pingpong":
# flash_attention(pingpong=True), FA3's warp scheduler barriers (the two consumer warpgroups take turns issuing, named
# barriers 2/3, compiler/lowering/gpu/src/pingpong.cc); "persistent": pass_configs {"tl.persistent": True}, one block
# per SM looping over the tiles (SDPA-cuDNN's kernel is persistent, grid 132: ncu 2026-12-04 18:45); "uniform":
# flash_attention(uniform_overlap_steps=True), the overlap loop's one step body without the pingpong.
# Pruned after the H200 run of 2026-12-04 19:50 (19 configs): these six each won or came within 2 % on some row; the
# plain warp-specialized 128x128 tile (5-12 % behind) stays as the reference, and one persistent config (6-20 %
# behind, slower on causal rows: a static round robin of unequal tiles) stays measured. Dropped, with their best
# ratio to the row's winner: 128x128 3-stage plain 1.06, pingpong 2 / 3 stages 1.07 / 1.07, pingpong + persistent
# 3 stages 1.09, 128x64 (2 / 3 stages) 1.13 / 1.15, 128x64 overlap (2 / 3) 1.18 / 1.15, 64x64 warp-specialized 1.15.
FA_CONFIGS = ((128, 64, 256, 2, "nows"), (64, 64, 128, 2, "nows"),
              (128, 128, 256, 2, "overlap"), (128, 128, 256, 3, "overlap"),
              (128, 128, 256, 2, "overlap", "pingpong"), (128, 128, 256, 3, "overlap", "pingpong"),
              (128, 128, 256, 2), (128, 128, 256, 2, "pingpong", "persistent"),
              # FA3's D64 tile (session 11): 192 query rows over 3 consumer warpgroups (384 + 128 threads, 128
              # registers at entry, no spills); the ragged last query block at S = 4096 / 16384 is masked. H200
              # 2026-12-04 21:40: D64 S4096 1.124 ms (cuDNN 1.144), S16384 4.241 ms (cuDNN 4.721), causal S16384
              # 2.225 ms (2.378); with overlap 18-35 % slower, persistent slower still. D128 does not compile
              # (P kept in shared memory at 128 registers a thread needs 174 KiB: `fits` skips it).
              (192, 128, 384, 2), (192, 128, 384, 3),
              # Persistent, as session 11 rebuilt it (H200 2026-12-05: the best of four rows): no consumer spills (the thread index
              # re-read per tile), a work-balanced tile order on causal rows, and the producer loading the next
              # tile's Q while O leaves through its own tile (own_o_tile); the row winners' tiles in that form.
              (128, 128, 256, 2, "overlap", "pingpong", "persistent"), (128, 128, 256, 2, "overlap", "persistent"),
              (192, 128, 384, 2, "persistent"),
              # "uniform": the overlap loop's one step body (S at every step, the last one's dropped; the pingpong
              # kernels' default) without the pingpong -- H200 2026-12-05 (A/B of the two kernel sources): the
              # persistent 128x128 overlap kernel 2 % faster that way at D128 non-causal, 2-19 % slower elsewhere
              (128, 128, 256, 2, "overlap", "persistent", "uniform"),
              # FA3's D128 tile (128 x 176, session 11: builds since a target naming sm_90a alone may drop the
              # implied compute_80 PTX; 0 spills; H200 2026-12-05: the best at D128 S16384), the ragged last KV block masked
              (128, 176, 256, 2, "overlap", "pingpong"))
FA_SHAPES = ((4, 32, 4096), (1, 32, 16384))  # (batch, heads, seq)
# W4A16 (block_M, block_N, block_K, num_stages, threads, kind): kind False / True is
# kernels.quant_gemm.quant_matmul with stage_scales off / on, "lut" is kernels.quant_gemm.w4_lut_matmul
# (table dequantization, scales on the accumulator; block_K must be the group size), "gemv" is
# kernels.quant_gemm.w4a16_gemv (no tensor cores: one int -> float conversion per weight byte, float32
# FMAs, block_M rows of A per block, so M = 16 runs M / block_M block rows), "mma" is
# kernels.quant_gemm.w4a16_mma (the same dequantization into an fp16 tile of exact integers, mma.sync,
# group scales on a per-step accumulator; block_K must be the group size). The first decode config is
# the standard library's manifest config (w4a16_g128_decode).
W4_CONFIGS_DECODE = ((16, 64, 64, 1, 128, False), (16, 64, 256, 3, 128, True), (16, 32, 512, 3, 128, True),
                     (16, 128, 256, 3, 256, True), (16, 64, 128, 4, 128, "lut"), (16, 32, 128, 4, 128, "lut"),
                     (16, 128, 128, 4, 256, "lut"),
                     (1, 16, 128, 4, 64, "gemv"), (1, 16, 128, 8, 64, "gemv"), (1, 32, 128, 6, 128, "gemv"),
                     (1, 16, 256, 4, 128, "gemv"), (4, 16, 256, 3, 128, "gemv"), (2, 16, 128, 4, 64, "gemv"),
                     (1, 8, 128, 4, 64, "gemv"),
                     # more warps in flight (ncu at 1x32x128/128 threads: 2 warps per scheduler, 0.3 eligible,
                     # issue slots 26 % busy: latency-bound): fewer weight bytes per thread and k-step
                     (1, 16, 128, 6, 128, "gemv"), (1, 16, 128, 6, 256, "gemv"), (1, 32, 128, 6, 256, "gemv"),
                     (1, 32, 256, 4, 256, "gemv"),
                     # "h2": kernels.quant_gemm.w4a16_gemv_h2 (CUDA only: int4 -> fp16 pairs by bit operations
                     # and fma.f16x2 in imported CUDA source, 16-byte weight loads; block_M must be 1); "mma_h2":
                     # w4a16_mma(h2_dequant=True) (CUDA only: the fp16 tile made by the same bit operations)
                     (1, 16, 256, 6, 128, "h2"), (1, 32, 256, 6, 128, "h2"), (1, 64, 256, 4, 128, "h2"),
                     (1, 32, 512, 4, 256, "h2"), (1, 16, 512, 6, 128, "h2"), (1, 64, 256, 4, 256, "h2"),
                     (1, 32, 256, 8, 128, "h2"), (1, 16, 256, 8, 128, "h2"),
                     # "ldg": kernels.quant_gemm.w4a16_gemv_ldg (CUDA only, h2's arithmetic) -- each thread's own
                     # cp.async ring, no block-wide pipeline (the h2 ncu: DRAM ~29 % busy, too few bytes in
                     # flight). Tuple: (1, rows * warps, 1024 * depth, prefetch, 32 * warps, "ldg"): each lane
                     # keeps prefetch * depth * 16 weight bytes in flight, a warp owns rows rows
                     (1, 16, 2048, 4, 128, "ldg"), (1, 16, 1024, 8, 128, "ldg"), (1, 8, 2048, 4, 128, "ldg"),
                     (1, 32, 2048, 4, 256, "ldg"), (1, 16, 2048, 8, 128, "ldg"), (1, 32, 1024, 8, 128, "ldg"),
                     (1, 32, 2048, 4, 128, "ldg"),
                     # "m1": kernels.w4a16_m1 (CUDA only, quant_gemm's packing): the dot products on mma.sync
                     # (weights as the 16-row operand, one LOP3 per pair of weights, the bias removed by a chain
                     # starting from -beta), per-thread cp.async rings as ldg's, the activations staged once per
                     # block. Tuple: (1, 16 * tn * wn, wk, depth, 32 * wn * wk, "m1"): wk warps split K, depth
                     # chunks of 128 k (tn KiB per warp) in flight per warp. 1 x 2 x 8 / 3: 256 blocks of 512
                     # threads (62 registers, 86 KiB: 2 per SM, 96 KiB of weights in flight per SM)
                     (1, 32, 8, 3, 512, "m1"), (1, 32, 8, 2, 512, "m1"), (1, 32, 8, 4, 512, "m1"),
                     (1, 32, 8, 3, 256, "m1"), (1, 16, 8, 3, 256, "m1"), (1, 64, 8, 3, 1024, "m1"),
                     (16, 32, 128, 4, 128, "mma"), (16, 64, 128, 4, 128, "mma"), (16, 16, 128, 6, 64, "mma"),
                     (16, 32, 128, 8, 128, "mma"), (16, 32, 128, 6, 256, "mma"), (16, 64, 128, 6, 256, "mma"),
                     (16, 32, 128, 4, 128, "mma_h2"), (16, 64, 128, 4, 128, "mma_h2"), (16, 32, 128, 6, 256, "mma_h2"),
                     (16, 64, 128, 6, 256, "mma_h2"), (16, 128, 128, 4, 256, "mma_h2"), (16, 32, 128, 8, 128, "mma_h2"),
                     (16, 32, 128, 4, 128, "mma_h2g2"), (16, 64, 128, 3, 256, "mma_h2g2"),
                     (16, 32, 128, 3, 128, "mma_h2g2"),
                     # (..., split_k S): w4a16_mma(split_k=S) -- grid (N / block_N, 1, S), each block K / S (a whole
                     # number of groups), float32 atomics into a float32 workspace, then a cast kernel (both inside
                     # the timed call; the workspace is the caller's, zeroed once and left zero by every call). The
                     # 12:33 ncu of the unsplit kernel: 0.32 waves, 6 % achieved occupancy, a fixed latency per
                     # k-step -- S times the blocks over 1/S of the k-steps each
                     (16, 32, 128, 4, 128, "mma_h2g2", 2), (16, 32, 128, 4, 128, "mma_h2g2", 4),
                     (16, 32, 128, 3, 128, "mma_h2g2", 8), (16, 64, 128, 4, 128, "mma_h2g2", 2),
                     (16, 64, 128, 4, 128, "mma_h2g2", 4), (16, 64, 128, 3, 128, "mma_h2g2", 8),
                     (16, 32, 128, 4, 128, "mma_h2", 4), (16, 32, 128, 4, 128, "mma", 4),
                     # fewer stages, more blocks per SM (shared memory of 16x32 g2: ~70 KB at 4 stages = 3 blocks
                     # per SM, ~57 KB at 3, ~44 KB at 2 = 5; 16x64: ~105 KB at 4, ~87 KB at 3 = 2)
                     (16, 32, 128, 2, 128, "mma_h2g2", 8), (16, 32, 128, 3, 128, "mma_h2g2", 4),
                     # "wgmma": kernels.quant_gemm.w4a16_wgmma -- C^T = W A^T with the weights decoded into
                     # registers as the wgmma register operand A (no fp16 weight tile in shared memory: that
                     # tile was w4a16_mma's limiter, ncu: shared memory 70 % busy); block_N 64 per warpgroup
                     # (threads = 2 * block_N), block_M the wgmma N (8 or 16); split_k as w4a16_mma's
                     (16, 64, 128, 4, 128, "wgmma", 4), (8, 64, 128, 4, 128, "wgmma", 4),
                     # "wgmma_p": w4a16_wgmma(permute_k=True) -- k permuted within each group (A's tile alike)
                     # so a thread's weight bytes of a row are one 16-byte load instead of 16 single-byte loads
                     # 4 apart (4-way bank conflicts)
                     (16, 64, 128, 4, 128, "wgmma_p", 4), (16, 64, 128, 4, 128, "wgmma_p", 2),
                     (16, 128, 128, 4, 256, "wgmma_p", 4), (8, 64, 128, 4, 128, "wgmma_p", 4),
                     # "wgmma_sp" (W4_CONFIGS_PREFILL's comment): group scales on the weights (no per-group rescale
                     # of C^T_k), W repacked by pack_w4a16_wgmma (16-byte loads without permute_k's copy of A)
                     (16, 64, 128, 4, 128, "wgmma_sp", 4), (16, 128, 128, 4, 256, "wgmma_sp", 4),
                     # "m16": kernels.w4a16_m16.w4a16_m16 (CUDA only, imported source; W and the scales repacked
                     # outside the timing by pack_w4a16_m16): each lane's 16-byte ld.global of the weights is
                     # its mma.sync A fragment for 4 k16-steps (swap-AB), depth groups loaded ahead in registers,
                     # A through a cp.async ring. Tuple: (16, block_N, group, depth, threads, "m16", split_k, wk):
                     # wk warps split each block's groups (summed in shared memory), threads / 32 / wk warps split
                     # its rows, block_N / 16 / (threads / 32 / wk) 16-row tiles per warp. One kernel at any split
                     # (the last block of a tile rounds the workspace; the bench passes Wk and the semaphores Sem)
                     (16, 64, 128, 3, 512, "m16", 1, 4), (16, 64, 128, 2, 512, "m16", 1, 4),
                     (16, 128, 128, 2, 256, "m16", 2, 2), (16, 128, 128, 2, 256, "m16", 4, 2),
                     (16, 64, 128, 2, 128, "m16", 2, 2), (16, 128, 128, 1, 256, "m16", 2, 4),
                     # 1 x 8 warps of rows x 2 of groups, 4 (3) groups ahead: 64 (48) KiB of weights in flight per
                     # SM at one block of 512 threads (121 / 113 registers), A read by 64 column blocks, not 128
                     (16, 128, 128, 4, 512, "m16", 2, 2), (16, 128, 128, 3, 512, "m16", 2, 2),
                     # 2 tiles x 8 warps of rows: A read by 32 column blocks (a quarter of the weight bytes from
                     # the L2), 1 (2) groups ahead: 32 (64) KiB in flight per SM, 127 (128, 40-byte spill) registers
                     (16, 256, 128, 1, 512, "m16", 4, 2), (16, 256, 128, 2, 512, "m16", 4, 2),
                     # "m16r": w4a16_m16(ring=True) -- the same tuple; the weights and scale pairs through a
                     # per-thread cp.async ring in shared memory (LDGSTS depth groups ahead, which ptxas cannot
                     # sink: the 17:45 ncu showed 1.34 TB/s for the register prefetch), wk 1 (no block-level
                     # reduction, A's ring shared by all warps). Weight bytes in flight per SM: blocks/SM x depth
                     # x block_N x group / 2. 256 x 256 thr, split 8, 2 blocks/SM: depth 3 = 96 KiB (84 regs);
                     # 512 x 128 thr, 4/SM: 64 KiB (86 regs); 4 tiles per warp (128 regs, 2/SM): 96 / 64 KiB;
                     # wk 2 at split 4 (86 regs, 2/SM): 64 KiB. Split partial sums: 16-byte red.v4.f32 atomics
                     (16, 256, 128, 3, 256, "m16r", 8, 1), (16, 128, 128, 2, 128, "m16r", 8, 1),
                     (16, 256, 128, 3, 128, "m16r", 8, 1), (16, 256, 128, 2, 128, "m16r", 8, 1),
                     (16, 128, 128, 2, 256, "m16r", 4, 2), (16, 256, 128, 2, 256, "m16r", 8, 1),
                     # "m16b": kernels.w4a16_bulk (CUDA sm_90 only, pack_w4a16_m16's layout): the weights through
                     # Hopper 1-D bulk copies (cp.async.bulk, mbarrier complete_tx; one per tile and slot, issued
                     # by the producer warp's lane 0), the scale pairs and activation rows through that warp's
                     # 16-byte cp.async (arrive.noinc on the slot's full barrier), a ring of shared slots, a
                     # persistent grid streaming contiguous K ranges of block_N-row tile-blocks (stream-K: every
                     # block the same bytes to one group; split sums by red.v4 into Wk [N, 16], a semaphore per
                     # tile-block, the last block rounds C). Tuple: (M, block_N, group, stages, 32 (cw + 1),
                     # "m16b", blocks, stage_groups): cw consumer warps + 1 producer warp, block_N / 16 / cw
                     # tiles per consumer warp, stage_groups KiB of weights per tile, slot and bulk copy,
                     # `blocks` the grid (132 = one per SM of the H200; 264 = two, <= 112 KiB each). Fits only
                     # the row of its own M (the slot holds M activation rows); 163 KiB of shared memory at
                     # most. Session 9 (every tile's weights, scales and each activation row a bulk copy, 48 per
                     # slot at M=16): 1.5-2.3x slower than m16r / ldg, time ~13 us + ~49 ns x bulk copies per
                     # block whatever the ring depth; now block_N / 16 bulk copies per slot (the H200, 16:44: the
                     # old 16 x 1 x 7 config 49.5 -> 30.9 us). Still slower than m16r / ldg (M=16 23.3 vs 21.2 us,
                     # M=1 23.8 vs 17.7): the two best of 15 configs per M are kept. A 9th element "ef": the
                     # weight copies with an L2 evict_first policy (the default --flush write leaves the L2 dirty)
                     (16, 128, 128, 3, 288, "m16b", 132, 4, "ef"), (16, 256, 128, 3, 288, "m16b", 132, 2),
                     (1, 128, 128, 2, 288, "m16b", 132, 8), (1, 128, 128, 4, 288, "m16b", 132, 4, "ef"))
W4_CONFIGS_PREFILL = ((64, 64, 64, 2, 128, False), (64, 128, 128, 3, 128, True), (128, 128, 128, 3, 256, True),
                      (64, 128, 128, 3, 128, "lut"), (128, 128, 128, 3, 256, "lut"),
                      # "wgmma_s": w4a16_wgmma(scale_weights=True) -- C^T = W A^T, the weights decoded into wgmma's
                      # register operand A already multiplied by their group scale (q * s exact in float32, rounded
                      # once by the pack: the reference's fp16 weight), so ONE accumulator for all groups and no
                      # per-group wgmma drain + rescale; block_M = 128 is the wgmma N (all of M = 128 per block: each
                      # weight decoded once), block_N 64 per warpgroup (threads = 2 * block_N). "wgmma_sp": the same
                      # with packed_k=True -- W repacked outside the timing by pack_w4a16_wgmma (a byte permutation
                      # per group row), so a thread's weights of a row are one 16-byte shared load. The 7th element
                      # is split_k as for "wgmma" (float32 atomics into the caller's workspace + a cast kernel).
                      # On sm_90a the k-loop is warp-specialized (a TMA producer warpgroup + the consumers, no block
                      # barrier in the loop: two consumer warpgroups drift apart, one's decode under the other's
                      # wgmma; every consumer thread releases a stage after its loads of the weight bytes).
                      # Tile count: N / block_N x split blocks (132 SMs). A's L2 traffic is N / block_N x 2 MiB.
                      # 128x128 split 2: 128 blocks of 2 consumer warpgroups (168 registers at entry, consumers 232,
                      # 131 KiB at 3 stages, 172 at 4), A read 64 times; 128x64 split 2 at 2 stages: 256 blocks, 2 per
                      # SM (78 KiB each): one block's decode under the other's wgmma; 128x64 unsplit: 128 blocks, no
                      # second kernel; 64x128 unsplit: 128 blocks of 2 consumer warpgroups, no second kernel, A read
                      # 64 times (half of it per block), each weight decoded twice (once per 64-row half of M)
                      (128, 128, 128, 4, 256, "wgmma_sp", 2), (128, 128, 128, 3, 256, "wgmma_sp", 2),
                      (128, 64, 128, 2, 128, "wgmma_sp", 2), (128, 64, 128, 4, 128, "wgmma_sp"),
                      (64, 128, 128, 4, 256, "wgmma_sp"), (64, 128, 128, 6, 256, "wgmma_sp"),
                      # "wgmma_spp": wgmma_sp with pingpong=True (block_N 128: the two consumer warpgroups take turns
                      # issuing their group's wgmmas on named barriers 2/3, one decoding while the other's run)
                      (128, 128, 128, 4, 256, "wgmma_spp", 2), (64, 128, 128, 4, 256, "wgmma_spp"),
                      (128, 128, 128, 4, 256, "wgmma_s", 2), (128, 64, 128, 2, 128, "wgmma_s", 2))
W4_MS = (1, 16, 128)
# The W4A16 decode rows' read floor (M <= 16): how fast ANY kernel reads the row's own packed weights and scales
# (the same tensors, 33.6 + 1.0 MB at N = K = 8192) under this bench's timing and flush -- read_floor.read_sum, a
# tile program that only reads both buffers and sums them (checked exactly against numpy before it is timed), the
# best of these configs, and torch's int32 sum of the same two buffers. Tuple: (blocks, threads, rows, cols,
# stages): each block one contiguous chunk of W (n_w / blocks words) in tiles of rows x cols int32 words, and a
# slice of S per tile; stages 1: T.serial, ld.global.v4 (LDG.128) into shared memory, rows x cols / threads / 4 loads
# per thread per tile; stages > 1: T.Pipelined, on sm_90a a TMA box per tile where cols <= 256 (a box row is at most
# 256 elements; S's slice too), else 16-byte cp.async. Power-of-two blocks (n_w = 2^23 words), all resident at once
# (one wave): ptxas sm_90a, no spills: serial 4 x 1024 / 256 threads 64 registers (4 blocks per SM: 528 >= 512),
# 8 x 1024 / 256 74 (3 per SM), 8 x 1024 / 512 62 (2 per SM); pipelined 39-56 registers, shared memory per block
# stages x rows x cols x 4 bytes (48 KiB: 4 per SM, 64 KiB: 3, 24 KiB: 9, 128 KiB: 1).
W4_READ_CONFIGS = ((512, 256, 4, 1024, 1), (256, 256, 8, 1024, 1), (256, 512, 8, 1024, 1),
                   (512, 256, 4, 1024, 3), (256, 256, 4, 1024, 4),
                   (512, 256, 16, 256, 3), (256, 256, 16, 256, 4), (1024, 128, 8, 256, 3), (128, 512, 32, 256, 4))
W4_NK = 8192
W4_GROUP = 128
# RMSNorm / softmax (block_M, threads, stage, rows_per_block) on NORM_SHAPE; stage "shared": rows staged
# through shared memory with 16-byte global loads and stores, "pipelined": the same with a 2-stage cp.async
# pipeline over rows_per_block row groups per block, "fragment": straight into registers (the library's
# default). rows_per_block matters only for "pipelined".
NORM_CONFIGS = ((1, 256, "shared", 1), (2, 256, "shared", 1), (1, 512, "shared", 1), (1, 256, "pipelined", 8),
                (1, 512, "pipelined", 16), (2, 256, "pipelined", 8), (1, 128, "fragment", 1), (4, 128, "fragment", 1),
                # (..., num_stages): deeper row pipelines (more bytes in flight per SM, fewer blocks per SM)
                (1, 256, "pipelined", 16, 3), (1, 256, "pipelined", 32, 4), (1, 128, "pipelined", 16, 3),
                (1, 512, "pipelined", 16, 3),
                # one wave of blocks (the 09:23 best, 8 rows per block, is 2048 blocks = 5.2 waves of the 396 that
                # fit at 3 per SM: the last wave runs 17 % full): RMSNorm 2 stages fits 3 blocks per SM (65.6 KB
                # of shared memory) -> 42 rows, 391 blocks; softmax 4 per SM (49.2 KB) -> 32 rows, 512 blocks;
                # with 3 stages 2 and 3 per SM -> 63 and 42 rows; 21 rows: two full waves at 3 per SM
                (1, 256, "pipelined", 42), (1, 256, "pipelined", 32), (1, 256, "pipelined", 63, 3),
                (1, 256, "pipelined", 42, 3), (1, 256, "pipelined", 21),
                # "shared-wg": RMSNorm's W read from global memory where it is used (L1-cached across the
                # blocks of an SM) instead of a per-block cp.async copy into shared memory (softmax: "shared")
                (1, 256, "shared-wg", 1), (1, 512, "shared-wg", 1), (2, 256, "shared-wg", 1))
NORM_SHAPE = (16384, 8192)

# --self-test: the same cases at tiny sizes (every block size of the first configs still fits).
TINY = dict(gemm_shapes=((256, 256, 256), (16, 256, 128)), fa_shapes=((1, 2, 256),), w4_ms=(1, 16, 128), w4_nk=512,
            norm_shape=(6, 512),
            # read_sum at n_w = 32768, n_s = 1024 words: serial and pipelined, 1 and 2 rows per tile
            w4_read_cfgs=((8, 128, 1, 512, 2), (8, 128, 2, 256, 1), (16, 64, 1, 256, 3)))


def _dt_bytes(dtype):
    return 2 if dtype in ("float16", "bfloat16") else 4


# ----------------------------------------------------------------------------------------- cases

class Case:
    """One benchmark row. program(cfg) -> prim_func; make(be, rng) -> dict of arrays on the backend;
    args(arrays, out) -> the kernel's arguments in parameter order; check(be, arrays, out) -> relative
    error against the float64 reference; peers: {name: fn(be, arrays, out) -> callable running it}."""

    def __init__(self, group, label, configs, program, make, args, out_spec, check, flops, min_bytes, dtype,
                 unit, peers, params):
        self.group, self.label, self.configs = group, label, list(configs)
        self.program, self.make, self.args, self.out_spec, self.check = program, make, args, out_spec, check
        self.flops, self.min_bytes, self.dtype, self.unit, self.peers = flops, min_bytes, dtype, unit, peers
        self.params = params
        self.pass_configs = lambda cfg: None  # a config's tilelang.compile pass_configs (FlashAttention: "nows")


def _rows(n, limit):
    """Indices of at most `limit` rows spread over n (first and last included): the checked subset."""
    if n <= limit:
        return list(range(n))
    step = (n - 1) / (limit - 1)
    return sorted({int(round(i * step)) for i in range(limit)})


def _cached(x, compute):
    """The case's float64 reference, computed once per set of inputs (every config and peer is
    checked against the same one)."""
    if "_ref" not in x:
        x["_ref"] = compute()
    return x["_ref"]


def _attention_refs(be, x, pairs, qrows, S, D, causal):
    import numpy as np
    refs = []
    for b, h in pairs:
        q = be.f64(x["Q"][b, h], qrows)
        k = be.f64(x["K"][b, h])
        v = be.f64(x["V"][b, h])
        s = q @ k.T / math.sqrt(D)
        if causal:
            s = np.where(np.arange(S)[None, :] <= np.asarray(qrows)[:, None], s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        refs.append((p / p.sum(axis=1, keepdims=True)) @ v)
    return refs


def _worst_block_err(got, ref, block):
    """Arrays of one shape (torch tensors on the device, or numpy arrays: only operators both have), the last two
    dims tiled by `block` (ragged edges included): the largest relative Frobenius error of any tile, over the
    leading dims too (inf where `got` is not finite)."""
    if tuple(got.shape) != tuple(ref.shape) or not bool(((got - got) == 0).all()):
        return float("inf")
    r, c = block
    worst = 0.0
    for i in range(0, got.shape[-2], r):
        for j in range(0, got.shape[-1], c):
            g, e = got[..., i:i + r, j:j + c], ref[..., i:i + r, j:j + c]
            d = ((g - e) ** 2).sum((-2, -1)) ** 0.5
            n = (e ** 2).sum((-2, -1)) ** 0.5 + 1e-30
            worst = max(worst, float((d / n).max()))
    return worst


def rel_err(got, ref):
    import numpy as np
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    if got.shape != ref.shape or not np.isfinite(got).all():
        return float("inf")
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


# --- GEMM

def gemm_case(M, N, K, dtype, configs):
    from kernels import gemm

    def split_of(cfg):  # at most one k-step per split (tiny shapes)
        return min(cfg[6], -(-K // cfg[2])) if len(cfg) > 6 else 1

    def partials(cfg):
        return len(cfg) > 7 and cfg[7] in ("partials", "swap-partials")

    def program(cfg):
        bm, bn, bk, threads, stages = cfg[:5]
        if split_of(cfg) > 1:  # the workspace is the 4th argument (zero; every call leaves it zero)
            return gemm.matmul_splitk(M, N, K, split_of(cfg), dtype=dtype, out_dtype=dtype, block_M=bm,
                                      block_N=bn, block_K=bk, num_stages=stages, threads=threads, workspace=True,
                                      reduce="partials" if partials(cfg) else "atomic",
                                      swap_ab=len(cfg) > 7 and cfg[7].startswith("swap"))
        return gemm.matmul(M, N, K, dtype=dtype, out_dtype=dtype, block_M=bm, block_N=bn, block_K=bk,
                           num_stages=stages, threads=threads, raster=cfg[5] if len(cfg) > 5 else 0,
                           swap_ab=len(cfg) > 7 and cfg[7] == "swap", cluster=2 if "cluster2" in cfg[7:] else 1)

    def make(be, rng):
        return {"A": be.randn((M, K), dtype, rng), "B": be.randn((K, N), dtype, rng)}

    rows = _rows(M, 64)

    def check(be, x, out):
        ref = _cached(x, lambda: be.f64(x["A"], rows) @ be.f64(x["B"]))
        w = x.pop("_w", None)  # a split-K config's workspace, after its first call: zero again, or the timed
        if w is not None and be.f64(w, rows).any():  # calls would add into leftovers
            return float("inf")
        return rel_err(be.f64(out, rows), ref)

    def p_torch(be, x, out):
        import torch
        return lambda: torch.matmul(x["A"], x["B"], out=out)

    def p_triton(be, x, out):
        run = triton_matmul()
        return lambda: run(x["A"], x["B"], out)

    def p_numpy(be, x, out):  # --self-test's stand-in peer
        import numpy as np
        a, b = be.f64(x["A"]).astype(np.float32), be.f64(x["B"]).astype(np.float32)
        return lambda: be.store(out, a @ b)

    def args(x, o, cfg=None):
        if cfg is None or split_of(cfg) == 1:
            return [x["A"], x["B"], o]
        be = x["_be"]
        if partials(cfg):  # one slice per split, any contents: NaN proves every element read was written first
            x.pop("_w", None)
            return [x["A"], x["B"], o, be.nan((split_of(cfg), M, N), "float32")]
        w = be.nan((M, N), "float32")  # a fresh workspace per config, zeroed here, outside the timing
        be.store(w, _zeros((M, N)))
        x["_w"] = w  # check() verifies that the call left it zero
        return [x["A"], x["B"], o, w]

    def make_with_backend(be, rng):
        x = make(be, rng)
        x["_be"] = be
        return x

    case = Case("gemm", f"GEMM {dtype} {M}x{N}x{K}", configs, program, make_with_backend, args,
                ((M, N), dtype), check, 2.0 * M * N * K, (M * K + K * N + M * N) * _dt_bytes(dtype), dtype,
                "TFLOP/s", {"cuBLAS": p_torch, "Triton": p_triton, "numpy": p_numpy},
                dict(M=M, N=N, K=K, dtype=dtype))
    case.args_by_cfg = True

    def full_check(be, x, out):
        """All of C against torch's float32 matmul on the device, as the worst 128 x 128 block's relative error
        (the canary child's check: a tile stored to the wrong place passes `check`'s 64 rows)."""
        import torch
        ref = x["A"].float() @ x["B"].float()
        return _worst_block_err(out.float(), ref, (128, 128))

    case.full_check = full_check
    case.pass_configs = lambda cfg: ({**({"tl.persistent": True} if "persistent" in cfg[7:] else {}),
                                      **({"tl.bulk_store": True} if "bulk" in cfg[7:] else {}),
                                      **({"tl.tma_store": True} if "tma_store" in cfg[7:] else {}),
                                      **({"tl.gemm_pingpong": True} if "gemm_pingpong" in cfg[7:] else {})} or None)
    return case


def _zeros(shape):
    import numpy as np
    return np.zeros(shape, np.float32)


def gemm_configs(M):
    return GEMM_CONFIGS_M16 if M <= 16 else GEMM_CONFIGS_M128 if M <= 128 else GEMM_CONFIGS_LARGE


# --- FlashAttention

def fa_case(B, H, S, D, causal, configs, dtype="bfloat16"):
    from kernels import attention

    def program(cfg):
        bm, bn, threads, stages = cfg[:4]
        # "persistent": O in a tile of its own (own_o_tile, where it fits), so the producer loads the next
        # tile's Q while O leaves; "qstage" keeps O staged through Q_s (the consumers copy Q, as before).
        return attention.flash_attention(B, H, H, S, S, D, causal, block_M=bm, block_N=bn, threads=threads,
                                         num_stages=stages, dtype=dtype, overlap="overlap" in cfg[4:],
                                         pingpong="pingpong" in cfg[4:],
                                         own_o_tile="persistent" in cfg[4:] and "qstage" not in cfg[4:],
                                         uniform_overlap_steps=True if "uniform" in cfg[4:] else None)

    def make(be, rng):
        return {n: be.randn((B, H, S, D), dtype, rng) for n in ("Q", "K", "V")}

    pairs = [(0, 0), (B - 1, H - 1)]
    qrows = _rows(S, 96)

    def check(be, x, out):
        refs = _cached(x, lambda: _attention_refs(be, x, pairs, qrows, S, D, causal))
        return max(rel_err(be.f64(out[b, h], qrows), ref) for (b, h), ref in zip(pairs, refs))

    def p_sdpa(backend_name):
        def peer(be, x, out):
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backend = getattr(SDPBackend, backend_name)

            def run():
                with sdpa_kernel([backend]):
                    out.copy_(F.scaled_dot_product_attention(x["Q"], x["K"], x["V"], is_causal=causal))
            return run
        return peer

    def p_sdpa_timed(backend_name):
        """The timed call is SDPA alone (no copy into `out`): its own output allocation is its cost."""
        def peer(be, x, out):
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backend = getattr(SDPBackend, backend_name)

            def run():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(x["Q"], x["K"], x["V"], is_causal=causal)
            return run
        return peer

    def p_numpy(be, x, out):
        import numpy as np
        q, k, v = (be.f64(x[n]).astype(np.float32) for n in ("Q", "K", "V"))

        def run():
            s = q @ np.swapaxes(k, -1, -2) / np.float32(math.sqrt(D))
            if causal:
                s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            be.store(out, (p / p.sum(axis=-1, keepdims=True)) @ v)
        return run

    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    peers = {"SDPA-cuDNN": p_sdpa("CUDNN_ATTENTION"), "SDPA-flash": p_sdpa("FLASH_ATTENTION"), "numpy": p_numpy}
    case = Case("attention", f"FA fwd {dtype} B{B} H{H} S{S} D{D}{' causal' if causal else ''}", configs, program,
                make, lambda x, o: [x["Q"], x["K"], x["V"], o], ((B, H, S, D), dtype), check, flops,
                4 * B * H * S * D * _dt_bytes(dtype), dtype, "TFLOP/s", peers,
                dict(B=B, H=H, S=S, D=D, causal=causal, dtype=dtype))
    case.timed_peers = {"SDPA-cuDNN": p_sdpa_timed("CUDNN_ATTENTION"), "SDPA-flash": p_sdpa_timed("FLASH_ATTENTION")}

    def full_check(be, x, out):
        """Every (batch, head) and query row against SDPA in float32 on the device, as the worst (batch, head,
        64-row block)'s relative error (the canary child's check: a persistent tile order that wrote a tile to
        the wrong head passes `check`'s two (batch, head) pairs)."""
        import torch.nn.functional as F
        ref = F.scaled_dot_product_attention(x["Q"].float(), x["K"].float(), x["V"].float(), is_causal=causal)
        return _worst_block_err(out.float().reshape(B * H, S, D), ref.reshape(B * H, S, D), (64, D))

    case.full_check = full_check
    # A 5th element "nows": the sm_90a kernel without the producer warpgroup (on the H200 the 128x64 and
    # 64x64 tiles ran faster that way at D=64 and causal: two blocks per SM instead of one of 384 threads).
    # A "persistent" element: {"tl.persistent": True} (see FA_CONFIGS).
    case.pass_configs = lambda cfg: ({"tl.disable_warp_specialized": True} if "nows" in cfg[4:] else
                                     {"tl.persistent": True} if "persistent" in cfg[4:] else None)
    return case


# --- W4A16

def w4_split_of(cfg, K):
    """A W4A16 config's split_k at this K (tiny shapes: clamped to the k-steps of groups_per_step groups)."""
    if len(cfg) < 7 or cfg[5] == "m16b":  # m16b's 7th element is its grid, not a split
        return 1
    return max(1, min(cfg[6], K // cfg[2] // (2 if cfg[5] == "mma_h2g2" else 1)))


def w4_case(M, N, K, configs, group=W4_GROUP, dtype="float16", read_configs=W4_READ_CONFIGS):
    from kernels import quant_gemm

    def program(cfg):
        bm, bn, bk, stages, threads, kind = cfg[:6]
        split = w4_split_of(cfg, K)
        if kind == "lut":
            return quant_gemm.w4_lut_matmul(M, N, K, group_size=bk, dtype=dtype, block_M=bm, block_N=bn,
                                            num_stages=stages, threads=threads)
        if kind in ("m16", "m16r"):  # CUDA only; (A, Wp, Sp, C[, Wk]) with the repacked weights (args below)
            from kernels import w4a16_m16
            wk = cfg[7]
            wn = threads // 32 // wk
            return w4a16_m16.w4a16_m16(M, N, K, group_size=bk, tn=bn // 16 // wn, wn=wn, wk=wk, depth=stages,
                                       split_k=split, workspace=split > 1, ring=kind == "m16r")
        if kind == "m16b":  # CUDA sm_90 only; (A, Wp, Sp, C, Wk, Sem), pack_w4a16_m16's layout (args below)
            from kernels import w4a16_bulk
            cw = threads // 32 - 1
            return w4a16_bulk.w4a16_bulk(M, N, K, group_size=bk, tn=bn // 16 // cw, cw=cw, stage_groups=cfg[7],
                                         stages=stages, blocks=cfg[6], workspace=True, evict_first=cfg[8:9] == ("ef",))
        if kind in ("wgmma", "wgmma_p", "wgmma_s", "wgmma_sp", "wgmma_spp"):  # the weights decoded into wgmma's
            # register operand A (block_N = threads / 2); _p: k permuted within each group (16-byte weight loads);
            # _s: the group scales applied to the weights (one accumulator); _sp: and W repacked by
            # pack_w4a16_wgmma; _spp: and the two consumer warpgroups in pingpong
            return quant_gemm.w4a16_wgmma(M, N, K, group_size=bk, dtype=dtype, block_M=bm, block_N=bn,
                                          num_stages=stages, threads=threads, magic_round=True, split_k=split,
                                          workspace=split > 1, permute_k=kind == "wgmma_p",
                                          scale_weights=kind in ("wgmma_s", "wgmma_sp", "wgmma_spp"),
                                          packed_k=kind in ("wgmma_sp", "wgmma_spp"), pingpong=kind == "wgmma_spp")
        if kind in ("mma", "mma_h2", "mma_h2g2"):  # mma_h2*: the fp16 tile made by imported CUDA source (CUDA
            # only); g2: two groups per k-step (two independent T.gemm, half the per-step waits and barriers)
            return quant_gemm.w4a16_mma(M, N, K, group_size=bk, dtype=dtype, block_M=bm, block_N=bn,
                                        num_stages=stages, threads=threads, magic_round=True,
                                        h2_dequant=kind != "mma", groups_per_step=2 if kind == "mma_h2g2" else 1,
                                        split_k=split, workspace=split > 1)
        if kind == "m1":  # CUDA only (imported CUDA source): bk = wk, bn = 16 tn wn, threads = 32 wn wk
            from kernels import w4a16_m1
            wn = threads // 32 // bk
            return w4a16_m1.w4a16_m1(M, N, K, group_size=group, tn=bn // 16 // wn, wn=wn, wk=bk, depth=stages)
        if kind == "ldg":  # CUDA only (imported CUDA source): bn = rows * warps, bk = 1024 * depth, stages = prefetch
            return quant_gemm.w4a16_gemv_ldg(M, N, K, group_size=group, rows=bn // (threads // 32),
                                             warps=threads // 32, depth=bk // 1024, prefetch=stages)
        if kind == "h2":  # CUDA only (imported CUDA source); bk is the k-step, the group size stays W4_GROUP
            return quant_gemm.w4a16_gemv_h2(M, N, K, group_size=group, block_N=bn, block_K=bk, num_stages=stages,
                                            threads=threads)
        if kind == "gemv":
            return quant_gemm.w4a16_gemv(M, N, K, group_size=group, dtype=dtype, block_M=bm, block_N=bn,
                                         block_K=bk, num_stages=stages, threads=threads, magic_round=True)
        return quant_gemm.quant_matmul(M, N, K, bits=4, group_size=group, dtype=dtype, block_M=bm, block_N=bn,
                                       block_K=bk, num_stages=stages, threads=threads, stage_scales=kind)

    def make(be, rng):
        x = {"A": be.randn((M, K), dtype, rng)}
        x["W"], x["S"], x["Wdeq"] = be.int4_weights(N, K, group, dtype, rng)
        return x

    cols = _rows(N, 512)

    def check(be, x, out):
        # the weights dequantized in the activation dtype, as the kernel rounds them
        ref = _cached(x, lambda: be.f64(x["A"]) @ be.f64(x["Wdeq"], cols).T)
        w = x.pop("_w", None)  # a split-K config's workspace after its first call: zero again, or the timed
        if w is not None and be.f64(w).any():  # calls would add into leftovers
            return float("inf")
        return rel_err(be.f64(out)[:, cols], ref)

    def weights(x, cfg):
        if cfg is not None and cfg[5] in ("wgmma_sp", "wgmma_spp"):  # pack_w4a16_wgmma's byte order, made once
            if "_wsp" not in x:
                from kernels.quant_gemm import pack_w4a16_wgmma
                w = x["W"]
                if hasattr(w, "cpu"):  # torch
                    x["_wsp"] = x["_be"].torch.as_tensor(pack_w4a16_wgmma(w.cpu().numpy(), group)).to(w.device)
                else:
                    x["_wsp"] = pack_w4a16_wgmma(w, group)
            return x["_wsp"], x["S"]
        if cfg is None or cfg[5] not in ("m16", "m16r", "m16b"):
            return x["W"], x["S"]
        if "_m16" not in x:  # pack_w4a16_m16's layout, made once on the host (outside the timing)
            from kernels.w4a16_m16 import pack_w4a16_m16
            w, s = x["W"], x["S"]
            if hasattr(w, "cpu"):  # torch
                wp, sp = pack_w4a16_m16(w.cpu().numpy(), s.cpu().numpy())
                x["_m16"] = (x["_be"].torch.as_tensor(wp).to(w.device), x["_be"].torch.as_tensor(sp).to(s.device))
            else:
                x["_m16"] = pack_w4a16_m16(w, s)
        return x["_m16"]

    def args(x, o, cfg=None):
        w_, s_ = weights(x, cfg)
        if cfg is not None and cfg[5] == "m16b":  # always its workspace Wk [N, 16] and semaphores [N / 16]
            be = x["_be"]
            w = be.nan((N, 16), "float32")
            be.store(w, _zeros((N, 16)))
            x["_w"] = w  # check() verifies that the call left it zero
            if hasattr(w, "cpu"):  # torch
                sem = be.torch.zeros((N // 16,), dtype=be.torch.int32, device=w.device)
            else:
                sem = _zeros((N // 16,)).astype("int32")
            return [x["A"], w_, s_, o, w, sem]
        if cfg is None or w4_split_of(cfg, K) == 1:
            return [x["A"], w_, s_, o]
        be = x["_be"]
        w = be.nan((M, N), "float32")  # a fresh workspace per config, zeroed here, outside the timing
        be.store(w, _zeros((M, N)))
        x["_w"] = w  # check() verifies that the call left it zero
        if cfg[5] in ("m16", "m16r"):  # and the per-tile semaphores of its one-kernel split-K (zero, left zero)
            if hasattr(w, "cpu"):  # torch
                sem = be.torch.zeros((M, N // cfg[1]), dtype=be.torch.int32, device=w.device)
            else:
                sem = _zeros((M, N // cfg[1])).astype("int32")
            return [x["A"], w_, s_, o, w, sem]
        return [x["A"], w_, s_, o, w]

    def make_with_backend(be, rng):
        x = make(be, rng)
        x["_be"] = be
        return x

    def p_cublas(be, x, out):
        import torch.nn.functional as F
        return lambda: out.copy_(F.linear(x["A"], x["Wdeq"]))

    def p_cublas_timed(be, x, out):
        import torch.nn.functional as F
        return lambda: F.linear(x["A"], x["Wdeq"])

    def p_numpy(be, x, out):
        import numpy as np
        a, w = be.f64(x["A"]).astype(np.float32), be.f64(x["Wdeq"]).astype(np.float32)
        return lambda: be.store(out, a @ w.T)

    wbytes = N * K // 2 + N * (K // group) * 2
    case = Case("w4a16", f"W4A16 g{group} {M}x{N}x{K}", configs, program, make_with_backend, args,
                ((M, N), dtype), check, 2.0 * M * N * K,
                wbytes + (M * K + M * N) * 2, dtype, "TB/s", {"cuBLAS fp16 (dequantized W)": p_cublas,
                                                               "numpy": p_numpy},
                dict(M=M, N=N, K=K, group=group, dtype=dtype))
    case.timed_peers = {"cuBLAS fp16 (dequantized W)": p_cublas_timed}
    case.args_by_cfg = True
    if M <= 16 and read_configs:
        case.read_floor = ReadFloor(case.label, N * K // 8, N * (K // group) * 2 // 4, read_configs)
    return case


class ReadFloor:
    """A W4A16 decode row's read floor: read_floor.read_sum (a tile program that only reads the row's packed
    weights W and scales S, viewed as n_w and n_s int32 words, and sums them) over `configs`, and torch's own
    read of the same two buffers (int32 sums). program / pass_configs / label as a Case's, so compile_case and
    precompile take it; run_read_floor measures it with the row's own tensors."""
    group = "w4a16"

    def __init__(self, row_label, n_w, n_s, configs):
        self.label = f"{row_label} read floor"
        self.n_w, self.n_s, self.configs = n_w, n_s, list(configs)
        self.nbytes = 4 * (n_w + n_s)
        self.pass_configs = lambda cfg: None

    def fits(self, cfg):
        from read_floor import read_sum_fits
        return read_sum_fits(self.n_w, self.n_s, *cfg) is None

    def program(self, cfg):
        from read_floor import read_sum
        return read_sum(self.n_w, self.n_s, *cfg)

    def args(self, x, out, cfg):
        """(W2, S2, Out): views of the case's own W and S (no copy), and out."""
        from read_floor import read_sum_views
        return list(read_sum_views(x["W"], x["S"], cfg)) + [out]

    def out(self, be, cfg):
        """Out [blocks, rows + 1] int32, filled with a pattern no correct call leaves in place by chance."""
        return be.full_int32((cfg[0], cfg[2] + 1), 0x5A5A5A5A)

    def _host(self, be, x):
        """The case's W and S as numpy arrays (copied once per set of inputs)."""
        if "_read_host" not in x:
            w, s = x["W"], x["S"]
            if hasattr(w, "cpu"):  # torch
                w, s = w.cpu().numpy(), s.cpu().numpy()
            x["_read_host"] = (w, s)
        return x["_read_host"]

    def check(self, be, x, out, cfg):
        """The fraction of Out's entries that differ from read_sum_ref (0.0: exact; the sums are integers)."""
        import numpy as np
        from read_floor import read_sum_ref, read_sum_views
        ref = read_sum_ref(*read_sum_views(*self._host(be, x), cfg), cfg)
        got = np.asarray(out.cpu().numpy() if hasattr(out, "cpu") else out)
        if got.shape != ref.shape:
            return 1.0
        return float(np.count_nonzero(got != ref)) / ref.size

    def total(self, be, x):
        """Every word of W and S summed exactly (Python int): the torch read's reference."""
        import numpy as np
        w, s = self._host(be, x)
        return int(w.view(np.int32).sum(dtype=np.int64)) + int(s.view(np.int32).sum(dtype=np.int64))

    def peer(self, be, x):
        """torch's own read of both buffers (their int32 views summed: two reduction kernels, int64 results);
        on the CPU device numpy's. Returns a callable giving (sum of W, sum of S)."""
        if be.name == "cpu":
            import numpy as np
            w32, s32 = x["W"].view(np.int32), x["S"].view(np.int32)
            return lambda: (w32.sum(dtype=np.int64), s32.sum(dtype=np.int64))
        torch = be.torch
        w32, s32 = x["W"].view(torch.int32), x["S"].view(torch.int32)
        return lambda: (w32.sum(), s32.sum())


def run_read_floor(rf, be, target, x, log):
    """rf's read_sum configs (each checked exactly, then timed with be.time_ms: the same flush and events as the
    row) and the peer read (its two sums checked), on the row's own inputs x. Returns the JSON entry: bytes,
    configs (cfg, load_s, err / error, ms, reps), best ms and cfg, peer {err, ms, reps}."""
    entry = {"bytes": rf.nbytes, "configs": [], "peer_name": "torch int32 sum" if be.name != "cpu" else "numpy sum"}
    for cfg in rf.configs:
        e = {"cfg": list(cfg)}
        entry["configs"].append(e)
        if not rf.fits(cfg):
            e["skipped"] = "does not divide the buffers"
            continue
        try:
            k, secs = compile_case(rf, cfg, target)
            e["load_s"] = round(secs, 3)
            out = rf.out(be, cfg)
            args = rf.args(x, out, cfg)
            k(*args)
            be.sync()
            e["err"] = rf.check(be, x, out, cfg)
            if e["err"] == 0.0:
                e["ms"], e["reps"] = be.time_ms(lambda: k(*args))
            log(f"read floor {rf.label} cfg={cfg}: " + (f"exact, {e['ms']:.4f} ms" if "ms" in e else
                                                         f"{e['err']:.1%} of the sums WRONG, NOT TIMED"))
            del out, args, k
        except Exception as ex:  # noqa: BLE001 - one failing config must not hide the others
            e["error"] = str(ex)[-600:]
            log(f"read floor {rf.label} cfg={cfg}: FAILED "
                f"{str(ex).strip().splitlines()[-1][:300] if str(ex).strip() else ex!r}")
    timed = [e for e in entry["configs"] if "ms" in e]
    if timed:
        best = min(timed, key=lambda e: e["ms"])
        entry.update(ms=best["ms"], cfg=best["cfg"])
    p = entry["peer"] = {}
    try:
        fn = rf.peer(be, x)
        got = fn()
        be.sync()
        p["err"] = 0.0 if sum(int(v) for v in got) == rf.total(be, x) else 1.0
        if p["err"] == 0.0:
            p["ms"], p["reps"] = be.time_ms(fn)
        log(f"read floor {rf.label} {entry['peer_name']}: "
            + (f"exact, {p['ms']:.4f} ms" if "ms" in p else "WRONG SUM, NOT TIMED"))
    except Exception as ex:  # noqa: BLE001
        p["error"] = str(ex)[-400:]
        log(f"read floor {rf.label} {entry['peer_name']}: n/a ({ex!r})"[:400])
    return entry


def read_floor_problems(row):
    """What is wrong with a W4A16 decode row's read floor (self-test; [] when it was built, checked exactly and
    timed, read_sum and the peer read alike)."""
    rf = row.get("read_floor")
    if rf is None:
        return [f"{row['label']}: no read floor"]
    problems = []
    if "ms" not in rf:
        why = [e.get("error", "")[-200:] or (f"err {e['err']}" if "err" in e else e.get("skipped"))
               for e in rf["configs"]]
        problems.append(f"{row['label']}: read floor: no read_sum config both exact and timed: {why}")
    if "ms" not in rf.get("peer", {}):
        problems.append(f"{row['label']}: read floor: peer read {rf.get('peer')}")
    return problems


# --- RMSNorm, softmax

def norm_case(kind, M, N, configs, dtype="bfloat16", eps=1e-6):
    from kernels import norm

    def program(cfg):
        bm, threads, stage, rows = cfg[:4]
        stages = cfg[4] if len(cfg) > 4 else 2
        w_in_shared = stage != "shared-wg"
        stage = "shared" if stage == "shared-wg" else stage
        if kind == "rmsnorm":
            return norm.rms_norm(M, N, eps=eps, dtype=dtype, block_M=bm, threads=threads, stage=stage,
                                 rows_per_block=rows, num_stages=stages, w_in_shared=w_in_shared)
        return norm.softmax(M, N, dtype=dtype, block_M=bm, threads=threads, stage=stage, rows_per_block=rows,
                            num_stages=stages)

    def make(be, rng):
        x = {"X": be.randn((M, N), dtype, rng, scale=2.0)}
        if kind == "rmsnorm":
            x["W"] = be.randn((N,), dtype, rng)
        return x

    rows = _rows(M, 256)

    def reference(be, x):
        xr = be.f64(x["X"], rows)
        return norm.rms_norm_ref(xr, be.f64(x["W"]), eps) if kind == "rmsnorm" else norm.softmax_ref(xr)

    def check(be, x, out):
        return rel_err(be.f64(out, rows), _cached(x, lambda: reference(be, x)))

    def p_torch(be, x, out):
        import torch
        if kind == "rmsnorm":
            return lambda: torch.nn.functional.rms_norm(x["X"], (N,), x["W"], eps)
        return lambda: torch.softmax(x["X"], dim=-1)

    def p_torch_checked(be, x, out):
        run = p_torch(be, x, out)
        return lambda: out.copy_(run())

    def p_numpy(be, x, out):
        import numpy as np
        xf = be.f64(x["X"]).astype(np.float32)
        if kind == "rmsnorm":
            w = be.f64(x["W"]).astype(np.float32)
            return lambda: be.store(out, xf / np.sqrt((xf * xf).mean(axis=1, keepdims=True) + eps) * w)
        return lambda: be.store(out, np.exp(xf - xf.max(1, keepdims=True)) / np.exp(
            xf - xf.max(1, keepdims=True)).sum(1, keepdims=True))

    args = (lambda x, o: [x["X"], x["W"], o]) if kind == "rmsnorm" else (lambda x, o: [x["X"], o])
    peer = "torch rms_norm" if kind == "rmsnorm" else "torch softmax"
    case = Case("norm", f"{'RMSNorm' if kind == 'rmsnorm' else 'softmax'} {dtype} {M}x{N}", configs, program, make,
                args, ((M, N), dtype), check, 0.0, 2 * M * N * _dt_bytes(dtype) + (N * 2 if kind == "rmsnorm" else 0),
                dtype, "TB/s", {peer: p_torch_checked, "numpy": p_numpy}, dict(kind=kind, M=M, N=N, dtype=dtype))
    case.timed_peers = {peer: p_torch}
    return case


def all_cases(tiny=False, only=GROUPS, gemm_shapes=None, gemm_dtypes=("bfloat16", "float16"), gemm_cfgs=None):
    """gemm_shapes / gemm_cfgs: the --gemm-shapes / --gemm-configs overrides (None: GEMM_SHAPES, gemm_configs(M))."""
    cases = []
    if "gemm" in only:
        for dtype in gemm_dtypes:
            for M, N, K in (TINY["gemm_shapes"] if tiny else gemm_shapes or GEMM_SHAPES):
                cfgs = gemm_cfgs or gemm_configs(M if not tiny else (16 if M <= 16 else 4096))
                cases.append(gemm_case(M, N, K, dtype, cfgs))
    if "attention" in only:
        for B, H, S in (TINY["fa_shapes"] if tiny else FA_SHAPES):
            for D in (128, 64):
                for causal in (False, True):
                    cases.append(fa_case(B, H, S, D, causal, FA_CONFIGS))
    if "w4a16" in only:
        nk = TINY["w4_nk"] if tiny else W4_NK
        for M in (TINY["w4_ms"] if tiny else W4_MS):
            cases.append(w4_case(M, nk, nk, W4_CONFIGS_DECODE if M <= 16 else W4_CONFIGS_PREFILL,
                                 read_configs=TINY["w4_read_cfgs"] if tiny else W4_READ_CONFIGS))
    if "norm" in only:
        M, N = TINY["norm_shape"] if tiny else NORM_SHAPE
        for kind in ("rmsnorm", "softmax"):
            cases.append(norm_case(kind, M, N, NORM_CONFIGS))
    return cases


def fits(case, cfg):
    """Whether a config's tile divides the case's shape where the kernels need it (a tile larger
    than a dimension is allowed: the edge is masked)."""
    p = case.params
    if case.group == "gemm":
        bm, bn, bk = cfg[:3]
        return p["N"] % bn == 0 and p["K"] % bk == 0 and (p["M"] % bm == 0 or p["M"] < bm)
    if case.group == "attention":
        # Any tile: the kernel masks a ragged last query block (its copies) and a ragged last KV block (its
        # scores), as FA3's 192-row D64 and 176-column D128 tiles need at S = 4096 / 16384. But a 192-row
        # tile's 3 consumer warpgroups hold 128 registers a thread: at D=128 P spills to a shared tile and the
        # kernel needs more shared memory than sm_90a has (the compiler refuses it).
        return not (cfg[0] > 128 and p["D"] > 64)
    if case.group == "w4a16":
        if cfg[5] in ("m16", "m16r"):  # whole groups per block (split) and per warp (wk); threads / 32 / wk warps
            wn = cfg[4] // 32 // cfg[7]
            return (cfg[2] == p["group"] and cfg[1] % (16 * wn) == 0 and p["N"] % cfg[1] == 0
                    and (p["K"] // cfg[2]) % (w4_split_of(cfg, p["K"]) * cfg[7]) == 0)
        if cfg[5] == "m16b":  # its own M's row; cw = threads / 32 - 1 consumer warps of whole tiles
            from kernels import w4a16_bulk
            cw = cfg[4] // 32 - 1
            if cfg[0] != p["M"] or cw < 1 or cfg[1] % (16 * cw) or p["N"] % cfg[1] or cfg[2] != p["group"]:
                return False
            try:
                w4a16_bulk.check_args(p["M"], p["N"], p["K"], cfg[2], cfg[1] // 16 // cw, cw, cfg[7], cfg[3], cfg[6])
            except ValueError:
                return False
            return True
        if len(cfg) > 6:  # split-K w4a16_mma: block_K is the group, split_k x groups_per_step divides the groups
            gps = 2 if cfg[5] == "mma_h2g2" else 1
            return (p["N"] % cfg[1] == 0 and cfg[2] == p["group"]
                    and (p["K"] // cfg[2]) % (w4_split_of(cfg, p["K"]) * gps) == 0)
        if cfg[5] in ("lut", "mma", "wgmma", "wgmma_p", "wgmma_s", "wgmma_sp", "wgmma_spp"):
            return p["N"] % cfg[1] == 0 and cfg[2] == p["group"]
        if cfg[5] == "m1":  # M = 1; wk = cfg[2] warps split K's 128-wide chunks; 16 tn wn rows per block
            wn = cfg[4] // 32 // cfg[2]
            return (p["M"] == 1 and p["K"] % 1024 == 0 and (p["K"] // 128) % cfg[2] == 0 and wn >= 1
                    and cfg[1] % (16 * wn) == 0 and p["N"] % cfg[1] == 0 and p["group"] % 128 == 0)
        if cfg[5] == "ldg":  # M = 1 (a block per row of A: W re-read per row); a slice of 1024 * depth weights
            # divides K; warps of rows rows divide N; an even number of groups (the 4-byte scale pairs)
            return (p["M"] == 1 and p["N"] % cfg[1] == 0 and p["K"] % cfg[2] == 0 and cfg[2] % 1024 == 0
                    and cfg[1] % (cfg[4] // 32) == 0 and p["group"] % 32 == 0 and (p["K"] // p["group"]) % 2 == 0)
        if cfg[5] == "gemv":
            return p["K"] % cfg[2] == 0 and (cfg[2] % p["group"] == 0 or p["group"] % cfg[2] == 0)
        return p["N"] % cfg[1] == 0 and p["K"] % cfg[2] == 0 and (not cfg[5] or cfg[2] % p["group"] == 0)
    if case.group == "norm":
        return p["M"] % cfg[0] == 0 or p["M"] < cfg[0]
    return True


# ----------------------------------------------------------------------------------------- backends

class NumpyBackend:
    """The CPU device (--self-test): numpy arrays, bf16 as uint16 bit patterns, perf_counter timing."""
    name = "cpu"

    def randn(self, shape, dtype, rng, scale=1.0):
        import numpy as np
        from kernels._util import to_bf16_bits
        x = rng.standard_normal(shape) * scale
        return to_bf16_bits(x) if dtype == "bfloat16" else x.astype(dtype)

    def int4_weights(self, N, K, group, dtype, rng):
        import numpy as np
        q = rng.integers(-8, 8, size=(N, K))
        u = (q & 0xF).astype(np.uint8)
        packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
        scales = (rng.random((N, K // group)) * 0.05 + 0.01).astype(dtype)
        wdeq = (q * np.repeat(scales.astype(np.float64), group, axis=1)).astype(dtype)
        return packed, scales, wdeq

    def f64(self, arr, rows=None):
        import numpy as np
        a = np.asarray(arr)
        if rows is not None:
            a = a[rows]
        if a.dtype == np.uint16:  # bf16 bit patterns
            from kernels._util import from_bf16_bits
            return from_bf16_bits(a).astype(np.float64)
        return a.astype(np.float64)

    def nan(self, shape, dtype):
        import numpy as np
        return np.full(shape, 0x7FC0, np.uint16) if dtype == "bfloat16" else np.full(shape, np.nan, dtype)

    def full_int32(self, shape, value):
        import numpy as np
        return np.full(shape, value, np.int32)

    def store(self, out, values):
        import numpy as np
        from kernels._util import to_bf16_bits
        out[...] = to_bf16_bits(values) if out.dtype == np.uint16 else values

    def all_finite(self, out):
        import numpy as np
        return bool(np.isfinite(self.f64(out)).all())

    def sync(self):
        pass

    def time_ms(self, fn, target_s=0.05, min_reps=3, max_reps=20):
        fn()
        t0 = time.perf_counter()
        fn()
        est = max(time.perf_counter() - t0, 1e-6)
        n = int(min(max_reps, max(min_reps, target_s / est)))
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), n

    def copy_bandwidth(self):
        import numpy as np
        src = np.ones(1 << 24, np.float32)
        dst = np.empty_like(src)
        ms, n = self.time_ms(lambda: np.copyto(dst, src))
        return {"copy_": {"ms": ms, "reps": n, "bytes": 2 * src.nbytes, "TB/s": 2 * src.nbytes / ms / 1e9}}


class TorchBackend:
    """The CUDA device through torch: tensors on cuda:0, CUDA-event timing with the L2 flushed."""
    name = "cuda"

    def __init__(self, flush="write"):
        import torch
        self.torch = torch
        self.dev = torch.device("cuda", 0)
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device=self.dev)  # > L2 (60 MiB on H200)
        # flush "write" (the default, as Triton's do_bench): zero_() leaves the L2 full of DIRTY lines, so the
        # timed kernel's first ~60 MiB of misses also write those back to DRAM -- a cost that weighs most on
        # short memory-bound kernels (the W4A16 decode rows read 33.5 MB). "read": the flush buffer is then
        # read once (sum), which writes the dirty lines back outside the timed region and leaves clean ones.
        self.flush_mode = flush
        self.flush_words = self.flush.view(torch.int32)

    def _dt(self, dtype):
        return getattr(self.torch, dtype)

    def randn(self, shape, dtype, rng, scale=1.0):
        g = self.torch.Generator(device=self.dev)
        g.manual_seed(int(rng.integers(1 << 62)))
        return (self.torch.randn(shape, generator=g, device=self.dev, dtype=self.torch.float32) * scale).to(
            self._dt(dtype))

    def int4_weights(self, N, K, group, dtype, rng):
        torch = self.torch
        g = torch.Generator(device=self.dev)
        g.manual_seed(int(rng.integers(1 << 62)))
        q = torch.randint(-8, 8, (N, K), generator=g, device=self.dev, dtype=torch.int32)
        u = (q & 0xF).to(torch.uint8)
        packed = (u[:, 0::2] | (u[:, 1::2] << 4)).contiguous()
        scales = (torch.rand((N, K // group), generator=g, device=self.dev) * 0.05 + 0.01).to(self._dt(dtype))
        wdeq = (q.to(torch.float32) * scales.to(torch.float32).repeat_interleave(group, dim=1)).to(self._dt(dtype))
        return packed, scales, wdeq

    def f64(self, arr, rows=None):
        a = arr
        if rows is not None:
            a = a[self.torch.as_tensor(rows, device=a.device)]
        return a.to(self.torch.float64).cpu().numpy()

    def nan(self, shape, dtype):
        return self.torch.full(shape, float("nan"), device=self.dev, dtype=self._dt(dtype))

    def full_int32(self, shape, value):
        return self.torch.full(shape, value, device=self.dev, dtype=self.torch.int32)

    def store(self, out, values):
        out.copy_(self.torch.as_tensor(values))

    def all_finite(self, out):
        return bool(self.torch.isfinite(out).all())

    def sync(self):
        self.torch.cuda.synchronize()

    def time_ms(self, fn, target_s=0.3, min_reps=10, max_reps=300):
        """Median of CUDA-event timed runs; the L2 is flushed (a 256 MiB memset; with --flush read then a read of it) before each run,
        outside the events. Warm-up: 3 runs, then enough runs for ~target_s. Before each start
        event the GPU spins ~0.3 ms (torch.cuda._sleep), so the host has queued the run before the
        GPU reaches it: the events time the device work alone, not the Python launch overhead of
        either side (ours goes through the binding's argument checks, ~tens of microseconds)."""
        torch = self.torch
        spin = getattr(torch.cuda, "_sleep", None)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(3):
            fn()
        e.record()
        torch.cuda.synchronize()
        est = max(s.elapsed_time(e) / 3, 1e-3)
        n = int(min(max_reps, max(min_reps, target_s * 1e3 / est)))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            self.flush.zero_()
            if self.flush_mode == "read":
                self.flush_words.sum()
            if spin is not None:
                spin(600_000)
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(st.elapsed_time(en) for st, en in zip(starts, ends)), n

    def copy_bandwidth(self):
        torch = self.torch
        src = torch.randn(1 << 29, device=self.dev, dtype=torch.bfloat16)  # 1 GiB
        dst = torch.empty_like(src)
        out = {}
        for name, fn in (("copy_", lambda: dst.copy_(src)), ("clone", lambda: src.clone())):
            ms, n = self.time_ms(fn)
            nbytes = 2 * src.numel() * src.element_size()
            out[name] = {"ms": ms, "reps": n, "bytes": nbytes, "TB/s": nbytes / ms / 1e9}
        del src, dst
        torch.cuda.empty_cache()
        return out


# ----------------------------------------------------------------------------------------- Triton

_TRITON = {}


def triton_matmul():
    """C = A @ B (row-major, any float dtype, fp32 accumulation) with a tile chosen by M."""
    if "run" in _TRITON:
        return _TRITON["run"]
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        per_group = GROUP * num_n
        group = pid // per_group
        first_m = group * GROUP
        size_m = min(num_m - first_m, GROUP)
        pm = first_m + (pid % per_group) % size_m
        pn = (pid % per_group) // size_m
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc += tl.dot(tl.load(a, mask=rm[:, None] < M, other=0.0), tl.load(b))
            a += BK * sak
            b += BK * sbk
        c = c_ptr + rm[:, None] * scm + rn[None, :] * scn
        tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=rm[:, None] < M)

    def run(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        if M >= 1024:
            bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
        elif M >= 64:
            bm, bn, bk, warps, stages = 64, 128, 64, 4, 4
        else:
            bm, bn, bk, warps, stages = 16, 64, 128, 4, 5
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                     c.stride(1), BM=bm, BN=bn, BK=bk, GROUP=8, num_warps=warps, num_stages=stages)
    _TRITON["run"] = run
    return run


# ----------------------------------------------------------------------------------------- running

def compile_case(case, cfg, target):
    import tilelang
    t0 = time.perf_counter()
    k = tilelang.compile(case.program(cfg), target=target, pass_configs=case.pass_configs(cfg))
    return k, time.perf_counter() - t0


def precompile(cases, jobs):
    """Compiles every (case, config) for CUDA; failures are reported, not fatal (the run skips them)."""
    from concurrent.futures import ThreadPoolExecutor
    work = [(c, cfg) for c in cases for cfg in c.configs if fits(c, cfg)]
    work += [(c.read_floor, cfg) for c in cases if getattr(c, "read_floor", None) is not None
             for cfg in c.read_floor.configs if c.read_floor.fits(cfg)]
    failed = []

    def one(item):
        c, cfg = item
        try:
            _, s = compile_case(c, cfg, "cuda")
            return f"compiled {c.label} cfg={cfg}: {s:.1f} s", None
        except Exception as e:  # noqa: BLE001 - reported; the device run skips this config
            return f"FAILED {c.label} cfg={cfg}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else e!r}", \
                (c.label, cfg)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for msg, fail in pool.map(one, work):
            print(msg, flush=True)
            if fail:
                failed.append(fail)
    print(f"precompile: {len(work) - len(failed)} of {len(work)} kernels compiled, {len(failed)} failed", flush=True)
    return 1 if failed else 0


# Variants new enough that a hang or a fault is plausible (built in sessions 11-12 without a device; their first runs, on
# 2026-12-05, all passed the canary). With --canary-timeout
# each config carrying one first runs alone in a child process (compile from the cache, one launch, the
# float64 check) under that timeout, before the table: a hang (an mbarrier wait that never completes) or a
# fault (a sticky error poisons the process's CUDA context, so every later config and peer would fail)
# then costs that config, which the table skips with the reason, not the rows after it. One child per
# config and kind of row (GEMM: the first row it fits; attention: the first causal and the first
# non-causal row, whose tile orders differ), --canary-jobs at a time.
UNPROVEN = {"gemm": ("bulk", "gemm_pingpong", "tma_store"), "attention": ("persistent",)}


def unproven(case, cfg):
    return any(isinstance(e, str) and e in UNPROVEN.get(case.group, ()) for e in cfg)


def canary_plan(cases):
    """[(case, cfg)]: the unproven configs, each on one representative row per kind (see UNPROVEN)."""
    plan, seen = [], set()
    for case in cases:
        kind = (case.group, case.params.get("causal", False))
        for cfg in case.configs:
            if unproven(case, cfg) and fits(case, cfg) and (kind, tuple(cfg)) not in seen:
                seen.add((kind, tuple(cfg)))
                plan.append((case, cfg))
    return plan


PARENT_ONLY_OPTIONS = ("--json", "--canary-timeout", "--canary-jobs", "--budget-s")


def canary_child_argv(argv):
    """The parent's arguments for a child, without the ones only the parent acts on (PARENT_ONLY_OPTIONS, as
    `--opt value` or `--opt=value`)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in PARENT_ONLY_OPTIONS:
            skip = True
        elif a.split("=", 1)[0] not in PARENT_ONLY_OPTIONS:
            out.append(a)
    return out


def run_canaries(cases, argv, timeout_s, jobs, log=print, command=None):
    """Runs canary_plan(cases) in child processes; returns {(label, cfg tuple): reason} of the configs that
    hung, failed or computed a wrong result. A config that failed on its representative row is dropped from
    every row (it is the same kernel protocol). `command(case, cfg)`: the child's argv (default: this script
    with the parent's arguments and --canary-one)."""
    import subprocess
    plan = canary_plan(cases)
    if not plan:
        return {}
    log(f"canaries: {len(plan)} unproven config runs, {jobs} at a time, {timeout_s:.0f} s each")
    base = [sys.executable, os.path.abspath(__file__)] + canary_child_argv(argv)
    command = command or (lambda case, cfg: base + ["--canary-one", json.dumps([case.label, list(cfg)])])
    bad, pending, running = {}, list(plan), []
    t0 = time.perf_counter()
    while pending or running:
        while pending and len(running) < jobs:
            case, cfg = pending.pop(0)
            p = subprocess.Popen(command(case, cfg), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            running.append((p, case, cfg, time.perf_counter()))
        time.sleep(0.2)
        for item in list(running):
            p, case, cfg, started = item
            reason = None
            if p.poll() is None:
                if time.perf_counter() - started < timeout_s:
                    continue
                p.kill()
                p.wait()
                reason = f"hung: no result within {timeout_s:.0f} s (killed)"
            running.remove(item)
            text = p.stdout.read() if p.stdout else ""
            if reason is None and p.returncode != 0:
                tail = [line for line in text.strip().splitlines() if line.strip()][-1:] or [f"exit {p.returncode}"]
                reason = f"failed (exit {p.returncode}): {tail[0][:300]}"
            if reason:
                for c in cases:
                    if c.group == case.group and tuple(cfg) in [tuple(x) for x in c.configs]:
                        bad[(c.label, tuple(cfg))] = f"canary on {case.label}: {reason}"
            log(f"canary {case.label} cfg={cfg}: {reason or 'ok'} ({time.perf_counter() - started:.1f} s)")
    log(f"canaries: {len(plan)} run in {time.perf_counter() - t0:.1f} s, {len({k[1] for k in bad})} config(s) dropped")
    return bad


def kernel_regex(group, cfg):
    """The kernel of a config's call that ncu is to profile: ^main_k0 for a split-K GEMM config (its call launches
    the split kernel main_k0, then the cast main_k1), ^main (main_kernel) otherwise."""
    split = group == "gemm" and len(cfg) > 6 and isinstance(cfg[6], int) and cfg[6] > 1
    return "^main_k0" if split else "^main"


def profile_regex(cases, spec):
    """--profile-regex '[label, cfg]' (hopper_bench.sh profile-one): kernel_regex of that row's config, printed; exit 4
    when the row or config is unknown (as --canary-one, which the profile then runs)."""
    label, cfg = json.loads(spec)
    case = next((c for c in cases if c.label == label), None)
    if case is None or tuple(cfg) not in [tuple(c) for c in case.configs]:
        print(f"profile: no row {label!r} with config {tuple(cfg)!r}", file=sys.stderr)
        return 4
    print(kernel_regex(case.group, cfg))
    return 0


def profile_list(rows, limit):
    """--profile-list JSON: the GEMM and attention rows of a bench JSON where ours is slower than the row's first
    peer (cuBLAS, SDPA-cuDNN), slowest ratio first, at most `limit`, as [(name, regex, '[label, cfg]')] for
    hopper_bench.sh profile-best, which runs each under ncu (the issue asks what the profile shows is the
    limiter of every missed target); regex is the kernel name ncu is to pick: ^main_k0 for a split-K config
    (its call launches the split kernel, then the cast), ^main otherwise."""
    picked = []
    for r in rows:
        if r.get("group") not in ("gemm", "attention") or "ours_ms" not in r or not r.get("peers"):
            continue
        peer = next(iter(r["peers"].values()))
        if "ms" not in peer or peer["ms"] >= r["ours_ms"]:
            continue
        name = "".join(ch if ch.isalnum() else "_" for ch in r["label"]).strip("_").lower()
        cfg = r["ours_cfg"]
        picked.append((peer["ms"] / r["ours_ms"], name, kernel_regex(r["group"], cfg), json.dumps([r["label"], cfg])))
    return [(name, regex, spec) for _, name, regex, spec in sorted(picked)[:limit]]


def canary_one(cases, spec, be, target, reps=1):
    """--canary-one '[label, cfg]' (a child of run_canaries; also what hopper_bench.sh profile-best runs under
    ncu, with --canary-reps 2: the second launch is profiled): that config on that row, `reps` launches, the
    last one's output checked. Exit 0 when correct, 3 when the result is wrong, 4 when the row or config is
    unknown (an exception: 1)."""
    import numpy as np
    label, cfg = json.loads(spec)
    cfg = tuple(cfg)
    case = next((c for c in cases if c.label == label), None)
    if case is None or cfg not in [tuple(c) for c in case.configs]:
        print(f"canary: no row {label!r} with config {cfg!r}")
        return 4
    x = case.make(be, np.random.default_rng(11))
    k, _ = compile_case(case, cfg, target)
    shape, dtype = case.out_spec
    out = be.nan(shape, dtype)
    args = case.args(x, out, cfg) if getattr(case, "args_by_cfg", False) else case.args(x, out)
    for _ in range(max(1, reps)):
        k(*args)
    be.sync()
    err = case.check(be, x, out) if be.all_finite(out) else float("inf")
    full = getattr(case, "full_check", None)
    if full and be.name == "cuda" and err < 2e-2:  # every element, on the device
        err = max(err, full(be, x, out))
    print(f"canary: {label} cfg={cfg}: rel. error {err:.2e}")
    return 0 if err < 2e-2 else 3


def run_case(case, be, target, rng, log, dropped=None):
    """Ours for every fitting config (checked, then timed), then every peer the backend has; `dropped`:
    {(label, cfg): reason} of configs not to run (run_canaries)."""
    import numpy as np  # noqa: F401
    row = {"group": case.group, "label": case.label, "params": case.params, "unit": case.unit, "flops": case.flops,
           "min_bytes": case.min_bytes, "dtype": case.dtype, "ours_configs": [], "peers": {}}
    x = case.make(be, rng)
    shape, dtype = case.out_spec
    for cfg in case.configs:
        entry = {"cfg": list(cfg)}
        row["ours_configs"].append(entry)
        if not fits(case, cfg):
            entry["skipped"] = "tile does not fit the shape"
            continue
        if dropped and (case.label, tuple(cfg)) in dropped:
            entry["skipped"] = dropped[(case.label, tuple(cfg))]
            log(f"ours {case.label} cfg={cfg}: SKIPPED ({entry['skipped']})")
            continue
        try:
            k, secs = compile_case(case, cfg, target)
            entry["load_s"] = round(secs, 3)
            out = be.nan(shape, dtype)
            args = case.args(x, out, cfg) if getattr(case, "args_by_cfg", False) else case.args(x, out)
            k(*args)
            be.sync()
            entry["finite"] = be.all_finite(out)
            entry["err"] = case.check(be, x, out) if entry["finite"] else float("inf")
            if entry["err"] < 2e-2:
                entry["ms"], entry["reps"] = be.time_ms(lambda: k(*args))
            log(f"ours {case.label} cfg={cfg}: err {entry['err']:.2e}"
                + (f", {entry['ms']:.4f} ms" if "ms" in entry else ", NOT TIMED (wrong result)"))
            del out, args, k
        except Exception as e:  # noqa: BLE001 - one failing config must not hide the others
            entry["error"] = str(e)[-600:]
            log(f"ours {case.label} cfg={cfg}: FAILED {str(e).strip().splitlines()[-1][:300] if str(e).strip() else e!r}")
    timed = [e for e in row["ours_configs"] if "ms" in e]
    if timed:
        best = min(timed, key=lambda e: e["ms"])
        row.update(ours_ms=best["ms"], ours_cfg=best["cfg"], ours_err=best["err"])
    peer_names = [p for p in case.peers if (p == "numpy") == (be.name == "cpu")]
    for name in peer_names:
        p = {}
        row["peers"][name] = p
        try:
            out = be.nan(shape, dtype)
            fn = case.peers[name](be, x, out)
            fn()
            be.sync()
            p["err"] = case.check(be, x, out) if be.all_finite(out) else float("inf")
            timed_fn = getattr(case, "timed_peers", {}).get(name)
            run = timed_fn(be, x, out) if timed_fn and be.name != "cpu" else fn
            p["ms"], p["reps"] = be.time_ms(run)
            log(f"peer {name} {case.label}: err {p['err']:.2e}, {p['ms']:.4f} ms")
            del out, fn, run
        except Exception as e:  # noqa: BLE001 - e.g. Triton missing: "n/a"
            p["error"] = str(e)[-400:]
            log(f"peer {name} {case.label}: n/a ({str(e).strip().splitlines()[-1][:200] if str(e).strip() else e!r})")
    rf = getattr(case, "read_floor", None)
    if rf is not None:  # W4A16 decode: the same W and S read by a kernel that does nothing else
        r = row["read_floor"] = run_read_floor(rf, be, target, x, log)
        for key, ms in (("ours_over_read", r.get("ms")), ("ours_over_peer_read", r.get("peer", {}).get("ms"))):
            r[key] = row["ours_ms"] / ms if (ms and row.get("ours_ms")) else None
    del x
    return row


def add_floors(rows, bandwidth_bps, matrix_rates):
    """t_min = max(min_bytes / bandwidth, flops / matrix rate of the dtype); fraction = t_min / t."""
    for r in rows:
        if r.get("group") not in GROUPS:
            continue
        rate = matrix_rates.get(r["dtype"]) or max(matrix_rates.values(), default=0)
        t_bytes = r["min_bytes"] / bandwidth_bps if bandwidth_bps else 0.0
        t_flops = r["flops"] / rate if (rate and r["flops"]) else 0.0
        if r["flops"] and not rate:
            # A run without GEMM rows (--only attention) measured no matrix rate: the memory time alone
            # would pass for the floor of a compute-bound kernel (FlashAttention "of floor" 0.07).
            r["floor_ms"], r["floor_bound"] = None, "no matrix rate: no GEMM row in this run"
        else:
            r["floor_ms"] = max(t_bytes, t_flops) * 1e3
            r["floor_bound"] = "memory" if t_bytes >= t_flops else "compute"
        for who, ms in [("ours", r.get("ours_ms"))] + [(n, p.get("ms")) for n, p in r["peers"].items()]:
            if ms:
                key = "ours" if who == "ours" else who
                r.setdefault("rate", {})[key] = (r["flops"] / ms / 1e9 if r["unit"] == "TFLOP/s"
                                                 else r["min_bytes"] / ms / 1e9)
                r.setdefault("of_floor", {})[key] = r["floor_ms"] / ms if r["floor_ms"] else None


def matrix_rates_from(rows):
    """Best measured matrix rate (FLOP/s) per dtype over every GEMM measurement in this run (ours and peers)."""
    rates = {}
    for r in rows:
        if r.get("group") != "gemm":
            continue
        times = [r.get("ours_ms")] + [p.get("ms") for p in r["peers"].values()]
        for ms in times:
            if ms:
                rates[r["dtype"]] = max(rates.get(r["dtype"], 0.0), r["flops"] / (ms * 1e-3))
    if "float16" in rates and "bfloat16" not in rates:
        rates["bfloat16"] = rates["float16"]
    if "bfloat16" in rates and "float16" not in rates:
        rates["float16"] = rates["bfloat16"]
    return rates


def fmt(v, spec=".1f"):
    return "n/a" if v is None else format(v, spec)


def num(v):
    """A rate: 1 decimal from 100 up, 2 from 1 up, else 3 significant digits (the CPU self-test)."""
    if v is None:
        return "n/a"
    return format(v, ".1f" if v >= 100 else ".2f" if v >= 1 else ".3g")


def table(rows, machine):
    bw = machine.get("copy_bandwidth_TBps")
    lines = [f"device: {machine.get('device')}; copy bandwidth (measured) {fmt(bw, '.2f')} TB/s; best matrix rate "
             "(measured, TFLOP/s): " + ", ".join(f"{k} {num(v / 1e12)}" for k, v in machine.get("matrix_rates", {}).items()),
             "",
             "| case | unit | ours | peer | peer rate | ours / peer | floor µs (bound) | ours of floor | peer of floor "
             "| ours: best config, rel. error |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted((r for r in rows if r.get("group") in GROUPS), key=lambda r: GROUPS.index(r["group"])):
        ours = r.get("rate", {}).get("ours")
        peers = list(r["peers"].items()) or [("-", {})]
        for i, (name, p) in enumerate(peers):
            prate = r.get("rate", {}).get(name)
            ratio = (p["ms"] / r["ours_ms"]) if (p.get("ms") and r.get("ours_ms")) else None
            floor = r.get("floor_ms")
            lines.append(
                f"| {r['label'] if i == 0 else ''} | {r['unit']} | {num(ours) if i == 0 else ''} | {name} | "
                f"{num(prate) if 'ms' in p else 'n/a'} | {fmt(ratio, '.2f')} | "
                f"{(fmt(floor * 1e3, '.1f') if floor is not None else 'n/a') + ' (' + r['floor_bound'] + ')' if (i == 0 and 'floor_bound' in r) else ''} | "
                f"{fmt(r.get('of_floor', {}).get('ours'), '.2f') if i == 0 else ''} | "
                f"{fmt(r.get('of_floor', {}).get(name), '.2f')} | "
                + (f"{r.get('ours_cfg')}, {fmt(r.get('ours_err'), '.1e')}" if i == 0 else "") + " |")
    return "\n".join(lines)


def read_floor_table(rows):
    """The W4A16 decode rows' read floors (run_read_floor) as a markdown table; "" when no row has one. "ours /
    read floor" is a time ratio: ours' µs over the pure read's (1.00: ours runs as fast as reading W and S)."""
    rows = [r for r in rows if r.get("group") == "w4a16" and r.get("read_floor")]
    if not rows:
        return ""
    lines = ["W4A16 decode read floor: the same W + S buffers read and summed by read_floor.read_sum (best config) "
             "and by the peer read, timed and flushed as every row",
             "",
             "| case | MB read | ours µs | read floor µs (TB/s) | read_sum best config | peer read | peer read µs "
             "(TB/s) | ours / read floor | ours / peer read |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        f = r["read_floor"]
        ms, pms = f.get("ms"), f.get("peer", {}).get("ms")

        def us_rate(t):
            return "n/a" if not t else f"{t * 1e3:.1f} ({num(f['bytes'] / t / 1e9)})"
        lines.append(f"| {r['label']} | {f['bytes'] / 1e6:.1f} | {fmt(r['ours_ms'] * 1e3 if r.get('ours_ms') else None)} "
                     f"| {us_rate(ms)} | {f.get('cfg', 'n/a')} | {f.get('peer_name')} | {us_rate(pms)} "
                     f"| {fmt(f.get('ours_over_read'), '.2f')} | {fmt(f.get('ours_over_peer_read'), '.2f')} |")
    return "\n".join(lines)


def run_all(cases, be, target, json_path, log=print, budget_s=None, dropped=None):
    import numpy as np
    rng = np.random.default_rng(11)
    machine = {"kind": "machine", "device": be.name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if be.name == "cuda":
        import torch
        machine.update(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                       cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
        try:
            import triton
            machine["triton"] = triton.__version__
        except ImportError:
            machine["triton"] = "n/a (not importable)"
    log(json.dumps(machine))
    copies = be.copy_bandwidth()
    machine["copy"] = copies
    bw = max(c["TB/s"] for c in copies.values())
    machine["copy_bandwidth_TBps"] = bw
    log(f"copy bandwidth: " + ", ".join(f"{k} {v['TB/s']:.3f} TB/s" for k, v in copies.items()))
    rows = []

    def dump():
        if json_path:
            with open(json_path, "w") as f:
                json.dump([machine] + rows, f, indent=1, default=str)

    # The cheap groups first, so a run cut short by --budget-s still has them; every floor is
    # computed at the end from the GEMM rates measured.
    order = ("norm", "w4a16", "gemm", "attention")
    t_start = time.perf_counter()
    for case in sorted(cases, key=lambda c: order.index(c.group)):
        if budget_s and time.perf_counter() - t_start > budget_s:
            log(f"skipped {case.label}: past the time budget of {budget_s:.0f} s")
            rows.append({"group": "skipped", "label": case.label, "error": f"past the time budget of {budget_s:.0f} s"})
            continue
        try:
            rows.append(run_case(case, be, target, rng, log, dropped))
        except Exception as e:  # noqa: BLE001 - one case must not hide the others
            import traceback
            traceback.print_exc()
            rows.append({"group": "error", "label": case.label, "error": repr(e)[:500]})
        if be.name == "cuda":
            be.torch.cuda.empty_cache()
        dump()
    machine["matrix_rates"] = matrix_rates_from(rows)
    add_floors(rows, bw * 1e12, machine["matrix_rates"])
    dump()
    return machine, rows


def select_w4(cases, kinds="", ms=""):
    """--w4-kinds / --w4-ms: the W4A16 rows of the listed M only, each with only the configs of the listed kinds
    (a short device run of a few kernels with their peers); other groups' cases unchanged."""
    kinds = {k for k in kinds.split(",") if k}
    ms = {int(m) for m in ms.split(",") if m}
    out = []
    for c in cases:
        if c.group == "w4a16":
            if ms and c.params["M"] not in ms:
                continue
            if kinds:
                c.configs = tuple(cfg for cfg in c.configs if str(cfg[5]) in kinds)
                if not c.configs:
                    continue
        out.append(c)
    return out


def self_test_configs(case):
    """The first fitting config, plus for W4A16, the norms, GEMM and attention the first of each kernel variant
    (their kind: stage_scales or "lut"; stage; split-K at this K; "nows" / "overlap"), so every factory path
    runs."""
    picked, kinds = [], set()
    for cfg in case.configs:
        if not fits(case, cfg):
            continue
        kind = (cfg[5], w4_split_of(cfg, case.params["K"]) > 1) if case.group == "w4a16" else \
            cfg[2] if case.group == "norm" else None
        if case.group == "gemm":
            kind = (len(cfg) > 6 and min(cfg[6], -(-case.params["K"] // cfg[2])) > 1, cfg[7:])
        if case.group == "attention":  # plain, "nows", "overlap", "pingpong", "overlap" + "pingpong"
            kind = cfg[4:]
        if not picked or kind not in kinds:
            picked.append(cfg)
            kinds.add(kind)
    return picked


def self_test(args):
    """Tiny shapes on the CPU device, numpy peers: every group's first config (all with --all-configs)."""
    be = NumpyBackend()
    cases = all_cases(tiny=True, only=args.only)
    if args.canary_one:
        return canary_one(cases, args.canary_one, be, "cpu", args.canary_reps)
    full = all_cases(tiny=False, only=args.only)
    problems = []
    for c in full:  # kernel selection at the real sizes: at least one config fits every case
        if not any(fits(c, cfg) for cfg in c.configs):
            problems.append(f"{c.label}: no config fits")
    if not args.all_configs:
        for c in cases:
            c.configs = self_test_configs(c)
    machine, rows = run_all(cases, be, "cpu", args.json, log=(print if args.verbose else (lambda *_: None)))
    print(table(rows, machine))
    if read_floor_table(rows):
        print("\n" + read_floor_table(rows))
    for r in rows:
        if r.get("group") == "error":
            problems.append(f"{r['label']}: {r['error']}")
            continue
        if "ours_ms" not in r:
            problems.append(f"{r['label']}: ours not timed: {[e.get('error') or e.get('err') for e in r['ours_configs']]}")
        for name, p in r["peers"].items():
            if "ms" not in p or not p["err"] < 2e-2:
                problems.append(f"{r['label']}: peer {name}: {p}")
        if r.get("floor_ms") is None or not r.get("of_floor", {}).get("ours"):
            problems.append(f"{r['label']}: no roofline floor")
        if r.get("group") == "w4a16" and r["params"]["M"] <= 16:
            problems += read_floor_problems(r)
    for p in problems:
        print("SELF-TEST PROBLEM:", p)
    print(f"self-test: {len(rows)} rows, {len(problems)} problems")
    return 1 if problems else 0


def parse_gemm_shapes(text):
    """--gemm-shapes: comma-separated MxNxK of positive ints -> ((M, N, K), ...); ValueError naming the bad one."""
    shapes = []
    for s in (x for x in text.split(",") if x):
        dims = s.split("x")
        if len(dims) != 3 or not all(d.strip().isdigit() and int(d) > 0 for d in dims):
            raise ValueError(f"--gemm-shapes: expected MxNxK (three positive integers), got {s!r}")
        shapes.append(tuple(int(d) for d in dims))
    return tuple(shapes)


def parse_gemm_configs(text):
    """--gemm-configs: a Python literal list (or tuple) of GEMM config tuples, each (block_M, block_N, block_K,
    threads, num_stages[, raster[, split_k[, variant...]]]) as gemm_case's program reads them: five positive ints,
    then optional ints (raster >= 0, split_k >= 1), then variant strings; ValueError saying what is wrong."""
    import ast
    want = ("expected a list of (block_M, block_N, block_K, threads, num_stages[, raster[, split_k[, variant...]]]) "
            f"tuples, got {text!r}")
    try:
        cfgs = ast.literal_eval(text)
    except (SyntaxError, ValueError) as e:
        raise ValueError(f"--gemm-configs: not a Python literal ({e}); {want}") from None
    if not isinstance(cfgs, (list, tuple)) or not cfgs:
        raise ValueError(f"--gemm-configs: {want}")
    cfgs = tuple(tuple(c) if isinstance(c, list) else c for c in cfgs)
    for c in cfgs:
        ints = c[:7] if isinstance(c, tuple) else ()
        ok = (isinstance(c, tuple) and len(c) >= 5 and all(type(x) is int and x > 0 for x in c[:5])
              and all(type(x) is int for x in ints[5:]) and (len(c) < 6 or c[5] >= 0) and (len(c) < 7 or c[6] >= 1)
              and all(isinstance(x, str) for x in c[7:]))
        if not ok:
            raise ValueError(f"--gemm-configs: bad config {c!r}; {want}")
    return cfgs


def parse_w4_ms(text):
    """--w4-ms: comma-separated positive ints (validated here: select_w4 takes the string)."""
    for m in (x for x in text.split(",") if x):
        if not m.strip().isdigit() or int(m) <= 0:
            raise ValueError(f"--w4-ms: expected comma-separated positive integers (M values), got {m!r}")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precompile", action="store_true", help="compile every kernel for CUDA into the cache")
    ap.add_argument("--self-test", action="store_true", help="tiny shapes on the CPU device, numpy peers")
    ap.add_argument("--all-configs", action="store_true", help="--self-test: every config, not the first")
    ap.add_argument("--only", default=",".join(GROUPS), help="comma-separated groups: " + ",".join(GROUPS))
    ap.add_argument("--w4-kinds", default="",
                    help="W4A16 rows: only the configs of these kinds (comma-separated 6th tuple elements, e.g. "
                         "m16b,m16r,ldg; False/True as 'False'/'True'); default all")
    ap.add_argument("--w4-ms", default="", help="W4A16 rows: only these M (comma-separated, e.g. 1,16); default all")
    ap.add_argument("--jobs", type=int, default=2, help="--precompile: parallel compiles")
    ap.add_argument("--json")
    ap.add_argument("--budget-s", type=float, default=480,
                    help="skip the cases not started after this many seconds (the table still prints)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--fa-configs", metavar="TUPLES",
                    help="replace FA_CONFIGS (a Python literal: a tuple of FlashAttention config tuples), e.g. "
                         "\"((128, 128, 256, 2), (128, 128, 256, 2, 'pingpong'))\"; --precompile takes it too")
    ap.add_argument("--flush", choices=("write", "read"), default="write",
                    help="L2 flush before each timed run: write (zero_ 256 MiB, dirty lines) or read (then sum it)")
    ap.add_argument("--gemm-shapes", help="GEMM rows only for these shapes, e.g. 4096x4096x4096,8192x8192x1024")
    ap.add_argument("--gemm-dtypes", default="bfloat16,float16", help="GEMM rows only for these dtypes")
    ap.add_argument("--gemm-configs", help="GEMM configs instead of the built-in lists, as a Python literal list of "
                    "tuples, e.g. \"[(128, 256, 64, 256, 3, 0, 1, 'persistent', 'cluster2')]\" (a probe of a few)")
    ap.add_argument("--canary-timeout", type=float, default=0,
                    help="first run each config of a variant new enough to hang (UNPROVEN) alone in a child "
                         "process with this timeout (s); those that hang or fail are skipped in the table")
    ap.add_argument("--canary-jobs", type=int, default=4, help="--canary-timeout: children at a time")
    ap.add_argument("--canary-one", metavar="JSON", help=argparse.SUPPRESS)  # run_canaries' child
    ap.add_argument("--canary-reps", type=int, default=1, help=argparse.SUPPRESS)  # profile-best: 2 launches
    ap.add_argument("--profile-list", metavar="JSON", help="print the missed GEMM / attention rows of a bench JSON "
                    "(ours slower than cuBLAS / SDPA-cuDNN), slowest first, as 'name kernel-regex [label, cfg]' lines")
    ap.add_argument("--profile-max", type=int, default=4, help="--profile-list: at most this many")
    ap.add_argument("--profile-regex", metavar="SPEC", help="print the kernel regex ncu is to profile for one "
                    "'[label, cfg]' of the rows (hopper_bench.sh profile-one)")
    args = ap.parse_args()
    args.only = tuple(g for g in args.only.split(",") if g)
    gemm_kw = {"gemm_dtypes": tuple(d for d in args.gemm_dtypes.split(",") if d)}
    try:
        if args.gemm_shapes:
            gemm_kw["gemm_shapes"] = parse_gemm_shapes(args.gemm_shapes)
        if args.gemm_configs:
            gemm_kw["gemm_cfgs"] = parse_gemm_configs(args.gemm_configs)
        parse_w4_ms(args.w4_ms)
    except ValueError as e:
        ap.error(str(e))
    bad = [g for g in args.only if g not in GROUPS]
    if bad:
        ap.error(f"--only: unknown group(s) {bad}; expected some of {GROUPS}")
    if args.fa_configs:
        import ast
        global FA_CONFIGS
        try:
            cfgs = ast.literal_eval(args.fa_configs)
        except (SyntaxError, ValueError):
            cfgs = None
        if not isinstance(cfgs, tuple) or not all(isinstance(c, tuple) and len(c) >= 4 for c in cfgs):
            ap.error(f"--fa-configs: expected a tuple of (block_M, block_N, threads, num_stages[, variant...]) "
                     f"tuples, got {args.fa_configs!r}")
        FA_CONFIGS = cfgs
    if args.profile_list:
        with open(args.profile_list) as f:
            data = json.load(f)
        for name, regex, spec in profile_list(data[1:], args.profile_max):
            print(name, regex, spec)
        return 0
    if args.self_test:
        return self_test(args)
    cases = select_w4(all_cases(only=args.only, **gemm_kw), args.w4_kinds, args.w4_ms)
    if args.profile_regex:
        return profile_regex(cases, args.profile_regex)
    if args.precompile:
        return precompile(cases, args.jobs)
    if args.canary_one:
        return canary_one(cases, args.canary_one, TorchBackend(flush=args.flush), "cuda", args.canary_reps)
    dropped = {}
    if args.canary_timeout > 0:
        t0 = time.perf_counter()
        dropped = run_canaries(cases, sys.argv[1:], args.canary_timeout, args.canary_jobs)
        args.budget_s = max(1.0, args.budget_s - (time.perf_counter() - t0))
    be = TorchBackend(flush=args.flush)
    machine, rows = run_all(cases, be, "cuda", args.json, budget_s=args.budget_s, dropped=dropped)
    print("\n=== hopper benchmark table ===")
    print(table(rows, machine))
    if read_floor_table(rows):
        print("\n" + read_floor_table(rows))
    failed = [r["label"] for r in rows if "ours_ms" not in r and r.get("group") in GROUPS]
    misses = sum(1 for r in rows for e in r.get("ours_configs", []) if e.get("load_s", 0) > 1.0)
    if misses:
        print(f"\n{misses} kernels took over 1 s to load: compiled here, not found in the precompiled cache "
              "(run tools/device/hopper_bench.sh build after the last change to .gpu/bin/tl-pack)")
    skipped = [r["label"] for r in rows if r.get("group") == "skipped"]
    if skipped:
        print(f"\nnot run (time budget): {skipped}")
    if failed:
        print(f"\nno correct config of ours: {failed}")
    if dropped:
        print("\nconfigs dropped by their canary run (hung or failed alone; --canary-timeout):")
        for cfg, why in sorted({(str(list(c)), w.split(': ', 1)[1]) for (_, c), w in dropped.items()}):
            print(f"  {cfg}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
