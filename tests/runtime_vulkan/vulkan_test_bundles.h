// Bundles for the Vulkan runtime tests, laid out as VULKAN_CONTRACT.md says
// (one storage buffer per tensor in parameter order, scalars then the shape
// symbols in push constants), around the SPIR-V kernels of kernels/
// assembled at build time:
//   vadd(x[N], y[N], out[N], float alpha): out = x + alpha * y (64 invocations)
//   rowsum(A[M, K], out[M]): row sums through 256 B of workgroup memory
//   axpb_i64(x[N], out[N], float a, int64 b): out = a * x + b (push constants
//     a @0, b @8, N @16: both scalar sizes and their alignment; shaderInt64)
//   addi(x[N], out[N], s): out = x + s, s declared with the given integer
//     dtype but pushed as 4 bytes (int32 in the module)
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bundle_generated.h"

extern const unsigned char tl_vk_vadd[];
extern const size_t tl_vk_vadd_size;
extern const unsigned char tl_vk_vadd_wide[];   // LocalSize 2048 x 1 x 1
extern const size_t tl_vk_vadd_wide_size;
extern const unsigned char tl_vk_vadd_many[];   // LocalSize 32 x 32 x 2
extern const size_t tl_vk_vadd_many_size;
extern const unsigned char tl_vk_rowsum[];
extern const size_t tl_vk_rowsum_size;
extern const unsigned char tl_vk_rowsum_big[];  // 64 KiB of Workgroup memory
extern const size_t tl_vk_rowsum_big_size;
extern const unsigned char tl_vk_axpb_i64[];
extern const size_t tl_vk_axpb_i64_size;
extern const unsigned char tl_vk_addi[];
extern const size_t tl_vk_addi_size;

namespace tl::rt::vktest {

// One Vulkan variant, written as the SPIR-V code generator writes it.
struct VkSpec {
  std::vector<uint8_t> code;
  std::string entry;
  std::vector<uint32_t> block = {64, 1, 1};
  std::vector<std::vector<int64_t>> grid;
  std::vector<int> bindings;                            // param per binding k
  std::vector<std::tuple<int, uint32_t, uint32_t>> push;  // param, offset, size
  uint32_t push_bytes = 0;
  uint32_t static_shared = 0;
  // Requirements (defaults derived from the launch data when < 0).
  int64_t req_shared = -1;
  int64_t req_threads = -1;
  uint32_t req_subgroup = 0;
  int64_t req_push = -1;
  std::vector<std::string> features;
  std::string id = "vulkan.spirv1.3";
  std::string arch = "spirv1.3";
};


std::unique_ptr<tl::bundle::VariantT> Variant(const VkSpec& spec, uint32_t payload);
VkSpec VaddSpec();
VkSpec RowsumSpec();
std::unique_ptr<tl::bundle::KernelT> VaddKernel(const VkSpec& spec, uint32_t payload, uint32_t ptr_alignment = 16);
std::unique_ptr<tl::bundle::KernelT> RowsumKernel(const VkSpec& spec, uint32_t payload);
// One-kernel bundles (the spec may be altered for negative tests).
std::vector<uint8_t> VaddBundle(const VkSpec& spec = VaddSpec(), uint32_t ptr_alignment = 16);
std::vector<uint8_t> RowsumBundle(const VkSpec& spec = RowsumSpec());
VkSpec AxpbSpec();
std::vector<uint8_t> AxpbBundle(const VkSpec& spec = AxpbSpec());
// `code`/`bits`: the dtype of s (TL_DTYPE_INT 0 / TL_DTYPE_UINT 1; 8 or 16).
std::vector<uint8_t> AddiBundle(uint8_t code, uint8_t bits);
// vadd and rowsum: the bundle the Python tests use (data/vulkan.tlb).
std::vector<uint8_t> VulkanTestBundle();

}  // namespace tl::rt::vktest
