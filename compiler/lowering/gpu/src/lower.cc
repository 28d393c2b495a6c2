// LowerToSimt: Tile IR (after the passes in lower.h) -> SimtKernel.
//
// Each tile op becomes per-thread code:
//   copy/fill      over the register layout of a fragment side, else a flat
//                  block-strided loop; tensor sides get edge guards (reads
//                  outside the tensor give 0, writes are dropped)
//   T.Parallel     a loop over the loop layout's (row slot, column slot)
//                  pairs, fully unrolled so register indices are constants
//   gemm           SIMT FMA: per k, each thread loads its A column and B row
//                  slices from shared memory and updates its C sub-tile
//   reduce         per-thread partials, LaneReduce within a warp, shared
//                  scratch across warps (groups wider than a warp:
//                  GpuLowerOptions::warp_size, 32 on NVIDIA, 32 or 64 on AMD)
//   cumsum         one thread per line, serial scan (operands in shared)
//   atomic_add     per element; once per element even under replication
// Index arithmetic the lowering creates uses truncdiv/truncmod (operands are
// never negative); user expressions keep Tile IR's floor semantics.
#include <cmath>
#include <functional>

#include "simt_build.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/reuse_shared.h"
#include "tilelang/lowering/gpu/tma.h"
#include "tilelang/lowering/gpu/wgmma.h"
#include "tilelang/passes/passes.h"

namespace tl::gpu {
namespace {

using ir::DType;
using ir::Expr;

using namespace simt_build;  // I, V, Tid, Add, Mul, Lt, Ge, Eq, And, TDiv, TMod, ToI32, CastTo

SStmt S(auto node) { return SStmt{std::move(node)}; }
SStmt Store(std::string b, Expr i, Expr v) { return S(SStore{std::move(b), std::move(i), std::move(v)}); }
SStmt Let(std::string n, Expr v) {
  const DType t = ir::ExprDType(v);
  return S(SLet{std::move(n), t, std::move(v)});
}
SStmt For(std::string var, int64_t start, Expr stop, int64_t step, bool unroll, SBlock body) {
  return S(SFor{std::move(var), I(start), std::move(stop), I(step), unroll, std::move(body)});
}
SStmt IfS(std::optional<Expr> cond, SBlock body) {
  if (!cond) return S(SFor{"tl_once", I(0), I(1), I(1), true, std::move(body)});  // a scope
  return S(SIf{std::move(*cond), std::move(body), {}});
}
std::optional<Expr> AndOpt(std::optional<Expr> a, std::optional<Expr> b) {
  if (!a) return b;
  if (!b) return a;
  return And(std::move(*a), std::move(*b));
}

enum class Where { kGlobal, kShared, kRegisterFrag, kLocal };

struct Buf {
  Where where = Where::kGlobal;
  DType dtype = DType::kF32;
  std::vector<Expr> shape;          // IntImm, or a symbol VarRef for global tensors
  const FragmentLayout* layout = nullptr;  // kRegisterFrag
  SmemSwizzle swizzle = SmemSwizzle::kNone;  // kShared: a swizzled wgmma operand (SimtBuffer::swizzle)
};

// One dimension's access of a region: start + (compact index q or 0).
struct Side {
  passes::RegionInfo info;
  std::vector<int> kept;
};

class Lowerer {
 public:
  // StageWgmmaEpilogues' tiles -> dead pipeline buffers whose memory they may take; the ones taken.
  std::map<std::string, std::vector<std::string>> alias_;
  std::map<std::string, std::string> aliased_;
  Lowerer(const ir::Function& f, const GpuLayoutPlan& plan, SimtKernel* out, const GpuLowerOptions& options)
      : f_(f), plan_(plan), out_(out), options_(options), syms_(ir::CollectSymbols(f)) {}

  Status Run(const ir::Kernel& k) {
    for (const ir::Param& p : f_.params) {
      bufs_[p.name] = {Where::kGlobal, p.dtype, p.shape, nullptr};
      out_->params.push_back({p.name, p.dtype, p.kind == ir::Param::Kind::kTensor, -1});
    }
    for (size_t i = 0; i < f_.symbols.size(); ++i) {
      out_->params.push_back({f_.symbols[i].name, f_.symbols[i].dtype, false, static_cast<int>(i)});
    }
    // Accumulators of gemms left in flight by wg_wait=-1 / 1..7 (T.gemm(..., wg_wait=W)): each
    // `hint wait_wgmma N` fences them all against compiler motion across its wait_group.
    if (options_.gemm == GemmStrategy::kWgmma) {
      ir::ForEachStmt(k.body, [&](const ir::Stmt& st) {
        if (const auto* g = ir::As<ir::Gemm>(st); g && g->wg_wait != 0 && plan_.wgmma.count(g->c.buffer)) {
          wgmma_async_.insert(g->c.buffer);
        }
      });
    }
    if (options_.tma_pre_copies && options_.tma_copies) {
      // Top-level copies before the first statement holding a pipelined copy (PreTmaCopy).
      for (const ir::Stmt& st : k.body) {
        bool pipelined = false;
        ir::ForEachStmt(ir::Block{st}, [&](const ir::Stmt& x) {
          const auto* h = ir::As<ir::Hint>(x);
          pipelined = pipelined || (h && h->name == kAsyncCopyHint);
        });
        if (pipelined) break;
        if (const auto* c = ir::As<ir::Copy>(st)) pre_copies_.insert(c);
      }
    }
    SBlock body;
    Status s = LowerBlock(k.body, &body);
    if (!s.ok()) return s;
    // TMA pipelines: their phase bits and initialized mbarriers first.
    SBlock head;
    for (const auto& [id, p] : tma_pipes_) {
      if (!p.used) continue;
      head.push_back(S(SVar{p.phase, DType::kI32, I(0)}));
      head.push_back(S(SMbarInit{p.bar, p.stages}));
    }
    body.insert(body.begin(), std::make_move_iterator(head.begin()), std::make_move_iterator(head.end()));
    out_->body = std::move(body);
    return Status::Ok();
  }

 private:
  std::string Fresh(const char* base) { return std::string("tl_") + base + std::to_string(counter_++); }
  Status Err(const ir::Stmt& s, const std::string& what) {
    return Status(StatusCode::kUnimplemented, passes::Where(f_, s.loc, what.c_str()));
  }

  int64_t T() const { return out_->threads; }

  // A shared buffer of logical `shape` (SimtBuffer::shape); a swizzled one
  // starts at a multiple of its swizzle atom (swizzle.h).
  void AddShared(const std::string& name, DType t, int64_t elements, std::vector<int64_t> shape = {},
                 SmemSwizzle swizzle = SmemSwizzle::kNone) {
    const int64_t bytes = elements * std::max(1, ir::BitWidth(t) / 8);
    if (shape.empty()) shape = {elements};
    const int64_t atom = SwizzleAtomBytes(swizzle);
    out_->shared_bytes = (out_->shared_bytes + atom - 1) / atom * atom;
    const int64_t align = options_.tma_copies ? 128 : 16;  // TMA destinations start 128-byte aligned
    out_->shared_bytes = (out_->shared_bytes + align - 1) / align * align;
    out_->buffers.push_back({name, Space::kShared, t, elements, out_->shared_bytes, std::move(shape), swizzle});
    out_->shared_bytes += bytes;
  }
  // The index of pointer param `name`, or -1.
  int PointerParam(const std::string& name) const {
    for (size_t i = 0; i < out_->params.size(); ++i) {
      if (out_->params[i].name == name && out_->params[i].pointer) return static_cast<int>(i);
    }
    return -1;
  }
  // The index of a tensor map of m's param, box and swizzle (TMA copies and
  // stores share one), added where there is none.
  int TensorMap(const TensorMapDesc& m) {
    for (size_t i = 0; i < out_->tensor_maps.size(); ++i) {
      const TensorMapDesc& x = out_->tensor_maps[i];
      if (x.param == m.param && x.box == m.box && x.swizzle == m.swizzle) return static_cast<int>(i);
    }
    out_->tensor_maps.push_back(m);
    return static_cast<int>(out_->tensor_maps.size()) - 1;
  }
  // A staged epilogue tile (alias_) at the offset of a dead pipeline buffer
  // large enough to hold it; false when none is.
  // A swizzled tile needs a buffer starting on its swizzle atom.
  bool AliasShared(const std::string& name, DType t, int64_t elements, const std::vector<int64_t>& shape,
                   SmemSwizzle swizzle = SmemSwizzle::kNone) {
    auto it = alias_.find(name);
    if (it == alias_.end()) return false;
    const int64_t bytes = elements * std::max(1, ir::BitWidth(t) / 8);
    for (const std::string& into : it->second) {
      for (const SimtBuffer& x : out_->buffers) {
        if (x.name != into || x.space != Space::kShared || x.shared_offset % std::max<int64_t>(16, SwizzleAtomBytes(swizzle)) != 0 ||
            x.elements * std::max(1, ir::BitWidth(x.dtype) / 8) < bytes) {
          continue;
        }
        const int64_t off = x.shared_offset;
        out_->buffers.push_back({name, Space::kShared, t, elements, off, shape, swizzle});
        aliased_[name] = into;
        return true;
      }
    }
    return false;
  }
  void AddRegs(const std::string& name, DType t, int64_t elements) {
    out_->buffers.push_back({name, Space::kRegister, t, std::max<int64_t>(elements, 1), 0, {}, SmemSwizzle::kNone});
  }

  // Row-major linear index of `idx` into `shape`.
  static Expr Linear(const std::vector<Expr>& shape, const std::vector<Expr>& idx) {
    Expr lin = ToI32(idx.empty() ? I(0) : idx[0]);
    for (size_t d = 1; d < idx.size(); ++d) {
      lin = Add(Mul(std::move(lin), ToI32(shape[d])), ToI32(idx[d]));
    }
    return ir::FoldConstants(lin);
  }

  // Element index of `idx` in buffer `b`: row-major, or for a swizzled
  // shared buffer the element at SwizzledElementByte (swizzle.h) -- the
  // same function in i32 arithmetic (the XOR keeps an element inside its
  // 16-byte chunk, so the byte offset stays a multiple of the element size).
  static Expr Addr(const Buf& b, const std::vector<Expr>& idx) {
    if (b.swizzle == SmemSwizzle::kNone || idx.size() < 2) return Linear(b.shape, idx);
    const size_t n = idx.size();
    const int64_t e = std::max(1, ir::BitWidth(b.dtype) / 8);
    const int64_t rows = ir::FoldInt(b.shape[n - 2]).value_or(1), cols = ir::FoldInt(b.shape[n - 1]).value_or(1);
    const int64_t w = SwizzleRowBytes(b.swizzle), per_row = w / e;
    const int64_t mask = (int64_t{1} << static_cast<int>(b.swizzle)) - 1;
    const std::vector<Expr> lead_shape(b.shape.begin(), b.shape.end() - 2), lead(idx.begin(), idx.end() - 2);
    const Expr m = lead.empty() ? I(0) : Linear(lead_shape, lead);
    const Expr r = ToI32(idx[n - 2]), c = ToI32(idx[n - 1]);
    Expr logical = Add(Add(Mul(m, I(rows * cols * e)), Mul(Add(Mul(TDiv(c, per_row), I(rows)), r), I(w))),
                       Mul(TMod(c, per_row), I(e)));
    logical = ir::FoldConstants(logical);
    using ir::BinaryOp;
    Expr bits = ir::MakeBinary(BinaryOp::kShl,
                               ir::MakeBinary(BinaryOp::kBitAnd, ir::MakeBinary(BinaryOp::kShr, logical, I(7)), I(mask)), I(4));
    return ir::FoldConstants(TDiv(ir::MakeBinary(BinaryOp::kBitXor, logical, bits), e));
  }

  // ---- expressions ------------------------------------------------------
  // Rewrites loads: register fragments to their slot in the current T.Parallel
  // loop, everything else to buffer[linear].
  StatusOr<Expr> Lower(const Expr& e) {
    Status err = Status::Ok();
    Expr out = ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
      const auto* l = ir::As<ir::Load>(x);
      if (!l) return std::nullopt;
      auto it = bufs_.find(l->buffer);
      if (it == bufs_.end()) {
        err = Status(StatusCode::kInternal, "unknown buffer " + l->buffer);
        return std::nullopt;
      }
      if (it->second.where == Where::kRegisterFrag) {
        std::optional<Expr> slot = FragSlot(l->buffer, l->indices);
        if (!slot) {
          err = Status(StatusCode::kInternal, "fragment " + l->buffer + " read with indices its layout does not map");
          return std::nullopt;
        }
        return ir::MakeLoad(l->buffer, {*slot}, l->dtype);
      }
      return ir::MakeLoad(l->buffer, {Addr(it->second, l->indices)}, l->dtype);
    });
    if (!err.ok()) return err;
    return out;
  }

  // The register slot of fragment `b` at `idx` inside the current loop.
  std::optional<Expr> FragSlot(const std::string& b, const std::vector<Expr>& idx) {
    if (!loop_) return std::nullopt;
    const FragmentLayout& fl = *bufs_[b].layout;
    std::vector<std::string> names;
    for (const Expr& e : idx) {
      const auto* v = ir::As<ir::VarRef>(e);
      if (!v) return std::nullopt;
      names.push_back(v->name);
    }
    if (names == loop_vars_ && fl == *loop_) return slot_full_;
    if (fl.replicated && !loop_->replicated && loop_->C == 1 && names.size() + 1 == loop_vars_.size() &&
        std::equal(names.begin(), names.end(), loop_vars_.begin()) && fl.R == loop_->R && fl.g == loop_->g &&
        fl.H == loop_->H && fl.Hp == loop_->Hp &&
        fl.rows == loop_->rows) {
      return slot_row_;
    }
    return std::nullopt;
  }

  // FragmentLayout::RowOfGroup as an expression (rs: a row slot, grp: the
  // thread's group).
  static Expr RowExpr(const FragmentLayout& L, const Expr& rs, const Expr& grp) {
    if (L.H == 1) return ir::FoldConstants(Add(Mul(rs, I(L.R)), grp));
    Expr r = Add(Mul(TDiv(rs, L.H), I(L.R * L.H)), Mul(TDiv(grp, L.Hp), I(L.Hp * L.H)));
    r = Add(Add(r, Mul(TMod(rs, L.H), I(L.Hp))), TMod(grp, L.Hp));
    return ir::FoldConstants(r);
  }

