// Recursive-descent parser of Tile IR text (formats/tile_ir.md).
//
// The parser resolves names as it goes (a scope per block, the spec's "rest
// of the enclosing block" rule), so every VarRef and Load carries its
// definition's dtype. Everything else semantic is Verify()'s.
//
// Errors: the first one ends parsing. It is raised as an internal ParseError
// exception, caught in ParseModule() (nothing escapes the API), and reads
//   FILE:LINE:COL: expected WHAT, found WHAT (at PY_FILE:PY_LINE)
// where the parenthesized part is the `loc(...)` of the statement being
// parsed or, failing that, of the innermost enclosing statement or function
// that has one.
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include "lexer.h"
#include "tilelang/ir/tile_ir.h"

namespace tl::ir {

namespace {

using detail::Describe;
using detail::Token;
using detail::TokKind;

struct ParseError {
  std::string message;
};

// Limits that keep hostile input from exhausting the stack: the parser
// recurses on parentheses, unary operators and blocks (kMaxNesting), and the
// printer, the verifier and the destructors recurse on the depth of an
// expression tree, which a long operator chain builds without parser
// recursion (kMaxExprDepth). Real programs stay far below both.
constexpr int kMaxNesting = 200;
constexpr int kMaxExprDepth = 1000;

// What the parser needs to know about a name to type its uses.
struct NameInfo {
  DType dtype = DType::kI32;
  bool is_buffer = false;
};

// Binding strength of a binary operator token; 0 when the token is not one.
int BinaryPrecedence(const Token& t, BinaryOp* op) {
  struct Entry {
    std::string_view text;
    BinaryOp op;
    int prec;
  };
  static constexpr Entry kOps[] = {
      {"||", BinaryOp::kOr, 1},  {"&&", BinaryOp::kAnd, 2}, {"|", BinaryOp::kBitOr, 3},
      {"^", BinaryOp::kBitXor, 4}, {"&", BinaryOp::kBitAnd, 5}, {"==", BinaryOp::kEq, 6},
      {"!=", BinaryOp::kNe, 6},  {"<", BinaryOp::kLt, 7},   {"<=", BinaryOp::kLe, 7},
      {">", BinaryOp::kGt, 7},   {">=", BinaryOp::kGe, 7},  {"<<", BinaryOp::kShl, 8},
      {">>", BinaryOp::kShr, 8}, {"+", BinaryOp::kAdd, 9},  {"-", BinaryOp::kSub, 9},
      {"*", BinaryOp::kMul, 10}, {"/", BinaryOp::kDiv, 10}, {"%", BinaryOp::kMod, 10},
  };
  if (t.kind != TokKind::kPunct) return 0;
  for (const Entry& e : kOps) {
    if (t.text == e.text) {
      *op = e.op;
      return e.prec;
    }
  }
  return 0;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view filename)
      : toks_(std::move(tokens)), filename_(filename) {}

  Module Run() {
    Module m;
    SkipNewlines();
    if (!Peek().IsIdent("tileir")) Expected("'tileir 1' (the version line)");
    Next();
    const Token& v = Peek();
    if (v.kind != TokKind::kInt || v.suffix) Expected("a version number after 'tileir'");
    if (v.text != "1") Fail(v, "unsupported Tile IR version " + v.text + "; this parser reads version 1");
    Next();
    ExpectStmtEnd("end of line after the version");
    while (true) {
      SkipNewlines();
      if (Peek().kind == TokKind::kEof) break;
      if (!Peek().IsIdent("func")) Expected("'func' or end of input");
      m.functions.push_back(ParseFunction());
      if (Peek().kind != TokKind::kEof) ExpectStmtEnd("end of line after the function");
    }
    return m;
  }

 private:
  // --- token access ---------------------------------------------------------

  const Token& Peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& Next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  void SkipNewlines() {
    while (Peek().kind == TokKind::kNewline) Next();
  }
  bool AcceptPunct(std::string_view p) {
    if (!Peek().IsPunct(p)) return false;
    Next();
    return true;
  }
  bool AcceptIdent(std::string_view word) {
    if (!Peek().IsIdent(word)) return false;
    Next();
    return true;
  }
  void ExpectPunct(std::string_view p) {
    if (!AcceptPunct(p)) Expected("'" + std::string(p) + "'");
  }
  void ExpectKeyword(std::string_view word) {
    if (!AcceptIdent(word)) Expected("'" + std::string(word) + "'");
  }
  std::string ExpectIdent(std::string_view what) {
    if (Peek().kind != TokKind::kIdent) Expected(what);
    return Next().text;
  }
  // A statement ends at a newline, ';', '}' or the end of input.
  bool AtStmtEnd() const {
    const Token& t = Peek();
    return t.kind == TokKind::kNewline || t.kind == TokKind::kEof || t.IsPunct(";") || t.IsPunct("}") || AtLoc();
  }
  void ExpectStmtEnd(std::string_view what) {
    const Token& t = Peek();
    if (t.kind == TokKind::kNewline || t.IsPunct(";") || t.IsPunct("}") || t.kind == TokKind::kEof) return;
    Expected(what);
  }
  bool AtLoc() const { return Peek().IsIdent("loc") && Peek(1).IsPunct("("); }

