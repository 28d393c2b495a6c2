#!/usr/bin/env python3
"""GPU benchmarks of the CUDA backend, in one run (tools/device/gpu_check.sh runs it on the H200).

  GEMM fp16 and bf16 (fp32 accumulation, output in the input dtype) at 4096^3 and 8192^3:
      ours (tests/conformance's matmul tile program through tilelang.compile, target cuda)
      vs torch.matmul (cuBLAS) and a Triton matmul written below.
  FlashAttention forward, B=4 H=32 S=4096 D=128, causal and not:
      ours (tests/conformance's flash_attention tile program) vs torch SDPA with its flash
      and cuDNN backends.
  Bundle open + first launch, cubin vs PTX (TL_FORCE_VARIANT=cuda.compute_80, and
      CUDA_FORCE_PTX_JIT=1), each in a fresh process with CUDA_CACHE_DISABLE=1.

Every kernel's output is checked against a reference in higher precision (fresh random inputs,
output poisoned with NaN first) before it is timed; timings are the median of
triton.testing.do_bench (CUDA events, L2 flushed between runs) after its warm-up (bench_common.py,
shared with vulkan_gemm_bench.py: plain CUDA events where triton is missing).

  python3 tools/bench/gpu_bench.py [--json OUT.json] [--quick]
  python3 tools/bench/gpu_bench.py --precompile   (no GPU: fill the compile cache for sm_90a;
                                                   TL_CUDA_TARGET, TL_PACK, TL_CACHE_DIR as for
                                                   tests/conformance)
Environment: PYTHONPATH with tilelang (compiler/python) and tilelang_runtime.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import bench_common as BC  # tests/conformance on sys.path, torch timing, errors, steps, table
import tilelang
import tlc_kernels_attention as KA  # tests/conformance, put on sys.path by bench_common
import tlc_kernels_gemm as KG

GEMM_SIZES = (4096, 8192)
GEMM_DTYPES = ("float16", "bfloat16")
# (block_M, block_N, block_K, threads, num_stages); the best one per case is reported. num_stages >= 2
# is a cp.async pipeline of that depth (fewer where the stages do not fit the shared memory).
GEMM_CONFIGS = ((128, 128, 32, 128, 3), (128, 128, 32, 256, 3), (128, 256, 32, 256, 3), (128, 128, 64, 256, 3),
                (128, 128, 32, 256, 2))
FA = dict(batch=4, heads=32, seq=4096, dim=128)
# (block_M, block_N, threads, num_stages); the best one per case is reported.
FA_CONFIGS = ((128, 64, 256, 2), (64, 64, 128, 2), (128, 64, 256, 1))


def gemm_program(n, dtype, cfg):
    bm, bn, bk, threads, stages = cfg
    return KG.matmul(n, n, n, bm, bn, bk, in_dtype=dtype, out_dtype=dtype, num_stages=stages, threads=threads)


def fa_program(causal, cfg):
    bm, bn, threads, stages = cfg
    return KA.flash_attention(FA["batch"], FA["heads"], FA["heads"], FA["seq"], FA["seq"], FA["dim"], causal,
                              block_M=bm, block_N=bn, threads=threads, num_stages=stages)


def c_example_program():
    """f32 gemm(A[M,K], B[K,N], C[M,N]) with dynamic M, N, K: the C example's kernel."""
    import tilelang.language as T
    M, N, K = T.dynamic("M"), T.dynamic("N"), T.dynamic("K")

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float32")
            B_s = T.alloc_shared((32, 64), "float32")
            C_f = T.alloc_fragment((64, 64), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 64, bx * 64])

    return gemm


