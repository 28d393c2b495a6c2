// Robustness: mutated Tile IR text never crashes the parser, the verifier or
// the printer, and whatever the parser accepts survives a print-parse round
// trip unchanged. (A deterministic, bounded cousin of a fuzzer.)
#include <cstdlib>
#include <random>

#include "test_util.h"

namespace tl::ir {
namespace {

// One random edit: delete, duplicate or replace a short span, or insert a
// token that the grammar cares about.
std::string Mutate(const std::string& text, std::mt19937& rng) {
  static const char* const kTokens[] = {"(", ")", "[", "]", "{", "}", ",", ";", ":", "=", "->", "-", "\n",
                                        "0", "1.5", ":f16", ":u8", "-1", "x", "A", "kernel", "if", "for",
                                        "\"", "#", "loc(\"a.py\", 3)", "inf", "1e999", "~", "!", " ", "99999999999"};
  std::string out = text;
  if (out.empty()) return out;
  std::uniform_int_distribution<size_t> pos(0, out.size() - 1);
  std::uniform_int_distribution<size_t> len(1, 8);
  size_t p = pos(rng);
  size_t n = std::min(len(rng), out.size() - p);
  switch (rng() % 4) {
    case 0: out.erase(p, n); break;
    case 1: out.insert(p, out.substr(p, n)); break;
    case 2: out.replace(p, n, kTokens[rng() % std::size(kTokens)]); break;
    default: out.insert(p, kTokens[rng() % std::size(kTokens)]); break;
  }
  return out;
}

TEST(Robustness, MutatedTextNeverCrashesAndAcceptedTextRoundTrips) {
  const char* files[] = {"gemm_pipelined.tir", "flash_attention.tir", "dequant.tir", "split_k.tir", "all_kinds.tir"};
  // TL_ROBUSTNESS_ITERATIONS and TL_ROBUSTNESS_SEED run it longer or
  // differently (e.g. under the sanitizers); ctest uses the defaults.
  const char* iters_env = std::getenv("TL_ROBUSTNESS_ITERATIONS");
  const char* seed_env = std::getenv("TL_ROBUSTNESS_SEED");
  const int iterations = iters_env ? std::atoi(iters_env) : 300;
  std::mt19937 rng(seed_env ? static_cast<unsigned>(std::atoi(seed_env)) : 1234u);
  int accepted = 0;
  int rejected = 0;
  for (const char* file : files) {
    const std::string original = testing::ReadFile(testing::TestdataPath(file));
    for (int i = 0; i < iterations; ++i) {
      std::string text = original;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) text = Mutate(text, rng);
      StatusOr<Module> m = ParseModule(text, "mutant.tir");
      if (!m.ok()) {
        ++rejected;
        // Every parse error is positioned.
        EXPECT_EQ(m.status().message().rfind("mutant.tir:", 0), 0u) << m.status().message();
        continue;
      }
      ++accepted;
      (void)Verify(*m);  // must not crash; may report errors
      std::string printed = Print(*m);
      StatusOr<Module> again = ParseModule(printed, "printed.tir");
      ASSERT_TRUE(again.ok()) << again.status().message() << "\n--- mutant ---\n" << text;
      EXPECT_EQ(*again, *m) << "--- mutant ---\n" << text;
      EXPECT_EQ(Print(*again), printed);
    }
  }
  // The mutations exercise both outcomes.
  EXPECT_GT(accepted, iterations / 6);
  EXPECT_GT(rejected, iterations / 6);
}

}  // namespace
}  // namespace tl::ir
