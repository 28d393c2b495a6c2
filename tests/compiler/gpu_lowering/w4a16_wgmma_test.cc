// kernels/quant_gemm.py's w4a16_wgmma (W4A16 decode with the dequantized
// weights in registers as wgmma's register operand A, C^T = W A^T) through
// the exact sm_90a lowering (TMA copies, wgmma) in the SIMT interpreter
// against float64 on random inputs: every weight byte value, M = 1, 5, 16
// (block_M 8 and 16, rows of A past M zero-filled), K = 512 and 1024, with
// and without split-K. The weights must stay in registers as the wgmma A
// operand (the lowering's notes, W_q's space) -- no shared tile of
// dequantized weights; the f16 copy W_f is forwarded (ForwardCastIntoWgmmaA),
// the wgmma packs the float32 W_q -- and the printed CUDA must issue wgmma.mma_async with "r" A operands,
// compile for sm_90a with ptxas without spills.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::test::Notes;
using tl::gpu::test::Sm90a;
using tl::gpu::test::Walk;

struct W4Case {
  int64_t M, N, K, block_M, block_N, split;
  bool permute = false;  // permute_k: k permuted within each group (W and A alike)
  std::string Args() const {
    char b[320];
    std::snprintf(b, sizeof b, "%lld, %lld, %lld, block_M=%lld, block_N=%lld, num_stages=3, magic_round=True, split_k=%lld%s%s",
                  (long long)M, (long long)N, (long long)K, (long long)block_M, (long long)block_N, (long long)split,
                  split > 1 ? ", workspace=True" : "", permute ? ", permute_k=True" : "");
    return b;
  }
};

// Tile IR of w4a16_wgmma(args), emitted by the Python frontend with Debian's python3.
tl::StatusOr<tl::ir::Function> Emit(const std::string& args) {
  return tl::gpu::test::EmitFunction("kernels.quant_gemm", "w4a16_wgmma", args, "w4");
}

// The sm_90a variant's lowering (as cuda_bundle.cc makes it): wgmma, TMA, staged epilogue. For split-K
// only the first kernel (the product into the float32 workspace; the cast kernel is w4a16_mma's).
tl::StatusOr<tl::gpu::SimtKernel> Lower(tl::ir::Function f) {
  if (f.body.size() > 1) f.body.resize(1);
  return tl::gpu::LowerToSimt(f, Sm90a(/*warp_specialize=*/false));
}

double F16(double v) {  // round to the nearest float16 (normal range: the inputs here)
  if (v == 0) return 0;
  int e;
  std::frexp(v, &e);  // v = f * 2^e, f in [0.5, 1): 11 significant bits
  const double ulp = std::ldexp(1.0, e - 11);
  return std::nearbyint(v / ulp) * ulp;
}

TEST(W4a16Wgmma, InterpreterMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/quant_gemm.py";
  for (const W4Case& c : std::vector<W4Case>{{16, 128, 512, 16, 64, 1},
                                             {5, 128, 1024, 16, 64, 1},
                                             {1, 64, 512, 8, 64, 1},
                                             {5, 128, 1024, 8, 128, 1},
                                             {16, 128, 1024, 16, 64, 4},
                                             {1, 64, 512, 8, 64, 2},
                                             {16, 128, 512, 16, 64, 1, true},
                                             {5, 128, 1024, 8, 128, 2, true}}) {
    tl::StatusOr<tl::ir::Function> f = Emit(c.Args());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(*f);
    ASSERT_TRUE(k.ok()) << c.Args() << ": " << k.status().ToString();
    const std::string notes = Notes(*k);
    EXPECT_NE(notes.find("fragment W_f: wgmma register operand A"), std::string::npos) << c.Args() << "\n" << notes;
    EXPECT_EQ(notes.find("kept in shared memory"), std::string::npos) << c.Args() << "\n" << notes;
    // the cast copy W_q -> W_f is forwarded: the wgmma packs W_q's float32 slots (no f16 round trip)
    EXPECT_NE(notes.find("wgmma register operand A packed from the f32 accumulator (the cast copy and its registers "
                         "removed): W_f"), std::string::npos) << c.Args() << "\n" << notes;
    for (const tl::gpu::SimtBuffer& b : k->buffers) {
      EXPECT_NE(b.name, "W_f") << c.Args();
      if (b.name == "W_q") {
        EXPECT_EQ(b.space, tl::gpu::Space::kRegister) << c.Args();
      }
    }
    std::mt19937 rng(static_cast<uint32_t>(c.M * 131 + c.K + c.split));
    std::uniform_real_distribution<double> d(-1, 1);
    std::uniform_int_distribution<int> byte(0, 255);
    const int64_t G = c.K / 128;
    std::map<std::string, std::vector<double>> t;
    t["A"].resize(static_cast<size_t>(c.M * c.K));
    for (double& v : t["A"]) v = F16(d(rng));
    t["W"].resize(static_cast<size_t>(c.N * c.K / 2));
    for (size_t i = 0; i < t["W"].size(); ++i) t["W"][i] = i < 256 ? static_cast<double>(i) : byte(rng);  // every byte
    t["Scales"].resize(static_cast<size_t>(c.N * G));
    for (double& v : t["Scales"]) v = F16(0.01 + 0.1 * std::fabs(d(rng)));
    const std::string out = c.split > 1 ? "Wk" : "C";
    t["C"].assign(static_cast<size_t>(c.M * c.N), 0);
    t["Wk"].assign(static_cast<size_t>(c.M * c.N), 0);  // the workspace starts zero
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << c.Args() << ": " << st.ToString();
    double worst = 0, norm = 0;
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double ref = 0;
        for (int64_t kk = 0; kk < c.K; ++kk) {
          const int b = static_cast<int>(t["W"][static_cast<size_t>(n * c.K / 2 + kk / 2)]);
          const int nib = (kk % 2 == 0) ? (b & 15) : (b >> 4);
          const int q = nib >= 8 ? nib - 16 : nib;  // two's complement nibble
          ref += t["A"][static_cast<size_t>(m * c.K + kk)] * q * t["Scales"][static_cast<size_t>(n * G + kk / 128)];
        }
        const double got = t[out][static_cast<size_t>(m * c.N + n)];
        worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(got - ref)));
        norm = std::max(norm, std::fabs(ref));
      }
    }
    // fp16 output (C): half an ulp of the largest value; float32 workspace: float32 sums.
    EXPECT_LE(worst, (c.split > 1 ? 1e-5 : 1e-3) * norm) << c.Args();
    EXPECT_GT(norm, 0.5) << c.Args();
    std::printf("[ w4a16_wgmma %s ] worst error %.3g of max |C| %.3g\n", c.Args().c_str(), worst, norm);
  }
}

