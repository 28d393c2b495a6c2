// The Vulkan launch path through the C ABI (tl_* functions only), on SPIR-V
// kernels written as assembly (kernels/*.spvasm.in), assembled by spirv-as at
// build time and packed into bundles here with the formats library's writer,
// laid out as runtime/../VULKAN_CONTRACT.md says (one storage buffer per
// tensor, scalars then shape symbols in push constants).
//
// CI runs these on lavapipe (VK_ICD_FILENAMES is set by CMake, also with
// LP_NATIVE_VECTOR_WIDTH=128 and 512); tools/device/gpu_check.sh runs them on
// the NVIDIA Vulkan driver. Without a Vulkan device every test skips with the
// backend's status, except the test that checks exactly that.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tilelang/runtime.h"
#include "vulkan_test_bundles.h"

namespace {

using namespace tl::rt::vktest;

std::vector<uint8_t> Bytes(const unsigned char* data, size_t size) { return std::vector<uint8_t>(data, data + size); }

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

::testing::AssertionResult Has(const std::string& text, const std::string& fragment) {
  if (text.find(fragment) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << fragment << "' not in: " << text;
}

//===--------------------------------------------------------------------===//
// Fixture
//===--------------------------------------------------------------------===//

struct DeviceBuffer {
  tl_buffer_t* buffer = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { tl_buffer_release(buffer); }
  void* ptr() const { return tl_buffer_device_pointer(buffer); }
};

// A fresh directory under $TL_VK_TEST_TMP_DIR, else the build tree's tmp/
// (which does not exist where the binary travelled to another machine).
std::string TestTmpDir(const std::string& name) {
  const char* env = getenv("TL_VK_TEST_TMP_DIR");
  const std::string root = env && *env ? env : TL_VK_TEST_TMP_DIR;
  std::string dir = root + "/" + name;
  std::string cmd = "rm -rf '" + dir + "' && mkdir -p '" + dir + "' && chmod 700 '" + dir + "'";
  if (system(cmd.c_str()) != 0) abort();
  return dir;
}

class Vulkan : public ::testing::Test {
 protected:
  // Without a Vulkan device the test is skipped (GTEST_SKIP in SetUp stops
  // the body).
  void SetUp() override { Open(nullptr, false, /*skip_without_device=*/true); }
  void TearDown() override { Close(); }

  // A new runtime in place of the current one, inside a test body: the first
  // runtime had a device, so a runtime without one is a failure here, not a
  // skip. Call as ASSERT_NO_FATAL_FAILURE(Reopen(...)).
  void Reopen(const char* cache_dir = nullptr, bool debug_log = false) {
    Close();
    Open(cache_dir, debug_log, /*skip_without_device=*/false);
  }

  void Open(const char* cache_dir, bool debug_log, bool skip_without_device) {
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
    o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
    o.cpu_cache_dir = cache_dir;
    if (debug_log) {
      o.log = [](void* user, tl_log_level_t, const char* message, size_t length) {
        auto* self = static_cast<Vulkan*>(user);
        std::lock_guard<std::mutex> lock(self->log_mu_);
        self->logs_.emplace_back(message, length);
      };
      o.log_user = this;
      o.log_level = TL_LOG_DEBUG;
    }
    ASSERT_EQ(S(tl_runtime_create(&o, &rt_)), "");
    if (tl_runtime_device_count(rt_) == 0) {
      std::string why = S(tl_runtime_backend_status(rt_, TL_BACKEND_VULKAN));
      if (why.empty()) why = "the Vulkan loader reports no devices";
      if (skip_without_device) GTEST_SKIP() << "no Vulkan device: " << why;
      FAIL() << "a new runtime found no Vulkan device, though an earlier one in this process did: " << why;
    }
    ASSERT_EQ(S(tl_runtime_device_at(rt_, 0, &dev_)), "");
    info_.struct_size = sizeof(info_);
    ASSERT_EQ(S(tl_device_info(dev_, &info_)), "");
    ASSERT_TRUE(info_.flags & TL_DEVICE_FLAG_CAN_LAUNCH) << "Vulkan device '" << info_.name << "' cannot launch";
  }
  void Close() {
    tl_device_release(dev_);
    tl_runtime_release(rt_);
    dev_ = nullptr;
    rt_ = nullptr;
  }

  std::string Prepare(const std::vector<uint8_t>& bytes, const char* kernel, tl_prepared_t** out) {
    *out = nullptr;
    tl_bundle_t* b = nullptr;
    std::string s = S(tl_bundle_open_memory(rt_, bytes.data(), bytes.size(), nullptr, nullptr, &b));
    if (!s.empty()) return s;
    tl_kernel_t* k = nullptr;
    s = S(tl_bundle_find_kernel(b, kernel, &k));
    if (s.empty()) s = S(tl_kernel_prepare(k, dev_, 0, out));
    tl_kernel_release(k);
    tl_bundle_release(b);
    return s;
  }
  void Alloc(DeviceBuffer* b, size_t bytes) { ASSERT_EQ(S(tl_buffer_allocate(dev_, bytes, &b->buffer)), ""); }

  // Runs vadd on n random elements; "" or the first failure.
  void RunVadd(tl_prepared_t* p, int n, tl_stream_t* stream, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n), y(n), out(n, std::nanf(""));
    for (auto& v : x) v = dist(rng);
    for (auto& v : y) v = dist(rng);
    const float alpha = dist(rng) * 3.0f;
    DeviceBuffer dx, dy, dout;
    Alloc(&dx, n * 4);
    Alloc(&dy, n * 4);
    Alloc(&dout, n * 4);
    ASSERT_EQ(S(tl_buffer_copy_from_host(dx.buffer, 0, x.data(), n * 4, stream)), "");
    ASSERT_EQ(S(tl_buffer_copy_from_host(dy.buffer, 0, y.data(), n * 4, stream)), "");
    ASSERT_EQ(S(tl_buffer_copy_from_host(dout.buffer, 0, out.data(), n * 4, stream)), "");  // NaN poison
    const int64_t shape[1] = {n};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[4] = {tl_arg_tensor(dx.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(dy.ptr(), f32, 1, shape, nullptr),
                        tl_arg_tensor(dout.ptr(), f32, 1, shape, nullptr), tl_arg_f32(alpha)};
    ASSERT_EQ(S(tl_launch(p, stream, 4, args, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(dout.buffer, 0, out.data(), n * 4, stream)), "");
    if (stream) {
      ASSERT_EQ(S(tl_stream_synchronize(stream, UINT64_MAX)), "");
    }
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      const double ref = double(x[i]) + double(alpha) * y[i];
      if (!(std::fabs(out[i] - ref) <= 1e-6 * (1.0 + std::fabs(ref)))) {
        if (++bad <= 3) ADD_FAILURE() << "out[" << i << "] = " << out[i] << ", expected " << ref;
      }
    }
    EXPECT_EQ(bad, 0) << "of " << n << " elements";
  }

  void RunRowsum(tl_prepared_t* p, int M, int K, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> A(size_t(M) * K), out(M, std::nanf(""));
    for (auto& v : A) v = dist(rng);
    DeviceBuffer dA, dout;
    Alloc(&dA, A.size() * 4);
    Alloc(&dout, out.size() * 4);
    ASSERT_EQ(S(tl_buffer_copy_from_host(dA.buffer, 0, A.data(), A.size() * 4, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_from_host(dout.buffer, 0, out.data(), out.size() * 4, nullptr)), "");
    const int64_t sa[2] = {M, K}, so[1] = {M};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[2] = {tl_arg_tensor(dA.ptr(), f32, 2, sa, nullptr), tl_arg_tensor(dout.ptr(), f32, 1, so, nullptr)};
    ASSERT_EQ(S(tl_launch(p, nullptr, 2, args, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(dout.buffer, 0, out.data(), out.size() * 4, nullptr)), "");
    int bad = 0;
    for (int r = 0; r < M; ++r) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        ref += A[size_t(r) * K + k];
        mag += std::fabs(A[size_t(r) * K + k]);
      }
      if (!(std::fabs(out[r] - ref) <= 1e-5 * (1.0 + mag))) {
        if (++bad <= 3) ADD_FAILURE() << "out[" << r << "] = " << out[r] << ", expected " << ref;
      }
    }
    EXPECT_EQ(bad, 0) << "of " << M << " rows of " << K;
  }

  tl_runtime_t* rt_ = nullptr;
  tl_device_t* dev_ = nullptr;
  tl_device_info_t info_{};
  std::mutex log_mu_;
  std::vector<std::string> logs_;
};

//===--------------------------------------------------------------------===//
// Devices
//===--------------------------------------------------------------------===//

TEST_F(Vulkan, DeviceDescription) {
  EXPECT_EQ(info_.backend, TL_BACKEND_VULKAN);
  const std::string json = tl_device_describe(dev_);
  EXPECT_TRUE(Has(json, "\"backend\": \"vulkan\"")) << json;
  if (std::string(info_.name).find("llvmpipe") != std::string::npos) {
    EXPECT_TRUE(info_.flags & TL_DEVICE_FLAG_SOFTWARE);
    // LP_NATIVE_VECTOR_WIDTH sets lavapipe's subgroup size (bits / 32).
    const char* width = getenv("LP_NATIVE_VECTOR_WIDTH");
    const int sub = (width ? atoi(width) : 256) / 32;
    EXPECT_TRUE(Has(json, "\"subgroup_min\": " + std::to_string(sub))) << json;
    // Subgroup operations in compute shaders (Mesa 22.3 lavapipe: all but
    // clustered and quad).
    for (const char* op : {"basic", "vote", "arithmetic", "ballot", "shuffle", "shuffle_relative"}) {
      EXPECT_TRUE(Has(json, std::string("\"vk.subgroup.") + op + "\"")) << op;
    }
    // Lavapipe has no cooperative matrix: no shape tokens.
    EXPECT_EQ(json.find("vk.coopmat."), std::string::npos) << json;
  }
  // Cooperative-matrix shapes (VK_KHR_cooperative_matrix), printed for the log.
  std::string shapes;
  for (size_t at = json.find("\"vk.coopmat."); at != std::string::npos; at = json.find("\"vk.coopmat.", at + 1)) {
    shapes += " " + json.substr(at + 1, json.find('"', at + 1) - at - 1);
  }
  printf("[ vulkan ] %s (%s): cooperative-matrix shapes:%s\n", info_.name, info_.arch,
         shapes.empty() ? " none" : shapes.c_str());
  EXPECT_TRUE(Has(json, "\"vk.subgroup.basic\""));  // every Vulkan 1.1 device
  if (json.find("\"vk.ext.VK_KHR_cooperative_matrix\"") != std::string::npos) {
    EXPECT_FALSE(shapes.empty()) << "VK_KHR_cooperative_matrix without a subgroup-scope shape: " << json;
  }
}

TEST_F(Vulkan, DefaultDeviceIsTheCpuNotLavapipe) {
  const bool software = info_.flags & TL_DEVICE_FLAG_SOFTWARE;
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  tl_device_t* d = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, nullptr, &d)), "");
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(d, &info)), "");
  if (software) {
    EXPECT_EQ(info.backend, TL_BACKEND_CPU) << info.name;
  } else {  // a hardware GPU (CUDA's or this Vulkan device) ranks first
    EXPECT_NE(info.backend, TL_BACKEND_CPU) << info.name;
    EXPECT_FALSE(info.flags & TL_DEVICE_FLAG_SOFTWARE) << info.name;
  }
  tl_device_release(d);
  // Asked for by name, the Vulkan device is used.
  ASSERT_EQ(S(tl_runtime_default_device(rt, "vulkan", &d)), "");
  ASSERT_EQ(S(tl_device_info(d, &info)), "");
  EXPECT_EQ(info.backend, TL_BACKEND_VULKAN);
  tl_device_release(d);
  tl_runtime_release(rt);
}

