// Reading and verifying a .tlb bundle.
//
// Every size, offset and checksum is checked before a byte of a payload is
// handed to anyone: GPU drivers accept corrupted code without complaint and
// CUDA's loaders take no length, so this reader is the only defence.
//
// Thread-safety: a BundleView is immutable after Open and safe to use from
// many threads; ReadPayload allocates its output and touches no shared state.
// Ownership: a BundleView borrows the bytes it was opened on; the caller keeps
// them alive (and unchanged) for the view's lifetime.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/formats/container.h"
#include "tilelang/formats/status.h"

namespace tl::formats {

struct ReadOptions {
  // Upper bound on one payload's decompressed size (decompression bombs).
  uint64_t max_payload_raw_bytes = kDefaultMaxPayloadRawBytes;
};

class BundleView {
 public:
  // Parses the header, checks its CRC, bounds and version, verifies the
  // manifest CRC and flatbuffer, then the manifest's semantics (sorted unique
  // kernel names, every index in range, payload extents inside the payload
  // region and non-overlapping, must_understand tokens known).
  // Payload bytes are not read here.
  static StatusOr<BundleView> Open(std::span<const uint8_t> bytes, const ReadOptions& options = {});

  const HeaderFields& header() const { return header_; }
  const tl::bundle::Bundle* manifest() const { return manifest_; }
  std::span<const uint8_t> bytes() const { return bytes_; }

  // Checks the stored CRC32C, decompresses (declared size must match the zstd
  // frame's content size and raw_size, and stay under the cap), checks the raw
  // CRC32C, and returns the raw bytes.
  StatusOr<std::vector<uint8_t>> ReadPayload(uint32_t payload_index) const;

  // Reads and checks every payload (tl-pack verify, tl_bundle_verify(ALL)).
  Status VerifyAllPayloads() const;

  // Binary search by name; nullptr when absent.
  const tl::bundle::Kernel* FindKernel(std::string_view name) const;

  BundleView() = default;

 private:
  std::span<const uint8_t> bytes_;
  HeaderFields header_;
  const tl::bundle::Bundle* manifest_ = nullptr;
  ReadOptions options_;
};

// Reads a whole file; errors name the path.
StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path);

}  // namespace tl::formats
