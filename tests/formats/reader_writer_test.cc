// Round trips through BundleWriter and BundleView, determinism, dedup, and
// the reader's behaviour on valid edge cases.
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "bundle_builder.h"
#include "tilelang/formats/checksum.h"
#include "tilelang/formats/reader.h"
#include "tilelang/formats/writer.h"

namespace tl::formats {
namespace {

using testing::BuildSample;
using testing::Sample;

std::string_view Str(const flatbuffers::String* s) { return std::string_view(s->c_str(), s->size()); }

TEST(BundleRoundTrip, MainSampleReadsBack) {
  const std::vector<uint8_t> bytes = BuildSample(Sample::kMain);
  StatusOr<BundleView> view = BundleView::Open(bytes);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const auto* m = view->manifest();
  EXPECT_EQ(view->header().format_major, kFormatMajor);
  EXPECT_EQ(view->header().format_minor, kFormatMinor);
  EXPECT_EQ(view->header().manifest_offset, kHeaderSize);
  EXPECT_EQ(view->header().payload_offset % kPayloadAlignment, 0u);
  EXPECT_EQ(view->header().payload_offset + view->header().payload_size, bytes.size());
  EXPECT_EQ(m->format_major(), kFormatMajor);
  ASSERT_EQ(m->must_understand()->size(), 1u);
  EXPECT_EQ(Str(m->must_understand()->Get(0)), "core.v1");
  ASSERT_EQ(m->bundle_id()->size(), 16u);
  EXPECT_FALSE(std::all_of(m->bundle_id()->begin(), m->bundle_id()->end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(Str(m->producer()->tool()), "tl_formats_testing");

  // Kernels sorted by name whatever the insertion order (softmax was first).
  ASSERT_EQ(m->kernels()->size(), 2u);
  EXPECT_EQ(Str(m->kernels()->Get(0)->name()), "gemm");
  EXPECT_EQ(Str(m->kernels()->Get(1)->name()), "softmax");
  EXPECT_EQ(view->FindKernel("gemm"), m->kernels()->Get(0));
  EXPECT_EQ(view->FindKernel("softmax"), m->kernels()->Get(1));
  EXPECT_EQ(view->FindKernel("gem"), nullptr);
  EXPECT_EQ(view->FindKernel("zzz"), nullptr);
  EXPECT_EQ(view->FindKernel(""), nullptr);

  const auto* gemm = view->FindKernel("gemm");
  ASSERT_EQ(gemm->params()->size(), 3u);
  EXPECT_EQ(Str(gemm->params()->Get(2)->name()), "C");
  EXPECT_EQ(gemm->params()->Get(2)->dtype()->bits(), 32);
  ASSERT_EQ(gemm->variants()->size(), 2u);
  const auto* cpu = gemm->variants()->Get(0);
  EXPECT_EQ(Str(cpu->id()), "cpu.x86-64-v3");
  EXPECT_EQ(cpu->backend(), tl::bundle::Backend::CPU);
  EXPECT_EQ(Str(cpu->requires_()->arch()), "x86-64-v3");

  StatusOr<std::vector<uint8_t>> raw = view->ReadPayload(cpu->payload());
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw.value(), testing::MainGemmCpuPayload());
  EXPECT_TRUE(view->VerifyAllPayloads().ok());

  // Five AddPayload calls, one duplicate: four payloads; softmax's sm_90 and
  // cpu variants share one.
  ASSERT_EQ(m->payloads()->size(), 4u);
  const auto* softmax = view->FindKernel("softmax");
  EXPECT_EQ(softmax->variants()->Get(1)->payload(), softmax->variants()->Get(2)->payload());
  for (uint32_t i = 0; i < m->payloads()->size(); ++i) {
    const auto* p = m->payloads()->Get(i);
    EXPECT_EQ(p->offset() % kPayloadAlignment, 0u);
    StatusOr<std::vector<uint8_t>> r = view->ReadPayload(i);
    ASSERT_TRUE(r.ok());
    const Sha256Digest h = Sha256::Hash(r.value());
    ASSERT_EQ(p->content_hash()->size(), 32u);
    EXPECT_TRUE(std::equal(h.begin(), h.end(), p->content_hash()->begin()));
  }
  // Compressible text is stored as zstd, random bytes stored raw.
  EXPECT_EQ(m->payloads()->Get(0)->compression(), tl::bundle::Compression::ZSTD);
  EXPECT_LT(m->payloads()->Get(0)->stored_size(), m->payloads()->Get(0)->raw_size());
  EXPECT_EQ(m->payloads()->Get(1)->compression(), tl::bundle::Compression::NONE);
}

TEST(BundleRoundTrip, ByteIdenticalForIdenticalInput) {
  EXPECT_EQ(BuildSample(Sample::kMain), BuildSample(Sample::kMain));
  EXPECT_EQ(BuildSample(Sample::kUncompressed), BuildSample(Sample::kUncompressed));
}

TEST(BundleRoundTrip, BundleIdFollowsContent) {
  const std::vector<uint8_t> other_bytes = BuildSample(Sample::kOther);
  const std::vector<uint8_t> main_bytes = BuildSample(Sample::kMain);
  const auto main_view = BundleView::Open(main_bytes);
  const auto other_view = BundleView::Open(other_bytes);
  ASSERT_TRUE(main_view.ok() && other_view.ok());
  const auto* id1 = main_view->manifest()->bundle_id();
  const auto* id2 = other_view->manifest()->bundle_id();
  EXPECT_FALSE(std::equal(id1->begin(), id1->end(), id2->begin()));
}

TEST(BundleRoundTrip, InsertionOrderDoesNotMatter) {
  auto make = [](bool reversed) {
    BundleWriter w;
    const uint32_t p = w.AddPayload(testing::TextBytes(500, "x"));
    auto kernel = [&](const std::string& name) {
      auto k = std::make_unique<tl::bundle::KernelT>();
      k->name = name;
      auto v = std::make_unique<tl::bundle::VariantT>();
      v->id = "cpu";
      v->backend = tl::bundle::Backend::CPU;
      v->code_kind = tl::bundle::CodeKind::ELF;
      v->requires_ = std::make_unique<tl::bundle::RequirementsT>();
      v->requires_->arch = "x86-64";
      v->entry_point = "f";
      v->payload = p;
      v->launch = std::make_unique<tl::bundle::LaunchT>();
      v->launch->block = {1, 1, 1};
      k->variants.push_back(std::move(v));
      return k;
    };
    const char* names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(w.AddKernel(kernel(names[reversed ? 2 - i : i])).ok());
    w.AddAttr(reversed ? "z" : "y", "1");
    w.AddAttr(reversed ? "y" : "z", "1");
    auto bytes = w.Finish();
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.value();
  };
  EXPECT_EQ(make(false), make(true));
}

TEST(BundleWriter, DeduplicatesIdenticalPayloads) {
  BundleWriter w;
  const uint32_t a = w.AddPayload({1, 2, 3});
  const uint32_t b = w.AddPayload({1, 2, 4});
  const uint32_t c = w.AddPayload({1, 2, 3});
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 1u);
  EXPECT_EQ(c, a);
}

TEST(BundleWriter, RejectsDuplicateKernel) {
  BundleWriter w;
  auto k = std::make_unique<tl::bundle::KernelT>();
  k->name = "gemm";
  ASSERT_TRUE(w.AddKernel(std::make_unique<tl::bundle::KernelT>(*k)).ok());
  Status s = w.AddKernel(std::move(k));
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("'gemm'"), std::string::npos) << s.message();
}

TEST(BundleWriter, RejectsPayloadIndexOutOfRange) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMinimal));
  BundleWriter w;
  auto k = std::make_unique<tl::bundle::KernelT>(*parts.manifest.kernels[0]);
  k->variants[0]->payload = 3;
  ASSERT_TRUE(w.AddKernel(std::move(k)).ok());
  StatusOr<std::vector<uint8_t>> out = w.Finish();
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("payload index 3 out of range (0 payloads added)"), std::string::npos)
      << out.status().message();
}

