// compiler.gpu WarpSpecialize.*: the sm_90a GEMM k-loop as a producer /
// consumer pipeline (WarpSpecializeGemmPipeline, warp_specialize.cc). The
// SIMT interpreter runs the two warp roles as agents that interleave only at
// mbarrier waits (simt_interp.cc), so the tests check the numbers against
// float64 and that a broken protocol is caught: a producer that does not
// wait for a stage's release overwrites it, consumers that release a stage
// their in-flight wgmma group still reads race with the refill, consumers
// that never release it deadlock. The printed CUDA and ptxas' resource
// report (registers fixed by __launch_bounds__, no spills) complete it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "lowering_test_util.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::SBlock;
using tl::gpu::SStmt;
using tl::gpu::test::AttentionIr;
using tl::gpu::test::Notes;
using tl::gpu::test::Parse;
using tl::gpu::test::Sm90a;
using tl::gpu::test::Walk;

struct WsCase {
  std::string name;
  int64_t M, N, K, bm, bn, bk, threads;
  bool tb;                 // B given as [N, K]
  std::string dt, cdt;     // operand and C dtypes
  int stages;
  bool epilogue;           // C_f = C_f * 2 + 1 before the store (statements after the loop)
};

std::string Text(const WsCase& c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string t = "tileir 1\n\nfunc @" + c.name + "(A: tensor[" + n(c.M) + ", " + n(c.K) + "] " + c.dt + ", B: tensor[" +
                  (c.tb ? n(c.N) + ", " + n(c.K) : n(c.K) + ", " + n(c.N)) + "] " + c.dt + ", C: tensor[" + n(c.M) + ", " +
                  n(c.N) + "] " + c.cdt + ") {\n";
  t += "  kernel grid(ceildiv(" + n(c.N) + ", " + n(c.bn) + "), ceildiv(" + n(c.M) + ", " + n(c.bm) + ")) threads(" +
       n(c.threads) + ") -> (bx, by) {\n";
  t += "    alloc A_s: shared[" + n(c.bm) + ", " + n(c.bk) + "] " + c.dt + "\n";
  t += "    alloc B_s: shared[" + (c.tb ? n(c.bn) + ", " + n(c.bk) : n(c.bk) + ", " + n(c.bn)) + "] " + c.dt + "\n";
  t += "    alloc C_f: fragment[" + n(c.bm) + ", " + n(c.bn) + "] f32\n";
  t += "    fill C_f, 0.0:f32\n";
  t += "    for k in pipelined(0, ceildiv(" + n(c.K) + ", " + n(c.bk) + "), stages=" + n(c.stages) + ") {\n";
  t += "      copy A[by * " + n(c.bm) + ":" + n(c.bm) + ", k * " + n(c.bk) + ":" + n(c.bk) + "] -> A_s\n";
  t += "      copy B[" + (c.tb ? "bx * " + n(c.bn) + ":" + n(c.bn) + ", k * " + n(c.bk) + ":" + n(c.bk)
                       : "k * " + n(c.bk) + ":" + n(c.bk) + ", bx * " + n(c.bn) + ":" + n(c.bn)) + "] -> B_s\n";
  t += "      gemm A_s, B_s -> C_f" + std::string(c.tb ? " trans_b" : "") + "\n    }\n";
  if (c.epilogue) t += "    parallel (i, j) in (" + n(c.bm) + ", " + n(c.bn) + ") {\n      C_f[i, j] = C_f[i, j] * 2.0:f32 + 1.0:f32\n    }\n";
  t += "    copy C_f -> C[by * " + n(c.bm) + ":" + n(c.bm) + ", bx * " + n(c.bn) + ":" + n(c.bn) + "]\n  }\n}\n";
  return t;
}

double Round(double v, const std::string& dt) {
  float f = static_cast<float>(v);
  if (dt == "f16") return static_cast<double>(static_cast<_Float16>(f));
  if (dt == "bf16") {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    x = (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000u;
    std::memcpy(&f, &x, 4);
  }
  return f;
}

// Random inputs, the kernel in the interpreter; the status and the worst
// relative error of C against float64. With scaled_loops > 0 the kernel is
// that many k-loops that each halve C after every k-step (ScaledLoops).
tl::Status RunWs(const WsCase& c, const tl::gpu::SimtKernel& k, double* worst, int scaled_loops = 0,
                 std::vector<double>* out = nullptr, double poison = -7) {
  std::mt19937 rng(static_cast<uint32_t>(c.M * 31 + c.N * 7 + c.K));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(static_cast<size_t>(c.M * c.K));
  t["B"].resize(static_cast<size_t>(c.K * c.N));
  for (double& v : t["A"]) v = Round(d(rng), c.dt);
  for (double& v : t["B"]) v = Round(d(rng), c.dt);
  t["C"].assign(static_cast<size_t>(c.M * c.N), poison);
  const std::vector<double> a = t["A"], b = t["B"];
  const tl::Status st = tl::gpu::test::Interpret(k, &t);
  if (out) *out = t["C"];
  *worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int loop = 0; loop < std::max(1, scaled_loops); ++loop) {
        for (int64_t p = 0; p < c.K; ++p) {
          s += a[static_cast<size_t>(i * c.K + p)] * b[static_cast<size_t>(c.tb ? j * c.K + p : p * c.N + j)];
          if (scaled_loops > 0 && (p % c.bk == c.bk - 1 || p == c.K - 1)) s *= 0.5;
        }
      }
      if (c.epilogue) s = s * 2 + 1;
      *worst = std::max(*worst, std::fabs(t["C"][static_cast<size_t>(i * c.N + j)] - s) / (1 + std::fabs(s)));
    }
  }
  return st;
}

// Case c's GEMM with C_f halved after every k-step, in `loops` k-loops over
// the same K (each its own pipeline: A_s/B_s, then A2_s/B2_s): every wgmma
// waits for its group (the accumulator is touched in the k-loop).
std::string ScaledLoops(const WsCase& c, int loops) {
  std::string t = Text(c);
  const std::string scale = "      parallel (si, sj) in (" + std::to_string(c.bm) + ", " + std::to_string(c.bn) +
                            ") {\n        C_f[si, sj] = C_f[si, sj] * 0.5:f32\n      }\n";
  t.insert(t.find("\n", t.find("      gemm A_s, B_s -> C_f")) + 1, scale);
  if (loops == 2) {
    const size_t from = t.find("    for k in pipelined"), to = t.find("\n    }\n", from) + 7;
    std::string second = t.substr(from, to - from);
    for (const char* b : {"A_s", "B_s", "si", "sj", "k "}) {  // its own buffers and names
      const std::string x = b, y = x == "k " ? "k2 " : x.substr(0, 1) + "2" + x.substr(1);
      for (size_t at = 0; (at = second.find(x, at)) != std::string::npos; at += y.size()) second.replace(at, x.size(), y);
    }
    t.insert(to, second);
    const size_t alloc = t.find("    alloc C_f");
    std::string allocs = t.substr(t.find("    alloc A_s"), alloc - t.find("    alloc A_s"));
    for (const char* b : {"A_s", "B_s"}) allocs.replace(allocs.find(b), 3, std::string(1, b[0]) + "2_s");
    t.insert(alloc, allocs);
  }
  return t;
}
std::string TwoScaledLoops(const WsCase& c) { return ScaledLoops(c, 2); }

// ptxas' report of an sm_90a kernel these tests expect: no spills, no stack, no
// serialized wgmma (C7510 / C7515 / C7519), and where `registers` is given and
// ptxas said, exactly that many registers at entry.
void ExpectCleanSm90a(const cu::CompiledCode& code, int registers = -1) {
  if (registers >= 0 && code.registers >= 0) {
    EXPECT_EQ(code.registers, registers) << code.log;
  }
  EXPECT_EQ(code.spill_stores, 0) << code.log;
  EXPECT_EQ(code.spill_loads, 0) << code.log;
  EXPECT_EQ(code.stack_bytes, 0) << code.log;
  EXPECT_EQ(code.log.find("serialized"), std::string::npos) << code.log;
}

// A persistent GEMM's deferred epilogue store in printed CUDA: in the tile loop (from `loop`) the .read wait, the
// fenced post-drain barrier, the store (`store`: a bulk copy or TMA box), the commit; after them the full wait.
void ExpectDeferredStoreOrder(const std::string& s, const std::string& loop_head, const std::string& store) {
  const size_t loop = s.find(loop_head);
  ASSERT_NE(loop, std::string::npos) << s;
  const size_t rd = s.find("tl_bulk_wait_read<0>();", loop), st = s.find(store, loop), cm = s.find("tl_bulk_commit();", loop),
               full = s.find("tl_bulk_wait<0>();", loop);
  ASSERT_TRUE(rd != std::string::npos && st != std::string::npos && cm != std::string::npos && full != std::string::npos) << s;
  EXPECT_LT(rd, s.find("bar.sync 1, 256;", rd)) << s;
  EXPECT_LT(rd, st);
  EXPECT_LT(st, cm);
  EXPECT_LT(cm, full);
  EXPECT_NE(s.find("fence.proxy.async.shared::cta;\" ::: \"memory\");\n", rd), std::string::npos);
}

const tl::gpu::SWarpRoles* Roles(const tl::gpu::SimtKernel& k) {
  for (const SStmt& s : k.body) {
    if (const auto* r = std::get_if<tl::gpu::SWarpRoles>(&s.node)) return r;
  }
  return nullptr;
}

template <class T>
int Count(const SBlock& b) {
  int n = 0;
  Walk(const_cast<SBlock&>(b), [&](SStmt& s) { n += std::holds_alternative<T>(s.node); });
  return n;
}

// How many T (SBulkStore, STmaStore) in b read shared buffer `src`.
template <class T>
int StoresFrom(const SBlock& b, const std::string& src) {
  int n = 0;
  Walk(const_cast<SBlock&>(b), [&](SStmt& s) {
    const auto* x = std::get_if<T>(&s.node);
    n += x && x->src == src;
  });
  return n;
}

// The mutant without the bulk epilogue's .read waits in b (each becomes a comment); how many it removed.
int DropReadWaits(SBlock& b) {
  int removed = 0;
  Walk(b, [&](SStmt& s) {
    auto* w = std::get_if<tl::gpu::SBulkWait>(&s.node);
    if (w && w->read) s.node = tl::gpu::SComment{"no bulk wait"}, ++removed;
  });
  return removed;
}

const std::vector<WsCase>& Cases() {
  static const std::vector<WsCase> cases = {
      // 2 and 3 stages, 128 and 256 consumer threads, 128x128 and 128x256
      // tiles, partial tiles in M, N and K, several k-steps (and one); rows of
      // 16-byte multiples (else a copy stays cp.async and nothing is specialized).
      {"ws_128x128_t128_s2", 200, 136, 456, 128, 128, 64, 128, false, "f16", "f32", 2, false},
      {"ws_128x128_t256_s3_nt", 260, 200, 520, 128, 128, 64, 256, true, "bf16", "f32", 3, true},
      {"ws_128x256_t256_s3", 150, 304, 392, 128, 256, 64, 256, false, "f16", "f16", 3, false},
      {"ws_128x256_t128_s2", 130, 264, 328, 128, 256, 64, 128, false, "bf16", "bf16", 2, true},
      {"ws_128x128_t256_s3_k1", 140, 152, 40, 128, 128, 64, 256, false, "f16", "f32", 3, false},
  };
  return cases;
}

TEST(WarpSpecialize, GemmsMatchFloat64) {
  for (const WsCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
    ASSERT_NE(notes.find("warp-specialized: " + std::to_string(c.threads) + " consumer threads"), std::string::npos) << notes;
    // One producer warpgroup more; the program's threads are the consumers.
    EXPECT_EQ(k->threads, c.threads + 128);
    EXPECT_EQ(k->block[0], c.threads + 128);
    EXPECT_GT(k->min_blocks, 0);
    const tl::gpu::SWarpRoles* r = Roles(*k);
    ASSERT_TRUE(r) << dump;
    EXPECT_EQ(r->consumers, c.threads);
    // No block barrier once the roles split; each role sets its registers.
    EXPECT_EQ(Count<tl::gpu::SBarrier>(r->producer) + Count<tl::gpu::SBarrier>(r->consumer), 0) << dump;
    EXPECT_EQ(Count<tl::gpu::SSetMaxNReg>(r->producer), 1);
    EXPECT_EQ(Count<tl::gpu::SSetMaxNReg>(r->consumer), 1);
    EXPECT_EQ(Count<tl::gpu::SWgmma>(r->producer) + Count<tl::gpu::STmaLoad>(r->consumer), 0) << dump;
    EXPECT_GT(Count<tl::gpu::STmaLoad>(r->producer), 0);
    EXPECT_GT(Count<tl::gpu::SNamedBarrier>(r->consumer), 0);
    double worst = 0;
    const tl::Status st = RunWs(c, *k, &worst);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    EXPECT_LE(worst, c.cdt == "f32" ? 1e-5 : 4e-3) << dump;
    std::printf("[ %s ] warp-specialized, %lld threads, worst relative error %.3g\n", c.name.c_str(),
                static_cast<long long>(k->threads), worst);
    // TL_CUDA_WS=0's lowering: the kernel as before, and the note says so.
    tl::StatusOr<tl::gpu::SimtKernel> off = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a(false));
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->threads, c.threads);
    EXPECT_FALSE(Roles(*off));
    EXPECT_NE(Notes(*off).find("not warp-specialized: turned off"), std::string::npos) << Notes(*off);
  }
}

// Persistent (opt-in, GpuLowerOptions::persistent_sms): G blocks loop over
// the output tiles; the phases carry on across tiles whose k-step counts are
// not multiples of the stages, an epilogue tile in a stage's memory moves out,
// and a tile ends without a barrier (its epilogue overlaps the next tile).
TEST(WarpSpecialize, PersistentTilesMatchFloat64) {
  for (const WsCase& c : Cases()) {
    for (int64_t sms : {1, 2}) {
      SCOPED_TRACE(c.name + " over " + std::to_string(sms) + " SMs");
      tl::gpu::GpuLowerOptions o = Sm90a();
      o.persistent_sms = sms;
      o.bulk_store = true;  // the opt-in epilogue (its default-off form: BulkStoreEpilogue's `off`)
      tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
      ASSERT_TRUE(k.ok()) << k.status().ToString();
      const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
      const int64_t tiles = ((c.N + c.bn - 1) / c.bn) * ((c.M + c.bm - 1) / c.bm);
      const int64_t G = std::min(tiles, sms * k->min_blocks);
      ASSERT_NE(notes.find("; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles"),
                std::string::npos)
          << notes;
      ASSERT_EQ(k->grid.size(), 1u);
      EXPECT_EQ(tl::ir::FoldInt(k->grid[0]), std::optional<int64_t>(G));
      // No named barrier at the end of a tile (the next tile's post-drain one
      // orders the epilogue tile's reuse): as many as the one-tile kernel's.
      tl::StatusOr<tl::gpu::SimtKernel> once = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a());
      ASSERT_TRUE(once.ok());
      auto named = [](const std::string& d) {
        size_t n = 0;
        for (size_t at = d.find("bar.sync 1, "); at != std::string::npos; at = d.find("bar.sync 1, ", at + 1)) ++n;
        return n;
      };
      EXPECT_EQ(named(dump), named(tl::gpu::Dump(*once))) << dump;
      // No shared buffer but the stages overlaps a stage.
      for (const tl::gpu::SimtBuffer& a : k->buffers) {
        if (a.name != "A_s" && a.name != "B_s") continue;
        const int64_t alo = a.shared_offset, ahi = alo + a.elements * 2;
        for (const tl::gpu::SimtBuffer& b : k->buffers) {
          if (b.space != tl::gpu::Space::kShared || b.name == "A_s" || b.name == "B_s") continue;
          EXPECT_TRUE(b.shared_offset >= ahi || b.shared_offset + b.elements * 2 <= alo) << b.name << " in " << a.name;
        }
      }
      // A staged epilogue is stored by warp 0's bulk copies (GpuLowerOptions::bulk_store): one per
      // row, committed per tile, the .read wait before the next tile's post-drain barrier, the full
      // wait once after the tile loop; no st.global of the tile by the consumers.
      const tl::gpu::SWarpRoles* r = Roles(*k);
      ASSERT_TRUE(r);
      const bool staged = notes.find("stored through a shared tile") != std::string::npos;
      EXPECT_EQ(notes.find("epilogue stored by warp 0 as one bulk copy per row (waited for before the next tile's epilogue)") !=
                    std::string::npos,
                staged)
          << notes;
      EXPECT_EQ(Count<tl::gpu::SBulkStore>(r->consumer), staged ? 1 : 0) << dump;
      EXPECT_EQ(Count<tl::gpu::SBulkCommit>(r->consumer), staged ? 1 : 0) << dump;
      EXPECT_EQ(Count<tl::gpu::SBulkWait>(r->consumer), staged ? 2 : 0) << dump;
      if (staged) {
        int vec = 0;
        Walk(const_cast<SBlock&>(r->consumer), [&](SStmt& s) {
          const auto* v = std::get_if<tl::gpu::SCopyVec>(&s.node);
          vec += v && v->src == "tl_epi_C_f";
        });
        EXPECT_EQ(vec, 0) << dump;
        const auto* last = std::get_if<tl::gpu::SIf>(&r->consumer.back().node);
        ASSERT_TRUE(last && last->then_body.size() == 1) << dump;
        const auto* w = std::get_if<tl::gpu::SBulkWait>(&last->then_body[0].node);
        ASSERT_TRUE(w) << dump;
        EXPECT_EQ(w->read, false);
      }
      double worst = 0;
      std::vector<double> out;
      const tl::Status st = RunWs(c, *k, &worst, 0, &out);
      ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
      EXPECT_LE(worst, c.cdt == "f32" ? 1e-5 : 4e-3) << dump;
      // Every tile restarts at stage 0 (the default); with GpuLowerOptions::persistent_ring (opt-in)
      // the ring of stages continues across tiles: the producer's stage and the consumers' stage let,
      // wgmma operands and releases all add the ring's position. Bit for bit the same C.
      EXPECT_EQ(notes.find("ring"), std::string::npos) << notes;
      EXPECT_EQ(dump.find("tl_ws_ring"), std::string::npos) << dump;
      tl::gpu::GpuLowerOptions ring = o;
      ring.persistent_ring = true;
      tl::StatusOr<tl::gpu::SimtKernel> kr = tl::gpu::LowerToSimt(Parse(Text(c)), ring);
      ASSERT_TRUE(kr.ok()) << kr.status().ToString();
      EXPECT_NE(Notes(*kr).find(", the stages' ring continuing across tiles"), std::string::npos) << Notes(*kr);
      EXPECT_NE(tl::gpu::Dump(*kr).find("tl_ws_ring"), std::string::npos);
      double worst_ring = 0;
      std::vector<double> out_ring;
      const tl::Status st_ring = RunWs(c, *kr, &worst_ring, 0, &out_ring);
      ASSERT_TRUE(st_ring.ok()) << st_ring.ToString() << "\n" << tl::gpu::Dump(*kr);
      EXPECT_EQ(out, out_ring);
      std::printf("[ %s ] persistent over %lld blocks (%lld tiles)%s, worst relative error %.3g\n", c.name.c_str(),
                  static_cast<long long>(G), static_cast<long long>(tiles), staged ? ", bulk-store epilogue" : "", worst);
    }
  }
}

