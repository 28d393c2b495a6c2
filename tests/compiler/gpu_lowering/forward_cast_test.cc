// compiler.gpu ForwardCast.*: ForwardCastIntoWgmmaA (forward_cast.cc). A
// two-GEMM tile program (S = Q K^T into an f32 fragment, P = cast of S, O = P V
// with P as wgmma's register operand A, FlashAttention's shape without the
// softmax) lowered for sm_90a: where the cast fragment has no other use the
// copy disappears and the wgmma packs the f32 slots; every variant that makes
// forwarding wrong (the source written after the copy, the cast read again, a
// partial copy) keeps the copy -- packed (bf16x2/f16x2 registers written by one
// pair loop) where only the wgmma reads it. Each variant runs in the SIMT
// interpreter against float64 on random inputs (bf16 and f16), so a forward
// that changed the meaning fails on numbers, not only on the note.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

using tl::gpu::test::Notes;
using tl::gpu::test::Sm90;

enum class Variant {
  kPlain,           // forwarded
  kSourceWritten,   // S scaled by 2 between the copy and the gemm: P must keep the old S
  kCastReadAgain,   // P also stored to global memory: P's registers stay
  kSelectCopy,      // P = S only in rows < 32, else 1: not a plain cast copy
};

constexpr int64_t kM = 64, kN = 64, kD = 32;  // one warpgroup: S [64, 64], O [64, 32]

// `f16`: the same program with f16 operands and P.
std::string Program(Variant v, bool f16 = false) {
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
  for (size_t at = 0; f16 && (at = t.find("bf16", at)) != std::string::npos;) t.replace(at, 4, "f16");
  return t;
}

bool HasBuffer(const tl::gpu::SimtKernel& k, const std::string& name) {
  for (const tl::gpu::SimtBuffer& b : k.buffers) {
    if (b.name == name) return true;
  }
  return false;
}

bool Packed(const tl::gpu::SimtKernel& k, const std::string& name) {
  for (const tl::gpu::SimtBuffer& b : k.buffers) {
    if (b.name == name) return b.packed_pairs;
  }
  return false;
}

// Lowers, checks whether P was forwarded (or kept packed: the source is
// written before the wgmma, only the wgmma reads P), runs the interpreter and
// compares O (and P_out) with float64.
void Check(Variant v, bool forwarded, bool f16 = false) {
  const bool packed = v == Variant::kSourceWritten;
  const std::string pk = f16 ? "tl_pack_f16x2(" : "tl_pack_bf16x2(";
  auto round = [&](double x) { return f16 ? tl::gpu::test::RoundToF16(x) : tl::gpu::test::RoundToBf16(x); };
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v, f16));
  ASSERT_TRUE(m.ok()) << m.status().ToString() << "\n" << Program(v, f16);
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = Notes(*k);
  EXPECT_EQ(notes.find("register operand A packed from the f32 accumulator") != std::string::npos, forwarded) << notes;
  EXPECT_EQ(HasBuffer(*k, "P"), !forwarded) << notes;
  EXPECT_EQ(Packed(*k, "P"), packed) << notes;
  tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(src->source.find(pk + "S[") != std::string::npos, forwarded);
  // The wgmma packs P's slots where P is a 16-bit fragment; a packed P's registers go in as they are.
  EXPECT_EQ(src->source.find(pk + "P[") != std::string::npos, !forwarded && !packed);
  EXPECT_EQ(src->source.find("unsigned P[16];") != std::string::npos, packed);

  std::mt19937 rng(1234 + static_cast<int>(v));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  for (const char* x : {"Q", "K", "V"}) {
    t[x].resize(kM * kD);
    for (double& e : t[x]) e = round(d(rng));
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
      p[j] = (v == Variant::kSelectCopy && i >= 32) ? 1.0 : round(s[j]);  // P rounds S once
      if (v == Variant::kCastReadAgain) {
        // bf16: S's f32 sum rounds to the same bf16 as the float64 one; f16's 3 more mantissa bits can
        // see the difference (one f16 ulp).
        if (f16) {
          EXPECT_NEAR(t["P_out"][i * kN + j], p[j], std::ldexp(std::fabs(p[j]), -10)) << i << ", " << j;
        } else {
          EXPECT_EQ(t["P_out"][i * kN + j], p[j]) << i << ", " << j;
        }
      }
      if (v == Variant::kSourceWritten) {  // S scaled after the copy: P kept the unscaled scores
        EXPECT_NEAR(t["P_out"][i * kN + j], round(2 * s[j]), 1e-2 * (1 + std::fabs(s[j]))) << i << ", " << j;
      }
    }
    for (int64_t x = 0; x < kD; ++x) {
      double o = 0;
      for (int64_t j = 0; j < kN; ++j) o += p[j] * vv[j * kD + x];
      const double e = std::fabs(t["O"][i * kD + x] - o) / (1 + std::fabs(o));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);  // NaN (a register never written) fails
    }
  }
  // f16: a P that rounds to the neighbouring f16 (see above) moves O by up to an f16 ulp of P times V.
  EXPECT_LT(worst, f16 ? 1e-3 : 2e-5) << "variant " << static_cast<int>(v);
}

