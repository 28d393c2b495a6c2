// Internal: the tokenizer of Tile IR text.
//
// Produces the whole token list up front (the parser needs arbitrary
// lookahead to find a statement's `loc(...)` for its diagnostics). Newlines
// are tokens, because they end statements, except inside `(...)` and
// `[...]`, where they are plain whitespace; runs of newlines collapse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tilelang/ir/tile_ir.h"

namespace tl::ir::detail {

enum class TokKind : uint8_t {
  kIdent,    // [A-Za-z_][A-Za-z0-9_]*
  kInt,      // 123, 0xff; `text` holds the digits, `suffix` the dtype if any
  kFloat,    // 1.5, 1e-6, 0x1.8p+0, inf, nan; same
  kString,   // "..." with escapes resolved into `text`
  kPunct,    // ( ) [ ] { } , ; : = -> @ and the operators
  kNewline,
  kEof,
  kError,    // a lexical error; `text` holds the message
};

struct Token {
  TokKind kind = TokKind::kEof;
  std::string text;             // spelling (identifier, punctuation, digits) or string value
  std::optional<DType> suffix;  // `:dtype` of a literal
  int line = 1;
  int col = 1;

  bool Is(TokKind k, std::string_view t) const { return kind == k && text == t; }
  bool IsPunct(std::string_view t) const { return Is(TokKind::kPunct, t); }
  bool IsIdent(std::string_view t) const { return Is(TokKind::kIdent, t); }
};

// Tokenizes `text`. Stops at the first lexical error, which becomes the last
// token (kind kError) followed by kEof; otherwise the list ends with kEof.
std::vector<Token> Tokenize(std::string_view text);

// How a token is named in "found ..." messages: "identifier 'x'", "'->'",
// "end of line", "end of input", ...
std::string Describe(const Token& t);

}  // namespace tl::ir::detail
