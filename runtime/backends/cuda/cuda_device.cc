// The CUDA device: loading, launching, memory and streams over the driver
// API. See cuda_device.h for the design; the risks each check guards against
// are named where the check is.
#include "cuda_device.h"

#include "tensor_map.h"
#include "tilelang/formats/elf64.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

namespace tl::rt {
namespace cuda {

namespace {

// CUresult values (cuda.h) the code reacts to.
enum : int {
  kSuccess = 0,
  kErrorInvalidValue = 1,
  kErrorOutOfMemory = 2,
  kErrorInvalidImage = 200,
  kErrorNoBinaryForGpu = 209,
  kErrorInvalidPtx = 218,
  kErrorUnsupportedPtxVersion = 222,
  kErrorNotFound = 500,
  kErrorNotReady = 600,
};

// CUjit_option values.
enum : int {
  kJitWallTime = 2,
  kJitInfoLogBuffer = 3,
  kJitInfoLogBufferSizeBytes = 4,
  kJitErrorLogBuffer = 5,
  kJitErrorLogBufferSizeBytes = 6,
};

// CUfunction_attribute values.
enum : int {
  kFuncMaxThreadsPerBlock = 0,
  kFuncSharedSizeBytes = 1,
  kFuncLocalSizeBytes = 3,
  kFuncNumRegs = 4,
  kFuncPtxVersion = 5,
  kFuncBinaryVersion = 6,
  kFuncMaxDynamicSharedSizeBytes = 8,
};

// cuLaunchKernel `extra` markers.
void* const kLaunchParamEnd = reinterpret_cast<void*>(0x00);
void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(0x01);
void* const kLaunchParamBufferSize = reinterpret_cast<void*>(0x02);

// Without the opt-in attribute a block may use at most 48 KiB of shared
// memory (static + dynamic); above that CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_
// SIZE_BYTES must be raised first, or the launch fails with INVALID_VALUE.
constexpr uint32_t kDefaultSharedLimit = 48 * 1024;

// JIT log buffers. The driver truncates longer logs; 16 KiB holds the
// ptxas diagnostics of any kernel we have seen fail.
constexpr size_t kJitLogBytes = 16 * 1024;

// The launch path needs these (cuda_symbols.h lists them as optional so that
// the backend still probes on drivers lacking one).
#define TL_CUDA_LAUNCH_SYMBOLS(X)                                                                              \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) X(cuCtxGetCurrent) X(cuCtxPushCurrent_v2)        \
  X(cuCtxPopCurrent_v2) X(cuModuleLoadDataEx) X(cuModuleGetFunction) X(cuModuleUnload) X(cuFuncGetAttribute)   \
  X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyHtoD_v2)                 \
  X(cuMemcpyDtoH_v2) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuStreamCreate) X(cuStreamDestroy_v2)  \
  X(cuStreamQuery) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord)               \
  X(cuEventSynchronize) X(cuEventElapsedTime)

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

// A JIT log as one line: newlines to " | ", trailing blanks dropped.
std::string OneLine(const char* log, size_t capacity) {
  std::string s(log, strnlen(log, capacity));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += " | ";
    } else if (c != '\r') {
      out += c;
    }
  }
  return out;
}

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24; }
uint64_t Le64(const uint8_t* p) { return uint64_t{Le32(p)} | uint64_t{Le32(p + 4)} << 32; }

// [offset, offset + size) inside [0, total), without wrapping.
bool InBounds(uint64_t offset, uint64_t size, uint64_t total) { return offset <= total && size <= total - offset; }

// CUDA's loaders take no length: they trust the ELF header's offsets and
// sizes. Every table and section the header points to must lie inside the
// payload before the bytes reach the driver (the payload's CRC already ruled
// out corruption in transit; this rules out a well-checksummed bad cubin).
Status CheckCubin(const std::vector<uint8_t>& code, const std::string& where) {
  const uint64_t n = code.size();
  const uint8_t* p = code.data();
  if (n >= 4 && Le32(p) == 0xBA55ED50u) {
    return Status(StatusCode::kInvalidArgument,
                  where + ": payload is a fatbinary; a CUBIN variant must hold one ELF cubin (the runtime, not the "
                          "driver, chooses among architectures)");
  }
  if (n < 64 || memcmp(p, "\x7f" "ELF", 4) != 0) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin of %" PRIu64 " bytes does not start with an ELF header", where.c_str(), n));
  }
  if (p[4] != 2 || p[5] != 1) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin ELF class %u data %u; expected 64-bit little endian (2, 1)", where.c_str(), p[4], p[5]));
  }
  const uint16_t machine = Le16(p + 18);
  if (machine != 190) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin ELF e_machine %u; expected EM_CUDA (190)", where.c_str(), machine));
  }
  const uint64_t phoff = Le64(p + 32);
  const uint16_t phentsize = Le16(p + 54), phnum = Le16(p + 56);
  if (phnum != 0 && (phentsize != 56 || !InBounds(phoff, uint64_t{phnum} * 56, n))) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin program headers (offset %" PRIu64 ", %u x %u bytes) exceed the payload's %" PRIu64
                         " bytes",
                         where.c_str(), phoff, phnum, phentsize, n));
  }
  for (uint16_t i = 0; i < phnum; ++i) {
    const uint8_t* ph = p + phoff + uint64_t{i} * 56;
    const uint64_t off = Le64(ph + 8), filesz = Le64(ph + 32);
    if (!InBounds(off, filesz, n)) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: cubin segment %u [%" PRIu64 ", +%" PRIu64 ") exceeds the payload's %" PRIu64 " bytes",
                           where.c_str(), i, off, filesz, n));
    }
  }
  const tl::formats::Elf64Sections elf = tl::formats::Elf64Sections::Parse(code);
  const tl::formats::Elf64Problem& bad = elf.problem();
  if (bad.kind == tl::formats::Elf64Problem::Kind::kSectionTable) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin section headers (offset %" PRIu64 ", %u x %u bytes) exceed the payload's %" PRIu64
                         " bytes",
                         where.c_str(), bad.table_offset, bad.count, bad.entry_size, n));
  }
  if (bad.kind == tl::formats::Elf64Problem::Kind::kSectionBounds) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: cubin section %u [%" PRIu64 ", +%" PRIu64 ") exceeds the payload's %" PRIu64 " bytes",
                         where.c_str(), bad.index, bad.offset, bad.size, n));
  }
  if (!elf.ok()) {  // magic and class were checked above
    return Status(StatusCode::kInvalidArgument, where + ": cubin is not a 64-bit little-endian ELF image");
  }
  return Status::Ok();
}