// The printed CUDA at hopper_bench's M = 16, N = K = 8192 shapes: the wgmma takes W_f from registers
// ("r" A operands packed from W_f), no shared tile of weights in fp16 (the only f16 shared buffers are
// A's stages, S_all and the epilogue), ptxas for sm_90a without spills or serialized wgmma.
TEST(W4a16Wgmma, Sm90aSourceAndPtxas) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/quant_gemm.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const std::string args : {"16, 8192, 8192, block_M=16, block_N=64, num_stages=4, magic_round=True",
                                 "16, 8192, 8192, block_M=16, block_N=128, num_stages=4, magic_round=True, split_k=4, "
                                 "workspace=True",
                                 "1, 8192, 8192, block_M=8, block_N=64, num_stages=4, magic_round=True, split_k=2, "
                                 "workspace=True",
                                 "16, 8192, 8192, block_M=16, block_N=64, num_stages=4, magic_round=True, split_k=4, "
                                 "workspace=True, permute_k=True"}) {
    tl::StatusOr<tl::ir::Function> f = Emit(args);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(*f);
    ASSERT_TRUE(k.ok()) << args << ": " << k.status().ToString();
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    EXPECT_NE(s.find("float W_q["), std::string::npos) << args << ": W_q is not a register array";
    EXPECT_NE(s.find("tl_pack_f16x2(W_q["), std::string::npos) << args;
    EXPECT_EQ(s.find("W_f["), std::string::npos) << args << ": the f16 copy of the weights is not forwarded";
    EXPECT_NE(s.find("wgmma.mma_async.sync.aligned.m64n"), std::string::npos) << args;
    EXPECT_NE(s.find("\"r\"(tl_ra[0]), \"r\"(tl_ra[1]), \"r\"(tl_ra[2]), \"r\"(tl_ra[3])"), std::string::npos) << args;
    EXPECT_EQ(s.find("W_q = reinterpret_cast"), std::string::npos) << args << ": W_q in shared memory";
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "w4", "sm_90a");
    ASSERT_TRUE(code.ok()) << args << ": " << code.status().ToString();
    std::printf("[ w4a16_wgmma %s sm_90a ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n", args.c_str(),
                code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    EXPECT_EQ(code->spill_stores, 0) << args;
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << args << ": " << code->log;
  }
}

