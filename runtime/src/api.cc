// The C ABI (runtime/include/tilelang/runtime.h) over the C++ core.
//
// Every entry point catches every exception and converts it to a status: no
// exception crosses the boundary. Objects are reference counted; a prepared
// kernel keeps its kernel's bundle and its device's runtime alive.
//
// Prepared-kernel cache: per (kernel, device) a slot holds a *weak* pointer to
// the live prepared object (a strong one would form a cycle kernel -> prepared
// -> bundle). A prepared object's count is decremented under its slot's
// mutex, and the cache hands out references under the same mutex, so an
// object whose count reached zero is never resurrected.
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "backend.h"
#include "manifest.h"
#include "bundle_generated.h"
#include "selection.h"
#include "tilelang/formats/reader.h"
#include "tilelang/runtime.h"
#include "validate.h"

#ifndef TL_RUNTIME_VERSION
#define TL_RUNTIME_VERSION "0.0.0"
#endif

using tl::Status;
using tl::StatusCode;
using tl::StatusOr;
using namespace tl::rt;

//===----------------------------------------------------------------------===//
// Status
//===----------------------------------------------------------------------===//

struct tl_status_s {
  tl_status_code_t code;
  std::string message;
};

namespace {

// Returned when a status cannot be allocated; never freed.
tl_status_s g_out_of_memory{TL_STATUS_RESOURCE_EXHAUSTED, "out of memory (while reporting an error)"};

tl_status_t ToC(const Status& s) {
  if (s.ok()) return nullptr;
  auto* out = new (std::nothrow) tl_status_s;
  if (!out) return &g_out_of_memory;
  try {
    out->code = static_cast<tl_status_code_t>(s.code());
    out->message = s.message();
  } catch (...) {
    delete out;
    return &g_out_of_memory;
  }
  return out;
}

tl_status_t Err(StatusCode code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
tl_status_t Err(StatusCode code, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return ToC(Status(code, buf));
}

}  // namespace

#define TL_TRY try {
#define TL_CATCH_STATUS                                                                        \
  }                                                                                            \
  catch (const std::bad_alloc&) {                                                              \
    return &g_out_of_memory;                                                                   \
  }                                                                                            \
  catch (const std::exception& e) {                                                            \
    return Err(StatusCode::kInternal, "internal error: %s", e.what());                         \
  }                                                                                            \
  catch (...) {                                                                                \
    return Err(StatusCode::kInternal, "internal error: unknown exception");                    \
  }

#define TL_CHECK_ARG(cond, ...) \
  if (!(cond)) return Err(StatusCode::kInvalidArgument, __VA_ARGS__)

extern "C" {

TL_API uint32_t tl_abi_version(void) { return TL_ABI_VERSION; }
TL_API const char* tl_runtime_version_string(void) { return TL_RUNTIME_VERSION; }

TL_API tl_status_code_t tl_status_code(tl_status_t status) { return status ? status->code : TL_STATUS_OK; }
TL_API const char* tl_status_message(tl_status_t status) { return status ? status->message.c_str() : ""; }
TL_API void tl_status_free(tl_status_t status) {
  if (status && status != &g_out_of_memory) delete status;
}
TL_API const char* tl_status_code_name(tl_status_code_t code) {
  switch (code) {
    case TL_STATUS_OK: return "OK";
    case TL_STATUS_CANCELLED: return "CANCELLED";
    case TL_STATUS_UNKNOWN: return "UNKNOWN";
    case TL_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case TL_STATUS_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case TL_STATUS_NOT_FOUND: return "NOT_FOUND";
    case TL_STATUS_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case TL_STATUS_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case TL_STATUS_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case TL_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case TL_STATUS_ABORTED: return "ABORTED";
    case TL_STATUS_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case TL_STATUS_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case TL_STATUS_INTERNAL: return "INTERNAL";
    case TL_STATUS_UNAVAILABLE: return "UNAVAILABLE";
    case TL_STATUS_DATA_LOSS: return "DATA_LOSS";
    case TL_STATUS_INCOMPATIBLE: return "INCOMPATIBLE";
  }
  return "UNKNOWN_CODE";
}

}  // extern "C"

//===----------------------------------------------------------------------===//
// Object definitions
//===----------------------------------------------------------------------===//

struct tl_device_s {
  tl_runtime_s* runtime = nullptr;  // owner; references on a device are references on it
  size_t index = 0;
  uint32_t ordinal = 0;
  Device* impl = nullptr;
  std::string json;
};

struct tl_runtime_s {
  std::atomic<int64_t> refs{1};
  uint64_t flags = 0;
  Logger logger;
  HostAllocator allocator;
  std::vector<std::string> driver_paths;
  std::string cpu_cache_dir;
  SelectionPolicy policy;
  std::string device_env;  // TL_DEVICE
  Status backend_status[kBackendCount];
  // Backends before devices: destroyed after them.
  std::unique_ptr<Backend> backends[kBackendCount];
  std::vector<std::unique_ptr<tl_device_s>> devices;
};

struct PreparedSlot {
  std::mutex mu;
  tl_prepared_s* live = nullptr;  // weak
};


struct tl_kernel_s : KernelInfo {
  tl_bundle_s* bundle = nullptr;  // owner; references on a kernel are references on it
  std::mutex prepared_mu;
  std::map<const tl_device_s*, std::shared_ptr<PreparedSlot>> prepared;
};

struct tl_bundle_s {
  std::atomic<int64_t> refs{1};
  tl_runtime_s* runtime = nullptr;  // retained
  const uint8_t* data = nullptr;
  size_t size = 0;
  void* owned = nullptr;  // copies, from the host allocator
  tl_release_fn_t release = nullptr;
  void* release_user = nullptr;
  tl::formats::BundleView view;
  std::vector<std::unique_ptr<tl_kernel_s>> kernels;
};

struct tl_prepared_s {
  std::atomic<int64_t> refs{1};
  tl_kernel_s* kernel = nullptr;  // retained (through its bundle)
  tl_device_s* device = nullptr;  // retained (through its runtime)
  std::shared_ptr<PreparedSlot> slot;
  Selection selection;
  std::string explain;
  struct Candidate {
    size_t variant = 0;
    bool jit = false;
    std::shared_ptr<Executable> exec;  // candidates[0]: loaded by prepare; the others: null until a launch needs them
  };
  // Ranked, up to the first without argument guards. Only the first is loaded
  // at prepare: a fallback (e.g. the PTX variant behind a cubin whose guards
  // a launch's arguments fail) is loaded -- for PTX, JIT-compiled -- by the
  // first launch that needs it, under load_mu (which also guards reading
  // candidates[i].exec for i > 0).
  std::vector<Candidate> candidates;
  std::mutex load_mu;
};

struct tl_buffer_s {
  std::atomic<int64_t> refs{1};
  tl_device_s* device = nullptr;  // retained
  void* pointer = nullptr;
  size_t size = 0;
  bool owned = false;
  tl_release_fn_t release = nullptr;
  void* release_user = nullptr;
};

