// The backend interface: what the runtime core (api.cc) needs from a device
// family. One implementation per folder under runtime/backends/.
//
// A backend is created once per runtime; a backend whose driver is missing or
// broken is still created, with `status` saying why it is unavailable (the
// paths tried, the loader's error) and no devices, so the runtime works on
// with the rest.
// Thread-safety: Device and Executable methods are called from many threads
// at once and must be safe; Stream methods are called one at a time.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_desc.h"
#include "tilelang/formats/status.h"
#include "tilelang/runtime.h"

namespace tl::rt {

// Forwards to the embedder's log callback; a no-op without one.
class Logger {
 public:
  Logger() = default;
  Logger(tl_log_fn_t fn, void* user, uint32_t level) : fn_(fn), user_(user), level_(level) {}
  bool enabled(tl_log_level_t level) const { return fn_ && static_cast<uint32_t>(level) <= level_; }
  void Log(tl_log_level_t level, const char* format, ...) const __attribute__((format(printf, 3, 4)));

 private:
  tl_log_fn_t fn_ = nullptr;
  void* user_ = nullptr;
  uint32_t level_ = 0;
};

// The embedder's host allocator, or the system one.
class HostAllocator {
 public:
  HostAllocator() = default;
  explicit HostAllocator(const tl_allocator_t& a) : a_(a) {}
  void* Allocate(size_t size, size_t alignment) const;
  void Free(void* p) const;

 private:
  tl_allocator_t a_{nullptr, nullptr, nullptr};
};

struct BackendOptions {
  std::vector<std::string> driver_search_paths;  // empty: the system loader's search
  uint32_t cpu_thread_count = 0;                 // 0: all cores
  bool cpu_no_memfd = false;
  std::string cpu_cache_dir;                     // "": $XDG_CACHE_HOME/tilelang, $HOME/.cache/tilelang
  const Logger* logger = nullptr;
  const HostAllocator* allocator = nullptr;
};

// Loaded code for one variant on one device.
class Executable {
 public:
  virtual ~Executable() = default;
  // One line about how the code was loaded ("PTX JIT by the driver: 12.5 ms,
  // 40 registers"), appended to the prepared kernel's explain text; "" for none.
  virtual std::string LoadNote() const { return {}; }
};

struct LoadRequest {
  std::string kernel_name;
  std::string variant_id;
  std::string entry_point;
  std::string arch;
  int code_kind = 0;
  std::vector<uint8_t> code;  // the verified, decompressed payload
  uint32_t param_count = 0;
  uint64_t scratch_bytes = 0;  // CPU: per-thread scratch from the manifest
  // GPU (CUDA, HIP): the kernel-parameter buffer from the manifest's Launch
  // (param_slots, param_buffer_bytes), cross-checked with the driver at load,
  // and the shared memory the launch needs.
  struct ParamSlot {
    int param = -1;  // -1: a slot no parameter fills (zeroed, unless `symbol`)
    int symbol = -1;  // >= 0: holds this shape symbol's value (size 4: int32, 8: int64)
    uint32_t offset = 0;
    uint32_t size = 0;
    uint32_t align = 0;
    int tensor_map = -1;  // >= 0: holds tensor_maps[tensor_map], encoded at launch (CUDA, 128 bytes)
  };
  std::vector<ParamSlot> param_slots;
  uint32_t param_buffer_bytes = 0;
  // CUDA TMA tensor maps (bundle Launch.tensor_maps): over tensor parameter
  // `param`, boxes of `box` elements (outermost first), swizzle and L2
  // promotion as CU_TENSOR_MAP_SWIZZLE_* / CU_TENSOR_MAP_L2_PROMOTION_*.
  struct TensorMapSpec {
    int param = 0;
    std::vector<uint32_t> box;
    int swizzle = 0;
    int l2_promotion = 0;
  };
  std::vector<TensorMapSpec> tensor_maps;
  uint32_t static_shared_bytes = 0;
  uint32_t dynamic_shared_bytes = 0;
  uint32_t block[3] = {1, 1, 1};
  // Names for messages ("kernel 'k' argument 1 'x': ...").
  std::vector<std::string> param_names;   // per parameter
  std::vector<tl_dtype_t> param_dtypes;   // per parameter (empty: unknown)
  std::vector<std::string> symbol_names;  // per shape symbol
  // Vulkan (runtime/VULKAN_CONTRACT.md): the variant's requirements, checked
  // again against the device before pipeline creation, and the Launch's
  // descriptor bindings and push-constant layout.
  std::vector<std::string> features;
  uint32_t required_shared_bytes = 0;
  uint32_t required_subgroup_size = 0;
  uint32_t required_push_constant_bytes = 0;
  struct VkBindingSlot {
    int param = -1;
    uint32_t set = 0;
    uint32_t binding = 0;
    uint32_t descriptor_type = 0;
  };
  std::vector<VkBindingSlot> vk_bindings;
  struct VkPushSlot {
    int param = -1;  // -1: the shape symbols, int32 each, in Kernel.symbols order
    uint32_t offset = 0;
    uint32_t size = 0;
  };
  std::vector<VkPushSlot> vk_push;
  uint32_t vk_push_bytes = 0;
};

// A validated launch, self-contained so that it can be queued: it owns
// copies of everything it needs except the tensor memory.
struct LaunchRequest {
  std::string kernel_name;
  std::string variant_id;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  std::vector<void*> tensor_pointers;  // per param; nullptr for scalars
  std::vector<uint64_t> scalar_slots;  // per param; the scalar's bytes (little endian)
  std::vector<uint8_t> is_scalar;      // per param
  std::vector<int64_t> symbols;
  std::vector<uint64_t> tensor_bytes;  // per param: bytes a tensor spans from its pointer (0 for scalars)
  std::vector<std::vector<int64_t>> tensor_shapes;  // per param: a tensor's extents (dense row-major; empty for scalars)
};

class Stream {
 public:
  virtual ~Stream() = default;
  virtual Status Synchronize(uint64_t timeout_ns) = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  const DeviceDesc& desc() const { return desc_; }

