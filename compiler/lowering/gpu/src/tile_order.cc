// The persistent tile order: see lower.h (PersistentTileOrder) for the
// contract.
//
// Why. A persistent kernel's blocks run their tiles in a static round robin
// (block c: tiles c, c + G, ...). Where the tiles' work differs -- causal
// FlashAttention: the query block x = 0 has X k-steps, x = X - 1 one -- the
// launch's order (x fastest) gives block c the x's (c + jG) % X, e.g.
// (c + 4j) % 32 for 32 query blocks on 132 blocks: some blocks get mostly
// heavy tiles, and the last of them finishes ~12 % after the average (the
// hardware's dynamic scheduler of a non-persistent grid balances that by
// itself, so the persistent kernel was slower on the H200). Interleaving the
// heavy and light tiles along t evens the sums out: the snake runs x up and
// down on alternate r; sections keep a few r's tiles of one x together, the
// heaviest x first, so consecutive blocks take like tiles and later rounds
// the lighter ones; the diagonal shifts x by r, for grids where G is a
// multiple of X (FA3's 192-row tile: 22 query blocks on 132 blocks), in
// which the block order -- and the snake -- give each block ONE x for all
// its tiles (1.84 of the ideal makespan there; the diagonal 1.06).
// Risk: the choice rests on a model -- a tile costs its k-steps + 1 -- not
// on time; L2 hits, memory stalls and the epilogue make real tiles differ,
// and no static order follows them as the hardware's dynamic one does. The
// L2 side is bounded (ChoosePersistentTileOrder), not modelled.
#include <algorithm>

#include "simt_build.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

using namespace simt_build;  // I, V, Bin, Add, Mul, TDiv, TMod

using Kind = PersistentTileOrder::Kind;

// Beyond this many tiles the chooser keeps the block order (its simulation
// is linear in the tiles, per candidate; a compile-time bound).
constexpr int64_t kMaxSimulatedTiles = int64_t{1} << 22;

// Tile t's rank (0 = the heaviest x) and r under a non-block order.
std::pair<int64_t, int64_t> RankOf(const PersistentTileOrder& o, int64_t X, int64_t t) {
  if (o.kind == Kind::kSnake) {
    const int64_t r = t / X, i = t % X;
    return {r % 2 ? X - 1 - i : i, r};
  }
  if (o.kind == Kind::kDiagonal) {
    const int64_t r = t / X;
    return {(t % X + r) % X, r};
  }
  const int64_t hs = o.section;
  return {t % (X * hs) / hs, t / (X * hs) * hs + t % hs};
}

// The work is the same for every x, or falls (true: the heaviest first) or
// rises (false) with x; nullopt if neither: no order here ranks it.
std::optional<bool> HeaviestFirst(const std::vector<int64_t>& work) {
  bool falls = true, rises = true;
  for (size_t i = 1; i < work.size(); ++i) {
    falls = falls && work[i] <= work[i - 1];
    rises = rises && work[i] >= work[i - 1];
  }
  if (falls) return true;
  if (rises) return false;
  return std::nullopt;
}

}  // namespace

std::string PersistentTileOrderName(const PersistentTileOrder& o) {
  std::string n = o.kind == Kind::kBlockOrder ? "block order"
                  : o.kind == Kind::kSnake    ? "snake"
                  : o.kind == Kind::kDiagonal ? "diagonal"
                                              : "sections of " + std::to_string(o.section);
  return o.kind != Kind::kBlockOrder && o.heaviest_last ? n + " (heaviest x last)" : n;
}

std::pair<int64_t, int64_t> PersistentTileOf(const PersistentTileOrder& o, int64_t X, int64_t R, int64_t t) {
  (void)R;
  if (o.kind == Kind::kBlockOrder) return {t % X, t / X};
  const auto [rank, r] = RankOf(o, X, t);
  return {o.heaviest_last ? X - 1 - rank : rank, r};
}

int64_t PersistentMakespan(const PersistentTileOrder& o, const std::vector<int64_t>& work, int64_t R, int64_t G) {
  const int64_t X = static_cast<int64_t>(work.size());
  std::vector<int64_t> load(static_cast<size_t>(std::max<int64_t>(G, 1)), 0);
  for (int64_t t = 0; t < X * R; ++t) load[static_cast<size_t>(t % G)] += work[static_cast<size_t>(PersistentTileOf(o, X, R, t).first)] + 1;
  return *std::max_element(load.begin(), load.end());
}

int64_t PersistentWindowSpan(const PersistentTileOrder& o, int64_t X, int64_t R, int64_t G) {
  const int64_t tiles = X * R, W = std::min(G, tiles);
  std::vector<int64_t> in(static_cast<size_t>(R), 0);
  std::vector<int64_t> r_of(static_cast<size_t>(tiles));
  int64_t distinct = 0, most = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t r = r_of[static_cast<size_t>(t)] = PersistentTileOf(o, X, R, t).second;
    distinct += in[static_cast<size_t>(r)]++ == 0;
    if (t >= W) distinct -= --in[static_cast<size_t>(r_of[static_cast<size_t>(t - W)])] == 0;
    most = std::max(most, distinct);
  }
  return most;
}

