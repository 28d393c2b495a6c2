// The manifest's view of a kernel, converted once at bundle open into the
// plain structures that selection (selection.h) and launch validation
// (validate.h) work on. The reader (formats/) has already verified the
// flatbuffer and every index; this adds the agreements validation relies on
// (rank == number of dims, block and grid of 3 values).
// Thread-safety: plain data.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "bundle_generated.h"
#include "selection.h"
#include "validate.h"

namespace tl::rt {

struct VariantLaunch {
  std::vector<GuardDesc> guards;
  uint32_t block[3] = {1, 1, 1};
  std::vector<std::vector<int64_t>> grid;  // empty: no default grid
  uint64_t shared_bytes = 0;               // static + dynamic
  uint64_t cpu_scratch_bytes = 0;
  uint32_t payload = 0;
  // GPU kernel-parameter buffer layout and shared memory split (LoadRequest).
  std::vector<LoadRequest::ParamSlot> param_slots;
  uint32_t param_buffer_bytes = 0;
  std::vector<LoadRequest::TensorMapSpec> tensor_maps;  // CUDA TMA (ParamSlot.tensor_map)
  uint32_t static_shared_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
  // Vulkan descriptor bindings and push-constant layout (LoadRequest).
  std::vector<LoadRequest::VkBindingSlot> vk_bindings;
  std::vector<LoadRequest::VkPushSlot> vk_push;
  uint32_t vk_push_bytes = 0;
};

struct KernelInfo {
  KernelSig sig;
  std::vector<VariantDesc> variants;      // manifest order
  std::vector<VariantLaunch> launches;    // per variant
  std::vector<std::string> entry_points;  // per variant
  std::vector<std::pair<std::string, std::string>> attrs;
};

Status KernelFromManifest(const tl::bundle::Kernel& kernel, KernelInfo* out);

}  // namespace tl::rt
