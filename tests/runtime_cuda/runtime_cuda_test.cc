// The CUDA launch path through the C ABI (tl_* functions only), on the
// hand-written kernels of kernels.cu: cubin and PTX (driver JIT) variants,
// the parameter-layout cross-check, dynamic shared memory above 48 KiB,
// streams, payload corruption and launch validation. Results are compared
// with a host reference on random inputs.
//
// Without a CUDA device every test skips with "no CUDA device: <status>".
// Bundles are built here with the formats library's writer; param_slots are
// written from the kernel signatures (see kernels.cu for the layouts).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bundle_generated.h"
#include "tilelang/formats/writer.h"
#include "tilelang/runtime.h"

extern const unsigned char tl_test_cubin_sm_90a[];
extern const size_t tl_test_cubin_sm_90a_size;
extern const unsigned char tl_test_cubin_sm_90[];
extern const size_t tl_test_cubin_sm_90_size;
extern const unsigned char tl_test_ptx_compute_80[];
extern const size_t tl_test_ptx_compute_80_size;

namespace {

namespace fb = tl::bundle;

std::vector<uint8_t> Bytes(const unsigned char* data, size_t size) { return std::vector<uint8_t>(data, data + size); }
std::vector<uint8_t> CubinSm90a() { return Bytes(tl_test_cubin_sm_90a, tl_test_cubin_sm_90a_size); }
std::vector<uint8_t> CubinSm90() { return Bytes(tl_test_cubin_sm_90, tl_test_cubin_sm_90_size); }
std::vector<uint8_t> PtxCompute80() { return Bytes(tl_test_ptx_compute_80, tl_test_ptx_compute_80_size); }

// ".version 9.0" -> 90 (the PTX ISA requirement of the variant).
uint32_t PtxIsaVersion(const std::vector<uint8_t>& ptx) {
  std::string text(ptx.begin(), ptx.end());
  size_t at = text.find(".version ");
  if (at == std::string::npos) return 0;
  unsigned major = 0, minor = 0;
  if (sscanf(text.c_str() + at, ".version %u.%u", &major, &minor) != 2) return 0;
  return major * 10 + minor;
}

// Takes a status: "" for success, else "CODE: message" (and frees it).
std::string S(tl_status_t s) {
  if (!s) return "";
  std::string out = std::string(tl_status_code_name(tl_status_code(s))) + ": " + tl_status_message(s);
  tl_status_free(s);
  return out;
}

//===--------------------------------------------------------------------===//
// Bundles
//===--------------------------------------------------------------------===//

struct Slot {
  int param;
  uint32_t offset, size, align;
};

std::unique_ptr<fb::ParamT> Buffer(const std::string& name, std::vector<std::pair<int, uint32_t>> dims,
                                   fb::Access access, uint8_t code = TL_DTYPE_FLOAT, uint8_t bits = 32) {
  auto p = std::make_unique<fb::ParamT>();
  p->name = name;
  p->kind = fb::ParamKind::BUFFER;
  p->dtype = std::make_unique<fb::DType>(code, bits, 1);
  p->access = access;
  p->rank = static_cast<int8_t>(dims.size());
  for (const auto& [symbol, divisible_by] : dims) {
    auto d = std::make_unique<fb::DimT>();
    d->static_size = -1;
    d->symbol = static_cast<int16_t>(symbol);
    d->divisible_by = divisible_by;
    p->shape.push_back(std::move(d));
  }
  p->ptr_alignment = 16;
  return p;
}

std::unique_ptr<fb::ParamT> Scalar(const std::string& name, uint8_t code, uint8_t bits, int binds_symbol = -1) {
  auto p = std::make_unique<fb::ParamT>();
  p->name = name;
  p->kind = fb::ParamKind::SCALAR;
  p->dtype = std::make_unique<fb::DType>(code, bits, 1);
  p->rank = 0;
  p->binds_symbol = static_cast<int16_t>(binds_symbol);
  return p;
}

struct VariantSpec {
  std::string id;             // "cuda.sm_90a"
  fb::CodeKind kind;
  std::string arch;           // "sm_90a", "compute_80"
  uint32_t payload;
  uint32_t isa_version = 0;
};

struct LaunchSpec {
  std::vector<uint32_t> block;
  std::vector<std::vector<int64_t>> grid;
  uint32_t dynamic_shared = 0;
  std::vector<Slot> slots;
  uint32_t param_buffer_bytes = 0;
};

std::unique_ptr<fb::VariantT> Variant(const VariantSpec& v, const std::string& entry, const LaunchSpec& l) {
  auto out = std::make_unique<fb::VariantT>();
  out->id = v.id;
  out->backend = fb::Backend::CUDA;
  out->code_kind = v.kind;
  out->requires_ = std::make_unique<fb::RequirementsT>();
  out->requires_->arch = v.arch;
  out->requires_->isa_version = v.isa_version;
  out->requires_->shared_bytes = l.dynamic_shared;
  out->requires_->threads_per_block = l.block[0] * l.block[1] * l.block[2];
  out->entry_point = entry;
  out->payload = v.payload;
  out->launch = std::make_unique<fb::LaunchT>();
  out->launch->block = l.block;
  for (const auto& g : l.grid) {
    auto e = std::make_unique<fb::GridExprT>();
    e->code = g;
    out->launch->grid.push_back(std::move(e));
  }
  out->launch->dynamic_shared_bytes = l.dynamic_shared;
  for (const auto& s : l.slots) {
    auto ps = std::make_unique<fb::ParamSlotT>();
    ps->param = static_cast<int16_t>(s.param);
    ps->offset = s.offset;
    ps->size = s.size;
    ps->align = s.align;
    out->launch->param_slots.push_back(std::move(ps));
  }
  out->launch->param_buffer_bytes = l.param_buffer_bytes;
  return out;
}

// axpy(float a, const float* x, float* y, int n): y = a * x + y over N.
LaunchSpec AxpyLaunch() {
  LaunchSpec l;
  l.block = {256, 1, 1};
  l.grid = {{1, 0, 0, 256, 6}, {0, 1}, {0, 1}};  // CEILDIV(N, 256), 1, 1
  l.slots = {{0, 0, 4, 4}, {1, 8, 8, 8}, {2, 16, 8, 8}, {3, 24, 4, 4}};
  l.param_buffer_bytes = 28;
  return l;
}

std::unique_ptr<fb::KernelT> AxpyKernel() {
  auto k = std::make_unique<fb::KernelT>();
  k->name = "axpy";
  k->symbols = {"N"};
  k->params.push_back(Scalar("a", TL_DTYPE_FLOAT, 32));
  k->params.push_back(Buffer("x", {{0, 1}}, fb::Access::READ));
  k->params.push_back(Buffer("y", {{0, 1}}, fb::Access::READ_WRITE));
  k->params.push_back(Scalar("n", TL_DTYPE_INT, 32, 0));
  return k;
}

// gemm_f32(A[M,K], B[K,N], C[M,N], int M, int N, int K), 128x128 tiles,
// 64 KiB of dynamic shared memory.
constexpr uint32_t kGemmShared = (128 * 64 + 64 * 128) * 4;
LaunchSpec GemmLaunch() {
  LaunchSpec l;
  l.block = {256, 1, 1};
  l.grid = {{1, 1, 0, 128, 6}, {1, 0, 0, 128, 6}, {0, 1}};  // CEILDIV(N, 128), CEILDIV(M, 128), 1
  l.dynamic_shared = kGemmShared;
  l.slots = {{0, 0, 8, 8}, {1, 8, 8, 8}, {2, 16, 8, 8}, {3, 24, 4, 4}, {4, 28, 4, 4}, {5, 32, 4, 4}};
  l.param_buffer_bytes = 36;
  return l;
}

std::unique_ptr<fb::KernelT> GemmKernel() {
  auto k = std::make_unique<fb::KernelT>();
  k->name = "gemm_f32";
  k->symbols = {"M", "N", "K"};
  k->params.push_back(Buffer("A", {{0, 128}, {2, 64}}, fb::Access::READ));
  k->params.push_back(Buffer("B", {{2, 64}, {1, 128}}, fb::Access::READ));
  k->params.push_back(Buffer("C", {{0, 128}, {1, 128}}, fb::Access::WRITE));
  k->params.push_back(Scalar("M", TL_DTYPE_INT, 32, 0));
  k->params.push_back(Scalar("N", TL_DTYPE_INT, 32, 1));
  k->params.push_back(Scalar("K", TL_DTYPE_INT, 32, 2));
  return k;
}

struct BundleOptions {
  bool cubins = true;
  bool ptx = true;
  bool compress = true;
  // Overrides of the axpy layout (wrong-manifest tests).
  std::vector<Slot> axpy_slots;
  uint32_t axpy_param_buffer_bytes = 0;
  std::vector<uint8_t> ptx_override;  // replaces the compute_80 PTX
};

// Kernels axpy and gemm_f32, each with variants cuda.sm_90a, cuda.sm_90
// (cubins) and cuda.compute_80 (PTX).
std::vector<uint8_t> MakeBundle(const BundleOptions& o = {}) {
  tl::formats::WriteOptions wo;
  wo.compress = o.compress;
  tl::formats::BundleWriter writer(wo);
  std::vector<VariantSpec> variants;
  if (o.cubins) {
    variants.push_back({"cuda.sm_90a", fb::CodeKind::CUBIN, "sm_90a", writer.AddPayload(CubinSm90a())});
    variants.push_back({"cuda.sm_90", fb::CodeKind::CUBIN, "sm_90", writer.AddPayload(CubinSm90())});
  }
  if (o.ptx) {
    std::vector<uint8_t> ptx = o.ptx_override.empty() ? PtxCompute80() : o.ptx_override;
    const uint32_t isa = PtxIsaVersion(PtxCompute80());
    variants.push_back({"cuda.compute_80", fb::CodeKind::PTX, "compute_80", writer.AddPayload(ptx), isa});
  }
  auto axpy = AxpyKernel();
  LaunchSpec al = AxpyLaunch();
  if (!o.axpy_slots.empty()) {
    al.slots = o.axpy_slots;
    al.param_buffer_bytes = o.axpy_param_buffer_bytes;
  }
  for (const auto& v : variants) axpy->variants.push_back(Variant(v, "axpy", al));
  auto gemm = GemmKernel();
  for (const auto& v : variants) gemm->variants.push_back(Variant(v, "gemm_f32", GemmLaunch()));
  if (!writer.AddKernel(std::move(axpy)).ok() || !writer.AddKernel(std::move(gemm)).ok()) abort();
  auto bytes = writer.Finish();
  if (!bytes.ok()) {
    fprintf(stderr, "test setup: %s\n", bytes.status().ToString().c_str());
    abort();
  }
  return bytes.value();
}

//===--------------------------------------------------------------------===//
// Fixture
//===--------------------------------------------------------------------===//

// One device buffer, released at scope end.
struct DeviceBuffer {
  tl_buffer_t* buffer = nullptr;
  ~DeviceBuffer() { tl_buffer_release(buffer); }
  void* ptr() const { return tl_buffer_device_pointer(buffer); }
};

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override { Open(TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT); }
  void TearDown() override { Close(); }

