// The CUDA device: launch path of the CUDA backend over the driver API.
//
// The backend (cuda_backend.cc) finds libcuda.so.1 and probes each device
// into a DeviceDesc; CreateCudaDevice turns one probed device into a Device
// that loads code, launches kernels, owns device memory and streams:
//
//  - Context: the device's primary context (cuDevicePrimaryCtxRetain), the
//    one the CUDA runtime API and frameworks (PyTorch, CuPy) use too, so that
//    pointers and streams can be shared with them. Retained on first use (not
//    at runtime creation: a context costs hundreds of MiB of device memory
//    and a few hundred ms), released when the last object using it goes.
//    Every driver call runs with it made current on the calling thread; the
//    caller's current context is restored afterwards.
//  - Loading: cubin or PTX, through cuLibraryLoadData (CUDA 12.0+,
//    context-independent) or cuModuleLoadDataEx where the driver lacks it,
//    with the JIT error and info logs captured into the status / explain.
//    CUDA's loaders take no length: a cubin's ELF header and tables are
//    bounds-checked against the payload size, and PTX is NUL-terminated here
//    and refused if it holds a NUL byte before its end (the driver would
//    silently compile a truncated module).
//  - Parameter layout: the bundle's Launch.param_slots / param_buffer_bytes
//    are cross-checked with cuFuncGetParamInfo (CUDA 12.4+) at load, because
//    the driver does not check a parameter buffer passed through
//    cuLaunchKernel's `extra` (a buffer declared 8 bytes for a 28-byte layout
//    launches "successfully" with garbage).
//  - Launch: cuLaunchKernel with the parameter buffer laid out from the slots,
//    on an owned stream (cuStreamCreate, non-blocking), a wrapped CUstream, or
//    synchronously on the legacy default stream.
//
// Debug override (read once per device at runtime creation):
//   TL_CUDA_LOADER=module  load with cuModuleLoadDataEx even where
//                          cuLibraryLoadData exists (tests both paths).
//
// Thread-safety: CudaDevice and CudaExecutable are safe from any thread
// (immutable after creation; the context is retained under a mutex). A
// CudaStream is used by one thread at a time (backend.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "../../src/backend.h"
#include "../../src/dynamic_library.h"

namespace tl::rt {
namespace cuda {

using tl_CUresult = int;
using tl_CUdevice = int;

// The driver entry points of cuda_symbols.h, resolved by name.
struct Symbols {
#define TL_CUDA_SYMBOL(required, name, params) tl_CUresult(*name) params = nullptr;
#include "cuda_symbols.h"
#undef TL_CUDA_SYMBOL
};

// The driver library, kept loaded while any device, executable or stream
// uses it.
struct Driver {
  std::unique_ptr<DynamicLibrary> library;
  Symbols sym;
  // "CUDA_ERROR_INVALID_VALUE (1): invalid argument"
  std::string ErrorText(tl_CUresult rc) const;
};

// One device's primary context, shared by the device and everything loaded
// or allocated on it.
class Context {
 public:
  Context(std::shared_ptr<const Driver> driver, tl_CUdevice device, std::string device_name)
      : driver_(std::move(driver)), device_(device), name_(std::move(device_name)) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Symbols& sym() const { return driver_->sym; }
  const Driver& driver() const { return *driver_; }
  const std::string& name() const { return name_; }
  // The CUdevice ordinal this context belongs to.
  tl_CUdevice ordinal() const { return device_; }
  // The retained primary context (retaining it on the first call); the same
  // failure on every later call if that failed.
  StatusOr<void*> Handle();
  // A failed driver call as a status: "<what> on CUDA device 'NVIDIA H200':
  // cuMemAlloc_v2 failed with CUDA_ERROR_OUT_OF_MEMORY (2): out of memory".
  Status Error(StatusCode code, const std::string& what, const char* call, tl_CUresult rc) const;

 private:
  std::shared_ptr<const Driver> driver_;
  tl_CUdevice device_;
  std::string name_;
  std::mutex mu_;
  bool tried_ = false;
  void* ctx_ = nullptr;
  Status retain_status_;
};

// Makes `context` current on this thread for the scope and restores the
// previous one at its end (push/pop only when another one was current).
class ScopedContext {
 public:
  explicit ScopedContext(Context& context) : context_(context) {}
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  // Call first; nothing else may be called on the driver if it fails.
  Status Enter(const char* what);

 private:
  Context& context_;
  bool pushed_ = false;
};

}  // namespace cuda

// Device `cu_device` of the driver already opened at `driver_path` by the
// backend, described by `desc`. Returns a ProbeOnlyDevice (selection and
// explain work, launch says UNIMPLEMENTED) when the driver lacks a symbol the
// launch path needs, logging which ones.
std::unique_ptr<Device> CreateCudaDevice(DeviceDesc desc, int cu_device, const std::string& driver_path,
                                         const BackendOptions& options);

}  // namespace tl::rt
