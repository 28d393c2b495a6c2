"""`tvm.tirx` / `tvm.tir` (from `from tvm import tirx`): the few TIR expression builders upstream's
dequantize examples call inside T.Parallel bodies, on this project's expressions.

const, reinterpret, Select, Cast and PrimExpr (for annotations and isinstance) are real; every
other name is an Unsupported stand-in that raises "unsupported feature: tvm.tirx.NAME" when used.
"""

from . import expr as _E
from ._unsupported import module_getattr
from .language.reinterpret import reinterpret  # noqa: F401 - reinterpret(dtype, value)

PrimExpr = _E.Expr


def const(value, dtype="int32", span=None):
    """tirx.const(3, "uint16"): a typed constant."""
    return _E.const(value, dtype)


def Select(cond, true_value, false_value, span=None):  # noqa: N802 - TVM's name
    return _E.select(cond, true_value, false_value)


def Cast(dtype, value, span=None):  # noqa: N802 - TVM's name
    return _E.cast(value, dtype)


__getattr__ = module_getattr("tvm.tirx", "TVM API; this project has no TVM")
