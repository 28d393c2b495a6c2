// The canonical printer of Tile IR text (formats/tile_ir.md).
//
// Canonical form: `tileir 1`, then each function after a blank line, its
// header on one line; two spaces of indentation per block; one statement per
// line; `loc(...)` at the
// end of a simple statement and before the `{` of a block statement; the
// fewest parentheses that reparse to the same tree; i32 integer literals and
// nothing else unsuffixed; floats as the shortest decimal that reads back to
// the same value of their dtype (see FormatFloat).
#include <array>
#include <charconv>
#include <cmath>
#include <string>

#include "tilelang/ir/tile_ir.h"

namespace tl::ir {

namespace {

// Binding strength of binary operators, loosest = 1 (the spec's table).
// Unary operators bind at kUnaryPrec, primaries at kPrimaryPrec.
constexpr int kUnaryPrec = 11;
constexpr int kPrimaryPrec = 12;

int Precedence(BinaryOp op) {
  switch (op) {
    case BinaryOp::kOr: return 1;
    case BinaryOp::kAnd: return 2;
    case BinaryOp::kBitOr: return 3;
    case BinaryOp::kBitXor: return 4;
    case BinaryOp::kBitAnd: return 5;
    case BinaryOp::kEq:
    case BinaryOp::kNe: return 6;
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe: return 7;
    case BinaryOp::kShl:
    case BinaryOp::kShr: return 8;
    case BinaryOp::kAdd:
    case BinaryOp::kSub: return 9;
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMod: return 10;
  }
  return 0;
}

int Precedence(const Expr& e) {
  if (const auto* b = As<Binary>(e)) return Precedence(b->op);
  if (Kind(e) == ExprKind::kUnary) return kUnaryPrec;
  return kPrimaryPrec;
}

bool IsLiteral(const Expr& e) { return Kind(e) == ExprKind::kIntImm || Kind(e) == ExprKind::kFloatImm; }

void AppendQuoted(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {  // bytes >= 0x80 (UTF-8) stay as they are, as the frontend writes them
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
}

// The shortest decimal that rounds back to `v` in dtype `t`, written the way
// Python's repr writes a float (fixed notation for exponents -4..15, with at
// least one fractional digit; otherwise d.ddde-N) minus repr's exponent
// padding and '+': `0.1`, `200.0`, `1e-5`, `1.5e16`, `-0.0`. The Python
// frontend writes the same text, so its output is already canonical.
std::string FormatFloat(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::array<char, 64> buf{};
  char* end = buf.data();
  for (int precision = 1; precision <= 17; ++precision) {
    end = std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific, precision - 1).ptr;
    double back = 0;
    std::from_chars(buf.data(), end, back);
    if (RoundToDType(back, t) == v) break;
  }
  // buf holds "-d.ddde+XX": split into sign, digits and decimal exponent.
  std::string_view sci(buf.data(), static_cast<size_t>(end - buf.data()));
  bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits += c;
  }
  int exp10 = 0;
  std::string_view exp_text = sci.substr(e_pos + 1);
  if (exp_text.front() == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exp10);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