TEST(BundleWriter, SelfCheckRejectsWhatTheReaderWould) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMinimal));
  BundleWriter w;
  w.AddPayload({1});
  auto k = std::make_unique<tl::bundle::KernelT>(*parts.manifest.kernels[0]);
  k->variants.push_back(std::make_unique<tl::bundle::VariantT>(*k->variants[0]));
  k->variants[0]->payload = 0;
  k->variants[1]->payload = 0;
  ASSERT_TRUE(w.AddKernel(std::move(k)).ok());
  StatusOr<std::vector<uint8_t>> out = w.Finish();
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("would not load"), std::string::npos);
  EXPECT_NE(out.status().message().find("duplicate variant id"), std::string::npos) << out.status().message();
}

// ParamSlot.symbol (a shape symbol's value in a CUDA/HIP parameter buffer):
// the writer names the must_understand token, the reader checks the index.
TEST(BundleWriter, SymbolSlotsAddTheirToken) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMinimal));
  for (int bad = 0; bad < 4; ++bad) {
    BundleWriter w;
    w.AddPayload({1, 2, 3});
    auto k = std::make_unique<tl::bundle::KernelT>(*parts.manifest.kernels[0]);
    k->symbols = {"M"};
    k->variants[0]->payload = 0;
    auto& l = *k->variants[0]->launch;
    l.param_slots.clear();
    auto slot = std::make_unique<tl::bundle::ParamSlotT>();
    slot->param = bad == 2 ? 0 : -1;
    slot->symbol = bad == 1 ? 1 : 0;
    slot->size = bad == 3 ? 2 : 4;
    slot->align = bad == 3 ? 2 : 4;
    l.param_slots.push_back(std::move(slot));
    l.param_buffer_bytes = 4;
    ASSERT_TRUE(w.AddKernel(std::move(k)).ok());
    StatusOr<std::vector<uint8_t>> out = w.Finish();
    if (bad == 0) {
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      StatusOr<BundleView> view = BundleView::Open(*out);
      ASSERT_TRUE(view.ok()) << view.status().ToString();
      const auto* mu = view->manifest()->must_understand();
      ASSERT_EQ(mu->size(), 2u);
      EXPECT_EQ(Str(mu->Get(1)), "launch.symbol_slots");
      EXPECT_EQ(view->manifest()->kernels()->Get(0)->variants()->Get(0)->launch()->param_slots()->Get(0)->symbol(), 0);
      continue;
    }
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    const char* want[] = {"", "symbol index 1 out of range (kernel has 1 symbols)", "names both param 0 and symbol 0",
                          "symbol slot of 2 bytes, expected 4 or 8"};
    EXPECT_NE(out.status().message().find(want[bad]), std::string::npos) << out.status().message();
  }
  // Without symbol slots only core.v1 is named (older readers keep loading).
  const std::vector<uint8_t> main_sample = BuildSample(Sample::kMain);
  StatusOr<BundleView> plain = BundleView::Open(main_sample);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->manifest()->must_understand()->size(), 1u);
}

