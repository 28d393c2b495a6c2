// Launch validation: one test per rule, each asserting the message with its
// numbers (the C ABI tests check the same through tl_launch).
#include "validate.h"

#include <gtest/gtest.h>

namespace tl::rt {
namespace {

// gemm(A[M,K], B[K,128], C[M,128] aligned 64, n:int32 = M), M divisible by 4.
KernelSig Gemm() {
  KernelSig k;
  k.name = "gemm";
  k.symbols = {"M", "K"};
  ParamSig a{"A", TL_PARAM_BUFFER, {TL_DTYPE_FLOAT, 32, 1}, TL_ACCESS_READ, 2, {{-1, 0, 4}, {-1, 1, 1}}, 4, -1};
  ParamSig b{"B", TL_PARAM_BUFFER, {TL_DTYPE_FLOAT, 32, 1}, TL_ACCESS_READ, 2, {{-1, 1, 1}, {128, -1, 1}}, 4, -1};
  ParamSig c{"C", TL_PARAM_BUFFER, {TL_DTYPE_FLOAT, 32, 1}, TL_ACCESS_WRITE, 2, {{-1, 0, 1}, {128, -1, 1}}, 64, -1};
  ParamSig n{"n", TL_PARAM_SCALAR, {TL_DTYPE_INT, 32, 1}, TL_ACCESS_READ, 0, {}, 1, 0};
  k.params = {a, b, c, n};
  return k;
}

struct Args {
  alignas(64) float storage[1];
  int64_t sa[2] = {8, 16}, sb[2] = {16, 128}, sc[2] = {8, 128};
  std::vector<tl_arg_t> v;
  Args() {
    void* p = storage;
    v = {tl_arg_tensor(p, tl_dtype(TL_DTYPE_FLOAT, 32), 2, sa, nullptr),
         tl_arg_tensor(p, tl_dtype(TL_DTYPE_FLOAT, 32), 2, sb, nullptr),
         tl_arg_tensor(p, tl_dtype(TL_DTYPE_FLOAT, 32), 2, sc, nullptr), tl_arg_i32(8)};
  }
};

std::string Error(const KernelSig& k, const std::vector<tl_arg_t>& args) {
  BoundArgs bound;
  Status s = ValidateArgs(k, args, &bound);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(Validate, AcceptsGoodArgumentsAndBindsSymbols) {
  Args a;
  BoundArgs bound;
  Status s = ValidateArgs(Gemm(), a.v, &bound);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(bound.symbols, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(bound.scalar_values[3], 8);
}

TEST(Validate, ArgumentCount) {
  Args a;
  a.v.pop_back();
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' takes 4 argument(s) (A, B, C, n), got 3");
}

TEST(Validate, Kind) {
  Args a;
  a.v[0] = tl_arg_i32(1);
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 0 'A': expected a tensor, got a scalar");
  Args b;
  b.v[3] = b.v[0];
  EXPECT_EQ(Error(Gemm(), b.v), "kernel 'gemm' argument 3 'n': expected a scalar, got a tensor");
}

TEST(Validate, Dtype) {
  Args a;
  a.v[1].dtype = tl_dtype(TL_DTYPE_BFLOAT, 16);
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 1 'B': dtype is bfloat16, expected float32");
}

TEST(Validate, ScalarSize) {
  Args a;
  a.v[3].scalar_size = 8;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 3 'n': scalar is 8 bytes, expected 4 (int32)");
}

TEST(Validate, Rank) {
  Args a;
  a.v[2].tensor.rank = 3;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 2 'C': rank is 3, expected 2");
}

TEST(Validate, StaticDim) {
  Args a;
  a.sc[1] = 100;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 2 'C': dim 1 is 100, expected 128");
}

TEST(Validate, SymbolConsistency) {
  Args a;
  a.sb[0] = 17;
  EXPECT_EQ(Error(Gemm(), a.v),
            "kernel 'gemm' argument 1 'B': dim 0 is 17, but symbol 'K' is 16 (from argument 0 'A' dim 1)");
}

TEST(Validate, ScalarBoundToSymbol) {
  Args a;
  a.v[3] = tl_arg_i32(9);
  EXPECT_EQ(Error(Gemm(), a.v),
            "kernel 'gemm' argument 3 'n': value is 9, but symbol 'M' is 8 (from argument 0 'A' dim 0)");
}

TEST(Validate, Divisibility) {
  Args a;
  a.sa[0] = 6;
  a.sc[0] = 6;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 0 'A': dim 0 is 6, must be divisible by 4");
}

TEST(Validate, NegativeDim) {
  Args a;
  a.sa[1] = -1;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 0 'A': dim 1 is -1, negative");
}

TEST(Validate, PointerAlignment) {
  Args a;
  a.v[2].tensor.data = reinterpret_cast<char*>(a.storage) + 4;
  std::string e = Error(Gemm(), a.v);
  EXPECT_NE(e.find("kernel 'gemm' argument 2 'C': data pointer 0x"), std::string::npos) << e;
  EXPECT_NE(e.find("is not aligned to 64 bytes (offset 4)"), std::string::npos) << e;
}

TEST(Validate, NullPointer) {
  Args a;
  a.v[0].tensor.data = nullptr;
  EXPECT_EQ(Error(Gemm(), a.v), "kernel 'gemm' argument 0 'A': data pointer is NULL");
}

TEST(Validate, Contiguity) {
  Args a;
  int64_t strides[2] = {256, 1};  // a row pitch of 256 for a 128-wide row
  a.v[2].tensor.strides = strides;
  EXPECT_EQ(Error(Gemm(), a.v),
            "kernel 'gemm' argument 2 'C': not contiguous: dim 0 stride is 256, expected 128 (dense row-major)");
  int64_t dense[2] = {128, 1};
  a.v[2].tensor.strides = dense;
  BoundArgs bound;
  EXPECT_TRUE(ValidateArgs(Gemm(), a.v, &bound).ok());
  // Extent-1 dims may carry any stride.
  a.sc[0] = 1;
  a.sa[0] = 1;
  KernelSig k = Gemm();
  k.params[0].shape[0].divisible_by = 1;
  a.v[3] = tl_arg_i32(1);
  int64_t odd[2] = {999, 1};
  a.v[2].tensor.strides = odd;
  EXPECT_TRUE(ValidateArgs(k, a.v, &bound).ok());
}

TEST(Validate, UnboundSymbol) {
  KernelSig k;
  k.name = "k";
  k.symbols = {"N", "Q"};
  k.params = {ParamSig{"X", TL_PARAM_BUFFER, {TL_DTYPE_FLOAT, 32, 1}, TL_ACCESS_READ, 1, {{-1, 0, 1}}, 1, -1}};
  float x = 0;
  int64_t shape[1] = {1};
  std::vector<tl_arg_t> args = {tl_arg_tensor(&x, tl_dtype(TL_DTYPE_FLOAT, 32), 1, shape, nullptr)};
  EXPECT_EQ(Error(k, args), "kernel 'k': shape symbol 'Q' is bound by no argument");
}

TEST(Validate, GridExpressions) {
  KernelSig k = Gemm();
  BoundArgs b;
  b.symbols = {100, 7};
  b.scalar_values = {0, 0, 0, 5};
  auto eval = [&](std::vector<int64_t> code) { return EvalGridExpr(k, 0, code, b); };
  EXPECT_EQ(*eval({1, 0, 0, 16, 6}), 7);     // ceildiv(M, 16)
  EXPECT_EQ(*eval({1, 0, 0, 16, 7}), 6);     // floordiv
  EXPECT_EQ(*eval({1, 0, 0, 16, 10}), 4);    // floormod
  EXPECT_EQ(*eval({2, 3, 1, 1, 5}), 35);     // n * K
  EXPECT_EQ(*eval({0, 3, 0, 9, 8}), 3);      // min
  EXPECT_EQ(*eval({0, 3, 0, 9, 9}), 9);      // max
  EXPECT_EQ(*eval({0, -7, 0, 2, 7}), -4);    // floor semantics
  EXPECT_EQ(*eval({0, 3, 0, 9, 4}), -6);
  struct Bad {
    std::vector<int64_t> code;
    const char* fragment;
  } bad[] = {
      {{0}, "lacks its immediate"},
      {{1, 5}, "symbol index 5 out of range (2 symbols)"},
      {{2, 0}, "parameter index 0 is not a scalar parameter"},
      {{0, 1, 3}, "needs two operands"},
      {{0, 1, 0, 0, 6}, "division by 0"},
      {{0, 1, 0, 2}, "leaves 2 values on the stack"},
      {{99}, "unknown opcode 99"},
      {{0, INT64_MAX, 0, 2, 5}, "int64 overflow"},
  };
  for (const auto& c : bad) {
    auto r = eval(c.code);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("kernel 'gemm' grid x expression: "), std::string::npos);
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos) << r.status().message();
  }
}

TEST(Validate, Guards) {
  KernelSig k = Gemm();
  BoundArgs b;
  b.symbols = {8, 16};
  b.scalar_values = {0, 0, 0, 8};
  b.pointers = {0x1000, 0x1040, 0x1004, 0};
  EXPECT_EQ(CheckGuards(k, {{3, 0, 4}, {0, 2, 64}}, b), "");
  EXPECT_EQ(CheckGuards(k, {{3, 0, 16}}, b), "argument 3 'n' (value 8) is not divisible by 16");
  EXPECT_EQ(CheckGuards(k, {{3, 1, 1}}, b), "argument 3 'n' (value 8) is not equal to 1");
  EXPECT_EQ(CheckGuards(k, {{3, 3, 4}}, b), "argument 3 'n' (value 8) is not <= 4");
  EXPECT_EQ(CheckGuards(k, {{3, 4, 9}}, b), "argument 3 'n' (value 8) is not >= 9");
  EXPECT_EQ(CheckGuards(k, {{2, 2, 16}}, b), "argument 2 'C' (pointer 4100) is not pointer aligned to 16");
  EXPECT_EQ(CheckGuards(k, {{9, 0, 1}}, b), "guard names parameter 9 of 4");
}

TEST(Validate, LaunchLimits) {
  DeviceLimits l;
  l.max_grid[0] = 2147483647u;
  l.max_grid[1] = l.max_grid[2] = 65535;
  l.max_block[0] = l.max_block[1] = 1024;
  l.max_block[2] = 64;
  l.max_threads_per_block = 1024;
  l.max_shared_bytes = 232448;
  uint32_t block[3] = {128, 1, 1};
  uint64_t grid[3] = {10, 70000, 1};
  EXPECT_EQ(CheckLaunchLimits("gemm", "v", grid, block, 0, l).message(),
            "kernel 'gemm' variant 'v': grid y is 70000, device limit 65535");
  grid[1] = 1;
  uint32_t big[3] = {64, 32, 1};
  EXPECT_EQ(CheckLaunchLimits("gemm", "v", grid, big, 0, l).message(),
            "kernel 'gemm' variant 'v': block 64x32x1 is 2048 threads, device limit 1024");
  uint32_t deep[3] = {1, 1, 65};
  EXPECT_EQ(CheckLaunchLimits("gemm", "v", grid, deep, 0, l).message(),
            "kernel 'gemm' variant 'v': block z is 65, device limit 64");
  EXPECT_EQ(CheckLaunchLimits("gemm", "v", grid, block, 232449, l).message(),
            "kernel 'gemm' variant 'v': needs 232449 bytes of shared memory, device limit 232448");
  EXPECT_TRUE(CheckLaunchLimits("gemm", "v", grid, block, 232448, l).ok());
}

TEST(Validate, DTypeNames) {
  EXPECT_EQ(DTypeName({TL_DTYPE_FLOAT, 16, 1}), "float16");
  EXPECT_EQ(DTypeName({TL_DTYPE_INT, 8, 4}), "int8x4");
  EXPECT_EQ(DTypeName({TL_DTYPE_BOOL, 8, 1}), "bool");
  EXPECT_EQ(DTypeName({9, 8, 1}), "dtype(code 9, bits 8, lanes 1)");
}

}  // namespace
}  // namespace tl::rt
