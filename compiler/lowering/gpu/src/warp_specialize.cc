// WarpSpecializeGemmPipeline: see lower.h for the contract.
//
// The k-loop LowerToSimt makes of a pipelined GEMM on sm_90a (TMA copies,
// one wgmma group in flight) is, at the top level of the kernel:
//
//   var phase; mbarrier.init bar[S]                 (+ a block barrier)
//   pre...                                          (e.g. clearing C)
//   if (k0 + s < stop) { tid 0: boxes -> stage s; arrive bar[s] }; commit    s < S - 1
//   for k in [k0, stop) {
//     let stage = (k - k0) % S; wait bar[stage] (phase bit); flip the bit
//     cp.async.wait S - 2                           (no cp.async: nothing)
//     wgmma (wait_group 1)                          (or a loop of units)
//     barrier                                       everyone retired k - 1's group
//     if (k + S - 1 < stop) { tid 0: boxes -> stage (k + S - 1 - k0) % S; arrive }
//     commit
//   }
//   wait_group 0; cp.async.wait 0; barrier
//   post...                                         (the epilogue)
//
// Its one block barrier per k-step is what the warp-specialized form removes
// (it was the top stall on the H200). The producer's loop is the refill with
// k replaced by k - (S - 1), so it issues iteration k into stage (k - k0) % S,
// each after the consumers released that stage:
//
//   mbarrier.init full[S] (1 arrival + the boxes' bytes), empty[S] (T / 32 arrivals)
//   if (tid >= T) {                                 producer warpgroup
//     setmaxnreg.dec P
//     if (tid == T) for k in [k0, stop) {
//       i = k - k0; if (i >= S) wait empty[i % S] parity (i / S + 1) & 1
//       boxes -> stage i % S on full[i % S]; arrive full[i % S]
//     }
//   } else {                                        the program's threads
//     setmaxnreg.inc C
//     pre...
//     for k in [k0, stop) {
//       let stage; wait full[stage] parity ((k - k0) / S) & 1
//       wgmma (wait_group 1: k - 1's group retired)
//       if (k > k0 && lane == 0) arrive empty[(k - 1 - k0) % S]
//     }
//     wait_group 0; bar.sync 1, T
//     post...                                       barriers -> bar.sync 1, T
//   }
//
// Invariants. A stage is refilled only after every consumer warp arrived on
// its empty barrier, which each does after its wait_group 1 retired the only
// group that read it (the producer's parity names the phase of the release
// of iteration i - S). Every issued iteration is waited for by every consumer
// before it leaves the loop, so no TMA write is outstanding when the epilogue
// (whose tile may take a stage buffer's memory) starts; the named barrier
// after wait_group 0 is the old block barrier among the threads that still
// read the stages. The producer falls through to the end of the kernel.
// Registers: with setmaxnreg in the kernel, ptxas fixes the count at entry
// to R = min(65536 / (threads * min_blocks) (multiple of 8), C), the pool the
// roles share: P * 128 + C * T <= R * (T + 128).
// Epilogue (GpuLowerOptions::bulk_store; UseBulkEpilogue): the staged
// tile's copy to global memory in post... becomes warp 0's per-row bulk
// copies (cp.async.bulk, committed). Persistent: their lanes wait (.read)
// for the previous tile's copies right before the post-drain bar.sync 1, T
// -- the barrier ahead of the next writes of the tile -- and for completion
// after the tile loop, so a tile's store runs under the next tile's k-loop;
// non-persistent: waited for (.read) right after the commit.
//
// The synchronous-compute form (WarpSpecializeSyncLoop: no deferred wgmma,
// e.g. FlashAttention) starts from the k-loop the lowering makes when the
// compute waits for its own wgmma groups:
//
//   for k in [k0, stop) {
//     let stage; wait bar[stage] (phase bit); flip the bit; cp.async.wait
//     barrier                                       (fence.proxy.async first)
//     if (k + S - 1 < stop) { tid 0: boxes -> stage (k + S - 1 - k0) % S; arrive }
//     commit
//     compute...                                    wgmma units (wait_group 0),
//   }                                               register math, shuffles
//   [wait_group 0]; cp.async.wait 0; barrier; post...
//
// The producer is the GEMM form's; the consumers run pre..., then
// bar.sync 1, T (its proxy fence publishes the cooperative copies of pre --
// FlashAttention's Q tile -- to every consumer and to the wgmma's async
// proxy), and per k-step: wait full[stage] parity ((k - k0) / S) & 1,
// compute..., lane 0 of each warp arrives on empty[stage]. After the loop
// bar.sync 1, T and post... (barriers named).
// Invariants. The compute reads a stage through wgmma units that end in
// wait_group 0 (.sync.aligned: every lane of the warp is past it) -- on every
// path through the compute (GroupsLeftInFlight: the overlap loop issues its
// gemms inside the branches of its step kinds) --, so at the
// end of the k-step no read of the stage is outstanding and the release may
// let the producer refill it; or also with plain loads (W4A16 prefill: the
// weight bytes decoded into wgmma's register operand A), and then EVERY
// consumer thread arrives on empty[stage] (count T, not T / 32) after its
// compute, so each thread's own loads are ordered before its own release
// (mbarrier.arrive has release semantics; the producer's wait acquires); it
// writes no shared memory in a stage's span
// (checked by offsets, so memory a dead buffer shares counts too), and
// neither does pre (the producer fills the stages meanwhile). When the
// compute writes no shared memory at all the consumers need no barrier in
// the k-loop: everything they share there is read-only (Q, the stages, each
// ordered by the barrier after pre or by full[stage]), so the warpgroups run
// independently. When it does (P in a shared tile), bar.sync 1, T takes the
// block barrier's place and the compute's barriers become named ones: the
// consumers keep exactly the barrier sequence they had, which ordered those
// writes before (the producer never touches those buffers).
// Persistent (persistent_blocks > 0; cuDNN's FlashAttention runs one block
// per SM): as the GEMM form, both roles loop over the tiles b, b + G, ...
// with the block indices as lets of the tile; the full and empty barriers'
// phases carry on through per-stage phase bits (a tile with no k-step
// touches no barrier). With GpuLowerOptions::persistent_ring (opt-in: no
// faster on the H200, 2026-12-05) the ring of stages continues across tiles
// (ShiftRing: k-step i of a tile uses
// stage (i + ring) % S, both roles advancing ring by the tile's k-steps, the
// lowering's stage indices -- truncmod(x - k0, S) -- rewritten, k's other uses
// left tile-local), so the producer streams the next tile's first stages
// under this tile's last k-steps and while the consumers run this tile's
// post... (O's epilogue) and the next one's pre... (its Q tile). By default
// every tile restarts at stage 0, and the next tile's first fill waits for
// the stage the last k-step used whenever (k-steps - 1) % S == 0
// (FlashAttention's overlap loop at S4096, 33 steps over 2 stages) -- which
// measured no slower: the consumers' epilogue covers those loads.
// A shared buffer of post... overlapping a stage's memory moves to its own
// (the producer writes the stages meanwhile); pre... already stays out of
// the stages. A named barrier ends each tile where pre... or post... touch
// shared memory: the next tile's pre... (the Q copy) must not overwrite a
// tile another consumer still reads in post... (O staged through Q's tile).
// Q by the producer (GpuLowerOptions::tma_pre_copies: the lowering made the
// Q copy a TMA issue + wait on a one-stage barrier of its own, q_full): the
// producer issues it per tile after the tile's first K/V fill (or alone for
// a tile with no k-step), the n-th load (n >= 1) after waiting parity
// (n - 1) & 1 of q_empty; the consumers wait q_full (its phase bit as
// lowered, carried across tiles) at the end of pre... and lane 0 of each
// warp arrives on q_empty right after the k-loop. Invariants: Q's memory
// (by offsets) is written only by that TMA and read only by the k-loop's
// compute (wgmma units retired within each k-step, or loads), so after the
// k-loop no read of it is outstanding and the next write waits for all T /
// 32 warps' arrivals; a warp is at most one q_full phase ahead of the
// slowest (the load n + 1 needs everyone's release n), so parity waits are
// exact. Anything else touching Q's memory (O staged through Q_s) refuses,
// and LowerToSimt lowers the kernel as without the option. pre... then
// touches no shared memory, so no barrier ends the tile (post...'s tiles are
// next written after the barrier that follows the next k-loop).
// Tile order: the block order (the first block index fastest) unless the
// k-loop's trip count differs between tiles -- causal FlashAttention, whose
// query block x has about X - x k-steps -- where the static round robin
// leaves some blocks mostly heavy tiles (~12 % over the average at 32 query
// blocks x 128 heads on 132 blocks; the hardware's dynamic schedule of the
// non-persistent grid balances them). TileOrderOf evaluates the trip count
// per first block index at compile time and ChoosePersistentTileOrder
// (tile_order.cc, which states the rule) may pick a balanced order: the
// snake, the diagonal, or sections of a few heads with the heaviest query
// blocks first.
// Both roles bind the block indices from that one order (a mismatch would
// feed one tile's K/V to another tile's compute, or deadlock on a k-step
// count the two disagree on). The GEMM form keeps the block order.
// Ping-pong (GpuLowerOptions::gemm_pingpong, persistent GEMM of a 128-thread
// block only): two consumer warpgroups on alternate tiles sharing one ring
// of stages across tiles, their k-loops ordered by named barriers 3/4 (the
// protocol and its proofs at PingpongGemm below).
#include <functional>
#include <type_traits>

#include "simt_build.h"
#include "simt_walk.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

using ir::Expr;

using namespace simt_build;  // I, Bin, Tid, ToI32

template <class T>
bool Has(const SBlock& b) {
  return Any(b, [](const SStmt& s) { return std::holds_alternative<T>(s.node); });
}
bool HasDeferredWgmma(const SBlock& b) {
  return Any(b, [](const SStmt& s) {
    const auto* w = std::get_if<SWgmma>(&s.node);
    return w && w->wait_pending > 0;
  });
}
// A buffer's bytes (sub-byte dtypes count a byte an element, as allocated).
int64_t BufferBytes(const SimtBuffer& b) { return b.elements * std::max(1, ir::BitWidth(b.dtype) / 8); }
// The registers the roles share (see the file comment): ptxas fixes the
// count at entry to cap = 65536 / (threads * min_blocks), a multiple of 8,
// for the `consumers` threads plus the 128-thread producer warpgroup; the
// producer gives back down to `dec`, the consumers take what that frees, at
// most 240. `entry` is ptxas' count at entry (what its resource report
// says): the cap, or the largest setmaxnreg.inc where that is lower (seen
// with ptxas 13.0). inc < dec: too many threads for the split.
struct RegisterSplit {
  int64_t dec, inc, entry;
};
RegisterSplit SplitRegisters(int64_t consumers, int64_t min_blocks) {
  const int64_t threads = consumers + 128, dec = 40;
  const int64_t cap = 65536 / (threads * min_blocks) / 8 * 8;
  const int64_t inc = std::min<int64_t>((cap * threads - 128 * dec) / consumers / 8 * 8, 240);
  return {dec, inc, std::min(cap, inc)};
}

// Every block barrier of `b` becomes a named barrier among `threads`.
void NameBarriers(SBlock& b, int64_t threads) {
  for (SStmt& s : b) {
    if (std::holds_alternative<SBarrier>(s.node)) s.node = SNamedBarrier{1, threads};
    if (auto* f = std::get_if<SFor>(&s.node)) NameBarriers(f->body, threads);
    if (auto* i = std::get_if<SIf>(&s.node)) {
      NameBarriers(i->then_body, threads);
      NameBarriers(i->else_body, threads);
    }
  }
}

// The names an expression reads.
void NamesOf(const Expr& e, std::set<std::string>* out) {
  ir::WalkExpr(e, [&](const Expr& x) {
    if (const auto* v = ir::As<ir::VarRef>(x)) out->insert(v->name);
  });
}

// `if (tl_tid == 0)` without an else: the lowering's guard of one-thread TMA statements.
bool IsThreadZeroGuard(const SIf& i) {
  const auto* b = ir::As<ir::Binary>(i.cond);
  if (!b || b->op != ir::BinaryOp::kEq || !i.else_body.empty()) return false;
  const auto* v = ir::As<ir::VarRef>(*b->lhs);
  return v && v->name == "tl_tid" && ir::FoldInt(*b->rhs) == std::optional<int64_t>(0);
}

// The refill block with `var` replaced by `by` and its thread-0 guards
// dropped (the producer's elected thread runs it); false if it holds
// anything but ifs, lets, TMA boxes and arrivals.
bool ProducerCopy(SBlock& b, const std::string& var, const Expr& by, std::set<std::string>* names) {
  auto sub = [&](Expr& e) {
    e = ir::FoldConstants(ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
      const auto* v = ir::As<ir::VarRef>(x);
      if (v && v->name == var) return ir::ExprDType(by) == v->dtype ? by : ir::MakeCast(v->dtype, by);
      return std::nullopt;
    }));
    NamesOf(e, names);
  };
  SBlock out;
  for (SStmt& s : b) {
    if (auto* i = std::get_if<SIf>(&s.node)) {
      if (IsThreadZeroGuard(*i)) {
        if (!ProducerCopy(i->then_body, var, by, names)) return false;
        for (SStmt& x : i->then_body) out.push_back(std::move(x));
        continue;
      }
      sub(i->cond);
      if (!ProducerCopy(i->then_body, var, by, names) || !ProducerCopy(i->else_body, var, by, names)) return false;
    } else if (auto* l = std::get_if<SLet>(&s.node)) {
      sub(l->value);
    } else if (auto* t = std::get_if<STmaLoad>(&s.node)) {
      for (Expr& c : t->coords) sub(c);
      sub(t->dst_index);
      sub(t->bar_index);
    } else if (auto* a = std::get_if<SMbarArrive>(&s.node)) {
      sub(a->index);
    } else {
      return false;
    }
    out.push_back(std::move(s));
  }
  b = std::move(out);
  return true;
}

