// Many threads preparing and launching the same kernels at once. Built as a
// tsan_* target and run under ThreadSanitizer by tools/test (label tsan); it
// also runs in the normal build.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_bundles.h"
#include "tilelang/runtime.h"

namespace {

std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

constexpr int kThreads = 8;
constexpr int kRounds = 20;
const tl_dtype_t kF32 = {TL_DTYPE_FLOAT, 32, 1};

TEST(Concurrency, ManyThreadsPrepareAndLaunchTheSameKernel) {
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CPU);
  o.cpu_thread_count = 4;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  tl_device_t* cpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, nullptr, &cpu)), "");
  auto bytes = tl::rt::testing::StandardBundle();
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle)), "");

  std::atomic<int> failures{0};
  std::vector<tl_prepared_t*> first(kThreads, nullptr);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();  // start together
      tl_stream_t* stream = nullptr;
      if (t % 2 == 1 && !S(tl_stream_create(cpu, 0, &stream)).empty()) failures++;
      for (int r = 0; r < kRounds; ++r) {
        tl_kernel_t* k = nullptr;
        if (!S(tl_bundle_find_kernel(bundle, r % 2 ? "vadd" : "gemm", &k)).empty()) {
          failures++;
          continue;
        }
        tl_prepared_t* p = nullptr;
        std::string e = S(tl_kernel_prepare(k, cpu, 0, &p));
        if (!e.empty()) {
          ADD_FAILURE() << e;
          failures++;
          tl_kernel_release(k);
          continue;
        }
        if (r == 1) {
          first[t] = p;  // kept: every thread must have got the same vadd object
          tl_prepared_retain(p);
        }
        if (r % 2) {
          int64_t n = 1000 + t;
          std::vector<float> a(n, static_cast<float>(t)), c(n, 0.0f);
          tl_arg_t args[3] = {tl_arg_tensor(a.data(), kF32, 1, &n, nullptr), tl_arg_tensor(a.data(), kF32, 1, &n, nullptr),
                              tl_arg_tensor(c.data(), kF32, 1, &n, nullptr)};
          e = S(tl_launch(p, stream, 3, args, nullptr));
          if (e.empty() && stream) e = S(tl_stream_synchronize(stream, UINT64_MAX));
          if (!e.empty() || c[n - 1] != 2.0f * t) failures++;
        } else {
          const int64_t m = 33;
          std::vector<float> A(m * m, 1.0f), C(m * m, 0.0f);
          int64_t shape[2] = {m, m};
          tl_arg_t args[3] = {tl_arg_tensor(A.data(), kF32, 2, shape, nullptr), tl_arg_tensor(A.data(), kF32, 2, shape, nullptr),
                              tl_arg_tensor(C.data(), kF32, 2, shape, nullptr)};
          e = S(tl_launch(p, nullptr, 3, args, nullptr));
          if (!e.empty() || C[m * m - 1] != static_cast<float>(m)) failures++;
        }
        tl_prepared_release(p);
        tl_kernel_release(k);
      }
      tl_stream_release(stream);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<tl_prepared_t*> distinct(first.begin(), first.end());
  EXPECT_EQ(distinct.size(), 1u);
  for (tl_prepared_t* p : first) tl_prepared_release(p);
  tl_bundle_release(bundle);
  tl_device_release(cpu);
  tl_runtime_release(rt);
}

TEST(Concurrency, ReleasingAndPreparingRace) {
  // Threads repeatedly prepare and drop the same pair, so the last release of
  // one object races with the next prepare: the cache must never hand out an
  // object being destroyed.
  tl_runtime_options_t o;
  tl_runtime_options_init(&o);
  o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CPU);
  o.cpu_thread_count = 2;
  tl_runtime_t* rt = nullptr;
  ASSERT_EQ(S(tl_runtime_create(&o, &rt)), "");
  tl_device_t* cpu = nullptr;
  ASSERT_EQ(S(tl_runtime_default_device(rt, nullptr, &cpu)), "");
  auto bytes = tl::rt::testing::StandardBundle();
  tl_bundle_t* bundle = nullptr;
  ASSERT_EQ(S(tl_bundle_open_memory(rt, bytes.data(), bytes.size(), nullptr, nullptr, &bundle)), "");
  tl_kernel_t* k = nullptr;
  ASSERT_EQ(S(tl_bundle_find_kernel(bundle, "fail_at", &k)), "");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int r = 0; r < 50; ++r) {
        tl_prepared_t* p = nullptr;
        if (!S(tl_kernel_prepare(k, cpu, 0, &p)).empty()) {
          failures++;
          continue;
        }
        if (std::string(tl_prepared_explain(p)).find("kernel 'fail_at'") == std::string::npos) failures++;
        tl_prepared_release(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  tl_kernel_release(k);
  tl_bundle_release(bundle);
  tl_device_release(cpu);
  tl_runtime_release(rt);
}

}  // namespace
