"""tilelang.testing: the helpers upstream TileLang's tests import.

Device gates ask this project's runtime (the one that will run the kernels):
`requires_cuda` skips unless the runtime sees a CUDA device it can launch on;
`requires_cuda_compute_version*(major, minor)` compare that device's compute
capability (its arch, "sm_90" -> (9, 0)). ROCm, CDNA and Metal gates skip
(no HIP or Metal runtime backend here yet); `requires_llvm` passes (the CPU
backend stands in for upstream's LLVM target). torch and pytest are imported
lazily.
"""

import functools
import inspect
import random
import re
import sys

from ..utils.tensor import torch_assert_close, torch_or_none  # noqa: F401

__all__ = ["requires_package", "requires_cuda", "requires_metal", "requires_rocm", "requires_llvm", "requires_cdna",
           "requires_cuda_or_cdna", "requires_gfx950", "main", "requires_cuda_compute_version", "set_random_seed",
           "torch_assert_close"] + [f"requires_cuda_compute_version_{op}" for op in ("ge", "gt", "le", "lt", "eq")]


@functools.lru_cache(maxsize=None)
def cuda_skip_reason():
    """None when this project's runtime can launch on a CUDA device, else why not."""
    from ..compiler import cuda_device_status
    try:
        return cuda_device_status()
    except Exception as e:  # the runtime binding is missing or broken: no CUDA for our kernels
        return f"{type(e).__name__}: {e}"


@functools.lru_cache(maxsize=None)
def cuda_compute_version():
    """(major, minor) of the first CUDA device the runtime launches on; (0, 0) when none."""
    if cuda_skip_reason() is not None:
        return (0, 0)
    from ..kernel import shared_runtime
    for d in shared_runtime().devices():
        if d.backend == "cuda" and d.can_launch:
            m = re.match(r"sm_(\d+?)(\d)a?$", d.arch)
            if m:
                return (int(m.group(1)), int(m.group(2)))
    return (0, 0)


def _short(reason):
    return str(reason).split(" (")[0].split(": tried")[0][:120]


def _skipif(func, condition, reason):
    import pytest
    return pytest.mark.skipif(condition, reason=reason)(func)


def requires_cuda(func):
    reason = cuda_skip_reason()
    return _skipif(func, reason is not None, f"Requires CUDA ({_short(reason)})")


def _compare(have, want, mode):
    return {"ge": have >= want, "gt": have > want, "le": have <= want, "lt": have < want,
            "eq": have == want}[mode]


def requires_cuda_compute_version(major_version, minor_version=0, mode="ge"):
    if mode not in ("ge", "gt", "le", "lt", "eq"):
        raise ValueError(f"requires_cuda_compute_version: mode {mode!r}; expected ge, gt, le, lt or eq")
    want = (major_version, minor_version)

    def wrap(func):
        have = cuda_compute_version()
        ok = cuda_skip_reason() is None and _compare(have, want, mode)
        return _skipif(requires_cuda(func), not ok,
                       f"Requires CUDA compute version {mode} {want[0]}.{want[1]}, have {have[0]}.{have[1]}")
    return wrap


def _version_gate(mode):
    def gate(major_version, minor_version=0):
        return requires_cuda_compute_version(major_version, minor_version, mode)
    gate.__name__ = f"requires_cuda_compute_version_{mode}"
    return gate


requires_cuda_compute_version_ge = _version_gate("ge")
requires_cuda_compute_version_gt = _version_gate("gt")
requires_cuda_compute_version_le = _version_gate("le")
requires_cuda_compute_version_lt = _version_gate("lt")
requires_cuda_compute_version_eq = _version_gate("eq")


def requires_rocm(func):
    return _skipif(func, True, "Requires ROCm (this project's runtime has no HIP backend that launches yet)")


requires_cdna = requires_gfx950 = requires_rocm


def requires_metal(func):
    return _skipif(func, True, "Requires Metal (not a target of this project)")


def requires_cuda_or_cdna(func):
    reason = cuda_skip_reason()
    return _skipif(func, reason is not None, f"Requires CUDA or CDNA ({_short(reason)})")


def requires_llvm(func):
    return func


def requires_package(*packages):
    def wrap(func):
        import importlib.util
        missing = [p for p in packages if importlib.util.find_spec(p) is None]
        return _skipif(func, bool(missing), f"Requires package(s) {', '.join(missing)}")
    return wrap


def set_random_seed(seed=42):
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass
    torch = torch_or_none()
    if torch is not None and getattr(torch, "__tl_placeholder__", None) is not True:  # cpu_probe's stand-in
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)


def main():
    """Run the calling test file with pytest (upstream test files end with tilelang.testing.main())."""
    import pytest
    test_file = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([test_file] + sys.argv[1:]))


def process_func(*args, **kwargs):
    raise NotImplementedError("tilelang.testing.process_func: upstream's performance-regression harness "
                              "is not part of this project")


regression = process_func
