// SPIR-V bundle variants; see spirv_bundle.h.
#include "tilelang/codegen/spirv/spirv_bundle.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tilelang/codegen/spirv/spirv_codegen.h"
#include "tilelang/codegen/spirv/spirv_tools.h"
#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/passes/passes.h"

namespace tl::codegen::spirv {
namespace {

std::unique_ptr<tl::bundle::KeyValueT> KV(std::string key, std::string value) {
  auto kv = std::make_unique<tl::bundle::KeyValueT>();
  kv->key = std::move(key);
  kv->value = std::move(value);
  return kv;
}

std::string VersionName(uint32_t word) {
  return "spirv" + std::to_string(word >> 16 & 0xFF) + "." + std::to_string(word >> 8 & 0xFF);
}

// VK_MAKE_API_VERSION(0, 1, minor, 0) for the Vulkan version that accepts `word`.
uint32_t MinDriver(uint32_t word) {
  const uint32_t minor = word >= 0x00010600 ? 3 : word >= 0x00010500 ? 2 : word >= 0x00010300 ? 1 : 0;
  return (1u << 22) | (minor << 12);
}

}  // namespace

SplitSpirv SplitSpirvTargets(const std::string& list) {
  SplitSpirv out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "vulkan" || item == "spirv" || item == "spirv1.3") {
      out.any = true;
    } else {
      out.rest += (out.rest.empty() ? "" : ",") + item;
    }
  }
  return out;
}

StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeSpirvVariants(const ir::Function& f,
                                                                                const SpirvBuildOptions& options,
                                                                                formats::BundleWriter& writer) {
  gpu::GpuLowerOptions lo;
  lo.shared_budget_bytes = options.shared_budget_bytes;
  lo.symbol_params = true;  // symbols travel in the push-constant block
  lo.target = "vulkan";    // T.call_extern (imported CUDA source) is rejected naming it
  StatusOr<gpu::SimtKernel> k = gpu::LowerToSimt(f, lo);
  if (!k.ok()) return k.status();
  SpirvOptions so;
  for (const ir::Symbol& s : f.symbols) so.symbols.push_back(s.name);

  std::vector<std::unique_ptr<tl::bundle::VariantT>> out;
  // One variant from a module: `suffix` of its id, its priority, a required
  // subgroup size (0: any).
  auto add_variant = [&](const gpu::SimtKernel& kern, const SpirvModule& mod, const std::string& suffix, int priority,
                         uint32_t subgroup_size) -> Status {
    std::vector<uint8_t> bytes(mod.words.size() * 4);
    for (size_t i = 0; i < mod.words.size(); ++i) {
      for (int j = 0; j < 4; ++j) bytes[i * 4 + j] = static_cast<uint8_t>(mod.words[i] >> (8 * j));
    }
    auto v = std::make_unique<tl::bundle::VariantT>();
    v->id = "vulkan." + VersionName(mod.version_word) + suffix;
    v->backend = tl::bundle::Backend::VULKAN;
    v->code_kind = tl::bundle::CodeKind::SPIRV;
    v->priority = priority;
    v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
    v->requires_->arch = VersionName(mod.version_word);
    v->requires_->isa_version = mod.version_word;
    v->requires_->min_driver = MinDriver(mod.version_word);
    v->requires_->features = mod.features;
    v->requires_->shared_bytes = static_cast<uint32_t>(mod.shared_bytes);
    v->requires_->threads_per_block = static_cast<uint32_t>(mod.threads);
    v->requires_->subgroup_size = subgroup_size;
    v->requires_->push_constant_bytes = mod.push_bytes;
    v->entry_point = mod.entry_point;
    v->payload = writer.AddPayload(bytes);
    v->launch = std::make_unique<tl::bundle::LaunchT>();
    v->launch->block.assign(mod.block.begin(), mod.block.end());
    for (size_t i = 0; i < 3; ++i) {
      auto g = std::make_unique<tl::bundle::GridExprT>();
      if (i < kern.grid.size()) {
        StatusOr<std::vector<int64_t>> c = passes::CompileGridExpr(kern.grid[i], f);
        if (!c.ok()) return c.status();
        g->code = std::move(*c);
      } else {
        g->code = {0, 1};
      }
      v->launch->grid.push_back(std::move(g));
    }
    v->launch->static_shared_bytes = static_cast<uint32_t>(mod.shared_bytes);
    for (size_t b = 0; b < mod.buffer_params.size(); ++b) {
      auto vb = std::make_unique<tl::bundle::VkBindingT>();
      vb->param = static_cast<uint16_t>(mod.buffer_params[b]);
      vb->set = 0;
      vb->binding = static_cast<uint32_t>(b);
      vb->descriptor_type = 7;  // VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
      v->launch->vk_bindings.push_back(std::move(vb));
    }
    for (const PushRange& p : mod.push) {
      auto r = std::make_unique<tl::bundle::VkPushRangeT>();
      r->param = static_cast<int16_t>(p.param);
      r->offset = p.offset;
      r->size = p.size;
      v->launch->vk_push.push_back(std::move(r));
    }
    v->launch->vk_push_bytes = mod.push_bytes;
    // Wide copies (SCopyVec) read aligned words from the tensor's binding:
    // its address is checked at launch (a misaligned tensor gets the next
    // variant, which has none).
    for (const auto& [name, align] : kern.param_align) {
      for (size_t p = 0; p < f.params.size(); ++p) {
        if (f.params[p].name != name) continue;
        auto g = std::make_unique<tl::bundle::GuardT>();
        g->param = static_cast<uint16_t>(p);
        g->op = tl::bundle::GuardOp::PTR_ALIGNED;
        g->value = align;
        v->guards.push_back(std::move(g));
      }
    }
    v->build_attrs.push_back(KV("spirv.tools", SpirvToolsVersion()));
    v->build_attrs.push_back(KV("spirv.validated", mod.validation));
    std::vector<std::string> notes = kern.notes;
    notes.insert(notes.end(), mod.notes.begin(), mod.notes.end());
    for (size_t i = 0; i < notes.size(); ++i) v->build_attrs.push_back(KV("gpu.note." + std::to_string(i), notes[i]));
    std::sort(v->build_attrs.begin(), v->build_attrs.end(), [](const auto& a, const auto& b) { return a->key < b->key; });
    out.push_back(std::move(v));
    return Status::Ok();
  };
  auto check_budget = [&](const SpirvModule& mod) -> Status {
    if (mod.shared_bytes <= options.shared_budget_bytes) return Status::Ok();
    return Status(StatusCode::kResourceExhausted,
                  passes::Where(f, f.loc,
                                ("SPIR-V: needs " + std::to_string(mod.shared_bytes) +
                                 " bytes of workgroup memory (lane-reduction scratch included), the budget is " +
                                 std::to_string(options.shared_budget_bytes))
                                    .c_str()));
  };
  for (int pass = 0; pass < 2; ++pass) {
    so.subgroup_shuffle = pass == 1;
    StatusOr<SpirvModule> m = EmitSpirv(*k, so);
    if (!m.ok()) {
      return Status(m.status().code(), passes::Where(f, f.loc, ("SPIR-V: " + m.status().message()).c_str()));
    }
    if (pass == 1 && (m->lane_reduces == 0 || !options.subgroup_variant)) break;  // same module as the plain one
    if (pass == 1 && options.subgroup_token != "vk.subgroup.shuffle") {
      m->features.erase(std::remove(m->features.begin(), m->features.end(), "vk.subgroup.shuffle"), m->features.end());
      if (!options.subgroup_token.empty()) m->features.push_back(options.subgroup_token);
      std::sort(m->features.begin(), m->features.end());
    }
    if (Status b = check_budget(*m); !b.ok()) return b;
    if (pass == 0 && !options.emit_source_dir.empty()) {
      std::filesystem::create_directories(options.emit_source_dir);
      std::ofstream(std::filesystem::path(options.emit_source_dir) / (f.name + ".spvasm")) << DisassembleSpirv(m->words);
    }
    if (options.log) {
      options.log(f.name + " " + VersionName(m->version_word) + (pass ? " subgroup" : "") + ": " +
                  std::to_string(m->words.size() * 4) + " bytes, " + std::to_string(m->shared_bytes) +
                  " bytes workgroup memory");
    }
    if (pass == 0 && !options.plain_variant) continue;
    if (Status s = add_variant(*k, *m, pass ? ".subgroup" : "", pass, 0); !s.ok()) return s;
  }

  // Tensor cores: the same function lowered with mma.sync-style k-steps,
  // emitted as cooperative-matrix code (spirv_codegen.h). Kernels whose gemms
  // do not become k-steps, or that the scheme does not fit, get no such
  // variant (the log says why).
  if (options.cooperative_matrix) {
    gpu::GpuLowerOptions mo = lo;
    mo.gemm = gpu::GemmStrategy::kMmaSync;
    // The performance variant copies tiles with wide loads (SCopyVec); the
    // plain variants keep element copies, so a misaligned tensor still runs.
    mo.vector_copies = true;
    StatusOr<gpu::SimtKernel> mk = gpu::LowerToSimt(f, mo);
    const std::string why = mk.ok() ? "" : "the tensor-core lowering failed: " + mk.status().message();
    const char* env = getenv("TL_SPIRV_COOPMAT_EMULATED");
    const bool emulated = options.cooperative_matrix_emulated || (env && std::string(env) == "1");
    SpirvOptions co = so;
    co.subgroup_shuffle = false;
    co.cooperative_matrix = true;
    co.cooperative_matrix_emulated = emulated;
    StatusOr<SpirvModule> m = mk.ok() ? EmitSpirv(*mk, co) : StatusOr<SpirvModule>(mk.status());
    if (m.ok() && m->cooperative_mma > 0 && check_budget(*m).ok()) {
      if (options.log) {
        options.log(f.name + " " + VersionName(m->version_word) + " coopmat: " + std::to_string(m->words.size() * 4) +
                    " bytes, " + std::to_string(m->shared_bytes) + " bytes workgroup memory, " +
                    std::to_string(m->cooperative_mma) + " k-step statement(s); " + m->validation);
      }
      if (Status s = add_variant(*mk, *m, emulated ? ".coopmat_emulated" : ".coopmat", 2, emulated ? 0 : 32); !s.ok()) {
        return s;
      }
    } else if (m.ok() && m->cooperative_mma > 0) {
      if (options.log) options.log(f.name + " coopmat: no variant: " + check_budget(*m).message());
    } else if (!m.ok() && m.status().code() != StatusCode::kFailedPrecondition && mk.ok()) {
      // A module a validator rejects is a compiler bug, as for the other variants.
      return Status(m.status().code(), passes::Where(f, f.loc, ("SPIR-V (coopmat): " + m.status().message()).c_str()));
    } else if (!m.ok() && options.log) {
      options.log(f.name + " coopmat: no variant: " + (why.empty() ? m.status().message() : why));
    }
  }
  return out;
}

StatusOr<std::vector<uint8_t>> BuildSpirvBundle(
    const std::vector<ir::Function>& functions, const SpirvBuildOptions& options,
    const std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)>& extra) {
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
    if (extra) {
      Status s = extra(f, *kernel, writer);
      if (!s.ok()) return s;
    }
    StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> vs = MakeSpirvVariants(f, options, writer);
    if (!vs.ok()) return vs.status();
    for (auto& v : *vs) kernel->variants.push_back(std::move(v));
    Status added = writer.AddKernel(std::move(kernel));
    if (!added.ok()) return added;
  }
  return writer.Finish();
}

}  // namespace tl::codegen::spirv
