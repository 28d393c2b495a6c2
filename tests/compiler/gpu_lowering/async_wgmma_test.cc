// compiler.gpu AsyncWgmma.*: T.gemm(..., wg_wait=-1) and T.wait_wgmma(n)
// (Tile IR `gemm ... wg_wait=-1`, `hint wait_wgmma N`) on the sm_90a wgmma
// lowering: the gemm's group is committed and left in flight, a later
// wgmma.wait_group N retires the oldest groups. The program is FlashAttention-3's
// overlap in miniature: S2 = Q K2^T and O += P V are in flight together,
// `wait_wgmma 1` retires S2 (groups retire in order), S2's softmax-like scaling
// and cast run while P V may still be running, `wait_wgmma 0` retires it.
// The SIMT interpreter runs a group only when a wait retires it and reports any
// access of its accumulator or register operand A before that, so a schedule
// that is only numerically lucky fails here: a missing wait, a wait that keeps
// the wanted group in flight, a register A written while its group reads it.
// Other lowerings keep every gemm synchronous and ignore the waits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::GemmStrategy;
using tl::gpu::test::EmitTileIr;
using tl::gpu::test::Notes;
using tl::gpu::test::Occurrences;
using tl::gpu::test::Sm90;
using tl::gpu::test::Sm90a;

enum class Variant {
  kOverlap,       // the right schedule
  kNoWait1,       // S2 scaled with no wait before it: S2's group is in flight
  kWait2,         // wait_wgmma 2 keeps both groups in flight: S2 still pending
  kReuseP,        // P_f (P V's register A, in flight) overwritten by the second cast
  kNoFinalWait,   // O_f stored while the last P V is in flight
};

constexpr int64_t M = 128, N = 64, D = 64;

// O = cast(0.125 Q K^T) V + cast(0.125 Q K2^T) V2, Q [M, D], K/K2/V/V2 [N, D], one block of 256 threads.
std::string Program(Variant v) {
  auto n = [](int64_t x) { return std::to_string(x); };
  const std::string m = n(M), nn = n(N), d = n(D);
  std::string t = "tileir 1\n\nfunc @fa3(Q: tensor[" + m + ", " + d + "] bf16, K: tensor[2, " + nn + ", " + d + "] bf16, V: tensor[2, " +
                  nn + ", " + d + "] bf16, O: tensor[" + m + ", " + d + "] f32) {\n";
  t += "  kernel grid(1) threads(256) -> (bx) {\n";
  t += "    alloc Q_s: shared[" + m + ", " + d + "] bf16\n";
  t += "    alloc K_s: shared[" + nn + ", " + d + "] bf16\n    alloc K2_s: shared[" + nn + ", " + d + "] bf16\n";
  t += "    alloc V_s: shared[" + nn + ", " + d + "] bf16\n    alloc V2_s: shared[" + nn + ", " + d + "] bf16\n";
  t += "    alloc S_f: fragment[" + m + ", " + nn + "] f32\n    alloc S2_f: fragment[" + m + ", " + nn + "] f32\n";
  t += "    alloc P_f: fragment[" + m + ", " + nn + "] bf16\n    alloc P2_f: fragment[" + m + ", " + nn + "] bf16\n";
  t += "    alloc O_f: fragment[" + m + ", " + d + "] f32\n";
  t += "    copy Q[0:" + m + ", 0:" + d + "] -> Q_s\n";
  t += "    copy K[0, 0:" + nn + ", 0:" + d + "] -> K_s\n    copy K[1, 0:" + nn + ", 0:" + d + "] -> K2_s\n";
  t += "    copy V[0, 0:" + nn + ", 0:" + d + "] -> V_s\n    copy V[1, 0:" + nn + ", 0:" + d + "] -> V2_s\n";
  t += "    fill S_f, 0.0:f32\n    gemm Q_s, K_s -> S_f trans_b wg_wait=-1\n    hint wait_wgmma 0\n";
  t += "    parallel (i, j) in (" + m + ", " + nn + ") {\n      S_f[i, j] = S_f[i, j] * 0.125:f32\n    }\n";
  t += "    copy S_f -> P_f\n    fill O_f, 0.0:f32\n";
  t += "    fill S2_f, 0.0:f32\n    gemm Q_s, K2_s -> S2_f trans_b wg_wait=-1\n";
  t += "    gemm P_f, V_s -> O_f wg_wait=-1\n";
  if (v == Variant::kWait2) t += "    hint wait_wgmma 2\n";
  else if (v != Variant::kNoWait1) t += "    hint wait_wgmma 1\n";
  t += "    parallel (i2, j2) in (" + m + ", " + nn + ") {\n      S2_f[i2, j2] = S2_f[i2, j2] * 0.125:f32\n    }\n";
  t += v == Variant::kReuseP ? "    copy S2_f -> P_f\n" : "    copy S2_f -> P2_f\n";
  t += "    hint wait_wgmma 0\n";
  t += v == Variant::kReuseP ? "    gemm P_f, V2_s -> O_f\n" : "    gemm P2_f, V2_s -> O_f wg_wait=-1\n";
  if (v != Variant::kNoFinalWait) t += "    hint wait_wgmma 0\n";
  t += "    copy O_f -> O[0:" + m + ", 0:" + d + "]\n  }\n}\n";
  return t;
}

