// Bundle assembly (compiler/driver): signature, variants, determinism, cache, errors.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/formats/reader.h"

namespace tl::driver {
namespace {
namespace fs = std::filesystem;

const char* kTir = R"(tileir 1
func @scale(X: tensor[M, 64] f32, Y: tensor[M, 64] bf16, a: f32) dynamic(M: i32) loc("scale.py", 4) {
  kernel grid(2, ceildiv(M, 16)) threads(64, 2) -> (bx, by) loc("scale.py", 5) {
    alloc x: fragment[16, 32] f32
    copy X[by * 16:16, bx * 32:32] -> x
    parallel (i, j) in (16, 32) {
      x[i, j] = x[i, j] * a
    }
    copy x -> Y[by * 16:16, bx * 32:32]
  }
}
)";

std::vector<ir::Function> Functions(const std::string& text) {
  StatusOr<ir::Module> m = ir::ParseModule(text, "t.tir");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m->functions : std::vector<ir::Function>{};
}

// A temporary directory removed when the test ends.
class TempDirHolder {
 public:
  TempDirHolder() {
    char tmpl[] = "/tmp/tl-bundle-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    EXPECT_NE(d, nullptr);
    path_ = d != nullptr ? d : "/tmp";
  }
  ~TempDirHolder() {
    std::error_code ec;
    if (path_ != "/tmp") fs::remove_all(path_, ec);
  }
  operator std::string() const { return path_; }  // NOLINT: implicit by design

 private:
  std::string path_;
};

TEST(CpuBundle, SignatureVariantsAndLaunch) {
  CpuBuildOptions o;
  const TempDirHolder cache_dir;
  o.compiler.cache_dir = cache_dir;
  StatusOr<std::vector<uint8_t>> bytes = BuildCpuBundle(Functions(kTir), o);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<formats::BundleView> view = formats::BundleView::Open(*bytes);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->VerifyAllPayloads().ok());
  const tl::bundle::Kernel* k = view->FindKernel("scale");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->source_location()->str(), "scale.py:4");
  ASSERT_EQ(k->symbols()->size(), 1u);
  EXPECT_EQ(k->symbols()->Get(0)->str(), "M");
  ASSERT_EQ(k->params()->size(), 3u);
  const tl::bundle::Param* x = k->params()->Get(0);
  EXPECT_EQ(x->kind(), tl::bundle::ParamKind::BUFFER);
  EXPECT_EQ(x->access(), tl::bundle::Access::READ);
  EXPECT_EQ(x->rank(), 2);
  EXPECT_EQ(x->shape()->Get(0)->symbol(), 0);
  EXPECT_EQ(x->shape()->Get(1)->static_size(), 64);
  EXPECT_EQ(x->dtype()->code(), 2);
  EXPECT_EQ(x->dtype()->bits(), 32);
  const tl::bundle::Param* y = k->params()->Get(1);
  EXPECT_EQ(y->access(), tl::bundle::Access::WRITE);
  EXPECT_EQ(y->dtype()->code(), 4);  // bfloat
  EXPECT_EQ(y->dtype()->bits(), 16);
  EXPECT_EQ(k->params()->Get(2)->kind(), tl::bundle::ParamKind::SCALAR);
  EXPECT_EQ(k->params()->Get(2)->rank(), 0);

  ASSERT_EQ(k->variants()->size(), 3u);
  const char* ids[] = {"cpu.x86-64-v2", "cpu.x86-64-v3", "cpu.x86-64-v4"};
  for (uint32_t i = 0; i < 3; ++i) {
    const tl::bundle::Variant* v = k->variants()->Get(i);
    EXPECT_EQ(v->id()->str(), ids[i]);
    EXPECT_EQ(v->backend(), tl::bundle::Backend::CPU);
    EXPECT_EQ(v->code_kind(), tl::bundle::CodeKind::ELF);
    EXPECT_EQ(v->entry_point()->str(), "scale");
    EXPECT_EQ(v->requires_()->arch()->str(), std::string(ids[i]).substr(4));
    EXPECT_EQ(v->launch()->block()->size(), 3u);
    EXPECT_EQ(v->launch()->block()->Get(0), 64u);
    EXPECT_EQ(v->launch()->block()->Get(1), 2u);
    EXPECT_EQ(v->launch()->cpu_scratch_bytes(), 16u * 32u * 4u);
    ASSERT_EQ(v->launch()->grid()->size(), 3u);
    const auto* g1 = v->launch()->grid()->Get(1)->code();
    EXPECT_EQ(std::vector<int64_t>(g1->begin(), g1->end()), (std::vector<int64_t>{1, 0, 0, 16, 6}));
    const auto* g2 = v->launch()->grid()->Get(2)->code();
    EXPECT_EQ(std::vector<int64_t>(g2->begin(), g2->end()), (std::vector<int64_t>{0, 1}));
    std::vector<std::string> features;
    for (const auto* f : *v->requires_()->features()) features.push_back(f->str());
    const bool has_avx2 = std::find(features.begin(), features.end(), "cpu.x86.avx2") != features.end();
    const bool has_512 = std::find(features.begin(), features.end(), "cpu.x86.avx512f") != features.end();
    EXPECT_EQ(has_avx2, i >= 1);
    EXPECT_EQ(has_512, i == 2);
    // The payload is an ELF shared object.
    StatusOr<std::vector<uint8_t>> so = view->ReadPayload(v->payload());
    ASSERT_TRUE(so.ok());
    ASSERT_GE(so->size(), 4u);
    EXPECT_EQ(std::string(so->begin(), so->begin() + 4), "\x7f" "ELF");
  }
}

