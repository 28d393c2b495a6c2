// The HIP backend's code generator: SimtKernel -> header-free HIP C++.
//
// The printed source includes nothing (no HIP headers, no device libraries:
// it is compiled with -nogpuinc -nogpulib) and uses clang builtins only:
// __builtin_amdgcn_workitem_id_* / workgroup_id_* for ids, a static
// __attribute__((shared)) array for LDS (so the code object's
// group_segment_fixed_size is the kernel's whole LDS use), fence + s_barrier
// for barriers, ds_bpermute for lane shuffles (any width up to the
// wavefront), __hip_atomic_fetch_add for atomics, and __builtin_* math that
// the AMDGPU backend lowers to instructions (f32 exp/log/sin/cos/sqrt/pow;
// tanh is a polynomial + exp here). f64 transcendental functions need the
// device library and are rejected with kUnimplemented.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::codegen::hip {

// One explicit kernel argument's place in the kernarg segment (and in the
// parameter buffer passed with HIP_LAUNCH_PARAM_BUFFER_POINTER). Checked
// against the code object's metadata after compiling.
struct ParamSlot {
  int param = 0;   // the function's parameter index, or -1 for a shape symbol
  uint32_t offset = 0, size = 0, align = 0;
  int symbol = -1;  // >= 0: the value of shape symbol `symbol` (the runtime fills it)
};

struct HipSource {
  std::string name;    // the extern "C" kernel
  std::string source;  // HIP C++
  std::vector<ParamSlot> slots;
  uint32_t param_buffer_bytes = 0;  // explicit arguments only
};

// `wavefront` is the wavefront size the code is compiled for (64 on CDNA
// gfx9, 32 on RDNA gfx10+ by default); lane reductions wider than it are an
// internal error (the lowering never makes them).
StatusOr<HipSource> PrintHip(const gpu::SimtKernel& k, int wavefront);

}  // namespace tl::codegen::hip
