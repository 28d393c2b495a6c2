// The Vulkan device: loading, launching, memory and streams. See
// vulkan_device.h for the design; the risk each check guards against is named
// where the check is. The VkDevice and its shared state: vulkan_context.h.
#include "vulkan_device.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "spirv_module.h"
#include "vulkan_context.h"

namespace tl::rt {
namespace vk {

namespace {

// Pipeline creation slower than this is logged as a warning.
constexpr double kSlowPipelineMs = 2000.0;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

bool EnvTrue(const char* v) { return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0); }

std::string SpirvVersionText(uint32_t x10) { return Format("SPIR-V %u.%u", x10 / 10, x10 % 10); }

//===----------------------------------------------------------------------===//
// Executables and streams
//===----------------------------------------------------------------------===//

class VulkanExecutable : public Executable {
 public:
  explicit VulkanExecutable(std::shared_ptr<Context> ctx) : ctx_(std::move(ctx)) {}
  ~VulkanExecutable() override {
    const DeviceFns& f = ctx_->fn();
    if (pipeline) f.vkDestroyPipeline(ctx_->device(), pipeline, nullptr);
    if (layout) f.vkDestroyPipelineLayout(ctx_->device(), layout, nullptr);
    if (set_layout) f.vkDestroyDescriptorSetLayout(ctx_->device(), set_layout, nullptr);
  }
  std::string LoadNote() const override { return note; }

  std::shared_ptr<Context> ctx_;
  std::string kernel_name, variant_id;
  std::vector<std::string> param_names, symbol_names;
  std::vector<tl_dtype_t> param_dtypes;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  std::vector<LoadRequest::VkBindingSlot> bindings;
  std::vector<LoadRequest::VkPushSlot> push;
  uint32_t push_bytes = 0;
  std::string note;
};

class VulkanStream : public Stream {
 public:
  VulkanStream(std::shared_ptr<Context> ctx, std::unique_ptr<Lane> lane) : ctx_(std::move(ctx)), lane_(std::move(lane)) {}
  ~VulkanStream() override { lane_.reset(); }  // the lane waits for queued work
  Status Synchronize(uint64_t timeout_ns) override { return lane_->WaitAll(timeout_ns); }
  Lane* lane() const { return lane_.get(); }
  Context* ctx() const { return ctx_.get(); }

 private:
  std::shared_ptr<Context> ctx_;  // declared first: destroyed after the lane
  std::unique_ptr<Lane> lane_;
};

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

class VulkanDevice : public Device {
 public:
  VulkanDevice(DeviceDesc desc, PhysicalInfo info, std::shared_ptr<const Instance> instance,
               const BackendOptions& options)
      : info_(std::move(info)), instance_(std::move(instance)), cache_dir_(options.cpu_cache_dir),
        logger_(options.logger) {
    overrides_.no_push_descriptors = EnvTrue(getenv("TL_VULKAN_NO_PUSH_DESCRIPTORS"));
    overrides_.staging_only = EnvTrue(getenv("TL_VULKAN_STAGING_ONLY"));
    desc_ = std::move(desc);
    desc_.flags |= TL_DEVICE_FLAG_CAN_LAUNCH;
    size_control_ok_ = info_.size_control &&
                       (info_.has_f13 ? info_.f13.subgroupSizeControl : info_.size_control_features.subgroupSizeControl) &&
                       (info_.size_control_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  }

  StatusOr<std::shared_ptr<Executable>> Load(const LoadRequest& request) override;
  Status Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) override;
  StatusOr<void*> AllocateMemory(size_t size) override;
  void FreeMemory(void* pointer) override;
  Status CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) override;
  StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  StatusOr<std::unique_ptr<Stream>> WrapStream(void* native) override;
  Status CheckImport(void* pointer, size_t size) override;

 private:
  // The VkDevice, created on the first call (the same failure on every later
  // call if that failed).
  StatusOr<std::shared_ptr<Context>> Ctx();
  Status CheckLimits(const LoadRequest& r, const SpirvInfo& module, const std::string& where) const;
  Status CheckLayout(const LoadRequest& r, const std::string& where) const;
  StatusOr<VkPipeline> CreatePipeline(Context& ctx, const LoadRequest& r, VkPipelineLayout layout,
                                      const std::string& where, std::string* note);
  // Records a copy through a staging buffer on `lane`.
  Status StagedCopy(Context& ctx, Lane* lane, const std::shared_ptr<Allocation>& a, uint64_t offset, void* host_dst,
                    const void* host_src, uint64_t size, const std::string& what);

