"""T.macro inlining, T.dynamic symbols, naming, and trace-time Python evaluation."""

import re

import pytest

import tilelang
import tilelang.language as T


def body(func):
    """The function's statements without locations."""
    return [re.sub(r' loc\("[^"]*", \d+\)', "", l) for l in func.script().splitlines()[2:]]


@T.macro
def relu_inplace(buf, n):
    for i in T.Parallel(n):
        if buf[i] < 0:
            buf[i] = 0


@T.macro
def square(x):
    return x * x


@T.macro
def twice(buf, n):
    relu_inplace(buf, n)
    relu_inplace(buf, n)


def test_macros_are_inlined_with_device_control_flow():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((16,), "float32")
            T.copy(A, f)
            twice(f, 16)
            A[0] = square(f[1]) + square(2.0)
    lines = body(main)
    assert lines.count("    parallel (i) in (16) {") == 1
    assert lines.count("    parallel (i_1) in (16) {") == 1
    assert "      if f[i] < 0.0:f32 {" in lines
    assert "    A[0] = f[1] * f[1] + 4.0:f32" in lines


def test_macro_outside_prim_func_is_an_error():
    with pytest.raises(tilelang.TileLangError, match="only be called inside a T.prim_func"):
        square(3)


def test_dynamic_symbols():
    M, N = T.dynamic("M, N")
    K = T.symbolic("K", "int64")

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 32), T.ceildiv(M, 32)) as (bx, by):
            for k in T.serial(T.ceildiv(K, 8)):
                if by * 32 < M:
                    C[by * 32, bx * 32] = A[by * 32, k] * B[k, bx * 32]
    lines = body(main)
    assert lines[0].endswith("dynamic(M: i32, K: i64, N: i32) {")  # in order of first use
    assert "  kernel grid(ceildiv(N, 32), ceildiv(M, 32)) threads(128) -> (bx, by) {" in lines
    assert "    for k in serial(0:i64, ceildiv(K, 8:i64)) {" in lines


def test_symbols_with_one_name_must_be_one_symbol():
    a, b = T.dynamic("M"), T.dynamic("M")
    with pytest.raises(tilelang.TileLangError, match="two different T.dynamic symbols are named M"):
        @T.prim_func
        def main(A: T.Tensor((a,), "float32"), B: T.Tensor((b,), "float32")):
            with T.Kernel(1) as bx:
                pass


def test_shadowed_names_are_made_unique():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32"), i: T.int32):
        with T.Kernel(2, 2) as (bx, by):
            for i_ in T.serial(2):
                x = A[i_, 0] + 1
                x = x * 2
            for bx2 in T.Parallel(8):
                copy = A[bx2, i]
                A[bx2, 0] = copy
    lines = body(main)
    assert "      let x = A[i_, 0] + 1.0:f32" in lines
    assert "      let x_1 = x * 2.0:f32" in lines
    assert "      let copy_ = A[bx2, i]" in lines  # `copy` is a Tile IR keyword


def test_alloc_var_assignment_stores_and_reads_bind():
    @T.prim_func
    def main(A: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            v = T.alloc_var("int32", 3)
            v = v + 1
            v += A[0]
            snapshot = v + 0
            v[0] = 9
            A[1] = snapshot
    lines = body(main)
    assert lines[2:9] == ["    var v: i32 = 3", "    v = v + 1", "    v = v + A[0]", "    let snapshot = v",
                          "    v = 9", "    A[1] = snapshot", "  }"]


def test_python_values_are_evaluated_at_trace_time():
    weights = [0.5, 0.25]
    use_bias = False

    def helper(n):  # a plain Python closure
        return n * 2

    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for w in weights:  # a Python list: unrolled at trace time
                A[helper(1)] = A[0] * w + (1.0 if use_bias else 0.0)
    lines = body(main)
    assert lines[2:4] == ["    A[2] = A[0] * 0.5:f32", "    A[2] = A[0] * 0.25:f32"]  # `+ 0.0` folded


def test_multiple_kernels_run_in_order_and_other_top_level_statements_fail():
    @T.prim_func
    def two(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.fill(A, 1)
        with T.Kernel(1) as bx:
            T.fill(A, 2)
    assert [l for l in body(two) if "kernel" in l] == ["  kernel grid(1) threads(128) -> (bx) {",
                                                       "  kernel grid(1) threads(128) -> (bx_1) {"]
    with pytest.raises(tilelang.TileLangError, match="must be inside a T.Kernel"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            T.fill(A, 1)


def test_kernel_grid_and_threads_forms():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(2, 3, 4, threads=[32, 4]) as (x, y, z):
            A[0] = T.cast(x + y + z, "float32")
    assert "  kernel grid(2, 3, 4) threads(32, 4) -> (x, y, z) {" in body(main)
    with pytest.raises(tilelang.TileLangError, match="1 to 3 grid extents"):
        T.Kernel(1, 2, 3, 4)


def test_tensor_annotation_forms_and_dtype_objects():
    @T.prim_func
    def main(A: T.Tensor[(4, 4), T.bfloat16], B: T.Buffer((16,), "uint8"), C: T.Tensor(8, T.float64),
             s: T.uint64, b: T.bool):
        with T.Kernel(1) as bx:
            pass
    assert body(main)[0].startswith(
        "func @main(A: tensor[4, 4] bf16, B: tensor[16] u8, C: tensor[8] f64, s: u64, b: bool)")
    assert T.float16 == "float16" and T.float16.ir == "f16" and T.int8.bits == 8


def test_break_in_device_loop_is_an_error_and_allowed_in_python_loops():
    with pytest.raises(tilelang.TileLangError, match="`break` in a T.serial/T.Parallel/T.Pipelined loop"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(8):
                    if i > 2:
                        break
                    A[i] = 0

    with pytest.raises(tilelang.TileLangError, match="`continue` under a device `if`"):
        @T.prim_func
        def bad2(A: T.Tensor((8,), "float32")):
            with T.Kernel(1) as bx:
                for c in [1, 2]:
                    if A[0] > c:
                        continue

    @T.prim_func
    def ok(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            for c in [1, 2, 3]:
                if c == 3:
                    break
                A[c] = c
    assert [l for l in body(ok) if l.startswith("    A[")] == ["    A[1] = 1.0:f32", "    A[2] = 2.0:f32"]


def test_annotated_assignment_converts():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            idx: T.int32 = A[0] * 2
            A[idx] = 1
    assert "    let idx = cast<i32>(A[0] * 2.0:f32)" in body(main)


def test_parameters_named_like_keywords_are_renamed():
    @T.prim_func
    def main(kernel: T.Tensor((8,), "float32"), copy: T.int32):
        with T.Kernel(1) as bx:
            kernel[copy] = 1
    assert body(main)[0].startswith("func @main(kernel_: tensor[8] f32, copy_: i32)")
    assert "    kernel_[copy_] = 1.0:f32" in body(main)
    with pytest.raises(tilelang.TileLangError, match="'fill' is a Tile IR keyword"):
        T.dynamic("fill")
