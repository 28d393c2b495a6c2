// compiler.spirv.Kernels.*: every GPU test kernel (tests/compiler/gpu_lowering/
// kernels.h) lowered, emitted as SPIR-V, accepted by spirv-val before and after
// spirv-opt, in both lane-reduction strategies; and the bundle variants that
// tl-pack packs for them follow VULKAN_CONTRACT.md.
#include <gtest/gtest.h>

#include <algorithm>

#include "../gpu_lowering/kernels.h"
#include "tilelang/codegen/spirv/spirv_bundle.h"
#include "tilelang/codegen/spirv/spirv_codegen.h"
#include "tilelang/codegen/spirv/spirv_tools.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::codegen::spirv {
namespace {

ir::Function Parse(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "test.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m->functions.at(0);
}

class Kernels : public ::testing::TestWithParam<TestKernel> {};

TEST_P(Kernels, EmitsValidSpirvBothStrategies) {
  const ir::Function f = Parse(GetParam().text);
  gpu::GpuLowerOptions lo;
  lo.symbol_params = true;
  StatusOr<gpu::SimtKernel> k = gpu::LowerToSimt(f, lo);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  for (bool shuffle : {false, true}) {
    SpirvOptions o;
    for (const ir::Symbol& s : f.symbols) o.symbols.push_back(s.name);
    o.subgroup_shuffle = shuffle;
    StatusOr<SpirvModule> m = EmitSpirv(*k, o);
    // 16-bit float atomics: SPIR-V has no f16/bf16 atomic add and a 16-bit element cannot be
    // compare-exchanged through the 32-bit word that holds it without aliasing the buffer; the
    // emitter refuses them naming the dtype and buffer (CUDA supports them, HIP with a CAS loop).
    const std::string name = GetParam().name;
    if (name == "splitk_f16c" || name == "atomic_add_f16" || name == "atomic_add_bf16") {
      ASSERT_FALSE(m.ok()) << name;
      const std::string msg = m.status().ToString();
      EXPECT_NE(msg.find(name == "atomic_add_bf16" ? "atomic_add on bf16" : "atomic_add on f16"), std::string::npos)
          << msg;
      EXPECT_NE(msg.find("is not supported by the SPIR-V backend"), std::string::npos) << msg;
      continue;
    }
    ASSERT_TRUE(m.ok()) << GetParam().name << " shuffle=" << shuffle << ": " << m.status().ToString();
    EXPECT_EQ(m->words.at(0), 0x07230203u);
    EXPECT_EQ(m->words.at(1), kSpirv13);
    EXPECT_EQ(m->entry_point, f.name);
    EXPECT_LE(m->push_bytes, 128u);
    // Exactly the feature tokens the module's types need.
    const bool has_f16 = GetParam().text.find(" f16") != std::string::npos;
    const bool has_fp16_feature =
        std::find(m->features.begin(), m->features.end(), "vk.feature.shaderFloat16") != m->features.end();
    EXPECT_EQ(has_f16, has_fp16_feature) << GetParam().name;
    const bool shuffle_token =
        std::find(m->features.begin(), m->features.end(), "vk.subgroup.shuffle") != m->features.end();
    EXPECT_EQ(shuffle_token, shuffle && m->lane_reduces > 0) << GetParam().name;
  }
}

INSTANTIATE_TEST_SUITE_P(All, Kernels, ::testing::ValuesIn(TestKernels()),
                         [](const ::testing::TestParamInfo<TestKernel>& p) { return p.param.name; });

}  // namespace
}  // namespace tl::codegen::spirv
