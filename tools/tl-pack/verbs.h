// tl-pack's verb registry and the helpers verbs share.
//
// A verb is a name, a one-line summary and a run function. main.cc holds the
// table (kVerbs); each verb lives in its own file. run() receives the verb's
// own argument vector: argv[0] is the verb name, argv[1..] its arguments; it
// returns a process exit code from ExitCode below and prints its own errors.
//
// Thread-safety: tl-pack is single-threaded; nothing here is shared.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tilelang/formats/reader.h"
#include "tilelang/formats/status.h"
#include "tilelang/formats/writer.h"

namespace tl::pack {

struct Verb {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

// Exit codes, one per failure class (README.md "Exit codes"). Stable: scripts
// and CI depend on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,         // bad command line
  kExitIo = 2,            // a file could not be read or written
  kExitMalformed = 3,     // not a bundle, or structurally invalid (offsets, indices, manifest, zstd frame)
  kExitDataLoss = 4,      // truncated, or a CRC mismatch: the bytes changed after they were written
  kExitIncompatible = 5,  // newer major version, unknown flags or must_understand feature
  kExitLimit = 6,         // a payload exceeds the decompression limit
  kExitConflict = 7,      // merge: inputs disagree about a kernel or attribute
  kExitNotFound = 8,      // extract: no such kernel, variant or payload
  kExitInternal = 70,     // a bug in tl-pack
};

// Maps a formats status to the exit code of its failure class.
int ExitCodeFor(const Status& status);

// Prints "tl-pack <verb>: <CODE>: <message>" to stderr and returns the exit code.
int Fail(const char* verb, const Status& status);
int UsageError(const char* verb, const std::string& message);

// Minimal command-line parsing: options that take a value ("-o", "--kernel"),
// boolean flags ("--json"), and positionals. "--opt=value" is accepted too.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::set<std::string> flags;
  bool Has(const std::string& flag) const { return flags.count(flag) != 0; }
  // Last value of an option, or `fallback`.
  std::string Get(const std::string& option, const std::string& fallback = "") const;
  const std::vector<std::string>& All(const std::string& option) const;
};
// Returns false and sets *error on an unknown option or a missing value.
bool ParseArgs(int argc, char** argv, const std::set<std::string>& value_options,
               const std::set<std::string>& flag_options, Args* out, std::string* error);
// Parses a non-negative decimal integer (with optional K/M/G suffix).
bool ParseSize(const std::string& text, uint64_t* out);

// A bundle file held in memory with its view. The view borrows `bytes`, so a
// LoadedBundle is never copied or moved (always handled by unique_ptr).
struct LoadedBundle {
  std::string path;
  std::vector<uint8_t> bytes;
  formats::BundleView view;
};
// Reads `path` and opens it; errors name the path unless `annotate` is false
// (for callers that print the path themselves).
StatusOr<std::unique_ptr<LoadedBundle>> LoadBundle(const std::string& path, const formats::ReadOptions& options = {},
                                                   bool annotate = true);

// Re-homes `kernel` (unpacked from `from`) into `writer`: reads each variant's
// payload from `from` (fully verified), adds it to the writer (which
// deduplicates by content) and rewrites the variant's payload index. `remap`
// caches old index -> new index for this source bundle.
Status RehomePayloads(const LoadedBundle& from, tl::bundle::KernelT& kernel, formats::BundleWriter& writer,
                      std::map<uint32_t, uint32_t>* remap);

// A producer record naming tl-pack and the verb that wrote the bundle.
std::unique_ptr<tl::bundle::ProducerT> PackProducer(const char* verb);

// Formatting helpers shared by inspect and other verbs.
std::string DTypeName(const tl::bundle::DType* dtype);
std::string HexString(const uint8_t* data, size_t n);
std::string JsonEscape(const std::string& s);
const char* BackendName(tl::bundle::Backend backend);
const char* CodeKindName(tl::bundle::CodeKind kind);
// Inverse of BackendName ("cuda" -> CUDA); false when unknown.
bool ParseBackend(const std::string& name, tl::bundle::Backend* out);

// The verbs.
int RunInspect(int argc, char** argv);
int RunVerify(int argc, char** argv);
int RunMerge(int argc, char** argv);
int RunExtract(int argc, char** argv);
int RunStrip(int argc, char** argv);
int RunCompile(int argc, char** argv);  // compile_verb.cc (CPU backend)
int RunBuild(int argc, char** argv);    // build_verb.cc (CPU backend)

}  // namespace tl::pack
