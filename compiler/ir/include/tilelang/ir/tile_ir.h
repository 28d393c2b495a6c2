// Tile IR v1: the in-memory form of the text format in formats/tile_ir.md.
//
// The IR is a tree of plain value types. Every node kind is a struct; an
// expression or a statement is a `std::variant` over those structs, so a pass
// pattern-matches with `std::visit`, `std::get_if<Gemm>(&stmt.node)` or a
// switch over `Kind(stmt)`. Children are held by value (`Box<T>` for the
// recursive expression edges), which gives the IR value semantics:
//
//   * copying a Module, Function, Stmt or Expr is a deep clone (see Clone());
//   * `==` is structural equality (see StructurallyEqual());
//   * nothing is shared, so a pass may mutate what it owns freely.
//
// Names, not pointers, link uses to definitions: names are unique within a
// function (the spec guarantees it; Verify() checks it), so a flat
// SymbolTable built by CollectSymbols() answers "what is this name" for any
// use. Every reference that produces a value (VarRef, Load) caches the dtype
// of its definition so ExprDType() needs no context.
//
// Source locations live on statements and functions (the text format has
// `loc(...)` there only); a diagnostic about an expression quotes the
// location of its statement.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::ir {

// ---------------------------------------------------------------------------
// Basic vocabulary
// ---------------------------------------------------------------------------

enum class DType : uint8_t { kBool, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kBF16, kF32, kF64 };

// "i32", "bf16", ... (the spelling of the text format).
const char* DTypeName(DType t);
std::optional<DType> ParseDType(std::string_view name);
bool IsInt(DType t);     // signed or unsigned integer; not bool
bool IsSigned(DType t);  // signed integer
bool IsFloat(DType t);   // f16, bf16, f32, f64
int BitWidth(DType t);   // bool is 1

// Rounds `v` to the nearest value of float dtype `t` (ties to even; beyond
// the largest finite value, infinity), returned as a double. Identity for
// f64 and for NaN and infinities.
double RoundToDType(double v, DType t);

// A position in the Python tile program: `loc("file.py", 12)`.
struct Loc {
  std::string file;
  int64_t line = 0;
  bool operator==(const Loc&) const = default;
};
// "file.py:12"; empty for nullopt.
std::string ToString(const std::optional<Loc>& loc);

// A heap cell with value semantics: copying deep-copies the pointee and `==`
// compares pointees. Used for the recursive edges of the expression tree.
// Invariant: never null, except after being moved from (then it may only be
// assigned to or destroyed).
template <typename T>
class Box {
 public:
  Box() : ptr_(std::make_unique<T>()) {}
  Box(T value) : ptr_(std::make_unique<T>(std::move(value))) {}  // NOLINT: implicit by design
  Box(const Box& other) : ptr_(std::make_unique<T>(*other.ptr_)) {}
  Box(Box&&) noexcept = default;
  Box& operator=(const Box& other) {
    if (this != &other) ptr_ = std::make_unique<T>(*other.ptr_);
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  ~Box() = default;

  T& operator*() { return *ptr_; }
  const T& operator*() const { return *ptr_; }
  T* operator->() { return ptr_.get(); }
  const T* operator->() const { return ptr_.get(); }
  bool operator==(const Box& other) const { return *ptr_ == *other.ptr_; }

 private:
  std::unique_ptr<T> ptr_;
};

// ---------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------

struct Expr;

// Integer and boolean literal. `value` holds the exact value; for u64 it holds
// the bit pattern (use AsUnsigned()). Invariant: the value fits `dtype`
// (bool: 0 or 1).
struct IntImm {
  int64_t value = 0;
  DType dtype = DType::kI32;
  uint64_t AsUnsigned() const { return static_cast<uint64_t>(value); }
  bool operator==(const IntImm&) const = default;
};

// Float literal. Invariant: `value` is a value of `dtype` (the written number
// rounded to it, see RoundToDType), held exactly in a double. Equality is
// bitwise-like: NaN equals NaN, -0.0 != 0.0.
struct FloatImm {
  double value = 0.0;
  DType dtype = DType::kF32;
  bool operator==(const FloatImm& other) const;
};

// A use of a scalar name: block index, loop index, let, var, scalar parameter
// or dynamic symbol. `dtype` is the definition's dtype.
struct VarRef {
  std::string name;
  DType dtype = DType::kI32;
  bool operator==(const VarRef&) const = default;
};

// `buffer[i, j]`: an element load from a tensor parameter or an allocation.
// `dtype` is the buffer's element dtype.
struct Load {
  std::string buffer;
  std::vector<Expr> indices;
  DType dtype = DType::kF32;
  bool operator==(const Load&) const = default;
};

enum class UnaryOp : uint8_t { kNeg, kNot, kBitNot };  // - ! ~
const char* UnaryOpSpelling(UnaryOp op);

struct Unary {
  UnaryOp op = UnaryOp::kNeg;
  Box<Expr> operand;
  bool operator==(const Unary&) const = default;
};

// Integer `/` and `%` are floor division and floor modulo (Python semantics);
// truncating forms are the calls truncdiv/truncmod.
enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kMod,            // + - * / %
  kShl, kShr,                              // << >>
  kLt, kLe, kGt, kGe, kEq, kNe,            // < <= > >= == !=
  kBitAnd, kBitXor, kBitOr,                // & ^ |
  kAnd, kOr,                               // && ||
};
const char* BinaryOpSpelling(BinaryOp op);
bool IsComparison(BinaryOp op);  // < <= > >= == !=
bool IsLogical(BinaryOp op);     // && ||

