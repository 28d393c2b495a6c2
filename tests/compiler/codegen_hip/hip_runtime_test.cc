// compiler.hip.Runtime*: the HIP launch path.
//
// No AMD GPU exists in this project, so the launch path is driven against a
// fake libamdhip64 (tests/runtime/fake_drivers/fake_hip.c, FAKE_HIP_OK) with
// real HSACO bundles built here by clang-19: device enumeration with the
// full target ID from gcnArchName, selection of the matching variant,
// hipModuleLoadData/GetFunction, the parameter buffer handed to
// hipModuleLaunchKernel (checked byte by byte against the arguments), grid
// and block. A second fake answers hipErrorNoDevice: the backend reports
// itself unavailable and the CPU keeps working. RealDevice runs a kernel on
// an actual HIP device when one exists and otherwise skips saying why.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "tilelang/codegen/hip/hip_bundle.h"
#include "tilelang/runtime.h"

namespace {

namespace hip = tl::codegen::hip;

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

tl::ir::Function Parse(const std::string& text) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  if (!m.ok()) ADD_FAILURE() << m.status().ToString();
  return m->functions.at(0);
}

// y = a * x + y over 1000 elements, with an f16 scale and an i32 bound to
// exercise the kernarg layout: X@0, Y@8, a@16 (f32), h@20 (f16), n@24 (i32).
const char* kAxpy = R"(tileir 1

func @axpy(X: tensor[1000] f32, Y: tensor[1000] f32, a: f32, h: f16, n: i32) {
  kernel grid(ceildiv(1000, 256)) threads(256) -> (bx) {
    alloc x: fragment[256] f32
    alloc y: fragment[256] f32
    copy X[bx * 256:256] -> x
    copy Y[bx * 256:256] -> y
    parallel (i) in (256) {
      y[i] = select(bx * 256 + i < n, a * x[i] + y[i] * cast<f32>(h), y[i])
    }
    copy y -> Y[bx * 256:256]
  }
}
)";

std::vector<uint8_t> AxpyBundle() {
  tl::StatusOr<std::vector<uint8_t>> b = hip::BuildHipBundle({Parse(kAxpy)}, {});
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? *b : std::vector<uint8_t>();
}

tl_runtime_t* Runtime(const char* fake_dir) {
  const char* paths[1] = {fake_dir};
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_HIP) | TL_BACKEND_BIT(TL_BACKEND_CPU);
  o.driver_search_paths = paths;
  o.driver_search_path_count = 1;
  tl_runtime_t* rt = nullptr;
  EXPECT_EQ(S(tl_runtime_create(&o, &rt)), "");
  return rt;
}

class FakeHip : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!hip::HipToolchain::Create().ok()) GTEST_SKIP() << "no clang-19: " << hip::HipToolchain::Create().status().ToString();
  }
  void TearDown() override { unsetenv("FAKE_HIP_ARCH"); }
};

