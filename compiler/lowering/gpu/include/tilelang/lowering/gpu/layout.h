// Fragment layouts for the GPU lowering: which thread holds which element of
// a fragment, in which register slot.
//
// One family covers every layout this lowering uses (the default layout, the
// SIMT GEMM accumulator, and the projected row-vector layout of a reduction):
//
//   A fragment of shape [d0, ..., d{n-1}] is viewed as `rows x cols`, rows =
//   d0 * ... * d{n-2} (1 for rank 1), cols = d{n-1}. The block's T threads are
//   `C` column blocks of `R` row groups of `g` lanes (T = C * R * g, g a power
//   of two; C = 1 except for the 2-D warp grid of a tensor-core accumulator):
//
//     thread(row, col) = ((col / (v * g)) % C) * R * g + (row % R) * g + (col / v) % g
//     slot(row, col)   = (row / R) * col_slots + (col / (v * g * C)) * v + col % v
//     row_slots = ceil(rows / R), col_slots = ceil(cols / (v * g * C)) * v
//
//   so each thread owns contiguous runs of `v` columns, strided by v * g * C,
//   in the rows of its group; with C > 1 the runs of v * g columns are dealt
//   round-robin to the C blocks of R * g threads, so a row is spread over C
//   blocks (warps) as well as over g lanes. Extents are rounded up: (thread, slot) pairs past
//   the shape own nothing and are guarded in generated code, so no shape and
//   thread count is ever rejected (100 x 7 over 128 threads works).
//
//   Row blocks (H > 1; H = 1 is the map above): the R groups are taken Hp
//   at a time (R a multiple of Hp), and each such set of Hp groups owns H
//   blocks of Hp consecutive rows, one per row slot:
//     group(row) = ((row % (R * H)) / (Hp * H)) * Hp + row % Hp
//     row slot   = (row / (R * H)) * H + (row % (Hp * H)) / Hp
//     row_slots  = ceil(rows / (R * H)) * H
//   (thread and slot formulas as above with `row % R` -> group(row) and
//   `row / R` -> row slot). This is wgmma's accumulator: warp w's 32 lanes
//   own rows 16 w .. 16 w + 15 (H = 2 blocks of Hp = 8 rows), where the H = 1
//   map would give row 8 to the next warp.
//
//   A *lane-replicated* layout (cols == 1, `replicated`) is the projection of
//   such a layout onto its rows: element `row` is held by all g lanes of group
//   row % R, at slot row / R. It is what a row reduction produces and what a
//   row vector read inside a 2-D T.Parallel loop needs.
//
// Invariants: T = C * R * g; g is a power of two; v >= 1; replicated implies
// cols == 1 and C == 1 (row vectors and reductions of a C > 1 layout are kept
// in shared memory by InferGpuLayouts). Warp shuffles can combine the g lanes of a group when g is at
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
  int64_t C = 1;  // column blocks (see above)
  int64_t H = 1, Hp = 1;  // row blocks (see above); Hp is only meaningful when H > 1
  bool replicated = false;

  int64_t row_slots() const { return (rows + R * H - 1) / (R * H) * H; }
  // The group (0 .. R-1) holding `row`, and its row slot.
  int64_t GroupOf(int64_t row) const {
    return H == 1 ? row % R : ((row % (R * H)) / (Hp * H)) * Hp + row % Hp;
  }
  int64_t RowSlotOf(int64_t row) const { return H == 1 ? row / R : (row / (R * H)) * H + (row % (Hp * H)) / Hp; }
  // The row of group `grp`'s row slot `rs` (inverse of the two above).
  int64_t RowOfGroup(int64_t grp, int64_t rs) const {
    if (H == 1) return rs * R + grp;
    return (rs / H) * (R * H) + (grp / Hp) * (Hp * H) + (rs % H) * Hp + grp % Hp;
  }
  int64_t col_slots() const { return replicated ? 1 : ((cols + v * g * C - 1) / (v * g * C)) * v; }
  int64_t slots() const { return row_slots() * col_slots(); }  // registers per thread

  // The (thread, slot) owning logical (row, col); with `replicated`, the
  // lowest lane of the group (see Owners()).
  int64_t Thread(int64_t row, int64_t col) const;
  int64_t Slot(int64_t row, int64_t col) const;
  // Every thread holding (row, col): one, or the g lanes of the group.
  std::vector<int64_t> Owners(int64_t row, int64_t col) const;
  // The element at (thread, slot), or nullopt for a padding slot.
  std::optional<std::pair<int64_t, int64_t>> Element(int64_t thread, int64_t slot) const;
  // The row of row-slot `rs` and the column of column-slot `cs` for thread
  // `t` (may be >= rows / cols: guard).
  int64_t RowOf(int64_t t, int64_t rs) const { return RowOfGroup((t % (R * g)) / g, rs); }
  int64_t ColOf(int64_t t, int64_t cs) const {
    return (cs / v) * (v * g * C) + ((t / (R * g)) % C) * (v * g) + (t % g) * v + cs % v;
  }

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

