// SpirvBuilder; see spirv_builder.h.
#include "tilelang/codegen/spirv/spirv_builder.h"

#include <cstring>

namespace tl::codegen::spirv {

namespace {
uint32_t U(spv::Op op) { return static_cast<uint32_t>(op); }
template <typename E>
uint32_t W(E e) {
  return static_cast<uint32_t>(e);
}
}  // namespace

SpirvBuilder::SpirvBuilder() = default;

void SpirvBuilder::Inst(std::vector<uint32_t>& out, uint32_t opcode, const std::vector<uint32_t>& operands) {
  out.push_back(static_cast<uint32_t>((operands.size() + 1) << 16) | (opcode & 0xFFFF));
  out.insert(out.end(), operands.begin(), operands.end());
}

void SpirvBuilder::AppendString(std::vector<uint32_t>& out, const std::string& s) {
  const size_t words = s.size() / 4 + 1;  // always at least one NUL
  const size_t at = out.size();
  out.resize(at + words, 0);
  std::memcpy(out.data() + at, s.data(), s.size());  // little-endian words, as SPIR-V requires
}

uint32_t SpirvBuilder::ImportGlsl() {
  if (glsl_ == 0) glsl_ = NewId();
  return glsl_;
}

void SpirvBuilder::EntryPoint(uint32_t function, const std::string& name, const std::vector<uint32_t>& interface) {
  std::vector<uint32_t> ops{W(spv::ExecutionModel::GLCompute), function};
  AppendString(ops, name);
  ops.insert(ops.end(), interface.begin(), interface.end());
  Inst(entry_points_, U(spv::Op::OpEntryPoint), ops);
}

void SpirvBuilder::LocalSize(uint32_t function, uint32_t x, uint32_t y, uint32_t z) {
  Inst(execution_modes_, U(spv::Op::OpExecutionMode), {function, W(spv::ExecutionMode::LocalSize), x, y, z});
}

void SpirvBuilder::Name(uint32_t id, const std::string& name) {
  std::vector<uint32_t> ops{id};
  AppendString(ops, name);
  Inst(debug_, U(spv::Op::OpName), ops);
}

void SpirvBuilder::Decorate(uint32_t id, spv::Decoration d, const std::vector<uint32_t>& literals) {
  std::vector<uint32_t> ops{id, W(d)};
  ops.insert(ops.end(), literals.begin(), literals.end());
  Inst(annotations_, U(spv::Op::OpDecorate), ops);
}

void SpirvBuilder::MemberDecorate(uint32_t type, uint32_t member, spv::Decoration d,
                                  const std::vector<uint32_t>& literals) {
  std::vector<uint32_t> ops{type, member, W(d)};
  ops.insert(ops.end(), literals.begin(), literals.end());
  Inst(annotations_, U(spv::Op::OpMemberDecorate), ops);
}

uint32_t SpirvBuilder::Type(uint32_t opcode, const std::vector<uint32_t>& operands, bool dedup) {
  std::vector<uint32_t> key{opcode};
  key.insert(key.end(), operands.begin(), operands.end());
  if (dedup) {
    auto it = types_.find(key);
    if (it != types_.end()) return it->second;
  }
  const uint32_t id = NewId();
  std::vector<uint32_t> ops{id};
  ops.insert(ops.end(), operands.begin(), operands.end());
  Inst(globals_, opcode, ops);
  if (dedup) types_[key] = id;
  return id;
}

uint32_t SpirvBuilder::TypeVoid() { return Type(U(spv::Op::OpTypeVoid), {}); }
uint32_t SpirvBuilder::TypeBool() { return Type(U(spv::Op::OpTypeBool), {}); }
uint32_t SpirvBuilder::TypeInt(uint32_t width, bool is_signed) {
  const uint32_t id = Type(U(spv::Op::OpTypeInt), {width, is_signed ? 1u : 0u});
  scalars_[id] = {width, is_signed, false};
  return id;
}
uint32_t SpirvBuilder::TypeFloat(uint32_t width) {
  const uint32_t id = Type(U(spv::Op::OpTypeFloat), {width});
  scalars_[id] = {width, true, true};
  return id;
}
uint32_t SpirvBuilder::TypeVector(uint32_t component, uint32_t count) {
  return Type(U(spv::Op::OpTypeVector), {component, count});
}
uint32_t SpirvBuilder::TypeArray(uint32_t element, uint32_t length) {
  const uint32_t len = ConstU32(length);
  return Type(U(spv::Op::OpTypeArray), {element, len});
}
uint32_t SpirvBuilder::TypeRuntimeArray(uint32_t element) {
  return Type(U(spv::Op::OpTypeRuntimeArray), {element}, false);
}
uint32_t SpirvBuilder::TypeStruct(const std::vector<uint32_t>& members) {
  return Type(U(spv::Op::OpTypeStruct), members, false);
}
uint32_t SpirvBuilder::TypePointer(spv::StorageClass sc, uint32_t pointee) {
  return Type(U(spv::Op::OpTypePointer), {W(sc), pointee});
}
uint32_t SpirvBuilder::TypeFunction(uint32_t ret, const std::vector<uint32_t>& params) {
  std::vector<uint32_t> ops{ret};
  ops.insert(ops.end(), params.begin(), params.end());
  return Type(U(spv::Op::OpTypeFunction), ops);
}
uint32_t SpirvBuilder::TypeRaw(uint32_t opcode, const std::vector<uint32_t>& operands) {
  return Type(opcode, operands);
}

uint32_t SpirvBuilder::ConstBool(bool v) {
  const uint32_t t = TypeBool();
  const uint32_t op = U(v ? spv::Op::OpConstantTrue : spv::Op::OpConstantFalse);
  std::vector<uint32_t> key{op, t};
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const uint32_t id = NewId();
  Inst(globals_, op, {t, id});
  constants_[key] = id;
  return id;
}

uint32_t SpirvBuilder::ConstInt(uint32_t type, uint64_t bits) {
  const Scalar s = scalars_.at(type);
  std::vector<uint32_t> words;
  if (s.width == 64) {
    words = {static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
  } else {
    uint32_t w = static_cast<uint32_t>(bits);
    if (s.width < 32) {
      const uint32_t mask = (1u << s.width) - 1;
      w &= mask;
      // Narrow signed constants are sign-extended to the word (SPIR-V 2.2.1).
      if (s.is_signed && !s.is_float && (w >> (s.width - 1)) & 1u) w |= ~mask;
    }
    words = {w};
  }
  std::vector<uint32_t> key{U(spv::Op::OpConstant), type};
  key.insert(key.end(), words.begin(), words.end());
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const uint32_t id = NewId();
  std::vector<uint32_t> ops{type, id};
  ops.insert(ops.end(), words.begin(), words.end());
  Inst(globals_, U(spv::Op::OpConstant), ops);
  constants_[key] = id;
  return id;
}

namespace {
// IEEE binary16 bits of `v` (round to nearest even).
uint16_t HalfBits(double v) {
  float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t man = x & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (man ? 0x200u : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still correct
  return static_cast<uint16_t>(sign | h);
}
}  // namespace

uint32_t SpirvBuilder::ConstFloat(uint32_t type, double v) {
  const Scalar s = scalars_.at(type);
  uint64_t bits = 0;
  if (s.width == 64) {
    std::memcpy(&bits, &v, 8);
  } else if (s.width == 32) {
    float f = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    bits = b;
  } else {
    bits = HalfBits(v);
  }
  std::vector<uint32_t> words;
  if (s.width == 64) {
    words = {static_cast<uint32_t>(bits), static_cast<uint32_t>(bits >> 32)};
  } else {
    words = {static_cast<uint32_t>(bits)};
  }
  std::vector<uint32_t> key{U(spv::Op::OpConstant), type};
  key.insert(key.end(), words.begin(), words.end());
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const uint32_t id = NewId();
  std::vector<uint32_t> ops{type, id};
  ops.insert(ops.end(), words.begin(), words.end());
  Inst(globals_, U(spv::Op::OpConstant), ops);
  constants_[key] = id;
  return id;
}

uint32_t SpirvBuilder::ConstNull(uint32_t type) {
  std::vector<uint32_t> key{U(spv::Op::OpConstantNull), type};
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  const uint32_t id = NewId();
  Inst(globals_, U(spv::Op::OpConstantNull), {type, id});
  constants_[key] = id;
  return id;
}

uint32_t SpirvBuilder::GlobalVariable(uint32_t pointer_type, spv::StorageClass sc) {
  const uint32_t id = NewId();
  Inst(globals_, U(spv::Op::OpVariable), {pointer_type, id, W(sc)});
  return id;
}

uint32_t SpirvBuilder::BeginFunction(uint32_t return_type, uint32_t function_type) {
  const uint32_t id = NewId();
  Inst(function_head_, U(spv::Op::OpFunction), {return_type, id, W(spv::FunctionControlMask::MaskNone), function_type});
  entry_label_ = NewId();
  Inst(function_head_, U(spv::Op::OpLabel), {entry_label_});
  open_ = true;
  return id;
}

void SpirvBuilder::EndFunction() {
  if (open_) Inst(function_body_, U(spv::Op::OpReturn), {});
  open_ = false;
  Inst(function_body_, U(spv::Op::OpFunctionEnd), {});
}

uint32_t SpirvBuilder::FunctionVariable(uint32_t pointer_type) {
  const uint32_t id = NewId();
  Inst(function_vars_, U(spv::Op::OpVariable), {pointer_type, id, W(spv::StorageClass::Function)});
  return id;
}

void SpirvBuilder::Op(spv::Op op, const std::vector<uint32_t>& operands) { OpRaw(U(op), operands); }
void SpirvBuilder::OpRaw(uint32_t opcode, const std::vector<uint32_t>& operands) {
  Inst(function_body_, opcode, operands);
}
uint32_t SpirvBuilder::OpR(spv::Op op, uint32_t result_type, const std::vector<uint32_t>& operands) {
  return OpRawR(U(op), result_type, operands);
}
uint32_t SpirvBuilder::OpRawR(uint32_t opcode, uint32_t result_type, const std::vector<uint32_t>& operands) {
  const uint32_t id = NewId();
  std::vector<uint32_t> ops{result_type, id};
  ops.insert(ops.end(), operands.begin(), operands.end());
  Inst(function_body_, opcode, ops);
  return id;
}
uint32_t SpirvBuilder::Ext(uint32_t result_type, uint32_t glsl_op, const std::vector<uint32_t>& operands) {
  std::vector<uint32_t> ops{ImportGlsl(), glsl_op};
  ops.insert(ops.end(), operands.begin(), operands.end());
  return OpR(spv::Op::OpExtInst, result_type, ops);
}

void SpirvBuilder::Label(uint32_t label) {
  Inst(function_body_, U(spv::Op::OpLabel), {label});
  open_ = true;
}
void SpirvBuilder::Branch(uint32_t target) {
  Inst(function_body_, U(spv::Op::OpBranch), {target});
  open_ = false;
}
void SpirvBuilder::BranchConditional(uint32_t cond, uint32_t t, uint32_t f) {
  Inst(function_body_, U(spv::Op::OpBranchConditional), {cond, t, f});
  open_ = false;
}

std::vector<uint32_t> SpirvBuilder::Finish(uint32_t version_word) const {
  std::vector<uint32_t> m{spv::MagicNumber, version_word, 0, next_id_, 0};
  for (uint32_t c : capabilities_) Inst(m, U(spv::Op::OpCapability), {c});
  std::set<std::string> extensions = extensions_;
  if (vulkan_memory_model_ && version_word < 0x00010500) extensions.insert("SPV_KHR_vulkan_memory_model");
  for (const std::string& e : extensions) {
    std::vector<uint32_t> ops;
    AppendString(ops, e);
    Inst(m, U(spv::Op::OpExtension), ops);
  }
  if (glsl_ != 0) {
    std::vector<uint32_t> ops{glsl_};
    AppendString(ops, "GLSL.std.450");
    Inst(m, U(spv::Op::OpExtInstImport), ops);
  }
  Inst(m, U(spv::Op::OpMemoryModel), {W(spv::AddressingModel::Logical), vulkan_memory_model_
                                                                           ? khr::kMemoryModelVulkan
                                                                           : W(spv::MemoryModel::GLSL450)});
  for (const auto* section : {&entry_points_, &execution_modes_, &debug_, &annotations_, &globals_, &function_head_,
                              &function_vars_, &function_body_}) {
    m.insert(m.end(), section->begin(), section->end());
  }
  return m;
}

}  // namespace tl::codegen::spirv
