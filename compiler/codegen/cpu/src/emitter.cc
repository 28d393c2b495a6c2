// The C++ emitter: one block function per kernel statement.
//
// Generated names start with `tl_`; IR names that would collide with them or
// with C++ keywords get a `u_` prefix (Id()), so user code can never shadow
// generated loop counters.
#include "emitter.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "tilelang/codegen/cpu/cpu_codegen.h"

namespace tl::codegen::cpu {
namespace {

using ir::DType;

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// "start + i", or just "i" for a zero start (keeps generated indices readable).
std::string Plus(const std::string& start, const std::string& i) { return start == "0" ? i : start + " + " + i; }

// Host-side rounding of a literal to f16/bf16 (round to nearest even), so a
// `0.1:f16` literal has the value an f16 store of it would have.
float RoundToHalf(double v, DType t) {
  float f = static_cast<float>(v);
  if (std::isnan(f) || std::isinf(f)) return f;
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (t == DType::kBF16) {
    x = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&f, &x, 4);
    return f;
  }
  // f16: quantize to the f16 grid via frexp/ldexp (exact in double).
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return std::signbit(f) ? -INFINITY : INFINITY;
  int e;
  std::frexp(a, &e);                  // a = m * 2^e, m in [0.5, 1)
  const int ulp_exp = std::max(e - 11, -24);  // 11 significant bits; subnormal ulp 2^-24
  const double q = std::nearbyint(std::ldexp(a, -ulp_exp));
  const double r = std::ldexp(q, ulp_exp);
  return static_cast<float>(std::signbit(f) ? -r : r);
}

std::string FloatLiteral(double v, DType t) {
  const bool single = t != DType::kF64;
  if (std::isnan(v)) return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(v)) {
    const char* inf = single ? "__builtin_inff()" : "__builtin_inf()";
    return v < 0 ? std::string("(-") + inf + ")" : std::string(inf);
  }
  double value = v;
  if (t == DType::kF32) value = static_cast<float>(v);
  if (IsHalf(t)) value = RoundToHalf(v, t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a%s", value, single ? "f" : "");
  return value < 0 || std::signbit(value) ? "(" + std::string(buf) + ")" : buf;
}

std::string IntLiteral(int64_t v, DType t) {
  char buf[64];
  switch (t) {
    case DType::kBool: return v ? "true" : "false";
    case DType::kI32:
      if (v == INT32_MIN) return "(-2147483647 - 1)";
      std::snprintf(buf, sizeof buf, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
      return buf;
    case DType::kU64:
      std::snprintf(buf, sizeof buf, "((uint64_t)%" PRIu64 "ULL)", static_cast<uint64_t>(v));
      return buf;
    default:
      if (v == INT64_MIN) return "((int64_t)(-9223372036854775807LL - 1))";
      std::snprintf(buf, sizeof buf, "((%s)%" PRId64 "LL)", ValueType(t), v);
      return buf;
  }
}

const std::set<std::string>& CppKeywords() {
  static const std::set<std::string> k = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
      "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
      "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default",
      "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
      "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
      "wchar_t", "while", "xor", "xor_eq", "main", "restrict",
      // libm / libc names the generated code calls; a user `exp` must not shadow expf's friends.
      "exp", "log", "sqrt", "pow", "floor", "ceil", "round", "sin", "cos", "tanh", "fabs", "memcpy", "memset",
      "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
      "INFINITY", "NAN"};
  return k;
}

}  // namespace

const char* ValueType(DType t) {
  switch (t) {
    case DType::kBool: return "bool";
    case DType::kI8: return "int8_t";
    case DType::kI16: return "int16_t";
    case DType::kI32: return "int32_t";
    case DType::kI64: return "int64_t";
    case DType::kU8: return "uint8_t";
    case DType::kU16: return "uint16_t";
    case DType::kU32: return "uint32_t";
    case DType::kU64: return "uint64_t";
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32: return "float";
    case DType::kF64: return "double";
  }
  return "void";
}

const char* StorageType(DType t) {
  if (IsHalf(t)) return "uint16_t";
  if (t == DType::kBool) return "uint8_t";
  return ValueType(t);
}

int64_t StorageBytes(DType t) {
  const int bits = ir::BitWidth(t);
  return bits <= 8 ? 1 : bits / 8;
}

// The prelude's microkernel shapes (TL_MR x TL_NR) of every ISA level: v2,
// v3, v4. Scratch is sized for the largest; the generated source
// static_asserts each size against the prelude's macros, so a prelude change
// that outgrows this table fails to compile instead of overrunning scratch.
constexpr int64_t kMicrokernelShapes[3][2] = {{4, 8}, {6, 16}, {8, 32}};

int64_t GemmPackFloats(int64_t m, int64_t n, int64_t k) {
  int64_t best = 0;
  for (const auto& s : kMicrokernelShapes) {
    const int64_t a = (m + s[0] - 1) / s[0] * s[0] * k;
    best = std::max(best, ((a + 15) & ~int64_t{15}) + (n + s[1] - 1) / s[1] * s[1] * k);
  }
  return best;
}

namespace {
// (panel dim, K) of a buffer stored as GEMM panels: A panels run over i (M),
// B panels over j (N).
std::pair<int64_t, int64_t> PanelExtents(const passes::BufferLayout& l) {
  const bool a = l.order == passes::ElementOrder::kGemmPanelsA;
  const int64_t x = a ? (l.trans ? l.shape[1] : l.shape[0]) : (l.trans ? l.shape[0] : l.shape[1]);
  return {x, l.elements / x};
}
}  // namespace

int64_t PanelFloats(const passes::BufferLayout& l) {
  const int col = l.order == passes::ElementOrder::kGemmPanelsA ? 0 : 1;
  const auto [x, k] = PanelExtents(l);
  int64_t best = 0;
  for (const auto& s : kMicrokernelShapes) best = std::max(best, (x + s[col] - 1) / s[col] * s[col] * k);
  return best;
}

Emitter::Emitter(const ir::Function& f, const passes::LayoutPlan& layouts, const std::vector<passes::Access>& access)
    : f_(f), layouts_(layouts), access_(access), syms_(ir::CollectSymbols(f)) {}

// ---- output helpers -----------------------------------------------------------

void Emitter::Line(const std::string& text) {
  if (text.rfind("#pragma", 0) == 0) {
    out_ << text << "\n";  // pragmas at column 0 keep the source readable and are legal anywhere
    return;
  }
  out_ << std::string(2 * indent_, ' ') << text << "\n";
}
void Emitter::Open(const std::string& text) {
  Line(text.empty() ? "{" : text + " {");
  ++indent_;
}
void Emitter::Close(const std::string& tail) {
  --indent_;
  Line("}" + tail);
}
void Emitter::Fail(const ir::Stmt& s, const std::string& message) {
  if (status_.ok()) {
    status_ = Status(StatusCode::kInvalidArgument,
                     passes::Where(f_, s.loc, ir::StmtKindName(ir::Kind(s))) + message);
  }
}
std::string Emitter::Tmp(const char* stem) { return "tl_" + std::string(stem) + std::to_string(tmp_++); }

