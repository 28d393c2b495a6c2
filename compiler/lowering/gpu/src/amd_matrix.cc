// AMD matrix-core lane maps; see amd_matrix.h for the hardware facts and the
// row assignment they implement.
#include "tilelang/lowering/gpu/amd_matrix.h"

#include "simt_build.h"

namespace tl::gpu {
namespace {

using ir::Expr;
using namespace simt_build;  // I, V, Add, Mul, TDiv, TMod (divisors here are 2, 4, 16: never TDiv's a / 1 shortcut)

bool IsMfma(AmdMatrixInstr i) { return i <= AmdMatrixInstr::kMfmaI8K32; }

// k (within the instruction) of operand element tl_e of lane tl_l.
Expr KOf(AmdMatrixInstr ins) {
  const AmdMatrixInstrInfo f = Info(ins);
  if (!IsMfma(ins)) return V("tl_e");
  return Add(Mul(TDiv(V("tl_l"), 16), I(f.elems)), V("tl_e"));
}

}  // namespace

AmdMatrixInstrInfo Info(AmdMatrixInstr i) {
  switch (i) {
    case AmdMatrixInstr::kMfmaF16: return {"__builtin_amdgcn_mfma_f32_16x16x16f16", 64, 16, 4, 4};
    case AmdMatrixInstr::kMfmaBf16: return {"__builtin_amdgcn_mfma_f32_16x16x16bf16_1k", 64, 16, 4, 4};
    case AmdMatrixInstr::kMfmaI8K16: return {"__builtin_amdgcn_mfma_i32_16x16x16i8", 64, 16, 4, 4};
    case AmdMatrixInstr::kMfmaI8K32: return {"__builtin_amdgcn_mfma_i32_16x16x32_i8", 64, 32, 8, 4};
    case AmdMatrixInstr::kWmmaF16: return {"__builtin_amdgcn_wmma_f32_16x16x16_f16_w32", 32, 16, 16, 8};
    case AmdMatrixInstr::kWmmaBf16: return {"__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32", 32, 16, 16, 8};
    case AmdMatrixInstr::kWmmaI8: return {"__builtin_amdgcn_wmma_i32_16x16x16_iu8_w32", 32, 16, 16, 8};
  }
  return {"", 64, 16, 4, 4};
}

std::vector<AmdMatrixInstr> AmdMatrixInstrs(MatrixCore core, MmaKind kind, bool gfx94) {
  if (core == MatrixCore::kWmma) {
    if (kind == MmaKind::kBF16) return {AmdMatrixInstr::kWmmaBf16};
    if (kind == MmaKind::kI8) return {AmdMatrixInstr::kWmmaI8};
    return {AmdMatrixInstr::kWmmaF16};
  }
  if (kind == MmaKind::kBF16) return {AmdMatrixInstr::kMfmaBf16};
  if (kind == MmaKind::kI8) {
    if (gfx94) return {AmdMatrixInstr::kMfmaI8K32};
    return {AmdMatrixInstr::kMfmaI8K16, AmdMatrixInstr::kMfmaI8K16};
  }
  return {AmdMatrixInstr::kMfmaF16};
}

Expr AmdOperandA(const SAmdMma& n, AmdMatrixInstr ins) {
  // The hardware row this lane supplies is i = l % 16; its logical row is the
  // one whose accumulator registers the layout gives to the lanes holding D[i].
  const Expr i = TMod(V("tl_l"), 16);
  Expr row;
  if (IsMfma(ins)) {
    row = Add(Mul(Add(Mul(V("tl_t"), I(4)), TMod(i, 4)), I(n.R)), Add(Mul(V("tl_w"), I(4)), TDiv(i, 4)));
  } else {
    row = Add(Mul(Add(Mul(V("tl_t"), I(8)), TDiv(i, 2)), I(n.R)), Add(Mul(V("tl_w"), I(2)), TMod(i, 2)));
  }
  const Expr k = Add(Add(V("tl_k0"), Mul(V("tl_s"), I(Info(ins).k))), KOf(ins));
  return Add(V("tl_ab"), Add(Mul(row, I(n.a_row_stride)), Mul(k, I(n.a_col_stride))));
}

Expr AmdOperandB(const SAmdMma& n, AmdMatrixInstr ins) {
  const Expr col = Add(Mul(V("tl_n"), I(16)), TMod(V("tl_l"), 16));
  const Expr k = Add(Add(V("tl_k0"), Mul(V("tl_s"), I(Info(ins).k))), KOf(ins));
  return Add(V("tl_bb"), Add(Mul(k, I(n.b_k_stride)), Mul(col, I(n.b_n_stride))));
}

Expr AmdAccSlot(const SAmdMma& n) {
  return Add(Mul(Add(Mul(V("tl_t"), I(MatrixCoreRegs(n.core))), V("tl_p")), I(n.c_col_slots)), V("tl_n"));
}

}  // namespace tl::gpu
