// WarpgroupPingpong: see lower.h for the contract.
//
// FlashAttention's warp-specialized k-loop runs two consumer warpgroups that
// each issue their own wgmma groups (64 query rows each) and then run the
// softmax on CUDA cores. Left alone the two drift into lockstep: both issue
// QK^T together, both wait, both run the softmax together while the tensor
// cores idle. FlashAttention-3 orders the issue with two named barriers (its
// "warp scheduler barriers"): warpgroup 0 issues, hands the turn to
// warpgroup 1, which issues while warpgroup 0 runs its softmax, and so on.
//
// The consumers' k-loop (WarpSpecializeSyncLoop's form) becomes, with
// A = kPingpongBarrier (warpgroup 0 waits on it), B = A + 1 (warpgroup 1
// waits on it), k in [k0, stop):
//
//   let stage; wait full[stage]
//   ...                                      (statements before the first wgmma)
//   if (tl_tid < 128) { if (k > k0) bar.sync A, 256 } else { bar.sync B, 256 }
//   wgmma issue(s)                           (the first top-level wgmma: issue only;
//                                             then any further issues without a wait,
//                                             also at the head of both branches of a
//                                             following if -- the overlap form's P V)
//   if (tl_tid < 128) { bar.arrive B, 256 } else { if (k + 1 < stop) bar.arrive A, 256 }
//   [wgmma.wait_group 0]                     (where the first wgmma was synchronous)
//   ... the rest of the k-step (softmax, P V, the stage's release)
//
// Deadlock freedom and balance. Both warpgroups run the same k-loop (its
// bounds read no thread index: checked), and each executes at most one sync
// and at most one arrive per k-step, at the k-step's top level (under no
// condition but the warpgroup and the first/last k-step; the overlap form's
// arrive is in both branches of its `if`, so once on either path). Write W0(i), W1(i)
// for warpgroup 0's / 1's k-step i (i = k - k0, n = stop - k0 steps).
//  - B: W0(i) arrives (128 threads) for every i < n, W1(i) syncs (128) for
//    every i < n: n phases of 256, each completing when both have come.
//  - A: W1(i) arrives for i < n - 1, W0(i) syncs for 1 <= i < n: n - 1
//    phases of 256. No phase is left half full at the loop's exit, so the
//    barriers are idle afterwards (n = 0: neither is touched).
//  - No phase ever gets a third party: W0's arrival on B in step i + 1
//    comes after its sync on A in step i + 1, which needs W1(i)'s arrival,
//    which W1 makes after its own sync on B in step i; so W0 never arrives
//    twice on one phase of B. Symmetrically W1's arrival on A in step i + 1
//    follows its sync on B in i + 1, which follows W0's sync on A in i + 1.
//  - Order: the issues run W0(0), W1(0), W0(1), W1(1), ...: W0(i)'s sync
//    waits only on W1(i - 1)'s arrival and W1(i)'s only on W0(i)'s; each
//    arrival follows its warpgroup's own issue without waiting on anything
//    but the full barrier of that k-step, which the producer completes
//    after both warpgroups released step i - S (an earlier step in this
//    order). The wait graph follows the order, so it has no cycle.
//  - The consumers' other named barrier (1, all 256 threads) is only before
//    and after the loop, reached by each warpgroup after its last sync or
//    arrive; the loop itself may hold no other named barrier (checked).
// The ids are checked to be unused elsewhere in the kernel; hardware has 16
// (0 is __syncthreads). The check sees only the kernel's own statements:
// named barriers (bar.sync / bar.arrive / named_barrier_*) inside CUDA
// source imported with T.import_source are invisible to it, so such a
// helper that uses ids 2 or 3 would clash with the pingpong's.
#include <functional>
#include <map>
#include <set>

#include "simt_build.h"
#include "simt_walk.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

using ir::Expr;

using namespace simt_build;  // I, Bin, Tid

bool HasWgmma(const SBlock& b) {
  return Any(b, [](const SStmt& s) { return std::holds_alternative<SWgmma>(s.node); });
}
bool IsAsyncIssue(const SStmt& s) {
  const auto* w = std::get_if<SWgmma>(&s.node);
  return w && w->wait_pending == -1;
}
// The leading run of asynchronous wgmma issues of b: how many statements.
size_t IssueRun(const SBlock& b, size_t from) {
  size_t i = from;
  while (i < b.size() && IsAsyncIssue(b[i])) ++i;
  return i;
}

// The names `e` reads, followed through the lets of `lets`; false when one
// of them is tl_tid or a mutable variable (either may differ between the
// warpgroups).
bool Uniform(const Expr& e, const std::map<std::string, Expr>& lets, const std::set<std::string>& vars,
             std::set<std::string>* seen) {
  bool ok = true;
  ir::WalkExpr(e, [&](const Expr& x) {
    const auto* v = ir::As<ir::VarRef>(x);
    if (!v || !ok || !seen->insert(v->name).second) return;
    if (v->name == "tl_tid" || vars.count(v->name)) {
      ok = false;
      return;
    }
    auto it = lets.find(v->name);
    if (it != lets.end()) ok = Uniform(it->second, lets, vars, seen);
  });
  return ok;
}

