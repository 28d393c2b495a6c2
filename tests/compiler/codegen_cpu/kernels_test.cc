// Hand-written Tile IR kernels compiled for every ISA level this machine runs,
// loaded with dlopen, run on several threads and compared with float64
// references. Sizes are deliberately not multiples of the tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cpu_test_util.h"

namespace tl::cputest {
namespace {

std::string IsaList(const std::vector<IsaLevel>& isas) {
  std::string s;
  for (IsaLevel l : isas) s += std::string(s.empty() ? "" : ",") + toolchain::IsaName(l);
  return s;
}

std::vector<std::unique_ptr<LoadedKernel>> MustBuild(const std::string& tir, const codegen::cpu::CpuLowerOptions& o = {}) {
  StatusOr<std::vector<std::unique_ptr<LoadedKernel>>> ks = BuildKernels(tir, RunnableIsas(), o);
  EXPECT_TRUE(ks.ok()) << ks.status().ToString();
  if (!ks.ok()) return {};
  return std::move(*ks);
}

// ---- elementwise with edges and dtype conversion --------------------------------

TEST(CpuKernels, ElementwiseEdgesAndConversions) {
  const std::string tir = R"(tileir 1
func @axpy(X: tensor[M, N] f16, Y: tensor[M, N] f32, Z: tensor[M, N] bf16, alpha: f32) dynamic(M: i32, N: i32) {
  kernel grid(ceildiv(N, 32), ceildiv(M, 16)) threads(128) -> (bx, by) {
    alloc x: fragment[16, 32] f32
    alloc y: fragment[16, 32] f32
    copy X[by * 16:16, bx * 32:32] -> x
    copy Y[by * 16:16, bx * 32:32] -> y
    parallel (i, j) in (16, 32) {
      y[i, j] = alpha * x[i, j] + exp(y[i, j]) * 0.5:f32
    }
    copy y -> Z[by * 16:16, bx * 32:32]
  }
}
)";
  const int M = 37, N = 70;
  const std::vector<float> xf = RandomFloats(M * N, 1), yv = RandomFloats(M * N, 2);
  std::vector<uint16_t> x(M * N);
  for (int i = 0; i < M * N; ++i) x[i] = FloatToHalf(xf[i]);
  float alpha = 1.75f;
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    // Z has a canary tail: out-of-bounds writes must be skipped.
    std::vector<uint16_t> z(M * N + 64, 0xabcd);
    std::vector<float> y = yv;
    ASSERT_EQ(Launch(*k, {x.data(), y.data(), z.data(), &alpha}, {M, N}), 0);
    for (int i = 0; i < M * N; ++i) {
      const double ref = alpha * static_cast<double>(HalfToFloat(x[i])) + std::exp(static_cast<double>(yv[i])) * 0.5;
      ASSERT_NEAR(Bf16ToFloat(z[i]), ref, std::fabs(ref) * 1.0 / 128 + 1e-6) << "element " << i;
    }
    for (int i = M * N; i < M * N + 64; ++i) ASSERT_EQ(z[i], 0xabcd) << "out-of-bounds write at " << i;
  }
}

// ---- reductions -------------------------------------------------------------