TEST(VulkanLoader, MissingLoaderMakesTheBackendUnavailable) {
  // Driver libraries searched only in an empty directory: no libvulkan.so.1.
  const std::string dir = TestTmpDir("no_loader");
  const char* paths[1] = {dir.c_str()};
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.driver_search_paths = paths;
  o.driver_search_path_count = 1;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  const std::string why = S(tl_runtime_backend_status(rt, TL_BACKEND_VULKAN));
  EXPECT_TRUE(Has(why, "UNAVAILABLE")) << why;
  EXPECT_TRUE(Has(why, "libvulkan.so.1")) << why;
  for (size_t i = 0; i < tl_runtime_device_count(rt); ++i) {
    tl_device_t* d = nullptr;
    ASSERT_EQ(S(tl_runtime_device_at(rt, i, &d)), "");
    tl_device_info_t info;
    info.struct_size = sizeof(info);
    ASSERT_EQ(S(tl_device_info(d, &info)), "");
    EXPECT_NE(info.backend, TL_BACKEND_VULKAN);
    tl_device_release(d);
  }
  tl_device_t* d = nullptr;
  const std::string s = S(tl_runtime_default_device(rt, "vulkan:0", &d));
  EXPECT_TRUE(Has(s, "NOT_FOUND")) << s;
  EXPECT_TRUE(Has(s, "libvulkan.so.1")) << s;
  // The CPU still works.
  ASSERT_EQ(S(tl_runtime_default_device(rt, "cpu", &d)), "");
  tl_device_release(d);
  tl_runtime_release(rt);
}