  PhysicalInfo info_;
  bool size_control_ok_ = false;  // a required subgroup size can be pinned for compute
  std::shared_ptr<const Instance> instance_;
  std::string cache_dir_;
  const Logger* logger_;
  Context::Overrides overrides_;  // TL_VULKAN_NO_PUSH_DESCRIPTORS / _STAGING_ONLY, read at runtime creation
  std::mutex ctx_mu_;
  bool tried_ = false;
  std::shared_ptr<Context> ctx_;
  Status ctx_status_;
};

StatusOr<std::shared_ptr<Context>> VulkanDevice::Ctx() {
  std::lock_guard<std::mutex> lock(ctx_mu_);
  if (!tried_) {
    tried_ = true;
    auto ctx = std::make_shared<Context>(instance_, info_, desc_.name, logger_);
    ctx_status_ = ctx->Init(cache_dir_, overrides_);
    if (ctx_status_.ok()) ctx_ = std::move(ctx);
  }
  if (!ctx_) return ctx_status_;
  return ctx_;
}

Status VulkanDevice::CheckLimits(const LoadRequest& r, const SpirvInfo& module, const std::string& where) const {
  const VkPhysicalDeviceLimits& l = info_.props.limits;
  static const char kAxis[3] = {'x', 'y', 'z'};
  for (int a = 0; a < 3; ++a) {
    if (r.block[a] > l.maxComputeWorkGroupSize[a]) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: workgroup size %c is %u; the device's maxComputeWorkGroupSize[%d] is %u", where.c_str(),
                           kAxis[a], r.block[a], a, l.maxComputeWorkGroupSize[a]));
    }
  }
  const uint64_t invocations = uint64_t{r.block[0]} * r.block[1] * r.block[2];
  if (invocations > l.maxComputeWorkGroupInvocations) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: workgroup (%u, %u, %u) has %" PRIu64
                         " invocations; the device's maxComputeWorkGroupInvocations is %u",
                         where.c_str(), r.block[0], r.block[1], r.block[2], invocations,
                         l.maxComputeWorkGroupInvocations));
  }
  const uint64_t manifest_shared = std::max<uint64_t>(uint64_t{r.static_shared_bytes} + r.dynamic_shared_bytes,
                                                      r.required_shared_bytes);
  if (manifest_shared > l.maxComputeSharedMemorySize) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: needs %" PRIu64 " bytes of workgroup (shared) memory; the device's "
                         "maxComputeSharedMemorySize is %u",
                         where.c_str(), manifest_shared, l.maxComputeSharedMemorySize));
  }
  if (module.workgroup_bytes > l.maxComputeSharedMemorySize) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: the SPIR-V module declares %" PRIu64 " bytes of Workgroup variables (the bundle says %" PRIu64
                         "); the device's maxComputeSharedMemorySize is %u",
                         where.c_str(), module.workgroup_bytes, manifest_shared, l.maxComputeSharedMemorySize));
  }
  uint32_t push_end = std::max(r.vk_push_bytes, r.required_push_constant_bytes);
  for (const auto& p : r.vk_push) push_end = std::max<uint32_t>(push_end, p.offset + p.size);
  if (push_end > l.maxPushConstantsSize) {
    return Status(StatusCode::kFailedPrecondition,
                  Format("%s: needs %u bytes of push constants; the device's maxPushConstantsSize is %u",
                         where.c_str(), push_end, l.maxPushConstantsSize));
  }
  if (r.required_subgroup_size != 0) {
    const uint32_t s = r.required_subgroup_size;
    const uint32_t lo = desc_.limits.subgroup_min, hi = desc_.limits.subgroup_max;
    if (s < lo || s > hi) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: needs subgroup size %u; the device's subgroup sizes are %u..%u", where.c_str(), s, lo,
                           hi));
    }
    if (lo != hi && !size_control_ok_) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: needs subgroup size %u; the device varies it between %u and %u and cannot pin it for "
                           "compute (no subgroup size control)",
                           where.c_str(), s, lo, hi));
    }
    if (lo != hi && info_.size_control_props.maxComputeWorkgroupSubgroups &&
        invocations > uint64_t{s} * info_.size_control_props.maxComputeWorkgroupSubgroups) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: %" PRIu64 " invocations need more than the device's maxComputeWorkgroupSubgroups (%u) "
                           "subgroups of %u",
                           where.c_str(), invocations, info_.size_control_props.maxComputeWorkgroupSubgroups, s));
    }
  }
  return Status::Ok();
}

