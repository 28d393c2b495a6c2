"""Conformance suite fixtures: each test runs once per target.

Targets come from $TL_CONFORMANCE_TARGETS (comma-separated; default
"cpu,cuda,vulkan,hip"). A target whose pipeline is not there yet (no `tl-pack compile`,
no runtime binding, no backend, for CUDA no CUDA device: the runtime's CUDA
backend status message) is skipped with the reason. Vulkan without a Vulkan
device the runtime can launch on is compiled only (every case still goes
through tl-pack and spirv-val); so is HIP without an AMD GPU (always here: every
case is compiled by clang-19 for gfx90a, gfx942 and gfx1100 and its code objects
checked by tl-pack). `-k cuda` / `-k vulkan` / `-k hip` select those cases.
"""

import os

import numpy as np
import pytest

import tlc_util

TARGETS = [t for t in os.environ.get("TL_CONFORMANCE_TARGETS", "cpu,cuda,vulkan,hip").split(",") if t]


@pytest.fixture(params=TARGETS)
def target(request, monkeypatch):
    reason = tlc_util.pipeline_missing(request.param)
    if reason:
        pytest.skip(reason)
    why = "TL_CONFORMANCE_COMPILE_ONLY=1" if tlc_util.COMPILE_ONLY else tlc_util.cannot_run(request.param)
    if why:  # compile (through any style), never run
        import tilelang

        def compiled_only(self, *args, **kwargs):
            if request.param == "hip":  # the code objects' facts, as llvm-readelf would show them
                tlc_util.check_hsaco(self.bundle_path, self.kernel_name,
                                     getattr(self, "tl_expect_matrix_cores", None))
            pytest.skip(f"compiled only ({why})")
        monkeypatch.setattr(tilelang.JITKernel, "__call__", compiled_only)
    return request.param


# Fresh random inputs on every run; TL_CONFORMANCE_SEED=N replays a run (the seed is in the header).
SEED = int(os.environ.get("TL_CONFORMANCE_SEED") or np.random.SeedSequence().entropy % (2 ** 32))


def pytest_report_header(config):
    return f"conformance: targets {','.join(TARGETS)}, TL_CONFORMANCE_SEED={SEED}"


@pytest.fixture
def rng(request):
    return np.random.default_rng([SEED, sum(ord(c) * (i + 1) for i, c in enumerate(request.node.name))])
