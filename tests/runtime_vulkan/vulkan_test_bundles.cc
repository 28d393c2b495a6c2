// Bundles of the Vulkan runtime tests: see vulkan_test_bundles.h.
#include "vulkan_test_bundles.h"

#include <cstdio>
#include <cstdlib>

#include "tilelang/formats/writer.h"

namespace tl::rt::vktest {

namespace fb = tl::bundle;

namespace {

constexpr uint8_t kFloat = 2;  // TL_DTYPE_FLOAT (DLPack kDLFloat)

std::vector<uint8_t> Bytes(const unsigned char* data, size_t size) { return std::vector<uint8_t>(data, data + size); }

}  // namespace

//===--------------------------------------------------------------------===//
// Bundles
//===--------------------------------------------------------------------===//

std::unique_ptr<fb::ParamT> Buffer(const std::string& name, std::vector<int> symbols, fb::Access access,
                                   uint32_t ptr_alignment = 16) {
  auto p = std::make_unique<fb::ParamT>();
  p->name = name;
  p->kind = fb::ParamKind::BUFFER;
  p->dtype = std::make_unique<fb::DType>(kFloat, 32, 1);
  p->access = access;
  p->rank = static_cast<int8_t>(symbols.size());
  for (int s : symbols) {
    auto d = std::make_unique<fb::DimT>();
    d->static_size = -1;
    d->symbol = static_cast<int16_t>(s);
    d->divisible_by = 1;
    p->shape.push_back(std::move(d));
  }
  p->ptr_alignment = ptr_alignment;
  return p;
}

std::unique_ptr<fb::ParamT> Scalar(const std::string& name, uint8_t code, uint8_t bits) {
  auto p = std::make_unique<fb::ParamT>();
  p->name = name;
  p->kind = fb::ParamKind::SCALAR;
  p->dtype = std::make_unique<fb::DType>(code, bits, 1);
  p->rank = 0;
  p->binds_symbol = -1;
  return p;
}

std::unique_ptr<fb::VariantT> Variant(const VkSpec& s, uint32_t payload) {
  auto v = std::make_unique<fb::VariantT>();
  v->id = s.id;
  v->backend = fb::Backend::VULKAN;
  v->code_kind = fb::CodeKind::SPIRV;
  v->requires_ = std::make_unique<fb::RequirementsT>();
  v->requires_->arch = s.arch;
  v->requires_->isa_version = 0x00010300;
  v->requires_->min_driver = (1u << 22) | (1u << 12);  // VK_MAKE_API_VERSION(0, 1, 1, 0)
  v->requires_->features = s.features;
  v->requires_->shared_bytes = static_cast<uint32_t>(s.req_shared >= 0 ? s.req_shared : s.static_shared);
  v->requires_->threads_per_block =
      static_cast<uint32_t>(s.req_threads >= 0 ? s.req_threads : int64_t{s.block[0]} * s.block[1] * s.block[2]);
  v->requires_->subgroup_size = s.req_subgroup;
  v->requires_->push_constant_bytes = static_cast<uint32_t>(s.req_push >= 0 ? s.req_push : s.push_bytes);
  v->entry_point = s.entry;
  v->payload = payload;
  v->launch = std::make_unique<fb::LaunchT>();
  v->launch->block = s.block;
  for (const auto& g : s.grid) {
    auto e = std::make_unique<fb::GridExprT>();
    e->code = g;
    v->launch->grid.push_back(std::move(e));
  }
  v->launch->static_shared_bytes = s.static_shared;
  for (size_t k = 0; k < s.bindings.size(); ++k) {
    auto b = std::make_unique<fb::VkBindingT>();
    b->param = static_cast<uint16_t>(s.bindings[k]);
    b->set = 0;
    b->binding = static_cast<uint32_t>(k);
    b->descriptor_type = 7;  // VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    v->launch->vk_bindings.push_back(std::move(b));
  }
  for (const auto& [param, offset, size] : s.push) {
    auto r = std::make_unique<fb::VkPushRangeT>();
    r->param = static_cast<int16_t>(param);
    r->offset = offset;
    r->size = size;
    v->launch->vk_push.push_back(std::move(r));
  }
  v->launch->vk_push_bytes = s.push_bytes;
  return v;
}

// vadd(x[N], y[N], out[N], float alpha): out = x + alpha * y.
VkSpec VaddSpec() {
  VkSpec s;
  s.code = Bytes(tl_vk_vadd, tl_vk_vadd_size);
  s.entry = "vadd";
  s.grid = {{1, 0, 0, 64, 6}, {0, 1}, {0, 1}};  // CEILDIV(N, 64), 1, 1
  s.bindings = {0, 1, 2};
  s.push = {{3, 0, 4}, {-1, 4, 4}};
  s.push_bytes = 8;
  return s;
}

std::unique_ptr<fb::KernelT> VaddKernel(const VkSpec& spec, uint32_t payload, uint32_t ptr_alignment) {
  auto k = std::make_unique<fb::KernelT>();
  k->name = "vadd";
  k->symbols = {"N"};
  k->params.push_back(Buffer("x", {0}, fb::Access::READ, ptr_alignment));
  k->params.push_back(Buffer("y", {0}, fb::Access::READ, ptr_alignment));
  k->params.push_back(Buffer("out", {0}, fb::Access::WRITE, ptr_alignment));
  k->params.push_back(Scalar("alpha", kFloat, 32));
  k->variants.push_back(Variant(spec, payload));
  return k;
}

// rowsum(A[M, K], out[M]): row sums through 256 bytes of workgroup memory.
VkSpec RowsumSpec() {
  VkSpec s;
  s.code = Bytes(tl_vk_rowsum, tl_vk_rowsum_size);
  s.entry = "rowsum";
  s.grid = {{1, 0}, {0, 1}, {0, 1}};  // M, 1, 1
  s.bindings = {0, 1};
  s.push = {{-1, 0, 8}};
  s.push_bytes = 8;
  s.static_shared = 256;
  return s;
}

std::unique_ptr<fb::KernelT> RowsumKernel(const VkSpec& spec, uint32_t payload) {
  auto k = std::make_unique<fb::KernelT>();
  k->name = "rowsum";
  k->symbols = {"M", "K"};
  k->params.push_back(Buffer("A", {0, 1}, fb::Access::READ));
  k->params.push_back(Buffer("out", {0}, fb::Access::WRITE));
  k->variants.push_back(Variant(spec, payload));
  return k;
}

static std::vector<uint8_t> Finish(tl::formats::BundleWriter& w) {
  auto bytes = w.Finish();
  if (!bytes.ok()) {
    fprintf(stderr, "test setup: %s\n", bytes.status().ToString().c_str());
    abort();
  }
  return bytes.value();
}

std::vector<uint8_t> VaddBundle(const VkSpec& spec, uint32_t ptr_alignment) {
  tl::formats::BundleWriter w;
  const uint32_t p = w.AddPayload(spec.code);
  if (!w.AddKernel(VaddKernel(spec, p, ptr_alignment)).ok()) abort();
  return Finish(w);
}

std::vector<uint8_t> RowsumBundle(const VkSpec& spec) {
  tl::formats::BundleWriter w;
  const uint32_t p = w.AddPayload(spec.code);
  if (!w.AddKernel(RowsumKernel(spec, p)).ok()) abort();
  return Finish(w);
}

VkSpec AxpbSpec() {
  VkSpec s;
  s.code = Bytes(tl_vk_axpb_i64, tl_vk_axpb_i64_size);
  s.entry = "axpb_i64";
  s.block = {32, 1, 1};
  s.grid = {{1, 0, 0, 32, 6}, {0, 1}, {0, 1}};  // CEILDIV(N, 32), 1, 1
  s.bindings = {0, 1};
  s.push = {{2, 0, 4}, {3, 8, 8}, {-1, 16, 4}};
  s.push_bytes = 20;
  s.features = {"vk.feature.shaderInt64"};
  return s;
}

std::vector<uint8_t> AxpbBundle(const VkSpec& spec) {
  tl::formats::BundleWriter w;
  auto k = std::make_unique<fb::KernelT>();
  k->name = "axpb_i64";
  k->symbols = {"N"};
  k->params.push_back(Buffer("x", {0}, fb::Access::READ));
  k->params.push_back(Buffer("out", {0}, fb::Access::WRITE));
  k->params.push_back(Scalar("a", kFloat, 32));
  k->params.push_back(Scalar("b", 0 /* TL_DTYPE_INT */, 64));
  k->variants.push_back(Variant(spec, w.AddPayload(spec.code)));
  if (!w.AddKernel(std::move(k)).ok()) abort();
  return Finish(w);
}

std::vector<uint8_t> AddiBundle(uint8_t code, uint8_t bits) {
  VkSpec s;
  s.code = Bytes(tl_vk_addi, tl_vk_addi_size);
  s.entry = "addi";
  s.grid = {{1, 0, 0, 64, 6}, {0, 1}, {0, 1}};
  s.bindings = {0, 1};
  s.push = {{2, 0, 4}, {-1, 4, 4}};
  s.push_bytes = 8;
  tl::formats::BundleWriter w;
  auto k = std::make_unique<fb::KernelT>();
  k->name = "addi";
  k->symbols = {"N"};
  k->params.push_back(Buffer("x", {0}, fb::Access::READ));
  k->params.push_back(Buffer("out", {0}, fb::Access::WRITE));
  k->params.push_back(Scalar("s", code, bits));
  k->variants.push_back(Variant(s, w.AddPayload(s.code)));
  if (!w.AddKernel(std::move(k)).ok()) abort();
  return Finish(w);
}

std::vector<uint8_t> VulkanTestBundle() {
  tl::formats::BundleWriter w;
  VkSpec vadd = VaddSpec(), rowsum = RowsumSpec();
  if (!w.AddKernel(VaddKernel(vadd, w.AddPayload(vadd.code), 16)).ok()) abort();
  if (!w.AddKernel(RowsumKernel(rowsum, w.AddPayload(rowsum.code))).ok()) abort();
  return Finish(w);
}

}  // namespace tl::rt::vktest
