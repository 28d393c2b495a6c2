// Committed files under tests/formats/corpus/: golden bundles written by
// format 1.0 tools, which every later reader must keep loading, and fuzzer
// findings kept as regressions.
#include <gtest/gtest.h>

#include "tilelang/formats/reader.h"

namespace tl::formats {
namespace {

std::string CorpusPath(const std::string& name) { return std::string(TL_TEST_CORPUS_DIR) + "/" + name; }

TEST(CommittedCorpus, GoldenV1_0BundlesStillLoad) {
  for (const char* name : {"golden_v1_0_main.tlb", "golden_v1_0_uncompressed.tlb"}) {
    StatusOr<std::vector<uint8_t>> bytes = ReadFile(CorpusPath(name));
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    StatusOr<BundleView> view = BundleView::Open(bytes.value());
    ASSERT_TRUE(view.ok()) << name << ": " << view.status().ToString();
    EXPECT_TRUE(view->VerifyAllPayloads().ok()) << name;
    EXPECT_EQ(view->header().format_major, 1);
    EXPECT_EQ(view->header().format_minor, 0);
    EXPECT_GE(view->manifest()->kernels()->size(), 1u);
  }
  StatusOr<std::vector<uint8_t>> main = ReadFile(CorpusPath("golden_v1_0_main.tlb"));
  ASSERT_TRUE(main.ok());
  StatusOr<BundleView> view = BundleView::Open(main.value());
  ASSERT_TRUE(view.ok());
  ASSERT_NE(view->FindKernel("gemm"), nullptr);
  ASSERT_NE(view->FindKernel("softmax"), nullptr);
  EXPECT_EQ(view->FindKernel("gemm")->variants()->size(), 2u);
}

// fuzz_bundle_open found a [long] GridExpr vector at a 4- but not 8-aligned
// offset, which flatbuffers 2.0.8's verifier accepts.
TEST(CommittedCorpus, RegressMisalignedGridCode) {
  StatusOr<std::vector<uint8_t>> bytes = ReadFile(CorpusPath("regress_misaligned_grid_code.tlb"));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<BundleView> view = BundleView::Open(bytes.value());
  EXPECT_EQ(view.status().code(), StatusCode::kInvalidArgument) << view.status().ToString();
  EXPECT_NE(view.status().message().find("launch.grid[1]: code vector is not 8-byte aligned"), std::string::npos)
      << view.status().message();
}

}  // namespace
}  // namespace tl::formats
