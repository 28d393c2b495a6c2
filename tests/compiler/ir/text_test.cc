// Text format tests: canonical round trips of realistic kernels and of every
// statement and expression kind, the spec's own example, non-canonical input,
// exact float printing, and parser diagnostics.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "test_util.h"

namespace tl::ir {
namespace {

using testing::MustParse;
using testing::ParseError;
using testing::ReadFile;
using testing::TestdataPath;
using testing::WrapKernelBody;

// Every testdata file is written in canonical form: it parses, verifies,
// prints back byte for byte, and reparses to an equal module.
class CanonicalFile : public ::testing::TestWithParam<const char*> {};

TEST_P(CanonicalFile, ParsesVerifiesAndPrintsIdentically) {
  std::string text = ReadFile(TestdataPath(GetParam()));
  Module m = MustParse(text);
  Status v = Verify(m);
  EXPECT_TRUE(v.ok()) << v.message();
  std::string printed = Print(m);
  EXPECT_EQ(printed, text);
  Module again = MustParse(printed);
  EXPECT_EQ(again, m);
  EXPECT_EQ(Print(again), printed);
}

INSTANTIATE_TEST_SUITE_P(Testdata, CanonicalFile,
                         ::testing::Values("gemm_pipelined.tir", "flash_attention.tir", "dequant.tir",
                                           "split_k.tir", "all_kinds.tir"),
                         [](const ::testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           return name.substr(0, name.find('.'));
                         });

// all_kinds.tir is the round-trip test of every construct: keep it so.
TEST(Text, AllKindsCoversEveryConstruct) {
  Module m = MustParse(ReadFile(TestdataPath("all_kinds.tir")));
  std::set<StmtKind> stmts;
  std::set<ExprKind> exprs;
  std::set<CallOp> calls;
  std::set<BinaryOp> binaries;
  std::set<UnaryOp> unaries;
  std::set<DType> literal_dtypes;
  std::set<LoopKind> loops;
  std::set<ReduceOp> reductions;
  for (const Function& f : m.functions) {
    ForEachStmt(f.body, [&](const Stmt& s) {
      stmts.insert(Kind(s));
      if (const auto* fo = As<For>(s)) loops.insert(fo->kind);
      if (const auto* r = As<Reduce>(s)) reductions.insert(r->op);
      ForEachExprOf(s, [&](const Expr& top) {
        WalkExpr(top, [&](const Expr& e) {
          exprs.insert(Kind(e));
          if (const auto* c = As<Call>(e)) calls.insert(c->op);
          if (const auto* b = As<Binary>(e)) binaries.insert(b->op);
          if (const auto* u = As<Unary>(e)) unaries.insert(u->op);
          if (const auto* i = As<IntImm>(e)) literal_dtypes.insert(i->dtype);
          if (const auto* fl = As<FloatImm>(e)) literal_dtypes.insert(fl->dtype);
        });
      });
    });
  }
  EXPECT_EQ(stmts.size(), static_cast<size_t>(StmtKind::kCallExtern) + 1);
  EXPECT_EQ(exprs.size(), static_cast<size_t>(ExprKind::kCall) + 1);
  EXPECT_EQ(calls.size(), static_cast<size_t>(CallOp::kCeilDiv) + 1);
  EXPECT_EQ(binaries.size(), static_cast<size_t>(BinaryOp::kOr) + 1);
  EXPECT_EQ(unaries.size(), 3u);
  EXPECT_EQ(literal_dtypes.size(), static_cast<size_t>(DType::kF64) + 1);
  EXPECT_EQ(loops.size(), 2u);  // serial, unroll (pipelined: the kernel files)
  EXPECT_EQ(reductions.size(), static_cast<size_t>(ReduceOp::kAbsMax) + 1);
}

// The example in formats/tile_ir.md is the frontend's reference: it must be
// valid and already canonical.
TEST(Text, SpecExampleIsValidAndCanonical) {
  std::string spec = ReadFile(std::string(TL_TILEIR_SPEC));
  size_t section = spec.find("## A complete example");
  ASSERT_NE(section, std::string::npos);
  size_t open = spec.find("```\n", section);
  ASSERT_NE(open, std::string::npos);
  size_t close = spec.find("```", open + 4);
  ASSERT_NE(close, std::string::npos);
  std::string example = spec.substr(open + 4, close - open - 4);
  Module m = MustParse(example);
  Status v = Verify(m);
  EXPECT_TRUE(v.ok()) << v.message();
  // The example breaks the function header for the page's width; the
  // canonical form keeps it on one line.
  std::string one_line_header = example;
  size_t brk = one_line_header.find(")\n    dynamic(");
  ASSERT_NE(brk, std::string::npos);
  one_line_header.replace(brk, 6, ") ");
  EXPECT_EQ(Print(m), one_line_header);
}

TEST(Text, NonCanonicalInputParsesToTheCanonicalTree) {
  std::string loose = R"(# leading comment
tileir 1   # version

func @f(A: tensor[64] f32, n: i32) {  # no dynamic, no loc
  kernel grid((n + 1)) -> (bx) {      # threads omitted: 128
    alloc S: shared[0x40] f32; var v: f32 = 1.5
    copy A -> S ; sync
    if (n > 0) {
      v = (v * 2:f32)
    }
    else {
      v = 0x1.8p+1:f32
    }
    parallel (i) in (64) {
      S[i] = S[i] + ((v))
    }
    for k in serial(0, n,
                    1) {
      A[k] = -(S[k])
    }
  }
})";
  std::string canonical = R"(tileir 1

func @f(A: tensor[64] f32, n: i32) {
  kernel grid(n + 1) threads(128) -> (bx) {
    alloc S: shared[64] f32
    var v: f32 = 1.5:f32
    copy A -> S
    sync
    if n > 0 {
      v = v * 2.0:f32
    } else {
      v = 3.0:f32
    }
    parallel (i) in (64) {
      S[i] = S[i] + v
    }
    for k in serial(0, n, 1) {
      A[k] = -S[k]
    }
  }
}
)";
  Module m = MustParse(loose);
  EXPECT_EQ(m, MustParse(canonical));
  EXPECT_EQ(Print(m), canonical);
  EXPECT_TRUE(Verify(m).ok()) << Verify(m).message();
}

