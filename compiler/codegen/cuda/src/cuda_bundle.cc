// CUDA bundle variants; see cuda_bundle.h.
#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/codegen/cuda/cubin_params.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/wgmma.h"
#include "tilelang/passes/passes.h"

namespace tl::codegen::cuda {
namespace {

std::unique_ptr<tl::bundle::KeyValueT> KV(std::string key, std::string value) {
  auto kv = std::make_unique<tl::bundle::KeyValueT>();
  kv->key = std::move(key);
  kv->value = std::move(value);
  return kv;
}

uint32_t PtxIsaVersion(const std::vector<uint8_t>& ptx) {
  const std::string text(ptx.begin(), ptx.end());
  const size_t at = text.find(".version ");
  unsigned major = 0, minor = 0;
  if (at == std::string::npos || std::sscanf(text.c_str() + at, ".version %u.%u", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

}  // namespace

SplitTargets SplitCudaTargets(const std::string& list) {
  SplitTargets out;
  out.cuda.archs.clear();
  out.cuda.ptx = false;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "cuda") {
      out.any = true;
      for (const char* a : {"sm_80", "sm_89", "sm_90a"}) {
        if (std::find(out.cuda.archs.begin(), out.cuda.archs.end(), a) == out.cuda.archs.end()) out.cuda.archs.push_back(a);
      }
      out.cuda.ptx = true;
    } else if (item.rfind("sm_", 0) == 0) {
      out.any = true;
      if (std::find(out.cuda.archs.begin(), out.cuda.archs.end(), item) == out.cuda.archs.end()) out.cuda.archs.push_back(item);
      out.cuda.ptx = true;
    } else if (item == "ptx" || item == "compute_80") {
      out.any = true;
      out.cuda.ptx = true;
      out.cuda.ptx_named = true;
    } else {
      out.rest += (out.rest.empty() ? "" : ",") + item;
    }
  }
  return out;
}

StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> MakeCudaVariants(const ir::Function& f,
                                                                               const CudaToolchain& tc,
                                                                               const CudaBuildOptions& options,
                                                                               formats::BundleWriter& writer) {
  std::vector<std::string> archs = options.archs;
  if (options.ptx) archs.push_back("compute_80");
  int64_t budget = INT64_MAX;
  for (const std::string& a : archs) budget = std::min(budget, SharedBudget(a));
  gpu::GpuLowerOptions lo;
  lo.shared_budget_bytes = budget;
  lo.symbol_params = true;  // the CUDA runtime fills ParamSlot.symbol slots
  lo.extern_calls = true;   // T.call_extern into T.import_source'd CUDA source
  // Tensor cores (mma.sync) when every requested arch is sm_80 or later;
  // Turing's shapes (f16 m16n8k8, s8 m8n8k16; GpuLowerOptions::mma_sm75)
  // when the oldest is sm_75 (they run on every later arch too, so one
  // lowering serves the list); SIMT FMA below that.
  int oldest = archs.empty() ? 0 : 1000;
  for (const std::string& a : archs) {
    const size_t digits = a.find_first_of("0123456789");
    oldest = std::min(oldest, digits == std::string::npos ? 0 : std::atoi(a.c_str() + digits));
  }
  const bool mma = oldest >= 80;
  lo.gemm = oldest >= 75 ? gpu::GemmStrategy::kMmaSync : gpu::GemmStrategy::kSimtFma;
  lo.mma_sm75 = oldest >= 75 && oldest < 80;
  lo.tf32 = options.tf32;
  lo.vector_copies = true;
  lo.async_copies = mma;  // cp.async needs sm_80 as mma.sync does
  StatusOr<gpu::SimtKernel> k_all = gpu::LowerToSimt(f, lo);
  // The one case the shared lowering may fail and the build go on: it ran
  // out of shared memory, the only cubin asked for is sm_90a (lowered on its
  // own below, with its own budget) and the PTX was implied, not named
  // (CudaBuildOptions::ptx_named). Decided after sm_90a's lowering.
  const bool only_90a = options.archs == std::vector<std::string>{"sm_90a"};
  const bool may_drop_ptx = !k_all.ok() && k_all.status().code() == StatusCode::kResourceExhausted && only_90a &&
                            options.ptx && !options.ptx_named;
  if (!k_all.ok() && !may_drop_ptx) return k_all.status();
  if (!options.emit_source_dir.empty()) std::filesystem::create_directories(options.emit_source_dir);
  std::optional<CudaSource> src_all;
  if (k_all.ok()) {
    StatusOr<CudaSource> s = PrintCuda(*k_all);
    if (!s.ok()) return s.status();
    src_all = std::move(*s);
    if (!options.emit_source_dir.empty()) {
      std::ofstream(std::filesystem::path(options.emit_source_dir) / (f.name + ".cu")) << src_all->source;
    }
  }
  // sm_90a gets its own lowering: T.gemm on wgmma (GemmStrategy::kWgmma,
  // where a gemm fits; else mma.sync as above) and pipelined global ->
  // shared copies as TMA on mbarriers, where the lowering finds any; when it
  // uses neither, sm_90a takes the kernel above.
  std::optional<gpu::SimtKernel> k_90;
  std::optional<CudaSource> src_90;
  std::vector<std::string> why_not_90;  // the sm_90a lowering's gemm notes when sm_90a takes the kernel above
  gpu::GpuLowerOptions l90 = lo;
  // The sm_90a variant is its own cubin with its own Requirements.shared_bytes and launch size, so it gets
  // sm_90a's 227 KiB, not the smallest budget of the list (a "sm_90a" target also carries compute_80 PTX:
  // 163 KiB, which silently cut hopper_bench's deeper pipelines, e.g. 128x256x64 at 4 stages to 3).
  l90.shared_budget_bytes = SharedBudget("sm_90a");
  // TL_CUDA_WGMMA=0 at build time: sm_90a without wgmma (mma.sync as the
  // other archs), to bisect a device problem without changing the program.
  const char* wgmma_env = std::getenv("TL_CUDA_WGMMA");
  const bool wgmma = options.wgmma && !(wgmma_env && std::string(wgmma_env) == "0");
  // TL_CUDA_TMA=0 at build time keeps sm_90a's pipelined copies on cp.async
  // (bisecting, like TL_CUDA_WGMMA=0).
  const char* tma_env = std::getenv("TL_CUDA_TMA");
  const bool tma = options.tma && !(tma_env && std::string(tma_env) == "0");
  // TL_CUDA_WGMMA_OVERLAP=0 at build time: every wgmma k-step waits for its
  // own group (wait_group 0), none kept in flight across a pipeline's k-steps.
  const char* overlap_env = std::getenv("TL_CUDA_WGMMA_OVERLAP");
  l90.wgmma_overlap = !(overlap_env && std::string(overlap_env) == "0");
  // TL_CUDA_WGMMA_EPILOGUE=0 at build time: wgmma accumulators stored to
  // global memory straight from registers, not through a shared tile.
  const char* epi_env = std::getenv("TL_CUDA_WGMMA_EPILOGUE");
  l90.stage_wgmma_epilogue = !(epi_env && std::string(epi_env) == "0");
  // TL_CUDA_STMATRIX=0 at build time: the staged epilogue's shared tile
  // written element by element, not with stmatrix.
  const char* stsm_env = std::getenv("TL_CUDA_STMATRIX");
  l90.stmatrix = !(stsm_env && std::string(stsm_env) == "0");
  // TL_CUDA_BULK_STORE=1 at build time (pass_configs {"tl.bulk_store": True}
  // per compile): the warp-specialized GEMM's staged epilogue stored as warp
  // 0's per-row bulk copies (cp.async.bulk, the wait deferred a tile), not by
  // every consumer thread (16-byte st.global). Off by default: built and
  // checked in the SIMT interpreter and by ptxas in session 11, when no GPU
  // was lent; it becomes the default once the H200 has run it (correct, and
  // faster in hopper_bench's "bulk" GEMM configs).
  const char* bulk_env = std::getenv("TL_CUDA_BULK_STORE");
  l90.bulk_store = bulk_env && std::string(bulk_env) == "1";
  // TL_CUDA_GEMM_PINGPONG=1 at build time (pass_configs {"tl.gemm_pingpong":
  // True} per compile): a persistent warp-specialized GEMM whose block is one
  // 128-thread warpgroup (128x128 tiles) as CUTLASS's ping-pong schedule --
  // two consumer warpgroups on alternate tiles, one's epilogue under the
  // other's k-loop (GpuLowerOptions::gemm_pingpong). Off by default: built
  // and checked in the SIMT interpreter and by ptxas in session 12 without a
  // GPU; ignored (with a note) where it does not apply.
  // TL_CUDA_TMA_STORE=1 at build time (pass_configs {"tl.tma_store": True}
  // per compile): the staged epilogue tile unpadded and 128B-swizzled, and a
  // warp-specialized GEMM's copy of it to global memory as TMA tensor stores
  // by one thread (GpuLowerOptions::tma_store; takes bulk_store's place).
  // Off by default: written in session 14 with no GPU lent, checked in the
  // SIMT interpreter and by ptxas only.
  const char* tma_store_env = std::getenv("TL_CUDA_TMA_STORE");
  l90.tma_store = tma_store_env && std::string(tma_store_env) == "1";
  const char* pingpong_env = std::getenv("TL_CUDA_GEMM_PINGPONG");
  l90.gemm_pingpong = pingpong_env && std::string(pingpong_env) == "1";
  // TL_CUDA_PERSISTENT_RING=1 at build time: a persistent kernel's stages
  // continue across its tiles instead of restarting at stage 0 per tile
  // (GpuLowerOptions::persistent_ring). Off by default: correct on the H200,
  // no faster there (2026-12-05, A/B in one call).
  const char* ring_env = std::getenv("TL_CUDA_PERSISTENT_RING");
  l90.persistent_ring = ring_env && std::string(ring_env) == "1";
  // TL_CUDA_WS=0 at build time: no warp specialization (the pipelined wgmma
  // GEMM keeps every thread both waiting for TMA and issuing wgmma).
  const char* ws_env = std::getenv("TL_CUDA_WS");
  l90.warp_specialize = !(ws_env && std::string(ws_env) == "0");
  // TL_CUDA_PERSISTENT=1 at build time (off by default; tilelang.compile's
  // pass_configs {"tl.persistent": True | N} sets it per compile):
  // the warp-specialized GEMM as a persistent kernel over 132 SMs (H100/H200
  // SXM; a device with fewer runs the extra blocks as a second wave, still
  // correct), or over N SMs with TL_CUDA_PERSISTENT=N (N > 1); 0 is off.
  if (const char* p = std::getenv("TL_CUDA_PERSISTENT"); p && std::atoi(p) > 0) {
    l90.persistent_sms = std::atoi(p) == 1 ? 132 : std::atoi(p);
  }
  // A kernel's `hint cluster 2` (T.Kernel(..., cluster_dims=2)) makes the sm_90a
  // warp-specialized kernel a 2-block cluster with TMA multicast (gpu::ClusterMulticast);
  // TL_CUDA_CLUSTER=0 at build time ignores the hint (bisecting, like TL_CUDA_WS=0).
  const char* cluster_env = std::getenv("TL_CUDA_CLUSTER");
  l90.clusters = !(cluster_env && std::string(cluster_env) == "0");
  if (lo.async_copies && (tma || wgmma) && std::find(archs.begin(), archs.end(), "sm_90a") != archs.end()) {
    l90.tma_copies = tma;
    if (wgmma) l90.gemm = gpu::GemmStrategy::kWgmma;
    StatusOr<gpu::SimtKernel> kt = gpu::LowerToSimt(f, l90);
    if (!kt.ok()) return kt.status();
    if (!kt->tensor_maps.empty() || gpu::HasWgmma(kt->body)) {
      StatusOr<CudaSource> st = PrintCuda(*kt);
      if (!st.ok()) return st.status();
      if (!options.emit_source_dir.empty()) {
        std::ofstream(std::filesystem::path(options.emit_source_dir) / (f.name + ".sm_90a.cu")) << st->source;
      }
      k_90 = std::move(*kt);
      src_90 = std::move(*st);
    } else {
      for (const std::string& n : kt->notes) {
        if (n.find("not wgmma") != std::string::npos) why_not_90.push_back(n);
      }
    }
  }
  std::string ptx_dropped;  // why the implied PTX is not in the bundle ("" when it is)
  if (!k_all.ok()) {
    if (!k_90) return k_all.status();  // sm_90a took the shared lowering, which failed
    ptx_dropped = "compute_80 PTX not built (implied by sm_90a): " + k_all.status().message();
    archs.erase(std::remove(archs.begin(), archs.end(), std::string("compute_80")), archs.end());
    if (options.log) options.log(f.name + ": " + ptx_dropped);
  }
  std::vector<std::unique_ptr<tl::bundle::VariantT>> out;
  for (const std::string& arch : archs) {
    const bool own90 = arch == "sm_90a" && k_90;
    const gpu::SimtKernel* k = own90 ? &*k_90 : &*k_all;
    const CudaSource* src = own90 ? &*src_90 : &*src_all;
    StatusOr<CompiledCode> code = tc.Compile(src->source, f.name, arch);
    if (!code.ok()) {
      return Status(code.status().code(), passes::Where(f, f.loc, ("CUDA " + arch + ": " + code.status().message()).c_str()));
    }
    if (options.log) {
      options.log(f.name + " " + arch + ": " + std::to_string(code->bytes.size()) + " bytes" +
                  (code->registers >= 0 ? ", " + std::to_string(code->registers) + " registers" : std::string()));
    }
    const bool ptx = arch.rfind("compute_", 0) == 0;
    auto v = std::make_unique<tl::bundle::VariantT>();
    v->id = "cuda." + arch;
    v->backend = tl::bundle::Backend::CUDA;
    v->code_kind = ptx ? tl::bundle::CodeKind::PTX : tl::bundle::CodeKind::CUBIN;
    v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
    v->requires_->arch = arch;
    v->requires_->isa_version = ptx ? PtxIsaVersion(code->bytes) : 0;
    v->requires_->shared_bytes = static_cast<uint32_t>(k->shared_bytes);
    v->requires_->threads_per_block = static_cast<uint32_t>(k->threads);
    v->entry_point = f.name;
    v->payload = writer.AddPayload(code->bytes);
    v->launch = std::make_unique<tl::bundle::LaunchT>();
    v->launch->block.assign(k->block.begin(), k->block.end());
    for (size_t i = 0; i < 3; ++i) {
      auto g = std::make_unique<tl::bundle::GridExprT>();
      if (i < k->grid.size()) {
        StatusOr<std::vector<int64_t>> c = passes::CompileGridExpr(k->grid[i], f);
        if (!c.ok()) return c.status();
        g->code = std::move(*c);
      } else {
        g->code = {0, 1};
      }
      v->launch->grid.push_back(std::move(g));
    }
    v->launch->dynamic_shared_bytes = static_cast<uint32_t>(k->shared_bytes);
    v->launch->warp_size = 32;
    // A cubin's parameter offsets are the ones ptxas chose (see
    // cubin_params.h: a tensor map's offset depends on the arch's constant
    // bank base); the PTX keeps the printed layout (scalars and pointers
    // only, which every base aligns alike).
    std::vector<ParamSlot> slots = src->slots;
    uint32_t param_buffer_bytes = src->param_buffer_bytes;
    if (!ptx && !slots.empty()) {  // a kernel without parameters has no KPARAM_INFO to read
      StatusOr<CubinParamLayout> real = ReadCubinParamLayout(code->bytes, f.name);
      if (!real.ok()) return Status(StatusCode::kInternal, passes::Where(f, f.loc, ("CUDA " + arch + ": " + real.status().message()).c_str()));
      if (real->params.size() != slots.size()) {
        return Status(StatusCode::kInternal,
                      passes::Where(f, f.loc, ("CUDA " + arch + ": the cubin has " + std::to_string(real->params.size()) +
                                               " parameters, the printed signature " + std::to_string(slots.size())).c_str()));
      }
      for (size_t i = 0; i < slots.size(); ++i) {
        if (real->params[i].size != slots[i].size) {
          return Status(StatusCode::kInternal,
                        passes::Where(f, f.loc, ("CUDA " + arch + ": cubin parameter " + std::to_string(i) + " has " +
                                                 std::to_string(real->params[i].size) + " bytes, the printed signature " +
                                                 std::to_string(slots[i].size)).c_str()));
        }
        slots[i].offset = real->params[i].offset;
      }
      param_buffer_bytes = real->buffer_bytes;
    }
    for (const ParamSlot& s : slots) {
      auto ps = std::make_unique<tl::bundle::ParamSlotT>();
      ps->param = static_cast<int16_t>(s.param);
      ps->offset = s.offset;
      ps->size = s.size;
      ps->align = s.align;
      ps->symbol = static_cast<int16_t>(s.symbol);
      ps->tensor_map = static_cast<int16_t>(s.tensor_map);
      v->launch->param_slots.push_back(std::move(ps));
    }
    for (const gpu::TensorMapDesc& m : k->tensor_maps) {
      auto tm = std::make_unique<tl::bundle::TensorMapT>();
      tm->param = static_cast<uint16_t>(m.param);  // params come first, in signature order
      tm->box.assign(m.box.begin(), m.box.end());
      tm->swizzle = static_cast<uint8_t>(m.swizzle);
      v->launch->tensor_maps.push_back(std::move(tm));
    }
    v->launch->param_buffer_bytes = param_buffer_bytes;
    // Vectorized copies need aligned tensor bases: checked at launch.
    for (const auto& [name, align] : k->param_align) {
      for (size_t p = 0; p < f.params.size(); ++p) {
        if (f.params[p].name != name) continue;
        auto g = std::make_unique<tl::bundle::GuardT>();
        g->param = static_cast<uint16_t>(p);
        g->op = tl::bundle::GuardOp::PTR_ALIGNED;
        g->value = align;
        v->guards.push_back(std::move(g));
      }
    }
    v->build_attrs.push_back(KV("cuda.compiler", code->tool));
    // The lowering this variant was compiled from (which gemm instruction
    // each gemm got, and why, is in the gpu.note.* attributes).
    v->build_attrs.push_back(KV("gpu.gemm_strategy", gpu::GemmStrategyName(own90 ? l90.gemm : lo.gemm)));
    if (code->registers >= 0) {
      v->build_attrs.push_back(KV("ptxas.registers", std::to_string(code->registers)));
      v->build_attrs.push_back(KV("ptxas.shared_bytes", std::to_string(code->shared_bytes)));
      v->build_attrs.push_back(KV("ptxas.spill_stores", std::to_string(code->spill_stores)));
      v->build_attrs.push_back(KV("ptxas.spill_loads", std::to_string(code->spill_loads)));
      v->build_attrs.push_back(KV("ptxas.stack_bytes", std::to_string(code->stack_bytes)));
    }
    v->build_attrs.push_back(KV("gpu.dynamic_shared_bytes", std::to_string(k->shared_bytes)));
    if (k->cluster > 1) v->build_attrs.push_back(KV("gpu.cluster_dims", std::to_string(k->cluster) + ",1,1"));
    for (size_t i = 0; i < k->notes.size(); ++i) v->build_attrs.push_back(KV("gpu.note." + std::to_string(i), k->notes[i]));
    if (!ptx_dropped.empty()) v->build_attrs.push_back(KV("cuda.ptx_dropped", ptx_dropped));
    if (arch == "sm_90a" && !own90) {  // why the wgmma lowering was not used
      for (size_t i = 0; i < why_not_90.size(); ++i) v->build_attrs.push_back(KV("gpu.wgmma_note." + std::to_string(i), why_not_90[i]));
    }
    std::sort(v->build_attrs.begin(), v->build_attrs.end(), [](const auto& a, const auto& b) { return a->key < b->key; });
    out.push_back(std::move(v));
  }
  return out;
}

StatusOr<std::vector<uint8_t>> BuildCudaBundle(const std::vector<ir::Function>& functions,
                                               const CudaBuildOptions& options) {
  StatusOr<CudaToolchain> tc = CudaToolchain::Create();
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
    StatusOr<std::vector<std::unique_ptr<tl::bundle::VariantT>>> vs = MakeCudaVariants(f, *tc, options, writer);
    if (!vs.ok()) return vs.status();
    for (auto& v : *vs) kernel->variants.push_back(std::move(v));
    Status added = writer.AddKernel(std::move(kernel));
    if (!added.ok()) return added;
  }
  return writer.Finish();
}

}  // namespace tl::codegen::cuda
