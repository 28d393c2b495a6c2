// X-macro tables of the Vulkan entry points the runtime uses. Only
// vkGetInstanceProcAddr is taken from libvulkan.so.1 with dlsym; the rest
// come through it, as the loader intends.
//   TL_VK_GLOBAL(name): vkGetInstanceProcAddr(NULL, name)
//   TL_VK_INSTANCE(name): vkGetInstanceProcAddr(instance, name); required
//   TL_VK_INSTANCE_OPTIONAL(name): same, may be NULL (extension entry points)
//   TL_VK_DEVICE(name): vkGetDeviceProcAddr(device, name); required for the
//     launch path (a device lacking one can only be probed)
//   TL_VK_DEVICE_OPTIONAL(name): same, may be NULL (extension entry points)
// No include guard: included under different definitions of the macros.
#ifdef TL_VK_GLOBAL
TL_VK_GLOBAL(vkCreateInstance)
TL_VK_GLOBAL(vkEnumerateInstanceVersion)
#endif
#ifdef TL_VK_INSTANCE
TL_VK_INSTANCE(vkDestroyInstance)
TL_VK_INSTANCE(vkEnumeratePhysicalDevices)
TL_VK_INSTANCE(vkGetPhysicalDeviceProperties)
TL_VK_INSTANCE(vkGetPhysicalDeviceProperties2)
TL_VK_INSTANCE(vkGetPhysicalDeviceFeatures2)
TL_VK_INSTANCE(vkGetPhysicalDeviceMemoryProperties)
TL_VK_INSTANCE(vkGetPhysicalDeviceQueueFamilyProperties)
TL_VK_INSTANCE(vkEnumerateDeviceExtensionProperties)
TL_VK_INSTANCE(vkCreateDevice)
TL_VK_INSTANCE(vkGetDeviceProcAddr)
#endif
#ifdef TL_VK_INSTANCE_OPTIONAL
// VK_KHR_cooperative_matrix (signature declared in vulkan_khr_local.h).
TL_VK_INSTANCE_OPTIONAL(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)
#endif
#ifdef TL_VK_DEVICE
TL_VK_DEVICE(vkDestroyDevice)
TL_VK_DEVICE(vkGetDeviceQueue)
TL_VK_DEVICE(vkQueueSubmit)
TL_VK_DEVICE(vkDeviceWaitIdle)
TL_VK_DEVICE(vkCreateBuffer)
TL_VK_DEVICE(vkDestroyBuffer)
TL_VK_DEVICE(vkGetBufferMemoryRequirements)
TL_VK_DEVICE(vkAllocateMemory)
TL_VK_DEVICE(vkFreeMemory)
TL_VK_DEVICE(vkBindBufferMemory)
TL_VK_DEVICE(vkMapMemory)
TL_VK_DEVICE(vkUnmapMemory)
TL_VK_DEVICE(vkCreateShaderModule)
TL_VK_DEVICE(vkDestroyShaderModule)
TL_VK_DEVICE(vkCreateDescriptorSetLayout)
TL_VK_DEVICE(vkDestroyDescriptorSetLayout)
TL_VK_DEVICE(vkCreatePipelineLayout)
TL_VK_DEVICE(vkDestroyPipelineLayout)
TL_VK_DEVICE(vkCreateComputePipelines)
TL_VK_DEVICE(vkDestroyPipeline)
TL_VK_DEVICE(vkCreatePipelineCache)
TL_VK_DEVICE(vkDestroyPipelineCache)
TL_VK_DEVICE(vkGetPipelineCacheData)
TL_VK_DEVICE(vkCreateCommandPool)
TL_VK_DEVICE(vkDestroyCommandPool)
TL_VK_DEVICE(vkAllocateCommandBuffers)
TL_VK_DEVICE(vkFreeCommandBuffers)
TL_VK_DEVICE(vkResetCommandBuffer)
TL_VK_DEVICE(vkBeginCommandBuffer)
TL_VK_DEVICE(vkEndCommandBuffer)
TL_VK_DEVICE(vkCmdBindPipeline)
TL_VK_DEVICE(vkCmdBindDescriptorSets)
TL_VK_DEVICE(vkCmdPushConstants)
TL_VK_DEVICE(vkCmdDispatch)
TL_VK_DEVICE(vkCmdCopyBuffer)
TL_VK_DEVICE(vkCmdPipelineBarrier)
TL_VK_DEVICE(vkCmdResetQueryPool)
TL_VK_DEVICE(vkCmdWriteTimestamp)
TL_VK_DEVICE(vkCreateQueryPool)
TL_VK_DEVICE(vkDestroyQueryPool)
TL_VK_DEVICE(vkGetQueryPoolResults)
TL_VK_DEVICE(vkCreateDescriptorPool)
TL_VK_DEVICE(vkDestroyDescriptorPool)
TL_VK_DEVICE(vkAllocateDescriptorSets)
TL_VK_DEVICE(vkUpdateDescriptorSets)
TL_VK_DEVICE(vkCreateSemaphore)
TL_VK_DEVICE(vkDestroySemaphore)
TL_VK_DEVICE(vkWaitSemaphores)
TL_VK_DEVICE(vkGetSemaphoreCounterValue)
#endif
#ifdef TL_VK_DEVICE_OPTIONAL
TL_VK_DEVICE_OPTIONAL(vkCmdPushDescriptorSetKHR)
#endif
