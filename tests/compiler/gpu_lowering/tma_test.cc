// TMA on sm_90a (issue #11 step 2): PlanTmaCopy's rules, the pipelined Tile
// IR's mbarrier hints, the lowered and printed kernel (tensor-map params,
// cp.async.bulk.tensor, mbarrier waits), the SIMT interpreter running the
// TMA kernels through an independent model of boxes, zero fill and mbarrier
// phases (identical to the cp.async lowering on every test kernel and
// golden; a GEMM with partial tiles against float64; a missing wait fails),
// the sm_90a PTX/SASS (NVRTC + ptxas; cuobjdump where present) and the
// bundle's tensor maps. No GPU needed; Run.TmaGemm (compile_run_test.cc)
// runs the same kernel on one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "lowering_test_util.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/formats/reader.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/tma.h"
#include "tilelang/passes/passes.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::SmemSwizzle;
using tl::gpu::TmaCopyQuery;
using tl::gpu::test::Notes;
using tl::gpu::test::Parse;

const TestKernel& Named(const std::string& n) {
  static const std::vector<TestKernel> all = TestKernels();
  for (const TestKernel& k : all) {
    if (k.name == n) return k;
  }
  abort();
}
// The CUDA lowering of the sm_90a variant (cuda_bundle.cc), or of the others.
tl::gpu::GpuLowerOptions Options(bool tma, const std::string& name = "") {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 227 * 1024;
  o.symbol_params = true;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  o.tf32 = name.find("tf32") != std::string::npos;
  o.vector_copies = o.async_copies = true;
  o.tma_copies = tma;
  return o;
}

TmaCopyQuery Query2D(tl::ir::DType t, int64_t rows, int64_t cols, int64_t tensor_cols, int64_t padded_cols = 0) {
  TmaCopyQuery q;
  q.dtype = t;
  q.tensor_shape = {1000, tensor_cols};
  q.src_extents = {rows, cols};
  q.dst_extents = {rows, cols};
  q.dst_shape = {rows, padded_cols ? padded_cols : cols};
  q.dst_region_whole = true;
  q.dst_aligned = true;
  return q;
}