tl::StatusOr<tl::gpu::SimtKernel> Lower(Variant v, GemmStrategy g) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(Program(v));
  if (!m.ok()) return m.status();
  return tl::gpu::LowerToSimt(m->functions.at(0), Sm90(g));
}

// Runs the kernel in the interpreter on random inputs; the worst relative error
// against float64 (P rounded to bf16 as the kernel does), or the interpreter's error.
double RunFa3(const tl::gpu::SimtKernel& k, std::string* error) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["Q"].resize(M * D);
  t["K"].resize(2 * N * D);
  t["V"].resize(2 * N * D);
  for (const char* x : {"Q", "K", "V"}) {
    for (double& e : t[x]) e = tl::gpu::test::RoundToBf16(u(rng));
  }
  t["O"].assign(M * D, -7);
  const std::vector<double> q = t["Q"], kk = t["K"], vv = t["V"];
  const tl::Status st = tl::gpu::test::Interpret(k, &t);
  if (!st.ok()) {
    *error = st.message();
    return 1e9;
  }
  double worst = 0;
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> o(D, 0.0);
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t x = 0; x < D; ++x) s += q[i * D + x] * kk[(b * N + j) * D + x];
        const double p = tl::gpu::test::RoundToBf16(static_cast<float>(s) * 0.125);
        for (int64_t x = 0; x < D; ++x) o[x] += p * vv[(b * N + j) * D + x];
      }
    }
    for (int64_t x = 0; x < D; ++x) {
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["O"][i * D + x] - o[x]) / (1 + std::fabs(o[x]))));
    }
  }
  return worst;
}

TEST(AsyncWgmma, OverlappedGroupsMatchFloat64) {
  tl::StatusOr<tl::gpu::SimtKernel> k = Lower(Variant::kOverlap, GemmStrategy::kWgmma);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string dump = tl::gpu::Dump(*k);
  // Three groups left in flight (the first S, S2, the first P V) and one... all four gemms are wgmma.
  EXPECT_EQ(Occurrences(dump, "wait_group=-1"), 4u) << dump;
  std::string error;
  const double err = RunFa3(*k, &error);
  EXPECT_LE(err, 1e-3) << error << "\n" << dump;
  std::printf("[ async wgmma overlap ] worst relative error %.3g\n", err);
  // The printed kernel: no wait_group after those commits, wait_group 1 and 0 where the program waits.
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ(Occurrences(src->source, "wgmma.commit_group.sync.aligned"), 4u) << src->source;
  EXPECT_EQ(Occurrences(src->source, "wgmma.wait_group.sync.aligned 1;"), 1u) << src->source;
  EXPECT_EQ(Occurrences(src->source, "wgmma.wait_group.sync.aligned 0;"), 3u) << src->source;
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << tc.status().ToString();
  tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, "fa3", "sm_90a");
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  // ptxas serializes wgmma (warnings C7510 / C7519) when the registers of a group in flight are touched.
  EXPECT_EQ(code->log.find("serialized"), std::string::npos) << code->log;
  EXPECT_EQ(code->spill_stores, 0) << code->log;
  std::printf("[ async wgmma overlap sm_90a ] %d registers, %d spill bytes\n", code->registers, code->spill_stores);
}

TEST(AsyncWgmma, RacesAreReported) {
  struct Bad {
    Variant v;
    const char* message;
  };
  for (const Bad& b : {Bad{Variant::kNoWait1, "accumulator S2_f accessed while a wgmma group writing it is in flight"},
                       Bad{Variant::kWait2, "accumulator S2_f accessed while a wgmma group writing it is in flight"},
                       Bad{Variant::kReuseP, "register operand A P_f accessed while a wgmma group reading it is in flight"},
                       Bad{Variant::kNoFinalWait, "accumulator O_f accessed while a wgmma group writing it is in flight"}}) {
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(b.v, GemmStrategy::kWgmma);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    std::string error;
    const double err = RunFa3(*k, &error);
    EXPECT_NE(error.find(b.message), std::string::npos) << static_cast<int>(b.v) << ": error '" << error << "', worst " << err;
  }
}

