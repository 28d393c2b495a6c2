// tl-pack build: a declarative manifest of kernel instances -> Python frontend
// (one process per instance and per family with its own kwargs, in parallel)
// -> Tile IR -> CPU variants (parallel, cached) + GPU family variants -> bundle.
//
// Where Python finds things (PYTHONPATH, in this order):
//   1. --python DIR, else $TL_PYTHONPATH (explicit override);
//   2. the frontend package next to this binary: <dir of tl-pack>/../python
//      (the build tree's build/python), else <dir of tl-pack>/../../compiler/python
//      (a build directory inside the source tree);
//   3. the project root of the manifest: the nearest ancestor of the
//      manifest's directory that holds the first package of a kernel's module
//      (e.g. the repo root for "kernels.gemm"), and the manifest's directory;
//   4. the caller's $PYTHONPATH.
// The interpreter is /usr/bin/python3 unless $TL_PYTHON names another. Python
// runs in the project root, so its error locations read "kernels/gemm.py:12".
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tilelang/codegen/hip/hip_bundle.h"
#include "tilelang/codegen/cuda/cuda_bundle.h"
#include "tilelang/codegen/spirv/spirv_bundle.h"
#include "tilelang/codegen/spirv/spirv_tools.h"
#include "tilelang/driver/cpu_bundle.h"
#include "tilelang/formats/checksum.h"
#include "tilelang/ir/tile_ir.h"
#include "tilelang/toolchain/host_compiler.h"
#include "verbs.h"

