// compiler.gpu Wgmma.*: T.gemm on Hopper wgmma (GemmStrategy::kWgmma, the
// sm_90a variant). Without an H200 the evidence is: the operand storage
// (swizzle.h panels) read back through an independent model of the PTX
// ISA's descriptors and canonical layouts (wgmma_model.h); the SIMT
// interpreter running wgmma GEMMs of every operand major-ness, 1 and 2
// warpgroups, N up to 256, 32/64/128-byte swizzles, partial tiles, pipelines
// and epilogues against float64; and the sm_90a cubin (ptxas: no spills;
// cuobjdump, where one is installed: HGMMA in the SASS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "lowering_test_util.h"
#include "kernels.h"
#include "simt_interp.h"
#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/wgmma.h"
#include "tilelang/toolchain/host_compiler.h"
#include "wgmma_model.h"

namespace {

namespace cu = tl::codegen::cuda;
using tl::gpu::GemmStrategy;
using tl::gpu::SmemSwizzle;
using tl::gpu::test::AttentionIr;
using tl::gpu::test::Notes;
using tl::gpu::test::Parse;
using tl::gpu::test::Sm90;

// Every element of a wgmma operand tile, stored by the lowering's panels
// (SwizzledElementByte) and read through a descriptor (WgmmaDescriptor, then
// the model's decoding and canonical layout): the same byte. For K-major and
// MN-major tiles, all three swizzles, k-steps that cross panels, and tiles
// that start later in the buffer (m-tiles / n-tiles).
TEST(Wgmma, DescriptorsReadThePanelStorage) {
  struct Case {
    int64_t rows, cols;
    bool k_major;
    int64_t tile;  // x extent of one instruction
  };
  for (const Case& c : std::vector<Case>{{128, 64, true, 64},  {64, 128, true, 64},   {128, 32, true, 64},
                                         {64, 16, true, 64},   {256, 128, true, 256}, {32, 64, false, 64},
                                         {64, 256, false, 256}, {16, 32, false, 32},  {32, 16, false, 16},
                                         {64, 192, false, 192}, {64, 128, false, 64}}) {
    const int64_t e = 2;
    const std::optional<SmemSwizzle> s = tl::gpu::WgmmaOperandSwizzle(c.rows, c.cols, e);
    ASSERT_TRUE(s) << c.rows << "x" << c.cols;
    const int64_t w = tl::gpu::SwizzleRowBytes(*s), pw = w / e;
    int64_t lbo = 0, sbo = 0;
    tl::gpu::WgmmaStrides(c.rows, e, *s, c.k_major, &lbo, &sbo);
    const int64_t x_ext = c.k_major ? c.rows : c.cols, k_ext = c.k_major ? c.cols : c.rows;
    const int64_t base = 3 * 1024;  // an atom-aligned buffer offset, not 0
    const int64_t m = 1;            // the second tile of a [2, rows, cols] buffer
    const int64_t mat = m * c.rows * c.cols * e;
    for (int64_t x0 = 0; x0 + c.tile <= x_ext; x0 += c.tile) {
      for (int64_t k0 = 0; k0 + 16 <= k_ext; k0 += 16) {
        // The lowering's start (lower.cc LowerGemmWgmma): the unswizzled byte of the tile's first element.
        int64_t start = 0;
        if (c.k_major) {
          start = base + mat + ((k0 / pw) * c.rows + x0) * w + (k0 % pw) * e;
        } else {
          start = base + mat + ((x0 / pw) * c.rows + k0) * w;
        }
        const tl::gpu::test::WgmmaDescFields d =
            tl::gpu::test::DecodeWgmmaDesc(tl::gpu::WgmmaDescriptor(static_cast<uint32_t>(start), lbo, sbo, *s));
        ASSERT_EQ(d.base_offset, 0);
        ASSERT_EQ(d.start, static_cast<uint32_t>(start));
        for (int64_t x = 0; x < c.tile; ++x) {
          for (int64_t k = 0; k < 16; ++k) {
            const uint32_t got = tl::gpu::test::WgmmaElementByte(d, !c.k_major, 2, static_cast<uint32_t>(x), static_cast<uint32_t>(k));
            const int64_t r = c.k_major ? x0 + x : k0 + k, col = c.k_major ? k0 + k : x0 + x;
            const int64_t want = base + tl::gpu::SwizzledElementByte(*s, c.rows, c.cols, e, m, r, col);
            ASSERT_EQ(got, want) << c.rows << "x" << c.cols << (c.k_major ? " K-major" : " MN-major") << " "
                                 << tl::gpu::SwizzleName(*s) << " tile at " << x0 << " k0 " << k0 << ": x " << x << " k " << k;
          }
        }
      }
    }
  }
  // Encoding (PTX ISA matrix descriptor): 128B swizzle = mode 1 in bits 62-63, SBO 1024 -> 64 in bits 32-45.
  EXPECT_EQ(tl::gpu::WgmmaDescriptor(0x400, 16, 1024, SmemSwizzle::k128B),
            (uint64_t{1} << 62) | (uint64_t{64} << 32) | (uint64_t{1} << 16) | 0x40);
  EXPECT_EQ(tl::gpu::WgmmaSwizzleMode(SmemSwizzle::k64B), 2);
  EXPECT_EQ(tl::gpu::WgmmaSwizzleMode(SmemSwizzle::k32B), 3);
  EXPECT_FALSE(tl::gpu::WgmmaOperandSwizzle(20, 64, 2));  // rows not whole atoms
  EXPECT_FALSE(tl::gpu::WgmmaOperandSwizzle(64, 8, 2));   // 16-byte rows
  EXPECT_EQ(tl::gpu::WgmmaInstrN(384), 192);
  EXPECT_EQ(tl::gpu::WgmmaInstrN(60), 0);
}

// A tiled GEMM C = op(A) op(B) (+ an epilogue that doubles C and adds its
// row's sum of squares... kept simple: C * 2 + 1) in Tile IR.
struct GemmCase {
  std::string name;
  int64_t M, N, K, bm, bn, bk, threads;
  bool ta, tb;
  std::string dt = "f16";
  std::string acc = "f32";
  int stages = 2;
  bool epilogue = false;
};

std::string GemmText(const GemmCase& c) {
  const std::string dims = [&] {
    char b[256];
    std::snprintf(b, sizeof b, "A: tensor[%lld, %lld] %s, B: tensor[%lld, %lld] %s, C: tensor[%lld, %lld] %s",
                  (long long)(c.ta ? c.K : c.M), (long long)(c.ta ? c.M : c.K), c.dt.c_str(), (long long)(c.tb ? c.N : c.K),
                  (long long)(c.tb ? c.K : c.N), c.dt.c_str(), (long long)c.M, (long long)c.N, c.acc.c_str());
    return std::string(b);
  }();
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string t = "tileir 1\n\nfunc @" + c.name + "(" + dims + ") {\n";
  t += "  kernel grid(ceildiv(" + n(c.N) + ", " + n(c.bn) + "), ceildiv(" + n(c.M) + ", " + n(c.bm) + ")) threads(" +
       n(c.threads) + ") -> (bx, by) {\n";
  t += "    alloc A_s: shared[" + (c.ta ? n(c.bk) + ", " + n(c.bm) : n(c.bm) + ", " + n(c.bk)) + "] " + c.dt + "\n";
  t += "    alloc B_s: shared[" + (c.tb ? n(c.bn) + ", " + n(c.bk) : n(c.bk) + ", " + n(c.bn)) + "] " + c.dt + "\n";
  t += "    alloc C_f: fragment[" + n(c.bm) + ", " + n(c.bn) + "] " + c.acc + "\n";
  t += "    fill C_f, " + std::string(c.acc == "i32" ? "0" : "0.0") + ":" + c.acc + "\n";
  t += "    for k in pipelined(0, ceildiv(" + n(c.K) + ", " + n(c.bk) + "), stages=" + std::to_string(c.stages) + ") {\n";
  t += "      copy A[" + (c.ta ? "k * " + n(c.bk) + ":" + n(c.bk) + ", by * " + n(c.bm) + ":" + n(c.bm)
                       : "by * " + n(c.bm) + ":" + n(c.bm) + ", k * " + n(c.bk) + ":" + n(c.bk)) + "] -> A_s\n";
  t += "      copy B[" + (c.tb ? "bx * " + n(c.bn) + ":" + n(c.bn) + ", k * " + n(c.bk) + ":" + n(c.bk)
                       : "k * " + n(c.bk) + ":" + n(c.bk) + ", bx * " + n(c.bn) + ":" + n(c.bn)) + "] -> B_s\n";
  t += "      gemm A_s, B_s -> C_f" + std::string(c.ta ? " trans_a" : "") + (c.tb ? " trans_b" : "") + "\n    }\n";
  if (c.epilogue) {
    t += "    parallel (i, j) in (" + n(c.bm) + ", " + n(c.bn) + ") {\n      C_f[i, j] = C_f[i, j] * 2.0:" + c.acc +
         " + 1.0:" + c.acc + "\n    }\n";
  }
  t += "    copy C_f -> C[by * " + n(c.bm) + ":" + n(c.bm) + ", bx * " + n(c.bn) + ":" + n(c.bn) + "]\n  }\n}\n";
  return t;
}

double RoundTo(double v, const std::string& dt) {
  if (dt == "i8") return std::round(v * 127);
  if (dt == "f16") return static_cast<double>(static_cast<_Float16>(static_cast<float>(v)));
  if (dt == "bf16") return tl::gpu::test::RoundToBf16(v);
  return v;
}

// Runs a case through the interpreter under `g`; returns the worst relative
// error against float64 and the kernel's dump (for the strategy checks).
double RunCase(const GemmCase& c, const tl::gpu::GpuLowerOptions& options, std::string* dump) {
  const tl::ir::Function f = Parse(GemmText(c));
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, options);
  EXPECT_TRUE(k.ok()) << k.status().ToString();
  if (!k.ok()) return 1e9;
  *dump = Notes(*k) + tl::gpu::Dump(*k);
  std::mt19937 rng(static_cast<uint32_t>(c.M * 7 + c.N * 3 + c.K));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["A"].resize(static_cast<size_t>(c.M * c.K));
  t["B"].resize(static_cast<size_t>(c.K * c.N));
  for (double& v : t["A"]) v = RoundTo(d(rng), c.dt);
  for (double& v : t["B"]) v = RoundTo(d(rng), c.dt);
  t["C"].assign(static_cast<size_t>(c.M * c.N), -7);
  const std::vector<double> a = t["A"], b = t["B"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  EXPECT_TRUE(st.ok()) << st.ToString();
  double worst = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.K; ++p) {
        s += a[static_cast<size_t>(c.ta ? p * c.M + i : i * c.K + p)] * b[static_cast<size_t>(c.tb ? j * c.K + p : p * c.N + j)];
      }
      if (c.epilogue) s = s * 2 + 1;
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][static_cast<size_t>(i * c.N + j)] - s) / (1 + std::fabs(s))));
    }
  }
  return worst;
}

