#!/usr/bin/python3
"""Runs every kernel of a packed standard-kernel bundle on the best device and checks it.

Usage: run_std_kernels.py BUNDLE.tlb

Only the runtime's Python binding (ctypes over the C ABI) and numpy are used to run the
kernels: no compiler, no frontend. The references come from kernels/*.py.
"""
import sys
import time

import numpy as np
import tilelang_runtime as tlrt

from kernels import gemm, rmsnorm, softmax

RNG = np.random.default_rng()


def case_gemm_nn():
    a = RNG.standard_normal((300, 512), dtype=np.float32)
    b = RNG.standard_normal((512, 512), dtype=np.float32)
    c = np.zeros((300, 512), np.float32)
    return "gemm_f32_nn", [a, b, c], 2, gemm.matmul_ref(a, b), 2 * 300 * 512 * 512


def case_gemm_nt():
    a = RNG.standard_normal((257, 512), dtype=np.float32)
    b = RNG.standard_normal((512, 512), dtype=np.float32)
    c = np.zeros((257, 512), np.float32)
    return "gemm_f32_nt", [a, b, c], 2, gemm.matmul_ref(a, b, trans_B=True), 2 * 257 * 512 * 512


def case_softmax():
    x = RNG.standard_normal((333, 1024), dtype=np.float32) * 4
    y = np.zeros_like(x)
    return "softmax_f32_1024", [x, y], 1, softmax.softmax_ref(x), 0


def case_rmsnorm():
    x = RNG.standard_normal((129, 1024), dtype=np.float32)
    w = RNG.standard_normal((1024,), dtype=np.float32)
    y = np.zeros_like(x)
    return "rmsnorm_f32_1024", [x, w, y], 2, rmsnorm.rms_norm_ref(x, w), 0


def main(path):
    rt = tlrt.Runtime()
    print("devices:")
    for d in rt.devices():
        print("  ", d)
    best = rt.best_device()
    # Best device first; a kernel the bundle has no variant for there falls back to the next one,
    # and the rejection is printed (e.g. a CPU-only bundle on a GPU machine).
    candidates = [best] + [d for d in rt.devices() if (d.backend, d.ordinal) != (best.backend, best.ordinal)]
    bundle = rt.open_bundle(path)
    failures = 0
    for make in (case_gemm_nn, case_gemm_nt, case_softmax, case_rmsnorm):
        name, args, out, ref, flops = make()
        print(f"-- {name}")
        prepared = None
        for device in candidates:
            try:
                prepared = bundle.kernel(name).prepare(device)
                break
            except tlrt.TLError as e:
                print(f"   not on {device}: {e}")
        if prepared is None:
            failures += 1
            continue
        print(prepared.explain())
        prepared(*args)
        t0 = time.perf_counter()
        prepared(*args)
        dt = time.perf_counter() - t0
        err = np.max(np.abs(args[out].astype(np.float64) - ref)) / max(1e-30, np.max(np.abs(ref)))
        ok = err < 1e-4
        failures += not ok
        rate = f", {flops / dt / 1e9:.1f} GFLOP/s" if flops else ""
        print(f"   max rel error {err:.2e} -> {'OK' if ok else 'FAIL'}; {dt * 1e3:.2f} ms{rate}")
    print("all kernels correct" if not failures else f"{failures} kernel(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
