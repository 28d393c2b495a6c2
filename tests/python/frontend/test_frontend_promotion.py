"""TileLang's type promotion for mixed expressions, with explicit casts in the IR."""

import pytest

import tilelang
import tilelang.language as T
from tilelang import expr as E
from tilelang.buffer import Buffer
from tilelang.dtypes import DTYPES


def buf(name, dtype):
    return Buffer(name, (4,), DTYPES[dtype], "fragment")


def load(name, dtype):
    return buf(name, dtype)[0]


def check(e, text, dtype):
    assert E.format_expr(e) == text
    assert e.dtype == dtype


@pytest.mark.parametrize("dtype,lit", [("float32", "0.5:f32"), ("float16", "0.5:f16"), ("bfloat16", "0.5:bf16"),
                                       ("float64", "0.5:f64")])
def test_float_literal_keeps_the_buffer_dtype(dtype, lit):
    check(load("acc", dtype) * 0.5, f"acc[0] * {lit}", dtype)
    check(0.5 * load("acc", dtype), f"{lit} * acc[0]", dtype)


@pytest.mark.parametrize("dtype,suffix", [("int32", ""), ("int8", ":i8"), ("uint8", ":u8"), ("int64", ":i64")])
def test_int_literal_takes_the_integer_dtype(dtype, suffix):
    check(load("x", dtype) + 3, f"x[0] + 3{suffix}", dtype)


def test_int_literal_next_to_float_becomes_float():
    check(load("x", "float16") + 1, "x[0] + 1.0:f16", "float16")


def test_float_literal_next_to_int_promotes_to_float32():
    check(load("i", "int32") * 0.5, "cast<f32>(i[0]) * 0.5:f32", "float32")


def test_wider_float_wins():
    check(load("a", "float16") + load("b", "float32"), "cast<f32>(a[0]) + b[0]", "float32")
    check(load("a", "float32") * load("b", "float64"), "cast<f64>(a[0]) * b[0]", "float64")


def test_float16_with_bfloat16_goes_to_float32():
    check(load("a", "float16") + load("b", "bfloat16"), "cast<f32>(a[0]) + cast<f32>(b[0])", "float32")


def test_float_wins_over_int():
    check(load("i", "int64") + load("f", "float16"), "cast<f16>(i[0]) + f[0]", "float16")


def test_wider_int_wins_and_equal_width_goes_unsigned():
    check(load("a", "int8") + load("b", "int32"), "cast<i32>(a[0]) + b[0]", "int32")
    check(load("a", "int32") + load("b", "int64"), "cast<i64>(a[0]) + b[0]", "int64")
    check(load("a", "uint32") + load("b", "int32"), "a[0] + cast<u32>(b[0])", "uint32")


def test_comparisons_and_logic_are_bool():
    c = (load("a", "float32") > 0) & (load("b", "int32") == 1)
    assert c.dtype == "bool"
    check(E.binary("&&", load("a", "float32") > 0, load("b", "int32")), "a[0] > 0.0:f32 && b[0] != 0", "bool")


def test_division_and_modulo():
    i, f = load("i", "int32"), load("f", "float32")
    check(i // 4, "i[0] / 4", "int32")
    check(i / 4, "i[0] / 4", "int32")          # integer `/` is floor division in Tile IR
    check(i % 4, "i[0] % 4", "int32")
    check(f / 4, "f[0] / 4.0:f32", "float32")
    check(f // 2.0, "floor(f[0] / 2.0:f32)", "float32")
    check(f % 2.0, "f[0] - floor(f[0] / 2.0:f32) * 2.0:f32", "float32")


def test_shift_operands_match():
    check(load("u", "uint8") >> 4, "u[0] >> 4:u8", "uint8")
    check(load("u", "uint8") >> load("s", "int32"), "cast<i32>(u[0]) >> s[0]", "int32")


def test_math_on_integers_converts_to_float32():
    check(T.exp(load("i", "int32")), "exp(cast<f32>(i[0]))", "float32")
    check(T.max(load("i", "int32"), 0.5), "max(cast<f32>(i[0]), 0.5:f32)", "float32")
    check(T.abs(load("i", "int32")), "max(i[0], -i[0])", "int32")


def test_select_and_cast():
    check(T.if_then_else(load("c", "int32") > 0, 0, -T.infinity("float16")),
          "select(c[0] > 0, 0.0:f16, -inf:f16)", "float16")
    check(T.cast(load("a", "float32"), "float16"), "cast<f16>(a[0])", "float16")
    check(T.Cast(T.int8, load("a", "float32")), "cast<i8>(a[0])", "int8")  # TIR order: dtype first
    check(load("a", "float32").astype("float64"), "cast<f64>(a[0])", "float64")


def test_typed_constants_and_folding():
    check(T.float32(1), "1.0:f32", "float32")
    check(T.int64(5), "5:i64", "int64")
    check(T.int32(3) + 4, "7", "int32")
    check(T.cast(T.int32(300), "uint8"), "44:u8", "uint8")      # a constant cast wraps, as at run time
    assert T.ceildiv(100, 32) == 4 and T.max(3, 5) == 5     # Python values stay Python
    assert E.difference((E.Var("k", DTYPES["int32"]) + 1) * 32, E.Var("k", DTYPES["int32"]) * 32) == 32


def test_literal_out_of_range_is_an_error():
    with pytest.raises(tilelang.TileLangError, match="constant 300 does not fit in int8"):
        load("x", "int8") + 300


def test_float_constants_print_exactly():
    check(E.const(0.1, "float32"), "0.1:f32", "float32")
    check(E.const(1e-6, "float32"), "1e-6:f32", "float32")
    check(E.const(200, "float32"), "200.0:f32", "float32")
    check(E.const(float("nan"), "float32"), "nan:f32", "float32")
    check(-E.const(float("inf"), "bfloat16"), "-inf:bf16", "bfloat16")
    check(E.const(65504.0, "float16"), "65500.0:f16", "float16")  # shortest decimal that reads back as 65504


def test_store_casts_to_the_buffer_dtype():
    @T.prim_func
    def main(A: T.Tensor((4,), "float16"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            B[0] = A[0] * 2
            A[1] = B[1] + 1
    lines = [l.split(" loc(")[0].strip() for l in main.script().splitlines()]
    assert "B[0] = cast<i32>(A[0] * 2.0:f16)" in lines
    assert "A[1] = cast<f16>(B[1] + 1)" in lines


def test_parentheses_follow_precedence():
    a, b, c = load("a", "int32"), load("b", "int32"), load("c", "int32")
    check((a + b) * c, "(a[0] + b[0]) * c[0]", "int32")
    check(a - (b - c), "a[0] - (b[0] - c[0])", "int32")
    check(a - b - c, "a[0] - b[0] - c[0]", "int32")
    check(-(a + b), "-(a[0] + b[0])", "int32")
    check(a * -3, "a[0] * -3", "int32")


def test_dtype_spellings():
    import numpy as np
    from tilelang.dtypes import canonical

    class FakeTorchDtype:  # torch dtypes print as "torch.<name>"
        def __str__(self):
            return "torch.bfloat16"

    assert canonical("half") == "float16" and canonical(np.dtype("int16")) == "int16"
    assert canonical(FakeTorchDtype()) == "bfloat16" and canonical(T.uint32) is T.uint32
    with pytest.raises(tilelang.TileLangError, match="unknown dtype"):
        canonical("float8_e4m3fnuz")
