#include "device_desc.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "cpu_isa.h"
#include "tilelang/runtime.h"

namespace tl::rt {

const char* BackendName(int backend) {
  switch (backend) {
    case kBackendCuda: return "cuda";
    case kBackendHip: return "hip";
    case kBackendVulkan: return "vulkan";
    case kBackendCpu: return "cpu";
    default: return "unknown";
  }
}

int BackendFromName(std::string_view name) {
  for (int b = 1; b < kBackendCount; ++b) {
    if (name == BackendName(b)) return b;
  }
  return kBackendUnknown;
}

uint32_t MaxPtxIsaForDriver(uint32_t driver_version) {
  // (driver API version, PTX ISA x10) from the CUDA release notes.
  static const struct {
    uint32_t driver;
    uint32_t ptx;
  } kTable[] = {{11000, 70}, {11010, 71}, {11020, 72}, {11030, 73}, {11040, 74}, {11050, 75}, {11060, 76},
                {11070, 77}, {11080, 78}, {12000, 80}, {12010, 81}, {12020, 82}, {12030, 83}, {12040, 84},
                {12050, 85}, {12060, 85}, {12080, 87}, {12090, 88}, {13000, 90}};
  uint32_t best = 0;
  for (const auto& row : kTable) {
    if (driver_version >= row.driver) best = row.ptx;
  }
  return best;
}

uint32_t MaxSpirvVersion(uint32_t api_version, const std::vector<std::string>& features) {
  uint32_t major = api_version >> 22 & 0x7F;
  uint32_t minor = api_version >> 12 & 0x3FF;
  uint32_t v = 10;
  if (major > 1 || minor >= 3) {
    v = 16;
  } else if (minor == 2) {
    v = 15;
  } else if (minor == 1) {
    v = 13;
  }
  if (v < 14 && std::find(features.begin(), features.end(), "vk.ext.VK_KHR_spirv_1_4") != features.end()) v = 14;
  return v;
}

void DeviceDesc::Finalize() {
  switch (backend) {
    case kBackendCuda:
      arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
      if (max_ptx_isa == 0) max_ptx_isa = MaxPtxIsaForDriver(driver_version);
      break;
    case kBackendHip:
      arch = processor;
      if (sramecc >= 0) arch += sramecc ? ":sramecc+" : ":sramecc-";
      if (xnack >= 0) arch += xnack ? ":xnack+" : ":xnack-";
      break;
    case kBackendVulkan: {
      uint32_t v = MaxSpirvVersion(driver_version, vk_features);
      arch = "spirv" + std::to_string(v / 10) + "." + std::to_string(v % 10);
      std::sort(vk_features.begin(), vk_features.end());
      break;
    }
    case kBackendCpu: {
      CpuIsa isa = DeriveCpuIsa(cpuid, xcr0);
      cpu_isa_level = isa.level;
      cpu_features = std::move(isa.features);
      cpu_note = std::move(isa.note);
      arch = cpu_arch == "x86-64" ? X86IsaLevelName(cpu_isa_level) : cpu_arch;
      std::sort(cpuid.begin(), cpuid.end());
      break;
    }
    default:
      break;
  }
}

namespace {

Status GetU64(const json::Value& v, const char* key, uint64_t* out) {
  if (v.is_string()) {
    // Hex strings for bit masks ("0xe7").
    const std::string& s = v.as_string();
    char* end = nullptr;
    unsigned long long x = strtoull(s.c_str(), &end, 0);
    if (s.empty() || *end != '\0') return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': bad number \"%s\"", key, s.c_str());
    *out = x;
    return Status::Ok();
  }
  if (!v.is_integer() || v.as_int() < 0) {
    return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': expected a non-negative integer", key);
  }
  *out = static_cast<uint64_t>(v.as_int());
  return Status::Ok();
}

Status GetU32(const json::Value& v, const char* key, uint32_t* out) {
  uint64_t x = 0;
  TL_RETURN_IF_ERROR(GetU64(v, key, &x));
  if (x > UINT32_MAX) return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': %" PRIu64 " exceeds 32 bits", key, x);
  *out = static_cast<uint32_t>(x);
  return Status::Ok();
}

Status GetString(const json::Value& v, const char* key, std::string* out) {
  if (!v.is_string()) return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': expected a string", key);
  *out = v.as_string();
  return Status::Ok();
}

Status GetStrings(const json::Value& v, const char* key, std::vector<std::string>* out) {
  if (!v.is_array()) return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': expected an array of strings", key);
  out->clear();
  for (const auto& item : v.items()) {
    if (!item.is_string()) return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': expected an array of strings", key);
    out->push_back(item.as_string());
  }
  return Status::Ok();
}

Status GetU32x3(const json::Value& v, const char* key, uint32_t out[3]) {
  if (!v.is_array() || v.items().size() != 3) {
    return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': expected an array of 3 integers", key);
  }
  for (int i = 0; i < 3; ++i) TL_RETURN_IF_ERROR(GetU32(v.items()[i], key, &out[i]));
  return Status::Ok();
}

Status GetMode(const json::Value& v, const char* key, int* out) {
  std::string s;
  TL_RETURN_IF_ERROR(GetString(v, key, &s));
  if (s == "on") {
    *out = 1;
  } else if (s == "off") {
    *out = 0;
  } else if (s == "none") {
    *out = -1;
  } else {
    return MakeStatus(StatusCode::kInvalidArgument, "device key '%s': \"%s\" is not on, off or none", key, s.c_str());
  }
  return Status::Ok();
}

Status ParseLimits(const json::Value& v, DeviceLimits* l) {
  if (!v.is_object()) return MakeStatus(StatusCode::kInvalidArgument, "device key 'limits': expected an object");
  for (const auto& [key, value] : v.members()) {
    const char* k = key.c_str();
    if (key == "max_shared_bytes") {
      TL_RETURN_IF_ERROR(GetU64(value, k, &l->max_shared_bytes));
    } else if (key == "max_threads_per_block") {
      TL_RETURN_IF_ERROR(GetU32(value, k, &l->max_threads_per_block));
    } else if (key == "max_block") {
      TL_RETURN_IF_ERROR(GetU32x3(value, k, l->max_block));
    } else if (key == "max_grid") {
      TL_RETURN_IF_ERROR(GetU32x3(value, k, l->max_grid));
    } else if (key == "max_push_constant_bytes") {
      TL_RETURN_IF_ERROR(GetU32(value, k, &l->max_push_constant_bytes));
    } else if (key == "subgroup_min") {
      TL_RETURN_IF_ERROR(GetU32(value, k, &l->subgroup_min));
    } else if (key == "subgroup_max") {
      TL_RETURN_IF_ERROR(GetU32(value, k, &l->subgroup_max));
    } else {
      return MakeStatus(StatusCode::kInvalidArgument, "unknown limits key '%s'", k);
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<DeviceDesc> DeviceDescFromJson(const json::Value& value) {
  if (!value.is_object()) return MakeStatus(StatusCode::kInvalidArgument, "device description: expected an object");
  DeviceDesc d;
  std::string expected_arch;
  for (const auto& [key, v] : value.members()) {
    const char* k = key.c_str();
    if (key == "backend") {
      std::string s;
      TL_RETURN_IF_ERROR(GetString(v, k, &s));
      d.backend = BackendFromName(s);
      if (d.backend == kBackendUnknown) return MakeStatus(StatusCode::kInvalidArgument, "unknown backend \"%s\"", s.c_str());
    } else if (key == "name") {
      TL_RETURN_IF_ERROR(GetString(v, k, &d.name));
    } else if (key == "arch") {
      TL_RETURN_IF_ERROR(GetString(v, k, &expected_arch));
    } else if (key == "memory_bytes") {
      TL_RETURN_IF_ERROR(GetU64(v, k, &d.memory_bytes));
    } else if (key == "driver_version") {
      TL_RETURN_IF_ERROR(GetU32(v, k, &d.driver_version));
    } else if (key == "compute_units") {
      TL_RETURN_IF_ERROR(GetU32(v, k, &d.compute_units));
    } else if (key == "flags") {
      std::vector<std::string> flags;
      TL_RETURN_IF_ERROR(GetStrings(v, k, &flags));
      for (const auto& f : flags) {
        if (f == "integrated") {
          d.flags |= TL_DEVICE_FLAG_INTEGRATED;
        } else if (f == "software") {
          d.flags |= TL_DEVICE_FLAG_SOFTWARE;
        } else if (f == "can_launch") {
          d.flags |= TL_DEVICE_FLAG_CAN_LAUNCH;
        } else {
          return MakeStatus(StatusCode::kInvalidArgument, "unknown device flag \"%s\"", f.c_str());
        }
      }
    } else if (key == "limits") {
      TL_RETURN_IF_ERROR(ParseLimits(v, &d.limits));
    } else if (key == "cc") {
      uint32_t cc[3] = {0, 0, 0};
      if (!v.is_array() || v.items().size() != 2) return MakeStatus(StatusCode::kInvalidArgument, "device key 'cc': expected [major, minor]");
      TL_RETURN_IF_ERROR(GetU32(v.items()[0], k, &cc[0]));
      TL_RETURN_IF_ERROR(GetU32(v.items()[1], k, &cc[1]));
      d.cc_major = static_cast<int>(cc[0]);
      d.cc_minor = static_cast<int>(cc[1]);
    } else if (key == "max_ptx_isa") {
      TL_RETURN_IF_ERROR(GetU32(v, k, &d.max_ptx_isa));
    } else if (key == "processor") {
      TL_RETURN_IF_ERROR(GetString(v, k, &d.processor));
    } else if (key == "xnack") {
      TL_RETURN_IF_ERROR(GetMode(v, k, &d.xnack));
    } else if (key == "sramecc") {
      TL_RETURN_IF_ERROR(GetMode(v, k, &d.sramecc));
    } else if (key == "vk_features") {
      TL_RETURN_IF_ERROR(GetStrings(v, k, &d.vk_features));
    } else if (key == "cpuid") {
      TL_RETURN_IF_ERROR(GetStrings(v, k, &d.cpuid));
    } else if (key == "xcr0") {
      TL_RETURN_IF_ERROR(GetU64(v, k, &d.xcr0));
    } else if (key == "cpu_arch") {
      TL_RETURN_IF_ERROR(GetString(v, k, &d.cpu_arch));
    } else if (key == "comment" || key == "cpu_features" || key == "cpu_note") {
      // Documentation and derived fields written by DeviceDescToJson.
    } else {
      return MakeStatus(StatusCode::kInvalidArgument, "unknown device key '%s'", k);
    }
  }
  if (d.backend == kBackendUnknown) return MakeStatus(StatusCode::kInvalidArgument, "device description has no 'backend'");
  d.Finalize();
  if (!expected_arch.empty() && expected_arch != d.arch) {
    return MakeStatus(StatusCode::kInvalidArgument, "device 'arch' is \"%s\" but the description derives \"%s\"",
                      expected_arch.c_str(), d.arch.c_str());
  }
  return d;
}

namespace {

std::string StringArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += json::Quote(items[i]);
  }
  return out + "]";
}

std::string U32x3(const uint32_t v[3]) {
  return "[" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + "]";
}

const char* ModeName(int mode) { return mode > 0 ? "on" : mode == 0 ? "off" : "none"; }

}  // namespace

std::string DeviceDescToJson(const DeviceDesc& d) {
  std::string o = "{\n";
  o += "  \"backend\": " + json::Quote(BackendName(d.backend)) + ",\n";
  o += "  \"name\": " + json::Quote(d.name) + ",\n";
  o += "  \"arch\": " + json::Quote(d.arch) + ",\n";
  o += "  \"memory_bytes\": " + std::to_string(d.memory_bytes) + ",\n";
  o += "  \"driver_version\": " + std::to_string(d.driver_version) + ",\n";
  o += "  \"compute_units\": " + std::to_string(d.compute_units) + ",\n";
  std::vector<std::string> flags;
  if (d.flags & TL_DEVICE_FLAG_INTEGRATED) flags.push_back("integrated");
  if (d.flags & TL_DEVICE_FLAG_SOFTWARE) flags.push_back("software");
  if (d.flags & TL_DEVICE_FLAG_CAN_LAUNCH) flags.push_back("can_launch");
  o += "  \"flags\": " + StringArray(flags) + ",\n";
  switch (d.backend) {
    case kBackendCuda:
      o += "  \"cc\": [" + std::to_string(d.cc_major) + ", " + std::to_string(d.cc_minor) + "],\n";
      o += "  \"max_ptx_isa\": " + std::to_string(d.max_ptx_isa) + ",\n";
      break;
    case kBackendHip:
      o += "  \"processor\": " + json::Quote(d.processor) + ",\n";
      o += std::string("  \"xnack\": \"") + ModeName(d.xnack) + "\",\n";
      o += std::string("  \"sramecc\": \"") + ModeName(d.sramecc) + "\",\n";
      break;
    case kBackendVulkan:
      o += "  \"vk_features\": " + StringArray(d.vk_features) + ",\n";
      break;
    case kBackendCpu: {
      char xcr0[32];
      snprintf(xcr0, sizeof(xcr0), "0x%llx", static_cast<unsigned long long>(d.xcr0));
      o += "  \"cpu_arch\": " + json::Quote(d.cpu_arch) + ",\n";
      o += "  \"cpuid\": " + StringArray(d.cpuid) + ",\n";
      o += std::string("  \"xcr0\": \"") + xcr0 + "\",\n";
      o += "  \"cpu_features\": " + StringArray(d.cpu_features) + ",\n";
      o += "  \"cpu_note\": " + json::Quote(d.cpu_note) + ",\n";
      break;
    }
    default:
      break;
  }
  const DeviceLimits& l = d.limits;
  o += "  \"limits\": {\"max_shared_bytes\": " + std::to_string(l.max_shared_bytes) +
       ", \"max_threads_per_block\": " + std::to_string(l.max_threads_per_block) +
       ", \"max_block\": " + U32x3(l.max_block) + ", \"max_grid\": " + U32x3(l.max_grid) +
       ", \"max_push_constant_bytes\": " + std::to_string(l.max_push_constant_bytes) +
       ", \"subgroup_min\": " + std::to_string(l.subgroup_min) + ", \"subgroup_max\": " + std::to_string(l.subgroup_max) +
       "}\n";
  o += "}\n";
  return o;
}

}  // namespace tl::rt
