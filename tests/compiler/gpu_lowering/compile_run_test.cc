// Every test kernel: lowered, printed, compiled for sm_80, sm_89, sm_90a and
// compute_80 PTX, and the PTX assembled by ptxas for each arch (CI, no GPU).
// On a machine with a CUDA device the same kernels run through the runtime's
// C ABI on random inputs and are compared with a float64 host reference.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <chrono>
#include <cstdlib>
#include <random>

#include "lowering_test_util.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/passes/passes.h"
#include "tilelang/runtime.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::test::Notes;
using tl::gpu::test::Parse;

// The lowering options the CUDA bundles use (tensor cores; tf32 only for the
// kernel that asks for it by name).
tl::gpu::GpuLowerOptions CudaOptions(const std::string& kernel, int64_t shared = 99 * 1024) {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = shared;
  o.symbol_params = true;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  o.tf32 = kernel.find("tf32") != std::string::npos;
  o.vector_copies = true;
  o.async_copies = true;
  o.tma_copies = kernel.find("tma") != std::string::npos;  // the sm_90a lowering's TMA, in the interpreter
  return o;
}
cu::CudaBuildOptions BundleOptions(const std::string& kernel) {
  cu::CudaBuildOptions o;
  o.tf32 = kernel.find("tf32") != std::string::npos;
  return o;
}

class Compile : public ::testing::TestWithParam<TestKernel> {};

TEST_P(Compile, AllArchsAndPtxas) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  const tl::ir::Function f = Parse(GetParam().text);
  tl::gpu::GpuLowerOptions lo = CudaOptions(f.name);
  lo.tma_copies = false;  // the kernel every arch gets (the sm_90a TMA one: Tma.Sm90aPtxAndSass, and the bundle)
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, lo);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  for (const char* arch : {"sm_80", "sm_89", "sm_90a"}) {
    tl::StatusOr<cu::CompiledCode> c = tc->Compile(src->source, f.name, arch);
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status().ToString() << "\n" << src->source;
    EXPECT_GE(c->registers, 0) << c->log;
    // The ptxas report is kept (variant build_attrs); spills are a speed
    // problem, reported here, not a failure.
    EXPECT_LE(c->registers, 255) << c->log;
    std::printf("[ %s %s ] %d registers, %d spill bytes, %lld dynamic shared bytes\n", f.name.c_str(), arch,
                c->registers, c->spill_stores, static_cast<long long>(k->shared_bytes));
  }
  tl::StatusOr<cu::CompiledCode> ptx = tc->Compile(src->source, f.name, "compute_80");
  ASSERT_TRUE(ptx.ok()) << ptx.status().ToString();
  const std::string ptxas = cu::FindPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas in /usr/local/cuda/bin or /usr/local/cuda-13.0/bin: PTX not assembled";
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("tl_gpu_" + f.name + ".ptx");
  {
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ptx->bytes.data()), static_cast<std::streamsize>(ptx->bytes.size() - 1));
  }
  for (const char* arch : {"sm_80", "sm_89", "sm_90a"}) {
    tl::toolchain::ProcessResult r =
        tl::toolchain::RunProcess({ptxas, "-arch=" + std::string(arch), "-o", "/dev/null", p.string()});
    EXPECT_EQ(r.exit_code, 0) << "ptxas " << arch << ": " << r.err;
  }
  std::filesystem::remove(p);
  // gpu_check.sh builds the bundles here so that the GPU machine needs no CUDA compiler.
  if (const char* dir = std::getenv("TL_GPU_TEST_WRITE_BUNDLES")) {
    tl::StatusOr<std::vector<uint8_t>> bundle = cu::BuildCudaBundle({f}, BundleOptions(f.name));
    ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
    std::filesystem::create_directories(dir);
    std::ofstream out(std::filesystem::path(dir) / (f.name + ".tlb"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(bundle->data()), static_cast<std::streamsize>(bundle->size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, Compile, ::testing::ValuesIn(TestKernels()),
                         [](const auto& tp) { return tp.param.name; });

// ---------------------------------------------------------------------------
// Runs on a CUDA device.

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

uint16_t ToHalf(float f) {  // round to nearest even, normal range only (test data is small)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t e = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (e <= 0) return static_cast<uint16_t>(sign);
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (m >> 13);
  const uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(h);
}
double FromHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const double m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return (h & 0x8000) ? -v : v;
}

struct Tensor {
  std::vector<int64_t> shape;
  bool f16 = false;
  std::vector<double> values;  // as the device sees them (f16-rounded)
  std::vector<uint8_t> bytes;
};

Tensor Random(std::vector<int64_t> shape, bool f16, std::mt19937& rng, bool zero = false) {
  Tensor t;
  t.shape = shape;
  t.f16 = f16;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  t.bytes.resize(n * (f16 ? 2 : 4));
  for (int64_t i = 0; i < n; ++i) {
    const float v = zero ? 0.0f : dist(rng);
    if (f16) {
      const uint16_t h = ToHalf(v);
      std::memcpy(&t.bytes[i * 2], &h, 2);
      t.values.push_back(FromHalf(h));
    } else {
      std::memcpy(&t.bytes[i * 4], &v, 4);
      t.values.push_back(v);
    }
  }
  return t;
}

// Runs kernels on the CUDA device, or (Interp()) through the SIMT IR
// interpreter, which needs no GPU and so checks the lowering's numbers in CI.
class Exec : public ::testing::Test {
 protected:
  virtual bool Interp() const { return false; }
  // Interpret the sm_90a lowering (GemmStrategy::kWgmma) instead of sm_80's.
  virtual bool Wgmma() const { return false; }
  void SetUp() override {
    if (Interp()) return;
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CUDA);
    o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
    ASSERT_EQ(S(tl_runtime_create(&o, &rt_)), "");
    if (tl_runtime_device_count(rt_) == 0) {
      std::string why = S(tl_runtime_backend_status(rt_, TL_BACKEND_CUDA));
      GTEST_SKIP() << "no CUDA device: " << (why.empty() ? "the CUDA driver reports no devices" : why);
    }
    ASSERT_EQ(S(tl_runtime_device_at(rt_, 0, &dev_)), "");
  }
  void TearDown() override {
    if (Interp()) return;
    tl_device_release(dev_);
    tl_runtime_release(rt_);
  }

  // Builds a bundle for the kernel (all archs + PTX), launches it once on
  // `args` (tensors copied in and back), returns the time of `reps` more
  // launches in ms (0 when reps == 0).
  double Launch(const TestKernel& k, std::vector<Tensor*> args, int reps = 0, const char* force = nullptr,
                const std::map<std::string, double>& symbols = {}) {
    const tl::ir::Function f = Parse(k.text);
    if (Interp()) {
      tl::gpu::GpuLowerOptions lo = CudaOptions(f.name, 227 * 1024);
      if (Wgmma()) {  // exactly the sm_90a variant's lowering: wgmma, TMA, staged epilogues, warp specialization
        lo.gemm = tl::gpu::GemmStrategy::kWgmma;
        lo.tma_copies = true;
        lo.stage_wgmma_epilogue = true;
        lo.warp_specialize = true;
      }
      tl::StatusOr<tl::gpu::SimtKernel> simt = tl::gpu::LowerToSimt(f, lo);
      EXPECT_TRUE(simt.ok()) << simt.status().ToString();
      if (!simt.ok()) return 0;
      std::map<std::string, std::vector<double>> tensors;
      size_t next = 0;
      for (const tl::ir::Param& p : f.params) {
        if (p.kind == tl::ir::Param::Kind::kTensor && next < args.size()) tensors[p.name] = args[next++]->values;
      }
      const tl::Status st = tl::gpu::test::Interpret(*simt, &tensors, symbols);
      EXPECT_TRUE(st.ok()) << st.ToString();
      next = 0;
      for (const tl::ir::Param& p : f.params) {
        if (p.kind == tl::ir::Param::Kind::kTensor && next < args.size()) args[next++]->values = tensors[p.name];
      }
      return 0;
    }
    tl::StatusOr<std::vector<uint8_t>> bundle = std::vector<uint8_t>();
    if (const char* dir = std::getenv("TL_GPU_TEST_BUNDLES")) {  // prebuilt (gpu_check.sh)
      std::ifstream in(std::filesystem::path(dir) / (f.name + ".tlb"), std::ios::binary);
      bundle = std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
      EXPECT_FALSE(bundle->empty()) << "no prebuilt bundle for " << f.name << " in " << dir;
    } else {
      bundle = cu::BuildCudaBundle({f}, BundleOptions(f.name));
    }
    EXPECT_TRUE(bundle.ok()) << bundle.status().ToString();
    if (!bundle.ok()) return 0;
    tl_bundle_t* b = nullptr;
    EXPECT_EQ(S(tl_bundle_open_memory(rt_, bundle->data(), bundle->size(), nullptr, nullptr, &b)), "");
    tl_kernel_t* kern = nullptr;
    EXPECT_EQ(S(tl_bundle_find_kernel(b, f.name.c_str(), &kern)), "");
    tl_prepared_t* p = nullptr;
    (void)force;
    EXPECT_EQ(S(tl_kernel_prepare(kern, dev_, 0, &p)), "");
    if (p) {  // which variant runs (on an H200: cuda.sm_90a, the wgmma/TMA lowering)
      tl_variant_info_t vi{};
      vi.struct_size = sizeof vi;
      if (S(tl_prepared_variant_info(p, &vi)).empty()) std::printf("[ variant %s: %s ]\n", f.name.c_str(), vi.id);
    }
    std::vector<tl_buffer_t*> bufs;
    std::vector<tl_arg_t> targs;
    for (Tensor* t : args) {
      tl_buffer_t* buf = nullptr;
      EXPECT_EQ(S(tl_buffer_allocate(dev_, t->bytes.size(), &buf)), "");
      EXPECT_EQ(S(tl_buffer_copy_from_host(buf, 0, t->bytes.data(), t->bytes.size(), nullptr)), "");
      bufs.push_back(buf);
      targs.push_back(tl_arg_tensor(tl_buffer_device_pointer(buf), tl_dtype(TL_DTYPE_FLOAT, t->f16 ? 16 : 32),
                                    static_cast<int32_t>(t->shape.size()), t->shape.data(), nullptr));
    }
    double ms = 0;
    if (p) {
      EXPECT_EQ(S(tl_launch(p, nullptr, targs.size(), targs.data(), nullptr)), "");
      for (size_t i = 0; i < args.size(); ++i) {
        EXPECT_EQ(S(tl_buffer_copy_to_host(bufs[i], 0, args[i]->bytes.data(), args[i]->bytes.size(), nullptr)), "");
        for (size_t e = 0; e < args[i]->values.size(); ++e) {
          if (args[i]->f16) {
            uint16_t h;
            std::memcpy(&h, &args[i]->bytes[e * 2], 2);
            args[i]->values[e] = FromHalf(h);
            continue;
          }
          float v;
          std::memcpy(&v, &args[i]->bytes[e * 4], 4);
          args[i]->values[e] = v;
        }
      }
      if (reps > 0) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; ++r) EXPECT_EQ(S(tl_launch(p, nullptr, targs.size(), targs.data(), nullptr)), "");
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
      }
    }
    for (tl_buffer_t* buf : bufs) tl_buffer_release(buf);
    tl_prepared_release(p);
    tl_kernel_release(kern);
    tl_bundle_release(b);
    return ms;
  }

  static void Expect(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i]));
      worst = std::max(worst, tl::gpu::test::NanAsInf(err));
      if (!(err <= tol)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << what << ": worst relative error " << worst;
    std::printf("[ run %s ] %zu elements, worst relative error %.3g\n", what, got.size(), worst);
  }

  tl_runtime_t* rt_ = nullptr;
  tl_device_t* dev_ = nullptr;
};