//===--------------------------------------------------------------------===//
// Launches
//===--------------------------------------------------------------------===//

TEST_F(Vulkan, VaddMatchesReference) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  const std::string explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "vulkan.spirv1.3")) << explain;
  EXPECT_TRUE(Has(explain, "SPIR-V compute pipeline created")) << explain;
  for (int n : {1, 63, 64, 1000, 4097}) RunVadd(p, n, nullptr, 17 + n);
  tl_prepared_release(p);
}

TEST_F(Vulkan, VaddOnStreams) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  tl_stream_t* s = nullptr;
  ASSERT_EQ(S(tl_stream_create(dev_, 0, &s)), "");
  for (int n : {5, 777, 100000}) RunVadd(p, n, s, 3 + n);
  tl_stream_release(s);
  tl_prepared_release(p);
}

TEST_F(Vulkan, RowsumWithShapeSymbolsAndWorkgroupMemory) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(RowsumBundle(), "rowsum", &p), "");
  const std::string explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "256 B workgroup memory in the module")) << explain;
  RunRowsum(p, 37, 1000, 5);
  RunRowsum(p, 1, 1, 6);
  RunRowsum(p, 130, 63, 7);
  tl_prepared_release(p);
}

TEST_F(Vulkan, ScalarsOfBothSizesAtTheirAlignment) {
  tl_prepared_t* p = nullptr;
  const std::string json = tl_device_describe(dev_);
  const std::string st = Prepare(AxpbBundle(), "axpb_i64", &p);
  if (json.find("\"vk.feature.shaderInt64\"") == std::string::npos) {
    EXPECT_TRUE(Has(st, "INCOMPATIBLE")) << st;
    EXPECT_TRUE(Has(st, "needs feature vk.feature.shaderInt64")) << st;
    return;
  }
  ASSERT_EQ(st, "");
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int n : {1, 33, 1000}) {
    std::vector<float> x(n), out(n, std::nanf(""));
    for (auto& v : x) v = dist(rng);
    const float a = dist(rng) * 5.0f;
    const int64_t b = -(int64_t{1} << 20) + static_cast<int64_t>(rng() % 4096);  // exact in float
    DeviceBuffer dx, dout;
    Alloc(&dx, n * 4);
    Alloc(&dout, n * 4);
    ASSERT_EQ(S(tl_buffer_copy_from_host(dx.buffer, 0, x.data(), n * 4, nullptr)), "");
    const int64_t shape[1] = {n};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[4] = {tl_arg_tensor(dx.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(dout.ptr(), f32, 1, shape, nullptr),
                        tl_arg_f32(a), tl_arg_i64(b)};
    ASSERT_EQ(S(tl_launch(p, nullptr, 4, args, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(dout.buffer, 0, out.data(), n * 4, nullptr)), "");
    for (int i = 0; i < n; ++i) {
      const double ref = double(a) * x[i] + double(b);
      ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-6) << "n " << n << " element " << i;
    }
  }
  tl_prepared_release(p);
}

TEST_F(Vulkan, NarrowScalarsAreExtendedToFourBytes) {
  struct Case {
    uint8_t code, bits;
    int64_t value;
  };
  // The module reads s as int32: an 8- or 16-bit signed value must arrive
  // sign-extended, an unsigned one zero-extended.
  for (const Case& c : {Case{TL_DTYPE_INT, 8, -5}, Case{TL_DTYPE_INT, 16, -300}, Case{TL_DTYPE_UINT, 8, 250},
                        Case{TL_DTYPE_INT, 8, 100}}) {
    tl_prepared_t* p = nullptr;
    ASSERT_EQ(Prepare(AddiBundle(c.code, c.bits), "addi", &p), "");
    const int n = 100;
    std::vector<float> x(n), out(n);
    for (int i = 0; i < n; ++i) x[i] = 0.25f * i;
    DeviceBuffer dx, dout;
    Alloc(&dx, n * 4);
    Alloc(&dout, n * 4);
    ASSERT_EQ(S(tl_buffer_copy_from_host(dx.buffer, 0, x.data(), n * 4, nullptr)), "");
    const int64_t shape[1] = {n};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[3] = {tl_arg_tensor(dx.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(dout.ptr(), f32, 1, shape, nullptr),
                        tl_arg_scalar_bits(tl_dtype(c.code, c.bits), c.bits / 8,
                                           static_cast<uint64_t>(c.value) & ((uint64_t{1} << c.bits) - 1))};
    ASSERT_EQ(S(tl_launch(p, nullptr, 3, args, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(dout.buffer, 0, out.data(), n * 4, nullptr)), "");
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], x[i] + float(c.value)) << "dtype code " << int(c.code) << " bits " << int(c.bits) << " i " << i;
    }
    tl_prepared_release(p);
  }
}

