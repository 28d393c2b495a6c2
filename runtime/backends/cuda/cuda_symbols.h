// X-macro table of the CUDA driver API symbols the runtime uses, resolved
// from libcuda.so.1 with dlsym. The list exists only here.
//   TL_CUDA_SYMBOL(required, name, (parameter types))
// All return CUresult. `required` 0: an older driver may lack it; callers
// check for nullptr. Names are the exported (versioned) symbols.
// No include guard: included under different definitions of the macro.
TL_CUDA_SYMBOL(1, cuInit, (unsigned int))
TL_CUDA_SYMBOL(1, cuDriverGetVersion, (int*))
TL_CUDA_SYMBOL(1, cuDeviceGetCount, (int*))
TL_CUDA_SYMBOL(1, cuDeviceGet, (tl_CUdevice*, int))
TL_CUDA_SYMBOL(1, cuDeviceGetName, (char*, int, tl_CUdevice))
TL_CUDA_SYMBOL(1, cuDeviceGetAttribute, (int*, int, tl_CUdevice))
TL_CUDA_SYMBOL(1, cuDeviceTotalMem_v2, (size_t*, tl_CUdevice))
TL_CUDA_SYMBOL(0, cuGetErrorName, (tl_CUresult, const char**))
// The launch path (cuda_device.cc). Optional here, so that a driver lacking
// one still enumerates; CreateCudaDevice then makes a probe-only device that
// names the missing symbols (cuda_device.cc lists which ones launching
// needs). Handles (CUcontext, CUmodule, CUlibrary, CUkernel, CUfunction,
// CUstream, CUevent) are pointers, passed as void*; CUdeviceptr is an
// unsigned long long; CUjit_option and the attribute enums are ints.
// cuLibrary*/cuKernelGetFunction: CUDA 12.0; cuFuncGetParamInfo: CUDA 12.4.
TL_CUDA_SYMBOL(0, cuLibraryLoadData, (void**, const void*, void*, void**, unsigned int, void*, void**, unsigned int))
TL_CUDA_SYMBOL(0, cuLibraryGetKernel, (void**, void*, const char*))
TL_CUDA_SYMBOL(0, cuLibraryUnload, (void*))
TL_CUDA_SYMBOL(0, cuKernelGetFunction, (void**, void*))
TL_CUDA_SYMBOL(0, cuFuncGetParamInfo, (void*, size_t, size_t*, size_t*))
TL_CUDA_SYMBOL(0, cuGetErrorString, (tl_CUresult, const char**))
TL_CUDA_SYMBOL(0, cuDevicePrimaryCtxRetain, (void**, tl_CUdevice))
TL_CUDA_SYMBOL(0, cuDevicePrimaryCtxRelease_v2, (tl_CUdevice))
TL_CUDA_SYMBOL(0, cuCtxGetCurrent, (void**))
TL_CUDA_SYMBOL(0, cuCtxPushCurrent_v2, (void*))
TL_CUDA_SYMBOL(0, cuCtxPopCurrent_v2, (void**))
TL_CUDA_SYMBOL(0, cuModuleLoadDataEx, (void**, const void*, unsigned int, int*, void**))
TL_CUDA_SYMBOL(0, cuModuleGetFunction, (void**, void*, const char*))
TL_CUDA_SYMBOL(0, cuModuleUnload, (void*))
TL_CUDA_SYMBOL(0, cuFuncGetAttribute, (int*, int, void*))
TL_CUDA_SYMBOL(0, cuFuncSetAttribute, (void*, int, int))
TL_CUDA_SYMBOL(0, cuLaunchKernel, (void*, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, void*, void**, void**))
TL_CUDA_SYMBOL(0, cuMemAlloc_v2, (unsigned long long*, size_t))
TL_CUDA_SYMBOL(0, cuMemFree_v2, (unsigned long long))
TL_CUDA_SYMBOL(0, cuMemGetInfo_v2, (size_t*, size_t*))
TL_CUDA_SYMBOL(0, cuMemcpyHtoD_v2, (unsigned long long, const void*, size_t))
TL_CUDA_SYMBOL(0, cuMemcpyDtoH_v2, (void*, unsigned long long, size_t))
TL_CUDA_SYMBOL(0, cuMemcpyHtoDAsync_v2, (unsigned long long, const void*, size_t, void*))
TL_CUDA_SYMBOL(0, cuMemcpyDtoHAsync_v2, (void*, unsigned long long, size_t, void*))
TL_CUDA_SYMBOL(0, cuStreamCreate, (void**, unsigned int))
TL_CUDA_SYMBOL(0, cuStreamDestroy_v2, (void*))
TL_CUDA_SYMBOL(0, cuStreamQuery, (void*))
TL_CUDA_SYMBOL(0, cuStreamSynchronize, (void*))
TL_CUDA_SYMBOL(0, cuStreamGetCtx, (void*, void**))
// Launch-time ownership check of tensor pointers (optional: skipped without it).
TL_CUDA_SYMBOL(0, cuPointerGetAttributes, (unsigned int, int*, void**, unsigned long long))
TL_CUDA_SYMBOL(0, cuEventCreate, (void**, unsigned int))
TL_CUDA_SYMBOL(0, cuEventDestroy_v2, (void*))
TL_CUDA_SYMBOL(0, cuEventRecord, (void*, void*))
TL_CUDA_SYMBOL(0, cuEventSynchronize, (void*))
TL_CUDA_SYMBOL(0, cuEventElapsedTime, (float*, void*, void*))
// TMA tensor maps (CUDA 12.0+; only variants with Launch.tensor_maps need it).
// (CUtensorMap*, CUtensorMapDataType, rank, globalAddress, globalDim,
//  globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion,
//  oobFill); the enums are ints.
TL_CUDA_SYMBOL(0, cuTensorMapEncodeTiled, (void*, int, uint32_t, void*, const uint64_t*, const uint64_t*, const uint32_t*,
                                           const uint32_t*, int, int, int, int))
