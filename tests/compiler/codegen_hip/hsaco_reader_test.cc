// formats::ReadHsaco on real code objects (built here by clang-19) and on
// damaged ones: every truncation, section tables pointing outside the image,
// a metadata note whose MessagePack lies about its sizes, other ELF kinds.
// Malformed input must give a status naming the problem, never a crash.
#include <gtest/gtest.h>

#include <cstring>

#include "tilelang/codegen/hip/hip_toolchain.h"
#include "tilelang/formats/hsaco.h"

namespace {

namespace hip = tl::codegen::hip;

const char* kSource = R"(
extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, 256)))
void saxpy(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
  __attribute__((shared)) float tile[256];
  const int i = (int)__builtin_amdgcn_workitem_id_x() + 256 * (int)__builtin_amdgcn_workgroup_id_x();
  tile[__builtin_amdgcn_workitem_id_x()] = i < n ? x[i] : 0.0f;
  __builtin_amdgcn_s_barrier();
  if (i < n) y[i] += a * tile[255 - __builtin_amdgcn_workitem_id_x()];
}
)";

class HsacoReader : public ::testing::Test {
 protected:
  void SetUp() override {
    tl::StatusOr<hip::HipToolchain> tc = hip::HipToolchain::Create();
    if (!tc.ok()) GTEST_SKIP() << tc.status().ToString();
    tl::StatusOr<hip::CompiledHsaco> c = tc->Compile(kSource, "saxpy", "gfx942:xnack-");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    image_ = c->bytes;
  }
  std::vector<uint8_t> image_;
};

TEST_F(HsacoReader, ReadsTheMetadata) {
  tl::StatusOr<tl::formats::HsacoInfo> info = tl::formats::ReadHsaco(image_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->code_object_version, 5);
  EXPECT_EQ(info->processor, "gfx942");
  EXPECT_EQ(info->xnack, 0);
  EXPECT_EQ(info->sramecc, 2);  // any
  EXPECT_EQ(info->TargetId(), "gfx942:xnack-");
  EXPECT_EQ(info->metadata_target, "amdgcn-amd-amdhsa--gfx942:xnack-");
  ASSERT_EQ(info->kernels.size(), 1u);
  const tl::formats::HsacoKernel& k = info->kernels[0];
  EXPECT_EQ(k.name, "saxpy");
  EXPECT_EQ(k.symbol, "saxpy.kd");
  EXPECT_EQ(k.group_segment_fixed_size, 1024);
  EXPECT_EQ(k.private_segment_fixed_size, 0);
  EXPECT_EQ(k.wavefront_size, 64);
  EXPECT_EQ(k.max_flat_workgroup_size, 256);
  EXPECT_GT(k.vgpr_count, 0);
  EXPECT_GT(k.sgpr_count, 0);
  // y, x (8 bytes each), a (4), n (4): explicit arguments end at 24.
  ASSERT_GE(k.args.size(), 4u);
  EXPECT_EQ(k.args[0].value_kind, "global_buffer");
  EXPECT_EQ(k.args[2].value_kind, "by_value");
  EXPECT_EQ(k.args[3].offset, 20u);
  EXPECT_EQ(k.ExplicitBytes(), 24u);
  EXPECT_GE(k.kernarg_segment_size, 24);
}

TEST_F(HsacoReader, EveryTruncationIsAnError) {
  for (size_t n = 0; n < image_.size(); n += (n < 128 ? 1 : 7)) {
    tl::StatusOr<tl::formats::HsacoInfo> info =
        tl::formats::ReadHsaco(std::span<const uint8_t>(image_.data(), n));
    EXPECT_FALSE(info.ok()) << "truncated to " << n << " of " << image_.size() << " bytes";
  }
}

TEST_F(HsacoReader, DamagedHeadersAndNotes) {
  auto expect_error = [&](std::vector<uint8_t> img, const char* fragment) {
    tl::StatusOr<tl::formats::HsacoInfo> info = tl::formats::ReadHsaco(img);
    ASSERT_FALSE(info.ok()) << fragment;
    EXPECT_NE(info.status().message().find(fragment), std::string::npos) << info.status().message();
  };
  std::vector<uint8_t> img = image_;
  img[18] = 190;  // EM_CUDA
  expect_error(img, "EM_AMDGPU (224)");
  img = image_;
  img[7] = 0;
  expect_error(img, "ELFOSABI_AMDGPU_HSA");
  img = image_;
  img[8] = 9;
  expect_error(img, "ABI version 9");
  img = image_;
  img[40] = 0xf0;  // section header offset far away
  img[41] = 0xff;
  expect_error(img, "section headers");
  img = image_;
  img[48] = 0x3f;  // e_flags machine gfx90a, metadata says gfx942
  expect_error(img, "name processor gfx90a");
  std::vector<uint8_t> bundle(image_.size() + 64, 0);
  std::memcpy(bundle.data(), "__CLANG_OFFLOAD_BUNDLE__", 24);
  expect_error(bundle, "clang offload bundle");
  // Flip every byte of the metadata note one at a time: an error or a valid
  // parse, never a crash or a read outside the image (ASan/UBSan builds).
  const std::string marker = "amdhsa.kernels";
  auto it = std::search(image_.begin(), image_.end(), marker.begin(), marker.end());
  ASSERT_NE(it, image_.end());
  const size_t at = static_cast<size_t>(it - image_.begin());
  int errors = 0;
  for (size_t i = at > 64 ? at - 64 : 0; i < std::min(image_.size(), at + 1200); ++i) {
    img = image_;
    img[i] ^= 0xff;
    tl::StatusOr<tl::formats::HsacoInfo> info = tl::formats::ReadHsaco(img);
    if (!info.ok()) ++errors;
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
