#include "tilelang/codegen/cuda/cubin_params.h"

#include <algorithm>
#include <cstring>

#include "tilelang/formats/elf64.h"

namespace tl::codegen::cuda {
namespace {

// .nv.info record formats (the first byte of a record) and the attributes
// read here (the second byte). The encoding is NVIDIA's, undocumented but
// stable since Fermi; cuobjdump -elf prints the same records by name.
// Every record starts on 4 bytes: format, attribute, then a u16 that is
// padding (no value), the value (byte, half) or the size of what follows.
constexpr uint8_t kFmtNoValue = 0x01;     // 4 bytes in all
constexpr uint8_t kFmtByteValue = 0x02;   // 4 bytes in all
constexpr uint8_t kFmtHalfValue = 0x03;   // 4 bytes in all
constexpr uint8_t kFmtSizedValue = 0x04;  // 4 bytes + the u16's count
constexpr uint8_t kAttrParamCbank = 0x0a;  // u32 symbol, u16 cbank offset, u16 parameter bytes
constexpr uint8_t kAttrKparamInfo = 0x17;  // u32 index, u16 ordinal, u16 offset, u32 flags (size in bits 18..31)

template <typename T>
T Load(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;  // little-endian host (x86-64, the only pack host)
}

}  // namespace

StatusOr<CubinParamLayout> ReadCubinParamLayout(const std::vector<uint8_t>& cubin, const std::string& entry) {
  const size_t n = cubin.size();
  if (n < 64 || std::memcmp(cubin.data(), "\x7f" "ELF", 4) != 0 || cubin[4] != 2 || cubin[5] != 1) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "cubin for '%s': not a 64-bit little-endian ELF (%zu bytes, class %d, data %d)", entry.c_str(), n,
                      n > 5 ? cubin[4] : -1, n > 5 ? cubin[5] : -1);
  }
  const formats::Elf64Sections elf = formats::Elf64Sections::Parse(cubin);
  const formats::Elf64Problem& bad = elf.problem();
  if (bad.kind == formats::Elf64Problem::Kind::kSectionTable || (elf.ok() && elf.name_table() >= elf.sections().size())) {
    return MakeStatus(StatusCode::kDataLoss,
                      "cubin for '%s': section headers (%u x %u B at %llu) run past the end (%zu bytes), are not 64-byte "
                      "entries, or the name table index %u is out of range",
                      entry.c_str(), Load<uint16_t>(cubin, 0x3c), Load<uint16_t>(cubin, 0x3a),
                      static_cast<unsigned long long>(Load<uint64_t>(cubin, 0x28)), n, elf.name_table());
  }
  if (bad.kind == formats::Elf64Problem::Kind::kSectionBounds) {
    return MakeStatus(StatusCode::kDataLoss, "cubin for '%s': section %u (%llu B at %llu) runs past the end (%zu bytes)",
                      entry.c_str(), bad.index, static_cast<unsigned long long>(bad.size),
                      static_cast<unsigned long long>(bad.offset), n);
  }
  if (!elf.ok()) {  // ruled out above
    return MakeStatus(StatusCode::kInvalidArgument, "cubin for '%s': not a 64-bit little-endian ELF", entry.c_str());
  }
  const std::string want = ".nv.info." + entry;
  const formats::Elf64Section* info = nullptr;
  for (const formats::Elf64Section& s : elf) {
    if (elf.Name(s) == want) info = &s;
  }
  if (!info) {
    return MakeStatus(StatusCode::kNotFound, "cubin: no '%s' section (is '%s' an entry point of this cubin?)",
                      want.c_str(), entry.c_str());
  }

  CubinParamLayout out;
  uint32_t cbank_bytes = 0;
  bool have_cbank = false;
  size_t at = info->offset;
  const size_t end = info->offset + info->size;
  while (at < end) {
    if (end - at < 4) {
      return MakeStatus(StatusCode::kDataLoss, "cubin '%s': truncated record at offset %zu (%zu bytes left)",
                        want.c_str(), at - info->offset, end - at);
    }
    const uint8_t fmt = cubin[at], attr = cubin[at + 1];
    const size_t body = at + 4;
    size_t len = 0;
    switch (fmt) {
      case kFmtNoValue:
      case kFmtByteValue:
      case kFmtHalfValue: len = 0; break;
      case kFmtSizedValue: len = Load<uint16_t>(cubin, at + 2); break;
      default:
        return MakeStatus(StatusCode::kDataLoss, "cubin '%s': unknown record format 0x%02x (attribute 0x%02x) at offset %zu",
                          want.c_str(), fmt, attr, at - info->offset);
    }
    if (len > end - body) {
      return MakeStatus(StatusCode::kDataLoss, "cubin '%s': record 0x%02x at offset %zu has %zu bytes, %zu remain",
                        want.c_str(), attr, at - info->offset, len, end - body);
    }
    if (fmt == kFmtSizedValue && attr == kAttrKparamInfo) {
      if (len < 12) {
        return MakeStatus(StatusCode::kDataLoss, "cubin '%s': KPARAM_INFO record at offset %zu has %zu bytes, expected 12",
                          want.c_str(), at - info->offset, len);
      }
      const uint32_t flags = Load<uint32_t>(cubin, body + 8);
      out.params.push_back({Load<uint16_t>(cubin, body + 4), Load<uint16_t>(cubin, body + 6), (flags >> 18) & 0x3fff});
    } else if (fmt == kFmtSizedValue && attr == kAttrParamCbank && len >= 8) {
      cbank_bytes = Load<uint16_t>(cubin, body + 6);
      have_cbank = true;
    }
    at = body + len;
  }
  std::sort(out.params.begin(), out.params.end(),
            [](const CubinParam& a, const CubinParam& b) { return a.ordinal < b.ordinal; });
  uint32_t last_end = 0;
  for (size_t i = 0; i < out.params.size(); ++i) {
    if (out.params[i].ordinal != i) {
      return MakeStatus(StatusCode::kDataLoss, "cubin '%s': parameter ordinals are not 0..%zu (position %zu holds %u)",
                        want.c_str(), out.params.size() - 1, i, out.params[i].ordinal);
    }
    last_end = std::max(last_end, out.params[i].offset + out.params[i].size);
  }
  out.buffer_bytes = have_cbank ? std::max(cbank_bytes, last_end) : last_end;
  return out;
}

}  // namespace tl::codegen::cuda