struct tl_stream_s {
  std::atomic<int64_t> refs{1};
  tl_device_s* device = nullptr;  // retained
  std::unique_ptr<Stream> impl;
};

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

namespace {

bool EnvTrue(const char* v) {
  return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 ||
               strcasecmp(v, "on") == 0);
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void DestroyRuntime(tl_runtime_s* rt) { delete rt; }

}  // namespace

extern "C" {

TL_API void tl_runtime_options_init(tl_runtime_options_t* options) {
  if (!options) return;
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->abi_version = TL_ABI_VERSION;
}

TL_API tl_status_t tl_runtime_create(const tl_runtime_options_t* options, tl_runtime_t** out_runtime) {
  TL_CHECK_ARG(out_runtime, "tl_runtime_create: out_runtime is NULL");
  *out_runtime = nullptr;
  TL_TRY
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  if (options) {
    TL_CHECK_ARG(options->struct_size >= offsetof(tl_runtime_options_t, backend_mask),
                 "tl_runtime_create: options.struct_size %u is smaller than the first fields (%zu bytes)",
                 options->struct_size, offsetof(tl_runtime_options_t, backend_mask));
    memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
  }
  if ((o.abi_version >> 16) != TL_ABI_VERSION_MAJOR) {
    return Err(StatusCode::kIncompatible, "tl_runtime_create: caller built for ABI %u.%u, this library implements %u.%u",
               o.abi_version >> 16, o.abi_version & 0xFFFF, TL_ABI_VERSION_MAJOR, TL_ABI_VERSION_MINOR);
  }
  TL_CHECK_ARG(o.driver_search_path_count == 0 || o.driver_search_paths,
               "tl_runtime_create: driver_search_paths is NULL with a count of %zu", o.driver_search_path_count);
  TL_CHECK_ARG(!o.host_allocator.alloc == !o.host_allocator.free,
               "tl_runtime_create: host_allocator needs both alloc and free, or neither");
  auto rt = std::make_unique<tl_runtime_s>();
  rt->flags = o.flags;
  rt->logger = Logger(o.log, o.log_user, o.log_level);
  rt->allocator = HostAllocator(o.host_allocator);
  for (size_t i = 0; i < o.driver_search_path_count; ++i) {
    TL_CHECK_ARG(o.driver_search_paths[i], "tl_runtime_create: driver_search_paths[%zu] is NULL", i);
    rt->driver_paths.emplace_back(o.driver_search_paths[i]);
  }
  if (o.cpu_cache_dir) rt->cpu_cache_dir = o.cpu_cache_dir;
  rt->policy.disable_jit = (o.flags & TL_RUNTIME_FLAG_DISABLE_JIT) != 0;
  if (!(o.flags & TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT)) {
    if (EnvTrue(getenv("TL_DISABLE_JIT"))) rt->policy.disable_jit = true;
    if (const char* v = getenv("TL_FORCE_VARIANT")) rt->policy.force_variants = SplitCommas(v);
    if (const char* v = getenv("TL_DEVICE")) rt->device_env = v;
  }

  BackendOptions bo;
  bo.driver_search_paths = rt->driver_paths;
  bo.cpu_thread_count = o.cpu_thread_count;
  bo.cpu_no_memfd = (o.flags & TL_RUNTIME_FLAG_CPU_NO_MEMFD) != 0;
  bo.cpu_cache_dir = rt->cpu_cache_dir;
  bo.logger = &rt->logger;
  bo.allocator = &rt->allocator;
  using Factory = std::unique_ptr<Backend> (*)(const BackendOptions&);
  const struct {
    int kind;
    Factory create;
  } kFactories[] = {{kBackendCuda, CreateCudaBackend},
                    {kBackendHip, CreateHipBackend},
                    {kBackendVulkan, CreateVulkanBackend},
                    {kBackendCpu, CreateCpuBackend}};
  for (const auto& f : kFactories) {
    if (o.backend_mask != 0 && !(o.backend_mask & TL_BACKEND_BIT(f.kind))) {
      rt->backend_status[f.kind] = tl::MakeStatus(StatusCode::kFailedPrecondition,
                                                  "backend %s excluded by backend_mask 0x%x", BackendName(f.kind),
                                                  o.backend_mask);
      continue;
    }
    rt->backends[f.kind] = f.create(bo);
    Backend& b = *rt->backends[f.kind];
    rt->backend_status[f.kind] = b.status;
    if (!b.status.ok()) {
      rt->logger.Log(TL_LOG_INFO, "%s backend unavailable: %s", BackendName(f.kind), b.status.message().c_str());
      continue;
    }
    for (size_t i = 0; i < b.devices.size(); ++i) {
      auto dev = std::make_unique<tl_device_s>();
      dev->runtime = rt.get();
      dev->index = rt->devices.size();
      dev->ordinal = static_cast<uint32_t>(i);
      dev->impl = b.devices[i].get();
      dev->json = DeviceDescToJson(dev->impl->desc());
      rt->logger.Log(TL_LOG_INFO, "device %zu: %s '%s' (%s)", dev->index, BackendName(f.kind),
                     dev->impl->desc().name.c_str(), dev->impl->desc().arch.c_str());
      rt->devices.push_back(std::move(dev));
    }
  }
  *out_runtime = rt.release();
  return nullptr;
  TL_CATCH_STATUS
}

TL_API void tl_runtime_retain(tl_runtime_t* runtime) {
  if (runtime) runtime->refs.fetch_add(1, std::memory_order_relaxed);
}

TL_API void tl_runtime_release(tl_runtime_t* runtime) {
  if (runtime && runtime->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) DestroyRuntime(runtime);
}

TL_API tl_status_t tl_runtime_backend_status(tl_runtime_t* runtime, tl_backend_t backend) {
  TL_CHECK_ARG(runtime, "tl_runtime_backend_status: runtime is NULL");
  TL_CHECK_ARG(backend > TL_BACKEND_UNKNOWN && backend < kBackendCount, "tl_runtime_backend_status: backend %d unknown",
               static_cast<int>(backend));
  TL_TRY
  return ToC(runtime->backend_status[backend]);
  TL_CATCH_STATUS
}

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

TL_API size_t tl_runtime_device_count(tl_runtime_t* runtime) { return runtime ? runtime->devices.size() : 0; }

TL_API tl_status_t tl_runtime_device_at(tl_runtime_t* runtime, size_t index, tl_device_t** out_device) {
  TL_CHECK_ARG(out_device, "tl_runtime_device_at: out_device is NULL");
  *out_device = nullptr;
  TL_CHECK_ARG(runtime, "tl_runtime_device_at: runtime is NULL");
  if (index >= runtime->devices.size()) {
    return Err(StatusCode::kOutOfRange, "device index %zu out of range (%zu devices)", index, runtime->devices.size());
  }
  tl_runtime_retain(runtime);
  *out_device = runtime->devices[index].get();
  return nullptr;
}

}  // extern "C"

