// ClusterMulticast: see lower.h for the contract.
//
// A warp-specialized sm_90a kernel (warp_specialize.cc) as clusters of two
// blocks that share TMA traffic. Blocks 2j and 2j + 1 (__cluster_dims__(2,
// 1, 1): cluster rank = blockIdx.x & 1; persistent: tiles 2j and 2j + 1 of a
// block pair, the tile loop's start and step being even) usually need one
// operand tile in common (matmul raster 0: the same A row block, adjacent B
// column blocks; a rasterized order with an even panel: the same B column
// block). Instead of reading it from the L2 twice, each producer loads half
// of it with cp.async.bulk.tensor...multicast::cluster, which writes the box
// into BOTH blocks' shared memory at the same offset and completes its bytes
// on the barrier at the same offset in each.
//
// Which tile is shared is decided at run time, per k-step and per stage
// buffer, by the elected producer thread: it evaluates the boxes'
// coordinates for itself and for its peer (the lets they depend on, copied
// as tl_peer_* with the block index -- persistent: the tile index -- xor 1)
// and multicasts only where they are equal. The test is symmetric (each of
// the two evaluates the same pair of expressions), so both producers always
// take the same branch, and no shape, raster order or grid edge can make one
// block wait for bytes its peer does not send. Where the coordinates are the
// same expressions after the substitution (raster 0's A tile) the test is
// dropped at compile time.
//
//   mbarrier.init full[S] (1 arrival), empty[S] (twice the releasing warps: those of both blocks;
//                         2 T / 32, or 8 in the ping-pong, where one warpgroup owns a tile)
//   barrier.cluster                                 the peer's barriers exist
//   producer (elected thread):
//     rank = blockIdx.x & 1; tl_peer_* lets
//     for k: wait empty[s] (both blocks released it), then per stage buffer:
//       if (its box coordinates == the peer's) {
//         an even number of boxes (B's 64-column panels): rank 0 issues the
//           first half, rank 1 the second, each multicast, expecting 2x its bytes;
//         one box (A): each issues its half rows (a tensor map of half boxes)
//           at row offset rank * half, multicast, expecting the whole box's bytes
//       } else { its own boxes, as before }
//       arrive full[s]
//       (whole boxes only where every box of the run has the same bytes, else
//        each box's half rows; a coordinate that depends on the block through
//        a name with no peer copy -- a let outside the elected thread's block
//        -- refuses the cluster: it cannot be compared with the peer's)
//   consumers: every release of a stage arrives on empty[s] of this block,
//     then of the peer (mapa + mbarrier.arrive.shared::cluster: the default
//     .release.cta, as CUTLASS's ClusterBarrier::arrive; .release.cluster made
//     every arrival a cluster-scope fence: H200 ncu 'membar' stalls, 1.6x slower)
//   barrier.cluster                                 before any block exits
//
// Invariants. (1) Each block's full[s] phase receives exactly the bytes it
// expects: per shared tile its own half plus the peer's (same branch, same
// box split), per private tile its own boxes. (2) No box lands in a stage a
// consumer of either block still reads: a producer waits for empty[s], whose
// phase needs the releases of both blocks' consumers; the bytes of fill n+1
// reach the peer's full[s] only after the peer's consumers released fill n,
// i.e. after that phase completed. (3) Both blocks issue and consume the
// same number of k-steps (the k-loop's bounds do not depend on the block;
// persistent: an even tile count, so both tiles of a pair exist), so every
// expected arrival happens. (4) A consumer arrives on its own empty barrier
// before the peer's, and a release of fill n+1 by the peer needs that fill,
// which needs this block's release of fill n (on the peer's barrier, so on
// its own before): every phase n of a block's empty[s] includes all of its
// own warps' releases of fill n. A peer's arrival may still run a phase
// ahead, harmlessly: after a private fill, a peer warp's release of fill
// n+1 can land before another peer warp's release of fill n and complete
// phase n early. Only remote arrivals of peer warps that already released
// their own block's copy are then missing, what follows is this block's
// private write into its own stage, and a multicast fill needs both
// producers, i.e. both blocks' phases; the slip is under the doubled count,
// so the later phases and the parity waits stay exact. (The interpreter
// runs each role in lockstep, so it never shows this order.)
// (5) All bytes destined to a block have landed once its consumers waited
// for the last k-step's full barrier, so an epilogue tile that reuses a
// stage's memory is not overwritten by the peer; remote arrivals on the
// empty barriers may come later, hence the cluster barrier before exit.
#include <algorithm>
#include <functional>
#include <set>

#include "simt_build.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/swizzle.h"

