// The per-thread SIMT IR: what the GPU lowering produces and the CUDA (and
// later HIP and SPIR-V) printers walk.
//
// A SimtKernel is the body ONE thread runs. There are no tile ops, no
// fragments and no layouts left: every buffer is global memory (a kernel
// parameter), a slice of the block's shared memory, or a per-thread register
// array; every access is `buffer[linear index]`. Cooperation between threads is
// explicit: Barrier (all threads of the block; only ever placed where every
// thread reaches it) and LaneReduce (butterfly shuffles among `width`
// consecutive lanes of a warp).
//
// Expressions are Tile IR expressions (tl::ir::Expr) with these conventions:
//   * a Load names a SimtBuffer and has exactly one index (linear, i32);
//   * VarRef "tl_tid" is the thread's linear index in the block (i32); the
//     block-index names of the Tile IR kernel are in scope everywhere;
//   * f16/bf16 values are carried in f32 arithmetic by the printers and
//     rounded to the dtype wherever they are stored or cast (documented
//     deviation: an f16 expression tree is evaluated in f32 with one rounding
//     per store, not one per operation).
// Register arrays are only indexed by expressions that become constants once
// the printer's `unroll` loops are unrolled (the lowering guarantees it for
// fragments; `local` buffers keep the user's indices).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/swizzle.h"

