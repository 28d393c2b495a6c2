// kernels/gemm.py's matmul_splitk (issue #11's skinny GEMMs, M = 16 and 128 by 8192 x 8192) through the
// exact sm_90a lowering (TMA, wgmma, warp specialization, staged epilogue) in the SIMT interpreter against
// float64 on random inputs, both of its kernels:
//   - reduce="partials": split z stores its tile into its own float32 slice W[z] (no atomics); the
//     workspace starts NaN, so an element the sum kernel reads and no split wrote shows up; each slice must
//     hold its split's partial product, then the sum kernel's C the whole product (rounded once to bf16);
//   - swap_ab=True: the split kernel computes C^T = B^T A^T (B's tile as wgmma's MN-major A operand, A's
//     16-row tile as its K-major B operand, N = block_M) and stores / adds it transposed;
//   - the two together, and swap_ab with the atomic reduction (workspace zero, f32 atomics).
// Both kernels must be wgmma + warp-specialized where the configs say so (the notes), and print and
// compile for sm_90a with ptxas without spills at hopper_bench's shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
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

struct SplitCase {
  int64_t M, N, K, split, bm, bn, bk, threads, stages;
  std::string reduce;  // atomic | partials
  bool swap;
  std::string Args() const {
    char b[400];
    std::snprintf(b, sizeof b,
                  "%lld, %lld, %lld, %lld, dtype='bfloat16', out_dtype='bfloat16', block_M=%lld, block_N=%lld, "
                  "block_K=%lld, threads=%lld, num_stages=%lld, workspace=True, reduce='%s', swap_ab=%s",
                  (long long)M, (long long)N, (long long)K, (long long)split, (long long)bm, (long long)bn,
                  (long long)bk, (long long)threads, (long long)stages, reduce.c_str(), swap ? "True" : "False");
    return b;
  }
};

// Tile IR of kernels.gemm's factory(args), emitted by the Python frontend with Debian's python3.
tl::StatusOr<tl::ir::Function> Emit(const std::string& args, const std::string& factory = "matmul_splitk") {
  return tl::gpu::test::EmitFunction("kernels.gemm", factory, args, "sk");
}

// Kernel `which` (0: the split kernel, 1: the sum / cast) lowered as cuda_bundle.cc lowers the sm_90a variant
// (`kernels`: how many the program has).
tl::StatusOr<tl::gpu::SimtKernel> Lower(tl::ir::Function f, size_t which, size_t kernels = 2) {
  if (f.body.size() != kernels) return tl::Status(tl::StatusCode::kInternal, "expected " + std::to_string(kernels) +
                                                                                 " kernels, got " + std::to_string(f.body.size()));
  f.body = {f.body[which]};
  return tl::gpu::LowerToSimt(f, tl::gpu::test::Sm90a());
}