std::string Emitter::Id(const std::string& name) const {
  if (name.rfind("tl_", 0) == 0 || name.rfind("u_", 0) == 0 || CppKeywords().count(name) != 0) {
    return "u_" + name;
  }
  return name;
}

// ---- buffers ------------------------------------------------------------------

std::string Emitter::Dim(const std::string& buffer, size_t i) {
  const ir::SymbolInfo& info = syms_.at(buffer);
  const ir::Expr& d = info.shape[i];
  if (const std::optional<int64_t> v = ir::FoldInt(d)) return std::to_string(*v);
  return "(int64_t)" + Expr(d);
}

std::string Emitter::Element(const std::string& buffer, const std::vector<std::string>& idx) {
  // Row-major flat index in int64 (Horner): ((i0 * d1 + i1) * d2 + i2).
  std::string flat;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i == 0) {
      flat = idx.size() == 1 ? idx[0] : "(int64_t)(" + idx[0] + ")";
    } else {
      flat = (i == 1 ? flat : "(" + flat + ")") + " * " + Dim(buffer, i) + " + " + idx[i];
    }
  }
  if (flat.empty()) flat = "0";
  return Id(buffer) + "[" + flat + "]";
}

std::string Emitter::LoadValue(const std::string& buffer, const std::vector<std::string>& idx) {
  const DType t = syms_.at(buffer).dtype;
  const std::string e = Element(buffer, idx);
  if (t == DType::kF16) return "tl_f16_to_f32(" + e + ")";
  if (t == DType::kBF16) return "tl_bf16_to_f32(" + e + ")";
  if (t == DType::kBool) return "(" + e + " != 0)";
  return e;
}

std::string Emitter::StoreStmt(const std::string& buffer, const std::vector<std::string>& idx, DType from,
                               const std::string& value) {
  const DType t = syms_.at(buffer).dtype;
  std::string v;
  if (t == DType::kF16) {
    v = "tl_f32_to_f16(" + (IsHalf(from) || from == DType::kF32 ? value : "(float)(" + value + ")") + ")";
  } else if (t == DType::kBF16) {
    v = "tl_f32_to_bf16(" + (IsHalf(from) || from == DType::kF32 ? value : "(float)(" + value + ")") + ")";
  } else if (t == DType::kBool) {
    v = "(uint8_t)(" + Convert(from, DType::kBool, value) + ")";
  } else {
    v = Convert(from, t, value);
  }
  return Element(buffer, idx) + " = " + v + ";";
}

std::string Emitter::Convert(DType from, DType to, const std::string& v) {
  if (from == to) return v;
  if (to == DType::kBool) return "((" + v + ") != 0)";
  if (IsHalf(to)) {
    // The value is kept in float but must take a representable f16/bf16 value.
    const char* r = to == DType::kF16 ? "tl_round_f16" : "tl_round_bf16";
    return std::string(r) + "((float)(" + v + "))";
  }
  if (std::strcmp(ValueType(from), ValueType(to)) == 0) return v;
  return "(" + std::string(ValueType(to)) + ")(" + v + ")";
}

// ---- expressions --------------------------------------------------------------

std::string Emitter::Literal(const ir::Expr& e) {
  if (const auto* i = ir::As<ir::IntImm>(e)) return IntLiteral(i->value, i->dtype);
  const auto* f = ir::As<ir::FloatImm>(e);
  return FloatLiteral(f->value, f->dtype);
}

std::string Emitter::Expr(const ir::Expr& e) {
  switch (ir::Kind(e)) {
    case ir::ExprKind::kIntImm:
    case ir::ExprKind::kFloatImm: return Literal(e);
    case ir::ExprKind::kVarRef: return Id(ir::As<ir::VarRef>(e)->name);
    case ir::ExprKind::kLoad: {
      const auto* l = ir::As<ir::Load>(e);
      std::vector<std::string> idx;
      for (const ir::Expr& i : l->indices) idx.push_back(Expr(i));
      return LoadValue(l->buffer, idx);
    }
    case ir::ExprKind::kUnary: {
      const auto* u = ir::As<ir::Unary>(e);
      const DType t = ir::ExprDType(*u->operand);
      const char* op = u->op == ir::UnaryOp::kNeg ? "-" : u->op == ir::UnaryOp::kNot ? "!" : "~";
      std::string s = std::string("(") + op + Expr(*u->operand) + ")";
      // C promotes narrow integers to int; bring the result back to the IR dtype.
      if (ir::IsInt(t) && ir::BitWidth(t) < 32) s = "((" + std::string(ValueType(t)) + ")" + s + ")";
      return s;
    }
    case ir::ExprKind::kBinary: {
      const auto* b = ir::As<ir::Binary>(e);
      const DType t = ir::ExprDType(*b->lhs);
      const std::string l = Expr(*b->lhs), r = Expr(*b->rhs);
      const bool integer = ir::IsInt(t);
      if (b->op == ir::BinaryOp::kDiv && integer) {
        return "tl_floordiv<" + std::string(ValueType(t)) + ">(" + l + ", " + r + ")";
      }
      if (b->op == ir::BinaryOp::kMod && integer) {
        return "tl_floormod<" + std::string(ValueType(t)) + ">(" + l + ", " + r + ")";
      }
      if (b->op == ir::BinaryOp::kMod) return "tl_fmod_floor(" + l + ", " + r + ")";
      std::string s = "(" + l + " " + ir::BinaryOpSpelling(b->op) + " " + r + ")";
      if (integer && ir::BitWidth(t) < 32 && !ir::IsComparison(b->op) && !ir::IsLogical(b->op)) {
        s = "((" + std::string(ValueType(t)) + ")" + s + ")";
      }
      return s;
    }
    case ir::ExprKind::kSelect: {
      const auto* s = ir::As<ir::Select>(e);
      return "(" + Expr(*s->cond) + " ? " + Expr(*s->true_value) + " : " + Expr(*s->false_value) + ")";
    }
    case ir::ExprKind::kCast: {
      const auto* c = ir::As<ir::Cast>(e);
      return Convert(ir::ExprDType(*c->value), c->dtype, Expr(*c->value));
    }
    case ir::ExprKind::kCall: {
      const auto* c = ir::As<ir::Call>(e);
      const DType t = ir::ExprDType(c->args.front());
      std::vector<std::string> a;
      for (const ir::Expr& x : c->args) a.push_back(Expr(x));
      const bool f64 = t == DType::kF64;
      auto libm = [&](const char* name) { return std::string(name) + (f64 ? "" : "f") + "(" + a[0] + ")"; };
      std::string result;
      switch (c->op) {
        case ir::CallOp::kExp: result = libm("exp"); break;
        case ir::CallOp::kExp2: result = libm("exp2"); break;
        case ir::CallOp::kLog: result = libm("log"); break;
        case ir::CallOp::kLog2: result = libm("log2"); break;
        case ir::CallOp::kSqrt: result = libm("sqrt"); break;
        case ir::CallOp::kTanh: result = libm("tanh"); break;
        case ir::CallOp::kFloor: result = libm("floor"); break;
        case ir::CallOp::kCeil: result = libm("ceil"); break;
        case ir::CallOp::kRound: result = libm("nearbyint"); break;  // half to even, as TVM's round
        case ir::CallOp::kSin: result = libm("sin"); break;
        case ir::CallOp::kCos: result = libm("cos"); break;
        case ir::CallOp::kRsqrt: result = "tl_rsqrt(" + a[0] + ")"; break;
        case ir::CallOp::kSigmoid: result = "tl_sigmoid(" + a[0] + ")"; break;
        case ir::CallOp::kAbs: result = "tl_abs(" + a[0] + ")"; break;
        case ir::CallOp::kPow: result = std::string(f64 ? "pow" : "powf") + "(" + a[0] + ", " + a[1] + ")"; break;
        case ir::CallOp::kMax:
        case ir::CallOp::kMin: {
          const char* fn = c->op == ir::CallOp::kMax ? "tl_max" : "tl_min";
          result = std::string(fn) + "<" + ValueType(t) + ">(" + a[0] + ", " + a[1] + ")";
          if (ir::IsFloat(t)) result = std::string(fn) + "(" + a[0] + ", " + a[1] + ")";
          break;
        }
        case ir::CallOp::kTruncDiv: result = "(" + a[0] + " / " + a[1] + ")"; break;
        case ir::CallOp::kTruncMod: result = "(" + a[0] + " % " + a[1] + ")"; break;
        case ir::CallOp::kCeilDiv:
          result = "tl_ceildiv<" + std::string(ValueType(t)) + ">(" + a[0] + ", " + a[1] + ")";
          break;
      }
      // f16/bf16 math is done in float; results stay float until stored or cast.
      if (ir::IsInt(t) && ir::BitWidth(t) < 32) result = "((" + std::string(ValueType(t)) + ")" + result + ")";
      return result;
    }
  }
  return "/*unreachable*/0";
}