TEST_F(FakeHip, EnumeratesSelectsLoadsAndLaunchesWithTheBundleLayout) {
  setenv("FAKE_HIP_ARCH", "gfx942:sramecc+:xnack-", 1);
  tl_runtime_t* rt = Runtime(TL_TEST_FAKE_HIP_OK_DIR);
  ASSERT_EQ(S(tl_runtime_backend_status(rt, TL_BACKEND_HIP)), "");
  tl_device_t* gpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, "hip:0", &gpu)), "");
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(gpu, &info)), "");
  EXPECT_STREQ(info.name, "Fake AMD Instinct");
  EXPECT_STREQ(info.arch, "gfx942:sramecc+:xnack-");
  EXPECT_EQ(info.compute_units, 304u);
  EXPECT_EQ(info.driver_version, 60241134u);
  EXPECT_TRUE(info.flags & TL_DEVICE_FLAG_CAN_LAUNCH);

  const std::vector<uint8_t> bytes = AxpyBundle();
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle)), "");
  tl_kernel_t* kernel = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "axpy", &kernel)), "");
  tl_prepared_t* prepared = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(kernel, gpu, 0, &prepared)), "");
  const std::string text = tl_prepared_explain(prepared);
  EXPECT_NE(text.find("hip.gfx942"), std::string::npos) << text;
  EXPECT_NE(text.find("code for gfx90a does not run on gfx942"), std::string::npos) << text;
  EXPECT_NE(text.find("parameter layout (5 slots, 28 bytes) matches the code object's metadata"), std::string::npos)
      << text;

  // Buffers live in the fake's host memory; the launch records what the
  // driver was handed.
  tl_buffer_t* x = nullptr;
  tl_buffer_t* y = nullptr;
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4000, &x)), "");
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4000, &y)), "");
  int64_t shape[1] = {1000};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[5] = {tl_arg_tensor(tl_buffer_device_pointer(x), f32, 1, shape, nullptr),
                      tl_arg_tensor(tl_buffer_device_pointer(y), f32, 1, shape, nullptr), tl_arg_f32(1.5f),
                      tl_arg_scalar_bits(tl_dtype(TL_DTYPE_FLOAT, 16), 2, 0x3c00),  // 1.0
                      tl_arg_i32(777)};
  ASSERT_EQ(S(tl_launch(prepared, nullptr, 5, args, nullptr)), "");

  void* fake = dlopen((std::string(TL_TEST_FAKE_HIP_OK_DIR) + "/libamdhip64.so.6").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr) << dlerror();
  const auto* params = static_cast<const uint8_t*>(dlsym(fake, "fake_hip_last_params"));
  const auto* size = static_cast<const size_t*>(dlsym(fake, "fake_hip_last_params_size"));
  const auto* grid = static_cast<const unsigned*>(dlsym(fake, "fake_hip_last_grid"));
  const auto* block = static_cast<const unsigned*>(dlsym(fake, "fake_hip_last_block"));
  const auto* shared = static_cast<const unsigned*>(dlsym(fake, "fake_hip_last_shared"));
  ASSERT_TRUE(params && size && grid && block && shared);
  ASSERT_EQ(*size, 28u);
  void* px = tl_buffer_device_pointer(x);
  void* py = tl_buffer_device_pointer(y);
  EXPECT_EQ(memcmp(params + 0, &px, 8), 0);
  EXPECT_EQ(memcmp(params + 8, &py, 8), 0);
  float a = 0;
  memcpy(&a, params + 16, 4);
  EXPECT_EQ(a, 1.5f);
  uint16_t h = 0;
  memcpy(&h, params + 20, 2);
  EXPECT_EQ(h, 0x3c00);
  int32_t bound = 0;
  memcpy(&bound, params + 24, 4);
  EXPECT_EQ(bound, 777);
  EXPECT_EQ(grid[0], 4u);  // ceildiv(1000, 256)
  EXPECT_EQ(grid[1], 1u);
  EXPECT_EQ(block[0], 256u);
  EXPECT_EQ(*shared, 0u);  // static LDS only
  dlclose(fake);
  tl_buffer_release(x);
  tl_buffer_release(y);
  tl_prepared_release(prepared);
  tl_kernel_release(kernel);
  tl_bundle_release(bundle);
  tl_runtime_release(rt);
}

TEST_F(FakeHip, TargetIdsSelectTheirVariant) {
  const std::vector<uint8_t> bytes = AxpyBundle();
  struct Case {
    const char* device_arch;
    const char* variant;  // nullptr: INCOMPATIBLE
  } cases[] = {{"gfx90a:sramecc-:xnack+", "hip.gfx90a"},
               {"gfx942:sramecc+:xnack+", "hip.gfx942"},
               {"gfx1100", "hip.gfx1100"},
               {"gfx1030", nullptr}};
  for (const Case& c : cases) {
    setenv("FAKE_HIP_ARCH", c.device_arch, 1);
    tl_runtime_t* rt = Runtime(TL_TEST_FAKE_HIP_OK_DIR);
    tl_device_t* gpu = nullptr;
    ASSERT_EQ(S(tl_runtime_default_device(rt, "hip:0", &gpu)), "") << c.device_arch;
    tl_bundle_t* bundle = nullptr;
    ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle)), "");
    tl_kernel_t* kernel = nullptr;
    ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "axpy", &kernel)), "");
    tl_prepared_t* prepared = nullptr;
    const std::string st = S(tl_kernel_prepare(kernel, gpu, 0, &prepared));
    if (!c.variant) {
      EXPECT_EQ(st.rfind("INCOMPATIBLE", 0), 0u) << st;
      EXPECT_NE(st.find("code for gfx1100 does not run on gfx1030"), std::string::npos) << st;
    } else {
      ASSERT_EQ(st, "") << c.device_arch;
      const std::string explain = tl_prepared_explain(prepared);
      EXPECT_NE(std::string(explain).find(std::string("chosen: ") + c.variant), std::string::npos)
          << c.device_arch << "\n" << explain;
      tl_prepared_release(prepared);
    }
    tl_kernel_release(kernel);
    tl_bundle_release(bundle);
    tl_runtime_release(rt);
  }
}