// Persistent: the k-loop's trip count of the tiles whose first block index
// is x, for every x (work[x] of ChoosePersistentTileOrder): `lets` (the
// producer's, in order) and the loop's bounds evaluated with that index
// alone bound -- so nullopt where they read another block index or anything
// not static (a dynamic length: such a kernel keeps the block order).
std::optional<std::vector<int64_t>> TripCountsByFirstIndex(const SimtKernel& k, int64_t X, const SBlock& lets, const SFor& lp) {
  if (k.block_vars.empty() || X > (int64_t{1} << 16)) return std::nullopt;
  std::vector<int64_t> work;
  for (int64_t x = 0; x < X; ++x) {
    std::map<std::string, int64_t, std::less<>> env{{k.block_vars[0], x}};
    const ir::NameLookup lookup = [&](std::string_view n) -> std::optional<int64_t> {
      auto it = env.find(n);
      return it == env.end() ? std::nullopt : std::optional<int64_t>(it->second);
    };
    for (const SStmt& s : lets) {
      const auto* l = std::get_if<SLet>(&s.node);
      if (!l) continue;
      if (const std::optional<int64_t> v = ir::FoldInt(l->value, lookup)) env[l->name] = *v;
    }
    const std::optional<int64_t> start = ir::FoldInt(lp.start, lookup), stop = ir::FoldInt(lp.stop, lookup);
    if (!start || !stop) return std::nullopt;
    work.push_back(std::max<int64_t>(0, *stop - *start));
  }
  return work;
}

// Persistent: the tile order both roles use (PersistentTileLets of it binds
// the block indices in each role's tile loop). Risk: the producer and the
// consumers must map every tile alike -- a mismatch loads one tile's K/V for
// another's compute (wrong numbers) or issues a different number of k-steps
// than the consumers wait for (a deadlock) -- so it is chosen once, here,
// and handed to both.
PersistentTileOrder TileOrderOf(const SimtKernel& k, const std::vector<int64_t>& grid, int64_t tiles, int64_t G,
                                const SBlock& lets, const SFor& lp) {
  const std::optional<std::vector<int64_t>> work = TripCountsByFirstIndex(k, grid[0], lets, lp);
  if (!work) return {};
  return ChoosePersistentTileOrder(*work, tiles / grid[0], G);
}

// for tl_tile in [this block, tiles) step G (the tile loop's start is the launch's block index).
SStmt TileLoop(const SimtKernel& k, int64_t tiles, int64_t G, SBlock body) {
  const Expr b = k.block_vars.empty() ? I(0) : ir::MakeVar(k.block_vars[0], ir::DType::kI32);
  return SStmt{SFor{"tl_tile", b, I(tiles), I(G), false, std::move(body)}};
}

// How often expression e reads name n.
int CountName(const Expr& e, const std::string& n) {
  int c = 0;
  ir::WalkExpr(e, [&](const Expr& x) {
    const auto* v = ir::As<ir::VarRef>(x);
    c += v && v->name == n;
  });
  return c;
}
// The ring's stage of a tile-local k-step made global: every truncmod(x, S)
// of e whose x reads `kv` becomes truncmod(x + base, S) (the lowering's
// stage index of iteration k is truncmod(k - k0 [+ S - 1], S)). With `k0`
// only x = y - k0 -- PipelineAsyncCopies' StageOf shape -- is rewritten, and
// each other such truncmod counted in *stray. Returns how many reads of kv
// the rewritten truncmods hold.
int ShiftStageReads(Expr& e, const std::string& kv, const Expr& base, int64_t S, const Expr* k0, int* stray) {
  int inside = 0;
  e = ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
    const auto* c = ir::As<ir::Call>(x);
    if (!c || c->op != ir::CallOp::kTruncMod || c->args.size() != 2 || ir::FoldInt(c->args[1]) != std::optional<int64_t>(S)) {
      return std::nullopt;
    }
    const int n = CountName(c->args[0], kv);
    if (n == 0) return std::nullopt;
    if (k0) {
      const auto* sub = ir::As<ir::Binary>(c->args[0]);
      if (!sub || sub->op != ir::BinaryOp::kSub || !(*sub->rhs == *k0)) {
        ++*stray;
        return std::nullopt;
      }
    }
    inside += n;
    const ir::DType t = ir::ExprDType(c->args[0]);
    return ir::MakeCall(ir::CallOp::kTruncMod, {Bin(ir::BinaryOp::kAdd, c->args[0], CastTo(t, base)), c->args[1]});
  });
  return inside;
}
// ShiftStageReads of any truncmod shape; false where kv is read outside such
// a truncmod (a coordinate, which must stay tile-local: refused rather than
// guessed) -- the ping-pong GEMM's k-step and fill, which read k nowhere else.
bool ShiftStages(Expr& e, const std::string& kv, const Expr& base, int64_t S) {
  const int total = CountName(e, kv);
  int stray = 0;
  return ShiftStageReads(e, kv, base, S, nullptr, &stray) == total;
}
// ShiftStages on every expression of the statements a consumer k-step's
// wgmma unit (or loop of units) and its stage let are made of; false for
// any other statement or a k read outside a stage index.
bool ShiftStagesIn(SBlock& b, const std::string& kv, const Expr& base, int64_t S) {
  for (SStmt& s : b) {
    bool ok = true;
    if (auto* l = std::get_if<SLet>(&s.node)) {
      ok = ShiftStages(l->value, kv, base, S);
    } else if (auto* w = std::get_if<SWgmma>(&s.node)) {
      for (Expr& e : w->a.starts) ok = ok && ShiftStages(e, kv, base, S);
      for (Expr& e : w->b.starts) ok = ok && ShiftStages(e, kv, base, S);
    } else if (auto* f = std::get_if<SFor>(&s.node)) {
      ok = CountName(f->start, kv) == 0 && CountName(f->stop, kv) == 0 && CountName(f->step, kv) == 0 &&
           ShiftStagesIn(f->body, kv, base, S);
    } else if (auto* i = std::get_if<SIf>(&s.node)) {
      ok = CountName(i->cond, kv) == 0 && ShiftStagesIn(i->then_body, kv, base, S) && ShiftStagesIn(i->else_body, kv, base, S);
    } else if (!std::holds_alternative<SComment>(s.node) && !std::holds_alternative<SWgmmaWait>(s.node)) {
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}
// The producer's fill (ProducerCopy's output: lets, ifs, TMA boxes, the
// arrival) with the stage indices -- the boxes' destinations and barriers,
// the arrival's barrier -- made global; coordinates and guards stay
// tile-local. False where k reaches a stage index other than through a
// truncmod by S, or a stage index reads a let of the fill (which could
// carry k past the rewrite: refused, not followed).
bool ShiftFillStages(SBlock& b, const std::string& kv, const Expr& base, int64_t S, std::set<std::string>* lets) {
  auto stage = [&](Expr& e) {
    std::set<std::string> names;
    NamesOf(e, &names);
    for (const std::string& n : names) {
      if (lets->count(n)) return false;
    }
    return ShiftStages(e, kv, base, S);
  };
  for (SStmt& s : b) {
    bool ok = true;
    if (auto* l = std::get_if<SLet>(&s.node)) {
      lets->insert(l->name);
    } else if (auto* t = std::get_if<STmaLoad>(&s.node)) {
      ok = stage(t->dst_index) && stage(t->bar_index);
    } else if (auto* a = std::get_if<SMbarArrive>(&s.node)) {
      ok = stage(a->index);
    } else if (auto* i = std::get_if<SIf>(&s.node)) {
      ok = ShiftFillStages(i->then_body, kv, base, S, lets) && ShiftFillStages(i->else_body, kv, base, S, lets);
    }
    if (!ok) return false;
  }
  return true;
}
// The persistent ring's stage indices shifted in place (GpuLowerOptions::persistent_ring): the
// producer's fill by tl_ws_ring, the consumers' stage let and k-step statements by tl_ring -- every
// StageOf-shaped truncmod(x - k0, S) wherever it stands (a wgmma operand's start, a load's index);
// k read anywhere else (a causal mask's coordinate) stays tile-local. False (nothing changed) where
// one of them holds a truncmod by S of k in another shape (a stage index this would miss, read
// tile-local while the producer filled the shifted stage), the let is not one, or the fill has none:
// the stages then restart per tile.
bool ShiftRing(SBlock* fill, SLet* stage, SBlock* kstep, const SFor& lp, int64_t S) {
  SBlock f = *fill, ks = *kstep;
  SLet st = *stage;
  int stray = 0, in_fill = 0;
  MapExprs(f, [&](Expr& e) { in_fill += ShiftStageReads(e, lp.var, V("tl_ws_ring"), S, &lp.start, &stray); });
  const int in_let = ShiftStageReads(st.value, lp.var, V("tl_ring"), S, &lp.start, &stray);
  MapExprs(ks, [&](Expr& e) { ShiftStageReads(e, lp.var, V("tl_ring"), S, &lp.start, &stray); });
  if (stray != 0 || in_fill == 0 || in_let != 1) return false;
  *fill = std::move(f), *stage = std::move(st), *kstep = std::move(ks);
  return true;
}
// The persistent note's words on the ring.
std::string RingNote(bool persistent, bool ring, bool used) {
  if (!persistent || !ring) return "";
  return used ? ", the stages' ring continuing across tiles"
              : ", the stages restarting per tile (persistent_ring: a stage index not of the form (k - k0) % S)";
}
// The ring's position after a tile: `var` = (var + the tile's k-steps) % S (none where stop <= start).
SStmt AdvanceRing(const std::string& var, const SFor& lp, int64_t S) {
  const Expr trip = ToI32(Bin(ir::BinaryOp::kSub, lp.stop, lp.start));
  return SStmt{SIf{Bin(ir::BinaryOp::kGt, lp.stop, lp.start),
                   {SStmt{SAssign{var, TMod(Bin(ir::BinaryOp::kAdd, V(var), trip), S)}}}, {}}};
}

// The producer warpgroup of both forms: setmaxnreg.dec `dec`, then thread T
// alone runs `lets` and, per k-step of `lp`, waits until the consumers
// released the stage's previous contents and issues `fill` (the refill,
// already rewritten to load iteration k). The i-th k-step (i = k - k0) uses
// stage i % S; its wait is skipped the first time the stage is used.
// Non-persistent (grid empty): use j = i / S of the stage waits for release
// j - 1, parity (j + 1) & 1 of empty[stage]. Persistent: the same loop per
// tile b, b + G, ... (block indices as lets of the tile under `order`, the
// one the consumers' tile loop uses); with `ring` (GpuLowerOptions::
// persistent_ring; `fill` already shifted by ShiftRing) the stages
// continue across tiles -- k-step i of a tile uses stage (i + tl_ws_ring) % S,
// tl_ws_ring advancing by the tile's k-steps (AdvanceRing) -- so the next
// tile's first fills wait only for the releases S k-steps back, under this
// tile's last k-steps; without it every tile restarts at stage 0 and its first
// fill waits for the stage the previous tile's last k-step used whenever
// (k-steps - 1) % S == 0 (33 of FlashAttention's overlap loop at S4096 over 2
// stages, 64 of a 4096-deep GEMM over 3). Either way the parity is tracked
// per stage -- bit s of `used` says whether stage s was used, bit s of
// `ephase` the parity its next wait expects.
// A tile copied before the k-loop (`q_load`: its boxes and the arrival on
// its full barrier; persistent only) is loaded once per tile after the
// first k-step's fill (FlashAttention-3's order: the next tile's first K/V
// stage is not held up behind Q's release), or alone where the tile has no
// k-step; the n-th load (n >= 1, counted in tl_ws_qn) first waits for the
// consumers' release n - 1 of it, parity (n - 1) & 1 of `q_empty`.
SBlock ProducerRole(const SimtKernel& k, int64_t T, int64_t dec, int64_t S, const std::string& empty, const SFor& lp,
                    SBlock lets, SBlock fill, const std::vector<int64_t>& grid, int64_t tiles, int64_t G,
                    const PersistentTileOrder& order, const std::string& q_empty, SBlock q_load, bool ring) {
  const bool persistent = !grid.empty();
  ring = ring && persistent;
  const Expr iter = ToI32(Bin(ir::BinaryOp::kSub, ir::MakeVar(lp.var, ir::ExprDType(lp.start)), lp.start));
  SBlock step;
  if (persistent) {
    const Expr st = ir::MakeVar("tl_ws_s", ir::DType::kI32);
    const Expr used = ir::MakeVar("tl_ws_used", ir::DType::kI32), eph = ir::MakeVar("tl_ws_ephase", ir::DType::kI32);
    auto bit = [&](const Expr& v) { return Bin(ir::BinaryOp::kBitAnd, Bin(ir::BinaryOp::kShr, v, st), I(1)); };
    step.push_back(SStmt{SLet{"tl_ws_s", ir::DType::kI32,
                              TMod(ring ? Bin(ir::BinaryOp::kAdd, iter, V("tl_ws_ring")) : iter, S)}});
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, bit(used), I(1)),
                             {SStmt{SMbarWait{empty, st, bit(eph)}},
                              SStmt{SAssign{"tl_ws_ephase", Bin(ir::BinaryOp::kBitXor, eph, Bin(ir::BinaryOp::kShl, I(1), st))}}},
                             {}}});
    step.push_back(SStmt{SAssign{"tl_ws_used", Bin(ir::BinaryOp::kBitOr, used, Bin(ir::BinaryOp::kShl, I(1), st))}});
  } else {
    const Expr iv = ir::MakeVar("tl_ws_i", ir::DType::kI32);
    step.push_back(SStmt{SLet{"tl_ws_i", ir::DType::kI32, iter}});
    const Expr parity = Bin(ir::BinaryOp::kBitAnd,
                            Bin(ir::BinaryOp::kAdd, ir::MakeCall(ir::CallOp::kTruncDiv, {iv, I(S)}), I(1)), I(1));
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGe, iv, I(S)),
                             {SStmt{SMbarWait{empty, ir::MakeCall(ir::CallOp::kTruncMod, {iv, I(S)}), parity}}},
                             {}}});
  }
  for (SStmt& x : fill) step.push_back(std::move(x));
  const bool q = persistent && !q_load.empty();
  SBlock qload;
  if (q) {
    const Expr qn = ir::MakeVar("tl_ws_qn", ir::DType::kI32);
    qload.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, qn, I(0)),
                              {SStmt{SMbarWait{q_empty, I(0), Bin(ir::BinaryOp::kBitAnd, Bin(ir::BinaryOp::kSub, qn, I(1)), I(1))}}},
                              {}}});
    qload.push_back(SStmt{SAssign{"tl_ws_qn", Bin(ir::BinaryOp::kAdd, qn, I(1))}});
    for (SStmt& x : q_load) qload.push_back(std::move(x));
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeVar(lp.var, ir::ExprDType(lp.start)), lp.start), qload, {}}});
  }
  SBlock elected = std::move(lets);
  elected.push_back(SStmt{SFor{lp.var, lp.start, lp.stop, ir::MakeInt(1, ir::ExprDType(lp.start)), false, std::move(step)}});
  if (q) elected.push_back(SStmt{SIf{Bin(ir::BinaryOp::kLe, lp.stop, lp.start), std::move(qload), {}}});
  if (ring) elected.push_back(AdvanceRing("tl_ws_ring", lp, S));
  if (persistent) {
    SBlock tile = PersistentTileLets(k.block_vars, grid, order);
    for (SStmt& x : elected) tile.push_back(std::move(x));
    elected.clear();
    elected.push_back(SStmt{SVar{"tl_ws_used", ir::DType::kI32, I(0)}});
    elected.push_back(SStmt{SVar{"tl_ws_ephase", ir::DType::kI32, I(0)}});
    if (ring) elected.push_back(SStmt{SVar{"tl_ws_ring", ir::DType::kI32, I(0)}});
    if (q) elected.push_back(SStmt{SVar{"tl_ws_qn", ir::DType::kI32, I(0)}});
    elected.push_back(TileLoop(k, tiles, G, std::move(tile)));
  }
  SBlock producer;
  producer.push_back(SStmt{SSetMaxNReg{false, dec}});
  producer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, Tid(), I(T)), std::move(elected), {}}});
  return producer;
}