// PTX goes to the driver as a C string: CUDA takes no length and reads up to
// the first NUL. A NUL inside the text would silently drop the rest of the
// module, so it is an error; the terminating NUL is added here.
StatusOr<std::vector<uint8_t>> TerminatePtx(const std::vector<uint8_t>& code, const std::string& where) {
  size_t end = code.size();
  while (end > 0 && code[end - 1] == 0) --end;  // producers may already terminate it
  if (end == 0) return Status(StatusCode::kInvalidArgument, where + ": PTX payload is empty");
  if (const void* nul = memchr(code.data(), 0, end)) {
    const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(nul) - code.data());
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: PTX payload of %zu bytes holds a NUL byte at offset %zu; the driver would stop reading "
                         "there",
                         where.c_str(), code.size(), at));
  }
  std::vector<uint8_t> text(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(end));
  text.push_back(0);
  return text;
}

StatusCode LoadErrorCode(tl_CUresult rc) {
  switch (rc) {
    case kErrorNoBinaryForGpu:
    case kErrorUnsupportedPtxVersion:
      return StatusCode::kIncompatible;
    case kErrorInvalidImage:
    case kErrorInvalidPtx:
      return StatusCode::kInvalidArgument;
    case kErrorNotFound:
      return StatusCode::kNotFound;
    case kErrorOutOfMemory:
      return StatusCode::kResourceExhausted;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

std::string Driver::ErrorText(tl_CUresult rc) const {
  const char* name = nullptr;
  const char* text = nullptr;
  std::string out = (sym.cuGetErrorName && sym.cuGetErrorName(rc, &name) == kSuccess && name)
                        ? std::string(name) + " (" + std::to_string(rc) + ")"
                        : "CUresult " + std::to_string(rc);
  if (sym.cuGetErrorString && sym.cuGetErrorString(rc, &text) == kSuccess && text) out += std::string(": ") + text;
  return out;
}

Context::~Context() {
  // Balanced with the one retain in Handle(). Everything that used the
  // context holds a reference to this object, so nothing is left on it.
  if (ctx_) sym().cuDevicePrimaryCtxRelease_v2(device_);
}

StatusOr<void*> Context::Handle() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tried_) {
    tried_ = true;
    void* ctx = nullptr;
    if (tl_CUresult rc = sym().cuDevicePrimaryCtxRetain(&ctx, device_); rc != kSuccess) {
      retain_status_ = Error(StatusCode::kUnavailable, "retaining the primary context", "cuDevicePrimaryCtxRetain", rc);
    } else {
      ctx_ = ctx;
    }
  }
  if (!ctx_) return retain_status_;
  return ctx_;
}

Status Context::Error(StatusCode code, const std::string& what, const char* call, tl_CUresult rc) const {
  return Status(code, what + " on CUDA device '" + name_ + "': " + call + " failed with " + driver_->ErrorText(rc));
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    void* popped = nullptr;
    context_.sym().cuCtxPopCurrent_v2(&popped);
  }
}

Status ScopedContext::Enter(const char* what) {
  auto ctx = context_.Handle();
  if (!ctx.ok()) return ctx.status();
  void* current = nullptr;
  if (tl_CUresult rc = context_.sym().cuCtxGetCurrent(&current); rc != kSuccess) {
    return context_.Error(StatusCode::kInternal, what, "cuCtxGetCurrent", rc);
  }
  if (current == *ctx) return Status::Ok();
  if (tl_CUresult rc = context_.sym().cuCtxPushCurrent_v2(*ctx); rc != kSuccess) {
    return context_.Error(StatusCode::kInternal, what, "cuCtxPushCurrent_v2", rc);
  }
  pushed_ = true;
  return Status::Ok();
}

