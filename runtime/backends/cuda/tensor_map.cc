// DescribeTensorMap: see tensor_map.h.
#include "tensor_map.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>

namespace tl::rt::cuda {
namespace {

// CUtensorMapDataType for a DLPack-style dtype, or -1.
int DataType(tl_dtype_t t) {
  if (t.lanes > 1) return -1;
  switch (t.code) {
    case TL_DTYPE_INT:
    case TL_DTYPE_UINT: {
      const bool u = t.code == TL_DTYPE_UINT;
      switch (t.bits) {
        case 8: return 0;                // UINT8 (bytes are bytes)
        case 16: return 1;               // UINT16
        case 32: return u ? 2 : 3;       // UINT32 / INT32
        case 64: return u ? 4 : 5;       // UINT64 / INT64
        default: return -1;
      }
    }
    case TL_DTYPE_FLOAT:
      return t.bits == 16 ? 6 : t.bits == 32 ? 7 : t.bits == 64 ? 8 : t.bits == 8 ? 0 : -1;  // fp8: bytes
    case TL_DTYPE_BFLOAT: return t.bits == 16 ? 9 : -1;
    default: return -1;
  }
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

StatusOr<TensorMapEncoding> DescribeTensorMap(const LoadRequest::TensorMapSpec& spec, tl_dtype_t dtype, void* data,
                                              const std::vector<int64_t>& shape, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, where + ": cannot be described by a TMA tensor map: " + what);
  };
  const size_t rank = shape.size();
  if (rank < 1 || rank > 5) return bad(Fmt("rank %zu (a tensor map has 1 to 5 dims)", rank));
  if (spec.box.size() != rank) {
    return bad(Fmt("rank %zu, but the kernel's tensor map has %zu box dims", rank, spec.box.size()));
  }
  TensorMapEncoding e;
  e.data_type = DataType(dtype);
  if (e.data_type < 0) {
    return bad(Fmt("dtype (code %u, %u bits, %u lanes) has no tensor-map type", dtype.code, dtype.bits, dtype.lanes));
  }
  const uint64_t esize = dtype.bits / 8;
  const uint64_t address = reinterpret_cast<uintptr_t>(data);
  if (address % 16 != 0) {
    return bad(Fmt("base address 0x%" PRIx64 " is not 16-byte aligned (offset %" PRIu64 ")", address, address % 16));
  }
  e.rank = static_cast<uint32_t>(rank);
  e.address = data;
  e.swizzle = spec.swizzle;
  e.l2_promotion = spec.l2_promotion;
  uint64_t stride = esize;  // bytes between consecutive elements of the current dim
  for (size_t i = 0; i < rank; ++i) {
    const size_t d = rank - 1 - i;  // tensor dim, innermost first
    if (shape[d] < 1 || static_cast<uint64_t>(shape[d]) > (uint64_t{1} << 32)) {
      return bad(Fmt("dim %zu is %" PRId64 " (a tensor map needs 1 to 2^32)", d, shape[d]));
    }
    e.dims[i] = static_cast<uint64_t>(shape[d]);
    if (i > 0) {
      if (stride % 16 != 0) {
        return bad(Fmt("dim %zu stride is %" PRIu64 " bytes, not a multiple of 16", d, stride));
      }
      if (stride >= (uint64_t{1} << 40)) return bad(Fmt("dim %zu stride is %" PRIu64 " bytes (must be < 2^40)", d, stride));
      e.strides[i - 1] = stride;
    }
    if (__builtin_mul_overflow(stride, e.dims[i], &stride)) stride = UINT64_MAX;
    const uint32_t b = spec.box[d];
    if (b < 1 || b > 256) return bad(Fmt("box dim %zu is %u (1 to 256)", d, b));
    e.box[i] = b;
  }
  const uint64_t inner = uint64_t{e.box[0]} * esize;
  if (inner % 16 != 0) return bad(Fmt("the box row is %" PRIu64 " bytes, not a multiple of 16", inner));
  if (spec.swizzle < 0 || spec.swizzle > 3) return bad(Fmt("swizzle mode %d (0 to 3)", spec.swizzle));
  if (spec.swizzle > 0 && inner > (uint64_t{16} << spec.swizzle)) {
    return bad(Fmt("the box row is %" PRIu64 " bytes, more than the swizzle's %" PRIu64, inner, uint64_t{16} << spec.swizzle));
  }
  return e;
}

}  // namespace tl::rt::cuda
