// Vocabulary tables, construction helpers, dtype inference, constant folding,
// walkers and the symbol table of Tile IR (see tile_ir.h).
#include "tilelang/ir/tile_ir.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tl::ir {

namespace {

// Keeps std::visit calls short: overloaded{[](const A&){...}, ...}.
template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

struct DTypeEntry {
  DType dtype;
  const char* name;
  int bits;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "bool", 1}, {DType::kI8, "i8", 8},     {DType::kI16, "i16", 16},
    {DType::kI32, "i32", 32},  {DType::kI64, "i64", 64},  {DType::kU8, "u8", 8},
    {DType::kU16, "u16", 16},  {DType::kU32, "u32", 32},  {DType::kU64, "u64", 64},
    {DType::kF16, "f16", 16},  {DType::kBF16, "bf16", 16}, {DType::kF32, "f32", 32},
    {DType::kF64, "f64", 64},
};

constexpr const char* kCallNames[] = {"exp",   "exp2",  "log",     "log2",     "sqrt",     "rsqrt",  "tanh",
                                      "sigmoid", "abs", "floor",   "ceil",     "round",    "sin",    "cos",
                                      "pow",   "max",   "min",     "truncdiv", "truncmod", "ceildiv"};

}  // namespace

const char* DTypeName(DType t) { return kDTypes[static_cast<int>(t)].name; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (name == e.name) return e.dtype;
  }
  return std::nullopt;
}

bool IsInt(DType t) { return t >= DType::kI8 && t <= DType::kU64; }
bool IsSigned(DType t) { return t >= DType::kI8 && t <= DType::kI64; }
bool IsFloat(DType t) { return t >= DType::kF16; }
int BitWidth(DType t) { return kDTypes[static_cast<int>(t)].bits; }

double RoundToDType(double v, DType t) {
  // Significand bits (with the implicit one), smallest subnormal exponent and
  // largest finite value of each narrow float format.
  int digits = 0;
  int min_quantum_exp = 0;
  double max_finite = 0;
  switch (t) {
    case DType::kF16: digits = 11, min_quantum_exp = -24, max_finite = 65504.0; break;
    case DType::kBF16: digits = 8, min_quantum_exp = -133, max_finite = std::ldexp(255.0, 120); break;
    case DType::kF32: digits = 24, min_quantum_exp = -149, max_finite = std::ldexp(16777215.0, 104); break;
    default: return v;
  }
  if (!std::isfinite(v) || v == 0) return v;
  int exp = 0;
  std::frexp(v, &exp);  // |v| = m * 2^exp, m in [0.5, 1)
  // One unit in the last place of the target format at this magnitude.
  int quantum_exp = std::max(exp - digits, min_quantum_exp);
  // Scaling by powers of two is exact; nearbyint rounds ties to even in the
  // default rounding mode.
  double r = std::ldexp(std::nearbyint(std::ldexp(v, -quantum_exp)), quantum_exp);
  if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

std::string ToString(const std::optional<Loc>& loc) {
  if (!loc) return "";
  return loc->file + ":" + std::to_string(loc->line);
}

bool FloatImm::operator==(const FloatImm& other) const {
  if (dtype != other.dtype) return false;
  if (std::isnan(value) || std::isnan(other.value)) return std::isnan(value) && std::isnan(other.value);
  return value == other.value && std::signbit(value) == std::signbit(other.value);
}

const char* UnaryOpSpelling(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "-";
    case UnaryOp::kNot: return "!";
    case UnaryOp::kBitNot: return "~";
  }
  return "?";
}

const char* BinaryOpSpelling(BinaryOp op) {
  static constexpr const char* kSpellings[] = {"+", "-",  "*",  "/", "%", "<<", ">>", "<", "<=",
                                               ">", ">=", "==", "!=", "&", "^", "|", "&&", "||"};
  return kSpellings[static_cast<int>(op)];
}

bool IsComparison(BinaryOp op) { return op >= BinaryOp::kLt && op <= BinaryOp::kNe; }
bool IsLogical(BinaryOp op) { return op == BinaryOp::kAnd || op == BinaryOp::kOr; }

const char* CallOpName(CallOp op) { return kCallNames[static_cast<int>(op)]; }