  // Creates the runtime (CUDA only) and opens device cuda:0, or skips.
  // `debug_log`: collect the runtime's log up to TL_LOG_DEBUG in logs_.
  void Open(uint64_t flags, bool debug_log = false) {
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CUDA);
    o.flags = flags;
    if (debug_log) {
      o.log = [](void* user, tl_log_level_t, const char* message, size_t length) {
        static_cast<Cuda*>(user)->logs_.emplace_back(message, length);
      };
      o.log_user = this;
      o.log_level = TL_LOG_DEBUG;
    }
    ASSERT_EQ(S(tl_runtime_create(&o, &rt_)), "");
    if (tl_runtime_device_count(rt_) == 0) {
      std::string why = S(tl_runtime_backend_status(rt_, TL_BACKEND_CUDA));
      if (why.empty()) why = "the CUDA driver reports no devices";
      GTEST_SKIP() << "no CUDA device: " << why;
    }
    ASSERT_EQ(S(tl_runtime_device_at(rt_, 0, &dev_)), "");
    tl_device_info_t info;
    info.struct_size = sizeof(info);
    ASSERT_EQ(S(tl_device_info(dev_, &info)), "");
    // A device of a driver that lacks launch-path symbols can only be
    // probed: that is a failure on a GPU machine, not a reason to skip.
    ASSERT_TRUE(info.flags & TL_DEVICE_FLAG_CAN_LAUNCH) << "CUDA device '" << info.name << "' cannot launch";
    arch_ = info.arch;
    name_ = info.name;
  }
  void Close() {
    tl_device_release(dev_);
    tl_runtime_release(rt_);
    dev_ = nullptr;
    rt_ = nullptr;
  }
  bool IsSm90() const { return arch_ == "sm_90"; }

  tl_bundle_t* OpenBundle(const std::vector<uint8_t>& bytes) {
    tl_bundle_t* b = nullptr;
    EXPECT_EQ(S(tl_bundle_open_memory(rt_, bytes.data(), bytes.size(), nullptr, nullptr, &b)), "");
    return b;
  }
  // Prepares `kernel` of `bytes`; "" or the status text.
  std::string Prepare(const std::vector<uint8_t>& bytes, const char* kernel, tl_prepared_t** out) {
    *out = nullptr;
    tl_bundle_t* b = OpenBundle(bytes);
    if (!b) return "bundle did not open";
    tl_kernel_t* k = nullptr;
    std::string s = S(tl_bundle_find_kernel(b, kernel, &k));
    if (s.empty()) s = S(tl_kernel_prepare(k, dev_, 0, out));
    tl_kernel_release(k);
    tl_bundle_release(b);
    return s;
  }
  void Alloc(DeviceBuffer* b, size_t bytes) { ASSERT_EQ(S(tl_buffer_allocate(dev_, bytes, &b->buffer)), ""); }

  // Runs axpy through `p` on n random elements and compares with the host.
  void RunAxpy(tl_prepared_t* p, int n, tl_stream_t* stream) {
    std::mt19937 rng(1234 + n);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x(n), y(n), out(n, std::nanf(""));
    for (auto& v : x) v = dist(rng);
    for (auto& v : y) v = dist(rng);
    const float a = dist(rng) * 4.0f;
    DeviceBuffer dx, dy;
    Alloc(&dx, n * sizeof(float));
    Alloc(&dy, n * sizeof(float));
    ASSERT_EQ(S(tl_buffer_copy_from_host(dx.buffer, 0, x.data(), n * sizeof(float), stream)), "");
    ASSERT_EQ(S(tl_buffer_copy_from_host(dy.buffer, 0, y.data(), n * sizeof(float), stream)), "");
    const int64_t shape[1] = {n};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[4] = {tl_arg_f32(a), tl_arg_tensor(dx.ptr(), f32, 1, shape, nullptr),
                        tl_arg_tensor(dy.ptr(), f32, 1, shape, nullptr), tl_arg_i32(n)};
    ASSERT_EQ(S(tl_launch(p, stream, 4, args, nullptr)), "");
    ASSERT_EQ(S(tl_buffer_copy_to_host(dy.buffer, 0, out.data(), n * sizeof(float), stream)), "");
    if (stream) {
      ASSERT_EQ(S(tl_stream_synchronize(stream, 10'000'000'000ull)), "");
    }
    int bad = 0;
    for (int i = 0; i < n; ++i) {
      const double ref = static_cast<double>(a) * x[i] + y[i];
      if (!(std::fabs(out[i] - ref) <= 1e-6 * (1.0 + std::fabs(ref)))) {
        if (++bad <= 3) ADD_FAILURE() << "y[" << i << "] = " << out[i] << ", expected " << ref;
      }
    }
    EXPECT_EQ(bad, 0) << "of " << n << " elements";
  }

  // GEMM with random inputs; compares every element (check_all) or 256
  // random ones with a float64 host reference. Returns median ms per launch
  // over `timed` launches on a stream (0: no timing).
  double RunGemm(tl_prepared_t* p, int M, int N, int K, bool check_all, int timed = 0) {
    std::mt19937 rng(99 + M + N + K);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C(size_t(M) * N, std::nanf(""));
    for (auto& v : A) v = dist(rng);
    for (auto& v : B) v = dist(rng);
    DeviceBuffer dA, dB, dC;
    Alloc(&dA, A.size() * 4);
    Alloc(&dB, B.size() * 4);
    Alloc(&dC, C.size() * 4);
    EXPECT_EQ(S(tl_buffer_copy_from_host(dA.buffer, 0, A.data(), A.size() * 4, nullptr)), "");
    EXPECT_EQ(S(tl_buffer_copy_from_host(dB.buffer, 0, B.data(), B.size() * 4, nullptr)), "");
    EXPECT_EQ(S(tl_buffer_copy_from_host(dC.buffer, 0, C.data(), C.size() * 4, nullptr)), "");  // poison (NaN)
    const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
    const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
    tl_arg_t args[6] = {tl_arg_tensor(dA.ptr(), f32, 2, sa, nullptr), tl_arg_tensor(dB.ptr(), f32, 2, sb, nullptr),
                        tl_arg_tensor(dC.ptr(), f32, 2, sc, nullptr), tl_arg_i32(M), tl_arg_i32(N), tl_arg_i32(K)};
    EXPECT_EQ(S(tl_launch(p, nullptr, 6, args, nullptr)), "");
    EXPECT_EQ(S(tl_buffer_copy_to_host(dC.buffer, 0, C.data(), C.size() * 4, nullptr)), "");
    auto ref = [&](int i, int j) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += double(A[size_t(i) * K + k]) * B[size_t(k) * N + j];
      return acc;
    };
    double err2 = 0, ref2 = 0;
    int checked = 0;
    auto check = [&](int i, int j) {
      const double r = ref(i, j), c = C[size_t(i) * N + j];
      err2 += (c - r) * (c - r);
      ref2 += r * r;
      if (std::isnan(c)) ADD_FAILURE() << "C[" << i << "][" << j << "] was not written";
      ++checked;
    };
    if (check_all) {
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) check(i, j);
    } else {
      for (int t = 0; t < 256; ++t) check(int(rng() % M), int(rng() % N));
    }
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LT(rel, 1e-5) << "relative error over " << checked << " elements";
    printf("[ gemm ] %dx%dx%d fp32: relative error %.2e over %d elements\n", M, N, K, rel, checked);
    if (timed == 0) return 0;
    tl_stream_t* stream = nullptr;
    EXPECT_EQ(S(tl_stream_create(dev_, 0, &stream)), "");
    std::vector<double> ms;
    for (int it = -3; it < timed; ++it) {  // 3 warm-ups
      auto t0 = std::chrono::steady_clock::now();
      EXPECT_EQ(S(tl_launch(p, stream, 6, args, nullptr)), "");
      EXPECT_EQ(S(tl_stream_synchronize(stream, 60'000'000'000ull)), "");
      if (it >= 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    tl_stream_release(stream);
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    printf("[ gemm ] %dx%dx%d fp32 on '%s': median %.3f ms (min %.3f, max %.3f, %d launches) = %.1f TFLOP/s\n", M, N,
           K, name_.c_str(), median, ms.front(), ms.back(), timed, 2.0 * M * N * K / (median * 1e-3) / 1e12);
    return median;
  }

  tl_runtime_t* rt_ = nullptr;
  tl_device_t* dev_ = nullptr;
  std::string arch_, name_;
  std::vector<std::string> logs_;  // Open(..., debug_log = true)
};

//===--------------------------------------------------------------------===//
// Tests
//===--------------------------------------------------------------------===//

TEST_F(Cuda, AxpyCubinMatchesHost) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "axpy", &p), "");
  tl_variant_info_t vi;
  vi.struct_size = sizeof(vi);
  ASSERT_EQ(S(tl_prepared_variant_info(p, &vi)), "");
  if (IsSm90()) {
    EXPECT_STREQ(vi.id, "cuda.sm_90a");
  }
  EXPECT_EQ(vi.jit, 0u);
  const std::string explain = tl_prepared_explain(p);
  printf("%s", explain.c_str());
  EXPECT_NE(explain.find("cubin loaded"), std::string::npos) << explain;
  EXPECT_NE(explain.find("parameter layout (4 slots, 28 bytes) matches cuFuncGetParamInfo"), std::string::npos)
      << explain;
  // The PTX variant is ranked (and named "JIT-compiled PTX") but not chosen.
  EXPECT_EQ(explain.find("[JIT"), std::string::npos) << explain;
  EXPECT_EQ(explain.find("PTX JIT-compiled by the driver"), std::string::npos) << explain;
  RunAxpy(p, (1 << 20) + 37, nullptr);
  RunAxpy(p, 1, nullptr);
  tl_prepared_release(p);
}

TEST_F(Cuda, AxpyOnOwnedAndWrappedStreams) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "axpy", &p), "");
  tl_stream_t* stream = nullptr;
  ASSERT_EQ(S(tl_stream_create(dev_, 0, &stream)), "");
  RunAxpy(p, 3 << 20, stream);
  // A timeout of 0 on an idle stream answers at once.
  EXPECT_EQ(S(tl_stream_synchronize(stream, 0)), "");
  tl_stream_release(stream);
  // NULL wraps the legacy default stream of the device's primary context.
  tl_stream_t* wrapped = nullptr;
  ASSERT_EQ(S(tl_stream_wrap_native(dev_, nullptr, &wrapped)), "");
  RunAxpy(p, 4097, wrapped);
  tl_stream_release(wrapped);
  tl_prepared_release(p);
}

