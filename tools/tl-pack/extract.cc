// tl-pack extract: write one variant's payload (decompressed, verified) to a file.
#include <cinttypes>
#include <cstdio>

#include "verbs.h"

namespace tl::pack {
namespace {

constexpr char kUsage[] =
    "usage: tl-pack extract BUNDLE (--kernel K --variant V | --payload N) -o OUT\n"
    "  Writes the raw (decompressed) payload of variant V of kernel K, or payload N, to OUT.\n"
    "  The payload's sizes and both CRC32Cs are checked first. Exit 8 when K, V or N does not exist.\n";

}  // namespace

int RunExtract(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--output", "--kernel", "--variant", "--payload", "--max-payload-bytes"},
                 {"--help", "-h"}, &args, &error)) {
    return UsageError("extract", error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1) return UsageError("extract", "expected exactly one bundle");
  const std::string out = args.Get("-o", args.Get("--output"));
  if (out.empty()) return UsageError("extract", "missing -o OUT");
  const std::string kernel_name = args.Get("--kernel"), variant_id = args.Get("--variant"),
                    payload_text = args.Get("--payload");
  const bool by_variant = !kernel_name.empty() && !variant_id.empty();
  if (by_variant == !payload_text.empty()) {
    return UsageError("extract", "give either --kernel and --variant, or --payload");
  }
  formats::ReadOptions options;
  if (!args.Get("--max-payload-bytes").empty() &&
      !ParseSize(args.Get("--max-payload-bytes"), &options.max_payload_raw_bytes)) {
    return UsageError("extract", "--max-payload-bytes needs a size such as 1048576 or 64M");
  }

  StatusOr<std::unique_ptr<LoadedBundle>> bundle = LoadBundle(args.positional[0], options);
  if (!bundle.ok()) return Fail("extract", bundle.status());
  const formats::BundleView& view = bundle.value()->view;
  uint32_t index = 0;
  std::string what;
  if (by_variant) {
    const auto* kernel = view.FindKernel(kernel_name);
    if (!kernel) {
      std::string names;
      for (const auto* k : *view.manifest()->kernels()) names += (names.empty() ? "" : ", ") + k->name()->str();
      std::fprintf(stderr, "tl-pack extract: %s: no kernel '%s' (kernels: %s)\n", args.positional[0].c_str(),
                   kernel_name.c_str(), names.c_str());
      return kExitNotFound;
    }
    const tl::bundle::Variant* variant = nullptr;
    std::string ids;
    for (const auto* v : *kernel->variants()) {
      ids += (ids.empty() ? "" : ", ") + v->id()->str();
      if (v->id()->str() == variant_id) variant = v;
    }
    if (!variant) {
      std::fprintf(stderr, "tl-pack extract: %s: kernel '%s' has no variant '%s' (variants: %s)\n",
                   args.positional[0].c_str(), kernel_name.c_str(), variant_id.c_str(), ids.c_str());
      return kExitNotFound;
    }
    index = variant->payload();
    what = "kernel '" + kernel_name + "' variant '" + variant_id + "' (payload " + std::to_string(index) + ")";
  } else {
    uint64_t parsed = 0;
    if (!ParseSize(payload_text, &parsed) || parsed > UINT32_MAX) {
      return UsageError("extract", "--payload needs a payload index");
    }
    index = static_cast<uint32_t>(parsed);
    if (index >= view.manifest()->payloads()->size()) {
      std::fprintf(stderr, "tl-pack extract: %s: payload %u out of range (bundle has %u payloads)\n",
                   args.positional[0].c_str(), index, view.manifest()->payloads()->size());
      return kExitNotFound;
    }
    what = "payload " + std::to_string(index);
  }
  StatusOr<std::vector<uint8_t>> raw = view.ReadPayload(index);
  if (!raw.ok()) return Fail("extract", raw.status().Annotate(args.positional[0]));
  Status s = formats::WriteFile(out, raw.value());
  if (!s.ok()) return Fail("extract", s);
  std::printf("%s: %s, %zu bytes\n", out.c_str(), what.c_str(), raw.value().size());
  return kExitOk;
}

}  // namespace tl::pack
