// Verifier tests: each rule of the spec, with the exact message (function,
// statement kind, Python loc, expected vs found). Kernel bodies come from
// WrapKernelBody (tensors A [64, 64] f32, B [M, 64] f16; n: i32, x: f32).
#include "test_util.h"

namespace tl::ir {
namespace {

using testing::MustParse;
using testing::ParseError;
using testing::VerifyError;
using testing::WrapKernelBody;

std::string BodyError(const std::string& body) { return VerifyError(WrapKernelBody(body)); }

TEST(Verify, AcceptsAWellFormedKernel) {
  Module m = MustParse(WrapKernelBody(
      "    alloc S: shared[64, 64] f32\n"
      "    alloc F: fragment[64, 64] f32\n"
      "    copy A -> S\n"
      "    gemm S, S -> F clear_accum\n"
      "    copy F -> A\n"));
  Status s = Verify(m);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(Verify, DtypeMismatches) {
  EXPECT_EQ(BodyError("    let y = n + x\n"),
            "@t: let at t.py:2: binary '+': expected operands of equal dtype, found i32 and f32 in n + x");
  EXPECT_EQ(BodyError("    A[0, 0] = n loc(\"k.py\", 5)\n"),
            "@t: store at k.py:5: store to 'A': expected a value of dtype f32, found i32");
  EXPECT_EQ(BodyError("    if n {\n      sync\n    }\n"), "@t: if at t.py:2: if condition: expected bool, found i32 in n");
  EXPECT_EQ(BodyError("    let y = select(n, x, x)\n"),
            "@t: let at t.py:2: select condition: expected bool, found i32 in n");
  EXPECT_EQ(BodyError("    let y = x << x\n"), "@t: let at t.py:2: binary '<<': expected integer operands, found f32");
  EXPECT_EQ(BodyError("    let y = n && n\n"), "@t: let at t.py:2: binary '&&': expected bool operands, found i32");
  EXPECT_EQ(BodyError("    let y = exp(n)\n"), "@t: let at t.py:2: exp: expected float argument(s), found i32");
  EXPECT_EQ(BodyError("    let y = ceildiv(x, x)\n"),
            "@t: let at t.py:2: ceildiv: expected integer argument(s), found f32");
  EXPECT_EQ(BodyError("    let y = A[0.5:f32, 0]\n"),
            "@t: let at t.py:2: index into 'A': expected an integer, found f32 in 0.5:f32");
  EXPECT_EQ(BodyError("    fill A, 0\n"), "@t: fill at t.py:2: fill 'A': expected a value of dtype f32, found i32");
  EXPECT_EQ(BodyError("    var v: f32 = 1\n"),
            "@t: var at t.py:2: var 'v' initializer: expected f32, found i32");
  EXPECT_EQ(BodyError("    for i in serial(0, 4:i64) {\n    }\n"),
            "@t: for at t.py:2: loop 'i' stop: expected i32 (the start's dtype), found i64");
}

TEST(Verify, Loops) {
  EXPECT_EQ(BodyError("    for i in serial(0, 8, 0) {\n    }\n"),
            "@t: for at t.py:2: loop 'i' step: expected a nonzero step, found 0");
  EXPECT_EQ(BodyError("    for i in pipelined(0, 8, stages=-1) {\n    }\n"),
            "@t: for at t.py:2: loop 'i': expected stages >= 0, found -1");
  EXPECT_EQ(BodyError("    for i in serial(x, 8) {\n    }\n"),
            "@t: for at t.py:2: loop 'i' start: expected an integer, found f32\n"
            "@t: for at t.py:2: loop 'i' stop: expected f32 (the start's dtype), found i32");
  Module ok = MustParse(WrapKernelBody("    for i in serial(8:i64, 0:i64, -1:i64) {\n      A[i, 0] = x\n    }\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
}

TEST(Verify, ConstantsWhereTheSpecRequiresThem) {
  EXPECT_EQ(BodyError("    alloc S: shared[n, 4] f32\n"),
            "@t: alloc at t.py:2: alloc 'S' dim 0: expected a positive integer constant, found n");
  EXPECT_EQ(BodyError("    alloc S: local[4, 0] f32\n"),
            "@t: alloc at t.py:2: alloc 'S' dim 1: expected a positive integer constant, found 0");
  EXPECT_EQ(BodyError("    parallel (i) in (n) {\n    }\n"),
            "@t: parallel at t.py:2: parallel extent: expected a positive integer constant, found n");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @k(n: i32) {\n  kernel grid(1) threads(n) -> (b) {\n  }\n}\n"),
            "@k: kernel: thread extent: expected a positive integer constant, found n");
  EXPECT_EQ(BodyError("    copy A[0:n, 0:64] -> A\n"),
            "@t: copy at t.py:2: copy source region of 'A' dim 0 extent: expected a positive integer constant, "
            "found n");
  // Constant expressions are fine.
  Module ok = MustParse(WrapKernelBody("    alloc S: shared[2 * 32, ceildiv(100, 50)] f32\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
}

TEST(Verify, CopyShapes) {
  EXPECT_EQ(BodyError("    alloc S: shared[64, 16] f32\n    copy A[0:64, 0:32] -> S loc(\"k.py\", 21)\n"),
            "@t: copy at k.py:21: expected equal shapes after dropping extent-1 dims, found source "
            "'A[0:64, 0:32]' of shape [64, 32] -> [64, 32] and destination 'S' of shape [64, 16] -> [64, 16]");
  // Extent-1 dims do not count: a row of A into a 1-D buffer.
  Module ok = MustParse(WrapKernelBody("    alloc R: shared[64] f16\n    copy B[bx, 0:64] -> R\n    copy R -> "
                                       "B[n:1, 0:64]\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  // A dynamic extent matches only the same symbol.
  EXPECT_EQ(BodyError("    copy B -> A\n"),
            "@t: copy at t.py:2: expected equal shapes after dropping extent-1 dims, found source 'B' of shape "
            "[M, 64] -> [M, 64] and destination 'A' of shape [64, 64] -> [64, 64]");
  EXPECT_EQ(BodyError("    alloc S: shared[64] f32\n    copy A[0:64, 0:64, 0] -> S\n"),
            "@t: copy at t.py:2: copy source region of 'A': expected 2 dims (the buffer's rank), found 3");
  EXPECT_EQ(BodyError("    alloc S: shared[64] f32\n    copy A[0, 0:64] -> S[32:64]\n"),
            "@t: copy at t.py:2: copy destination region of 'S' dim 0: expected a window inside [0, 64), found "
            "[32, 96)");
}

TEST(Verify, GemmScopesAndShapes) {
  const std::string allocs =
      "    alloc As: shared[64, 32] f16\n"
      "    alloc Bs: shared[32, 128] f16\n"
      "    alloc Cf: fragment[64, 128] f32\n"
      "    alloc Cs: shared[64, 128] f32\n";
  Module ok = MustParse(WrapKernelBody(allocs + "    gemm As, Bs -> Cf\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cs loc(\"k.py\", 30)\n"),
            "@t: gemm at k.py:30: gemm C 'Cs': expected fragment, found shared");
  EXPECT_EQ(BodyError(allocs + "    gemm A, Bs -> Cf\n"),
            "@t: gemm at t.py:2: gemm A 'A': expected shared or fragment, found global\n"
            "@t: gemm at t.py:2: expected equal K from A and B, found K = [64] from A [64, 64] and K = [32] from "
            "B [32, 128]");
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf trans_a\n"),
            "@t: gemm at t.py:2: expected equal K from A and B, found K = [64] from A [64, 32] with trans_a and "
            "K = [32] from B [32, 128]");
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf trans_b\n"),
            "@t: gemm at t.py:2: expected equal K from A and B, found K = [32] from A [64, 32] and K = [128] from "
            "B [32, 128] with trans_b");
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf[0:64, 0:64]\n"),
            "@t: gemm at t.py:2: expected C of shape [64, 128] ([M, N] from A [64, 32] and B [32, 128]), found C "
            "[64, 64]");
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf k_pack=0\n"),
            "@t: gemm at t.py:2: gemm: expected k_pack >= 1, found 0");
  // wg_wait: -1 (the wgmma group stays in flight) or 0..7 (wgmma.wait_group's immediate).
  Module waits = MustParse(WrapKernelBody(allocs + "    gemm As, Bs -> Cf wg_wait=-1\n    gemm As, Bs -> Cf wg_wait=7\n"
                                                    "    hint wait_wgmma 0\n    hint wait_wgmma 7\n"));
  EXPECT_TRUE(Verify(waits).ok()) << Verify(waits).message();
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf wg_wait=8\n"),
            "@t: gemm at t.py:2: gemm: expected wg_wait -1 (leave the wgmma group in flight) or 0..7, found 8");
  EXPECT_EQ(BodyError(allocs + "    gemm As, Bs -> Cf wg_wait=-2\n"),
            "@t: gemm at t.py:2: gemm: expected wg_wait -1 (leave the wgmma group in flight) or 0..7, found -2");
  EXPECT_EQ(BodyError(allocs + "    hint wait_wgmma 8\n"),
            "@t: hint at t.py:2: hint wait_wgmma: expected one integer 0..7 (the wgmma groups left in flight), found 1 "
            "argument(s) = 8");
  EXPECT_EQ(BodyError(allocs + "    hint wait_wgmma\n"),
            "@t: hint at t.py:2: hint wait_wgmma: expected one integer 0..7 (the wgmma groups left in flight), found 0 "
            "argument(s)");
}

TEST(Verify, ReduceAndCumsum) {
  const std::string allocs =
      "    alloc S: fragment[64, 32] f32\n"
      "    alloc r: fragment[64] f32\n"
      "    alloc c: fragment[32] f32\n";
  Module ok = MustParse(WrapKernelBody(allocs +
                                       "    alloc k: fragment[64, 1] f32\n"
                                       "    reduce sum S -> r dim=1\n"
                                       "    reduce max S -> c dim=0 clear\n"
                                       "    reduce min S -> k dim=-1\n"
                                       "    cumsum S -> S dim=-2 reverse\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  EXPECT_EQ(BodyError(allocs + "    reduce sum S -> r dim=2 loc(\"k.py\", 40)\n"),
            "@t: reduce at k.py:40: expected dim in [-2, 1] for source 'S' of shape [64, 32], found 2");
  EXPECT_EQ(BodyError(allocs + "    reduce sum S -> c dim=1\n"),
            "@t: reduce at t.py:2: expected destination shape [64] or [64, 1] (source [64, 32] reduced along dim "
            "1), found 'c' of shape [32]");
  EXPECT_EQ(BodyError(allocs + "    reduce sum A -> r dim=1\n"),
            "@t: reduce at t.py:2: reduce source 'A': expected shared, fragment or local, found global tensor");
  EXPECT_EQ(BodyError(allocs + "    cumsum S -> r dim=0\n"),
            "@t: cumsum at t.py:2: expected destination of the source's shape [64, 32], found 'r' of shape [64]");
}

TEST(Verify, AtomicAdd) {
  Module ok = MustParse(WrapKernelBody("    alloc F: fragment[64, 64] f32\n    atomic_add F -> A\n    atomic_add "
                                       "A[1, 2], x\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  EXPECT_EQ(BodyError("    alloc F: fragment[64, 64] f32\n    atomic_add A -> F\n"),
            "@t: atomic_add at t.py:2: destination 'F': expected a global tensor or shared buffer, found fragment "
            "(per-thread storage needs no atomics)");
  EXPECT_EQ(BodyError("    atomic_add A[0, 0:2], x\n"),
            "@t: atomic_add at t.py:2: scalar form: expected a single element (every extent 1), found "
            "'A[0, 0:2]' of shape [1, 2]");
  EXPECT_EQ(BodyError("    atomic_add A[0, 0], n\n"),
            "@t: atomic_add at t.py:2: expected a value of dtype f32 (the destination's), found i32");
}

TEST(Verify, StructureAndNames) {
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[4] f32) loc(\"f.py\", 3) {\n  copy A -> A\n}\n"),
            "@f: copy at f.py:3: expected only kernel statements at function top level, found copy");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[4] f32) {\n}\n"),
            "@f: expected at least one kernel statement in the body, found none");
  EXPECT_EQ(BodyError("    kernel grid(1) threads(32) -> (b) {\n    }\n"),
            "@t: kernel at t.py:2: expected kernel at function top level, found it nested");
  EXPECT_EQ(BodyError("    let y = 1\n    let y = 2\n"),
            "@t: let at t.py:2: name 'y' is defined twice; expected names unique within the function");
  EXPECT_EQ(BodyError("    let y = 1\n    y = 2\n"), "@t: assign at t.py:2: assignment to 'y': expected a var, found let");
  EXPECT_EQ(BodyError("    parallel (i) in (64) {\n      A[i, 0] = x\n      copy A -> A\n    }\n"),
            "@t: copy at t.py:2: inside parallel: expected only stores, atomic_adds, lets, ifs and serial loops, "
            "found copy");
  EXPECT_EQ(BodyError("    parallel (i) in (64) {\n      for j in pipelined(0, 2, stages=2) {\n      }\n    }\n"),
            "@t: for at t.py:2: inside parallel: expected only stores, atomic_adds, lets, ifs and serial loops, "
            "found pipelined for");
  Module ok = MustParse(WrapKernelBody(
      "    parallel (i, j) in (64, 64) {\n"
      "      let v = A[i, j]\n"
      "      if v > 0.0:f32 {\n"
      "        atomic_add A[0, j], v\n"
      "      }\n"
      "      for k in unroll(0, 2) {\n"
      "        A[i, k] = v\n"
      "      }\n"
      "    }\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  EXPECT_EQ(BodyError("    let y = A[0]\n"), "@t: let at t.py:2: 'A' has rank 2: expected 2 indices, found 1");
}

TEST(Verify, GridExtentsAreHostExpressions) {
  EXPECT_EQ(VerifyError("tileir 1\nfunc @g(A: tensor[4] i32, n: i32) {\n  kernel grid(A[0], n) -> (b, c) {\n  }\n}\n"),
            "@g: kernel: grid extent: expected an expression over symbols and scalar parameters, found a load in "
            "A[0]");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @g(x: f32) {\n  kernel grid(x) -> (b) {\n  }\n}\n"),
            "@g: kernel: grid extent: expected an integer, found f32 in x");
}

TEST(Verify, SignatureRules) {
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[N, 4] f32) dynamic(N: i32, K: i32) {\n  kernel grid(1) -> (b) "
                        "{\n  }\n}\n"),
            "@f: dynamic symbol 'K': expected it in some tensor parameter's shape (it is bound from one at launch), "
            "found it in none");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[N, 0] f32) dynamic(N: f32) {\n  kernel grid(1) -> (b) {\n  "
                        "}\n}\n"),
            "@f: dynamic symbol 'N': expected an integer dtype, found f32\n"
            "@f: tensor parameter 'A' dim 1: expected a positive integer or a dynamic symbol, found 0");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[4] f32, A: f32) {\n  kernel grid(1) -> (b) {\n  }\n}\n"),
            "@f: name 'A' is declared twice in the signature");
  EXPECT_EQ(VerifyError("tileir 1\nfunc @f(A: tensor[4] f32) {\n  kernel grid(1) -> (b) {\n  }\n}\nfunc @f(A: "
                        "tensor[4] f32) {\n  kernel grid(1) -> (b) {\n  }\n}\n"),
            "@f: expected unique function names, found 'f' twice");
}

