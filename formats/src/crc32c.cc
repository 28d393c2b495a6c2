// CRC32C: table-driven fallback and SSE4.2 hardware path, dispatched once.
#include <cstring>

#include "tilelang/formats/checksum.h"

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define TL_CRC32C_HAVE_X86 1
#else
#define TL_CRC32C_HAVE_X86 0
#endif

namespace tl::formats {
namespace {

constexpr uint32_t kPolyReflected = 0x82F63B78u;

// Slicing-by-8 tables, built at compile time: table[0] is the classic byte
// table; table[k][b] advances the CRC of byte b by k further zero bytes.
struct Crc32cTables {
  uint32_t t[8][256];
  constexpr Crc32cTables() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolyReflected : 0u);
      t[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
    }
  }
};
constexpr Crc32cTables kTables;

inline uint32_t LoadLe32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

#if TL_CRC32C_HAVE_X86
// Compiled for SSE4.2 regardless of the baseline; only called after the CPU
// said it has the instruction.
__attribute__((target("sse4.2"))) uint32_t HardwareExtend(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
#if defined(__x86_64__)
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned-safe; x86 is little-endian
    c64 = _mm_crc32_u64(c64, word);
    p += 8;
    n -= 8;
  }
  c = static_cast<uint32_t>(c64);
#endif
  while (n >= 4) {
    uint32_t word;
    std::memcpy(&word, p, 4);
    c = _mm_crc32_u32(c, word);
    p += 4;
    n -= 4;
  }
  while (n > 0) {
    c = _mm_crc32_u8(c, *p++);
    --n;
  }
  return ~c;
}
#endif

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  uint32_t c = ~crc;
  while (n >= 8) {
    const uint32_t lo = LoadLe32(p) ^ c;
    const uint32_t hi = LoadLe32(p + 4);
    c = kTables.t[7][lo & 0xFF] ^ kTables.t[6][(lo >> 8) & 0xFF] ^ kTables.t[5][(lo >> 16) & 0xFF] ^
        kTables.t[4][lo >> 24] ^ kTables.t[3][hi & 0xFF] ^ kTables.t[2][(hi >> 8) & 0xFF] ^
        kTables.t[1][(hi >> 16) & 0xFF] ^ kTables.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ kTables.t[0][(c ^ *p++) & 0xFF];
    --n;
  }
  return ~c;
}

bool Crc32cHardwareAvailable() {
#if TL_CRC32C_HAVE_X86
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
#else
  return false;
#endif
}

uint32_t Crc32cExtendHardware(uint32_t crc, std::span<const uint8_t> data) {
#if TL_CRC32C_HAVE_X86
  return HardwareExtend(crc, data.data(), data.size());
#else
  return Crc32cExtendPortable(crc, data);
#endif
}

uint32_t Crc32cExtend(uint32_t crc, std::span<const uint8_t> data) {
  return Crc32cHardwareAvailable() ? Crc32cExtendHardware(crc, data) : Crc32cExtendPortable(crc, data);
}

uint32_t Crc32c(std::span<const uint8_t> data) { return Crc32cExtend(0, data); }

}  // namespace tl::formats