// 0: on the GPU (the bundle's best variant: sm_90a's wgmma lowering on an
// H200), 1: the sm_80 lowering (mma.sync) in the interpreter, 2: the sm_90a
// lowering (wgmma) in the interpreter.
class Run : public Exec, public ::testing::WithParamInterface<int> {
 protected:
  bool Interp() const override { return GetParam() != 0; }
  bool Wgmma() const override { return GetParam() == 2; }
};
INSTANTIATE_TEST_SUITE_P(Exec, Run, ::testing::Values(0, 1, 2), [](const auto& tp) {
  return std::string(tp.param == 0 ? "Gpu" : tp.param == 1 ? "Interp" : "InterpWgmma");
});

class Timing : public Exec {};

const TestKernel& Named(const std::string& n) {
  static const std::vector<TestKernel> all = TestKernels();
  for (const TestKernel& k : all) {
    if (k.name == n) return k;
  }
  abort();
}

TEST_P(Run, Elementwise) {
  std::mt19937 rng(1);
  Tensor a = Random({1000, 77}, false, rng), b = Random({1000, 77}, false, rng), c = Random({1000, 77}, false, rng, true);
  std::vector<double> want(a.values.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = a.values[i] * 2 + b.values[i];
  Launch(Named("elementwise"), {&a, &b, &c});
  Expect(c.values, want, 1e-6, "elementwise");
}

TEST_P(Run, SoftmaxRowsumRmsnorm) {
  std::mt19937 rng(2);
  {
    Tensor x = Random({300, 100}, false, rng), y = Random({300, 100}, false, rng, true);
    std::vector<double> want(x.values.size());
    for (int r = 0; r < 300; ++r) {
      double m = -INFINITY, s = 0;
      for (int j = 0; j < 100; ++j) m = std::max(m, x.values[r * 100 + j]);
      for (int j = 0; j < 100; ++j) s += std::exp(x.values[r * 100 + j] - m);
      for (int j = 0; j < 100; ++j) want[r * 100 + j] = std::exp(x.values[r * 100 + j] - m) / s;
    }
    Launch(Named("softmax"), {&x, &y});
    Expect(y.values, want, 1e-5, "softmax");
  }
  {
    Tensor x = Random({333, 250}, false, rng), y = Random({333}, false, rng, true);
    std::vector<double> want(333);
    for (int r = 0; r < 333; ++r) {
      for (int j = 0; j < 250; ++j) want[r] += x.values[r * 250 + j];
    }
    Launch(Named("rowsum"), {&x, &y});
    Expect(y.values, want, 1e-5, "rowsum");
  }
  {
    Tensor x = Random({257, 96}, false, rng), w = Random({96}, false, rng), y = Random({257, 96}, false, rng, true);
    std::vector<double> want(x.values.size());
    for (int r = 0; r < 257; ++r) {
      double ss = 0;
      for (int j = 0; j < 96; ++j) ss += x.values[r * 96 + j] * x.values[r * 96 + j];
      for (int j = 0; j < 96; ++j) want[r * 96 + j] = x.values[r * 96 + j] / std::sqrt(ss / 96 + 1e-6) * w.values[j];
    }
    Launch(Named("rmsnorm"), {&x, &w, &y});
    Expect(y.values, want, 1e-5, "rmsnorm");
  }
}

std::vector<double> RefGemm(const Tensor& a, const Tensor& b, int m, int n, int k, bool ta, bool tb) {
  std::vector<double> c(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += a.values[ta ? p * m + i : i * k + p] * b.values[tb ? j * k + p : p * n + j];
      c[static_cast<size_t>(i) * n + j] = s;
    }
  }
  return c;
}

