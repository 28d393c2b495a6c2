// A model of wgmma.mma_async's shared-memory operands, written from the PTX
// ISA ("Asynchronous Warpgroup Level Matrix Shared Memory Layout": the matrix
// descriptor, the canonical K-major / MN-major layouts of the swizzled modes,
// the swizzling figures) independently of the lowering's own formulas
// (swizzle.h's SwizzledElementByte, wgmma.h's strides): the SIMT interpreter
// decodes each SWgmma descriptor with it into the shared-memory byte of every
// operand element, so a start, stride, tile offset, transpose or swizzle that
// disagrees with how the lowering stored the tile reads wrong data.
#pragma once

#include <cstdint>

namespace tl::gpu::test {

struct WgmmaDescFields {
  uint32_t start = 0;  // shared byte address
  uint32_t lbo = 0, sbo = 0;
  int base_offset = 0;
  int mode = 0;  // 0 none, 1 128B, 2 64B, 3 32B
};

// Bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset,
// 62-63 swizzle mode.
inline WgmmaDescFields DecodeWgmmaDesc(uint64_t d) {
  WgmmaDescFields f;
  f.start = static_cast<uint32_t>(d & 0x3FFF) << 4;
  f.lbo = static_cast<uint32_t>((d >> 16) & 0x3FFF) << 4;
  f.sbo = static_cast<uint32_t>((d >> 32) & 0x3FFF) << 4;
  f.base_offset = static_cast<int>((d >> 49) & 7);
  f.mode = static_cast<int>((d >> 62) & 3);
  return f;
}

// Width in bytes of the swizzle's rows: 128, 64, 32 (0: none).
inline uint32_t WgmmaModeWidth(int mode) { return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0; }

// The swizzle as the ISA's figures draw it: memory in 128-byte lines; within
// the width-W swizzle, the 16-byte unit u of a line (u < W / 16) is moved to
// u XOR (line mod (W / 16)), the pattern repeating every 8 lines for 128B,
// 4 for 64B (units of a 64-byte row), 2 for 32B.
inline uint32_t WgmmaSwizzle(int mode, uint32_t addr) {
  const uint32_t w = WgmmaModeWidth(mode);
  if (w == 0) return addr;
  const uint32_t units = w / 16;        // 8, 4, 2
  const uint32_t line = addr / 128;     // 128-byte line
  const uint32_t unit = (addr / 16) % units;
  const uint32_t moved = unit ^ (line % units);
  return addr - unit * 16 + moved * 16;
}

// Shared byte of operand element (x, k) of one instruction: x the M (A) or N
// (B) index inside the instruction's tile, k < 16 (16-bit elements of
// `bytes` bytes). Canonical layouts of the swizzled modes (T = 16 / bytes
// elements per 16-byte unit, W the swizzle width):
//   K-major:  ((8, m), (T, 2k)) : ((W / 16 T, SBO), (1, T)) -- rows of W
//             bytes, 8-row groups SBO apart, k contiguous in the row;
//   MN-major: ((T, W / 16, m), (8, k)) : ((1, T, LBO), (W / 16 T, SBO)) --
//             W / bytes consecutive x in a W-byte row, the next such group LBO
//             apart, rows are k, 8-row groups SBO apart.
// The address is formed from the descriptor's start and then swizzled.
inline uint32_t WgmmaElementByte(const WgmmaDescFields& d, bool mn_major, uint32_t bytes, uint32_t x, uint32_t k) {
  const uint32_t w = WgmmaModeWidth(d.mode);
  uint32_t a;
  if (!mn_major) {
    a = d.start + (x % 8) * w + (x / 8) * d.sbo + k * bytes;
  } else {
    const uint32_t per_row = w / bytes;
    a = d.start + (x % per_row) * bytes + (x / per_row) * d.lbo + (k % 8) * w + (k / 8) * d.sbo;
  }
  return WgmmaSwizzle(d.mode, a);
}

// Register operand A of wgmma.mma_async m64nNk16 (f16/bf16), from the PTX
// ISA's figure "WGMMA .m64nNk16 register fragment layout for matrix A": the
// 64x16 tile is four 16x16 blocks, block w held by warp w of the warpgroup;
// inside a block the layout of mma.m16n8k16's A: lane l (groupID l / 4,
// threadID_in_group l % 4) holds a0..a7 in four .b32 registers, register r =
// (a_{2r}, a_{2r+1}) low half first, a_i at row groupID + 8 ((i / 2) % 2) and
// column 2 threadID_in_group + (i % 2) + 8 (i / 4). `t` is the thread's index
// in the warpgroup (0..127), `half` 0 = the low 16 bits.
inline void WgmmaARegisterElement(uint32_t t, uint32_t reg, uint32_t half, uint32_t* row, uint32_t* col) {
  const uint32_t warp = t / 32, lane = t % 32, i = 2 * reg + half;
  *row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
  *col = 2 * (lane % 4) + (i % 2) + 8 * (i / 4);
}

}  // namespace tl::gpu::test