// Parses `let r = EXPR` in a kernel and returns the expression.
Expr ParseLetValue(const std::string& expr) {
  Module m = MustParse(WrapKernelBody("    let r = " + expr + "\n"));
  if (m.functions.empty()) return Expr{};
  const auto* k = As<Kernel>(m.functions[0].body[0]);
  return As<Let>(k->body[0])->value;
}

TEST(Text, PrecedenceAndAssociativity) {
  struct Case {
    const char* in;
    const char* out;  // canonical form
  };
  const Case cases[] = {
      {"(n + 1) * 2", "(n + 1) * 2"},
      {"n + (1 * 2)", "n + 1 * 2"},
      {"(n - 1) - 2", "n - 1 - 2"},
      {"n - (1 - 2)", "n - (1 - 2)"},
      {"n / 2 * 3", "n / 2 * 3"},
      {"n / (2 * 3)", "n / (2 * 3)"},
      {"1 << n + 1", "1 << n + 1"},
      {"(1 << n) + 1", "(1 << n) + 1"},
      {"n & 1 == 0", "n & 1 == 0"},
      {"(n & 1) == 0", "(n & 1) == 0"},
      {"n | n ^ n & n", "n | n ^ n & n"},
      {"((n | n) ^ n) & n", "((n | n) ^ n) & n"},
      {"n < 1 || n > 2 && n != 3", "n < 1 || n > 2 && n != 3"},
      {"(n < 1 || n > 2) && n != 3", "(n < 1 || n > 2) && n != 3"},
      {"-n * 2", "-n * 2"},
      {"-(n * 2)", "-(n * 2)"},
      {"- 4", "-4"},
      {"-(4)", "-(4)"},
      {"- -4", "-(-4)"},
      {"!!(n < 1)", "!(!(n < 1))"},
      {"~n & n", "~n & n"},
      {"x - -0.5:f32", "x - -0.5:f32"},
  };
  for (const Case& c : cases) {
    Expr e = ParseLetValue(c.in);
    EXPECT_EQ(Print(e), c.out) << "input: " << c.in;
    EXPECT_EQ(ParseLetValue(Print(e)), e) << "input: " << c.in;
  }
  // `-4` is a literal, `-(4)` a negation of one.
  EXPECT_EQ(ParseLetValue("-4"), MakeInt(-4));
  EXPECT_EQ(ParseLetValue("-(4)"), MakeUnary(UnaryOp::kNeg, MakeInt(4)));
  EXPECT_EQ(ParseLetValue("n - 4"), MakeBinary(BinaryOp::kSub, MakeVar("n"), MakeInt(4)));
}

