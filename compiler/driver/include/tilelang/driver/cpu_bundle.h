// The CPU build pipeline behind `tl-pack compile` and `tl-pack build`:
// Tile IR functions -> CPU code generation -> host compiler per ISA level
// (parallel, cached) -> one bundle with a Kernel per function and a Variant
// per ISA level.
//
// Determinism: the bundle holds no timestamps, host names or compile times;
// kernels are sorted by the writer and variants are added in ISA order, so
// the same inputs and compiler give byte-identical bundles.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/codegen/cpu/cpu_codegen.h"
#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/toolchain/host_compiler.h"

namespace tl::formats {
class BundleWriter;
}

namespace tl::driver {

struct CpuBuildOptions {
  std::vector<toolchain::IsaLevel> targets = {toolchain::IsaLevel::kV2, toolchain::IsaLevel::kV3,
                                              toolchain::IsaLevel::kV4};
  toolchain::HostCompilerOptions compiler;
  int jobs = 0;                   // parallel compiles; 0: all cores
  std::string emit_source_dir;    // when set, writes <dir>/<kernel>.cc
  std::function<void(const std::string&)> log;  // progress lines (serialized); may be null
  // Adds variants of other backends to each kernel before it is packed
  // (`tl-pack compile --target cpu,cuda`); may be null.
  std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)> extra_variants;
};

// The bundle's DLPack dtype triple for a Tile IR dtype.
tl::bundle::DType ToBundleDType(ir::DType t);

// The bundle Kernel for a lowered function: signature (params with dtype,
// rank, static dims or symbol indices, access, alignment), symbols and source
// location; no variants yet.
std::unique_ptr<tl::bundle::KernelT> MakeKernelSignature(const ir::Function& f,
                                                          const codegen::cpu::CpuKernel& lowered);

// The Variant for one ISA level (payload index filled in by the caller).
StatusOr<std::unique_ptr<tl::bundle::VariantT>> MakeCpuVariant(const ir::Function& f,
                                                                const codegen::cpu::CpuKernel& lowered,
                                                                toolchain::IsaLevel isa,
                                                                const toolchain::HostCompiler& cc);

// Lowers, compiles and packs. Fails on the first kernel that does not lower
// (naming function and source line) or, after all compiles finished, with
// every compile failure (naming kernel, target and source line).
StatusOr<std::vector<uint8_t>> BuildCpuBundle(const std::vector<ir::Function>& functions,
                                              const CpuBuildOptions& options);

}  // namespace tl::driver
