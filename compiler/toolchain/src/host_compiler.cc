// HostCompiler: flags, cache, one compile, parallel compiles.
#include "tilelang/toolchain/host_compiler.h"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "tilelang/formats/checksum.h"

namespace tl::toolchain {
namespace fs = std::filesystem;

const char* IsaName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kV2: return "x86-64-v2";
    case IsaLevel::kV3: return "x86-64-v3";
    case IsaLevel::kV4: return "x86-64-v4";
  }
  return "?";
}

std::optional<IsaLevel> ParseIsa(std::string_view name) {
  if (name == "x86-64-v2" || name == "v2") return IsaLevel::kV2;
  if (name == "x86-64-v3" || name == "v3") return IsaLevel::kV3;
  if (name == "x86-64-v4" || name == "v4") return IsaLevel::kV4;
  return std::nullopt;
}

StatusOr<std::vector<IsaLevel>> ParseCpuTargets(std::string_view spec) {
  std::vector<IsaLevel> out;
  auto add = [&](IsaLevel l) {
    for (IsaLevel x : out) {
      if (x == l) return;
    }
    out.push_back(l);
  };
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string_view item = spec.substr(pos, comma - pos);
    if (item == "cpu" || item == "x86-64") {
      add(IsaLevel::kV2);
      add(IsaLevel::kV3);
      add(IsaLevel::kV4);
    } else if (const std::optional<IsaLevel> l = ParseIsa(item)) {
      add(*l);
    } else {
      return Status(StatusCode::kInvalidArgument,
                    "unknown target '" + std::string(item) +
                        "' (known: cpu, x86-64-v2, x86-64-v3, x86-64-v4)");
    }
    pos = comma + 1;
  }
  return out;
}

std::vector<std::string> IsaFeatures(IsaLevel level) {
  // The psABI level sets, as the runtime's CPU probe names them (runtime/src/cpu_isa.cc).
  static const char* const kV2[] = {"cx16", "lahf_lm", "popcnt", "sse3", "sse4_1", "sse4_2", "ssse3"};
  static const char* const kV3[] = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe"};
  static const char* const kV4[] = {"avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"};
  std::vector<std::string> out;
  for (const char* f : kV2) out.push_back(std::string("cpu.x86.") + f);
  if (level >= IsaLevel::kV3) {
    for (const char* f : kV3) out.push_back(std::string("cpu.x86.") + f);
  }
  if (level >= IsaLevel::kV4) {
    for (const char* f : kV4) out.push_back(std::string("cpu.x86.") + f);
  }
  return out;
}

StatusOr<HostCompiler> HostCompiler::Create(const HostCompilerOptions& options) {
  HostCompiler hc;
  hc.cxx_ = options.cxx;
  if (hc.cxx_.empty()) {
    const char* env = std::getenv("TL_HOST_CXX");
    hc.cxx_ = env != nullptr && *env != '\0' ? env : "g++";
  }
  hc.cache_dir_ = options.cache_dir;
  if (hc.cache_dir_.empty()) {
    const char* env = std::getenv("TL_CACHE_DIR");
    if (env != nullptr) hc.cache_dir_ = env;
  }
  const ProcessResult version = RunProcess({hc.cxx_, "--version"});
  if (version.exit_code != 0) {
    return Status(StatusCode::kFailedPrecondition,
                  "host C++ compiler '" + hc.cxx_ + "' does not run (set $TL_HOST_CXX): " + version.err);
  }
  const ProcessResult machine = RunProcess({hc.cxx_, "-dumpmachine"});
  hc.identity_ = hc.cxx_ + "; " + version.out.substr(0, version.out.find('\n')) + "; " +
                 machine.out.substr(0, machine.out.find('\n'));
  return hc;
}