TEST(Tma, PlanRules) {
  using tl::ir::DType;
  tl::gpu::TmaCopyPlan p = tl::gpu::PlanTmaCopy(Query2D(DType::kF16, 64, 32, 152));
  ASSERT_TRUE(p.ok) << p.why_not;
  EXPECT_EQ(p.box, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(p.bytes, 64 * 32 * 2);
  // A padded row (ldmatrix operands): the box is as wide as the stored row.
  p = tl::gpu::PlanTmaCopy(Query2D(DType::kF16, 64, 32, 152, 40));
  ASSERT_TRUE(p.ok) << p.why_not;
  EXPECT_EQ(p.box, (std::vector<int64_t>{64, 40}));
  EXPECT_EQ(p.bytes, 64 * 40 * 2);
  // A 3-D tensor read as a 2-D tile: the batch dim's box is 1.
  TmaCopyQuery q3 = Query2D(DType::kBF16, 64, 64, 128);
  q3.tensor_shape = {4, 1000, 128};
  q3.src_extents = {1, 64, 64};
  p = tl::gpu::PlanTmaCopy(q3);
  ASSERT_TRUE(p.ok) << p.why_not;
  EXPECT_EQ(p.box, (std::vector<int64_t>{1, 64, 64}));

  auto why = [](const TmaCopyQuery& q) { return tl::gpu::PlanTmaCopy(q).why_not; };
  EXPECT_EQ(why(Query2D(DType::kF16, 64, 32, 150)), "the tensor's rows are 300 bytes, not a multiple of 16");
  TmaCopyQuery dyn = Query2D(DType::kF16, 64, 32, 152);
  dyn.tensor_shape[1] = std::nullopt;
  EXPECT_EQ(why(dyn), "the tensor's last dim is dynamic (its row stride may not be a multiple of 16 bytes)");
  TmaCopyQuery six = Query2D(DType::kF16, 64, 32, 152);
  six.tensor_shape = {2, 2, 2, 2, 1000, 152};
  six.src_extents = {1, 1, 1, 1, 64, 32};
  EXPECT_EQ(why(six), "tensor rank 6 (a tensor map has 1 to 5 dims)");
  EXPECT_EQ(why(Query2D(DType::kF16, 300, 16, 152)), "box dim 0 is 300 elements (1 to 256)");
  EXPECT_EQ(why(Query2D(DType::kF32, 64, 2, 152)), "the box row is 8 bytes, not a multiple of 16");
  EXPECT_EQ(why(Query2D(DType::kBool, 64, 32, 160)), "dtype bool has no tensor-map type");
  TmaCopyQuery part = Query2D(DType::kF16, 64, 32, 152);
  part.dst_region_whole = false;
  EXPECT_EQ(why(part), "the destination is not a whole shared tile");
  TmaCopyQuery misal = Query2D(DType::kF16, 64, 32, 152);
  misal.dst_aligned = false;
  EXPECT_EQ(why(misal), "the destination tile is not 128-byte aligned");
  TmaCopyQuery swz = Query2D(DType::kF16, 64, 128, 256);
  swz.swizzle = SmemSwizzle::k128B;
  EXPECT_EQ(why(swz), "the box row is 256 bytes, more than the 128B swizzle's 128");
  TmaCopyQuery shape = Query2D(DType::kF16, 64, 32, 152);
  shape.dst_extents = {32, 64};
  shape.dst_shape = {32, 64};
  EXPECT_EQ(why(shape), "source and destination tiles differ in shape");
  EXPECT_EQ(tl::gpu::TensorMapDataType(DType::kBF16), 9);
  EXPECT_EQ(tl::gpu::TensorMapDataType(DType::kI8), 0);
}

// The pipelined Tile IR with the mbarrier hints (gemm_tma, 3 stages).
TEST(Tma, PipelineHints) {
  tl::ir::Function f = Parse(Named("gemm_tma").text);
  ASSERT_TRUE(tl::passes::MakeRegionsExplicit(f).ok());
  const std::vector<tl::gpu::AsyncPipeline> p = tl::gpu::PipelineAsyncCopies(f, 8, true);
  ASSERT_EQ(p.size(), 1u);
  const std::string ir = tl::ir::Print(f);
  for (const char* want : {"      hint tl_async_copy 0, 3\n      copy A[by * 64:64, 0:32] -> A_s[0:1, 0:64, 0:32]\n",
                           "      hint tl_tma_arrive 0\n    }\n    hint tl_async_commit\n",
                           "      let tl_stage_0 = truncmod(k - 0, 3)\n      hint tl_tma_wait 0, tl_stage_0\n"
                           "      hint tl_async_wait 1\n      sync\n"}) {
    EXPECT_NE(ir.find(want), std::string::npos) << want << "\n" << ir;
  }
  // Without tma the pipeline is exactly the cp.async one.
  tl::ir::Function g = Parse(Named("gemm_tma").text);
  ASSERT_TRUE(tl::passes::MakeRegionsExplicit(g).ok());
  tl::gpu::PipelineAsyncCopies(g, 8);
  EXPECT_EQ(tl::ir::Print(g).find("tl_tma"), std::string::npos);
}

TEST(Tma, LoweredAndPrinted) {
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Named("gemm_tma").text), Options(true));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_EQ(k->tensor_maps.size(), 2u);
  EXPECT_EQ(k->tensor_maps[0].param, 0);
  EXPECT_EQ(k->tensor_maps[0].box, (std::vector<int64_t>{64, 40}));
  EXPECT_EQ(k->tensor_maps[1].param, 1);
  EXPECT_EQ(k->tensor_maps[1].box, (std::vector<int64_t>{32, 72}));
  EXPECT_EQ(k->param_align.at("A"), 16);
  const std::string notes = Notes(*k);
  EXPECT_NE(notes.find("TMA: copy A -> A_s as box 64x40 (5120 B) on tl_mbar"), std::string::npos) << notes;
  EXPECT_NE(notes.find("TMA: copy B -> B_s as box 32x72 (4608 B) on tl_mbar"), std::string::npos) << notes;
  const std::string dump = tl::gpu::Dump(*k);
  for (const char* want : {"mbarrier.init tl_mbar", "tma.load map0 (by * 64, 0) -> A_s[0] on tl_mbar",
                           "tma.load map1 (32, bx * 64) -> B_s[2304] on tl_mbar", "mbarrier.arrive tl_mbar",
                           "] parity tl_phase"}) {
    EXPECT_NE(dump.find(want), std::string::npos) << want << "\n" << dump;
  }
  EXPECT_EQ(dump.find("cp.async.16"), std::string::npos) << dump;
  // Every shared buffer starts 128-byte aligned.
  for (const tl::gpu::SimtBuffer& b : k->buffers) {
    if (b.space == tl::gpu::Space::kShared && b.dtype != tl::ir::DType::kU64) {
      EXPECT_EQ(b.shared_offset % 128, 0) << b.name;
    }
  }
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  for (const char* want : {"const __grid_constant__ tl_tensor_map tl_tmap0, const __grid_constant__ tl_tensor_map tl_tmap1)",
                           "tl_tma_load_2d(&A_s[0], &tl_tmap0, &tl_mbar", "tl_mbar_expect_tx(&tl_mbar",
                           "tl_mbar_wait(&tl_mbar", "tl_fence_proxy_async();"}) {
    EXPECT_NE(src->source.find(want), std::string::npos) << want;
  }
  // Tensor-map slots follow the pointers: 64-byte aligned, 128 bytes each.
  ASSERT_EQ(src->slots.size(), 5u);
  EXPECT_EQ(src->slots[3].tensor_map, 0);
  EXPECT_EQ(src->slots[3].offset, 64u);
  EXPECT_EQ(src->slots[3].size, 128u);
  EXPECT_EQ(src->slots[4].tensor_map, 1);
  EXPECT_EQ(src->slots[4].offset, 192u);
  EXPECT_EQ(src->param_buffer_bytes, 320u);
  // Without tma_copies nothing of it appears (the other archs' kernel).
  tl::StatusOr<tl::gpu::SimtKernel> plain = tl::gpu::LowerToSimt(Parse(Named("gemm_tma").text), Options(false));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->tensor_maps.empty());
  EXPECT_EQ(cu::PrintCuda(*plain)->source.find("tl_tensor_map"), std::string::npos);
}

