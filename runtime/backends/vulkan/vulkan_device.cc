// The Vulkan device: memory, loading, launching and streams. See
// vulkan_device.h for the design; the risk each check guards against is named
// where the check is.
#include "vulkan_device.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "../cpu/shared_object.h"
#include "pipeline_cache_file.h"
#include "spirv_module.h"

namespace tl::rt {
namespace vk {

namespace {

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Virtual device addresses: 0x56 in the top byte ('V'), an 8-bit id of the
// VkDevice (a process-wide counter, so that two devices, or the same device
// in two runtimes, hand out different addresses) in the next, 48 bits of
// offset. Bits 48..63 are not a sign extension of bit 47, so no such address
// is a valid x86-64 (or 48-bit AArch64) host pointer.
constexpr uint64_t kVaTag = 0x56ull << 56;
std::atomic<uint32_t> g_next_space{0};
constexpr int kVaOrdinalShift = 48;
constexpr uint64_t kVaSpace = uint64_t{1} << kVaOrdinalShift;
constexpr uint64_t kVaStart = uint64_t{1} << 32;
// Reservations are rounded to 64 KiB and followed by a 64 KiB gap, so that a
// pointer one past the end of a buffer never lands in the next one.
constexpr uint64_t kVaGranule = 64 * 1024;

// Staging buffers are cached in power-of-two sizes up to this total.
constexpr uint64_t kStagingCacheBytes = 64ull << 20;
constexpr uint64_t kStagingMinBytes = 64 * 1024;
// Copies through staging go in pieces of at most this size.
constexpr uint64_t kStagingChunkBytes = 16ull << 20;

bool EnvTrue(const char* v) { return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0); }

uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

// A zeroed Vulkan struct with its sType set.
template <typename T>
T Make(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

std::string SpirvVersionText(uint32_t x10) { return Format("SPIR-V %u.%u", x10 / 10, x10 % 10); }

}  // namespace

std::string ResultText(VkResult r) {
  const char* name = nullptr;
  switch (r) {
    case VK_SUCCESS: name = "VK_SUCCESS"; break;
    case VK_NOT_READY: name = "VK_NOT_READY"; break;
    case VK_TIMEOUT: name = "VK_TIMEOUT"; break;
    case VK_INCOMPLETE: name = "VK_INCOMPLETE"; break;
    case VK_ERROR_OUT_OF_HOST_MEMORY: name = "VK_ERROR_OUT_OF_HOST_MEMORY"; break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: name = "VK_ERROR_OUT_OF_DEVICE_MEMORY"; break;
    case VK_ERROR_INITIALIZATION_FAILED: name = "VK_ERROR_INITIALIZATION_FAILED"; break;
    case VK_ERROR_DEVICE_LOST: name = "VK_ERROR_DEVICE_LOST"; break;
    case VK_ERROR_MEMORY_MAP_FAILED: name = "VK_ERROR_MEMORY_MAP_FAILED"; break;
    case VK_ERROR_EXTENSION_NOT_PRESENT: name = "VK_ERROR_EXTENSION_NOT_PRESENT"; break;
    case VK_ERROR_FEATURE_NOT_PRESENT: name = "VK_ERROR_FEATURE_NOT_PRESENT"; break;
    case VK_ERROR_TOO_MANY_OBJECTS: name = "VK_ERROR_TOO_MANY_OBJECTS"; break;
    case VK_ERROR_INVALID_SHADER_NV: name = "VK_ERROR_INVALID_SHADER_NV"; break;
    case VK_ERROR_OUT_OF_POOL_MEMORY: name = "VK_ERROR_OUT_OF_POOL_MEMORY"; break;
    case VK_ERROR_FRAGMENTED_POOL: name = "VK_ERROR_FRAGMENTED_POOL"; break;
    case VK_ERROR_UNKNOWN: name = "VK_ERROR_UNKNOWN"; break;
    default: break;
  }
  return Format("%s (%d)", name ? name : "VkResult", static_cast<int>(r));
}

namespace {

class Context;

// One tl_buffer_allocate.
struct Allocation {
  Context* ctx = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t va = 0;
  uint64_t size = 0;          // requested bytes
  uint64_t buffer_bytes = 0;  // VkBuffer size (>= size, >= 4)
  uint64_t reserved = 0;      // virtual range taken, gap included
  uint8_t* mapped = nullptr;  // host-visible coherent memory, mapped for its lifetime
  ~Allocation();
};

// A host-visible buffer for copies.
struct Staging {
  Context* ctx = nullptr;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;
  uint64_t capacity = 0;
  ~Staging();
};

// One submitted command buffer and what must live until it completes.
struct Submission {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  uint64_t value = 0;
  std::vector<std::shared_ptr<Allocation>> allocations;
  std::vector<std::unique_ptr<Staging>> staging;
  std::vector<std::function<void()>> on_complete;  // run after completion (readbacks, timing)
  std::shared_ptr<Executable> exec;
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  VkQueryPool query_pool = VK_NULL_HANDLE;
};

class Lane;

// One VkDevice with its queue, timeline semaphore, allocation table, staging
// cache and pipeline cache. Shared by the device, its executables and streams.
class Context {
 public:
  Context(std::shared_ptr<const Instance> instance, const PhysicalInfo& info, std::string name, const Logger* logger)
      : instance_(std::move(instance)), info_(info), name_(std::move(name)), logger_(logger) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // `no_push`: do not use VK_KHR_push_descriptor even where present.
  Status Init(const std::string& cache_dir, bool no_push);

