// x86-64 ISA levels from CPUID and XGETBV.
//
// The level is what the CPU *and the OS* support: AVX needs XCR0 bits 1-2
// (SSE and YMM state) and AVX-512 needs bits 5-7 (opmask, ZMM_Hi256,
// Hi16_ZMM) as well, or the first AVX-512 instruction faults although CPUID
// advertises it (seen on VMs and on kernels booted with AVX-512 disabled).
// Probing executes only CPUID and XGETBV; no candidate kernel code runs.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl::rt {

struct CpuIsa {
  int level = 1;                      // 1: baseline x86-64, 2..4: x86-64-v2..v4
  std::vector<std::string> features;  // usable tokens, "cpu.x86.<flag>", sorted
  std::string note;                   // why a CPUID flag is unusable, or ""
};

// XCR0 state components.
inline constexpr uint64_t kXcr0Sse = 1u << 1;
inline constexpr uint64_t kXcr0Avx = 1u << 2;
inline constexpr uint64_t kXcr0Avx512 = (1u << 5) | (1u << 6) | (1u << 7);
inline constexpr uint64_t kXcr0Amx = (1u << 17) | (1u << 18);

// Derives the level and usable features from CPUID flag names and XCR0.
CpuIsa DeriveCpuIsa(const std::vector<std::string>& cpuid_flags, uint64_t xcr0);

// Reads CPUID flag names of this machine (and XCR0 when OSXSAVE is set).
std::vector<std::string> ProbeCpuidFlags(uint64_t* out_xcr0);

// "x86-64-v3" -> 3, "x86-64" / "x86_64" -> 1; 0 for anything else.
int ParseX86IsaLevel(const std::string& arch);
std::string X86IsaLevelName(int level);  // 1 -> "x86-64", 3 -> "x86-64-v3"

// The CPUID flags each level needs beyond the previous one.
const std::vector<std::string>& X86LevelFlags(int level);

}  // namespace tl::rt
