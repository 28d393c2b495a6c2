// Reading and verifying a .tlb bundle. See reader.h for the contract.
//
// Error classes (the README's "Error codes" section is the user-facing copy):
//   kDataLoss         bytes changed after they were written: truncation, any
//                     CRC mismatch, non-zero padding;
//   kInvalidArgument  self-consistent bytes that are not a valid bundle:
//                     bad signature, offsets, indices, enums, manifest;
//   kIncompatible     a valid bundle this reader is too old for: major
//                     version, flags, must_understand tokens;
//   kResourceExhausted a payload larger than ReadOptions allows;
//   kOutOfRange       a caller's payload index past the end.
#include "tilelang/formats/reader.h"

#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <string_view>

#include "tilelang/formats/checksum.h"

namespace tl::formats {
namespace {

using tl::bundle::Bundle;
using tl::bundle::Kernel;
using tl::bundle::Variant;

bool AddU64(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string_view View(const flatbuffers::String* s) {
  return s ? std::string_view(s->c_str(), s->size()) : std::string_view();
}

// Printable, bounded rendering of a name from untrusted bytes for messages.
std::string Quote(std::string_view s) {
  std::string out = "'";
  const size_t limit = 80;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > limit) out += "...";
  out += "'";
  return out;
}

template <typename T>
uint32_t Count(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0u;
}

// Validates one GridExpr program: known opcodes, immediates in range, and a
// stack that never underflows and ends with exactly one value.
Status CheckGridExpr(const tl::bundle::GridExpr* expr, const Kernel* kernel, const std::string& where) {
  const auto* code = expr->code();
  const uint32_t n = Count(code);
  if (n == 0) return MakeStatus(StatusCode::kInvalidArgument, "%s: empty expression", where.c_str());
  // flatbuffers 2.0.8's verifier checks a vector's length word (4-byte
  // aligned) but not that 8-byte elements are 8-byte aligned; reading a
  // misaligned [long] is undefined behaviour (found by fuzz_bundle_open).
  // The buffer start is 8-byte aligned (Open checks), so the address works.
  if (reinterpret_cast<uintptr_t>(code->data()) % alignof(int64_t) != 0) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: code vector is not 8-byte aligned", where.c_str());
  }
  const uint32_t num_symbols = Count(kernel->symbols());
  const uint32_t num_params = kernel->params()->size();
  int64_t depth = 0;
  for (uint32_t pc = 0; pc < n; ++pc) {
    const int64_t op = code->Get(pc);
    if (op >= 0 && op <= 2) {
      if (pc + 1 >= n) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: opcode %" PRId64 " at %u is missing its immediate",
                          where.c_str(), op, pc);
      }
      const int64_t imm = code->Get(++pc);
      if (op == 1 && (imm < 0 || imm >= num_symbols)) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: SYM %" PRId64 " out of range (kernel has %u symbols)",
                          where.c_str(), imm, num_symbols);
      }
      if (op == 2) {
        if (imm < 0 || imm >= num_params) {
          return MakeStatus(StatusCode::kInvalidArgument, "%s: PARAM %" PRId64 " out of range (kernel has %u params)",
                            where.c_str(), imm, num_params);
        }
        if (kernel->params()->Get(static_cast<uint32_t>(imm))->kind() != tl::bundle::ParamKind::SCALAR) {
          return MakeStatus(StatusCode::kInvalidArgument, "%s: PARAM %" PRId64 " is not a scalar parameter",
                            where.c_str(), imm);
        }
      }
      ++depth;
    } else if (op >= 3 && op <= 10) {
      if (depth < 2) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: opcode %" PRId64 " at %u underflows the stack",
                          where.c_str(), op, pc);
      }
      --depth;
    } else {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: unknown opcode %" PRId64 " at %u", where.c_str(), op, pc);
    }
  }
  if (depth != 1) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: leaves %" PRId64 " values on the stack, expected 1",
                      where.c_str(), depth);
  }
  return Status::Ok();
}

