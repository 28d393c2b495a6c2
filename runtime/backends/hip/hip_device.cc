// The HIP device: loading, launching, memory and streams over libamdhip64.
// See hip_device.h for the design; the risks each check guards against are
// named where the check is.
#include "hip_device.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "tilelang/formats/hsaco.h"

namespace tl::rt {
namespace hip {

namespace {

// hipError_t values the code reacts to (hip_runtime_api.h; stable across ROCm 5 and 6).
enum : int {
  kSuccess = 0,
  kErrorInvalidValue = 1,
  kErrorOutOfMemory = 2,
  kErrorInvalidImage = 200,
  kErrorNoBinaryForGpu = 209,
  kErrorNotFound = 500,
  kErrorNotReady = 600,
};

// hipModuleLaunchKernel `extra` markers. HIP_LAUNCH_PARAM_END is 0x03 on AMD.
void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(0x01);
void* const kLaunchParamBufferSize = reinterpret_cast<void*>(0x02);
void* const kLaunchParamEnd = reinterpret_cast<void*>(0x03);

#define TL_HIP_LAUNCH_SYMBOLS(X)                                                                                  \
  X(hipModuleUnload) X(hipGetDevice) X(hipSetDevice) X(hipMalloc) X(hipFree) X(hipMemcpyHtoD) X(hipMemcpyDtoH)   \
  X(hipMemcpyHtoDAsync) X(hipMemcpyDtoHAsync) X(hipStreamCreate) X(hipStreamDestroy) X(hipStreamSynchronize)    \
  X(hipStreamQuery)

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

StatusCode LoadErrorCode(hipError rc) {
  switch (rc) {
    case kErrorNoBinaryForGpu: return StatusCode::kIncompatible;
    case kErrorInvalidImage: return StatusCode::kInvalidArgument;
    case kErrorNotFound: return StatusCode::kNotFound;
    case kErrorOutOfMemory: return StatusCode::kResourceExhausted;
    default: return StatusCode::kInternal;
  }
}

}  // namespace

std::string Driver::ErrorText(hipError rc) const {
  const char* name = get_error_name ? get_error_name(rc) : nullptr;
  const char* text = get_error_string ? get_error_string(rc) : nullptr;
  std::string out = name && *name ? std::string(name) + " (" + std::to_string(rc) + ")" : "hipError_t " + std::to_string(rc);
  if (text && *text) out += std::string(": ") + text;
  return out;
}

std::string ResolveSymbols(Driver* d) {
  std::string missing;
#define TL_HIP_SYMBOL(required, name, params)                                          \
  d->sym.name = reinterpret_cast<hipError(*) params>(d->library->Symbol(#name));      \
  if (required && !d->sym.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#include "hip_symbols.h"
#undef TL_HIP_SYMBOL
  d->get_error_name = reinterpret_cast<const char* (*)(hipError)>(d->library->Symbol("hipGetErrorName"));
  d->get_error_string = reinterpret_cast<const char* (*)(hipError)>(d->library->Symbol("hipGetErrorString"));
  return missing;
}

namespace {

// Makes the device current on this thread for the scope; restores the
// caller's current device afterwards.
class ScopedDevice {
 public:
  ScopedDevice(const Driver& d, int ordinal) : d_(d), ordinal_(ordinal) {}
  ~ScopedDevice() {
    if (switched_) d_.sym.hipSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  Status Enter(const std::string& what) {
    int current = -1;
    if (hipError rc = d_.sym.hipGetDevice(&current); rc != kSuccess) current = -1;
    if (current == ordinal_) return Status::Ok();
    if (hipError rc = d_.sym.hipSetDevice(ordinal_); rc != kSuccess) {
      return Status(StatusCode::kInternal, what + ": hipSetDevice(" + std::to_string(ordinal_) + ") failed with " +
                                               d_.ErrorText(rc));
    }
    switched_ = current >= 0;
    previous_ = current;
    return Status::Ok();
  }

 private:
  const Driver& d_;
  int ordinal_;
  bool switched_ = false;
  int previous_ = 0;
};

class HipExecutable : public Executable {
 public:
  HipExecutable(std::shared_ptr<const Driver> driver, int ordinal) : driver_(std::move(driver)), ordinal_(ordinal) {}
  ~HipExecutable() override {
    if (!module) return;
    ScopedDevice scope(*driver_, ordinal_);
    if (!scope.Enter("unloading a module").ok()) return;
    driver_->sym.hipModuleUnload(module);
  }
  std::string LoadNote() const override { return note; }

  std::shared_ptr<const Driver> driver_;
  int ordinal_;
  void* module = nullptr;    // hipModule_t
  void* function = nullptr;  // hipFunction_t
  std::vector<LoadRequest::ParamSlot> slots;
  uint32_t param_buffer_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
  uint32_t block[3] = {1, 1, 1};
  std::string note;
};

class HipStream : public Stream {
 public:
  HipStream(std::shared_ptr<const Driver> driver, int ordinal, std::string device_name, void* handle, bool owned)
      : driver_(std::move(driver)), ordinal_(ordinal), name_(std::move(device_name)), handle_(handle), owned_(owned) {}
  ~HipStream() override {
    // The C ABI promises that the last release waits for queued work.
    ScopedDevice scope(*driver_, ordinal_);
    if (!scope.Enter("releasing a stream").ok()) return;
    driver_->sym.hipStreamSynchronize(handle_);
    if (owned_) driver_->sym.hipStreamDestroy(handle_);
  }
  Status Synchronize(uint64_t timeout_ns) override {
    ScopedDevice scope(*driver_, ordinal_);
    TL_RETURN_IF_ERROR(scope.Enter("synchronizing a stream"));
    const Symbols& s = driver_->sym;
    if (timeout_ns == UINT64_MAX) {
      if (hipError rc = s.hipStreamSynchronize(handle_); rc != kSuccess) {
        return Status(StatusCode::kInternal, "work on a stream of HIP device '" + name_ +
                                                 "': hipStreamSynchronize failed with " + driver_->ErrorText(rc));
      }
      return Status::Ok();
    }
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, uint64_t{1} << 62));
    auto step = std::chrono::microseconds(2);
    for (;;) {
      hipError rc = s.hipStreamQuery(handle_);
      if (rc == kSuccess) return Status::Ok();
      if (rc != kErrorNotReady) {
        return Status(StatusCode::kInternal, "work on a stream of HIP device '" + name_ +
                                                 "': hipStreamQuery failed with " + driver_->ErrorText(rc));
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status(StatusCode::kDeadlineExceeded,
                      Format("stream on HIP device '%s': work still running after %.3f ms (timeout %" PRIu64 " ns)",
                             name_.c_str(), MsSince(start), timeout_ns));
      }
      std::this_thread::sleep_for(step);
      step = std::min(step * 2, std::chrono::microseconds(1000));
    }
  }
  void* handle() const { return handle_; }

 private:
  std::shared_ptr<const Driver> driver_;
  int ordinal_;
  std::string name_;
  void* handle_;  // hipStream_t; nullptr is the null stream
  bool owned_;
};

class HipDevice : public Device {
 public:
  HipDevice(DeviceDesc desc, int ordinal, std::shared_ptr<const Driver> driver, const Logger* logger)
      : driver_(std::move(driver)), ordinal_(ordinal), logger_(logger) {
    desc_ = std::move(desc);
    desc_.flags |= TL_DEVICE_FLAG_CAN_LAUNCH;
  }

  StatusOr<std::shared_ptr<Executable>> Load(const LoadRequest& request) override;
  Status Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) override;
  StatusOr<void*> AllocateMemory(size_t size) override;
  void FreeMemory(void* pointer) override;
  Status CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) override;
  StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  StatusOr<std::unique_ptr<Stream>> WrapStream(void* native) override;

 private:
  Status Error(StatusCode code, const std::string& what, const char* call, hipError rc) const {
    return Status(code, what + " on HIP device '" + desc_.name + "': " + call + " failed with " + driver_->ErrorText(rc));
  }
  // The code object's facts against the request and the device.
  Status CheckCodeObject(const LoadRequest& request, const formats::HsacoInfo& info, HipExecutable* exec);

  std::shared_ptr<const Driver> driver_;
  int ordinal_;
  const Logger* logger_;
};

Status HipDevice::CheckCodeObject(const LoadRequest& request, const formats::HsacoInfo& info, HipExecutable* exec) {
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  // The processor in the ELF must be the device's: the selection trusted the
  // manifest's arch string, this checks the bytes it describes.
  if (info.processor != desc_.processor && info.processor.find("generic") == std::string::npos) {
    return Status(StatusCode::kIncompatible,
                  Format("%s: the code object is for %s (amdhsa.target '%s'), the device is %s", where.c_str(),
                         info.processor.c_str(), info.metadata_target.c_str(), desc_.arch.c_str()));
  }
  const formats::HsacoKernel* k = info.Find(request.entry_point);
  if (!k) {
    std::string names;
    for (const formats::HsacoKernel& x : info.kernels) names += (names.empty() ? "" : ", ") + x.name;
    return Status(StatusCode::kNotFound, Format("%s: entry point '%s' is not a kernel of the code object (it has: %s)",
                                                where.c_str(), request.entry_point.c_str(), names.c_str()));
  }
  const uint64_t threads = uint64_t{request.block[0]} * request.block[1] * request.block[2];
  if (k->max_flat_workgroup_size > 0 && threads > static_cast<uint64_t>(k->max_flat_workgroup_size)) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: block (%u, %u, %u) has %" PRIu64 " threads; the code object allows at most %lld "
                         "(.max_flat_workgroup_size)",
                         where.c_str(), request.block[0], request.block[1], request.block[2], threads,
                         static_cast<long long>(k->max_flat_workgroup_size)));
  }
  const uint64_t lds = static_cast<uint64_t>(std::max<int64_t>(0, k->group_segment_fixed_size)) + request.dynamic_shared_bytes;
  if (desc_.limits.max_shared_bytes && lds > desc_.limits.max_shared_bytes) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: %lld bytes of static + %u bytes of dynamic LDS exceed the device's %" PRIu64
                         " bytes per workgroup",
                         where.c_str(), static_cast<long long>(k->group_segment_fixed_size),
                         request.dynamic_shared_bytes, desc_.limits.max_shared_bytes));
  }
  // The parameter layout: the bundle's slots against the explicit arguments
  // the compiler laid out (hipModuleLaunchKernel copies `extra`'s buffer
  // without looking at it).
  std::vector<const formats::HsacoArg*> args;
  for (const formats::HsacoArg& a : k->args) {
    if (!a.hidden()) args.push_back(&a);
  }
  std::vector<LoadRequest::ParamSlot> slots = request.param_slots;
  std::stable_sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  if (slots.size() != args.size()) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: the bundle's parameter layout has %zu slots, kernel '%s' in the code object has %zu "
                         "explicit arguments",
                         where.c_str(), slots.size(), request.entry_point.c_str(), args.size()));
  }
  std::vector<int> filled(request.param_count, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].offset != args[i]->offset || slots[i].size != args[i]->size) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: parameter layout slot %zu (param %d) is at offset %u size %u in the bundle, but the "
                           "code object has argument %zu at offset %u size %u (%s)",
                           where.c_str(), i, slots[i].param, slots[i].offset, slots[i].size, i, args[i]->offset,
                           args[i]->size, args[i]->value_kind.c_str()));
    }
    if (slots[i].param >= 0 && static_cast<uint32_t>(slots[i].param) < request.param_count) ++filled[slots[i].param];
  }
  for (uint32_t p = 0; p < request.param_count; ++p) {
    if (filled[p] != 1) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: parameter %u fills %d slots of the parameter layout, expected 1", where.c_str(), p,
                           filled[p]));
    }
  }
  const uint32_t end = k->ExplicitBytes();
  if (request.param_buffer_bytes < end) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: param_buffer_bytes %u is smaller than the code object's %u bytes of explicit arguments",
                         where.c_str(), request.param_buffer_bytes, end));
  }
  exec->slots = request.param_slots;
  exec->param_buffer_bytes = request.param_buffer_bytes;
  exec->note += Format("; code object v%d %s, %lld VGPR, %lld SGPR, %lld B LDS, %lld B scratch, wave%lld; parameter "
                       "layout (%zu slots, %u bytes) matches the code object's metadata",
                       info.code_object_version, info.TargetId().c_str(), static_cast<long long>(k->vgpr_count),
                       static_cast<long long>(k->sgpr_count), static_cast<long long>(k->group_segment_fixed_size),
                       static_cast<long long>(k->private_segment_fixed_size), static_cast<long long>(k->wavefront_size),
                       slots.size(), request.param_buffer_bytes);
  return Status::Ok();
}

