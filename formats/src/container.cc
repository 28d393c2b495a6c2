// The fixed 64-byte header: encoding, decoding and validation.
#include <cinttypes>
#include <cstring>
#include <string>

#include "tilelang/formats/checksum.h"
#include "tilelang/formats/container.h"

namespace tl::formats {
namespace {

void StoreLe(uint8_t* p, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t LoadLe(const uint8_t* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= uint64_t{p[i]} << (8 * i);
  return value;
}

std::string HexBytes(const uint8_t* p, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), i ? " %02x" : "%02x", p[i]);
    out += buf;
  }
  return out;
}

// Explains a signature mismatch. The signature is built so that the usual
// ways a binary file gets damaged in transit each leave a recognisable trace.
Status SignatureError(const uint8_t* p, size_t n) {
  const std::string seen = HexBytes(p, n);
  const bool tlb_name = n >= 4 && p[1] == 'T' && p[2] == 'L' && p[3] == 'B';
  if (tlb_name && p[0] == 0x09) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "not a valid bundle: the high bit of byte 0 was stripped (signature %s); the file "
                      "went through a 7-bit transfer",
                      seen.c_str());
  }
  if (tlb_name && p[0] == 0x89) {
    // LF -> CRLF turns "\r\n\x1A\n" into "\r\r\n\x1A\r\n"; CRLF -> LF turns it into "\n\x1A\n".
    if (n >= 7 && p[4] == '\r' && p[5] == '\r' && p[6] == '\n') {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "not a valid bundle: line endings were converted LF -> CRLF (signature %s); "
                        "transfer the file in binary mode",
                        seen.c_str());
    }
    if (n >= 8 && p[4] == '\r' && p[5] == '\n' && p[6] == 0x1A && p[7] == '\r') {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "not a valid bundle: line endings were converted LF -> CRLF (signature %s); "
                        "transfer the file in binary mode",
                        seen.c_str());
    }
    if (n >= 5 && p[4] == '\n') {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "not a valid bundle: line endings were converted CRLF -> LF (signature %s); "
                        "transfer the file in binary mode",
                        seen.c_str());
    }
  }
  return MakeStatus(StatusCode::kInvalidArgument,
                    "not a TileLang bundle: bad signature (bytes 0..%zu are %s, expected 89 54 4c 42 0d 0a 1a 0a)",
                    n ? n - 1 : 0, seen.c_str());
}

