// Fragment layouts for the GPU lowering: which thread holds which element of
// a fragment, in which register slot.
//
// One family covers every layout this lowering uses (the default layout, the
// SIMT GEMM accumulator, and the projected row-vector layout of a reduction):
//
//   A fragment of shape [d0, ..., d{n-1}] is viewed as `rows x cols`, rows =
//   d0 * ... * d{n-2} (1 for rank 1), cols = d{n-1}. The block's T threads are
//   `R` row groups of `g` lanes (T = R * g, g a power of two dividing T):
//
//     thread(row, col) = (row % R) * g + (col / v) % g
//     slot(row, col)   = (row / R) * col_slots + (col / (v * g)) * v + col % v
//     row_slots = ceil(rows / R), col_slots = ceil(cols / (v * g)) * v
//
//   so each thread owns contiguous runs of `v` columns, strided by v * g, in
//   the rows of its group. Extents are rounded up: (thread, slot) pairs past
//   the shape own nothing and are guarded in generated code, so no shape and
//   thread count is ever rejected (100 x 7 over 128 threads works).
//
//   A *lane-replicated* layout (cols == 1, `replicated`) is the projection of
//   such a layout onto its rows: element `row` is held by all g lanes of group
//   row % R, at slot row / R. It is what a row reduction produces and what a
//   row vector read inside a 2-D T.Parallel loop needs.
//
// Invariants: T = R * g; g is a power of two; v >= 1; replicated implies
// cols == 1. Warp shuffles can combine the g lanes of a group when g is at
// most the warp (GpuLowerOptions::warp_size: 32, or 64 on AMD CDNA; groups
// are aligned to g, so they never straddle a warp); larger groups combine
// through shared memory.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tl::gpu {

struct FragmentLayout {
  std::vector<int64_t> shape;  // logical shape of the fragment
  int64_t threads = 1;         // T
  int64_t rows = 1, cols = 1;
  int64_t R = 1, g = 1, v = 1;
  bool replicated = false;

  int64_t row_slots() const { return (rows + R - 1) / R; }
  int64_t col_slots() const { return replicated ? 1 : ((cols + v * g - 1) / (v * g)) * v; }
  int64_t slots() const { return row_slots() * col_slots(); }  // registers per thread

  // The (thread, slot) owning logical (row, col); with `replicated`, the
  // lowest lane of the group (see Owners()).
  int64_t Thread(int64_t row, int64_t col) const;
  int64_t Slot(int64_t row, int64_t col) const;
  // Every thread holding (row, col): one, or the g lanes of the group.
  std::vector<int64_t> Owners(int64_t row, int64_t col) const;
  // The element at (thread, slot), or nullopt for a padding slot.
  std::optional<std::pair<int64_t, int64_t>> Element(int64_t thread, int64_t slot) const;
  // The column of column-slot `cs` for lane `lane` (may be >= cols: guard).
  int64_t ColOf(int64_t lane, int64_t cs) const { return (cs / v) * (v * g) + lane * v + cs % v; }

  // "rows x cols over R x g (v=4)" / "... replicated".
  std::string ToString() const;
  bool operator==(const FragmentLayout&) const = default;
};

// rows x cols of a shape (rows = product of all but the last dim).
void RowsCols(const std::vector<int64_t>& shape, int64_t* rows, int64_t* cols);

// The largest power of two dividing `t` that is <= `limit` (>= 1).
int64_t Pow2DivisorAtMost(int64_t t, int64_t limit);

// The layout of a fragment nobody constrains: runs of v = 4 columns (1 when
// cols < 4), g lanes per row = enough to cover a row once, capped by T.
FragmentLayout DefaultLayout(const std::vector<int64_t>& shape, int64_t threads);

// The SIMT FMA GEMM accumulator: C[M, N] over a tm x tn thread grid
// (v = 1, g = tn, R = tm); each thread owns rows ty + tm*a and columns
// tx + tn*b, a near-square sub-tile. Strided ownership makes a warp's reads of
// one shared-memory row of B contiguous (no bank conflicts).
FragmentLayout GemmAccumulatorLayout(int64_t m, int64_t n, int64_t threads);

// The tensor-core (mma.sync m16n8kK) accumulator: C[M, N] with R = T / 4
// row groups of g = 4 lanes, runs of v = 2 columns: lane l of warp w holds
// rows (2j + h) * R + 8w + l / 4 and columns 8n + 2 (l % 4) + {0, 1}, exactly
// the mma C fragment of m-tile j (h: its upper/lower 8 rows) and n-tile n.
// Warps are stacked along M. Valid when MmaAccumulatorFits.
FragmentLayout MmaAccumulatorLayout(int64_t m, int64_t n, int64_t threads);
// T a multiple of 32, M a multiple of 2R = T / 2, N a multiple of 8.
bool MmaAccumulatorFits(int64_t m, int64_t n, int64_t threads);

// The projection of `l` onto its rows (drops the last dim), replicated over
// each group's lanes. `shape` is the projected logical shape.
FragmentLayout ProjectRows(const FragmentLayout& l, const std::vector<int64_t>& shape);

}  // namespace tl::gpu