StatusOr<std::shared_ptr<Executable>> HipDevice::Load(const LoadRequest& request) {
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  if (request.code_kind != TL_CODE_HSACO) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: code kind %d cannot be loaded by the HIP backend (HSACO)", where.c_str(), request.code_kind));
  }
  if (request.entry_point.empty() || request.entry_point.find('\0') != std::string::npos) {
    return Status(StatusCode::kInvalidArgument, where + ": entry point is empty or holds a NUL byte");
  }
  StatusOr<formats::HsacoInfo> info = formats::ReadHsaco(request.code);
  if (!info.ok()) return Status(info.status().code(), where + ": " + info.status().message());
  auto exec = std::make_shared<HipExecutable>(driver_, ordinal_);
  for (int a = 0; a < 3; ++a) exec->block[a] = request.block[a];
  exec->dynamic_shared_bytes = request.dynamic_shared_bytes;
  TL_RETURN_IF_ERROR(CheckCodeObject(request, *info, exec.get()));
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("loading " + where));
  const Symbols& s = driver_->sym;
  const auto start = std::chrono::steady_clock::now();
  if (hipError rc = s.hipModuleLoadData(&exec->module, request.code.data()); rc != kSuccess) {
    exec->module = nullptr;
    return Error(LoadErrorCode(rc), "loading " + where + " (HSACO " + info->TargetId() + ")", "hipModuleLoadData", rc);
  }
  if (hipError rc = s.hipModuleGetFunction(&exec->function, exec->module, request.entry_point.c_str()); rc != kSuccess) {
    return Error(LoadErrorCode(rc), "loading " + where + ", entry point '" + request.entry_point + "'",
                 "hipModuleGetFunction", rc);
  }
  exec->note = Format("HSACO loaded (hipModuleLoadData): %.2f ms", MsSince(start)) + exec->note;
  if (logger_ && logger_->enabled(TL_LOG_INFO)) {
    logger_->Log(TL_LOG_INFO, "hip: loaded %s on '%s': %s", where.c_str(), desc_.name.c_str(), exec->note.c_str());
  }
  return std::shared_ptr<Executable>(std::move(exec));
}