namespace {

std::string DeviceList(tl_runtime_s* rt) {
  std::string s;
  for (const auto& d : rt->devices) {
    s += (s.empty() ? "" : ", ") + std::to_string(d->index) + " = " + BackendName(d->impl->desc().backend) + ":" +
         std::to_string(d->ordinal) + " '" + d->impl->desc().name + "'";
  }
  return s.empty() ? "no devices" : s;
}

StatusOr<tl_device_s*> FindDevice(tl_runtime_s* rt, const std::string& spec) {
  if (!spec.empty() && std::all_of(spec.begin(), spec.end(), ::isdigit)) {
    size_t i = std::stoull(spec);
    if (i < rt->devices.size()) return rt->devices[i].get();
    return Status(StatusCode::kNotFound, "device '" + spec + "' out of range (" + DeviceList(rt) + ")");
  }
  std::string backend = spec;
  int ordinal = 0;
  if (size_t colon = spec.find(':'); colon != std::string::npos) {
    backend = spec.substr(0, colon);
    std::string num = spec.substr(colon + 1);
    if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit) || num.size() > 6) {
      return Status(StatusCode::kInvalidArgument, "device spec '" + spec + "': expected <backend>[:<ordinal>] or an index");
    }
    ordinal = std::stoi(num);
  }
  int kind = BackendFromName(backend);
  if (kind == kBackendUnknown) {
    return Status(StatusCode::kInvalidArgument,
                  "device spec '" + spec + "': unknown backend '" + backend + "' (cuda, hip, vulkan, cpu)");
  }
  for (const auto& d : rt->devices) {
    if (d->impl->desc().backend == kind && static_cast<int>(d->ordinal) == ordinal) return d.get();
  }
  std::string why = rt->backend_status[kind].ok() ? "" : "; " + rt->backend_status[kind].message();
  return Status(StatusCode::kNotFound, "no device '" + spec + "' (" + DeviceList(rt) + ")" + why);
}

}  // namespace

extern "C" {

TL_API tl_status_t tl_runtime_default_device(tl_runtime_t* runtime, const char* spec, tl_device_t** out_device) {
  TL_CHECK_ARG(out_device, "tl_runtime_default_device: out_device is NULL");
  *out_device = nullptr;
  TL_CHECK_ARG(runtime, "tl_runtime_default_device: runtime is NULL");
  TL_TRY
  std::string s = spec ? spec : runtime->device_env;
  tl_device_s* found = nullptr;
  if (!s.empty()) {
    auto d = FindDevice(runtime, s);
    if (!d.ok()) return ToC(d.status().Annotate(spec ? "device" : "TL_DEVICE"));
    found = *d;
  } else {
    // A GPU this runtime can launch on, then the CPU, then software GPU
    // implementations (lavapipe runs slower than the native CPU backend).
    for (bool software : {false, true}) {
      for (int kind : {kBackendCuda, kBackendHip, kBackendVulkan, kBackendCpu}) {
        for (const auto& d : runtime->devices) {
          const DeviceDesc& desc = d->impl->desc();
          if (!found && desc.backend == kind && (desc.flags & TL_DEVICE_FLAG_CAN_LAUNCH) &&
              ((desc.flags & TL_DEVICE_FLAG_SOFTWARE) != 0) == software) {
            found = d.get();
          }
        }
      }
    }
    if (!found) return Err(StatusCode::kNotFound, "no device this runtime can launch on (%s)", DeviceList(runtime).c_str());
  }
  tl_runtime_retain(runtime);
  *out_device = found;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API void tl_device_retain(tl_device_t* device) {
  if (device) tl_runtime_retain(device->runtime);
}
TL_API void tl_device_release(tl_device_t* device) {
  if (device) tl_runtime_release(device->runtime);
}

TL_API tl_status_t tl_device_info(tl_device_t* device, tl_device_info_t* out_info) {
  TL_CHECK_ARG(device, "tl_device_info: device is NULL");
  TL_CHECK_ARG(out_info, "tl_device_info: out_info is NULL");
  TL_CHECK_ARG(out_info->struct_size >= 8, "tl_device_info: out_info->struct_size %u too small", out_info->struct_size);
  const DeviceDesc& d = device->impl->desc();
  tl_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = out_info->struct_size;
  info.backend = static_cast<uint32_t>(d.backend);
  info.ordinal = device->ordinal;
  info.flags = d.flags;
  snprintf(info.name, sizeof(info.name), "%s", d.name.c_str());
  snprintf(info.arch, sizeof(info.arch), "%s", d.arch.c_str());
  info.memory_bytes = d.memory_bytes;
  info.driver_version = d.driver_version;
  info.compute_units = d.compute_units;
  memcpy(out_info, &info, std::min<size_t>(out_info->struct_size, sizeof(info)));
  return nullptr;
}

TL_API const char* tl_device_describe(tl_device_t* device) { return device ? device->json.c_str() : ""; }

}  // extern "C"

//===----------------------------------------------------------------------===//
// Bundles and kernels
//===----------------------------------------------------------------------===//

namespace {

void DestroyBundle(tl_bundle_s* b) {
  tl_runtime_s* rt = b->runtime;
  b->kernels.clear();
  if (b->release) {
    b->release(b->release_user, b->data, b->size);
  } else if (b->owned) {
    rt->allocator.Free(b->owned);
  }
  delete b;
  tl_runtime_release(rt);
}

tl_status_t OpenBundle(tl_runtime_s* rt, const uint8_t* data, size_t size, void* owned, tl_release_fn_t release,
                       void* release_user, const std::string& what, tl_bundle_t** out) {
  auto* b = new (std::nothrow) tl_bundle_s;
  if (!b) {
    // Ownership of the bytes passed on the call: give them back now.
    if (release) release(release_user, data, size);
    if (owned) rt->allocator.Free(owned);
    return &g_out_of_memory;
  }
  tl_runtime_retain(rt);
  b->runtime = rt;
  b->data = data;
  b->size = size;
  b->owned = owned;
  b->release = release;
  b->release_user = release_user;
  // From here on the bundle owns the bytes: every exit goes through
  // DestroyBundle, which frees the copy or calls `release` exactly once.
  try {
    auto view = tl::formats::BundleView::Open(std::span<const uint8_t>(data, size));
    if (!view.ok()) {
      DestroyBundle(b);
      return ToC(view.status().Annotate("opening bundle " + what));
    }
    b->view = view.value();
    const auto* kernels = b->view.manifest()->kernels();
    for (size_t i = 0; kernels && i < kernels->size(); ++i) {
      auto k = std::make_unique<tl_kernel_s>();
      k->bundle = b;
      Status s = KernelFromManifest(*kernels->Get(i), k.get());
      if (!s.ok()) {
        DestroyBundle(b);
        return ToC(s.Annotate("opening bundle " + what));
      }
      b->kernels.push_back(std::move(k));
    }
  } catch (...) {
    DestroyBundle(b);
    throw;
  }
  rt->logger.Log(TL_LOG_DEBUG, "opened bundle %s: %zu bytes, %zu kernel(s)", what.c_str(), size, b->kernels.size());
  *out = b;
  return nullptr;
}

}  // namespace

extern "C" {

TL_API tl_status_t tl_bundle_open_memory(tl_runtime_t* runtime, const void* data, size_t size,
                                         tl_release_fn_t release, void* release_user, tl_bundle_t** out_bundle) {
  // Ownership of borrowed bytes passes on the call: `release` runs exactly
  // once, on every path.
  auto fail = [&](tl_status_t s) {
    if (release) release(release_user, data, size);
    return s;
  };
  if (!out_bundle) return fail(Err(StatusCode::kInvalidArgument, "tl_bundle_open_memory: out_bundle is NULL"));
  *out_bundle = nullptr;
  if (!runtime) return fail(Err(StatusCode::kInvalidArgument, "tl_bundle_open_memory: runtime is NULL"));
  if (!data && size) return fail(Err(StatusCode::kInvalidArgument, "tl_bundle_open_memory: data is NULL with size %zu", size));
  try {
    if (release) {
      return OpenBundle(runtime, static_cast<const uint8_t*>(data), size, nullptr, release, release_user,
                        "from memory", out_bundle);
    }
    void* copy = runtime->allocator.Allocate(size, 64);
    if (!copy) return Err(StatusCode::kResourceExhausted, "tl_bundle_open_memory: copying %zu bytes failed", size);
    if (size) memcpy(copy, data, size);
    return OpenBundle(runtime, static_cast<const uint8_t*>(copy), size, copy, nullptr, nullptr, "from memory",
                      out_bundle);
  } catch (const std::bad_alloc&) {
    return &g_out_of_memory;
  } catch (const std::exception& e) {
    return Err(StatusCode::kInternal, "internal error: %s", e.what());
  }
}

TL_API tl_status_t tl_bundle_open_file(tl_runtime_t* runtime, const char* path, tl_bundle_t** out_bundle) {
  TL_CHECK_ARG(out_bundle, "tl_bundle_open_file: out_bundle is NULL");
  *out_bundle = nullptr;
  TL_CHECK_ARG(runtime, "tl_bundle_open_file: runtime is NULL");
  TL_CHECK_ARG(path, "tl_bundle_open_file: path is NULL");
  TL_TRY
  auto bytes = tl::formats::ReadFile(path);
  if (!bytes.ok()) return ToC(bytes.status());
  const size_t size = bytes->size();
  void* copy = runtime->allocator.Allocate(size, 64);
  if (!copy) return Err(StatusCode::kResourceExhausted, "tl_bundle_open_file: %zu bytes for %s", size, path);
  if (size) memcpy(copy, bytes->data(), size);
  return OpenBundle(runtime, static_cast<const uint8_t*>(copy), size, copy, nullptr, nullptr, path, out_bundle);
  TL_CATCH_STATUS
}

// <prefix>/share/tilelang: the nearest ancestor of this library's directory that holds
// share/tilelang (the library sits in <prefix>/<libdir>, or in the Python package below it);
// when none does, <libdir>/../share/tilelang. "" if the library's path is unknown.
static std::string InstalledKernelDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tl_bundle_open_by_name), &info) == 0 || info.dli_fname == nullptr) return "";
  char* real = realpath(info.dli_fname, nullptr);
  if (real == nullptr) return "";
  std::string dir(real);
  free(real);
  std::string fallback;
  for (int up = 0; up < 6; ++up) {
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    dir.resize(slash);
    const std::string candidate = dir + "/share/tilelang";
    if (up == 1) fallback = candidate;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return candidate;
  }
  return fallback;
}