// ---- statements ---------------------------------------------------------------

void Emitter::EmitBlock(const ir::Block& b) {
  for (const ir::Stmt& s : b) {
    if (!status_.ok()) return;
    EmitStmt(s);
  }
}

void Emitter::EmitStmt(const ir::Stmt& s) {
  const std::string at = s.loc ? "  // " + ir::ToString(s.loc) : "";
  switch (ir::Kind(s)) {
    case ir::StmtKind::kKernel: Fail(s, "nested kernel statement"); return;
    case ir::StmtKind::kAlloc: {
      const auto* a = ir::As<ir::Alloc>(s);
      Line("// alloc " + a->name + ": " + ir::MemScopeName(a->scope) + " " + ir::DTypeName(a->dtype) +
           " (declared at block entry)");
      return;
    }
    case ir::StmtKind::kVarDecl: {
      const auto* v = ir::As<ir::VarDecl>(s);
      const std::string init = v->init ? Convert(ir::ExprDType(*v->init), v->dtype, Expr(*v->init)) : "0";
      Line(std::string(ValueType(v->dtype)) + " " + Id(v->name) + " = " + init + ";" + at);
      return;
    }
    case ir::StmtKind::kLet: {
      const auto* l = ir::As<ir::Let>(s);
      Line("const " + std::string(ValueType(ir::ExprDType(l->value))) + " " + Id(l->name) + " = " +
           Expr(l->value) + ";" + at);
      return;
    }
    case ir::StmtKind::kStore: {
      const auto* st = ir::As<ir::Store>(s);
      std::vector<std::string> idx;
      for (const ir::Expr& i : st->indices) idx.push_back(Expr(i));
      Line(StoreStmt(st->buffer, idx, ir::ExprDType(st->value), Expr(st->value)) + at);
      return;
    }
    case ir::StmtKind::kAssign: {
      const auto* a = ir::As<ir::Assign>(s);
      const DType t = syms_.at(a->name).dtype;
      Line(Id(a->name) + " = " + Convert(ir::ExprDType(a->value), t, Expr(a->value)) + ";" + at);
      return;
    }
    case ir::StmtKind::kFor:
      if (s.loc) Line("//" + at.substr(4));
      EmitFor(*ir::As<ir::For>(s));
      return;
    case ir::StmtKind::kParallel:
      if (s.loc) Line("//" + at.substr(4));
      EmitParallel(*ir::As<ir::Parallel>(s));
      return;
    case ir::StmtKind::kIf: {
      const auto* i = ir::As<ir::If>(s);
      Open("if (" + Expr(i->cond) + ")");
      EmitBlock(i->then_body);
      if (i->else_body.empty()) {
        Close();
      } else {
        --indent_;
        Open("} else");
        EmitBlock(i->else_body);
        Close();
      }
      return;
    }
    case ir::StmtKind::kCopy: {
      const auto* c = ir::As<ir::Copy>(s);
      EmitCopyLike(c->src, c->dst, false, s);
      return;
    }
    case ir::StmtKind::kFill: EmitFill(*ir::As<ir::Fill>(s), s); return;
    case ir::StmtKind::kGemm: EmitGemm(*ir::As<ir::Gemm>(s), s); return;
    case ir::StmtKind::kReduce: EmitReduce(*ir::As<ir::Reduce>(s), s); return;
    case ir::StmtKind::kCumsum: EmitCumsum(*ir::As<ir::Cumsum>(s), s); return;
    case ir::StmtKind::kAtomicAdd: EmitAtomicAdd(*ir::As<ir::AtomicAdd>(s), s); return;
    case ir::StmtKind::kAtomicAddTile: {
      const auto* a = ir::As<ir::AtomicAddTile>(s);
      EmitCopyLike(a->src, a->dst, true, s);
      return;
    }
    case ir::StmtKind::kSync: Line("// sync: a block is one call on the CPU; nothing to wait for"); return;
    case ir::StmtKind::kHint: Line("// hint " + ir::As<ir::Hint>(s)->name + " (ignored on the CPU)"); return;
    case ir::StmtKind::kCallExtern: Fail(s, "T.call_extern runs only on CUDA targets"); return;  // LowerFunction rejects it first
  }
}

