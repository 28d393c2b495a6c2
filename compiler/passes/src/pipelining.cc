// Pipelining, CPU flavour: pipelined loops become serial loops.
#include "tilelang/passes/passes.h"

namespace tl::passes {

std::vector<PipelineDecision> LowerPipelinesSerial(ir::Function& f) {
  std::vector<PipelineDecision> decisions;
  ir::ForEachStmt(f.body, [&](ir::Stmt& s) {
    ir::For* loop = ir::As<ir::For>(s);
    if (loop == nullptr || loop->kind != ir::LoopKind::kPipelined) return;
    decisions.push_back(PipelineDecision{loop->var, loop->stages, 1,
                                         "cpu: a block is one call without asynchronous copies; "
                                         "serial order is exact",
                                         s.loc});
    loop->kind = ir::LoopKind::kSerial;
    loop->stages = 0;
  });
  return decisions;
}

}  // namespace tl::passes
