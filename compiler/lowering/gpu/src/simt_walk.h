// Walks over the SIMT IR shared by the small SIMT-level passes (forward_cast.cc,
// zero_init.cc, warp_specialize.cc, pingpong.cc): which statements read, write or
// mention a buffer, whether any statement satisfies a predicate, and the
// lowering's per-slot loop nests over a register fragment.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "tilelang/lowering/gpu/simt_ir.h"

namespace tl::gpu {

// Whether any statement of `b` (nested ones included: loop bodies, both branches, both warp roles)
// satisfies `pred`.
bool Any(const SBlock& b, const std::function<bool(const SStmt&)>& pred);
// Whether expression e reads buffer `name`.
bool Reads(const ir::Expr& e, const std::string& name);
// Whether statement s / block b (nested statements included) reads or writes buffer `name` in any way
// (loads, stores, atomics, mma/wgmma operands, copies, TMA, extern-call arguments).
bool Mentions(const SStmt& s, const std::string& name);
bool Mentions(const SBlock& b, const std::string& name);
// Whether statement s (nested included) may write register buffer `name` (stores, mma/wgmma
// accumulators, extern calls taking its address).
bool Writes(const SStmt& s, const std::string& name);
// Calls fn on every expression slot of every statement of b (nested statements included: loop
// bounds and bodies, conditions and both branches, both warp roles; wgmma operand starts, TMA
// coordinates and indices, mbarrier indices and parities, extern-call arguments), in place, so fn may
// rewrite them. Names of buffers and variables are not expressions and are not visited.
void MapExprs(SBlock& b, const std::function<void(ir::Expr&)>& fn);
// How many non-compound statements (and loop bounds / conditions) anywhere in b mention `name`.
int LeafMentions(const SBlock& b, const std::string& name);
// s is a loop nest with constant bounds whose innermost body is lets (and comments) and ONE store into a
// register buffer of `bufs` (the kernel's buffers by name); enumerating the loops, the store's index takes
// every slot of that buffer exactly once (a fragment-wide per-slot loop: T.copy / T.fill of a whole
// fragment). The store, or nullptr.
const SStore* WholeFragmentStore(const SStmt& s, const std::map<std::string, const SimtBuffer*>& bufs);

}  // namespace tl::gpu
