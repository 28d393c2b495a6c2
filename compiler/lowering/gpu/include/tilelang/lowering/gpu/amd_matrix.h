// AMD matrix-core instructions for SAmdMma (simt_ir.h): which instruction
// realizes a k-step, and which operand element each lane supplies.
//
// The lane maps are the hardware's (AMD "CDNA3 Instruction Set Architecture"
// §7.1, "Dependent arithmetic: matrix operand layouts", as tabulated by AMD's
// Matrix Instruction Calculator; RDNA3 ISA §7.9 "Wave Matrix Multiply
// Accumulate" and AMD GPUOpen's "How to accelerate AI applications on RDNA 3
// using WMMA"), for a 16x16 output tile with hardware row i, column j:
//   MFMA 16x16xK (wave64), E = K / 4 elements per lane:
//     A: lane l element e holds A[i = l % 16][k = (l / 16) * E + e]
//     B: lane l element e holds B[k = (l / 16) * E + e][j = l % 16]
//     D: lane l register p holds D[i = 4 * (l / 16) + p][j = l % 16]   (P = 4)
//   WMMA 16x16x16 (wave32), E = 16:
//     A: lane l element e holds A[i = l % 16][k = e]   (lanes 16-31 repeat 0-15)
//     B: lane l element e holds B[k = e][j = l % 16]
//     D: lane l register p holds D[i = 2 * p + l / 16][j = l % 16]     (P = 8)
// The lowering chooses which logical rows a tile's 16 hardware rows are, so
// that the D registers land in AmdMatrixAccumulatorLayout (g = 16, v = 1,
// R = T / 16; layout.h): hardware row i of m-tile t of wavefront w is logical
//   MFMA: (t * 4 + i % 4) * R + w * 4 + i / 4
//   WMMA: (t * 8 + i / 2) * R + w * 2 + i % 2
// and hardware column j of n-tile n is logical column n * 16 + j.
// The tests keep an independent model of the hardware maps and simulate whole
// wavefronts against these index expressions (tests/compiler/gpu_lowering).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::gpu {

enum class AmdMatrixInstr : uint8_t {
  kMfmaF16,    // v_mfma_f32_16x16x16f16       gfx90a, gfx94x
  kMfmaBf16,   // v_mfma_f32_16x16x16bf16_1k   gfx90a, gfx94x
  kMfmaI8K16,  // v_mfma_i32_16x16x16i8        gfx90a (not on gfx94x)
  kMfmaI8K32,  // v_mfma_i32_16x16x32_i8       gfx94x
  kWmmaF16,    // v_wmma_f32_16x16x16_f16      gfx11, wave32
  kWmmaBf16,   // v_wmma_f32_16x16x16_bf16     gfx11, wave32
  kWmmaI8,     // v_wmma_i32_16x16x16_iu8      gfx11, wave32 (both operands signed)
};

struct AmdMatrixInstrInfo {
  const char* builtin;  // clang builtin
  int64_t wave;         // lanes
  int64_t k;            // k per instruction
  int64_t elems;        // operand elements per lane (A and B)
  int64_t regs;         // accumulator registers per lane
};
AmdMatrixInstrInfo Info(AmdMatrixInstr i);

// The instructions one SAmdMma k-step issues, in k order (each covers the
// next Info().k elements of k). `gfx94` only matters for MFMA i8.
std::vector<AmdMatrixInstr> AmdMatrixInstrs(MatrixCore core, MmaKind kind, bool gfx94);

// Index expressions (i32) over the variables
//   tl_w, tl_l   wavefront index in the block, lane in the wavefront
//   tl_t, tl_n   m-tile and n-tile
//   tl_s         instruction within the k-step (AmdMatrixInstrs order)
//   tl_e, tl_p   operand element, accumulator register
//   tl_ab, tl_bb, tl_k0   the step's a_base, b_base, k0
// AmdOperandA: element of n.a that lane tl_l supplies as element tl_e of its
// A operand of instruction tl_s for m-tile tl_t; AmdOperandB likewise for
// n-tile tl_n; AmdAccSlot: register of n.c that is accumulator register tl_p
// of tile (tl_t, tl_n). The HIP printer prints these; the tests evaluate them.
ir::Expr AmdOperandA(const SAmdMma& n, AmdMatrixInstr ins);
ir::Expr AmdOperandB(const SAmdMma& n, AmdMatrixInstr ins);
ir::Expr AmdAccSlot(const SAmdMma& n);

}  // namespace tl::gpu
