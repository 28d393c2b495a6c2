// compiler.spirv.Builder.* / Emitter.* / Bundle.*: the module builder's
// encoding (checked through the disassembler and by words), clear errors for
// what the SPIR-V backend does not support, and the Vulkan variants' contract
// fields (VULKAN_CONTRACT.md) in a real bundle.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "../gpu_lowering/kernels.h"
#include "tilelang/codegen/spirv/spirv_builder.h"
#include "tilelang/codegen/spirv/spirv_bundle.h"
#include "tilelang/codegen/spirv/spirv_codegen.h"
#include "tilelang/codegen/spirv/spirv_tools.h"
#include "tilelang/formats/reader.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::codegen::spirv {
namespace {

ir::Function Parse(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "test.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m->functions.at(0);
}

std::string Kernel(const std::string& name) {
  for (const TestKernel& k : TestKernels()) {
    if (k.name == name) return k.text;
  }
  ADD_FAILURE() << "no test kernel " << name;
  return "";
}

// A minimal valid compute module: one entry point, one storage buffer write.
std::vector<uint32_t> Minimal(SpirvBuilder& b) {
  b.Capability(spv::Capability::Shader);
  const uint32_t u32 = b.TypeInt(32, false);
  const uint32_t rta = b.TypeRuntimeArray(u32);
  b.Decorate(rta, spv::Decoration::ArrayStride, {4});
  const uint32_t st = b.TypeStruct({rta});
  b.Decorate(st, spv::Decoration::Block);
  b.MemberDecorate(st, 0, spv::Decoration::Offset, {0});
  const uint32_t var = b.GlobalVariable(b.TypePointer(spv::StorageClass::StorageBuffer, st), spv::StorageClass::StorageBuffer);
  b.Decorate(var, spv::Decoration::DescriptorSet, {0});
  b.Decorate(var, spv::Decoration::Binding, {0});
  const uint32_t fn = b.BeginFunction(b.TypeVoid(), b.TypeFunction(b.TypeVoid()));
  const uint32_t ptr = b.OpR(spv::Op::OpAccessChain, b.TypePointer(spv::StorageClass::StorageBuffer, u32),
                             {var, b.ConstU32(0), b.ConstU32(3)});
  b.Op(spv::Op::OpStore, {ptr, b.ConstU32(42)});
  b.EndFunction();
  b.EntryPoint(fn, "k", {});
  b.LocalSize(fn, 64, 1, 1);
  b.Name(fn, "k");
  return b.Finish(kSpirv13);
}

TEST(Builder, HeaderSectionsAndValidation) {
  SpirvBuilder b;
  const std::vector<uint32_t> w = Minimal(b);
  ASSERT_GE(w.size(), 5u);
  EXPECT_EQ(w[0], 0x07230203u);
  EXPECT_EQ(w[1], 0x00010300u);
  EXPECT_EQ(w[2], 0u);  // generator
  EXPECT_GT(w[3], 10u);  // id bound
  EXPECT_EQ(w[4], 0u);
  EXPECT_EQ(w[5], (2u << 16) | 17u);  // OpCapability Shader first
  EXPECT_TRUE(ValidateSpirv(w, kSpirv13, "k").ok());
  const std::string text = DisassembleSpirv(w);
  // Sections in the order the specification requires.
  const size_t cap = text.find("OpCapability Shader"), mm = text.find("OpMemoryModel Logical GLSL450"),
               ep = text.find("OpEntryPoint GLCompute %k \"k\""), em = text.find("OpExecutionMode %k LocalSize 64 1 1"),
               dec = text.find("OpDecorate"), fn = text.find("OpFunction");
  ASSERT_NE(cap, std::string::npos) << text;
  ASSERT_NE(ep, std::string::npos) << text;
  ASSERT_NE(em, std::string::npos) << text;
  EXPECT_LT(cap, mm);
  EXPECT_LT(mm, ep);
  EXPECT_LT(ep, em);
  EXPECT_LT(em, dec);
  EXPECT_LT(dec, fn);
  EXPECT_NE(text.find("OpStore"), std::string::npos);
}

TEST(Builder, TypesAndConstantsAreDeduplicatedAndEncoded) {
  SpirvBuilder b;
  EXPECT_EQ(b.TypeInt(32, false), b.TypeInt(32, false));
  EXPECT_NE(b.TypeInt(32, false), b.TypeInt(32, true));
  EXPECT_EQ(b.ConstU32(5), b.ConstU32(5));
  EXPECT_NE(b.ConstU32(5), b.ConstI32(5));
  // Structs and runtime arrays carry decorations: never shared.
  EXPECT_NE(b.TypeRuntimeArray(b.TypeInt(32, false)), b.TypeRuntimeArray(b.TypeInt(32, false)));
  b.Capability(spv::Capability::Shader);
  b.Capability(spv::Capability::Int16);
  b.Capability(spv::Capability::Float16);
  const uint32_t i16 = b.TypeInt(16, true), f16 = b.TypeFloat(16), i64 = b.TypeInt(64, true);
  const uint32_t m1 = b.ConstInt(i16, static_cast<uint64_t>(-1)), half_one = b.ConstFloat(f16, 1.0),
                 half_max = b.ConstFloat(f16, 65504.0), big = b.ConstInt(i64, 0x123456789ull);
  const std::vector<uint32_t> w = b.Finish(kSpirv13);
  // Find each OpConstant by result id: [opcode|len, type, id, words...].
  auto words_of = [&](uint32_t id) {
    for (size_t i = 5; i < w.size(); i += w[i] >> 16) {
      if ((w[i] & 0xFFFF) == 43 && w[i + 2] == id) return std::vector<uint32_t>(w.begin() + i + 3, w.begin() + i + (w[i] >> 16));
    }
    return std::vector<uint32_t>{};
  };
  EXPECT_EQ(words_of(m1), std::vector<uint32_t>{0xFFFFFFFFu});  // narrow signed: sign-extended
  EXPECT_EQ(words_of(half_one), std::vector<uint32_t>{0x3C00u});
  EXPECT_EQ(words_of(half_max), std::vector<uint32_t>{0x7BFFu});
  EXPECT_EQ(words_of(big), (std::vector<uint32_t>{0x23456789u, 0x1u}));  // low word first
}

TEST(Builder, StringsAreNulTerminatedAndPadded) {
  std::vector<uint32_t> w;
  SpirvBuilder::AppendString(w, "main");
  EXPECT_EQ(w, (std::vector<uint32_t>{0x6E69616Du, 0u}));  // "main" + a whole NUL word
  w.clear();
  SpirvBuilder::AppendString(w, "abc");
  EXPECT_EQ(w, (std::vector<uint32_t>{0x00636261u}));
}

TEST(Builder, ValidatorFailureNamesTheKernel) {
  std::vector<uint32_t> bad{0x07230203u, 0x00010300u, 0, 10, 0, (2u << 16) | 17u, 1u /* Shader */, 0xFFFFu};
  Status s = ValidateSpirv(bad, kSpirv13, "my_kernel");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("spirv-val rejected kernel my_kernel"), std::string::npos) << s.message();
}