TEST_P(Run, Gemms) {
  std::mt19937 rng(3);
  {
    Tensor a = Random({200, 150}, false, rng), b = Random({150, 130}, false, rng), c = Random({200, 130}, false, rng, true);
    Launch(Named("gemm_f32"), {&a, &b, &c});
    Expect(c.values, RefGemm(a, b, 200, 130, 150, false, false), 1e-5, "gemm_f32");
  }
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 2, tb = t & 1;
    Tensor a = Random(ta ? std::vector<int64_t>{150, 200} : std::vector<int64_t>{200, 150}, true, rng);
    Tensor b = Random(tb ? std::vector<int64_t>{130, 150} : std::vector<int64_t>{150, 130}, true, rng);
    Tensor c = Random({200, 130}, false, rng, true);
    const std::string name = std::string("gemm_f16_") + (ta ? "t" : "n") + (tb ? "t" : "n");
    Launch(Named(name), {&a, &b, &c});
    Expect(c.values, RefGemm(a, b, 200, 130, 150, ta, tb), 1e-5, name.c_str());
  }
}

TEST_P(Run, TmaGemm) {
  // On an sm_90 GPU the bundle's cuda.sm_90a variant copies the operand
  // tiles with TMA (tensor maps encoded by the runtime at launch, mbarrier
  // pipeline; tiles partial in M, N and K zero-filled by the hardware); in
  // the interpreter the same TMA lowering. Launched twice: new buffers, new
  // tensor maps.
  std::mt19937 rng(23);
  for (int rep = 0; rep < 2; ++rep) {
    Tensor a = Random({200, 152}, true, rng), b = Random({152, 136}, true, rng), c = Random({200, 136}, false, rng, true);
    Launch(Named("gemm_tma"), {&a, &b, &c});
    Expect(c.values, RefGemm(a, b, 200, 136, 152, false, false), 1e-5, "gemm_tma (TMA on sm_90a)");
  }
  if (Interp()) return;
  // Which variant the device runs (cuda.sm_90a on an H200: the TMA one).
  tl::StatusOr<std::vector<uint8_t>> bundle = cu::BuildCudaBundle({Parse(Named("gemm_tma").text)}, BundleOptions("gemm_tma"));
  if (const char* dir = std::getenv("TL_GPU_TEST_BUNDLES")) {
    std::ifstream in(std::filesystem::path(dir) / "gemm_tma.tlb", std::ios::binary);
    bundle = std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_TRUE(bundle.ok() && !bundle->empty());
  tl_bundle_t* bh = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt_, bundle->data(), bundle->size(), nullptr, nullptr, &bh)), "");
  tl_kernel_t* kern = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bh, "gemm_tma", &kern)), "");
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(kern, dev_, 0, &p)), "");
  tl_variant_info_t info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ASSERT_EQ(S(tl_prepared_variant_info(p, &info)), "");
  std::printf("[ run gemm_tma ] variant %s\n%s\n", info.id, tl_prepared_explain(p));
  EXPECT_EQ(info.jit, 0u) << "a native cubin (on sm_90: cuda.sm_90a, the TMA variant), not the PTX fallback";
  tl_prepared_release(p);
  tl_kernel_release(kern);
  tl_bundle_release(bh);
}

TEST_P(Run, GemmF16Accumulator) {
  // f16 accumulator and output on tensor cores: within the output's rounding
  // (2^-11 relative) of the float64 product, not the 8 % of elements off that
  // rounding after every FMA gave.
  std::mt19937 rng(13);
  Tensor a = Random({200, 150}, true, rng), b = Random({150, 130}, true, rng), c = Random({200, 130}, true, rng, true);
  Launch(Named("gemm_f16acc"), {&a, &b, &c});
  Expect(c.values, RefGemm(a, b, 200, 130, 150, false, false), 6e-4, "gemm_f16acc");
}

TEST_P(Run, FlashAttentionPipelined) {
  // Causal softmax(Q K^T / sqrt(32)) V in float64; f16 inputs, probabilities
  // rounded to f16 before the second gemm (as the kernel does), f16 output.
  std::mt19937 rng(15);
  const int B = 2, H = 2, S = 100, D = 32;
  Tensor q = Random({B, H, S, D}, true, rng), k = Random({B, H, S, D}, true, rng), v = Random({B, H, S, D}, true, rng);
  Tensor o = Random({B, H, S, D}, true, rng, true);
  Launch(Named("flash_attn"), {&q, &k, &v, &o});
  std::vector<double> want(o.values.size());
  for (int bh = 0; bh < B * H; ++bh) {
    const double* Q = &q.values[bh * S * D];
    const double* K = &k.values[bh * S * D];
    const double* V = &v.values[bh * S * D];
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(i + 1);
      double m = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += Q[i * D + d] * K[j * D + d];
        p[j] = s / std::sqrt(double(D));
        m = std::max(m, p[j]);
      }
      for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j <= i; ++j) acc += p[j] * V[j * D + d];
        want[(bh * S + i) * D + d] = acc / sum;
      }
    }
  }
  Expect(o.values, want, 3e-3, "flash_attn (3-stage cp.async)");
}