TEST(Text, IntegerLiteralsKeepExactValues) {
  EXPECT_EQ(ParseLetValue("-9223372036854775808:i64"), MakeInt(std::numeric_limits<int64_t>::min(), DType::kI64));
  EXPECT_EQ(ParseLetValue("18446744073709551615:u64"), MakeInt(-1, DType::kU64));
  EXPECT_EQ(Print(MakeInt(-1, DType::kU64)), "18446744073709551615:u64");
  EXPECT_EQ(ParseLetValue("0xff:u8"), MakeInt(255, DType::kU8));
  EXPECT_EQ(ParseLetValue("true"), MakeBool(true));
  EXPECT_EQ(Print(MakeBool(false)), "false");
  EXPECT_EQ(Print(MakeInt(7, DType::kI64)), "7:i64");
  EXPECT_EQ(Print(MakeInt(7)), "7");
}

TEST(Text, FloatLiteralsRoundTripExactly) {
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                0.1,
                                1.0 / 3.0,
                                static_cast<double>(1.0f / 3.0f),
                                1e-6,
                                6.103515625e-05,  // smallest normal f16
                                5e-324,           // smallest subnormal f64
                                std::numeric_limits<double>::max(),
                                static_cast<double>(std::numeric_limits<float>::max()),
                                123456789.125,
                                -2.5e300};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200; ++i) {
    uint64_t bits = rng();
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isfinite(d)) values.push_back(d);
    values.push_back(static_cast<double>(static_cast<float>(rng() % 1000000) / 997.0f));
  }
  for (double v : values) {
    for (DType t : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64}) {
      Expr lit = MakeFloat(v, t);
      std::string text = Print(lit);
      Expr back = ParseLetValue(text);
      const auto* f = As<FloatImm>(back);
      ASSERT_NE(f, nullptr) << text;
      double rounded = RoundToDType(v, t);
      EXPECT_EQ(std::memcmp(&f->value, &rounded, sizeof v), 0) << text;
      EXPECT_EQ(f->dtype, t) << text;
      EXPECT_EQ(Print(back), text);
    }
  }
  // Python repr notation without exponent padding, shortest digits for the
  // dtype: the frontend writes the same text.
  struct Case {
    double value;
    DType dtype;
    const char* text;
  };
  const Case cases[] = {
      {1.0, DType::kF32, "1.0:f32"},
      {-0.0, DType::kF16, "-0.0:f16"},
      {0.1, DType::kF32, "0.1:f32"},
      {0.1, DType::kF64, "0.1:f64"},
      {0.1, DType::kF16, "0.1:f16"},
      {1.0 / 3.0, DType::kF16, "0.3333:f16"},
      {1.0 / 3.0, DType::kBF16, "0.334:bf16"},
      {1.0 / 3.0, DType::kF32, "0.33333334:f32"},
      {200.0, DType::kF32, "200.0:f32"},
      {1e-5, DType::kF32, "1e-5:f32"},
      {1.5e-7, DType::kF64, "1.5e-7:f64"},
      {0.0001, DType::kF32, "0.0001:f32"},
      {1e15, DType::kF64, "1000000000000000.0:f64"},
      {1e16, DType::kF64, "1e16:f64"},
      {1e20, DType::kF64, "1e20:f64"},
      {123456.789, DType::kF64, "123456.789:f64"},
      {65504.0, DType::kF16, "65500.0:f16"},  // shortest text that rounds to 65504
      {70000.0, DType::kF16, "inf:f16"},
  };
  for (const Case& c : cases) EXPECT_EQ(Print(MakeFloat(c.value, c.dtype)), c.text);
  EXPECT_EQ(Print(MakeFloat(-std::numeric_limits<double>::infinity())), "-inf:f32");
  EXPECT_EQ(Print(MakeFloat(std::numeric_limits<double>::quiet_NaN(), DType::kBF16)), "nan:bf16");
  EXPECT_EQ(ParseLetValue("0x1.8p+0:f32"), MakeFloat(1.5));
  EXPECT_EQ(ParseLetValue("1.5"), MakeFloat(1.5, DType::kF32));  // unsuffixed float is f32
  EXPECT_EQ(ParseLetValue("2:f16"), MakeFloat(2.0, DType::kF16));
}

