// The Vulkan loader as the backend uses it: the instance with its entry
// points (vulkan_symbols.h), the per-device entry points, and what the probe
// learned about one physical device, handed to the device that launches on it.
//
// Ownership: an Instance is shared (std::shared_ptr) by the backend and every
// device, executable and stream created from it. The backend takes the
// process-wide one (ProcessInstance in vulkan_backend.cc, which says why), so
// in practice the VkInstance lives until the process exits; the destructor
// only runs for an instance that was never published. The loader library
// stays mapped (RTLD_NODELETE).
// Thread-safety: immutable after creation.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../../src/dynamic_library.h"
#include "vulkan_khr_local.h"

namespace tl::rt::vk {

struct Instance {
  std::unique_ptr<DynamicLibrary> library;
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define TL_VK_GLOBAL(name) PFN_##name name = nullptr;
#define TL_VK_INSTANCE(name) PFN_##name name = nullptr;
#define TL_VK_INSTANCE_OPTIONAL(name) PFN_##name name = nullptr;
#include "vulkan_symbols.h"
#undef TL_VK_GLOBAL
#undef TL_VK_INSTANCE
#undef TL_VK_INSTANCE_OPTIONAL
  VkInstance instance = VK_NULL_HANDLE;
  uint32_t api_version = 0;  // the instance's apiVersion
  ~Instance() {
    if (instance != VK_NULL_HANDLE && vkDestroyInstance) vkDestroyInstance(instance, nullptr);
  }
};

struct DeviceFns {
#define TL_VK_DEVICE(name) PFN_##name name = nullptr;
#define TL_VK_DEVICE_OPTIONAL(name) PFN_##name name = nullptr;
#include "vulkan_symbols.h"
#undef TL_VK_DEVICE
#undef TL_VK_DEVICE_OPTIONAL
};

// Everything probed about one physical device (feature structs with their
// pNext cleared, so that they can be copied and chained again).
struct PhysicalInfo {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  uint32_t ordinal = 0;  // index among the runtime's Vulkan devices
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceSubgroupProperties subgroup{};
  bool size_control = false;  // VkPhysicalDeviceSubgroupSizeControlProperties valid
  VkPhysicalDeviceSubgroupSizeControlProperties size_control_props{};
  VkPhysicalDeviceFeatures2 f2{};
  VkPhysicalDeviceVulkan11Features f11{};
  VkPhysicalDeviceVulkan12Features f12{};
  VkPhysicalDeviceVulkan13Features f13{};
  bool has_f12 = false;  // apiVersion >= 1.2
  bool has_f13 = false;  // apiVersion >= 1.3
  PhysicalDeviceCooperativeMatrixFeaturesKhr coopmat{};
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control_features{};  // VK_EXT_subgroup_size_control on 1.2
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{};
  std::set<std::string> extensions;
  VkPhysicalDeviceMemoryProperties memory{};
  int queue_family = -1;  // the first family with VK_QUEUE_COMPUTE_BIT
  uint32_t timestamp_valid_bits = 0;

  bool HasExtension(const char* name) const { return extensions.count(name) != 0; }
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)".
std::string ResultText(VkResult result);

}  // namespace tl::rt::vk