TEST(AsyncWgmma, SynchronousElsewhere) {
  // mma.sync and SIMT: no SWgmmaWait, the same numbers (the gemms are synchronous, the waits no-ops).
  for (GemmStrategy g : {GemmStrategy::kMmaSync, GemmStrategy::kSimtFma}) {
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(Variant::kOverlap, g);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string dump = tl::gpu::Dump(*k);
    EXPECT_EQ(dump.find("wgmma"), std::string::npos) << dump;
    std::string error;
    EXPECT_LE(RunFa3(*k, &error), 1e-3) << error;
  }
  // A racy schedule is harmless there (but wrong on sm_90a, as RacesAreReported shows).
  tl::StatusOr<tl::gpu::SimtKernel> k = Lower(Variant::kNoWait1, GemmStrategy::kMmaSync);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::string error;
  EXPECT_LE(RunFa3(*k, &error), 1e-3) << error;
}

TEST(AsyncWgmma, WgWaitMustBeAWaitGroupCount) {
  std::string text = Program(Variant::kOverlap);
  text.replace(text.find("wg_wait=-1"), 10, "wg_wait=9");
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), Sm90(GemmStrategy::kWgmma));
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("expected wg_wait -1 (leave the wgmma group in flight) or 0..7, found 9"), std::string::npos)
      << k.status().ToString();
}

// kernels/attention.py's flash_attention(overlap=True) (FA3's schedule), emitted by python3, lowered as the
// sm_90a variant (TMA, warp specialization), in the interpreter against float64 softmax(Q K^T / sqrt(D)) V:
// causal and not, D 64 and 128, ragged lengths, 2 and 3 stages. The interpreter retires each group only at
// its wait, so a schedule that touched S, P or O too early fails here; removing the kernel's waits shows it.
std::string OverlapIr(int64_t S, int64_t D, bool causal, int64_t bn, int64_t stages, bool f16 = false) {
  char args[256];
  std::snprintf(args, sizeof args, "1, 1, 1, %lld, %lld, %lld, is_causal=%s, block_M=128, block_N=%lld, num_stages=%lld, "
                "threads=256, dtype='%s', overlap=True", (long long)S, (long long)S, (long long)D, causal ? "True" : "False",
                (long long)bn, (long long)stages, f16 ? "float16" : "bfloat16");
  tl::StatusOr<std::string> ir = EmitTileIr("kernels.attention", "flash_attention", args, "fa");
  EXPECT_TRUE(ir.ok()) << ir.status().ToString();
  return ir.ok() ? *ir : "";
}

tl::Status RunOverlap(const tl::gpu::SimtKernel& k, int64_t S, int64_t D, bool causal, double* worst, bool f16 = false) {
  std::mt19937 rng(static_cast<uint32_t>(S * 7 + D + causal));
  std::uniform_real_distribution<double> u(-2, 2);
  std::map<std::string, std::vector<double>> t;
  for (const char* x : {"Q", "K", "V"}) {
    t[x].resize(static_cast<size_t>(S * D));
    for (double& v : t[x]) v = f16 ? tl::gpu::test::RoundToF16(u(rng)) : tl::gpu::test::RoundToBf16(u(rng));
  }
  t["O"].assign(static_cast<size_t>(S * D), -7);
  const std::vector<double> q = t["Q"], kk = t["K"], v = t["V"];
  const tl::Status st = tl::gpu::test::Interpret(k, &t);
  *worst = 0;
  for (int64_t i = 0; i < S; ++i) {
    const int64_t keys = causal ? i + 1 : S;
    std::vector<double> p(static_cast<size_t>(keys));
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < keys; ++j) {
      double s = 0;
      for (int64_t x = 0; x < D; ++x) s += q[i * D + x] * kk[j * D + x];
      p[j] = s / std::sqrt(static_cast<double>(D));
      m = std::max(m, p[j]);
    }
    for (double& x : p) sum += (x = std::exp(x - m));
    for (int64_t x = 0; x < D; ++x) {
      double acc = 0;
      for (int64_t j = 0; j < keys; ++j) acc += p[j] * v[j * D + x];
      acc /= sum;
      *worst = std::max(*worst, tl::gpu::test::NanAsInf(std::fabs(t["O"][i * D + x] - acc) / (1 + std::fabs(acc))));
    }
  }
  return st;
}

