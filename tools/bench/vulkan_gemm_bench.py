#!/usr/bin/env python3
"""fp16 GEMM through Vulkan against torch.matmul (cuBLAS), in one run (issue #5;
tools/device/vulkan_gpu.sh runs it on the H200 with NVIDIA's Vulkan driver).

  ours: tests/conformance's matmul tile program (fp16 A, B; fp32 accumulation; fp16 C) compiled
        with tilelang.compile(target="vulkan") for several tile configs, run on the Vulkan device
        through the runtime's Python binding with the operands in Vulkan device buffers. Every
        config is run with the variant the runtime selects (the cooperative-matrix variant where
        the device reports a matching shape) and, when that is not the plain SIMT variant, again
        with TL_FORCE_VARIANT=vulkan.spirv1.3 (plain), so both are reported.
  torch: torch.matmul on CUDA (cuBLAS), same shapes and dtypes, in the same process.

Checking: C is poisoned with NaN, computed once and 256 of its rows (all rows for small n) are
compared with a float64 numpy reference (relative Frobenius error below 1e-2, else not timed).
Timing: `--iters` launches queued on one runtime stream, then one synchronize; wall clock per
launch, median of `--reps` such rounds after one warm-up round (the queue is never drained
between launches, so submission overlaps execution; each launch is one vkQueueSubmit). torch is
timed with triton.testing.do_bench when triton is importable, else with CUDA events.

  python3 tools/bench/vulkan_gemm_bench.py [--n 4096] [--json OUT.json] [--no-torch]
  python3 tools/bench/vulkan_gemm_bench.py --precompile   (no GPU needed: fills the compile cache)
Environment: PYTHONPATH with tilelang (compiler/python) and tilelang_runtime; TL_PACK,
TL_CACHE_DIR as for tests/conformance; the Vulkan loader must find the driver (VK_DRIVER_FILES).
On lavapipe (CI machine) use a small --n and --no-torch: `--n 256 --no-torch --iters 2 --reps 2`.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

import bench_common as BC  # tests/conformance on sys.path, torch timing, errors, steps, table
import tilelang
import tlc_kernels_gemm as KG  # tests/conformance, put on sys.path by bench_common

# (block_M, block_N, block_K, threads): shared memory fp16 (bm + bn) * bk * 2 bytes stays within
# the H200's 48 KiB for Vulkan; the best one is reported.
# (128, 256, 32, 256): 8 warps with 64x64 warp tiles, each loaded A fragment reused over more B fragments
# in the cooperative-matrix variant.
CONFIGS = ((64, 64, 32, 128), (128, 128, 32, 256), (128, 64, 32, 128), (128, 256, 32, 256), (128, 128, 64, 256))
PLAIN = "vulkan.spirv1.3"


def program(n, cfg):
    bm, bn, bk, threads = cfg
    return KG.matmul(n, n, n, bm, bn, bk, in_dtype="float16", out_dtype="float16", accum_dtype="float32",
                     num_stages=1, threads=threads)


def compile_all(n, configs):
    out = {}
    for cfg in configs:
        t0 = time.perf_counter()
        try:
            out[cfg] = tilelang.compile(program(n, cfg), target="vulkan")
            print(f"compiled vulkan gemm fp16 {n} {cfg}: {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - a config that does not compile is reported, not fatal
            print(f"compile vulkan gemm fp16 {n} {cfg}: FAILED {str(e)[:400]}", flush=True)
    return out


class VulkanTensor:
    """A Vulkan device buffer holding a copy of a numpy array, presented through DLPack
    (kDLVulkan, the buffer's virtual device address) so that launches take it in place."""

    def __init__(self, trt, device, array):
        self._trt = trt
        self._lib = trt._lib
        self.array = np.ascontiguousarray(array)
        self._buf = ctypes.c_void_p()
        trt._check(self._lib.tl_buffer_allocate(device._handle, self.array.nbytes, ctypes.byref(self._buf)))
        self.upload()
        ffi = trt._ffi
        self._shape = (ctypes.c_int64 * self.array.ndim)(*self.array.shape)
        self._managed = ffi.DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self._lib.tl_buffer_device_pointer(self._buf)
        t.device.device_type, t.device.device_id = ffi.DL_VULKAN, device.ordinal
        self._dl_device = (ffi.DL_VULKAN, device.ordinal)
        t.ndim = self.array.ndim
        code, bits = trt._NP_TO_DL[self.array.dtype]
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        t.shape = self._shape
        t.byte_offset = 0
        deleter_type = dict(ffi.DLManagedTensor._fields_)["deleter"]
        self._deleter = deleter_type(lambda managed: None)  # the buffer is released in close()
        self._managed.deleter = self._deleter

    def upload(self):
        self._trt._check(self._lib.tl_buffer_copy_from_host(self._buf, 0, self.array.ctypes.data,
                                                            self.array.nbytes, None))

    def download(self):
        self._trt._check(self._lib.tl_buffer_copy_to_host(self._buf, 0, self.array.ctypes.data, self.array.nbytes,
                                                          None))
        return self.array

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        return self._dl_device

    def close(self):
        if self._buf:
            self._lib.tl_buffer_release(self._buf)
            self._buf = None


def time_queued(prepared, device, args, iters, reps):
    """Median ms per launch of `iters` launches queued on one stream (after one warm-up round)."""
    stream = device.stream()
    samples = []
    for r in range(reps + 1):
        t0 = time.perf_counter()
        for _ in range(iters):
            prepared(*args, stream=stream)
        stream.synchronize(timeout=600)
        if r:
            samples.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(samples)


def run_vulkan(kernels, n, iters, reps, results):
    import tilelang_runtime as trt
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float16)
    b = rng.standard_normal((n, n)).astype(np.float16)
    rows = np.arange(n) if n <= 512 else np.sort(rng.choice(n, 256, replace=False))
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    flops = 2.0 * n * n * n
    # Two runtimes: the runtime's own choice, and the plain variant forced (TL_FORCE_VARIANT is
    # read when a runtime is created).
    runtimes = {}
    saved = os.environ.pop("TL_FORCE_VARIANT", None)
    runtimes["selected"] = trt.Runtime(backends=["vulkan"])
    os.environ["TL_FORCE_VARIANT"] = PLAIN
    runtimes["plain"] = trt.Runtime(backends=["vulkan"])
    if saved is None:
        os.environ.pop("TL_FORCE_VARIANT")
    else:
        os.environ["TL_FORCE_VARIANT"] = saved
    spec = os.environ.get("TL_DEVICE", "vulkan")
    spec = spec if spec.startswith("vulkan") else "vulkan"
    machine = results[0]
    for mode, rt in runtimes.items():
        device = rt.device(spec)
        v = device.driver_version  # the device's Vulkan apiVersion
        machine.setdefault("vulkan_device", f"{device.name} ({device.arch}, Vulkan {v >> 22}.{(v >> 12) & 1023}."
                                            f"{v & 4095})")
        ta, tb = VulkanTensor(trt, device, a), VulkanTensor(trt, device, b)
        tc = VulkanTensor(trt, device, np.full((n, n), np.nan, dtype=np.float16))
        try:
            for cfg, kern in kernels.items():
                row = {"kind": "vulkan_gemm", "mode": mode, "dtype": "float16", "n": n, "cfg": list(cfg)}
                try:
                    p = rt.open_bundle(kern.bundle_path).kernel(kern.kernel_names[0]).prepare(device)
                    row["variant"] = p.variant["id"]
                    if mode == "plain" and row["variant"] != PLAIN:
                        row["error"] = f"forced {PLAIN}, got {row['variant']}"
                    elif mode == "plain" and not any(r.get("cfg") == list(cfg) and r["mode"] == "selected"
                                                     and r.get("variant") != PLAIN for r in results):
                        continue  # the selected variant was the plain one: measured already
                    else:
                        tc.array.fill(np.nan)
                        tc.upload()
                        p(ta, tb, tc)
                        row["err"] = BC.rel_err(tc.download()[rows], ref)
                        if row["err"] < 1e-2:
                            row["ms"] = time_queued(p, device, (ta, tb, tc), iters, reps)
                            row["tflops"] = flops / row["ms"] / 1e9
                except Exception as e:  # noqa: BLE001 - report and go on
                    row["error"] = str(e)[:600]
                print(json.dumps(row), flush=True)
                results.append(row)
        finally:
            for t in (ta, tb, tc):
                t.close()