  virtual StatusOr<std::shared_ptr<Executable>> Load(const LoadRequest& request) = 0;
  // `stream` nullptr: synchronous.
  virtual Status Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) = 0;

  virtual StatusOr<void*> AllocateMemory(size_t size) = 0;
  virtual void FreeMemory(void* pointer) = 0;
  virtual Status CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) = 0;
  virtual Status CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) = 0;
  virtual StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  virtual StatusOr<std::unique_ptr<Stream>> WrapStream(void* native) = 0;
  // Whether tl_buffer_import may wrap [pointer, pointer + size) (Vulkan: only
  // ranges of this device's own buffers). Default: anything.
  virtual Status CheckImport(void* pointer, size_t size) {
    (void)pointer;
    (void)size;
    return Status::Ok();
  }

 protected:
  DeviceDesc desc_;
};

struct Backend {
  int kind = kBackendUnknown;
  Status status;  // OK, or why the backend is unavailable
  std::vector<std::unique_ptr<Device>> devices;
  // Keeps driver libraries and shared state alive as long as the devices.
  std::shared_ptr<void> state;
};

std::unique_ptr<Backend> CreateCpuBackend(const BackendOptions& options);
std::unique_ptr<Backend> CreateCudaBackend(const BackendOptions& options);
std::unique_ptr<Backend> CreateHipBackend(const BackendOptions& options);
std::unique_ptr<Backend> CreateVulkanBackend(const BackendOptions& options);

// A GPU device whose launch path lands in a later issue: selection, prepare
// and explain work on it (its description is real), loading keeps the
// verified payload, and launch, buffers and streams return UNIMPLEMENTED
// naming the backend.
class ProbeOnlyDevice : public Device {
 public:
  explicit ProbeOnlyDevice(DeviceDesc desc) { desc_ = std::move(desc); }
  StatusOr<std::shared_ptr<Executable>> Load(const LoadRequest& request) override;
  Status Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) override;
  StatusOr<void*> AllocateMemory(size_t size) override;
  void FreeMemory(void* pointer) override;
  Status CopyToDevice(void* device_dst, const void* host_src, size_t size, Stream* stream) override;
  Status CopyToHost(void* host_dst, const void* device_src, size_t size, Stream* stream) override;
  StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  StatusOr<std::unique_ptr<Stream>> WrapStream(void* native) override;

 private:
  Status Unimplemented(const char* what) const;
};

}  // namespace tl::rt