Status CheckParams(const Kernel* kernel, const std::string& where) {
  const uint32_t num_symbols = Count(kernel->symbols());
  const auto* params = kernel->params();
  for (uint32_t p = 0; p < params->size(); ++p) {
    const auto* param = params->Get(p);
    const std::string at = where + " param " + std::to_string(p) + " " + Quote(View(param->name()));
    if (param->kind() > tl::bundle::ParamKind::SCALAR) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: unknown kind %u", at.c_str(),
                        static_cast<unsigned>(param->kind()));
    }
    if (param->access() > tl::bundle::Access::READ_WRITE) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: unknown access %u", at.c_str(),
                        static_cast<unsigned>(param->access()));
    }
    if (const auto* dtype = param->dtype()) {
      const unsigned code = dtype->code();
      if (!(code == 0 || code == 1 || code == 2 || code == 4 || code == 6) || dtype->bits() == 0 ||
          dtype->lanes() == 0) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: invalid dtype (code %u, bits %u, lanes %u)", at.c_str(),
                          code, dtype->bits(), dtype->lanes());
      }
    }
    if (!IsPowerOfTwo(param->ptr_alignment())) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: ptr_alignment %u is not a power of two", at.c_str(),
                        param->ptr_alignment());
    }
    const uint32_t shape_len = Count(param->shape());
    if (param->kind() == tl::bundle::ParamKind::BUFFER) {
      if (param->rank() < 0 || static_cast<uint32_t>(param->rank()) != shape_len) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: rank %d but %u shape dims", at.c_str(), param->rank(),
                          shape_len);
      }
    } else if (shape_len != 0) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: a scalar has %u shape dims", at.c_str(), shape_len);
    }
    for (uint32_t d = 0; d < shape_len; ++d) {
      const auto* dim = param->shape()->Get(d);
      if (dim->symbol() < -1 || (dim->symbol() >= 0 && static_cast<uint32_t>(dim->symbol()) >= num_symbols)) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s dim %u: symbol index %d out of range (kernel has %u symbols)",
                          at.c_str(), d, dim->symbol(), num_symbols);
      }
      if (dim->static_size() < -1) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s dim %u: static_size %" PRId64 " is negative", at.c_str(), d,
                          dim->static_size());
      }
      if (dim->divisible_by() == 0) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s dim %u: divisible_by is 0", at.c_str(), d);
      }
    }
    const int bind = param->binds_symbol();
    if (bind < -1 || (bind >= 0 && static_cast<uint32_t>(bind) >= num_symbols)) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: binds_symbol %d out of range (kernel has %u symbols)",
                        at.c_str(), bind, num_symbols);
    }
  }
  return Status::Ok();
}

// -1 is allowed where the schema gives it a meaning ("no parameter").
Status CheckParamIndex(int64_t index, bool allow_minus_one, uint32_t num_params, const std::string& at) {
  if ((allow_minus_one && index == -1) || (index >= 0 && index < num_params)) return Status::Ok();
  return MakeStatus(StatusCode::kInvalidArgument, "%s: param index %" PRId64 " out of range (kernel has %u params)",
                    at.c_str(), index, num_params);
}

