#include "validate.h"

#include <cinttypes>
#include <cstring>
#include <cstdarg>
#include <cstdio>

namespace tl::rt {

namespace {

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

Status ArgError(const KernelSig& sig, size_t i, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "kernel '" + sig.name + "' argument " + std::to_string(i) + " '" +
                                                  sig.params[i].name + "': " + what);
}

bool IsInteger(tl_dtype_t d) { return d.code == TL_DTYPE_INT || d.code == TL_DTYPE_UINT || d.code == TL_DTYPE_BOOL; }

int64_t ScalarAsInt(const tl_arg_t& a) {
  const bool is_signed = a.dtype.code == TL_DTYPE_INT;
  switch (a.scalar_size) {
    case 1: return is_signed ? static_cast<int8_t>(a.value.bytes[0]) : a.value.bytes[0];
    case 2: {
      uint16_t u;
      memcpy(&u, a.value.bytes, 2);
      return is_signed ? static_cast<int16_t>(u) : u;
    }
    case 4: return is_signed ? static_cast<int64_t>(a.value.i32) : static_cast<int64_t>(a.value.u32);
    default: return a.value.i64;
  }
}

}  // namespace

std::string DTypeName(tl_dtype_t d) {
  const char* base = "unknown";
  switch (d.code) {
    case TL_DTYPE_INT: base = "int"; break;
    case TL_DTYPE_UINT: base = "uint"; break;
    case TL_DTYPE_FLOAT: base = "float"; break;
    case TL_DTYPE_BFLOAT: base = "bfloat"; break;
    case TL_DTYPE_BOOL: return d.lanes > 1 ? Format("bool%ux%u", d.bits, d.lanes) : "bool";
    default: return Format("dtype(code %u, bits %u, lanes %u)", d.code, d.bits, d.lanes);
  }
  std::string s = Format("%s%u", base, d.bits);
  if (d.lanes > 1) s += Format("x%u", d.lanes);
  return s;
}

