#include "spirv_module.h"

#include <cinttypes>
#include <cstring>
#include <map>

namespace tl::rt::vk {

namespace {

// SPIR-V opcodes, enumerants and built-ins used below (SPIR-V specification,
// section 3).
enum : uint32_t {
  kMagic = 0x07230203,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeMatrix = 24,
  kOpTypeArray = 28,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpFunction = 54,
  kOpFunctionParameter = 55,
  kOpFunctionEnd = 56,
  kOpLabel = 248,
  kOpBranch = 249,
  kOpReturn = 253,
  kOpUnreachable = 255,
  kOpSwitch = 251,
  kOpTerminateInvocation = 4416,
  kExecutionModelGLCompute = 5,
  kExecutionModeLocalSize = 17,
  kStorageClassWorkgroup = 4,
  kDecorationBuiltIn = 11,
  kBuiltInWorkgroupSize = 25,
};

uint32_t Word(std::span<const uint8_t> bytes, size_t i) {
  const uint8_t* p = bytes.data() + 4 * i;
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// A literal string starting at word `at` of an instruction of `count` words.
std::string LiteralString(std::span<const uint8_t> bytes, size_t at, size_t end) {
  std::string s;
  for (size_t i = at; i < end; ++i) {
    uint32_t w = Word(bytes, i);
    for (int b = 0; b < 4; ++b) {
      char c = static_cast<char>((w >> (8 * b)) & 0xFF);
      if (c == '\0') return s;
      s += c;
    }
  }
  return s;
}

}  // namespace

StatusOr<SpirvInfo> InspectSpirv(std::span<const uint8_t> bytes, const std::string& entry_point,
                                 const std::string& where) {
  if (bytes.size() % 4 != 0 || bytes.size() < 20) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "%s: SPIR-V payload of %zu bytes is not a module (needs a 20-byte header and whole 32-bit words)",
                      where.c_str(), bytes.size());
  }
  const size_t n = bytes.size() / 4;
  const uint32_t magic = Word(bytes, 0);
  if (magic != kMagic) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "%s: SPIR-V magic is 0x%08x, expected 0x%08x (little-endian words)%s", where.c_str(), magic,
                      kMagic, magic == __builtin_bswap32(kMagic) ? "; the module is big-endian" : "");
  }
  SpirvInfo info;
  info.version = Word(bytes, 1);
  if ((info.version & 0xFF0000FFu) != 0 || info.version < 0x00010000u) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: SPIR-V version word 0x%08x is malformed", where.c_str(),
                      info.version);
  }
  // Types: id -> packed byte size (0: unknown). Constants: id -> value.
  std::map<uint32_t, uint64_t> type_size;
  std::map<uint32_t, uint32_t> pointer_pointee;  // Workgroup pointers only
  std::map<uint32_t, uint64_t> constant;
  std::map<uint32_t, std::vector<uint32_t>> composite;
  std::vector<uint32_t> workgroup_vars;  // pointer type ids
  uint32_t entry_id = 0;
  bool found = false;
  uint32_t workgroup_size_builtin = 0;  // id decorated BuiltIn WorkgroupSize
  struct Mode {
    uint32_t target, mode, x, y, z;
  };
  std::vector<Mode> modes;
  // Function structure: OpFunction [OpFunctionParameter...] (OpLabel ...
  // terminator)* OpFunctionEnd. Checked because a truncated module (a cut
  // after a whole instruction) crashes drivers inside pipeline creation.
  enum class At { kGlobal, kFunctionHead, kBlock, kBetweenBlocks } at = At::kGlobal;
  size_t functions = 0;
  auto structure_error = [&](size_t word, uint32_t op, const char* what) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: SPIR-V instruction at word %zu (opcode %u): %s", where.c_str(),
                      word, op, what);
  };
  for (size_t i = 5; i < n;) {
    const uint32_t first = Word(bytes, i);
    const uint32_t count = first >> 16, op = first & 0xFFFF;
    if (count == 0 || count > n - i) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "%s: SPIR-V instruction at word %zu (opcode %u) has word count %u; %zu words remain",
                        where.c_str(), i, op, count, n - i);
    }
    auto w = [&](size_t k) { return Word(bytes, i + k); };
    const bool terminator = (op >= kOpBranch && op <= kOpUnreachable) || op == kOpTerminateInvocation;
    (void)kOpReturn;
    (void)kOpSwitch;
    switch (at) {
      case At::kGlobal:
        if (op == kOpFunction) {
          at = At::kFunctionHead;
          ++functions;
        } else if (op == kOpFunctionEnd || op == kOpFunctionParameter || op == kOpLabel || terminator) {
          return structure_error(i, op, "outside a function");
        }
        break;
      case At::kFunctionHead:
        if (op == kOpLabel) {
          at = At::kBlock;
        } else if (op == kOpFunctionEnd) {
          at = At::kGlobal;  // a declaration without a body
        } else if (op != kOpFunctionParameter) {
          return structure_error(i, op, "a function's first block does not start with OpLabel");
        }
        break;
      case At::kBlock:
        if (op == kOpLabel || op == kOpFunction || op == kOpFunctionEnd) {
          return structure_error(i, op, "the block before it has no terminator");
        }
        if (terminator) at = At::kBetweenBlocks;
        break;
      case At::kBetweenBlocks:
        if (op == kOpLabel) {
          at = At::kBlock;
        } else if (op == kOpFunctionEnd) {
          at = At::kGlobal;
        } else {
          return structure_error(i, op, "an instruction after a block terminator is not OpLabel or OpFunctionEnd");
        }
        break;
    }
    switch (op) {
      case kOpEntryPoint:
        if (count >= 4 && w(1) == kExecutionModelGLCompute) {
          std::string name = LiteralString(bytes, i + 3, i + count);
          info.compute_entry_points.push_back(name);
          if (name == entry_point) {
            entry_id = w(2);
            found = true;
          }
        }
        break;
      case kOpExecutionMode:
        if (count >= 6 && w(2) == kExecutionModeLocalSize) modes.push_back({w(1), w(2), w(3), w(4), w(5)});
        break;
      case kOpDecorate:
        if (count >= 4 && w(2) == kDecorationBuiltIn && w(3) == kBuiltInWorkgroupSize) workgroup_size_builtin = w(1);
        break;
      case kOpTypeBool:
        if (count >= 2) type_size[w(1)] = 4;
        break;
      case kOpTypeInt:
      case kOpTypeFloat:
        if (count >= 3) type_size[w(1)] = w(2) / 8;
        break;
      case kOpTypeVector:
      case kOpTypeMatrix:
        if (count >= 4) type_size[w(1)] = type_size.count(w(2)) ? type_size[w(2)] * w(3) : 0;
        break;
      case kOpTypeArray:
        if (count >= 4) {
          const uint64_t elem = type_size.count(w(2)) ? type_size[w(2)] : 0;
          const uint64_t len = constant.count(w(3)) ? constant[w(3)] : 0;
          type_size[w(1)] = (elem && len && len < (uint64_t{1} << 40) / elem) ? elem * len : 0;
        }
        break;
      case kOpTypeStruct:
        if (count >= 2) {
          uint64_t total = 0;
          bool known = true;
          for (uint32_t k = 2; k < count; ++k) {
            const uint64_t m = type_size.count(w(k)) ? type_size[w(k)] : 0;
            known = known && m != 0;
            total += m;
          }
          type_size[w(1)] = known ? total : 0;
        }
        break;
      case kOpTypePointer:
        if (count >= 4 && w(2) == kStorageClassWorkgroup) pointer_pointee[w(1)] = w(3);
        break;
      case kOpConstant:
      case kOpSpecConstant:
        // Spec constants count with their default value (what the module
        // gets without specialization; the runtime sets none).
        if (count >= 4) constant[w(2)] = count >= 5 ? (uint64_t{w(4)} << 32 | w(3)) : w(3);
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        if (count >= 3) {
          std::vector<uint32_t> parts;
          for (uint32_t k = 3; k < count; ++k) parts.push_back(w(k));
          composite[w(2)] = std::move(parts);
        }
        break;
      case kOpVariable:
        if (count >= 4 && w(3) == kStorageClassWorkgroup) workgroup_vars.push_back(w(1));
        break;
      default:
        break;
    }
    i += count;
  }
  if (at != At::kGlobal) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "%s: the SPIR-V module ends inside function %zu (no OpFunctionEnd): truncated?", where.c_str(),
                      functions);
  }
  if (!found) {
    std::string list;
    for (const auto& e : info.compute_entry_points) list += (list.empty() ? "'" : ", '") + e + "'";
    return MakeStatus(StatusCode::kNotFound, "%s: the SPIR-V module has no GLCompute entry point '%s' (it has %s)",
                      where.c_str(), entry_point.c_str(), list.empty() ? "none" : list.c_str());
  }
  for (const Mode& m : modes) {
    if (m.target == entry_id) {
      info.local_size_known = true;
      info.local_size[0] = m.x;
      info.local_size[1] = m.y;
      info.local_size[2] = m.z;
    }
  }
  // The WorkgroupSize built-in overrides LocalSize when present.
  if (workgroup_size_builtin && composite.count(workgroup_size_builtin)) {
    const auto& parts = composite[workgroup_size_builtin];
    if (parts.size() == 3 && constant.count(parts[0]) && constant.count(parts[1]) && constant.count(parts[2])) {
      info.local_size_known = true;
      for (int a = 0; a < 3; ++a) info.local_size[a] = static_cast<uint32_t>(constant[parts[a]]);
    }
  }
  for (uint32_t ptr_type : workgroup_vars) {
    auto p = pointer_pointee.find(ptr_type);
    if (p == pointer_pointee.end()) continue;
    auto t = type_size.find(p->second);
    if (t != type_size.end()) info.workgroup_bytes += t->second;
  }
  return info;
}

}  // namespace tl::rt::vk