// The tensor-core (mma.sync m16n8kK) accumulator over a wm x wn warp grid
// (MmaWarpGrid): C = wn column blocks of R = 8 wm row groups of g = 4 lanes,
// runs of v = 2 columns. Lane l of warp w = wc * wm + wr holds rows
// (2j + h) * R + 8 wr + l / 4 and columns 8 (n wn + wc) + 2 (l % 4) + {0, 1},
// exactly the mma C fragment of its m-tile j (h: upper/lower 8 rows) and
// n-tile n: warp (wr, wc) owns M / wm rows and N / wn columns, so it reads
// only those rows of A and columns of B. `max_warp_cols` 1 stacks the warps
// along M (a row then lives in one quad of lanes). Valid when
// MmaAccumulatorFits (with the same max_warp_cols).
FragmentLayout MmaAccumulatorLayout(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols = 1 << 30);
bool MmaAccumulatorFits(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols = 1 << 30);
// The warp grid: wm * wn = T / 32 warps with M a multiple of 16 wm and N of
// 8 wn, wn <= max_warp_cols, minimizing the operand elements a warp reads
// per k (M / wm + N / wn; ties: more warps along M). False if none fits.
bool MmaWarpGrid(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols, int64_t* wm, int64_t* wn);

// The wgmma (m64nNk16) accumulator over T / 128 warpgroups stacked along M:
// g = 4 lanes, v = 2, R = 8 T / 32 groups, H = 2 row blocks of Hp = 8 rows.
// Lane l of warp w (w = 4 wg + wi, warpgroup wg) holds rows
// 16 (T / 32) j + 16 w + 8 h + l / 4 (row slot 2 j + h) and columns
// 8 n + 2 (l % 4) + {0, 1} (column slots 2 n + {0, 1}): exactly the D
// fragment of warpgroup wg's instruction for m-tile j (its 64 rows are
// 64 (j T / 128 + wg) ...). Valid when WgmmaAccumulatorFits.
FragmentLayout WgmmaAccumulatorLayout(int64_t m, int64_t n, int64_t threads);
// T a multiple of 128, M of 64 T / 128, N of 8.
bool WgmmaAccumulatorFits(int64_t m, int64_t n, int64_t threads);

// The AMD matrix-core accumulator (SAmdMma, amd_matrix.h): R = T / 16 row
// groups of g = 16 lanes, v = 1: lane l of wavefront w (W lanes, H = W / 16)
// holds rows (t * P + p) * R + w * H + l / 16 and columns 16 n + l % 16 of the
// 16x16 tile (t, n), register p < P (MFMA: P = 4, WMMA: P = 8) -- exactly the
// D registers of the instruction under the row assignment of amd_matrix.h.
// Wavefronts are stacked along M. Valid when AmdMatrixAccumulatorFits.
FragmentLayout AmdMatrixAccumulatorLayout(int64_t m, int64_t n, int64_t threads);
// T a multiple of the wavefront W, M a multiple of P * T / 16 (MFMA: T / 4,
// WMMA: T / 2), N a multiple of 16. `wave` 64 = MFMA, 32 = WMMA.
bool AmdMatrixAccumulatorFits(int64_t m, int64_t n, int64_t threads, int64_t wave);

// The projection of `l` onto its rows (drops the last dim), replicated over
// each group's lanes. `shape` is the projected logical shape.
FragmentLayout ProjectRows(const FragmentLayout& l, const std::vector<int64_t>& shape);

}  // namespace tl::gpu