TL_API tl_status_t tl_bundle_open_by_name(tl_runtime_t* runtime, const char* name, tl_bundle_t** out_bundle) {
  TL_CHECK_ARG(out_bundle, "tl_bundle_open_by_name: out_bundle is NULL");
  *out_bundle = nullptr;
  TL_CHECK_ARG(runtime, "tl_bundle_open_by_name: runtime is NULL");
  TL_CHECK_ARG(name && *name, "tl_bundle_open_by_name: name is NULL or empty");
  TL_TRY
  const std::string n(name);
  if (n.find('/') != std::string::npos) return tl_bundle_open_file(runtime, name, out_bundle);
  std::vector<std::string> dirs;
  if (const char* env = getenv("TILELANG_KERNEL_PATH"); env != nullptr) {
    const std::string p(env);
    for (size_t pos = 0; pos <= p.size();) {
      const size_t colon = std::min(p.find(':', pos), p.size());
      if (colon > pos) dirs.push_back(p.substr(pos, colon - pos));
      pos = colon + 1;
    }
  }
  if (std::string installed = InstalledKernelDir(); !installed.empty()) dirs.push_back(std::move(installed));
  const bool has_ext = n.size() > 4 && n.compare(n.size() - 4, 4, ".tlb") == 0;
  std::string looked;
  for (const std::string& d : dirs) {
    for (const std::string& file : has_ext ? std::vector<std::string>{n} : std::vector<std::string>{n + ".tlb", n}) {
      const std::string path = d + "/" + file;
      looked += (looked.empty() ? "" : ", ") + path;
      struct stat st {};
      if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return tl_bundle_open_file(runtime, path.c_str(), out_bundle);
    }
  }
  return Err(StatusCode::kNotFound,
             "tl_bundle_open_by_name: no bundle '%s' (looked at %s); install one under <prefix>/share/tilelang or "
             "set TILELANG_KERNEL_PATH to a directory holding %s%s",
             name, looked.empty() ? "nothing" : looked.c_str(), name, has_ext ? "" : ".tlb");
  TL_CATCH_STATUS
}

TL_API tl_status_t tl_bundle_verify(tl_bundle_t* bundle) {
  TL_CHECK_ARG(bundle, "tl_bundle_verify: bundle is NULL");
  TL_TRY
  return ToC(bundle->view.VerifyAllPayloads());
  TL_CATCH_STATUS
}

TL_API void tl_bundle_retain(tl_bundle_t* bundle) {
  if (bundle) bundle->refs.fetch_add(1, std::memory_order_relaxed);
}
TL_API void tl_bundle_release(tl_bundle_t* bundle) {
  if (bundle && bundle->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) DestroyBundle(bundle);
}

TL_API size_t tl_bundle_kernel_count(tl_bundle_t* bundle) { return bundle ? bundle->kernels.size() : 0; }

TL_API tl_status_t tl_bundle_kernel_at(tl_bundle_t* bundle, size_t index, tl_kernel_t** out_kernel) {
  TL_CHECK_ARG(out_kernel, "tl_bundle_kernel_at: out_kernel is NULL");
  *out_kernel = nullptr;
  TL_CHECK_ARG(bundle, "tl_bundle_kernel_at: bundle is NULL");
  if (index >= bundle->kernels.size()) {
    return Err(StatusCode::kOutOfRange, "kernel index %zu out of range (%zu kernels)", index, bundle->kernels.size());
  }
  tl_bundle_retain(bundle);
  *out_kernel = bundle->kernels[index].get();
  return nullptr;
}

