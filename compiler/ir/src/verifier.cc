// The Tile IR verifier: every rule of formats/tile_ir.md that the parser does
// not enforce by construction, and every rule for IR built by passes.
//
// It walks each function once, keeping a scope per block (names are visible
// from their definition to the end of the enclosing block), and collects all
// errors rather than stopping at the first. Each error reads
//   @FUNC: STMT_KIND at PY_FILE:PY_LINE: WHAT: expected X, found Y
// where the location is the statement's own, else the nearest enclosing one.
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "tilelang/ir/tile_ir.h"

namespace tl::ir {

namespace {

constexpr size_t kMaxErrors = 50;

bool IsIntOrBool(DType t) { return IsInt(t) || t == DType::kBool; }

// A name the text format can carry: [A-Za-z_][A-Za-z0-9_]*, and not one of
// the words that are always literals.
bool IsIdentifier(std::string_view name) {
  if (name.empty() || name == "true" || name == "false") return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}
bool IsNumeric(DType t) { return IsInt(t) || IsFloat(t); }

// A name visible at some point of the walk.
struct Def {
  SymbolInfo::Kind kind = SymbolInfo::Kind::kScalarParam;
  DType dtype = DType::kI32;
  MemScope scope = MemScope::kGlobal;  // buffers only
  std::vector<Expr> shape;             // buffers only
  bool IsBuffer() const { return kind == SymbolInfo::Kind::kTensorParam || kind == SymbolInfo::Kind::kAlloc; }
};

const char* DefKindName(SymbolInfo::Kind k) {
  switch (k) {
    case SymbolInfo::Kind::kTensorParam: return "tensor parameter";
    case SymbolInfo::Kind::kScalarParam: return "scalar parameter";
    case SymbolInfo::Kind::kDynamicSymbol: return "dynamic symbol";
    case SymbolInfo::Kind::kBlockIndex: return "block index";
    case SymbolInfo::Kind::kLoopVar: return "loop variable";
    case SymbolInfo::Kind::kParallelVar: return "parallel index";
    case SymbolInfo::Kind::kLet: return "let";
    case SymbolInfo::Kind::kVar: return "var";
    case SymbolInfo::Kind::kAlloc: return "allocation";
  }
  return "name";
}

// "[64, M]": constants folded, the rest printed.
std::string ShapeString(const std::vector<Expr>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    std::optional<int64_t> v = FoldInt(shape[i]);
    s += v ? std::to_string(*v) : Print(shape[i]);
  }
  return s + "]";
}

// Drops the dimensions whose extent is the constant 1 (copy's rule).
std::vector<Expr> DropUnitDims(const std::vector<Expr>& shape) {
  std::vector<Expr> out;
  for (const Expr& e : shape) {
    if (FoldInt(e) != 1) out.push_back(e);
  }
  return out;
}

// Two extents agree when both fold to the same constant or are the same
// expression (a dynamic symbol on both sides).
bool SameExtent(const Expr& a, const Expr& b) {
  std::optional<int64_t> x = FoldInt(a);
  std::optional<int64_t> y = FoldInt(b);
  if (x && y) return *x == *y;
  return a == b;
}

bool SameShape(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameExtent(a[i], b[i])) return false;
  }
  return true;
}

class FunctionVerifier {
 public:
  FunctionVerifier(const Function& f, std::vector<std::string>& errors) : f_(f), errors_(errors) {}

  void Run() {
    scopes_.emplace_back();
    VerifySignature();
    if (f_.body.empty()) FunctionError("expected at least one kernel statement in the body, found none");
    for (const Stmt& s : f_.body) {
      if (Kind(s) != StmtKind::kKernel) {
        StmtScope scope(*this, s);
        Error(std::string("expected only kernel statements at function top level, found ") +
              StmtKindName(Kind(s)));
        continue;
      }
      VerifyStmt(s);
    }
  }

 private:
  // --- diagnostics ---------------------------------------------------------------

  // Makes `s` the statement that errors are reported against, for its
  // lifetime.
  class StmtScope {
   public:
    StmtScope(FunctionVerifier& v, const Stmt& s) : v_(v), saved_(v.stmt_) {
      v_.stmt_ = &s;
      v_.locs_.push_back(s.loc);
    }
    ~StmtScope() {
      v_.stmt_ = saved_;
      v_.locs_.pop_back();
    }
    StmtScope(const StmtScope&) = delete;
    StmtScope& operator=(const StmtScope&) = delete;

   private:
    FunctionVerifier& v_;
    const Stmt* saved_;
  };

  void Emit(std::string message) {
    ++emitted_;
    if (errors_.size() < kMaxErrors) errors_.push_back(std::move(message));
  }

  void FunctionError(const std::string& message) {
    std::string loc = ToString(f_.loc);
    Emit("@" + f_.name + (loc.empty() ? "" : " at " + loc) + ": " + message);
  }