namespace tl::gpu {
namespace {

using ir::Expr;

using namespace simt_build;  // I, Bin

bool Mentions(const Expr& e, const std::set<std::string>& names) {
  bool hit = false;
  ir::WalkExpr(e, [&](const Expr& x) {
    if (const auto* v = ir::As<ir::VarRef>(x)) hit = hit || names.count(v->name) > 0;
  });
  return hit;
}

Expr Subst(const Expr& e, const std::map<std::string, Expr>& m) {
  return ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
    const auto* v = ir::As<ir::VarRef>(x);
    if (!v) return std::nullopt;
    auto it = m.find(v->name);
    if (it == m.end()) return std::nullopt;
    return ir::ExprDType(it->second) == v->dtype ? it->second : ir::MakeCast(v->dtype, it->second);
  });
}

// Names whose value depends on the block (or the persistent tile): the
// block variables, tl_tile, and every let / var / loop variable computed
// from them, in statement order.
void BlockDerived(const SBlock& b, std::set<std::string>* d) {
  for (const SStmt& s : b) {
    if (const auto* l = std::get_if<SLet>(&s.node); l && Mentions(l->value, *d)) d->insert(l->name);
    if (const auto* v = std::get_if<SVar>(&s.node); v && v->init && Mentions(*v->init, *d)) d->insert(v->name);
    if (const auto* a = std::get_if<SAssign>(&s.node); a && Mentions(a->value, *d)) d->insert(a->name);
    if (const auto* f = std::get_if<SFor>(&s.node)) {
      if (Mentions(f->start, *d) || Mentions(f->stop, *d) || Mentions(f->step, *d)) d->insert(f->var);
      BlockDerived(f->body, d);
    }
    if (const auto* i = std::get_if<SIf>(&s.node)) {
      BlockDerived(i->then_body, d);
      BlockDerived(i->else_body, d);
    }
    if (const auto* w = std::get_if<SWarpRoles>(&s.node)) {
      BlockDerived(w->producer, d);
      BlockDerived(w->consumer, d);
    }
  }
}

struct Rewriter {
  SimtKernel* k;
  std::map<std::string, Expr> peer;  // name -> its value in the peer block
  std::string why;                    // set on a refusal
  // Names that may differ between the two blocks of a cluster (computed from
  // the x block index or the persistent tile). Only lets inside the elected
  // producer block get a peer copy; a box coordinate that reads such a name
  // without one would be taken as the same in both blocks -- a multicast of
  // the wrong tile -- so it is refused instead.
  std::set<std::string> differs;
  int groups = 0, shared_static = 0, halved = 0;

  bool Same(const Expr& a, const Expr& b) { return ir::Print(a) == ir::Print(b); }

  // The multicast form of one stage buffer's boxes `g` (same destination).
  SBlock Multicast(const std::vector<STmaLoad>& g) {
    const Expr rank = ir::MakeVar("tl_cta_rank", ir::DType::kI32);
    SBlock out;
    const size_t n = g.size();
    // Whole boxes only where every box carries the same bytes: each rank's
    // boxes expect twice their own bytes (theirs plus the peer's matching
    // half), which is what arrives only when both halves of the run are
    // equal. (A copy's panels always are; boxes of two copies into one buffer
    // need not be: they take the half-rows path below, exact per box.)
    const bool equal = std::all_of(g.begin(), g.end(), [&](const STmaLoad& t) { return t.bytes == g[0].bytes; });
    if (n % 2 == 0 && equal) {  // whole boxes: rank 0 the first half, rank 1 the second
      SBlock first, second;
      for (size_t i = 0; i < n; ++i) {
        STmaLoad t = g[i];
        t.multicast = true;
        t.bytes *= 2;  // this box and the peer's matching one complete here
        (i < n / 2 ? first : second).push_back(SStmt{std::move(t)});
      }
      out.push_back(SStmt{SIf{Bin(ir::BinaryOp::kEq, rank, I(0)), std::move(first), std::move(second)}});
      return out;
    }
    for (const STmaLoad& t : g) {  // each box's half rows: rows [rank * h, rank * h + h)
      const TensorMapDesc m = k->tensor_maps.at(static_cast<size_t>(t.map));
      const size_t rank_n = m.box.size();
      size_t d = 0;
      while (d < rank_n && m.box[d] == 1) ++d;
      if (d + 1 >= rank_n || m.box[d] % 2 != 0) {
        why = "a box of " + k->params.at(static_cast<size_t>(m.param)).name + " has no outer dim of even extent to split";
        return {};
      }
      const int64_t esize = std::max(1, ir::BitWidth(k->params.at(static_cast<size_t>(m.param)).dtype) / 8);
      int64_t inner = 1;
      for (size_t x = d + 1; x < rank_n; ++x) inner *= m.box[x];
      const int64_t half = m.box[d] / 2, half_elems = half * inner;
      const int64_t atom = std::max<int64_t>(128, SwizzleAtomBytes(m.swizzle));
      if ((half_elems * esize) % atom != 0) {
        why = "half a box of " + k->params.at(static_cast<size_t>(m.param)).name + " is " + std::to_string(half_elems * esize) +
              " bytes, not a multiple of " + std::to_string(atom) + " (the destination's alignment)";
        return {};
      }
      TensorMapDesc hm = m;
      hm.box[d] = half;
      int map = -1;
      for (size_t i = 0; i < k->tensor_maps.size(); ++i) {
        const TensorMapDesc& x = k->tensor_maps[i];
        if (x.param == hm.param && x.box == hm.box && x.swizzle == hm.swizzle) map = static_cast<int>(i);
      }
      if (map < 0) {
        map = static_cast<int>(k->tensor_maps.size());
        k->tensor_maps.push_back(hm);
        ++halved;
      }
      STmaLoad h = t;
      h.map = map;
      h.coords[d] = ir::FoldConstants(Bin(ir::BinaryOp::kAdd, h.coords[d], Bin(ir::BinaryOp::kMul, rank, I(half))));
      h.dst_index = ir::FoldConstants(Bin(ir::BinaryOp::kAdd, h.dst_index, Bin(ir::BinaryOp::kMul, rank, I(half_elems))));
      h.multicast = true;  // bytes: the whole box's (this half and the peer's)
      out.push_back(SStmt{std::move(h)});
    }
    return out;
  }

