// compiler.gpu.AmdMatrix.*: T.gemm on AMD matrix cores (SAmdMma: MFMA on CDNA
// wave64, WMMA on RDNA3 wave32) without AMD hardware. Whole kernels run
// through the SIMT interpreter, which executes each SAmdMma as a wavefront
// would: lanes gather operands with the lowering's index expressions, the
// independently written hardware model (amd_matrix_model.h, from AMD's ISA
// documents) places them, multiplies, and hands D back to the lanes' registers;
// the result, through the epilogue (T.Parallel over the accumulator, a row
// reduction over its 16-lane groups, copies to global), must equal a float64
// GEMM on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "lowering_test_util.h"
#include "amd_matrix_model.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/lowering/gpu/amd_matrix.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

using tl::gpu::AmdMatrixInstr;
using tl::gpu::GemmStrategy;
using tl::gpu::test::Notes;
using tl::gpu::test::Parse;

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

tl::gpu::GpuLowerOptions Amd(GemmStrategy g) {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 64 * 1024;
  o.gemm = g;
  o.warp_size = g == GemmStrategy::kWmma ? 32 : 64;
  return o;
}

double F16(double v) { return static_cast<double>(static_cast<_Float16>(static_cast<float>(v))); }
double Bf16(double v) {
  float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x = (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &x, 4);
  return f;
}

// The model itself: every operand element and accumulator register of every
// instruction is exactly one matrix element (WMMA operands: two lanes each).
TEST(AmdMatrix, HardwareModelIsABijection) {
  for (AmdMatrixInstr ins : {AmdMatrixInstr::kMfmaF16, AmdMatrixInstr::kMfmaBf16, AmdMatrixInstr::kMfmaI8K16,
                             AmdMatrixInstr::kMfmaI8K32, AmdMatrixInstr::kWmmaF16, AmdMatrixInstr::kWmmaBf16,
                             AmdMatrixInstr::kWmmaI8}) {
    const tl::gpu::AmdMatrixInstrInfo f = tl::gpu::Info(ins);
    std::set<std::pair<int, int>> a, b, d;
    for (int i = 0; i < 16; ++i) {
      for (int k = 0; k < f.k; ++k) {
        for (const auto& h : tl::gpu::test::HwA(ins, i, k)) {
          EXPECT_TRUE(h.lane < f.wave && h.index < f.elems) << f.builtin;
          EXPECT_TRUE(a.insert({h.lane, h.index}).second) << f.builtin;
        }
        for (const auto& h : tl::gpu::test::HwB(ins, k, i)) {
          EXPECT_TRUE(h.lane < f.wave && h.index < f.elems) << f.builtin;
          EXPECT_TRUE(b.insert({h.lane, h.index}).second) << f.builtin;
        }
      }
      for (int j = 0; j < 16; ++j) {
        const auto h = tl::gpu::test::HwD(ins, i, j);
        EXPECT_TRUE(h.lane < f.wave && h.index < f.regs) << f.builtin;
        EXPECT_TRUE(d.insert({h.lane, h.index}).second) << f.builtin;
      }
    }
    EXPECT_EQ(static_cast<int64_t>(a.size()), f.wave * f.elems) << f.builtin;
    EXPECT_EQ(static_cast<int64_t>(b.size()), f.wave * f.elems) << f.builtin;
    EXPECT_EQ(static_cast<int64_t>(d.size()), f.wave * f.regs) << f.builtin;
  }
}

