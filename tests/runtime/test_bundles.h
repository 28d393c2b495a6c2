// Test bundles for the runtime: real .tlb files made with the formats
// library's writer around the hand-written CPU kernel libraries of
// kernels/test_kernels.c (built per ISA level at build time).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bundle_generated.h"

namespace tl::rt::testing {

// Bytes of a file; aborts the test binary when unreadable (build problem).
std::vector<uint8_t> ReadBinary(const std::string& path);
// build/.../kernels/test_kernels_<name>.so, e.g. "v3", "no_query".
std::vector<uint8_t> KernelLibrary(const std::string& name);

// Manifest pieces.
struct DimSpec {
  int64_t static_size = -1;
  int symbol = -1;
  uint32_t divisible_by = 1;
};
std::unique_ptr<tl::bundle::ParamT> BufferParam(const std::string& name, std::vector<DimSpec> dims,
                                                tl::bundle::Access access = tl::bundle::Access::READ,
                                                uint32_t ptr_alignment = 4, uint8_t code = 2, uint8_t bits = 32);
std::unique_ptr<tl::bundle::ParamT> ScalarParam(const std::string& name, uint8_t code, uint8_t bits,
                                                int binds_symbol = -1);
std::unique_ptr<tl::bundle::GridExprT> Grid(std::vector<int64_t> code);
// A CPU variant "cpu.x86-64-v<level>[suffix]" on payload `payload`.
std::unique_ptr<tl::bundle::VariantT> CpuVariant(int level, uint32_t payload, const std::string& entry,
                                                 std::vector<std::vector<int64_t>> grid, uint64_t scratch = 0,
                                                 const std::string& suffix = "");
std::unique_ptr<tl::bundle::VariantT> GpuVariant(const std::string& id, tl::bundle::Backend backend,
                                                 tl::bundle::CodeKind kind, const std::string& arch, uint32_t payload,
                                                 const std::string& entry);

struct StandardBundleOptions {
  std::vector<int> levels = {2, 3, 4};  // CPU variants per kernel
  bool gpu_variants = true;             // add CUDA cubin/PTX and Vulkan variants (fake payloads)
  bool guarded_vadd = true;             // vadd also gets "cpu.x86-64-v2.aligned64" with a guard
};
// Kernels vadd, saxpy, gemm, fail_at (see test_kernels.c).
std::vector<uint8_t> StandardBundle(const StandardBundleOptions& options = {});

// Writes bytes to a file under the test temp directory; returns the path.
std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes);

}  // namespace tl::rt::testing