  // One run of consecutive boxes into the same buffer -> the guarded form.
  SBlock Group(const std::vector<STmaLoad>& g) {
    ++groups;
    Expr cond = ir::MakeBool(true);
    bool always = true;
    for (const STmaLoad& t : g) {
      for (const Expr& c : t.coords) {
        std::set<std::string> unknown;
        ir::WalkExpr(c, [&](const Expr& x) {
          if (const auto* v = ir::As<ir::VarRef>(x); v && differs.count(v->name) && !peer.count(v->name)) unknown.insert(v->name);
        });
        if (!unknown.empty()) {
          why = "a box coordinate (" + ir::Print(c) + ") reads " + *unknown.begin() +
                ", which depends on the block but has no value for the peer block";
          return {};
        }
        const Expr pc = ir::FoldConstants(Subst(c, peer));
        if (Same(c, pc)) continue;
        always = false;
        cond = Bin(ir::BinaryOp::kAnd, cond, Bin(ir::BinaryOp::kEq, c, pc));
      }
    }
    SBlock mc = Multicast(g);
    if (!why.empty()) return {};
    if (always) {
      ++shared_static;
      return mc;
    }
    SBlock own;
    for (const STmaLoad& t : g) own.push_back(SStmt{t});
    return SBlock{SStmt{SIf{ir::FoldConstants(cond), std::move(mc), std::move(own)}}};
  }

  // Peer lets after the lets that need them; box runs replaced.
  void Block(SBlock& b) {
    SBlock out;
    std::vector<STmaLoad> run;
    auto flush = [&] {
      if (run.empty()) return;
      for (SStmt& s : Group(run)) out.push_back(std::move(s));
      run.clear();
    };
    for (SStmt& s : b) {
      if (!why.empty()) return;
      if (auto* t = std::get_if<STmaLoad>(&s.node)) {
        if (!run.empty() && run.front().dst != t->dst) flush();
        run.push_back(*t);
        continue;
      }
      flush();
      if (const auto* lp = std::get_if<SLet>(&s.node)) {
        const SLet l = *lp;
        std::set<std::string> keys;
        for (const auto& [n, e] : peer) keys.insert(n);
        out.push_back(std::move(s));
        if (Mentions(l.value, keys)) {
          const std::string pn = "tl_peer_" + l.name;
          out.push_back(SStmt{SLet{pn, l.dtype, ir::FoldConstants(Subst(l.value, peer))}});
          peer[l.name] = ir::MakeVar(pn, l.dtype);
        }
        continue;
      }
      if (auto* f = std::get_if<SFor>(&s.node)) Block(f->body);
      if (auto* i = std::get_if<SIf>(&s.node)) {
        Block(i->then_body);
        Block(i->else_body);
      }
      out.push_back(std::move(s));
    }
    flush();
    b = std::move(out);
  }
};

