// The HIP device: launch path of the HIP backend over libamdhip64.
//
// The backend (hip_backend.cc) finds libamdhip64.so.6 or .so.5, probes each
// device into a DeviceDesc (full target ID from gcnArchName), and
// CreateHipDevice turns one into a Device that loads code, launches kernels,
// owns device memory and streams:
//
//  - Current device: HIP keeps one per host thread; every call here makes
//    the device current (hipSetDevice) for its scope and restores the
//    caller's afterwards, so frameworks sharing the thread are not disturbed.
//  - Loading: hipModuleLoadData takes no length, so the payload is first
//    read with formats::ReadHsaco (ELF bounds, EM_AMDGPU, HSA OS ABI, the
//    NT_AMDGPU_METADATA note): its processor must be the device's (or a
//    generic target), the entry point must be a kernel of the object, the
//    block must fit .max_flat_workgroup_size, LDS the device, and the
//    bundle's parameter layout (Launch.param_slots) must equal the code
//    object's explicit kernel arguments (offsets and sizes). The driver
//    checks none of that for a buffer passed through `extra`.
//  - Launch: hipModuleLaunchKernel with `extra` = {HIP_LAUNCH_PARAM_BUFFER_
//    POINTER, buffer, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, HIP_LAUNCH_PARAM_END
//    (0x03 on AMD, not 0 as on CUDA)}; the buffer holds the explicit
//    arguments only, the HIP runtime appends the hidden ones from the
//    metadata. On an owned stream (hipStreamCreate), a wrapped hipStream_t,
//    or synchronously on the null stream.
//  - Errors carry hipGetErrorName / hipGetErrorString.
//
// There is no AMD GPU in this project: this path is exercised against a
// fake libamdhip64 (tests/runtime/fake_drivers/fake_hip.c, FAKE_HIP_OK) that
// checks what a driver would be handed, and never on hardware.
//
// Thread-safety: HipDevice and its executables are immutable after creation
// and safe from any thread; a HipStream is used by one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "../../src/backend.h"
#include "../../src/dynamic_library.h"

namespace tl::rt {
namespace hip {

using hipError = int;

struct Symbols {
#define TL_HIP_SYMBOL(required, name, params) hipError(*name) params = nullptr;
#include "hip_symbols.h"
#undef TL_HIP_SYMBOL
};

// The runtime library, kept loaded while any device, executable or stream
// uses it.
struct Driver {
  std::unique_ptr<DynamicLibrary> library;
  Symbols sym;
  const char* (*get_error_name)(hipError) = nullptr;
  const char* (*get_error_string)(hipError) = nullptr;
  // "hipErrorOutOfMemory (2): out of memory"
  std::string ErrorText(hipError rc) const;
};

// Resolves every symbol of hip_symbols.h and the two error-string functions
// from `library`; returns the required ones that are missing, comma-separated.
std::string ResolveSymbols(Driver* driver);

}  // namespace hip

// Device `ordinal` of the HIP runtime `driver`, described by `desc`. Returns a
// ProbeOnlyDevice (selection and explain work, launch says UNIMPLEMENTED)
// when the library lacks a symbol the launch path needs, logging which ones.
std::unique_ptr<Device> CreateHipDevice(DeviceDesc desc, int ordinal, std::shared_ptr<const hip::Driver> driver,
                                        const BackendOptions& options);

}  // namespace tl::rt
