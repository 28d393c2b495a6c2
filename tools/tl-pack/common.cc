// Helpers shared by tl-pack verbs.
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "verbs.h"

namespace tl::pack {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition: return kExitMalformed;
    case StatusCode::kDataLoss: return kExitDataLoss;
    case StatusCode::kIncompatible: return kExitIncompatible;
    case StatusCode::kResourceExhausted: return kExitLimit;
    case StatusCode::kAlreadyExists: return kExitConflict;
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnavailable: return kExitIo;
    default: return kExitInternal;
  }
}

int Fail(const char* verb, const Status& status) {
  std::fprintf(stderr, "tl-pack %s: %s\n", verb, status.ToString().c_str());
  return ExitCodeFor(status);
}

int UsageError(const char* verb, const std::string& message) {
  std::fprintf(stderr, "tl-pack %s: %s (see `tl-pack help %s`)\n", verb, message.c_str(), verb);
  return kExitUsage;
}

std::string Args::Get(const std::string& option, const std::string& fallback) const {
  auto it = values.find(option);
  return it == values.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& Args::All(const std::string& option) const {
  static const std::vector<std::string> kEmpty;
  auto it = values.find(option);
  return it == values.end() ? kEmpty : it->second;
}

bool ParseArgs(int argc, char** argv, const std::set<std::string>& value_options,
               const std::set<std::string>& flag_options, Args* out, std::string* error) {
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.empty() || arg[0] != '-' || arg == "-") {
      out->positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    std::string value;
    bool has_inline_value = false;
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_inline_value = true;
    }
    if (value_options.count(arg)) {
      if (!has_inline_value) {
        if (i + 1 >= argc) {
          *error = "option " + arg + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      out->values[arg].push_back(value);
    } else if (flag_options.count(arg) && !has_inline_value) {
      out->flags.insert(arg);
    } else {
      *error = "unknown option " + arg;
      return false;
    }
  }
  return true;
}

bool ParseSize(const std::string& text, uint64_t* out) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) return false;
  std::string suffix(end);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (!suffix.empty()) return false;
  if (shift && v > (~0ull >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

StatusOr<std::unique_ptr<LoadedBundle>> LoadBundle(const std::string& path, const formats::ReadOptions& options,
                                                   bool annotate) {
  auto loaded = std::make_unique<LoadedBundle>();
  loaded->path = path;
  StatusOr<std::vector<uint8_t>> bytes = formats::ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  loaded->bytes = std::move(bytes).value();
  StatusOr<formats::BundleView> view = formats::BundleView::Open(loaded->bytes, options);
  if (!view.ok()) return annotate ? view.status().Annotate(path) : view.status();
  loaded->view = view.value();
  return loaded;
}

Status RehomePayloads(const LoadedBundle& from, tl::bundle::KernelT& kernel, formats::BundleWriter& writer,
                      std::map<uint32_t, uint32_t>* remap) {
  for (auto& variant : kernel.variants) {
    auto it = remap->find(variant->payload);
    if (it == remap->end()) {
      StatusOr<std::vector<uint8_t>> raw = from.view.ReadPayload(variant->payload);
      if (!raw.ok()) {
        return raw.status().Annotate(from.path + ": kernel '" + kernel.name + "' variant '" + variant->id + "'");
      }
      it = remap->emplace(variant->payload, writer.AddPayload(std::move(raw).value())).first;
    }
    variant->payload = it->second;
  }
  return Status::Ok();
}

std::unique_ptr<tl::bundle::ProducerT> PackProducer(const char* verb) {
  auto producer = std::make_unique<tl::bundle::ProducerT>();
  producer->tool = std::string("tl-pack ") + verb;
  producer->tool_version = TL_PACK_VERSION;
  return producer;
}

std::string DTypeName(const tl::bundle::DType* dtype) {
  if (!dtype) return "?";
  std::string base;
  switch (dtype->code()) {
    case 0: base = "i"; break;
    case 1: base = "u"; break;
    case 2: base = "f"; break;
    case 4: base = "bf"; break;
    case 6: base = "bool"; break;
    default: base = "code" + std::to_string(dtype->code()) + "_"; break;
  }
  if (dtype->code() != 6 || dtype->bits() != 8) base += std::to_string(dtype->bits());
  if (dtype->lanes() > 1) base += "x" + std::to_string(dtype->lanes());
  return base;
}

std::string HexString(const uint8_t* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

std::string JsonEscape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Non-ASCII bytes are escaped one by one: the manifest does not
          // promise UTF-8, and the output must stay valid JSON.
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

const char* BackendName(tl::bundle::Backend backend) {
  switch (backend) {
    case tl::bundle::Backend::UNKNOWN: return "unknown";
    case tl::bundle::Backend::CUDA: return "cuda";
    case tl::bundle::Backend::HIP: return "hip";
    case tl::bundle::Backend::VULKAN: return "vulkan";
    case tl::bundle::Backend::CPU: return "cpu";
  }
  return "?";
}

bool ParseBackend(const std::string& name, tl::bundle::Backend* out) {
  for (auto b : {tl::bundle::Backend::CUDA, tl::bundle::Backend::HIP, tl::bundle::Backend::VULKAN,
                 tl::bundle::Backend::CPU}) {
    if (name == BackendName(b)) {
      *out = b;
      return true;
    }
  }
  return false;
}

const char* CodeKindName(tl::bundle::CodeKind kind) {
  switch (kind) {
    case tl::bundle::CodeKind::UNKNOWN: return "unknown";
    case tl::bundle::CodeKind::CUBIN: return "cubin";
    case tl::bundle::CodeKind::PTX: return "ptx";
    case tl::bundle::CodeKind::HSACO: return "hsaco";
    case tl::bundle::CodeKind::SPIRV: return "spirv";
    case tl::bundle::CodeKind::ELF: return "elf";
  }
  return "?";
}

}  // namespace tl::pack
