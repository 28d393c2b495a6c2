// ForwardCastIntoWgmmaA: see lower.h for the contract.
//
// FlashAttention's P·V reads P as wgmma's register operand A: the program
// writes `T.copy(acc_s, acc_s_cast)` (f32 accumulator -> f16/bf16 fragment of
// the same layout), which lowers to a loop nest
//
//   for ... (constant bounds) { lets...; acc_s_cast[X] = cast<bf16>(acc_s[X]) }
//
// and the wgmma packs acc_s_cast's slots pairwise (cvt.rn.bf16x2.f32). In the
// CUDA printer a 16-bit register element is an f32 register holding the
// rounded value, so per element the copy costs a round trip (cvt to 16 bits,
// shift back) and the fragment costs a second register array as large as the
// accumulator's -- ~3 instructions per score and 32-64 registers per thread in
// a loop bound by issue slots and registers. Packing acc_s's own f32 slots
// gives the same bits (round-to-nearest of the f32 value once, as the copy
// then the exact re-pack of an already representable value did), so where the
// cast fragment has no other use the copy goes away and the wgmma reads the
// f32 accumulator.
//
// Conditions (each checked; otherwise the kernel is left alone):
//  - the nest's loops have constant bounds and its innermost body is lets and
//    ONE store D[X] = cast<T>(S[X]) (optionally cast<T>(cast<f32>(S[X]))),
//    D a register buffer of T in {f16, bf16}, S an f32 register buffer, the
//    same index expression X on both sides (so slot x of D is slot x of S);
//  - enumerating the loops, X takes every slot of D exactly once (a partial
//    copy would leave stale slots the wgmma still reads);
//  - a later statement of the same block is an SWgmma whose a_frag is D; in
//    between, nothing writes S (no store, no wgmma or mma accumulating into it,
//    no extern call taking its address) and nothing mentions D;
//  - nothing else in the kernel mentions D, and D's address is never taken.
//
// Where the copy cannot be forwarded because S is overwritten before the
// wgmma (FlashAttention-3's overlap: P_k is cast at the end of step k, S_{k+1}
// is issued into acc_s before P_k V_k at step k+1) or the wgmma is left in
// flight, but D's only mentions in the whole kernel are this copy and
// register-A wgmmas reading it, D is kept PACKED (SimtBuffer::packed_pairs:
// elements / 2 32-bit registers, register j = slots 2j (low) and 2j + 1 as a
// bf16x2 / f16x2 pair) where every register those wgmmas take is such a slot
// pair (2j, 2j + 1) -- the m64nNk16 A fragment of lower.cc always is: slot
// (2 j + r % 2) * col_slots + 4 s + 2 (r / 2) + h with col_slots even --
// and D has an even number of slots. The copy nest becomes one flat loop of
// pair stores D[j] = pack2(S[2j], S[2j + 1]) (SStore::hi; CUDA: one
// cvt.rn.{bf16x2,f16x2}.f32 per pair): the nest writes every slot of D exactly
// once from the same slot of S, so the order of the stores does not matter.
// Same bits as rounding each slot at the copy (round to nearest even, once),
// and the wgmma reads the registers without packing. P then costs half of
// S's registers instead of as many (at 128x128 tiles, 256 consumer threads:
// 32 instead of 64 per thread), which is what kept ptxas spilling.
// Where some register is not a slot pair (never for the lowering's wgmmas,
// kept as the fallback) D keeps f32 values instead: the copy stores S[X]
// unrounded and D becomes an f32 fragment the wgmma packs
// (cvt.rn.{b,}f16x2.f32: the same bits as rounding at the copy then packing
// the representable value).
#include <functional>
#include <map>
#include <set>

#include "simt_walk.h"
#include "tilelang/lowering/gpu/lower.h"