Status VulkanDevice::CheckLayout(const LoadRequest& r, const std::string& where) const {
  std::vector<int> seen_binding;
  for (size_t i = 0; i < r.vk_bindings.size(); ++i) {
    const auto& b = r.vk_bindings[i];
    if (b.descriptor_type != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER || b.set != 0) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: vk_bindings[%zu] is set %u descriptor type %u; only set 0 storage buffers (type %d) are "
                           "supported",
                           where.c_str(), i, b.set, b.descriptor_type, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER));
    }
    if (b.param < 0 || static_cast<uint32_t>(b.param) >= r.param_count) {
      return Status(StatusCode::kInvalidArgument, Format("%s: vk_bindings[%zu] names parameter %d of %u", where.c_str(),
                                                         i, b.param, r.param_count));
    }
    for (size_t j = 0; j < i; ++j) {
      if (r.vk_bindings[j].binding == b.binding) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: vk_bindings[%zu] and [%zu] both use binding %u", where.c_str(), j, i, b.binding));
      }
    }
  }
  for (size_t i = 0; i < r.vk_push.size(); ++i) {
    const auto& p = r.vk_push[i];
    if (uint64_t{p.offset} + p.size > r.vk_push_bytes) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: vk_push[%zu] [%u, +%u) exceeds vk_push_bytes %u", where.c_str(), i, p.offset, p.size,
                           r.vk_push_bytes));
    }
    if (p.param >= 0) {
      if (static_cast<uint32_t>(p.param) >= r.param_count || (p.size != 1 && p.size != 2 && p.size != 4 && p.size != 8)) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: vk_push[%zu] for parameter %d of %u has %u bytes (1, 2, 4 or 8)", where.c_str(), i,
                             p.param, r.param_count, p.size));
      }
    } else if (p.param == -1) {
      if (p.size != 4 * r.symbol_names.size()) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: vk_push[%zu] holds %u bytes of shape symbols; the kernel has %zu symbols (4 bytes "
                             "each)",
                             where.c_str(), i, p.size, r.symbol_names.size()));
      }
    } else {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: vk_push[%zu] names parameter %d", where.c_str(), i, p.param));
    }
  }
  return Status::Ok();
}

StatusOr<VkPipeline> VulkanDevice::CreatePipeline(Context& ctx, const LoadRequest& r, VkPipelineLayout layout,
                                                  const std::string& where, std::string* note) {
  const DeviceFns& f = ctx.fn();
  auto mi = Make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  // The payload vector's storage is at least 4-byte aligned (operator new).
  mi.codeSize = r.code.size();
  mi.pCode = reinterpret_cast<const uint32_t*>(r.code.data());
  VkShaderModule module = VK_NULL_HANDLE;
  if (VkResult res = f.vkCreateShaderModule(ctx.device(), &mi, nullptr, &module); res != VK_SUCCESS) {
    return ctx.Error(StatusCode::kInvalidArgument, "loading " + where, "vkCreateShaderModule", res);
  }
  auto required = Make<VkPipelineShaderStageRequiredSubgroupSizeCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO);
  auto ci = Make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = r.entry_point.c_str();
  if (r.required_subgroup_size && ctx.subgroup_size_control() &&
      desc_.limits.subgroup_min != desc_.limits.subgroup_max) {
    required.requiredSubgroupSize = r.required_subgroup_size;
    ci.stage.pNext = &required;
  }
  ci.layout = layout;
  VkPipelineCreationFeedback feedback{};
  VkPipelineCreationFeedback stage_feedback{};
  auto fi = Make<VkPipelineCreationFeedbackCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO);
  fi.pPipelineCreationFeedback = &feedback;
  fi.pipelineStageCreationFeedbackCount = 1;
  fi.pPipelineStageCreationFeedbacks = &stage_feedback;
  if (ctx.creation_feedback()) ci.pNext = &fi;
  VkPipeline pipeline = VK_NULL_HANDLE;
  // The driver compiles the module here; a module it finds hard (NVIDIA took
  // minutes over one with large dynamically indexed private arrays) looks like
  // a hang from outside, so the start and a slow finish are logged.
  if (logger_ && logger_->enabled(TL_LOG_INFO)) {
    logger_->Log(TL_LOG_INFO, "vulkan: creating the compute pipeline of %s on '%s' (%zu SPIR-V words)",
                 where.c_str(), desc_.name.c_str(), r.code.size() / 4);
  }
  const auto start = std::chrono::steady_clock::now();
  VkResult res = f.vkCreateComputePipelines(ctx.device(), ctx.pipeline_cache(), 1, &ci, nullptr, &pipeline);
  const double ms = MsSince(start);
  if (ms > kSlowPipelineMs && logger_ && logger_->enabled(TL_LOG_WARNING)) {
    logger_->Log(TL_LOG_WARNING, "vulkan: the driver took %.1f s to create the compute pipeline of %s on '%s' "
                 "(%zu SPIR-V words)", ms / 1000.0, where.c_str(), desc_.name.c_str(), r.code.size() / 4);
  }
  f.vkDestroyShaderModule(ctx.device(), module, nullptr);
  if (res != VK_SUCCESS) {
    return ctx.Error(res == VK_ERROR_OUT_OF_DEVICE_MEMORY || res == VK_ERROR_OUT_OF_HOST_MEMORY
                         ? StatusCode::kResourceExhausted
                         : StatusCode::kInvalidArgument,
                     "creating the compute pipeline of " + where, "vkCreateComputePipelines", res);
  }
  *note = Format("SPIR-V compute pipeline created in %.2f ms", ms);
  if (ctx.creation_feedback() && (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT)) {
    *note += (feedback.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT)
                 ? " (pipeline cache hit)"
                 : " (pipeline cache miss)";
  }
  if (required.requiredSubgroupSize) *note += Format("; subgroup size pinned to %u", required.requiredSubgroupSize);
  return pipeline;
}

