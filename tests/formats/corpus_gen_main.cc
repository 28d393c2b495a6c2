// tl_formats_corpus_gen DIR: writes the negative corpus, the valid samples and
// corpus.txt into DIR (used by the tl-pack CLI tests and to refresh the
// committed fuzz seeds).
#include <cstdio>
#include <exception>

#include "bundle_builder.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 1;
  }
  try {
    tl::Status s = tl::formats::testing::WriteCorpus(argv[1]);
    if (!s.ok()) {
      std::fprintf(stderr, "tl_formats_corpus_gen: %s\n", s.ToString().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tl_formats_corpus_gen: %s\n", e.what());
    return 1;
  }
  return 0;
}
