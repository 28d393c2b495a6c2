// DeviceDesc: everything variant selection and launch validation know about a
// device, probed once per device (or read from a JSON golden in tests).
//
// Selection is a pure function of (DeviceDesc, variants), so every rule is
// testable without the hardware: tests/runtime/goldens/devices/*.json hold
// descriptions of devices we do not have (B200, MI300X, ...).
// Thread-safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json.h"
#include "tilelang/formats/status.h"

namespace tl::rt {

// Values equal tl_backend_t and tl::bundle::Backend.
enum BackendKind : int { kBackendUnknown = 0, kBackendCuda = 1, kBackendHip = 2, kBackendVulkan = 3, kBackendCpu = 4 };
inline constexpr int kBackendCount = 5;
const char* BackendName(int backend);  // "cuda", "hip", "vulkan", "cpu", "unknown"
int BackendFromName(std::string_view name);  // kBackendUnknown when unknown

struct DeviceLimits {
  uint64_t max_shared_bytes = 0;      // per block (opt-in maximum on CUDA); per-thread scratch on the CPU
  uint32_t max_threads_per_block = 0;
  uint32_t max_block[3] = {0, 0, 0};
  uint32_t max_grid[3] = {0, 0, 0};
  uint32_t max_push_constant_bytes = 0;  // Vulkan
  uint32_t subgroup_min = 0;             // Vulkan subgroup size range (0: unknown)
  uint32_t subgroup_max = 0;
};

struct DeviceDesc {
  int backend = kBackendUnknown;
  std::string name;
  // Derived by Finalize(): "sm_90", "gfx90a:sramecc+:xnack-", "x86-64-v4", "spirv1.6".
  std::string arch;
  uint64_t memory_bytes = 0;
  uint32_t driver_version = 0;  // CUDA driver API version (13000), HIP runtime, Vulkan apiVersion
  uint32_t compute_units = 0;
  uint32_t flags = 0;           // TL_DEVICE_FLAG_*
  DeviceLimits limits;

  // CUDA.
  int cc_major = 0;
  int cc_minor = 0;
  uint32_t max_ptx_isa = 0;  // PTX ISA x10 the driver JIT accepts; 0: derived from driver_version

  // HIP. Modes: 1 on, 0 off, -1 the processor has no such mode.
  std::string processor;     // "gfx942"
  int xnack = -1;
  int sramecc = -1;

  // Vulkan: apiVersion in driver_version; supported feature and extension
  // tokens ("vk.feature.shaderFloat16", "vk.ext.VK_KHR_cooperative_matrix").
  std::vector<std::string> vk_features;

  // CPU: raw CPUID flag names ("avx2", "avx512f", "osxsave") and XCR0. The
  // usable set and the ISA level are derived from both by Finalize(): a flag
  // the OS does not enable in XCR0 is not usable (AVX-512 on some VMs).
  std::vector<std::string> cpuid;
  uint64_t xcr0 = 0;
  std::string cpu_arch = "x86-64";  // host architecture family
  // Derived.
  int cpu_isa_level = 0;                  // 1..4 (x86-64, -v2, -v3, -v4)
  std::vector<std::string> cpu_features;  // usable: "cpu.x86.avx2", ...
  std::string cpu_note;                   // "AVX-512 in CPUID but not enabled by the OS (XCR0 0x7)"

  // Fills the derived fields; called by the probes and by FromJson.
  void Finalize();
};

// The JSON form (see tests/runtime/goldens/README.md). Unknown keys are an
// error, so a typo in a golden cannot silently fall back to a default.
StatusOr<DeviceDesc> DeviceDescFromJson(const json::Value& value);
std::string DeviceDescToJson(const DeviceDesc& desc);

// The PTX ISA version (x10) a CUDA driver API version accepts; drivers newer
// than the table get the newest known value.
uint32_t MaxPtxIsaForDriver(uint32_t driver_version);

// SPIR-V version (x10) a Vulkan apiVersion guarantees (1.0 -> 10, 1.1 -> 13,
// 1.2 -> 15, 1.3+ -> 16), raised to 14 by VK_KHR_spirv_1_4.
uint32_t MaxSpirvVersion(uint32_t api_version, const std::vector<std::string>& features);

}  // namespace tl::rt