StatusOr<std::shared_ptr<Executable>> VulkanDevice::Load(const LoadRequest& r) {
  const std::string where = "kernel '" + r.kernel_name + "' variant '" + r.variant_id + "'";
  if (r.code_kind != TL_CODE_SPIRV) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: code kind %d cannot be loaded by the Vulkan backend (SPIR-V)", where.c_str(), r.code_kind));
  }
  auto module = InspectSpirv(r.code, r.entry_point, where);
  if (!module.ok()) return module.status();
  const uint32_t version_x10 = ((module->version >> 16) & 0xFF) * 10 + ((module->version >> 8) & 0xFF);
  const uint32_t max_x10 = MaxSpirvVersion(desc_.driver_version, desc_.vk_features);
  if (version_x10 > max_x10) {
    return Status(StatusCode::kIncompatible,
                  Format("%s: the module is %s; Vulkan device '%s' (API %u.%u) accepts up to %s", where.c_str(),
                         SpirvVersionText(version_x10).c_str(), desc_.name.c_str(),
                         VK_API_VERSION_MAJOR(desc_.driver_version), VK_API_VERSION_MINOR(desc_.driver_version),
                         SpirvVersionText(max_x10).c_str()));
  }
  // The arch is what selection matched against the device: a module newer
  // than it would be offered to devices that cannot run it.
  unsigned arch_major = 0, arch_minor = 0;
  char tail = 0;
  if (sscanf(r.arch.c_str(), "spirv%u.%u%c", &arch_major, &arch_minor, &tail) == 2 &&
      version_x10 > arch_major * 10 + arch_minor) {
    return Status(StatusCode::kInvalidArgument,
                  Format("%s: the module is %s but the variant's arch is '%s'", where.c_str(),
                         SpirvVersionText(version_x10).c_str(), r.arch.c_str()));
  }
  if (module->local_size_known) {
    for (int a = 0; a < 3; ++a) {
      if (module->local_size[a] != r.block[a]) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: the module's workgroup size (%u, %u, %u) differs from the bundle's block (%u, %u, %u)",
                             where.c_str(), module->local_size[0], module->local_size[1], module->local_size[2],
                             r.block[0], r.block[1], r.block[2]));
      }
    }
  }
  TL_RETURN_IF_ERROR(CheckLimits(r, *module, where));
  TL_RETURN_IF_ERROR(CheckLayout(r, where));
  auto ctx_or = Ctx();
  if (!ctx_or.ok()) return ctx_or.status();
  std::shared_ptr<Context> ctx = *ctx_or;
  for (const auto& token : r.features) {
    if (token.rfind("vk.ext.", 0) == 0 && !ctx->extension_enabled(token.substr(7))) {
      return Status(StatusCode::kFailedPrecondition,
                    Format("%s: requires %s, which this runtime does not enable on Vulkan device '%s' (it enables:%s)",
                           where.c_str(), token.substr(7).c_str(), desc_.name.c_str(), [&] {
                             std::string s;
                             for (const auto& e : ctx->enabled_extensions()) s += " " + e;
                             return s.empty() ? std::string(" none") : s;
                           }().c_str()));
    }
  }
  const DeviceFns& f = ctx->fn();
  auto exec = std::make_shared<VulkanExecutable>(ctx);
  exec->kernel_name = r.kernel_name;
  exec->variant_id = r.variant_id;
  exec->param_names = r.param_names;
  exec->param_dtypes = r.param_dtypes;
  exec->symbol_names = r.symbol_names;
  exec->bindings = r.vk_bindings;
  exec->push = r.vk_push;
  exec->push_bytes = r.vk_push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> lb;
  for (const auto& b : r.vk_bindings) {
    VkDescriptorSetLayoutBinding x{};
    x.binding = b.binding;
    x.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    x.descriptorCount = 1;
    x.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    lb.push_back(x);
  }
  auto li = Make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
  li.flags = ctx->push_descriptors() ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0;
  li.bindingCount = static_cast<uint32_t>(lb.size());
  li.pBindings = lb.data();
  if (VkResult res = f.vkCreateDescriptorSetLayout(ctx->device(), &li, nullptr, &exec->set_layout); res != VK_SUCCESS) {
    exec->set_layout = VK_NULL_HANDLE;
    return ctx->Error(StatusCode::kFailedPrecondition, "loading " + where, "vkCreateDescriptorSetLayout", res);
  }
  VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, r.vk_push_bytes};
  auto pli = Make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &exec->set_layout;
  pli.pushConstantRangeCount = r.vk_push_bytes ? 1 : 0;
  pli.pPushConstantRanges = &pr;
  if (VkResult res = f.vkCreatePipelineLayout(ctx->device(), &pli, nullptr, &exec->layout); res != VK_SUCCESS) {
    exec->layout = VK_NULL_HANDLE;
    return ctx->Error(StatusCode::kFailedPrecondition, "loading " + where, "vkCreatePipelineLayout", res);
  }
  std::string note;
  auto pipeline = CreatePipeline(*ctx, r, exec->layout, where, &note);
  if (!pipeline.ok()) return pipeline.status();
  exec->pipeline = *pipeline;
  ctx->PersistPipelineCache();
  exec->note = note + Format("; %zu storage buffers (%s), %u push-constant bytes, %" PRIu64
                             " B workgroup memory in the module; %s",
                             r.vk_bindings.size(), ctx->push_descriptors() ? "push descriptors" : "descriptor pool",
                             r.vk_push_bytes, module->workgroup_bytes, ctx->cache_note().c_str());
  if (logger_ && logger_->enabled(TL_LOG_INFO)) {
    logger_->Log(TL_LOG_INFO, "vulkan: loaded %s on '%s': %s", where.c_str(), desc_.name.c_str(), exec->note.c_str());
  }
  return std::shared_ptr<Executable>(std::move(exec));
}

