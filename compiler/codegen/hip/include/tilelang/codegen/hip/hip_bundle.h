// HIP variants for the bundle: per kernel one HSACO per requested AMDGPU
// target ID (default gfx90a, gfx942, gfx1100), compiled in parallel.
//
// Each variant carries what the code object's metadata says, so that the
// runtime can select and launch without reading the ELF, and can cross-check
// when it does:
//   requires.arch         the target ID as built: processor + pinned modes
//                         ("gfx90a", "gfx942:xnack-"); "any" modes are left out
//   requires.isa_version  the code-object version (5 by default)
//   requires.shared_bytes group_segment_fixed_size (static LDS; <= 64 KiB)
//   requires.threads_per_block, requires.subgroup_size (the wavefront size)
//   launch                block, grid expressions, static_shared_bytes, no
//                         dynamic LDS, warp_size = wavefront size,
//                         param_slots / param_buffer_bytes = the explicit
//                         kernargs (checked against the metadata's .args)
//   build_attrs           hsaco.* (code object version, target, kernarg
//                         segment size/align, LDS, scratch, SGPR/VGPR/AGPR
//                         counts, spills, wavefront size, max workgroup
//                         size, dynamic stack), hip.compiler, gpu.note.N
// Variant ids: "hip." + the target ID with ':' as '.' ("hip.gfx942.xnack-").
//
// Thread-safety: MakeHipVariants may run concurrently for different
// functions (the writer must then be guarded by the caller, as the CPU
// driver's extra_variants hook does).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/codegen/hip/hip_codegen.h"
#include "tilelang/codegen/hip/hip_toolchain.h"
#include "tilelang/formats/status.h"
#include "tilelang/formats/writer.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::codegen::hip {

struct HipBuildOptions {
  std::vector<std::string> targets = {"gfx90a", "gfx942", "gfx1100"};
  int code_object_version = 5;
  std::string emit_source_dir;  // writes <dir>/<kernel>.wave<N>[.mfma|.wmma].hip
  std::function<void(const std::string&)> log;
  // T.gemm on matrix cores where the target has them (HipGemmStrategy);
  // false: SIMT FMA everywhere.
  bool matrix_cores = true;
};

// How T.gemm is lowered for an AMDGPU target ID: kMfma on gfx90a and gfx94x
// (CDNA2/3: f16, bf16_1k and i8 MFMA), kWmma on gfx11 (RDNA3 wave32 WMMA),
// kSimtFma elsewhere (gfx908's bf16 MFMA is another instruction, gfx12's WMMA
// another operand layout; neither is emitted).
gpu::GemmStrategy HipGemmStrategy(const std::string& target);

// Splits a --target list: "hip" = gfx90a,gfx942,gfx1100; "gfxNNN[:feature±]"
// adds one target ID; "hip-cov4" switches to code object v4. Other items are
// returned in `rest` (comma-joined) for the next parser; `any` says whether
// a HIP target was named. Bad target IDs are errors naming the item.
struct SplitHipTargetsResult {
  HipBuildOptions hip;
  bool any = false;
  std::string rest;
};
StatusOr<SplitHipTargetsResult> SplitHipTargets(const std::string& list);

// Lowers (once per wavefront size and GEMM strategy), prints and compiles `f` for every target;
// adds payloads to `writer`; returns the variants.
StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeHipVariants(const ir::Function& f,
                                                                             const HipToolchain& tc,
                                                                             const HipBuildOptions& options,
                                                                             formats::BundleWriter& writer);

// A bundle with HIP variants only.
StatusOr<std::vector<uint8_t>> BuildHipBundle(const std::vector<ir::Function>& functions, const HipBuildOptions& options,
                                              const HipToolchainOptions& toolchain = {});

}  // namespace tl::codegen::hip
