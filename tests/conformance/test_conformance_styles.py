"""Conformance: both authoring styles end to end, one kernel for many dynamic sizes,
and the compiled kernel's artefacts (generated source, exported bundle)."""

import numpy as np

import tilelang
import tlc_kernels_gemm as G
import tlc_kernels_styles as S
import tlc_util
from tlc_util import assert_close, random


def test_jit_factory_compiles_once_per_argument_tuple(target, rng):
    S.scaled_copy.target = target  # the cache is per (target, arguments)
    k1 = S.scaled_copy(100, 32, 2.0)
    assert S.scaled_copy(100, 32, 2.0) is k1
    x, x64 = random(rng, (100,), "float32")
    assert_close(k1(x), 2 * x64)
    assert_close(S.scaled_copy(100, 32, 0.5)(x), 0.5 * x64)


def test_eager_style_binds_sizes_from_arguments(target, rng):
    S.eager_add.target = target
    for shape in [(50, 70), (33, 16)]:
        a, a64 = random(rng, shape, "float32")
        b, b64 = random(rng, shape, "float32")
        assert_close(S.eager_add(a, b, 32, 32), a64 + b64)


def test_artifacts(target, tmp_path):
    kernel = tlc_util.compile(G.matmul(100, 72, 80, 64, 64, 32), out_idx=[2], target=target)
    src = kernel.get_kernel_source()
    assert isinstance(src, str) and len(src) > 100
    path = kernel.export_bundle(str(tmp_path / "gemm.tlb"))
    import tilelang_runtime
    bundle = tilelang_runtime.Runtime().open_bundle(path)
    # A CUDA or HIP kernel cannot be called `main`: the frontend names it `main_kernel`, as upstream does.
    assert kernel.kernel_name == ("main_kernel" if target in ("cuda", "hip") else "main")
    assert kernel.kernel_name in bundle.kernels
    ir = kernel.get_tile_ir()
    assert ir.startswith("tileir 1\n")
    assert tilelang.emit(kernel.prim_func).replace("func @main(", f"func @{kernel.kernel_name}(") == ir
