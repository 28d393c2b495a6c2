// ReadCubinParamLayout: the parameter offsets ptxas really chose, from real
// cubins (skips without a CUDA toolkit), and its errors on malformed input.
#include "tilelang/codegen/cuda/cubin_params.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tilelang/codegen/cuda/cuda_codegen.h"

namespace cu = tl::codegen::cuda;

namespace {

// Three pointers, an int, then two 64-byte-aligned 128-byte structs (the
// shape of a TMA kernel's signature).
constexpr const char* kSource = R"(
struct __align__(64) tmap { unsigned long long bits[16]; };
extern "C" __global__ void k(float* a, float* b, float* c, int n, const __grid_constant__ tmap m0,
                             const __grid_constant__ tmap m1) {
  if (n > 0) a[0] = b[0] + c[0] + (float)(m0.bits[3] + m1.bits[5]);
}
)";

std::vector<uint8_t> Cubin(const std::string& arch) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) return {};
  tl::StatusOr<cu::CompiledCode> code = tc->Compile(kSource, "k", arch);
  EXPECT_TRUE(code.ok()) << code.status().ToString();
  return code.ok() ? code->bytes : std::vector<uint8_t>{};
}

}  // namespace

// The 64-byte alignment is relative to the constant-bank address of the
// parameter area (sm_90: 0x210, sm_80: 0x160), so the first struct sits at
// 48 on sm_90a and at 32 on sm_80 -- never at the C layout's 64.
TEST(CubinParams, OffsetsFollowTheConstantBankBase) {
  for (const auto& [arch, first] : {std::pair<std::string, uint32_t>{"sm_90a", 48}, {"sm_80", 32}}) {
    std::vector<uint8_t> cubin = Cubin(arch);
    if (cubin.empty()) GTEST_SKIP() << "no CUDA toolkit";
    tl::StatusOr<cu::CubinParamLayout> l = cu::ReadCubinParamLayout(cubin, "k");
    ASSERT_TRUE(l.ok()) << arch << ": " << l.status().ToString();
    ASSERT_EQ(l->params.size(), 6u) << arch;
    const uint32_t want_off[] = {0, 8, 16, 24, first, first + 128};
    const uint32_t want_size[] = {8, 8, 8, 4, 128, 128};
    for (uint32_t i = 0; i < 6; ++i) {
      EXPECT_EQ(l->params[i].ordinal, i) << arch;
      EXPECT_EQ(l->params[i].offset, want_off[i]) << arch << " param " << i;
      EXPECT_EQ(l->params[i].size, want_size[i]) << arch << " param " << i;
    }
    EXPECT_EQ(l->buffer_bytes, first + 256) << arch;
  }
}

TEST(CubinParams, UnknownEntryIsNotFound) {
  std::vector<uint8_t> cubin = Cubin("sm_90a");
  if (cubin.empty()) GTEST_SKIP() << "no CUDA toolkit";
  tl::StatusOr<cu::CubinParamLayout> l = cu::ReadCubinParamLayout(cubin, "nope");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), tl::StatusCode::kNotFound);
  EXPECT_NE(l.status().message().find("no '.nv.info.nope' section"), std::string::npos) << l.status().message();
}

TEST(CubinParams, NotAnElf) {
  std::vector<uint8_t> bytes(100, 0x41);
  tl::StatusOr<cu::CubinParamLayout> l = cu::ReadCubinParamLayout(bytes, "k");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), tl::StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("not a 64-bit little-endian ELF (100 bytes"), std::string::npos)
      << l.status().message();
}

TEST(CubinParams, SectionHeadersPastTheEnd) {
  std::vector<uint8_t> bytes(64, 0);
  std::memcpy(bytes.data(), "\x7f" "ELF\x02\x01", 6);
  const uint64_t shoff = 4096;
  std::memcpy(bytes.data() + 0x28, &shoff, 8);
  const uint16_t entsize = 64, num = 3, strndx = 1;
  std::memcpy(bytes.data() + 0x3a, &entsize, 2);
  std::memcpy(bytes.data() + 0x3c, &num, 2);
  std::memcpy(bytes.data() + 0x3e, &strndx, 2);
  tl::StatusOr<cu::CubinParamLayout> l = cu::ReadCubinParamLayout(bytes, "k");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), tl::StatusCode::kDataLoss);
  EXPECT_NE(l.status().message().find("section headers (3 x 64 B at 4096) run past the end (64 bytes)"),
            std::string::npos)
      << l.status().message();
}

// Every truncation of a real cubin either fails with kDataLoss or
// kInvalidArgument, or (a cut that leaves the headers and .nv.info whole)
// reads the same layout: no crash, no read past the end, no wrong answer.
TEST(CubinParams, TruncatedCubinsFailCleanly) {
  std::vector<uint8_t> cubin = Cubin("sm_90a");
  if (cubin.empty()) GTEST_SKIP() << "no CUDA toolkit";
  tl::StatusOr<cu::CubinParamLayout> whole = cu::ReadCubinParamLayout(cubin, "k");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  int failed = 0;
  for (size_t n = 0; n < cubin.size(); n += 13) {
    std::vector<uint8_t> cut(cubin.begin(), cubin.begin() + static_cast<std::ptrdiff_t>(n));
    tl::StatusOr<cu::CubinParamLayout> l = cu::ReadCubinParamLayout(cut, "k");
    if (!l.ok()) {
      ++failed;
      EXPECT_TRUE(l.status().code() == tl::StatusCode::kDataLoss ||
                  l.status().code() == tl::StatusCode::kInvalidArgument)
          << n << ": " << l.status().ToString();
      continue;
    }
    ASSERT_EQ(l->params.size(), whole->params.size()) << "cut to " << n;
    for (size_t i = 0; i < l->params.size(); ++i) EXPECT_EQ(l->params[i].offset, whole->params[i].offset) << n;
  }
  EXPECT_GT(failed, 0);
}
