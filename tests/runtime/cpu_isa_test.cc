#include "cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tl::rt {
namespace {

const std::vector<std::string> kV2 = {"sse", "sse2", "sse3", "ssse3", "sse4_1", "sse4_2", "popcnt", "cx16", "lahf_lm"};
std::vector<std::string> V3() {
  auto f = kV2;
  for (const char* x : {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "osxsave", "xsave"}) f.push_back(x);
  return f;
}
std::vector<std::string> V4() {
  auto f = V3();
  for (const char* x : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}) f.push_back(x);
  return f;
}
bool Has(const CpuIsa& isa, const std::string& token) {
  return std::find(isa.features.begin(), isa.features.end(), token) != isa.features.end();
}

TEST(CpuIsa, Levels) {
  EXPECT_EQ(DeriveCpuIsa({"sse", "sse2"}, 0).level, 1);
  EXPECT_EQ(DeriveCpuIsa(kV2, 0).level, 2);
  EXPECT_EQ(DeriveCpuIsa(V3(), 0x7).level, 3);
  EXPECT_EQ(DeriveCpuIsa(V4(), 0xe7).level, 4);
}

TEST(CpuIsa, AbmCountsAsLzcnt) {
  auto f = V3();
  f.erase(std::find(f.begin(), f.end(), "lzcnt"));
  EXPECT_EQ(DeriveCpuIsa(f, 0x7).level, 2);
  f.push_back("abm");
  EXPECT_EQ(DeriveCpuIsa(f, 0x7).level, 3);
}

TEST(CpuIsa, Avx512InCpuidButNotEnabledByTheOs) {
  // XCR0 = 0x7: x87, SSE, AVX state only; opmask/ZMM state disabled.
  CpuIsa isa = DeriveCpuIsa(V4(), 0x7);
  EXPECT_EQ(isa.level, 3);
  EXPECT_FALSE(Has(isa, "cpu.x86.avx512f"));
  EXPECT_TRUE(Has(isa, "cpu.x86.avx2"));
  EXPECT_NE(isa.note.find("AVX-512 in CPUID but not enabled by the OS (XCR0 0x7)"), std::string::npos) << isa.note;
}

TEST(CpuIsa, AvxWithoutOsxsaveIsUnusable) {
  auto f = V3();
  f.erase(std::find(f.begin(), f.end(), "osxsave"));
  CpuIsa isa = DeriveCpuIsa(f, 0);
  EXPECT_EQ(isa.level, 2);
  EXPECT_FALSE(Has(isa, "cpu.x86.avx2"));
  EXPECT_NE(isa.note.find("YMM state not enabled"), std::string::npos);
}

TEST(CpuIsa, AmxNeedsTileState) {
  auto f = V4();
  f.push_back("amx_tile");
  EXPECT_FALSE(Has(DeriveCpuIsa(f, 0xe7), "cpu.x86.amx_tile"));
  EXPECT_TRUE(Has(DeriveCpuIsa(f, 0xe7 | (3u << 17)), "cpu.x86.amx_tile"));
}

TEST(CpuIsa, ParseLevelNames) {
  EXPECT_EQ(ParseX86IsaLevel("x86-64"), 1);
  EXPECT_EQ(ParseX86IsaLevel("x86-64-v3"), 3);
  EXPECT_EQ(ParseX86IsaLevel("x86_64-v4"), 4);
  EXPECT_EQ(ParseX86IsaLevel("x86-64-v5"), 0);
  EXPECT_EQ(ParseX86IsaLevel("aarch64"), 0);
  EXPECT_EQ(X86IsaLevelName(2), "x86-64-v2");
}

TEST(CpuIsa, ProbeOfThisHostIsConsistentWithTheCompiler) {
  uint64_t xcr0 = 0;
  auto flags = ProbeCpuidFlags(&xcr0);
  CpuIsa isa = DeriveCpuIsa(flags, xcr0);
  EXPECT_GE(isa.level, 2);  // every supported build host has SSE4.2
  // gcc's own detection (which also consults XGETBV) must agree.
  EXPECT_EQ(isa.level >= 3, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                __builtin_cpu_supports("bmi2"));
  EXPECT_EQ(Has(isa, "cpu.x86.avx512f"), __builtin_cpu_supports("avx512f") != 0);
}

}  // namespace
}  // namespace tl::rt
