// Many threads using one Vulkan device at once: preparing the same kernels,
// allocating and freeing buffers, copying, launching on their own streams and
// synchronously, and checking every result. Built and run under
// ThreadSanitizer by tools/test (tsan_* target, label tsan), so that the
// backend's shared state (queue submission, allocation table, staging cache,
// idle command lanes, pipeline cache) is checked for data races. Runs on
// lavapipe in CI; skips without a Vulkan device.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tilelang/runtime.h"
#include "vulkan_test_bundles.h"

namespace {

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

TEST(VulkanConcurrency, ThreadsShareOneDevice) {
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_VULKAN);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.cpu_cache_dir = TL_VK_TEST_TMP_DIR "/tsan_cache";
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  if (tl_runtime_device_count(rt) == 0) {
    std::string why = S(tl_runtime_backend_status(rt, TL_BACKEND_VULKAN));
    tl_runtime_release(rt);
    GTEST_SKIP() << "no Vulkan device: " << why;
  }
  tl_device_t* dev = nullptr;
  ASSERT_EQ(S(tl_runtime_device_at(rt, 0, &dev)), "");
  const std::vector<uint8_t> bytes = tl::rt::vktest::VulkanTestBundle();
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle)), "");
  tl_kernel_t* vadd = nullptr;
  tl_kernel_t* rowsum = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "vadd", &vadd)), "");
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "rowsum", &rowsum)), "");

  constexpr int kThreads = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](const std::string& what) {
        if (failures.fetch_add(1) < 5) ADD_FAILURE() << "thread " << t << ": " << what;
      };
      tl_prepared_t* pv = nullptr;
      tl_prepared_t* pr = nullptr;
      if (std::string s = S(tl_kernel_prepare(vadd, dev, 0, &pv)); !s.empty()) return fail(s);
      if (std::string s = S(tl_kernel_prepare(rowsum, dev, 0, &pr)); !s.empty()) return fail(s);
      tl_stream_t* stream = nullptr;
      if (t % 2 == 0) {
        if (std::string s = S(tl_stream_create(dev, 0, &stream)); !s.empty()) return fail(s);
      }
      std::mt19937 rng(100 + t);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
      for (int iter = 0; iter < 6; ++iter) {
        const int n = 200 + 31 * t + iter;
        std::vector<float> x(n), y(n), out(n, std::nanf(""));
        for (auto& v : x) v = dist(rng);
        for (auto& v : y) v = dist(rng);
        tl_buffer_t* b[3] = {nullptr, nullptr, nullptr};
        for (auto& buf : b) {
          if (std::string s = S(tl_buffer_allocate(dev, n * 4, &buf)); !s.empty()) return fail(s);
        }
        std::string s = S(tl_buffer_copy_from_host(b[0], 0, x.data(), n * 4, stream));
        if (s.empty()) s = S(tl_buffer_copy_from_host(b[1], 0, y.data(), n * 4, stream));
        const int64_t shape[1] = {n};
        tl_arg_t args[4] = {tl_arg_tensor(tl_buffer_device_pointer(b[0]), f32, 1, shape, nullptr),
                            tl_arg_tensor(tl_buffer_device_pointer(b[1]), f32, 1, shape, nullptr),
                            tl_arg_tensor(tl_buffer_device_pointer(b[2]), f32, 1, shape, nullptr), tl_arg_f32(2.0f)};
        if (s.empty()) s = S(tl_launch(pv, stream, 4, args, nullptr));
        if (s.empty()) s = S(tl_buffer_copy_to_host(b[2], 0, out.data(), n * 4, stream));
        if (s.empty() && stream) s = S(tl_stream_synchronize(stream, UINT64_MAX));
        for (auto& buf : b) tl_buffer_release(buf);
        if (!s.empty()) return fail(s);
        for (int i = 0; i < n; ++i) {
          if (std::fabs(out[i] - (x[i] + 2.0f * y[i])) > 1e-5f) return fail("vadd element " + std::to_string(i));
        }
        // A synchronous rowsum on the same device in between.
        const int M = 3 + t, K = 50 + iter;
        std::vector<float> A(size_t(M) * K), sums(M);
        for (auto& v : A) v = dist(rng);
        tl_buffer_t* ba = nullptr;
        tl_buffer_t* bo = nullptr;
        s = S(tl_buffer_allocate(dev, A.size() * 4, &ba));
        if (s.empty()) s = S(tl_buffer_allocate(dev, M * 4, &bo));
        if (s.empty()) s = S(tl_buffer_copy_from_host(ba, 0, A.data(), A.size() * 4, nullptr));
        const int64_t sa[2] = {M, K}, so[1] = {M};
        tl_arg_t rargs[2] = {tl_arg_tensor(tl_buffer_device_pointer(ba), f32, 2, sa, nullptr),
                             tl_arg_tensor(tl_buffer_device_pointer(bo), f32, 1, so, nullptr)};
        if (s.empty()) s = S(tl_launch(pr, nullptr, 2, rargs, nullptr));
        if (s.empty()) s = S(tl_buffer_copy_to_host(bo, 0, sums.data(), M * 4, nullptr));
        tl_buffer_release(ba);
        tl_buffer_release(bo);
        if (!s.empty()) return fail(s);
        for (int r = 0; r < M; ++r) {
          double ref = 0;
          for (int k = 0; k < K; ++k) ref += A[size_t(r) * K + k];
          if (std::fabs(sums[r] - ref) > 1e-4) return fail("rowsum row " + std::to_string(r));
        }
      }
      tl_stream_release(stream);
      tl_prepared_release(pv);
      tl_prepared_release(pr);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  tl_kernel_release(vadd);
  tl_kernel_release(rowsum);
  tl_bundle_release(bundle);
  tl_device_release(dev);
  tl_runtime_release(rt);
}

}  // namespace