TEST(GemmSplitK, InterpreterMatchesFloat64) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/gemm.py";
  // (M, N, K, split, block M/N/K, threads, stages, reduce, swap): ragged M (5, 100) and a K whose last split
  // is partly past K (320 = 5 k-steps of 64: 3 splits of 2); 1 and 2 consumer warpgroups; swap with 1 and 2
  // m-tiles of 64 per warpgroup (block_N 64 / 128 over 128 threads) and block_M 16 and 8.
  for (const SplitCase& c : std::vector<SplitCase>{{64, 128, 256, 2, 64, 64, 64, 128, 3, "partials", false},
                                                   {100, 128, 320, 3, 128, 64, 64, 256, 2, "partials", false},
                                                   {16, 256, 512, 4, 16, 128, 64, 128, 4, "partials", true},
                                                   {5, 128, 320, 3, 16, 64, 64, 128, 3, "partials", true},
                                                   {16, 128, 256, 2, 16, 128, 64, 128, 2, "atomic", true},
                                                   {8, 128, 256, 2, 8, 64, 64, 128, 3, "partials", true}}) {
    tl::StatusOr<tl::ir::Function> f = Emit(c.Args());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k0 = Lower(*f, 0);
    ASSERT_TRUE(k0.ok()) << c.Args() << ": " << k0.status().ToString();
    const std::string notes = Notes(*k0);
    EXPECT_NE(notes.find("warp-specialized: "), std::string::npos) << c.Args() << "\n" << notes;
    EXPECT_EQ(notes.find("not warp-specialized"), std::string::npos) << c.Args() << "\n" << notes;
    EXPECT_EQ(notes.find("not wgmma"), std::string::npos) << c.Args() << "\n" << notes;
    tl::StatusOr<tl::gpu::SimtKernel> k1 = Lower(*f, 1);
    ASSERT_TRUE(k1.ok()) << c.Args() << ": " << k1.status().ToString();

    std::mt19937 rng(static_cast<uint32_t>(c.M * 131 + c.K + c.split + (c.swap ? 7 : 0)));
    std::uniform_real_distribution<double> d(-1, 1);
    std::map<std::string, std::vector<double>> t;
    t["A"].resize(static_cast<size_t>(c.M * c.K));
    t["B"].resize(static_cast<size_t>(c.K * c.N));
    for (double& v : t["A"]) v = tl::gpu::test::RoundToBf16(d(rng));
    for (double& v : t["B"]) v = tl::gpu::test::RoundToBf16(d(rng));
    const bool partials = c.reduce == "partials";
    const size_t mn = static_cast<size_t>(c.M * c.N);
    // partials: any contents (NaN: read before written shows); atomic: the workspace starts zero
    t["W"].assign(partials ? mn * static_cast<size_t>(c.split) : mn, partials ? std::nan("") : 0.0);
    t["C"].assign(mn, std::nan(""));
    const tl::Status s0 = tl::gpu::test::Interpret(*k0, &t);
    ASSERT_TRUE(s0.ok()) << c.Args() << ": split kernel: " << s0.ToString();
    const std::vector<double>& a = t["A"];
    const std::vector<double>& b = t["B"];
    const int64_t per = (c.K / c.bk + (c.K % c.bk != 0) + c.split - 1) / c.split * c.bk;  // K columns per split
    double worst_w = 0, worst_c = 0, norm = 0;
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double full = 0, mag = 0;
        for (int64_t z = 0; z < c.split; ++z) {
          double part = 0;
          for (int64_t p = z * per; p < std::min(c.K, (z + 1) * per); ++p) {
            const double x = a[static_cast<size_t>(m * c.K + p)] * b[static_cast<size_t>(p * c.N + n)];
            part += x;
            mag += std::fabs(x);
          }
          full += part;
          if (partials) {
            const double got = t["W"][static_cast<size_t>(z) * mn + static_cast<size_t>(m * c.N + n)];
            worst_w = std::max(worst_w, tl::gpu::test::NanAsInf(std::fabs(got - part)) / (1 + mag));
          }
        }
        if (!partials) {
          worst_w = std::max(worst_w, tl::gpu::test::NanAsInf(std::fabs(t["W"][static_cast<size_t>(m * c.N + n)] - full)) /
                                          (1 + mag));
        }
        norm = std::max(norm, std::fabs(full));
      }
    }
    EXPECT_LE(worst_w, 1e-6) << c.Args() << ": the workspace after the split kernel";
    const tl::Status s1 = tl::gpu::test::Interpret(*k1, &t);
    ASSERT_TRUE(s1.ok()) << c.Args() << ": sum kernel: " << s1.ToString();
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double full = 0;
        for (int64_t p = 0; p < c.K; ++p) full += a[static_cast<size_t>(m * c.K + p)] * b[static_cast<size_t>(p * c.N + n)];
        worst_c = std::max(worst_c, tl::gpu::test::NanAsInf(std::fabs(t["C"][static_cast<size_t>(m * c.N + n)] - full)));
      }
    }
    // C rounded once to bf16: half an ulp (2^-9 relative) of the largest value, plus float32 sums
    EXPECT_LE(worst_c, 4e-3 * norm) << c.Args();
    if (!partials) {
      for (double w : t["W"]) EXPECT_EQ(w, 0.0) << c.Args() << ": the cast kernel leaves the workspace zero";
    }
    EXPECT_GT(norm, 1.0) << c.Args();
    std::printf("[ matmul_splitk %s ] workspace error %.3g, C error %.3g of max |C| %.3g\n", c.Args().c_str(), worst_w,
                worst_c, norm);
  }
}

