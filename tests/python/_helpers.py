"""Set-up shared by the tests in tests/python that compile kernels with the tilelang frontend (imported by them,
never collected: the name does not start with test_).

Importing it makes the repository root importable (kernels/, tools/) and, where `import tilelang` fails (no
PYTHONPATH to compiler/python), the frontend in compiler/python. The rest are helpers, each with the exact skip
conditions and reasons the tests had before they moved here:

- use_tl_pack(): TL_PACK / TL_CACHE_DIR for tilelang.compile, or skip ("no tl-pack (...)") without a build;
  conftest.py's `tl_pack_env` fixture calls it once per module;
- cuda_kernel_source(prog, ...): the CUDA source, skipping ONLY where no CUDA compiler exists (NVRTC and nvcc both
  absent); any other failed compile is a test failure;
- source_parts(src): a multi-variant source split at its "// ---- NAME" headers;
- NVCC, ptx_of(), ptxas_v(), ptxas_v_of_ptx(), count(): nvcc / ptxas runs on generated sources and PTX instruction counts.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # kernels/, tools/
try:
    import tilelang  # noqa: F401  - PYTHONPATH's frontend (compiler/python or a build's copy) first
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "compiler", "python"))

NVCC = os.environ.get("TL_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def use_tl_pack():
    """Points tilelang.compile at tl-pack (TL_PACK) and the build's cache (TL_CACHE_DIR) unless the environment
    already does; skips the calling test (or module, from a module-scoped fixture) where no tl-pack is found.
    Returns the tl-pack path."""
    from tilelang import toolchain
    try:
        tl_pack = toolchain.tl_pack_path()
    except Exception as e:  # noqa: BLE001 - no build: skip like the neighbours
        pytest.skip(f"no tl-pack ({e})")
    os.environ.setdefault("TL_PACK", tl_pack)
    os.environ.setdefault("TL_CACHE_DIR", os.path.join(build_dir(), "tilelang-cache"))
    return tl_pack


def build_dir():
    return os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build"))


def cuda_kernel_source(prog, **compile_kwargs):
    """tilelang.compile(prog, target="cuda", **compile_kwargs).get_kernel_source(); skips only where the error
    says no CUDA compiler exists (NVRTC and nvcc both absent): a failed compile is a failure."""
    import tilelang
    try:
        return tilelang.compile(prog, target="cuda", **compile_kwargs).get_kernel_source()
    except Exception as e:  # noqa: BLE001
        if "no CUDA compiler" in str(e):
            pytest.skip(f"no CUDA toolchain: {e}")
        raise


def source_parts(src):
    """{variant file name: its text} of a source holding several variants, each under a "// ---- NAME" header
    ({} for a single-variant source, which has no headers)."""
    return {p.split("\n", 1)[0].strip(): p.split("\n", 1)[1] for p in src.split("// ---- ")[1:]}


def ptx_of(source, tmp_path, name="k"):
    """nvcc -arch=sm_90a -ptx of `source` (written to tmp_path/NAME.cu; the PTX is tmp_path/NAME.ptx); skips
    without nvcc."""
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    r = subprocess.run([NVCC, "-arch=sm_90a", "-ptx", "-o", str(tmp_path / f"{name}.ptx"), str(cu)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return (tmp_path / f"{name}.ptx").read_text()


def ptxas_v(source, tmp_path, name="k"):
    """ptxas's -v report (stderr) of nvcc -arch=sm_90a -cubin on `source`: registers, spills, shared bytes. The
    caller checks that nvcc exists (os.access(NVCC, os.X_OK)): some tests skip without it, some skip only this."""
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    r = subprocess.run([NVCC, "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / f"{name}.cubin"),
                        str(cu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr


def ptxas_v_of_ptx(tmp_path, name="k"):
    """ptxas -arch=sm_90a -v of the PTX that ptx_of(..., tmp_path, name) wrote (the ptxas beside NVCC): its report
    (stderr) of registers, spills and shared bytes."""
    r = subprocess.run([os.path.join(os.path.dirname(NVCC), "ptxas"), "-arch=sm_90a", "-v", "-o",
                        str(tmp_path / f"{name}.cubin"), str(tmp_path / f"{name}.ptx")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stderr


def count(ptx, op):
    """How many PTX instructions start with `op` (a whole mnemonic, then whitespace)."""
    return len(re.findall(r"^\s*" + re.escape(op) + r"\s", ptx, re.M))


def sm90a_kernel_source(prog, **compile_kwargs):
    """The kernel's CUDA source for sm_90a: its only variant (one without TMA or anything sm_90a-specific has no
    "// ---- NAME" headers) or its main_kernel.sm_90a.cu one; skips without a CUDA compiler."""
    src = cuda_kernel_source(prog, **compile_kwargs)
    parts = source_parts(src)
    if not parts:
        return src
    sm90 = [body for name, body in parts.items() if name.startswith("main_kernel.sm_90a.cu")]
    assert sm90, list(parts)
    return sm90[0]
