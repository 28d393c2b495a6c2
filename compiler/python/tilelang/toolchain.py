"""Where the compiler driver and the compile cache live, and what the host CPU is.

tl-pack: $TL_PACK if set, else `<package dir>/../../bin/tl-pack` (the build
tree: build/python/tilelang -> build/bin), else $TL_BUILD_DIR/bin/tl-pack,
else `tl-pack` on PATH.
$TL_CUDA_TARGET narrows target "cuda" to an arch list (e.g. "sm_90a": that
cubin + the compute_80 PTX) for `tl-pack compile --target`.
Cache: $TL_CACHE_DIR if set, else `<package dir>/../tilelang-cache`
(build/python/tilelang-cache in the build tree).
"""

import functools
import os
import platform
import shutil
import subprocess

from .errors import TileLangCompileError

PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def tl_pack_path():
    env = os.environ.get("TL_PACK")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise TileLangCompileError(f"TL_PACK={env} is not an executable file")
        return env
    candidates = [os.path.join(PKG_DIR, "..", "..", "bin", "tl-pack")]
    if os.environ.get("TL_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["TL_BUILD_DIR"], "bin", "tl-pack"))
    for c in candidates:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.normpath(c)
    found = shutil.which("tl-pack")
    if found:
        return found
    raise TileLangCompileError(
        "tl-pack not found (looked for $TL_PACK, " + ", ".join(os.path.normpath(c) for c in candidates) +
        ", and PATH); build the project or set TL_PACK")


@functools.lru_cache(maxsize=None)
def tl_pack_verbs(path):
    """The verbs `tl-pack --help` lists (used to tell whether `compile` exists yet)."""
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    except OSError:
        return frozenset()
    words = set()
    for line in (out.stdout + out.stderr).splitlines():
        parts = line.split()
        if parts:
            words.add(parts[0].strip(":,"))
    return frozenset(words)


def cache_dir():
    d = os.environ.get("TL_CACHE_DIR") or os.path.normpath(os.path.join(PKG_DIR, "..", "tilelang-cache"))
    os.makedirs(d, exist_ok=True)
    return d


@functools.lru_cache(maxsize=None)
def host_isa_level():
    """x86-64 micro-architecture level of this CPU (x86-64-v2/v3/v4), for --target."""
    override = os.environ.get("TL_CPU_TARGET")
    if override:
        return override
    if platform.machine() not in ("x86_64", "AMD64"):
        raise TileLangCompileError(f"the CPU backend targets x86-64; this machine is {platform.machine()}")
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "x86-64-v2"
    v2 = {"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}
    v3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
    v4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    if not v2 <= flags:
        return "x86-64"
    if not v3 <= flags:
        return "x86-64-v2"
    if not v4 <= flags:
        return "x86-64-v3"
    return "x86-64-v4"


def tool_fingerprint(path):
    """Identifies the tl-pack build, so a rebuilt compiler never reuses old bundles."""
    st = os.stat(path)
    return _fingerprint(os.path.realpath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=None)
def _fingerprint(path, mtime_ns, size):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def is_cuda_target(pack_target):
    """Whether a tl-pack --target string names CUDA code (cuda, sm_XX, compute_XX, ptx)."""
    return any(x.strip() == "cuda" or x.strip().startswith(("sm_", "compute_")) or x.strip() == "ptx"
               for x in str(pack_target).split(","))
