// X-macro tables of the Vulkan entry points the runtime uses. Only
// vkGetInstanceProcAddr is taken from libvulkan.so.1 with dlsym; the rest
// come through it, as the loader intends.
//   TL_VK_GLOBAL(name): vkGetInstanceProcAddr(NULL, name)
//   TL_VK_INSTANCE(name): vkGetInstanceProcAddr(instance, name)
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
TL_VK_INSTANCE(vkEnumerateDeviceExtensionProperties)
#endif