TEST(Text, LocStringsWithEscapesRoundTrip) {
  std::string text = WrapKernelBody("    sync loc(\"dir with \\\"quotes\\\"\\\\x\\n.py\", 7)\n");
  Module m = MustParse(text);
  const auto* k = As<Kernel>(m.functions[0].body[0]);
  ASSERT_TRUE(k->body[0].loc.has_value());
  EXPECT_EQ(k->body[0].loc->file, "dir with \"quotes\"\\x\n.py");
  EXPECT_EQ(k->body[0].loc->line, 7);
  EXPECT_EQ(MustParse(Print(m)), m);
  // Control bytes are escaped; UTF-8 passes through unchanged.
  Module utf8 = MustParse(WrapKernelBody("    sync loc(\"caf\xc3\xa9/\\x7f\\x01.py\", 8)\n"));
  const auto* k2 = As<Kernel>(utf8.functions[0].body[0]);
  EXPECT_EQ(k2->body[0].loc->file, "caf\xc3\xa9/\x7f\x01.py");
  EXPECT_NE(Print(utf8).find("sync loc(\"caf\xc3\xa9/\\x7f\\x01.py\", 8)"), std::string::npos) << Print(utf8);
}

// --- parser diagnostics ------------------------------------------------------

TEST(ParseErrors, VersionMismatchNamesBothVersions) {
  EXPECT_EQ(ParseError("tileir 2\n"), "test.tir:1:8: unsupported Tile IR version 2; this parser reads version 1");
  EXPECT_EQ(ParseError("func @f() {}\n"),
            "test.tir:1:1: expected 'tileir 1' (the version line), found identifier 'func'");
}

TEST(ParseErrors, PositionExpectedFoundAndPythonLoc) {
  // Line 6 is the first body line; the statement's own loc is quoted.
  EXPECT_EQ(ParseError(WrapKernelBody("    copy A[0:64, 0:64 -> A loc(\"k.py\", 21)\n")),
            "test.tir:6:23: expected ',' or ']', found '->' (at k.py:21)");
  // Without a loc on the statement, the enclosing kernel's is quoted.
  EXPECT_EQ(ParseError(WrapKernelBody("    for i in serial(0, 4) {\n      A[i, 0] = \n    }\n")),
            "test.tir:7:17: expected an expression, found end of line (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    for i in serial(0, 4) loc(\"k.py\", 9) {\n      A[i, 0] = y\n    }\n")),
            "test.tir:7:17: undefined name 'y' (at k.py:9)");
}

