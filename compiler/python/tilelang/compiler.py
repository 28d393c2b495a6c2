"""tilelang.compile: Tile IR -> `tl-pack compile` -> bundle -> callable kernel.

Targets: "cpu" (x86-64, the host's ISA level) and "cuda" (`tl-pack compile
--target cuda`: cubins sm_80/sm_89/sm_90a + compute_80 PTX; also "sm_90a",
"sm_80,sm_90a", "cuda -arch=sm_90a" or {"kind": "cuda", "arch": "sm_90a"} for
chosen archs), "vulkan" (`tl-pack compile --target vulkan`: SPIR-V 1.3 variants,
run on a Vulkan device; TL_DEVICE=vulkan:N picks one), "hip" (`tl-pack compile --target hip`: HSACO
code objects for gfx90a, gfx942 and gfx1100 built by clang-19; also AMDGPU target IDs such as
"gfx942:xnack-" or {"kind": "hip", "arch": "gfx90a,gfx942"}; $TL_HIP_TARGET narrows a plain "hip").
HIP kernels run only where the runtime sees an AMD GPU; this project has none, so here they are
compiled and statically checked, and calling one raises TileLangRuntimeError saying why. "auto"
picks CUDA when the runtime sees a CUDA device it can launch on, else the CPU.

A feature the backend reports as UNIMPLEMENTED (dynamic shape symbols on CUDA,
several kernels in one function, ...) raises TileLangUnimplementedFeature
naming the target and carrying the backend's message (file:line).
"""

import hashlib
import numbers
import os
import re
import shutil
import subprocess
import tempfile

from . import ir, toolchain
from .errors import (TileLangCompileError, TileLangError, TileLangNotImplementedError,
                     TileLangUnimplementedFeature)
from .function import PrimFunc

TARGETS = ("auto", "cpu", "cuda", "hip", "vulkan")
IMPLEMENTED = ("cuda", "cpu", "vulkan", "hip")   # "auto" picks cuda, else cpu
_SM = re.compile(r"^(sm_[0-9]+a?|compute_[0-9]+|ptx)$")
_GFX = re.compile(r"^(gfx[0-9a-z]+(-[0-9]+)?(-generic)?(:(sramecc|xnack)[+-])*|hip|hip-cov4)$")


def _is_hip(pack_target):
    """Whether a tl-pack --target string names HIP code (hip, gfx target IDs)."""
    return any(_GFX.match(x.strip()) for x in str(pack_target).split(","))


def _split_hip(target):
    """("hip", target ID list or None) for a HIP spec, else None."""
    arch = None
    if isinstance(target, dict) and target.get("kind") == "hip":
        arch = target.get("arch")
    elif isinstance(target, str):
        items = [x.strip() for x in target.split(",") if x.strip()]
        if items and all(_GFX.match(x) for x in items) and any(x.startswith("gfx") for x in items):
            arch = ",".join(items)
        elif target.strip() != "hip":
            return None
    else:
        return None
    if arch is not None:
        items = [x.strip() for x in str(arch).split(",") if x.strip()]
        if not items or not all(_GFX.match(x) for x in items):
            raise TileLangError(f"bad AMDGPU target list {arch!r}; expected items like gfx90a, gfx942:xnack-, gfx1100")
        arch = ",".join(items)
    return "hip", arch


def _split_target(target):
    """(kind, CUDA arch list or None) of a target spec."""
    arch = None
    if isinstance(target, dict):
        arch = target.get("arch")
        target = target.get("kind")
    if isinstance(target, str):
        t = target.strip()
        m = re.match(r"^cuda\s+.*-arch=(\S+)", t)  # upstream / TVM style "cuda -arch=sm_90a"
        if m:
            t, arch = "cuda", m.group(1)
        items = [x.strip() for x in t.split(",") if x.strip()]
        if items and all(_SM.match(x) for x in items):
            t, arch = "cuda", ",".join(items)
        target = t
    if arch is not None:
        items = [x.strip() for x in str(arch).split(",") if x.strip()]
        if not items or not all(_SM.match(x) for x in items):
            raise TileLangError(f"bad CUDA arch list {arch!r}; expected items like sm_80, sm_90a, ptx")
        arch = ",".join(items)
    return target, arch