void Emitter::EmitFor(const ir::For& loop) {
  const DType t = ir::ExprDType(loop.start);
  const std::string ty = ValueType(t), v = Id(loop.var);
  // Python range semantics: bounds and step are evaluated once, before the loop.
  std::string stop = Expr(loop.stop);
  bool braces = false;
  if (!ir::FoldInt(loop.stop).has_value()) {
    braces = true;
    Open("");
    const std::string name = Tmp("stop");
    Line("const " + ty + " " + name + " = " + Convert(ir::ExprDType(loop.stop), t, stop) + ";");
    stop = name;
  }
  std::string cond = v + " < " + stop, step = "++" + v;
  if (loop.step.has_value()) {
    const std::optional<int64_t> k = ir::FoldInt(*loop.step);
    if (k.has_value()) {
      cond = *k > 0 ? v + " < " + stop : v + " > " + stop;
      step = v + " += " + IntLiteral(*k, t);
    } else {
      if (!braces) {
        braces = true;
        Open("");
      }
      const std::string name = Tmp("step");
      Line("const " + ty + " " + name + " = " + Expr(*loop.step) + ";");
      cond = "(" + name + " > 0 ? " + v + " < " + stop + " : " + v + " > " + stop + ")";
      step = v + " += " + name;
    }
  }
  if (loop.kind == ir::LoopKind::kUnroll) Line("#pragma GCC unroll 16");
  Open("for (" + ty + " " + v + " = " + Expr(loop.start) + "; " + cond + "; " + step + ")");
  EmitBlock(loop.body);
  Close();
  if (braces) Close();
}

void Emitter::EmitParallel(const ir::Parallel& p) {
  // Iterations are independent by the language's rule, so the innermost loop
  // is marked ivdep for the vectorizer.
  for (size_t i = 0; i < p.vars.size(); ++i) {
    if (i + 1 == p.vars.size()) Line("#pragma GCC ivdep");
    const std::string v = Id(p.vars[i]);
    Open("for (int32_t " + v + " = 0; " + v + " < " + Expr(p.extents[i]) + "; ++" + v + ")");
  }
  EmitBlock(p.body);
  for (size_t i = 0; i < p.vars.size(); ++i) Close();
}

void Emitter::EmitCopyLike(const ir::Region& src_r, const ir::Region& dst_r, bool atomic, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> src_or = passes::ResolveRegion(src_r, syms_);
  StatusOr<passes::RegionInfo> dst_or = passes::ResolveRegion(dst_r, syms_);
  if (!src_or.ok() || !dst_or.ok()) return Fail(s, (src_or.ok() ? dst_or : src_or).status().message());
  const passes::RegionInfo& src = *src_or;
  const passes::RegionInfo& dst = *dst_or;
  if (auto it = layouts_.buffers.find(dst.buffer);
      !atomic && it != layouts_.buffers.end() && it->second.order != passes::ElementOrder::kRowMajor) {
    return EmitCopyToPanels(src, it->second, s);
  }
  const std::vector<int> ks = src.kept_dims(), kd = dst.kept_dims();
  bool same = ks.size() == kd.size();
  for (size_t i = 0; same && i < ks.size(); ++i) same = src.extents[ks[i]] == dst.extents[kd[i]];
  if (!same) return Fail(s, "the two regions have different shapes once extent-1 dims are dropped");

  Open("");
  Line(std::string("// ") + (atomic ? "atomic_add " : "copy ") + ir::Print(src_r) + " -> " + ir::Print(dst_r) +
       (s.loc ? "  (" + ir::ToString(s.loc) + ")" : ""));
  // Starts, once.
  auto starts = [&](const passes::RegionInfo& r, const char* stem) {
    std::vector<std::string> names;
    for (size_t d = 0; d < r.starts.size(); ++d) {
      if (const std::optional<int64_t> c = ir::FoldInt(r.starts[d])) {
        names.push_back(std::to_string(*c));
        continue;
      }
      names.push_back(Tmp(stem));
      Line("const int64_t " + names.back() + " = " + Expr(r.starts[d]) + ";");
    }
    return names;
  };
  const std::vector<std::string> ss = starts(src, "s"), ds = starts(dst, "d");
  std::vector<std::string> iv;  // loop counters over the compact shape
  for (size_t k = 0; k < ks.size(); ++k) iv.push_back(Tmp("i"));
  auto indices = [&](const passes::RegionInfo& r, const std::vector<std::string>& st, const std::vector<int>& kept) {
    std::vector<std::string> idx;
    for (size_t d = 0; d < r.starts.size(); ++d) {
      auto it = std::find(kept.begin(), kept.end(), static_cast<int>(d));
      idx.push_back(it == kept.end() ? st[d] : Plus(st[d], iv[it - kept.begin()]));
    }
    return idx;
  };
  const std::vector<std::string> si = indices(src, ss, ks), di = indices(dst, ds, kd);
  // Whole-region test: the fast path runs without per-element guards.
  std::vector<std::string> region_ok;
  auto region_test = [&](const passes::RegionInfo& r, const std::vector<std::string>& st) {
    for (size_t d = 0; d < r.guard.size(); ++d) {
      if (!r.guard[d]) continue;
      region_ok.push_back(st[d] + " >= 0 && " + st[d] + " + " + std::to_string(r.extents[d]) +
                          " <= " + Dim(r.buffer, d));
    }
  };
  region_test(src, ss);
  region_test(dst, ds);
  auto element_test = [&](const passes::RegionInfo& r, const std::vector<std::string>& idx) {
    std::string t;
    for (size_t d = 0; d < r.guard.size(); ++d) {
      if (!r.guard[d]) continue;
      // One unsigned compare covers idx < 0 and idx >= dim.
      t += std::string(t.empty() ? "" : " && ") + "(uint64_t)(" + idx[d] + ") < (uint64_t)" + Dim(r.buffer, d);
    }
    return t;
  };
  auto body = [&](bool guarded) {
    for (size_t k = 0; k < iv.size(); ++k) {
      if (k + 1 == iv.size()) Line("#pragma GCC ivdep");
      Open("for (int64_t " + iv[k] + " = 0; " + iv[k] + " < " + std::to_string(src.extents[ks[k]]) + "; ++" +
           iv[k] + ")");
    }
    std::string value = LoadValue(src.buffer, si);
    const std::string src_ok = guarded ? element_test(src, si) : "";
    const std::string dst_ok = guarded ? element_test(dst, di) : "";
    if (atomic) {
      std::string cond = src_ok;
      if (!dst_ok.empty()) cond += (cond.empty() ? "" : " && ") + dst_ok;
      const DType t = dst.dtype;
      std::string call;
      const std::string ptr = "&" + Element(dst.buffer, di);
      if (t == DType::kF16) call = "tl_atomic_add_f16(" + ptr + ", (float)(" + value + "));";
      else if (t == DType::kBF16) call = "tl_atomic_add_bf16(" + ptr + ", (float)(" + value + "));";
      else if (ir::IsFloat(t)) call = "tl_atomic_add_float<" + std::string(ValueType(t)) + ">(" + ptr + ", " + Convert(src.dtype, t, value) + ");";
      else call = "tl_atomic_add_int<" + std::string(ValueType(t)) + ">(" + ptr + ", " + Convert(src.dtype, t, value) + ");";
      Line(cond.empty() ? call : "if (" + cond + ") " + call);
    } else if (src.dtype == dst.dtype) {
      // Same dtype: move the stored bits (no f16 round trip, plain vectorizable copies).
      std::string bits = Element(src.buffer, si);
      if (!src_ok.empty()) bits = "(" + src_ok + ") ? " + bits + " : (" + StorageType(src.dtype) + ")0";
      const std::string store = Element(dst.buffer, di) + " = " + bits + ";";
      Line(dst_ok.empty() ? store : "if (" + dst_ok + ") " + store);
    } else {
      if (!src_ok.empty()) value = "(" + src_ok + ") ? " + value + " : (" + ValueType(src.dtype) + ")0";
      const std::string store = StoreStmt(dst.buffer, di, src.dtype, value);
      Line(dst_ok.empty() ? store : "if (" + dst_ok + ") " + store);
    }
    for (size_t k = 0; k < iv.size(); ++k) Close();
  };
  if (region_ok.empty()) {
    body(false);
  } else {
    std::string cond;
    for (const std::string& c : region_ok) cond += (cond.empty() ? "" : " && ") + c;
    Open("if (" + cond + ")");
    body(false);
    --indent_;
    Open("} else");
    body(true);
    Close();
  }
  Close();
}

