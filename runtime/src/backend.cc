#include "backend.h"

#include <cstdio>
#include <cstdlib>

namespace tl::rt {

void Logger::Log(tl_log_level_t level, const char* format, ...) const {
  if (!enabled(level)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(buf, sizeof(buf), format, ap);
  va_end(ap);
  if (n < 0) return;
  size_t length = static_cast<size_t>(n) < sizeof(buf) ? static_cast<size_t>(n) : sizeof(buf) - 1;
  fn_(user_, level, buf, length);
}

void* HostAllocator::Allocate(size_t size, size_t alignment) const {
  if (size == 0) size = 1;
  if (a_.alloc) return a_.alloc(a_.self, size, alignment);
  // aligned_alloc needs a size that is a multiple of the alignment.
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  return std::aligned_alloc(alignment, rounded);
}

void HostAllocator::Free(void* p) const {
  if (!p) return;
  if (a_.free) {
    a_.free(a_.self, p);
  } else {
    std::free(p);
  }
}

namespace {
class KeptPayload : public Executable {
 public:
  explicit KeptPayload(std::vector<uint8_t> code) : code_(std::move(code)) {}

 private:
  std::vector<uint8_t> code_;
};
}  // namespace

Status ProbeOnlyDevice::Unimplemented(const char* what) const {
  return MakeStatus(StatusCode::kUnimplemented,
                    "%s on %s device '%s' (%s) is not implemented in this runtime version: the %s launch path lands "
                    "in a later release; selection, prepare and explain work",
                    what, BackendName(desc_.backend), desc_.name.c_str(), desc_.arch.c_str(), BackendName(desc_.backend));
}

StatusOr<std::shared_ptr<Executable>> ProbeOnlyDevice::Load(const LoadRequest& request) {
  return std::shared_ptr<Executable>(std::make_shared<KeptPayload>(request.code));
}

Status ProbeOnlyDevice::Launch(const std::shared_ptr<Executable>&, Stream*, LaunchRequest request) {
  return Unimplemented(("launching kernel '" + request.kernel_name + "' variant '" + request.variant_id + "'").c_str());
}
StatusOr<void*> ProbeOnlyDevice::AllocateMemory(size_t) { return Unimplemented("allocating device memory"); }
void ProbeOnlyDevice::FreeMemory(void*) {}
Status ProbeOnlyDevice::CopyToDevice(void*, const void*, size_t, Stream*) { return Unimplemented("copying to the device"); }
Status ProbeOnlyDevice::CopyToHost(void*, const void*, size_t, Stream*) { return Unimplemented("copying to the host"); }
StatusOr<std::unique_ptr<Stream>> ProbeOnlyDevice::CreateStream() { return Unimplemented("creating a stream"); }
StatusOr<std::unique_ptr<Stream>> ProbeOnlyDevice::WrapStream(void*) { return Unimplemented("wrapping a native stream"); }

}  // namespace tl::rt