  void Error(const std::string& message) {
    std::string text = "@" + f_.name + ": " + (stmt_ ? StmtKindName(Kind(*stmt_)) : "function");
    std::optional<Loc> loc;
    for (auto it = locs_.rbegin(); it != locs_.rend() && !loc; ++it) loc = *it;
    if (!loc) loc = f_.loc;
    if (loc) text += " at " + ToString(loc);
    Emit(text + ": " + message);
  }

  // --- names -------------------------------------------------------------------

  void Define(const std::string& name, Def def) {
    if (!IsIdentifier(name)) Error("expected an identifier as name, found '" + name + "'");
    if (!defined_.insert(name).second) {
      Error("name '" + name + "' is defined twice; expected names unique within the function");
    }
    scopes_.back()[name] = std::move(def);
  }

  const Def* Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  // The definition of `name`, or nullptr after reporting why there is none.
  const Def* Resolve(const std::string& name) {
    const Def* d = Lookup(name);
    if (d) return d;
    if (defined_.count(name)) {
      Error("'" + name + "' is used outside the block that defines it (e.g. a buffer of another kernel)");
    } else {
      Error("undefined name '" + name + "'");
    }
    return nullptr;
  }

  const Def* ResolveBuffer(const std::string& name, const char* role) {
    const Def* d = Resolve(name);
    if (d && !d->IsBuffer()) {
      Error(std::string(role) + ": expected a buffer, found " + DefKindName(d->kind) + " '" + name + "'");
      return nullptr;
    }
    return d;
  }

  // --- signature -----------------------------------------------------------------

  void VerifySignature() {
    if (!IsIdentifier(f_.name)) FunctionError("expected an identifier as function name, found '" + f_.name + "'");
    std::set<std::string> used_symbols;
    for (const Symbol& s : f_.symbols) {
      if (!IsInt(s.dtype)) {
        FunctionError("dynamic symbol '" + s.name + "': expected an integer dtype, found " + DTypeName(s.dtype));
      }
    }
    for (const Param& p : f_.params) {
      if (p.kind == Param::Kind::kScalar) {
        if (!p.shape.empty()) FunctionError("scalar parameter '" + p.name + "': expected no shape");
        continue;
      }
      if (p.shape.empty()) {
        FunctionError("tensor parameter '" + p.name + "': expected at least one dimension, found none");
      }
      for (size_t i = 0; i < p.shape.size(); ++i) {
        const Expr& d = p.shape[i];
        std::string where = "tensor parameter '" + p.name + "' dim " + std::to_string(i);
        if (const auto* imm = As<IntImm>(d)) {
          if (!IsInt(imm->dtype) || imm->value <= 0) {
            FunctionError(where + ": expected a positive integer or a dynamic symbol, found " + Print(d));
          }
        } else if (const auto* v = As<VarRef>(d)) {
          const Symbol* sym = nullptr;
          for (const Symbol& s : f_.symbols) {
            if (s.name == v->name) sym = &s;
          }
          if (!sym) {
            FunctionError(where + ": expected a symbol declared in dynamic(...), found '" + v->name + "'");
          } else {
            used_symbols.insert(v->name);
            if (sym->dtype != v->dtype) {
              FunctionError(where + ": expected symbol '" + v->name + "' of dtype " + DTypeName(sym->dtype) +
                            ", found " + DTypeName(v->dtype));
            }
          }
        } else {
          FunctionError(where + ": expected a positive integer or a dynamic symbol, found " + Print(d));
        }
      }
    }
    for (const Param& p : f_.params) {
      Def d;
      d.kind = p.kind == Param::Kind::kTensor ? SymbolInfo::Kind::kTensorParam : SymbolInfo::Kind::kScalarParam;
      d.dtype = p.dtype;
      d.shape = p.shape;
      DefineSignatureName(p.name, std::move(d));
    }
    for (const Symbol& s : f_.symbols) {
      Def d;
      d.kind = SymbolInfo::Kind::kDynamicSymbol;
      d.dtype = s.dtype;
      DefineSignatureName(s.name, std::move(d));
      if (!used_symbols.count(s.name)) {
        FunctionError("dynamic symbol '" + s.name +
                      "': expected it in some tensor parameter's shape (it is bound from one at launch), found "
                      "it in none");
      }
    }
  }

  void DefineSignatureName(const std::string& name, Def def) {
    if (!IsIdentifier(name)) FunctionError("expected an identifier as name, found '" + name + "'");
    if (!defined_.insert(name).second) {
      FunctionError("name '" + name + "' is declared twice in the signature");
    }
    scopes_.back()[name] = std::move(def);
  }

  // --- expressions -----------------------------------------------------------------

  // Checks `e` and returns its dtype (ExprDType's answer, also when invalid).
  DType CheckExpr(const Expr& e) {
    std::visit([&](const auto& n) { CheckNode(n); }, e.node);
    return ExprDType(e);
  }

