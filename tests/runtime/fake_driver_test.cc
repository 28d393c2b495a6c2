// GPU driver discovery against fake driver libraries built in the tree and
// selected through tl_runtime_options_t.driver_search_paths.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

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

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

tl_runtime_t* RuntimeWithDrivers(const std::string& subdir, uint32_t mask) {
  std::string dir = std::string(TL_TEST_FAKE_DIR) + "/" + subdir;
  const char* paths[1] = {dir.c_str()};
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = mask;
  o.driver_search_paths = paths;
  o.driver_search_path_count = 1;
  tl_runtime_t* rt = nullptr;
  EXPECT_EQ(S(tl_runtime_create(&o, &rt)), "");
  return rt;
}

const uint32_t kCudaCpu = TL_BACKEND_BIT(TL_BACKEND_CUDA) | TL_BACKEND_BIT(TL_BACKEND_CPU);

TEST(FakeDrivers, MissingLibraryListsThePathsTried) {
  tl_runtime_t* rt = RuntimeWithDrivers("empty", 0);
  std::string dir = std::string(TL_TEST_FAKE_DIR) + "/empty";
  std::string cuda = S(tl_runtime_backend_status(rt, TL_BACKEND_CUDA));
  EXPECT_EQ(cuda.rfind("UNAVAILABLE: CUDA driver not found: tried " + dir + "/libcuda.so.1 (", 0), 0u) << cuda;
  std::string hip = S(tl_runtime_backend_status(rt, TL_BACKEND_HIP));
  EXPECT_NE(hip.find(dir + "/libamdhip64.so.6 ("), std::string::npos) << hip;
  EXPECT_NE(hip.find(dir + "/libamdhip64.so.5 ("), std::string::npos) << hip;
  std::string vk = S(tl_runtime_backend_status(rt, TL_BACKEND_VULKAN));
  EXPECT_NE(vk.find("Vulkan loader not found: tried " + dir + "/libvulkan.so.1"), std::string::npos) << vk;
  // The runtime works on with the CPU.
  EXPECT_EQ(S(tl_runtime_backend_status(rt, TL_BACKEND_CPU)), "");
  ASSERT_EQ(tl_runtime_device_count(rt), 1u);
  tl_runtime_release(rt);
}

TEST(FakeDrivers, MissingRequiredSymbol) {
  tl_runtime_t* rt = RuntimeWithDrivers("cuda_missing_symbol", kCudaCpu);
  std::string e = S(tl_runtime_backend_status(rt, TL_BACKEND_CUDA));
  EXPECT_EQ(e.rfind("UNAVAILABLE: CUDA driver ", 0), 0u) << e;
  EXPECT_NE(e.find("lacks required symbol(s): cuDeviceGetAttribute"), std::string::npos) << e;
  EXPECT_EQ(tl_runtime_device_count(rt), 1u);
  tl_runtime_release(rt);
}

TEST(FakeDrivers, HipLibraryMissingSymbols) {
  tl_runtime_t* rt = RuntimeWithDrivers("hip_missing_symbol", TL_BACKEND_BIT(TL_BACKEND_HIP) | TL_BACKEND_BIT(TL_BACKEND_CPU));
  std::string e = S(tl_runtime_backend_status(rt, TL_BACKEND_HIP));
  EXPECT_NE(e.find("libamdhip64.so.6 lacks required symbol(s): hipDriverGetVersion, hipGetDeviceCount"), std::string::npos) << e;
  tl_runtime_release(rt);
}

TEST(FakeDrivers, InitFailure) {
  tl_runtime_t* rt = RuntimeWithDrivers("cuda_init_fails", kCudaCpu);
  std::string e = S(tl_runtime_backend_status(rt, TL_BACKEND_CUDA));
  EXPECT_NE(e.find("cuInit failed with CUDA_ERROR_NO_DEVICE (100)"), std::string::npos) << e;
  EXPECT_EQ(tl_runtime_device_count(rt), 1u);
  tl_runtime_release(rt);
}