TEST_F(Vulkan, EmptyGridLaunchesNothing) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  DeviceBuffer b;
  Alloc(&b, 64);
  const int64_t shape[1] = {0};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[4] = {tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr),
                      tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr), tl_arg_f32(1.0f)};
  EXPECT_EQ(S(tl_launch(p, nullptr, 4, args, nullptr)), "");
  tl_prepared_release(p);
}

TEST_F(Vulkan, DescriptorPoolPathWithoutPushDescriptors) {
  setenv("TL_VULKAN_NO_PUSH_DESCRIPTORS", "1", 1);
  Reopen();
  unsetenv("TL_VULKAN_NO_PUSH_DESCRIPTORS");
  if (HasFatalFailure()) return;
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  const std::string explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "(descriptor pool)")) << explain;
  RunVadd(p, 1000, nullptr, 77);
  tl_stream_t* s = nullptr;
  ASSERT_EQ(S(tl_stream_create(dev_, 0, &s)), "");
  RunVadd(p, 999, s, 78);
  tl_stream_release(s);
  tl_prepared_release(p);
}

TEST_F(Vulkan, CopiesThroughStagingAsOnADiscreteGpu) {
  setenv("TL_VULKAN_STAGING_ONLY", "1", 1);
  Reopen();
  unsetenv("TL_VULKAN_STAGING_ONLY");
  if (HasFatalFailure()) return;
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  RunVadd(p, 5000, nullptr, 31);
  // 40 MiB: three staging pieces each way, at an odd offset.
  const size_t n = (40u << 20) + 3;
  std::vector<uint8_t> in(n), out(n, 0);
  std::mt19937 rng(5);
  for (auto& v : in) v = static_cast<uint8_t>(rng());
  DeviceBuffer b;
  Alloc(&b, n + 7);
  ASSERT_EQ(S(tl_buffer_copy_from_host(b.buffer, 7, in.data(), n, nullptr)), "");
  ASSERT_EQ(S(tl_buffer_copy_to_host(b.buffer, 7, out.data(), n, nullptr)), "");
  EXPECT_TRUE(in == out);
  tl_prepared_release(p);
}

TEST_F(Vulkan, DebugLogTimesSynchronousLaunchesWithTimestamps) {
  ASSERT_NO_FATAL_FAILURE(Reopen(nullptr, /*debug_log=*/true));
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  RunVadd(p, 4096, nullptr, 9);
  tl_prepared_release(p);
  bool timed = false;
  std::lock_guard<std::mutex> lock(log_mu_);
  for (const auto& line : logs_) timed = timed || line.find("ms (timestamp queries)") != std::string::npos;
  EXPECT_TRUE(timed) << "no timestamp line among " << logs_.size() << " log lines";
}

TEST_F(Vulkan, ConcurrentLaunchesFromThreads) {
  tl_prepared_t* vadd = nullptr;
  tl_prepared_t* rowsum = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &vadd), "");
  ASSERT_EQ(Prepare(RowsumBundle(), "rowsum", &rowsum), "");
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      tl_stream_t* s = nullptr;
      if (t % 2 == 0) {
        EXPECT_EQ(S(tl_stream_create(dev_, 0, &s)), "");
      }
      for (int i = 0; i < 8; ++i) {
        RunVadd(vadd, 500 + 97 * t + i, s, 1000 * t + i);
        if (t % 3 == 0) RunRowsum(rowsum, 9 + t, 200 + i, 500 * t + i);
      }
      tl_stream_release(s);
    });
  }
  for (auto& th : threads) th.join();
  tl_prepared_release(vadd);
  tl_prepared_release(rowsum);
}

TEST_F(Vulkan, StreamSynchronizeHonoursTheTimeout) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(RowsumBundle(), "rowsum", &p), "");
  const int M = 2048, K = 4096;
  DeviceBuffer dA, dout;
  Alloc(&dA, size_t(M) * K * 4);
  Alloc(&dout, M * 4);
  std::vector<float> A(size_t(M) * K);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : A) v = dist(rng);
  tl_stream_t* s = nullptr;
  ASSERT_EQ(S(tl_stream_create(dev_, 0, &s)), "");
  ASSERT_EQ(S(tl_buffer_copy_from_host(dA.buffer, 0, A.data(), A.size() * 4, s)), "");
  const int64_t sa[2] = {M, K}, so[1] = {M};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[2] = {tl_arg_tensor(dA.ptr(), f32, 2, sa, nullptr), tl_arg_tensor(dout.ptr(), f32, 1, so, nullptr)};
  for (int i = 0; i < 4; ++i) ASSERT_EQ(S(tl_launch(p, s, 2, args, nullptr)), "");
  const std::string early = S(tl_stream_synchronize(s, 1));
  if (!early.empty()) {
    EXPECT_TRUE(Has(early, "DEADLINE_EXCEEDED")) << early;
    EXPECT_TRUE(Has(early, "timeout 1 ns")) << early;
  }
  EXPECT_EQ(S(tl_stream_synchronize(s, UINT64_MAX)), "");
  std::vector<float> out(M);
  ASSERT_EQ(S(tl_buffer_copy_to_host(dout.buffer, 0, out.data(), M * 4, nullptr)), "");
  for (int r = 0; r < M; r += 511) {
    double ref = 0;
    for (int k = 0; k < K; ++k) ref += A[size_t(r) * K + k];
    EXPECT_NEAR(out[r], ref, 1e-3) << "row " << r;
  }
  tl_stream_release(s);
  tl_prepared_release(p);
}

