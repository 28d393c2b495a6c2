// Layouts by enumeration and barrier placement on textual Tile IR.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "lowering_test_util.h"
#include "tilelang/lowering/gpu/layout.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/swizzle.h"
#include "tilelang/passes/passes.h"

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

// The 2-D warp grid of tensor-core accumulators, against the PTX ISA's
// mma.m16n8k16 fragments ("Matrix fragments for mma.m16n8k16", f16/bf16):
// lane l, gid = l / 4, tig = l % 4:
//   A a_i (i < 8): tile row gid + 8 ((i / 2) % 2), k  2 tig + i % 2 + 8 (i / 4)
//   B b_i (i < 4): k 2 tig + i % 2 + 8 (i / 2),    tile col gid
//   C c_i (i < 4): tile row gid + 8 (i / 2),       tile col 2 tig + i % 2
// SMma (simt_ir.h) places warp (wr, wc)'s m-tile j at rows (2j + r / 8) R +
// 8 wr + r % 8 (tile row r) and n-tile n at columns (n C + wc) 8 + c, and the
// printer keeps c_i in slot (2j + i / 2) * col_slots + 2n + i % 2. Checked:
// every C element is computed by exactly one (lane, register), which is the
// (thread, slot) MmaAccumulatorLayout names; each warp reads exactly M / wm
// rows of A and N / wn columns of B, the grid's share.
TEST(Layout, MmaWarpGridMatchesPtxFragments) {
  for (auto [m, n, t, want_wm, want_wn] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{
           {128, 128, 128, 2, 2}, {128, 128, 256, 4, 2}, {64, 64, 128, 2, 2}, {48, 64, 128, 1, 4},
           {128, 256, 256, 2, 4}, {64, 32, 64, 2, 1}, {16, 128, 256, 1, 8}}) {
    int64_t wm = 0, wn = 0;
    ASSERT_TRUE(tl::gpu::MmaWarpGrid(m, n, t, 1 << 30, &wm, &wn)) << m << "x" << n;
    EXPECT_EQ(std::make_pair(wm, wn), std::make_pair(want_wm, want_wn)) << m << "x" << n << " over " << t;
    const FragmentLayout l = tl::gpu::MmaAccumulatorLayout(m, n, t);
    CheckExact(l);
    EXPECT_EQ(l.C, wn);
    EXPECT_EQ(l.R, 8 * wm);
    const int64_t m_tiles = m / (2 * l.R), n_tiles = n / (8 * l.C);
    std::map<std::pair<int64_t, int64_t>, int> computed;
    for (int64_t w = 0; w < t / 32; ++w) {
      const int64_t wr = w % wm, wc = w / wm;
      std::set<int64_t> a_rows, b_cols;
      for (int64_t lane = 0; lane < 32; ++lane) {
        const int64_t gid = lane / 4, tig = lane % 4;
        for (int64_t j = 0; j < m_tiles; ++j) {
          auto row = [&](int64_t r) { return (2 * j + r / 8) * l.R + 8 * wr + r % 8; };
          for (int64_t i = 0; i < 8; ++i) a_rows.insert(row(gid + 8 * ((i / 2) % 2)));
          for (int64_t nt = 0; nt < n_tiles; ++nt) {
            auto col = [&](int64_t c) { return (nt * l.C + wc) * 8 + c; };
            for (int64_t i = 0; i < 4; ++i) b_cols.insert(col(gid));
            for (int64_t i = 0; i < 4; ++i) {
              const int64_t r = row(gid + 8 * (i / 2)), c = col(2 * tig + i % 2);
              ++computed[{r, c}];
              EXPECT_EQ(l.Thread(r, c), w * 32 + lane) << r << "," << c;
              EXPECT_EQ(l.Slot(r, c), (2 * j + i / 2) * l.col_slots() + 2 * nt + i % 2) << r << "," << c;
            }
          }
        }
      }
      EXPECT_EQ(static_cast<int64_t>(a_rows.size()), m / wm) << "warp " << w;
      EXPECT_EQ(static_cast<int64_t>(b_cols.size()), n / wn) << "warp " << w;
      for (int64_t r : a_rows) EXPECT_EQ((r % l.R) / 8, wr);
      for (int64_t c : b_cols) EXPECT_EQ((c / 8) % l.C, wc);
    }
    ASSERT_EQ(static_cast<int64_t>(computed.size()), m * n);
    for (const auto& [e, times] : computed) EXPECT_EQ(times, 1);
  }
  // Stacked along M on request; nothing fits a 40-row tile (m-tiles are 16 rows).
  EXPECT_EQ(tl::gpu::MmaAccumulatorLayout(128, 128, 256, 1).C, 1);
  EXPECT_EQ(tl::gpu::MmaAccumulatorLayout(128, 128, 256, 1).R, 64);
  EXPECT_FALSE(tl::gpu::MmaAccumulatorFits(40, 64, 128));
  EXPECT_FALSE(tl::gpu::MmaAccumulatorFits(64, 64, 256, 1));  // 8 warps x 16 rows > 64
  EXPECT_TRUE(tl::gpu::MmaAccumulatorFits(64, 64, 256));      // 4 x 2 warps
}

