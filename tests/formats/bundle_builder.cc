#include "bundle_builder.h"

#include <sys/stat.h>
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "tilelang/formats/checksum.h"
#include "tilelang/formats/writer.h"

namespace tl::formats::testing {
namespace {

using namespace tl::bundle;  // NOLINT: test builder, many schema types

// Test-builder failures are bugs in the test itself: stop loudly.
void Check(const Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + s.ToString());
}

std::unique_ptr<DimT> MakeDim(int64_t static_size, int16_t symbol, uint32_t divisible_by = 1) {
  auto d = std::make_unique<DimT>();
  d->static_size = static_size;
  d->symbol = symbol;
  d->divisible_by = divisible_by;
  return d;
}

std::unique_ptr<ParamT> Buffer(const std::string& name, uint8_t code, uint8_t bits, Access access,
                               std::vector<int16_t> symbols, uint32_t align = 16) {
  auto p = std::make_unique<ParamT>();
  p->name = name;
  p->kind = ParamKind::BUFFER;
  p->dtype = std::make_unique<DType>(code, bits, 1);
  p->access = access;
  p->rank = static_cast<int8_t>(symbols.size());
  for (int16_t s : symbols) p->shape.push_back(MakeDim(-1, s, 16));
  p->ptr_alignment = align;
  return p;
}

std::unique_ptr<ParamT> Scalar(const std::string& name, int16_t binds_symbol) {
  auto p = std::make_unique<ParamT>();
  p->name = name;
  p->kind = ParamKind::SCALAR;
  p->dtype = std::make_unique<DType>(0, 32, 1);
  p->rank = 0;
  p->binds_symbol = binds_symbol;
  return p;
}

// grid = ceildiv(symbol, tile) on x, 1 on y and z.
std::vector<std::unique_ptr<GridExprT>> Grid(int64_t symbol, int64_t tile) {
  std::vector<std::unique_ptr<GridExprT>> grid;
  auto x = std::make_unique<GridExprT>();
  x->code = {1, symbol, 0, tile, 6};
  grid.push_back(std::move(x));
  for (int i = 0; i < 2; ++i) {
    auto one = std::make_unique<GridExprT>();
    one->code = {0, 1};
    grid.push_back(std::move(one));
  }
  return grid;
}

std::unique_ptr<VariantT> MakeVariant(const std::string& id, Backend backend, CodeKind kind, const std::string& arch,
                                      uint32_t payload, uint32_t threads, int64_t grid_symbol) {
  auto v = std::make_unique<VariantT>();
  v->id = id;
  v->backend = backend;
  v->code_kind = kind;
  v->requires_ = std::make_unique<RequirementsT>();
  v->requires_->arch = arch;
  v->requires_->threads_per_block = threads;
  if (backend == Backend::CPU) v->requires_->features = {"cpu.x86.avx2", "cpu.x86.fma"};
  v->entry_point = "tl_" + id;
  v->payload = payload;
  v->launch = std::make_unique<LaunchT>();
  v->launch->block = {threads, 1, 1};
  v->launch->grid = Grid(grid_symbol, 128);
  auto kv = std::make_unique<KeyValueT>();
  kv->key = "tile";
  kv->value = "128x128x32";
  v->build_attrs.push_back(std::move(kv));
  return v;
}

std::unique_ptr<KernelT> Gemm(uint32_t cpu_payload, uint32_t cuda_payload, bool conflicting) {
  auto k = std::make_unique<KernelT>();
  k->name = "gemm";
  k->symbols = {"M", "N", "K"};
  k->params.push_back(Buffer("A", 2, 16, Access::READ, {0, 2}));
  k->params.push_back(Buffer("B", 2, 16, Access::READ, {2, 1}));
  k->params.push_back(Buffer("C", 2, conflicting ? 16 : 32, Access::WRITE, {0, 1}));
  k->variants.push_back(MakeVariant("cpu.x86-64-v3", Backend::CPU, CodeKind::ELF, "x86-64-v3", cpu_payload, 1, 0));
  auto cuda = MakeVariant("cuda.sm_90a", Backend::CUDA, CodeKind::CUBIN, "sm_90a", cuda_payload, 128, 0);
  cuda->priority = 10;
  cuda->requires_->shared_bytes = 49152;
  cuda->launch->dynamic_shared_bytes = 49152;
  k->variants.push_back(std::move(cuda));
  k->source_location = "kernels/gemm.py:12";
  return k;
}

std::unique_ptr<KernelT> RowKernel(const std::string& name, uint32_t payload_a, uint32_t payload_b) {
  auto k = std::make_unique<KernelT>();
  k->name = name;
  k->symbols = {"rows", "cols"};
  k->params.push_back(Buffer("x", 2, 32, Access::READ, {0, 1}));
  k->params.push_back(Buffer("y", 2, 32, Access::WRITE, {0, 1}));
  k->params.push_back(Scalar("n", 1));
  k->variants.push_back(MakeVariant("cuda.sm_80", Backend::CUDA, CodeKind::CUBIN, "sm_80", payload_a, 256, 0));
  k->variants.push_back(MakeVariant("cuda.sm_90", Backend::CUDA, CodeKind::CUBIN, "sm_90", payload_b, 256, 0));
  k->variants.push_back(MakeVariant("cpu.x86-64-v2", Backend::CPU, CodeKind::ELF, "x86-64-v2", payload_b, 1, 0));
  k->source_location = "kernels/" + name + ".py:7";
  return k;
}

std::unique_ptr<ProducerT> Producer() {
  auto p = std::make_unique<ProducerT>();
  p->tool = "tl_formats_testing";
  p->tool_version = "1";
  return p;
}

std::vector<uint8_t> Finish(BundleWriter& w) {
  StatusOr<std::vector<uint8_t>> bytes = w.Finish();
  Check(bytes.status(), "BundleWriter::Finish");
  return std::move(bytes).value();
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x >> 32);
  }
  return out;
}

