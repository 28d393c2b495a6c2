// Loading a CPU kernel library (an ELF shared object following
// runtime/include/tilelang/cpu_kernel_abi.h) from memory.
//
// The image is checked before the dynamic loader sees it: we cannot trust
// that a bundle was written by our compiler, and dlopen runs the object's
// initializers, so a malformed or foreign object must be refused up front
// (ELF64, little endian, x86-64, ET_DYN, no interpreter, no writable and
// executable segment, every DT_NEEDED in {libc, libm, libmvec, ld-linux}).
//
// Then: memfd_create + write + dlopen("/proc/self/fd/N"). Where executing a
// memfd is refused (vm.memfd_noexec=2, noexec policies) the image is written
// to a private cache directory (mode 0700, owned by us, not group/world
// writable) as <hash>.so through a temporary file and rename, and opened
// from there. glibc identifies objects by device and inode, so the caller
// caches loaded objects per payload and never loads the same bytes twice.
// Thread-safety: functions are thread-safe; a SharedObject is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "tilelang/formats/status.h"

namespace tl::rt::cpu {

Status CheckElfImage(std::span<const uint8_t> image);

struct SharedObjectOptions {
  bool allow_memfd = true;
  std::string cache_dir;  // "": $XDG_CACHE_HOME/tilelang, $HOME/.cache/tilelang
};

class SharedObject {
 public:
  ~SharedObject();
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;

  void* Symbol(const char* name) const;
  // "/proc/self/fd/7" (memfd) or the cache file's path.
  const std::string& path() const { return path_; }
  bool from_memfd() const { return fd_ >= 0; }

  // `name` is used for the memfd (visible in /proc/self/maps) and `hash` for
  // the cache file name.
  static StatusOr<std::unique_ptr<SharedObject>> Load(std::span<const uint8_t> image, const std::string& name,
                                                      uint64_t hash, const SharedObjectOptions& options);

 private:
  SharedObject() = default;
  void* handle_ = nullptr;
  int fd_ = -1;  // kept open while mapped, so the /proc path stays valid for debuggers
  std::string path_;
};

// The private cache directory for `options` (created if needed, checked).
StatusOr<std::string> PrivateCacheDir(const std::string& configured);

}  // namespace tl::rt::cpu