// ---------------------------------------------------------------------------
// The synchronous-compute form (see the second half of the file comment).

// Calls `fn` on every expression a statement of `b` evaluates (nested
// blocks included) and `buf` on every buffer it names with how: 'r' read,
// 'w' written, 'g' a wgmma operand; false if it holds a statement this form
// does not know how to judge (extern calls, cp.async, TMA, mbarriers).
bool Accesses(const SBlock& b, const std::function<void(const std::string&, char)>& buf) {
  auto reads = [&](const Expr& e) {
    ir::WalkExpr(e, [&](const Expr& x) {
      if (const auto* l = ir::As<ir::Load>(x)) buf(l->buffer, 'r');
    });
  };
  for (const SStmt& s : b) {
    bool ok = true;
    std::visit(
        [&](const auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, SLet> || std::is_same_v<N, SAssign>) {
            reads(n.value);
          } else if constexpr (std::is_same_v<N, SVar>) {
            if (n.init) reads(*n.init);
          } else if constexpr (std::is_same_v<N, SStore>) {
            reads(n.index), reads(n.value), buf(n.buffer, 'w');
            if (n.hi) reads(*n.hi);
          } else if constexpr (std::is_same_v<N, SAtomicAdd>) {
            reads(n.index), reads(n.value), buf(n.buffer, 'w');
            for (const Expr& m : n.more) reads(m);
          } else if constexpr (std::is_same_v<N, SFor>) {
            reads(n.start), reads(n.stop), reads(n.step);
            ok = Accesses(n.body, buf);
          } else if constexpr (std::is_same_v<N, SIf>) {
            reads(n.cond);
            ok = Accesses(n.then_body, buf) && Accesses(n.else_body, buf);
          } else if constexpr (std::is_same_v<N, SCopyVec>) {
            reads(n.dst_index), reads(n.src_index), buf(n.src, 'r'), buf(n.dst, 'w');
          } else if constexpr (std::is_same_v<N, SStmatrix>) {
            reads(n.index), buf(n.buffer, 'w');
            for (const Expr& v : n.values) reads(v);
          } else if constexpr (std::is_same_v<N, SMma> || std::is_same_v<N, SAmdMma>) {
            reads(n.a_base), reads(n.b_base), reads(n.k0), buf(n.a, 'r'), buf(n.b, 'r'), buf(n.c, 'w');
          } else if constexpr (std::is_same_v<N, SWgmma>) {
            if (n.a_frag.empty()) buf(n.a.buffer, 'g');
            for (const Expr& e : n.a.starts) reads(e);
            buf(n.b.buffer, 'g');
            for (const Expr& e : n.b.starts) reads(e);
            if (!n.a_frag.empty()) buf(n.a_frag, 'r');
            buf(n.c, 'w');
          } else if constexpr (std::is_same_v<N, SBarrier> || std::is_same_v<N, SLaneReduce> || std::is_same_v<N, SComment> ||
                               std::is_same_v<N, SWgmmaWait> || std::is_same_v<N, SAsyncCommit> ||
                               std::is_same_v<N, SAsyncWait>) {
          } else {
            ok = false;
          }
        },
        s.node);
    if (!ok) return false;
  }
  return true;
}

// Whether some path through `b`, entered with groups in flight or not
// (`in_flight`), leaves a wgmma group in flight at its end: a wgmma with
// wait_group 0 or a wait_group 0 retires everything before it (groups
// retire in order); an if leaves groups in flight where either branch does;
// a loop holding an asynchronous wgmma counts as leaving it in flight (no
// kernel needs more yet).
bool GroupsLeftInFlight(const SBlock& b, bool in_flight) {
  for (const SStmt& s : b) {
    if (const auto* w = std::get_if<SWgmma>(&s.node)) {
      in_flight = w->wait_pending != 0;
    } else if (const auto* wait = std::get_if<SWgmmaWait>(&s.node)) {
      if (wait->pending == 0) in_flight = false;
    } else if (const auto* i = std::get_if<SIf>(&s.node)) {
      in_flight = GroupsLeftInFlight(i->then_body, in_flight) || GroupsLeftInFlight(i->else_body, in_flight);
    } else if (Any(SBlock{s}, [](const SStmt& y) {
                 const auto* nested = std::get_if<SWgmma>(&y.node);
                 return nested && nested->wait_pending != 0;
               })) {
      in_flight = true;
    }
  }
  return in_flight;
}

