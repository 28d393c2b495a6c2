// The CUDA backend: finds the driver (libcuda.so.1) with dlopen, resolves
// the symbols of cuda_symbols.h, and enumerates devices into descriptions
// (compute capability -> "sm_XY", driver API version -> max PTX ISA, limits).
// No CUDA header or toolkit is needed to build it: the few types and enum
// values used are declared here, with their values from cuda.h (they are
// part of the driver's stable ABI).
// Launch, buffers and streams: cuda_device.h (CreateCudaDevice).
#include <cstring>
#include <string>

#include "../../src/backend.h"
#include "../../src/dynamic_library.h"
#include "cuda_device.h"

namespace tl::rt {

namespace {

using tl_CUresult = int;
using tl_CUdevice = int;

// CUdevice_attribute values (cuda.h).
enum : int {
  kAttrMaxThreadsPerBlock = 1,
  kAttrMaxBlockDimX = 2,
  kAttrMaxBlockDimY = 3,
  kAttrMaxBlockDimZ = 4,
  kAttrMaxGridDimX = 5,
  kAttrMaxGridDimY = 6,
  kAttrMaxGridDimZ = 7,
  kAttrMultiprocessorCount = 16,
  kAttrIntegrated = 18,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
  kAttrMaxSharedMemoryPerBlockOptin = 97,
};

struct CudaSymbols {
#define TL_CUDA_SYMBOL(required, name, params) tl_CUresult(*name) params = nullptr;
#include "cuda_symbols.h"
#undef TL_CUDA_SYMBOL
};

struct CudaState {
  std::unique_ptr<DynamicLibrary> library;
  CudaSymbols sym;
};

std::string ErrorText(const CudaSymbols& sym, tl_CUresult rc) {
  const char* name = nullptr;
  if (sym.cuGetErrorName && sym.cuGetErrorName(rc, &name) == 0 && name) return std::string(name) + " (" + std::to_string(rc) + ")";
  return "CUresult " + std::to_string(rc);
}

}  // namespace

std::unique_ptr<Backend> CreateCudaBackend(const BackendOptions& options) {
  auto backend = std::make_unique<Backend>();
  backend->kind = kBackendCuda;
  auto lib = DynamicLibrary::Open("CUDA driver", {"libcuda.so.1"}, options.driver_search_paths);
  if (!lib.ok()) {
    backend->status = lib.status();
    return backend;
  }
  auto state = std::make_shared<CudaState>();
  state->library = std::move(lib.value());
  std::string missing;
#define TL_CUDA_SYMBOL(required, name, params)                                                     \
  state->sym.name = reinterpret_cast<tl_CUresult(*) params>(state->library->Symbol(#name));       \
  if (required && !state->sym.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#include "cuda_symbols.h"
#undef TL_CUDA_SYMBOL
  const std::string path = state->library->path();
  if (!missing.empty()) {
    backend->status = Status(StatusCode::kUnavailable, "CUDA driver " + path + " lacks required symbol(s): " + missing);
    return backend;
  }
  const CudaSymbols& s = state->sym;
  if (tl_CUresult rc = s.cuInit(0); rc != 0) {
    backend->status = Status(StatusCode::kUnavailable, "CUDA driver " + path + ": cuInit failed with " + ErrorText(s, rc));
    return backend;
  }
  int driver = 0, count = 0;
  if (tl_CUresult rc = s.cuDriverGetVersion(&driver); rc != 0) {
    backend->status = Status(StatusCode::kUnavailable, "CUDA driver " + path + ": cuDriverGetVersion failed with " + ErrorText(s, rc));
    return backend;
  }
  if (tl_CUresult rc = s.cuDeviceGetCount(&count); rc != 0) {
    backend->status = Status(StatusCode::kUnavailable, "CUDA driver " + path + ": cuDeviceGetCount failed with " + ErrorText(s, rc));
    return backend;
  }
  for (int i = 0; i < count; ++i) {
    tl_CUdevice dev = 0;
    if (tl_CUresult rc = s.cuDeviceGet(&dev, i); rc != 0) {
      if (options.logger) options.logger->Log(TL_LOG_WARNING, "cuda: cuDeviceGet(%d) failed with %s; skipped", i, ErrorText(s, rc).c_str());
      continue;
    }
    DeviceDesc d;
    d.backend = kBackendCuda;
    char name[256] = {0};
    s.cuDeviceGetName(name, sizeof(name) - 1, dev);
    d.name = name;
    size_t mem = 0;
    s.cuDeviceTotalMem_v2(&mem, dev);
    d.memory_bytes = mem;
    d.driver_version = static_cast<uint32_t>(driver);
    auto attr = [&](int a) {
      int v = 0;
      return s.cuDeviceGetAttribute(&v, a, dev) == 0 && v > 0 ? static_cast<uint32_t>(v) : 0u;
    };
    d.cc_major = static_cast<int>(attr(kAttrComputeCapabilityMajor));
    d.cc_minor = static_cast<int>(attr(kAttrComputeCapabilityMinor));
    d.compute_units = attr(kAttrMultiprocessorCount);
    if (attr(kAttrIntegrated)) d.flags |= TL_DEVICE_FLAG_INTEGRATED;
    d.limits.max_threads_per_block = attr(kAttrMaxThreadsPerBlock);
    d.limits.max_block[0] = attr(kAttrMaxBlockDimX);
    d.limits.max_block[1] = attr(kAttrMaxBlockDimY);
    d.limits.max_block[2] = attr(kAttrMaxBlockDimZ);
    d.limits.max_grid[0] = attr(kAttrMaxGridDimX);
    d.limits.max_grid[1] = attr(kAttrMaxGridDimY);
    d.limits.max_grid[2] = attr(kAttrMaxGridDimZ);
    d.limits.max_shared_bytes = attr(kAttrMaxSharedMemoryPerBlockOptin);
    d.Finalize();
    backend->devices.push_back(CreateCudaDevice(std::move(d), dev, path, options));
  }
  backend->state = state;
  return backend;
}

}  // namespace tl::rt
