#include "cpu_test_util.h"

#include <dlfcn.h>
#include <immintrin.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "tilelang/passes/passes.h"

namespace tl::cputest {

bool CanRun(IsaLevel isa) {
  __builtin_cpu_init();
  switch (isa) {
    case IsaLevel::kV2: return __builtin_cpu_supports("x86-64-v2");
    case IsaLevel::kV3: return __builtin_cpu_supports("x86-64-v3");
    case IsaLevel::kV4: return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
}

std::vector<IsaLevel> RunnableIsas() {
  std::vector<IsaLevel> out;
  for (IsaLevel l : {IsaLevel::kV2, IsaLevel::kV3, IsaLevel::kV4}) {
    if (CanRun(l)) out.push_back(l);
  }
  return out;
}

toolchain::HostCompilerOptions TestCompilerOptions() {
  toolchain::HostCompilerOptions o;
  o.cache_dir = TL_TEST_CACHE_DIR;
  return o;
}

LoadedKernel::~LoadedKernel() {
  if (handle != nullptr) dlclose(handle);
}

StatusOr<std::vector<std::unique_ptr<LoadedKernel>>> BuildKernels(const std::string& tir,
                                                                   const std::vector<IsaLevel>& isas,
                                                                   const codegen::cpu::CpuLowerOptions& options) {
  StatusOr<ir::Module> m = ir::ParseModule(tir, "test.tir");
  if (!m.ok()) return m.status();
  if (m->functions.size() != 1) return Status(StatusCode::kInvalidArgument, "want one function");
  StatusOr<codegen::cpu::CpuKernel> lowered = codegen::cpu::LowerFunction(m->functions[0], options);
  if (!lowered.ok()) return lowered.status();
  StatusOr<toolchain::HostCompiler> cc = toolchain::HostCompiler::Create(TestCompilerOptions());
  if (!cc.ok()) return cc.status();
  std::vector<toolchain::CompileJob> jobs;
  for (IsaLevel isa : isas) jobs.push_back({lowered->name, "", isa, lowered->source});
  std::vector<toolchain::CompileResult> results = cc->CompileAll(jobs, 0);
  std::vector<std::unique_ptr<LoadedKernel>> out;
  for (size_t i = 0; i < isas.size(); ++i) {
    if (!results[i].status.ok()) return results[i].status;
    auto k = std::make_unique<LoadedKernel>();
    k->function = m->functions[0];
    k->lowered = *lowered;
    k->isa = isas[i];
    char path[] = "/tmp/tl-test-XXXXXX.so";
    const int fd = mkstemps(path, 3);
    if (fd < 0) return Status(StatusCode::kUnavailable, "mkstemps failed");
    const std::vector<uint8_t>& so = results[i].object;
    const bool wrote = write(fd, so.data(), so.size()) == static_cast<ssize_t>(so.size());
    close(fd);
    if (!wrote) return Status(StatusCode::kUnavailable, "cannot write the shared object");
    k->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    unlink(path);
    if (k->handle == nullptr) return Status(StatusCode::kInternal, std::string("dlopen: ") + dlerror());
    auto query = reinterpret_cast<tl_cpu_library_query_fn_t>(dlsym(k->handle, TL_CPU_LIBRARY_QUERY_SYMBOL));
    if (query == nullptr) return Status(StatusCode::kInternal, "no tl_cpu_library_query");
    k->library = query(TL_CPU_ABI_VERSION);
    if (k->library == nullptr || k->library->kernel_count != 1) {
      return Status(StatusCode::kInternal, "library query failed");
    }
    k->kernel = &k->library->kernels[0];
    out.push_back(std::move(k));
  }
  return out;
}

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t EvalGrid(const std::vector<int64_t>& code, const std::vector<int64_t>& symbols,
                 const std::vector<void*>& args) {
  std::vector<int64_t> st;
  for (size_t pc = 0; pc < code.size();) {
    const int64_t op = code[pc++];
    if (op == 0) {
      st.push_back(code[pc++]);
      continue;
    }
    if (op == 1) {
      st.push_back(symbols.at(static_cast<size_t>(code[pc++])));
      continue;
    }
    if (op == 2) {
      st.push_back(*static_cast<const int32_t*>(args.at(static_cast<size_t>(code[pc++]))));
      continue;
    }
    const int64_t b = st.back();
    st.pop_back();
    const int64_t a = st.back();
    st.pop_back();
    switch (op) {
      case 3: st.push_back(a + b); break;
      case 4: st.push_back(a - b); break;
      case 5: st.push_back(a * b); break;
      case 6: st.push_back(-FloorDiv(-a, b)); break;
      case 7: st.push_back(FloorDiv(a, b)); break;
      case 8: st.push_back(std::min(a, b)); break;
      case 9: st.push_back(std::max(a, b)); break;
      case 10: st.push_back(a - FloorDiv(a, b) * b); break;
      default: std::abort();
    }
  }
  return st.back();
}

}  // namespace

int Launch(const LoadedKernel& k, const std::vector<void*>& args, const std::vector<int64_t>& symbols,
           int threads) {
  uint32_t grid[3] = {1, 1, 1};
  for (size_t i = 0; i < k.lowered.grid.size(); ++i) {
    StatusOr<std::vector<int64_t>> code = passes::CompileGridExpr(k.lowered.grid[i], k.function);
    if (!code.ok()) return -1;
    grid[i] = static_cast<uint32_t>(EvalGrid(*code, symbols, args));
  }
  tl_cpu_dispatch_t d{};
  std::memcpy(d.grid, grid, sizeof grid);
  d.arg_count = static_cast<uint32_t>(args.size());
  d.args = args.data();
  d.symbols = symbols.data();
  d.symbol_count = static_cast<uint32_t>(symbols.size());
  const uint64_t total = uint64_t{grid[0]} * grid[1] * grid[2];
  std::atomic<uint64_t> next{0};
  std::atomic<int> failure{0};
  auto worker = [&](uint32_t w) {
    const size_t bytes = std::max<size_t>(64, (k.kernel->scratch_bytes + 63) / 64 * 64);
    void* scratch = std::aligned_alloc(64, bytes);
    for (uint64_t b; (b = next.fetch_add(1)) < total;) {
      tl_cpu_block_t blk{};
      blk.block[0] = static_cast<uint32_t>(b % grid[0]);
      blk.block[1] = static_cast<uint32_t>(b / grid[0] % grid[1]);
      blk.block[2] = static_cast<uint32_t>(b / (uint64_t{grid[0]} * grid[1]));
      blk.worker = w;
      blk.scratch = scratch;
      blk.scratch_bytes = bytes;
      const int rc = k.kernel->fn(&d, &blk);
      if (rc != 0) failure.store(rc);
    }
    std::free(scratch);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, static_cast<uint32_t>(t));
  for (std::thread& t : pool) t.join();
  return failure.load();
}

float HalfToFloat(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(m + 1024), e - 25);
}

__attribute__((target("f16c"))) static uint16_t FloatToHalfF16c(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

uint16_t FloatToHalf(float f) { return FloatToHalfF16c(f); }

float Bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1;
  return static_cast<uint16_t>((u + 0x7fff + lsb) >> 16);
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace tl::cputest