// A dynamic shape: N travels as a trailing kernel argument that the runtime
// fills from the tensors' shapes (ParamSlot.symbol, must_understand
// launch.symbol_slots).
TEST_F(FakeHip, ShapeSymbolsAreFilledFromTheArguments) {
  const tl::ir::Function f = Parse(R"(tileir 1

func @scale(X: tensor[N] f32, Y: tensor[N] f32, s: f32) dynamic(N: i32) {
  kernel grid(ceildiv(N, 128)) threads(128) -> (bx) {
    parallel (i) in (128) {
      if bx * 128 + i < N {
        Y[bx * 128 + i] = X[bx * 128 + i] * s
      }
    }
  }
}
)");
  tl::StatusOr<std::vector<uint8_t>> bytes = hip::BuildHipBundle({f}, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  setenv("FAKE_HIP_ARCH", "gfx90a:sramecc+:xnack-", 1);
  tl_runtime_t* rt = Runtime(TL_TEST_FAKE_HIP_OK_DIR);
  tl_device_t* gpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, "hip:0", &gpu)), "");
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes->data(), bytes->size(), nullptr, nullptr, &bundle)), "");
  tl_kernel_t* kernel = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "scale", &kernel)), "");
  tl_prepared_t* prepared = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(kernel, gpu, 0, &prepared)), "");
  tl_buffer_t* x = nullptr;
  tl_buffer_t* y = nullptr;
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4 * 1000, &x)), "");
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4 * 1000, &y)), "");
  int64_t shape[1] = {1000};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[3] = {tl_arg_tensor(tl_buffer_device_pointer(x), f32, 1, shape, nullptr),
                      tl_arg_tensor(tl_buffer_device_pointer(y), f32, 1, shape, nullptr), tl_arg_f32(2.0f)};
  ASSERT_EQ(S(tl_launch(prepared, nullptr, 3, args, nullptr)), "");
  void* fake = dlopen((std::string(TL_TEST_FAKE_HIP_OK_DIR) + "/libamdhip64.so.6").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  const auto* params = static_cast<const uint8_t*>(dlsym(fake, "fake_hip_last_params"));
  const auto* size = static_cast<const size_t*>(dlsym(fake, "fake_hip_last_params_size"));
  const auto* grid = static_cast<const unsigned*>(dlsym(fake, "fake_hip_last_grid"));
  ASSERT_EQ(*size, 24u);  // X@0, Y@8, s@16, N@20
  int32_t n = 0;
  memcpy(&n, params + 20, 4);
  EXPECT_EQ(n, 1000);
  EXPECT_EQ(grid[0], 8u);  // ceildiv(1000, 128)
  dlclose(fake);
  tl_buffer_release(x);
  tl_buffer_release(y);
  tl_prepared_release(prepared);
  tl_kernel_release(kernel);
  tl_bundle_release(bundle);
  tl_runtime_release(rt);
}

