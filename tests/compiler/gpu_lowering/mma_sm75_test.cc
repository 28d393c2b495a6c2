// Turing (sm_75) tensor cores: GpuLowerOptions::mma_sm75 (f16 m16n8k8, s8
// m8n8k16; SMma::sm75). The lowering runs in the SIMT interpreter against
// float64 / exact integer references on random inputs; the CUDA source carries
// the tl::mma_sync<...> template form upstream TileLang's tests pin, compiles
// for sm_75 and its compute_75 PTX assembles with ptxas -arch=sm_75; bundles for
// an sm_75 target list pick these shapes, sm_80+ lists keep m16n8k16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "lowering_test_util.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;

constexpr const char* kF16Atom =
    "tl::mma_sync<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 16, 8, 8, false, true>";
constexpr const char* kI8Atom =
    "tl::mma_sync<tl::DataType::kInt8, tl::DataType::kInt8, tl::DataType::kInt32, 8, 8, 16, false, true>";
constexpr const char* kF16Sm80Atom =
    "tl::mma_sync<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 16, 8, 16, false, true>";

using tl::gpu::test::Notes;
using tl::gpu::test::Parse;

const std::string& KernelText(const std::string& name) {
  static const std::vector<TestKernel> all = TestKernels();
  for (const TestKernel& k : all) {
    if (k.name == name) return k.text;
  }
  static const std::string none;
  ADD_FAILURE() << "no test kernel " << name;
  return none;
}

// What MakeCudaVariants sets for a target list whose oldest arch is sm_75.
tl::gpu::GpuLowerOptions Sm75Options() {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 48 * 1024;
  o.symbol_params = true;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  o.mma_sm75 = true;
  o.vector_copies = true;
  o.async_copies = false;  // cp.async is sm_80+
  return o;
}

// C = op(A) op(B) in float64 (ints exact in a double at these sizes).
std::vector<double> Reference(const std::vector<double>& a, const std::vector<double>& b, int64_t M, int64_t N,
                              int64_t K, bool ta, bool tb) {
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p) {
        s += a[static_cast<size_t>(ta ? p * M + i : i * K + p)] * b[static_cast<size_t>(tb ? j * K + p : p * N + j)];
      }
      c[static_cast<size_t>(i * N + j)] = s;
    }
  }
  return c;
}

// f16 values on a grid of 1/256 in [-2, 2): exactly representable, so the
// interpreter's operands are the reference's.
std::vector<double> RandomF16(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-512, 511);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng) / 256.0;
  return v;
}

struct Case {
  std::string kernel;
  bool ta, tb, i8;
  const char* shape;  // the Dump's "sm75 <shape>"
};

TEST(Sm75, InterpretedGemmsMatchFloat64) {
  const std::vector<Case> cases = {
      {"gemm_f16_nn", false, false, false, "m16n8k8"}, {"gemm_f16_nt", false, true, false, "m16n8k8"},
      {"gemm_f16_tn", true, false, false, "m16n8k8"},  {"gemm_f16_tt", true, true, false, "m16n8k8"},
      {"gemm_f16acc", false, false, false, "m16n8k8"}, {"gemm_i8", false, true, true, "m8n8k16"},
  };
  std::mt19937 rng(75);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.kernel);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(KernelText(c.kernel)), Sm75Options());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string dump = tl::gpu::Dump(*k);
    EXPECT_NE(dump.find(std::string("sm75 ") + c.shape), std::string::npos) << dump;
    EXPECT_NE(Notes(*k).find(std::string("(mma.sync ") + c.shape), std::string::npos) << Notes(*k);
    const int64_t M = 200, N = 130, K = 150;
    std::map<std::string, std::vector<double>> t;
    if (c.i8) {
      std::uniform_int_distribution<int> d(-128, 127);
      for (const char* n : {"A", "B"}) {
        t[n].resize(static_cast<size_t>((n[0] == 'A' ? M : N) * K));
        for (double& v : t[n]) v = d(rng);
      }
    } else {
      t["A"] = RandomF16(static_cast<size_t>(M * K), rng);
      t["B"] = RandomF16(static_cast<size_t>(K * N), rng);
    }
    t["C"].assign(static_cast<size_t>(M * N), 0.0);
    const std::vector<double> want = Reference(t["A"], t["B"], M, N, K, c.ta, c.tb);
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // i8: exact. f16 operands on a 1/256 grid: every product and partial sum
    // is exact in f32, so the f32 accumulator matches float64 exactly too;
    // the f16 accumulator (gemm_f16acc) is rounded once when stored.
    const bool acc16 = c.kernel == "gemm_f16acc";
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double err = std::fabs(t["C"][i] - want[i]);
      worst = std::max(worst, tl::gpu::test::NanAsInf(err));
      if (err > (acc16 ? std::fabs(want[i]) * (1.0 / 2048) + 1e-7 : 0.0)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "worst abs error " << worst;
  }
}