// The k-loop of a TMA pipeline whose compute waits for its own wgmma groups
// (FlashAttention: QK^T, softmax on register fragments, P V), as producer
// and consumers; `enabled`, persistent_blocks as WarpSpecializeGemmPipeline.
std::string WarpSpecializeSyncLoop(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks,
                                   bool ring) {
  SBlock body = k->body;  // a copy: the kernel changes only once every check passed
  const std::string no = "not warp-specialized: ";
  if (!enabled) return no + "turned off (GpuLowerOptions::warp_specialize; TL_CUDA_WS=0 at build time)";
  if (k->block[1] != 1 || k->block[2] != 1) return no + "the block is not 1-D";
  const int64_t T = k->threads;
  if (T % 128 != 0 || T + 128 > 1024) return no + std::to_string(T) + " threads (whole warpgroups, at most 896)";
  if (Has<SWarpRoles>(body) || Has<SCopyAsync>(body)) return no + "the kernel has cp.async copies";
  int init = -1, loop = -1;
  std::vector<int> inits;
  for (size_t i = 0; i < body.size(); ++i) {
    if (std::holds_alternative<SMbarInit>(body[i].node)) inits.push_back(static_cast<int>(i));
    if (const auto* f = std::get_if<SFor>(&body[i].node); f && Has<SMbarWait>(f->body)) {
      if (loop >= 0) return no + (inits.size() > 1 ? "more than one TMA pipeline" : "more than one TMA k-loop");
      loop = static_cast<int>(i);
    }
  }
  // The pipeline's barriers are those the k-loop waits on; any other is a
  // tile copied before the loop by TMA (GpuLowerOptions::tma_pre_copies).
  std::string kbar;
  if (loop >= 0) {
    for (const SStmt& x : std::get<SFor>(body[static_cast<size_t>(loop)].node).body) {
      if (const auto* w = std::get_if<SMbarWait>(&x.node); w && kbar.empty()) kbar = w->bar;
    }
  }
  std::map<std::string, int> pre_bars;  // barrier -> its init's index
  for (int i : inits) {
    const SMbarInit& b = std::get<SMbarInit>(body[static_cast<size_t>(i)].node);
    if (b.bar == kbar) {
      if (init >= 0) return no + "more than one TMA pipeline";
      init = i;
    } else if (b.count != 1 || b.arrivals != 1) {
      return no + "more than one TMA pipeline";
    } else {
      pre_bars[b.bar] = i;
    }
  }
  if (init < 0 || loop < 0 || loop < init) return no + "the TMA k-loop is not at the kernel's top level";
  if (pre_bars.size() > 1) return no + "more than one tile copied by TMA before the k-loop";
  if (!pre_bars.empty() && persistent_blocks <= 0) {
    return no + "tiles are copied by TMA before the k-loop (GpuLowerOptions::tma_pre_copies): only the persistent form "
                "hands them to the producer";
  }
  const SMbarInit full = std::get<SMbarInit>(body[static_cast<size_t>(init)].node);
  const int64_t S = full.count;
  SFor& lp = std::get<SFor>(body[static_cast<size_t>(loop)].node);
  if (ir::FoldInt(lp.step) != std::optional<int64_t>(1)) return no + "the k-loop's step is not 1";
  // The loop body: stage let, full wait, phase flip, [cp.async wait], the
  // block barrier, the refill, [commit], then the compute.
  const SLet* stage = nullptr;
  const SMbarWait* wait = nullptr;
  const SIf* refill = nullptr;
  std::string phase;
  const SAssign* flip = nullptr;
  int barriers = 0;
  SBlock compute;
  for (const SStmt& s : lp.body) {
    if (refill) {
      if (!std::holds_alternative<SAsyncCommit>(s.node)) compute.push_back(s);
    } else if (const auto* l = std::get_if<SLet>(&s.node); l && !stage) {
      stage = l;
    } else if (const auto* w = std::get_if<SMbarWait>(&s.node); w && stage && !wait && w->bar == full.bar) {
      wait = w;
    } else if (const auto* a = std::get_if<SAssign>(&s.node); a && wait && phase.empty()) {
      phase = a->name;
      flip = a;
    } else if (std::holds_alternative<SAsyncWait>(s.node) && wait) {
      // cp.async bookkeeping with no cp.async in the kernel: nothing.
    } else if (std::holds_alternative<SBarrier>(s.node) && wait) {
      ++barriers;
    } else if (const auto* i = std::get_if<SIf>(&s.node); i && barriers == 1 && Has<STmaLoad>(i->then_body)) {
      refill = i;
    } else {
      return no + "the k-loop does not start with its stage wait, a barrier and the TMA refill";
    }
  }
  if (!stage || !wait || phase.empty() || barriers != 1 || !refill || !Has<SWgmma>(compute)) {
    return no + "the k-loop is not a TMA pipeline feeding wgmma (stage wait, barrier, refill, compute)";
  }
  if (Has<STmaLoad>(compute) || Has<SMbarWait>(compute) || Has<SMbarArrive>(compute)) {
    return no + "TMA or mbarrier statements in the k-loop's compute";
  }
  // Groups a gemm leaves in flight (wg_wait != 0) must be retired inside the k-step: the
  // consumers release the stage at its end. So on every path through the compute a wait_group 0
  // follows the last wgmma issued (GroupsLeftInFlight; the overlap k-loop issues its gemms inside
  // the branches of its step kinds, each ending in its own wait).
  if (GroupsLeftInFlight(compute, false)) {
    return no + "a wgmma group left in flight (wg_wait) is not retired (wait_group 0) within its k-step";
  }
  // The stages (the refill's destinations) and the shared memory they span.
  std::set<std::string> stages_of;
  Any(SBlock{SStmt{*refill}}, [&](const SStmt& y) {
    if (const auto* t = std::get_if<STmaLoad>(&y.node)) stages_of.insert(t->dst);
    return false;
  });
  std::map<std::string, const SimtBuffer*> bufs;
  for (const SimtBuffer& b : k->buffers) bufs[b.name] = &b;
  auto span = [&](const SimtBuffer& b) {
    return std::pair<int64_t, int64_t>{b.shared_offset, b.shared_offset + BufferBytes(b)};
  };
  // Whether shared buffer `name` overlaps the memory of any buffer of `of`.
  auto overlaps = [&](const std::string& name, const std::set<std::string>& of) {
    auto it = bufs.find(name);
    if (it == bufs.end() || it->second->space != Space::kShared) return false;
    const auto [lo, hi] = span(*it->second);
    for (const std::string& o : of) {
      const auto [olo, ohi] = span(*bufs.at(o));
      if (lo < ohi && olo < hi) return true;
    }
    return false;
  };
  auto in_stages = [&](const std::string& name) {  // a stage, or a shared buffer in a stage's memory
    return stages_of.count(name) > 0 || overlaps(name, stages_of);
  };
  // The compute reads the stages through wgmma (each unit retired by its
  // own wait_group 0, .sync.aligned: every lane of a warp is past it) or
  // with plain loads (e.g. W4A16's weight bytes, decoded into a register
  // operand A: `reads_stage`; then every consumer thread releases the stage
  // after its own loads, instead of lane 0 of each warp, so each thread's
  // reads are ordered before its own release -- mbarrier.arrive releases at
  // CTA scope -- whether or not their values were consumed yet), and writes
  // no memory of theirs (the producer refills them meanwhile); whether it
  // writes shared memory at all decides the barrier.
  std::string why;
  bool writes_shared = Has<SBarrier>(compute);
  bool reads_stage = false;
  const bool known = Accesses(compute, [&](const std::string& name, char how) {
    auto it = bufs.find(name);
    const bool shared = it != bufs.end() && it->second->space == Space::kShared;
    if (how == 'w' && shared) writes_shared = true;
    if (how == 'r' && stages_of.count(name)) reads_stage = true;
    if (why.empty() && in_stages(name) && (how == 'w' || !stages_of.count(name))) {
      why = name + (how == 'w' ? " is written" : " (in a stage's memory) is read") + " in the k-loop's compute";
    }
  });
  if (!known) return no + "the k-loop's compute holds statements other than stores, loops, lane reductions and wgmma";
  if (!why.empty()) return no + why;
  // Plain loads of a stage only where the compute writes no shared memory (a register-A decode: w4a16_wgmma);
  // the kernels that stage a dequantized tile in shared memory (quant_matmul, w4a16_mma on sm_90a) keep their
  // block barrier (not measured warp-specialized).
  if (reads_stage && writes_shared) {
    return no + "the k-loop's compute loads from a stage outside wgmma and writes shared memory";
  }
  // After the loop: [wait_group 0], [cp.async.wait], a barrier.
  const size_t L = static_cast<size_t>(loop);
  size_t after = L + 1;
  while (after < body.size() &&
         (std::holds_alternative<SWgmmaWait>(body[after].node) || std::holds_alternative<SAsyncWait>(body[after].node))) {
    ++after;
  }
  if (after >= body.size() || !std::holds_alternative<SBarrier>(body[after].node)) {
    return no + "the k-loop is not followed by its drain (a barrier)";
  }
  // Before the loop: the phase variable and the prologue's issues go (the
  // producer issues every iteration); lets before the mbarrier init stay for
  // both roles; everything else runs in the consumers (and must not touch
  // the stages' memory: the producer fills it meanwhile).
  SBlock head, pre;
  std::set<std::string> bound;
  // Tiles copied by TMA before the loop (pre_bars): per barrier the issue
  // (`if (tl_tid == 0) { boxes; arrive }`), the wait and its phase flip,
  // exactly once each and in that order; the issue goes to the producer, the
  // wait (and flip) to the end of the consumers' pre..., the phase variable
  // before their tile loop.
  SBlock q_issue, q_wait;
  std::set<std::string> q_dst, q_phases;
  std::map<std::string, int> q_seen;  // barrier -> 1 issued, 2 waited, 3 flipped
  auto on_pre_bar = [&](const SStmt& x) {
    bool on = false;
    Any(SBlock{x}, [&](const SStmt& y) {
      if (const auto* t = std::get_if<STmaLoad>(&y.node)) on = on || pre_bars.count(t->bar);
      if (const auto* w = std::get_if<SMbarWait>(&y.node)) on = on || pre_bars.count(w->bar);
      if (const auto* a = std::get_if<SMbarArrive>(&y.node)) on = on || pre_bars.count(a->bar);
      return false;
    });
    return on;
  };
  for (size_t i = 0; i < L && !pre_bars.empty(); ++i) {
    if (const auto* a = std::get_if<SAssign>(&body[i].node); a && i > 0) {
      const auto* w = std::get_if<SMbarWait>(&body[i - 1].node);
      if (w && pre_bars.count(w->bar)) q_phases.insert(a->name);
    }
  }
  for (size_t i = 0; i < L; ++i) {
    SStmt& s = body[i];
    if (static_cast<int>(i) == init) continue;
    if (const auto* b = std::get_if<SMbarInit>(&s.node); b && pre_bars.count(b->bar)) continue;
    if (const auto* v = std::get_if<SVar>(&s.node); v && v->name == phase) continue;
    if (const auto* v = std::get_if<SVar>(&s.node); v && q_phases.count(v->name)) {
      if (!v->init || ir::FoldInt(*v->init) != std::optional<int64_t>(0)) return no + "a TMA copy's phase bit starts at 1";
      continue;
    }
    if (std::holds_alternative<SAsyncCommit>(s.node)) continue;
    if (!pre_bars.empty() && on_pre_bar(s)) {
      // The issue: thread 0's boxes into whole shared tiles and one arrival, all on one barrier.
      if (const auto* g = std::get_if<SIf>(&s.node); g && IsThreadZeroGuard(*g)) {
        std::string bar;
        bool ok = !g->then_body.empty() && std::holds_alternative<SMbarArrive>(g->then_body.back().node);
        for (const SStmt& y : g->then_body) {
          const auto* t = std::get_if<STmaLoad>(&y.node);
          const auto* a = std::get_if<SMbarArrive>(&y.node);
          if (!t && !a) ok = false;
          const std::string& b = t ? t->bar : a ? a->bar : bar;
          if (bar.empty()) bar = b;
          ok = ok && b == bar && (!t || (!t->multicast && ir::FoldInt(t->bar_index) == std::optional<int64_t>(0)));
          ok = ok && (!a || (!a->each_thread && !a->peer && ir::FoldInt(a->index) == std::optional<int64_t>(0)));
          if (t) q_dst.insert(t->dst);
        }
        if (!ok || q_seen[bar] != 0) return no + "an unexpected TMA copy before the k-loop";
        q_seen[bar] = 1;
        q_issue.push_back(s);
        continue;
      }
      if (const auto* w = std::get_if<SMbarWait>(&s.node)) {
        if (q_seen[w->bar] != 1 || ir::FoldInt(w->index) != std::optional<int64_t>(0) || i + 1 >= L) {
          return no + "an unexpected wait for a TMA copy before the k-loop";
        }
        const auto* a = std::get_if<SAssign>(&body[i + 1].node);
        if (!a || !q_phases.count(a->name)) return no + "a TMA copy's wait before the k-loop without its phase flip";
        q_seen[w->bar] = 3;
        q_wait.push_back(s);
        q_wait.push_back(body[i + 1]);
        ++i;
        continue;
      }
      return no + "an unexpected mbarrier statement before the k-loop";
    }
    if (const auto* a = std::get_if<SAssign>(&s.node); a && q_phases.count(a->name)) {
      return no + "a TMA copy's phase bit changes outside its wait";
    }
    if (Has<STmaLoad>(SBlock{s})) {
      const auto* g = std::get_if<SIf>(&s.node);
      if (static_cast<int>(i) < init || !g || !g->else_body.empty()) return no + "an unexpected TMA prologue";
      continue;
    }
    if (Has<SMbarWait>(SBlock{s}) || Has<SMbarArrive>(SBlock{s}) || Has<SWgmma>(SBlock{s})) {
      return no + "mbarrier or wgmma statements outside the k-loop";
    }
    if (static_cast<int>(i) < init && (std::holds_alternative<SLet>(s.node) || std::holds_alternative<SComment>(s.node))) {
      head.push_back(std::move(s));
      continue;
    }
    std::string touched;
    if (!Accesses(SBlock{s}, [&](const std::string& name, char) {
          if (touched.empty() && in_stages(name)) touched = name;
        })) {
      return no + "statements before the k-loop this form cannot judge";
    }
    if (!touched.empty()) return no + touched + " (in a stage's memory) is accessed before the k-loop";
    if (const auto* l = std::get_if<SLet>(&s.node)) bound.insert(l->name);
    if (const auto* v = std::get_if<SVar>(&s.node)) bound.insert(v->name);
    pre.push_back(std::move(s));
  }
  SBlock post(std::make_move_iterator(body.begin() + static_cast<std::ptrdiff_t>(after) + 1),
              std::make_move_iterator(body.end()));
  if (Has<STmaLoad>(post) || Has<SMbarWait>(post) || Has<SMbarArrive>(post)) return no + "TMA after the k-loop";
  // The producer's loop body: the refill of iteration k + S - 1, at k.
  const std::string kv = lp.var;
  const Expr kvar = ir::MakeVar(kv, ir::ExprDType(lp.start));
  std::set<std::string> names;
  SBlock fill_block{SStmt{*refill}};
  if (!ProducerCopy(fill_block, kv, ir::FoldConstants(Bin(ir::BinaryOp::kSub, kvar, ir::MakeInt(S - 1, ir::ExprDType(lp.start)))),
                    &names)) {
    return no + "the refill holds more than TMA boxes and an arrival";
  }
  NamesOf(lp.start, &names);
  NamesOf(lp.stop, &names);
  // Tiles copied by TMA before the loop (persistent only, see the file
  // comment): their memory (by offsets, so a buffer sharing it counts too)
  // is touched only by that copy and read (wgmma or loads) by the compute:
  // no stage's, none of the rest of pre... or of post... (O staged through
  // Q's tile: the next tile's Q could only be loaded at the tile's end, no
  // earlier than the consumers load it themselves -- refused, so the kernel
  // is lowered as without GpuLowerOptions::tma_pre_copies).
  if (!pre_bars.empty()) {
    for (const auto& [bar, seen] : q_seen) {
      if (seen != 3) return no + "a TMA copy before the k-loop is not waited for";
    }
    if (q_seen.size() != pre_bars.size()) return no + "a TMA barrier before the k-loop is not used";
    auto in_q = [&](const std::string& name) { return overlaps(name, q_dst); };
    for (const std::string& q : q_dst) {
      if (in_stages(q)) return no + "persistent: " + q + " (copied before the k-loop) shares a stage's memory";
    }
    std::string why_q;
    if (!Accesses(pre, [&](const std::string& name, char) {
          if (why_q.empty() && in_q(name)) why_q = name + " (in the memory of a tile copied before the k-loop) is accessed before the k-loop";
        })) {
      return no + "statements before the k-loop this form cannot judge";
    }
    Accesses(compute, [&](const std::string& name, char how) {
      if (why_q.empty() && in_q(name) && how == 'w') why_q = name + " (in the memory of a tile copied before the k-loop) is written in the k-loop";
    });
    if (why_q.empty() && !Accesses(post, [&](const std::string& name, char) {
          if (why_q.empty() && in_q(name)) why_q = name + " (in the memory of a tile copied before the k-loop) is accessed after the k-loop";
        })) {
      why_q = "statements after the k-loop this form cannot judge";
    }
    if (!why_q.empty()) return no + "persistent: " + why_q;
    std::set<std::string> q_names;
    SBlock issue = q_issue;
    if (!ProducerCopy(issue, "", I(0), &q_names)) return no + "an unexpected TMA copy before the k-loop";
    names.insert(q_names.begin(), q_names.end());
  }
  SBlock lets;  // pure lets of the consumers' that the producer needs, recomputed (as the GEMM form)
  for (auto it = pre.rbegin(); it != pre.rend(); ++it) {
    const auto* l = std::get_if<SLet>(&it->node);
    if (!l || !names.count(l->name)) continue;
    bool loads = false;
    ir::WalkExpr(l->value, [&](const Expr& x) { loads = loads || ir::As<ir::Load>(x) != nullptr; });
    if (loads) continue;
    NamesOf(l->value, &names);
    lets.insert(lets.begin(), *it);
    bound.erase(l->name);
  }
  for (const std::string& n : names) {
    if (bound.count(n)) return no + "the TMA coordinates use " + n + ", computed before the loop by the consumers";
  }
  // Persistent: the static tile schedule (see the file comment); a shared
  // buffer of post... in a stage's memory moves to its own.
  std::vector<int64_t> grid;
  int64_t tiles = 1;
  int64_t shared_end = k->shared_bytes;
  std::map<std::string, int64_t> moved;
  if (persistent_blocks > 0) {
    for (const Expr& g : k->grid) {
      const std::optional<int64_t> v = ir::FoldInt(g);
      if (!v) return no + "persistent: the grid is not static";
      grid.push_back(*v);
      tiles *= *v;
    }
    if (grid.empty() || k->block_vars.size() > grid.size()) return no + "persistent: no grid";
    std::set<std::string> post_shared;
    if (!Accesses(post, [&](const std::string& name, char) {
          auto it = bufs.find(name);
          if (it != bufs.end() && it->second->space == Space::kShared) post_shared.insert(name);
        })) {
      return no + "persistent: statements after the k-loop this form cannot judge";
    }
    for (const std::string& name : post_shared) {
      if (stages_of.count(name)) return no + "persistent: " + name + " (a stage) is accessed after the k-loop";
      if (!in_stages(name)) continue;
      const SimtBuffer& b = *bufs.at(name);
      const int64_t bytes = BufferBytes(b);
      const int64_t align = std::max<int64_t>(128, SwizzleAtomBytes(b.swizzle));  // a swizzled tile starts on its atom
      const int64_t at = (shared_end + align - 1) / align * align;
      if (at + bytes > shared_budget_bytes) return no + "persistent: no shared memory for " + name + " outside the stages";
      moved[name] = at;
      shared_end = at + bytes;
    }
  }
  // Shared memory for the empty barriers (and the pre-loop tile's); registers as the GEMM form.
  const std::string empty = full.bar + "_empty";
  const std::string q_full = pre_bars.empty() ? std::string() : pre_bars.begin()->first;
  const std::string q_empty = q_full + "_empty";
  const int64_t q_bytes = pre_bars.empty() ? 0 : 8;
  const int64_t off = (shared_end + 7) / 8 * 8;
  if (off + 8 * S + q_bytes > shared_budget_bytes) return no + "no shared memory left for the empty barriers";
  const int64_t threads = T + 128;
  int64_t reg_elements = 0;
  for (const SimtBuffer& b : k->buffers) {
    if (b.space == Space::kRegister) reg_elements += b.elements;
  }
  const int64_t min_blocks = threads <= 256 && 2 * (off + 8 * S + q_bytes + 1024) <= 233472 && reg_elements + 64 <= 216 ? 2 : 1;
  const auto [dec, inc, entry] = SplitRegisters(T, min_blocks);
  if (inc < dec) return no + "too many threads to give the consumers more registers";

  const bool persistent = persistent_blocks > 0;
  if (persistent && !flip) return no + "persistent: the k-loop's phase bits were not found";
  // Whether pre... or post... touch shared memory (the barrier that ends a tile). Judged here, while
  // `bufs` still points into k->buffers: the push_back below may reallocate it.
  bool pre_post_shared = false;
  if (persistent) {
    auto shared = [&](const std::string& name, char) {
      auto it = bufs.find(name);
      pre_post_shared = pre_post_shared || (it != bufs.end() && it->second->space == Space::kShared);
    };
    // (With the pre-loop tile loaded by the producer, post... alone needs no barrier: its shared tiles are
    // next written in the next tile's post..., after the named barrier every consumer passes right after
    // its Q wait at the start of that tile -- so after every consumer finished this tile's post... -- and
    // again after the barrier that follows that tile's k-loop.)
    if (!Accesses(pre, shared) || (q_bytes == 0 && !Accesses(post, shared))) pre_post_shared = true;  // not judged: keep the barrier
    // A statement before the pipeline stays outside the tile loop, computed from the launched block
    // index: none may read a block index (none does today: the lowering puts the pipeline first).
    for (const SStmt& h : head) {
      std::set<std::string> used;
      if (const auto* l = std::get_if<SLet>(&h.node)) NamesOf(l->value, &used);
      for (const std::string& b : k->block_vars) {
        if (used.count(b)) return no + "persistent: a statement before the pipeline reads the block index " + b;
      }
    }
  }
  const int64_t G = std::min(tiles, persistent_blocks * min_blocks);  // persistent: the grid
  for (SimtBuffer& b : k->buffers) {
    if (moved.count(b.name)) b.shared_offset = moved[b.name];
  }
  k->buffers.push_back({empty, Space::kShared, ir::DType::kU64, S, off, {S}, SmemSwizzle::kNone});
  if (q_bytes) k->buffers.push_back({q_empty, Space::kShared, ir::DType::kU64, 1, off + 8 * S, {1}, SmemSwizzle::kNone});
  k->shared_bytes = off + 8 * S + q_bytes;
  const Expr iter = ToI32(Bin(ir::BinaryOp::kSub, kvar, lp.start));  // i = k - k0
  const PersistentTileOrder order = persistent ? TileOrderOf(*k, grid, tiles, G, lets, lp) : PersistentTileOrder{};
  // The producer's load of the pre-loop tile: thread 0's issue, unguarded.
  SBlock q_load = q_issue;
  {
    std::set<std::string> unused;
    ProducerCopy(q_load, "", I(0), &unused);
  }
  // The ring continued across tiles (persistent_ring; ProducerRole): the fill's, the stage let's and
  // the compute's stage indices shifted, the compute's other reads of k (a causal mask) tile-local.
  SLet stage_let = *stage;
  const bool use_ring = persistent && ring && ShiftRing(&fill_block, &stage_let, &compute, lp, S);
  SBlock producer = ProducerRole(*k, T, dec, S, empty, lp, std::move(lets), std::move(fill_block),
                                 grid, tiles, G, order, q_empty, std::move(q_load), use_ring);  // grid: empty unless persistent
  // Consumers: the statements before the loop, published to every consumer
  // and to the async proxy (the named barrier prints its proxy fence) before
  // the first wgmma reads them; per k-step the full wait, the compute (a
  // named barrier first where it writes shared memory), the release.
  SBlock consumer;
  consumer.push_back(SStmt{SSetMaxNReg{true, inc}});
  if (persistent) consumer.push_back(SStmt{SVar{phase, ir::DType::kI32, I(0)}});
  if (use_ring) consumer.push_back(SStmt{SVar{"tl_ring", ir::DType::kI32, I(0)}});
  for (const std::string& q : q_phases) consumer.push_back(SStmt{SVar{q, ir::DType::kI32, I(0)}});
  const size_t first = consumer.size();  // (persistent: from here on the tile loop's body)
  NameBarriers(pre, T);
  for (SStmt& s : pre) consumer.push_back(std::move(s));
  for (SStmt& s : q_wait) consumer.push_back(std::move(s));  // the pre-loop tile (its phase bit as lowered)
  consumer.push_back(SStmt{SNamedBarrier{1, T}});
  {
    SBlock step;
    step.push_back(SStmt{stage_let});
    if (persistent) {  // the phase bits as lowered
      step.push_back(SStmt{*wait});
      step.push_back(SStmt{*flip});
    } else {
      step.push_back(SStmt{SMbarWait{full.bar, wait->index,
                                     Bin(ir::BinaryOp::kBitAnd, ir::MakeCall(ir::CallOp::kTruncDiv, {iter, I(S)}), I(1))}});
    }
    if (writes_shared) step.push_back(SStmt{SNamedBarrier{1, T}});
    NameBarriers(compute, T);
    for (SStmt& s : compute) step.push_back(std::move(s));
    SStmt release{SMbarArrive{empty, ir::MakeVar(stage->name, stage->dtype), true}};
    if (reads_stage) {
      step.push_back(std::move(release));  // every consumer thread, after its own loads of the stage
    } else {
      step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                               {std::move(release)}, {}}});
    }
    consumer.push_back(SStmt{SFor{kv, lp.start, lp.stop, lp.step, false, std::move(step)}});
  }
  // The pre-loop tile's release (lane 0 of each warp, as a stage's): after
  // the k-loop, whose wgmma units retired every read of it (each k-step ends
  // in wait_group 0; only wgmma and loads read it, nothing writes it).
  if (q_bytes) {
    consumer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                                 {SStmt{SMbarArrive{q_empty, I(0), true}}}, {}}});
  }
  if (use_ring) consumer.push_back(AdvanceRing("tl_ring", lp, S));
  consumer.push_back(SStmt{SNamedBarrier{1, T}});
  NameBarriers(post, T);
  for (SStmt& s : post) consumer.push_back(std::move(s));
  if (persistent) {
    if (pre_post_shared) consumer.push_back(SStmt{SNamedBarrier{1, T}});
    SBlock tile = PersistentTileLets(k->block_vars, grid, order);  // the producer's order
    // The thread index re-read per tile, opaquely (SLet::opaque): else nvcc hoists every address the
    // consumers compute from it -- fragment rows, shared-memory offsets of Q, O and the stages -- out of the
    // tile loop and keeps them live across it, and the k-loop's registers spill (ptxas: 104 / 84 / 208
    // bytes for the 128x128 overlap / overlap + pingpong / causal overlap kernels, none without the tile
    // loop). Recomputed per tile instead: a few integer instructions per tile, none per k-step.
    tile.insert(tile.begin(), SStmt{SLet{"tl_tid", ir::DType::kI32, Tid(), true}});
    for (size_t i = first; i < consumer.size(); ++i) tile.push_back(std::move(consumer[i]));
    consumer.resize(first);
    consumer.push_back(TileLoop(*k, tiles, G, std::move(tile)));
  }

  SBlock out = std::move(head);
  out.push_back(SStmt{full});
  out.push_back(SStmt{SMbarInit{empty, S, reads_stage ? T : T / 32}});
  if (q_bytes) {
    out.push_back(SStmt{SMbarInit{q_full, 1, 1}});
    out.push_back(SStmt{SMbarInit{q_empty, 1, T / 32}});
  }
  out.push_back(SStmt{SWarpRoles{T, std::move(producer), std::move(consumer)}});
  k->body = std::move(out);
  k->threads = threads;
  k->block[0] = threads;
  k->min_blocks = min_blocks;
  if (persistent) k->grid = {ir::MakeInt(G)};
  return "warp-specialized: " + std::to_string(T) + " consumer threads + a 128-thread TMA producer warpgroup, " +
         std::to_string(S) + " stages on full/empty mbarriers, synchronous k-loop compute (a stage released after it), " +
         (writes_shared ? "a named barrier among the consumers in the k-loop (its compute writes shared memory)"
                        : "no barrier in the k-loop") +
         (reads_stage ? "; the compute loads from the stages: every consumer thread releases them" : "") +
         "; registers " + std::to_string(entry) + " at entry (__launch_bounds__(" + std::to_string(threads) + ", " +
         std::to_string(min_blocks) + ")), producer setmaxnreg.dec " + std::to_string(dec) + ", consumers setmaxnreg.inc " +
         std::to_string(inc) +
         (persistent ? "; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles" : "") +
         (order.kind != PersistentTileOrder::Kind::kBlockOrder ? " in a work-balanced order: " + PersistentTileOrderName(order)
                                                                : "") +
         RingNote(persistent, ring, use_ring) +
         (q_bytes ? kProducerLoadsNote + *q_dst.begin() + " on " + q_full + ", released after the k-loop)" : "");
}