  const DeviceFns& fn() const { return fn_; }
  VkDevice device() const { return device_; }
  const PhysicalInfo& info() const { return info_; }
  const std::string& name() const { return name_; }
  const Logger* logger() const { return logger_; }
  bool push_descriptors() const { return push_descriptors_; }
  bool extension_enabled(const std::string& name) const {
    return std::find(enabled_extensions_.begin(), enabled_extensions_.end(), name) != enabled_extensions_.end();
  }
  const std::vector<std::string>& enabled_extensions() const { return enabled_extensions_; }
  bool subgroup_size_control() const { return subgroup_size_control_; }
  bool creation_feedback() const { return creation_feedback_; }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }
  const std::string& cache_note() const { return cache_note_; }

  // "<what> on Vulkan device 'llvmpipe': vkFoo failed with VK_ERROR_... (-2)".
  Status Error(StatusCode code, const std::string& what, const char* call, VkResult r) const {
    return Status(code, what + " on Vulkan device '" + name_ + "': " + call + " failed with " + ResultText(r));
  }

  // Queue.
  Status Submit(VkCommandBuffer cmd, uint64_t* value);
  Status Wait(uint64_t value, uint64_t timeout_ns, const std::string& what);
  uint64_t last_submitted() {
    std::lock_guard<std::mutex> lock(queue_mu_);
    return next_value_;
  }
  uint64_t completed() {
    uint64_t v = 0;
    if (fn_.vkGetSemaphoreCounterValue(device_, timeline_, &v) != VK_SUCCESS) return 0;
    return v;
  }

  // Memory.
  StatusOr<std::shared_ptr<Allocation>> Allocate(uint64_t size);
  void Free(uint64_t va);
  struct Ref {
    std::shared_ptr<Allocation> allocation;
    uint64_t offset = 0;
  };
  // The allocation holding [address, address + bytes); on failure "" and a
  // reason in `why` (no prefix: the caller names the argument).
  std::shared_ptr<Allocation> Lookup(uint64_t address, uint64_t bytes, uint64_t* offset, std::string* why);

  StatusOr<std::unique_ptr<Staging>> AcquireStaging(uint64_t size);
  void ReleaseStaging(std::unique_ptr<Staging> staging);

  // Lanes for synchronous calls.
  StatusOr<std::unique_ptr<Lane>> TakeLane();
  void ReturnLane(std::unique_ptr<Lane> lane);
  StatusOr<std::unique_ptr<Lane>> NewLane();

  // Writes the pipeline cache file when the driver's data grew.
  void PersistPipelineCache();