std::map<std::string, std::vector<double>> RandomTensors(const tl::ir::Function& f, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::map<std::string, std::vector<double>> t;
  for (const tl::ir::Param& p : f.params) {
    if (p.kind != tl::ir::Param::Kind::kTensor) continue;
    int64_t n = 1;
    for (const tl::ir::Expr& d : p.shape) n *= tl::ir::FoldInt(d).value_or(1);
    std::vector<double>& v = t[p.name];
    v.resize(static_cast<size_t>(n));
    for (double& x : v) {
      x = dist(rng);
      if (!tl::ir::IsFloat(p.dtype)) x = std::fabs(std::floor(x * 7));
      if (tl::ir::IsFloat(p.dtype) && tl::ir::BitWidth(p.dtype) == 16) x = static_cast<double>(static_cast<_Float16>(x));
    }
  }
  return t;
}

// Runs f lowered with and without TMA on the same inputs; returns whether
// the TMA lowering used TMA. Results must be identical.
bool SameAsCpAsync(const tl::ir::Function& f, const std::string& what) {
  tl::StatusOr<tl::gpu::SimtKernel> a = tl::gpu::LowerToSimt(f, Options(false, f.name));
  tl::StatusOr<tl::gpu::SimtKernel> b = tl::gpu::LowerToSimt(f, Options(true, f.name));
  if (!a.ok() || !f.symbols.empty()) return false;  // several kernels, dynamic shapes: not for the interpreter
  EXPECT_TRUE(b.ok()) << what << ": " << b.status().ToString();
  if (!b.ok() || b->tensor_maps.empty()) return false;
  std::map<std::string, std::vector<double>> t = RandomTensors(f, 21), t2 = t;
  const tl::Status sa = tl::gpu::test::Interpret(*a, &t);
  EXPECT_TRUE(sa.ok()) << what << ": " << sa.ToString();
  const tl::Status sb = tl::gpu::test::Interpret(*b, &t2);
  EXPECT_TRUE(sb.ok()) << what << ": " << sb.ToString();
  size_t differ = 0;
  for (const auto& [name, v] : t) {
    for (size_t i = 0; i < v.size(); ++i) {
      const double x = v[i], y = t2[name][i];
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) ++differ;
    }
  }
  EXPECT_EQ(differ, 0u) << what;
  return true;
}