TEST_F(Cuda, ForcedPtxIsJitCompiledAndReported) {
  Close();
  setenv("TL_FORCE_VARIANT", "cuda.compute_80", 1);
  Open(0);
  unsetenv("TL_FORCE_VARIANT");
  if (IsSkipped() || HasFatalFailure()) return;
  for (const char* kernel : {"axpy", "gemm_f32"}) {
    tl_prepared_t* p = nullptr;
    ASSERT_EQ(Prepare(MakeBundle(), kernel, &p), "");
    tl_variant_info_t vi;
    vi.struct_size = sizeof(vi);
    ASSERT_EQ(S(tl_prepared_variant_info(p, &vi)), "");
    EXPECT_STREQ(vi.id, "cuda.compute_80");
    EXPECT_EQ(vi.jit, 1u);
    const std::string explain = tl_prepared_explain(p);
    printf("%s", explain.c_str());
    EXPECT_NE(explain.find("forced by TL_FORCE_VARIANT: cuda.compute_80"), std::string::npos) << explain;
    EXPECT_NE(explain.find("[JIT: the driver compiles PTX at load]"), std::string::npos) << explain;
    EXPECT_NE(explain.find("PTX JIT-compiled by the driver"), std::string::npos) << explain;
    EXPECT_NE(explain.find("matches cuFuncGetParamInfo"), std::string::npos) << explain;
    if (std::string(kernel) == "axpy") {
      RunAxpy(p, 100003, nullptr);
    } else {
      RunGemm(p, 256, 384, 320, true);
    }
    tl_prepared_release(p);
  }
}