  std::string text = negative ? "-" : "";
  if (exp10 < -4 || exp10 > 15) {
    text += digits[0];
    if (digits.size() > 1) text += "." + digits.substr(1);
    text += "e" + std::to_string(exp10);
  } else if (exp10 < 0) {
    text += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else {
    auto int_digits = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_digits) {
      text += digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      text += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return text;
}

class Printer {
 public:
  std::string Take() { return std::move(out_); }

  void PrintModule(const Module& m) {
    out_ += "tileir " + std::to_string(m.version) + "\n";
    for (const Function& f : m.functions) {
      out_ += "\n";
      PrintFunction(f);
    }
  }

  void PrintFunction(const Function& f) {
    out_ += "func @" + f.name + "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Param& p = f.params[i];
      if (i) out_ += ", ";
      out_ += p.name + ": ";
      if (p.kind == Param::Kind::kTensor) {
        out_ += "tensor";
        PrintExprList(p.shape, '[', ']');
        out_ += ' ';
      }
      out_ += DTypeName(p.dtype);
    }
    out_ += ")";
    if (!f.symbols.empty()) {
      out_ += " dynamic(";
      for (size_t i = 0; i < f.symbols.size(); ++i) {
        if (i) out_ += ", ";
        out_ += f.symbols[i].name + ": " + DTypeName(f.symbols[i].dtype);
      }
      out_ += ")";
    }
    PrintLoc(f.loc);
    out_ += " {\n";
    for (const std::string& src : f.sources) {
      out_ += "  import_source ";
      AppendQuoted(out_, src);
      out_ += '\n';
    }
    PrintBlock(f.body, 1);
    out_ += "}\n";
  }

  void PrintExpr(const Expr& e) {
    std::visit([&](const auto& n) { PrintNode(n); }, e.node);
  }

  void PrintTopStmt(const Stmt& s, int depth) { PrintStmt(s, depth); }

  void PrintRegion(const Region& r) {
    out_ += r.buffer;
    if (r.dims.empty()) return;
    out_ += '[';
    for (size_t i = 0; i < r.dims.size(); ++i) {
      if (i) out_ += ", ";
      PrintExpr(r.dims[i].start);
      if (r.dims[i].extent) {
        out_ += ':';
        PrintExpr(*r.dims[i].extent);
      }
    }
    out_ += ']';
  }

 private:
  void Indent(int depth) { out_.append(static_cast<size_t>(depth) * 2, ' '); }

  void PrintLoc(const std::optional<Loc>& loc) {
    if (!loc) return;
    out_ += " loc(";
    AppendQuoted(out_, loc->file);
    out_ += ", " + std::to_string(loc->line) + ")";
  }

  void PrintBlock(const Block& b, int depth) {
    for (const Stmt& s : b) PrintStmt(s, depth);
  }

  // Prints ` loc(...) {`, the body, and the closing brace on its own line.
  void PrintBody(const std::optional<Loc>& loc, const Block& body, int depth) {
    PrintLoc(loc);
    out_ += " {\n";
    PrintBlock(body, depth + 1);
    Indent(depth);
    out_ += "}";
  }

  void PrintExprList(const std::vector<Expr>& es, char open, char close) {
    out_ += open;
    for (size_t i = 0; i < es.size(); ++i) {
      if (i) out_ += ", ";
      PrintExpr(es[i]);
    }
    out_ += close;
  }

  void PrintNames(const std::vector<std::string>& names) {
    out_ += '(';
    for (size_t i = 0; i < names.size(); ++i) {
      if (i) out_ += ", ";
      out_ += names[i];
    }
    out_ += ')';
  }

  // One statement (with nested blocks), indented `depth` levels.
  void PrintStmt(const Stmt& s, int depth) {
    Indent(depth);
    bool has_body = false;
    std::visit(
        [&](const auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, Kernel> || std::is_same_v<N, For> || std::is_same_v<N, Parallel> ||
                        std::is_same_v<N, If>) {
            has_body = true;
          }
          PrintStmtNode(n, s.loc, depth);
        },
        s.node);
    if (!has_body) PrintLoc(s.loc);
    out_ += '\n';
  }

