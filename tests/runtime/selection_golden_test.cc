// Selection goldens: every device description in goldens/devices against
// the bundles of goldens/bundles, as listed in goldens/cases.json.
//
// Each golden bundle is turned into a real .tlb with the formats writer, read
// back with the reader and converted with KernelFromManifest, so the goldens
// also cover the manifest -> selection path the runtime uses.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "json.h"
#include "manifest.h"
#include "selection.h"
#include "tilelang/formats/reader.h"
#include "tilelang/formats/writer.h"

namespace tl::rt {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json::Value LoadJson(const std::string& path) {
  auto v = json::Parse(ReadText(path));
  EXPECT_TRUE(v.ok()) << path << ": " << v.status().ToString();
  return v.ok() ? v.value() : json::Value();
}

tl::bundle::CodeKind CodeKindFromName(const std::string& s) {
  if (s == "cubin") return tl::bundle::CodeKind::CUBIN;
  if (s == "ptx") return tl::bundle::CodeKind::PTX;
  if (s == "hsaco") return tl::bundle::CodeKind::HSACO;
  if (s == "spirv") return tl::bundle::CodeKind::SPIRV;
  if (s == "elf") return tl::bundle::CodeKind::ELF;
  ADD_FAILURE() << "unknown code kind " << s;
  return tl::bundle::CodeKind::UNKNOWN;
}

uint32_t U32(const json::Value& v, const char* key) {
  const json::Value* x = v.Find(key);
  return x ? static_cast<uint32_t>(x->as_int()) : 0u;
}

// Golden bundle JSON -> .tlb bytes (one kernel "k" with those variants).
std::vector<uint8_t> BuildGoldenBundle(const json::Value& spec) {
  tl::formats::BundleWriter writer;
  auto k = std::make_unique<tl::bundle::KernelT>();
  k->name = "k";
  auto p = std::make_unique<tl::bundle::ParamT>();
  p->name = "X";
  p->dtype = std::make_unique<tl::bundle::DType>(2, 32, 1);
  p->rank = 1;
  p->shape.push_back(std::make_unique<tl::bundle::DimT>());
  k->params.push_back(std::move(p));
  uint32_t index = 0;
  for (const json::Value& v : spec.Find("variants")->items()) {
    auto var = std::make_unique<tl::bundle::VariantT>();
    var->id = v.Find("id")->as_string();
    var->backend = static_cast<tl::bundle::Backend>(BackendFromName(v.Find("backend")->as_string()));
    var->code_kind = CodeKindFromName(v.Find("code_kind")->as_string());
    var->requires_ = std::make_unique<tl::bundle::RequirementsT>();
    var->requires_->arch = v.Find("arch")->as_string();
    var->requires_->isa_version = U32(v, "isa_version");
    var->requires_->min_driver = U32(v, "min_driver");
    var->requires_->shared_bytes = U32(v, "shared_bytes");
    var->requires_->threads_per_block = U32(v, "threads_per_block");
    var->requires_->subgroup_size = U32(v, "subgroup_size");
    var->requires_->push_constant_bytes = U32(v, "push_constant_bytes");
    if (const json::Value* f = v.Find("features")) {
      for (const auto& t : f->items()) var->requires_->features.push_back(t.as_string());
    }
    if (const json::Value* pr = v.Find("priority")) var->priority = static_cast<int32_t>(pr->as_int());
    var->entry_point = "k";
    var->payload = writer.AddPayload(std::vector<uint8_t>(16, static_cast<uint8_t>(index++)));
    var->launch = std::make_unique<tl::bundle::LaunchT>();
    var->launch->block = {1, 1, 1};
    k->variants.push_back(std::move(var));
  }
  EXPECT_TRUE(writer.AddKernel(std::move(k)).ok());
  auto bytes = writer.Finish();
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? bytes.value() : std::vector<uint8_t>();
}

std::string Describe(const std::vector<VariantDesc>& variants, const Selection& sel) {
  std::string s = "ranked:";
  for (const auto& r : sel.ranked) s += " " + variants[r.index].id;
  s += "\nrejected:";
  for (const auto& r : sel.rejected) s += "\n  " + variants[r.index].id + ": " + r.reason;
  return s;
}

TEST(SelectionGolden, AllCases) {
  const std::string dir = TL_TEST_GOLDEN_DIR;
  json::Value cases = LoadJson(dir + "/cases.json");
  ASSERT_TRUE(cases.Find("cases"));
  int count = 0;
  for (const json::Value& c : cases.Find("cases")->items()) {
    const std::string device_name = c.Find("device")->as_string();
    const std::string bundle_name = c.Find("bundle")->as_string();
    SCOPED_TRACE(device_name + " x " + bundle_name);
    auto device = DeviceDescFromJson(LoadJson(dir + "/devices/" + device_name + ".json"));
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    std::vector<uint8_t> bytes = BuildGoldenBundle(LoadJson(dir + "/bundles/" + bundle_name + ".json"));
    auto view = tl::formats::BundleView::Open(bytes);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    KernelInfo info;
    ASSERT_TRUE(KernelFromManifest(*view->FindKernel("k"), &info).ok());

    SelectionPolicy policy;
    if (const json::Value* p = c.Find("policy")) {
      if (const json::Value* j = p->Find("disable_jit")) policy.disable_jit = j->as_bool();
      if (const json::Value* f = p->Find("force")) {
        for (const auto& id : f->items()) policy.force_variants.push_back(id.as_string());
      }
    }
    Selection sel = SelectVariants(*device, info.variants, policy);
    // Determinism: the same inputs give the same answer.
    Selection again = SelectVariants(*device, info.variants, policy);
    ASSERT_EQ(Describe(info.variants, sel), Describe(info.variants, again));
    // Every variant is either ranked or rejected, exactly once.
    ASSERT_EQ(sel.ranked.size() + sel.rejected.size(), info.variants.size());
    const std::string trace = Describe(info.variants, sel);

    const json::Value& expect = *c.Find("expect");
    if (const json::Value* fails = expect.Find("fails"); fails && fails->as_bool()) {
      EXPECT_TRUE(sel.ranked.empty()) << trace;
      Status failure = SelectionFailure("k", *device, info.variants, sel);
      EXPECT_EQ(failure.code(), StatusCode::kIncompatible);
      for (const auto& v : info.variants) {
        EXPECT_NE(failure.message().find("[" + v.id + ": "), std::string::npos) << failure.message();
      }
    } else {
      ASSERT_FALSE(sel.ranked.empty()) << trace;
      EXPECT_EQ(info.variants[sel.ranked[0].index].id, expect.Find("variant")->as_string()) << trace;
      if (const json::Value* jit = expect.Find("jit")) {
        EXPECT_EQ(sel.ranked[0].jit, jit->as_bool()) << trace;
      }
      if (const json::Value* ranking = expect.Find("ranking")) {
        std::vector<std::string> want, got;
        for (const auto& r : ranking->items()) want.push_back(r.as_string());
        for (const auto& r : sel.ranked) got.push_back(info.variants[r.index].id);
        EXPECT_EQ(got, want) << trace;
      }
      std::string explain = ExplainSelection("k", *device, info.variants, sel);
      EXPECT_NE(explain.find("chosen: " + expect.Find("variant")->as_string()), std::string::npos) << explain;
    }
    if (const json::Value* rejected = expect.Find("rejected")) {
      for (const auto& [id, fragment] : rejected->members()) {
        bool found = false;
        for (const auto& r : sel.rejected) {
          if (info.variants[r.index].id != id) continue;
          found = true;
          EXPECT_NE(r.reason.find(fragment.as_string()), std::string::npos)
              << id << ": reason '" << r.reason << "' lacks '" << fragment.as_string() << "'";
        }
        EXPECT_TRUE(found) << id << " was not rejected\n" << trace;
      }
    }
    ++count;
  }
  EXPECT_GE(count, 20);
}

TEST(SelectionGolden, DeviceDescriptionsRoundTripThroughJson) {
  const std::string dir = TL_TEST_GOLDEN_DIR;
  for (const char* name : {"h200", "mi210_xnack_on", "lavapipe", "x86_avx512_os_disabled", "rdna3"}) {
    auto d = DeviceDescFromJson(LoadJson(dir + "/devices/" + name + ".json"));
    ASSERT_TRUE(d.ok()) << name;
    auto again = json::Parse(DeviceDescToJson(*d));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    auto d2 = DeviceDescFromJson(*again);
    ASSERT_TRUE(d2.ok()) << d2.status().ToString();
    EXPECT_EQ(DeviceDescToJson(*d2), DeviceDescToJson(*d)) << name;
  }
}

}  // namespace
}  // namespace tl::rt