namespace {

// Loaded code for one variant: the module or library, the function, and the
// parameter buffer layout checked against the function.
class CudaExecutable : public Executable {
 public:
  CudaExecutable(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  ~CudaExecutable() override {
    if (!library_ && !module_) return;
    ScopedContext scope(*context_);
    if (!scope.Enter("unloading a module").ok()) return;
    if (library_) context_->sym().cuLibraryUnload(library_);
    if (module_) context_->sym().cuModuleUnload(module_);
  }
  std::string LoadNote() const override { return note_; }

  std::shared_ptr<Context> context_;
  std::string kernel_name;
  std::string variant_id;
  void* library_ = nullptr;  // CUlibrary, or
  void* module_ = nullptr;   // CUmodule
  void* function = nullptr;  // CUfunction
  std::vector<LoadRequest::ParamSlot> slots;
  std::vector<std::string> param_names;  // for messages
  uint32_t param_buffer_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
  uint32_t block[3] = {1, 1, 1};
  std::string note_;
  // TMA: the tensor maps the parameter buffer holds, and the encoded maps of
  // recent argument sets (key: map index, base address, shape), so that a
  // kernel launched again on the same tensors skips cuTensorMapEncodeTiled.
  std::vector<LoadRequest::TensorMapSpec> tensor_maps;
  std::vector<tl_dtype_t> param_dtypes;
  struct alignas(64) EncodedMap {
    uint8_t bytes[128];
  };
  using MapKey = std::tuple<int, uintptr_t, std::vector<int64_t>>;
  std::mutex map_mu;
  std::map<MapKey, EncodedMap> map_cache;
  static constexpr size_t kMapCacheEntries = 256;  // then cleared: a bound, not an LRU
};

// Records the time between two points of a stream with CUDA events (debug
// logging of synchronous launches).
class EventTimer {
 public:
  explicit EventTimer(const Symbols& sym) : sym_(sym) {
    if (sym_.cuEventCreate(&start_, 0) != kSuccess) start_ = nullptr;
    if (sym_.cuEventCreate(&stop_, 0) != kSuccess) stop_ = nullptr;
  }
  ~EventTimer() {
    if (start_) sym_.cuEventDestroy_v2(start_);
    if (stop_) sym_.cuEventDestroy_v2(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void Start(void* stream) {
    if (start_) sym_.cuEventRecord(start_, stream);
  }
  void Stop(void* stream) {
    if (stop_) sym_.cuEventRecord(stop_, stream);
  }
  // Milliseconds between Start and Stop after waiting for Stop; < 0 if unknown.
  float ElapsedMs() {
    float ms = -1.0f;
    if (!start_ || !stop_ || sym_.cuEventSynchronize(stop_) != kSuccess) return -1.0f;
    if (sym_.cuEventElapsedTime(&ms, start_, stop_) != kSuccess) return -1.0f;
    return ms;
  }

 private:
  const Symbols& sym_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

class CudaStream : public Stream {
 public:
  CudaStream(std::shared_ptr<Context> context, void* handle, bool owned)
      : context_(std::move(context)), handle_(handle), owned_(owned) {}
  ~CudaStream() override {
    // The C ABI promises that the last release waits for queued work.
    ScopedContext scope(*context_);
    if (!scope.Enter("releasing a stream").ok()) return;
    context_->sym().cuStreamSynchronize(handle_);
    if (owned_) context_->sym().cuStreamDestroy_v2(handle_);
  }

  Status Synchronize(uint64_t timeout_ns) override {
    ScopedContext scope(*context_);
    TL_RETURN_IF_ERROR(scope.Enter("synchronizing a stream"));
    const Symbols& s = context_->sym();
    if (timeout_ns == UINT64_MAX) {
      tl_CUresult rc = s.cuStreamSynchronize(handle_);
      if (rc != kSuccess) return context_->Error(StatusCode::kInternal, "work on a stream", "cuStreamSynchronize", rc);
      return Status::Ok();
    }
    // Poll: cuStreamSynchronize has no timeout. Sleep with a growing step (up
    // to 1 ms) so that a short wait stays short and a long one costs no CPU.
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, uint64_t{1} << 62));
    auto step = std::chrono::microseconds(2);
    for (;;) {
      tl_CUresult rc = s.cuStreamQuery(handle_);
      if (rc == kSuccess) return Status::Ok();
      if (rc != kErrorNotReady) return context_->Error(StatusCode::kInternal, "work on a stream", "cuStreamQuery", rc);
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status(StatusCode::kDeadlineExceeded,
                      Format("stream on CUDA device '%s': work still running after %.3f ms (timeout %" PRIu64 " ns)",
                             context_->name().c_str(), MsSince(start), timeout_ns));
      }
      std::this_thread::sleep_for(step);
      step = std::min(step * 2, std::chrono::microseconds(1000));
    }
  }

  void* handle() const { return handle_; }

 private:
  std::shared_ptr<Context> context_;
  void* handle_;  // CUstream; nullptr is the legacy default stream
  bool owned_;
};

class CudaDevice : public Device {
 public:
  CudaDevice(DeviceDesc desc, std::shared_ptr<Context> context, bool use_library, const Logger* logger)
      : context_(std::move(context)), use_library_(use_library), logger_(logger) {
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
  // Loads `image` (a checked cubin or NUL-terminated PTX) and gets the entry
  // point into `exec`; fills `log_note` with the JIT time and info log.
  Status LoadImage(const LoadRequest& request, const uint8_t* image, CudaExecutable* exec, std::string* log_note);
  // Cross-checks (or, with no slots in the bundle, derives) the parameter
  // layout against cuFuncGetParamInfo.
  Status CheckParams(const LoadRequest& request, CudaExecutable* exec, std::string* note);
  Status CheckFunction(const LoadRequest& request, CudaExecutable* exec, std::string* note);

  std::shared_ptr<Context> context_;
  bool use_library_;
  const Logger* logger_;
};

StatusOr<std::shared_ptr<Executable>> CudaDevice::Load(const LoadRequest& request) {
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  std::vector<uint8_t> ptx;
  const uint8_t* image = nullptr;
  if (request.code_kind == TL_CODE_CUBIN) {
    TL_RETURN_IF_ERROR(CheckCubin(request.code, where));
    image = request.code.data();
  } else if (request.code_kind == TL_CODE_PTX) {
    auto text = TerminatePtx(request.code, where);
    if (!text.ok()) return text.status();
    ptx = std::move(text.value());
    image = ptx.data();
  } else {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: code kind %d cannot be loaded by the CUDA backend (CUBIN or PTX)", where.c_str(),
                         request.code_kind));
  }
  if (request.entry_point.empty() || request.entry_point.find('\0') != std::string::npos) {
    return Status(StatusCode::kInvalidArgument, where + ": entry point is empty or holds a NUL byte");
  }
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter(("loading " + where).c_str()));
  auto exec = std::make_shared<CudaExecutable>(context_);
  exec->kernel_name = request.kernel_name;
  exec->variant_id = request.variant_id;
  exec->param_names = request.param_names;
  for (int a = 0; a < 3; ++a) exec->block[a] = request.block[a];
  if (!request.tensor_maps.empty()) {
    if (!context_->sym().cuTensorMapEncodeTiled) {
      return Status(StatusCode::kFailedPrecondition,
                    where + ": the variant passes TMA tensor maps, and the driver lacks cuTensorMapEncodeTiled (CUDA 12.0+)");
    }
    for (const auto& m : request.tensor_maps) {
      if (m.param < 0 || static_cast<size_t>(m.param) >= request.param_dtypes.size()) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: a tensor map names parameter %d of %zu", where.c_str(), m.param, request.param_dtypes.size()));
      }
    }
    exec->tensor_maps = request.tensor_maps;
    exec->param_dtypes = request.param_dtypes;
  }
  std::string note;
  TL_RETURN_IF_ERROR(LoadImage(request, image, exec.get(), &note));
  TL_RETURN_IF_ERROR(CheckFunction(request, exec.get(), &note));
  TL_RETURN_IF_ERROR(CheckParams(request, exec.get(), &note));
  exec->note_ = note;
  if (logger_ && logger_->enabled(TL_LOG_INFO)) {
    logger_->Log(TL_LOG_INFO, "cuda: loaded %s on '%s': %s", where.c_str(), desc_.name.c_str(), note.c_str());
  }
  return std::shared_ptr<Executable>(std::move(exec));
}

