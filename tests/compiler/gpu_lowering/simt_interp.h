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
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::gpu::test {

struct InterpretOptions {
  // SAmdMma i8 on MFMA: simulate gfx94x's 16x16x32 i8 (else gfx90a's two 16x16x16 i8).
  bool mfma_gfx94 = true;
  // Warp roles: at each of its mbarrier waits the consumer role first lets the producer run as far as
  // its own waits allow (even where the consumers' phase has completed), instead of only where it has
  // not: the producer then issues as early as the protocol lets it, so a producer not held back by a
  // release (a missing empty wait) writes a tile the consumers are still to read -- an error (the TMA
  // in-flight and wgmma checks). Off by default: the plain schedule already runs the producer first.
  bool eager_roles = false;
};

// Tensor parameters by name (flattened, values as the device holds them);
// scalar parameters by name.
//
// SAmdMma is run as the hardware would: per wavefront, every lane's operand
// elements are gathered with the lowering's index expressions (amd_matrix.h),
// placed into the instruction's 16x16 matrices by amd_matrix_model.h (the
// documented hardware layout, written independently), multiplied, and the
// result handed back to the lanes' accumulator registers by the same model.
// A lane map that disagrees with the hardware gives wrong numbers or an error
// here (holes, lanes that must agree and do not, registers out of range).
tl::Status Interpret(const SimtKernel& k, std::map<std::string, std::vector<double>>* tensors,
                     const std::map<std::string, double>& scalars = {}, const InterpretOptions& options = {});

// An error term for `worst = std::max(worst, NanAsInf(e))`: std::max(worst, NaN) is worst, so a NaN
// output (a register or element never written: the interpreter starts them as NaN) would pass.
inline double NanAsInf(double e) { return e != e ? 1.0 / 0.0 : e; }

// v rounded to bf16 (round to nearest even through f32), as a test's reference rounds its inputs.
inline double RoundToBf16(double v) {
  float f = static_cast<float>(v);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x = (x + 0x7fff + ((x >> 16) & 1)) & 0xffff0000u;
  std::memcpy(&f, &x, 4);
  return f;
}

// v rounded to f16 (through f32, round to nearest even), as the interpreter rounds an f16 register.
inline double RoundToF16(double v) { return static_cast<double>(static_cast<_Float16>(static_cast<float>(v))); }

}  // namespace tl::gpu::test
