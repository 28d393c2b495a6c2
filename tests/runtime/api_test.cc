// The C ABI through libtilelang_runtime.so: every function, its error paths,
// numerics of the CPU backend against a reference, lifetimes.
#include <oneapi/tbb/task_arena.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "test_bundles.h"
#include "tilelang/formats/writer.h"
#include "tilelang/runtime.h"

// Mesa's Vulkan ICDs (loaded and unloaded by the Vulkan loader) leak a few
// bytes per instance that LeakSanitizer cannot attribute (the module is gone
// by exit). Runtime creation with the real Vulkan loader runs with leak
// detection off under ASan; everything else stays checked.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define TL_TEST_IGNORE_DRIVER_LEAKS() __lsan::ScopedDisabler tl_lsan_off_
#else
#define TL_TEST_IGNORE_DRIVER_LEAKS() ((void)0)
#endif

namespace {

using tl::rt::testing::BufferParam;
using tl::rt::testing::CpuVariant;
using tl::rt::testing::KernelLibrary;
using tl::rt::testing::StandardBundle;

// Takes a status, frees it, returns "CODE: message" ("" for success).
std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}
#define ASSERT_OK(expr) ASSERT_EQ(S(expr), "")
#define EXPECT_OK(expr) EXPECT_EQ(S(expr), "")
#define EXPECT_ERR(expr, code, fragment)                                                  \
  do {                                                                                    \
    std::string e_ = S(expr);                                                             \
    EXPECT_EQ(e_.rfind(code, 0), 0u) << e_;                                               \
    EXPECT_NE(e_.find(fragment), std::string::npos) << e_;                                \
  } while (0)

struct Log {
  std::mutex mu;
  std::vector<std::string> lines;
  static void Fn(void* user, tl_log_level_t, const char* m, size_t n) {
    auto* self = static_cast<Log*>(user);
    std::lock_guard<std::mutex> lock(self->mu);
    self->lines.emplace_back(m, n);
  }
  int Count(const std::string& fragment) {
    std::lock_guard<std::mutex> lock(mu);
    int c = 0;
    for (const auto& l : lines) c += l.find(fragment) != std::string::npos;
    return c;
  }
};

tl_runtime_options_t Options(uint64_t flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT) {
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = flags;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CPU);
  o.cpu_thread_count = 2;
  return o;
}

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    tl_runtime_options_t o = Options();
    o.log = Log::Fn;
    o.log_user = &log;
    o.log_level = TL_LOG_DEBUG;
    ASSERT_OK(tl_runtime_create(&o, &rt));
    ASSERT_OK(tl_runtime_default_device(rt, "cpu", &cpu));
    bytes = StandardBundle();
    ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle));
  }
  void TearDown() override {
    tl_bundle_release(bundle);
    tl_device_release(cpu);
    tl_runtime_release(rt);
  }
  tl_kernel_t* Kernel(const char* name) {
    tl_kernel_t* k = nullptr;
    EXPECT_OK(tl_bundle_find_kernel(bundle, name, &k));
    return k;
  }
  tl_prepared_t* Prepare(const char* name) {
    tl_kernel_t* k = Kernel(name);
    tl_prepared_t* p = nullptr;
    EXPECT_OK(tl_kernel_prepare(k, cpu, 0, &p));
    tl_kernel_release(k);
    return p;
  }

  Log log;
  tl_runtime_t* rt = nullptr;
  tl_device_t* cpu = nullptr;
  std::vector<uint8_t> bytes;
  tl_bundle_t* bundle = nullptr;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

const tl_dtype_t kF32 = {TL_DTYPE_FLOAT, 32, 1};

//===--- versions and statuses ---===//

