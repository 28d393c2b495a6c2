"""What the GPU benchmark scripts share (gpu_bench.py: the CUDA backend; vulkan_gemm_bench.py: Vulkan
against cuBLAS): the conformance suite's tile programs on sys.path, the torch timing, the error
measure, the step loop and the table printing. Each script keeps its own kernels and rows.

Imported as `import bench_common` (a script's own directory is on sys.path); torch and triton are
imported only by the functions that time torch, so `--precompile` runs need neither.
"""
import json
import os
import statistics
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# tests/conformance's tile programs (tlc_kernels_gemm, tlc_kernels_attention) are what is measured.
sys.path.insert(0, os.path.join(REPO, "tests", "conformance"))


def machine_row(**facts):
    """The first results row: when (UTC) and on what the benchmark ran."""
    return {"kind": "machine", **facts, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def cuda_ms(fn):
    """(median ms per call of fn on the current CUDA device, how it was timed): triton.testing.do_bench
    (CUDA events, L2 flushed between runs, after its warm-up) when triton is importable, else CUDA
    events around 10 calls, 20 such rounds after 20 warm-up calls."""
    try:
        import triton
    except ImportError:
        triton = None
    if triton is not None:
        return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median"), "triton.testing.do_bench"
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(20):
        fn()
    samples = []
    for _ in range(20):
        start.record()
        for _ in range(10):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 10)
    return statistics.median(samples), "CUDA events"


def rel_err(x, ref):
    """Relative Frobenius error of x against ref in float64; inf when x has a non-finite element.
    x and ref: torch tensors or numpy arrays (both of one kind)."""
    if hasattr(x, "double"):  # torch
        import torch
        x, ref = x.double(), ref.double()
        if not torch.isfinite(x).all():
            return float("inf")
        return float(torch.linalg.vector_norm(x - ref) / torch.linalg.vector_norm(ref))
    import numpy as np
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    if not np.isfinite(x).all():
        return float("inf")
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def run_steps(steps, results, json_path=None):
    """Run each step (a callable appending rows to results); a step that raises is recorded as an
    error row and the next one runs (one failing part must not hide the others). The results are
    rewritten to json_path after every step, so a run killed later keeps what it measured."""
    for step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - recorded, and the next step runs
            traceback.print_exc()
            results.append({"kind": "error", "error": repr(e)[:500]})
        if json_path:
            with open(json_path, "w") as f:
                json.dump(results, f, indent=1)


def ratio(num, den, digits=2):
    """num / den formatted with `digits` decimals, '-' when either is missing."""
    if num is None or den is None:
        return "-"
    return f"{num / den:.{digits}f}"


def print_table(title, lines):
    print(f"\n=== {title} ===")
    print("\n".join(lines))
