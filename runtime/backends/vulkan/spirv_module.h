// What the Vulkan backend reads from a SPIR-V module before a driver sees it.
//
// Drivers accept malformed SPIR-V without complaint (ARCHITECTURE.md: seen on
// lavapipe), and pipeline creation reports a wrong entry point or a workgroup
// size above the limits as a bare VkResult at best. So the backend walks the
// module's words itself, bounds-checked: header (magic, version), the
// GLCompute entry point by name, its LocalSize, and a lower bound of the
// Workgroup (shared) memory its variables take (types packed without
// padding), which the limit checks compare with the device.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::rt::vk {

struct SpirvInfo {
  uint32_t version = 0;  // the header's version word: 0x00010300 for SPIR-V 1.3
  bool local_size_known = false;
  uint32_t local_size[3] = {1, 1, 1};  // LocalSize mode, or the WorkgroupSize built-in constant
  uint64_t workgroup_bytes = 0;       // lower bound of the Workgroup variables' size
  std::vector<std::string> compute_entry_points;  // every GLCompute entry point's name
};

// Parses `words` (little endian, as the bundle stores it) and finds the
// GLCompute entry point `entry_point`. Errors (INVALID_ARGUMENT, NOT_FOUND for
// a missing entry point, listing those present) start with `where`.
StatusOr<SpirvInfo> InspectSpirv(std::span<const uint8_t> words, const std::string& entry_point,
                                 const std::string& where);

}  // namespace tl::rt::vk