// The persistent ring (GpuLowerOptions::persistent_ring) rewrites only the
// lowering's stage indices, truncmod(x - k0, S); a truncmod by S of the loop
// variable in any other shape could be a stage index it would miss (a
// consumer reading the tile-local stage while the producer filled the
// shifted one), so the ring is refused, the note says why, and the kernel
// restarts its stages per tile -- the same numbers either way.
TEST(WarpSpecialize, PersistentRingRefusesUnknownStageIndex) {
  const WsCase& c = Cases()[0];
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a(false));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const int64_t budget = 227 * 1024;
  // As lowered: the ring is taken.
  tl::gpu::SimtKernel ring = *k;
  const std::string note = tl::gpu::WarpSpecializeGemmPipeline(&ring, budget, true, 1, false, true);
  ASSERT_EQ(note.rfind("warp-specialized: ", 0), 0u) << note;
  EXPECT_NE(note.find(", the stages' ring continuing across tiles"), std::string::npos) << note;
  // The consumers' wgmma operand starts read their stage as truncmod(k, S) instead of truncmod(k - 0, S):
  // the same value, a shape the ring does not rewrite.
  tl::gpu::SimtKernel odd = *k;
  int rewritten = 0;
  Walk(odd.body, [&](SStmt& s) {
    auto* w = std::get_if<tl::gpu::SWgmma>(&s.node);
    if (!w) return;
    for (tl::ir::Expr& e : w->b.starts) {
      e = tl::ir::RewriteExpr(e, [&](const tl::ir::Expr& x) -> std::optional<tl::ir::Expr> {
        const auto* call = tl::ir::As<tl::ir::Call>(x);
        if (!call || call->op != tl::ir::CallOp::kTruncMod || call->args.size() != 2) return std::nullopt;
        const auto* sub = tl::ir::As<tl::ir::Binary>(call->args[0]);
        if (!sub || sub->op != tl::ir::BinaryOp::kSub || tl::ir::FoldInt(*sub->rhs) != std::optional<int64_t>(0)) {
          return std::nullopt;
        }
        ++rewritten;
        return tl::ir::MakeCall(tl::ir::CallOp::kTruncMod, {*sub->lhs, call->args[1]});
      });
    }
  });
  ASSERT_GT(rewritten, 0) << tl::gpu::Dump(*k);
  const std::string odd_note = tl::gpu::WarpSpecializeGemmPipeline(&odd, budget, true, 1, false, true);
  ASSERT_EQ(odd_note.rfind("warp-specialized: ", 0), 0u) << odd_note;
  EXPECT_NE(odd_note.find(", the stages restarting per tile (persistent_ring: a stage index not of the form (k - k0) % S)"),
            std::string::npos)
      << odd_note;
  EXPECT_EQ(tl::gpu::Dump(odd).find("tl_ws_ring"), std::string::npos) << tl::gpu::Dump(odd);
  double worst_ring = 0, worst_odd = 0;
  std::vector<double> out_ring, out_odd;
  ASSERT_TRUE(RunWs(c, ring, &worst_ring, 0, &out_ring).ok());
  const tl::Status st = RunWs(c, odd, &worst_odd, 0, &out_odd);
  ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << tl::gpu::Dump(odd);
  EXPECT_EQ(out_odd, out_ring);
  EXPECT_LE(worst_odd, c.cdt == "f32" ? 1e-5 : 4e-3);
}

// The bulk-store epilogue (GpuLowerOptions::bulk_store): warp 0's lanes copy
// the staged tile's rows to C with cp.async.bulk (ragged rows skipped, row
// lengths clipped), the same numbers as the consumers' 16-byte stores
// (TL_CUDA_BULK_STORE=0), with and without tl.persistent; the interpreter
// reports a tile rewritten before its bulk group's wait and groups never
// waited for; the printed CUDA issues the copies and ptxas spills nothing.
TEST(WarpSpecialize, BulkStoreEpilogue) {
  int staged = 0;
  for (const WsCase& c : Cases()) {
    for (int64_t sms : {0, 1, 2}) {
      SCOPED_TRACE(c.name + " persistent over " + std::to_string(sms));
      tl::gpu::GpuLowerOptions on = Sm90a(), off = Sm90a();  // off: the default
      on.persistent_sms = off.persistent_sms = sms;
      on.bulk_store = true;
      tl::StatusOr<tl::gpu::SimtKernel> a = tl::gpu::LowerToSimt(Parse(Text(c)), on);
      tl::StatusOr<tl::gpu::SimtKernel> b = tl::gpu::LowerToSimt(Parse(Text(c)), off);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
      EXPECT_EQ(Count<tl::gpu::SBulkStore>(b->body), 0);
      EXPECT_EQ(Notes(*b).find("bulk copy"), std::string::npos) << Notes(*b);
      if (Notes(*a).find("stored through a shared tile") == std::string::npos) {
        EXPECT_EQ(Count<tl::gpu::SBulkStore>(a->body), 0);
        continue;
      }
      ++staged;
      const std::string dump = tl::gpu::Dump(*a);
      EXPECT_NE(Notes(*a).find(sms ? "bulk copy per row (waited for before the next tile's epilogue)"
                                   : "bulk copy per row (waited for at the end)"),
                std::string::npos)
          << Notes(*a);
      EXPECT_EQ(Count<tl::gpu::SBulkStore>(a->body), 1) << dump;
      EXPECT_EQ(Count<tl::gpu::SBulkWait>(a->body), sms ? 2 : 1) << dump;
      int reads = 0;  // non-persistent: the one wait is .read (the kernel's end); persistent: the deferred one
      Walk(const_cast<SBlock&>(a->body), [&](SStmt& x) {
        const auto* w = std::get_if<tl::gpu::SBulkWait>(&x.node);
        reads += w && w->read;
      });
      EXPECT_EQ(reads, 1) << dump;
      EXPECT_EQ(a->param_align.at("C"), 16);
      // The same C (bit for bit) as the consumers' stores, every element written.
      auto run = [&](const tl::gpu::SimtKernel& k, std::map<std::string, std::vector<double>>* t) {
        std::mt19937 rng(11);
        std::uniform_real_distribution<double> d(-1, 1);
        (*t)["A"].resize(static_cast<size_t>(c.M * c.K));
        (*t)["B"].resize(static_cast<size_t>(c.K * c.N));
        for (double& v : (*t)["A"]) v = Round(d(rng), c.dt);
        for (double& v : (*t)["B"]) v = Round(d(rng), c.dt);
        (*t)["C"].assign(static_cast<size_t>(c.M * c.N), 1e6);  // no product sum comes near
        return tl::gpu::test::Interpret(k, t);
      };
      std::map<std::string, std::vector<double>> ta, tb;
      const tl::Status sa = run(*a, &ta), sb = run(*b, &tb);
      ASSERT_TRUE(sa.ok()) << sa.ToString() << "\n" << dump;
      ASSERT_TRUE(sb.ok()) << sb.ToString();
      EXPECT_EQ(ta["C"], tb["C"]);
      EXPECT_EQ(std::count(ta["C"].begin(), ta["C"].end(), 1e6), 0);
      if (sms == 0) {  // Mutant: no wait at all: the copies are never waited for.
        tl::gpu::SimtKernel k = *a;
        Walk(k.body, [&](SStmt& x) {
          if (std::holds_alternative<tl::gpu::SBulkWait>(x.node)) x.node = tl::gpu::SComment{"no bulk wait"};
        });
        std::map<std::string, std::vector<double>> t;
        const tl::Status st = run(k, &t);
        EXPECT_NE(st.ToString().find("never waited for (cp.async.bulk.wait_group) before the kernel's end"), std::string::npos)
            << st.ToString();
        continue;
      }
      // Mutants: 1. no .read wait before the next tile's epilogue: its stmatrix rewrites the tile
      // while the previous tile's bulk copies of it are pending.
      {
        tl::gpu::SimtKernel k = *a;
        EXPECT_EQ(DropReadWaits(k.body), 1);
        std::map<std::string, std::vector<double>> t;
        const tl::Status st = run(k, &t);
        EXPECT_NE(st.ToString().find("a stmatrix writes tl_epi_C_f["), std::string::npos) << st.ToString();
        EXPECT_NE(st.ToString().find("'s bulk copy of it to C is pending"), std::string::npos) << st.ToString();
      }
      // 2. no wait after the tile loop: the last tile's copies are never waited for.
      {
        tl::gpu::SimtKernel k = *a;
        int removed = 0;
        Walk(k.body, [&](SStmt& s) {
          auto* w = std::get_if<tl::gpu::SBulkWait>(&s.node);
          if (w && !w->read) s.node = tl::gpu::SComment{"no bulk wait"}, ++removed;
        });
        EXPECT_EQ(removed, 1);
        std::map<std::string, std::vector<double>> t;
        const tl::Status st = run(k, &t);
        EXPECT_NE(st.ToString().find("never waited for (cp.async.bulk.wait_group) before the kernel's end"), std::string::npos)
            << st.ToString();
      }
    }
  }
  EXPECT_EQ(staged, 3);  // ws_128x256_t256_s3 (f16 C; ragged rows and columns), plain and persistent over 1 and 2 SMs
  // The printed CUDA and ptxas: hopper_bench's GEMM (bf16, 128x256x64, 256 threads, 3 stages) persistent over 132 SMs.
  const WsCase big{"ws_bulk_128x256x64_t256", 8192, 8192, 1024, 128, 256, 64, 256, false, "bf16", "bf16", 3, false};
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (bool bulk : {true, false}) {
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 132;
    o.bulk_store = bulk;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(big)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(Notes(*k).find("; persistent: 132 blocks over 2048 tiles"), std::string::npos) << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    EXPECT_EQ(s.find("cp.async.bulk.global.shared::cta.bulk_group") != std::string::npos, bulk);
    EXPECT_EQ(s.find("tl_bulk_store(&C[") != std::string::npos, bulk) << s;
    if (bulk) {
      ExpectDeferredStoreOrder(s, "for (int tl_tile = bx; tl_tile < 2048; tl_tile += 132) {", "tl_bulk_store(");
    }
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, big.name, "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ %s persistent sm_90a, bulk store %s ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n",
                big.name.c_str(), bulk ? "on" : "off", code->registers, code->spill_stores, code->stack_bytes,
                static_cast<long long>(k->shared_bytes));
    ExpectCleanSm90a(*code);
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// Where it does not apply, the kernel stays as it was and the note says why.
// GpuLowerOptions::tma_store (opt-in; never run on a GPU yet): the staged epilogue tile is unpadded and
// 128B-swizzled, stmatrix writes it, and the warp-specialized GEMM copies it to C by TMA tensor stores --
// thread 0, one box [m, 64] per column panel, committed as one bulk group with bulk_store's waits. The
// interpreter runs the boxes as the engine does (swizzled source, elements past C's end skipped), so C must
// be bit for bit the default kernel's, every element written, and a missing .read wait must be caught.
TEST(WarpSpecialize, TmaStoreEpilogue) {
  int staged = 0;
  for (const WsCase& c : Cases()) {
    for (int64_t sms : {0, 1, 2}) {
      SCOPED_TRACE(c.name + " persistent over " + std::to_string(sms));
      tl::gpu::GpuLowerOptions on = Sm90a(), off = Sm90a();
      on.persistent_sms = off.persistent_sms = sms;
      on.tma_store = true;
      on.bulk_store = true;  // tma_store takes its place
      tl::StatusOr<tl::gpu::SimtKernel> a = tl::gpu::LowerToSimt(Parse(Text(c)), on);
      tl::StatusOr<tl::gpu::SimtKernel> b = tl::gpu::LowerToSimt(Parse(Text(c)), off);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
      const std::string notes = Notes(*a), dump = tl::gpu::Dump(*a);
      EXPECT_EQ(Count<tl::gpu::STmaStore>(b->body), 0);
      if (notes.find("128B-swizzled for TMA tensor stores") == std::string::npos) {
        EXPECT_EQ(Count<tl::gpu::STmaStore>(a->body), 0) << notes;
        continue;
      }
      ++staged;
      const int64_t panels = c.bn / 64;
      EXPECT_NE(notes.find("has a TMA-store form: " + std::to_string(panels) + " boxes " + std::to_string(c.bm) +
                           "x64 (swizzle 128B) by thread 0"),
                std::string::npos)
          << notes;
      EXPECT_NE(notes.find(sms ? "epilogue stored by thread 0 as TMA tensor stores, one box per 64-column panel (waited "
                                 "for before the next tile's epilogue)"
                               : "epilogue stored by thread 0 as TMA tensor stores, one box per 64-column panel (waited "
                                 "for at the end)"),
                std::string::npos)
          << notes;
      EXPECT_EQ(Count<tl::gpu::STmaStore>(a->body), panels) << dump;
      EXPECT_EQ(Count<tl::gpu::SBulkStore>(a->body), 0) << dump;
      EXPECT_EQ(Count<tl::gpu::SBulkWait>(a->body), sms ? 2 : 1) << dump;
      EXPECT_EQ(a->param_align.at("C"), 16);
      bool found = false;
      for (const tl::gpu::SimtBuffer& x : a->buffers) {
        if (x.name != "tl_epi_C_f") continue;
        found = true;
        EXPECT_EQ(x.swizzle, tl::gpu::SmemSwizzle::k128B);
        EXPECT_EQ(x.elements, c.bm * c.bn);  // unpadded
        EXPECT_EQ(x.shared_offset % 1024, 0);
      }
      EXPECT_TRUE(found) << dump;
      int maps = 0;
      for (const tl::gpu::TensorMapDesc& m : a->tensor_maps) {
        if (a->params[static_cast<size_t>(m.param)].name != "C") continue;
        ++maps;
        EXPECT_EQ(m.box, (std::vector<int64_t>{c.bm, 64}));
        EXPECT_EQ(m.swizzle, tl::gpu::SmemSwizzle::k128B);
      }
      EXPECT_EQ(maps, 1);
      EXPECT_NE(notes.find("stmatrix: C_f -> tl_epi_C_f"), std::string::npos) << notes;
      std::vector<double> out_a, out_b;
      double worst = 0, worst_b = 0;
      // C poisoned with 1e6, which no element's product sum comes near: every element written.
      const tl::Status sa = RunWs(c, *a, &worst, 0, &out_a, 1e6), sb = RunWs(c, *b, &worst_b, 0, &out_b, 1e6);
      ASSERT_TRUE(sa.ok()) << sa.ToString() << "\n" << dump;
      ASSERT_TRUE(sb.ok()) << sb.ToString();
      EXPECT_LE(worst, 4e-3);
      EXPECT_EQ(out_a, out_b);  // bit for bit the consumers' stores
      EXPECT_EQ(std::count(out_a.begin(), out_a.end(), 1e6), 0);
      // Mutant: no .read wait (persistent: the next tile's stmatrix rewrites the tile under the pending boxes;
      // not persistent: the kernel ends with them pending).
      tl::gpu::SimtKernel m = *a;
      EXPECT_EQ(DropReadWaits(m.body), 1);
      const tl::Status sm = RunWs(c, m, &worst);
      const int64_t tiles = ((c.N + c.bn - 1) / c.bn) * ((c.M + c.bm - 1) / c.bm);
      if (sms == 0) {
        EXPECT_NE(sm.ToString().find("never waited for (cp.async.bulk.wait_group) before the kernel's end"), std::string::npos)
            << sm.ToString();
      } else if (tiles > sms) {
        EXPECT_NE(sm.ToString().find("'s bulk copy of it to C is pending"), std::string::npos) << sm.ToString();
      }
    }
  }
  // ws_128x256_t256_s3 (f16 C; ragged rows and columns: the boxes clipped) and ws_128x256_t128_s2 (bf16 C, an
  // epilogue; its unpadded 64 KiB tile fits B_s's dead stages, the padded one did not), each plain and
  // persistent over 1 and 2 SMs.
  EXPECT_EQ(staged, 6);
  // Not warp-specialized: the swizzled tile is copied to C by the threads' vector stores, as before.
  {
    const WsCase& c = Cases()[2];
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.warp_specialize = false;
    o.tma_store = true;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("128B-swizzled for TMA tensor stores"), std::string::npos) << Notes(*k);
    EXPECT_EQ(Count<tl::gpu::STmaStore>(k->body), 0);
    // The unused map of C is dropped (no kernel parameter the runtime would encode for nothing); A's and B's stay.
    ASSERT_EQ(k->tensor_maps.size(), 2u);
    for (const tl::gpu::TensorMapDesc& m : k->tensor_maps) EXPECT_NE(k->params[static_cast<size_t>(m.param)].name, "C");
    double worst = 0;
    std::vector<double> out;
    const tl::Status st = RunWs(c, *k, &worst, 0, &out, 1e6);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_LE(worst, 4e-3);
    EXPECT_EQ(std::count(out.begin(), out.end(), 1e6), 0);
  }
  // The printed CUDA and ptxas: hopper_bench's GEMM (bf16, 128x256x64, 256 threads, 3 stages) persistent over 132 SMs.
  const WsCase big{"ws_tma_store_128x256x64_t256", 8192, 8192, 1024, 128, 256, 64, 256, false, "bf16", "bf16", 3, false};
  tl::gpu::GpuLowerOptions o = Sm90a();
  o.persistent_sms = 132;
  o.tma_store = true;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(big)), o);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_NE(Notes(*k).find("; persistent: 132 blocks over 2048 tiles"), std::string::npos) << Notes(*k);
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::string& s = src->source;
  EXPECT_NE(s.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), std::string::npos);
  const size_t loop = s.find("for (int tl_tile = bx; tl_tile < 2048; tl_tile += 132) {");
  ExpectDeferredStoreOrder(s, "for (int tl_tile = bx; tl_tile < 2048; tl_tile += 132) {", "tl_tma_store_2d(&tl_tmap");
  size_t boxes = 0;
  for (size_t at = s.find("tl_tma_store_2d(&tl_tmap", loop); at != std::string::npos; at = s.find("tl_tma_store_2d(&tl_tmap", at + 1)) {
    ++boxes;
  }
  EXPECT_EQ(boxes, 4u) << s;
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
  tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, big.name, "sm_90a");
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  std::printf("[ %s persistent sm_90a, TMA store ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n",
              big.name.c_str(), code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
  ExpectCleanSm90a(*code);
}