struct Binary {
  BinaryOp op = BinaryOp::kAdd;
  Box<Expr> lhs;
  Box<Expr> rhs;
  bool operator==(const Binary&) const = default;
};

// `select(cond, a, b)`: only the chosen side is evaluated.
struct Select {
  Box<Expr> cond;
  Box<Expr> true_value;
  Box<Expr> false_value;
  bool operator==(const Select&) const = default;
};

// `cast<dtype>(value)`. Float to int truncates toward zero.
struct Cast {
  DType dtype = DType::kF32;
  Box<Expr> value;
  bool operator==(const Cast&) const = default;
};

enum class CallOp : uint8_t {
  // One float argument, same dtype out (abs also takes integers).
  kExp, kExp2, kLog, kLog2, kSqrt, kRsqrt, kTanh, kSigmoid, kAbs, kFloor, kCeil, kRound, kSin, kCos,
  // Two arguments of one dtype, that dtype out.
  kPow, kMax, kMin,
  // Two integer arguments of one dtype, that dtype out.
  kTruncDiv, kTruncMod, kCeilDiv,
};
const char* CallOpName(CallOp op);  // "exp", "truncdiv", ...
std::optional<CallOp> ParseCallOp(std::string_view name);
int CallArity(CallOp op);

struct Call {
  CallOp op = CallOp::kExp;
  std::vector<Expr> args;
  bool operator==(const Call&) const = default;
};

// Alternative order is the order of ExprKind.
enum class ExprKind : uint8_t { kIntImm, kFloatImm, kVarRef, kLoad, kUnary, kBinary, kSelect, kCast, kCall };
const char* ExprKindName(ExprKind k);

struct Expr {
  std::variant<IntImm, FloatImm, VarRef, Load, Unary, Binary, Select, Cast, Call> node;
  bool operator==(const Expr&) const = default;
};

inline ExprKind Kind(const Expr& e) { return static_cast<ExprKind>(e.node.index()); }
template <typename T>
const T* As(const Expr& e) { return std::get_if<T>(&e.node); }
template <typename T>
T* As(Expr& e) { return std::get_if<T>(&e.node); }

// Construction helpers (they do not check dtypes; Verify() does).
Expr MakeInt(int64_t value, DType dtype = DType::kI32);
Expr MakeBool(bool value);
Expr MakeFloat(double value, DType dtype = DType::kF32);  // rounds value to dtype
Expr MakeVar(std::string name, DType dtype = DType::kI32);
Expr MakeLoad(std::string buffer, std::vector<Expr> indices, DType dtype);
Expr MakeUnary(UnaryOp op, Expr operand);
Expr MakeBinary(BinaryOp op, Expr lhs, Expr rhs);
Expr MakeSelect(Expr cond, Expr true_value, Expr false_value);
Expr MakeCast(DType dtype, Expr value);
Expr MakeCall(CallOp op, std::vector<Expr> args);