  // --- diagnostics -----------------------------------------------------------

  [[noreturn]] void Fail(const Token& at, const std::string& message) {
    std::string text = filename_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) + ": ";
    // A lexical error replaces whatever the parser expected: it is the cause.
    text += at.kind == TokKind::kError ? at.text : message;
    if (std::optional<Loc> loc = EnclosingLoc()) text += " (at " + ToString(loc) + ")";
    throw ParseError{std::move(text)};
  }
  [[noreturn]] void Expected(std::string_view what) {
    Fail(Peek(), "expected " + std::string(what) + ", found " + Describe(Peek()));
  }

  // The loc(...) written on the statement being parsed (found by scanning
  // ahead to the statement's end, since loc comes last), else the innermost
  // enclosing one.
  std::optional<Loc> EnclosingLoc() const {
    for (size_t i = stmt_start_; i + 5 < toks_.size(); ++i) {
      const Token& t = toks_[i];
      if (t.kind == TokKind::kEof || t.kind == TokKind::kError || t.IsPunct(";") || t.IsPunct("}")) break;
      if (t.kind == TokKind::kNewline) {
        if (in_header_) continue;
        break;
      }
      if (t.IsIdent("loc") && toks_[i + 1].IsPunct("(") && toks_[i + 2].kind == TokKind::kString &&
          toks_[i + 3].IsPunct(",") && toks_[i + 4].kind == TokKind::kInt && toks_[i + 5].IsPunct(")")) {
        return Loc{toks_[i + 2].text, std::strtoll(toks_[i + 4].text.c_str(), nullptr, 10)};
      }
      if (t.IsPunct("{")) break;
    }
    for (auto it = loc_stack_.rbegin(); it != loc_stack_.rend(); ++it) {
      if (*it) return *it;
    }
    return std::nullopt;
  }

  // --- names -----------------------------------------------------------------

  void Define(const std::string& name, NameInfo info) { scopes_.back()[name] = info; }
  const NameInfo* Lookup(std::string_view name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }
  const NameInfo& LookupOrFail(const Token& at) {
    const NameInfo* info = Lookup(at.text);
    if (!info) Fail(at, "undefined name '" + at.text + "'");
    return *info;
  }
  // Consumes a buffer name (tensor parameter or allocation).
  std::pair<std::string, NameInfo> ExpectBuffer() {
    if (Peek().kind != TokKind::kIdent) Expected("a buffer name");
    const Token& t = Next();
    const NameInfo& info = LookupOrFail(t);
    if (!info.is_buffer) Fail(t, "expected a buffer, found scalar '" + t.text + "'");
    return {t.text, info};
  }

  // --- functions and blocks ----------------------------------------------------

  Function ParseFunction() {
    Function f;
    stmt_start_ = pos_;
    in_header_ = true;
    ExpectKeyword("func");
    ExpectPunct("@");
    f.name = ExpectIdent("a function name after '@'");
    ExpectPunct("(");
    // Shape symbols may be used before `dynamic(...)` declares them; their
    // uses are resolved once the header is read.
    std::vector<SymbolUse> symbol_uses;
    if (!Peek().IsPunct(")")) {
      do {
        Param p;
        p.name = ExpectIdent("a parameter name");
        ExpectPunct(":");
        if (AcceptIdent("tensor")) {
          p.kind = Param::Kind::kTensor;
          ExpectPunct("[");
          do {
            const Token& t = Peek();
            if (t.kind == TokKind::kInt) {
              p.shape.push_back(ParseLiteral(false));
            } else if (t.kind == TokKind::kIdent) {
              symbol_uses.push_back(SymbolUse{f.params.size(), p.shape.size(), t});
              p.shape.push_back(MakeVar(t.text));
              Next();
            } else {
              Expected("a dimension (an integer or a dynamic symbol)");
            }
          } while (AcceptPunct(","));
          if (!AcceptPunct("]")) Expected("',' or ']'");
        } else {
          p.kind = Param::Kind::kScalar;
        }
        p.dtype = ExpectDType();
        f.params.push_back(std::move(p));
      } while (AcceptPunct(","));
    }
    if (!AcceptPunct(")")) Expected("',' or ')'");
    SkipNewlines();
    if (AcceptIdent("dynamic")) {
      ExpectPunct("(");
      do {
        Symbol s;
        s.name = ExpectIdent("a symbol name");
        ExpectPunct(":");
        s.dtype = ExpectDType();
        f.symbols.push_back(std::move(s));
      } while (AcceptPunct(","));
      if (!AcceptPunct(")")) Expected("',' or ')'");
    }
    SkipNewlines();
    f.loc = ParseOptLoc();
    SkipNewlines();
    in_header_ = false;
    ResolveShapeSymbols(f, symbol_uses);

    scopes_.clear();
    scopes_.emplace_back();
    for (const Param& p : f.params) Define(p.name, NameInfo{p.dtype, p.kind == Param::Kind::kTensor});
    for (const Symbol& s : f.symbols) Define(s.name, NameInfo{s.dtype, false});
    sources_ = &f.sources;  // `import_source "..."` lines at the function's top level
    f.body = ParseBlock(f.loc, {});
    scopes_.clear();
    return f;
  }