def cuda_device_status():
    """None when the runtime sees a CUDA device it can launch on, else why not (str)."""
    return device_status("cuda")


def device_status(backend):
    """None when the runtime sees a `backend` ("cuda", "vulkan") device it can launch on, else why not."""
    from .kernel import shared_runtime
    try:
        rt = shared_runtime()
    except TileLangError as e:
        return str(e)
    status = rt.backend_status(backend)
    if status:
        return status
    if not any(d.backend == backend and d.can_launch for d in rt.devices()):
        return f"the runtime's {backend} backend is up but reports no {backend} device it can launch on"
    return None


def resolve_target(target):
    """The target kind ("cpu" / "cuda") `target` names; raises for unknown or unbuilt targets."""
    return resolve_target_spec(target)[0]


def resolve_target_spec(target):
    """(kind, tl-pack --target string or None for the CPU's host ISA level)."""
    if target is None or target == "auto":  # $TILELANG_DEFAULT_TARGET picks what "auto" means, as upstream
        target = os.environ.get("TILELANG_DEFAULT_TARGET") or "auto"
    hip = _split_hip(target)
    kind, arch = hip if hip else _split_target(target)
    if kind not in TARGETS:
        raise TileLangError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)} "
                            "(or CUDA archs such as 'sm_90a')")
    if kind == "auto":
        kind = "cuda" if cuda_device_status() is None else "cpu"
    if kind not in IMPLEMENTED:
        raise TileLangNotImplementedError(
            f"target {kind!r}: its backend is not implemented in this toolchain yet "
            f"(available: {', '.join(IMPLEMENTED)})")
    if kind == "cuda":
        # $TL_CUDA_TARGET (e.g. "sm_90a") narrows a plain "cuda" to the archs one machine needs.
        env = os.environ.get("TL_CUDA_TARGET")
        if arch is None and env:
            arch = _split_target({"kind": "cuda", "arch": env})[1]
        return kind, arch or "cuda"
    if kind == "vulkan":
        return kind, "vulkan"
    if kind == "hip":
        env = os.environ.get("TL_HIP_TARGET")
        if arch is None and env:
            arch = _split_hip({"kind": "hip", "arch": env})[1]
        return kind, arch or "hip"
    return kind, None


# Function names a CUDA kernel cannot have (upstream's kernels are all called `main`):
# the bundle's kernel is then `<name>_kernel`, as upstream names its CUDA kernels.
_CUDA_RESERVED = frozenset("""main asm auto bool break case catch char class const continue default delete do double
else enum extern float for friend goto if inline int long new operator private protected public register return
short signed sizeof static struct switch template this throw try typedef union unsigned virtual void volatile
while""".split())


def kernel_name_for(name, kind):
    # HIP C++ reserves the same names (clang: "'main' must return 'int'").
    return name + "_kernel" if kind in ("cuda", "hip") and name in _CUDA_RESERVED else name


def _run_tl_pack(args, what, target=None, env=None):
    tl_pack = toolchain.tl_pack_path()
    if "compile" not in toolchain.tl_pack_verbs(tl_pack):
        raise TileLangNotImplementedError(f"{tl_pack} has no `compile` verb yet")
    proc = subprocess.run([tl_pack] + args, capture_output=True, text=True,
                          env=None if not env else {**os.environ, **env})
    if proc.returncode != 0:
        out = proc.stderr.strip() or proc.stdout.strip()
        lines = [ln for ln in out.splitlines() if "UNIMPLEMENTED" in ln]
        if lines:
            feature = lines[-1].split("UNIMPLEMENTED", 1)[1].lstrip(": ").strip()
            raise TileLangUnimplementedFeature(
                f"target {target or '?'}: not implemented by the backend: {feature}\n"
                f"tl-pack {what} failed (exit {proc.returncode}):\n{out}", target=target, feature=feature)
        raise TileLangCompileError(f"tl-pack {what} failed (exit {proc.returncode}):\n{out}")
    return proc