// The dtype of an expression, computed locally: a binary takes its lhs's
// dtype (bool for comparisons and logical ops), a call its first argument's,
// a select its true side's. Meaningful for verified IR.
DType ExprDType(const Expr& e);

// Evaluates an integer (or bool) expression. Names are looked up through
// `lookup` when given (e.g. dynamic symbols bound at launch); anything else
// that is not a constant (loads, floats, unknown names) gives nullopt, as
// does division by zero. Arithmetic wraps to the expression's dtype, like the
// generated code (a u64 result is returned as its bit pattern; bool as 0/1).
// Use it for region extents, allocation dims, grid dims.
using NameLookup = std::function<std::optional<int64_t>(std::string_view name)>;
std::optional<int64_t> FoldInt(const Expr& e, const NameLookup& lookup = nullptr);

// Replaces every integer/bool subexpression that FoldInt() evaluates by its
// literal (loads and floats are left alone). `ceildiv(512, 64)` becomes `8`.
Expr FoldConstants(const Expr& e);

// ---------------------------------------------------------------------------
// Regions
// ---------------------------------------------------------------------------

// One dimension of a region: `start:extent`, or the single index `start`
// (extent 1) when `extent` is absent.
struct RegionDim {
  Expr start;
  std::optional<Expr> extent;
  bool operator==(const RegionDim&) const = default;
};

// `NAME` (the whole buffer; `dims` empty) or `NAME[r, ...]` (one entry per
// buffer dimension).
struct Region {
  std::string buffer;
  std::vector<RegionDim> dims;
  bool operator==(const Region&) const = default;
  bool IsWholeBuffer() const { return dims.empty(); }
};

// ---------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------

struct Stmt;
using Block = std::vector<Stmt>;

// `kernel grid(...) threads(...) -> (bx, ...) { body }`. Invariants (after
// Verify): 1-3 grid exprs, as many block_vars (dtype i32), 1-3 constant
// positive thread extents.
struct Kernel {
  std::vector<Expr> grid;
  std::vector<Expr> threads;
  std::vector<std::string> block_vars;
  Block body;
  bool operator==(const Kernel&) const = default;
};

// Where a buffer lives. Tensor parameters are kGlobal; allocations are not.
enum class MemScope : uint8_t { kGlobal, kShared, kFragment, kLocal };
const char* MemScopeName(MemScope s);  // "global", "shared", "fragment", "local"

// `alloc NAME: SCOPE[DIM, ...] DTYPE`. Invariant (after Verify): dims are
// positive integer constants (FoldInt succeeds), scope is not kGlobal.
struct Alloc {
  std::string name;
  MemScope scope = MemScope::kShared;
  std::vector<Expr> shape;
  DType dtype = DType::kF32;
  bool operator==(const Alloc&) const = default;
};

// `var NAME: DTYPE [= EXPR]`: a per-thread mutable scalar.
struct VarDecl {
  std::string name;
  DType dtype = DType::kI32;
  std::optional<Expr> init;
  bool operator==(const VarDecl&) const = default;
};

// `let NAME = EXPR`: an immutable binding; its dtype is the value's.
struct Let {
  std::string name;
  Expr value;
  bool operator==(const Let&) const = default;
};

// `NAME[i, ...] = EXPR`.
struct Store {
  std::string buffer;
  std::vector<Expr> indices;
  Expr value;
  bool operator==(const Store&) const = default;
};

// `NAME = EXPR` where NAME is a `var`.
struct Assign {
  std::string name;
  Expr value;
  bool operator==(const Assign&) const = default;
};

enum class LoopKind : uint8_t { kSerial, kUnroll, kPipelined };
const char* LoopKindName(LoopKind k);  // "serial", "unroll", "pipelined"