Status VulkanDevice::Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) {
  auto* exec = static_cast<VulkanExecutable*>(executable.get());
  Context& ctx = *exec->ctx_;
  const DeviceFns& f = ctx.fn();
  const std::string where = "kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'";
  if (request.grid[0] == 0 || request.grid[1] == 0 || request.grid[2] == 0) return Status::Ok();
  auto arg_name = [&](size_t p) {
    return Format("%s argument %zu '%s'", where.c_str(), p, p < exec->param_names.size() ? exec->param_names[p].c_str() : "?");
  };
  // Push constants: scalars and shape symbols, laid out as the bundle says.
  std::vector<uint8_t> push(exec->push_bytes, 0);
  for (const auto& p : exec->push) {
    if (p.param >= 0) {
      const size_t i = static_cast<size_t>(p.param);
      if (i >= request.is_scalar.size() || !request.is_scalar[i]) {
        return Status(StatusCode::kInvalidArgument,
                      Format("%s: vk_push names parameter %zu, which is not a scalar argument", where.c_str(), i));
      }
      // Narrower scalars take their slot's 4 (or 8) bytes: signed integers
      // sign-extended, the rest (unsigned, bool, f16/bf16 patterns) zero-
      // extended (VULKAN_CONTRACT.md); the slot holds the value zero-padded.
      uint64_t raw = request.scalar_slots[i];
      if (i < exec->param_dtypes.size()) {
        const tl_dtype_t dt = exec->param_dtypes[i];
        const uint32_t bits = uint32_t{dt.bits} * std::max<uint32_t>(dt.lanes, 1);
        if (dt.code == TL_DTYPE_INT && bits > 0 && bits < 64 && (raw >> (bits - 1)) & 1) raw |= ~uint64_t{0} << bits;
      }
      memcpy(push.data() + p.offset, &raw, p.size);  // little endian: the low bytes
    } else {
      for (size_t s = 0; s < request.symbols.size() && 4 * s < p.size; ++s) {
        const int64_t v = request.symbols[s];
        if (v < INT32_MIN || v > INT32_MAX) {
          return Status(StatusCode::kOutOfRange,
                        Format("%s: shape symbol '%s' is %" PRId64 "; Vulkan kernels take symbols as int32 (at most %d)",
                               where.c_str(), s < exec->symbol_names.size() ? exec->symbol_names[s].c_str() : "?", v,
                               INT32_MAX));
        }
        const int32_t v32 = static_cast<int32_t>(v);
        memcpy(push.data() + p.offset + 4 * s, &v32, 4);
      }
    }
  }
  // Descriptors: each bound tensor's (VkBuffer, offset).
  Submission sub;
  sub.exec = executable;
  std::vector<VkDescriptorBufferInfo> infos(exec->bindings.size());
  const uint64_t align = std::max<uint64_t>(info_.props.limits.minStorageBufferOffsetAlignment, 1);
  const uint64_t max_range = info_.props.limits.maxStorageBufferRange;
  for (size_t k = 0; k < exec->bindings.size(); ++k) {
    const size_t p = static_cast<size_t>(exec->bindings[k].param);
    if (p >= request.tensor_pointers.size() || request.is_scalar[p]) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: binding %u names parameter %zu, which is not a tensor argument", where.c_str(),
                           exec->bindings[k].binding, p));
    }
    const uint64_t address = reinterpret_cast<uintptr_t>(request.tensor_pointers[p]);
    const uint64_t bytes = p < request.tensor_bytes.size() ? request.tensor_bytes[p] : 0;
    uint64_t offset = 0;
    std::string why;
    auto a = ctx.Lookup(address, bytes, &offset, &why);
    if (!a) return Status(StatusCode::kInvalidArgument, arg_name(p) + ": " + why);
    if (offset % align != 0) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: offset %" PRIu64 " inside its buffer is not a multiple of the device's "
                           "minStorageBufferOffsetAlignment (%" PRIu64 ")",
                           arg_name(p).c_str(), offset, align));
    }
    const uint64_t range = a->buffer_bytes - offset;
    if (bytes > max_range) {
      return Status(StatusCode::kInvalidArgument,
                    Format("%s: %" PRIu64 " bytes exceed the device's maxStorageBufferRange (%" PRIu64 ")",
                           arg_name(p).c_str(), bytes, max_range));
    }
    infos[k].buffer = a->buffer;
    infos[k].offset = offset;
    infos[k].range = std::min<uint64_t>(range, max_range / 4 * 4);
    sub.allocations.push_back(std::move(a));
  }
  std::vector<VkWriteDescriptorSet> writes(exec->bindings.size());
  for (size_t k = 0; k < writes.size(); ++k) {
    writes[k] = Make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    writes[k].dstBinding = exec->bindings[k].binding;
    writes[k].descriptorCount = 1;
    writes[k].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[k].pBufferInfo = &infos[k];
  }
  VkDescriptorSet set = VK_NULL_HANDLE;
  auto release_pools = [&] {
    if (sub.descriptor_pool) f.vkDestroyDescriptorPool(ctx.device(), sub.descriptor_pool, nullptr);
    if (sub.query_pool) f.vkDestroyQueryPool(ctx.device(), sub.query_pool, nullptr);
    sub.descriptor_pool = VK_NULL_HANDLE;
    sub.query_pool = VK_NULL_HANDLE;
  };
  if (!ctx.push_descriptors() && !writes.empty()) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(writes.size())};
    auto pi = Make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    pi.maxSets = 1;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    if (VkResult r = f.vkCreateDescriptorPool(ctx.device(), &pi, nullptr, &sub.descriptor_pool); r != VK_SUCCESS) {
      sub.descriptor_pool = VK_NULL_HANDLE;
      return ctx.Error(StatusCode::kResourceExhausted, "launching " + where, "vkCreateDescriptorPool", r);
    }
    auto ai = Make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    ai.descriptorPool = sub.descriptor_pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &exec->set_layout;
    if (VkResult r = f.vkAllocateDescriptorSets(ctx.device(), &ai, &set); r != VK_SUCCESS) {
      release_pools();
      return ctx.Error(StatusCode::kResourceExhausted, "launching " + where, "vkAllocateDescriptorSets", r);
    }
    for (auto& w : writes) w.dstSet = set;
    f.vkUpdateDescriptorSets(ctx.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  // Kernel time by timestamp queries: synchronous launches with debug logging.
  const bool timed = !stream && logger_ && logger_->enabled(TL_LOG_DEBUG) && info_.timestamp_valid_bits != 0;
  if (timed) {
    auto qi = Make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    if (f.vkCreateQueryPool(ctx.device(), &qi, nullptr, &sub.query_pool) != VK_SUCCESS) sub.query_pool = VK_NULL_HANDLE;
  }
  SyncLane sync(&ctx);
  Lane* lane = nullptr;
  if (stream) {
    lane = static_cast<VulkanStream*>(stream)->lane();
  } else {
    if (Status st = sync.Take(); !st.ok()) {
      release_pools();
      return st;
    }
    lane = sync.get();
  }
  if (Status st = lane->Begin(&sub, "launching " + where); !st.ok()) {
    release_pools();
    return st;
  }
  VkCommandBuffer cmd = sub.cmd;
  if (sub.query_pool) {
    f.vkCmdResetQueryPool(cmd, sub.query_pool, 0, 2);
    f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, sub.query_pool, 0);
  }
  f.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, exec->pipeline);
  if (!writes.empty()) {
    if (ctx.push_descriptors()) {
      f.vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, exec->layout, 0,
                                  static_cast<uint32_t>(writes.size()), writes.data());
    } else {
      f.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, exec->layout, 0, 1, &set, 0, nullptr);
    }
  }
  if (!push.empty()) {
    f.vkCmdPushConstants(cmd, exec->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push.size()),
                         push.data());
  }
  f.vkCmdDispatch(cmd, request.grid[0], request.grid[1], request.grid[2]);
  if (sub.query_pool) {
    f.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, sub.query_pool, 1);
    const VkQueryPool qp = sub.query_pool;
    const double period = info_.props.limits.timestampPeriod;
    const uint32_t bits = info_.timestamp_valid_bits;
    const uint32_t grid[3] = {request.grid[0], request.grid[1], request.grid[2]};
    const Logger* logger = logger_;
    VkDevice device = ctx.device();
    auto get = f.vkGetQueryPoolResults;
    sub.on_complete.push_back([=] {
      uint64_t ts[2] = {0, 0};
      if (get(device, qp, 0, 2, sizeof(ts), ts, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT) != VK_SUCCESS) return;
      const uint64_t mask = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      const double ms = static_cast<double>((ts[1] - ts[0]) & mask) * period / 1e6;
      logger->Log(TL_LOG_DEBUG, "vulkan: %s grid (%u, %u, %u) ran in %.3f ms (timestamp queries)", where.c_str(),
                  grid[0], grid[1], grid[2], ms);
    });
  }
  TL_RETURN_IF_ERROR(lane->Submit(std::move(sub), "launching " + where));
  if (stream) return Status::Ok();
  // Synchronous: wait, so that a failure inside the kernel is this call's error.
  return lane->WaitAll(UINT64_MAX).Annotate("running " + where);
}

