// Writes the Vulkan test bundle (vadd, rowsum; vulkan_test_bundles.h) to the
// path given, for the Python tests.
#include <cstdio>

#include "tilelang/formats/writer.h"
#include "vulkan_test_bundles.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <out.tlb>\n", argv[0]);
    return 2;
  }
  tl::Status st = tl::formats::WriteFile(argv[1], tl::rt::vktest::VulkanTestBundle());
  if (!st.ok()) {
    fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
