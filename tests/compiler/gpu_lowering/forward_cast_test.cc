// compiler.gpu ForwardCast.*: ForwardCastIntoWgmmaA (forward_cast.cc). A
// two-GEMM tile program (S = Q K^T into an f32 fragment, P = cast of S, O = P V
// with P as wgmma's register operand A, FlashAttention's shape without the
// softmax) lowered for sm_90a: where the cast fragment has no other use the
// copy disappears and the wgmma packs the f32 slots; every variant that makes
// forwarding wrong (the source written after the copy, the cast read again, a
// partial copy) keeps the copy. Each variant runs in the SIMT interpreter
// against float64 on random inputs, so a forward that changed the meaning
// fails on numbers, not only on the note.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

enum class Variant {
  kPlain,           // forwarded
  kSourceWritten,   // S scaled by 2 between the copy and the gemm: P must keep the old S
  kCastReadAgain,   // P also stored to global memory: P's registers stay
  kSelectCopy,      // P = S only in rows < 32, else 1: not a plain cast copy
};

constexpr int64_t kM = 64, kN = 64, kD = 32;  // one warpgroup: S [64, 64], O [64, 32]

std::string Program(Variant v) {
  std::string t = "tileir 1\n\nfunc @two_gemm(Q: tensor[64, 32] bf16, K: tensor[64, 32] bf16, V: tensor[64, 32] bf16, "
                  "O: tensor[64, 32] f32, P_out: tensor[64, 64] bf16) {\n"
                  "  kernel grid(1) threads(128) -> (bx) {\n"
                  "    alloc Q_s: shared[64, 32] bf16\n"
                  "    alloc K_s: shared[64, 32] bf16\n"
                  "    alloc V_s: shared[64, 32] bf16\n"
                  "    alloc S: fragment[64, 64] f32\n"
                  "    alloc P: fragment[64, 64] bf16\n"
                  "    alloc O_f: fragment[64, 32] f32\n"
                  "    copy Q[0:64, 0:32] -> Q_s\n"
                  "    copy K[0:64, 0:32] -> K_s\n"
                  "    copy V[0:64, 0:32] -> V_s\n"
                  "    fill S, 0.0:f32\n"
                  "    fill O_f, 0.0:f32\n"
                  "    gemm Q_s, K_s -> S trans_b\n";
  if (v == Variant::kSelectCopy) {
    t += "    parallel (i, j) in (64, 64) {\n"
         "      P[i, j] = select(i < 32, cast<bf16>(S[i, j]), 1.0:bf16)\n"
         "    }\n";
  } else {
    t += "    copy S -> P\n";
  }
  if (v == Variant::kSourceWritten) t += "    parallel (i2, j2) in (64, 64) {\n      S[i2, j2] = S[i2, j2] * 2.0:f32\n    }\n";
  t += "    gemm P, V_s -> O_f\n";
  if (v == Variant::kCastReadAgain) t += "    copy P -> P_out[0:64, 0:64]\n";
  if (v == Variant::kSourceWritten) {
    // S's new values reach memory (P_out), so its writes are live.
    t += "    parallel (i3, j3) in (64, 64) {\n      P_out[i3, j3] = cast<bf16>(S[i3, j3])\n    }\n";
  }
  t += "    copy O_f -> O[0:64, 0:32]\n  }\n}\n";
  return t;
}

tl::gpu::GpuLowerOptions Sm90() {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 227 * 1024;
  o.symbol_params = true;
  o.gemm = tl::gpu::GemmStrategy::kWgmma;
  o.vector_copies = true;
  o.async_copies = true;
  return o;
}

std::string Notes(const tl::gpu::SimtKernel& k) {
  std::string n;
  for (const std::string& x : k.notes) n += x + "\n";
  return n;
}

bool HasBuffer(const tl::gpu::SimtKernel& k, const std::string& name) {
  for (const tl::gpu::SimtBuffer& b : k.buffers) {
    if (b.name == name) return true;
  }
  return false;
}

// Lowers, checks whether P was forwarded, runs the interpreter and compares O
// (and P_out) with float64.
void Check(Variant v, bool forwarded) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v));
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << Program(v);
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = Notes(*k);
  EXPECT_EQ(notes.find("register operand A packed from the f32 accumulator") != std::string::npos, forwarded) << notes;
  EXPECT_EQ(HasBuffer(*k, "P"), !forwarded) << notes;
  tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->source.find("tl_pack_bf16x2(S[") != std::string::npos, forwarded);
  EXPECT_EQ(src->source.find("tl_pack_bf16x2(P[") != std::string::npos, !forwarded);

  std::mt19937 rng(1234 + static_cast<int>(v));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  for (const char* x : {"Q", "K", "V"}) {
    t[x].resize(kM * kD);
    for (double& e : t[x]) e = tl::gpu::test::RoundToBf16(d(rng));
  }
  t["O"].assign(kM * kD, -7);
  t["P_out"].assign(kM * kN, -7);
  const std::vector<double> q = t["Q"], kk = t["K"], vv = t["V"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  double worst = 0;
  for (int64_t i = 0; i < kM; ++i) {
    std::vector<double> s(kN), p(kN);
    for (int64_t j = 0; j < kN; ++j) {
      for (int64_t x = 0; x < kD; ++x) s[j] += q[i * kD + x] * kk[j * kD + x];
      p[j] = (v == Variant::kSelectCopy && i >= 32) ? 1.0 : tl::gpu::test::RoundToBf16(s[j]);  // P rounds S once
      if (v == Variant::kCastReadAgain) {
        EXPECT_EQ(t["P_out"][i * kN + j], p[j]) << i << ", " << j;
      }
      if (v == Variant::kSourceWritten) {  // S scaled after the copy: P kept the unscaled scores
        EXPECT_NEAR(t["P_out"][i * kN + j], tl::gpu::test::RoundToBf16(2 * s[j]), 1e-2 * (1 + std::fabs(s[j]))) << i << ", " << j;
      }
    }
    for (int64_t x = 0; x < kD; ++x) {
      double o = 0;
      for (int64_t j = 0; j < kN; ++j) o += p[j] * vv[j * kD + x];
      const double e = std::fabs(t["O"][i * kD + x] - o) / (1 + std::fabs(o));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);  // NaN (a register never written) fails
    }
  }
  EXPECT_LT(worst, 2e-5) << "variant " << static_cast<int>(v);
}