std::optional<CallOp> ParseCallOp(std::string_view name) {
  for (size_t i = 0; i < std::size(kCallNames); ++i) {
    if (name == kCallNames[i]) return static_cast<CallOp>(i);
  }
  return std::nullopt;
}

int CallArity(CallOp op) { return op <= CallOp::kCos ? 1 : 2; }

const char* ExprKindName(ExprKind k) {
  static constexpr const char* kNames[] = {"int literal", "float literal", "name", "load",  "unary",
                                           "binary",      "select",        "cast", "call"};
  return kNames[static_cast<int>(k)];
}

const char* MemScopeName(MemScope s) {
  static constexpr const char* kNames[] = {"global", "shared", "fragment", "local"};
  return kNames[static_cast<int>(s)];
}

const char* LoopKindName(LoopKind k) {
  static constexpr const char* kNames[] = {"serial", "unroll", "pipelined"};
  return kNames[static_cast<int>(k)];
}

const char* GemmPolicyName(GemmPolicy p) {
  static constexpr const char* kNames[] = {"square", "full_row", "full_col"};
  return kNames[static_cast<int>(p)];
}

const char* ReduceOpName(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "max", "min", "abssum", "absmax"};
  return kNames[static_cast<int>(op)];
}

const char* StmtKindName(StmtKind k) {
  static constexpr const char* kNames[] = {
      "kernel", "alloc", "var",    "let",    "store",  "assign",     "for",        "parallel", "if",
      "copy",   "fill",  "gemm",   "reduce", "cumsum", "atomic_add", "atomic_add", "sync",     "hint",
      "call_extern",
  };
  return kNames[static_cast<int>(k)];
}

// --- construction ----------------------------------------------------------

Expr MakeInt(int64_t value, DType dtype) { return Expr{IntImm{value, dtype}}; }
Expr MakeBool(bool value) { return Expr{IntImm{value ? 1 : 0, DType::kBool}}; }
Expr MakeFloat(double value, DType dtype) { return Expr{FloatImm{RoundToDType(value, dtype), dtype}}; }
Expr MakeVar(std::string name, DType dtype) { return Expr{VarRef{std::move(name), dtype}}; }
Expr MakeLoad(std::string buffer, std::vector<Expr> indices, DType dtype) {
  return Expr{Load{std::move(buffer), std::move(indices), dtype}};
}
Expr MakeUnary(UnaryOp op, Expr operand) { return Expr{Unary{op, std::move(operand)}}; }
Expr MakeBinary(BinaryOp op, Expr lhs, Expr rhs) { return Expr{Binary{op, std::move(lhs), std::move(rhs)}}; }
Expr MakeSelect(Expr cond, Expr true_value, Expr false_value) {
  return Expr{Select{std::move(cond), std::move(true_value), std::move(false_value)}};
}
Expr MakeCast(DType dtype, Expr value) { return Expr{Cast{dtype, std::move(value)}}; }
Expr MakeCall(CallOp op, std::vector<Expr> args) { return Expr{Call{op, std::move(args)}}; }

DType ExprDType(const Expr& e) {
  return std::visit(
      Overloaded{
          [](const IntImm& n) { return n.dtype; },
          [](const FloatImm& n) { return n.dtype; },
          [](const VarRef& n) { return n.dtype; },
          [](const Load& n) { return n.dtype; },
          [](const Unary& n) { return n.op == UnaryOp::kNot ? DType::kBool : ExprDType(*n.operand); },
          [](const Binary& n) {
            return IsComparison(n.op) || IsLogical(n.op) ? DType::kBool : ExprDType(*n.lhs);
          },
          [](const Select& n) { return ExprDType(*n.true_value); },
          [](const Cast& n) { return n.dtype; },
          [](const Call& n) { return n.args.empty() ? DType::kF32 : ExprDType(n.args[0]); },
      },
      e.node);
}

// --- constant folding ------------------------------------------------------

