// ReadHsaco: the facts of an AMDGPU code object (HSACO), read without a GPU
// and without LLVM: the ELF header (machine, HSA OS ABI, code-object version,
// e_flags target features) and the NT_AMDGPU_METADATA note, a MessagePack
// map (AMDGPUUsage, "Code Object V4/V5 Metadata"), decoded by a small
// bounds-checked reader of our own.
//
// Used by the HIP code generator (the facts go into each variant's
// requirements, launch data and build_attrs) and by the runtime's HIP backend
// (the kernarg layout and target of a payload are checked before a byte of it
// reaches the driver: hipModuleLoadData takes no length).
//
// Every size, offset and count is checked against the image; malformed input
// gives kInvalidArgument (or kDataLoss for a truncated structure) with the
// offending offsets and sizes in the message. Never reads out of bounds,
// never recurses deeper than 32 levels.
//
// Thread-safety: pure functions over the caller's bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::formats {

// One entry of a kernel's `.args`: explicit (by_value, global_buffer, ...)
// or hidden (hidden_block_count_x, ...), as the compiler laid it out.
struct HsacoArg {
  uint32_t offset = 0;
  uint32_t size = 0;
  std::string value_kind;     // "by_value", "global_buffer", "hidden_..."
  std::string address_space;  // "global", ... ("" for by-value arguments)
  bool hidden() const { return value_kind.rfind("hidden_", 0) == 0; }
};

// A kernel's entry in amdhsa.kernels. Counts the note does not carry are -1.
struct HsacoKernel {
  std::string name;    // .name (the entry point for hipModuleGetFunction)
  std::string symbol;  // .symbol ("name.kd")
  std::vector<HsacoArg> args;
  int64_t kernarg_segment_size = -1;
  int64_t kernarg_segment_align = -1;
  int64_t group_segment_fixed_size = -1;    // static LDS bytes
  int64_t private_segment_fixed_size = -1;  // scratch bytes per work-item
  int64_t sgpr_count = -1, vgpr_count = -1, agpr_count = -1;
  int64_t sgpr_spill_count = -1, vgpr_spill_count = -1;
  int64_t max_flat_workgroup_size = -1;
  int64_t wavefront_size = -1;
  bool uses_dynamic_stack = false;
  // End of the last explicit argument: the bytes a caller's parameter buffer
  // (HIP_LAUNCH_PARAM_BUFFER_POINTER) must hold; hidden arguments follow and
  // are the runtime's.
  uint32_t ExplicitBytes() const;
};

struct HsacoInfo {
  int code_object_version = 0;  // from EI_ABIVERSION: 2 -> 4, 3 -> 5, 4 -> 6
  uint32_t e_flags = 0;
  // The processor ("gfx942") and its target-ID features from e_flags:
  // -1 unsupported by the processor, 0 off, 1 on, 2 any (not pinned).
  std::string processor;
  int xnack = -1;
  int sramecc = -1;
  std::string metadata_target;  // amdhsa.target, "amdgcn-amd-amdhsa--gfx90a:xnack-"
  std::vector<HsacoKernel> kernels;

  // The target ID as the runtime's selection spells it: the processor, then
  // ":sramecc±" and ":xnack±" for pinned modes only ("gfx942:xnack-").
  std::string TargetId() const;
  const HsacoKernel* Find(const std::string& name) const;
};

// Parses an AMDGPU code object (a bare ELF, not a clang offload bundle).
StatusOr<HsacoInfo> ReadHsaco(std::span<const uint8_t> image);

}  // namespace tl::formats