std::vector<uint8_t> TextBytes(size_t n, const std::string& motif) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(motif[i % motif.size()] + (i / 977) % 3);
  return out;
}

std::vector<uint8_t> ZeroRleFrame(uint64_t n) {
  // Frame header: magic, descriptor 0xE0 (8-byte content size, single
  // segment, no checksum, no dictionary), then the content size.
  std::vector<uint8_t> out = {0x28, 0xB5, 0x2F, 0xFD, 0xE0};
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  // RLE blocks of at most 128 KiB: 3-byte header (last flag, type 1, size) + the byte.
  uint64_t left = n;
  do {
    const uint64_t size = std::min<uint64_t>(left, 128 * 1024);
    left -= size;
    const uint32_t header = static_cast<uint32_t>(size << 3) | (1u << 1) | (left == 0 ? 1u : 0u);
    out.push_back(static_cast<uint8_t>(header));
    out.push_back(static_cast<uint8_t>(header >> 8));
    out.push_back(static_cast<uint8_t>(header >> 16));
    out.push_back(0);
  } while (left > 0);
  return out;
}

std::vector<uint8_t> MainGemmCpuPayload() { return TextBytes(3000, "\x7f" "ELF gemm block function v3 "); }

std::vector<uint8_t> BuildSample(Sample sample) {
  WriteOptions options;
  if (sample == Sample::kUncompressed) options.compress = false;
  BundleWriter w(options);
  w.SetProducer(Producer());
  switch (sample) {
    case Sample::kMain: {
      const uint32_t cpu = w.AddPayload(MainGemmCpuPayload());
      const uint32_t cubin = w.AddPayload(RandomBytes(1500, 1));  // incompressible: stored raw
      const uint32_t sm80 = w.AddPayload(TextBytes(2000, "softmax sm_80 cubin "));
      const uint32_t shared = w.AddPayload(TextBytes(2500, "softmax sm_90 cubin "));
      // Same bytes again: deduplicated to `shared`.
      const uint32_t again = w.AddPayload(TextBytes(2500, "softmax sm_90 cubin "));
      if (again != shared) throw std::runtime_error("payload dedup failed");
      Check(w.AddKernel(RowKernel("softmax", sm80, again)), "AddKernel softmax");
      Check(w.AddKernel(Gemm(cpu, cubin, false)), "AddKernel gemm");
      w.AddAttr("kernels.manifest", "kernels/manifest.json");
      break;
    }
    case Sample::kOther: {
      const uint32_t a = w.AddPayload(TextBytes(1800, "rmsnorm sm_80 "));
      const uint32_t b = w.AddPayload(TextBytes(1700, "rmsnorm sm_90 "));
      Check(w.AddKernel(RowKernel("rmsnorm", a, b)), "AddKernel rmsnorm");
      break;
    }
    case Sample::kConflict: {
      const uint32_t cpu = w.AddPayload(MainGemmCpuPayload());
      const uint32_t cubin = w.AddPayload(RandomBytes(1500, 1));
      Check(w.AddKernel(Gemm(cpu, cubin, true)), "AddKernel gemm");
      break;
    }
    case Sample::kMinimal:
    case Sample::kUncompressed: {
      const uint32_t a = w.AddPayload(TextBytes(200, "tiny "));
      auto k = std::make_unique<KernelT>();
      k->name = "copy";
      k->symbols = {"n"};
      k->params.push_back(Buffer("src", 2, 32, Access::READ, {0}, 4));
      k->params.push_back(Buffer("dst", 2, 32, Access::WRITE, {0}, 4));
      k->variants.push_back(MakeVariant("cpu.x86-64-v1", Backend::CPU, CodeKind::ELF, "x86-64", a, 1, 0));
      Check(w.AddKernel(std::move(k)), "AddKernel copy");
      break;
    }
  }
  return Finish(w);
}

