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
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tilelang/ir/tile_ir.h"

namespace tl::gpu {

enum class Space : uint8_t { kGlobal, kShared, kRegister };

struct SimtBuffer {
  std::string name;
  Space space = Space::kRegister;
  ir::DType dtype = ir::DType::kF32;
  int64_t elements = 0;       // shared and register buffers
  int64_t shared_offset = 0;  // bytes into the block's dynamic shared memory
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

struct SLet { std::string name; ir::DType dtype; ir::Expr value; };            // const scalar
struct SVar { std::string name; ir::DType dtype; std::optional<ir::Expr> init; };  // mutable scalar
struct SAssign { std::string name; ir::Expr value; };
struct SStore { std::string buffer; ir::Expr index; ir::Expr value; };          // value in buffer dtype
struct SAtomicAdd { std::string buffer; ir::Expr index; ir::Expr value; };     // global or shared
struct SFor {
  std::string var;
  ir::Expr start, stop, step;
  bool unroll = false;  // trip count is a compile-time constant; printers fully unroll
  SBlock body;
};
struct SIf { ir::Expr cond; SBlock then_body, else_body; };
struct SBarrier {};
// `var = op(var over the `width` consecutive lanes containing this thread)`;
// every lane of the group must execute it (no divergence around it). width is
// a power of two <= 32; op is a ReduceOp's combiner (sum/max/min).
struct SLaneReduce { std::string var; ir::ReduceOp op; int64_t width; ir::DType dtype; };
struct SComment { std::string text; };

struct SStmt {
  std::variant<SLet, SVar, SAssign, SStore, SAtomicAdd, SFor, SIf, SBarrier, SLaneReduce, SComment> node;
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
  SBlock body;
  std::vector<std::string> notes;       // decisions for the report (layouts, demotions, barriers)
};

// Human-readable dump (tests, --emit-source debugging).
std::string Dump(const SimtKernel& k);

}  // namespace tl::gpu