namespace tl::pack {

// Defined in compile_verb.cc.
int CpuBuildExitCode(const Status& s);
int CompileFunctionsToBundle(const char* verb, const std::vector<ir::Function>& functions,
                             driver::CpuBuildOptions options, const std::string& out, bool quiet);

namespace {
namespace fs = std::filesystem;

const char* kHelp =
    "usage: tl-pack build MANIFEST.json [-o OUT.tlb] [--target LIST] [--cache-dir DIR]\n"
    "                     [--emit-source DIR] [--python DIR] [-j N] [-q] [--keep-going]\n"
    "\n"
    "MANIFEST.json (kernels/README.md documents every field):\n"
    "  {\"bundle\": \"out.tlb\", \"targets\": [\"cpu\", \"cuda\", \"vulkan\", \"hip\"],\n"
    "   \"kernels\": [{\"name\": \"gemm_f32_nn\", \"module\": \"kernels.gemm\", \"factory\": \"matmul\",\n"
    "                \"kwargs\": {\"M\": \"M\", ...}, \"dynamic\": [\"M\"],\n"
    "                \"targets\": [\"cpu\", \"cuda\"],                  (optional: families it ships for)\n"
    "                \"target_kwargs\": {\"cuda\": {\"block_M\": 128}}}]}  (optional: per-family kwargs)\n"
    "For each kernel (and each family with its own target_kwargs), runs `python3 -m tilelang.emit_ir\n"
    "--module M --factory F --kwargs JSON --name NAME` in parallel, checks the emitted function, then\n"
    "packs every target this machine's toolchains allow into one bundle (-o, else the manifest's\n"
    "\"bundle\" next to the manifest) and prints, per target, the kernels packed and those skipped\n"
    "with the reason (a target whose toolchain is missing is skipped as a whole).\n"
    "  --target     overrides the manifest's targets: cpu (= x86-64-v2,v3,v4), host (this CPU's\n"
    "               level), x86-64-vN; cuda (= sm_80,sm_89,sm_90a + PTX) or sm_XX; vulkan/spirv;\n"
    "               hip or gfxNNN. CPU variants are always packed (at least one CPU level).\n"
    "  --cache-dir  content-addressed caches (default $TL_CACHE_DIR): compiled objects, and whole\n"
    "               bundles keyed by the emitted Tile IR, targets, toolchains and tl-pack itself, so\n"
    "               a rebuild with nothing changed does no compile work.\n"
    "  --keep-going a GPU family that fails on a kernel (other than an unimplemented feature, which\n"
    "               is always a skip) is reported as FAILED and the kernel ships without it; without\n"
    "               this flag the build stops there.\n"
    "PYTHONPATH: --python DIR or $TL_PYTHONPATH, <tl-pack dir>/../python, the manifest's project\n"
    "root (the ancestor holding the kernel modules), $PYTHONPATH.\n";

// ---- a small JSON reader (objects, arrays, strings, numbers, literals) ------------

struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject } type = Type::kNull;
  bool boolean = false;
  std::string text;  // kString: decoded value
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
  std::string raw;  // the value's source text (re-emitted as --kwargs)
  const Json* Find(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  bool Parse(Json* out, std::string* error) {
    if (!Value(out, 0) || (Skip(), pos_ != s_.size())) {
      *error = error_.empty() ? "trailing characters" : error_;
      *error += " at offset " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool Fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  bool String(std::string* out) {
    if (s_[pos_] != '"') return Fail("expected a string");
    ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) return Fail("unterminated escape");
        const char e = s_[pos_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': {
            if (pos_ + 4 > s_.size()) return Fail("bad \\u escape");
            const unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(pos_, 4), nullptr, 16));
            pos_ += 4;
            if (cp < 0x80) {
              c = static_cast<char>(cp);
            } else if (cp < 0x800) {
              *out += static_cast<char>(0xc0 | (cp >> 6));
              c = static_cast<char>(0x80 | (cp & 0x3f));
            } else {
              *out += static_cast<char>(0xe0 | (cp >> 12));
              *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
              c = static_cast<char>(0x80 | (cp & 0x3f));
            }
            break;
          }
          default: c = e;  // \" \\ \/
        }
      }
      *out += c;
    }
    if (pos_ >= s_.size()) return Fail("unterminated string");
    ++pos_;
    return true;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return Fail("nesting too deep");
    Skip();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    const size_t begin = pos_;
    const char c = s_[pos_];
    if (c == '{') {
      out->type = Json::Type::kObject;
      ++pos_;
      Skip();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
      } else {
        for (;;) {
          Skip();
          std::string key;
          if (pos_ >= s_.size() || !String(&key)) return Fail("expected a key");
          Skip();
          if (pos_ >= s_.size() || s_[pos_++] != ':') return Fail("expected ':'");
          Json v;
          if (!Value(&v, depth + 1)) return false;
          out->members.emplace_back(key, std::move(v));
          Skip();
          if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (pos_ < s_.size() && s_[pos_] == '}') {
            ++pos_;
            break;
          }
          return Fail("expected ',' or '}'");
        }
      }
    } else if (c == '[') {
      out->type = Json::Type::kArray;
      ++pos_;
      Skip();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
      } else {
        for (;;) {
          Json v;
          if (!Value(&v, depth + 1)) return false;
          out->items.push_back(std::move(v));
          Skip();
          if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            continue;
          }
          if (pos_ < s_.size() && s_[pos_] == ']') {
            ++pos_;
            break;
          }
          return Fail("expected ',' or ']'");
        }
      }
    } else if (c == '"') {
      out->type = Json::Type::kString;
      if (!String(&out->text)) return false;
    } else if (s_.compare(pos_, 4, "true") == 0 || s_.compare(pos_, 5, "false") == 0) {
      out->type = Json::Type::kBool;
      out->boolean = s_[pos_] == 't';
      pos_ += out->boolean ? 4 : 5;
    } else if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      out->type = Json::Type::kNumber;
      while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos) ++pos_;
    } else {
      return Fail("unexpected character");
    }
    out->raw = s_.substr(begin, pos_ - begin);
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

// ---- the manifest ------------------------------------------------------------------

struct Instance {
  std::string module, factory, kwargs = "{}", name;
  const Json* kwargs_json = nullptr;
  std::vector<std::string> dynamic;
  std::vector<std::string> families;               // "targets": families this instance ships for (empty: all)
  std::map<std::string, std::string> family_kwargs;  // "target_kwargs": merged kwargs JSON per family
};

// kwargs with `over`'s members replacing or extending `base`'s (both JSON objects).
std::string MergeKwargs(const Json* base, const Json& over) {
  std::string out = "{";
  auto add = [&](const std::string& k, const std::string& raw) {
    out += (out.size() > 1 ? ", " : "") + ("\"" + k + "\": ") + raw;
  };
  if (base != nullptr) {
    for (const auto& [k, v] : base->members) {
      const Json* o = over.Find(k);
      add(k, o != nullptr ? o->raw : v.raw);
    }
  }
  for (const auto& [k, v] : over.members) {
    if (base == nullptr || base->Find(k) == nullptr) add(k, v.raw);
  }
  return out + "}";
}

