// spirv-val, spirv-opt and the disassembler through libSPIRV-Tools (Debian's
// static libraries, linked in; version 2023.1, which predates
// SPV_KHR_cooperative_matrix: see SpirvToolsKnowsKhrCooperativeMatrix).
//
// Thread-safety: every call builds its own spvtools objects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::codegen::spirv {

// Validates under the Vulkan environment of `version_word` (1.3 -> Vulkan 1.1,
// 1.5 -> 1.2, 1.6 -> 1.3). Failure: kInternal "spirv-val rejected kernel
// <kernel>: <messages>" (a module we emit that fails is a compiler bug).
Status ValidateSpirv(const std::vector<uint32_t>& words, uint32_t version_word, const std::string& kernel);

// spirv-opt's performance recipe (RegisterPerformancePasses).
StatusOr<std::vector<uint32_t>> OptimizeSpirv(const std::vector<uint32_t>& words, uint32_t version_word,
                                              const std::string& kernel);

// Human-readable assembly (tests, --emit-source).
std::string DisassembleSpirv(const std::vector<uint32_t>& words);

// Whether the linked SPIRV-Tools parses OpTypeCooperativeMatrixKHR (checked by
// validating a minimal module once). Debian 12's 2023.1 does not.
bool SpirvToolsKnowsKhrCooperativeMatrix();

// "SPIRV-Tools v2023.1 ..." of the linked library.
std::string SpirvToolsVersion();

}  // namespace tl::codegen::spirv