TEST(ForwardCast, CastCopyFeedingOnlyTheWgmmaIsForwarded) { Check(Variant::kPlain, true); }
TEST(ForwardCast, SourceWrittenBeforeTheWgmmaKeepsTheCopy) { Check(Variant::kSourceWritten, false); }
TEST(ForwardCast, CastReadElsewhereKeepsTheCopy) { Check(Variant::kCastReadAgain, false); }
TEST(ForwardCast, SelectCopyKeepsTheCopy) { Check(Variant::kSelectCopy, false); }
TEST(ForwardCast, F16) {
  for (Variant v : {Variant::kPlain, Variant::kSourceWritten, Variant::kCastReadAgain}) {
    SCOPED_TRACE(static_cast<int>(v));
    Check(v, v == Variant::kPlain, true);
  }
}

// A copy that cannot be forwarded but whose fragment only the wgmma reads is
// kept packed: P becomes 16 bf16x2 registers (half of S's 32 f32), written by
// one flat loop of pair stores (one cvt.rn.bf16x2.f32 each) and read by the
// wgmma as they are (the numbers of Check above are the same); a copy read
// elsewhere keeps its 16-bit fragment and its rounding store.
std::string Dtype(const tl::gpu::SimtKernel& k, const std::string& name) {
  for (const tl::gpu::SimtBuffer& b : k.buffers) {
    if (b.name == name) return tl::ir::DTypeName(b.dtype);
  }
  return "none";
}

TEST(ForwardCast, CopyOnlyTheWgmmaReadsKeepsPacked) {
  for (Variant v : {Variant::kSourceWritten, Variant::kCastReadAgain}) {
    tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const bool only_wgmma = v == Variant::kSourceWritten;
    const std::string notes = Notes(*k);
    EXPECT_EQ(notes.find("wgmma register operand A kept packed (bf16x2/f16x2 registers, half the f32 fragment's; the "
                         "cast copy is one cvt.rn per slot pair): P") != std::string::npos,
              only_wgmma)
        << notes;
    EXPECT_EQ(notes.find("kept in f32"), std::string::npos) << notes;
    EXPECT_EQ(Dtype(*k, "P"), "bf16");
    EXPECT_EQ(Packed(*k, "P"), only_wgmma);
    const std::string dump = tl::gpu::Dump(*k);
    EXPECT_EQ(dump.find("buffer P: registers[32] bf16 packed bf16x2 (16 registers)") != std::string::npos, only_wgmma)
        << dump;
    EXPECT_EQ(dump.find("for tl_pj in unroll(0, 16, 1) {\n") != std::string::npos, only_wgmma) << dump;
    EXPECT_EQ(dump.find("P[tl_pj] = pack2(S[") != std::string::npos, only_wgmma) << dump;
    tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    // The store into P: one pair store per register where only the wgmma reads P, else rounded to bf16.
    const size_t at = s.find("  P[");
    ASSERT_NE(at, std::string::npos) << s;
    const std::string line = s.substr(at, s.find('\n', at) - at);
    EXPECT_NE(line.find(only_wgmma ? "P[tl_pj] = tl_pack_bf16x2((float)(S[" : "] = tl_rbf("), std::string::npos) << line;
    EXPECT_EQ(s.find("unsigned P[16];") != std::string::npos, only_wgmma);
    // The wgmma takes P's registers without a pack: register r of m-tile 0, k-step 0 is slots (0, 1), ...
    EXPECT_EQ(s.find("unsigned tl_ra_0_0[4] = {P[0], P[") != std::string::npos, only_wgmma) << s;
    EXPECT_EQ(s.find("tl_pack_bf16x2(P[") == std::string::npos, only_wgmma);
  }
}

