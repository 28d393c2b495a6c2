// libSPIRV-Tools wrappers; see spirv_tools.h.
#include "tilelang/codegen/spirv/spirv_tools.h"

#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

#include "tilelang/codegen/spirv/spirv_builder.h"

namespace tl::codegen::spirv {
namespace {

spv_target_env EnvFor(uint32_t version_word) {
  if (version_word >= 0x00010600) return SPV_ENV_VULKAN_1_3;
  if (version_word >= 0x00010500) return SPV_ENV_VULKAN_1_2;
  if (version_word >= 0x00010400) return SPV_ENV_VULKAN_1_1_SPIRV_1_4;
  return SPV_ENV_VULKAN_1_1;
}

spvtools::MessageConsumer Collect(std::string* out) {
  return [out](spv_message_level_t, const char*, const spv_position_t& pos, const char* message) {
    if (!out->empty()) *out += "; ";
    *out += message;
    if (pos.index) *out += " (word " + std::to_string(pos.index) + ")";
  };
}

}  // namespace

Status ValidateSpirv(const std::vector<uint32_t>& words, uint32_t version_word, const std::string& kernel) {
  spvtools::SpirvTools tools(EnvFor(version_word));
  std::string messages;
  tools.SetMessageConsumer(Collect(&messages));
  spvtools::ValidatorOptions options;
  if (!tools.Validate(words.data(), words.size(), options)) {
    return Status(StatusCode::kInternal, "spirv-val rejected kernel " + kernel + " (a SPIR-V code generator bug): " +
                                             (messages.empty() ? std::string("no message") : messages));
  }
  return Status::Ok();
}

StatusOr<std::vector<uint32_t>> OptimizeSpirv(const std::vector<uint32_t>& words, uint32_t version_word,
                                              const std::string& kernel) {
  spvtools::Optimizer opt(EnvFor(version_word));
  std::string messages;
  opt.SetMessageConsumer(Collect(&messages));
  opt.RegisterPerformancePasses();
  std::vector<uint32_t> out;
  spvtools::OptimizerOptions options;
  options.set_run_validator(false);  // validated before and after by the caller
  if (!opt.Run(words.data(), words.size(), &out, options)) {
    return Status(StatusCode::kInternal, "spirv-opt failed on kernel " + kernel + ": " + messages);
  }
  return out;
}

std::string DisassembleSpirv(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_3);
  std::string text, messages;
  tools.SetMessageConsumer(Collect(&messages));
  if (!tools.Disassemble(words, &text, SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT)) {
    return "; disassembly failed: " + messages + "\n";
  }
  return text;
}

bool SpirvToolsKnowsKhrCooperativeMatrix() {
  static const bool known = [] {
    // The smallest module that declares a KHR cooperative matrix type.
    SpirvBuilder b;
    b.Capability(spv::Capability::Shader);
    b.CapabilityRaw(khr::kCapabilityCooperativeMatrix);
    b.Extension("SPV_KHR_cooperative_matrix");
    const uint32_t f32 = b.TypeFloat(32);
    const uint32_t u32 = b.TypeInt(32, false);
    b.TypeRaw(khr::kOpTypeCooperativeMatrix, {f32, b.ConstU32(3), b.ConstU32(16), b.ConstU32(16),
                                              b.ConstU32(khr::kUseAccumulator)});
    (void)u32;
    const uint32_t fn = b.BeginFunction(b.TypeVoid(), b.TypeFunction(b.TypeVoid()));
    b.EndFunction();
    b.EntryPoint(fn, "main", {});
    b.LocalSize(fn, 32, 1, 1);
    std::vector<uint32_t> words = b.Finish(0x00010600);
    spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_3);
    std::string messages;
    tools.SetMessageConsumer(Collect(&messages));
    return tools.Validate(words);
  }();
  return known;
}

std::string SpirvToolsVersion() { return spvSoftwareVersionDetailsString(); }

}  // namespace tl::codegen::spirv
