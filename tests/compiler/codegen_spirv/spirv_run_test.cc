// compiler.spirv.Run.*: kernels with lane reductions compiled to SPIR-V and run
// through the runtime's C ABI on a Vulkan device (lavapipe in CI), against
// float64 references, in both reduction strategies: the plain variant
// (workgroup memory) and the subgroup variant (shuffles where the check at
// kernel start allows, workgroup memory otherwise). The subgroup variant is
// packed without its vk.subgroup.shuffle token here, so it runs whether or not
// the runtime reports subgroup tokens. ctest runs this at lavapipe's default
// subgroup size and again with LP_NATIVE_VECTOR_WIDTH=128 and 512 (4 and 16).
// Skips when no Vulkan device can launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../gpu_lowering/kernels.h"
#include "tilelang/codegen/spirv/spirv_bundle.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/runtime.h"

namespace tl::codegen::spirv {
namespace {

// std::max(worst, NaN) is worst: a NaN output would pass.
double NanAsInf(double e) { return e != e ? 1.0 / 0.0 : e; }

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string m = tl_status_message(s);
  tl_status_free(s);
  return m;
}

ir::Function Parse(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "test.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m->functions.at(0);
}

std::string Kernel(const std::string& name) {
  for (const TestKernel& k : TestKernels()) {
    if (k.name == name) return k.text;
  }
  return "";
}

// 32 rows of 16 over 128 threads: lane groups of 4 (runs of 4 columns), as
// narrow as lavapipe's smallest subgroup, so the shuffle path runs at every size.
const char* kRows16 = R"(tileir 1

func @rows16(X: tensor[200, 16] f32, Y: tensor[200] f32) {
  kernel grid(ceildiv(200, 32)) threads(128) -> (bx) {
    alloc x: fragment[32, 16] f32
    alloc r: fragment[32] f32
    copy X[bx * 32:32, 0:16] -> x
    reduce max x -> r dim=1 clear
    copy r -> Y[bx * 32:32]
  }
}
)";

struct Host {
  std::vector<float> data;
  std::vector<int64_t> shape;
};

class Run : public ::testing::TestWithParam<bool> {  // param: subgroup variant
 protected:
  void SetUp() override {
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
    ASSERT_EQ(S(tl_runtime_create(&o, &rt_)), "");
    for (size_t i = 0; i < tl_runtime_device_count(rt_) && !dev_; ++i) {
      tl_device_t* d = nullptr;
      ASSERT_EQ(S(tl_runtime_device_at(rt_, i, &d)), "");
      tl_device_info_t info;
      std::memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      ASSERT_EQ(S(tl_device_info(d, &info)), "");
      if (info.flags & TL_DEVICE_FLAG_CAN_LAUNCH) {
        dev_ = d;
      } else {
        tl_device_release(d);
      }
    }
    if (!dev_) {
      const std::string why = S(tl_runtime_backend_status(rt_, TL_BACKEND_VULKAN));
      GTEST_SKIP() << "no Vulkan device that can launch: " << (why.empty() ? "none listed" : why);
    }
  }
  void TearDown() override {
    if (dev_) tl_device_release(dev_);
    tl_runtime_release(rt_);
  }

