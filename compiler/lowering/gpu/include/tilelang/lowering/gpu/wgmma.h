// Hopper warpgroup MMA (PTX wgmma.mma_async, sm_90a): the shared-memory
// operand geometry and the 64-bit matrix descriptors, one definition for the
// layout inference (which gemms fit), the lowering (SWgmma's starts and
// strides), the CUDA printer (descriptor bits) and the tests.
//
// Operand storage: a wgmma operand buffer [..., rows, cols] (e-byte elements)
// is swizzled per swizzle.h: panels of W = SwizzleRowBytes(s) bytes per row,
// W the largest of 128/64/32 dividing cols * e, rows a multiple of 8.
// The PTX ISA's canonical layouts ("Shared Memory Matrix Layout", swizzled
// modes; T = 16 / e elements per 16-byte chunk) then describe it directly:
//   K-major (A not transposed: A[M, K]; B transposed: B[N, K]): row x of the
//     operand tile (M or N) is a buffer row; 8 rows at W bytes each form an
//     atom, atoms along M/N at SBO = 8 W; a k16 step is 32 contiguous bytes
//     of the W-byte row (start address advanced inside the row; LBO unused).
//   MN-major (A transposed: A[K, M]; B not transposed: B[K, N]): k is the
//     buffer row (W bytes per row, 8 rows per atom, the next 8 k at
//     SBO = 8 W); W / e consecutive M/N elements per panel, the next panel at
//     LBO = rows * W (the panel stride).
// Descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start address
// >> 4 (18-bit shared address), 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base
// offset (0: every start this lowering makes is atom-aligned but for the
// k advance inside a row), 62-63 swizzle (1 = 128B, 2 = 64B, 3 = 32B).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tilelang/lowering/gpu/simt_ir.h"
#include "tilelang/lowering/gpu/swizzle.h"

namespace tl::gpu {

// Elements of k per instruction: 16 (f16, bf16), 32 (i8: m64nNk32, s32
// accumulators, K-major operands only); always 32 bytes of a K-major row.
int64_t WgmmaK(MmaKind k);

// The descriptor's 2-bit swizzle field for `s` (0 for kNone).
int WgmmaSwizzleMode(SmemSwizzle s);

// The 64-bit descriptor of an operand starting at shared byte address `addr`.
uint64_t WgmmaDescriptor(uint32_t addr, int64_t lbo, int64_t sbo, SmemSwizzle s);

// The swizzle a wgmma operand buffer of `rows x cols` e-byte elements is
// stored with, or nullopt (then no wgmma reads it).
std::optional<SmemSwizzle> WgmmaOperandSwizzle(int64_t rows, int64_t cols, int64_t elem_bytes);

// N of one instruction for an N-column gemm (N a multiple of 8): N up to
// 256, else the largest multiple of 8 <= 256 dividing N (0: none).
int64_t WgmmaInstrN(int64_t n);

// One operand of a wgmma gemm, resolved against its buffer: rows x cols the
// buffer's last two dims; r0, c0 the region's start there (nullopt when not
// constant); k_major per the gemm's transpose; `tile` the M or N extent of
// one instruction (64 for A, WgmmaInstrN for B), `tiles` how many. Returns
// an empty string when the canonical layout covers it, else why not.
std::string WgmmaOperandProblem(int64_t rows, int64_t cols, int64_t elem_bytes, std::optional<int64_t> r0,
                                std::optional<int64_t> c0, bool k_major, int64_t tile, int64_t tiles);

// Whether a SIMT block contains SWgmma (then the kernel is sm_90a only).
bool HasWgmma(const SBlock& b);

// LBO and SBO of such an operand (bytes).
void WgmmaStrides(int64_t rows, int64_t elem_bytes, SmemSwizzle s, bool k_major, int64_t* lbo, int64_t* sbo);

}  // namespace tl::gpu
