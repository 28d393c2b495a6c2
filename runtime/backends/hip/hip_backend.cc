// The HIP backend: finds libamdhip64 with dlopen (.so.6, then .so.5),
// resolves the symbols of hip_symbols.h and enumerates devices into
// descriptions; the launch path is hip_device.h (CreateHipDevice).
//
// The device's full target ID ("gfx942:sramecc+:xnack-") exists only as
// hipDeviceProp_t::gcnArchName, and hipDeviceProp_t has two layouts (ROCm 5:
// hipGetDeviceProperties; ROCm 6: hipGetDevicePropertiesR0600). Rather than
// hard-code two struct layouts without a header, the properties are written
// into a zeroed 16 KiB buffer (both layouts are under 2 KiB) and the one
// NUL-terminated string there that parses as a target ID is taken
// (FindTargetId; `name` holds the marketing name, never a "gfx..." ID).
// Without it the device is listed with its processor from nothing: it is
// skipped with a warning, since selection could not match it.
//
// Attribute values (hipDeviceAttribute_t) are the ROCm 5.0+ numbering,
// unchanged in ROCm 6 (new ones were appended).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../../src/backend.h"
#include "../../src/dynamic_library.h"
#include "hip_device.h"

namespace tl::rt {

namespace {

enum : int {
  kAttrIntegrated = 16,
  kAttrMaxBlockDimX = 26,
  kAttrMaxBlockDimY = 27,
  kAttrMaxBlockDimZ = 28,
  kAttrMaxGridDimX = 29,
  kAttrMaxGridDimY = 30,
  kAttrMaxGridDimZ = 31,
  kAttrMaxThreadsPerBlock = 56,
  kAttrMultiprocessorCount = 63,
  kAttrMaxSharedMemoryPerBlock = 74,
  kAttrWarpSize = 87,
};

constexpr size_t kPropsBytes = 16 * 1024;

// "gfx942:sramecc+:xnack-" -> processor and modes; false if not a target ID.
bool ParseTargetId(const std::string& id, std::string* processor, int* xnack, int* sramecc) {
  if (id.size() < 4 || id.size() > 64 || id.rfind("gfx", 0) != 0) return false;
  size_t colon = id.find(':');
  std::string proc = id.substr(0, colon);
  for (char c : proc.substr(3)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-')) return false;
  }
  int x = -1, s = -1;
  while (colon != std::string::npos) {
    const size_t next = id.find(':', colon + 1);
    const std::string f = id.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
    colon = next;
    if (f == "xnack+" || f == "xnack-") {
      x = f.back() == '+';
    } else if (f == "sramecc+" || f == "sramecc-") {
      s = f.back() == '+';
    } else {
      return false;
    }
  }
  *processor = proc;
  *xnack = x;
  *sramecc = s;
  return true;
}

// The first NUL-terminated string in `props` that starts a field ("gfx" at
// the start of the buffer or after a NUL) and parses as a target ID.
std::string FindTargetId(const uint8_t* props, size_t n) {
  for (size_t i = 0; i + 4 < n; ++i) {
    if ((i == 0 || props[i - 1] == 0) && memcmp(props + i, "gfx", 3) == 0) {
      const void* end = memchr(props + i, 0, std::min<size_t>(n - i, 256));
      if (!end) continue;
      std::string id(reinterpret_cast<const char*>(props + i), static_cast<const uint8_t*>(end) - (props + i));
      std::string p;
      int x = 0, s = 0;
      if (ParseTargetId(id, &p, &x, &s)) return id;
    }
  }
  return "";
}

}  // namespace

std::unique_ptr<Backend> CreateHipBackend(const BackendOptions& options) {
  auto backend = std::make_unique<Backend>();
  backend->kind = kBackendHip;
  auto lib = DynamicLibrary::Open("HIP runtime", {"libamdhip64.so.6", "libamdhip64.so.5"}, options.driver_search_paths);
  if (!lib.ok()) {
    backend->status = lib.status();
    return backend;
  }
  auto driver = std::make_shared<hip::Driver>();
  driver->library = std::move(lib.value());
  const std::string missing = hip::ResolveSymbols(driver.get());
  const std::string path = driver->library->path();
  if (!missing.empty()) {
    backend->status = Status(StatusCode::kUnavailable, "HIP runtime " + path + " lacks required symbol(s): " + missing);
    return backend;
  }
  const hip::Symbols& s = driver->sym;
  if (int rc = s.hipInit(0); rc != 0) {
    backend->status =
        Status(StatusCode::kUnavailable, "HIP runtime " + path + ": hipInit failed with " + driver->ErrorText(rc));
    return backend;
  }
  int count = 0;
  if (int rc = s.hipGetDeviceCount(&count); rc != 0) {
    // ROCm without a GPU (or without /dev/kfd access) answers hipErrorNoDevice.
    backend->status = Status(StatusCode::kUnavailable,
                             "HIP runtime " + path + ": hipGetDeviceCount failed with " + driver->ErrorText(rc));
    return backend;
  }
  int version = 0;
  if (!s.hipRuntimeGetVersion || s.hipRuntimeGetVersion(&version) != 0) s.hipDriverGetVersion(&version);
  for (int i = 0; i < count; ++i) {
    DeviceDesc d;
    d.backend = kBackendHip;
    char name[256] = {0};
    s.hipDeviceGetName(name, sizeof(name) - 1, i);
    d.name = name;
    size_t mem = 0;
    s.hipDeviceTotalMem(&mem, i);
    d.memory_bytes = mem;
    d.driver_version = version > 0 ? static_cast<uint32_t>(version) : 0;
    auto attr = [&](int a) {
      int v = 0;
      return s.hipDeviceGetAttribute(&v, a, i) == 0 && v > 0 ? static_cast<uint32_t>(v) : 0u;
    };
    d.compute_units = attr(kAttrMultiprocessorCount);
    if (attr(kAttrIntegrated)) d.flags |= TL_DEVICE_FLAG_INTEGRATED;
    d.limits.max_threads_per_block = attr(kAttrMaxThreadsPerBlock);
    d.limits.max_block[0] = attr(kAttrMaxBlockDimX);
    d.limits.max_block[1] = attr(kAttrMaxBlockDimY);
    d.limits.max_block[2] = attr(kAttrMaxBlockDimZ);
    d.limits.max_grid[0] = attr(kAttrMaxGridDimX);
    d.limits.max_grid[1] = attr(kAttrMaxGridDimY);
    d.limits.max_grid[2] = attr(kAttrMaxGridDimZ);
    d.limits.max_shared_bytes = attr(kAttrMaxSharedMemoryPerBlock);
    std::vector<uint8_t> props(kPropsBytes, 0);
    int rc = -1;
    if (s.hipGetDevicePropertiesR0600) rc = s.hipGetDevicePropertiesR0600(props.data(), i);
    if (rc != 0 && s.hipGetDeviceProperties) {
      std::fill(props.begin(), props.end(), 0);
      rc = s.hipGetDeviceProperties(props.data(), i);
    }
    const std::string target = rc == 0 ? FindTargetId(props.data(), props.size()) : std::string();
    if (target.empty() || !ParseTargetId(target, &d.processor, &d.xnack, &d.sramecc)) {
      if (options.logger) {
        options.logger->Log(TL_LOG_WARNING,
                            "hip: device %d '%s' skipped: no gcnArchName target ID in its properties (%s)", i, name,
                            rc == 0 ? "no gfx... string" : ("hipGetDeviceProperties failed with " + driver->ErrorText(rc)).c_str());
      }
      continue;
    }
    // Wavefront sizes code may use: 64 on GCN/CDNA; RDNA (gfx10+) runs
    // wave32 and wave64 code.
    const uint32_t warp = attr(kAttrWarpSize);
    const bool rdna = d.processor.rfind("gfx10", 0) == 0 || d.processor.rfind("gfx11", 0) == 0 ||
                      d.processor.rfind("gfx12", 0) == 0;
    d.limits.subgroup_min = rdna ? 32 : (warp ? warp : 64);
    d.limits.subgroup_max = rdna ? 64 : (warp ? warp : 64);
    d.Finalize();
    backend->devices.push_back(CreateHipDevice(std::move(d), i, driver, options));
  }
  if (options.logger) options.logger->Log(TL_LOG_INFO, "hip: %s loaded, %d device(s)", path.c_str(), count);
  backend->state = driver;
  return backend;
}

}  // namespace tl::rt
