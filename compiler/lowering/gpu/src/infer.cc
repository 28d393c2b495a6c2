// InferGpuLayouts and LoopLayout: see lower.h for the rules.
#include <functional>
#include <optional>

#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/lowering/gpu/wgmma.h"
#include "tilelang/passes/passes.h"

namespace tl::gpu {
namespace {

std::vector<int64_t> ConstShape(const std::vector<ir::Expr>& shape) {
  std::vector<int64_t> out;
  for (const ir::Expr& d : shape) out.push_back(ir::FoldInt(d).value_or(-1));
  return out;
}

bool IsFragment(const ir::SymbolTable& syms, const std::string& name) {
  auto it = syms.find(name);
  return it != syms.end() && it->second.kind == ir::SymbolInfo::Kind::kAlloc &&
         it->second.scope == ir::MemScope::kFragment;
}

// The indices as plain names, or empty when any is not a VarRef.
std::vector<std::string> IndexNames(const std::vector<ir::Expr>& idx) {
  std::vector<std::string> out;
  for (const ir::Expr& e : idx) {
    const auto* v = ir::As<ir::VarRef>(e);
    if (!v) return {};
    out.push_back(v->name);
  }
  return out;
}

// Whole-buffer region (after MakeRegionsExplicit: every start 0, extent = dim).
bool IsWhole(const ir::Region& r, const std::vector<int64_t>& shape) {
  if (r.dims.empty()) return true;
  if (r.dims.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (ir::FoldInt(r.dims[i].start) != 0) return false;
    const int64_t ext = r.dims[i].extent ? ir::FoldInt(*r.dims[i].extent).value_or(-1) : 1;
    if (ext != shape[i]) return false;
  }
  return true;
}

enum class Pattern { kFull, kRow, kOther };

// How a Parallel loop touches fragment `buf` with indices `idx`.
Pattern Classify(const ir::Parallel& p, const std::vector<ir::Expr>& idx, const std::vector<int64_t>& shape) {
  const std::vector<std::string> names = IndexNames(idx);
  if (names.size() != idx.size() || idx.empty()) return Pattern::kOther;
  std::vector<int64_t> ext = ConstShape(p.extents);
  if (names == p.vars && shape == ext) return Pattern::kFull;
  if (p.vars.size() >= 2 && names.size() == p.vars.size() - 1 &&
      std::equal(names.begin(), names.end(), p.vars.begin()) &&
      std::vector<int64_t>(ext.begin(), ext.end() - 1) == shape) {
    return Pattern::kRow;
  }
  return Pattern::kOther;
}

struct Access {
  std::string buffer;
  std::vector<ir::Expr> indices;
  bool write = false;
};

// Every fragment access inside a Parallel loop (nested statements included).
void ParallelAccesses(const ir::Block& body, const ir::SymbolTable& syms, std::vector<Access>* out) {
  ir::ForEachStmt(body, [&](const ir::Stmt& s) {
    ir::ForEachExprOf(s, [&](const ir::Expr& e) {
      ir::WalkExpr(e, [&](const ir::Expr& x) {
        if (const auto* l = ir::As<ir::Load>(x)) {
          if (IsFragment(syms, l->buffer)) out->push_back({l->buffer, l->indices, false});
        }
      });
    });
    if (const auto* st = ir::As<ir::Store>(s)) {
      if (IsFragment(syms, st->buffer)) out->push_back({st->buffer, st->indices, true});
    }
  });
}

}  // namespace

FragmentLayout LoopLayout(const ir::Parallel& p, const ir::SymbolTable& syms, const GpuLayoutPlan& plan) {
  std::vector<Access> acc;
  ParallelAccesses(p.body, syms, &acc);
  const std::vector<int64_t> ext = ConstShape(p.extents);
  auto layout_of = [&](const std::string& b) -> const FragmentLayout* {
    auto it = plan.layouts.find(b);
    return it == plan.layouts.end() ? nullptr : &it->second;
  };
  for (int pass = 0; pass < 2; ++pass) {  // writes first, then reads
    for (const Access& a : acc) {
      if (a.write != (pass == 0)) continue;
      const FragmentLayout* l = layout_of(a.buffer);
      if (l && Classify(p, a.indices, ConstShape(syms.at(a.buffer).shape)) == Pattern::kFull) return *l;
    }
  }
  for (const Access& a : acc) {
    const FragmentLayout* l = layout_of(a.buffer);
    if (!l || !l->replicated) continue;
    if (Classify(p, a.indices, ConstShape(syms.at(a.buffer).shape)) != Pattern::kRow) continue;
    FragmentLayout loop;  // rows as the row vector's, columns over the same lanes
    loop.shape = ext;
    loop.threads = plan.threads;
    RowsCols(ext, &loop.rows, &loop.cols);
    if (loop.rows != l->rows) continue;
    loop.R = l->R;
    loop.H = l->H;
    loop.Hp = l->Hp;
    loop.g = l->g;
    loop.v = 1;
    return loop;
  }
  return DefaultLayout(ext, plan.threads);
}

// The tensor-core instruction for gemm `g` under kMmaSync, or nullopt (SIMT
// FMA) with the reason in *why.
std::optional<MmaKind> MmaFor(const ir::Gemm& g, const ir::SymbolTable& syms, int64_t threads, bool tf32,
                              GemmStrategy strategy, std::string* why, bool sm75 = false) {
  const bool amd = strategy == GemmStrategy::kMfma || strategy == GemmStrategy::kWmma;
  const MatrixCore core = strategy == GemmStrategy::kWmma ? MatrixCore::kWmma : MatrixCore::kMfma;
  const std::string inst = amd ? MatrixCoreName(core) : "mma.sync";
  const ir::SymbolInfo& a = syms.at(g.a.buffer);
  const ir::SymbolInfo& b = syms.at(g.b.buffer);
  const ir::SymbolInfo& c = syms.at(g.c.buffer);
  if (a.kind != ir::SymbolInfo::Kind::kAlloc || b.kind != ir::SymbolInfo::Kind::kAlloc ||
      a.scope == ir::MemScope::kGlobal || b.scope == ir::MemScope::kGlobal ||
      a.scope == ir::MemScope::kLocal || b.scope == ir::MemScope::kLocal) {
    *why = "operands are not shared memory or fragments";
    return std::nullopt;
  }
  std::optional<MmaKind> kind;
  // A 16-bit float accumulator (upstream's accum_dtype="float16") uses the
  // same f32-accumulating instruction: the printers carry f16/bf16 values in
  // f32 registers anyway, so C keeps one f32 register per element and the
  // MmaAccumulatorLayout family unchanged (the .f16.f16.f16.f16 form would
  // pack two elements per register, a second layout). The accumulator is
  // rounded to f16 where it is stored or written by other code, not after
  // every mma: at least as precise as the hardware's f16 accumulation, at
  // the same mma.sync rate on sm_80/sm_90 (only the register count differs).
  const bool acc16 = c.dtype == a.dtype || c.dtype == ir::DType::kF32;
  if (a.dtype == ir::DType::kF16 && b.dtype == ir::DType::kF16 && acc16) kind = MmaKind::kF16;
  if (a.dtype == ir::DType::kBF16 && b.dtype == ir::DType::kBF16 && acc16) kind = MmaKind::kBF16;
  if (!amd && tf32 && a.dtype == ir::DType::kF32 && b.dtype == ir::DType::kF32 && c.dtype == ir::DType::kF32) {
    kind = MmaKind::kTF32;
  }
  if (a.dtype == ir::DType::kI8 && b.dtype == ir::DType::kI8 && c.dtype == ir::DType::kI32) kind = MmaKind::kI8;
  if (!amd && sm75 && kind && *kind != MmaKind::kF16 && *kind != MmaKind::kI8) {
    *why = "no " + inst + " on sm_75 for " + ir::DTypeName(a.dtype) + " x " + ir::DTypeName(b.dtype) + " -> " +
           ir::DTypeName(c.dtype) + " (Turing's atoms: f16 m16n8k8, s8 m8n8k16)";
    return std::nullopt;
  }
  if (!kind) {
    *why = "no " + inst + " for " + ir::DTypeName(a.dtype) + " x " + ir::DTypeName(b.dtype) + " -> " +
           ir::DTypeName(c.dtype);
    return std::nullopt;
  }
  const std::vector<int64_t> cs = ConstShape(c.shape);
  StatusOr<passes::RegionInfo> ra = passes::ResolveRegion(g.a, syms);
  if (cs.size() != 2 || !ra.ok() || ra->extents.size() < 2) {
    *why = "accumulator or operand is not 2-D";
    return std::nullopt;
  }
  const int64_t k = g.trans_a ? ra->extents[ra->extents.size() - 2] : ra->extents.back();
  if (amd) {
    const int64_t step = AmdMatrixK(core, *kind);
    if (!AmdMatrixAccumulatorFits(cs[0], cs[1], threads, MatrixCoreWave(core)) || k % step != 0) {
      *why = "shape " + std::to_string(cs[0]) + "x" + std::to_string(cs[1]) + "x" + std::to_string(k) + " over " +
             std::to_string(threads) + " threads does not fit " + inst + " (threads a multiple of " +
             std::to_string(MatrixCoreWave(core)) + ", M of " + std::to_string(MatrixCoreRegs(core) * threads / 16) +
             ", N of 16, K of " + std::to_string(step) + ")";
      return std::nullopt;
    }
    return kind;
  }
  const int64_t kstep = MmaStepK(*kind, sm75);
  if (!MmaAccumulatorFits(cs[0], cs[1], threads) || k % kstep != 0) {
    *why = "shape " + std::to_string(cs[0]) + "x" + std::to_string(cs[1]) + "x" + std::to_string(k) + " over " +
           std::to_string(threads) + " threads does not fit (no warp grid wm x wn with M a multiple of 16 wm and N of 8 wn;"
           " K a multiple of " +
           std::to_string(kstep) + ")";
    return std::nullopt;
  }
  return kind;
}

// Whether gemm `g` fits wgmma (kWgmma; see lower.h), with the swizzles of
// its two operand buffers; else nullopt with the reason in *why.
// With `a_regs` A is a register fragment (wgmma's register operand A): K-major
// only (the register form has no transpose of A), a whole [M, K] fragment;
// its layout is then WgmmaAccumulatorLayout(M, K) (see InferOnce).
struct WgmmaFit {
  MmaKind kind;
  SmemSwizzle a, b;
  bool a_regs = false;
  int64_t m = 0, k = 0;
};
std::optional<WgmmaFit> WgmmaFor(const ir::Gemm& g, const ir::SymbolTable& syms, int64_t threads, std::string* why,
                                 bool a_regs = false) {
  const ir::SymbolInfo& a = syms.at(g.a.buffer);
  const ir::SymbolInfo& b = syms.at(g.b.buffer);
  const ir::SymbolInfo& c = syms.at(g.c.buffer);
  auto smem = [](const ir::SymbolInfo& x) {
    return x.kind == ir::SymbolInfo::Kind::kAlloc && (x.scope == ir::MemScope::kShared || x.scope == ir::MemScope::kFragment);
  };
  if (!smem(a) || !smem(b)) {
    *why = "operands are not shared memory or fragments";
    return std::nullopt;
  }
  const bool acc_ok = c.dtype == ir::DType::kF32 || c.dtype == a.dtype;
  std::optional<MmaKind> kind;
  if (a.dtype == ir::DType::kF16 && b.dtype == ir::DType::kF16 && acc_ok) kind = MmaKind::kF16;
  if (a.dtype == ir::DType::kBF16 && b.dtype == ir::DType::kBF16 && acc_ok) kind = MmaKind::kBF16;
  if (a.dtype == ir::DType::kI8 && b.dtype == ir::DType::kI8 && c.dtype == ir::DType::kI32) {
    // s8 wgmma (m64nNk32) has no transpose: both operands K-major.
    if (g.trans_a || !g.trans_b) {
      *why = "i8 wgmma needs K-major operands (A[M, K], B[N, K] with trans_b)";
      return std::nullopt;
    }
    kind = MmaKind::kI8;
  }
  if (!kind) {
    *why = std::string("no wgmma for ") + ir::DTypeName(a.dtype) + " x " + ir::DTypeName(b.dtype) + " -> " + ir::DTypeName(c.dtype);
    return std::nullopt;
  }
  if (a_regs && (*kind == MmaKind::kI8 || g.trans_a || a.shape.size() != 2)) {
    *why = *kind == MmaKind::kI8 ? "i8 register operand A is not supported"
           : g.trans_a           ? "transpose_A (wgmma's register operand A is K-major only)"
                                 : "A is not a 2-D fragment";
    return std::nullopt;
  }
  const std::vector<int64_t> cs = ConstShape(c.shape), as = ConstShape(a.shape), bs = ConstShape(b.shape);
  StatusOr<passes::RegionInfo> ra = passes::ResolveRegion(g.a, syms), rb = passes::ResolveRegion(g.b, syms);
  if (cs.size() != 2 || !ra.ok() || !rb.ok() || as.size() < 2 || bs.size() < 2 || ra->extents.size() != as.size() ||
      rb->extents.size() != bs.size()) {
    *why = "accumulator or operand is not 2-D";
    return std::nullopt;
  }
  for (const std::vector<int64_t>* sh : {&as, &bs}) {
    for (int64_t d : *sh) {
      if (d <= 0) {
        *why = "operand shape is not static";
        return std::nullopt;
      }
    }
  }
  for (const passes::RegionInfo* r : {&*ra, &*rb}) {
    for (size_t d = 0; d + 2 < r->extents.size(); ++d) {
      if (r->extents[d] != 1) {
        *why = "operand region " + r->buffer + " is not a 2-D slice";
        return std::nullopt;
      }
    }
  }
  const size_t na = as.size(), nb = bs.size();
  const int64_t m = g.trans_a ? ra->extents[na - 1] : ra->extents[na - 2];
  const int64_t k = g.trans_a ? ra->extents[na - 2] : ra->extents[na - 1];
  const int64_t kb = g.trans_b ? rb->extents[nb - 1] : rb->extents[nb - 2];
  const int64_t n = g.trans_b ? rb->extents[nb - 2] : rb->extents[nb - 1];
  const int64_t instr_n = WgmmaInstrN(n);
  const int64_t e = *kind == MmaKind::kI8 ? 1 : 2, kstep = WgmmaK(*kind);
  if (m != cs[0] || n != cs[1] || k != kb || k % kstep != 0 || !WgmmaAccumulatorFits(m, n, threads) || instr_n == 0) {
    *why = "shape " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " over " +
           std::to_string(threads) + " threads does not fit wgmma (threads a multiple of 128, M of 64 per warpgroup, N of 8, K of " +
           std::to_string(kstep) + ")";
    return std::nullopt;
  }
  if (a_regs) {
    if (m != as[0] || k != as[1]) {
      *why = "A region is not the whole " + std::to_string(as[0]) + "x" + std::to_string(as[1]) + " fragment";
      return std::nullopt;
    }
    const std::string pb = WgmmaOperandProblem(bs[nb - 2], bs[nb - 1], e, ir::FoldInt(rb->starts[nb - 2]),
                                               ir::FoldInt(rb->starts[nb - 1]), g.trans_b, instr_n, n / instr_n);
    if (!pb.empty()) {
      *why = "B " + g.b.buffer + ": " + pb;
      return std::nullopt;
    }
    return WgmmaFit{*kind, SmemSwizzle::kNone, *WgmmaOperandSwizzle(bs[nb - 2], bs[nb - 1], e), true, m, k};
  }
  const std::string pa = WgmmaOperandProblem(as[na - 2], as[na - 1], e, ir::FoldInt(ra->starts[na - 2]),
                                             ir::FoldInt(ra->starts[na - 1]), !g.trans_a, 64, m / 64);
  const std::string pb = WgmmaOperandProblem(bs[nb - 2], bs[nb - 1], e, ir::FoldInt(rb->starts[nb - 2]),
                                             ir::FoldInt(rb->starts[nb - 1]), g.trans_b, instr_n, n / instr_n);
  if (!pa.empty() || !pb.empty()) {
    *why = !pa.empty() ? "A " + g.a.buffer + ": " + pa : "B " + g.b.buffer + ": " + pb;
    return std::nullopt;
  }
  return WgmmaFit{*kind, *WgmmaOperandSwizzle(as[na - 2], as[na - 1], e), *WgmmaOperandSwizzle(bs[nb - 2], bs[nb - 1], e),
                  false, m, k};
}

// One inference. Register operands A (kWgmma): a gemm's f16/bf16 fragment A
// that is not transposed stays in registers (not demoted as a gemm operand)
// unless it is in `no_reg_a`; if it cannot stay (the gemm is not wgmma, its
// layout conflicts, something else demotes it) it is put in *failed with the
// reason, and InferGpuLayouts infers again without it.
static StatusOr<GpuLayoutPlan> InferOnce(const ir::Function& f, int64_t threads, GemmStrategy strategy, bool tf32, bool sm75,
                                  const std::set<std::string>& no_reg_a, std::map<std::string, std::string>* failed) {
  GpuLayoutPlan plan;
  plan.threads = threads;
  const ir::SymbolTable syms = ir::CollectSymbols(f);
  auto shape_of = [&](const std::string& b) { return ConstShape(syms.at(b).shape); };
  auto frag = [&](const std::string& b) { return IsFragment(syms, b); };
  auto demote = [&](const std::string& b, const std::string& why) {
    if (!frag(b) || plan.demoted.count(b)) return;
    plan.demoted.insert(b);
    plan.layouts.erase(b);
    plan.notes.push_back("fragment " + b + " kept in shared memory: " + why);
  };
  const ir::Block& body = passes::TheKernel(f).body;
  // Register operands A kept out of shared memory (kWgmma).
  std::set<std::string> reg_a;
  auto reg_a_candidate = [&](const ir::Gemm& g) {
    if (strategy != GemmStrategy::kWgmma || !frag(g.a.buffer) || no_reg_a.count(g.a.buffer) || g.trans_a) return false;
    const ir::DType t = syms.at(g.a.buffer).dtype;
    return (t == ir::DType::kF16 || t == ir::DType::kBF16) && frag(g.c.buffer) && shape_of(g.a.buffer).size() == 2 &&
           IsWhole(g.a, shape_of(g.a.buffer));
  };

  // 1. Structural demotions.
  std::function<void(const ir::Block&)> scan = [&](const ir::Block& blk) {
    for (const ir::Stmt& s : blk) {
      const std::string where = " (" + std::string(ir::StmtKindName(ir::Kind(s))) +
                                (s.loc ? " at " + ir::ToString(s.loc) : std::string()) + ")";
      if (const auto* p = ir::As<ir::Parallel>(s)) {
        std::vector<Access> acc;
        ParallelAccesses(p->body, syms, &acc);
        for (const Access& a : acc) {
          const Pattern pat = Classify(*p, a.indices, shape_of(a.buffer));
          if (pat == Pattern::kOther || (pat == Pattern::kRow && a.write)) {
            demote(a.buffer, "indexed in T.Parallel by other than the loop's indices" + where);
          }
        }
        // An extern function reads and writes through a pointer the elements
        // after the one named, in row-major order: only memory has them there.
        ir::ForEachStmt(p->body, [&](const ir::Stmt& c) {
          if (const auto* x = ir::As<ir::CallExtern>(c)) {
            for (const ir::ExternArg& a : x->args) {
              if (const auto* l = ir::As<ir::Load>(a.value); l && a.address) {
                demote(l->buffer, "its address is passed to extern function " + x->name + where);
              }
            }
          }
        });
        continue;
      }
      // Scalar code outside T.Parallel that touches a fragment.
      ir::ForEachExprOf(s, [&](const ir::Expr& e) {
        ir::WalkExpr(e, [&](const ir::Expr& x) {
          if (const auto* l = ir::As<ir::Load>(x)) demote(l->buffer, "read outside T.Parallel" + where);
        });
      });
      if (const auto* st = ir::As<ir::Store>(s)) demote(st->buffer, "written outside T.Parallel" + where);
      if (const auto* g = ir::As<ir::Gemm>(s)) {
        if (reg_a_candidate(*g)) {
          reg_a.insert(g->a.buffer);
        } else {
          demote(g->a.buffer, "gemm operand (the SIMT gemm reads operands from shared memory)" + where);
        }
        demote(g->b.buffer, "gemm operand (the SIMT gemm reads operands from shared memory)" + where);
        if (!frag(g->c.buffer) || !IsWhole(g->c, shape_of(g->c.buffer))) {
          return;  // LowerToSimt reports it
        }
      } else if (const auto* c = ir::As<ir::Cumsum>(s)) {
        demote(c->src.buffer, "cumsum operand" + where);
        demote(c->dst.buffer, "cumsum operand" + where);
      } else if (const auto* r = ir::As<ir::Reduce>(s)) {
        const auto rank = static_cast<int64_t>(syms.at(r->src.buffer).shape.size());
        const bool last = ir::NormalizeDim(r->dim, rank) == rank - 1;
        if (!last || !IsWhole(r->src, shape_of(r->src.buffer)) || !IsWhole(r->dst, shape_of(r->dst.buffer))) {
          demote(r->src.buffer, "reduction not along the last dim of a whole fragment" + where);
          demote(r->dst.buffer, "reduction not along the last dim of a whole fragment" + where);
        }
      } else if (const auto* c2 = ir::As<ir::Copy>(s)) {
        if (!IsWhole(c2->src, shape_of(c2->src.buffer))) demote(c2->src.buffer, "partial-region copy" + where);
        if (!IsWhole(c2->dst, shape_of(c2->dst.buffer))) demote(c2->dst.buffer, "partial-region copy" + where);
      } else if (const auto* fl = ir::As<ir::Fill>(s)) {
        if (!IsWhole(fl->dst, shape_of(fl->dst.buffer))) demote(fl->dst.buffer, "partial-region fill" + where);
      } else if (const auto* at = ir::As<ir::AtomicAddTile>(s)) {
        if (!IsWhole(at->src, shape_of(at->src.buffer))) demote(at->src.buffer, "partial-region atomic_add" + where);
      } else if (const auto* fo = ir::As<ir::For>(s)) {
        scan(fo->body);
      } else if (const auto* i = ir::As<ir::If>(s)) {
        scan(i->then_body);
        scan(i->else_body);
      }
    }
  };
  scan(body);

  // 2a. wgmma (kWgmma): the gemms that fit, as long as every gemm reading
  // their operand buffers fits too (a swizzled buffer cannot feed mma.sync).
  std::map<const ir::Gemm*, WgmmaFit> wgmma;
  std::map<const ir::Gemm*, std::string> wgmma_why;
  if (strategy == GemmStrategy::kWgmma) {
    std::vector<const ir::Gemm*> gemms;
    ir::ForEachStmt(body, [&](const ir::Stmt& s) {
      if (const auto* g = ir::As<ir::Gemm>(s)) gemms.push_back(g);
    });
    for (const ir::Gemm* g : gemms) {
      std::string why;
      const bool a_regs = reg_a.count(g->a.buffer) && !plan.demoted.count(g->a.buffer);
      if (!frag(g->c.buffer) || plan.demoted.count(g->c.buffer)) {
        if (a_regs) (*failed)[g->a.buffer] = "the accumulator " + g->c.buffer + " is not in registers";
        continue;
      }
      if (std::optional<WgmmaFit> w = WgmmaFor(*g, syms, threads, &why, a_regs)) {
        wgmma[g] = *w;
      } else {
        wgmma_why[g] = why;
        if (a_regs) (*failed)[g->a.buffer] = "the gemm is not wgmma: " + why;
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      std::set<std::string> banned;
      for (const ir::Gemm* g : gemms) {
        if (!wgmma.count(g)) banned.insert({g->a.buffer, g->b.buffer});
      }
      for (auto it = wgmma.begin(); it != wgmma.end();) {
        if (banned.count(it->first->a.buffer) || banned.count(it->first->b.buffer)) {
          wgmma_why[it->first] = "an operand buffer is also read by a gemm that is not wgmma";
          if (it->second.a_regs) (*failed)[it->first->a.buffer] = wgmma_why[it->first];
          it = wgmma.erase(it);
          changed = true;
        } else {
          ++it;
        }
      }
    }
    for (const auto& [g, w] : wgmma) {
      if (!w.a_regs) plan.swizzle[g->a.buffer] = w.a;
      plan.swizzle[g->b.buffer] = w.b;
    }
  }
  // A register candidate some structural rule demoted is an ordinary shared operand.
  for (auto it = reg_a.begin(); it != reg_a.end();) it = plan.demoted.count(*it) ? reg_a.erase(it) : std::next(it);
  if (!failed->empty()) return plan;

  // 2. Forced layouts: gemm accumulators.
  ir::ForEachStmt(body, [&](const ir::Stmt& s) {
    const auto* g = ir::As<ir::Gemm>(s);
    if (!g || !frag(g->c.buffer) || plan.demoted.count(g->c.buffer)) return;
    const std::vector<int64_t> sh = shape_of(g->c.buffer);
    if (sh.size() != 2) return;
    std::optional<MmaKind> mma;
    std::string why;
    const bool amd = strategy == GemmStrategy::kMfma || strategy == GemmStrategy::kWmma;
    const auto wg = wgmma.find(g);
    if (wg != wgmma.end()) {
      mma = wg->second.kind;
    } else if (strategy != GemmStrategy::kSimtFma) {
      mma = MmaFor(*g, syms, threads, tf32, strategy == GemmStrategy::kWgmma ? GemmStrategy::kMmaSync : strategy, &why,
                   sm75 && strategy == GemmStrategy::kMmaSync);
    }
    const FragmentLayout l = !mma ? GemmAccumulatorLayout(sh[0], sh[1], threads)
                             : wg != wgmma.end() ? WgmmaAccumulatorLayout(sh[0], sh[1], threads)
                             : amd ? AmdMatrixAccumulatorLayout(sh[0], sh[1], threads)
                                   : MmaAccumulatorLayout(sh[0], sh[1], threads);
    std::string inst = strategy == GemmStrategy::kMfma ? "mfma" : strategy == GemmStrategy::kWmma ? "wmma" : "mma.sync";
    if (mma && sm75 && strategy == GemmStrategy::kMmaSync) inst += " " + MmaShapeName(*mma, true);
    if (wg != wgmma.end()) inst = "wgmma";
    if (wg == wgmma.end() && wgmma_why.count(g)) inst = "mma.sync, not wgmma: " + wgmma_why.at(g) + ";";
    auto it = plan.layouts.find(g->c.buffer);
    auto mt = plan.mma.find(g->c.buffer);
    if ((it != plan.layouts.end() && !(it->second == l)) || (mt != plan.mma.end() && (!mma || mt->second != *mma))) {
      demote(g->c.buffer, "two gemms force different accumulator layouts");
      plan.mma.erase(g->c.buffer);
      plan.wgmma.erase(g->c.buffer);
      return;
    }
    plan.layouts[g->c.buffer] = l;
    if (mma) {
      plan.mma[g->c.buffer] = *mma;
      if (wg != wgmma.end()) {
        plan.wgmma.insert(g->c.buffer);
      } else {
        plan.mma_operands.insert(g->a.buffer);
        plan.mma_operands.insert(g->b.buffer);
      }
    }
    plan.notes.push_back("fragment " + g->c.buffer + ": gemm accumulator layout " + l.ToString() +
                         (mma ? " (" + inst + " " + MmaKindName(*mma) + ")"
                              : strategy != GemmStrategy::kSimtFma ? " (SIMT FMA: " + why + ")" : std::string()));
  });

  // 2b. Warp grids of tensor-core accumulators. MmaAccumulatorLayout splits
  // the warps over M and N, so a row of C spans several warps: a reduction
  // over it or a row vector beside it would go through shared memory. An
  // accumulator whose rows are reduced or scaled by a row vector (attention's
  // scores and output) gets its warps stacked along M instead (a row in one
  // quad of lanes: shuffles only, as FlashAttention-2 splits its warps), or,
  // where that does not fit, the SIMT layout.
  if (strategy == GemmStrategy::kMmaSync || strategy == GemmStrategy::kWgmma) {
    std::set<std::string> row_coupled;
    ir::ForEachStmt(body, [&](const ir::Stmt& s) {
      if (const auto* r = ir::As<ir::Reduce>(s)) row_coupled.insert(r->src.buffer);
      if (const auto* p = ir::As<ir::Parallel>(s)) {
        std::vector<Access> acc;
        ParallelAccesses(p->body, syms, &acc);
        bool row = false;
        for (const Access& a : acc) row = row || Classify(*p, a.indices, shape_of(a.buffer)) == Pattern::kRow;
        for (const Access& a : acc) {
          if (row) row_coupled.insert(a.buffer);
        }
      }
    });
    std::vector<std::string> accs;
    for (const auto& [c, kind] : plan.mma) accs.push_back(c);
    for (const std::string& c : accs) {
      FragmentLayout& l = plan.layouts.at(c);
      if (l.C == 1 || !row_coupled.count(c)) continue;
      if (MmaAccumulatorFits(l.rows, l.cols, threads, 1)) {
        l = MmaAccumulatorLayout(l.rows, l.cols, threads, 1);
        plan.notes.push_back("fragment " + c + ": warps stacked along M, " + l.ToString() +
                             " (its rows are reduced or scaled by a row vector)");
      } else {
        l = GemmAccumulatorLayout(l.rows, l.cols, threads);
        plan.mma.erase(c);
        plan.notes.push_back("fragment " + c + ": SIMT FMA, " + l.ToString() +
                             " (its rows are reduced or scaled by a row vector, and warps stacked along M do not fit)");
      }
    }
  }

  // 2c. Register operands A (kWgmma): the fragment keeps the layout of a
  // wgmma accumulator of its shape, WgmmaAccumulatorLayout(M, K): one row
  // slot pair per 64-row m-tile, column slots 4 s .. 4 s + 3 for k-step s
  // -- pairs of adjacent columns are exactly the PTX ISA's A fragment of
  // m64nNk16 (lane l of warp w: rows 16 w + l / 4 (+ 8), columns 16 s +
  // 2 (l % 4) + {0, 1} (+ 8)). So a copy of a wgmma accumulator of shape
  // [M, K] (attention's P = cast(S)) is slot-for-slot and never leaves the
  // registers; LowerGemmWgmma packs slot pairs into the .b32 operands.
  std::map<std::string, FragmentLayout> reg_a_layouts;
  for (const auto& [g, w] : wgmma) {
    if (!w.a_regs) continue;
    const FragmentLayout l = WgmmaAccumulatorLayout(w.m, w.k, threads);
    auto have = reg_a_layouts.find(g->a.buffer);
    auto it = plan.layouts.find(g->a.buffer);
    if (plan.demoted.count(g->c.buffer) || !plan.wgmma.count(g->c.buffer)) {
      (*failed)[g->a.buffer] = "the accumulator " + g->c.buffer + " is not a wgmma accumulator in registers";
    } else if ((have != reg_a_layouts.end() && !(have->second == l)) || (it != plan.layouts.end() && !(it->second == l))) {
      (*failed)[g->a.buffer] = "it has another layout than a wgmma operand A of " + std::to_string(w.m) + "x" + std::to_string(w.k);
    } else {
      reg_a_layouts[g->a.buffer] = l;
    }
  }
  if (!failed->empty()) return plan;
  for (const auto& [a, l] : reg_a_layouts) {
    plan.layouts[a] = l;
    plan.notes.push_back("fragment " + a + ": wgmma register operand A, layout " + l.ToString() +
                         " (a wgmma accumulator's: pairs of columns are the A fragment's registers)");
  }

  // 3. Propagation in program order until nothing changes (demotion is
  // monotone and layouts are only set once per round, so this ends). Default
  // layouts (a fill, a fragment-to-fragment copy, a T.Parallel loop that
  // touches no fragment with a layout yet) are only taken once the forced
  // layouts have spread as far as they go (`defaults`): otherwise a row
  // vector's own 1-D loops and fills, which come first in program order,
  // would give it 1 x M over threads and conflict with the replicated M x 1
  // layout its reduction or its 2-D loop needs (FlashAttention's scores_max,
  // logsum, ... would go to shared memory).
  bool defaults = false;
  for (int round = 0; round < 16; ++round) {
    const GpuLayoutPlan before = plan;
    auto want = [&](const std::string& b, const FragmentLayout& l, const std::string& why) {
      if (!frag(b) || plan.demoted.count(b)) return;
      auto it = plan.layouts.find(b);
      if (it == plan.layouts.end()) {
        plan.layouts[b] = l;
        return;
      }
      if (!(it->second == l)) {
        demote(b, "layout conflict: has " + it->second.ToString() + ", " + why + " needs " + l.ToString());
      }
    };
    ir::ForEachStmt(body, [&](const ir::Stmt& s) {
      const std::string where = s.loc ? " at " + ir::ToString(s.loc) : std::string();
      if (const auto* p = ir::As<ir::Parallel>(s)) {
        const FragmentLayout L = LoopLayout(*p, syms, plan);
        std::vector<Access> acc;
        ParallelAccesses(p->body, syms, &acc);
        bool anchored = false;  // L comes from a fragment's layout, not DefaultLayout
        for (const Access& a : acc) {
          anchored = anchored || (plan.layouts.count(a.buffer) &&
                                  Classify(*p, a.indices, shape_of(a.buffer)) != Pattern::kOther);
        }
        if (!anchored && !defaults) return;
        for (const Access& a : acc) {
          const std::vector<int64_t> sh = shape_of(a.buffer);
          const Pattern pat = Classify(*p, a.indices, sh);
          if (pat == Pattern::kFull) want(a.buffer, L, "T.Parallel" + where);
          if (pat == Pattern::kRow) {
            if (L.replicated || L.C > 1) {
              demote(a.buffer, (L.replicated ? "row vector read in a replicated loop"
                                             : "row vector beside a layout split across warps by columns") +
                                   where);
            } else {
              want(a.buffer, ProjectRows(L, sh), "T.Parallel" + where + " (row vector)");
            }
          }
        }
      } else if (const auto* r = ir::As<ir::Reduce>(s)) {
        if (!frag(r->src.buffer) || plan.demoted.count(r->src.buffer)) {
          demote(r->dst.buffer, "its reduction's source is not in registers" + where);
          return;
        }
        if (!plan.layouts.count(r->src.buffer)) {
          if (!defaults) return;
          plan.layouts[r->src.buffer] = DefaultLayout(shape_of(r->src.buffer), threads);
        }
        const FragmentLayout& src = plan.layouts[r->src.buffer];
        if (src.C > 1) {  // a row spans warps (see 2b)
          demote(r->src.buffer, "reduction of a layout split across warps by columns" + where);
          demote(r->dst.buffer, "reduction of a layout split across warps by columns" + where);
          return;
        }
        if (src.replicated) {
          demote(r->src.buffer, "reduction of a replicated fragment" + where);
          demote(r->dst.buffer, "reduction of a replicated fragment" + where);
          return;
        }
        want(r->dst.buffer, ProjectRows(src, shape_of(r->dst.buffer)), "reduce" + where);
      } else if (const auto* c = ir::As<ir::Copy>(s)) {
        const std::string &a = c->src.buffer, &b = c->dst.buffer;
        auto live = [&](const std::string& x) { return frag(x) && !plan.demoted.count(x); };
        if (live(a) && live(b)) {
          // Register to register, slot by slot: both sides need one layout.
          if (plan.layouts.count(a)) want(b, plan.layouts.at(a), "copy from " + a + where);
          if (plan.layouts.count(b)) want(a, plan.layouts.at(b), "copy to " + b + where);
        }
        for (const std::string& x : {a, b}) {
          if (defaults && live(x) && !plan.layouts.count(x)) plan.layouts[x] = DefaultLayout(shape_of(x), threads);
        }
      } else if (const auto* fl = ir::As<ir::Fill>(s)) {
        const std::string& b = fl->dst.buffer;
        if (defaults && frag(b) && !plan.demoted.count(b) && !plan.layouts.count(b)) {
          plan.layouts[b] = DefaultLayout(shape_of(b), threads);
        }
      }
    });
    if (before.layouts == plan.layouts && before.demoted == plan.demoted) {
      if (defaults) break;
      defaults = true;
    }
  }
  for (const auto& [a, l] : reg_a_layouts) {
    auto it = plan.layouts.find(a);
    if (plan.demoted.count(a) || it == plan.layouts.end() || !(it->second == l)) {
      std::string why = "its layout conflicts with another statement's";
      for (const std::string& n : plan.notes) {
        if (n.rfind("fragment " + a + " kept in shared memory: ", 0) == 0) why = n.substr(n.find(": ") + 2);
      }
      (*failed)[a] = why;
    }
  }
  if (!failed->empty()) return plan;
  // 4. Defaults for the rest.
  for (const auto& [name, info] : syms) {
    if (info.kind == ir::SymbolInfo::Kind::kAlloc && info.scope == ir::MemScope::kFragment &&
        !plan.demoted.count(name) && !plan.layouts.count(name)) {
      plan.layouts[name] = DefaultLayout(ConstShape(info.shape), threads);
    }
  }
  for (const auto& [name, l] : plan.layouts) plan.notes.push_back("fragment " + name + ": " + l.ToString());
  return plan;
}

// Infers again without a register operand A that could not stay in
// registers (it is then demoted as any gemm operand, with a note saying why).
StatusOr<GpuLayoutPlan> InferGpuLayouts(const ir::Function& f, int64_t threads, GemmStrategy strategy, bool tf32,
                                        bool sm75) {
  std::set<std::string> no_reg_a;
  std::vector<std::string> notes;
  for (;;) {
    std::map<std::string, std::string> failed;
    StatusOr<GpuLayoutPlan> plan = InferOnce(f, threads, strategy, tf32, sm75, no_reg_a, &failed);
    if (!plan.ok()) return plan;
    if (failed.empty()) {
      plan->notes.insert(plan->notes.begin(), notes.begin(), notes.end());
      return plan;
    }
    for (const auto& [a, why] : failed) {
      if (!no_reg_a.insert(a).second) return Status(StatusCode::kInternal, "InferGpuLayouts: register operand A " + a + " failed twice");
      notes.push_back("fragment " + a + ": not a wgmma register operand A (" + why + ")");
    }
  }
}

}  // namespace tl::gpu