StatusOr<void*> VulkanDevice::AllocateMemory(size_t size) {
  auto ctx = Ctx();
  if (!ctx.ok()) return ctx.status();
  auto a = (*ctx)->Allocate(size);
  if (!a.ok()) return a.status();
  return reinterpret_cast<void*>(static_cast<uintptr_t>((*a)->va));
}

void VulkanDevice::FreeMemory(void* pointer) {
  std::shared_ptr<Context> ctx;
  {
    std::lock_guard<std::mutex> lock(ctx_mu_);
    ctx = ctx_;
  }
  if (pointer && ctx) ctx->Free(reinterpret_cast<uintptr_t>(pointer));
}

Status VulkanDevice::CheckImport(void* pointer, size_t size) {
  auto ctx = Ctx();
  if (!ctx.ok()) return ctx.status();
  uint64_t offset = 0;
  std::string why;
  if (!(*ctx)->Lookup(reinterpret_cast<uintptr_t>(pointer), size, &offset, &why)) {
    return Status(StatusCode::kInvalidArgument,
                  "tl_buffer_import: argument 'device_pointer': " + why +
                      " (on Vulkan, import only ranges of this device's own buffers)");
  }
  return Status::Ok();
}

Status VulkanDevice::StagedCopy(Context& ctx, Lane* lane, const std::shared_ptr<Allocation>& a, uint64_t offset,
                                void* host_dst, const void* host_src, uint64_t size, const std::string& what) {
  // In pieces of at most kStagingChunkBytes, so that a large copy needs a
  // bounded staging buffer; each piece is one submission on `lane`.
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min<uint64_t>(size - done, kStagingChunkBytes);
    auto staging = ctx.AcquireStaging(n);
    if (!staging.ok()) return staging.status().Annotate(what);
    Submission sub;
    VkBufferCopy region{};
    region.size = n;
    if (host_src) {
      memcpy((*staging)->mapped, static_cast<const uint8_t*>(host_src) + done, n);
      region.dstOffset = offset + done;
    } else {
      region.srcOffset = offset + done;
    }
    TL_RETURN_IF_ERROR(lane->Begin(&sub, what));
    if (host_src) {
      ctx.fn().vkCmdCopyBuffer(sub.cmd, (*staging)->buffer, a->buffer, 1, &region);
    } else {
      ctx.fn().vkCmdCopyBuffer(sub.cmd, a->buffer, (*staging)->buffer, 1, &region);
      const uint8_t* from = (*staging)->mapped;
      uint8_t* to = static_cast<uint8_t*>(host_dst) + done;
      sub.on_complete.push_back([to, from, n] { memcpy(to, from, n); });
    }
    sub.allocations.push_back(a);
    sub.staging.push_back(std::move(staging.value()));
    TL_RETURN_IF_ERROR(lane->Submit(std::move(sub), what));
    done += n;
  }
  return Status::Ok();
}