bool HasTma(const SBlock& b) {
  for (const SStmt& s : b) {
    if (std::holds_alternative<STmaLoad>(s.node)) return true;
    if (const auto* f = std::get_if<SFor>(&s.node); f && HasTma(f->body)) return true;
    if (const auto* i = std::get_if<SIf>(&s.node); i && (HasTma(i->then_body) || HasTma(i->else_body))) return true;
  }
  return false;
}

// The innermost loop holding a TMA box directly (or under ifs).
const SFor* KLoop(const SBlock& b) {
  for (const SStmt& s : b) {
    if (const auto* f = std::get_if<SFor>(&s.node); f && HasTma(f->body)) {
      const SFor* inner = KLoop(f->body);
      return inner ? inner : f;
    }
    if (const auto* i = std::get_if<SIf>(&s.node)) {
      if (const SFor* f = KLoop(i->then_body)) return f;
      if (const SFor* f = KLoop(i->else_body)) return f;
    }
  }
  return nullptr;
}

const SFor* FindFor(const SBlock& b, const std::string& var) {
  for (const SStmt& s : b) {
    if (const auto* f = std::get_if<SFor>(&s.node)) {
      if (f->var == var) return f;
      if (const SFor* x = FindFor(f->body, var)) return x;
    }
    if (const auto* i = std::get_if<SIf>(&s.node)) {
      if (const SFor* x = FindFor(i->then_body, var)) return x;
      if (const SFor* x = FindFor(i->else_body, var)) return x;
    }
  }
  return nullptr;
}

int MarkPeerArrivals(SBlock& b, const std::string& bar) {
  int n = 0;
  for (SStmt& s : b) {
    if (auto* a = std::get_if<SMbarArrive>(&s.node); a && a->bar == bar) {
      a->peer = true;
      ++n;
    }
    if (auto* f = std::get_if<SFor>(&s.node)) n += MarkPeerArrivals(f->body, bar);
    if (auto* i = std::get_if<SIf>(&s.node)) n += MarkPeerArrivals(i->then_body, bar) + MarkPeerArrivals(i->else_body, bar);
  }
  return n;
}

}  // namespace

