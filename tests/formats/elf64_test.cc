// Elf64Sections (formats/elf64.h): sections and names of a well-formed image,
// and every rejection with its numbers: truncated images, bad magic, 32-bit or
// big-endian class, section tables and sections outside the image (also where
// offset + size wraps), entries that are not 64 bytes; a name table index or
// name offset out of range gives an empty name, never a read past the image.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tilelang/formats/elf64.h"

namespace {

using tl::formats::Elf64Problem;
using tl::formats::Elf64Sections;

void Put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(&b[at], &v, 2); }
void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(&b[at], &v, 4); }
void Put64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); }

// Header, then ".shstrtab" names, a PROGBITS section of 16 bytes (0..15), a
// NOBITS section claiming 1 MiB, then the table of 4 entries (null, names,
// data, bss) at `shoff`.
struct Image {
  std::vector<uint8_t> bytes;
  size_t shoff = 0;
  size_t entry(int i) const { return shoff + static_cast<size_t>(i) * 64; }
};

Image Build() {
  Image im;
  std::vector<uint8_t>& b = im.bytes;
  b.assign(64, 0);
  std::memcpy(b.data(), "\x7f" "ELF", 4);
  b[4] = 2;
  b[5] = 1;
  Put16(b, 18, 190);  // EM_CUDA
  const std::string names = std::string("\0.shstrtab\0.data\0.bss\0", 23);
  const size_t names_at = b.size();
  b.insert(b.end(), names.begin(), names.end());
  const size_t data_at = b.size();
  for (int i = 0; i < 16; ++i) b.push_back(static_cast<uint8_t>(i));
  while (b.size() % 8) b.push_back(0);
  im.shoff = b.size();
  b.resize(b.size() + 4 * 64, 0);
  auto sec = [&](int i, uint32_t name, uint32_t type, uint64_t off, uint64_t size) {
    Put32(b, im.entry(i), name);
    Put32(b, im.entry(i) + 4, type);
    Put64(b, im.entry(i) + 24, off);
    Put64(b, im.entry(i) + 32, size);
  };
  sec(1, 1, 3 /* SHT_STRTAB */, names_at, names.size());
  sec(2, 11, 1 /* SHT_PROGBITS */, data_at, 16);
  sec(3, 17, tl::formats::kShtNobits, 1u << 30, 1u << 20);  // NOBITS: its offset and size are not bytes of the image
  Put64(b, 40, im.shoff);
  Put16(b, 58, 64);
  Put16(b, 60, 4);
  Put16(b, 62, 1);
  return im;
}

TEST(Elf64, SectionsAndNames) {
  const Image im = Build();
  const Elf64Sections e = Elf64Sections::Parse(im.bytes);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.machine(), 190);
  ASSERT_EQ(e.sections().size(), 4u);
  std::vector<std::string> names;
  for (const auto& s : e) names.emplace_back(e.Name(s));
  EXPECT_EQ(names, (std::vector<std::string>{"", ".shstrtab", ".data", ".bss"}));
  const auto& data = e.sections()[2];
  ASSERT_EQ(data.bytes.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(data.bytes[static_cast<size_t>(i)], i);
  EXPECT_TRUE(e.sections()[3].bytes.empty());
  EXPECT_EQ(e.sections()[3].size, 1u << 20);
}

TEST(Elf64, NoSectionsIsFine) {
  Image im = Build();
  Put16(im.bytes, 60, 0);
  Put64(im.bytes, 40, ~uint64_t{0});  // ignored without sections
  const Elf64Sections e = Elf64Sections::Parse(im.bytes);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e.sections().empty());
}

