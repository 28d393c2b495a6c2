// Unit tests of the selection rules and of device-description parsing; the
// cross-product over real device descriptions is in selection_golden_test.cc.
#include "selection.h"

#include <gtest/gtest.h>

#include "tilelang/runtime.h"

namespace tl::rt {
namespace {

TEST(Selection, ParseCudaArch) {
  CudaArch a = ParseCudaArch("sm_90a");
  EXPECT_TRUE(a.ok);
  EXPECT_FALSE(a.ptx);
  EXPECT_EQ(a.major, 9);
  EXPECT_EQ(a.minor, 0);
  EXPECT_EQ(a.suffix, 'a');
  a = ParseCudaArch("compute_100f");
  EXPECT_TRUE(a.ok && a.ptx && a.major == 10 && a.minor == 0 && a.suffix == 'f');
  a = ParseCudaArch("sm_89");
  EXPECT_TRUE(a.ok && a.major == 8 && a.minor == 9 && a.suffix == 0);
  for (const char* bad : {"sm_", "sm_9", "sm_90b", "sm_90aa", "gfx90a", "compute_", "sm_09", "sm_1000"}) {
    EXPECT_FALSE(ParseCudaArch(bad).ok) << bad;
  }
}

TEST(Selection, ParseAmdTarget) {
  AmdTarget t = ParseAmdTarget("gfx942:sramecc+:xnack-");
  EXPECT_TRUE(t.ok);
  EXPECT_EQ(t.processor, "gfx942");
  EXPECT_EQ(t.sramecc, 1);
  EXPECT_EQ(t.xnack, 0);
  t = ParseAmdTarget("gfx90a");
  EXPECT_TRUE(t.ok && t.xnack == -1 && t.sramecc == -1);
  for (const char* bad : {"gfx", "sm_90", "gfx90a:xnack", "gfx90a:xnack*", "gfx90a:foo+", "gfx90a:xnack+:xnack-", "gfx90a:"}) {
    EXPECT_FALSE(ParseAmdTarget(bad).ok) << bad;
  }
  EXPECT_TRUE(AmdGenericCovers("gfx11-generic", "gfx1100"));
  EXPECT_FALSE(AmdGenericCovers("gfx11-generic", "gfx90a"));
  EXPECT_FALSE(AmdGenericCovers("gfx90a", "gfx90a"));
}

DeviceDesc Cuda(int major, int minor, uint32_t driver) {
  DeviceDesc d;
  d.backend = kBackendCuda;
  d.name = "test gpu";
  d.cc_major = major;
  d.cc_minor = minor;
  d.driver_version = driver;
  d.limits.max_shared_bytes = 100000;
  d.limits.max_threads_per_block = 1024;
  d.Finalize();
  return d;
}

VariantDesc V(const std::string& id, int backend, int kind, const std::string& arch) {
  VariantDesc v;
  v.id = id;
  v.backend = backend;
  v.code_kind = kind;
  v.arch = arch;
  return v;
}

TEST(Selection, CodeKindMustMatchArchAndBackend) {
  DeviceDesc d = Cuda(9, 0, 13000);
  std::vector<VariantDesc> vs = {V("a", kBackendCuda, TL_CODE_CUBIN, "compute_90"),
                                 V("b", kBackendCuda, TL_CODE_PTX, "sm_90"),
                                 V("c", kBackendCuda, TL_CODE_SPIRV, "sm_90"),
                                 V("d", kBackendCuda, TL_CODE_CUBIN, "banana")};
  Selection s = SelectVariants(d, vs, {});
  ASSERT_TRUE(s.ranked.empty());
  ASSERT_EQ(s.rejected.size(), 4u);
  EXPECT_NE(s.rejected[0].reason.find("cubin with virtual arch 'compute_90'"), std::string::npos);
  EXPECT_NE(s.rejected[1].reason.find("PTX with real arch 'sm_90'"), std::string::npos);
  EXPECT_NE(s.rejected[2].reason.find("code kind SPIR-V does not belong to backend cuda"), std::string::npos);
  EXPECT_NE(s.rejected[3].reason.find("arch 'banana' is not a CUDA target"), std::string::npos);
}

TEST(Selection, PriorityThenManifestOrderBreakTies) {
  DeviceDesc d = Cuda(9, 0, 13000);
  std::vector<VariantDesc> vs = {V("first", kBackendCuda, TL_CODE_CUBIN, "sm_90"),
                                 V("second", kBackendCuda, TL_CODE_CUBIN, "sm_90"),
                                 V("tuned", kBackendCuda, TL_CODE_CUBIN, "sm_90")};
  vs[2].priority = 3;
  Selection s = SelectVariants(d, vs, {});
  ASSERT_EQ(s.ranked.size(), 3u);
  EXPECT_EQ(vs[s.ranked[0].index].id, "tuned");
  EXPECT_EQ(vs[s.ranked[1].index].id, "first");
  EXPECT_EQ(vs[s.ranked[2].index].id, "second");
}

TEST(Selection, UnknownFeatureTokenRejectsTheVariantOnly) {
  DeviceDesc d = Cuda(9, 0, 13000);
  std::vector<VariantDesc> vs = {V("needs_tma", kBackendCuda, TL_CODE_CUBIN, "sm_90"),
                                 V("plain", kBackendCuda, TL_CODE_CUBIN, "sm_90")};
  vs[0].features = {"cuda.future_thing"};
  Selection s = SelectVariants(d, vs, {});
  ASSERT_EQ(s.ranked.size(), 1u);
  EXPECT_EQ(vs[s.ranked[0].index].id, "plain");
  EXPECT_NE(s.rejected[0].reason.find("needs feature cuda.future_thing"), std::string::npos);
}

TEST(Selection, ExplainAndFailureNameEveryVariant) {
  DeviceDesc d = Cuda(8, 0, 12040);
  std::vector<VariantDesc> vs = {V("cuda.sm_90", kBackendCuda, TL_CODE_CUBIN, "sm_90"),
                                 V("cpu.v3", kBackendCpu, TL_CODE_ELF, "x86-64-v3"),
                                 V("cuda.compute_80", kBackendCuda, TL_CODE_PTX, "compute_80")};
  Selection s = SelectVariants(d, vs, {});
  std::string explain = ExplainSelection("gemm", d, vs, s);
  EXPECT_NE(explain.find("kernel 'gemm' on cuda device 'test gpu' (sm_80, driver 12040, PTX ISA <= 8.4)"), std::string::npos) << explain;
  EXPECT_NE(explain.find("chosen: cuda.compute_80 [JIT: the driver compiles PTX at load]"), std::string::npos) << explain;
  EXPECT_NE(explain.find("cuda.sm_90: cubin sm_90 runs on compute capability 9.x"), std::string::npos) << explain;
  EXPECT_NE(explain.find("cpu.v3: backend cpu, device is cuda"), std::string::npos) << explain;

  SelectionPolicy no_jit;
  no_jit.disable_jit = true;
  Selection f = SelectVariants(d, vs, no_jit);
  Status st = SelectionFailure("gemm", d, vs, f);
  EXPECT_EQ(st.code(), StatusCode::kIncompatible);
  EXPECT_NE(st.message().find("3 variant(s) rejected"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[cuda.compute_80: PTX needs driver JIT, which is disabled"), std::string::npos) << st.message();
}

TEST(DeviceDesc, RejectsUnknownKeysAndBadValues) {
  struct Case {
    const char* text;
    const char* fragment;
  } cases[] = {
      {R"({"backend": "cuda", "cc": [9, 0], "colour": "green"})", "unknown device key 'colour'"},
      {R"({"backend": "tpu"})", "unknown backend \"tpu\""},
      {R"({"name": "x"})", "has no 'backend'"},
      {R"({"backend": "cuda", "cc": [9]})", "expected [major, minor]"},
      {R"({"backend": "hip", "processor": "gfx90a", "xnack": "maybe"})", "not on, off or none"},
      {R"({"backend": "cpu", "xcr0": "0xzz"})", "bad number"},
      {R"({"backend": "cuda", "cc": [9, 0], "arch": "sm_80"})", "derives \"sm_90\""},
      {R"({"backend": "cuda", "limits": {"max_warp": 1}})", "unknown limits key 'max_warp'"},
      {R"({"backend": "cuda", "driver_version": -1})", "non-negative integer"},
      {R"({"backend": "cuda", "driver_version": 99999999999})", "exceeds 32 bits"},
      {R"({"backend": "vulkan", "flags": ["shiny"]})", "unknown device flag"},
  };
  for (const auto& c : cases) {
    auto j = json::Parse(c.text);
    ASSERT_TRUE(j.ok()) << c.text;
    auto d = DeviceDescFromJson(*j);
    ASSERT_FALSE(d.ok()) << c.text;
    EXPECT_NE(d.status().message().find(c.fragment), std::string::npos) << c.text << " -> " << d.status().message();
  }
}

TEST(DeviceDesc, PtxIsaAndSpirvTables) {
  EXPECT_EQ(MaxPtxIsaForDriver(10000), 0u);
  EXPECT_EQ(MaxPtxIsaForDriver(12000), 80u);
  EXPECT_EQ(MaxPtxIsaForDriver(12040), 84u);
  EXPECT_EQ(MaxPtxIsaForDriver(13000), 90u);
  EXPECT_EQ(MaxPtxIsaForDriver(14000), 90u);  // newer than the table: newest known
  EXPECT_EQ(MaxSpirvVersion((1u << 22) | (0u << 12), {}), 10u);
  EXPECT_EQ(MaxSpirvVersion((1u << 22) | (1u << 12), {}), 13u);
  EXPECT_EQ(MaxSpirvVersion((1u << 22) | (1u << 12), {"vk.ext.VK_KHR_spirv_1_4"}), 14u);
  EXPECT_EQ(MaxSpirvVersion((1u << 22) | (2u << 12), {}), 15u);
  EXPECT_EQ(MaxSpirvVersion((1u << 22) | (3u << 12), {}), 16u);
}

}  // namespace
}  // namespace tl::rt