// ParamSlot.tensor_map + Launch.tensor_maps (CUDA TMA tensor maps the
// runtime encodes at launch): the writer names must_understand
// "launch.tensor_maps" (a reader without it refuses the bundle with
// INCOMPATIBLE naming the token, instead of zero-filling the slots), and the
// reader checks indices, slot size and alignment, box rank and extents.
TEST(BundleWriter, TensorMapSlotsAddTheirToken) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMinimal));
  const int rank = parts.manifest.kernels[0]->params[0]->rank;
  ASSERT_GE(rank, 1);
  for (int bad = 0; bad < 6; ++bad) {
    BundleWriter w;
    w.AddPayload({1, 2, 3});
    auto k = std::make_unique<tl::bundle::KernelT>(*parts.manifest.kernels[0]);
    k->variants[0]->payload = 0;
    auto& l = *k->variants[0]->launch;
    l.param_slots.clear();
    auto slot = std::make_unique<tl::bundle::ParamSlotT>();
    slot->param = bad == 2 ? 0 : -1;
    slot->tensor_map = bad == 1 ? 1 : 0;
    slot->offset = bad == 3 ? 40 : 64;
    slot->size = 128;
    slot->align = bad == 3 ? 8 : 64;
    l.param_slots.push_back(std::move(slot));
    l.param_buffer_bytes = 192;
    auto map = std::make_unique<tl::bundle::TensorMapT>();
    map->param = 0;
    map->box.assign(static_cast<size_t>(rank) + (bad == 5 ? 1 : 0), 8);
    if (bad == 4) map->box[0] = 300;
    l.tensor_maps.push_back(std::move(map));
    ASSERT_TRUE(w.AddKernel(std::move(k)).ok());
    StatusOr<std::vector<uint8_t>> out = w.Finish();
    if (bad == 0) {
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      StatusOr<BundleView> view = BundleView::Open(*out);
      ASSERT_TRUE(view.ok()) << view.status().ToString();
      const auto* mu = view->manifest()->must_understand();
      ASSERT_EQ(mu->size(), 2u);
      EXPECT_EQ(Str(mu->Get(1)), "launch.tensor_maps");
      const auto* launch = view->manifest()->kernels()->Get(0)->variants()->Get(0)->launch();
      EXPECT_EQ(launch->param_slots()->Get(0)->tensor_map(), 0);
      EXPECT_EQ(launch->tensor_maps()->Get(0)->box()->size(), static_cast<uint32_t>(rank));
      continue;
    }
    ASSERT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    const std::string want[] = {"", "tensor_map index 1 out of range (launch has 1 tensor maps)",
                                "names tensor_map 0 and param 0 / symbol -1 (only one)",
                                "tensor map slot at offset 40 of 128 bytes, expected 128 bytes at a multiple of 16",
                                "tensor_maps[0]: box dim 0 is 300 (1 to 256)",
                                "tensor_maps[0]: box has " + std::to_string(rank + 1) + " dims; parameter"};
    EXPECT_NE(out.status().message().find(want[bad]), std::string::npos) << out.status().message();
  }
}

