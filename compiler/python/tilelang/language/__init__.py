"""The tile language namespace: `import tilelang.language as T`."""

from ..dtypes import DTYPES as _DTYPES, DType as dtype  # noqa: F401
from ..derived import alloc_global, reshape, view  # noqa: F401
from ..eager import const, empty  # noqa: F401
from ..function import prim_func, macro  # noqa: F401
from .allocate import alloc_buffer, alloc_fragment, alloc_local, alloc_shared, alloc_var  # noqa: F401
from .annotations import Layout, annotate_layout, make_swizzled_layout, sync_threads, use_swizzle  # noqa: F401
from .annotations import wait_wgmma, warpgroup_pingpong  # noqa: F401
from .annotations import (annotate_consumer_reg_alloc, annotate_producer_reg_alloc,  # noqa: F401
                          disable_warp_group_reg_alloc, no_set_max_nreg)
from .im2col import im2col  # noqa: F401
from .kernel import Kernel  # noqa: F401
from .loops import (Parallel, Pipelined, Serial, Unroll, Vectorized, grid, serial, unroll,  # noqa: F401
                    vectorized)
from .math import (Cast, Select, abs, cast, cdiv, ceil, ceildiv, clamp, cos, exp, exp2,  # noqa: F401
                   floor, floordiv, floormod, if_then_else, infinity, log, log1p, log2, max, min, pow,
                   round, rsqrt, shift_left, shift_right, sigmoid, sin, sqrt, tanh, truncdiv, truncmod)
from .reinterpret import reinterpret  # noqa: F401
from .proxy import Buffer, FragmentBuffer, LocalBuffer, SharedBuffer, Tensor  # noqa: F401
from .symbolics import dynamic, symbolic  # noqa: F401
from .threads import (attr, comm_reducer, dp4a, evaluate, get_block_binding, get_thread_binding,  # noqa: F401
                      get_thread_bindings,
                      thread_binding, tvm_thread_allreduce)
from .extern import access_ptr, address_of, call_extern, import_source  # noqa: F401
from .tileops import (GemmWarpPolicy, atomic_add, clear, copy, cumsum, fill, gemm, reduce,  # noqa: F401
                      reduce_abssum, reduce_absmax, reduce_max, reduce_min, reduce_sum)

globals().update(_DTYPES)
float = _DTYPES["float32"]  # noqa: A001 - upstream aliases
half = _DTYPES["float16"]
double = _DTYPES["float64"]
int = _DTYPES["int32"]  # noqa: A001
uint = _DTYPES["uint32"]


tfloat32 = "tfloat32"  # float32 buffers (dtypes._ALIASES); compares as upstream's name


def __getattr__(name):
    """Upstream names the tile language here does not have raise TileLangUnsupportedAPI naming them;
    dtypes Tile IR cannot represent are their names (rejected where a buffer or cast needs them)."""
    if name.startswith("__"):
        raise AttributeError(name)
    from ..dtypes import UNSUPPORTED
    if name in UNSUPPORTED:
        return name
    from ..errors import TileLangUnsupportedAPI, located
    raise TileLangUnsupportedAPI(located(f"unsupported feature: T.{name} is not part of this project's tile language"))
