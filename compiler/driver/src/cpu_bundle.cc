// BuildCpuBundle and the bundle assembly helpers.
#include "tilelang/driver/cpu_bundle.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tilelang/formats/writer.h"

namespace tl::driver {
namespace fs = std::filesystem;
using toolchain::IsaLevel;

tl::bundle::DType ToBundleDType(ir::DType t) {
  // DLPack codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool (bool is one byte).
  const uint8_t bits = static_cast<uint8_t>(t == ir::DType::kBool ? 8 : ir::BitWidth(t));
  uint8_t code = 0;
  if (t == ir::DType::kBool) code = 6;
  else if (t == ir::DType::kBF16) code = 4;
  else if (ir::IsFloat(t)) code = 2;
  else if (ir::IsSigned(t)) code = 0;
  else code = 1;
  return tl::bundle::DType(code, bits, 1);
}

namespace {

std::unique_ptr<tl::bundle::KeyValueT> KV(std::string key, std::string value) {
  auto kv = std::make_unique<tl::bundle::KeyValueT>();
  kv->key = std::move(key);
  kv->value = std::move(value);
  return kv;
}

tl::bundle::Access ToBundleAccess(passes::Access a) {
  switch (a) {
    case passes::Access::kNone: return tl::bundle::Access::NONE;
    case passes::Access::kRead: return tl::bundle::Access::READ;
    case passes::Access::kWrite: return tl::bundle::Access::WRITE;
    case passes::Access::kReadWrite: return tl::bundle::Access::READ_WRITE;
  }
  return tl::bundle::Access::READ_WRITE;
}

}  // namespace

std::unique_ptr<tl::bundle::KernelT> MakeKernelSignature(const ir::Function& f,
                                                          const codegen::cpu::CpuKernel& lowered) {
  auto k = std::make_unique<tl::bundle::KernelT>();
  k->name = f.name;
  k->abi_version = 1;
  for (const ir::Symbol& s : f.symbols) k->symbols.push_back(s.name);
  k->source_location = ir::ToString(f.loc);
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Param& p = f.params[i];
    auto param = std::make_unique<tl::bundle::ParamT>();
    param->name = p.name;
    param->dtype = std::make_unique<tl::bundle::DType>(ToBundleDType(p.dtype));
    param->access = ToBundleAccess(lowered.access[i]);
    // Generated code needs element alignment only (no aligned vector loads on tensors).
    param->ptr_alignment = static_cast<uint32_t>(p.dtype == ir::DType::kBool ? 1 : ir::BitWidth(p.dtype) / 8);
    if (p.kind == ir::Param::Kind::kScalar) {
      param->kind = tl::bundle::ParamKind::SCALAR;
      param->rank = 0;
      // Tile IR v1 scalars never bind a shape symbol (binds_symbol stays -1).
      k->params.push_back(std::move(param));
      continue;
    }
    param->kind = tl::bundle::ParamKind::BUFFER;
    param->rank = static_cast<int8_t>(p.shape.size());
    for (const ir::Expr& d : p.shape) {
      auto dim = std::make_unique<tl::bundle::DimT>();
      if (const std::optional<int64_t> v = ir::FoldInt(d)) {
        dim->static_size = *v;
      } else if (const auto* ref = ir::As<ir::VarRef>(d)) {
        for (size_t s = 0; s < f.symbols.size(); ++s) {
          if (f.symbols[s].name == ref->name) dim->symbol = static_cast<int16_t>(s);
        }
      }
      param->shape.push_back(std::move(dim));
    }
    k->params.push_back(std::move(param));
  }
  return k;
}

StatusOr<std::unique_ptr<tl::bundle::VariantT>> MakeCpuVariant(const ir::Function& f,
                                                                const codegen::cpu::CpuKernel& lowered,
                                                                IsaLevel isa, const toolchain::HostCompiler& cc) {
  auto v = std::make_unique<tl::bundle::VariantT>();
  v->id = std::string("cpu.") + toolchain::IsaName(isa);
  v->backend = tl::bundle::Backend::CPU;
  v->code_kind = tl::bundle::CodeKind::ELF;
  v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
  v->requires_->arch = toolchain::IsaName(isa);
  v->requires_->features = toolchain::IsaFeatures(isa);
  v->priority = 0;  // the runtime ranks higher ISA levels first
  v->entry_point = f.name;
  v->launch = std::make_unique<tl::bundle::LaunchT>();
  v->launch->block.assign(lowered.threads.begin(), lowered.threads.end());
  for (size_t i = 0; i < 3; ++i) {
    auto g = std::make_unique<tl::bundle::GridExprT>();
    if (i < lowered.grid.size()) {
      StatusOr<std::vector<int64_t>> code = passes::CompileGridExpr(lowered.grid[i], f);
      if (!code.ok()) {
        return Status(code.status().code(), code.status().message() +
                                                (lowered.kernel_loc ? " (" + ir::ToString(lowered.kernel_loc) + ")" : ""));
      }
      g->code = std::move(*code);
    } else {
      g->code = {0, 1};  // CONST 1
    }
    v->launch->grid.push_back(std::move(g));
  }
  v->launch->cpu_scratch_bytes = lowered.scratch_bytes;
  std::string flags;
  for (const std::string& x : cc.Flags(isa)) flags += (flags.empty() ? "" : " ") + x;
  v->build_attrs.push_back(KV("cxx", cc.identity()));
  v->build_attrs.push_back(KV("cxx.flags", flags));
  v->build_attrs.push_back(KV("cpu.scratch_bytes", std::to_string(lowered.scratch_bytes)));
  for (const passes::PipelineDecision& d : lowered.pipelines) {
    v->build_attrs.push_back(KV("pipeline." + d.loop_var, "stages requested " + std::to_string(d.requested_stages) +
                                                             ", applied " + std::to_string(d.applied_stages) + ": " +
                                                             d.reason));
  }
  return v;
}

