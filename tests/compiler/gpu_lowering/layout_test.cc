// Layouts by enumeration and barrier placement on textual Tile IR.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tilelang/lowering/gpu/layout.h"
#include "tilelang/lowering/gpu/lower.h"

namespace {

using tl::gpu::FragmentLayout;

// Every element is owned by exactly the threads Owners() names, each at the
// slot Slot() names, and no (thread, slot) holds two elements.
void CheckExact(const FragmentLayout& l) {
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> holders;  // element -> threads
  for (int64_t t = 0; t < l.threads; ++t) {
    for (int64_t s = 0; s < l.slots(); ++s) {
      auto e = l.Element(t, s);
      if (!e) continue;
      EXPECT_EQ(l.Slot(e->first, e->second), s) << l.ToString();
      holders[*e].insert(t);
    }
  }
  ASSERT_EQ(static_cast<int64_t>(holders.size()), l.rows * l.cols) << l.ToString();
  for (const auto& [e, ts] : holders) {
    std::vector<int64_t> owners = l.Owners(e.first, e.second);
    EXPECT_EQ(std::set<int64_t>(owners.begin(), owners.end()), ts) << l.ToString();
    EXPECT_EQ(static_cast<int64_t>(ts.size()), l.replicated ? l.g : 1);
  }
}

TEST(Layout, DefaultAwkwardShapes) {
  for (auto [rows, cols, threads] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {100, 7, 128}, {64, 64, 128}, {1, 1000, 128}, {3, 5, 96}, {8, 100, 128}, {1, 1, 32}, {33, 33, 48}}) {
    FragmentLayout l = tl::gpu::DefaultLayout({rows, cols}, threads);
    EXPECT_EQ(l.R * l.g, threads);
    CheckExact(l);
  }
  FragmentLayout l = tl::gpu::DefaultLayout({100, 7}, 128);
  EXPECT_EQ(l.v, 4);
  EXPECT_GE(l.slots() * l.threads, 700);
  CheckExact(tl::gpu::DefaultLayout({1000}, 128));
  CheckExact(tl::gpu::DefaultLayout({2, 3, 5}, 64));
}

TEST(Layout, GemmAccumulatorAndProjection) {
  for (auto [m, n, t] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{64, 64, 128}, {32, 32, 64}, {100, 7, 128}, {128, 128, 256}}) {
    FragmentLayout c = tl::gpu::GemmAccumulatorLayout(m, n, t);
    EXPECT_EQ(c.v, 1);
    CheckExact(c);
    FragmentLayout p = tl::gpu::ProjectRows(c, {m});
    CheckExact(p);
    // The projection holds row r exactly where the full layout holds any (r, j).
    for (int64_t r = 0; r < m; ++r) {
      std::set<int64_t> full;
      for (int64_t j = 0; j < n; ++j) full.insert(c.Thread(r, j));
      std::vector<int64_t> o = p.Owners(r, 0);
      for (int64_t th : full) EXPECT_TRUE(std::count(o.begin(), o.end(), th)) << r;
    }
  }
  EXPECT_EQ(tl::gpu::GemmAccumulatorLayout(64, 64, 128).slots(), 32);
}

std::string Body(const std::string& text) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  tl::ir::Function f = m->functions.at(0);
  std::set<std::string> shared;
  for (const auto& [name, info] : tl::ir::CollectSymbols(f)) {
    if (info.kind == tl::ir::SymbolInfo::Kind::kAlloc && info.scope == tl::ir::MemScope::kShared) shared.insert(name);
  }
  tl::gpu::InsertBarriers(f, shared);
  return tl::ir::Print(f);
}

