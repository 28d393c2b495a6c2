// One VkDevice and what the Vulkan backend shares on it (vulkan_device.h has
// the design): the compute queue with its timeline semaphore, the table of
// allocations behind the virtual device addresses, cached staging buffers,
// idle command lanes and the pipeline cache. Lanes are a command pool plus
// the submissions recorded from it that are still in flight: a stream owns
// one; a synchronous call checks one out (SyncLane).
//
// Ownership: the Context is shared (std::shared_ptr) by the device, its
// executables and streams; allocations and staging buffers point back to it
// and are destroyed before it (in-flight submissions hold the allocations
// they use). Thread-safety: Context is safe from any thread (queue under a
// mutex, allocation table under a shared mutex, staging and idle lanes under
// mutexes); a Lane is used by one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "../../src/backend.h"
#include "vulkan_api.h"

namespace tl::rt::vk {

// printf into a std::string (messages).
std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// A zeroed Vulkan struct with its sType set.
template <typename T>
T Make(VkStructureType type) {
  T t{};
  t.sType = type;
  return t;
}

// Virtual device addresses: 0x56 in the top byte ('V'), an 8-bit id of the
// VkDevice (a process-wide counter, so that two devices, or the same device
// in two runtimes, hand out different addresses) in the next, 48 bits of
// offset. Bits 48..63 are not a sign extension of bit 47, so no such address
// is a valid x86-64 (or 48-bit AArch64) host pointer.
inline constexpr uint64_t kVaTag = 0x56ull << 56;
inline constexpr int kVaOrdinalShift = 48;
inline constexpr uint64_t kVaSpace = uint64_t{1} << kVaOrdinalShift;
inline constexpr uint64_t kVaStart = uint64_t{1} << 32;
// Reservations are rounded to 64 KiB and followed by a 64 KiB gap, so that a
// pointer one past the end of a buffer never lands in the next one.
inline constexpr uint64_t kVaGranule = 64 * 1024;

// Copies through staging go in pieces of at most this size.
inline constexpr uint64_t kStagingChunkBytes = 16ull << 20;

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

  // Debug overrides (vulkan_device.h).
  struct Overrides {
    bool no_push_descriptors = false;  // do not use VK_KHR_push_descriptor even where present
    bool staging_only = false;         // never map device buffers: copies go through staging
  };
  Status Init(const std::string& cache_dir, const Overrides& overrides);

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
  // `host`: a staging buffer (host-visible, always mapped); else a device
  // buffer, mapped when its memory is host-visible and coherent.
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
  bool staging_only_ = false;
  bool subgroup_size_control_ = false;
  bool creation_feedback_ = false;

  std::mutex queue_mu_;
  uint64_t next_value_ = 0;  // last value signalled by a submission

  std::shared_mutex alloc_mu_;
  std::map<uint64_t, std::shared_ptr<Allocation>> allocations_;  // by va
  uint64_t va_base_ = 0;  // kVaTag | id << kVaOrdinalShift, set by Init
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


}  // namespace tl::rt::vk
