// The kernel-parameter layout a cubin really has, read from its ELF
// `.nv.info.<entry>` section (EIATTR_KPARAM_INFO and EIATTR_PARAM_CBANK).
//
// Why: ptxas places parameters by their alignment relative to the *constant
// bank* address of the parameter area, not to its start. On sm_90 that area
// begins at c[0x0][0x210], so a 64-byte-aligned CUtensorMap after three
// pointers (24 B) lands at offset 48 (0x210 + 48 = 576 = 9 x 64), not at the
// 64 a C-style layout gives. The base differs per arch, so no arch-neutral
// rule predicts the offsets: the bundle takes them from the cubin it ships,
// and the runtime's cuFuncGetParamInfo cross-check then agrees.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::codegen::cuda {

struct CubinParam {
  uint32_t ordinal = 0;  // position in the signature
  uint32_t offset = 0;   // bytes from the start of the parameter buffer
  uint32_t size = 0;     // bytes
};

struct CubinParamLayout {
  std::vector<CubinParam> params;  // by ordinal, 0..n-1, every ordinal once
  uint32_t buffer_bytes = 0;       // EIATTR_PARAM_CBANK's size, else the last parameter's end
};

// Errors: kInvalidArgument (not a 64-bit little-endian ELF), kDataLoss (a
// header, section or record that runs past the end of `cubin`, a malformed
// record, ordinals with gaps or repeats), kNotFound (no `.nv.info.<entry>`
// section). Messages carry the offsets and sizes.
StatusOr<CubinParamLayout> ReadCubinParamLayout(const std::vector<uint8_t>& cubin, const std::string& entry);

}  // namespace tl::codegen::cuda
