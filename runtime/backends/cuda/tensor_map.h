// CUDA TMA tensor maps: what cuTensorMapEncodeTiled is called with for one
// tensor argument of a launch (bundle Launch.tensor_maps), as a pure
// function so that every rule is tested without a GPU.
//
// The driver's rules (CUDA driver API, cuTensorMapEncodeTiled), checked here
// first so that a tensor the hardware cannot describe fails with
// INVALID_ARGUMENT naming the argument, the rule and the numbers, never with
// the driver's bare CUDA_ERROR_INVALID_VALUE:
//   * rank 1 to 5 (the box has one extent per dim);
//   * a dtype with a tensor-map type (no bool, no vector lanes);
//   * base address 16-byte aligned;
//   * every dim 1 to 2^32 elements;
//   * every stride but the innermost (dense row-major here: the product of the
//     inner dims times the element size) a multiple of 16 bytes, below 2^40;
//   * box extents 1 to 256, the innermost box row a multiple of 16 bytes and,
//     with a swizzle, at most its span (32, 64 or 128 bytes).
// Dimensions are given to the driver innermost first (dims[0] is the tensor's
// last dim); strides likewise, without the innermost one.
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../src/backend.h"

namespace tl::rt::cuda {

struct TensorMapEncoding {
  int data_type = 0;  // CUtensorMapDataType
  uint32_t rank = 0;
  void* address = nullptr;
  uint64_t dims[5] = {};     // innermost first
  uint64_t strides[4] = {};  // bytes, dims 1 .. rank-1
  uint32_t box[5] = {};      // innermost first
  uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  int interleave = 0;    // CU_TENSOR_MAP_INTERLEAVE_NONE
  int swizzle = 0;       // CU_TENSOR_MAP_SWIZZLE_*
  int l2_promotion = 0;  // CU_TENSOR_MAP_L2_PROMOTION_*
  int oob_fill = 0;      // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros outside the tensor
};

// `where` names the launch argument ("kernel 'k' variant 'v' argument 0 'A'").
StatusOr<TensorMapEncoding> DescribeTensorMap(const LoadRequest::TensorMapSpec& spec, tl_dtype_t dtype, void* data,
                                              const std::vector<int64_t>& shape, const std::string& where);

}  // namespace tl::rt::cuda