Status HipDevice::Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) {
  auto* exec = static_cast<HipExecutable*>(executable.get());
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  struct alignas(16) Chunk {
    uint8_t bytes[16];
  };
  std::vector<Chunk> storage((exec->param_buffer_bytes + 15) / 16);
  uint8_t* buffer = reinterpret_cast<uint8_t*>(storage.data());
  if (!storage.empty()) memset(buffer, 0, storage.size() * sizeof(Chunk));
  for (size_t i = 0; i < exec->slots.size(); ++i) {
    const auto& sl = exec->slots[i];
    if (sl.param < 0 && sl.symbol >= 0) {
      const size_t sym = static_cast<size_t>(sl.symbol);
      if (sym >= request.symbols.size()) {
        return Status(StatusCode::kInternal, Format("%s: slot %zu names shape symbol %zu of %zu bound", where.c_str(),
                                                    i, sym, request.symbols.size()));
      }
      const int64_t value = request.symbols[sym];
      if (sl.size == 4) {
        if (value < INT32_MIN || value > INT32_MAX) {
          return Status(StatusCode::kOutOfRange,
                        Format("%s: shape symbol %zu is %lld, which does not fit the kernel's 32-bit parameter",
                               where.c_str(), sym, static_cast<long long>(value)));
        }
        const int32_t v32 = static_cast<int32_t>(value);
        memcpy(buffer + sl.offset, &v32, 4);
      } else if (sl.size == 8) {
        memcpy(buffer + sl.offset, &value, 8);
      } else {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: shape symbol slot %zu holds %u bytes (4 or 8)", where.c_str(), i, sl.size));
      }
      continue;
    }
    if (sl.param < 0) continue;  // zero-filled
    const size_t p = static_cast<size_t>(sl.param);
    if (p >= request.is_scalar.size()) {
      return Status(StatusCode::kInternal, Format("%s: slot %zu names parameter %zu of %zu arguments", where.c_str(),
                                                  i, p, request.is_scalar.size()));
    }
    if (request.is_scalar[p]) {
      if (sl.size > sizeof(uint64_t)) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: parameter %zu is a scalar but its slot holds %u bytes (at most 8)", where.c_str(), p,
                             sl.size));
      }
      memcpy(buffer + sl.offset, &request.scalar_slots[p], sl.size);  // little endian: the low bytes
    } else {
      if (sl.size != sizeof(void*)) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: parameter %zu is a tensor but its slot holds %u bytes, not a %zu-byte device pointer",
                             where.c_str(), p, sl.size, sizeof(void*)));
      }
      memcpy(buffer + sl.offset, &request.tensor_pointers[p], sizeof(void*));
    }
  }
  size_t buffer_size = exec->param_buffer_bytes;
  void* extra[5] = {kLaunchParamBufferPointer, buffer, kLaunchParamBufferSize, &buffer_size, kLaunchParamEnd};
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("launching " + where));
  const Symbols& s = driver_->sym;
  void* hip_stream = stream ? static_cast<HipStream*>(stream)->handle() : nullptr;
  hipError rc = s.hipModuleLaunchKernel(exec->function, request.grid[0], request.grid[1], request.grid[2],
                                        exec->block[0], exec->block[1], exec->block[2], exec->dynamic_shared_bytes,
                                        hip_stream, nullptr, buffer_size ? extra : nullptr);
  if (rc != kSuccess) {
    return Error(rc == kErrorInvalidValue ? StatusCode::kInvalidArgument : StatusCode::kInternal,
                 Format("launching %s with grid (%u, %u, %u), block (%u, %u, %u), %u B dynamic LDS", where.c_str(),
                        request.grid[0], request.grid[1], request.grid[2], exec->block[0], exec->block[1],
                        exec->block[2], exec->dynamic_shared_bytes),
                 "hipModuleLaunchKernel", rc);
  }
  if (stream) return Status::Ok();
  // Synchronous: wait, so that a fault inside the kernel is this call's error.
  if ((rc = s.hipStreamSynchronize(nullptr)) != kSuccess) {
    return Error(StatusCode::kInternal, "running " + where, "hipStreamSynchronize", rc);
  }
  return Status::Ok();
}

