// A reference interpreter for the SIMT IR, so CI (no GPU) checks the
// lowering's numbers: index math, guards, layouts, shuffles, reductions.
//
// All threads of a block run in lockstep, statement by statement, with an
// active mask (divergent ifs and per-thread loop trip counts are masked), the
// way a SIMT machine runs them. Consequence and risk: a missing barrier is
// NOT detected here (lockstep orders every statement); InsertBarriers has its
// own tests, and the GPU run is the real check. Values are held as doubles
// and rounded to their dtype (f32, f16, bf16, integer widths) where stored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::gpu::test {

// Tensor parameters by name (flattened, values as the device holds them);
// scalar parameters by name.
tl::Status Interpret(const SimtKernel& k, std::map<std::string, std::vector<double>>* tensors,
                     const std::map<std::string, double>& scalars = {});

}  // namespace tl::gpu::test