Status CheckVariant(const Kernel* kernel, const Variant* variant, uint32_t num_payloads, const std::string& at) {
  const uint32_t num_params = kernel->params()->size();
  if (variant->backend() > tl::bundle::Backend::CPU) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: unknown backend %u", at.c_str(),
                      static_cast<unsigned>(variant->backend()));
  }
  if (variant->code_kind() > tl::bundle::CodeKind::ELF) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: unknown code kind %u", at.c_str(),
                      static_cast<unsigned>(variant->code_kind()));
  }
  if (variant->payload() >= num_payloads) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: payload index %u out of range (bundle has %u payloads)",
                      at.c_str(), variant->payload(), num_payloads);
  }
  if (variant->entry_point()->size() == 0) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: empty entry_point", at.c_str());
  }
  for (uint32_t g = 0; g < Count(variant->guards()); ++g) {
    const auto* guard = variant->guards()->Get(g);
    TL_RETURN_IF_ERROR(CheckParamIndex(guard->param(), false, num_params, at + " guard " + std::to_string(g)));
    if (guard->op() > tl::bundle::GuardOp::GREATER_EQUAL) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s guard %u: unknown op %u", at.c_str(), g,
                        static_cast<unsigned>(guard->op()));
    }
  }
  const auto* launch = variant->launch();
  if (launch->block()->size() != 3) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: launch.block has %u values, expected 3", at.c_str(),
                      launch->block()->size());
  }
  for (uint32_t i = 0; i < 3; ++i) {
    if (launch->block()->Get(i) == 0) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: launch.block[%u] is 0", at.c_str(), i);
    }
  }
  const uint32_t grid_n = Count(launch->grid());
  if (grid_n != 0 && grid_n != 3) {
    return MakeStatus(StatusCode::kInvalidArgument, "%s: launch.grid has %u expressions, expected 0 or 3", at.c_str(),
                      grid_n);
  }
  for (uint32_t i = 0; i < grid_n; ++i) {
    TL_RETURN_IF_ERROR(CheckGridExpr(launch->grid()->Get(i), kernel, at + " launch.grid[" + std::to_string(i) + "]"));
  }
  for (uint32_t s = 0; s < Count(launch->param_slots()); ++s) {
    const auto* slot = launch->param_slots()->Get(s);
    const std::string slot_at = at + " param_slots[" + std::to_string(s) + "]";
    TL_RETURN_IF_ERROR(CheckParamIndex(slot->param(), true, num_params, slot_at));
    if (slot->symbol() != -1) {
      const uint32_t num_symbols = Count(kernel->symbols());
      if (slot->symbol() < 0 || static_cast<uint32_t>(slot->symbol()) >= num_symbols) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: symbol index %d out of range (kernel has %u symbols)",
                          slot_at.c_str(), slot->symbol(), num_symbols);
      }
      if (slot->param() != -1) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: names both param %d and symbol %d (at most one)",
                          slot_at.c_str(), slot->param(), slot->symbol());
      }
      if (slot->size() != 4 && slot->size() != 8) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: symbol slot of %u bytes, expected 4 or 8",
                          slot_at.c_str(), slot->size());
      }
    }
    if (slot->tensor_map() != -1) {
      const uint32_t num_maps = Count(launch->tensor_maps());
      if (slot->tensor_map() < 0 || static_cast<uint32_t>(slot->tensor_map()) >= num_maps) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: tensor_map index %d out of range (launch has %u tensor maps)",
                          slot_at.c_str(), slot->tensor_map(), num_maps);
      }
      if (slot->param() != -1 || slot->symbol() != -1) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: names tensor_map %d and param %d / symbol %d (only one)",
                          slot_at.c_str(), slot->tensor_map(), slot->param(), slot->symbol());
      }
      // ptxas aligns the 64-byte CUtensorMap relative to the constant-bank
      // address of the parameter area (sm_90: 0x210), so the offset within
      // the buffer is a multiple of 16 only (48 after three pointers).
      if (slot->size() != 128 || slot->offset() % 16 != 0) {
        return MakeStatus(StatusCode::kInvalidArgument,
                          "%s: tensor map slot at offset %u of %u bytes, expected 128 bytes at a multiple of 16",
                          slot_at.c_str(), slot->offset(), slot->size());
      }
    }
    const uint64_t end = uint64_t{slot->offset()} + slot->size();  // u32 + u32 cannot overflow u64
    if (end > launch->param_buffer_bytes()) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: [%u, %" PRIu64 ") exceeds param_buffer_bytes %u",
                        slot_at.c_str(), slot->offset(), end, launch->param_buffer_bytes());
    }
    if (slot->align() != 0 && (!IsPowerOfTwo(slot->align()) || slot->offset() % slot->align() != 0)) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: offset %u does not honour align %u", slot_at.c_str(),
                        slot->offset(), slot->align());
    }
  }
  for (uint32_t m = 0; m < Count(launch->tensor_maps()); ++m) {
    const auto* map = launch->tensor_maps()->Get(m);
    const std::string map_at = at + " tensor_maps[" + std::to_string(m) + "]";
    TL_RETURN_IF_ERROR(CheckParamIndex(map->param(), false, num_params, map_at));
    const auto* param = kernel->params()->Get(map->param());
    if (param->kind() != tl::bundle::ParamKind::BUFFER) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: parameter %u '%s' is not a buffer", map_at.c_str(),
                        map->param(), param->name()->c_str());
    }
    const uint32_t rank = Count(map->box());
    if (rank < 1 || rank > 5 || static_cast<int>(rank) != param->rank()) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: box has %u dims; parameter '%s' has rank %d (1 to 5)",
                        map_at.c_str(), rank, param->name()->c_str(), param->rank());
    }
    for (uint32_t d = 0; d < rank; ++d) {
      if (map->box()->Get(d) < 1 || map->box()->Get(d) > 256) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: box dim %u is %u (1 to 256)", map_at.c_str(), d,
                          map->box()->Get(d));
      }
    }
    if (map->swizzle() > 3 || map->l2_promotion() > 3) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: swizzle %u / l2_promotion %u (0 to 3)", map_at.c_str(),
                        map->swizzle(), map->l2_promotion());
    }
  }
  for (uint32_t b = 0; b < Count(launch->vk_bindings()); ++b) {
    TL_RETURN_IF_ERROR(CheckParamIndex(launch->vk_bindings()->Get(b)->param(), false, num_params,
                                       at + " vk_bindings[" + std::to_string(b) + "]"));
  }
  for (uint32_t r = 0; r < Count(launch->vk_push()); ++r) {
    const auto* range = launch->vk_push()->Get(r);
    const std::string range_at = at + " vk_push[" + std::to_string(r) + "]";
    TL_RETURN_IF_ERROR(CheckParamIndex(range->param(), true, num_params, range_at));
    const uint64_t end = uint64_t{range->offset()} + range->size();
    if (end > launch->vk_push_bytes()) {
      return MakeStatus(StatusCode::kInvalidArgument, "%s: [%u, %" PRIu64 ") exceeds vk_push_bytes %u",
                        range_at.c_str(), range->offset(), end, launch->vk_push_bytes());
    }
  }
  for (uint32_t c = 0; c < Count(launch->vk_spec()); ++c) {
    TL_RETURN_IF_ERROR(CheckParamIndex(launch->vk_spec()->Get(c)->param(), true, num_params,
                                       at + " vk_spec[" + std::to_string(c) + "]"));
  }
  return Status::Ok();
}

