"""TileLang frontend: tile programs in Python -> Tile IR -> compiled, callable kernels.

    import tilelang
    import tilelang.language as T

Tracing and emitting Tile IR need only the standard library; running kernels
needs numpy, the `tl-pack` driver and the runtime binding `tilelang_runtime`
(see toolchain.py for how they are found).
"""

from . import language  # noqa: F401
from .compiler import compile  # noqa: F401,A004
from .errors import (TileLangCompileError, TileLangError, TileLangNotImplementedError,  # noqa: F401
                     TileLangRuntimeError, TileLangSyntaxError, TileLangUnimplementedFeature)
from .dtypes import canonical as DataType  # noqa: F401 - DataType("float16").bits
from .function import PrimFunc  # noqa: F401
from .jit import JITImpl, jit  # noqa: F401
from .kernel import JITKernel  # noqa: F401
from .pass_config import PassConfigKey  # noqa: F401
from .utils.tensor import TensorSupplyType  # noqa: F401
from .language.math import cdiv  # noqa: F401
from .autotuner import autotune  # noqa: F401
from . import layout  # noqa: F401 - tilelang.layout.make_swizzled_layout without importing tilelang.layout
from . import tvm  # noqa: F401,E402 - as upstream, `import tvm` works after `import tilelang` (tvm.py)

__version__ = "0.1.0"


def emit(func, name=None):
    """Tile IR text of a prim_func, optionally renamed."""
    if not isinstance(func, PrimFunc):
        raise TileLangError(f"tilelang.emit expects a T.prim_func, got {type(func).__name__}")
    return (func.with_name(name) if name else func).script()
