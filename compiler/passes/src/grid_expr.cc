// Grid expressions to the bundle's GridExpr stack program.
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {
namespace {

enum GridOp : int64_t { kConst = 0, kSym = 1, kParam = 2, kAdd = 3, kSub = 4, kMul = 5, kCeilDiv = 6,
                        kFloorDiv = 7, kMin = 8, kMax = 9, kFloorMod = 10 };

Status Emit(const ir::Expr& e, const ir::Function& f, std::vector<int64_t>& code) {
  auto unsupported = [&](const char* why) {
    return Status(StatusCode::kInvalidArgument, "@" + f.name + ": grid expression " + ir::Print(e) + ": " + why);
  };
  auto binary = [&](const ir::Expr& a, const ir::Expr& b, GridOp op) -> Status {
    TL_RETURN_IF_ERROR(Emit(a, f, code));
    TL_RETURN_IF_ERROR(Emit(b, f, code));
    code.push_back(op);
    return Status::Ok();
  };
  if (const std::optional<int64_t> v = ir::FoldInt(e)) {
    code.push_back(kConst);
    code.push_back(*v);
    return Status::Ok();
  }
  if (!ir::IsInt(ir::ExprDType(e))) return unsupported("is not an integer");
  if (const auto* v = ir::As<ir::VarRef>(e)) {
    for (size_t i = 0; i < f.symbols.size(); ++i) {
      if (f.symbols[i].name == v->name) {
        code.push_back(kSym);
        code.push_back(static_cast<int64_t>(i));
        return Status::Ok();
      }
    }
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (f.params[i].name == v->name && f.params[i].kind == ir::Param::Kind::kScalar) {
        code.push_back(kParam);
        code.push_back(static_cast<int64_t>(i));
        return Status::Ok();
      }
    }
    return unsupported("names neither a dynamic symbol nor a scalar parameter");
  }
  if (const auto* c = ir::As<ir::Cast>(e)) return Emit(*c->value, f, code);
  if (const auto* b = ir::As<ir::Binary>(e)) {
    switch (b->op) {
      case ir::BinaryOp::kAdd: return binary(*b->lhs, *b->rhs, kAdd);
      case ir::BinaryOp::kSub: return binary(*b->lhs, *b->rhs, kSub);
      case ir::BinaryOp::kMul: return binary(*b->lhs, *b->rhs, kMul);
      case ir::BinaryOp::kDiv: return binary(*b->lhs, *b->rhs, kFloorDiv);
      case ir::BinaryOp::kMod: return binary(*b->lhs, *b->rhs, kFloorMod);
      default: return unsupported("uses an operator the launch evaluator lacks");
    }
  }
  if (const auto* c = ir::As<ir::Call>(e)) {
    if (c->args.size() == 2) {
      switch (c->op) {
        case ir::CallOp::kCeilDiv: return binary(c->args[0], c->args[1], kCeilDiv);
        case ir::CallOp::kMin: return binary(c->args[0], c->args[1], kMin);
        case ir::CallOp::kMax: return binary(c->args[0], c->args[1], kMax);
        default: break;
      }
    }
    return unsupported("calls a function the launch evaluator lacks");
  }
  return unsupported("is not built from constants, symbols and scalar parameters");
}

}  // namespace

StatusOr<std::vector<int64_t>> CompileGridExpr(const ir::Expr& e, const ir::Function& f) {
  std::vector<int64_t> code;
  TL_RETURN_IF_ERROR(Emit(e, f, code));
  return code;
}

}  // namespace tl::passes
