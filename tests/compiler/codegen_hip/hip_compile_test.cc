// compiler.hip.*: every GPU test kernel (tests/compiler/gpu_lowering/kernels.h)
// lowered, printed as header-free HIP and compiled by clang-19 for gfx90a,
// gfx942 and gfx1100; then checked statically, since no AMD GPU exists here:
//   * our code-object reader (formats/hsaco.h) against llvm-readelf's own
//     decoding of the same notes (kernarg size, LDS, scratch, VGPR/SGPR
//     counts, wavefront size) and e_flags (processor, xnack/sramecc any);
//   * LDS within 64 KiB and equal to what the lowering allocated, no scratch
//     (private_segment_fixed_size 0) and no spills, wavefront 64 on CDNA and
//     32 on RDNA, the kernarg layout equal to the printed signature;
//   * llvm-objdump: s_barrier present exactly when the SIMT IR has barriers,
//     ds_bpermute when it has lane reductions, v_mfma (gfx90a, gfx942) and
//     v_wmma (gfx1100) exactly when T.gemm went to matrix cores -- which every
//     f16/bf16/i8 GEMM kernel here must (HipGemmStrategy, amd_matrix.h).
// Skips (with the reason) where clang-19 is not installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <regex>

#include "../gpu_lowering/kernels.h"
#include "tilelang/codegen/hip/hip_bundle.h"
#include "tilelang/formats/hsaco.h"
#include "tilelang/formats/reader.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/passes/passes.h"
#include "tilelang/toolchain/host_compiler.h"
#include "../gpu_lowering/simt_interp.h"
#include <functional>
#include <map>
#include <random>

namespace {

namespace hip = tl::codegen::hip;
namespace fs = std::filesystem;

tl::ir::Function Parse(const std::string& text) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  if (!m.ok()) ADD_FAILURE() << m.status().ToString();
  return m->functions.at(0);
}

std::string FindLlvmTool(const char* name) {
  for (const std::string& p : {std::string("/usr/lib/llvm-19/bin/") + name, std::string("/usr/bin/") + name + "-19"}) {
    std::error_code ec;
    if (fs::exists(p, ec)) return p;
  }
  return "";
}

// Counts statements of a kind in a SIMT block, recursively.
template <typename T>
int Count(const tl::gpu::SBlock& b) {
  int n = 0;
  for (const tl::gpu::SStmt& s : b) {
    if (std::holds_alternative<T>(s.node)) ++n;
    if (const auto* f = std::get_if<tl::gpu::SFor>(&s.node)) n += Count<T>(f->body);
    if (const auto* i = std::get_if<tl::gpu::SIf>(&s.node)) n += Count<T>(i->then_body) + Count<T>(i->else_body);
  }
  return n;
}

// The integer after "  <key>:" in llvm-readelf's YAML dump of the notes.
int64_t YamlInt(const std::string& yaml, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(yaml, m, std::regex("\\n\\s*" + key + ":\\s+(\\d+)"))) return -1;
  return std::stoll(m[1]);
}

class HipCompile : public ::testing::TestWithParam<TestKernel> {};