// The accumulator layout is in the layout family and is the instruction's D:
// element (row, col) of tile (t, n) is register (t*P + p)*cs + n of thread
// w*W + l exactly when the model puts D[i][j] in lane l, register p.
TEST(AmdMatrix, AccumulatorLayoutIsTheInstructionsD) {
  for (int64_t threads : {64, 128, 256}) {
    for (bool wmma : {false, true}) {
      const int64_t W = wmma ? 32 : 64, P = wmma ? 8 : 4, H = W / 16, R = threads / 16;
      const int64_t m = P * R * 2, n = 48;
      ASSERT_TRUE(tl::gpu::AmdMatrixAccumulatorFits(m, n, threads, W));
      EXPECT_FALSE(tl::gpu::AmdMatrixAccumulatorFits(m + R, n, threads, W));
      EXPECT_FALSE(tl::gpu::AmdMatrixAccumulatorFits(m, n + 8, threads, W));
      const tl::gpu::FragmentLayout L = tl::gpu::AmdMatrixAccumulatorLayout(m, n, threads);
      const AmdMatrixInstr ins = wmma ? AmdMatrixInstr::kWmmaF16 : AmdMatrixInstr::kMfmaF16;
      for (int64_t w = 0; w < threads / W; ++w) {
        for (int64_t t = 0; t < m / (P * R); ++t) {
          for (int64_t nt = 0; nt < n / 16; ++nt) {
            for (int i = 0; i < 16; ++i) {
              for (int j = 0; j < 16; ++j) {
                const auto h = tl::gpu::test::HwD(ins, i, j);
                // The row the lowering assigns to hardware row i (amd_matrix.h).
                const int64_t row = wmma ? (t * 8 + i / 2) * R + w * 2 + i % 2 : (t * 4 + i % 4) * R + w * 4 + i / 4;
                const int64_t col = nt * 16 + j;
                EXPECT_EQ(L.Thread(row, col), w * W + h.lane);
                EXPECT_EQ(L.Slot(row, col), (t * P + h.index) * L.col_slots() + nt);
                EXPECT_EQ(row % R, w * H + h.lane / 16);
              }
            }
          }
        }
      }
    }
  }
}

struct Case {
  std::string text;
  GemmStrategy strategy;
  bool gfx94 = true;
};

// Runs a GEMM kernel C[200,130] (f32 or i32) = op(A) op(B), K = 150, through
// the interpreter and compares with float64.
void RunGemm(const std::string& text, GemmStrategy g, bool gfx94, bool ta, bool tb, const std::string& dt) {
  SCOPED_TRACE(text);
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(text), Amd(g));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string inst = g == GemmStrategy::kWmma ? "wmma." : "mfma.";
  ASSERT_NE(tl::gpu::Dump(*k).find(inst), std::string::npos) << Notes(*k) << tl::gpu::Dump(*k);
  std::mt19937 rng(static_cast<unsigned>(text.size()) + (gfx94 ? 1 : 0));
  std::uniform_real_distribution<double> dist(-1, 1);
  std::uniform_int_distribution<int> di(-128, 127);
  auto value = [&]() -> double {
    if (dt == "i8") return di(rng);
    return dt == "bf16" ? Bf16(dist(rng)) : F16(dist(rng));
  };
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(200 * 150);
  t["B"].resize(150 * 130);
  for (double& v : t["A"]) v = value();
  for (double& v : t["B"]) v = value();
  t["C"].assign(200 * 130, -7);
  const std::vector<double> a = t["A"], b = t["B"];
  tl::gpu::test::InterpretOptions io;
  io.mfma_gfx94 = gfx94;
  const tl::Status st = tl::gpu::test::Interpret(*k, &t, {}, io);
  ASSERT_TRUE(st.ok()) << st.ToString();
  double worst = 0;
  size_t bad = 0;
  for (int i = 0; i < 200; ++i) {
    for (int j = 0; j < 130; ++j) {
      double s = 0;
      for (int p = 0; p < 150; ++p) {
        s += (ta ? a[p * 200 + i] : a[i * 150 + p]) * (tb ? b[j * 150 + p] : b[p * 130 + j]);
      }
      const double got = t["C"][i * 130 + j];
      if (dt == "i8" && got != s) ++bad;
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(got - s) / (1 + std::fabs(s))));
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_LT(worst, 1e-5);
}

