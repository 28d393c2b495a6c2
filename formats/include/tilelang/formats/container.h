// The .tlb container: a fixed 64-byte little-endian header, a flatbuffers
// manifest (formats/bundle.fbs), and a 64-byte aligned payload region.
// Layout and version policy: formats/README.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "tilelang/formats/status.h"

namespace tl::formats {

// PNG-style signature: a high-bit byte catches 7-bit transfers, CR LF catches
// text-mode line-ending rewrites, 0x1A stops DOS `type`, the final LF catches
// LF -> CRLF conversion.
inline constexpr uint8_t kSignature[8] = {0x89, 'T', 'L', 'B', '\r', '\n', 0x1A, '\n'};
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;
inline constexpr uint32_t kHeaderSize = 64;
inline constexpr uint64_t kPayloadAlignment = 64;

// Limits that bound work done on untrusted input.
inline constexpr uint64_t kMaxManifestBytes = 64ull << 20;      // 64 MiB
inline constexpr uint64_t kDefaultMaxPayloadRawBytes = 1ull << 30;  // 1 GiB per payload, decompressed

// Field offsets inside the header.
//   0  signature[8]
//   8  format_major u16, 10 format_minor u16
//  12  header_size u32 (= 64)
//  16  flags u64 (no bits defined in 1.0; any set bit => reject)
//  24  manifest_offset u64, 32 manifest_size u64
//  40  payload_offset u64, 48 payload_size u64
//  56  manifest_crc32c u32, 60 header_crc32c u32 (CRC32C of bytes 0..59)
struct HeaderFields {
  uint16_t format_major = 0;
  uint16_t format_minor = 0;
  uint32_t header_size = 0;
  uint64_t flags = 0;
  uint64_t manifest_offset = 0;
  uint64_t manifest_size = 0;
  uint64_t payload_offset = 0;
  uint64_t payload_size = 0;
  uint32_t manifest_crc32c = 0;
  uint32_t header_crc32c = 0;
};

// Tokens of Bundle.must_understand that this library knows. A bundle naming
// any other token is rejected with kIncompatible, naming the token.
// "launch.symbol_slots": Launch.param_slots may hold shape symbol values
// (ParamSlot.symbol); the writer adds it when any slot does.
// "launch.tensor_maps": Launch.param_slots may hold CUDA tensor maps the
// runtime encodes at launch (ParamSlot.tensor_map, Launch.tensor_maps).
inline constexpr const char* kKnownMustUnderstand[] = {"core.v1", "launch.symbol_slots", "launch.tensor_maps"};

// Flatbuffers file identifier of the manifest (bundle.fbs file_identifier).
inline constexpr char kManifestIdentifier[] = "TLBM";
// The header CRC covers bytes [0, kHeaderCrcCoveredBytes).
inline constexpr uint32_t kHeaderCrcCoveredBytes = 60;
// The manifest starts 8-byte aligned (the flatbuffers verifier checks the
// alignment of every scalar relative to the memory address).
inline constexpr uint64_t kManifestAlignment = 8;

// Serializes `fields` into the 64-byte little-endian header, computing
// header_crc32c over bytes 0..59 (fields.header_crc32c is ignored).
std::array<uint8_t, kHeaderSize> EncodeHeader(const HeaderFields& fields);

// Decodes the fields of a 64-byte header without validating anything.
HeaderFields DecodeHeaderFields(std::span<const uint8_t, kHeaderSize> header);

// Reads and validates the header of a whole bundle file `file` (all of it:
// region bounds are checked against its size). Checks, in this order: the
// signature (with specific messages for CRLF/LF conversion and 7-bit
// stripping), truncation, the major version (kIncompatible when it is not
// kFormatMajor), the header CRC, header_size, flags, and the regions: manifest
// after the header, 8-byte aligned, non-empty, at most kMaxManifestBytes;
// payload region 64-byte aligned, after the manifest, ending exactly at the
// end of the file; every addition overflow-checked.
// Errors: kInvalidArgument (not a bundle / malformed), kDataLoss (truncated
// or CRC mismatch), kIncompatible (major version, flags).
StatusOr<HeaderFields> ParseHeader(std::span<const uint8_t> file);

}  // namespace tl::formats
