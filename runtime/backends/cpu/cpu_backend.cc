// The CPU backend: one device (this host), kernels from x86-64 shared
// objects following the CPU kernel ABI, the grid run on oneTBB.
//
// Blocks of a launch are spread over the device's task arena (or a caller's
// arena wrapped as a native stream) with parallel_for over the flattened
// grid; each worker thread has its own scratch area (the block's "shared
// memory"), kept in an enumerable_thread_specific so that concurrent launches
// from different arenas never share one. A block function's non-zero return
// cancels the rest of the launch and is reported with the block index.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "../../src/backend.h"
#include "../../src/cpu_isa.h"
#include "shared_object.h"
#include "tilelang/cpu_kernel_abi.h"

// ThreadSanitizer cannot see the synchronization inside Debian's libtbb (not
// built with TSan): a task created on one thread and run on another looks
// like a race on everything it captures. The launch path therefore states
// its happens-before edges explicitly on a per-launch token; TBB's own header
// internals are covered by tests/runtime/tsan.supp (race_top only).
#if defined(__SANITIZE_THREAD__)
#define TL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TL_TSAN 1
#endif
#endif
#ifdef TL_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TL_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#define TL_TSAN_RELEASE(addr) __tsan_release(addr)
// Forces `obj` into memory before the next statement; without it the
// compiler may sink the construction of a closure past __tsan_release.
#define TL_TSAN_ESCAPE(obj) __asm__ volatile("" : : "r"(&(obj)) : "memory")
#else
#define TL_TSAN_ESCAPE(obj) ((void)&(obj))
#define TL_TSAN_ACQUIRE(addr) ((void)(addr))
#define TL_TSAN_RELEASE(addr) ((void)(addr))
#endif

namespace tl::rt {

namespace {

// Runs `f` on whichever thread the arena picks, with the hand-off visible to
// TSan: the sync address is the wrapper itself, known to the receiving thread
// without reading anything the sending thread wrote.
template <typename F>
struct Handoff {
  F& f;
  void operator()() const {
    TL_TSAN_ACQUIRE(const_cast<Handoff*>(this));
    f();
    TL_TSAN_RELEASE(const_cast<Handoff*>(this));
  }
};

uint64_t Fnv1a(std::span<const uint8_t> bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

// One loaded kernel library, shared by every variant whose payload has the
// same bytes.
struct CpuLibrary {
  std::unique_ptr<cpu::SharedObject> so;
  const tl_cpu_library_t* table = nullptr;
  std::vector<uint8_t> image;  // compared on cache hits: a hash match alone never reuses code
};

class CpuExecutable : public Executable {
 public:
  std::shared_ptr<CpuLibrary> library;
  const tl_cpu_kernel_t* kernel = nullptr;
  size_t scratch_bytes = 0;
};

struct Scratch {
  void* data = nullptr;
  size_t capacity = 0;
  Scratch() = default;
  Scratch(const Scratch&) : Scratch() {}  // copies start empty (ETS copies the exemplar)
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { std::free(data); }
  bool Reserve(size_t bytes) {
    if (bytes <= capacity) return true;
    std::free(data);
    size_t rounded = (bytes + 63) / 64 * 64;
    data = std::aligned_alloc(64, rounded);
    capacity = data ? rounded : 0;
    return data != nullptr;
  }
};

// A stream: an in-order queue run by one runtime thread.
class CpuStream : public Stream {
 public:
  CpuStream() : worker_([this] { Run(); }) {}
  ~CpuStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_one();
    worker_.join();
  }

  void Enqueue(std::function<Status()> work) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    work_cv_.notify_one();
  }

  Status Synchronize(uint64_t timeout_ns) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto idle = [this] { return queue_.empty() && !busy_; };
    if (timeout_ns == UINT64_MAX) {
      idle_cv_.wait(lock, idle);
    } else if (!idle_cv_.wait_for(lock, std::chrono::nanoseconds(static_cast<int64_t>(
                                            timeout_ns > INT64_MAX ? INT64_MAX : timeout_ns)), idle)) {
      return MakeStatus(StatusCode::kDeadlineExceeded,
                        "CPU stream: %zu queued operation(s) and %d running still pending after %llu ns",
                        queue_.size(), busy_ ? 1 : 0, static_cast<unsigned long long>(timeout_ns));
    }
    Status s = first_error_;
    first_error_ = Status::Ok();
    return s;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stop requested and drained
      std::function<Status()> work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      Status s = work();
      lock.lock();
      busy_ = false;
      if (!s.ok() && first_error_.ok()) first_error_ = s;
      if (queue_.empty()) idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<std::function<Status()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  Status first_error_;
  std::thread worker_;  // last member: starts after the others exist
};

// A caller's tbb::task_arena: work runs synchronously inside it.
class ArenaStream : public Stream {
 public:
  explicit ArenaStream(tbb::task_arena* arena) : arena(arena) {}
  Status Synchronize(uint64_t) override { return Status::Ok(); }
  tbb::task_arena* arena;
};

class CpuDevice : public Device {
 public:
  CpuDevice(DeviceDesc desc, const BackendOptions& options)
      : allocator_(options.allocator), logger_(options.logger) {
    desc_ = std::move(desc);
    threads_ = options.cpu_thread_count ? static_cast<int>(options.cpu_thread_count)
                                        : tbb::info::default_concurrency();
    arena_.initialize(threads_);
    so_options_.allow_memfd = !options.cpu_no_memfd;
    so_options_.cache_dir = options.cpu_cache_dir;
  }