TEST(AmdMatrix, GemmsThroughTheWavefrontModel) {
  for (GemmStrategy g : {GemmStrategy::kMfma, GemmStrategy::kWmma}) {
    // Every transpose on MFMA; NN and TT (both operands each way) on WMMA.
    for (int tt = 0; tt < 4; ++tt) {
      if (g == GemmStrategy::kMfma || tt == 0 || tt == 3) RunGemm(GemmF16(tt & 2, tt & 1), g, true, tt & 2, tt & 1, "f16");
    }
    RunGemm(GemmF16(g == GemmStrategy::kMfma, g != GemmStrategy::kMfma, "bf16"), g, true, g == GemmStrategy::kMfma,
            g != GemmStrategy::kMfma, "bf16");
    // 64 threads: one wavefront (MFMA) / two (WMMA), more m-tiles per wavefront.
    RunGemm(Replace(GemmF16(false, false), "threads(128)", "threads(64)"), g, true, false, false, "f16");
  }
  // 256 threads: four wavefronts of 64 on a 64-row tile (MFMA; WMMA would need 128 rows).
  RunGemm(Replace(GemmF16(false, true), "threads(128)", "threads(256)"), GemmStrategy::kMfma, true, false, true, "f16");
}

TEST(AmdMatrix, I8Gemms) {
  std::string text;
  for (const TestKernel& k : TestKernels()) {
    if (k.name == "gemm_i8") text = k.text;
  }
  ASSERT_FALSE(text.empty());
  // gemm_i8 is C[200,130] = A[200,150] B[130,150]^T.
  RunGemm(text, GemmStrategy::kMfma, true, false, true, "i8");   // gfx94x: 16x16x32 i8
  RunGemm(text, GemmStrategy::kMfma, false, false, true, "i8");  // gfx90a: 2 x 16x16x16 i8
  RunGemm(text, GemmStrategy::kWmma, true, false, true, "i8");
  // The NN form (B k-major) as well.
  std::string nn = Replace(Replace(text, "B: tensor[130, 150] i8", "B: tensor[150, 130] i8"),
                           "alloc B_s: shared[64, 32] i8", "alloc B_s: shared[32, 64] i8");
  nn = Replace(Replace(nn, "copy B[bx * 64:64, k * 32:32] -> B_s", "copy B[k * 32:32, bx * 64:64] -> B_s"),
               "gemm A_s, B_s -> C_f trans_b", "gemm A_s, B_s -> C_f");
  RunGemm(nn, GemmStrategy::kMfma, false, false, false, "i8");
  RunGemm(nn, GemmStrategy::kWmma, true, false, false, "i8");
}

