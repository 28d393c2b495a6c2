// The CUDA backend's TMA tensor-map description (runtime/backends/cuda/
// tensor_map.h): what cuTensorMapEncodeTiled is called with for a tensor
// argument, and the INVALID_ARGUMENT errors, naming the argument, for tensors
// a tensor map cannot describe. Pure function: runs in CI without a GPU.
#include <gtest/gtest.h>

#include "../../runtime/backends/cuda/tensor_map.h"

namespace {

using tl::rt::LoadRequest;
using tl::rt::cuda::DescribeTensorMap;
using tl::rt::cuda::TensorMapEncoding;

void* Addr(uintptr_t a) { return reinterpret_cast<void*>(a); }
LoadRequest::TensorMapSpec Spec(std::vector<uint32_t> box, int swizzle = 0) {
  LoadRequest::TensorMapSpec s;
  s.param = 0;
  s.box = std::move(box);
  s.swizzle = swizzle;
  return s;
}
const tl_dtype_t kF16{TL_DTYPE_FLOAT, 16, 1};
const tl_dtype_t kBF16{TL_DTYPE_BFLOAT, 16, 1};
const tl_dtype_t kF32{TL_DTYPE_FLOAT, 32, 1};
const std::string kWhere = "kernel 'gemm' variant 'cuda.sm_90a' argument 0 'A'";

std::string Error(const LoadRequest::TensorMapSpec& s, tl_dtype_t t, uintptr_t a, std::vector<int64_t> shape) {
  auto e = DescribeTensorMap(s, t, Addr(a), shape, kWhere);
  if (e.ok()) return "ok";
  EXPECT_EQ(e.status().code(), tl::StatusCode::kInvalidArgument);
  return e.status().message();
}

TEST(CudaTensorMap, DescribesA2DTileInnermostFirst) {
  // A 200 x 152 f16 matrix, 64 x 32 boxes: dims/box innermost first, the row
  // stride in bytes, element strides 1, no interleave, zeros outside.
  auto e = DescribeTensorMap(Spec({64, 32}), kF16, Addr(0x10000), {200, 152}, kWhere);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->data_type, 6);  // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
  EXPECT_EQ(e->rank, 2u);
  EXPECT_EQ(e->address, Addr(0x10000));
  EXPECT_EQ(e->dims[0], 152u);
  EXPECT_EQ(e->dims[1], 200u);
  EXPECT_EQ(e->strides[0], 304u);
  EXPECT_EQ(e->box[0], 32u);
  EXPECT_EQ(e->box[1], 64u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(e->element_strides[i], 1u);
  EXPECT_EQ(e->interleave, 0);
  EXPECT_EQ(e->swizzle, 0);
  EXPECT_EQ(e->oob_fill, 0);
}

TEST(CudaTensorMap, RankFiveStridesAndDtypes) {
  auto e = DescribeTensorMap(Spec({1, 2, 3, 4, 8}), kF32, Addr(0x1000), {5, 6, 7, 9, 12}, kWhere);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->data_type, 7);
  const uint64_t want_dims[5] = {12, 9, 7, 6, 5}, want_strides[4] = {48, 48 * 9, 48 * 9 * 7, 48 * 9 * 7 * 6};
  const uint32_t want_box[5] = {8, 4, 3, 2, 1};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(e->dims[i], want_dims[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e->strides[i], want_strides[i]) << i;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(e->box[i], want_box[i]) << i;
  struct {
    tl_dtype_t t;
    int want;
  } cases[] = {{{TL_DTYPE_BFLOAT, 16, 1}, 9}, {{TL_DTYPE_FLOAT, 64, 1}, 8}, {{TL_DTYPE_INT, 8, 1}, 0},
               {{TL_DTYPE_UINT, 8, 1}, 0},    {{TL_DTYPE_INT, 16, 1}, 1},   {{TL_DTYPE_INT, 32, 1}, 3},
               {{TL_DTYPE_UINT, 32, 1}, 2},   {{TL_DTYPE_INT, 64, 1}, 5},   {{TL_DTYPE_UINT, 64, 1}, 4}};
  for (const auto& c : cases) {
    const uint32_t inner = 16 / (c.t.bits / 8) * 2;  // two 16-byte chunks per box row
    auto d = DescribeTensorMap(Spec({4, inner}), c.t, Addr(0x40), {10, inner * 4}, kWhere);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->data_type, c.want) << int(c.t.code) << "/" << int(c.t.bits);
  }
  // A 1-D tensor has no strides to check: any length.
  EXPECT_EQ(Error(Spec({64}), kF16, 0x40, {1001}), "ok");
}

TEST(CudaTensorMap, RefusesWhatTheHardwareCannotDescribe) {
  const std::string pre = kWhere + ": cannot be described by a TMA tensor map: ";
  EXPECT_EQ(Error(Spec({64, 32}), kF16, 0x10008, {200, 152}),
            pre + "base address 0x10008 is not 16-byte aligned (offset 8)");
  EXPECT_EQ(Error(Spec({64, 32}), kF16, 0x10000, {200, 100}), pre + "dim 0 stride is 200 bytes, not a multiple of 16");
  EXPECT_EQ(Error(Spec({1, 1, 1, 1, 1, 8}), kF16, 0x10000, {2, 2, 2, 2, 2, 8}),
            pre + "rank 6 (a tensor map has 1 to 5 dims)");
  EXPECT_EQ(Error(Spec({64, 32}), kF16, 0x10000, {3, 64, 32}), pre + "rank 3, but the kernel's tensor map has 2 box dims");
  EXPECT_EQ(Error(Spec({64, 32}), kF16, 0x10000, {0, 32}), pre + "dim 0 is 0 (a tensor map needs 1 to 2^32)");
  EXPECT_EQ(Error(Spec({64, 32}), kF16, 0x10000, {(int64_t{1} << 32) + 1, 32}),
            pre + "dim 0 is 4294967297 (a tensor map needs 1 to 2^32)");
  EXPECT_EQ(Error(Spec({1, 1, 8}), kF16, 0x10000, {2, int64_t{1} << 20, int64_t{1} << 20}),
            pre + "dim 0 stride is 2199023255552 bytes (must be < 2^40)");
  EXPECT_EQ(Error(Spec({300, 32}), kF16, 0x10000, {400, 64}), pre + "box dim 0 is 300 (1 to 256)");
  EXPECT_EQ(Error(Spec({64, 4}), kF16, 0x10000, {200, 64}), pre + "the box row is 8 bytes, not a multiple of 16");
  EXPECT_EQ(Error(Spec({64, 128}, 3), kBF16, 0x10000, {200, 256}),
            pre + "the box row is 256 bytes, more than the swizzle's 128");
  EXPECT_EQ(Error(Spec({64, 64}, 3), kBF16, 0x10000, {200, 256}), "ok");
  EXPECT_EQ(Error(Spec({64, 32}), tl_dtype_t{TL_DTYPE_BOOL, 8, 1}, 0x10000, {200, 64}),
            pre + "dtype (code 6, 8 bits, 1 lanes) has no tensor-map type");
  EXPECT_EQ(Error(Spec({64, 32}), tl_dtype_t{TL_DTYPE_FLOAT, 16, 2}, 0x10000, {200, 64}),
            pre + "dtype (code 2, 16 bits, 2 lanes) has no tensor-map type");
}

}  // namespace