TEST(ApiBasics, VersionsAndStatuses) {
  EXPECT_EQ(tl_abi_version(), TL_ABI_VERSION);
  EXPECT_EQ(tl_abi_version() >> 16, 1u);
  EXPECT_STRNE(tl_runtime_version_string(), "");
  EXPECT_EQ(tl_status_code(nullptr), TL_STATUS_OK);
  EXPECT_STREQ(tl_status_message(nullptr), "");
  tl_status_free(nullptr);
  EXPECT_STREQ(tl_status_code_name(TL_STATUS_INCOMPATIBLE), "INCOMPATIBLE");
  EXPECT_STREQ(tl_status_code_name(TL_STATUS_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(tl_status_code_name(static_cast<tl_status_code_t>(77)), "UNKNOWN_CODE");
}

TEST(ApiBasics, RuntimeCreateErrors) {
  EXPECT_ERR(tl_runtime_create(nullptr, nullptr), "INVALID_ARGUMENT", "out_runtime is NULL");
  tl_runtime_t* rt = reinterpret_cast<tl_runtime_t*>(1);
  tl_runtime_options_t o = Options();
  o.struct_size = 4;
  EXPECT_ERR(tl_runtime_create(&o, &rt), "INVALID_ARGUMENT", "struct_size 4 is smaller");
  EXPECT_EQ(rt, nullptr);  // out-params are cleared on entry
  o = Options();
  o.abi_version = (2u << 16);
  EXPECT_ERR(tl_runtime_create(&o, &rt), "INCOMPATIBLE", "caller built for ABI 2.0, this library implements 1.0");
  o = Options();
  o.host_allocator.alloc = [](void*, size_t, size_t) -> void* { return nullptr; };
  EXPECT_ERR(tl_runtime_create(&o, &rt), "INVALID_ARGUMENT", "needs both alloc and free");
  o = Options();
  o.driver_search_path_count = 2;
  EXPECT_ERR(tl_runtime_create(&o, &rt), "INVALID_ARGUMENT", "driver_search_paths is NULL with a count of 2");
}

TEST(ApiBasics, DefaultOptionsAndBackendStatus) {
  TL_TEST_IGNORE_DRIVER_LEAKS();
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(nullptr, &rt));  // all backends: missing GPU drivers are not errors
  EXPECT_GE(tl_runtime_device_count(rt), 1u);
  EXPECT_OK(tl_runtime_backend_status(rt, TL_BACKEND_CPU));
  EXPECT_ERR(tl_runtime_backend_status(rt, static_cast<tl_backend_t>(9)), "INVALID_ARGUMENT", "backend 9 unknown");
  EXPECT_ERR(tl_runtime_backend_status(nullptr, TL_BACKEND_CPU), "INVALID_ARGUMENT", "runtime is NULL");
  tl_runtime_release(rt);

  tl_runtime_options_t o = Options();
  ASSERT_OK(tl_runtime_create(&o, &rt));
  EXPECT_ERR(tl_runtime_backend_status(rt, TL_BACKEND_CUDA), "FAILED_PRECONDITION",
             "backend cuda excluded by backend_mask 0x10");
  tl_runtime_retain(rt);
  tl_runtime_release(rt);
  tl_runtime_release(rt);
  tl_runtime_release(nullptr);
}

//===--- devices ---===//

TEST_F(Api, Devices) {
  ASSERT_EQ(tl_runtime_device_count(rt), 1u);
  EXPECT_EQ(tl_runtime_device_count(nullptr), 0u);
  tl_device_t* d = nullptr;
  EXPECT_ERR(tl_runtime_device_at(rt, 1, &d), "OUT_OF_RANGE", "device index 1 out of range (1 devices)");
  ASSERT_OK(tl_runtime_device_at(rt, 0, &d));
  EXPECT_EQ(d, cpu);
  tl_device_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_OK(tl_device_info(d, &info));
  EXPECT_EQ(info.backend, static_cast<uint32_t>(TL_BACKEND_CPU));
  EXPECT_EQ(std::string(info.arch).rfind("x86-64", 0), 0u) << info.arch;
  EXPECT_TRUE(info.flags & TL_DEVICE_FLAG_CAN_LAUNCH);
  EXPECT_EQ(info.compute_units, 2u);
  EXPECT_GT(info.memory_bytes, 0u);
  // An older caller's smaller struct: nothing past it is written.
  tl_device_info_t small;
  memset(&small, 0x5A, sizeof(small));
  small.struct_size = offsetof(tl_device_info_t, name);
  ASSERT_OK(tl_device_info(d, &small));
  EXPECT_EQ(small.backend, static_cast<uint32_t>(TL_BACKEND_CPU));
  EXPECT_EQ(static_cast<unsigned char>(small.name[0]), 0x5A);
  small.struct_size = 4;
  EXPECT_ERR(tl_device_info(d, &small), "INVALID_ARGUMENT", "struct_size 4 too small");
  EXPECT_ERR(tl_device_info(nullptr, &info), "INVALID_ARGUMENT", "device is NULL");
  std::string json = tl_device_describe(d);
  EXPECT_NE(json.find("\"backend\": \"cpu\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"xcr0\""), std::string::npos) << json;
  tl_device_retain(d);
  tl_device_release(d);
  tl_device_release(d);
}

TEST_F(Api, DefaultDeviceSpecs) {
  tl_device_t* d = nullptr;
  ASSERT_OK(tl_runtime_default_device(rt, nullptr, &d));
  EXPECT_EQ(d, cpu);
  tl_device_release(d);
  ASSERT_OK(tl_runtime_default_device(rt, "0", &d));
  tl_device_release(d);
  ASSERT_OK(tl_runtime_default_device(rt, "cpu:0", &d));
  tl_device_release(d);
  EXPECT_ERR(tl_runtime_default_device(rt, "cpu:1", &d), "NOT_FOUND", "no device 'cpu:1' (0 = cpu:0");
  EXPECT_ERR(tl_runtime_default_device(rt, "cuda", &d), "NOT_FOUND", "excluded by backend_mask");
  EXPECT_ERR(tl_runtime_default_device(rt, "tpu:0", &d), "INVALID_ARGUMENT", "unknown backend 'tpu'");
  EXPECT_ERR(tl_runtime_default_device(rt, "cpu:x", &d), "INVALID_ARGUMENT", "expected <backend>[:<ordinal>]");
  EXPECT_ERR(tl_runtime_default_device(rt, "7", &d), "NOT_FOUND", "device '7' out of range");
  EXPECT_EQ(d, nullptr);
}

TEST(ApiEnvironment, TlDeviceAndForceVariant) {
  setenv("TL_DEVICE", "cpu:3", 1);
  setenv("TL_FORCE_VARIANT", "nothing,cpu.x86-64-v2", 1);
  tl_runtime_options_t o = Options(0);
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(&o, &rt));
  tl_device_t* d = nullptr;
  EXPECT_ERR(tl_runtime_default_device(rt, nullptr, &d), "NOT_FOUND", "TL_DEVICE: no device 'cpu:3'");
  ASSERT_OK(tl_runtime_default_device(rt, "cpu", &d));
  auto bytes = StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b));
  tl_kernel_t* k = nullptr;
  ASSERT_OK(tl_bundle_find_kernel(b, "gemm", &k));
  tl_prepared_t* p = nullptr;
  ASSERT_OK(tl_kernel_prepare(k, d, 0, &p));
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  ASSERT_OK(tl_prepared_variant_info(p, &vi));
  EXPECT_STREQ(vi.id, "cpu.x86-64-v2");
  EXPECT_NE(std::string(tl_prepared_explain(p)).find("forced by TL_FORCE_VARIANT: cpu.x86-64-v2"), std::string::npos);
  tl_prepared_release(p);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(d);
  tl_runtime_release(rt);
  unsetenv("TL_DEVICE");
  unsetenv("TL_FORCE_VARIANT");
}

//===--- bundles and kernels ---===//