// Two warpgroups (block_M 128, 256 threads): on an H200 the sm_90a variant is
// warp-specialized with no barrier between the consumer warpgroups in the
// k-loop (WarpSpecialize.FlashAttentionSharedProbabilities checks the form).
// softmax(Q K^T / 8) V in float64, not causal, f16 probabilities and output.
TEST_P(Run, FlashAttentionTwoWarpgroups) {
  std::mt19937 rng(16);
  const int H = 2, S = 300, D = 64;
  Tensor q = Random({1, H, S, D}, true, rng), k = Random({1, H, S, D}, true, rng), v = Random({1, H, S, D}, true, rng);
  Tensor o = Random({1, H, S, D}, true, rng, true);
  Launch(Named("flash_attn_2wg"), {&q, &k, &v, &o});
  std::vector<double> want(o.values.size());
  for (int h = 0; h < H; ++h) {
    const double* Q = &q.values[h * S * D];
    const double* K = &k.values[h * S * D];
    const double* V = &v.values[h * S * D];
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(S);
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < S; ++j) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += Q[i * D + d] * K[j * D + d];
        p[j] = s / std::sqrt(double(D));
        m = std::max(m, p[j]);
      }
      for (int j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j < S; ++j) acc += p[j] * V[j * D + d];
        want[(h * S + i) * D + d] = acc / sum;
      }
    }
  }
  Expect(o.values, want, 3e-3, "flash_attn_2wg (two warpgroups)");
}

TEST_P(Run, FlashAttentionRowVectorsInRegisters) {
  // upstream's mha_fwd_bshd shape (bshd, not causal, keys past S = 100
  // masked): output and the base-2 log-sum-exp per row against float64. The
  // LSE store runs in a 1-D loop over the replicated row layout.
  std::mt19937 rng(17);
  const int S = 100, H = 2, D = 64;
  Tensor q = Random({1, S, H, D}, true, rng), k = Random({1, S, H, D}, true, rng), v = Random({1, S, H, D}, true, rng);
  Tensor o = Random({1, S, H, D}, true, rng, true), lse = Random({1, H, S}, false, rng, true);
  Launch(Named("flash_attn_rowvec"), {&q, &k, &v, &o, &lse});
  std::vector<double> want(o.values.size()), want_lse(lse.values.size());
  const double scale = 1.0 / std::sqrt(double(D));
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < S; ++i) {
      std::vector<double> p(S);
      double m = -INFINITY, sum = 0;
      for (int j = 0; j < S; ++j) {
        double x = 0;
        for (int d = 0; d < D; ++d) x += q.values[(i * H + h) * D + d] * k.values[(j * H + h) * D + d];
        m = std::max(m, p[j] = x * scale);
      }
      for (int j = 0; j < S; ++j) sum += (p[j] = std::exp(p[j] - m));
      want_lse[h * S + i] = std::log2(sum) + m / std::log(2.0);
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j < S; ++j) acc += p[j] * v.values[(j * H + h) * D + d];
        want[(i * H + h) * D + d] = acc / sum;
      }
    }
  }
  Expect(o.values, want, 3e-3, "flash_attn_rowvec output");
  Expect(lse.values, want_lse, 1e-4, "flash_attn_rowvec lse");
  if (!Interp()) return;
  // Under a 40 KiB budget O_shared takes Q_shared's memory (Q is dead after
  // the K/V loop); the barrier before O's first write keeps the result.
  tl::StatusOr<tl::gpu::SimtKernel> small =
      tl::gpu::LowerToSimt(Parse(Named("flash_attn_rowvec").text), CudaOptions("flash_attn_rowvec", 40 * 1024));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  std::string notes;
  for (const std::string& n : small->notes) notes += n + "\n";
  EXPECT_NE(notes.find("shared O_shared reuses Q_shared"), std::string::npos) << notes;
  EXPECT_NE(notes.find("shared tiles reused: without, the kernel needs 45056 bytes"), std::string::npos) << notes;
  EXPECT_EQ(small->shared_bytes, 45056 - 8192);
  std::map<std::string, std::vector<double>> t{{"Q", q.values}, {"K", k.values}, {"V", v.values}};
  t["Output"].assign(o.values.size(), 0);
  t["LSE"].assign(lse.values.size(), 0);
  ASSERT_TRUE(tl::gpu::test::Interpret(*small, &t).ok());
  std::vector<double> rounded = t["Output"];
  for (double& x : rounded) x = FromHalf(ToHalf(static_cast<float>(x)));
  Expect(rounded, want, 3e-3, "flash_attn_rowvec output, O_shared in Q_shared's memory");
  Expect(t["LSE"], want_lse, 1e-4, "flash_attn_rowvec lse, O_shared in Q_shared's memory");
}

TEST_P(Run, ThreadLevelGemvAndSimtGemm) {
  // The frontend's rewrite of upstream-style thread-level TIR, through the GPU lowering.
  std::mt19937 rng(19);
  {
    Tensor a = Random({1, 512}, true, rng), w = Random({50, 512}, true, rng), c = Random({1, 50}, false, rng, true);
    Launch(Named("gemv_threads"), {&a, &w, &c});
    Expect(c.values, RefGemm(a, w, 1, 50, 512, false, true), 1e-5, "gemv_threads (allreduce over threadIdx.x)");
  }
  {
    Tensor a = Random({64, 48}, true, rng), b = Random({96, 48}, true, rng), c = Random({64, 96}, false, rng, true);
    Launch(Named("simt_gemm_threads"), {&a, &b, &c});
    Expect(c.values, RefGemm(a, b, 64, 96, 48, false, true), 1e-5, "simt_gemm_threads");
  }
}

