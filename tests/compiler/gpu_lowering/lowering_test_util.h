// The scaffold the compiler.gpu lowering tests share (one copy; each test file
// used to carry its own): Tile IR text to a function, the sm_90a lowering
// options as cuda_bundle.cc sets them, a kernel's build notes, substring
// counts, a walk over the SIMT IR, and Tile IR emitted by the Python frontend
// for the repository's kernel library. Header-only: every test file of
// tl_gpu_lowering_tests includes it; a test file's anonymous namespace pulls
// the names it uses in with `using tl::gpu::test::X;`.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <variant>

#include "tilelang/formats/status.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/lowering/gpu/lower.h"
#include "tilelang/toolchain/host_compiler.h"

namespace tl::gpu::test {

// The first function of Tile IR `text`. A parse error is a test failure (with the text, to see what was
// generated); the function is then the empty one, so the caller's own checks fail too.
inline tl::ir::Function Parse(const std::string& text) {
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(text);
  if (!m.ok()) {
    ADD_FAILURE() << m.status().ToString() << "\n" << text;
    return tl::ir::Function{};
  }
  return m->functions.at(0);
}

// The sm_90a lowering as cuda_bundle.cc makes it without TMA, warp specialization or the staged epilogue:
// 227 KiB of shared memory, kernel parameters as symbols, vector and cp.async copies, gemms by `g`
// (wgmma unless a test compares it with another strategy).
inline tl::gpu::GpuLowerOptions Sm90(tl::gpu::GemmStrategy g = tl::gpu::GemmStrategy::kWgmma) {
  tl::gpu::GpuLowerOptions o;
  o.shared_budget_bytes = 227 * 1024;
  o.symbol_params = true;
  o.gemm = g;
  o.vector_copies = true;
  o.async_copies = true;
  return o;
}

// The sm_90a variant's lowering as cuda_bundle.cc makes it: Sm90() with TMA copies and the wgmma epilogue
// staged through shared memory, warp specialization (`warp_specialize`) and thread-block clusters for
// `hint cluster` (`clusters`: off unless a test asks; in production cuda_bundle.cc turns both on unless
// TL_CUDA_WS=0 / TL_CUDA_CLUSTER=0).
inline tl::gpu::GpuLowerOptions Sm90a(bool warp_specialize = true, bool clusters = false) {
  tl::gpu::GpuLowerOptions o = Sm90();
  o.tma_copies = true;
  o.stage_wgmma_epilogue = true;
  o.warp_specialize = warp_specialize;
  o.clusters = clusters;
  return o;
}

// The build notes of a lowering (why a gemm / copy / pipeline took the form it did), one per line.
inline std::string Notes(const tl::gpu::SimtKernel& k) {
  std::string n;
  for (const std::string& x : k.notes) n += x + "\n";
  return n;
}

// How often `what` occurs in `s`, overlapping occurrences included.
inline size_t Occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Applies `fn` to every statement of `b`, nested ones included (loop bodies, both branches of an if, both
// warp roles), each statement before the ones nested in it. The mutable form lets `fn` edit a statement
// (tests that break a protocol on purpose); it then walks what `fn` left in the statement.
inline void Walk(const tl::gpu::SBlock& b, const std::function<void(const tl::gpu::SStmt&)>& fn) {
  for (const tl::gpu::SStmt& s : b) {
    fn(s);
    if (const auto* f = std::get_if<tl::gpu::SFor>(&s.node)) Walk(f->body, fn);
    if (const auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
      Walk(i->then_body, fn);
      Walk(i->else_body, fn);
    }
    if (const auto* r = std::get_if<tl::gpu::SWarpRoles>(&s.node)) {
      Walk(r->producer, fn);
      Walk(r->consumer, fn);
    }
  }
}
inline void Walk(tl::gpu::SBlock& b, const std::function<void(tl::gpu::SStmt&)>& fn) {
  for (tl::gpu::SStmt& s : b) {
    fn(s);
    if (auto* f = std::get_if<tl::gpu::SFor>(&s.node)) Walk(f->body, fn);
    if (auto* i = std::get_if<tl::gpu::SIf>(&s.node)) {
      Walk(i->then_body, fn);
      Walk(i->else_body, fn);
    }
    if (auto* r = std::get_if<tl::gpu::SWarpRoles>(&s.node)) {
      Walk(r->producer, fn);
      Walk(r->consumer, fn);
    }
  }
}

// The repository root (TL_FRONTEND_GOLDEN_DIR, set for tl_gpu_lowering_tests, is
// tests/python/frontend/golden).
inline std::string RepoRoot() { return std::string(TL_FRONTEND_GOLDEN_DIR) + "/../../../.."; }

// The Tile IR of the library kernel `module`.`factory`(`args`) (e.g. kernels.gemm, matmul_splitk), emitted
// as function `name` by the Python frontend run with Debian's python3 from the repository root; an error
// with python's stderr where it fails.
inline tl::StatusOr<std::string> EmitTileIr(const std::string& module, const std::string& factory, const std::string& args,
                                            const std::string& name) {
  const std::string root = RepoRoot();
  tl::toolchain::ProcessResult r = tl::toolchain::RunProcess(
      {"/usr/bin/python3", "-c",
       "import tilelang\nfrom " + module + " import " + factory + "\nprint(tilelang.emit(" + factory + "(" + args + "), '" +
           name + "'))\n"},
      root, {"PYTHONPATH=" + root + "/compiler/python:" + root});
  if (r.exit_code != 0) return tl::Status(tl::StatusCode::kInternal, factory + "(" + args + ") did not emit: " + r.err);
  return r.out;
}

// kernels.attention.flash_attention(`args`)'s Tile IR (EmitTileIr), or "" with python's message in *err.
inline std::string AttentionIr(const std::string& args, std::string* err) {
  tl::StatusOr<std::string> ir = EmitTileIr("kernels.attention", "flash_attention", args, "fa");
  if (!ir.ok()) *err = ir.status().message();
  return ir.ok() ? *ir : "";
}

// EmitTileIr's text parsed: its first function, or the emission's / the parser's error.
inline tl::StatusOr<tl::ir::Function> EmitFunction(const std::string& module, const std::string& factory,
                                                   const std::string& args, const std::string& name) {
  tl::StatusOr<std::string> text = EmitTileIr(module, factory, args, name);
  if (!text.ok()) return text.status();
  tl::StatusOr<tl::ir::Module> m = tl::ir::ParseModule(*text);
  if (!m.ok()) return m.status();
  return m->functions.at(0);
}

}  // namespace tl::gpu::test