 private:
  StatusOr<std::pair<VkBuffer, VkDeviceMemory>> CreateBuffer(uint64_t bytes, bool host, uint8_t** mapped,
                                                             const char* what);
  int FindMemoryType(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const;

  std::shared_ptr<const Instance> instance_;
  PhysicalInfo info_;
  std::string name_;
  const Logger* logger_;
  DeviceFns fn_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  std::vector<std::string> enabled_extensions_;
  bool push_descriptors_ = false;
  bool subgroup_size_control_ = false;
  bool creation_feedback_ = false;

  std::mutex queue_mu_;
  uint64_t next_value_ = 0;  // last value signalled by a submission

  std::shared_mutex alloc_mu_;
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations_;  // by va
  uint64_t va_base_ = kVaTag | (uint64_t{g_next_space.fetch_add(1) & 0xFF} << kVaOrdinalShift);
  uint64_t next_va_ = kVaStart;

  std::mutex staging_mu_;
  std::multimap<uint64_t, std::unique_ptr<Staging>> staging_;  // by capacity
  uint64_t staging_bytes_ = 0;

  std::mutex lanes_mu_;
  std::vector<std::unique_ptr<Lane>> idle_lanes_;

  std::mutex cache_mu_;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  std::string cache_path_;  // "": not persisted
  std::string cache_note_;
  size_t cache_written_bytes_ = 0;
};

// A command pool and the submissions recorded from it that are still in
// flight: a stream's, or one checked out for a synchronous call. Used by one
// thread at a time.
class Lane {
 public:
  Lane(Context* ctx, VkCommandPool pool) : ctx_(ctx), pool_(pool) {}
  ~Lane() {
    (void)WaitAll(UINT64_MAX);
    if (!free_.empty()) ctx_->fn().vkFreeCommandBuffers(ctx_->device(), pool_, static_cast<uint32_t>(free_.size()), free_.data());
    ctx_->fn().vkDestroyCommandPool(ctx_->device(), pool_, nullptr);
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Opens a command buffer for `s`, recording the leading barrier.
  Status Begin(Submission* s, const std::string& what) {
    RetireCompleted();
    if (free_.empty()) {
      auto ai = Make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
      ai.commandPool = pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      VkCommandBuffer cmd = VK_NULL_HANDLE;
      if (VkResult r = ctx_->fn().vkAllocateCommandBuffers(ctx_->device(), &ai, &cmd); r != VK_SUCCESS) {
        return ctx_->Error(StatusCode::kResourceExhausted, what, "vkAllocateCommandBuffers", r);
      }
      free_.push_back(cmd);
    }
    s->cmd = free_.back();
    free_.pop_back();
    auto bi = Make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (VkResult r = ctx_->fn().vkBeginCommandBuffer(s->cmd, &bi); r != VK_SUCCESS) {
      free_.push_back(s->cmd);
      s->cmd = VK_NULL_HANDLE;
      return ctx_->Error(StatusCode::kInternal, what, "vkBeginCommandBuffer", r);
    }
    // Everything submitted to the queue before (any stream, any thread) is
    // complete and its writes visible before this command buffer's work.
    auto mb = Make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    ctx_->fn().vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                    nullptr, 0, nullptr);
    return Status::Ok();
  }