TEST_F(Api, BundleOpenErrors) {
  tl_bundle_t* b = reinterpret_cast<tl_bundle_t*>(1);
  EXPECT_ERR(tl_bundle_open_file(rt, "/nonexistent/x.tlb", &b), "", "/nonexistent/x.tlb");
  EXPECT_EQ(b, nullptr);
  EXPECT_ERR(tl_bundle_open_file(rt, nullptr, &b), "INVALID_ARGUMENT", "path is NULL");
  EXPECT_ERR(tl_bundle_open_file(nullptr, "x", &b), "INVALID_ARGUMENT", "runtime is NULL");
  std::vector<uint8_t> junk(100, 7);
  std::string e = S(tl_bundle_open_memory(rt, junk.data(), junk.size(), nullptr, nullptr, &b));
  EXPECT_NE(e.find("opening bundle from memory"), std::string::npos) << e;
  EXPECT_ERR(tl_bundle_open_memory(rt, nullptr, 10, nullptr, nullptr, &b), "INVALID_ARGUMENT", "data is NULL with size 10");
  // A flipped manifest byte: the CRC catches it.
  auto bad = bytes;
  bad[100] ^= 0x40;
  EXPECT_ERR(tl_bundle_open_memory(rt, bad.data(), bad.size(), nullptr, nullptr, &b), "DATA_LOSS", "");
}

struct Released {
  std::atomic<int> calls{0};
  const void* data = nullptr;
  static void Fn(void* user, const void* data, size_t) {
    auto* r = static_cast<Released*>(user);
    r->data = data;
    r->calls++;
  }
};

TEST_F(Api, BorrowedBundleIsReleasedExactlyOnce) {
  Released r;
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), Released::Fn, &r, &b));
  EXPECT_EQ(r.calls, 0);
  tl_bundle_retain(b);
  tl_bundle_release(b);
  EXPECT_EQ(r.calls, 0);
  tl_bundle_release(b);
  EXPECT_EQ(r.calls, 1);
  EXPECT_EQ(r.data, bytes.data());
  // On failure too.
  Released f;
  std::vector<uint8_t> junk(10, 0);
  EXPECT_NE(S(tl_bundle_open_memory(rt, junk.data(), junk.size(), Released::Fn, &f, &b)), "");
  EXPECT_EQ(f.calls, 1);
  Released g;
  EXPECT_NE(S(tl_bundle_open_memory(rt, junk.data(), junk.size(), Released::Fn, &g, nullptr)), "");
  EXPECT_EQ(g.calls, 1);
}

TEST_F(Api, OpenFileAndVerify) {
  std::string path = tl::rt::testing::WriteTemp("api_standard.tlb", bytes);
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_file(rt, path.c_str(), &b));
  EXPECT_EQ(tl_bundle_kernel_count(b), 4u);
  EXPECT_OK(tl_bundle_verify(b));
  tl_bundle_release(b);
  // A flipped payload byte (the last byte of the file lies in the payload
  // region): the bundle opens, verification and prepare catch it.
  auto bad = bytes;
  bad[bad.size() - 1] ^= 1;
  ASSERT_OK(tl_bundle_open_memory(rt, bad.data(), bad.size(), nullptr, nullptr, &b));
  EXPECT_ERR(tl_bundle_verify(b), "DATA_LOSS", "");
  tl_bundle_release(b);
  EXPECT_ERR(tl_bundle_verify(nullptr), "INVALID_ARGUMENT", "bundle is NULL");
}

TEST_F(Api, KernelReflection) {
  EXPECT_EQ(tl_bundle_kernel_count(bundle), 4u);
  EXPECT_EQ(tl_bundle_kernel_count(nullptr), 0u);
  tl_kernel_t* k = nullptr;
  ASSERT_OK(tl_bundle_kernel_at(bundle, 0, &k));
  EXPECT_STREQ(tl_kernel_name(k), "fail_at");  // sorted by name
  tl_kernel_release(k);
  EXPECT_ERR(tl_bundle_kernel_at(bundle, 4, &k), "OUT_OF_RANGE", "kernel index 4 out of range (4 kernels)");
  EXPECT_ERR(tl_bundle_find_kernel(bundle, "conv", &k), "NOT_FOUND",
             "no kernel 'conv' in the bundle (4 kernels: fail_at, gemm, saxpy, vadd)");
  EXPECT_ERR(tl_bundle_find_kernel(bundle, nullptr, &k), "INVALID_ARGUMENT", "name is NULL");

  k = Kernel("gemm");
  ASSERT_EQ(tl_kernel_param_count(k), 3u);
  ASSERT_EQ(tl_kernel_symbol_count(k), 3u);
  EXPECT_STREQ(tl_kernel_symbol_name(k, 2), "K");
  EXPECT_EQ(tl_kernel_symbol_name(k, 3), nullptr);
  tl_param_info_t pi;
  pi.struct_size = sizeof(pi);
  ASSERT_OK(tl_kernel_param_info(k, 2, &pi));
  EXPECT_STREQ(pi.name, "C");
  EXPECT_EQ(pi.kind, static_cast<uint32_t>(TL_PARAM_BUFFER));
  EXPECT_EQ(pi.access, static_cast<uint32_t>(TL_ACCESS_WRITE));
  EXPECT_EQ(pi.rank, 2);
  EXPECT_EQ(pi.dtype.code, TL_DTYPE_FLOAT);
  EXPECT_EQ(pi.dtype.bits, 32);
  EXPECT_ERR(tl_kernel_param_info(k, 3, &pi), "OUT_OF_RANGE", "kernel 'gemm': parameter 3 out of range (3 parameters)");
  tl_dim_info_t di;
  di.struct_size = sizeof(di);
  ASSERT_OK(tl_kernel_param_dim(k, 0, 1, &di));
  EXPECT_EQ(di.symbol, 2);
  EXPECT_STREQ(di.symbol_name, "K");
  EXPECT_EQ(di.static_size, -1);
  EXPECT_ERR(tl_kernel_param_dim(k, 0, 2, &di), "OUT_OF_RANGE", "kernel 'gemm' parameter 'A': dim 2 out of range (rank 2)");
  EXPECT_GE(tl_kernel_variant_count(k), 6u);
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  ASSERT_OK(tl_kernel_variant_info(k, 0, &vi));
  EXPECT_STREQ(vi.id, "cpu.x86-64-v2");
  EXPECT_EQ(vi.code_kind, static_cast<uint32_t>(TL_CODE_ELF));
  EXPECT_EQ(vi.shared_bytes, 1024u);
  EXPECT_ERR(tl_kernel_variant_info(k, 99, &vi), "OUT_OF_RANGE", "variant 99 out of range");
  EXPECT_EQ(tl_kernel_attr(k, "out_idx"), nullptr);
  tl_kernel_release(k);

  k = Kernel("saxpy");
  ASSERT_OK(tl_kernel_param_info(k, 3, &pi));
  EXPECT_EQ(pi.kind, static_cast<uint32_t>(TL_PARAM_SCALAR));
  EXPECT_EQ(pi.binds_symbol, 0);
  EXPECT_EQ(pi.rank, 0);
  tl_kernel_release(k);
  k = Kernel("vadd");
  EXPECT_STREQ(tl_kernel_attr(k, "out_idx"), "2");
  EXPECT_EQ(tl_kernel_attr(k, nullptr), nullptr);
  tl_kernel_retain(k);  // a kernel reference is a bundle reference
  tl_kernel_release(k);
  tl_kernel_release(k);
  tl_kernel_release(nullptr);
  EXPECT_STREQ(tl_kernel_name(nullptr), "");
  EXPECT_EQ(tl_kernel_param_count(nullptr), 0u);
}