  void PrintStmtNode(const Kernel& k, const std::optional<Loc>& loc, int depth) {
    out_ += "kernel grid";
    PrintExprList(k.grid, '(', ')');
    out_ += " threads";
    PrintExprList(k.threads, '(', ')');
    out_ += " -> ";
    PrintNames(k.block_vars);
    PrintBody(loc, k.body, depth);
  }
  void PrintStmtNode(const Alloc& a, const std::optional<Loc>&, int) {
    out_ += "alloc " + a.name + ": " + MemScopeName(a.scope);
    PrintExprList(a.shape, '[', ']');
    out_ += ' ';
    out_ += DTypeName(a.dtype);
  }
  void PrintStmtNode(const VarDecl& v, const std::optional<Loc>&, int) {
    out_ += "var " + v.name + ": " + DTypeName(v.dtype);
    if (v.init) {
      out_ += " = ";
      PrintExpr(*v.init);
    }
  }
  void PrintStmtNode(const Let& l, const std::optional<Loc>&, int) {
    out_ += "let " + l.name + " = ";
    PrintExpr(l.value);
  }
  void PrintStmtNode(const Store& st, const std::optional<Loc>&, int) {
    out_ += st.buffer;
    PrintExprList(st.indices, '[', ']');
    out_ += " = ";
    PrintExpr(st.value);
  }
  void PrintStmtNode(const Assign& a, const std::optional<Loc>&, int) {
    out_ += a.name + " = ";
    PrintExpr(a.value);
  }
  void PrintStmtNode(const For& f, const std::optional<Loc>& loc, int depth) {
    out_ += "for " + f.var + " in " + LoopKindName(f.kind) + "(";
    PrintExpr(f.start);
    out_ += ", ";
    PrintExpr(f.stop);
    if (f.kind == LoopKind::kPipelined) {
      out_ += ", stages=" + std::to_string(f.stages);
    } else if (f.step) {
      out_ += ", ";
      PrintExpr(*f.step);
    }
    out_ += ")";
    PrintBody(loc, f.body, depth);
  }
  void PrintStmtNode(const Parallel& p, const std::optional<Loc>& loc, int depth) {
    out_ += "parallel ";
    PrintNames(p.vars);
    out_ += " in ";
    PrintExprList(p.extents, '(', ')');
    PrintBody(loc, p.body, depth);
  }
  void PrintStmtNode(const If& i, const std::optional<Loc>& loc, int depth) {
    out_ += "if ";
    PrintExpr(i.cond);
    PrintBody(loc, i.then_body, depth);
    if (!i.else_body.empty()) {
      out_ += " else {\n";
      PrintBlock(i.else_body, depth + 1);
      Indent(depth);
      out_ += "}";
    }
  }
  void PrintStmtNode(const Copy& c, const std::optional<Loc>&, int) {
    out_ += "copy ";
    PrintRegion(c.src);
    out_ += " -> ";
    PrintRegion(c.dst);
  }
  void PrintStmtNode(const Fill& f, const std::optional<Loc>&, int) {
    out_ += "fill ";
    PrintRegion(f.dst);
    out_ += ", ";
    PrintExpr(f.value);
  }
  void PrintStmtNode(const Gemm& g, const std::optional<Loc>&, int) {
    out_ += "gemm ";
    PrintRegion(g.a);
    out_ += ", ";
    PrintRegion(g.b);
    out_ += " -> ";
    PrintRegion(g.c);
    if (g.trans_a) out_ += " trans_a";
    if (g.trans_b) out_ += " trans_b";
    if (g.clear_accum) out_ += " clear_accum";
    if (g.policy != GemmPolicy::kSquare) out_ += std::string(" policy=") + GemmPolicyName(g.policy);
    if (g.k_pack != 1) out_ += " k_pack=" + std::to_string(g.k_pack);
    if (g.wg_wait != 0) out_ += " wg_wait=" + std::to_string(g.wg_wait);
  }
  void PrintStmtNode(const Reduce& r, const std::optional<Loc>&, int) {
    out_ += std::string("reduce ") + ReduceOpName(r.op) + " ";
    PrintRegion(r.src);
    out_ += " -> ";
    PrintRegion(r.dst);
    out_ += " dim=" + std::to_string(r.dim);
    if (r.clear) out_ += " clear";
  }
  void PrintStmtNode(const Cumsum& c, const std::optional<Loc>&, int) {
    out_ += "cumsum ";
    PrintRegion(c.src);
    out_ += " -> ";
    PrintRegion(c.dst);
    out_ += " dim=" + std::to_string(c.dim);
    if (c.reverse) out_ += " reverse";
  }
  void PrintStmtNode(const AtomicAdd& a, const std::optional<Loc>&, int) {
    out_ += "atomic_add ";
    PrintRegion(a.dst);
    out_ += ", ";
    PrintExpr(a.value);
  }
  void PrintStmtNode(const AtomicAddTile& a, const std::optional<Loc>&, int) {
    out_ += "atomic_add ";
    PrintRegion(a.src);
    out_ += " -> ";
    PrintRegion(a.dst);
  }
  void PrintStmtNode(const Sync&, const std::optional<Loc>&, int) { out_ += "sync"; }
  void PrintStmtNode(const Hint& h, const std::optional<Loc>&, int) {
    out_ += "hint " + h.name;
    for (size_t i = 0; i < h.args.size(); ++i) {
      out_ += i ? ", " : " ";
      const HintArg& a = h.args[i];
      switch (a.kind) {
        case HintArg::Kind::kInt: out_ += std::to_string(a.int_value); break;
        case HintArg::Kind::kName: out_ += a.text; break;
        case HintArg::Kind::kString: AppendQuoted(out_, a.text); break;
      }
    }
  }