namespace {

// Wraps `v` to the value range of integer dtype `t` (two's complement), the
// way the generated code computes.
int64_t WrapTo(int64_t v, DType t) {
  if (t == DType::kBool) return v != 0 ? 1 : 0;
  int bits = BitWidth(t);
  if (bits >= 64) return v;
  uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (IsSigned(t) && (u >> (bits - 1)) != 0) u |= ~mask;
  return static_cast<int64_t>(u);
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) { return a - FloorDiv(a, b) * b; }

// Evaluates `op` on two values of dtype `t`; nullopt for division by zero and
// shifts outside [0, bits). Computation happens in uint64 to make overflow
// well defined, then wraps to `t`.
std::optional<int64_t> EvalBinary(BinaryOp op, int64_t a, int64_t b, DType t) {
  const bool is_unsigned = !IsSigned(t) && t != DType::kBool;
  const uint64_t ua = static_cast<uint64_t>(a);
  const uint64_t ub = static_cast<uint64_t>(b);
  auto wrap = [t](uint64_t v) { return WrapTo(static_cast<int64_t>(v), t); };
  auto less = [&](int64_t x, int64_t y) {
    return is_unsigned ? static_cast<uint64_t>(x) < static_cast<uint64_t>(y) : x < y;
  };
  switch (op) {
    case BinaryOp::kAdd: return wrap(ua + ub);
    case BinaryOp::kSub: return wrap(ua - ub);
    case BinaryOp::kMul: return wrap(ua * ub);
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
      if (b == 0) return std::nullopt;
      if (is_unsigned) return wrap(op == BinaryOp::kDiv ? ua / ub : ua % ub);
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return op == BinaryOp::kDiv ? a : 0;
      return wrap(static_cast<uint64_t>(op == BinaryOp::kDiv ? FloorDiv(a, b) : FloorMod(a, b)));
    case BinaryOp::kShl:
    case BinaryOp::kShr: {
      if (b < 0 || b >= BitWidth(t)) return std::nullopt;
      if (op == BinaryOp::kShl) return wrap(ua << b);
      return is_unsigned ? wrap(ua >> b) : wrap(static_cast<uint64_t>(a >> b));
    }
    case BinaryOp::kLt: return less(a, b) ? 1 : 0;
    case BinaryOp::kLe: return less(b, a) ? 0 : 1;
    case BinaryOp::kGt: return less(b, a) ? 1 : 0;
    case BinaryOp::kGe: return less(a, b) ? 0 : 1;
    case BinaryOp::kEq: return a == b ? 1 : 0;
    case BinaryOp::kNe: return a != b ? 1 : 0;
    case BinaryOp::kBitAnd: return wrap(ua & ub);
    case BinaryOp::kBitXor: return wrap(ua ^ ub);
    case BinaryOp::kBitOr: return wrap(ua | ub);
    case BinaryOp::kAnd: return (a != 0 && b != 0) ? 1 : 0;
    case BinaryOp::kOr: return (a != 0 || b != 0) ? 1 : 0;
  }
  return std::nullopt;
}

std::optional<int64_t> EvalCall(CallOp op, int64_t a, int64_t b, DType t) {
  const bool is_unsigned = !IsSigned(t);
  const uint64_t ua = static_cast<uint64_t>(a);
  const uint64_t ub = static_cast<uint64_t>(b);
  switch (op) {
    case CallOp::kMax: return is_unsigned ? (ua < ub ? b : a) : std::max(a, b);
    case CallOp::kMin: return is_unsigned ? (ua < ub ? a : b) : std::min(a, b);
    case CallOp::kAbs: return WrapTo(a < 0 && !is_unsigned ? static_cast<int64_t>(0 - ua) : a, t);
    case CallOp::kTruncDiv:
    case CallOp::kTruncMod:
      if (b == 0) return std::nullopt;
      if (is_unsigned) return WrapTo(static_cast<int64_t>(op == CallOp::kTruncDiv ? ua / ub : ua % ub), t);
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return op == CallOp::kTruncDiv ? a : 0;
      return WrapTo(op == CallOp::kTruncDiv ? a / b : a % b, t);
    case CallOp::kCeilDiv:
      if (b == 0) return std::nullopt;
      if (is_unsigned) return WrapTo(static_cast<int64_t>(ua / ub + (ua % ub != 0 ? 1 : 0)), t);
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;
      return WrapTo(-FloorDiv(-a, b), t);
    default: return std::nullopt;  // float math, pow: not integer folding
  }
}

}  // namespace

