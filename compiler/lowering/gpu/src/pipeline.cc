// PipelineAsyncCopies: see lower.h for the contract.
//
// A `pipelined(start, stop, stages=S)` loop whose body copies global tiles
// into shared buffers becomes (X: each such buffer, now S deep; k0: start):
//
//   for s < S - 1:                        prologue: iterations k0 .. k0+S-2
//     if k0 + s < stop { async copy (k = k0 + s) -> X[s] }
//     commit
//   for k in serial(start, stop) {
//     wait (S - 2 groups may stay in flight)   this thread's copies of k landed
//     sync                                     everyone's landed; everyone is
//                                              done with iteration k - 1
//     if k + S - 1 < stop { async copy (k + S - 1) -> X[(k - k0 + S - 1) % S] }
//     commit                                   (empty groups keep the count)
//     body, reading X[(k - k0) % S]
//   }
//   wait 0; sync
//
// The copy for k + S - 1 overwrites the stage iteration k - 1 read, which the
// sync orders; iteration k reads stage (k - k0) % S, which is different for
// S >= 2. The asynchrony is carried by hints (kAsyncCopy before a copy,
// kAsyncCommit, kAsyncWait N): read as plain statements, with every copy
// synchronous, the result is the same program, so the rewrite is checkable
// as Tile IR and every later pass works on it unchanged.
//
// With `tma` the pipeline also carries what an mbarrier-driven lowering needs
// (lower.h: the pipeline index and stage count on each copy hint, an arrive
// hint closing each issued iteration, and at the top of the loop body the
// stage as a `let` and a wait hint naming it); a lowering that keeps cp.async
// ignores them, and so does every other pass.
//
// With `defer_wgmma` (sm_90a, the gemm may become wgmma) a loop whose body,
// besides the hoisted copies, is exactly one gemm that does not clear its
// accumulator gets the gemm's wgmma group kept in flight across iterations:
//
//   for k in serial(start, stop) {
//     wait; sync                       as above (with tma: hint tl_tma_sync P,
//                                      a barrier unless every copy is TMA)
//     hint tl_wgmma_defer; gemm        issue k's group; wait_group 1 retires
//                                      k - 1's (this warpgroup's)
//     sync                             every warpgroup retired k - 1's group
//     if k + S - 1 < stop { async copy (k + S - 1) -> X[(k - k0 + S - 1) % S] }
//     commit
//   }
//   hint tl_wgmma_drain                wait_group 0: the accumulator is final
//   wait 0; sync
//
// Invariant: no copy is issued into a stage while a wgmma group reading it
// may still be pending (the refill of the stage k - 1 read comes after the
// sync that follows every warpgroup's wait_group 1 in iteration k), and
// nothing but wgmma touches the accumulator while a group is pending (the
// body is only the gemm; the drain precedes every other use after the loop).
// Read as plain statements the order is still exact (the refilled stage is
// not the one iteration k reads, S >= 2). A lowering that does not make the
// gemm a wgmma ignores both hints (the extra sync is then only redundant).
//
// A copy is hoisted only when that is exact: `copy SRC -> X` at the top level
// of the body, SRC a tensor parameter whose region depends only on the loop
// variable and names bound outside the loop, X a whole shared buffer that
// nothing outside the loop touches and that the body only reads, and only
// after the copy. Anything else stays in the body as it was.
#include <functional>
#include <set>

#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/passes/passes.h"