  // A dynamic symbol named in a tensor shape: parameter and dim index, and
  // the token for diagnostics.
  struct SymbolUse {
    size_t param;
    size_t dim;
    Token token;
  };

  // Gives each symbol named in a tensor shape the dtype from dynamic(...).
  void ResolveShapeSymbols(Function& f, const std::vector<SymbolUse>& uses) {
    for (const SymbolUse& use : uses) {
      VarRef* v = As<VarRef>(f.params[use.param].shape[use.dim]);
      bool found = false;
      for (const Symbol& s : f.symbols) {
        if (s.name == v->name) {
          v->dtype = s.dtype;
          found = true;
        }
      }
      if (!found) {
        Fail(use.token, "expected a symbol declared in dynamic(...) in the shape of parameter '" +
                            f.params[use.param].name + "', found undeclared '" + v->name + "'");
      }
    }
  }

  // '{' statements '}', in a new scope holding `names`.
  Block ParseBlock(const std::optional<Loc>& loc, const std::vector<std::pair<std::string, NameInfo>>& names) {
    NestingGuard guard(*this);
    ExpectPunct("{");
    scopes_.emplace_back();
    for (const auto& [name, info] : names) Define(name, info);
    loc_stack_.push_back(loc);
    std::vector<std::string>* sources = sources_;  // only the function's own block takes them
    sources_ = nullptr;
    Block block;
    while (true) {
      while (Peek().kind == TokKind::kNewline || Peek().IsPunct(";")) Next();
      if (AcceptPunct("}")) break;
      if (Peek().kind == TokKind::kEof) Expected("'}'");
      if (Peek().IsIdent("import_source") && !Peek(1).IsPunct("=") && !Peek(1).IsPunct("[")) {
        if (!sources) Fail(Peek(), "expected import_source only at the top level of a function, found it nested");
        Next();
        if (Peek().kind != TokKind::kString) Expected("the imported source as a string after 'import_source'");
        sources->push_back(Next().text);
        ExpectStmtEnd("end of line after the imported source");
        continue;
      }
      block.push_back(ParseStmt());
    }
    loc_stack_.pop_back();
    scopes_.pop_back();
    return block;
  }

  std::optional<Loc> ParseOptLoc() {
    if (!AtLoc()) return std::nullopt;
    Next();
    Next();
    if (Peek().kind != TokKind::kString) Expected("a file name string in loc(...)");
    Loc loc;
    loc.file = Next().text;
    ExpectPunct(",");
    if (Peek().kind != TokKind::kInt || Peek().suffix) Expected("a line number in loc(...)");
    loc.line = std::strtoll(Next().text.c_str(), nullptr, 10);
    ExpectPunct(")");
    return loc;
  }

  // --- statements --------------------------------------------------------------

  // One statement and its terminator (checked while the statement is still
  // the one whose loc diagnostics quote).
  Stmt ParseStmt() {
    size_t saved_start = stmt_start_;
    stmt_start_ = pos_;
    Stmt s = ParseStmtInner();
    ExpectStmtEnd("end of line or ';' after the statement");
    stmt_start_ = saved_start;
    return s;
  }