Status CudaDevice::LoadImage(const LoadRequest& request, const uint8_t* image, CudaExecutable* exec,
                             std::string* note) {
  const Symbols& s = context_->sym();
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  const bool is_ptx = request.code_kind == TL_CODE_PTX;
  // JIT options; the driver writes the wall time and the used log sizes back
  // into `values` (the float in the low bytes of its slot).
  std::vector<char> info(kJitLogBytes, 0), error(kJitLogBytes, 0);
  int options[5] = {kJitInfoLogBuffer, kJitInfoLogBufferSizeBytes, kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes,
                    kJitWallTime};
  void* values[5] = {info.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes)), error.data(),
                     reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes)), nullptr};
  const bool library = use_library_ && s.cuLibraryLoadData && s.cuLibraryGetKernel && s.cuKernelGetFunction &&
                       s.cuLibraryUnload;
  const char* loader = library ? "cuLibraryLoadData" : "cuModuleLoadDataEx";
  const auto start = std::chrono::steady_clock::now();
  const char* failed_call = nullptr;
  tl_CUresult rc = kSuccess;
  if (library) {
    // Errors can move from cuLibraryLoadData to first use (a wrong-arch image
    // loads and fails at cuLibraryGetKernel), so the function is fetched here,
    // during prepare, and never later.
    void* kernel = nullptr;
    if ((rc = s.cuLibraryLoadData(&exec->library_, image, options, values, 5, nullptr, nullptr, 0)) != kSuccess) {
      failed_call = "cuLibraryLoadData";
      exec->library_ = nullptr;
    } else if ((rc = s.cuLibraryGetKernel(&kernel, exec->library_, request.entry_point.c_str())) != kSuccess) {
      failed_call = "cuLibraryGetKernel";
    } else if ((rc = s.cuKernelGetFunction(&exec->function, kernel)) != kSuccess) {
      failed_call = "cuKernelGetFunction";
    }
  } else {
    if ((rc = s.cuModuleLoadDataEx(&exec->module_, image, 5, options, values)) != kSuccess) {
      failed_call = "cuModuleLoadDataEx";
      exec->module_ = nullptr;
    } else if ((rc = s.cuModuleGetFunction(&exec->function, exec->module_, request.entry_point.c_str())) != kSuccess) {
      failed_call = "cuModuleGetFunction";
    }
  }
  const double host_ms = MsSince(start);
  std::string error_log = OneLine(error.data(), error.size());
  std::string info_log = OneLine(info.data(), info.size());
  if (failed_call) {
    // A lazy failure through the library API may come without a log (the
    // JIT ran outside the call that had the buffers): load once more through
    // cuModuleLoadDataEx, only to capture the log.
    if (library && error_log.empty() && rc != kErrorNotFound && s.cuModuleLoadDataEx) {
      std::vector<char> retry(kJitLogBytes, 0);
      int o2[2] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
      void* v2[2] = {retry.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(kJitLogBytes))};
      void* module = nullptr;
      if (s.cuModuleLoadDataEx(&module, image, 2, o2, v2) == kSuccess) {
        s.cuModuleUnload(module);
      } else {
        error_log = OneLine(retry.data(), retry.size());
      }
    }
    std::string msg = where + (is_ptx ? " (PTX, driver JIT)" : " (cubin)") +
                      (rc == kErrorNotFound ? ", entry point '" + request.entry_point + "'" : std::string());
    Status st = context_->Error(LoadErrorCode(rc), "loading " + msg, failed_call, rc);
    std::string text = st.message();
    if (!error_log.empty()) text += "; JIT error log: " + error_log;
    if (!info_log.empty()) text += "; JIT info log: " + info_log;
    return Status(st.code(), text);
  }
  float jit_ms = 0.0f;
  memcpy(&jit_ms, &values[4], sizeof(jit_ms));
  if (is_ptx) {
    *note = Format("PTX JIT-compiled by the driver (%s): %.2f ms, CU_JIT_WALL_TIME %.2f ms", loader, host_ms,
                   static_cast<double>(jit_ms));
  } else {
    *note = Format("cubin loaded (%s): %.2f ms", loader, host_ms);
  }
  if (!info_log.empty()) *note += "; JIT info log: " + info_log;
  return Status::Ok();
}