namespace tl::gpu {
namespace {

using ir::Expr;

// The regions a statement holds directly, with whether each is written.
void Regions(ir::Stmt& s, const std::function<void(ir::Region&, bool)>& fn) {
  std::visit(
      [&](auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, ir::Copy> || std::is_same_v<T, ir::Cumsum> ||
                      std::is_same_v<T, ir::Reduce> || std::is_same_v<T, ir::AtomicAddTile>) {
          fn(n.src, false);
          fn(n.dst, true);
        } else if constexpr (std::is_same_v<T, ir::Fill> || std::is_same_v<T, ir::AtomicAdd>) {
          fn(n.dst, true);
        } else if constexpr (std::is_same_v<T, ir::Gemm>) {
          fn(n.a, false);
          fn(n.b, false);
          fn(n.c, true);
        }
      },
      s.node);
}

struct Uses {
  int reads = 0, writes = 0;
};

// Reads and writes of every buffer name in `b` (nested statements included).
void CountUses(ir::Block& b, std::map<std::string, Uses>* out) {
  ir::ForEachStmt(b, [&](ir::Stmt& s) {
    Regions(s, [&](ir::Region& r, bool w) { ++((*out)[r.buffer].*(w ? &Uses::writes : &Uses::reads)); });
    if (const auto* st = ir::As<ir::Store>(s)) ++(*out)[st->buffer].writes;
    ir::ForEachExprOf(s, [&](const Expr& e) {
      ir::WalkExpr(e, [&](const Expr& x) {
        if (const auto* l = ir::As<ir::Load>(x)) ++(*out)[l->buffer].reads;
      });
    });
  });
}

// Names bound or assigned inside `b`: a region using one cannot be evaluated
// for a later iteration ahead of time.
std::set<std::string> BoundInside(const ir::Block& b) {
  std::set<std::string> out;
  ir::ForEachStmt(b, [&](const ir::Stmt& s) {
    if (const auto* l = ir::As<ir::Let>(s)) out.insert(l->name);
    if (const auto* v = ir::As<ir::VarDecl>(s)) out.insert(v->name);
    if (const auto* a = ir::As<ir::Assign>(s)) out.insert(a->name);
    if (const auto* f = ir::As<ir::For>(s)) out.insert(f->var);
    if (const auto* p = ir::As<ir::Parallel>(s)) out.insert(p->vars.begin(), p->vars.end());
  });
  return out;
}

bool UsesAny(const Expr& e, const std::set<std::string>& names) {
  bool hit = false;
  ir::WalkExpr(e, [&](const Expr& x) {
    if (const auto* v = ir::As<ir::VarRef>(x)) hit = hit || names.count(v->name);
    if (ir::As<ir::Load>(x)) hit = true;  // memory may change between iterations
  });
  return hit;
}

ir::Stmt MakeStmt(auto node, const std::optional<ir::Loc>& loc) {
  ir::Stmt s;
  s.node = std::move(node);
  s.loc = loc;
  return s;
}
ir::Stmt HintStmt(const char* name, std::optional<int64_t> arg, const std::optional<ir::Loc>& loc) {
  ir::Hint h;
  h.name = name;
  if (arg) h.args.push_back(ir::HintArg{ir::HintArg::Kind::kInt, *arg, ""});
  return MakeStmt(std::move(h), loc);
}

Expr Subst(const Expr& e, const std::string& var, const Expr& by) {
  return ir::FoldConstants(ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
    const auto* v = ir::As<ir::VarRef>(x);
    if (v && v->name == var) return by;
    return std::nullopt;
  }));
}

class Pipeliner {
 public:
  Pipeliner(ir::Function& f, int64_t max_stages, bool tma, bool defer_wgmma, std::vector<AsyncPipeline>* out)
      : f_(f), max_stages_(max_stages), tma_(tma), defer_wgmma_(defer_wgmma), out_(out), syms_(ir::CollectSymbols(f)) {
    CountUses(f_.body, &all_uses_);
  }

  void Run() { Block(f_.body); }