std::optional<int64_t> FoldInt(const Expr& e, const NameLookup& lookup) {
  return std::visit(
      Overloaded{
          [](const IntImm& n) -> std::optional<int64_t> { return n.value; },
          [](const FloatImm&) -> std::optional<int64_t> { return std::nullopt; },
          [&](const VarRef& n) -> std::optional<int64_t> {
            if (!lookup || !(IsInt(n.dtype) || n.dtype == DType::kBool)) return std::nullopt;
            std::optional<int64_t> v = lookup(n.name);
            if (!v) return std::nullopt;
            return WrapTo(*v, n.dtype);
          },
          [](const Load&) -> std::optional<int64_t> { return std::nullopt; },
          [&](const Unary& n) -> std::optional<int64_t> {
            DType t = ExprDType(*n.operand);
            if (!IsInt(t) && t != DType::kBool) return std::nullopt;
            std::optional<int64_t> v = FoldInt(*n.operand, lookup);
            if (!v) return std::nullopt;
            switch (n.op) {
              case UnaryOp::kNeg: return WrapTo(static_cast<int64_t>(0 - static_cast<uint64_t>(*v)), t);
              case UnaryOp::kNot: return *v == 0 ? 1 : 0;
              case UnaryOp::kBitNot: return WrapTo(~*v, t);
            }
            return std::nullopt;
          },
          [&](const Binary& n) -> std::optional<int64_t> {
            DType t = ExprDType(*n.lhs);
            if (!IsInt(t) && t != DType::kBool) return std::nullopt;
            std::optional<int64_t> a = FoldInt(*n.lhs, lookup);
            if (!a) return std::nullopt;
            // Short-circuit like the generated code: `false && x` is false
            // even when x is not constant.
            if (n.op == BinaryOp::kAnd && *a == 0) return 0;
            if (n.op == BinaryOp::kOr && *a != 0) return 1;
            std::optional<int64_t> b = FoldInt(*n.rhs, lookup);
            if (!b) return std::nullopt;
            return EvalBinary(n.op, *a, *b, t);
          },
          [&](const Select& n) -> std::optional<int64_t> {
            std::optional<int64_t> c = FoldInt(*n.cond, lookup);
            if (!c) return std::nullopt;
            return FoldInt(*c != 0 ? *n.true_value : *n.false_value, lookup);
          },
          [&](const Cast& n) -> std::optional<int64_t> {
            if (!IsInt(n.dtype) && n.dtype != DType::kBool) return std::nullopt;
            DType from = ExprDType(*n.value);
            if (!IsInt(from) && from != DType::kBool) return std::nullopt;
            std::optional<int64_t> v = FoldInt(*n.value, lookup);
            if (!v) return std::nullopt;
            return WrapTo(*v, n.dtype);
          },
          [&](const Call& n) -> std::optional<int64_t> {
            if (n.args.empty()) return std::nullopt;
            DType t = ExprDType(n.args[0]);
            if (!IsInt(t)) return std::nullopt;
            std::optional<int64_t> a = FoldInt(n.args[0], lookup);
            if (!a) return std::nullopt;
            int64_t b = 0;
            if (n.args.size() > 1) {
              std::optional<int64_t> bv = FoldInt(n.args[1], lookup);
              if (!bv) return std::nullopt;
              b = *bv;
            }
            return EvalCall(n.op, *a, b, t);
          },
      },
      e.node);
}

Expr FoldConstants(const Expr& e) {
  return RewriteExpr(e, [](const Expr& n) -> std::optional<Expr> {
    if (Kind(n) == ExprKind::kIntImm) return std::nullopt;
    DType t = ExprDType(n);
    if (!IsInt(t) && t != DType::kBool) return std::nullopt;
    std::optional<int64_t> v = FoldInt(n);
    if (!v) return std::nullopt;
    return MakeInt(*v, t);
  });
}

// --- equality ---------------------------------------------------------------

void StripLocs(Module& m) {
  for (Function& f : m.functions) {
    f.loc.reset();
    ForEachStmt(f.body, [](Stmt& s) { s.loc.reset(); });
  }
}

bool StructurallyEqual(const Module& a, const Module& b, bool compare_locs) {
  if (compare_locs) return a == b;
  Module ca = a, cb = b;
  StripLocs(ca);
  StripLocs(cb);
  return ca == cb;
}