// a + b without wrapping; false on overflow.
bool AddU64(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace

std::array<uint8_t, kHeaderSize> EncodeHeader(const HeaderFields& f) {
  std::array<uint8_t, kHeaderSize> h{};
  std::memcpy(h.data(), kSignature, sizeof(kSignature));
  StoreLe(&h[8], f.format_major, 2);
  StoreLe(&h[10], f.format_minor, 2);
  StoreLe(&h[12], f.header_size, 4);
  StoreLe(&h[16], f.flags, 8);
  StoreLe(&h[24], f.manifest_offset, 8);
  StoreLe(&h[32], f.manifest_size, 8);
  StoreLe(&h[40], f.payload_offset, 8);
  StoreLe(&h[48], f.payload_size, 8);
  StoreLe(&h[56], f.manifest_crc32c, 4);
  StoreLe(&h[60], Crc32c(std::span<const uint8_t>(h.data(), kHeaderCrcCoveredBytes)), 4);
  return h;
}

HeaderFields DecodeHeaderFields(std::span<const uint8_t, kHeaderSize> h) {
  HeaderFields f;
  f.format_major = static_cast<uint16_t>(LoadLe(&h[8], 2));
  f.format_minor = static_cast<uint16_t>(LoadLe(&h[10], 2));
  f.header_size = static_cast<uint32_t>(LoadLe(&h[12], 4));
  f.flags = LoadLe(&h[16], 8);
  f.manifest_offset = LoadLe(&h[24], 8);
  f.manifest_size = LoadLe(&h[32], 8);
  f.payload_offset = LoadLe(&h[40], 8);
  f.payload_size = LoadLe(&h[48], 8);
  f.manifest_crc32c = static_cast<uint32_t>(LoadLe(&h[56], 4));
  f.header_crc32c = static_cast<uint32_t>(LoadLe(&h[60], 4));
  return f;
}

StatusOr<HeaderFields> ParseHeader(std::span<const uint8_t> file) {
  const uint64_t file_size = file.size();
  const size_t sig_n = std::min<size_t>(file.size(), sizeof(kSignature));
  if (sig_n > 0 && std::memcmp(file.data(), kSignature, sig_n) != 0) return SignatureError(file.data(), sig_n);
  if (file_size < kHeaderSize) {
    return MakeStatus(StatusCode::kDataLoss, "truncated bundle: %" PRIu64 " bytes, the header alone needs %u",
                      file_size, kHeaderSize);
  }
  const HeaderFields f = DecodeHeaderFields(file.first<kHeaderSize>());
  const uint32_t computed_crc = Crc32c(file.first(kHeaderCrcCoveredBytes));

  // The major version is read before anything else is trusted: a newer major
  // may lay the header out differently, so its CRC is only a hint here.
  if (f.format_major != kFormatMajor) {
    const bool crc_ok = computed_crc == f.header_crc32c;
    return MakeStatus(StatusCode::kIncompatible,
                      "bundle format %u.%u, this reader reads format %u.x only%s",
                      f.format_major, f.format_minor, kFormatMajor,
                      crc_ok ? "" : "; the header CRC does not match either, the file may be corrupt");
  }
  if (computed_crc != f.header_crc32c) {
    return MakeStatus(StatusCode::kDataLoss, "header CRC32C mismatch: stored 0x%08x, computed 0x%08x over bytes 0..%u",
                      f.header_crc32c, computed_crc, kHeaderCrcCoveredBytes - 1);
  }
  if (f.header_size != kHeaderSize) {
    return MakeStatus(StatusCode::kInvalidArgument, "header_size is %u, format %u requires %u", f.header_size,
                      kFormatMajor, kHeaderSize);
  }
  if (f.flags != 0) {
    return MakeStatus(StatusCode::kIncompatible,
                      "unknown header flag bits 0x%016" PRIx64 " (format %u.%u defines none)", f.flags,
                      f.format_major, f.format_minor);
  }

  // Regions. Every end is computed with an overflow check before comparing.
  uint64_t manifest_end = 0, payload_end = 0;
  if (!AddU64(f.manifest_offset, f.manifest_size, &manifest_end)) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "manifest offset %" PRIu64 " + size %" PRIu64 " overflows u64", f.manifest_offset,
                      f.manifest_size);
  }
  if (!AddU64(f.payload_offset, f.payload_size, &payload_end)) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "payload region offset %" PRIu64 " + size %" PRIu64 " overflows u64", f.payload_offset,
                      f.payload_size);
  }
  if (f.manifest_offset < kHeaderSize) {
    return MakeStatus(StatusCode::kInvalidArgument, "manifest offset %" PRIu64 " overlaps the %u-byte header",
                      f.manifest_offset, kHeaderSize);
  }
  if (f.manifest_offset % kManifestAlignment != 0) {
    return MakeStatus(StatusCode::kInvalidArgument, "manifest offset %" PRIu64 " is not %" PRIu64 "-byte aligned",
                      f.manifest_offset, kManifestAlignment);
  }
  if (f.manifest_size == 0 || f.manifest_size > kMaxManifestBytes) {
    return MakeStatus(StatusCode::kInvalidArgument, "manifest size %" PRIu64 " outside [1, %" PRIu64 "]",
                      f.manifest_size, kMaxManifestBytes);
  }
  if (f.payload_offset % kPayloadAlignment != 0) {
    return MakeStatus(StatusCode::kInvalidArgument, "payload region offset %" PRIu64 " is not %" PRIu64 "-byte aligned",
                      f.payload_offset, kPayloadAlignment);
  }
  if (manifest_end > f.payload_offset) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "manifest [%" PRIu64 ", %" PRIu64 ") overlaps the payload region starting at %" PRIu64
                      "%s (the file has %" PRIu64 " bytes)",
                      f.manifest_offset, manifest_end, f.payload_offset,
                      manifest_end > file_size ? " and lies outside the file" : "", file_size);
  }
  if (payload_end > file_size) {
    return MakeStatus(StatusCode::kDataLoss,
                      "truncated bundle: the header declares %" PRIu64 " bytes (payload region [%" PRIu64 ", %" PRIu64
                      ")), the file has %" PRIu64,
                      payload_end, f.payload_offset, payload_end, file_size);
  }
  if (payload_end < file_size) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "%" PRIu64 " trailing bytes after the payload region (it ends at %" PRIu64 ", the file has %" PRIu64
                      " bytes)",
                      file_size - payload_end, payload_end, file_size);
  }
  return f;
}

}  // namespace tl::formats
