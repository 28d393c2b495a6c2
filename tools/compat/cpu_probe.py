#!/usr/bin/env python3
"""Compile upstream TileLang examples' kernels for the CPU through this project, without torch.

    PYTHONPATH=build/python tools/compat/cpu_probe.py /path/to/tilelang-checkout [--run] [--only gemm,norm]

The example tests need torch for their inputs and references, which a CPU-only
machine may not have. This probe imports each example module (with a
placeholder `torch` module when torch is missing, so that module-level
`import torch` succeeds; nothing of it is called), builds the kernel the test
would build (same factory, same tile arguments; the sizes the test uses) and
compiles it with tilelang.compile(target="cpu"). With --run it also launches
each kernel once on random numpy inputs (no reference: that is the test's job).
It prints one line per kernel (ok / FAIL with the reason) and a markdown table
with --out. Frontend, Tile IR and CPU codegen gaps show up here first.
"""

import argparse
import importlib
import os
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# flash_attn / fla references (reference_shims/README.md), last as in compat_plugin: the examples
# that import them at module level (linear_attention) then import, and their kernels are built.
sys.path.append(os.path.join(HERE, "reference_shims"))
from compat_reason import reason_of  # noqa: E402


class _Anything:
    """Stands in for any torch attribute at import time; calling it is an error."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        return _Anything(f"{self._name}.{name}")

    def __call__(self, *a, **k):
        raise RuntimeError(f"{self._name}(): torch is not installed (placeholder module of cpu_probe)")

    def __mro_entries__(self, bases):
        return (object,)


def install_torch_placeholder():
    try:
        import torch  # noqa: F401
        return False
    except ImportError:
        pass
    for name in ("torch", "torch.nn", "torch.nn.functional", "torch.testing", "torch.utils", "torch.autograd",
                 "torch.backends",
                 "triton", "triton.language", "einops", "bert_padding", "varlen_utils"):
        mod = types.ModuleType(name)
        mod.__getattr__ = (lambda n, _p=name: _Anything(f"{_p}.{n}"))
        mod.__tl_placeholder__ = True  # tilelang.utils.tensor.torch_or_none: no torch
        sys.modules[name] = mod
    return True


# (directory, module, test name, builder(mod, T) -> prim_func or compiled kernel[, "compile"]).
# Sizes and tile arguments are those of the upstream test (or main()'s defaults). "compile": not
# launched by --run (tensors of offsets such as cu_seqlens would be random numbers).
def _eager(fn, **kw):
    return fn.get_tir(**kw)


SPECS = [
    ("elementwise", "example_elementwise_add", "elementwise_add",
     lambda m, T: _eager(m.elementwise_add, M=1024, N=1024, block_M=32, block_N=32, threads=128,
                         in_dtype=T.float32, out_dtype=T.float32)),
    ("gemm", "example_gemm", "matmul",
     lambda m, T: _eager(m.matmul, M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32)),
    ("gemm", "example_gemm_intrinsics", "tl_matmul (TensorCoreIntrinEmitter)",
     lambda m, T: _eager(m.tl_matmul, M=1024, N=1024, K=1024, in_dtype=T.float16, out_dtype=T.float16,
                         accum_dtype=T.float32)),
    ("gemm_splitk", "example_tilelang_gemm_splitk", "matmul splitk",
     lambda m, T: _eager(m.matmul, M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, split_k=4)),
    ("gemm_splitk", "example_tilelang_gemm_splitk_vectorize_atomicadd", "matmul splitk atomicadd",
     lambda m, T: _eager(m.matmul, M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=32, split_k=4)),
    ("dynamic_shape", "example_dynamic", "matmul_dynamic_mnk",
     lambda m, T: _eager(m.matmul_dynamic_mnk, block_M=128, block_N=128, block_K=32, trans_A=False, trans_B=False,
                         in_dtype="float16", out_dtype="float16", accum_dtype="float32", num_stages=3, threads=128)),
    ("norm", "rms_norm", "rms_norm",
     lambda m, T: _eager(m.rms_norm, M=1024, N=1024, blk_m=1)),
    ("norm", "rms_norm", "rms_norm_splitk",
     lambda m, T: _eager(m.rms_norm_splitk, M=1024, N=1024, blk_m=1, blk_k=512)),
    ("norm", "layernorm", "layernorm fwd",
     lambda m, T: m._layernorm_fwd(1024, 1024) if not hasattr(m._layernorm_fwd, "get_tir")
     else m._layernorm_fwd.get_tir(1024, 1024)),
    ("online_softmax", "online_softmax", "softmax_kernel",
     lambda m, T: _eager(m.softmax_kernel, M=8192, N=8192)),
    ("cast", "example_per_token_cast_to_fp8", "per_token_cast_to_fp8",
     lambda m, T: _eager(m.per_token_cast_to_fp8, M=2048, N=512, blk_m=8)),
    ("cast", "example_group_per_split_token_cast_to_fp8", "group_per_split_token_cast_to_fp8",
     lambda m, T: _eager(m.group_per_split_token_cast_to_fp8, M=1024, N=1024, BG=2, batch_sizes=[128, 896],
                         M_max=896, blk_m=4)),
    ("flash_attention", "example_mha_fwd_bshd", "mha fwd bshd",
     lambda m, T: m.flashattn.fn.get_tir(1, 32, 256, 128, False, block_M=128, block_N=128, num_stages=1,
                                          threads=128)),
    ("flash_attention", "example_mha_fwd_bhsd", "mha fwd bhsd",
     lambda m, T: m.flashattn.fn.get_tir(1, 1, 256, 256, 64, False, block_M=64, block_N=64, num_stages=1,
                                          threads=128)),
    ("flash_attention", "example_gqa_fwd_bshd", "gqa fwd bshd",
     lambda m, T: m.flashattn.fn.get_tir(1, 16, 1024, 128, False, groups=16, block_M=64, block_N=64,
                                          num_stages=2, threads=128)),
    ("flash_attention", "example_mha_fwd_varlen", "mha fwd varlen",
     lambda m, T: (m.flashattn.fn if hasattr(m.flashattn, "fn") else m.flashattn).get_tir(
         4, 4 * 512, 4 * 512, 16, 64, False, block_M=64, block_N=64, num_stages=1, threads=128)),
    ("flash_attention", "example_gqa_fwd_varlen", "gqa fwd varlen",
     lambda m, T: (m.flashattn.fn if hasattr(m.flashattn, "fn") else m.flashattn).get_tir(
         4, 16, 4 * 512, 4 * 512, 16, 64, False, block_M=128, block_N=128, num_stages=2, threads=256)),
    ("flash_decoding", "example_mha_inference", "mha inference",
     lambda m, T: m.flashattn.get_tir(1, 32, 128, 2048, 128, False, 128, 64)
     if hasattr(m.flashattn, "get_tir") else m.flashattn(1, 32, 128, 2048, 128, False, 128, 64)),
    ("topk", "example_topk", "tl_topk",
     lambda m, T: _eager(m.tl_topk, M=320, N=128, topk=6, blk_m=64)),
    ("convolution", "example_convolution", "convolution",
     lambda m, T: _eager(m.convolution, N=128, C=128, H=64, W=64, F=128, K=3, S=1, D=1, P=1, block_M=64,
                         block_N=128, block_K=32, num_stages=3, threads=256)),
    ("linear_attention", "example_linear_attn_fwd", "fused_chunk_linear_attn_fwd",
     lambda m, T: m.tl_fused_chunk_fwd_kernel.get_tir(1, 512, 16, 128, 128)),
    ("linear_attention", "example_linear_attn_bwd", "fused_chunk_linear_attn_bwd",
     lambda m, T: m.tl_fused_chunk_bwd_kernel.get_tir(1, 1024, 16, 128, 128)),
    ("dequantize_gemm", "example_dequant_gemm_fp4_hopper", "dequant gemm fp4 (hopper)",
     lambda m, T: m.matmul.get_tir(256, 256, 256, T.float16, T.float16, T.float32, num_bits=4, block_M=128,
                                   block_N=128, block_K=128, num_stages=2, threads=256, split=1)),
    ("dequantize_gemm", "example_dequant_gemm_w4a8", "dequant gemm w4a8",
     lambda m, T: m.matmul_int8xint4.get_tir(128, 256, 256, T.int8, T.int32, T.int32, num_bits=4, block_M=32,
                                             block_N=32, block_K=128, num_stages=1, threads=128)),
    ("dequantize_gemm", "example_dequant_gemm_bf16_mxfp4_hopper", "dequant gemm bf16 mxfp4 (hopper)",
     lambda m, T: m.matmul.get_tir(256, 256, 256, T.bfloat16, T.bfloat16, T.float32, num_bits=4, scale_size=32,
                                   block_M=256, block_N=128, block_K=128, num_stages=2, threads=256, split=1,
                                   fast_dequant=True, with_bias=False)),
    ("flash_decoding", "example_gqa_decode_varlen_logits", "gqa decode varlen logits",
     lambda m, T: m.flashattn.get_tir(1, 32, 8, 8192, 6000, 128, True), "compile"),
    ("topk", "example_topk", "tl_topk (eager call, sizes from the array)",
     lambda m, T: m.tl_topk.compile(__import__("numpy").random.default_rng(0).random((320, 128), "float32"), 6,
                                    blk_m=64, threads=128)),
    ("dequantize_gemm", "example_dequant_gemv_fp16xint4", "dequantize_gemv",
     lambda m, T: m.dequantize_gemv.get_tir(1, 1024, 1024, T.float16, T.float16, T.float16, 4, T.int8, "uint", 4,
                                            32, True, False, True, -1, False)),
    # The same kernel with fast_decoding=False: the thread-level TIR without T.import_source / T.call_extern.
    ("dequantize_gemm", "example_dequant_gemv_fp16xint4", "dequantize_gemv (fast_decoding=False)",
     lambda m, T: m.dequantize_gemv.get_tir(1, 1024, 1024, T.float16, T.float16, T.float16, 4, T.int8, "uint", 4,
                                            32, False, False, True, -1, False)),
]


def run_once(kernel, symbol_size=256):
    """One launch on random numpy inputs (dynamic dimensions: symbol_size)."""
    from tilelang import expr as E
    from tilelang.buffer import Buffer
    from tilelang.utils.tensor import TensorSupplyType, get_tensor_supply
    supply = get_tensor_supply(TensorSupplyType.Auto, None)
    ins = []
    for i, p in enumerate(kernel.params):
        if i in kernel.out_idx:
            continue
        if not isinstance(p, Buffer):
            raise RuntimeError(f"scalar parameter {p.name}: the probe passes tensors only")
        ins.append(supply(p, [E.const_int(d) if E.const_int(d) is not None else symbol_size for d in p.shape]))
    return kernel(*ins)


def probe_test_functions(path, target):
    """Call each test_* function of an upstream test file with tilelang.compile watched: a test that
    compiled its kernels and then stopped at torch counts as compiled. Rows: (file, test, result, reason)."""
    import tilelang
    from tilelang import compiler
    rows = []
    d = os.path.dirname(path)
    if d not in sys.path:
        sys.path.insert(0, d)
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        mod = importlib.import_module(name)
    except Exception as e:  # noqa: BLE001
        return [(name, "(import)", "FAIL", f"import: {reason_of(e, str(e))}")]
    real = compiler.compile
    for fname in sorted(n for n in dir(mod) if n.startswith("test_") and callable(getattr(mod, n))):
        compiled = []

        def watched(func, *a, **k):
            k["target"] = target
            kernel = real(func, *a, **k)
            compiled.append(kernel)
            return kernel
        compiler.compile = tilelang.compile = watched
        try:
            getattr(mod, fname)()
            rows.append((name, fname, "ok", f"ran ({len(compiled)} kernels)"))
        except Exception as e:  # noqa: BLE001
            if "placeholder module of cpu_probe" in str(e) and compiled:
                rows.append((name, fname, "ok", f"compiled {len(compiled)} kernels (stopped at torch)"))
            else:
                rows.append((name, fname, "FAIL", reason_of(e, str(e))))
        finally:
            compiler.compile = tilelang.compile = real
    return rows


def build(spec, upstream):
    d, modname, _, builder = spec[:4]
    path = os.path.join(upstream, "examples", d)
    if path not in sys.path:
        sys.path.insert(0, path)
    import tilelang.language as T
    try:
        mod = importlib.import_module(modname)
    except RuntimeError as e:
        if "placeholder module of cpu_probe" not in str(e):
            raise
        mod = definitions_only(modname, os.path.join(path, modname + ".py"))
    return builder(mod, T)


def definitions_only(modname, path):
    """The module without its module-level statements (a script that runs torch code at import):
    imports, function and class definitions, and assignments of literals only."""
    import ast
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    tree.body = [n for n in tree.body if isinstance(n, keep)
                 or (isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant))]
    mod = types.ModuleType(modname)
    mod.__file__ = path
    sys.modules[modname] = mod
    exec(compile(tree, path, "exec"), mod.__dict__)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("upstream")
    ap.add_argument("--only", default=None, help="directories (comma list)")
    ap.add_argument("--run", action="store_true", help="also launch each kernel once on random numpy inputs")
    ap.add_argument("--out", default=None, help="markdown table here")
    ap.add_argument("--target", default="cpu", help="compile target (cuda: fill a compile cache, no --run)")
    ap.add_argument("-v", action="store_true", help="print tracebacks")
    ap.add_argument("--tests", action="store_true",
                    help="also call testing/python/kernel's GEMM test functions with tilelang.compile watched")
    args = ap.parse_args(argv)
    placeholder = install_torch_placeholder()
    import tilelang
    rows = []
    only = set(args.only.split(",")) if args.only else None
    for spec in SPECS:
        if only and spec[0] not in only:
            continue
        stage = "import/trace"
        try:
            prim = build(spec, os.path.abspath(args.upstream))
            stage = "compile"
            kernel = prim if hasattr(prim, "get_profiler") else tilelang.compile(prim, target=args.target)
            if args.target != "cpu":  # CUDA: the source too, so that tl-pack's cache holds what it needs
                stage = "source"
                kernel.get_kernel_source()
            note = ""
            if args.run:
                stage = "run"
                scalars = [p.name for p in kernel.params if not hasattr(p, "shape")]
                if scalars:  # lengths and offsets (varlen): random values would index out of bounds
                    note = f"compiled; not run (scalar parameters {', '.join(scalars)})"
                elif spec[4:] == ("compile",):
                    note = "compiled; not run (offset tensors)"
                else:
                    run_once(kernel)
            rows.append((spec[0], spec[2], "ok", note))
        except Exception as e:  # noqa: BLE001 - each kernel's failure is a row
            if args.v:
                traceback.print_exc()
            rows.append((spec[0], spec[2], "FAIL", f"{stage}: {reason_of(e, str(e))}"))
        print(f"{rows[-1][2]:4} {spec[0]:16} {spec[2]:36} {rows[-1][3]}", flush=True)
    if args.tests:
        import glob
        pattern = os.path.join(os.path.abspath(args.upstream), "testing", "python", "kernel",
                               "test_tilelang_kernel_*gemm*.py")
        for path in sorted(glob.glob(pattern)):
            for r in probe_test_functions(path, args.target):
                rows.append(("testing/python/kernel", f"{r[0]}::{r[1]}", r[2], r[3]))
                print(f"{r[2]:4} {r[0]}::{r[1]:40} {r[3]}", flush=True)
    ok = sum(r[2] == "ok" for r in rows)
    print(f"{ok}/{len(rows)} kernels compiled{' and ran' if args.run else ''} for {args.target}"
          f"{' (torch placeholder)' if placeholder else ''}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("| directory | kernel | result | reason |\n| --- | --- | --- | --- |\n")
            for r in rows:
                f.write(f"| {r[0]} | {r[1]} | {r[2]} | {r[3].replace('|', '/')} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