TEST(BundleWriter, ReportsMissingRequiredTables) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMinimal));
  for (int which = 0; which < 3; ++which) {
    BundleWriter w;
    w.AddPayload({1});
    auto k = std::make_unique<tl::bundle::KernelT>(*parts.manifest.kernels[0]);
    k->variants[0]->payload = 0;
    const char* expected = nullptr;
    if (which == 0) {
      k->variants[0]->requires_.reset();
      expected = "kernel 'copy' variant 'cpu.x86-64-v1': requires is null (required)";
    } else if (which == 1) {
      k->variants[0]->launch.reset();
      expected = "kernel 'copy' variant 'cpu.x86-64-v1': launch is null (required)";
    } else {
      k->params.push_back(nullptr);
      expected = "kernel 'copy': null entry in params, variants or attrs";
    }
    ASSERT_TRUE(w.AddKernel(std::move(k)).ok());
    StatusOr<std::vector<uint8_t>> out = w.Finish();
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(expected), std::string::npos) << out.status().message();
  }
}

TEST(BundleWriter, EmptyBundleRoundTrips) {
  BundleWriter w;
  StatusOr<std::vector<uint8_t>> bytes = w.Finish();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  StatusOr<BundleView> view = BundleView::Open(bytes.value());
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->manifest()->kernels()->size(), 0u);
  EXPECT_EQ(view->header().payload_size, 0u);
  EXPECT_TRUE(view->VerifyAllPayloads().ok());
}

TEST(BundleWriter, UncompressedOptionStoresRaw) {
  const std::vector<uint8_t> bytes = BuildSample(Sample::kUncompressed);
  StatusOr<BundleView> view = BundleView::Open(bytes);
  ASSERT_TRUE(view.ok());
  for (const auto* p : *view->manifest()->payloads()) {
    EXPECT_EQ(p->compression(), tl::bundle::Compression::NONE);
    EXPECT_EQ(p->stored_size(), p->raw_size());
  }
  EXPECT_TRUE(view->VerifyAllPayloads().ok());
}

TEST(BundleReader, NewerMinorVersionLoads) {
  testing::Parts parts = testing::Split(BuildSample(Sample::kMain));
  parts.header.format_minor = 7;
  parts.manifest.format_minor = 7;
  const std::vector<uint8_t> bytes = testing::Join(parts);
  StatusOr<BundleView> view = BundleView::Open(bytes);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->header().format_minor, 7);
  EXPECT_TRUE(view->VerifyAllPayloads().ok());
}

// The hand-made bomb frame used by the negative corpus is a real zstd frame.
TEST(TestBuilder, ZeroRleFrameDecompresses) {
  const uint64_t n = 3 * 128 * 1024 + 5;
  const std::vector<uint8_t> frame = testing::ZeroRleFrame(n);
  EXPECT_EQ(ZSTD_getFrameContentSize(frame.data(), frame.size()), n);
  std::vector<uint8_t> out(n, 0xAA);
  EXPECT_EQ(ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size()), n);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0; }));
}

