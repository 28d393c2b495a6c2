"""The tile language namespace: `import tilelang.language as T`."""

from ..dtypes import DTYPES as _DTYPES, DType as dtype  # noqa: F401
from ..eager import const, empty  # noqa: F401
from ..function import prim_func, macro  # noqa: F401
from .allocate import alloc_fragment, alloc_local, alloc_shared, alloc_var  # noqa: F401
from .annotations import annotate_layout, make_swizzled_layout, sync_threads, use_swizzle  # noqa: F401
from .kernel import Kernel  # noqa: F401
from .loops import Parallel, Pipelined, Serial, Unroll, Vectorized, serial, unroll, vectorized  # noqa: F401
from .math import (Cast, Select, abs, cast, cdiv, ceil, ceildiv, clamp, cos, exp, exp2,  # noqa: F401
                   floor, floordiv, floormod, if_then_else, infinity, log, log1p, log2, max, min, pow,
                   round, rsqrt, sigmoid, sin, sqrt, tanh, truncdiv, truncmod)
from .proxy import Buffer, FragmentBuffer, LocalBuffer, SharedBuffer, Tensor  # noqa: F401
from .symbolics import dynamic, symbolic  # noqa: F401
from .tileops import (GemmWarpPolicy, atomic_add, clear, copy, cumsum, fill, gemm, reduce,  # noqa: F401
                      reduce_abssum, reduce_absmax, reduce_max, reduce_min, reduce_sum)

globals().update(_DTYPES)
float = _DTYPES["float32"]  # noqa: A001 - upstream aliases
half = _DTYPES["float16"]
double = _DTYPES["float64"]
int = _DTYPES["int32"]  # noqa: A001


_FP_LOW = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
           "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int4", "uint4", "int2", "uint2", "int1", "uint1",
           "tfloat32")


def __getattr__(name):
    """Upstream names the tile language here does not have raise TileLangUnsupportedAPI naming them."""
    if name.startswith("__"):
        raise AttributeError(name)
    from ..errors import TileLangUnsupportedAPI
    if name in _FP_LOW:
        raise TileLangUnsupportedAPI(f"unsupported feature: dtype {name} (Tile IR v1 has bool, int8-64, "
                                     "uint8-64, float16, bfloat16, float32, float64)")
    raise TileLangUnsupportedAPI(f"unsupported feature: T.{name} is not part of this project's tile language")