  void CheckNode(const IntImm& n) {
    if (IsFloat(n.dtype)) Error("integer literal: expected an integer or bool dtype, found " +
                                std::string(DTypeName(n.dtype)));
  }
  void CheckNode(const FloatImm& n) {
    if (!IsFloat(n.dtype)) {
      Error("float literal: expected a float dtype, found " + std::string(DTypeName(n.dtype)));
    } else if (RoundToDType(n.value, n.dtype) != n.value && !std::isnan(n.value)) {
      Error("float literal: expected a value of " + std::string(DTypeName(n.dtype)) + ", found " +
            Print(MakeFloat(n.value, DType::kF64)) + ", which " + DTypeName(n.dtype) + " cannot hold");
    }
  }
  void CheckNode(const VarRef& n) {
    const Def* d = Resolve(n.name);
    if (!d) return;
    if (d->IsBuffer()) {
      Error("expected a scalar value, found buffer '" + n.name + "' used as a value");
    } else if (d->dtype != n.dtype) {
      Error("reference to '" + n.name + "': expected dtype " + DTypeName(d->dtype) + " (its definition), found " +
            DTypeName(n.dtype));
    }
  }
  void CheckNode(const Load& n) {
    const Def* d = ResolveBuffer(n.buffer, "load");
    CheckIndices(n.buffer, d, n.indices);
    if (d && d->dtype != n.dtype) {
      Error("load from '" + n.buffer + "': expected dtype " + DTypeName(d->dtype) + ", found " + DTypeName(n.dtype));
    }
  }
  void CheckNode(const Unary& n) {
    DType t = CheckExpr(*n.operand);
    bool ok = n.op == UnaryOp::kNeg ? IsNumeric(t) : n.op == UnaryOp::kNot ? t == DType::kBool : IsInt(t);
    if (!ok) {
      const char* want = n.op == UnaryOp::kNeg ? "a numeric" : n.op == UnaryOp::kNot ? "a bool" : "an integer";
      Error(std::string("unary '") + UnaryOpSpelling(n.op) + "': expected " + want + " operand, found " +
            DTypeName(t));
    }
  }
  void CheckNode(const Binary& n) {
    size_t before = emitted_;
    DType a = CheckExpr(*n.lhs);
    DType b = CheckExpr(*n.rhs);
    if (emitted_ != before) return;
    std::string op = std::string("binary '") + BinaryOpSpelling(n.op) + "'";
    if (a != b) {
      Error(op + ": expected operands of equal dtype, found " + DTypeName(a) + " and " + DTypeName(b) + " in " +
            Print(Expr{n}));
      return;
    }
    bool ok = true;
    const char* want = "";
    switch (n.op) {
      case BinaryOp::kAdd:
      case BinaryOp::kSub:
      case BinaryOp::kMul:
      case BinaryOp::kDiv:
      case BinaryOp::kMod:
      case BinaryOp::kLt:
      case BinaryOp::kLe:
      case BinaryOp::kGt:
      case BinaryOp::kGe: ok = IsNumeric(a), want = "numeric"; break;
      case BinaryOp::kEq:
      case BinaryOp::kNe: break;
      case BinaryOp::kShl:
      case BinaryOp::kShr: ok = IsInt(a), want = "integer"; break;
      case BinaryOp::kBitAnd:
      case BinaryOp::kBitXor:
      case BinaryOp::kBitOr: ok = IsIntOrBool(a), want = "integer or bool"; break;
      case BinaryOp::kAnd:
      case BinaryOp::kOr: ok = a == DType::kBool, want = "bool"; break;
    }
    if (!ok) Error(op + ": expected " + want + " operands, found " + DTypeName(a));
  }
  void CheckNode(const Select& n) {
    CheckCondition(*n.cond, "select condition");
    DType a = CheckExpr(*n.true_value);
    DType b = CheckExpr(*n.false_value);
    if (a != b) {
      Error(std::string("select: expected both values of one dtype, found ") + DTypeName(a) + " and " + DTypeName(b));
    }
  }
  void CheckNode(const Cast& n) { CheckExpr(*n.value); }
  void CheckNode(const Call& n) {
    std::string fn = CallOpName(n.op);
    if (static_cast<int>(n.args.size()) != CallArity(n.op)) {
      Error(fn + ": expected " + std::to_string(CallArity(n.op)) + " argument(s), found " +
            std::to_string(n.args.size()));
      return;
    }
    std::vector<DType> ts;
    for (const Expr& a : n.args) ts.push_back(CheckExpr(a));
    if (ts.size() == 2 && ts[0] != ts[1]) {
      Error(fn + ": expected arguments of equal dtype, found " + DTypeName(ts[0]) + " and " + DTypeName(ts[1]));
      return;
    }
    bool ok = true;
    const char* want = "";
    if (n.op == CallOp::kAbs || n.op == CallOp::kMax || n.op == CallOp::kMin) {
      ok = IsNumeric(ts[0]), want = "numeric";
    } else if (n.op == CallOp::kTruncDiv || n.op == CallOp::kTruncMod || n.op == CallOp::kCeilDiv) {
      ok = IsInt(ts[0]), want = "integer";
    } else {
      ok = IsFloat(ts[0]), want = "float";
    }
    if (!ok) Error(fn + ": expected " + want + " argument(s), found " + DTypeName(ts[0]));
  }

