"""tilelang.compile: Tile IR -> `tl-pack compile` -> bundle -> callable kernel.

Targets: "cpu" works; "cuda", "hip", "vulkan" are part of the language's target
set but their backends are not built yet, so they raise
TileLangNotImplementedError naming the target. "auto" picks the best device
present among the backends that exist (today: the CPU).
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

from . import toolchain
from .errors import TileLangCompileError, TileLangError, TileLangNotImplementedError
from .function import PrimFunc

TARGETS = ("auto", "cpu", "cuda", "hip", "vulkan")
IMPLEMENTED = ("cpu",)   # in order of preference for "auto"


def resolve_target(target):
    if target is None:
        target = os.environ.get("TILELANG_DEFAULT_TARGET", "auto")
    if isinstance(target, dict):
        target = target.get("kind")
    if target not in TARGETS:
        raise TileLangError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if target == "auto":
        return IMPLEMENTED[0]
    if target not in IMPLEMENTED:
        raise TileLangNotImplementedError(
            f"target {target!r}: its backend is not implemented in this toolchain yet "
            f"(available: {', '.join(IMPLEMENTED)})")
    return target


def _run_tl_pack(args, what):
    tl_pack = toolchain.tl_pack_path()
    if "compile" not in toolchain.tl_pack_verbs(tl_pack):
        raise TileLangNotImplementedError(f"{tl_pack} has no `compile` verb yet")
    proc = subprocess.run([tl_pack] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise TileLangCompileError(f"tl-pack {what} failed (exit {proc.returncode}):\n"
                                   f"{proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def compile_ir(text, target, isa, emit_source_dir=None):
    """Compile Tile IR text into a bundle in the cache; returns the bundle's path."""
    cache = toolchain.cache_dir()
    tool = toolchain.tool_fingerprint(toolchain.tl_pack_path())
    key = hashlib.sha256(f"{tool}\0{target}\0{isa}\0{text}".encode()).hexdigest()[:32]
    bundle = os.path.join(cache, "bundles", key + ".tlb")
    if os.path.exists(bundle) and emit_source_dir is None:
        return bundle
    os.makedirs(os.path.dirname(bundle), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tilelang-") as tmp:
        src = os.path.join(tmp, "kernel.tir")
        out = os.path.join(tmp, "kernel.tlb")
        with open(src, "w") as f:
            f.write(text)
        args = ["compile", src, "--target", isa, "-o", out, "--cache-dir", cache, "-q"]
        if emit_source_dir is not None:
            args += ["--emit-source", emit_source_dir]
        _run_tl_pack(args, "compile")
        tmp_bundle = bundle + f".{os.getpid()}.tmp"
        shutil.copyfile(out, tmp_bundle)
        os.replace(tmp_bundle, bundle)  # atomic: concurrent compiles never see half a file
    return bundle


def compile(func, out_idx=None, target="auto", verbose=False, pass_configs=None, compile_flags=None):  # noqa: A001
    if not isinstance(func, PrimFunc):
        raise TileLangError(f"tilelang.compile expects a T.prim_func, got {type(func).__name__}")
    if out_idx is None:
        out_idx = func.attrs.get("out_idx")  # eager style: the T.empty outputs
    target = resolve_target(target)
    text = func.script()
    if verbose:
        print(text)
    isa = toolchain.host_isa_level()
    bundle = compile_ir(text, target, isa)
    from .kernel import JITKernel
    return JITKernel(func, bundle, out_idx, target, isa, text)
