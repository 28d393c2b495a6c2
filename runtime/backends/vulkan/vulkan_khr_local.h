// Vulkan definitions newer than Debian 12's headers (1.3.239), written here
// from the Vulkan specification (VK_KHR_cooperative_matrix, spec revision 2;
// VK_KHR_shader_bfloat16 for the bfloat16 component type). Values are part of
// the API's binary interface and never change once published.
// Thread-safety: declarations only.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan_core.h>

namespace tl::rt::vk {

// VkStructureType values of VK_KHR_cooperative_matrix.
inline constexpr VkStructureType kStructPhysicalDeviceCooperativeMatrixFeaturesKhr =
    static_cast<VkStructureType>(1000506000);
inline constexpr VkStructureType kStructCooperativeMatrixPropertiesKhr = static_cast<VkStructureType>(1000506001);

// VkComponentTypeKHR (0..10 equal VkComponentTypeNV of the older NV extension).
enum ComponentTypeKhr : int32_t {
  kComponentFloat16 = 0,
  kComponentFloat32 = 1,
  kComponentFloat64 = 2,
  kComponentSint8 = 3,
  kComponentSint16 = 4,
  kComponentSint32 = 5,
  kComponentSint64 = 6,
  kComponentUint8 = 7,
  kComponentUint16 = 8,
  kComponentUint32 = 9,
  kComponentUint64 = 10,
  kComponentBfloat16 = 1000141000,
};

// VkScopeKHR.
enum ScopeKhr : int32_t { kScopeDevice = 1, kScopeWorkgroup = 2, kScopeSubgroup = 3, kScopeQueueFamily = 5 };

struct PhysicalDeviceCooperativeMatrixFeaturesKhr {
  VkStructureType sType;
  void* pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
};

struct CooperativeMatrixPropertiesKhr {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize;
  uint32_t NSize;
  uint32_t KSize;
  int32_t AType;  // ComponentTypeKhr
  int32_t BType;
  int32_t CType;
  int32_t ResultType;
  VkBool32 saturatingAccumulation;
  int32_t scope;  // ScopeKhr
};

using PFN_GetPhysicalDeviceCooperativeMatrixPropertiesKhr = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*,
                                                                                  CooperativeMatrixPropertiesKhr*);

// "f16", "bf16", "f32", "s8", ... ; nullptr for a type the token spelling
// (VULKAN_CONTRACT.md) has no name for.
inline const char* ComponentTypeToken(int32_t type) {
  switch (type) {
    case kComponentFloat16: return "f16";
    case kComponentBfloat16: return "bf16";
    case kComponentFloat32: return "f32";
    case kComponentFloat64: return "f64";
    case kComponentSint8: return "s8";
    case kComponentSint16: return "s16";
    case kComponentSint32: return "s32";
    case kComponentSint64: return "s64";
    case kComponentUint8: return "u8";
    case kComponentUint16: return "u16";
    case kComponentUint32: return "u32";
    case kComponentUint64: return "u64";
    default: return nullptr;
  }
}

}  // namespace tl::rt::vk

// The loader's name for the entry point (vulkan_symbols.h).
using PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR = tl::rt::vk::PFN_GetPhysicalDeviceCooperativeMatrixPropertiesKhr;
