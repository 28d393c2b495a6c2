// Tensor edges: every element access and tile op of a CPU kernel stays inside
// the tensors it was given, for dynamic and static shapes whose sizes are not
// multiples of the tiles (passes::GuardTensorAccesses plus the emitter's
// region guards). Every output buffer has a canary tail (and the inputs are
// surrounded by poison) so an access past the tensor is caught, not just
// survived; references are float64 on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "tilelang/passes/passes.h"

namespace tl::cputest {
namespace {

constexpr int kCanary = 64;
constexpr float kPoison = 1.0e30f;  // sits around inputs: reading it shows up in any sum

std::vector<std::unique_ptr<LoadedKernel>> MustBuild(const std::string& tir) {
  StatusOr<std::vector<std::unique_ptr<LoadedKernel>>> ks = BuildKernels(tir, RunnableIsas());
  EXPECT_TRUE(ks.ok()) << ks.status().ToString();
  if (!ks.ok()) return {};
  return std::move(*ks);
}

// An input of n floats with kCanary poison values before and after it.
struct Padded {
  explicit Padded(const std::vector<float>& v) : storage(v.size() + 2 * kCanary, kPoison) {
    std::copy(v.begin(), v.end(), storage.begin() + kCanary);
  }
  float* data() { return storage.data() + kCanary; }
  std::vector<float> storage;
};

void ExpectCanaries(const std::vector<float>& out, size_t n, float canary) {
  for (size_t i = n; i < out.size(); ++i) ASSERT_EQ(out[i], canary) << "write past the tensor at " << i - n;
}

// The upstream pattern that crashed: T.Parallel stores and loads on a tensor
// whose row count is a dynamic symbol, with 32-row tiles (m = 100).
TEST(CpuEdges, ParallelStoresAndLoadsOnDynamicShapes) {
  const std::string tir = R"(tileir 1
func @scale(A: tensor[M, N] f32, B: tensor[M, N] f32) dynamic(M: i32, N: i32) {
  kernel grid(ceildiv(N, 16), ceildiv(M, 32)) threads(128) -> (bx, by) {
    parallel (i, j) in (32, 16) {
      B[by * 32 + i, bx * 16 + j] = A[by * 32 + i, bx * 16 + j] * 2.0:f32 + 1.0:f32
    }
  }
}
)";
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    for (auto [M, N] : {std::pair{100, 64}, {33, 70}, {7, 5}, {1, 1}, {32, 16}, {257, 3}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N));
      const std::vector<float> a = RandomFloats(static_cast<size_t>(M) * N, M * 131 + N);
      Padded pa(a);
      std::vector<float> b(static_cast<size_t>(M) * N + kCanary, -7.0f);
      ASSERT_EQ(Launch(*k, {pa.data(), b.data()}, {M, N}), 0);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], 2.0 * a[i] + 1.0, 1e-6) << "element " << i;
      ExpectCanaries(b, a.size(), -7.0f);
    }
  }
}

// Static shapes that are not multiples of the tiles get the same guards, and
// the interval proof keeps them off accesses that are always inside.
TEST(CpuEdges, ParallelOnStaticShapesNotMultiplesOfTheTile) {
  const std::string tir = R"(tileir 1
func @addrow(A: tensor[77, 45] f32, R: tensor[45] f32, B: tensor[77, 45] f32) {
  kernel grid(ceildiv(45, 16), ceildiv(77, 32)) threads(128) -> (bx, by) {
    parallel (i, j) in (32, 16) {
      B[by * 32 + i, bx * 16 + j] = A[by * 32 + i, bx * 16 + j] + R[bx * 16 + j]
    }
  }
}
)";
  const int M = 77, N = 45;
  const std::vector<float> a = RandomFloats(M * N, 3), r = RandomFloats(N, 4);
  Padded pa(a), pr(r);
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<float> b(M * N + kCanary, 5.0f);
    ASSERT_EQ(Launch(*k, {pa.data(), pr.data(), b.data()}, {}), 0);
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) ASSERT_NEAR(b[i * N + j], a[i * N + j] + r[j], 1e-6) << i << "," << j;
    }
    ExpectCanaries(b, M * N, 5.0f);
  }
}

