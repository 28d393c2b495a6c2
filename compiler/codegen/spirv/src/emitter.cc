// EmitSpirv: SimtKernel -> SPIR-V 1.3 compute module (see spirv_codegen.h).
//
// Values: every Tile IR dtype has one SSA representation: bool -> OpTypeBool,
// integers -> OpTypeInt of their width and signedness, f16/bf16/f32 -> 32-bit
// float (f16/bf16 rounded wherever they are stored, assigned or cast, as the
// SIMT IR specifies), f64 -> 64-bit float. Memory keeps the dtype's own bits:
// f16 as OpTypeFloat 16, bf16 as a 16-bit integer, bool tensors as bytes; f32
// buffers that atomic_add touches are held as 32-bit integers (the add is a
// compare-exchange loop, which needs no float-atomics extension).
//
// Control flow is structured: SIf -> OpSelectionMerge; SFor -> a loop whose
// header holds OpLoopMerge (Unroll when the SIMT IR says so), with the loop
// variable in a Function variable; selects and && / || whose other side loads
// memory become branches, so a guard keeps an out-of-bounds load from running.
#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <typeinfo>

#include "tilelang/codegen/spirv/spirv_builder.h"
#include "tilelang/codegen/spirv/spirv_codegen.h"
#include "tilelang/codegen/spirv/spirv_tools.h"

#include <spirv/unified1/GLSL.std.450.h>

namespace tl::codegen::spirv {
namespace {

using ir::DType;
using ir::Expr;
using SC = spv::StorageClass;

constexpr uint32_t kScopeDevice = 1, kScopeWorkgroup = 2, kScopeSubgroup = 3;
// AcquireRelease | UniformMemory | WorkgroupMemory.
constexpr uint32_t kBarrierSemantics = 0x8 | 0x40 | 0x100;

bool Is16F(DType t) { return t == DType::kF16 || t == DType::kBF16; }

std::string Demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

struct Val {
  uint32_t id = 0;
  DType t = DType::kI32;
};

struct BufInfo {
  gpu::Space space = gpu::Space::kRegister;
  DType dtype = DType::kF32;
  uint32_t var = 0;
  uint32_t elem = 0;      // element type in memory
  uint32_t elem_ptr = 0;  // pointer to one element
  bool as_u32 = false;    // f32 held as u32 bits (atomics)
  uint32_t binding = 0;   // global: the storage buffer's binding
};

struct Binding {
  bool is_var = false;  // id is a Function-variable pointer (else an SSA value)
  uint32_t id = 0;
  DType t = DType::kI32;
};

bool HasLoad(const Expr& e) {
  bool found = false;
  ir::WalkExpr(e, [&](const Expr& x) {
    if (ir::Kind(x) == ir::ExprKind::kLoad) found = true;
  });
  return found;
}

class Emitter {
 public:
  Emitter(const gpu::SimtKernel& k, const SpirvOptions& o) : k_(k), o_(o) {}

  StatusOr<SpirvModule> Run() {
    SpirvModule out;
    out.entry_point = k_.name;
    out.block = k_.block;
    out.threads = k_.threads;
    b_.Capability(spv::Capability::Shader);
    Scan(k_.body);
    if (!err_.empty()) return Fail();
    if (!mma_.empty() && o_.cooperative_matrix) CoopSetup();
    if (!err_.empty()) return Fail();

    // Tensors: storage buffers, binding k in parameter order.
    std::set<std::string> symbols(o_.symbols.begin(), o_.symbols.end());
    uint32_t binding = 0;
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const gpu::SimtParam& p = k_.params[i];
      if (!p.pointer) continue;
      DeclareGlobal(p, binding++);
      out.buffer_params.push_back(static_cast<int>(i));
    }
    DeclarePushConstants(symbols, &out);
    for (const gpu::SimtBuffer& sb : k_.buffers) {
      if (sb.space == gpu::Space::kShared) DeclareShared(sb);
    }
    // Builtins.
    const uint32_t u32 = U32();
    const uint32_t v3 = b_.TypeVector(u32, 3);
    wg_id_ = b_.GlobalVariable(b_.TypePointer(SC::Input, v3), SC::Input);
    b_.Decorate(wg_id_, spv::Decoration::BuiltIn, {static_cast<uint32_t>(spv::BuiltIn::WorkgroupId)});
    local_index_ = b_.GlobalVariable(b_.TypePointer(SC::Input, u32), SC::Input);
    b_.Decorate(local_index_, spv::Decoration::BuiltIn, {static_cast<uint32_t>(spv::BuiltIn::LocalInvocationIndex)});
    interface_ = {wg_id_, local_index_};
    if (o_.subgroup_shuffle && shuffle_reduces_ > 0) {
      subgroup_size_ = b_.GlobalVariable(b_.TypePointer(SC::Input, u32), SC::Input);
      b_.Decorate(subgroup_size_, spv::Decoration::BuiltIn, {static_cast<uint32_t>(spv::BuiltIn::SubgroupSize)});
      interface_.push_back(subgroup_size_);
    }

    const uint32_t void_t = b_.TypeVoid();
    fn_ = b_.BeginFunction(void_t, b_.TypeFunction(void_t));
    cur_label_ = b_.entry_label();
    scopes_.emplace_back();
    Prologue();
    for (const gpu::SimtBuffer& sb : k_.buffers) {
      if (sb.space == gpu::Space::kRegister) DeclareRegisters(sb);
    }
    if (o_.subgroup_shuffle && shuffle_reduces_ > 0) SubgroupCheck();
    Block(k_.body);
    b_.EndFunction();
    if (!err_.empty()) return Fail();
    b_.EntryPoint(fn_, k_.name, interface_);
    b_.LocalSize(fn_, static_cast<uint32_t>(k_.block[0]), static_cast<uint32_t>(k_.block[1]),
                 static_cast<uint32_t>(k_.block[2]));
    b_.Name(fn_, k_.name);

    if (coop_) {
      out.cooperative_mma = static_cast<int>(coop_mma_emitted_);
      out.notes.push_back(
          std::to_string(coop_mma_emitted_) + " tensor-core k-step statement(s) as VK_KHR_cooperative_matrix 16x8x16 (f16 A/B, f32 "
          "accumulators; warp tile = the mma.sync accumulator layout, transposed: C^T = B^T A^T); accumulators " +
          (coop_hoisted_ > 0 ? "kept in cooperative matrices across " + std::to_string(coop_hoisted_) +
                                   " loop(s) and converted through Workgroup memory before and after each"
                             : std::string("converted through Workgroup memory around every k-step")) +
          (coop_unhoisted_ > 0 ? " (" + std::to_string(coop_unhoisted_) + " k-step statement(s) converted individually)" : ""));
      if (coop_prefetched_ > 0) {
        out.notes.push_back("the next k tile's global loads issued into registers before the k-steps of " +
                            std::to_string(coop_prefetched_) + " loop(s) (register prefetch)");
      }
    }
    out.words = b_.Finish(kSpirv13);
    out.version_word = kSpirv13;
    if (o_.subgroup_shuffle && shuffle_reduces_ > 0) features_.insert("vk.subgroup.shuffle");
    out.features.assign(features_.begin(), features_.end());
    out.shared_bytes = shared_bytes_;
    out.lane_reduces = lane_reduces_;
    if (lane_reduces_ > 0) {
      out.notes.push_back(std::to_string(lane_reduces_) + " lane reduction(s) (widest " + std::to_string(max_width_) +
                          " lanes) through " +
                          (o_.subgroup_shuffle && shuffle_reduces_ > 0
                               ? "subgroup shuffles when the subgroup layout allows, else workgroup memory"
                               : "workgroup memory"));
    }
    if (uniform_store_barriers_ > 0) {
      out.notes.push_back(std::to_string(uniform_store_barriers_) +
                          " barrier(s) before scalar shared stores that read shared memory (every thread runs them)");
    }
    return out;
  }

 private:
  Status Fail() const {
    return Status(err_code_, "SPIR-V backend, kernel " + k_.name + ": " + err_);
  }
  // The cooperative-matrix scheme does not fit this kernel (not a bug: the
  // caller builds the other variants only).
  void CoopUnfit(const std::string& why) {
    if (err_.empty()) {
      err_ = "cooperative matrix: " + why;
      err_code_ = StatusCode::kFailedPrecondition;
    }
  }
  void Error(const std::string& what) {
    if (err_.empty()) err_ = what;
  }

  // ---- types ----------------------------------------------------------------
  void Feature(const std::string& token) { features_.insert("vk.feature." + token); }
  uint32_t U32() { return b_.TypeInt(32, false); }
  uint32_t I32() { return b_.TypeInt(32, true); }
  uint32_t F32() { return b_.TypeFloat(32); }
  uint32_t Bool() { return b_.TypeBool(); }
  uint32_t IntT(uint32_t width, bool is_signed) {
    if (width == 8) {
      b_.Capability(spv::Capability::Int8);
      Feature("shaderInt8");
    } else if (width == 16) {
      b_.Capability(spv::Capability::Int16);
      Feature("shaderInt16");
    } else if (width == 64) {
      b_.Capability(spv::Capability::Int64);
      Feature("shaderInt64");
    }
    return b_.TypeInt(width, is_signed);
  }
  uint32_t FloatT(uint32_t width) {
    if (width == 16) {
      b_.Capability(spv::Capability::Float16);
      Feature("shaderFloat16");
    } else if (width == 64) {
      b_.Capability(spv::Capability::Float64);
      Feature("shaderFloat64");
    }
    return b_.TypeFloat(width);
  }
  uint32_t Rep(DType t) {
    switch (t) {
      case DType::kBool: return Bool();
      case DType::kI8: return IntT(8, true);
      case DType::kI16: return IntT(16, true);
      case DType::kI32: return I32();
      case DType::kI64: return IntT(64, true);
      case DType::kU8: return IntT(8, false);
      case DType::kU16: return IntT(16, false);
      case DType::kU32: return U32();
      case DType::kU64: return IntT(64, false);
      case DType::kF16:
      case DType::kBF16:
      case DType::kF32: return F32();
      case DType::kF64: return FloatT(64);
    }
    return I32();
  }
  // Element type in memory of `space`; `bytes` gets its size.
  uint32_t Storage(DType t, gpu::Space space, uint32_t* bytes) {
    uint32_t ty = 0;
    uint32_t size = 0;
    switch (t) {
      case DType::kBool:
        if (space == gpu::Space::kGlobal) {
          ty = IntT(8, false);
          size = 1;
        } else {
          ty = Bool();
          size = 4;
        }
        break;
      case DType::kF16:
        ty = space == gpu::Space::kRegister ? F32() : FloatT(16);
        size = space == gpu::Space::kRegister ? 4 : 2;
        break;
      case DType::kBF16:
        ty = space == gpu::Space::kRegister ? F32() : IntT(16, false);
        size = space == gpu::Space::kRegister ? 4 : 2;
        break;
      default:
        ty = Rep(t);
        size = static_cast<uint32_t>(ir::BitWidth(t) / 8);
        break;
    }
    if (space == gpu::Space::kGlobal && size == 1) {
      b_.Capability(spv::Capability::StorageBuffer8BitAccess);
      b_.Extension("SPV_KHR_8bit_storage");
      Feature("storageBuffer8BitAccess");
    } else if (space == gpu::Space::kGlobal && size == 2) {
      b_.Capability(spv::Capability::StorageBuffer16BitAccess);
      b_.Extension("SPV_KHR_16bit_storage");
      Feature("storageBuffer16BitAccess");
    }
    if (bytes) *bytes = size;
    return ty;
  }

  // ---- constants -------------------------------------------------------------
  uint32_t CInt(DType t, int64_t v) { return b_.ConstInt(Rep(t), static_cast<uint64_t>(v)); }
  uint32_t CU32(uint32_t v) { return b_.ConstU32(v); }
  uint32_t CI32(int32_t v) { return b_.ConstI32(v); }
  uint32_t CF32(double v) { return b_.ConstFloat(F32(), v); }
  Val Const(DType t, double v) {
    if (t == DType::kBool) return {b_.ConstBool(v != 0), t};
    if (ir::IsFloat(t)) return {b_.ConstFloat(Rep(t), v), t};
    return {CInt(t, static_cast<int64_t>(v)), t};
  }

