// tl-pack inspect: a readable table (or JSON) of a bundle's contents.
//
// inspect opens the bundle (header, manifest and every index are checked) but
// does not decompress payloads: use `verify` for that. A bundle whose payloads
// are corrupt can still be inspected, which helps diagnose it.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "catalogue.h"
#include "verbs.h"

namespace tl::pack {
namespace {

constexpr char kUsage[] =
    "usage: tl-pack inspect [--json | --markdown] BUNDLE\n"
    "  Prints the header, producer, kernels (signatures, variants with their requirements) and payloads.\n"
    "  --json      one JSON object on stdout instead of the table\n"
    "  --markdown  the kernel catalogue (kernels/CATALOGUE.md is this for the standard library)\n";

std::string Str(const flatbuffers::String* s) { return s ? std::string(s->c_str(), s->size()) : std::string(); }

std::string DimText(const tl::bundle::Kernel* k, const tl::bundle::Dim* d) {
  std::string out;
  if (d->static_size() >= 0) {
    out = std::to_string(d->static_size());
  } else if (d->symbol() >= 0) {
    out = Str(k->symbols()->Get(static_cast<uint32_t>(d->symbol())));
  } else {
    out = "?";
  }
  if (d->divisible_by() > 1) out += "%" + std::to_string(d->divisible_by());
  return out;
}

const char* AccessName(tl::bundle::Access a) {
  switch (a) {
    case tl::bundle::Access::NONE: return "none";
    case tl::bundle::Access::READ: return "read";
    case tl::bundle::Access::WRITE: return "write";
    case tl::bundle::Access::READ_WRITE: return "readwrite";
  }
  return "?";
}

// "A: f16[M%16,K] read align16" / "n: i32 = rows"
std::string ParamText(const tl::bundle::Kernel* k, const tl::bundle::Param* p) {
  std::string out = Str(p->name()) + ": " + DTypeName(p->dtype());
  if (p->kind() == tl::bundle::ParamKind::BUFFER) {
    out += "[";
    for (uint32_t d = 0; d < (p->shape() ? p->shape()->size() : 0u); ++d) {
      if (d) out += ",";
      out += DimText(k, p->shape()->Get(d));
    }
    out += "] ";
    out += AccessName(p->access());
    if (p->ptr_alignment() > 1) out += " align" + std::to_string(p->ptr_alignment());
  } else if (p->binds_symbol() >= 0) {
    out += " = " + Str(k->symbols()->Get(static_cast<uint32_t>(p->binds_symbol())));
  }
  return out;
}

std::string Signature(const tl::bundle::Kernel* k) {
  std::string out = Str(k->name()) + "(";
  for (uint32_t i = 0; i < k->params()->size(); ++i) {
    if (i) out += ", ";
    out += ParamText(k, k->params()->Get(i));
  }
  return out + ")";
}

std::string Features(const tl::bundle::Requirements* r) {
  std::string out;
  for (uint32_t i = 0; r->features() && i < r->features()->size(); ++i) {
    if (i) out += ",";
    out += Str(r->features()->Get(i));
  }
  return out;
}

// The hsaco.* build_attrs of a HIP variant (the code object's metadata notes,
// recorded at build time), without the prefix, in key order; empty otherwise.
std::vector<std::pair<std::string, std::string>> HsacoFacts(const tl::bundle::Variant* v) {
  std::vector<std::pair<std::string, std::string>> out;
  if (v->backend() != tl::bundle::Backend::HIP || !v->build_attrs()) return out;
  for (const auto* kv : *v->build_attrs()) {
    const std::string key = Str(kv->key());
    if (key.rfind("hsaco.", 0) == 0) out.emplace_back(key.substr(6), Str(kv->value()));
  }
  return out;
}

// "cov5 wave64, kernarg 16 B (explicit 16 B), LDS 0 B, scratch 0 B, 31 VGPR + 0 AGPR, 16 SGPR, spills 0/0"
std::string HsacoLine(const tl::bundle::Variant* v) {
  const auto facts = HsacoFacts(v);
  if (facts.empty()) return "";
  auto get = [&](const char* key) {
    for (const auto& [k, val] : facts) {
      if (k == key) return val;
    }
    return std::string("?");
  };
  std::string agpr = get("agpr_count");
  return "cov" + get("code_object_version") + " wave" + get("wavefront_size") + ", kernarg " +
         get("kernarg_segment_size") + " B (explicit " + std::to_string(v->launch()->param_buffer_bytes()) +
         " B), LDS " + get("group_segment_fixed_size") + " B, scratch " + get("private_segment_fixed_size") + " B, " +
         get("vgpr_count") + " VGPR" + (agpr == "?" ? std::string() : " + " + agpr + " AGPR") + ", " +
         get("sgpr_count") + " SGPR, spills " + get("vgpr_spill_count") + "/" + get("sgpr_spill_count") +
         ", max workgroup " + get("max_flat_workgroup_size");
}

// The requirements a Vulkan variant is checked against, in one line:
// "SPIR-V 1.3 (Vulkan >= 1.1), 128 threads, workgroup memory 528 B, push constants 12 B, subgroup any, 2 storage buffers"
std::string VulkanLine(const tl::bundle::Variant* v) {
  if (v->backend() != tl::bundle::Backend::VULKAN) return "";
  const auto* r = v->requires_();
  const uint32_t w = r->isa_version(), d = r->min_driver();
  const std::string subgroup = r->subgroup_size() ? std::to_string(r->subgroup_size()) : std::string("any");
  const uint32_t bindings = v->launch()->vk_bindings() ? v->launch()->vk_bindings()->size() : 0;
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "SPIR-V %u.%u (Vulkan >= %u.%u), %u threads, workgroup memory %u B, push constants %u B, subgroup %s, "
                "%u storage buffers",
                w >> 16 & 0xFFu, w >> 8 & 0xFFu, d >> 22 & 0x7Fu, d >> 12 & 0x3FFu, r->threads_per_block(),
                r->shared_bytes(), r->push_constant_bytes(), subgroup.c_str(), bindings);
  return buf;
}

// The gemm lowering of a CUDA variant (build_attrs gpu.gemm_strategy and the
// gemm accumulator notes): "wgmma (C_f: wgmma f16)", "mma.sync (C_f: mma.sync
// f16)"; empty for variants without the attribute.
std::string GemmLine(const tl::bundle::Variant* v) {
  if (v->backend() != tl::bundle::Backend::CUDA || !v->build_attrs()) return "";
  std::string strategy, per, why;
  for (const auto* kv : *v->build_attrs()) {
    const std::string key = Str(kv->key()), val = Str(kv->value());
    if (key == "gpu.gemm_strategy") strategy = val;
    if (key.rfind("gpu.wgmma_note.", 0) == 0) why += (why.empty() ? "" : "; ") + val;
    const size_t at = val.find(": gemm accumulator layout ");
    if (key.rfind("gpu.note.", 0) == 0 && val.rfind("fragment ", 0) == 0 && at != std::string::npos) {
      // The instruction in parentheses after the layout (whose own text has some).
      size_t open = std::string::npos;
      for (const char* inst : {" (wgmma", " (mma.sync", " (SIMT FMA", " (mfma", " (wmma"}) open = std::min(open, val.find(inst, at));
      const size_t close = val.rfind(')');
      const std::string how = open != std::string::npos && close > open ? val.substr(open + 2, close - open - 2) : "SIMT FMA";
      per += (per.empty() ? "" : ", ") + val.substr(9, at - 9) + ": " + how;
    }
  }
  if (strategy.empty()) return "";
  return strategy + (per.empty() ? std::string() : " (" + per + ")") +
         (why.empty() ? std::string() : " [the wgmma lowering was not used: " + why + "]");
}

// CUDA TMA tensor maps the runtime encodes at launch (Launch.tensor_maps),
// one line each: "tensor map 0: A box 64x40 swizzle none, param slot @64 (128 B)".
std::vector<std::string> TensorMapLines(const tl::bundle::Kernel* k, const tl::bundle::Variant* v) {
  std::vector<std::string> out;
  const auto* maps = v->launch()->tensor_maps();
  for (uint32_t i = 0; maps && i < maps->size(); ++i) {
    const auto* m = maps->Get(i);
    std::string box;
    for (uint32_t d = 0; m->box() && d < m->box()->size(); ++d) box += (d ? "x" : "") + std::to_string(m->box()->Get(d));
    static const char* kSwizzle[] = {"none", "32B", "64B", "128B"};
    std::string line = "tensor map " + std::to_string(i) + ": " +
                       (m->param() < k->params()->size() ? Str(k->params()->Get(m->param())->name()) : std::string("?")) +
                       " box " + box + " swizzle " + (m->swizzle() < 4 ? kSwizzle[m->swizzle()] : "?");
    for (uint32_t s = 0; v->launch()->param_slots() && s < v->launch()->param_slots()->size(); ++s) {
      const auto* slot = v->launch()->param_slots()->Get(s);
      if (slot->tensor_map() == static_cast<int>(i)) {
        line += ", param slot @" + std::to_string(slot->offset()) + " (" + std::to_string(slot->size()) + " B)";
      }
    }
    out.push_back(line);
  }
  return out;
}

void PrintTable(const LoadedBundle& b) {
  const auto* m = b.view.manifest();
  const auto& h = b.view.header();
  std::printf("bundle     %s (%zu bytes)\n", b.path.c_str(), b.bytes.size());
  std::printf("format     %u.%u  manifest %" PRIu64 " bytes at %" PRIu64 ", payload region %" PRIu64 " bytes at %" PRIu64
              "\n",
              h.format_major, h.format_minor, h.manifest_size, h.manifest_offset, h.payload_size, h.payload_offset);
  if (m->bundle_id()) std::printf("bundle_id  %s\n", HexString(m->bundle_id()->data(), m->bundle_id()->size()).c_str());
  if (m->producer()) {
    std::printf("producer   %s %s%s%s\n", Str(m->producer()->tool()).c_str(), Str(m->producer()->tool_version()).c_str(),
                m->producer()->git_sha() ? " git " : "", Str(m->producer()->git_sha()).c_str());
  }
  std::string mu;
  for (uint32_t i = 0; m->must_understand() && i < m->must_understand()->size(); ++i) {
    mu += (i ? ", " : "") + Str(m->must_understand()->Get(i));
  }
  std::printf("requires   %s\n", mu.empty() ? "(nothing)" : mu.c_str());
  for (uint32_t i = 0; m->attrs() && i < m->attrs()->size(); ++i) {
    std::printf("attr       %s = %s\n", Str(m->attrs()->Get(i)->key()).c_str(), Str(m->attrs()->Get(i)->value()).c_str());
  }

  std::printf("\nkernels (%u)\n", m->kernels()->size());
  for (const auto* k : *m->kernels()) {
    std::printf("  %s", Signature(k).c_str());
    if (k->source_location()) std::printf("  [%s]", Str(k->source_location()).c_str());
    std::printf("\n    %-22s %-7s %-6s %-14s %5s %8s %10s %10s  %s\n", "variant", "backend", "code", "arch", "prio",
                "payload", "stored", "raw", "block / features");
    for (const auto* v : *k->variants()) {
      const auto* p = m->payloads()->Get(v->payload());
      const auto* blk = v->launch()->block();
      std::string block = std::to_string(blk->Get(0)) + "x" + std::to_string(blk->Get(1)) + "x" + std::to_string(blk->Get(2));
      const std::string features = Features(v->requires_());
      std::printf("    %-22s %-7s %-6s %-14s %5d %8s %10" PRIu64 " %10" PRIu64 "  %s%s%s\n", Str(v->id()).c_str(),
                  BackendName(v->backend()), CodeKindName(v->code_kind()), Str(v->requires_()->arch()).c_str(),
                  v->priority(), ("#" + std::to_string(v->payload())).c_str(), p->stored_size(), p->raw_size(),
                  block.c_str(), features.empty() ? "" : " ", features.c_str());
    if (const std::string hsaco = HsacoLine(v); !hsaco.empty()) std::printf("      hsaco: %s\n", hsaco.c_str());
    if (const std::string vk = VulkanLine(v); !vk.empty()) std::printf("      vulkan: %s\n", vk.c_str());
    if (const std::string gl = GemmLine(v); !gl.empty()) std::printf("      gemm: %s\n", gl.c_str());
    for (const std::string& tm : TensorMapLines(k, v)) std::printf("      %s\n", tm.c_str());
    }
  }

  std::printf("\npayloads (%u)\n", m->payloads()->size());
  std::printf("  %4s %10s %10s %10s  %-5s %-10s %-10s %s\n", "#", "offset", "stored", "raw", "comp", "stored_crc",
              "raw_crc", "sha256");
  uint64_t stored_total = 0, raw_total = 0;
  for (uint32_t i = 0; i < m->payloads()->size(); ++i) {
    const auto* p = m->payloads()->Get(i);
    stored_total += p->stored_size();
    raw_total += p->raw_size();
    const std::string hash =
        p->content_hash() ? HexString(p->content_hash()->data(), std::min<size_t>(8, p->content_hash()->size())) : "-";
    std::printf("  %4u %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %-5s 0x%08x 0x%08x %s\n", i, p->offset(),
                p->stored_size(), p->raw_size(), p->compression() == tl::bundle::Compression::ZSTD ? "zstd" : "none",
                p->stored_crc32c(), p->raw_crc32c(), hash.c_str());
  }
  std::printf("  total stored %" PRIu64 " bytes, raw %" PRIu64 " bytes\n", stored_total, raw_total);
}

void PrintJson(const LoadedBundle& b) {
  const auto* m = b.view.manifest();
  const auto& h = b.view.header();
  std::string o = "{";
  o += "\"path\":" + JsonEscape(b.path) + ",\"file_size\":" + std::to_string(b.bytes.size());
  o += ",\"format\":{\"major\":" + std::to_string(h.format_major) + ",\"minor\":" + std::to_string(h.format_minor) + "}";
  o += ",\"manifest\":{\"offset\":" + std::to_string(h.manifest_offset) + ",\"size\":" + std::to_string(h.manifest_size) +
       "}";
  o += ",\"payload_region\":{\"offset\":" + std::to_string(h.payload_offset) +
       ",\"size\":" + std::to_string(h.payload_size) + "}";
  o += ",\"bundle_id\":" +
       JsonEscape(m->bundle_id() ? HexString(m->bundle_id()->data(), m->bundle_id()->size()) : std::string());
  o += ",\"must_understand\":[";
  for (uint32_t i = 0; m->must_understand() && i < m->must_understand()->size(); ++i) {
    o += (i ? "," : "") + JsonEscape(Str(m->must_understand()->Get(i)));
  }
  o += "]";
  if (const auto* p = m->producer()) {
    o += ",\"producer\":{\"tool\":" + JsonEscape(Str(p->tool())) + ",\"tool_version\":" + JsonEscape(Str(p->tool_version())) +
         ",\"git_sha\":" + JsonEscape(Str(p->git_sha())) + ",\"options_hash\":" + JsonEscape(Str(p->options_hash())) +
         ",\"host\":" + JsonEscape(Str(p->host())) + "}";
  }
  o += ",\"attrs\":{";
  for (uint32_t i = 0; m->attrs() && i < m->attrs()->size(); ++i) {
    o += (i ? "," : "") + JsonEscape(Str(m->attrs()->Get(i)->key())) + ":" + JsonEscape(Str(m->attrs()->Get(i)->value()));
  }
  o += "},\"kernels\":[";
  for (uint32_t ki = 0; ki < m->kernels()->size(); ++ki) {
    const auto* k = m->kernels()->Get(ki);
    o += ki ? "," : "";
    o += "{\"name\":" + JsonEscape(Str(k->name())) + ",\"signature\":" + JsonEscape(Signature(k)) +
         ",\"abi_version\":" + std::to_string(k->abi_version()) +
         ",\"source_location\":" + JsonEscape(Str(k->source_location())) + ",\"symbols\":[";
    for (uint32_t s = 0; k->symbols() && s < k->symbols()->size(); ++s) {
      o += (s ? "," : "") + JsonEscape(Str(k->symbols()->Get(s)));
    }
    o += "],\"params\":[";
    for (uint32_t pi = 0; pi < k->params()->size(); ++pi) {
      const auto* p = k->params()->Get(pi);
      o += pi ? "," : "";
      o += "{\"name\":" + JsonEscape(Str(p->name())) + ",\"kind\":" +
           JsonEscape(p->kind() == tl::bundle::ParamKind::BUFFER ? "buffer" : "scalar") +
           ",\"dtype\":" + JsonEscape(DTypeName(p->dtype())) + ",\"access\":" + JsonEscape(AccessName(p->access())) +
           ",\"rank\":" + std::to_string(p->rank()) + ",\"ptr_alignment\":" + std::to_string(p->ptr_alignment()) +
           ",\"shape\":[";
      for (uint32_t d = 0; p->shape() && d < p->shape()->size(); ++d) {
        o += (d ? "," : "") + JsonEscape(DimText(k, p->shape()->Get(d)));
      }
      o += "]}";
    }
    o += "],\"variants\":[";
    for (uint32_t vi = 0; vi < k->variants()->size(); ++vi) {
      const auto* v = k->variants()->Get(vi);
      const auto* p = m->payloads()->Get(v->payload());
      o += vi ? "," : "";
      o += "{\"id\":" + JsonEscape(Str(v->id())) + ",\"backend\":" + JsonEscape(BackendName(v->backend())) +
           ",\"code_kind\":" + JsonEscape(CodeKindName(v->code_kind())) +
           ",\"arch\":" + JsonEscape(Str(v->requires_()->arch())) + ",\"features\":[";
      for (uint32_t f = 0; v->requires_()->features() && f < v->requires_()->features()->size(); ++f) {
        o += (f ? "," : "") + JsonEscape(Str(v->requires_()->features()->Get(f)));
      }
      o += "],\"priority\":" + std::to_string(v->priority()) + ",\"entry_point\":" + JsonEscape(Str(v->entry_point())) +
           ",\"payload\":" + std::to_string(v->payload()) + ",\"stored_size\":" + std::to_string(p->stored_size()) +
           ",\"raw_size\":" + std::to_string(p->raw_size()) + ",\"block\":[" +
           std::to_string(v->launch()->block()->Get(0)) + "," + std::to_string(v->launch()->block()->Get(1)) + "," +
           std::to_string(v->launch()->block()->Get(2)) + "]";
      if (v->backend() == tl::bundle::Backend::VULKAN) {
        const auto* r = v->requires_();
        o += ",\"vulkan\":{\"spirv_version\":" + std::to_string(r->isa_version()) +
             ",\"min_driver\":" + std::to_string(r->min_driver()) +
             ",\"threads_per_block\":" + std::to_string(r->threads_per_block()) +
             ",\"shared_bytes\":" + std::to_string(r->shared_bytes()) +
             ",\"push_constant_bytes\":" + std::to_string(r->push_constant_bytes()) +
             ",\"subgroup_size\":" + std::to_string(r->subgroup_size()) + ",\"bindings\":" +
             std::to_string(v->launch()->vk_bindings() ? v->launch()->vk_bindings()->size() : 0) + "}";
      }
      if (const auto* maps = v->launch()->tensor_maps(); maps && maps->size() > 0) {
        o += ",\"tensor_maps\":[";
        for (uint32_t t = 0; t < maps->size(); ++t) {
          const auto* tm = maps->Get(t);
          o += std::string(t ? "," : "") + "{\"param\":" + std::to_string(tm->param()) + ",\"box\":[";
          for (uint32_t d = 0; tm->box() && d < tm->box()->size(); ++d) {
            o += (d ? "," : "") + std::to_string(tm->box()->Get(d));
          }
          o += "],\"swizzle\":" + std::to_string(tm->swizzle()) + ",\"l2_promotion\":" + std::to_string(tm->l2_promotion());
          for (uint32_t sl = 0; v->launch()->param_slots() && sl < v->launch()->param_slots()->size(); ++sl) {
            const auto* slot = v->launch()->param_slots()->Get(sl);
            if (slot->tensor_map() == static_cast<int>(t)) o += ",\"slot_offset\":" + std::to_string(slot->offset());
          }
          o += "}";
        }
        o += "]";
      }
      if (const std::string gl = GemmLine(v); !gl.empty()) o += ",\"gemm\":" + JsonEscape(gl);
      if (const auto facts = HsacoFacts(v); !facts.empty()) {
        o += ",\"hsaco\":{";
        for (size_t f = 0; f < facts.size(); ++f) {
          o += (f ? "," : "") + JsonEscape(facts[f].first) + ":" + JsonEscape(facts[f].second);
        }
        o += "}";
      }
      o += "}";
    }
    o += "]}";
  }
  o += "],\"payloads\":[";
  for (uint32_t i = 0; i < m->payloads()->size(); ++i) {
    const auto* p = m->payloads()->Get(i);
    char crcs[64];
    std::snprintf(crcs, sizeof(crcs), "\"stored_crc32c\":\"%08x\",\"raw_crc32c\":\"%08x\"", p->stored_crc32c(),
                  p->raw_crc32c());
    o += (i ? "," : "") + std::string("{\"index\":") + std::to_string(i) + ",\"offset\":" + std::to_string(p->offset()) +
         ",\"stored_size\":" + std::to_string(p->stored_size()) + ",\"raw_size\":" + std::to_string(p->raw_size()) +
         ",\"compression\":" + JsonEscape(p->compression() == tl::bundle::Compression::ZSTD ? "zstd" : "none") + "," +
         crcs + ",\"sha256\":" +
         JsonEscape(p->content_hash() ? HexString(p->content_hash()->data(), p->content_hash()->size()) : "") + "}";
  }
  o += "]}\n";
  std::fputs(o.c_str(), stdout);
}

}  // namespace

int RunInspect(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {}, {"--json", "--markdown", "--help", "-h"}, &args, &error)) {
    return UsageError("inspect", error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1) return UsageError("inspect", "expected exactly one bundle");
  StatusOr<std::unique_ptr<LoadedBundle>> bundle = LoadBundle(args.positional[0]);
  if (!bundle.ok()) return Fail("inspect", bundle.status());
  if (args.Has("--markdown")) {
    PrintMarkdown(*bundle.value());
  } else if (args.Has("--json")) {
    PrintJson(*bundle.value());
  } else {
    PrintTable(*bundle.value());
  }
  return kExitOk;
}

}  // namespace tl::pack
