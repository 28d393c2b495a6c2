// Writes the standard runtime test bundle (test_bundles.h) to argv[1], for
// the C ABI test, the C example and the Python binding tests.
#include <cstdio>

#include "test_bundles.h"
#include "tilelang/formats/writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.tlb\n", argv[0]);
    return 2;
  }
  tl::Status s = tl::formats::WriteFile(argv[1], tl::rt::testing::StandardBundle());
  if (!s.ok()) {
    fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