TEST(CpuKernels, Reductions) {
  const std::string tir = R"(tileir 1
func @rowstats(X: tensor[M, 64] f32, S: tensor[M] f32, Mx: tensor[M] f32, Mn: tensor[M] f32, Am: tensor[M] f32, As: tensor[M, 1] f32) dynamic(M: i32) {
  kernel grid(ceildiv(M, 8)) threads(128) -> (bx) {
    alloc x: fragment[8, 64] f32
    alloc s: fragment[8] f32
    alloc mx: fragment[8] f32
    alloc mn: fragment[8] f32
    alloc am: fragment[8] f32
    alloc as: fragment[8, 1] f32
    copy X[bx * 8:8, 0:64] -> x
    reduce sum x -> s dim=1 clear
    reduce max x -> mx dim=-1 clear
    fill mn, 0.25:f32
    reduce min x -> mn dim=1
    reduce absmax x -> am dim=1 clear
    reduce abssum x -> as dim=1 clear
    copy s -> S[bx * 8:8]
    copy mx -> Mx[bx * 8:8]
    copy mn -> Mn[bx * 8:8]
    copy am -> Am[bx * 8:8]
    copy as -> As[bx * 8:8, 0:1]
  }
}
)";
  const int M = 37;
  const std::vector<float> x = RandomFloats(M * 64, 3, -2.0f, 1.0f);
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<float> s(M), mx(M), mn(M), am(M), as(M);
    ASSERT_EQ(Launch(*k, {(void*)x.data(), s.data(), mx.data(), mn.data(), am.data(), as.data()}, {M}), 0);
    for (int r = 0; r < M; ++r) {
      double rs = 0, rmx = -INFINITY, rmn = 0.25, ram = 0, ras = 0;
      for (int c = 0; c < 64; ++c) {
        const double v = x[r * 64 + c];
        rs += v;
        rmx = std::max(rmx, v);
        rmn = std::min(rmn, v);
        ram = std::max(ram, std::fabs(v));
        ras += std::fabs(v);
      }
      EXPECT_NEAR(s[r], rs, 1e-4) << r;
      EXPECT_EQ(mx[r], static_cast<float>(rmx)) << r;
      EXPECT_EQ(mn[r], static_cast<float>(rmn)) << r;
      EXPECT_EQ(am[r], static_cast<float>(ram)) << r;
      EXPECT_NEAR(as[r], ras, 1e-4) << r;
    }
  }
}

// ---- GEMM: 4 transpose combinations x f32/f16/bf16 ---------------------------------

struct GemmCase {
  bool ta, tb;
  const char* dtype;
  int bm, bn, bk;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " " << c.dtype << " tiles " << c.bm << "x" << c.bn << "x" << c.bk;
}

std::string GemmTir(const GemmCase& c) {
  auto s = [](int v) { return std::to_string(v); };
  const std::string dt = c.dtype;
  const std::string a_shape = c.ta ? "K, M" : "M, K", b_shape = c.tb ? "N, K" : "K, N";
  const std::string as = c.ta ? s(c.bk) + ", " + s(c.bm) : s(c.bm) + ", " + s(c.bk);
  const std::string bs = c.tb ? s(c.bn) + ", " + s(c.bk) : s(c.bk) + ", " + s(c.bn);
  const std::string a_reg = c.ta ? "A[k * " + s(c.bk) + ":" + s(c.bk) + ", by * " + s(c.bm) + ":" + s(c.bm) + "]"
                                 : "A[by * " + s(c.bm) + ":" + s(c.bm) + ", k * " + s(c.bk) + ":" + s(c.bk) + "]";
  const std::string b_reg = c.tb ? "B[bx * " + s(c.bn) + ":" + s(c.bn) + ", k * " + s(c.bk) + ":" + s(c.bk) + "]"
                                 : "B[k * " + s(c.bk) + ":" + s(c.bk) + ", bx * " + s(c.bn) + ":" + s(c.bn) + "]";
  return "tileir 1\nfunc @gemm(A: tensor[" + a_shape + "] " + dt + ", B: tensor[" + b_shape + "] " + dt +
         ", C: tensor[M, N] f32) dynamic(M: i32, N: i32, K: i32) loc(\"gemm.py\", 3) {\n"
         "  kernel grid(ceildiv(N, " + s(c.bn) + "), ceildiv(M, " + s(c.bm) + ")) threads(128) -> (bx, by) {\n"
         "    alloc A_s: shared[" + as + "] " + dt + "\n"
         "    alloc B_s: shared[" + bs + "] " + dt + "\n"
         "    alloc C_f: fragment[" + s(c.bm) + ", " + s(c.bn) + "] f32\n"
         "    fill C_f, 0.0:f32\n"
         "    for k in pipelined(0, ceildiv(K, " + s(c.bk) + "), stages=3) {\n"
         "      copy " + a_reg + " -> A_s\n"
         "      copy " + b_reg + " -> B_s\n"
         "      gemm A_s, B_s -> C_f" + (c.ta ? " trans_a" : "") + (c.tb ? " trans_b" : "") + "\n"
         "    }\n"
         "    copy C_f -> C[by * " + s(c.bm) + ":" + s(c.bm) + ", bx * " + s(c.bn) + ":" + s(c.bn) + "]\n"
         "  }\n}\n";
}

class CpuGemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(CpuGemm, MatchesFloat64Reference) {
  const GemmCase c = GetParam();
  const int M = 100, N = 70, K = 90;
  const std::string dt = c.dtype;
  // Store operands in the kernel's dtype; the reference uses the stored values.
  auto make = [&](int rows, int cols, uint32_t seed, std::vector<uint16_t>& half, std::vector<float>& f32,
                  std::vector<double>& ref) {
    f32 = RandomFloats(static_cast<size_t>(rows) * cols, seed);
    half.resize(f32.size());
    ref.resize(f32.size());
    for (size_t i = 0; i < f32.size(); ++i) {
      if (dt == "f16") half[i] = FloatToHalf(f32[i]), ref[i] = HalfToFloat(half[i]);
      else if (dt == "bf16") half[i] = FloatToBf16(f32[i]), ref[i] = Bf16ToFloat(half[i]);
      else ref[i] = f32[i];
    }
  };
  std::vector<uint16_t> ah, bh;
  std::vector<float> af, bf;
  std::vector<double> ar, br;
  make(c.ta ? K : M, c.ta ? M : K, 11, ah, af, ar);
  make(c.tb ? N : K, c.tb ? K : N, 12, bh, bf, br);
  auto A = [&](int i, int k) { return c.ta ? ar[k * M + i] : ar[i * K + k]; };
  auto B = [&](int k, int j) { return c.tb ? br[j * K + k] : br[k * N + j]; };
  void* a = dt == "f32" ? static_cast<void*>(af.data()) : ah.data();
  void* b = dt == "f32" ? static_cast<void*>(bf.data()) : bh.data();
  // Shared tiles as GEMM panels (the copies pack; the default) and row-major (tl_gemm packs from shared memory).
  for (bool panels : {true, false}) {
    SCOPED_TRACE(panels ? "panel layout" : "row-major shared tiles");
    for (auto& k : MustBuild(GemmTir(c), {{panels}})) {
      SCOPED_TRACE(toolchain::IsaName(k->isa));
      std::vector<float> C(M * N + 16, -7.0f);
      ASSERT_EQ(Launch(*k, {a, b, C.data()}, {M, N, K}), 0);
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double ref = 0, mag = 0;
          for (int kk = 0; kk < K; ++kk) {
            ref += A(i, kk) * B(kk, j);
            mag += std::fabs(A(i, kk) * B(kk, j));
          }
          ASSERT_NEAR(C[i * N + j], ref, 1e-5 * mag + 1e-6) << "C[" << i << ", " << j << "]";
        }
      }
      for (int i = M * N; i < M * N + 16; ++i) ASSERT_EQ(C[i], -7.0f) << "out-of-bounds write";
    }
  }
}