TEST_P(HipCompile, ThreeTargetsStaticChecks) {
  tl::StatusOr<hip::HipToolchain> tc = hip::HipToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << tc.status().ToString();
  const tl::ir::Function f = Parse(GetParam().text);
  // One lowering per wavefront size and GEMM strategy, as MakeHipVariants:
  // CDNA (gfx90a, gfx942) wave64 + MFMA, RDNA3 (gfx1100) wave32 + WMMA.
  tl::gpu::GpuLowerOptions lo;
  lo.shared_budget_bytes = 64 * 1024;
  lo.warp_size = 64;
  lo.symbol_params = true;  // as MakeHipVariants: the HIP runtime fills shape-symbol slots
  lo.gemm = hip::HipGemmStrategy("gfx90a");
  ASSERT_EQ(lo.gemm, hip::HipGemmStrategy("gfx942"));
  ASSERT_EQ(lo.gemm, tl::gpu::GemmStrategy::kMfma);
  tl::StatusOr<tl::gpu::SimtKernel> k64 = tl::gpu::LowerToSimt(f, lo);
  if (!k64.ok() && k64.status().code() == tl::StatusCode::kUnimplemented) {
    // The same rejection the CUDA path gives (e.g. dynamic shapes).
    GTEST_SKIP() << "the GPU lowering rejects this kernel: " << k64.status().ToString();
  }
  ASSERT_TRUE(k64.ok()) << k64.status().ToString();
  lo.warp_size = 32;
  lo.gemm = hip::HipGemmStrategy("gfx1100");
  ASSERT_EQ(lo.gemm, tl::gpu::GemmStrategy::kWmma);
  tl::StatusOr<tl::gpu::SimtKernel> k32 = tl::gpu::LowerToSimt(f, lo);
  ASSERT_TRUE(k32.ok()) << k32.status().ToString();
  auto lowered = [&](const std::string& target) -> const tl::gpu::SimtKernel& {
    return hip::DefaultWavefront(target) == 64 ? *k64 : *k32;
  };
  const std::string readelf = FindLlvmTool("llvm-readelf"), objdump = FindLlvmTool("llvm-objdump");
  const fs::path dir = fs::temp_directory_path() / ("tl_hip_test_" + f.name + "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const char* targets[] = {"gfx90a", "gfx942", "gfx1100"};
  std::vector<std::future<tl::StatusOr<hip::CompiledHsaco>>> jobs;
  std::vector<hip::HipSource> sources;
  for (const char* t : targets) {
    tl::StatusOr<hip::HipSource> src = hip::PrintHip(lowered(t), hip::DefaultWavefront(t));
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    sources.push_back(*src);
  }
  for (size_t i = 0; i < 3; ++i) {
    jobs.push_back(std::async(std::launch::async, [&, i] { return tc->Compile(sources[i].source, f.name, targets[i]); }));
  }
  for (size_t i = 0; i < 3; ++i) {
    const std::string target = targets[i];
    const int wave = target == "gfx1100" ? 32 : 64;
    const tl::gpu::SimtKernel* k = &lowered(target);
    tl::StatusOr<hip::CompiledHsaco> c = jobs[i].get();
    ASSERT_TRUE(c.ok()) << target << ": " << c.status().ToString() << "\n" << sources[i].source;
    const tl::formats::HsacoInfo& info = c->info;
    EXPECT_EQ(info.code_object_version, 5);
    EXPECT_EQ(info.processor, target);
    EXPECT_EQ(info.TargetId(), target);  // xnack/sramecc "any": not pinned
    const tl::formats::HsacoKernel* hk = info.Find(f.name);
    ASSERT_NE(hk, nullptr);
    EXPECT_EQ(hk->wavefront_size, wave) << target;
    EXPECT_EQ(hk->group_segment_fixed_size, k->shared_bytes) << target;
    EXPECT_LE(hk->group_segment_fixed_size, 64 * 1024) << target;
    EXPECT_EQ(hk->private_segment_fixed_size, 0) << target << ": scratch used";
    EXPECT_EQ(hk->vgpr_spill_count, 0) << target;
    EXPECT_EQ(hk->sgpr_spill_count, 0) << target;
    EXPECT_FALSE(hk->uses_dynamic_stack) << target;
    EXPECT_GE(hk->max_flat_workgroup_size, k->threads);
    EXPECT_EQ(hk->ExplicitBytes(), sources[i].param_buffer_bytes);
    std::printf("[ %s %s ] %zu bytes, %lld VGPR, %lld AGPR, %lld SGPR, LDS %lld, kernarg %lld, wave%lld\n",
                f.name.c_str(), target.c_str(), c->bytes.size(), static_cast<long long>(hk->vgpr_count),
                static_cast<long long>(hk->agpr_count), static_cast<long long>(hk->sgpr_count),
                static_cast<long long>(hk->group_segment_fixed_size), static_cast<long long>(hk->kernarg_segment_size),
                static_cast<long long>(hk->wavefront_size));
    if (readelf.empty() || objdump.empty()) continue;
    const fs::path obj = dir / (target + ".hsaco");
    {
      std::ofstream out(obj, std::ios::binary);
      out.write(reinterpret_cast<const char*>(c->bytes.data()), static_cast<std::streamsize>(c->bytes.size()));
    }
    tl::toolchain::ProcessResult notes = tl::toolchain::RunProcess({readelf, "--notes", obj.string()});
    ASSERT_EQ(notes.exit_code, 0) << notes.err;
    EXPECT_EQ(YamlInt(notes.out, "\\.kernarg_segment_size"), hk->kernarg_segment_size) << notes.out;
    EXPECT_EQ(YamlInt(notes.out, "\\.group_segment_fixed_size"), hk->group_segment_fixed_size);
    EXPECT_EQ(YamlInt(notes.out, "\\.private_segment_fixed_size"), hk->private_segment_fixed_size);
    EXPECT_EQ(YamlInt(notes.out, "\\.vgpr_count"), hk->vgpr_count);
    EXPECT_EQ(YamlInt(notes.out, "\\.sgpr_count"), hk->sgpr_count);
    EXPECT_EQ(YamlInt(notes.out, "\\.wavefront_size"), wave);
    tl::toolchain::ProcessResult header = tl::toolchain::RunProcess({readelf, "-h", obj.string()});
    ASSERT_EQ(header.exit_code, 0) << header.err;
    EXPECT_NE(header.out.find("AMDGPU - HSA"), std::string::npos) << header.out;
    EXPECT_NE(header.out.find(", " + target), std::string::npos) << header.out;
    if (target != "gfx1100") {  // CDNA: both modes "any" (no '+' or '-' after the names)
      EXPECT_NE(header.out.find(target + ", xnack, sramecc"), std::string::npos) << header.out;
    }
    tl::toolchain::ProcessResult dis = tl::toolchain::RunProcess({objdump, "-d", "--mcpu=" + target, obj.string()});
    ASSERT_EQ(dis.exit_code, 0) << dis.err;
    EXPECT_NE(dis.out.find("s_endpgm"), std::string::npos);
    // LLVM drops barriers of a workgroup that fits in one wavefront.
    const bool barriers = Count<tl::gpu::SBarrier>(k->body) > 0 && k->threads > wave;
    EXPECT_EQ(dis.out.find("s_barrier") != std::string::npos, barriers) << target << " barriers expected: " << barriers;
    if (Count<tl::gpu::SLaneReduce>(k->body) > 0) {
      EXPECT_NE(dis.out.find("ds_bpermute_b32"), std::string::npos) << target;
    }
    // Matrix cores: every gemm of f16/bf16/i8 operands in these test kernels
    // fits them (f32 and tf32 gemms stay SIMT FMA); the instruction is the kind's.
    const bool matrix = Count<tl::gpu::SAmdMma>(k->body) > 0;
    bool wants = false;
    const tl::ir::SymbolTable syms = tl::ir::CollectSymbols(f);
    tl::ir::ForEachStmt(tl::passes::TheKernel(f).body, [&](const tl::ir::Stmt& s) {
      if (const auto* g = tl::ir::As<tl::ir::Gemm>(s)) {
        const tl::ir::DType t = syms.at(g->a.buffer).dtype;
        wants = wants || t == tl::ir::DType::kF16 || t == tl::ir::DType::kBF16 || t == tl::ir::DType::kI8;
      }
    });
    EXPECT_EQ(matrix, wants) << target;
    const std::string insn = target == "gfx1100" ? "v_wmma_" : "v_mfma_";
    EXPECT_EQ(dis.out.find(insn) != std::string::npos, matrix) << target;
    if (matrix) {
      const bool bf16 = f.name.find("bf16") != std::string::npos, i8 = f.name == "gemm_i8";
      // llvm-objdump-19 spells them: gfx90a v_mfma_f32_16x16x16f16 / _bf16_1k /
      // v_mfma_i32_16x16x16i8; gfx942 v_mfma_f32_16x16x16_f16 / _bf16 / v_mfma_i32_16x16x32_i8.
      std::string want;
      if (target == "gfx1100") want = i8 ? "v_wmma_i32_16x16x16_iu8" : bf16 ? "v_wmma_f32_16x16x16_bf16" : "v_wmma_f32_16x16x16_f16";
      if (target == "gfx90a") want = i8 ? "v_mfma_i32_16x16x16i8" : bf16 ? "v_mfma_f32_16x16x16bf16_1k" : "v_mfma_f32_16x16x16f16";
      if (target == "gfx942") want = i8 ? "v_mfma_i32_16x16x32_i8" : bf16 ? "v_mfma_f32_16x16x16_bf16" : "v_mfma_f32_16x16x16_f16";
      EXPECT_NE(dis.out.find(want), std::string::npos) << target << ": no " << want;
      size_t count = 0;
      for (size_t at = 0; (at = dis.out.find(insn, at)) != std::string::npos; ++at) ++count;
      std::printf("[ %s %s ] %zu %s instructions\n", f.name.c_str(), target.c_str(), count, insn.c_str());
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Kernels, HipCompile, ::testing::ValuesIn(TestKernels()),
                         [](const auto& tp) { return tp.param.name; });

// The bundle: three variants per kernel with the code object's facts.
TEST(HipBundle, VariantsCarryCodeObjectFacts) {
  tl::StatusOr<hip::HipToolchain> tc = hip::HipToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << tc.status().ToString();
  const tl::ir::Function f = Parse(TestKernels().at(1).text);  // softmax: LDS + lane reductions
  tl::StatusOr<std::vector<uint8_t>> bundle = hip::BuildHipBundle({f}, {});
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  tl::StatusOr<tl::formats::BundleView> view = tl::formats::BundleView::Open(*bundle);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const auto* kernel = view->manifest()->kernels()->Get(0);
  ASSERT_EQ(kernel->variants()->size(), 3u);
  const char* ids[] = {"hip.gfx90a", "hip.gfx942", "hip.gfx1100"};
  for (uint32_t i = 0; i < 3; ++i) {
    const auto* v = kernel->variants()->Get(i);
    EXPECT_EQ(v->id()->str(), ids[i]);
    EXPECT_EQ(v->backend(), tl::bundle::Backend::HIP);
    EXPECT_EQ(v->code_kind(), tl::bundle::CodeKind::HSACO);
    EXPECT_EQ(v->requires_()->arch()->str(), std::string(ids[i]).substr(4));
    EXPECT_EQ(v->requires_()->isa_version(), 5u);
    EXPECT_EQ(v->requires_()->subgroup_size(), i == 2 ? 32u : 64u);
    EXPECT_EQ(v->launch()->warp_size(), i == 2 ? 32u : 64u);
    EXPECT_EQ(v->launch()->dynamic_shared_bytes(), 0u);
    EXPECT_EQ(v->launch()->static_shared_bytes(), v->requires_()->shared_bytes());
    ASSERT_EQ(v->launch()->param_slots()->size(), 2u);
    EXPECT_EQ(v->launch()->param_slots()->Get(1)->offset(), 8u);
    EXPECT_EQ(v->launch()->param_buffer_bytes(), 16u);
    const auto* attrs = v->build_attrs();
    ASSERT_NE(attrs->LookupByKey("hsaco.vgpr_count"), nullptr);
    EXPECT_EQ(attrs->LookupByKey("hsaco.code_object_version")->value()->str(), "5");
    EXPECT_EQ(attrs->LookupByKey("hsaco.wavefront_size")->value()->str(), i == 2 ? "32" : "64");
    EXPECT_EQ(attrs->LookupByKey("hsaco.private_segment_fixed_size")->value()->str(), "0");
    EXPECT_EQ(std::stoll(attrs->LookupByKey("hsaco.kernarg_segment_size")->value()->str()) >= 16, true);
  }
  // Deterministic: the same input gives the same bytes.
  tl::StatusOr<std::vector<uint8_t>> again = hip::BuildHipBundle({f}, {});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*bundle, *again);
}

TEST(HipBundle, PinnedTargetIdsAndCov4) {
  tl::StatusOr<hip::HipToolchain> tc = hip::HipToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << tc.status().ToString();
  tl::StatusOr<hip::SplitHipTargetsResult> split = hip::SplitHipTargets("gfx942:sramecc+:xnack-,gfx90a:xnack+,hip-cov4,x86-64-v3");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_TRUE(split->any);
  EXPECT_EQ(split->rest, "x86-64-v3");
  ASSERT_EQ(split->hip.targets.size(), 2u);
  const tl::ir::Function f = Parse(TestKernels().at(0).text);
  tl::StatusOr<std::vector<uint8_t>> bundle = hip::BuildHipBundle({f}, split->hip);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  tl::StatusOr<tl::formats::BundleView> view = tl::formats::BundleView::Open(*bundle);
  ASSERT_TRUE(view.ok());
  const auto* vs = view->manifest()->kernels()->Get(0)->variants();
  ASSERT_EQ(vs->size(), 2u);
  EXPECT_EQ(vs->Get(0)->id()->str(), "hip.gfx942.sramecc+.xnack-");
  EXPECT_EQ(vs->Get(0)->requires_()->arch()->str(), "gfx942:sramecc+:xnack-");
  EXPECT_EQ(vs->Get(1)->requires_()->arch()->str(), "gfx90a:xnack+");
  EXPECT_EQ(vs->Get(0)->requires_()->isa_version(), 4u);
}

TEST(HipTargets, BadTargetIdsAreErrors) {
  for (const char* bad : {"gfx", "gfx90a:xnack", "gfx90a:xnack+:xnack-", "gfx942:foo+", "gfx9$0"}) {
    tl::StatusOr<hip::SplitHipTargetsResult> s = hip::SplitHipTargets(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), tl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().message();
  }
  tl::StatusOr<hip::SplitHipTargetsResult> d = hip::SplitHipTargets("hip");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->hip.targets, (std::vector<std::string>{"gfx90a", "gfx942", "gfx1100"}));
}

TEST(HipPrinter, F64TranscendentalsAreRejectedByName) {
  const tl::ir::Function f = Parse(R"(tileir 1

func @exp64(X: tensor[256] f64, Y: tensor[256] f64) {
  kernel grid(1) threads(128) -> (bx) {
    alloc x: fragment[256] f64
    copy X[0:256] -> x
    parallel (i) in (256) {
      x[i] = exp(x[i])
    }
    copy x -> Y[0:256]
  }
}
)");
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, {});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  tl::StatusOr<hip::HipSource> src = hip::PrintHip(*k, 64);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), tl::StatusCode::kUnimplemented);
  EXPECT_NE(src.status().message().find("f64 exp"), std::string::npos) << src.status().message();
  EXPECT_NE(src.status().message().find("exp64"), std::string::npos) << src.status().message();
  EXPECT_FALSE(hip::PrintHip(*k, 48).ok());  // no such wavefront
}