double RunCase(const GemmCase& c, GemmStrategy g, std::string* dump) { return RunCase(c, Sm90(g), dump); }

std::vector<GemmCase> Cases() {
  return {
      // 128B panels, A K-major (one panel), B N-major (two panels: LBO), two m-tiles per warpgroup.
      {"wg_nn_128x128x64_t128", 200, 260, 200, 128, 128, 64, 128, false, false},
      // Two warpgroups, B K-major, epilogue on the accumulator.
      {"wg_nt_128x128x64_t256", 200, 130, 150, 128, 128, 64, 256, false, true, "f16", "f32", 3, true},
      // A M-major, B N-major with n = 256 in one instruction.
      {"wg_tn_64x256x32_t128", 100, 300, 70, 64, 256, 32, 128, true, false},
      // bf16, both transposed, two warpgroups.
      {"wg_tt_bf16_128x64x64_t256", 130, 100, 90, 128, 64, 64, 256, true, true, "bf16"},
      // 32-byte and 64-byte swizzles: A rows of 16 elements, B rows of 32.
      {"wg_nn_64x32x16_t128", 70, 40, 50, 64, 32, 16, 128, false, false},
      // k-steps crossing 128B panels of A (K = 128 per tile), n = 192, 3 panels of B, 3 stages.
      {"wg_nn_128x192x128_t256", 140, 200, 300, 128, 192, 128, 256, false, false, "f16", "f32", 3},
      // 18 k-steps per gemm: two SWgmma units of 9 in a loop; 64B panels of A crossed mid-unit.
      {"wg_nn_k288_loop", 80, 64, 300, 64, 64, 288, 128, false, false, "f16", "f32", 1},
      // s8 x s8 -> s32 (m64nNk32; K-major A and B only), exact; 128B and 64B panels of bytes.
      {"wg_i8_nt_128x128x128_t256", 200, 130, 300, 128, 128, 128, 256, false, true, "i8", "i32"},
      {"wg_i8_nt_64x64x64_t128", 70, 90, 100, 64, 64, 64, 128, false, true, "i8", "i32"},
      // A 16-bit accumulator (f32 registers, rounded where stored), epilogue.
      {"wg_nn_f16acc_64x64x32_t128", 100, 90, 80, 64, 64, 32, 128, false, false, "f16", "f16", 2, true},
  };
}

TEST(Wgmma, GemmsInTheInterpreterMatchFloat64) {
  for (const GemmCase& c : Cases()) {
    std::string dump;
    const double err = RunCase(c, GemmStrategy::kWgmma, &dump);
    const double tol = c.acc == "f16" ? 2e-3 : c.acc == "i32" ? 0 : 1e-5;
    EXPECT_LE(err, tol) << c.name << "\n" << dump;
    EXPECT_NE(dump.find("wgmma.m64n" + std::to_string(tl::gpu::WgmmaInstrN(c.bn)) + (c.dt == "i8" ? "k32" : "k16")),
              std::string::npos)
        << c.name << " did not lower to wgmma\n" << dump;
    std::printf("[ wgmma %s ] worst relative error %.3g\n", c.name.c_str(), err);
  }
}