TEST_F(Cuda, GemmWithDynamicSharedAbove48KiBMatchesHost) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "gemm_f32", &p), "");
  const std::string explain = tl_prepared_explain(p);
  printf("%s", explain.c_str());
  EXPECT_NE(explain.find("65536 B dynamic shared (opt-in above 48 KiB set)"), std::string::npos) << explain;
  RunGemm(p, 256, 384, 320, true);
  RunGemm(p, 128, 128, 64, true);
  tl_prepared_release(p);
}

TEST_F(Cuda, GemmTiming4096) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "gemm_f32", &p), "");
  const double ms = RunGemm(p, 4096, 4096, 4096, false, 10);
  EXPECT_GT(ms, 0.0);
  RecordProperty("gemm_4096_median_ms", std::to_string(ms));
  tl_prepared_release(p);
}

TEST_F(Cuda, StreamSynchronizeTimesOutWhileWorkRuns) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "gemm_f32", &p), "");
  const int n = 4096;  // about 9 ms per launch on an H200
  DeviceBuffer dA, dB, dC;
  Alloc(&dA, size_t(n) * n * 4);
  Alloc(&dB, size_t(n) * n * 4);
  Alloc(&dC, size_t(n) * n * 4);
  const int64_t shape[2] = {n, n};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[6] = {tl_arg_tensor(dA.ptr(), f32, 2, shape, nullptr), tl_arg_tensor(dB.ptr(), f32, 2, shape, nullptr),
                      tl_arg_tensor(dC.ptr(), f32, 2, shape, nullptr), tl_arg_i32(n), tl_arg_i32(n), tl_arg_i32(n)};
  tl_stream_t* stream = nullptr;
  ASSERT_EQ(S(tl_stream_create(dev_, 0, &stream)), "");
  for (int i = 0; i < 4; ++i) ASSERT_EQ(S(tl_launch(p, stream, 6, args, nullptr)), "");
  std::string e = S(tl_stream_synchronize(stream, 1000));  // 1 us
  EXPECT_EQ(e.rfind("DEADLINE_EXCEEDED: stream on CUDA device", 0), 0u) << e;
  EXPECT_EQ(S(tl_stream_synchronize(stream, 60'000'000'000ull)), "");
  tl_stream_release(stream);
  tl_prepared_release(p);
}

TEST_F(Cuda, SynchronousLaunchIsTimedWithEventsInTheDebugLog) {
  Close();
  Open(TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT, /*debug_log=*/true);
  if (IsSkipped() || HasFatalFailure()) return;
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "axpy", &p), "");
  RunAxpy(p, 1 << 16, nullptr);
  bool timed = false, loaded = false;
  for (const auto& line : logs_) {
    if (line.find("cuda: kernel 'axpy' variant '") == 0 && line.find("' grid (256, 1, 1) ran in ") != std::string::npos &&
        line.find(" ms (CUDA events)") != std::string::npos) {
      timed = true;
    }
    if (line.find("cuda: loaded kernel 'axpy' variant '") == 0) loaded = true;
  }
  EXPECT_TRUE(timed && loaded) << "log lines: " << logs_.size() << (logs_.empty() ? "" : ", last: " + logs_.back());
  tl_prepared_release(p);
}