TEST(HipPrinter, LaneReduceWiderThanTheWavefrontIsRejected) {
  tl::gpu::SimtKernel k;
  k.name = "wide";
  k.threads = 128;
  k.block = {128, 1, 1};
  k.body.push_back({tl::gpu::SVar{"acc", tl::ir::DType::kF32, tl::ir::MakeFloat(0.0, tl::ir::DType::kF32)}});
  k.body.push_back({tl::gpu::SLaneReduce{"acc", tl::ir::ReduceOp::kSum, 64, tl::ir::DType::kF32}});
  EXPECT_TRUE(hip::PrintHip(k, 64).ok());
  tl::StatusOr<hip::HipSource> s = hip::PrintHip(k, 32);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("64 lanes; the wavefront has 32"), std::string::npos) << s.status().message();
}

}  // namespace

namespace {

// Wavefront 64 in the lowering, checked through the SIMT IR interpreter
// (lanes in lockstep, shuffles by XOR partner): a 1000-column row over 256
// threads is one lane group of 256, so the sum and max are lane reductions
// over a whole wavefront (64, or 32 on RDNA) plus a combine across the
// block's 4 (or 8) wavefronts through LDS. Both results against float64.
TEST(HipLowering, Wave64AndWave32ReductionsMatchFloat64) {
  const tl::ir::Function f = Parse(R"(tileir 1

func @wide(X: tensor[3, 1000] f32, S: tensor[3] f32, M: tensor[3] f32) {
  kernel grid(3) threads(256) -> (bx) {
    alloc x: fragment[1, 1000] f32
    alloc s: fragment[1] f32
    alloc m: fragment[1] f32
    copy X[bx:1, 0:1000] -> x
    reduce sum x -> s dim=1 clear
    reduce max x -> m dim=1 clear
    copy s -> S[bx:1]
    copy m -> M[bx:1]
  }
}
)");
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> x(3000);
  for (double& v : x) v = static_cast<float>(dist(rng));
  for (int64_t warp : {64, 32}) {
    tl::gpu::GpuLowerOptions lo;
    lo.warp_size = warp;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, lo);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_EQ(k->warp_size, warp);
    // Every lane reduction is exactly one warp wide; the LDS scratch holds one
    // partial per warp of the block (two reductions, f32).
    int widths = 0;
    std::function<void(const tl::gpu::SBlock&)> walk = [&](const tl::gpu::SBlock& b) {
      for (const tl::gpu::SStmt& s : b) {
        if (const auto* r = std::get_if<tl::gpu::SLaneReduce>(&s.node)) {
          EXPECT_EQ(r->width, warp);
          ++widths;
        }
        if (const auto* fo = std::get_if<tl::gpu::SFor>(&s.node)) walk(fo->body);
        if (const auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
          walk(i->then_body);
          walk(i->else_body);
        }
      }
    };
    walk(k->body);
    EXPECT_EQ(widths, 2);
    EXPECT_GE(k->shared_bytes, 2 * (256 / warp) * 4);
    std::map<std::string, std::vector<double>> t;
    t["X"] = x;
    t["S"].assign(3, 0);
    t["M"].assign(3, 0);
    tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int r = 0; r < 3; ++r) {
      double sum = 0, mx = -1e30;
      for (int j = 0; j < 1000; ++j) {
        sum += x[r * 1000 + j];
        mx = std::max(mx, x[r * 1000 + j]);
      }
      EXPECT_NEAR(t["S"][r], sum, 1e-4) << "warp " << warp << " row " << r;
      EXPECT_EQ(t["M"][r], mx) << "warp " << warp << " row " << r;
    }
    // The printer refuses code lowered for wider warps than the wavefront.
    EXPECT_EQ(hip::PrintHip(*k, 32).ok(), warp == 32);
  }
  tl::gpu::GpuLowerOptions bad;
  bad.warp_size = 48;
  EXPECT_EQ(tl::gpu::LowerToSimt(f, bad).status().code(), tl::StatusCode::kInvalidArgument);
}

}  // namespace