Status CheckKernels(const Bundle* manifest) {
  const auto* kernels = manifest->kernels();
  const uint32_t num_payloads = manifest->payloads()->size();
  for (uint32_t k = 0; k < kernels->size(); ++k) {
    const Kernel* kernel = kernels->Get(k);
    const std::string_view name = View(kernel->name());
    if (name.empty()) return MakeStatus(StatusCode::kInvalidArgument, "kernel %u: empty name", k);
    if (k > 0) {
      // FindKernel binary-searches, which silently misbehaves on unsorted
      // input, so order is a hard requirement rather than a convention.
      const std::string_view prev = View(kernels->Get(k - 1)->name());
      if (prev == name) {
        return MakeStatus(StatusCode::kInvalidArgument, "duplicate kernel name %s (kernels %u and %u)",
                          Quote(name).c_str(), k - 1, k);
      }
      if (prev > name) {
        return MakeStatus(StatusCode::kInvalidArgument, "kernels not sorted by name: %s (kernel %u) before %s (kernel %u)",
                          Quote(prev).c_str(), k - 1, Quote(name).c_str(), k);
      }
    }
    const std::string where = "kernel " + std::to_string(k) + " " + Quote(name);
    TL_RETURN_IF_ERROR(CheckParams(kernel, where));
    const auto* variants = kernel->variants();
    if (variants->size() == 0) return MakeStatus(StatusCode::kInvalidArgument, "%s: no variants", where.c_str());
    std::set<std::string_view> ids;
    for (uint32_t v = 0; v < variants->size(); ++v) {
      const Variant* variant = variants->Get(v);
      const std::string at = where + " variant " + std::to_string(v) + " " + Quote(View(variant->id()));
      if (!ids.insert(View(variant->id())).second) {
        return MakeStatus(StatusCode::kInvalidArgument, "%s: duplicate variant id", at.c_str());
      }
      TL_RETURN_IF_ERROR(CheckVariant(kernel, variant, num_payloads, at));
    }
  }
  return Status::Ok();
}