  void CheckCondition(const Expr& e, const char* what) {
    DType t = CheckExpr(e);
    if (t != DType::kBool) Error(std::string(what) + ": expected bool, found " + DTypeName(t) + " in " + Print(e));
  }

  void CheckIntExpr(const Expr& e, const std::string& what) {
    DType t = CheckExpr(e);
    if (!IsInt(t)) Error(what + ": expected an integer, found " + DTypeName(t) + " in " + Print(e));
  }

  // A positive integer constant (allocation dims, extents, threads).
  void CheckPositiveConstant(const Expr& e, const std::string& what) {
    DType t = CheckExpr(e);
    std::optional<int64_t> v = FoldInt(e);
    if (!IsInt(t) || !v || *v <= 0) Error(what + ": expected a positive integer constant, found " + Print(e));
  }

  void CheckIndices(const std::string& buffer, const Def* d, const std::vector<Expr>& indices) {
    if (d && indices.size() != d->shape.size()) {
      Error("'" + buffer + "' has rank " + std::to_string(d->shape.size()) + ": expected " +
            std::to_string(d->shape.size()) + " indices, found " + std::to_string(indices.size()));
    }
    for (const Expr& i : indices) CheckIntExpr(i, "index into '" + buffer + "'");
  }

  // --- regions ----------------------------------------------------------------------

  struct RegionInfo {
    const Def* def = nullptr;   // null when the buffer does not resolve
    std::vector<Expr> shape;    // the region's extents
  };

  // Checks a region; `def` is null in the result when the region has errors,
  // so that shape checks do not report their consequences.
  RegionInfo CheckRegion(const Region& r, const char* role) {
    size_t before = emitted_;
    RegionInfo info;
    info.def = ResolveBuffer(r.buffer, role);
    if (!info.def) return info;
    const std::vector<Expr>& bshape = info.def->shape;
    if (!r.IsWholeBuffer() && r.dims.size() != bshape.size()) {
      Error(std::string(role) + " region of '" + r.buffer + "': expected " + std::to_string(bshape.size()) +
            " dims (the buffer's rank), found " + std::to_string(r.dims.size()));
      info.def = nullptr;
      return info;
    }
    for (size_t i = 0; i < r.dims.size(); ++i) {
      const RegionDim& d = r.dims[i];
      std::string where = std::string(role) + " region of '" + r.buffer + "' dim " + std::to_string(i);
      CheckIntExpr(d.start, where + " start");
      if (d.extent) CheckPositiveConstant(*d.extent, where + " extent");
      // On-chip buffers have constant shapes: a constant window must fit.
      std::optional<int64_t> start = FoldInt(d.start);
      std::optional<int64_t> extent = d.extent ? FoldInt(*d.extent) : std::optional<int64_t>(1);
      std::optional<int64_t> size = FoldInt(bshape[i]);
      if (info.def->scope != MemScope::kGlobal && start && extent && size &&
          (*start < 0 || *start + *extent > *size)) {
        Error(where + ": expected a window inside [0, " + std::to_string(*size) + "), found [" +
              std::to_string(*start) + ", " + std::to_string(*start + *extent) + ")");
      }
    }
    info.shape = RegionShape(r, bshape);
    if (emitted_ != before) info.def = nullptr;
    return info;
  }

  std::string Describe(const Region& r, const RegionInfo& info) {
    return "'" + Print(r) + "' of shape " + ShapeString(info.shape);
  }

  // --- statements ----------------------------------------------------------------------

  void VerifyBlock(const Block& b) {
    scopes_.emplace_back();
    for (const Stmt& s : b) VerifyStmt(s);
    scopes_.pop_back();
  }

  void VerifyStmt(const Stmt& s) {
    StmtScope scope(*this, s);
    std::visit([&](const auto& n) { VerifyNode(n); }, s.node);
  }