// Reads outside a tensor give 0 (negative indices included), and a reduction
// over a partial tile loaded element by element sums only real elements.
TEST(CpuEdges, OutOfBoundsReadsAreZero) {
  const std::string tir = R"(tileir 1
func @shiftsum(X: tensor[M, N] f32, Y: tensor[M, N] f32, S: tensor[M] f32) dynamic(M: i32, N: i32) {
  kernel grid(ceildiv(M, 8)) threads(128) -> (bx) {
    alloc t: fragment[8, 64] f32
    alloc s: fragment[8] f32
    for c in serial(0, ceildiv(N, 64)) {
      parallel (i, j) in (8, 64) {
        Y[bx * 8 + i, c * 64 + j] = X[bx * 8 + i, c * 64 + j - 3] + X[bx * 8 + i - 1, c * 64 + j]
      }
    }
    fill s, 0.0:f32
    for c2 in serial(0, ceildiv(N, 64)) {
      parallel (i2, j2) in (8, 64) {
        t[i2, j2] = X[bx * 8 + i2, c2 * 64 + j2]
      }
      reduce sum t -> s dim=1 clear
      parallel (i3) in (8) {
        S[bx * 8 + i3] = S[bx * 8 + i3] * cast<f32>(c2 > 0) + s[i3]
      }
    }
  }
}
)";
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    for (auto [M, N] : {std::pair{100, 70}, {13, 200}, {8, 64}, {3, 5}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N));
      const std::vector<float> x = RandomFloats(static_cast<size_t>(M) * N, M + 17 * N);
      Padded px(x);
      std::vector<float> y(static_cast<size_t>(M) * N + kCanary, 9.0f), s(M + kCanary, 9.0f);
      ASSERT_EQ(Launch(*k, {px.data(), y.data(), s.data()}, {M, N}), 0);
      for (int i = 0; i < M; ++i) {
        double sum = 0;
        for (int j = 0; j < N; ++j) {
          const double left = j >= 3 ? x[i * N + j - 3] : 0.0;  // X[i, j-3] is outside for j < 3
          const double up = i >= 1 ? x[(i - 1) * N + j] : 0.0;
          ASSERT_NEAR(y[i * N + j], left + up, 1e-6) << i << "," << j;
          sum += x[i * N + j];
        }
        ASSERT_NEAR(s[i], sum, 1e-4) << "row " << i;
      }
      ExpectCanaries(y, static_cast<size_t>(M) * N, 9.0f);
      ExpectCanaries(s, M, 9.0f);
    }
  }
}

// Indirect indices from data: out-of-range ones read 0 and drop the write.
TEST(CpuEdges, GatherAndScatterWithIndicesFromData) {
  const std::string tir = R"(tileir 1
func @gather(X: tensor[N] f32, Idx: tensor[M] i32, G: tensor[M] f32, Sc: tensor[N] f32) dynamic(N: i32, M: i32) {
  kernel grid(ceildiv(M, 32)) threads(128) -> (bx) {
    parallel (i) in (32) {
      G[bx * 32 + i] = X[Idx[bx * 32 + i]]
      Sc[Idx[bx * 32 + i]] = cast<f32>(bx * 32 + i)
    }
  }
}
)";
  const int N = 50, M = 45;
  std::vector<int32_t> idx(M);
  for (int i = 0; i < M; ++i) idx[i] = (i % 5 == 0) ? -1 - i : (i % 7 == 0 ? N + i : (i * 13) % N);
  idx[1] = N;          // exactly one past the end
  idx[2] = INT32_MIN;  // far below
  const std::vector<float> x = RandomFloats(N, 11);
  Padded px(x);
  std::vector<int32_t> pidx(M + kCanary, 1 << 30);  // poison past Idx: a read of it would index far away
  std::copy(idx.begin(), idx.end(), pidx.begin());
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    std::vector<float> g(M + kCanary, 3.0f), sc(N + kCanary, -1.0f);
    ASSERT_EQ(Launch(*k, {px.data(), pidx.data(), g.data(), sc.data()}, {N, M}, 1), 0);
    std::vector<float> sc_ref(N, -1.0f);
    for (int i = 0; i < (M + 31) / 32 * 32; ++i) {
      // Past M, Idx itself reads as 0: the padded lanes scatter into Sc[0]
      // (upstream's semantics too: the read is zero, the write is inside).
      const int32_t at = i < M ? idx[i] : 0;
      const bool in = at >= 0 && at < N;
      if (i < M) {
        ASSERT_EQ(g[i], in ? x[at] : 0.0f) << "gather " << i << " (index " << at << ")";
      }
      if (in) sc_ref[at] = static_cast<float>(i);  // one worker thread: blocks and lanes in order
    }
    for (int j = 0; j < N; ++j) ASSERT_EQ(sc[j], sc_ref[j]) << "scatter " << j;
    ExpectCanaries(g, M, 3.0f);
    ExpectCanaries(sc, N, -1.0f);
  }
}

