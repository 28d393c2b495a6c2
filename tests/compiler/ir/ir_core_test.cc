// Core data structure tests: value semantics, dtype inference, folding,
// walkers, symbol table.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tl::ir