TEST_F(Cuda, WrongParamLayoutIsRejectedAtPrepare) {
  // x declared at offset 4: the real layout has it at 8 (pointer alignment).
  BundleOptions o;
  o.axpy_slots = {{0, 0, 4, 4}, {1, 4, 8, 4}, {2, 16, 8, 8}, {3, 24, 4, 4}};
  o.axpy_param_buffer_bytes = 28;
  tl_prepared_t* p = nullptr;
  std::string e = Prepare(MakeBundle(o), "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("slot 1 (param 1) is at offset 4 size 8 in the bundle, but the loaded function 'axpy' has "
                   "parameter 1 at offset 8 size 8"),
            std::string::npos)
      << e;
  // One slot short: n missing. The manifest reader accepts it; the check
  // against the function does not.
  o.axpy_slots = {{0, 0, 4, 4}, {1, 8, 8, 8}, {2, 16, 8, 8}};
  o.axpy_param_buffer_bytes = 24;
  e = Prepare(MakeBundle(o), "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(e.find("parameter 3 fills 0 slots"), std::string::npos) << e;
  // A 4-byte slot for a pointer: the sizes disagree.
  o.axpy_slots = {{0, 0, 4, 4}, {1, 8, 4, 4}, {2, 16, 8, 8}, {3, 24, 4, 4}};
  o.axpy_param_buffer_bytes = 28;
  e = Prepare(MakeBundle(o), "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(e.find("offset 8 size 4 in the bundle"), std::string::npos) << e;
  // The right layout, written out explicitly, passes.
  o.axpy_slots = {{0, 0, 4, 4}, {1, 8, 8, 8}, {2, 16, 8, 8}, {3, 24, 4, 4}};
  o.axpy_param_buffer_bytes = 28;
  ASSERT_EQ(Prepare(MakeBundle(o), "axpy", &p), "");
  tl_prepared_release(p);
}

TEST_F(Cuda, CorruptedCubinIsRejectedBeforeTheDriver) {
  // Stored uncompressed, so that the cubin's bytes can be found and flipped.
  BundleOptions o;
  o.ptx = false;
  o.compress = false;
  std::vector<uint8_t> bytes = MakeBundle(o);
  const std::vector<uint8_t> cubin = CubinSm90a();
  auto it = std::search(bytes.begin(), bytes.end(), cubin.begin(), cubin.end());
  ASSERT_NE(it, bytes.end());
  it[cubin.size() / 2] ^= 0x40;  // the driver would load and run this (runtime-anchors.md 4.4)
  tl_prepared_t* p = nullptr;
  std::string e = Prepare(bytes, "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e.rfind("DATA_LOSS: ", 0), 0u) << e;
  EXPECT_NE(e.find("CRC32C"), std::string::npos) << e;
}

TEST_F(Cuda, BadPtxIsRejectedWithTheJitLog) {
  Close();
  setenv("TL_FORCE_VARIANT", "cuda.compute_80", 1);
  Open(0);
  unsetenv("TL_FORCE_VARIANT");
  if (IsSkipped() || HasFatalFailure()) return;
  // A syntax error: the driver's ptxas log must reach the status.
  std::vector<uint8_t> ptx = PtxCompute80();
  std::string text(ptx.begin(), ptx.end());
  size_t at = text.find("ld.param");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "ld.bogus");
  BundleOptions o;
  o.ptx_override.assign(text.begin(), text.end());
  tl_prepared_t* p = nullptr;
  std::string e = Prepare(MakeBundle(o), "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("CUDA_ERROR_INVALID_PTX"), std::string::npos) << e;
  EXPECT_NE(e.find("JIT error log: "), std::string::npos) << e;
  printf("%s\n", e.c_str());
  // A NUL inside the text: refused before the driver, which would compile
  // the truncated module.
  o.ptx_override = PtxCompute80();
  o.ptx_override[o.ptx_override.size() / 2] = 0;
  e = Prepare(MakeBundle(o), "axpy", &p);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(e.find("holds a NUL byte at offset"), std::string::npos) << e;
}

TEST_F(Cuda, LaunchValidationRejectsWrongBuffers) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "axpy", &p), "");
  DeviceBuffer dx, dy;
  Alloc(&dx, 4096);
  Alloc(&dy, 4096);
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32), i32 = tl_dtype(TL_DTYPE_INT, 32);
  const int64_t n = 1000, n2 = 999;
  // Wrong dtype for x.
  tl_arg_t args[4] = {tl_arg_f32(2.0f), tl_arg_tensor(dx.ptr(), i32, 1, &n, nullptr),
                      tl_arg_tensor(dy.ptr(), f32, 1, &n, nullptr), tl_arg_i32(1000)};
  std::string e = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("argument 1 'x'"), std::string::npos) << e;
  // x and y of different sizes (both must be N).
  args[1] = tl_arg_tensor(dx.ptr(), f32, 1, &n, nullptr);
  args[2] = tl_arg_tensor(dy.ptr(), f32, 1, &n2, nullptr);
  e = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("argument 2 'y'"), std::string::npos) << e;
  // n disagrees with the tensors' N.
  args[2] = tl_arg_tensor(dy.ptr(), f32, 1, &n, nullptr);
  args[3] = tl_arg_i32(1024);
  e = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("'n'"), std::string::npos) << e;
  // A 64-bit scalar where the kernel takes int32.
  args[3] = tl_arg_i64(1000);
  e = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  // Copies past the end of a buffer.
  std::vector<uint8_t> host(8);
  e = S(tl_buffer_copy_from_host(dx.buffer, 4092, host.data(), 8, nullptr));
  EXPECT_EQ(e.rfind("OUT_OF_RANGE: ", 0), 0u) << e;
  tl_prepared_release(p);

  // GEMM with M not a multiple of the 128-row tile.
  ASSERT_EQ(Prepare(MakeBundle(), "gemm_f32", &p), "");
  const int64_t sa[2] = {100, 64}, sb[2] = {64, 128}, sc[2] = {100, 128};
  tl_arg_t g[6] = {tl_arg_tensor(dx.ptr(), f32, 2, sa, nullptr), tl_arg_tensor(dy.ptr(), f32, 2, sb, nullptr),
                   tl_arg_tensor(dy.ptr(), f32, 2, sc, nullptr), tl_arg_i32(100), tl_arg_i32(128), tl_arg_i32(64)};
  e = S(tl_launch(p, nullptr, 6, g, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("argument 0 'A'"), std::string::npos) << e;
  tl_prepared_release(p);
}