  Stmt ParseStmtInner() {
    const Token& t = Peek();
    if (t.kind != TokKind::kIdent) Expected("a statement");
    Stmt s;
    // `NAME = ...` and `NAME[...] = ...` come first: keywords are reserved
    // only where they start a statement.
    if (Peek(1).IsPunct("=")) {
      s.node = ParseAssign();
    } else if (Peek(1).IsPunct("[")) {
      s.node = ParseStore();
    } else if (t.text == "kernel") {
      return ParseKernel();
    } else if (t.text == "for") {
      return ParseFor();
    } else if (t.text == "parallel") {
      return ParseParallel();
    } else if (t.text == "if") {
      return ParseIf();
    } else if (t.text == "alloc") {
      s.node = ParseAlloc();
    } else if (t.text == "var") {
      s.node = ParseVar();
    } else if (t.text == "let") {
      s.node = ParseLet();
    } else if (t.text == "copy") {
      Next();
      Copy c;
      c.src = ParseRegion();
      ExpectPunct("->");
      c.dst = ParseRegion();
      s.node = std::move(c);
    } else if (t.text == "fill") {
      Next();
      Fill f;
      f.dst = ParseRegion();
      ExpectPunct(",");
      f.value = ParseExpr();
      s.node = std::move(f);
    } else if (t.text == "gemm") {
      s.node = ParseGemm();
    } else if (t.text == "reduce") {
      s.node = ParseReduce();
    } else if (t.text == "cumsum") {
      s.node = ParseCumsum();
    } else if (t.text == "atomic_add") {
      Next();
      Region first = ParseRegion();
      if (AcceptPunct("->")) {
        s.node = AtomicAddTile{std::move(first), ParseRegion()};
      } else if (AcceptPunct(",")) {
        s.node = AtomicAdd{std::move(first), ParseExpr()};
      } else {
        Expected("',' (scalar form) or '->' (tile form) after the atomic_add region");
      }
    } else if (t.text == "sync") {
      Next();
      s.node = Sync{};
    } else if (t.text == "hint") {
      s.node = ParseHint();
    } else if (t.text == "call_extern") {
      s.node = ParseCallExtern();
    } else {
      Expected(
          "a statement (kernel, alloc, var, let, for, parallel, if, copy, fill, gemm, reduce, cumsum, "
          "atomic_add, sync, hint, call_extern, NAME = ..., NAME[...] = ...)");
    }
    s.loc = ParseOptLoc();
    return s;
  }

  // `call_extern DTYPE NAME(ARG, ...)`, each ARG an expression or `&BUF[i, ...]`.
  CallExtern ParseCallExtern() {
    Next();
    CallExtern c;
    c.dtype = ExpectDType();
    c.name = ExpectIdent("the extern function's name");
    ExpectPunct("(");
    if (!AcceptPunct(")")) {
      do {
        ExternArg a;
        if (AcceptPunct("&")) {
          a.address = true;
          const auto [name, info] = ExpectBuffer();
          ExpectPunct("[");
          std::vector<Expr> indices = ParseExprList("]");
          a.value = MakeLoad(name, std::move(indices), info.dtype);
        } else {
          a.value = ParseExpr();
        }
        c.args.push_back(std::move(a));
      } while (AcceptPunct(","));
      if (!AcceptPunct(")")) Expected("',' or ')'");
    }
    return c;
  }

  Assign ParseAssign() {
    const Token& t = Next();
    const NameInfo& info = LookupOrFail(t);
    if (info.is_buffer) Fail(t, "expected a var name before '=', found buffer '" + t.text + "'");
    Assign a;
    a.name = t.text;
    ExpectPunct("=");
    a.value = ParseExpr();
    return a;
  }

  Store ParseStore() {
    Store st;
    st.buffer = ExpectBuffer().first;
    ExpectPunct("[");
    st.indices = ParseExprList("]");
    ExpectPunct("=");
    st.value = ParseExpr();
    return st;
  }

  Stmt ParseKernel() {
    Next();
    Kernel k;
    ExpectKeyword("grid");
    ExpectPunct("(");
    k.grid = ParseExprList(")");
    if (AcceptIdent("threads")) {
      ExpectPunct("(");
      k.threads = ParseExprList(")");
    } else {
      k.threads.push_back(MakeInt(128));  // T.Kernel's default
    }
    ExpectPunct("->");
    ExpectPunct("(");
    std::vector<std::pair<std::string, NameInfo>> names;
    do {
      k.block_vars.push_back(ExpectIdent("a block index name"));
      names.emplace_back(k.block_vars.back(), NameInfo{DType::kI32, false});
    } while (AcceptPunct(","));
    if (!AcceptPunct(")")) Expected("',' or ')'");
    Stmt s;
    s.loc = ParseOptLoc();
    k.body = ParseBlock(s.loc, names);
    s.node = std::move(k);
    return s;
  }