  // ---- layout loops -----------------------------------------------------
  // Emits the loop over `L`'s slots for this thread; `body(index, slot, row
  // slot)` gets the logical index of the element (one Expr per dim of
  // L.shape) and returns the statements for it. Padding slots are guarded.
  SBlock LayoutLoop(const FragmentLayout& L,
                    const std::function<StatusOr<SBlock>(const std::vector<Expr>&, Expr, Expr)>& body,
                    Status* err) {
    const std::string rs = Fresh("rs"), cs = Fresh("cs"), row = Fresh("row"), col = Fresh("col");
    SBlock outer;
    SBlock per_row;
    // FragmentLayout::RowOf / ColOf (column blocks only when C > 1).
    Expr in_block = L.C > 1 ? TMod(Tid(), L.R * L.g) : Tid();
    per_row.push_back(Let(row, RowExpr(L, V(rs), TDiv(in_block, L.g))));
    std::optional<Expr> row_guard;
    if (L.rows % (L.R * L.H) != 0) row_guard = Lt(V(row), I(L.rows));
    // Logical index from (row, col).
    auto index_of = [&](const Expr& r, const Expr& c) {
      std::vector<Expr> idx(L.shape.size());
      const size_t row_dims = L.replicated ? L.shape.size() : L.shape.size() - 1;
      Expr rem = r;
      for (size_t d = row_dims; d-- > 0;) {
        idx[d] = d == 0 ? rem : TMod(rem, L.shape[d]);
        if (d > 0) rem = TDiv(rem, L.shape[d]);
      }
      if (!L.replicated && !L.shape.empty()) idx.back() = c;
      return idx;
    };
    if (L.replicated) {
      StatusOr<SBlock> b = body(index_of(V(row), I(0)), V(rs), V(rs));
      if (!b.ok()) {
        *err = b.status();
        return {};
      }
      per_row.push_back(IfS(row_guard, std::move(*b)));
    } else {
      SBlock per_col;
      // the lane within its group as tid & (g - 1) for g a power of two (tid >= 0: the same value): nvcc then
      // knows it is in [0, g) and that the column's bits above it are the slot's (merged loads of a run)
      const Expr lane = (L.g & (L.g - 1)) == 0 ? ir::MakeBinary(ir::BinaryOp::kBitAnd, Tid(), I(L.g - 1)) : TMod(Tid(), L.g);
      Expr colx = Add(Mul(TDiv(V(cs), L.v), I(L.v * L.g * L.C)), Mul(lane, I(L.v)));
      if (L.C > 1) colx = Add(colx, Mul(TDiv(Tid(), L.R * L.g), I(L.v * L.g)));
      // + cs % v: with v a power of two as `|` (the rest is a multiple of v: the same value), so that
      // after unrolling nvcc sees the v columns of a run as one base -- e.g. a byte index col >> 1
      // shared by both weights of a byte (w4a16_wgmma), which (base + 1) >> 1 hides from it.
      const bool pow2 = L.v > 1 && (L.v & (L.v - 1)) == 0;
      colx = pow2 ? ir::MakeBinary(ir::BinaryOp::kBitOr, colx, TMod(V(cs), L.v)) : Add(colx, TMod(V(cs), L.v));
      per_col.push_back(Let(col, ir::FoldConstants(colx)));
      std::optional<Expr> col_guard;
      if (L.cols % (L.v * L.g * L.C) != 0) col_guard = Lt(V(col), I(L.cols));
      Expr slot = ir::FoldConstants(Add(Mul(V(rs), I(L.col_slots())), V(cs)));
      StatusOr<SBlock> b = body(index_of(V(row), V(col)), slot, V(rs));
      if (!b.ok()) {
        *err = b.status();
        return {};
      }
      per_col.push_back(IfS(AndOpt(row_guard, col_guard), std::move(*b)));
      per_row.push_back(For(cs, 0, I(L.col_slots()), 1, true, std::move(per_col)));
    }
    outer.push_back(For(rs, 0, I(L.row_slots()), 1, true, std::move(per_row)));
    return outer;
  }

  // A block-strided loop over `total` elements of a compact shape: body gets
  // the compact index.
  SBlock FlatLoop(const std::vector<int64_t>& compact,
                  const std::function<StatusOr<SBlock>(const std::vector<Expr>&)>& body, Status* err) {
    int64_t total = 1;
    for (int64_t c : compact) total *= c;
    const std::string e = Fresh("e");
    std::vector<Expr> q(compact.size());
    Expr rem = V(e);
    for (size_t d = compact.size(); d-- > 0;) {
      q[d] = d == 0 ? rem : TMod(rem, compact[d]);
      if (d > 0) rem = TDiv(rem, compact[d]);
    }
    StatusOr<SBlock> b = body(q);
    if (!b.ok()) {
      *err = b.status();
      return {};
    }
    SBlock out;
    out.push_back(S(SFor{e, Tid(), I(total), I(T()), false, std::move(*b)}));
    return out;
  }