  void VerifyNode(const Kernel& k) {
    if (kernel_depth_ > 0 || stmt_depth_ > 0) {
      Error("expected kernel at function top level, found it nested");
    }
    if (k.grid.empty() || k.grid.size() > 3) {
      Error("expected 1 to 3 grid extents, found " + std::to_string(k.grid.size()));
    }
    for (const Expr& g : k.grid) {
      CheckIntExpr(g, "grid extent");
      // The host evaluates grid extents at launch, from symbols and scalars.
      bool loads = false;
      WalkExpr(g, [&](const Expr& e) { loads = loads || Kind(e) == ExprKind::kLoad; });
      if (loads) Error("grid extent: expected an expression over symbols and scalar parameters, found a load in " + Print(g));
    }
    if (k.block_vars.size() != k.grid.size()) {
      Error("expected one block index name per grid extent (" + std::to_string(k.grid.size()) + "), found " +
            std::to_string(k.block_vars.size()));
    }
    if (k.threads.empty() || k.threads.size() > 3) {
      Error("expected 1 to 3 thread extents, found " + std::to_string(k.threads.size()));
    }
    for (const Expr& t : k.threads) CheckPositiveConstant(t, "thread extent");
    scopes_.emplace_back();
    for (const std::string& v : k.block_vars) {
      Def d;
      d.kind = SymbolInfo::Kind::kBlockIndex;
      d.dtype = DType::kI32;
      Define(v, std::move(d));
    }
    ++kernel_depth_;
    VerifyBody(k.body);
    --kernel_depth_;
    scopes_.pop_back();
  }

  // A nested body: the statements inside a kernel, loop or if.
  void VerifyBody(const Block& b) {
    ++stmt_depth_;
    VerifyBlock(b);
    --stmt_depth_;
  }

  void RequireInKernel() {
    if (kernel_depth_ == 0) Error("expected inside a kernel, found outside any kernel");
  }

  void VerifyNode(const Alloc& a) {
    RequireInKernel();
    if (a.scope == MemScope::kGlobal) Error("alloc '" + a.name + "': expected shared, fragment or local, found global");
    if (a.shape.empty()) Error("alloc '" + a.name + "': expected at least one dimension, found none");
    for (size_t i = 0; i < a.shape.size(); ++i) {
      CheckPositiveConstant(a.shape[i], "alloc '" + a.name + "' dim " + std::to_string(i));
    }
    Def d;
    d.kind = SymbolInfo::Kind::kAlloc;
    d.dtype = a.dtype;
    d.scope = a.scope;
    d.shape = a.shape;
    Define(a.name, std::move(d));
  }

  void VerifyNode(const VarDecl& v) {
    RequireInKernel();
    if (v.init) {
      DType t = CheckExpr(*v.init);
      if (t != v.dtype) {
        Error("var '" + v.name + "' initializer: expected " + DTypeName(v.dtype) + ", found " + DTypeName(t));
      }
    }
    Def d;
    d.kind = SymbolInfo::Kind::kVar;
    d.dtype = v.dtype;
    Define(v.name, std::move(d));
  }

  void VerifyNode(const Let& l) {
    Def d;
    d.kind = SymbolInfo::Kind::kLet;
    d.dtype = CheckExpr(l.value);
    Define(l.name, std::move(d));
  }

  void VerifyNode(const Store& st) {
    const Def* d = ResolveBuffer(st.buffer, "store");
    CheckIndices(st.buffer, d, st.indices);
    DType t = CheckExpr(st.value);
    if (d && t != d->dtype) {
      Error("store to '" + st.buffer + "': expected a value of dtype " + DTypeName(d->dtype) + ", found " +
            DTypeName(t));
    }
  }

  void VerifyNode(const Assign& a) {
    DType t = CheckExpr(a.value);
    const Def* d = Resolve(a.name);
    if (!d) return;
    if (d->kind != SymbolInfo::Kind::kVar) {
      Error("assignment to '" + a.name + "': expected a var, found " + DefKindName(d->kind));
    } else if (t != d->dtype) {
      Error("assignment to '" + a.name + "': expected a value of dtype " + DTypeName(d->dtype) + ", found " +
            DTypeName(t));
    }
  }

  void VerifyNode(const For& f) {
    RequireInKernel();
    DType t = CheckExpr(f.start);
    if (!IsInt(t)) Error("loop '" + f.var + "' start: expected an integer, found " + DTypeName(t));
    auto same = [&](const Expr& e, const char* what) {
      DType u = CheckExpr(e);
      if (u != t) {
        Error("loop '" + f.var + "' " + what + ": expected " + DTypeName(t) + " (the start's dtype), found " +
              DTypeName(u));
      }
    };
    same(f.stop, "stop");
    if (f.step) {
      same(*f.step, "step");
      if (FoldInt(*f.step) == 0) Error("loop '" + f.var + "' step: expected a nonzero step, found 0");
      if (f.kind == LoopKind::kPipelined) Error("pipelined loop '" + f.var + "': expected no step, found one");
    }
    if (f.stages < 0) Error("loop '" + f.var + "': expected stages >= 0, found " + std::to_string(f.stages));
    scopes_.emplace_back();
    Def d;
    d.kind = SymbolInfo::Kind::kLoopVar;
    d.dtype = t;
    Define(f.var, std::move(d));
    VerifyBody(f.body);
    scopes_.pop_back();
  }