TEST(ForwardCast, CastCopyFeedingOnlyTheWgmmaIsForwarded) { Check(Variant::kPlain, true); }
TEST(ForwardCast, SourceWrittenBeforeTheWgmmaKeepsTheCopy) { Check(Variant::kSourceWritten, false); }
TEST(ForwardCast, CastReadElsewhereKeepsTheCopy) { Check(Variant::kCastReadAgain, false); }
TEST(ForwardCast, SelectCopyKeepsTheCopy) { Check(Variant::kSelectCopy, false); }

// A copy that cannot be forwarded but whose fragment only the wgmma reads keeps
// f32 values: the copy stores S unrounded (no per-element cvt and shift back),
// the wgmma's pack rounds (the numbers of Check above are the same); a copy
// read elsewhere keeps its 16-bit fragment.
std::string Dtype(const tl::gpu::SimtKernel& k, const std::string& name) {
  for (const tl::gpu::SimtBuffer& b : k.buffers) {
    if (b.name == name) return tl::ir::DTypeName(b.dtype);
  }
  return "none";
}

TEST(ForwardCast, CopyOnlyTheWgmmaReadsKeepsF32) {
  for (Variant v : {Variant::kSourceWritten, Variant::kCastReadAgain}) {
    tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const bool only_wgmma = v == Variant::kSourceWritten;
    const std::string notes = Notes(*k);
    EXPECT_EQ(notes.find("register operand A kept in f32 (the cast copy stores the value unrounded, the wgmma's pack "
                         "rounds): P") != std::string::npos,
              only_wgmma)
        << notes;
    EXPECT_EQ(Dtype(*k, "P"), only_wgmma ? "f32" : "bf16");
    tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    // The store into P: a plain register move where only the wgmma reads P, else rounded to bf16.
    const size_t at = src->source.find("  P[");
    ASSERT_NE(at, std::string::npos) << src->source;
    const std::string line = src->source.substr(at, src->source.find('\n', at) - at);
    EXPECT_EQ(line.find("tl_rbf") == std::string::npos, only_wgmma) << line;
    EXPECT_NE(line.find(only_wgmma ? "] = S[" : "] = tl_rbf("), std::string::npos) << line;
  }
}

// The coverage rule on the SIMT IR itself: the plain program lowered without
// forwarding keeps its copy nest; the pass forwards it, but not once the nest
// is cut to half its trips (slots the wgmma reads would keep stale values).
TEST(ForwardCast, CopyNestCoveringHalfTheSlotsIsKept) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(Variant::kPlain));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  tl::gpu::GpuLowerOptions o = Sm90();
  o.forward_cast = false;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), o);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_TRUE(HasBuffer(*k, "P"));
  tl::gpu::SimtKernel whole = *k;
  EXPECT_NE(tl::gpu::ForwardCastIntoWgmmaA(&whole).find("P -> S"), std::string::npos) << tl::gpu::Dump(*k);
  EXPECT_FALSE(HasBuffer(whole, "P"));
  // The copy nest: the top-level loop whose body stores into P; halve its outermost trip count.
  bool cut = false;
  for (tl::gpu::SStmt& s : k->body) {
    auto* f = std::get_if<tl::gpu::SFor>(&s.node);
    if (!f || cut) continue;
    tl::gpu::SimtKernel one;
    one.body = {s};
    const std::string d = tl::gpu::Dump(one);
    if (d.find("P[") == std::string::npos || d.find("wgmma") != std::string::npos) continue;
    const std::optional<int64_t> stop = tl::ir::FoldInt(f->stop);
    ASSERT_TRUE(stop && *stop >= 2) << d;
    f->stop = tl::ir::MakeInt(*stop / 2);
    cut = true;
  }
  ASSERT_TRUE(cut) << tl::gpu::Dump(*k);
  EXPECT_EQ(tl::gpu::ForwardCastIntoWgmmaA(&*k), "") << tl::gpu::Dump(*k);
  EXPECT_TRUE(HasBuffer(*k, "P"));
}

}  // namespace
