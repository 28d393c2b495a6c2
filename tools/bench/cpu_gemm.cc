// cpu_gemm: fp32 GEMM through our generated CPU kernel vs OpenBLAS cblas_sgemm,
// same problem, same thread count. Not a test: prints GFLOP/s and the ratio.
//
//   build-cpu/bin/cpu_gemm [--threads T] [--sizes 512,1024,2048] [--isa x86-64-v3]
//                          [--block 192,256,128] [--runs 5] [--emit-source DIR] [--panels 0|1]
//
// Columns: GFLOP/s from the median and from the best run of each, and the
// ratio ours / OpenBLAS for both (the best run is the one least disturbed by
// other processes on a shared machine).
//
// Our kernel is the tile program below (a plain TileLang GEMM: copy tiles to
// shared memory, T.gemm into a fragment, copy out), compiled by the real
// pipeline (LowerFunction + HostCompiler) and run the way the runtime runs
// it: blocks spread over T threads, static contiguous ranges (oneTBB's
// static_partitioner), per-thread scratch. Timing: one warm-up each, then
// --runs runs alternating ours and OpenBLAS, medians; both results are
// checked against each other.
#include <cblas.h>
#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tilelang/codegen/cpu/cpu_codegen.h"
#include "tilelang/cpu_kernel_abi.h"
#include "tilelang/toolchain/host_compiler.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