// The deferred-wgmma GEMM form (the first half of the file comment); the
// kernel changes only where the note says "warp-specialized: ".
// GpuLowerOptions::bulk_store (the GEMM form only): the top-level statement
// of post... that copies the staged epilogue tile to global memory (16-byte
// vector stores by every consumer thread) becomes the kernel's bulk form of
// that copy (SimtKernel::bulk_epilogues: warp 0's lanes, one bulk copy per
// tile row, committed, no wait). Taken only where the copy is the last
// statement of post... naming the tile or the tensor (the deferred wait
// covers nothing after it) and the tile's base (`moved` or its own offset)
// is 16-byte aligned. Returns the tensor written ("" where not taken).
std::string UseBulkEpilogue(const SimtKernel& k, SBlock& post, const std::map<std::string, int64_t>& moved) {
  if (k.bulk_epilogues.size() != 1) return "";
  const SimtKernel::BulkEpilogue& be = k.bulk_epilogues[0];
  int at = -1;
  for (size_t i = 0; i < post.size(); ++i) {
    const bool copy = Any(SBlock{post[i]}, [&](const SStmt& x) {
      const auto* c = std::get_if<SCopyVec>(&x.node);
      return c && c->src == be.tile;
    });
    if (copy) {
      if (at >= 0) return "";
      at = static_cast<int>(i);
    } else if (at >= 0 && (Mentions(post[i], be.tile) || Mentions(post[i], be.dst))) {
      return "";
    }
  }
  if (at < 0) return "";
  // The copy holds only the vector stores tile -> dst (and their lets, loops, guards).
  bool only = true;
  std::function<void(const SBlock&)> check = [&](const SBlock& b) {
    for (const SStmt& x : b) {
      if (const auto* f = std::get_if<SFor>(&x.node)) {
        check(f->body);
      } else if (const auto* i = std::get_if<SIf>(&x.node)) {
        check(i->then_body);
        check(i->else_body);
      } else if (const auto* c = std::get_if<SCopyVec>(&x.node)) {
        only = only && c->src == be.tile && c->dst == be.dst;
      } else if (!std::holds_alternative<SLet>(x.node) && !std::holds_alternative<SComment>(x.node)) {
        only = false;
      }
    }
  };
  check(SBlock{post[static_cast<size_t>(at)]});
  if (!only) return "";
  for (const SimtBuffer& b : k.buffers) {
    if (b.name != be.tile) continue;
    const int64_t off = moved.count(b.name) ? moved.at(b.name) : b.shared_offset;
    if (b.space != Space::kShared || off % std::max<int64_t>(16, SwizzleAtomBytes(b.swizzle)) != 0) return "";
    post.erase(post.begin() + at);
    post.insert(post.begin() + at, be.issue.begin(), be.issue.end());
    return be.dst;
  }
  return "";
}
// How a kernel's bulk epilogue (UseBulkEpilogue) stores its tile, for the notes: TMA tensor stores
// (GpuLowerOptions::tma_store) or per-row bulk copies.
std::string BulkEpilogueForm(const SimtKernel& k, const char* who) {
  const bool tma = !k.bulk_epilogues.empty() && Any(k.bulk_epilogues[0].issue, [](const SStmt& x) {
    return std::holds_alternative<STmaStore>(x.node);
  });
  return tma ? std::string("epilogue stored by ") + who + "thread 0 as TMA tensor stores, one box per 64-column panel"
             : std::string("epilogue stored by ") + who + "warp 0 as one bulk copy per row";
}
// Warp 0's lanes (the bulk copies' issuers): `if (tl_tid < 32) cp.async.bulk.wait_group[.read] 0`.
SStmt BulkWait(bool read) { return SStmt{SIf{Bin(ir::BinaryOp::kLt, Tid(), I(32)), {SStmt{SBulkWait{0, read}}}, {}}}; }

// ---------------------------------------------------------------------------
// The ping-pong GEMM (GpuLowerOptions::gemm_pingpong; the persistent form
// only; see the comment at PingpongGemm below).

// Warpgroup 1's copy of the consumers' statements before / after the
// k-loop: shared buffers renamed to its own copies (`to`), named barriers
// 1 -> `bar`. False for a statement that names a renamed buffer in a way
// this does not rewrite.
bool RenameForWarpgroup(SBlock& b, const std::map<std::string, std::string>& to, int64_t bar) {
  auto name = [&](std::string& n) {
    auto it = to.find(n);
    if (it != to.end()) n = it->second;
  };
  auto expr = [&](Expr& e) {
    e = ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
      const auto* l = ir::As<ir::Load>(x);
      if (!l || !to.count(l->buffer)) return std::nullopt;
      return ir::MakeLoad(to.at(l->buffer), l->indices, l->dtype);
    });
  };
  for (SStmt& s : b) {
    bool ok = true;
    if (auto* l = std::get_if<SLet>(&s.node)) {
      expr(l->value);
    } else if (auto* v = std::get_if<SVar>(&s.node)) {
      if (v->init) expr(*v->init);
    } else if (auto* a = std::get_if<SAssign>(&s.node)) {
      expr(a->value);
    } else if (auto* st = std::get_if<SStore>(&s.node)) {
      name(st->buffer), expr(st->index), expr(st->value);
      if (st->hi) expr(*st->hi);
    } else if (auto* f = std::get_if<SFor>(&s.node)) {
      expr(f->start), expr(f->stop), expr(f->step);
      ok = RenameForWarpgroup(f->body, to, bar);
    } else if (auto* i = std::get_if<SIf>(&s.node)) {
      expr(i->cond);
      ok = RenameForWarpgroup(i->then_body, to, bar) && RenameForWarpgroup(i->else_body, to, bar);
    } else if (auto* c = std::get_if<SCopyVec>(&s.node)) {
      name(c->dst), name(c->src), expr(c->dst_index), expr(c->src_index);
    } else if (auto* m = std::get_if<SStmatrix>(&s.node)) {
      name(m->buffer), expr(m->index);
      for (Expr& x : m->values) expr(x);
    } else if (auto* bs = std::get_if<SBulkStore>(&s.node)) {
      name(bs->src), name(bs->dst), expr(bs->src_index), expr(bs->dst_index), expr(bs->bytes);
    } else if (auto* ts = std::get_if<STmaStore>(&s.node)) {
      name(ts->src), name(ts->dst), expr(ts->src_index);
      for (Expr& x : ts->coords) expr(x);
    } else if (auto* n = std::get_if<SNamedBarrier>(&s.node)) {
      if (n->id == 1) n->id = bar;
    } else {
      for (const auto& [from, unused] : to) ok = ok && !Mentions(s, from);
    }
    if (!ok) return false;
  }
  return true;
}

