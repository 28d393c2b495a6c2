// ReuseDeadSharedBuffers: a shared tile whose life starts after another's
// ended takes that tile's memory, so a kernel whose tiles do not all live at
// once fits a smaller shared-memory budget (upstream's FlashAttention keeps
// Q, K, V and the output tile O: O is written only after the K/V loop, when
// Q is dead).
//
// In: a function after MakeRegionsExplicit and the pipelining passes.
// Lifetimes are counted in statements of the kernel body's top level (a loop
// is one statement): buffer X may take buffer Y's place when X's first use
// comes after Y's last, both are `alloc shared` of one dtype and one constant
// shape, and neither is in `exclude` (pipeline stages, which are ordered by
// their own waits). X is then renamed to Y everywhere and its alloc removed;
// Y's life extends to X's last use. Greedy in order of first use.
// Out: one note per reuse ("shared O_shared reuses Q_shared (dead after
// statement 5 of the kernel, 32768 bytes)").
// Barriers: InsertBarriers runs after this pass and sees the reads of the
// old contents and the writes of the new ones under one name, so it orders
// them (a write-after-read barrier), as it does for any reused buffer.
//
// Thread-safety: pure function.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tilelang/ir/tile_ir.h"

namespace tl::gpu {

std::vector<std::string> ReuseDeadSharedBuffers(ir::Function& f, const std::set<std::string>& exclude);

}  // namespace tl::gpu