// Rules that the parser enforces by construction, checked on IR that a pass
// might build.
TEST(Verify, IrBuiltByPasses) {
  Module m = MustParse(
      "tileir 1\n"
      "func @two(A: tensor[64] f32) {\n"
      "  kernel grid(1) -> (b0) loc(\"p.py\", 4) {\n"
      "    alloc F: fragment[64] f32\n"
      "    copy A -> F\n"
      "  }\n"
      "  kernel grid(1) -> (b1) loc(\"p.py\", 8) {\n"
      "    sync loc(\"p.py\", 9)\n"
      "  }\n"
      "}\n");
  ASSERT_TRUE(Verify(m).ok());
  Function& f = m.functions[0];
  Kernel* second = As<Kernel>(f.body[1]);
  // A fragment of the first kernel stored to from the second.
  Stmt store{Store{"F", {MakeInt(0)}, MakeFloat(1.0)}, Loc{"p.py", 10}};
  second->body.push_back(store);
  // An undefined name and a reference with the wrong dtype.
  Stmt let{Let{"v", MakeBinary(BinaryOp::kAdd, MakeVar("ghost"), MakeVar("b1", DType::kI64))}, std::nullopt};
  second->body.push_back(let);
  // A float literal that its dtype cannot hold (MakeFloat would round it).
  second->body.push_back(Stmt{Store{"A", {MakeInt(0)}, Expr{FloatImm{0.1, DType::kF32}}}, Loc{"p.py", 11}});
  // A name the text format cannot carry.
  second->body.push_back(Stmt{Let{"not a name", MakeInt(1)}, Loc{"p.py", 12}});
  // A grid with no block index names.
  second->block_vars.push_back("b2");
  EXPECT_EQ(Verify(m).message(),
            "@two: kernel at p.py:8: expected one block index name per grid extent (1), found 2\n"
            "@two: store at p.py:10: 'F' is used outside the block that defines it (e.g. a buffer of another "
            "kernel)\n"
            "@two: let at p.py:8: undefined name 'ghost'\n"
            "@two: let at p.py:8: reference to 'b1': expected dtype i32 (its definition), found i64\n"
            "@two: store at p.py:11: float literal: expected a value of f32, found 0.1:f64, which f32 cannot hold\n"
            "@two: let at p.py:12: expected an identifier as name, found 'not a name'");
}


