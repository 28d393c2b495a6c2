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
// wait_group 0 (.sync.aligned: every lane of the warp is past it), so at the
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
// phases carry on through per-stage phase bits (a tile's k-steps restart at
// stage 0, both roles alike; a tile with no k-step touches no barrier), so
// the producer streams the next tile's first stages while the consumers run
// this tile's post... (O's epilogue) and the next one's pre... (its Q tile).
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

// The producer warpgroup of both forms: setmaxnreg.dec `dec`, then thread T
// alone runs `lets` and, per k-step of `lp`, waits until the consumers
// released the stage's previous contents and issues `fill` (the refill,
// already rewritten to load iteration k). The i-th k-step (i = k - k0) uses
// stage i % S; its wait is skipped the first time the stage is used.
// Non-persistent (grid empty): use j = i / S of the stage waits for release
// j - 1, parity (j + 1) & 1 of empty[stage]. Persistent: the same loop per
// tile b, b + G, ... (block indices as lets of the tile under `order`, the
// one the consumers' tile loop uses), and because every
// tile restarts at stage 0 the parity is tracked per stage instead -- bit s
// of `used` says whether stage s was used, bit s of `ephase` the parity its
// next wait expects.
// A tile copied before the k-loop (`q_load`: its boxes and the arrival on
// its full barrier; persistent only) is loaded once per tile after the
// first k-step's fill (FlashAttention-3's order: the next tile's first K/V
// stage is not held up behind Q's release), or alone where the tile has no
// k-step; the n-th load (n >= 1, counted in tl_ws_qn) first waits for the
// consumers' release n - 1 of it, parity (n - 1) & 1 of `q_empty`.
SBlock ProducerRole(const SimtKernel& k, int64_t T, int64_t dec, int64_t S, const std::string& empty, const SFor& lp,
                    SBlock lets, SBlock fill, const std::vector<int64_t>& grid, int64_t tiles, int64_t G,
                    const PersistentTileOrder& order, const std::string& q_empty = "", SBlock q_load = {}) {
  const bool persistent = !grid.empty();
  const Expr iter = ToI32(Bin(ir::BinaryOp::kSub, ir::MakeVar(lp.var, ir::ExprDType(lp.start)), lp.start));
  SBlock step;
  if (persistent) {
    const Expr st = ir::MakeVar("tl_ws_s", ir::DType::kI32);
    const Expr used = ir::MakeVar("tl_ws_used", ir::DType::kI32), eph = ir::MakeVar("tl_ws_ephase", ir::DType::kI32);
    auto bit = [&](const Expr& v) { return Bin(ir::BinaryOp::kBitAnd, Bin(ir::BinaryOp::kShr, v, st), I(1)); };
    step.push_back(SStmt{SLet{"tl_ws_s", ir::DType::kI32, ir::MakeCall(ir::CallOp::kTruncMod, {iter, I(S)})}});
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
  if (persistent) {
    SBlock tile = PersistentTileLets(k.block_vars, grid, order);
    for (SStmt& x : elected) tile.push_back(std::move(x));
    elected.clear();
    elected.push_back(SStmt{SVar{"tl_ws_used", ir::DType::kI32, I(0)}});
    elected.push_back(SStmt{SVar{"tl_ws_ephase", ir::DType::kI32, I(0)}});
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

// The k-loop of a TMA pipeline whose compute waits for its own wgmma groups
// (FlashAttention: QK^T, softmax on register fragments, P V), as producer
// and consumers; `enabled`, persistent_blocks as WarpSpecializeGemmPipeline.
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

std::string WarpSpecializeSyncLoop(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks) {
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
    return std::pair<int64_t, int64_t>{b.shared_offset, b.shared_offset + b.elements * std::max(1, ir::BitWidth(b.dtype) / 8)};
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
      const int64_t bytes = b.elements * std::max(1, ir::BitWidth(b.dtype) / 8);
      const int64_t at = (shared_end + 127) / 128 * 128;
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
  const int64_t cap = 65536 / (threads * min_blocks) / 8 * 8;
  const int64_t dec = 40;
  const int64_t inc = std::min<int64_t>((cap * threads - 128 * dec) / T / 8 * 8, 240);
  const int64_t entry = std::min(cap, inc);
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
  SBlock producer = ProducerRole(*k, T, dec, S, empty, lp, std::move(lets), std::move(fill_block),
                                 grid, tiles, G, order, q_empty, std::move(q_load));  // grid: empty unless persistent
  // Consumers: the statements before the loop, published to every consumer
  // and to the async proxy (the named barrier prints its proxy fence) before
  // the first wgmma reads them; per k-step the full wait, the compute (a
  // named barrier first where it writes shared memory), the release.
  SBlock consumer;
  consumer.push_back(SStmt{SSetMaxNReg{true, inc}});
  if (persistent) consumer.push_back(SStmt{SVar{phase, ir::DType::kI32, I(0)}});
  for (const std::string& q : q_phases) consumer.push_back(SStmt{SVar{q, ir::DType::kI32, I(0)}});
  const size_t first = consumer.size();  // (persistent: from here on the tile loop's body)
  NameBarriers(pre, T);
  for (SStmt& s : pre) consumer.push_back(std::move(s));
  for (SStmt& s : q_wait) consumer.push_back(std::move(s));  // the pre-loop tile (its phase bit as lowered)
  consumer.push_back(SStmt{SNamedBarrier{1, T}});
  {
    SBlock step;
    step.push_back(SStmt{*stage});
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
    if (b.space != Space::kShared || off % 16 != 0) return "";
    post.erase(post.begin() + at);
    post.insert(post.begin() + at, be.issue.begin(), be.issue.end());
    return be.dst;
  }
  return "";
}
// Warp 0's lanes (the bulk copies' issuers): `if (tl_tid < 32) cp.async.bulk.wait_group[.read] 0`.
SStmt BulkWait(bool read) { return SStmt{SIf{Bin(ir::BinaryOp::kLt, Tid(), I(32)), {SStmt{SBulkWait{0, read}}}, {}}}; }

std::string WarpSpecializeDeferredGemm(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks) {
  if (!Has<STmaLoad>(k->body) || !Has<SWgmma>(k->body)) return "";
  if (!HasDeferredWgmma(k->body)) return WarpSpecializeSyncLoop(k, shared_budget_bytes, enabled, persistent_blocks);
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
      if (stages_of.count(b.name)) ranges.push_back({b.shared_offset, b.shared_offset + b.elements * std::max(1, ir::BitWidth(b.dtype) / 8)});
    }
    for (const SimtBuffer& b : k->buffers) {
      if (b.space != Space::kShared || stages_of.count(b.name)) continue;
      const int64_t bytes = b.elements * std::max(1, ir::BitWidth(b.dtype) / 8);
      bool overlaps = false;
      for (const auto& [lo, hi] : ranges) overlaps = overlaps || (b.shared_offset < hi && lo < b.shared_offset + bytes);
      if (!overlaps) continue;
      const int64_t at = (shared_end + 127) / 128 * 128;
      if (at + bytes > shared_budget_bytes) return no + "persistent: no shared memory for " + b.name + " outside the stages";
      moved[b.name] = at;
      shared_end = at + bytes;
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
  const int64_t cap = 65536 / (threads * min_blocks) / 8 * 8;
  const int64_t dec = 40;
  const int64_t inc = std::min<int64_t>((cap * threads - 128 * dec) / T / 8 * 8, 240);
  // ptxas' count at entry (what its resource report says): the cap, or the
  // largest setmaxnreg.inc where that is lower (seen with ptxas 13.0).
  const int64_t entry = std::min(cap, inc);
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
  SBlock producer = ProducerRole(*k, T, dec, S, empty, lp, std::move(lets), std::move(fill_block),
                                 grid, tiles, G, order);  // grid: empty unless persistent
  // Consumers.
  SBlock consumer;
  consumer.push_back(SStmt{SSetMaxNReg{true, inc}});
  if (persistent_blocks > 0) consumer.push_back(SStmt{SVar{phase, ir::DType::kI32, I(0)}});
  SBlock& ctile = consumer;  // (persistent: moved into the tile loop below, from `first`)
  const size_t first = consumer.size();
  NameBarriers(pre, T);
  for (SStmt& s : pre) ctile.push_back(std::move(s));
  const size_t pre_end = consumer.size();
  {
    SBlock step;
    step.push_back(SStmt{*stage});
    const Expr parity = Bin(ir::BinaryOp::kBitAnd, ir::MakeCall(ir::CallOp::kTruncDiv, {iter, I(S)}), I(1));
    if (persistent_blocks > 0) {  // the phase bits as lowered
      step.push_back(SStmt{*wait});
      step.push_back(SStmt{*flip});
    } else {
      step.push_back(SStmt{SMbarWait{full.bar, wait->index, parity}});
    }
    step.push_back(*mma);
    const Expr prev = ir::MakeCall(ir::CallOp::kTruncMod, {Bin(ir::BinaryOp::kSub, iter, I(1)), I(S)});
    SBlock release{SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                             {SStmt{SMbarArrive{empty, prev, true}}},
                             {}}}};
    step.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, kvar, lp.start), std::move(release), {}}});
    consumer.push_back(SStmt{SFor{kv, lp.start, lp.stop, lp.step, false, std::move(step)}});
  }
  consumer.push_back(std::move(body[L + 1]));  // wait_group 0
  if (persistent_blocks > 0) {  // the last k-step's stage is released after the drain
    const Expr last = ir::MakeCall(ir::CallOp::kTruncMod, {ToI32(Bin(ir::BinaryOp::kSub, Bin(ir::BinaryOp::kSub, lp.stop, lp.start), KInt(1))), I(S)});
    SBlock release{SStmt{SIf{Bin(ir::BinaryOp::kEq, ir::MakeCall(ir::CallOp::kTruncMod, {Tid(), I(32)}), I(0)),
                             {SStmt{SMbarArrive{empty, last, true}}},
                             {}}}};
    consumer.push_back(SStmt{SIf{Bin(ir::BinaryOp::kGt, lp.stop, lp.start), std::move(release), {}}});
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
    bulk = std::string("; epilogue stored by warp 0 as one bulk copy per row (") +
           (persistent_blocks > 0 ? "waited for before the next tile's epilogue)" : "waited for at the end)");
  }
  k->bulk_epilogues.clear();
  std::string persistent;
  if (persistent_blocks > 0) {
    k->grid = {ir::MakeInt(G)};
    persistent = "; persistent: " + std::to_string(G) + " blocks over " + std::to_string(tiles) + " tiles";
  }
  return "warp-specialized: " + std::to_string(T) + " consumer threads + a 128-thread TMA producer warpgroup, " +
         std::to_string(S) + " stages on full/empty mbarriers, no block barrier in the k-loop; registers " +
         std::to_string(entry) + " at entry (__launch_bounds__(" + std::to_string(threads) + ", " +
         std::to_string(min_blocks) + ")), producer setmaxnreg.dec " + std::to_string(dec) + ", consumers setmaxnreg.inc " +
         std::to_string(inc) + persistent + bulk;
}

}  // namespace