// Which gemms get wgmma, and why the others do not (notes), on the
// compiler.gpu test kernels and a few misfits.
TEST(Wgmma, StrategyChoice) {
  for (const char* name : {"gemm_f16_nn", "gemm_f16_nt", "gemm_f16_tn", "gemm_f16_tt", "gemm_bf16_tn", "gemm_f16acc",
                           "gemm_big", "flash_attn", "flash_attn_rowvec"}) {
    const TestKernel* tk = nullptr;
    static const std::vector<TestKernel> all = TestKernels();
    for (const auto& x : all) {
      if (x.name == name) tk = &x;
    }
    ASSERT_TRUE(tk) << name;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(tk->text), Sm90());
    ASSERT_TRUE(k.ok()) << name << ": " << k.status().ToString();
    const std::string d = tl::gpu::Dump(*k);
    EXPECT_NE(d.find("wgmma.m64n"), std::string::npos) << name << "\n" << Notes(*k) << d;
    EXPECT_EQ(d.find(" mma.f16"), std::string::npos) << name << "\n" << Notes(*k);
    for (const tl::gpu::SimtBuffer& b : k->buffers) {
      if (b.swizzle != SmemSwizzle::kNone) {
        EXPECT_EQ(b.shared_offset % tl::gpu::SwizzleAtomBytes(b.swizzle), 0) << b.name;
      }
    }
  }
  // Misfits fall back to mma.sync (or SIMT) and the notes say why.
  struct Misfit {
    GemmCase c;
    const char* note;
  };
  for (const Misfit& m : std::vector<Misfit>{
           {{"mf_t64", 64, 64, 64, 32, 32, 32, 64, false, false}, "not wgmma: shape 32x32x32 over 64 threads"},
           {{"mf_m64_t256", 64, 64, 64, 64, 64, 32, 256, false, false}, "not wgmma: shape 64x64x32 over 256 threads"},
           {{"mf_f32", 64, 64, 64, 64, 64, 32, 128, false, false, "f32"}, "SIMT FMA"},
           {{"mf_i8_nn", 64, 64, 64, 64, 64, 64, 128, false, false, "i8", "i32"}, "not wgmma: i8 wgmma needs K-major operands"},
       }) {
    const tl::ir::Function f = Parse(GemmText(m.c));
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, Sm90());
    ASSERT_TRUE(k.ok()) << m.c.name << ": " << k.status().ToString();
    EXPECT_NE(Notes(*k).find(m.note), std::string::npos) << m.c.name << "\n" << Notes(*k);
    EXPECT_EQ(tl::gpu::Dump(*k).find("wgmma."), std::string::npos) << m.c.name;
  }
}

// cuobjdump from the CUDA toolkit, or empty.
std::string FindCuobjdump() {
  std::vector<std::string> where;
  if (const char* e = std::getenv("TL_CUOBJDUMP")) where.push_back(e);
  for (const char* d : {"/usr/local/cuda/bin/cuobjdump", "/usr/local/cuda-13.0/bin/cuobjdump", "/usr/bin/cuobjdump"}) where.push_back(d);
  for (const std::string& w : where) {
    if (std::filesystem::exists(w)) return w;
  }
  return "";
}

// The sm_90a cubins: wgmma in the source, ptxas without spills or stack
// (accumulators in registers) for the 128x128x64 f16 GEMM over 128 and 256
// threads; with `sass`, HGMMA in cuobjdump's SASS of every cubin.
void CheckCubins(const cu::CudaToolchain& toolchain, const std::string& cuobjdump, bool sass) {
  const cu::CudaToolchain* tc = &toolchain;
  std::vector<GemmCase> cases = Cases();
  cases.push_back({"wg_spill_128x128x64_t128", 4096, 4096, 4096, 128, 128, 64, 128, false, false, "f16", "f32", 3});
  cases.push_back({"wg_spill_128x128x64_t256", 4096, 4096, 4096, 128, 128, 64, 256, false, false, "f16", "f32", 3});
  cases.push_back({"wg_spill_128x128x64_nt_t256", 4096, 4096, 4096, 128, 128, 64, 256, false, true, "f16", "f32", 3});
  // The 4096^3 GEMMs also as the bundle's sm_90a variant makes them (TMA copies, staged epilogue).
  for (const GemmCase& c : std::vector<GemmCase>(cases.end() - 3, cases.end())) {
    cases.push_back(c);
    cases.back().name = "wg_tma" + c.name.substr(8);
  }
  // hopper_bench's best config: 16-bit C, its epilogue staged in B_s's memory.
  cases.push_back({"wg_tma_f16c_128x256x64_t256", 4096, 4096, 4096, 128, 256, 64, 256, false, false, "f16", "f16", 3});
  for (const GemmCase& c : cases) {
    const tl::ir::Function f = Parse(GemmText(c));
    tl::gpu::GpuLowerOptions o = Sm90();
    o.tma_copies = c.name.rfind("wg_tma", 0) == 0;
    o.stage_wgmma_epilogue = o.tma_copies;  // and the epilogue through shared memory
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    EXPECT_EQ(o.tma_copies, !k->tensor_maps.empty()) << c.name;
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_NE(src->source.find("wgmma.mma_async.sync.aligned.m64n"), std::string::npos);
    // Pipelined: one group in flight across k-steps (and ptxas keeps it so: no
    // "serialized" below, which it reports when something touches the
    // accumulator between a wgmma and its wait).
    EXPECT_EQ(src->source.find("wgmma.wait_group.sync.aligned 1;") != std::string::npos, c.stages >= 2) << c.name;
    EXPECT_EQ(src->source.find("tl_epi_C_f") != std::string::npos, c.name == "wg_tma_f16c_128x256x64_t256") << c.name;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, f.name, "sm_90a");
    ASSERT_TRUE(code.ok()) << c.name << ": " << code.status().ToString() << "\n" << src->source;
    std::printf("[ %s sm_90a ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n", c.name.c_str(),
                code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    if (c.name.rfind("wg_spill", 0) == 0 || c.name.rfind("wg_tma", 0) == 0) {
      EXPECT_EQ(code->spill_stores, 0) << code->log;
      EXPECT_EQ(code->spill_loads, 0) << code->log;
      EXPECT_EQ(code->stack_bytes, 0) << "accumulators in local memory: " << code->log;
    }
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << c.name << ": " << code->log;
    if (!sass) continue;
    const std::filesystem::path p = std::filesystem::temp_directory_path() / ("tl_wgmma_" + c.name + ".cubin");
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(code->bytes.data()),
                                             static_cast<std::streamsize>(code->bytes.size()));
    tl::toolchain::ProcessResult r = tl::toolchain::RunProcess({cuobjdump, "-sass", p.string()});
    std::filesystem::remove(p);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("HGMMA"), std::string::npos) << c.name << ": no HGMMA in the SASS";
  }
}

TEST(Wgmma, Sm90aCubins) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  CheckCubins(*tc, "", false);
}

TEST(Wgmma, SassHasHgmma) {
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  if (!tc.ok()) GTEST_SKIP() << "no CUDA toolkit: " << tc.status().ToString();
  const std::string cuobjdump = FindCuobjdump();
  if (cuobjdump.empty()) {
    GTEST_SKIP() << "no cuobjdump (TL_CUOBJDUMP, /usr/local/cuda/bin, /usr/local/cuda-13.0/bin): the sm_90a SASS "
                    "was not checked for HGMMA";
  }
  CheckCubins(*tc, cuobjdump, true);
}