def compile_all(quick):
    """tilelang.compile for every benchmark program (cached by the frontend)."""
    out = {}
    sizes = GEMM_SIZES[:1] if quick else GEMM_SIZES
    for dtype in GEMM_DTYPES:
        for cfg in GEMM_CONFIGS:
            for n in sizes:
                t0 = time.perf_counter()
                out[("gemm", dtype, n, cfg)] = tilelang.compile(gemm_program(n, dtype, cfg), target="cuda")
                print(f"compiled gemm {dtype} {n} {cfg}: {time.perf_counter() - t0:.1f} s", flush=True)
    for causal in (False, True):
        for cfg in FA_CONFIGS:
            t0 = time.perf_counter()
            out[("fa", causal, cfg)] = tilelang.compile(fa_program(causal, cfg), target="cuda")
            print(f"compiled flash attention causal={causal} {cfg}: {time.perf_counter() - t0:.1f} s", flush=True)
    out["c_example"] = tilelang.compile(c_example_program(), target="cuda")
    return out


# ---------------------------------------------------------------------------- Triton matmul

def triton_matmul_fn():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        per_group = GROUP * num_n
        group = pid // per_group
        first_m = group * GROUP
        size_m = min(num_m - first_m, GROUP)
        pm = first_m + (pid % per_group) % size_m
        pn = (pid % per_group) // size_m
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            acc += tl.dot(tl.load(a), tl.load(b))
            a += BK * sak
            b += BK * sbk
        c = c_ptr + rm[:, None] * scm + rn[None, :] * scn
        tl.store(c, acc.to(c_ptr.dtype.element_ty))

    def run(a, b, c):
        M, K = a.shape
        N = b.shape[1]
        grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
        kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                     c.stride(1), BM=128, BN=256, BK=64, GROUP=8, num_warps=8, num_stages=3)
    return run


# ---------------------------------------------------------------------------- measuring

def bench(fn):
    return BC.cuda_ms(fn)[0]


rel_err = BC.rel_err


def run_gemms(kernels, quick, results):
    import torch
    torch.manual_seed(0)
    triton_mm = triton_matmul_fn()
    sizes = GEMM_SIZES[:1] if quick else GEMM_SIZES
    for dtype in GEMM_DTYPES:
        tdt = getattr(torch, dtype)
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a.float() @ b.float()
            flops = 2.0 * n * n * n
            row = {"kind": "gemm", "dtype": dtype, "n": n}
            best = None
            for cfg in GEMM_CONFIGS:
                k = kernels[("gemm", dtype, n, cfg)]
                c = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
                try:
                    k(a, b, c)
                    torch.cuda.synchronize()
                    err = rel_err(c, ref)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"gemm {dtype} {n} {cfg}: FAILED {e}", flush=True)
                    continue
                ms = bench(lambda: k(a, b, c)) if err < 1e-2 else float("nan")
                print(f"ours gemm {dtype} {n} cfg={cfg}: err {err:.2e}, {ms:.3f} ms, "
                      f"{flops / ms / 1e9:.1f} TFLOP/s", flush=True)
                row.setdefault("ours_configs", []).append({"cfg": list(cfg), "err": err, "ms": ms})
                if err < 1e-2 and (best is None or ms < best[1]):
                    best = (cfg, ms, err)
            if best:
                row.update(ours_cfg=list(best[0]), ours_ms=best[1], ours_err=best[2])
            c = torch.full((n, n), float("nan"), device="cuda", dtype=tdt)
            torch.matmul(a, b, out=c)
            row["torch_err"] = rel_err(c, ref)
            row["torch_ms"] = bench(lambda: torch.matmul(a, b, out=c))
            c.fill_(float("nan"))
            try:
                triton_mm(a, b, c)
                torch.cuda.synchronize()
                row["triton_err"] = rel_err(c, ref)
                row["triton_ms"] = bench(lambda: triton_mm(a, b, c))
            except Exception as e:  # noqa: BLE001
                row["triton_error"] = str(e)[:300]
            for key in ("ours", "torch", "triton"):
                if key + "_ms" in row:
                    row[key + "_tflops"] = flops / row[key + "_ms"] / 1e9
            print(json.dumps(row), flush=True)
            results.append(row)
            del a, b, c, ref
            torch.cuda.empty_cache()