  // Closes `s` (barrier to host reads), submits it and keeps it until done.
  Status Submit(Submission&& s, const std::string& what) {
    auto mb = Make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    ctx_->fn().vkCmdPipelineBarrier(s.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                    VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    VkResult r = ctx_->fn().vkEndCommandBuffer(s.cmd);
    Status st = r == VK_SUCCESS ? ctx_->Submit(s.cmd, &s.value)
                                : ctx_->Error(StatusCode::kInternal, what, "vkEndCommandBuffer", r);
    if (!st.ok()) {
      Release(&s);
      return st.Annotate(what);
    }
    last_value_ = s.value;
    inflight_.push_back(std::move(s));
    return Status::Ok();
  }

  // Releases what a submission held (after completion, or when it was never
  // submitted).
  void Release(Submission* s) {
    if (s->cmd) {
      ctx_->fn().vkResetCommandBuffer(s->cmd, 0);
      free_.push_back(s->cmd);
      s->cmd = VK_NULL_HANDLE;
    }
    for (auto& st : s->staging) ctx_->ReleaseStaging(std::move(st));
    s->staging.clear();
    if (s->descriptor_pool) ctx_->fn().vkDestroyDescriptorPool(ctx_->device(), s->descriptor_pool, nullptr);
    if (s->query_pool) ctx_->fn().vkDestroyQueryPool(ctx_->device(), s->query_pool, nullptr);
    s->descriptor_pool = VK_NULL_HANDLE;
    s->query_pool = VK_NULL_HANDLE;
    s->allocations.clear();
    s->exec.reset();
  }

  void RetireCompleted() {
    if (inflight_.empty()) return;
    const uint64_t done = ctx_->completed();
    while (!inflight_.empty() && inflight_.front().value <= done) {
      Submission s = std::move(inflight_.front());
      inflight_.pop_front();
      for (auto& f : s.on_complete) f();
      Release(&s);
    }
  }

  // Waits for every submission of this lane; the first failure is returned
  // (and cleared).
  Status WaitAll(uint64_t timeout_ns) {
    if (!inflight_.empty()) {
      Status st = ctx_->Wait(last_value_, timeout_ns, "work on a stream");
      if (!st.ok()) {
        if (st.code() == StatusCode::kDeadlineExceeded) return st;
        // Device lost: nothing will complete; drop the work.
        while (!inflight_.empty()) {
          Release(&inflight_.front());
          inflight_.pop_front();
        }
        return st;
      }
      RetireCompleted();
    }
    Status out = error_;
    error_ = Status::Ok();
    return out;
  }

  Context* ctx() const { return ctx_; }

 private:
  Context* ctx_;
  VkCommandPool pool_;
  std::vector<VkCommandBuffer> free_;
  std::deque<Submission> inflight_;
  uint64_t last_value_ = 0;
  Status error_;
};

Allocation::~Allocation() {
  if (mapped) ctx->fn().vkUnmapMemory(ctx->device(), memory);
  if (buffer) ctx->fn().vkDestroyBuffer(ctx->device(), buffer, nullptr);
  if (memory) ctx->fn().vkFreeMemory(ctx->device(), memory, nullptr);
}

Staging::~Staging() {
  if (mapped) ctx->fn().vkUnmapMemory(ctx->device(), memory);
  if (buffer) ctx->fn().vkDestroyBuffer(ctx->device(), buffer, nullptr);
  if (memory) ctx->fn().vkFreeMemory(ctx->device(), memory, nullptr);
}

Context::~Context() {
  if (device_ == VK_NULL_HANDLE) return;
  fn_.vkDeviceWaitIdle(device_);
  idle_lanes_.clear();
  allocations_.clear();
  staging_.clear();
  if (pipeline_cache_) {
    PersistPipelineCache();
    fn_.vkDestroyPipelineCache(device_, pipeline_cache_, nullptr);
  }
  if (timeline_) fn_.vkDestroySemaphore(device_, timeline_, nullptr);
  fn_.vkDestroyDevice(device_, nullptr);
}

Status Context::Init(const std::string& cache_dir, bool no_push) {
  const Instance& in = *instance_;
  const VkPhysicalDeviceProperties& p = info_.props;
  if (info_.queue_family < 0) {
    return Status(StatusCode::kUnavailable, "Vulkan device '" + name_ + "' has no queue family with compute");
  }
  if (!info_.has_f12 || !info_.f12.timelineSemaphore) {
    return Status(StatusCode::kUnavailable,
                  Format("Vulkan device '%s' (API %u.%u) lacks timeline semaphores (Vulkan 1.2), which the launch "
                         "path needs",
                         name_.c_str(), VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion)));
  }
  // Features: everything supported, except robustness (it costs bounds
  // checks on every access, and the runtime checks ranges itself) and the
  // two below.
  VkPhysicalDeviceFeatures2 f2 = info_.f2;
  VkPhysicalDeviceVulkan11Features f11 = info_.f11;
  VkPhysicalDeviceVulkan12Features f12 = info_.f12;
  VkPhysicalDeviceVulkan13Features f13 = info_.f13;
  PhysicalDeviceCooperativeMatrixFeaturesKhr coopmat = info_.coopmat;
  VkPhysicalDeviceSubgroupSizeControlFeatures size_control = info_.size_control_features;
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float = info_.atomic_float;
  f2.features.robustBufferAccess = VK_FALSE;
  f13.robustImageAccess = VK_FALSE;
  // Debugging and content-protection modes that may cost performance.
  f11.protectedMemory = VK_FALSE;
  f12.bufferDeviceAddressCaptureReplay = VK_FALSE;
  coopmat.cooperativeMatrixRobustBufferAccess = VK_FALSE;
  void** tail = &f2.pNext;
  auto chain = [&](auto* s) {
    s->pNext = nullptr;
    *tail = s;
    tail = &s->pNext;
  };
  f2.pNext = nullptr;
  chain(&f11);
  chain(&f12);
  if (info_.has_f13) chain(&f13);
  if (info_.HasExtension(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) && !no_push) {
    enabled_extensions_.push_back(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  }
  if (info_.HasExtension("VK_KHR_cooperative_matrix") && coopmat.cooperativeMatrix) {
    enabled_extensions_.push_back("VK_KHR_cooperative_matrix");
    chain(&coopmat);
  }
  if (!info_.has_f13 && info_.HasExtension(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
    enabled_extensions_.push_back(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    chain(&size_control);
  }
  if (info_.HasExtension(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) {
    enabled_extensions_.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    chain(&atomic_float);
  }
  if (!info_.has_f13 && info_.HasExtension(VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME)) {
    enabled_extensions_.push_back(VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME);
  }
  push_descriptors_ = extension_enabled(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  subgroup_size_control_ = info_.size_control && (info_.has_f13 ? f13.subgroupSizeControl : size_control.subgroupSizeControl) &&
                           (info_.size_control_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT);
  creation_feedback_ = info_.has_f13 || extension_enabled(VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME);

  std::vector<const char*> ext_names;
  for (const auto& e : enabled_extensions_) ext_names.push_back(e.c_str());
  const float priority = 1.0f;
  auto qi = Make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  qi.queueFamilyIndex = static_cast<uint32_t>(info_.queue_family);
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  auto ci = Make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  ci.pNext = &f2;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  ci.enabledExtensionCount = static_cast<uint32_t>(ext_names.size());
  ci.ppEnabledExtensionNames = ext_names.data();
  if (VkResult r = in.vkCreateDevice(info_.physical, &ci, nullptr, &device_); r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return Error(StatusCode::kUnavailable, "creating the logical device", "vkCreateDevice", r);
  }
  std::string missing;
#define TL_VK_DEVICE(name)                                                                         \
  fn_.name = reinterpret_cast<PFN_##name>(in.vkGetDeviceProcAddr(device_, #name));                \
  if (!fn_.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
#define TL_VK_DEVICE_OPTIONAL(name) fn_.name = reinterpret_cast<PFN_##name>(in.vkGetDeviceProcAddr(device_, #name));
#include "vulkan_symbols.h"
#undef TL_VK_DEVICE
#undef TL_VK_DEVICE_OPTIONAL
  if (!missing.empty()) {
    if (fn_.vkDestroyDevice) fn_.vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
    return Status(StatusCode::kUnavailable, "Vulkan device '" + name_ + "': the driver lacks " + missing);
  }
  if (push_descriptors_ && !fn_.vkCmdPushDescriptorSetKHR) push_descriptors_ = false;
  fn_.vkGetDeviceQueue(device_, static_cast<uint32_t>(info_.queue_family), 0, &queue_);
  auto ti = Make<VkSemaphoreTypeCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO);
  ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  ti.initialValue = 0;
  auto si = Make<VkSemaphoreCreateInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO);
  si.pNext = &ti;
  if (VkResult r = fn_.vkCreateSemaphore(device_, &si, nullptr, &timeline_); r != VK_SUCCESS) {
    timeline_ = VK_NULL_HANDLE;
    return Error(StatusCode::kUnavailable, "creating the timeline semaphore", "vkCreateSemaphore", r);
  }
  // Pipeline cache, seeded from the file of this device identity.
  std::vector<uint8_t> seed;
  auto dir = cpu::PrivateCacheDir(cache_dir);
  if (dir.ok()) {
    cache_path_ = *dir + "/" + PipelineCacheFileName(p);
    seed = ReadPipelineCacheFile(cache_path_, p, &cache_note_);
  } else {
    cache_note_ = "pipeline cache not persisted: " + dir.status().message();
  }
  auto pci = Make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
  pci.initialDataSize = seed.size();
  pci.pInitialData = seed.empty() ? nullptr : seed.data();
  if (VkResult r = fn_.vkCreatePipelineCache(device_, &pci, nullptr, &pipeline_cache_); r != VK_SUCCESS) {
    // A driver refusing the seed: start empty.
    cache_note_ += "; the driver refused it (" + ResultText(r) + ")";
    pci.initialDataSize = 0;
    pci.pInitialData = nullptr;
    if (fn_.vkCreatePipelineCache(device_, &pci, nullptr, &pipeline_cache_) != VK_SUCCESS) pipeline_cache_ = VK_NULL_HANDLE;
  }
  cache_written_bytes_ = seed.size();
  if (logger_) {
    logger_->Log(TL_LOG_INFO, "vulkan: device '%s' created (queue family %d; extensions:%s%s); %s", name_.c_str(),
                 info_.queue_family, ext_names.empty() ? " none" : "",
                 [&] {
                   std::string s;
                   for (const auto& e : enabled_extensions_) s += " " + e;
                   return s;
                 }()
                     .c_str(),
                 cache_note_.c_str());
  }
  return Status::Ok();
}

void Context::PersistPipelineCache() {
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (!pipeline_cache_ || cache_path_.empty()) return;
  size_t size = 0;
  if (fn_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, nullptr) != VK_SUCCESS || size == 0 ||
      size == cache_written_bytes_) {
    return;
  }
  std::vector<uint8_t> data(size);
  if (fn_.vkGetPipelineCacheData(device_, pipeline_cache_, &size, data.data()) != VK_SUCCESS) return;
  data.resize(size);
  if (Status st = WritePipelineCacheFile(cache_path_, data); !st.ok()) {
    if (logger_) logger_->Log(TL_LOG_WARNING, "vulkan: pipeline cache not saved: %s", st.message().c_str());
    return;
  }
  cache_written_bytes_ = size;
}

Status Context::Submit(VkCommandBuffer cmd, uint64_t* value) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  uint64_t v = next_value_ + 1;
  auto ts = Make<VkTimelineSemaphoreSubmitInfo>(VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO);
  ts.signalSemaphoreValueCount = 1;
  ts.pSignalSemaphoreValues = &v;
  auto si = Make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
  si.pNext = &ts;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_;
  if (VkResult r = fn_.vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE); r != VK_SUCCESS) {
    return Error(r == VK_ERROR_DEVICE_LOST ? StatusCode::kUnavailable : StatusCode::kInternal, "submitting work",
                 "vkQueueSubmit", r);
  }
  next_value_ = v;
  *value = v;
  return Status::Ok();
}

Status Context::Wait(uint64_t value, uint64_t timeout_ns, const std::string& what) {
  if (value == 0) return Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  auto wi = Make<VkSemaphoreWaitInfo>(VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO);
  wi.semaphoreCount = 1;
  wi.pSemaphores = &timeline_;
  wi.pValues = &value;
  VkResult r = fn_.vkWaitSemaphores(device_, &wi, timeout_ns);
  if (r == VK_SUCCESS) return Status::Ok();
  if (r == VK_TIMEOUT) {
    return Status(StatusCode::kDeadlineExceeded,
                  Format("%s on Vulkan device '%s': still running after %.3f ms (timeout %" PRIu64 " ns)", what.c_str(),
                         name_.c_str(), MsSince(start), timeout_ns));
  }
  return Error(r == VK_ERROR_DEVICE_LOST ? StatusCode::kUnavailable : StatusCode::kInternal, what, "vkWaitSemaphores",
               r);
}

int Context::FindMemoryType(uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer) const {
  int fallback = -1;
  for (uint32_t i = 0; i < info_.memory.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = info_.memory.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & prefer) == prefer) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

StatusOr<std::pair<VkBuffer, VkDeviceMemory>> Context::CreateBuffer(uint64_t bytes, bool host, uint8_t** mapped,
                                                                     const char* what) {
  *mapped = nullptr;
  const std::string where = Format("%s of %" PRIu64 " bytes", what, bytes);
  auto bi = Make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (VkResult r = fn_.vkCreateBuffer(device_, &bi, nullptr, &buffer); r != VK_SUCCESS) {
    return Error(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ? StatusCode::kResourceExhausted
                                                                                       : StatusCode::kInvalidArgument,
                 where, "vkCreateBuffer", r);
  }
  VkMemoryRequirements req{};
  fn_.vkGetBufferMemoryRequirements(device_, buffer, &req);
  const int type = host ? FindMemoryType(req.memoryTypeBits,
                                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                         VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
                        : FindMemoryType(req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
  if (type < 0) {
    fn_.vkDestroyBuffer(device_, buffer, nullptr);
    return Status(StatusCode::kUnavailable, Format("%s on Vulkan device '%s': no %s memory type among 0x%x",
                                                   where.c_str(), name_.c_str(),
                                                   host ? "host-visible coherent" : "device-local", req.memoryTypeBits));
  }
  auto ai = Make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  if (VkResult r = fn_.vkAllocateMemory(device_, &ai, nullptr, &memory); r != VK_SUCCESS) {
    fn_.vkDestroyBuffer(device_, buffer, nullptr);
    return Error(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_TOO_MANY_OBJECTS
                     ? StatusCode::kResourceExhausted
                     : StatusCode::kInternal,
                 where, "vkAllocateMemory", r);
  }
  if (VkResult r = fn_.vkBindBufferMemory(device_, buffer, memory, 0); r != VK_SUCCESS) {
    fn_.vkDestroyBuffer(device_, buffer, nullptr);
    fn_.vkFreeMemory(device_, memory, nullptr);
    return Error(StatusCode::kInternal, where, "vkBindBufferMemory", r);
  }
  const VkMemoryPropertyFlags flags = info_.memory.memoryTypes[type].propertyFlags;
  const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if ((flags & coherent) == coherent) {
    void* p = nullptr;
    if (VkResult r = fn_.vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &p); r != VK_SUCCESS) {
      fn_.vkDestroyBuffer(device_, buffer, nullptr);
      fn_.vkFreeMemory(device_, memory, nullptr);
      return Error(StatusCode::kInternal, where, "vkMapMemory", r);
    }
    *mapped = static_cast<uint8_t*>(p);
  }
  return std::make_pair(buffer, memory);
}

StatusOr<std::shared_ptr<Allocation>> Context::Allocate(uint64_t size) {
  const uint64_t buffer_bytes = RoundUp(std::max<uint64_t>(size, 4), 4);
  const uint64_t reserved = RoundUp(size ? size : 1, kVaGranule) + kVaGranule;
  if (reserved >= kVaSpace / 2) {
    return Status(StatusCode::kResourceExhausted,
                  Format("allocating %" PRIu64 " bytes on Vulkan device '%s': above the per-device address space",
                         size, name_.c_str()));
  }
  auto a = std::make_shared<Allocation>();
  a->ctx = this;
  a->size = size;
  a->buffer_bytes = buffer_bytes;
  a->reserved = reserved;
  auto created = CreateBuffer(buffer_bytes, false, &a->mapped, "allocating a buffer");
  if (!created.ok()) return created.status();
  a->buffer = created->first;
  a->memory = created->second;
  std::unique_lock<std::shared_mutex> lock(alloc_mu_);
  const uint64_t base = va_base_;
  uint64_t at = next_va_;
  if (at + reserved > kVaSpace) {
    // The bump pointer reached the end: first fit among the gaps.
    at = kVaStart;
    for (const auto& [va, other] : allocations_) {
      const uint64_t off = va - base;
      if (off >= at + reserved) break;
      at = off + other->reserved;
    }
    if (at + reserved > kVaSpace) {
      return Status(StatusCode::kResourceExhausted,
                    Format("allocating %" PRIu64 " bytes on Vulkan device '%s': virtual address space exhausted",
                           size, name_.c_str()));
    }
  } else {
    next_va_ = at + reserved;
  }
  a->va = base + at;
  allocations_[a->va] = a;
  return a;
}

void Context::Free(uint64_t va) {
  std::shared_ptr<Allocation> a;  // destroyed outside the lock (in-flight work may still hold it)
  std::unique_lock<std::shared_mutex> lock(alloc_mu_);
  auto it = allocations_.find(va);
  if (it == allocations_.end()) return;
  a = std::move(it->second);
  allocations_.erase(it);
}

std::shared_ptr<Allocation> Context::Lookup(uint64_t address, uint64_t bytes, uint64_t* offset, std::string* why) {
  if ((address & ~(kVaSpace - 1)) != va_base_) {
    if ((address >> 56) == (kVaTag >> 56)) {
      *why = Format("address 0x%" PRIx64 " belongs to another Vulkan device or runtime, not to vulkan:%u '%s' of this "
                    "runtime",
                    address, info_.ordinal, name_.c_str());
    } else {
      *why = Format("0x%" PRIx64 " is not a Vulkan device address (a host pointer or another API's?): Vulkan device "
                    "'%s' (vulkan:%u) takes only addresses from tl_buffer_device_pointer() of its own buffers",
                    address, name_.c_str(), info_.ordinal);
    }
    return nullptr;
  }
  std::shared_lock<std::shared_mutex> lock(alloc_mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) {
    *why = Format("address 0x%" PRIx64 " is not inside any live buffer of Vulkan device '%s' (freed?)", address,
                  name_.c_str());
    return nullptr;
  }
  --it;
  const Allocation& a = *it->second;
  const uint64_t off = address - a.va;
  if (off > a.size || bytes > a.size - off) {
    if (off >= a.reserved) {
      *why = Format("address 0x%" PRIx64 " is not inside any live buffer of Vulkan device '%s' (freed?)", address,
                    name_.c_str());
    } else {
      *why = Format("[0x%" PRIx64 ", +%" PRIu64 ") exceeds its buffer: offset %" PRIu64 " of a %" PRIu64
                    "-byte buffer at 0x%" PRIx64,
                    address, bytes, off, a.size, a.va);
    }
    return nullptr;
  }
  *offset = off;
  return it->second;
}

StatusOr<std::unique_ptr<Staging>> Context::AcquireStaging(uint64_t size) {
  uint64_t capacity = kStagingMinBytes;
  while (capacity < size) capacity *= 2;
  {
    std::lock_guard<std::mutex> lock(staging_mu_);
    auto it = staging_.lower_bound(capacity);
    if (it != staging_.end() && it->first == capacity) {
      auto s = std::move(it->second);
      staging_.erase(it);
      staging_bytes_ -= capacity;
      return s;
    }
  }
  auto s = std::make_unique<Staging>();
  s->ctx = this;
  s->capacity = capacity;
  auto created = CreateBuffer(capacity, true, &s->mapped, "allocating a staging buffer");
  if (!created.ok()) return created.status();
  s->buffer = created->first;
  s->memory = created->second;
  if (!s->mapped) return Status(StatusCode::kInternal, "staging buffer on Vulkan device '" + name_ + "' is not mapped");
  return s;
}

void Context::ReleaseStaging(std::unique_ptr<Staging> staging) {
  if (!staging) return;
  std::lock_guard<std::mutex> lock(staging_mu_);
  if (staging_bytes_ + staging->capacity > kStagingCacheBytes) return;  // freed here
  staging_bytes_ += staging->capacity;
  staging_.emplace(staging->capacity, std::move(staging));
}

StatusOr<std::unique_ptr<Lane>> Context::NewLane() {
  auto ci = Make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = static_cast<uint32_t>(info_.queue_family);
  VkCommandPool pool = VK_NULL_HANDLE;
  if (VkResult r = fn_.vkCreateCommandPool(device_, &ci, nullptr, &pool); r != VK_SUCCESS) {
    return Error(StatusCode::kResourceExhausted, "creating a command pool", "vkCreateCommandPool", r);
  }
  return std::make_unique<Lane>(this, pool);
}

StatusOr<std::unique_ptr<Lane>> Context::TakeLane() {
  {
    std::lock_guard<std::mutex> lock(lanes_mu_);
    if (!idle_lanes_.empty()) {
      auto lane = std::move(idle_lanes_.back());
      idle_lanes_.pop_back();
      return lane;
    }
  }
  return NewLane();
}

void Context::ReturnLane(std::unique_ptr<Lane> lane) {
  if (!lane) return;
  std::lock_guard<std::mutex> lock(lanes_mu_);
  idle_lanes_.push_back(std::move(lane));
}

// A lane for one synchronous call: waits for its work and goes back to the
// context's idle list at scope end.
class SyncLane {
 public:
  explicit SyncLane(Context* ctx) : ctx_(ctx) {}
  ~SyncLane() {
    if (lane_) {
      (void)lane_->WaitAll(UINT64_MAX);
      ctx_->ReturnLane(std::move(lane_));
    }
  }
  Status Take() {
    auto lane = ctx_->TakeLane();
    if (!lane.ok()) return lane.status();
    lane_ = std::move(lane.value());
    return Status::Ok();
  }
  Lane* get() const { return lane_.get(); }

 private:
  Context* ctx_;
  std::unique_ptr<Lane> lane_;
};

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
        logger_(options.logger), no_push_descriptors_(EnvTrue(getenv("TL_VULKAN_NO_PUSH_DESCRIPTORS"))) {
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
  bool no_push_descriptors_;  // TL_VULKAN_NO_PUSH_DESCRIPTORS, read at runtime creation
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
    ctx_status_ = ctx->Init(cache_dir_, no_push_descriptors_);
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
  const auto start = std::chrono::steady_clock::now();
  VkResult res = f.vkCreateComputePipelines(ctx.device(), ctx.pipeline_cache(), 1, &ci, nullptr, &pipeline);
  const double ms = MsSince(start);
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
