// Launch-argument validation against a kernel signature, grid-expression
// evaluation, argument guards and device-limit checks. Pure functions over
// plain data, so every error path is tested without a device.
//
// Messages name the kernel, the argument index and name, and the numbers:
//   "kernel 'gemm' argument 2 'C': dim 1 is 100, expected 128".
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "device_desc.h"
#include "tilelang/formats/status.h"
#include "tilelang/runtime.h"

namespace tl::rt {

struct DimSig {
  int64_t static_size = -1;
  int symbol = -1;
  uint32_t divisible_by = 1;
};

struct ParamSig {
  std::string name;
  int kind = TL_PARAM_BUFFER;
  tl_dtype_t dtype{2, 32, 1};
  int access = TL_ACCESS_READ;
  int rank = -1;
  std::vector<DimSig> shape;
  uint32_t ptr_alignment = 1;
  int binds_symbol = -1;
};

struct KernelSig {
  std::string name;
  std::vector<ParamSig> params;
  std::vector<std::string> symbols;
};

// What validation learns from the arguments.
struct BoundArgs {
  std::vector<int64_t> symbols;       // value per shape symbol
  std::vector<int64_t> scalar_values; // per param: integer value of integer scalars (0 otherwise)
  std::vector<uint64_t> pointers;     // per param: tensor base address (0 for scalars)
};

std::string DTypeName(tl_dtype_t dtype);  // "float32", "bfloat16", "int8x4"

// Checks count, kind, dtype, scalar size, rank, static dims, symbol
// consistency (one value per symbol across all arguments, and scalars bound
// to a symbol), divisibility, pointer alignment and dense row-major
// contiguity. Fills `out` on success.
Status ValidateArgs(const KernelSig& sig, std::span<const tl_arg_t> args, BoundArgs* out);

// Grid-expression opcodes (formats/bundle.fbs GridExpr).
enum GridOp : int64_t {
  kGridConst = 0, kGridSym = 1, kGridParam = 2, kGridAdd = 3, kGridSub = 4, kGridMul = 5,
  kGridCeilDiv = 6, kGridFloorDiv = 7, kGridMin = 8, kGridMax = 9, kGridFloorMod = 10,
};
// Evaluates with int64 overflow checks; errors name the kernel and axis.
StatusOr<int64_t> EvalGridExpr(const KernelSig& sig, int axis, std::span<const int64_t> code, const BoundArgs& args);

// Argument guards (formats/bundle.fbs Guard). Returns "" when all hold, else
// the first failing guard described ("argument 0 'A' pointer 0x...: not
// aligned to 64").
struct GuardDesc {
  uint32_t param = 0;
  int op = 0;  // 0 DIVISIBLE_BY, 1 EQUALS, 2 PTR_ALIGNED, 3 LESS_EQUAL, 4 GREATER_EQUAL
  int64_t value = 0;
};
std::string CheckGuards(const KernelSig& sig, const std::vector<GuardDesc>& guards, const BoundArgs& args);

// Grid, block and shared-memory limits of the device.
Status CheckLaunchLimits(const std::string& kernel, const std::string& variant, const uint64_t grid[3],
                         const uint32_t block[3], uint64_t shared_bytes, const DeviceLimits& limits);

}  // namespace tl::rt
