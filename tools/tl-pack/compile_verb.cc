// tl-pack compile: Tile IR files -> CPU variants (x86-64 v2/v3/v4) -> one bundle.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/codegen/hip/hip_bundle.h"
#include "tilelang/codegen/spirv/spirv_bundle.h"
#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/passes/passes.h"
#include "verbs.h"

namespace tl::pack {
namespace {

const char* kHelp =
    "usage: tl-pack compile IN.tir [IN2.tir ...] -o OUT.tlb [--target cpu|x86-64-v2,x86-64-v3,x86-64-v4]\n"
    "                       [--target cuda|sm_80,sm_89,sm_90a,ptx] [--target hip|gfx90a,gfx942,gfx1100]\n"
    "                       [--target vulkan] [--target cpu,cuda,hip,vulkan]\n"
    "                       [--emit-source DIR] [--cache-dir DIR] [-j N] [-q]\n"
    "\n"
    "Parses and verifies each Tile IR file, lowers every function to C++ (one block function\n"
    "per kernel), compiles it with the host compiler ($TL_HOST_CXX, default g++) once per ISA\n"
    "level in parallel, and writes one bundle with a variant per level.\n"
    "  --target       'cpu' (default) = all three levels, or a comma list of levels;\n"
    "                 'cuda' = cubins for sm_80, sm_89, sm_90a + compute_80 PTX (NVRTC, else nvcc),\n"
    "                 or sm_XX items (each adds a cubin and the PTX);\n"
    "                 'hip' = HSACO code objects for gfx90a, gfx942, gfx1100 (clang-19, code object v5),\n"
    "                 or AMDGPU target IDs (gfx942:xnack-, ...), 'hip-cov4' for code object v4;\n"
    "                 'vulkan' (or 'spirv') = SPIR-V 1.3 compute modules, validated by spirv-val;\n"
    "                 all kinds may be mixed\n"
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

namespace {

// Kernel signatures plus the variants `add` makes (GPU backends), no CPU code.
StatusOr<std::vector<uint8_t>> BuildGpuOnlyBundle(
    const std::vector<ir::Function>& functions,
    const std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)>& add) {
  formats::BundleWriter writer;
  auto producer = std::make_unique<tl::bundle::ProducerT>();
  producer->tool = "tl-pack";
  producer->tool_version = TL_PACK_VERSION;
  writer.SetProducer(std::move(producer));
  for (const ir::Function& f : functions) {
    codegen::cpu::CpuKernel sig;  // the signature needs the access per parameter only
    sig.name = f.name;
    sig.access = passes::InferParamAccess(f);
    std::unique_ptr<tl::bundle::KernelT> kernel = driver::MakeKernelSignature(f, sig);
    TL_RETURN_IF_ERROR(add(f, *kernel, writer));
    TL_RETURN_IF_ERROR(writer.AddKernel(std::move(kernel)));
  }
  return writer.Finish();
}

}  // namespace

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
  // SPIR-V (vulkan), HIP, then CUDA items of --target are split off; the rest goes to the CPU parser.
  codegen::spirv::SplitSpirv spv_split = codegen::spirv::SplitSpirvTargets(args.Get("--target", "cpu"));
  const std::string target_list = spv_split.any ? spv_split.rest : args.Get("--target", "cpu");
  StatusOr<codegen::hip::SplitHipTargetsResult> hip_split = codegen::hip::SplitHipTargets(target_list);
  if (!hip_split.ok()) return UsageError(verb, hip_split.status().message());
  codegen::cuda::SplitTargets split = codegen::cuda::SplitCudaTargets(hip_split->any ? hip_split->rest : target_list);
  const bool gpu_only = (spv_split.any || hip_split->any || split.any) && split.rest.empty();
  driver::CpuBuildOptions options;
  options.targets.clear();  // CUDA-only lists build no CPU variants
  if (!gpu_only) {
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
  if (hip_split->any) {
    hip_split->hip.emit_source_dir = options.emit_source_dir;
    if (!args.Has("-q")) {
      hip_split->hip.log = [verb](const std::string& line) { std::fprintf(stderr, "tl-pack %s: %s\n", verb, line.c_str()); };
    }
  }
  StatusOr<codegen::hip::HipToolchain> hip_tc = Status(StatusCode::kUnavailable, "no HIP target");
  if (hip_split->any) {
    hip_tc = codegen::hip::HipToolchain::Create({"", options.compiler.cache_dir});
    if (!hip_tc.ok()) return Fail(verb, hip_tc.status());
  }
  // Adds the HIP variants after whatever the hook already adds.
  auto add_hip = [&](std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)> before) {
    if (!hip_split->any) return before;
    return std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)>(
        [before, tc = *hip_tc, hip = hip_split->hip](const ir::Function& f, tl::bundle::KernelT& kernel,
                                                      formats::BundleWriter& writer) -> Status {
          if (before) TL_RETURN_IF_ERROR(before(f, kernel, writer));
          auto vs = codegen::hip::MakeHipVariants(f, tc, hip, writer);
          if (!vs.ok()) return vs.status();
          for (auto& v : *vs) kernel.variants.push_back(std::move(v));
          return Status::Ok();
        });
  };
  if (split.any) {
    split.cuda.emit_source_dir = options.emit_source_dir;
    if (!args.Has("-q")) {
      split.cuda.log = [verb](const std::string& line) { std::fprintf(stderr, "tl-pack %s: %s\n", verb, line.c_str()); };
    }
    if (options.targets.empty() && !hip_split->any && !spv_split.any) {  // CUDA only
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
  options.extra_variants = add_hip(options.extra_variants);
  if (spv_split.any) {  // the SPIR-V variants after the others
    spv_split.spirv.emit_source_dir = options.emit_source_dir;
    if (!args.Has("-q")) {
      spv_split.spirv.log = [verb](const std::string& line) { std::fprintf(stderr, "tl-pack %s: %s\n", verb, line.c_str()); };
    }
    options.extra_variants = [before = options.extra_variants, spirv = spv_split.spirv](
                                 const ir::Function& f, tl::bundle::KernelT& kernel, formats::BundleWriter& writer) -> Status {
      if (before) TL_RETURN_IF_ERROR(before(f, kernel, writer));
      auto vs = codegen::spirv::MakeSpirvVariants(f, spirv, writer);
      if (!vs.ok()) return vs.status();
      for (auto& v : *vs) kernel.variants.push_back(std::move(v));
      return Status::Ok();
    };
  }
  if (options.targets.empty()) {  // GPU targets only (HIP, or HIP and CUDA): no CPU variants
    StatusOr<std::vector<uint8_t>> bytes = BuildGpuOnlyBundle(functions, options.extra_variants);
    if (!bytes.ok()) {
      std::fprintf(stderr, "tl-pack %s: %s\n", verb, bytes.status().ToString().c_str());
      return CpuBuildExitCode(bytes.status());
    }
    const Status written = formats::WriteFile(out, *bytes);
    return written.ok() ? kExitOk : Fail(verb, written);
  }
  return CompileFunctionsToBundle(verb, functions, std::move(options), out, args.Has("-q"));
}

}  // namespace tl::pack
