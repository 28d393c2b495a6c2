// Writing a .tlb bundle. See writer.h for the contract.
//
// File layout produced (format 1.0):
//   [0, 64)                 header
//   [64, 64 + M)            manifest (flatbuffer, M = manifest_size)
//   zero padding to the next multiple of 64
//   [P, P + S)              payload region: payloads in index order, each at a
//                           64-byte aligned offset, zero padding in between;
//                           the file ends at the end of the last payload.
#include "tilelang/formats/writer.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include "tilelang/formats/checksum.h"
#include "tilelang/formats/container.h"
#include "tilelang/formats/reader.h"

namespace tl::formats {

struct BundleWriter::Impl {
  WriteOptions options;
  std::vector<std::vector<uint8_t>> payloads;  // raw bytes, by index
  std::vector<Sha256Digest> hashes;            // by index
  std::map<Sha256Digest, uint32_t> index_by_hash;
  std::map<std::string, std::unique_ptr<tl::bundle::KernelT>> kernels;  // sorted by name
  std::unique_ptr<tl::bundle::ProducerT> producer;
  std::map<std::string, std::string> attrs;
};

namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void SortKeyValues(std::vector<std::unique_ptr<tl::bundle::KeyValueT>>& kvs) {
  // Ties broken by value so the order is total (std::stable_sort would do,
  // but libstdc++'s is deprecated-noisy under clang).
  std::sort(kvs.begin(), kvs.end(), [](const auto& a, const auto& b) {
    return a->key != b->key ? a->key < b->key : a->value < b->value;
  });
}

template <typename T>
bool AnyNull(const std::vector<std::unique_ptr<T>>& v) {
  for (const auto& p : v) {
    if (!p) return true;
  }
  return false;
}

// The flatbuffers object API dereferences every element of a table vector and
// silently drops a null required table (asserting only in debug builds), so
// a caller's missing pieces are reported here, by name, before packing.
Status CheckObjectTree(const tl::bundle::KernelT& k) {
  const char* name = k.name.c_str();
  if (AnyNull(k.params) || AnyNull(k.variants) || AnyNull(k.attrs)) {
    return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s': null entry in params, variants or attrs", name);
  }
  for (const auto& param : k.params) {
    if (AnyNull(param->shape)) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' param '%s': null shape dim", name,
                        param->name.c_str());
    }
  }
  for (const auto& v : k.variants) {
    const char* id = v->id.c_str();
    if (!v->requires_ || !v->launch) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': %s is null (required)", name, id,
                        v->requires_ ? "launch" : "requires");
    }
    const auto& l = *v->launch;
    if (AnyNull(v->guards) || AnyNull(v->build_attrs) || AnyNull(l.grid) || AnyNull(l.param_slots) ||
        AnyNull(l.vk_bindings) || AnyNull(l.vk_push) || AnyNull(l.vk_spec)) {
      return MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': null entry in a table vector", name,
                        id);
    }
  }
  return Status::Ok();
}

struct StoredPayload {
  std::vector<uint8_t> bytes;
  tl::bundle::Compression compression = tl::bundle::Compression::NONE;
};

StatusOr<StoredPayload> Compress(const std::vector<uint8_t>& raw, const WriteOptions& options, uint32_t index) {
  StoredPayload out;
  if (!options.compress || raw.empty()) {
    out.bytes = raw;
    return out;
  }
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) return MakeStatus(StatusCode::kResourceExhausted, "payload %u: cannot allocate a zstd context", index);
  // Single-threaded, fixed level, content size and checksum in the frame:
  // deterministic output, and the reader can check sizes before allocating.
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, options.zstd_level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  std::vector<uint8_t> frame(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), raw.data(), raw.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) {
    return MakeStatus(StatusCode::kInternal, "payload %u: zstd compression of %zu bytes failed: %s", index, raw.size(),
                      ZSTD_getErrorName(n));
  }
  if (n >= raw.size()) {  // incompressible: store as is (a deterministic rule)
    out.bytes = raw;
    return out;
  }
  frame.resize(n);
  out.bytes = std::move(frame);
  out.compression = tl::bundle::Compression::ZSTD;
  return out;
}