// `for var in serial|unroll(start, stop[, step])` or
// `for var in pipelined(start, stop, stages=N)`. The loop variable has the
// dtype of `start`. `step` is absent when not written (meaning 1); pipelined
// loops have no step. `stages` is meaningful for pipelined loops only.
struct For {
  std::string var;
  LoopKind kind = LoopKind::kSerial;
  Expr start;
  Expr stop;
  std::optional<Expr> step;
  int64_t stages = 0;
  Block body;
  bool operator==(const For&) const = default;
};

// `parallel (i, j) in (E0, E1) { body }`: indices are i32 from 0; extents
// are integer constants (after Verify).
struct Parallel {
  std::vector<std::string> vars;
  std::vector<Expr> extents;
  Block body;
  bool operator==(const Parallel&) const = default;
};

// `if cond { then } [else { else }]`; an empty else_body means no else.
struct If {
  Expr cond;
  Block then_body;
  Block else_body;
  bool operator==(const If&) const = default;
};

// `copy SRC -> DST`.
struct Copy {
  Region src;
  Region dst;
  bool operator==(const Copy&) const = default;
};

// `fill DST, VALUE`.
struct Fill {
  Region dst;
  Expr value;
  bool operator==(const Fill&) const = default;
};

// Upstream's GemmWarpPolicy; kSquare is the default and is not printed.
enum class GemmPolicy : uint8_t { kSquare, kFullRow, kFullCol };
const char* GemmPolicyName(GemmPolicy p);  // "square", "full_row", "full_col"

// `gemm A, B -> C [trans_a] [trans_b] [clear_accum] [policy=P] [k_pack=N] [wg_wait=W]`.
// k_pack defaults to 1 and is printed only when it differs. wg_wait (upstream's,
// default 0, printed when it differs): a wgmma lowering commits the gemm's group
// and then waits until at most W groups are in flight; -1 leaves it in flight
// until a `hint wait_wgmma N` retires it. Other lowerings keep the gemm
// synchronous (the result is the same for a program that touches C and a
// register A only after the wait).
struct Gemm {
  Region a;
  Region b;
  Region c;
  bool trans_a = false;
  bool trans_b = false;
  bool clear_accum = false;
  GemmPolicy policy = GemmPolicy::kSquare;
  int64_t k_pack = 1;
  int64_t wg_wait = 0;  // -1 or 0..7
  bool operator==(const Gemm&) const = default;
};

enum class ReduceOp : uint8_t { kSum, kMax, kMin, kAbsSum, kAbsMax };
const char* ReduceOpName(ReduceOp op);  // "sum", "max", "min", "abssum", "absmax"

// `reduce OP SRC -> DST dim=D [clear]`. `dim` is as written (negative counts
// from the end); see NormalizeDim().
struct Reduce {
  ReduceOp op = ReduceOp::kSum;
  Region src;
  Region dst;
  int64_t dim = 0;
  bool clear = false;
  bool operator==(const Reduce&) const = default;
};

// `cumsum SRC -> DST dim=D [reverse]`: inclusive prefix sum.
struct Cumsum {
  Region src;
  Region dst;
  int64_t dim = 0;
  bool reverse = false;
  bool operator==(const Cumsum&) const = default;
};

// `atomic_add DST, VALUE`: scalar into one element (every extent 1).
struct AtomicAdd {
  Region dst;
  Expr value;
  bool operator==(const AtomicAdd&) const = default;
};

// `atomic_add SRC -> DST`: a tile into a tile, elementwise.
struct AtomicAddTile {
  Region src;
  Region dst;
  bool operator==(const AtomicAddTile&) const = default;
};

// `sync`: T.sync_threads.
struct Sync {
  bool operator==(const Sync&) const = default;
};

// One argument of a hint: an integer, a name (identifier) or a string.
struct HintArg {
  enum class Kind : uint8_t { kInt, kName, kString };
  Kind kind = Kind::kInt;
  int64_t int_value = 0;  // kInt
  std::string text;       // kName, kString
  bool operator==(const HintArg&) const = default;
};