  void VerifyNode(const Parallel& p) {
    RequireInKernel();
    if (p.vars.size() != p.extents.size() || p.vars.empty()) {
      Error("expected one extent per index, found " + std::to_string(p.vars.size()) + " indices and " +
            std::to_string(p.extents.size()) + " extents");
    }
    for (const Expr& e : p.extents) CheckPositiveConstant(e, "parallel extent");
    CheckParallelBody(p.body);
    scopes_.emplace_back();
    for (const std::string& v : p.vars) {
      Def d;
      d.kind = SymbolInfo::Kind::kParallelVar;
      d.dtype = DType::kI32;
      Define(v, std::move(d));
    }
    VerifyBody(p.body);
    scopes_.pop_back();
  }

  // Iterations of a parallel loop are independent: its body may only hold
  // stores, element atomic_adds, lets, ifs and serial loops (recursively).
  void CheckParallelBody(const Block& b) {
    for (const Stmt& s : b) {
      StmtKind k = Kind(s);
      // Element atomics are safe across iterations by definition.
      if (k == StmtKind::kStore || k == StmtKind::kLet || k == StmtKind::kAtomicAdd || k == StmtKind::kCallExtern) continue;
      if (const auto* i = As<If>(s)) {
        CheckParallelBody(i->then_body);
        CheckParallelBody(i->else_body);
        continue;
      }
      const auto* f = As<For>(s);
      if (f && f->kind != LoopKind::kPipelined) {
        CheckParallelBody(f->body);
        continue;
      }
      std::string found = StmtKindName(k);
      if (f) found = "pipelined for";
      StmtScope scope(*this, s);
      Error("inside parallel: expected only stores, atomic_adds, lets, ifs and serial loops, found " + found);
    }
  }

  void VerifyNode(const If& i) {
    CheckCondition(i.cond, "if condition");
    VerifyBody(i.then_body);
    VerifyBody(i.else_body);
  }

  void VerifyNode(const Copy& c) {
    RequireInKernel();
    RegionInfo src = CheckRegion(c.src, "copy source");
    RegionInfo dst = CheckRegion(c.dst, "copy destination");
    if (!src.def || !dst.def) return;
    std::vector<Expr> a = DropUnitDims(src.shape);
    std::vector<Expr> b = DropUnitDims(dst.shape);
    if (!SameShape(a, b)) {
      Error("expected equal shapes after dropping extent-1 dims, found source " + Describe(c.src, src) + " -> " +
            ShapeString(a) + " and destination " + Describe(c.dst, dst) + " -> " + ShapeString(b));
    }
  }

  void VerifyNode(const Fill& f) {
    RequireInKernel();
    RegionInfo dst = CheckRegion(f.dst, "fill destination");
    DType t = CheckExpr(f.value);
    if (dst.def && t != dst.def->dtype) {
      Error("fill '" + f.dst.buffer + "': expected a value of dtype " + DTypeName(dst.def->dtype) + ", found " +
            DTypeName(t));
    }
  }

  // The 2-D shape of a gemm operand: leading extent-1 dims are dropped (a
  // stage of a multi-buffered tile); anything else must be rank 2.
  std::optional<std::vector<Expr>> Matrix(const Region& r, const RegionInfo& info, const char* role) {
    std::vector<Expr> shape = info.shape;
    while (shape.size() > 2 && FoldInt(shape.front()) == 1) shape.erase(shape.begin());
    if (shape.size() != 2) {
      Error(std::string("gemm ") + role + ": expected a 2-D region, found " + Describe(r, info));
      return std::nullopt;
    }
    return shape;
  }

  void VerifyNode(const Gemm& g) {
    RequireInKernel();
    RegionInfo a = CheckRegion(g.a, "gemm A");
    RegionInfo b = CheckRegion(g.b, "gemm B");
    RegionInfo c = CheckRegion(g.c, "gemm C");
    auto operand_scope = [&](const Region& r, const RegionInfo& info, const char* role) {
      if (info.def && info.def->scope != MemScope::kShared && info.def->scope != MemScope::kFragment) {
        Error(std::string("gemm ") + role + " '" + r.buffer + "': expected shared or fragment, found " +
              MemScopeName(info.def->scope));
      }
    };
    operand_scope(g.a, a, "A");
    operand_scope(g.b, b, "B");
    if (c.def && c.def->scope != MemScope::kFragment) {
      Error("gemm C '" + g.c.buffer + "': expected fragment, found " + MemScopeName(c.def->scope));
    }
    if (g.k_pack < 1) Error("gemm: expected k_pack >= 1, found " + std::to_string(g.k_pack));
    if (g.wg_wait < -1 || g.wg_wait > 7) {
      Error("gemm: expected wg_wait -1 (leave the wgmma group in flight) or 0..7, found " + std::to_string(g.wg_wait));
    }
    if (!a.def || !b.def || !c.def) return;
    std::optional<std::vector<Expr>> ma = Matrix(g.a, a, "A");
    std::optional<std::vector<Expr>> mb = Matrix(g.b, b, "B");
    std::optional<std::vector<Expr>> mc = Matrix(g.c, c, "C");
    if (!ma || !mb || !mc) return;
    const Expr& m = g.trans_a ? (*ma)[1] : (*ma)[0];
    const Expr& ka = g.trans_a ? (*ma)[0] : (*ma)[1];
    const Expr& kb = g.trans_b ? (*mb)[1] : (*mb)[0];
    const Expr& n = g.trans_b ? (*mb)[0] : (*mb)[1];
    std::string fa = std::string("A ") + ShapeString(*ma) + (g.trans_a ? " with trans_a" : "");
    std::string fb = std::string("B ") + ShapeString(*mb) + (g.trans_b ? " with trans_b" : "");
    if (!SameExtent(ka, kb)) {
      Error("expected equal K from A and B, found K = " + ShapeString({ka}) + " from " + fa + " and K = " +
            ShapeString({kb}) + " from " + fb);
      return;
    }
    std::vector<Expr> want = {m, n};
    if (!SameShape(*mc, want)) {
      Error("expected C of shape " + ShapeString(want) + " ([M, N] from " + fa + " and " + fb + "), found C " +
            ShapeString(*mc));
    }
  }