Status CudaDevice::CheckFunction(const LoadRequest& request, CudaExecutable* exec, std::string* note) {
  const Symbols& s = context_->sym();
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  auto attr = [&](int a) {
    int v = -1;
    return s.cuFuncGetAttribute(&v, a, exec->function) == kSuccess ? v : -1;
  };
  const int regs = attr(kFuncNumRegs), local = attr(kFuncLocalSizeBytes), static_shared = attr(kFuncSharedSizeBytes);
  const int max_threads = attr(kFuncMaxThreadsPerBlock), ptx_version = attr(kFuncPtxVersion),
            binary_version = attr(kFuncBinaryVersion);
  const uint64_t threads = uint64_t{request.block[0]} * request.block[1] * request.block[2];
  // Register use limits the block size below the device's 1024; the launch
  // would fail with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES. Say so at prepare.
  if (max_threads > 0 && threads > static_cast<uint64_t>(max_threads)) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: block (%u, %u, %u) has %" PRIu64 " threads; the loaded function '%s' allows at most %d "
                         "(%d registers per thread)",
                         where.c_str(), request.block[0], request.block[1], request.block[2], threads,
                         request.entry_point.c_str(), max_threads, regs));
  }
  const uint64_t static_bytes = static_shared > 0 ? static_cast<uint64_t>(static_shared) : 0;
  const uint64_t total_shared = static_bytes + request.dynamic_shared_bytes;
  if (desc_.limits.max_shared_bytes && total_shared > desc_.limits.max_shared_bytes) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: %" PRIu64 " bytes of static + %u bytes of dynamic shared memory exceed the device's "
                         "opt-in maximum of %" PRIu64 " bytes per block",
                         where.c_str(), static_bytes, request.dynamic_shared_bytes, desc_.limits.max_shared_bytes));
  }
  exec->dynamic_shared_bytes = request.dynamic_shared_bytes;
  bool opt_in = false;
  if (total_shared > kDefaultSharedLimit) {
    tl_CUresult rc = s.cuFuncSetAttribute(exec->function, kFuncMaxDynamicSharedSizeBytes,
                                          static_cast<int>(request.dynamic_shared_bytes));
    if (rc != kSuccess) {
      return context_->Error(StatusCode::kFailedPrecondition,
                             Format("%s: opting in to %u bytes of dynamic shared memory (static %" PRIu64 ")",
                                    where.c_str(), request.dynamic_shared_bytes, static_bytes),
                             "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)", rc);
    }
    opt_in = true;
  }
  // PTX_VERSION is the virtual architecture the code was compiled for
  // (80 for compute_80 PTX), not the PTX ISA version of the text.
  *note += Format("; %d registers, %d B local, %" PRIu64 " B static + %u B dynamic shared%s; compute_%d code as SASS sm_%d",
                  regs, local, static_bytes, request.dynamic_shared_bytes,
                  opt_in ? " (opt-in above 48 KiB set)" : "", ptx_version, binary_version);
  return Status::Ok();
}

Status CudaDevice::CheckParams(const LoadRequest& request, CudaExecutable* exec, std::string* note) {
  const Symbols& s = context_->sym();
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  // What the driver knows of the function's parameters (CUDA 12.4+).
  struct DriverParam {
    size_t offset, size;
  };
  std::vector<DriverParam> driver;
  bool have_driver = false;
  if (s.cuFuncGetParamInfo) {
    for (size_t i = 0; i < 4096; ++i) {
      size_t off = 0, size = 0;
      tl_CUresult rc = s.cuFuncGetParamInfo(exec->function, i, &off, &size);
      if (rc == kSuccess) {
        driver.push_back({off, size});
        continue;
      }
      // The index past the last parameter answers INVALID_VALUE; anything
      // else means the driver cannot tell (the check is then skipped).
      have_driver = rc == kErrorInvalidValue;
      if (!have_driver) *note += "; parameter layout not cross-checked: cuFuncGetParamInfo failed with " +
                                 context_->driver().ErrorText(rc);
      break;
    }
  } else {
    *note += "; parameter layout not cross-checked: the driver lacks cuFuncGetParamInfo (CUDA < 12.4)";
  }
  auto driver_list = [&] {
    std::string out;
    for (const auto& d : driver) out += Format(" (%zu, %zu)", d.offset, d.size);
    return out.empty() ? std::string(" none") : out;
  };

  std::vector<LoadRequest::ParamSlot> slots = request.param_slots;
  uint32_t buffer_bytes = request.param_buffer_bytes;
  if (slots.empty() && request.param_count > 0) {
    // A bundle without a layout: take the driver's, one parameter per slot
    // in signature order, when it has exactly one per parameter.
    if (!have_driver || driver.size() != request.param_count) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: the bundle has no parameter layout (Launch.param_slots) for %u parameters, and the "
                           "driver %s",
                           where.c_str(), request.param_count,
                           have_driver ? ("reports " + std::to_string(driver.size()) + " parameters:" + driver_list()).c_str()
                                       : "cannot report one"));
    }
    for (uint32_t i = 0; i < request.param_count; ++i) {
      slots.push_back({static_cast<int>(i), -1, static_cast<uint32_t>(driver[i].offset),
                       static_cast<uint32_t>(driver[i].size), 0});
      buffer_bytes = std::max<uint32_t>(buffer_bytes, static_cast<uint32_t>(driver[i].offset + driver[i].size));
    }
    *note += "; parameter layout taken from the driver (the bundle has none)";
  }
  // Every parameter fills exactly one slot (the manifest reader checked
  // indices and bounds already).
  std::vector<int> filled(request.param_count, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].param >= 0 && static_cast<uint32_t>(slots[i].param) < request.param_count) ++filled[slots[i].param];
  }
  for (uint32_t p = 0; p < request.param_count; ++p) {
    if (filled[p] != 1) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: parameter %u fills %d slots of the parameter layout, expected 1", where.c_str(), p,
                           filled[p]));
    }
  }
  if (have_driver) {
    // Slot order follows offsets; the driver lists parameters in order.
    std::vector<size_t> order(slots.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return slots[a].offset < slots[b].offset; });
    if (order.size() != driver.size()) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: the bundle's parameter layout has %zu slots, the loaded function '%s' has %zu "
                           "parameters (driver offset, size:%s)",
                           where.c_str(), order.size(), request.entry_point.c_str(), driver.size(),
                           driver_list().c_str()));
    }
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& sl = slots[order[i]];
      if (sl.offset != driver[i].offset || sl.size != driver[i].size) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: parameter layout slot %zu (param %d) is at offset %u size %u in the bundle, but the "
                             "loaded function '%s' has parameter %zu at offset %zu size %zu",
                             where.c_str(), order[i], sl.param, sl.offset, sl.size, request.entry_point.c_str(), i,
                             driver[i].offset, driver[i].size));
      }
    }
    const size_t end = driver.empty() ? 0 : driver.back().offset + driver.back().size;
    if (buffer_bytes < end) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: param_buffer_bytes %u is smaller than the function's %zu bytes of parameters",
                           where.c_str(), buffer_bytes, end));
    }
    *note += Format("; parameter layout (%zu slots, %u bytes) matches cuFuncGetParamInfo", slots.size(), buffer_bytes);
  }
  exec->slots = std::move(slots);
  exec->param_buffer_bytes = buffer_bytes;
  return Status::Ok();
}

