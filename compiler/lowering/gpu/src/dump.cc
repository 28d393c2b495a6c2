// Dump(SimtKernel): a readable listing for tests and debugging.
#include <sstream>

#include "tilelang/lowering/gpu/simt_ir.h"
#include "tilelang/lowering/gpu/wgmma.h"

namespace tl::gpu {
namespace {

void DumpBlock(const SBlock& b, int ind, std::ostringstream& o) {
  const std::string pad(static_cast<size_t>(ind) * 2, ' ');
  for (const SStmt& s : b) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SLet>) {
            o << pad << "let " << n.name << " = " << (n.opaque ? "opaque " : "") << ir::Print(n.value) << "\n";
          } else if constexpr (std::is_same_v<T, SVar>) {
            o << pad << "var " << n.name << ": " << ir::DTypeName(n.dtype)
              << (n.init ? " = " + ir::Print(*n.init) : std::string()) << "\n";
          } else if constexpr (std::is_same_v<T, SAssign>) {
            o << pad << n.name << " = " << ir::Print(n.value) << "\n";
          } else if constexpr (std::is_same_v<T, SStore>) {
            if (n.hi) {  // a pair store into a packed buffer (simt_ir.h)
              o << pad << n.buffer << "[" << ir::Print(n.index) << "] = pack2(" << ir::Print(n.value) << ", "
                << ir::Print(*n.hi) << ")\n";
            } else {
              o << pad << n.buffer << "[" << ir::Print(n.index) << "] = " << ir::Print(n.value) << "\n";
            }
          } else if constexpr (std::is_same_v<T, SAtomicAdd>) {
            o << pad << "atomic_add " << n.buffer << "[" << ir::Print(n.index) << "], " << ir::Print(n.value);
            for (const ir::Expr& m : n.more) o << ", " << ir::Print(m);
            o << "\n";
          } else if constexpr (std::is_same_v<T, SFor>) {
            o << pad << "for " << n.var << " in " << (n.unroll ? "unroll" : "serial") << "(" << ir::Print(n.start)
              << ", " << ir::Print(n.stop) << ", " << ir::Print(n.step) << ") {\n";
            DumpBlock(n.body, ind + 1, o);
            o << pad << "}\n";
          } else if constexpr (std::is_same_v<T, SIf>) {
            o << pad << "if " << ir::Print(n.cond) << " {\n";
            DumpBlock(n.then_body, ind + 1, o);
            if (!n.else_body.empty()) {
              o << pad << "} else {\n";
              DumpBlock(n.else_body, ind + 1, o);
            }
            o << pad << "}\n";
          } else if constexpr (std::is_same_v<T, SBarrier>) {
            o << pad << (n.cluster ? "barrier.cluster\n" : "barrier\n");
          } else if constexpr (std::is_same_v<T, SLaneReduce>) {
            o << pad << "lane_reduce " << ir::ReduceOpName(n.op) << " " << n.var << " width=" << n.width << "\n";
          } else if constexpr (std::is_same_v<T, SComment>) {
            o << pad << "# " << n.text << "\n";
          } else if constexpr (std::is_same_v<T, SCopyAsync>) {
            o << pad << "cp.async." << n.bytes << " " << n.dst << "[" << ir::Print(n.dst_index) << "] <- " << n.src << "["
              << ir::Print(n.src_index) << "]" << (n.src_valid ? " if " + ir::Print(*n.src_valid) + " else zeros" : std::string())
              << "\n";
          } else if constexpr (std::is_same_v<T, SAsyncCommit>) {
            o << pad << "cp.async.commit\n";
          } else if constexpr (std::is_same_v<T, SAsyncWait>) {
            o << pad << "cp.async.wait " << n.pending << "\n";
          } else if constexpr (std::is_same_v<T, SMbarInit>) {
            o << pad << "mbarrier.init " << n.bar << "[0:" << n.count << "]"
              << (n.arrivals != 1 ? " arrivals=" + std::to_string(n.arrivals) : std::string()) << "\n";
          } else if constexpr (std::is_same_v<T, STmaLoad>) {
            o << pad << "tma.load map" << n.map << " (";
            for (size_t i = 0; i < n.coords.size(); ++i) o << (i ? ", " : "") << ir::Print(n.coords[i]);
            o << ") -> " << n.dst << "[" << ir::Print(n.dst_index) << "] on " << n.bar << "[" << ir::Print(n.bar_index)
              << "] " << n.bytes << " B" << (n.multicast ? " multicast" : "") << "\n";
          } else if constexpr (std::is_same_v<T, SBulkStore>) {
            o << pad << "bulk.store " << n.dst << "[" << ir::Print(n.dst_index) << "] <- " << n.src << "[" << ir::Print(n.src_index)
              << "] " << ir::Print(n.bytes) << " B\n";
          } else if constexpr (std::is_same_v<T, STmaStore>) {
            o << pad << "tma.store " << n.dst << " map" << n.map << " (";
            for (size_t i = 0; i < n.coords.size(); ++i) o << (i ? ", " : "") << ir::Print(n.coords[i]);
            o << ") <- " << n.src << "[" << ir::Print(n.src_index) << "]\n";
          } else if constexpr (std::is_same_v<T, SBulkCommit>) {
            o << pad << "bulk.commit\n";
          } else if constexpr (std::is_same_v<T, SBulkWait>) {
            o << pad << "bulk.wait " << n.pending << (n.read ? " read" : "") << "\n";
          } else if constexpr (std::is_same_v<T, SMbarArrive>) {
            o << pad << "mbarrier.arrive " << n.bar << "[" << ir::Print(n.index) << "]" << (n.each_thread ? " each thread" : "")
              << (n.peer ? " and the peer's" : "") << "\n";
          } else if constexpr (std::is_same_v<T, SSetMaxNReg>) {
            o << pad << "setmaxnreg." << (n.inc ? "inc " : "dec ") << n.regs << "\n";
          } else if constexpr (std::is_same_v<T, SNamedBarrier>) {
            o << pad << (n.arrive ? "bar.arrive " : "bar.sync ") << n.id << ", " << n.threads << (n.fence || n.arrive ? "" : " (no fence)")
              << "\n";
          } else if constexpr (std::is_same_v<T, SWarpRoles>) {
            o << pad << "producer (tl_tid >= " << n.consumers << ") {\n";
            DumpBlock(n.producer, ind + 1, o);
            o << pad << "} consumers (tl_tid < " << n.consumers << ") {\n";
            DumpBlock(n.consumer, ind + 1, o);
            o << pad << "}\n";
          } else if constexpr (std::is_same_v<T, SMbarWait>) {
            o << pad << "mbarrier.wait " << n.bar << "[" << ir::Print(n.index) << "] parity " << ir::Print(n.parity) << "\n";
          } else if constexpr (std::is_same_v<T, SCopyVec>) {
            o << pad << n.dst << "[" << ir::Print(n.dst_index) << " +: " << n.lanes << "] = " << n.src << "["
              << ir::Print(n.src_index) << " +: " << n.lanes << "]\n";
          } else if constexpr (std::is_same_v<T, SMma>) {
            o << pad << "mma." << MmaKindName(n.kind) << " " << n.c << " += " << n.a << "[" << ir::Print(n.a_base)
              << " rs=" << n.a_row_stride << " cs=" << n.a_col_stride << "] * " << n.b << "[" << ir::Print(n.b_base)
              << " ks=" << n.b_k_stride << " ns=" << n.b_n_stride << "] k0=" << ir::Print(n.k0) << " tiles="
              << n.m_tiles << "x" << n.n_tiles << " R=" << n.R << (n.C > 1 ? " C=" + std::to_string(n.C) : std::string())
              << (n.sm75 ? " sm75 " + MmaShapeName(n.kind, true) : std::string()) << "\n";
          } else if constexpr (std::is_same_v<T, SAmdMma>) {
            o << pad << MatrixCoreName(n.core) << "." << MmaKindName(n.kind) << " " << n.c << " += " << n.a << "["
              << ir::Print(n.a_base) << " rs=" << n.a_row_stride << " cs=" << n.a_col_stride << "] * " << n.b << "["
              << ir::Print(n.b_base) << " ks=" << n.b_k_stride << " ns=" << n.b_n_stride << "] k0=" << ir::Print(n.k0)
              << " tiles=" << n.m_tiles << "x" << n.n_tiles << " R=" << n.R << "\n";
          } else if constexpr (std::is_same_v<T, SWgmma>) {
            auto op = [&](const SWgmmaOperand& x) {
              o << x.buffer << "@[";
              for (size_t i = 0; i < x.starts.size(); ++i) o << (i ? ", " : "") << ir::Print(x.starts[i]);
              o << " +" << x.tile_bytes << "/tile lbo=" << x.lbo << " sbo=" << x.sbo
                << " " << SwizzleName(x.swizzle) << (x.mn_major ? " mn-major" : " k-major") << "]";
            };
            o << pad << "wgmma.m64n" << n.n << "k" << WgmmaK(n.kind) << "." << MmaKindName(n.kind) << " " << n.c << " += ";
            if (n.a_frag.empty()) {
              op(n.a);
            } else {
              o << n.a_frag << "@regs[";
              for (size_t i = 0; i < n.a_slots.size() && i < 8; ++i) o << (i ? " " : "") << n.a_slots[i];
              o << (n.a_slots.size() > 8 ? " ...]" : "]");
            }
            o << " * ";
            op(n.b);
            o << " k_steps=" << n.k_steps << " tiles=" << n.m_tiles << "x" << n.n_tiles << " warpgroups=" << n.warpgroups << " wait_group=" << n.wait_pending
              << (n.zero_init ? " zero_init" : "") << "\n";
          } else if constexpr (std::is_same_v<T, SWgmmaWait>) {
            o << pad << "wgmma.wait_group " << n.pending;
            for (const std::string& c : n.c) o << " " << c;
            o << "\n";
          } else if constexpr (std::is_same_v<T, SStmatrix>) {
            o << pad << "stmatrix.x4 " << n.buffer << "[" << ir::Print(n.index) << " +: 8] <-";
            for (const ir::Expr& v : n.values) o << " " << ir::Print(v);
            o << "\n";
          } else if constexpr (std::is_same_v<T, SCallExtern>) {
            o << pad << "call_extern " << n.name << "(";
            for (size_t i = 0; i < n.args.size(); ++i) {
              o << (i ? ", " : "");
              if (n.args[i].address) o << "&" << n.args[i].buffer << "[";
              o << ir::Print(n.args[i].value) << (n.args[i].address ? "]" : "");
            }
            o << ")\n";
          }
        },
        s.node);
  }
}

}  // namespace