//===--- prepare ---===//

TEST_F(Api, PrepareChoosesTheBestCpuLevelAndExplains) {
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_OK(tl_device_info(cpu, &info));
  tl_prepared_t* p = Prepare("gemm");
  ASSERT_NE(p, nullptr);
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  ASSERT_OK(tl_prepared_variant_info(p, &vi));
  EXPECT_EQ(std::string("cpu.") + info.arch, vi.id);  // the host's own level
  EXPECT_EQ(vi.jit, 0u);
  std::string explain = tl_prepared_explain(p);
  EXPECT_NE(explain.find("kernel 'gemm' on cpu device"), std::string::npos) << explain;
  EXPECT_NE(explain.find(std::string("chosen: ") + vi.id), std::string::npos) << explain;
  EXPECT_NE(explain.find("cuda.sm_90a: backend cuda, device is cpu"), std::string::npos) << explain;
  EXPECT_NE(explain.find("vk.spirv1.3: backend vulkan, device is cpu"), std::string::npos) << explain;
  // Same pair, same object.
  tl_prepared_t* again = Prepare("gemm");
  EXPECT_EQ(again, p);
  tl_prepared_release(again);
  tl_prepared_release(p);
  EXPECT_EQ(log.Count("prepared kernel 'gemm'"), 1);
  // After the last release, a new prepare builds a new object (it may reuse
  // the address, so count the log lines instead).
  p = Prepare("gemm");
  tl_prepared_release(p);
  EXPECT_EQ(log.Count("prepared kernel 'gemm'"), 2);
}

TEST_F(Api, PrepareErrors) {
  tl_kernel_t* k = Kernel("vadd");
  tl_prepared_t* p = nullptr;
  EXPECT_ERR(tl_kernel_prepare(k, cpu, 1, &p), "INVALID_ARGUMENT", "flags 0x1; none are defined");
  EXPECT_ERR(tl_kernel_prepare(nullptr, cpu, 0, &p), "INVALID_ARGUMENT", "kernel is NULL");
  EXPECT_ERR(tl_kernel_prepare(k, nullptr, 0, &p), "INVALID_ARGUMENT", "device is NULL");
  EXPECT_ERR(tl_kernel_prepare(k, cpu, 0, nullptr), "INVALID_ARGUMENT", "out_prepared is NULL");
  tl_kernel_release(k);
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  EXPECT_ERR(tl_prepared_variant_info(nullptr, &vi), "INVALID_ARGUMENT", "prepared is NULL");
  EXPECT_STREQ(tl_prepared_explain(nullptr), "");
}

// One-kernel bundles around a given library, for the loader's error paths.
std::vector<uint8_t> OneKernelBundle(const std::string& lib, int level, const std::string& entry = "vadd",
                                     int params = 3) {
  tl::formats::BundleWriter writer;
  uint32_t payload = writer.AddPayload(KernelLibrary(lib));
  auto k = std::make_unique<tl::bundle::KernelT>();
  k->name = "vadd";
  k->symbols = {"N"};
  for (int i = 0; i < params; ++i) k->params.push_back(BufferParam(std::string(1, static_cast<char>('A' + i)), {{-1, 0, 1}}));
  k->variants.push_back(CpuVariant(level, payload, entry, {{1, 0, 0, 256, 6}, {0, 1}, {0, 1}}));
  EXPECT_TRUE(writer.AddKernel(std::move(k)).ok());
  return writer.Finish().value();
}

std::string PrepareError(tl_runtime_t* rt, tl_device_t* cpu, const std::vector<uint8_t>& bytes) {
  tl_bundle_t* b = nullptr;
  EXPECT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b));
  tl_kernel_t* k = nullptr;
  EXPECT_OK(tl_bundle_find_kernel(b, "vadd", &k));
  tl_prepared_t* p = nullptr;
  std::string e = S(tl_kernel_prepare(k, cpu, 0, &p));
  EXPECT_EQ(p, nullptr);
  tl_kernel_release(k);
  tl_bundle_release(b);
  return e;
}

