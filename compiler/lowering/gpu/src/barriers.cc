// InsertBarriers: see lower.h for the contract.
//
// State between barriers: the shared names written (W) and read (Rd) since
// the last barrier. A statement that reads something in W, or writes
// something in W or Rd, gets a barrier before it. Loops are processed twice:
// the first pass computes what the body leaves pending at its end, the second
// starts the body with that state added (the previous iteration), which puts
// the "before reuse" barrier at the top of the body where needed. Risk: this
// is per buffer name, not per region, so it can insert barriers that a
// region analysis would prove unnecessary (never fewer than needed).
#include <set>
#include <string>

#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

using Names = std::set<std::string>;

void ExprReads(const ir::Expr& e, const Names& shared, Names* reads) {
  ir::WalkExpr(e, [&](const ir::Expr& x) {
    if (const auto* l = ir::As<ir::Load>(x)) {
      if (shared.count(l->buffer)) reads->insert(l->buffer);
    }
  });
}

// Every shared name `s` (and its nested statements) reads and writes.
void Effects(const ir::Stmt& s, const Names& shared, Names* reads, Names* writes) {
  auto reg_r = [&](const ir::Region& r) {
    if (shared.count(r.buffer)) reads->insert(r.buffer);
  };
  auto reg_w = [&](const ir::Region& r) {
    if (shared.count(r.buffer)) writes->insert(r.buffer);
  };
  ir::ForEachExprOf(s, [&](const ir::Expr& e) { ExprReads(e, shared, reads); });
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, ir::Store>) {
          if (shared.count(n.buffer)) writes->insert(n.buffer);
        } else if constexpr (std::is_same_v<T, ir::Copy>) {
          reg_r(n.src), reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::Fill>) {
          reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::Gemm>) {
          reg_r(n.a), reg_r(n.b), reg_r(n.c), reg_w(n.c);
        } else if constexpr (std::is_same_v<T, ir::Reduce>) {
          reg_r(n.src), reg_r(n.dst), reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::Cumsum>) {
          reg_r(n.src), reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::AtomicAdd>) {
          reg_r(n.dst), reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::AtomicAddTile>) {
          reg_r(n.src), reg_r(n.dst), reg_w(n.dst);
        } else if constexpr (std::is_same_v<T, ir::CallExtern>) {
          // Through a pointer an extern function may read and write the buffer.
          for (const ir::ExternArg& a : n.args) {
            const auto* l = ir::As<ir::Load>(a.value);
            if (a.address && l && shared.count(l->buffer)) writes->insert(l->buffer);
          }
        } else if constexpr (std::is_same_v<T, ir::For> || std::is_same_v<T, ir::Parallel> ||
                             std::is_same_v<T, ir::Kernel>) {
          for (const ir::Stmt& c : n.body) Effects(c, shared, reads, writes);
        } else if constexpr (std::is_same_v<T, ir::If>) {
          for (const ir::Stmt& c : n.then_body) Effects(c, shared, reads, writes);
          for (const ir::Stmt& c : n.else_body) Effects(c, shared, reads, writes);
        }
      },
      s.node);
}

bool Intersects(const Names& a, const Names& b) {
  for (const std::string& x : a) {
    if (b.count(x)) return true;
  }
  return false;
}

struct State {
  Names w, r;
};

ir::Stmt SyncStmt() {
  ir::Stmt s;
  s.node = ir::Sync{};
  return s;
}

// Processes `block` from state `st`; inserts barriers when `insert`.
void Run(ir::Block& block, const Names& shared, State& st, bool insert, int* count) {
  for (size_t i = 0; i < block.size(); ++i) {
    ir::Stmt& s = block[i];
    if (ir::As<ir::Sync>(s)) {
      st = {};
      continue;
    }
    if (auto* f = ir::As<ir::For>(s)) {
      // Loop bounds are evaluated before the body; they read nothing shared in practice.
      State first = st;
      int ignored = 0;
      Run(f->body, shared, first, false, &ignored);  // pending at the end of one iteration
      State entry = st;
      entry.w.insert(first.w.begin(), first.w.end());
      entry.r.insert(first.r.begin(), first.r.end());
      Run(f->body, shared, entry, insert, count);
      st.w.insert(entry.w.begin(), entry.w.end());  // zero or more iterations
      st.r.insert(entry.r.begin(), entry.r.end());
      continue;
    }
    if (auto* c = ir::As<ir::If>(s)) {
      Names cr, cw;
      ExprReads(c->cond, shared, &cr);
      if (Intersects(cr, st.w)) {
        if (insert) {
          block.insert(block.begin() + static_cast<std::ptrdiff_t>(i), SyncStmt());
          ++*count;
          ++i;
        }
        st = {};
      }
      st.r.insert(cr.begin(), cr.end());
      State a = st, b = st;
      Run(ir::As<ir::If>(block[i])->then_body, shared, a, insert, count);
      Run(ir::As<ir::If>(block[i])->else_body, shared, b, insert, count);
      st.w = a.w;
      st.w.insert(b.w.begin(), b.w.end());
      st.r = a.r;
      st.r.insert(b.r.begin(), b.r.end());
      continue;
    }
    Names r, w;
    Effects(s, shared, &r, &w);
    if (Intersects(r, st.w) || Intersects(w, st.w) || Intersects(w, st.r)) {
      if (insert) {
        block.insert(block.begin() + static_cast<std::ptrdiff_t>(i), SyncStmt());
        ++*count;
        ++i;
      }
      st = {};
    }
    st.w.insert(w.begin(), w.end());
    st.r.insert(r.begin(), r.end());
  }
}

}  // namespace

int InsertBarriers(ir::Function& f, const std::set<std::string>& shared) {
  int count = 0;
  for (ir::Stmt& s : f.body) {
    if (auto* k = ir::As<ir::Kernel>(s)) {
      State st;
      Run(k->body, shared, st, true, &count);
    }
  }
  return count;
}

}  // namespace tl::gpu