StatusOr<void*> HipDevice::AllocateMemory(size_t size) {
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("allocating device memory"));
  void* ptr = nullptr;
  // A 0-byte buffer still gets a distinct address.
  if (hipError rc = driver_->sym.hipMalloc(&ptr, size ? size : 1); rc != kSuccess) {
    std::string what = Format("allocating %zu bytes", size);
    size_t free_bytes = 0, total = 0;
    if (driver_->sym.hipMemGetInfo && driver_->sym.hipMemGetInfo(&free_bytes, &total) == kSuccess) {
      what += Format(" (%zu of %zu bytes free)", free_bytes, total);
    }
    return Error(rc == kErrorOutOfMemory ? StatusCode::kResourceExhausted : StatusCode::kInternal, what, "hipMalloc", rc);
  }
  return ptr;
}

void HipDevice::FreeMemory(void* pointer) {
  if (!pointer) return;
  ScopedDevice scope(*driver_, ordinal_);
  if (Status st = scope.Enter("freeing device memory"); !st.ok()) {
    if (logger_) logger_->Log(TL_LOG_ERROR, "hip: %s", st.message().c_str());
    return;
  }
  if (hipError rc = driver_->sym.hipFree(pointer); rc != kSuccess && logger_) {
    logger_->Log(TL_LOG_ERROR, "hip: hipFree(%p) on '%s' failed with %s", pointer, desc_.name.c_str(),
                 driver_->ErrorText(rc).c_str());
  }
}