int64_t MmaK(MmaKind k) {
  switch (k) {
    case MmaKind::kF16:
    case MmaKind::kBF16: return 16;
    case MmaKind::kTF32: return 8;
    case MmaKind::kI8: return 32;
  }
  return 16;
}

int64_t MmaStepK(MmaKind kind, bool sm75) {
  if (sm75 && kind == MmaKind::kF16) return 8;
  if (sm75 && kind == MmaKind::kI8) return 16;
  return MmaK(kind);
}

std::string MmaShapeName(MmaKind kind, bool sm75) {
  const int64_t k = MmaStepK(kind, sm75);
  return (sm75 && kind == MmaKind::kI8 ? "m8n8k" : "m16n8k") + std::to_string(k);
}

const char* MmaKindName(MmaKind k) {
  switch (k) {
    case MmaKind::kF16: return "f16";
    case MmaKind::kBF16: return "bf16";
    case MmaKind::kTF32: return "tf32";
    case MmaKind::kI8: return "s8";
  }
  return "?";
}

const char* MatrixCoreName(MatrixCore c) { return c == MatrixCore::kMfma ? "mfma" : "wmma"; }
int64_t MatrixCoreWave(MatrixCore c) { return c == MatrixCore::kMfma ? 64 : 32; }
int64_t MatrixCoreRegs(MatrixCore c) { return c == MatrixCore::kMfma ? 4 : 8; }
int64_t AmdMatrixK(MatrixCore c, MmaKind k) { return c == MatrixCore::kMfma && k == MmaKind::kI8 ? 32 : 16; }

