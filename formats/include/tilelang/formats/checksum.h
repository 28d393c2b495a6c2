// Checksums and hashes used by the .tlb container.
//
// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor
// 0xFFFFFFFF) guards the header, the manifest and every payload (stored and
// raw bytes). It uses the SSE4.2 `crc32` instruction where the CPU has it,
// chosen once at run time, and a table otherwise; both give identical results
// and both are exported so tests can check each against known vectors.
//
// SHA-256 (FIPS 180-4) is the content hash that deduplicates payloads and
// derives the bundle id. It is a small self-contained implementation: it is
// not used for signatures and makes no constant-time claims.
//
// Thread-safety: every function here is pure (the dispatch decision is a
// function-local static, initialized thread-safely).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tl::formats {

// CRC32C of `data`. Crc32cExtend(Crc32c(a), b) == Crc32c(a ++ b).
uint32_t Crc32c(std::span<const uint8_t> data);
uint32_t Crc32cExtend(uint32_t crc, std::span<const uint8_t> data);

// The two implementations behind Crc32c, for tests and benchmarks.
uint32_t Crc32cExtendPortable(uint32_t crc, std::span<const uint8_t> data);
// Precondition: Crc32cHardwareAvailable(). Calling it otherwise raises SIGILL.
uint32_t Crc32cExtendHardware(uint32_t crc, std::span<const uint8_t> data);
bool Crc32cHardwareAvailable();

using Sha256Digest = std::array<uint8_t, 32>;

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void Update(std::span<const uint8_t> data);
  // Finishes the hash; the object must not be updated afterwards.
  Sha256Digest Finish();

  static Sha256Digest Hash(std::span<const uint8_t> data);

 private:
  void Compress(const uint8_t block[64]);
  uint32_t state_[8];
  uint64_t total_bytes_ = 0;
  uint8_t buffer_[64];
  size_t buffered_ = 0;
};

}  // namespace tl::formats