// Payload extents: aligned, inside the payload region, non-overlapping; and
// every byte of the region that no payload covers is zero, so that no byte of
// the file escapes both the CRCs and this check.
Status CheckPayloads(const Bundle* manifest, std::span<const uint8_t> region) {
  const auto* payloads = manifest->payloads();
  const uint32_t n = payloads->size();
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) {
    const auto* p = payloads->Get(i);
    order[i] = i;
    if (p->compression() > tl::bundle::Compression::ZSTD) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: unknown compression %u", i,
                        static_cast<unsigned>(p->compression()));
    }
    if (p->offset() % kPayloadAlignment != 0) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: offset %" PRIu64 " is not %" PRIu64 "-byte aligned",
                        i, p->offset(), kPayloadAlignment);
    }
    uint64_t end = 0;
    if (!AddU64(p->offset(), p->stored_size(), &end)) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: offset %" PRIu64 " + stored_size %" PRIu64
                        " overflows u64", i, p->offset(), p->stored_size());
    }
    if (end > region.size()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "payload %u: [%" PRIu64 ", %" PRIu64 ") lies outside the payload region of %zu bytes", i,
                        p->offset(), end, region.size());
    }
    if (p->compression() == tl::bundle::Compression::NONE && p->stored_size() != p->raw_size()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "payload %u: uncompressed but stored_size %" PRIu64 " != raw_size %" PRIu64, i,
                        p->stored_size(), p->raw_size());
    }
    if (p->content_hash() && p->content_hash()->size() != 32) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: content_hash has %u bytes, expected 32", i,
                        p->content_hash()->size());
    }
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const uint64_t oa = payloads->Get(a)->offset(), ob = payloads->Get(b)->offset();
    return oa != ob ? oa < ob : a < b;
  });
  uint64_t cursor = 0;  // end of covered bytes so far
  uint32_t prev = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const auto* p = payloads->Get(order[k]);
    if (p->stored_size() == 0) continue;  // an empty extent overlaps nothing
    if (p->offset() < cursor) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "payload %u at [%" PRIu64 ", %" PRIu64 ") overlaps payload %u ending at %" PRIu64, order[k],
                        p->offset(), p->offset() + p->stored_size(), prev, cursor);
    }
    for (uint64_t b = cursor; b < p->offset(); ++b) {
      if (region[b] != 0) {
        return MakeStatus(StatusCode::kDataLoss, "payload region byte %" PRIu64 " (padding) is 0x%02x, expected 0", b,
                          region[b]);
      }
    }
    cursor = p->offset() + p->stored_size();
    prev = order[k];
  }
  for (uint64_t b = cursor; b < region.size(); ++b) {
    if (region[b] != 0) {
      return MakeStatus(StatusCode::kDataLoss, "payload region byte %" PRIu64 " (padding) is 0x%02x, expected 0", b,
                        region[b]);
    }
  }
  return Status::Ok();
}

