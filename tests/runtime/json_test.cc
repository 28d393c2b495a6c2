#include "json.h"

#include <gtest/gtest.h>

namespace tl::rt::json {
namespace {

TEST(Json, ParsesEveryType) {
  auto v = Parse(R"({"a": [1, -2, 3.5, 1e3], "b": true, "c": null, "d": "x\"y\u00e9\ud83d\ude00", "e": {}})");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const Value& a = *v->Find("a");
  ASSERT_EQ(a.items().size(), 4u);
  EXPECT_TRUE(a.items()[0].is_integer());
  EXPECT_EQ(a.items()[1].as_int(), -2);
  EXPECT_FALSE(a.items()[2].is_integer());
  EXPECT_DOUBLE_EQ(a.items()[2].as_double(), 3.5);
  EXPECT_DOUBLE_EQ(a.items()[3].as_double(), 1000.0);
  EXPECT_TRUE(v->Find("b")->as_bool());
  EXPECT_TRUE(v->Find("c")->is_null());
  EXPECT_EQ(v->Find("d")->as_string(), "x\"y\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(v->Find("e")->is_object());
  EXPECT_EQ(v->Find("zz"), nullptr);
}

TEST(Json, LargeIntegersStayExact) {
  auto v = Parse("[9007199254740993, 99999999999999999999]");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->items()[0].as_int(), 9007199254740993LL);
  EXPECT_FALSE(v->items()[1].is_integer());  // does not fit int64
}

struct Bad {
  const char* text;
  const char* fragment;
};

TEST(Json, RejectsMalformedDocumentsWithPosition) {
  const Bad cases[] = {
      {"", "unexpected end"},
      {"{", "expected a string key"},
      {"[1,]", "expected a value"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
      {"\"abc", "unterminated string"},
      {"\"a\tb\"", "control character"},
      {"\"\\q\"", "unknown escape"},
      {"\"\\u12zz\"", "bad hex digit"},
      {"\"\\u12\"", "truncated \\u escape"},
      {"\"\\ud800\"", "unpaired high surrogate"},
      {"\"\\udc00\"", "unpaired low surrogate"},
      {"01", "leading zero"},
      {"1.", "bad fraction"},
      {"1e", "bad exponent"},
      {"-", "bad number"},
      {"tru", "expected a value"},
      {"[1] x", "unexpected text after the document"},
  };
  for (const Bad& c : cases) {
    auto v = Parse(c.text);
    ASSERT_FALSE(v.ok()) << c.text;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(v.status().message().find(c.fragment), std::string::npos) << c.text << " -> " << v.status().message();
    EXPECT_NE(v.status().message().find("line 1 column"), std::string::npos) << v.status().message();
  }
}

TEST(Json, ReportsLineAndColumn) {
  auto v = Parse("{\n  \"a\": 1,\n  \"b\": ?\n}");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("line 3 column 8"), std::string::npos) << v.status().message();
}

TEST(Json, RejectsDeepNesting) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto v = Parse(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("deeper than 64"), std::string::npos);
}

TEST(Json, QuoteRoundTrips) {
  std::string s = "a\"b\\c\nd\te\x01";
  auto v = Parse(Quote(s));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->as_string(), s);
}

}  // namespace
}  // namespace tl::rt::json