TEST(FakeDrivers, EnumeratesAFakeH200AndSelectsForIt) {
  tl_runtime_t* rt = RuntimeWithDrivers("cuda_ok", kCudaCpu);
  ASSERT_EQ(S(tl_runtime_backend_status(rt, TL_BACKEND_CUDA)), "");
  ASSERT_EQ(tl_runtime_device_count(rt), 2u);
  tl_device_t* gpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, "cuda:0", &gpu)), "");
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(gpu, &info)), "");
  EXPECT_STREQ(info.name, "Fake H200");
  EXPECT_STREQ(info.arch, "sm_90");
  EXPECT_EQ(info.driver_version, 12040u);
  EXPECT_EQ(info.compute_units, 132u);
  EXPECT_EQ(info.memory_bytes, 141ull << 30);
  EXPECT_FALSE(info.flags & TL_DEVICE_FLAG_CAN_LAUNCH);
  // The best device is still the CPU: this runtime cannot launch on CUDA yet.
  tl_device_t* best = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, nullptr, &best)), "");
  tl_device_info_t best_info;
  best_info.struct_size = sizeof(best_info);
  ASSERT_EQ(S(tl_device_info(best, &best_info)), "");
  EXPECT_EQ(best_info.backend, static_cast<uint32_t>(TL_BACKEND_CPU));
  tl_device_release(best);

  auto bytes = tl::rt::testing::StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b)), "");
  tl_kernel_t* k = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(b, "vadd", &k)), "");
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(k, gpu, 0, &p)), "");
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  ASSERT_EQ(S(tl_prepared_variant_info(p, &vi)), "");
  EXPECT_STREQ(vi.id, "cuda.sm_90a");
  std::string explain = tl_prepared_explain(p);
  EXPECT_NE(explain.find("kernel 'vadd' on cuda device 'Fake H200' (sm_90, driver 12040, PTX ISA <= 8.4)"), std::string::npos) << explain;
  EXPECT_NE(explain.find("2. cuda.compute_80: JIT-compiled PTX compute_80 on 9.0"), std::string::npos) << explain;
  EXPECT_NE(explain.find("cpu.x86-64-v2: backend cpu, device is cuda"), std::string::npos) << explain;
  // Launch, buffers and streams on CUDA: not in this release, said clearly.
  int64_t n = 4;
  float x[4] = {0, 0, 0, 0};
  tl_dtype_t f32 = {TL_DTYPE_FLOAT, 32, 1};
  tl_arg_t args[3] = {tl_arg_tensor(x, f32, 1, &n, nullptr), tl_arg_tensor(x, f32, 1, &n, nullptr),
                      tl_arg_tensor(x, f32, 1, &n, nullptr)};
  std::string e = S(tl_launch(p, nullptr, 3, args, nullptr));
  EXPECT_EQ(e.rfind("UNIMPLEMENTED: launching kernel 'vadd' variant 'cuda.sm_90a' on cuda device 'Fake H200' (sm_90)", 0), 0u) << e;
  tl_buffer_t* buf = nullptr;
  EXPECT_EQ(S(tl_buffer_allocate(gpu, 16, &buf)).rfind("UNIMPLEMENTED: allocating device memory on cuda device", 0), 0u);
  tl_stream_t* s = nullptr;
  EXPECT_EQ(S(tl_stream_create(gpu, 0, &s)).rfind("UNIMPLEMENTED: creating a stream", 0), 0u);
  tl_prepared_release(p);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(gpu);
  tl_runtime_release(rt);
}

TEST(FakeDrivers, DisableJitFlagRejectsPtx) {
  std::string dir = std::string(TL_TEST_FAKE_DIR) + "/cuda_ok";
  const char* paths[1] = {dir.c_str()};
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT | TL_RUNTIME_FLAG_DISABLE_JIT;
  o.backend_mask = kCudaCpu;
  o.driver_search_paths = paths;
  o.driver_search_path_count = 1;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  tl_device_t* gpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, "cuda", &gpu)), "");
  auto bytes = tl::rt::testing::StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b)), "");
  tl_kernel_t* k = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(b, "saxpy", &k)), "");
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(k, gpu, 0, &p)), "");
  EXPECT_NE(std::string(tl_prepared_explain(p)).find("cuda.compute_80: PTX needs driver JIT, which is disabled"), std::string::npos);
  tl_prepared_release(p);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(gpu);
  tl_runtime_release(rt);
}

}  // namespace

