// Whether a global -> shared tile copy can be one TMA box (or several), and
// which box: the pure part of GpuLowerOptions::tma_copies (tma.cc), shared by
// the lowering and its tests.
//
// The hardware's rules (CUDA driver API, cuTensorMapEncodeTiled; PTX ISA,
// cp.async.bulk.tensor) that the compiler can decide:
//   * tensor rank 1..5; every global stride a multiple of 16 bytes, which for
//     a dense row-major tensor holds for every shape iff the last dim is
//     static and its row is a multiple of 16 bytes (the runtime checks again,
//     and the base's 16-byte alignment is a PTR_ALIGNED launch guard);
//   * box extents 1..256 per dim, the innermost box row a multiple of 16
//     bytes and, with a swizzle, at most SwizzleRowBytes;
//   * the destination: box elements land in row-major box order (then
//     swizzled), starting 128-byte aligned, so the shared tile must be exactly
//     that layout: the region's kept extents in order, trailing dims whole;
//     a row-padded buffer (the mma.sync operands' odd-chunk rows) is written
//     with a box as wide as the padded row: the pad columns receive the next
//     global columns (or zeros past the edge), which nobody reads;
//   * at most 2^20 - 1 bytes complete on one mbarrier phase.
// Elements outside the tensor are zero-filled by the hardware, so partial
// tiles need no guards. A copy that does not qualify stays cp.async; the
// reason goes to the kernel's notes.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/swizzle.h"

namespace tl::gpu {

struct TmaCopyQuery {
  ir::DType dtype = ir::DType::kF32;
  std::vector<std::optional<int64_t>> tensor_shape;  // per tensor dim: static extent, or nullopt (a symbol)
  std::vector<int64_t> src_extents;                  // the copy's extent per tensor dim
  std::vector<int64_t> dst_extents;                  // the destination region's kept extents, in order
  std::vector<int64_t> dst_shape;                    // the destination buffer's trailing dims (as many as dst_extents), padded as stored
  bool dst_region_whole = false;  // the destination region is [stage?, 0:d0, 0:d1, ...] of whole trailing dims
  bool dst_aligned = false;       // the destination's first element is 128-byte aligned (swizzle: its atom)
  SmemSwizzle swizzle = SmemSwizzle::kNone;
};

struct TmaCopyPlan {
  bool ok = false;
  std::string why_not;        // when !ok: the first rule it breaks, with the numbers
  std::vector<int64_t> box;   // per tensor dim, outermost first
  int64_t bytes = 0;          // transaction bytes of the box
};

TmaCopyPlan PlanTmaCopy(const TmaCopyQuery& q);

// CU_TENSOR_MAP_DATA_TYPE_* for a dtype of that byte width and kind, or -1
// (bool). TMA only moves bytes, so signed 8/16-bit integers use the unsigned
// types of their width.
int TensorMapDataType(ir::DType t);

}  // namespace tl::gpu
