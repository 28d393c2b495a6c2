// tl-pack verify: every checksum, index, size and offset of each bundle.
#include <cinttypes>
#include <cstdio>

#include "verbs.h"

namespace tl::pack {
namespace {

constexpr char kUsage[] =
    "usage: tl-pack verify [--max-payload-bytes N] [--quiet] BUNDLE...\n"
    "  Opens each bundle (signature, version, header CRC, regions, manifest CRC, flatbuffer, kernel\n"
    "  order, every index and payload extent), then decompresses every payload and checks its sizes\n"
    "  and both CRC32Cs. Prints one line per bundle.\n"
    "  --max-payload-bytes N  decompressed size limit per payload (default 1G; K/M/G suffixes)\n"
    "  --quiet                print failures only\n"
    "  Exit code: 0 when all are valid, else the code of the first failure:\n"
    "  2 I/O, 3 malformed, 4 data loss (truncation, CRC), 5 incompatible, 6 payload over the limit.\n";

}  // namespace

int RunVerify(int argc, char** argv) {
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"--max-payload-bytes"}, {"--quiet", "--help", "-h"}, &args, &error)) {
    return UsageError("verify", error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (args.positional.empty()) return UsageError("verify", "expected at least one bundle");
  formats::ReadOptions options;
  if (!args.Get("--max-payload-bytes").empty() &&
      !ParseSize(args.Get("--max-payload-bytes"), &options.max_payload_raw_bytes)) {
    return UsageError("verify", "--max-payload-bytes needs a size such as 1048576 or 64M");
  }
  int exit_code = kExitOk;
  for (const std::string& path : args.positional) {
    StatusOr<std::unique_ptr<LoadedBundle>> bundle = LoadBundle(path, options, /*annotate=*/false);
    Status status = bundle.status();
    if (status.ok()) status = bundle.value()->view.VerifyAllPayloads();
    if (!status.ok()) {
      std::printf("%s: FAILED: %s\n", path.c_str(), status.ToString().c_str());
      if (exit_code == kExitOk) exit_code = ExitCodeFor(status);
      continue;
    }
    if (!args.Has("--quiet")) {
      const auto* m = bundle.value()->view.manifest();
      uint32_t variants = 0;
      for (const auto* k : *m->kernels()) variants += k->variants()->size();
      std::printf("%s: OK (format %u.%u, %u kernels, %u variants, %u payloads, %zu bytes)\n", path.c_str(),
                  bundle.value()->view.header().format_major, bundle.value()->view.header().format_minor,
                  m->kernels()->size(), variants, m->payloads()->size(), bundle.value()->bytes.size());
    }
  }
  return exit_code;
}

}  // namespace tl::pack
