// ReuseDeadSharedBuffers: see reuse_shared.h for the contract.
#include "tilelang/lowering/gpu/reuse_shared.h"

#include <algorithm>
#include <map>
#include <optional>

namespace tl::gpu {
namespace {

// Every buffer name `s` (and its nested statements) touches.
void Touched(const ir::Stmt& s, std::set<std::string>* out) {
  ir::ForEachStmt(ir::Block{s}, [&](const ir::Stmt& x) {
    ir::ForEachExprOf(x, [&](const ir::Expr& e) {
      ir::WalkExpr(e, [&](const ir::Expr& y) {
        if (const auto* l = ir::As<ir::Load>(y)) out->insert(l->buffer);
      });
    });
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, ir::Store>) {
            out->insert(n.buffer);
          } else if constexpr (std::is_same_v<T, ir::Copy> || std::is_same_v<T, ir::Reduce> ||
                               std::is_same_v<T, ir::Cumsum> || std::is_same_v<T, ir::AtomicAddTile>) {
            out->insert(n.src.buffer), out->insert(n.dst.buffer);
          } else if constexpr (std::is_same_v<T, ir::Fill> || std::is_same_v<T, ir::AtomicAdd>) {
            out->insert(n.dst.buffer);
          } else if constexpr (std::is_same_v<T, ir::Gemm>) {
            out->insert(n.a.buffer), out->insert(n.b.buffer), out->insert(n.c.buffer);
          }
        },
        x.node);
  });
}

void Rename(ir::Block& body, const std::string& from, const std::string& to) {
  auto reg = [&](ir::Region& r) {
    if (r.buffer == from) r.buffer = to;
  };
  ir::ForEachStmt(body, [&](ir::Stmt& x) {
    ir::ForEachExprOf(x, [&](ir::Expr& e) {
      e = ir::RewriteExpr(e, [&](const ir::Expr& y) -> std::optional<ir::Expr> {
        const auto* l = ir::As<ir::Load>(y);
        if (!l || l->buffer != from) return std::nullopt;
        return ir::MakeLoad(to, l->indices, l->dtype);
      });
    });
    std::visit(
        [&](auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, ir::Store>) {
            if (n.buffer == from) n.buffer = to;
          } else if constexpr (std::is_same_v<T, ir::Copy> || std::is_same_v<T, ir::Reduce> ||
                               std::is_same_v<T, ir::Cumsum> || std::is_same_v<T, ir::AtomicAddTile>) {
            reg(n.src), reg(n.dst);
          } else if constexpr (std::is_same_v<T, ir::Fill> || std::is_same_v<T, ir::AtomicAdd>) {
            reg(n.dst);
          } else if constexpr (std::is_same_v<T, ir::Gemm>) {
            reg(n.a), reg(n.b), reg(n.c);
          }
        },
        x.node);
  });
}

}  // namespace

std::vector<std::string> ReuseDeadSharedBuffers(ir::Function& f, const std::set<std::string>& exclude) {
  std::vector<std::string> notes;
  ir::Kernel* k = f.body.empty() ? nullptr : ir::As<ir::Kernel>(f.body.front());
  if (!k) return notes;
  struct Tile {
    ir::DType dtype;
    std::vector<int64_t> shape;
    int64_t bytes = 0;
    int64_t first = -1, last = -1;
  };
  std::map<std::string, Tile> tiles;
  std::vector<std::string> order;  // allocation order
  for (const ir::Stmt& s : k->body) {
    const auto* a = ir::As<ir::Alloc>(s);
    if (!a || a->scope != ir::MemScope::kShared || exclude.count(a->name)) continue;
    Tile t{a->dtype, {}, std::max(1, ir::BitWidth(a->dtype) / 8)};
    bool constant = true;
    for (const ir::Expr& d : a->shape) {
      const std::optional<int64_t> v = ir::FoldInt(d);
      constant = constant && v.has_value();
      t.shape.push_back(v.value_or(0));
      t.bytes *= v.value_or(0);
    }
    if (!constant) continue;
    tiles[a->name] = t;
    order.push_back(a->name);
  }
  for (size_t i = 0; i < k->body.size(); ++i) {
    if (ir::As<ir::Alloc>(k->body[i])) continue;
    std::set<std::string> used;
    Touched(k->body[i], &used);
    for (const std::string& b : used) {
      auto it = tiles.find(b);
      if (it == tiles.end()) continue;
      if (it->second.first < 0) it->second.first = static_cast<int64_t>(i);
      it->second.last = static_cast<int64_t>(i);
    }
  }
  std::vector<std::string> by_first;
  for (const std::string& n : order) {
    if (tiles[n].first >= 0) by_first.push_back(n);
  }
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](const std::string& a, const std::string& b) { return tiles[a].first < tiles[b].first; });
  std::set<std::string> gone;
  for (const std::string& x : by_first) {
    Tile& tx = tiles[x];
    for (const std::string& y : by_first) {
      if (y == x || gone.count(y)) continue;
      Tile& ty = tiles[y];
      if (ty.dtype != tx.dtype || ty.shape != tx.shape || ty.last >= tx.first || ty.first > tx.first) continue;
      notes.push_back("shared " + x + " reuses " + y + " (dead after statement " + std::to_string(ty.last) +
                      " of the kernel, " + std::to_string(tx.bytes) + " bytes)");
      Rename(k->body, x, y);
      ty.last = tx.last;
      gone.insert(x);
      break;
    }
  }
  std::erase_if(k->body, [&](const ir::Stmt& s) {
    const auto* a = ir::As<ir::Alloc>(s);
    return a && gone.count(a->name);
  });
  return notes;
}

}  // namespace tl::gpu
