// Fault-injection sweeps over valid bundles: every bit of the header and
// manifest (and the padding after it) flipped, sampled payload bits flipped,
// truncation at every header/manifest byte and sampled payload offsets. The
// loader must never crash and never accept a corrupted payload: since every
// byte of a bundle is covered by a CRC or checked to be zero, every single
// flip must be rejected by Open or by VerifyAllPayloads.
#include <gtest/gtest.h>

#include "bundle_builder.h"
#include "tilelang/formats/reader.h"

namespace tl::formats {
namespace {

using testing::BuildSample;
using testing::Sample;

bool IsRejectionCode(StatusCode code) {
  return code == StatusCode::kDataLoss || code == StatusCode::kInvalidArgument || code == StatusCode::kIncompatible ||
         code == StatusCode::kResourceExhausted;
}

class Sweep : public ::testing::TestWithParam<Sample> {
 protected:
  void SetUp() override {
    valid_ = BuildSample(GetParam());
    StatusOr<BundleView> view = BundleView::Open(valid_);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    header_ = view->header();
  }
  // Applies one flip to a copy and reports whether the loader rejected it.
  void ExpectFlipRejected(size_t byte, int bit) {
    std::vector<uint8_t> b = valid_;
    b[byte] ^= static_cast<uint8_t>(1u << bit);
    StatusOr<BundleView> view = BundleView::Open(b);
    if (!view.ok()) {
      EXPECT_TRUE(IsRejectionCode(view.status().code())) << byte << ":" << bit << " " << view.status().ToString();
      return;
    }
    Status verify = view->VerifyAllPayloads();
    EXPECT_FALSE(verify.ok()) << "flip at byte " << byte << " bit " << bit << " accepted";
    EXPECT_TRUE(IsRejectionCode(verify.code())) << verify.ToString();
  }
  std::vector<uint8_t> valid_;
  HeaderFields header_;
};

TEST_P(Sweep, EveryBitOfHeaderAndManifestRejected) {
  // [0, payload_offset): header, manifest and the zero padding before payloads.
  for (size_t byte = 0; byte < header_.payload_offset; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      ExpectFlipRejected(byte, bit);
      if (HasFailure()) return;
    }
  }
}

TEST_P(Sweep, SampledPayloadBitsRejected) {
  const size_t begin = header_.payload_offset, end = valid_.size();
  ASSERT_LT(begin, end);
  const size_t step = std::max<size_t>(1, (end - begin) / 300);
  for (size_t byte = begin; byte < end; byte += step) {
    ExpectFlipRejected(byte, static_cast<int>(byte % 8));
    if (HasFailure()) return;
  }
  ExpectFlipRejected(end - 1, 7);
}

TEST_P(Sweep, TruncationAlwaysDataLoss) {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= header_.payload_offset; ++n) lengths.push_back(n);
  const size_t step = std::max<size_t>(1, (valid_.size() - header_.payload_offset) / 64);
  for (size_t n = header_.payload_offset; n < valid_.size(); n += step) lengths.push_back(n);
  lengths.push_back(valid_.size() - 1);
  for (size_t n : lengths) {
    const std::vector<uint8_t> b(valid_.begin(), valid_.begin() + static_cast<ptrdiff_t>(n));
    StatusOr<BundleView> view = BundleView::Open(b);
    ASSERT_FALSE(view.ok()) << "truncated to " << n << " bytes accepted";
    EXPECT_EQ(view.status().code(), StatusCode::kDataLoss) << n << ": " << view.status().ToString();
    EXPECT_NE(view.status().message().find("truncated bundle"), std::string::npos) << view.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Samples, Sweep, ::testing::Values(Sample::kMain, Sample::kMinimal, Sample::kUncompressed),
                         [](const ::testing::TestParamInfo<Sample>& param_info) {
                           switch (param_info.param) {
                             case Sample::kMain: return std::string("main");
                             case Sample::kMinimal: return std::string("minimal");
                             case Sample::kUncompressed: return std::string("uncompressed");
                             default: return std::string("other");
                           }
                         });

// Random multi-byte edits inside the manifest with both CRCs re-sealed, so
// the flatbuffers verifier and the semantic checks see hostile input that the
// CRCs would otherwise stop. Whatever the reader accepts must still decode
// every payload without crashing (ASan builds catch any bad access).
TEST(ManifestMutation, ResealedEditsNeverCrash) {
  const std::vector<uint8_t> valid = BuildSample(Sample::kMain);
  testing::Parts parts = testing::Split(valid);
  const std::vector<uint8_t> manifest = testing::PackManifest(parts.manifest);
  uint64_t rng = 12345;
  auto next = [&rng]() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> m = manifest;
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) m[next() % m.size()] = static_cast<uint8_t>(next());
    const std::vector<uint8_t> b = testing::Seal(m, parts.region);
    StatusOr<BundleView> view = BundleView::Open(b);
    if (!view.ok()) {
      ASSERT_TRUE(IsRejectionCode(view.status().code())) << view.status().ToString();
      continue;
    }
    ++accepted;
    Status verify = view->VerifyAllPayloads();
    if (!verify.ok()) {
      ASSERT_TRUE(IsRejectionCode(verify.code())) << verify.ToString();
    }
    for (const auto* k : *view->manifest()->kernels()) {
      EXPECT_EQ(view->FindKernel(std::string_view(k->name()->c_str(), k->name()->size())), k);
    }
  }
  // Some edits land in strings or unused bytes and are accepted; if none were,
  // the test would not be exercising the post-verification paths at all.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace tl::formats