def run_attention(kernels, results):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    torch.manual_seed(1)
    B, H, S, D = FA["batch"], FA["heads"], FA["seq"], FA["dim"]
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        row = {"kind": "attention", "causal": causal, "shape": [B, H, S, D]}
        # Reference in fp32 on two (batch, head) pairs; every kernel's full output is checked there.
        sl = (slice(0, 1), slice(0, 2))
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q[sl].float(), k[sl].float(), v[sl].float(), is_causal=causal)
        for cfg in FA_CONFIGS:
            kern = kernels[("fa", causal, cfg)]
            o = torch.full_like(q, float("nan"))
            try:
                kern(q, k, v, o)
                torch.cuda.synchronize()
                err = rel_err(o[sl], ref)
                nan = int((~torch.isfinite(o)).sum())
                ms = bench(lambda: kern(q, k, v, o)) if err < 1e-2 and nan == 0 else float("nan")
                print(f"ours attention causal={causal} cfg={cfg}: err {err:.2e}, non-finite {nan}, {ms:.3f} ms",
                      flush=True)
                row.setdefault("ours_configs", []).append({"cfg": list(cfg), "err": err, "nan": nan, "ms": ms})
                if ms == ms and ("ours_ms" not in row or ms < row["ours_ms"]):
                    row.update(ours_ms=ms, ours_err=err, ours_cfg=list(cfg))
            except Exception as e:  # noqa: BLE001
                row.setdefault("ours_errors", []).append(f"{cfg}: {str(e)[:400]}")
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    row[name + "_err"] = rel_err(out[sl], ref)
                    row[name + "_ms"] = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            except Exception as e:  # noqa: BLE001
                row[name + "_error"] = str(e)[:300]
        for key in ("ours", "flash", "cudnn"):
            if key + "_ms" in row:
                row[key + "_tflops"] = flops / row[key + "_ms"] / 1e9
        print(json.dumps(row), flush=True)
        results.append(row)


FIRST_LAUNCH = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, tilelang_runtime as trt
# Inputs made on the CPU and copied (no torch kernels: under CUDA_FORCE_PTX_JIT=1 torch's own
# kernels, shipped without PTX, cannot load).
a_h = torch.randn(4096, 4096, dtype=torch.float16)
b_h = torch.randn(4096, 4096, dtype=torch.float16)
a, b = a_h.cuda(), b_h.cuda()
c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t1 = time.perf_counter()
rt = trt.Runtime(backends=["cuda"])
t2 = time.perf_counter()
bundle = rt.open_bundle(sys.argv[1])
names = bundle.kernels
names = names() if callable(names) else names
kern = bundle.kernel(names[0])
t3 = time.perf_counter()
p = kern.prepare(rt.device("cuda:0"))
t4 = time.perf_counter()
p(a, b, c)
t5 = time.perf_counter()
ref = a_h[:64].float() @ b_h.float()  # 64 rows checked on the CPU
err = float((c[:64].cpu().float() - ref).norm() / ref.norm())
print(json.dumps({"runtime_create_ms": (t2 - t1) * 1e3, "open_ms": (t3 - t2) * 1e3, "prepare_ms": (t4 - t3) * 1e3,
                  "first_launch_ms": (t5 - t4) * 1e3, "open_to_first_result_ms": (t5 - t2) * 1e3,
                  "variant": p.variant["id"], "jit": p.variant["jit"], "err": err,
                  "explain_tail": p.explain().strip().splitlines()[-3:]}))
