// HipToolchain: header-free HIP C++ -> AMDGPU code object (HSACO) with
// Debian's clang-19, the only Debian LLVM that knows gfx942
// (research/backends.md section 2):
//
//   clang++-19 -x hip -std=c++17 -nogpuinc -nogpulib --cuda-device-only
//     --no-gpu-bundle-output --offload-arch=<target id> -O3
//     -mcode-object-version=<4|5> -o kernel.hsaco kernel.hip
//
// The target ID is passed through ("gfx90a", "gfx942:xnack-",
// "gfx1100"); without a pinned xnack/sramecc mode the code object runs in
// either mode ("any"). The result is parsed with formats::ReadHsaco.
//
// Cache: key = SHA-256 of (source, flags, compiler identity = resolved path
// + first line of --version); entries `<cache_dir>/hip-hsaco/<hex>.hsaco`,
// written to a temporary name and renamed. cache_dir from the options, else
// $TL_CACHE_DIR, else no cache.
//
// Thread-safety: immutable after Create(); Compile may run on many threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilelang/formats/hsaco.h"
#include "tilelang/formats/status.h"

namespace tl::codegen::hip {

struct HipToolchainOptions {
  std::string clang;      // empty: $TL_HIP_CLANG, /usr/lib/llvm-19/bin/clang++, clang++-19 in PATH
  std::string cache_dir;  // empty: $TL_CACHE_DIR, else none
};

struct CompiledHsaco {
  std::vector<uint8_t> bytes;  // the bare ELF code object
  formats::HsacoInfo info;     // its header and metadata
  std::string log;             // compiler diagnostics (warnings)
  bool cache_hit = false;
  double seconds = 0;          // compiler wall time (0 on a hit)
};

class HipToolchain {
 public:
  static StatusOr<HipToolchain> Create(const HipToolchainOptions& options = {});
  // `target` is an AMDGPU target ID; `code_object_version` 4 or 5.
  StatusOr<CompiledHsaco> Compile(const std::string& source, const std::string& name, const std::string& target,
                                  int code_object_version = 5) const;
  std::vector<std::string> Flags(const std::string& target, int code_object_version) const;
  const std::string& identity() const { return identity_; }  // "Debian clang version 19.1.7 (...)"
  const std::string& clang() const { return clang_; }

 private:
  std::string clang_;
  std::string identity_;
  std::string cache_dir_;
};

// Default wavefront size of a processor's code: 64 on GCN/CDNA (gfx9), 32 on
// RDNA (gfx10, gfx11, gfx12; clang's default there, -mwavefrontsize64 not used).
int DefaultWavefront(const std::string& target);

// LDS a workgroup may use: 64 KiB on gfx90a, gfx942 and gfx1100 (and every
// target we build for).
int64_t LdsBudget(const std::string& target);

}  // namespace tl::codegen::hip