  // ---- regions ----------------------------------------------------------
  StatusOr<Side> Resolve(const ir::Region& r) {
    StatusOr<passes::RegionInfo> info = passes::ResolveRegion(r, syms_);
    if (!info.ok()) return info.status();
    Side s{std::move(*info), {}};
    s.kept = s.info.kept_dims();
    return s;
  }
  // Index of the side's element at compact index q; guard when needed.
  std::vector<Expr> SideIndex(const Side& s, const std::vector<Expr>& q) {
    std::vector<Expr> idx;
    for (size_t d = 0; d < s.info.starts.size(); ++d) {
      Expr i = ToI32(s.info.starts[d]);
      for (size_t k = 0; k < s.kept.size(); ++k) {
        if (s.kept[k] == static_cast<int>(d)) i = Add(std::move(i), q[k]);
      }
      idx.push_back(ir::FoldConstants(i));
    }
    return idx;
  }
  std::optional<Expr> SideGuard(const Side& s, const std::vector<Expr>& idx) {
    std::optional<Expr> g;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (!s.info.guard[d]) continue;
      g = AndOpt(g, And(Ge(idx[d], I(0)), Lt(idx[d], ToI32(s.info.buffer_shape[d]))));
    }
    return g;
  }
  std::vector<int64_t> Compact(const Side& s) {
    std::vector<int64_t> c;
    for (int d : s.kept) c.push_back(s.info.extents[d]);
    return c;
  }
  // Element access for a side (registers: by slot).
  Expr SideLoad(const Side& s, const std::vector<Expr>& idx, const std::optional<Expr>& slot) {
    const Buf& b = bufs_[s.info.buffer];
    if (b.where == Where::kRegisterFrag) return ir::MakeLoad(s.info.buffer, {*slot}, b.dtype);
    return ir::MakeLoad(s.info.buffer, {Addr(b, idx)}, b.dtype);
  }
  Expr SideAddr(const Side& s, const std::vector<Expr>& idx, const std::optional<Expr>& slot) {
    const Buf& b = bufs_[s.info.buffer];
    if (b.where == Where::kRegisterFrag) return *slot;
    return Addr(b, idx);
  }

  // Compact index of a fragment element given its full logical index.
  static std::vector<Expr> CompactOf(const Side& s, const std::vector<Expr>& full) {
    std::vector<Expr> q;
    for (int d : s.kept) q.push_back(full[d]);
    return q;
  }

  // Whether `e` (i32 index arithmetic) is a multiple of `v` for every value
  // of its variables: constants, products with such a factor, sums of such.
  static bool MultipleOf(const Expr& e, int64_t v) {
    if (v == 1) return true;
    if (const auto* i = ir::As<ir::IntImm>(e)) return i->value % v == 0;
    if (const auto* c = ir::As<ir::Cast>(e)) return MultipleOf(*c->value, v);
    if (const auto* b = ir::As<ir::Binary>(e)) {
      if (b->op == ir::BinaryOp::kMul) return MultipleOf(*b->lhs, v) || MultipleOf(*b->rhs, v);
      if (b->op == ir::BinaryOp::kAdd || b->op == ir::BinaryOp::kSub) {
        return MultipleOf(*b->lhs, v) && MultipleOf(*b->rhs, v);
      }
    }
    return false;
  }

  // Lanes of a vectorized copy between sides a and b (1: none): both have
  // the buffer's last dim as their last kept dim, starts there and row
  // strides multiples of the lanes, and a last extent the lanes divide.
  int64_t VectorLanes(const Side& a, const Side& b) {
    if (!options_.vector_copies) return 1;
    const Buf& ab = bufs_[a.info.buffer];
    const Buf& bb = bufs_[b.info.buffer];
    if (ab.dtype != bb.dtype || ab.where == Where::kRegisterFrag || bb.where == Where::kRegisterFrag ||
        ab.where == Where::kLocal || bb.where == Where::kLocal) {
      return 1;
    }
    const int64_t bytes = std::max(1, ir::BitWidth(ab.dtype) / 8);
    int64_t lanes = 16 / bytes;
    auto ok = [&](const Side& s, const Buf& buf) {
      const size_t rank = s.info.starts.size();
      if (s.kept.empty() || s.kept.back() != static_cast<int>(rank) - 1) return false;
      const int64_t ext = s.info.extents[rank - 1];
      const std::optional<int64_t> row = ir::FoldInt(buf.shape.back());
      if (ext % lanes != 0 || !MultipleOf(ir::FoldConstants(ToI32(s.info.starts[rank - 1])), lanes)) return false;
      return rank == 1 || (row && *row % lanes == 0);
    };
    while (lanes * bytes >= 4 && !(ok(a, ab) && ok(b, bb))) lanes /= 2;
    return lanes * bytes >= 4 ? lanes : 1;
  }

  // Whether atomic_add of register fragment `a` (layout L) into global `b` may add neighbouring column
  // pairs as one vector atomic (SAtomicAdd::more): f32/f16/bf16, an even number v of consecutive columns
  // per thread and of columns in all, the fragment's columns along b's contiguous last dim, b's rows and
  // the region's first column even (a pair is wholly inside or outside b and 2-element aligned).
  bool AtomicPairs(const Side& a, const Side& b, const FragmentLayout& L) {
    const Buf& bb = bufs_[b.info.buffer];
    if (!options_.vector_copies || bb.where != Where::kGlobal || L.replicated || L.v % 2 != 0 || L.cols % 2 != 0 ||
        !(bb.dtype == DType::kF32 || bb.dtype == DType::kF16 || bb.dtype == DType::kBF16)) {
      return false;
    }
    const size_t ra = a.info.starts.size(), rb = b.info.starts.size();
    if (a.kept.empty() || a.kept.size() != b.kept.size() || a.kept.back() != static_cast<int>(ra) - 1 ||
        b.kept.back() != static_cast<int>(rb) - 1 || a.info.extents[ra - 1] != b.info.extents[rb - 1]) {
      return false;
    }
    const std::optional<int64_t> row = ir::FoldInt(bb.shape.back());
    return MultipleOf(ir::FoldConstants(ToI32(b.info.starts[rb - 1])), 2) && (rb == 1 || (row && *row % 2 == 0));
  }

  // Vectorized copy (VectorLanes > 1): each thread moves `lanes` elements at
  // a time; a vector is wholly inside or outside a guarded tensor dim (the
  // dim is a multiple of the lanes), out-of-bounds sources give zeros.
  Status VectorCopy(const Side& a, const Side& b, int64_t lanes, bool async) {
    std::vector<int64_t> compact = Compact(b);
    compact.back() /= lanes;
    Status err = Status::Ok();
    SBlock code = FlatLoop(compact, [&](const std::vector<Expr>& q0) -> StatusOr<SBlock> {
      std::vector<Expr> q = q0;
      q.back() = Mul(q.back(), I(lanes));
      const std::vector<Expr> si = SideIndex(a, q), di = SideIndex(b, q);
      const Buf& sb = bufs_[a.info.buffer];
      const Buf& db = bufs_[b.info.buffer];
      const Expr dst = Addr(db, di);
      std::optional<Expr> sg = SideGuard(a, si);
      if (async) {  // cp.async: a source outside the tensor reads nothing and fills zeros
        const int64_t bytes = lanes * std::max(1, ir::BitWidth(db.dtype) / 8);
        SBlock out;
        out.push_back(IfS(SideGuard(b, di), {S(SCopyAsync{b.info.buffer, dst, a.info.buffer, Addr(sb, si), bytes, sg})}));
        return out;
      }
      SBlock copy{S(SCopyVec{b.info.buffer, dst, a.info.buffer, Addr(sb, si), lanes})};
      SBlock zeros;
      const std::string z = Fresh("z");
      zeros.push_back(For(z, 0, I(lanes), 1, true, {Store(b.info.buffer, Add(dst, V(z)), CastTo(db.dtype, ir::MakeInt(0)))}));
      SBlock out;
      SBlock body;
      if (sg) {
        body.push_back(S(SIf{*sg, std::move(copy), std::move(zeros)}));
      } else {
        body = std::move(copy);
      }
      out.push_back(IfS(SideGuard(b, di), std::move(body)));
      return out;
    }, &err);
    if (!err.ok()) return err;
    for (const Side* s : {&a, &b}) {
      if (bufs_[s->info.buffer].where == Where::kGlobal) {
        int64_t& al = out_->param_align[s->info.buffer];
        al = std::max<int64_t>(al, lanes * std::max(1, ir::BitWidth(bufs_[s->info.buffer].dtype) / 8));
      }
    }
    for (SStmt& s : code) cur_->push_back(std::move(s));
    return Status::Ok();
  }

  // ---- TMA (GpuLowerOptions::tma_copies; tma.h) --------------------------
  // A pipeline's mbarriers (one per stage) and its phase bits: bit s is the
  // parity of the phase of stage s that the next wait expects. Every thread
  // waits for every issued stage exactly once (PipelineAsyncCopies), so the
  // bits agree across threads, and they persist across re-runs of the
  // pipeline (an enclosing loop).
  struct TmaPipe {
    std::string bar, phase;
    int64_t stages = 0;
    bool used = false;
    bool not_all_tma = false;   // some hoisted copy of the pipeline stayed cp.async (or synchronous)
    std::optional<Expr> stage;  // the stage of the copies just issued
  };

  // The copy a -> b (after kAsyncCopyHint of pipeline tma_pipe_) as one TMA
  // box issued by thread 0 on the stage's mbarrier; false (with a note) when
  // the tensor map cannot describe it, and it stays cp.async.
  // With `pipe` < 0 (GpuLowerOptions::tma_pre_copies) the copy is one
  // before the pipelines, into a whole unstaged tile, on its own one-stage
  // barrier (PreTmaCopy).
  bool TmaCopy(const Side& a, const Side& b, int64_t pipe) {
    const bool staged = pipe >= 0;
    const Buf& sb = bufs_[a.info.buffer];
    const Buf& db = bufs_[b.info.buffer];
    auto note = [&](const std::string& n) {
      if (tma_notes_.insert(n).second) out_->notes.push_back(n);
    };
    const std::string what = "copy " + a.info.buffer + " -> " + b.info.buffer;
    const SimtBuffer* dsb = nullptr;
    for (const SimtBuffer& x : out_->buffers) {
      if (x.name == b.info.buffer) dsb = &x;
    }
    if (sb.dtype != db.dtype || !dsb) return false;
    const SmemSwizzle swz = dsb->swizzle;
    const int64_t esize = std::max(1, ir::BitWidth(sb.dtype) / 8);
    TmaCopyQuery q;
    q.dtype = sb.dtype;
    q.swizzle = swz;
    for (const Expr& d : sb.shape) q.tensor_shape.push_back(ir::FoldInt(d));
    q.src_extents = a.info.extents;
    // The destination: [stage, 0:d0, 0:d1, ...]: trailing dims whole (the
    // last as wide as the tile's row, which the buffer may pad), then one
    // stage dim of extent 1.
    const size_t rank = b.info.starts.size();
    size_t f = rank;
    while (f > 0 && ir::FoldInt(b.info.starts[f - 1]) == std::optional<int64_t>(0) &&
           (f == rank || ir::FoldInt(db.shape[f - 1]) == std::optional<int64_t>(b.info.extents[f - 1]))) {
      --f;
    }
    const bool whole = staged ? f == 1 && b.info.extents[0] == 1 : f == 0;
    for (size_t d = f; d < b.info.extents.size(); ++d) {
      q.dst_extents.push_back(b.info.extents[d]);
      q.dst_shape.push_back(ir::FoldInt(db.shape[d]).value_or(-1));
    }
    q.dst_region_whole = whole && !q.dst_extents.empty();
    std::vector<Expr> zero(b.kept.size(), I(0));
    const Expr dst_index = Linear(db.shape, SideIndex(b, zero));
    int64_t tile = esize;
    for (int64_t x : q.dst_shape) tile *= x;
    q.dst_aligned = tile % 128 == 0 || MultipleOf(dst_index, 128 / esize);
    // A swizzled tile [rows, cols] (a wgmma operand; swizzle.h) is stored as
    // cols * esize / W panels of rows x W bytes: one box per panel, W bytes
    // wide, the panel's columns of the same rows.
    int64_t panels = 1, rows = 0, pw = 0;
    if (swz != SmemSwizzle::kNone) {
      const int64_t w = SwizzleRowBytes(swz);
      pw = w / esize;
      const size_t nd = q.dst_extents.size();
      rows = nd >= 2 ? q.dst_extents[nd - 2] : 0;
      const int64_t cols = nd >= 1 ? q.dst_extents[nd - 1] : 0;
      if (nd != 2 || rows % 8 != 0 || (cols * esize) % w != 0 || q.src_extents.back() != cols ||
          q.dst_shape.back() != cols) {
        note("cp.async, not TMA, for " + what + ": a " + SwizzleName(swz) + "-swizzled tile of " + std::to_string(rows) +
             "x" + std::to_string(cols) + " that is not whole " + std::to_string(w) + "-byte panels of 8-row atoms");
        return false;
      }
      panels = cols / pw;
      q.src_extents.back() = pw;
      q.dst_extents.back() = pw;
      q.dst_shape.back() = pw;
      q.dst_aligned = (rows * cols * esize) % SwizzleAtomBytes(swz) == 0;  // stages start on atoms
    }
    const TmaCopyPlan plan = PlanTmaCopy(q);
    if (!plan.ok) {
      note("cp.async, not TMA, for " + what + ": " + plan.why_not);
      return false;
    }
    const int param = PointerParam(a.info.buffer);
    if (param < 0) return false;
    const int map = TensorMap(TensorMapDesc{param, sb.shape, plan.box, swz});
    TmaPipe& tp = tma_pipes_[pipe];
    if (!tp.used) {
      tp.used = true;
      tp.bar = Fresh("mbar");
      tp.phase = Fresh("phase");
      tp.stages = staged ? std::max<int64_t>(tma_stages_, 1) : 1;
      AddShared(tp.bar, DType::kU64, tp.stages);
    }
    tp.stage = staged ? ToI32(b.info.starts[0]) : I(0);
    SBlock issue;
    for (int64_t p = 0; p < panels; ++p) {
      std::vector<Expr> coords;
      for (const Expr& st : a.info.starts) coords.push_back(ToI32(st));
      if (p > 0) coords.back() = ir::FoldConstants(Add(coords.back(), I(p * pw)));
      const Expr at = p > 0 ? ir::FoldConstants(Add(dst_index, I(p * rows * pw))) : dst_index;
      issue.push_back(S(STmaLoad{map, std::move(coords), b.info.buffer, at, tp.bar, *tp.stage, plan.bytes}));
    }
    cur_->push_back(IfS(Eq(Tid(), I(0)), std::move(issue)));
    int64_t& al = out_->param_align[a.info.buffer];
    al = std::max<int64_t>(al, 16);
    std::string box;
    for (int64_t x : plan.box) box += (box.empty() ? "" : "x") + std::to_string(x);
    note("TMA: " + what + " as " + (panels > 1 ? std::to_string(panels) + " boxes " : std::string("box ")) + box + " (" +
         std::to_string(plan.bytes) + " B" + (panels > 1 ? " each" : "") + ") on " + tp.bar +
         (swz != SmemSwizzle::kNone ? std::string(", swizzle ") + SwizzleName(swz)
                                    : q.dst_shape.back() != q.dst_extents.back() ? ", as wide as the padded row" : ""));
    return true;
  }

  // GpuLowerOptions::tma_pre_copies: a global -> shared copy at the kernel's
  // top level before its first TMA pipeline (FlashAttention's Q tile), as
  // TMA boxes on a one-stage barrier of its own: thread 0 issues and
  // arrives, every thread waits for the phase (its parity from the
  // barrier's phase bit, flipped after). WarpSpecializeSyncLoop's persistent
  // form hands the issue to the producer (it loads the next tile's Q while
  // the consumers still run this one's epilogue). False where the tensor
  // map cannot describe the copy: it stays as without the option.
  bool PreTmaCopy(const Side& a, const Side& b) {
    if (bufs_[a.info.buffer].where != Where::kGlobal || bufs_[b.info.buffer].where != Where::kShared) return false;
    const int64_t pipe = -1 - static_cast<int64_t>(pre_copies_done_);
    if (!TmaCopy(a, b, pipe)) return false;
    ++pre_copies_done_;
    const TmaPipe& p = tma_pipes_[pipe];
    out_->notes.push_back(std::string(kPreTmaNote) + a.info.buffer + " -> " + b.info.buffer + " on " + p.bar);
    std::get<SIf>(cur_->back().node).then_body.push_back(S(SMbarArrive{p.bar, I(0)}));
    const Expr phase = V(p.phase);
    cur_->push_back(S(SMbarWait{p.bar, I(0), ir::MakeBinary(ir::BinaryOp::kBitAnd, phase, I(1))}));
    cur_->push_back(S(SAssign{p.phase, ir::MakeBinary(ir::BinaryOp::kBitXor, phase, I(1))}));
    return true;
  }

  // A whole wgmma accumulator (WgmmaAccumulatorLayout: per warp 16-row
  // blocks, lane l holding rows l / 4 and l / 4 + 8, column pairs 2 (l % 4))
  // into an unguarded f16/bf16 shared tile whose 8-element row chunks are
  // 16-byte aligned, as stmatrix x4 (SStmatrix; sm_90): per warp, row block
  // and 16 columns, the four 8x8 matrices (rows +0 / +8) x (columns +0 / +8)
  // are exactly the accumulator's register pairs -- matrix m = 2 cc + h holds
  // slots (2 rb + h) * col_slots + 2 (2 c16 + cc) + e, e < 2 -- so one
  // instruction stores what 8 per-element stores did, with the same values
  // (rounded once, at the store). Lane l gives the row address of matrix
  // l / 8, row l % 8. False (the per-element path) where any of it does not
  // hold. A staged epilogue's padded rows (StageWgmmaEpilogues: 16 bytes
  // longer than the tile's) keep each matrix's 8 rows on distinct banks.
  bool StmatrixCopy(const Side& a, const Side& b) {
    const Buf& sb = bufs_[a.info.buffer];
    const Buf& db = bufs_[b.info.buffer];
    if (!options_.stmatrix || options_.gemm != GemmStrategy::kWgmma || !plan_.wgmma.count(a.info.buffer) || !sb.layout ||
        db.where != Where::kShared || (db.swizzle != SmemSwizzle::kNone && db.swizzle != SmemSwizzle::k128B) ||
        !(db.dtype == DType::kF16 || db.dtype == DType::kBF16)) {
      return false;
    }
    const FragmentLayout& L = *sb.layout;
    if (L.replicated || L.g != 4 || L.v != 2 || L.H != 2 || L.Hp != 8 || L.C != 1 || L.shape.size() != 2 ||
        L.threads % 128 != 0 || L.R != 8 * (L.threads / 32) || L.rows % (L.R * L.H) != 0 || L.cols % 16 != 0) {
      return false;
    }
    // The whole fragment, unguarded, into a 2-D region with constant starts.
    const size_t ra = a.info.starts.size(), rb = b.info.starts.size();
    if (ra != 2 || a.kept.size() != 2 || b.kept.size() != 2 || a.info.extents[0] != L.rows || a.info.extents[1] != L.cols ||
        ir::FoldInt(ToI32(a.info.starts[0])) != std::optional<int64_t>(0) ||
        ir::FoldInt(ToI32(a.info.starts[1])) != std::optional<int64_t>(0) || b.kept.back() != static_cast<int>(rb) - 1) {
      return false;
    }
    for (size_t d = 0; d < rb; ++d) {
      if (b.info.guard[d] || !ir::FoldInt(ToI32(b.info.starts[d]))) return false;
    }
    const std::optional<int64_t> row = ir::FoldInt(db.shape.back());
    if (!row || *row % 8 != 0 || *ir::FoldInt(ToI32(b.info.starts[rb - 1])) % 8 != 0) return false;
    const int64_t rblocks = L.row_slots() / 2, c16s = L.cols / 16, cs = L.col_slots();
    const std::string rv = Fresh("rb"), cv = Fresh("c16");
    // This lane's address row and column (matrix l / 8 = 2 cc + h, its row l % 8).
    const Expr lane = ir::MakeBinary(ir::BinaryOp::kBitAnd, Tid(), I(31));
    const Expr mat = TDiv(lane, 8);
    const Expr r = ir::FoldConstants(Add(Add(Mul(V(rv), I(L.R * 2)), Mul(TDiv(Tid(), 32), I(16))),
                                         Add(Mul(TMod(mat, 2), I(8)), TMod(lane, 8))));
    const Expr c = ir::FoldConstants(Add(Mul(V(cv), I(16)), Mul(TDiv(mat, 2), I(8))));
    const std::vector<Expr> q = CompactOf(a, {r, c});
    SStmatrix st{b.info.buffer, Addr(db, SideIndex(b, q)), {}};
    for (int64_t m = 0; m < 4; ++m) {
      for (int64_t e = 0; e < 2; ++e) {
        const Expr slot = ir::FoldConstants(
            Add(Mul(Add(Mul(V(rv), I(2)), I(m % 2)), I(cs)), Add(Mul(Add(Mul(V(cv), I(2)), I(m / 2)), I(2)), I(e))));
        st.values.push_back(CastTo(db.dtype, ir::MakeLoad(a.info.buffer, {slot}, sb.dtype)));
      }
    }
    SBlock inner{S(std::move(st))};
    SBlock per_row{For(cv, 0, I(c16s), 1, true, std::move(inner))};
    cur_->push_back(For(rv, 0, I(rblocks), 1, true, std::move(per_row)));
    if (stmatrix_notes_.insert(a.info.buffer).second) {
      out_->notes.push_back("stmatrix: " + a.info.buffer + " -> " + b.info.buffer + " as " +
                            std::to_string(rblocks * c16s) + " stmatrix.x4 per thread");
    }
    return true;
  }

  // GpuLowerOptions::bulk_store: the bulk form of a staged epilogue's copy
  // tile[0:m, 0:n] -> T[r0:m, c0:n] (SimtKernel::bulk_epilogues; the copy
  // itself is lowered as before): lane l of warp 0 issues rows l, l + 32, ...,
  // each one SBulkStore of the row's columns that exist. Tile rows are
  // contiguous (padded: n + 16 bytes), T's row segments too; every address is
  // 16-byte aligned and every length a multiple of 16 bytes when T's rows,
  // n, c0 and the tile's pitch are multiples of 16 bytes (checked here; the
  // tile's base by the pass that uses the form). Otherwise no bulk form, and
  // a note says why.
  void BulkEpilogue(const Side& a, const Side& b) {
    const Buf& sb = bufs_[a.info.buffer];
    const Buf& db = bufs_[b.info.buffer];
    const std::string no = "epilogue: " + a.info.buffer + " -> " + b.info.buffer + " has no bulk-copy form: ";
    if (db.where != Where::kGlobal || sb.where != Where::kShared || sb.dtype != db.dtype || sb.swizzle != SmemSwizzle::kNone ||
        a.info.starts.size() != 2 || b.info.starts.size() != 2) {
      out_->notes.push_back(no + "not a 2-D shared tile -> global tensor copy of one dtype");
      return;
    }
    const int64_t e = std::max(1, ir::BitWidth(db.dtype) / 8);
    const int64_t m = a.info.extents[0], n = a.info.extents[1];
    const std::optional<int64_t> pitch = ir::FoldInt(sb.shape[1]), row = ir::FoldInt(db.shape[1]);
    const Expr c0 = ir::FoldConstants(ToI32(b.info.starts[1]));
    if (ir::FoldInt(ToI32(a.info.starts[0])) != std::optional<int64_t>(0) ||
        ir::FoldInt(ToI32(a.info.starts[1])) != std::optional<int64_t>(0) || b.info.extents[0] != m ||
        b.info.extents[1] != n || !pitch || !row || (*pitch * e) % 16 != 0 || (*row * e) % 16 != 0 || (n * e) % 16 != 0 ||
        !MultipleOf(c0, 16 / e)) {
      out_->notes.push_back(no + "rows, the tile's pitch or the first column not multiples of 16 bytes");
      return;
    }
    const std::string r = Fresh("bulk_r");
    const Expr grow = ir::FoldConstants(Add(ToI32(b.info.starts[0]), V(r)));
    // The row's columns that exist (T's rows and c0 are multiples of 16 bytes: so is the clipped length).
    Expr cols = I(n);
    std::optional<Expr> g;
    if (b.info.guard[0]) g = And(Ge(grow, I(0)), Lt(grow, ToI32(db.shape[0])));
    if (b.info.guard[1]) {
      cols = ir::MakeCall(ir::CallOp::kMin, {I(n), Bin(ir::BinaryOp::kSub, ToI32(db.shape[1]), c0)});
      g = AndOpt(g, Ge(c0, I(0)));
    }
    const std::string nb = Fresh("bulk_bytes");
    const Expr bytes = ir::FoldConstants(Mul(cols, I(e)));
    if (b.info.guard[1]) g = AndOpt(g, Lt(I(0), V(nb)));
    SBlock store{S(SBulkStore{b.info.buffer, Addr(db, {grow, c0}), a.info.buffer, Addr(sb, {V(r), I(0)}),
                              b.info.guard[1] ? V(nb) : bytes})};
    SBlock per_row;
    per_row.push_back(IfS(g, std::move(store)));
    SBlock lanes;
    if (b.info.guard[1]) lanes.push_back(Let(nb, bytes));
    lanes.push_back(S(SFor{r, Tid(), I(m), I(32), false, std::move(per_row)}));
    lanes.push_back(S(SBulkCommit{}));
    SBlock issue{S(SIf{Lt(Tid(), I(32)), std::move(lanes), {}})};
    out_->bulk_epilogues.push_back({a.info.buffer, b.info.buffer, std::move(issue)});
  }

  // GpuLowerOptions::tma_store: the TMA form of a staged epilogue's copy
  // tile[0:m, 0:n] -> T[r0:m, c0:n] (SimtKernel::bulk_epilogues, as
  // BulkEpilogue's; the copy itself is lowered as before): thread 0 issues
  // one STmaStore per 64-column panel of the 128B-swizzled tile (a box [m,
  // 64] of a tensor map of T; the engine skips the box's elements past T's
  // end, so no guards), then commits. T's rows are a multiple of 16 bytes
  // (StageWgmmaEpilogues checked it: TMA's global stride rule) and its base
  // 16-byte aligned (param_align). Otherwise no TMA form, and a note says why.
  void TmaStoreEpilogue(const Side& a, const Side& b) {
    const Buf& sb = bufs_[a.info.buffer];
    const Buf& db = bufs_[b.info.buffer];
    const std::string no = "epilogue: " + a.info.buffer + " -> " + b.info.buffer + " has no TMA-store form: ";
    if (db.where != Where::kGlobal || sb.where != Where::kShared || sb.dtype != db.dtype ||
        sb.swizzle != SmemSwizzle::k128B || a.info.starts.size() != 2 || b.info.starts.size() != 2 ||
        db.shape.size() != 2) {
      out_->notes.push_back(no + "not a 2-D 128B-swizzled shared tile -> rank-2 global tensor copy of one dtype");
      return;
    }
    const int64_t e = std::max(1, ir::BitWidth(db.dtype) / 8);
    const int64_t m = a.info.extents[0], n = a.info.extents[1], pw = SwizzleRowBytes(sb.swizzle) / e;
    if (ir::FoldInt(ToI32(a.info.starts[0])) != std::optional<int64_t>(0) ||
        ir::FoldInt(ToI32(a.info.starts[1])) != std::optional<int64_t>(0) || b.info.extents[0] != m ||
        b.info.extents[1] != n || n % pw != 0 || m % 8 != 0 || m > 256) {
      out_->notes.push_back(no + "the copy is not the whole tile of whole 64-column panels");
      return;
    }
    const int param = PointerParam(b.info.buffer);
    if (param < 0) {
      out_->notes.push_back(no + b.info.buffer + " is not a tensor parameter");
      return;
    }
    const int map = TensorMap(TensorMapDesc{param, db.shape, {m, pw}, sb.swizzle});
    SBlock issue;
    for (int64_t p = 0; p < n / pw; ++p) {
      const Expr c = ir::FoldConstants(Add(ToI32(b.info.starts[1]), I(p * pw)));
      issue.push_back(S(STmaStore{map, {ir::FoldConstants(ToI32(b.info.starts[0])), c}, a.info.buffer,
                                  Addr(sb, {I(0), I(p * pw)}), b.info.buffer}));
    }
    issue.push_back(S(SBulkCommit{}));
    int64_t& al = out_->param_align[b.info.buffer];
    al = std::max<int64_t>(al, 16);
    out_->bulk_epilogues.push_back({a.info.buffer, b.info.buffer, {IfS(Eq(Tid(), I(0)), std::move(issue))}});
    out_->notes.push_back("epilogue: " + a.info.buffer + " -> " + b.info.buffer + " has a TMA-store form: " +
                          std::to_string(n / pw) + " boxes " + std::to_string(m) + "x" + std::to_string(pw) +
                          " (swizzle 128B) by thread 0");
  }

  // copy / atomic_add tile: src -> dst elementwise.
  Status ElementwiseTile(const ir::Stmt& st, const ir::Region& src, const ir::Region& dst, bool atomic) {
    StatusOr<Side> a = Resolve(src), b = Resolve(dst);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    // A copy after kAsyncCopyHint (PipelineAsyncCopies) becomes cp.async where
    // it vectorizes (4, 8, 16 bytes); otherwise it stays synchronous, which the
    // pipeline's barriers order just as well.
    const bool hinted = async_next_;  // a hoisted copy of pipeline tma_pipe_
    const bool async = std::exchange(async_next_, false) && bufs_[a->info.buffer].where == Where::kGlobal &&
                       bufs_[b->info.buffer].where == Where::kShared;
    if (async && !atomic && options_.tma_copies && tma_pipe_ >= 0 && TmaCopy(*a, *b, tma_pipe_)) return Status::Ok();
    if (!hinted && !atomic && pre_copies_.count(ir::As<ir::Copy>(st)) && PreTmaCopy(*a, *b)) return Status::Ok();
    if (hinted && tma_pipe_ >= 0) tma_pipes_[tma_pipe_].not_all_tma = true;
    if (!atomic && alias_.count(a->info.buffer)) {
      if (bufs_[a->info.buffer].swizzle != SmemSwizzle::kNone) {
        TmaStoreEpilogue(*a, *b);
      } else if (options_.bulk_store) {
        BulkEpilogue(*a, *b);
      }
    }
    if (!atomic) {
      if (const int64_t lanes = VectorLanes(*a, *b); lanes > 1) return VectorCopy(*a, *b, lanes, async);
    }
    const DType dt = bufs_[b->info.buffer].dtype;
    Status err = Status::Ok();
    auto emit = [&](const std::vector<Expr>& q, std::optional<Expr> sslot, std::optional<Expr> dslot,
                    std::optional<Expr> extra_guard) -> StatusOr<SBlock> {
      const std::vector<Expr> si = SideIndex(*a, q), di = SideIndex(*b, q);
      Expr val = CastTo(dt, SideLoad(*a, si, sslot));
      if (std::optional<Expr> g = SideGuard(*a, si)) val = ir::MakeSelect(*g, val, CastTo(dt, ir::MakeInt(0)));
      SBlock out;
      Expr addr = SideAddr(*b, di, dslot);
      SStmt w = atomic ? S(SAtomicAdd{b->info.buffer, addr, val}) : Store(b->info.buffer, addr, val);
      out.push_back(IfS(AndOpt(SideGuard(*b, di), extra_guard), {std::move(w)}));
      return out;
    };
    // A select on a floating zero needs a float literal of dtype dt.
    SBlock code;
    const Buf& sb = bufs_[a->info.buffer];
    const Buf& db = bufs_[b->info.buffer];
    if (db.where == Where::kRegisterFrag && !atomic) {
      // A register source has the destination's layout (InferGpuLayouts): slot to slot.
      if (sb.where == Where::kRegisterFrag && !(sb.layout && *sb.layout == *db.layout)) {
        return Err(st, "copy " + a->info.buffer + " -> " + b->info.buffer + ": register fragments of different layouts");
      }
      const bool same = sb.where == Where::kRegisterFrag;
      code = LayoutLoop(*db.layout, [&](const std::vector<Expr>& full, Expr slot, Expr) {
        return emit(CompactOf(*b, full), same ? std::optional<Expr>(slot) : std::nullopt, slot, std::nullopt);
      }, &err);
    } else if (sb.where == Where::kRegisterFrag && !atomic && StmatrixCopy(*a, *b)) {
      return Status::Ok();
    } else if (sb.where == Where::kRegisterFrag) {
      const FragmentLayout& L = *sb.layout;
      std::optional<Expr> once;  // replicated: one lane stores
      if (L.replicated && L.g > 1) once = Eq(TMod(Tid(), L.g), I(0));
      const bool pairs = atomic && AtomicPairs(*a, *b, L);
      code = LayoutLoop(L, [&](const std::vector<Expr>& full, Expr slot, Expr) -> StatusOr<SBlock> {
        const std::vector<Expr> q = CompactOf(*a, full);
        if (!pairs || SideGuard(*a, SideIndex(*a, q))) return emit(q, slot, std::nullopt, once);
        // Slots 2s and 2s + 1 hold columns 2c and 2c + 1 of one row (LayoutLoop: v is even): the even slot
        // adds both as one vector atomic; the odd one (dead code once unrolled) adds nothing.
        const std::vector<Expr> di = SideIndex(*b, q);
        SStmt w = S(SAtomicAdd{b->info.buffer, SideAddr(*b, di, std::nullopt), CastTo(dt, SideLoad(*a, {}, slot)),
                               {CastTo(dt, SideLoad(*a, {}, ir::FoldConstants(Add(slot, I(1)))))}});
        SBlock out;
        out.push_back(IfS(Eq(TMod(slot, 2), I(0)), {IfS(SideGuard(*b, di), {std::move(w)})}));
        return out;
      }, &err);
      if (pairs) {
        int64_t& al = out_->param_align[b->info.buffer];
        al = std::max<int64_t>(al, 2 * (ir::BitWidth(dt) / 8));
      }
    } else {
      code = FlatLoop(Compact(*b), [&](const std::vector<Expr>& q) {
        return emit(q, std::nullopt, std::nullopt, std::nullopt);
      }, &err);
    }
    if (!err.ok()) return err;
    (void)st;
    for (SStmt& s : code) cur_->push_back(std::move(s));
    return Status::Ok();
  }

  Status LowerFill(const ir::Fill& fl) {
    StatusOr<Side> d = Resolve(fl.dst);
    if (!d.ok()) return d.status();
    StatusOr<Expr> v = Lower(fl.value);
    if (!v.ok()) return v.status();
    const Buf& b = bufs_[d->info.buffer];
    Expr val = CastTo(b.dtype, *v);
    Status err = Status::Ok();
    SBlock code;
    if (b.where == Where::kRegisterFrag) {
      // Padding slots too: harmless, and keeps the loop branch-free.
      const std::string s = Fresh("s");
      code.push_back(For(s, 0, I(b.layout->slots()), 1, true, {Store(d->info.buffer, V(s), val)}));
    } else if (b.where == Where::kLocal) {
      const std::string e = Fresh("e");
      int64_t total = 1;
      for (int64_t c : Compact(*d)) total *= c;
      std::vector<Expr> q;
      Expr rem = V(e);
      std::vector<int64_t> c = Compact(*d);
      q.resize(c.size());
      for (size_t k = c.size(); k-- > 0;) {
        q[k] = k == 0 ? rem : TMod(rem, c[k]);
        if (k > 0) rem = TDiv(rem, c[k]);
      }
      std::vector<Expr> idx = SideIndex(*d, q);
      code.push_back(For(e, 0, I(total), 1, false, {Store(d->info.buffer, Addr(b, idx), val)}));
    } else {
      code = FlatLoop(Compact(*d), [&](const std::vector<Expr>& q) -> StatusOr<SBlock> {
        std::vector<Expr> idx = SideIndex(*d, q);
        SBlock o;
        o.push_back(IfS(SideGuard(*d, idx), {Store(d->info.buffer, Addr(b, idx), val)}));
        return o;
      }, &err);
    }
    if (!err.ok()) return err;
    for (SStmt& s : code) cur_->push_back(std::move(s));
    return Status::Ok();
  }

  // 2-D view of a gemm operand region: element (x, y) of the last two dims.
  StatusOr<std::function<Expr(Expr, Expr)>> View(const ir::Region& r, int64_t* e0, int64_t* e1) {
    StatusOr<Side> s = Resolve(r);
    if (!s.ok()) return s.status();
    const size_t n = s->info.extents.size();
    if (n < 2) return Status(StatusCode::kUnimplemented, "gemm operand " + r.buffer + " is not 2-D");
    *e0 = s->info.extents[n - 2];
    *e1 = s->info.extents[n - 1];
    const Buf& b = bufs_[r.buffer];
    if (b.where == Where::kGlobal || b.where == Where::kRegisterFrag) {
      return Status(StatusCode::kUnimplemented, "gemm operand " + r.buffer + " must be in shared memory");
    }
    Side side = *s;
    return std::function<Expr(Expr, Expr)>([side, b, name = r.buffer, dt = b.dtype](Expr x, Expr y) {
      std::vector<Expr> idx;
      const size_t n2 = side.info.starts.size();
      for (size_t d = 0; d < n2; ++d) {
        Expr i = ToI32(side.info.starts[d]);
        if (d == n2 - 2) i = Add(std::move(i), x);
        if (d == n2 - 1) i = Add(std::move(i), y);
        idx.push_back(ir::FoldConstants(i));
      }
      return ir::MakeLoad(name, {Addr(b, idx)}, dt);
    });
  }

  // Element offset and (row, column) strides of the last two dims of a
  // shared-memory region: element (x, y) is at base + x * s0 + y * s1.
  Status SharedView(const ir::Region& r, Expr* base, int64_t* s0, int64_t* s1, int64_t* e0, int64_t* e1) {
    StatusOr<Side> s = Resolve(r);
    if (!s.ok()) return s.status();
    const Buf& b = bufs_[r.buffer];
    if (b.where != Where::kShared) return Status(StatusCode::kInternal, "mma operand " + r.buffer + " not in shared memory");
    const size_t n = s->info.extents.size();
    std::vector<int64_t> stride(n, 1);
    for (size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * ir::FoldInt(b.shape[d + 1]).value_or(1);
    Expr off = I(0);
    for (size_t d = 0; d < n; ++d) off = Add(off, Mul(ToI32(s->info.starts[d]), I(stride[d])));
    *base = ir::FoldConstants(off);
    *s0 = stride[n - 2];
    *s1 = stride[n - 1];
    *e0 = s->info.extents[n - 2];
    *e1 = s->info.extents[n - 1];
    return Status::Ok();
  }

  // A tensor-core gemm's shared operands as M x K (A) and K x N (B) views:
  // element A(x, y) at a_base + x * a_row_stride + y * a_col_stride, B(x, y)
  // at b_base + x * b_k_stride + y * b_n_stride (transposes resolved), and
  // the gemm's M, N, K (after checking that A's K equals B's). The one
  // operand resolution of every tensor-core lowering (mma.sync, MFMA/WMMA,
  // wgmma).
  struct GemmOperands {
    Expr a_base, b_base;
    int64_t a_row_stride = 0, a_col_stride = 0, b_k_stride = 0, b_n_stride = 0;
    int64_t M = 0, N = 0, K = 0;
  };
  StatusOr<GemmOperands> ResolveGemmOperands(const ir::Stmt& st, const ir::Gemm& g) {
    GemmOperands o;
    int64_t as0 = 0, as1 = 0, ae0 = 0, ae1 = 0, bs0 = 0, bs1 = 0, be0 = 0, be1 = 0;
    Status s = SharedView(g.a, &o.a_base, &as0, &as1, &ae0, &ae1);
    if (s.ok()) s = SharedView(g.b, &o.b_base, &bs0, &bs1, &be0, &be1);
    if (!s.ok()) return Err(st, s.message());
    o.a_row_stride = g.trans_a ? as1 : as0;
    o.a_col_stride = g.trans_a ? as0 : as1;
    o.b_k_stride = g.trans_b ? bs1 : bs0;
    o.b_n_stride = g.trans_b ? bs0 : bs1;
    o.M = g.trans_a ? ae1 : ae0;
    o.K = g.trans_a ? ae0 : ae1;
    o.N = g.trans_b ? be0 : be1;
    const int64_t kb = g.trans_b ? be1 : be0;
    if (o.K != kb) {
      return Err(st, "gemm: operand shapes " + std::to_string(o.M) + "x" + std::to_string(o.K) + " and " +
                         std::to_string(kb) + "x" + std::to_string(o.N) + " disagree on K");
    }
    return o;
  }

  // Tensor cores (plan_.mma): one SMma per k-step; C keeps MmaAccumulatorLayout.
  Status LowerGemmMma(const ir::Stmt& st, const ir::Gemm& g, MmaKind kind) {
    const Buf& cb = bufs_[g.c.buffer];
    const FragmentLayout& L = *cb.layout;
    StatusOr<GemmOperands> op = ResolveGemmOperands(st, g);
    if (!op.ok()) return op.status();
    const int64_t M = op->M, N = op->N, K = op->K;
    SMma m;
    m.kind = kind;
    m.a = g.a.buffer;
    m.b = g.b.buffer;
    m.c = g.c.buffer;
    m.a_base = op->a_base;
    m.b_base = op->b_base;
    m.a_row_stride = op->a_row_stride;
    m.a_col_stride = op->a_col_stride;
    m.b_k_stride = op->b_k_stride;
    m.b_n_stride = op->b_n_stride;
    m.sm75 = options_.mma_sm75;
    const int64_t kstep = MmaStepK(kind, m.sm75);
    if (M != L.rows || N != L.cols || K % kstep != 0) {
      return Err(st, "gemm: operand shapes " + std::to_string(M) + "x" + std::to_string(K) + " and " +
                         std::to_string(K) + "x" + std::to_string(N) + " do not match the accumulator " +
                         std::to_string(L.rows) + "x" + std::to_string(L.cols));
    }
    if (L.rows % (2 * L.R) != 0 || L.cols % (8 * L.C) != 0 || L.g != 4 || L.v != 2 || L.R % 8 != 0 || L.H != 1) {
      return Err(st, "gemm: accumulator layout " + L.ToString() + " is not an mma.sync warp grid");
    }
    m.R = L.R;
    m.C = L.C;
    m.m_tiles = L.rows / (2 * L.R);
    m.n_tiles = L.cols / (8 * L.C);
    m.c_col_slots = L.col_slots();
    if (g.clear_accum) {
      const std::string z = Fresh("s");
      cur_->push_back(For(z, 0, I(L.slots()), 1, true, {Store(g.c.buffer, V(z), CastTo(cb.dtype, ir::MakeInt(0)))}));
    }
    const std::string k = Fresh("k");
    m.k0 = V(k);
    const int64_t steps = K / kstep;
    cur_->push_back(For(k, 0, I(K), kstep, steps <= 16, {S(std::move(m))}));
    return Status::Ok();
  }

  // AMD matrix cores (plan_.mma under kMfma / kWmma): one SAmdMma per k-step;
  // C keeps AmdMatrixAccumulatorLayout.
  Status LowerGemmAmd(const ir::Stmt& st, const ir::Gemm& g, MmaKind kind) {
    const Buf& cb = bufs_[g.c.buffer];
    const FragmentLayout& L = *cb.layout;
    StatusOr<GemmOperands> op = ResolveGemmOperands(st, g);
    if (!op.ok()) return op.status();
    const int64_t M = op->M, N = op->N, K = op->K;
    SAmdMma m;
    m.core = options_.gemm == GemmStrategy::kWmma ? MatrixCore::kWmma : MatrixCore::kMfma;
    m.kind = kind;
    m.a = g.a.buffer;
    m.b = g.b.buffer;
    m.c = g.c.buffer;
    m.a_base = op->a_base;
    m.b_base = op->b_base;
    m.a_row_stride = op->a_row_stride;
    m.a_col_stride = op->a_col_stride;
    m.b_k_stride = op->b_k_stride;
    m.b_n_stride = op->b_n_stride;
    const int64_t step = AmdMatrixK(m.core, kind), P = MatrixCoreRegs(m.core);
    if (M != L.rows || N != L.cols || K % step != 0 || L.R * 16 != L.threads || L.g != 16 || L.v != 1 ||
        M % (P * L.R) != 0 || N % 16 != 0) {
      return Err(st, "gemm: operand shapes " + std::to_string(M) + "x" + std::to_string(K) + " and " +
                         std::to_string(K) + "x" + std::to_string(N) + " do not match the accumulator " +
                         L.ToString() + " of the " + MatrixCoreName(m.core) + " gemm");
    }
    m.R = L.R;
    m.m_tiles = M / (P * L.R);
    m.n_tiles = N / 16;
    m.c_col_slots = L.col_slots();
    if (g.clear_accum) {
      const std::string z = Fresh("s");
      cur_->push_back(For(z, 0, I(L.slots()), 1, true, {Store(g.c.buffer, V(z), CastTo(cb.dtype, ir::MakeInt(0)))}));
    }
    const std::string k = Fresh("k");
    m.k0 = V(k);
    // Not unrolled: each step is already m_tiles x n_tiles unrolled
    // instructions, and LLVM hoisting the next steps' LDS reads above them
    // pushed flash attention (d128, wave32 WMMA) past 256 VGPRs into scratch.
    cur_->push_back(For(k, 0, I(K), step, false, {S(std::move(m))}));
    return Status::Ok();
  }

  // wgmma (plan_.wgmma, GemmStrategy::kWgmma): one SWgmma per k-step of 16;
  // C keeps WgmmaAccumulatorLayout, A and B are swizzled shared buffers
  // addressed through descriptors (wgmma.h: the geometry InferGpuLayouts
  // checked with WgmmaOperandProblem).
  // With `defer` (kWgmmaDeferHint: PipelineAsyncCopies proved the loop body
  // is only this gemm and placed the refills after a sync that follows it)
  // the units end with wait_group 1; kWgmmaDrainHint drains them.
  Status LowerGemmWgmma(const ir::Stmt& st, const ir::Gemm& g, MmaKind kind, bool defer) {
    const Buf& cb = bufs_[g.c.buffer];
    const FragmentLayout& L = *cb.layout;
    const std::string k = Fresh("k");
    // Operand region r: x (M or N) and k extents, and the descriptor's start
    // for the k-step at k (bytes from the shared memory's start, unswizzled:
    // the hardware swizzles the addresses it forms from it).
    // k-steps per SWgmma: all of the gemm's (up to 16), else the largest divisor of them <= 16;
    // with A in registers all of them (its registers are constant slots of one unit).
    const Buf& ab = bufs_[g.a.buffer];
    const bool a_regs = ab.where == Where::kRegisterFrag;
    int64_t per = 1;
    auto operand = [&](const ir::Region& r, bool k_major, int64_t* ext_x, int64_t* ext_k, SWgmmaOperand* o,
                       int64_t tile) -> Status {
      StatusOr<Side> side = Resolve(r);
      if (!side.ok()) return side.status();
      const Buf& b = bufs_[r.buffer];
      const size_t n = side->info.extents.size();
      const std::optional<int64_t> rows = ir::FoldInt(b.shape[n - 2]), cols = ir::FoldInt(b.shape[n - 1]);
      const std::optional<int64_t> r0 = ir::FoldInt(side->info.starts[n - 2]), c0 = ir::FoldInt(side->info.starts[n - 1]);
      const SimtBuffer* sb = nullptr;
      for (const SimtBuffer& x : out_->buffers) {
        if (x.name == r.buffer) sb = &x;
      }
      if (b.where != Where::kShared || b.swizzle == SmemSwizzle::kNone || !rows || !cols || !r0 || !c0 || !sb) {
        return Err(st, "internal: wgmma operand " + r.buffer + " is not a swizzled shared tile at a constant offset");
      }
      const int64_t e = std::max(1, ir::BitWidth(b.dtype) / 8), w = SwizzleRowBytes(b.swizzle), pw = w / e;
      std::vector<Expr> lead_shape(b.shape.begin(), b.shape.end() - 2), lead;
      for (size_t d = 0; d + 2 < n; ++d) lead.push_back(ToI32(side->info.starts[d]));
      Expr base = Add(I(sb->shared_offset), Mul(lead.empty() ? I(0) : Linear(lead_shape, lead), I(*rows * *cols * e)));
      o->buffer = r.buffer;
      o->swizzle = b.swizzle;
      o->mn_major = !k_major;
      WgmmaStrides(*rows, e, b.swizzle, k_major, &o->lbo, &o->sbo);
      *ext_x = side->info.extents[k_major ? n - 2 : n - 1];
      *ext_k = side->info.extents[k_major ? n - 1 : n - 2];
      const int64_t kstep = WgmmaK(kind), steps = *ext_k / kstep;
      per = 1;
      for (int64_t c = 1; c <= (a_regs ? steps : 16); ++c) {
        if (steps % c == 0) per = c;
      }
      // k-step s of this SWgmma starts at k = V(k) + 16 s (or 16 s when one SWgmma covers the gemm).
      for (int64_t ks = 0; ks < per; ++ks) {
        const Expr kx = per == steps ? I(kstep * ks) : Add(V(k), I(kstep * ks));
        Expr start;
        if (k_major) {
          const Expr col = Add(I(*c0), kx);
          start = Add(base, Add(Mul(Add(Mul(TDiv(col, pw), I(*rows)), I(*r0)), I(w)), Mul(TMod(col, pw), I(e))));
        } else {
          start = Add(base, Mul(Add(I((*c0 / pw) * *rows + *r0), kx), I(w)));
        }
        o->starts.push_back(ir::FoldConstants(start));
      }
      o->tile_bytes = k_major ? tile * w : tile % pw == 0 ? (tile / pw) * *rows * w : 0;
      return Status::Ok();
    };
    SWgmma m;
    m.kind = kind;
    m.c = g.c.buffer;
    m.warpgroups = T() / 128;
    int64_t M = 0, K = 0, N = 0, KB = 0;
    const int64_t n_cols = L.cols;
    m.n = WgmmaInstrN(n_cols);
    Status s = Status::Ok();
    if (a_regs) {
      // Register A (InferGpuLayouts: WgmmaAccumulatorLayout(M, K), K-major).
      if (!ab.layout) return Err(st, "internal: wgmma register operand A " + g.a.buffer + " has no layout");
      const FragmentLayout& LA = *ab.layout;
      if (g.trans_a || LA.H != 2 || LA.Hp != 8 || LA.g != 4 || LA.v != 2 || LA.C != 1 || LA.replicated ||
          !(LA == WgmmaAccumulatorLayout(LA.rows, LA.cols, T()))) {
        return Err(st, "internal: wgmma register operand A " + g.a.buffer + " has layout " + LA.ToString());
      }
      M = LA.rows;
      K = LA.cols;
      m.a_frag = g.a.buffer;
    }
    if (!a_regs) s = operand(g.a, !g.trans_a, &M, &K, &m.a, 64);
    if (s.ok()) s = operand(g.b, g.trans_b, &N, &KB, &m.b, m.n);
    if (!s.ok()) return s;
    if (M != L.rows || N != L.cols || K != KB || K % WgmmaK(kind) != 0 || m.n == 0 || L.H != 2 || L.g != 4 || L.v != 2 ||
        M % (64 * m.warpgroups) != 0) {
      return Err(st, "gemm: operand shapes " + std::to_string(M) + "x" + std::to_string(K) + " and " +
                         std::to_string(KB) + "x" + std::to_string(N) + " do not match the wgmma accumulator " + L.ToString());
    }
    m.m_tiles = M / (64 * m.warpgroups);
    m.n_tiles = N / m.n;
    m.c_col_slots = L.col_slots();
    if (g.clear_accum) {
      const std::string z = Fresh("s");
      cur_->push_back(For(z, 0, I(L.slots()), 1, true, {Store(g.c.buffer, V(z), CastTo(cb.dtype, ir::MakeInt(0)))}));
    }
    m.k_steps = per;
    if (a_regs) {
      // Slots of register r (two 16-bit elements, low half first) of k-step s, m-tile j: rows
      // 16 w + l / 4 + 8 (r % 2) -> row slot 2 j + r % 2; columns 16 s + 2 (l % 4) + 8 (r / 2) + h
      // -> column slot 4 s + 2 (r / 2) + h (simt_ir.h).
      const int64_t acs = bufs_[g.a.buffer].layout->col_slots();
      for (int64_t ks = 0; ks < per; ++ks)
        for (int64_t j = 0; j < m.m_tiles; ++j)
          for (int64_t r = 0; r < 4; ++r)
            for (int64_t h = 0; h < 2; ++h) m.a_slots.push_back((2 * j + r % 2) * acs + 4 * ks + 2 * (r / 2) + h);
      defer = false;  // a pipelined GEMM loop's deferral is for shared operands (wg_wait may still leave it in flight)
    }
    if (defer && !g.clear_accum) {
      m.wait_pending = 1;
      wgmma_deferred_.insert(g.c.buffer);
    } else if (g.wg_wait != 0) {
      // T.gemm(..., wg_wait=W): commit the group, then wait_group W (-1: none; a later
      // `hint wait_wgmma N` retires it). Only where the gemm is one group: a gemm split
      // into a loop of units would commit several, and wait_wgmma counts gemms.
      if (per == K / WgmmaK(kind)) {
        m.wait_pending = g.wg_wait;
      } else {
        out_->notes.push_back("wgmma: gemm into " + g.c.buffer + " stays synchronous (wg_wait=" + std::to_string(g.wg_wait) +
                              " asked): its " + std::to_string(K / WgmmaK(kind)) + " k-steps are " +
                              std::to_string(K / WgmmaK(kind) / per) + " groups, not one");
      }
    }
    if (per == K / WgmmaK(kind)) {
      cur_->push_back(S(std::move(m)));  // the whole gemm in one unit
    } else {
      cur_->push_back(For(k, 0, I(K), WgmmaK(kind) * per, false, {S(std::move(m))}));
    }
    return Status::Ok();
  }

  Status LowerGemm(const ir::Stmt& st, const ir::Gemm& g) {
    const Buf& cb = bufs_[g.c.buffer];
    const bool defer = std::exchange(wgmma_defer_next_, false);
    if (auto mk = plan_.mma.find(g.c.buffer);
        mk != plan_.mma.end() && plan_.wgmma.count(g.c.buffer) && cb.where == Where::kRegisterFrag && cb.layout &&
        (bufs_[g.a.buffer].where == Where::kShared ||
         (bufs_[g.a.buffer].where == Where::kRegisterFrag && bufs_[g.a.buffer].layout)) &&
        bufs_[g.b.buffer].where == Where::kShared) {
      return LowerGemmWgmma(st, g, mk->second, defer);
    }
    if (auto mk = plan_.mma.find(g.c.buffer);
        mk != plan_.mma.end() && cb.where == Where::kRegisterFrag && cb.layout && bufs_[g.a.buffer].where == Where::kShared &&
        bufs_[g.b.buffer].where == Where::kShared) {
      if (options_.gemm == GemmStrategy::kMfma || options_.gemm == GemmStrategy::kWmma) {
        return LowerGemmAmd(st, g, mk->second);
      }
      return LowerGemmMma(st, g, mk->second);
    }
    if (cb.where != Where::kRegisterFrag || !cb.layout || cb.layout->replicated || cb.layout->v != 1) {
      return Err(st, "gemm: the accumulator must be a whole fragment in registers (it is " +
                         std::string(cb.where == Where::kRegisterFrag ? "in registers with another layout" : "not") + ")");
    }
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    auto av = View(g.a, &a0, &a1);
    if (!av.ok()) return Err(st, av.status().message());
    auto bv = View(g.b, &b0, &b1);
    if (!bv.ok()) return Err(st, bv.status().message());
    const FragmentLayout& L = *cb.layout;
    const int64_t K = g.trans_a ? a0 : a1;
    const DType ct = cb.dtype;
    const std::string ar = Fresh("ga"), br = Fresh("gb"), k = Fresh("k");
    AddRegs(ar, ct, L.row_slots());
    AddRegs(br, ct, L.col_slots());
    if (g.clear_accum) {
      const std::string s = Fresh("s");
      cur_->push_back(For(s, 0, I(L.slots()), 1, true, {Store(g.c.buffer, V(s), CastTo(ct, ir::MakeInt(0)))}));
    }
    SBlock kb;
    {
      const std::string rs = Fresh("rs"), r = Fresh("r");
      Expr row = RowExpr(L, V(rs), TDiv(Tid(), L.g));
      Expr a = g.trans_a ? (*av)(V(k), V(r)) : (*av)(V(r), V(k));
      SBlock body{Let(r, row), Store(ar, V(rs), CastTo(ct, ir::MakeInt(0)))};
      if (L.rows % (L.R * L.H) != 0) {
        body.push_back(IfS(Lt(V(r), I(L.rows)), {Store(ar, V(rs), CastTo(ct, a))}));
      } else {
        body.back() = Store(ar, V(rs), CastTo(ct, a));
      }
      kb.push_back(For(rs, 0, I(L.row_slots()), 1, true, std::move(body)));
    }
    {
      const std::string cs = Fresh("cs"), c = Fresh("c");
      Expr col = ir::FoldConstants(Add(Mul(V(cs), I(L.g)), TMod(Tid(), L.g)));
      Expr b = g.trans_b ? (*bv)(V(c), V(k)) : (*bv)(V(k), V(c));
      SBlock body{Let(c, col), Store(br, V(cs), CastTo(ct, ir::MakeInt(0)))};
      if (L.cols % L.g != 0) {
        body.push_back(IfS(Lt(V(c), I(L.cols)), {Store(br, V(cs), CastTo(ct, b))}));
      } else {
        body.back() = Store(br, V(cs), CastTo(ct, b));
      }
      kb.push_back(For(cs, 0, I(L.col_slots()), 1, true, std::move(body)));
    }
    {
      const std::string rs = Fresh("rs"), cs = Fresh("cs");
      Expr slot = ir::FoldConstants(Add(Mul(V(rs), I(L.col_slots())), V(cs)));
      Expr upd = Add(ir::MakeLoad(g.c.buffer, {slot}, ct),
                     Mul(ir::MakeLoad(ar, {V(rs)}, ct), ir::MakeLoad(br, {V(cs)}, ct)));
      kb.push_back(For(rs, 0, I(L.row_slots()), 1, true,
                       {For(cs, 0, I(L.col_slots()), 1, true, {Store(g.c.buffer, slot, upd)})}));
    }
    cur_->push_back(For(k, 0, I(K), 1, false, std::move(kb)));
    return Status::Ok();
  }

  static Expr Identity(ir::ReduceOp op, DType t) {
    switch (op) {
      case ir::ReduceOp::kSum:
      case ir::ReduceOp::kAbsSum:
      case ir::ReduceOp::kAbsMax: return CastTo(t, ir::MakeInt(0));
      case ir::ReduceOp::kMax:
        return ir::IsFloat(t) ? ir::MakeFloat(-INFINITY, t)
                              : ir::MakeInt(ir::IsSigned(t) ? -(int64_t{1} << (ir::BitWidth(t) - 1)) : 0, t);
      case ir::ReduceOp::kMin:
        return ir::IsFloat(t) ? ir::MakeFloat(INFINITY, t)
                              : ir::MakeInt(ir::IsSigned(t) ? (int64_t{1} << (ir::BitWidth(t) - 1)) - 1
                                                            : (ir::BitWidth(t) >= 64 ? -1 : (int64_t{1} << ir::BitWidth(t)) - 1), t);
    }
    return ir::MakeInt(0);
  }
  static Expr Combine(ir::ReduceOp op, Expr acc, Expr x) {
    switch (op) {
      case ir::ReduceOp::kSum: return Add(std::move(acc), std::move(x));
      case ir::ReduceOp::kAbsSum: return Add(std::move(acc), ir::MakeCall(ir::CallOp::kAbs, {std::move(x)}));
      case ir::ReduceOp::kMax: return ir::MakeCall(ir::CallOp::kMax, {std::move(acc), std::move(x)});
      case ir::ReduceOp::kMin: return ir::MakeCall(ir::CallOp::kMin, {std::move(acc), std::move(x)});
      case ir::ReduceOp::kAbsMax:
        return ir::MakeCall(ir::CallOp::kMax, {std::move(acc), ir::MakeCall(ir::CallOp::kAbs, {std::move(x)})});
    }
    return acc;
  }
  // How partials of `op` combine across lanes.
  static ir::ReduceOp LaneOp(ir::ReduceOp op) {
    if (op == ir::ReduceOp::kAbsSum) return ir::ReduceOp::kSum;
    if (op == ir::ReduceOp::kAbsMax) return ir::ReduceOp::kMax;
    return op;
  }

  Status LowerReduce(const ir::Stmt& st, const ir::Reduce& r) {
    const Buf& sb = bufs_[r.src.buffer];
    const Buf& db = bufs_[r.dst.buffer];
    const DType t = db.dtype;
    if (sb.where == Where::kRegisterFrag) {
      const FragmentLayout& L = *sb.layout;
      if (L.C != 1) return Err(st, "internal: reduction of " + L.ToString() + " (InferGpuLayouts keeps it in shared memory)");
      const std::string rs = Fresh("rs"), row = Fresh("row"), acc = Fresh("acc"), cs = Fresh("cs"), col = Fresh("col");
      SBlock per_row;
      per_row.push_back(Let(row, RowExpr(L, V(rs), TDiv(Tid(), L.g))));
      per_row.push_back(S(SVar{acc, t, Identity(r.op, t)}));
      SBlock per_col;
      Expr colx = Add(Add(Mul(TDiv(V(cs), L.v), I(L.v * L.g)), Mul(TMod(Tid(), L.g), I(L.v))), TMod(V(cs), L.v));
      per_col.push_back(Let(col, ir::FoldConstants(colx)));
      Expr slot = ir::FoldConstants(Add(Mul(V(rs), I(L.col_slots())), V(cs)));
      std::optional<Expr> guard;
      if (L.rows % (L.R * L.H) != 0) guard = Lt(V(row), I(L.rows));
      if (L.cols % (L.v * L.g) != 0) guard = AndOpt(guard, Lt(V(col), I(L.cols)));
      per_col.push_back(IfS(guard, {S(SAssign{acc, Combine(r.op, V(acc, t), CastTo(t, ir::MakeLoad(r.src.buffer, {slot}, sb.dtype)))})}));
      per_row.push_back(For(cs, 0, I(L.col_slots()), 1, true, std::move(per_col)));
      // Every thread reaches the shuffles and barriers below (no guards around them).
      const ir::ReduceOp lop = LaneOp(r.op);
      // Lanes of a group shuffle within a warp (wavefront on AMD: 32 or 64);
      // wider groups combine the warps' partials through shared memory.
      const int64_t W = out_->warp_size;
      if (L.g > 1) per_row.push_back(S(SLaneReduce{acc, lop, std::min<int64_t>(L.g, W), t}));
      if (L.g > W) {
        const std::string scratch = Fresh("red");
        AddShared(scratch, t, T() / W);
        per_row.push_back(IfS(Eq(TMod(Tid(), W), I(0)), {Store(scratch, TDiv(Tid(), W), V(acc, t))}));
        per_row.push_back(S(SBarrier{}));
        const std::string w = Fresh("w");
        per_row.push_back(S(SAssign{acc, Identity(lop, t)}));
        Expr at = Add(Mul(TDiv(Tid(), L.g), I(L.g / W)), V(w));
        per_row.push_back(For(w, 0, I(L.g / W), 1, true,
                              {S(SAssign{acc, Combine(lop, V(acc, t), ir::MakeLoad(scratch, {at}, t))})}));
        per_row.push_back(S(SBarrier{}));
      }
      if (db.where == Where::kRegisterFrag) {
        Expr v = r.clear ? V(acc, t) : Combine(lop, ir::MakeLoad(r.dst.buffer, {V(rs)}, t), V(acc, t));
        per_row.push_back(Store(r.dst.buffer, V(rs), v));
      } else {
        // Shared (demoted) destination: lane 0 of the group writes its rows.
        Expr addr = V(row);
        Expr v = r.clear ? V(acc, t) : Combine(lop, ir::MakeLoad(r.dst.buffer, {addr}, t), V(acc, t));
        std::optional<Expr> g = Eq(TMod(Tid(), L.g), I(0));
        if (L.rows % (L.R * L.H) != 0) g = AndOpt(g, Lt(V(row), I(L.rows)));
        per_row.push_back(IfS(g, {Store(r.dst.buffer, addr, v)}));
      }
      cur_->push_back(For(rs, 0, I(L.row_slots()), 1, true, std::move(per_row)));
      return Status::Ok();
    }
    // Serial fallback over lines: operands in shared or local memory.
    if (db.where == Where::kRegisterFrag) return Err(st, "reduce: registers destination with a memory source");
    StatusOr<Side> s = Resolve(r.src);
    if (!s.ok()) return s.status();
    const int64_t rank = static_cast<int64_t>(s->info.extents.size());
    const int64_t dim = *ir::NormalizeDim(r.dim, rank);
    return SerialLines(st, r.src, r.dst, dim, /*scan=*/false, r.op, r.clear, false);
  }

  // One thread per line along `dim` (shared) or every line per thread
  // (local): serial reduce or inclusive scan.
  Status SerialLines(const ir::Stmt& st, const ir::Region& src, const ir::Region& dst, int64_t dim, bool scan,
                     ir::ReduceOp op, bool clear, bool reverse) {
    StatusOr<Side> s = Resolve(src), d = Resolve(dst);
    if (!s.ok()) return s.status();
    if (!d.ok()) return d.status();
    const Buf& sb = bufs_[src.buffer];
    const Buf& db = bufs_[dst.buffer];
    if (sb.where == Where::kRegisterFrag || db.where == Where::kRegisterFrag || sb.where == Where::kGlobal ||
        db.where == Where::kGlobal) {
      return Err(st, "reduce/cumsum operands must be fragments, shared or local buffers");
    }
    const DType t = db.dtype;
    std::vector<int64_t> ext = s->info.extents;
    const int64_t n = ext[dim];
    std::vector<int64_t> others;
    for (size_t k = 0; k < ext.size(); ++k) {
      if (static_cast<int64_t>(k) != dim) others.push_back(ext[k]);
    }
    int64_t lines = 1;
    for (int64_t o : others) lines *= o;
    const std::string line = Fresh("line"), acc = Fresh("acc"), j = Fresh("j");
    // Full source index for (line, j).
    std::vector<Expr> oi(others.size());
    Expr rem = V(line);
    for (size_t k = others.size(); k-- > 0;) {
      oi[k] = k == 0 ? rem : TMod(rem, others[k]);
      if (k > 0) rem = TDiv(rem, others[k]);
    }
    auto src_idx = [&](Expr jj) {
      std::vector<Expr> idx;
      size_t o = 0;
      for (size_t k = 0; k < ext.size(); ++k) {
        Expr base = ToI32(s->info.starts[k]);
        idx.push_back(ir::FoldConstants(Add(base, static_cast<int64_t>(k) == dim ? jj : oi[o++])));
      }
      return idx;
    };
    SBlock body;
    body.push_back(S(SVar{acc, t, Identity(op, t)}));
    SBlock inner;
    Expr jj = reverse ? Add(I(n - 1), Mul(V(j), I(-1))) : V(j);
    std::vector<Expr> si = src_idx(jj);
    inner.push_back(S(SAssign{acc, Combine(op, V(acc, t), CastTo(t, ir::MakeLoad(src.buffer, {Addr(sb, si)}, sb.dtype)))}));
    if (scan) {
      // dst is shaped as src.
      std::vector<Expr> di;
      for (size_t k = 0; k < si.size(); ++k) {
        di.push_back(ir::FoldConstants(Add(ToI32(d->info.starts[k]), Add(si[k], Mul(ToI32(s->info.starts[k]), I(-1))))));
      }
      inner.push_back(Store(dst.buffer, Addr(db, di), V(acc, t)));
    }
    body.push_back(For(j, 0, I(n), 1, false, std::move(inner)));
    if (!scan) {
      // dst: the other dims (or with dim kept as extent 1); rank-1 source -> one element.
      std::vector<Expr> di;
      const size_t drank = d->info.starts.size();
      if (drank == others.size()) {
        for (size_t k = 0; k < drank; ++k) di.push_back(ir::FoldConstants(Add(ToI32(d->info.starts[k]), oi[k])));
      } else if (drank == ext.size()) {
        size_t o = 0;
        for (size_t k = 0; k < drank; ++k) {
          di.push_back(ir::FoldConstants(Add(ToI32(d->info.starts[k]), static_cast<int64_t>(k) == dim ? I(0) : oi[o++])));
        }
      } else {
        di.push_back(ToI32(d->info.starts[0]));
      }
      Expr addr = Addr(db, di);
      Expr v = clear ? V(acc, t) : Combine(LaneOp(op), ir::MakeLoad(dst.buffer, {addr}, t), V(acc, t));
      body.push_back(Store(dst.buffer, addr, v));
    }
    if (db.where == Where::kShared) {
      cur_->push_back(S(SFor{line, Tid(), I(lines), I(T()), false, std::move(body)}));
    } else {
      cur_->push_back(For(line, 0, I(lines), 1, false, std::move(body)));
    }
    return Status::Ok();
  }

  Status LowerParallel(const ir::Stmt& st, const ir::Parallel& p) {
    (void)st;
    const FragmentLayout L = LoopLayout(p, syms_, plan_);
    Status err = Status::Ok();
    SBlock code = LayoutLoop(L, [&](const std::vector<Expr>& idx, Expr slot, Expr row_slot) -> StatusOr<SBlock> {
      SBlock b;
      for (size_t k = 0; k < p.vars.size(); ++k) b.push_back(S(SLet{p.vars[k], DType::kI32, idx[k]}));
      const FragmentLayout* saved = loop_;
      std::vector<std::string> saved_vars = loop_vars_;
      loop_ = &L;
      loop_vars_ = p.vars;
      slot_full_ = slot;
      slot_row_ = row_slot;
      replicated_once_ = L.replicated && L.g > 1 ? std::optional<Expr>(Eq(TMod(Tid(), L.g), I(0))) : std::nullopt;
      SBlock* saved_cur = cur_;
      cur_ = &b;
      Status s = Status::Ok();
      for (const ir::Stmt& c : p.body) {
        s = LowerStmt(c);
        if (!s.ok()) break;
      }
      cur_ = saved_cur;
      loop_ = saved;
      loop_vars_ = saved_vars;
      replicated_once_.reset();
      if (!s.ok()) return s;
      return b;
    }, &err);
    if (!err.ok()) return err;
    for (SStmt& s : code) cur_->push_back(std::move(s));
    return Status::Ok();
  }

  Status LowerBlock(const ir::Block& in, SBlock* out) {
    SBlock* saved = cur_;
    cur_ = out;
    for (const ir::Stmt& s : in) {
      Status st = LowerStmt(s);
      if (!st.ok()) {
        cur_ = saved;
        return st;
      }
    }
    cur_ = saved;
    return Status::Ok();
  }

  Status LowerStmt(const ir::Stmt& s) {
    if (const auto* a = ir::As<ir::Alloc>(s)) {
      std::vector<int64_t> shape;
      int64_t n = 1;
      for (const Expr& d : a->shape) n *= ir::FoldInt(d).value_or(1);
      Buf b{Where::kLocal, a->dtype, a->shape, nullptr};
      if (a->scope == ir::MemScope::kShared || plan_.demoted.count(a->name)) {
        b.where = Where::kShared;
        // Tensor-core operands: rows padded so that a row is an odd number
        // of 16-byte chunks (the 8 rows an ldmatrix reads hit distinct banks).
        const int64_t bytes = std::max(1, ir::BitWidth(a->dtype) / 8);
        if (plan_.mma_operands.count(a->name) && !plan_.swizzle.count(a->name) && a->shape.size() >= 2 && bytes == 2) {
          const int64_t last = ir::FoldInt(a->shape.back()).value_or(0);
          if (last > 0 && (last * bytes) % 16 == 0 && ((last * bytes) / 16) % 2 == 0) {
            b.shape.back() = I(last + 16 / bytes);
            n = n / last * (last + 16 / bytes);
            padded_.insert(a->name);
          }
        }
        std::vector<int64_t> dims;  // padded rows included
        for (const Expr& d : b.shape) dims.push_back(ir::FoldInt(d).value_or(1));
        if (auto sw = plan_.swizzle.find(a->name); sw != plan_.swizzle.end()) {
          // A wgmma operand (or a TMA-store epilogue tile, which may take a dead stage's memory):
          // panels of the swizzle's row bytes (swizzle.h), no padding.
          b.swizzle = sw->second;
          if (!AliasShared(a->name, a->dtype, n, dims, sw->second)) AddShared(a->name, a->dtype, n, dims, sw->second);
        } else if (!AliasShared(a->name, a->dtype, n, dims)) {
          AddShared(a->name, a->dtype, n, dims);
        }
      } else if (a->scope == ir::MemScope::kFragment) {
        b.where = Where::kRegisterFrag;
        b.layout = &plan_.layouts.at(a->name);
        AddRegs(a->name, a->dtype, b.layout->slots());
      } else {
        AddRegs(a->name, a->dtype, n);
      }
      bufs_[a->name] = b;
      return Status::Ok();
    }
    if (const auto* v = ir::As<ir::VarDecl>(s)) {
      std::optional<Expr> init;
      if (v->init) {
        StatusOr<Expr> e = Lower(*v->init);
        if (!e.ok()) return e.status();
        init = CastTo(v->dtype, *e);
      }
      cur_->push_back(S(SVar{v->name, v->dtype, std::move(init)}));
      return Status::Ok();
    }
    if (const auto* l = ir::As<ir::Let>(s)) {
      StatusOr<Expr> e = Lower(l->value);
      if (!e.ok()) return e.status();
      cur_->push_back(S(SLet{l->name, ir::ExprDType(l->value), *e}));
      return Status::Ok();
    }
    if (const auto* as = ir::As<ir::Assign>(s)) {
      StatusOr<Expr> e = Lower(as->value);
      if (!e.ok()) return e.status();
      cur_->push_back(S(SAssign{as->name, *e}));
      return Status::Ok();
    }
    if (const auto* st = ir::As<ir::Store>(s)) {
      StatusOr<Expr> e = Lower(st->value);
      if (!e.ok()) return e.status();
      const Buf& b = bufs_[st->buffer];
      Expr addr;
      if (b.where == Where::kRegisterFrag) {
        std::optional<Expr> slot = FragSlot(st->buffer, st->indices);
        if (!slot) return Err(s, "fragment " + st->buffer + " written with indices its layout does not map");
        addr = *slot;
      } else {
        std::vector<Expr> idx;
        for (const Expr& i : st->indices) {
          StatusOr<Expr> li = Lower(i);
          if (!li.ok()) return li.status();
          idx.push_back(*li);
        }
        addr = Addr(b, idx);
      }
      if (!loop_ && (b.where == Where::kShared || b.where == Where::kGlobal)) {
        // A scalar statement outside T.Parallel runs in every thread. A
        // read-modify-write of shared or global memory (`s[0] = s[0] + x`)
        // would race: a fast warp's store is read again by a slow one and
        // applied twice. So every thread computes the value, all wait until
        // the old value is read everywhere, thread 0 stores, all wait again.
        // (Control flow outside T.Parallel is block-uniform: the barriers
        // cannot diverge.)
        const std::string v = Fresh("uv");
        const DType vt = ir::ExprDType(*e);
        cur_->push_back(Let(v, *e));
        cur_->push_back(S(SBarrier{}));
        cur_->push_back(IfS(Eq(Tid(), I(0)), {Store(st->buffer, addr, CastTo(b.dtype, ir::MakeVar(v, vt)))}));
        cur_->push_back(S(SBarrier{}));
        return Status::Ok();
      }
      // Under a replicated loop layout every lane of a group computes the
      // same element: one of them stores it to memory others can see.
      SStmt w = Store(st->buffer, addr, CastTo(b.dtype, *e));
      const bool visible = b.where == Where::kShared || b.where == Where::kGlobal;
      cur_->push_back(visible && replicated_once_ ? IfS(replicated_once_, {std::move(w)}) : std::move(w));
      return Status::Ok();
    }
    if (const auto* fo = ir::As<ir::For>(s)) {
      StatusOr<Expr> a = Lower(fo->start), b = Lower(fo->stop);
      if (!a.ok()) return a.status();
      if (!b.ok()) return b.status();
      Expr step = fo->step ? *fo->step : CastTo(ir::ExprDType(fo->start), I(1));
      StatusOr<Expr> c = Lower(step);
      if (!c.ok()) return c.status();
      SFor out{fo->var, *a, *b, *c, false, {}};
      out.unroll = fo->kind == ir::LoopKind::kUnroll && ir::FoldInt(*a) && ir::FoldInt(*b) && ir::FoldInt(*c);
      Status st = LowerBlock(fo->body, &out.body);
      if (!st.ok()) return st;
      cur_->push_back(S(std::move(out)));
      return Status::Ok();
    }
    if (const auto* i = ir::As<ir::If>(s)) {
      StatusOr<Expr> c = Lower(i->cond);
      if (!c.ok()) return c.status();
      SIf out{*c, {}, {}};
      Status st = LowerBlock(i->then_body, &out.then_body);
      if (st.ok()) st = LowerBlock(i->else_body, &out.else_body);
      if (!st.ok()) return st;
      cur_->push_back(S(std::move(out)));
      return Status::Ok();
    }
    if (const auto* p = ir::As<ir::Parallel>(s)) return LowerParallel(s, *p);
    if (const auto* c = ir::As<ir::Copy>(s)) return ElementwiseTile(s, c->src, c->dst, false);
    if (const auto* t = ir::As<ir::AtomicAddTile>(s)) return ElementwiseTile(s, t->src, t->dst, true);
    if (const auto* fl = ir::As<ir::Fill>(s)) return LowerFill(*fl);
    if (const auto* g = ir::As<ir::Gemm>(s)) return LowerGemm(s, *g);
    if (const auto* r = ir::As<ir::Reduce>(s)) return LowerReduce(s, *r);
    if (const auto* c = ir::As<ir::Cumsum>(s)) {
      StatusOr<Side> src = Resolve(c->src);
      if (!src.ok()) return src.status();
      const int64_t dim = *ir::NormalizeDim(c->dim, static_cast<int64_t>(src->info.extents.size()));
      return SerialLines(s, c->src, c->dst, dim, true, ir::ReduceOp::kSum, true, c->reverse);
    }
    if (const auto* at = ir::As<ir::AtomicAdd>(s)) {
      StatusOr<Expr> v = Lower(at->value);
      if (!v.ok()) return v.status();
      std::vector<Expr> idx;
      for (const ir::RegionDim& d : at->dst.dims) {
        StatusOr<Expr> li = Lower(d.start);
        if (!li.ok()) return li.status();
        idx.push_back(*li);
      }
      const Buf& b = bufs_[at->dst.buffer];
      // Once per block outside T.Parallel; once per element under replication.
      std::optional<Expr> once = loop_ ? replicated_once_ : std::optional<Expr>(Eq(Tid(), I(0)));
      cur_->push_back(IfS(once, {S(SAtomicAdd{at->dst.buffer, Addr(b, idx), CastTo(b.dtype, *v)})}));
      return Status::Ok();
    }
    if (ir::As<ir::Sync>(s)) {
      cur_->push_back(S(SBarrier{}));
      return Status::Ok();
    }
    if (const auto* h = ir::As<ir::Hint>(s)) {
      if (options_.async_copies && h->name == kAsyncCopyHint) {
        async_next_ = true;
        tma_pipe_ = h->args.size() >= 2 ? h->args[0].int_value : -1;
        tma_stages_ = h->args.size() >= 2 ? h->args[1].int_value : 0;
      }
      if (options_.tma_copies && (h->name == kTmaArriveHint || h->name == kTmaWaitHint) && !h->args.empty()) {
        auto it = tma_pipes_.find(h->args[0].int_value);
        if (it != tma_pipes_.end() && it->second.used) {
          const TmaPipe& p = it->second;
          if (h->name == kTmaArriveHint && p.stage) {
            cur_->push_back(IfS(Eq(Tid(), I(0)), {S(SMbarArrive{p.bar, *p.stage})}));
          } else if (h->name == kTmaWaitHint && h->args.size() >= 2) {
            // Wait for this stage's phase, then expect the next one.
            const Expr stage = V(h->args[1].text), phase = V(p.phase);
            const Expr parity = ir::MakeBinary(ir::BinaryOp::kBitAnd, ir::MakeBinary(ir::BinaryOp::kShr, phase, stage), I(1));
            cur_->push_back(S(SMbarWait{p.bar, stage, parity}));
            cur_->push_back(S(SAssign{p.phase, ir::MakeBinary(ir::BinaryOp::kBitXor, phase,
                                                              ir::MakeBinary(ir::BinaryOp::kShl, I(1), stage))}));
          }
        }
      }
      if (h->name == kTmaSyncHint && !h->args.empty()) {
        // A barrier unless every hoisted copy of the pipeline is TMA (PipelineAsyncCopies).
        auto it = tma_pipes_.find(h->args[0].int_value);
        if (!options_.tma_copies || it == tma_pipes_.end() || !it->second.used || it->second.not_all_tma) {
          cur_->push_back(S(SBarrier{}));
        }
      }
      // T.wait_wgmma(N): wgmma.wait_group N where gemms may be in flight (a no-op elsewhere:
      // every other lowering's gemms are synchronous).
      if (h->name == "wait_wgmma" && options_.gemm == GemmStrategy::kWgmma && !wgmma_async_.empty() && h->args.size() == 1) {
        cur_->push_back(S(SWgmmaWait{h->args[0].int_value, std::vector<std::string>(wgmma_async_.begin(), wgmma_async_.end())}));
      }
      // T.warpgroup_pingpong(): WarpgroupPingpong runs after warp specialization (sm_90a wgmma only).
      if (h->name == "warpgroup_pingpong") out_->pingpong_requested = true;
      if (h->name == kWgmmaDeferHint) wgmma_defer_next_ = options_.gemm == GemmStrategy::kWgmma;
      if (h->name == kWgmmaDrainHint && !wgmma_deferred_.empty()) {
        for (const std::string& c : wgmma_deferred_) {
          out_->notes.push_back("wgmma: one group of " + c + " kept in flight across the pipeline's k-steps (wait_group 1)");
        }
        cur_->push_back(S(SWgmmaWait{0, std::vector<std::string>(wgmma_deferred_.begin(), wgmma_deferred_.end())}));
        wgmma_deferred_.clear();
      }
      if (options_.async_copies && h->name == kAsyncCommitHint) cur_->push_back(S(SAsyncCommit{}));
      if (options_.async_copies && h->name == kAsyncWaitHint) {
        cur_->push_back(S(SAsyncWait{h->args.empty() ? 0 : h->args[0].int_value}));
      }
      return Status::Ok();
    }
    if (const auto* c = ir::As<ir::CallExtern>(s)) return LowerCallExtern(s, *c);
    return Err(s, std::string("statement not supported by the GPU lowering: ") + ir::StmtKindName(ir::Kind(s)));
  }

  // T.call_extern: this thread calls the function (outside T.Parallel every
  // thread does, as upstream's per-thread code). An address argument points
  // at the element in memory order: shared (fragments whose address is taken
  // are demoted there by InferGpuLayouts), or a local register array kept in
  // its storage type (SimtKernel::addressed). Under a replicated loop layout
  // several lanes run one iteration: a call that may write shared memory is
  // made by one of them.
  Status LowerCallExtern(const ir::Stmt& s, const ir::CallExtern& c) {
    SCallExtern out{c.name, {}};
    bool shared_pointer = false;
    for (size_t i = 0; i < c.args.size(); ++i) {
      const ir::ExternArg& a = c.args[i];
      if (!a.address) {
        StatusOr<Expr> v = Lower(a.value);
        if (!v.ok()) return v.status();
        out.args.push_back({false, "", *v});
        continue;
      }
      const auto* l = ir::As<ir::Load>(a.value);
      auto it = l ? bufs_.find(l->buffer) : bufs_.end();
      if (it == bufs_.end()) return Err(s, "call_extern " + c.name + " argument " + std::to_string(i) + ": not a buffer element");
      const Buf& b = it->second;
      if (b.where == Where::kRegisterFrag) {
        return Err(s, "call_extern " + c.name + " argument " + std::to_string(i) + ": the address of fragment " + l->buffer +
                          ", which is spread over the threads' registers (pass a T.alloc_local or shared buffer)");
      }
      if (b.swizzle != SmemSwizzle::kNone) {
        return Err(s, "call_extern " + c.name + " argument " + std::to_string(i) + ": the address of " + l->buffer +
                          ", a swizzled wgmma operand (its elements are not in row-major order)");
      }
      std::vector<Expr> idx;
      for (const Expr& x : l->indices) {
        StatusOr<Expr> li = Lower(x);
        if (!li.ok()) return li.status();
        idx.push_back(*li);
      }
      if (b.where == Where::kLocal) out_->addressed.insert(l->buffer);
      if (b.where == Where::kShared || b.where == Where::kGlobal) shared_pointer = true;
      out.args.push_back({true, l->buffer, Addr(b, idx)});
    }
    SStmt call = S(std::move(out));
    cur_->push_back(shared_pointer && loop_ && replicated_once_ ? IfS(replicated_once_, {std::move(call)}) : std::move(call));
    return Status::Ok();
  }

  const ir::Function& f_;
  const GpuLayoutPlan& plan_;
  SimtKernel* out_;
  const GpuLowerOptions& options_;
  ir::SymbolTable syms_;
  std::map<std::string, Buf> bufs_;
  std::set<std::string> padded_;  // shared buffers with padded rows (mma operands)
  SBlock* cur_ = nullptr;
  int counter_ = 0;
  const FragmentLayout* loop_ = nullptr;
  std::vector<std::string> loop_vars_;
  Expr slot_full_, slot_row_;
  std::optional<Expr> replicated_once_;
  bool async_next_ = false;  // the next copy follows kAsyncCopyHint
  // GpuLowerOptions::tma_pre_copies: the kernel's top-level copies before its first pipeline (Run).
  std::set<const ir::Copy*> pre_copies_;
  size_t pre_copies_done_ = 0;
  bool wgmma_defer_next_ = false;  // the next gemm follows kWgmmaDeferHint
  std::set<std::string> wgmma_deferred_;  // accumulators of deferred SWgmma not drained yet
  std::set<std::string> wgmma_async_;     // accumulators of wgmma gemms with wg_wait != 0 (T.wait_wgmma fences them)
  int64_t tma_pipe_ = -1, tma_stages_ = 0;  // that hint's pipeline and stages (tma_copies)
  std::map<int64_t, TmaPipe> tma_pipes_;
  std::set<std::string> tma_notes_;
  std::set<std::string> stmatrix_notes_;
};

