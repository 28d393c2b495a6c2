// Region inference: make every tile-op region explicit and resolve it.
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {
namespace {

// Rewrites `r` so it has one dim per buffer dim with an IntImm extent.
Status ExplicitRegion(const ir::Function& f, const ir::Stmt& s, const ir::SymbolTable& syms, ir::Region& r) {
  auto it = syms.find(r.buffer);
  if (it == syms.end() || !it->second.IsBuffer()) {
    return Status(StatusCode::kInvalidArgument, Where(f, s.loc, ir::StmtKindName(ir::Kind(s))) +
                                                    "region names '" + r.buffer + "', which is not a buffer");
  }
  const std::vector<ir::Expr>& shape = it->second.shape;
  if (r.IsWholeBuffer()) {
    for (const ir::Expr& d : shape) {
      if (!ir::FoldInt(d).has_value()) {
        return Status(StatusCode::kUnimplemented,
                      Where(f, s.loc, ir::StmtKindName(ir::Kind(s))) + "whole-buffer region of '" + r.buffer +
                          "' has the dynamic dim " + ir::Print(d) + "; tile regions need constant extents");
      }
      r.dims.push_back(ir::RegionDim{ir::MakeInt(0), ir::MakeInt(*ir::FoldInt(d))});
    }
    return Status::Ok();
  }
  if (r.dims.size() != shape.size()) {
    return Status(StatusCode::kInvalidArgument, Where(f, s.loc, ir::StmtKindName(ir::Kind(s))) + "region of '" +
                                                    r.buffer + "' has " + std::to_string(r.dims.size()) +
                                                    " dims, the buffer " + std::to_string(shape.size()));
  }
  for (ir::RegionDim& d : r.dims) {
    d.start = ir::FoldConstants(d.start);
    if (!d.extent.has_value()) {
      d.extent = ir::MakeInt(1);
      continue;
    }
    const std::optional<int64_t> e = ir::FoldInt(*d.extent);
    if (!e.has_value() || *e < 1) {
      return Status(StatusCode::kInvalidArgument, Where(f, s.loc, ir::StmtKindName(ir::Kind(s))) +
                                                      "extent " + ir::Print(*d.extent) + " of a region of '" +
                                                      r.buffer + "' is not a positive integer constant");
    }
    d.extent = ir::MakeInt(*e);
  }
  return Status::Ok();
}

}  // namespace

Status MakeRegionsExplicit(ir::Function& f) {
  const ir::SymbolTable syms = ir::CollectSymbols(f);
  Status status;
  // Rewrites happen on a copy: CollectSymbols' pointers must stay valid while we look up shapes.
  ir::Function out = f;
  ir::ForEachStmt(out.body, [&](ir::Stmt& s) {
    if (!status.ok()) return;
    auto fix = [&](ir::Region& r) {
      if (status.ok()) status = ExplicitRegion(f, s, syms, r);
    };
    if (auto* c = ir::As<ir::Copy>(s)) { fix(c->src); fix(c->dst); }
    if (auto* c = ir::As<ir::Fill>(s)) fix(c->dst);
    if (auto* c = ir::As<ir::Gemm>(s)) { fix(c->a); fix(c->b); fix(c->c); }
    if (auto* c = ir::As<ir::Reduce>(s)) { fix(c->src); fix(c->dst); }
    if (auto* c = ir::As<ir::Cumsum>(s)) { fix(c->src); fix(c->dst); }
    if (auto* c = ir::As<ir::AtomicAdd>(s)) fix(c->dst);
    if (auto* c = ir::As<ir::AtomicAddTile>(s)) { fix(c->src); fix(c->dst); }
  });
  if (!status.ok()) return status;
  f = std::move(out);
  return Status::Ok();
}

std::vector<int> RegionInfo::kept_dims() const {
  std::vector<int> kept;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] > 1) kept.push_back(static_cast<int>(i));
  }
  return kept;
}

bool RegionInfo::any_guard() const {
  for (bool g : guard) {
    if (g) return true;
  }
  return false;
}

StatusOr<RegionInfo> ResolveRegion(const ir::Region& r, const ir::SymbolTable& symbols) {
  auto it = symbols.find(r.buffer);
  if (it == symbols.end() || !it->second.IsBuffer()) {
    return Status(StatusCode::kInternal, "region names '" + r.buffer + "', which is not a buffer");
  }
  RegionInfo info;
  info.buffer = r.buffer;
  info.scope = it->second.scope;
  info.dtype = it->second.dtype;
  info.buffer_shape = it->second.shape;
  if (r.dims.size() != info.buffer_shape.size()) {
    return Status(StatusCode::kInternal, "region of '" + r.buffer + "' is not explicit (MakeRegionsExplicit)");
  }
  for (size_t i = 0; i < r.dims.size(); ++i) {
    const ir::RegionDim& d = r.dims[i];
    const std::optional<int64_t> e = d.extent.has_value() ? ir::FoldInt(*d.extent) : std::optional<int64_t>(1);
    if (!e.has_value()) return Status(StatusCode::kInternal, "region extent is not constant");
    info.starts.push_back(ir::FoldConstants(d.start));
    info.extents.push_back(*e);
    bool guard = false;
    if (info.scope == ir::MemScope::kGlobal) {
      // Provably inside: constant start and constant dim with start + extent <= dim.
      const std::optional<int64_t> start = ir::FoldInt(info.starts.back());
      const std::optional<int64_t> dim = ir::FoldInt(info.buffer_shape[i]);
      guard = !(start.has_value() && dim.has_value() && *start >= 0 && *start + *e <= *dim);
    }
    info.guard.push_back(guard);
  }
  return info;
}

}  // namespace tl::passes
