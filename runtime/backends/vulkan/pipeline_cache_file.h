// The on-disk form of a device's VkPipelineCache, so that a second process
// (or runtime) preparing the same kernels skips the driver's shader compile.
//
// One file per device identity, in the runtime's private cache directory
// (tl_runtime_options_t.cpu_cache_dir, else $XDG_CACHE_HOME/tilelang or
// $HOME/.cache/tilelang, mode 0700, see backends/cpu/shared_object.h):
//   vulkan-pipelines-<pipelineCacheUUID>-<vendorID>-<deviceID>-<driverVersion>.bin
// holding a 24-byte header ("TLVKPC01", u64 data size, u32 CRC32C of the
// data, u32 0) and the driver's cache data. Drivers check the data's own
// header loosely and its body not at all, so a file is used only when it is
// complete, its checksum holds and the Vulkan header inside
// (VkPipelineCacheHeaderVersionOne) names this device; anything else is
// ignored with a note (never an error: the cache is an optimisation).
// Writes go to a temporary file renamed over the old one.
// Thread-safety: pure functions over files; concurrent writers of one path
// each leave a complete file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "vulkan_khr_local.h"

namespace tl::rt::vk {

std::string PipelineCacheFileName(const VkPhysicalDeviceProperties& props);

// The driver data of `path` when usable for `props`, else empty; `note` says
// which ("read 12345 bytes from ...", "no file ...", "ignored ...: checksum").
std::vector<uint8_t> ReadPipelineCacheFile(const std::string& path, const VkPhysicalDeviceProperties& props,
                                           std::string* note);

Status WritePipelineCacheFile(const std::string& path, std::span<const uint8_t> data);

}  // namespace tl::rt::vk
