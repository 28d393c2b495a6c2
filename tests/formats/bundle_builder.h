// Test-only builder of valid and deliberately defective .tlb bundles.
//
// Valid bundles come from the real BundleWriter. Defective ones start from a
// valid bundle, change exactly one thing, and re-seal everything else (CRCs,
// sizes) so that the reader meets that one defect and no other. The same
// cases feed the GoogleTest negative corpus, the tl-pack CLI tests (through
// tl_formats_corpus_gen) and the committed fuzz seeds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/formats/container.h"
#include "tilelang/formats/status.h"

namespace tl::formats::testing {

// Deterministic pseudo-random bytes (incompressible) and text-like bytes
// (compressible), so every build produces the same bundles.
std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed);
std::vector<uint8_t> TextBytes(size_t n, const std::string& motif);

// Which sample to build.
enum class Sample {
  kMain,       // gemm (cpu + cuda variants), softmax (two variants share a payload), 4 payloads
  kOther,      // rmsnorm only: merges cleanly with kMain
  kConflict,   // gemm with a different signature: conflicts with kMain on merge
  kMinimal,    // one kernel, one tiny payload (fuzz seed)
  kUncompressed,  // like kMinimal, written with compress = false
};
std::vector<uint8_t> BuildSample(Sample sample);

// A zstd frame of `n` zero bytes built by hand from RLE blocks: a
// decompression bomb (a few bytes per 128 KiB) made instantly.
std::vector<uint8_t> ZeroRleFrame(uint64_t n);

// The raw payload that kMain's gemm variant "cpu.x86-64-v3" carries.
std::vector<uint8_t> MainGemmCpuPayload();

// A valid bundle taken apart: header fields, manifest as an object tree, and
// the payload region. Join() re-seals it (canonical offsets, both CRCs).
struct Parts {
  HeaderFields header;
  tl::bundle::BundleT manifest;
  std::vector<uint8_t> region;
};
Parts Split(const std::vector<uint8_t>& bundle);
std::vector<uint8_t> Join(const Parts& parts);
// Serializes a manifest object tree exactly as the container stores it.
std::vector<uint8_t> PackManifest(const tl::bundle::BundleT& manifest);
// Builds a container around raw manifest bytes (CRCs correct).
std::vector<uint8_t> Seal(const std::vector<uint8_t>& manifest, const std::vector<uint8_t>& region,
                          uint16_t major = kFormatMajor, uint16_t minor = kFormatMinor);

// Little-endian field access on a serialized header; RefreshHeaderCrc
// recomputes bytes 60..63 after an edit.
void PutLe(std::vector<uint8_t>& bytes, size_t offset, uint64_t value, int width);
void RefreshHeaderCrc(std::vector<uint8_t>& bytes);

// One defect, one file.
struct DefectCase {
  std::string name;
  StatusCode code;
  std::string fragment;     // must appear in the status message
  bool fails_at_open;       // false: Open succeeds, VerifyAllPayloads fails
  int tl_pack_exit;         // tl-pack verify's exit code for this case
  std::vector<uint8_t> bytes;
};
std::vector<DefectCase> NegativeCorpus();

// Writes every negative case as <dir>/<name>.tlb, the valid samples as
// <dir>/valid_*.tlb, <dir>/gemm_cpu.bin (MainGemmCpuPayload) and an index
// <dir>/corpus.txt ("name code exit fragment" per line). Creates dir.
Status WriteCorpus(const std::string& dir);

}  // namespace tl::formats::testing
