// Elf64Sections; see elf64.h.
#include "tilelang/formats/elf64.h"

#include <cstring>

namespace tl::formats {
namespace {

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24; }
uint64_t Le64(const uint8_t* p) { return uint64_t{Le32(p)} | uint64_t{Le32(p + 4)} << 32; }
// [off, off + size) inside [0, total), without wrapping.
bool InBounds(uint64_t off, uint64_t size, uint64_t total) { return off <= total && size <= total - off; }

}  // namespace

Elf64Sections Elf64Sections::Parse(std::span<const uint8_t> image) {
  Elf64Sections e;
  e.image_ = image;
  const uint64_t n = image.size();
  const uint8_t* p = image.data();
  Elf64Problem& bad = e.problem_;
  if (n < 64 || std::memcmp(p, "\x7f" "ELF", 4) != 0) {
    bad.kind = Elf64Problem::Kind::kNotElf;
    return e;
  }
  if (p[4] != 2 || p[5] != 1) {
    bad.kind = Elf64Problem::Kind::kNotElf64Le;
    bad.elf_class = p[4];
    bad.data = p[5];
    return e;
  }
  e.machine_ = Le16(p + 18);
  e.shstrndx_ = Le16(p + 62);
  const uint64_t shoff = Le64(p + 40);
  const uint16_t shentsize = Le16(p + 58), shnum = Le16(p + 60);
  if (shnum != 0 && (shentsize != 64 || !InBounds(shoff, uint64_t{shnum} * 64, n))) {
    bad.kind = Elf64Problem::Kind::kSectionTable;
    bad.table_offset = shoff;
    bad.count = shnum;
    bad.entry_size = shentsize;
    return e;
  }
  e.sections_.reserve(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* sh = p + shoff + uint64_t{i} * 64;
    Elf64Section s;
    s.index = i;
    s.name = Le32(sh);
    s.type = Le32(sh + 4);
    s.offset = Le64(sh + 24);
    s.size = Le64(sh + 32);
    if (s.type != kShtNobits) {
      if (!InBounds(s.offset, s.size, n)) {
        bad.kind = Elf64Problem::Kind::kSectionBounds;
        bad.index = i;
        bad.offset = s.offset;
        bad.size = s.size;
        e.sections_.clear();
        return e;
      }
      s.bytes = image.subspan(static_cast<size_t>(s.offset), static_cast<size_t>(s.size));
    }
    e.sections_.push_back(s);
  }
  return e;
}

std::string_view Elf64Sections::Name(const Elf64Section& s) const {
  if (shstrndx_ >= sections_.size()) return {};
  const std::span<const uint8_t> names = sections_[shstrndx_].bytes;
  if (s.name >= names.size()) return {};
  const char* at = reinterpret_cast<const char*>(names.data()) + s.name;
  const void* nul = std::memchr(at, 0, names.size() - s.name);
  if (!nul) return {};
  return std::string_view(at, static_cast<size_t>(static_cast<const char*>(nul) - at));
}

}  // namespace tl::formats