// FlashAttention (scores cast to f16 and re-read from shared memory as the
// second gemm's A operand; row reductions over the mma accumulator layout):
// the sm_75 lowering agrees with the sm_80 one (which Run.* checks against
// float64) up to accumulation order.
TEST(Sm75, FlashAttentionMatchesTheSm80Lowering) {
  const tl::ir::Function f = Parse(KernelText("flash_attn"));
  tl::StatusOr<tl::gpu::SimtKernel> k75 = tl::gpu::LowerToSimt(f, Sm75Options());
  ASSERT_TRUE(k75.ok()) << k75.status().ToString();
  EXPECT_NE(tl::gpu::Dump(*k75).find("sm75 m16n8k8"), std::string::npos) << tl::gpu::Dump(*k75);
  tl::gpu::GpuLowerOptions o80 = Sm75Options();
  o80.mma_sm75 = false;
  tl::StatusOr<tl::gpu::SimtKernel> k80 = tl::gpu::LowerToSimt(f, o80);
  ASSERT_TRUE(k80.ok()) << k80.status().ToString();
  EXPECT_EQ(tl::gpu::Dump(*k80).find("sm75"), std::string::npos);
  std::mt19937 rng(7);
  std::normal_distribution<double> d(0.0, 1.0);
  std::map<std::string, std::vector<double>> t;
  for (const char* n : {"Q", "K", "V"}) {
    t[n].resize(2 * 2 * 100 * 32);
    for (double& v : t[n]) v = std::round(d(rng) * 1024) / 1024;  // f16-exact
  }
  t["Output"].assign(2 * 2 * 100 * 32, 0.0);
  std::map<std::string, std::vector<double>> t80 = t;
  ASSERT_TRUE(tl::gpu::test::Interpret(*k75, &t).ok());
  ASSERT_TRUE(tl::gpu::test::Interpret(*k80, &t80).ok());
  double worst = 0, norm = 0;
  for (size_t i = 0; i < t["Output"].size(); ++i) {
    worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["Output"][i] - t80["Output"][i])));
    norm = std::max(norm, std::fabs(t80["Output"][i]));
  }
  EXPECT_GT(norm, 0.1);
  EXPECT_LE(worst, 2e-3) << "sm_75 vs sm_80 lowering of flash_attn";
}

// bf16 and tf32 have no Turing atoms: SIMT FMA, with the reason in the notes.
TEST(Sm75, Bf16AndTf32StaySimt) {
  tl::StatusOr<tl::gpu::SimtKernel> bf = tl::gpu::LowerToSimt(Parse(KernelText("gemm_bf16_tn")), Sm75Options());
  ASSERT_TRUE(bf.ok()) << bf.status().ToString();
  EXPECT_EQ(tl::gpu::Dump(*bf).find("mma."), std::string::npos);
  EXPECT_NE(Notes(*bf).find("SIMT FMA: no mma.sync on sm_75 for bf16 x bf16 -> f32"), std::string::npos) << Notes(*bf);
  // Upstream's sm_75 tests assert "tl::mma_sync" is absent from such a kernel's
  // source: the atoms' prelude is printed only into kernels with an SMma.
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*bf);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->source.find("tl::mma_sync"), std::string::npos);
  EXPECT_EQ(src->source.find("MmaAtom"), std::string::npos);
  tl::gpu::GpuLowerOptions o = Sm75Options();
  o.tf32 = true;
  tl::StatusOr<tl::gpu::SimtKernel> tf = tl::gpu::LowerToSimt(Parse(KernelText("gemm_tf32")), o);
  ASSERT_TRUE(tf.ok()) << tf.status().ToString();
  EXPECT_EQ(tl::gpu::Dump(*tf).find("mma."), std::string::npos);
  EXPECT_NE(Notes(*tf).find("no mma.sync on sm_75 for f32 x f32 -> f32"), std::string::npos) << Notes(*tf);
}