  void RequireOnChip(const Region& r, const RegionInfo& info, const std::string& role) {
    if (info.def && info.def->scope == MemScope::kGlobal) {
      Error(role + " '" + r.buffer + "': expected shared, fragment or local, found global tensor");
    }
  }

  void VerifyNode(const Reduce& r) {
    RequireInKernel();
    RegionInfo src = CheckRegion(r.src, "reduce source");
    RegionInfo dst = CheckRegion(r.dst, "reduce destination");
    RequireOnChip(r.src, src, "reduce source");
    RequireOnChip(r.dst, dst, "reduce destination");
    if (!src.def || !dst.def) return;
    auto rank = static_cast<int64_t>(src.shape.size());
    std::optional<int64_t> dim = NormalizeDim(r.dim, rank);
    if (!dim) {
      Error("expected dim in [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] for source " +
            Describe(r.src, src) + ", found " + std::to_string(r.dim));
      return;
    }
    std::vector<Expr> removed = src.shape;
    removed.erase(removed.begin() + *dim);
    std::vector<Expr> kept = src.shape;
    kept[static_cast<size_t>(*dim)] = MakeInt(1);
    // A rank-1 source reduces to a scalar, held in a one-element buffer.
    if (removed.empty()) removed.push_back(MakeInt(1));
    if (!SameShape(dst.shape, removed) && !SameShape(dst.shape, kept)) {
      Error("expected destination shape " + ShapeString(removed) + " or " + ShapeString(kept) + " (source " +
            ShapeString(src.shape) + " reduced along dim " + std::to_string(r.dim) + "), found " +
            Describe(r.dst, dst));
    }
  }

  void VerifyNode(const Cumsum& c) {
    RequireInKernel();
    RegionInfo src = CheckRegion(c.src, "cumsum source");
    RegionInfo dst = CheckRegion(c.dst, "cumsum destination");
    RequireOnChip(c.src, src, "cumsum source");
    RequireOnChip(c.dst, dst, "cumsum destination");
    if (!src.def || !dst.def) return;
    auto rank = static_cast<int64_t>(src.shape.size());
    if (!NormalizeDim(c.dim, rank)) {
      Error("expected dim in [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] for source " +
            Describe(c.src, src) + ", found " + std::to_string(c.dim));
    }
    if (!SameShape(src.shape, dst.shape)) {
      Error("expected destination of the source's shape " + ShapeString(src.shape) + ", found " +
            Describe(c.dst, dst));
    }
  }

  void RequireAtomicTarget(const Region& r, const RegionInfo& info) {
    if (info.def && info.def->scope != MemScope::kGlobal && info.def->scope != MemScope::kShared) {
      Error("destination '" + r.buffer + "': expected a global tensor or shared buffer, found " +
            MemScopeName(info.def->scope) + " (per-thread storage needs no atomics)");
    }
  }

  void VerifyNode(const AtomicAdd& a) {
    RequireInKernel();
    RegionInfo dst = CheckRegion(a.dst, "atomic_add destination");
    RequireAtomicTarget(a.dst, dst);
    DType t = CheckExpr(a.value);
    if (!dst.def) return;
    if (!DropUnitDims(dst.shape).empty()) {
      Error("scalar form: expected a single element (every extent 1), found " + Describe(a.dst, dst));
    }
    if (t != dst.def->dtype) {
      Error("expected a value of dtype " + std::string(DTypeName(dst.def->dtype)) + " (the destination's), found " +
            DTypeName(t));
    }
  }