TEST(CpuBundle, ReproducibleAndCached) {
  const TempDirHolder cache_holder;
  const std::string cache = cache_holder;
  std::vector<std::string> log;
  CpuBuildOptions o;
  o.compiler.cache_dir = cache;
  o.targets = {toolchain::IsaLevel::kV2, toolchain::IsaLevel::kV3};
  o.log = [&](const std::string& line) { log.push_back(line); };
  StatusOr<std::vector<uint8_t>> first = BuildCpuBundle(Functions(kTir), o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[0].find("compiled in"), std::string::npos) << log[0];
  log.clear();
  StatusOr<std::vector<uint8_t>> second = BuildCpuBundle(Functions(kTir), o);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  ASSERT_EQ(log.size(), 2u);
  for (const std::string& l : log) EXPECT_NE(l.find("cached"), std::string::npos) << l;  // no compile work
  // Without a cache the compiler runs again and still produces the same bytes.
  CpuBuildOptions fresh = o;
  fresh.compiler.cache_dir.clear();
  ::unsetenv("TL_CACHE_DIR");
  log.clear();
  StatusOr<std::vector<uint8_t>> third = BuildCpuBundle(Functions(kTir), fresh);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*first, *third);
  for (const std::string& l : log) EXPECT_NE(l.find("compiled in"), std::string::npos) << l;
}

TEST(CpuBundle, BadTargetName) {
  StatusOr<std::vector<toolchain::IsaLevel>> t = toolchain::ParseCpuTargets("x86-64-v3,x86-64-v9");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("x86-64-v9"), std::string::npos);
  StatusOr<std::vector<toolchain::IsaLevel>> all = toolchain::ParseCpuTargets("cpu");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
}

TEST(CpuBundle, CompilerFailureNamesKernelTargetAndLine) {
  const TempDirHolder dir_holder;
  const std::string dir = dir_holder;
  const std::string cc = dir + "/fakecc";
  {
    std::ofstream f(cc);
    f << "#!/bin/sh\n"
         "case \"$1\" in --version) echo 'fakecc 1.0'; exit 0;; -dumpmachine) echo x86_64-linux-gnu; exit 0;; esac\n"
         "echo 'kernel.cc:1:1: error: simulated failure' >&2\nexit 1\n";
  }
  ASSERT_EQ(chmod(cc.c_str(), 0755), 0);
  CpuBuildOptions o;
  o.compiler.cxx = cc;
  o.targets = {toolchain::IsaLevel::kV3};
  StatusOr<std::vector<uint8_t>> b = BuildCpuBundle(Functions(kTir), o);
  ASSERT_FALSE(b.ok());
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("kernel 'scale'"), std::string::npos) << m;
  EXPECT_NE(m.find("x86-64-v3"), std::string::npos) << m;
  EXPECT_NE(m.find("scale.py:5"), std::string::npos) << m;
  EXPECT_NE(m.find("simulated failure"), std::string::npos) << m;
}

TEST(CpuBundle, LoweringErrorNamesSourceLine) {
  const std::string tir = R"(tileir 1
func @bad(A: tensor[64, 64] f32) loc("bad.py", 2) {
  kernel grid(1) threads(1) -> (bx) {
    alloc a: shared[64, 32] f32
    alloc b: shared[16, 64] f32
    alloc c: fragment[64, 64] f32
    gemm a, b -> c loc("bad.py", 9)
  }
}
)";
  StatusOr<ir::Module> m = ir::ParseModule(tir, "bad.tir");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  StatusOr<std::vector<uint8_t>> b = BuildCpuBundle(m->functions, CpuBuildOptions{});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("bad.py:9"), std::string::npos) << b.status().message();
}

TEST(CpuBundle, EmittedSourceExportsOnlyTheQuery) {
  const TempDirHolder dir_holder;
  const std::string dir = dir_holder;
  CpuBuildOptions o;
  o.targets = {toolchain::IsaLevel::kV2};
  o.emit_source_dir = dir;
  o.compiler.cache_dir = dir + "/cache";
  StatusOr<std::vector<uint8_t>> b = BuildCpuBundle(Functions(kTir), o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(fs::exists(dir + "/scale.cc"));
  StatusOr<formats::BundleView> view = formats::BundleView::Open(*b);
  ASSERT_TRUE(view.ok());
  StatusOr<std::vector<uint8_t>> so = view->ReadPayload(view->FindKernel("scale")->variants()->Get(0)->payload());
  ASSERT_TRUE(so.ok());
  {
    std::ofstream f(dir + "/k.so", std::ios::binary);
    f.write(reinterpret_cast<const char*>(so->data()), static_cast<std::streamsize>(so->size()));
  }
  const toolchain::ProcessResult syms = toolchain::RunProcess({"nm", "-D", "--defined-only", dir + "/k.so"});
  ASSERT_EQ(syms.exit_code, 0) << syms.err;
  EXPECT_NE(syms.out.find("tl_cpu_library_query"), std::string::npos);
  EXPECT_EQ(syms.out.find('\n'), syms.out.size() - 1) << "more than one exported symbol:\n" << syms.out;
  const toolchain::ProcessResult dyn = toolchain::RunProcess({"readelf", "-d", "-S", "-W", dir + "/k.so"});
  ASSERT_EQ(dyn.exit_code, 0) << dyn.err;
  EXPECT_EQ(dyn.out.find("libstdc++"), std::string::npos) << dyn.out;
  EXPECT_EQ(dyn.out.find("libgcc_s"), std::string::npos) << dyn.out;
  EXPECT_EQ(dyn.out.find(".init_array"), std::string::npos) << "static constructors:\n" << dyn.out;
  EXPECT_EQ(dyn.out.find("GNU_UNIQUE"), std::string::npos);
}

}  // namespace
}  // namespace tl::driver