  Stmt ParseFor() {
    Next();
    For f;
    f.var = ExpectIdent("a loop variable name");
    ExpectKeyword("in");
    const Token& kind = Peek();
    if (kind.IsIdent("serial")) {
      f.kind = LoopKind::kSerial;
    } else if (kind.IsIdent("unroll")) {
      f.kind = LoopKind::kUnroll;
    } else if (kind.IsIdent("pipelined")) {
      f.kind = LoopKind::kPipelined;
    } else {
      Expected("serial, unroll or pipelined");
    }
    Next();
    ExpectPunct("(");
    f.start = ParseExpr();
    ExpectPunct(",");
    f.stop = ParseExpr();
    if (AcceptPunct(",")) {
      if (f.kind == LoopKind::kPipelined) {
        ExpectKeyword("stages");
        ExpectPunct("=");
        f.stages = ParseSignedInt("the number of stages");
      } else {
        f.step = ParseExpr();
      }
    }
    ExpectPunct(")");
    Stmt s;
    s.loc = ParseOptLoc();
    f.body = ParseBlock(s.loc, {{f.var, NameInfo{ExprDType(f.start), false}}});
    s.node = std::move(f);
    return s;
  }

  Stmt ParseParallel() {
    Next();
    Parallel p;
    ExpectPunct("(");
    std::vector<std::pair<std::string, NameInfo>> names;
    do {
      p.vars.push_back(ExpectIdent("a parallel index name"));
      names.emplace_back(p.vars.back(), NameInfo{DType::kI32, false});
    } while (AcceptPunct(","));
    if (!AcceptPunct(")")) Expected("',' or ')'");
    ExpectKeyword("in");
    ExpectPunct("(");
    const Token& open = Peek();
    p.extents = ParseExprList(")");
    if (p.extents.size() != p.vars.size()) {
      Fail(open, "expected " + std::to_string(p.vars.size()) + " parallel extent(s), one per index, found " +
                     std::to_string(p.extents.size()));
    }
    Stmt s;
    s.loc = ParseOptLoc();
    p.body = ParseBlock(s.loc, names);
    s.node = std::move(p);
    return s;
  }

  Stmt ParseIf() {
    Next();
    If i;
    i.cond = ParseExpr();
    Stmt s;
    s.loc = ParseOptLoc();
    i.then_body = ParseBlock(s.loc, {});
    // `else` may follow on the next line.
    size_t before = pos_;
    SkipNewlines();
    if (AcceptIdent("else")) {
      i.else_body = ParseBlock(s.loc, {});
    } else {
      pos_ = before;
    }
    s.node = std::move(i);
    return s;
  }

  Alloc ParseAlloc() {
    Next();
    Alloc a;
    a.name = ExpectIdent("a buffer name");
    ExpectPunct(":");
    const Token& scope = Peek();
    if (scope.IsIdent("shared")) {
      a.scope = MemScope::kShared;
    } else if (scope.IsIdent("fragment")) {
      a.scope = MemScope::kFragment;
    } else if (scope.IsIdent("local")) {
      a.scope = MemScope::kLocal;
    } else {
      Expected("shared, fragment or local");
    }
    Next();
    ExpectPunct("[");
    a.shape = ParseExprList("]");
    a.dtype = ExpectDType();
    Define(a.name, NameInfo{a.dtype, true});
    return a;
  }

  VarDecl ParseVar() {
    Next();
    VarDecl v;
    v.name = ExpectIdent("a var name");
    ExpectPunct(":");
    v.dtype = ExpectDType();
    if (AcceptPunct("=")) v.init = ParseExpr();
    Define(v.name, NameInfo{v.dtype, false});
    return v;
  }

  Let ParseLet() {
    Next();
    Let l;
    l.name = ExpectIdent("a name after 'let'");
    ExpectPunct("=");
    l.value = ParseExpr();
    Define(l.name, NameInfo{ExprDType(l.value), false});
    return l;
  }