std::string Dump(const SimtKernel& k) {
  std::ostringstream o;
  o << "simt " << k.name << " threads=" << k.threads << " shared=" << k.shared_bytes
    << (k.cluster > 1 ? " cluster=" + std::to_string(k.cluster) : std::string()) << "\n";
  for (const SimtBuffer& b : k.buffers) {
    o << "  buffer " << b.name << ": " << (b.space == Space::kShared ? "shared" : "registers") << "["
      << b.elements << "] " << ir::DTypeName(b.dtype);
    if (b.space == Space::kShared) o << " @" << b.shared_offset;
    if (b.swizzle != SmemSwizzle::kNone) o << " swizzle " << SwizzleName(b.swizzle);
    if (b.packed_pairs) o << " packed " << ir::DTypeName(b.dtype) << "x2 (" << b.elements / 2 << " registers)";
    o << "\n";
  }
  for (size_t i = 0; i < k.tensor_maps.size(); ++i) {
    const TensorMapDesc& m = k.tensor_maps[i];
    o << "  tensor_map " << i << ": " << k.params.at(static_cast<size_t>(m.param)).name << " box";
    for (int64_t b : m.box) o << " " << b;
    o << " swizzle " << SwizzleName(m.swizzle) << "\n";
  }
  DumpBlock(k.body, 1, o);
  return o.str();
}

}  // namespace tl::gpu