// Every tensor pointer must be memory this device's kernels can address:
// device memory of THIS device, managed memory, or page-locked host memory.
// The driver does not check: a pointer of another GPU or of pageable host
// memory launches "successfully" and faults (or silently reads another
// device's memory through peer access). One cuPointerGetAttributes call per
// tensor; skipped when the driver lacks it. Call with the context current.
Status CheckTensorPointers(const Context& context, const CudaExecutable& exec, const LaunchRequest& request,
                           const std::string& where) {
  const Symbols& s = context.sym();
  if (!s.cuPointerGetAttributes) return Status::Ok();
  constexpr int kAttrMemoryType = 2, kAttrIsManaged = 8, kAttrDeviceOrdinal = 9;
  constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2;
  for (size_t p = 0; p < request.tensor_pointers.size(); ++p) {
    void* ptr = request.tensor_pointers[p];
    if (!ptr || (p < request.is_scalar.size() && request.is_scalar[p])) continue;
    uint64_t memory_type = 0, is_managed = 0;  // zeroed: the driver writes 4 bytes / a bool
    int64_t ordinal = -1;
    int attrs[3] = {kAttrMemoryType, kAttrIsManaged, kAttrDeviceOrdinal};
    void* data[3] = {&memory_type, &is_managed, &ordinal};
    const std::string name = p < exec.param_names.size() ? exec.param_names[p] : std::string("?");
    tl_CUresult rc = s.cuPointerGetAttributes(3, attrs, data, reinterpret_cast<uintptr_t>(ptr));
    const unsigned type = static_cast<unsigned>(memory_type & 0xffffffffu);
    const int owner = static_cast<int>(ordinal & 0xffffffff);
    if (rc != kSuccess || type == 0) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s argument %zu '%s': pointer %p is not CUDA memory (pageable host memory or freed?); "
                           "expected device memory of CUDA device %d",
                           where.c_str(), p, name.c_str(), ptr, context.ordinal()));
    }
    if ((is_managed & 0xff) != 0 || type == kMemoryTypeHost) continue;
    if (type == kMemoryTypeDevice && owner != context.ordinal()) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s argument %zu '%s': pointer %p is memory of CUDA device %d, but the launch is on CUDA "
                           "device %d",
                           where.c_str(), p, name.c_str(), ptr, owner, context.ordinal()));
    }
  }
  return Status::Ok();
}

// The tensor map `index` of `exec` for this launch's arguments, written to
// `out` (a 128-byte slot): from the cache, or described (tensor_map.h: bad
// tensors fail naming the argument) and encoded by the driver.
Status FillTensorMap(const Context& context, CudaExecutable& exec, const LaunchRequest& request, size_t index,
                     const std::string& where, uint8_t* out, uint32_t size) {
  if (index >= exec.tensor_maps.size() || size != 128) {
    return Status(StatusCode::kInternal, Format("%s: tensor map slot %zu of %zu (%u bytes)", where.c_str(), index,
                                                exec.tensor_maps.size(), size));
  }
  const LoadRequest::TensorMapSpec& spec = exec.tensor_maps[index];
  const size_t p = static_cast<size_t>(spec.param);
  if (p >= request.is_scalar.size() || request.is_scalar[p] || p >= request.tensor_shapes.size()) {
    return Status(StatusCode::kInternal, Format("%s: tensor map %zu names parameter %zu, not a tensor argument",
                                                where.c_str(), index, p));
  }
  const std::string arg = Format("%s argument %zu '%s'", where.c_str(), p,
                                 p < exec.param_names.size() ? exec.param_names[p].c_str() : "?");
  CudaExecutable::MapKey key{static_cast<int>(index), reinterpret_cast<uintptr_t>(request.tensor_pointers[p]),
                             request.tensor_shapes[p]};
  {
    std::lock_guard<std::mutex> lock(exec.map_mu);
    auto it = exec.map_cache.find(key);
    if (it != exec.map_cache.end()) {
      memcpy(out, it->second.bytes, 128);
      return Status::Ok();
    }
  }
  auto e = DescribeTensorMap(spec, exec.param_dtypes[p], request.tensor_pointers[p], request.tensor_shapes[p], arg);
  if (!e.ok()) return e.status();
  CudaExecutable::EncodedMap map;
  memset(map.bytes, 0, sizeof map.bytes);
  const tl_CUresult rc = context.sym().cuTensorMapEncodeTiled(
      map.bytes, e->data_type, e->rank, e->address, e->dims, e->strides, e->box, e->element_strides, e->interleave,
      e->swizzle, e->l2_promotion, e->oob_fill);
  if (rc != kSuccess) {
    return context.Error(StatusCode::kInvalidArgument,
                         Format("encoding the tensor map of %s (rank %u, dims innermost first %" PRIu64 " %" PRIu64
                                " ..., box %u %u ...)",
                                arg.c_str(), e->rank, e->dims[0], e->dims[1], e->box[0], e->box[1]),
                         "cuTensorMapEncodeTiled", rc);
  }
  memcpy(out, map.bytes, 128);
  std::lock_guard<std::mutex> lock(exec.map_mu);
  if (exec.map_cache.size() >= CudaExecutable::kMapCacheEntries) exec.map_cache.clear();
  exec.map_cache.emplace(std::move(key), map);
  return Status::Ok();
}