  Gemm ParseGemm() {
    Next();
    Gemm g;
    g.a = ParseRegion();
    ExpectPunct(",");
    g.b = ParseRegion();
    ExpectPunct("->");
    g.c = ParseRegion();
    while (!AtStmtEnd()) {
      if (AcceptIdent("trans_a")) {
        g.trans_a = true;
      } else if (AcceptIdent("trans_b")) {
        g.trans_b = true;
      } else if (AcceptIdent("clear_accum")) {
        g.clear_accum = true;
      } else if (AcceptIdent("policy")) {
        ExpectPunct("=");
        if (AcceptIdent("square")) {
          g.policy = GemmPolicy::kSquare;
        } else if (AcceptIdent("full_row")) {
          g.policy = GemmPolicy::kFullRow;
        } else if (AcceptIdent("full_col")) {
          g.policy = GemmPolicy::kFullCol;
        } else {
          Expected("square, full_row or full_col");
        }
      } else if (AcceptIdent("k_pack")) {
        ExpectPunct("=");
        g.k_pack = ParseSignedInt("the k_pack factor");
      } else if (AcceptIdent("wg_wait")) {
        ExpectPunct("=");
        g.wg_wait = ParseSignedInt("the wg_wait count");
      } else {
        Expected("a gemm flag (trans_a, trans_b, clear_accum, policy=..., k_pack=..., wg_wait=...) or end of line");
      }
    }
    return g;
  }

  Reduce ParseReduce() {
    Next();
    Reduce r;
    static constexpr std::pair<std::string_view, ReduceOp> kOps[] = {{"sum", ReduceOp::kSum},
                                                                     {"max", ReduceOp::kMax},
                                                                     {"min", ReduceOp::kMin},
                                                                     {"abssum", ReduceOp::kAbsSum},
                                                                     {"absmax", ReduceOp::kAbsMax}};
    bool found = false;
    for (const auto& [name, op] : kOps) {
      if (Peek().IsIdent(name)) {
        r.op = op;
        found = true;
      }
    }
    if (!found) Expected("a reduction (sum, max, min, abssum, absmax)");
    Next();
    r.src = ParseRegion();
    ExpectPunct("->");
    r.dst = ParseRegion();
    r.dim = ParseDimAttr();
    while (!AtStmtEnd()) {
      if (!AcceptIdent("clear")) Expected("'clear' or end of line");
      r.clear = true;
    }
    return r;
  }

  Cumsum ParseCumsum() {
    Next();
    Cumsum c;
    c.src = ParseRegion();
    ExpectPunct("->");
    c.dst = ParseRegion();
    c.dim = ParseDimAttr();
    while (!AtStmtEnd()) {
      if (!AcceptIdent("reverse")) Expected("'reverse' or end of line");
      c.reverse = true;
    }
    return c;
  }

  int64_t ParseDimAttr() {
    ExpectKeyword("dim");
    ExpectPunct("=");
    return ParseSignedInt("a dimension index");
  }

  Hint ParseHint() {
    Next();
    Hint h;
    h.name = ExpectIdent("a hint name");
    if (AtStmtEnd()) return h;
    do {
      HintArg a;
      const Token& t = Peek();
      if (t.kind == TokKind::kInt || t.IsPunct("-")) {
        a.kind = HintArg::Kind::kInt;
        a.int_value = ParseSignedInt("an integer");
      } else if (t.kind == TokKind::kIdent) {
        a.kind = HintArg::Kind::kName;
        a.text = Next().text;
      } else if (t.kind == TokKind::kString) {
        a.kind = HintArg::Kind::kString;
        a.text = Next().text;
      } else {
        Expected("a hint argument (integer, name or string)");
      }
      h.args.push_back(std::move(a));
    } while (AcceptPunct(","));
    return h;
  }

  // `-`? INT, without dtype suffix, as an int64.
  int64_t ParseSignedInt(std::string_view what) {
    bool neg = AcceptPunct("-");
    const Token& t = Peek();
    if (t.kind != TokKind::kInt || t.suffix) Expected(what);
    Expr e = ParseLiteral(neg);
    return As<IntImm>(e)->value;
  }

  DType ExpectDType() {
    const Token& t = Peek();
    std::optional<DType> dt;
    if (t.kind == TokKind::kIdent) dt = ParseDType(t.text);
    if (!dt) Expected("a dtype (bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64)");
    Next();
    return *dt;
  }

  Region ParseRegion() {
    Region r;
    r.buffer = ExpectBuffer().first;
    if (!AcceptPunct("[")) return r;
    do {
      RegionDim d;
      d.start = ParseExpr();
      if (AcceptPunct(":")) d.extent = ParseExpr();
      r.dims.push_back(std::move(d));
    } while (AcceptPunct(","));
    if (!AcceptPunct("]")) Expected("',' or ']'");
    return r;
  }

  // --- expressions -------------------------------------------------------------

  // Every expression parser below sets depth_ to the depth of the tree it
  // returns (a leaf is 1), so that the depth is known without walking.
  // SetDepth enforces kMaxExprDepth on every tree built.
  void SetDepth(int depth) {
    if (depth > kMaxExprDepth) {
      Fail(Peek(), "expected expressions at most " + std::to_string(kMaxExprDepth) + " levels deep, found deeper");
    }
    depth_ = depth;
  }