namespace tl::gpu {
namespace {

struct CastCopy {
  std::string dst, src;
};

// The cast-copy nest of the file comment, with every slot of dst written once;
// nullopt otherwise. `bufs`: the kernel's buffers by name.
std::optional<CastCopy> MatchCastCopy(const SStmt& s, const std::map<std::string, const SimtBuffer*>& bufs) {
  const SStore* store = WholeFragmentStore(s, bufs);
  if (!store) return std::nullopt;
  const SimtBuffer* d = bufs.at(store->buffer);
  const auto* cast = ir::As<ir::Cast>(store->value);
  if (!cast) return std::nullopt;
  const ir::Expr* v = &*cast->value;
  if (const auto* c2 = ir::As<ir::Cast>(*v); c2 && c2->dtype == ir::DType::kF32) v = &*c2->value;
  const auto* load = ir::As<ir::Load>(*v);
  if (!load || load->indices.size() != 1 || !(load->indices[0] == store->index)) return std::nullopt;
  auto src = bufs.find(load->buffer);
  if (src == bufs.end() || src->second->space != Space::kRegister) return std::nullopt;
  if ((d->dtype != ir::DType::kF16 && d->dtype != ir::DType::kBF16) || cast->dtype != d->dtype ||
      src->second->dtype != ir::DType::kF32 || d->elements != src->second->elements) {
    return std::nullopt;
  }
  return CastCopy{store->buffer, load->buffer};
}

// Register-A wgmmas in `b` (nested) reading `frag`; `pairs_ok` is cleared
// where one of them takes a register that is not slots (2j, 2j + 1).
int WgmmaAReads(const SBlock& b, const std::string& frag, bool* pairs_ok) {
  int n = 0;
  for (const SStmt& s : b) {
    if (const auto* f = std::get_if<SFor>(&s.node)) n += WgmmaAReads(f->body, frag, pairs_ok);
    if (const auto* c = std::get_if<SIf>(&s.node)) {
      n += WgmmaAReads(c->then_body, frag, pairs_ok) + WgmmaAReads(c->else_body, frag, pairs_ok);
    }
    if (const auto* w = std::get_if<SWarpRoles>(&s.node)) {
      n += WgmmaAReads(w->producer, frag, pairs_ok) + WgmmaAReads(w->consumer, frag, pairs_ok);
    }
    if (const auto* w = std::get_if<SWgmma>(&s.node); w && w->a_frag == frag) {
      ++n;
      if (w->a_slots.size() % 2 != 0) *pairs_ok = false;
      for (size_t x = 0; x + 1 < w->a_slots.size(); x += 2) {
        if (w->a_slots[x] % 2 != 0 || w->a_slots[x + 1] != w->a_slots[x] + 1) *pairs_ok = false;
      }
    }
  }
  return n;
}

// The pair loop replacing the cast-copy nest of dst (`elements` slots) from src:
//   for tl_pj in unroll(0, elements / 2): dst[tl_pj] = pack2(src[2 tl_pj], src[2 tl_pj + 1])
SStmt PairLoop(const std::string& dst, const std::string& src, int64_t elements) {
  const ir::Expr j = ir::MakeVar("tl_pj", ir::DType::kI32);
  const ir::Expr lo = ir::MakeBinary(ir::BinaryOp::kMul, j, ir::MakeInt(2));
  const ir::Expr hi = ir::MakeBinary(ir::BinaryOp::kAdd, lo, ir::MakeInt(1));
  SBlock body;
  body.push_back(SStmt{SStore{dst, j, ir::MakeLoad(src, {lo}, ir::DType::kF32), ir::MakeLoad(src, {hi}, ir::DType::kF32)}});
  return SStmt{SFor{"tl_pj", ir::MakeInt(0), ir::MakeInt(elements / 2), ir::MakeInt(1), true, std::move(body)}};
}

struct Kept {
  std::vector<std::string> packed, unrounded;
};

int ForwardIn(SBlock& b, SimtKernel* k, const std::map<std::string, const SimtBuffer*>& bufs,
              std::vector<std::string>* forwarded, Kept* kept) {
  int n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (auto* f = std::get_if<SFor>(&b[i].node)) n += ForwardIn(f->body, k, bufs, forwarded, kept);
    if (auto* c = std::get_if<SIf>(&b[i].node)) {
      n += ForwardIn(c->then_body, k, bufs, forwarded, kept);
      n += ForwardIn(c->else_body, k, bufs, forwarded, kept);
    }
    if (auto* w = std::get_if<SWarpRoles>(&b[i].node)) {
      n += ForwardIn(w->producer, k, bufs, forwarded, kept);
      n += ForwardIn(w->consumer, k, bufs, forwarded, kept);
    }
    const std::optional<CastCopy> cc = MatchCastCopy(b[i], bufs);
    if (!cc || k->addressed.count(cc->dst)) continue;
    // The consuming wgmma, with nothing in between writing the source or touching the copy.
    size_t j = i + 1;
    bool clean = true;
    for (; j < b.size(); ++j) {
      if (const auto* w = std::get_if<SWgmma>(&b[j].node); w && w->a_frag == cc->dst) break;
      if (Writes(b[j], cc->src) || Mentions(b[j], cc->dst)) {
        clean = false;
        break;
      }
    }
    SWgmma* w = clean && j < b.size() ? &std::get<SWgmma>(b[j].node) : nullptr;
    // Not into a wgmma left in flight (wg_wait): the program may write S while the
    // group still reads its copy, which is fine for the copy but not for S itself.
    // No other mention of the copy anywhere in the kernel: its one store and the wgmma.
    if (!w || w->c == cc->src || w->wait_pending != 0 || LeafMentions(k->body, cc->dst) != 2) {
      // Not forwarded: where only register-A wgmmas read D, D stays packed (every wgmma register
      // is a slot pair (2j, 2j + 1)) or else unrounded in f32.
      bool pairs_ok = true;
      const int reads = WgmmaAReads(k->body, cc->dst, &pairs_ok);
      const int64_t elements = bufs.at(cc->dst)->elements;
      if (reads > 0 && LeafMentions(k->body, cc->dst) == 1 + reads && pairs_ok && elements % 2 == 0) {
        // The matched nest writes every slot of D once from the same slot of S, so one flat
        // loop over the pairs stores the same values in another order.
        b[i] = PairLoop(cc->dst, cc->src, elements);
        for (SimtBuffer& buf : k->buffers) {
          if (buf.name == cc->dst) buf.packed_pairs = true;
        }
        kept->packed.push_back(cc->dst);
      } else if (reads > 0 && LeafMentions(k->body, cc->dst) == 1 + reads) {
        auto* store = const_cast<SStore*>(WholeFragmentStore(b[i], bufs));  // a node of b[i]
        const auto* cast = ir::As<ir::Cast>(store->value);
        const ir::Expr* v = &*cast->value;
        if (const auto* c2 = ir::As<ir::Cast>(*v); c2 && c2->dtype == ir::DType::kF32) v = &*c2->value;
        const ir::Expr load = *v;
        store->value = load;
        for (SimtBuffer& buf : k->buffers) {
          if (buf.name == cc->dst) buf.dtype = ir::DType::kF32;
        }
        kept->unrounded.push_back(cc->dst);
      }
      continue;
    }
    w->a_frag = cc->src;
    forwarded->push_back(cc->dst + " -> " + cc->src);
    b.erase(b.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
    ++n;
  }
  return n;
}

}  // namespace

std::string ForwardCastIntoWgmmaA(SimtKernel* k) {
  std::map<std::string, const SimtBuffer*> bufs;
  for (const SimtBuffer& b : k->buffers) bufs[b.name] = &b;
  std::vector<std::string> forwarded;
  Kept kp;
  ForwardIn(k->body, k, bufs, &forwarded, &kp);
  std::string packed, unrounded, kept;
  for (const std::string& u : kp.packed) packed += (packed.empty() ? "" : ", ") + u;
  for (const std::string& u : kp.unrounded) unrounded += (unrounded.empty() ? "" : ", ") + u;
  if (!packed.empty()) {
    kept = "wgmma register operand A kept packed (bf16x2/f16x2 registers, half the f32 fragment's; the cast copy "
           "is one cvt.rn per slot pair): " + packed;
  }
  if (!unrounded.empty()) {
    kept += (kept.empty() ? "" : "; ") +
            std::string("wgmma register operand A kept in f32 (the cast copy stores the value unrounded, the wgmma's "
                        "pack rounds; its registers are not slot pairs (2j, 2j + 1)): ") + unrounded;
  }
  if (forwarded.empty()) return kept;
  std::set<std::string> gone;
  std::string list;
  for (const std::string& f : forwarded) {
    gone.insert(f.substr(0, f.find(' ')));
    list += (list.empty() ? "" : ", ") + f;
  }
  std::vector<SimtBuffer> keep;
  for (SimtBuffer& b : k->buffers) {
    if (!gone.count(b.name)) keep.push_back(std::move(b));
  }
  k->buffers = std::move(keep);
  return "wgmma register operand A packed from the f32 accumulator (the cast copy and its registers removed): " + list +
         (kept.empty() ? "" : "; " + kept);
}

}  // namespace tl::gpu