std::vector<GemmCase> AllGemmCases() {
  std::vector<GemmCase> cases;
  for (const char* dt : {"f32", "f16", "bf16"}) {
    for (int t = 0; t < 4; ++t) cases.push_back({(t & 1) != 0, (t & 2) != 0, dt, 32, 32, 16});
  }
  // Tiles bigger than every microkernel (6x16, 8x32) with ragged edges.
  cases.push_back({false, false, "f32", 48, 64, 32});
  cases.push_back({true, true, "f32", 48, 64, 32});
  // The packers' vector forms (tl_pack_panels): k tails that are not a whole
  // transposed group (24 = 16 + 8 on v4, 20 = 16 + 4 and 8 + 8 + 4), converted
  // f16/bf16 loads, and x-contiguous B rows over two panels.
  for (const char* dt : {"f32", "f16", "bf16"}) {
    cases.push_back({false, false, dt, 48, 64, 24});
    cases.push_back({false, true, dt, 48, 64, 20});
    cases.push_back({true, false, dt, 40, 96, 40});
  }
  // A partial last panel in the row-copy form (48 columns: 32 + 16 on v4), k-contiguous A of 6-row panels (v3).
  cases.push_back({false, false, "f32", 36, 48, 32});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, CpuGemm, ::testing::ValuesIn(AllGemmCases()),
                         [](const ::testing::TestParamInfo<GemmCase>& p) {
                           const GemmCase& c = p.param;
                           return std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N") + "_" + c.dtype + "_" +
                                  std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk);
                         });

// A non-float accumulator takes the plain-loop path.
TEST(CpuKernels, GemmIntegerAccumulator) {
  const std::string tir = R"(tileir 1
func @igemm(A: tensor[20, 12] i8, B: tensor[12, 9] i8, C: tensor[20, 9] i32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc a: shared[20, 12] i8
    alloc b: shared[12, 9] i8
    alloc c: fragment[20, 9] i32
    copy A -> a
    copy B -> b
    fill c, 5
    gemm a, b -> c
    copy c -> C
  }
}
)";
  std::vector<int8_t> A(240), B(108);
  for (int i = 0; i < 240; ++i) A[i] = static_cast<int8_t>((i * 37) % 255 - 127);
  for (int i = 0; i < 108; ++i) B[i] = static_cast<int8_t>((i * 53) % 251 - 125);
  for (auto& k : MustBuild(tir)) {
    std::vector<int32_t> C(180);
    ASSERT_EQ(Launch(*k, {A.data(), B.data(), C.data()}, {}), 0);
    for (int i = 0; i < 20; ++i) {
      for (int j = 0; j < 9; ++j) {
        int32_t ref = 5;
        for (int kk = 0; kk < 12; ++kk) ref += A[i * 12 + kk] * B[kk * 9 + j];
        ASSERT_EQ(C[i * 9 + j], ref) << i << "," << j;
      }
    }
  }
}

// ---- cumsum ---------------------------------------------------------------------

TEST(CpuKernels, CumsumForwardAndReverse) {
  const std::string tir = R"(tileir 1
func @cs(X: tensor[M, 48] f32, Y: tensor[M, 48] f32, Z: tensor[M, 48] f32) dynamic(M: i32) {
  kernel grid(ceildiv(M, 4)) threads(128) -> (bx) {
    alloc x: fragment[4, 48] f32
    alloc y: fragment[4, 48] f32
    copy X[bx * 4:4, 0:48] -> x
    cumsum x -> y dim=1
    copy y -> Y[bx * 4:4, 0:48]
    cumsum x -> x dim=-1 reverse
    copy x -> Z[bx * 4:4, 0:48]
  }
}
)";
  const int M = 10;
  const std::vector<float> x = RandomFloats(M * 48, 5);
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<float> y(M * 48), z(M * 48);
    ASSERT_EQ(Launch(*k, {(void*)x.data(), y.data(), z.data()}, {M}), 0);
    for (int r = 0; r < M; ++r) {
      double fwd = 0, rev = 0;
      for (int c = 0; c < 48; ++c) {
        fwd += x[r * 48 + c];
        rev += x[r * 48 + 47 - c];
        ASSERT_NEAR(y[r * 48 + c], fwd, 1e-5);
        ASSERT_NEAR(z[r * 48 + 47 - c], rev, 1e-5);
      }
    }
  }
}

