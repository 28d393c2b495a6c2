// The negative corpus: one defect per file, each written to disk and loaded
// through the real ReadFile + BundleView, asserting the exact status code
// and a message fragment.
#include <gtest/gtest.h>

#include "bundle_builder.h"
#include "tilelang/formats/reader.h"
#include "tilelang/formats/writer.h"

namespace tl::formats {
namespace {

const std::vector<testing::DefectCase>& Corpus() {
  static const std::vector<testing::DefectCase>* corpus = new std::vector<testing::DefectCase>(testing::NegativeCorpus());
  return *corpus;
}

std::vector<size_t> CaseIndices() {
  std::vector<size_t> indices(Corpus().size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

class NegativeCorpus : public ::testing::TestWithParam<size_t> {};

TEST_P(NegativeCorpus, RejectedWithExactCodeAndMessage) {
  const testing::DefectCase& c = Corpus()[GetParam()];
  const std::string path = std::string(TL_TEST_TMP_DIR) + "/" + c.name + ".tlb";
  ASSERT_TRUE(WriteFile(path, c.bytes).ok());
  StatusOr<std::vector<uint8_t>> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_EQ(bytes.value(), c.bytes);

  StatusOr<BundleView> view = BundleView::Open(bytes.value());
  Status status = view.status();
  if (!c.fails_at_open) {
    ASSERT_TRUE(view.ok()) << c.name << ": expected Open to succeed, got " << view.status().ToString();
    status = view->VerifyAllPayloads();
  }
  EXPECT_EQ(status.code(), c.code) << c.name << ": " << status.ToString();
  EXPECT_NE(status.message().find(c.fragment), std::string::npos)
      << c.name << ": message \"" << status.message() << "\" lacks \"" << c.fragment << "\"";
}

INSTANTIATE_TEST_SUITE_P(Defects, NegativeCorpus, ::testing::ValuesIn(CaseIndices()),
                         [](const ::testing::TestParamInfo<size_t>& param_info) { return Corpus()[param_info.param].name; });

// The corpus covers every defect class the issue lists; a renamed or dropped
// case fails here rather than silently shrinking the corpus.
TEST(NegativeCorpusCoverage, HasEveryRequiredCase) {
  const char* required[] = {"bad_magic", "crlf_mangled", "truncated_header_00", "truncated_header_63", "newer_major",
                            "unknown_must_understand", "manifest_overlaps_payload", "payloads_overlap",
                            "manifest_outside_file", "payload_outside_region", "manifest_offset_overflow",
                            "payload_offset_overflow", "bad_header_crc", "bad_manifest_crc", "bad_stored_crc",
                            "bad_raw_crc", "zstd_size_mismatch", "zstd_bomb", "payload_index_out_of_range",
                            "duplicate_kernel_names", "nonzero_padding"};
  for (const char* name : required) {
    bool found = false;
    for (const auto& c : Corpus()) found = found || c.name == name;
    EXPECT_TRUE(found) << name;
  }
}

}  // namespace
}  // namespace tl::formats
