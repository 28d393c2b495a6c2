// Tensor edges on the GPU lowering, checked by the SIMT interpreter (which
// reports any load or store outside a buffer as an error): T.Parallel stores
// and loads straight into tensors, scalar atomics and gathers through data
// indices, on dynamic and static sizes that are not multiples of the tiles.
// Writes outside a tensor are dropped, reads give 0 (passes::GuardTensorAccesses,
// run by LowerToSimt).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lowering_test_util.h"
#include "simt_interp.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

using tl::gpu::test::Parse;

tl::gpu::GpuLowerOptions Options() {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 99 * 1024;
  o.symbol_params = true;
  return o;
}

std::vector<double> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(d(rng));
  return v;
}

TEST(GpuEdges, ParallelStoresAndLoadsPastADynamicExtent) {
  const tl::ir::Function f = Parse(R"(tileir 1
func @scale(A: tensor[M, N] f32, B: tensor[M, N] f32) dynamic(M: i32, N: i32) {
  kernel grid(ceildiv(N, 16), ceildiv(M, 32)) threads(128) -> (bx, by) {
    parallel (i, j) in (32, 16) {
      B[by * 32 + i, bx * 16 + j] = A[by * 32 + i, bx * 16 + j - 1] * 2.0:f32 + 1.0:f32
    }
  }
}
)");
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, Options());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  for (auto [M, N] : {std::pair{100, 64}, {33, 70}, {7, 5}, {1, 1}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N));
    std::map<std::string, std::vector<double>> t;
    t["A"] = Random(static_cast<size_t>(M) * N, M * 31 + N);
    t["B"].assign(static_cast<size_t>(M) * N, 0.0);
    const std::vector<double> a = t["A"];
    const tl::Status st = tl::gpu::test::Interpret(*k, &t, {{"M", M}, {"N", N}});
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        const double left = j >= 1 ? a[i * N + j - 1] : 0.0;  // column -1 reads 0
        ASSERT_NEAR(t["B"][i * N + j], left * 2 + 1, 1e-6) << i << "," << j;
      }
    }
  }
}

TEST(GpuEdges, StaticShapesAtomicsAndGathers) {
  const tl::ir::Function f = Parse(R"(tileir 1
func @edges(X: tensor[77, 45] f32, Idx: tensor[45] i32, Y: tensor[77, 45] f32, H: tensor[10] f32, G: tensor[45] f32) {
  kernel grid(ceildiv(45, 16), ceildiv(77, 32)) threads(64) -> (bx, by) {
    parallel (i, j) in (32, 16) {
      Y[by * 32 + i, bx * 16 + j] = X[by * 32 + i, bx * 16 + j] + X[by * 32 + i + 1, bx * 16 + j]
    }
    parallel (j2) in (16) {
      atomic_add H[Idx[bx * 16 + j2]], 1.0:f32
      if by == 0 {
        G[bx * 16 + j2] = X[by, Idx[bx * 16 + j2]]
      }
    }
  }
}
)");
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(f, Options());
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  std::map<std::string, std::vector<double>> t;
  t["X"] = Random(77 * 45, 5);
  std::vector<double> idx(45);
  for (int j = 0; j < 45; ++j) idx[j] = (j % 4 == 0) ? -1 - j : (j % 4 == 1 ? 10 + j : j % 10);
  t["Idx"] = idx;
  t["Y"].assign(77 * 45, 0.0);
  t["H"].assign(10, 0.0);
  t["G"].assign(45, 0.0);
  const std::vector<double> x = t["X"];
  const tl::Status st = tl::gpu::test::Interpret(*k, &t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int i = 0; i < 77; ++i) {
    for (int j = 0; j < 45; ++j) {
      const double below = i + 1 < 77 ? x[(i + 1) * 45 + j] : 0.0;
      ASSERT_NEAR(t["Y"][i * 45 + j], x[i * 45 + j] + below, 1e-6) << i << "," << j;
    }
  }
  // Every block (3 x 3) adds its 16 columns; lanes past column 45 read Idx as 0.
  std::vector<double> h(10, 0.0);
  for (int by = 0; by < 3; ++by) {
    for (int c = 0; c < 48; ++c) {
      const int at = c < 45 ? static_cast<int>(idx[c]) : 0;
      if (at >= 0 && at < 10) h[at] += 1;
    }
  }
  for (int b = 0; b < 10; ++b) EXPECT_EQ(t["H"][b], h[b]) << "bin " << b;
  for (int j = 0; j < 45; ++j) {
    const int at = static_cast<int>(idx[j]);
    EXPECT_EQ(t["G"][j], at >= 0 && at < 45 ? x[at] : 0.0) << "gather " << j << " (index " << at << ")";
  }
}

}  // namespace