TEST_F(Api, BrokenKernelLibrariesAreRefusedAtPrepare) {
  auto has = [](const std::string& e, const char* code, const char* fragment) {
    EXPECT_EQ(e.rfind(code, 0), 0u) << e;
    EXPECT_NE(e.find(fragment), std::string::npos) << e;
  };
  has(PrepareError(rt, cpu, OneKernelBundle("no_query", 2)), "INVALID_ARGUMENT", "does not export tl_cpu_library_query");
  has(PrepareError(rt, cpu, OneKernelBundle("query_null", 2)), "INCOMPATIBLE", "cannot serve CPU ABI version 1.0");
  has(PrepareError(rt, cpu, OneKernelBundle("abi_major9", 2)), "INCOMPATIBLE", "has CPU ABI 9.0, this runtime speaks 1.x");
  has(PrepareError(rt, cpu, OneKernelBundle("wrong_level", 2)), "INCOMPATIBLE", "library built for x86-64-v4, manifest says x86-64-v2");
  has(PrepareError(rt, cpu, OneKernelBundle("needs_stdcxx", 2)), "INVALID_ARGUMENT", "needs 'libstdc++.so.6'");
  has(PrepareError(rt, cpu, OneKernelBundle("v2", 2, "conv")), "NOT_FOUND",
      "entry point 'conv' not in the library (has: vadd, saxpy, gemm, fail_at)");
  has(PrepareError(rt, cpu, OneKernelBundle("v2", 2, "vadd", 2)), "INCOMPATIBLE",
      "the library's 'vadd' takes 3 parameters, the manifest declares 2");
}

TEST_F(Api, NoUsableVariantListsEveryRejection) {
  tl::rt::testing::StandardBundleOptions o;
  o.levels = {};
  o.guarded_vadd = false;
  auto gpu_only = StandardBundle(o);
  std::string e = PrepareError(rt, cpu, gpu_only);
  EXPECT_EQ(e.rfind("INCOMPATIBLE: kernel 'vadd': no variant runs on cpu device", 0), 0u) << e;
  EXPECT_NE(e.find("3 variant(s) rejected: [cuda.sm_90a: backend cuda, device is cpu] [cuda.compute_80: backend cuda, "
                   "device is cpu] [vk.spirv1.3: backend vulkan, device is cpu]"), std::string::npos) << e;
}

TEST_F(Api, CorruptPayloadFailsPrepareBeforeLoading) {
  tl::rt::testing::StandardBundleOptions o;
  o.levels = {2};
  o.gpu_variants = false;
  auto b = StandardBundle(o);
  b[b.size() - 1] ^= 1;  // inside the (only) payload
  std::string e = PrepareError(rt, cpu, b);
  EXPECT_EQ(e.rfind("DATA_LOSS", 0), 0u) << e;
  EXPECT_NE(e.find("kernel 'vadd' variant 'cpu.x86-64-v2"), std::string::npos) << e;
}

TEST_F(Api, IdenticalPayloadsAreLoadedOnce) {
  // Two bundles with the same bytes: the kernel library is loaded once per
  // payload hash and shared.
  tl_bundle_t* b2 = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b2));
  tl_prepared_t* p1 = Prepare("vadd");
  tl_kernel_t* k2 = nullptr;
  ASSERT_OK(tl_bundle_find_kernel(b2, "saxpy", &k2));
  tl_prepared_t* p2 = nullptr;
  ASSERT_OK(tl_kernel_prepare(k2, cpu, 0, &p2));
  EXPECT_NE(p1, p2);
  EXPECT_EQ(log.Count("cpu: loaded"), 1);
  tl_prepared_release(p1);
  tl_prepared_release(p2);
  tl_kernel_release(k2);
  tl_bundle_release(b2);
}

//===--- launch ---===//

TEST_F(Api, VaddMatchesReference) {
  tl_prepared_t* p = Prepare("vadd");
  for (int64_t n : {1, 255, 256, 1000, 100003}) {
    auto a = Random(n, 1), b = Random(n, 2);
    std::vector<float> c(n, -7.0f);
    tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(b.data(), kF32, 1, &n, nullptr),
                        tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
    ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << "n=" << n << " i=" << i;
  }
  tl_prepared_release(p);
}

TEST_F(Api, SaxpyWithScalars) {
  tl_prepared_t* p = Prepare("saxpy");
  int64_t n = 5000;
  auto x = Random(n, 3), y = Random(n, 4);
  auto expect = y;
  for (int64_t i = 0; i < n; ++i) expect[i] = 2.5f * x[i] + y[i];
  tl_arg_t args[4] = {tl_arg_f32(2.5f), tl_arg_tensor(x.data(), kF32, 1, &n, nullptr),
                      tl_arg_tensor(y.data(), kF32, 1, &n, nullptr), tl_arg_i32(static_cast<int32_t>(n))};
  ASSERT_OK(tl_launch(p, nullptr, 4, args, nullptr));
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], expect[i]) << i;
  args[3] = tl_arg_i32(4999);
  EXPECT_ERR(tl_launch(p, nullptr, 4, args, nullptr), "INVALID_ARGUMENT",
             "kernel 'saxpy' argument 3 'n': value is 4999, but symbol 'N' is 5000 (from argument 1 'X' dim 0)");
  args[0] = tl_arg_f64(2.5);
  EXPECT_ERR(tl_launch(p, nullptr, 4, args, nullptr), "INVALID_ARGUMENT",
             "kernel 'saxpy' argument 0 'a': dtype is float64, expected float32");
  tl_prepared_release(p);
}

TEST_F(Api, GemmMatchesReferenceOnRaggedShapes) {
  tl_prepared_t* p = Prepare("gemm");
  const int64_t M = 37, N = 53, K = 29;
  auto A = Random(M * K, 5), B = Random(K * N, 6);
  std::vector<float> C(M * N, 0.0f);
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  tl_arg_t args[3] = {tl_arg_tensor(A.data(), kF32, 2, sa, nullptr), tl_arg_tensor(B.data(), kF32, 2, sb, nullptr),
                      tl_arg_tensor(C.data(), kF32, 2, sc, nullptr)};
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(A[i * K + k]) * B[k * N + j];
      ASSERT_NEAR(C[i * N + j], ref, 1e-4) << i << "," << j;
    }
  }
  EXPECT_EQ(log.Count("grid (4, 3, 1)"), 1);  // ceildiv(53,16) x ceildiv(37,16) from the bundle's grid expressions
  sc[1] = 100;
  EXPECT_ERR(tl_launch(p, nullptr, 3, args, nullptr), "INVALID_ARGUMENT",
             "kernel 'gemm' argument 2 'C': dim 1 is 100, but symbol 'N' is 53 (from argument 1 'B' dim 1)");
  tl_prepared_release(p);
}

