// tl-pack build: a declarative manifest of kernel instances -> Python frontend
// (one process per instance, in parallel) -> Tile IR -> CPU variants -> bundle.
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
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tilelang/driver/cpu_bundle.h"
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
    "usage: tl-pack build MANIFEST.json [-o OUT.tlb] [--target cpu|x86-64-v2,...] [--cache-dir DIR]\n"
    "                     [--emit-source DIR] [--python DIR] [-j N] [-q]\n"
    "\n"
    "MANIFEST.json:\n"
    "  {\"bundle\": \"out.tlb\", \"targets\": [\"cpu\"],\n"
    "   \"kernels\": [{\"module\": \"kernels.gemm\", \"factory\": \"matmul\", \"kwargs\": {\"M\": \"M\", ...},\n"
    "                \"name\": \"gemm_f32_nn\", \"dynamic\": [\"M\"]}]}\n"
    "For each kernel, runs `python3 -m tilelang.emit_ir --module M --factory F --kwargs JSON --name NAME`,\n"
    "checks that the emitted function is NAME with the listed dynamic symbols, then compiles everything\n"
    "into one bundle (-o, else the manifest's \"bundle\" next to the manifest). --target overrides the\n"
    "manifest's targets. PYTHONPATH: --python DIR or $TL_PYTHONPATH, <tl-pack dir>/../python, the\n"
    "manifest's project root (the ancestor holding the kernel modules), $PYTHONPATH.\n";

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
  std::vector<std::string> dynamic;
};

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
    TL_RETURN_IF_ERROR(str("module", &inst.module, true));
    TL_RETURN_IF_ERROR(str("factory", &inst.factory, true));
    TL_RETURN_IF_ERROR(str("name", &inst.name, false));
    if (inst.name.empty()) inst.name = inst.factory;
    if (const Json* kw = k.Find("kwargs")) {
      if (kw->type != Json::Type::kObject) return Status(StatusCode::kInvalidArgument, at + ".kwargs is not an object");
      inst.kwargs = kw->raw;
    }
    if (const Json* d = k.Find("dynamic")) {
      if (d->type != Json::Type::kArray) return Status(StatusCode::kInvalidArgument, at + ".dynamic is not an array");
      for (const Json& s : d->items) {
        if (s.type != Json::Type::kString) {
          return Status(StatusCode::kInvalidArgument, at + ".dynamic holds a non-string");
        }
        inst.dynamic.push_back(s.text);
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

}  // namespace

int RunBuild(int argc, char** argv) {
  const char* verb = "build";
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, {"-o", "--target", "--emit-source", "--cache-dir", "-j", "--python"},
                 {"--help", "-h", "-q"}, &args, &error)) {
    return UsageError(verb, error);
  }
  if (args.Has("--help") || args.Has("-h")) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (args.positional.size() != 1) return UsageError(verb, "expected exactly one MANIFEST.json");
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

  // Targets: --target, else the manifest's, else cpu.
  std::string target_spec = args.Get("--target");
  if (target_spec.empty()) {
    if (const Json* t = root.Find("targets"); t != nullptr && t->type == Json::Type::kArray) {
      for (const Json& x : t->items) target_spec += (target_spec.empty() ? "" : ",") + x.text;
    }
  }
  StatusOr<std::vector<toolchain::IsaLevel>> targets =
      toolchain::ParseCpuTargets(target_spec.empty() ? "cpu" : target_spec);
  if (!targets.ok()) return UsageError(verb, targets.status().message());
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

  fs::path project_root;
  const std::vector<std::string> pypath = PythonPath(args.Get("--python"), manifest_dir, instances, &project_root);
  std::string pythonpath;
  for (const std::string& p : pypath) pythonpath += (pythonpath.empty() ? "" : ":") + p;
  const char* py_env = std::getenv("TL_PYTHON");
  const std::string python = py_env != nullptr && *py_env != '\0' ? py_env : "/usr/bin/python3";
  const bool quiet = args.Has("-q");

  // Run the frontend once per instance, in parallel.
  std::vector<toolchain::ProcessResult> emitted(instances.size());
  std::atomic<size_t> next{0};
  std::mutex log_mu;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < instances.size();) {
      const Instance& inst = instances[i];
      emitted[i] = toolchain::RunProcess({python, "-m", "tilelang.emit_ir", "--module", inst.module, "--factory",
                                          inst.factory, "--kwargs", inst.kwargs, "--name", inst.name},
                                         project_root.string(), {"PYTHONPATH=" + pythonpath, "PYTHONDONTWRITEBYTECODE=1"});
      if (!quiet) {
        std::lock_guard<std::mutex> lock(log_mu);
        std::fprintf(stderr, "tl-pack build: frontend %s (%s.%s): %s\n", inst.name.c_str(), inst.module.c_str(),
                     inst.factory.c_str(), emitted[i].exit_code == 0 ? "ok" : "FAILED");
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(jobs, static_cast<int>(instances.size())); ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();

  std::vector<ir::Function> functions;
  for (size_t i = 0; i < instances.size(); ++i) {
    const Instance& inst = instances[i];
    const std::string what = "kernel '" + inst.name + "' (" + inst.module + "." + inst.factory + ")";
    if (emitted[i].exit_code != 0) {
      std::string err = emitted[i].err;
      while (!err.empty() && err.back() == '\n') err.pop_back();
      std::fprintf(stderr, "tl-pack build: %s: the frontend failed (exit %d, PYTHONPATH=%s):\n%s\n", what.c_str(),
                   emitted[i].exit_code, pythonpath.c_str(), err.c_str());
      return kExitMalformed;
    }
    StatusOr<ir::Module> m = ir::ParseModule(emitted[i].out, inst.name + ".tir");
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
    functions.push_back(std::move(m->functions[0]));
  }

  driver::CpuBuildOptions options;
  options.targets = *targets;
  options.jobs = jobs;
  options.emit_source_dir = args.Get("--emit-source");
  options.compiler.cache_dir = args.Get("--cache-dir");
  return CompileFunctionsToBundle(verb, functions, std::move(options), out, quiet);
}

}  // namespace tl::pack