TEST(WarpSpecialize, OnlyThePipelinedTmaGemm) {
  // cp.async copies (no TMA): nothing to specialize, no note.
  tl::gpu::GpuLowerOptions cp = Sm90a();
  cp.tma_copies = false;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(Cases()[0])), cp);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->threads, 128);
  EXPECT_EQ(Notes(*k).find("warp-specialized"), std::string::npos) << Notes(*k);
  // Two TMA k-loops (each scaling its accumulator, so their wgmma stays
  // synchronous): one producer cannot serve two pipelines; the kernel stays
  // as the lowering made it, the note says why, the numbers stay right.
  {
    const std::string text = TwoScaledLoops(Cases()[0]);
    k = tl::gpu::LowerToSimt(Parse(text), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("not warp-specialized: more than one TMA pipeline"), std::string::npos) << Notes(*k);
    EXPECT_EQ(k->threads, 128);
    EXPECT_FALSE(Roles(*k));
    tl::StatusOr<tl::gpu::SimtKernel> off = tl::gpu::LowerToSimt(Parse(text), Sm90a(false));
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(tl::gpu::Dump(*k), tl::gpu::Dump(*off));
    double worst = 0;
    const tl::Status st = RunWs(Cases()[0], *k, &worst, 2);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_LE(worst, 1e-5);
  }
  // Persistent, but the epilogue tile (in B_s's memory) has no room of its own
  // under the budget (hopper_bench's 128x256x64 at 4 stages on the H200): the
  // kernel is warp-specialized as without persistent_sms (not left without its
  // producer warpgroup), runs, and the note says why it is not persistent.
  const WsCase c = Cases()[2];
  tl::gpu::GpuLowerOptions tight = Sm90a(false);
  tl::StatusOr<tl::gpu::SimtKernel> unspecialized = tl::gpu::LowerToSimt(Parse(Text(c)), tight);
  ASSERT_TRUE(unspecialized.ok());
  tight = Sm90a();
  tight.shared_budget_bytes = unspecialized->shared_bytes + 1024;
  tl::StatusOr<tl::gpu::SimtKernel> plain = tl::gpu::LowerToSimt(Parse(Text(c)), tight);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(Roles(*plain)) << Notes(*plain);
  tight.persistent_sms = 2;
  k = tl::gpu::LowerToSimt(Parse(Text(c)), tight);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("; not persistent: no shared memory for tl_epi_C_f outside the stages"), std::string::npos)
      << Notes(*k);
  EXPECT_EQ(Notes(*k).find("not warp-specialized"), std::string::npos) << Notes(*k);
  EXPECT_EQ(k->threads, c.threads + 128);
  EXPECT_EQ(tl::gpu::Dump(*k), tl::gpu::Dump(*plain));
  double worst = 0;
  const tl::Status st = RunWs(c, *k, &worst);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_LE(worst, 4e-3);
  // The non-persistent refusals stay as they were (no retry can help them).
  tl::gpu::GpuLowerOptions off = Sm90a(false);
  off.persistent_sms = 2;
  k = tl::gpu::LowerToSimt(Parse(Text(c)), off);
  ASSERT_TRUE(k.ok());
  EXPECT_NE(Notes(*k).find("not warp-specialized: turned off"), std::string::npos) << Notes(*k);
  EXPECT_EQ(Notes(*k).find("not persistent"), std::string::npos) << Notes(*k);
}

// The interpreter catches a broken protocol (see the file comment).
TEST(WarpSpecialize, BrokenProtocolsAreCaught) {
  const WsCase c = Cases()[1];  // 3 stages, 9 k-steps
  tl::StatusOr<tl::gpu::SimtKernel> good = tl::gpu::LowerToSimt(Parse(Text(c)), Sm90a());
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  const std::string empty_bar = [&] {
    for (const tl::gpu::SimtBuffer& b : good->buffers) {
      if (b.name.find("_empty") != std::string::npos) return b.name;
    }
    return std::string();
  }();
  ASSERT_FALSE(empty_bar.empty());
  double worst = 0;
  ASSERT_TRUE(RunWs(c, *good, &worst).ok());
  // 1. The producer does not wait for the release: it refills a stage before
  //    the consumers have even waited for its previous contents.
  {
    tl::gpu::SimtKernel k = *good;
    tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(k.body.back().node);
    int removed = 0;
    Walk(r.producer, [&](SStmt& s) {
      auto* i = std::get_if<tl::gpu::SIf>(&s.node);
      if (i && Count<tl::gpu::SMbarWait>(i->then_body) > 0 && Count<tl::gpu::SFor>(i->then_body) == 0) {
        i->then_body.clear();
        ++removed;
      }
    });
    EXPECT_EQ(removed, 1);
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_NE(st.ToString().find("overwrites a stage whose previous contents no thread has waited for yet"), std::string::npos)
        << st.ToString();
  }
  // 2. The consumers release the stage their just-issued group still reads
  //    (the current one, not the previous one): the refill races with it.
  {
    tl::gpu::SimtKernel k = *good;
    tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(k.body.back().node);
    int changed = 0;
    Walk(r.consumer, [&](SStmt& s) {
      auto* i = std::get_if<tl::gpu::SIf>(&s.node);
      if (!i || Count<tl::gpu::SMbarArrive>(i->then_body) == 0 || Count<tl::gpu::SIf>(i->then_body) == 0) return;
      i->cond = tl::ir::MakeInt(1, tl::ir::DType::kBool);  // from the first k-step on
      Walk(i->then_body, [&](SStmt& x) {
        if (auto* a = std::get_if<tl::gpu::SMbarArrive>(&x.node)) {
          a->index = tl::ir::MakeVar("tl_stage_0", tl::ir::DType::kI32);
          ++changed;
        }
      });
    });
    EXPECT_EQ(changed, 1);
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_NE(st.ToString().find("TMA copy writes "), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("while a wgmma group reading it is in flight"), std::string::npos) << st.ToString();
  }
  // 3. The consumers never release a stage: neither role can go on.
  {
    tl::gpu::SimtKernel k = *good;
    tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(k.body.back().node);
    Walk(r.consumer, [&](SStmt& s) {
      if (auto* a = std::get_if<tl::gpu::SMbarArrive>(&s.node)) s.node = tl::gpu::SComment{"no release of " + a->bar};
    });
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_NE(st.ToString().find("deadlock: wait on " + empty_bar), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("neither warp role can go on"), std::string::npos) << st.ToString();
  }
  // 4. A block barrier inside a role (the producer never reaches it).
  {
    tl::gpu::SimtKernel k = *good;
    tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(k.body.back().node);
    r.consumer.push_back(SStmt{tl::gpu::SBarrier{}});
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_NE(st.ToString().find("a block barrier inside a warp role"), std::string::npos) << st.ToString();
  }
}

// The printed CUDA: the roles, setmaxnreg, launch bounds, no __syncthreads
// after the split; ptxas (where a CUDA toolkit is installed) fixes the
// registers at entry to 65536 / (threads * min_blocks) and spills nothing.
TEST(WarpSpecialize, CudaSourceAndRegisters) {
  struct Big {
    WsCase c;
    int regs;  // at entry
  };
  const std::vector<Big> bigs = {
      // hopper_bench's best GEMM config (bf16 C, 128x256x64, 256 threads, 3 stages) and 128x128 / 128 threads.
      {{"ws_bench_128x256x64_t256", 4096, 4096, 4096, 128, 256, 64, 256, false, "bf16", "bf16", 3, false}, 168},
      {{"ws_128x128x64_t128", 4096, 4096, 4096, 128, 128, 64, 128, false, "f16", "f32", 3, false}, 128},
      {{"ws_128x128x64_t256", 4096, 4096, 4096, 128, 128, 64, 256, false, "f16", "f32", 4, false}, 168},
  };
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const Big& b : bigs) {
    SCOPED_TRACE(b.c.name);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(b.c)), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    const size_t split = s.find("if (tl_tid >= " + std::to_string(b.c.threads) + ") {");
    ASSERT_NE(split, std::string::npos) << s;
    EXPECT_NE(s.find("__launch_bounds__(" + std::to_string(b.c.threads + 128) + ", " + std::to_string(k->min_blocks) + ")"),
              std::string::npos);
    EXPECT_NE(s.find("setmaxnreg.dec.sync.aligned.u32 40;", split), std::string::npos);
    EXPECT_NE(s.find("setmaxnreg.inc.sync.aligned.u32 "), std::string::npos);
    EXPECT_EQ(s.find("__syncthreads();", split), std::string::npos) << s;
    EXPECT_NE(s.find("bar.sync 1, " + std::to_string(b.c.threads) + ";", split), std::string::npos);
    EXPECT_NE(s.find("wgmma.wait_group.sync.aligned 1;", split), std::string::npos);
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, b.c.name, "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ %s sm_90a ] %lld threads, __launch_bounds__(%lld, %lld): %d registers, %d spill bytes, %d stack bytes, "
                "%lld shared bytes\n",
                b.c.name.c_str(), static_cast<long long>(k->threads), static_cast<long long>(k->threads),
                static_cast<long long>(k->min_blocks), code->registers, code->spill_stores, code->stack_bytes,
                static_cast<long long>(k->shared_bytes));
    if (code->registers >= 0) {
      EXPECT_EQ(code->registers, b.regs) << code->log;
    }
    ExpectCleanSm90a(*code);
  }
  // Persistent over 132 SMs (the block variables shadowed per tile; ptxas accepts it, no spills).
  {
    const WsCase c = bigs[2].c;
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 132;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(Notes(*k).find("; persistent: 132 blocks over 1024 tiles"), std::string::npos) << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_NE(src->source.find("for (int tl_tile = bx; tl_tile < 1024; tl_tile += 132) {"), std::string::npos) << src->source;
    if (tc.ok()) {
      tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, c.name, "sm_90a");
      ASSERT_TRUE(code.ok()) << code.status().ToString();
      std::printf("[ %s persistent sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n", c.name.c_str(), code->registers,
                  code->spill_stores, static_cast<long long>(k->shared_bytes));
      EXPECT_EQ(code->spill_stores, 0) << code->log;
      EXPECT_EQ(code->stack_bytes, 0) << code->log;
    }
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// ---------------------------------------------------------------------------
// The synchronous-compute form: a k-loop whose compute waits for its own
// wgmma groups (FlashAttention's QK^T, softmax, P V) as producer and
// consumers; the stage is released at the end of the k-step.

// The consumers' k-loop (the one waiting on the full barriers).
const tl::gpu::SFor* ConsumerLoop(const tl::gpu::SWarpRoles& r) {
  for (const SStmt& s : r.consumer) {
    const auto* f = std::get_if<tl::gpu::SFor>(&s.node);
    if (f && Count<tl::gpu::SMbarWait>(f->body) > 0) return f;
  }
  return nullptr;
}

// The checks every synchronous-form kernel passes: T consumers + 128, no
// block barrier in either role, TMA only in the producer, the consumers'
// k-loop waits once and releases once per k-step, after its last wgmma.
void ExpectSyncForm(const tl::gpu::SimtKernel& k, int64_t T, bool shared_compute) {
  const std::string dump = tl::gpu::Dump(k);
  EXPECT_EQ(k.threads, T + 128);
  EXPECT_EQ(k.block[0], T + 128);
  const tl::gpu::SWarpRoles* r = Roles(k);
  ASSERT_TRUE(r) << dump;
  EXPECT_EQ(r->consumers, T);
  EXPECT_EQ(Count<tl::gpu::SBarrier>(r->producer) + Count<tl::gpu::SBarrier>(r->consumer), 0) << dump;
  EXPECT_EQ(Count<tl::gpu::SWgmma>(r->producer) + Count<tl::gpu::STmaLoad>(r->consumer), 0) << dump;
  EXPECT_GT(Count<tl::gpu::STmaLoad>(r->producer), 0);
  EXPECT_EQ(Count<tl::gpu::SSetMaxNReg>(r->producer), 1);
  EXPECT_EQ(Count<tl::gpu::SSetMaxNReg>(r->consumer), 1);
  const tl::gpu::SFor* loop = ConsumerLoop(*r);
  ASSERT_TRUE(loop) << dump;
  EXPECT_EQ(Count<tl::gpu::SMbarWait>(loop->body), 1) << dump;
  EXPECT_EQ(Count<tl::gpu::SMbarArrive>(loop->body), 1) << dump;
  EXPECT_GT(Count<tl::gpu::SWgmma>(loop->body), 0);
  // The release is the k-step's last statement: every wgmma before it.
  ASSERT_FALSE(loop->body.empty());
  EXPECT_EQ(Count<tl::gpu::SMbarArrive>(SBlock{loop->body.back()}), 1) << dump;
  // No barrier in the k-loop unless its compute writes shared memory; the
  // statements before it are published by a named barrier either way.
  if (shared_compute) {
    EXPECT_GT(Count<tl::gpu::SNamedBarrier>(loop->body), 0) << dump;
  } else {
    EXPECT_EQ(Count<tl::gpu::SNamedBarrier>(loop->body), 0) << dump;
  }
  bool published = false;
  for (const SStmt& s : r->consumer) {
    if (std::get_if<tl::gpu::SFor>(&s.node) == loop) break;
    published = std::holds_alternative<tl::gpu::SNamedBarrier>(s.node);
  }
  EXPECT_TRUE(published) << "no named barrier right before the consumers' k-loop\n" << dump;
}

// A k-loop that also scales the accumulator (wgmma stays synchronous): the
// synchronous form, no barrier in the k-loop (the scaling is in registers).
TEST(WarpSpecialize, SynchronousGemmLoopMatchesFloat64) {
  for (const WsCase& c : {Cases()[0], Cases()[1]}) {
    SCOPED_TRACE(c.name);
    const std::string text = ScaledLoops(c, 1);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(text), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("warp-specialized: " + std::to_string(c.threads) + " consumer threads + a 128-thread TMA producer "
                             "warpgroup, " + std::to_string(c.stages) + " stages on full/empty mbarriers, synchronous k-loop "
                             "compute (a stage released after it), no barrier in the k-loop"),
              std::string::npos)
        << Notes(*k);
    ExpectSyncForm(*k, c.threads, false);
    double worst = 0;
    const tl::Status st = RunWs(c, *k, &worst, 1);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << tl::gpu::Dump(*k);
    EXPECT_LE(worst, 1e-5);
    std::printf("[ %s scaled ] warp-specialized (synchronous), worst relative error %.3g\n", c.name.c_str(), worst);
    tl::StatusOr<tl::gpu::SimtKernel> off = tl::gpu::LowerToSimt(Parse(text), Sm90a(false));
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->threads, c.threads);
    EXPECT_FALSE(Roles(*off));
    EXPECT_NE(Notes(*off).find("not warp-specialized: turned off"), std::string::npos) << Notes(*off);
  }
}

struct FaCase {
  int64_t B, H, S, D;
  bool causal;
  int64_t bm, bn, threads, stages;
  std::string Args() const {
    char b[256];
    std::snprintf(b, sizeof b, "%lld, %lld, %lld, %lld, %lld, %lld, is_causal=%s, block_M=%lld, block_N=%lld, num_stages=%lld, "
                  "threads=%lld, dtype='bfloat16'", (long long)B, (long long)H, (long long)H, (long long)S, (long long)S,
                  (long long)D, causal ? "True" : "False", (long long)bm, (long long)bn, (long long)stages, (long long)threads);
    return b;
  }
};