  void PrintStmtNode(const CallExtern& c, const std::optional<Loc>&, int) {
    out_ += std::string("call_extern ") + DTypeName(c.dtype) + " " + c.name + "(";
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (i) out_ += ", ";
      if (c.args[i].address) out_ += '&';
      PrintExpr(c.args[i].value);
    }
    out_ += ')';
  }

  // --- expressions ---

  void PrintNode(const IntImm& n) {
    if (n.dtype == DType::kBool) {
      out_ += n.value ? "true" : "false";
      return;
    }
    out_ += n.dtype == DType::kU64 ? std::to_string(n.AsUnsigned()) : std::to_string(n.value);
    if (n.dtype != DType::kI32) {
      out_ += ':';
      out_ += DTypeName(n.dtype);
    }
  }

  void PrintNode(const FloatImm& n) {
    out_ += FormatFloat(n.value, n.dtype);
    out_ += ':';
    out_ += DTypeName(n.dtype);
  }

  void PrintNode(const VarRef& n) { out_ += n.name; }

  void PrintNode(const Load& n) {
    out_ += n.buffer;
    PrintExprList(n.indices, '[', ']');
  }

  void PrintNode(const Unary& n) {
    out_ += UnaryOpSpelling(n.op);
    // A literal right after '-' would read back as a negative literal, so a
    // negated literal keeps its parentheses; nested unary operators get them
    // too, for legibility (`-(-x)`, not `--x`).
    bool parens = Precedence(*n.operand) <= kUnaryPrec || (n.op == UnaryOp::kNeg && IsLiteral(*n.operand));
    PrintOperand(*n.operand, parens);
  }

  void PrintNode(const Binary& n) {
    int prec = Precedence(n.op);
    // All binary operators associate to the left.
    PrintOperand(*n.lhs, Precedence(*n.lhs) < prec);
    out_ += ' ';
    out_ += BinaryOpSpelling(n.op);
    out_ += ' ';
    PrintOperand(*n.rhs, Precedence(*n.rhs) <= prec);
  }

  void PrintNode(const Select& n) {
    out_ += "select(";
    PrintExpr(*n.cond);
    out_ += ", ";
    PrintExpr(*n.true_value);
    out_ += ", ";
    PrintExpr(*n.false_value);
    out_ += ')';
  }

  void PrintNode(const Cast& n) {
    out_ += "cast<";
    out_ += DTypeName(n.dtype);
    out_ += ">(";
    PrintExpr(*n.value);
    out_ += ')';
  }

  void PrintNode(const Call& n) {
    out_ += CallOpName(n.op);
    PrintExprList(n.args, '(', ')');
  }

  void PrintOperand(const Expr& e, bool parens) {
    if (parens) out_ += '(';
    PrintExpr(e);
    if (parens) out_ += ')';
  }

  std::string out_;
};

}  // namespace

std::string Print(const Module& m) {
  Printer p;
  p.PrintModule(m);
  return p.Take();
}

std::string Print(const Function& f) {
  Printer p;
  p.PrintFunction(f);
  return p.Take();
}

std::string Print(const Stmt& s, int indent) {
  Printer p;
  p.PrintTopStmt(s, indent);
  return p.Take();
}

std::string Print(const Expr& e) {
  Printer p;
  p.PrintExpr(e);
  return p.Take();
}

std::string Print(const Region& r) {
  Printer p;
  p.PrintRegion(r);
  return p.Take();
}

}  // namespace tl::ir