Status ParseManifest(const Json& root, std::vector<Instance>* out) {
  if (root.type != Json::Type::kObject) return Status(StatusCode::kInvalidArgument, "the manifest is not an object");
  const Json* kernels = root.Find("kernels");
  if (kernels == nullptr || kernels->type != Json::Type::kArray || kernels->items.empty()) {
    return Status(StatusCode::kInvalidArgument, "the manifest needs a non-empty \"kernels\" array");
  }
  for (size_t i = 0; i < kernels->items.size(); ++i) {
    const Json& k = kernels->items[i];
    const std::string at = "kernels[" + std::to_string(i) + "]";
    if (k.type != Json::Type::kObject) return Status(StatusCode::kInvalidArgument, at + " is not an object");
    Instance inst;
    auto str = [&](const char* key, std::string* dst, bool required) -> Status {
      const Json* v = k.Find(key);
      if (v == nullptr) {
        return required ? Status(StatusCode::kInvalidArgument, at + " lacks \"" + key + "\"") : Status::Ok();
      }
      if (v->type != Json::Type::kString) {
        return Status(StatusCode::kInvalidArgument, at + ".\"" + key + "\" is not a string");
      }
      *dst = v->text;
      return Status::Ok();
    };
    auto strings = [&](const char* key, std::vector<std::string>* dst) -> Status {
      const Json* d = k.Find(key);
      if (d == nullptr) return Status::Ok();
      if (d->type != Json::Type::kArray) return Status(StatusCode::kInvalidArgument, at + "." + key + " is not an array");
      for (const Json& s : d->items) {
        if (s.type != Json::Type::kString) {
          return Status(StatusCode::kInvalidArgument, at + "." + key + " holds a non-string");
        }
        dst->push_back(s.text);
      }
      return Status::Ok();
    };
    TL_RETURN_IF_ERROR(str("module", &inst.module, true));
    TL_RETURN_IF_ERROR(str("factory", &inst.factory, true));
    TL_RETURN_IF_ERROR(str("name", &inst.name, false));
    if (inst.name.empty()) inst.name = inst.factory;
    if (const Json* kw = k.Find("kwargs")) {
      if (kw->type != Json::Type::kObject) return Status(StatusCode::kInvalidArgument, at + ".kwargs is not an object");
      inst.kwargs = kw->raw;
      inst.kwargs_json = kw;
    }
    TL_RETURN_IF_ERROR(strings("dynamic", &inst.dynamic));
    TL_RETURN_IF_ERROR(strings("targets", &inst.families));
    if (const Json* tk = k.Find("target_kwargs")) {
      if (tk->type != Json::Type::kObject) {
        return Status(StatusCode::kInvalidArgument, at + ".target_kwargs is not an object");
      }
      for (const auto& [family, over] : tk->members) {
        if (over.type != Json::Type::kObject) {
          return Status(StatusCode::kInvalidArgument, at + ".target_kwargs." + family + " is not an object");
        }
        inst.family_kwargs[family] = MergeKwargs(inst.kwargs_json, over);
      }
    }
    for (const Instance& other : *out) {
      if (other.name == inst.name) {
        return Status(StatusCode::kAlreadyExists, at + ": kernel name '" + inst.name + "' appears twice");
      }
    }
    out->push_back(std::move(inst));
  }
  return Status::Ok();
}

fs::path SelfDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

// The PYTHONPATH entries and the project root (Python's working directory).
std::vector<std::string> PythonPath(const std::string& override_dir, const fs::path& manifest_dir,
                                    const std::vector<Instance>& instances, fs::path* project_root) {
  std::vector<std::string> path;
  auto add = [&](const fs::path& p) {
    const std::string s = fs::weakly_canonical(p).string();
    if (std::find(path.begin(), path.end(), s) == path.end()) path.push_back(s);
  };
  const char* env = std::getenv("TL_PYTHONPATH");
  if (!override_dir.empty()) add(override_dir);
  else if (env != nullptr && *env != '\0') add(env);
  const fs::path self = SelfDir();
  for (const fs::path& candidate : {self / ".." / "python", self / ".." / ".." / "compiler" / "python"}) {
    if (fs::exists(candidate / "tilelang" / "__init__.py")) {
      add(candidate);
      break;
    }
  }
  *project_root = manifest_dir;
  if (!instances.empty()) {
    const std::string package = instances[0].module.substr(0, instances[0].module.find('.'));
    for (fs::path dir = manifest_dir; !dir.empty(); dir = dir.parent_path()) {
      if (fs::exists(dir / package) || fs::exists(dir / (package + ".py"))) {
        *project_root = dir;
        break;
      }
      if (dir == dir.parent_path()) break;
    }
  }
  add(*project_root);
  add(manifest_dir);
  if (const char* pp = std::getenv("PYTHONPATH"); pp != nullptr && *pp != '\0') path.push_back(pp);
  return path;
}