TEST_F(Vulkan, WrapNativeStreamIsUnimplemented) {
  tl_stream_t* s = nullptr;
  const std::string st = S(tl_stream_wrap_native(dev_, reinterpret_cast<void*>(0x1234), &s));
  EXPECT_TRUE(Has(st, "UNIMPLEMENTED")) << st;
  EXPECT_TRUE(Has(st, "use tl_stream_create")) << st;
  EXPECT_EQ(s, nullptr);
}

//===--------------------------------------------------------------------===//
// Memory
//===--------------------------------------------------------------------===//

TEST_F(Vulkan, DevicePointersAreVirtualAndDistinct) {
  DeviceBuffer a, b;
  Alloc(&a, 100);
  Alloc(&b, 100);
  const uint64_t pa = reinterpret_cast<uintptr_t>(a.ptr()), pb = reinterpret_cast<uintptr_t>(b.ptr());
  EXPECT_EQ(pa >> 56, 0x56u) << std::hex << pa;
  EXPECT_EQ(pa % 256, 0u);
  EXPECT_EQ(pb % 256, 0u);
  EXPECT_GE(pb > pa ? pb - pa : pa - pb, 100u);
}

TEST_F(Vulkan, BufferCopiesWithOffsets) {
  for (bool use_stream : {false, true}) {
    tl_stream_t* s = nullptr;
    if (use_stream) {
      ASSERT_EQ(S(tl_stream_create(dev_, 0, &s)), "");
    }
    DeviceBuffer b;
    Alloc(&b, 1000);
    std::vector<uint8_t> all(1000), part(300), back(1000, 0xEE);
    std::mt19937 rng(use_stream ? 2 : 1);
    for (auto& v : all) v = static_cast<uint8_t>(rng());
    for (auto& v : part) v = static_cast<uint8_t>(rng());
    ASSERT_EQ(S(tl_buffer_copy_from_host(b.buffer, 0, all.data(), 1000, s)), "");
    ASSERT_EQ(S(tl_buffer_copy_from_host(b.buffer, 123, part.data(), 300, s)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(b.buffer, 0, back.data(), 1000, s)), "");
    std::vector<uint8_t> mid(77, 0);
    ASSERT_EQ(S(tl_buffer_copy_to_host(b.buffer, 401, mid.data(), 77, s)), "");
    if (s) {
      ASSERT_EQ(S(tl_stream_synchronize(s, UINT64_MAX)), "");
    }
    std::vector<uint8_t> expect = all;
    std::copy(part.begin(), part.end(), expect.begin() + 123);
    EXPECT_EQ(back, expect);
    EXPECT_EQ(mid, std::vector<uint8_t>(expect.begin() + 401, expect.begin() + 478));
    const std::string oob = S(tl_buffer_copy_to_host(b.buffer, 990, back.data(), 11, s));
    EXPECT_TRUE(Has(oob, "OUT_OF_RANGE")) << oob;
    EXPECT_TRUE(Has(oob, "[990, 990 + 11) exceeds the buffer's 1000 bytes")) << oob;
    tl_stream_release(s);
  }
}

TEST_F(Vulkan, ImportedRangesLaunchAtOffsets) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(VaddSpec(), /*ptr_alignment=*/4), "vadd", &p), "");
  const int n = 300;
  const size_t stride = (4 * n + 255) / 256 * 256;  // x, y, out: 256-byte-aligned ranges of one buffer
  DeviceBuffer big;
  Alloc(&big, 256 + 3 * stride);
  std::vector<float> host((256 + 3 * stride) / 4);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (auto& v : host) v = dist(rng);
  ASSERT_EQ(S(tl_buffer_copy_from_host(big.buffer, 0, host.data(), host.size() * 4, nullptr)), "");
  uint8_t* base = static_cast<uint8_t*>(big.ptr());
  DeviceBuffer x, y;
  ASSERT_EQ(S(tl_buffer_import(dev_, base + 256, n * 4, nullptr, nullptr, &x.buffer)), "");
  ASSERT_EQ(S(tl_buffer_import(dev_, base + 256 + stride, n * 4, nullptr, nullptr, &y.buffer)), "");
  const int64_t shape[1] = {n};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[4] = {tl_arg_tensor(x.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(y.ptr(), f32, 1, shape, nullptr),
                      tl_arg_tensor(base + 256 + 2 * stride, f32, 1, shape, nullptr), tl_arg_f32(0.5f)};
  ASSERT_EQ(S(tl_launch(p, nullptr, 4, args, nullptr)), "");
  std::vector<float> after(host.size());
  ASSERT_EQ(S(tl_buffer_copy_to_host(big.buffer, 0, after.data(), after.size() * 4, nullptr)), "");
  const size_t xo = 256 / 4, yo = (256 + stride) / 4, oo = (256 + 2 * stride) / 4;
  for (int i = 0; i < n; ++i) {
    const double ref = double(host[xo + i]) + 0.5 * host[yo + i];
    ASSERT_NEAR(after[oo + i], ref, 1e-6 * (1 + std::fabs(ref))) << i;
  }
  for (size_t i = 0; i < xo; ++i) ASSERT_EQ(after[i], host[i]) << "untouched prefix " << i;
  // An offset the device cannot bind (when its alignment is above 4 bytes).
  tl_arg_t odd[4] = {tl_arg_tensor(base + 4, f32, 1, shape, nullptr), args[1], args[2], args[3]};
  const std::string st = S(tl_launch(p, nullptr, 4, odd, nullptr));
  if (!st.empty()) {
    EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
    EXPECT_TRUE(Has(st, "argument 0 'x': offset 4 inside its buffer is not a multiple of the device's "
                        "minStorageBufferOffsetAlignment"))
        << st;
  }
  tl_prepared_release(p);
}