// A pipelined wgmma gemm keeps one group in flight across k-steps
// (PipelineAsyncCopies' defer_wgmma): each k-step issues its group, then
// wait_group 1 retires the previous one, a barrier, and only then the refill
// of the stage the previous group read; wait_group 0 drains the last group
// before the epilogue touches the accumulator.

// Applies `fn` to every statement of `b`, nested ones included.
void Walk(tl::gpu::SBlock& b, const std::function<void(tl::gpu::SStmt&)>& fn) {
  for (tl::gpu::SStmt& s : b) {
    fn(s);
    if (auto* f = std::get_if<tl::gpu::SFor>(&s.node)) Walk(f->body, fn);
    if (auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
      Walk(i->then_body, fn);
      Walk(i->else_body, fn);
    }
  }
}

// The statements of `b` in program order, flattened (loop and if bodies inline).
void Flatten(const tl::gpu::SBlock& b, std::vector<const tl::gpu::SStmt*>* out) {
  for (const tl::gpu::SStmt& s : b) {
    out->push_back(&s);
    if (const auto* f = std::get_if<tl::gpu::SFor>(&s.node)) Flatten(f->body, out);
    if (const auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
      Flatten(i->then_body, out);
      Flatten(i->else_body, out);
    }
  }
}

// The outermost loop holding a deferred SWgmma (the pipeline's k loop; a
// loop of SWgmma units may be inside it), or null.
const tl::gpu::SFor* DeferredLoop(const tl::gpu::SBlock& b) {
  std::vector<const tl::gpu::SStmt*> all;
  Flatten(b, &all);
  for (const tl::gpu::SStmt* s : all) {
    if (const auto* f = std::get_if<tl::gpu::SFor>(&s->node)) {
      std::vector<const tl::gpu::SStmt*> in;
      Flatten(f->body, &in);
      for (const tl::gpu::SStmt* x : in) {
        const auto* w = std::get_if<tl::gpu::SWgmma>(&x->node);
        if (w && w->wait_pending == 1) return f;
      }
    }
  }
  return nullptr;
}

// The ordering rule on the lowered loop body, statement by statement: the
// operand buffers a deferred wgmma reads get no copy (TMA or cp.async)
// between the loop's top and its wgmma (the group of the previous iteration
// is still in flight there), and after it only once a barrier has followed
// the wgmma's wait_group 1 (every warpgroup retired the previous group).
// Returns "" or what breaks it.
std::string OrderingProblem(const tl::gpu::SFor& loop) {
  std::vector<const tl::gpu::SStmt*> st;
  Flatten(loop.body, &st);
  const tl::gpu::SWgmma* w = nullptr;
  bool barrier_after = false;
  for (const tl::gpu::SStmt* s : st) {
    if (const auto* x = std::get_if<tl::gpu::SWgmma>(&s->node); x && x->wait_pending == 1) w = x;
  }
  if (!w) return "no deferred wgmma in the loop";
  const std::set<std::string> operands = {w->a.buffer, w->b.buffer};
  bool seen = false;
  for (const tl::gpu::SStmt* s : st) {
    if (std::get_if<tl::gpu::SWgmma>(&s->node) == w) {
      seen = true;
      continue;
    }
    if (seen && std::holds_alternative<tl::gpu::SBarrier>(s->node)) barrier_after = true;
    std::string dst;
    if (const auto* t = std::get_if<tl::gpu::STmaLoad>(&s->node)) dst = t->dst;
    if (const auto* c = std::get_if<tl::gpu::SCopyAsync>(&s->node)) dst = c->dst;
    if (const auto* c = std::get_if<tl::gpu::SCopyVec>(&s->node)) dst = c->dst;
    if (const auto* c = std::get_if<tl::gpu::SStore>(&s->node)) dst = c->buffer;
    if (!operands.count(dst)) continue;
    if (!seen) return "a copy into " + dst + " before the wgmma (the previous group may still read it)";
    if (!barrier_after) return "a copy into " + dst + " after the wgmma without a barrier after its wait_group 1";
  }
  return "";
}

TEST(Wgmma, PipelinedGroupStaysInFlight) {
  // 3 stages over 2 warpgroups with an epilogue; 2 stages, 1 warpgroup; a
  // loop of two SWgmma units per k-step; i8. Partial tiles everywhere; each
  // with TMA and with cp.async copies.
  const std::vector<GemmCase> cases = {
      {"wg_defer_nt_t256", 200, 130, 456, 128, 128, 64, 256, false, true, "f16", "f32", 3, true},
      {"wg_defer_nn_t128", 100, 96, 200, 64, 64, 32, 128, false, false, "bf16", "f32", 2},
      {"wg_defer_k288", 80, 64, 704, 64, 64, 288, 128, false, false, "f16", "f32", 2},
      {"wg_defer_i8", 70, 90, 304, 64, 64, 64, 128, false, true, "i8", "i32", 3},
  };
  for (bool tma : {true, false}) {
    for (const GemmCase& c : cases) {
      SCOPED_TRACE(c.name + (tma ? " (TMA)" : " (cp.async)"));
      const tl::ir::Function f = Parse(GemmText(c));
      tl::gpu::GpuLowerOptions o = Sm90();
      o.tma_copies = tma;
      tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, o);
      ASSERT_TRUE(k.ok()) << k.status().ToString();
      const std::string d = tl::gpu::Dump(*k);
      EXPECT_NE(d.find("wait_group=1"), std::string::npos) << d;
      EXPECT_EQ(d.find("wait_group=0"), std::string::npos) << d;
      EXPECT_NE(d.find("wgmma.wait_group 0 C_f"), std::string::npos) << d;
      EXPECT_EQ(tma, !k->tensor_maps.empty());
      const tl::gpu::SFor* loop = DeferredLoop(k->body);
      ASSERT_TRUE(loop) << d;
      EXPECT_EQ(OrderingProblem(*loop), "") << d;
      // One barrier per k-step with only TMA (the mbarrier waits order the
      // data), two with any cp.async (other threads' copies become visible at
      // the first).
      std::vector<const tl::gpu::SStmt*> in_loop;
      Flatten(loop->body, &in_loop);
      int barriers = 0, cp_async = 0;
      for (const tl::gpu::SStmt* x : in_loop) {
        barriers += std::holds_alternative<tl::gpu::SBarrier>(x->node);
        cp_async += std::holds_alternative<tl::gpu::SCopyAsync>(x->node);
      }
      // (k288: B's 288-row box is over TMA's 256, so B stays cp.async.)
      EXPECT_EQ(cp_async == 0, tma && c.name != "wg_defer_k288") << d;
      EXPECT_EQ(barriers, cp_async == 0 ? 1 : 2) << d;
      // The drain follows the loop and precedes every other use of C_f.
      std::vector<const tl::gpu::SStmt*> st;
      Flatten(k->body, &st);
      size_t last_wgmma = 0, drain = 0;
      for (size_t i = 0; i < st.size(); ++i) {
        if (std::holds_alternative<tl::gpu::SWgmma>(st[i]->node)) last_wgmma = i;
        if (std::holds_alternative<tl::gpu::SWgmmaWait>(st[i]->node)) drain = i;
      }
      EXPECT_GT(drain, last_wgmma);
      // The printed k-step: issue, commit, wait 1, fence the accumulator; the
      // refill after the barrier; wait 0 after the loop.
      tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
      ASSERT_TRUE(src.ok()) << src.status().ToString();
      const std::string& cs = src->source;
      const size_t mma = cs.find("wgmma.mma_async"), w1 = cs.find("wgmma.wait_group.sync.aligned 1;"),
                   sync = cs.find("__syncthreads();", w1), refill = cs.find(tma ? "tl_tma_load_2d(" : "tl_cp_async16(", w1),
                   w0 = cs.find("wgmma.wait_group.sync.aligned 0;");
      ASSERT_NE(w1, std::string::npos) << cs;
      ASSERT_NE(w0, std::string::npos) << cs;
      EXPECT_LT(mma, w1);
      EXPECT_LT(w1, sync);
      EXPECT_LT(sync, refill) << cs;
      EXPECT_LT(refill, w0);
      EXPECT_NE(cs.find("asm volatile(\"\" : \"+" + std::string(c.acc == "i32" ? "r" : "f") + "\"(C_f[tl_r])"), std::string::npos);
      // The interpreter runs each group when a wait retires it and reports
      // any write of its operands or access of its accumulator before that.
      std::string dump;
      const double err = RunCase(c, o, &dump);
      EXPECT_LE(err, c.acc == "i32" ? 0 : 1e-5) << dump;
      std::printf("[ %s %s ] deferred wgmma, worst relative error %.3g\n", c.name.c_str(), tma ? "tma" : "cp.async", err);
    }
  }
}