// Every buffer name the statements of `b` (nested ones included) use.
std::set<std::string> BuffersNamed(const ir::Block& b) {
  std::set<std::string> used;
  auto region = [&](const ir::Region& r) { used.insert(r.buffer); };
  ir::ForEachStmt(b, [&](const ir::Stmt& s) {
    ir::ForEachExprOf(s, [&](const Expr& e) {
      ir::WalkExpr(e, [&](const Expr& x) {
        if (const auto* l = ir::As<ir::Load>(x)) used.insert(l->buffer);
      });
    });
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, ir::Store>) used.insert(n.buffer);
          if constexpr (std::is_same_v<T, ir::Copy> || std::is_same_v<T, ir::AtomicAddTile> ||
                        std::is_same_v<T, ir::Reduce> || std::is_same_v<T, ir::Cumsum>) {
            region(n.src), region(n.dst);
          }
          if constexpr (std::is_same_v<T, ir::Fill> || std::is_same_v<T, ir::AtomicAdd>) region(n.dst);
          if constexpr (std::is_same_v<T, ir::Gemm>) region(n.a), region(n.b), region(n.c);
          if constexpr (std::is_same_v<T, ir::Hint>) {
            for (const ir::HintArg& a : n.args) used.insert(a.text);
          }
        },
        s.node);
  });
  return used;
}

