// X-macro table of the HIP runtime symbols the runtime uses, resolved from
// libamdhip64.so.6 (ROCm 6) or libamdhip64.so.5 (ROCm 5) with dlsym.
//   TL_HIP_SYMBOL(required, name, (parameter types))
// All return hipError_t (int). `required` 0: the backend still probes
// without it; the launch path checks for it (hip_device.cc lists which).
// Handles (hipModule_t, hipFunction_t, hipStream_t) are pointers, passed as
// void*; hipDeviceptr_t is void*. No include guard: an X-macro table.
// hipGetErrorName / hipGetErrorString return const char* and are resolved
// separately (hip_device.h, Driver).
TL_HIP_SYMBOL(1, hipInit, (unsigned int))
TL_HIP_SYMBOL(1, hipDriverGetVersion, (int*))
TL_HIP_SYMBOL(1, hipGetDeviceCount, (int*))
TL_HIP_SYMBOL(1, hipDeviceGetName, (char*, int, int))
TL_HIP_SYMBOL(1, hipDeviceTotalMem, (size_t*, int))
TL_HIP_SYMBOL(1, hipDeviceGetAttribute, (int*, int, int))
// hipDeviceProp_t differs between ROCm 5 (hipGetDeviceProperties) and 6
// (hipGetDevicePropertiesR0600); only gcnArchName is read from it.
TL_HIP_SYMBOL(0, hipGetDevicePropertiesR0600, (void*, int))
TL_HIP_SYMBOL(0, hipGetDeviceProperties, (void*, int))
TL_HIP_SYMBOL(0, hipRuntimeGetVersion, (int*))
// The launch path (hip_device.cc).
TL_HIP_SYMBOL(1, hipModuleLoadData, (void**, const void*))
TL_HIP_SYMBOL(1, hipModuleGetFunction, (void**, void*, const char*))
TL_HIP_SYMBOL(1, hipModuleLaunchKernel, (void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**))
TL_HIP_SYMBOL(0, hipModuleUnload, (void*))
TL_HIP_SYMBOL(0, hipGetDevice, (int*))
TL_HIP_SYMBOL(0, hipSetDevice, (int))
TL_HIP_SYMBOL(0, hipMalloc, (void**, size_t))
TL_HIP_SYMBOL(0, hipFree, (void*))
TL_HIP_SYMBOL(0, hipMemcpyHtoD, (void*, void*, size_t))
TL_HIP_SYMBOL(0, hipMemcpyDtoH, (void*, void*, size_t))
TL_HIP_SYMBOL(0, hipMemcpyHtoDAsync, (void*, void*, size_t, void*))
TL_HIP_SYMBOL(0, hipMemcpyDtoHAsync, (void*, void*, size_t, void*))
TL_HIP_SYMBOL(0, hipStreamCreate, (void**))
TL_HIP_SYMBOL(0, hipStreamDestroy, (void*))
TL_HIP_SYMBOL(0, hipStreamSynchronize, (void*))
TL_HIP_SYMBOL(0, hipStreamQuery, (void*))
TL_HIP_SYMBOL(0, hipMemGetInfo, (size_t*, size_t*))