// The checks can fail: the same kernels with the group left in flight but the
// refill where the synchronous schedule puts it (before the k-step's wgmma)
// race with the previous group, and without the drain the epilogue reads an
// accumulator a group still writes; wgmma_overlap = false keeps wait 0.
TEST(Wgmma, InFlightGroupRacesAreCaught) {
  const GemmCase c{"wg_race", 200, 130, 456, 128, 128, 64, 256, false, true, "f16", "f32", 3, true};
  auto run = [&](tl::gpu::SimtKernel& k) {
    std::map<std::string, std::vector<double>> t;
    t["A"].assign(static_cast<size_t>(c.M * c.K), 0.5);
    t["B"].assign(static_cast<size_t>(c.K * c.N), 0.25);
    t["C"].assign(static_cast<size_t>(c.M * c.N), 0);
    return tl::gpu::test::Interpret(k, &t);
  };
  for (bool tma : {true, false}) {
    SCOPED_TRACE(tma ? "TMA" : "cp.async");
    tl::gpu::GpuLowerOptions o = Sm90();
    o.tma_copies = tma;
    o.wgmma_overlap = false;
    tl::StatusOr<tl::gpu::SimtKernel> sync = tl::gpu::LowerToSimt(Parse(GemmText(c)), o);
    ASSERT_TRUE(sync.ok()) << sync.status().ToString();
    const std::string d = tl::gpu::Dump(*sync);
    EXPECT_EQ(d.find("wait_group=1"), std::string::npos) << d;
    EXPECT_EQ(d.find("wgmma.wait_group 0"), std::string::npos) << d;
    EXPECT_TRUE(run(*sync).ok());
    // Deferred in place: wait 1 on the synchronous schedule, a drain after the loop.
    tl::gpu::SimtKernel racy = *sync;
    Walk(racy.body, [](tl::gpu::SStmt& s) {
      if (auto* w = std::get_if<tl::gpu::SWgmma>(&s.node)) w->wait_pending = 1;
    });
    std::function<bool(tl::gpu::SBlock&)> drain_after_loop = [&](tl::gpu::SBlock& b) {
      for (size_t i = 0; i < b.size(); ++i) {
        if (auto* f = std::get_if<tl::gpu::SFor>(&b[i].node)) {
          if (drain_after_loop(f->body)) return true;
          if (tl::gpu::HasWgmma(f->body)) {
            b.insert(b.begin() + static_cast<std::ptrdiff_t>(i) + 1, tl::gpu::SStmt{tl::gpu::SWgmmaWait{0, {"C_f"}}});
            return true;
          }
        }
      }
      return false;
    };
    ASSERT_TRUE(drain_after_loop(racy.body));
    const tl::gpu::SFor* loop = DeferredLoop(racy.body);
    ASSERT_TRUE(loop);
    EXPECT_NE(OrderingProblem(*loop).find("before the wgmma"), std::string::npos) << OrderingProblem(*loop);
    const tl::Status st = run(racy);
    EXPECT_NE(st.ToString().find(std::string(tma ? "TMA copy" : "cp.async") + " writes A_s["), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.ToString().find("while a wgmma group reading it is in flight"), std::string::npos) << st.ToString();
    // The good schedule without its drain.
    tl::gpu::GpuLowerOptions od = Sm90();
    od.tma_copies = tma;
    tl::StatusOr<tl::gpu::SimtKernel> good = tl::gpu::LowerToSimt(Parse(GemmText(c)), od);
    ASSERT_TRUE(good.ok());
    EXPECT_TRUE(run(*good).ok());
    std::function<void(tl::gpu::SBlock&)> drop = [&](tl::gpu::SBlock& b) {
      for (size_t i = 0; i < b.size(); ++i) {
        if (std::holds_alternative<tl::gpu::SWgmmaWait>(b[i].node)) b.erase(b.begin() + static_cast<std::ptrdiff_t>(i--));
        else if (auto* f = std::get_if<tl::gpu::SFor>(&b[i].node)) drop(f->body);
      }
    };
    drop(good->body);
    const tl::Status nd = run(*good);
    EXPECT_NE(nd.ToString().find("accumulator C_f accessed while a wgmma group writing it is in flight"), std::string::npos)
        << nd.ToString();
  }
}

// Loops whose body is more than the gemm keep wait_group 0: FlashAttention
// rescales its accumulator between k-steps; a gemm that clears its
// accumulator writes it; the cp.async kernels of the other archs never defer.
TEST(Wgmma, GroupsStaySynchronousWhereTheAccumulatorIsTouched) {
  static const std::vector<TestKernel> all = TestKernels();
  for (const TestKernel& tk : all) {
    if (tk.name != "flash_attn" && tk.name != "flash_attn_rowvec" && tk.name != "gemm_f16_nn") continue;
    for (GemmStrategy g : {GemmStrategy::kWgmma, GemmStrategy::kMmaSync}) {
      tl::gpu::GpuLowerOptions o = Sm90(g);
      o.tma_copies = true;
      tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(tk.text), o);
      ASSERT_TRUE(k.ok()) << tk.name << ": " << k.status().ToString();
      const std::string d = tl::gpu::Dump(*k);
      const bool deferred = d.find("wait_group=1") != std::string::npos;
      EXPECT_EQ(deferred, tk.name == "gemm_f16_nn" && g == GemmStrategy::kWgmma) << tk.name << "\n" << d;
      EXPECT_EQ(d.find("wgmma.wait_group 0") != std::string::npos, deferred) << tk.name;
    }
  }
}