TEST_F(Api, ExplicitGridAndLimits) {
  tl_prepared_t* p = Prepare("vadd");
  int64_t n = 1024;
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(b.data(), kF32, 1, &n, nullptr),
                      tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
  tl_launch_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.grid[0] = 2;  // only the first 512 elements
  o.grid[1] = o.grid[2] = 1;
  ASSERT_OK(tl_launch(p, nullptr, 3, args, &o));
  EXPECT_EQ(c[511], 3.0f);
  EXPECT_EQ(c[512], 0.0f);
  o.grid[0] = 3;  // {3, 0, 0} reads as {3, 1, 1}
  o.grid[1] = o.grid[2] = 0;
  ASSERT_OK(tl_launch(p, nullptr, 3, args, &o));
  EXPECT_EQ(c[767], 3.0f);
  EXPECT_EQ(c[768], 0.0f);
  o.grid[1] = o.grid[2] = 1;
  o.grid[1] = 70000;
  EXPECT_ERR(tl_launch(p, nullptr, 3, args, &o), "INVALID_ARGUMENT", "grid y is 70000, device limit 65535");
  o.grid[1] = 1;
  o.flags = 4;
  EXPECT_ERR(tl_launch(p, nullptr, 3, args, &o), "INVALID_ARGUMENT", "flags 0x4; none are defined");
  o.struct_size = 2;
  EXPECT_ERR(tl_launch(p, nullptr, 3, args, &o), "INVALID_ARGUMENT", "struct_size 2 too small");
  EXPECT_ERR(tl_launch(p, nullptr, 2, args, nullptr), "INVALID_ARGUMENT", "kernel 'vadd' takes 3 argument(s) (A, B, C), got 2");
  EXPECT_ERR(tl_launch(p, nullptr, 3, nullptr, nullptr), "INVALID_ARGUMENT", "args is NULL with 3 arguments");
  EXPECT_ERR(tl_launch(nullptr, nullptr, 0, nullptr, nullptr), "INVALID_ARGUMENT", "prepared is NULL");
  tl_prepared_release(p);
}

TEST_F(Api, BlockFailureIsReportedWithItsIndex) {
  tl_prepared_t* p = Prepare("fail_at");
  int64_t n = 10;
  std::vector<float> x(n);
  tl_arg_t arg = tl_arg_tensor(x.data(), kF32, 1, &n, nullptr);
  EXPECT_ERR(tl_launch(p, nullptr, 1, &arg, nullptr), "INTERNAL", "kernel 'fail_at' variant 'cpu.x86-64-v");
  EXPECT_ERR(tl_launch(p, nullptr, 1, &arg, nullptr), "INTERNAL", "block (3, 0, 0) returned 7");
  n = 3;  // grid x = N = 3: block 3 never runs
  EXPECT_OK(tl_launch(p, nullptr, 1, &arg, nullptr));
  n = 0;  // an empty problem: grid 0, nothing runs
  EXPECT_OK(tl_launch(p, nullptr, 1, &arg, nullptr));
  tl_prepared_release(p);
}

TEST(ApiGuards, LaunchTakesTheFirstVariantWhoseGuardsHold) {
  Log log;
  tl_runtime_options_t o = Options();
  o.log = Log::Fn;
  o.log_user = &log;
  o.log_level = TL_LOG_DEBUG;
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(&o, &rt));
  tl_device_t* cpu = nullptr;
  ASSERT_OK(tl_runtime_default_device(rt, "cpu", &cpu));
  tl::rt::testing::StandardBundleOptions bo;
  bo.levels = {2};
  auto bytes = StandardBundle(bo);
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b));
  tl_kernel_t* k = nullptr;
  ASSERT_OK(tl_bundle_find_kernel(b, "vadd", &k));
  tl_prepared_t* p = nullptr;
  ASSERT_OK(tl_kernel_prepare(k, cpu, 0, &p));
  std::string explain = tl_prepared_explain(p);
  EXPECT_NE(explain.find("chosen: cpu.x86-64-v2.aligned64"), std::string::npos) << explain;
  EXPECT_NE(explain.find("2. cpu.x86-64-v2: "), std::string::npos) << explain;
  // The fallback is loaded lazily: by the first launch that needs it, once
  // (for a CUDA cubin with guards, its PTX fallback is not JIT-compiled at
  // prepare).
  EXPECT_NE(explain.find("  fallback cpu.x86-64-v2: loaded by the first launch whose arguments fail the guards"),
            std::string::npos)
      << explain;
  EXPECT_EQ(log.Count("loaded fallback variant"), 0);
  std::vector<float> storage(1024 + 64);
  float* aligned = storage.data();
  while (reinterpret_cast<uintptr_t>(aligned) % 64) ++aligned;
  int64_t n = 512;
  tl_arg_t args[3] = {tl_arg_tensor(aligned, kF32, 1, &n, nullptr), tl_arg_tensor(aligned, kF32, 1, &n, nullptr),
                      tl_arg_tensor(aligned + 512, kF32, 1, &n, nullptr)};
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(log.Count("launch kernel 'vadd' variant 'cpu.x86-64-v2.aligned64'"), 1);
  args[0].tensor.data = aligned + 1;  // 4-byte aligned only: the guard fails, the generic variant runs
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(log.Count("launch kernel 'vadd' variant 'cpu.x86-64-v2' "), 1);
  EXPECT_EQ(log.Count("kernel 'vadd': loaded fallback variant 'cpu.x86-64-v2' (arguments fail: [cpu.x86-64-v2.aligned64: "
                      "argument 0 'A' (pointer "),
            1);
  for (int i = 0; i < 3; ++i) ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(log.Count("launch kernel 'vadd' variant 'cpu.x86-64-v2' "), 4);
  EXPECT_EQ(log.Count("loaded fallback variant"), 1);  // once
  tl_prepared_release(p);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(cpu);
  tl_runtime_release(rt);
}

