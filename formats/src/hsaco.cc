// ReadHsaco: ELF64 header and section table, the note sections, and a small
// MessagePack decoder for NT_AMDGPU_METADATA. See hsaco.h.
#include "tilelang/formats/hsaco.h"
#include "tilelang/formats/elf64.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

namespace tl::formats {
namespace {

constexpr uint16_t kEmAmdgpu = 224;
constexpr uint8_t kOsAbiHsa = 64;
constexpr uint32_t kShtNote = 7;
constexpr uint32_t kNtAmdgpuMetadata = 32;
constexpr int kMaxDepth = 32;

uint16_t Le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t Le32(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24; }

// ---------------------------------------------------------------------------
// MessagePack (big endian), the subset the metadata uses plus everything a
// reader must skip: nil, bool, ints, floats, str, bin, array, map, ext.
struct Msg {
  enum class Kind { kNil, kBool, kInt, kFloat, kStr, kArray, kMap } kind = Kind::kNil;
  int64_t i = 0;  // kBool (0/1), kInt (uint64 above INT64_MAX wraps: not used by the metadata)
  double f = 0;
  std::string s;
  std::vector<Msg> items;                      // kArray
  // kMap, in order: key, value, key, value... (flat: a vector of pairs of
  // the still-incomplete Msg does not compile with clang's libstdc++ checks)
  std::vector<Msg> entries;

  const Msg* Get(const char* key) const {
    for (size_t e = 0; e + 1 < entries.size(); e += 2) {
      if (entries[e].kind == Kind::kStr && entries[e].s == key) return &entries[e + 1];
    }
    return nullptr;
  }
};

class MsgReader {
 public:
  MsgReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  Status Read(Msg* out, int depth = 0) {
    if (depth > kMaxDepth) return Fail("nesting deeper than 32 levels");
    uint8_t t = 0;
    TL_RETURN_IF_ERROR(Byte(&t));
    if (t <= 0x7f) return Int(out, t);
    if (t >= 0xe0) return Int(out, static_cast<int8_t>(t));
    if ((t & 0xf0) == 0x80) return Map(out, t & 0x0f, depth);
    if ((t & 0xf0) == 0x90) return Array(out, t & 0x0f, depth);
    if ((t & 0xe0) == 0xa0) return Str(out, t & 0x1f);
    uint64_t v = 0;
    switch (t) {
      case 0xc0: out->kind = Msg::Kind::kNil; return Status::Ok();
      case 0xc2: out->kind = Msg::Kind::kBool; out->i = 0; return Status::Ok();
      case 0xc3: out->kind = Msg::Kind::kBool; out->i = 1; return Status::Ok();
      case 0xc4: case 0xc5: case 0xc6:  // bin 8/16/32: skipped as an empty string
        TL_RETURN_IF_ERROR(Uint(1 << (t - 0xc4), &v));
        TL_RETURN_IF_ERROR(Skip(v));
        out->kind = Msg::Kind::kStr;
        return Status::Ok();
      case 0xc7: case 0xc8: case 0xc9:  // ext 8/16/32
        TL_RETURN_IF_ERROR(Uint(1 << (t - 0xc7), &v));
        TL_RETURN_IF_ERROR(Skip(1));
        TL_RETURN_IF_ERROR(Skip(v));
        out->kind = Msg::Kind::kNil;
        return Status::Ok();
      case 0xca: {
        TL_RETURN_IF_ERROR(Uint(4, &v));
        float x;
        const uint32_t b = static_cast<uint32_t>(v);
        std::memcpy(&x, &b, 4);
        out->kind = Msg::Kind::kFloat;
        out->f = x;
        return Status::Ok();
      }
      case 0xcb: {
        TL_RETURN_IF_ERROR(Uint(8, &v));
        double x;
        std::memcpy(&x, &v, 8);
        out->kind = Msg::Kind::kFloat;
        out->f = x;
        return Status::Ok();
      }
      case 0xcc: case 0xcd: case 0xce: case 0xcf:
        TL_RETURN_IF_ERROR(Uint(1 << (t - 0xcc), &v));
        return Int(out, static_cast<int64_t>(v));
      case 0xd0: TL_RETURN_IF_ERROR(Uint(1, &v)); return Int(out, static_cast<int8_t>(v));
      case 0xd1: TL_RETURN_IF_ERROR(Uint(2, &v)); return Int(out, static_cast<int16_t>(v));
      case 0xd2: TL_RETURN_IF_ERROR(Uint(4, &v)); return Int(out, static_cast<int32_t>(v));
      case 0xd3: TL_RETURN_IF_ERROR(Uint(8, &v)); return Int(out, static_cast<int64_t>(v));
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:  // fixext 1..16
        TL_RETURN_IF_ERROR(Skip(1 + (uint64_t{1} << (t - 0xd4))));
        out->kind = Msg::Kind::kNil;
        return Status::Ok();
      case 0xd9: case 0xda: case 0xdb:
        TL_RETURN_IF_ERROR(Uint(1 << (t - 0xd9), &v));
        return Str(out, v);
      case 0xdc: case 0xdd:
        TL_RETURN_IF_ERROR(Uint(t == 0xdc ? 2 : 4, &v));
        return Array(out, v, depth);
      case 0xde: case 0xdf:
        TL_RETURN_IF_ERROR(Uint(t == 0xde ? 2 : 4, &v));
        return Map(out, v, depth);
      default: return Fail("unknown type byte 0x" + Hex(t));
    }
  }
  size_t pos() const { return pos_; }

