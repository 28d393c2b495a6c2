// tl-pack: the bundle tool. `tl-pack <verb> [args]`; `tl-pack help` lists verbs.
//
// The verb table below is the registry: to add a verb, write its run function
// in its own file (see verbs.h) and add one line here.
#include <cstdio>
#include <cstring>
#include <iterator>

#include "verbs.h"

namespace {

using tl::pack::Verb;

constexpr Verb kVerbs[] = {
    {"inspect", "show kernels, signatures, variants and payload sizes (--json for machine-readable output)",
     tl::pack::RunInspect},
    {"verify", "check every checksum, index, size and offset of one or more bundles", tl::pack::RunVerify},
    {"merge", "combine bundles into one (-o OUT IN...); conflicting kernels are reported", tl::pack::RunMerge},
    {"extract", "write one variant's payload to a file (--kernel K --variant V -o OUT)", tl::pack::RunExtract},
    {"strip", "drop backends, archs or variants (-o OUT --drop-backend B ...)", tl::pack::RunStrip},
    {"compile", "compile Tile IR files into a bundle (IN.tir... --target cpu -o OUT)", tl::pack::RunCompile},
    {"build", "run the frontend on a manifest's kernels and compile them into a bundle", tl::pack::RunBuild},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: tl-pack <verb> [args]\n\nverbs:\n");
  for (const Verb& v : kVerbs) std::fprintf(out, "  %-10s %s\n", v.name, v.summary);
  std::fprintf(out,
               "\n`tl-pack <verb> --help` shows a verb's options.\n"
               "exit codes: 0 ok, 1 usage, 2 I/O, 3 malformed bundle, 4 data loss (truncation, CRC),\n"
               "            5 incompatible version/feature, 6 payload over the size limit, 7 merge conflict,\n"
               "            8 not found, 70 internal error\n");
}

const Verb* FindVerb(const char* name) {
  for (const Verb& v : kVerbs) {
    if (std::strcmp(v.name, name) == 0) return &v;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return tl::pack::kExitUsage;
  }
  const char* verb = argv[1];
  if (std::strcmp(verb, "help") == 0 || std::strcmp(verb, "--help") == 0 || std::strcmp(verb, "-h") == 0) {
    if (argc >= 3) {
      if (const Verb* v = FindVerb(argv[2])) {
        char help[] = "--help";
        char* help_argv[] = {argv[2], help, nullptr};
        return v->run(2, help_argv);
      }
    }
    PrintUsage(stdout);
    return tl::pack::kExitOk;
  }
  if (std::strcmp(verb, "--version") == 0) {
    std::printf("tl-pack %s\n", TL_PACK_VERSION);
    return tl::pack::kExitOk;
  }
  const Verb* v = FindVerb(verb);
  if (!v) {
    std::fprintf(stderr, "tl-pack: unknown verb '%s'\n\n", verb);
    PrintUsage(stderr);
    return tl::pack::kExitUsage;
  }
  return v->run(argc - 1, argv + 1);
}