TEST(Inference, RowVectorsOfFlashAttentionStayInRegisters) {
  // Before: scores_max, scores_max_prev, scores_scale, scores_sum and logsum
  // took 1 x 64 over 4 x 32 from their own 1-D loops and fills (first in
  // program order), conflicted with the 64 x 1 replicated layout of the
  // reductions and went to shared memory.
  tl::StatusOr<tl::gpu::SimtKernel> k =
      tl::gpu::LowerToSimt(Parse(Named("flash_attn_rowvec").text), CudaOptions("flash_attn_rowvec"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::string notes = Notes(*k);
  for (const char* v : {"scores_max", "scores_max_prev", "scores_scale", "scores_sum", "logsum"}) {
    EXPECT_NE(notes.find("fragment " + std::string(v) + ": 64x1 over 32x4 (v=1, 2 slots) replicated"), std::string::npos)
        << v << "\n" << notes;
    EXPECT_EQ(notes.find("fragment " + std::string(v) + " kept in shared memory"), std::string::npos) << notes;
  }
  // Q, K, V, O tiles (8 KiB each) and acc_s_cast, the second gemm's A
  // operand (8 KiB, read from shared memory by mma.sync), with ldmatrix row
  // padding; nothing for the row vectors.
  EXPECT_EQ(k->shared_bytes, 5 * 8192 + 4 * 64 * 8 * 2) << notes;
  // upstream's 128 x 128 tiles at dim 128 for sm_90a (166912 bytes): Q, K,
  // V, O and acc_s_cast are 163840 bytes, 172032 with the padding, so O
  // takes Q's memory (it was 174080 bytes, the row vectors included).
  std::string big = Named("flash_attn_rowvec").text;
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"[64, 64]", "[128, 128]"}, {"[64]", "[128]"}, {", 64]", ", 128]"}, {"64:64", "128:128"},
           {"0:64", "0:128"}, {"(64)", "(128)"}, {"(64, 64)", "(128, 128)"}, {"bx * 64", "bx * 128"},
           {"k * 64", "k * 128"}, {"0.18033688", "0.12751743"}, {"grid(2, 2, 1)", "grid(1, 2, 1)"},
           {"pipelined(0, 2,", "pipelined(0, 1,"}}) {
    for (size_t at = 0; (at = big.find(from, at)) != std::string::npos; at += to.size()) big.replace(at, from.size(), to);
  }
  tl::StatusOr<tl::gpu::SimtKernel> k128 = tl::gpu::LowerToSimt(Parse(big), CudaOptions("flash_attn_128", 166912));
  ASSERT_TRUE(k128.ok()) << k128.status().ToString() << "\n" << big;
  notes = Notes(*k128);
  EXPECT_NE(notes.find("shared O_shared reuses Q_shared"), std::string::npos) << notes;
  EXPECT_NE(notes.find("fragment logsum: 128x1 over 32x4 (v=1, 4 slots) replicated"), std::string::npos) << notes;
  EXPECT_EQ(k128->shared_bytes, 4 * 32768 + 4 * 128 * 8 * 2) << notes;
}

TEST_P(Run, DynamicShapes) {
  // One bundle, three problem sizes: M, N, K reach the kernel as parameters
  // (the epilogue adds K, so a wrong K shows even where the product is right).
  std::mt19937 rng(9);
  for (const auto& [m, n, kk] : std::vector<std::array<int, 3>>{{200, 130, 150}, {77, 190, 40}, {64, 64, 32}}) {
    Tensor a = Random({m, kk}, true, rng), b = Random({kk, n}, true, rng), c = Random({m, n}, false, rng, true);
    Launch(Named("gemm_dyn"), {&a, &b, &c}, 0, nullptr, {{"M", m}, {"N", n}, {"K", kk}});
    std::vector<double> want = RefGemm(a, b, m, n, kk, false, false);
    for (double& w : want) w = w * 0.5 + kk;
    Expect(c.values, want, 1e-5, ("gemm_dyn " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk)).c_str());
  }
}

TEST_P(Run, SafeMemoryEdges) {
  std::mt19937 rng(12);
  Tensor x = Random({77, 45}, false, rng), y = Random({77, 45}, false, rng, true);
  std::vector<double> want(x.values.size());
  for (int r = 0; r < 77; ++r) {
    for (int c = 0; c < 45; ++c) want[r * 45 + c] = 2 * x.values[r * 45 + c] + (c > 0 ? x.values[r * 45 + c - 1] : 0.0);
  }
  Launch(Named("edges"), {&x, &y});
  Expect(y.values, want, 1e-6, "edges");
}

TEST_P(Run, Tf32Gemm) {
  // f32 operands rounded to tf32 (10-bit mantissas): relative error ~1e-3.
  std::mt19937 rng(10);
  Tensor a = Random({200, 150}, false, rng), b = Random({150, 130}, false, rng), c = Random({200, 130}, false, rng, true);
  Launch(Named("gemm_tf32"), {&a, &b, &c});
  Expect(c.values, RefGemm(a, b, 200, 130, 150, false, false), 1e-2, "gemm_tf32");
}

TEST_P(Run, CumsumSplitK) {
  std::mt19937 rng(4);
  {
    Tensor x = Random({100, 50}, false, rng), y = Random({100, 50}, false, rng, true);
    std::vector<double> want(x.values.size());
    for (int r = 0; r < 100; ++r) {
      double s = 0;
      for (int j = 0; j < 50; ++j) want[r * 50 + j] = (s += x.values[r * 50 + j]);
    }
    Launch(Named("cumsum"), {&x, &y});
    Expect(y.values, want, 1e-5, "cumsum");
  }
  {
    Tensor a = Random({96, 512}, false, rng), b = Random({512, 80}, false, rng), c = Random({96, 80}, false, rng, true);
    Launch(Named("splitk"), {&a, &b, &c});
    Expect(c.values, RefGemm(a, b, 96, 80, 512, false, false), 1e-5, "splitk");
  }
}

TEST_P(Run, SplitKAtomicsAndHalfAtomics) {
  // Split-K (kernels/gemm.py matmul_splitk's shape of program): on sm_90a TMA tiles, wgmma, and the
  // accumulator added into f32 C with atomics; twice (C accumulates: the second launch adds the product again).
  std::mt19937 rng(31);
  Tensor a = Random({100, 448}, true, rng), b = Random({448, 136}, true, rng), c = Random({100, 136}, false, rng, true);
  Launch(Named("splitk_tma"), {&a, &b, &c});
  const std::vector<double> ref = RefGemm(a, b, 100, 136, 448, false, false);
  Expect(c.values, ref, 1e-5, "splitk_tma");
  Launch(Named("splitk_tma"), {&a, &b, &c});
  std::vector<double> twice(ref);
  for (double& v : twice) v *= 2;
  Expect(c.values, twice, 1e-5, "splitk_tma twice");
  // f16 atomics: Y + 4 rows of X, each add rounded to f16 (a few units of 2^-11 off the exact sum).
  Tensor x = Random({4, 200}, true, rng), y = Random({200}, true, rng);
  std::vector<double> want(y.values);
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 200; ++j) want[j] += x.values[r * 200 + j];
  }
  Launch(Named("atomic_add_f16"), {&x, &y});
  Expect(y.values, want, 4e-3, "atomic_add_f16");
  // Accumulator column pairs into f16 C (f16x2 atomics on CUDA): three split partials, each rounded to f16
  // and added with one more f16 rounding (|C| < 20: a few units of 2^-7 at most).
  Tensor c16 = Random({100, 136}, true, rng, true);
  Launch(Named("splitk_f16c"), {&a, &b, &c16});
  Expect(c16.values, ref, 1e-2, "splitk_f16c");
}