// ---- atomic_add: split-K GEMM from concurrent blocks ---------------------------------

TEST(CpuKernels, AtomicAddSplitK) {
  const std::string tir = R"(tileir 1
func @splitk(A: tensor[M, K] f32, B: tensor[K, N] f32, C: tensor[M, N] f32, Count: tensor[1] i32) dynamic(M: i32, N: i32, K: i32) {
  kernel grid(ceildiv(N, 32), ceildiv(M, 32), 4) threads(128) -> (bx, by, bz) {
    alloc A_s: shared[32, 16] f32
    alloc B_s: shared[16, 32] f32
    alloc C_f: fragment[32, 32] f32
    fill C_f, 0.0:f32
    for k in serial(bz, ceildiv(K, 16), 4) {
      copy A[by * 32:32, k * 16:16] -> A_s
      copy B[k * 16:16, bx * 32:32] -> B_s
      gemm A_s, B_s -> C_f
    }
    atomic_add C_f -> C[by * 32:32, bx * 32:32]
    atomic_add Count[0], 1
  }
}
)";
  const int M = 45, N = 50, K = 200;
  const std::vector<float> a = RandomFloats(M * K, 7), b = RandomFloats(K * N, 8);
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<float> c(M * N + 8, 0.0f);
    int32_t count = 0;
    ASSERT_EQ(Launch(*k, {(void*)a.data(), (void*)b.data(), c.data(), &count}, {M, N, K}, 4), 0);
    EXPECT_EQ(count, 2 * 2 * 4);  // every block added once, none lost
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double ref = 0;
        for (int kk = 0; kk < K; ++kk) ref += static_cast<double>(a[i * K + kk]) * b[kk * N + j];
        ASSERT_NEAR(c[i * N + j], ref, 1e-4) << i << "," << j;
      }
    }
    for (int i = M * N; i < M * N + 8; ++i) ASSERT_EQ(c[i], 0.0f);
  }
}

// ---- integer semantics: floor division and modulo -----------------------------------

TEST(CpuKernels, IntegerFloorDivision) {
  const std::string tir = R"(tileir 1
func @ints(X: tensor[64] i32, Q: tensor[64] i32, R: tensor[64] i32, T: tensor[64] i32, U: tensor[64] i32, c: i32) {
  kernel grid(1) threads(64) -> (bx) {
    parallel (i) in (64) {
      Q[i] = X[i] / c
      R[i] = X[i] % c
      T[i] = truncdiv(X[i], c)
      U[i] = truncmod(X[i], c) + ceildiv(X[i], 4)
    }
  }
}
)";
  std::vector<int32_t> x(64);
  for (int i = 0; i < 64; ++i) x[i] = (i - 32) * 3 + (i % 5);
  for (int32_t c : {7, -5}) {
    for (auto& k : MustBuild(tir)) {
      std::vector<int32_t> q(64), r(64), t(64), u(64);
      ASSERT_EQ(Launch(*k, {x.data(), q.data(), r.data(), t.data(), u.data(), &c}, {}), 0);
      for (int i = 0; i < 64; ++i) {
        const int64_t fq = static_cast<int64_t>(std::floor(static_cast<double>(x[i]) / c));
        EXPECT_EQ(q[i], fq) << x[i] << " / " << c;
        EXPECT_EQ(r[i], x[i] - fq * c) << x[i] << " % " << c;
        EXPECT_EQ(t[i], x[i] / c);
        EXPECT_EQ(u[i], x[i] % c + static_cast<int32_t>(std::ceil(x[i] / 4.0)));
      }
    }
  }
}

// ---- f16 / bf16 conversions: v2's bit tricks equal the hardware, bit for bit ----------

