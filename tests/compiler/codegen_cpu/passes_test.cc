// The passes (compiler/passes) on Tile IR text: each pass's output invariant.
#include <gtest/gtest.h>

#include <string>

#include "tilelang/ir/tile_ir.h"
#include "tilelang/passes/passes.h"

namespace tl::passes {
namespace {

ir::Function Parse(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "t.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  EXPECT_TRUE(ir::Verify(*m).ok()) << ir::Verify(*m).ToString();
  return m->functions.at(0);
}

const char* kGemm = R"(tileir 1
func @g(A: tensor[M, 256] f16, B: tensor[256, 512] f16, C: tensor[M, 512] f32, D: tensor[4] f32, E: tensor[4] i32, s: f32)
    dynamic(M: i32) loc("g.py", 7) {
  kernel grid(ceildiv(512, 64), ceildiv(M, 64)) threads(128, 2) -> (bx, by) loc("g.py", 9) {
    alloc A_s: shared[64, 32] f16
    alloc B_s: shared[32, 64] f16
    alloc C_f: fragment[64, 64] f32
    fill C_f, 0.0:f32
    for k in pipelined(0, 8, stages=3) loc("g.py", 12) {
      copy A[by * 64:64, k * 32:32] -> A_s loc("g.py", 13)
      copy B[k * 32:32, bx * 64:64] -> B_s
      gemm A_s, B_s -> C_f
    }
    copy C_f -> C[by * 64:64, bx * 64:64]
    atomic_add E[1], 1
    D[0] = s
  }
}
)";

std::vector<const ir::Stmt*> Collect(const ir::Function& f, ir::StmtKind kind) {
  std::vector<const ir::Stmt*> out;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    if (ir::Kind(s) == kind) out.push_back(&s);
  });
  return out;
}

TEST(Passes, MakeRegionsExplicitNamesEveryDim) {
  ir::Function f = Parse(kGemm);
  ASSERT_TRUE(MakeRegionsExplicit(f).ok());
  const auto copies = Collect(f, ir::StmtKind::kCopy);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(ir::Print(ir::As<ir::Copy>(*copies[0])->dst), "A_s[0:64, 0:32]");
  EXPECT_EQ(ir::Print(ir::As<ir::Copy>(*copies[2])->src), "C_f[0:64, 0:64]");
  const auto* g = ir::As<ir::Gemm>(*Collect(f, ir::StmtKind::kGemm).at(0));
  EXPECT_EQ(ir::Print(g->c), "C_f[0:64, 0:64]");
  // The result still verifies: the pass only makes implicit facts explicit.
  ir::Module m;
  m.functions.push_back(f);
  EXPECT_TRUE(ir::Verify(m).ok()) << ir::Verify(m).ToString();
}

TEST(Passes, ResolveRegionGuardsOnlyUnprovableTensorDims) {
  ir::Function f = Parse(kGemm);
  ASSERT_TRUE(MakeRegionsExplicit(f).ok());
  const ir::SymbolTable syms = ir::CollectSymbols(f);
  const auto copies = Collect(f, ir::StmtKind::kCopy);
  StatusOr<RegionInfo> a = ResolveRegion(ir::As<ir::Copy>(*copies[0])->src, syms);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->extents, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(a->guard, (std::vector<bool>{true, true}));  // by * 64 vs M; k * 32 not constant
  StatusOr<RegionInfo> s = ResolveRegion(ir::As<ir::Copy>(*copies[0])->dst, syms);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->any_guard());  // shared memory: the user's duty
  StatusOr<RegionInfo> e = ResolveRegion(ir::As<ir::AtomicAdd>(*Collect(f, ir::StmtKind::kAtomicAdd).at(0))->dst, syms);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->any_guard());  // E[1] in tensor[4]: provably inside
  EXPECT_TRUE(e->kept_dims().empty());
}

TEST(Passes, WholeDynamicRegionIsRejectedWithLine) {
  ir::Function f = Parse(R"(tileir 1
func @w(A: tensor[M] f32) dynamic(M: i32) {
  kernel grid(1) threads(1) -> (bx) {
    alloc a: fragment[4] f32
    fill A, 0.0:f32 loc("w.py", 5)
  }
}
)");
  const Status s = MakeRegionsExplicit(f);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("w.py:5"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dynamic"), std::string::npos) << s.message();
}

TEST(Passes, PipelinesBecomeSerialLoops) {
  ir::Function f = Parse(kGemm);
  const std::vector<PipelineDecision> d = LowerPipelinesSerial(f);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].loop_var, "k");
  EXPECT_EQ(d[0].requested_stages, 3);
  EXPECT_EQ(d[0].applied_stages, 1);
  EXPECT_EQ(ir::ToString(d[0].loc), "g.py:12");
  for (const ir::Stmt* s : Collect(f, ir::StmtKind::kFor)) {
    EXPECT_EQ(ir::As<ir::For>(*s)->kind, ir::LoopKind::kSerial);
  }
  // Body order is unchanged: copy, copy, gemm.
  const auto* loop = ir::As<ir::For>(*Collect(f, ir::StmtKind::kFor).at(0));
  ASSERT_EQ(loop->body.size(), 3u);
  EXPECT_EQ(ir::Kind(loop->body[2]), ir::StmtKind::kGemm);
}