TEST_F(Cuda, DeviceBuffersRoundTrip) {
  const size_t n = (64 << 20) + 3;
  std::vector<uint8_t> in(n), out(n, 0);
  std::mt19937 rng(7);
  for (auto& b : in) b = static_cast<uint8_t>(rng());
  DeviceBuffer d;
  Alloc(&d, n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.ptr()) % 256, 0u);
  ASSERT_EQ(S(tl_buffer_copy_from_host(d.buffer, 0, in.data(), n, nullptr)), "");
  ASSERT_EQ(S(tl_buffer_copy_to_host(d.buffer, 0, out.data(), n, nullptr)), "");
  EXPECT_TRUE(in == out);
  // An impossible allocation names the size and the free memory.
  tl_buffer_t* huge = nullptr;
  std::string e = S(tl_buffer_allocate(dev_, size_t{1} << 50, &huge));
  EXPECT_EQ(e.rfind("RESOURCE_EXHAUSTED: allocating 1125899906842624 bytes", 0), 0u) << e;
  EXPECT_NE(e.find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << e;
}

// Issue #9: a pointer the kernel cannot address on THIS device is rejected
// at launch, naming the argument (the driver itself would launch and fault).
TEST_F(Cuda, PageableHostPointerIsRejectedAtLaunch) {
  tl_prepared_t* p = nullptr;
  ASSERT_EQ(Prepare(MakeBundle(), "axpy", &p), "");
  DeviceBuffer dy;
  Alloc(&dy, 4096);
  std::vector<float> host(1024, 1.0f);
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  const int64_t n = 1024;
  tl_arg_t args[4] = {tl_arg_f32(2.0f), tl_arg_tensor(host.data(), f32, 1, &n, nullptr),
                      tl_arg_tensor(dy.ptr(), f32, 1, &n, nullptr), tl_arg_i32(1024)};
  std::string e = S(tl_launch(p, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("argument 1 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("is not CUDA memory"), std::string::npos) << e;
  EXPECT_NE(e.find("expected device memory of CUDA device 0"), std::string::npos) << e;
  // The same launch with device memory still works afterwards.
  RunAxpy(p, 4097, nullptr);
  tl_prepared_release(p);
}

// Every CUDA device of the runtime, driven alike: per device its own
// prepared kernel (one bundle), buffers and stream; launches on all devices
// at once from one thread per device; a buffer of device 0 given to a launch
// on device 1 is rejected. Needs two GPUs (nvidia-h200-x2); skips otherwise.
class CudaMultiDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    tl_runtime_options_t o;
    tl_runtime_options_init(&o);
    o.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CUDA);
    o.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
    ASSERT_EQ(S(tl_runtime_create(&o, &rt_)), "");
    const size_t count = tl_runtime_device_count(rt_);
    if (count < 2) {
      GTEST_SKIP() << "needs two CUDA devices, found " << count << " (run on nvidia-h200-x2)";
    }
    bytes_ = MakeBundle();
    ASSERT_EQ(S(tl_bundle_open_memory(rt_, bytes_.data(), bytes_.size(), nullptr, nullptr, &bundle_)), "");
    ASSERT_EQ(S(tl_bundle_find_kernel(bundle_, "axpy", &kernel_)), "");
  }
  void TearDown() override {
    tl_kernel_release(kernel_);
    tl_bundle_release(bundle_);
    tl_runtime_release(rt_);
  }
  tl_runtime_t* rt_ = nullptr;
  std::vector<uint8_t> bytes_;
  tl_bundle_t* bundle_ = nullptr;
  tl_kernel_t* kernel_ = nullptr;
};