Status VulkanDevice::CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  auto ctx_or = Ctx();
  if (!ctx_or.ok()) return ctx_or.status();
  Context& ctx = **ctx_or;
  const std::string what = Format("copying %zu bytes to Vulkan device address %p", size, device_dst);
  uint64_t offset = 0;
  std::string why;
  auto a = ctx.Lookup(reinterpret_cast<uintptr_t>(device_dst), size, &offset, &why);
  if (!a) return Status(StatusCode::kInvalidArgument, what + ": " + why);
  if (!stream && a->mapped) {
    // Mapped memory: after all work submitted so far, a plain memcpy.
    TL_RETURN_IF_ERROR(ctx.Wait(ctx.last_submitted(), UINT64_MAX, what));
    memcpy(a->mapped + offset, host_src, size);
    return Status::Ok();
  }
  if (stream) return StagedCopy(ctx, static_cast<VulkanStream*>(stream)->lane(), a, offset, nullptr, host_src, size, what);
  SyncLane sync(&ctx);
  TL_RETURN_IF_ERROR(sync.Take());
  TL_RETURN_IF_ERROR(StagedCopy(ctx, sync.get(), a, offset, nullptr, host_src, size, what));
  return sync.get()->WaitAll(UINT64_MAX);
}

Status VulkanDevice::CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) {
  if (size == 0) return Status::Ok();
  auto ctx_or = Ctx();
  if (!ctx_or.ok()) return ctx_or.status();
  Context& ctx = **ctx_or;
  const std::string what = Format("copying %zu bytes from Vulkan device address %p", size, device_src);
  uint64_t offset = 0;
  std::string why;
  auto a = ctx.Lookup(reinterpret_cast<uintptr_t>(device_src), size, &offset, &why);
  if (!a) return Status(StatusCode::kInvalidArgument, what + ": " + why);
  if (!stream && a->mapped) {
    TL_RETURN_IF_ERROR(ctx.Wait(ctx.last_submitted(), UINT64_MAX, what));
    memcpy(host_dst, a->mapped + offset, size);
    return Status::Ok();
  }
  if (stream) return StagedCopy(ctx, static_cast<VulkanStream*>(stream)->lane(), a, offset, host_dst, nullptr, size, what);
  SyncLane sync(&ctx);
  TL_RETURN_IF_ERROR(sync.Take());
  TL_RETURN_IF_ERROR(StagedCopy(ctx, sync.get(), a, offset, host_dst, nullptr, size, what));
  return sync.get()->WaitAll(UINT64_MAX);
}

StatusOr<std::unique_ptr<Stream>> VulkanDevice::CreateStream() {
  auto ctx = Ctx();
  if (!ctx.ok()) return ctx.status();
  auto lane = (*ctx)->NewLane();
  if (!lane.ok()) return lane.status();
  return std::unique_ptr<Stream>(std::make_unique<VulkanStream>(*ctx, std::move(lane.value())));
}

StatusOr<std::unique_ptr<Stream>> VulkanDevice::WrapStream(void*) {
  return Status(StatusCode::kUnimplemented,
                "tl_stream_wrap_native on Vulkan device '" + desc_.name +
                    "': Vulkan has no native stream object to wrap (the runtime owns its queue); use tl_stream_create");
}

}  // namespace
}  // namespace vk

std::unique_ptr<Device> CreateVulkanDevice(DeviceDesc desc, vk::PhysicalInfo info,
                                           std::shared_ptr<const vk::Instance> instance, const BackendOptions& options) {
  return std::make_unique<vk::VulkanDevice>(std::move(desc), std::move(info), std::move(instance), options);
}

}  // namespace tl::rt
