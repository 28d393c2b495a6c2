#include "test_bundles.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tilelang/formats/writer.h"

namespace tl::rt::testing {

std::vector<uint8_t> ReadBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fprintf(stderr, "test setup: cannot read %s\n", path.c_str());
    abort();
  }
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<uint8_t> KernelLibrary(const std::string& name) {
  return ReadBinary(std::string(TL_TEST_KERNEL_DIR) + "/test_kernels_" + name + ".so");
}

std::unique_ptr<tl::bundle::ParamT> BufferParam(const std::string& name, std::vector<DimSpec> dims,
                                                tl::bundle::Access access, uint32_t ptr_alignment, uint8_t code,
                                                uint8_t bits) {
  auto p = std::make_unique<tl::bundle::ParamT>();
  p->name = name;
  p->kind = tl::bundle::ParamKind::BUFFER;
  p->dtype = std::make_unique<tl::bundle::DType>(code, bits, 1);
  p->access = access;
  p->rank = static_cast<int8_t>(dims.size());
  for (const auto& d : dims) {
    auto dim = std::make_unique<tl::bundle::DimT>();
    dim->static_size = d.static_size;
    dim->symbol = static_cast<int16_t>(d.symbol);
    dim->divisible_by = d.divisible_by;
    p->shape.push_back(std::move(dim));
  }
  p->ptr_alignment = ptr_alignment;
  return p;
}

std::unique_ptr<tl::bundle::ParamT> ScalarParam(const std::string& name, uint8_t code, uint8_t bits, int binds_symbol) {
  auto p = std::make_unique<tl::bundle::ParamT>();
  p->name = name;
  p->kind = tl::bundle::ParamKind::SCALAR;
  p->dtype = std::make_unique<tl::bundle::DType>(code, bits, 1);
  p->rank = 0;
  p->binds_symbol = static_cast<int16_t>(binds_symbol);
  return p;
}

std::unique_ptr<tl::bundle::GridExprT> Grid(std::vector<int64_t> code) {
  auto g = std::make_unique<tl::bundle::GridExprT>();
  g->code = std::move(code);
  return g;
}

namespace {
std::unique_ptr<tl::bundle::LaunchT> MakeLaunch(std::vector<std::vector<int64_t>> grid, uint64_t scratch) {
  auto l = std::make_unique<tl::bundle::LaunchT>();
  l->block = {1, 1, 1};
  for (auto& g : grid) l->grid.push_back(Grid(std::move(g)));
  l->cpu_scratch_bytes = scratch;
  return l;
}
}  // namespace

std::unique_ptr<tl::bundle::VariantT> CpuVariant(int level, uint32_t payload, const std::string& entry,
                                                 std::vector<std::vector<int64_t>> grid, uint64_t scratch,
                                                 const std::string& suffix) {
  auto v = std::make_unique<tl::bundle::VariantT>();
  v->id = "cpu.x86-64-v" + std::to_string(level) + suffix;
  v->backend = tl::bundle::Backend::CPU;
  v->code_kind = tl::bundle::CodeKind::ELF;
  v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
  v->requires_->arch = "x86-64-v" + std::to_string(level);
  v->entry_point = entry;
  v->payload = payload;
  v->launch = MakeLaunch(std::move(grid), scratch);
  return v;
}

std::unique_ptr<tl::bundle::VariantT> GpuVariant(const std::string& id, tl::bundle::Backend backend,
                                                 tl::bundle::CodeKind kind, const std::string& arch, uint32_t payload,
                                                 const std::string& entry) {
  auto v = std::make_unique<tl::bundle::VariantT>();
  v->id = id;
  v->backend = backend;
  v->code_kind = kind;
  v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
  v->requires_->arch = arch;
  v->entry_point = entry;
  v->payload = payload;
  v->launch = MakeLaunch({{0, 1}, {0, 1}, {0, 1}}, 0);
  v->launch->block = {128, 1, 1};
  return v;
}