// The pairing condition on the SIMT IR itself: the kSourceWritten program
// lowered without the pass, its wgmma's registers each taking (2j + 1, 2j)
// instead of (2j, 2j + 1) (the halves swapped: a register that is not a slot
// pair of the packed layout), keeps P unpacked in f32 with the wgmma's pack;
// the interpreter gives the same bits before and after the pass. With the
// pairs in order the same kernel is packed, again with the same bits.
TEST(ForwardCast, UnpairedRegistersKeepF32) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(Variant::kSourceWritten));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  tl::gpu::GpuLowerOptions o = Sm90();
  o.forward_cast = false;
  tl::StatusOr<tl::gpu::SimtKernel> base = tl::gpu::LowerToSimt(m->functions.at(0), o);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  for (bool swap : {true, false}) {
    SCOPED_TRACE(swap ? "halves swapped" : "pairs in order");
    tl::gpu::SimtKernel k = *base;
    int wgmmas = 0;
    std::function<void(tl::gpu::SBlock&)> walk = [&](tl::gpu::SBlock& b) {
      for (tl::gpu::SStmt& s : b) {
        if (auto* f = std::get_if<tl::gpu::SFor>(&s.node)) walk(f->body);
        if (auto* c = std::get_if<tl::gpu::SIf>(&s.node)) walk(c->then_body), walk(c->else_body);
        auto* w = std::get_if<tl::gpu::SWgmma>(&s.node);
        if (!w || w->a_frag != "P") continue;
        ++wgmmas;
        for (size_t x = 0; swap && x + 1 < w->a_slots.size(); x += 2) std::swap(w->a_slots[x], w->a_slots[x + 1]);
      }
    };
    walk(k.body);
    ASSERT_EQ(wgmmas, 1) << tl::gpu::Dump(k);
    tl::gpu::SimtKernel after = k;
    const std::string note = tl::gpu::ForwardCastIntoWgmmaA(&after);
    EXPECT_EQ(note.find("kept in f32") != std::string::npos, swap) << note;
    EXPECT_EQ(note.find("kept packed") != std::string::npos, !swap) << note;
    EXPECT_EQ(Dtype(after, "P"), swap ? "f32" : "bf16");
    EXPECT_EQ(Packed(after, "P"), !swap);
    tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(after);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_EQ(src->source.find("tl_pack_bf16x2(P[") != std::string::npos, swap);
    std::mt19937 rng(77);
    std::uniform_real_distribution<double> d(-1, 1);
    std::map<std::string, std::vector<double>> t0;
    for (const char* x : {"Q", "K", "V"}) {
      t0[x].resize(kM * kD);
      for (double& e : t0[x]) e = tl::gpu::test::RoundToBf16(d(rng));
    }
    t0["O"].assign(kM * kD, -7);
    t0["P_out"].assign(kM * kN, -7);
    std::map<std::string, std::vector<double>> t1 = t0;
    ASSERT_TRUE(tl::gpu::test::Interpret(k, &t0).ok());
    const tl::Status st = tl::gpu::test::Interpret(after, &t1);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (size_t i = 0; i < t0["O"].size(); ++i) ASSERT_EQ(t0["O"][i], t1["O"][i]) << i;
    EXPECT_NE(t0["O"][0], -7);
  }
}

// A packed buffer is read only by register-A wgmmas whose registers are slot
// pairs: the printer rejects a wgmma taking a register across two pairs.
TEST(ForwardCast, PrinterRejectsUnpairedReadOfPackedFragment) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(Variant::kSourceWritten));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_TRUE(Packed(*k, "P"));
  std::function<void(tl::gpu::SBlock&)> walk = [&](tl::gpu::SBlock& b) {
    for (tl::gpu::SStmt& s : b) {
      if (auto* f = std::get_if<tl::gpu::SFor>(&s.node)) walk(f->body);
      if (auto* c = std::get_if<tl::gpu::SIf>(&s.node)) walk(c->then_body), walk(c->else_body);
      if (auto* w = std::get_if<tl::gpu::SWgmma>(&s.node); w && w->a_frag == "P") std::swap(w->a_slots[0], w->a_slots[1]);
    }
  };
  walk(k->body);
  tl::StatusOr<tl::codegen::cuda::CudaSource> src = tl::codegen::cuda::PrintCuda(*k);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().ToString().find("wgmma register operand A P"), std::string::npos) << src.status().ToString();
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