TL_API tl_status_t tl_bundle_find_kernel(tl_bundle_t* bundle, const char* name, tl_kernel_t** out_kernel) {
  TL_CHECK_ARG(out_kernel, "tl_bundle_find_kernel: out_kernel is NULL");
  *out_kernel = nullptr;
  TL_CHECK_ARG(bundle, "tl_bundle_find_kernel: bundle is NULL");
  TL_CHECK_ARG(name, "tl_bundle_find_kernel: name is NULL");
  TL_TRY
  for (const auto& k : bundle->kernels) {
    if (k->sig.name == name) {
      tl_bundle_retain(bundle);
      *out_kernel = k.get();
      return nullptr;
    }
  }
  std::string names;
  for (size_t i = 0; i < bundle->kernels.size() && i < 20; ++i) names += (i ? ", " : "") + bundle->kernels[i]->sig.name;
  if (bundle->kernels.size() > 20) names += ", ...";
  return Err(StatusCode::kNotFound, "no kernel '%s' in the bundle (%zu kernels: %s)", name, bundle->kernels.size(),
             names.c_str());
  TL_CATCH_STATUS
}

TL_API void tl_kernel_retain(tl_kernel_t* kernel) {
  if (kernel) tl_bundle_retain(kernel->bundle);
}
TL_API void tl_kernel_release(tl_kernel_t* kernel) {
  if (kernel) tl_bundle_release(kernel->bundle);
}
TL_API const char* tl_kernel_name(tl_kernel_t* kernel) { return kernel ? kernel->sig.name.c_str() : ""; }
TL_API const char* tl_kernel_attr(tl_kernel_t* kernel, const char* key) {
  if (!kernel || !key) return nullptr;
  for (const auto& [k, v] : kernel->attrs) {
    if (k == key) return v.c_str();
  }
  return nullptr;
}

TL_API size_t tl_kernel_param_count(tl_kernel_t* kernel) { return kernel ? kernel->sig.params.size() : 0; }

TL_API tl_status_t tl_kernel_param_info(tl_kernel_t* kernel, size_t index, tl_param_info_t* out_info) {
  TL_CHECK_ARG(kernel, "tl_kernel_param_info: kernel is NULL");
  TL_CHECK_ARG(out_info, "tl_kernel_param_info: out_info is NULL");
  TL_CHECK_ARG(out_info->struct_size >= 8, "tl_kernel_param_info: out_info->struct_size %u too small", out_info->struct_size);
  if (index >= kernel->sig.params.size()) {
    return Err(StatusCode::kOutOfRange, "kernel '%s': parameter %zu out of range (%zu parameters)",
               kernel->sig.name.c_str(), index, kernel->sig.params.size());
  }
  const ParamSig& p = kernel->sig.params[index];
  tl_param_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = out_info->struct_size;
  info.kind = static_cast<uint32_t>(p.kind);
  info.name = p.name.c_str();
  info.dtype = p.dtype;
  info.access = static_cast<uint32_t>(p.access);
  info.rank = p.rank;
  info.ptr_alignment = p.ptr_alignment;
  info.binds_symbol = p.binds_symbol;
  memcpy(out_info, &info, std::min<size_t>(out_info->struct_size, sizeof(info)));
  return nullptr;
}

TL_API tl_status_t tl_kernel_param_dim(tl_kernel_t* kernel, size_t param_index, size_t dim_index,
                                       tl_dim_info_t* out_info) {
  TL_CHECK_ARG(kernel, "tl_kernel_param_dim: kernel is NULL");
  TL_CHECK_ARG(out_info, "tl_kernel_param_dim: out_info is NULL");
  TL_CHECK_ARG(out_info->struct_size >= 8, "tl_kernel_param_dim: out_info->struct_size %u too small", out_info->struct_size);
  if (param_index >= kernel->sig.params.size()) {
    return Err(StatusCode::kOutOfRange, "kernel '%s': parameter %zu out of range (%zu parameters)",
               kernel->sig.name.c_str(), param_index, kernel->sig.params.size());
  }
  const ParamSig& p = kernel->sig.params[param_index];
  if (dim_index >= p.shape.size()) {
    return Err(StatusCode::kOutOfRange, "kernel '%s' parameter '%s': dim %zu out of range (rank %d)",
               kernel->sig.name.c_str(), p.name.c_str(), dim_index, p.rank);
  }
  const DimSig& d = p.shape[dim_index];
  tl_dim_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = out_info->struct_size;
  info.symbol = d.symbol;
  info.static_size = d.static_size;
  info.symbol_name = d.symbol >= 0 ? kernel->sig.symbols[d.symbol].c_str() : nullptr;
  info.divisible_by = d.divisible_by;
  memcpy(out_info, &info, std::min<size_t>(out_info->struct_size, sizeof(info)));
  return nullptr;
}

TL_API size_t tl_kernel_symbol_count(tl_kernel_t* kernel) { return kernel ? kernel->sig.symbols.size() : 0; }
TL_API const char* tl_kernel_symbol_name(tl_kernel_t* kernel, size_t index) {
  return kernel && index < kernel->sig.symbols.size() ? kernel->sig.symbols[index].c_str() : nullptr;
}

TL_API size_t tl_kernel_variant_count(tl_kernel_t* kernel) { return kernel ? kernel->variants.size() : 0; }

}  // extern "C"

namespace {

void FillVariantInfo(const tl_kernel_s* k, size_t i, bool jit, tl_variant_info_t* out) {
  const VariantDesc& v = k->variants[i];
  const VariantLaunch& l = k->launches[i];
  tl_variant_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = out->struct_size;
  info.backend = static_cast<uint32_t>(v.backend);
  info.code_kind = static_cast<uint32_t>(v.code_kind);
  info.priority = v.priority;
  info.id = v.id.c_str();
  info.arch = v.arch.c_str();
  info.entry_point = k->entry_points[i].c_str();
  for (int a = 0; a < 3; ++a) info.block[a] = l.block[a];
  info.jit = jit ? 1 : 0;
  info.shared_bytes = v.backend == kBackendCpu ? l.cpu_scratch_bytes : l.shared_bytes;
  memcpy(out, &info, std::min<size_t>(out->struct_size, sizeof(info)));
}

}  // namespace

