// Safe memory access: element loads and stores of tensor parameters that the
// compiler cannot prove inside the tensor get a bounds guard (the semantics of
// upstream TileLang's LegalizeSafeMemoryAccess). See passes.h.
//
// The proof is an interval analysis over integer expressions: block indices
// range over [0, grid), parallel indices over [0, extent), serial loop
// variables over [start, stop) for a constant step, lets take their value's
// range, and the enclosing `if` conditions add facts (`i < 5` narrows `i`; a
// condition `IDX < DIM` written by the user proves that very access).
// Anything it cannot bound is guarded; a guard costs a compare, a missing one
// writes outside the caller's memory.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tilelang/passes/passes.h"

namespace tl::passes {
namespace {

using ir::DType;
using ir::Expr;
__extension__ typedef __int128 Wide;  // exact products of two int64 bounds

// A closed interval of integers; an absent bound is unknown.
struct Range {
  std::optional<int64_t> lo, hi;
};

std::optional<int64_t> Narrow(Wide v) {
  if (v < std::numeric_limits<int64_t>::min() || v > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return static_cast<int64_t>(v);
}

// Every value of the dtype (u64's upper half is not representable: unknown).
Range Whole(DType t) {
  switch (t) {
    case DType::kBool: return {0, 1};
    case DType::kI8: return {INT8_MIN, INT8_MAX};
    case DType::kI16: return {INT16_MIN, INT16_MAX};
    case DType::kI32: return {INT32_MIN, INT32_MAX};
    case DType::kI64: return {INT64_MIN, INT64_MAX};
    case DType::kU8: return {0, UINT8_MAX};
    case DType::kU16: return {0, UINT16_MAX};
    case DType::kU32: return {0, UINT32_MAX};
    case DType::kU64: return {0, std::nullopt};
    default: return {};
  }
}

// `r` if every value of it is a value of `t`, else Whole(t): the generated
// code wraps on overflow, so a range that leaves the dtype says nothing.
Range Fit(const Range& r, DType t) {
  const Range w = Whole(t);
  if (!ir::IsInt(t) && t != DType::kBool) return {};
  const bool lo_ok = r.lo.has_value() && (!w.lo || *r.lo >= *w.lo) && (!w.hi || *r.lo <= *w.hi);
  const bool hi_ok = r.hi.has_value() && (!w.hi || *r.hi <= *w.hi) && (!w.lo || *r.hi >= *w.lo);
  if ((r.lo && !lo_ok) || (r.hi && !hi_ok)) return w;
  Range out = r;
  if (!out.lo) out.lo = w.lo;  // an unknown bound is still the dtype's bound
  if (!out.hi) out.hi = w.hi;
  return out;
}

std::optional<int64_t> Const(const Range& r) {
  if (r.lo && r.hi && *r.lo == *r.hi) return r.lo;
  return std::nullopt;
}

Wide FloorDiv(Wide a, Wide b) {
  Wide q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

class SafeAccess {
 public:
  SafeAccess(ir::Function& f) : f_(f), syms_(ir::CollectSymbols(f)) {
    for (const ir::Symbol& s : f.symbols) ranges_[s.name] = Fit({0, std::nullopt}, s.dtype);  // sizes are >= 0
  }

  SafeAccessReport Run() {
    for (ir::Stmt& s : f_.body) {
      if (auto* k = ir::As<ir::Kernel>(s)) {
        for (size_t i = 0; i < k->block_vars.size() && i < k->grid.size(); ++i) {
          const Range g = Of(k->grid[i]);
          Range b{0, std::nullopt};
          if (g.hi) b.hi = *g.hi - 1;
          ranges_[k->block_vars[i]] = Fit(b, DType::kI32);
        }
        VisitBlock(k->body);
      }
    }
    return report_;
  }

 private:
  // ---- intervals --------------------------------------------------------
  Range Of(const Expr& e) const {
    const DType t = ir::ExprDType(e);
    if (!ir::IsInt(t) && t != DType::kBool) return {};
    switch (ir::Kind(e)) {
      case ir::ExprKind::kIntImm: {
        const auto* i = ir::As<ir::IntImm>(e);
        if (t == DType::kU64 && i->value < 0) return Whole(t);
        return {i->value, i->value};
      }
      case ir::ExprKind::kVarRef: {
        auto it = ranges_.find(ir::As<ir::VarRef>(e)->name);
        return it == ranges_.end() ? Whole(t) : Fit(it->second, t);
      }
      case ir::ExprKind::kBinary: return Fit(OfBinary(*ir::As<ir::Binary>(e)), t);
      case ir::ExprKind::kSelect: {
        const auto* s = ir::As<ir::Select>(e);
        const Range a = Of(*s->true_value), b = Of(*s->false_value);
        Range r;
        if (a.lo && b.lo) r.lo = std::min(*a.lo, *b.lo);
        if (a.hi && b.hi) r.hi = std::max(*a.hi, *b.hi);
        return Fit(r, t);
      }
      case ir::ExprKind::kCast: {
        const auto* c = ir::As<ir::Cast>(e);
        const DType from = ir::ExprDType(*c->value);
        if (!ir::IsInt(from) && from != DType::kBool) return Whole(t);
        return Fit(Of(*c->value), t);
      }
      case ir::ExprKind::kCall: return Fit(OfCall(*ir::As<ir::Call>(e)), t);
      default: return Whole(t);  // loads, unary ops
    }
  }

  Range OfBinary(const ir::Binary& b) const {
    using B = ir::BinaryOp;
    if (ir::IsComparison(b.op) || ir::IsLogical(b.op)) return {0, 1};
    const Range x = Of(*b.lhs), y = Of(*b.rhs);
    auto add = [](std::optional<int64_t> p, std::optional<int64_t> q, int sign) -> std::optional<int64_t> {
      if (!p || !q) return std::nullopt;
      return Narrow(static_cast<Wide>(*p) + sign * static_cast<Wide>(*q));
    };
    switch (b.op) {
      case B::kAdd: return {add(x.lo, y.lo, 1), add(x.hi, y.hi, 1)};
      case B::kSub: return {add(x.lo, y.hi, -1), add(x.hi, y.lo, -1)};
      case B::kMul: {
        if (x.lo && x.hi && y.lo && y.hi) {
          const Wide c[4] = {static_cast<Wide>(*x.lo) * *y.lo, static_cast<Wide>(*x.lo) * *y.hi,
                             static_cast<Wide>(*x.hi) * *y.lo, static_cast<Wide>(*x.hi) * *y.hi};
          return {Narrow(*std::min_element(c, c + 4)), Narrow(*std::max_element(c, c + 4))};
        }
        // One side constant and nonnegative: monotone in the other.
        auto scale = [](const Range& r, int64_t k) -> Range {
          if (k == 0) return {0, 0};
          Range out;
          if (r.lo) out.lo = Narrow(static_cast<Wide>(*r.lo) * k);
          if (r.hi) out.hi = Narrow(static_cast<Wide>(*r.hi) * k);
          return out;
        };
        if (std::optional<int64_t> k = Const(y); k && *k >= 0) return scale(x, *k);
        if (std::optional<int64_t> k = Const(x); k && *k >= 0) return scale(y, *k);
        return {};
      }
      case B::kDiv: {  // floor division on integers
        const std::optional<int64_t> k = Const(y);
        if (!k || *k <= 0) return {};
        Range out;
        if (x.lo) out.lo = Narrow(FloorDiv(*x.lo, *k));
        if (x.hi) out.hi = Narrow(FloorDiv(*x.hi, *k));
        return out;
      }
      case B::kMod: {  // floor modulo: the divisor's sign
        const std::optional<int64_t> k = Const(y);
        if (!k || *k <= 0) return {};
        if (x.lo && x.hi && *x.lo >= 0 && *x.hi < *k) return x;
        return {0, *k - 1};
      }
      case B::kBitAnd: {
        // With one side nonnegative the result lies in [0, that side's max].
        std::optional<int64_t> hi;
        if (x.lo && *x.lo >= 0 && x.hi) hi = *x.hi;
        if (y.lo && *y.lo >= 0 && y.hi) hi = hi ? std::min(*hi, *y.hi) : *y.hi;
        if (hi) return {0, hi};
        return {};
      }
      default: return {};
    }
  }

  Range OfCall(const ir::Call& c) const {
    using C = ir::CallOp;
    if (c.args.empty()) return {};
    const Range x = Of(c.args[0]);
    const Range y = c.args.size() > 1 ? Of(c.args[1]) : Range{};
    const std::optional<int64_t> k_or = c.args.size() > 1 ? Const(y) : std::nullopt;
    const bool k_pos = k_or.has_value() && *k_or > 0;
    const int64_t k = k_pos ? *k_or : 1;
    switch (c.op) {
      case C::kMin: {
        Range r;
        if (x.lo && y.lo) r.lo = std::min(*x.lo, *y.lo);
        if (x.hi && y.hi) r.hi = std::min(*x.hi, *y.hi);
        else r.hi = x.hi ? x.hi : y.hi;  // min(a, b) <= either known upper bound
        return r;
      }
      case C::kMax: {
        Range r;
        if (x.hi && y.hi) r.hi = std::max(*x.hi, *y.hi);
        if (x.lo && y.lo) r.lo = std::max(*x.lo, *y.lo);
        else r.lo = x.lo ? x.lo : y.lo;
        return r;
      }
      case C::kCeilDiv: {
        if (!k_pos) return {};
        Range out;
        if (x.lo) out.lo = Narrow(-FloorDiv(-static_cast<Wide>(*x.lo), k));
        if (x.hi) out.hi = Narrow(-FloorDiv(-static_cast<Wide>(*x.hi), k));
        return out;
      }
      case C::kTruncDiv: {
        if (!k_pos || !x.lo || *x.lo < 0) return {};
        Range out{*x.lo / k, std::nullopt};
        if (x.hi) out.hi = *x.hi / k;
        return out;
      }
      case C::kTruncMod: {
        if (!k_pos) return {};
        if (x.lo && *x.lo >= 0) return {0, x.hi ? std::min(*x.hi, k - 1) : k - 1};
        return {-(k - 1), k - 1};
      }
      default: return {};
    }
  }

  // ---- facts from enclosing conditions -----------------------------------
  // Each conjunct of an `if` condition holds in its then-branch: `v < K`
  // style comparisons narrow the variable; every conjunct is also kept as a
  // fact for FactSaysLess and FactSaysNonnegative (a user's own bounds check).
  void Assume(const Expr& cond) {
    if (const auto* b = ir::As<ir::Binary>(cond)) {
      if (b->op == ir::BinaryOp::kAnd) {
        Assume(*b->lhs);
        Assume(*b->rhs);
        return;
      }
      if (Immutable(cond)) {
        facts_.push_back(cond);
        NarrowVar(*b);
      }
    }
  }

  // True when `e` reads no `var` and no buffer: its value cannot change
  // inside the branch it guards.
  bool Immutable(const Expr& e) const {
    bool ok = true;
    ir::WalkExpr(e, [&](const Expr& x) {
      if (ir::As<ir::Load>(x)) ok = false;
      if (const auto* v = ir::As<ir::VarRef>(x)) {
        auto it = syms_.find(v->name);
        if (it == syms_.end() || it->second.kind == ir::SymbolInfo::Kind::kVar) ok = false;
      }
    });
    return ok;
  }

  void NarrowVar(const ir::Binary& b) {
    using B = ir::BinaryOp;
    // Normalize to `VAR op CONST`.
    const Expr* var = b.lhs.operator->();
    const Expr* other = b.rhs.operator->();
    B op = b.op;
    if (!ir::As<ir::VarRef>(*var)) {
      std::swap(var, other);
      switch (op) {
        case B::kLt: op = B::kGt; break;
        case B::kLe: op = B::kGe; break;
        case B::kGt: op = B::kLt; break;
        case B::kGe: op = B::kLe; break;
        default: break;
      }
    }
    const auto* v = ir::As<ir::VarRef>(*var);
    if (!v) return;
    const Range o = Of(*other);
    if (ranges_.count(v->name) == 0) ranges_[v->name] = Whole(v->dtype);
    Range& r = ranges_[v->name];
    auto tighten_hi = [&](std::optional<int64_t> h) {
      if (h && (!r.hi || *h < *r.hi)) r.hi = h;
    };
    auto tighten_lo = [&](std::optional<int64_t> l) {
      if (l && (!r.lo || *l > *r.lo)) r.lo = l;
    };
    auto minus1 = [](std::optional<int64_t> x) { return x ? Narrow(static_cast<Wide>(*x) - 1) : x; };
    auto plus1 = [](std::optional<int64_t> x) { return x ? Narrow(static_cast<Wide>(*x) + 1) : x; };
    switch (op) {
      case B::kLt: tighten_hi(minus1(o.hi)); break;
      case B::kLe: tighten_hi(o.hi); break;
      case B::kGt: tighten_lo(plus1(o.lo)); break;
      case B::kGe: tighten_lo(o.lo); break;
      case B::kEq: tighten_hi(o.hi); tighten_lo(o.lo); break;
      default: break;
    }
  }

  static const Expr& StripCast(const Expr& e) {
    const Expr* p = &e;
    while (const auto* c = ir::As<ir::Cast>(*p)) {
      if (!ir::IsInt(c->dtype)) break;
      p = c->value.operator->();
    }
    return *p;
  }

  // A user condition says idx < bound (or bound > idx, idx <= bound - 1).
  bool FactSaysLess(const Expr& idx, const Expr& bound) const {
    const Expr& i = StripCast(idx);
    const Expr& d = StripCast(bound);
    for (const Expr& f : facts_) {
      const auto* b = ir::As<ir::Binary>(f);
      const Expr& l = StripCast(*b->lhs);
      const Expr& r = StripCast(*b->rhs);
      if (b->op == ir::BinaryOp::kLt && l == i && r == d) return true;
      if (b->op == ir::BinaryOp::kGt && l == d && r == i) return true;
    }
    return false;
  }

  // A user condition (or an enclosing guard) says idx >= 0.
  bool FactSaysNonnegative(const Expr& idx) const {
    const Expr& i = StripCast(idx);
    for (const Expr& f : facts_) {
      const auto* b = ir::As<ir::Binary>(f);
      const std::optional<int64_t> r = ir::FoldInt(*b->rhs);
      const std::optional<int64_t> l = ir::FoldInt(*b->lhs);
      if (b->op == ir::BinaryOp::kGe && r && *r >= 0 && StripCast(*b->lhs) == i) return true;
      if (b->op == ir::BinaryOp::kLe && l && *l >= 0 && StripCast(*b->rhs) == i) return true;
    }
    return false;
  }

  // ---- guards -------------------------------------------------------------
  static Expr CastTo(DType t, Expr e) { return ir::ExprDType(e) == t ? e : ir::MakeCast(t, std::move(e)); }

  // The bounds condition of tensor `buffer` at `idx`, or nullopt when proven.
  std::optional<Expr> Guard(const std::string& buffer, const std::vector<Expr>& idx) const {
    auto it = syms_.find(buffer);
    if (it == syms_.end() || it->second.kind != ir::SymbolInfo::Kind::kTensorParam) return std::nullopt;
    const std::vector<Expr>& shape = it->second.shape;
    std::optional<Expr> cond;
    auto conj = [&](Expr c) {
      cond = cond ? ir::MakeBinary(ir::BinaryOp::kAnd, std::move(*cond), std::move(c)) : std::move(c);
    };
    for (size_t d = 0; d < idx.size() && d < shape.size(); ++d) {
      const DType ti = ir::ExprDType(idx[d]);
      const Range r = Of(idx[d]);
      // Lower bound.
      if (!(r.lo && *r.lo >= 0) && !FactSaysNonnegative(idx[d])) conj(ir::MakeBinary(ir::BinaryOp::kGe, idx[d], ir::MakeInt(0, ti)));
      // Upper bound.
      if (const std::optional<int64_t> dim = ir::FoldInt(shape[d])) {
        if (r.hi && *r.hi < *dim) continue;
        const Range w = Whole(ti);
        if (w.hi && *dim > *w.hi) continue;  // every value of the index dtype is below the dim
        conj(ir::MakeBinary(ir::BinaryOp::kLt, idx[d], ir::MakeInt(*dim, ti)));
        continue;
      }
      if (FactSaysLess(idx[d], shape[d])) continue;
      const DType ts = ir::ExprDType(shape[d]);
      if (ti == ts) {
        conj(ir::MakeBinary(ir::BinaryOp::kLt, idx[d], shape[d]));
      } else {
        // Compare in a type that holds both: u64 when the index is u64 (the
        // size is never negative), i64 otherwise.
        const DType c = ti == DType::kU64 ? DType::kU64 : DType::kI64;
        conj(ir::MakeBinary(ir::BinaryOp::kLt, CastTo(c, idx[d]), CastTo(c, shape[d])));
      }
    }
    return cond;
  }

  static Expr Zero(DType t) {
    if (t == DType::kBool) return ir::MakeBool(false);
    if (ir::IsFloat(t)) return ir::MakeFloat(0.0, t);
    return ir::MakeInt(0, t);
  }

  // Rewrites every tensor load of `e` into select(in bounds, load, 0).
  Expr GuardLoads(const Expr& e) {
    return ir::RewriteExpr(e, [&](const Expr& x) -> std::optional<Expr> {
      const auto* l = ir::As<ir::Load>(x);
      if (!l) return std::nullopt;
      std::optional<Expr> g = Guard(l->buffer, l->indices);
      if (!g) return std::nullopt;
      ++report_.loads;
      return ir::MakeSelect(std::move(*g), x, Zero(l->dtype));
    });
  }

  static ir::Stmt IfStmt(Expr cond, ir::Stmt body) {
    ir::Stmt s;
    s.loc = body.loc;
    ir::If i;
    i.cond = std::move(cond);
    i.then_body.push_back(std::move(body));
    s.node = std::move(i);
    return s;
  }

  // ---- statements -----------------------------------------------------------
  void VisitBlock(ir::Block& b) {
    for (ir::Stmt& s : b) VisitStmt(s);
  }

  void VisitStmt(ir::Stmt& s) {
    if (auto* st = ir::As<ir::Store>(s)) {
      // The store's own guard holds while its value is computed: a load at
      // the same indices (B[i] = A[i] * 2 over equal shapes) needs no second one.
      for (Expr& i : st->indices) i = GuardLoads(i);
      std::optional<Expr> g = Guard(st->buffer, st->indices);
      const size_t saved_facts = facts_.size();
      const auto saved_ranges = ranges_;
      if (g) Assume(*g);
      st->value = GuardLoads(st->value);
      facts_.resize(saved_facts);
      ranges_ = saved_ranges;
      if (g) {
        ++report_.stores;
        s = IfStmt(std::move(*g), std::move(s));
      }
      return;
    }
    // Expressions held by the statement itself are in the enclosing context.
    ir::ForEachExprOf(s, [&](Expr& e) { e = GuardLoads(e); });
    if (auto* l = ir::As<ir::Let>(s)) {
      ranges_[l->name] = Of(l->value);
      return;
    }
    if (auto* a = ir::As<ir::AtomicAdd>(s)) {
      std::vector<Expr> idx;
      for (const ir::RegionDim& d : a->dst.dims) idx.push_back(d.start);
      if (std::optional<Expr> g = Guard(a->dst.buffer, idx)) {
        ++report_.atomics;
        s = IfStmt(std::move(*g), std::move(s));
      }
      return;
    }
    if (auto* fo = ir::As<ir::For>(s)) {
      const Range a = Of(fo->start), b = Of(fo->stop);
      const std::optional<int64_t> step = fo->step ? ir::FoldInt(*fo->step) : std::optional<int64_t>(1);
      Range r;
      if (step && *step > 0) {
        r.lo = a.lo;
        if (b.hi) r.hi = Narrow(static_cast<Wide>(*b.hi) - 1);
      } else if (step && *step < 0) {
        r.hi = a.hi;
        if (b.lo) r.lo = Narrow(static_cast<Wide>(*b.lo) + 1);
      }
      ranges_[fo->var] = Fit(r, ir::ExprDType(fo->start));
      VisitBlock(fo->body);
      return;
    }
    if (auto* p = ir::As<ir::Parallel>(s)) {
      for (size_t i = 0; i < p->vars.size() && i < p->extents.size(); ++i) {
        const std::optional<int64_t> e = ir::FoldInt(p->extents[i]);
        ranges_[p->vars[i]] = e ? Range{0, *e - 1} : Whole(DType::kI32);
      }
      VisitBlock(p->body);
      return;
    }
    if (auto* i = ir::As<ir::If>(s)) {
      const auto saved_ranges = ranges_;
      const size_t saved_facts = facts_.size();
      Assume(i->cond);
      VisitBlock(i->then_body);
      ranges_ = saved_ranges;
      facts_.resize(saved_facts);
      VisitBlock(i->else_body);
      return;
    }
  }

  ir::Function& f_;
  ir::SymbolTable syms_;
  std::map<std::string, Range> ranges_;
  std::vector<Expr> facts_;
  SafeAccessReport report_;
};

}  // namespace

SafeAccessReport GuardTensorAccesses(ir::Function& f) { return SafeAccess(f).Run(); }

}  // namespace tl::passes