Status CheckManifestHeaderAgreement(const Bundle* manifest, const HeaderFields& header) {
  if (manifest->format_major() != header.format_major || manifest->format_minor() != header.format_minor) {
    return MakeStatus(StatusCode::kInvalidArgument, "manifest says format %u.%u, header says %u.%u",
                      manifest->format_major(), manifest->format_minor(), header.format_major, header.format_minor);
  }
  if (manifest->bundle_id() && manifest->bundle_id()->size() != 16) {
    return MakeStatus(StatusCode::kInvalidArgument, "bundle_id has %u bytes, expected 16", manifest->bundle_id()->size());
  }
  for (uint32_t i = 0; i < Count(manifest->must_understand()); ++i) {
    const std::string_view token = View(manifest->must_understand()->Get(i));
    bool known = false;
    for (const char* k : kKnownMustUnderstand) known = known || token == k;
    if (!known) {
      std::string known_list;
      for (const char* k : kKnownMustUnderstand) known_list += (known_list.empty() ? "" : ", ") + std::string(k);
      return MakeStatus(StatusCode::kIncompatible,
                        "bundle requires feature %s (must_understand[%u]) that this reader does not understand "
                        "(known: %s)",
                        Quote(token).c_str(), i, known_list.c_str());
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<BundleView> BundleView::Open(std::span<const uint8_t> bytes, const ReadOptions& options) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % kManifestAlignment != 0) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "bundle bytes must start at an %" PRIu64 "-byte aligned address (address %% %" PRIu64 " = %zu)",
                      kManifestAlignment, kManifestAlignment,
                      static_cast<size_t>(reinterpret_cast<uintptr_t>(bytes.data()) % kManifestAlignment));
  }
  StatusOr<HeaderFields> header = ParseHeader(bytes);
  if (!header.ok()) return header.status();
  const HeaderFields& h = header.value();

  // ParseHeader proved manifest_offset + manifest_size <= payload_offset <= size.
  const auto manifest_bytes = bytes.subspan(h.manifest_offset, h.manifest_size);
  const uint32_t manifest_crc = Crc32c(manifest_bytes);
  if (manifest_crc != h.manifest_crc32c) {
    return MakeStatus(StatusCode::kDataLoss,
                      "manifest CRC32C mismatch: header says 0x%08x, computed 0x%08x over [%" PRIu64 ", %" PRIu64 ")",
                      h.manifest_crc32c, manifest_crc, h.manifest_offset, h.manifest_offset + h.manifest_size);
  }
  for (uint64_t b = h.manifest_offset + h.manifest_size; b < h.payload_offset; ++b) {
    if (bytes[b] != 0) {
      return MakeStatus(StatusCode::kDataLoss, "padding byte %" PRIu64 " before the payload region is 0x%02x, expected 0",
                        b, bytes[b]);
    }
  }

  // Untrusted flatbuffer: bounded depth, tables bounded by what the bytes can
  // hold (a table needs at least a 4-byte vtable offset), alignment checked.
  flatbuffers::Verifier::Options verifier_options;
  verifier_options.max_depth = 64;
  verifier_options.max_tables = static_cast<flatbuffers::uoffset_t>(h.manifest_size / 4 + 1);
  verifier_options.check_alignment = true;
  if (manifest_bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(manifest_bytes.data(), kManifestIdentifier)) {
    return MakeStatus(StatusCode::kInvalidArgument, "manifest lacks the flatbuffers file identifier \"%s\"",
                      kManifestIdentifier);
  }
  flatbuffers::Verifier verifier(manifest_bytes.data(), manifest_bytes.size(), verifier_options);
  if (!tl::bundle::VerifyBundleBuffer(verifier)) {
    return MakeStatus(StatusCode::kInvalidArgument,
                      "manifest (%" PRIu64 " bytes at offset %" PRIu64 ") fails flatbuffers verification", h.manifest_size,
                      h.manifest_offset);
  }
  const Bundle* manifest = tl::bundle::GetBundle(manifest_bytes.data());
  TL_RETURN_IF_ERROR(CheckManifestHeaderAgreement(manifest, h));
  TL_RETURN_IF_ERROR(CheckPayloads(manifest, bytes.subspan(h.payload_offset, h.payload_size)));
  TL_RETURN_IF_ERROR(CheckKernels(manifest));

  BundleView view;
  view.bytes_ = bytes;
  view.header_ = h;
  view.manifest_ = manifest;
  view.options_ = options;
  return view;
}

