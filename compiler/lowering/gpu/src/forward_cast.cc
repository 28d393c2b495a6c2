// ForwardCastIntoWgmmaA: see lower.h for the contract.
//
// FlashAttention's P·V reads P as wgmma's register operand A: the program
// writes `T.copy(acc_s, acc_s_cast)` (f32 accumulator -> f16/bf16 fragment of
// the same layout), which lowers to a loop nest
//
//   for ... (constant bounds) { lets...; acc_s_cast[X] = cast<bf16>(acc_s[X]) }
//
// and the wgmma packs acc_s_cast's slots pairwise (cvt.rn.bf16x2.f32). In the
// CUDA printer a 16-bit register element is an f32 register holding the
// rounded value, so per element the copy costs a round trip (cvt to 16 bits,
// shift back) and the fragment costs a second register array as large as the
// accumulator's -- ~3 instructions per score and 32-64 registers per thread in
// a loop bound by issue slots and registers. Packing acc_s's own f32 slots
// gives the same bits (round-to-nearest of the f32 value once, as the copy
// then the exact re-pack of an already representable value did), so where the
// cast fragment has no other use the copy goes away and the wgmma reads the
// f32 accumulator.
//
// Conditions (each checked; otherwise the kernel is left alone):
//  - the nest's loops have constant bounds and its innermost body is lets and
//    ONE store D[X] = cast<T>(S[X]) (optionally cast<T>(cast<f32>(S[X]))),
//    D a register buffer of T in {f16, bf16}, S an f32 register buffer, the
//    same index expression X on both sides (so slot x of D is slot x of S);
//  - enumerating the loops, X takes every slot of D exactly once (a partial
//    copy would leave stale slots the wgmma still reads);
//  - a later statement of the same block is an SWgmma whose a_frag is D; in
//    between, nothing writes S (no store, no wgmma or mma accumulating into it,
//    no extern call taking its address) and nothing mentions D;
//  - nothing else in the kernel mentions D, and D's address is never taken.
#include <functional>
#include <map>
#include <set>

#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

using ir::Expr;

// Whether expression e reads buffer `name`.
bool Reads(const Expr& e, const std::string& name) {
  bool hit = false;
  ir::WalkExpr(e, [&](const Expr& x) {
    if (const auto* l = ir::As<ir::Load>(x); l && l->buffer == name) hit = true;
  });
  return hit;
}

// Whether statement s (nested statements included) reads or writes buffer `name`.
bool Mentions(const SStmt& s, const std::string& name);
bool Mentions(const SBlock& b, const std::string& name) {
  for (const SStmt& s : b) {
    if (Mentions(s, name)) return true;
  }
  return false;
}
bool Mentions(const SStmt& s, const std::string& name) {
  auto r = [&](const Expr& e) { return Reads(e, name); };
  return std::visit(
      [&](const auto& n) -> bool {
        using N = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<N, SLet> || std::is_same_v<N, SAssign>) {
          return r(n.value);
        } else if constexpr (std::is_same_v<N, SVar>) {
          return n.init && r(*n.init);
        } else if constexpr (std::is_same_v<N, SStore>) {
          return n.buffer == name || r(n.index) || r(n.value);
        } else if constexpr (std::is_same_v<N, SAtomicAdd>) {
          bool m = n.buffer == name || r(n.index) || r(n.value);
          for (const Expr& e : n.more) m = m || r(e);
          return m;
        } else if constexpr (std::is_same_v<N, SFor>) {
          return r(n.start) || r(n.stop) || r(n.step) || Mentions(n.body, name);
        } else if constexpr (std::is_same_v<N, SIf>) {
          return r(n.cond) || Mentions(n.then_body, name) || Mentions(n.else_body, name);
        } else if constexpr (std::is_same_v<N, SMma> || std::is_same_v<N, SAmdMma>) {
          return n.a == name || n.b == name || n.c == name || r(n.a_base) || r(n.b_base) || r(n.k0);
        } else if constexpr (std::is_same_v<N, SCopyVec> || std::is_same_v<N, SCopyAsync>) {
          return n.dst == name || n.src == name || r(n.dst_index) || r(n.src_index);
        } else if constexpr (std::is_same_v<N, STmaLoad>) {
          return n.dst == name || n.bar == name;
        } else if constexpr (std::is_same_v<N, SMbarInit> || std::is_same_v<N, SMbarArrive> || std::is_same_v<N, SMbarWait>) {
          return n.bar == name;
        } else if constexpr (std::is_same_v<N, SWgmma>) {
          return n.a.buffer == name || n.b.buffer == name || n.c == name || n.a_frag == name;
        } else if constexpr (std::is_same_v<N, SWgmmaWait>) {
          for (const std::string& c : n.c) {
            if (c == name) return true;
          }
          return false;
        } else if constexpr (std::is_same_v<N, SCallExtern>) {
          for (const SExternArg& a : n.args) {
            if (a.buffer == name || r(a.value)) return true;
          }
          return false;
        } else if constexpr (std::is_same_v<N, SWarpRoles>) {
          return Mentions(n.producer, name) || Mentions(n.consumer, name);
        } else {
          return false;  // SBarrier, SLaneReduce (a scalar), SComment, commits/waits, setmaxnreg, named barriers
        }
      },
      s.node);
}