TEST_F(Vulkan, ForeignPointersAreRejectedNamingTheArgument) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  const int n = 64;
  DeviceBuffer a, b;
  Alloc(&a, n * 4);
  Alloc(&b, n * 4);
  alignas(64) static float host[64];
  const int64_t shape[1] = {n};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[4] = {tl_arg_tensor(a.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(host, f32, 1, shape, nullptr),
                      tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr), tl_arg_f32(1.0f)};
  std::string st = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "kernel 'vadd' variant 'vulkan.spirv1.3' argument 1 'y': 0x")) << st;
  EXPECT_TRUE(Has(st, "is not a Vulkan device address")) << st;

  // A tensor reaching past its buffer.
  const int64_t too_long[1] = {n + 1};
  tl_arg_t longer[4] = {tl_arg_tensor(a.ptr(), f32, 1, too_long, nullptr), tl_arg_tensor(b.ptr(), f32, 1, too_long, nullptr),
                        tl_arg_tensor(b.ptr(), f32, 1, too_long, nullptr), tl_arg_f32(1.0f)};
  st = S(tl_launch(p, nullptr, 4, longer, nullptr));
  EXPECT_TRUE(Has(st, "argument 0 'x'")) << st;
  EXPECT_TRUE(Has(st, "exceeds its buffer: offset 0 of a 256-byte buffer")) << st;

  // A freed buffer's address.
  void* stale = nullptr;
  {
    DeviceBuffer gone;
    Alloc(&gone, n * 4);
    stale = gone.ptr();
  }
  tl_arg_t freed[4] = {args[0], tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr),
                       tl_arg_tensor(stale, f32, 1, shape, nullptr), tl_arg_f32(1.0f)};
  st = S(tl_launch(p, nullptr, 4, freed, nullptr));
  EXPECT_TRUE(Has(st, "argument 2 'out'")) << st;
  EXPECT_TRUE(Has(st, "is not inside any live buffer")) << st;

  // Import: host memory is refused, ranges of own buffers are fine.
  tl_buffer_t* imported = nullptr;
  st = S(tl_buffer_import(dev_, host, sizeof(host), nullptr, nullptr, &imported));
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "tl_buffer_import: argument 'device_pointer'")) << st;
  EXPECT_EQ(imported, nullptr);
  st = S(tl_buffer_import(dev_, a.ptr(), n * 4 + 1, nullptr, nullptr, &imported));
  EXPECT_TRUE(Has(st, "exceeds its buffer")) << st;
  ASSERT_EQ(S(tl_buffer_import(dev_, static_cast<uint8_t*>(a.ptr()) + 16, 32, nullptr, nullptr, &imported)), "");
  tl_buffer_release(imported);

  // Copies address a buffer's own range (the API checks), so a host pointer
  // cannot reach them; a scalar symbol above INT32_MAX is refused.
  tl_prepared_t* rs = nullptr;
  ASSERT_EQ(Prepare(RowsumBundle(), "rowsum", &rs), "");
  const int64_t huge[2] = {1, int64_t{3} << 30}, one[1] = {1};
  tl_arg_t h[2] = {tl_arg_tensor(a.ptr(), f32, 2, huge, nullptr), tl_arg_tensor(b.ptr(), f32, 1, one, nullptr)};
  st = S(tl_launch(rs, nullptr, 2, h, nullptr));
  EXPECT_TRUE(Has(st, "OUT_OF_RANGE")) << st;
  EXPECT_TRUE(Has(st, "shape symbol 'K' is 3221225472; Vulkan kernels take symbols as int32 (at most 2147483647)"))
      << st;
  tl_prepared_release(rs);
  tl_prepared_release(p);
}

TEST_F(Vulkan, BuffersOfAnotherDeviceAreRejected) {
  // A second runtime's device 0 is the same physical device, but its
  // addresses are its own.
  DeviceBuffer mine;
  Alloc(&mine, 256);
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  tl_runtime_t* rt2 = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt2)), "");
  tl_device_t* d2 = nullptr;
  ASSERT_EQ(S(tl_runtime_device_at(rt2, 0, &d2)), "");
  tl_buffer_t* other = nullptr;
  ASSERT_EQ(S(tl_buffer_allocate(d2, 4096, &other)), "");
  tl_buffer_t* imported = nullptr;
  const std::string st = S(tl_buffer_import(dev_, tl_buffer_device_pointer(other), 16, nullptr, nullptr, &imported));
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "belongs to another Vulkan device or runtime")) << st;
  EXPECT_NE(tl_buffer_device_pointer(other), mine.ptr());
  tl_buffer_release(other);
  tl_device_release(d2);
  tl_runtime_release(rt2);
}

//===--------------------------------------------------------------------===//
// Loading: module checks and limits before pipeline creation
//===--------------------------------------------------------------------===//