//===--- buffers and streams ---===//

TEST_F(Api, Buffers) {
  tl_buffer_t* buf = nullptr;
  ASSERT_OK(tl_buffer_allocate(cpu, 4096, &buf));
  EXPECT_EQ(tl_buffer_size(buf), 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tl_buffer_device_pointer(buf)) % 256, 0u);
  std::vector<uint8_t> in(100, 0xAB), out(100, 0);
  ASSERT_OK(tl_buffer_copy_from_host(buf, 10, in.data(), in.size(), nullptr));
  ASSERT_OK(tl_buffer_copy_to_host(buf, 10, out.data(), out.size(), nullptr));
  EXPECT_EQ(in, out);
  EXPECT_ERR(tl_buffer_copy_from_host(buf, 4000, in.data(), 100, nullptr), "OUT_OF_RANGE",
             "range [4000, 4000 + 100) exceeds the buffer's 4096 bytes");
  EXPECT_ERR(tl_buffer_copy_to_host(buf, 0, nullptr, 100, nullptr), "INVALID_ARGUMENT", "host pointer is NULL");
  EXPECT_ERR(tl_buffer_copy_to_host(nullptr, 0, out.data(), 1, nullptr), "INVALID_ARGUMENT", "buffer is NULL");
  tl_buffer_retain(buf);
  tl_buffer_release(buf);
  tl_buffer_release(buf);
  tl_buffer_release(nullptr);

  Released r;
  std::vector<float> external(256, 1.0f);
  ASSERT_OK(tl_buffer_import(cpu, external.data(), external.size() * 4, Released::Fn, &r, &buf));
  EXPECT_EQ(tl_buffer_device_pointer(buf), external.data());
  // A kernel runs on imported memory.
  tl_prepared_t* p = Prepare("vadd");
  int64_t n = 256;
  float* ptr = static_cast<float*>(tl_buffer_device_pointer(buf));
  tl_arg_t args[3] = {tl_arg_tensor(ptr, kF32, 1, &n, nullptr), tl_arg_tensor(ptr, kF32, 1, &n, nullptr),
                      tl_arg_tensor(ptr, kF32, 1, &n, nullptr)};
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(external[255], 2.0f);
  tl_prepared_release(p);
  tl_buffer_release(buf);
  EXPECT_EQ(r.calls, 1);
  EXPECT_ERR(tl_buffer_import(cpu, nullptr, 8, nullptr, nullptr, &buf), "INVALID_ARGUMENT", "pointer is NULL with size 8");
  EXPECT_ERR(tl_buffer_allocate(nullptr, 8, &buf), "INVALID_ARGUMENT", "device is NULL");
}

TEST_F(Api, StreamsRunInOrderAndReportErrorsAtSynchronize) {
  tl_stream_t* s = nullptr;
  ASSERT_OK(tl_stream_create(cpu, 0, &s));
  tl_stream_t* unused = nullptr;
  EXPECT_ERR(tl_stream_create(cpu, 3, &unused), "INVALID_ARGUMENT", "flags 0x3");
  tl_prepared_t* vadd = Prepare("vadd");
  tl_prepared_t* fail = Prepare("fail_at");
  tl_buffer_t* buf = nullptr;
  const int64_t n = 100000;
  ASSERT_OK(tl_buffer_allocate(cpu, n * 4, &buf));
  std::vector<float> a(n, 1.5f), c(n, 0.0f);
  // copy in -> c = a + a -> copy out, all queued on the stream.
  ASSERT_OK(tl_buffer_copy_from_host(buf, 0, a.data(), n * 4, s));
  float* dev = static_cast<float*>(tl_buffer_device_pointer(buf));
  int64_t shape = n;
  tl_arg_t args[3] = {tl_arg_tensor(dev, kF32, 1, &shape, nullptr), tl_arg_tensor(dev, kF32, 1, &shape, nullptr),
                      tl_arg_tensor(dev, kF32, 1, &shape, nullptr)};
  ASSERT_OK(tl_launch(vadd, s, 3, args, nullptr));
  ASSERT_OK(tl_buffer_copy_to_host(buf, 0, c.data(), n * 4, s));
  ASSERT_OK(tl_stream_synchronize(s, UINT64_MAX));
  EXPECT_EQ(c[0], 3.0f);
  EXPECT_EQ(c[n - 1], 3.0f);
  // A failing launch on a stream: the launch call succeeds (queued), the
  // failure comes back from synchronize, once.
  int64_t m = 8;
  tl_arg_t x = tl_arg_tensor(dev, kF32, 1, &m, nullptr);
  ASSERT_OK(tl_launch(fail, s, 1, &x, nullptr));
  EXPECT_ERR(tl_stream_synchronize(s, UINT64_MAX), "INTERNAL", "block (3, 0, 0) returned 7");
  EXPECT_OK(tl_stream_synchronize(s, UINT64_MAX));
  EXPECT_ERR(tl_stream_synchronize(nullptr, 0), "INVALID_ARGUMENT", "stream is NULL");
  tl_buffer_release(buf);
  tl_prepared_release(vadd);
  tl_prepared_release(fail);
  tl_stream_retain(s);
  tl_stream_release(s);
  tl_stream_release(s);
}