std::string ClusterMulticast(SimtKernel* kernel, int64_t cluster) {
  const std::string no = "not clustered: ";
  if (cluster != 2) return no + "cluster " + std::to_string(cluster) + " (only clusters of 2 blocks are supported)";
  if (kernel->cluster != 1) return no + "the kernel already has a cluster";
  SimtKernel k = *kernel;  // changed only once every check passed
  // The warp-specialized kernel's top level: ..., init full, init empty, roles.
  int roles = -1, full = -1, empty = -1;
  for (size_t i = 0; i < k.body.size(); ++i) {
    if (std::holds_alternative<SWarpRoles>(k.body[i].node)) roles = static_cast<int>(i);
    if (std::holds_alternative<SMbarInit>(k.body[i].node)) (full < 0 ? full : empty) = static_cast<int>(i);
  }
  if (roles < 0 || empty < 0 || empty > roles) return no + "the kernel is not warp-specialized (no producer warpgroup to multicast)";
  SMbarInit& einit = std::get<SMbarInit>(k.body[static_cast<size_t>(empty)].node);
  // The consumers' releases are found by this barrier's name, and its count is doubled for the
  // peer's: it has to be the empty barrier warp_specialize.cc made for the full one (<full>_empty).
  const std::string& fbar = std::get<SMbarInit>(k.body[static_cast<size_t>(full)].node).bar;
  if (einit.bar != fbar + "_empty") {
    return no + "the kernel's second mbarrier (" + einit.bar + ") is not the empty barrier of " + fbar;
  }
  SWarpRoles& wr = std::get<SWarpRoles>(k.body[static_cast<size_t>(roles)].node);
  // The ping-pong GEMM (GpuLowerOptions::gemm_pingpong) composes: its producer streams the k-steps of
  // the block's tiles b, b + G, b + 2G, ... through one ring, so with G and the tile count even the
  // peer's j-th tile is this block's j-th ^ 1 (the pairing below), the same warpgroup (j % 2) consumes
  // it in both blocks, and each stage's release counts that warpgroup's warps in both blocks (the
  // doubled count). Persistent, every epilogue tile (both warpgroups' copies) lies outside the stages'
  // memory, so invariant (5) holds. Checked in the interpreter (Cluster.ClusteredGemmsMatchFloat64).
  if (k.block_vars.empty() || k.grid.empty()) return no + "no grid";
  // The elected producer thread's block.
  SBlock* elected = nullptr;
  for (SStmt& s : wr.producer) {
    if (auto* i = std::get_if<SIf>(&s.node); i && HasTma(i->then_body)) elected = &i->then_body;
  }
  if (!elected) return no + "the producer issues no TMA box";
  const SFor* tile_loop = FindFor(*elected, "tl_tile");
  const bool persistent = tile_loop != nullptr;
  const std::optional<int64_t> gx = ir::FoldInt(k.grid[0]);
  if (!gx || *gx % 2 != 0) {
    return no + "the grid's x extent " + (gx ? std::to_string(*gx) : ir::Print(k.grid[0])) +
           " is not a static multiple of 2 (a cluster of 2 blocks along x)";
  }
  if (persistent) {
    const std::optional<int64_t> tiles = ir::FoldInt(tile_loop->stop), step = ir::FoldInt(tile_loop->step);
    if (!tiles || *tiles % 2 != 0 || !step || *step % 2 != 0) {
      return no + "persistent: " + (tiles ? std::to_string(*tiles) : ir::Print(tile_loop->stop)) +
             " tiles over blocks stepping by " + ir::Print(tile_loop->step) +
             " (both need to be even: the two blocks of a cluster walk tile pairs 2j, 2j + 1)";
    }
    // Block b's tiles are b + i * step, so its peer's (b ^ 1) are its own ^ 1 -- the tl_tile ^ 1
    // the peer lets are evaluated for -- only where the loop starts at the launch's x block index.
    if (ir::Print(tile_loop->start) != k.block_vars[0]) {
      return no + "persistent: the tile loop starts at " + ir::Print(tile_loop->start) + ", not at the block index " +
             k.block_vars[0] + " (the peer's tile would not be this one's ^ 1)";
    }
  }
  std::set<std::string> derived(k.block_vars.begin(), k.block_vars.end());
  derived.insert("tl_tile");
  BlockDerived(k.body, &derived);
  const SFor* kl = KLoop(*elected);
  if (!kl) return no + "the producer's TMA boxes are not in a loop";
  if (Mentions(kl->start, derived) || Mentions(kl->stop, derived)) {
    return no + "the k-loop's bounds [" + ir::Print(kl->start) + ", " + ir::Print(kl->stop) +
           ") depend on the block (the two blocks of a cluster must run the same k-steps)";
  }
  for (const SStmt& s : *elected) {  // a var the boxes' coordinates read could differ in the peer
    if (const auto* v = std::get_if<SVar>(&s.node); v && derived.count(v->name)) {
      return no + "the producer's var " + v->name + " depends on the block";
    }
  }
  // The producer: peer lets, guarded multicast boxes.
  Rewriter rw{&k, {}, {}, {k.block_vars[0], "tl_tile"}};
  BlockDerived(k.body, &rw.differs);  // the cluster is along x: the other block indices are the same in both
  const Expr bx = ir::MakeVar(k.block_vars[0], ir::DType::kI32);
  if (persistent) {
    const Expr t = ir::MakeVar("tl_tile", ir::DType::kI32);
    rw.peer["tl_tile"] = Bin(ir::BinaryOp::kBitXor, t, I(1));
  } else {
    rw.peer[k.block_vars[0]] = Bin(ir::BinaryOp::kBitXor, bx, I(1));
  }
  rw.Block(*elected);
  if (!rw.why.empty()) return no + rw.why;
  // The cluster rank: the launch's blockIdx.x & 1 (bound before any tile lets shadow it).
  elected->insert(elected->begin(), SStmt{SLet{"tl_cta_rank", ir::DType::kI32, Bin(ir::BinaryOp::kBitAnd, bx, I(1))}});
  // The consumers release each stage in both blocks.
  const int arrivals = MarkPeerArrivals(wr.consumer, einit.bar);
  if (arrivals == 0) return no + "the consumers never release a stage on " + einit.bar;
  einit.arrivals *= 2;
  k.body.insert(k.body.begin() + empty + 1, SStmt{SBarrier{true}});
  k.body.push_back(SStmt{SBarrier{true}});
  k.cluster = 2;
  *kernel = std::move(k);
  return "cluster 2: __cluster_dims__(2, 1, 1), blocks 2j and 2j + 1" + std::string(persistent ? " (persistent: tiles 2j, 2j + 1)" : "") +
         "; " + std::to_string(rw.groups) + " stage buffer(s) multicast where both blocks load the same tile (" +
         std::to_string(rw.shared_static) + " always, the rest tested per k-step)" +
         (rw.halved ? ", " + std::to_string(rw.halved) + " half-box tensor map(s)" : std::string()) +
         "; stages released on both blocks' empty barriers (" + std::to_string(einit.arrivals) + " arrivals)";
}

}  // namespace tl::gpu
