// Shared-memory swizzles of Hopper's tensor-core operand tiles: the one
// definition that the wgmma operand descriptors (T.gemm on sm_90a) and the TMA
// tensor maps (T.copy global -> shared on sm_90a) must agree on.
//
// Both the hardware's TMA engine (CU_TENSOR_MAP_SWIZZLE_32B/64B/128B) and
// wgmma's shared-memory descriptor (swizzle modes 3/2/1) define the swizzle
// as a function of the shared-memory BYTE ADDRESS: the 16-byte chunk index
// (address bits [4, 4 + b)) is XORed with address bits [7, 7 + b), b = 1, 2, 3
// for 32, 64, 128 bytes. A tile row of `SwizzleRowBytes(s)` bytes is stored at
// logical byte offset row * row_bytes + byte_in_row, then permuted by
// `SwizzleOffset`; the pattern repeats every `SwizzleAtomBytes(s)` bytes
// (8 rows of 128 bytes for 128B, 8 x 64 for 64B, 8 x 32 for 32B).
//
// RISK: the function reads absolute address bits, so it is only the
// hardware's pattern when the buffer's base address is a multiple of
// SwizzleAtomBytes(s) (1024 for 128B; TMA needs 128-byte bases for any
// swizzle and wgmma's descriptor base_offset field is kept 0, which also
// assumes atom-aligned bases). The lowering must align such buffers.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace tl::gpu {

enum class SmemSwizzle : int { kNone = 0, k32B = 1, k64B = 2, k128B = 3 };

// Bytes in one swizzled row (the TMA box's inner extent in bytes; the K-major
// operand's row in bytes for wgmma): 16 (no swizzle: one chunk), 32, 64, 128.
constexpr int64_t SwizzleRowBytes(SmemSwizzle s) {
  return s == SmemSwizzle::kNone ? 16 : int64_t{16} << static_cast<int>(s);
}

// Bytes after which the pattern repeats (8 rows): the base alignment needed.
constexpr int64_t SwizzleAtomBytes(SmemSwizzle s) {
  return s == SmemSwizzle::kNone ? 16 : 8 * SwizzleRowBytes(s);
}

// Physical byte offset of logical byte offset `logical` in an atom-aligned
// buffer: chunk bits [4, 4 + b) ^= bits [7, 7 + b). An involution (applying it
// twice gives `logical` back) that keeps every 16-byte chunk whole and stays
// inside the atom.
constexpr int64_t SwizzleOffset(SmemSwizzle s, int64_t logical) {
  if (s == SmemSwizzle::kNone) return logical;
  const int64_t mask = (int64_t{1} << static_cast<int>(s)) - 1;  // b bits
  return logical ^ (((logical >> 7) & mask) << 4);
}

// Byte offset, from an atom-aligned buffer's start, of element (m, r, c) of a
// buffer of [rows, cols] tiles (m: the flattened leading index) with
// `elem_bytes`-byte elements, stored as the wgmma operand and the TMA box
// layouts need it: kNone is plain row-major; a swizzle s stores each tile as
// cols * elem_bytes / W column panels (W = SwizzleRowBytes(s), each panel
// rows x W bytes, rows contiguous; a TMA box of W bytes' inner extent writes
// exactly one panel) and permutes the bytes with SwizzleOffset. Needs
// cols * elem_bytes a multiple of W and rows a multiple of 8 (whole atoms).
constexpr int64_t SwizzledElementByte(SmemSwizzle s, int64_t rows, int64_t cols, int64_t elem_bytes, int64_t m,
                                      int64_t r, int64_t c) {
  if (s == SmemSwizzle::kNone) return ((m * rows + r) * cols + c) * elem_bytes;
  const int64_t w = SwizzleRowBytes(s), per_row = w / elem_bytes;
  const int64_t logical = m * rows * cols * elem_bytes + ((c / per_row) * rows + r) * w + (c % per_row) * elem_bytes;
  return SwizzleOffset(s, logical);
}

// The name used in notes, build attributes and tests.
constexpr const char* SwizzleName(SmemSwizzle s) {
  switch (s) {
    case SmemSwizzle::kNone: return "none";
    case SmemSwizzle::k32B: return "32B";
    case SmemSwizzle::k64B: return "64B";
    case SmemSwizzle::k128B: return "128B";
  }
  return "?";
}

}  // namespace tl::gpu