// Random inputs (dtype-rounded, layout [B, H, S, D]) for Q, K, V; the kernel
// in the interpreter; the worst relative error of O against float64
// softmax(Q K^T / sqrt(D)) V (causal: key j <= query i).
// Skv > 0: that many keys (else S); causal then aligns the last query with
// the last key (query i sees keys j <= i + Skv - S; one that sees none gets
// O = 0). `computed`, where given, receives O as the kernel computed it.
tl::Status RunAttention(const tl::gpu::SimtKernel& k, int64_t B, int64_t H, int64_t S, int64_t D, bool causal,
                        const std::string& dt, const std::string& out, double* worst, int64_t Skv = 0,
                        std::vector<double>* computed = nullptr, const tl::gpu::test::InterpretOptions& io = {}) {
  if (Skv <= 0) Skv = S;
  std::mt19937 rng(static_cast<uint32_t>(S * 7 + D + causal));
  std::uniform_real_distribution<double> d(-1, 1);
  const int64_t n = B * H * S * D;
  std::map<std::string, std::vector<double>> t;
  for (const char* x : {"Q", "K", "V"}) {
    t[x].resize(static_cast<size_t>(std::string(x) == "Q" ? n : B * H * Skv * D));
    for (double& v : t[x]) v = Round(d(rng) * 2, dt);
  }
  t[out].assign(static_cast<size_t>(n), -7);
  const std::vector<double> q = t["Q"], kk = t["K"], v = t["V"];
  const tl::Status st = tl::gpu::test::Interpret(k, &t, {}, io);
  if (computed) *computed = t[out];
  *worst = 0;
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const double* Q = &q[static_cast<size_t>(bh * S * D)];
    const double* K = &kk[static_cast<size_t>(bh * Skv * D)];
    const double* V = &v[static_cast<size_t>(bh * Skv * D)];
    for (int64_t i = 0; i < S; ++i) {
      const int64_t keys = causal ? std::max<int64_t>(0, std::min(Skv, i + 1 + Skv - S)) : Skv;
      std::vector<double> p(static_cast<size_t>(keys));
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double s = 0;
        for (int64_t x = 0; x < D; ++x) s += Q[i * D + x] * K[j * D + x];
        p[static_cast<size_t>(j)] = s / std::sqrt(static_cast<double>(D));
        m = std::max(m, p[static_cast<size_t>(j)]);
      }
      for (double& x : p) sum += (x = std::exp(x - m));
      for (int64_t x = 0; x < D; ++x) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j) acc += p[static_cast<size_t>(j)] * V[j * D + x];
        acc = keys > 0 ? acc / sum : 0.0;
        const double got = t[out][static_cast<size_t>((bh * S + i) * D + x)];
        *worst = std::max(*worst, std::fabs(got - acc) / (1 + std::fabs(acc)));
      }
    }
  }
  return st;
}

// kernels/attention.py's flash_attention with two consumer warpgroups
// (block_M 128, 256 threads), 2 and 3 stages, several k-steps (ragged last
// blocks), causal and not: warp-specialized, no barrier in the k-loop, the
// numbers against float64; TL_CUDA_WS=0's lowering stays as it was. The
// interpreter catches a producer that does not wait for a stage's release
// and consumers that never release one.
TEST(WarpSpecialize, LibraryFlashAttentionMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  const std::vector<FaCase> cases = {
      {1, 2, 300, 64, true, 128, 64, 256, 2},
      {1, 1, 400, 64, false, 128, 64, 256, 3},
      {1, 1, 200, 128, false, 128, 128, 256, 2},
      {1, 1, 330, 128, true, 128, 64, 256, 3},
  };
  for (const FaCase& c : cases) {
    SCOPED_TRACE(c.Args());
    std::string err;
    const std::string ir = AttentionIr(c.Args(), &err);
    ASSERT_FALSE(ir.empty()) << "kernels/attention.py did not emit Tile IR: " << err;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("warp-specialized: 256 consumer threads + a 128-thread TMA producer warpgroup, " +
                             std::to_string(c.stages) + " stages on full/empty mbarriers, synchronous k-loop compute (a stage "
                             "released after it), no barrier in the k-loop"),
              std::string::npos)
        << Notes(*k);
    ExpectSyncForm(*k, 256, false);
    // Both gemms in the consumers' k-loop, each waiting for its own group.
    const tl::gpu::SFor* loop = ConsumerLoop(*Roles(*k));
    ASSERT_TRUE(loop);
    EXPECT_EQ(Count<tl::gpu::SWgmma>(loop->body), 2);
    double worst = 0;
    const tl::Status st = RunAttention(*k, c.B, c.H, c.S, c.D, c.causal, "bf16", "O", &worst);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << tl::gpu::Dump(*k);
    EXPECT_LE(worst, 1e-2);
    std::printf("[ flash_attention %s ] warp-specialized, worst relative error %.3g\n", c.Args().c_str(), worst);
    tl::StatusOr<tl::gpu::SimtKernel> off = tl::gpu::LowerToSimt(Parse(ir), Sm90a(false));
    ASSERT_TRUE(off.ok());
    EXPECT_EQ(off->threads, 256);
    EXPECT_FALSE(Roles(*off));
    EXPECT_NE(Notes(*off).find("not warp-specialized: turned off"), std::string::npos) << Notes(*off);
    if (&c != &cases[1]) continue;
    // Broken protocols (7 k-steps over 3 stages). 1. The producer does not
    // wait for the release: it refills a stage nobody has consumed yet.
    {
      tl::gpu::SimtKernel b = *k;
      tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(b.body.back().node);
      int removed = 0;
      Walk(r.producer, [&](SStmt& s) {
        auto* i = std::get_if<tl::gpu::SIf>(&s.node);
        if (i && Count<tl::gpu::SMbarWait>(i->then_body) > 0 && Count<tl::gpu::SFor>(i->then_body) == 0) {
          i->then_body.clear();
          ++removed;
        }
      });
      EXPECT_EQ(removed, 1);
      const tl::Status bad = RunAttention(b, c.B, c.H, c.S, c.D, c.causal, "bf16", "O", &worst);
      EXPECT_NE(bad.ToString().find("overwrites a stage whose previous contents no thread has waited for yet"), std::string::npos)
          << bad.ToString();
    }
    // 2. The consumers never release a stage: the producer waits forever.
    {
      tl::gpu::SimtKernel b = *k;
      tl::gpu::SWarpRoles& r = std::get<tl::gpu::SWarpRoles>(b.body.back().node);
      Walk(r.consumer, [&](SStmt& s) {
        if (auto* a = std::get_if<tl::gpu::SMbarArrive>(&s.node)) s.node = tl::gpu::SComment{"no release of " + a->bar};
      });
      const tl::Status bad = RunAttention(b, c.B, c.H, c.S, c.D, c.causal, "bf16", "O", &worst);
      EXPECT_NE(bad.ToString().find("_empty"), std::string::npos) << bad.ToString();
      EXPECT_NE(bad.ToString().find("neither warp role can go on"), std::string::npos) << bad.ToString();
    }
  }
}

// The compiler.gpu test kernel flash_attn (one warpgroup, 3 stages, causal,
// P in registers) is warp-specialized on sm_90a -- so Exec/Run.
// FlashAttentionPipelined/Gpu runs this form on an H200 -- and with P in a
// shared tile the compute writes shared memory: a named barrier among the
// consumers stays where the block barrier was, and the numbers stay right.
TEST(WarpSpecialize, FlashAttentionSharedProbabilities) {
  std::string text;
  for (const TestKernel& tk : TestKernels()) {
    if (tk.name == "flash_attn") text = tk.text;
  }
  ASSERT_FALSE(text.empty()) << "no test kernel flash_attn in kernels.h";
  // flash_attn_2wg (Exec/Run.FlashAttentionTwoWarpgroups): two consumer
  // warpgroups with no barrier between them in the k-loop.
  for (const TestKernel& tk : TestKernels()) {
    if (tk.name != "flash_attn_2wg") continue;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(tk.text), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("warp-specialized: 256 consumer threads + a 128-thread TMA producer warpgroup, 2 stages on "
                             "full/empty mbarriers, synchronous k-loop compute (a stage released after it), no barrier in "
                             "the k-loop"),
              std::string::npos)
        << Notes(*k);
    ExpectSyncForm(*k, 256, false);
    double worst = 0;
    const tl::Status st = RunAttention(*k, 1, 2, 300, 64, false, "f16", "Output", &worst);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_LE(worst, 3e-3);
    std::printf("[ flash_attn_2wg ] warp-specialized, worst relative error %.3g\n", worst);
  }
  for (bool shared_p : {false, true}) {
    SCOPED_TRACE(shared_p ? "P in shared memory" : "P in registers");
    std::string t = text;
    if (shared_p) {
      const std::string frag = "alloc acc_s_cast: fragment[64, 32] f16";
      ASSERT_NE(t.find(frag), std::string::npos);
      t.replace(t.find(frag), frag.size(), "alloc acc_s_cast: shared[64, 32] f16");
    }
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(t), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find(std::string("warp-specialized: 128 consumer threads + a 128-thread TMA producer warpgroup, 3 stages "
                                         "on full/empty mbarriers, synchronous k-loop compute (a stage released after it), ") +
                             (shared_p ? "a named barrier among the consumers in the k-loop (its compute writes shared memory)"
                                       : "no barrier in the k-loop")),
              std::string::npos)
        << Notes(*k);
    ExpectSyncForm(*k, 128, shared_p);
    double worst = 0;
    const tl::Status st = RunAttention(*k, 2, 2, 100, 32, true, "f16", "Output", &worst);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << tl::gpu::Dump(*k);
    EXPECT_LE(worst, 3e-3);
    std::printf("[ flash_attn, %s ] warp-specialized, worst relative error %.3g\n", shared_p ? "shared P" : "register P", worst);
  }
}

// The printed CUDA of kernels/attention.py's flash_attention at hopper_bench's
// shape (D 128 bf16, block_M 128, 256 threads, 2 stages) with block_N 64 and
// 128: the roles, no __syncthreads after the split, ptxas (where a CUDA
// toolkit is installed) fixes 168 registers at entry and spills nothing.
TEST(WarpSpecialize, LibraryFlashAttentionRegisters) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const FaCase& c : std::vector<FaCase>{{4, 32, 4096, 128, false, 128, 64, 256, 2},
                                             {4, 32, 4096, 128, false, 128, 128, 256, 2},
                                             {4, 32, 4096, 128, true, 128, 128, 256, 2}}) {
    SCOPED_TRACE(c.Args());
    std::string err;
    const std::string ir = AttentionIr(c.Args(), &err);
    ASSERT_FALSE(ir.empty()) << err;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(Notes(*k).find("warp-specialized: 256 consumer threads"), std::string::npos) << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    const size_t split = s.find("if (tl_tid >= 256) {");
    ASSERT_NE(split, std::string::npos);
    EXPECT_NE(s.find("__launch_bounds__(384, 1)"), std::string::npos);
    EXPECT_NE(s.find("setmaxnreg.dec.sync.aligned.u32 40;", split), std::string::npos);
    EXPECT_NE(s.find("setmaxnreg.inc.sync.aligned.u32 232;", split), std::string::npos);
    EXPECT_EQ(s.find("__syncthreads();", split), std::string::npos);
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "fa", "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ flash_attention %s sm_90a, warp-specialized ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n",
                c.Args().c_str(), code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    ExpectCleanSm90a(*code, 168);
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// ---------------------------------------------------------------------------
// WarpgroupPingpong (pingpong.cc): flash_attention(pingpong=True) with two
// consumer warpgroups takes turns on named barriers 2 and 3 around each
// k-step's first wgmma issue(s). The interpreter replays every warp's
// named-barrier operations with the hardware's semantics (a deadlock, an
// arrival running ahead into the wrong phase, a phase left open at the
// block's end are errors), so the tests check the protocol, that the numbers
// are bit for bit those without pingpong (and right against float64), and
// that broken protocols are caught.

std::string PingpongArgs(int64_t S, int64_t Skv, int64_t D, bool causal, int64_t bn, int64_t stages, bool overlap,
                         bool pingpong, int64_t threads = 256) {
  char b[320];
  std::snprintf(b, sizeof b, "1, 1, 1, %lld, %lld, %lld, is_causal=%s, block_M=%lld, block_N=%lld, num_stages=%lld, threads=%lld, "
                "dtype='bfloat16', overlap=%s, pingpong=%s", (long long)S, (long long)Skv, (long long)D, causal ? "True" : "False",
                (long long)(threads / 2), (long long)bn, (long long)stages, (long long)threads, overlap ? "True" : "False",
                pingpong ? "True" : "False");
  return b;
}

// The named barriers of a block (nested included): {id, arrive} in order.
std::vector<std::pair<int64_t, bool>> NamedBarriers(const SBlock& b) {
  std::vector<std::pair<int64_t, bool>> out;
  Walk(const_cast<SBlock&>(b), [&](SStmt& s) {
    if (const auto* n = std::get_if<tl::gpu::SNamedBarrier>(&s.node)) out.push_back({n->id, n->arrive});
  });
  return out;
}

// The overlap k-loop issues its gemms inside the branches of its step
// kinds (`if (k < n) {S; [P V]; ...; wait 0} else {if (k > 0) {P V; wait
// 0}}`): the warp specialization takes it because every path retires its
// groups within the k-step, and refuses it where one path does not (the
// consumers would release the stage while that path's P V still reads V).
TEST(WarpSpecialize, OverlapLoopEveryPathRetiresItsGroups) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  std::string err;
  const std::string ir = AttentionIr(PingpongArgs(260, 260, 64, true, 64, 2, true, false), &err);
  ASSERT_FALSE(ir.empty()) << "kernels/attention.py did not emit Tile IR: " << err;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), Sm90a(false));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const int64_t budget = 227 * 1024;
  tl::gpu::SimtKernel ok = *k;
  EXPECT_EQ(tl::gpu::WarpSpecializeGemmPipeline(&ok, budget).rfind("warp-specialized: ", 0), 0u);
  // Drop the wait_group 0 of the last step's P V (the else branch of the
  // k-loop's top-level if that holds the wgmmas).
  tl::gpu::SimtKernel bad = *k;
  int dropped = 0;
  for (SStmt& s : bad.body) {
    auto* f = std::get_if<tl::gpu::SFor>(&s.node);
    if (!f) continue;
    for (SStmt& x : f->body) {
      auto* i = std::get_if<tl::gpu::SIf>(&x.node);
      if (!i || i->else_body.empty() || !Count<tl::gpu::SWgmma>(i->then_body)) continue;
      Walk(i->else_body, [&](SStmt& y) {
        auto* inner = std::get_if<tl::gpu::SIf>(&y.node);
        if (!inner || inner->then_body.empty() || !std::holds_alternative<tl::gpu::SWgmmaWait>(inner->then_body.back().node)) return;
        inner->then_body.pop_back();
        ++dropped;
      });
    }
  }
  ASSERT_EQ(dropped, 1) << tl::gpu::Dump(*k);
  EXPECT_EQ(tl::gpu::WarpSpecializeGemmPipeline(&bad, budget),
            "not warp-specialized: a wgmma group left in flight (wg_wait) is not retired (wait_group 0) within its k-step");
}

TEST(WarpSpecialize, FlashAttentionPingpongMatchesPlain) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  struct PpCase {
    int64_t S, Skv, D;
    bool causal;
    int64_t bn, stages;
    bool overlap;
    bool branched = false;  // the overlap loop's branched step kinds (uniform_overlap_steps=False), not its default here
  };
  const std::vector<PpCase> cases = {
      {300, 300, 128, false, 128, 2, false},  // the bench's D128 tile, 3 k-steps (a ragged last one)
      {330, 330, 64, true, 64, 3, false},     // causal: 1..6 k-steps per query block
      {300, 100, 64, true, 64, 2, false},     // causal, fewer keys: query block 0 has no k-step at all
      {260, 260, 64, true, 64, 2, true},      // the overlap loop: S_k and P_{k-1} V_{k-1} issued in one turn
      {260, 260, 64, true, 64, 2, true, true},
      {300, 100, 64, true, 64, 2, true, true},  // overlap with 1-step (n_blocks 0) query blocks
      {300, 100, 64, true, 64, 2, true},
      {200, 200, 128, false, 128, 2, true},
  };
  for (const PpCase& c : cases) {
    const std::string steps = !c.overlap ? "" : c.branched ? ", uniform_overlap_steps=False" : ", uniform_overlap_steps=True";
    const std::string args = PingpongArgs(c.S, c.Skv, c.D, c.causal, c.bn, c.stages, c.overlap, true) + steps;
    SCOPED_TRACE(args);
    std::string err;
    const std::string ir = AttentionIr(args, &err);
    ASSERT_FALSE(ir.empty()) << "kernels/attention.py did not emit Tile IR: " << err;
    ASSERT_NE(ir.find("hint warpgroup_pingpong"), std::string::npos);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string dump = tl::gpu::Dump(*k);
    const std::string notes = Notes(*k);
    EXPECT_NE(notes.find("warp-specialized: 256 consumer threads"), std::string::npos) << notes;
    EXPECT_NE(notes.find("warpgroup pingpong: the two consumer warpgroups take turns issuing "), std::string::npos) << notes;
    EXPECT_NE(notes.find(c.overlap ? "asynchronous wgmma issue(s) and the leading issues of both branches" : "then wait_group 0"),
              std::string::npos)
        << notes;
    const tl::gpu::SWarpRoles* r = Roles(*k);
    ASSERT_TRUE(r);
    const tl::gpu::SFor* loop = ConsumerLoop(*r);
    ASSERT_TRUE(loop) << dump;
    // The k-step: one sync per warpgroup before the issue, one arrival on
    // the other's barrier after it (the overlap loop's handover sits on each
    // of its paths: uniform, `S; if (k > 0) {P V} else {}`; branched, `if (k
    // < n) { S; if (k > 0) {P V} else {} } else { if (k > 0) {P V} else {} }`);
    // nothing else among the consumers.
    const std::vector<std::pair<int64_t, bool>> bars = NamedBarriers(loop->body);
    const std::vector<std::pair<int64_t, bool>> want =
        c.branched  ? std::vector<std::pair<int64_t, bool>>{{2, false}, {3, false}, {3, true}, {2, true}, {3, true},
                                                            {2, true}, {3, true}, {2, true}, {3, true}, {2, true}}
        : c.overlap ? std::vector<std::pair<int64_t, bool>>{{2, false}, {3, false}, {3, true}, {2, true}, {3, true}, {2, true}}
                    : std::vector<std::pair<int64_t, bool>>{{2, false}, {3, false}, {3, true}, {2, true}};
    EXPECT_EQ(bars, want) << dump;
    EXPECT_EQ(NamedBarriers(r->producer).size(), 0u);
    EXPECT_EQ(Count<tl::gpu::SMbarWait>(loop->body), 1) << dump;
    EXPECT_EQ(Count<tl::gpu::SMbarArrive>(SBlock{loop->body.back()}), 1) << dump;
    double worst = 0, worst_plain = 0;
    std::vector<double> got, plain;
    const tl::Status st = RunAttention(*k, 1, 1, c.S, c.D, c.causal, "bf16", "O", &worst, c.Skv, &got);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    EXPECT_LE(worst, 1e-2);
    // The same kernel without the hint: the same numbers, bit for bit.
    const std::string plain_ir =
        AttentionIr(PingpongArgs(c.S, c.Skv, c.D, c.causal, c.bn, c.stages, c.overlap, false) + steps, &err);
    tl::StatusOr<tl::gpu::SimtKernel> pk = tl::gpu::LowerToSimt(Parse(plain_ir), Sm90a());
    ASSERT_TRUE(pk.ok()) << pk.status().ToString();
    EXPECT_EQ(Notes(*pk).find("pingpong"), std::string::npos) << Notes(*pk);
    ASSERT_TRUE(RunAttention(*pk, 1, 1, c.S, c.D, c.causal, "bf16", "O", &worst_plain, c.Skv, &plain).ok());
    EXPECT_EQ(got, plain);
    std::printf("[ flash_attention %s ] pingpong, worst relative error %.3g (plain %.3g)\n", args.c_str(), worst, worst_plain);
    if (&c != &cases[0]) continue;
    // Broken protocols (3 k-steps). Each mutation of the consumers' k-loop.
    auto broken = [&](const std::function<bool(SStmt&)>& mutate) {
      tl::gpu::SimtKernel b = *k;
      tl::gpu::SWarpRoles& br = std::get<tl::gpu::SWarpRoles>(b.body.back().node);
      int changed = 0;
      Walk(br.consumer, [&](SStmt& s) { changed += mutate(s); });
      EXPECT_EQ(changed, 1);
      double w = 0;
      return RunAttention(b, 1, 1, c.S, c.D, c.causal, "bf16", "O", &w, c.Skv).ToString();
    };
    // The guard `if (k > k0)` around `bar.sync A` or `if (k + 1 < stop)` around `bar.arrive A`, dropped.
    auto unguard = [](bool arrive) {
      return [arrive](SStmt& s) {
        auto* i = std::get_if<tl::gpu::SIf>(&s.node);
        if (!i || i->then_body.size() != 1 || !i->else_body.empty()) return false;
        const auto* n = std::get_if<tl::gpu::SNamedBarrier>(&i->then_body[0].node);
        if (!n || n->arrive != arrive) return false;
        s = SStmt{i->then_body[0]};
        return true;
      };
    };
    // 1. Warpgroup 0 also waits for its turn at the first k-step: nobody gives it.
    const std::string b1 = broken(unguard(false));
    EXPECT_NE(b1.find("deadlock: warp 0 waits forever in bar.sync 2, 256"), std::string::npos) << b1;
    // 2. Warpgroup 1 hands the turn over after its last k-step too: a phase left open.
    const std::string b2 = broken(unguard(true));
    EXPECT_NE(b2.find("bar 2 left with 128 of 256 threads arrived at the block's end"), std::string::npos) << b2;
    // 3. Warpgroup 0 never hands the turn over: warpgroup 1 waits forever.
    const std::string b3 = broken([](SStmt& s) {
      const auto* n = std::get_if<tl::gpu::SNamedBarrier>(&s.node);
      if (!n || !n->arrive || n->id != 3) return false;
      s.node = tl::gpu::SComment{"no handover"};
      return true;
    });
    EXPECT_NE(b3.find("deadlock: warp "), std::string::npos) << b3;
    EXPECT_NE(b3.find("waits forever in bar.sync"), std::string::npos) << b3;
    // 4. Warpgroup 1 arrives on its own barrier instead: its arrival joins warpgroup 0's phase twice over.
    const std::string b4 = broken([](SStmt& s) {
      auto* n = std::get_if<tl::gpu::SNamedBarrier>(&s.node);
      if (!n || !n->arrive || n->id != 2) return false;
      n->id = 3;
      return true;
    });
    EXPECT_NE(b4.find("arrives twice in one phase of bar 3"), std::string::npos) << b4;
  }
}

