// HipToolchain: clang-19 subprocess, content-addressed cache, metadata read
// back with formats::ReadHsaco. See hip_toolchain.h.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "tilelang/codegen/hip/hip_toolchain.h"
#include "tilelang/formats/checksum.h"
#include "tilelang/toolchain/host_compiler.h"

namespace tl::codegen::hip {
namespace {
namespace fs = std::filesystem;

std::string Hex(const formats::Sha256Digest& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::vector<uint8_t> ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A private temporary directory, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/tl_hip_XXXXXX";
    if (mkdtemp(tmpl)) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

}  // namespace

int DefaultWavefront(const std::string& target) {
  // gfx9xx (GCN/CDNA, incl. gfx9-generic): wave64. gfx10xx, gfx11xx, gfx12xx: wave32.
  if (target.rfind("gfx10", 0) == 0 || target.rfind("gfx11", 0) == 0 || target.rfind("gfx12", 0) == 0) return 32;
  return 64;
}

int64_t LdsBudget(const std::string&) { return 64 * 1024; }

StatusOr<HipToolchain> HipToolchain::Create(const HipToolchainOptions& options) {
  HipToolchain t;
  std::vector<std::string> candidates;
  if (!options.clang.empty()) {
    candidates.push_back(options.clang);
  } else if (const char* env = std::getenv("TL_HIP_CLANG"); env && *env) {
    candidates.push_back(env);
  } else {
    candidates = {"/usr/lib/llvm-19/bin/clang++", "clang++-19"};
  }
  std::string tried;
  for (const std::string& c : candidates) {
    toolchain::ProcessResult r = toolchain::RunProcess({c, "--version"});
    tried += (tried.empty() ? "" : ", ") + c;
    if (r.exit_code != 0) continue;
    std::string first = r.out.substr(0, r.out.find('\n'));
    // clang < 19 cannot target gfx942 (research/backends.md 2.1).
    const size_t at = first.find("clang version ");
    const int major = at == std::string::npos ? 0 : std::atoi(first.c_str() + at + 14);
    if (major < 19) {
      tried += " (" + first + ": clang 19 or newer is needed for gfx942)";
      continue;
    }
    t.clang_ = c;
    t.identity_ = first;
    break;
  }
  if (t.clang_.empty()) {
    return Status(StatusCode::kUnavailable,
                  "no usable clang for HIP (AMDGPU) code: tried " + tried + "; install clang-19 and lld-19 (Debian 12: apt-get install clang-19 lld-19) or set TL_HIP_CLANG");
  }
  t.cache_dir_ = options.cache_dir;
  if (t.cache_dir_.empty()) {
    if (const char* env = std::getenv("TL_CACHE_DIR"); env && *env) t.cache_dir_ = env;
  }
  return t;
}

std::vector<std::string> HipToolchain::Flags(const std::string& target, int code_object_version) const {
  return {"-x", "hip", "-std=c++17", "-nogpuinc", "-nogpulib", "--cuda-device-only", "--no-gpu-bundle-output",
          "--offload-arch=" + target, "-O3", "-mcode-object-version=" + std::to_string(code_object_version),
          "-fno-ident", "-cuid=tilelang"};  // a fixed CUID: else __hip_cuid_<hash of path and time> (not reproducible)
}

StatusOr<CompiledHsaco> HipToolchain::Compile(const std::string& source, const std::string& name,
                                              const std::string& target, int code_object_version) const {
  if (code_object_version != 4 && code_object_version != 5) {
    return Status(StatusCode::kInvalidArgument,
                  "code object version " + std::to_string(code_object_version) + " (4 or 5 are built)");
  }
  const std::vector<std::string> flags = Flags(target, code_object_version);
  CompiledHsaco out;
  fs::path cached;
  if (!cache_dir_.empty()) {
    formats::Sha256 h;
    auto add = [&](const std::string& s) {
      h.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size() + 1));
    };
    add("tl-hip-1");
    add(identity_);
    for (const std::string& f : flags) add(f);
    add(source);
    cached = fs::path(cache_dir_) / "hip-hsaco" / (Hex(h.Finish()) + ".hsaco");
    std::error_code ec;
    if (fs::exists(cached, ec)) {
      std::vector<uint8_t> bytes = ReadAll(cached);
      StatusOr<formats::HsacoInfo> info = formats::ReadHsaco(bytes);
      if (info.ok()) {  // a damaged entry is rebuilt
        out.bytes = std::move(bytes);
        out.info = std::move(*info);
        out.cache_hit = true;
        return out;
      }
    }
  }
  TempDir dir;
  if (dir.path.empty()) return Status(StatusCode::kUnavailable, "cannot create a temporary directory in /tmp");
  const fs::path src = dir.path / "kernel.hip", obj = dir.path / "kernel.hsaco";
  {
    std::ofstream f(src);
    f << source;
    if (!f) return Status(StatusCode::kUnavailable, "cannot write " + src.string());
  }
  std::vector<std::string> argv = {clang_};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", obj.string(), src.string()});
  const auto start = std::chrono::steady_clock::now();
  toolchain::ProcessResult r = toolchain::RunProcess(argv, dir.path.string());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.log = r.err + r.out;
  if (r.exit_code != 0) {
    return Status(StatusCode::kInternal, "clang (" + identity_ + ") failed on kernel '" + name + "' for " + target +
                                             " (exit " + std::to_string(r.exit_code) + "):\n" + out.log);
  }
  out.bytes = ReadAll(obj);
  StatusOr<formats::HsacoInfo> info = formats::ReadHsaco(out.bytes);
  if (!info.ok()) return Status(info.status().code(), "kernel '" + name + "' for " + target + ": " + info.status().message());
  out.info = std::move(*info);
  if (!cached.empty()) {
    std::error_code ec;
    fs::create_directories(cached.parent_path(), ec);
    std::random_device rd;
    const fs::path tmp = cached.string() + ".tmp" + std::to_string(getpid()) + "." + std::to_string(rd());
    {
      std::ofstream f(tmp, std::ios::binary);
      f.write(reinterpret_cast<const char*>(out.bytes.data()), static_cast<std::streamsize>(out.bytes.size()));
    }
    fs::rename(tmp, cached, ec);
    if (ec) fs::remove(tmp, ec);
  }
  return out;
}

}  // namespace tl::codegen::hip
