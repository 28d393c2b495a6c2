// PlanTmaCopy and TensorMapDataType: see tma.h for the rules and why.
#include "tilelang/lowering/gpu/tma.h"

namespace tl::gpu {

int TensorMapDataType(ir::DType t) {
  // CUtensorMapDataType (cuda.h): UINT8 0, UINT16 1, UINT32 2, INT32 3,
  // UINT64 4, INT64 5, FLOAT16 6, FLOAT32 7, FLOAT64 8, BFLOAT16 9.
  switch (t) {
    case ir::DType::kI8:
    case ir::DType::kU8: return 0;
    case ir::DType::kI16:
    case ir::DType::kU16: return 1;
    case ir::DType::kU32: return 2;
    case ir::DType::kI32: return 3;
    case ir::DType::kU64: return 4;
    case ir::DType::kI64: return 5;
    case ir::DType::kF16: return 6;
    case ir::DType::kF32: return 7;
    case ir::DType::kF64: return 8;
    case ir::DType::kBF16: return 9;
    case ir::DType::kBool: return -1;
  }
  return -1;
}

TmaCopyPlan PlanTmaCopy(const TmaCopyQuery& q) {
  TmaCopyPlan p;
  auto no = [&](std::string why) {
    p.why_not = std::move(why);
    return p;
  };
  const size_t rank = q.tensor_shape.size();
  const int64_t esize = ir::BitWidth(q.dtype) / 8;
  if (TensorMapDataType(q.dtype) < 0 || esize < 1) return no(std::string("dtype ") + ir::DTypeName(q.dtype) + " has no tensor-map type");
  if (rank < 1 || rank > 5) return no("tensor rank " + std::to_string(rank) + " (a tensor map has 1 to 5 dims)");
  if (q.src_extents.size() != rank) return no("region rank differs from the tensor's");
  const std::optional<int64_t> last = q.tensor_shape.back();
  if (rank > 1 && !last) return no("the tensor's last dim is dynamic (its row stride may not be a multiple of 16 bytes)");
  if (rank > 1 && (*last * esize) % 16 != 0) {
    return no("the tensor's rows are " + std::to_string(*last * esize) + " bytes, not a multiple of 16");
  }
  if (!q.dst_region_whole) return no("the destination is not a whole shared tile");
  if (!q.dst_aligned) return no("the destination tile is not 128-byte aligned");
  // The source's kept extents must be the destination's, in order.
  std::vector<int64_t> kept;
  for (size_t d = 0; d < rank; ++d) {
    if (q.src_extents[d] != 1) kept.push_back(q.src_extents[d]);
  }
  std::vector<int64_t> dst;
  for (int64_t e : q.dst_extents) {
    if (e != 1) dst.push_back(e);
  }
  if (kept != dst) return no("source and destination tiles differ in shape");
  if (q.dst_shape.size() != q.dst_extents.size() || q.dst_extents.empty()) return no("destination rank mismatch");
  for (size_t d = 0; d + 1 < q.dst_extents.size(); ++d) {
    if (q.dst_shape[d] != q.dst_extents[d]) return no("the destination buffer is wider than the tile");
  }
  p.box = q.src_extents;
  // The innermost box dim: the tensor's last dim, as wide as the stored row.
  const int64_t row = q.dst_shape.back();
  if (row != q.dst_extents.back()) {
    if (q.src_extents.back() != q.dst_extents.back() || row < q.dst_extents.back()) {
      return no("a padded destination row whose tile row is not the tensor's last dim");
    }
    p.box.back() = row;
  }
  for (size_t d = 0; d < rank; ++d) {
    if (p.box[d] < 1 || p.box[d] > 256) {
      return no("box dim " + std::to_string(d) + " is " + std::to_string(p.box[d]) + " elements (1 to 256)");
    }
  }
  const int64_t inner = p.box.back() * esize;
  if (inner % 16 != 0) return no("the box row is " + std::to_string(inner) + " bytes, not a multiple of 16");
  if (q.swizzle != SmemSwizzle::kNone && inner > SwizzleRowBytes(q.swizzle)) {
    return no("the box row is " + std::to_string(inner) + " bytes, more than the " + SwizzleName(q.swizzle) +
              " swizzle's " + std::to_string(SwizzleRowBytes(q.swizzle)));
  }
  p.bytes = esize;
  for (int64_t b : p.box) p.bytes *= b;
  if (p.bytes >= (int64_t{1} << 20)) return no("the box is " + std::to_string(p.bytes) + " bytes (an mbarrier phase counts < 2^20)");
  p.ok = true;
  return p;
}

}  // namespace tl::gpu