// Where pingpong cannot apply the kernel stays as it was and the note says why.
TEST(WarpSpecialize, FlashAttentionPingpongRefusals) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  std::string err;
  // One consumer warpgroup (block_M 64, 128 threads).
  const std::string one = AttentionIr(PingpongArgs(200, 200, 64, false, 64, 2, false, true, 128), &err);
  ASSERT_FALSE(one.empty()) << err;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(one), Sm90a());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(Notes(*k).find("no warpgroup pingpong: 128 consumer threads (exactly two consumer warpgroups take turns)"),
            std::string::npos)
      << Notes(*k);
  EXPECT_EQ(NamedBarriers(ConsumerLoop(*Roles(*k))->body).size(), 0u);
  // Warp specialization off ('nows'): nothing to take turns in.
  const std::string two = AttentionIr(PingpongArgs(200, 200, 64, false, 64, 2, false, true), &err);
  tl::StatusOr<tl::gpu::SimtKernel> off = tl::gpu::LowerToSimt(Parse(two), Sm90a(false));
  ASSERT_TRUE(off.ok());
  EXPECT_NE(Notes(*off).find("no warpgroup pingpong: the kernel is not warp-specialized"), std::string::npos) << Notes(*off);
  double worst = 0;
  ASSERT_TRUE(RunAttention(*off, 1, 1, 200, 64, false, "bf16", "O", &worst).ok());
  EXPECT_LE(worst, 1e-2);
}

// The printed CUDA at hopper_bench's shapes: the barriers where intended, and
// ptxas' resource report (where a CUDA toolkit is installed).
TEST(WarpSpecialize, FlashAttentionPingpongSource) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  struct Src {
    int64_t D, bn;
    bool causal, overlap;
    bool spill_free;  // every case since P is kept packed (bf16x2, ForwardCastIntoWgmmaA); overlap at 128x128
                      // spilled while P was a second f32 fragment: D128 68 bytes, D64 causal 4 (ptxas 13.0)
  };
  for (const Src& c : std::vector<Src>{{128, 128, false, false, true},
                                       {128, 128, true, false, true},
                                       {64, 128, false, false, true},
                                       {64, 64, true, false, true},
                                       {128, 128, false, true, true},
                                       {64, 128, true, true, true},
                                       {64, 128, false, true, true},
                                       {128, 64, false, true, true}}) {
    char a[320];
    std::snprintf(a, sizeof a, "4, 32, 32, 4096, 4096, %lld, is_causal=%s, block_M=128, block_N=%lld, num_stages=2, threads=256, "
                  "dtype='bfloat16', overlap=%s, pingpong=True", (long long)c.D, c.causal ? "True" : "False", (long long)c.bn,
                  c.overlap ? "True" : "False");
    SCOPED_TRACE(a);
    std::string err;
    const std::string ir = AttentionIr(a, &err);
    ASSERT_FALSE(ir.empty()) << err;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(Notes(*k).find("warpgroup pingpong: "), std::string::npos) << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    const size_t consumers = s.find("} else {  // consumers");
    ASSERT_NE(consumers, std::string::npos);
    // In the consumers' k-loop, in this order: the turn (sync), the first
    // wgmma's issue, the handover (arrive), then its wait_group 0 (plain).
    const size_t sync2 = s.find("bar.sync 2, 256;", consumers), sync3 = s.find("bar.sync 3, 256;", consumers);
    const size_t issue = s.find("wgmma.mma_async", sync3);
    const size_t arr3 = s.find("bar.arrive 3, 256;", issue), arr2 = s.find("bar.arrive 2, 256;", arr3);
    ASSERT_NE(sync2, std::string::npos);
    ASSERT_NE(sync3, std::string::npos);
    ASSERT_NE(issue, std::string::npos);
    ASSERT_NE(arr3, std::string::npos);
    ASSERT_NE(arr2, std::string::npos);
    EXPECT_LT(sync2, sync3);
    EXPECT_EQ(s.find("wgmma.wait_group", issue) > arr2, true);
    // The turn barriers order issue only: no proxy fence right before them.
    auto line_before = [&](size_t at) {
      const size_t end = s.rfind('\n', at), begin = s.rfind('\n', end - 1);
      return s.substr(begin + 1, end - begin - 1);
    };
    EXPECT_EQ(line_before(sync2).find("fence.proxy.async"), std::string::npos) << line_before(sync2);
    EXPECT_EQ(line_before(sync3).find("fence.proxy.async"), std::string::npos) << line_before(sync3);
    EXPECT_EQ(s.find("bar.sync 2,", 0), sync2);  // not in the producer
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "fa_pp", "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ flash_attention %s sm_90a ] %d registers, %d spill bytes, %d stack bytes\n", a, code->registers,
                code->spill_stores, code->stack_bytes);
    if (c.spill_free) {
      EXPECT_EQ(code->spill_stores, 0) << code->log;
      EXPECT_EQ(code->spill_loads, 0) << code->log;
    }
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << code->log;
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// Persistent FlashAttention (tl.persistent; cuDNN's FlashAttention runs one
// block per SM): kernels/attention.py's flash_attention over G blocks that
// loop over the (query block, head, batch) tiles -- fewer blocks than tiles,
// so blocks run several tiles and the barriers' phases carry across them;
// causal tiles have different k-step counts (and with fewer keys, none);
// plain, pingpong and the overlap loop. With O in a tile of its own
// (own_o_tile) the producer loads each tile's Q (GpuLowerOptions::
// tma_pre_copies) on its own full/empty barrier pair, released after the
// k-loop; with O staged through Q_s the kernel is as before (the consumers
// copy Q, a barrier ends each tile). The numbers against
// float64 and, bit for bit, against the non-persistent kernel; the
// interpreter catches a protocol that loses a phase across tiles or lets the
// producer overwrite Q_s before the consumers released it.
TEST(WarpSpecialize, PersistentFlashAttentionMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  struct PCase {
    int64_t S, Skv, D;
    bool causal;
    int64_t bn, stages;
    bool overlap, pingpong;
    int64_t sms;
    bool own_o = false;   // own_o_tile: O not staged through Q_s; the producer loads Q
    bool mutants = false;  // the broken protocols below, on this case
  };
  const std::vector<PCase> cases = {
      {300, 300, 128, false, 128, 2, false, false, 1},  // 3 tiles on 1 block: 3 k-steps each
      {330, 330, 64, true, 64, 3, false, false, 2, false, true},  // causal: 1..6 k-steps per tile, 3 tiles on 2 blocks
      // 4 k-steps per tile at 2 stages: the next tile's first stage is free after this tile's third
      // k-step, so the producer gets to the next Q load while the consumers still read this Q_s (a
      // load not held back by Q's release overwrites it there).
      {300, 512, 128, false, 128, 2, false, false, 1, true, true},
      {300, 100, 64, true, 64, 2, false, true, 1},      // pingpong; fewer keys: a tile with no k-step
      {260, 260, 64, true, 64, 2, true, true, 1},       // the overlap loop with pingpong
      {200, 200, 128, false, 128, 2, true, false, 1},
      // O in its own tile (the lowering's staged epilogue, moved out of the stages):
      {300, 300, 128, false, 128, 2, false, false, 1, true},        // plain
      {200, 200, 128, false, 128, 2, true, false, 1, true},         // overlap
      {300, 300, 128, false, 128, 2, true, true, 1, true},          // overlap + pingpong
      {330, 330, 64, true, 64, 3, false, false, 2, true, true},     // causal, 3 stages, 2 blocks
      {300, 100, 64, true, 64, 2, false, true, 1, true},            // causal pingpong with a tile of no k-step
  };
  for (const PCase& c : cases) {
    // Two heads: the tiles run over the head index too.
    std::string args = PingpongArgs(c.S, c.Skv, c.D, c.causal, c.bn, c.stages, c.overlap, c.pingpong);
    args.replace(0, 7, "1, 2, 2");
    if (c.own_o) args += ", own_o_tile=True";
    SCOPED_TRACE(args + ", over " + std::to_string(c.sms) + " SMs");
    std::string err;
    const std::string ir = AttentionIr(args, &err);
    ASSERT_FALSE(ir.empty()) << "kernels/attention.py did not emit Tile IR: " << err;
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = c.sms;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string dump = tl::gpu::Dump(*k), notes = Notes(*k);
    const int64_t tiles = (c.S + 127) / 128 * 2;
    const int64_t G = std::min(tiles, c.sms * k->min_blocks);
    ASSERT_LT(G, tiles);
    ASSERT_NE(notes.find("synchronous k-loop compute (a stage released after it), no barrier in the k-loop"), std::string::npos)
        << notes;
    ASSERT_NE(notes.find("; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles"),
              std::string::npos)
        << notes;
    // Q by the producer where O has its own tile (released after the k-loop); else as before.
    EXPECT_EQ(notes.find(std::string(tl::gpu::kProducerLoadsNote) + "Q_s on ") != std::string::npos, c.own_o) << notes;
    EXPECT_EQ(notes.find("tile copies before the pipeline stay with the consumers (as TMA: not warp-specialized: persistent: "
                         "Q_s (in the memory of a tile copied before the k-loop) is accessed after the k-loop") !=
                  std::string::npos,
              !c.own_o)
        << notes;
    EXPECT_EQ(notes.find(tl::gpu::kPreTmaNote) != std::string::npos, c.own_o) << notes;
    EXPECT_EQ(notes.find("pingpong") != std::string::npos, c.pingpong) << notes;
    ASSERT_EQ(k->grid.size(), 1u);
    EXPECT_EQ(tl::ir::FoldInt(k->grid[0]), std::optional<int64_t>(G));
    // Both roles loop over the tiles; the consumers' k-loop is in the tile loop; with own_o they load
    // nothing (Q's boxes are the producer's, issued in its k-loop's first step or alone for a tile without one).
    const tl::gpu::SWarpRoles* r = Roles(*k);
    ASSERT_TRUE(r);
    const tl::gpu::SFor* tile_loop = ConsumerLoop(*r);
    ASSERT_TRUE(tile_loop) << dump;
    EXPECT_EQ(tile_loop->var, "tl_tile");
    EXPECT_EQ(Count<tl::gpu::STmaLoad>(r->consumer), 0) << dump;
    int producer_tile_loops = 0, q_boxes = 0;
    Walk(const_cast<SBlock&>(r->producer), [&](SStmt& s) {
      const auto* f = std::get_if<tl::gpu::SFor>(&s.node);
      producer_tile_loops += f && f->var == "tl_tile";
      const auto* t = std::get_if<tl::gpu::STmaLoad>(&s.node);
      q_boxes += t && t->dst == "Q_s";
    });
    EXPECT_EQ(producer_tile_loops, 1) << dump;
    EXPECT_EQ(q_boxes, c.own_o ? 2 * (c.D / 64) : 0) << dump;  // 128-byte swizzle panels of Q, in two places
    const SBlock& tb = tile_loop->body;
    // O through Q_s: the tile ends with a named barrier (the next tile's Q copy after this tile's O reads of Q_s).
    EXPECT_EQ(std::holds_alternative<tl::gpu::SNamedBarrier>(tb.back().node), !c.own_o) << dump;
    // own_o: ... Q wait, its phase flip, barrier, k-loop, Q's release, barrier, post...
    size_t kl = 0;
    for (size_t i = 0; i < tb.size(); ++i) {
      if (const auto* f = std::get_if<tl::gpu::SFor>(&tb[i].node); f && Count<tl::gpu::SMbarWait>(f->body) > 0) kl = i;
    }
    ASSERT_GT(kl, 2u) << dump;
    const auto* qw = std::get_if<tl::gpu::SMbarWait>(&tb[kl - 3].node);
    ASSERT_EQ(qw != nullptr, c.own_o) << dump;
    const std::string q_full = qw ? qw->bar : "";
    auto is_release = [&](const SStmt& s) {
      const auto* i = std::get_if<tl::gpu::SIf>(&s.node);
      const auto* a = i && i->then_body.size() == 1 ? std::get_if<tl::gpu::SMbarArrive>(&i->then_body[0].node) : nullptr;
      return a && a->bar == q_full + "_empty";
    };
    EXPECT_EQ(is_release(tb[kl + 1]), c.own_o) << dump;
    double worst = 0, worst_once = 0, worst_eager = 0;
    std::vector<double> got, once, got_eager;
    const tl::Status st = RunAttention(*k, 1, 2, c.S, c.D, c.causal, "bf16", "O", &worst, c.Skv, &got);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    EXPECT_LE(worst, 1e-2);
    // The producer as far ahead as the protocol lets it (InterpretOptions::eager_roles): the same numbers.
    tl::gpu::test::InterpretOptions eager;
    eager.eager_roles = true;
    const tl::Status ste = RunAttention(*k, 1, 2, c.S, c.D, c.causal, "bf16", "O", &worst_eager, c.Skv, &got_eager, eager);
    ASSERT_TRUE(ste.ok()) << ste.ToString() << "\n" << dump;
    EXPECT_EQ(got_eager, got);
    // With persistent_ring (opt-in) the ring of stages continues across tiles (causal tiles advance it by
    // their own k-step counts, a tile without one not at all): the same numbers, also with the producer
    // as far ahead as it may run.
    EXPECT_EQ(notes.find("ring"), std::string::npos) << notes;
    {
      tl::gpu::GpuLowerOptions ring = o;
      ring.persistent_ring = true;
      tl::StatusOr<tl::gpu::SimtKernel> kr = tl::gpu::LowerToSimt(Parse(ir), ring);
      ASSERT_TRUE(kr.ok()) << kr.status().ToString();
      EXPECT_NE(Notes(*kr).find(", the stages' ring continuing across tiles"), std::string::npos) << Notes(*kr);
      for (bool eager_ring : {false, true}) {
        tl::gpu::test::InterpretOptions io;
        io.eager_roles = eager_ring;
        double worst_ring = 0;
        std::vector<double> got_ring;
        const tl::Status sr = RunAttention(*kr, 1, 2, c.S, c.D, c.causal, "bf16", "O", &worst_ring, c.Skv, &got_ring, io);
        ASSERT_TRUE(sr.ok()) << sr.ToString() << "\n" << tl::gpu::Dump(*kr);
        EXPECT_EQ(got_ring, got);
      }
    }
    tl::StatusOr<tl::gpu::SimtKernel> plain = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(Notes(*plain).find("persistent"), std::string::npos) << Notes(*plain);
    EXPECT_EQ(Notes(*plain).find(tl::gpu::kPreTmaNote), std::string::npos) << Notes(*plain);
    ASSERT_TRUE(RunAttention(*plain, 1, 2, c.S, c.D, c.causal, "bf16", "O", &worst_once, c.Skv, &once).ok());
    EXPECT_EQ(got, once);
    std::printf("[ flash_attention %s ] persistent over %lld blocks (%lld tiles), worst relative error %.3g\n", args.c_str(),
                static_cast<long long>(G), static_cast<long long>(tiles), worst);
    if (!c.mutants) continue;
    // Broken protocols: each must fail (an interpreter error) or give wrong numbers.
    auto broken = [&](const char* what, const std::function<int(tl::gpu::SWarpRoles&)>& mutate) {
      tl::gpu::SimtKernel b = *k;
      tl::gpu::SWarpRoles& br = std::get<tl::gpu::SWarpRoles>(b.body.back().node);
      EXPECT_GE(mutate(br), 1) << what << ": nothing changed\n" << dump;
      double bad_worst = 0;
      std::vector<double> bad_got;
      const tl::Status bad = RunAttention(b, 1, 2, c.S, c.D, c.causal, "bf16", "O", &bad_worst, c.Skv, &bad_got, eager);
      EXPECT_FALSE(bad.ok() && bad_got == got) << what << " went unnoticed";
      std::printf("[ broken: %s ] %s\n", what, bad.ok() ? "wrong numbers" : bad.ToString().substr(0, 200).c_str());
    };
    auto reset_at_tile = [](SBlock& role, const std::string& var) {
      int n = 0;
      Walk(role, [&](SStmt& s) {
        auto* f = std::get_if<tl::gpu::SFor>(&s.node);
        if (f && f->var == "tl_tile") {
          f->body.insert(f->body.begin(), SStmt{tl::gpu::SAssign{var, tl::ir::MakeInt(0)}});
          ++n;
        }
      });
      return n;
    };
    // 1. The consumers' stage phase bits restart at every tile (a phase lost across tiles; causal: the
    // k-step counts differ, so a tile ends with some stage's bit set).
    if (c.causal) broken("stage phase reset per tile", [&](tl::gpu::SWarpRoles& br) {
      std::string phase;
      for (const SStmt& s : br.consumer) {
        if (const auto* v = std::get_if<tl::gpu::SVar>(&s.node); v && phase.empty()) phase = v->name;
      }
      return reset_at_tile(br.consumer, phase);
    });
    if (!c.own_o) continue;
    // 2. The consumers' Q phase bit restarts at every tile: tile 2 reads Q_s before its Q arrived.
    broken("Q phase reset per tile (consumers)", [&](tl::gpu::SWarpRoles& br) {
      std::string phase;
      for (const SStmt& s : br.consumer) {
        if (const auto* v = std::get_if<tl::gpu::SVar>(&s.node)) phase = v->name;  // the last: Q's
      }
      return phase == std::get<tl::gpu::SAssign>(tb[kl - 2].node).name ? reset_at_tile(br.consumer, phase) : 0;
    });
    // 3. The producer's count of Q loads restarts at every tile: it never waits for Q's release.
    broken("Q load count reset per tile (producer)", [&](tl::gpu::SWarpRoles& br) {
      return reset_at_tile(br.producer, "tl_ws_qn");
    });
    // 4. The producer does not wait for Q's release before loading the next tile's Q.
    broken("no wait for Q's release", [&](tl::gpu::SWarpRoles& br) {
      int n = 0;
      Walk(br.producer, [&](SStmt& s) {
        const auto* w = std::get_if<tl::gpu::SMbarWait>(&s.node);
        if (w && w->bar == q_full + "_empty") {
          s.node = tl::gpu::SComment{"no wait"};
          ++n;
        }
      });
      return n;
    });
    // 5. The consumers release Q before the k-loop that reads it.
    broken("Q released before its last read", [&](tl::gpu::SWarpRoles& br) {
      for (SStmt& s : br.consumer) {
        auto* f = std::get_if<tl::gpu::SFor>(&s.node);
        if (!f || f->var != "tl_tile") continue;
        SBlock& body = f->body;
        for (size_t i = 0; i < body.size(); ++i) {
          if (!is_release(body[i])) continue;
          SStmt rel = body[i];
          body.erase(body.begin() + static_cast<std::ptrdiff_t>(i));
          body.insert(body.begin() + static_cast<std::ptrdiff_t>(kl - 1), rel);
          return 1;
        }
      }
      return 0;
    });
  }
}