std::vector<uint8_t> StandardBundle(const StandardBundleOptions& options) {
  using tl::bundle::Access;
  tl::formats::BundleWriter writer;
  uint32_t lib[5] = {0, 0, 0, 0, 0};
  for (int level : options.levels) lib[level] = writer.AddPayload(KernelLibrary("v" + std::to_string(level)));
  uint32_t cubin = 0, ptx = 0, spirv = 0;
  if (options.gpu_variants) {
    cubin = writer.AddPayload(std::vector<uint8_t>(256, 0xCB));  // never reaches a driver in tests
    std::string ptx_text = ".version 8.0\n.target sm_80\n// fake\n";
    ptx = writer.AddPayload(std::vector<uint8_t>(ptx_text.begin(), ptx_text.end()));
    spirv = writer.AddPayload(std::vector<uint8_t>{0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0});
  }
  auto add_gpu = [&](tl::bundle::KernelT* k, const std::string& entry) {
    if (!options.gpu_variants) return;
    k->variants.push_back(GpuVariant("cuda.sm_90a", tl::bundle::Backend::CUDA, tl::bundle::CodeKind::CUBIN, "sm_90a", cubin, entry));
    k->variants.push_back(GpuVariant("cuda.compute_80", tl::bundle::Backend::CUDA, tl::bundle::CodeKind::PTX, "compute_80", ptx, entry));
    k->variants.back()->requires_->isa_version = 80;
    k->variants.push_back(GpuVariant("vk.spirv1.3", tl::bundle::Backend::VULKAN, tl::bundle::CodeKind::SPIRV, "spirv1.3", spirv, entry));
  };
  // Grid programs: CEILDIV(SYM s, CONST k) = {1, s, 0, k, 6}.
  {
    auto k = std::make_unique<tl::bundle::KernelT>();
    k->name = "vadd";
    k->symbols = {"N"};
    k->params.push_back(BufferParam("A", {{-1, 0, 1}}));
    k->params.push_back(BufferParam("B", {{-1, 0, 1}}));
    k->params.push_back(BufferParam("C", {{-1, 0, 1}}, Access::WRITE));
    for (int level : options.levels) k->variants.push_back(CpuVariant(level, lib[level], "vadd", {{1, 0, 0, 256, 6}, {0, 1}, {0, 1}}));
    if (options.guarded_vadd && !options.levels.empty()) {
      int level = options.levels.front();
      auto v = CpuVariant(level, lib[level], "vadd", {{1, 0, 0, 256, 6}, {0, 1}, {0, 1}}, 0, ".aligned64");
      v->priority = 10;
      auto g = std::make_unique<tl::bundle::GuardT>();
      g->param = 0;
      g->op = tl::bundle::GuardOp::PTR_ALIGNED;
      g->value = 64;
      v->guards.push_back(std::move(g));
      k->variants.push_back(std::move(v));
    }
    add_gpu(k.get(), "vadd");
    k->attrs.push_back(std::make_unique<tl::bundle::KeyValueT>());
    k->attrs.back()->key = "out_idx";
    k->attrs.back()->value = "2";
    if (!writer.AddKernel(std::move(k)).ok()) abort();
  }
  {
    auto k = std::make_unique<tl::bundle::KernelT>();
    k->name = "saxpy";
    k->symbols = {"N"};
    k->params.push_back(ScalarParam("a", 2, 32));
    k->params.push_back(BufferParam("X", {{-1, 0, 1}}));
    k->params.push_back(BufferParam("Y", {{-1, 0, 1}}, Access::READ_WRITE));
    k->params.push_back(ScalarParam("n", 0, 32, 0));
    for (int level : options.levels) k->variants.push_back(CpuVariant(level, lib[level], "saxpy", {{2, 3, 0, 1024, 6}, {0, 1}, {0, 1}}));
    add_gpu(k.get(), "saxpy");
    if (!writer.AddKernel(std::move(k)).ok()) abort();
  }
  {
    auto k = std::make_unique<tl::bundle::KernelT>();
    k->name = "gemm";
    k->symbols = {"M", "N", "K"};
    k->params.push_back(BufferParam("A", {{-1, 0, 1}, {-1, 2, 1}}));
    k->params.push_back(BufferParam("B", {{-1, 2, 1}, {-1, 1, 1}}));
    k->params.push_back(BufferParam("C", {{-1, 0, 1}, {-1, 1, 1}}, Access::WRITE));
    for (int level : options.levels) {
      k->variants.push_back(CpuVariant(level, lib[level], "gemm", {{1, 1, 0, 16, 6}, {1, 0, 0, 16, 6}, {0, 1}}, 1024));
    }
    add_gpu(k.get(), "gemm");
    if (!writer.AddKernel(std::move(k)).ok()) abort();
  }
  if (!options.levels.empty()) {  // CPU only: no kernel without variants
    auto k = std::make_unique<tl::bundle::KernelT>();
    k->name = "fail_at";
    k->symbols = {"N"};
    k->params.push_back(BufferParam("X", {{-1, 0, 1}}));
    for (int level : options.levels) k->variants.push_back(CpuVariant(level, lib[level], "fail_at", {{1, 0}, {0, 1}, {0, 1}}));
    if (!writer.AddKernel(std::move(k)).ok()) abort();
  }
  auto bytes = writer.Finish();
  if (!bytes.ok()) {
    fprintf(stderr, "test setup: %s\n", bytes.status().ToString().c_str());
    abort();
  }
  return bytes.value();
}

std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = std::string(TL_TEST_TMP_DIR) + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace tl::rt::testing