  StatusOr<std::shared_ptr<Executable>> Load(const LoadRequest& req) override {
    if (req.code_kind != TL_CODE_ELF) {
      return MakeStatus(StatusCode::kInvalidArgument, "variant '%s': CPU code must be ELF, got code kind %d",
                        req.variant_id.c_str(), req.code_kind);
    }
    auto library = GetLibrary(req);
    if (!library.ok()) {
      return library.status().Annotate("kernel '" + req.kernel_name + "' variant '" + req.variant_id + "'");
    }
    const tl_cpu_library_t* table = (*library)->table;
    auto exec = std::make_shared<CpuExecutable>();
    exec->library = *library;
    std::string names;
    for (uint32_t i = 0; i < table->kernel_count; ++i) {
      const tl_cpu_kernel_t& k = table->kernels[i];
      if (k.name && req.entry_point == k.name) exec->kernel = &k;
      names += (i ? ", " : "") + std::string(k.name ? k.name : "(null)");
    }
    if (!exec->kernel) {
      return MakeStatus(StatusCode::kNotFound, "kernel '%s' variant '%s': entry point '%s' not in the library (has: %s)",
                        req.kernel_name.c_str(), req.variant_id.c_str(), req.entry_point.c_str(), names.c_str());
    }
    if (!exec->kernel->fn) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': entry point '%s' has no function",
                        req.kernel_name.c_str(), req.variant_id.c_str(), req.entry_point.c_str());
    }
    if (exec->kernel->param_count != req.param_count) {
      return MakeStatus(StatusCode::kIncompatible,
                        "kernel '%s' variant '%s': the library's '%s' takes %u parameters, the manifest declares %u",
                        req.kernel_name.c_str(), req.variant_id.c_str(), req.entry_point.c_str(),
                        exec->kernel->param_count, req.param_count);
    }
    if (table->isa_level && ParseX86IsaLevel(table->isa_level) != ParseX86IsaLevel(req.arch)) {
      return MakeStatus(StatusCode::kIncompatible, "kernel '%s' variant '%s': library built for %s, manifest says %s",
                        req.kernel_name.c_str(), req.variant_id.c_str(), table->isa_level, req.arch.c_str());
    }
    exec->scratch_bytes = std::max<size_t>(exec->kernel->scratch_bytes, req.scratch_bytes);
    if (exec->scratch_bytes > desc_.limits.max_shared_bytes) {
      return MakeStatus(StatusCode::kResourceExhausted,
                        "kernel '%s' variant '%s': needs %zu bytes of per-thread scratch, limit %llu",
                        req.kernel_name.c_str(), req.variant_id.c_str(), exec->scratch_bytes,
                        static_cast<unsigned long long>(desc_.limits.max_shared_bytes));
    }
    return std::shared_ptr<Executable>(exec);
  }

  Status Launch(const std::shared_ptr<Executable>& executable, Stream* stream, LaunchRequest request) override {
    auto exec = std::static_pointer_cast<CpuExecutable>(executable);
    if (auto* async = dynamic_cast<CpuStream*>(stream)) {
      async->Enqueue([this, exec, req = std::move(request)]() mutable { return Run(*exec, req, &arena_); });
      return Status::Ok();
    }
    tbb::task_arena* arena = &arena_;
    if (auto* wrapped = dynamic_cast<ArenaStream*>(stream)) arena = wrapped->arena;
    return Run(*exec, request, arena);
  }

  StatusOr<void*> AllocateMemory(size_t size) override {
    void* p = allocator_->Allocate(size, 256);
    if (!p) return MakeStatus(StatusCode::kResourceExhausted, "CPU device: allocating %zu bytes failed", size);
    return p;
  }
  void FreeMemory(void* p) override { allocator_->Free(p); }

  Status CopyToDevice(void* dst, const void* src, size_t size, Stream* stream) override {
    return Copy(dst, src, size, stream);
  }
  Status CopyToHost(void* dst, const void* src, size_t size, Stream* stream) override {
    return Copy(dst, src, size, stream);
  }

  StatusOr<std::unique_ptr<Stream>> CreateStream() override { return std::unique_ptr<Stream>(new CpuStream()); }
  StatusOr<std::unique_ptr<Stream>> WrapStream(void* native) override {
    if (!native) return Status(StatusCode::kInvalidArgument, "CPU device: native stream (a tbb::task_arena*) is NULL");
    return std::unique_ptr<Stream>(new ArenaStream(static_cast<tbb::task_arena*>(native)));
  }

 private:
  Status Copy(void* dst, const void* src, size_t size, Stream* stream) {
    if (auto* async = dynamic_cast<CpuStream*>(stream)) {
      async->Enqueue([dst, src, size] {
        if (size) memcpy(dst, src, size);
        return Status::Ok();
      });
      return Status::Ok();
    }
    if (size) memcpy(dst, src, size);
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<CpuLibrary>> GetLibrary(const LoadRequest& req) {
    const uint64_t hash = Fnv1a(req.code);
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto range = cache_.equal_range(hash);
    for (auto it = range.first; it != range.second; ++it) {
      if (auto lib = it->second.lock(); lib && lib->image == req.code) return lib;
    }
    // Drop expired entries of this hash before adding.
    for (auto it = range.first; it != range.second;) it = it->second.expired() ? cache_.erase(it) : std::next(it);

    auto so = cpu::SharedObject::Load(req.code, "tilelang:" + req.variant_id, hash, so_options_);
    if (!so.ok()) return so.status();
    auto lib = std::make_shared<CpuLibrary>();
    lib->so = std::move(so.value());
    lib->image = req.code;
    auto query = reinterpret_cast<tl_cpu_library_query_fn_t>(lib->so->Symbol(TL_CPU_LIBRARY_QUERY_SYMBOL));
    if (!query) {
      return MakeStatus(StatusCode::kInvalidArgument, "CPU kernel library does not export %s",
                        TL_CPU_LIBRARY_QUERY_SYMBOL);
    }
    lib->table = query(TL_CPU_ABI_VERSION);
    if (!lib->table) {
      return MakeStatus(StatusCode::kIncompatible, "CPU kernel library cannot serve CPU ABI version %u.%u",
                        TL_CPU_ABI_VERSION_MAJOR, TL_CPU_ABI_VERSION_MINOR);
    }
    if ((lib->table->abi_version >> 16) != TL_CPU_ABI_VERSION_MAJOR) {
      return MakeStatus(StatusCode::kIncompatible, "CPU kernel library has CPU ABI %u.%u, this runtime speaks %u.x",
                        lib->table->abi_version >> 16, lib->table->abi_version & 0xFFFF, TL_CPU_ABI_VERSION_MAJOR);
    }
    if (lib->table->kernel_count > 0 && !lib->table->kernels) {
      return Status(StatusCode::kInvalidArgument, "CPU kernel library: kernel table is NULL");
    }
    if (logger_) {
      logger_->Log(TL_LOG_DEBUG, "cpu: loaded %zu-byte kernel library for '%s' from %s", req.code.size(),
                   req.variant_id.c_str(), lib->so->path().c_str());
    }
    cache_.emplace(hash, lib);
    return lib;
  }

  Status Run(const CpuExecutable& exec, const LaunchRequest& req, tbb::task_arena* arena) {
    const size_t n = req.tensor_pointers.size();
    std::vector<void*> args(n);
    for (size_t i = 0; i < n; ++i) {
      args[i] = req.is_scalar[i] ? const_cast<uint64_t*>(&req.scalar_slots[i]) : req.tensor_pointers[i];
    }
    tl_cpu_dispatch_t dispatch;
    memset(&dispatch, 0, sizeof(dispatch));
    for (int i = 0; i < 3; ++i) dispatch.grid[i] = req.grid[i];
    dispatch.arg_count = static_cast<uint32_t>(n);
    dispatch.args = args.data();
    dispatch.symbols = req.symbols.data();
    dispatch.symbol_count = static_cast<uint32_t>(req.symbols.size());

    const uint64_t gx = req.grid[0], gy = req.grid[1];
    const uint64_t total = gx * gy * req.grid[2];
    if (total == 0) return Status::Ok();
    std::atomic<bool> failed{false};
    std::mutex error_mu;
    Status error;
    const size_t scratch_bytes = exec.scratch_bytes;
    auto body = [&](const tbb::blocked_range<uint64_t>& range, tbb::task_group_context& ctx) {
      Scratch& scratch = scratch_.local();
      tl_cpu_block_t block;
      memset(&block, 0, sizeof(block));
      if (scratch_bytes > 0) {
        if (!scratch.Reserve(scratch_bytes)) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!failed.exchange(true)) {
            error = MakeStatus(StatusCode::kResourceExhausted, "kernel '%s': allocating %zu bytes of scratch failed",
                               req.kernel_name.c_str(), scratch_bytes);
          }
          ctx.cancel_group_execution();
          return;
        }
        block.scratch = scratch.data;
        block.scratch_bytes = scratch.capacity;
      }
      int worker = tbb::this_task_arena::current_thread_index();
      block.worker = worker < 0 ? 0u : static_cast<uint32_t>(worker);
      for (uint64_t i = range.begin(); i != range.end(); ++i) {
        if (failed.load(std::memory_order_relaxed)) return;
        block.block[0] = static_cast<uint32_t>(i % gx);
        block.block[1] = static_cast<uint32_t>(i / gx % gy);
        block.block[2] = static_cast<uint32_t>(i / (gx * gy));
        int rc = exec.kernel->fn(&dispatch, &block);
        if (rc != 0) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!failed.exchange(true)) {
            error = MakeStatus(StatusCode::kInternal, "kernel '%s' variant '%s': block (%u, %u, %u) returned %d",
                               req.kernel_name.c_str(), req.variant_id.c_str(), block.block[0], block.block[1],
                               block.block[2], rc);
          }
          ctx.cancel_group_execution();
          return;
        }
      }
    };
    int token = 0;  // TSan sync object between this launch's blocks
    auto run_grid = [&] {
      TL_TSAN_RELEASE(&token);
      tbb::task_group_context ctx;
      tbb::parallel_for(
          tbb::blocked_range<uint64_t>(0, total),
          [&](const tbb::blocked_range<uint64_t>& range) {
            TL_TSAN_ACQUIRE(&token);
            body(range, ctx);
            TL_TSAN_RELEASE(&token);
          },
          tbb::auto_partitioner(), ctx);
      TL_TSAN_ACQUIRE(&token);
    };
    // execute() may hand the functor to a thread already in the arena.
    Handoff<decltype(run_grid)> handoff{run_grid};
    TL_TSAN_ESCAPE(handoff);
    TL_TSAN_RELEASE(&handoff);
    arena->execute(handoff);
    TL_TSAN_ACQUIRE(&handoff);
    return error;
  }

  const HostAllocator* allocator_;
  const Logger* logger_;
  int threads_ = 1;
  tbb::task_arena arena_;
  tbb::enumerable_thread_specific<Scratch> scratch_;
  cpu::SharedObjectOptions so_options_;
  std::mutex cache_mu_;
  std::multimap<uint64_t, std::weak_ptr<CpuLibrary>> cache_;
};

