// The shared state of one VkDevice: see vulkan_context.h.
#include "vulkan_context.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "../cpu/shared_object.h"
#include "pipeline_cache_file.h"

namespace tl::rt::vk {

std::string Format(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Source of the per-VkDevice address-space ids.
std::atomic<uint32_t> g_next_space{0};

// Staging buffers are cached in power-of-two sizes up to this total.
constexpr uint64_t kStagingCacheBytes = 64ull << 20;
constexpr uint64_t kStagingMinBytes = 64 * 1024;
uint64_t RoundUp(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

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
    case VK_ERROR_LAYER_NOT_PRESENT: name = "VK_ERROR_LAYER_NOT_PRESENT"; break;
    case VK_ERROR_INCOMPATIBLE_DRIVER: name = "VK_ERROR_INCOMPATIBLE_DRIVER"; break;
    case VK_ERROR_TOO_MANY_OBJECTS: name = "VK_ERROR_TOO_MANY_OBJECTS"; break;
    case VK_ERROR_INVALID_SHADER_NV: name = "VK_ERROR_INVALID_SHADER_NV"; break;
    case VK_ERROR_OUT_OF_POOL_MEMORY: name = "VK_ERROR_OUT_OF_POOL_MEMORY"; break;
    case VK_ERROR_FRAGMENTED_POOL: name = "VK_ERROR_FRAGMENTED_POOL"; break;
    case VK_ERROR_UNKNOWN: name = "VK_ERROR_UNKNOWN"; break;
    default: break;
  }
  return Format("%s (%d)", name ? name : "VkResult", static_cast<int>(r));
}

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

Status Context::Init(const std::string& cache_dir, const Overrides& overrides) {
  staging_only_ = overrides.staging_only;
  va_base_ = kVaTag | (uint64_t{g_next_space.fetch_add(1) & 0xFF} << kVaOrdinalShift);
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
  if (info_.HasExtension(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) && !overrides.no_push_descriptors) {
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
  if ((flags & coherent) == coherent && (host || !staging_only_)) {
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


}  // namespace tl::rt::vk