// hopper_bench's M = 16 / 128, N = K = 8192 configs with the new variants: printed CUDA (the partials split
// kernel has no atomics and stores 16 bytes at a time; the swapped one runs wgmma m64n16 with a transposed A
// descriptor) and ptxas for sm_90a without spills.
TEST(GemmSplitK, Sm90aSourceAndPtxas) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/gemm.py";
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const SplitCase& c : std::vector<SplitCase>{{128, 8192, 8192, 4, 128, 256, 64, 256, 4, "partials", false},
                                                   {128, 8192, 8192, 2, 128, 64, 64, 128, 4, "partials", false},
                                                   {16, 8192, 8192, 4, 16, 256, 64, 128, 6, "partials", true},
                                                   {16, 8192, 8192, 4, 16, 128, 64, 128, 6, "swap-atomic", true}}) {
    SplitCase e = c;
    if (e.reduce == "swap-atomic") e.reduce = "atomic";
    tl::StatusOr<tl::ir::Function> f = Emit(e.Args());
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    for (size_t which : {0, 1}) {
      tl::StatusOr<tl::gpu::SimtKernel> k = Lower(*f, which);
      ASSERT_TRUE(k.ok()) << e.Args() << ": " << k.status().ToString();
      tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
      ASSERT_TRUE(src.ok()) << src.status().ToString();
      const std::string& s = src->source;
      const std::string body = s.substr(s.find("__global__"));  // the kernel, not the printed helpers
      if (which == 0) {
        EXPECT_NE(Notes(*k).find("warp-specialized: "), std::string::npos) << e.Args() << "\n" << Notes(*k);
        const std::string shape = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(e.swap ? e.bm : e.bn) + "k16";
        EXPECT_NE(s.find(shape), std::string::npos) << e.Args() << ": no " << shape;
        if (e.reduce == "partials") {
          EXPECT_EQ(body.find("tl_atomic_add"), std::string::npos) << e.Args();
          EXPECT_EQ(body.find("atomicAdd("), std::string::npos) << e.Args();
        } else {
          EXPECT_TRUE(body.find("atomicAdd(&W[") != std::string::npos ||
                      body.find("tl_atomic_add_f32x2(&W[") != std::string::npos) << e.Args();
        }
        if (e.reduce == "partials" && !e.swap && e.bn == 64) {  // the staged epilogue: 16-byte row stores into W[z]
          // (128x256: the f32 tile is larger than any dead stage buffer, so it stays direct)
          EXPECT_NE(s.find("reinterpret_cast<tl_v16*>(&W["), std::string::npos) << e.Args() << "\n" << s.substr(s.size() - 3000);
        }
      }
      if (!tc.ok()) continue;
      tl::StatusOr<cu::CompiledCode> code = tc->Compile(s, "sk", "sm_90a");
      ASSERT_TRUE(code.ok()) << e.Args() << ": " << code.status().ToString();
      std::printf("[ matmul_splitk %s kernel %zu sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n",
                  e.Args().c_str(), which, code->registers, code->spill_stores, static_cast<long long>(k->shared_bytes));
      EXPECT_EQ(code->spill_stores, 0) << e.Args();
      EXPECT_EQ(code->log.find("serialized"), std::string::npos) << e.Args() << ": " << code->log;
    }
  }
}