// `hint NAME [ARG, ...]`: never changes results; backends may ignore it.
struct Hint {
  std::string name;
  std::vector<HintArg> args;
  bool operator==(const Hint&) const = default;
};

// One argument of an extern call: a value, or (`address`) the address of the
// buffer element `value` names, which is then a Load (`&NAME[i, ...]`).
struct ExternArg {
  bool address = false;
  Expr value;
  bool operator==(const ExternArg&) const = default;
};

// `call_extern DTYPE NAME(ARG, ...)`: upstream's T.call_extern of a device
// function from the function's imported source (Function::sources), run by
// each thread that reaches it (outside T.Parallel: every thread of the
// block; inside: once per iteration). `dtype` is the declared result type;
// the result is not used (a statement). Only the CUDA backend runs it.
struct CallExtern {
  DType dtype = DType::kI32;
  std::string name;
  std::vector<ExternArg> args;
  bool operator==(const CallExtern&) const = default;
};

// Alternative order is the order of StmtKind.
enum class StmtKind : uint8_t {
  kKernel, kAlloc, kVarDecl, kLet, kStore, kAssign, kFor, kParallel, kIf,
  kCopy, kFill, kGemm, kReduce, kCumsum, kAtomicAdd, kAtomicAddTile, kSync, kHint, kCallExtern,
};
// The statement's keyword: "kernel", "alloc", "var", "let", "store",
// "assign", "for", "parallel", "if", "copy", ..., "atomic_add", "sync", "hint",
// "call_extern".
const char* StmtKindName(StmtKind k);

struct Stmt {
  std::variant<Kernel, Alloc, VarDecl, Let, Store, Assign, For, Parallel, If, Copy, Fill, Gemm, Reduce,
               Cumsum, AtomicAdd, AtomicAddTile, Sync, Hint, CallExtern>
      node;
  std::optional<Loc> loc;
  bool operator==(const Stmt&) const = default;
};

inline StmtKind Kind(const Stmt& s) { return static_cast<StmtKind>(s.node.index()); }
template <typename T>
const T* As(const Stmt& s) { return std::get_if<T>(&s.node); }
template <typename T>
T* As(Stmt& s) { return std::get_if<T>(&s.node); }

// ---------------------------------------------------------------------------
// Functions and modules
// ---------------------------------------------------------------------------

// `NAME: tensor[DIM, ...] DTYPE` or `NAME: DTYPE`. Tensor dims are IntImm or
// VarRef naming a dynamic symbol (after Verify).
struct Param {
  enum class Kind : uint8_t { kTensor, kScalar };
  std::string name;
  Kind kind = Kind::kTensor;
  std::vector<Expr> shape;  // empty for scalars
  DType dtype = DType::kF32;
  bool operator==(const Param&) const = default;
};

// A dynamic shape symbol from `dynamic(NAME: DTYPE, ...)`.
struct Symbol {
  std::string name;
  DType dtype = DType::kI32;
  bool operator==(const Symbol&) const = default;
};

struct Function {
  std::string name;  // without the '@'
  std::vector<Param> params;
  std::vector<Symbol> symbols;
  Block body;  // kernel statements only (after Verify)
  std::optional<Loc> loc;
  // Device source imported with T.import_source (`import_source "..."` at
  // the top of the body), in order, each text once: the CUDA printer emits
  // it verbatim before the kernel; call_extern statements call into it.
  std::vector<std::string> sources;
  bool operator==(const Function&) const = default;
};

struct Module {
  int version = 1;
  std::vector<Function> functions;
  bool operator==(const Module&) const = default;
};

// Deep copy. (Copying does the same; this names the intent.)
template <typename T>
T Clone(const T& node) { return node; }

// Structural equality; with compare_locs=false source locations are ignored.
bool StructurallyEqual(const Module& a, const Module& b, bool compare_locs = true);
bool StructurallyEqual(const Function& a, const Function& b, bool compare_locs = true);
void StripLocs(Module& m);

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