std::vector<std::string> HostCompiler::Flags(IsaLevel level) const {
  return {
      "-std=c++20", "-O3", std::string("-march=") + IsaName(level),
      // Self-contained shared object: one exported symbol, no unique symbols
      // that would pin it in memory, no C++ runtime, libm only, and no start
      // files (crtbegin's frame_dummy is the only .init_array entry otherwise).
      "-shared", "-fPIC", "-fvisibility=hidden", "-fno-gnu-unique", "-fno-exceptions", "-fno-rtti",
      "-fno-threadsafe-statics", "-fno-math-errno", "-static-libgcc", "-nostartfiles", "-Wl,--as-needed",
      "-Wl,-z,defs",
      "-Wl,--build-id=none", "-frandom-seed=tilelang", "-g0",
  };
}

namespace {

std::string Hex(const formats::Sha256Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

bool ReadFile(const fs::path& p, std::vector<uint8_t>& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return static_cast<bool>(in) || in.eof();
}

bool WriteFileAtomic(const fs::path& p, const void* data, size_t size) {
  const fs::path tmp = p.string() + ".tmp." + std::to_string(getpid()) + "." +
                       std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string Tail(const std::string& s, size_t max) {
  return s.size() <= max ? s : "...\n" + s.substr(s.size() - max);
}

}  // namespace

CompileResult HostCompiler::Compile(const CompileJob& job) const {
  CompileResult r;
  const std::vector<std::string> flags = Flags(job.isa);
  const std::string what = "kernel '" + job.kernel + "' for " + IsaName(job.isa) +
                           (job.location.empty() ? "" : " (" + job.location + ")");
  fs::path cached;
  if (!cache_dir_.empty()) {
    formats::Sha256 h;
    auto feed = [&](const std::string& s) {
      h.Update({reinterpret_cast<const uint8_t*>(s.data()), s.size() + 1});  // with the NUL: unambiguous
    };
    feed(job.source);
    for (const std::string& f : flags) feed(f);
    feed(identity_);
    cached = fs::path(cache_dir_) / "cpu-so" / (Hex(h.Finish()) + ".so");
    if (ReadFile(cached, r.object) && !r.object.empty()) {
      r.cache_hit = true;
      return r;
    }
  }
  std::string dir_env = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "";
  std::string pattern = (dir_env.empty() ? std::string("/tmp") : dir_env) + "/tl-cc-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  const char* dir = mkdtemp(buf.data());
  if (dir == nullptr) {
    r.status = Status(StatusCode::kUnavailable, "compiling " + what + ": cannot create a temporary directory");
    return r;
  }
  const fs::path work(dir);
  {
    std::ofstream src(work / "kernel.cc", std::ios::binary);
    src << job.source;
  }
  std::vector<std::string> argv = {cxx_};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "kernel.so", "kernel.cc", "-lm"});
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult p = RunProcess(argv, work.string());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (p.exit_code != 0) {
    std::string cmd;
    for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    r.status = Status(StatusCode::kInternal, "compiling " + what + " failed (" + cxx_ + " exit " +
                                                 std::to_string(p.exit_code) + ")\n  command: " + cmd + "\n" +
                                                 Tail(p.out + p.err, 8000));
  } else if (!ReadFile(work / "kernel.so", r.object) || r.object.empty()) {
    r.status = Status(StatusCode::kInternal, "compiling " + what + ": the compiler wrote no kernel.so");
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  if (r.status.ok() && !cached.empty()) {
    fs::create_directories(cached.parent_path(), ec);
    // A cache we cannot write is not an error: the next build compiles again.
    WriteFileAtomic(cached, r.object.data(), r.object.size());
  }
  return r;
}

std::vector<CompileResult> HostCompiler::CompileAll(const std::vector<CompileJob>& jobs, int parallelism,
                                                    const Progress& progress) const {
  std::vector<CompileResult> results(jobs.size());
  std::mutex mu;
  tbb::task_arena arena(parallelism > 0 ? parallelism : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) {
      results[i] = Compile(jobs[i]);
      if (progress) {
        std::lock_guard<std::mutex> lock(mu);
        progress(jobs[i], results[i]);
      }
    });
  });
  return results;
}

}  // namespace tl::toolchain