// Debian 12's SPIRV-Tools (2023.1) predates SPV_KHR_cooperative_matrix: it
// cannot validate a module declaring OpTypeCooperativeMatrixKHR. Recorded so
// a newer library (which should accept it) is noticed.
TEST(Builder, CooperativeMatrixKhrNeedsNewerSpirvTools) {
  const std::string version = SpirvToolsVersion();
  if (version.find("v2023.1") != std::string::npos) {
    EXPECT_FALSE(SpirvToolsKnowsKhrCooperativeMatrix()) << version;
  } else {
    GTEST_SKIP() << "SPIRV-Tools " << version << " (not Debian 12's): KHR cooperative matrix support "
                 << (SpirvToolsKnowsKhrCooperativeMatrix() ? "present" : "absent");
  }
}

StatusOr<SpirvModule> Emit(const std::string& text, bool shuffle = false, bool optimize = true) {
  const ir::Function f = Parse(text);
  gpu::GpuLowerOptions lo;
  lo.symbol_params = true;
  StatusOr<gpu::SimtKernel> k = gpu::LowerToSimt(f, lo);
  if (!k.ok()) return k.status();
  SpirvOptions o;
  o.subgroup_shuffle = shuffle;
  o.optimize = optimize;
  for (const ir::Symbol& s : f.symbols) o.symbols.push_back(s.name);
  return EmitSpirv(*k, o);
}

