// Core data structure tests: value semantics, dtype inference, folding,
// walkers, symbol table.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "test_util.h"
#include "tilelang/ir/tile_ir.h"

namespace tl::ir {
namespace {

TEST(IrCore, CopyIsDeepAndEqualityIsStructural) {
  Expr a = MakeBinary(BinaryOp::kAdd, MakeVar("i"), MakeInt(4));
  Expr b = Clone(a);
  EXPECT_EQ(a, b);
  As<Binary>(b)->rhs = MakeInt(5);
  EXPECT_NE(a, b);
  EXPECT_EQ(*As<IntImm>(*As<Binary>(a)->rhs), (IntImm{4, DType::kI32}));
}

TEST(IrCore, FloatEqualityTreatsNanAndSignedZero) {
  EXPECT_EQ(MakeFloat(std::numeric_limits<double>::quiet_NaN()),
            MakeFloat(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_NE(MakeFloat(0.0), MakeFloat(-0.0));
  EXPECT_NE(MakeFloat(1.0, DType::kF32), MakeFloat(1.0, DType::kF16));
}

TEST(IrCore, ExprDType) {
  EXPECT_EQ(ExprDType(MakeBinary(BinaryOp::kLt, MakeVar("i"), MakeInt(4))), DType::kBool);
  EXPECT_EQ(ExprDType(MakeBinary(BinaryOp::kMul, MakeVar("x", DType::kF16), MakeFloat(2, DType::kF16))),
            DType::kF16);
  EXPECT_EQ(ExprDType(MakeCast(DType::kI64, MakeVar("i"))), DType::kI64);
  EXPECT_EQ(ExprDType(MakeCall(CallOp::kExp, {MakeVar("x", DType::kF32)})), DType::kF32);
}

TEST(IrCore, FoldIntUsesFloorSemantics) {
  EXPECT_EQ(FoldInt(MakeBinary(BinaryOp::kDiv, MakeInt(-7), MakeInt(2))), -4);
  EXPECT_EQ(FoldInt(MakeBinary(BinaryOp::kMod, MakeInt(-7), MakeInt(2))), 1);
  EXPECT_EQ(FoldInt(MakeCall(CallOp::kTruncDiv, {MakeInt(-7), MakeInt(2)})), -3);
  EXPECT_EQ(FoldInt(MakeCall(CallOp::kTruncMod, {MakeInt(-7), MakeInt(2)})), -1);
  EXPECT_EQ(FoldInt(MakeCall(CallOp::kCeilDiv, {MakeInt(513), MakeInt(64)})), 9);
  EXPECT_EQ(FoldInt(MakeBinary(BinaryOp::kDiv, MakeInt(1), MakeInt(0))), std::nullopt);
  EXPECT_EQ(FoldInt(MakeVar("M")), std::nullopt);
  EXPECT_EQ(FoldInt(MakeVar("M"), [](std::string_view n) -> std::optional<int64_t> {
              return n == "M" ? std::optional<int64_t>(100) : std::nullopt;
            }),
            100);
}

// Folds the value of `let r = EXPR` parsed in a kernel.
std::optional<int64_t> FoldText(const std::string& expr) {
  Module m = testing::MustParse(testing::WrapKernelBody("    let r = " + expr + "\n"));
  if (m.functions.empty()) return std::nullopt;
  return FoldInt(As<Let>(As<Kernel>(m.functions[0].body[0])->body[0])->value);
}

TEST(IrCore, FoldIntWrapsLikeTheGeneratedCode) {
  EXPECT_EQ(FoldText("127:i8 + 1:i8"), -128);
  EXPECT_EQ(FoldText("0:u32 - 1:u32"), 4294967295);
  EXPECT_EQ(FoldText("cast<u8>(300)"), 44);
  EXPECT_EQ(FoldText("cast<i8>(200)"), -56);
  EXPECT_EQ(FoldText("2147483647 + 1"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(FoldText("255:u8 / 2:u8"), 127);
  EXPECT_EQ(FoldText("-1 >> 1"), -1);                // arithmetic shift for signed
  EXPECT_EQ(FoldText("4294967295:u32 >> 31:u32"), 1);  // logical for unsigned
  EXPECT_EQ(FoldText("1 << 32"), std::nullopt);      // shift past the width
  EXPECT_EQ(FoldText("1 << 31"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(FoldText("4294967295:u32 > 1:u32"), 1);  // unsigned comparison
  EXPECT_EQ(FoldText("6 & 3 | 8 ^ 1"), 11);
  EXPECT_EQ(FoldText("~5"), -6);
  EXPECT_EQ(FoldText("-(7) % 3"), 2);
  EXPECT_EQ(FoldText("7 % -3"), -2);
  EXPECT_EQ(FoldText("ceildiv(-7, 2)"), -3);
  EXPECT_EQ(FoldText("max(3, -4) + min(3, -4) + abs(-9)"), 8);
  EXPECT_EQ(FoldText("select(n > 0, 1, 2)"), std::nullopt);
  EXPECT_EQ(FoldText("select(1 > 0, 1, n)"), 1);
  EXPECT_EQ(FoldText("false && n > 0"), 0);  // short circuit
  EXPECT_EQ(FoldText("true || n > 0"), 1);
  EXPECT_EQ(FoldText("true && n > 0"), std::nullopt);
  EXPECT_EQ(FoldText("cast<i32>(1.5:f32)"), std::nullopt);  // floats are not folded
  EXPECT_EQ(FoldText("A[0, 0] > 0.0:f32"), std::nullopt);
}

TEST(IrCore, FoldConstantsKeepsWhatIsNotConstant) {
  Module m = testing::MustParse(testing::WrapKernelBody("    let r = ceildiv(M, 64) + 2 * 3 + cast<i32>(x * (1.0:f32 + 1.0:f32))\n"));
  ASSERT_FALSE(m.functions.empty());
  const Expr& e = As<Let>(As<Kernel>(m.functions[0].body[0])->body[0])->value;
  EXPECT_EQ(Print(FoldConstants(e)), "ceildiv(M, 64) + 6 + cast<i32>(x * (1.0:f32 + 1.0:f32))");
  EXPECT_EQ(Print(FoldConstants(MakeBinary(BinaryOp::kLt, MakeInt(1), MakeInt(2)))), "true");
}

TEST(IrCore, WalkersVisitEveryStatementAndExpression) {
  Module m = testing::MustParse(testing::ReadFile(testing::TestdataPath("flash_attention.tir")));
  ASSERT_FALSE(m.functions.empty());
  Function& f = m.functions[0];
  std::map<StmtKind, int> counts;
  ForEachStmt(f.body, [&](const Stmt& s) { ++counts[Kind(s)]; });
  EXPECT_EQ(counts[StmtKind::kKernel], 1);
  EXPECT_EQ(counts[StmtKind::kAlloc], 11);
  EXPECT_EQ(counts[StmtKind::kGemm], 2);
  EXPECT_EQ(counts[StmtKind::kReduce], 2);
  EXPECT_EQ(counts[StmtKind::kParallel], 5);
  EXPECT_EQ(counts[StmtKind::kStore], 7);
  EXPECT_EQ(counts[StmtKind::kFor], 1);

  // Every load of acc_s, found through the expression walkers.
  int loads = 0;
  ForEachStmt(f.body, [&](const Stmt& s) {
    ForEachExprOf(s, [&](const Expr& e) {
      WalkExpr(e, [&](const Expr& sub) {
        if (const auto* l = As<Load>(sub); l && l->buffer == "acc_s") ++loads;
      });
    });
  });
  EXPECT_EQ(loads, 2);

  // Rename the scalar parameter in place through the mutable walkers.
  ForEachStmt(f.body, [&](Stmt& s) {
    ForEachExprOf(s, [&](Expr& e) {
      e = RewriteExpr(e, [](const Expr& sub) -> std::optional<Expr> {
        const auto* v = As<VarRef>(sub);
        if (v && v->name == "sm_scale") return MakeVar("softmax_scale", v->dtype);
        return std::nullopt;
      });
    });
  });
  f.params.back().name = "softmax_scale";
  std::string printed = Print(m);
  EXPECT_EQ(printed.find("sm_scale"), std::string::npos);
  EXPECT_NE(printed.find("let scale = softmax_scale * 1.442695:f32"), std::string::npos);
  EXPECT_TRUE(Verify(m).ok()) << Verify(m).message();
}

TEST(IrCore, CollectSymbolsDescribesEveryName) {
  Module m = testing::MustParse(testing::ReadFile(testing::TestdataPath("dequant.tir")));
  ASSERT_FALSE(m.functions.empty());
  SymbolTable t = CollectSymbols(m.functions[0]);
  ASSERT_TRUE(t.count("B"));
  EXPECT_EQ(t.at("B").kind, SymbolInfo::Kind::kTensorParam);
  EXPECT_EQ(t.at("B").dtype, DType::kU8);
  EXPECT_EQ(t.at("B").scope, MemScope::kGlobal);
  EXPECT_EQ(t.at("M").kind, SymbolInfo::Kind::kDynamicSymbol);
  EXPECT_EQ(t.at("by").kind, SymbolInfo::Kind::kBlockIndex);
  EXPECT_EQ(t.at("C_f").kind, SymbolInfo::Kind::kAlloc);
  EXPECT_EQ(t.at("C_f").scope, MemScope::kFragment);
  EXPECT_EQ(Print(MakeCall(CallOp::kMax, t.at("C_f").shape)), "max(64, 128)");
  EXPECT_EQ(t.at("k").kind, SymbolInfo::Kind::kLoopVar);
  EXPECT_EQ(t.at("j").kind, SymbolInfo::Kind::kParallelVar);
  EXPECT_EQ(t.at("nibble").kind, SymbolInfo::Kind::kLet);
  EXPECT_EQ(t.at("nibble").dtype, DType::kU8);
  ASSERT_NE(t.at("nibble").def, nullptr);
  EXPECT_EQ(Kind(*t.at("nibble").def), StmtKind::kLet);
  EXPECT_TRUE(t.at("A_s").IsBuffer());
  EXPECT_FALSE(t.at("q").IsBuffer());
}

TEST(IrCore, RegionShapeAndNormalizeDim) {
  Region whole{"A", {}};
  std::vector<Expr> shape = {MakeVar("M"), MakeInt(64)};
  EXPECT_EQ(RegionShape(whole, shape), shape);
  Region part{"A", {RegionDim{MakeVar("i"), std::nullopt}, RegionDim{MakeInt(0), MakeInt(32)}}};
  EXPECT_EQ(RegionShape(part, shape), (std::vector<Expr>{MakeInt(1), MakeInt(32)}));
  EXPECT_EQ(NormalizeDim(-1, 3), 2);
  EXPECT_EQ(NormalizeDim(2, 3), 2);
  EXPECT_EQ(NormalizeDim(3, 3), std::nullopt);
  EXPECT_EQ(NormalizeDim(-4, 3), std::nullopt);
}

TEST(IrCore, StructuralEqualityCanIgnoreLocations) {
  Module a = testing::MustParse(testing::ReadFile(testing::TestdataPath("split_k.tir")));
  Module b = Clone(a);
  EXPECT_TRUE(StructurallyEqual(a, b));
  ForEachStmt(b.functions[0].body, [](Stmt& s) {
    if (s.loc) s.loc->line += 1;
  });
  EXPECT_FALSE(StructurallyEqual(a, b));
  EXPECT_TRUE(StructurallyEqual(a, b, /*compare_locs=*/false));
  EXPECT_TRUE(StructurallyEqual(a.functions[0], b.functions[0], false));
  As<Kernel>(b.functions[0].body[0])->threads[0] = MakeInt(256);
  EXPECT_FALSE(StructurallyEqual(a, b, false));
}

TEST(IrCore, VocabularyNamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(DType::kF64); ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(ParseDType(DTypeName(t)), t);
  }
  for (int i = 0; i <= static_cast<int>(CallOp::kCeilDiv); ++i) {
    auto op = static_cast<CallOp>(i);
    EXPECT_EQ(ParseCallOp(CallOpName(op)), op);
  }
  EXPECT_EQ(ParseDType("float32"), std::nullopt);
  EXPECT_STREQ(StmtKindName(StmtKind::kAtomicAddTile), "atomic_add");
  EXPECT_STREQ(ExprKindName(ExprKind::kCall), "call");
  EXPECT_EQ(BitWidth(DType::kBF16), 16);
  EXPECT_TRUE(IsFloat(DType::kBF16));
  EXPECT_FALSE(IsInt(DType::kBool));
  EXPECT_TRUE(IsSigned(DType::kI8));
  EXPECT_FALSE(IsSigned(DType::kU64));
}

TEST(IrCore, RoundToDType) {
  EXPECT_EQ(RoundToDType(0.1, DType::kF64), 0.1);
  EXPECT_EQ(RoundToDType(0.1, DType::kF32), static_cast<double>(0.1f));
  EXPECT_EQ(RoundToDType(1.0 / 3.0, DType::kF16), 0.333251953125);
  EXPECT_EQ(RoundToDType(1.0 / 3.0, DType::kBF16), 0.333984375);
  // f16: largest finite, the tie above it goes to infinity, below to 65504.
  EXPECT_EQ(RoundToDType(65504.0, DType::kF16), 65504.0);
  EXPECT_EQ(RoundToDType(65519.0, DType::kF16), 65504.0);
  EXPECT_EQ(RoundToDType(65520.0, DType::kF16), std::numeric_limits<double>::infinity());
  EXPECT_EQ(RoundToDType(-1e10, DType::kF16), -std::numeric_limits<double>::infinity());
  // Subnormals: 2^-24 is the smallest f16; half of it is a tie, to even (0).
  EXPECT_EQ(RoundToDType(std::ldexp(1.0, -24), DType::kF16), std::ldexp(1.0, -24));
  EXPECT_EQ(RoundToDType(std::ldexp(1.0, -25), DType::kF16), 0.0);
  EXPECT_EQ(RoundToDType(std::ldexp(3.0, -25), DType::kF16), std::ldexp(1.0, -23));
  // Ties to even in the normal range: 1 + 2^-11 lies between 1 and 1 + 2^-10.
  EXPECT_EQ(RoundToDType(1.0 + std::ldexp(1.0, -11), DType::kF16), 1.0);
  EXPECT_EQ(RoundToDType(1.0 + 3 * std::ldexp(1.0, -11), DType::kF16), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(RoundToDType(static_cast<double>(std::numeric_limits<float>::max()), DType::kF32),
            static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(RoundToDType(1e39, DType::kF32), std::numeric_limits<double>::infinity());
  EXPECT_EQ(RoundToDType(1e-46, DType::kF32), 0.0);
  EXPECT_TRUE(std::isnan(RoundToDType(std::numeric_limits<double>::quiet_NaN(), DType::kBF16)));
}

}  // namespace
}  // namespace tl::ir