TEST(BundleReader, PayloadCapFromOptions) {
  const std::vector<uint8_t> bytes = BuildSample(Sample::kMain);
  ReadOptions options;
  options.max_payload_raw_bytes = 1000;
  StatusOr<BundleView> view = BundleView::Open(bytes, options);
  ASSERT_TRUE(view.ok());
  StatusOr<std::vector<uint8_t>> raw = view->ReadPayload(0);
  EXPECT_EQ(raw.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(raw.status().message().find("raw_size 3000 exceeds the limit of 1000 bytes"), std::string::npos)
      << raw.status().message();
}

TEST(BundleReader, PayloadIndexOutOfRange) {
  const std::vector<uint8_t> bytes = BuildSample(Sample::kMain);
  StatusOr<BundleView> view = BundleView::Open(bytes);
  ASSERT_TRUE(view.ok());
  StatusOr<std::vector<uint8_t>> raw = view->ReadPayload(4);
  EXPECT_EQ(raw.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(raw.status().message().find("payload index 4 out of range (bundle has 4 payloads)"), std::string::npos);
}

TEST(BundleReader, RejectsMisalignedBuffer) {
  const std::vector<uint8_t> bytes = BuildSample(Sample::kMinimal);
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  StatusOr<BundleView> view = BundleView::Open(std::span<const uint8_t>(shifted.data() + 1, bytes.size()));
  EXPECT_EQ(view.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(view.status().message().find("8-byte aligned address"), std::string::npos) << view.status().message();
}

TEST(BundleReader, DefaultViewIsNotOpen) {
  BundleView view;
  EXPECT_EQ(view.VerifyAllPayloads().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(view.FindKernel("gemm"), nullptr);
}

TEST(Header, EncodeDecodeRoundTrip) {
  HeaderFields f;
  f.format_major = 1;
  f.format_minor = 0x0203;
  f.header_size = 64;
  f.flags = 0x0102030405060708ull;
  f.manifest_offset = 64;
  f.manifest_size = 0x1122334455667788ull;
  f.payload_offset = 0x99AABBCCDDEEFF00ull;
  f.payload_size = 42;
  f.manifest_crc32c = 0xDEADBEEF;
  const auto h = EncodeHeader(f);
  EXPECT_EQ(std::memcmp(h.data(), kSignature, 8), 0);
  EXPECT_EQ(h[10], 0x03);  // little-endian
  EXPECT_EQ(h[11], 0x02);
  const HeaderFields g = DecodeHeaderFields(h);
  EXPECT_EQ(g.format_minor, f.format_minor);
  EXPECT_EQ(g.flags, f.flags);
  EXPECT_EQ(g.manifest_size, f.manifest_size);
  EXPECT_EQ(g.payload_offset, f.payload_offset);
  EXPECT_EQ(g.manifest_crc32c, f.manifest_crc32c);
  EXPECT_EQ(g.header_crc32c, Crc32c(std::span<const uint8_t>(h.data(), 60)));
}

TEST(Files, ReadFileNamesMissingPath) {
  StatusOr<std::vector<uint8_t>> bytes = ReadFile("/nonexistent/dir/x.tlb");
  EXPECT_EQ(bytes.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bytes.status().message().find("/nonexistent/dir/x.tlb"), std::string::npos);
}

TEST(Files, WriteFileNamesPathAndRoundTrips) {
  Status bad = WriteFile("/nonexistent/dir/x.tlb", {1, 2, 3});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/nonexistent/dir/x.tlb"), std::string::npos) << bad.message();
  const std::string path = std::string(TL_TEST_TMP_DIR) + "/roundtrip.bin";
  ASSERT_TRUE(WriteFile(path, {1, 2, 3}).ok());
  StatusOr<std::vector<uint8_t>> back = ReadFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(Status, FormatsCodeAndMessage) {
  Status s = MakeStatus(StatusCode::kDataLoss, "payload %u: %s", 3u, "bad");
  EXPECT_EQ(s.ToString(), "DATA_LOSS: payload 3: bad");
  EXPECT_EQ(s.Annotate("opening a.tlb").ToString(), "DATA_LOSS: opening a.tlb: payload 3: bad");
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  EXPECT_STREQ(StatusCodeName(StatusCode::kIncompatible), "INCOMPATIBLE");
}

}  // namespace
}  // namespace tl::formats
