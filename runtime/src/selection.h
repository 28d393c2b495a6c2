// Variant selection: a pure function of (device description, kernel variants,
// policy). No driver call, no code loaded, no candidate code run.
//
// Rules (ARCHITECTURE.md "Variant selection"):
//  1. Hard filter: backend, arch / ISA level, feature tokens, limits (threads
//     per block, shared memory, subgroup size, push constants), driver
//     version, PTX ISA version, TL_DISABLE_JIT. Every dropped variant gets
//     a reason with the numbers.
//  2. Rank the rest: native code before JIT, exact arch before a compatible
//     one (family, older minor, generic AMD target, lower ISA level), then
//     more specific (CUDA 'a' > 'f' > plain; AMD pinned xnack/sramecc before
//     "any"), then the higher arch / ISA level, more feature tokens, the
//     bundle's priority, and finally manifest order (stable).
//  3. Argument guards are evaluated at launch (validate.h), walking this
//     ranking.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device_desc.h"

namespace tl::rt {

// What selection needs of a variant (built from the manifest, or from JSON in
// the selection goldens).
struct VariantDesc {
  std::string id;
  int backend = kBackendUnknown;
  int code_kind = 0;  // tl_code_kind_t
  std::string arch;
  uint32_t isa_version = 0;
  uint32_t min_driver = 0;
  std::vector<std::string> features;
  uint32_t shared_bytes = 0;
  uint32_t threads_per_block = 0;
  uint32_t subgroup_size = 0;
  uint32_t push_constant_bytes = 0;
  int32_t priority = 0;
  bool has_guards = false;
};

struct SelectionPolicy {
  bool disable_jit = false;
  // Ids from TL_FORCE_VARIANT; applied when the kernel has a variant with
  // one of them.
  std::vector<std::string> force_variants;
};

struct RankedVariant {
  size_t index = 0;          // into the variants
  bool jit = false;          // PTX compiled by the driver
  std::string why;           // "native cubin, exact arch sm_90, arch-specific (a)"
  std::vector<int64_t> key;  // lexicographic, larger is better
};

struct Rejection {
  size_t index = 0;
  std::string reason;
};

struct Selection {
  std::vector<RankedVariant> ranked;  // best first; empty: nothing runs
  std::vector<Rejection> rejected;    // in manifest order
  std::string forced;                 // the TL_FORCE_VARIANT id applied, or ""
};

Selection SelectVariants(const DeviceDesc& device, const std::vector<VariantDesc>& variants,
                         const SelectionPolicy& policy);

// "kernel 'gemm' on cuda device 'NVIDIA H200' (sm_90): ..." with the chosen
// variant, the ranking and every rejection.
std::string ExplainSelection(const std::string& kernel_name, const DeviceDesc& device,
                             const std::vector<VariantDesc>& variants, const Selection& selection);

// INCOMPATIBLE status listing every variant and its rejection reason.
Status SelectionFailure(const std::string& kernel_name, const DeviceDesc& device,
                        const std::vector<VariantDesc>& variants, const Selection& selection);

// Helpers exposed for tests.
struct CudaArch {
  bool ok = false;
  bool ptx = false;  // "compute_XY" (virtual) vs "sm_XY"
  int major = 0;
  int minor = 0;
  char suffix = 0;   // 0, 'a' or 'f'
};
CudaArch ParseCudaArch(const std::string& arch);

struct AmdTarget {
  bool ok = false;
  std::string processor;  // "gfx90a" or a generic "gfx9-4-generic"
  int xnack = -1;         // 1 '+', 0 '-', -1 absent (any)
  int sramecc = -1;
};
AmdTarget ParseAmdTarget(const std::string& arch);
// Whether generic target `generic` ("gfx11-generic") covers `processor`.
bool AmdGenericCovers(const std::string& generic, const std::string& processor);

}  // namespace tl::rt