TEST_F(Vulkan, ModuleChecks) {
  tl_prepared_t* p = nullptr;
  VkSpec wrong_entry = VaddSpec();
  wrong_entry.entry = "main";
  std::string st = Prepare(VaddBundle(wrong_entry), "vadd", &p);
  EXPECT_TRUE(Has(st, "NOT_FOUND")) << st;
  EXPECT_TRUE(Has(st, "the SPIR-V module has no GLCompute entry point 'main' (it has 'vadd')")) << st;

  VkSpec wrong_block = VaddSpec();
  wrong_block.block = {128, 1, 1};
  st = Prepare(VaddBundle(wrong_block), "vadd", &p);
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "the module's workgroup size (64, 1, 1) differs from the bundle's block (128, 1, 1)")) << st;

  // A module newer than the variant's arch claims: selection would offer it
  // to devices that cannot run it.
  VkSpec understated = VaddSpec();
  understated.arch = "spirv1.0";
  st = Prepare(VaddBundle(understated), "vadd", &p);
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "the module is SPIR-V 1.3 but the variant's arch is 'spirv1.0'")) << st;

  VkSpec bad_magic = VaddSpec();
  bad_magic.code[0] ^= 0xFF;
  st = Prepare(VaddBundle(bad_magic), "vadd", &p);
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "SPIR-V magic is 0x072302fc, expected 0x07230203")) << st;

  VkSpec truncated = VaddSpec();
  truncated.code.resize(truncated.code.size() - 6);
  st = Prepare(VaddBundle(truncated), "vadd", &p);
  EXPECT_TRUE(Has(st, "is not a module")) << st;

  // Cut after whole instructions (OpReturn, OpFunctionEnd): lavapipe crashes
  // on such a module inside vkCreateComputePipelines; the runtime refuses it.
  VkSpec cut = VaddSpec();
  cut.code.resize(cut.code.size() - 8);
  st = Prepare(VaddBundle(cut), "vadd", &p);
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "the SPIR-V module ends inside function 1 (no OpFunctionEnd)")) << st;

  VkSpec overlong = VaddSpec();
  overlong.code[overlong.code.size() - 2] = 2;  // OpFunctionEnd's word count 1 -> 2
  st = Prepare(VaddBundle(overlong), "vadd", &p);
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "(opcode 56) has word count 2; 1 words remain")) << st;

  // A binding for a scalar parameter (the writer checks only the index).
  VkSpec bad_binding = VaddSpec();
  bad_binding.bindings = {0, 1, 3};
  st = Prepare(VaddBundle(bad_binding), "vadd", &p);
  if (st.empty()) {
    DeviceBuffer b;
    Alloc(&b, 64);
    const int64_t shape[1] = {16};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[4] = {tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr), tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr),
                        tl_arg_tensor(b.ptr(), f32, 1, shape, nullptr), tl_arg_f32(1.0f)};
    st = S(tl_launch(p, nullptr, 4, args, nullptr));
    tl_prepared_release(p);
    p = nullptr;
  }
  EXPECT_TRUE(Has(st, "INVALID_ARGUMENT")) << st;
  EXPECT_TRUE(Has(st, "parameter 3")) << st;

  VkSpec bad_push = VaddSpec();
  bad_push.push = {{3, 0, 4}, {-1, 4, 8}};
  bad_push.push_bytes = 12;
  st = Prepare(VaddBundle(bad_push), "vadd", &p);
  EXPECT_TRUE(Has(st, "holds 8 bytes of shape symbols; the kernel has 1 symbols")) << st;
  EXPECT_EQ(p, nullptr);
}

TEST_F(Vulkan, LimitsAreCheckedBeforePipelineCreation) {
  const std::string json = tl_device_describe(dev_);
  auto limit = [&](const std::string& key) {
    size_t at = json.find("\"" + key + "\": ");
    return at == std::string::npos ? 0ull : std::stoull(json.substr(at + key.size() + 4));
  };
  const unsigned long long max_shared = limit("max_shared_bytes");
  const unsigned long long max_push = limit("max_push_constant_bytes");
  ASSERT_GT(max_shared, 0u);
  tl_prepared_t* p = nullptr;

  // The module's own Workgroup memory, with the manifest silent about it.
  VkSpec big = RowsumSpec();
  big.code = Bytes(tl_vk_rowsum_big, tl_vk_rowsum_big_size);
  big.static_shared = 0;
  std::string st = Prepare(RowsumBundle(big), "rowsum", &p);
  if (max_shared < 65536) {
    EXPECT_TRUE(Has(st, "FAILED_PRECONDITION")) << st;
    EXPECT_TRUE(Has(st, "kernel 'rowsum' variant 'vulkan.spirv1.3': the SPIR-V module declares 65536 bytes of "
                        "Workgroup variables (the bundle says 0); the device's maxComputeSharedMemorySize is " +
                        std::to_string(max_shared)))
        << st;
  }
  tl_prepared_release(p);
  p = nullptr;

  // Launch data above the limit while the requirement understates it.
  VkSpec shared = RowsumSpec();
  shared.static_shared = static_cast<uint32_t>(max_shared + 16);
  shared.req_shared = 0;
  st = Prepare(RowsumBundle(shared), "rowsum", &p);
  EXPECT_TRUE(Has(st, "FAILED_PRECONDITION")) << st;
  EXPECT_TRUE(Has(st, "needs " + std::to_string(max_shared + 16) +
                          " bytes of workgroup (shared) memory; the device's maxComputeSharedMemorySize is " +
                          std::to_string(max_shared)))
      << st;

  // With the requirement stated, selection drops the variant.
  shared.req_shared = -1;
  st = Prepare(RowsumBundle(shared), "rowsum", &p);
  EXPECT_TRUE(Has(st, "INCOMPATIBLE")) << st;
  EXPECT_TRUE(Has(st, "bytes of shared memory per block, device limit is " + std::to_string(max_shared))) << st;

  // Workgroup size per axis and in total.
  VkSpec wide = VaddSpec();
  wide.code = Bytes(tl_vk_vadd_wide, tl_vk_vadd_wide_size);
  wide.block = {2048, 1, 1};
  wide.req_threads = 0;
  st = Prepare(VaddBundle(wide), "vadd", &p);
  EXPECT_TRUE(Has(st, "FAILED_PRECONDITION")) << st;
  EXPECT_TRUE(Has(st, "workgroup size x is 2048; the device's maxComputeWorkGroupSize[0] is")) << st;

  VkSpec many = VaddSpec();
  many.code = Bytes(tl_vk_vadd_many, tl_vk_vadd_many_size);
  many.block = {32, 32, 2};
  many.req_threads = 0;
  st = Prepare(VaddBundle(many), "vadd", &p);
  if (limit("max_threads_per_block") < 2048) {
    EXPECT_TRUE(Has(st, "FAILED_PRECONDITION")) << st;
    EXPECT_TRUE(Has(st, "workgroup (32, 32, 2) has 2048 invocations; the device's maxComputeWorkGroupInvocations is " +
                            std::to_string(limit("max_threads_per_block"))))
        << st;
  }
  tl_prepared_release(p);
  p = nullptr;

  // Push constants.
  VkSpec push = VaddSpec();
  push.push_bytes = static_cast<uint32_t>(max_push + 4);
  push.req_push = 0;
  st = Prepare(VaddBundle(push), "vadd", &p);
  EXPECT_TRUE(Has(st, "FAILED_PRECONDITION")) << st;
  EXPECT_TRUE(Has(st, "needs " + std::to_string(max_push + 4) +
                          " bytes of push constants; the device's maxPushConstantsSize is " + std::to_string(max_push)))
      << st;

  // The subgroup size the device runs: accepted.
  VkSpec same_sub = VaddSpec();
  same_sub.req_subgroup = static_cast<uint32_t>(limit("subgroup_min"));
  st = Prepare(VaddBundle(same_sub), "vadd", &p);
  EXPECT_EQ(st, "");
  tl_prepared_release(p);
  p = nullptr;

  // A subgroup size the device does not run (selection).
  VkSpec sub = VaddSpec();
  sub.req_subgroup = 256;
  st = Prepare(VaddBundle(sub), "vadd", &p);
  EXPECT_TRUE(Has(st, "INCOMPATIBLE")) << st;
  EXPECT_TRUE(Has(st, "needs subgroup size 256")) << st;

  // An extension the device has but the runtime does not enable.
  VkSpec ext = VaddSpec();
  ext.features = {"vk.ext.VK_KHR_shader_float16_int8"};
  st = Prepare(VaddBundle(ext), "vadd", &p);
  if (json.find("vk.ext.VK_KHR_shader_float16_int8") != std::string::npos) {
    EXPECT_TRUE(Has(st, "requires VK_KHR_shader_float16_int8, which this runtime does not enable")) << st;
  }
  tl_prepared_release(p);
}