std::vector<std::string> DropUnusedAllocs(ir::Function& f) {
  const std::set<std::string> used = BuffersNamed(f.body);
  std::vector<std::string> dropped;
  std::function<void(ir::Block&)> prune = [&](ir::Block& b) {
    for (auto it = b.begin(); it != b.end();) {
      const auto* a = ir::As<ir::Alloc>(*it);
      if (a && a->scope != ir::MemScope::kLocal && !used.count(a->name)) {
        dropped.push_back(a->name);
        it = b.erase(it);
        continue;
      }
      std::visit(
          [&](auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, ir::Kernel> || std::is_same_v<T, ir::For> || std::is_same_v<T, ir::Parallel>) {
              prune(n.body);
            } else if constexpr (std::is_same_v<T, ir::If>) {
              prune(n.then_body);
              prune(n.else_body);
            }
          },
          it->node);
      ++it;
    }
  };
  prune(f.body);
  return dropped;
}

// GpuLowerOptions::stage_wgmma_epilogue: each top-level `copy C -> T[...]`
// of a whole wgmma accumulator C (register fragment [m, n]) into a global
// tensor T whose rows are a multiple of 16 bytes becomes `copy C ->
// tl_epi_C[0:m, 0:n]; copy tl_epi_C[0:m, 0:n] -> T[...]` through a new shared
// tile [m, n + 16 bytes] of T's dtype (the padding shifts each row by 4
// banks: the accumulator layout's 8 rows x 4 lanes per store hit 32 banks).
// The values are T's either way (one rounding, at the first copy);
// InsertBarriers orders the two copies. The tile takes the memory of a
// pipeline's stage buffer (`into`: those no later top-level statement names
// and at least as large; the pipeline ends with wait 0, the wgmma drain and a
// barrier, so they are dead): it costs no shared memory, so never occupancy.
// Where no such buffer exists the copy stays direct, with a note.
// With `tma_store` (GpuLowerOptions::tma_store) a tile of 16-bit elements
// whose rows are whole 128-byte panels (n a multiple of 64), m a multiple of 8
// and at most 256 (a TMA box dim), into a rank-2 tensor, is [m, n] unpadded
// and `swizzle` k128B (the TMA store's box layout; stmatrix stays
// conflict-free: a matrix's 8 rows sit in 8 distinct 16-byte chunks of their
// 128-byte rows).
struct StagedEpilogue {
  std::string acc, tile;
  std::vector<std::string> into;
  SmemSwizzle swizzle = SmemSwizzle::kNone;
};
std::vector<StagedEpilogue> StageWgmmaEpilogues(ir::Function& f, const GpuLayoutPlan& plan,
                                                const std::set<std::string>& pipeline_buffers, bool tma_store,
                                                std::vector<std::string>* notes) {
  std::vector<StagedEpilogue> out;
  const ir::SymbolTable syms = ir::CollectSymbols(f);
  for (ir::Stmt& ks : f.body) {
    auto* k = ir::As<ir::Kernel>(ks);
    if (!k) continue;
    for (size_t i = 0; i < k->body.size(); ++i) {
      const auto* c = ir::As<ir::Copy>(k->body[i]);
      if (!c || !plan.wgmma.count(c->src.buffer) || plan.demoted.count(c->src.buffer) || !plan.layouts.count(c->src.buffer)) {
        continue;
      }
      auto cs = syms.find(c->src.buffer), ts = syms.find(c->dst.buffer);
      if (cs == syms.end() || ts == syms.end() || ts->second.kind != ir::SymbolInfo::Kind::kTensorParam ||
          cs->second.shape.size() != 2 || ts->second.shape.size() < 2) {
        continue;
      }
      const std::optional<int64_t> m = ir::FoldInt(cs->second.shape[0]), n = ir::FoldInt(cs->second.shape[1]);
      const std::optional<int64_t> row = ir::FoldInt(ts->second.shape.back());
      const int64_t e = ir::BitWidth(ts->second.dtype) / 8;
      if (!m || !n || !row || (e != 2 && e != 4) || (*row * e) % 16 != 0 || (*n * e) % 16 != 0) continue;
      // The whole accumulator, into a tile of T whose last two extents are [m, n].
      bool whole = c->src.dims.empty() || c->src.dims.size() == 2;
      for (size_t d = 0; whole && d < c->src.dims.size(); ++d) {
        whole = ir::FoldInt(c->src.dims[d].start) == 0 && c->src.dims[d].extent &&
                ir::FoldInt(*c->src.dims[d].extent) == ir::FoldInt(cs->second.shape[d]);
      }
      const size_t r = c->dst.dims.size();
      whole = whole && r == ts->second.shape.size();
      for (size_t d = 0; whole && d < r; ++d) {
        const std::optional<int64_t> x = c->dst.dims[d].extent ? ir::FoldInt(*c->dst.dims[d].extent) : std::optional<int64_t>(1);
        whole = x == (d + 2 == r ? *m : d + 1 == r ? *n : 1);
      }
      if (!whole) continue;
      const std::string acc = c->src.buffer, tile = "tl_epi_" + acc;
      if (syms.count(tile)) continue;
      StagedEpilogue st{acc, tile, {}};
      if (tma_store && e == 2 && *m % 8 == 0 && *m <= 256 && (*n * e) % 128 == 0 && r == 2) {
        st.swizzle = SmemSwizzle::k128B;
      }
      const int64_t pad = st.swizzle == SmemSwizzle::kNone ? 16 / e : 0;
      const std::set<std::string> later = BuffersNamed(ir::Block(k->body.begin() + static_cast<std::ptrdiff_t>(i), k->body.end()));
      const int64_t need = *m * (*n + pad) * e;
      for (const std::string& b : pipeline_buffers) {
        auto bs = syms.find(b);
        if (later.count(b) || bs == syms.end()) continue;
        int64_t bytes = ir::BitWidth(bs->second.dtype) / 8;  // logical size (the storage may be padded: larger)
        for (const Expr& d : bs->second.shape) bytes *= ir::FoldInt(d).value_or(0);
        if (bytes >= need) st.into.push_back(b);
      }
      if (st.into.empty()) {
        notes->push_back("epilogue: " + acc + " stored from registers: no pipeline buffer dead by then holds its " +
                         std::to_string(need) + "-byte shared tile");
        continue;
      }
      ir::Stmt a;
      a.node = ir::Alloc{tile, ir::MemScope::kShared, {ir::MakeInt(*m), ir::MakeInt(*n + pad)}, ts->second.dtype};
      a.loc = k->body[i].loc;
      const ir::Region staged{tile, {{ir::MakeInt(0), ir::MakeInt(*m)}, {ir::MakeInt(0), ir::MakeInt(*n)}}};
      ir::Stmt to_shared = k->body[i], to_global = k->body[i];
      std::get<ir::Copy>(to_shared.node).dst = staged;
      std::get<ir::Copy>(to_global.node).src = staged;
      k->body[i] = std::move(to_global);
      k->body.insert(k->body.begin() + static_cast<std::ptrdiff_t>(i), std::move(to_shared));
      k->body.insert(k->body.begin() + static_cast<std::ptrdiff_t>(i), std::move(a));
      i += 2;
      out.push_back(std::move(st));
    }
  }
  return out;
}