SStmt ByWarpgroup(SBlock wg0, SBlock wg1) {
  return SStmt{SIf{Bin(ir::BinaryOp::kLt, Tid(), I(128)), std::move(wg0), std::move(wg1)}};
}
SStmt Guarded(Expr cond, SStmt s) { return SStmt{SIf{std::move(cond), {std::move(s)}, {}}}; }
SStmt Sync(int64_t id) { return SStmt{SNamedBarrier{id, 256, false, false}}; }
SStmt Arrive(int64_t id) { return SStmt{SNamedBarrier{id, 256, true, false}}; }

// Puts `handover` on every path through `b` (which starts holding the turn)
// exactly once, right after the path's first issues: a synchronous first
// wgmma becomes its issue, the handover, then its wait_group 0; a run of
// asynchronous issues is followed by the handover, or where an if holding
// wgmmas follows the run, each of its branches gets one (recursively); an if
// holding the path's first wgmma passes the turn into both branches; a path
// with no wgmma hands over at once. `top`: b is the k-step itself, where
// later statements may issue more (the plain loop's P V); inside a branch
// nothing is issued after the handover (the other warpgroup's turn). "" or
// why not; `what` describes the first form placed.
std::string PlaceHandover(SBlock* b, const SStmt& handover, bool top, std::string* what) {
  size_t first = 0;
  while (first < b->size() && !HasWgmma(SBlock{(*b)[first]})) ++first;
  if (first == b->size()) {
    b->insert(b->begin(), handover);
    return "";
  }
  auto issued_after = [&](size_t from) {
    return !top && HasWgmma(SBlock(b->begin() + static_cast<std::ptrdiff_t>(from), b->end()));
  };
  if (auto* br = std::get_if<SIf>(&(*b)[first].node)) {
    for (SBlock* arm : {&br->then_body, &br->else_body}) {
      if (std::string why = PlaceHandover(arm, handover, false, what); !why.empty()) return why;
    }
    if (issued_after(first + 1)) return "a wgmma is issued after the if that holds the k-step's first issues";
    if (top) *what = "in each branch of the k-step's if: " + *what;
    return "";
  }
  auto* w = std::get_if<SWgmma>(&(*b)[first].node);
  if (!w) return "the k-step's first wgmma is nested in a loop";
  if (w->wait_pending != 0 && w->wait_pending != -1) {
    return "the k-step's first wgmma keeps " + std::to_string(w->wait_pending) + " older groups in flight";
  }
  if (w->wait_pending == 0) {
    // Synchronous (the plain k-loop's QK^T): issue, hand over, then wait.
    SWgmma issue = *w;
    issue.wait_pending = -1;
    (*b)[first] = SStmt{issue};
    b->insert(b->begin() + static_cast<std::ptrdiff_t>(first) + 1, handover);
    b->insert(b->begin() + static_cast<std::ptrdiff_t>(first) + 2, SStmt{SWgmmaWait{0, {issue.c}}});
    if (what->empty()) *what = "its first wgmma (" + issue.c + ") issued, then wait_group 0";
    if (issued_after(first + 3)) return "a branch issues a wgmma after its first, synchronous one";
    return "";
  }
  // Asynchronous issues (the overlap k-loop): the run of issues, and where
  // an if follows, the issues at the head of each branch.
  const size_t end = IssueRun(*b, first);
  if (what->empty()) *what = std::to_string(end - first) + " asynchronous wgmma issue(s)";
  if (auto* br = end < b->size() ? std::get_if<SIf>(&(*b)[end].node) : nullptr; br && HasWgmma(br->then_body)) {
    for (SBlock* arm : {&br->then_body, &br->else_body}) {
      const size_t e = IssueRun(*arm, 0);
      if (HasWgmma(SBlock(arm->begin() + static_cast<std::ptrdiff_t>(e), arm->end()))) {
        return "a branch after the first wgmma issues more than leading asynchronous wgmmas";
      }
      arm->insert(arm->begin() + static_cast<std::ptrdiff_t>(e), handover);
    }
    if (what->find("both branches") == std::string::npos) *what += " and the leading issues of both branches of the if after them";
    if (issued_after(end + 1)) return "a wgmma is issued after the if that follows the first issues";
    return "";
  }
  b->insert(b->begin() + static_cast<std::ptrdiff_t>(end), handover);
  if (issued_after(end + 1)) return "a branch issues a wgmma after its leading issues";
  return "";
}

}  // namespace

