// CRC32C (both implementations) and SHA-256 against published vectors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tilelang/formats/checksum.h"

namespace tl::formats {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) {
  return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string Hex(const Sha256Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : d) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

struct CrcVector {
  std::vector<uint8_t> data;
  uint32_t crc;
};

// "123456789" is the standard check value; the others are RFC 3720 B.4.
std::vector<CrcVector> KnownCrcVectors() {
  std::vector<CrcVector> v;
  v.push_back({std::vector<uint8_t>{'1', '2', '3', '4', '5', '6', '7', '8', '9'}, 0xE3069283u});
  v.push_back({std::vector<uint8_t>(32, 0x00), 0x8A9136AAu});
  v.push_back({std::vector<uint8_t>(32, 0xFF), 0x62A8AB43u});
  std::vector<uint8_t> inc(32), dec(32);
  for (int i = 0; i < 32; ++i) {
    inc[i] = static_cast<uint8_t>(i);
    dec[i] = static_cast<uint8_t>(31 - i);
  }
  v.push_back({inc, 0x46DD794Eu});
  v.push_back({dec, 0x113FDB5Cu});
  v.push_back({{}, 0x00000000u});
  return v;
}

TEST(Crc32c, PortableMatchesKnownVectors) {
  for (const auto& v : KnownCrcVectors()) EXPECT_EQ(Crc32cExtendPortable(0, v.data), v.crc) << v.data.size();
}

TEST(Crc32c, HardwareMatchesKnownVectors) {
  if (!Crc32cHardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  for (const auto& v : KnownCrcVectors()) EXPECT_EQ(Crc32cExtendHardware(0, v.data), v.crc) << v.data.size();
}

TEST(Crc32c, DispatchedMatchesKnownVectors) {
  for (const auto& v : KnownCrcVectors()) EXPECT_EQ(Crc32c(v.data), v.crc);
}

// Every length 0..300 and every split point of a few lengths: exercises the
// 8-byte, 4-byte and 1-byte tails of both implementations and Extend.
TEST(Crc32c, ImplementationsAgreeOnAllLengthsAndSplits) {
  std::vector<uint8_t> data(300);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t n = 0; n <= data.size(); ++n) {
    const std::span<const uint8_t> s(data.data(), n);
    const uint32_t portable = Crc32cExtendPortable(0, s);
    if (Crc32cHardwareAvailable()) {
      ASSERT_EQ(Crc32cExtendHardware(0, s), portable) << n;
    }
    for (size_t cut : {size_t{0}, n / 3, n / 2, n}) {
      ASSERT_EQ(Crc32cExtend(Crc32c(s.first(cut)), s.subspan(cut)), portable) << n << " " << cut;
    }
  }
  // Unaligned start addresses.
  for (size_t off = 1; off < 8; ++off) {
    const std::span<const uint8_t> s(data.data() + off, 100);
    EXPECT_EQ(Crc32c(s), Crc32cExtendPortable(0, s));
  }
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(Hex(Sha256::Hash(Bytes(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Hex(Sha256::Hash(Bytes("abc"))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(Sha256::Hash(Bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Hex(Sha256::Hash(Bytes("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"))),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAInIrregularChunks) {
  const std::string a(1000000, 'a');
  Sha256 h;
  size_t pos = 0, step = 1;
  while (pos < a.size()) {
    const size_t n = std::min(step, a.size() - pos);
    h.Update(Bytes(a.substr(pos, n)));
    pos += n;
    step = step * 3 % 1000 + 1;
  }
  EXPECT_EQ(Hex(h.Finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Messages of 55, 56, 63, 64 bytes straddle the padding boundary.
TEST(Sha256, PaddingBoundaries) {
  const struct {
    size_t n;
    const char* hex;
  } cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
  };
  for (const auto& c : cases) EXPECT_EQ(Hex(Sha256::Hash(Bytes(std::string(c.n, 'a')))), c.hex) << c.n;
}

}  // namespace
}  // namespace tl::formats
