"""Runs packed instances of the standard library and checks them against the numpy references.

Used by the tests (tests/python/test_std_kernels.py) and the demo (tools/run_std_kernels.py).
Only the runtime binding (tilelang_runtime, ctypes over the C ABI) and numpy run the kernels;
the frontend package is imported only to present numpy uint16 arrays as bfloat16 (DLPack).

    manifest = load_manifest()                      # kernels/manifest.json
    result = run_instance(bundle, entry, device, rng)
"""
import importlib
import json
import os
import time

import numpy as np

from kernels._util import compare

HERE = os.path.dirname(os.path.abspath(__file__))


def load_manifest(path=None):
    with open(path or os.path.join(HERE, "manifest.json")) as f:
        return json.load(f)


def case_for(entry, rng):
    """The Case of a manifest entry, built by its module's CASES[factory]."""
    mod = importlib.import_module(entry["module"])
    builder = getattr(mod, "CASES", {}).get(entry["factory"])
    if builder is None:
        raise LookupError(f"{entry['module']} has no test case for factory {entry['factory']}")
    return builder(entry.get("kwargs", {}), rng)


class Result:
    def __init__(self, name, device, variant, err, ok, seconds, flops):
        self.name, self.device, self.variant = name, device, variant
        self.err, self.ok, self.seconds, self.flops = err, ok, seconds, flops

    def __repr__(self):
        return (f"Result({self.name} on {self.device} [{self.variant}]: err {self.err:.2e} "
                f"{'OK' if self.ok else 'FAIL'}, {self.seconds * 1e3:.2f} ms)")


def _wrap_args(prepared, kernel, args, device):
    """bf16 parameters take uint16 arrays: present them as DLPack bfloat16."""
    wrapped, closers = [], []
    for p, a in zip(kernel.params, args):
        if p.kind == "buffer" and p.dtype == "bfloat16" and isinstance(a, np.ndarray) and a.dtype == np.uint16:
            from tilelang import kernel as tlk
            from tilelang_runtime import _ffi
            if device.backend == "cpu":
                w = tlk._BFloat16Tensor(a, _ffi)
            else:
                w = tlk._StagedBFloat16(a, device, _ffi)
                closers.append(w)
            wrapped.append(w)
        else:
            wrapped.append(a)
    return wrapped, closers


def launch(prepared, kernel, args, device):
    wrapped, closers = _wrap_args(prepared, kernel, args, device)
    try:
        prepared(*wrapped)
    finally:
        for c in closers:
            c.copy_back()
            c.close()


def run_instance(bundle, entry, device, rng, time_it=False):
    """Prepares entry's kernel on `device`, runs it on fresh random inputs and compares every
    output with its reference. Raises the runtime's TLError when no variant fits the device."""
    case = case_for(entry, rng)
    kernel = bundle.kernel(entry["name"])
    prepared = kernel.prepare(device)
    variant = prepared.variant.get("id", "")
    launch(prepared, kernel, case.args, device)
    err, ok = 0.0, True
    for i in case.outputs:
        e, o = compare(case, i, case.args[i])
        err, ok = max(err, e), ok and o
    seconds = 0.0
    if time_it:
        t0 = time.perf_counter()
        launch(prepared, kernel, case.args, device)
        seconds = time.perf_counter() - t0
    return Result(entry["name"], f"{device.backend}:{device.ordinal}", variant, err, ok, seconds, case.flops)
