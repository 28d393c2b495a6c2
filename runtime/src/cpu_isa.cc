#include "cpu_isa.h"

#include <algorithm>
#include <cstdio>
#include <set>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tl::rt {

namespace {

bool NeedsYmm(const std::string& flag) {
  return flag == "avx" || flag == "avx2" || flag == "fma" || flag == "f16c" || flag == "avx_vnni" ||
         flag == "vaes" || flag == "vpclmulqdq";
}
bool NeedsZmm(const std::string& flag) { return flag.rfind("avx512", 0) == 0; }
bool NeedsAmx(const std::string& flag) { return flag.rfind("amx_", 0) == 0; }

}  // namespace

const std::vector<std::string>& X86LevelFlags(int level) {
  // psABI x86-64 micro-architecture levels. lahf_lm is CPUID's name for
  // LAHF/SAHF in 64-bit mode; lzcnt is reported as abm on AMD.
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kV2 = {"cx16", "lahf_lm", "popcnt", "sse3", "sse4_1", "sse4_2", "ssse3"};
  static const std::vector<std::string> kV3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe",
                                               "osxsave"};
  static const std::vector<std::string> kV4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
  switch (level) {
    case 2: return kV2;
    case 3: return kV3;
    case 4: return kV4;
    default: return kNone;
  }
}

CpuIsa DeriveCpuIsa(const std::vector<std::string>& cpuid_flags, uint64_t xcr0) {
  std::set<std::string> flags(cpuid_flags.begin(), cpuid_flags.end());
  if (flags.count("abm")) flags.insert("lzcnt");
  const bool osxsave = flags.count("osxsave") != 0;
  const bool ymm = osxsave && (xcr0 & (kXcr0Sse | kXcr0Avx)) == (kXcr0Sse | kXcr0Avx);
  const bool zmm = ymm && (xcr0 & kXcr0Avx512) == kXcr0Avx512;
  const bool amx = osxsave && (xcr0 & kXcr0Amx) == kXcr0Amx;

  CpuIsa isa;
  std::set<std::string> usable;
  bool dropped_ymm = false, dropped_zmm = false, dropped_amx = false;
  for (const std::string& f : flags) {
    if (NeedsZmm(f) && !zmm) {
      dropped_zmm = true;
      continue;
    }
    if (NeedsYmm(f) && !ymm) {
      dropped_ymm = true;
      continue;
    }
    if (NeedsAmx(f) && !amx) {
      dropped_amx = true;
      continue;
    }
    usable.insert(f);
  }
  char xcr0_text[32];
  snprintf(xcr0_text, sizeof(xcr0_text), "0x%llx", static_cast<unsigned long long>(xcr0));
  if (dropped_ymm) isa.note += std::string("AVX in CPUID but YMM state not enabled by the OS (XCR0 ") + xcr0_text + "); ";
  if (dropped_zmm && !dropped_ymm) {
    isa.note += std::string("AVX-512 in CPUID but not enabled by the OS (XCR0 ") + xcr0_text + "); ";
  }
  if (dropped_amx) isa.note += std::string("AMX in CPUID but tile state not enabled by the OS (XCR0 ") + xcr0_text + "); ";
  if (!isa.note.empty()) isa.note.resize(isa.note.size() - 2);

  isa.level = 1;
  for (int level = 2; level <= 4; ++level) {
    bool all = true;
    for (const std::string& f : X86LevelFlags(level)) all = all && usable.count(f);
    if (!all) break;
    isa.level = level;
  }
  for (const std::string& f : usable) isa.features.push_back("cpu.x86." + f);
  return isa;
}

std::vector<std::string> ProbeCpuidFlags(uint64_t* out_xcr0) {
  std::vector<std::string> flags;
  *out_xcr0 = 0;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  auto bit = [&](unsigned reg, int n, const char* name) {
    if (reg & (1u << n)) flags.emplace_back(name);
  };
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
    bit(d, 25, "sse");
    bit(d, 26, "sse2");
    bit(c, 0, "sse3");
    bit(c, 1, "pclmulqdq");
    bit(c, 9, "ssse3");
    bit(c, 12, "fma");
    bit(c, 13, "cx16");
    bit(c, 19, "sse4_1");
    bit(c, 20, "sse4_2");
    bit(c, 22, "movbe");
    bit(c, 23, "popcnt");
    bit(c, 25, "aes");
    bit(c, 26, "xsave");
    bit(c, 27, "osxsave");
    bit(c, 28, "avx");
    bit(c, 29, "f16c");
    if (c & (1u << 27)) {
      // XGETBV with ECX=0 reads XCR0; only legal when OSXSAVE is set.
      unsigned lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      *out_xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
    }
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    bit(b, 3, "bmi1");
    bit(b, 5, "avx2");
    bit(b, 8, "bmi2");
    bit(b, 16, "avx512f");
    bit(b, 17, "avx512dq");
    bit(b, 21, "avx512ifma");
    bit(b, 28, "avx512cd");
    bit(b, 30, "avx512bw");
    bit(b, 31, "avx512vl");
    bit(c, 1, "avx512vbmi");
    bit(c, 6, "avx512vbmi2");
    bit(c, 9, "vaes");
    bit(c, 10, "vpclmulqdq");
    bit(c, 11, "avx512_vnni");
    bit(c, 12, "avx512_bitalg");
    bit(c, 14, "avx512_vpopcntdq");
    bit(d, 22, "amx_bf16");
    bit(d, 23, "avx512_fp16");
    bit(d, 24, "amx_tile");
    bit(d, 25, "amx_int8");
    unsigned max_sub = a;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      bit(a, 4, "avx_vnni");
      bit(a, 5, "avx512_bf16");
    }
  }
  unsigned max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext >= 0x80000001u && __get_cpuid(0x80000001u, &a, &b, &c, &d)) {
    bit(c, 0, "lahf_lm");
    bit(c, 5, "lzcnt");
  }
  std::sort(flags.begin(), flags.end());
#endif
  return flags;
}

int ParseX86IsaLevel(const std::string& arch) {
  std::string a = arch;
  std::replace(a.begin(), a.end(), '_', '-');
  if (a == "x86-64") return 1;
  if (a == "x86-64-v1") return 1;
  if (a == "x86-64-v2") return 2;
  if (a == "x86-64-v3") return 3;
  if (a == "x86-64-v4") return 4;
  return 0;
}

std::string X86IsaLevelName(int level) {
  if (level <= 1) return "x86-64";
  return "x86-64-v" + std::to_string(level);
}

}  // namespace tl::rt