StatusOr<std::vector<uint8_t>> BundleView::ReadPayload(uint32_t payload_index) const {
  if (!manifest_) return MakeStatus(StatusCode::kFailedPrecondition, "ReadPayload on a BundleView that is not open");
  const uint32_t n = manifest_->payloads()->size();
  if (payload_index >= n) {
    return MakeStatus(StatusCode::kOutOfRange, "payload index %u out of range (bundle has %u payloads)", payload_index, n);
  }
  const auto* p = manifest_->payloads()->Get(payload_index);
  if (p->raw_size() > options_.max_payload_raw_bytes) {
    return MakeStatus(StatusCode::kResourceExhausted, "payload %u: raw_size %" PRIu64 " exceeds the limit of %" PRIu64
                      " bytes", payload_index, p->raw_size(), options_.max_payload_raw_bytes);
  }
  // Open proved the extent lies inside the payload region.
  const auto stored = bytes_.subspan(header_.payload_offset + p->offset(), p->stored_size());
  const uint32_t stored_crc = Crc32c(stored);
  if (stored_crc != p->stored_crc32c()) {
    return MakeStatus(StatusCode::kDataLoss, "payload %u: stored CRC32C mismatch: manifest says 0x%08x, computed 0x%08x "
                      "over %" PRIu64 " bytes at payload offset %" PRIu64, payload_index, p->stored_crc32c(), stored_crc,
                      p->stored_size(), p->offset());
  }
  std::vector<uint8_t> raw;
  if (p->compression() == tl::bundle::Compression::NONE) {
    raw.assign(stored.begin(), stored.end());
  } else {
    // Sizes are checked before anything is allocated: a frame must declare
    // its content size, agree with the manifest, and be the whole extent.
    const unsigned long long frame_size = ZSTD_getFrameContentSize(stored.data(), stored.size());
    if (frame_size == ZSTD_CONTENTSIZE_ERROR) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: not a zstd frame (%" PRIu64 " stored bytes)",
                        payload_index, p->stored_size());
    }
    if (frame_size == ZSTD_CONTENTSIZE_UNKNOWN) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: zstd frame does not declare its content size",
                        payload_index);
    }
    if (frame_size != p->raw_size()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "payload %u: zstd frame content size %llu differs from the manifest raw_size %" PRIu64,
                        payload_index, frame_size, p->raw_size());
    }
    const size_t frame_bytes = ZSTD_findFrameCompressedSize(stored.data(), stored.size());
    if (ZSTD_isError(frame_bytes) || frame_bytes != stored.size()) {
      return MakeStatus(StatusCode::kInvalidArgument,
                        "payload %u: zstd frame spans %s of the %" PRIu64 " stored bytes", payload_index,
                        ZSTD_isError(frame_bytes) ? ZSTD_getErrorName(frame_bytes)
                                                  : std::to_string(frame_bytes).c_str(),
                        p->stored_size());
    }
    if (p->raw_size() > SIZE_MAX) {
      return MakeStatus(StatusCode::kResourceExhausted, "payload %u: raw_size %" PRIu64 " exceeds SIZE_MAX",
                        payload_index, p->raw_size());
    }
    raw.resize(static_cast<size_t>(p->raw_size()));
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    if (!dctx) return MakeStatus(StatusCode::kResourceExhausted, "payload %u: cannot allocate a zstd context", payload_index);
    // Bound the window too, so a frame cannot ask for more memory than its
    // content (plus zstd's minimum) needs.
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, 31);
    const size_t got = ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), stored.data(), stored.size());
    ZSTD_freeDCtx(dctx);
    if (ZSTD_isError(got)) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: zstd decompression failed: %s", payload_index,
                        ZSTD_getErrorName(got));
    }
    if (got != raw.size()) {
      return MakeStatus(StatusCode::kInvalidArgument, "payload %u: zstd produced %zu bytes, expected %" PRIu64,
                        payload_index, got, p->raw_size());
    }
  }
  const uint32_t raw_crc = Crc32c(raw);
  if (raw_crc != p->raw_crc32c()) {
    return MakeStatus(StatusCode::kDataLoss,
                      "payload %u: raw CRC32C mismatch: manifest says 0x%08x, computed 0x%08x over %" PRIu64 " bytes",
                      payload_index, p->raw_crc32c(), raw_crc, p->raw_size());
  }
  return raw;
}

Status BundleView::VerifyAllPayloads() const {
  if (!manifest_) return MakeStatus(StatusCode::kFailedPrecondition, "VerifyAllPayloads on a BundleView that is not open");
  for (uint32_t i = 0; i < manifest_->payloads()->size(); ++i) {
    StatusOr<std::vector<uint8_t>> raw = ReadPayload(i);
    if (!raw.ok()) return raw.status();
  }
  return Status::Ok();
}

const tl::bundle::Kernel* BundleView::FindKernel(std::string_view name) const {
  if (!manifest_) return nullptr;
  const auto* kernels = manifest_->kernels();
  uint32_t lo = 0, hi = kernels->size();
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const std::string_view mid_name = View(kernels->Get(mid)->name());
    if (mid_name == name) return kernels->Get(mid);
    if (mid_name < name) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return nullptr;
}

StatusOr<std::vector<uint8_t>> ReadFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno;
    return MakeStatus(err == ENOENT ? StatusCode::kNotFound
                      : err == EACCES ? StatusCode::kPermissionDenied
                                      : StatusCode::kUnavailable,
                      "%s: cannot open: %s", path.c_str(), std::strerror(err));
  }
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.insert(bytes.end(), buf, buf + got);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    return MakeStatus(StatusCode::kUnavailable, "%s: read error after %zu bytes: %s", path.c_str(), bytes.size(),
                      std::strerror(err));
  }
  return bytes;
}

}  // namespace tl::formats
