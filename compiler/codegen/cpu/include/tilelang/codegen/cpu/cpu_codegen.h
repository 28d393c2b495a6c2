// The x86-64 CPU code generator: Tile IR function -> one self-contained C++
// source following the CPU kernel ABI (runtime/include/tilelang/cpu_kernel_abi.h).
//
// A `kernel` statement becomes one block function computing one block's tile
// as loop nests (T.Parallel -> `#pragma GCC ivdep` loops the host compiler
// vectorizes; T.gemm -> packed panels + register-blocked microkernel from the
// prelude). Shared/fragment buffers live in the per-worker scratch; small
// local arrays on the stack. The same source is compiled once per ISA level
// (-march=x86-64-v2/v3/v4): the prelude picks the microkernel from the
// predefined macros, so scratch is sized for the largest one.
//
// Thread-safety: functions here are pure.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/passes/passes.h"

namespace tl::codegen::cpu {

struct CpuKernel {
  std::string name;                      // bundle Kernel name = function name = entry point
  std::string source;                    // self-contained C++ (libc + libm only)
  uint64_t scratch_bytes = 0;            // per-worker scratch one block call needs
  std::array<uint32_t, 3> threads{1, 1, 1};
  std::vector<ir::Expr> grid;            // 1-3 folded grid expressions
  std::vector<passes::Access> access;    // per parameter
  std::vector<passes::PipelineDecision> pipelines;
  std::optional<ir::Loc> loc;            // the function's
  std::optional<ir::Loc> kernel_loc;     // the kernel statement's
};

// Verifies `f`, runs the passes (passes.h) and emits the source. Errors name
// the function and the Python source line of the offending statement.
struct CpuLowerOptions {
  passes::CpuLayoutOptions layout;
};
StatusOr<CpuKernel> LowerFunction(const ir::Function& f, const CpuLowerOptions& options = {});

// The embedded texts pasted into every source (for tests and --emit-source).
const char* CpuKernelAbiText();
const char* CpuPreludeText();

// Floats of GEMM packing scratch for an M x N x K tile, the maximum over the
// microkernel shapes of all ISA levels (4x8, 6x16, 8x32); matches the
// prelude's tl_gemm_pack_floats.
int64_t GemmPackFloats(int64_t m, int64_t n, int64_t k);
// Floats of a shared buffer stored as GEMM panels (passes::ElementOrder), the
// maximum over the ISA levels' microkernel shapes.
int64_t PanelFloats(const passes::BufferLayout& l);

}  // namespace tl::codegen::cpu
