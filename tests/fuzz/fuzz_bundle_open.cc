// libFuzzer target: BundleView::Open + VerifyAllPayloads on arbitrary bytes.
//
// Each input is tried up to three times: as given (signature, header CRC and
// truncation paths); re-sealed, with the manifest and header CRCs recomputed,
// so that mutations reach the flatbuffers verifier and the manifest's
// semantic checks; and, when that opens, with every payload's stored CRC
// patched in the manifest too, so that mutated zstd frames reach the
// decoder instead of stopping at a CRC mismatch.
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

bool Exercise(const std::vector<uint8_t>& bytes) {
  tl::formats::ReadOptions options;
  // Keep single inputs under libFuzzer's memory limit; the cap itself is
  // one of the paths under test.
  options.max_payload_raw_bytes = 16u << 20;
  tl::StatusOr<BundleView> view = BundleView::Open(bytes, options);
  if (!view.ok()) return false;
  (void)view->VerifyAllPayloads();
  for (const auto* kernel : *view->manifest()->kernels()) {
    const std::string_view name(kernel->name()->c_str(), kernel->name()->size());
    if (view->FindKernel(name) != kernel) __builtin_trap();  // sortedness was verified
  }
  (void)view->FindKernel("\xff");
  return true;
}

void Store32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the manifest CRC (when the header's manifest extent lies inside
// the input) and the header CRC.
void Reseal(std::vector<uint8_t>& bytes) {
  const tl::formats::HeaderFields h = tl::formats::DecodeHeaderFields(
      std::span<const uint8_t, tl::formats::kHeaderSize>(bytes.data(), tl::formats::kHeaderSize));
  const size_t size = bytes.size();
  if (h.manifest_offset <= size && h.manifest_size <= size - h.manifest_offset) {
    Store32(&bytes[56],
            tl::formats::Crc32c(std::span<const uint8_t>(bytes.data() + h.manifest_offset, h.manifest_size)));
  }
  Store32(&bytes[60], tl::formats::Crc32c(std::span<const uint8_t>(bytes.data(), tl::formats::kHeaderCrcCoveredBytes)));
}

// Writes the correct stored CRC into every payload entry that has the field
// present. Only called on bytes that Open accepted, so extents are valid.
void PatchStoredCrcs(std::vector<uint8_t>& bytes) {
  const tl::formats::HeaderFields h = tl::formats::DecodeHeaderFields(
      std::span<const uint8_t, tl::formats::kHeaderSize>(bytes.data(), tl::formats::kHeaderSize));
  const tl::bundle::Bundle* manifest = tl::bundle::GetBundle(bytes.data() + h.manifest_offset);
  for (const tl::bundle::Payload* p : *manifest->payloads()) {
    const uint8_t* field = reinterpret_cast<const flatbuffers::Table*>(p)->GetAddressOf(
        tl::bundle::Payload::VT_STORED_CRC32C);
    if (!field) continue;  // absent field (default 0): nothing to patch in place
    const uint32_t crc =
        tl::formats::Crc32c(std::span<const uint8_t>(bytes.data() + h.payload_offset + p->offset(), p->stored_size()));
    // The buffer is our own copy; the manifest is read-only only by type.
    Store32(const_cast<uint8_t*>(field), crc);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An owned copy: the reader requires an 8-byte aligned start address.
  std::vector<uint8_t> bytes(data, data + size);
  Exercise(bytes);

  if (size < tl::formats::kHeaderSize) return 0;
  Reseal(bytes);
  if (!Exercise(bytes)) return 0;
  PatchStoredCrcs(bytes);
  Reseal(bytes);
  Exercise(bytes);
  return 0;
}