// Whether statement s (nested included) may write register buffer `name`.
bool Writes(const SStmt& s, const std::string& name) {
  bool hit = false;
  std::function<void(const SBlock&)> walk = [&](const SBlock& b) {
    for (const SStmt& x : b) {
      if (const auto* st = std::get_if<SStore>(&x.node); st && st->buffer == name) hit = true;
      if (const auto* w = std::get_if<SWgmma>(&x.node); w && w->c == name) hit = true;
      if (const auto* m = std::get_if<SMma>(&x.node); m && m->c == name) hit = true;
      if (const auto* m = std::get_if<SAmdMma>(&x.node); m && m->c == name) hit = true;
      if (const auto* c = std::get_if<SCallExtern>(&x.node)) {
        for (const SExternArg& a : c->args) hit = hit || (a.address && a.buffer == name);
      }
      if (const auto* f = std::get_if<SFor>(&x.node)) walk(f->body);
      if (const auto* i = std::get_if<SIf>(&x.node)) {
        walk(i->then_body);
        walk(i->else_body);
      }
      if (const auto* w = std::get_if<SWarpRoles>(&x.node)) {
        walk(w->producer);
        walk(w->consumer);
      }
    }
  };
  walk(SBlock{s});
  return hit;
}

// How many non-compound statements (and loop bounds / conditions) anywhere in
// b mention buffer `name`.
int LeafMentions(const SBlock& b, const std::string& name) {
  int n = 0;
  for (const SStmt& s : b) {
    if (const auto* f = std::get_if<SFor>(&s.node)) {
      n += (Reads(f->start, name) || Reads(f->stop, name) || Reads(f->step, name)) ? 1 : 0;
      n += LeafMentions(f->body, name);
    } else if (const auto* i = std::get_if<SIf>(&s.node)) {
      n += Reads(i->cond, name) ? 1 : 0;
      n += LeafMentions(i->then_body, name) + LeafMentions(i->else_body, name);
    } else if (const auto* w = std::get_if<SWarpRoles>(&s.node)) {
      n += LeafMentions(w->producer, name) + LeafMentions(w->consumer, name);
    } else {
      n += Mentions(s, name) ? 1 : 0;
    }
  }
  return n;
}

struct CastCopy {
  std::string dst, src;
};