void Emitter::EmitCopyToPanels(const passes::RegionInfo& src, const passes::BufferLayout& dst, const ir::Stmt& s) {
  // Layout inference guaranteed: src is a rank-2 tensor of dst's dtype, the
  // tile's extents are dst's shape, dst is written whole.
  const bool is_a = dst.order == passes::ElementOrder::kGemmPanelsA;
  const int64_t P = dst.shape[0], Q = dst.shape[1];
  // Operand element (x, k), x the panel dim: tile element (p, q) = x_is_p ? (x, k) : (k, x).
  const bool x_is_p = is_a ? !dst.trans : dst.trans;
  const int64_t X = x_is_p ? P : Q, K = x_is_p ? Q : P;
  const std::string d0 = Dim(src.buffer, 0), d1 = Dim(src.buffer, 1);
  const int kind = dst.dtype == DType::kF32 ? 0 : dst.dtype == DType::kF16 ? 1 : 2;
  Open("");
  Line("// copy " + src.buffer + "[...] -> " + dst.buffer + ", packed as gemm " + (is_a ? "A" : "B") +
       " panels (layout inference)" + (s.loc ? "  (" + ir::ToString(s.loc) + ")" : ""));
  std::vector<std::string> st;
  for (size_t d = 0; d < 2; ++d) {
    if (const std::optional<int64_t> c = ir::FoldInt(src.starts[d])) {
      st.push_back(std::to_string(*c));
    } else {
      st.push_back(Tmp("s"));
      Line("const int64_t " + st.back() + " = " + Expr(src.starts[d]) + ";");
    }
  }
  // Fast path: whole tile inside. Strides in the tile of operand element (x, k);
  // tl_pack_a takes (x-stride, k-stride), tl_pack_b (k-stride, x-stride).
  const std::string x_stride = x_is_p ? d1 : "1", k_stride = x_is_p ? "1" : d1;
  const std::string rs = is_a ? x_stride : k_stride, cs = is_a ? k_stride : x_stride;
  const std::string fast = std::string(is_a ? "tl_pack_a" : "tl_pack_b") + "<" + std::to_string(kind) + ">(" +
                           std::to_string(X) + ", " + std::to_string(K) + ", &" + Id(src.buffer) + "[(int64_t)(" +
                           st[0] + ") * " + d1 + " + " + st[1] + "], " + rs + ", " + cs + ", " + Id(dst.buffer) + ");";
  if (!src.any_guard()) {
    Line(fast);
    Close();
    return;
  }
  std::string cond;
  const std::string dims[2] = {d0, d1};
  const int64_t ext[2] = {P, Q};
  for (int d = 0; d < 2; ++d) {
    if (!src.guard[d]) continue;
    cond += std::string(cond.empty() ? "" : " && ") + st[d] + " >= 0 && " + st[d] + " + " + std::to_string(ext[d]) +
            " <= " + dims[d];
  }
  Open("if (" + cond + ")");
  Line(fast);
  --indent_;
  Open("} else");
  Line("tl_pack_guarded<" + std::to_string(kind) + ">(" + std::to_string(X) + ", " + std::to_string(K) + ", " +
       (is_a ? "TL_MR" : "TL_NR") + ", " + (x_is_p ? "1" : "0") + ", " + Id(src.buffer) + ", " + d1 + ", 1, " +
       st[0] + ", " + d0 + ", " + st[1] + ", " + d1 + ", " + Id(dst.buffer) + ");");
  Close();
  Close();
}

void Emitter::EmitFill(const ir::Fill& fill, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> r_or = passes::ResolveRegion(fill.dst, syms_);
  if (!r_or.ok()) return Fail(s, r_or.status().message());
  const passes::RegionInfo& r = *r_or;
  Open("");
  Line("// fill " + ir::Print(fill.dst) + ", " + ir::Print(fill.value));
  const std::string v = Tmp("v");
  const DType vt = ir::ExprDType(fill.value);
  Line("const " + std::string(ValueType(vt)) + " " + v + " = " + Expr(fill.value) + ";");
  std::vector<std::string> idx, iv;
  std::string guard;
  for (size_t d = 0; d < r.extents.size(); ++d) {
    iv.push_back(Tmp("i"));
    std::string start;
    if (const std::optional<int64_t> c = ir::FoldInt(r.starts[d])) {
      start = std::to_string(*c);
    } else {
      start = Tmp("s");
      Line("const int64_t " + start + " = " + Expr(r.starts[d]) + ";");
    }
    idx.push_back(Plus(start, iv.back()));
    if (r.guard[d]) {
      guard += std::string(guard.empty() ? "" : " && ") + "(uint64_t)(" + idx.back() + ") < (uint64_t)" +
               Dim(r.buffer, d);
    }
  }
  for (size_t d = 0; d < r.extents.size(); ++d) {
    if (d + 1 == r.extents.size()) Line("#pragma GCC ivdep");
    Open("for (int64_t " + iv[d] + " = 0; " + iv[d] + " < " + std::to_string(r.extents[d]) + "; ++" + iv[d] + ")");
  }
  const std::string store = StoreStmt(r.buffer, idx, vt, v);
  Line(guard.empty() ? store : "if (" + guard + ") " + store);
  for (size_t d = 0; d < r.extents.size(); ++d) Close();
  Close();
}

