#include "selection.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <set>

#include "cpu_isa.h"
#include "tilelang/runtime.h"

namespace tl::rt {

namespace {

const char* CodeKindName(int kind) {
  switch (kind) {
    case TL_CODE_CUBIN: return "cubin";
    case TL_CODE_PTX: return "PTX";
    case TL_CODE_HSACO: return "HSACO";
    case TL_CODE_SPIRV: return "SPIR-V";
    case TL_CODE_ELF: return "ELF";
    default: return "unknown code";
  }
}

int BackendOfCodeKind(int kind) {
  switch (kind) {
    case TL_CODE_CUBIN:
    case TL_CODE_PTX: return kBackendCuda;
    case TL_CODE_HSACO: return kBackendHip;
    case TL_CODE_SPIRV: return kBackendVulkan;
    case TL_CODE_ELF: return kBackendCpu;
    default: return kBackendUnknown;
  }
}

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// One variant's verdict: reject (non-empty reason) or a rank key + why.
struct Verdict {
  std::string reject;
  bool jit = false;
  bool exact = false;
  int64_t specificity = 0;
  int64_t level = 0;
  std::string why;
};

void CheckCuda(const DeviceDesc& d, const VariantDesc& v, const SelectionPolicy& policy, Verdict* out) {
  CudaArch a = ParseCudaArch(v.arch);
  if (!a.ok) {
    out->reject = Format("arch '%s' is not a CUDA target (sm_XY[a|f] or compute_XY[a|f])", v.arch.c_str());
    return;
  }
  if (v.code_kind == TL_CODE_CUBIN && a.ptx) {
    out->reject = Format("cubin with virtual arch '%s' (cubins name sm_XY)", v.arch.c_str());
    return;
  }
  if (v.code_kind == TL_CODE_PTX && !a.ptx) {
    out->reject = Format("PTX with real arch '%s' (PTX names compute_XY)", v.arch.c_str());
    return;
  }
  const int dev = d.cc_major * 10 + d.cc_minor;
  const int var = a.major * 10 + a.minor;
  const char* kind = a.ptx ? "PTX" : "cubin";
  if (a.suffix == 'a') {
    if (a.major != d.cc_major || a.minor != d.cc_minor) {
      out->reject = Format("%s %s is arch-specific: runs only on compute capability %d.%d, device is %d.%d", kind,
                           v.arch.c_str(), a.major, a.minor, d.cc_major, d.cc_minor);
      return;
    }
  } else if (a.suffix == 'f' || !a.ptx) {
    if (a.major != d.cc_major || d.cc_minor < a.minor) {
      out->reject = Format("%s %s runs on compute capability %d.x with minor >= %d, device is %d.%d", kind,
                           v.arch.c_str(), a.major, a.minor, d.cc_major, d.cc_minor);
      return;
    }
  } else if (dev < var) {
    out->reject = Format("PTX %s needs compute capability >= %d.%d, device is %d.%d", v.arch.c_str(), a.major,
                         a.minor, d.cc_major, d.cc_minor);
    return;
  }
  if (a.ptx) {
    if (policy.disable_jit) {
      out->reject = "PTX needs driver JIT, which is disabled (TL_DISABLE_JIT / TL_RUNTIME_FLAG_DISABLE_JIT)";
      return;
    }
    if (v.isa_version != 0 && v.isa_version > d.max_ptx_isa) {
      out->reject = Format("PTX ISA %u.%u is newer than the driver accepts (%u.%u, driver %u)", v.isa_version / 10,
                           v.isa_version % 10, d.max_ptx_isa / 10, d.max_ptx_isa % 10, d.driver_version);
      return;
    }
    out->jit = true;
  }
  out->exact = var == dev;
  out->specificity = a.suffix == 'a' ? 2 : a.suffix == 'f' ? 1 : 0;
  out->level = var;
  out->why = Format("%s %s on %d.%d%s%s", a.ptx ? "JIT-compiled PTX" : "native cubin", v.arch.c_str(), d.cc_major,
                    d.cc_minor, out->exact ? ", exact arch" : ", compatible arch",
                    a.suffix == 'a' ? ", arch-specific (a)" : a.suffix == 'f' ? ", family-specific (f)" : "");
}

void CheckHip(const DeviceDesc& d, const VariantDesc& v, Verdict* out) {
  AmdTarget t = ParseAmdTarget(v.arch);
  if (!t.ok) {
    out->reject = Format("arch '%s' is not an AMDGPU target id (gfxNNN[:sramecc±][:xnack±])", v.arch.c_str());
    return;
  }
  bool exact = t.processor == d.processor;
  if (!exact && !AmdGenericCovers(t.processor, d.processor)) {
    out->reject = Format("code for %s does not run on %s (no compatibility between gfx processors)",
                         t.processor.c_str(), d.processor.c_str());
    return;
  }
  auto check_mode = [&](const char* name, int want, int have) -> bool {
    if (want < 0) return true;
    if (have < 0) {
      out->reject = Format("target pins %s%c but %s has no %s mode", name, want ? '+' : '-', d.processor.c_str(), name);
      return false;
    }
    if (want != have) {
      out->reject = Format("target pins %s%c but the device runs with %s%c", name, want ? '+' : '-', name,
                           have ? '+' : '-');
      return false;
    }
    return true;
  };
  if (!check_mode("sramecc", t.sramecc, d.sramecc)) return;
  if (!check_mode("xnack", t.xnack, d.xnack)) return;
  // Code-object version (isa_version; 0: not stated). ROCm 6.0 made v5 the
  // default and loads v4 and v5; older runtimes are not known to load v5.
  // driver_version is HIP_VERSION (major * 10000000 + minor * 100000 + patch);
  // 0 means unknown and is not held against the variant.
  if (v.isa_version != 0) {
    if (v.isa_version < 4 || v.isa_version > 5) {
      out->reject = Format("code object v%u; this runtime knows which HIP runtimes load v4 and v5 only", v.isa_version);
      return;
    }
    if (v.isa_version == 5 && d.driver_version != 0 && d.driver_version < 60000000) {
      out->reject = Format("code object v5 needs HIP runtime 6.0 or newer (HIP_VERSION 60000000), the device's is %u",
                           d.driver_version);
      return;
    }
  }
  out->exact = exact;
  out->specificity = (t.xnack >= 0 ? 1 : 0) + (t.sramecc >= 0 ? 1 : 0);
  out->why = Format("native HSACO %s on %s%s, %lld pinned mode(s)", v.arch.c_str(), d.arch.c_str(),
                    exact ? ", exact processor" : ", generic target", static_cast<long long>(out->specificity));
}

uint32_t ParseSpirvArch(const std::string& arch) {
  // "spirv1.5" -> 15; "" or "spirv" -> 10.
  if (arch.empty() || arch == "spirv" || arch == "vulkan") return 10;
  unsigned major = 0, minor = 0;
  char tail = 0;
  if (sscanf(arch.c_str(), "spirv%u.%u%c", &major, &minor, &tail) == 2 && major == 1 && minor <= 9) {
    return major * 10 + minor;
  }
  return 0;
}

void CheckVulkan(const DeviceDesc& d, const VariantDesc& v, Verdict* out) {
  uint32_t want = ParseSpirvArch(v.arch);
  if (want == 0) {
    out->reject = Format("arch '%s' is not a SPIR-V version (spirv1.X)", v.arch.c_str());
    return;
  }
  uint32_t have = MaxSpirvVersion(d.driver_version, d.vk_features);
  if (want > have) {
    out->reject = Format("needs SPIR-V %u.%u, the device accepts up to %u.%u", want / 10, want % 10, have / 10,
                         have % 10);
    return;
  }
  if (v.subgroup_size != 0 && d.limits.subgroup_min != 0 &&
      (v.subgroup_size < d.limits.subgroup_min || v.subgroup_size > d.limits.subgroup_max)) {
    out->reject = Format("needs subgroup size %u, the device supports %u..%u", v.subgroup_size, d.limits.subgroup_min,
                         d.limits.subgroup_max);
    return;
  }
  if (v.push_constant_bytes > d.limits.max_push_constant_bytes) {
    out->reject = Format("needs %u bytes of push constants, the device allows %u", v.push_constant_bytes,
                         d.limits.max_push_constant_bytes);
    return;
  }
  out->exact = true;
  out->level = want;
  out->why = Format("native SPIR-V %u.%u", want / 10, want % 10);
}

void CheckCpu(const DeviceDesc& d, const VariantDesc& v, Verdict* out) {
  int level = ParseX86IsaLevel(v.arch);
  if (level == 0) {
    out->reject = Format("arch '%s' is not an x86-64 level (x86-64, x86-64-v2, -v3, -v4); host is %s", v.arch.c_str(),
                         d.arch.c_str());
    return;
  }
  if (d.cpu_arch != "x86-64") {
    out->reject = Format("x86-64 code, host is %s", d.cpu_arch.c_str());
    return;
  }
  if (level > d.cpu_isa_level) {
    std::string missing;
    std::set<std::string> have(d.cpu_features.begin(), d.cpu_features.end());
    for (int l = 2; l <= level; ++l) {
      for (const auto& f : X86LevelFlags(l)) {
        if (!have.count("cpu.x86." + f)) missing += (missing.empty() ? "" : ",") + f;
      }
    }
    out->reject = Format("needs %s, host is %s (missing: %s)%s%s", X86IsaLevelName(level).c_str(), d.arch.c_str(),
                         missing.c_str(), d.cpu_note.empty() ? "" : "; ", d.cpu_note.c_str());
    return;
  }
  out->exact = level == d.cpu_isa_level;
  out->level = level;
  out->why = Format("native ELF %s on host %s%s", X86IsaLevelName(level).c_str(), d.arch.c_str(),
                    out->exact ? ", exact level" : ", lower level");
}

bool HasFeature(const DeviceDesc& d, const std::string& token) {
  const std::vector<std::string>* set = nullptr;
  if (token.rfind("cpu.", 0) == 0 && d.backend == kBackendCpu) set = &d.cpu_features;
  if (token.rfind("vk.", 0) == 0 && d.backend == kBackendVulkan) set = &d.vk_features;
  return set && std::find(set->begin(), set->end(), token) != set->end();
}

}  // namespace

CudaArch ParseCudaArch(const std::string& arch) {
  CudaArch a;
  std::string digits;
  size_t pos = 0;
  if (arch.rfind("sm_", 0) == 0) {
    pos = 3;
  } else if (arch.rfind("compute_", 0) == 0) {
    pos = 8;
    a.ptx = true;
  } else {
    return a;
  }
  while (pos < arch.size() && isdigit(static_cast<unsigned char>(arch[pos]))) digits.push_back(arch[pos++]);
  if (pos < arch.size()) {
    if (pos + 1 != arch.size() || (arch[pos] != 'a' && arch[pos] != 'f')) return a;
    a.suffix = arch[pos];
  }
  if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0') return a;
  a.minor = digits.back() - '0';
  a.major = std::stoi(digits.substr(0, digits.size() - 1));
  a.ok = true;
  return a;
}

AmdTarget ParseAmdTarget(const std::string& arch) {
  AmdTarget t;
  size_t colon = arch.find(':');
  t.processor = arch.substr(0, colon);
  if (t.processor.rfind("gfx", 0) != 0 || t.processor.size() < 4) return t;
  while (colon != std::string::npos) {
    size_t next = arch.find(':', colon + 1);
    std::string feature = arch.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
    colon = next;
    if (feature.size() < 2) return t;
    char sign = feature.back();
    std::string name = feature.substr(0, feature.size() - 1);
    if (sign != '+' && sign != '-') return t;
    int* slot = name == "xnack" ? &t.xnack : name == "sramecc" ? &t.sramecc : nullptr;
    if (!slot || *slot != -1) return t;  // unknown or repeated feature
    *slot = sign == '+' ? 1 : 0;
  }
  t.ok = true;
  return t;
}

bool AmdGenericCovers(const std::string& generic, const std::string& processor) {
  // LLVM AMDGPUUsage "Generic Processors".
  static const struct {
    const char* generic;
    std::vector<std::string> members;
  } kTable[] = {
      {"gfx9-generic", {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}},
      {"gfx9-4-generic", {"gfx940", "gfx941", "gfx942", "gfx950"}},
      {"gfx10-1-generic", {"gfx1010", "gfx1011", "gfx1012", "gfx1013"}},
      {"gfx10-3-generic", {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}},
      {"gfx11-generic", {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}},
      {"gfx12-generic", {"gfx1200", "gfx1201"}},
  };
  for (const auto& row : kTable) {
    if (generic == row.generic) {
      return std::find(row.members.begin(), row.members.end(), processor) != row.members.end();
    }
  }
  return false;
}

Selection SelectVariants(const DeviceDesc& device, const std::vector<VariantDesc>& variants,
                         const SelectionPolicy& policy) {
  Selection sel;
  for (const auto& id : policy.force_variants) {
    for (const auto& v : variants) {
      if (v.id == id) sel.forced = id;
    }
    if (!sel.forced.empty()) break;
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    const VariantDesc& v = variants[i];
    Verdict verdict;
    if (!sel.forced.empty() && v.id != sel.forced) {
      verdict.reject = "not the forced variant (TL_FORCE_VARIANT=" + sel.forced + ")";
    } else if (v.backend != device.backend) {
      verdict.reject = Format("backend %s, device is %s", BackendName(v.backend), BackendName(device.backend));
    } else if (BackendOfCodeKind(v.code_kind) != v.backend) {
      verdict.reject = Format("code kind %s does not belong to backend %s", CodeKindName(v.code_kind),
                              BackendName(v.backend));
    } else if (v.min_driver != 0 && v.min_driver > device.driver_version) {
      verdict.reject = Format("needs driver version >= %u, device driver is %u", v.min_driver, device.driver_version);
    } else if (v.threads_per_block != 0 && device.limits.max_threads_per_block != 0 &&
               v.threads_per_block > device.limits.max_threads_per_block) {
      verdict.reject = Format("needs %u threads per block, device limit is %u", v.threads_per_block,
                              device.limits.max_threads_per_block);
    } else if (v.shared_bytes > device.limits.max_shared_bytes) {
      verdict.reject = Format("needs %u bytes of shared memory per block, device limit is %llu", v.shared_bytes,
                              static_cast<unsigned long long>(device.limits.max_shared_bytes));
    } else {
      for (const auto& f : v.features) {
        if (!HasFeature(device, f)) {
          verdict.reject = Format("needs feature %s, which the device does not have (or the runtime does not know)",
                                  f.c_str());
          break;
        }
      }
      if (verdict.reject.empty()) {
        switch (device.backend) {
          case kBackendCuda: CheckCuda(device, v, policy, &verdict); break;
          case kBackendHip: CheckHip(device, v, &verdict); break;
          case kBackendVulkan: CheckVulkan(device, v, &verdict); break;
          case kBackendCpu: CheckCpu(device, v, &verdict); break;
          default: verdict.reject = "unknown device backend"; break;
        }
      }
    }
    if (!verdict.reject.empty()) {
      sel.rejected.push_back({i, verdict.reject});
      continue;
    }
    RankedVariant r;
    r.index = i;
    r.jit = verdict.jit;
    r.why = verdict.why;
    if (!v.features.empty()) r.why += Format(", %zu feature token(s)", v.features.size());
    if (v.priority != 0) r.why += Format(", priority %d", v.priority);
    if (v.has_guards) r.why += ", argument guards";
    r.key = {verdict.jit ? 0 : 1, verdict.exact ? 1 : 0, verdict.specificity, verdict.level,
             static_cast<int64_t>(v.features.size()), v.priority, -static_cast<int64_t>(i)};
    sel.ranked.push_back(std::move(r));
  }
  // Keys are unique (the last component is the manifest index), so sort is
  // deterministic; std::sort also avoids libstdc++ 12's deprecated temporary
  // buffer, which clang flags under -Werror.
  std::sort(sel.ranked.begin(), sel.ranked.end(),
            [](const RankedVariant& a, const RankedVariant& b) { return a.key > b.key; });
  return sel;
}

namespace {

std::string DeviceLine(const DeviceDesc& device) {
  std::string s = Format("%s device '%s' (%s", BackendName(device.backend), device.name.c_str(), device.arch.c_str());
  if (device.backend == kBackendCuda) s += Format(", driver %u, PTX ISA <= %u.%u", device.driver_version,
                                                  device.max_ptx_isa / 10, device.max_ptx_isa % 10);
  if (device.backend == kBackendCpu && !device.cpu_note.empty()) s += ", " + device.cpu_note;
  return s + ")";
}

}  // namespace

std::string ExplainSelection(const std::string& kernel_name, const DeviceDesc& device,
                             const std::vector<VariantDesc>& variants, const Selection& sel) {
  std::string out = "kernel '" + kernel_name + "' on " + DeviceLine(device) + "\n";
  if (!sel.forced.empty()) out += "  forced by TL_FORCE_VARIANT: " + sel.forced + "\n";
  if (sel.ranked.empty()) {
    out += "  chosen: none (no variant runs on this device)\n";
  } else {
    const RankedVariant& best = sel.ranked.front();
    out += "  chosen: " + variants[best.index].id + (best.jit ? " [JIT: the driver compiles PTX at load]" : "") +
           " -- " + best.why + "\n";
    out += "  candidates, best first (launch takes the first whose argument guards hold):\n";
    for (size_t r = 0; r < sel.ranked.size(); ++r) {
      out += Format("    %zu. ", r + 1) + variants[sel.ranked[r].index].id + ": " + sel.ranked[r].why + "\n";
    }
  }
  if (!sel.rejected.empty()) {
    out += "  rejected:\n";
    for (const auto& rej : sel.rejected) out += "    " + variants[rej.index].id + ": " + rej.reason + "\n";
  }
  return out;
}

Status SelectionFailure(const std::string& kernel_name, const DeviceDesc& device,
                        const std::vector<VariantDesc>& variants, const Selection& sel) {
  std::string msg = "kernel '" + kernel_name + "': no variant runs on " + DeviceLine(device) + "; " +
                    std::to_string(variants.size()) + " variant(s) rejected:";
  for (const auto& rej : sel.rejected) msg += " [" + variants[rej.index].id + ": " + rej.reason + "]";
  return Status(StatusCode::kIncompatible, msg);
}

}  // namespace tl::rt
