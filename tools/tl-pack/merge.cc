// tl-pack merge: combine bundles into one.
//
// Kernels are taken from every input; payloads are re-added through the
// writer, so identical payloads across inputs are stored once. A kernel name
// present in several inputs is kept once when the kernels are identical (same
// signature, variants and payload contents) and is a conflict otherwise;
// bundle attributes with the same key and different values conflict too.
// All conflicts are reported and nothing is written (exit 7).
#include <cstdio>
#include <map>

#include "tilelang/formats/checksum.h"
#include "verbs.h"

namespace tl::pack {
namespace {

constexpr char kUsage[] =
    "usage: tl-pack merge -o OUT BUNDLE BUNDLE...\n"
    "  Combines the kernels of all inputs into OUT (payloads deduplicated by content).\n"
    "  A kernel in several inputs must be identical in all of them; otherwise every conflict is\n"
    "  reported, nothing is written, and the exit code is 7. The producer becomes tl-pack merge.\n";

template <typename T>
std::vector<uint8_t> PackTable(const T& object) {
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(T::TableType::Pack(fbb, &object));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// A kernel taken from one input, with its variants' payloads identified by
// content (SHA-256 of the verified raw bytes) rather than by index, so that
// kernels from different inputs compare and the output does not depend on
// the order of the inputs.
struct Candidate {
  std::unique_ptr<tl::bundle::KernelT> kernel;  // variant payload fields zeroed
  std::vector<formats::Sha256Digest> payloads;  // one per variant
  std::vector<uint8_t> packed;                  // kernel packed, for equality
  std::string path;
};

// Names the first difference between two kernels of the same name.
std::string Difference(const Candidate& a, const Candidate& b) {
  tl::bundle::KernelT sig_a(*a.kernel), sig_b(*b.kernel);
  sig_a.variants.clear();
  sig_b.variants.clear();
  if (PackTable(sig_a) != PackTable(sig_b)) return "signatures differ";
  const auto& va = a.kernel->variants;
  const auto& vb = b.kernel->variants;
  if (va.size() != vb.size()) return std::to_string(va.size()) + " vs " + std::to_string(vb.size()) + " variants";
  for (size_t i = 0; i < va.size(); ++i) {
    if (va[i]->id != vb[i]->id) return "variant " + std::to_string(i) + " is '" + va[i]->id + "' vs '" + vb[i]->id + "'";
    if (a.payloads[i] != b.payloads[i]) return "variant '" + va[i]->id + "' code differs";
    if (PackTable(*va[i]) != PackTable(*vb[i])) return "variant '" + va[i]->id + "' metadata differs";
  }
  return "kernels differ";
}

}  // namespace

int RunMerge(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--output"}, {"--help", "-h"}, &args, &error)) return UsageError("merge", error);
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  const std::string out = args.Get("-o", args.Get("--output"));
  if (out.empty()) return UsageError("merge", "missing -o OUT");
  if (args.positional.size() < 2) return UsageError("merge", "expected at least two bundles");

  std::map<std::string, Candidate> kernels;  // by name
  std::map<formats::Sha256Digest, std::vector<uint8_t>> raw_by_hash;
  std::map<std::string, std::pair<std::string, std::string>> attrs;  // key -> (value, path)
  std::vector<std::string> conflicts;

  for (const std::string& path : args.positional) {
    StatusOr<std::unique_ptr<LoadedBundle>> bundle = LoadBundle(path);
    if (!bundle.ok()) return Fail("merge", bundle.status());
    const LoadedBundle& b = *bundle.value();
    std::map<uint32_t, formats::Sha256Digest> hash_by_index;
    for (const auto* k : *b.view.manifest()->kernels()) {
      Candidate c;
      c.kernel.reset(k->UnPack());
      c.path = path;
      for (auto& variant : c.kernel->variants) {
        auto it = hash_by_index.find(variant->payload);
        if (it == hash_by_index.end()) {
          StatusOr<std::vector<uint8_t>> raw = b.view.ReadPayload(variant->payload);
          if (!raw.ok()) {
            return Fail("merge", raw.status().Annotate(path + ": kernel '" + c.kernel->name + "' variant '" +
                                                       variant->id + "'"));
          }
          const formats::Sha256Digest hash = formats::Sha256::Hash(raw.value());
          raw_by_hash.emplace(hash, std::move(raw).value());
          it = hash_by_index.emplace(variant->payload, hash).first;
        }
        c.payloads.push_back(it->second);
        variant->payload = 0;
      }
      c.packed = PackTable(*c.kernel);
      auto seen = kernels.find(c.kernel->name);
      if (seen == kernels.end()) {
        const std::string name = c.kernel->name;
        kernels.emplace(name, std::move(c));
      } else if (seen->second.packed != c.packed || seen->second.payloads != c.payloads) {
        conflicts.push_back("kernel '" + c.kernel->name + "': " + seen->second.path + " and " + path + " disagree (" +
                            Difference(seen->second, c) + ")");
      }
    }
    const auto* a = b.view.manifest()->attrs();
    for (uint32_t i = 0; a && i < a->size(); ++i) {
      const std::string key = a->Get(i)->key()->str();
      const std::string value = a->Get(i)->value() ? a->Get(i)->value()->str() : "";
      auto it = attrs.find(key);
      if (it == attrs.end()) {
        attrs.emplace(key, std::make_pair(value, path));
      } else if (it->second.first != value) {
        conflicts.push_back("attribute '" + key + "': '" + it->second.first + "' in " + it->second.second + ", '" +
                            value + "' in " + path);
      }
    }
  }
  if (!conflicts.empty()) {
    std::fprintf(stderr, "tl-pack merge: %zu conflict%s, nothing written:\n", conflicts.size(),
                 conflicts.size() == 1 ? "" : "s");
    for (const auto& c : conflicts) std::fprintf(stderr, "  %s\n", c.c_str());
    return kExitConflict;
  }
  // Payloads are added in kernel-name order, variant order: the output is
  // the same whatever order the inputs came in.
  formats::BundleWriter writer;
  writer.SetProducer(PackProducer("merge"));
  for (auto& [name, c] : kernels) {
    for (size_t i = 0; i < c.kernel->variants.size(); ++i) {
      c.kernel->variants[i]->payload = writer.AddPayload(raw_by_hash.at(c.payloads[i]));
    }
    Status s = writer.AddKernel(std::move(c.kernel));
    if (!s.ok()) return Fail("merge", s);
  }
  for (const auto& [key, value] : attrs) writer.AddAttr(key, value.first);
  StatusOr<std::vector<uint8_t>> bytes = writer.Finish();
  if (!bytes.ok()) return Fail("merge", bytes.status());
  Status s = formats::WriteFile(out, bytes.value());
  if (!s.ok()) return Fail("merge", s);
  std::printf("%s: %zu kernels from %zu bundles, %zu bytes\n", out.c_str(), kernels.size(), args.positional.size(),
              bytes.value().size());
  return kExitOk;
}

}  // namespace tl::pack