// Attention-style use of mma accumulators: the scores are reduced per row and
// the output is scaled by a row vector, so both keep warps stacked along M
// (rows in one quad of lanes, shuffle reductions); a plain GEMM's accumulator
// gets the 2-D grid.
TEST(Inference, WarpGridPerGemm) {
  const std::string text = R"(tileir 1

func @attn(Q: tensor[128, 64] f16, K: tensor[64, 64] f16, V: tensor[64, 64] f16, O: tensor[128, 64] f32, P: tensor[128, 64] f32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc Q_s: shared[64, 64] f16
    alloc K_s: shared[64, 64] f16
    alloc V_s: shared[64, 64] f16
    alloc S: fragment[64, 64] f32
    alloc S16: fragment[64, 64] f16
    alloc Acc: fragment[64, 64] f32
    alloc Plain: fragment[64, 64] f32
    alloc m: fragment[64] f32
    copy Q[bx * 64:64, 0:64] -> Q_s
    copy K[0:64, 0:64] -> K_s
    copy V[0:64, 0:64] -> V_s
    gemm Q_s, K_s -> S trans_b clear_accum
    reduce max S -> m dim=1 clear
    parallel (i, j) in (64, 64) {
      S[i, j] = exp(S[i, j] - m[i])
    }
    copy S -> S16
    gemm S16, V_s -> Acc clear_accum
    parallel (i2, j2) in (64, 64) {
      Acc[i2, j2] = Acc[i2, j2] / m[i2]
    }
    copy Acc -> O[bx * 64:64, 0:64]
    gemm Q_s, V_s -> Plain clear_accum
    copy Plain -> P[bx * 64:64, 0:64]
  }
}
)";
  tl::StatusOr<tl::ir::Module> mod = tl::ir::ParseModule(text);
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  tl::ir::Function f = mod->functions.at(0);
  ASSERT_TRUE(tl::passes::MakeRegionsExplicit(f).ok());
  tl::StatusOr<tl::gpu::GpuLayoutPlan> plan = tl::gpu::InferGpuLayouts(f, 128, tl::gpu::GemmStrategy::kMmaSync);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::string notes;
  for (const std::string& x : plan->notes) notes += x + "\n";
  EXPECT_EQ(plan->layouts.at("S").C, 1) << notes;
  EXPECT_EQ(plan->layouts.at("S").R, 32) << notes;
  EXPECT_EQ(plan->layouts.at("Acc").C, 1) << notes;
  EXPECT_EQ(plan->layouts.at("Plain").C, 2) << notes;
  EXPECT_EQ(plan->mma.size(), 3u) << notes;
  EXPECT_EQ(plan->demoted.count("m"), 0u) << notes;
  EXPECT_NE(notes.find("fragment S: warps stacked along M"), std::string::npos) << notes;
  // The whole kernel lowers (mma for all three gemms, shuffles for the row max).
  tl::gpu::GpuLowerOptions o;
  o.gemm = tl::gpu::GemmStrategy::kMmaSync;
  o.shared_budget_bytes = 99 * 1024;
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(mod->functions.at(0), o);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  const std::string dump = tl::gpu::Dump(*k);
  EXPECT_NE(dump.find("mma.f16 Plain"), std::string::npos) << dump;
  EXPECT_NE(dump.find("C=2"), std::string::npos) << dump;
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

using tl::gpu::test::Notes;
using tl::gpu::test::Parse;

