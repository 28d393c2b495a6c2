// Compiler passes over verified Tile IR, shared by every backend.
//
// Each pass is a small unit with a stated input and output invariant. The
// CPU backend runs them in this order (see codegen/cpu/lower.cc):
//
//   Verify                      (compiler/ir)
//   CheckSingleKernel           one `kernel` statement per function
//   MakeRegionsExplicit         every tile-op region names all its dims
//   GuardTensorAccesses         element accesses of tensors guarded unless proven in bounds
//   LowerPipelinesSerial        no `pipelined` loop remains (CPU: serial)
//   InferLayoutsCpu             a layout record per shared/fragment/local buffer
//   InferParamAccess            read/write per tensor parameter (bundle signature)
//
// GPU lowering reuses the first two and the access inference unchanged, and
// adds its own layout inference (thread maps) and software pipelining; the
// records below are shaped so those fill in more fields rather than replace
// these types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"

namespace tl::passes {

// "@f: kernel at file.py:7: <what>" -- the prefix every pass diagnostic uses.
std::string Where(const ir::Function& f, const std::optional<ir::Loc>& loc, const char* what);

// ---------------------------------------------------------------------------
// CheckSingleKernel
// In: verified function. Out: unchanged; fails with kUnimplemented naming the
// second kernel's source line when the function holds more than one `kernel`
// statement (one bundle Kernel = one launch for now).
Status CheckSingleKernel(const ir::Function& f);

// In: verified function. Out: unchanged; fails with kUnimplemented at the
// first `call_extern` (T.call_extern into T.import_source'd CUDA source),
// naming the kernel, the extern function, its source line and `target`:
// only the CUDA backend compiles imported source.
Status RejectExternCalls(const ir::Function& f, const char* target);

// The function's only kernel statement (after CheckSingleKernel).
const ir::Kernel& TheKernel(const ir::Function& f);
const ir::Stmt& TheKernelStmt(const ir::Function& f);

// ---------------------------------------------------------------------------
// MakeRegionsExplicit (region inference)
// In: verified function. Out: every Region of copy/fill/gemm/reduce/cumsum/
// atomic_add has one RegionDim per buffer dimension and each has an extent
// that is an IntImm (whole-buffer regions become `0:DIM` for constant dims;
// a whole-buffer region of a tensor with a dynamic dim keeps `0:SYMBOL`...
// which is not constant, so tile ops on whole dynamic tensors are rejected
// here with the statement's line). Starts are constant-folded.
Status MakeRegionsExplicit(ir::Function& f);

// A resolved region for code generation: constant extents, and for each dim
// whether an edge guard is needed (a tensor dim whose range cannot be proven
// inside [0, DIM) at compile time). Shared/fragment/local regions are the
// user's duty and never guarded, matching the GPU backends.
struct RegionInfo {
  std::string buffer;
  ir::MemScope scope = ir::MemScope::kGlobal;
  ir::DType dtype = ir::DType::kF32;
  std::vector<ir::Expr> buffer_shape;  // IntImm or symbol VarRef
  std::vector<ir::Expr> starts;        // folded
  std::vector<int64_t> extents;
  std::vector<bool> guard;
  // Dims with extent > 1, in order: the region's "compact" shape, which is
  // what copy matches between its two sides.
  std::vector<int> kept_dims() const;
  bool any_guard() const;
};
// Precondition: MakeRegionsExplicit ran. Fails when the region is not explicit.
StatusOr<RegionInfo> ResolveRegion(const ir::Region& r, const ir::SymbolTable& symbols);

// ---------------------------------------------------------------------------
// GuardTensorAccesses (safe memory access; upstream's LegalizeSafeMemoryAccess)
// In: verified function. Out: every element access of a tensor parameter that
// cannot be proven inside the tensor's shape is guarded: a store (and a scalar
// `atomic_add`) is wrapped in `if IN_BOUNDS { ... }` and a load becomes
// `select(IN_BOUNDS, load, 0)`, IN_BOUNDS being `0 <= idx && idx < DIM` per
// unproven dim (DIM may be a dynamic symbol). So a partial tile at a tensor's
// edge (m = 100 with 32-row tiles) drops its writes and reads zeros instead of
// touching memory outside the tensor. Proof: intervals of block, loop and
// parallel indices and lets, narrowed by enclosing `if` conditions over
// immutable names; a user's own `if IDX < DIM` proves that access. Tile-op
// regions are not touched (backends guard them per element, RegionInfo);
// shared/fragment/local accesses are the program's duty (as upstream).
// Idempotent in effect: a second run proves its own guards' accesses only
// when the conditions say so, so run it once.
struct SafeAccessReport {
  int stores = 0;   // stores wrapped in a guard
  int loads = 0;    // loads turned into select(guard, load, 0)
  int atomics = 0;  // scalar atomic_adds wrapped in a guard
};
SafeAccessReport GuardTensorAccesses(ir::Function& f);

// ---------------------------------------------------------------------------
// LowerPipelinesSerial (pipelining, CPU flavour)
// In: verified function. Out: no For has kind kPipelined; each became a serial
// loop with the same bounds and body, so read/write order is the program's.
// On the CPU a block is one call with no asynchronous copies, so there is
// nothing to overlap: one stage is the exact and fastest schedule. The GPU
// pass keeps this record type and reports how many stages it applied.
struct PipelineDecision {
  std::string loop_var;
  int64_t requested_stages = 0;
  int64_t applied_stages = 1;
  std::string reason;
  std::optional<ir::Loc> loc;
};
std::vector<PipelineDecision> LowerPipelinesSerial(ir::Function& f);

// ---------------------------------------------------------------------------
// InferLayoutsCpu (layout inference, CPU flavour)
// In: verified function with explicit regions (MakeRegionsExplicit). Out: one
// BufferLayout per alloc. On the CPU a block is a single call, so the block
// owns every element of every fragment (`owner` is kBlock). The element order
// is dense row-major, except for a shared buffer whose only uses are
//   * whole-buffer copies into it from a rank-2 tensor of the same dtype, and
//   * whole-buffer operand A (or B) of gemms with an f32 accumulator and one
//     transpose flag,
// which gets kGemmPanelsA/B: it holds f32 microkernel panels (the layout the
// GEMM wants), so the copy packs straight from global memory and the gemm
// skips its own packing pass. GPU layout inference fills `owner =
// kThreadMap` and thread maps instead, starting from the same `forced_by` ops.
enum class LayoutOwner : uint8_t { kBlock, kThreadMap };
enum class ElementOrder : uint8_t { kRowMajor, kGemmPanelsA, kGemmPanelsB };
struct BufferLayout {
  std::string buffer;
  ir::MemScope scope = ir::MemScope::kShared;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements; row-major on the CPU
  int64_t elements = 0;
  LayoutOwner owner = LayoutOwner::kBlock;
  ElementOrder order = ElementOrder::kRowMajor;
  bool trans = false;          // panels: the gemm's trans_a / trans_b
  std::string order_reason;    // why the order was chosen (reports)
  // The ops that constrain this buffer (gemm operand/accumulator, reduce
  // output), for diagnostics; informational on the CPU.
  std::vector<std::string> forced_by;
};
struct LayoutPlan {
  std::map<std::string, BufferLayout> buffers;  // by name (sorted: deterministic output)
};
struct CpuLayoutOptions {
  bool gemm_panels = true;  // false: everything row-major (ablation, debugging)
};
StatusOr<LayoutPlan> InferLayoutsCpu(const ir::Function& f, const CpuLayoutOptions& options = {});

// ---------------------------------------------------------------------------
// InferParamAccess
// In: verified function. Out: one entry per parameter, in order. A tensor is
// read when a Load, a copy/reduce/cumsum/gemm/atomic source, or an atomic_add
// destination names it; written when a Store, copy/fill/reduce/cumsum
// destination or atomic_add destination names it. Scalars are kRead.
enum class Access : uint8_t { kNone = 0, kRead = 1, kWrite = 2, kReadWrite = 3 };
std::vector<Access> InferParamAccess(const ir::Function& f);

}  // namespace tl::passes

namespace tl::passes {

// ---------------------------------------------------------------------------
// CompileGridExpr
// In: a grid (or other launch-size) expression over integer constants,
// dynamic symbols and integer scalar parameters. Out: the bundle's GridExpr
// stack program (formats/bundle.fbs): 0 CONST k | 1 SYM s | 2 PARAM p | 3 ADD
// | 4 SUB | 5 MUL | 6 CEILDIV | 7 FLOORDIV | 8 MIN | 9 MAX | 10 FLOORMOD.
// Integer casts are transparent (the runtime evaluates in int64). Anything
// else (loads, floats, comparisons) fails naming the expression.
StatusOr<std::vector<int64_t>> CompileGridExpr(const ir::Expr& e, const ir::Function& f);

}  // namespace tl::passes
