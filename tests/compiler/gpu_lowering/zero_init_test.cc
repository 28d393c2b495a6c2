// compiler.gpu ZeroInit.*: ZeroInitWgmmaAccumulators (zero_init.cc). A loop of
// k-steps that clears its accumulator and runs one wgmma into it (the shape of
// FlashAttention's T.clear(acc_s); T.gemm(Q_s, K_s, acc_s)), lowered for
// sm_90a and run in the SIMT interpreter against float64 on random inputs:
// where the fill is a plain zero fill right before the wgmma it goes away and
// the first k-step runs with scale-d = 0; a non-zero fill or a read of the
// accumulator between fill and wgmma keeps the fill. Registers start as NaN in
// the interpreter and the loop reuses the accumulator, so a dropped fill
// without scale-d = 0 gives NaN or the previous step's sums, not the answer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

enum class Variant {
  kZeroFill,     // fill S, 0 right before the gemm: scale-d = 0
  kOneFill,      // fill S, 1: S = 1 + Q K^T, the fill stays
  kReadBetween,  // S read (into T_out) between the fill and the gemm: the fill stays
};

// Y[s] = sum over k-steps of (Q_k K_k^T) for 3 steps, each a fresh S (+1 with kOneFill).
std::string Program(Variant v) {
  std::string t = "tileir 1\n\nfunc @steps(Q: tensor[3, 64, 32] bf16, K: tensor[3, 64, 32] bf16, Y: tensor[64, 64] f32, "
                  "T_out: tensor[64, 64] f32) {\n"
                  "  kernel grid(1) threads(128) -> (bx) {\n"
                  "    alloc Q_s: shared[64, 32] bf16\n"
                  "    alloc K_s: shared[64, 32] bf16\n"
                  "    alloc S: fragment[64, 64] f32\n"
                  "    alloc Y_f: fragment[64, 64] f32\n"
                  "    fill Y_f, 0.0:f32\n"
                  "    for s in serial(0, 3) {\n"
                  "      copy Q[s, 0:64, 0:32] -> Q_s\n"
                  "      copy K[s, 0:64, 0:32] -> K_s\n";
  t += v == Variant::kOneFill ? "      fill S, 1.0:f32\n" : "      fill S, 0.0:f32\n";
  if (v == Variant::kReadBetween) t += "      copy S -> T_out[0:64, 0:64]\n";
  t += "      gemm Q_s, K_s -> S trans_b\n"
       "      parallel (i, j) in (64, 64) {\n"
       "        Y_f[i, j] = Y_f[i, j] + S[i, j]\n"
       "      }\n"
       "    }\n"
       "    copy Y_f -> Y[0:64, 0:64]\n  }\n}\n";
  return t;
}

void Check(Variant v, bool zeroed) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v));
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << Program(v);
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), tl::gpu::test::Sm90());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = tl::gpu::test::Notes(*k);
  const std::string dump = tl::gpu::Dump(*k);
  EXPECT_EQ(notes.find("cleared by the first k-step's scale-d = 0 (the fill removed): S") != std::string::npos, zeroed) << notes;
  EXPECT_EQ(dump.find("zero_init") != std::string::npos, zeroed) << dump;
  tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->source.find("\"r\"(0)") != std::string::npos, zeroed);

  std::mt19937 rng(77 + static_cast<int>(v));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  for (const char* x : {"Q", "K"}) {
    t[x].resize(3 * 64 * 32);
    for (double& e : t[x]) e = tl::gpu::test::RoundToBf16(d(rng));
  }
  t["Y"].assign(64 * 64, -7);
  t["T_out"].assign(64 * 64, -7);
  const std::vector<double> q = t["Q"], kk = t["K"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  double worst = 0;
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 64; ++j) {
      double y = 0;
      for (int s = 0; s < 3; ++s) {
        y += v == Variant::kOneFill ? 1.0 : 0.0;
        for (int x = 0; x < 32; ++x) y += q[(s * 64 + i) * 32 + x] * kk[(s * 64 + j) * 32 + x];
      }
      const double e = std::fabs(t["Y"][i * 64 + j] - y) / (1 + std::fabs(y));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);  // NaN (a register never written) fails
      if (v == Variant::kReadBetween) {
        EXPECT_EQ(t["T_out"][i * 64 + j], 0.0) << i << ", " << j;  // the last step's fill, read before its gemm
      }
    }
  }
  EXPECT_LT(worst, 2e-5) << "variant " << static_cast<int>(v);
}

TEST(ZeroInit, ZeroFillBeforeTheWgmmaBecomesScaleDZero) { Check(Variant::kZeroFill, true); }
TEST(ZeroInit, NonZeroFillStays) { Check(Variant::kOneFill, false); }
TEST(ZeroInit, AccumulatorReadBeforeTheWgmmaKeepsTheFill) { Check(Variant::kReadBetween, false); }

}  // namespace
