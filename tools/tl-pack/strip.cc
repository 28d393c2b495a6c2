// tl-pack strip: drop backends, archs or individual variants from a bundle.
//
// Kernels left without variants are dropped (and reported); payloads no
// remaining variant uses are not written. The input's producer and attributes
// are kept.
#include <cstdio>
#include <map>

#include "verbs.h"

namespace tl::pack {
namespace {

constexpr char kUsage[] =
    "usage: tl-pack strip BUNDLE -o OUT [--drop-backend B]... [--drop-arch A]... [--drop-variant [KERNEL/]ID]...\n"
    "  Writes BUNDLE without the matching variants. B is cuda|hip|vulkan|cpu; A an arch string as in\n"
    "  inspect (sm_90a, gfx942, x86-64-v3, ...); ID a variant id, optionally limited to one kernel.\n"
    "  Kernels left without variants are dropped. At least one --drop-* option is required.\n";

}  // namespace

int RunStrip(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--output", "--drop-backend", "--drop-arch", "--drop-variant"}, {"--help", "-h"},
                 &args, &error)) {
    return UsageError("strip", error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1) return UsageError("strip", "expected exactly one bundle");
  const std::string out = args.Get("-o", args.Get("--output"));
  if (out.empty()) return UsageError("strip", "missing -o OUT");
  std::vector<tl::bundle::Backend> backends;
  for (const std::string& name : args.All("--drop-backend")) {
    tl::bundle::Backend b;
    if (!ParseBackend(name, &b)) return UsageError("strip", "unknown backend '" + name + "'");
    backends.push_back(b);
  }
  const auto& archs = args.All("--drop-arch");
  const auto& variant_ids = args.All("--drop-variant");
  if (backends.empty() && archs.empty() && variant_ids.empty()) {
    return UsageError("strip", "nothing to drop: give --drop-backend, --drop-arch or --drop-variant");
  }

  StatusOr<std::unique_ptr<LoadedBundle>> bundle = LoadBundle(args.positional[0]);
  if (!bundle.ok()) return Fail("strip", bundle.status());
  const LoadedBundle& b = *bundle.value();
  const auto* m = b.view.manifest();

  formats::BundleWriter writer;
  if (m->producer()) {
    writer.SetProducer(std::unique_ptr<tl::bundle::ProducerT>(m->producer()->UnPack()));
  }
  for (uint32_t i = 0; m->attrs() && i < m->attrs()->size(); ++i) {
    writer.AddAttr(m->attrs()->Get(i)->key()->str(), m->attrs()->Get(i)->value() ? m->attrs()->Get(i)->value()->str() : "");
  }
  std::map<uint32_t, uint32_t> remap;
  size_t dropped_variants = 0, kept_kernels = 0;
  for (const auto* k : *m->kernels()) {
    auto kernel = std::unique_ptr<tl::bundle::KernelT>(k->UnPack());
    std::vector<std::unique_ptr<tl::bundle::VariantT>> kept;
    for (auto& v : kernel->variants) {
      bool drop = false;
      for (auto backend : backends) drop = drop || v->backend == backend;
      for (const auto& arch : archs) drop = drop || v->requires_->arch == arch;
      for (const auto& id : variant_ids) drop = drop || id == v->id || id == kernel->name + "/" + v->id;
      if (drop) {
        ++dropped_variants;
      } else {
        kept.push_back(std::move(v));
      }
    }
    if (kept.empty()) {
      std::printf("kernel '%s' dropped: no variants left\n", kernel->name.c_str());
      continue;
    }
    kernel->variants = std::move(kept);
    Status s = RehomePayloads(b, *kernel, writer, &remap);
    if (!s.ok()) return Fail("strip", s);
    s = writer.AddKernel(std::move(kernel));
    if (!s.ok()) return Fail("strip", s);
    ++kept_kernels;
  }
  StatusOr<std::vector<uint8_t>> bytes = writer.Finish();
  if (!bytes.ok()) return Fail("strip", bytes.status());
  Status s = formats::WriteFile(out, bytes.value());
  if (!s.ok()) return Fail("strip", s);
  std::printf("%s: dropped %zu variants, %zu kernels kept, %zu bytes (was %zu)\n", out.c_str(), dropped_variants,
              kept_kernels, bytes.value().size(), b.bytes.size());
  return kExitOk;
}

}  // namespace tl::pack