bool StructurallyEqual(const Function& a, const Function& b, bool compare_locs) {
  if (compare_locs) return a == b;
  Module ma{1, {a}}, mb{1, {b}};
  return StructurallyEqual(ma, mb, false);
}

// --- walking ----------------------------------------------------------------

namespace {

// Applies `fn` to each nested block of `s` (kernel/loop/parallel bodies, both
// if branches). Templated over constness so the two walkers share it.
template <typename StmtT, typename Fn>
void ForEachChildBlock(StmtT& s, Fn&& fn) {
  std::visit(
      [&](auto& n) {
        using N = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<N, Kernel> || std::is_same_v<N, For> || std::is_same_v<N, Parallel>) {
          fn(n.body);
        } else if constexpr (std::is_same_v<N, If>) {
          fn(n.then_body);
          fn(n.else_body);
        }
      },
      s.node);
}

template <typename StmtT, typename Fn>
void ForEachExprOfImpl(StmtT& s, Fn&& fn) {
  auto region = [&](auto& r) {
    for (auto& d : r.dims) {
      fn(d.start);
      if (d.extent) fn(*d.extent);
    }
  };
  std::visit(
      [&](auto& n) {
        using N = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<N, Kernel>) {
          for (auto& e : n.grid) fn(e);
          for (auto& e : n.threads) fn(e);
        } else if constexpr (std::is_same_v<N, Alloc>) {
          for (auto& e : n.shape) fn(e);
        } else if constexpr (std::is_same_v<N, VarDecl>) {
          if (n.init) fn(*n.init);
        } else if constexpr (std::is_same_v<N, Let> || std::is_same_v<N, Assign>) {
          fn(n.value);
        } else if constexpr (std::is_same_v<N, Store>) {
          for (auto& e : n.indices) fn(e);
          fn(n.value);
        } else if constexpr (std::is_same_v<N, For>) {
          fn(n.start);
          fn(n.stop);
          if (n.step) fn(*n.step);
        } else if constexpr (std::is_same_v<N, Parallel>) {
          for (auto& e : n.extents) fn(e);
        } else if constexpr (std::is_same_v<N, If>) {
          fn(n.cond);
        } else if constexpr (std::is_same_v<N, Copy> || std::is_same_v<N, AtomicAddTile> ||
                             std::is_same_v<N, Reduce> || std::is_same_v<N, Cumsum>) {
          region(n.src);
          region(n.dst);
        } else if constexpr (std::is_same_v<N, Fill> || std::is_same_v<N, AtomicAdd>) {
          region(n.dst);
          fn(n.value);
        } else if constexpr (std::is_same_v<N, Gemm>) {
          region(n.a);
          region(n.b);
          region(n.c);
        } else if constexpr (std::is_same_v<N, CallExtern>) {
          // An address argument is passed as its Load (the element named).
          for (auto& a : n.args) fn(a.value);
        }
        // Sync, Hint: no expressions.
      },
      s.node);
}

}  // namespace

void ForEachStmt(const Block& block, const std::function<void(const Stmt&)>& fn) {
  for (const Stmt& s : block) {
    fn(s);
    ForEachChildBlock(s, [&](const Block& b) { ForEachStmt(b, fn); });
  }
}

void ForEachStmt(Block& block, const std::function<void(Stmt&)>& fn) {
  for (Stmt& s : block) {
    fn(s);
    ForEachChildBlock(s, [&](Block& b) { ForEachStmt(b, fn); });
  }
}

void ForEachExprOf(const Stmt& s, const std::function<void(const Expr&)>& fn) { ForEachExprOfImpl(s, fn); }
void ForEachExprOf(Stmt& s, const std::function<void(Expr&)>& fn) { ForEachExprOfImpl(s, fn); }

