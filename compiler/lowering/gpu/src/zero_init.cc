// ZeroInitWgmmaAccumulators: see lower.h for the contract.
//
// FlashAttention clears its score accumulator every k-step (T.clear(acc_s)
// before T.gemm(Q_s, K_s, acc_s)): a per-slot loop storing 0 into every
// register of acc_s, 32-64 moves per thread per k-step in a loop bound by
// issue slots. wgmma has a scale-d input for exactly this: with scale-d = 0
// an instruction computes D = A * B without reading D. Its k-steps chain
// through the accumulator, so the first k-step of the unit gets scale-d = 0
// (every m-tile and n-tile of that k-step writes its own registers: together
// all of C) and the later ones 1, and the fill goes away.
//
// Conditions (each checked; otherwise the kernel is left alone):
//  - the fill is a whole-fragment loop nest (WholeFragmentStore) storing the
//    constant 0 into register buffer C;
//  - a later statement of the same block is a synchronous (wait_group 0) wgmma
//    accumulating into C whose instructions of one k-step write every slot of
//    C (m_tiles * n_tiles * n / 2 registers per thread == C's elements), and
//    nothing in between reads or writes C.
#include <map>

#include "simt_walk.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

bool IsZero(const ir::Expr& e) {
  const ir::Expr v = ir::FoldConstants(e);
  if (const auto* f = ir::As<ir::FloatImm>(v)) return f->value == 0.0;  // +0.0 and -0.0 both clear
  if (const auto* i = ir::As<ir::IntImm>(v)) return i->value == 0;
  if (const auto* c = ir::As<ir::Cast>(v)) return IsZero(*c->value);
  return false;
}

int ZeroIn(SBlock& b, const std::map<std::string, const SimtBuffer*>& bufs, std::vector<std::string>* done) {
  int n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (auto* f = std::get_if<SFor>(&b[i].node)) n += ZeroIn(f->body, bufs, done);
    if (auto* c = std::get_if<SIf>(&b[i].node)) {
      n += ZeroIn(c->then_body, bufs, done);
      n += ZeroIn(c->else_body, bufs, done);
    }
    if (auto* w = std::get_if<SWarpRoles>(&b[i].node)) {
      n += ZeroIn(w->producer, bufs, done);
      n += ZeroIn(w->consumer, bufs, done);
    }
    const SStore* store = WholeFragmentStore(b[i], bufs);
    if (!store || !IsZero(store->value)) continue;
    const auto c = bufs.find(store->buffer);
    size_t j = i + 1;
    for (; j < b.size(); ++j) {
      if (const auto* w = std::get_if<SWgmma>(&b[j].node); w && w->c == c->first) break;
      if (Mentions(b[j], c->first)) break;
    }
    if (j == b.size()) continue;
    auto* w = std::get_if<SWgmma>(&b[j].node);
    if (!w || w->c != c->first || w->zero_init || w->k_steps < 1 ||
        w->m_tiles * w->n_tiles * (w->n / 2) != c->second->elements) {
      continue;
    }
    w->zero_init = true;
    done->push_back(c->first);
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++n;
  }
  return n;
}

}  // namespace

std::string ZeroInitWgmmaAccumulators(SimtKernel* k) {
  std::map<std::string, const SimtBuffer*> bufs;
  for (const SimtBuffer& b : k->buffers) bufs[b.name] = &b;
  std::vector<std::string> done;
  if (ZeroIn(k->body, bufs, &done) == 0) return "";
  std::string list;
  for (const std::string& d : done) list += (list.empty() ? "" : ", ") + d;
  return "wgmma accumulator cleared by the first k-step's scale-d = 0 (the fill removed): " + list;
}

}  // namespace tl::gpu