  // ---- pre-scan: atomics on f32, lane reductions -----------------------------
  void Scan(const gpu::SBlock& body) {
    for (const gpu::SStmt& s : body) {
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, gpu::SAtomicAdd>) {
              atomic_bufs_.insert(n.buffer);
              written_.insert(n.buffer);
            } else if constexpr (std::is_same_v<T, gpu::SStore>) {
              written_.insert(n.buffer);
            } else if constexpr (std::is_same_v<T, gpu::SCopyVec>) {
              written_.insert(n.dst);
            } else if constexpr (std::is_same_v<T, gpu::SFor>) {
              Scan(n.body);
            } else if constexpr (std::is_same_v<T, gpu::SIf>) {
              Scan(n.then_body);
              Scan(n.else_body);
            } else if constexpr (std::is_same_v<T, gpu::SMma>) {
              mma_.push_back(&n);
            } else if constexpr (std::is_same_v<T, gpu::SLaneReduce>) {
              if (n.width < 1 || n.width > 64 || (n.width & (n.width - 1)) != 0) {
                Error("LaneReduce of " + n.var + " has width " + std::to_string(n.width) +
                      "; expected a power of two <= 64");
              }
              max_width_ = std::max<int64_t>(max_width_, n.width);
              if (ShuffleType(n.dtype)) ++shuffle_reduces_;
            }
          },
          s.node);
    }
  }
  static bool ShuffleType(DType t) {
    return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kI32 || t == DType::kU32;
  }

  // ---- declarations ------------------------------------------------------------
  void DeclareGlobal(const gpu::SimtParam& p, uint32_t binding) {
    BufInfo bi;
    bi.space = gpu::Space::kGlobal;
    bi.dtype = p.dtype;
    uint32_t bytes = 0;
    if (atomic_bufs_.count(p.name) && p.dtype == DType::kF32) {
      bi.as_u32 = true;
      bi.elem = U32();
      bytes = 4;
    } else {
      bi.elem = Storage(p.dtype, gpu::Space::kGlobal, &bytes);
    }
    const uint32_t rta = b_.TypeRuntimeArray(bi.elem);
    b_.Decorate(rta, spv::Decoration::ArrayStride, {bytes});
    const uint32_t st = b_.TypeStruct({rta});
    b_.Decorate(st, spv::Decoration::Block);
    b_.MemberDecorate(st, 0, spv::Decoration::Offset, {0});
    bi.var = b_.GlobalVariable(b_.TypePointer(SC::StorageBuffer, st), SC::StorageBuffer);
    b_.Decorate(bi.var, spv::Decoration::DescriptorSet, {0});
    b_.Decorate(bi.var, spv::Decoration::Binding, {binding});
    b_.Name(bi.var, p.name);
    bi.elem_ptr = b_.TypePointer(SC::StorageBuffer, bi.elem);
    bi.binding = binding;
    bufs_[p.name] = bi;
  }

  void DeclareShared(const gpu::SimtBuffer& sb) {
    BufInfo bi;
    bi.space = gpu::Space::kShared;
    bi.dtype = sb.dtype;
    uint32_t bytes = 0;
    if (atomic_bufs_.count(sb.name) && sb.dtype == DType::kF32) {
      bi.as_u32 = true;
      bi.elem = U32();
      bytes = 4;
    } else {
      bi.elem = Storage(sb.dtype, gpu::Space::kShared, &bytes);
    }
    const int64_t n = std::max<int64_t>(sb.elements, 1);
    bi.var = b_.GlobalVariable(b_.TypePointer(SC::Workgroup, b_.TypeArray(bi.elem, static_cast<uint32_t>(n))),
                               SC::Workgroup);
    b_.Name(bi.var, sb.name);
    bi.elem_ptr = b_.TypePointer(SC::Workgroup, bi.elem);
    shared_bytes_ = (shared_bytes_ + 15) / 16 * 16 + n * bytes;
    bufs_[sb.name] = bi;
  }

  void DeclareRegisters(const gpu::SimtBuffer& sb) {
    BufInfo bi;
    bi.space = gpu::Space::kRegister;
    bi.dtype = sb.dtype;
    bi.elem = Storage(sb.dtype, gpu::Space::kRegister, nullptr);
    const int64_t n = std::max<int64_t>(sb.elements, 1);
    bi.var = b_.FunctionVariable(b_.TypePointer(SC::Function, b_.TypeArray(bi.elem, static_cast<uint32_t>(n))));
    b_.Name(bi.var, sb.name);
    bi.elem_ptr = b_.TypePointer(SC::Function, bi.elem);
    bufs_[sb.name] = bi;
  }

  struct PushMember {
    std::string name;  // param name or symbol name
    DType dtype;
    uint32_t type;     // member type
    uint32_t index;    // member index
    bool symbol = false;
  };

  void DeclarePushConstants(const std::set<std::string>& symbols, SpirvModule* out) {
    std::vector<uint32_t> types;
    std::vector<uint32_t> offsets;
    uint32_t offset = 0;
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const gpu::SimtParam& p = k_.params[i];
      if (p.pointer || symbols.count(p.name)) continue;
      const bool wide = ir::BitWidth(p.dtype) == 64;
      const uint32_t size = wide ? 8 : 4;
      offset = (offset + size - 1) / size * size;
      uint32_t mt = 0;
      switch (p.dtype) {
        case DType::kF32: mt = F32(); break;
        case DType::kI32: mt = I32(); break;
        case DType::kF64:
        case DType::kI64:
        case DType::kU64: mt = Rep(p.dtype); break;
        default: mt = U32(); break;  // narrow scalars widened to 4 bytes (VULKAN_CONTRACT.md)
      }
      push_members_.push_back({p.name, p.dtype, mt, static_cast<uint32_t>(types.size()), false});
      types.push_back(mt);
      offsets.push_back(offset);
      out->push.push_back({static_cast<int>(i), offset, size});
      offset += size;
    }
    if (!o_.symbols.empty()) {
      offset = (offset + 3) / 4 * 4;
      out->push.push_back({-1, offset, static_cast<uint32_t>(4 * o_.symbols.size())});
      for (const std::string& s : o_.symbols) {
        // Pushed as int32; bound with the symbol's own dtype (its SimtParam's).
        DType st = DType::kI32;
        for (const gpu::SimtParam& p : k_.params) {
          if (p.name == s && !p.pointer) st = p.dtype;
        }
        push_members_.push_back({s, st, I32(), static_cast<uint32_t>(types.size()), true});
        types.push_back(I32());
        offsets.push_back(offset);
        offset += 4;
      }
    }
    out->push_bytes = offset;
    if (types.empty()) return;
    if (offset > 128) {
      Error("push constants need " + std::to_string(offset) +
            " bytes (scalars and shape symbols); Vulkan guarantees 128");
    }
    push_struct_ = b_.TypeStruct(types);
    b_.Decorate(push_struct_, spv::Decoration::Block);
    for (size_t m = 0; m < types.size(); ++m) {
      b_.MemberDecorate(push_struct_, static_cast<uint32_t>(m), spv::Decoration::Offset, {offsets[m]});
    }
    push_var_ = b_.GlobalVariable(b_.TypePointer(SC::PushConstant, push_struct_), SC::PushConstant);
    b_.Name(push_var_, "tl_push");
  }

  // tl_tid, block indices, scalar parameters and symbols.
  void Prologue() {
    const uint32_t u32 = U32();
    const uint32_t tid_u = b_.OpR(spv::Op::OpLoad, u32, {local_index_});
    tid_ = b_.OpR(spv::Op::OpBitcast, I32(), {tid_u});
    Bind("tl_tid", {false, tid_, DType::kI32});
    const uint32_t wg = b_.OpR(spv::Op::OpLoad, b_.TypeVector(u32, 3), {wg_id_});
    for (size_t i = 0; i < k_.block_vars.size() && i < 3; ++i) {
      const uint32_t c = b_.OpR(spv::Op::OpCompositeExtract, u32, {wg, static_cast<uint32_t>(i)});
      Bind(k_.block_vars[i], {false, b_.OpR(spv::Op::OpBitcast, I32(), {c}), DType::kI32});
    }
    for (const PushMember& m : push_members_) {
      const uint32_t ptr =
          b_.OpR(spv::Op::OpAccessChain, b_.TypePointer(SC::PushConstant, m.type), {push_var_, CU32(m.index)});
      const uint32_t raw = b_.OpR(spv::Op::OpLoad, m.type, {ptr});
      Val v;
      if (m.symbol) {
        Bind(m.name, {false, Convert({raw, DType::kI32}, m.dtype).id, m.dtype});
        continue;
      }
      switch (m.dtype) {
        case DType::kF32:
        case DType::kI32:
        case DType::kF64:
        case DType::kI64:
        case DType::kU64:
        case DType::kU32: v = {raw, m.dtype}; break;
        case DType::kBool: v = {b_.OpR(spv::Op::OpINotEqual, Bool(), {raw, CU32(0)}), m.dtype}; break;
        case DType::kF16: {
          const uint32_t v2 = b_.Ext(b_.TypeVector(F32(), 2), GLSLstd450UnpackHalf2x16, {raw});
          v = {b_.OpR(spv::Op::OpCompositeExtract, F32(), {v2, 0}), m.dtype};
          break;
        }
        case DType::kBF16: {
          const uint32_t sh = b_.OpR(spv::Op::OpShiftLeftLogical, u32, {raw, CU32(16)});
          v = {b_.OpR(spv::Op::OpBitcast, F32(), {sh}), m.dtype};
          break;
        }
        default:  // i8 i16 u8 u16: truncate the widened word
          v = {b_.OpR(spv::Op::OpUConvert, Rep(m.dtype), {raw}), m.dtype};
          break;
      }
      Bind(m.name, {false, v.id, m.dtype});
    }
  }

  // sg_ok_: whether OpGroupNonUniformShuffleXor(x, o) returns the value of
  // thread tid ^ o for every o < the widest LaneReduce, in every invocation of
  // the workgroup (made workgroup-uniform through a Workgroup flag).
  void SubgroupCheck() {
    b_.Capability(spv::Capability::GroupNonUniform);
    b_.Capability(spv::Capability::GroupNonUniformShuffle);
    const uint32_t u32 = U32();
    const uint32_t tid_u = b_.OpR(spv::Op::OpBitcast, u32, {tid_});
    const uint32_t ssz = b_.OpR(spv::Op::OpLoad, u32, {subgroup_size_});
    uint32_t ok = b_.OpR(spv::Op::OpUGreaterThanEqual, Bool(), {ssz, CU32(static_cast<uint32_t>(max_width_))});
    for (int64_t off = 1; off < max_width_; off *= 2) {
      const uint32_t o = CU32(static_cast<uint32_t>(off));
      const uint32_t p = b_.OpR(spv::Op::OpGroupNonUniformShuffleXor, u32, {CU32(kScopeSubgroup), tid_u, o});
      const uint32_t want = b_.OpR(spv::Op::OpBitwiseXor, u32, {tid_u, o});
      ok = b_.OpR(spv::Op::OpLogicalAnd, Bool(), {ok, b_.OpR(spv::Op::OpIEqual, Bool(), {p, want})});
    }
    const uint32_t flag =
        b_.GlobalVariable(b_.TypePointer(SC::Workgroup, u32), SC::Workgroup);
    b_.Name(flag, "tl_subgroup_ok");
    shared_bytes_ = (shared_bytes_ + 15) / 16 * 16 + 4;
    const uint32_t is0 = b_.OpR(spv::Op::OpIEqual, Bool(), {tid_, CI32(0)});
    IfThen(is0, [&] { b_.Op(spv::Op::OpStore, {flag, CU32(1)}); });
    Barrier();
    const uint32_t bad = b_.OpR(spv::Op::OpLogicalNot, Bool(), {ok});
    IfThen(bad, [&] { b_.Op(spv::Op::OpStore, {flag, CU32(0)}); });
    Barrier();
    sg_ok_ = b_.OpR(spv::Op::OpINotEqual, Bool(), {b_.OpR(spv::Op::OpLoad, u32, {flag}), CU32(0)});
  }

  // ---- scopes ------------------------------------------------------------------
  void Bind(const std::string& name, Binding bnd) { scopes_.back()[name] = bnd; }
  const Binding* Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  // ---- control flow helpers ------------------------------------------------
  void L(uint32_t label) {
    b_.Label(label);
    cur_label_ = label;
  }
  void IfThen(uint32_t cond, const std::function<void()>& then_fn) {
    const uint32_t then_l = b_.NewId(), merge = b_.NewId();
    b_.Op(spv::Op::OpSelectionMerge, {merge, 0});
    b_.BranchConditional(cond, then_l, merge);
    L(then_l);
    then_fn();
    if (b_.open()) b_.Branch(merge);
    L(merge);
  }
  void Barrier() { b_.Op(spv::Op::OpControlBarrier, {CU32(kScopeWorkgroup), CU32(kScopeWorkgroup), CU32(BarrierSemantics())}); }
  // Under the Vulkan memory model (cooperative-matrix modules) barriers also
  // make prior writes available and visible; plain modules keep GLSL450's.
  uint32_t BarrierSemantics() const {
    return coop_ && !emu_ ? kBarrierSemantics | khr::kSemanticsMakeAvailable | khr::kSemanticsMakeVisible : kBarrierSemantics;
  }

  // ---- memory ------------------------------------------------------------------
  const BufInfo* Buf(const std::string& name) {
    auto it = bufs_.find(name);
    if (it == bufs_.end()) {
      Error("unknown buffer " + name);
      return nullptr;
    }
    return &it->second;
  }
  uint32_t Chain(const BufInfo& bi, uint32_t index) {
    if (bi.space == gpu::Space::kGlobal) {
      return b_.OpR(spv::Op::OpAccessChain, bi.elem_ptr, {bi.var, CU32(0), index});
    }
    return b_.OpR(spv::Op::OpAccessChain, bi.elem_ptr, {bi.var, index});
  }
  Val LoadElem(const std::string& name, const Expr& index) {
    const BufInfo* bi = Buf(name);
    if (!bi) return {};
    const Val i = E(index);
    if (!err_.empty()) return {};
    const uint32_t raw = b_.OpR(spv::Op::OpLoad, bi->elem, {Chain(*bi, i.id)});
    return FromMemory(raw, *bi);
  }
  Val FromMemory(uint32_t raw, const BufInfo& bi) {
    const DType t = bi.dtype;
    if (bi.as_u32) return {b_.OpR(spv::Op::OpBitcast, F32(), {raw}), t};
    if (bi.space == gpu::Space::kRegister) return {raw, t};
    if (t == DType::kF16) return {b_.OpR(spv::Op::OpFConvert, F32(), {raw}), t};
    if (t == DType::kBF16) {
      const uint32_t w = b_.OpR(spv::Op::OpUConvert, U32(), {raw});
      return {b_.OpR(spv::Op::OpBitcast, F32(), {b_.OpR(spv::Op::OpShiftLeftLogical, U32(), {w, CU32(16)})}), t};
    }
    if (t == DType::kBool && bi.space == gpu::Space::kGlobal) {
      return {b_.OpR(spv::Op::OpINotEqual, Bool(), {raw, b_.ConstInt(IntT(8, false), 0)}), t};
    }
    return {raw, t};
  }
  // `v` converted to the buffer's dtype, in the buffer's memory type.
  uint32_t ToMemory(Val v, const BufInfo& bi) {
    v = Convert(v, bi.dtype);
    const DType t = bi.dtype;
    if (bi.as_u32) return b_.OpR(spv::Op::OpBitcast, U32(), {v.id});
    if (bi.space == gpu::Space::kRegister) return Is16F(t) ? Round(v).id : v.id;
    if (t == DType::kF16) return b_.OpR(spv::Op::OpFConvert, FloatT(16), {v.id});
    if (t == DType::kBF16) {
      const uint32_t bits = Bf16Bits(v.id);
      return b_.OpR(spv::Op::OpUConvert, IntT(16, false), {b_.OpR(spv::Op::OpShiftRightLogical, U32(), {bits, CU32(16)})});
    }
    if (t == DType::kBool && bi.space == gpu::Space::kGlobal) {
      const uint32_t u8 = IntT(8, false);
      return b_.OpR(spv::Op::OpSelect, u8, {v.id, b_.ConstInt(u8, 1), b_.ConstInt(u8, 0)});
    }
    return v.id;
  }

  // ---- rounding and conversion ---------------------------------------------
  // f32 bits rounded to bf16 (round to nearest even; NaN stays a quiet NaN),
  // as a u32 whose low 16 bits are zero.
  uint32_t Bf16Bits(uint32_t f) {
    const uint32_t u32 = U32();
    const uint32_t bits = b_.OpR(spv::Op::OpBitcast, u32, {f});
    const uint32_t lsb = b_.OpR(spv::Op::OpBitwiseAnd, u32,
                                {b_.OpR(spv::Op::OpShiftRightLogical, u32, {bits, CU32(16)}), CU32(1)});
    const uint32_t sum = b_.OpR(spv::Op::OpIAdd, u32, {b_.OpR(spv::Op::OpIAdd, u32, {bits, CU32(0x7FFF)}), lsb});
    const uint32_t rounded = b_.OpR(spv::Op::OpBitwiseAnd, u32, {sum, CU32(0xFFFF0000u)});
    const uint32_t quiet = b_.OpR(spv::Op::OpBitwiseAnd, u32,
                                  {b_.OpR(spv::Op::OpBitwiseOr, u32, {bits, CU32(0x00400000u)}), CU32(0xFFFF0000u)});
    const uint32_t nan = b_.OpR(spv::Op::OpIsNan, Bool(), {f});
    return b_.OpR(spv::Op::OpSelect, u32, {nan, quiet, rounded});
  }
  // A value of dtype f16/bf16 (held in f32) rounded to its dtype.
  Val Round(Val v) {
    if (v.t == DType::kF16) {
      const uint32_t h = b_.OpR(spv::Op::OpFConvert, FloatT(16), {v.id});
      return {b_.OpR(spv::Op::OpFConvert, F32(), {h}), v.t};
    }
    if (v.t == DType::kBF16) return {b_.OpR(spv::Op::OpBitcast, F32(), {Bf16Bits(v.id)}), v.t};
    return v;
  }
  Val Convert(Val v, DType to) {
    const DType from = v.t;
    if (from == to || v.id == 0) return {v.id, to};
    const uint32_t rt = Rep(to);
    if (to == DType::kBool) {
      if (ir::IsFloat(from)) return {b_.OpR(spv::Op::OpFUnordNotEqual, Bool(), {v.id, Const(from, 0).id}), to};
      return {b_.OpR(spv::Op::OpINotEqual, Bool(), {v.id, Const(from, 0).id}), to};
    }
    if (from == DType::kBool) {
      Val one = Const(to, 1), zero = Const(to, 0);
      return {b_.OpR(spv::Op::OpSelect, rt, {v.id, one.id, zero.id}), to};
    }
    const bool ff = ir::IsFloat(from), tf = ir::IsFloat(to);
    if (!ff && !tf) {
      const int wf = ir::BitWidth(from), wt = ir::BitWidth(to);
      if (wf == wt) return {b_.OpR(spv::Op::OpBitcast, rt, {v.id}), to};
      if (wt > wf) {
        // Extend by the source's signedness, into an integer of the target's.
        const uint32_t ext = IntT(static_cast<uint32_t>(wt), ir::IsSigned(from));
        const uint32_t x = b_.OpR(ir::IsSigned(from) ? spv::Op::OpSConvert : spv::Op::OpUConvert, ext, {v.id});
        return {ext == rt ? x : b_.OpR(spv::Op::OpBitcast, rt, {x}), to};
      }
      const uint32_t narrow = IntT(static_cast<uint32_t>(wt), ir::IsSigned(from));
      const uint32_t x = b_.OpR(ir::IsSigned(from) ? spv::Op::OpSConvert : spv::Op::OpUConvert, narrow, {v.id});
      return {narrow == rt ? x : b_.OpR(spv::Op::OpBitcast, rt, {x}), to};
    }
    if (!ff && tf) {
      const uint32_t x = b_.OpR(ir::IsSigned(from) ? spv::Op::OpConvertSToF : spv::Op::OpConvertUToF, rt, {v.id});
      return Round({x, to});
    }
    if (ff && !tf) {
      return {b_.OpR(ir::IsSigned(to) ? spv::Op::OpConvertFToS : spv::Op::OpConvertFToU, rt, {v.id}), to};
    }
    // float -> float
    uint32_t x = v.id;
    if (Rep(from) != rt) x = b_.OpR(spv::Op::OpFConvert, rt, {v.id});
    return Round({x, to});
  }

  // ---- expressions -------------------------------------------------------------
  Val E(const Expr& e) {
    if (!err_.empty()) return {};
    switch (ir::Kind(e)) {
      case ir::ExprKind::kIntImm: {
        const auto* i = ir::As<ir::IntImm>(e);
        if (i->dtype == DType::kBool) return {b_.ConstBool(i->value != 0), DType::kBool};
        return {CInt(i->dtype, i->value), i->dtype};
      }
      case ir::ExprKind::kFloatImm: {
        const auto* f = ir::As<ir::FloatImm>(e);
        return {b_.ConstFloat(Rep(f->dtype), f->value), f->dtype};
      }
      case ir::ExprKind::kVarRef: {
        const auto* v = ir::As<ir::VarRef>(e);
        const Binding* bnd = Lookup(v->name);
        if (!bnd) {
          Error("unknown name " + v->name);
          return {};
        }
        if (bnd->is_var) return {b_.OpR(spv::Op::OpLoad, Rep(bnd->t), {bnd->id}), bnd->t};
        return {bnd->id, bnd->t};
      }
      case ir::ExprKind::kLoad: {
        const auto* l = ir::As<ir::Load>(e);
        if (l->indices.size() != 1) {
          Error("load of " + l->buffer + " with " + std::to_string(l->indices.size()) + " indices (SIMT IR has one)");
          return {};
        }
        return LoadElem(l->buffer, l->indices[0]);
      }
      case ir::ExprKind::kUnary: return UnaryE(*ir::As<ir::Unary>(e));
      case ir::ExprKind::kBinary: return BinaryE(*ir::As<ir::Binary>(e));
      case ir::ExprKind::kSelect: return SelectE(*ir::As<ir::Select>(e));
      case ir::ExprKind::kCast: {
        const auto* c = ir::As<ir::Cast>(e);
        return Convert(E(*c->value), c->dtype);
      }
      case ir::ExprKind::kCall: return CallE(*ir::As<ir::Call>(e));
    }
    Error("unknown expression kind");
    return {};
  }

  Val UnaryE(const ir::Unary& u) {
    Val a = E(*u.operand);
    if (!err_.empty()) return {};
    const uint32_t rt = Rep(a.t);
    switch (u.op) {
      case ir::UnaryOp::kNeg:
        return {b_.OpR(ir::IsFloat(a.t) ? spv::Op::OpFNegate : spv::Op::OpSNegate, rt, {a.id}), a.t};
      case ir::UnaryOp::kNot: {
        const Val c = Convert(a, DType::kBool);
        return {b_.OpR(spv::Op::OpLogicalNot, Bool(), {c.id}), DType::kBool};
      }
      case ir::UnaryOp::kBitNot:
        if (a.t == DType::kBool) return {b_.OpR(spv::Op::OpLogicalNot, Bool(), {a.id}), a.t};
        return {b_.OpR(spv::Op::OpNot, rt, {a.id}), a.t};
    }
    return {};
  }

  // Short-circuit && / || when the right side loads memory.
  Val ShortCircuit(const ir::Binary& bn) {
    const bool is_and = bn.op == ir::BinaryOp::kAnd;
    const Val a = Convert(E(*bn.lhs), DType::kBool);
    if (!err_.empty()) return {};
    const uint32_t pre = cur_label_;
    const uint32_t rhs_l = b_.NewId(), merge = b_.NewId();
    b_.Op(spv::Op::OpSelectionMerge, {merge, 0});
    if (is_and) {
      b_.BranchConditional(a.id, rhs_l, merge);
    } else {
      b_.BranchConditional(a.id, merge, rhs_l);
    }
    L(rhs_l);
    const Val r = Convert(E(*bn.rhs), DType::kBool);
    const uint32_t rhs_end = cur_label_;
    b_.Branch(merge);
    L(merge);
    return {b_.OpR(spv::Op::OpPhi, Bool(), {b_.ConstBool(!is_and), pre, r.id, rhs_end}), DType::kBool};
  }

  Val FloorDivS(uint32_t rt, DType t, uint32_t a, uint32_t b) {
    const uint32_t q = b_.OpR(spv::Op::OpSDiv, rt, {a, b});
    const uint32_t zero = CInt(t, 0);
    const uint32_t inexact = b_.OpR(spv::Op::OpINotEqual, Bool(), {b_.OpR(spv::Op::OpIMul, rt, {q, b}), a});
    const uint32_t sa = b_.OpR(spv::Op::OpSLessThan, Bool(), {a, zero});
    const uint32_t sb = b_.OpR(spv::Op::OpSLessThan, Bool(), {b, zero});
    const uint32_t neg = b_.OpR(spv::Op::OpLogicalNotEqual, Bool(), {sa, sb});
    const uint32_t fix = b_.OpR(spv::Op::OpLogicalAnd, Bool(), {inexact, neg});
    const uint32_t q1 = b_.OpR(spv::Op::OpISub, rt, {q, CInt(t, 1)});
    return {b_.OpR(spv::Op::OpSelect, rt, {fix, q1, q}), t};
  }

  Val BinaryE(const ir::Binary& bn) {
    using B = ir::BinaryOp;
    if ((bn.op == B::kAnd || bn.op == B::kOr) && HasLoad(*bn.rhs)) return ShortCircuit(bn);
    Val a = E(*bn.lhs);
    Val b = E(*bn.rhs);
    if (!err_.empty()) return {};
    if (bn.op == B::kAnd || bn.op == B::kOr) {
      a = Convert(a, DType::kBool);
      b = Convert(b, DType::kBool);
      return {b_.OpR(bn.op == B::kAnd ? spv::Op::OpLogicalAnd : spv::Op::OpLogicalOr, Bool(), {a.id, b.id}),
              DType::kBool};
    }
    const DType t = a.t;
    if (b.t != t) b = Convert(b, t);
    const uint32_t rt = Rep(t);
    const bool fl = ir::IsFloat(t), sg = ir::IsSigned(t), bl = t == DType::kBool;
    auto R = [&](spv::Op op) { return Val{b_.OpR(op, rt, {a.id, b.id}), t}; };
    auto C = [&](spv::Op op) { return Val{b_.OpR(op, Bool(), {a.id, b.id}), DType::kBool}; };
    switch (bn.op) {
      case B::kAdd: return R(fl ? spv::Op::OpFAdd : spv::Op::OpIAdd);
      case B::kSub: return R(fl ? spv::Op::OpFSub : spv::Op::OpISub);
      case B::kMul: return R(fl ? spv::Op::OpFMul : spv::Op::OpIMul);
      case B::kDiv:
        if (fl) return R(spv::Op::OpFDiv);
        if (!sg) return R(spv::Op::OpUDiv);
        return FloorDivS(rt, t, a.id, b.id);
      case B::kMod:
        if (fl) return R(spv::Op::OpFMod);
        return R(sg ? spv::Op::OpSMod : spv::Op::OpUMod);  // OpSMod takes the divisor's sign: floor modulo
      case B::kShl: return R(spv::Op::OpShiftLeftLogical);
      case B::kShr: return R(sg ? spv::Op::OpShiftRightArithmetic : spv::Op::OpShiftRightLogical);
      case B::kLt: return C(fl ? spv::Op::OpFOrdLessThan : sg ? spv::Op::OpSLessThan : spv::Op::OpULessThan);
      case B::kLe: return C(fl ? spv::Op::OpFOrdLessThanEqual : sg ? spv::Op::OpSLessThanEqual : spv::Op::OpULessThanEqual);
      case B::kGt: return C(fl ? spv::Op::OpFOrdGreaterThan : sg ? spv::Op::OpSGreaterThan : spv::Op::OpUGreaterThan);
      case B::kGe:
        return C(fl ? spv::Op::OpFOrdGreaterThanEqual : sg ? spv::Op::OpSGreaterThanEqual : spv::Op::OpUGreaterThanEqual);
      case B::kEq: return C(fl ? spv::Op::OpFOrdEqual : bl ? spv::Op::OpLogicalEqual : spv::Op::OpIEqual);
      case B::kNe: return C(fl ? spv::Op::OpFUnordNotEqual : bl ? spv::Op::OpLogicalNotEqual : spv::Op::OpINotEqual);
      case B::kBitAnd: return R(bl ? spv::Op::OpLogicalAnd : spv::Op::OpBitwiseAnd);
      case B::kBitXor: return R(bl ? spv::Op::OpLogicalNotEqual : spv::Op::OpBitwiseXor);
      case B::kBitOr: return R(bl ? spv::Op::OpLogicalOr : spv::Op::OpBitwiseOr);
      case B::kAnd:
      case B::kOr: break;
    }
    Error(std::string("binary operator ") + ir::BinaryOpSpelling(bn.op) + " on " + ir::DTypeName(t));
    return {};
  }

  Val SelectE(const ir::Select& s) {
    const Val c = Convert(E(*s.cond), DType::kBool);
    if (!err_.empty()) return {};
    const DType rt_d = ir::ExprDType(*s.true_value);
    if (!HasLoad(*s.true_value) && !HasLoad(*s.false_value)) {
      const Val x = Convert(E(*s.true_value), rt_d);
      const Val y = Convert(E(*s.false_value), rt_d);
      if (!err_.empty()) return {};
      return {b_.OpR(spv::Op::OpSelect, Rep(rt_d), {c.id, x.id, y.id}), rt_d};
    }
    // Only the chosen side runs (it may load out of bounds otherwise).
    const uint32_t tl = b_.NewId(), fl = b_.NewId(), merge = b_.NewId();
    b_.Op(spv::Op::OpSelectionMerge, {merge, 0});
    b_.BranchConditional(c.id, tl, fl);
    L(tl);
    const Val x = Convert(E(*s.true_value), rt_d);
    const uint32_t tend = cur_label_;
    b_.Branch(merge);
    L(fl);
    const Val y = Convert(E(*s.false_value), rt_d);
    const uint32_t fend = cur_label_;
    b_.Branch(merge);
    L(merge);
    if (!err_.empty()) return {};
    return {b_.OpR(spv::Op::OpPhi, Rep(rt_d), {x.id, tend, y.id, fend}), rt_d};
  }

  Val CallE(const ir::Call& c) {
    std::vector<Val> a;
    for (const Expr& x : c.args) a.push_back(E(x));
    if (!err_.empty() || a.empty()) return {};
    const DType t = a[0].t;
    for (size_t i = 1; i < a.size(); ++i) a[i] = Convert(a[i], t);
    const uint32_t rt = Rep(t);
    const bool fl = ir::IsFloat(t), sg = ir::IsSigned(t);
    const bool f64 = t == DType::kF64;
    auto glsl = [&](uint32_t op) {
      std::vector<uint32_t> ids;
      for (const Val& v : a) ids.push_back(v.id);
      return Val{b_.Ext(rt, op, ids), t};
    };
    auto f32_only = [&](const char* name) {
      if (f64) Error(std::string(name) + " on f64 is not supported by the SPIR-V backend (GLSL.std.450 has it for 32-bit floats only)");
      return !f64;
    };
    switch (c.op) {
      case ir::CallOp::kExp: return f32_only("exp") ? glsl(GLSLstd450Exp) : Val{};
      case ir::CallOp::kExp2: return f32_only("exp2") ? glsl(GLSLstd450Exp2) : Val{};
      case ir::CallOp::kLog: return f32_only("log") ? glsl(GLSLstd450Log) : Val{};
      case ir::CallOp::kLog2: return f32_only("log2") ? glsl(GLSLstd450Log2) : Val{};
      case ir::CallOp::kSqrt: return glsl(GLSLstd450Sqrt);
      case ir::CallOp::kRsqrt: return glsl(GLSLstd450InverseSqrt);
      case ir::CallOp::kSin: return f32_only("sin") ? glsl(GLSLstd450Sin) : Val{};
      case ir::CallOp::kCos: return f32_only("cos") ? glsl(GLSLstd450Cos) : Val{};
      case ir::CallOp::kPow: return f32_only("pow") ? glsl(GLSLstd450Pow) : Val{};
      case ir::CallOp::kFloor: return glsl(GLSLstd450Floor);
      case ir::CallOp::kCeil: return glsl(GLSLstd450Ceil);
      case ir::CallOp::kRound: return glsl(GLSLstd450RoundEven);
      case ir::CallOp::kTanh: {
        // (1 - e^-2|x|) / (1 + e^-2|x|) with x's sign: no inf/inf for large |x|.
        if (!f32_only("tanh")) return {};
        const uint32_t ax = b_.Ext(rt, GLSLstd450FAbs, {a[0].id});
        const uint32_t e2 = b_.Ext(rt, GLSLstd450Exp, {b_.OpR(spv::Op::OpFMul, rt, {ax, CF32(-2.0)})});
        const uint32_t r = b_.OpR(spv::Op::OpFDiv, rt, {b_.OpR(spv::Op::OpFSub, rt, {CF32(1.0), e2}),
                                                        b_.OpR(spv::Op::OpFAdd, rt, {CF32(1.0), e2})});
        const uint32_t neg = b_.OpR(spv::Op::OpFOrdLessThan, Bool(), {a[0].id, CF32(0.0)});
        return {b_.OpR(spv::Op::OpSelect, rt, {neg, b_.OpR(spv::Op::OpFNegate, rt, {r}), r}), t};
      }
      case ir::CallOp::kSigmoid: {
        if (!f32_only("sigmoid")) return {};
        const uint32_t e = b_.Ext(rt, GLSLstd450Exp, {b_.OpR(spv::Op::OpFNegate, rt, {a[0].id})});
        return {b_.OpR(spv::Op::OpFDiv, rt, {CF32(1.0), b_.OpR(spv::Op::OpFAdd, rt, {CF32(1.0), e})}), t};
      }
      case ir::CallOp::kAbs:
        if (fl) return glsl(GLSLstd450FAbs);
        if (!sg) return a[0];
        return glsl(GLSLstd450SAbs);
      case ir::CallOp::kMax:
        return glsl(fl ? GLSLstd450NMax : sg ? GLSLstd450SMax : GLSLstd450UMax);
      case ir::CallOp::kMin:
        return glsl(fl ? GLSLstd450NMin : sg ? GLSLstd450SMin : GLSLstd450UMin);
      case ir::CallOp::kTruncDiv:
        return {b_.OpR(sg ? spv::Op::OpSDiv : spv::Op::OpUDiv, rt, {a[0].id, a[1].id}), t};
      case ir::CallOp::kTruncMod:
        return {b_.OpR(sg ? spv::Op::OpSRem : spv::Op::OpUMod, rt, {a[0].id, a[1].id}), t};
      case ir::CallOp::kCeilDiv: {
        if (!sg) {
          const uint32_t s = b_.OpR(spv::Op::OpIAdd, rt, {a[0].id, b_.OpR(spv::Op::OpISub, rt, {a[1].id, CInt(t, 1)})});
          return {b_.OpR(spv::Op::OpUDiv, rt, {s, a[1].id}), t};
        }
        const uint32_t na = b_.OpR(spv::Op::OpSNegate, rt, {a[0].id});
        const Val q = FloorDivS(rt, t, na, a[1].id);
        return {b_.OpR(spv::Op::OpSNegate, rt, {q.id}), t};
      }
    }
    Error(std::string("call ") + ir::CallOpName(c.op));
    return {};
  }

  uint32_t Combine(ir::ReduceOp op, DType t, uint32_t x, uint32_t y) {
    const uint32_t rt = Rep(t);
    const bool fl = ir::IsFloat(t), sg = ir::IsSigned(t);
    switch (op) {
      case ir::ReduceOp::kMax:
      case ir::ReduceOp::kAbsMax:
        return b_.Ext(rt, fl ? GLSLstd450NMax : sg ? GLSLstd450SMax : GLSLstd450UMax, {x, y});
      case ir::ReduceOp::kMin: return b_.Ext(rt, fl ? GLSLstd450NMin : sg ? GLSLstd450SMin : GLSLstd450UMin, {x, y});
      case ir::ReduceOp::kSum:
      case ir::ReduceOp::kAbsSum: return b_.OpR(fl ? spv::Op::OpFAdd : spv::Op::OpIAdd, rt, {x, y});
    }
    return x;
  }

  // ---- thread invariance ----------------------------------------------------------
  // Whether every thread computes the same value for `e`: no tl_tid, no name
  // derived from it (variables count as thread-dependent), no register loads.
  bool Invariant(const Expr& e) const {
    bool ok = true;
    ir::WalkExpr(e, [&](const Expr& x) {
      if (const auto* v = ir::As<ir::VarRef>(x)) {
        if (variant_.count(v->name)) ok = false;
      } else if (const auto* l = ir::As<ir::Load>(x)) {
        auto it = bufs_.find(l->buffer);
        if (it == bufs_.end() || it->second.space == gpu::Space::kRegister) ok = false;
      }
    });
    return ok;
  }
  bool LoadsShared(const Expr& e) const {
    bool found = false;
    ir::WalkExpr(e, [&](const Expr& x) {
      if (const auto* l = ir::As<ir::Load>(x)) {
        auto it = bufs_.find(l->buffer);
        if (it != bufs_.end() && it->second.space == gpu::Space::kShared) found = true;
      }
    });
    return found;
  }

  // ---- statements --------------------------------------------------------------
  void Block(const gpu::SBlock& body) {
    scopes_.emplace_back();
    for (const gpu::SStmt& s : body) {
      if (!err_.empty()) break;
      Stmt(s);
    }
    scopes_.pop_back();
  }

  void Stmt(const gpu::SStmt& s) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, gpu::SLet>) {
            const Val v = Convert(E(n.value), n.dtype);
            Bind(n.name, {false, v.id, n.dtype});
            if (Invariant(n.value)) {
              variant_.erase(n.name);
            } else {
              variant_.insert(n.name);
            }
          } else if constexpr (std::is_same_v<T, gpu::SVar>) {
            const uint32_t ptr = b_.FunctionVariable(b_.TypePointer(SC::Function, Rep(n.dtype)));
            b_.Name(ptr, n.name);
            Val init = n.init ? Convert(E(*n.init), n.dtype) : Const(n.dtype, 0);
            if (n.init && Is16F(n.dtype)) init = Round(init);
            b_.Op(spv::Op::OpStore, {ptr, init.id});
            Bind(n.name, {true, ptr, n.dtype});
            variant_.insert(n.name);  // assignments may make it thread-dependent
          } else if constexpr (std::is_same_v<T, gpu::SAssign>) {
            const Binding* bnd = Lookup(n.name);
            if (!bnd || !bnd->is_var) {
              Error("assignment to " + n.name + ", which is not a variable");
              return;
            }
            const Binding target = *bnd;
            Val v = Convert(E(n.value), target.t);
            if (Is16F(target.t)) v = Round(v);
            b_.Op(spv::Op::OpStore, {target.id, v.id});
          } else if constexpr (std::is_same_v<T, gpu::SStore>) {
            if (copy_mode_ == CopyMode::kLoad) return;  // prefetch loads: shared memory is still in use
            if (n.hi) {  // only ForwardCastIntoWgmmaA (sm_90a wgmma) makes pair stores
              Error("a packed pair store into " + n.buffer + " (a wgmma register operand; sm_90a only)");
              return;
            }
            const BufInfo* bi = Buf(n.buffer);
            if (!bi) return;
            const BufInfo info = *bi;
            const Val idx = E(n.index);
            const Val v = E(n.value);
            if (!err_.empty()) return;
            // Scalar code outside T.Parallel runs in every thread: a shared
            // store of a value read from shared memory (`s[0] = s[0] + x`) must
            // not overwrite what a slower thread is still to read. Every thread
            // computes the value, waits for all, then stores the same value.
            if (info.space == gpu::Space::kShared && uniform_ && Invariant(n.index) && Invariant(n.value) &&
                LoadsShared(n.value)) {
              Barrier();
              ++uniform_store_barriers_;
            }
            const uint32_t m = ToMemory(v, info);
            b_.Op(spv::Op::OpStore, {Chain(info, idx.id), m});
          } else if constexpr (std::is_same_v<T, gpu::SAtomicAdd>) {
            AtomicAdd(n);
          } else if constexpr (std::is_same_v<T, gpu::SCopyVec>) {
            CopyVec(n);
          } else if constexpr (std::is_same_v<T, gpu::SFor>) {
            For(n);
          } else if constexpr (std::is_same_v<T, gpu::SIf>) {
            If(n);
          } else if constexpr (std::is_same_v<T, gpu::SBarrier>) {
            Barrier();
          } else if constexpr (std::is_same_v<T, gpu::SLaneReduce>) {
            LaneReduce(n);
          } else if constexpr (std::is_same_v<T, gpu::SComment>) {
            // nothing: SPIR-V carries no comments
          } else if constexpr (std::is_same_v<T, gpu::SMma>) {
            if (!coop_) {
              Error("SIMT construct tl::gpu::SMma is not supported by the SPIR-V backend without the "
                    "cooperative-matrix option");
              return;
            }
            Mma(n);
          } else {
            Error("SIMT construct " + Demangle(typeid(T).name()) +
                  " is not supported by the SPIR-V backend (only let/var/assign/store/atomic_add/for/if/barrier/"
                  "lane_reduce)");
          }
        },
        s.node);
  }

  // SCopyVec: `lanes` consecutive elements. A read-only global source of
  // 16- or 32-bit elements is read as whole 4/8/16-byte words through a
  // second, NonWritable view of its binding (`{ uint|uvec2|uvec4 data[]; }`;
  // the lowering guarantees the index is a multiple of the lanes and the
  // variant's PTR_ALIGNED guards the base), so the driver issues one wide
  // load instead of `lanes` narrow ones; the words are split into elements
  // for the destination. Anything else moves element by element.
  void CopyVec(const gpu::SCopyVec& n) {
    const BufInfo* d = Buf(n.dst);
    const BufInfo* sp = Buf(n.src);
    if (!d || !sp) return;
    const BufInfo di = *d, si = *sp;
    const Val dst = Convert(E(n.dst_index), DType::kI32);
    const Val src = Convert(E(n.src_index), DType::kI32);
    if (!err_.empty()) return;
    const int64_t eb = std::max(1, ir::BitWidth(si.dtype) / 8);
    const int64_t bytes = n.lanes * eb;
    const bool wide = WideCopy(n, si, di);
    auto store_elem = [&](int64_t e, uint32_t raw_src) {
      const uint32_t m = ToMemory(FromMemory(raw_src, si), di);
      b_.Op(spv::Op::OpStore, {Chain(di, I32Op(spv::Op::OpIAdd, dst.id, CI32(static_cast<int32_t>(e)))), m});
    };
    if (!wide) {
      for (int64_t e = 0; e < n.lanes; ++e) {
        const uint32_t at = Chain(si, I32Op(spv::Op::OpIAdd, src.id, CI32(static_cast<int32_t>(e))));
        store_elem(e, b_.OpR(spv::Op::OpLoad, si.elem, {at}));
      }
      return;
    }
    const uint32_t words = static_cast<uint32_t>(bytes / 4);
    const uint32_t u32 = U32();
    const uint32_t word_t = words == 1 ? u32 : b_.TypeVector(u32, words);
    uint32_t loaded = 0;
    if (copy_mode_ == CopyMode::kStore) {
      loaded = b_.OpR(spv::Op::OpLoad, word_t, {PrefetchSlot(n)});
    } else {
      const uint32_t view = WideView(si, word_t, static_cast<uint32_t>(bytes));
      int shift = 0;
      while ((int64_t{1} << shift) < n.lanes) ++shift;
      const uint32_t vi = I32Op(spv::Op::OpShiftRightArithmetic, src.id, CI32(shift));
      const uint32_t ptr =
          b_.OpR(spv::Op::OpAccessChain, b_.TypePointer(SC::StorageBuffer, word_t), {view, CU32(0), vi});
      loaded = b_.OpR(spv::Op::OpLoad, word_t, {ptr});
      if (copy_mode_ == CopyMode::kLoad) {
        b_.Op(spv::Op::OpStore, {PrefetchSlot(n), loaded});
        return;
      }
    }
    if (words == 4 && eb == 2 && di.space == gpu::Space::kShared) {
      // 16 bytes into shared memory as 8 16-bit stores: word w goes first in
      // lanes whose vector starts in 128-byte line 4q + w (rotation
      // (dst >> 6) & 3 in halves), which halves the bank conflicts of each
      // store instruction for the GEMM tiles' padded rows (32 -> 16 store
      // wavefronts per warp and copy).
      const uint32_t rot = I32Op(spv::Op::OpBitwiseAnd, I32Op(spv::Op::OpShiftRightArithmetic, dst.id, CI32(6)), CI32(3));
      for (uint32_t w = 0; w < 4; ++w) {
        const uint32_t ww = I32Op(spv::Op::OpBitwiseAnd, I32Op(spv::Op::OpIAdd, rot, CI32(static_cast<int32_t>(w))), CI32(3));
        const uint32_t word = b_.OpR(spv::Op::OpVectorExtractDynamic, u32, {loaded, ww});
        const uint32_t pair = b_.OpR(spv::Op::OpBitcast, b_.TypeVector(si.elem, 2), {word});
        for (uint32_t h = 0; h < 2; ++h) {
          const uint32_t m = ToMemory(FromMemory(b_.OpR(spv::Op::OpCompositeExtract, si.elem, {pair, h}), si), di);
          const uint32_t at = I32Op(spv::Op::OpIAdd, dst.id,
                                    I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, ww, CI32(2)), CI32(static_cast<int32_t>(h))));
          b_.Op(spv::Op::OpStore, {Chain(di, at), m});
        }
      }
      return;
    }
    for (uint32_t w = 0; w < words; ++w) {
      const uint32_t word = words == 1 ? loaded : b_.OpR(spv::Op::OpCompositeExtract, u32, {loaded, w});
      if (eb == 4) {
        store_elem(w, si.elem == u32 ? word : b_.OpR(spv::Op::OpBitcast, si.elem, {word}));
      } else {
        const uint32_t pair = b_.OpR(spv::Op::OpBitcast, b_.TypeVector(si.elem, 2), {word});
        for (uint32_t h = 0; h < 2; ++h) {
          store_elem(2 * w + h, b_.OpR(spv::Op::OpCompositeExtract, si.elem, {pair, h}));
        }
      }
    }
  }
  bool WideCopy(const gpu::SCopyVec& n, const BufInfo& si, const BufInfo& di) const {
    const int64_t eb = std::max(1, ir::BitWidth(si.dtype) / 8);
    const int64_t bytes = n.lanes * eb;
    const bool lanes_pow2 = n.lanes > 1 && (n.lanes & (n.lanes - 1)) == 0;
    return si.space == gpu::Space::kGlobal && !written_.count(n.src) && !si.as_u32 && !di.as_u32 &&
           si.dtype == di.dtype && (eb == 2 || eb == 4) && lanes_pow2 && (bytes == 4 || bytes == 8 || bytes == 16);
  }
  // The NonWritable view of global buffer `bi`'s binding as an array of
  // `word_t` (one per buffer and word type).
  uint32_t WideView(const BufInfo& bi, uint32_t word_t, uint32_t bytes) {
    const auto key = std::make_pair(bi.binding, word_t);
    auto it = wide_views_.find(key);
    if (it != wide_views_.end()) return it->second;
    const uint32_t rta = b_.TypeRuntimeArray(word_t);
    b_.Decorate(rta, spv::Decoration::ArrayStride, {bytes});
    const uint32_t st = b_.TypeStruct({rta});
    b_.Decorate(st, spv::Decoration::Block);
    b_.MemberDecorate(st, 0, spv::Decoration::Offset, {0});
    b_.MemberDecorate(st, 0, spv::Decoration::NonWritable, {});
    const uint32_t var = b_.GlobalVariable(b_.TypePointer(SC::StorageBuffer, st), SC::StorageBuffer);
    b_.Decorate(var, spv::Decoration::DescriptorSet, {0});
    b_.Decorate(var, spv::Decoration::Binding, {bi.binding});
    wide_views_[key] = var;
    return var;
  }

  void AtomicAdd(const gpu::SAtomicAdd& n) {
    if (!n.more.empty()) {  // no vector atomics here: one add per element
      AtomicAdd(gpu::SAtomicAdd{n.buffer, n.index, n.value});
      for (size_t i = 0; i < n.more.size(); ++i) {
        AtomicAdd(gpu::SAtomicAdd{n.buffer, ir::FoldConstants(ir::MakeBinary(ir::BinaryOp::kAdd, n.index,
                                                                             ir::MakeInt(static_cast<int64_t>(i) + 1))),
                                  n.more[i]});
      }
      return;
    }
    const BufInfo* bi = Buf(n.buffer);
    if (!bi) return;
    const BufInfo info = *bi;
    const DType t = info.dtype;
    if (info.space == gpu::Space::kRegister) {
      Error("atomic_add on register buffer " + n.buffer);
      return;
    }
    if (!(t == DType::kF32 || t == DType::kI32 || t == DType::kU32)) {
      Error(std::string("atomic_add on ") + ir::DTypeName(t) + " (" + n.buffer +
            ") is not supported by the SPIR-V backend (f32, i32, u32)");
      return;
    }
    const Val idx = E(n.index);
    const Val v = Convert(E(n.value), t);
    if (!err_.empty()) return;
    const uint32_t ptr = Chain(info, idx.id);
    const uint32_t scope = CU32(info.space == gpu::Space::kGlobal ? kScopeDevice : kScopeWorkgroup);
    const uint32_t relaxed = CU32(0);
    if (t != DType::kF32) {
      b_.OpR(spv::Op::OpAtomicIAdd, Rep(t), {ptr, scope, relaxed, v.id});
      return;
    }
    // f32: compare-exchange on the u32 bits until no other thread intervened.
    const uint32_t u32 = U32();
    const uint32_t expected = b_.FunctionVariable(b_.TypePointer(SC::Function, u32));
    b_.Op(spv::Op::OpStore, {expected, b_.OpR(spv::Op::OpLoad, u32, {ptr})});
    const uint32_t header = b_.NewId(), body = b_.NewId(), cont = b_.NewId(), merge = b_.NewId();
    b_.Branch(header);
    L(header);
    b_.Op(spv::Op::OpLoopMerge, {merge, cont, 0});
    b_.Branch(body);
    L(body);
    const uint32_t old = b_.OpR(spv::Op::OpLoad, u32, {expected});
    const uint32_t sum = b_.OpR(spv::Op::OpFAdd, F32(), {b_.OpR(spv::Op::OpBitcast, F32(), {old}), v.id});
    const uint32_t desired = b_.OpR(spv::Op::OpBitcast, u32, {sum});
    const uint32_t got = b_.OpR(spv::Op::OpAtomicCompareExchange, u32, {ptr, scope, relaxed, relaxed, desired, old});
    b_.Op(spv::Op::OpStore, {expected, got});
    const uint32_t done = b_.OpR(spv::Op::OpIEqual, Bool(), {got, old});
    b_.BranchConditional(done, merge, cont);
    L(cont);
    b_.Branch(header);
    L(merge);
  }

  void For(const gpu::SFor& n) {
    // Cooperative-matrix accumulators live across the outermost loop that
    // touches them only through SMma.
    std::vector<std::string> hoist;
    if (coop_) {
      std::set<std::string> cs;
      CollectMmaTargets(n.body, &cs);
      for (const std::string& c : cs) {
        if (!coop_acc_.count(c) && !TouchesOutsideMma(n.body, c) && UniformMmaShape(n.body, c)) hoist.push_back(c);
      }
      for (const std::string& c : hoist) {
        const gpu::SMma* first = FirstMma(n.body, c);
        CoopEnter(*first);
        if (!err_.empty()) return;
        ++coop_hoisted_;
      }
    }
    std::optional<Prefetch> pf;
    Val start;
    if (!hoist.empty()) {
      start = E(n.start);
      if (!err_.empty()) return;
      if (start.t == DType::kI32) pf = PrefetchPlan(n);  // the loop variable is rebound as an i32
    }
    if (pf) {
      // Prologue: the first iteration's tiles into registers.
      prefetch_regs_ = b_.FunctionVariable(
          b_.TypePointer(SC::Function, b_.TypeArray(b_.TypeVector(U32(), 4), static_cast<uint32_t>(pf->slots))));
      b_.Name(prefetch_regs_, "tl_prefetch");
      PrefetchLoads(n, *pf, start.id);
      prefetch_ = &n;
      prefetch_plan_ = *pf;
      ++coop_prefetched_;
    }
    ForLoop(n);
    if (pf) prefetch_ = nullptr;
    for (const std::string& c : hoist) CoopLeave(c);
  }

  // ---- register prefetch of the k loop's tiles (cooperative-matrix variant)
  // A k loop of the form [barrier; thread-strided copy loops of wide global
  // -> shared copies; barrier; k-steps...] becomes
  //   regs = tiles(start)
  //   for k: barrier; shared = regs; barrier; if (k + step < stop) regs = tiles(k + step); k-steps
  // so the next tiles' global loads are in flight while the matrices work
  // (Vulkan has no asynchronous copies). The copy statements are emitted
  // twice: as loads into `tl_prefetch` (CopyMode::kLoad: SCopyVec loads its
  // 16-byte word into its slot, shared stores are dropped) and as stores
  // (kStore: SCopyVec takes the word from its slot; the guards, evaluated
  // with the same k, pick the same branch, so out-of-bounds tiles still get
  // their zeros). Slot = the copy's base + the copy loop's trip counter.
  struct Prefetch {
    size_t first = 0, end = 0;  // body[first, end) are the copy loops; body[end] the barrier
    int64_t slots = 0;
  };
  std::optional<Prefetch> PrefetchPlan(const gpu::SFor& n) {
    const gpu::SBlock& b = n.body;
    const std::optional<int64_t> step = ir::FoldInt(n.step);
    if (!step || *step <= 0 || b.size() < 4 || !std::holds_alternative<gpu::SBarrier>(b[0].node)) return std::nullopt;
    if (!Invariant(n.start) || !Invariant(n.stop)) return std::nullopt;
    Prefetch pf;
    pf.first = 1;
    std::map<const gpu::SCopyVec*, int64_t> slots;
    size_t i = 1;
    for (; i < b.size(); ++i) {
      const auto* f = std::get_if<gpu::SFor>(&b[i].node);
      if (!f) break;
      const int64_t trips = ThreadStridedTrips(*f, DType::kI32);
      if (trips <= 0 || !PrefetchableCopy(f->body, trips, &pf.slots, &slots)) return std::nullopt;
    }
    if (i == 1 || i >= b.size() || !std::holds_alternative<gpu::SBarrier>(b[i].node) || slots.empty() ||
        pf.slots > 32) {
      return std::nullopt;
    }
    pf.end = i;
    prefetch_slot_ = std::move(slots);
    return pf;
  }
  // Whether `body` (inside a copy loop of `trips` trips) holds only guards,
  // lets, 16-byte global -> shared SCopyVecs run once per trip, and shared
  // stores (the zero fill); assigns the copies their slots.
  bool PrefetchableCopy(const gpu::SBlock& body, int64_t trips, int64_t* next,
                        std::map<const gpu::SCopyVec*, int64_t>* slots) {
    for (const gpu::SStmt& s : body) {
      if (const auto* c = std::get_if<gpu::SCopyVec>(&s.node)) {
        const BufInfo* d = Buf(c->dst);
        const BufInfo* sr = Buf(c->src);
        if (!d || !sr || !WideCopy(*c, *sr, *d) || d->space != gpu::Space::kShared) return false;
        const int64_t eb = std::max(1, ir::BitWidth(sr->dtype) / 8);
        if (c->lanes * eb != 16) return false;
        (*slots)[c] = *next;
        *next += trips;
      } else if (const auto* i = std::get_if<gpu::SIf>(&s.node)) {
        if (!PrefetchableCopy(i->then_body, trips, next, slots) || !PrefetchableCopy(i->else_body, trips, next, slots)) {
          return false;
        }
      } else if (const auto* f = std::get_if<gpu::SFor>(&s.node)) {
        const std::optional<int64_t> f0 = ir::FoldInt(f->start), f1 = ir::FoldInt(f->stop);
        if (f0 && f1 && *f0 == 0 && *f1 == 1) {  // runs once (the lowering's `tl_once`)
          if (!PrefetchableCopy(f->body, trips, next, slots)) return false;
          continue;
        }
        // Another nested loop may only store (the zero fill): a copy in it would run more than once per trip.
        std::map<const gpu::SCopyVec*, int64_t> inner;
        int64_t none = 0;
        if (!PrefetchableCopy(f->body, trips, &none, &inner) || !inner.empty()) return false;
      } else if (const auto* st = std::get_if<gpu::SStore>(&s.node)) {
        const BufInfo* d = Buf(st->buffer);
        if (!d || d->space != gpu::Space::kShared) return false;
      } else if (!std::holds_alternative<gpu::SLet>(s.node) && !std::holds_alternative<gpu::SComment>(s.node)) {
        return false;
      }
    }
    return true;
  }
  // The copy statements of `n`'s body as loads into the prefetch registers,
  // with n's loop variable bound to `k` (i32).
  void PrefetchLoads(const gpu::SFor& n, const Prefetch& pf, uint32_t k) {
    const uint32_t kv = b_.FunctionVariable(b_.TypePointer(SC::Function, I32()));
    b_.Op(spv::Op::OpStore, {kv, k});
    scopes_.emplace_back();
    Bind(n.var, {true, kv, DType::kI32});
    copy_mode_ = CopyMode::kLoad;
    for (size_t i = pf.first; i < pf.end && err_.empty(); ++i) Stmt(n.body[i]);
    copy_mode_ = CopyMode::kDirect;
    scopes_.pop_back();
  }
  // The k loop's body with the prefetch (loop variable in Function variable `var`).
  void PrefetchBody(const gpu::SFor& n, const Prefetch& pf, uint32_t var) {
    scopes_.emplace_back();
    const gpu::SBlock& b = n.body;
    Stmt(b[0]);
    copy_mode_ = CopyMode::kStore;
    for (size_t i = pf.first; i < pf.end && err_.empty(); ++i) Stmt(b[i]);
    copy_mode_ = CopyMode::kDirect;
    Stmt(b[pf.end]);
    const Val stop = Convert(E(n.stop), DType::kI32);
    if (!err_.empty()) return;
    const uint32_t next = I32Op(spv::Op::OpIAdd, b_.OpR(spv::Op::OpLoad, I32(), {var}),
                                CI32(static_cast<int32_t>(*ir::FoldInt(n.step))));
    IfThen(b_.OpR(spv::Op::OpSLessThan, Bool(), {next, stop.id}), [&] { PrefetchLoads(n, pf, next); });
    for (size_t i = pf.end + 1; i < b.size() && err_.empty(); ++i) Stmt(b[i]);
    scopes_.pop_back();
  }
  uint32_t PrefetchSlot(const gpu::SCopyVec& n) {
    const uint32_t index = I32Op(spv::Op::OpIAdd, CI32(static_cast<int32_t>(prefetch_slot_.at(&n))),
                                 trip_counters_.back());
    return b_.OpR(spv::Op::OpAccessChain, b_.TypePointer(SC::Function, b_.TypeVector(U32(), 4)),
                  {prefetch_regs_, index});
  }

  void ForLoop(const gpu::SFor& n) {
    const Val start = E(n.start);
    if (!err_.empty()) return;
    const DType t = start.t;
    const uint32_t rt = Rep(t);
    const uint32_t var = b_.FunctionVariable(b_.TypePointer(SC::Function, rt));
    b_.Name(var, n.var);
    b_.Op(spv::Op::OpStore, {var, start.id});
    const std::optional<int64_t> step_c = ir::FoldInt(n.step);
    const bool down = step_c && *step_c < 0;
    const int64_t trips = ThreadStridedTrips(n, t);
    const uint32_t header = b_.NewId(), cond_l = b_.NewId(), body_l = b_.NewId(), cont = b_.NewId(),
                   merge = b_.NewId();
    uint32_t counter = 0;
    if (trips > 0) {
      counter = b_.FunctionVariable(b_.TypePointer(SC::Function, rt));
      b_.Op(spv::Op::OpStore, {counter, CI32(0)});
    }
    b_.Branch(header);
    L(header);
    b_.Op(spv::Op::OpLoopMerge, {merge, cont,
                                 static_cast<uint32_t>(n.unroll || trips > 0 ? spv::LoopControlMask::Unroll
                                                                             : spv::LoopControlMask::MaskNone)});
    b_.Branch(cond_l);
    L(cond_l);
    if (trips > 0) {
      // for (c = 0; c < trips; ++c) { var = start + c * step; body }
      const uint32_t c = b_.OpR(spv::Op::OpLoad, rt, {counter});
      b_.BranchConditional(b_.OpR(spv::Op::OpSLessThan, Bool(), {c, CI32(static_cast<int32_t>(trips))}), body_l,
                           merge);
      L(body_l);
      b_.Op(spv::Op::OpStore, {var, I32Op(spv::Op::OpIAdd, start.id,
                                          I32Op(spv::Op::OpIMul, c, CI32(static_cast<int32_t>(*step_c))))});
    } else {
      const uint32_t i = b_.OpR(spv::Op::OpLoad, rt, {var});
      const Val stop = Convert(E(n.stop), t);
      if (!err_.empty()) return;
      const bool sg = ir::IsSigned(t);
      const spv::Op cmp = down ? (sg ? spv::Op::OpSGreaterThan : spv::Op::OpUGreaterThan)
                               : (sg ? spv::Op::OpSLessThan : spv::Op::OpULessThan);
      b_.BranchConditional(b_.OpR(cmp, Bool(), {i, stop.id}), body_l, merge);
      L(body_l);
    }
    scopes_.emplace_back();
    Bind(n.var, {true, var, t});
    const bool inv = Invariant(n.start) && Invariant(n.stop) && Invariant(n.step);
    const bool saved_uniform = uniform_;
    uniform_ = uniform_ && inv;
    const bool was_variant = variant_.count(n.var) > 0;
    if (inv) {
      variant_.erase(n.var);
    } else {
      variant_.insert(n.var);
    }
    if (trips > 0) trip_counters_.push_back(b_.OpR(spv::Op::OpLoad, rt, {counter}));
    if (prefetch_ == &n) {
      prefetch_ = nullptr;  // copy loops inside are emitted plainly (twice)
      PrefetchBody(n, prefetch_plan_, var);
    } else {
      Block(n.body);
    }
    if (trips > 0) trip_counters_.pop_back();
    uniform_ = saved_uniform;
    if (was_variant) {
      variant_.insert(n.var);
    } else {
      variant_.erase(n.var);
    }
    scopes_.pop_back();
    if (b_.open()) b_.Branch(cont);
    L(cont);
    if (trips > 0) {
      b_.Op(spv::Op::OpStore, {counter, I32Op(spv::Op::OpIAdd, b_.OpR(spv::Op::OpLoad, rt, {counter}), CI32(1))});
    } else {
      const Val step = Convert(E(n.step), t);
      if (!err_.empty()) return;
      const uint32_t i2 = b_.OpR(spv::Op::OpLoad, rt, {var});
      b_.Op(spv::Op::OpStore, {var, b_.OpR(spv::Op::OpIAdd, rt, {i2, step.id})});
    }
    b_.Branch(header);
    L(merge);
  }

  // The threads-strided loops of the GPU lowering (copies, fills:
  // `for e = tl_tid; e < S; e += threads`) with S a multiple of the threads
  // run S / threads times in every thread. Emitted as a counted loop marked
  // Unroll (up to 64 trips), so that spirv-opt and drivers unroll them and
  // issue all of a thread's global loads before their shared stores; as a
  // tid-started loop NVIDIA's compiler waited for each load in turn (the
  // GEMM's operand copies). 0: not such a loop.
  int64_t ThreadStridedTrips(const gpu::SFor& n, DType t) const {
    const auto* v = ir::As<ir::VarRef>(n.start);
    if (!v || v->name != "tl_tid" || t != DType::kI32) return 0;
    const std::optional<int64_t> step = ir::FoldInt(n.step), stop = ir::FoldInt(n.stop);
    if (!step || !stop || *step != k_.threads || *stop <= 0 || *stop % *step != 0) return 0;
    const int64_t trips = *stop / *step;
    return trips <= 64 ? trips : 0;
  }

  void If(const gpu::SIf& n) {
    const Val c = Convert(E(n.cond), DType::kBool);
    if (!err_.empty()) return;
    const uint32_t then_l = b_.NewId(), merge = b_.NewId();
    const uint32_t else_l = n.else_body.empty() ? merge : b_.NewId();
    b_.Op(spv::Op::OpSelectionMerge, {merge, 0});
    b_.BranchConditional(c.id, then_l, else_l);
    const bool saved_uniform = uniform_;
    uniform_ = uniform_ && Invariant(n.cond);
    L(then_l);
    Block(n.then_body);
    if (b_.open()) b_.Branch(merge);
    if (!n.else_body.empty()) {
      L(else_l);
      Block(n.else_body);
      if (b_.open()) b_.Branch(merge);
    }
    uniform_ = saved_uniform;
    L(merge);
  }

  // Workgroup scratch of T values of `t`'s representation (one per type).
  uint32_t Scratch(DType t) {
    const uint32_t rt = Rep(t);
    auto it = scratch_.find(rt);
    if (it != scratch_.end()) return it->second;
    const int64_t n = std::max<int64_t>(k_.threads, 1);
    const uint32_t var = b_.GlobalVariable(b_.TypePointer(SC::Workgroup, b_.TypeArray(rt, static_cast<uint32_t>(n))),
                                           SC::Workgroup);
    b_.Name(var, "tl_lane_scratch");
    const int64_t bytes = t == DType::kBool ? 4 : std::max(4, ir::BitWidth(t) / 8);
    shared_bytes_ = (shared_bytes_ + 15) / 16 * 16 + n * bytes;
    scratch_[rt] = var;
    return var;
  }

  // var = op over the `width` lanes tid & ~(width-1) ... | (width-1), every
  // lane getting the same value (same combination order everywhere).
  void LaneReduceShared(const gpu::SLaneReduce& n, const Binding& var) {
    const uint32_t rt = Rep(n.dtype);
    const uint32_t scratch = Scratch(n.dtype);
    const uint32_t ptr_t = b_.TypePointer(SC::Workgroup, rt);
    const uint32_t v = b_.OpR(spv::Op::OpLoad, rt, {var.id});
    b_.Op(spv::Op::OpStore, {b_.OpR(spv::Op::OpAccessChain, ptr_t, {scratch, tid_}), v});
    Barrier();
    const uint32_t base = b_.OpR(spv::Op::OpBitwiseAnd, I32(), {tid_, CI32(static_cast<int32_t>(~(n.width - 1)))});
    uint32_t acc = b_.OpR(spv::Op::OpLoad, rt, {b_.OpR(spv::Op::OpAccessChain, ptr_t, {scratch, base})});
    for (int64_t j = 1; j < n.width; ++j) {
      const uint32_t at = b_.OpR(spv::Op::OpIAdd, I32(), {base, CI32(static_cast<int32_t>(j))});
      const uint32_t x = b_.OpR(spv::Op::OpLoad, rt, {b_.OpR(spv::Op::OpAccessChain, ptr_t, {scratch, at})});
      acc = Combine(n.op, n.dtype, acc, x);
    }
    Barrier();  // the scratch is free again for the next reduction
    b_.Op(spv::Op::OpStore, {var.id, acc});
  }

  void LaneReduce(const gpu::SLaneReduce& n) {
    const Binding* bnd = Lookup(n.var);
    if (!bnd || !bnd->is_var) {
      Error("LaneReduce of " + n.var + ", which is not a variable");
      return;
    }
    const Binding var = *bnd;
    ++lane_reduces_;
    if (n.width <= 1) return;
    if (!(o_.subgroup_shuffle && ShuffleType(n.dtype) && sg_ok_ != 0)) {
      LaneReduceShared(n, var);
      return;
    }
    const uint32_t rt = Rep(n.dtype);
    const uint32_t shuffle_l = b_.NewId(), shared_l = b_.NewId(), merge = b_.NewId();
    b_.Op(spv::Op::OpSelectionMerge, {merge, 0});
    b_.BranchConditional(sg_ok_, shuffle_l, shared_l);
    L(shuffle_l);
    uint32_t v = b_.OpR(spv::Op::OpLoad, rt, {var.id});
    for (int64_t off = n.width / 2; off > 0; off /= 2) {
      const uint32_t other =
          b_.OpR(spv::Op::OpGroupNonUniformShuffleXor, rt, {CU32(kScopeSubgroup), v, CU32(static_cast<uint32_t>(off))});
      v = Combine(n.op, n.dtype, v, other);
    }
    b_.Op(spv::Op::OpStore, {var.id, v});
    b_.Branch(merge);
    L(shared_l);
    LaneReduceShared(n, var);
    b_.Branch(merge);
    L(merge);
  }

  // ---- cooperative matrices (SMma, SpirvOptions::cooperative_matrix) ---------
  // SMma's accumulator layout (simt_ir.h): warp w = wc * wm + wr (wm = R / 8)
  // holds, for m-tile j and half h, the 8 rows r0 .. r0+8 with
  // r0 = (2j+h) R + 8 wr (lane l: row r0 + l/4), and for n-tile n the 8
  // columns c0 .. c0+8 with c0 = 8 (n C + wc) (lane l: c0 + 2 (l%4) + e). Its
  // 8-row runs are contiguous, its 16-row m-tiles are not (the halves are R
  // apart). So each accumulator tile is a block of the transposed product
  //   C^T[c0 .. c0+16, r0 .. r0+8] (16 x 8, f32) += B^T (16 x 16) * A^T (16 x 8)
  // in the 16x8x16 shape, with B^T and A^T loaded from the shared operands as
  // column- or row-major matrices by their strides. With one warp column
  // (C = 1) the 16 columns are the warp's n-tiles 2t and 2t+1 ("paired");
  // with C > 1 a warp's n-tiles are 8 C apart, so the tile is n-tile t plus
  // the next 8 columns, which belong to another warp: computed and dropped
  // (twice the matrix work; their operand reads stay inside B's padded rows,
  // a precondition). Conversions between those tiles and the registers go
  // through a 512-byte Workgroup block per warp (column-major C^T = row-major
  // C).
  struct CoopAcc {
    const gpu::SMma* shape = nullptr;
    std::vector<uint32_t> vars;  // Function variables, index ((j * 2 + h) * CoopTiles + t)
  };
  static bool CoopPaired(const gpu::SMma& m) { return m.C == 1 && m.n_tiles % 2 == 0; }
  static int64_t CoopTiles(const gpu::SMma& m) { return CoopPaired(m) ? m.n_tiles / 2 : m.n_tiles; }

  void CoopSetup() {
    auto shared_f16 = [&](const std::string& name, int64_t* elements) {
      for (const gpu::SimtBuffer& sb : k_.buffers) {
        if (sb.name == name) {
          *elements = sb.elements;
          return sb.space == gpu::Space::kShared && sb.dtype == DType::kF16;
        }
      }
      return false;
    };
    auto aligned = [](int64_t stride) { return stride > 0 && (stride * 2) % 16 == 0; };
    for (const gpu::SMma* m : mma_) {
      if (m->kind != gpu::MmaKind::kF16) {
        return CoopUnfit(std::string("k-steps of kind ") + gpu::MmaKindName(m->kind) +
                         " (only f16 operands with f32 accumulators are emitted)");
      }
      int64_t a_elems = 0, b_elems = 0;
      if (!shared_f16(m->a, &a_elems) || !shared_f16(m->b, &b_elems)) {
        return CoopUnfit("operands " + m->a + ", " + m->b + " are not f16 shared buffers");
      }
      if (m->R % 8 != 0 || m->C < 1) return CoopUnfit("an accumulator layout with R = " + std::to_string(m->R));
      const std::optional<int64_t> ab = ir::FoldInt(m->a_base), bb = ir::FoldInt(m->b_base);
      if (!ab || !bb || *ab % 8 != 0 || *bb % 8 != 0) {
        return CoopUnfit("operand base offsets not known multiples of 8 elements (16 bytes)");
      }
      const bool a_ok = (m->a_col_stride == 1 && aligned(m->a_row_stride)) ||
                        (m->a_row_stride == 1 && aligned(m->a_col_stride));
      const bool b_ok = (m->b_n_stride == 1 && aligned(m->b_k_stride)) ||
                        (m->b_k_stride == 1 && aligned(m->b_n_stride));
      if (!a_ok || !b_ok) {
        return CoopUnfit("operand strides A (" + std::to_string(m->a_row_stride) + ", " +
                         std::to_string(m->a_col_stride) + "), B (" + std::to_string(m->b_k_stride) + ", " +
                         std::to_string(m->b_n_stride) +
                         ") are not unit in one dim and a multiple of 16 bytes in the other");
      }
      if (!CoopPaired(*m)) {
        // The 8 columns past each n-tile are read from B's row: they must be
        // inside it (padding), and B must be row-major there.
        const int64_t cols = m->n_tiles * m->C * 8;
        if (m->b_n_stride != 1 || m->b_k_stride < cols + 8 ||
            *bb + (b_elems / m->b_k_stride - 1) * m->b_k_stride + cols + 8 > b_elems) {
          return CoopUnfit("a " + std::to_string(m->C) + "-column warp grid needs B row-major with 8 columns of "
                           "padding (row stride " + std::to_string(m->b_k_stride) + " for " + std::to_string(cols) +
                           " columns)");
        }
      }
      (void)a_elems;
    }
    if (!atomic_bufs_.empty()) {
      return CoopUnfit("atomic_add in the kernel (device-scope atomics under the Vulkan memory model need "
                       "vulkanMemoryModelDeviceScope, which is not requested)");
    }
    if (k_.threads % 32 != 0) return CoopUnfit(std::to_string(k_.threads) + " threads (warps of 32 are needed)");
    coop_ = true;
    emu_ = o_.cooperative_matrix_emulated;
    const uint32_t f16 = FloatT(16), f32 = F32(), sg = CU32(kScopeSubgroup);
    if (emu_) {
      // The real variant's requirements but the shape token (and no memory
      // model in the module), so that it ranks above the subgroup variant as
      // the real one does (selection counts feature tokens first).
      Feature("vulkanMemoryModel");
      // An accumulator is spread over the warp's 32 lanes, 4 elements each
      // (EmuAccElement); operands are read from shared memory by the
      // multiply-add itself (EmuOperand), so no lane holds a whole matrix:
      // per-lane copies of every matrix (14 KiB of dynamically indexed
      // Function arrays per thread for a 2x2 warp grid) stalled NVIDIA's
      // pipeline compiler for minutes (2026-12-03 H200 run).
      coop_acc_t_ = b_.TypeArray(f32, 4);
    } else {
      b_.UseVulkanMemoryModel();
      b_.CapabilityRaw(khr::kCapabilityCooperativeMatrix);
      b_.Extension("SPV_KHR_cooperative_matrix");
      features_.insert(kCoopmatToken);
      Feature("vulkanMemoryModel");
      coop_a_t_ = b_.TypeRaw(khr::kOpTypeCooperativeMatrix, {f16, sg, CU32(16), CU32(16), CU32(khr::kUseMatrixA)});
      coop_b_t_ = b_.TypeRaw(khr::kOpTypeCooperativeMatrix, {f16, sg, CU32(16), CU32(8), CU32(khr::kUseMatrixB)});
      coop_acc_t_ = b_.TypeRaw(khr::kOpTypeCooperativeMatrix, {f32, sg, CU32(16), CU32(8), CU32(khr::kUseAccumulator)});
    }
    const int64_t n = k_.threads / 32 * 128;
    coop_scratch_ = b_.GlobalVariable(b_.TypePointer(SC::Workgroup, b_.TypeArray(f32, static_cast<uint32_t>(n))),
                                      SC::Workgroup);
    b_.Name(coop_scratch_, "tl_coopmat_scratch");
    shared_bytes_ = (shared_bytes_ + 15) / 16 * 16 + n * 4;
  }

  static void CollectMmaTargets(const gpu::SBlock& body, std::set<std::string>* out) {
    for (const gpu::SStmt& s : body) {
      if (const auto* m = std::get_if<gpu::SMma>(&s.node)) out->insert(m->c);
      if (const auto* f = std::get_if<gpu::SFor>(&s.node)) CollectMmaTargets(f->body, out);
      if (const auto* i = std::get_if<gpu::SIf>(&s.node)) {
        CollectMmaTargets(i->then_body, out);
        CollectMmaTargets(i->else_body, out);
      }
    }
  }
  static const gpu::SMma* FirstMma(const gpu::SBlock& body, const std::string& c) {
    for (const gpu::SStmt& s : body) {
      const gpu::SMma* found = nullptr;
      if (const auto* m = std::get_if<gpu::SMma>(&s.node)) found = m->c == c ? m : nullptr;
      if (const auto* f = std::get_if<gpu::SFor>(&s.node)) found = FirstMma(f->body, c);
      if (const auto* i = std::get_if<gpu::SIf>(&s.node)) {
        found = FirstMma(i->then_body, c);
        if (!found) found = FirstMma(i->else_body, c);
      }
      if (found) return found;
    }
    return nullptr;
  }
  // Every SMma on `c` in `body` has the accumulator shape of the first.
  static bool UniformMmaShape(const gpu::SBlock& body, const std::string& c) {
    const gpu::SMma* first = FirstMma(body, c);
    bool same = first != nullptr;
    std::function<void(const gpu::SBlock&)> walk = [&](const gpu::SBlock& b) {
      for (const gpu::SStmt& s : b) {
        if (const auto* m = std::get_if<gpu::SMma>(&s.node)) {
          if (m->c == c && (m->m_tiles != first->m_tiles || m->n_tiles != first->n_tiles || m->R != first->R ||
                            m->c_col_slots != first->c_col_slots || m->C != first->C)) {
            same = false;
          }
        }
        if (const auto* f = std::get_if<gpu::SFor>(&s.node)) walk(f->body);
        if (const auto* i = std::get_if<gpu::SIf>(&s.node)) {
          walk(i->then_body);
          walk(i->else_body);
        }
      }
    };
    if (same) walk(body);
    return same;
  }
  // Whether `body` reads or writes buffer `c` other than as an SMma accumulator.
  static bool TouchesOutsideMma(const gpu::SBlock& body, const std::string& c) {
    auto loads = [&](const Expr& e) {
      bool found = false;
      ir::WalkExpr(e, [&](const Expr& x) {
        if (const auto* l = ir::As<ir::Load>(x)) found = found || l->buffer == c;
      });
      return found;
    };
    for (const gpu::SStmt& s : body) {
      bool touches = std::visit(
          [&](const auto& n) -> bool {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, gpu::SLet>) return loads(n.value);
            if constexpr (std::is_same_v<T, gpu::SVar>) return n.init && loads(*n.init);
            if constexpr (std::is_same_v<T, gpu::SAssign>) return loads(n.value);
            if constexpr (std::is_same_v<T, gpu::SStore> || std::is_same_v<T, gpu::SAtomicAdd>) {
              return n.buffer == c || loads(n.index) || loads(n.value);
            }
            if constexpr (std::is_same_v<T, gpu::SFor>) {
              return loads(n.start) || loads(n.stop) || loads(n.step) || TouchesOutsideMma(n.body, c);
            }
            if constexpr (std::is_same_v<T, gpu::SIf>) {
              return loads(n.cond) || TouchesOutsideMma(n.then_body, c) || TouchesOutsideMma(n.else_body, c);
            }
            if constexpr (std::is_same_v<T, gpu::SMma>) {
              return n.a == c || n.b == c || loads(n.a_base) || loads(n.b_base) || loads(n.k0);
            }
            if constexpr (std::is_same_v<T, gpu::SCopyVec>) {
              return n.dst == c || n.src == c || loads(n.dst_index) || loads(n.src_index);
            }
            return false;
          },
          s.node);
      if (touches) return true;
    }
    return false;
  }

  // OpControlBarrier(Subgroup, Subgroup): the lanes of a warp exchange an
  // accumulator block through Workgroup memory.
  void SubgroupBarrier() {
    b_.Op(spv::Op::OpControlBarrier, {CU32(kScopeSubgroup), CU32(kScopeSubgroup),
                                      CU32(0x8 | 0x100 | khr::kSemanticsMakeAvailable | khr::kSemanticsMakeVisible)});
  }
  uint32_t I32Op(spv::Op op, uint32_t a, uint32_t b) { return b_.OpR(op, I32(), {a, b}); }
  uint32_t Warp() { return I32Op(spv::Op::OpShiftRightArithmetic, tid_, CI32(5)); }
  uint32_t Lane() { return I32Op(spv::Op::OpBitwiseAnd, tid_, CI32(31)); }
  uint32_t ScratchPtr(uint32_t index) {
    return b_.OpR(spv::Op::OpAccessChain, b_.TypePointer(SC::Workgroup, F32()), {coop_scratch_, index});
  }
  // Moves the lanes' part of accumulator tile (j, h, t) between registers and
  // the warp's Workgroup block: element (row l/4, column 8 dn + 2 (l%4) + e)
  // of the 8 x 16 block at w * 128 + row * 16 + column; dn = 1 only for
  // paired tiles (else those 8 columns are another warp's and stay as they
  // are: garbage that only reaches the dropped part of the tile).
  void CoopBlockRegs(const gpu::SMma& m, int64_t j, int64_t h, int64_t t, bool to_scratch) {
    const BufInfo* c = Buf(m.c);
    if (!c) return;
    const BufInfo ci = *c;
    const uint32_t lane = Lane();
    const uint32_t base = I32Op(
        spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, Warp(), CI32(128)),
        I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, I32Op(spv::Op::OpShiftRightArithmetic, lane, CI32(2)), CI32(16)),
              I32Op(spv::Op::OpIMul, I32Op(spv::Op::OpBitwiseAnd, lane, CI32(3)), CI32(2))));
    const bool paired = CoopPaired(m);
    for (int64_t dn = 0; dn < (paired ? 2 : 1); ++dn) {
      const int64_t n = paired ? 2 * t + dn : t;
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t slot = (2 * j + h) * m.c_col_slots + 2 * n + e;
        const uint32_t reg = Chain(ci, CI32(static_cast<int32_t>(slot)));
        const uint32_t at = ScratchPtr(I32Op(spv::Op::OpIAdd, base, CI32(static_cast<int32_t>(8 * dn + e))));
        if (to_scratch) {
          b_.Op(spv::Op::OpStore, {at, b_.OpR(spv::Op::OpLoad, F32(), {reg})});
        } else {
          b_.Op(spv::Op::OpStore, {reg, b_.OpR(spv::Op::OpLoad, F32(), {at})});
        }
      }
    }
  }
  uint32_t CoopBlockPtr() { return ScratchPtr(I32Op(spv::Op::OpIMul, Warp(), CI32(128))); }

  std::vector<uint32_t> CoopVars(const gpu::SMma& m) {
    std::vector<uint32_t> vars;
    for (int64_t i = 0; i < m.m_tiles * 2 * CoopTiles(m); ++i) {
      vars.push_back(b_.FunctionVariable(b_.TypePointer(SC::Function, coop_acc_t_)));
    }
    return vars;
  }
  // Registers -> cooperative matrices (`vars`), or back.
  void CoopConvert(const gpu::SMma& m, const std::vector<uint32_t>& vars, bool to_matrices) {
    const int64_t tiles = CoopTiles(m);
    for (int64_t j = 0; j < m.m_tiles; ++j) {
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t t = 0; t < tiles; ++t) {
          const uint32_t var = vars[static_cast<size_t>((j * 2 + h) * tiles + t)];
          if (to_matrices) {
            CoopBlockRegs(m, j, h, t, true);
            CoopSync();
            AccFromScratch(var);
            CoopSync();
          } else {
            AccToScratch(var);
            CoopSync();
            CoopBlockRegs(m, j, h, t, false);
            CoopSync();
          }
        }
      }
    }
  }
  // One k-step on the cooperative matrices `vars`.
  void CoopMulAdd(const gpu::SMma& m, const std::vector<uint32_t>& vars) {
    const BufInfo* ab = Buf(m.a);
    const BufInfo* bb = Buf(m.b);
    if (!ab || !bb) return;
    const BufInfo a = *ab, b = *bb;
    const Val k0 = Convert(E(m.k0), DType::kI32);
    if (!err_.empty()) return;
    const int32_t a_base = static_cast<int32_t>(*ir::FoldInt(m.a_base));
    const int32_t b_base = static_cast<int32_t>(*ir::FoldInt(m.b_base));
    auto ci = [&](int64_t v) { return CI32(static_cast<int32_t>(v)); };
    const int64_t tiles = CoopTiles(m);
    const bool paired = CoopPaired(m);
    const uint32_t warp = Warp();
    const int64_t wm = m.R / 8;
    const uint32_t wr = I32Op(spv::Op::OpSMod, warp, ci(wm));
    const uint32_t wc = I32Op(spv::Op::OpSDiv, warp, ci(wm));
    // B^T for each column tile t: columns c0 .. c0+16.
    std::vector<uint32_t> bt;
    for (int64_t t = 0; t < tiles; ++t) {
      const uint32_t c0 = paired ? ci(16 * t) : I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, wc, ci(8)), ci(8 * t * m.C));
      uint32_t idx = 0, layout = 0, stride = 0;
      if (m.b_n_stride == 1) {  // B rows contiguous: B^T column-major
        idx = I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, k0.id, ci(m.b_k_stride)), c0),
                    ci(b_base));
        layout = khr::kLayoutColumnMajor;
        stride = static_cast<uint32_t>(m.b_k_stride);
      } else {  // B stored N x K (paired tiles only): B^T row-major
        idx = I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIAdd, k0.id, I32Op(spv::Op::OpIMul, c0, ci(m.b_n_stride))),
                    ci(b_base));
        layout = khr::kLayoutRowMajor;
        stride = static_cast<uint32_t>(m.b_n_stride);
      }
      bt.push_back(MatLoadOperand(true, b, idx, layout, stride));
    }
    const uint32_t wr8 = I32Op(spv::Op::OpIMul, wr, CI32(8));
    for (int64_t j = 0; j < m.m_tiles; ++j) {
      for (int64_t h = 0; h < 2; ++h) {
        const uint32_t r0 = I32Op(spv::Op::OpIAdd, wr8, ci((2 * j + h) * m.R));
        uint32_t idx = 0, layout = 0, stride = 0;
        if (m.a_col_stride == 1) {  // A rows contiguous: A^T column-major
          idx = I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, r0, ci(m.a_row_stride)), k0.id),
                      ci(a_base));
          layout = khr::kLayoutColumnMajor;
          stride = static_cast<uint32_t>(m.a_row_stride);
        } else {  // A stored K x M: A^T row-major
          idx = I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIAdd, r0, I32Op(spv::Op::OpIMul, k0.id, ci(m.a_col_stride))),
                      ci(a_base));
          layout = khr::kLayoutRowMajor;
          stride = static_cast<uint32_t>(m.a_col_stride);
        }
        const uint32_t at = MatLoadOperand(false, a, idx, layout, stride);
        for (int64_t t = 0; t < tiles; ++t) {
          MatMulAdd(bt[static_cast<size_t>(t)], at, vars[static_cast<size_t>((j * 2 + h) * tiles + t)]);
        }
      }
    }
  }

  // ---- the four matrix primitives: cooperative-matrix instructions, or (with
  // SpirvOptions::cooperative_matrix_emulated) plain loops over Function
  // arrays that give the same results on any device, so the data movement
  // around them is tested on lavapipe.
  void CoopSync() {
    if (emu_) {
      Barrier();  // a "warp" of 32 threads is not a subgroup there
    } else {
      SubgroupBarrier();
    }
  }
  // for (i = 0; i < count; ++i) body(i), as a structured loop kept rolled
  // (DontUnroll): the emulation is for checking addressing, and a driver
  // that unrolls every nest (16 k x 4 elements x tiles x k-steps) spends its
  // time there, not in running the test.
  void EmuFor(int64_t count, const std::function<void(uint32_t)>& body) {
    const uint32_t i32 = I32();
    const uint32_t var = b_.FunctionVariable(b_.TypePointer(SC::Function, i32));
    b_.Op(spv::Op::OpStore, {var, CI32(0)});
    const uint32_t header = b_.NewId(), cond_l = b_.NewId(), body_l = b_.NewId(), cont = b_.NewId(), merge = b_.NewId();
    b_.Branch(header);
    L(header);
    b_.Op(spv::Op::OpLoopMerge, {merge, cont, static_cast<uint32_t>(spv::LoopControlMask::DontUnroll)});
    b_.Branch(cond_l);
    L(cond_l);
    const uint32_t i = b_.OpR(spv::Op::OpLoad, i32, {var});
    b_.BranchConditional(b_.OpR(spv::Op::OpSLessThan, Bool(), {i, CI32(static_cast<int32_t>(count))}), body_l, merge);
    L(body_l);
    body(i);
    b_.Branch(cont);
    L(cont);
    b_.Op(spv::Op::OpStore, {var, I32Op(spv::Op::OpIAdd, b_.OpR(spv::Op::OpLoad, i32, {var}), CI32(1))});
    b_.Branch(header);
    L(merge);
  }
  uint32_t EmuElem(uint32_t var, uint32_t index) {
    return b_.OpR(spv::Op::OpAccessChain, b_.TypePointer(SC::Function, F32()), {var, index});
  }
  // An emulated operand: where OpCooperativeMatrixLoadKHR would have read it.
  struct EmuOperand {
    BufInfo mem;
    uint32_t idx = 0, layout = 0, stride = 0, cols = 0;
  };
  // Element (row, col) of emulated operand `op`, as f32.
  uint32_t EmuOperandAt(const EmuOperand& op, uint32_t row, uint32_t col) {
    const uint32_t st = CI32(static_cast<int32_t>(op.stride));
    const uint32_t off = op.layout == khr::kLayoutRowMajor ? I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, row, st), col)
                                                           : I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, col, st), row);
    const uint32_t raw = b_.OpR(spv::Op::OpLoad, op.mem.elem, {Chain(op.mem, I32Op(spv::Op::OpIAdd, op.idx, off))});
    return FromMemory(raw, op.mem).id;
  }
  // The B^T operand (is_a: MatrixA, 16 x 16) or A^T (MatrixB, 16 x 8) from
  // shared memory at `idx` with `layout` and `stride`. Emulated: a handle
  // (index into emu_operands_) read by MatMulAdd; no shared store comes
  // between a k-step's loads and its multiply-adds.
  uint32_t MatLoadOperand(bool is_a, const BufInfo& mem, uint32_t idx, uint32_t layout, uint32_t stride) {
    if (!emu_) {
      return b_.OpRawR(khr::kOpCooperativeMatrixLoad, is_a ? coop_a_t_ : coop_b_t_,
                       {Chain(mem, idx), CU32(layout), CU32(stride)});
    }
    emu_operands_.push_back({mem, idx, layout, stride, is_a ? 16u : 8u});
    return static_cast<uint32_t>(emu_operands_.size() - 1);
  }
  // Emulated accumulators: lane l holds elements e = l + 32 q (q < 4) of the
  // 16 x 8 tile, row e / 8, column e % 8, in its float[4] at q.
  void EmuAccElement(uint32_t q, uint32_t* row, uint32_t* col) {
    const uint32_t e = I32Op(spv::Op::OpIAdd, Lane(), I32Op(spv::Op::OpIMul, q, CI32(32)));
    *row = I32Op(spv::Op::OpShiftRightArithmetic, e, CI32(3));
    *col = I32Op(spv::Op::OpBitwiseAnd, e, CI32(7));
  }
  // The accumulator `var` from / to the warp's Workgroup block (column-major,
  // stride 16).
  void AccFromScratch(uint32_t var) {
    if (!emu_) {
      const uint32_t acc = b_.OpRawR(khr::kOpCooperativeMatrixLoad, coop_acc_t_,
                                     {CoopBlockPtr(), CU32(khr::kLayoutColumnMajor), CU32(16)});
      b_.Op(spv::Op::OpStore, {var, acc});
      return;
    }
    EmuFor(4, [&](uint32_t q) {
      uint32_t row = 0, col = 0;
      EmuAccElement(q, &row, &col);
      b_.Op(spv::Op::OpStore, {EmuElem(var, q), b_.OpR(spv::Op::OpLoad, F32(), {ScratchPtr(EmuAccOffset(row, col))})});
    });
  }
  void AccToScratch(uint32_t var) {
    if (!emu_) {
      const uint32_t acc = b_.OpR(spv::Op::OpLoad, coop_acc_t_, {var});
      b_.OpRaw(khr::kOpCooperativeMatrixStore, {CoopBlockPtr(), acc, CU32(khr::kLayoutColumnMajor), CU32(16)});
      return;
    }
    EmuFor(4, [&](uint32_t q) {
      uint32_t row = 0, col = 0;
      EmuAccElement(q, &row, &col);
      b_.Op(spv::Op::OpStore, {ScratchPtr(EmuAccOffset(row, col)), b_.OpR(spv::Op::OpLoad, F32(), {EmuElem(var, q)})});
    });
  }
  // Element (row i, column r) of a 16 x 8 accumulator, stored column-major
  // with stride 16 in the warp's block: w * 128 + r * 16 + i.
  uint32_t EmuAccOffset(uint32_t i, uint32_t r) {
    return I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, Warp(), CI32(128)),
                 I32Op(spv::Op::OpIAdd, I32Op(spv::Op::OpIMul, r, CI32(16)), i));
  }
  // acc (16 x 8) += a (16 x 16) * b (16 x 8).
  void MatMulAdd(uint32_t a, uint32_t b, uint32_t var) {
    if (!emu_) {
      const uint32_t acc = b_.OpR(spv::Op::OpLoad, coop_acc_t_, {var});
      b_.Op(spv::Op::OpStore, {var, b_.OpRawR(khr::kOpCooperativeMatrixMulAdd, coop_acc_t_, {a, b, acc})});
      return;
    }
    const EmuOperand oa = emu_operands_.at(a), ob = emu_operands_.at(b);
    const uint32_t f32 = F32();
    EmuFor(4, [&](uint32_t q) {
      uint32_t i = 0, r = 0;
      EmuAccElement(q, &i, &r);
      const uint32_t sum = b_.FunctionVariable(b_.TypePointer(SC::Function, f32));
      b_.Op(spv::Op::OpStore, {sum, b_.OpR(spv::Op::OpLoad, f32, {EmuElem(var, q)})});
      EmuFor(16, [&](uint32_t kk) {
        const uint32_t x = EmuOperandAt(oa, i, kk), y = EmuOperandAt(ob, kk, r);
        const uint32_t acc = b_.OpR(spv::Op::OpLoad, f32, {sum});
        b_.Op(spv::Op::OpStore, {sum, b_.OpR(spv::Op::OpFAdd, f32, {acc, b_.OpR(spv::Op::OpFMul, f32, {x, y})})});
      });
      b_.Op(spv::Op::OpStore, {EmuElem(var, q), b_.OpR(spv::Op::OpLoad, f32, {sum})});
    });
  }

  void CoopEnter(const gpu::SMma& shape) {
    CoopAcc acc;
    acc.shape = &shape;
    acc.vars = CoopVars(shape);
    CoopConvert(shape, acc.vars, true);
    coop_acc_[shape.c] = std::move(acc);
  }
  void CoopLeave(const std::string& c) {
    auto it = coop_acc_.find(c);
    if (it == coop_acc_.end()) return;
    CoopConvert(*it->second.shape, it->second.vars, false);
    coop_acc_.erase(it);
  }

  void Mma(const gpu::SMma& n) {
    ++coop_mma_emitted_;
    auto it = coop_acc_.find(n.c);
    if (it != coop_acc_.end()) {
      CoopMulAdd(n, it->second.vars);
      return;
    }
    // Not inside a loop that keeps the accumulator: convert around this step.
    ++coop_unhoisted_;
    std::vector<uint32_t>& vars = coop_tmp_[n.c];
    if (vars.empty()) vars = CoopVars(n);
    CoopConvert(n, vars, true);
    CoopMulAdd(n, vars);
    CoopConvert(n, vars, false);
  }

  const gpu::SimtKernel& k_;
  const SpirvOptions& o_;
  SpirvBuilder b_;
  std::string err_;
  StatusCode err_code_ = StatusCode::kUnimplemented;
  std::vector<const gpu::SMma*> mma_;
  bool coop_ = false, emu_ = false;
  uint32_t coop_a_t_ = 0, coop_b_t_ = 0, coop_acc_t_ = 0, coop_scratch_ = 0;
  std::vector<EmuOperand> emu_operands_;                    // emulated operand loads (MatLoadOperand)
  std::map<std::string, CoopAcc> coop_acc_;                 // accumulators kept in matrices (inside a loop)
  std::map<std::string, std::vector<uint32_t>> coop_tmp_;   // matrices for steps converted one by one
  int64_t coop_mma_emitted_ = 0, coop_hoisted_ = 0, coop_unhoisted_ = 0;
  std::set<std::string> features_;
  std::set<std::string> atomic_bufs_;
  enum class CopyMode { kDirect, kLoad, kStore };
  CopyMode copy_mode_ = CopyMode::kDirect;                  // register prefetch phases (PrefetchPlan)
  const gpu::SFor* prefetch_ = nullptr;                     // the k loop about to be emitted with a prefetch
  Prefetch prefetch_plan_;
  uint32_t prefetch_regs_ = 0;                              // Function uvec4[slots]
  std::map<const gpu::SCopyVec*, int64_t> prefetch_slot_;   // first slot of each prefetched copy
  std::vector<uint32_t> trip_counters_;                     // trip counters of the enclosing threads-strided loops
  int64_t coop_prefetched_ = 0;
  std::set<std::string> written_;                           // buffers stored to (SStore, SCopyVec, atomics)
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> wide_views_;  // (binding, word type) -> view (CopyVec)
  std::map<std::string, BufInfo> bufs_;
  std::vector<PushMember> push_members_;
  std::vector<std::map<std::string, Binding>> scopes_;
  std::map<uint32_t, uint32_t> scratch_;
  std::vector<uint32_t> interface_;
  uint32_t push_struct_ = 0, push_var_ = 0, wg_id_ = 0, local_index_ = 0, subgroup_size_ = 0;
  uint32_t fn_ = 0, tid_ = 0, sg_ok_ = 0, cur_label_ = 0;
  int64_t shared_bytes_ = 0, max_width_ = 1;
  int lane_reduces_ = 0, shuffle_reduces_ = 0;
  std::set<std::string> variant_{"tl_tid"};  // names whose value differs between threads
  bool uniform_ = true;                      // every thread of the workgroup reaches this point
  int uniform_store_barriers_ = 0;
};

}  // namespace