TEST(Passes, LayoutsAreBlockOwnedRowMajor) {
  const ir::Function f = Parse(kGemm);
  StatusOr<LayoutPlan> plan = InferLayoutsCpu(f);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->buffers.size(), 3u);
  const BufferLayout& a = plan->buffers.at("A_s");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(a.strides, (std::vector<int64_t>{32, 1}));
  EXPECT_EQ(a.elements, 64 * 32);
  EXPECT_EQ(a.owner, LayoutOwner::kBlock);
  ASSERT_EQ(plan->buffers.at("C_f").forced_by.size(), 1u);
  EXPECT_EQ(plan->buffers.at("C_f").forced_by[0], "gemm accumulator");
}

TEST(Passes, GemmOnlyTilesGetPanelOrder) {
  ir::Function f = Parse(kGemm);
  ASSERT_TRUE(MakeRegionsExplicit(f).ok());
  StatusOr<LayoutPlan> plan = InferLayoutsCpu(f);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->buffers.at("A_s").order, ElementOrder::kGemmPanelsA);
  EXPECT_EQ(plan->buffers.at("B_s").order, ElementOrder::kGemmPanelsB);
  EXPECT_FALSE(plan->buffers.at("A_s").trans);
  EXPECT_EQ(plan->buffers.at("C_f").order, ElementOrder::kRowMajor);  // accumulator: stays row-major
  EXPECT_NE(plan->buffers.at("A_s").order_reason.find("operand A"), std::string::npos);

  // A tile that is also read elementwise, or filled from a tensor of another
  // dtype, keeps the row-major order every op understands.
  ir::Function g = Parse(R"(tileir 1
func @h(A: tensor[64, 64] f32, B: tensor[64, 64] f16, C: tensor[64, 64] f32) {
  kernel grid(1) threads(128) -> (bx) {
    alloc a: shared[64, 64] f32
    alloc b: shared[64, 64] f32
    alloc c: fragment[64, 64] f32
    copy A -> a
    copy B -> b
    gemm a, b -> c trans_b clear_accum
    parallel (i, j) in (64, 64) {
      c[i, j] = c[i, j] + a[i, j]
    }
    copy c -> C
  }
}
)");
  ASSERT_TRUE(MakeRegionsExplicit(g).ok());
  StatusOr<LayoutPlan> plan2 = InferLayoutsCpu(g);
  ASSERT_TRUE(plan2.ok());
  EXPECT_EQ(plan2->buffers.at("a").order, ElementOrder::kRowMajor);  // also loaded in a parallel loop
  EXPECT_EQ(plan2->buffers.at("b").order, ElementOrder::kRowMajor);  // f16 source: the copy converts
}

TEST(Passes, ParamAccess) {
  const ir::Function f = Parse(kGemm);
  const std::vector<Access> a = InferParamAccess(f);
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a[0], Access::kRead);       // A: copy source
  EXPECT_EQ(a[1], Access::kRead);       // B
  EXPECT_EQ(a[2], Access::kWrite);      // C: copy destination
  EXPECT_EQ(a[3], Access::kWrite);      // D: store
  EXPECT_EQ(a[4], Access::kReadWrite);  // E: atomic_add
  EXPECT_EQ(a[5], Access::kRead);       // s: scalar
}

TEST(Passes, ParamAccessThroughExternPointers) {
  // a tensor element passed to T.call_extern may be read and written by the imported function
  const ir::Function f = Parse(R"(tileir 1
func @x(A: tensor[64] f16, C: tensor[64] f16) {
  import_source "__device__ void f(unsigned short* a, unsigned short* c) {}\n"
  kernel grid(1) threads(32) -> (bx) {
    call_extern i32 f(&A[0], &C[bx])
  }
}
)");
  const std::vector<Access> a = InferParamAccess(f);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], Access::kReadWrite);
  EXPECT_EQ(a[1], Access::kReadWrite);
}

TEST(Passes, GridExpressionsCompileToRpn) {
  const ir::Function f = Parse(kGemm);
  const ir::Kernel& k = TheKernel(f);
  StatusOr<std::vector<int64_t>> g0 = CompileGridExpr(k.grid[0], f);
  ASSERT_TRUE(g0.ok());
  EXPECT_EQ(*g0, (std::vector<int64_t>{0, 8}));  // folded
  StatusOr<std::vector<int64_t>> g1 = CompileGridExpr(k.grid[1], f);
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(*g1, (std::vector<int64_t>{1, 0, 0, 64, 6}));  // SYM M, CONST 64, CEILDIV
  const ir::Expr bad = ir::MakeCast(ir::DType::kI32, ir::MakeVar("s", ir::DType::kF32));
  EXPECT_FALSE(CompileGridExpr(bad, f).ok());
}

TEST(Passes, SecondKernelStatementIsRejected) {
  const ir::Function f = Parse(R"(tileir 1
func @two(A: tensor[4] f32) {
  kernel grid(1) threads(1) -> (bx) {
    A[0] = 1.0:f32
  }
  kernel grid(1) threads(1) -> (bx_1) loc("two.py", 8) {
    A[1] = 2.0:f32
  }
}
)");
  const Status s = CheckSingleKernel(f);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("two.py:8"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("@two"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tl::passes