TEST_F(Timing, Gemm2048) {
  // 2048^3 f16 -> f32 (mma.sync where the bundle is built for sm_80+); 256 sampled entries checked.
  std::mt19937 rng(5);
  Tensor a = Random({2048, 2048}, true, rng), b = Random({2048, 2048}, true, rng);
  Tensor c = Random({2048, 2048}, false, rng, true);
  const double ms = Launch(Named("gemm_big"), {&a, &b, &c}, 10);
  std::uniform_int_distribution<int> pick(0, 2047);
  size_t bad = 0;
  double worst = 0;
  for (int s = 0; s < 256; ++s) {
    const int i = pick(rng), j = pick(rng);
    double want = 0;
    for (int p = 0; p < 2048; ++p) want += a.values[i * 2048 + p] * b.values[p * 2048 + j];
    const double err = std::fabs(c.values[i * 2048 + j] - want) / (1.0 + std::fabs(want));
    worst = std::max(worst, tl::gpu::test::NanAsInf(err));
    if (err > 1e-4) ++bad;
  }
  EXPECT_EQ(bad, 0u) << "worst relative error " << worst;
  std::printf("[ gemm_big ] 2048^3 f16->f32 (tensor cores, mma.sync): %.3f ms, %.2f TFLOP/s, worst sampled error %.3g\n", ms,
              2.0 * 2048.0 * 2048.0 * 2048.0 / (ms * 1e-3) / 1e12, worst);
}

}  // namespace

namespace {

// Interpreter-only (CI): int8 x int8 -> int32 through SMma (exact), and the
// lowering's choice of tensor cores or SIMT FMA per gemm, with its reason.
TEST(Interp, MmaI8AndStrategyChoice) {
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Named("gemm_i8").text), CudaOptions("gemm_i8"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(tl::gpu::Dump(*k).find("mma.s8"), std::string::npos) << tl::gpu::Dump(*k);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-128, 127);
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(200 * 150);
  t["B"].resize(130 * 150);
  for (double& v : t["A"]) v = d(rng);
  for (double& v : t["B"]) v = d(rng);
  t["C"].assign(200 * 130, 0);
  const std::vector<double> a = t["A"], b = t["B"];
  ASSERT_TRUE(tl::gpu::test::Interpret(*k, &t).ok());
  size_t bad = 0;
  for (int i = 0; i < 200; ++i) {
    for (int j = 0; j < 130; ++j) {
      double s = 0;
      for (int p = 0; p < 150; ++p) s += a[i * 150 + p] * b[j * 150 + p];
      if (t["C"][i * 130 + j] != s) ++bad;
    }
  }
  EXPECT_EQ(bad, 0u);

  auto notes = [](const tl::gpu::SimtKernel& s) {
    std::string n;
    for (const std::string& x : s.notes) n += x + "\n";
    return n;
  };
  // f32 without tf32: SIMT FMA, saying why; same kernel with tf32: mma.
  tl::StatusOr<tl::gpu::SimtKernel> f32 = tl::gpu::LowerToSimt(Parse(Named("gemm_f32").text), CudaOptions("gemm_f32"));
  ASSERT_TRUE(f32.ok());
  EXPECT_NE(notes(*f32).find("SIMT FMA: no mma.sync for f32 x f32 -> f32"), std::string::npos) << notes(*f32);
  EXPECT_EQ(tl::gpu::Dump(*f32).find("mma."), std::string::npos);
  tl::StatusOr<tl::gpu::SimtKernel> tf = tl::gpu::LowerToSimt(Parse(Named("gemm_tf32").text), CudaOptions("gemm_tf32"));
  ASSERT_TRUE(tf.ok());
  EXPECT_NE(notes(*tf).find("(mma.sync tf32)"), std::string::npos) << notes(*tf);
  // An f16 accumulator is a tensor-core gemm too.
  tl::StatusOr<tl::gpu::SimtKernel> acc16 =
      tl::gpu::LowerToSimt(Parse(Named("gemm_f16acc").text), CudaOptions("gemm_f16acc"));
  ASSERT_TRUE(acc16.ok()) << acc16.status().ToString();
  EXPECT_NE(notes(*acc16).find("(mma.sync f16)"), std::string::npos) << notes(*acc16);
  // Warp grids: 64x64 over 4 warps is 2 x 2 (each warp 32x32); a 48-row tile
  // fits as 1 x 4 (48 rows, 16 columns per warp); a 40-row tile fits no grid
  // (m-tiles are 16 rows): SIMT FMA.
  tl::StatusOr<tl::gpu::SimtKernel> sq = tl::gpu::LowerToSimt(Parse(Named("gemm_f16_nn").text), CudaOptions("sq"));
  ASSERT_TRUE(sq.ok());
  EXPECT_NE(notes(*sq).find("64x64 over 2x16x4 (v=2, 32 slots) (mma.sync f16)"), std::string::npos) << notes(*sq);
  EXPECT_NE(tl::gpu::Dump(*sq).find("tiles=2x4 R=16 C=2"), std::string::npos) << tl::gpu::Dump(*sq);
  for (const auto& [rows, want] : std::vector<std::pair<std::string, std::string>>{
           {"48", "48x64 over 4x8x4 (v=2, 24 slots) (mma.sync f16)"}, {"40", "40x64x32 over 128 threads does not fit"}}) {
    std::string text = Named("gemm_f16_nn").text;
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"fragment[64, 64]", "fragment[" + rows + ", 64]"}, {"shared[64, 32]", "shared[" + rows + ", 32]"},
             {"by * 64:64", "by * " + rows + ":" + rows}}) {
      for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
    }
    tl::StatusOr<tl::gpu::SimtKernel> odd = tl::gpu::LowerToSimt(Parse(text), CudaOptions("odd"));
    ASSERT_TRUE(odd.ok()) << odd.status().ToString();
    EXPECT_NE(notes(*odd).find(want), std::string::npos) << notes(*odd);
  }
  // Vectorized copies: 16-byte (8 x f16) global -> shared, with the tensors' bases
  // required to be 16-byte aligned (a launch guard in the bundle); here
  // synchronous (no cp.async pipeline: see Interp.AsyncPipelines).
  tl::gpu::GpuLowerOptions sync_copies = CudaOptions("gemm_big");
  sync_copies.async_copies = false;
  tl::StatusOr<tl::gpu::SimtKernel> big = tl::gpu::LowerToSimt(Parse(Named("gemm_big").text), sync_copies);
  ASSERT_TRUE(big.ok());
  EXPECT_NE(tl::gpu::Dump(*big).find("A_s[") , std::string::npos);
  EXPECT_NE(tl::gpu::Dump(*big).find("+: 8] = A["), std::string::npos) << tl::gpu::Dump(*big);
  EXPECT_EQ(big->param_align.at("A"), 16);
  EXPECT_EQ(big->param_align.at("B"), 16);
  EXPECT_EQ(big->param_align.count("C"), 0u);  // the accumulator is stored from registers
  // Other targets keep SIMT FMA (the default strategy never emits SMma).
  tl::StatusOr<tl::gpu::SimtKernel> simt = tl::gpu::LowerToSimt(Parse(Named("gemm_f16_nn").text), {99 * 1024});
  ASSERT_TRUE(simt.ok());
  EXPECT_EQ(tl::gpu::Dump(*simt).find("mma."), std::string::npos);
}