TEST(Emitter, SoftmaxReductionStrategies) {
  StatusOr<SpirvModule> plain = Emit(Kernel("softmax"), false, false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const std::string p = DisassembleSpirv(plain->words);
  EXPECT_NE(p.find("OpControlBarrier"), std::string::npos);
  EXPECT_EQ(p.find("GroupNonUniform"), std::string::npos) << "plain variant must need no subgroup operations";
  EXPECT_EQ(std::count(plain->features.begin(), plain->features.end(), "vk.subgroup.shuffle"), 0);
  EXPECT_EQ(plain->lane_reduces, 2);
  StatusOr<SpirvModule> sg = Emit(Kernel("softmax"), true, false);
  ASSERT_TRUE(sg.ok()) << sg.status().ToString();
  const std::string s = DisassembleSpirv(sg->words);
  EXPECT_NE(s.find("OpCapability GroupNonUniformShuffle"), std::string::npos);
  EXPECT_NE(s.find("OpGroupNonUniformShuffleXor"), std::string::npos);
  EXPECT_NE(s.find("BuiltIn SubgroupSize"), std::string::npos);
  EXPECT_EQ(std::count(sg->features.begin(), sg->features.end(), "vk.subgroup.shuffle"), 1);
  // The scratch for the fallback is counted: 128 threads x 4 bytes at least.
  EXPECT_GE(plain->shared_bytes, 128 * 4);
}

TEST(Emitter, InterfaceOfATensorKernel) {
  StatusOr<SpirvModule> m = Emit(Kernel("gemm_f16_nn"), false, false);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->buffer_params, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(m->push_bytes, 0u);
  EXPECT_TRUE(m->push.empty());
  const std::string t = DisassembleSpirv(m->words);
  EXPECT_NE(t.find("OpDecorate %A Binding 0"), std::string::npos) << t.substr(0, 3000);
  EXPECT_NE(t.find("OpDecorate %C Binding 2"), std::string::npos);
  EXPECT_NE(t.find("OpTypeFloat 16"), std::string::npos);  // f16 tensors and shared tiles
  for (const char* f : {"vk.feature.shaderFloat16", "vk.feature.storageBuffer16BitAccess"}) {
    EXPECT_EQ(std::count(m->features.begin(), m->features.end(), f), 1) << f;
  }
  EXPECT_EQ(m->block, (std::array<int64_t, 3>{128, 1, 1}));
}

TEST(Emitter, ScalarsAndSymbolsInPushConstants) {
  const std::string text = R"(tileir 1

func @axpy(X: tensor[N] f32, Y: tensor[N] f32, a: f32, flag: bool, n2: i64) dynamic(N: i32) {
  kernel grid(ceildiv(N, 128)) threads(128) -> (bx) {
    alloc x: fragment[128] f32
    copy X[bx * 128:128] -> x
    parallel (i) in (128) {
      x[i] = x[i] * a + cast<f32>(n2)
    }
    copy x -> Y[bx * 128:128]
  }
}
)";
  StatusOr<SpirvModule> m = Emit(text, false, false);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->push.size(), 4u);
  EXPECT_EQ(m->push[0].param, 2);  // a: f32 at 0
  EXPECT_EQ(m->push[0].offset, 0u);
  EXPECT_EQ(m->push[0].size, 4u);
  EXPECT_EQ(m->push[1].param, 3);  // flag: bool widened to 4 bytes
  EXPECT_EQ(m->push[1].offset, 4u);
  EXPECT_EQ(m->push[1].size, 4u);
  EXPECT_EQ(m->push[2].param, 4);  // n2: i64 aligned to 8
  EXPECT_EQ(m->push[2].offset, 8u);
  EXPECT_EQ(m->push[2].size, 8u);
  EXPECT_EQ(m->push[3].param, -1);  // the symbol block: N as int32
  EXPECT_EQ(m->push[3].offset, 16u);
  EXPECT_EQ(m->push[3].size, 4u);
  EXPECT_EQ(m->push_bytes, 20u);
  EXPECT_EQ(std::count(m->features.begin(), m->features.end(), "vk.feature.shaderInt64"), 1);
}

TEST(Emitter, UnsupportedFeaturesAreClearErrors) {
  const std::string f64_exp = R"(tileir 1

func @e64(X: tensor[64] f64, Y: tensor[64] f64) {
  kernel grid(1) threads(64) -> (bx) {
    alloc x: fragment[64] f64
    copy X[0:64] -> x
    parallel (i) in (64) {
      x[i] = exp(x[i])
    }
    copy x -> Y[0:64]
  }
}
)";
  StatusOr<SpirvModule> m = Emit(f64_exp);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("exp on f64"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("kernel e64"), std::string::npos) << m.status().message();

  const std::string atomic64 = R"(tileir 1