namespace tl::gpu {

enum class Space : uint8_t { kGlobal, kShared, kRegister };

struct SimtBuffer {
  std::string name;
  Space space = Space::kRegister;
  ir::DType dtype = ir::DType::kF32;
  int64_t elements = 0;       // shared and register buffers
  int64_t shared_offset = 0;  // bytes into the block's dynamic shared memory
  // Shared buffers: the logical shape (elements; the lowering's row padding
  // included) and the swizzle of a tensor-core operand tile (wgmma operands
  // on sm_90a). With swizzle != kNone the buffer [..., rows, cols] is stored
  // as panels of SwizzleRowBytes(swizzle) bytes per row (swizzle.h,
  // SwizzledElementByte): element (m, r, c) -- m the flattened leading
  // index -- is at byte SwizzledElementByte(swizzle, rows, cols, bytes, m, r,
  // c) from the buffer's start, and shared_offset is a multiple of
  // SwizzleAtomBytes(swizzle). Every access of the buffer (copies, TMA boxes,
  // epilogues, wgmma descriptors) goes through that function.
  std::vector<int64_t> shape;
  SmemSwizzle swizzle = SmemSwizzle::kNone;
  // Register buffers of f16/bf16 only: the `elements` 16-bit values are held
  // two per 32-bit register (elements / 2 registers, elements even), element
  // 2j in the low half of register j and 2j + 1 in the high half -- the
  // f16x2/bf16x2 form wgmma's register operand A takes. Written only by pair
  // stores (SStore with `hi`), read only as a register-A wgmma's a_frag whose
  // a_slots pair (2j, 2j + 1). Only ForwardCastIntoWgmmaA makes one (sm_90a);
  // printers without it must reject it.
  bool packed_pairs = false;
};

// A kernel parameter, in signature order: a pointer to global memory (tensor)
// or a scalar passed by value. After the function's parameters come its shape
// symbols (only with GpuLowerOptions::symbol_params): scalars with `symbol` =
// the index into ir::Function::symbols, whose values the runtime fills from
// the arguments' shapes (bundle ParamSlot.symbol). Every other param has
// symbol -1 and its index is the function's parameter index.
struct SimtParam {
  std::string name;
  ir::DType dtype = ir::DType::kF32;
  bool pointer = false;
  int symbol = -1;
};

struct SStmt;
using SBlock = std::vector<SStmt>;

// const scalar. `opaque` (32-bit integers; CUDA only, other printers print a plain let): the value goes
// through an `asm volatile` move, so the host compiler cannot treat it as loop-invariant -- nothing computed
// from it is hoisted out of the enclosing loop and kept live across it (warp_specialize.cc: the thread index
// re-read per persistent tile, which took the persistent FlashAttention consumers from 84-208 bytes of
// spills to none).
struct SLet { std::string name; ir::DType dtype; ir::Expr value; bool opaque = false; };
struct SVar { std::string name; ir::DType dtype; std::optional<ir::Expr> init; };  // mutable scalar
struct SAssign { std::string name; ir::Expr value; };
// value in buffer dtype. With `hi` (only into a SimtBuffer::packed_pairs buffer): a pair store, `index` is
// the register j and value / hi (f32) are elements 2j / 2j + 1, each rounded once to the buffer's dtype
// (round to nearest even; CUDA: one cvt.rn.{bf16x2,f16x2}.f32).
struct SStore { std::string buffer; ir::Expr index; ir::Expr value; std::optional<ir::Expr> hi = {}; };
// buffer[index] += value, atomically (global or shared). `more`: the values of the next elements,
// buffer[index + 1 + i] += more[i], as one vector atomic of 1 + more.size() elements where the target has
// one (CUDA: f32x2 on sm_90, f16x2, bf16x2 on sm_90); the lowering emits it only into a global buffer with
// `index` a multiple of the lanes and the base aligned (SimtKernel::param_align). A printer without vector
// atomics adds the elements one by one.
struct SAtomicAdd { std::string buffer; ir::Expr index; ir::Expr value; std::vector<ir::Expr> more = {}; };
struct SFor {
  std::string var;
  ir::Expr start, stop, step;
  bool unroll = false;  // trip count is a compile-time constant; printers fully unroll
  SBlock body;
};
struct SIf { ir::Expr cond; SBlock then_body, else_body; };
// `cluster` (sm_90a thread-block clusters, SimtKernel::cluster > 1; cluster.cc): a barrier of
// every thread of every block of the cluster (barrier.cluster.arrive.release + wait.acquire)
// instead of the block's threads; printed only by the CUDA printer.
struct SBarrier { bool cluster = false; };
// `var = op(var over the `width` consecutive lanes containing this thread)`;
// every lane of the group must execute it (no divergence around it). width is
// a power of two <= SimtKernel::warp_size; op is a ReduceOp's combiner (sum/max/min).
struct SLaneReduce { std::string var; ir::ReduceOp op; int64_t width; ir::DType dtype; };
struct SComment { std::string text; };

// Tensor-core operand/accumulator types of SMma (PTX mma.sync shapes):
//   kF16, kBF16: m16n8k16, f16/bf16 operands, f32 accumulator (C may be an
//                f16/bf16 buffer: its registers hold f32 like every 16-bit
//                register, the mma does not round; stores round as usual)
//   kTF32:       m16n8k8, f32 operands rounded to tf32 (cvt.rna), f32 accumulator
//   kI8:         m16n8k32, s8 operands, s32 accumulator
enum class MmaKind : uint8_t { kF16, kBF16, kTF32, kI8 };
int64_t MmaK(MmaKind k);  // 16, 16, 8, 32
const char* MmaKindName(MmaKind k);
// Turing (sm_75) has fewer mma.sync shapes (PTX ISA "Matrix shape"): f16 as
// m16n8k8 and s8 as m8n8k16 (two per 16-row tile: rows g and g + 8 of the
// C fragment below are each one m8n8 C); no bf16, no tf32. The k-step of
// `kind` with (sm75) or without those: kF16 8, kI8 16; else MmaK(kind).
int64_t MmaStepK(MmaKind kind, bool sm75);
// "m16n8k16", "m16n8k8", "m8n8k16", "m16n8k32" (the instruction SMma uses).
std::string MmaShapeName(MmaKind kind, bool sm75);

// One k-step of a warp's tensor-core GEMM (emitted only with
// GemmStrategy::kMmaSync; printers that do not know it must reject it).
// Warp-collective: every lane of every warp executes it, never under
// divergence. Per thread it means, with w = tl_tid / 32, l = tl_tid % 32,
// wm = R / 8 warp rows, wr = w % wm, wc = w / wm (C warp columns):
//   for j < m_tiles, h < 2, n < n_tiles, e < 2:
//     row = (2j + h) * R + wr * 8 + l / 4         (C fragment row)
//     col = (n * C + wc) * 8 + 2 * (l % 4) + e    (C fragment column)
//     c[(2j + h) * c_col_slots + 2n + e] += sum over kk < MmaStepK(kind, sm75) of
//         A(row, k0 + kk) * B(k0 + kk, col)
//   A(x, y) = a[a_base + x * a_row_stride + y * a_col_stride]   (shared)
//   B(x, y) = b[b_base + x * b_k_stride + y * b_n_stride]       (shared)
// i.e. C's layout is the FragmentLayout family with g = 4 lanes, v = 2 and C
// column blocks (MmaAccumulatorLayout): warp (wr, wc) reads A rows and B
// columns of its own only. Operands are rounded to the kind's input type
// (tf32 for kTF32); the accumulation is the hardware's.
struct SMma {
  MmaKind kind = MmaKind::kF16;
  std::string a, b, c;
  ir::Expr a_base, b_base, k0;  // i32 element offsets / first k
  int64_t a_row_stride = 0, a_col_stride = 0, b_k_stride = 0, b_n_stride = 0;
  int64_t m_tiles = 1, n_tiles = 1, R = 8, c_col_slots = 2;
  int64_t C = 1;  // warp columns
  // Turing instruction shapes (MmaStepK): the same per-thread meaning with a
  // k-step of 8 (kF16) or 16 (kI8); only kF16 and kI8 exist there.
  bool sm75 = false;
};

// AMD matrix cores: MFMA on CDNA (gfx90a, gfx94x; wavefront 64) and WMMA on
// RDNA3 (gfx11; wavefront 32), both 16x16 output tiles.
enum class MatrixCore : uint8_t { kMfma, kWmma };
const char* MatrixCoreName(MatrixCore c);  // "mfma", "wmma"
int64_t MatrixCoreWave(MatrixCore c);      // 64, 32
int64_t MatrixCoreRegs(MatrixCore c);      // P: accumulator registers per lane per 16x16 tile: 4, 8
// Elements of k per SAmdMma step: kI8 on MFMA 32 (one 16x16x32 i8 on gfx94x,
// two 16x16x16 i8 on gfx90a), everything else 16.
int64_t AmdMatrixK(MatrixCore c, MmaKind k);

// One k-step of a wavefront's matrix-core GEMM (emitted only with
// GemmStrategy::kMfma / kWmma; printers that do not know it must reject it).
// Wavefront-collective: every lane executes it, never under divergence. Per
// thread, with W = MatrixCoreWave(core), w = tl_tid / W, l = tl_tid % W,
// P = MatrixCoreRegs(core), H = W / 16:
//   for t < m_tiles, p < P, n < n_tiles:
//     row = (t * P + p) * R + w * H + l / 16
//     col = n * 16 + l % 16
//     c[(t * P + p) * c_col_slots + n] += sum over kk < AmdMatrixK(core, kind)
//         of A(row, k0 + kk) * B(k0 + kk, col)
//   A(x, y) = a[a_base + x * a_row_stride + y * a_col_stride]   (shared)
//   B(x, y) = b[b_base + x * b_k_stride + y * b_n_stride]       (shared)
// i.e. C's layout is the FragmentLayout family with g = 16 lanes, v = 1,
// R = T / 16 (AmdMatrixAccumulatorLayout). Which lane loads which operand
// element for which instruction is amd_matrix.h's (one definition, used by
// the HIP printer and the tests' wavefront simulation).
struct SAmdMma {
  MatrixCore core = MatrixCore::kMfma;
  MmaKind kind = MmaKind::kF16;  // kF16, kBF16, kI8
  std::string a, b, c;
  ir::Expr a_base, b_base, k0;
  int64_t a_row_stride = 0, a_col_stride = 0, b_k_stride = 0, b_n_stride = 0;
  int64_t m_tiles = 1, n_tiles = 1, R = 4, c_col_slots = 1;
};

// Hopper warpgroup MMA (PTX wgmma.mma_async, sm_90a; emitted only with
// GemmStrategy::kWgmma, printers that do not know it must reject it):
// k_steps consecutive k-steps (WgmmaK: 16 for f16/bf16, 32 for s8) of the
// block's gemm as one complete synchronous unit -- wgmma.fence, per warpgroup
// and k-step m_tiles x n_tiles wgmma.mma_async.m64{n}k16.f32 (m64{n}k32.s32
// for s8, K-major operands only) (all in
// flight together), commit_group, wait_group 0 -- so the accumulator
// registers and the operand buffers are free again when it ends.
// Block-collective: every thread executes it, never under divergence; the
// block's threads are `warpgroups` warpgroups of 128 stacked along M.
// The operands are read from swizzled shared buffers (SimtBuffer::swizzle)
// through matrix descriptors (wgmma.h): tile q of an operand in k-step s
// has the descriptor WgmmaDescriptor(smem base + starts[s] + q * tile_bytes,
// lbo, sbo, swizzle) and its transpose bit is `mn_major` (A: M-major, B:
// N-major).
// A's tile q holds 64 rows of C: warpgroup wg's m-tile j is tile
// j * warpgroups + wg; B's tile q holds n columns, q * n ... q * n + n - 1.
// Per thread t (wg = t / 128, wi = t % 128 / 32, l = t % 32), for j <
// m_tiles, q < n_tiles, i < n / 2 (the instruction's D register i), summed
// over the k-steps:
//   row = 64 (j warpgroups + wg) + 16 wi + 8 ((i / 2) % 2) + l / 4
//   col = q n + 8 (i / 4) + 2 (l % 4) + i % 2
//   c[(2 j + (i / 2) % 2) * c_col_slots + 2 (q n / 8 + i / 4) + i % 2]
//       += sum over kk < WgmmaK(kind) of A_s(row, kk) * B_s(kk, col)
// i.e. C has WgmmaAccumulatorLayout (layout.h); A_s and B_s are k-step s's
// columns / rows of the operands as the descriptors address them.
struct SWgmmaOperand {
  std::string buffer;        // the swizzled shared buffer (the tiles lie inside it)
  std::vector<ir::Expr> starts;  // per k-step: i32 bytes from the dynamic shared memory's start, tile 0
  int64_t tile_bytes = 0;    // start of tile q = start + q * tile_bytes
  int64_t lbo = 0, sbo = 0;  // descriptor strides (bytes)
  SmemSwizzle swizzle = SmemSwizzle::k128B;
  bool mn_major = false;     // the transpose bit
};
struct SWgmma {
  MmaKind kind = MmaKind::kF16;  // kF16, kBF16 (f32 accumulators), kI8 (s32)
  SWgmmaOperand a, b;
  std::string c;
  int64_t n = 8;  // N of one instruction (a multiple of 8, <= 256)
  int64_t m_tiles = 1, n_tiles = 1, warpgroups = 1, c_col_slots = 2;
  int64_t k_steps = 1;  // == a.starts.size() == b.starts.size()
  // wait_group N closing the unit: 0 (synchronous, as above), or 1 where
  // PipelineAsyncCopies deferred it (kWgmmaDeferHint): this unit's group stays
  // in flight, the previous one is retired. Its operands may be read and its
  // accumulator written until a later wait retires it: nothing may write the
  // operand bytes or touch the accumulator before that (an SWgmmaWait or the
  // next unit's wait). T.gemm(..., wg_wait=W) sets W: 1..7 as above, -1 no
  // wait at all (printed without wait_group; a later SWgmmaWait retires it),
  // nor may anything touch a register operand A (`a_frag`) before then.
  int64_t wait_pending = 0;
  // Register A (`a_frag` non-empty; then `a` is unused):
  // A is the f16/bf16 register fragment a_frag, given to each instruction
  // as four .b32 registers of two 16-bit elements (low half first): for
  // k-step s, m-tile j, register r < 4 and half h < 2 the fragment slot
  // a_slots[((s * m_tiles + j) * 4 + r) * 2 + h] (the PTX ISA's A fragment
  // of m64nNk16: lane l of warp w holds rows 16 w + l / 4 + 8 (r % 2),
  // columns 16 s + 2 (l % 4) + 8 (r / 2) + h).
  std::string a_frag;
  std::vector<int64_t> a_slots;
  // The first k-step's instructions run with scale-d = 0 (D = A * B, C not
  // read): the unit starts from a zero accumulator without a fill
  // (ZeroInitWgmmaAccumulators). Every m-tile and n-tile of that k-step
  // writes its own registers, together all of `c`.
  bool zero_init = false;
};
// wgmma.wait_group `pending`: at most `pending` of this warpgroup's groups
// stay in flight; the accumulators `c` (register fragments a deferred SWgmma
// wrote) are final after it when pending is 0. Block-collective, sm_90a.
struct SWgmmaWait {
  int64_t pending = 0;
  std::vector<std::string> c;
};

// `lanes` consecutive elements src[src_index + i] -> dst[dst_index + i] as
// one access of lanes * element bytes (4, 8 or 16), both buffers of one
// dtype, both indices multiples of `lanes`, global bases aligned
// (SimtKernel::param_align). Emitted only with GpuLowerOptions::vector_copies;
// printers that do not know it must reject it.
struct SCopyVec { std::string dst; ir::Expr dst_index; std::string src; ir::Expr src_index; int64_t lanes = 1; };

// A warp's stmatrix.sync.aligned.m8n8.x4.shared.b16 (sm_90; emitted only
// with GemmStrategy::kWgmma, for a staged wgmma epilogue; printers that do
// not know it must reject it): four 8x8 matrices of 16-bit elements from
// registers to shared memory. Warp-collective: every lane of the warp
// executes it, never under divergence. `buffer` is a shared f16/bf16
// buffer; lane l gives `index`, the element index of row l % 8 of matrix
// l / 8 (a multiple of 8: a 16-byte row), and `values` (8; stored rounded
// to the buffer's dtype, like SStore's value): values[2 m + e] is this
// lane's element (row l / 4, column 2 (l % 4) + e) of matrix m. So matrix
// m's row r -- the values[2 m], values[2 m + 1] of lanes 4 r ... 4 r + 3 --
// is stored at buffer[index of lane 8 m + r + 0 ... 7] (PTX ISA, "Warp-level
// matrix store instruction: stmatrix"; the same fragment as ldmatrix's).
struct SStmatrix { std::string buffer; ir::Expr index; std::vector<ir::Expr> values; };

// Asynchronous global -> shared copies (PTX cp.async, sm_80+; emitted only
// with GpuLowerOptions::async_copies, printers that do not know them must
// reject them). SCopyAsync starts moving `bytes` (4, 8 or 16) from
// src[src_index] to dst[dst_index] (dst shared, src global, both indices
// multiples of the access, global base aligned as for SCopyVec); where
// `src_valid` is false it writes zeros and reads nothing. The copy joins this
// thread's open group; SAsyncCommit closes the group; SAsyncWait{n} blocks
// until at most the n most recent closed groups of this thread are still in
// flight. Data is visible to other threads only after the wait and a barrier.
struct SCopyAsync {
  std::string dst;
  ir::Expr dst_index;
  std::string src;
  ir::Expr src_index;
  int64_t bytes = 16;
  std::optional<ir::Expr> src_valid;
};
struct SAsyncCommit {};
struct SAsyncWait { int64_t pending = 0; };

// TMA (sm_90: cp.async.bulk.tensor with mbarrier completion; emitted only
// with GpuLowerOptions::tma_copies, printers that do not know them must
// reject them). Tensor maps are SimtKernel::tensor_maps; mbarriers are u64
// elements of a shared buffer.
//
// SMbarInit: thread 0 initializes bar[0, count) with an arrival count of 1
// and fences the initialization; every thread then passes a block barrier
// (the node includes it), so all threads may use the barriers after it.
// `arrivals`: the arrival count of each barrier's phases (1 for a TMA
// stage's full barrier; the consumer warps for a warp-specialized pipeline's
// empty barriers).
struct SMbarInit { std::string bar; int64_t count = 1; int64_t arrivals = 1; };
// STmaLoad (run by ONE thread; the lowering guards it with tl_tid == 0):
// bar[bar_index] expects `bytes` more transaction bytes, then the box of
// tensor map `map` whose first element has the tensor coordinates `coords`
// (one per tensor dim, outermost first; coordinates may be negative or past
// the tensor's end: such elements are written as zeros) is copied to
// dst[dst_index ...] in shared memory: box elements in row-major box order,
// `TensorMapDesc::swizzle` applied to the byte offsets (swizzle.h), the
// buffer 128-byte aligned (SwizzleAtomBytes for swizzles). The bytes
// complete on bar[bar_index]; the data is visible to a thread once it has
// seen that phase complete (SMbarWait).
// With `multicast` (a cluster of 2, cluster.cc) the box lands at the same
// offset in the shared memory of BOTH blocks of the cluster and completes
// its bytes on bar[bar_index] of each (multicast::cluster, ctaMask 0b11);
// `bytes` is then what THIS block's barrier expects for this box and its
// peer's matching one.
struct STmaLoad {
  int map = 0;
  std::vector<ir::Expr> coords;
  std::string dst;
  ir::Expr dst_index;
  std::string bar;
  ir::Expr bar_index;
  int64_t bytes = 0;
  bool multicast = false;
};
// SMbarArrive (ONE thread): arrives on bar[index] (count 1: completes the
// phase's arrivals; the phase completes when the expected bytes have landed).
// With `each_thread`, every thread that executes it arrives once (a
// warp-specialized pipeline's consumers release a stage: lane 0 of each warp).
// With `peer` (a cluster of 2, cluster.cc) each arriving thread also arrives
// on bar[index] of the other block of the cluster (mapa + mbarrier.arrive.shared::cluster).
struct SMbarArrive { std::string bar; ir::Expr index; bool each_thread = false; bool peer = false; };
// SMbarWait (every thread): blocks until the phase of bar[index] with the
// given parity (0 or 1: phase number & 1) has completed.
struct SMbarWait { std::string bar; ir::Expr index; ir::Expr parity; };

// Bulk copies shared -> global without a tensor map (sm_90: PTX
// cp.async.bulk.global.shared::cta.bulk_group; emitted only by the
// warp-specialized GEMM's staged epilogue, GpuLowerOptions::bulk_store;
// printers that do not know them must reject them). SBulkStore (per thread,
// any number of threads) starts copying `bytes` (a multiple of 16) from
// src[src_index ...] (shared) to dst[dst_index ...] (a global tensor param),
// both addresses 16-byte aligned, through the async proxy: the threads that
// wrote the source publish it with fence.proxy.async before the barrier that
// orders the issue after their writes (a named barrier's `fence`). The copy
// joins this thread's open bulk group; SBulkCommit closes it; SBulkWait{n}
// blocks until at most the n most recent closed groups of this thread are
// pending -- with `read` only until their source reads are done (the shared
// memory may be written again), else until the global writes are complete.
// The source must not be written before the wait (.read) of its group.
struct SBulkStore {
  std::string dst;
  ir::Expr dst_index;
  std::string src;
  ir::Expr src_index;
  ir::Expr bytes;
};
// STmaStore (ONE thread; sm_90: cp.async.bulk.tensor.Nd.global.shared::cta
// .bulk_group; GpuLowerOptions::tma_store): a box of tensor map `map` whose
// first element has the tensor coordinates `coords` (outermost first) is
// copied from src[src_index ...] in shared memory -- box elements in
// row-major box order, `TensorMapDesc::swizzle` applied to the byte offsets,
// the source aligned as an STmaLoad destination -- to the tensor; box
// elements outside the tensor are not written (the engine clips them). It
// joins this thread's open bulk group like SBulkStore (same publication rule
// for the source, same commit and waits).
struct STmaStore {
  int map = 0;
  std::vector<ir::Expr> coords;
  std::string src;
  ir::Expr src_index;
  std::string dst;  // the tensor param the map describes (for passes asking which buffers a statement names)
};
struct SBulkCommit {};
struct SBulkWait {
  int64_t pending = 0;
  bool read = false;
};

// Warp specialization (sm_90a; GpuLowerOptions::warp_specialize,
// warp_specialize.cc). SWarpRoles splits the block: threads [0, consumers)
// run `consumer` (the program's own threads, tl_tid unchanged), threads
// [consumers, consumers + 128) -- one extra producer warpgroup -- run
// `producer`; the two roles run concurrently and meet only through
// mbarriers (no block barrier inside either). SSetMaxNReg (PTX
// setmaxnreg.{inc,dec}.sync.aligned.u32, warpgroup-collective) moves
// registers between the roles; SNamedBarrier is `bar.sync id, threads`
// among the threads that reach it (whole warps; here the consumers): a
// phase of barrier `id` completes once `threads` threads arrived, those
// that sync wait for it. With `arrive` it is `bar.arrive id, threads`: the
// warp counts towards the phase and goes on (WarpgroupPingpong's turn
// handover). `fence` (bar.sync only): on sm_90a a fence.proxy.async before
// it publishes the threads' shared-memory writes to the async proxy
// (wgmma); a barrier that orders only instruction issue has none.
struct SSetMaxNReg { bool inc = false; int64_t regs = 0; };
struct SNamedBarrier { int64_t id = 1; int64_t threads = 0; bool arrive = false; bool fence = true; };
// `consumer_groups` 2 (the ping-pong GEMM, GpuLowerOptions::gemm_pingpong):
// the consumers are two warpgroups that each run `consumer` on tiles of
// their own and meet only through mbarriers and named barriers (printed the
// same; the SIMT interpreter runs each group as an agent of its own, the
// wgmma groups a group issues retired by its own wait_group only).
struct SWarpRoles {
  int64_t consumers = 0;
  SBlock producer, consumer;
  int64_t consumer_groups = 1;
};

// A call of a device function of SimtKernel::sources (T.call_extern) by this
// thread; the result is discarded. An argument is a value (f16/bf16 values
// as the printer computes them, f32), or with `address` the address of
// buffer[value] (value: the element index) -- a shared or global buffer, or
// a register buffer listed in SimtKernel::addressed. Emitted only with
// GpuLowerOptions::extern_calls; printers that do not know it must reject it.
struct SExternArg {
  bool address = false;
  std::string buffer;  // address only
  ir::Expr value;
};
struct SCallExtern {
  std::string name;
  std::vector<SExternArg> args;
};

struct SStmt {
  std::variant<SLet, SVar, SAssign, SStore, SAtomicAdd, SFor, SIf, SBarrier, SLaneReduce, SComment, SMma, SCopyVec, SAmdMma,
               SCopyAsync, SAsyncCommit, SAsyncWait, SMbarInit, STmaLoad, SMbarArrive, SMbarWait, SWgmma, SCallExtern,
               SWgmmaWait, SSetMaxNReg, SNamedBarrier, SWarpRoles, SStmatrix, SBulkStore, STmaStore, SBulkCommit,
               SBulkWait>
      node;
};

// A tensor map (CUtensorMap) a TMA kernel takes as a __grid_constant__
// parameter after all SimtKernel::params; the runtime encodes it at launch
// from argument `param` (an index into params, a pointer param): the whole
// tensor (dims `shape`, dense row-major), boxes of `box` elements per dim
// (outermost first; 1 for dims a copy does not span), `swizzle` in shared
// memory, zeros for elements outside the tensor.
struct TensorMapDesc {
  int param = 0;
  std::vector<ir::Expr> shape;  // IntImm, or a shape-symbol VarRef
  std::vector<int64_t> box;
  SmemSwizzle swizzle = SmemSwizzle::kNone;
};

struct SimtKernel {
  std::string name;
  std::vector<SimtParam> params;
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t threads = 1;                  // block[0] * block[1] * block[2]
  std::vector<std::string> block_vars;  // bound to blockIdx.x/y/z
  std::vector<ir::Expr> grid;           // folded grid expressions
  std::vector<SimtBuffer> buffers;      // shared and register buffers (globals are params)
  int64_t shared_bytes = 0;             // dynamic shared memory per block
  int64_t warp_size = 32;               // GpuLowerOptions::warp_size: SLaneReduce widths are <= it
  SBlock body;
  std::vector<std::string> notes;       // decisions for the report (layouts, demotions, barriers)
  // Bytes a global param's base address must be a multiple of (SCopyVec
  // accesses); the bundle turns them into PTR_ALIGNED launch guards.
  std::map<std::string, int64_t> param_align;
  // TMA tensor maps (GpuLowerOptions::tma_copies), passed after `params`.
  std::vector<TensorMapDesc> tensor_maps;
  // T.import_source texts (ir::Function::sources), printed verbatim before
  // the kernel; SCallExtern calls into them.
  std::vector<std::string> sources;
  // Register buffers whose address an SCallExtern takes: held in memory
  // order and type (f16/bf16 as 16-bit patterns, not f32 registers), 16-byte
  // aligned, so the callee sees the elements as the buffer's dtype.
  std::set<std::string> addressed;
  // __launch_bounds__'s minimum blocks per SM (0: not given). A kernel with
  // SSetMaxNReg needs it: ptxas then fixes the registers at entry to
  // 65536 / (threads * min_blocks), the pool setmaxnreg redistributes.
  int64_t min_blocks = 0;
  // T.warpgroup_pingpong() (Tile IR `hint warpgroup_pingpong`) was in the
  // program: LowerToSimt runs WarpgroupPingpong after warp specialization.
  bool pingpong_requested = false;
  // Blocks per thread-block cluster along grid x (sm_90a; 1: no cluster).
  // > 1 only from ClusterMulticast (cluster.cc): the kernel is compiled with
  // __cluster_dims__(cluster, 1, 1), its static grid's x extent is a
  // multiple of it, and blocks 2j, 2j + 1 share shared memory traffic.
  int64_t cluster = 1;
  // (GpuLowerOptions::bulk_store) the bulk form of a staged wgmma epilogue's
  // copy `tile` -> global tensor (the copy itself stays as lowered, 16-byte
  // vector stores by every thread): warp 0's lanes issue one SBulkStore per
  // row of the tile (rows past the tensor skipped, a row's bytes clipped to
  // the columns that exist), then SBulkCommit; no wait. With
  // GpuLowerOptions::tma_store (a 128B-swizzled tile) thread 0 issues one
  // STmaStore per 64-column panel instead, then SBulkCommit. Only the
  // warp-specialized GEMM form uses it (warp_specialize.cc: it places the
  // waits); printers never see this field.
  struct BulkEpilogue {
    std::string tile, dst;
    SBlock issue;
  };
  std::vector<BulkEpilogue> bulk_epilogues;
};

// Human-readable dump (tests, --emit-source debugging).
std::string Dump(const SimtKernel& k);

}  // namespace tl::gpu
