// The CUDA backend's code generator and toolchain: SimtKernel -> CUDA C++
// (self-contained: no includes, fp16/bf16 through small inline-PTX helpers)
// -> NVRTC (found with dlopen) or an nvcc subprocess -> cubin per arch and
// compute_80 PTX.
//
// Thread-safety: PrintCuda is pure; CudaToolchain is safe to share after
// Create (NVRTC programs are per call).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::codegen::cuda {

// One kernel parameter's place in the launch parameter buffer (matches what
// cuFuncGetParamInfo reports for the printed signature).
// `param` -1 with `symbol` >= 0: the slot holds that shape symbol's value;
// with `tensor_map` >= 0: SimtKernel::tensor_maps[tensor_map], a 128-byte
// CUtensorMap the runtime encodes at launch.
struct ParamSlot {
  int param = 0;
  uint32_t offset = 0, size = 0, align = 0;
  int symbol = -1;
  int tensor_map = -1;
};

struct CudaSource {
  std::string name;     // the extern "C" entry point
  std::string source;   // CUDA C++
  std::vector<ParamSlot> slots;
  uint32_t param_buffer_bytes = 0;
};

StatusOr<CudaSource> PrintCuda(const gpu::SimtKernel& k);

// "sm_80" -> 163 KiB etc.: the largest dynamic shared memory per block.
int64_t SharedBudget(const std::string& arch);

struct CompiledCode {
  std::vector<uint8_t> bytes;  // cubin, or PTX text with a trailing NUL
  std::string log;             // compiler log (ptxas -v resource report for cubins)
  std::string tool;            // "nvrtc 13.0" / "nvcc"
  // Parsed from the ptxas report (cubins): -1 when absent.
  int registers = -1, spill_stores = -1, spill_loads = -1, shared_bytes = -1, stack_bytes = -1;
};

class CudaToolchain {
 public:
  // Finds NVRTC (libnvrtc.so.13 in /usr/local/cuda/lib64, the CUDA 13.0
  // target lib dir, or the loader path) and nvcc; fails with kUnavailable
  // naming every place looked at when neither exists.
  static StatusOr<CudaToolchain> Create();
  // arch "sm_90a": a cubin; "compute_80": PTX.
  StatusOr<CompiledCode> Compile(const std::string& source, const std::string& name, const std::string& arch) const;
  const std::string& identity() const { return identity_; }
  bool has_nvrtc() const { return nvrtc_ != nullptr; }

 private:
  void* nvrtc_ = nullptr;  // dlopen handle (never closed: process lifetime)
  std::string nvcc_;
  std::string identity_;
};

// The ptxas binary to check PTX with, or "" (looked for in /usr/local/cuda/bin,
// /usr/local/cuda-13.0/bin).
std::string FindPtxas();

}  // namespace tl::codegen::cuda