TEST(Inference, RowVectorGetsProjectedLayoutAndAwkwardShapeLowers) {
  // 100 x 7 over 128 threads: default layout, guarded; the row max is the
  // projection (replicated over the row's lanes).
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(R"(tileir 1

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
  tl::StatusOr<tl::gpu::SimtKernel> k = tl::gpu::LowerToSimt(Parse(R"(tileir 1

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
  tl::StatusOr<tl::gpu::SimtKernel> dyn = tl::gpu::LowerToSimt(Parse(R"(tileir 1

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
  tl::StatusOr<tl::gpu::SimtKernel> dyn2 = tl::gpu::LowerToSimt(Parse(R"(tileir 1

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

  tl::StatusOr<tl::gpu::SimtKernel> big = tl::gpu::LowerToSimt(Parse(R"(tileir 1

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

// The Hopper swizzle contract (swizzle.h): within an atom the swizzle is a
// permutation of whole 16-byte chunks, an involution, the identity on a row
// whose (address / 128) % 2^b is 0, and the 128B pattern moves chunk c of
// 128-byte row r to chunk c ^ (r % 8), the pattern TMA's SWIZZLE_128B writes.
TEST(Layout, HopperSwizzleIsAChunkPermutation) {
  using tl::gpu::SmemSwizzle;
  for (SmemSwizzle s : {SmemSwizzle::kNone, SmemSwizzle::k32B, SmemSwizzle::k64B, SmemSwizzle::k128B}) {
    const int64_t atom = tl::gpu::SwizzleAtomBytes(s);
    std::set<int64_t> images;
    for (int64_t o = 0; o < 2 * atom; ++o) {
      const int64_t p = tl::gpu::SwizzleOffset(s, o);
      EXPECT_EQ(p % 16, o % 16) << tl::gpu::SwizzleName(s) << " keeps bytes inside their chunk";
      EXPECT_EQ(p / atom, o / atom) << tl::gpu::SwizzleName(s) << " stays inside its atom";
      EXPECT_EQ(tl::gpu::SwizzleOffset(s, p), o) << tl::gpu::SwizzleName(s) << " is an involution";
      images.insert(p);
    }
    EXPECT_EQ(static_cast<int64_t>(images.size()), 2 * atom) << tl::gpu::SwizzleName(s);
  }
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 8; ++c)
      EXPECT_EQ(tl::gpu::SwizzleOffset(SmemSwizzle::k128B, r * 128 + c * 16 + 3), r * 128 + ((c ^ (r % 8)) * 16) + 3);
  // 64B: rows of 64 bytes, two per 128-byte line; chunk bits [4,6) ^= line % 4.
  EXPECT_EQ(tl::gpu::SwizzleOffset(SmemSwizzle::k64B, 5 * 64 + 16), 5 * 64 + ((1 ^ 2) * 16));
}

// The panel geometry of swizzled operand buffers (SimtBuffer::swizzle):
// every element of two [24, cols] tiles gets its own bytes inside the tiles,
// 16-byte chunks hold 16 / e consecutive columns of one row, and the first
// panel of a tile is its first W / e columns, row by row, permuted by the
// swizzle only (what one TMA box of W bytes' inner extent writes).
TEST(Layout, SwizzledElementBytePanels) {
  using tl::gpu::SmemSwizzle;
  for (SmemSwizzle s : {SmemSwizzle::kNone, SmemSwizzle::k32B, SmemSwizzle::k64B, SmemSwizzle::k128B}) {
    for (int64_t e : {1, 2, 4}) {
      const int64_t rows = 24, cols = 256 / e, w = tl::gpu::SwizzleRowBytes(s);
      std::set<int64_t> seen;
      for (int64_t m = 0; m < 2; ++m) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t b = tl::gpu::SwizzledElementByte(s, rows, cols, e, m, r, c);
            ASSERT_TRUE(seen.insert(b).second) << tl::gpu::SwizzleName(s) << " e=" << e << " (" << m << "," << r << "," << c << ")";
            EXPECT_EQ(b / (rows * cols * e), m);
            EXPECT_EQ(b % e, 0);
            const int64_t c0 = c - c % (16 / e);
            EXPECT_EQ(b - tl::gpu::SwizzledElementByte(s, rows, cols, e, m, r, c0), (c - c0) * e);
            if (s != SmemSwizzle::kNone && c < w / e) {
              EXPECT_EQ(b, m * rows * cols * e + tl::gpu::SwizzleOffset(s, r * w + c * e));
            }
          }
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), 2 * rows * cols);
    }
  }
  // 128B, fp16, 128 columns: column 64 starts the second panel, after 24 rows of 128 bytes.
  EXPECT_EQ(tl::gpu::SwizzledElementByte(SmemSwizzle::k128B, 24, 128, 2, 0, 0, 64), 24 * 128);
  EXPECT_EQ(tl::gpu::SwizzledElementByte(SmemSwizzle::k128B, 24, 128, 2, 0, 3, 64 + 8), 24 * 128 + 3 * 128 + (1 ^ 3) * 16);
}

// wgmma's accumulator against the PTX ISA's D fragment of
// wgmma.m64nNk16 ("Register fragments: matrix D", f32/f16 accumulators):
// thread t of the warpgroup, warp wi = t / 32, lane l = t % 32, register
// d_i (i < N / 2) holds
//   row 16 wi + 8 ((i / 2) % 2) + l / 4,   column 8 (i / 4) + 2 (l % 4) + i % 2
// of the instruction's 64 x N tile. The lowering (SWgmma, simt_ir.h) gives
// warpgroup wg's m-tile j the rows 64 (j WG + wg) .. + 63 (WG = T / 128) and
// keeps d_i in slot (2 j + (i / 2) % 2) col_slots + 2 (i / 4) + i % 2. Checked:
// every C element is computed by exactly one (thread, register), which is the
// (thread, slot) WgmmaAccumulatorLayout names; with the old map (H = 1) row 8
// would have gone to warp 1. Row vectors (the projection) and the layout
// loops keep working: CheckExact on both, awkward extents included.
TEST(Layout, WgmmaAccumulatorMatchesPtxFragment) {
  for (auto [m, n, t] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 8, 128}, {64, 256, 128}, {128, 128, 128}, {128, 128, 256}, {256, 64, 256}, {192, 24, 128}, {128, 96, 512 / 4}}) {
    ASSERT_TRUE(tl::gpu::WgmmaAccumulatorFits(m, n, t)) << m << "x" << n << " over " << t;
    const FragmentLayout l = tl::gpu::WgmmaAccumulatorLayout(m, n, t);
    CheckExact(l);
    CheckExact(tl::gpu::ProjectRows(l, {m}));
    const int64_t wg_count = t / 128, m_tiles = m / (64 * wg_count);
    std::map<std::pair<int64_t, int64_t>, int> computed;
    for (int64_t wg = 0; wg < wg_count; ++wg) {
      for (int64_t j = 0; j < m_tiles; ++j) {
        for (int64_t tw = 0; tw < 128; ++tw) {
          const int64_t wi = tw / 32, lane = tw % 32;
          for (int64_t i = 0; i < n / 2; ++i) {
            const int64_t r = 64 * (j * wg_count + wg) + 16 * wi + 8 * ((i / 2) % 2) + lane / 4;
            const int64_t c = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            ++computed[{r, c}];
            EXPECT_EQ(l.Thread(r, c), wg * 128 + tw) << r << "," << c;
            EXPECT_EQ(l.Slot(r, c), (2 * j + (i / 2) % 2) * l.col_slots() + 2 * (i / 4) + i % 2) << r << "," << c;
            // The row vector of row r sits with the row's quad.
            const std::vector<int64_t> o = tl::gpu::ProjectRows(l, {m}).Owners(r, 0);
            EXPECT_TRUE(std::count(o.begin(), o.end(), wg * 128 + tw)) << r;
          }
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(computed.size()), m * n);
    for (const auto& [e, times] : computed) EXPECT_EQ(times, 1);
  }
  // The trap this family extension avoids: row 8 belongs to warp 0, lanes 0-3.
  EXPECT_EQ(tl::gpu::WgmmaAccumulatorLayout(64, 64, 128).Thread(8, 0), 0);
  EXPECT_EQ(tl::gpu::WgmmaAccumulatorLayout(64, 64, 128).Thread(16, 0), 32);
  EXPECT_FALSE(tl::gpu::WgmmaAccumulatorFits(64, 64, 256));  // two warpgroups need 128 rows
  EXPECT_FALSE(tl::gpu::WgmmaAccumulatorFits(64, 64, 96));
  EXPECT_FALSE(tl::gpu::WgmmaAccumulatorFits(64, 60, 128));
  // Awkward (guarded) row counts are still exact in the family with H = 2.
  FragmentLayout odd = tl::gpu::WgmmaAccumulatorLayout(64, 64, 128);
  odd.rows = 40;
  odd.shape = {40, 64};
  CheckExact(odd);
}