std::vector<uint8_t> PackManifest(const BundleT& manifest) {
  flatbuffers::FlatBufferBuilder fbb;
  FinishBundleBuffer(fbb, Bundle::Pack(fbb, &manifest));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

Parts Split(const std::vector<uint8_t>& bundle) {
  StatusOr<HeaderFields> header = ParseHeader(bundle);
  Check(header.status(), "Split: ParseHeader");
  Parts parts;
  parts.header = header.value();
  GetBundle(bundle.data() + parts.header.manifest_offset)->UnPackTo(&parts.manifest);
  parts.region.assign(bundle.begin() + static_cast<ptrdiff_t>(parts.header.payload_offset), bundle.end());
  return parts;
}

std::vector<uint8_t> Seal(const std::vector<uint8_t>& manifest, const std::vector<uint8_t>& region, uint16_t major,
                          uint16_t minor) {
  HeaderFields h;
  h.format_major = major;
  h.format_minor = minor;
  h.header_size = kHeaderSize;
  h.manifest_offset = kHeaderSize;
  h.manifest_size = manifest.size();
  h.payload_offset = AlignUp(kHeaderSize + manifest.size(), kPayloadAlignment);
  h.payload_size = region.size();
  h.manifest_crc32c = Crc32c(manifest);
  std::vector<uint8_t> out;
  const auto header = EncodeHeader(h);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), manifest.begin(), manifest.end());
  out.resize(h.payload_offset, 0);
  out.insert(out.end(), region.begin(), region.end());
  return out;
}

std::vector<uint8_t> Join(const Parts& parts) {
  return Seal(PackManifest(parts.manifest), parts.region, parts.header.format_major, parts.header.format_minor);
}

void PutLe(std::vector<uint8_t>& bytes, size_t offset, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) bytes[offset + i] = static_cast<uint8_t>(value >> (8 * i));
}

void RefreshHeaderCrc(std::vector<uint8_t>& bytes) {
  PutLe(bytes, 60, Crc32c(std::span<const uint8_t>(bytes.data(), kHeaderCrcCoveredBytes)), 4);
}