StatusOr<std::vector<uint8_t>> BuildCpuBundle(const std::vector<ir::Function>& functions,
                                              const CpuBuildOptions& options) {
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (options.targets.empty()) return Status(StatusCode::kInvalidArgument, "no CPU target given");
  StatusOr<toolchain::HostCompiler> cc = toolchain::HostCompiler::Create(options.compiler);
  if (!cc.ok()) return cc.status();

  // 1. Lower every function (fast; fail on the first error, which names the line).
  std::vector<codegen::cpu::CpuKernel> lowered;
  for (const ir::Function& f : functions) {
    StatusOr<codegen::cpu::CpuKernel> k = codegen::cpu::LowerFunction(f);
    if (!k.ok()) return k.status();
    if (!options.emit_source_dir.empty()) {
      std::error_code ec;
      fs::create_directories(options.emit_source_dir, ec);
      const fs::path p = fs::path(options.emit_source_dir) / (f.name + ".cc");
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out << k->source;
      if (!out) return Status(StatusCode::kUnavailable, "cannot write " + p.string());
    }
    lowered.push_back(std::move(*k));
  }

  // 2. Compile every (kernel, ISA level) pair in parallel.
  std::vector<toolchain::CompileJob> jobs;
  for (const codegen::cpu::CpuKernel& k : lowered) {
    for (IsaLevel isa : options.targets) {
      jobs.push_back({k.name, ir::ToString(k.kernel_loc ? k.kernel_loc : k.loc), isa, k.source});
    }
  }
  size_t done = 0;
  const std::vector<toolchain::CompileResult> results =
      cc->CompileAll(jobs, options.jobs, [&](const toolchain::CompileJob& j, const toolchain::CompileResult& r) {
        char line[512];
        ++done;
        if (!r.status.ok()) {
          std::snprintf(line, sizeof line, "[%zu/%zu] %s %s: FAILED", done, jobs.size(), j.kernel.c_str(),
                        toolchain::IsaName(j.isa));
        } else if (r.cache_hit) {
          std::snprintf(line, sizeof line, "[%zu/%zu] %s %s: cached (%zu bytes)", done, jobs.size(), j.kernel.c_str(),
                        toolchain::IsaName(j.isa), r.object.size());
        } else {
          std::snprintf(line, sizeof line, "[%zu/%zu] %s %s: compiled in %.2f s (%zu bytes)", done, jobs.size(),
                        j.kernel.c_str(), toolchain::IsaName(j.isa), r.seconds, r.object.size());
        }
        log(line);
      });
  std::string failures;
  for (const toolchain::CompileResult& r : results) {
    if (!r.status.ok()) failures += (failures.empty() ? "" : "\n") + r.status.message();
  }
  if (!failures.empty()) return Status(StatusCode::kInternal, failures);

  // 3. Pack, in input order (the writer sorts kernels by name).
  formats::BundleWriter writer;
  auto producer = std::make_unique<tl::bundle::ProducerT>();
  producer->tool = "tl-pack";
  producer->tool_version = "0.1.0";
  writer.SetProducer(std::move(producer));
  size_t job = 0;
  for (size_t i = 0; i < lowered.size(); ++i) {
    std::unique_ptr<tl::bundle::KernelT> kernel = MakeKernelSignature(functions[i], lowered[i]);
    for (IsaLevel isa : options.targets) {
      StatusOr<std::unique_ptr<tl::bundle::VariantT>> v = MakeCpuVariant(functions[i], lowered[i], isa, *cc);
      if (!v.ok()) return v.status();
      (*v)->payload = writer.AddPayload(results[job++].object);
      kernel->variants.push_back(std::move(*v));
    }
    if (options.extra_variants) {
      Status extra = options.extra_variants(functions[i], *kernel, writer);
      if (!extra.ok()) return extra;
    }
    Status added = writer.AddKernel(std::move(kernel));
    if (!added.ok()) return added;
  }
  return writer.Finish();
}

}  // namespace tl::driver