  void VerifyNode(const AtomicAddTile& a) {
    RequireInKernel();
    RegionInfo src = CheckRegion(a.src, "atomic_add source");
    RegionInfo dst = CheckRegion(a.dst, "atomic_add destination");
    RequireAtomicTarget(a.dst, dst);
    if (!src.def || !dst.def) return;
    std::vector<Expr> x = DropUnitDims(src.shape);
    std::vector<Expr> y = DropUnitDims(dst.shape);
    if (!SameShape(x, y)) {
      Error("expected equal shapes after dropping extent-1 dims, found source " + Describe(a.src, src) +
            " and destination " + Describe(a.dst, dst));
    }
  }

  void VerifyNode(const Sync&) { RequireInKernel(); }
  // `hint wait_wgmma N` (T.wait_wgmma): wgmma.wait_group N, N in 0..7.
  void VerifyNode(const Hint& h) {
    if (h.name != "wait_wgmma") return;
    RequireInKernel();
    if (h.args.size() != 1 || h.args[0].kind != HintArg::Kind::kInt || h.args[0].int_value < 0 || h.args[0].int_value > 7) {
      Error("hint wait_wgmma: expected one integer 0..7 (the wgmma groups left in flight), found " +
            std::to_string(h.args.size()) + " argument(s)" +
            (h.args.size() == 1 && h.args[0].kind == HintArg::Kind::kInt ? " = " + std::to_string(h.args[0].int_value) : ""));
    }
  }

  // The callee must be defined by the function's imported source (a whole
  // identifier occurrence: the source is opaque C++, not parsed here);
  // address arguments name elements of on-chip buffers (shared, fragment,
  // local).
  void VerifyNode(const CallExtern& c) {
    RequireInKernel();
    if (!IsIdentifier(c.name)) Error("call_extern: expected an identifier as function name, found '" + c.name + "'");
    if (f_.sources.empty()) {
      Error("call_extern " + c.name + ": expected source imported with T.import_source defining '" + c.name +
            "', found no imported source");
    } else if (!DefinedInSources(c.name)) {
      Error("call_extern " + c.name + ": expected a function named '" + c.name +
            "' in the imported source (T.import_source), found no such name in " + std::to_string(f_.sources.size()) +
            " imported text(s)");
    }
    for (size_t i = 0; i < c.args.size(); ++i) {
      const ExternArg& a = c.args[i];
      if (!a.address) {
        CheckExpr(a.value);
        continue;
      }
      const auto* l = As<Load>(a.value);
      if (!l) {
        Error("call_extern " + c.name + " argument " + std::to_string(i) + ": expected &BUFFER[...], found " +
              ExprKindName(Kind(a.value)));
        continue;
      }
      // Any buffer: shared, fragment, local, or a tensor parameter (global memory: a decode kernel's
      // imported source loads its weights straight into registers, kernels/w4a16_m16.py).
      const Def* d = ResolveBuffer(l->buffer, "call_extern address");
      CheckIndices(l->buffer, d, l->indices);
    }
  }

  bool DefinedInSources(const std::string& name) const {
    auto ident = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
    for (const std::string& src : f_.sources) {
      for (size_t at = src.find(name); at != std::string::npos; at = src.find(name, at + 1)) {
        const bool start = at == 0 || !ident(src[at - 1]);
        const bool end = at + name.size() >= src.size() || !ident(src[at + name.size()]);
        if (start && end) return true;
      }
    }
    return false;
  }

  const Function& f_;
  std::vector<std::string>& errors_;
  std::vector<std::map<std::string, Def, std::less<>>> scopes_;
  std::set<std::string, std::less<>> defined_;  // every name defined so far
  std::vector<std::optional<Loc>> locs_;        // enclosing statements' locs
  const Stmt* stmt_ = nullptr;                  // statement being checked
  int kernel_depth_ = 0;
  int stmt_depth_ = 0;
  // Errors reported so far; a check compares it before and after checking
  // operands to avoid piling consequences onto a root cause.
  size_t emitted_ = 0;
};

Status ErrorsToStatus(const std::vector<std::string>& errors) {
  if (errors.empty()) return Status::Ok();
  std::string message;
  for (const std::string& e : errors) {
    if (!message.empty()) message += '\n';
    message += e;
  }
  if (errors.size() >= kMaxErrors) message += "\n(further errors not shown)";
  return Status(StatusCode::kInvalidArgument, message);
}

}  // namespace

Status Verify(const Function& f) {
  std::vector<std::string> errors;
  FunctionVerifier(f, errors).Run();
  return ErrorsToStatus(errors);
}

Status Verify(const Module& m) {
  std::vector<std::string> errors;
  if (m.version != 1) {
    errors.push_back("module: expected Tile IR version 1, found " + std::to_string(m.version));
  }
  if (m.functions.empty()) errors.push_back("module: expected at least one function, found none");
  std::set<std::string> names;
  for (const Function& f : m.functions) {
    if (!names.insert(f.name).second) {
      errors.push_back("@" + f.name + ": expected unique function names, found '" + f.name + "' twice");
    }
    FunctionVerifier(f, errors).Run();
  }
  return ErrorsToStatus(errors);
}

}  // namespace tl::ir