// The epilogue machinery on the matrix-core accumulator: T.Parallel with a
// bias and ReLU, a row reduction (16-lane groups), copies out.
TEST(AmdMatrix, EpilogueOnTheAccumulator) {
  const std::string text = R"(tileir 1

func @gemm_epi(A: tensor[128, 64] f16, B: tensor[64, 96] f16, Bias: tensor[96] f32, C: tensor[128, 96] f16, S: tensor[128] f32) {
  kernel grid(ceildiv(96, 48), ceildiv(128, 64)) threads(128) -> (bx, by) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 48] f16
    alloc C_f: fragment[64, 48] f32
    alloc s: fragment[64] f32
    fill C_f, 0.0:f32
    for k in serial(0, 2) {
      copy A[by * 64:64, k * 32:32] -> A_s
      copy B[k * 32:32, bx * 48:48] -> B_s
      gemm A_s, B_s -> C_f
    }
    parallel (i, j) in (64, 48) {
      C_f[i, j] = max(C_f[i, j] + Bias[bx * 48 + j], 0.0:f32)
    }
    reduce sum C_f -> s dim=1 clear
    parallel (i2) in (64) {
      atomic_add S[by * 64 + i2], s[i2]
    }
    copy C_f -> C[by * 64:64, bx * 48:48]
  }
}
)";
  for (GemmStrategy g : {GemmStrategy::kMfma, GemmStrategy::kWmma}) {
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(text), Amd(g));
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(tl::gpu::Dump(*k).find(g == GemmStrategy::kWmma ? "wmma.f16" : "mfma.f16"), std::string::npos)
        << Notes(*k);
    EXPECT_EQ(Notes(*k).find("kept in shared memory"), std::string::npos) << Notes(*k);
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> dist(-1, 1);
    std::map<std::string, std::vector<double>> t;
    t["A"].resize(128 * 64);
    t["B"].resize(64 * 96);
    t["Bias"].resize(96);
    for (double& v : t["A"]) v = F16(dist(rng));
    for (double& v : t["B"]) v = F16(dist(rng));
    for (double& v : t["Bias"]) v = static_cast<float>(dist(rng));
    t["C"].assign(128 * 96, 0);
    t["S"].assign(128, 0);
    const auto a = t["A"], b = t["B"], bias = t["Bias"];
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << st.ToString();
    double worst = 0;
    for (int i = 0; i < 128; ++i) {
      double rs = 0;
      for (int j = 0; j < 96; ++j) {
        double s = 0;
        for (int p = 0; p < 64; ++p) s += a[i * 64 + p] * b[p * 96 + j];
        s = std::max(static_cast<double>(static_cast<float>(s + bias[j])), 0.0);
        rs += s;
        worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][i * 96 + j] - s) / (1 + std::fabs(s)) / 1e-3));  // f16 output
      }
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["S"][i] - rs) / (1 + std::fabs(rs)) / 1e-5));
    }
    EXPECT_LT(worst, 1.0) << (g == GemmStrategy::kWmma ? "wmma" : "mfma");
  }
}

// Which gemms go to matrix cores, and the reason when not.
TEST(AmdMatrix, StrategyChoiceAndReasons) {
  std::string f32;
  for (const TestKernel& k : TestKernels()) {
    if (k.name == "gemm_f32") f32 = k.text;
  }
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(f32), Amd(GemmStrategy::kMfma));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("SIMT FMA: no mfma for f32 x f32 -> f32"), std::string::npos) << Notes(*k);
  EXPECT_EQ(tl::gpu::Dump(*k).find("mfma."), std::string::npos);
  // 256 threads over a 64-row tile: WMMA needs M a multiple of 128.
  k = tl::gpu::LowerToSimt(Parse(Replace(GemmF16(false, false), "threads(128)", "threads(256)")), Amd(GemmStrategy::kWmma));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("64x64x32 over 256 threads does not fit wmma (threads a multiple of 32, M of 128, N of 16, K of 16)"),
            std::string::npos)
      << Notes(*k);
  EXPECT_EQ(tl::gpu::Dump(*k).find("wmma."), std::string::npos);
  // 96 threads are not whole wavefronts of 64.
  k = tl::gpu::LowerToSimt(Parse(Replace(GemmF16(false, false), "threads(128)", "threads(96)")), Amd(GemmStrategy::kMfma));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("does not fit mfma"), std::string::npos) << Notes(*k);
  // The strategy must match the wavefront.
  tl::gpu::GpuLowerOptions bad = Amd(GemmStrategy::kMfma);
  bad.warp_size = 32;
  tl::StatusOr<tl::gpu::SimtKernel> e = tl::gpu::LowerToSimt(Parse(GemmF16(false, false)), bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("MFMA GEMMs need 64-lane wavefronts, not 32"), std::string::npos)
      << e.status().ToString();
  // f16 gemm notes name the instruction.
  k = tl::gpu::LowerToSimt(Parse(GemmF16(false, false)), Amd(GemmStrategy::kMfma));
  ASSERT_TRUE(k.ok());
  EXPECT_NE(Notes(*k).find("64x64 over 8x16 (v=1, 32 slots) (mfma f16)"), std::string::npos) << Notes(*k);
}

}  // namespace
