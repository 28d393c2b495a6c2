// tl-pack compile: Tile IR files -> CPU variants (x86-64 v2/v3/v4) -> one bundle.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/ir/tile_ir.h"
#include "verbs.h"

namespace tl::pack {
namespace {

const char* kHelp =
    "usage: tl-pack compile IN.tir [IN2.tir ...] -o OUT.tlb [--target cpu|x86-64-v2,x86-64-v3,x86-64-v4]\n"
    "                       [--target cuda|sm_80,sm_89,sm_90a,ptx] [--target cpu,cuda]\n"
    "                       [--emit-source DIR] [--cache-dir DIR] [-j N] [-q]\n"
    "\n"
    "Parses and verifies each Tile IR file, lowers every function to C++ (one block function\n"
    "per kernel), compiles it with the host compiler ($TL_HOST_CXX, default g++) once per ISA\n"
    "level in parallel, and writes one bundle with a variant per level.\n"
    "  --target       'cpu' (default) = all three levels, or a comma list of levels;\n"
    "                 'cuda' = cubins for sm_80, sm_89, sm_90a + compute_80 PTX (NVRTC, else nvcc),\n"
    "                 or sm_XX items (each adds a cubin and the PTX); both kinds may be mixed\n"
    "  --emit-source  also write the generated C++ as DIR/<kernel>.cc\n"
    "  --cache-dir    content-addressed cache of compiled objects (default $TL_CACHE_DIR;\n"
    "                 none when neither is set)\n"
    "  -j N           parallel compiles (default: all cores)\n"
    "  -q             no progress lines\n"
    "Errors name the kernel, the target and the Python source line.\n";

}  // namespace

// Exit code for a failed build: rejected input (Tile IR that does not parse,
// verify or lower) is 3, a host compiler that fails on generated code is a bug
// of ours (70), files are 2.
int CpuBuildExitCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnimplemented: return kExitMalformed;
    case StatusCode::kNotFound:
    case StatusCode::kUnavailable:
    case StatusCode::kPermissionDenied: return kExitIo;
    case StatusCode::kAlreadyExists: return kExitConflict;
    default: return kExitInternal;
  }
}

// Shared by compile and build: compiles `functions`, writes `out`, reports.
int CompileFunctionsToBundle(const char* verb, const std::vector<ir::Function>& functions,
                             driver::CpuBuildOptions options, const std::string& out, bool quiet) {
  if (!quiet) {
    options.log = [verb](const std::string& line) { std::fprintf(stderr, "tl-pack %s: %s\n", verb, line.c_str()); };
  }
  StatusOr<std::vector<uint8_t>> bytes = driver::BuildCpuBundle(functions, options);
  if (!bytes.ok()) {
    std::fprintf(stderr, "tl-pack %s: %s\n", verb, bytes.status().ToString().c_str());
    return CpuBuildExitCode(bytes.status());
  }
  const Status written = formats::WriteFile(out, *bytes);
  if (!written.ok()) return Fail(verb, written);
  if (!quiet) {
    std::fprintf(stderr, "tl-pack %s: wrote %s (%zu kernels x %zu targets, %zu bytes)\n", verb, out.c_str(),
                 functions.size(), options.targets.size(), bytes->size());
  }
  return kExitOk;
}

int RunCompile(int argc, char** argv) {
  const char* verb = "compile";
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--target", "--emit-source", "--cache-dir", "-j"}, {"--help", "-h", "-q"}, &args,
                 &error)) {
    return UsageError(verb, error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (args.positional.empty()) return UsageError(verb, "no input .tir file");
  const std::string out = args.Get("-o");
  if (out.empty()) return UsageError(verb, "-o OUT.tlb is required");
  // CUDA items of --target are split off; the rest goes to the CPU parser.
  codegen::cuda::SplitTargets split = codegen::cuda::SplitCudaTargets(args.Get("--target", "cpu"));
  driver::CpuBuildOptions options;
  options.targets.clear();  // CUDA-only lists build no CPU variants
  if (!split.any || !split.rest.empty()) {
    StatusOr<std::vector<toolchain::IsaLevel>> targets = toolchain::ParseCpuTargets(split.rest);
    if (!targets.ok()) return UsageError(verb, targets.status().message());
    options.targets = *targets;
  }
  options.emit_source_dir = args.Get("--emit-source");
  options.compiler.cache_dir = args.Get("--cache-dir");
  if (!args.Get("-j").empty()) {
    uint64_t jobs = 0;
    if (!ParseSize(args.Get("-j"), &jobs) || jobs == 0 || jobs > 1024) return UsageError(verb, "bad -j value");
    options.jobs = static_cast<int>(jobs);
  }
  std::vector<ir::Function> functions;
  for (const std::string& path : args.positional) {
    StatusOr<std::vector<uint8_t>> text = formats::ReadFile(path);
    if (!text.ok()) return Fail(verb, text.status());
    StatusOr<ir::Module> m =
        ir::ParseModule(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()), path);
    if (!m.ok()) {
      std::fprintf(stderr, "tl-pack %s: %s\n", verb, m.status().ToString().c_str());
      return kExitMalformed;
    }
    const Status verified = ir::Verify(*m);
    if (!verified.ok()) {
      std::fprintf(stderr, "tl-pack %s: %s: %s\n", verb, path.c_str(), verified.ToString().c_str());
      return kExitMalformed;
    }
    for (ir::Function& f : m->functions) functions.push_back(std::move(f));
  }
  if (split.any) {
    split.cuda.emit_source_dir = options.emit_source_dir;
    if (!args.Has("-q")) {
      split.cuda.log = [verb](const std::string& line) { std::fprintf(stderr, "tl-pack %s: %s\n", verb, line.c_str()); };
    }
    if (options.targets.empty()) {  // CUDA only
      StatusOr<std::vector<uint8_t>> bytes = codegen::cuda::BuildCudaBundle(functions, split.cuda);
      if (!bytes.ok()) {
        std::fprintf(stderr, "tl-pack %s: %s\n", verb, bytes.status().ToString().c_str());
        return CpuBuildExitCode(bytes.status());
      }
      const Status written = formats::WriteFile(out, *bytes);
      return written.ok() ? kExitOk : Fail(verb, written);
    }
    StatusOr<codegen::cuda::CudaToolchain> tc = codegen::cuda::CudaToolchain::Create();
    if (!tc.ok()) return Fail(verb, tc.status());
    options.extra_variants = [tc = *tc, cuda = split.cuda](const ir::Function& f, tl::bundle::KernelT& kernel,
                                                           formats::BundleWriter& writer) -> Status {
      auto vs = codegen::cuda::MakeCudaVariants(f, tc, cuda, writer);
      if (!vs.ok()) return vs.status();
      for (auto& v : *vs) kernel.variants.push_back(std::move(v));
      return Status::Ok();
    };
  }
  return CompileFunctionsToBundle(verb, functions, std::move(options), out, args.Has("-q"));
}

}  // namespace tl::pack