std::string WarpgroupPingpong(SimtKernel* k) {
  const std::string no = "no warpgroup pingpong: ";
  if (k->body.empty() || !std::holds_alternative<SWarpRoles>(k->body.back().node)) {
    return no + "the kernel is not warp-specialized";
  }
  SWarpRoles roles = std::get<SWarpRoles>(k->body.back().node);  // a copy: the kernel changes only at the end
  if (roles.consumers != 256) {
    return no + std::to_string(roles.consumers) + " consumer threads (exactly two consumer warpgroups take turns)";
  }
  const int64_t A = kPingpongBarrier, B = kPingpongBarrier + 1;
  if (Any(k->body, [&](const SStmt& s) {
        const auto* n = std::get_if<SNamedBarrier>(&s.node);
        return n && (n->id == A || n->id == B);
      })) {
    return no + "named barrier " + std::to_string(A) + " or " + std::to_string(B) + " is already used";
  }
  // The consumers' k-loop: the top-level loop waiting on the full barriers
  // (persistent: the top-level loop of the tile loop's body; the protocol
  // leaves both barriers idle at each k-loop's exit, so it restarts per tile).
  SBlock* cb = &roles.consumer;
  int loop = -1;
  std::vector<const SBlock*> outer;  // blocks enclosing the k-loop's block (lets bound there)
  for (int depth = 0; depth < 2; ++depth) {
    loop = -1;
    for (size_t i = 0; i < cb->size(); ++i) {
      const auto* f = std::get_if<SFor>(&(*cb)[i].node);
      if (f && Any(f->body, [](const SStmt& s) { return std::holds_alternative<SMbarWait>(s.node); })) {
        if (loop >= 0) return no + "more than one consumer k-loop";
        loop = static_cast<int>(i);
      }
    }
    if (loop < 0) break;
    auto& f = std::get<SFor>((*cb)[static_cast<size_t>(loop)].node);
    if (f.var != "tl_tile") break;
    outer.push_back(cb);
    cb = &f.body;
  }
  SBlock& c = *cb;
  if (loop < 0) return no + "no consumer k-loop (only the synchronous-compute form, FlashAttention's, takes turns)";
  SFor& lp = std::get<SFor>(c[static_cast<size_t>(loop)].node);
  if (ir::FoldInt(lp.step) != std::optional<int64_t>(1)) return no + "the k-loop's step is not 1";
  if (Any(lp.body, [](const SStmt& s) {
        return std::holds_alternative<SNamedBarrier>(s.node) || std::holds_alternative<SBarrier>(s.node);
      })) {
    return no + "the k-loop has a barrier among the consumers (its compute writes shared memory): they cannot run apart";
  }
  // Both warpgroups must run the same number of k-steps.
  std::map<std::string, Expr> lets;
  std::set<std::string> vars;
  auto bind = [&](const SBlock& b, size_t end) {
    for (size_t i = 0; i < end && i < b.size(); ++i) {
      if (const auto* l = std::get_if<SLet>(&b[i].node)) lets[l->name] = l->value;
      if (const auto* v = std::get_if<SVar>(&b[i].node)) vars.insert(v->name);
      if (const auto* a = std::get_if<SAssign>(&b[i].node)) vars.insert(a->name);
    }
  };
  bind(k->body, k->body.size() - 1);
  for (const SBlock* o : outer) bind(*o, o->size());
  bind(c, static_cast<size_t>(loop));
  // A name bound inside a nested block before the loop (not seen above) is a
  // kernel parameter, a block index or a symbol otherwise: uniform.
  for (const Expr& e : {lp.start, lp.stop}) {
    std::set<std::string> seen;
    if (!Uniform(e, lets, vars, &seen)) {
      return no + "the k-loop's bounds (" + ir::Print(lp.start) + ", " + ir::Print(lp.stop) +
             ") may differ between the warpgroups";
    }
  }
  // The first statement of the k-step holding a wgmma: a wgmma, or an if
  // whose branches each start their own issues (the overlap form's step
  // kinds); the turn is taken right before it.
  SBlock& body = lp.body;
  size_t first = 0;
  while (first < body.size() && !HasWgmma(SBlock{body[first]})) ++first;
  if (first == body.size()) return no + "no wgmma in the k-loop";
  const Expr kv = ir::MakeVar(lp.var, ir::ExprDType(lp.start));
  const Expr not_first = Bin(ir::BinaryOp::kGt, kv, lp.start);
  const Expr not_last =
      Bin(ir::BinaryOp::kLt, Bin(ir::BinaryOp::kAdd, kv, ir::MakeInt(1, ir::ExprDType(lp.start))), lp.stop);
  const SStmt handover = ByWarpgroup({Arrive(B)}, {Guarded(not_last, Arrive(A))});
  SBlock out(std::make_move_iterator(body.begin()), std::make_move_iterator(body.begin() + static_cast<std::ptrdiff_t>(first)));
  out.push_back(ByWarpgroup({Guarded(not_first, Sync(A))}, {Sync(B)}));
  SBlock rest(std::make_move_iterator(body.begin() + static_cast<std::ptrdiff_t>(first)), std::make_move_iterator(body.end()));
  std::string what;
  if (std::string why = PlaceHandover(&rest, handover, true, &what); !why.empty()) return no + why;
  for (SStmt& s : rest) out.push_back(std::move(s));
  body = std::move(out);
  k->body.back().node = std::move(roles);
  return "warpgroup pingpong: the two consumer warpgroups take turns issuing " + what + " per k-step (bar.sync " +
         std::to_string(A) + "/" + std::to_string(B) + ", 256 before the issue, bar.arrive on the other's after it; "
         "warpgroup 0 skips its first sync, warpgroup 1 its last arrival)";
}

}  // namespace tl::gpu