// y = a*x + y on device `d` with `n` random elements; "" or what went wrong.
std::string AxpyOn(tl_device_t* dev, tl_kernel_t* kernel, int n, unsigned seed) {
  tl_prepared_t* p = nullptr;
  std::string e = S(tl_kernel_prepare(kernel, dev, 0, &p));
  if (!e.empty()) return "prepare: " + e;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n), y(n), out(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : y) v = dist(rng);
  const float a = dist(rng) * 3.0f;
  tl_buffer_t *bx = nullptr, *by = nullptr;
  tl_stream_t* stream = nullptr;
  const int64_t shape[1] = {n};
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  e = S(tl_buffer_allocate(dev, n * 4, &bx));
  if (e.empty()) e = S(tl_buffer_allocate(dev, n * 4, &by));
  if (e.empty()) e = S(tl_stream_create(dev, 0, &stream));
  if (e.empty()) e = S(tl_buffer_copy_from_host(bx, 0, x.data(), n * 4, stream));
  if (e.empty()) e = S(tl_buffer_copy_from_host(by, 0, y.data(), n * 4, stream));
  for (int rep = 0; rep < 20 && e.empty(); ++rep) {  // y += a*x twenty times, queued
    tl_arg_t args[4] = {tl_arg_f32(a), tl_arg_tensor(tl_buffer_device_pointer(bx), f32, 1, shape, nullptr),
                        tl_arg_tensor(tl_buffer_device_pointer(by), f32, 1, shape, nullptr), tl_arg_i32(n)};
    e = S(tl_launch(p, stream, 4, args, nullptr));
  }
  if (e.empty()) e = S(tl_buffer_copy_to_host(by, 0, out.data(), n * 4, stream));
  if (e.empty()) e = S(tl_stream_synchronize(stream, 60'000'000'000ull));
  for (int i = 0; i < n && e.empty(); ++i) {
    double ref = y[i];
    for (int rep = 0; rep < 20; ++rep) ref = static_cast<float>(static_cast<float>(a * x[i]) + static_cast<float>(ref));
    if (!(std::fabs(out[i] - ref) <= 1e-5 * (1.0 + std::fabs(ref)))) {
      e = "y[" + std::to_string(i) + "] = " + std::to_string(out[i]) + ", expected " + std::to_string(ref);
    }
  }
  tl_stream_release(stream);
  tl_buffer_release(bx);
  tl_buffer_release(by);
  tl_prepared_release(p);
  return e;
}

TEST_F(CudaMultiDevice, EachDeviceAloneThenAllAtOnce) {
  const size_t count = tl_runtime_device_count(rt_);
  std::vector<tl_device_t*> devs(count);
  for (size_t d = 0; d < count; ++d) ASSERT_EQ(S(tl_runtime_device_at(rt_, d, &devs[d])), "");
  for (size_t d = 0; d < count; ++d) {
    EXPECT_EQ(AxpyOn(devs[d], kernel_, (1 << 22) + 5, 17 + unsigned(d)), "") << "device " << d << " alone";
  }
  std::vector<std::string> results(count);
  std::vector<std::thread> threads;
  for (size_t d = 0; d < count; ++d) {
    threads.emplace_back([&, d] { results[d] = AxpyOn(devs[d], kernel_, (1 << 22) + 5, 100 + unsigned(d)); });
  }
  for (auto& t : threads) t.join();
  for (size_t d = 0; d < count; ++d) EXPECT_EQ(results[d], "") << "device " << d << " concurrently";
  for (auto* d : devs) tl_device_release(d);
}

TEST_F(CudaMultiDevice, BufferOfDevice0IsRejectedOnDevice1) {
  tl_device_t *d0 = nullptr, *d1 = nullptr;
  ASSERT_EQ(S(tl_runtime_device_at(rt_, 0, &d0)), "");
  ASSERT_EQ(S(tl_runtime_device_at(rt_, 1, &d1)), "");
  tl_prepared_t* p1 = nullptr;
  ASSERT_EQ(S(tl_kernel_prepare(kernel_, d1, 0, &p1)), "");
  tl_buffer_t *x0 = nullptr, *y1 = nullptr;
  ASSERT_EQ(S(tl_buffer_allocate(d0, 4096, &x0)), "");
  ASSERT_EQ(S(tl_buffer_allocate(d1, 4096, &y1)), "");
  const int64_t n = 1024;
  const tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[4] = {tl_arg_f32(2.0f), tl_arg_tensor(tl_buffer_device_pointer(x0), f32, 1, &n, nullptr),
                      tl_arg_tensor(tl_buffer_device_pointer(y1), f32, 1, &n, nullptr), tl_arg_i32(1024)};
  std::string e = S(tl_launch(p1, nullptr, 4, args, nullptr));
  EXPECT_EQ(e.rfind("INVALID_ARGUMENT: ", 0), 0u) << e;
  EXPECT_NE(e.find("argument 1 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("is memory of CUDA device 0, but the launch is on CUDA device 1"), std::string::npos) << e;
  tl_buffer_release(x0);
  tl_buffer_release(y1);
  tl_prepared_release(p1);
  tl_device_release(d0);
  tl_device_release(d1);
}

}  // namespace