// Removes shared and fragment allocations no statement names (upstream's
// kernels allocate tiles only some configurations use, e.g. a bias tile
// without a bias: memory the budget would otherwise count). Returns their names.

}  // namespace

// Removes the tensor maps of tensors no STmaLoad / STmaStore uses through any
// map, and renumbers the rest. Why: TmaStoreEpilogue builds its map of C with
// the bulk form, which only the warp-specialized GEMM swaps in; elsewhere the
// map would be an unused kernel parameter that the runtime still encodes at
// every launch (and whose encoding could fail for a C the kernel never stores
// by TMA). A tensor with a used map keeps all of its maps (ClusterMulticast
// leaves the whole-box map beside its half boxes), so no other kernel changes.
static void DropUnusedTensorMaps(SimtKernel* k) {
  std::vector<bool> used(k->tensor_maps.size(), false);
  std::function<void(SBlock&, const std::function<void(int&)>&)> maps = [&](SBlock& b, const std::function<void(int&)>& fn) {
    for (SStmt& st : b) {
      if (auto* l = std::get_if<STmaLoad>(&st.node)) fn(l->map);
      if (auto* t = std::get_if<STmaStore>(&st.node)) fn(t->map);
      if (auto* f = std::get_if<SFor>(&st.node)) maps(f->body, fn);
      if (auto* i = std::get_if<SIf>(&st.node)) maps(i->then_body, fn), maps(i->else_body, fn);
      if (auto* r = std::get_if<SWarpRoles>(&st.node)) maps(r->producer, fn), maps(r->consumer, fn);
    }
  };
  maps(k->body, [&](int& m) {
    if (m >= 0 && static_cast<size_t>(m) < used.size()) used[static_cast<size_t>(m)] = true;
  });
  std::set<int> used_params;
  for (size_t i = 0; i < used.size(); ++i) {
    if (used[i]) used_params.insert(k->tensor_maps[i].param);
  }
  std::vector<int> to(used.size(), -1);
  std::vector<TensorMapDesc> kept;
  for (size_t i = 0; i < used.size(); ++i) {
    if (!used_params.count(k->tensor_maps[i].param)) continue;
    to[i] = static_cast<int>(kept.size());
    kept.push_back(k->tensor_maps[i]);
  }
  if (kept.size() == k->tensor_maps.size()) return;
  maps(k->body, [&](int& m) { m = to[static_cast<size_t>(m)]; });
  k->tensor_maps = std::move(kept);
}