StatusOr<SpirvModule> EmitSpirvUnchecked(const gpu::SimtKernel& k, const SpirvOptions& options) {
  return Emitter(k, options).Run();
}

StatusOr<SpirvModule> EmitSpirv(const gpu::SimtKernel& k, const SpirvOptions& options) {
  StatusOr<SpirvModule> m = EmitSpirvUnchecked(k, options);
  if (!m.ok()) return m.status();
  if (m->cooperative_mma > 0 && !options.cooperative_matrix_emulated) {
    // Debian 12's SPIRV-Tools 2023.1 predates SPV_KHR_cooperative_matrix: its
    // validator rejects the opcodes (compiler.spirv.Builder.
    // CooperativeMatrixKhrNeedsNewerSpirvTools) and spirv-opt cannot parse
    // them, so exactly these modules are neither validated nor optimized
    // there (the driver compiles them as emitted). A SPIRV-Tools that knows
    // the extension validates them (no spirv-opt: its passes are not needed
    // by the driver and were the source of bugs for coopmat shaders elsewhere).
    if (!SpirvToolsKnowsKhrCooperativeMatrix()) {
      m->validation = "not validated: SPIRV-Tools " + SpirvToolsVersion() +
                      " predates SPV_KHR_cooperative_matrix (not optimized either)";
      return m;
    }
    Status v = ValidateSpirv(m->words, m->version_word, k.name);
    if (!v.ok()) return v;
    m->validation = "spirv-val (Vulkan 1.1 rules), not optimized (cooperative matrix)";
    return m;
  }
  m->validation = options.optimize ? "spirv-val (Vulkan 1.1 rules), after spirv-opt -O" : "spirv-val (Vulkan 1.1 rules)";
  Status v = ValidateSpirv(m->words, m->version_word, k.name);
  if (!v.ok()) return v;
  if (options.optimize) {
    StatusOr<std::vector<uint32_t>> opt = OptimizeSpirv(m->words, m->version_word, k.name);
    if (!opt.ok()) return opt.status();
    v = ValidateSpirv(*opt, m->version_word, k.name + " (after spirv-opt)");
    if (!v.ok()) return v;
    m->words = std::move(*opt);
  }
  return m;
}

}  // namespace tl::codegen::spirv
