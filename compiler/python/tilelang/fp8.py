"""float8 buffers (T.float8_e4m3fn, T.float8_e5m2) on top of Tile IR v1, which has no 8-bit float.

An fp8 buffer is a u8 buffer in Tile IR holding the IEEE-style bit patterns (as
upstream and torch store them). The frontend converts at the buffer's edge, so
every backend runs the same integer and float32 expressions:

- a load `buf[i]` is decoded to the float32 value of its bits (exact);
- a store `buf[i] = v` encodes v, converted to float32, with round-to-nearest-even,
  saturating to the largest finite value (upstream's CUDA casts use __NV_SATFINITE:
  448 for e4m3fn, 57344 for e5m2; +-inf too), NaN to the NaN pattern 0x7F (sign kept);
- T.copy between an fp8 buffer and another dtype is a T.Parallel loop of such
  loads and stores; T.fill/T.clear store the encoded value; fp8 to fp8 copies bytes.
  gemm, reductions, cumsum and atomic_add on fp8 operands are rejected naming the op.

How the encoding stays exact: with a = |v| the exponent E is counted by comparisons
with powers of two (E = Emin + #{k in Emin+1..Emax : a >= 2^k}), q = round(a * 2^(M-E))
(a power-of-two scaling, exact in float32), and bits = ((E - Emin) << M) + q covers
normals, subnormals (E = Emin) and a mantissa that rounds up into the next binade.
"""

import math

from . import expr as E

# name -> (exponent bits, mantissa bits, bias, largest finite bit pattern, has infinities)
FORMATS = {
    "float8_e4m3fn": (4, 3, 7, 0x7E, False),
    "float8_e5m2": (5, 2, 15, 0x7B, True),
}
NAN_BITS = 0x7F


def is_fp8(dtype):
    return str(dtype) in FORMATS


def _format(dtype):
    return FORMATS[str(dtype)]


def _f32(x):
    return E.cast(x, "float32")


def _pow2_f32(shift_expr, lowest):
    """2^(shift_expr) as float32 for integer shift_expr >= lowest (>= -126), exactly: an i64 shift."""
    i64 = "int64"
    return _f32(E.binary("<<", E.const(1, i64), E.cast(shift_expr - lowest, i64))) * E.const(2.0 ** lowest,
                                                                                                "float32")


def _let(name, value):
    """Bind value to a `let` inside a kernel (the encoding reads it many times); as is elsewhere."""
    from . import builder
    b = builder.active()
    if b is None or not b.in_kernel or isinstance(value, (E.Const, E.Var)):
        return value
    return b.let(name, value)


def decode(load, dtype):
    """float32 value of the fp8 bit pattern `load` (a u8 expression)."""
    ebits, mbits, bias, _, has_inf = _format(dtype)
    b = E.cast(load, "int64")
    sign = b >> 7
    e = (b >> mbits) & ((1 << ebits) - 1)
    m = b & ((1 << mbits) - 1)
    f32 = "float32"
    normal = _f32(E.binary("<<", m + (1 << mbits), e)) * E.const(2.0 ** (-bias - mbits), f32)
    subnormal = _f32(m) * E.const(2.0 ** (1 - bias - mbits), f32)
    emax_field = (1 << ebits) - 1
    if has_inf:  # e5m2: the top exponent is inf (m = 0) or NaN
        special = E.select(m == 0, E.const(math.inf, f32), E.const(math.nan, f32))
        mag = E.select(e == 0, subnormal, E.select(e == emax_field, special, normal))
    else:  # e4m3fn: only S.1111.111 is NaN; no infinities
        nan = E.binary("&&", e == emax_field, m == (1 << mbits) - 1)
        mag = E.select(e == 0, subnormal, E.select(nan, E.const(math.nan, f32), normal))
    out = E.select(sign == 1, -mag, mag)
    if isinstance(load, E.Load):
        out._fp8_load = load  # the element address, for T.copy(buf[i, j], ...) and stores
    return out


def encode(value, dtype):
    """u8 bit pattern of float32(value) in fp8 (round to nearest even, saturating, NaN kept)."""
    ebits, mbits, bias, max_bits, _ = _format(dtype)
    emin = 1 - bias
    emax = ((max_bits >> mbits) & ((1 << ebits) - 1)) - bias  # exponent of the largest finite value
    x = _let("fp8_x", _f32(value))
    f32, i32 = "float32", "int32"
    a = E.call("abs", x)
    a = _let("fp8_a", E.call("min", a, E.const(2.0 ** (emax + 1), f32)))  # inf -> finite, saturates below
    exp = E.const(emin, i32)
    for k in range(emin + 1, emax + 1):
        exp = exp + E.cast(a >= E.const(2.0 ** k, f32), i32)
    exp = _let("fp8_e", exp)
    scale = _pow2_f32(E.const(mbits, i32) - exp, mbits - emax)
    q = E.cast(E.call("round", a * scale), i32)
    bits = E.call("min", E.binary("<<", exp - emin, E.const(mbits, i32)) + q, E.const(max_bits, i32))
    bits = E.select(x < E.const(0.0, f32), bits | 0x80, bits)
    bits = E.select(E.binary("!=", x, x), E.const(NAN_BITS, i32), bits)
    return E.cast(bits, "uint8")


def storage_load(obj):
    """The u8 Load behind a decoded fp8 load, else obj."""
    return getattr(obj, "_fp8_load", obj)


def _numpy_table(dtype):
    """float64 value of each of the 256 patterns (NaN where the format has NaN)."""
    import numpy as np
    ebits, mbits, bias, _, has_inf = _format(dtype)
    b = np.arange(256)
    s, e, m = b >> 7, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
    v = np.where(e == 0, m * 2.0 ** (1 - bias - mbits), ((1 << mbits) + m) * 2.0 ** (e - bias - mbits))
    top = (1 << ebits) - 1
    if has_inf:
        v = np.where(e == top, np.where(m == 0, np.inf, np.nan), v)
    else:
        v = np.where((e == top) & (m == (1 << mbits) - 1), np.nan, v)
    return np.where(s == 1, -v, v)


def decode_numpy(bits, dtype):
    """float32 array of fp8 bit patterns (numpy has no fp8 dtype)."""
    import numpy as np
    return _numpy_table(dtype)[np.asarray(bits, np.uint8).astype(np.int64)].astype(np.float32)


def encode_numpy(x, dtype):
    """uint8 fp8 patterns of an array, as the kernels' stores round (nearest even, saturating, NaN 0x7F)."""
    import numpy as np
    max_bits = _format(dtype)[3]
    pos = _numpy_table(dtype)[:max_bits + 1]  # increasing, finite, patterns 0..max_bits
    a = np.minimum(np.abs(np.asarray(x, np.float64)), pos[-1])
    hi = np.clip(np.searchsorted(pos, a), 0, max_bits)
    lo = np.clip(hi - 1, 0, max_bits)
    d_lo, d_hi = a - pos[lo], pos[hi] - a
    pick = np.where(pos[hi] == a, hi, np.where((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)), lo, hi))
    bits = pick.astype(np.int64) | np.where(np.asarray(x) < 0, 0x80, 0)
    return np.where(np.isnan(x), NAN_BITS, bits).astype(np.uint8)