std::string WarpSpecializeGemmPipeline(SimtKernel* k, int64_t shared_budget_bytes, bool enabled, int64_t persistent_blocks) {
  const std::string note = WarpSpecializeDeferredGemm(k, shared_budget_bytes, enabled, persistent_blocks);
  // A persistent schedule that cannot be had (its epilogue tile moved out of
  // the stages' memory overflows the budget: hopper_bench's 128x256x64 at 4
  // stages) must not cost the warp specialization itself: the kernel as
  // without persistent_blocks, and the note says why it is not persistent.
  const std::string no = "not warp-specialized: ";
  if (persistent_blocks <= 0 || note.rfind(no, 0) != 0) return note;
  const std::string plain = WarpSpecializeDeferredGemm(k, shared_budget_bytes, enabled, 0);
  // Refused anyway: that reason (but where only persistence could take the tiles copied by TMA before
  // the k-loop, GpuLowerOptions::tma_pre_copies, the persistent form's: LowerToSimt reports it).
  if (plain.rfind("warp-specialized: ", 0) != 0) return plain.find("tma_pre_copies") != std::string::npos ? note : plain;
  const std::string why = note.substr(no.size());
  return plain + "; not persistent: " + (why.rfind("persistent: ", 0) == 0 ? why.substr(12) : why);
}

}  // namespace tl::gpu
