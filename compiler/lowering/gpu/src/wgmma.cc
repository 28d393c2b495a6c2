// wgmma operand geometry and descriptors: see wgmma.h.
#include "tilelang/lowering/gpu/wgmma.h"

#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {

int64_t WgmmaK(MmaKind k) { return k == MmaKind::kI8 ? 32 : 16; }

int WgmmaSwizzleMode(SmemSwizzle s) {
  switch (s) {
    case SmemSwizzle::kNone: return 0;
    case SmemSwizzle::k128B: return 1;
    case SmemSwizzle::k64B: return 2;
    case SmemSwizzle::k32B: return 3;
  }
  return 0;
}

uint64_t WgmmaDescriptor(uint32_t addr, int64_t lbo, int64_t sbo, SmemSwizzle s) {
  uint64_t d = (static_cast<uint64_t>(addr) & 0x3FFFF) >> 4;
  d |= ((static_cast<uint64_t>(lbo) >> 4) & 0x3FFF) << 16;
  d |= ((static_cast<uint64_t>(sbo) >> 4) & 0x3FFF) << 32;
  d |= static_cast<uint64_t>(WgmmaSwizzleMode(s)) << 62;
  return d;
}

std::optional<SmemSwizzle> WgmmaOperandSwizzle(int64_t rows, int64_t cols, int64_t elem_bytes) {
  if (rows <= 0 || rows % 8 != 0 || cols <= 0) return std::nullopt;
  const int64_t row_bytes = cols * elem_bytes;
  for (SmemSwizzle s : {SmemSwizzle::k128B, SmemSwizzle::k64B, SmemSwizzle::k32B}) {
    if (row_bytes % SwizzleRowBytes(s) == 0) return s;
  }
  return std::nullopt;
}

int64_t WgmmaInstrN(int64_t n) {
  if (n <= 0 || n % 8 != 0) return 0;
  if (n <= 256) return n;
  for (int64_t i = 256; i >= 8; i -= 8) {
    if (n % i == 0) return i;
  }
  return 0;
}

std::string WgmmaOperandProblem(int64_t rows, int64_t cols, int64_t elem_bytes, std::optional<int64_t> r0,
                                std::optional<int64_t> c0, bool k_major, int64_t tile, int64_t tiles) {
  const std::optional<SmemSwizzle> s = WgmmaOperandSwizzle(rows, cols, elem_bytes);
  if (!s) {
    return "buffer tile " + std::to_string(rows) + "x" + std::to_string(cols) +
           " has no swizzled layout (rows a multiple of 8, rows of a multiple of 32 bytes)";
  }
  if (!r0 || !c0) return "operand region starts are not constant";
  const int64_t per_row = SwizzleRowBytes(*s) / elem_bytes;
  if (k_major) {  // rows: M/N (8-row atoms), columns: k (32-byte steps inside a panel)
    if (*r0 % 8 != 0 || (*c0 * elem_bytes) % 32 != 0) {
      return "K-major operand starts at (" + std::to_string(*r0) + ", " + std::to_string(*c0) +
             "), not at a multiple of 8 rows and 32 bytes";
    }
    return "";
  }
  // MN-major: rows are k (16-row steps), columns M/N: each tile starts a panel.
  if (*r0 % 8 != 0 || *c0 % per_row != 0) {
    return "MN-major operand starts at (" + std::to_string(*r0) + ", " + std::to_string(*c0) +
           "), not at a multiple of 8 rows and of the " + std::to_string(per_row) + "-element panel";
  }
  if (tile % per_row != 0 && !(tiles == 1 && tile <= per_row)) {
    return "MN-major tiles of " + std::to_string(tile) + " do not start panels of " + std::to_string(per_row);
  }
  return "";
}

void WgmmaStrides(int64_t rows, int64_t elem_bytes, SmemSwizzle s, bool k_major, int64_t* lbo, int64_t* sbo) {
  (void)elem_bytes;
  const int64_t w = SwizzleRowBytes(s);
  *sbo = 8 * w;
  *lbo = k_major ? 16 : rows * w;  // K-major swizzled: unused (one 16-byte unit, as CUTLASS encodes it)
}

bool HasWgmma(const SBlock& b) {
  for (const SStmt& s : b) {
    if (std::holds_alternative<SWgmma>(s.node)) return true;
    if (const auto* f = std::get_if<SFor>(&s.node); f && HasWgmma(f->body)) return true;
    if (const auto* i = std::get_if<SIf>(&s.node); i && (HasWgmma(i->then_body) || HasWgmma(i->else_body))) return true;
    if (const auto* w = std::get_if<SWarpRoles>(&s.node); w && (HasWgmma(w->producer) || HasWgmma(w->consumer))) return true;
  }
  return false;
}

const char* GemmStrategyName(GemmStrategy s) {
  switch (s) {
    case GemmStrategy::kSimtFma: return "simt";
    case GemmStrategy::kMmaSync: return "mma.sync";
    case GemmStrategy::kMfma: return "mfma";
    case GemmStrategy::kWmma: return "wmma";
    case GemmStrategy::kWgmma: return "wgmma";
  }
  return "?";
}

}  // namespace tl::gpu