// Interpreter (CI): every test kernel and every conformance golden with a
// pipelined loop gives identical results through TMA and through cp.async.
TEST(Tma, InterpIdenticalToCpAsync) {
  int used = 0;
  std::string names;
  for (const TestKernel& k : TestKernels()) {
    if (k.name == "gemm_big") continue;  // 16x16 blocks of 256 threads: minutes in the interpreter
    if (SameAsCpAsync(Parse(k.text), k.name)) {
      ++used;
      names += " " + k.name;
    }
  }
  int goldens = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TL_FRONTEND_GOLDEN_DIR)) {
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (entry.path().extension() != ".tir" || text.find(" in pipelined(") == std::string::npos) continue;
    for (const char* low : {"stages=0)", "stages=1)"}) {
      for (size_t at; (at = text.find(low)) != std::string::npos;) text.replace(at, 9, "stages=2)");
    }
    if (SameAsCpAsync(Parse(text), entry.path().filename().string())) ++goldens;
  }
  std::printf("[ tma ] test kernels through TMA:%s; %d conformance goldens through TMA, each identical to cp.async\n",
              names.c_str(), goldens);
  EXPECT_GE(used, 3);  // gemm_tma, flash_attn, flash_attn_rowvec
  EXPECT_GE(goldens, 5);
}

// Interpreter (CI): gemm_tma (partial tiles in M, N and K: the model zero-
// fills boxes past the tensor) against float64; with its mbarrier waits
// removed the stages never land and the result is wrong or the interpreter
// reports copies never waited for.
TEST(Tma, InterpGemmVsFloat64AndMissingWait) {
  const tl::ir::Function f = Parse(Named("gemm_tma").text);
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, Options(true));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::map<std::string, std::vector<double>> t = RandomTensors(f, 5);
  t["C"].assign(200 * 136, 0);
  const std::vector<double> a = t["A"], b = t["B"];
  auto worst = [&](const std::vector<double>& c) {
    double w = 0;
    for (int i = 0; i < 200; ++i) {
      for (int j = 0; j < 136; ++j) {
        double s = 0;
        for (int p = 0; p < 152; ++p) s += a[i * 152 + p] * b[p * 136 + j];
        const double e = std::fabs(c[i * 136 + j] - s) / (1 + std::fabs(s));
        w = std::isnan(e) ? INFINITY : std::max(w, e);
      }
    }
    return w;
  };
  std::map<std::string, std::vector<double>> t2 = t;
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(worst(t["C"]), 1e-5);
  int removed = 0;
  std::function<void(tl::gpu::SBlock&)> strip = [&](tl::gpu::SBlock& blk) {
    removed += static_cast<int>(
        std::erase_if(blk, [](const tl::gpu::SStmt& x) { return std::holds_alternative<tl::gpu::SMbarWait>(x.node); }));
    for (tl::gpu::SStmt& s : blk) {
      if (auto* l = std::get_if<tl::gpu::SFor>(&s.node)) strip(l->body);
      if (auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
        strip(i->then_body);
        strip(i->else_body);
      }
    }
  };
  strip(k->body);
  EXPECT_EQ(removed, 1);
  const tl::Status st2 = tl::gpu::test::Interpret(*k, &t2);
  EXPECT_TRUE(!st2.ok() || worst(t2["C"]) > 1.0) << st2.ToString();
  if (!st2.ok()) {
    // (The refill of a stage nobody waited for is caught at the copy; else at the end.)
    EXPECT_TRUE(st2.message().find("never waited for") != std::string::npos ||
                st2.message().find("no thread has waited for yet") != std::string::npos)
        << st2.ToString();
  }
  // An expect_tx that announces fewer bytes than the box delivers: the phase
  // completes early... and one announcing more never completes: deadlock.
  tl::StatusOr<tl::gpu::SimtKernel> k3 = tl::gpu::LowerToSimt(f, Options(true));
  std::function<void(tl::gpu::SBlock&)> grow = [&](tl::gpu::SBlock& blk) {
    for (tl::gpu::SStmt& s : blk) {
      if (auto* tma = std::get_if<tl::gpu::STmaLoad>(&s.node)) tma->bytes += 16;
      if (auto* l = std::get_if<tl::gpu::SFor>(&s.node)) grow(l->body);
      if (auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
        grow(i->then_body);
        grow(i->else_body);
      }
    }
  };
  grow(k3->body);
  std::map<std::string, std::vector<double>> t3 = RandomTensors(f, 5);
  const tl::Status st3 = tl::gpu::test::Interpret(*k3, &t3);
  EXPECT_FALSE(st3.ok());
  EXPECT_NE(st3.message().find("deadlock: wait on tl_mbar"), std::string::npos) << st3.ToString();
}