// The printed source names each atom in upstream's template form; it compiles
// for sm_75 (NVRTC or nvcc) and its compute_75 PTX assembles for sm_75.
TEST(Sm75, SourceCompilesForSm75) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  const std::string ptxas = cu::FindPtxas();
  for (const auto& [name, atom, ptx_op] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"gemm_f16_nn", kF16Atom, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"},
           {"gemm_f16_tt", kF16Atom, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"},
           {"gemm_f16acc", kF16Atom, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"},
           {"gemm_i8", kI8Atom, "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32"},
           {"flash_attn", kF16Atom, "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"}}) {
    SCOPED_TRACE(name);
    const tl::ir::Function f = Parse(KernelText(name));
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, Sm75Options());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    // The kernel calls the atom (the prelude also declares every specialization).
    const size_t body = src->source.find("__global__");
    ASSERT_NE(body, std::string::npos);
    EXPECT_NE(src->source.find(atom, body), std::string::npos) << src->source.substr(body);
    EXPECT_EQ(src->source.find(kF16Sm80Atom, body), std::string::npos);
    tl::StatusOr<cu::CompiledCode> cubin = tc->Compile(src->source, f.name, "sm_75");
    ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
    std::printf("[ %s sm_75 ] %d registers, %d spill bytes\n", name.c_str(), cubin->registers, cubin->spill_stores);
    tl::StatusOr<cu::CompiledCode> ptx = tc->Compile(src->source, f.name, "compute_75");
    ASSERT_TRUE(ptx.ok()) << ptx.status().ToString();
    const std::string text(ptx->bytes.begin(), ptx->bytes.end());
    EXPECT_NE(text.find(ptx_op), std::string::npos);
    EXPECT_EQ(text.find("m16n8k16"), std::string::npos);
    EXPECT_EQ(text.find("cp.async"), std::string::npos);
    if (ptxas.empty()) continue;
    const std::filesystem::path p = std::filesystem::temp_directory_path() / ("tl_sm75_" + name + ".ptx");
    {
      std::ofstream out(p, std::ios::binary);
      out.write(text.data(), static_cast<std::streamsize>(text.find('\0') == std::string::npos ? text.size() : text.find('\0')));
    }
    tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({ptxas, "-arch=sm_75", "-o", "/dev/null", p.string()});
    EXPECT_EQ(r.exit_code, 0) << "ptxas sm_75: " << r.err;
    std::filesystem::remove(p);
  }
}

// MakeCudaVariants: an sm_75 target list lowers with Turing's shapes, an
// sm_80+ list keeps m16n8k16 (and its cp.async pipeline).
TEST(Sm75, BundleTargetsPickTheShapes) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  const tl::ir::Function f = Parse(KernelText("gemm_f16_nn"));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tl_sm75_bundle_src";
  for (const auto& [archs, want, not_want] : std::vector<std::tuple<std::vector<std::string>, std::string, std::string>>{
           {{"sm_75"}, kF16Atom, kF16Sm80Atom}, {{"sm_75", "sm_90a"}, kF16Atom, kF16Sm80Atom},
           {{"sm_80"}, kF16Sm80Atom, kF16Atom}}) {
    SCOPED_TRACE(archs[0] + (archs.size() > 1 ? "," + archs[1] : std::string()));
    std::filesystem::remove_all(dir);
    cu::CudaBuildOptions o;
    o.archs = archs;
    o.ptx = false;
    o.emit_source_dir = dir.string();
    tl::StatusOr<std::vector<uint8_t>> bundle = cu::BuildCudaBundle({f}, o);
    ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
    std::ifstream in(dir / (f.name + ".cu"));
    const std::string src((std::istreambuf_iterator<char>(in)), {});
    const size_t body = src.find("__global__");
    ASSERT_NE(body, std::string::npos) << src;
    EXPECT_NE(src.find(want, body), std::string::npos);
    EXPECT_EQ(src.find(not_want, body), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