extern "C" {

TL_API tl_status_t tl_kernel_variant_info(tl_kernel_t* kernel, size_t index, tl_variant_info_t* out_info) {
  TL_CHECK_ARG(kernel, "tl_kernel_variant_info: kernel is NULL");
  TL_CHECK_ARG(out_info, "tl_kernel_variant_info: out_info is NULL");
  TL_CHECK_ARG(out_info->struct_size >= 8, "tl_kernel_variant_info: out_info->struct_size %u too small", out_info->struct_size);
  if (index >= kernel->variants.size()) {
    return Err(StatusCode::kOutOfRange, "kernel '%s': variant %zu out of range (%zu variants)", kernel->sig.name.c_str(),
               index, kernel->variants.size());
  }
  FillVariantInfo(kernel, index, kernel->variants[index].code_kind == TL_CODE_PTX, out_info);
  return nullptr;
}

}  // extern "C"

//===----------------------------------------------------------------------===//
// Prepared kernels
//===----------------------------------------------------------------------===//

namespace {

void DestroyPrepared(tl_prepared_s* p) {
  tl_kernel_s* k = p->kernel;
  tl_device_s* d = p->device;
  delete p;
  tl_kernel_release(k);
  tl_device_release(d);
}

// Reads, checks and loads variant `index` of `k` on `dev` (a JIT compile for PTX).
StatusOr<std::shared_ptr<Executable>> LoadVariant(const tl_kernel_s* k, tl_device_s* dev, size_t index) {
  {
    const VariantDesc& v = k->variants[index];
    const VariantLaunch& l = k->launches[index];
    auto code = k->bundle->view.ReadPayload(l.payload);
    if (!code.ok()) {
      return code.status().Annotate("kernel '" + k->sig.name + "' variant '" + v.id + "' payload " +
                                    std::to_string(l.payload));
    }
    LoadRequest req;
    req.kernel_name = k->sig.name;
    req.variant_id = v.id;
    req.entry_point = k->entry_points[index];
    req.arch = v.arch;
    req.code_kind = v.code_kind;
    req.code = std::move(code.value());
    req.param_count = static_cast<uint32_t>(k->sig.params.size());
    req.scratch_bytes = l.cpu_scratch_bytes;
    req.param_slots = l.param_slots;
    req.param_buffer_bytes = l.param_buffer_bytes;
    req.tensor_maps = l.tensor_maps;
    req.static_shared_bytes = l.static_shared_bytes;
    req.dynamic_shared_bytes = l.dynamic_shared_bytes;
    for (int a = 0; a < 3; ++a) req.block[a] = l.block[a];
    for (const ParamSig& ps : k->sig.params) {
      req.param_names.push_back(ps.name);
      req.param_dtypes.push_back(ps.dtype);
    }
    req.symbol_names = k->sig.symbols;
    req.features = v.features;
    req.required_shared_bytes = v.shared_bytes;
    req.required_subgroup_size = v.subgroup_size;
    req.required_push_constant_bytes = v.push_constant_bytes;
    req.vk_bindings = l.vk_bindings;
    req.vk_push = l.vk_push;
    req.vk_push_bytes = l.vk_push_bytes;
    return dev->impl->Load(req);
  }
}

StatusOr<tl_prepared_s*> BuildPrepared(tl_kernel_s* k, tl_device_s* dev) {
  tl_runtime_s* rt = dev->runtime;
  const DeviceDesc& desc = dev->impl->desc();
  auto p = std::make_unique<tl_prepared_s>();
  p->selection = SelectVariants(desc, k->variants, rt->policy);
  p->explain = ExplainSelection(k->sig.name, desc, k->variants, p->selection);
  if (p->selection.ranked.empty()) return SelectionFailure(k->sig.name, desc, k->variants, p->selection);
  // The candidates a launch might take: in rank order up to the first one
  // without argument guards (which always applies). Only the first is loaded
  // now; the others when a launch's arguments fail the guards before them.
  for (const RankedVariant& r : p->selection.ranked) {
    const VariantDesc& v = k->variants[r.index];
    if (p->candidates.empty()) {
      auto exec = LoadVariant(k, dev, r.index);
      if (!exec.ok()) return exec.status();
      if (std::string note = (*exec)->LoadNote(); !note.empty()) p->explain += "  loaded " + v.id + ": " + note + "\n";
      p->candidates.push_back({r.index, r.jit, *exec});
    } else {
      p->explain += "  fallback " + v.id + (r.jit ? " (PTX, JIT)" : "") +
                    ": loaded by the first launch whose arguments fail the guards of the variants above\n";
      p->candidates.push_back({r.index, r.jit, nullptr});
    }
    if (!v.has_guards) break;
  }
  const auto& best = p->candidates.front();
  if (best.jit) {
    rt->logger.Log(TL_LOG_WARNING, "kernel '%s' on '%s': no native code for %s; using PTX variant '%s' (driver JIT)",
                   k->sig.name.c_str(), desc.name.c_str(), desc.arch.c_str(), k->variants[best.variant].id.c_str());
  }
  rt->logger.Log(TL_LOG_INFO, "prepared kernel '%s' on '%s': variant '%s'", k->sig.name.c_str(), desc.name.c_str(),
                 k->variants[best.variant].id.c_str());
  return p.release();
}

}  // namespace

