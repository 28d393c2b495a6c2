"""Helpers for the conformance suite: pipeline availability, inputs in every
dtype (bfloat16 as uint16 bit patterns, since numpy has none), comparisons."""

import importlib
import os

import numpy as np

import tilelang
from tilelang import toolchain


# TL_CONFORMANCE_COMPILE_ONLY=1: compile every case (filling the compile cache,
# e.g. for a GPU machine without a CUDA compiler: tools/device/gpu_check.sh), then skip.
COMPILE_ONLY = os.environ.get("TL_CONFORMANCE_COMPILE_ONLY") == "1"


def pipeline_missing(target):
    """Why `target` cannot run end to end here, or None if it can."""
    try:
        tilelang.compiler.resolve_target(target)
    except tilelang.TileLangError as e:
        return str(e)
    try:
        tl_pack = toolchain.tl_pack_path()
    except tilelang.TileLangError as e:
        return str(e)
    if "compile" not in toolchain.tl_pack_verbs(tl_pack):
        return f"{tl_pack} has no `compile` verb yet (C++ compiler not landed)"
    try:
        importlib.import_module("tilelang_runtime")
    except ImportError as e:
        return f"runtime binding tilelang_runtime not importable: {e}"
    if target == "cuda" and not COMPILE_ONLY:
        status = tilelang.compiler.cuda_device_status()
        if status:
            return f"no CUDA device: {status}"
    return None


def cannot_run(target):
    """Why kernels compiled for `target` cannot run here though they compile (Vulkan without a
    device the runtime can launch on: compile-only), or None."""
    if target == "vulkan":
        status = tilelang.compiler.device_status("vulkan")
        if status:
            return f"no Vulkan device to run on: {status}"
    if target == "hip":  # HSACO for gfx90a, gfx942, gfx1100, checked at build; this project has no AMD GPU
        status = tilelang.compiler.device_status("hip")
        if status:
            return f"HSACO for gfx90a, gfx942, gfx1100 built and checked; not run: no AMD GPU ({status})"
    return None


def expect_matrix_cores(kernel, expected=True):
    """Marks a compiled kernel whose HIP code objects must (or must not) use AMD matrix cores:
    v_mfma_* for gfx90a and gfx942, v_wmma_* for gfx1100 (checked by check_hsaco)."""
    kernel.tl_expect_matrix_cores = expected
    return kernel


def _objdump():
    for p in ("/usr/lib/llvm-19/bin/llvm-objdump", "/usr/bin/llvm-objdump-19"):
        if os.path.exists(p):
            return p
    return None


def check_hsaco(bundle_path, kernel_name, matrix_cores=None):
    """Static checks of a kernel's HIP variants (no AMD GPU runs them): one code object per default
    target, wavefront 64 on CDNA and 32 on RDNA, LDS within 64 KiB, no scratch, no spills. With
    llvm-objdump-19: MFMA on gfx90a exactly when on gfx942 (one lowering), and, where the test says
    (`matrix_cores`, see expect_matrix_cores), v_mfma_* on both CDNA targets and v_wmma_* on gfx1100."""
    import json
    import subprocess
    import tempfile
    out = subprocess.run([toolchain.tl_pack_path(), "inspect", "--json", bundle_path], capture_output=True,
                         text=True, check=True).stdout
    kernel = next(k for k in json.loads(out)["kernels"] if k["name"] == kernel_name)
    facts = {v["id"]: v["hsaco"] for v in kernel["variants"] if v["backend"] == "hip"}
    assert set(facts) == {"hip.gfx90a", "hip.gfx942", "hip.gfx1100"}, facts.keys()
    for vid, h in facts.items():
        what = f"{kernel_name} {vid}: {h}"
        assert h["wavefront_size"] == ("32" if vid == "hip.gfx1100" else "64"), what
        assert int(h["group_segment_fixed_size"]) <= 65536, what
        assert h["private_segment_fixed_size"] == "0", what
        assert h["vgpr_spill_count"] == "0" and h["sgpr_spill_count"] == "0", what
        assert h["uses_dynamic_stack"] == "false", what
    objdump = _objdump()
    if objdump is None:
        return
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for vid in facts:
            obj = os.path.join(tmp, vid + ".hsaco")
            subprocess.run([toolchain.tl_pack_path(), "extract", bundle_path, "--kernel", kernel_name, "--variant",
                            vid, "-o", obj], capture_output=True, text=True, check=True)
            dis = subprocess.run([objdump, "-d", obj], capture_output=True, text=True, check=True).stdout
            found[vid] = ("v_wmma_" if vid == "hip.gfx1100" else "v_mfma_") in dis
    assert found["hip.gfx90a"] == found["hip.gfx942"], f"{kernel_name}: MFMA on gfx90a/gfx942: {found}"
    if matrix_cores is not None:
        assert all(v == matrix_cores for v in found.values()), \
            f"{kernel_name}: matrix-core instructions expected {matrix_cores}, found {found}"


def to_bf16_bits(x):
    """float array -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def random(rng, shape, dtype, scale=1.0):
    """(array to pass to the kernel, its exact values as float64)."""
    x = rng.standard_normal(shape) * scale
    if dtype == "bfloat16":
        bits = to_bf16_bits(x)
        return bits, from_bf16_bits(bits).astype(np.float64)
    arr = x.astype(dtype)
    return arr, arr.astype(np.float64)


def as_f64(arr, dtype):
    if dtype == "bfloat16":
        return from_bf16_bits(arr).astype(np.float64)
    return np.asarray(arr).astype(np.float64)


# Tolerances by output dtype: (rtol, atol), as upstream's checks (1e-2) or tighter.
TOL = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float64": (1e-9, 1e-9)}


def assert_close(actual, expected, dtype="float32", rtol=None, atol=None, what=""):
    r, a = TOL[dtype]
    rtol = r if rtol is None else rtol
    atol = a if atol is None else atol
    actual = as_f64(actual, dtype)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def assert_equal_nan(actual, expected, signed_zeros=False, what=""):
    """Exactly equal as float64, a NaN matching only a NaN (NaN payloads are not compared); with
    `signed_zeros` the sign of a zero too (bit-exact for every value but NaN). export_cases.py
    records it as an exact check (RTOL = ATOL = 0, signed_zeros)."""
    actual = np.asarray(actual).astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(actual[~nan], expected[~nan], err_msg=what)
    if signed_zeros:
        np.testing.assert_array_equal(np.signbit(actual[~nan]), np.signbit(expected[~nan]), err_msg=f"{what}: signs")


def compile(prog, **kwargs):  # noqa: A001 - tilelang.compile, plus the suite's policy
    """tilelang.compile; a feature the target's backend reports as UNIMPLEMENTED makes the
    test an expected failure with the backend's message (wrong results still fail)."""
    import pytest
    try:
        kernel = tilelang.compile(prog, **kwargs)
        if COMPILE_ONLY:
            pytest.skip("compiled only (TL_CONFORMANCE_COMPILE_ONLY=1)")
        return kernel
    except tilelang.TileLangUnimplementedFeature as e:
        pytest.xfail(f"backend ({e.target}): {e.feature}")
    except tilelang.TileLangCompileError as e:
        if "UNIMPLEMENTED" in str(e):
            pytest.xfail(f"backend: {str(e).splitlines()[-1].strip()}")
        raise