// CI with the CUDA toolkit: the sm_90a TMA kernel compiles, its PTX holds
// the bulk tensor copies and mbarrier waits, ptxas assembles it for sm_90a,
// and (where cuobjdump exists) the SASS holds UTMALDG.
TEST(Tma, Sm90aPtxAndSass) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  for (const char* name : {"gemm_tma", "flash_attn"}) {
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Named(name).text), Options(true));
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_FALSE(k->tensor_maps.empty()) << name << "\n" << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok());
    tl::StatusOr<cu::CompiledCode> ptx = tc->Compile(src->source, name, "compute_90a");
    ASSERT_TRUE(ptx.ok()) << ptx.status().ToString();
    const std::string text(ptx->bytes.begin(), ptx->bytes.end());
    const int rank = static_cast<int>(k->tensor_maps[0].box.size());
    EXPECT_NE(text.find("cp.async.bulk.tensor." + std::to_string(rank) +
                        "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"),
              std::string::npos)
        << name;
    EXPECT_NE(text.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos) << name;
    EXPECT_NE(text.find("mbarrier.expect_tx"), std::string::npos) << name;
    const std::string first_map = ".param .align 64 .b8 " + std::string(name) + "_param_" + std::to_string(k->params.size()) + "[128]";
    EXPECT_NE(text.find(first_map), std::string::npos) << name << ": " << first_map;
    tl::StatusOr<cu::CompiledCode> cubin = tc->Compile(src->source, name, "sm_90a");
    ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
    std::printf("[ %s sm_90a TMA ] %d registers, %d spill bytes\n", name, cubin->registers, cubin->spill_stores);
    const std::string ptxas = cu::FindPtxas();
    const std::filesystem::path dir = std::filesystem::temp_directory_path();
    const std::filesystem::path p = dir / (std::string("tl_tma_") + name + ".ptx"), o = dir / (std::string("tl_tma_") + name + ".cubin");
    {
      std::ofstream out(p, std::ios::binary);
      out.write(text.data(), static_cast<std::streamsize>(text.size() - 1));
    }
    if (!ptxas.empty()) {
      tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({ptxas, "-arch=sm_90a", "-o", o.string(), p.string()});
      EXPECT_EQ(r.exit_code, 0) << "ptxas sm_90a: " << r.err;
    }
    std::string cuobjdump;
    for (const char* c : {"/usr/local/cuda/bin/cuobjdump", "/usr/local/cuda-13.0/bin/cuobjdump", "/usr/bin/cuobjdump"}) {
      if (std::filesystem::exists(c)) cuobjdump = c;
    }
    if (!cuobjdump.empty()) {
      std::ofstream(o, std::ios::binary).write(reinterpret_cast<const char*>(cubin->bytes.data()),
                                               static_cast<std::streamsize>(cubin->bytes.size()));
      tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({cuobjdump, "-sass", o.string()});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("UTMALDG"), std::string::npos) << name << ": no UTMALDG in the SASS";
      EXPECT_NE(r.out.find("SYNCS"), std::string::npos) << name << ": no mbarrier (SYNCS) in the SASS";
    } else {
      std::printf("[ %s ] no cuobjdump here: SASS not inspected (PTX and ptxas checked)\n", name);
    }
    std::filesystem::remove(p);
    std::filesystem::remove(o);
  }
}

