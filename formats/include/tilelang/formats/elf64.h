// Elf64Sections: a bounds-checked view of the section header table of a
// little-endian ELF64 image (cubins, AMDGPU code objects). Shared by the
// HSACO reader (hsaco.cc), the CUDA runtime's check before a cubin reaches
// the driver (cuda_device.cc) and the cubin parameter-layout reader
// (cubin_params.cc), which each word their own errors from the Elf64Problem.
//
// Parse checks, in order: at least a 64-byte header with the ELF magic;
// class 2 / data 1 (64-bit little endian); when e_shnum != 0, 64-byte
// entries and a table [e_shoff, + e_shnum * 64) inside the image; every
// section with file bytes (type != SHT_NOBITS) inside the image, without
// wrapping. Never reads outside the image.
//
// Thread-safety: immutable after Parse; views the caller's bytes (which must
// outlive it).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tl::formats {

inline constexpr uint32_t kShtNobits = 8;  // occupies no bytes of the image

struct Elf64Section {
  uint16_t index = 0;
  uint32_t name = 0;  // offset of its name in the section-name table
  uint32_t type = 0;
  uint64_t offset = 0, size = 0;
  std::span<const uint8_t> bytes;  // the section's bytes; empty for SHT_NOBITS
};

// What Parse rejected first; the numbers are the offending header fields.
struct Elf64Problem {
  enum class Kind : uint8_t {
    kNone,
    kNotElf,        // shorter than 64 bytes or no "\x7fELF" magic
    kNotElf64Le,    // ei_class / ei_data (class, data) are not 2, 1
    kSectionTable,  // table_offset, count, entry_size: 64-byte entries inside the image
    kSectionBounds, // section index: [offset, offset + size) outside the image
  };
  Kind kind = Kind::kNone;
  uint8_t elf_class = 0, data = 0;
  uint64_t table_offset = 0;
  uint16_t count = 0, entry_size = 0;
  uint16_t index = 0;
  uint64_t offset = 0, size = 0;
};

class Elf64Sections {
 public:
  static Elf64Sections Parse(std::span<const uint8_t> image);

  bool ok() const { return problem_.kind == Elf64Problem::Kind::kNone; }
  const Elf64Problem& problem() const { return problem_; }
  uint64_t image_size() const { return image_.size(); }

  // Header fields (0 unless the header passed the magic and class checks).
  uint16_t machine() const { return machine_; }
  uint16_t name_table() const { return shstrndx_; }  // e_shstrndx, unchecked

  const std::vector<Elf64Section>& sections() const { return sections_; }
  std::vector<Elf64Section>::const_iterator begin() const { return sections_.begin(); }
  std::vector<Elf64Section>::const_iterator end() const { return sections_.end(); }

  // Section s's name: the NUL-terminated string at s.name in section
  // e_shstrndx; empty when that index or offset is out of range or the
  // string runs past its section without a NUL.
  std::string_view Name(const Elf64Section& s) const;

 private:
  std::span<const uint8_t> image_;
  Elf64Problem problem_;
  uint16_t machine_ = 0, shstrndx_ = 0;
  std::vector<Elf64Section> sections_;
};

}  // namespace tl::formats