std::vector<DefectCase> NegativeCorpus() {
  const std::vector<uint8_t> valid = BuildSample(Sample::kMain);
  const Parts base = Split(valid);
  std::vector<DefectCase> cases;
  constexpr StatusCode kInvalid = StatusCode::kInvalidArgument;
  constexpr StatusCode kLoss = StatusCode::kDataLoss;
  constexpr StatusCode kIncompat = StatusCode::kIncompatible;
  // tl-pack verify exit codes (tools/tl-pack/README.md): 3 malformed, 4 data
  // loss, 5 incompatible, 6 limit exceeded.
  auto add = [&](std::string name, StatusCode code, std::string fragment, bool at_open, std::vector<uint8_t> bytes) {
    const int exit_code = code == kInvalid ? 3 : code == kLoss ? 4 : code == kIncompat ? 5 : 6;
    cases.push_back({std::move(name), code, std::move(fragment), at_open, exit_code, std::move(bytes)});
  };
  // Header-level edits on the valid bytes, header CRC re-sealed.
  auto header_edit = [&](size_t offset, uint64_t value, int width) {
    std::vector<uint8_t> b = valid;
    PutLe(b, offset, value, width);
    RefreshHeaderCrc(b);
    return b;
  };
  // Manifest-level edits, everything re-sealed.
  auto manifest_edit = [&](auto&& edit) {
    Parts p = Split(valid);
    edit(p);
    return Join(p);
  };

  {
    std::vector<uint8_t> b = valid;
    std::memcpy(b.data(), "GARBAGE!", 8);
    add("bad_magic", kInvalid, "bad signature", true, b);
  }
  {
    std::vector<uint8_t> b;  // what a text-mode LF -> CRLF transfer does
    for (uint8_t c : valid) {
      if (c == '\n') b.push_back('\r');
      b.push_back(c);
    }
    add("crlf_mangled", kInvalid, "LF -> CRLF", true, b);
  }
  {
    std::vector<uint8_t> b;  // and the reverse conversion
    for (size_t i = 0; i < valid.size(); ++i) {
      if (!(valid[i] == '\r' && i + 1 < valid.size() && valid[i + 1] == '\n')) b.push_back(valid[i]);
    }
    add("lf_mangled", kInvalid, "CRLF -> LF", true, b);
  }
  {
    std::vector<uint8_t> b = valid;
    for (auto& c : b) c &= 0x7F;
    add("seven_bit", kInvalid, "7-bit", true, b);
  }
  for (size_t n = 0; n < kHeaderSize; ++n) {
    char name[32];
    std::snprintf(name, sizeof(name), "truncated_header_%02zu", n);
    add(name, kLoss, "truncated bundle", true, std::vector<uint8_t>(valid.begin(), valid.begin() + n));
  }
  add("truncated_manifest", kLoss, "truncated bundle: the header declares", true,
      std::vector<uint8_t>(valid.begin(), valid.begin() + kHeaderSize + base.header.manifest_size / 2));
  add("truncated_payload", kLoss, "truncated bundle: the header declares", true,
      std::vector<uint8_t>(valid.begin(), valid.end() - 100));
  add("newer_major", kIncompat, "bundle format 2.0", true, header_edit(8, 2, 2));
  add("unknown_flag", kIncompat, "unknown header flag bits 0x0000000000000004", true, header_edit(16, 4, 8));
  add("header_size_wrong", kInvalid, "header_size is 128", true, header_edit(12, 128, 4));
  add("unknown_must_understand", kIncompat, "'tensor.v9' (must_understand[1])", true,
      manifest_edit([](Parts& p) { p.manifest.must_understand.push_back("tensor.v9"); }));
  add("manifest_overlaps_payload", kInvalid, "overlaps the payload region", true,
      header_edit(32, base.header.payload_offset, 8));
  add("manifest_outside_file", kInvalid, "lies outside the file", true, header_edit(24, 1ull << 40, 8));
  add("manifest_offset_overflow", kInvalid, "manifest offset 18446744073709551608 + size", true,
      header_edit(24, ~uint64_t{0} - 7, 8));
  add("payload_region_overflow", kInvalid, "payload region offset 18446744073709551552 + size", true,
      header_edit(40, ~uint64_t{0} - 63, 8));
  add("payload_region_past_eof", kLoss, "truncated bundle: the header declares", true,
      header_edit(48, base.header.payload_size + 64, 8));
  add("manifest_unaligned", kInvalid, "manifest offset 68 is not 8-byte aligned", true, header_edit(24, 68, 8));
  {
    std::vector<uint8_t> b = valid;
    b.push_back(0);
    add("trailing_bytes", kInvalid, "1 trailing bytes", true, b);
  }
  {
    std::vector<uint8_t> b = valid;
    b[60] ^= 0x01;
    add("bad_header_crc", kLoss, "header CRC32C mismatch", true, b);
  }
  add("bad_manifest_crc", kLoss, "manifest CRC32C mismatch", true, header_edit(56, base.header.manifest_crc32c ^ 1, 4));
  {
    std::vector<uint8_t> b = valid;
    const uint64_t pad = base.header.manifest_offset + base.header.manifest_size;
    if (pad < base.header.payload_offset) {
      b[pad] = 0x5A;
      add("nonzero_padding", kLoss, "padding byte", true, b);
    }
  }
  {
    std::vector<uint8_t> garbage = RandomBytes(base.header.manifest_size, 7);
    std::memcpy(garbage.data() + 4, "TLBM", 4);
    add("manifest_not_flatbuffer", kInvalid, "fails flatbuffers verification", true, Seal(garbage, base.region));
    std::vector<uint8_t> wrong_id = PackManifest(base.manifest);
    std::memcpy(wrong_id.data() + 4, "XXXX", 4);
    add("manifest_wrong_identifier", kInvalid, "file identifier \"TLBM\"", true, Seal(wrong_id, base.region));
  }
  add("manifest_version_disagrees", kInvalid, "manifest says format 1.3, header says 1.0", true,
      manifest_edit([](Parts& p) { p.manifest.format_minor = 3; }));
  add("payload_outside_region", kInvalid, "lies outside the payload region", true, manifest_edit([](Parts& p) {
        p.manifest.payloads[0]->offset = AlignUp(p.region.size(), kPayloadAlignment);
      }));
  add("payloads_overlap", kInvalid, "overlaps payload", true, manifest_edit([](Parts& p) {
        p.manifest.payloads[1]->offset = p.manifest.payloads[0]->offset;
      }));
  add("payload_offset_overflow", kInvalid, "+ stored_size", true, manifest_edit([](Parts& p) {
        p.manifest.payloads[2]->offset = ~uint64_t{0} - 63;
      }));
  add("payload_unaligned", kInvalid, "offset 8 is not 64-byte aligned", true,
      manifest_edit([](Parts& p) { p.manifest.payloads[0]->offset = 8; }));
  add("payload_index_out_of_range", kInvalid, "payload index 99 out of range (bundle has 4 payloads)", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->variants[1]->payload = 99; }));
  add("duplicate_kernel_names", kInvalid, "duplicate kernel name 'gemm' (kernels 0 and 1)", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[1]->name = "gemm"; }));
  add("unsorted_kernels", kInvalid, "kernels not sorted by name", true,
      manifest_edit([](Parts& p) { std::swap(p.manifest.kernels[0], p.manifest.kernels[1]); }));
  add("duplicate_variant_ids", kInvalid, "duplicate variant id", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[1]->variants[1]->id = "cuda.sm_80"; }));
  add("symbol_out_of_range", kInvalid, "symbol index 7 out of range (kernel has 3 symbols)", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->params[0]->shape[1]->symbol = 7; }));
  add("guard_param_out_of_range", kInvalid, "param index 12 out of range (kernel has 3 params)", true,
      manifest_edit([](Parts& p) {
        auto g = std::make_unique<GuardT>();
        g->param = 12;
        p.manifest.kernels[0]->variants[0]->guards.push_back(std::move(g));
      }));
  add("grid_expr_underflow", kInvalid, "underflows the stack", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->variants[0]->launch->grid[0]->code = {0, 4, 3}; }));
  add("unknown_backend", kInvalid, "unknown backend 9", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->variants[0]->backend = static_cast<Backend>(9); }));
  add("block_not_3d", kInvalid, "launch.block has 2 values, expected 3", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->variants[0]->launch->block = {128, 1}; }));
  add("uncompressed_size_mismatch", kInvalid, "uncompressed but stored_size 1500 != raw_size 1501", true,
      manifest_edit([](Parts& p) { p.manifest.payloads[1]->raw_size += 1; }));

  add("manifest_too_large", kInvalid, "manifest size 67108872 outside [1, 67108864]", true,
      header_edit(32, kMaxManifestBytes + 8, 8));
  add("payload_region_unaligned", kInvalid, "is not 64-byte aligned", true,
      header_edit(40, base.header.payload_offset + 8, 8));
  add("unknown_compression", kInvalid, "payload 0: unknown compression 7", true, manifest_edit([](Parts& p) {
        p.manifest.payloads[0]->compression = static_cast<Compression>(7);
      }));
  add("content_hash_wrong_length", kInvalid, "payload 3: content_hash has 5 bytes, expected 32", true,
      manifest_edit([](Parts& p) { p.manifest.payloads[3]->content_hash.resize(5); }));
  add("bundle_id_wrong_length", kInvalid, "bundle_id has 8 bytes, expected 16", true,
      manifest_edit([](Parts& p) { p.manifest.bundle_id.resize(8); }));
  add("kernel_without_variants", kInvalid, "kernel 1 'softmax': no variants", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[1]->variants.clear(); }));
  add("rank_mismatch", kInvalid, "rank 2 but 1 shape dims", true,
      manifest_edit([](Parts& p) { p.manifest.kernels[0]->params[1]->shape.pop_back(); }));

  // Payload defects: Open succeeds, VerifyAllPayloads finds them.
  {
    std::vector<uint8_t> b = valid;
    b[base.header.payload_offset + base.manifest.payloads[0]->offset + 10] ^= 0x20;
    add("bad_stored_crc", kLoss, "payload 0: stored CRC32C mismatch", false, b);
  }
  add("bad_raw_crc", kLoss, "payload 2: raw CRC32C mismatch", false,
      manifest_edit([](Parts& p) { p.manifest.payloads[2]->raw_crc32c ^= 0x10; }));
  add("zstd_size_mismatch", kInvalid, "zstd frame content size 3000 differs from the manifest raw_size 3001", false,
      manifest_edit([](Parts& p) { p.manifest.payloads[0]->raw_size += 1; }));
  {
    // A frame that expands to 1 GiB + 1 zero bytes: over the default cap.
    const uint64_t bomb_size = kDefaultMaxPayloadRawBytes + 1;
    const std::vector<uint8_t> frame = ZeroRleFrame(bomb_size);
    auto bomb = [&](uint64_t declared_raw) {
      return manifest_edit([&](Parts& p) {
        auto payload = std::make_unique<PayloadT>();
        payload->offset = AlignUp(p.region.size(), kPayloadAlignment);
        payload->stored_size = frame.size();
        payload->raw_size = declared_raw;
        payload->compression = Compression::ZSTD;
        payload->stored_crc32c = Crc32c(frame);
        p.region.resize(payload->offset, 0);
        p.region.insert(p.region.end(), frame.begin(), frame.end());
        p.manifest.payloads.push_back(std::move(payload));
      });
    };
    add("zstd_bomb", StatusCode::kResourceExhausted, "payload 4: raw_size 1073741825 exceeds the limit of 1073741824",
        false, bomb(bomb_size));
    add("zstd_bomb_understated", kInvalid, "zstd frame content size 1073741825 differs from the manifest raw_size 4096",
        false, bomb(4096));
  }
  // Payload 0 is a zstd frame at region offset 0 followed by zero padding.
  add("zstd_not_a_frame", kInvalid, "payload 0: not a zstd frame", false, manifest_edit([](Parts& p) {
        auto& payload = p.manifest.payloads[0];
        for (uint64_t i = 0; i < payload->stored_size; ++i) p.region[i] = static_cast<uint8_t>(0x41 + i % 26);
        payload->stored_crc32c = Crc32c(std::span<const uint8_t>(p.region.data(), payload->stored_size));
      }));
  add("zstd_trailing_bytes", kInvalid, "zstd frame spans 112 of the 120 stored bytes", false,
      manifest_edit([](Parts& p) {
        auto& payload = p.manifest.payloads[0];
        if (payload->stored_size != 112 || p.manifest.payloads[1]->offset < 120) {
          throw std::runtime_error("zstd_trailing_bytes: sample layout changed");
        }
        payload->stored_size += 8;  // swallow 8 bytes of zero padding
        payload->stored_crc32c = Crc32c(std::span<const uint8_t>(p.region.data(), payload->stored_size));
      }));
  add("zstd_corrupt_frame", kInvalid, "payload 0: zstd decompression failed", false, manifest_edit([](Parts& p) {
        auto& payload = p.manifest.payloads[0];
        p.region[payload->stored_size / 2] ^= 0x55;  // inside the compressed block
        payload->stored_crc32c = Crc32c(std::span<const uint8_t>(p.region.data(), payload->stored_size));
      }));
  {
    // A frame without a declared content size: the reader cannot bound it.
    std::vector<uint8_t> raw = TextBytes(3000, "streamed ");
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    std::vector<uint8_t> frame(ZSTD_compressBound(raw.size()));
    ZSTD_outBuffer out{frame.data(), frame.size(), 0};
    ZSTD_inBuffer in{raw.data(), raw.size(), 0};
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
    ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
    ZSTD_freeCCtx(cctx);
    frame.resize(out.pos);
    add("zstd_unknown_size", kInvalid, "does not declare its content size", false, manifest_edit([&](Parts& p) {
          auto& payload = p.manifest.payloads[0];
          std::vector<uint8_t> region(p.region.begin(), p.region.begin() + static_cast<ptrdiff_t>(payload->offset));
          // Payload 0 is first in the region; rebuild the region around the new frame.
          std::vector<uint8_t> rest(p.region.begin() + static_cast<ptrdiff_t>(payload->offset + payload->stored_size),
                                    p.region.end());
          const uint64_t next = p.manifest.payloads[1]->offset;
          if (frame.size() > next - payload->offset) throw std::runtime_error("streamed frame too large");
          region.insert(region.end(), frame.begin(), frame.end());
          region.resize(next, 0);
          region.insert(region.end(), p.region.begin() + static_cast<ptrdiff_t>(next), p.region.end());
          payload->stored_size = frame.size();
          payload->raw_size = raw.size();
          payload->stored_crc32c = Crc32c(frame);
          payload->raw_crc32c = Crc32c(raw);
          p.region = std::move(region);
        }));
  }
  return cases;
}

Status WriteCorpus(const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return MakeStatus(StatusCode::kUnavailable, "%s: cannot create directory", dir.c_str());
  }
  std::string index;
  for (const DefectCase& c : NegativeCorpus()) {
    TL_RETURN_IF_ERROR(WriteFile(dir + "/" + c.name + ".tlb", c.bytes));
    index += c.name + " " + StatusCodeName(c.code) + " " + std::to_string(c.tl_pack_exit) + " " + c.fragment + "\n";
  }
  TL_RETURN_IF_ERROR(WriteFile(dir + "/valid_main.tlb", BuildSample(Sample::kMain)));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/valid_other.tlb", BuildSample(Sample::kOther)));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/valid_conflict.tlb", BuildSample(Sample::kConflict)));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/valid_minimal.tlb", BuildSample(Sample::kMinimal)));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/valid_uncompressed.tlb", BuildSample(Sample::kUncompressed)));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/gemm_cpu.bin", MainGemmCpuPayload()));
  TL_RETURN_IF_ERROR(WriteFile(dir + "/corpus.txt", std::vector<uint8_t>(index.begin(), index.end())));
  return Status::Ok();
}

}  // namespace tl::formats::testing
