// FragmentLayout: see layout.h for the map and its invariants.
#include "tilelang/lowering/gpu/layout.h"

#include <cstdlib>

namespace tl::gpu {

void RowsCols(const std::vector<int64_t>& shape, int64_t* rows, int64_t* cols) {
  *rows = 1;
  *cols = shape.empty() ? 1 : shape.back();
  for (size_t i = 0; i + 1 < shape.size(); ++i) *rows *= shape[i];
}

int64_t Pow2DivisorAtMost(int64_t t, int64_t limit) {
  int64_t p = 1;
  while (t % (p * 2) == 0 && p * 2 <= limit) p *= 2;
  return p;
}

int64_t FragmentLayout::Thread(int64_t row, int64_t col) const {
  if (replicated) return GroupOf(row) * g;
  return ((col / (v * g)) % C) * R * g + GroupOf(row) * g + (col / v) % g;
}

int64_t FragmentLayout::Slot(int64_t row, int64_t col) const {
  if (replicated) return RowSlotOf(row);
  return RowSlotOf(row) * col_slots() + (col / (v * g * C)) * v + col % v;
}

std::vector<int64_t> FragmentLayout::Owners(int64_t row, int64_t col) const {
  if (!replicated) return {Thread(row, col)};
  std::vector<int64_t> out;
  for (int64_t lane = 0; lane < g; ++lane) out.push_back(GroupOf(row) * g + lane);
  return out;
}

std::optional<std::pair<int64_t, int64_t>> FragmentLayout::Element(int64_t thread, int64_t slot) const {
  if (thread < 0 || thread >= threads || slot < 0 || slot >= slots()) return std::nullopt;
  const int64_t rs = slot / col_slots(), cs = slot % col_slots();
  const int64_t row = RowOf(thread, rs);
  const int64_t col = replicated ? 0 : ColOf(thread, cs);
  if (row >= rows || col >= cols) return std::nullopt;
  return std::make_pair(row, col);
}

std::string FragmentLayout::ToString() const {
  std::string s = std::to_string(rows) + "x" + std::to_string(cols) + " over " +
                  (C > 1 ? std::to_string(C) + "x" : std::string()) + std::to_string(R) + "x" + std::to_string(g) + " (v=" + std::to_string(v) + ", " + std::to_string(slots()) + " slots)";
  if (H > 1) s += " rows in " + std::to_string(H) + " blocks of " + std::to_string(Hp);
  if (replicated) s += " replicated";
  return s;
}

FragmentLayout DefaultLayout(const std::vector<int64_t>& shape, int64_t threads) {
  FragmentLayout l;
  l.shape = shape;
  l.threads = threads;
  RowsCols(shape, &l.rows, &l.cols);
  l.v = l.cols >= 4 ? 4 : 1;
  const int64_t runs = (l.cols + l.v - 1) / l.v;
  int64_t want = 1;
  while (want < runs) want *= 2;  // lanes to cover a row once
  l.g = Pow2DivisorAtMost(threads, want);
  l.R = threads / l.g;
  return l;
}

bool MmaWarpGrid(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols, int64_t* wm, int64_t* wn) {
  if (threads < 32 || threads % 32 != 0 || m <= 0 || n <= 0) return false;
  const int64_t warps = threads / 32;
  int64_t best = -1;
  for (int64_t c = 1; c <= warps && c <= max_warp_cols; ++c) {
    const int64_t r = warps / c;
    if (warps % c != 0 || m % (16 * r) != 0 || n % (8 * c) != 0) continue;
    // Shared-memory operand elements one warp reads per k: its A rows and B columns.
    const int64_t cost = m / r + n / c;
    if (best < 0 || cost < best) {
      best = cost;
      *wm = r;
      *wn = c;
    }
  }
  return best >= 0;
}

bool MmaAccumulatorFits(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols) {
  int64_t wm = 0, wn = 0;
  return MmaWarpGrid(m, n, threads, max_warp_cols, &wm, &wn);
}

FragmentLayout MmaAccumulatorLayout(int64_t m, int64_t n, int64_t threads, int64_t max_warp_cols) {
  int64_t wm = threads / 32, wn = 1;  // (stacked along M when nothing fits; callers check Fits)
  MmaWarpGrid(m, n, threads, max_warp_cols, &wm, &wn);
  FragmentLayout l;
  l.shape = {m, n};
  l.threads = threads;
  l.rows = m;
  l.cols = n;
  l.g = 4;
  l.R = 8 * wm;
  l.C = wn;
  l.v = 2;
  return l;
}

bool WgmmaAccumulatorFits(int64_t m, int64_t n, int64_t threads) {
  return threads >= 128 && threads % 128 == 0 && m > 0 && m % (64 * (threads / 128)) == 0 && n > 0 && n % 8 == 0;
}

FragmentLayout WgmmaAccumulatorLayout(int64_t m, int64_t n, int64_t threads) {
  FragmentLayout l;
  l.shape = {m, n};
  l.threads = threads;
  l.rows = m;
  l.cols = n;
  l.g = 4;
  l.v = 2;
  l.R = 8 * (threads / 32);
  l.H = 2;
  l.Hp = 8;
  return l;
}

bool AmdMatrixAccumulatorFits(int64_t m, int64_t n, int64_t threads, int64_t wave) {
  const int64_t regs = wave == 64 ? 4 : 8;
  return (wave == 64 || wave == 32) && threads >= wave && threads % wave == 0 && m > 0 &&
         m % (regs * threads / 16) == 0 && n > 0 && n % 16 == 0;
}

FragmentLayout AmdMatrixAccumulatorLayout(int64_t m, int64_t n, int64_t threads) {
  FragmentLayout l;
  l.shape = {m, n};
  l.threads = threads;
  l.rows = m;
  l.cols = n;
  l.g = 16;
  l.R = threads / 16;
  l.v = 1;
  return l;
}

FragmentLayout GemmAccumulatorLayout(int64_t m, int64_t n, int64_t threads) {
  FragmentLayout best;
  int64_t best_cost = -1;
  for (int64_t tn = 1; tn <= threads; tn *= 2) {
    if (threads % tn != 0) break;
    const int64_t tm = threads / tn;
    const int64_t ra = (m + tm - 1) / tm, rb = (n + tn - 1) / tn;
    // Registers per thread first, then squareness (loads per FMA).
    const int64_t cost = ra * rb * 1024 + std::llabs(ra - rb);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      best.g = tn;
      best.R = tm;
    }
  }
  best.shape = {m, n};
  best.threads = threads;
  best.rows = m;
  best.cols = n;
  best.v = 1;
  return best;
}

FragmentLayout ProjectRows(const FragmentLayout& l, const std::vector<int64_t>& shape) {
  FragmentLayout p = l;
  p.shape = shape;
  p.cols = 1;
  p.v = 1;
  p.replicated = true;
  return p;
}

}  // namespace tl::gpu