namespace {

// The real Vulkan loader of this machine (lavapipe in CI), when present.
TEST(RealDrivers, VulkanDevicesAreDescribedAndSelectedFor) {
  TL_TEST_IGNORE_DRIVER_LEAKS();
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  std::string status = S(tl_runtime_backend_status(rt, TL_BACKEND_VULKAN));
  if (!status.empty() || tl_runtime_device_count(rt) == 0) {
    tl_runtime_release(rt);
    GTEST_SKIP() << "no Vulkan device here: " << status;
  }
  tl_device_t* dev = nullptr;
  ASSERT_EQ(S(tl_runtime_device_at(rt, 0, &dev)), "");
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(dev, &info)), "");
  EXPECT_EQ(info.backend, static_cast<uint32_t>(TL_BACKEND_VULKAN));
  EXPECT_EQ(std::string(info.arch).rfind("spirv1.", 0), 0u) << info.arch;
  EXPECT_GE(info.driver_version >> 22, 1u);
  std::string json = tl_device_describe(dev);
  EXPECT_NE(json.find("\"vk_features\": [\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"subgroup_min\": "), std::string::npos) << json;
  auto bytes = tl::rt::testing::StandardBundle();
  tl_bundle_t* b = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &b)), "");
  tl_kernel_t* k = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(b, "vadd", &k)), "");
  // Selection picks the SPIR-V variant; the Vulkan backend then inspects its
  // payload (an 8-byte stand-in here, not a module) before any driver call.
  // Real SPIR-V runs in tests/runtime_vulkan.
  tl_prepared_t* p = nullptr;
  const std::string st = S(tl_kernel_prepare(k, dev, 0, &p));
  EXPECT_NE(st.find("INVALID_ARGUMENT: kernel 'vadd' variant 'vk.spirv1.3': SPIR-V payload of 8 bytes is not a module"),
            std::string::npos)
      << st;
  EXPECT_EQ(p, nullptr);
  tl_kernel_release(k);
  tl_bundle_release(b);
  tl_device_release(dev);
  tl_runtime_release(rt);
}

}  // namespace

namespace {

TEST(FakeDrivers, TlDisableJitEnvironmentVariable) {
  setenv("TL_DISABLE_JIT", "1", 1);
  std::string dir = std::string(TL_TEST_FAKE_DIR) + "/cuda_ok";
  const char* paths[1] = {dir.c_str()};
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CUDA);
  o.driver_search_paths = paths;
  o.driver_search_path_count = 1;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  unsetenv("TL_DISABLE_JIT");
  tl_device_t* gpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, "cuda", &gpu)), "");
  // Only PTX for a 9.0 device: with JIT disabled nothing runs, and the
  // failure says why for every variant.
  tl::formats::BundleWriter writer;
  auto k = std::make_unique<tl::bundle::KernelT>();
  k->name = "k";
  k->params.push_back(tl::rt::testing::BufferParam("X", {{4, -1, 1}}));
  uint32_t ptx = writer.AddPayload({'.', 'v', 'e', 'r'});
  k->variants.push_back(tl::rt::testing::GpuVariant("cuda.compute_80", tl::bundle::Backend::CUDA,
                                                    tl::bundle::CodeKind::PTX, "compute_80", ptx, "k"));
  ASSERT_TRUE(writer.AddKernel(std::move(k)).ok());
  auto bytes = writer.Finish();
  ASSERT_TRUE(bytes.ok());
  tl_bundle_t* b = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes->data(), bytes->size(), nullptr, nullptr, &b)), "");
  tl_kernel_t* kernel = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(b, "k", &kernel)), "");
  tl_prepared_t* p = nullptr;
  std::string e = S(tl_kernel_prepare(kernel, gpu, 0, &p));
  EXPECT_EQ(e.rfind("INCOMPATIBLE: kernel 'k': no variant runs on cuda device 'Fake H200'", 0), 0u) << e;
  EXPECT_NE(e.find("[cuda.compute_80: PTX needs driver JIT, which is disabled"), std::string::npos) << e;
  tl_kernel_release(kernel);
  tl_bundle_release(b);
  tl_device_release(gpu);
  tl_runtime_release(rt);
}

}  // namespace