// ---- targets -----------------------------------------------------------------------

using VariantMaker = std::function<Status(const ir::Function&, tl::bundle::KernelT&, formats::BundleWriter&)>;

// A GPU target family of `tl-pack build`. A family takes its items out of the
// --target list; `skipped` says why this machine cannot build it (then it
// makes no variants). `make` adds one kernel's variants; a kUnimplemented
// status from it skips that kernel for the family (reported), any other error
// fails the build. To add a backend: one more entry in GpuFamilies.
struct Family {
  std::string name;     // "cuda", "hip", "vulkan"; the key of "targets" / "target_kwargs" in a kernel entry
  std::string items;    // the --target items it took, for the report
  std::string skipped;  // non-empty: not built here, and why
  std::string identity; // toolchain identity, for the bundle cache key
  VariantMaker make;
};

// Splits `spec` into GPU families and the CPU rest.
std::vector<Family> GpuFamilies(const std::string& spec, std::string* rest, const std::string& emit_source_dir,
                                bool quiet, const std::string& cache_dir) {
  std::vector<Family> out;
  std::string cpu_and_cuda;
  std::string spirv_items, hip_items;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item == "vulkan" || item == "spirv" || item.rfind("spirv1.", 0) == 0) {
      spirv_items += (spirv_items.empty() ? "" : ",") + item;
    } else if (item == "hip" || item == "hip-cov4" || item.rfind("gfx", 0) == 0) {
      hip_items += (hip_items.empty() ? "" : ",") + item;
    } else if (!item.empty()) {
      cpu_and_cuda += (cpu_and_cuda.empty() ? "" : ",") + item;
    }
  }
  codegen::cuda::SplitTargets split = codegen::cuda::SplitCudaTargets(cpu_and_cuda);
  *rest = split.any ? split.rest : cpu_and_cuda;
  if (split.any) {
    Family f{"cuda", "", "", "", nullptr};
    for (const std::string& a : split.cuda.archs) f.items += (f.items.empty() ? "" : ",") + a;
    if (split.cuda.ptx) f.items += (f.items.empty() ? "" : ",") + std::string("compute_80 PTX");
    StatusOr<codegen::cuda::CudaToolchain> tc = codegen::cuda::CudaToolchain::Create();
    if (!tc.ok()) {
      f.skipped = tc.status().message();
    } else {
      f.identity = tc->identity();
      split.cuda.emit_source_dir = emit_source_dir;
      if (!quiet) {
        split.cuda.log = [](const std::string& line) { std::fprintf(stderr, "tl-pack build: %s\n", line.c_str()); };
      }
      f.make = [tc = *tc, cuda = split.cuda](const ir::Function& fn, tl::bundle::KernelT& kernel,
                                             formats::BundleWriter& writer) -> Status {
        auto vs = codegen::cuda::MakeCudaVariants(fn, tc, cuda, writer);
        if (!vs.ok()) return vs.status();
        for (auto& v : *vs) kernel.variants.push_back(std::move(v));
        return Status::Ok();
      };
    }
    out.push_back(std::move(f));
  }
  if (!spirv_items.empty()) {
    Family f{"vulkan", spirv_items, "", "spirv " + codegen::spirv::SpirvToolsVersion(), nullptr};
    codegen::spirv::SpirvBuildOptions so;
    so.emit_source_dir = emit_source_dir;
    if (!quiet) so.log = [](const std::string& line) { std::fprintf(stderr, "tl-pack build: %s\n", line.c_str()); };
    f.make = [so](const ir::Function& fn, tl::bundle::KernelT& kernel, formats::BundleWriter& writer) -> Status {
      auto vs = codegen::spirv::MakeSpirvVariants(fn, so, writer);
      if (!vs.ok() && vs.status().code() == StatusCode::kResourceExhausted) {  // over the Vulkan budget: skipped
        return Status(StatusCode::kUnimplemented, "does not fit Vulkan's workgroup memory: " + vs.status().message());
      }
      if (!vs.ok()) return vs.status();
      for (auto& v : *vs) kernel.variants.push_back(std::move(v));
      return Status::Ok();
    };
    out.push_back(std::move(f));
  }
  if (!hip_items.empty()) {
    Family f{"hip", hip_items, "", "", nullptr};
    StatusOr<codegen::hip::SplitHipTargetsResult> split_hip = codegen::hip::SplitHipTargets(hip_items);
    StatusOr<codegen::hip::HipToolchain> tc = split_hip.ok()
                                                  ? codegen::hip::HipToolchain::Create({"", cache_dir})
                                                  : StatusOr<codegen::hip::HipToolchain>(split_hip.status());
    if (!tc.ok()) {
      f.skipped = tc.status().message();
    } else {
      f.identity = tc->identity();
      codegen::hip::HipBuildOptions ho = split_hip->hip;
      ho.emit_source_dir = emit_source_dir;
      if (!quiet) ho.log = [](const std::string& line) { std::fprintf(stderr, "tl-pack build: %s\n", line.c_str()); };
      f.make = [tc = *tc, ho](const ir::Function& fn, tl::bundle::KernelT& kernel,
                              formats::BundleWriter& writer) -> Status {
        auto vs = codegen::hip::MakeHipVariants(fn, tc, ho, writer);
        if (!vs.ok()) return vs.status();
        for (auto& v : *vs) kernel.variants.push_back(std::move(v));
        return Status::Ok();
      };
    }
    out.push_back(std::move(f));
  }
  return out;
}

