"""Value names that are C++ keywords (`do`, `new`, `int`, ...) are valid Python names; the CUDA, HIP and
CPU backends print names as C++ identifiers, so the frontend renames them (`do_`), as it renames Tile IR
words. Upstream's linear attention backward names its shared dO tile `do`: before, nvrtc failed with
"expected an identifier" at `unsigned short* do = ...`."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T


def keyword_names(M=64, N=32):
    @T.prim_func
    def main(new: T.Tensor((M, N), "float16"), int: T.Tensor((M, N), "float32")):  # noqa: A002 - the point
        with T.Kernel(1, threads=128):
            do = T.alloc_shared((M, N), "float16")
            this = T.alloc_fragment((M, N), "float32")
            tl = T.alloc_shared((M, N), "float32")  # the CUDA prelude's namespace
            T.copy(new, do)
            for i, j in T.Parallel(M, N):
                this[i, j] = do[i, j] * 2.0 + 1.0
            T.copy(this, tl)
            T.copy(tl, int)

    return main


def test_cxx_keywords_are_renamed_in_tile_ir():
    text = keyword_names().script()
    for name in ("new", "int", "do", "this", "tl"):
        assert f"{name}_" in text, text
    for bad in ("alloc do:", "alloc this:", "alloc tl:", "(new:", " int:"):
        assert bad not in text, text


def test_renamed_kernel_runs_on_cpu():
    kernel = tilelang.compile(keyword_names(), out_idx=[1], target="cpu")
    x = (np.random.default_rng(0).standard_normal((64, 32))).astype(np.float16)
    np.testing.assert_allclose(np.asarray(kernel(x)), x.astype(np.float32) * 2 + 1, rtol=1e-6)


def test_renamed_kernel_compiles_for_cuda():
    from test_frontend_cuda import _cuda_toolkit_missing
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(f"CUDA compile path: {reason}")
    kernel = tilelang.compile(keyword_names(), out_idx=[1], target="sm_90a")
    assert "do_" in kernel.get_kernel_source()
