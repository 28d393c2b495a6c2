"""Errors in tile programs name the user's file and line, as TileLangError subclasses."""

import pytest

import fe_util
import tilelang
import tilelang.language as T
from tilelang.errors import display_path

THIS = display_path(__file__)


def expect_error(build, marker, message):
    with pytest.raises(tilelang.TileLangError) as info:
        build()
    line = fe_util.marker_line(__file__, marker)
    assert str(info.value) == f"{THIS}:{line}: {message}"
    assert isinstance(info.value, tilelang.TileLangSyntaxError)
    assert (info.value.file, info.value.line) == (THIS, line)


def copy_mismatch():
    @T.prim_func
    def main(A: T.Tensor((128, 128), "float16")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((64, 16), "float16")
            T.copy(A[0:64, 0:32], s)  # MARK-copy
    return main


def test_copy_shape_mismatch():
    expect_error(copy_mismatch, "# MARK-copy",
                 "T.copy: source shape (64, 32) does not match destination (64, 16)")


def gemm_k_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((16, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.gemm(a, b, c)  # MARK-gemm
    return main


def test_gemm_k_mismatch():
    expect_error(gemm_k_mismatch, "# MARK-gemm",
                 "T.gemm: K of A (32, shape (64, 32)) does not match K of B (16, shape (16, 64))")


def gemm_wg_wait(wg_wait, wait):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            b = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.gemm(a, b, c, wg_wait=wg_wait)  # MARK-wgwait
            T.wait_wgmma(wait)  # MARK-waitwgmma
    return main


def test_gemm_wg_wait_values():
    # -1: the wgmma group stays in flight until T.wait_wgmma (Tile IR `wg_wait=-1`, `hint wait_wgmma N`).
    text = gemm_wg_wait(-1, 1).script()
    assert "gemm a, b -> c wg_wait=-1" in text and "hint wait_wgmma 1" in text, text
    assert "wg_wait" not in gemm_wg_wait(0, 0).script()
    expect_error(lambda: gemm_wg_wait(8, 0), "# MARK-wgwait",
                 "T.gemm: wg_wait must be -1 (leave the wgmma group in flight) or 0..7, got 8")
    expect_error(lambda: gemm_wg_wait(-2, 0), "# MARK-wgwait",
                 "T.gemm: wg_wait must be -1 (leave the wgmma group in flight) or 0..7, got -2")
    expect_error(lambda: gemm_wg_wait(-1, -1), "# MARK-waitwgmma",
                 "T.wait_wgmma: the number of groups left in flight must be 0..7, got -1")


def pingpong_hint(inside):
    if not inside:
        T.warpgroup_pingpong()  # MARK-pingpong

    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256) as bx:
            T.warpgroup_pingpong()
            a = T.alloc_shared((64, 64), "float16")
            T.copy(A, a)
    return main


def test_warpgroup_pingpong_hint():
    # T.warpgroup_pingpong(): Tile IR `hint warpgroup_pingpong` (no arguments); only inside a kernel.
    assert "    hint warpgroup_pingpong" in pingpong_hint(True).script()
    with pytest.raises(tilelang.TileLangError, match="only valid inside a T.prim_func"):
        pingpong_hint(False)


def gemm_c_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((32, 64), "float16")
            b = T.alloc_shared((32, 48), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.gemm(a, b, c, transpose_A=True)  # MARK-gemmc
    return main


def test_gemm_c_mismatch():
    expect_error(gemm_c_mismatch, "# MARK-gemmc",
                 "T.gemm: C has shape (64, 64) but op(A)·op(B) has shape (64, 48)")


def reduce_mismatch():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((64, 32), "float32")
            r = T.alloc_fragment((32,), "float32")
            T.reduce_sum(x, r, dim=1)  # MARK-reduce
    return main


def test_reduce_shape_mismatch():
    expect_error(reduce_mismatch, "# MARK-reduce",
                 "T.reduce_sum: destination shape (32,) does not match source (64, 32) reduced along dim 1 "
                 "(expected (64,))")


def outside_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        A[0] = 1.0  # MARK-outside
    return main


def test_statement_outside_kernel():
    expect_error(outside_kernel, "# MARK-outside", "a store must be inside a T.Kernel")


def device_bool():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            while A[bx] > 0:  # MARK-while
                A[bx] = 0.0
    return main


def test_while_on_device_value():
    expect_error(device_bool, "# MARK-while",
                 "`while` on a device value is not supported; use T.serial with an `if`")


def python_builtin_on_device():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            A[bx] = max(A[bx], A[bx + 1])  # MARK-builtin
    return main


def test_python_bool_of_device_value():
    expect_error(python_builtin_on_device, "# MARK-builtin",
                 "a device value cannot be used as a Python bool here; use `if` on it inside the kernel, "
                 "or T.if_then_else")


def parallel_dynamic_extent():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):  # MARK-parallel
                A[i] = 0.0
    return main


def test_parallel_extent_must_be_constant():
    expect_error(parallel_dynamic_extent, "# MARK-parallel", "T.Parallel: extents must be integer constants, got n")


def slice_not_constant():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), m: T.int32):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((8, 8), "float32")
            T.copy(A[0:m, 0:8], s)  # MARK-slice
    return main


def test_slice_extent_must_be_constant():
    expect_error(slice_not_constant, "# MARK-slice",
                 "A: the extent of slice dimension 0 is not a constant (m - 0)")


def index_out_of_range():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            A[64] = 0.0  # MARK-index
    return main


def test_constant_index_out_of_range():
    expect_error(index_out_of_range, "# MARK-index", "A: index 64 out of range for dimension 0 of extent 64")


def alloc_outside():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        s = T.alloc_shared((8,), "float32")  # MARK-alloc
    return main


def test_alloc_outside_kernel():
    expect_error(alloc_outside, "# MARK-alloc", "T.alloc_shared must be inside a T.Kernel")


def unknown_dtype():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((8,), "float7")  # MARK-dtype
    return main


def test_unknown_dtype():
    expect_error(unknown_dtype, "# MARK-dtype", "unknown dtype 'float7'")


def literal_out_of_range():
    @T.prim_func
    def main(A: T.Tensor((64,), "int8")):
        with T.Kernel(1) as bx:
            A[bx] = A[bx] + 300  # MARK-literal
    return main


def test_literal_out_of_range():
    expect_error(literal_out_of_range, "# MARK-literal", "constant 300 does not fit in int8")


def missing_annotation():
    @T.prim_func
    def main(A):  # MARK-annotation
        with T.Kernel(1) as bx:
            pass
    return main


def test_missing_parameter_annotation():
    expect_error(missing_annotation, "# MARK-annotation",
                 "parameter A needs an annotation: T.Tensor((...), dtype) or a scalar dtype such as T.int32")


@T.macro
def bad_macro(buf):
    T.fill(buf[0:4, 0:9], 0)  # MARK-macro


def error_in_macro():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((4, 8), "float32")
            bad_macro(s)
    return main


def test_error_inside_macro_points_into_the_macro():
    expect_error(error_in_macro, "# MARK-macro", "s: slice 0:9 out of range for dimension 1 of extent 8")


def test_errors_are_tilelang_errors():
    assert issubclass(tilelang.TileLangSyntaxError, tilelang.TileLangError)
    assert issubclass(tilelang.TileLangNotImplementedError, NotImplementedError)
