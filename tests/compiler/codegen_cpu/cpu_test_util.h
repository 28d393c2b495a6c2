// Helpers for the CPU code generator tests: build a Tile IR function into a
// shared object for one ISA level, load it with dlopen (no runtime needed),
// run every block of a launch on several threads, and host-side references.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tilelang/codegen/cpu/cpu_codegen.h"
#include "tilelang/cpu_kernel_abi.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/toolchain/host_compiler.h"

namespace tl::cputest {

using toolchain::IsaLevel;

// ISA levels this machine can execute (v2 always; v3/v4 by CPUID).
std::vector<IsaLevel> RunnableIsas();
bool CanRun(IsaLevel isa);

// The test cache (a build-tree directory), so re-running tests recompiles nothing.
toolchain::HostCompilerOptions TestCompilerOptions();

struct LoadedKernel {
  ~LoadedKernel();
  ir::Function function;
  codegen::cpu::CpuKernel lowered;
  IsaLevel isa = IsaLevel::kV2;
  void* handle = nullptr;
  const tl_cpu_library_t* library = nullptr;
  const tl_cpu_kernel_t* kernel = nullptr;
};

// Parses `tir` (a module with one function), lowers, compiles for each ISA in
// `isas` (in parallel) and loads. Fails with the first error.
StatusOr<std::vector<std::unique_ptr<LoadedKernel>>> BuildKernels(const std::string& tir,
                                                                   const std::vector<IsaLevel>& isas,
                                                                   const codegen::cpu::CpuLowerOptions& options = {});

// Evaluates the kernel's grid (GridExpr programs) for the given symbols and
// scalar arguments, then runs every block on `threads` threads, each with its
// own 64-byte aligned scratch. Returns the first nonzero block status.
int Launch(const LoadedKernel& k, const std::vector<void*>& args, const std::vector<int64_t>& symbols,
           int threads = 3);

// Host references, independent of the prelude's code.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);        // round to nearest even (F16C)
float Bf16ToFloat(uint16_t h);
uint16_t FloatToBf16(float f);        // round to nearest even

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

}  // namespace tl::cputest
