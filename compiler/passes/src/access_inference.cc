// Access inference: which tensor parameters a function reads and writes.
#include <map>
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {

std::vector<Access> InferParamAccess(const ir::Function& f) {
  std::map<std::string, uint8_t, std::less<>> bits;
  auto mark = [&](const std::string& name, Access a) { bits[name] |= static_cast<uint8_t>(a); };
  auto reads_in = [&](const ir::Expr& e) {
    ir::WalkExpr(e, [&](const ir::Expr& x) {
      if (const auto* l = ir::As<ir::Load>(x)) mark(l->buffer, Access::kRead);
    });
  };
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    ir::ForEachExprOf(s, reads_in);  // loads in values, indices, region starts, bounds
    if (const auto* x = ir::As<ir::Store>(s)) mark(x->buffer, Access::kWrite);
    if (const auto* x = ir::As<ir::Copy>(s)) { mark(x->src.buffer, Access::kRead); mark(x->dst.buffer, Access::kWrite); }
    if (const auto* x = ir::As<ir::Fill>(s)) mark(x->dst.buffer, Access::kWrite);
    if (const auto* x = ir::As<ir::Gemm>(s)) {
      mark(x->a.buffer, Access::kRead);
      mark(x->b.buffer, Access::kRead);
      mark(x->c.buffer, x->clear_accum ? Access::kWrite : Access::kReadWrite);
    }
    if (const auto* x = ir::As<ir::Reduce>(s)) {
      mark(x->src.buffer, Access::kRead);
      mark(x->dst.buffer, x->clear ? Access::kWrite : Access::kReadWrite);
    }
    if (const auto* x = ir::As<ir::Cumsum>(s)) { mark(x->src.buffer, Access::kRead); mark(x->dst.buffer, Access::kWrite); }
    if (const auto* x = ir::As<ir::AtomicAdd>(s)) mark(x->dst.buffer, Access::kReadWrite);
    if (const auto* x = ir::As<ir::AtomicAddTile>(s)) {
      mark(x->src.buffer, Access::kRead);
      mark(x->dst.buffer, Access::kReadWrite);
    }
    // T.call_extern(..., &T[i]): the imported function may read and write through the pointer
    // (kernels/w4a16_m16.py stores C from its imported source)
    if (const auto* x = ir::As<ir::CallExtern>(s)) {
      for (const ir::ExternArg& a : x->args) {
        if (const auto* l = a.address ? ir::As<ir::Load>(a.value) : nullptr) mark(l->buffer, Access::kReadWrite);
      }
    }
  });
  std::vector<Access> out;
  for (const ir::Param& p : f.params) {
    if (p.kind == ir::Param::Kind::kScalar) {
      out.push_back(Access::kRead);
      continue;
    }
    auto it = bits.find(p.name);
    out.push_back(it == bits.end() ? Access::kNone : static_cast<Access>(it->second));
  }
  return out;
}

}  // namespace tl::passes