func @at(X: tensor[64] f64, Y: tensor[1] f64) {
  kernel grid(1) threads(64) -> (bx) {
    parallel (i) in (64) {
      atomic_add Y[0], X[i]
    }
  }
}
)";
  m = Emit(atomic64);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("atomic_add on f64"), std::string::npos) << m.status().message();

  // 40 f32 scalars: 160 bytes of push constants, over Vulkan's guaranteed 128.
  std::string params, uses;
  for (int i = 0; i < 40; ++i) {
    params += ", s" + std::to_string(i) + ": f32";
    uses += " + s" + std::to_string(i);
  }
  const std::string many = "tileir 1\n\nfunc @many(X: tensor[64] f32" + params +
                           ") {\n  kernel grid(1) threads(64) -> (bx) {\n    alloc x: fragment[64] f32\n"
                           "    copy X[0:64] -> x\n    parallel (i) in (64) {\n      x[i] = x[i]" + uses +
                           "\n    }\n    copy x -> X[0:64]\n  }\n}\n";
  m = Emit(many);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("push constants need 160 bytes"), std::string::npos) << m.status().message();
}

TEST(Bundle, VariantsFollowTheVulkanContract) {
  std::vector<ir::Function> fs{Parse(Kernel("softmax")), Parse(Kernel("gemm_dyn"))};
  SpirvBuildOptions o;
  StatusOr<std::vector<uint8_t>> bytes = BuildSpirvBundle(fs, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<formats::BundleView> view = formats::BundleView::Open(*bytes);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->VerifyAllPayloads().ok());

  const tl::bundle::Kernel* sm = view->FindKernel("softmax");
  ASSERT_NE(sm, nullptr);
  ASSERT_EQ(sm->variants()->size(), 2u);  // plain + subgroup (it has lane reductions)
  const tl::bundle::Variant* plain = sm->variants()->Get(0);
  const tl::bundle::Variant* sub = sm->variants()->Get(1);
  EXPECT_EQ(plain->id()->str(), "vulkan.spirv1.3");
  EXPECT_EQ(sub->id()->str(), "vulkan.spirv1.3.subgroup");
  EXPECT_EQ(plain->backend(), tl::bundle::Backend::VULKAN);
  EXPECT_EQ(plain->code_kind(), tl::bundle::CodeKind::SPIRV);
  EXPECT_EQ(plain->requires_()->arch()->str(), "spirv1.3");
  EXPECT_EQ(plain->requires_()->isa_version(), 0x00010300u);
  EXPECT_EQ(plain->requires_()->min_driver(), (1u << 22) | (1u << 12));  // VK_MAKE_API_VERSION(0,1,1,0)
  EXPECT_EQ(plain->requires_()->threads_per_block(), 128u);
  EXPECT_EQ(plain->requires_()->subgroup_size(), 0u);
  EXPECT_EQ(plain->entry_point()->str(), "softmax");
  EXPECT_EQ(plain->launch()->static_shared_bytes(), plain->requires_()->shared_bytes());
  ASSERT_EQ(plain->launch()->vk_bindings()->size(), 2u);
  for (uint32_t b = 0; b < 2; ++b) {
    const tl::bundle::VkBinding* vb = plain->launch()->vk_bindings()->Get(b);
    EXPECT_EQ(vb->param(), b);
    EXPECT_EQ(vb->set(), 0u);
    EXPECT_EQ(vb->binding(), b);
    EXPECT_EQ(vb->descriptor_type(), 7u);
  }
  bool has_shuffle = false;
  for (const auto* f : *sub->requires_()->features()) has_shuffle |= f->str() == "vk.subgroup.shuffle";
  EXPECT_TRUE(has_shuffle);
  EXPECT_GT(sub->priority(), plain->priority());
  // The payload is the module, as little-endian words.
  StatusOr<std::vector<uint8_t>> payload = view->ReadPayload(plain->payload());
  ASSERT_TRUE(payload.ok());
  ASSERT_EQ(payload->size() % 4, 0u);
  EXPECT_EQ((*payload)[0], 0x03);
  EXPECT_EQ((*payload)[3], 0x07);

  const tl::bundle::Kernel* dyn = view->FindKernel("gemm_dyn");
  ASSERT_NE(dyn, nullptr);
  // No lane reductions (no subgroup variant); an f16 gemm: the plain variant
  // and the cooperative-matrix one.
  ASSERT_EQ(dyn->variants()->size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    const tl::bundle::Launch* l = dyn->variants()->Get(i)->launch();
    ASSERT_EQ(l->vk_push()->size(), 1u);
    EXPECT_EQ(l->vk_push()->Get(0)->param(), -1);
    EXPECT_EQ(l->vk_push()->Get(0)->offset(), 0u);
    EXPECT_EQ(l->vk_push()->Get(0)->size(), 12u);  // M, N, K as int32
    EXPECT_EQ(l->vk_push_bytes(), 12u);
    EXPECT_EQ(dyn->variants()->Get(i)->requires_()->push_constant_bytes(), 12u);
  }
  const tl::bundle::Variant* coop = dyn->variants()->Get(1);
  EXPECT_EQ(coop->id()->str(), "vulkan.spirv1.3.coopmat");
  EXPECT_EQ(coop->priority(), 2);
  EXPECT_EQ(coop->requires_()->subgroup_size(), 32u);  // SMma's warps are subgroups
  std::set<std::string> feats;
  for (const auto* f : *coop->requires_()->features()) feats.insert(f->str());
  EXPECT_TRUE(feats.count(kCoopmatToken)) << kCoopmatToken;
  EXPECT_TRUE(feats.count("vk.feature.vulkanMemoryModel"));
  std::string validated;
  for (const auto* kv : *coop->build_attrs()) {
    if (kv->key()->str() == "spirv.validated") validated = kv->value()->str();
  }
  if (!SpirvToolsKnowsKhrCooperativeMatrix()) {
    EXPECT_NE(validated.find("not validated: SPIRV-Tools"), std::string::npos) << validated;
  } else {
    EXPECT_EQ(validated.find("not validated"), std::string::npos) << validated;
  }
}