void WalkAll(tl::gpu::SBlock& b, const std::function<void(tl::gpu::SBlock&, size_t)>& fn) {
  for (size_t i = 0; i < b.size(); ++i) {
    fn(b, i);
    if (i >= b.size()) break;
    if (auto* f = std::get_if<tl::gpu::SFor>(&b[i].node)) WalkAll(f->body, fn);
    if (auto* c = std::get_if<tl::gpu::SIf>(&b[i].node)) {
      WalkAll(c->then_body, fn);
      WalkAll(c->else_body, fn);
    }
    if (auto* w = std::get_if<tl::gpu::SWarpRoles>(&b[i].node)) {
      WalkAll(w->producer, fn);
      WalkAll(w->consumer, fn);
    }
  }
}

TEST(AsyncWgmma, LibraryFlashAttentionOverlapMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  struct Case {
    int64_t S, D;
    bool causal;
    int64_t bn, stages;
    bool f16 = false;
  };
  const tl::gpu::GpuLowerOptions o = Sm90a();  // TMA, staged epilogue, warp-specialized
  for (const Case& c : {Case{300, 64, true, 64, 2}, Case{330, 128, true, 64, 3}, Case{200, 128, false, 64, 2},
                        Case{260, 64, false, 128, 2}, Case{200, 128, false, 128, 2, true}, Case{150, 64, true, 64, 2, true}}) {
    SCOPED_TRACE("S " + std::to_string(c.S) + " D " + std::to_string(c.D) + (c.causal ? " causal" : "") + " block_N " +
                 std::to_string(c.bn) + " stages " + std::to_string(c.stages) + (c.f16 ? " f16" : " bf16"));
    const std::string ir = OverlapIr(c.S, c.D, c.causal, c.bn, c.stages, c.f16);
    ASSERT_FALSE(ir.empty());
    tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(ir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(m->functions.at(0), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string notes = Notes(*k);
    EXPECT_NE(notes.find("warp-specialized: 256 consumer threads"), std::string::npos) << notes;
    const std::string dump = tl::gpu::Dump(*k);
    // S and P V left in flight in the steps with a KV block, and the last step's P V alone
    EXPECT_EQ(Occurrences(dump, "wait_group=-1"), 3u) << dump;
    // P (acc_s_cast) is kept packed: half of acc_s's registers, written by one loop of pair stores.
    const std::string pk = std::string(c.f16 ? "f16" : "bf16") + "x2 (" + std::to_string(128 * c.bn / 256 / 2) + " registers)";
    EXPECT_NE(dump.find("buffer acc_s_cast: registers[" + std::to_string(128 * c.bn / 256) + "] " + (c.f16 ? "f16" : "bf16") +
                        " packed " + pk),
              std::string::npos)
        << dump;
    EXPECT_NE(dump.find("acc_s_cast[tl_pj] = pack2(acc_s["), std::string::npos) << dump;
    EXPECT_NE(notes.find("wgmma register operand A kept packed"), std::string::npos) << notes;
    double worst = 0;
    const tl::Status st = RunOverlap(*k, c.S, c.D, c.causal, &worst, c.f16);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_LE(worst, 1e-2);
    std::printf("[ flash_attention overlap S%lld D%lld%s %lldx%lld s%lld ] worst relative error %.3g\n", (long long)c.S,
                (long long)c.D, c.causal ? " causal" : "", 128LL, (long long)c.bn, (long long)c.stages, worst);
    // Without the wait for S alone (wait_group 1), S is read while its group is in flight; without the
    // k-step's final wait_group 0, P (or O) is touched while P V still reads (writes) it.
    for (int64_t pending : {1, 0}) {
      tl::gpu::SimtKernel b = *k;
      int removed = 0;
      WalkAll(b.body, [&](tl::gpu::SBlock& blk, size_t i) {
        const auto* w = std::get_if<tl::gpu::SWgmmaWait>(&blk[i].node);
        if (w && w->pending == pending && (pending == 1 || removed == 0) && &blk != &b.body) {
          // pending 0: the first top-level wait in the consumers' k-loop body after the softmax (the one not in an if)
          if (pending == 0 && blk.size() < 4) return;
          blk[i].node = tl::gpu::SComment{"wait removed"};
          ++removed;
        }
      });
      ASSERT_GE(removed, 1) << pending;
      const tl::Status bad = RunOverlap(b, c.S, c.D, c.causal, &worst, c.f16);
      EXPECT_NE(bad.ToString().find(pending == 1 ? "accumulator acc_s accessed while a wgmma group writing it is in flight"
                                                 : "accumulator acc_o accessed while a wgmma group writing it is in flight"),
                std::string::npos)
          << pending << ": " << bad.ToString();
    }
  }
}

}  // namespace