TEST(ParseErrors, StatementStructure) {
  EXPECT_EQ(ParseError(WrapKernelBody("    sync sync\n")),
            "test.tir:6:10: expected end of line or ';' after the statement, found identifier 'sync' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    sync sync loc(\"k.py\", 5)\n")),
            "test.tir:6:10: expected end of line or ';' after the statement, found identifier 'sync' (at k.py:5)");
  EXPECT_EQ(ParseError(WrapKernelBody("    for i in serial(0, 4) loc(\"k.py\", 6) {\n    } sync\n")),
            "test.tir:7:7: expected end of line or ';' after the statement, found identifier 'sync' (at k.py:6)");
  EXPECT_EQ(ParseError(WrapKernelBody("    copy A A\n")), "test.tir:6:12: expected '->', found identifier 'A' (at t.py:2)");
  std::string unknown = ParseError(WrapKernelBody("    launch A\n"));
  EXPECT_NE(unknown.find("test.tir:6:5: expected a statement (kernel, alloc,"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("found identifier 'launch'"), std::string::npos) << unknown;
  EXPECT_EQ(ParseError(WrapKernelBody("    alloc S: global[4] f32\n")),
            "test.tir:6:14: expected shared, fragment or local, found identifier 'global' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    alloc S: shared[4] float32\n")),
            "test.tir:6:24: expected a dtype (bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64), "
            "found identifier 'float32' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    gemm A, A -> A transpose_a\n")),
            "test.tir:6:20: expected a gemm flag (trans_a, trans_b, clear_accum, policy=..., k_pack=..., wg_wait=...) "
            "or end of line, found identifier 'transpose_a' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    reduce mean A -> A dim=1\n")),
            "test.tir:6:12: expected a reduction (sum, max, min, abssum, absmax), found identifier 'mean' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    parallel (i, j) in (4) {\n    }\n")),
            "test.tir:6:25: expected 2 parallel extent(s), one per index, found 1 (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    atomic_add A[0, 0] x\n")),
            "test.tir:6:24: expected ',' (scalar form) or '->' (tile form) after the atomic_add region, found "
            "identifier 'x' (at t.py:2)");
}

TEST(ParseErrors, NamesAndKinds) {
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = A + 1\n")),
            "test.tir:6:13: expected a scalar value, found buffer 'A' (write A[...] to load an element) (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = n[0]\n")),
            "test.tir:6:13: expected a buffer before '[', found scalar 'n' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    copy n -> A\n")),
            "test.tir:6:10: expected a buffer, found scalar 'n' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = expf(x)\n")).substr(0, 40),
            "test.tir:6:13: expected a function (exp,");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = max(x)\n")),
            "test.tir:6:13: expected 2 argument(s) to max, found 1 (at t.py:2)");
  // A name goes out of scope at the end of its block.
  EXPECT_EQ(ParseError(WrapKernelBody("    for i in serial(0, 4) {\n      let t = i\n    }\n    let u = t\n")),
            "test.tir:9:13: undefined name 't' (at t.py:2)");
  EXPECT_EQ(ParseError("tileir 1\nfunc @f(A: tensor[N, 4] f32) {\n}\n"),
            "test.tir:2:19: expected a symbol declared in dynamic(...) in the shape of parameter 'A', found "
            "undeclared 'N'");
}