// Interpreter-only (CI): cp.async multi-stage pipelines. The interpreter
// lands a cp.async only when a wait completes its group, so a missing or
// early wait reads a stage that has not arrived (NaN at first).
TEST(Interp, AsyncPipelines) {
  auto notes = [](const tl::gpu::SimtKernel& s) {
    std::string n;
    for (const std::string& x : s.notes) n += x + "\n";
    return n;
  };
  // The Tile IR form (3 stages): S-deep buffers, a prologue of S - 1
  // iterations, wait / sync / issue k + S - 1 / commit, stage (k - start) % S.
  {
    tl::ir::Function f = Parse(Named("gemm_f16acc").text);
    ASSERT_TRUE(tl::passes::MakeRegionsExplicit(f).ok());
    const std::vector<tl::gpu::AsyncPipeline> p = tl::gpu::PipelineAsyncCopies(f, 8);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].stages, 3);
    EXPECT_EQ(p[0].buffers, (std::vector<std::string>{"A_s", "B_s"}));
    const std::string ir = tl::ir::Print(f);
    for (const char* want : {"alloc A_s: shared[3, 64, 32] f16", "copy A[by * 64:64, 32:32] -> A_s[1:1, 0:64, 0:32]",
                             "    hint tl_async_commit\n    for k in serial(0, ceildiv(150, 32)) {\n"
                             "      hint tl_async_wait 1\n      sync\n      if k + 2 < 5 {",
                             "copy B[(k + 2) * 32:32, bx * 64:64] -> B_s[truncmod(k + 2 - 0, 3):1, 0:32, 0:64]",
                             "gemm A_s[truncmod(k - 0, 3):1, 0:64, 0:32], B_s[truncmod(k - 0, 3):1, 0:32, 0:64] -> C_f",
                             "    hint tl_async_wait 0\n    sync\n"}) {
      EXPECT_NE(ir.find(want), std::string::npos) << want << "\n" << ir;
    }
  }
  // gemm_big (4096-style tiles, 2 stages): 16-byte cp.async, both operands.
  tl::StatusOr<tl::gpu::SimtKernel> big = tl::gpu::LowerToSimt(Parse(Named("gemm_big").text), CudaOptions("gemm_big"));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const std::string dump = tl::gpu::Dump(*big);
  EXPECT_NE(dump.find("cp.async.16 A_s["), std::string::npos) << dump;
  EXPECT_NE(dump.find("cp.async.16 B_s["), std::string::npos) << dump;
  EXPECT_NE(dump.find("cp.async.wait 0"), std::string::npos) << dump;
  EXPECT_NE(notes(*big).find("pipeline k: stages requested 2, applied 2 (cp.async into A_s B_s)"), std::string::npos)
      << notes(*big);
  EXPECT_EQ(big->param_align.at("A"), 16);
  // Four stages of 128x128x32 f16 tiles (18944 bytes each) do not fit 48 KiB: two do.
  std::string deep = Named("gemm_big").text;
  deep.replace(deep.find("stages=2"), 8, "stages=4");
  tl::gpu::GpuLowerOptions small = CudaOptions("deep", 48 * 1024);
  tl::StatusOr<tl::gpu::SimtKernel> fewer = tl::gpu::LowerToSimt(Parse(deep), small);
  ASSERT_TRUE(fewer.ok()) << fewer.status().ToString();
  EXPECT_NE(notes(*fewer).find("stages requested 4, applied 2"), std::string::npos) << notes(*fewer);
  EXPECT_NE(notes(*fewer).find("3 stages need 56832 bytes of shared memory, the target allows 49152"), std::string::npos)
      << notes(*fewer);
  EXPECT_EQ(fewer->shared_bytes, 2 * 18944);

  // The waits matter: gemm_f16acc with its in-loop wait removed reads stages
  // before they land, and the result is wrong.
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Named("gemm_f16acc").text), CudaOptions("gemm_f16acc"));
  ASSERT_TRUE(k.ok());
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::map<std::string, std::vector<double>> t;
  for (const char* n : {"A", "B"}) {
    t[n].resize(200 * 150);
    for (double& v : t[n]) v = static_cast<double>(static_cast<_Float16>(dist(rng)));
  }
  t["B"].resize(150 * 130);
  t["C"].assign(200 * 130, 0);
  const std::vector<double> a = t["A"], b = t["B"];
  auto worst = [&](const std::vector<double>& c) {
    double w = 0;
    for (int i = 0; i < 200; ++i) {
      for (int j = 0; j < 130; ++j) {
        double s = 0;
        for (int p = 0; p < 150; ++p) s += a[i * 150 + p] * b[p * 130 + j];
        const double e = std::fabs(c[i * 130 + j] - s) / (1 + std::fabs(s));
        w = std::isnan(e) ? INFINITY : std::max(w, e);
      }
    }
    return w;
  };
  std::map<std::string, std::vector<double>> t2 = t;
  ASSERT_TRUE(tl::gpu::test::Interpret(*k, &t).ok());
  EXPECT_LT(worst(t["C"]), 6e-4);
  for (tl::gpu::SStmt& s : k->body) {
    if (auto* loop = std::get_if<tl::gpu::SFor>(&s.node)) {
      std::erase_if(loop->body, [](const tl::gpu::SStmt& x) { return std::holds_alternative<tl::gpu::SAsyncWait>(x.node); });
    }
  }
  ASSERT_TRUE(tl::gpu::test::Interpret(*k, &t2).ok());
  EXPECT_GT(worst(t2["C"]), 1.0);
}

