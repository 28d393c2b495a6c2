// HIP bundle variants; see hip_bundle.h.
#include "tilelang/codegen/hip/hip_bundle.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>

#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/passes/passes.h"

namespace tl::codegen::hip {
namespace {

std::unique_ptr<tl::bundle::KeyValueT> KV(std::string key, std::string value) {
  auto kv = std::make_unique<tl::bundle::KeyValueT>();
  kv->key = std::move(key);
  kv->value = std::move(value);
  return kv;
}

// "gfx942:sramecc+:xnack-": a processor and at most one of each mode.
bool ValidTargetId(const std::string& id) {
  std::stringstream ss(id);
  std::string part;
  std::getline(ss, part, ':');
  if (part.size() < 4 || part.rfind("gfx", 0) != 0) return false;
  for (char c : part.substr(3)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  bool xnack = false, sramecc = false;
  while (std::getline(ss, part, ':')) {
    if (part == "xnack+" || part == "xnack-") {
      if (xnack) return false;
      xnack = true;
    } else if (part == "sramecc+" || part == "sramecc-") {
      if (sramecc) return false;
      sramecc = true;
    } else {
      return false;
    }
  }
  return true;
}

std::string VariantId(const std::string& target) {
  std::string id = "hip." + target;
  std::replace(id.begin(), id.end(), ':', '.');
  return id;
}

// The compiler's kernarg layout must be the one we print: every explicit
// argument at our offset with our size, in order.
Status CheckKernargs(const std::string& name, const std::string& target, const HipSource& src,
                     const formats::HsacoKernel& k) {
  std::vector<const formats::HsacoArg*> explicit_args;
  for (const formats::HsacoArg& a : k.args) {
    if (!a.hidden()) explicit_args.push_back(&a);
  }
  if (explicit_args.size() != src.slots.size()) {
    return Status(StatusCode::kInternal, "kernel '" + name + "' for " + target + ": the code object lists " +
                                             std::to_string(explicit_args.size()) + " explicit arguments, the printed " +
                                             "signature has " + std::to_string(src.slots.size()));
  }
  for (size_t i = 0; i < explicit_args.size(); ++i) {
    if (explicit_args[i]->offset != src.slots[i].offset || explicit_args[i]->size != src.slots[i].size) {
      return Status(StatusCode::kInternal,
                    "kernel '" + name + "' for " + target + ": argument " + std::to_string(i) + " is at offset " +
                        std::to_string(explicit_args[i]->offset) + " size " + std::to_string(explicit_args[i]->size) +
                        " in the code object, at " + std::to_string(src.slots[i].offset) + " size " +
                        std::to_string(src.slots[i].size) + " in the printed signature");
    }
  }
  return Status::Ok();
}

}  // namespace

gpu::GemmStrategy HipGemmStrategy(const std::string& target) {
  const std::string proc = target.substr(0, target.find(':'));
  if (proc == "gfx90a" || proc == "gfx940" || proc == "gfx941" || proc == "gfx942") return gpu::GemmStrategy::kMfma;
  if (proc.rfind("gfx11", 0) == 0) return gpu::GemmStrategy::kWmma;
  return gpu::GemmStrategy::kSimtFma;
}

StatusOr<SplitHipTargetsResult> SplitHipTargets(const std::string& list) {
  SplitHipTargetsResult out;
  out.hip.targets.clear();
  std::stringstream ss(list);
  std::string item;
  auto add = [&](const std::string& t) {
    if (std::find(out.hip.targets.begin(), out.hip.targets.end(), t) == out.hip.targets.end()) out.hip.targets.push_back(t);
  };
  while (std::getline(ss, item, ',')) {
    if (item == "hip" || item == "rocm" || item == "amd") {
      out.any = true;
      for (const char* t : {"gfx90a", "gfx942", "gfx1100"}) add(t);
    } else if (item == "hip-cov4") {
      out.any = true;
      out.hip.code_object_version = 4;
    } else if (item.rfind("gfx", 0) == 0) {
      if (!ValidTargetId(item)) {
        return Status(StatusCode::kInvalidArgument,
                      "bad AMDGPU target ID '" + item + "'; expected gfxNNN[:sramecc±][:xnack±], e.g. gfx942:xnack-");
      }
      out.any = true;
      add(item);
    } else {
      out.rest += (out.rest.empty() ? "" : ",") + item;
    }
  }
  if (out.any && out.hip.targets.empty()) {
    for (const char* t : {"gfx90a", "gfx942", "gfx1100"}) add(t);
  }
  return out;
}

StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeHipVariants(const ir::Function& f,
                                                                             const HipToolchain& tc,
                                                                             const HipBuildOptions& options,
                                                                             formats::BundleWriter& writer) {
  int64_t budget = INT64_MAX;
  for (const std::string& t : options.targets) budget = std::min(budget, LdsBudget(t));
  // One lowering and one source per wavefront size and GEMM strategy.
  auto key_of = [&](const std::string& t) {
    const gpu::GemmStrategy g = options.matrix_cores ? HipGemmStrategy(t) : gpu::GemmStrategy::kSimtFma;
    return "wave" + std::to_string(DefaultWavefront(t)) +
           (g == gpu::GemmStrategy::kMfma ? ".mfma" : g == gpu::GemmStrategy::kWmma ? ".wmma" : "");
  };
  std::map<std::string, gpu::SimtKernel> kernels;
  std::map<std::string, HipSource> sources;
  for (const std::string& t : options.targets) {
    const int wave = DefaultWavefront(t);
    const std::string key = key_of(t);
    if (kernels.count(key)) continue;
    gpu::GpuLowerOptions lo;
    lo.shared_budget_bytes = budget;
    lo.warp_size = wave;       // lane reductions span the whole wavefront
    lo.symbol_params = true;   // the HIP runtime fills ParamSlot.symbol slots
    lo.target = "hip";         // T.call_extern (imported CUDA source) is rejected naming it
    lo.gemm = options.matrix_cores ? HipGemmStrategy(t) : gpu::GemmStrategy::kSimtFma;
    if (gpu::GemmStrategy g = lo.gemm; (g == gpu::GemmStrategy::kMfma && wave != 64) ||
                                       (g == gpu::GemmStrategy::kWmma && wave != 32)) {
      lo.gemm = gpu::GemmStrategy::kSimtFma;
    }
    StatusOr<gpu::SimtKernel> k = gpu::LowerToSimt(f, lo);
    if (!k.ok()) return k.status();
    StatusOr<HipSource> src = PrintHip(*k, wave);
    if (!src.ok()) return Status(src.status().code(), passes::Where(f, f.loc, src.status().message().c_str()));
    if (!options.emit_source_dir.empty()) {
      std::filesystem::create_directories(options.emit_source_dir);
      std::ofstream(std::filesystem::path(options.emit_source_dir) / (f.name + "." + key + ".hip")) << src->source;
    }
    kernels.emplace(key, std::move(*k));
    sources.emplace(key, std::move(*src));
  }
  // Compile every target in parallel; collect in target order (deterministic).
  std::vector<std::future<StatusOr<CompiledHsaco>>> jobs;
  for (const std::string& t : options.targets) {
    const HipSource& src = sources.at(key_of(t));
    jobs.push_back(std::async(std::launch::async, [&tc, &src, t, cov = options.code_object_version, name = f.name] {
      return tc.Compile(src.source, name, t, cov);
    }));
  }
  std::vector<std::unique_ptr<tl::bundle::VariantT>> out;
  std::vector<StatusOr<CompiledHsaco>> results;
  for (auto& j : jobs) results.push_back(j.get());
  for (size_t i = 0; i < options.targets.size(); ++i) {
    const std::string& target = options.targets[i];
    const int wave = DefaultWavefront(target);
    const gpu::SimtKernel& k = kernels.at(key_of(target));
    const HipSource& src = sources.at(key_of(target));
    StatusOr<CompiledHsaco>& code = results[i];
    if (!code.ok()) {
      return Status(code.status().code(), passes::Where(f, f.loc, ("HIP " + target + ": " + code.status().message()).c_str()));
    }
    const formats::HsacoInfo& info = code->info;
    const formats::HsacoKernel* hk = info.Find(f.name);
    if (!hk) {
      return Status(StatusCode::kInternal, "kernel '" + f.name + "' for " + target + ": the code object has no kernel of that name");
    }
    TL_RETURN_IF_ERROR(CheckKernargs(f.name, target, src, *hk));
    if (hk->wavefront_size != wave) {
      return Status(StatusCode::kInternal, "kernel '" + f.name + "' for " + target + ": code object wavefront size " +
                                               std::to_string(hk->wavefront_size) + ", lowered for " + std::to_string(wave));
    }
    if (hk->group_segment_fixed_size > LdsBudget(target)) {
      return Status(StatusCode::kResourceExhausted,
                    passes::Where(f, f.loc,
                                  ("HIP " + target + ": the code object uses " + std::to_string(hk->group_segment_fixed_size) +
                                   " bytes of LDS, the target allows " + std::to_string(LdsBudget(target)))
                                      .c_str()));
    }
    if (options.log) {
      options.log(f.name + " " + target + ": " + std::to_string(code->bytes.size()) + " bytes, " +
                  std::to_string(hk->vgpr_count) + " VGPRs, " + std::to_string(hk->sgpr_count) + " SGPRs, LDS " +
                  std::to_string(hk->group_segment_fixed_size) + (code->cache_hit ? " (cached)" : ""));
    }
    auto v = std::make_unique<tl::bundle::VariantT>();
    v->id = VariantId(target);
    v->backend = tl::bundle::Backend::HIP;
    v->code_kind = tl::bundle::CodeKind::HSACO;
    v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
    v->requires_->arch = info.TargetId();
    v->requires_->isa_version = static_cast<uint32_t>(info.code_object_version);
    v->requires_->shared_bytes = static_cast<uint32_t>(std::max<int64_t>(0, hk->group_segment_fixed_size));
    v->requires_->threads_per_block = static_cast<uint32_t>(k.threads);
    v->requires_->subgroup_size = static_cast<uint32_t>(wave);
    v->entry_point = f.name;
    v->payload = writer.AddPayload(code->bytes);
    v->launch = std::make_unique<tl::bundle::LaunchT>();
    v->launch->block.assign(k.block.begin(), k.block.end());
    for (size_t d = 0; d < 3; ++d) {
      auto g = std::make_unique<tl::bundle::GridExprT>();
      if (d < k.grid.size()) {
        StatusOr<std::vector<int64_t>> c = passes::CompileGridExpr(k.grid[d], f);
        if (!c.ok()) return c.status();
        g->code = std::move(*c);
      } else {
        g->code = {0, 1};
      }
      v->launch->grid.push_back(std::move(g));
    }
    v->launch->static_shared_bytes = v->requires_->shared_bytes;
    v->launch->dynamic_shared_bytes = 0;
    v->launch->warp_size = static_cast<uint32_t>(wave);
    for (const ParamSlot& s : src.slots) {
      auto ps = std::make_unique<tl::bundle::ParamSlotT>();
      ps->param = static_cast<int16_t>(s.param);
      ps->offset = s.offset;
      ps->size = s.size;
      ps->align = s.align;
      ps->symbol = static_cast<int16_t>(s.symbol);
      v->launch->param_slots.push_back(std::move(ps));
    }
    v->launch->param_buffer_bytes = src.param_buffer_bytes;
    v->build_attrs.push_back(KV("hip.compiler", tc.identity()));
    v->build_attrs.push_back(KV("hsaco.code_object_version", std::to_string(info.code_object_version)));
    v->build_attrs.push_back(KV("hsaco.target", info.metadata_target));
    auto num = [&](const char* key, int64_t value) {
      if (value >= 0) v->build_attrs.push_back(KV(std::string("hsaco.") + key, std::to_string(value)));
    };
    num("kernarg_segment_size", hk->kernarg_segment_size);
    num("kernarg_segment_align", hk->kernarg_segment_align);
    num("group_segment_fixed_size", hk->group_segment_fixed_size);
    num("private_segment_fixed_size", hk->private_segment_fixed_size);
    num("sgpr_count", hk->sgpr_count);
    num("vgpr_count", hk->vgpr_count);
    num("agpr_count", hk->agpr_count);
    num("sgpr_spill_count", hk->sgpr_spill_count);
    num("vgpr_spill_count", hk->vgpr_spill_count);
    num("wavefront_size", hk->wavefront_size);
    num("max_flat_workgroup_size", hk->max_flat_workgroup_size);
    v->build_attrs.push_back(KV("hsaco.uses_dynamic_stack", hk->uses_dynamic_stack ? "true" : "false"));
    for (size_t n = 0; n < k.notes.size(); ++n) v->build_attrs.push_back(KV("gpu.note." + std::to_string(n), k.notes[n]));
    std::sort(v->build_attrs.begin(), v->build_attrs.end(), [](const auto& a, const auto& b) { return a->key < b->key; });
    out.push_back(std::move(v));
  }
  return out;
}

StatusOr<std::vector<uint8_t>> BuildHipBundle(const std::vector<ir::Function>& functions, const HipBuildOptions& options,
                                              const HipToolchainOptions& toolchain) {
  StatusOr<HipToolchain> tc = HipToolchain::Create(toolchain);
  if (!tc.ok()) return tc.status();
  formats::BundleWriter writer;
  auto producer = std::make_unique<tl::bundle::ProducerT>();
  producer->tool = "tl-pack";
  producer->tool_version = "0.1.0";
  writer.SetProducer(std::move(producer));
  for (const ir::Function& f : functions) {
    codegen::cpu::CpuKernel sig;  // the signature needs the access per parameter only
    sig.name = f.name;
    sig.access = passes::InferParamAccess(f);
    std::unique_ptr<tl::bundle::KernelT> kernel = driver::MakeKernelSignature(f, sig);
    StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> vs = MakeHipVariants(f, *tc, options, writer);
    if (!vs.ok()) return vs.status();
    for (auto& v : *vs) kernel->variants.push_back(std::move(v));
    Status added = writer.AddKernel(std::move(kernel));
    if (!added.ok()) return added;
  }
  return writer.Finish();
}

}  // namespace tl::codegen::hip