void Emitter::EmitGemm(const ir::Gemm& g, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> a_or = passes::ResolveRegion(g.a, syms_);
  StatusOr<passes::RegionInfo> b_or = passes::ResolveRegion(g.b, syms_);
  StatusOr<passes::RegionInfo> c_or = passes::ResolveRegion(g.c, syms_);
  for (auto* r : {&a_or, &b_or, &c_or}) {
    if (!r->ok()) return Fail(s, r->status().message());
  }
  const passes::RegionInfo *ops[3] = {&*a_or, &*b_or, &*c_or};
  // The matrix dims are the region's last two; leading dims must have extent 1.
  for (const passes::RegionInfo* r : ops) {
    if (r->scope == ir::MemScope::kGlobal) return Fail(s, "gemm operand '" + r->buffer + "' must be shared or fragment");
    if (r->extents.size() < 2) return Fail(s, "gemm operand '" + r->buffer + "' must have at least 2 dims");
    for (size_t d = 0; d + 2 < r->extents.size(); ++d) {
      if (r->extents[d] != 1) return Fail(s, "gemm operand '" + r->buffer + "' has a leading dim with extent > 1");
    }
  }
  auto rows = [](const passes::RegionInfo& r) { return r.extents[r.extents.size() - 2]; };
  auto cols = [](const passes::RegionInfo& r) { return r.extents.back(); };
  const passes::RegionInfo &A = *ops[0], &B = *ops[1], &C = *ops[2];
  const int64_t M = g.trans_a ? cols(A) : rows(A), Ka = g.trans_a ? rows(A) : cols(A);
  const int64_t Kb = g.trans_b ? cols(B) : rows(B), N = g.trans_b ? rows(B) : cols(B);
  if (Ka != Kb || rows(C) != M || cols(C) != N) {
    return Fail(s, "shapes do not agree: op(A) is " + std::to_string(M) + "x" + std::to_string(Ka) + ", op(B) " +
                       std::to_string(Kb) + "x" + std::to_string(N) + ", C " + std::to_string(rows(C)) + "x" +
                       std::to_string(cols(C)));
  }
  const int64_t K = Ka;
  auto stride = [&](const passes::RegionInfo& r, size_t from_end) {
    const passes::BufferLayout& l = layouts_.buffers.at(r.buffer);
    return l.strides[l.strides.size() - from_end];
  };
  auto base = [&](const passes::RegionInfo& r) {
    std::vector<std::string> idx;
    for (const ir::Expr& st : r.starts) idx.push_back(Expr(st));
    return "&" + Element(r.buffer, idx);
  };
  // A(i, k) = a[i * a_rs + k * a_cs]; B(k, j) = b[k * b_rs + j * b_cs].
  const int64_t a_rs = g.trans_a ? stride(A, 1) : stride(A, 2), a_cs = g.trans_a ? stride(A, 2) : stride(A, 1);
  const int64_t b_rs = g.trans_b ? stride(B, 1) : stride(B, 2), b_cs = g.trans_b ? stride(B, 2) : stride(B, 1);
  const int64_t ldc = stride(C, 2);
  Open("");
  Line("// gemm " + ir::Print(g.a) + ", " + ir::Print(g.b) + " -> " + ir::Print(g.c) + (g.trans_a ? " trans_a" : "") +
       (g.trans_b ? " trans_b" : "") + (g.clear_accum ? " clear_accum" : "") + "  [" + std::to_string(M) + "x" +
       std::to_string(N) + "x" + std::to_string(K) + "]" + (s.loc ? "  (" + ir::ToString(s.loc) + ")" : ""));
  auto kind = [](DType t) -> int {
    return t == DType::kF32 ? 0 : t == DType::kF16 ? 1 : t == DType::kBF16 ? 2 : -1;
  };
  const passes::BufferLayout& la = layouts_.buffers.at(A.buffer);
  const passes::BufferLayout& lb = layouts_.buffers.at(B.buffer);
  const bool a_panels = la.order == passes::ElementOrder::kGemmPanelsA;
  const bool b_panels = lb.order == passes::ElementOrder::kGemmPanelsB;
  if (C.dtype == DType::kF32 && kind(A.dtype) >= 0 && kind(B.dtype) >= 0) {
    // Packing scratch only when an operand still needs packing.
    const int64_t need = a_panels && b_panels ? 0 : GemmPackFloats(M, N, K) * 4;
    scratch_bytes_ = std::max(scratch_bytes_, gemm_scratch_offset_ + static_cast<uint64_t>(need));
    // Operands already in panels (filled by their copies) are not packed again.
    const std::string a_args = a_panels ? Id(A.buffer) + ", 0, 0, 0"
                                        : "0, " + base(A) + ", " + std::to_string(a_rs) + ", " + std::to_string(a_cs);
    const std::string b_args = b_panels ? Id(B.buffer) + ", 0, 0, 0"
                                        : "0, " + base(B) + ", " + std::to_string(b_rs) + ", " + std::to_string(b_cs);
    if (need > 0) {
      Line("static_assert(tl_gemm_pack_floats(" + std::to_string(M) + ", " + std::to_string(N) + ", " +
           std::to_string(K) + ") <= " + std::to_string(need / 4) + ", \"gemm packing scratch sized for another microkernel\");");
    }
    Line("tl_gemm<" + std::to_string(kind(A.dtype)) + ", " + std::to_string(kind(B.dtype)) + ">(" +
         std::to_string(M) + ", " + std::to_string(N) + ", " + std::to_string(K) + ", " + a_args + ", " + b_args +
         ", " + base(C) + ", " + std::to_string(ldc) + ", " + (g.clear_accum ? "0" : "1") +
         ", (float*)(tl_scratch + " + std::to_string(gemm_scratch_offset_) + "));");
    Close();
    return;
  }
  if (a_panels || b_panels) return Fail(s, "internal: panel operand on the plain-loop gemm path");
  // Any other dtype mix: a plain triple loop in C's dtype (ints accumulate exactly).
  auto ptr = [&](const passes::RegionInfo& r, const char* stem) {
    const std::string p = Tmp(stem);
    Line("const " + std::string(StorageType(r.dtype)) + "* const " + p + " = " + base(r) + ";");
    return p;
  };
  const std::string pa = ptr(A, "a"), pb = ptr(B, "b");
  const std::string pc = Tmp("c");
  Line(std::string(StorageType(C.dtype)) + "* const " + pc + " = " + base(C) + ";");
  auto value = [&](DType t, const std::string& el) {
    if (t == DType::kF16) return "tl_f16_to_f32(" + el + ")";
    if (t == DType::kBF16) return "tl_bf16_to_f32(" + el + ")";
    return el;
  };
  const std::string acc_t = ValueType(C.dtype);
  Open("for (int64_t tl_m = 0; tl_m < " + std::to_string(M) + "; ++tl_m)");
  Open("for (int64_t tl_n = 0; tl_n < " + std::to_string(N) + "; ++tl_n)");
  const std::string c_el = pc + "[tl_m * " + std::to_string(ldc) + " + tl_n]";
  Line(acc_t + " tl_acc = " + (g.clear_accum ? "(" + acc_t + ")0" : value(C.dtype, c_el)) + ";");
  Open("for (int64_t tl_k = 0; tl_k < " + std::to_string(K) + "; ++tl_k)");
  const std::string av = Convert(A.dtype, C.dtype, value(A.dtype, pa + "[tl_m * " + std::to_string(a_rs) + " + tl_k * " + std::to_string(a_cs) + "]"));
  const std::string bv = Convert(B.dtype, C.dtype, value(B.dtype, pb + "[tl_k * " + std::to_string(b_rs) + " + tl_n * " + std::to_string(b_cs) + "]"));
  Line("tl_acc = " + Convert(C.dtype, C.dtype, "tl_acc + " + av + " * " + bv) + ";");
  Close();
  if (C.dtype == DType::kF16) Line(c_el + " = tl_f32_to_f16(tl_acc);");
  else if (C.dtype == DType::kBF16) Line(c_el + " = tl_f32_to_bf16(tl_acc);");
  else Line(c_el + " = (" + acc_t + ")tl_acc;");
  Close();
  Close();
  Close();
}


