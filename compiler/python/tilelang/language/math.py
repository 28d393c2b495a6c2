"""Scalar math on device values (and on Python numbers, evaluated at trace time)."""

import math as _pymath
import numbers

from .. import expr as E
from ..dtypes import canonical
from ..errors import error


def _py(*xs):
    return all(isinstance(x, numbers.Number) and not isinstance(x, E.Expr) for x in xs)


def _unary(fn, pyfn):
    def op(x):
        if _py(x):
            return pyfn(x)
        return E.call(fn, x)
    op.__name__ = fn
    return op


exp = _unary("exp", _pymath.exp)
exp2 = _unary("exp2", lambda x: 2.0 ** x)
log = _unary("log", _pymath.log)
log2 = _unary("log2", _pymath.log2)
sqrt = _unary("sqrt", _pymath.sqrt)
rsqrt = _unary("rsqrt", lambda x: 1.0 / _pymath.sqrt(x))
tanh = _unary("tanh", _pymath.tanh)
sigmoid = _unary("sigmoid", lambda x: 1.0 / (1.0 + _pymath.exp(-x)))
floor = _unary("floor", _pymath.floor)
ceil = _unary("ceil", _pymath.ceil)
round = _unary("round", lambda x: float(_pymath.floor(x + 0.5)) if x >= 0 else -float(_pymath.floor(-x + 0.5)))
sin = _unary("sin", _pymath.sin)
cos = _unary("cos", _pymath.cos)


def log1p(x):
    if _py(x):
        return _pymath.log1p(x)
    return log(x + 1)


def abs(x):  # noqa: A001 - upstream's name
    if _py(x):
        return x if x >= 0 else -x
    return E.call("abs", x)


def pow(x, y):  # noqa: A001
    if _py(x, y):
        return x ** y
    return E.call("pow", x, y)


def max(a, b):  # noqa: A001 - binary elementwise max, as upstream
    if _py(a, b):
        return a if a >= b else b
    return E.call("max", a, b)


def min(a, b):  # noqa: A001
    if _py(a, b):
        return a if a <= b else b
    return E.call("min", a, b)


def clamp(x, lo, hi):
    return min(max(x, lo), hi)


def ceildiv(a, b):
    if _py(a, b):
        return -(-a // b)
    return E.call("ceildiv", a, b)


cdiv = ceildiv


def floordiv(a, b):
    return E.floordiv(a, b)


def floormod(a, b):
    return E.floormod(a, b)


def shift_left(a, b, span=None):
    """TVM's T.shift_left(a, b): a << b (a Python constant takes the other side's dtype)."""
    if _py(a, b):
        return a << b
    return E.binary("<<", a, b)


def shift_right(a, b, span=None):
    """TVM's T.shift_right(a, b): a >> b."""
    if _py(a, b):
        return a >> b
    return E.binary(">>", a, b)


def truncdiv(a, b):
    if _py(a, b):
        return int(a / b)
    return E.call("truncdiv", a, b)


def truncmod(a, b):
    if _py(a, b):
        return a - int(a / b) * b
    return E.call("truncmod", a, b)


def if_then_else(cond, t, f):
    if isinstance(cond, (bool, numbers.Integral)) and not isinstance(cond, E.Expr):
        return t if cond else f
    return E.select(cond, t, f)


Select = if_then_else


def infinity(dtype):
    dtype = canonical(dtype)
    if not dtype.is_float:
        raise error(f"T.infinity: {dtype} has no infinity")
    return E.Const(float("inf"), dtype)


def cast(value, dtype, round=None, sat=True, rbits=None, span=None):
    return E.cast(value, dtype)


def Cast(dtype, value):  # noqa: N802 - upstream's TIR-style name: dtype first
    return E.cast(value, dtype)