// matmul(swap_ab=True): one kernel, C^T = B^T A^T per block (wgmma m64nMk16 with B's tile as the MN-major A
// operand), C stored transposed in bf16 -- hopper_bench's non-split M = 16 configs. Interpreter vs float64 with
// ragged M (5, 13 of a 16-row tile; 8-row tiles), 1 and 2 m-tiles per warpgroup, block_K 64 and 128 (k-steps
// crossing A's 128-byte panels), more stages than k-steps; then the printed sm_90a kernel at 16 x 8192 x 8192.
TEST(GemmSwapAB, InterpreterMatchesFloat64AndSm90a) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to emit kernels/gemm.py";
  struct C { int64_t M, N, K, bm, bn, bk, stages; };
  for (const C& c : std::vector<C>{{16, 128, 512, 16, 64, 128, 3}, {5, 256, 320, 16, 128, 64, 4},
                                   {13, 128, 256, 16, 64, 64, 6}, {8, 64, 384, 8, 64, 128, 2}}) {
    char args[300];
    std::snprintf(args, sizeof args, "%lld, %lld, %lld, dtype='bfloat16', out_dtype='bfloat16', block_M=%lld, "
                  "block_N=%lld, block_K=%lld, num_stages=%lld, threads=128, swap_ab=True", (long long)c.M,
                  (long long)c.N, (long long)c.K, (long long)c.bm, (long long)c.bn, (long long)c.bk, (long long)c.stages);
    tl::StatusOr<tl::ir::Function> f = Emit(args, "matmul");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(*f, 0, 1);
    ASSERT_TRUE(k.ok()) << args << ": " << k.status().ToString();
    EXPECT_NE(Notes(*k).find("warp-specialized: "), std::string::npos) << args << "\n" << Notes(*k);
    EXPECT_EQ(Notes(*k).find("not wgmma"), std::string::npos) << args << "\n" << Notes(*k);
    std::mt19937 rng(static_cast<uint32_t>(c.M * 7 + c.N + c.K));
    std::uniform_real_distribution<double> d(-1, 1);
    std::map<std::string, std::vector<double>> t;
    t["A"].resize(static_cast<size_t>(c.M * c.K));
    t["B"].resize(static_cast<size_t>(c.K * c.N));
    for (double& v : t["A"]) v = tl::gpu::test::RoundToBf16(d(rng));
    for (double& v : t["B"]) v = tl::gpu::test::RoundToBf16(d(rng));
    t["C"].assign(static_cast<size_t>(c.M * c.N), std::nan(""));
    const tl::Status st = tl::gpu::test::Interpret(*k, &t);
    ASSERT_TRUE(st.ok()) << args << ": " << st.ToString();
    double worst = 0, norm = 0;
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double ref = 0;
        for (int64_t p = 0; p < c.K; ++p) ref += t["A"][static_cast<size_t>(m * c.K + p)] * t["B"][static_cast<size_t>(p * c.N + n)];
        worst = std::max(worst, tl::gpu::test::NanAsInf(std::fabs(t["C"][static_cast<size_t>(m * c.N + n)] - ref)));
        norm = std::max(norm, std::fabs(ref));
      }
    }
    EXPECT_LE(worst, 4e-3 * norm) << args;  // rounded once to bf16
    EXPECT_GT(norm, 1.0) << args;
    std::printf("[ matmul %s ] worst error %.3g of max |C| %.3g\n", args, worst, norm);
  }
  tl::StatusOr<cu::CudaToolchain> tc = cu::CudaToolchain::Create();
  for (const char* args : {"16, 8192, 8192, dtype='bfloat16', out_dtype='bfloat16', block_M=16, block_N=64, block_K=128, "
                           "num_stages=8, threads=128, swap_ab=True",
                           "16, 8192, 8192, dtype='float16', out_dtype='float16', block_M=16, block_N=64, block_K=128, "
                           "num_stages=8, threads=128, swap_ab=True"}) {
    tl::StatusOr<tl::ir::Function> f = Emit(args, "matmul");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    tl::StatusOr<tl::gpu::SimtKernel> k = Lower(*f, 0, 1);
    ASSERT_TRUE(k.ok()) << args << ": " << k.status().ToString();
    EXPECT_NE(Notes(*k).find("warp-specialized: "), std::string::npos) << args << "\n" << Notes(*k);
    tl::StatusOr<cu::CudaSource> src = cu::PrintCuda(*k);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    EXPECT_NE(src->source.find("wgmma.mma_async.sync.aligned.m64n16k16"), std::string::npos) << args;
    // the 8 stages asked for fit sm_90a's 227 KiB (8 x (4 KiB of A + 16 KiB of B)): none dropped
    EXPECT_EQ(Notes(*k).find("pipelines: "), std::string::npos) << args << "\n" << Notes(*k);
    EXPECT_GE(k->shared_bytes, 8 * 20480) << args;
    if (!tc.ok()) continue;
    tl::StatusOr<cu::CompiledCode> code = tc->Compile(src->source, "sk", "sm_90a");
    ASSERT_TRUE(code.ok()) << args << ": " << code.status().ToString();
    std::printf("[ matmul %s sm_90a ] %d registers, %d spill bytes, %lld shared bytes\n", args, code->registers,
                code->spill_stores, static_cast<long long>(k->shared_bytes));
    EXPECT_EQ(code->spill_stores, 0) << args;
    EXPECT_EQ(code->log.find("serialized"), std::string::npos) << args << ": " << code->log;
  }
}

}  // namespace