void Emitter::EmitReduce(const ir::Reduce& red, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> src_or = passes::ResolveRegion(red.src, syms_);
  StatusOr<passes::RegionInfo> dst_or = passes::ResolveRegion(red.dst, syms_);
  if (!src_or.ok() || !dst_or.ok()) return Fail(s, (src_or.ok() ? dst_or : src_or).status().message());
  const passes::RegionInfo &src = *src_or, &dst = *dst_or;
  const int64_t rank = static_cast<int64_t>(src.extents.size());
  const std::optional<int64_t> dim_or = ir::NormalizeDim(red.dim, rank);
  if (!dim_or) return Fail(s, "dim=" + std::to_string(red.dim) + " is out of range");
  const int dim = static_cast<int>(*dim_or);
  const bool keep = dst.extents.size() == src.extents.size();
  if (!keep && static_cast<int64_t>(dst.extents.size()) != rank - 1) return Fail(s, "destination rank does not match");
  std::vector<std::string> sidx(rank), didx(dst.extents.size());
  Open("");
  Line("// reduce " + std::string(ir::ReduceOpName(red.op)) + " " + ir::Print(red.src) + " -> " + ir::Print(red.dst) +
       " dim=" + std::to_string(dim) + (red.clear ? " clear" : "") + (s.loc ? "  (" + ir::ToString(s.loc) + ")" : ""));
  int open = 0;
  for (int d = 0, o = 0; d < rank; ++d) {
    const std::string st = Expr(src.starts[d]);
    if (d == dim) {
      if (keep) {
        if (dst.extents[d] != 1) return Fail(s, "kept reduced dim must have extent 1");
        didx[d] = Expr(dst.starts[d]);
      }
      continue;
    }
    const int dd = keep ? d : o++;
    if (dst.extents[dd] != src.extents[d]) return Fail(s, "destination shape does not match the source");
    const std::string i = Tmp("i");
    Open("for (int64_t " + i + " = 0; " + i + " < " + std::to_string(src.extents[d]) + "; ++" + i + ")");
    ++open;
    sidx[d] = st + " + " + i;
    didx[dd] = Expr(dst.starts[dd]) + " + " + i;
  }
  const DType t = dst.dtype;
  const std::string ty = ValueType(t);
  std::string init;
  const bool fl = ir::IsFloat(t);
  switch (red.op) {
    case ir::ReduceOp::kSum:
    case ir::ReduceOp::kAbsSum:
    case ir::ReduceOp::kAbsMax: init = "(" + ty + ")0"; break;
    case ir::ReduceOp::kMax: init = fl ? "(-__builtin_inff())" : "tl_lowest<" + ty + ">()"; break;
    case ir::ReduceOp::kMin: init = fl ? "__builtin_inff()" : "tl_highest<" + ty + ">()"; break;
  }
  if (!red.clear) init = LoadValue(dst.buffer, didx);
  Line(ty + " tl_acc = " + init + ";");
  const std::string r = Tmp("r");
  Open("for (int64_t " + r + " = 0; " + r + " < " + std::to_string(src.extents[dim]) + "; ++" + r + ")");
  sidx[dim] = Expr(src.starts[dim]) + " + " + r;
  const std::string x = Convert(src.dtype, t, LoadValue(src.buffer, sidx));
  switch (red.op) {
    case ir::ReduceOp::kSum: Line("tl_acc += " + x + ";"); break;
    case ir::ReduceOp::kAbsSum: Line("tl_acc += tl_abs(" + x + ");"); break;
    case ir::ReduceOp::kMax: Line("tl_acc = tl_max(tl_acc, " + x + ");"); break;
    case ir::ReduceOp::kMin: Line("tl_acc = tl_min(tl_acc, " + x + ");"); break;
    case ir::ReduceOp::kAbsMax: Line("tl_acc = tl_max(tl_acc, tl_abs(" + x + "));"); break;
  }
  Close();
  Line(StoreStmt(dst.buffer, didx, t, "tl_acc"));
  for (int i = 0; i < open; ++i) Close();
  Close();
}

void Emitter::EmitCumsum(const ir::Cumsum& c, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> src_or = passes::ResolveRegion(c.src, syms_);
  StatusOr<passes::RegionInfo> dst_or = passes::ResolveRegion(c.dst, syms_);
  if (!src_or.ok() || !dst_or.ok()) return Fail(s, (src_or.ok() ? dst_or : src_or).status().message());
  const passes::RegionInfo &src = *src_or, &dst = *dst_or;
  const int64_t rank = static_cast<int64_t>(src.extents.size());
  const std::optional<int64_t> dim_or = ir::NormalizeDim(c.dim, rank);
  if (!dim_or) return Fail(s, "dim=" + std::to_string(c.dim) + " is out of range");
  if (dst.extents != src.extents) return Fail(s, "source and destination shapes differ");
  const int dim = static_cast<int>(*dim_or);
  std::vector<std::string> sidx(rank), didx(rank);
  Open("");
  Line("// cumsum " + ir::Print(c.src) + " -> " + ir::Print(c.dst) + " dim=" + std::to_string(dim) +
       (c.reverse ? " reverse" : "") + (s.loc ? "  (" + ir::ToString(s.loc) + ")" : ""));
  int open = 0;
  for (int d = 0; d < rank; ++d) {
    if (d == dim) continue;
    const std::string i = Tmp("i");
    Open("for (int64_t " + i + " = 0; " + i + " < " + std::to_string(src.extents[d]) + "; ++" + i + ")");
    ++open;
    sidx[d] = Expr(src.starts[d]) + " + " + i;
    didx[d] = Expr(dst.starts[d]) + " + " + i;
  }
  const DType t = dst.dtype;
  Line(std::string(ValueType(t)) + " tl_acc = 0;");
  const std::string r = Tmp("r"), n = std::to_string(src.extents[dim]);
  Open("for (int64_t " + r + " = 0; " + r + " < " + n + "; ++" + r + ")");
  const std::string pos = c.reverse ? "(" + n + " - 1 - " + r + ")" : r;
  sidx[dim] = Expr(src.starts[dim]) + " + " + pos;
  didx[dim] = Expr(dst.starts[dim]) + " + " + pos;
  // Read before write: src and dst may be the same buffer (in-place cumsum).
  Line("tl_acc += " + Convert(src.dtype, t, LoadValue(src.buffer, sidx)) + ";");
  Line(StoreStmt(dst.buffer, didx, t, "tl_acc"));
  Close();
  for (int i = 0; i < open; ++i) Close();
  Close();
}

