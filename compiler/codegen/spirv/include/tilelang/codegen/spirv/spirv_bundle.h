// Vulkan (SPIR-V) variants for the bundle, as VULKAN_CONTRACT.md fixes them:
// per kernel a plain SPIR-V 1.3 variant (lane reductions through workgroup
// memory: any device, any subgroup size) and, when the kernel has lane
// reductions, a "subgroup" variant that requires "vk.subgroup.shuffle" and
// ranks above it (one more feature token); and, when the kernel's T.gemm runs
// as tensor-core k-steps (GemmStrategy::kMmaSync: f16 x f16 -> f32), a
// "coopmat" variant (VK_KHR_cooperative_matrix 16x8x16) that requires
// kCoopmatToken, vulkanMemoryModel and subgroup size 32, and ranks above both.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/formats/status.h"
#include "tilelang/formats/writer.h"
#include "tilelang/ir/tile_ir.h"

namespace tl::codegen::spirv {

struct SpirvBuildOptions {
  bool subgroup_variant = true;            // add the vk.subgroup.shuffle variant where it differs
  int64_t shared_budget_bytes = 48 * 1024; // NVIDIA's Vulkan limit; lavapipe has 32 KiB (the runtime checks)
  std::string emit_source_dir;             // writes <dir>/<kernel>.spvasm (the plain variant, disassembled)
  std::function<void(const std::string&)> log;
  // Tests only: leave out the plain variant, and give the subgroup variant
  // this token instead of "vk.subgroup.shuffle" ("" = none), so a runtime
  // that reports no vk.subgroup.* tokens still runs the shuffle path.
  bool plain_variant = true;
  std::string subgroup_token = "vk.subgroup.shuffle";
  // Add the cooperative-matrix variant where the kernel's gemms fit it.
  bool cooperative_matrix = true;
  // Tests: emit that variant with the matrix instructions emulated
  // (SpirvOptions::cooperative_matrix_emulated) as "vulkan.spirv1.3.coopmat_emulated",
  // requiring nothing the plain variant does not, so lavapipe selects and runs
  // it. Also on when $TL_SPIRV_COOPMAT_EMULATED=1 (tl-pack run by tests).
  bool cooperative_matrix_emulated = false;
};

// Splits a --target list: "vulkan", "spirv" and "spirv1.3" name the SPIR-V
// backend; everything else is returned in `rest` (comma-joined).
struct SplitSpirv {
  SpirvBuildOptions spirv;
  bool any = false;
  std::string rest;
};
SplitSpirv SplitSpirvTargets(const std::string& list);

// Lowers `f` (shape symbols become push constants), emits, validates and
// optimizes; adds payloads to `writer`; returns the variants
// ("vulkan.spirv1.3", "vulkan.spirv1.3.subgroup", "vulkan.spirv1.3.coopmat").
StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeSpirvVariants(const ir::Function& f,
                                                                                const SpirvBuildOptions& options,
                                                                                formats::BundleWriter& writer);

// A bundle with SPIR-V variants, plus whatever `extra` adds to each kernel
// (e.g. CUDA variants); `extra` may be null.
StatusOr<std::vector<uint8_t>> BuildSpirvBundle(
    const std::vector<ir::Function>& functions, const SpirvBuildOptions& options,
    const std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)>& extra = nullptr);

}  // namespace tl::codegen::spirv