std::vector<uint8_t> PackManifest(const tl::bundle::BundleT& bundle) {
  flatbuffers::FlatBufferBuilder fbb(4096);
  tl::bundle::FinishBundleBuffer(fbb, tl::bundle::Bundle::Pack(fbb, &bundle));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace

BundleWriter::BundleWriter(WriteOptions options) : impl_(std::make_shared<Impl>()) { impl_->options = options; }

uint32_t BundleWriter::AddPayload(std::vector<uint8_t> raw_bytes) {
  const Sha256Digest hash = Sha256::Hash(raw_bytes);
  auto it = impl_->index_by_hash.find(hash);
  if (it != impl_->index_by_hash.end()) return it->second;
  const uint32_t index = static_cast<uint32_t>(impl_->payloads.size());
  impl_->payloads.push_back(std::move(raw_bytes));
  impl_->hashes.push_back(hash);
  impl_->index_by_hash.emplace(hash, index);
  return index;
}

Status BundleWriter::AddKernel(std::unique_ptr<tl::bundle::KernelT> kernel) {
  if (!kernel) return MakeStatus(StatusCode::kInvalidArgument, "AddKernel: null kernel");
  if (impl_->kernels.count(kernel->name)) {
    return MakeStatus(StatusCode::kAlreadyExists, "kernel '%s' was already added", kernel->name.c_str());
  }
  std::string name = kernel->name;
  impl_->kernels.emplace(std::move(name), std::move(kernel));
  return Status::Ok();
}

void BundleWriter::SetProducer(std::unique_ptr<tl::bundle::ProducerT> producer) {
  impl_->producer = std::move(producer);
}

void BundleWriter::AddAttr(const std::string& key, const std::string& value) { impl_->attrs[key] = value; }

StatusOr<std::vector<uint8_t>> BundleWriter::Finish() {
  const Impl& in = *impl_;
  const uint32_t num_payloads = static_cast<uint32_t>(in.payloads.size());

  tl::bundle::BundleT bundle;
  bundle.format_major = kFormatMajor;
  bundle.format_minor = kFormatMinor;
  bundle.must_understand = {"core.v1"};
  bool symbol_slots = false;  // any Launch.param_slots entry carrying a shape symbol
  bool tensor_maps = false;   // ... or a tensor map
  if (in.producer) bundle.producer = std::make_unique<tl::bundle::ProducerT>(*in.producer);
  for (const auto& [name, kernel] : in.kernels) {
    TL_RETURN_IF_ERROR(CheckObjectTree(*kernel));
    auto copy = std::make_unique<tl::bundle::KernelT>(*kernel);
    SortKeyValues(copy->attrs);
    for (auto& variant : copy->variants) {
      if (variant->payload >= num_payloads) {
        return MakeStatus(StatusCode::kInvalidArgument,
                          "kernel '%s' variant '%s': payload index %u out of range (%u payloads added)", name.c_str(),
                          variant->id.c_str(), variant->payload, num_payloads);
      }
      SortKeyValues(variant->build_attrs);
    }
    for (const auto& variant : copy->variants) {
      for (const auto& slot : variant->launch->param_slots) {
        if (slot->symbol >= 0) symbol_slots = true;
        if (slot->tensor_map >= 0) tensor_maps = true;
      }
    }
    bundle.kernels.push_back(std::move(copy));
  }
  if (symbol_slots) bundle.must_understand.push_back("launch.symbol_slots");
  if (tensor_maps) bundle.must_understand.push_back("launch.tensor_maps");
  for (const auto& [key, value] : in.attrs) {
    auto kv = std::make_unique<tl::bundle::KeyValueT>();
    kv->key = key;
    kv->value = value;
    bundle.attrs.push_back(std::move(kv));
  }

  // Payload region: index order, 64-byte aligned, zero padding.
  std::vector<uint8_t> region;
  for (uint32_t i = 0; i < num_payloads; ++i) {
    StatusOr<StoredPayload> stored = Compress(in.payloads[i], in.options, i);
    if (!stored.ok()) return stored.status();
    const uint64_t offset = AlignUp(region.size(), kPayloadAlignment);
    region.resize(offset, 0);
    region.insert(region.end(), stored->bytes.begin(), stored->bytes.end());
    auto p = std::make_unique<tl::bundle::PayloadT>();
    p->offset = offset;
    p->stored_size = stored->bytes.size();
    p->raw_size = in.payloads[i].size();
    p->compression = stored->compression;
    p->stored_crc32c = Crc32c(stored->bytes);
    p->raw_crc32c = Crc32c(in.payloads[i]);
    p->content_hash.assign(in.hashes[i].begin(), in.hashes[i].end());
    bundle.payloads.push_back(std::move(p));
  }

  // The bundle id hashes the manifest (with a zero id) and the payload region,
  // so it is reproducible and changes whenever any content does. The id has a
  // fixed length, so the second pack has the same layout as the first.
  bundle.bundle_id.assign(16, 0);
  Sha256 id_hash;
  static constexpr char kIdDomain[] = "tl.bundle_id.v1";
  id_hash.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kIdDomain), sizeof(kIdDomain)));
  id_hash.Update(PackManifest(bundle));
  id_hash.Update(region);
  const Sha256Digest id = id_hash.Finish();
  bundle.bundle_id.assign(id.begin(), id.begin() + 16);
  const std::vector<uint8_t> manifest = PackManifest(bundle);

  HeaderFields header;
  header.format_major = kFormatMajor;
  header.format_minor = kFormatMinor;
  header.header_size = kHeaderSize;
  header.manifest_offset = kHeaderSize;
  header.manifest_size = manifest.size();
  header.payload_offset = AlignUp(header.manifest_offset + header.manifest_size, kPayloadAlignment);
  header.payload_size = region.size();
  header.manifest_crc32c = Crc32c(manifest);
  if (header.manifest_size > kMaxManifestBytes) {
    return MakeStatus(StatusCode::kResourceExhausted, "manifest of %" PRIu64 " bytes exceeds the limit of %" PRIu64,
                      header.manifest_size, kMaxManifestBytes);
  }

  std::vector<uint8_t> out;
  out.reserve(header.payload_offset + region.size());
  const auto encoded = EncodeHeader(header);
  out.insert(out.end(), encoded.begin(), encoded.end());
  out.insert(out.end(), manifest.begin(), manifest.end());
  out.resize(header.payload_offset, 0);
  out.insert(out.end(), region.begin(), region.end());

  // Self-check with the reader: whatever it would reject (duplicate variant
  // ids, bad indices in signatures, ...) is a producer error, caught here.
  StatusOr<BundleView> view = BundleView::Open(out);
  if (!view.ok()) {
    return Status(StatusCode::kInvalidArgument, "the bundle would not load: " + view.status().message());
  }
  return out;
}

Status WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    return MakeStatus(StatusCode::kUnavailable, "%s: cannot create: %s", tmp.c_str(), std::strerror(errno));
  }
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  bool ok = written == bytes.size();
  ok = (std::fflush(f) == 0) && ok;
  ok = (::fsync(fileno(f)) == 0) && ok;
  const int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return MakeStatus(StatusCode::kUnavailable, "%s: write failed after %zu of %zu bytes: %s", tmp.c_str(), written,
                      bytes.size(), std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_err = errno;
    std::remove(tmp.c_str());
    return MakeStatus(StatusCode::kUnavailable, "%s: cannot rename from %s: %s", path.c_str(), tmp.c_str(),
                      std::strerror(rename_err));
  }
  return Status::Ok();
}

}  // namespace tl::formats