TEST(Barriers, AfterCopyIntoSharedAndBeforeReuse) {
  const std::string out = Body(R"(tileir 1

func @g(A: tensor[64, 64] f32, B: tensor[64, 64] f32, C: tensor[64, 64] f32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc A_s: shared[64, 16] f32
    alloc B_s: shared[16, 64] f32
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in serial(0, 4) {
      copy A[0:64, k * 16:16] -> A_s
      copy B[k * 16:16, 0:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C
  }
}
)");
  // One barrier after the copies (before the gemm reads), one at the top of the
  // body (before the next iteration's copies overwrite what the gemm read).
  const std::string expect =
      "    for k in serial(0, 4) {\n"
      "      sync\n"
      "      copy A[0:64, k * 16:16] -> A_s\n"
      "      copy B[k * 16:16, 0:64] -> B_s\n"
      "      sync\n"
      "      gemm A_s, B_s -> C_f\n"
      "    }\n";
  EXPECT_NE(out.find(expect), std::string::npos) << out;
}

TEST(Barriers, NoneWithoutSharedAndExistingSyncKept) {
  const std::string out = Body(R"(tileir 1

func @g(A: tensor[64] f32, C: tensor[64] f32) {
  kernel grid(1) threads(64) -> (bx) {
    alloc s: shared[64] f32
    alloc f: fragment[64] f32
    copy A -> f
    copy f -> s
    sync
    copy s -> C
    parallel (i) in (64) {
      f[i] = f[i] + 1.0:f32
    }
    copy f -> C
  }
}
)");
  size_t n = 0;
  for (size_t at = out.find("sync"); at != std::string::npos; at = out.find("sync", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << out;
}

TEST(Barriers, WriteAfterReadInStraightLine) {
  const std::string out = Body(R"(tileir 1

func @g(A: tensor[64] f32, C: tensor[64] f32) {
  kernel grid(1) threads(64) -> (bx) {
    alloc s: shared[64] f32
    copy A -> s
    copy s -> C
    fill s, 0.0:f32
    copy s -> C
  }
}
)");
  EXPECT_NE(out.find("copy A -> s\n    sync\n    copy s -> C\n    sync\n    fill s, 0.0:f32\n    sync\n    copy s -> C"),
            std::string::npos)
      << out;
}

}  // namespace

namespace {

tl::ir::Function ParseOne(const std::string& text) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m->functions.at(0);
}

std::string Notes(const tl::gpu::SimtKernel& k) {
  std::string s;
  for (const std::string& n : k.notes) s += n + "\n";
  return s;
}

TEST(Inference, RowVectorGetsProjectedLayoutAndAwkwardShapeLowers) {
  // 100 x 7 over 128 threads: default layout, guarded; the row max is the
  // projection (replicated over the row's lanes).
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(ParseOne(R"(tileir 1

func @f(X: tensor[100, 7] f32, Y: tensor[100, 7] f32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc x: fragment[100, 7] f32
    alloc m: fragment[100] f32
    copy X -> x
    reduce max x -> m dim=1 clear
    parallel (i, j) in (100, 7) {
      x[i, j] = x[i, j] - m[i]
    }
    copy x -> Y
  }
}
)"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = Notes(*k);
  EXPECT_NE(notes.find("fragment m: 100x1 over 64x2 (v=1, 2 slots) replicated"), std::string::npos) << notes;
  EXPECT_NE(notes.find("fragment x: 100x7 over 64x2 (v=4, 8 slots)"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("shared memory"), std::string::npos) << notes;
  EXPECT_EQ(k->shared_bytes, 0);
}

TEST(Inference, TransposedReadDemotesToSharedWithBarriers) {
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(ParseOne(R"(tileir 1

func @f(X: tensor[32, 32] f32, Y: tensor[32, 32] f32) {
  kernel grid(1) threads(64) -> (bx) {
    alloc x: fragment[32, 32] f32
    alloc y: fragment[32, 32] f32
    copy X -> x
    parallel (i, j) in (32, 32) {
      y[i, j] = x[j, i]
    }
    copy y -> Y
  }
}
)"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string notes = Notes(*k);
  EXPECT_NE(notes.find("fragment x kept in shared memory"), std::string::npos) << notes;
  EXPECT_NE(notes.find("barriers inserted: 1"), std::string::npos) << notes;
  EXPECT_EQ(k->shared_bytes, 32 * 32 * 4);
}

TEST(Inference, ClearErrorsForDynamicShapesAndSharedBudget) {
  tl::StatusOr<tl::gpu::SimtKernel> dyn = tl::gpu::LowerToSimt(ParseOne(R"(tileir 1

func @f(X: tensor[M] f32) dynamic(M: i32) loc("k.py", 3) {
  kernel grid(ceildiv(M, 128)) threads(128) -> (bx) {
    alloc x: fragment[128] f32
    copy X[bx * 128:128] -> x
  }
}
)"));
  ASSERT_FALSE(dyn.ok());
  EXPECT_NE(dyn.status().message().find("dynamic shape symbols"), std::string::npos) << dyn.status().ToString();
  EXPECT_NE(dyn.status().message().find("k.py:3"), std::string::npos) << dyn.status().ToString();
  // With symbol_params (CUDA), the symbol becomes a trailing i32 param.
  tl::StatusOr<tl::gpu::SimtKernel> dyn2 = tl::gpu::LowerToSimt(ParseOne(R"(tileir 1

func @f(X: tensor[M] f32, s: f32) dynamic(M: i32) {
  kernel grid(ceildiv(M, 128)) threads(128) -> (bx) {
    alloc x: fragment[128] f32
    copy X[bx * 128:128] -> x
  }
}
)"), {48 * 1024, true});
  ASSERT_TRUE(dyn2.ok()) << dyn2.status().ToString();
  ASSERT_EQ(dyn2->params.size(), 3u);
  EXPECT_EQ(dyn2->params[0].symbol, -1);
  EXPECT_EQ(dyn2->params[1].symbol, -1);
  EXPECT_EQ(dyn2->params[2].name, "M");
  EXPECT_EQ(dyn2->params[2].symbol, 0);
  EXPECT_FALSE(dyn2->params[2].pointer);

  tl::StatusOr<tl::gpu::SimtKernel> big = tl::gpu::LowerToSimt(ParseOne(R"(tileir 1

func @f(X: tensor[256, 256] f32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc s: shared[256, 256] f32
    copy X -> s
  }
}
)"), {99 * 1024});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), tl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("262144 bytes of shared memory"), std::string::npos) << big.status().ToString();
}

}  // namespace