"""


def run_first_launch(kernels, results):
    k = kernels[("gemm", "float16", 4096, GEMM_CONFIGS[0])]
    for mode, extra in (("cubin", {}), ("ptx (TL_FORCE_VARIANT=cuda.compute_80)", {"TL_FORCE_VARIANT": "cuda.compute_80"}),
                        ("CUDA_FORCE_PTX_JIT=1", {"CUDA_FORCE_PTX_JIT": "1"})):
        env = dict(os.environ, CUDA_CACHE_DISABLE="1", **extra)
        proc = subprocess.run([sys.executable, "-c", FIRST_LAUNCH, k.bundle_path], env=env, capture_output=True,
                              text=True, timeout=120)
        row = {"kind": "first_launch", "mode": mode}
        try:
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        except Exception:  # noqa: BLE001
            row["error"] = (proc.stderr or proc.stdout)[-600:]
        print(json.dumps(row), flush=True)
        results.append(row)


def run_c_example(kernels, results):
    """The C deployment example (examples/c) on a CUDA bundle, when gpu_check.sh staged it."""
    exe = os.environ.get("TL_C_EXAMPLE")
    if not exe:
        return
    k = kernels["c_example"]
    proc = subprocess.run([exe, k.bundle_path, "gemm", "cuda"], capture_output=True, text=True, timeout=120)
    print(proc.stdout[-2000:], proc.stderr[-1000:], flush=True)
    results.append({"kind": "c_example", "rc": proc.returncode, "tail": proc.stdout.strip().splitlines()[-1:]})


def table(results):
    lines = []
    for r in results:
        if r["kind"] == "gemm":
            def f(key):
                return f"{r[key + '_tflops']:.1f}" if key + "_tflops" in r else "-"
            ratio = lambda x: BC.ratio(r.get("ours_tflops"), r.get(x + "_tflops"))  # noqa: E731
            lines.append(f"| GEMM {r['dtype']} {r['n']}^3 | {f('ours')} | {f('torch')} (cuBLAS) | {f('triton')} "
                         f"(Triton) | {ratio('torch')} | {ratio('triton')} | cfg {r.get('ours_cfg')} "
                         f"err {r.get('ours_err', float('nan')):.1e} |")
        elif r["kind"] == "attention":
            def f(key):
                return f"{r[key + '_tflops']:.1f}" if key + "_tflops" in r else "-"
            ratio = lambda x: BC.ratio(r.get("ours_tflops"), r.get(x + "_tflops"))  # noqa: E731
            lines.append(f"| FA fwd causal={r['causal']} | {f('ours')} | {f('flash')} (SDPA flash) | {f('cudnn')} "
                         f"(SDPA cuDNN) | {ratio('flash')} | {ratio('cudnn')} | cfg {r.get('ours_cfg')} "
                         f"err {r.get('ours_err', float('nan')):.1e} |")
        elif r["kind"] == "first_launch":
            if "error" in r:
                lines.append(f"| first launch {r['mode']} | error: {r['error'][-200:]!r} |")
            else:
                lines.append(f"| first launch {r['mode']} | runtime {r['runtime_create_ms']:.1f} ms | open "
                             f"{r['open_ms']:.2f} ms | prepare {r['prepare_ms']:.1f} ms | first launch "
                             f"{r['first_launch_ms']:.1f} ms | variant {r['variant']} | err {r['err']:.1e} |")
        elif r["kind"] == "c_example":
            lines.append(f"| C example on CUDA | rc={r['rc']} | {r['tail']} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precompile", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    kernels = compile_all(args.quick)
    if args.precompile:
        return 0
    import torch
    results = [BC.machine_row(gpu=torch.cuda.get_device_name(0), torch=torch.__version__)]
    try:
        import triton
        results[0]["triton"] = triton.__version__
    except ImportError:
        pass
    print(json.dumps(results[0]), flush=True)
    BC.run_steps((lambda: run_c_example(kernels, results), lambda: run_first_launch(kernels, results),
                  lambda: run_gemms(kernels, args.quick, results), lambda: run_attention(kernels, results)),
                 results, args.json)
    BC.print_table("benchmark table", table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