// The persistent tile order (ChoosePersistentTileOrder, tile_order.cc): on
// causal FlashAttention's work -- query block x of X has X - x k-steps, + 1
// for the overlap loop -- the chosen order's simulated makespan is below the
// block order's, and its G consecutive tiles span at most twice the heads;
// the block order stays where the work is uniform, not monotone, where each
// block runs one tile, and where only an order streaming many heads at once
// would balance (64 x 32 on 132 blocks: sections of 32 heads beat the block
// order by 1.4 % but span 32 heads); where G is a multiple of X (FA3's
// 192-row tile) the diagonal. PersistentTileLets binds each tile to
// the (x, r) PersistentTileOf says, every tile exactly once.
TEST(WarpSpecialize, PersistentTileOrderChooser) {
  using tl::gpu::PersistentTileOrder;
  using Kind = PersistentTileOrder::Kind;
  auto causal = [](int64_t X) {
    std::vector<int64_t> w;
    for (int64_t x = 0; x < X; ++x) w.push_back(X - x + 1);
    return w;
  };
  const PersistentTileOrder block;
  for (auto [X, R] : std::vector<std::pair<int64_t, int64_t>>{{32, 128}, {64, 128}, {16, 128}}) {
    SCOPED_TRACE(std::to_string(X) + " x " + std::to_string(R));
    const std::vector<int64_t> w = causal(X);
    const PersistentTileOrder o = tl::gpu::ChoosePersistentTileOrder(w, R, 132);
    const int64_t base = tl::gpu::PersistentMakespan(block, w, R, 132), got = tl::gpu::PersistentMakespan(o, w, R, 132);
    int64_t total = 0;
    for (int64_t x : w) total += (x + 1) * R;
    std::printf("[ tile order %lld x %lld on 132 ] %s: makespan %.3f of the ideal (block order %.3f), %lld heads in flight "
                "(block order %lld)\n", (long long)X, (long long)R, tl::gpu::PersistentTileOrderName(o).c_str(),
                got * 132.0 / static_cast<double>(total), base * 132.0 / static_cast<double>(total),
                (long long)tl::gpu::PersistentWindowSpan(o, X, R, 132), (long long)tl::gpu::PersistentWindowSpan(block, X, R, 132));
    EXPECT_NE(o.kind, Kind::kBlockOrder);
    EXPECT_FALSE(o.heaviest_last);
    EXPECT_LE(got * 100, base * 99);
    EXPECT_LE(tl::gpu::PersistentWindowSpan(o, X, R, 132), 2 * tl::gpu::PersistentWindowSpan(block, X, R, 132));
  }
  {
    // FA3's 192-row tile at S = 4096 (bn 128): 22 query blocks, the last ragged; 132 = 6 x 22 blocks, so in
    // the block order (and the snake) each block runs one query block all along.
    std::vector<int64_t> w;
    for (int64_t x = 0; x < 22; ++x) w.push_back(std::min<int64_t>(32, ((22 - x) * 192 + 127) / 128));
    const PersistentTileOrder o = tl::gpu::ChoosePersistentTileOrder(w, 128, 132);
    const int64_t base = tl::gpu::PersistentMakespan(block, w, 128, 132), got = tl::gpu::PersistentMakespan(o, w, 128, 132);
    std::printf("[ tile order 22 x 128 on 132 (192-row tile) ] %s: makespan %lld k-steps (block order %lld, snake %lld)\n",
                tl::gpu::PersistentTileOrderName(o).c_str(), (long long)got, (long long)base,
                (long long)tl::gpu::PersistentMakespan({Kind::kSnake, 0, false}, w, 128, 132));
    EXPECT_EQ(o.kind, Kind::kDiagonal);
    EXPECT_LE(got * 10, base * 6);
  }
  EXPECT_EQ(tl::gpu::ChoosePersistentTileOrder(std::vector<int64_t>(32, 33), 128, 132), block);  // uniform: GEMM, non-causal
  EXPECT_EQ(tl::gpu::ChoosePersistentTileOrder(causal(32), 128, 4096), block);                   // one tile per block
  std::vector<int64_t> bumpy = causal(32);
  std::swap(bumpy[3], bumpy[20]);
  EXPECT_EQ(tl::gpu::ChoosePersistentTileOrder(bumpy, 128, 132), block);  // not monotone
  std::vector<int64_t> rising = causal(32);
  std::reverse(rising.begin(), rising.end());
  const PersistentTileOrder up = tl::gpu::ChoosePersistentTileOrder(rising, 128, 132);
  EXPECT_NE(up.kind, Kind::kBlockOrder);
  EXPECT_TRUE(up.heaviest_last);
  EXPECT_EQ(tl::gpu::PersistentMakespan(up, rising, 128, 132), tl::gpu::PersistentMakespan(
                PersistentTileOrder{up.kind, up.section, false}, causal(32), 128, 132));  // the mirror image
  {
    const std::vector<int64_t> w = causal(64);
    const PersistentTileOrder wide{Kind::kSections, 32, false};
    ASSERT_LE(tl::gpu::PersistentMakespan(wide, w, 32, 132) * 100, tl::gpu::PersistentMakespan(block, w, 32, 132) * 99);
    ASSERT_GT(tl::gpu::PersistentWindowSpan(wide, 64, 32, 132), 2 * tl::gpu::PersistentWindowSpan(block, 64, 32, 132));
    EXPECT_EQ(tl::gpu::ChoosePersistentTileOrder(w, 32, 132), block);
  }
  // The emitted lets against PersistentTileOf, on a 3-D grid (r = y + Y z).
  const std::vector<int64_t> grid{5, 3, 4};
  const int64_t X = 5, R = 12;
  for (const PersistentTileOrder& o : {block, PersistentTileOrder{Kind::kSnake, 0, false}, PersistentTileOrder{Kind::kSnake, 0, true},
                                       PersistentTileOrder{Kind::kDiagonal, 0, false}, PersistentTileOrder{Kind::kDiagonal, 0, true},
                                       PersistentTileOrder{Kind::kSections, 3, false}, PersistentTileOrder{Kind::kSections, 4, true},
                                       PersistentTileOrder{Kind::kSections, 12, false}}) {
    SCOPED_TRACE(tl::gpu::PersistentTileOrderName(o));
    const SBlock lets = tl::gpu::PersistentTileLets({"bx", "by", "bz"}, grid, o);
    std::set<std::vector<int64_t>> seen;
    for (int64_t t = 0; t < X * R; ++t) {
      std::map<std::string, int64_t, std::less<>> env{{"tl_tile", t}};
      const tl::ir::NameLookup lookup = [&](std::string_view n) -> std::optional<int64_t> {
        auto it = env.find(n);
        return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
      };
      for (const SStmt& s : lets) {
        const auto& l = std::get<tl::gpu::SLet>(s.node);
        const std::optional<int64_t> v = tl::ir::FoldInt(l.value, lookup);
        ASSERT_TRUE(v) << l.name;
        env[l.name] = *v;
      }
      const auto [x, r] = tl::gpu::PersistentTileOf(o, X, R, t);
      EXPECT_EQ(env["bx"], x) << t;
      EXPECT_EQ(env["by"], r % 3) << t;
      EXPECT_EQ(env["bz"], r / 3) << t;
      seen.insert({env["bx"], env["by"], env["bz"]});
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), X * R);
  }
}

// Persistent causal FlashAttention where the tile order is not the block
// order (the chooser's pick on these few tiles: sections of 4 (head, batch)
// pairs on 2 query blocks x 4 pairs over 4 blocks; the snake on 3 x 2 over
// 3; the diagonal on 3 x 3 over 3): the note names it, both roles bind the tile the same way, and the
// numbers match float64 and, bit for bit, the non-persistent kernel. A
// producer left in the block order (the consumers in the chosen one) is
// caught: it loads another tile's K and V or issues another number of
// k-steps.
TEST(WarpSpecialize, PersistentFlashAttentionBalancedOrder) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  struct OCase {
    int64_t S, B, H;
    bool overlap, pingpong;
    int64_t sms;
    std::string order;
  };
  const std::vector<OCase> cases = {
      {256, 2, 2, false, false, 4, "sections of 4"},
      {384, 1, 2, false, false, 3, "snake"},
      {384, 1, 2, true, true, 3, "snake"},
      {384, 1, 3, false, false, 3, "diagonal"},
  };
  for (const OCase& c : cases) {
    std::string args = PingpongArgs(c.S, c.S, 64, true, 64, 2, c.overlap, c.pingpong);
    args.replace(0, 7, std::to_string(c.B) + ", " + std::to_string(c.H) + ", " + std::to_string(c.H));
    SCOPED_TRACE(args + ", over " + std::to_string(c.sms) + " SMs");
    std::string err;
    const std::string ir = AttentionIr(args, &err);
    ASSERT_FALSE(ir.empty()) << "kernels/attention.py did not emit Tile IR: " << err;
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = c.sms;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string dump = tl::gpu::Dump(*k), notes = Notes(*k);
    const int64_t X = c.S / 128, tiles = X * c.H * c.B;
    ASSERT_EQ(k->min_blocks, 1);
    ASSERT_NE(notes.find("; persistent: " + std::to_string(c.sms) + " blocks over " + std::to_string(tiles) +
                         " tiles in a work-balanced order: " + c.order),
              std::string::npos)
        << notes;
    // Both roles' tile loops start with the same lets of the block indices.
    const tl::gpu::SWarpRoles* r = Roles(*k);
    ASSERT_TRUE(r);
    auto tile_lets = [&](const SBlock& body) {  // the leading lets of the tile and block indices, printed
      std::string out;
      for (const SStmt& s : body) {
        const auto* l = std::get_if<tl::gpu::SLet>(&s.node);
        if (!l) break;
        if (l->name == "tl_tile_rest" || std::count(k->block_vars.begin(), k->block_vars.end(), l->name)) {
          out += l->name + " = " + tl::ir::Print(l->value) + "; ";
        }
      }
      return out;
    };
    std::vector<std::string> heads;
    Walk(const_cast<SBlock&>(r->producer), [&](SStmt& s) {
      const auto* f = std::get_if<tl::gpu::SFor>(&s.node);
      if (f && f->var == "tl_tile") heads.push_back(tile_lets(f->body));
    });
    const tl::gpu::SFor* tile_loop = ConsumerLoop(*r);
    ASSERT_TRUE(tile_loop && tile_loop->var == "tl_tile") << dump;
    heads.push_back(tile_lets(tile_loop->body));
    ASSERT_EQ(heads.size(), 2u) << dump;
    EXPECT_EQ(heads[0], heads[1]);
    EXPECT_NE(heads[0].find("tl_tile_rest"), std::string::npos) << heads[0];
    double worst = 0, worst_once = 0;
    std::vector<double> got, once;
    const tl::Status st = RunAttention(*k, c.B, c.H, c.S, 64, true, "bf16", "O", &worst, c.S, &got);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    EXPECT_LE(worst, 1e-2);
    tl::StatusOr<tl::gpu::SimtKernel> plain = tl::gpu::LowerToSimt(Parse(ir), Sm90a());
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE(RunAttention(*plain, c.B, c.H, c.S, 64, true, "bf16", "O", &worst_once, c.S, &once).ok());
    EXPECT_EQ(got, once);
    std::printf("[ flash_attention %s ] persistent over %lld blocks in %s, worst relative error %.3g\n", args.c_str(),
                (long long)c.sms, c.order.c_str(), worst);
    // Broken: the producer's tile lets in the block order.
    tl::gpu::SimtKernel b = *k;
    tl::gpu::SWarpRoles& br = std::get<tl::gpu::SWarpRoles>(b.body.back().node);
    int replaced = 0;
    Walk(br.producer, [&](SStmt& s) {
      auto* f = std::get_if<tl::gpu::SFor>(&s.node);
      if (!f || f->var != "tl_tile") return;
      SBlock body = tl::gpu::PersistentTileLets(b.block_vars, {X, c.H, c.B}, {});
      for (SStmt& x : f->body) {
        const auto* l = std::get_if<tl::gpu::SLet>(&x.node);
        const bool tile_let = l && (l->name == "tl_tile_rest" ||
                                    std::find(b.block_vars.begin(), b.block_vars.end(), l->name) != b.block_vars.end());
        if (!tile_let) body.push_back(std::move(x));
      }
      f->body = std::move(body);
      ++replaced;
    });
    ASSERT_EQ(replaced, 1);
    double bad_worst = 0;
    std::vector<double> bad_got;
    const tl::Status bad = RunAttention(b, c.B, c.H, c.S, 64, true, "bf16", "O", &bad_worst, c.S, &bad_got);
    EXPECT_FALSE(bad.ok() && bad_got == once) << "a producer in another tile order than the consumers went unnoticed";
    std::printf("[ broken: producer in the block order ] %s\n",
                bad.ok() ? ("wrong numbers, worst relative error " + std::to_string(bad_worst)).c_str()
                         : bad.ToString().substr(0, 160).c_str());
  }
}

// The persistent FlashAttention of hopper_bench (D 128, 128x128, 2 stages, overlap + pingpong, own O
// tile): the producer's Q load in the printed CUDA, ptxas' resources (no spills, with or without it;
// before the consumers re-read the thread index per tile, O through Q_s spilled 84 bytes, own_o none).
TEST(WarpSpecialize, PersistentFlashAttentionQByProducerSource) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (bool own_o : {true, false}) {
    std::string args = PingpongArgs(4096, 4096, 128, false, 128, 2, true, true);
    args.replace(0, 7, "4, 32, 32");
    if (own_o) args += ", own_o_tile=True";
    SCOPED_TRACE(args);
    std::string err;
    const std::string ir = AttentionIr(args, &err);
    ASSERT_FALSE(ir.empty()) << err;
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 132;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ir), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_EQ(Notes(*k).find(tl::gpu::kProducerLoadsNote) != std::string::npos, own_o) << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    const size_t split = s.find("if (tl_tid >= 256) {"), consumers = s.find("setmaxnreg.inc");
    ASSERT_NE(split, std::string::npos);
    ASSERT_NE(consumers, std::string::npos);
    // own_o: Q's boxes (its map is the first) only in the producer, no Q loads in the consumers; else
    // the consumers' 16-byte copy as before.
    EXPECT_EQ(s.find("&Q_s[0], &tl_tmap0", split) != std::string::npos, own_o);
    EXPECT_EQ(s.find("tl_tma_load", consumers), std::string::npos);
    EXPECT_EQ(s.find("&Q[", consumers) == std::string::npos, own_o);
    EXPECT_EQ(s.find("__syncthreads();", split), std::string::npos);
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "fa_pq", "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ flash_attention %s sm_90a persistent ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n",
                args.c_str(), code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    ExpectCleanSm90a(*code);
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

