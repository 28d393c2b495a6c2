// Internal: the C++ emitter behind LowerFunction().
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/passes/passes.h"

namespace tl::codegen::cpu {

// C types of a dtype: the type values are computed in (f16/bf16 compute in
// float) and the type elements are stored as (f16/bf16 as uint16_t bits,
// bool as uint8_t).
const char* ValueType(ir::DType t);
const char* StorageType(ir::DType t);
int64_t StorageBytes(ir::DType t);

// Emits the block function for the single kernel of `f`.
// In: `f` verified, regions explicit, no pipelined loops (passes.h).
class Emitter {
 public:
  Emitter(const ir::Function& f, const passes::LayoutPlan& layouts, const std::vector<passes::Access>& access);

  // Returns the block function's definition; its C name is BlockFunctionName().
  StatusOr<std::string> EmitBlockFunction();
  std::string BlockFunctionName() const { return "tl_block_" + f_.name; }
  uint64_t scratch_bytes() const { return scratch_bytes_; }

 private:
  // Statements.
  void EmitBlock(const ir::Block& b);
  void EmitStmt(const ir::Stmt& s);
  void EmitFor(const ir::For& loop);
  void EmitParallel(const ir::Parallel& p);
  void EmitCopyLike(const ir::Region& src, const ir::Region& dst, bool atomic, const ir::Stmt& s);
  void EmitCopyToPanels(const passes::RegionInfo& src, const passes::BufferLayout& dst, const ir::Stmt& s);
  void EmitFill(const ir::Fill& fill, const ir::Stmt& s);
  void EmitGemm(const ir::Gemm& g, const ir::Stmt& s);
  void EmitReduce(const ir::Reduce& r, const ir::Stmt& s);
  void EmitCumsum(const ir::Cumsum& c, const ir::Stmt& s);
  void EmitAtomicAdd(const ir::AtomicAdd& a, const ir::Stmt& s);

  // Expressions: C text of the value (in ValueType of its dtype).
  std::string Expr(const ir::Expr& e);
  std::string Literal(const ir::Expr& e);
  // `v` of dtype `from` converted to the value type of `to`.
  std::string Convert(ir::DType from, ir::DType to, const std::string& v);
  // The C lvalue of buffer[indices] (indices are C int64 expressions).
  std::string Element(const std::string& buffer, const std::vector<std::string>& indices);
  std::string LoadValue(const std::string& buffer, const std::vector<std::string>& indices);
  std::string StoreStmt(const std::string& buffer, const std::vector<std::string>& indices, ir::DType from,
                        const std::string& value);
  std::string Dim(const std::string& buffer, size_t i);  // C text of a buffer dim (int64)
  std::string Id(const std::string& name) const;          // IR name -> C identifier
  std::string Tmp(const char* stem);                      // fresh generated name

  // Output.
  void Line(const std::string& text);
  void Open(const std::string& text);  // "text {" and indent
  void Close(const std::string& tail = "");
  void Fail(const ir::Stmt& s, const std::string& message);

  const ir::Function& f_;
  const passes::LayoutPlan& layouts_;
  const std::vector<passes::Access>& access_;
  ir::SymbolTable syms_;
  std::map<std::string, uint64_t> scratch_offset_;  // buffers in scratch
  uint64_t gemm_scratch_offset_ = 0;
  uint64_t scratch_bytes_ = 0;
  std::ostringstream out_;
  int indent_ = 0;
  int tmp_ = 0;
  Status status_;
};

}  // namespace tl::codegen::cpu
