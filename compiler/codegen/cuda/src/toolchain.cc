// CudaToolchain: NVRTC in-process (dlopen; no link-time dependency on CUDA)
// with an nvcc subprocess as the fallback. NVRTC has segfaulted on degenerate
// wgmma inputs (research/backends.md 4.3); we emit no wgmma yet, and a
// failing NVRTC compile is retried with nvcc when nvcc exists.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tilelang/codegen/cuda/cuda_codegen.h"
#include "tilelang/toolchain/host_compiler.h"

namespace tl::codegen::cuda {
namespace {
namespace fs = std::filesystem;

using nvrtcProgram = void*;
using CreateFn = int (*)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
using CompileFn = int (*)(nvrtcProgram, int, const char* const*);
using SizeFn = int (*)(nvrtcProgram, size_t*);
using GetFn = int (*)(nvrtcProgram, char*);
using DestroyFn = int (*)(nvrtcProgram*);
using VersionFn = int (*)(int*, int*);

const char* const kNvrtcPaths[] = {
    "/usr/local/cuda/lib64/libnvrtc.so.13",
    "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13",
    "libnvrtc.so.13",
    "libnvrtc.so",
};
const char* const kBinDirs[] = {"/usr/local/cuda/bin", "/usr/local/cuda-13.0/bin"};

std::string FindTool(const char* name) {
  for (const char* d : kBinDirs) {
    const fs::path p = fs::path(d) / name;
    std::error_code ec;
    if (fs::exists(p, ec)) return p.string();
  }
  return "";
}

void ParseReport(CompiledCode* c) {
  std::smatch m;
  if (std::regex_search(c->log, m, std::regex(R"(Used (\d+) registers)"))) c->registers = std::stoi(m[1]);
  if (std::regex_search(c->log, m, std::regex(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    c->stack_bytes = std::stoi(m[1]);
    c->spill_stores = std::stoi(m[2]);
    c->spill_loads = std::stoi(m[3]);
  }
  if (std::regex_search(c->log, m, std::regex(R"((\d+) bytes smem)"))) c->shared_bytes = std::stoi(m[1]);
  else if (c->registers >= 0) c->shared_bytes = 0;
}

}  // namespace

std::string FindPtxas() { return FindTool("ptxas"); }

StatusOr<CudaToolchain> CudaToolchain::Create() {
  CudaToolchain t;
  std::string tried;
  for (const char* p : kNvrtcPaths) {
    t.nvrtc_ = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (t.nvrtc_) break;
    tried += std::string(tried.empty() ? "" : ", ") + p;
  }
  t.nvcc_ = FindTool("nvcc");
  if (t.nvrtc_) {
    int major = 0, minor = 0;
    if (auto v = reinterpret_cast<VersionFn>(dlsym(t.nvrtc_, "nvrtcVersion"))) v(&major, &minor);
    t.identity_ = "nvrtc " + std::to_string(major) + "." + std::to_string(minor);
  } else if (!t.nvcc_.empty()) {
    t.identity_ = "nvcc " + t.nvcc_;
  } else {
    return Status(StatusCode::kUnavailable, "no CUDA compiler: NVRTC not found (tried " + tried +
                                                ") and no nvcc in /usr/local/cuda/bin or /usr/local/cuda-13.0/bin");
  }
  return t;
}

StatusOr<CompiledCode> CudaToolchain::Compile(const std::string& source, const std::string& name,
                                              const std::string& arch) const {
  const bool ptx = arch.rfind("compute_", 0) == 0;
  std::string nvrtc_error;
  if (nvrtc_) {
    auto create = reinterpret_cast<CreateFn>(dlsym(nvrtc_, "nvrtcCreateProgram"));
    auto compile = reinterpret_cast<CompileFn>(dlsym(nvrtc_, "nvrtcCompileProgram"));
    auto log_size = reinterpret_cast<SizeFn>(dlsym(nvrtc_, "nvrtcGetProgramLogSize"));
    auto get_log = reinterpret_cast<GetFn>(dlsym(nvrtc_, "nvrtcGetProgramLog"));
    auto code_size = reinterpret_cast<SizeFn>(dlsym(nvrtc_, ptx ? "nvrtcGetPTXSize" : "nvrtcGetCUBINSize"));
    auto get_code = reinterpret_cast<GetFn>(dlsym(nvrtc_, ptx ? "nvrtcGetPTX" : "nvrtcGetCUBIN"));
    auto destroy = reinterpret_cast<DestroyFn>(dlsym(nvrtc_, "nvrtcDestroyProgram"));
    if (create && compile && log_size && get_log && code_size && get_code && destroy) {
      nvrtcProgram prog = nullptr;
      if (create(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr) == 0) {
        const std::string a = "--gpu-architecture=" + arch;
        // No fast math is NVRTC's default; NVRTC 13 rejects "--use_fast_math=false" (the option
        // takes no argument), which made every compile fall back to nvcc.
        std::vector<const char*> opts = {a.c_str(), "-std=c++17", "-default-device"};
        if (!ptx) opts.push_back("--ptxas-options=-v");
        const int rc = compile(prog, static_cast<int>(opts.size()), opts.data());
        CompiledCode out;
        out.tool = identity_;
        size_t n = 0;
        log_size(prog, &n);
        out.log.resize(n);
        if (n) get_log(prog, out.log.data());
        while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
        if (rc == 0 && code_size(prog, &n) == 0) {
          out.bytes.resize(n);
          get_code(prog, reinterpret_cast<char*>(out.bytes.data()));
          destroy(&prog);
          if (ptx && (out.bytes.empty() || out.bytes.back() != 0)) out.bytes.push_back(0);
          ParseReport(&out);
          return out;
        }
        destroy(&prog);
        nvrtc_error = "NVRTC (" + arch + ") failed:\n" + out.log;
      }
    }
    if (nvcc_.empty()) return Status(StatusCode::kInternal, nvrtc_error.empty() ? "NVRTC unusable" : nvrtc_error);
  }
  // nvcc subprocess.
  char tmpl[] = "/tmp/tl_cuda_XXXXXX";
  if (!mkdtemp(tmpl)) return Status(StatusCode::kUnavailable, "cannot create a temporary directory");
  const fs::path dir = tmpl;
  const fs::path src = dir / (name + ".cu"), obj = dir / (name + (ptx ? ".ptx" : ".cubin"));
  { std::ofstream(src) << source; }
  std::string gencode = ptx ? "-arch=" + arch : "-gencode=arch=compute_" + arch.substr(3) + ",code=" + arch;
  toolchain::ProcessResult r = toolchain::RunProcess(
      {nvcc_, ptx ? "-ptx" : "-cubin", gencode, "-O3", "-std=c++17", "-Xptxas", "-v", "-o", obj.string(), src.string()});
  CompiledCode out;
  out.tool = "nvcc";
  out.log = r.out + r.err;
  if (r.exit_code != 0) {
    fs::remove_all(dir);
    return Status(StatusCode::kInternal, nvrtc_error + "nvcc (" + arch + ") failed:\n" + out.log);
  }
  std::ifstream in(obj, std::ios::binary);
  out.bytes.assign(std::istreambuf_iterator<char>(in), {});
  if (ptx) out.bytes.push_back(0);
  fs::remove_all(dir);
  ParseReport(&out);
  return out;
}

}  // namespace tl::codegen::cuda
