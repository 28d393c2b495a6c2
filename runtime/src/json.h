// A small JSON reader for the runtime's own files (selection goldens, device
// descriptions) and a string quoter for the JSON it prints. No dependencies.
//
// Scope: RFC 8259 documents up to a nesting depth of 64; numbers are kept as
// double and as int64 when they are integers that fit; strings support every
// escape including \uXXXX surrogate pairs (emitted as UTF-8). Errors carry the
// line and column.
// Thread-safety: values are plain data; Parse touches no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilelang/formats/status.h"

namespace tl::rt::json {

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }
  // True when the number was written as an integer that fits int64.
  bool is_integer() const { return type_ == Type::kNumber && is_integer_; }

  bool as_bool() const { return bool_; }
  double as_double() const { return number_; }
  int64_t as_int() const { return integer_; }
  const std::string& as_string() const { return string_; }
  const std::vector<Value>& items() const { return items_; }
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }

  // Object member lookup; nullptr when absent or not an object.
  const Value* Find(std::string_view key) const;

  static Value Null() { return Value(); }
  static Value Bool(bool b);
  static Value Number(double d, bool is_integer, int64_t integer);
  static Value String(std::string s);
  static Value Array(std::vector<Value> items);
  static Value Object(std::vector<std::pair<std::string, Value>> members);

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

// Parses a whole document; trailing non-space text is an error. Duplicate
// object keys are an error (a golden with two "arch" keys is a typo).
StatusOr<Value> Parse(std::string_view text);

// "text" with JSON escapes.
std::string Quote(std::string_view text);

}  // namespace tl::rt::json
