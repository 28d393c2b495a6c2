// A host model of the AMD matrix instructions the HIP backend emits, written
// independently of the lowering (compiler/lowering/gpu/src/amd_matrix.cc) so
// that simulating a wavefront with it checks the lowering's index maths.
//
// Stated the way AMD's documentation states them: where each matrix element
// lives (lane, element/register), for one 16x16 output tile.
// Sources:
//   * MFMA (CDNA2/CDNA3, wave64): AMD "AMD Instinct MI300 / CDNA3 Instruction
//     Set Architecture", §7.1 (matrix operand layouts), as tabulated by AMD's
//     Matrix Instruction Calculator (`--detail-instruction`) for
//     v_mfma_f32_16x16x16_f16 / _bf16(_1k) / v_mfma_i32_16x16x16_i8 /
//     v_mfma_i32_16x16x32_i8: with E = K / 4 operand elements per lane,
//       A[i][k]  in lane i + 16 * (k / E), element k % E
//       B[k][j]  in lane j + 16 * (k / E), element k % E
//       D[i][j]  in lane j + 16 * (i / 4), register i % 4
//     (i8 elements are packed little-endian: element e = byte e).
//   * WMMA (RDNA3, wave32): AMD "RDNA3 Instruction Set Architecture" §7.9 and
//     AMD GPUOpen, "How to accelerate AI applications on RDNA 3 using WMMA"
//     (the example's a_frag[ele] = a[16 * lane + ele], b_frag[ele] =
//     b[16 * ele + lane], c[16 * (2 * ele + lIdx / 16) + lane] = c_frag[ele]):
//       A[i][k]  in lanes i and i + 16, element k
//       B[k][j]  in lanes j and j + 16, element k
//       D[i][j]  in lane j + 16 * (i % 2), register i / 2     (f32 / i32 D)
#pragma once

#include <vector>

#include "tilelang/lowering/gpu/amd_matrix.h"

namespace tl::gpu::test {

struct HwSlot {
  int lane, index;  // operand element or accumulator register
};

inline bool HwIsMfma(AmdMatrixInstr ins) { return Info(ins).wave == 64; }

// Every (lane, element) holding A[i][k] (WMMA: two lanes).
inline std::vector<HwSlot> HwA(AmdMatrixInstr ins, int i, int k) {
  if (HwIsMfma(ins)) {
    const int e = static_cast<int>(Info(ins).k / 4);
    return {{i + 16 * (k / e), k % e}};
  }
  return {{i, k}, {i + 16, k}};
}
inline std::vector<HwSlot> HwB(AmdMatrixInstr ins, int k, int j) {
  if (HwIsMfma(ins)) {
    const int e = static_cast<int>(Info(ins).k / 4);
    return {{j + 16 * (k / e), k % e}};
  }
  return {{j, k}, {j + 16, k}};
}
inline HwSlot HwD(AmdMatrixInstr ins, int i, int j) {
  if (HwIsMfma(ins)) return {j + 16 * (i / 4), i % 4};
  return {j + 16 * (i % 2), i / 2};
}

}  // namespace tl::gpu::test