// The cast-copy nest of the file comment, with every slot of dst written once;
// nullopt otherwise. `bufs`: the kernel's buffers by name.
std::optional<CastCopy> MatchCastCopy(const SStmt& s, const std::map<std::string, const SimtBuffer*>& bufs) {
  struct Loop {
    std::string var;
    int64_t start, stop, step;
  };
  std::vector<Loop> loops;
  const SStmt* at = &s;
  const SStore* store = nullptr;
  while (true) {
    const auto* f = std::get_if<SFor>(&at->node);
    if (!f) return std::nullopt;
    const std::optional<int64_t> a = ir::FoldInt(f->start), b = ir::FoldInt(f->stop), c = ir::FoldInt(f->step);
    if (!a || !b || !c || *c <= 0) return std::nullopt;
    loops.push_back({f->var, *a, *b, *c});
    const SStmt* inner = nullptr;
    for (const SStmt& x : f->body) {
      if (std::holds_alternative<SLet>(x.node) || std::holds_alternative<SComment>(x.node)) continue;
      if (inner) return std::nullopt;
      inner = &x;
    }
    if (!inner) return std::nullopt;
    if (const auto* st = std::get_if<SStore>(&inner->node)) {
      store = st;
      break;
    }
    at = inner;
  }
  const auto* cast = ir::As<ir::Cast>(store->value);
  if (!cast) return std::nullopt;
  const Expr* v = &*cast->value;
  if (const auto* c2 = ir::As<ir::Cast>(*v); c2 && c2->dtype == ir::DType::kF32) v = &*c2->value;
  const auto* load = ir::As<ir::Load>(*v);
  if (!load || load->indices.size() != 1 || !(load->indices[0] == store->index)) return std::nullopt;
  auto d = bufs.find(store->buffer), src = bufs.find(load->buffer);
  if (d == bufs.end() || src == bufs.end() || d->second->space != Space::kRegister || src->second->space != Space::kRegister) {
    return std::nullopt;
  }
  if ((d->second->dtype != ir::DType::kF16 && d->second->dtype != ir::DType::kBF16) || cast->dtype != d->second->dtype ||
      src->second->dtype != ir::DType::kF32 || d->second->elements != src->second->elements) {
    return std::nullopt;
  }
  // The lets of the nest may feed the index: substitute them as the loops
  // run. Enumerate every iteration (fragments hold at most a few hundred
  // slots per thread; give up past a bound).
  int64_t trips = 1;
  for (const Loop& l : loops) {
    trips *= std::max<int64_t>(0, (l.stop - l.start + l.step - 1) / l.step);
    if (trips > 4096) return std::nullopt;
  }
  if (trips != d->second->elements) return std::nullopt;
  std::vector<int> seen(static_cast<size_t>(d->second->elements), 0);
  std::vector<int64_t> iv(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) iv[i] = loops[i].start;
  for (int64_t t = 0; t < trips; ++t) {
    const Expr x = ir::FoldConstants(ir::RewriteExpr(store->index, [&](const Expr& e) -> std::optional<Expr> {
      const auto* r = ir::As<ir::VarRef>(e);
      if (!r) return std::nullopt;
      for (size_t i = 0; i < loops.size(); ++i) {
        if (loops[i].var == r->name) return ir::MakeInt(iv[i], r->dtype);
      }
      return std::nullopt;
    }));
    const std::optional<int64_t> slot = ir::FoldInt(x);
    if (!slot || *slot < 0 || *slot >= d->second->elements || seen[static_cast<size_t>(*slot)]++) return std::nullopt;
    for (size_t i = loops.size(); i-- > 0;) {  // the innermost loop varies fastest
      iv[i] += loops[i].step;
      if (iv[i] < loops[i].stop) break;
      iv[i] = loops[i].start;
    }
  }
  return CastCopy{store->buffer, load->buffer};
}

int ForwardIn(SBlock& b, SimtKernel* k, const std::map<std::string, const SimtBuffer*>& bufs,
              std::vector<std::string>* forwarded) {
  int n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (auto* f = std::get_if<SFor>(&b[i].node)) n += ForwardIn(f->body, k, bufs, forwarded);
    if (auto* c = std::get_if<SIf>(&b[i].node)) {
      n += ForwardIn(c->then_body, k, bufs, forwarded);
      n += ForwardIn(c->else_body, k, bufs, forwarded);
    }
    if (auto* w = std::get_if<SWarpRoles>(&b[i].node)) {
      n += ForwardIn(w->producer, k, bufs, forwarded);
      n += ForwardIn(w->consumer, k, bufs, forwarded);
    }
    const std::optional<CastCopy> cc = MatchCastCopy(b[i], bufs);
    if (!cc || k->addressed.count(cc->dst)) continue;
    // The consuming wgmma, with nothing in between writing the source or touching the copy.
    size_t j = i + 1;
    bool clean = true;
    for (; j < b.size(); ++j) {
      if (const auto* w = std::get_if<SWgmma>(&b[j].node); w && w->a_frag == cc->dst) break;
      if (Writes(b[j], cc->src) || Mentions(b[j], cc->dst)) {
        clean = false;
        break;
      }
    }
    if (!clean || j == b.size()) continue;
    SWgmma& w = std::get<SWgmma>(b[j].node);
    if (w.c == cc->src || w.wait_pending != 0) continue;
    // No other mention of the copy anywhere in the kernel: its one store and the wgmma.
    if (LeafMentions(k->body, cc->dst) != 2) continue;
    w.a_frag = cc->src;
    forwarded->push_back(cc->dst + " -> " + cc->src);
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++n;
  }
  return n;
}

}  // namespace

std::string ForwardCastIntoWgmmaA(SimtKernel* k) {
  std::map<std::string, const SimtBuffer*> bufs;
  for (const SimtBuffer& b : k->buffers) bufs[b.name] = &b;
  std::vector<std::string> forwarded;
  if (ForwardIn(k->body, k, bufs, &forwarded) == 0) return "";
  std::set<std::string> gone;
  std::string list;
  for (const std::string& f : forwarded) {
    gone.insert(f.substr(0, f.find(' ')));
    list += (list.empty() ? "" : ", ") + f;
  }
  std::vector<SimtBuffer> keep;
  for (SimtBuffer& b : k->buffers) {
    if (!gone.count(b.name)) keep.push_back(std::move(b));
  }
  k->buffers = std::move(keep);
  return "wgmma register operand A packed from the f32 accumulator (the cast copy and its registers removed): " + list;
}

}  // namespace tl::gpu