StatusOr<SimtKernel> LowerToSimt(const ir::Function& input, const GpuLowerOptions& options) {
  Status s = ir::Verify(input);
  if (!s.ok()) return s;
  // A persistent warp-specialized kernel loads the tiles copied before its pipeline (FlashAttention's Q)
  // in the producer where it can (GpuLowerOptions::tma_pre_copies): lowered that way first, kept where
  // the warp specialization took the copies or there were none (the same kernel then); else as always.
  std::string pre_note;
  // (Not with a cluster hint: ClusterMulticast knows only the pipeline's barriers.)
  bool cluster_hint = false;
  if (options.clusters && !input.body.empty()) {
    if (const auto* kern = ir::As<ir::Kernel>(input.body.front())) {
      for (const ir::Stmt& st : kern->body) {
        const auto* h = ir::As<ir::Hint>(st);
        cluster_hint = cluster_hint || (h && h->name == "cluster");
      }
    }
  }
  if (options.persistent_sms > 0 && options.warp_specialize && options.tma_copies && options.wgmma_overlap &&
      options.gemm == GemmStrategy::kWgmma && !options.tma_pre_copies && !cluster_hint) {
    GpuLowerOptions pre = options;
    pre.tma_pre_copies = true;
    StatusOr<SimtKernel> r = LowerToSimt(input, pre);
    if (!r.ok()) {
      // The attempt's own failure (e.g. no shared memory left for Q's barrier in a tile sized to the
      // budget) is not the program's: the kernel is lowered as without it, the reason in the note.
      pre_note = "tile copies before the pipeline stay with the consumers (the producer-loaded form failed: " +
                 r.status().message() + ")";
    } else {
      bool made = false, taken = false;
      std::string ws;
      for (const std::string& n : r->notes) {
        made = made || n.rfind(kPreTmaNote, 0) == 0;
        taken = taken || n.find(kProducerLoadsNote) != std::string::npos;
        if (n.rfind("warp-specialized: ", 0) == 0 || n.rfind("not warp-specialized: ", 0) == 0) ws = n;
      }
      if (!made || taken) return r;
      pre_note = "tile copies before the pipeline stay with the consumers (as TMA: " + ws + ")";
    }
  }
  ir::Function f = input;
  s = passes::CheckSingleKernel(f);
  if (!s.ok()) return s;
  if (!f.symbols.empty() && !options.symbol_params) {
    return Status(StatusCode::kUnimplemented,
                  passes::Where(f, f.loc,
                                "dynamic shape symbols are not supported for this GPU target (its runtime passes no "
                                "symbol values to kernels; give static shapes)"));
  }
  s = passes::MakeRegionsExplicit(f);
  if (!s.ok()) return s;
  const std::vector<std::string> unused = DropUnusedAllocs(f);
  passes::GuardTensorAccesses(f);  // element accesses past a tensor: dropped / read 0
  // cp.async pipelines first; pipelined loops they do not take run serially.
  std::vector<AsyncPipeline> async;
  if (options.async_copies && options.vector_copies) {
    async = PipelineAsyncCopies(f, options.max_async_stages, options.tma_copies,
                                options.gemm == GemmStrategy::kWgmma && options.wgmma_overlap);
  }
  std::vector<passes::PipelineDecision> pipes = passes::LowerPipelinesSerial(f);
  std::vector<std::string> reuse_notes;
  if (options.reuse_dead_shared) {
    std::set<std::string> staged;
    for (const AsyncPipeline& p : async) staged.insert(p.buffers.begin(), p.buffers.end());
    reuse_notes = ReuseDeadSharedBuffers(f, staged);
  }

  if (options.warp_size != 32 && options.warp_size != 64) {
    return Status(StatusCode::kInvalidArgument,
                  "GPU lowering: warp size " + std::to_string(options.warp_size) + " (32 or 64)");
  }
  if ((options.gemm == GemmStrategy::kMmaSync || options.gemm == GemmStrategy::kWgmma) && options.warp_size != 32) {
    return Status(StatusCode::kInvalidArgument, "GPU lowering: mma.sync GEMMs need 32-lane warps, not " +
                                                    std::to_string(options.warp_size));
  }
  if ((options.gemm == GemmStrategy::kMfma && options.warp_size != 64) ||
      (options.gemm == GemmStrategy::kWmma && options.warp_size != 32)) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("GPU lowering: ") + (options.gemm == GemmStrategy::kMfma ? "MFMA GEMMs need 64" : "WMMA GEMMs need 32") +
                      "-lane wavefronts, not " + std::to_string(options.warp_size));
  }
  if (!options.extern_calls) {
    s = passes::RejectExternCalls(f, options.target);
    if (!s.ok()) return s;
  }
  SimtKernel out;
  out.name = f.name;
  out.warp_size = options.warp_size;
  out.sources = f.sources;
  const ir::Kernel& k0 = passes::TheKernel(f);
  out.threads = 1;
  for (size_t i = 0; i < k0.threads.size() && i < 3; ++i) {
    out.block[i] = ir::FoldInt(k0.threads[i]).value_or(1);
    out.threads *= out.block[i];
  }
  if (k0.threads.empty()) {
    out.block[0] = 128;
    out.threads = 128;
  }
  out.block_vars = k0.block_vars;
  for (const Expr& g : k0.grid) out.grid.push_back(ir::FoldConstants(g));

  StatusOr<GpuLayoutPlan> plan = InferGpuLayouts(f, out.threads, options.gemm, options.tf32, options.mma_sm75);
  if (!plan.ok()) return plan.status();
  std::vector<StagedEpilogue> staged_epilogues;
  std::vector<std::string> epilogue_notes;
  if (options.stage_wgmma_epilogue && options.gemm == GemmStrategy::kWgmma && options.vector_copies) {
    std::set<std::string> pipeline_buffers;
    for (const AsyncPipeline& p : async) pipeline_buffers.insert(p.buffers.begin(), p.buffers.end());
    staged_epilogues = StageWgmmaEpilogues(f, *plan, pipeline_buffers, options.tma_store && options.tma_copies,
                                           &epilogue_notes);
    if (!staged_epilogues.empty()) {
      plan = InferGpuLayouts(f, out.threads, options.gemm, options.tf32, options.mma_sm75);
      if (!plan.ok()) return plan.status();
      for (const StagedEpilogue& e : staged_epilogues) {
        if (e.swizzle != SmemSwizzle::kNone) plan->swizzle[e.tile] = e.swizzle;
      }
    }
  }
  std::set<std::string> shared = plan->demoted;
  for (const auto& [name, info] : ir::CollectSymbols(f)) {
    if (info.kind == ir::SymbolInfo::Kind::kAlloc && info.scope == ir::MemScope::kShared) shared.insert(name);
  }
  for (const AsyncPipeline& p : async) {
    for (const std::string& b : p.buffers) shared.erase(b);  // ordered by the pipeline's own waits and barriers
  }
  const int barriers = InsertBarriers(f, shared);
  out.notes = plan->notes;
  out.notes.insert(out.notes.end(), reuse_notes.begin(), reuse_notes.end());
  out.notes.push_back("barriers inserted: " + std::to_string(barriers));
  for (const std::string& u : unused) out.notes.push_back("allocation " + u + " is never used: no memory");
  for (const passes::PipelineDecision& d : pipes) {
    out.notes.push_back("pipeline " + d.loop_var + ": stages requested " + std::to_string(d.requested_stages) +
                        ", applied 1 (no global -> shared copy it can run ahead)");
  }
  for (const AsyncPipeline& p : async) {
    std::string bufs;
    for (const std::string& b : p.buffers) bufs += " " + b;
    out.notes.push_back("pipeline " + p.loop_var + ": stages requested " + std::to_string(p.requested_stages) +
                        ", applied " + std::to_string(p.stages) + " (cp.async into" + bufs + ")");
  }
  Lowerer low(f, *plan, &out, options);
  for (const StagedEpilogue& e : staged_epilogues) low.alias_[e.tile] = e.into;
  s = low.Run(passes::TheKernel(f));
  if (!s.ok()) return s;
  out.notes.insert(out.notes.end(), epilogue_notes.begin(), epilogue_notes.end());
  for (const StagedEpilogue& e : staged_epilogues) {
    const std::string where = low.aliased_.count(e.tile) ? "in " + low.aliased_[e.tile] + "'s memory" : "its own memory";
    out.notes.push_back("epilogue: " + e.acc + " stored through a shared tile (" + where + (e.swizzle != SmemSwizzle::kNone
                            ? ", unpadded, 128B-swizzled for TMA tensor stores), 16-byte rows to global memory"
                            : "), 16-byte rows to global memory"));
  }
  if (out.shared_bytes > options.shared_budget_bytes && !options.reuse_dead_shared) {
    GpuLowerOptions reuse = options;  // tiles that are never live together share memory
    reuse.reuse_dead_shared = true;
    StatusOr<SimtKernel> r = LowerToSimt(input, reuse);
    if (r.ok()) {
      r->notes.push_back("shared tiles reused: without, the kernel needs " + std::to_string(out.shared_bytes) +
                         " bytes of shared memory, the target allows " + std::to_string(options.shared_budget_bytes));
    }
    return r;
  }
  if (out.shared_bytes > options.shared_budget_bytes) {
    int64_t deepest = 0;
    for (const AsyncPipeline& p : async) deepest = std::max(deepest, p.stages);
    if (deepest >= 2) {  // one stage fewer (down to a serial loop) before giving up
      GpuLowerOptions fewer = options;
      fewer.max_async_stages = deepest - 1;
      StatusOr<SimtKernel> r = LowerToSimt(input, fewer);
      if (r.ok()) {
        r->notes.push_back("pipelines: " + std::to_string(deepest) + " stages need " + std::to_string(out.shared_bytes) +
                           " bytes of shared memory, the target allows " + std::to_string(options.shared_budget_bytes));
      }
      return r;
    }
    std::string demoted;
    for (const std::string& d : plan->demoted) demoted += " " + d;
    return Status(StatusCode::kResourceExhausted,
                  passes::Where(f, passes::TheKernelStmt(f).loc,
                                ("needs " + std::to_string(out.shared_bytes) + " bytes of shared memory, the target allows " +
                                 std::to_string(options.shared_budget_bytes) +
                                 (demoted.empty() ? std::string() : "; fragments kept in shared memory:" + demoted))
                                    .c_str()));
  }
  if (options.gemm == GemmStrategy::kWgmma && options.forward_cast) {
    const std::string fwd = ForwardCastIntoWgmmaA(&out);
    if (!fwd.empty()) out.notes.push_back(fwd);
    const std::string zero = ZeroInitWgmmaAccumulators(&out);
    if (!zero.empty()) out.notes.push_back(zero);
  }
  if (options.gemm == GemmStrategy::kWgmma && options.tma_copies && options.wgmma_overlap) {
    const std::string ws = WarpSpecializeGemmPipeline(&out, options.shared_budget_bytes, options.warp_specialize,
                                                       options.persistent_sms, options.gemm_pingpong,
                                                       options.persistent_ring);
    if (!ws.empty()) out.notes.push_back(ws);
    if (!pre_note.empty()) out.notes.push_back(pre_note);
    if (out.pingpong_requested) out.notes.push_back(WarpgroupPingpong(&out));
  }
  // `hint cluster N` (T.Kernel(..., cluster_dims=N)) at the kernel's top level: a thread-block
  // cluster where the target has them and the kernel's form allows it; a hint never changes
  // results, so everywhere else it is ignored with a note.
  for (const ir::Stmt& st : passes::TheKernel(f).body) {
    const auto* h = ir::As<ir::Hint>(st);
    if (!h || h->name != "cluster") continue;
    const int64_t n = h->args.size() == 1 && h->args[0].kind == ir::HintArg::Kind::kInt ? h->args[0].int_value : 0;
    if (n == 1) continue;
    if (!options.clusters) {
      out.notes.push_back(std::string("cluster hint ignored: ") + options.target +
                          " has no thread-block clusters here (sm_90a warp-specialized kernels only)");
    } else if (out.pingpong_requested) {  // two schedules over the same barriers: not combined (untested)
      out.notes.push_back("not clustered: the kernel also asks for T.warpgroup_pingpong()");
    } else {
      out.notes.push_back(ClusterMulticast(&out, n));
    }
  }
  DropUnusedTensorMaps(&out);
  return out;
}

}  // namespace tl::gpu