# tl-pack's build switches read from the environment (cuda_bundle.cc): they change the code it
# generates, so they are part of a bundle's cache key (TL_CUDA_BULK_STORE=1: the sm_90a GEMM's opt-in
# bulk-copy epilogue, also pass_configs {"tl.bulk_store": True}; 0 or unset: the consumers' stores;
# TL_CUDA_GEMM_PINGPONG=1: the persistent sm_90a GEMM's opt-in ping-pong schedule, also pass_configs
# {"tl.gemm_pingpong": True}; TL_CUDA_PERSISTENT_RING=1: a persistent kernel's ring of stages continues
# across its tiles instead of restarting per tile, opt-in: no faster on the H200; TL_CUDA_TMA_STORE=1: the
# sm_90a GEMM's opt-in TMA-store epilogue, also pass_configs {"tl.tma_store": True}).
BUILD_SWITCHES = ("TL_CUDA_WS", "TL_CUDA_PERSISTENT", "TL_CUDA_CLUSTER", "TL_CUDA_BULK_STORE", "TL_CUDA_GEMM_PINGPONG",
                  "TL_CUDA_PERSISTENT_RING", "TL_CUDA_TMA_STORE")

# This project's own boolean pass_configs keys and the build switch each sets (1 for True, 0 for False).
BOOL_SWITCH_KEYS = (("tl.bulk_store", "TL_CUDA_BULK_STORE"), ("tl.gemm_pingpong", "TL_CUDA_GEMM_PINGPONG"),
                    ("tl.tma_store", "TL_CUDA_TMA_STORE"))


def build_env_for(pass_configs):
    """The tl-pack build switches a compile's pass_configs ask for: tl.disable_warp_specialized ->
    TL_CUDA_WS=0 (sm_90a: no producer warpgroup; the other targets have none anyway); tl.persistent ->
    TL_CUDA_PERSISTENT (persistent_switch); tl.bulk_store (this project's own, opt-in: slower
    where measured) -> TL_CUDA_BULK_STORE=1 for a true value, 0 for a false one (the sm_90a warp-specialized GEMM's epilogue
    as per-row cp.async.bulk copies); tl.gemm_pingpong (this project's own, opt-in: slower where measured)
    -> TL_CUDA_GEMM_PINGPONG=1 / 0 (a persistent sm_90a GEMM whose block is one 128-thread warpgroup as two
    consumer warpgroups on alternate tiles, CUTLASS's ping-pong; elsewhere ignored with a note); tl.tma_store
    (this project's own, opt-in: never run on a GPU yet) -> TL_CUDA_TMA_STORE=1 / 0 (the sm_90a GEMM's staged
    epilogue tile 128B-swizzled and, warp-specialized, stored by TMA tensor stores; takes tl.bulk_store's place)."""
    env = {}
    if pass_configs and pass_configs.get("tl.disable_warp_specialized"):
        env["TL_CUDA_WS"] = "0"
    for key, switch in BOOL_SWITCH_KEYS:
        if pass_configs and key in pass_configs:
            value = pass_configs[key]
            if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
                raise TileLangError(f"pass_configs['{key}'] must be True or False, got {value!r}")
            env[switch] = "1" if value else "0"
    if pass_configs and "tl.persistent" in pass_configs:
        env["TL_CUDA_PERSISTENT"] = persistent_switch(pass_configs["tl.persistent"])
    return env


def persistent_switch(value):
    """pass_configs "tl.persistent" (this project's key; upstream TileLang has none) as TL_CUDA_PERSISTENT's value.
    True: the sm_90a warp-specialized GEMM as a persistent kernel over the H100/H200's 132 SMs (a grid of
    min(tiles, 132 x blocks per SM) blocks, each looping over the output tiles b, b + G, ...; a device with
    fewer SMs runs the extra blocks as a second wave, still correct); an int N >= 2: over N SMs; False / 0 /
    None: not persistent, even where the environment says TL_CUDA_PERSISTENT. Only that kernel form changes
    (compiler/lowering/gpu/README.md, "Persistent"); other kernels and targets build as without the key."""
    if value is True:
        return "1"  # cuda_bundle.cc: 1 means 132 SMs
    n = None if isinstance(value, bool) or not isinstance(value, numbers.Integral) else int(value)
    if value is None or value is False or n == 0:
        return "0"
    if n is not None and 2 <= n < 2**31:
        return str(n)
    if n == 1:
        raise TileLangError("pass_configs['tl.persistent'] = 1 is ambiguous: True for the device's 132 SMs, "
                            "or a number of SMs >= 2")
    raise TileLangError(f"pass_configs['tl.persistent'] must be True, False or a number of SMs >= 2, "
                        f"got {value!r} ({type(value).__name__})")


