#include "dynamic_library.h"

#include <dlfcn.h>

namespace tl::rt {

DynamicLibrary::~DynamicLibrary() {
  if (handle_) dlclose(handle_);
}

StatusOr<std::unique_ptr<DynamicLibrary>> DynamicLibrary::Open(const char* what,
                                                               const std::vector<std::string>& sonames,
                                                               const std::vector<std::string>& search_dirs) {
  std::vector<std::string> candidates;
  if (search_dirs.empty()) {
    candidates = sonames;
  } else {
    for (const auto& dir : search_dirs) {
      for (const auto& soname : sonames) candidates.push_back(dir + "/" + soname);
    }
  }
  std::string tried;
  for (const auto& path : candidates) {
    // RTLD_LOCAL: driver symbols must not interpose on anything else.
    // RTLD_NODELETE: GPU drivers start threads and register exit handlers;
    // unloading one while those live crashes, so a driver stays mapped for
    // the life of the process once found (runtimes come and go, the driver
    // is loaded once).
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle) return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(handle, path));
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + path + " (" + (err ? err : "unknown error") + ")";
  }
  return Status(StatusCode::kUnavailable, std::string(what) + " not found: tried " + tried);
}

void* DynamicLibrary::Symbol(const char* name) const { return dlsym(handle_, name); }

}  // namespace tl::rt