// W4A16 prefill (scale_weights=True: the group scales on the decoded weights, one accumulator; packed_k=True:
// W in pack_w4a16_wgmma's byte order) through the sm_90a lowering WITH warp specialization (the
// synchronous-compute form: the decode loads the weight bytes from the stage with plain shared loads, so every
// consumer thread releases the stage), in the interpreter against float64 with the weights rounded to fp16
// (F16(q * s): the wgmma's pack rounds the exact float32 product once) -- every byte value, partial tiles, one
// and two consumer warpgroups, split-K; and the printed CUDA for hopper_bench's M = 128 configs: producer and
// consumer roles, every thread's release, ptxas for sm_90a without spills.
struct PrefillCase {
  int64_t M, N, K, block_M, block_N, split, stages;
  bool packed;
  std::string Args() const {
    char b[320];
    std::snprintf(b, sizeof b, "%lld, %lld, %lld, block_M=%lld, block_N=%lld, num_stages=%lld, magic_round=True, "
                  "split_k=%lld%s, scale_weights=True, packed_k=%s", (long long)M, (long long)N, (long long)K,
                  (long long)block_M, (long long)block_N, (long long)stages, (long long)split,
                  split > 1 ? ", workspace=True" : "", packed ? "True" : "False");
    return b;
  }
};

// pack_w4a16_wgmma (kernels/quant_gemm.py): within each group row of `group` / 2 bytes, the byte of weights
// (j, j + 1) (j even) moves to ((j >> 1) & 3) * group / 8 + (j >> 4) * 2 + ((j >> 3) & 1).
std::vector<double> PackK(const std::vector<double>& w, int64_t N, int64_t K, int64_t group) {
  std::vector<double> p(w.size());
  const int64_t nb = group / 2;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < K / group; ++g) {
      for (int64_t j = 0; j < group; j += 2) {
        const int64_t dst = ((j >> 1) & 3) * (group / 8) + (j >> 4) * 2 + ((j >> 3) & 1);
        p[static_cast<size_t>(n * K / 2 + g * nb + dst)] = w[static_cast<size_t>(n * K / 2 + g * nb + j / 2)];
      }
    }
  }
  return p;
}

TEST(W4a16Wgmma, PrefillWarpSpecializedMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/quant_gemm.py";
  for (const PrefillCase& c : std::vector<PrefillCase>{{40, 128, 512, 64, 64, 1, 2, true},
                                                       {70, 192, 512, 64, 128, 1, 3, true},
                                                       {33, 128, 1024, 32, 128, 2, 2, false},
                                                       {64, 64, 768, 64, 64, 3, 2, true}}) {
    tl::StatusOr<tl::ir::Function> f = Emit(c.Args());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    if (f->body.size() > 1) f->body.resize(1);  // split-K: the product kernel (into the float32 workspace)
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(*f, Sm90a());
    ASSERT_TRUE(k.ok()) << c.Args() << ": " << k.status().ToString();
    const std::string notes = Notes(*k);
    EXPECT_NE(notes.find("warp-specialized: " + std::to_string(2 * c.block_N) + " consumer threads"), std::string::npos)
        << c.Args() << "\n" << notes;
    EXPECT_NE(notes.find("every consumer thread releases them"), std::string::npos) << c.Args() << "\n" << notes;
    EXPECT_NE(notes.find("no barrier in the k-loop"), std::string::npos) << c.Args() << "\n" << notes;
    std::mt19937 rng(static_cast<uint32_t>(c.M * 131 + c.K + c.split));
    std::uniform_real_distribution<double> d(-1, 1);
    std::uniform_int_distribution<int> byte(0, 255);
    const int64_t G = c.K / 128;
    std::map<std::string, std::vector<double>> t;
    t["A"].resize(static_cast<size_t>(c.M * c.K));
    for (double& v : t["A"]) v = F16(d(rng));
    std::vector<double> w(static_cast<size_t>(c.N * c.K / 2));
    for (size_t i = 0; i < w.size(); ++i) w[i] = i < 256 ? static_cast<double>(i) : byte(rng);  // every byte
    t["W"] = c.packed ? PackK(w, c.N, c.K, 128) : w;
    t["Scales"].resize(static_cast<size_t>(c.N * G));
    for (double& v : t["Scales"]) v = F16(0.01 + 0.1 * std::fabs(d(rng)));
    const std::string out = c.split > 1 ? "Wk" : "C";
    t["C"].assign(static_cast<size_t>(c.M * c.N), 0);
    t["Wk"].assign(static_cast<size_t>(c.M * c.N), 0);
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << c.Args() << ": " << st.ToString();
    double worst = 0, norm = 0;
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double ref = 0;
        for (int64_t kk = 0; kk < c.K; ++kk) {
          const int b = static_cast<int>(w[static_cast<size_t>(n * c.K / 2 + kk / 2)]);
          const int nib = (kk % 2 == 0) ? (b & 15) : (b >> 4);
          const int q = nib >= 8 ? nib - 16 : nib;
          ref += t["A"][static_cast<size_t>(m * c.K + kk)] * F16(q * t["Scales"][static_cast<size_t>(n * G + kk / 128)]);
        }
        const double got = t[out][static_cast<size_t>(m * c.N + n)];
        worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(got - ref)));
        norm = std::max(norm, std::fabs(ref));
      }
    }
    EXPECT_LE(worst, (c.split > 1 ? 1e-5 : 1e-3) * norm) << c.Args();
    EXPECT_GT(norm, 0.5) << c.Args();
    std::printf("[ w4a16_wgmma prefill WS %s ] worst error %.3g of max |C| %.3g\n", c.Args().c_str(), worst, norm);
    if (c.split > 1) continue;
    // Persistent over 1 SM (every tile on one or two blocks): the synchronous form's tile loop with the
    // stages read by plain loads; no shared buffer but the stages overlaps a stage (the producer fills the
    // next tile's stages during this tile's epilogue); the same C bit for bit. This kernel puts no buffer in
    // a stage's memory to begin with, so the offsets check guards the invariant but does not exercise the
    // move of such a buffer (checked: disabling the move leaves this test passing); no test does.
    tl::gpu::GpuLowerOptions po = Sm90a();
    po.persistent_sms = 1;
    tl::StatusOr<tl::gpu::SimtKernel> pk = tl::gpu::LowerToSimt(*f, po);
    ASSERT_TRUE(pk.ok()) << c.Args() << ": " << pk.status().ToString();
    const std::string pnotes = Notes(*pk);
    ASSERT_NE(pnotes.find("; persistent: "), std::string::npos) << c.Args() << "\n" << pnotes;
    std::set<std::string> stages;
    Walk(std::get<tl::gpu::SWarpRoles>(pk->body.back().node).producer, [&](const tl::gpu::SStmt& x) {
      if (const auto* t2 = std::get_if<tl::gpu::STmaLoad>(&x.node)) stages.insert(t2->dst);
    });
    ASSERT_FALSE(stages.empty());
    auto bytes = [](const tl::gpu::SimtBuffer& b) { return b.elements * std::max(1, tl::ir::BitWidth(b.dtype) / 8); };
    for (const tl::gpu::SimtBuffer& a : pk->buffers) {
      if (!stages.count(a.name)) continue;
      for (const tl::gpu::SimtBuffer& b : pk->buffers) {
        if (b.space != tl::gpu::Space::kShared || stages.count(b.name)) continue;
        EXPECT_TRUE(b.shared_offset >= a.shared_offset + bytes(a) || b.shared_offset + bytes(b) <= a.shared_offset)
            << c.Args() << ": " << b.name << " in stage " << a.name;
      }
    }
    std::map<std::string, std::vector<double>> pt = t;
    pt["C"].assign(static_cast<size_t>(c.M * c.N), 0);
    const tl::Status pst = tl::gpu::test::Interpret(*pk, &pt);
    ASSERT_TRUE(pst.ok()) << c.Args() << ": " << pst.ToString();
    EXPECT_EQ(pt["C"], t["C"]) << c.Args();
  }
}

