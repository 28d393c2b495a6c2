// dlopen wrapper for GPU drivers, with the list of paths tried in the error.
//
// Each driver's symbols are listed once, in an X-macro table beside its
// backend (runtime/backends/<name>/*_symbols.h), and resolved here by name.
// Thread-safety: Open and Symbol may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::rt {

class DynamicLibrary {
 public:
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // Tries each soname: as <dir>/<soname> for every dir in `search_dirs`
  // when that list is non-empty (and nothing else), else through the system
  // loader's search. UNAVAILABLE lists every attempt with dlerror().
  static StatusOr<std::unique_ptr<DynamicLibrary>> Open(const char* what, const std::vector<std::string>& sonames,
                                                        const std::vector<std::string>& search_dirs);

  void* Symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

}  // namespace tl::rt
