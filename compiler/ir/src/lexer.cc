// Tokenizer of Tile IR text; see lexer.h.
#include "lexer.h"

#include <cctype>

namespace tl::ir::detail {

namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool IsHexDigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// Longest first, so that "<<" wins over "<".
constexpr std::string_view kPuncts[] = {
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "[", "]", "{", "}", ",", ";",
    ":",  "=",  "@",  "+",  "-",  "*",  "/",  "%",  "<",  ">", "&", "^", "|", "!", "~",
};

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  std::vector<Token> Run() {
    std::vector<Token> out;
    int depth = 0;  // nesting of ( and [; newlines inside are whitespace
    while (true) {
      SkipSpaceAndComments();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= text_.size()) {
        t.kind = TokKind::kEof;
        out.push_back(std::move(t));
        return out;
      }
      char c = text_[pos_];
      if (c == '\n') {
        Advance();
        if (depth == 0 && !out.empty() && out.back().kind != TokKind::kNewline) {
          t.kind = TokKind::kNewline;
          out.push_back(std::move(t));
        }
        continue;
      }
      if (IsDigit(c)) {
        LexNumber(t);
      } else if (IsIdentStart(c)) {
        size_t start = pos_;
        while (pos_ < text_.size() && IsIdentChar(text_[pos_])) Advance();
        t.kind = TokKind::kIdent;
        t.text = std::string(text_.substr(start, pos_ - start));
        // `inf:f32` and `nan:f32` are float literals; unsuffixed they are
        // ordinary names.
        if (t.text == "inf" || t.text == "nan") {
          if (std::optional<DType> s = PeekSuffix()) {
            t.kind = TokKind::kFloat;
            t.suffix = s;
          }
        }
      } else if (c == '"') {
        LexString(t);
      } else {
        LexPunct(t);
      }
      if (t.kind == TokKind::kPunct) {
        if (t.text == "(" || t.text == "[") ++depth;
        if ((t.text == ")" || t.text == "]") && depth > 0) --depth;
      }
      bool error = t.kind == TokKind::kError;
      out.push_back(std::move(t));
      if (error) {
        Token eof;
        eof.line = line_;
        eof.col = col_;
        out.push_back(std::move(eof));
        return out;
      }
    }
  }

 private:
  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void SkipSpaceAndComments() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        Advance();
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') Advance();
      } else {
        return;
      }
    }
  }

  // A `:dtype` right after a literal (no space). Consumes it when present.
  // `A[0:64]` has no suffix because `64` is not a dtype name.
  std::optional<DType> PeekSuffix() {
    if (pos_ >= text_.size() || text_[pos_] != ':') return std::nullopt;
    size_t end = pos_ + 1;
    while (end < text_.size() && IsIdentChar(text_[end])) ++end;
    std::optional<DType> dt = ParseDType(text_.substr(pos_ + 1, end - pos_ - 1));
    if (dt) {
      while (pos_ < end) Advance();
    }
    return dt;
  }

  void LexNumber(Token& t) {
    size_t start = pos_;
    bool is_float = false;
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && (text_[pos_ + 1] == 'x' || text_[pos_ + 1] == 'X')) {
      Advance();
      Advance();
      while (pos_ < text_.size() && IsHexDigit(text_[pos_])) Advance();
      if (pos_ < text_.size() && text_[pos_] == '.') {
        is_float = true;
        Advance();
        while (pos_ < text_.size() && IsHexDigit(text_[pos_])) Advance();
      }
      if (pos_ < text_.size() && (text_[pos_] == 'p' || text_[pos_] == 'P')) {
        is_float = true;
        LexExponent();
      }
    } else {
      while (pos_ < text_.size() && IsDigit(text_[pos_])) Advance();
      if (pos_ < text_.size() && text_[pos_] == '.') {
        is_float = true;
        Advance();
        while (pos_ < text_.size() && IsDigit(text_[pos_])) Advance();
      }
      if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
        is_float = true;
        LexExponent();
      }
    }
    t.kind = is_float ? TokKind::kFloat : TokKind::kInt;
    t.text = std::string(text_.substr(start, pos_ - start));
    if (pos_ < text_.size() && IsIdentChar(text_[pos_])) {
      t.kind = TokKind::kError;
      t.text = "malformed number '" + t.text + text_[pos_] + "...'";
      return;
    }
    t.suffix = PeekSuffix();
  }

  void LexExponent() {
    Advance();  // e or p
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) Advance();
    while (pos_ < text_.size() && IsDigit(text_[pos_])) Advance();
  }

  void LexString(Token& t) {
    Advance();  // opening quote
    std::string value;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        t.kind = TokKind::kError;
        t.text = "unterminated string";
        return;
      }
      char c = text_[pos_];
      Advance();
      if (c == '"') break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= text_.size()) continue;  // reported as unterminated above
      char e = text_[pos_];
      Advance();
      if (e == '"' || e == '\\') {
        value += e;
      } else if (e == 'n') {
        value += '\n';
      } else if (e == 'x' && pos_ + 1 < text_.size() && IsHexDigit(text_[pos_]) && IsHexDigit(text_[pos_ + 1])) {
        value += static_cast<char>(std::stoi(std::string(text_.substr(pos_, 2)), nullptr, 16));
        Advance();
        Advance();
      } else {
        t.kind = TokKind::kError;
        t.text = std::string("invalid escape '\\") + e + "' in string";
        return;
      }
    }
    t.kind = TokKind::kString;
    t.text = std::move(value);
  }

  void LexPunct(Token& t) {
    for (std::string_view p : kPuncts) {
      if (text_.substr(pos_, p.size()) == p) {
        for (size_t i = 0; i < p.size(); ++i) Advance();
        t.kind = TokKind::kPunct;
        t.text = std::string(p);
        return;
      }
    }
    t.kind = TokKind::kError;
    char c = text_[pos_];
    if (std::isprint(static_cast<unsigned char>(c))) {
      t.text = std::string("unexpected character '") + c + "'";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      auto u = static_cast<unsigned char>(c);
      t.text = std::string("unexpected byte 0x") + kHex[u >> 4] + kHex[u & 15];
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view text) { return Lexer(text).Run(); }

std::string Describe(const Token& t) {
  switch (t.kind) {
    case TokKind::kIdent: return "identifier '" + t.text + "'";
    case TokKind::kInt:
    case TokKind::kFloat: {
      std::string s = t.text;
      if (t.suffix) s += std::string(":") + DTypeName(*t.suffix);
      return std::string(t.kind == TokKind::kInt ? "integer" : "float") + " '" + s + "'";
    }
    case TokKind::kString: return "string \"" + t.text + "\"";
    case TokKind::kPunct: return "'" + t.text + "'";
    case TokKind::kNewline: return "end of line";
    case TokKind::kEof: return "end of input";
    case TokKind::kError: return t.text;
  }
  return "?";
}

}  // namespace tl::ir::detail
