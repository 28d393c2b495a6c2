// Short constructors for the index / predicate expressions the GPU lowering
// passes build (lower.cc, warp_specialize.cc, pingpong.cc, cluster.cc,
// amd_matrix.cc each used to define their own copies). Internal to
// compiler/lowering/gpu/src; a pass pulls them in with `using namespace
// simt_build;` inside its anonymous namespace.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tilelang/ir/tile_ir.h"

namespace tl::gpu::simt_build {

using ir::DType;
using ir::Expr;

// An integer literal (ir::MakeInt: i32 unless a dtype is given).
inline Expr I(int64_t v) { return ir::MakeInt(v); }
// A variable of type t (i32 unless said: the lowering's thread / loop / slot indices).
inline Expr V(const std::string& n, DType t = DType::kI32) { return ir::MakeVar(n, t); }
// The block's linear thread index (`tl_tid`, i32).
inline Expr Tid() { return V("tl_tid"); }

inline Expr Bin(ir::BinaryOp op, Expr a, Expr b) { return ir::MakeBinary(op, std::move(a), std::move(b)); }
inline Expr Add(Expr a, Expr b) { return Bin(ir::BinaryOp::kAdd, std::move(a), std::move(b)); }
inline Expr Mul(Expr a, Expr b) { return Bin(ir::BinaryOp::kMul, std::move(a), std::move(b)); }
inline Expr Lt(Expr a, Expr b) { return Bin(ir::BinaryOp::kLt, std::move(a), std::move(b)); }
inline Expr Ge(Expr a, Expr b) { return Bin(ir::BinaryOp::kGe, std::move(a), std::move(b)); }
inline Expr Eq(Expr a, Expr b) { return Bin(ir::BinaryOp::kEq, std::move(a), std::move(b)); }
inline Expr And(Expr a, Expr b) { return Bin(ir::BinaryOp::kAnd, std::move(a), std::move(b)); }
// a / b and a % b truncating (C's; the operands here are non-negative indices); a / 1 is a itself.
inline Expr TDiv(Expr a, int64_t b) { return b == 1 ? a : ir::MakeCall(ir::CallOp::kTruncDiv, {std::move(a), I(b)}); }
inline Expr TMod(Expr a, int64_t b) { return ir::MakeCall(ir::CallOp::kTruncMod, {std::move(a), I(b)}); }

// e as i32 / as type t (a cast only where e has another type).
inline Expr ToI32(Expr e) { return ir::ExprDType(e) == DType::kI32 ? e : ir::MakeCast(DType::kI32, std::move(e)); }
inline Expr CastTo(DType t, Expr e) { return ir::ExprDType(e) == t ? e : ir::MakeCast(t, std::move(e)); }

}  // namespace tl::gpu::simt_build
