// libFuzzer target: BundleView::Open + VerifyAllPayloads on arbitrary bytes.
//
// Each input is tried twice: as given (signature, header CRC and truncation
// paths), and re-sealed, with the manifest and header CRCs recomputed, so
// that mutations reach the flatbuffers verifier, the manifest's semantic
// checks and the payload decoder instead of stopping at a CRC mismatch.
// Seeds: tests/fuzz/seeds/fuzz_bundle_open/ (valid and defective bundles
// written by tests/formats' tl_formats_corpus_gen).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tilelang/formats/checksum.h"
#include "tilelang/formats/container.h"
#include "tilelang/formats/reader.h"

namespace {

using tl::formats::BundleView;

void Exercise(const std::vector<uint8_t>& bytes) {
  tl::formats::ReadOptions options;
  // Keep single inputs under libFuzzer's memory limit; the cap itself is
  // one of the paths under test.
  options.max_payload_raw_bytes = 16u << 20;
  tl::StatusOr<BundleView> view = BundleView::Open(bytes, options);
  if (!view.ok()) return;
  (void)view->VerifyAllPayloads();
  for (const auto* kernel : *view->manifest()->kernels()) {
    const std::string_view name(kernel->name()->c_str(), kernel->name()->size());
    if (view->FindKernel(name) != kernel) __builtin_trap();  // sortedness was verified
  }
  (void)view->FindKernel("\xff");
}

void Store32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An owned copy: the reader requires an 8-byte aligned start address.
  std::vector<uint8_t> bytes(data, data + size);
  Exercise(bytes);

  if (size < tl::formats::kHeaderSize) return 0;
  const tl::formats::HeaderFields h =
      tl::formats::DecodeHeaderFields(std::span<const uint8_t, tl::formats::kHeaderSize>(bytes.data(), 64));
  if (h.manifest_offset <= size && h.manifest_size <= size - h.manifest_offset) {
    Store32(bytes, 56,
            tl::formats::Crc32c(std::span<const uint8_t>(bytes.data() + h.manifest_offset, h.manifest_size)));
  }
  Store32(bytes, 60, tl::formats::Crc32c(std::span<const uint8_t>(bytes.data(), tl::formats::kHeaderCrcCoveredBytes)));
  Exercise(bytes);
  return 0;
}