// The rule: among the block order, the snake, the diagonal and the sections
// (every section size s > 1 dividing R), the one with the smallest simulated
// makespan (PersistentMakespan; ties: that order), taken only where it is at
// least 1 % below the block order's -- a smaller gain is within what the
// model cannot see, and the block order is the measured baseline -- and
// only among the orders whose G consecutive tiles span at most twice the r
// the block order's do (PersistentWindowSpan). That bound is the L2's: the
// blocks in flight read what their r names (FlashAttention's K and V of a
// head, 2 MB at 4096 x 128 bf16; the H200's L2 is ~50 MB); the block order
// holds ~G / X + 1 r in flight, the balanced orders a few more, while "x
// slowest over all r" -- which balances best -- would stream G heads' K and
// V from HBM at once. Block order too where nothing varies (every GEMM, non-
// causal attention: the generated code stays as it was), where each block
// runs one tile at most, or where the work is not monotone in x (no
// permutation here ranks it).
PersistentTileOrder ChoosePersistentTileOrder(const std::vector<int64_t>& work, int64_t R, int64_t G) {
  const PersistentTileOrder block;
  const int64_t X = static_cast<int64_t>(work.size());
  if (X < 2 || R < 2 || G < 1 || X * R <= G || X * R > kMaxSimulatedTiles) return block;
  if (std::all_of(work.begin(), work.end(), [&](int64_t w) { return w == work[0]; })) return block;
  const std::optional<bool> first = HeaviestFirst(work);
  if (!first) return block;
  const int64_t base = PersistentMakespan(block, work, R, G);
  const int64_t span_bound = 2 * PersistentWindowSpan(block, X, R, G);
  std::vector<PersistentTileOrder> candidates{{Kind::kSnake, 0, !*first}, {Kind::kDiagonal, 0, !*first}};
  for (int64_t s = 2; s <= R; ++s) {  // G tiles of a section of s span >= min(s, G) r: skip the hopeless
    if (R % s == 0 && std::min(s, G) <= span_bound) candidates.push_back({Kind::kSections, s, !*first});
  }
  PersistentTileOrder best = block;
  int64_t best_makespan = base;
  for (const PersistentTileOrder& c : candidates) {
    if (PersistentWindowSpan(c, X, R, G) > span_bound) continue;
    const int64_t m = PersistentMakespan(c, work, R, G);
    if (m < best_makespan) best = c, best_makespan = m;
  }
  return best_makespan * 100 <= base * 99 ? best : block;
}

SBlock PersistentTileLets(const std::vector<std::string>& block_vars, const std::vector<int64_t>& grid,
                          const PersistentTileOrder& o) {
  SBlock out;
  const Expr t = V("tl_tile");
  if (o.kind == Kind::kBlockOrder) {  // (the form every persistent kernel had before the other orders)
    int64_t below = 1;
    for (size_t d = 0; d < block_vars.size(); ++d) {
      Expr v = below == 1 ? t : ir::MakeCall(ir::CallOp::kTruncDiv, {t, I(below)});
      if (d + 1 < grid.size()) v = ir::MakeCall(ir::CallOp::kTruncMod, {v, I(grid[d])});
      out.push_back(SStmt{SLet{block_vars[d], ir::DType::kI32, v}});
      below *= grid[d];
    }
    return out;
  }
  // As RankOf: a few integer operations per tile, the divisors constants.
  const int64_t X = grid[0];
  const Expr rest = V("tl_tile_rest");
  Expr rank;
  if (o.kind == Kind::kSnake) {
    out.push_back(SStmt{SLet{"tl_tile_rest", ir::DType::kI32, TDiv(t, X)}});
    const Expr i = TMod(t, X);  // i, or X - 1 - i on odd r: i + (r & 1) * (X - 1 - 2i)
    rank = Add(i, Mul(Bin(ir::BinaryOp::kBitAnd, rest, I(1)), Bin(ir::BinaryOp::kSub, I(X - 1), Mul(I(2), i))));
  } else if (o.kind == Kind::kDiagonal) {
    out.push_back(SStmt{SLet{"tl_tile_rest", ir::DType::kI32, TDiv(t, X)}});
    rank = TMod(Add(TMod(t, X), rest), X);
  } else {
    const int64_t hs = o.section;
    out.push_back(SStmt{SLet{"tl_tile_rest", ir::DType::kI32, Add(Mul(TDiv(t, X * hs), I(hs)), TMod(t, hs))}});
    rank = TDiv(TMod(t, X * hs), hs);
  }
  out.push_back(SStmt{SLet{block_vars[0], ir::DType::kI32, o.heaviest_last ? Bin(ir::BinaryOp::kSub, I(X - 1), rank) : rank}});
  int64_t below = 1;
  for (size_t d = 1; d < block_vars.size(); ++d) {
    Expr v = TDiv(rest, below);
    if (d + 1 < grid.size()) v = TMod(v, grid[d]);
    out.push_back(SStmt{SLet{block_vars[d], ir::DType::kI32, v}});
    below *= grid[d];
  }
  return out;
}

}  // namespace tl::gpu
