// The CPU kernel-library loader: ELF checks (negative tests next to the
// parser), memfd loading, the private cache-file fallback.
#include "shared_object.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include "test_bundles.h"
#include "tilelang/cpu_kernel_abi.h"

namespace tl::rt::cpu {
namespace {

using testing::KernelLibrary;

std::string Check(std::vector<uint8_t> image) {
  Status s = CheckElfImage(image);
  return s.ok() ? "" : s.message();
}

TEST(ElfCheck, AcceptsTheTestKernels) {
  for (const char* name : {"v2", "v3", "v4", "no_query"}) EXPECT_EQ(Check(KernelLibrary(name)), "") << name;
}

TEST(ElfCheck, RejectsMalformedImages) {
  std::vector<uint8_t> good = KernelLibrary("v2");
  EXPECT_NE(Check({1, 2, 3}).find("3 bytes, smaller than an ELF header"), std::string::npos);
  auto bad = good;
  bad[0] = 0;
  EXPECT_NE(Check(bad).find("not an ELF file"), std::string::npos);
  bad = good;
  bad[EI_CLASS] = ELFCLASS32;
  EXPECT_NE(Check(bad).find("ELF class 1, expected 64-bit"), std::string::npos);
  bad = good;
  bad[EI_DATA] = ELFDATA2MSB;
  EXPECT_NE(Check(bad).find("expected little endian"), std::string::npos);
  bad = good;
  uint16_t machine = EM_AARCH64;
  memcpy(&bad[offsetof(Elf64_Ehdr, e_machine)], &machine, 2);
  EXPECT_NE(Check(bad).find("ELF machine 183, expected x86-64 (62)"), std::string::npos);
  bad = good;
  uint16_t type = ET_EXEC;
  memcpy(&bad[offsetof(Elf64_Ehdr, e_type)], &type, 2);
  EXPECT_NE(Check(bad).find("ELF type 2, expected a shared object"), std::string::npos);
  bad = good;
  uint64_t phoff = good.size() - 8;
  memcpy(&bad[offsetof(Elf64_Ehdr, e_phoff)], &phoff, 8);
  EXPECT_NE(Check(bad).find("extend past the image"), std::string::npos);
  // Truncated: segments no longer fit.
  bad.assign(good.begin(), good.begin() + 1024);
  EXPECT_NE(Check(bad), "");
}

TEST(ElfCheck, RejectsWritableExecutableSegment) {
  std::vector<uint8_t> image = KernelLibrary("v2");
  Elf64_Ehdr eh;
  memcpy(&eh, image.data(), sizeof(eh));
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    size_t off = eh.e_phoff + i * sizeof(ph);
    memcpy(&ph, &image[off], sizeof(ph));
    if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
      ph.p_flags |= PF_W;
      memcpy(&image[off], &ph, sizeof(ph));
      break;
    }
  }
  EXPECT_NE(Check(image).find("is writable and executable"), std::string::npos);
}

TEST(ElfCheck, RejectsDependenciesBeyondLibcAndLibm) {
  EXPECT_NE(Check(KernelLibrary("needs_stdcxx")).find("needs 'libstdc++.so.6'; CPU kernels may depend only on libc and libm"),
            std::string::npos);
}

TEST(SharedObject, LoadsFromMemfd) {
  auto image = KernelLibrary("v2");
  auto so = SharedObject::Load(image, "test", 1, {});
  ASSERT_TRUE(so.ok()) << so.status().ToString();
  EXPECT_TRUE((*so)->from_memfd());
  EXPECT_EQ((*so)->path().rfind("/proc/self/fd/", 0), 0u);
  auto query = reinterpret_cast<tl_cpu_library_query_fn_t>((*so)->Symbol(TL_CPU_LIBRARY_QUERY_SYMBOL));
  ASSERT_NE(query, nullptr);
  const tl_cpu_library_t* lib = query(TL_CPU_ABI_VERSION);
  ASSERT_NE(lib, nullptr);
  EXPECT_STREQ(lib->isa_level, "x86-64-v2");
  EXPECT_EQ(lib->kernel_count, 4u);
}

TEST(SharedObject, FallsBackToAPrivateCacheFile) {
  std::string dir = std::string(TL_TEST_TMP_DIR) + "/so_cache_" + std::to_string(getpid());
  SharedObjectOptions options;
  options.allow_memfd = false;  // as when vm.memfd_noexec=2 refuses executable memfds
  options.cache_dir = dir;
  auto so = SharedObject::Load(KernelLibrary("v3"), "test", 0xabcdef, options);
  ASSERT_TRUE(so.ok()) << so.status().ToString();
  EXPECT_FALSE((*so)->from_memfd());
  EXPECT_EQ((*so)->path().rfind(dir + "/cpu-0000000000abcdef-", 0), 0u) << (*so)->path();
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE((*so)->Symbol(TL_CPU_LIBRARY_QUERY_SYMBOL), nullptr);
}

TEST(SharedObject, RefusesASharedCacheDirectory) {
  std::string dir = std::string(TL_TEST_TMP_DIR) + "/so_shared_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  SharedObjectOptions options;
  options.allow_memfd = false;
  options.cache_dir = dir;
  auto so = SharedObject::Load(KernelLibrary("v2"), "test", 1, options);
  ASSERT_FALSE(so.ok());
  EXPECT_EQ(so.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(so.status().message().find("is not a private directory"), std::string::npos) << so.status().message();
  EXPECT_NE(so.status().message().find("mode 777"), std::string::npos) << so.status().message();
}

TEST(SharedObject, CheckRunsBeforeTheLoader) {
  auto so = SharedObject::Load(KernelLibrary("needs_stdcxx"), "test", 1, {});
  ASSERT_FALSE(so.ok());
  EXPECT_EQ(so.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tl::rt::cpu
