#include "shared_object.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace tl::rt::cpu {

namespace {

template <typename T>
bool ReadAt(std::span<const uint8_t> image, uint64_t offset, T* out) {
  if (offset > image.size() || image.size() - offset < sizeof(T)) return false;
  memcpy(out, image.data() + offset, sizeof(T));
  return true;
}

Status Bad(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status Bad(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return Status(StatusCode::kInvalidArgument, std::string("CPU kernel library: ") + buf);
}

}  // namespace

Status CheckElfImage(std::span<const uint8_t> image) {
  Elf64_Ehdr eh;
  if (!ReadAt(image, 0, &eh)) return Bad("%zu bytes, smaller than an ELF header (64)", image.size());
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return Bad("not an ELF file (bad magic)");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Bad("ELF class %u, expected 64-bit", eh.e_ident[EI_CLASS]);
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return Bad("ELF data encoding %u, expected little endian", eh.e_ident[EI_DATA]);
  if (eh.e_machine != EM_X86_64) return Bad("ELF machine %u, expected x86-64 (%u)", eh.e_machine, EM_X86_64);
  if (eh.e_type != ET_DYN) return Bad("ELF type %u, expected a shared object (ET_DYN %u)", eh.e_type, ET_DYN);
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return Bad("program header size %u, expected %zu", eh.e_phentsize, sizeof(Elf64_Phdr));
  if (eh.e_phnum == 0 || eh.e_phnum > 256) return Bad("%u program headers", eh.e_phnum);
  if (eh.e_phoff > image.size() || (image.size() - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum) {
    return Bad("program headers at %" PRIu64 " (%u entries) extend past the image (%zu bytes)", eh.e_phoff, eh.e_phnum, image.size());
  }
  std::vector<Elf64_Phdr> loads;
  const Elf64_Phdr* dynamic = nullptr;
  std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    ReadAt(image, eh.e_phoff + i * sizeof(Elf64_Phdr), &phdrs[i]);
    const Elf64_Phdr& ph = phdrs[i];
    if (ph.p_type == PT_INTERP) return Bad("has an interpreter (PT_INTERP): an executable, not a kernel library");
    if (ph.p_type == PT_LOAD) {
      if ((ph.p_flags & PF_W) && (ph.p_flags & PF_X)) return Bad("segment %u is writable and executable", i);
      if (ph.p_offset > image.size() || image.size() - ph.p_offset < ph.p_filesz) {
        return Bad("segment %u (offset %" PRIu64 ", %" PRIu64 " bytes) extends past the image (%zu bytes)", i,
                   ph.p_offset, ph.p_filesz, image.size());
      }
      loads.push_back(ph);
    }
    if (ph.p_type == PT_DYNAMIC) dynamic = &phdrs[i];
  }
  if (!dynamic) return Bad("no dynamic section (PT_DYNAMIC)");
  if (dynamic->p_offset > image.size() || image.size() - dynamic->p_offset < dynamic->p_filesz) {
    return Bad("dynamic section extends past the image");
  }
  // Virtual address -> file offset through the PT_LOAD segments.
  auto to_offset = [&](uint64_t vaddr, uint64_t* out) {
    for (const auto& ph : loads) {
      if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
        *out = ph.p_offset + (vaddr - ph.p_vaddr);
        return true;
      }
    }
    return false;
  };
  uint64_t strtab = 0, strsz = 0;
  bool has_strtab = false;
  std::vector<uint64_t> needed;
  for (uint64_t off = dynamic->p_offset; off + sizeof(Elf64_Dyn) <= dynamic->p_offset + dynamic->p_filesz;
       off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn dyn;
    ReadAt(image, off, &dyn);
    if (dyn.d_tag == DT_NULL) break;
    if (dyn.d_tag == DT_STRTAB) {
      strtab = dyn.d_un.d_ptr;
      has_strtab = true;
    }
    if (dyn.d_tag == DT_STRSZ) strsz = dyn.d_un.d_val;
    if (dyn.d_tag == DT_NEEDED) needed.push_back(dyn.d_un.d_val);
    if (dyn.d_tag == DT_TEXTREL) return Bad("has text relocations (DT_TEXTREL)");
  }
  if (!needed.empty()) {
    uint64_t str_off = 0;
    if (!has_strtab || !to_offset(strtab, &str_off) || str_off > image.size() || image.size() - str_off < strsz) {
      return Bad("dynamic string table outside the image");
    }
    static const char* kAllowed[] = {"libc.so.6", "libm.so.6", "libmvec.so.1", "ld-linux-x86-64.so.2"};
    for (uint64_t n : needed) {
      if (n >= strsz) return Bad("DT_NEEDED name offset %" PRIu64 " outside the string table (%" PRIu64 " bytes)", n, strsz);
      const char* s = reinterpret_cast<const char*>(image.data() + str_off + n);
      size_t len = strnlen(s, strsz - n);
      if (len == strsz - n) return Bad("DT_NEEDED name is not terminated");
      std::string name(s, len);
      bool ok = false;
      for (const char* a : kAllowed) ok = ok || name == a;
      if (!ok) return Bad("needs '%s'; CPU kernels may depend only on libc and libm", name.c_str());
    }
  }
  return Status::Ok();
}