// GpuLowerOptions::stage_wgmma_epilogue: the accumulator goes to global
// memory through a padded shared tile, then 16-byte rows; the same numbers
// (one rounding, at the first copy), partial tiles guarded; a tile that does
// not fit next to the pipeline's stages leaves the direct store.
TEST(Wgmma, EpilogueThroughSharedTile) {
  // The tile takes the memory of the first dead stage buffer at least as
  // large (A_s here): f16 128x136 (34 KiB) into 3 stages of 128x64 f16 (48
  // KiB); 64x72 16-bit (9 KiB) into 2 stages of 64x64 (16 KiB).
  const std::vector<GemmCase> cases = {
      {"wg_epi_nt_t256", 200, 136, 456, 128, 128, 64, 256, false, true, "f16", "f16", 3, true},
      {"wg_epi_f16acc", 100, 96, 200, 64, 64, 64, 128, false, false, "f16", "f16", 2, true},
      {"wg_epi_bf16_t128", 70, 72, 64, 64, 64, 64, 128, false, false, "bf16", "bf16", 2},
  };
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(c.name);
    tl::gpu::GpuLowerOptions o = Sm90();
    o.tma_copies = true;
    o.stage_wgmma_epilogue = true;
    tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(GemmText(c)), o);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    const std::string d = Notes(*k) + tl::gpu::Dump(*k);
    const std::string into = "A_s";
    EXPECT_NE(d.find("epilogue: C_f stored through a shared tile (in " + into + "'s memory)"),
              std::string::npos) << d;
    {
      // The tile's first write comes after the last use of A_s, a barrier between.
      std::vector<const tl::gpu::SStmt*> st;
      Flatten(k->body, &st);
      size_t last_a = 0, first_epi = st.size(), barrier = 0;
      for (size_t i = 0; i < st.size(); ++i) {
        const auto& nd = st[i]->node;
        if (const auto* w = std::get_if<tl::gpu::SWgmma>(&nd); w && (w->a.buffer == into || w->b.buffer == into)) last_a = i;
        if (const auto* t = std::get_if<tl::gpu::STmaLoad>(&nd); t && t->dst == into) last_a = i;
        if (std::holds_alternative<tl::gpu::SWgmmaWait>(nd)) last_a = std::max(last_a, i);
        if (const auto* x = std::get_if<tl::gpu::SStore>(&nd); x && x->buffer == "tl_epi_C_f") first_epi = std::min(first_epi, i);
        if (std::holds_alternative<tl::gpu::SBarrier>(nd) && i > last_a && i < first_epi) barrier = i;
      }
      EXPECT_GT(last_a, 0u);
      EXPECT_LT(last_a, first_epi);
      EXPECT_GT(barrier, last_a) << d;
      int64_t a_off = -1, epi_off = -2;
      for (const tl::gpu::SimtBuffer& b : k->buffers) {
        if (b.name == into) a_off = b.shared_offset;
        if (b.name == "tl_epi_C_f") epi_off = b.shared_offset;
      }
      EXPECT_EQ(a_off, epi_off);
    }
    const int64_t e = c.acc == "f32" ? 4 : 2;
    EXPECT_NE(d.find("buffer tl_epi_C_f: shared[" + std::to_string(c.bm * (c.bn + 16 / e)) + "]"), std::string::npos) << d;
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_NE(src->source.find("*reinterpret_cast<tl_v16*>(&C["), std::string::npos) << src->source;
    std::string dump;
    const double err = RunCase(c, o, &dump);
    EXPECT_LE(err, c.acc == "f32" ? 1e-5 : c.acc == "f16" ? 2e-3 : 1e-2) << dump;
    std::printf("[ %s ] epilogue through shared memory, worst relative error %.3g\n", c.name.c_str(), err);
  }
  // 2 stages: A_s and B_s are 32 KiB each, an f32 tile 128x132 66 KiB: stored from registers, no memory added.
  GemmCase two = cases[0];
  two.acc = "f32";
  two.stages = 2;
  tl::gpu::GpuLowerOptions o = Sm90();
  o.tma_copies = true;
  o.stage_wgmma_epilogue = true;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(GemmText(two)), o);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string n = Notes(*k);
  EXPECT_NE(n.find("epilogue: C_f stored from registers: no pipeline buffer dead by then holds its 67584-byte shared tile"),
            std::string::npos) << n;
  EXPECT_EQ(tl::gpu::Dump(*k).find("tl_epi_"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Register operand A: a gemm whose A is an f16/bf16 register fragment that is
// a copy of a wgmma accumulator (attention's P = cast(S)) keeps the
// accumulator's layout and feeds wgmma from registers (4 x .b32 per k-step)
// instead of going through shared memory.

struct ChainCase {
  std::string name;
  int64_t M, N, D, threads;
  std::string dt;
  bool vt = false;  // V given as [D, N] (B K-major, trans_b)
};

// S = Q K^T * 0.125 (f32), P = cast(S) (dt), O = P V (f32): one block.
std::string ChainText(const ChainCase& c) {
  auto n = [](int64_t v) { return std::to_string(v); };
  const std::string M = n(c.M), N = n(c.N), D = n(c.D);
  const std::string vshape = c.vt ? D + ", " + N : N + ", " + D;
  std::string t = "tileir 1\n\nfunc @" + c.name + "(Q: tensor[" + M + ", " + D + "] " + c.dt + ", K: tensor[" + N + ", " + D +
                  "] " + c.dt + ", V: tensor[" + vshape + "] " + c.dt + ", O: tensor[" + M + ", " + D + "] f32) {\n";
  t += "  kernel grid(1, 1) threads(" + n(c.threads) + ") -> (bx, by) {\n";
  t += "    alloc Q_s: shared[" + M + ", " + D + "] " + c.dt + "\n";
  t += "    alloc K_s: shared[" + N + ", " + D + "] " + c.dt + "\n";
  t += "    alloc V_s: shared[" + vshape + "] " + c.dt + "\n";
  t += "    alloc S_f: fragment[" + M + ", " + N + "] f32\n";
  t += "    alloc P_f: fragment[" + M + ", " + N + "] " + c.dt + "\n";
  t += "    alloc O_f: fragment[" + M + ", " + D + "] f32\n";
  t += "    copy Q[0:" + M + ", 0:" + D + "] -> Q_s\n";
  t += "    copy K[0:" + N + ", 0:" + D + "] -> K_s\n";
  t += "    copy V[0:" + (c.vt ? D + ", 0:" + N : N + ", 0:" + D) + "] -> V_s\n";
  t += "    fill S_f, 0.0:f32\n";
  t += "    gemm Q_s, K_s -> S_f trans_b\n";
  t += "    parallel (i, j) in (" + M + ", " + N + ") {\n      S_f[i, j] = S_f[i, j] * 0.125:f32\n    }\n";
  t += "    copy S_f -> P_f\n";
  t += "    fill O_f, 0.0:f32\n";
  t += "    gemm P_f, V_s -> O_f" + std::string(c.vt ? " trans_b" : "") + "\n";
  t += "    copy O_f -> O[0:" + M + ", 0:" + D + "]\n  }\n}\n";
  return t;
}

// Lowers (sm_90a, as the bundle's variant: TMA, staged epilogues) and runs
// the chain in the interpreter against float64 (P rounded to dt as the
// kernel does); `mutate` may change the lowered kernel first. Returns the
// worst relative error; *k_out the lowered kernel.
double RunChain(const ChainCase& c, tl::gpu::SimtKernel* k_out,
                const std::function<void(tl::gpu::SimtKernel&)>& mutate = nullptr, bool forward_cast = true) {
  tl::gpu::GpuLowerOptions o = Sm90();
  o.tma_copies = true;
  o.stage_wgmma_epilogue = true;
  o.forward_cast = forward_cast;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(ChainText(c)), o);
  EXPECT_TRUE(k.ok()) << c.name << ": " << k.status().ToString();
  if (!k.ok()) return 1e9;
  if (mutate) mutate(*k);
  *k_out = *k;
  std::mt19937 rng(static_cast<uint32_t>(c.M * 5 + c.N * 3 + c.D));
  std::uniform_real_distribution<double> d(-1, 1);
  std::map<std::string, std::vector<double>> t;
  t["Q"].resize(static_cast<size_t>(c.M * c.D));
  t["K"].resize(static_cast<size_t>(c.N * c.D));
  t["V"].resize(static_cast<size_t>(c.N * c.D));
  for (const char* x : {"Q", "K", "V"}) {
    for (double& v : t[x]) v = RoundTo(d(rng), c.dt);
  }
  t["O"].assign(static_cast<size_t>(c.M * c.D), -7);
  const std::vector<double> q = t["Q"], kk = t["K"], v = t["V"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  EXPECT_TRUE(st.ok()) << c.name << ": " << st.ToString();
  if (!st.ok()) return 1e9;
  double worst = 0;
  std::vector<double> p(static_cast<size_t>(c.N));
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double s = 0;
      for (int64_t x = 0; x < c.D; ++x) s += q[static_cast<size_t>(i * c.D + x)] * kk[static_cast<size_t>(j * c.D + x)];
      p[static_cast<size_t>(j)] = RoundTo(static_cast<float>(s) * 0.125, c.dt);
    }
    for (int64_t x = 0; x < c.D; ++x) {
      double o_ref = 0;
      for (int64_t j = 0; j < c.N; ++j) {
        o_ref += p[static_cast<size_t>(j)] * v[static_cast<size_t>(c.vt ? x * c.N + j : j * c.D + x)];
      }
      worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["O"][static_cast<size_t>(i * c.D + x)] - o_ref) / (1 + std::fabs(o_ref))));
    }
  }
  return worst;
}

