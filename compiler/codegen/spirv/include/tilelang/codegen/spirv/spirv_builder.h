// SpirvBuilder: a small SPIR-V module builder over the Khronos headers
// (spirv/unified1/spirv.hpp11). It knows the module's section order, encodes
// instructions (word count << 16 | opcode, strings NUL-terminated and padded
// to words), deduplicates types and constants, and records the capabilities
// and extensions a module declares. It does not validate: callers run
// spirv-val (spirv_tools.h) on the result.
//
// One module with one function (the compute entry point) is all the code
// generator needs: Begin/EndFunction bracket the body; Function-storage
// variables are hoisted to the entry block automatically.
//
// Ownership: plain value type. Thread-safety: none (one builder per module).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <spirv/unified1/spirv.hpp11>

namespace tl::codegen::spirv {

// Enums of SPV_KHR_cooperative_matrix, defined here from the extension's
// specification (Debian's spirv-headers 1.3.239 predate it).
namespace khr {
inline constexpr uint32_t kOpTypeCooperativeMatrix = 4456;
inline constexpr uint32_t kOpCooperativeMatrixLoad = 4457;
inline constexpr uint32_t kOpCooperativeMatrixStore = 4458;
inline constexpr uint32_t kOpCooperativeMatrixMulAdd = 4459;
inline constexpr uint32_t kOpCooperativeMatrixLength = 4460;
inline constexpr uint32_t kCapabilityCooperativeMatrix = 6022;
inline constexpr uint32_t kUseMatrixA = 0, kUseMatrixB = 1, kUseAccumulator = 2;
inline constexpr uint32_t kLayoutRowMajor = 0, kLayoutColumnMajor = 1;
// Cooperative Matrix Operands (MulAdd): signedness bits for integer matrices.
inline constexpr uint32_t kOperandsNone = 0;
// The Vulkan memory model, which SPV_KHR_cooperative_matrix requires in Shader
// modules (SPV_KHR_vulkan_memory_model below SPIR-V 1.5): capability
// VulkanMemoryModel, memory model Vulkan, and the availability/visibility
// memory-semantics bits barriers then carry.
inline constexpr uint32_t kCapabilityVulkanMemoryModel = 5345;
inline constexpr uint32_t kMemoryModelVulkan = 3;
inline constexpr uint32_t kSemanticsMakeAvailable = 0x2000, kSemanticsMakeVisible = 0x4000;
}  // namespace khr

class SpirvBuilder {
 public:
  SpirvBuilder();

  uint32_t NewId() { return next_id_++; }

  // --- module-level declarations (deduplicated) ---------------------------
  void Capability(spv::Capability c) { capabilities_.insert(static_cast<uint32_t>(c)); }
  void CapabilityRaw(uint32_t c) { capabilities_.insert(c); }
  void Extension(const std::string& name) { extensions_.insert(name); }
  // OpMemoryModel Logical Vulkan (with its capability and, below SPIR-V 1.5,
  // its extension) instead of GLSL450.
  void UseVulkanMemoryModel() {
    vulkan_memory_model_ = true;
    CapabilityRaw(khr::kCapabilityVulkanMemoryModel);
  }
  uint32_t ImportGlsl();  // "GLSL.std.450"
  void EntryPoint(uint32_t function, const std::string& name, const std::vector<uint32_t>& interface);
  void LocalSize(uint32_t function, uint32_t x, uint32_t y, uint32_t z);
  void Name(uint32_t id, const std::string& name);
  void Decorate(uint32_t id, spv::Decoration d, const std::vector<uint32_t>& literals = {});
  void MemberDecorate(uint32_t type, uint32_t member, spv::Decoration d, const std::vector<uint32_t>& literals = {});