// Scalar atomic_add inside T.Parallel over a partial tile, fill and copy of
// partial global regions, and a dynamic GEMM whose M, N, K are not multiples
// of the tiles (the upstream dynamic_shape example's structure).
TEST(CpuEdges, AtomicsFillCopyAndGemmAtTheEdges) {
  const std::string tir = R"(tileir 1
func @edges(A: tensor[M, K] f32, B: tensor[K, N] f32, C: tensor[M, N] f32, ColSum: tensor[N] f32, F: tensor[M, N] f32, Cp: tensor[M, N] f32) dynamic(M: i32, N: i32, K: i32) {
  kernel grid(ceildiv(N, 32), ceildiv(M, 32)) threads(128) -> (bx, by) {
    alloc A_s: shared[32, 16] f32
    alloc B_s: shared[16, 32] f32
    alloc C_f: fragment[32, 32] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, ceildiv(K, 16), stages=3) {
      copy A[by * 32:32, k * 16:16] -> A_s
      copy B[k * 16:16, bx * 32:32] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 32:32, bx * 32:32]
    parallel (i, j) in (32, 32) {
      atomic_add ColSum[bx * 32 + j], C_f[i, j] * cast<f32>(by * 32 + i < M)
    }
    fill F[by * 32:32, bx * 32:32], 4.0:f32
    copy C[by * 32:32, bx * 32:32] -> Cp[by * 32:32, bx * 32:32]
  }
}
)";
  for (auto& k : MustBuild(tir)) {
    SCOPED_TRACE(toolchain::IsaName(k->isa));
    for (auto [M, N, K] : {std::tuple{100, 70, 50}, {33, 31, 17}, {64, 64, 32}, {5, 3, 2}}) {
      SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
      const std::vector<float> a = RandomFloats(static_cast<size_t>(M) * K, M * 7 + K);
      const std::vector<float> b = RandomFloats(static_cast<size_t>(K) * N, N * 5 + K);
      Padded pa(a), pb(b);
      const size_t mn = static_cast<size_t>(M) * N;
      std::vector<float> c(mn + kCanary, 2.0f), cs(N + kCanary, 0.0f), f(mn + kCanary, 2.0f), cp(mn + kCanary, 2.0f);
      std::fill(cs.begin() + N, cs.end(), 8.0f);
      ASSERT_EQ(Launch(*k, {pa.data(), pb.data(), c.data(), cs.data(), f.data(), cp.data()}, {M, N, K}, 3), 0);
      std::vector<double> colsum(N, 0.0);
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double ref = 0;
          for (int kk = 0; kk < K; ++kk) ref += static_cast<double>(a[i * K + kk]) * b[kk * N + j];
          colsum[j] += ref;
          ASSERT_NEAR(c[i * N + j], ref, 1e-4) << i << "," << j;
          ASSERT_EQ(cp[i * N + j], c[i * N + j]) << i << "," << j;
          ASSERT_EQ(f[i * N + j], 4.0f) << i << "," << j;
        }
      }
      for (int j = 0; j < N; ++j) ASSERT_NEAR(cs[j], colsum[j], 1e-3) << "column " << j;
      ExpectCanaries(c, mn, 2.0f);
      ExpectCanaries(cp, mn, 2.0f);
      ExpectCanaries(f, mn, 2.0f);
      ExpectCanaries(cs, N, 8.0f);
    }
  }
}

// ---- the pass itself, on Tile IR text ------------------------------------------------

ir::Function ParseOne(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "t.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  return m->functions.at(0);
}

TEST(SafeAccess, ProvenAccessesKeepNoGuard) {
  // 1024 = 32 blocks x 32 rows: every index is proven inside; so are a
  // serial loop's and a let's, a floor-mod'd index, and a user-guarded one.
  ir::Function f = ParseOne(R"(tileir 1
func @p(A: tensor[1024, 64] f32, B: tensor[1024, 64] f32, V: tensor[M] f32) dynamic(M: i32) {
  kernel grid(32) threads(128) -> (bx) {
    parallel (i, j) in (32, 64) {
      B[bx * 32 + i, j] = A[bx * 32 + i, (j + 5) % 64]
    }
    for k in serial(0, 8) {
      let r = bx * 32 + k * 4
      B[r, 0] = A[r + 3, 63]
    }
    parallel (t) in (128) {
      if bx * 128 + t < M {
        V[bx * 128 + t] = 1.0:f32
      }
    }
  }
}
)");
  const passes::SafeAccessReport r = passes::GuardTensorAccesses(f);
  EXPECT_EQ(r.stores, 0) << ir::Print(f);
  EXPECT_EQ(r.loads, 0) << ir::Print(f);
  EXPECT_TRUE(ir::Verify(f).ok());
}

TEST(SafeAccess, UnprovenAccessesAreGuarded) {
  ir::Function f = ParseOne(R"(tileir 1
func @g(A: tensor[M, 100] f32, B: tensor[M, 100] f32, H: tensor[100] i32) dynamic(M: i64) {
  kernel grid(ceildiv(100, 32), 4) threads(128) -> (bx, by) {
    parallel (i, j) in (32, 32) {
      B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j - 1]
      atomic_add H[bx * 32 + j], 1
    }
  }
}
)");
  const passes::SafeAccessReport r = passes::GuardTensorAccesses(f);
  EXPECT_EQ(r.stores, 1);
  EXPECT_EQ(r.loads, 1);    // the load's column differs from the store's: its own guard
  EXPECT_EQ(r.atomics, 1);  // 4 blocks x 32 = 128 columns > 100
  const std::string text = ir::Print(f);
  EXPECT_NE(text.find("cast<i64>(by * 32 + i) < M"), std::string::npos) << text;  // i32 index, i64 symbol
  EXPECT_NE(text.find("bx * 32 + j < 100"), std::string::npos) << text;
  EXPECT_NE(text.find("bx * 32 + j - 1 >= 0"), std::string::npos) << text;
  EXPECT_NE(text.find("select("), std::string::npos) << text;
  EXPECT_TRUE(ir::Verify(f).ok()) << ir::Verify(f).ToString() << "\n" << text;
}

}  // namespace
}  // namespace tl::cputest