std::vector<ChainCase> ChainCases() {
  return {
      {"ra_bf16_64x64x64_t128", 64, 64, 64, 128, "bf16"},
      // Two warpgroups, f16, V K-major (trans_b).
      {"ra_f16_128x128x128_t256", 128, 128, 128, 256, "f16", true},
      // Two m-tiles per warpgroup; N = 176: one n = 176 instruction for S, 11 register k-steps for O.
      {"ra_bf16_128x176x64_t128", 128, 176, 64, 128, "bf16"},
      // FlashAttention's 128 x 128 / 256-thread, d 128 tile.
      {"ra_bf16_128x128x128_t256", 128, 128, 128, 256, "bf16"},
  };
}

TEST(Wgmma, RegisterOperandA) {
  for (const ChainCase& c : ChainCases()) {
    tl::gpu::SimtKernel k;
    const double err = RunChain(c, &k);
    const std::string notes = Notes(k), dump = tl::gpu::Dump(k);
    // Rounding P can differ from the float64 reference's in the last bit where S's f32 sums round differently.
    EXPECT_LE(err, 1e-3) << c.name << "\n" << notes << dump;
    EXPECT_NE(notes.find("fragment P_f: wgmma register operand A, layout"), std::string::npos) << c.name << "\n" << notes;
    EXPECT_EQ(notes.find("fragment P_f kept in shared memory"), std::string::npos) << c.name << "\n" << notes;
    // P_f = cast(S_f) feeds only the wgmma: it packs S_f's slots (ForwardCastIntoWgmmaA), P_f's registers are gone.
    EXPECT_NE(dump.find("S_f@regs["), std::string::npos) << c.name << "\n" << dump;
    for (const tl::gpu::SimtBuffer& b : k.buffers) EXPECT_NE(b.name, "P_f") << c.name;
    std::printf("[ wgmma register A %s ] worst relative error %.3g\n", c.name.c_str(), err);
    // Without forwarding, P_f is the register operand itself, with the same numbers.
    tl::gpu::SimtKernel kept;
    EXPECT_LE(RunChain(c, &kept, nullptr, false), 1e-3) << c.name;
    EXPECT_NE(tl::gpu::Dump(kept).find("P_f@regs["), std::string::npos) << c.name << "\n" << tl::gpu::Dump(kept);
    for (const tl::gpu::SimtBuffer& b : kept.buffers) {
      if (b.name == "P_f") {
        EXPECT_EQ(b.space, tl::gpu::Space::kRegister) << c.name;
      }
    }
    // The same kernel with the two halves of every A register swapped (columns
    // 2t and 2t + 1 exchanged) reads the wrong P: the interpreter's ISA model
    // of the A fragment, not the lowering's slot formula, places the values.
    const double bad = RunChain(c, &k, [](tl::gpu::SimtKernel& x) {
      Walk(x.body, [](tl::gpu::SStmt& s) {
        if (auto* w = std::get_if<tl::gpu::SWgmma>(&s.node); w && !w->a_frag.empty()) {
          for (size_t i = 0; i + 1 < w->a_slots.size(); i += 2) std::swap(w->a_slots[i], w->a_slots[i + 1]);
        }
      });
    });
    EXPECT_GT(bad, 0.05) << c.name << ": swapped register halves still match";
  }
  // Where wgmma does not fit (64 threads), P goes through shared memory as
  // before, with a note saying why, and the numbers stay right (mma.sync).
  {
    const ChainCase c{"ra_misfit_64x64x64_t64", 64, 64, 64, 64, "bf16"};
    tl::gpu::SimtKernel k;
    EXPECT_LE(RunChain(c, &k), 1e-2);
    const std::string notes = Notes(k);
    EXPECT_NE(notes.find("fragment P_f: not a wgmma register operand A (the gemm is not wgmma: shape 64x64x64 over 64 threads"),
              std::string::npos)
        << notes;
    EXPECT_NE(notes.find("fragment P_f kept in shared memory"), std::string::npos) << notes;
  }
}

struct FaCase {
  int64_t B, H, S, D;
  bool causal;
  int64_t bm, bn, threads, stages;
  int64_t Skv = 0;  // seq_kv; 0: S (past_len = Skv - S keys before the first query)
  int64_t Kv() const { return Skv ? Skv : S; }
  std::string Args() const {
    char b[256];
    std::snprintf(b, sizeof b, "%lld, %lld, %lld, %lld, %lld, %lld, is_causal=%s, block_M=%lld, block_N=%lld, num_stages=%lld, "
                  "threads=%lld, dtype='bfloat16'", (long long)B, (long long)H, (long long)H, (long long)S, (long long)Kv(),
                  (long long)D, causal ? "True" : "False", (long long)bm, (long long)bn, (long long)stages, (long long)threads);
    return b;
  }
};