TEST_F(Api, StreamSynchronizeTimesOut) {
  tl_stream_t* s = nullptr;
  ASSERT_OK(tl_stream_create(cpu, 0, &s));
  tl_prepared_t* p = Prepare("gemm");
  const int64_t M = 384, N = 384, K = 384;
  std::vector<float> A(M * K, 1.0f), B(K * N, 1.0f), C(M * N, 0.0f);
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  tl_arg_t args[3] = {tl_arg_tensor(A.data(), kF32, 2, sa, nullptr), tl_arg_tensor(B.data(), kF32, 2, sb, nullptr),
                      tl_arg_tensor(C.data(), kF32, 2, sc, nullptr)};
  for (int i = 0; i < 8; ++i) ASSERT_OK(tl_launch(p, s, 3, args, nullptr));
  EXPECT_ERR(tl_stream_synchronize(s, 1), "DEADLINE_EXCEEDED", "still pending after 1 ns");
  ASSERT_OK(tl_stream_synchronize(s, UINT64_MAX));
  EXPECT_EQ(C[0], static_cast<float>(K));
  tl_prepared_release(p);
  tl_stream_release(s);
}

TEST_F(Api, WrappedTbbArena) {
  tbb::task_arena arena(2);
  tl_stream_t* s = nullptr;
  ASSERT_OK(tl_stream_wrap_native(cpu, &arena, &s));
  tl_stream_t* unused = nullptr;
  EXPECT_ERR(tl_stream_wrap_native(cpu, nullptr, &unused), "INVALID_ARGUMENT", "native stream (a tbb::task_arena*) is NULL");
  tl_prepared_t* p = Prepare("vadd");
  int64_t n = 3000;
  std::vector<float> a(n, 1.0f), c(n, 0.0f);
  tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(a.data(), kF32, 1, &n, nullptr),
                      tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
  ASSERT_OK(tl_launch(p, s, 3, args, nullptr));
  ASSERT_OK(tl_stream_synchronize(s, 0));
  EXPECT_EQ(c[n - 1], 2.0f);
  tl_prepared_release(p);
  tl_stream_release(s);
}

//===--- lifetimes, allocator, cache fallback ---===//

TEST(ApiLifetime, PreparedKernelOutlivesEverythingElse) {
  tl_runtime_options_t o = Options();
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(&o, &rt));
  tl_device_t* cpu = nullptr;
  ASSERT_OK(tl_runtime_default_device(rt, nullptr, &cpu));
  auto* bytes = new std::vector<uint8_t>(StandardBundle());
  Released r;
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes->data(), bytes->size(), Released::Fn, &r, &b));
  tl_kernel_t* k = nullptr;
  ASSERT_OK(tl_bundle_find_kernel(b, "vadd", &k));
  tl_prepared_t* p = nullptr;
  ASSERT_OK(tl_kernel_prepare(k, cpu, 0, &p));
  // Drop every other handle.
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(cpu);
  tl_runtime_release(rt);
  EXPECT_EQ(r.calls, 0);  // the bundle's bytes are still in use
  int64_t n = 777;
  std::vector<float> a(n, 2.0f), c(n, 0.0f);
  tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(a.data(), kF32, 1, &n, nullptr),
                      tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(c[n - 1], 4.0f);
  EXPECT_NE(std::string(tl_prepared_explain(p)).find("kernel 'vadd'"), std::string::npos);
  tl_prepared_release(p);
  EXPECT_EQ(r.calls, 1);
  delete bytes;
}

struct CountingAllocator {
  std::atomic<int> allocs{0}, frees{0};
  static void* Alloc(void* self, size_t size, size_t align) {
    static_cast<CountingAllocator*>(self)->allocs++;
    return aligned_alloc(align, (size + align - 1) / align * align);
  }
  static void Free(void* self, void* p) {
    static_cast<CountingAllocator*>(self)->frees++;
    free(p);
  }
};

TEST(ApiAllocator, HostAllocationsGoThroughTheCallerAllocator) {
  CountingAllocator counter;
  tl_runtime_options_t o = Options();
  o.host_allocator = {&counter, CountingAllocator::Alloc, CountingAllocator::Free};
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(&o, &rt));
  tl_device_t* cpu = nullptr;
  ASSERT_OK(tl_runtime_default_device(rt, nullptr, &cpu));
  auto bytes = StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b));  // copied
  tl_buffer_t* buf = nullptr;
  ASSERT_OK(tl_buffer_allocate(cpu, 1000, &buf));
  EXPECT_EQ(counter.allocs, 2);
  tl_buffer_release(buf);
  tl_bundle_release(b);
  EXPECT_EQ(counter.frees, 2);
  tl_device_release(cpu);
  tl_runtime_release(rt);
}

TEST(ApiCpuCache, NoMemfdUsesThePrivateCacheDirectory) {
  Log log;
  std::string dir = std::string(TL_TEST_TMP_DIR) + "/api_cache_" + std::to_string(getpid());
  tl_runtime_options_t o = Options(TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT | TL_RUNTIME_FLAG_CPU_NO_MEMFD);
  o.cpu_cache_dir = dir.c_str();
  o.log = Log::Fn;
  o.log_user = &log;
  o.log_level = TL_LOG_DEBUG;
  tl_runtime_t* rt = nullptr;
  ASSERT_OK(tl_runtime_create(&o, &rt));
  tl_device_t* cpu = nullptr;
  ASSERT_OK(tl_runtime_default_device(rt, nullptr, &cpu));
  auto bytes = StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_OK(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b));
  tl_kernel_t* k = nullptr;
  ASSERT_OK(tl_bundle_find_kernel(b, "vadd", &k));
  tl_prepared_t* p = nullptr;
  ASSERT_OK(tl_kernel_prepare(k, cpu, 0, &p));
  EXPECT_EQ(log.Count("from " + dir + "/cpu-"), 1);
  int64_t n = 10;
  std::vector<float> a(n, 1.0f), c(n);
  tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(a.data(), kF32, 1, &n, nullptr),
                      tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
  ASSERT_OK(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(c[9], 2.0f);
  tl_prepared_release(p);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(cpu);
  tl_runtime_release(rt);
}

}  // namespace