// CI with the CUDA toolkit: the bundle's sm_90a variant carries the tensor
// maps and their slots and names must_understand launch.tensor_maps; the
// other variants keep cp.async (no tensor maps) and serve as the fallback.
TEST(Tma, BundleCarriesTensorMaps) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  cu::CudaBuildOptions o;
  o.archs = {"sm_80", "sm_90a"};
  tl::StatusOr<std::vector<uint8_t>> bytes = cu::BuildCudaBundle({Parse(Named("gemm_tma").text)}, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  tl::StatusOr<tl::formats::BundleView> view = tl::formats::BundleView::Open(*bytes);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  bool token = false;
  for (const auto* t : *view->manifest()->must_understand()) token = token || t->str() == "launch.tensor_maps";
  EXPECT_TRUE(token);
  const tl::bundle::Kernel* k = view->FindKernel("gemm_tma");
  ASSERT_NE(k, nullptr);
  int checked = 0;
  for (const auto* v : *k->variants()) {
    const auto* maps = v->launch()->tensor_maps();
    if (v->id()->str() != "cuda.sm_90a") {
      EXPECT_TRUE(!maps || maps->size() == 0) << v->id()->str();
      continue;
    }
    ++checked;
    ASSERT_TRUE(maps && maps->size() == 2);
    // A's 64x32 tile: one box as wide as its padded row (mma.sync operand)
    // or a 64B-swizzled one (wgmma operand).
    EXPECT_EQ(maps->Get(0)->param(), 0);
    ASSERT_EQ(maps->Get(0)->box()->size(), 2u);
    EXPECT_EQ(maps->Get(0)->box()->Get(0), 64u);
    const uint32_t inner = maps->Get(0)->box()->Get(1);
    EXPECT_TRUE((inner == 40 && maps->Get(0)->swizzle() == 0) || (inner == 32 && maps->Get(0)->swizzle() == 2))
        << inner << " swizzle " << int(maps->Get(0)->swizzle());
    EXPECT_EQ(maps->Get(1)->param(), 1);
    int slots = 0;
    for (const auto* s : *v->launch()->param_slots()) {
      if (s->tensor_map() < 0) continue;
      ++slots;
      EXPECT_EQ(s->size(), 128u);
      // ptxas's offsets, read from the cubin (cubin_params.h): 64-byte
      // aligned relative to sm_90's constant-bank base 0x210, not to 0.
      EXPECT_EQ(s->offset(), s->tensor_map() == 0 ? 48u : 176u);
    }
    EXPECT_EQ(slots, 2);
    EXPECT_EQ(v->launch()->param_buffer_bytes(), 304u);
    bool aligned = false;
    for (const auto* g : *v->guards()) {
      aligned = aligned || (g->param() == 0 && g->op() == tl::bundle::GuardOp::PTR_ALIGNED && g->value() == 16);
    }
    EXPECT_TRUE(aligned) << "the TMA variant needs 16-byte aligned tensors (else the next variant runs)";
  }
  EXPECT_EQ(checked, 1);
}

}  // namespace