// "host": this CPU's x86-64 level (the others are ParseCpuTargets').
std::string ExpandHost(const std::string& spec) {
  std::string out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item == "host") {
#if defined(__x86_64__)
      __builtin_cpu_init();
      item = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
                 ? "x86-64-v4"
             : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "x86-64-v3"
                                                                                : "x86-64-v2";
#else
      item = "x86-64-v2";
#endif
    }
    out += (out.empty() ? "" : ",") + item;
  }
  return out;
}

std::string Hex(const formats::Sha256Digest& d) {
  static const char* k = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += k[b >> 4];
    s += k[b & 15];
  }
  return s;
}

}  // namespace

int RunBuild(int argc, char** argv) {
  const char* verb = "build";
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--target", "--emit-source", "--cache-dir", "-j", "--python"},
                 {"--help", "-h", "-q", "--keep-going"}, &args, &error)) {
    return UsageError(verb, error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1) return UsageError(verb, "expected exactly one MANIFEST.json");
  const bool keep_going = args.Has("--keep-going");
  const std::string manifest_path = args.positional[0];
  StatusOr<std::vector<uint8_t>> bytes = formats::ReadFile(manifest_path);
  if (!bytes.ok()) return Fail(verb, bytes.status());
  const std::string text(bytes->begin(), bytes->end());
  Json root;
  if (!JsonParser(text).Parse(&root, &error)) {
    std::fprintf(stderr, "tl-pack build: %s: invalid JSON: %s\n", manifest_path.c_str(), error.c_str());
    return kExitMalformed;
  }
  std::vector<Instance> instances;
  if (const Status s = ParseManifest(root, &instances); !s.ok()) {
    std::fprintf(stderr, "tl-pack build: %s: %s\n", manifest_path.c_str(), s.message().c_str());
    return CpuBuildExitCode(s);
  }
  const fs::path manifest_dir = fs::absolute(manifest_path).parent_path();
  const bool quiet = args.Has("-q");

  // Targets: --target, else the manifest's, else cpu. GPU families split off first.
  std::string target_spec = args.Get("--target");
  if (target_spec.empty()) {
    if (const Json* t = root.Find("targets"); t != nullptr && t->type == Json::Type::kArray) {
      for (const Json& x : t->items) target_spec += (target_spec.empty() ? "" : ",") + x.text;
    }
  }
  std::string cpu_spec;
  std::vector<Family> families =
      GpuFamilies(ExpandHost(target_spec.empty() ? "cpu" : target_spec), &cpu_spec, args.Get("--emit-source"), quiet,
                  !args.Get("--cache-dir").empty() ? args.Get("--cache-dir")
                                                   : (std::getenv("TL_CACHE_DIR") ? std::getenv("TL_CACHE_DIR") : ""));
  if (cpu_spec.empty()) {
    return UsageError(verb, "the targets name no CPU level; tl-pack build always packs CPU variants (the kernel "
                            "signatures come from the CPU lowering): add cpu, host or x86-64-vN");
  }
  StatusOr<std::vector<toolchain::IsaLevel>> targets = toolchain::ParseCpuTargets(cpu_spec);
  if (!targets.ok()) return UsageError(verb, targets.status().message());
  std::string cpu_items;
  for (toolchain::IsaLevel l : *targets) cpu_items += (cpu_items.empty() ? "" : ",") + std::string(toolchain::IsaName(l));
  if (!quiet) std::fprintf(stderr, "tl-pack build: target cpu (%s): packing\n", cpu_items.c_str());
  for (const Family& f : families) {
    if (f.skipped.empty()) {
      if (quiet) continue;
      std::fprintf(stderr, "tl-pack build: target %s (%s): packing\n", f.name.c_str(), f.items.c_str());
    } else {
      std::fprintf(stderr, "tl-pack build: target %s (%s): SKIPPED: %s\n", f.name.c_str(), f.items.c_str(),
                   f.skipped.c_str());
    }
  }
  std::string out = args.Get("-o");
  if (out.empty()) {
    const Json* b = root.Find("bundle");
    if (b == nullptr || b->type != Json::Type::kString) return UsageError(verb, "-o OUT.tlb is required");
    out = (manifest_dir / b->text).string();
  }
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (!args.Get("-j").empty()) {
    uint64_t j = 0;
    if (!ParseSize(args.Get("-j"), &j) || j == 0 || j > 1024) return UsageError(verb, "bad -j value");
    jobs = static_cast<int>(j);
  }
  // Which families each instance ships for.
  auto wants = [](const Instance& inst, const std::string& family) {
    return inst.families.empty() || std::find(inst.families.begin(), inst.families.end(), family) != inst.families.end();
  };

  fs::path project_root;
  const std::vector<std::string> pypath = PythonPath(args.Get("--python"), manifest_dir, instances, &project_root);
  std::string pythonpath;
  for (const std::string& p : pypath) pythonpath += (pythonpath.empty() ? "" : ":") + p;
  const char* py_env = std::getenv("TL_PYTHON");
  const std::string python = py_env != nullptr && *py_env != '\0' ? py_env : "/usr/bin/python3";

  // Frontend jobs: every instance once (the CPU kwargs), plus once per active GPU family
  // with its own "target_kwargs" (another tile config for that backend).
  struct FrontendJob {
    size_t instance;
    std::string family;  // "" = the base kwargs
    std::string kwargs;
  };
  std::vector<FrontendJob> fjobs;
  for (size_t i = 0; i < instances.size(); ++i) {
    fjobs.push_back({i, "", instances[i].kwargs});
    for (const Family& f : families) {
      auto it = instances[i].family_kwargs.find(f.name);
      if (f.skipped.empty() && it != instances[i].family_kwargs.end() && wants(instances[i], f.name)) {
        fjobs.push_back({i, f.name, it->second});
      }
    }
  }
  std::vector<toolchain::ProcessResult> emitted(fjobs.size());
  std::atomic<size_t> next{0};
  std::mutex log_mu;
  auto worker = [&] {
    for (size_t j; (j = next.fetch_add(1)) < fjobs.size();) {
      const Instance& inst = instances[fjobs[j].instance];
      emitted[j] = toolchain::RunProcess({python, "-m", "tilelang.emit_ir", "--module", inst.module, "--factory",
                                          inst.factory, "--kwargs", fjobs[j].kwargs, "--name", inst.name},
                                         project_root.string(), {"PYTHONPATH=" + pythonpath, "PYTHONDONTWRITEBYTECODE=1"});
      if (!quiet) {
        std::lock_guard<std::mutex> lock(log_mu);
        std::fprintf(stderr, "tl-pack build: frontend %s%s (%s.%s): %s\n", inst.name.c_str(),
                     fjobs[j].family.empty() ? "" : (" [" + fjobs[j].family + "]").c_str(), inst.module.c_str(),
                     inst.factory.c_str(), emitted[j].exit_code == 0 ? "ok" : "FAILED");
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(jobs, static_cast<int>(fjobs.size())); ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();

  for (const Instance& inst : instances) {
    for (const std::string& fam : inst.families) {
      if (fam != "cpu" && fam != "cuda" && fam != "hip" && fam != "vulkan") {
        std::fprintf(stderr, "tl-pack build: kernel '%s': unknown target family '%s' in \"targets\" (known: cpu, "
                     "cuda, hip, vulkan)\n", inst.name.c_str(), fam.c_str());
        return kExitMalformed;
      }
    }
  }
  std::vector<ir::Function> functions;
  std::map<std::string, std::map<std::string, ir::Function>> family_functions;  // kernel -> family -> function
  formats::Sha256 key;
  auto feed = [&](const std::string& s) {
    key.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
    key.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>("\0"), 1));
  };
  feed("tl-pack build bundle v1");
  for (size_t j = 0; j < fjobs.size(); ++j) {
    const Instance& inst = instances[fjobs[j].instance];
    const std::string what = "kernel '" + inst.name + "' (" + inst.module + "." + inst.factory + ")" +
                             (fjobs[j].family.empty() ? "" : " [" + fjobs[j].family + " kwargs]");
    if (emitted[j].exit_code != 0) {
      std::string err = emitted[j].err;
      while (!err.empty() && err.back() == '\n') err.pop_back();
      std::fprintf(stderr, "tl-pack build: %s: the frontend failed (exit %d, PYTHONPATH=%s):\n%s\n", what.c_str(),
                   emitted[j].exit_code, pythonpath.c_str(), err.c_str());
      return kExitMalformed;
    }
    feed(fjobs[j].family);
    feed(emitted[j].out);
    StatusOr<ir::Module> m = ir::ParseModule(emitted[j].out, inst.name + ".tir");
    if (!m.ok()) {
      std::fprintf(stderr, "tl-pack build: %s: %s\n", what.c_str(), m.status().ToString().c_str());
      return kExitMalformed;
    }
    if (const Status v = ir::Verify(*m); !v.ok()) {
      std::fprintf(stderr, "tl-pack build: %s: %s\n", what.c_str(), v.ToString().c_str());
      return kExitMalformed;
    }
    if (m->functions.size() != 1 || m->functions[0].name != inst.name) {
      std::fprintf(stderr, "tl-pack build: %s: the frontend did not emit exactly one function named %s\n",
                   what.c_str(), inst.name.c_str());
      return kExitMalformed;
    }
    for (const std::string& d : inst.dynamic) {
      const auto& syms = m->functions[0].symbols;
      if (std::none_of(syms.begin(), syms.end(), [&](const ir::Symbol& s) { return s.name == d; })) {
        std::fprintf(stderr, "tl-pack build: %s: the manifest lists '%s' as dynamic, but the emitted function "
                     "has no such dynamic symbol\n", what.c_str(), d.c_str());
        return kExitMalformed;
      }
    }
    if (fjobs[j].family.empty()) {
      functions.push_back(std::move(m->functions[0]));
    } else {
      family_functions[inst.name].emplace(fjobs[j].family, std::move(m->functions[0]));
    }
  }
  // Instances per name, for the hook.
  std::map<std::string, const Instance*> by_name;
  for (const Instance& inst : instances) by_name[inst.name] = &inst;

  driver::CpuBuildOptions options;
  options.targets = *targets;
  options.jobs = jobs;
  options.emit_source_dir = args.Get("--emit-source");
  options.compiler.cache_dir = args.Get("--cache-dir");
  if (options.compiler.cache_dir.empty()) {
    if (const char* c = std::getenv("TL_CACHE_DIR"); c != nullptr) options.compiler.cache_dir = c;
  }

  // The bundle cache: the same emitted Tile IR, targets, toolchains and tl-pack give the same
  // (deterministic) bundle, so a rebuild with nothing changed compiles nothing at all.
  feed(cpu_items);
  for (const Instance& inst : instances) {
    feed(inst.name);
    for (const std::string& f : inst.families) feed(f);
  }
  for (const Family& f : families) {
    feed(f.name + ":" + f.items + ":" + f.skipped + ":" + f.identity);
  }
  if (StatusOr<toolchain::HostCompiler> cc = toolchain::HostCompiler::Create(options.compiler); cc.ok()) {
    feed(cc->identity());
  }
  if (StatusOr<std::vector<uint8_t>> self = formats::ReadFile((SelfDir() / "tl-pack").string()); self.ok()) {
    feed(Hex(formats::Sha256::Hash(*self)));
  }
  const std::string bundle_key = Hex(key.Finish());
  fs::path cached;
  if (!options.compiler.cache_dir.empty()) {
    cached = fs::path(options.compiler.cache_dir) / "bundles" / ("build-" + bundle_key + ".tlb");
    if (StatusOr<std::vector<uint8_t>> hit = formats::ReadFile(cached.string()); hit.ok()) {
      if (const Status w = formats::WriteFile(out, *hit); !w.ok()) return Fail(verb, w);
      std::fprintf(stderr, "tl-pack build: nothing changed: wrote %s from the cache (%zu kernels, no compile work)\n",
                   out.c_str(), functions.size());
      return kExitOk;
    }
  }

  // GPU variants, added to each kernel as it is packed.
  std::mutex skip_mu;
  std::map<std::string, std::vector<std::string>> skipped;  // family -> "kernel: reason"
  std::map<std::string, size_t> packed;                     // family -> kernels with variants
  packed["cpu"] = functions.size();
  // Each kernel records its factory and kwargs (attrs "factory", "kwargs": the catalogue's
  // source), then gets the variants of every active GPU family.
  options.extra_variants = [&](const ir::Function& f, tl::bundle::KernelT& kernel,
                               formats::BundleWriter& writer) -> Status {
      const Instance& inst = *by_name.at(f.name);
      auto attr = [&](const char* k, const std::string& v) {
        auto kv = std::make_unique<tl::bundle::KeyValueT>();
        kv->key = k;
        kv->value = v;
        kernel.attrs.push_back(std::move(kv));
      };
      attr("factory", inst.module + "." + inst.factory);
      attr("kwargs", inst.kwargs);
      for (const Family& fam : families) {
        if (!fam.skipped.empty()) continue;
        if (!wants(inst, fam.name)) {
          std::lock_guard<std::mutex> lock(skip_mu);
          skipped[fam.name].push_back(f.name + ": not listed for " + fam.name + " in the manifest");
          continue;
        }
        const ir::Function* g = &f;
        if (auto it = family_functions.find(f.name); it != family_functions.end()) {
          if (auto jt = it->second.find(fam.name); jt != it->second.end()) g = &jt->second;
        }
        if (g->params.size() != f.params.size()) {
          return Status(StatusCode::kInvalidArgument,
                        "kernel '" + f.name + "': the " + fam.name + " target_kwargs change the signature (" +
                            std::to_string(g->params.size()) + " parameters, the base kwargs give " +
                            std::to_string(f.params.size()) + ")");
        }
        const size_t before = kernel.variants.size();
        Status s = fam.make(*g, kernel, writer);
        if (s.code() == StatusCode::kUnimplemented) {
          kernel.variants.resize(before);
          std::string reason = s.message();
          if (const size_t nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
          std::lock_guard<std::mutex> lock(skip_mu);
          skipped[fam.name].push_back(f.name + ": " + reason);
          continue;
        }
        if (!s.ok() && keep_going) {  // reported as FAILED; the kernel ships without this family
          kernel.variants.resize(before);
          std::string reason = s.message();
          if (const size_t nl = reason.find('\n'); nl != std::string::npos) reason.resize(nl);
          std::lock_guard<std::mutex> lock(skip_mu);
          skipped[fam.name].push_back(f.name + ": FAILED (" + StatusCodeName(s.code()) + "): " + reason);
          continue;
        }
        if (!s.ok()) return Status(s.code(), "kernel '" + f.name + "' target " + fam.name + ": " + s.message());
        std::lock_guard<std::mutex> lock(skip_mu);
        ++packed[fam.name];
      }
      return Status::Ok();
  };
  const int rc = CompileFunctionsToBundle(verb, functions, std::move(options), out, quiet);
  if (rc != kExitOk) return rc;
  // The report: per target, kernels packed and kernels skipped with the reason.
  std::fprintf(stderr, "tl-pack build: cpu (%s): %zu of %zu kernels\n", cpu_items.c_str(), packed["cpu"],
               functions.size());
  for (const Family& f : families) {
    if (!f.skipped.empty()) {
      std::fprintf(stderr, "tl-pack build: %s (%s): skipped: %s\n", f.name.c_str(), f.items.c_str(), f.skipped.c_str());
      continue;
    }
    std::fprintf(stderr, "tl-pack build: %s (%s): %zu of %zu kernels; %zu skipped\n", f.name.c_str(), f.items.c_str(),
                 packed[f.name], functions.size(), skipped[f.name].size());
    for (const std::string& line : skipped[f.name]) {
      std::fprintf(stderr, "tl-pack build:   skipped %s for %s\n", f.name.c_str(), line.c_str());
    }
  }
  if (!cached.empty()) {
    std::error_code ec;
    fs::create_directories(cached.parent_path(), ec);
    const fs::path tmp = cached.string() + ".tmp" + std::to_string(::getpid());
    fs::copy_file(out, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, cached, ec);
    if (ec) fs::remove(tmp, ec);  // the cache is an optimization only
  }
  return kExitOk;
}

}  // namespace tl::pack