void WalkExpr(const Expr& e, const std::function<void(const Expr&)>& fn) {
  fn(e);
  std::visit(Overloaded{
                 [](const IntImm&) {},
                 [](const FloatImm&) {},
                 [](const VarRef&) {},
                 [&](const Load& n) {
                   for (const Expr& i : n.indices) WalkExpr(i, fn);
                 },
                 [&](const Unary& n) { WalkExpr(*n.operand, fn); },
                 [&](const Binary& n) {
                   WalkExpr(*n.lhs, fn);
                   WalkExpr(*n.rhs, fn);
                 },
                 [&](const Select& n) {
                   WalkExpr(*n.cond, fn);
                   WalkExpr(*n.true_value, fn);
                   WalkExpr(*n.false_value, fn);
                 },
                 [&](const Cast& n) { WalkExpr(*n.value, fn); },
                 [&](const Call& n) {
                   for (const Expr& a : n.args) WalkExpr(a, fn);
                 },
             },
             e.node);
}

Expr RewriteExpr(const Expr& e, const std::function<std::optional<Expr>(const Expr&)>& fn) {
  Expr out = e;
  auto rw = [&](Expr& child) { child = RewriteExpr(child, fn); };
  std::visit(Overloaded{
                 [](IntImm&) {},
                 [](FloatImm&) {},
                 [](VarRef&) {},
                 [&](Load& n) {
                   for (Expr& i : n.indices) rw(i);
                 },
                 [&](Unary& n) { rw(*n.operand); },
                 [&](Binary& n) {
                   rw(*n.lhs);
                   rw(*n.rhs);
                 },
                 [&](Select& n) {
                   rw(*n.cond);
                   rw(*n.true_value);
                   rw(*n.false_value);
                 },
                 [&](Cast& n) { rw(*n.value); },
                 [&](Call& n) {
                   for (Expr& a : n.args) rw(a);
                 },
             },
             out.node);
  if (std::optional<Expr> replaced = fn(out)) return std::move(*replaced);
  return out;
}

// --- names -------------------------------------------------------------------

SymbolTable CollectSymbols(const Function& f) {
  SymbolTable table;
  auto add = [&](const std::string& name, SymbolInfo info) { table.emplace(name, std::move(info)); };
  for (const Param& p : f.params) {
    SymbolInfo info;
    info.kind = p.kind == Param::Kind::kTensor ? SymbolInfo::Kind::kTensorParam : SymbolInfo::Kind::kScalarParam;
    info.dtype = p.dtype;
    info.shape = p.shape;
    add(p.name, std::move(info));
  }
  for (const Symbol& s : f.symbols) {
    SymbolInfo info;
    info.kind = SymbolInfo::Kind::kDynamicSymbol;
    info.dtype = s.dtype;
    add(s.name, std::move(info));
  }
  ForEachStmt(f.body, [&](const Stmt& s) {
    SymbolInfo info;
    info.def = &s;
    if (const auto* k = As<Kernel>(s)) {
      info.kind = SymbolInfo::Kind::kBlockIndex;
      for (const std::string& name : k->block_vars) add(name, info);
    } else if (const auto* a = As<Alloc>(s)) {
      info.kind = SymbolInfo::Kind::kAlloc;
      info.dtype = a->dtype;
      info.scope = a->scope;
      info.shape = a->shape;
      add(a->name, std::move(info));
    } else if (const auto* v = As<VarDecl>(s)) {
      info.kind = SymbolInfo::Kind::kVar;
      info.dtype = v->dtype;
      add(v->name, std::move(info));
    } else if (const auto* l = As<Let>(s)) {
      info.kind = SymbolInfo::Kind::kLet;
      info.dtype = ExprDType(l->value);
      add(l->name, std::move(info));
    } else if (const auto* fo = As<For>(s)) {
      info.kind = SymbolInfo::Kind::kLoopVar;
      info.dtype = ExprDType(fo->start);
      add(fo->var, std::move(info));
    } else if (const auto* p = As<Parallel>(s)) {
      info.kind = SymbolInfo::Kind::kParallelVar;
      for (const std::string& name : p->vars) add(name, info);
    }
  });
  return table;
}

std::vector<Expr> RegionShape(const Region& r, const std::vector<Expr>& buffer_shape) {
  if (r.IsWholeBuffer()) return buffer_shape;
  std::vector<Expr> shape;
  shape.reserve(r.dims.size());
  for (const RegionDim& d : r.dims) shape.push_back(d.extent ? *d.extent : MakeInt(1));
  return shape;
}

std::optional<int64_t> NormalizeDim(int64_t dim, int64_t rank) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) return std::nullopt;
  return d;
}

}  // namespace tl::ir
