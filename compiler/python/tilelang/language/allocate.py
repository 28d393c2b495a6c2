"""On-chip allocations: T.alloc_shared, alloc_fragment, alloc_local, alloc_var.

The buffer gets its name when the program assigns it (`A_s = T.alloc_shared(...)`).
"""

import numbers

from .. import builder as B
from .. import expr as E
from .. import ir
from ..buffer import Buffer
from ..dtypes import canonical, is_dtype
from ..errors import error


def _alloc(what, shape, dtype, scope):
    b = B.current()
    if not b.in_kernel:
        raise error(f"{what} must be inside a T.Kernel")
    if isinstance(shape, (numbers.Integral, E.Expr)):
        shape = (shape,)
    dims = []
    for d in shape:
        n = E.const_int(d)
        if n is None:
            raise error(f"{what}: shape {tuple(E.format_expr(E.as_expr(x)) for x in shape)} "
                        "must be integer constants")
        if n <= 0:
            raise error(f"{what}: dimension {n} must be positive")
        dims.append(n)
    buf = Buffer(None, dims, canonical(dtype), scope)
    b.pending.append(buf)
    b.emit(ir.Alloc(buf))
    return buf


def alloc_shared(shape, dtype, scope="shared.dyn"):
    return _alloc("T.alloc_shared", shape, dtype, "shared")


def alloc_fragment(shape, dtype, scope="local.fragment"):
    return _alloc("T.alloc_fragment", shape, dtype, "fragment")


def alloc_local(shape, dtype, scope="local"):
    return _alloc("T.alloc_local", shape, dtype, "local")


def alloc_var(dtype, *args, scope="local.var", init=None):
    """Positional forms as upstream: (dtype), (dtype, init), (dtype, scope), (dtype, init, scope)."""
    if len(args) > 2:
        raise error("T.alloc_var takes (dtype, [init], [scope])")
    for a in args:
        if isinstance(a, str) and not is_dtype(a):
            scope = a
        else:
            if init is not None:
                raise error("T.alloc_var: init given twice")
            init = a
    b = B.current()
    if not b.in_kernel:
        raise error("T.alloc_var must be inside a T.Kernel")
    dtype = canonical(dtype)
    if dtype.kind == "q":
        raise error(f"unsupported feature: T.alloc_var of {dtype} (fp8 values live in buffers; use a float32 "
                    "variable)")
    var = E.MutableVar(None, dtype)
    b.pending.append(var)
    b.emit(ir.VarDecl(var, None if init is None else E.cast(init, dtype)))
    return var


_SCOPES = {"shared": alloc_shared, "shared.dyn": alloc_shared, "local.fragment": alloc_fragment,
           "local": alloc_local}


def alloc_buffer(shape, dtype, scope="global", data=None, **kwargs):
    """TVM's T.alloc_buffer as upstream programs use it: scope "global" is T.alloc_global (a
    workspace), "shared"/"shared.dyn", "local.fragment" and "local" the on-chip allocations."""
    if data is not None:
        raise error("unsupported feature: T.alloc_buffer(data=...) (a buffer over another's memory); "
                    "use T.Tensor(shape, dtype, buf.data) for a view of a tensor")
    if scope == "global":
        from ..derived import alloc_global
        return alloc_global(shape, dtype)
    if scope not in _SCOPES:
        raise error(f"unsupported feature: T.alloc_buffer scope {scope!r} (supported: global, shared, "
                    "shared.dyn, local.fragment, local)")
    return _SCOPES[scope](shape, dtype)
