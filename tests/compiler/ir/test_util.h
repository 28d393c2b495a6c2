// Helpers shared by the Tile IR tests.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tilelang/ir/tile_ir.h"

namespace tl::ir::testing {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string TestdataPath(const std::string& name) { return std::string(TL_TILEIR_TESTDATA) + "/" + name; }

// A module whose one kernel holds `body` (lines of statements). The body's
// first line is line 6 of the text. In scope: tensors A [64, 64] f32 and
// B [M, 64] f16, scalars n: i32 and x: f32, symbol M: i32, block index bx.
inline std::string WrapKernelBody(const std::string& body) {
  return "tileir 1\n"
         "\n"
         "func @t(A: tensor[64, 64] f32, B: tensor[M, 64] f16, n: i32, x: f32)\n"
         "    dynamic(M: i32) loc(\"t.py\", 1) {\n"
         "  kernel grid(1) threads(128) -> (bx) loc(\"t.py\", 2) {\n" +
         body +
         "  }\n"
         "}\n";
}

// Parses text that must be valid; fails the test otherwise.
inline Module MustParse(const std::string& text) {
  StatusOr<Module> m = ParseModule(text, "test.tir");
  EXPECT_TRUE(m.ok()) << m.status().message() << "\n--- text ---\n" << text;
  return m.ok() ? std::move(m).value() : Module{};
}

// The parse error message for text that must not parse.
inline std::string ParseError(const std::string& text) {
  StatusOr<Module> m = ParseModule(text, "test.tir");
  EXPECT_FALSE(m.ok()) << "parsed unexpectedly:\n" << text;
  return m.ok() ? "" : m.status().message();
}

// The verifier's message for text that parses but must not verify.
inline std::string VerifyError(const std::string& text) {
  Module m = MustParse(text);
  Status s = Verify(m);
  EXPECT_FALSE(s.ok()) << "verified unexpectedly:\n" << text;
  return s.message();
}

}  // namespace tl::ir::testing