 private:
  void Block(ir::Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      ir::Stmt& s = b[i];
      if (auto* k = ir::As<ir::Kernel>(s)) Block(k->body);
      if (auto* fo = ir::As<ir::For>(s)) {
        Block(fo->body);
        if (fo->kind == ir::LoopKind::kPipelined) {
          std::vector<ir::Stmt> with = Rewrite(s);
          if (!with.empty()) {
            b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
            b.insert(b.begin() + static_cast<std::ptrdiff_t>(i), with.begin(), with.end());
            i += with.size() - 1;
          }
        }
      }
      if (auto* c = ir::As<ir::If>(s)) {
        Block(c->then_body);
        Block(c->else_body);
      }
    }
  }

  // Indices of the body's hoistable copies (see the file comment).
  std::vector<size_t> Producers(ir::For& loop) {
    std::vector<size_t> out;
    std::set<std::string> bound = BoundInside(loop.body);
    for (size_t p = 0; p < loop.body.size(); ++p) {
      const auto* c = ir::As<ir::Copy>(loop.body[p]);
      if (!c) continue;
      auto src = syms_.find(c->src.buffer), dst = syms_.find(c->dst.buffer);
      if (src == syms_.end() || dst == syms_.end() || src->second.kind != ir::SymbolInfo::Kind::kTensorParam ||
          dst->second.kind != ir::SymbolInfo::Kind::kAlloc || dst->second.scope != ir::MemScope::kShared) {
        continue;
      }
      bool ok = true;
      for (const ir::RegionDim& d : c->src.dims) {
        ok = ok && !UsesAny(d.start, bound) && (!d.extent || !UsesAny(*d.extent, bound));
      }
      // Whole destination buffer.
      const std::vector<Expr>& shape = dst->second.shape;
      ok = ok && (c->dst.dims.empty() || c->dst.dims.size() == shape.size());
      for (size_t d = 0; ok && d < c->dst.dims.size(); ++d) {
        const ir::RegionDim& rd = c->dst.dims[d];
        ok = ir::FoldInt(rd.start) == 0 && rd.extent && ir::FoldInt(*rd.extent) == ir::FoldInt(shape[d]);
      }
      // Every use of X: this copy, then reads in later statements of the body.
      std::map<std::string, Uses> before, after;
      for (size_t j = 0; j < loop.body.size(); ++j) {
        if (j == p) continue;
        ir::Block one{loop.body[j]};
        CountUses(one, j < p ? &before : &after);
      }
      const Uses all = all_uses_[c->dst.buffer], b = before[c->dst.buffer], a = after[c->dst.buffer];
      ok = ok && b.reads == 0 && b.writes == 0 && a.writes == 0 && all.writes == 1 && all.reads == a.reads;
      if (ok) out.push_back(p);
    }
    return out;
  }

  std::vector<ir::Stmt> Rewrite(ir::Stmt& loop_stmt) {
    ir::For& loop = *ir::As<ir::For>(loop_stmt);
    const std::optional<ir::Loc> loc = loop_stmt.loc;
    const int64_t S = std::min(loop.stages, max_stages_);
    const std::set<std::string> bound = BoundInside(loop.body);
    if (S < 2 || UsesAny(loop.start, bound) || UsesAny(loop.stop, bound)) return {};
    std::vector<size_t> prod = Producers(loop);
    if (prod.empty()) return {};
    const ir::DType t = ir::ExprDType(loop.start);
    auto Int = [&](int64_t v) { return ir::MakeInt(v, t); };
    auto Add = [&](Expr a, Expr b) { return ir::MakeBinary(ir::BinaryOp::kAdd, std::move(a), std::move(b)); };
    auto Sub = [&](Expr a, Expr b) { return ir::MakeBinary(ir::BinaryOp::kSub, std::move(a), std::move(b)); };
    auto StageOf = [&](Expr iter) {  // (iter - start) % S, as i32
      Expr s = ir::MakeCall(ir::CallOp::kTruncMod, {Sub(std::move(iter), loop.start), Int(S)});
      return ir::FoldConstants(t == ir::DType::kI32 ? s : ir::MakeCast(ir::DType::kI32, s));
    };
    AsyncPipeline rec{loop.var, loop.stages, S, {}};
    const int64_t id = static_cast<int64_t>(out_->size());
    std::map<std::string, std::vector<Expr>> old_shape;
    for (size_t p : prod) {
      const std::string& x = ir::As<ir::Copy>(loop.body[p])->dst.buffer;
      rec.buffers.push_back(x);
      old_shape[x] = syms_.at(x).shape;
    }
    // The copies of iteration `iter` into stage `stage`, as a guarded block.
    auto issue = [&](const Expr& iter, const Expr& stage) {
      ir::Block copies;
      for (size_t p : prod) {
        ir::Copy c = *ir::As<ir::Copy>(loop.body[p]);
        for (ir::RegionDim& d : c.src.dims) {
          d.start = Subst(d.start, loop.var, iter);
          if (d.extent) d.extent = Subst(*d.extent, loop.var, iter);
        }
        ir::Region dst{c.dst.buffer, {{stage, ir::MakeInt(1)}}};
        for (const Expr& d : old_shape[c.dst.buffer]) dst.dims.push_back({ir::MakeInt(0), d});
        c.dst = std::move(dst);
        ir::Stmt hint = HintStmt(kAsyncCopyHint, std::nullopt, loop.body[p].loc);
        if (tma_) {
          std::get<ir::Hint>(hint.node).args = {ir::HintArg{ir::HintArg::Kind::kInt, id, ""},
                                                ir::HintArg{ir::HintArg::Kind::kInt, S, ""}};
        }
        copies.push_back(std::move(hint));
        copies.push_back(MakeStmt(std::move(c), loop.body[p].loc));
      }
      if (tma_) copies.push_back(HintStmt(kTmaArriveHint, id, loc));
      ir::Stmt guarded = MakeStmt(ir::If{ir::FoldConstants(ir::MakeBinary(ir::BinaryOp::kLt, iter, loop.stop)),
                                         std::move(copies), {}},
                                  loc);
      return guarded;
    };
    std::vector<ir::Stmt> out;
    for (int64_t s = 0; s + 1 < S; ++s) {
      out.push_back(issue(ir::FoldConstants(Add(loop.start, Int(s))), ir::MakeInt(s)));
      out.push_back(HintStmt(kAsyncCommitHint, std::nullopt, loc));
    }
    // The loop: consumers read the current stage.
    ir::Block body;
    const Expr k = ir::MakeVar(loop.var, t);
    if (tma_) {  // the stage this iteration reads, for the mbarrier wait
      const std::string stage = "tl_stage_" + std::to_string(id);
      body.push_back(MakeStmt(ir::Let{stage, StageOf(k)}, loc));
      ir::Stmt wait = HintStmt(kTmaWaitHint, id, loc);
      std::get<ir::Hint>(wait.node).args.push_back(ir::HintArg{ir::HintArg::Kind::kName, 0, stage});
      body.push_back(std::move(wait));
    }
    // The one gemm a deferred wgmma group may come from (see the file comment).
    std::vector<size_t> rest;
    for (size_t j = 0; j < loop.body.size(); ++j) {
      if (!std::count(prod.begin(), prod.end(), j)) rest.push_back(j);
    }
    const ir::Gemm* dg = defer_wgmma_ && rest.size() == 1 ? ir::As<ir::Gemm>(loop.body[rest[0]]) : nullptr;
    const bool defer = dg && !dg->clear_accum && !old_shape.count(dg->c.buffer);
    body.push_back(HintStmt(kAsyncWaitHint, S - 2, loc));
    if (defer && tma_) {
      // Deferred, the refill has its own barrier: this one only makes other
      // threads' cp.async copies visible, which TMA's mbarrier waits do.
      body.push_back(HintStmt(kTmaSyncHint, id, loc));
    } else {
      body.push_back(MakeStmt(ir::Sync{}, loc));
    }
    if (!defer) {
      body.push_back(issue(Add(k, Int(S - 1)), StageOf(Add(k, Int(S - 1)))));
      body.push_back(HintStmt(kAsyncCommitHint, std::nullopt, loc));
    }
    const Expr cur = StageOf(k);
    for (size_t j : rest) {
      if (defer) body.push_back(HintStmt(kWgmmaDeferHint, std::nullopt, loop.body[j].loc));
      ir::Stmt s = loop.body[j];
      ir::Block one{std::move(s)};
      ir::ForEachStmt(one, [&](ir::Stmt& st) {
        Regions(st, [&](ir::Region& r, bool) {
          if (!old_shape.count(r.buffer)) return;
          if (r.dims.empty()) {
            for (const Expr& d : old_shape[r.buffer]) r.dims.push_back({ir::MakeInt(0), d});
          }
          r.dims.insert(r.dims.begin(), ir::RegionDim{cur, ir::MakeInt(1)});
        });
        ir::ForEachExprOf(st, [&](Expr& e) {
          e = ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
            const auto* l = ir::As<ir::Load>(x);
            if (!l || !old_shape.count(l->buffer)) return std::nullopt;
            std::vector<Expr> idx = l->indices;
            idx.insert(idx.begin(), cur);
            return ir::MakeLoad(l->buffer, std::move(idx), l->dtype);
          });
        });
      });
      body.push_back(std::move(one[0]));
    }
    if (defer) {  // the refill after every warpgroup retired the group that read its stage
      body.push_back(MakeStmt(ir::Sync{}, loc));
      body.push_back(issue(Add(k, Int(S - 1)), StageOf(Add(k, Int(S - 1)))));
      body.push_back(HintStmt(kAsyncCommitHint, std::nullopt, loc));
    }
    ir::For serial = loop;
    serial.kind = ir::LoopKind::kSerial;
    serial.stages = 0;
    serial.body = std::move(body);
    out.push_back(MakeStmt(std::move(serial), loc));
    if (defer) out.push_back(HintStmt(kWgmmaDrainHint, std::nullopt, loc));
    // Drained, and everyone done with the stages: a pipeline run again (an
    // enclosing loop) restarts its prologue on buffers nobody still reads.
    out.push_back(HintStmt(kAsyncWaitHint, 0, loc));
    out.push_back(MakeStmt(ir::Sync{}, loc));
    // X becomes S deep.
    ir::ForEachStmt(f_.body, [&](ir::Stmt& st) {
      if (auto* a = ir::As<ir::Alloc>(st); a && old_shape.count(a->name)) a->shape.insert(a->shape.begin(), ir::MakeInt(S));
    });
    out_->push_back(std::move(rec));
    return out;
  }

  ir::Function& f_;
  int64_t max_stages_;
  bool tma_;
  bool defer_wgmma_;
  std::vector<AsyncPipeline>* out_;
  ir::SymbolTable syms_;
  std::map<std::string, Uses> all_uses_;
};

}  // namespace

std::vector<AsyncPipeline> PipelineAsyncCopies(ir::Function& f, int64_t max_stages, bool tma, bool defer_wgmma) {
  std::vector<AsyncPipeline> out;
  Pipeliner(f, max_stages, tma, defer_wgmma, &out).Run();
  return out;
}

}  // namespace tl::gpu
