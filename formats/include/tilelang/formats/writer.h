// Writing a .tlb bundle.
//
// The writer takes the manifest as flatbuffers object-API values (tl::bundle::
// BundleT, generated with --gen-object-api) plus raw payload bytes, and owns
// everything that makes a bundle well-formed: kernels sorted by name, payloads
// deduplicated by content hash and zstd-compressed at a fixed level, offsets
// 64-byte aligned, checksums, the bundle id. The same inputs give the same
// bytes (no timestamps, no hash-map iteration order, fixed compression level).
//
// Thread-safety: a BundleWriter is thread-compatible (one thread at a time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/formats/status.h"

namespace tl::formats {

struct WriteOptions {
  int zstd_level = 19;
  bool compress = true;  // false: payloads stored with Compression::NONE
};

class BundleWriter {
 public:
  explicit BundleWriter(WriteOptions options = {});

  // Adds a payload and returns its index; identical bytes return the index of
  // the payload added first.
  uint32_t AddPayload(std::vector<uint8_t> raw_bytes);

  // Adds a kernel. Its variants' `payload` fields are indices returned by
  // AddPayload. Fails with kAlreadyExists on a duplicate kernel name.
  Status AddKernel(std::unique_ptr<tl::bundle::KernelT> kernel);

  void SetProducer(std::unique_ptr<tl::bundle::ProducerT> producer);
  void AddAttr(const std::string& key, const std::string& value);

  // Serializes the bundle.
  StatusOr<std::vector<uint8_t>> Finish();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Writes bytes to path atomically (temporary file + rename); errors name the path.
Status WriteFile(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace tl::formats