Status ValidateArgs(const KernelSig& sig, std::span<const tl_arg_t> args, BoundArgs* out) {
  const size_t n = sig.params.size();
  if (args.size() != n) {
    std::string names;
    for (size_t i = 0; i < n; ++i) names += (i ? ", " : "") + sig.params[i].name;
    return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' takes %zu argument(s) (%s), got %zu",
                      sig.name.c_str(), n, names.c_str(), args.size());
  }
  out->symbols.assign(sig.symbols.size(), -1);
  out->scalar_values.assign(n, 0);
  out->pointers.assign(n, 0);
  // Where each symbol got its value, for messages.
  std::vector<std::string> origin(sig.symbols.size());
  auto symbol_name = [&](int s) { return s >= 0 && static_cast<size_t>(s) < sig.symbols.size() ? sig.symbols[s] : std::string("?"); };

  // Tensors first: they define the symbols; scalars bound to symbols are then
  // checked against them (or define them when no tensor does).
  for (size_t i = 0; i < n; ++i) {
    const ParamSig& p = sig.params[i];
    const tl_arg_t& a = args[i];
    if (p.kind == TL_PARAM_BUFFER) {
      if (a.kind != TL_ARG_TENSOR) return ArgError(sig, i, "expected a tensor, got a scalar");
    } else {
      if (a.kind != TL_ARG_SCALAR) return ArgError(sig, i, "expected a scalar, got a tensor");
    }
    if (a.dtype.code != p.dtype.code || a.dtype.bits != p.dtype.bits || a.dtype.lanes != p.dtype.lanes) {
      return ArgError(sig, i, "dtype is " + DTypeName(a.dtype) + ", expected " + DTypeName(p.dtype));
    }
    if (p.kind != TL_PARAM_BUFFER) continue;
    const tl_tensor_t& t = a.tensor;
    if (t.rank != p.rank) return ArgError(sig, i, Format("rank is %d, expected %d", t.rank, p.rank));
    if (t.rank > 0 && !t.shape) return ArgError(sig, i, "shape is NULL");
    int64_t elements = 1;
    for (int d = 0; d < t.rank; ++d) {
      const int64_t extent = t.shape[d];
      const DimSig& dim = p.shape[d];
      if (extent < 0) return ArgError(sig, i, Format("dim %d is %" PRId64 ", negative", d, extent));
      if (dim.static_size >= 0 && extent != dim.static_size) {
        return ArgError(sig, i, Format("dim %d is %" PRId64 ", expected %" PRId64, d, extent, dim.static_size));
      }
      if (dim.divisible_by > 1 && extent % dim.divisible_by != 0) {
        return ArgError(sig, i, Format("dim %d is %" PRId64 ", must be divisible by %u", d, extent, dim.divisible_by));
      }
      if (dim.symbol >= 0) {
        int64_t& value = out->symbols[dim.symbol];
        if (value < 0) {
          value = extent;
          origin[dim.symbol] = Format("argument %zu '%s' dim %d", i, p.name.c_str(), d);
        } else if (value != extent) {
          return ArgError(sig, i, Format("dim %d is %" PRId64 ", but symbol '%s' is %" PRId64 " (from %s)", d, extent,
                                         symbol_name(dim.symbol).c_str(), value, origin[dim.symbol].c_str()));
        }
      }
      if (__builtin_mul_overflow(elements, extent, &elements)) {
        return ArgError(sig, i, "element count overflows int64");
      }
    }
    const uint64_t address = reinterpret_cast<uintptr_t>(t.data);
    if (!t.data && elements > 0) return ArgError(sig, i, "data pointer is NULL");
    if (p.ptr_alignment > 1 && address % p.ptr_alignment != 0) {
      return ArgError(sig, i, Format("data pointer 0x%" PRIx64 " is not aligned to %u bytes (offset %" PRIu64 ")",
                                     address, p.ptr_alignment, address % p.ptr_alignment));
    }
    if (t.strides) {
      int64_t expected = 1;
      for (int d = t.rank - 1; d >= 0; --d) {
        // A dimension of extent 1 may carry any stride (numpy and DLPack
        // producers disagree on it) without changing the layout.
        if (t.shape[d] != 1 && t.strides[d] != expected) {
          return ArgError(sig, i, Format("not contiguous: dim %d stride is %" PRId64 ", expected %" PRId64
                                         " (dense row-major)", d, t.strides[d], expected));
        }
        expected *= t.shape[d];
      }
    }
    out->pointers[i] = address;
  }
  for (size_t i = 0; i < n; ++i) {
    const ParamSig& p = sig.params[i];
    const tl_arg_t& a = args[i];
    if (p.kind != TL_PARAM_SCALAR) continue;
    const uint32_t expected_size = (p.dtype.bits * p.dtype.lanes + 7u) / 8u;
    if (a.scalar_size != expected_size) {
      return ArgError(sig, i, Format("scalar is %u bytes, expected %u (%s)", a.scalar_size, expected_size,
                                     DTypeName(p.dtype).c_str()));
    }
    if (a.scalar_size > sizeof(a.value)) return ArgError(sig, i, Format("scalar of %u bytes is too large", a.scalar_size));
    if (!IsInteger(p.dtype)) continue;
    const int64_t v = ScalarAsInt(a);
    out->scalar_values[i] = v;
    if (p.binds_symbol >= 0) {
      int64_t& value = out->symbols[p.binds_symbol];
      if (value < 0) {
        if (v < 0) return ArgError(sig, i, Format("value %" PRId64 " for symbol '%s' is negative", v, symbol_name(p.binds_symbol).c_str()));
        value = v;
        origin[p.binds_symbol] = Format("argument %zu '%s'", i, p.name.c_str());
      } else if (value != v) {
        return ArgError(sig, i, Format("value is %" PRId64 ", but symbol '%s' is %" PRId64 " (from %s)", v,
                                       symbol_name(p.binds_symbol).c_str(), value, origin[p.binds_symbol].c_str()));
      }
    }
  }
  for (size_t s = 0; s < sig.symbols.size(); ++s) {
    if (out->symbols[s] < 0) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s': shape symbol '%s' is bound by no argument",
                        sig.name.c_str(), sig.symbols[s].c_str());
    }
  }
  return Status::Ok();
}