  // --- types (deduplicated except structs and runtime arrays) -------------
  uint32_t TypeVoid();
  uint32_t TypeBool();
  uint32_t TypeInt(uint32_t width, bool is_signed);
  uint32_t TypeFloat(uint32_t width);
  uint32_t TypeVector(uint32_t component, uint32_t count);
  uint32_t TypeArray(uint32_t element, uint32_t length);  // length as a literal; makes the u32 constant
  uint32_t TypeRuntimeArray(uint32_t element);             // never deduplicated (carries ArrayStride)
  uint32_t TypeStruct(const std::vector<uint32_t>& members);  // never deduplicated (carries Block)
  uint32_t TypePointer(spv::StorageClass sc, uint32_t pointee);
  uint32_t TypeFunction(uint32_t ret, const std::vector<uint32_t>& params = {});
  // Any other type instruction (e.g. OpTypeCooperativeMatrixKHR), deduplicated.
  uint32_t TypeRaw(uint32_t opcode, const std::vector<uint32_t>& operands);

  // --- constants (deduplicated) -------------------------------------------
  uint32_t ConstBool(bool v);
  uint32_t ConstInt(uint32_t type, uint64_t bits);  // bits of the value, truncated to the type's width
  uint32_t ConstFloat(uint32_t type, double v);     // f16 / f32 / f64
  uint32_t ConstU32(uint32_t v) { return ConstInt(TypeInt(32, false), v); }
  uint32_t ConstI32(int32_t v) { return ConstInt(TypeInt(32, true), static_cast<uint32_t>(v)); }
  uint32_t ConstNull(uint32_t type);

  // A global OpVariable (StorageBuffer, PushConstant, Workgroup, Input).
  uint32_t GlobalVariable(uint32_t pointer_type, spv::StorageClass sc);

  // --- the function ---------------------------------------------------------
  uint32_t BeginFunction(uint32_t return_type, uint32_t function_type);  // also opens the entry block
  void EndFunction();                                                     // OpReturn (if open) + OpFunctionEnd
  uint32_t FunctionVariable(uint32_t pointer_type);                       // hoisted to the entry block

  // Emits into the current block. Op() returns nothing; OpR() allocates and
  // returns the result id for an instruction with (result type, result).
  void Op(spv::Op op, const std::vector<uint32_t>& operands = {});
  void OpRaw(uint32_t opcode, const std::vector<uint32_t>& operands);
  uint32_t OpR(spv::Op op, uint32_t result_type, const std::vector<uint32_t>& operands);
  uint32_t OpRawR(uint32_t opcode, uint32_t result_type, const std::vector<uint32_t>& operands);
  uint32_t Ext(uint32_t result_type, uint32_t glsl_op, const std::vector<uint32_t>& operands);

  // Blocks: Label() starts a block; terminators close it. `open()` says
  // whether the current block still takes instructions.
  void Label(uint32_t label);
  void Branch(uint32_t target);
  void BranchConditional(uint32_t cond, uint32_t t, uint32_t f);
  bool open() const { return open_; }
  uint32_t entry_label() const { return entry_label_; }

  // The finished module: header (version word, generator 0, bound, schema 0)
  // followed by the sections in the order the specification requires.
  std::vector<uint32_t> Finish(uint32_t version_word) const;

  const std::set<uint32_t>& capabilities() const { return capabilities_; }
  const std::set<std::string>& extensions() const { return extensions_; }

  // Encodes a string operand (UTF-8, NUL-terminated, padded to words).
  static void AppendString(std::vector<uint32_t>& out, const std::string& s);

 private:
  static void Inst(std::vector<uint32_t>& out, uint32_t opcode, const std::vector<uint32_t>& operands);
  uint32_t Type(uint32_t opcode, const std::vector<uint32_t>& operands, bool dedup = true);

  uint32_t next_id_ = 1;
  std::set<uint32_t> capabilities_;
  std::set<std::string> extensions_;
  uint32_t glsl_ = 0;
  bool vulkan_memory_model_ = false;
  std::vector<uint32_t> entry_points_, execution_modes_, debug_, annotations_, globals_;
  std::vector<uint32_t> function_head_, function_vars_, function_body_;
  std::map<std::vector<uint32_t>, uint32_t> types_;      // opcode + operands -> id
  std::map<std::vector<uint32_t>, uint32_t> constants_;  // opcode + type + words -> id
  struct Scalar { uint32_t width; bool is_signed; bool is_float; };
  std::map<uint32_t, Scalar> scalars_;  // scalar type id -> its shape (constant encoding)
  bool open_ = false;
  uint32_t entry_label_ = 0;
};

}  // namespace tl::codegen::spirv
