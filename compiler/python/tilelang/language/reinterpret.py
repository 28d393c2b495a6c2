"""T.reinterpret(dtype, value) / tvm.tirx.reinterpret: a value's bits read as another dtype.

Tile IR v1 has no bit-cast, so the frontend writes the two reinterpretations
upstream's dequantize examples use as ordinary expressions with the same result
on every backend:

- between integers of one width (uint8 -> int8, int32 -> uint32, ...): a cast,
  which Tile IR defines as wrapping modulo 2^bits (two's complement), i.e.
  the same bits;
- a 16-bit integer -> float16: the IEEE half is decoded from its fields
  (sign, 5-bit exponent, 10-bit mantissa), every product exact in float32:
  normal numbers (1024 + m) * 2^(e - 25), subnormals m * 2^-24, e = 31 gives
  +-inf or nan. Each pattern gives the half with exactly those bits (NaN
  payloads aside).

Other pairs (float -> int bits, bfloat16, float32, widths that differ) fail
with "unsupported feature" naming both dtypes and the line.
"""

import math

from .. import expr as E
from ..dtypes import canonical
from ..errors import error


def _unsupported(src, dst):
    return error(f"unsupported feature: T.reinterpret from {src} to {dst} (supported: integers of one "
                 "width, and a 16-bit integer to float16)")


def _half_from_bits(bits):
    """float16 whose bit pattern is the 16-bit integer expression `bits`."""
    i64 = canonical("int64")
    f32 = canonical("float32")
    b = E.cast(E.cast(bits, "uint16"), i64)  # zero-extended pattern, 0..65535
    sign = b >> 15
    e = (b >> 10) & 31
    m = b & 1023
    normal = E.cast((m + 1024) << e, f32) * E.const(2.0 ** -25, f32)  # (1024 + m) * 2^(e - 25), exact
    subnormal = E.cast(m, f32) * E.const(2.0 ** -24, f32)
    special = E.select(m == 0, E.const(math.inf, f32), E.const(math.nan, f32))
    mag = E.select(e == 0, subnormal, E.select(e == 31, special, normal))
    return E.cast(E.select(sign == 1, -mag, mag), "float16")


def reinterpret(*args, span=None, **kwargs):
    """TVM's argument order: reinterpret(dtype, value); also reinterpret(value, dtype=...)."""
    if "dtype" in kwargs and len(args) == 1:
        value, dtype = args[0], kwargs.pop("dtype")
    elif len(args) == 2:
        dtype, value = args
    else:
        raise error("T.reinterpret takes (dtype, value) or (value, dtype=...)")
    if kwargs:
        raise error(f"T.reinterpret: unexpected arguments {sorted(kwargs)}")
    if dtype == "handle":  # T.reinterpret(T.uint64(0), dtype="handle"): a T.attr value (threads.attr)
        return value
    if isinstance(dtype, E.Expr) and not isinstance(value, E.Expr):  # reinterpret(value, dtype) spelled the other way
        dtype, value = value, dtype
    dst = canonical(dtype)
    x = E.as_expr(value)
    src = x.dtype
    if src == dst:
        return x
    if src.is_int and dst.is_int and src.bits == dst.bits:  # is_int: signed or unsigned
        return E.cast(x, dst)
    if dst.ir == "f16" and src.is_int and src.bits == 16:
        return _half_from_bits(x)
    raise _unsupported(src, dst)