// kernels/attention.py's flash_attention for case c, emitted by python3 and
// lowered as the sm_90a variant is (TMA copies, staged wgmma epilogue).
tl::StatusOr<tl::gpu::SimtKernel> LowerLibraryAttention(const FaCase& c) {
  std::string err;
  const std::string ir = AttentionIr(c.Args(), &err);
  if (ir.empty()) return tl::Status(tl::StatusCode::kInternal, "kernels/attention.py did not emit Tile IR: " + err);
  tl::gpu::GpuLowerOptions o = Sm90();
  o.tma_copies = true;
  o.stage_wgmma_epilogue = true;
  return tl::gpu::LowerToSimt(Parse(ir), o);
}

// hopper_bench's FlashAttention configs at small shapes (ragged last blocks).
std::vector<FaCase> FaCases() {
  return {
      {1, 2, 100, 64, true, 64, 64, 128, 2},
      {1, 1, 200, 128, false, 128, 128, 256, 2},
      {1, 1, 300, 64, true, 128, 176, 256, 2},
      {1, 1, 150, 128, true, 128, 64, 256, 2},
      // causal with seq_q != seq_kv (the diagonal offset by past_len; only the blocks crossing it masked),
      // ragged both ways, 3 stages
      {1, 2, 70, 64, true, 64, 64, 128, 2, 200},
      {1, 1, 100, 128, true, 128, 64, 256, 3, 229},
      {1, 1, 90, 64, false, 64, 128, 128, 3, 250},
  };
}

// kernels/attention.py's flash_attention through the sm_90a lowering in the
// interpreter vs float64 softmax(Q K^T / sqrt(d)) V on random bf16 inputs:
// acc_s_cast stays in registers and feeds the second wgmma.
TEST(Wgmma, LibraryFlashAttentionRegisterA) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  for (const FaCase& c : FaCases()) {
    tl::StatusOr<tl::gpu::SimtKernel> k = LowerLibraryAttention(c);
    ASSERT_TRUE(k.ok()) << c.Args() << ": " << k.status().ToString();
    const std::string notes = Notes(*k);
    EXPECT_NE(notes.find("fragment acc_s_cast: wgmma register operand A"), std::string::npos) << c.Args() << "\n" << notes;
    EXPECT_EQ(notes.find("acc_s_cast kept in shared memory"), std::string::npos) << c.Args() << "\n" << notes;
    std::mt19937 rng(static_cast<uint32_t>(c.S + c.D + c.bn));
    std::uniform_real_distribution<double> d(-1, 1);
    const int64_t n = c.B * c.H * c.S * c.D, nkv = c.B * c.H * c.Kv() * c.D;
    std::map<std::string, std::vector<double>> t;
    for (const char* x : {"Q", "K", "V"}) {
      t[x].resize(static_cast<size_t>(x[0] == 'Q' ? n : nkv));
      for (double& v : t[x]) v = RoundTo(d(rng) * 2, "bf16");
    }
    t["O"].assign(static_cast<size_t>(n), -7);
    const std::vector<double> q = t["Q"], kk = t["K"], v = t["V"];
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << c.Args() << ": " << st.ToString();
    double worst = 0;
    for (int64_t bh = 0; bh < c.B * c.H; ++bh) {
      const double* Q = &q[static_cast<size_t>(bh * c.S * c.D)];
      const double* K = &kk[static_cast<size_t>(bh * c.Kv() * c.D)];
      const double* V = &v[static_cast<size_t>(bh * c.Kv() * c.D)];
      for (int64_t i = 0; i < c.S; ++i) {
        const int64_t keys = c.causal ? i + 1 + (c.Kv() - c.S) : c.Kv();
        std::vector<double> p(static_cast<size_t>(keys));
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          double s = 0;
          for (int64_t x = 0; x < c.D; ++x) s += Q[i * c.D + x] * K[j * c.D + x];
          p[static_cast<size_t>(j)] = s / std::sqrt(static_cast<double>(c.D));
          m = std::max(m, p[static_cast<size_t>(j)]);
        }
        for (double& x : p) sum += (x = std::exp(x - m));
        for (int64_t x = 0; x < c.D; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j) acc += p[static_cast<size_t>(j)] * V[j * c.D + x];
          acc /= sum;
          const double got = t["O"][static_cast<size_t>((bh * c.S + i) * c.D + x)];
          worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(got - acc) / (1 + std::fabs(acc))));
        }
      }
    }
    // bf16 probabilities and output: a few bf16 ulps.
    EXPECT_LE(worst, 1e-2) << c.Args();
    std::printf("[ library flash_attention %s ] worst relative error %.3g\n", c.Args().c_str(), worst);
  }
}

// The printed CUDA source of the library kernel at hopper_bench's shapes:
// P packed from registers into the wgmma (no shared P tile), compiled for
// sm_90a by the local toolkit (ptxas: registers, no spills).
TEST(Wgmma, LibraryFlashAttentionSm90aCubins) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/attention.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const FaCase& c : std::vector<FaCase>{{4, 32, 4096, 128, false, 64, 64, 128, 2},
                                             {4, 32, 4096, 128, false, 128, 128, 256, 2},
                                             {4, 32, 4096, 64, true, 128, 128, 256, 2},
                                             {4, 32, 4096, 128, false, 128, 176, 256, 2},
                                             {4, 32, 4096, 64, false, 128, 176, 256, 2},
                                             {4, 32, 4096, 128, true, 128, 64, 256, 3},
                                             {4, 32, 4096, 128, true, 128, 128, 256, 3}}) {
    tl::StatusOr<tl::gpu::SimtKernel> k = LowerLibraryAttention(c);
    ASSERT_TRUE(k.ok()) << c.Args() << ": " << k.status().ToString();
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    // P·V packs the f32 scores themselves (ForwardCastIntoWgmmaA): no acc_s_cast registers, no copy.
    EXPECT_NE(src->source.find("tl_pack_bf16x2(acc_s["), std::string::npos) << c.Args();
    EXPECT_EQ(src->source.find("acc_s_cast"), std::string::npos) << c.Args() << ": the cast copy was not forwarded";
    EXPECT_NE(Notes(*k).find("packed from the f32 accumulator (the cast copy and its registers removed): acc_s_cast -> acc_s"),
              std::string::npos) << c.Args();
    EXPECT_EQ(Notes(*k).find("acc_s_cast kept in shared memory"), std::string::npos) << c.Args();
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, "fa", "sm_90a");
    ASSERT_TRUE(code.ok()) << c.Args() << ": " << code.status().ToString();
    std::printf("[ flash_attention %s sm_90a ] %d registers, %d spill bytes, %d stack bytes, %lld shared bytes\n",
                c.Args().c_str(), code->registers, code->spill_stores, code->stack_bytes, static_cast<long long>(k->shared_bytes));
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << c.Args() << ": " << code->log;
  }
}

}  // namespace