TEST(W4a16Wgmma, PrefillWarpSpecializedSm90aSource) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/quant_gemm.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const PrefillCase& c : std::vector<PrefillCase>{{128, 8192, 8192, 128, 128, 2, 4, true},
                                                       {128, 8192, 8192, 128, 64, 2, 2, true},
                                                       {128, 8192, 8192, 128, 64, 1, 4, true}}) {
    tl::StatusOr<tl::ir::Function> f = Emit(c.Args());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    if (f->body.size() > 1) f->body.resize(1);
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(*f, Sm90a());
    ASSERT_TRUE(k.ok()) << c.Args() << ": " << k.status().ToString();
    EXPECT_NE(Notes(*k).find("every consumer thread releases them"), std::string::npos) << c.Args() << "\n" << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    const std::string& s = src->source;
    EXPECT_NE(s.find("setmaxnreg.inc"), std::string::npos) << c.Args();
    EXPECT_NE(s.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), std::string::npos) << c.Args();
    const size_t consumers = s.find("// consumers");
    ASSERT_NE(consumers, std::string::npos) << c.Args();
    EXPECT_EQ(s.find("__syncthreads", consumers), std::string::npos) << c.Args() << ": a block barrier in the consumers";
    EXPECT_EQ(s.find("bar.sync 1", s.find("for (int k = 0;", consumers)), s.rfind("bar.sync 1"))
        << c.Args() << ": a named barrier inside the consumers' k-loop (only the drain after it)";
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "w4p", "sm_90a");
    ASSERT_TRUE(code.ok()) << c.Args() << ": " << code.status().ToString();
    std::printf("[ w4a16_wgmma prefill WS %s sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n",
                c.Args().c_str(), code->registers, code->spill_stores, static_cast<long long>(k->shared_bytes));
    EXPECT_EQ(code->spill_stores, 0) << c.Args();
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << c.Args() << ": " << code->log;
  }
}

}  // namespace