// Cooperative-matrix code only where the scheme fits: an f16 gemm gets
// OpCooperativeMatrix* (and the Vulkan memory model), a bf16 gemm or the
// SIMT-FMA lowering does not; without the option SMma stays UNIMPLEMENTED.
TEST(Coopmat, EmittedOnlyForF16TensorCoreSteps) {
  auto lower = [](const std::string& tir, gpu::GemmStrategy g) {
    gpu::GpuLowerOptions lo;
    lo.symbol_params = true;
    lo.gemm = g;
    return gpu::LowerToSimt(Parse(tir), lo);
  };
  const std::string f16 = Kernel("gemm_dyn");
  StatusOr<gpu::SimtKernel> k = lower(f16, gpu::GemmStrategy::kMmaSync);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  SpirvOptions o;
  o.symbols = {"M", "N", "K"};
  StatusOr<SpirvModule> plain = EmitSpirv(*k, o);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kUnimplemented) << plain.status().ToString();
  o.cooperative_matrix = true;
  StatusOr<SpirvModule> m = EmitSpirv(*k, o);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_GT(m->cooperative_mma, 0);
  std::set<uint32_t> ops;
  for (size_t i = 5; i < m->words.size(); i += m->words[i] >> 16) ops.insert(m->words[i] & 0xFFFF);
  for (uint32_t op : {khr::kOpTypeCooperativeMatrix, khr::kOpCooperativeMatrixLoad, khr::kOpCooperativeMatrixStore,
                      khr::kOpCooperativeMatrixMulAdd}) {
    EXPECT_TRUE(ops.count(op)) << "opcode " << op;
  }
  // Emulated: no cooperative-matrix opcode, a module Debian's spirv-val accepts.
  o.cooperative_matrix_emulated = true;
  StatusOr<SpirvModule> emu = EmitSpirv(*k, o);
  ASSERT_TRUE(emu.ok()) << emu.status().ToString();
  for (size_t i = 5; i < emu->words.size(); i += emu->words[i] >> 16) {
    EXPECT_FALSE((emu->words[i] & 0xFFFF) >= khr::kOpTypeCooperativeMatrix &&
                 (emu->words[i] & 0xFFFF) <= khr::kOpCooperativeMatrixLength);
  }
  // SIMT FMA: no SMma, nothing cooperative.
  StatusOr<gpu::SimtKernel> fma = lower(f16, gpu::GemmStrategy::kSimtFma);
  ASSERT_TRUE(fma.ok());
  o.cooperative_matrix_emulated = false;
  StatusOr<SpirvModule> none = EmitSpirv(*fma, o);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->cooperative_mma, 0);
}

}  // namespace
}  // namespace tl::codegen::spirv