StatusOr<int64_t> EvalGridExpr(const KernelSig& sig, int axis, std::span<const int64_t> code, const BoundArgs& args) {
  static const char kAxis[] = "xyz";
  auto fail = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument,
                  Format("kernel '%s' grid %c expression: ", sig.name.c_str(), kAxis[axis % 3]) + what);
  };
  std::vector<int64_t> stack;
  for (size_t pc = 0; pc < code.size(); ++pc) {
    const int64_t op = code[pc];
    if (op == kGridConst || op == kGridSym || op == kGridParam) {
      if (pc + 1 >= code.size()) return fail(Format("opcode %" PRId64 " at %zu lacks its immediate", op, pc));
      const int64_t imm = code[++pc];
      if (op == kGridConst) {
        stack.push_back(imm);
      } else if (op == kGridSym) {
        if (imm < 0 || static_cast<size_t>(imm) >= args.symbols.size()) {
          return fail(Format("symbol index %" PRId64 " out of range (%zu symbols)", imm, args.symbols.size()));
        }
        stack.push_back(args.symbols[imm]);
      } else {
        if (imm < 0 || static_cast<size_t>(imm) >= sig.params.size() || sig.params[imm].kind != TL_PARAM_SCALAR) {
          return fail(Format("parameter index %" PRId64 " is not a scalar parameter", imm));
        }
        stack.push_back(args.scalar_values[imm]);
      }
      if (stack.size() > 64) return fail("stack deeper than 64");
      continue;
    }
    if (op < kGridAdd || op > kGridFloorMod) return fail(Format("unknown opcode %" PRId64 " at %zu", op, pc));
    if (stack.size() < 2) return fail(Format("opcode %" PRId64 " at %zu needs two operands", op, pc));
    const int64_t b = stack.back();
    stack.pop_back();
    const int64_t a = stack.back();
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
      case kGridAdd: overflow = __builtin_add_overflow(a, b, &r); break;
      case kGridSub: overflow = __builtin_sub_overflow(a, b, &r); break;
      case kGridMul: overflow = __builtin_mul_overflow(a, b, &r); break;
      case kGridCeilDiv:
      case kGridFloorDiv:
      case kGridFloorMod: {
        if (b <= 0) return fail(Format("division by %" PRId64 " at %zu", b, pc));
        int64_t q = a / b, m = a % b;
        if (m < 0) {  // floor semantics for negative dividends
          q -= 1;
          m += b;
        }
        if (op == kGridFloorDiv) r = q;
        if (op == kGridFloorMod) r = m;
        if (op == kGridCeilDiv) r = q + (m != 0 ? 1 : 0);
        break;
      }
      case kGridMin: r = a < b ? a : b; break;
      case kGridMax: r = a > b ? a : b; break;
    }
    if (overflow) return fail(Format("int64 overflow at %zu", pc));
    stack.back() = r;
  }
  if (stack.size() != 1) return fail(Format("leaves %zu values on the stack, expected 1", stack.size()));
  return stack.back();
}

std::string CheckGuards(const KernelSig& sig, const std::vector<GuardDesc>& guards, const BoundArgs& args) {
  for (const GuardDesc& g : guards) {
    if (g.param >= sig.params.size()) return Format("guard names parameter %u of %zu", g.param, sig.params.size());
    const ParamSig& p = sig.params[g.param];
    const bool buffer = p.kind == TL_PARAM_BUFFER;
    const int64_t v = buffer ? static_cast<int64_t>(args.pointers[g.param]) : args.scalar_values[g.param];
    bool ok = true;
    const char* what = "";
    switch (g.op) {
      case 0: ok = g.value > 0 && v % g.value == 0; what = "divisible by"; break;
      case 1: ok = v == g.value; what = "equal to"; break;
      case 2: ok = g.value > 0 && args.pointers[g.param] % static_cast<uint64_t>(g.value) == 0; what = "pointer aligned to"; break;
      case 3: ok = v <= g.value; what = "<="; break;
      case 4: ok = v >= g.value; what = ">="; break;
      default: return Format("unknown guard op %d", g.op);
    }
    if (!ok) {
      return Format("argument %u '%s' (%s %" PRId64 ") is not %s %" PRId64, g.param, p.name.c_str(),
                    buffer ? "pointer" : "value", v, what, g.value);
    }
  }
  return "";
}

Status CheckLaunchLimits(const std::string& kernel, const std::string& variant, const uint64_t grid[3],
                         const uint32_t block[3], uint64_t shared_bytes, const DeviceLimits& limits) {
  static const char kAxis[] = "xyz";
  for (int i = 0; i < 3; ++i) {
    if (limits.max_grid[i] != 0 && grid[i] > limits.max_grid[i]) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': grid %c is %" PRIu64 ", device limit %u",
                        kernel.c_str(), variant.c_str(), kAxis[i], grid[i], limits.max_grid[i]);
    }
    if (limits.max_block[i] != 0 && block[i] > limits.max_block[i]) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': block %c is %u, device limit %u",
                        kernel.c_str(), variant.c_str(), kAxis[i], block[i], limits.max_block[i]);
    }
  }
  const uint64_t threads = static_cast<uint64_t>(block[0]) * block[1] * block[2];
  if (limits.max_threads_per_block != 0 && threads > limits.max_threads_per_block) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "kernel '%s' variant '%s': block %ux%ux%u is %" PRIu64 " threads, device limit %u",
                      kernel.c_str(), variant.c_str(), block[0], block[1], block[2], threads,
                      limits.max_threads_per_block);
  }
  if (shared_bytes > limits.max_shared_bytes) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "kernel '%s' variant '%s': needs %" PRIu64 " bytes of shared memory, device limit %" PRIu64,
                      kernel.c_str(), variant.c_str(), shared_bytes, static_cast<uint64_t>(limits.max_shared_bytes));
  }
  return Status::Ok();
}

}  // namespace tl::rt
