// BundleView is documented as immutable after Open and safe to share between
// threads. Built as tsan_formats_threads so tools/test runs it under
// ThreadSanitizer (label tsan); it also runs in the normal build.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "bundle_builder.h"
#include "tilelang/formats/checksum.h"
#include "tilelang/formats/reader.h"

namespace tl::formats {
namespace {

TEST(Threads, SharedViewReadsConcurrently) {
  const std::vector<uint8_t> bytes = testing::BuildSample(testing::Sample::kMain);
  StatusOr<BundleView> opened = BundleView::Open(bytes);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const BundleView& view = opened.value();
  const uint32_t n = view.manifest()->payloads()->size();
  std::vector<std::vector<uint8_t>> expected(n);
  for (uint32_t i = 0; i < n; ++i) {
    StatusOr<std::vector<uint8_t>> raw = view.ReadPayload(i);
    ASSERT_TRUE(raw.ok());
    expected[i] = std::move(raw).value();
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 20; ++iter) {
        const uint32_t i = static_cast<uint32_t>((t + iter) % n);
        StatusOr<std::vector<uint8_t>> raw = view.ReadPayload(i);
        if (!raw.ok() || raw.value() != expected[i]) ++mismatches;
        if (view.FindKernel("gemm") == nullptr || view.FindKernel("softmax") == nullptr) ++mismatches;
        if (!view.VerifyAllPayloads().ok()) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Threads, IndependentOpensAndChecksums) {
  const std::vector<uint8_t> bytes = testing::BuildSample(testing::Sample::kMinimal);
  const uint32_t crc = Crc32c(bytes);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int iter = 0; iter < 50; ++iter) {
        StatusOr<BundleView> view = BundleView::Open(bytes);
        if (!view.ok() || !view->VerifyAllPayloads().ok()) ++failures;
        if (Crc32c(bytes) != crc) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace tl::formats