SharedObject::~SharedObject() {
  if (handle_) dlclose(handle_);
  if (fd_ >= 0) close(fd_);
}

void* SharedObject::Symbol(const char* name) const { return dlsym(handle_, name); }

namespace {

Status WriteAll(int fd, std::span<const uint8_t> bytes, const std::string& what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MakeStatus(StatusCode::kUnavailable, "writing %s: %s", what.c_str(), strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos == path.size() || path[pos] == '/') {
      std::string prefix = path.substr(0, pos);
      if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
        return MakeStatus(StatusCode::kUnavailable, "creating %s: %s", prefix.c_str(), strerror(errno));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> PrivateCacheDir(const std::string& configured) {
  std::string dir = configured;
  if (dir.empty()) {
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    if (xdg && *xdg == '/') {
      dir = std::string(xdg) + "/tilelang";
    } else if (home && *home == '/') {
      dir = std::string(home) + "/.cache/tilelang";
    } else {
      return Status(StatusCode::kUnavailable, "no cache directory for CPU kernel libraries: neither XDG_CACHE_HOME nor HOME is an absolute path");
    }
  }
  TL_RETURN_IF_ERROR(MakeDirs(dir));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return MakeStatus(StatusCode::kUnavailable, "cache directory %s: %s", dir.c_str(), strerror(errno));
  // Another user able to write here could swap our kernel code.
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return MakeStatus(StatusCode::kPermissionDenied,
                      "cache directory %s is not a private directory (uid %u, mode %o; need uid %u, no group/other write)",
                      dir.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(st.st_mode & 07777),
                      static_cast<unsigned>(geteuid()));
  }
  return dir;
}

StatusOr<std::unique_ptr<SharedObject>> SharedObject::Load(std::span<const uint8_t> image, const std::string& name,
                                                          uint64_t hash, const SharedObjectOptions& options) {
  TL_RETURN_IF_ERROR(CheckElfImage(image));
  std::unique_ptr<SharedObject> so(new SharedObject());
  std::string memfd_error;
  if (options.allow_memfd) {
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) {
      memfd_error = std::string("memfd_create: ") + strerror(errno);
    } else {
      Status w = WriteAll(fd, image, "memfd");
      if (!w.ok()) {
        close(fd);
        return w;
      }
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      // RTLD_LOCAL: kernels of different bundles may share symbol names.
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        so->handle_ = handle;
        so->fd_ = fd;
        so->path_ = path;
        return so;
      }
      const char* err = dlerror();
      memfd_error = std::string("dlopen of memfd: ") + (err ? err : "unknown error");
      close(fd);
    }
  }
  // Fallback: a private cache file.
  auto dir = PrivateCacheDir(options.cache_dir);
  if (!dir.ok()) {
    return Status(dir.status().code(), dir.status().message() + (memfd_error.empty() ? "" : " (after " + memfd_error + ")"));
  }
  char hex[17];
  snprintf(hex, sizeof(hex), "%016" PRIx64, hash);
  const std::string final_path = *dir + "/cpu-" + hex + "-" + std::to_string(image.size()) + ".so";
  std::string tmp = final_path + ".XXXXXX";
  std::vector<char> tmpl(tmp.begin(), tmp.end());
  tmpl.push_back('\0');
  int fd = mkstemp(tmpl.data());
  if (fd < 0) return MakeStatus(StatusCode::kUnavailable, "creating %s: %s", tmp.c_str(), strerror(errno));
  Status w = WriteAll(fd, image, tmpl.data());
  close(fd);
  if (!w.ok() || rename(tmpl.data(), final_path.c_str()) != 0) {
    unlink(tmpl.data());
    return w.ok() ? MakeStatus(StatusCode::kUnavailable, "renaming to %s: %s", final_path.c_str(), strerror(errno)) : w;
  }
  void* handle = dlopen(final_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return MakeStatus(StatusCode::kUnavailable, "dlopen %s: %s%s%s", final_path.c_str(), err ? err : "unknown error",
                      memfd_error.empty() ? "" : "; before that ", memfd_error.c_str());
  }
  so->handle_ = handle;
  so->path_ = final_path;
  return so;
}

}  // namespace tl::rt::cpu