uint64_t HostMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "x86-64 CPU";
}

}  // namespace

std::unique_ptr<Backend> CreateCpuBackend(const BackendOptions& options) {
  auto backend = std::make_unique<Backend>();
  backend->kind = kBackendCpu;
#if !defined(__x86_64__)
  backend->status = Status(StatusCode::kUnavailable, "the CPU backend supports x86-64 hosts only");
  return backend;
#else
  DeviceDesc d;
  d.backend = kBackendCpu;
  d.name = CpuModelName();
  d.cpuid = ProbeCpuidFlags(&d.xcr0);
  d.memory_bytes = HostMemoryBytes();
  d.compute_units = options.cpu_thread_count ? options.cpu_thread_count
                                             : static_cast<uint32_t>(tbb::info::default_concurrency());
  d.flags = TL_DEVICE_FLAG_INTEGRATED | TL_DEVICE_FLAG_CAN_LAUNCH;
  // Grid limits as on CUDA (the flattened grid stays below 2^63); "shared
  // memory" is the per-thread scratch a block function gets.
  d.limits.max_grid[0] = 2147483647u;
  d.limits.max_grid[1] = 65535u;
  d.limits.max_grid[2] = 65535u;
  d.limits.max_block[0] = d.limits.max_block[1] = d.limits.max_block[2] = 1024u;
  d.limits.max_threads_per_block = 1024u;
  d.limits.max_shared_bytes = 256ull << 20;
  d.Finalize();
  backend->devices.push_back(std::make_unique<CpuDevice>(std::move(d), options));
  return backend;
#endif
}

}  // namespace tl::rt