// The ping-pong schedule of a persistent deferred-wgmma GEMM whose block is
// one warpgroup (CUTLASS's KernelTmaWarpSpecializedPingpong). Why: with the
// cooperative form (both consumer warpgroups on one tile) no wgmma runs
// while a tile's epilogue moves the accumulators out (registers -> shared ->
// global); on the H200 the tensor pipe idled ~8 % of a 4096^3 GEMM, mostly
// there. Here each consumer warpgroup owns whole tiles: block b's tiles are
// t_j = b + j G (j = 0, 1, ...), warpgroup w runs those with j % 2 == w, so
// one warpgroup's epilogue runs under the other's k-loop.
//
//   mbarrier.init full[S] (1 arrival + bytes), empty[S] (4 arrivals: the owning warpgroup's warps)
//   if (tid >= 256) {                                    producer warpgroup
//     setmaxnreg.dec 40
//     if (tid == 256) { base = 0
//       for tile in [b, tiles) step G { lets; for k { g = base + k - k0
//         if (g >= S) wait empty[g % S] parity (g / S + 1) & 1
//         boxes of k (tile-local coordinates) -> stage g % S on full[g % S] }
//         base += Kt } }
//   } else {                                             consumers: setmaxnreg.inc 232
//     if (tid < 128) W(0) else { let tl_tid = tl_tid - 128 (opaque); W(1) }
//   }
//   W(w): j = w; for tile in [b + w G, tiles) step 2 G { base = j Kt; pre...
//     w = 0: if (j > 0) bar.sync 3, 256      w = 1: bar.sync 4, 256        (the order barriers)
//     for k { g = base + k - k0; wait full[g % S] parity (g / S) & 1; wgmma (wait_group 1)
//             if (k > k0) lane 0 of each warp: arrive empty[(g - 1) % S] }
//     if (tile + G < tiles) bar.arrive (w = 0: 4, w = 1: 3), 256              (hand over)
//     wait_group 0; lane 0: arrive empty[(base + Kt - 1) % S]
//     bar.sync 1 + w, 128; post... (barriers bar.sync 1 + w, 128; shared buffers warpgroup w's own)
//     j += 2 }
//
// One ring: the producer streams the k-steps of t_0, t_1, t_2, ... in that
// order through the S stages, its global k-step g = j Kt + (k - k0)
// continuing across tiles (Kt: the k-loop's static trip count, the same for
// every tile of a GEMM; refused where it is not static). Each warpgroup
// computes the g of its own tiles' k-steps and skips the other's; the
// empty barriers count the 4 warps of whichever warpgroup consumed the
// stage. Stage indices: the lowering's truncmod(k - k0 [+ S - 1], S) with
// base added inside (ShiftStages; k read anywhere else in a stage index is
// refused), coordinates unchanged.
// Parity exactness. An mbarrier parity wait is exact only when the waiter
// is at most one phase away: waiting for phase n (parity n & 1) of a
// barrier that completed c phases succeeds iff c - n is odd, so it must
// hold that c is n or n + 1 when the wait starts. Full barrier of stage s,
// waited for k-step g (n = g / S): (a) c <= n + 1, since phase n + 1 is the
// fill of g + S, which the producer issues only after the release of g,
// which the waiter itself makes after this wait; (b) c >= n, i.e. the fill
// of g - S completed: if g - S is the waiter's own k-step it waited for it;
// else it belongs to an earlier tile of the other warpgroup (ring order),
// and the waiter's order-barrier sync before this tile's k-loop returned
// only after the other warpgroup issued the last wgmma of its previous
// tile -- after its waits for every k-step before this tile's first. (Hence
// the sync must precede the tile's first full wait, not just its wgmma.)
// Empty barrier of stage s at the producer's fill g (waits release g - S,
// phase n = g / S - 1): it is the only waiter and waited for release g - 2S
// before filling g - S, so c >= n; release g cannot precede fill g, so
// c <= n + 1.
// Order barriers (CUTLASS's OrderedSequenceBarrier for the math): A = 3
// (warpgroup 0 syncs), B = 4 (warpgroup 1 syncs), 256 threads each, no
// fence (they order issue only). For n tiles of the block: B gets
// warpgroup 0's arrivals after t_j (j even, j + 1 < n) and warpgroup 1's
// syncs before t_j (j odd < n): floor(n / 2) phases each; A gets warpgroup
// 1's arrivals after t_j (j odd, j + 1 < n) and warpgroup 0's syncs before
// t_j (j even, 2 <= j < n): floor((n - 1) / 2) each; no phase is left part
// arrived. No phase gets a third party: warpgroup 0's arrival on B after
// t_{j+2} follows its sync on A before t_{j+2}, which needs warpgroup 1's
// arrival after t_{j+1}, which follows warpgroup 1's sync on B before
// t_{j+1} -- the phase of warpgroup 0's arrival after t_j (symmetrically
// for A). Deadlock freedom: every wait is for something earlier in the
// order t_0's k-steps, t_1's, ...: a full wait for the producer's fill, the
// producer's empty wait for the release S k-steps back (made by its
// consumer after that k-step's full wait, or after the drain, which waits
// for nothing), an order sync for the other warpgroup's issue of the
// previous tile.
// Shared memory: every shared buffer the consumers touch outside the
// k-loop (the staged epilogue's tile) gets a copy for warpgroup 1 (the
// copies keep the originals' relative offsets, so buffers sharing memory
// still share it); refused where the copies do not fit the budget. Named
// barriers: warpgroup w's bar.sync 1, 128 becomes 1 + w (ids 2-4 must be
// unused). Registers: 384 threads, one block per SM: 168 at entry,
// 128 x 40 + 256 x 232 <= 65536 (the 128x128 f32 accumulator is 128 a
// thread). bulk_store composes: each warpgroup's warp 0 stores its own
// tile, waited for (.read) before its own next epilogue. Risks: the
// consumer body is printed twice (instruction cache);
// the order barriers serialize the two warpgroups' k-loops, so a block with
// one tile runs no faster than the cooperative form. Measured (H200 session
// 12, H100 session 15): correct, 2-64 % slower than the best cooperative
// 128x256 kernel (its 128x128 tile reads 1.33x the operand bytes from the L2).
std::string PingpongGemm(SimtKernel* k, int64_t shared_budget_bytes, int64_t persistent_blocks, int64_t S,
                         const SMbarInit& full, const SFor& lp, const SLet& stage, const SMbarWait& wait, const SStmt& mma,
                         const SStmt& drain, const SBlock& lets, const SBlock& fill_block, const SBlock& head,
                         const SBlock& pre_in, const SBlock& post_in, const std::vector<int64_t>& grid, int64_t tiles,
                         int64_t shared_end, const std::map<std::string, int64_t>& moved_in, std::string* why) {
  const int64_t T = 128;
  auto no = [&](std::string w) {
    *why = std::move(w);
    return std::string();
  };
  const std::optional<int64_t> k0 = ir::FoldInt(lp.start), kn = ir::FoldInt(lp.stop);
  if (!k0 || !kn || *kn <= *k0) {
    return no("the k-loop's trip count is not static and positive (each warpgroup places its tiles' k-steps in the "
              "shared ring by it)");
  }
  const int64_t Kt = *kn - *k0;
  const int64_t kEpi1 = 2, kOrderA = 3, kOrderB = 4;  // warpgroup 1's epilogue barrier; the order barriers
  if (Any(k->body, [&](const SStmt& x) {
        const auto* n = std::get_if<SNamedBarrier>(&x.node);
        return n && n->id >= 2 && n->id <= 4;
      })) {
    return no("named barrier 2, 3 or 4 is already used");
  }
  std::set<std::string> stages_of;
  Any(fill_block, [&](const SStmt& y) {
    if (const auto* t = std::get_if<STmaLoad>(&y.node)) stages_of.insert(t->dst);
    return false;
  });
  // Warpgroup 1's copies of the consumers' shared buffers outside the k-loop.
  std::map<std::string, int64_t> moved = moved_in;
  std::map<std::string, std::string> to;
  int64_t lo = INT64_MAX, hi = 0;
  for (const SimtBuffer& b : k->buffers) {
    if (b.space != Space::kShared || (!Mentions(pre_in, b.name) && !Mentions(post_in, b.name))) continue;
    if (stages_of.count(b.name)) return no(b.name + " (a stage) is used outside the k-loop");
    const int64_t off = moved.count(b.name) ? moved.at(b.name) : b.shared_offset;
    lo = std::min(lo, off);
    hi = std::max(hi, off + BufferBytes(b));
    to[b.name] = b.name + "_wg1";
  }
  // (The copies keep the originals' offsets mod 1024: a swizzled buffer's atom alignment, the bulk
  // store's 16 bytes.)
  const int64_t copies = to.empty() ? shared_end : (shared_end - lo % 1024 + 1023) / 1024 * 1024 + lo % 1024;
  const int64_t end = to.empty() ? shared_end : copies + (hi - lo);
  const std::string empty = full.bar + "_empty";
  const int64_t off = (end + 7) / 8 * 8;
  if (off + 8 * S > shared_budget_bytes) {
    return no("no shared memory for warpgroup 1's own " + std::to_string(hi - lo) + " bytes of epilogue buffers (" +
              std::to_string(off + 8 * S) + " bytes in all, the budget is " + std::to_string(shared_budget_bytes) + ")");
  }
  // The epilogue's copy to global memory as bulk copies (bulk_store; UseBulkEpilogue): each
  // warpgroup's warp 0 issues its own tile's rows (warpgroup 1's from its copy of the tile), and its
  // lanes wait (.read) before that warpgroup's next post-drain barrier -- the one ahead of its next
  // writes of its tile -- and for completion after its tile loop, as in the cooperative form.
  SBlock post_b = post_in;
  const std::string bulk_dst = UseBulkEpilogue(*k, post_b, moved);
  // The consumers' statements before and after the k-loop, per warpgroup.
  SBlock pre[2] = {pre_in, pre_in}, post[2] = {post_b, post_b};
  for (int w = 0; w < 2; ++w) {
    NameBarriers(pre[w], T);
    NameBarriers(post[w], T);
  }
  if (!RenameForWarpgroup(pre[1], to, kEpi1) || !RenameForWarpgroup(post[1], to, kEpi1)) {
    return no("a statement outside the k-loop uses a shared buffer in a way warpgroup 1's copy cannot be given");
  }
  bool pre_shared = false;
  const bool known = Accesses(pre_in, [&](const std::string& name, char) {
    for (const SimtBuffer& b : k->buffers) pre_shared = pre_shared || (b.name == name && b.space == Space::kShared);
  });
  // The k-loop's pieces with global stages.
  const std::string kv = lp.var;
  const ir::DType kt = ir::ExprDType(lp.start);
  const Expr kvar = ir::MakeVar(kv, kt);
  const Expr iter = ToI32(Bin(ir::BinaryOp::kSub, kvar, lp.start));  // k - k0
  const Expr cbase = V("tl_pp_base"), pbase = V("tl_ws_base");
  SBlock fill = fill_block;
  std::set<std::string> fill_lets;
  if (!ShiftFillStages(fill, kv, pbase, S, &fill_lets)) {
    return no("the refill's stage index reads k other than as (k - k0) % S");
  }
  SBlock kstep{SStmt{stage}, mma};
  if (!ShiftStagesIn(kstep, kv, cbase, S)) return no("the k-step's wgmma reads k other than in its stage (k - k0) % S");
  SMbarWait cwait = wait;
  if (!ShiftStages(cwait.index, kv, cbase, S)) return no("the k-step's full wait reads k other than in its stage");
  // Registers (see the file comment): one block of 384 threads per SM.
  const int64_t threads = 2 * T + 128;
  const auto [dec, inc, entry] = SplitRegisters(2 * T, 1);
  const int64_t G = std::min(tiles, persistent_blocks);
  const PersistentTileOrder order;  // the block order (every tile of a GEMM has the same k-steps)
  const Expr b = k->block_vars.empty() ? I(0) : ir::MakeVar(k->block_vars[0], ir::DType::kI32);
  auto lane0 = [&](SStmt s) {
    return SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)), {std::move(s)}, {}}};
  };

  // Producer.
  SBlock producer;
  {
    const Expr g = V("tl_ws_g");
    SBlock step;
    step.push_back(SStmt{SLet{"tl_ws_g", ir::DType::kI32, Bin(ir::BinaryOp::kAdd, pbase, iter)}});
    const Expr parity = Bin(ir::BinaryOp::kBitAnd, Bin(ir::BinaryOp::kAdd, TDiv(g, S), I(1)), I(1));
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGe, g, I(S)), {SStmt{SMbarWait{empty, TMod(g, S), parity}}}, {}}});
    for (SStmt& x : fill) step.push_back(std::move(x));
    SBlock tile = PersistentTileLets(k->block_vars, grid, order);
    for (const SStmt& x : lets) tile.push_back(x);
    tile.push_back(SStmt{SFor{kv, lp.start, lp.stop, ir::MakeInt(1, kt), false, std::move(step)}});
    tile.push_back(SStmt{SAssign{"tl_ws_base", Bin(ir::BinaryOp::kAdd, pbase, I(Kt))}});
    SBlock elected;
    elected.push_back(SStmt{SVar{"tl_ws_base", ir::DType::kI32, I(0)}});
    elected.push_back(SStmt{SFor{"tl_tile", b, I(tiles), I(G), false, std::move(tile)}});
    producer.push_back(SStmt{SSetMaxNReg{false, dec}});
    producer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, Tid(), I(2 * T)), std::move(elected), {}}});
  }
  // Consumer warpgroup w.
  SBlock wg[2];
  for (int w = 0; w < 2; ++w) {
    SBlock& c = wg[w];
    // Warpgroup 1 runs the program's threads 0..127 as its threads 128..255: its own tl_tid (opaque: printed
    // through a fresh name, as the let shadows the block's; the wgmma and stmatrix code reads it too).
    if (w == 1) c.push_back(SStmt{SLet{"tl_tid", ir::DType::kI32, Bin(ir::BinaryOp::kSub, Tid(), I(T)), true}});
    c.push_back(SStmt{SVar{"tl_pp_j", ir::DType::kI32, I(w)}});
    SBlock tile = PersistentTileLets(k->block_vars, grid, order);
    tile.push_back(SStmt{SLet{"tl_pp_base", ir::DType::kI32, Bin(ir::BinaryOp::kMul, V("tl_pp_j"), I(Kt))}});
    for (SStmt& x : pre[w]) tile.push_back(std::move(x));
    // The order barrier: this tile's first full wait (and wgmma) after the other warpgroup issued its previous
    // tile's last wgmma (the parity argument above needs it before the wait).
    if (w == 0) {
      tile.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, V("tl_pp_j"), I(0)), {SStmt{SNamedBarrier{kOrderA, 2 * T, false, false}}}, {}}});
    } else {
      tile.push_back(SStmt{SNamedBarrier{kOrderB, 2 * T, false, false}});
    }
    SBlock step = kstep;
    const Expr g = Bin(ir::BinaryOp::kAdd, cbase, iter);
    step.insert(step.begin() + 1, SStmt{SMbarWait{full.bar, cwait.index, Bin(ir::BinaryOp::kBitAnd, TDiv(g, S), I(1))}});
    SBlock release{lane0(SStmt{SMbarArrive{empty, TMod(Bin(ir::BinaryOp::kSub, g, I(1)), S), true}})};
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, kvar, lp.start), std::move(release), {}}});
    tile.push_back(SStmt{SFor{kv, lp.start, lp.stop, lp.step, false, std::move(step)}});
    // Hand the turn over (every wgmma of the tile issued) where the other warpgroup has a next tile.
    tile.push_back(SStmt{SIf{Bin(ir::BinaryOp::kLt, Bin(ir::BinaryOp::kAdd, V("tl_tile"), I(G)), I(tiles)),
                             {SStmt{SNamedBarrier{w == 0 ? kOrderB : kOrderA, 2 * T, true, false}}},
                             {}}});
    tile.push_back(drain);  // wait_group 0
    tile.push_back(lane0(SStmt{SMbarArrive{empty, TMod(Bin(ir::BinaryOp::kAdd, cbase, I(Kt - 1)), S), true}}));
    const int64_t epi = w == 0 ? 1 : kEpi1;
    if (!bulk_dst.empty()) tile.push_back(BulkWait(true));  // this warpgroup's previous tile's store
    tile.push_back(SStmt{SNamedBarrier{epi, T}});
    for (SStmt& x : post[w]) tile.push_back(std::move(x));
    if (!known || pre_shared) {  // as the cooperative form
      if (!bulk_dst.empty()) tile.push_back(BulkWait(true));
      tile.push_back(SStmt{SNamedBarrier{epi, T}});
    }
    tile.push_back(SStmt{SAssign{"tl_pp_j", Bin(ir::BinaryOp::kAdd, V("tl_pp_j"), I(2))}});
    c.push_back(SStmt{SFor{"tl_tile", Bin(ir::BinaryOp::kAdd, b, I(w * G)), I(tiles), I(2 * G), false, std::move(tile)}});
    if (!bulk_dst.empty()) c.push_back(BulkWait(false));  // its last tile's store, before the kernel exits
  }
  SBlock consumer;
  consumer.push_back(SStmt{SSetMaxNReg{true, inc}});
  consumer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kLt, Tid(), I(T)), std::move(wg[0]), std::move(wg[1])}});

  // The kernel.
  std::vector<SimtBuffer> added;
  for (SimtBuffer& x : k->buffers) {
    if (moved.count(x.name)) x.shared_offset = moved[x.name];
    if (to.count(x.name)) {
      SimtBuffer y = x;
      y.name = to[x.name];
      y.shared_offset = copies + (x.shared_offset - lo);
      added.push_back(y);
    }
  }
  for (SimtBuffer& y : added) k->buffers.push_back(std::move(y));
  k->buffers.push_back({empty, Space::kShared, ir::DType::kU64, S, off, {S}, SmemSwizzle::kNone});
  k->shared_bytes = off + 8 * S;
  SBlock out = head;
  out.push_back(SStmt{full});
  out.push_back(SStmt{SMbarInit{empty, S, T / 32}});
  out.push_back(SStmt{SWarpRoles{2 * T, std::move(producer), std::move(consumer), 2}});
  k->body = std::move(out);
  k->threads = threads;
  k->block[0] = threads;
  k->min_blocks = 1;
  const std::string bulk_form = bulk_dst.empty() ? std::string() : BulkEpilogueForm(*k, "each warpgroup's ");
  k->bulk_epilogues.clear();
  if (!bulk_dst.empty()) k->param_align[bulk_dst] = std::max<int64_t>(k->param_align[bulk_dst], 16);
  k->grid = {ir::MakeInt(G)};
  std::string own;
  for (const auto& [from, unused] : to) own += (own.empty() ? "" : ", ") + from;
  return "warp-specialized: ping-pong: two 128-thread consumer warpgroups, each its own tile (alternate tiles of a "
         "block; bar.sync 3/4, 256 orders their k-loops) + a 128-thread TMA producer warpgroup, " +
         std::to_string(S) + " stages on full/empty mbarriers in one ring across tiles (" + std::to_string(Kt) +
         " k-steps a tile); registers " + std::to_string(entry) + " at entry (__launch_bounds__(" + std::to_string(threads) +
         ", 1)), producer setmaxnreg.dec " + std::to_string(dec) + ", consumers setmaxnreg.inc " + std::to_string(inc) +
         (own.empty() ? std::string() : "; warpgroup 1's own " + own + " (" + std::to_string(hi - lo) + " bytes)") +
         "; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles" +
         (bulk_dst.empty() ? std::string()
                           : "; " + bulk_form + " (waited for before its next tile's epilogue)");
}