TEST(ParseErrors, Literals) {
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 300:u8\n")),
            "test.tir:6:13: integer literal '300' is out of range for u8 (expected 0..255) (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = -129:i8\n")),
            "test.tir:6:14: integer literal '-129' is out of range for i8 (expected -128..127) (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = -1:u32\n")),
            "test.tir:6:14: integer literal '-1' is out of range for u32 (expected 0..4294967295) (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 2147483648\n")),
            "test.tir:6:13: integer literal '2147483648' is out of range for i32 (expected -2147483648..2147483647) "
            "(at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 99999999999999999999:i64\n")),
            "test.tir:6:13: integer literal '99999999999999999999' does not fit in 64 bits (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 1.5:i32\n")),
            "test.tir:6:13: expected a float dtype suffix on float literal '1.5', found ':i32' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 1e999:f64\n")),
            "test.tir:6:13: float literal '1e999' is out of range for f64 (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 12abc\n")), "test.tir:6:13: malformed number '12a...' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 0x\n")), "test.tir:6:13: malformed integer literal '0x' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = 1e:f32\n")), "test.tir:6:13: malformed float literal '1e' (at t.py:2)");
}

TEST(ParseErrors, NestingIsBounded) {
  // 150 levels parse; 1000 are refused with a message instead of a crash.
  std::string ok = std::string(150, '(') + "n" + std::string(150, ')');
  EXPECT_EQ(ParseLetValue(ok), MakeVar("n"));
  std::string deep = WrapKernelBody("    let y = " + std::string(1000, '(') + "n" + std::string(1000, ')') + "\n");
  std::string msg = ParseError(deep);
  EXPECT_NE(msg.find("expected at most 200 levels of nesting, found more"), std::string::npos) << msg;
  std::string negs = WrapKernelBody("    let y = " + std::string(1000, '~') + "n\n");
  EXPECT_NE(ParseError(negs).find("levels of nesting"), std::string::npos);
  // A long operator chain builds a deep tree without deep parser recursion.
  std::string chain = "n";
  for (int i = 0; i < 900; ++i) chain += " + n";
  EXPECT_EQ(Print(ParseLetValue(chain)), chain);
  for (int i = 0; i < 200; ++i) chain += " + n";
  msg = ParseError(WrapKernelBody("    let y = " + chain + "\n"));
  EXPECT_NE(msg.find("expected expressions at most 1000 levels deep, found deeper"), std::string::npos) << msg;
  std::string calls = "n";
  for (int i = 0; i < 150; ++i) calls = "max(" + calls + " + n + n + n + n + n + n, n)";
  EXPECT_NE(ParseError(WrapKernelBody("    let y = " + calls + "\n")).find("levels deep"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "if true {\n";
  for (int i = 0; i < 300; ++i) blocks += "}\n";
  EXPECT_NE(ParseError(WrapKernelBody(blocks)).find("levels of nesting"), std::string::npos);
}

TEST(Text, PrintStatement) {
  Module m = MustParse(WrapKernelBody("    for i in serial(0, 4) loc(\"k.py\", 3) {\n      A[i, 0] = x\n    }\n"));
  const auto* k = As<Kernel>(m.functions[0].body[0]);
  EXPECT_EQ(Print(k->body[0]), "for i in serial(0, 4) loc(\"k.py\", 3) {\n  A[i, 0] = x\n}\n");
  EXPECT_EQ(Print(k->body[0], 1), "  for i in serial(0, 4) loc(\"k.py\", 3) {\n    A[i, 0] = x\n  }\n");
}

TEST(ParseErrors, Lexical) {
  EXPECT_EQ(ParseError(WrapKernelBody("    let y = n $ 1\n")), "test.tir:6:15: unexpected character '$' (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    sync loc(\"k.py, 3)\n")), "test.tir:6:14: unterminated string (at t.py:2)");
  EXPECT_EQ(ParseError(WrapKernelBody("    hint h \"\\q\"\n")), "test.tir:6:12: invalid escape '\\q' in string (at t.py:2)");
  EXPECT_EQ(ParseError("tileir 1\nfunc @f() {\n  kernel grid(1) -> (b) {\n    sync\n"),
            "test.tir:5:1: expected '}', found end of input");
}

}  // namespace
}  // namespace tl::ir