def compile_ir(text, target, isa, emit_source_dir=None, build_env=None):
    """Compile Tile IR text into a bundle in the cache; returns the bundle's path. build_env: tl-pack
    build switches (BUILD_SWITCHES) over the process environment's."""
    cache = toolchain.cache_dir()
    tool = toolchain.tool_fingerprint(toolchain.tl_pack_path())
    switches = {k: os.environ[k] for k in BUILD_SWITCHES if k in os.environ}
    switches.update(build_env or {})
    tag = "".join(f"\0{k}={switches[k]}" for k in sorted(switches))
    key = hashlib.sha256(f"{tool}\0{target}\0{isa}\0{text}{tag}".encode()).hexdigest()[:32]
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
        kind = ("cuda" if toolchain.is_cuda_target(isa) else "vulkan" if isa == "vulkan"
                else "hip" if _is_hip(isa) else "cpu")
        _run_tl_pack(args, "compile", target=kind, env=build_env)
        tmp_bundle = bundle + f".{os.getpid()}.tmp"
        shutil.copyfile(out, tmp_bundle)
        os.replace(tmp_bundle, bundle)  # atomic: concurrent compiles never see half a file
    return bundle


EXECUTION_BACKENDS = ("auto", "tvm_ffi", "cython", "nvrtc", "ctypes", "dlpack", "torch")


def compile(func, out_idx=None, target="auto", verbose=False, pass_configs=None, compile_flags=None,  # noqa: A001
            execution_backend=None, target_host=None):
    """Upstream's signature. execution_backend (any of EXECUTION_BACKENDS) and target_host are
    accepted: every kernel runs through this project's runtime. pass_configs: see
    pass_config.check_pass_configs; compile_flags (str or list) are recorded on the kernel."""
    if not isinstance(func, PrimFunc):
        raise TileLangError(f"tilelang.compile expects a T.prim_func, got {type(func).__name__}")
    if execution_backend is not None and execution_backend not in EXECUTION_BACKENDS:
        raise TileLangError(f"unknown execution_backend {execution_backend!r}; expected one of "
                            f"{', '.join(EXECUTION_BACKENDS)}")
    from .pass_config import check_pass_configs
    pass_configs = check_pass_configs(pass_configs)
    if out_idx is None:
        out_idx = func.attrs.get("out_idx")  # eager style: the T.empty outputs
    target, pack_target = resolve_target_spec(target)
    name = kernel_name_for(func.name, target)
    names = [name]
    if len(func.function.body) > 1:
        # Several T.Kernel blocks (flash decoding's split + combine): one Tile IR function each,
        # with every parameter of the program, launched in order by the JITKernel.
        names, parts = [], []
        for i, k in enumerate(func.function.body):
            names.append(kernel_name_for(f"{func.name}_k{i}", target))
            parts.append(ir.Function(names[-1], func.function.params, func.function.symbols, [k],
                                     func.function.loc, func.function.sources))
        text = ir.print_module(parts)
    else:
        text = (func.with_name(name) if name != func.name else func).script()
    if verbose:
        print(text)
    isa = pack_target or toolchain.host_isa_level()  # tl-pack --target
    build_env = build_env_for(pass_configs)
    bundle = compile_ir(text, target, isa, build_env=build_env)
    from .kernel import JITKernel
    kernel = JITKernel(func, bundle, out_idx, target, isa, text, kernel_name=names[0], kernel_names=names)
    kernel.build_env = build_env  # get_kernel_source regenerates with the same switches
    return kernel