std::string WarpSpecializeDeferredGemm(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks,
                                       bool gemm_pingpong, bool ring) {
  if (!Has<STmaLoad>(k->body) || !Has<SWgmma>(k->body)) return "";
  if (!HasDeferredWgmma(k->body)) {
    std::string note = WarpSpecializeSyncLoop(k, shared_budget_bytes, enabled, persistent_blocks, ring);
    if (gemm_pingpong && note.rfind("warp-specialized: ", 0) == 0) {
      note += "; gemm_pingpong ignored: not the deferred-wgmma GEMM k-loop (a k-loop whose compute waits for its own wgmma)";
    }
    return note;
  }
  SBlock body = k->body;  // a copy: the kernel changes only once every check passed
  const std::string no = "not warp-specialized: ";
  if (!enabled) return no + "turned off (GpuLowerOptions::warp_specialize; TL_CUDA_WS=0 at build time)";
  if (k->block[1] != 1 || k->block[2] != 1) return no + "the block is not 1-D";
  const int64_t T = k->threads;
  if (T % 128 != 0 || T + 128 > 1024) return no + std::to_string(T) + " threads (whole warpgroups, at most 896)";
  if (Has<SWarpRoles>(body) || Has<SCopyAsync>(body)) return no + "the kernel has cp.async copies";
  // The one pipeline: its barriers, its phase variable.
  int init = -1, loop = -1;
  for (size_t i = 0; i < body.size(); ++i) {
    if (std::holds_alternative<SMbarInit>(body[i].node)) {
      if (init >= 0) return no + "more than one TMA pipeline";
      init = static_cast<int>(i);
    }
    if (const auto* f = std::get_if<SFor>(&body[i].node)) {
      if (!HasDeferredWgmma(f->body)) continue;
      if (loop >= 0) return no + "more than one pipelined wgmma loop";
      loop = static_cast<int>(i);
    }
  }
  if (init < 0 || loop < 0 || loop < init) return no + "the pipelined wgmma loop is not at the kernel's top level";
  const SMbarInit full = std::get<SMbarInit>(body[static_cast<size_t>(init)].node);
  const int64_t S = full.count;
  SFor& lp = std::get<SFor>(body[static_cast<size_t>(loop)].node);
  if (ir::FoldInt(lp.step) != std::optional<int64_t>(1)) return no + "the k-loop's step is not 1";
  // The loop body, statement by statement (see the file comment).
  const SLet* stage = nullptr;
  const SMbarWait* wait = nullptr;
  const SStmt* mma = nullptr;
  const SIf* refill = nullptr;
  std::string phase;
  const SAssign* flip = nullptr;
  int barriers = 0;
  for (const SStmt& s : lp.body) {
    if (const auto* l = std::get_if<SLet>(&s.node); l && !stage) {
      stage = l;
    } else if (const auto* w = std::get_if<SMbarWait>(&s.node); w && !wait && w->bar == full.bar) {
      wait = w;
    } else if (const auto* a = std::get_if<SAssign>(&s.node); a && phase.empty()) {
      phase = a->name;
      flip = a;
    } else if (std::holds_alternative<SAsyncWait>(s.node) || std::holds_alternative<SAsyncCommit>(s.node)) {
      // cp.async bookkeeping with no cp.async in the kernel: nothing.
    } else if (HasDeferredWgmma(SBlock{s}) && !mma && !Has<STmaLoad>(SBlock{s}) && !Has<SBarrier>(SBlock{s})) {
      mma = &s;
    } else if (std::holds_alternative<SBarrier>(s.node) && mma && !refill) {
      ++barriers;
    } else if (const auto* i = std::get_if<SIf>(&s.node); i && mma && !refill && Has<STmaLoad>(i->then_body)) {
      refill = i;
    } else {
      return no + "the k-loop holds more than its stage wait, one wgmma and its TMA refill";
    }
  }
  if (!stage || !wait || !mma || !refill || barriers != 1) {
    return no + "the k-loop is not the deferred-wgmma TMA pipeline (stage wait, wgmma, barrier, refill)";
  }
  // After the loop: wait_group 0, cp.async.wait 0, barrier.
  const size_t L = static_cast<size_t>(loop);
  if (L + 3 > body.size() || !std::holds_alternative<SWgmmaWait>(body[L + 1].node) ||
      !std::holds_alternative<SAsyncWait>(body[L + 2].node) || !std::holds_alternative<SBarrier>(body[L + 3].node)) {
    return no + "the k-loop is not followed by its drain (wait_group 0, a barrier)";
  }
  // The statements before the loop: the phase variable, the prologue's
  // issues (the producer's loop issues every iteration), the rest runs in the
  // consumers; a name the producer needs must not be bound there.
  SBlock head, pre;
  std::set<std::string> bound;
  for (size_t i = 0; i < L; ++i) {
    SStmt& s = body[i];
    if (static_cast<int>(i) == init) continue;
    if (const auto* v = std::get_if<SVar>(&s.node); v && v->name == phase) continue;
    if (std::holds_alternative<SAsyncCommit>(s.node)) continue;
    if (Has<STmaLoad>(SBlock{s})) {
      const auto* g = std::get_if<SIf>(&s.node);
      if (static_cast<int>(i) < init || !g || !g->else_body.empty()) return no + "an unexpected TMA prologue";
      continue;
    }
    if (Has<SMbarWait>(SBlock{s}) || Has<SMbarArrive>(SBlock{s}) || Has<SWgmma>(SBlock{s})) {
      return no + "mbarrier or wgmma statements outside the k-loop";
    }
    if (static_cast<int>(i) < init) {
      head.push_back(std::move(s));
      continue;
    }
    if (const auto* l = std::get_if<SLet>(&s.node)) bound.insert(l->name);
    if (const auto* v = std::get_if<SVar>(&s.node)) bound.insert(v->name);
    pre.push_back(std::move(s));
  }
  SBlock post(std::make_move_iterator(body.begin() + static_cast<std::ptrdiff_t>(L) + 4),
              std::make_move_iterator(body.end()));
  if (Has<STmaLoad>(post) || Has<SMbarWait>(post) || HasDeferredWgmma(post)) return no + "TMA or wgmma after the k-loop";
  // The producer's loop body: the refill of iteration k + S - 1, at k.
  const std::string kv = lp.var;
  const Expr kvar = ir::MakeVar(kv, ir::ExprDType(lp.start));
  SIf fill = *refill;
  std::set<std::string> names;
  SBlock fill_block{SStmt{std::move(fill)}};
  if (!ProducerCopy(fill_block, kv, ir::FoldConstants(Bin(ir::BinaryOp::kSub, kvar, ir::MakeInt(S - 1, ir::ExprDType(lp.start)))),
                    &names)) {
    return no + "the refill holds more than TMA boxes and an arrival";
  }
  NamesOf(lp.start, &names);
  NamesOf(lp.stop, &names);
  // Names the producer needs from before the loop (a rasterized block order's
  // tile indices): top-level lets of values that read no memory are
  // recomputed by the producer, in their order; anything else stays a reason.
  SBlock lets;
  for (auto it = pre.rbegin(); it != pre.rend(); ++it) {
    const auto* l = std::get_if<SLet>(&it->node);
    if (!l || !names.count(l->name)) continue;
    bool loads = false;
    ir::WalkExpr(l->value, [&](const Expr& x) { loads = loads || ir::As<ir::Load>(x) != nullptr; });
    if (loads) continue;
    NamesOf(l->value, &names);
    lets.insert(lets.begin(), *it);
    bound.erase(l->name);
  }
  for (const std::string& n : names) {
    if (bound.count(n)) return no + "the TMA coordinates use " + n + ", computed before the loop by the consumers";
  }
  // Persistent (persistent_blocks > 0): a static schedule of the output
  // tiles over a grid of G blocks; block b runs tiles b, b + G, ... (the
  // original block order, so a rasterized order stays). Both roles loop over
  // the tiles; the barriers' phases carry on through per-stage phase bits
  // (the consumers' as lowered, the producer's own for the empty barriers);
  // an epilogue tile in a stage buffer's memory moves to its own (the
  // producer fills the next tile's stages meanwhile).
  std::vector<int64_t> grid;
  int64_t tiles = 1;
  int64_t shared_end = k->shared_bytes;
  std::map<std::string, int64_t> moved;  // buffers out of the stages' memory: their new offsets
  if (persistent_blocks > 0) {
    if (!flip || !wait) return no + "persistent: the k-loop's phase bits were not found";
    for (const Expr& g : k->grid) {
      const std::optional<int64_t> v = ir::FoldInt(g);
      if (!v) return no + "persistent: the grid is not static";
      grid.push_back(*v);
      tiles *= *v;
    }
    if (grid.empty() || k->block_vars.size() > grid.size()) return no + "persistent: no grid";
    std::set<std::string> stages_of;
    for (const SStmt& x : fill_block) {
      Any(SBlock{x}, [&](const SStmt& y) {
        if (const auto* t = std::get_if<STmaLoad>(&y.node)) stages_of.insert(t->dst);
        return false;
      });
    }
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const SimtBuffer& b : k->buffers) {
      if (stages_of.count(b.name)) ranges.push_back({b.shared_offset, b.shared_offset + BufferBytes(b)});
    }
    for (const SimtBuffer& b : k->buffers) {
      if (b.space != Space::kShared || stages_of.count(b.name)) continue;
      const int64_t bytes = BufferBytes(b);
      bool overlaps = false;
      for (const auto& [lo, hi] : ranges) overlaps = overlaps || (b.shared_offset < hi && lo < b.shared_offset + bytes);
      if (!overlaps) continue;
      const int64_t align = std::max<int64_t>(128, SwizzleAtomBytes(b.swizzle));  // a swizzled tile starts on its atom
      const int64_t at = (shared_end + align - 1) / align * align;
      if (at + bytes > shared_budget_bytes) return no + "persistent: no shared memory for " + b.name + " outside the stages";
      moved[b.name] = at;
      shared_end = at + bytes;
    }
  }
  // GpuLowerOptions::gemm_pingpong: taken where it applies (PingpongGemm), else ignored with the reason in the note.
  std::string pingpong_ignored;
  if (gemm_pingpong) {
    if (persistent_blocks <= 0) {
      pingpong_ignored = "not persistent (the two consumer warpgroups alternate a block's tiles: tl.persistent)";
    } else if (T != 128) {
      pingpong_ignored = std::to_string(T) + " consumer threads (each consumer warpgroup owns a whole tile: the program's block "
                         "must be one warpgroup, 128 threads)";
    } else {
      std::string why;
      std::string note = PingpongGemm(k, shared_budget_bytes, persistent_blocks, S, full, lp, *stage, *wait, *mma, body[L + 1],
                                      lets, fill_block, head, pre, post, grid, tiles, shared_end, moved, &why);
      if (why.empty()) return note;
      pingpong_ignored = why;
    }
  }
  // The epilogue's copy to global memory as bulk copies (bulk_store): non-persistent, waited for
  // right after the commit, at the kernel's end, only until the tile is read (.read, as CUTLASS's
  // epilogues end: a full wait would hold each block's shared memory, so the next block's start,
  // for the global writes' latency, once per tile); persistent, the issuing lanes wait (.read)
  // before the named barrier that precedes the next tile's writes of the tile, so the store
  // overlaps the next tile's k-loop, and for completion once after the tile loop.
  const std::string bulk_dst = UseBulkEpilogue(*k, post, moved);
  if (!bulk_dst.empty() && persistent_blocks <= 0) post.push_back(BulkWait(true));
  // Shared memory for the empty barriers (8 bytes each).
  const std::string empty = full.bar + "_empty";
  const int64_t off = (shared_end + 7) / 8 * 8;
  if (off + 8 * S > shared_budget_bytes) return no + "no shared memory left for the empty barriers";
  // Registers (see the file comment).
  const int64_t threads = T + 128;
  // Two blocks per SM where their shared memory fits (228 KiB, 1 KiB reserved
  // per block) and the consumers' register arrays (accumulators) leave room
  // under what they would get (216 at 256 threads).
  int64_t reg_elements = 0;
  for (const SimtBuffer& b : k->buffers) {
    if (b.space == Space::kRegister) reg_elements += b.elements;
  }
  const int64_t min_blocks = threads <= 256 && 2 * (off + 8 * S + 1024) <= 233472 && reg_elements + 64 <= 216 ? 2 : 1;
  const auto [dec, inc, entry] = SplitRegisters(T, min_blocks);
  if (inc < dec) return no + "too many threads to give the consumers more registers";
  const int64_t G = std::min(tiles, persistent_blocks * min_blocks);  // persistent: the grid

  for (SimtBuffer& b : k->buffers) {
    if (moved.count(b.name)) b.shared_offset = moved[b.name];
  }
  k->buffers.push_back({empty, Space::kShared, ir::DType::kU64, S, off, {S}, SmemSwizzle::kNone});
  k->shared_bytes = off + 8 * S;
  const ir::DType kt = ir::ExprDType(lp.start);
  auto KInt = [&](int64_t v) { return ir::MakeInt(v, kt); };
  const Expr iter = ToI32(Bin(ir::BinaryOp::kSub, kvar, lp.start));  // i = k - k0
  // Persistent: the block order (every tile of a GEMM has the same k-steps; a kernel where they
  // differ would want TileOrderOf as the synchronous form, untested here so not taken).
  const PersistentTileOrder order;
  // The ring continued across tiles (persistent_ring; ProducerRole): the fill's, the stage let's and
  // the wgmma's stage indices shifted; the consumers' releases below add tl_ring themselves.
  SLet stage_let = *stage;
  SBlock kstep{*mma};
  const bool use_ring = persistent_blocks > 0 && ring && ShiftRing(&fill_block, &stage_let, &kstep, lp, S);
  const Expr ring_at = use_ring ? V("tl_ring") : I(0);  // added to the releases' k-step index
  SBlock producer = ProducerRole(*k, T, dec, S, empty, lp, std::move(lets), std::move(fill_block),
                                 grid, tiles, G, order, "", {}, use_ring);  // grid: empty unless persistent
  // Consumers.
  SBlock consumer;
  consumer.push_back(SStmt{SSetMaxNReg{true, inc}});
  if (persistent_blocks > 0) consumer.push_back(SStmt{SVar{phase, ir::DType::kI32, I(0)}});
  if (use_ring) consumer.push_back(SStmt{SVar{"tl_ring", ir::DType::kI32, I(0)}});
  SBlock& ctile = consumer;  // (persistent: moved into the tile loop below, from `first`)
  const size_t first = consumer.size();
  NameBarriers(pre, T);
  for (SStmt& s : pre) ctile.push_back(std::move(s));
  const size_t pre_end = consumer.size();
  {
    SBlock step;
    step.push_back(SStmt{stage_let});
    const Expr parity = Bin(ir::BinaryOp::kBitAnd, ir::MakeCall(ir::CallOp::kTruncDiv, {iter, I(S)}), I(1));
    if (persistent_blocks > 0) {  // the phase bits as lowered
      step.push_back(SStmt{*wait});
      step.push_back(SStmt{*flip});
    } else {
      step.push_back(SStmt{SMbarWait{full.bar, wait->index, parity}});
    }
    step.push_back(std::move(kstep[0]));
    Expr prev_i = Bin(ir::BinaryOp::kSub, iter, I(1));
    if (use_ring) prev_i = Bin(ir::BinaryOp::kAdd, prev_i, ring_at);
    const Expr prev = ir::MakeCall(ir::CallOp::kTruncMod, {prev_i, I(S)});
    SBlock release{SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                             {SStmt{SMbarArrive{empty, prev, true}}},
                             {}}}};
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, kvar, lp.start), std::move(release), {}}});
    consumer.push_back(SStmt{SFor{kv, lp.start, lp.stop, lp.step, false, std::move(step)}});
  }
  consumer.push_back(std::move(body[L + 1]));  // wait_group 0
  if (persistent_blocks > 0) {  // the last k-step's stage is released after the drain
    Expr last_i = ToI32(Bin(ir::BinaryOp::kSub, Bin(ir::BinaryOp::kSub, lp.stop, lp.start), KInt(1)));
    if (use_ring) last_i = Bin(ir::BinaryOp::kAdd, last_i, ring_at);
    const Expr last = ir::MakeCall(ir::CallOp::kTruncMod, {last_i, I(S)});
    SBlock release{SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                             {SStmt{SMbarArrive{empty, last, true}}},
                             {}}}};
    consumer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, lp.stop, lp.start), std::move(release), {}}});
    if (use_ring) consumer.push_back(AdvanceRing("tl_ring", lp, S));
  }
  if (!bulk_dst.empty() && persistent_blocks > 0) consumer.push_back(BulkWait(true));  // the previous tile's store
  consumer.push_back(SStmt{SNamedBarrier{1, T}});
  NameBarriers(post, T);
  for (SStmt& s : post) consumer.push_back(std::move(s));
  if (persistent_blocks > 0) {
    // The epilogue's shared tile is free for the next tile: the named
    // barrier after the next tile's drain already orders this tile's reads of
    // it before the next one's writes (no shared buffer overlaps a stage any
    // more), unless the statements before the k-loop touch shared memory.
    // Without the barrier here a warpgroup done with its stores starts the
    // next tile's wgmma while the others still store (their epilogue overlaps
    // its MMAs).
    bool pre_shared = false;
    const bool known = Accesses(SBlock(consumer.begin() + static_cast<std::ptrdiff_t>(first), consumer.begin() + static_cast<std::ptrdiff_t>(pre_end)),
                                [&](const std::string& name, char) {
                                  for (const SimtBuffer& b : k->buffers) pre_shared = pre_shared || (b.name == name && b.space == Space::kShared);
                                });
    if (!known || pre_shared) {
      if (!bulk_dst.empty()) consumer.push_back(BulkWait(true));
      consumer.push_back(SStmt{SNamedBarrier{1, T}});
    }
    SBlock tile = PersistentTileLets(k->block_vars, grid, order);
    for (size_t i = first; i < consumer.size(); ++i) tile.push_back(std::move(consumer[i]));
    consumer.resize(first);
    consumer.push_back(TileLoop(*k, tiles, G, std::move(tile)));
    if (!bulk_dst.empty()) consumer.push_back(BulkWait(false));  // the last tile's store, before the kernel exits
  }

  SBlock out = std::move(head);
  out.push_back(SStmt{full});
  out.push_back(SStmt{SMbarInit{empty, S, T / 32}});
  out.push_back(SStmt{SWarpRoles{T, std::move(producer), std::move(consumer)}});
  k->body = std::move(out);
  k->threads = threads;
  k->block[0] = threads;
  k->min_blocks = min_blocks;
  std::string bulk;
  if (!bulk_dst.empty()) {
    k->param_align[bulk_dst] = std::max<int64_t>(k->param_align[bulk_dst], 16);
    bulk = "; " + BulkEpilogueForm(*k, "") +
           (persistent_blocks > 0 ? " (waited for before the next tile's epilogue)" : " (waited for at the end)");
  }
  k->bulk_epilogues.clear();
  std::string persistent;
  if (persistent_blocks > 0) {
    k->grid = {ir::MakeInt(G)};
    persistent = "; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles" +
                 RingNote(true, ring, use_ring);
  }
  return "warp-specialized: " + std::to_string(T) + " consumer threads + a 128-thread TMA producer warpgroup, " +
         std::to_string(S) + " stages on full/empty mbarriers, no block barrier in the k-loop; registers " +
         std::to_string(entry) + " at entry (__launch_bounds__(" + std::to_string(threads) + ", " +
         std::to_string(min_blocks) + ")), producer setmaxnreg.dec " + std::to_string(dec) + ", consumers setmaxnreg.inc " +
         std::to_string(inc) + persistent + bulk + (pingpong_ignored.empty() ? "" : "; gemm_pingpong ignored: " + pingpong_ignored);
}

}  // namespace

