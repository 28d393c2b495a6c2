// The GPU lowering shared by the CUDA, HIP and SPIR-V printers:
// verified Tile IR function -> SimtKernel (simt_ir.h).
//
// Passes, in order (each a small unit; invariants stated at each):
//   Verify, CheckSingleKernel, MakeRegionsExplicit      (compiler/passes)
//   PipelineAsyncCopies (with GpuLowerOptions::async_copies: cp.async
//       multi-stage pipelines), then LowerPipelinesSerial (compiler/passes)
//       for the pipelined loops left
//   InferGpuLayouts    every fragment gets a FragmentLayout or is demoted to
//                      shared memory
//   InsertBarriers     `sync` statements where shared data crosses threads
//   LowerToSimt        tile ops -> per-thread loops, shuffles, guards
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/layout.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::gpu {

// ---------------------------------------------------------------------------
// InferGpuLayouts
// In: a function after MakeRegionsExplicit, T threads per block.
// Out: for every `fragment` alloc either a layout (registers) or membership in
// `demoted` (the fragment lives in shared memory: always correct, slower).
// Rules, in order:
//   * a gemm accumulator gets GemmAccumulatorLayout; gemm operands that are
//     fragments, cumsum operands, reductions along a dim other than the last,
//     partial-region tile ops on fragments, and fragments touched by scalar
//     code outside T.Parallel are demoted;
//   * a T.Parallel loop adopts the layout of the fragment it writes (else of
//     one it reads with all its indices, else the projected layout of a row
//     vector it reads, else the default layout of its extents); fragments it
//     touches with all its indices must have that layout, row vectors read
//     with all but the last index its projection; on a conflict the fragment
//     that disagrees is demoted and a note names both;
//   * a last-dim reduction's output gets the projection of its input's layout;
//   * anything left gets DefaultLayout.
// How T.gemm is lowered; a per-target choice (GpuLowerOptions::gemm). Only
// kSimtFma emits nothing but the portable SIMT statements.
//   kSimtFma   per-thread FMA over shared operands (every target)
//   kMmaSync   SMma (CUDA mma.sync, sm_80+) where the instruction fits
//              (f16/bf16 x f16/bf16 -> f32 or the operands' own 16-bit
//              type, accumulated in f32 registers, i8 x i8 -> i32, and with
//              `tf32` f32 x f32 -> f32 as tf32 (lossy: 10-bit mantissas, so
//              off by default); operands in shared memory; the accumulator
//              fits MmaAccumulatorFits; K a multiple of the instruction's k),
//              kSimtFma for every other gemm
//   kMfma      SAmdMma on AMD CDNA matrix cores (gfx90a, gfx94x; wavefront
//              64): f16/bf16 -> f32 (16x16x16), i8 -> i32 (k-step 32);
//              operands in shared memory, the accumulator fits
//              AmdMatrixAccumulatorFits, K a multiple of the k-step; else
//              kSimtFma
//   kWmma      the same on RDNA3 WMMA (gfx11; wavefront 32), k-step 16
//   kWgmma     SWgmma (CUDA wgmma.mma_async, sm_90a) where it fits:
//              f16/bf16 operands, f32 or 16-bit accumulator (f32
//              registers, as kMmaSync), T a multiple of 128 threads
//              (warpgroups stacked along M: M a multiple of 64 T / 128),
//              N a multiple of 8, K of 16, both operands in shared buffers
//              that only wgmma gemms read (WgmmaOperandSwizzle gives them a
//              swizzled layout, every other access goes through it) at
//              offsets the descriptors can express (WgmmaOperandProblem);
//              the accumulator gets WgmmaAccumulatorLayout. Every other
//              gemm is lowered as under kMmaSync.
enum class GemmStrategy : uint8_t { kSimtFma, kMmaSync, kMfma, kWmma, kWgmma };
const char* GemmStrategyName(GemmStrategy s);  // "simt", "mma.sync", "mfma", "wmma", "wgmma"

struct GpuLayoutPlan {
  int64_t threads = 1;
  std::map<std::string, FragmentLayout> layouts;  // register fragments
  std::set<std::string> demoted;                  // fragments kept in shared memory
  std::map<std::string, MmaKind> mma;             // accumulators of tensor-core gemms (kMmaSync, kMfma, kWmma)
  std::set<std::string> mma_operands;             // shared buffers those gemms read
  std::set<std::string> wgmma;                    // accumulators (in `mma`) of wgmma gemms (kWgmma)
  std::map<std::string, SmemSwizzle> swizzle;     // shared buffers only wgmma gemms read: their swizzle
  std::vector<std::string> notes;
};
// `sm75`: kMmaSync with Turing's shapes only (GpuLowerOptions::mma_sm75).
StatusOr<GpuLayoutPlan> InferGpuLayouts(const ir::Function& f, int64_t threads,
                                        GemmStrategy gemm = GemmStrategy::kSimtFma, bool tf32 = false,
                                        bool sm75 = false);

// The layout a T.Parallel loop iterates with under `plan` (see the rules
// above); the lowering and the tests use the same function.
FragmentLayout LoopLayout(const ir::Parallel& p, const ir::SymbolTable& syms, const GpuLayoutPlan& plan);

// ---------------------------------------------------------------------------
// PipelineAsyncCopies (pipeline.cc; with GpuLowerOptions::async_copies)
// In: a function after MakeRegionsExplicit. Out: each `pipelined` loop
// with stages S >= 2 (capped at max_stages) whose body copies global tiles
// into whole shared buffers X that only the rest of the body reads becomes a
// serial loop over S-deep buffers X[S, ...]: a prologue issues the copies of
// the first S - 1 iterations, each iteration waits for its own, syncs, issues
// the copies of iteration + S - 1 into the stage the previous iteration read,
// and reads stage (k - start) % S. Hints mark the asynchrony (kAsyncCopyHint
// before each such copy, kAsyncCommitHint, kAsyncWaitHint N); ignoring them
// (synchronous copies) gives the same results. Other loops are left alone.
// The returned buffers need no InsertBarriers barriers: the pipeline has its own.
inline constexpr const char* kAsyncCopyHint = "tl_async_copy";
inline constexpr const char* kAsyncCommitHint = "tl_async_commit";
inline constexpr const char* kAsyncWaitHint = "tl_async_wait";
// With `tma` (GpuLowerOptions::tma_copies), PipelineAsyncCopies also marks
// what an mbarrier-driven (TMA) lowering needs; pipeline P (its index in the
// returned vector) with S stages gets:
//   hint tl_async_copy P, S      before each hoisted copy (its destination's
//                                first index is the stage = mbarrier index)
//   hint tl_tma_arrive P         after the last copy of an issued iteration,
//                                inside its `if iteration < stop`
//   let tl_stage_P = (k - start) % S; hint tl_tma_wait P, tl_stage_P
//                                at the top of the loop body, before the sync
// A lowering that does not use TMA for any copy of P ignores these.
inline constexpr const char* kTmaArriveHint = "tl_tma_arrive";
inline constexpr const char* kTmaWaitHint = "tl_tma_wait";
struct AsyncPipeline {
  std::string loop_var;
  int64_t requested_stages = 0, stages = 0;
  std::vector<std::string> buffers;  // the S-deep shared buffers
};
// With `defer_wgmma` (GpuLowerOptions::wgmma_overlap under kWgmma), a loop
// whose body besides the hoisted copies is exactly one gemm that does not
// clear its accumulator instead issues the copies of iteration k + S - 1
// after the gemm and a second sync, marks the gemm with kWgmmaDeferHint and
// ends with kWgmmaDrainHint right after the loop (pipeline.cc states the
// invariant): the wgmma lowering then leaves the gemm's group in flight
// (SWgmma::wait_pending = 1) and drains it there (SWgmmaWait 0).
// With `tma` too, the barrier at the top of such a loop is `hint tl_tma_sync
// P` (kTmaSyncHint): the lowering makes it a barrier unless every hoisted copy
// of pipeline P became TMA (the mbarrier waits then order the stage's data,
// and the refill has its own barrier).
inline constexpr const char* kTmaSyncHint = "tl_tma_sync";
inline constexpr const char* kWgmmaDeferHint = "tl_wgmma_defer";
inline constexpr const char* kWgmmaDrainHint = "tl_wgmma_drain";
std::vector<AsyncPipeline> PipelineAsyncCopies(ir::Function& f, int64_t max_stages, bool tma = false,
                                               bool defer_wgmma = false);

// ---------------------------------------------------------------------------
// InsertBarriers
// In: a function's kernel body; `shared` = names of shared allocs and demoted
// fragments. Out: `sync` statements inserted (existing ones kept) so that no
// statement reads or writes shared data that another statement wrote, or
// writes shared data another statement read, since the last barrier: after
// copies into shared memory and before a loop's next iteration overwrites
// what the previous one read. Every tile op and T.Parallel loop is assumed to
// spread its accesses over all threads. Barriers are only placed at the
// statement level of kernel, for and if bodies (all block-uniform in Tile IR;
// never inside T.Parallel). Returns the number of barriers inserted.
int InsertBarriers(ir::Function& f, const std::set<std::string>& shared);

// ---------------------------------------------------------------------------
// LowerToSimt: the whole pipeline above.
struct GpuLowerOptions {
  int64_t shared_budget_bytes = 48 * 1024;  // smallest budget of the requested targets
  // Dynamic shape symbols become trailing scalar params (SimtParam::symbol);
  // a target whose printer and runtime cannot fill them leaves this false and
  // such functions are rejected with kUnimplemented.
  bool symbol_params = false;
  GemmStrategy gemm = GemmStrategy::kSimtFma;
  bool tf32 = false;  // kMmaSync: f32 gemms on tensor cores as tf32
  // kMmaSync on Turing (sm_75; CUDA sets it when the oldest requested arch is
  // sm_75): f16 x f16 -> f32/f16 as m16n8k8 and s8 x s8 -> s32 as m8n8k16
  // (SMma::sm75); bf16 and tf32 have no Turing atoms and stay SIMT FMA.
  bool mma_sm75 = false;
  // Copies between global and shared memory as 4/8/16-byte SCopyVec where
  // the last dim is contiguous and provably aligned (global bases then need
  // SimtKernel::param_align).
  bool vector_copies = false;
  // `pipelined` loops as cp.async multi-stage pipelines (PipelineAsyncCopies;
  // needs vector_copies). Deeper pipelines than max_async_stages are capped;
  // when the stages do not fit shared_budget_bytes, fewer are tried, down to
  // a serial loop.
  bool async_copies = false;
  int64_t max_async_stages = 8;
  // Shared tiles whose lives do not overlap share memory
  // (ReuseDeadSharedBuffers, reuse_shared.h). LowerToSimt turns it on by
  // itself when a kernel does not fit shared_budget_bytes without it.
  bool reuse_dead_shared = false;
  // (sm_90) global -> shared copies of those pipelines as TMA
  // (cp.async.bulk.tensor) boxes completing on mbarriers, the loop driven by
  // mbarrier phases (tma.cc): where the tensor map can describe the copy
  // (tensor rank <= 5, last dim static with rows a multiple of 16 bytes, box
  // <= 256 per dim, destination a dense or row-padded whole stage aligned to
  // 128 bytes); other copies stay cp.async. The kernel then takes
  // SimtKernel::tensor_maps, and the tensors' bases must be 16-byte aligned
  // (param_align). Needs async_copies.
  bool tma_copies = false;
  // (kWgmma with async_copies) keep a pipelined gemm's wgmma group in flight
  // across iterations (wait_group 1, the refill after it; PipelineAsyncCopies'
  // defer_wgmma) instead of waiting for it at the end of every k-step.
  bool wgmma_overlap = true;
  // (kWgmma) `copy C_f -> T[...]` of a wgmma accumulator into a global tensor
  // goes through a shared tile (rows padded by 16 bytes: conflict-free
  // register stores), then 16-byte vector stores along T's rows instead of
  // each thread's 2-element pieces; the tile takes the memory of a pipeline
  // stage buffer dead by then (no shared memory added), else the copy stays
  // direct (a note says why).
  bool stage_wgmma_epilogue = false;
  // (kWgmma) a whole wgmma accumulator copied into an f16/bf16 shared tile
  // (the staged epilogue above) is written with stmatrix.x4 (SStmatrix: one
  // instruction per 16x16 block of a warp instead of 8 two-byte stores);
  // off: per-element stores (tests compare the two, TL_CUDA_STMATRIX=0).
  bool stmatrix = true;
  // (kWgmma, stage_wgmma_epilogue) the staged epilogue's tile -> global copy
  // of a warp-specialized GEMM as per-row bulk copies (SBulkStore: warp 0's
  // lanes, no tensor map) whose wait the persistent form defers to the next
  // tile (the store overlaps its k-loop; SimtKernel::bulk_epilogues); off:
  // every consumer thread's 16-byte stores. Off by default (tl-pack: on with
  // TL_CUDA_BULK_STORE=1 or pass_configs {"tl.bulk_store": True}): correct
  // on the H200, 3-25 % slower there than without (2026-12-05).
  bool bulk_store = false;
  // (kWgmma, stage_wgmma_epilogue, tma_copies) CUTLASS's TMA-store epilogue:
  // a staged epilogue tile of f16/bf16 [m, n] (m a multiple of 8, <= 256; n
  // a multiple of 64) is stored unpadded with the 128-byte swizzle
  // (swizzle.h: stmatrix stays conflict-free) and, in a warp-specialized
  // GEMM, copied to the tensor by TMA tensor stores -- thread 0 issues one
  // STmaStore box [m, 64] per column panel (a tensor map of the output,
  // SimtKernel::tensor_maps; the engine clips rows and columns past the
  // tensor) -- with bulk_store's waits (the persistent form defers the wait
  // to the next tile, so the store overlaps its k-loop). Why: bulk_store's
  // one copy per tile row (128 a tile) measured 3-25 % slower than the
  // vector stores on the H200; a tensor store is n / 64 instructions a tile.
  // Elsewhere (not warp-specialized) the swizzled tile is copied by the
  // threads' vector stores as before. Off by default (tl-pack:
  // TL_CUDA_TMA_STORE=1 or pass_configs {"tl.tma_store": True}); takes the
  // place of bulk_store where both are on. Never run on a GPU yet
  // (2026-12-05: written with no device lent; checked in the SIMT
  // interpreter and by ptxas).
  bool tma_store = false;
  // (with warp_specialize and persistent_sms; kWgmma) a persistent
  // deferred-wgmma GEMM whose block is one consumer warpgroup (128 threads,
  // e.g. a 128x128 tile) as CUTLASS's ping-pong schedule: two consumer
  // warpgroups each own whole output tiles (alternate tiles of the block),
  // so one's epilogue runs under the other's k-loop (WarpSpecializeGemmPipeline).
  // Off by default (tl-pack: TL_CUDA_GEMM_PINGPONG=1 or pass_configs
  // {"tl.gemm_pingpong": True}): correct on the H200, 2-64 % slower there
  // than the best cooperative kernel (2026-12-05). Elsewhere ignored with a note.
  bool gemm_pingpong = false;
  // (kWgmma with tma_copies and wgmma_overlap) a kernel whose pipelined
  // k-loop is one deferred wgmma gemm fed only by TMA copies becomes
  // warp-specialized (WarpSpecializeGemmPipeline below): one producer
  // warpgroup added to the block, the program's threads the consumers.
  bool warp_specialize = false;
  // (kWgmma) a cast copy of an f32 fragment whose only use is a register-A
  // wgmma is dropped and the wgmma packs the f32 slots (ForwardCastIntoWgmmaA
  // below), and a zero fill right before a wgmma into the filled fragment
  // becomes the wgmma's scale-d = 0 (ZeroInitWgmmaAccumulators); off: the
  // copy and the fill stay (tests, A/B).
  bool forward_cast = true;
  // (with warp_specialize; 0: off) a persistent kernel over this many SMs
  // (WarpSpecializeGemmPipeline's persistent_blocks).
  int64_t persistent_sms = 0;
  // (with persistent_sms) the stages' ring continues across a block's tiles
  // instead of restarting at stage 0 per tile (WarpSpecializeGemmPipeline's
  // persistent_ring). Off by default (tl-pack: TL_CUDA_PERSISTENT_RING=1):
  // correct on the H200 but no faster there -- within noise for the 128x128
  // overlap FlashAttention and the 128x256 GEMMs, 1-4 % slower for the
  // 192-row D64 FlashAttention (2026-12-05) -- the epilogue covers the first
  // loads' latency either way.
  bool persistent_ring = false;
  // (with tma_copies) global -> shared copies at the kernel's top level
  // before its first pipeline (FlashAttention's Q tile) as TMA boxes on a
  // one-stage mbarrier of their own, which the persistent synchronous-compute
  // warp specialization hands to the producer warpgroup. LowerToSimt sets it
  // itself for a persistent sm_90a lowering and keeps the result only where
  // the producer took those copies (else the kernel is lowered without it).
  bool tma_pre_copies = false;
  // (with warp_specialize; sm_90a) honour the kernel's `hint cluster 2`
  // (T.Kernel(..., cluster_dims=2)): ClusterMulticast below. Off (every
  // other target): the hint is ignored, as hints may be.
  bool clusters = false;
  // Lanes that execute in lockstep and shuffle together: 32 on NVIDIA; the
  // wavefront size on AMD (64 on CDNA gfx9, 32 on RDNA). Lane reductions are
  // at most this wide; wider groups combine through shared memory.
  int64_t warp_size = 32;
  // T.call_extern into T.import_source'd CUDA source (SCallExtern): only the
  // CUDA printer compiles such source. Without it a function holding a
  // call_extern fails with kUnimplemented naming `target` (RejectExternCalls).
  bool extern_calls = false;
  const char* target = "this GPU target";
};
StatusOr<SimtKernel> LowerToSimt(const ir::Function& f, const GpuLowerOptions& options = {});

// ---------------------------------------------------------------------------
// ForwardCastIntoWgmmaA (forward_cast.cc; run by LowerToSimt for wgmma
// kernels, before warp specialization)
// In: a lowered kernel. Where a loop nest with constant bounds copies every
// slot of an f32 register fragment S into an f16/bf16 register fragment D
// (D[x] = cast(S[x]), the same slot on both sides: T.copy between fragments
// of one layout) and D's only other use is a later synchronous register-A
// SWgmma of the same block, with nothing in between writing S, the copy is
// removed, the wgmma packs S's slots instead (the same rounding), and D's
// registers are dropped. Where the copy cannot be forwarded (S written before
// the wgmma, or the wgmma left in flight) but D's only other uses are
// register-A wgmmas, D becomes packed (SimtBuffer::packed_pairs) and the nest
// one loop of pair stores, or, where a wgmma's registers are not slot pairs
// (2j, 2j + 1), an f32 fragment the wgmma packs. Out: the note naming each
// D -> S and each packed / f32 D; empty when nothing matched.
std::string ForwardCastIntoWgmmaA(SimtKernel* k);

// ---------------------------------------------------------------------------
// ZeroInitWgmmaAccumulators (zero_init.cc; run by LowerToSimt for wgmma
// kernels, with forward_cast, before warp specialization)
// In: a lowered kernel. Where a loop nest with constant bounds stores 0 into
// every slot of a register fragment C and the next statement of the same
// block touching C is a synchronous SWgmma accumulating into C whose k-step
// covers all of C, the fill is removed and the wgmma's zero_init set (scale-d
// = 0 on its first k-step). Out: the note naming each C; empty when nothing
// matched.
std::string ZeroInitWgmmaAccumulators(SimtKernel* k);

// ---------------------------------------------------------------------------
// WarpSpecializeGemmPipeline (warp_specialize.cc; GpuLowerOptions::
// warp_specialize, run by LowerToSimt last)
// In: a lowered kernel with 1-D blocks of T threads whose one TMA pipeline
// (SMbarInit bar[S]) feeds a top-level k-loop holding exactly: the stage let,
// the wait on its full barrier, one deferred wgmma unit (wait_group 1), a
// barrier, the TMA refill of iteration k + S - 1; after it wait_group 0 and
// a barrier (PipelineAsyncCopies' defer_wgmma with every copy TMA).
// Out: T + 128 threads: SMbarInit full[S] (1 arrival + bytes) and empty[S]
// (T / 32 arrivals), then SWarpRoles{T}: the producer warpgroup lowers its
// registers and one elected thread issues every iteration's boxes into
// stage i % S after waiting for empty[i % S] (i >= S); the consumers raise
// theirs, run the statements before the loop, wait full[stage], issue the
// wgmma and, once wait_group 1 retired iteration k - 1's group, lane 0 of each
// warp arrives on empty[stage of k - 1]; then wait_group 0 and everything after
// the loop, each block barrier a named barrier over the T consumers.
// Returns the note for the kernel: applied (with the register split) or why
// not (with !enabled: "turned off"); empty when the kernel has no deferred
// wgmma fed by TMA at all.
// With persistent_blocks > 0 (SMs, e.g. 132 on an H200): a persistent kernel
// of min(tiles, persistent_blocks * min_blocks) blocks, each looping over the
// output tiles b, b + G, ... in the original block order (static schedule;
// a rasterized order stays) -- unless the synchronous form's k-loop trip
// count varies with the first block index (causal FlashAttention), where
// ChoosePersistentTileOrder may pick a work-balanced order (both roles map
// tiles alike; the note then names it) -- phases carried across tiles by
// per-stage bits; needs a static grid. Where the persistent form is refused (no static grid,
// no shared memory for the epilogue tile outside the stages, ...) the kernel
// is warp-specialized as without persistent_blocks and the note ends
// "; not persistent: <why>".
// A kernel without a deferred wgmma whose TMA k-loop is [stage let, full
// wait, phase flip, a barrier, the refill, then compute whose wgmma units
// all end in wait_group 0] (FlashAttention) gets the same producer; the
// consumers run the statements before the loop, a named barrier, then per
// k-step the full wait, the compute and, at its end, the release of the
// stage (lane 0 of each warp); no barrier in the k-loop unless the compute
// writes shared memory (then a named one where the block barrier was);
// persistent as above. The file comment states the invariants and the refusals.
// With gemm_pingpong (GpuLowerOptions::gemm_pingpong) and persistent_blocks
// > 0, a deferred-wgmma GEMM whose block is one warpgroup (T = 128) becomes
// CUTLASS's ping-pong schedule (KernelTmaWarpSpecializedPingpong): two
// consumer warpgroups running alternate tiles of the block, one ring of
// stages (warp_specialize.cc, PingpongGemm, states the protocol); anywhere
// else the option is ignored and the note ends "; gemm_pingpong ignored:
// <why>". Composes with the bulk-store epilogue (per warpgroup).
// With persistent_ring (GpuLowerOptions::persistent_ring, opt-in) the persistent
// forms' ring of stages continues across tiles (k-step i of a tile uses stage
// (i + ring) % S, ring advancing by each tile's k-steps in both roles), so
// the producer fills the next tile's first stages under this tile's last
// k-steps; without it (or where a stage index is not the lowering's
// (k - k0) % S) every tile restarts at stage 0. The note says which.
std::string WarpSpecializeGemmPipeline(SimtKernel* k, int64_t shared_budget_bytes, bool enabled = true,
                                       int64_t persistent_blocks = 0, bool gemm_pingpong = false,
                                       bool persistent_ring = false);

// ---------------------------------------------------------------------------
// The persistent tile order (tile_order.cc; used by WarpSpecializeGemmPipeline's
// persistent form). The tiles are the grid's blocks: x = the first block
// index (extent X, grid[0]), r = the others flattened (extent R, the second
// varying fastest). A persistent block c of G runs the tiles t = c, c + G, ...
// in turn (a static round robin), and the order maps t to (x, r):
//   kBlockOrder  x = t % X, r = t / X (the launch's order, x fastest);
//   kSnake       r = t / X, x runs up for even r and down for odd r;
//   kDiagonal    r = t / X, x = (t % X + r) % X (the block order, shifted by r);
//   kSections    `section` consecutive r per section (section divides R),
//                sections in order; within one, x slowest, the section's r
//                fastest (all tiles of one x together);
// and in the others, x counts from the heaviest tile (x = 0, or X - 1 where
// `heaviest_last`). work[x] = the k-loop trip count of the tiles with first
// index x (the same for every r).
struct PersistentTileOrder {
  enum class Kind : uint8_t { kBlockOrder, kSnake, kDiagonal, kSections };
  Kind kind = Kind::kBlockOrder;
  int64_t section = 0;         // kSections: r per section
  bool heaviest_last = false;  // not kBlockOrder: the work grows with x
  bool operator==(const PersistentTileOrder&) const = default;
};
std::string PersistentTileOrderName(const PersistentTileOrder& o);  // "block order", "snake", "diagonal", "sections of 4"
// Tile t's (x, r) under `o`.
std::pair<int64_t, int64_t> PersistentTileOf(const PersistentTileOrder& o, int64_t X, int64_t R, int64_t t);
// The largest sum over the blocks' tiles of (work[x] + 1): the static round
// robin's makespan in k-steps (+ 1 per tile for what runs around the k-loop).
int64_t PersistentMakespan(const PersistentTileOrder& o, const std::vector<int64_t>& work, int64_t R, int64_t G);
// The most distinct r among any G consecutive tiles (what the blocks running
// at once read: FlashAttention's K and V of a head, a GEMM's panels).
int64_t PersistentWindowSpan(const PersistentTileOrder& o, int64_t X, int64_t R, int64_t G);
// The order for work[x] over X * R tiles on G blocks; the rule is stated at
// its definition (block order unless another is clearly better).
PersistentTileOrder ChoosePersistentTileOrder(const std::vector<int64_t>& work, int64_t R, int64_t G);
// The lets binding `block_vars` (i32) from the loop variable tl_tile under
// `o`, for the static `grid` (kBlockOrder: x = tl_tile % grid[0], then each
// further index from tl_tile / (the extents below it), the last unreduced).
SBlock PersistentTileLets(const std::vector<std::string>& block_vars, const std::vector<int64_t>& grid,
                          const PersistentTileOrder& o);

// ---------------------------------------------------------------------------
// WarpgroupPingpong (pingpong.cc; run by LowerToSimt after
// WarpSpecializeGemmPipeline when the program asked for it with
// T.warpgroup_pingpong(), SimtKernel::pingpong_requested)
// In: a kernel the synchronous-compute form warp-specialized with exactly
// two consumer warpgroups (256 consumer threads) and no named barrier in
// the consumers' k-loop. Out: the two warpgroups take turns issuing their
// k-step's first wgmma group(s) -- FlashAttention-3's warp scheduler
// barriers -- through named barriers kPingpongBarrier (warpgroup 0 waits
// on it) and kPingpongBarrier + 1 (warpgroup 1 waits), 256 threads each:
// before the first wgmma issue warpgroup w syncs on its own barrier, after
// the issue (before its wait_group) it arrives on the other's; warpgroup 0
// skips its sync at the first k-step, warpgroup 1 its arrival at the last,
// so every phase of both barriers gets exactly 128 syncing and 128
// arriving threads and none is left open at the loop's exit (pingpong.cc
// states the whole argument). A synchronous first wgmma is split into its
// issue (wait_pending -1), the arrival and wgmma.wait_group 0. Returns the
// note: applied, or "no warpgroup pingpong: <why>" with the kernel as it was.
inline constexpr int64_t kPingpongBarrier = 2;
// Notes: the lowering's for each GpuLowerOptions::tma_pre_copies copy (followed by "SRC -> DST on BAR"),
// WarpSpecializeGemmPipeline's where its producer took them.
inline constexpr const char* kPreTmaNote = "TMA before the pipeline: copy ";
inline constexpr const char* kProducerLoadsNote = "; the producer loads the tiles copied before the k-loop (";
std::string WarpgroupPingpong(SimtKernel* k);

// ---------------------------------------------------------------------------
// ClusterMulticast (cluster.cc; GpuLowerOptions::clusters, run by
// LowerToSimt after WarpSpecializeGemmPipeline where the kernel holds
// `hint cluster 2` at its top level)
// In: a kernel WarpSpecializeGemmPipeline warp-specialized (either form,
// persistent or not), `cluster` blocks per cluster (only 2 is supported).
// Out: SimtKernel::cluster = 2 (__cluster_dims__(2, 1, 1)); blocks 2j and
// 2j + 1 (persistent: tiles 2j and 2j + 1 of a block pair) are a cluster.
// Per k-step and per operand tile (the boxes into one stage buffer), the
// producer compares the box coordinates it issues with the ones its peer
// issues (the same lets evaluated for block / tile index ^ 1): where they
// are equal the two producers each load half of the tile (half of the boxes,
// or each box's half rows through a tensor map of half boxes) with
// multicast::cluster into both blocks' stage at the same offset, and each
// block's full barrier expects the whole tile's bytes; elsewhere each loads
// its own tile as before. Consumers release a stage on the empty barrier of
// both blocks (arrival count doubled), so a producer refills a stage only
// when both blocks are done with it. The barrier inits are followed by a
// cluster barrier (the peer's barriers exist before any remote arrival or
// multicast), and the kernel ends with one (no block exits while its peer
// may still write into it). Refused (the kernel unchanged, the returned note
// says why) unless: the kernel was warp-specialized; its grid is static
// with an even x extent (persistent: an even number of tiles and blocks);
// the k-loop's bounds do not depend on the block (both producers issue the
// same number of k-steps, the consumers release the same stages); the
// second top-level mbarrier is the full barrier's <full>_empty; a
// persistent tile loop starts at the x block index; every box coordinate
// that depends on the x block index (or tile) reads only lets of the
// elected producer thread (the ones given a peer copy). A run of boxes into
// one buffer is split between the ranks as whole boxes only where they all
// carry the same bytes (else each box's half rows).
// Returns the note ("cluster 2: ..." or "not clustered: ...").
std::string ClusterMulticast(SimtKernel* k, int64_t cluster);

}  // namespace tl::gpu