def run_torch(n, results):
    import torch
    if not torch.cuda.is_available():
        results.append({"kind": "torch_gemm", "error": "torch sees no CUDA device"})
        return
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    ref = a.double() @ b.double()
    c = torch.full((n, n), float("nan"), device="cuda", dtype=torch.float16)
    torch.matmul(a, b, out=c)
    err = BC.rel_err(c, ref)
    ms, how = BC.cuda_ms(lambda: torch.matmul(a, b, out=c))
    row = {"kind": "torch_gemm", "dtype": "float16", "n": n, "err": err, "ms": ms,
           "tflops": 2.0 * n ** 3 / ms / 1e9, "timing": how, "gpu": torch.cuda.get_device_name(0),
           "torch": torch.__version__}
    print(json.dumps(row), flush=True)
    results.append(row)
    del a, b, c, ref
    torch.cuda.empty_cache()


def table(results):
    torch_row = next((r for r in results if r["kind"] == "torch_gemm" and "tflops" in r), None)
    cublas = torch_row["tflops"] if torch_row else None
    lines = ["| GEMM fp16 n^3 | variant | tile (bm, bn, bk, threads) | ms | TFLOP/s | vs cuBLAS | err |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if r["kind"] == "vulkan_gemm":
            if "tflops" in r:
                ratio = BC.ratio(r["tflops"], cublas, 3)
                lines.append(f"| {r['n']} Vulkan | {r['variant']} | {tuple(r['cfg'])} | {r['ms']:.3f} | "
                             f"{r['tflops']:.2f} | {ratio} | {r['err']:.1e} |")
            else:
                lines.append(f"| {r['n']} Vulkan | {r.get('variant', '-')} | {tuple(r['cfg'])} | - | - | - | "
                             f"{r.get('error', 'err %.1e' % r.get('err', float('nan')))[:200]} |")
        elif r["kind"] == "torch_gemm":
            if "tflops" in r:
                lines.append(f"| {r['n']} torch.matmul | cuBLAS | - | {r['ms']:.3f} | {r['tflops']:.1f} | 1 | "
                             f"{r['err']:.1e} |")
            else:
                lines.append(f"| torch.matmul | - | - | - | - | - | {r['error']} |")
    best = {}
    for r in results:
        if r["kind"] == "vulkan_gemm" and "tflops" in r:
            if r["variant"] not in best or r["tflops"] > best[r["variant"]]["tflops"]:
                best[r["variant"]] = r
    for v, r in sorted(best.items()):
        ratio = f", {BC.ratio(r['tflops'], cublas, 3)} of cuBLAS" if torch_row else ""
        lines.append(f"best {v}: {r['tflops']:.2f} TFLOP/s with tile {tuple(r['cfg'])}{ratio}")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--precompile", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    kernels = compile_all(args.n, CONFIGS)
    if args.precompile:
        return 0 if len(kernels) == len(CONFIGS) else 1
    results = [BC.machine_row()]
    steps = [lambda: run_vulkan(kernels, args.n, args.iters, args.reps, results)]
    if not args.no_torch:
        steps.insert(0, lambda: run_torch(args.n, results))
    BC.run_steps(steps, results, args.json)
    print(json.dumps(results[0]), flush=True)
    BC.print_table("Vulkan GEMM benchmark table", table(results))
    ok = any(r["kind"] == "vulkan_gemm" and "tflops" in r for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