// What a name in a function stands for.
struct SymbolInfo {
  enum class Kind : uint8_t {
    kTensorParam, kScalarParam, kDynamicSymbol, kBlockIndex, kLoopVar, kParallelVar, kLet, kVar, kAlloc,
  };
  Kind kind = Kind::kScalarParam;
  DType dtype = DType::kI32;
  MemScope scope = MemScope::kGlobal;  // buffers (kTensorParam, kAlloc) only
  std::vector<Expr> shape;             // buffers only
  const Stmt* def = nullptr;           // defining statement; null for params and symbols
  bool IsBuffer() const { return kind == Kind::kTensorParam || kind == Kind::kAlloc; }
};
using SymbolTable = std::map<std::string, SymbolInfo, std::less<>>;

// Every name a function defines. With duplicate names (invalid IR) the first
// definition wins. Pointers into `f` stay valid while `f` is not modified.
SymbolTable CollectSymbols(const Function& f);

// The shape of a region over a buffer of shape `buffer_shape`: the buffer's
// shape for a whole-buffer region, else each dim's extent (1 for an index).
std::vector<Expr> RegionShape(const Region& r, const std::vector<Expr>& buffer_shape);

// Maps a possibly negative `dim` into [0, rank); nullopt when out of range.
std::optional<int64_t> NormalizeDim(int64_t dim, int64_t rank);

// ---------------------------------------------------------------------------
// Walking
// ---------------------------------------------------------------------------

// Calls `fn` on every statement of `block`, pre-order, descending into
// kernel, loop, parallel and if bodies.
void ForEachStmt(const Block& block, const std::function<void(const Stmt&)>& fn);
void ForEachStmt(Block& block, const std::function<void(Stmt&)>& fn);

// Calls `fn` on each expression held directly by `s` (grid and thread dims,
// values, indices, region starts and extents, loop bounds, ...), not on its
// nested statements and not on subexpressions. Mutating through the
// non-const overload rewrites the statement in place.
void ForEachExprOf(const Stmt& s, const std::function<void(const Expr&)>& fn);
void ForEachExprOf(Stmt& s, const std::function<void(Expr&)>& fn);

// Calls `fn` on `e` and every subexpression, pre-order.
void WalkExpr(const Expr& e, const std::function<void(const Expr&)>& fn);

// Rebuilds `e` bottom-up: children first, then `fn` on the node with its new
// children; `fn` returns a replacement or nullopt to keep the node.
Expr RewriteExpr(const Expr& e, const std::function<std::optional<Expr>(const Expr&)>& fn);

// ---------------------------------------------------------------------------
// Text format, verification
// ---------------------------------------------------------------------------

// Parses Tile IR text; the first error ends parsing (kInvalidArgument):
// "gemm.tir:12:7: expected ',' or ']', found '->' (at gemm.py:21)", where the
// parenthesized loc is the statement's own or its nearest enclosing one.
// Names are resolved (VarRef/Load dtypes filled in); an undefined name is a
// parse error. Literals are checked against their dtype; float literals are
// rounded to it. Nesting is bounded (200 levels of parentheses, unary
// operators and blocks; expression trees 1000 deep), so hostile input gets
// an error, not a stack overflow. Semantic rules are Verify()'s.
StatusOr<Module> ParseModule(std::string_view text, std::string_view filename = "<input>");

// The canonical text: function headers on one line, two-space indentation,
// one statement per line, floats exact and suffixed (shortest decimal for
// the dtype, Python repr style), minimal parentheses.
// ParseModule(Print(m)) == m for any module ParseModule produced (and for any
// verified module); the Python frontend emits this same form.
std::string Print(const Module& m);
std::string Print(const Function& f);
std::string Print(const Stmt& s, int indent = 0);  // with nested blocks, newline-terminated
std::string Print(const Expr& e);
std::string Print(const Region& r);

// Checks every rule of the spec (names, dtypes, constants, scopes, shapes of
// tile ops, structure). On failure (kInvalidArgument) the message lists each
// error on its own line, at most 50:
// "@gemm: copy at gemm.py:21: expected equal shapes ..., found source ...".
Status Verify(const Module& m);
Status Verify(const Function& f);

}  // namespace tl::ir