Status HipDevice::CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("copying to the device"));
  const Symbols& s = driver_->sym;
  void* src = const_cast<void*>(host_src);  // HIP's signature is not const-correct
  hipError rc = stream ? s.hipMemcpyHtoDAsync(device_dst, src, size, static_cast<HipStream*>(stream)->handle())
                       : s.hipMemcpyHtoD(device_dst, src, size);
  if (rc != kSuccess) {
    return Error(StatusCode::kInternal, Format("copying %zu bytes to device address %p", size, device_dst),
                 stream ? "hipMemcpyHtoDAsync" : "hipMemcpyHtoD", rc);
  }
  return Status::Ok();
}

Status HipDevice::CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("copying to the host"));
  const Symbols& s = driver_->sym;
  void* src = const_cast<void*>(device_src);
  hipError rc = stream ? s.hipMemcpyDtoHAsync(host_dst, src, size, static_cast<HipStream*>(stream)->handle())
                       : s.hipMemcpyDtoH(host_dst, src, size);
  if (rc != kSuccess) {
    return Error(StatusCode::kInternal, Format("copying %zu bytes from device address %p", size, device_src),
                 stream ? "hipMemcpyDtoHAsync" : "hipMemcpyDtoH", rc);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Stream>> HipDevice::CreateStream() {
  ScopedDevice scope(*driver_, ordinal_);
  TL_RETURN_IF_ERROR(scope.Enter("creating a stream"));
  void* handle = nullptr;
  if (hipError rc = driver_->sym.hipStreamCreate(&handle); rc != kSuccess) {
    return Error(StatusCode::kInternal, "creating a stream", "hipStreamCreate", rc);
  }
  return std::unique_ptr<Stream>(std::make_unique<HipStream>(driver_, ordinal_, desc_.name, handle, true));
}

StatusOr<std::unique_ptr<Stream>> HipDevice::WrapStream(void* native) {
  return std::unique_ptr<Stream>(std::make_unique<HipStream>(driver_, ordinal_, desc_.name, native, false));
}

}  // namespace
}  // namespace hip

std::unique_ptr<Device> CreateHipDevice(DeviceDesc desc, int ordinal, std::shared_ptr<const hip::Driver> driver,
                                        const BackendOptions& options) {
  using namespace hip;
  std::string missing;
#define TL_HIP_CHECK(name) \
  if (!driver->sym.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  TL_HIP_LAUNCH_SYMBOLS(TL_HIP_CHECK)
#undef TL_HIP_CHECK
  if (!missing.empty()) {
    if (options.logger) {
      options.logger->Log(TL_LOG_WARNING, "hip: device '%s' can only be probed: %s lacks %s", desc.name.c_str(),
                          driver->library->path().c_str(), missing.c_str());
    }
    return std::make_unique<ProbeOnlyDevice>(std::move(desc));
  }
  return std::make_unique<HipDevice>(std::move(desc), ordinal, std::move(driver), options.logger);
}

}  // namespace tl::rt
