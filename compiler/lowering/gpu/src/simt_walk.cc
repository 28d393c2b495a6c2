// Walks over the SIMT IR: see simt_walk.h.
#include "simt_walk.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

namespace tl::gpu {

// Whether any statement of `b` (nested ones included) satisfies `pred`: see simt_walk.h.
bool Any(const SBlock& b, const std::function<bool(const SStmt&)>& pred) {
  for (const SStmt& s : b) {
    if (pred(s)) return true;
    if (const auto* f = std::get_if<SFor>(&s.node); f && Any(f->body, pred)) return true;
    if (const auto* i = std::get_if<SIf>(&s.node); i && (Any(i->then_body, pred) || Any(i->else_body, pred))) return true;
    if (const auto* w = std::get_if<SWarpRoles>(&s.node); w && (Any(w->producer, pred) || Any(w->consumer, pred))) return true;
  }
  return false;
}

// Whether expression e reads buffer `name`.
bool Reads(const ir::Expr& e, const std::string& name) {
  bool hit = false;
  ir::WalkExpr(e, [&](const ir::Expr& x) {
    if (const auto* l = ir::As<ir::Load>(x); l && l->buffer == name) hit = true;
  });
  return hit;
}

bool Mentions(const SBlock& b, const std::string& name) {
  for (const SStmt& s : b) {
    if (Mentions(s, name)) return true;
  }
  return false;
}
bool Mentions(const SStmt& s, const std::string& name) {
  auto r = [&](const ir::Expr& e) { return Reads(e, name); };
  return std::visit(
      [&](const auto& n) -> bool {
        using N = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<N, SLet> || std::is_same_v<N, SAssign>) {
          return r(n.value);
        } else if constexpr (std::is_same_v<N, SVar>) {
          return n.init && r(*n.init);
        } else if constexpr (std::is_same_v<N, SStore>) {
          return n.buffer == name || r(n.index) || r(n.value) || (n.hi && r(*n.hi));
        } else if constexpr (std::is_same_v<N, SAtomicAdd>) {
          bool m = n.buffer == name || r(n.index) || r(n.value);
          for (const ir::Expr& e : n.more) m = m || r(e);
          return m;
        } else if constexpr (std::is_same_v<N, SFor>) {
          return r(n.start) || r(n.stop) || r(n.step) || Mentions(n.body, name);
        } else if constexpr (std::is_same_v<N, SIf>) {
          return r(n.cond) || Mentions(n.then_body, name) || Mentions(n.else_body, name);
        } else if constexpr (std::is_same_v<N, SMma> || std::is_same_v<N, SAmdMma>) {
          return n.a == name || n.b == name || n.c == name || r(n.a_base) || r(n.b_base) || r(n.k0);
        } else if constexpr (std::is_same_v<N, SCopyVec> || std::is_same_v<N, SCopyAsync>) {
          return n.dst == name || n.src == name || r(n.dst_index) || r(n.src_index);
        } else if constexpr (std::is_same_v<N, SStmatrix>) {
          bool m = n.buffer == name || r(n.index);
          for (const ir::Expr& e : n.values) m = m || r(e);
          return m;
        } else if constexpr (std::is_same_v<N, STmaLoad>) {
          return n.dst == name || n.bar == name;
        } else if constexpr (std::is_same_v<N, SBulkStore>) {
          return n.dst == name || n.src == name || r(n.dst_index) || r(n.src_index) || r(n.bytes);
        } else if constexpr (std::is_same_v<N, STmaStore>) {
          bool m = n.src == name || n.dst == name || r(n.src_index);
          for (const ir::Expr& e : n.coords) m = m || r(e);
          return m;
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

void MapExprs(SBlock& b, const std::function<void(ir::Expr&)>& fn) {
  for (SStmt& s : b) {
    std::visit(
        [&](auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, SLet> || std::is_same_v<N, SAssign>) {
            fn(n.value);
          } else if constexpr (std::is_same_v<N, SVar>) {
            if (n.init) fn(*n.init);
          } else if constexpr (std::is_same_v<N, SStore>) {
            fn(n.index), fn(n.value);
            if (n.hi) fn(*n.hi);
          } else if constexpr (std::is_same_v<N, SAtomicAdd>) {
            fn(n.index), fn(n.value);
            for (ir::Expr& e : n.more) fn(e);
          } else if constexpr (std::is_same_v<N, SFor>) {
            fn(n.start), fn(n.stop), fn(n.step);
            MapExprs(n.body, fn);
          } else if constexpr (std::is_same_v<N, SIf>) {
            fn(n.cond);
            MapExprs(n.then_body, fn);
            MapExprs(n.else_body, fn);
          } else if constexpr (std::is_same_v<N, SMma> || std::is_same_v<N, SAmdMma>) {
            fn(n.a_base), fn(n.b_base), fn(n.k0);
          } else if constexpr (std::is_same_v<N, SCopyVec>) {
            fn(n.dst_index), fn(n.src_index);
          } else if constexpr (std::is_same_v<N, SCopyAsync>) {
            fn(n.dst_index), fn(n.src_index);
            if (n.src_valid) fn(*n.src_valid);
          } else if constexpr (std::is_same_v<N, STmaLoad>) {
            for (ir::Expr& e : n.coords) fn(e);
            fn(n.dst_index), fn(n.bar_index);
          } else if constexpr (std::is_same_v<N, SMbarArrive>) {
            fn(n.index);
          } else if constexpr (std::is_same_v<N, SMbarWait>) {
            fn(n.index), fn(n.parity);
          } else if constexpr (std::is_same_v<N, SWgmma>) {
            for (ir::Expr& e : n.a.starts) fn(e);
            for (ir::Expr& e : n.b.starts) fn(e);
          } else if constexpr (std::is_same_v<N, SStmatrix>) {
            fn(n.index);
            for (ir::Expr& e : n.values) fn(e);
          } else if constexpr (std::is_same_v<N, SBulkStore>) {
            fn(n.dst_index), fn(n.src_index), fn(n.bytes);
          } else if constexpr (std::is_same_v<N, STmaStore>) {
            fn(n.src_index);
            for (ir::Expr& e : n.coords) fn(e);
          } else if constexpr (std::is_same_v<N, SCallExtern>) {
            for (SExternArg& a : n.args) fn(a.value);
          } else if constexpr (std::is_same_v<N, SWarpRoles>) {
            MapExprs(n.producer, fn);
            MapExprs(n.consumer, fn);
          }
          // else: no expression (SBarrier, SLaneReduce, SComment, SMbarInit, commits and waits,
          // setmaxnreg, named barriers, SWgmmaWait)
        },
        s.node);
  }
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

const SStore* WholeFragmentStore(const SStmt& s, const std::map<std::string, const SimtBuffer*>& bufs) {
  struct Loop {
    std::string var;
    int64_t start, stop, step;
  };
  std::vector<Loop> loops;
  const SStmt* at = &s;
  const SStore* store = nullptr;
  while (true) {
    const auto* f = std::get_if<SFor>(&at->node);
    if (!f) return nullptr;
    const std::optional<int64_t> a = ir::FoldInt(f->start), b = ir::FoldInt(f->stop), c = ir::FoldInt(f->step);
    if (!a || !b || !c || *c <= 0) return nullptr;
    loops.push_back({f->var, *a, *b, *c});
    const SStmt* inner = nullptr;
    for (const SStmt& x : f->body) {
      if (std::holds_alternative<SLet>(x.node) || std::holds_alternative<SComment>(x.node)) continue;
      if (inner) return nullptr;
      inner = &x;
    }
    if (!inner) return nullptr;
    if (const auto* st = std::get_if<SStore>(&inner->node)) {
      store = st;
      break;
    }
    at = inner;
  }
  auto buf = bufs.find(store->buffer);
  if (buf == bufs.end() || buf->second->space != Space::kRegister) return nullptr;
  const int64_t elements = buf->second->elements;
  // Enumerate every iteration (fragments hold at most a few hundred slots
  // per thread; give up past a bound).
  int64_t trips = 1;
  for (const Loop& l : loops) {
    trips *= std::max<int64_t>(0, (l.stop - l.start + l.step - 1) / l.step);
    if (trips > 4096) return nullptr;
  }
  if (trips != elements) return nullptr;
  std::vector<int> seen(static_cast<size_t>(elements), 0);
  std::vector<int64_t> iv(loops.size());
  for (size_t i = 0; i < loops.size(); ++i) iv[i] = loops[i].start;
  for (int64_t t = 0; t < trips; ++t) {
    const ir::Expr x = ir::FoldConstants(ir::RewriteExpr(store->index, [&](const ir::Expr& e) -> std::optional<ir::Expr> {
      const auto* r = ir::As<ir::VarRef>(e);
      if (!r) return std::nullopt;
      for (size_t i = 0; i < loops.size(); ++i) {
        if (loops[i].var == r->name) return ir::MakeInt(iv[i], r->dtype);
      }
      return std::nullopt;
    }));
    const std::optional<int64_t> slot = ir::FoldInt(x);
    if (!slot || *slot < 0 || *slot >= elements || seen[static_cast<size_t>(*slot)]++) return nullptr;
    for (size_t i = loops.size(); i-- > 0;) {  // the innermost loop varies fastest
      iv[i] += loops[i].step;
      if (iv[i] < loops[i].stop) break;
      iv[i] = loops[i].start;
    }
  }
  return store;
}

}  // namespace tl::gpu