// T.call_extern: the callee must be in the function's imported source, and
// addresses name on-chip buffer elements.
std::string ExternModule(const std::string& sources, const std::string& body) {
  return "tileir 1\n\nfunc @t(A: tensor[64, 64] f32) loc(\"t.py\", 1) {\n" + sources +
         "  kernel grid(1) threads(128) -> (bx) loc(\"t.py\", 2) {\n    alloc L: local[8] f16\n" + body +
         "  }\n}\n";
}

TEST(Verify, CallExtern) {
  const std::string src = "  import_source \"__device__ void decode(void* a, float s) {}\\n\"\n";
  Module ok = MustParse(ExternModule(src, "    call_extern f16 decode(&L[2], 1.0:f32) loc(\"k.py\", 7)\n"));
  EXPECT_TRUE(Verify(ok).ok()) << Verify(ok).message();
  ASSERT_EQ(ok.functions[0].sources.size(), 1u);
  EXPECT_EQ(ok.functions[0].sources[0], "__device__ void decode(void* a, float s) {}\n");
  EXPECT_EQ(VerifyError(ExternModule("", "    call_extern f16 decode(&L[0]) loc(\"k.py\", 7)\n")),
            "@t: call_extern at k.py:7: call_extern decode: expected source imported with T.import_source "
            "defining 'decode', found no imported source");
  // `decoder` is not `decode`: whole identifiers only.
  EXPECT_EQ(VerifyError(ExternModule(src, "    call_extern f16 decoder(&L[0]) loc(\"k.py\", 7)\n")),
            "@t: call_extern at k.py:7: call_extern decoder: expected a function named 'decoder' in the imported "
            "source (T.import_source), found no such name in 1 imported text(s)");
  // a tensor parameter's element (global memory) is an address too
  Module global = MustParse(ExternModule(src, "    call_extern f16 decode(&A[0, 0]) loc(\"k.py\", 7)\n"));
  EXPECT_TRUE(Verify(global).ok()) << Verify(global).message();
  EXPECT_EQ(VerifyError(ExternModule(src, "    call_extern f16 decode(&A[0]) loc(\"k.py\", 7)\n")),
            "@t: call_extern at k.py:7: 'A' has rank 2: expected 2 indices, found 1");
  EXPECT_EQ(VerifyError(ExternModule(src, "    call_extern f16 decode(&L[0, 1]) loc(\"k.py\", 7)\n")),
            "@t: call_extern at k.py:7: 'L' has rank 1: expected 1 indices, found 2");
}

TEST(Parse, ImportSourceOnlyAtFunctionTopLevel) {
  EXPECT_EQ(ParseError(ExternModule("", "    import_source \"x\"\n")),
            "test.tir:6:5: expected import_source only at the top level of a function, found it nested (at t.py:2)");
  EXPECT_EQ(ParseError(ExternModule("  import_source 3\n", "")),
            "test.tir:4:17: expected the imported source as a string after 'import_source', found integer '3' (at t.py:1)");
  EXPECT_EQ(ParseError(ExternModule("  import_source \"f\"\n", "    call_extern f16 f(&x)\n")),
            "test.tir:7:24: undefined name 'x' (at t.py:2)");
}

}  // namespace
}  // namespace tl::ir