namespace {

using tl::toolchain::IsaLevel;

std::string GemmTir(int n, int bm, int bn, int bk) {
  auto s = [](int v) { return std::to_string(v); };
  return "tileir 1\nfunc @sgemm(A: tensor[" + s(n) + ", " + s(n) + "] f32, B: tensor[" + s(n) + ", " + s(n) +
         "] f32, C: tensor[" + s(n) + ", " + s(n) + "] f32) {\n"
         "  kernel grid(ceildiv(" + s(n) + ", " + s(bn) + "), ceildiv(" + s(n) + ", " + s(bm) + ")) threads(128) -> (bx, by) {\n"
         "    alloc A_s: shared[" + s(bm) + ", " + s(bk) + "] f32\n"
         "    alloc B_s: shared[" + s(bk) + ", " + s(bn) + "] f32\n"
         "    alloc C_f: fragment[" + s(bm) + ", " + s(bn) + "] f32\n"
         "    fill C_f, 0.0:f32\n"
         "    for k in pipelined(0, ceildiv(" + s(n) + ", " + s(bk) + "), stages=2) {\n"
         "      copy A[by * " + s(bm) + ":" + s(bm) + ", k * " + s(bk) + ":" + s(bk) + "] -> A_s\n"
         "      copy B[k * " + s(bk) + ":" + s(bk) + ", bx * " + s(bn) + ":" + s(bn) + "] -> B_s\n"
         "      gemm A_s, B_s -> C_f\n"
         "    }\n"
         "    copy C_f -> C[by * " + s(bm) + ":" + s(bm) + ", bx * " + s(bn) + ":" + s(bn) + "]\n"
         "  }\n}\n";
}

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(std::atoi(s.c_str() + pos));
    const size_t c = s.find(',', pos);
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A persistent pool: Run(fn) calls fn(t) on every worker t and waits.
class Pool {
 public:
  explicit Pool(int n) : n_(n), start_(n + 1), done_(n + 1) {
    for (int t = 0; t < n; ++t) {
      threads_.emplace_back([this, t] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          (*fn_)(t);
          done_.arrive_and_wait();
        }
      });
    }
  }
  ~Pool() {
    stop_ = true;
    start_.arrive_and_wait();
    for (std::thread& t : threads_) t.join();
  }
  void Run(const std::function<void(int)>& fn) {
    fn_ = &fn;
    start_.arrive_and_wait();
    done_.arrive_and_wait();
  }
  int size() const { return n_; }

 private:
  int n_;
  std::barrier<> start_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* fn_ = nullptr;
  std::atomic<bool> stop_{false};
};

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::vector<int> sizes = {512, 1024, 2048};
  std::vector<int> block;
  int runs = 5;
  std::string isa_name, emit;
  bool panels = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads") threads = std::atoi(v.c_str());
    else if (a == "--sizes") sizes = ParseList(v);
    else if (a == "--block") block = ParseList(v);
    else if (a == "--runs") runs = std::max(1, std::atoi(v.c_str()));
    else if (a == "--isa") isa_name = v;
    else if (a == "--emit-source") emit = v;
    else if (a == "--panels") panels = v != "0";
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 1;
    }
  }
  __builtin_cpu_init();
  IsaLevel isa = __builtin_cpu_supports("x86-64-v4") ? IsaLevel::kV4
                 : __builtin_cpu_supports("x86-64-v3") ? IsaLevel::kV3 : IsaLevel::kV2;
  if (!isa_name.empty()) {
    const std::optional<IsaLevel> l = tl::toolchain::ParseIsa(isa_name);
    if (!l) {
      std::fprintf(stderr, "unknown --isa %s\n", isa_name.c_str());
      return 1;
    }
    isa = *l;
  }
  // The peer is OpenBLAS's kernel for the same vector width. OpenBLAS 0.3.21
  // picks its kernels by CPU model at load time and falls back to its SSE3
  // "Prescott" kernels on models it does not know (this Sapphire Rapids VM,
  // 2026-12-05: 3x slower than its AVX-512 kernel), which would flatter every
  // ratio. Unless OPENBLAS_CORETYPE is set, a detected core narrower than
  // --isa (not in the list of cores of that width or wider) makes this program
  // re-run itself once with SkylakeX (v4) or Haswell (v3); a core OpenBLAS
  // chose for this CPU that is wide enough (e.g. Zen on an AVX2 EPYC) stays.
  // v2 keeps the detected one.
  static const char* const kV4Cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", nullptr};
  static const char* const kV3Cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", nullptr};
  const char* const* wide_enough = isa == IsaLevel::kV4 ? kV4Cores : isa == IsaLevel::kV3 ? kV3Cores : nullptr;
  auto core_ok = [&](const char* core) {
    for (const char* const* c = wide_enough; c != nullptr && *c != nullptr; ++c) {
      if (strcasecmp(core, *c) == 0) return true;
    }
    return wide_enough == nullptr;
  };
  const char* want_core = isa == IsaLevel::kV4 ? "SkylakeX" : "Haswell";
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr && !core_ok(openblas_get_corename())) {
    std::fprintf(stderr, "cpu_gemm: warning: OpenBLAS core %s (OPENBLAS_CORETYPE) is narrower than --isa %s\n",
                 openblas_get_corename(), tl::toolchain::IsaName(isa));
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && !core_ok(openblas_get_corename())) {
    std::fprintf(stderr, "cpu_gemm: OpenBLAS detected core %s; re-running with OPENBLAS_CORETYPE=%s\n",
                 openblas_get_corename(), want_core);
    setenv("OPENBLAS_CORETYPE", want_core, 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "cpu_gemm: re-exec failed (%s); the OpenBLAS column uses core %s\n", std::strerror(errno),
                 openblas_get_corename());
  }
  // Default tiles 256x256x128: the best of a 2048^3 sweep over 112-256 x
  // 128-512 on v3 and v4 (2026-12-05, Sapphire Rapids, 2 MiB L2). A, B and the
  // C fragment take ~0.5 MiB: all of a Zen 2/3 core's L2 (512 KiB), where the
  // sweep was not run (--block to choose).
  if (block.size() != 3) block = {256, 256, 128};

  tl::StatusOr<tl::toolchain::HostCompiler> cc = tl::toolchain::HostCompiler::Create();
  if (!cc.ok()) {
    std::fprintf(stderr, "%s\n", cc.status().ToString().c_str());
    return 1;
  }
  openblas_set_num_threads(threads);
  Pool pool(threads);
  std::printf("cpu_gemm: %d threads, ours %s tiles %dx%dx%d%s, OpenBLAS core %s\n", threads,
              tl::toolchain::IsaName(isa), block[0], block[1], block[2], panels ? "" : " (no panel layout)",
              openblas_get_corename());
  std::printf("%6s %10s %10s %6s   %10s %10s %6s   %9s\n", "n", "ours med", "BLAS med", "ratio", "ours best",
              "BLAS best", "ratio", "max|diff|");
  for (int n : sizes) {
    tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(GemmTir(n, block[0], block[1], block[2]), "cpu_gemm.tir");
    if (!m.ok()) return std::fprintf(stderr, "%s\n", m.status().ToString().c_str()), 1;
    tl::StatusOr<tl::codegen::cpu::CpuKernel> k = tl::codegen::cpu::LowerFunction(m->functions[0], {{panels}});
    if (!k.ok()) return std::fprintf(stderr, "%s\n", k.status().ToString().c_str()), 1;
    if (!emit.empty()) {
      FILE* f = std::fopen((emit + "/sgemm_" + std::to_string(n) + ".cc").c_str(), "w");
      if (f) std::fputs(k->source.c_str(), f), std::fclose(f);
    }
    tl::toolchain::CompileResult so = cc->Compile({"sgemm", "", isa, k->source});
    if (!so.status.ok()) return std::fprintf(stderr, "%s\n", so.status.ToString().c_str()), 1;
    char path[] = "/tmp/cpu_gemm-XXXXXX.so";
    const int fd = mkstemps(path, 3);
    if (fd < 0 || write(fd, so.object.data(), so.object.size()) != static_cast<ssize_t>(so.object.size())) return 1;
    close(fd);
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    unlink(path);
    if (h == nullptr) return std::fprintf(stderr, "dlopen: %s\n", dlerror()), 1;
    auto query = reinterpret_cast<tl_cpu_library_query_fn_t>(dlsym(h, TL_CPU_LIBRARY_QUERY_SYMBOL));
    const tl_cpu_kernel_t* kern = &query(TL_CPU_ABI_VERSION)->kernels[0];

    std::vector<float> A(static_cast<size_t>(n) * n), B(A.size()), C(A.size()), R(A.size());
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    void* args[3] = {A.data(), B.data(), C.data()};
    const uint32_t gx = static_cast<uint32_t>((n + block[1] - 1) / block[1]);
    const uint32_t gy = static_cast<uint32_t>((n + block[0] - 1) / block[0]);
    tl_cpu_dispatch_t d{};
    d.grid[0] = gx;
    d.grid[1] = gy;
    d.grid[2] = 1;
    d.arg_count = 3;
    d.args = args;
    const size_t scratch_bytes = (kern->scratch_bytes + 63) / 64 * 64;
    std::vector<void*> scratch(threads);
    for (void*& s : scratch) s = std::aligned_alloc(64, scratch_bytes);
    const uint64_t total = uint64_t{gx} * gy;
    std::function<void(int)> body = [&](int t) {
      const uint64_t lo = total * t / threads, hi = total * (t + 1) / threads;
      for (uint64_t b = lo; b < hi; ++b) {
        tl_cpu_block_t blk{};
        blk.block[0] = static_cast<uint32_t>(b % gx);
        blk.block[1] = static_cast<uint32_t>(b / gx);
        blk.worker = static_cast<uint32_t>(t);
        blk.scratch = scratch[t];
        blk.scratch_bytes = scratch_bytes;
        if (kern->fn(&d, &blk) != 0) std::abort();
      }
    };
    // Warm both up, then alternate ours / OpenBLAS run by run, so clock or
    // neighbour drift on a shared machine hits both alike; report medians.
    auto seconds = [](const std::function<void()>& f) {
      const auto t0 = std::chrono::steady_clock::now();
      f();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    const std::function<void()> run_ours = [&] { pool.Run(body); };
    const std::function<void()> run_blas = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, R.data(),
                  n);
    };
    // OpenBLAS's worker threads spin for a while after a call; let them park
    // before timing ours, or they steal our cores.
    auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); };
    run_ours();
    run_blas();
    settle();
    std::vector<double> t_ours, t_blas;
    for (int r = 0; r < runs; ++r) {
      t_ours.push_back(seconds(run_ours));
      settle();
      t_blas.push_back(seconds(run_blas));
      settle();
    }
    const double ours = Median(t_ours), blas = Median(t_blas);
    const double ours_best = *std::min_element(t_ours.begin(), t_ours.end());
    const double blas_best = *std::min_element(t_blas.begin(), t_blas.end());
    double diff = 0;
    for (size_t i = 0; i < C.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(C[i] - R[i])));
    const double flop = 2.0 * n * n * n;
    std::printf("%6d %10.1f %10.1f %6.2f   %10.1f %10.1f %6.2f   %9.2e\n", n, flop / ours * 1e-9, flop / blas * 1e-9,
                blas / ours, flop / ours_best * 1e-9, flop / blas_best * 1e-9, blas_best / ours_best, diff);
    std::fflush(stdout);
    for (void* s : scratch) std::free(s);
    dlclose(h);
    if (diff > 1e-3 * n) return std::fprintf(stderr, "results differ\n"), 1;
  }
  return 0;
}
