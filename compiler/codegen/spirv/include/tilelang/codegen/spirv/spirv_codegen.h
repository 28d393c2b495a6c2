// The SPIR-V code generator: SimtKernel (lowering/gpu/simt_ir.h) -> a Vulkan
// compute module, emitted directly with SpirvBuilder, then checked by
// spirv-val and optimized by spirv-opt (libSPIRV-Tools, linked in).
//
// Interface of every module (VULKAN_CONTRACT.md):
//   * tensor k (the k-th buffer parameter): StorageBuffer variable of a Block
//     struct holding one runtime array of the element type, set 0 binding k;
//   * scalars and shape symbols: one push-constant Block (4 or 8 bytes per
//     scalar, then the symbols as int32 in Kernel.symbols order);
//   * shared buffers: one Workgroup array each; registers: Function arrays;
//   * Barrier: OpControlBarrier(Workgroup, Workgroup, AcquireRelease |
//     WorkgroupMemory | UniformMemory); LaneReduce: see SpirvOptions.
//
// Thread-safety: pure functions (spirv-tools objects are per call).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::codegen::spirv {

inline constexpr uint32_t kSpirv13 = 0x00010300;

struct SpirvOptions {
  // LaneReduce strategy. false: through a Workgroup scratch array (two
  // barriers; any subgroup size and layout). true: OpGroupNonUniformShuffleXor
  // butterflies when a check at kernel start proves that the shuffle partner
  // of every invocation is the thread the SIMT IR means (subgroup at least as
  // wide as the widest LaneReduce, invocations laid out linearly); otherwise
  // the same kernel takes the scratch path. Needs "vk.subgroup.shuffle".
  bool subgroup_shuffle = false;
  // Shape symbols in Kernel.symbols order: a SimtParam or VarRef with one of
  // these names reads the push-constant symbol block.
  std::vector<std::string> symbols;
  // Run spirv-opt (performance recipe) after validation; the result is
  // validated again.
  bool optimize = true;
  // SMma (the lowering's GemmStrategy::kMmaSync k-steps) becomes
  // VK_KHR_cooperative_matrix code: fp16 A/B, fp32 accumulators, shape
  // 16x8x16 (M x N x K), see kCoopmatToken. Each warp's accumulator tiles are
  // cooperative matrices across the outermost loop whose body touches the
  // accumulator only through SMma, and go through Workgroup memory into the
  // SIMT IR's register layout before and after it (so every epilogue works
  // unchanged). Needs the Vulkan memory model. A kernel the scheme does not
  // fit (other operand kinds, strides, atomics) fails with
  // kFailedPrecondition "cooperative matrix: ..."; without this option SMma
  // is UNIMPLEMENTED.
  bool cooperative_matrix = false;
  // Tests: the same code with every cooperative-matrix instruction replaced by
  // plain loops over per-lane arrays (and workgroup barriers for the warp's
  // exchanges), so that lavapipe runs it: checks the operand addressing, the
  // transposition and the conversions against a reference. No coopmat
  // capability, token or memory model; slow.
  bool cooperative_matrix_emulated = false;
};

// The device token (runtime/README.md) of the cooperative-matrix shape the
// SMma code uses: A 16x16 f16, B 16x8 f16, C/result 16x8 f32.
inline constexpr const char* kCoopmatToken = "vk.coopmat.f16.f16.f32.f32.16x8x16";

struct PushRange {
  int param = -1;  // function parameter index; -1 = the shape-symbol block
  uint32_t offset = 0, size = 0;
};

struct SpirvModule {
  std::string entry_point;
  std::vector<uint32_t> words;          // the final module (validated)
  uint32_t version_word = kSpirv13;
  std::vector<std::string> features;    // requires.features, sorted
  std::vector<int> buffer_params;       // binding k -> function parameter index
  std::vector<PushRange> push;
  uint32_t push_bytes = 0;
  int64_t shared_bytes = 0;             // all Workgroup variables, scratch included
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t threads = 1;
  int lane_reduces = 0;                 // LaneReduce statements emitted
  int cooperative_mma = 0;              // SMma statements emitted as cooperative-matrix code
  // "spirv-val (Vulkan 1.1 rules), after spirv-opt -O", or why the module was
  // not validated/optimized (cooperative-matrix modules with SPIRV-Tools that
  // predate SPV_KHR_cooperative_matrix).
  std::string validation;
  std::vector<std::string> notes;
};

// Emits, validates (spirv-val, Vulkan 1.1 rules) and optimizes. A SIMT
// construct the generator does not know gives kUnimplemented naming it and the
// kernel; a module spirv-val rejects is a compiler bug: kInternal with the
// validator's message and the kernel name.
StatusOr<SpirvModule> EmitSpirv(const gpu::SimtKernel& k, const SpirvOptions& options = {});

// The same without validation or optimization (tests of the builder).
StatusOr<SpirvModule> EmitSpirvUnchecked(const gpu::SimtKernel& k, const SpirvOptions& options = {});

}  // namespace tl::codegen::spirv