  // Builds the one variant under test, launches it on `args` (copied in and back).
  void Launch(const std::string& text, std::vector<Host*> args) {
    const ir::Function f = Parse(text);
    SpirvBuildOptions o;
    o.plain_variant = !GetParam();
    o.subgroup_variant = GetParam();
    o.subgroup_token = "";
    StatusOr<std::vector<uint8_t>> bundle = BuildSpirvBundle({f}, o);
    ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
    tl_bundle_t* b = nullptr;
    ASSERT_EQ(S(tl_bundle_open_memory(rt_, bundle->data(), bundle->size(), nullptr, nullptr, &b)), "");
    tl_kernel_t* kern = nullptr;
    ASSERT_EQ(S(tl_bundle_find_kernel(b, f.name.c_str(), &kern)), "");
    tl_prepared_t* p = nullptr;
    ASSERT_EQ(S(tl_kernel_prepare(kern, dev_, 0, &p)), "");
    std::vector<tl_buffer_t*> bufs;
    std::vector<tl_arg_t> targs;
    for (Host* h : args) {
      tl_buffer_t* buf = nullptr;
      ASSERT_EQ(S(tl_buffer_allocate(dev_, h->data.size() * 4, &buf)), "");
      ASSERT_EQ(S(tl_buffer_copy_from_host(buf, 0, h->data.data(), h->data.size() * 4, nullptr)), "");
      bufs.push_back(buf);
      targs.push_back(tl_arg_tensor(tl_buffer_device_pointer(buf), tl_dtype(TL_DTYPE_FLOAT, 32),
                                    static_cast<int32_t>(h->shape.size()), h->shape.data(), nullptr));
    }
    EXPECT_EQ(S(tl_launch(p, nullptr, targs.size(), targs.data(), nullptr)), "");
    for (size_t i = 0; i < args.size(); ++i) {
      EXPECT_EQ(S(tl_buffer_copy_to_host(bufs[i], 0, args[i]->data.data(), args[i]->data.size() * 4, nullptr)), "");
    }
    for (tl_buffer_t* buf : bufs) tl_buffer_release(buf);
    tl_prepared_release(p);
    tl_kernel_release(kern);
    tl_bundle_release(b);
  }

  static Host Random(std::vector<int64_t> shape, uint32_t seed) {
    Host h{{}, shape};
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist;
    for (size_t i = 0; i < n; ++i) h.data.push_back(dist(gen));
    return h;
  }
  static void Expect(const std::vector<float>& got, const std::vector<double>& want, double tol) {
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i]));
      worst = std::max(worst, NanAsInf(err));
      if (!(err <= tol)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "worst relative error " << worst;
  }

  tl_runtime_t* rt_ = nullptr;
  tl_device_t* dev_ = nullptr;
};

TEST_P(Run, Softmax) {  // 8 rows x 100 over 128 threads: lane groups of 16
  Host x = Random({300, 100}, 1), y{std::vector<float>(300 * 100, 0.f), {300, 100}};
  Launch(Kernel("softmax"), {&x, &y});
  std::vector<double> want(300 * 100);
  for (int r = 0; r < 300; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < 100; ++c) m = std::max(m, static_cast<double>(x.data[r * 100 + c]));
    for (int c = 0; c < 100; ++c) s += std::exp(x.data[r * 100 + c] - m);
    for (int c = 0; c < 100; ++c) want[r * 100 + c] = std::exp(x.data[r * 100 + c] - m) / s;
  }
  Expect(y.data, want, 1e-5);
}

TEST_P(Run, RowSum) {  // 4 rows x 250 over 256 threads: 64 lanes a row (width 32 + across warps)
  Host x = Random({333, 250}, 2), y{std::vector<float>(333, 0.f), {333}};
  Launch(Kernel("rowsum"), {&x, &y});
  std::vector<double> want(333, 0.0);
  for (int r = 0; r < 333; ++r) {
    for (int c = 0; c < 250; ++c) want[r] += x.data[r * 250 + c];
  }
  Expect(y.data, want, 1e-5);
}

TEST_P(Run, RowMaxOf16) {
  Host x = Random({200, 16}, 3), y{std::vector<float>(200, 0.f), {200}};
  Launch(kRows16, {&x, &y});
  std::vector<double> want(200);
  for (int r = 0; r < 200; ++r) {
    want[r] = *std::max_element(x.data.begin() + r * 16, x.data.begin() + r * 16 + 16);
  }
  Expect(y.data, want, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Strategy, Run, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Subgroup" : "Shared"; });

}  // namespace
}  // namespace tl::codegen::spirv