TEST(HipRuntime, NoDeviceMeansUnavailableAndTheCpuWorksOn) {
  tl_runtime_t* rt = Runtime(TL_TEST_FAKE_HIP_NO_DEVICE_DIR);
  const std::string hip = S(tl_runtime_backend_status(rt, TL_BACKEND_HIP));
  EXPECT_EQ(hip.rfind("UNAVAILABLE: HIP runtime ", 0), 0u) << hip;
  EXPECT_NE(hip.find("hipGetDeviceCount failed with hipErrorNoDevice (100): no ROCm-capable device is detected"),
            std::string::npos)
      << hip;
  EXPECT_EQ(S(tl_runtime_backend_status(rt, TL_BACKEND_CPU)), "");
  ASSERT_EQ(tl_runtime_device_count(rt), 1u);
  tl_device_t* best = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, nullptr, &best)), "");
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(best, &info)), "");
  EXPECT_EQ(info.backend, static_cast<uint32_t>(TL_BACKEND_CPU));
  tl_device_t* none = nullptr;
  const std::string e = S(tl_runtime_default_device(rt, "hip:0", &none));
  EXPECT_FALSE(e.empty());
  tl_runtime_release(rt);
}

// On a machine with an AMD GPU and ROCm: axpy for the device's own target,
// run and compared with a double-precision reference. Skips elsewhere.
TEST(HipRuntime, RealDeviceRunsAxpyOrSkips) {
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_HIP);
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  const std::string status = S(tl_runtime_backend_status(rt, TL_BACKEND_HIP));
  tl_device_t* gpu = nullptr;
  const std::string no_device = status.empty() ? S(tl_runtime_default_device(rt, "hip:0", &gpu)) : status;
  if (!no_device.empty()) {
    tl_runtime_release(rt);
    GTEST_SKIP() << "no HIP device (there is no AMD GPU in this project's machines): "
                 << no_device;
  }
  tl_device_info_t info;
  info.struct_size = sizeof(info);
  ASSERT_EQ(S(tl_device_info(gpu, &info)), "");
  hip::HipBuildOptions bo;
  bo.targets = {info.arch};
  tl::StatusOr<std::vector<uint8_t>> bytes = hip::BuildHipBundle({Parse(kAxpy)}, bo);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes->data(), bytes->size(), nullptr, nullptr, &bundle)), "");
  tl_kernel_t* kernel = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "axpy", &kernel)), "");
  tl_prepared_t* prepared = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(kernel, gpu, 0, &prepared)), "");
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist;
  std::vector<float> xs(1000), ys(1000), out(1000);
  for (auto& v : xs) v = dist(rng);
  for (auto& v : ys) v = dist(rng);
  tl_buffer_t* x = nullptr;
  tl_buffer_t* y = nullptr;
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4000, &x)), "");
  ASSERT_EQ(S(tl_buffer_allocate(gpu, 4000, &y)), "");
  ASSERT_EQ(S(tl_buffer_copy_from_host(x, 0, xs.data(), 4000, nullptr)), "");
  ASSERT_EQ(S(tl_buffer_copy_from_host(y, 0, ys.data(), 4000, nullptr)), "");
  int64_t shape[1] = {1000};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[5] = {tl_arg_tensor(tl_buffer_device_pointer(x), f32, 1, shape, nullptr),
                      tl_arg_tensor(tl_buffer_device_pointer(y), f32, 1, shape, nullptr), tl_arg_f32(1.5f),
                      tl_arg_scalar_bits(tl_dtype(TL_DTYPE_FLOAT, 16), 2, 0x3800),  // h = 0.5
                      tl_arg_i32(777)};
  ASSERT_EQ(S(tl_launch(prepared, nullptr, 5, args, nullptr)), "");
  ASSERT_EQ(S(tl_buffer_copy_to_host(y, 0, out.data(), 4000, nullptr)), "");
  for (int i = 0; i < 1000; ++i) {
    const double ref = i < 777 ? 1.5 * xs[i] + 0.5 * static_cast<double>(ys[i]) : ys[i];
    ASSERT_NEAR(out[i], ref, 1e-5 * (1 + std::fabs(ref))) << i;
  }
  tl_buffer_release(x);
  tl_buffer_release(y);
  tl_prepared_release(prepared);
  tl_kernel_release(kernel);
  tl_bundle_release(bundle);
  tl_runtime_release(rt);
}

}  // namespace
