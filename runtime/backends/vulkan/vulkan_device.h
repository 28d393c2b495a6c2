// The Vulkan device: launch path of the Vulkan backend.
//
// The backend (vulkan_backend.cc) probes each physical device into a
// DeviceDesc and a PhysicalInfo; CreateVulkanDevice turns one into a Device
// that loads SPIR-V, launches it, owns memory and streams
// (VULKAN_CONTRACT.md is the agreement with the SPIR-V code generator):
//
//  - VkDevice: created on first use (not at runtime creation), with one
//    compute queue and every core feature the device supports (16/8-bit
//    storage, shaderFloat16, shaderInt64, subgroup size control, timeline
//    semaphores, ...) except robust buffer/image access, plus
//    VK_KHR_push_descriptor, VK_KHR_cooperative_matrix,
//    VK_EXT_subgroup_size_control and VK_EXT_shader_atomic_float when present.
//  - Memory: one VkBuffer + VkDeviceMemory per tl_buffer_allocate, from the
//    first DEVICE_LOCAL memory type (host-visible on lavapipe and mapped
//    there; on NVIDIA copies go through host-visible staging buffers). The
//    pointer the C ABI hands out is a per-device *virtual* address
//    0x56II_xxxx_xxxx_xxxx (II = a per-VkDevice id) in the non-canonical part of
//    the 64-bit space, so it is never a valid host pointer; launches, copies
//    and tl_buffer_import map it back to (VkBuffer, offset) and reject any
//    address no live allocation of this device contains, naming the argument.
//  - Loading: the SPIR-V module is inspected first (spirv_module.h: entry
//    point, LocalSize against the bundle's block, Workgroup memory), then the
//    limits are checked against the device (workgroup size and invocations,
//    shared memory, push-constant bytes, required subgroup size), the binding
//    and push-constant layouts of Launch.vk_bindings / vk_push are checked,
//    and only then are the shader module, descriptor-set layout (push
//    descriptors where VK_KHR_push_descriptor exists, else a descriptor pool
//    per launch), pipeline layout and compute pipeline created, through a
//    VkPipelineCache persisted per device identity (pipeline_cache_file.h).
//  - Queue work: every launch or queued copy is one command buffer, opened by
//    a full memory barrier (so all work on the queue is ordered, as on a CUDA
//    blocking stream) and closed by a barrier making writes visible to the
//    host, submitted with a signal of the device's timeline semaphore. A
//    stream waits for its last value (tl_stream_synchronize with timeout);
//    synchronous calls wait for their own. Host copies to mapped memory wait
//    for all work submitted before them, then memcpy.
//  - Timing: synchronous launches with debug logging record two timestamp
//    queries around the dispatch and log the kernel time.
//
// The VkDevice and the state shared on it (queue, allocation table, staging,
// command lanes, pipeline cache): vulkan_context.h.
//
// Debug override (read at runtime creation):
//   TL_VULKAN_NO_PUSH_DESCRIPTORS=1  use descriptor pools even where push
//                                    descriptors exist (tests both paths).
//   TL_VULKAN_STAGING_ONLY=1         never map device buffers: every copy goes
//                                    through staging, as on a discrete GPU
//                                    (tests that path on lavapipe).
//
// Thread-safety: the device, executables and the shared VkDevice state are
// safe from any thread (queue submission under a mutex, allocation table
// under a shared mutex, pools per stream or checked out per call). A stream
// is used by one thread at a time (backend.h).
#pragma once

#include <memory>

#include "../../src/backend.h"
#include "vulkan_api.h"

namespace tl::rt {

std::unique_ptr<Device> CreateVulkanDevice(DeviceDesc desc, vk::PhysicalInfo info,
                                           std::shared_ptr<const vk::Instance> instance, const BackendOptions& options);

}  // namespace tl::rt