// ---------------------------------------------------------------------------
// The staged epilogue's register -> shared stores as stmatrix.x4
// (GpuLowerOptions::stmatrix, SStmatrix): the interpreter runs the
// instruction as the PTX ISA defines it (matrix m's row r from the register
// pairs of lanes 4r..4r+3, stored at the address lane 8m+r gave), so a lane
// or register mapping that disagrees with the accumulator's layout changes
// C. The results must be bit for bit those of the per-element stores
// (stmatrix off), one- and multi-tile (persistent), 16-bit C; f32 C keeps
// the per-element stores.
TEST(WarpSpecialize, StmatrixEpilogueMatchesElementStores) {
  int with = 0;
  for (const WsCase& c : Cases()) {
    for (int64_t sms : {0, 2}) {
      SCOPED_TRACE(c.name + (sms ? " persistent" : ""));
      tl::gpu::GpuLowerOptions on = Sm90a(), off = Sm90a();
      on.persistent_sms = off.persistent_sms = sms;
      off.stmatrix = false;
      tl::StatusOr<tl::gpu::SimtKernel> a = tl::gpu::LowerToSimt(Parse(Text(c)), on);
      tl::StatusOr<tl::gpu::SimtKernel> b = tl::gpu::LowerToSimt(Parse(Text(c)), off);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
      const std::string dump = tl::gpu::Dump(*a);
      EXPECT_EQ(Count<tl::gpu::SStmatrix>(b->body), 0);
      // f32 C, or no stage buffer dead by the epilogue to hold the tile (128x256 over 128 threads at 2
      // stages): the per-element path (f32) or no staging at all.
      if (c.cdt == "f32" || Notes(*a).find("stored through a shared tile") == std::string::npos) {
        EXPECT_EQ(Count<tl::gpu::SStmatrix>(a->body), 0) << dump;
        continue;
      }
      // One per 16x16 block of each warp: bm * bn / (threads / 32) / 256 per thread, in unrolled loops.
      const int stsm = Count<tl::gpu::SStmatrix>(a->body);
      EXPECT_EQ(stsm, 1) << dump;
      EXPECT_NE(Notes(*a).find("stmatrix: C_f -> tl_epi_C_f as " + std::to_string(c.bm * c.bn / (c.threads / 32) / 256) +
                               " stmatrix.x4 per thread"),
                std::string::npos)
          << Notes(*a);
      ++with;
      std::map<std::string, std::vector<double>> ta, tb;
      auto run = [&](const tl::gpu::SimtKernel& k, std::map<std::string, std::vector<double>>* out) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> d(-1, 1);
        std::map<std::string, std::vector<double>>& t = *out;
        t["A"].resize(static_cast<size_t>(c.M * c.K));
        t["B"].resize(static_cast<size_t>(c.K * c.N));
        for (double& v : t["A"]) v = Round(d(rng), c.dt);
        for (double& v : t["B"]) v = Round(d(rng), c.dt);
        t["C"].assign(static_cast<size_t>(c.M * c.N), -7);
        const tl::Status st = tl::gpu::test::Interpret(k, &t);
        EXPECT_TRUE(st.ok()) << st.ToString();
      };
      run(*a, &ta);
      run(*b, &tb);
      ASSERT_EQ(ta["C"].size(), tb["C"].size());
      size_t differ = 0;
      for (size_t i = 0; i < ta["C"].size(); ++i) {
        differ += !(std::memcmp(&ta["C"][i], &tb["C"][i], sizeof(double)) == 0);
      }
      EXPECT_EQ(differ, 0u) << "elements of C that differ between stmatrix and per-element stores";
      // The check can fail: matrices 0 and 1 (rows +0 and +8) swapped in the registers, or each lane
      // giving the next row's address, and C differs.
      for (int broken = 0; broken < 2; ++broken) {
        tl::gpu::SimtKernel bad = *a;
        Walk(bad.body, [&](SStmt& x) {
          auto* m = std::get_if<tl::gpu::SStmatrix>(&x.node);
          if (!m) return;
          if (broken == 0) {
            std::swap(m->values[0], m->values[2]);
            std::swap(m->values[1], m->values[3]);
          } else {
            m->index = tl::ir::MakeBinary(tl::ir::BinaryOp::kAdd, m->index, tl::ir::MakeInt(c.bn + 8));
          }
        });
        std::map<std::string, std::vector<double>> tbad;
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> d(-1, 1);
        tbad["A"].resize(static_cast<size_t>(c.M * c.K));
        tbad["B"].resize(static_cast<size_t>(c.K * c.N));
        for (double& v : tbad["A"]) v = Round(d(rng), c.dt);
        for (double& v : tbad["B"]) v = Round(d(rng), c.dt);
        tbad["C"].assign(static_cast<size_t>(c.M * c.N), -7);
        const tl::Status st = tl::gpu::test::Interpret(bad, &tbad);
        if (!st.ok()) continue;  // (an out-of-bounds row is reported instead: also caught)
        size_t bad_differ = 0;
        for (size_t i = 0; i < tbad["C"].size(); ++i) bad_differ += tbad["C"][i] != tb["C"][i];
        EXPECT_GT(bad_differ, 0u) << "broken stmatrix " << broken << " not noticed";
      }
      double worst = 0;
      const tl::Status st = RunWs(c, *a, &worst);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_LE(worst, 4e-3);
    }
  }
  EXPECT_EQ(with, 2);  // ws_128x256_t256_s3 (f16 C), one- and multi-tile
}

// The bench GEMM's sm_90a source with stmatrix: the printed instruction,
// ptxas' resources (no spills) and STSM in the SASS; the per-element build
// for comparison (registers printed).
TEST(WarpSpecialize, StmatrixSourceAndSass) {
  const WsCase c{"ws_stsm_128x256x64_t256", 4096, 4096, 4096, 128, 256, 64, 256, false, "bf16", "bf16", 3, false};
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (int64_t sms : {0, 132}) {
    std::string sass[2];
    for (bool stsm : {true, false}) {
      SCOPED_TRACE(std::string(stsm ? "stmatrix" : "element stores") + (sms ? " persistent" : ""));
      tl::gpu::GpuLowerOptions o = Sm90a();
      o.persistent_sms = sms;
      o.stmatrix = stsm;
      tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
      ASSERT_TRUE(k.ok()) << k.status().ToString();
      tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
      ASSERT_TRUE(src.ok()) << src.status().ToString();
      const std::string& s = src->source;
      const size_t calls = [&] {
        size_t n = 0;
        for (size_t at = s.find("tl_stsm_x4(&"); at != std::string::npos; at = s.find("tl_stsm_x4(&", at + 1)) ++n;
        return n;
      }();
      EXPECT_EQ(calls, stsm ? 1u : 0u) << s;
      EXPECT_EQ(s.find("&tl_epi_C_f[") != std::string::npos && s.find("], tl_pack_bf16x2(") != std::string::npos, stsm) << s;
      if (!tc.ok()) continue;
      tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, c.name, "sm_90a");
      ASSERT_TRUE(code.ok()) << code.status().ToString();
      std::printf("[ %s%s, %s ] %d registers, %d spill bytes, %d stack bytes\n", c.name.c_str(), sms ? " persistent" : "",
                  stsm ? "stmatrix" : "element stores", code->registers, code->spill_stores, code->stack_bytes);
      ExpectCleanSm90a(*code);
      std::string cuobjdump;
      for (const char* x : {"/usr/local/cuda/bin/cuobjdump", "/usr/bin/cuobjdump"}) {
        if (cuobjdump.empty() && std::filesystem::exists(x)) cuobjdump = x;
      }
      if (cuobjdump.empty()) continue;
      const std::filesystem::path p = std::filesystem::temp_directory_path() / ("tl_ws_stsm_" + std::to_string(sms) + ".cubin");
      std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(code->bytes.data()),
                                               static_cast<std::streamsize>(code->bytes.size()));
      tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({cuobjdump, "-sass", p.string()});
      std::filesystem::remove(p);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      sass[stsm ? 0 : 1] = r.out;
    }
    if (!sass[0].empty()) {
      auto count = [](const std::string& x, const std::string& op) {
        size_t n = 0;
        for (size_t at = x.find(op); at != std::string::npos; at = x.find(op, at + 1)) ++n;
        return n;
      };
      // 128 x 256 over 8 warps: 16 STSM.16.M88.4 per thread; the element stores were 128 STS.U16.
      std::printf("[ %s%s ] SASS: stmatrix build %zu STSM, %zu STS; element stores %zu STSM, %zu STS\n", c.name.c_str(),
                  sms ? " persistent" : "", count(sass[0], "STSM"), count(sass[0], " STS"), count(sass[1], "STSM"),
                  count(sass[1], " STS"));
      EXPECT_EQ(count(sass[0], "STSM"), 16u) << sass[0];
      EXPECT_EQ(count(sass[1], "STSM"), 0u);
      EXPECT_LT(count(sass[0], " STS"), count(sass[1], " STS"));
    }
  }
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
}

}  // namespace

// ---------------------------------------------------------------------------
// The ping-pong GEMM (GpuLowerOptions::gemm_pingpong, PingpongGemm in
// warp_specialize.cc): two consumer warpgroups each running alternate tiles
// of a persistent block, one ring of stages across tiles, the order
// barriers 3/4. The interpreter runs each consumer warpgroup as an agent of
// its own (SWarpRoles::consumer_groups) with live named barriers, so a
// wrong stage or parity, or a missing handover, shows as a race, a wrong
// number or a deadlock.

namespace {

tl::StatusOr<tl::gpu::SimtKernel> LowerPingpong(const WsCase& c, int64_t sms, bool pingpong = true, bool bulk = false) {
  tl::gpu::GpuLowerOptions o = Sm90a();
  o.persistent_sms = sms;
  o.gemm_pingpong = pingpong;
  o.bulk_store = bulk;
  return tl::gpu::LowerToSimt(Parse(Text(c)), o);
}

// Whether a stmatrix or vector copy of b names shared buffer `name` (the staged epilogue's tile).
bool Stages(SBlock& b, const std::string& name) {
  bool on = false;
  Walk(b, [&](SStmt& s) {
    if (const auto* m = std::get_if<tl::gpu::SStmatrix>(&s.node)) on = on || m->buffer == name;
    if (const auto* v = std::get_if<tl::gpu::SCopyVec>(&s.node)) on = on || v->src == name || v->dst == name;
  });
  return on;
}

// Warpgroup w's branch of the ping-pong consumers (`if (tl_tid < 128) W(0) else W(1)`).
SBlock& PingpongWarpgroup(tl::gpu::SimtKernel& k, int w) {
  auto& r = std::get<tl::gpu::SWarpRoles>(k.body.back().node);
  auto& i = std::get<tl::gpu::SIf>(r.consumer.back().node);
  return w == 0 ? i.then_body : i.else_body;
}

TEST(WarpSpecialize, GemmPingpongMatchesFloat64AndCooperative) {
  struct Case {
    WsCase c;
    std::vector<int64_t> sms;
  };
  const std::vector<Case> cases = {
      // 2 x 2 tiles, 8 k-steps (> S = 2): 1 SM (4 tiles a block: even), 3 SMs (2 and 1 tiles: fewer than 2 G).
      {{"pp_128x128_s2_f32", 200, 136, 456, 128, 128, 64, 128, false, "f16", "f32", 2, false}, {1, 3}},
      // 3 x 3 tiles, ONE k-step, bf16 C staged through a shared tile (warpgroup 1's own copy), an epilogue:
      // 2 SMs (5 and 4 tiles), 4 SMs (3, 2, 2, 2).
      {{"pp_128x128_s3_bf16_k1", 300, 264, 40, 128, 128, 64, 128, true, "bf16", "bf16", 3, true}, {2, 4}},
      // 2 x 2 tiles, 9 k-steps (not a multiple of S = 4: each tile starts elsewhere in the ring), f16 C staged.
      {{"pp_128x128_s4_f16", 250, 200, 520, 128, 128, 64, 128, false, "f16", "f16", 4, false}, {1, 2}},
      // 64x256 tiles (one m64n256k16 wgmma per k16: the widest, and 128 accumulator registers a thread as
      // 128x128's): 3 x 2 tiles, 5 k-steps over 3 stages, bf16 C staged, an epilogue; 2 SMs (3 tiles each).
      {{"pp_64x256_s3_bf16", 150, 304, 320, 64, 256, 64, 128, false, "bf16", "bf16", 3, true}, {2}},
  };
  for (const Case& pc : cases) {
    const WsCase& c = pc.c;
    for (int64_t sms : pc.sms) {
      SCOPED_TRACE(c.name + " over " + std::to_string(sms) + " SMs");
      tl::StatusOr<tl::gpu::SimtKernel> k = LowerPingpong(c, sms), coop = LowerPingpong(c, sms, false);
      ASSERT_TRUE(k.ok() && coop.ok()) << k.status().ToString() << coop.status().ToString();
      const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
      const int64_t tiles = ((c.N + c.bn - 1) / c.bn) * ((c.M + c.bm - 1) / c.bm), G = std::min(tiles, sms);
      const int64_t Kt = (c.K + c.bk - 1) / c.bk;
      ASSERT_NE(notes.find("warp-specialized: ping-pong: two 128-thread consumer warpgroups"), std::string::npos) << notes;
      EXPECT_NE(notes.find(std::to_string(c.stages) + " stages on full/empty mbarriers in one ring across tiles (" +
                           std::to_string(Kt) + " k-steps a tile); registers 168 at entry (__launch_bounds__(384, 1)), "
                           "producer setmaxnreg.dec 40, consumers setmaxnreg.inc 232"),
                std::string::npos)
          << notes;
      EXPECT_NE(notes.find("; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles"),
                std::string::npos)
          << notes;
      EXPECT_EQ(Notes(*coop).find("ping-pong"), std::string::npos) << Notes(*coop);
      EXPECT_EQ(k->threads, 384);
      const tl::gpu::SWarpRoles* r = Roles(*k);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->consumers, 256);
      EXPECT_EQ(r->consumer_groups, 2);
      // A staged epilogue: warpgroup 1 stages its tile in its own copy, none overlapping another buffer it uses.
      const bool staged = notes.find("stored through a shared tile") != std::string::npos;
      EXPECT_EQ(staged, c.cdt != "f32") << notes;
      EXPECT_EQ(notes.find("warpgroup 1's own tl_epi_C_f (") != std::string::npos, staged) << notes;
      if (staged) {
        const tl::gpu::SimtBuffer *a = nullptr, *b = nullptr;
        for (const tl::gpu::SimtBuffer& x : k->buffers) {
          if (x.name == "tl_epi_C_f") a = &x;
          if (x.name == "tl_epi_C_f_wg1") b = &x;
        }
        ASSERT_TRUE(a && b);
        EXPECT_GE(b->shared_offset, a->shared_offset + a->elements * 2);
        EXPECT_TRUE(Stages(PingpongWarpgroup(*k, 1), "tl_epi_C_f_wg1"));
        EXPECT_FALSE(Stages(PingpongWarpgroup(*k, 1), "tl_epi_C_f"));
        EXPECT_TRUE(Stages(PingpongWarpgroup(*k, 0), "tl_epi_C_f"));
        EXPECT_FALSE(Stages(PingpongWarpgroup(*k, 0), "tl_epi_C_f_wg1"));
      }
      double worst = 0, worst_coop = 0;
      std::vector<double> out, out_coop;
      const tl::Status st = RunWs(c, *k, &worst, 0, &out), sc = RunWs(c, *coop, &worst_coop, 0, &out_coop);
      ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
      ASSERT_TRUE(sc.ok()) << sc.ToString();
      EXPECT_LE(worst, c.cdt == "f32" ? 1e-5 : 4e-3) << dump;
      EXPECT_EQ(out, out_coop);  // bit for bit the cooperative persistent kernel's C
      std::printf("[ %s ] ping-pong over %lld blocks (%lld tiles, %lld k-steps a tile)%s, worst relative error %.3g\n",
                  c.name.c_str(), static_cast<long long>(G), static_cast<long long>(tiles), static_cast<long long>(Kt),
                  staged ? ", staged epilogue" : "", worst);
    }
  }
}