TEST(CpuKernels, HalfConversionsBitExact) {
  const std::string tir = R"(tileir 1
func @cvt(X: tensor[N] f32, H: tensor[N] f16, Bh: tensor[N] bf16, Back: tensor[N] f32) dynamic(N: i32) {
  kernel grid(ceildiv(N, 1024)) threads(128) -> (bx) {
    alloc x: fragment[1024] f32
    alloc h: fragment[1024] f16
    copy X[bx * 1024:1024] -> x
    copy x -> H[bx * 1024:1024]
    copy x -> Bh[bx * 1024:1024]
    copy x -> h
    copy h -> Back[bx * 1024:1024]
  }
}
)";
  // Every f16 value's neighbourhood: exact values, halfway points (ties) and
  // off-by-one-ulp f32s around them, plus specials and out-of-range values.
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    for (int32_t d : {0, 1, -1, 4096, 4095, 4097, -4096}) {
      const uint32_t v = u + static_cast<uint32_t>(d);
      float g;
      std::memcpy(&g, &v, 4);
      x.push_back(g);
    }
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e9f, -1e9f, 1e-10f, -3e-8f, 2.98e-8f, INFINITY,
                  -INFINITY, NAN, 5.960464477539063e-8f, 6.097555e-05f, 3.0517578e-05f}) {
    x.push_back(f);
  }
  const int n = static_cast<int>(x.size());
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<uint16_t> h(n), bh(n);
    std::vector<float> back(n);
    ASSERT_EQ(Launch(*k, {x.data(), h.data(), bh.data(), back.data()}, {n}), 0);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], FloatToHalf(x[i])) << "f32->f16 of " << x[i] << " (bits " << std::hex << x[i] << ")";
      if (!std::isnan(x[i])) {
        ASSERT_EQ(bh[i], FloatToBf16(x[i])) << "f32->bf16 of " << x[i];
        const float ref = HalfToFloat(h[i]);
        ASSERT_EQ(std::memcmp(&back[i], &ref, 4), 0) << "f16->f32 of " << h[i];
      } else {
        ASSERT_TRUE((bh[i] & 0x7fff) > 0x7f80) << "bf16 nan";
        ASSERT_TRUE(std::isnan(back[i]));
      }
    }
  }
}

// ---- serial loops with negative steps, vars, ifs, select, local arrays ----------------

TEST(CpuKernels, ControlFlowAndScalars) {
  const std::string tir = R"(tileir 1
func @ctl(X: tensor[N] f32, Y: tensor[N] f32, n_iter: i32) dynamic(N: i32) {
  kernel grid(ceildiv(N, 8)) threads(8) -> (bx) {
    alloc t: local[8] f32
    var acc: f32 = 0.0:f32
    for i in serial(7, -1, -1) {
      let g = bx * 8 + i
      if g < N {
        t[i] = X[g]
      } else {
        t[i] = 0.0:f32
      }
    }
    for r in serial(0, n_iter) {
      acc = acc + 1.0:f32
    }
    parallel (j) in (8) {
      if bx * 8 + j < N {
        Y[bx * 8 + j] = select(t[j] > 0.0:f32, t[j] * acc, -t[j])
      }
    }
  }
}
)";
  const int N = 21;
  const std::vector<float> x = RandomFloats(N, 9);
  int32_t n_iter = 3;
  for (auto& k : MustBuild(tir)) {
    std::vector<float> y(N + 4, 42.0f);
    ASSERT_EQ(Launch(*k, {(void*)x.data(), y.data(), &n_iter}, {N}), 0);
    for (int i = 0; i < N; ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] * 3.0f : -x[i]) << i;
    for (int i = N; i < N + 4; ++i) EXPECT_EQ(y[i], 42.0f);
  }
}

TEST(CpuKernels, RunsOnTheLevelsThisMachineHas) {
  // Documents what ran: v2 always; v3/v4 where CPUID has them.
  const std::vector<IsaLevel> isas = RunnableIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), IsaLevel::kV2);
  std::printf("executing CPU variants: %s\n", IsaList(isas).c_str());
}

}  // namespace
}  // namespace tl::cputest
