// Layout inference, CPU flavour: every buffer is owned by the block; element
// order is row-major, or GEMM panels for shared tiles that only feed gemms.
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {
namespace {

bool IsWhole(const ir::Region& r, const std::vector<int64_t>& shape) {
  if (r.dims.size() != shape.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d) {
    const std::optional<int64_t> start = ir::FoldInt(r.dims[d].start);
    const std::optional<int64_t> ext = r.dims[d].extent ? ir::FoldInt(*r.dims[d].extent) : std::optional<int64_t>(1);
    if (!start || *start != 0 || !ext || *ext != shape[d]) return false;
  }
  return true;
}

bool PanelDtype(ir::DType t) { return t == ir::DType::kF32 || t == ir::DType::kF16 || t == ir::DType::kBF16; }

// Decides kGemmPanelsA/B for `l` (see passes.h); leaves it row-major otherwise.
void ChoosePanels(const ir::Function& f, const ir::SymbolTable& syms, BufferLayout& l) {
  if (l.scope != ir::MemScope::kShared || l.shape.size() != 2 || !PanelDtype(l.dtype)) return;
  int copies = 0, as_a = 0, as_b = 0;
  bool ok = true, trans = false, trans_set = false;
  auto same_trans = [&](bool t) {
    if (trans_set && t != trans) ok = false;
    trans = t;
    trans_set = true;
  };
  const std::string& name = l.buffer;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    if (!ok) return;
    // Any load of the buffer in an expression disqualifies it.
    ir::ForEachExprOf(s, [&](const ir::Expr& e) {
      ir::WalkExpr(e, [&](const ir::Expr& x) {
        if (const auto* ld = ir::As<ir::Load>(x); ld != nullptr && ld->buffer == name) ok = false;
      });
    });
    auto names = [&](const ir::Region& r) { return r.buffer == name; };
    if (const auto* c = ir::As<ir::Copy>(s)) {
      if (names(c->src)) ok = false;
      if (names(c->dst)) {
        auto src = syms.find(c->src.buffer);
        const bool global2d = src != syms.end() && src->second.scope == ir::MemScope::kGlobal &&
                              src->second.shape.size() == 2 && src->second.dtype == l.dtype;
        bool src_tile = global2d && c->src.dims.size() == 2;
        for (size_t d = 0; src_tile && d < 2; ++d) {
          const auto& ext = c->src.dims[d].extent;
          src_tile = ext.has_value() && ir::FoldInt(*ext) == l.shape[d];
        }
        if (!src_tile || !IsWhole(c->dst, l.shape)) ok = false;
        ++copies;
      }
      return;
    }
    if (const auto* g = ir::As<ir::Gemm>(s)) {
      const bool a = names(g->a), b = names(g->b);
      if (names(g->c)) ok = false;
      if (!a && !b) return;
      auto c = syms.find(g->c.buffer);
      auto other = syms.find(a ? g->b.buffer : g->a.buffer);
      if (c == syms.end() || c->second.dtype != ir::DType::kF32 || other == syms.end() ||
          !PanelDtype(other->second.dtype)) {
        ok = false;
      }
      if (a && b) ok = false;
      if (!IsWhole(a ? g->a : g->b, l.shape)) ok = false;
      if (a) ++as_a, same_trans(g->trans_a);
      if (b) ++as_b, same_trans(g->trans_b);
      return;
    }
    // Any other statement naming the buffer (fill, reduce, store, atomics...).
    bool named = false;
    if (const auto* x = ir::As<ir::Store>(s)) named = x->buffer == name;
    if (const auto* x = ir::As<ir::Fill>(s)) named = names(x->dst);
    if (const auto* x = ir::As<ir::Reduce>(s)) named = names(x->src) || names(x->dst);
    if (const auto* x = ir::As<ir::Cumsum>(s)) named = names(x->src) || names(x->dst);
    if (const auto* x = ir::As<ir::AtomicAdd>(s)) named = names(x->dst);
    if (const auto* x = ir::As<ir::AtomicAddTile>(s)) named = names(x->src) || names(x->dst);
    if (named) ok = false;
  });
  if (!ok || copies == 0 || (as_a == 0) == (as_b == 0)) return;
  l.order = as_a > 0 ? ElementOrder::kGemmPanelsA : ElementOrder::kGemmPanelsB;
  l.trans = trans;
  l.order_reason = std::string("only filled by whole-tile copies and read as gemm operand ") + (as_a ? "A" : "B") +
                   ": stored as f32 microkernel panels";
}

}  // namespace

StatusOr<LayoutPlan> InferLayoutsCpu(const ir::Function& f, const CpuLayoutOptions& options) {
  LayoutPlan plan;
  Status status;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    const ir::Alloc* a = ir::As<ir::Alloc>(s);
    if (a == nullptr || !status.ok()) return;
    BufferLayout l;
    l.buffer = a->name;
    l.scope = a->scope;
    l.dtype = a->dtype;
    l.elements = 1;
    for (const ir::Expr& d : a->shape) {
      const std::optional<int64_t> v = ir::FoldInt(d);
      if (!v.has_value() || *v < 1) {
        status = Status(StatusCode::kInvalidArgument,
                        Where(f, s.loc, "alloc") + "dim " + ir::Print(d) + " of '" + a->name +
                            "' is not a positive integer constant");
        return;
      }
      l.shape.push_back(*v);
      l.elements *= *v;
    }
    l.strides.assign(l.shape.size(), 1);
    for (size_t i = l.shape.size(); i-- > 1;) l.strides[i - 1] = l.strides[i] * l.shape[i];
    plan.buffers[a->name] = std::move(l);
  });
  if (!status.ok()) return status;
  // Record the ops that would force a layout on a GPU (for reports and for the
  // GPU pass to start from).
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    auto note = [&](const std::string& buffer, const char* role) {
      auto it = plan.buffers.find(buffer);
      if (it != plan.buffers.end()) {
        it->second.forced_by.push_back(std::string(role) + (s.loc ? " at " + ir::ToString(s.loc) : ""));
      }
    };
    if (const auto* g = ir::As<ir::Gemm>(s)) {
      note(g->a.buffer, "gemm operand A");
      note(g->b.buffer, "gemm operand B");
      note(g->c.buffer, "gemm accumulator");
    }
    if (const auto* r = ir::As<ir::Reduce>(s)) note(r->dst.buffer, "reduce output");
  });
  const ir::SymbolTable syms = ir::CollectSymbols(f);
  if (options.gemm_panels) {
    for (auto& [name, l] : plan.buffers) ChoosePanels(f, syms, l);
  }
  return plan;
}

}  // namespace tl::passes