TEST(Elf64, TruncatedAndBadMagic) {
  const Image im = Build();
  for (size_t n : {size_t{0}, size_t{4}, size_t{63}}) {
    const Elf64Sections e = Elf64Sections::Parse(std::span<const uint8_t>(im.bytes.data(), n));
    EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kNotElf) << n;
  }
  std::vector<uint8_t> b = im.bytes;
  b[1] = 'X';
  EXPECT_EQ(Elf64Sections::Parse(b).problem().kind, Elf64Problem::Kind::kNotElf);
  b = im.bytes;
  b[4] = 1;  // ELFCLASS32
  Elf64Sections e = Elf64Sections::Parse(b);
  EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kNotElf64Le);
  EXPECT_EQ(e.problem().elf_class, 1);
  b = im.bytes;
  b[5] = 2;  // big endian
  e = Elf64Sections::Parse(b);
  EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kNotElf64Le);
  EXPECT_EQ(e.problem().data, 2);
  // Cut inside the section table: the table no longer fits.
  e = Elf64Sections::Parse(std::span<const uint8_t>(im.bytes.data(), im.bytes.size() - 1));
  EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kSectionTable);
  EXPECT_EQ(e.problem().table_offset, im.shoff);
  EXPECT_EQ(e.problem().count, 4);
  EXPECT_TRUE(e.sections().empty());
}

TEST(Elf64, SectionTableOutOfRange) {
  Image im = Build();
  for (uint64_t shoff : {uint64_t{1} << 40, ~uint64_t{0} - 10, uint64_t{im.bytes.size() - 64}}) {
    std::vector<uint8_t> b = im.bytes;
    Put64(b, 40, shoff);
    const Elf64Sections e = Elf64Sections::Parse(b);
    EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kSectionTable) << shoff;
    EXPECT_EQ(e.problem().table_offset, shoff);
  }
  std::vector<uint8_t> b = im.bytes;
  Put16(b, 58, 72);  // entries that are not 64 bytes
  const Elf64Sections e = Elf64Sections::Parse(b);
  EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kSectionTable);
  EXPECT_EQ(e.problem().entry_size, 72);
}

TEST(Elf64, SectionOutOfRange) {
  const Image im = Build();
  const uint64_t n = im.bytes.size();
  // (offset, size): past the end, one byte too long, and offset + size wrapping to a small number.
  for (const auto& [off, size] : std::vector<std::pair<uint64_t, uint64_t>>{
           {n + 1, 0}, {n - 8, 9}, {~uint64_t{0} - 3, 8}, {8, ~uint64_t{0}}}) {
    std::vector<uint8_t> b = im.bytes;
    Put64(b, im.entry(2) + 24, off);
    Put64(b, im.entry(2) + 32, size);
    const Elf64Sections e = Elf64Sections::Parse(b);
    EXPECT_EQ(e.problem().kind, Elf64Problem::Kind::kSectionBounds) << off << " " << size;
    EXPECT_EQ(e.problem().index, 2);
    EXPECT_EQ(e.problem().offset, off);
    EXPECT_EQ(e.problem().size, size);
    EXPECT_TRUE(e.sections().empty());
  }
  // A section ending exactly at the end of the image is inside it.
  std::vector<uint8_t> b = im.bytes;
  Put64(b, im.entry(2) + 24, n - 16);
  Put64(b, im.entry(2) + 32, 16);
  EXPECT_TRUE(Elf64Sections::Parse(b).ok());
}

TEST(Elf64, NamesOutOfRangeAreEmpty) {
  Image im = Build();
  std::vector<uint8_t> b = im.bytes;
  Put16(b, 62, 9);  // no section 9
  Elf64Sections e = Elf64Sections::Parse(b);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.Name(e.sections()[2]), "");
  b = im.bytes;
  Put32(b, im.entry(2), 23);  // name offset == the name table's size
  e = Elf64Sections::Parse(b);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.Name(e.sections()[2]), "");
  // A name table without a final NUL: the last name runs past its section.
  b = im.bytes;
  Put64(b, im.entry(1) + 32, 21);  // cuts ".bss\0" to ".bs" (no NUL inside the section)
  e = Elf64Sections::Parse(b);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.Name(e.sections()[3]), "");
  EXPECT_EQ(e.Name(e.sections()[2]), ".data");
}

}  // namespace