// Broken ping-pong protocols the interpreter catches (4 tiles on one block, 9 k-steps, 2 stages: warpgroup
// 1's tiles start at odd places in the ring, so a tile-local stage or parity differs from the global one).
TEST(WarpSpecialize, GemmPingpongBrokenProtocolsAreCaught) {
  const WsCase c{"pp_mutants", 200, 136, 520, 128, 128, 64, 128, false, "f16", "f32", 2, false};
  tl::StatusOr<tl::gpu::SimtKernel> good = LowerPingpong(c, 1);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  double worst = 0;
  ASSERT_TRUE(RunWs(c, *good, &worst).ok());
  // Each mutant changes exactly one statement of one warpgroup's code and must fail with `want` in the
  // interpreter's message.
  auto mutant = [&](const char* what, int wg, const std::function<bool(SStmt&)>& mutate, const std::string& want) {
    tl::gpu::SimtKernel k = *good;
    int changed = 0;
    Walk(PingpongWarpgroup(k, wg), [&](SStmt& s) { changed += mutate(s) ? 1 : 0; });
    EXPECT_EQ(changed, 1) << what;
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_TRUE(!st.ok() || worst > 1e-5) << what << ": " << st.ToString();
    EXPECT_NE(st.ToString().find(want), std::string::npos) << what << ": " << st.ToString();
    std::printf("[ mutant: %s ] %s, worst %.3g\n", what, st.ToString().c_str(), worst);
  };
  // 1. Warpgroup 1 waits on the tile-local stage and parity (its tiles' place in the ring forgotten): the
  // producer refills a stage warpgroup 1's in-flight group still reads.
  mutant("warpgroup 1 tile-local stages", 1, [](SStmt& s) {
    auto* l = std::get_if<tl::gpu::SLet>(&s.node);
    if (!l || l->name != "tl_pp_base") return false;
    l->value = tl::ir::MakeInt(0);
    return true;
  }, "while a wgmma group reading it is in flight");
  // 2. Warpgroup 1's full wait with the wrong parity (the stage right).
  mutant("warpgroup 1 parity flipped", 1, [](SStmt& s) {
    auto* w = std::get_if<tl::gpu::SMbarWait>(&s.node);
    if (!w) return false;
    w->parity = tl::ir::MakeBinary(tl::ir::BinaryOp::kBitXor, w->parity, tl::ir::MakeInt(1));
    return true;
  }, "deadlock: ");
  // 3. Warpgroup 0 never hands the turn over (no bar.arrive 4): warpgroup 1 waits forever.
  mutant("warpgroup 0 without its handover", 0, [](SStmt& s) {
    auto* n = std::get_if<tl::gpu::SNamedBarrier>(&s.node);
    if (!n || !n->arrive) return false;
    s.node = tl::gpu::SComment{"no handover"};
    return true;
  }, "deadlock: bar.sync 4, 256 waits forever");
  // 4. Warpgroup 1 does not wait for its turn (no bar.sync 4): it reads the ring a round early.
  mutant("warpgroup 1 without its order wait", 1, [](SStmt& s) {
    auto* n = std::get_if<tl::gpu::SNamedBarrier>(&s.node);
    if (!n || n->id != 4 || n->arrive) return false;
    s.node = tl::gpu::SComment{"no order wait"};
    return true;
  }, "deadlock: wait on tl_mbar1[");
  // 5. The empty barriers count both warpgroups' warps (8): a stage is never released.
  {
    tl::gpu::SimtKernel k = *good;
    for (SStmt& s : k.body) {
      auto* i = std::get_if<tl::gpu::SMbarInit>(&s.node);
      if (i && i->bar.find("_empty") != std::string::npos) i->arrivals = 8;
    }
    const tl::Status st = RunWs(c, k, &worst);
    EXPECT_NE(st.ToString().find("deadlock: wait on "), std::string::npos) << st.ToString();
  }
}

// Where the ping-pong does not apply the kernel is lowered as without the option and the note says why.
TEST(WarpSpecialize, GemmPingpongIgnoredWithReason) {
  const WsCase t128{"pp_ignored_t128", 200, 136, 456, 128, 128, 64, 128, false, "f16", "f32", 2, false};
  const WsCase t256{"pp_ignored_t256", 200, 136, 456, 128, 128, 64, 256, false, "f16", "f32", 2, false};
  const WsCase staged{"pp_staged", 250, 200, 520, 128, 128, 64, 128, false, "f16", "f16", 4, false};
  struct Want {
    const WsCase* c;
    int64_t sms;
    bool bulk;
    std::string why;
  };
  for (const Want& w : std::vector<Want>{
           {&t128, 0, false, "not persistent (the two consumer warpgroups alternate a block's tiles: tl.persistent)"},
           {&t256, 1, false, "256 consumer threads (each consumer warpgroup owns a whole tile"},
       }) {
    SCOPED_TRACE(w.c->name);
    tl::StatusOr<tl::gpu::SimtKernel> k = LowerPingpong(*w.c, w.sms, true, w.bulk), plain = LowerPingpong(*w.c, w.sms, false, w.bulk);
    ASSERT_TRUE(k.ok() && plain.ok()) << k.status().ToString() << plain.status().ToString();
    EXPECT_NE(Notes(*k).find("; gemm_pingpong ignored: " + w.why), std::string::npos) << Notes(*k);
    EXPECT_EQ(Notes(*k).find("ping-pong"), std::string::npos);
    EXPECT_EQ(tl::gpu::Dump(*k), tl::gpu::Dump(*plain));
  }
  // A shared-memory budget without room for warpgroup 1's epilogue tile.
  {
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 1;
    o.gemm_pingpong = true;
    o.shared_budget_bytes = 200000;  // 4 stages (131072) + the moved tile (34816) fit, a second one does not
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(staged)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_NE(Notes(*k).find("; gemm_pingpong ignored: no shared memory for warpgroup 1's own 34816 bytes of epilogue buffers"),
              std::string::npos)
        << Notes(*k);
  }
}

// The printed CUDA and ptxas: hopper_bench's ping-pong GEMM config (bf16, 128x128x64, 128 threads, 4 stages)
// persistent over 132 SMs, 8192 x 8192 x 1024.
TEST(WarpSpecialize, GemmPingpongSourceAndRegisters) {
  const WsCase c{"pp_bench_128x128x64_t128", 8192, 8192, 1024, 128, 128, 64, 128, false, "bf16", "bf16", 4, false};
  tl::StatusOr<tl::gpu::SimtKernel> k = LowerPingpong(c, 132);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_NE(Notes(*k).find("ping-pong"), std::string::npos) << Notes(*k);
  ASSERT_NE(Notes(*k).find("; persistent: 132 blocks over 4096 tiles"), std::string::npos) << Notes(*k);
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const std::string& s = src->source;
  EXPECT_NE(s.find("__launch_bounds__(384, 1)"), std::string::npos);
  EXPECT_NE(s.find("if (tl_tid >= 256) {"), std::string::npos) << s;
  EXPECT_NE(s.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos);
  EXPECT_NE(s.find("setmaxnreg.inc.sync.aligned.u32 232;"), std::string::npos);
  EXPECT_NE(s.find("for (int tl_tile = (bx + 132); tl_tile < 4096; tl_tile += 264) {"), std::string::npos) << s;
  for (const char* b : {"bar.sync 3, 256;", "bar.sync 4, 256;", "bar.arrive 3, 256;", "bar.arrive 4, 256;", "bar.sync 1, 128;",
                        "bar.sync 2, 128;"}) {
    EXPECT_NE(s.find(b), std::string::npos) << b << "\n" << s;
  }
  EXPECT_EQ(s.find("__syncthreads();", s.find("if (tl_tid >= 256) {")), std::string::npos);
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit (the source was checked, not compiled): " << tc.status().ToString();
  tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, c.name, "sm_90a");
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  std::printf("[ %s ping-pong sm_90a ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n", c.name.c_str(),
              code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
  ExpectCleanSm90a(*code, 168);
  std::string cuobjdump;
  for (const char* x : {"/usr/local/cuda/bin/cuobjdump", "/usr/bin/cuobjdump"}) {
    if (cuobjdump.empty() && std::filesystem::exists(x)) cuobjdump = x;
  }
  if (cuobjdump.empty()) return;
  const std::filesystem::path p = std::filesystem::temp_directory_path() / "tl_ws_pingpong.cubin";
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(code->bytes.data()),
                                           static_cast<std::streamsize>(code->bytes.size()));
  tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({cuobjdump, "-sass", p.string()});
  std::filesystem::remove(p);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto count = [&](const std::string& op) {
    size_t n = 0;
    for (size_t at = r.out.find(op); at != std::string::npos; at = r.out.find(op, at + 1)) ++n;
    return n;
  };
  std::printf("[ %s ping-pong SASS ] %zu HGMMA, %zu UTMALDG, %zu STSM, %zu BAR.SYNC, %zu BAR.ARV\n", c.name.c_str(),
              count("HGMMA"), count("UTMALDG"), count("STSM"), count("BAR.SYNC"), count("BAR.ARV"));
  EXPECT_GT(count("HGMMA"), 0u);
  EXPECT_GT(count("UTMALDG"), 0u);
  EXPECT_GT(count("STSM"), 0u);
}

}  // namespace

namespace {

// bulk_store composes with the ping-pong: each warpgroup's warp 0 stores its own tile (warpgroup 1's from its
// copy) as bulk copies, waited for (.read) before that warpgroup's next epilogue and fully after its tile loop;
// C bit for bit the cooperative bulk kernel's; a missing .read wait in warpgroup 1 is caught.
TEST(WarpSpecialize, GemmPingpongBulkStore) {
  for (const WsCase& c : {WsCase{"pp_bulk_s4_f16", 250, 200, 520, 128, 128, 64, 128, false, "f16", "f16", 4, false},
                          WsCase{"pp_bulk_s3_bf16_k1", 300, 264, 40, 128, 128, 64, 128, true, "bf16", "bf16", 3, true}}) {
    for (int64_t sms : {1, 2}) {
      SCOPED_TRACE(c.name + " over " + std::to_string(sms) + " SMs");
      tl::StatusOr<tl::gpu::SimtKernel> k = LowerPingpong(c, sms, true, true), coop = LowerPingpong(c, sms, false, true);
      ASSERT_TRUE(k.ok() && coop.ok()) << k.status().ToString() << coop.status().ToString();
      const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
      ASSERT_NE(notes.find("warp-specialized: ping-pong"), std::string::npos) << notes;
      EXPECT_NE(notes.find("; epilogue stored by each warpgroup's warp 0 as one bulk copy per row (waited for before its next "
                           "tile's epilogue)"),
                std::string::npos)
          << notes;
      EXPECT_EQ(k->param_align.at("C"), 16);
      for (int w = 0; w < 2; ++w) {
        SBlock& b = PingpongWarpgroup(*k, w);
        EXPECT_EQ(Count<tl::gpu::SBulkStore>(b), 1) << dump;
        EXPECT_EQ(Count<tl::gpu::SBulkWait>(b), 2) << dump;
        EXPECT_EQ(StoresFrom<tl::gpu::SBulkStore>(b, w == 0 ? "tl_epi_C_f" : "tl_epi_C_f_wg1"), 1) << dump;
      }
      for (const tl::gpu::SimtBuffer& b : k->buffers) {
        if (b.name.rfind("tl_epi_C_f", 0) == 0) {
          EXPECT_EQ(b.shared_offset % 16, 0) << b.name;
        }
      }
      double worst = 0, worst_coop = 0;
      std::vector<double> out, out_coop;
      const tl::Status st = RunWs(c, *k, &worst, 0, &out), sc = RunWs(c, *coop, &worst_coop, 0, &out_coop);
      ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
      ASSERT_TRUE(sc.ok()) << sc.ToString();
      EXPECT_LE(worst, 4e-3);
      EXPECT_EQ(out, out_coop);
      // Mutant: warpgroup 1 without its .read wait: its next tile's stmatrix rewrites its tile while the copies of
      // it are pending (needs a second tile for warpgroup 1, block 0 four tiles: 4 tiles on 1 SM, 9 on 2).
      const int64_t tiles = ((c.N + c.bn - 1) / c.bn) * ((c.M + c.bm - 1) / c.bm), G = std::min(tiles, sms);
      if ((tiles + G - 1) / G < 4) continue;
      tl::gpu::SimtKernel m = *k;
      EXPECT_EQ(DropReadWaits(PingpongWarpgroup(m, 1)), 1);
      const tl::Status sm = RunWs(c, m, &worst);
      EXPECT_NE(sm.ToString().find("tl_epi_C_f_wg1["), std::string::npos) << sm.ToString();
      EXPECT_NE(sm.ToString().find("'s bulk copy of it to C is pending"), std::string::npos) << sm.ToString();
    }
  }
  // The TMA-store epilogue (GpuLowerOptions::tma_store) in the ping-pong: each warpgroup's thread 0 stores its own
  // 128B-swizzled tile (warpgroup 1's copy on its own 1024-byte atom), two boxes of 128x64 a tile.
  {
    const WsCase c{"pp_tma_store_s4_f16", 250, 200, 520, 128, 128, 64, 128, false, "f16", "f16", 4, false};
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 1;
    o.gemm_pingpong = true;
    o.tma_store = true;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o), coop = LowerPingpong(c, 1, false);
    ASSERT_TRUE(k.ok() && coop.ok()) << k.status().ToString() << coop.status().ToString();
    const std::string notes = Notes(*k), dump = tl::gpu::Dump(*k);
    ASSERT_NE(notes.find("warp-specialized: ping-pong"), std::string::npos) << notes;
    EXPECT_NE(notes.find("; epilogue stored by each warpgroup's thread 0 as TMA tensor stores, one box per 64-column panel "
                         "(waited for before its next tile's epilogue)"),
              std::string::npos)
        << notes;
    for (int w = 0; w < 2; ++w) {
      EXPECT_EQ(StoresFrom<tl::gpu::STmaStore>(PingpongWarpgroup(*k, w), w == 0 ? "tl_epi_C_f" : "tl_epi_C_f_wg1"), 2)
          << dump;
    }
    for (const tl::gpu::SimtBuffer& b : k->buffers) {
      if (b.name.rfind("tl_epi_C_f", 0) == 0) {
        EXPECT_EQ(b.shared_offset % 1024, 0) << b.name;
      }
    }
    double worst = 0, worst_coop = 0;
    std::vector<double> out, out_coop;
    const tl::Status st = RunWs(c, *k, &worst, 0, &out, 1e6), sc = RunWs(c, *coop, &worst_coop, 0, &out_coop, 1e6);
    ASSERT_TRUE(st.ok()) << st.ToString() << "\n" << dump;
    ASSERT_TRUE(sc.ok()) << sc.ToString();
    EXPECT_LE(worst, 4e-3);
    EXPECT_EQ(out, out_coop);
    EXPECT_EQ(std::count(out.begin(), out.end(), 1e6), 0);
    tl::gpu::SimtKernel m = *k;  // warpgroup 1 without its .read wait (4 tiles on 1 SM: it has two)
    EXPECT_EQ(DropReadWaits(PingpongWarpgroup(m, 1)), 1);
    const tl::Status sm = RunWs(c, m, &worst);
    EXPECT_NE(sm.ToString().find("tl_epi_C_f_wg1["), std::string::npos) << sm.ToString();
    EXPECT_NE(sm.ToString().find("'s bulk copy of it to C is pending"), std::string::npos) << sm.ToString();
    // The same with 2-block clusters (the ping-pong "cluster2" + "tma_store" config measured in session 15):
    // persistent over 2 blocks walking tile pairs 2j, 2j + 1 (one tile a warpgroup here; cluster_test's cl_pp_*
    // give each warpgroup several), both blocks' producers multicasting where their boxes agree; the interpreter
    // runs the cluster's six agents. Bit-equal to the cooperative kernel.
    std::string text = Text(c);
    const std::string head = ") -> (bx, by) {\n";
    ASSERT_NE(text.find(head), std::string::npos) << text;
    text.insert(text.find(head) + head.size(), "    hint cluster 2\n");
    tl::gpu::GpuLowerOptions oc = Sm90a(true, true);
    oc.persistent_sms = 2;
    oc.gemm_pingpong = true;
    oc.tma_store = true;
    tl::StatusOr<tl::gpu::SimtKernel> kc = tl::gpu::LowerToSimt(Parse(text), oc);
    ASSERT_TRUE(kc.ok()) << kc.status().ToString();
    ASSERT_EQ(kc->cluster, 2) << Notes(*kc);
    EXPECT_NE(Notes(*kc).find("epilogue stored by each warpgroup's thread 0 as TMA tensor stores"), std::string::npos)
        << Notes(*kc);
    std::vector<double> out_cl;
    const tl::Status scl = RunWs(c, *kc, &worst, 0, &out_cl, 1e6);
    ASSERT_TRUE(scl.ok()) << scl.ToString() << "\n" << tl::gpu::Dump(*kc);
    EXPECT_EQ(out_cl, out_coop);
  }
  // ptxas: hopper_bench's 8192x8192x1024 ping-pong configs with the TMA store, 128x128 and 64x256 (4 stages of 40 KiB
  // and two 32 KiB tiles on 1024-byte atoms: within the 227 KiB).
  for (const WsCase& c : {WsCase{"pp_tma_128x128x64_t128", 8192, 8192, 1024, 128, 128, 64, 128, false, "bf16", "bf16", 4, false},
                          WsCase{"pp_tma_64x256x64_t128", 8192, 8192, 1024, 64, 256, 64, 128, false, "bf16", "bf16", 4, false}}) {
    tl::gpu::GpuLowerOptions o = Sm90a();
    o.persistent_sms = 132;
    o.gemm_pingpong = true;
    o.tma_store = true;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(Text(c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    ASSERT_NE(Notes(*k).find("warp-specialized: ping-pong"), std::string::npos) << Notes(*k);
    ASSERT_NE(Notes(*k).find("thread 0 as TMA tensor stores"), std::string::npos) << Notes(*k);
    EXPECT_LE(k->shared_bytes, 227 * 1024);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_NE(src->source.find("tl_tma_store_2d(&tl_tmap2, &tl_epi_C_f_wg1["), std::string::npos) << src->source;
    tl::StatusOr<cu::CudaToolchain> tct = cu::CudaToolchain::Create();
    if (!tct.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tct->Compile(src->source, c.name, "sm_90a");
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    std::printf("[ %s ping-pong + TMA store sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n", c.name.c_str(),
                code->registers, code->spill_stores, static_cast<long long>(k->shared_bytes));
    ExpectCleanSm90a(*code);
  }
  // ptxas: hopper_bench's 8192x8192x1024 ping-pong config with the bulk store.
  const WsCase big{"pp_bulk_128x128x64_t128", 8192, 8192, 1024, 128, 128, 64, 128, false, "bf16", "bf16", 4, false};
  tl::StatusOr<tl::gpu::SimtKernel> k = LowerPingpong(big, 132, true, true);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_NE(Notes(*k).find("bulk copy per row"), std::string::npos) << Notes(*k);
  tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_NE(src->source.find("tl_bulk_store(&C["), std::string::npos);
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, big.name, "sm_90a");
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  std::printf("[ %s ping-pong + bulk store sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n", big.name.c_str(),
              code->registers, code->spill_stores, static_cast<long long>(k->shared_bytes));
  ExpectCleanSm90a(*code);
}

}  // namespace