extern "C" {

TL_API tl_status_t tl_kernel_prepare(tl_kernel_t* kernel, tl_device_t* device, uint32_t flags,
                                     tl_prepared_t** out_prepared) {
  TL_CHECK_ARG(out_prepared, "tl_kernel_prepare: out_prepared is NULL");
  *out_prepared = nullptr;
  TL_CHECK_ARG(kernel, "tl_kernel_prepare: kernel is NULL");
  TL_CHECK_ARG(device, "tl_kernel_prepare: device is NULL");
  TL_CHECK_ARG(flags == 0, "tl_kernel_prepare: flags 0x%x; none are defined", flags);
  TL_TRY
  std::shared_ptr<PreparedSlot> slot;
  {
    std::lock_guard<std::mutex> lock(kernel->prepared_mu);
    auto& s = kernel->prepared[device];
    if (!s) s = std::make_shared<PreparedSlot>();
    slot = s;
  }
  // Held while loading: concurrent prepares of the same pair wait here and
  // then share the object.
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->live) {
    slot->live->refs.fetch_add(1, std::memory_order_relaxed);
    *out_prepared = slot->live;
    return nullptr;
  }
  auto built = BuildPrepared(kernel, device);
  if (!built.ok()) return ToC(built.status());
  tl_prepared_s* p = *built;
  tl_kernel_retain(kernel);
  tl_device_retain(device);
  p->kernel = kernel;
  p->device = device;
  p->slot = slot;
  slot->live = p;
  *out_prepared = p;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API void tl_prepared_retain(tl_prepared_t* prepared) {
  if (prepared) prepared->refs.fetch_add(1, std::memory_order_relaxed);
}

TL_API void tl_prepared_release(tl_prepared_t* prepared) {
  if (!prepared) return;
  std::shared_ptr<PreparedSlot> slot = prepared->slot;
  {
    std::lock_guard<std::mutex> lock(slot->mu);
    if (prepared->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (slot->live == prepared) slot->live = nullptr;
  }
  DestroyPrepared(prepared);
}

TL_API tl_status_t tl_prepared_variant_info(tl_prepared_t* prepared, tl_variant_info_t* out_info) {
  TL_CHECK_ARG(prepared, "tl_prepared_variant_info: prepared is NULL");
  TL_CHECK_ARG(out_info, "tl_prepared_variant_info: out_info is NULL");
  TL_CHECK_ARG(out_info->struct_size >= 8, "tl_prepared_variant_info: out_info->struct_size %u too small", out_info->struct_size);
  const auto& best = prepared->candidates.front();
  FillVariantInfo(prepared->kernel, best.variant, best.jit, out_info);
  return nullptr;
}

TL_API const char* tl_prepared_explain(tl_prepared_t* prepared) { return prepared ? prepared->explain.c_str() : ""; }

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

TL_API tl_status_t tl_buffer_allocate(tl_device_t* device, size_t size, tl_buffer_t** out_buffer) {
  TL_CHECK_ARG(out_buffer, "tl_buffer_allocate: out_buffer is NULL");
  *out_buffer = nullptr;
  TL_CHECK_ARG(device, "tl_buffer_allocate: device is NULL");
  TL_TRY
  auto mem = device->impl->AllocateMemory(size);
  if (!mem.ok()) return ToC(mem.status());
  auto* b = new tl_buffer_s;
  tl_device_retain(device);
  b->device = device;
  b->pointer = *mem;
  b->size = size;
  b->owned = true;
  *out_buffer = b;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API tl_status_t tl_buffer_import(tl_device_t* device, void* device_pointer, size_t size, tl_release_fn_t release,
                                    void* release_user, tl_buffer_t** out_buffer) {
  TL_CHECK_ARG(out_buffer, "tl_buffer_import: out_buffer is NULL");
  *out_buffer = nullptr;
  TL_CHECK_ARG(device, "tl_buffer_import: device is NULL");
  TL_CHECK_ARG(device_pointer || size == 0, "tl_buffer_import: pointer is NULL with size %zu", size);
  TL_TRY
  if (device_pointer) {
    if (Status s = device->impl->CheckImport(device_pointer, size); !s.ok()) return ToC(s);
  }
  auto* b = new tl_buffer_s;
  tl_device_retain(device);
  b->device = device;
  b->pointer = device_pointer;
  b->size = size;
  b->release = release;
  b->release_user = release_user;
  *out_buffer = b;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API void tl_buffer_retain(tl_buffer_t* buffer) {
  if (buffer) buffer->refs.fetch_add(1, std::memory_order_relaxed);
}

TL_API void tl_buffer_release(tl_buffer_t* buffer) {
  if (!buffer || buffer->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (buffer->owned) buffer->device->impl->FreeMemory(buffer->pointer);
  if (buffer->release) buffer->release(buffer->release_user, buffer->pointer, buffer->size);
  tl_device_s* d = buffer->device;
  delete buffer;
  tl_device_release(d);
}

TL_API size_t tl_buffer_size(tl_buffer_t* buffer) { return buffer ? buffer->size : 0; }
TL_API void* tl_buffer_device_pointer(tl_buffer_t* buffer) { return buffer ? buffer->pointer : nullptr; }

}  // extern "C"

namespace {

tl_status_t CheckCopy(const char* fn, tl_buffer_t* buffer, size_t offset, const void* host, size_t size,
                      tl_stream_t* stream) {
  TL_CHECK_ARG(buffer, "%s: buffer is NULL", fn);
  TL_CHECK_ARG(host || size == 0, "%s: host pointer is NULL with size %zu", fn, size);
  if (offset > buffer->size || buffer->size - offset < size) {
    return Err(StatusCode::kOutOfRange, "%s: range [%zu, %zu + %zu) exceeds the buffer's %zu bytes", fn, offset, offset,
               size, buffer->size);
  }
  if (stream && stream->device->impl != buffer->device->impl) {
    return Err(StatusCode::kInvalidArgument, "%s: the stream belongs to another device", fn);
  }
  return nullptr;
}

}  // namespace

extern "C" {

TL_API tl_status_t tl_buffer_copy_from_host(tl_buffer_t* buffer, size_t offset, const void* source, size_t size,
                                            tl_stream_t* stream) {
  if (tl_status_t s = CheckCopy("tl_buffer_copy_from_host", buffer, offset, source, size, stream)) return s;
  TL_TRY
  return ToC(buffer->device->impl->CopyToDevice(static_cast<uint8_t*>(buffer->pointer) + offset, source, size,
                                                stream ? stream->impl.get() : nullptr));
  TL_CATCH_STATUS
}

TL_API tl_status_t tl_buffer_copy_to_host(tl_buffer_t* buffer, size_t offset, void* destination, size_t size,
                                          tl_stream_t* stream) {
  if (tl_status_t s = CheckCopy("tl_buffer_copy_to_host", buffer, offset, destination, size, stream)) return s;
  TL_TRY
  return ToC(buffer->device->impl->CopyToHost(destination, static_cast<const uint8_t*>(buffer->pointer) + offset,
                                              size, stream ? stream->impl.get() : nullptr));
  TL_CATCH_STATUS
}

//===----------------------------------------------------------------------===//
// Streams
//===----------------------------------------------------------------------===//

TL_API tl_status_t tl_stream_create(tl_device_t* device, uint32_t flags, tl_stream_t** out_stream) {
  TL_CHECK_ARG(out_stream, "tl_stream_create: out_stream is NULL");
  *out_stream = nullptr;
  TL_CHECK_ARG(device, "tl_stream_create: device is NULL");
  TL_CHECK_ARG(flags == 0, "tl_stream_create: flags 0x%x; none are defined", flags);
  TL_TRY
  auto impl = device->impl->CreateStream();
  if (!impl.ok()) return ToC(impl.status());
  auto* s = new tl_stream_s;
  tl_device_retain(device);
  s->device = device;
  s->impl = std::move(impl.value());
  *out_stream = s;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API tl_status_t tl_stream_wrap_native(tl_device_t* device, void* native_stream, tl_stream_t** out_stream) {
  TL_CHECK_ARG(out_stream, "tl_stream_wrap_native: out_stream is NULL");
  *out_stream = nullptr;
  TL_CHECK_ARG(device, "tl_stream_wrap_native: device is NULL");
  TL_TRY
  auto impl = device->impl->WrapStream(native_stream);
  if (!impl.ok()) return ToC(impl.status());
  auto* s = new tl_stream_s;
  tl_device_retain(device);
  s->device = device;
  s->impl = std::move(impl.value());
  *out_stream = s;
  return nullptr;
  TL_CATCH_STATUS
}

TL_API tl_status_t tl_stream_synchronize(tl_stream_t* stream, uint64_t timeout_ns) {
  TL_CHECK_ARG(stream, "tl_stream_synchronize: stream is NULL");
  TL_TRY
  return ToC(stream->impl->Synchronize(timeout_ns));
  TL_CATCH_STATUS
}

TL_API void tl_stream_retain(tl_stream_t* stream) {
  if (stream) stream->refs.fetch_add(1, std::memory_order_relaxed);
}

TL_API void tl_stream_release(tl_stream_t* stream) {
  if (!stream || stream->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  tl_device_s* d = stream->device;
  delete stream;  // the stream's destructor drains queued work
  tl_device_release(d);
}

//===----------------------------------------------------------------------===//
// Launch
//===----------------------------------------------------------------------===//

TL_API tl_status_t tl_launch(tl_prepared_t* prepared, tl_stream_t* stream, size_t arg_count, const tl_arg_t* args,
                             const tl_launch_options_t* options) {
  TL_CHECK_ARG(prepared, "tl_launch: prepared is NULL");
  TL_CHECK_ARG(args || arg_count == 0, "tl_launch: args is NULL with %zu arguments", arg_count);
  if (options) {
    TL_CHECK_ARG(options->struct_size >= offsetof(tl_launch_options_t, flags),
                 "tl_launch: options->struct_size %u too small", options->struct_size);
  }
  TL_TRY
  tl_launch_options_t o;
  memset(&o, 0, sizeof(o));
  if (options) memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
  TL_CHECK_ARG(o.flags == 0, "tl_launch: flags 0x%x; none are defined", o.flags);
  const tl_kernel_s* k = prepared->kernel;
  tl_device_s* dev = prepared->device;
  if (stream && stream->device->impl != dev->impl) {
    return Err(StatusCode::kInvalidArgument, "kernel '%s': the stream belongs to another device", k->sig.name.c_str());
  }
  BoundArgs bound;
  if (Status s = ValidateArgs(k->sig, std::span<const tl_arg_t>(args, arg_count), &bound); !s.ok()) return ToC(s);

  // The first ranked variant whose guards hold.
  tl_prepared_s::Candidate* chosen = nullptr;
  std::string guard_failures;
  for (auto& c : prepared->candidates) {
    std::string why = CheckGuards(k->sig, k->launches[c.variant].guards, bound);
    if (why.empty()) {
      chosen = &c;
      break;
    }
    guard_failures += " [" + k->variants[c.variant].id + ": " + why + "]";
  }
  if (!chosen) {
    return Err(StatusCode::kInvalidArgument, "kernel '%s': no prepared variant's argument guards hold:%s",
               k->sig.name.c_str(), guard_failures.c_str());
  }
  const VariantDesc& v = k->variants[chosen->variant];
  const VariantLaunch& l = k->launches[chosen->variant];
  std::shared_ptr<Executable> exec;
  if (chosen == &prepared->candidates.front()) {
    exec = chosen->exec;  // loaded by prepare, never written again
  } else {
    std::lock_guard<std::mutex> lock(prepared->load_mu);
    if (!chosen->exec) {
      auto loaded = LoadVariant(k, dev, chosen->variant);
      if (!loaded.ok()) {
        return ToC(loaded.status().Annotate("kernel '" + k->sig.name + "': loading fallback variant '" + v.id +
                                            "' (the arguments fail the guards of:" + guard_failures + ")"));
      }
      chosen->exec = *loaded;
      dev->runtime->logger.Log(TL_LOG_INFO, "kernel '%s': loaded fallback variant '%s'%s (arguments fail:%s)",
                               k->sig.name.c_str(), v.id.c_str(), chosen->jit ? " (PTX, driver JIT)" : "",
                               guard_failures.c_str());
    }
    exec = chosen->exec;
  }

  uint64_t grid[3] = {1, 1, 1};
  const bool explicit_grid = o.grid[0] || o.grid[1] || o.grid[2];
  if (explicit_grid) {
    for (int a = 0; a < 3; ++a) grid[a] = o.grid[a] ? o.grid[a] : 1;  // {n, 0, 0} means {n, 1, 1}
  } else {
    if (l.grid.empty()) {
      return Err(StatusCode::kInvalidArgument,
                 "kernel '%s' variant '%s' has no grid expressions in the bundle; pass a grid in tl_launch_options_t",
                 k->sig.name.c_str(), v.id.c_str());
    }
    for (int a = 0; a < 3; ++a) {
      auto g = EvalGridExpr(k->sig, a, l.grid[a], bound);
      if (!g.ok()) return ToC(g.status());
      if (*g < 0) {
        return Err(StatusCode::kInvalidArgument, "kernel '%s': grid %c evaluates to %" PRId64, k->sig.name.c_str(),
                   "xyz"[a], *g);
      }
      grid[a] = static_cast<uint64_t>(*g);
    }
  }
  const DeviceDesc& desc = dev->impl->desc();
  const uint64_t shared = v.backend == kBackendCpu ? l.cpu_scratch_bytes : l.shared_bytes;
  if (Status s = CheckLaunchLimits(k->sig.name, v.id, grid, l.block, shared, desc.limits); !s.ok()) return ToC(s);

  LaunchRequest req;
  req.kernel_name = k->sig.name;
  req.variant_id = v.id;
  for (int a = 0; a < 3; ++a) {
    req.grid[a] = static_cast<uint32_t>(grid[a]);
    req.block[a] = l.block[a];
  }
  req.tensor_pointers.resize(arg_count, nullptr);
  req.scalar_slots.resize(arg_count, 0);
  req.is_scalar.resize(arg_count, 0);
  req.tensor_bytes.resize(arg_count, 0);
  req.tensor_shapes.resize(arg_count);
  for (size_t i = 0; i < arg_count; ++i) {
    if (args[i].kind == TL_ARG_SCALAR) {
      req.is_scalar[i] = 1;
      memcpy(&req.scalar_slots[i], args[i].value.bytes, args[i].scalar_size);
    } else {
      req.tensor_pointers[i] = args[i].tensor.data;
      // Dense row-major (validated): elements x element bytes, saturating.
      uint64_t bytes = (uint64_t{args[i].dtype.bits} * std::max<uint16_t>(args[i].dtype.lanes, 1) + 7) / 8;
      for (int32_t d = 0; d < args[i].tensor.rank; ++d) {
        const uint64_t extent = static_cast<uint64_t>(std::max<int64_t>(args[i].tensor.shape[d], 0));
        bytes = (extent != 0 && bytes > UINT64_MAX / extent) ? UINT64_MAX : bytes * extent;
      }
      req.tensor_bytes[i] = bytes;
      if (args[i].tensor.rank > 0) {
        req.tensor_shapes[i].assign(args[i].tensor.shape, args[i].tensor.shape + args[i].tensor.rank);
      }
    }
  }
  req.symbols = bound.symbols;
  dev->runtime->logger.Log(TL_LOG_DEBUG, "launch kernel '%s' variant '%s' grid (%u, %u, %u)%s", k->sig.name.c_str(),
                           v.id.c_str(), req.grid[0], req.grid[1], req.grid[2], stream ? " on a stream" : "");
  return ToC(dev->impl->Launch(exec, stream ? stream->impl.get() : nullptr, std::move(req)));
  TL_CATCH_STATUS
}

}  // extern "C"