std::string WarpSpecializeGemmPipeline(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks,
                                       bool gemm_pingpong, bool persistent_ring) {
  const std::string note =
      WarpSpecializeDeferredGemm(k, shared_budget_bytes, enabled, persistent_blocks, gemm_pingpong, persistent_ring);
  // A persistent schedule that cannot be had (its epilogue tile moved out of
  // the stages' memory overflows the budget: hopper_bench's 128x256x64 at 4
  // stages) must not cost the warp specialization itself: the kernel as
  // without persistent_blocks, and the note says why it is not persistent.
  const std::string no = "not warp-specialized: ";
  if (persistent_blocks <= 0 || note.rfind(no, 0) != 0) return note;
  const std::string plain = WarpSpecializeDeferredGemm(k, shared_budget_bytes, enabled, 0, gemm_pingpong, persistent_ring);
  // Refused anyway: that reason (but where only persistence could take the tiles copied by TMA before
  // the k-loop, GpuLowerOptions::tma_pre_copies, the persistent form's: LowerToSimt reports it).
  if (plain.rfind("warp-specialized: ", 0) != 0) return plain.find("tma_pre_copies") != std::string::npos ? note : plain;
  const std::string why = note.substr(no.size());
  return plain + "; not persistent: " + (why.rfind("persistent: ", 0) == 0 ? why.substr(12) : why);
}

}  // namespace tl::gpu
