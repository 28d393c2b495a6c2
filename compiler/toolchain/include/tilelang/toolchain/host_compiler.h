// The host-compiler driver for the CPU backend: generated C++ source -> one
// x86-64 shared object per ISA level, compiled in parallel (oneTBB), with a
// content-addressed cache.
//
// Cache: key = SHA-256 of (source, flags, compiler identity = path + the
// first line of `CXX --version` + `CXX -dumpmachine`); entries are
// `<cache_dir>/cpu-so/<hex>.so`, written to a temporary name and renamed, so
// concurrent builds sharing a directory never see half files. The directory
// comes from HostCompilerOptions::cache_dir, else $TL_CACHE_DIR; with neither
// set nothing is cached.
//
// Reproducibility: the compiler runs in a private temporary directory on a
// file always named kernel.cc, with -frandom-seed and no build id, so the
// same source and flags give the same bytes.
//
// Thread-safety: a HostCompiler is immutable after Create(); Compile() and
// CompileAll() may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::toolchain {

enum class IsaLevel : uint8_t { kV2 = 2, kV3 = 3, kV4 = 4 };

const char* IsaName(IsaLevel level);  // "x86-64-v3"
std::optional<IsaLevel> ParseIsa(std::string_view name);  // "x86-64-v3" or "v3"
// Parses a --target value: "cpu" (all levels) or a comma list of level names.
StatusOr<std::vector<IsaLevel>> ParseCpuTargets(std::string_view spec);
// The CPU features a level's code may use, as the runtime names them
// ("cpu.x86.avx2"): the psABI level sets, cumulative.
std::vector<std::string> IsaFeatures(IsaLevel level);

struct HostCompilerOptions {
  std::string cxx;        // empty: $TL_HOST_CXX, else "g++"
  std::string cache_dir;  // empty: $TL_CACHE_DIR, else no cache
};

struct CompileJob {
  std::string kernel;     // for messages
  std::string location;   // "file.py:12", for messages (may be empty)
  IsaLevel isa = IsaLevel::kV3;
  std::string source;
};

struct CompileResult {
  Status status;
  std::vector<uint8_t> object;  // the shared object
  bool cache_hit = false;
  double seconds = 0;           // wall time of the compiler run (0 on a hit)
};

class HostCompiler {
 public:
  // Resolves the compiler and probes its identity; fails when it cannot run.
  static StatusOr<HostCompiler> Create(const HostCompilerOptions& options = {});

  // Everything passed to the compiler besides the file names.
  std::vector<std::string> Flags(IsaLevel level) const;
  const std::string& cxx() const { return cxx_; }
  const std::string& identity() const { return identity_; }
  const std::string& cache_dir() const { return cache_dir_; }

  CompileResult Compile(const CompileJob& job) const;

  // Compiles every job on up to `parallelism` threads (0: all cores);
  // `progress` is called once per finished job, serialized.
  using Progress = std::function<void(const CompileJob&, const CompileResult&)>;
  std::vector<CompileResult> CompileAll(const std::vector<CompileJob>& jobs, int parallelism,
                                        const Progress& progress = nullptr) const;

 private:
  std::string cxx_;
  std::string identity_;
  std::string cache_dir_;
};

// Runs argv (argv[0] looked up in PATH) in `cwd` (empty: ours), with
// `extra_env` ("NAME=value") added to our environment, capturing stdout and
// stderr separately. exit_code is the exit status, 128 + signal when killed,
// 127 when the program could not be started (err says why).
struct ProcessResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& cwd = "",
                         const std::vector<std::string>& extra_env = {});

}  // namespace tl::toolchain
