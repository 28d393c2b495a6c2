// The contract with the Python frontend: every golden Tile IR file it emits
// (tests/python/frontend/golden) parses, verifies, and survives a print-parse
// round trip unchanged.
#include <algorithm>
#include <filesystem>

#include "test_util.h"

namespace tl::ir {
namespace {

TEST(FrontendGoldens, ParseVerifyAndRoundTrip) {
  const std::filesystem::path dir(TL_FRONTEND_GOLDEN_DIR);
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "no frontend goldens at " << dir;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".tir") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) GTEST_SKIP() << "no .tir files in " << dir;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    std::string text = testing::ReadFile(file.string());
    StatusOr<Module> m = ParseModule(text, file.filename().string());
    ASSERT_TRUE(m.ok()) << m.status().message();
    Status v = Verify(*m);
    EXPECT_TRUE(v.ok()) << v.message();
    std::string printed = Print(*m);
    StatusOr<Module> again = ParseModule(printed, "printed");
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_EQ(*again, *m);
    EXPECT_EQ(Print(*again), printed);
  }
}

}  // namespace
}  // namespace tl::ir