  // Comma-separated expressions up to and including `close`; depth_ is the
  // deepest element's (0 when empty).
  std::vector<Expr> ParseExprList(std::string_view close) {
    std::vector<Expr> out;
    int depth = 0;
    if (!AcceptPunct(close)) {
      do {
        out.push_back(ParseExpr());
        depth = std::max(depth, depth_);
      } while (AcceptPunct(","));
      if (!AcceptPunct(close)) Expected("',' or '" + std::string(close) + "'");
    }
    depth_ = depth;
    return out;
  }

  Expr ParseExpr() { return ParseBinary(1); }

  // Precedence climbing; every binary operator associates to the left.
  Expr ParseBinary(int min_prec) {
    Expr lhs = ParseUnary();
    int depth = depth_;
    while (true) {
      BinaryOp op{};
      int prec = BinaryPrecedence(Peek(), &op);
      if (prec == 0 || prec < min_prec) break;
      Next();
      Expr rhs = ParseBinary(prec + 1);
      SetDepth(std::max(depth, depth_) + 1);
      depth = depth_;
      lhs = MakeBinary(op, std::move(lhs), std::move(rhs));
    }
    depth_ = depth;
    return lhs;
  }

  // Counts one level of nesting for its lifetime; fails past kMaxNesting.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) {
        p_.Fail(p_.Peek(), "expected at most " + std::to_string(kMaxNesting) + " levels of nesting, found more");
      }
    }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& p_;
  };

  Expr ParseUnary() {
    NestingGuard guard(*this);
    if (AcceptPunct("-")) {
      // `-4` and `-0.5:f16` are literals, not negations (the printer writes
      // a negated literal as `-(4)`).
      if (Peek().kind == TokKind::kInt || Peek().kind == TokKind::kFloat) return ParseLiteral(true);
      return Wrap(UnaryOp::kNeg, ParseUnary());
    }
    if (AcceptPunct("!")) return Wrap(UnaryOp::kNot, ParseUnary());
    if (AcceptPunct("~")) return Wrap(UnaryOp::kBitNot, ParseUnary());
    return ParsePrimary();
  }

  // A unary node over the operand just parsed.
  Expr Wrap(UnaryOp op, Expr operand) {
    SetDepth(depth_ + 1);
    return MakeUnary(op, std::move(operand));
  }

  Expr ParsePrimary() {
    const Token& t = Peek();
    if (t.kind == TokKind::kInt || t.kind == TokKind::kFloat) return ParseLiteral(false);
    if (AcceptPunct("(")) {
      Expr e = ParseExpr();
      ExpectPunct(")");
      return e;
    }
    if (t.kind != TokKind::kIdent) Expected("an expression");
    if (t.text == "true" || t.text == "false") {
      Next();
      depth_ = 1;
      return MakeBool(t.text == "true");
    }
    if (t.text == "cast" && Peek(1).IsPunct("<")) {
      Next();
      Next();
      DType dt = ExpectDType();
      ExpectPunct(">");
      ExpectPunct("(");
      Expr value = ParseExpr();
      ExpectPunct(")");
      SetDepth(depth_ + 1);
      return MakeCast(dt, std::move(value));
    }
    if (Peek(1).IsPunct("(")) return ParseCall();
    const Token& name = Next();
    const NameInfo& info = LookupOrFail(name);
    if (AcceptPunct("[")) {
      if (!info.is_buffer) Fail(name, "expected a buffer before '[', found scalar '" + name.text + "'");
      std::vector<Expr> indices = ParseExprList("]");
      SetDepth(depth_ + 1);
      return MakeLoad(name.text, std::move(indices), info.dtype);
    }
    if (info.is_buffer) {
      Fail(name, "expected a scalar value, found buffer '" + name.text + "' (write " + name.text +
                     "[...] to load an element)");
    }
    depth_ = 1;
    return MakeVar(name.text, info.dtype);
  }

  Expr ParseCall() {
    const Token& name = Next();
    Next();  // (
    if (name.text == "select") {
      std::vector<Expr> args = ParseExprList(")");
      if (args.size() != 3) {
        Fail(name, "expected 3 arguments to select, found " + std::to_string(args.size()));
      }
      SetDepth(depth_ + 1);
      return MakeSelect(std::move(args[0]), std::move(args[1]), std::move(args[2]));
    }
    std::optional<CallOp> op = ParseCallOp(name.text);
    if (!op) {
      Fail(name, "expected a function (exp, exp2, log, log2, sqrt, rsqrt, tanh, sigmoid, abs, floor, ceil, "
                 "round, sin, cos, pow, max, min, truncdiv, truncmod, ceildiv, select, cast), found '" +
                     name.text + "'");
    }
    std::vector<Expr> args = ParseExprList(")");
    if (static_cast<int>(args.size()) != CallArity(*op)) {
      Fail(name, "expected " + std::to_string(CallArity(*op)) + " argument(s) to " + name.text + ", found " +
                     std::to_string(args.size()));
    }
    SetDepth(depth_ + 1);
    return MakeCall(*op, std::move(args));
  }

  // An integer or float literal token, negated when `neg` (the '-' was
  // already consumed). Checks that the value fits its dtype.
  Expr ParseLiteral(bool neg) {
    const Token& t = Next();
    depth_ = 1;
    std::string spelled = (neg ? "-" : "") + t.text;
    bool float_suffix = t.suffix && IsFloat(*t.suffix);
    if (t.kind == TokKind::kFloat || float_suffix) {
      if (t.suffix && !IsFloat(*t.suffix)) {
        Fail(t, std::string("expected a float dtype suffix on float literal '") + spelled + "', found ':" +
                    DTypeName(*t.suffix) + "'");
      }
      // MakeFloat rounds the written value to the dtype.
      double v = ParseFloatText(t);
      return MakeFloat(neg ? -v : v, t.suffix.value_or(DType::kF32));
    }
    // Integer: magnitude first, then the range of the dtype.
    uint64_t mag = 0;
    bool hex = t.text.size() > 2 && (t.text[1] == 'x' || t.text[1] == 'X');
    std::string_view digits = hex ? std::string_view(t.text).substr(2) : std::string_view(t.text);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mag, hex ? 16 : 10);
    if (ec == std::errc::result_out_of_range) Fail(t, "integer literal '" + spelled + "' does not fit in 64 bits");
    if (ec != std::errc() || end != digits.data() + digits.size()) {
      Fail(t, "malformed integer literal '" + spelled + "'");
    }
    DType dt = t.suffix.value_or(DType::kI32);
    uint64_t max_pos = 0;
    uint64_t max_neg = 0;  // magnitude of the most negative value
    if (dt == DType::kBool) {
      max_pos = 1;
    } else if (IsSigned(dt)) {
      max_pos = (uint64_t{1} << (BitWidth(dt) - 1)) - 1;
      max_neg = max_pos + 1;
    } else {
      max_pos = BitWidth(dt) == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << BitWidth(dt)) - 1;
    }
    if ((neg && mag > max_neg) || (!neg && mag > max_pos)) {
      std::string range = IsSigned(dt) ? "-" + std::to_string(max_neg) + ".." + std::to_string(max_pos)
                                       : "0.." + std::to_string(max_pos);
      Fail(t, "integer literal '" + spelled + "' is out of range for " + DTypeName(dt) + " (expected " + range +
                  ")");
    }
    int64_t v = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
    return MakeInt(v, dt);
  }

  double ParseFloatText(const Token& t) {
    if (t.text == "inf") return std::numeric_limits<double>::infinity();
    if (t.text == "nan") return std::numeric_limits<double>::quiet_NaN();
    bool hex = t.text.size() > 2 && (t.text[1] == 'x' || t.text[1] == 'X');
    std::string_view body = hex ? std::string_view(t.text).substr(2) : std::string_view(t.text);
    double v = 0;
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v,
                                     hex ? std::chars_format::hex : std::chars_format::general);
    if (ec == std::errc::result_out_of_range) Fail(t, "float literal '" + t.text + "' is out of range for f64");
    if (ec != std::errc() || end != body.data() + body.size()) Fail(t, "malformed float literal '" + t.text + "'");
    return v;
  }

  std::vector<Token> toks_;
  std::vector<std::string>* sources_ = nullptr;  // the function being parsed (its top-level block only)
  std::string filename_;
  size_t pos_ = 0;
  size_t stmt_start_ = 0;  // first token of the statement being parsed
  bool in_header_ = false; // a function header spans lines
  int nesting_ = 0;        // see NestingGuard
  int depth_ = 0;          // depth of the expression parsed last, see SetDepth
  std::vector<std::map<std::string, NameInfo, std::less<>>> scopes_;
  std::vector<std::optional<Loc>> loc_stack_;
};

}  // namespace

StatusOr<Module> ParseModule(std::string_view text, std::string_view filename) {
  Parser parser(detail::Tokenize(text), filename);
  try {
    return parser.Run();
  } catch (const ParseError& e) {
    return Status(StatusCode::kInvalidArgument, e.message);
  }
}

}  // namespace tl::ir
