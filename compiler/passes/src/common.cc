// Shared helpers of the passes, and CheckSingleKernel.
#include <string>

#include "tilelang/passes/passes.h"

namespace tl::passes {

std::string Where(const ir::Function& f, const std::optional<ir::Loc>& loc, const char* what) {
  std::string s = "@" + f.name + ": " + what;
  const std::string at = ir::ToString(loc.has_value() ? loc : f.loc);
  if (!at.empty()) s += " at " + at;
  return s + ": ";
}

Status RejectExternCalls(const ir::Function& f, const char* target) {
  std::optional<Status> found;
  ir::ForEachStmt(f.body, [&](const ir::Stmt& s) {
    const auto* c = ir::As<ir::CallExtern>(s);
    if (!c || found) return;
    found = Status(StatusCode::kUnimplemented,
                   Where(f, s.loc, "call_extern") +
                       "T.call_extern with imported CUDA source runs only on CUDA targets: kernel '" + f.name +
                       "' calls extern function '" + c->name + "', target " + target);
  });
  return found ? *found : Status::Ok();
}

Status CheckSingleKernel(const ir::Function& f) {
  int kernels = 0;
  for (const ir::Stmt& s : f.body) {
    if (ir::As<ir::Kernel>(s) == nullptr) {
      return Status(StatusCode::kInvalidArgument,
                    Where(f, s.loc, "statement") + "only `kernel` statements may appear at function level");
    }
    if (++kernels > 1) {
      return Status(StatusCode::kUnimplemented,
                    Where(f, s.loc, "second kernel") +
                        "a function with several `kernel` statements (several launches) is not supported "
                        "yet; split it into one function per kernel");
    }
  }
  if (kernels == 0) {
    return Status(StatusCode::kInvalidArgument, Where(f, f.loc, "function") + "has no `kernel` statement");
  }
  return Status::Ok();
}

const ir::Stmt& TheKernelStmt(const ir::Function& f) { return f.body.front(); }
const ir::Kernel& TheKernel(const ir::Function& f) { return *ir::As<ir::Kernel>(f.body.front()); }

}  // namespace tl::passes