// Interpreter-only (CI): every conformance case with a pipelined loop (the
// frontend's golden Tile IR; stages 0 and 1 raised to 2 so every such loop is
// tried), lowered for CUDA with and without cp.async pipelines and run on the
// same random inputs: the results are identical (the pipeline reorders
// copies, never arithmetic).
TEST(Interp, PipelinesMatchSerialOnGoldens) {
  int pipelined = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TL_FRONTEND_GOLDEN_DIR)) {
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (entry.path().extension() != ".tir" || text.find(" in pipelined(") == std::string::npos) continue;
    for (const char* low : {"stages=0)", "stages=1)"}) {
      for (size_t at; (at = text.find(low)) != std::string::npos;) text.replace(at, 9, "stages=2)");
    }
    const tl::ir::Function f = Parse(text);
    tl::gpu::GpuLowerOptions o = CudaOptions(f.name, 227 * 1024);
    o.async_copies = false;
    tl::StatusOr<tl::gpu::SimtKernel> serial = tl::gpu::LowerToSimt(f, o);
    o.async_copies = true;
    tl::StatusOr<tl::gpu::SimtKernel> piped = tl::gpu::LowerToSimt(f, o);
    if (!f.symbols.empty() || !serial.ok()) continue;  // dynamic shapes, several kernels: not for the interpreter
    ASSERT_TRUE(piped.ok()) << entry.path() << ": " << piped.status().ToString();
    bool any = false;
    for (const std::string& n : piped->notes) any = any || n.find("(cp.async into") != std::string::npos;
    if (!any) continue;
    ++pipelined;
    std::mt19937 rng(16);
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
        if (!tl::ir::IsFloat(p.dtype)) x = std::fabs(std::floor(x * 7));  // small non-negative integers
        if (tl::ir::IsFloat(p.dtype) && tl::ir::BitWidth(p.dtype) == 16) x = static_cast<double>(static_cast<_Float16>(x));
      }
    }
    std::map<std::string, std::vector<double>> t2 = t;
    ASSERT_TRUE(tl::gpu::test::Interpret(*serial, &t).ok()) << entry.path();
    const tl::Status st = tl::gpu::test::Interpret(*piped, &t2);
    ASSERT_TRUE(st.ok()) << entry.path() << ": " << st.ToString();
    size_t differ = 0;
    for (const auto& [name, v] : t) {
      for (size_t i = 0; i < v.size(); ++i) {
        const double a = v[i], b = t2[name][i];
        if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++differ;
      }
    }
    EXPECT_EQ(differ, 0u) << entry.path();
  }
  std::printf("[ interp ] %d golden kernels pipelined, each identical to its serial lowering\n", pipelined);
  EXPECT_GE(pipelined, 20);  // GEMMs in all transposes and dtypes, epilogues, dequant, attention
}

// Interpreter-only (CI): bf16 operands (rounded like the device's
// cvt.rn.bf16.f32), f32 accumulation, trans_a.
TEST(Interp, GemmBf16) {
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Named("gemm_bf16_tn").text), {99 * 1024});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto bf16 = [](float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    x = (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&f, &x, 4);
    return static_cast<double>(f);
  };
  std::map<std::string, std::vector<double>> t;
  t["A"].assign(150 * 200, 0);
  t["B"].assign(150 * 130, 0);
  for (double& v : t["A"]) v = bf16(dist(rng));
  for (double& v : t["B"]) v = bf16(dist(rng));
  t["C"].assign(200 * 130, 0);
  const std::vector<double> a = t["A"], b = t["B"];
  ASSERT_TRUE(tl::gpu::test::Interpret(*k, &t).ok());
  double worst = 0;
  for (int i = 0; i < 200; ++i) {
    for (int j = 0; j < 130; ++j) {
      double s = 0;
      for (int p = 0; p < 150; ++p) s += a[p * 200 + i] * b[p * 130 + j];
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][i * 130 + j] - s) / (1 + std::fabs(s))));
    }
  }
  EXPECT_LT(worst, 1e-5);
  std::printf("[ interp gemm_bf16_tn ] worst relative error %.3g\n", worst);
}

// Interpreter-only (CI): thread counts that are not multiples of a warp, a
// 1-D replicated T.Parallel loop, absmax, a reduction along dim 0 (shared
// memory path) and a reverse cumsum of a fragment.
TEST(Interp, AwkwardShapes) {
  const std::string text = R"(tileir 1

func @awkward(X: tensor[37, 29] f32, M: tensor[37] f32, CS: tensor[8, 29] f32, R: tensor[37, 29] f32, Y: tensor[37, 29] f32) {
  kernel grid(ceildiv(37, 5)) threads(48) -> (bx) {
    alloc x: fragment[5, 29] f32
    alloc m: fragment[5] f32
    alloc c: fragment[29] f32
    alloc r: fragment[5, 29] f32
    copy X[bx * 5:5, 0:29] -> x
    reduce absmax x -> m dim=1 clear
    parallel (i) in (5) {
      if bx * 5 + i < 37 {
        M[bx * 5 + i] = m[i]
      }
    }
    reduce sum x -> c dim=0 clear
    copy c -> CS[bx, 0:29]
    cumsum x -> r dim=1 reverse
    copy r -> R[bx * 5:5, 0:29]
    parallel (i2, j2) in (5, 29) {
      x[i2, j2] = x[i2, j2] / m[i2]
    }
    copy x -> Y[bx * 5:5, 0:29]
  }
}
)";
  // Variant 1 as written: the dim-0 reduction and the cumsum keep x, c, r (and
  // so m) in shared memory. Variant 2: x stays in registers (48 threads: lane
  // groups that do not fill a warp), the cumsum works on a shared copy.
  std::string text2 = text;
  auto replace = [&](const std::string& a, const std::string& b) { text2.replace(text2.find(a), a.size(), b); };
  replace("    reduce sum x -> c dim=0 clear\n", "    fill c, 0.0:f32\n");
  replace("    cumsum x -> r dim=1 reverse\n", "    copy x -> r\n    cumsum r -> r dim=1 reverse\n");
  for (int vi = 0; vi < 2; ++vi) {
  const std::string& variant = vi ? text2 : text;
  const bool second = vi == 1;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(variant), {99 * 1024});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["X"].resize(37 * 29);
  for (double& v : t["X"]) v = static_cast<float>(dist(rng));
  t["M"].assign(37, 0);
  t["CS"].assign(8 * 29, 0);
  t["R"].assign(37 * 29, 0);
  t["Y"].assign(37 * 29, 0);
  const std::vector<double> x = t["X"];
  ASSERT_TRUE(tl::gpu::test::Interpret(*k, &t).ok());
  double worst = 0;
  auto check = [&](double got, double want) { worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(got - want) / (1 + std::fabs(want)))); };
  for (int r = 0; r < 37; ++r) {
    double m = 0, s = 0;
    for (int j = 0; j < 29; ++j) m = std::max(m, std::fabs(x[r * 29 + j]));
    check(t["M"][r], m);
    for (int j = 28; j >= 0; --j) check(t["R"][r * 29 + j], s += x[r * 29 + j]);
    for (int j = 0; j < 29; ++j) check(t["Y"][r * 29 + j], x[r * 29 + j] / m);
  }
  for (int b = 0; b < 8; ++b) {
    for (int j = 0; j < 29; ++j) {
      double s = 0;
      for (int r = b * 5; r < std::min(37, b * 5 + 5); ++r) s += x[r * 29 + j];
      check(t["CS"][b * 29 + j], second ? 0.0 : s);
    }
  }
  EXPECT_LT(worst, 1e-5);
  const std::string notes = Notes(*k);
  std::printf("%s[ interp awkward %d ] worst relative error %.3g\n", notes.c_str(), second ? 2 : 1, worst);
  if (second) {
    EXPECT_EQ(notes.find("fragment x kept"), std::string::npos) << notes;
  }
  }
}

}  // namespace