 private:
  static std::string Hex(unsigned v) {
    char b[16];
    std::snprintf(b, sizeof b, "%02x", v);
    return b;
  }
  Status Fail(const std::string& what) const {
    return Status(StatusCode::kInvalidArgument,
                  "AMDGPU metadata (MessagePack, " + std::to_string(n_) + " bytes) at offset " + std::to_string(pos_) +
                      ": " + what);
  }
  Status Byte(uint8_t* b) {
    if (pos_ >= n_) return Fail("truncated");
    *b = p_[pos_++];
    return Status::Ok();
  }
  Status Uint(int bytes, uint64_t* v) {
    if (n_ - pos_ < static_cast<size_t>(bytes)) return Fail("truncated " + std::to_string(bytes) + "-byte integer");
    *v = 0;
    for (int k = 0; k < bytes; ++k) *v = (*v << 8) | p_[pos_++];
    return Status::Ok();
  }
  Status Skip(uint64_t bytes) {
    if (bytes > n_ - pos_) return Fail("a " + std::to_string(bytes) + "-byte item overruns the note");
    pos_ += static_cast<size_t>(bytes);
    return Status::Ok();
  }
  Status Int(Msg* out, int64_t v) {
    out->kind = Msg::Kind::kInt;
    out->i = v;
    return Status::Ok();
  }
  Status Str(Msg* out, uint64_t len) {
    if (len > n_ - pos_) return Fail("a " + std::to_string(len) + "-byte string overruns the note");
    out->kind = Msg::Kind::kStr;
    out->s.assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }
  Status Array(Msg* out, uint64_t count, int depth) {
    // Every item takes at least one byte: a count beyond the rest is corrupt
    // (and would otherwise reserve unbounded memory).
    if (count > n_ - pos_) return Fail("array of " + std::to_string(count) + " items overruns the note");
    out->kind = Msg::Kind::kArray;
    out->items.resize(static_cast<size_t>(count));
    for (Msg& m : out->items) TL_RETURN_IF_ERROR(Read(&m, depth + 1));
    return Status::Ok();
  }
  Status Map(Msg* out, uint64_t count, int depth) {
    if (count > (n_ - pos_) / 2) return Fail("map of " + std::to_string(count) + " entries overruns the note");
    out->kind = Msg::Kind::kMap;
    out->entries.resize(2 * static_cast<size_t>(count));
    for (Msg& m : out->entries) TL_RETURN_IF_ERROR(Read(&m, depth + 1));
    return Status::Ok();
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

int64_t IntOr(const Msg& m, const char* key, int64_t fallback) {
  const Msg* v = m.Get(key);
  return v && (v->kind == Msg::Kind::kInt || v->kind == Msg::Kind::kBool) ? v->i : fallback;
}
std::string StrOr(const Msg& m, const char* key) {
  const Msg* v = m.Get(key);
  return v && v->kind == Msg::Kind::kStr ? v->s : std::string();
}

// e_flags EF_AMDGPU_MACH values of the processors we build for or select
// among (LLVM's ELF.h); others are taken from the metadata's target alone.
const std::map<uint32_t, const char*>& MachTable() {
  static const std::map<uint32_t, const char*> table = {
      {0x2c, "gfx900"},  {0x2f, "gfx906"},  {0x30, "gfx908"},  {0x3f, "gfx90a"},  {0x40, "gfx940"},
      {0x4b, "gfx941"},  {0x4c, "gfx942"},  {0x36, "gfx1030"}, {0x41, "gfx1100"}, {0x46, "gfx1101"},
      {0x47, "gfx1102"}, {0x48, "gfx1200"},
  };
  return table;
}

// EF_AMDGPU_FEATURE_*_V4: 0 unsupported, 1 any, 2 off, 3 on.
int Mode(uint32_t bits) { return bits == 0 ? -1 : bits == 1 ? 2 : bits == 2 ? 0 : 1; }

Status ParseMetadata(const uint8_t* p, size_t n, HsacoInfo* info) {
  MsgReader r(p, n);
  Msg root;
  TL_RETURN_IF_ERROR(r.Read(&root));
  if (root.kind != Msg::Kind::kMap) {
    return Status(StatusCode::kInvalidArgument, "AMDGPU metadata: the root is not a map");
  }
  info->metadata_target = StrOr(root, "amdhsa.target");
  const Msg* kernels = root.Get("amdhsa.kernels");
  if (!kernels || kernels->kind != Msg::Kind::kArray) {
    return Status(StatusCode::kInvalidArgument, "AMDGPU metadata has no amdhsa.kernels array");
  }
  for (size_t i = 0; i < kernels->items.size(); ++i) {
    const Msg& k = kernels->items[i];
    if (k.kind != Msg::Kind::kMap) {
      return Status(StatusCode::kInvalidArgument, "AMDGPU metadata: amdhsa.kernels[" + std::to_string(i) + "] is not a map");
    }
    HsacoKernel out;
    out.name = StrOr(k, ".name");
    out.symbol = StrOr(k, ".symbol");
    out.kernarg_segment_size = IntOr(k, ".kernarg_segment_size", -1);
    out.kernarg_segment_align = IntOr(k, ".kernarg_segment_align", -1);
    out.group_segment_fixed_size = IntOr(k, ".group_segment_fixed_size", -1);
    out.private_segment_fixed_size = IntOr(k, ".private_segment_fixed_size", -1);
    out.sgpr_count = IntOr(k, ".sgpr_count", -1);
    out.vgpr_count = IntOr(k, ".vgpr_count", -1);
    out.agpr_count = IntOr(k, ".agpr_count", -1);
    out.sgpr_spill_count = IntOr(k, ".sgpr_spill_count", -1);
    out.vgpr_spill_count = IntOr(k, ".vgpr_spill_count", -1);
    out.max_flat_workgroup_size = IntOr(k, ".max_flat_workgroup_size", -1);
    out.wavefront_size = IntOr(k, ".wavefront_size", -1);
    out.uses_dynamic_stack = IntOr(k, ".uses_dynamic_stack", 0) != 0;
    if (out.name.empty()) {
      return Status(StatusCode::kInvalidArgument, "AMDGPU metadata: kernel " + std::to_string(i) + " has no .name");
    }
    if (const Msg* args = k.Get(".args"); args && args->kind == Msg::Kind::kArray) {
      for (size_t a = 0; a < args->items.size(); ++a) {
        const Msg& m = args->items[a];
        const int64_t off = IntOr(m, ".offset", -1), size = IntOr(m, ".size", -1);
        if (m.kind != Msg::Kind::kMap || off < 0 || size < 0 || off > UINT32_MAX || size > UINT32_MAX ||
            (out.kernarg_segment_size >= 0 && off + size > out.kernarg_segment_size)) {
          return Status(StatusCode::kInvalidArgument,
                        "AMDGPU metadata: kernel '" + out.name + "' argument " + std::to_string(a) + " (offset " +
                            std::to_string(off) + ", size " + std::to_string(size) +
                            ") is malformed or outside the kernarg segment of " +
                            std::to_string(out.kernarg_segment_size) + " bytes");
        }
        HsacoArg arg;
        arg.offset = static_cast<uint32_t>(off);
        arg.size = static_cast<uint32_t>(size);
        arg.value_kind = StrOr(m, ".value_kind");
        arg.address_space = StrOr(m, ".address_space");
        out.args.push_back(std::move(arg));
      }
    }
    info->kernels.push_back(std::move(out));
  }
  return Status::Ok();
}

}  // namespace

uint32_t HsacoKernel::ExplicitBytes() const {
  uint32_t end = 0;
  for (const HsacoArg& a : args) {
    if (!a.hidden()) end = std::max(end, a.offset + a.size);
  }
  return end;
}

std::string HsacoInfo::TargetId() const {
  std::string id = processor;
  if (sramecc == 0 || sramecc == 1) id += sramecc ? ":sramecc+" : ":sramecc-";
  if (xnack == 0 || xnack == 1) id += xnack ? ":xnack+" : ":xnack-";
  return id;
}

const HsacoKernel* HsacoInfo::Find(const std::string& name) const {
  for (const HsacoKernel& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

StatusOr<HsacoInfo> ReadHsaco(std::span<const uint8_t> image) {
  const uint64_t n = image.size();
  const uint8_t* p = image.data();
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, "AMDGPU code object of " + std::to_string(n) + " bytes: " + what);
  };
  if (n >= 24 && std::memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) {
    return bad("is a clang offload bundle; a HSACO variant holds one bare ELF code object (--no-gpu-bundle-output)");
  }
  if (n < 64 || std::memcmp(p, "\x7f" "ELF", 4) != 0) return bad("does not start with an ELF header");
  if (p[4] != 2 || p[5] != 1) {
    return bad("ELF class " + std::to_string(p[4]) + " data " + std::to_string(p[5]) + "; expected 64-bit little endian");
  }
  if (Le16(p + 18) != kEmAmdgpu) return bad("e_machine " + std::to_string(Le16(p + 18)) + "; expected EM_AMDGPU (224)");
  if (p[7] != kOsAbiHsa) return bad("OS ABI " + std::to_string(p[7]) + "; expected ELFOSABI_AMDGPU_HSA (64)");
  HsacoInfo info;
  const uint8_t abi = p[8];
  if (abi < 2 || abi > 4) {
    return bad("ABI version " + std::to_string(abi) + " is not code object v4, v5 or v6 (ABI version 2, 3 or 4)");
  }
  info.code_object_version = abi + 2;
  info.e_flags = Le32(p + 48);
  info.xnack = Mode((info.e_flags >> 8) & 3);
  info.sramecc = Mode((info.e_flags >> 10) & 3);
  const Elf64Sections elf = Elf64Sections::Parse(image);
  if (const Elf64Problem& e = elf.problem(); e.kind == Elf64Problem::Kind::kSectionTable) {
    return bad("section headers (offset " + std::to_string(e.table_offset) + ", " + std::to_string(e.count) + " x " +
               std::to_string(e.entry_size) + " bytes) exceed the image");
  } else if (e.kind == Elf64Problem::Kind::kSectionBounds) {
    return bad("section " + std::to_string(e.index) + " [" + std::to_string(e.offset) + ", +" + std::to_string(e.size) +
               ") exceeds the image");
  } else if (!elf.ok()) {
    return bad("is not a 64-bit little-endian ELF image");  // ruled out above
  }
  bool found = false;
  for (const Elf64Section& sec : elf) {
    if (found) break;
    if (sec.type != kShtNote) continue;
    const uint64_t off = sec.offset, size = sec.size;
    // Notes: namesz, descsz, type, name (4-byte padded), desc (4-byte padded).
    uint64_t at = off;
    const uint64_t end = off + size;
    while (end - at >= 12) {
      const uint32_t namesz = Le32(p + at), descsz = Le32(p + at + 4), ntype = Le32(p + at + 8);
      const uint64_t name_at = at + 12;
      const uint64_t desc_at = name_at + ((uint64_t{namesz} + 3) & ~uint64_t{3});
      const uint64_t next = desc_at + ((uint64_t{descsz} + 3) & ~uint64_t{3});
      if (desc_at > end || next > end + 3 || descsz > end - desc_at) {
        return bad("note at offset " + std::to_string(at) + " (name " + std::to_string(namesz) + " bytes, desc " +
                   std::to_string(descsz) + " bytes) overruns its section [" + std::to_string(off) + ", +" +
                   std::to_string(size) + ")");
      }
      if (ntype == kNtAmdgpuMetadata && namesz == 7 && std::memcmp(p + name_at, "AMDGPU", 7) == 0) {
        TL_RETURN_IF_ERROR(ParseMetadata(p + desc_at, descsz, &info));
        found = true;
        break;
      }
      at = next;
    }
  }
  if (!found) return bad("has no NT_AMDGPU_METADATA note (\"AMDGPU\", type 32)");
  // The processor: from the metadata target ("amdgcn-amd-amdhsa--gfx90a:xnack-"),
  // cross-checked with e_flags where we know the machine number.
  const std::string prefix = "amdgcn-amd-amdhsa--";
  if (info.metadata_target.rfind(prefix, 0) != 0) {
    return bad("amdhsa.target '" + info.metadata_target + "' does not start with '" + prefix + "'");
  }
  info.processor = info.metadata_target.substr(prefix.size(), info.metadata_target.find(':') == std::string::npos
                                                                  ? std::string::npos
                                                                  : info.metadata_target.find(':') - prefix.size());
  const auto& table = MachTable();
  if (auto it = table.find(info.e_flags & 0xff); it != table.end() && info.processor != it->second) {
    char flags[16];
    std::snprintf(flags, sizeof flags, "0x%x", info.e_flags);
    return bad("e_flags " + std::string(flags) + " name processor " + it->second + " but amdhsa.target says '" +
               info.metadata_target + "'");
  }
  return info;
}

}  // namespace tl::formats