//===--------------------------------------------------------------------===//
// Several runtimes in one process
//===--------------------------------------------------------------------===//

// Runtimes overlapping and one after another, with a fork() (system()) in
// between, share the process's VkInstance and all launch. On the H200's
// NVIDIA driver a runtime created after the previous one was destroyed (and
// after a system() call) got VK_ERROR_INCOMPATIBLE_DRIVER from a second
// vkCreateInstance; the backend now creates one instance per process.
TEST_F(Vulkan, SeveralRuntimesInOneProcess) {
  auto make = [](std::vector<std::string>* logs, tl_runtime_t** rt) {
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
    o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
    o.log = [](void* user, tl_log_level_t, const char* message, size_t length) {
      static_cast<std::vector<std::string>*>(user)->emplace_back(message, length);
    };
    o.log_user = logs;
    o.log_level = TL_LOG_DEBUG;
    return S(tl_runtime_create(&o, rt));
  };
  auto reused = [](const std::vector<std::string>& logs) {
    for (const auto& l : logs) {
      if (l.find("vulkan: reusing the process's VkInstance") != std::string::npos) return true;
    }
    return false;
  };
  // A second runtime while the fixture's is alive.
  std::vector<std::string> logs2;
  tl_runtime_t* rt2 = nullptr;
  ASSERT_EQ(make(&logs2, &rt2), "");
  EXPECT_TRUE(reused(logs2)) << "runtime 2 created its own VkInstance";
  ASSERT_GE(tl_runtime_device_count(rt2), 1u) << S(tl_runtime_backend_status(rt2, TL_BACKEND_VULKAN));
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  RunVadd(p, 300, nullptr, 41);
  tl_prepared_release(p);
  // The fixture's runtime goes; a fork in between (as TestTmpDir's system()).
  Close();
  ASSERT_EQ(system("true"), 0);
  tl_runtime_release(rt2);
  // Every runtime is gone now: a third one still finds the device and runs.
  std::vector<std::string> logs3;
  tl_runtime_t* rt3 = nullptr;
  ASSERT_EQ(make(&logs3, &rt3), "");
  EXPECT_TRUE(reused(logs3)) << "runtime 3 created its own VkInstance";
  ASSERT_GE(tl_runtime_device_count(rt3), 1u)
      << "no Vulkan device after the earlier runtimes: " << S(tl_runtime_backend_status(rt3, TL_BACKEND_VULKAN));
  rt_ = rt3;
  ASSERT_EQ(S(tl_runtime_device_at(rt_, 0, &dev_)), "");
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  RunVadd(p, 1000, nullptr, 42);
  tl_prepared_release(p);
}

//===--------------------------------------------------------------------===//
// Pipeline cache
//===--------------------------------------------------------------------===//

std::vector<std::string> CacheFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.rfind("vulkan-pipelines-", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".bin") {
        out.push_back(dir + "/" + name);
      }
    }
    closedir(d);
  }
  return out;
}

TEST_F(Vulkan, PipelineCachePersistsAcrossRuntimes) {
  const std::string dir = TestTmpDir("pipeline_cache");
  ASSERT_NO_FATAL_FAILURE(Reopen(dir.c_str()));
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  std::string explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "no pipeline cache file " + dir + "/vulkan-pipelines-")) << explain;
  tl_prepared_release(p);
  auto files = CacheFiles(dir);
  ASSERT_EQ(files.size(), 1u) << "pipeline cache file in " << dir;
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  EXPECT_GE(st.st_size, 24 + 32);  // our header + at least Vulkan's cache header

  // A second runtime seeds its cache from the file.
  ASSERT_NO_FATAL_FAILURE(Reopen(dir.c_str()));
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "read " + std::to_string(st.st_size - 24) + " bytes from pipeline cache file " + files[0]))
      << explain;
  // Lavapipe (Mesa 22.3) keeps no pipelines in its cache (the data is the
  // 32-byte header); a hardware driver's second compile is a cache hit.
  if (!(info_.flags & TL_DEVICE_FLAG_SOFTWARE)) {
    EXPECT_TRUE(Has(explain, "(pipeline cache hit)")) << explain;
  }
  RunVadd(p, 100, nullptr, 1);
  tl_prepared_release(p);

  // A damaged file is ignored, not trusted.
  Close();
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x5a');
  }
  ASSERT_NO_FATAL_FAILURE(Reopen(dir.c_str()));
  ASSERT_EQ(Prepare(VaddBundle(), "vadd", &p), "");
  explain = tl_prepared_explain(p);
  EXPECT_TRUE(Has(explain, "pipeline cache file " + files[0] + " ignored: checksum mismatch")) << explain;
  RunVadd(p, 100, nullptr, 2);
  tl_prepared_release(p);
}

}  // namespace
