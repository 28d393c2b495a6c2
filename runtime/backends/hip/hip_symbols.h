// X-macro table of the HIP runtime symbols the runtime uses, resolved from
// libamdhip64.so.6 (ROCm 6) or libamdhip64.so.5 (ROCm 5) with dlsym.
//   TL_HIP_SYMBOL(required, name, (parameter types))
// All return hipError_t (int). No include guard: an X-macro table.
TL_HIP_SYMBOL(1, hipInit, (unsigned int))
TL_HIP_SYMBOL(1, hipDriverGetVersion, (int*))
TL_HIP_SYMBOL(1, hipGetDeviceCount, (int*))
TL_HIP_SYMBOL(1, hipDeviceGetName, (char*, int, int))
TL_HIP_SYMBOL(1, hipDeviceTotalMem, (size_t*, int))
TL_HIP_SYMBOL(1, hipDeviceGetAttribute, (int*, int, int))
// The launch path (later issue).
TL_HIP_SYMBOL(1, hipModuleLoadData, (void**, const void*))
TL_HIP_SYMBOL(1, hipModuleGetFunction, (void**, void*, const char*))
TL_HIP_SYMBOL(1, hipModuleLaunchKernel, (void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**))
