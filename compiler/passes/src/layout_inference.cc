// Layout inference, CPU flavour: every buffer is owned by the block, row-major.
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {

StatusOr<LayoutPlan> InferLayoutsCpu(const ir::Function& f) {
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
  // GPU pass to start from); the CPU layout does not depend on them.
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
  return plan;
}

}  // namespace tl::passes