void Emitter::EmitAtomicAdd(const ir::AtomicAdd& a, const ir::Stmt& s) {
  StatusOr<passes::RegionInfo> r_or = passes::ResolveRegion(a.dst, syms_);
  if (!r_or.ok()) return Fail(s, r_or.status().message());
  const passes::RegionInfo& r = *r_or;
  if (!r.kept_dims().empty()) return Fail(s, "scalar atomic_add needs a single-element destination");
  std::vector<std::string> idx;
  for (const ir::Expr& st : r.starts) idx.push_back(Expr(st));
  std::string guard;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (r.guard[d]) {
      guard += std::string(guard.empty() ? "" : " && ") + "(uint64_t)(" + idx[d] + ") < (uint64_t)" + Dim(r.buffer, d);
    }
  }
  const DType vt = ir::ExprDType(a.value), t = r.dtype;
  const std::string v = Expr(a.value), ptr = "&" + Element(r.buffer, idx);
  std::string call;
  if (t == DType::kF16) call = "tl_atomic_add_f16(" + ptr + ", (float)(" + v + "));";
  else if (t == DType::kBF16) call = "tl_atomic_add_bf16(" + ptr + ", (float)(" + v + "));";
  else if (ir::IsFloat(t)) call = "tl_atomic_add_float<" + std::string(ValueType(t)) + ">(" + ptr + ", " + Convert(vt, t, v) + ");";
  else if (ir::IsInt(t)) call = "tl_atomic_add_int<" + std::string(ValueType(t)) + ">(" + ptr + ", " + Convert(vt, t, v) + ");";
  else return Fail(s, "atomic_add on a bool buffer");
  const std::string at = s.loc ? "  // " + ir::ToString(s.loc) : "";
  Line((guard.empty() ? call : "if (" + guard + ") " + call) + at);
}

// ---- the block function ----------------------------------------------------------

StatusOr<std::string> Emitter::EmitBlockFunction() {
  const ir::Kernel& k = passes::TheKernel(f_);
  // Scratch layout: every shared/fragment buffer and every local array over
  // 1 KiB, 64-byte aligned, in name order (deterministic); then GEMM packing.
  std::vector<std::string> stack_arrays;
  uint64_t offset = 0;
  for (const auto& [name, l] : layouts_.buffers) {
    const bool panels = l.order != passes::ElementOrder::kRowMajor;
    const uint64_t bytes = static_cast<uint64_t>(panels ? PanelFloats(l) * 4 : l.elements * StorageBytes(l.dtype));
    if (l.scope == ir::MemScope::kLocal && bytes <= 1024) {
      stack_arrays.push_back(name);
      continue;
    }
    scratch_offset_[name] = offset;
    offset = AlignUp(offset + bytes, 64);
  }
  gemm_scratch_offset_ = offset;
  scratch_bytes_ = offset;

  // Body first: it sizes the GEMM scratch.
  indent_ = 1;
  EmitBlock(k.body);
  if (!status_.ok()) return status_;
  const std::string body = out_.str();
  out_.str("");
  indent_ = 0;

  Line("// kernel " + f_.name + (f_.loc ? " (" + ir::ToString(f_.loc) + ")" : ""));
  Open("static int " + BlockFunctionName() + "(const tl_cpu_dispatch_t* tl_d, const tl_cpu_block_t* tl_b)");
  Line("if (tl_b->scratch_bytes < " + std::to_string(scratch_bytes_) + "u) return 1;  // runtime handed too little scratch");
  Line("char* const tl_scratch = (char*)tl_b->scratch;");
  Line("(void)tl_scratch;");
  for (size_t i = 0; i < f_.params.size(); ++i) {
    const ir::Param& p = f_.params[i];
    const std::string arg = "tl_d->args[" + std::to_string(i) + "]";
    if (p.kind == ir::Param::Kind::kScalar) {
      std::string v = "*(const " + std::string(StorageType(p.dtype)) + "*)" + arg;
      if (p.dtype == DType::kF16) v = "tl_f16_to_f32(" + v + ")";
      if (p.dtype == DType::kBF16) v = "tl_bf16_to_f32(" + v + ")";
      if (p.dtype == DType::kBool) v = "(" + v + " != 0)";
      Line("const " + std::string(ValueType(p.dtype)) + " " + Id(p.name) + " = " + v + ";");
      continue;
    }
    // Tensors must not alias each other (as on the GPU backends): restrict lets loops vectorize.
    const bool read_only = access_[i] == passes::Access::kRead || access_[i] == passes::Access::kNone;
    const std::string ty = std::string(read_only ? "const " : "") + StorageType(p.dtype);
    Line(ty + "* const TL_RESTRICT " + Id(p.name) + " = (" + ty + "*)" + arg + ";");
  }
  for (size_t i = 0; i < f_.symbols.size(); ++i) {
    const ir::Symbol& sym = f_.symbols[i];
    Line("const " + std::string(ValueType(sym.dtype)) + " " + Id(sym.name) + " = (" + ValueType(sym.dtype) +
         ")tl_d->symbols[" + std::to_string(i) + "];");
  }
  for (size_t i = 0; i < k.block_vars.size(); ++i) {
    Line("const int32_t " + Id(k.block_vars[i]) + " = (int32_t)tl_b->block[" + std::to_string(i) + "];");
  }
  for (const auto& [name, l] : layouts_.buffers) {
    std::string shape;
    for (int64_t d : l.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    const std::string what = std::string(ir::MemScopeName(l.scope)) + "[" + shape + "] " + ir::DTypeName(l.dtype);
    auto it = scratch_offset_.find(name);
    if (l.order != passes::ElementOrder::kRowMajor) {
      Line("float* const TL_RESTRICT " + Id(name) + " = (float*)(tl_scratch + " + std::to_string(it->second) +
           ");  // " + what + ", as f32 gemm " + (l.order == passes::ElementOrder::kGemmPanelsA ? "A" : "B") +
           " panels" + (l.trans ? " (transposed)" : ""));
      const bool a = l.order == passes::ElementOrder::kGemmPanelsA;
      const auto [x, kx] = PanelExtents(l);
      const std::string w = a ? "TL_MR" : "TL_NR";
      Line("static_assert((" + std::to_string(x) + " + " + w + " - 1) / " + w + " * " + w + " * " + std::to_string(kx) +
           " <= " + std::to_string(PanelFloats(l)) + ", \"" + name + ": panels sized for another microkernel\");");
    } else if (it == scratch_offset_.end()) {
      Line(std::string(StorageType(l.dtype)) + " " + Id(name) + "[" + std::to_string(l.elements) +
           "] __attribute__((aligned(64)));  // " + what);
    } else {
      Line(std::string(StorageType(l.dtype)) + "* const TL_RESTRICT " + Id(name) + " = (" + StorageType(l.dtype) +
           "*)(tl_scratch + " + std::to_string(it->second) + ");  // " + what);
    }
  }
  out_ << body;
  Line("return 0;");
  Close();
  return out_.str();
}

}  // namespace tl::codegen::cpu