Status CudaDevice::Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) {
  auto* exec = static_cast<CudaExecutable*>(executable.get());
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  // The context is current from here on: cuTensorMapEncodeTiled (FillTensorMap)
  // needs one (on the H200 it answered CUDA_ERROR_INVALID_CONTEXT without).
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter(("launching " + where).c_str()));
  // The parameter buffer, laid out from the checked slots. 16-byte aligned
  // storage: the driver copies it, but keep vector-typed slots aligned.
  struct alignas(16) Chunk {
    uint8_t bytes[16];
  };
  std::vector<Chunk> storage((exec->param_buffer_bytes + 15) / 16);
  uint8_t* buffer = reinterpret_cast<uint8_t*>(storage.data());
  if (!storage.empty()) memset(buffer, 0, storage.size() * sizeof(Chunk));
  for (size_t i = 0; i < exec->slots.size(); ++i) {
    const auto& sl = exec->slots[i];
    if (sl.param < 0 && sl.symbol >= 0) {
      // A shape symbol's value (bound from the arguments' shapes at validation).
      const size_t s = static_cast<size_t>(sl.symbol);
      if (s >= request.symbols.size()) {
        return Status(StatusCode::kInternal, Format("%s: slot %zu names shape symbol %zu of %zu bound", where.c_str(),
                                                    i, s, request.symbols.size()));
      }
      const int64_t value = request.symbols[s];
      if (sl.size == 4) {
        if (value < INT32_MIN || value > INT32_MAX) {
          return Status(StatusCode::kOutOfRange,
                        Format("%s: shape symbol %zu is %lld, which does not fit the kernel's 32-bit parameter",
                               where.c_str(), s, static_cast<long long>(value)));
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
    if (sl.param < 0 && sl.tensor_map >= 0) {
      TL_RETURN_IF_ERROR(FillTensorMap(*context_, *exec, request, static_cast<size_t>(sl.tensor_map), where,
                                       buffer + sl.offset, sl.size));
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

  TL_RETURN_IF_ERROR(CheckTensorPointers(*context_, *exec, request, where));
  const Symbols& s = context_->sym();
  void* cu_stream = stream ? static_cast<CudaStream*>(stream)->handle() : nullptr;
  const bool timed = !stream && logger_ && logger_->enabled(TL_LOG_DEBUG);
  std::unique_ptr<EventTimer> timer;
  if (timed) {
    timer = std::make_unique<EventTimer>(s);
    timer->Start(cu_stream);
  }
  tl_CUresult rc = s.cuLaunchKernel(exec->function, request.grid[0], request.grid[1], request.grid[2], exec->block[0],
                                    exec->block[1], exec->block[2], exec->dynamic_shared_bytes, cu_stream, nullptr,
                                    buffer_size ? extra : nullptr);
  if (rc != kSuccess) {
    return context_->Error(rc == kErrorInvalidValue ? StatusCode::kInvalidArgument : StatusCode::kInternal,
                           Format("launching %s with grid (%u, %u, %u), block (%u, %u, %u), %u B dynamic shared",
                                  where.c_str(), request.grid[0], request.grid[1], request.grid[2], exec->block[0],
                                  exec->block[1], exec->block[2], exec->dynamic_shared_bytes),
                           "cuLaunchKernel", rc);
  }
  if (stream) return Status::Ok();
  if (timer) timer->Stop(cu_stream);
  // Synchronous: wait, so that a fault inside the kernel is this call's error.
  if ((rc = s.cuStreamSynchronize(cu_stream)) != kSuccess) {
    return context_->Error(StatusCode::kInternal, "running " + where, "cuStreamSynchronize", rc);
  }
  if (timer) {
    logger_->Log(TL_LOG_DEBUG, "cuda: %s grid (%u, %u, %u) ran in %.3f ms (CUDA events)", where.c_str(),
                 request.grid[0], request.grid[1], request.grid[2], static_cast<double>(timer->ElapsedMs()));
  }
  return Status::Ok();
}

StatusOr<void*> CudaDevice::AllocateMemory(size_t size) {
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter("allocating device memory"));
  const Symbols& s = context_->sym();
  unsigned long long ptr = 0;
  // cuMemAlloc rejects 0 bytes; a 0-byte buffer still gets a distinct address.
  tl_CUresult rc = s.cuMemAlloc_v2(&ptr, size ? size : 1);
  if (rc != kSuccess) {
    std::string what = Format("allocating %zu bytes", size);
    size_t free_bytes = 0, total = 0;
    if (s.cuMemGetInfo_v2 && s.cuMemGetInfo_v2(&free_bytes, &total) == kSuccess) {
      what += Format(" (%zu of %zu bytes free)", free_bytes, total);
    }
    return context_->Error(rc == kErrorOutOfMemory ? StatusCode::kResourceExhausted : StatusCode::kInternal, what,
                           "cuMemAlloc_v2", rc);
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
}

void CudaDevice::FreeMemory(void* pointer) {
  if (!pointer) return;
  ScopedContext scope(*context_);
  if (Status st = scope.Enter("freeing device memory"); !st.ok()) {
    if (logger_) logger_->Log(TL_LOG_ERROR, "cuda: %s", st.message().c_str());
    return;
  }
  if (tl_CUresult rc = context_->sym().cuMemFree_v2(reinterpret_cast<uintptr_t>(pointer)); rc != kSuccess && logger_) {
    logger_->Log(TL_LOG_ERROR, "cuda: cuMemFree_v2(%p) on '%s' failed with %s", pointer, desc_.name.c_str(),
                 context_->driver().ErrorText(rc).c_str());
  }
}

Status CudaDevice::CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter("copying to the device"));
  const Symbols& s = context_->sym();
  const auto dst = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(device_dst));
  tl_CUresult rc = stream ? s.cuMemcpyHtoDAsync_v2(dst, host_src, size, static_cast<CudaStream*>(stream)->handle())
                          : s.cuMemcpyHtoD_v2(dst, host_src, size);
  if (rc != kSuccess) {
    return context_->Error(StatusCode::kInternal, Format("copying %zu bytes to device address %p", size, device_dst),
                           stream ? "cuMemcpyHtoDAsync_v2" : "cuMemcpyHtoD_v2", rc);
  }
  return Status::Ok();
}

Status CudaDevice::CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter("copying to the host"));
  const Symbols& s = context_->sym();
  const auto src = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(device_src));
  tl_CUresult rc = stream ? s.cuMemcpyDtoHAsync_v2(host_dst, src, size, static_cast<CudaStream*>(stream)->handle())
                          : s.cuMemcpyDtoH_v2(host_dst, src, size);
  if (rc != kSuccess) {
    return context_->Error(StatusCode::kInternal, Format("copying %zu bytes from device address %p", size, device_src),
                           stream ? "cuMemcpyDtoHAsync_v2" : "cuMemcpyDtoH_v2", rc);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Stream>> CudaDevice::CreateStream() {
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter("creating a stream"));
  void* handle = nullptr;
  // Flags 0 (blocking): the stream orders itself with the legacy default
  // stream, which the synchronous copies and launches of this runtime use, so
  // mixing the two stays ordered.
  if (tl_CUresult rc = context_->sym().cuStreamCreate(&handle, 0); rc != kSuccess) {
    return context_->Error(StatusCode::kInternal, "creating a stream", "cuStreamCreate", rc);
  }
  return std::unique_ptr<Stream>(std::make_unique<CudaStream>(context_, handle, true));
}

