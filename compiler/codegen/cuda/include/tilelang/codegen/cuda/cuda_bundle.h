// CUDA variants for the bundle: per kernel a cubin for every requested arch
// and compute_80 PTX (the forward-compatible fallback), with launch data
// (block, grid expressions, dynamic shared memory, param slots matching the
// printed signature) and the ptxas resource report in build_attrs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/formats/status.h"
#include "tilelang/formats/writer.h"
#include "tilelang/ir/tile_ir.h"

namespace tl::codegen::cuda {

struct CudaBuildOptions {
  std::vector<std::string> archs = {"sm_80", "sm_89", "sm_90a"};  // cubins
  bool ptx = true;                                                 // + compute_80 PTX
  // Whether the PTX was named ("ptx" / "compute_80") rather than implied by an
  // "sm_XX" or "cuda" item. An implied PTX is dropped (with a note in the
  // sm_90a variant's build_attrs and the log) when it alone cannot be lowered
  // for lack of shared memory and sm_90a, the only cubin asked for, can: its
  // own lowering has 227 KiB, the PTX the 163 KiB every sm_80-class device
  // has. A named PTX, or any other arch, still fails the build.
  bool ptx_named = false;
  std::string emit_source_dir;                                     // writes <dir>/<kernel>.cu
  bool tf32 = false;  // f32 x f32 gemms on tensor cores as tf32 (lossy; else SIMT FMA)
  // sm_90a: pipelined global -> shared copies as TMA (tensor maps the runtime
  // encodes at launch, mbarriers); the other archs and the PTX keep cp.async.
  bool tma = true;
  // sm_90a: T.gemm on wgmma (warpgroup MMA from swizzled shared operands)
  // where it fits; the other archs and the PTX keep mma.sync.
  bool wgmma = true;
  std::function<void(const std::string&)> log;
};

// Splits a --target list: "cuda" = sm_80,sm_89,sm_90a + PTX; "sm_XX[a]" adds
// one cubin (and the PTX); "ptx"/"compute_80" adds the PTX alone. Items that
// are not CUDA targets are returned in `rest` (comma-joined) for the CPU
// parser; `any` says whether a CUDA target was named.
struct SplitTargets {
  CudaBuildOptions cuda;
  bool any = false;
  std::string rest;
};
SplitTargets SplitCudaTargets(const std::string& list);

// Lowers, prints and compiles `f`; adds payloads to `writer`; returns the
// variants (ids "cuda.sm_90a", "cuda.compute_80").
StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeCudaVariants(const ir::Function& f,
                                                                               const CudaToolchain& tc,
                                                                               const CudaBuildOptions& options,
                                                                               formats::BundleWriter& writer);

// A bundle with CUDA variants only.
StatusOr<std::vector<uint8_t>> BuildCudaBundle(const std::vector<ir::Function>& functions,
                                               const CudaBuildOptions& options);

}  // namespace tl::codegen::cuda