StatusOr<std::unique_ptr<Stream>> CudaDevice::WrapStream(void* native) {
  ScopedContext scope(*context_);
  TL_RETURN_IF_ERROR(scope.Enter("wrapping a CUstream"));
  const Symbols& s = context_->sym();
  // A CUstream of another context (another device, or a context the caller
  // created) would fail at the first launch with a less clear error.
  if (native && s.cuStreamGetCtx) {
    void* owner = nullptr;
    if (tl_CUresult rc = s.cuStreamGetCtx(native, &owner); rc != kSuccess) {
      return context_->Error(StatusCode::kInvalidArgument, Format("wrapping CUstream %p", native), "cuStreamGetCtx",
                             rc);
    }
    auto ctx = context_->Handle();
    if (!ctx.ok()) return ctx.status();
    if (owner != *ctx) {
      return Status(StatusCode::kInvalidArgument,
                    Format("wrapping CUstream %p: it belongs to CUDA context %p, not to the primary context %p of "
                           "device '%s'",
                           native, owner, *ctx, desc_.name.c_str()));
    }
  }
  return std::unique_ptr<Stream>(std::make_unique<CudaStream>(context_, native, false));
}

}  // namespace
}  // namespace cuda

std::unique_ptr<Device> CreateCudaDevice(DeviceDesc desc, int cu_device, const std::string& driver_path,
                                         const BackendOptions& options) {
  using namespace cuda;
  // The backend has the library open already; this second handle (dlopen
  // counts references) keeps it loaded for as long as the device's objects.
  auto lib = DynamicLibrary::Open("CUDA driver", {driver_path}, {});
  if (!lib.ok()) {
    if (options.logger) {
      options.logger->Log(TL_LOG_WARNING, "cuda: device '%s' can only be probed: %s", desc.name.c_str(),
                          lib.status().message().c_str());
    }
    return std::make_unique<ProbeOnlyDevice>(std::move(desc));
  }
  auto driver = std::make_shared<Driver>();
  driver->library = std::move(lib.value());
#define TL_CUDA_SYMBOL(required, name, params) \
  driver->sym.name = reinterpret_cast<tl_CUresult(*) params>(driver->library->Symbol(#name));
#include "cuda_symbols.h"
#undef TL_CUDA_SYMBOL
  std::string missing;
#define TL_CUDA_CHECK(name) \
  if (!driver->sym.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  TL_CUDA_LAUNCH_SYMBOLS(TL_CUDA_CHECK)
#undef TL_CUDA_CHECK
  if (!missing.empty()) {
    if (options.logger) {
      options.logger->Log(TL_LOG_WARNING, "cuda: device '%s' can only be probed: driver %s lacks %s",
                          desc.name.c_str(), driver_path.c_str(), missing.c_str());
    }
    return std::make_unique<ProbeOnlyDevice>(std::move(desc));
  }
  const char* loader = getenv("TL_CUDA_LOADER");
  const bool use_library = !(loader && strcmp(loader, "module") == 0);
  std::string name = desc.name;
  auto context = std::make_shared<Context>(std::move(driver), cu_device, std::move(name));
  return std::make_unique<CudaDevice>(std::move(desc), std::move(context), use_library, options.logger);
}

}  // namespace tl::rt
