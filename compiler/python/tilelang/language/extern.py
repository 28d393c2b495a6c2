"""External device code: upstream's T.import_source(src), T.call_extern(...), and the
element pointers they take (T.address_of, T.access_ptr).

T.import_source(text) attaches CUDA C++ to the function being traced (Tile IR
`import_source "..."`; each text once); the CUDA backend compiles it verbatim before
the kernel, in the same NVRTC unit. T.call_extern(func_name, *args, dtype=...) (or
TVM's order, T.call_extern(dtype, func_name, *args)) is a `call_extern` statement: each
thread that reaches it calls the function, as upstream's per-thread code does. Its
result is not available as a value. Arguments are values (f16/bf16 as float) or
pointers to elements of tensor parameters (global memory), shared, fragment or local
buffers (`&B[i]`): a pointer sees the buffer's following elements in row-major order, in
the buffer's dtype (f16/bf16 as 16-bit patterns). Only CUDA targets run such kernels: the CPU, HIP and Vulkan backends
reject them naming the kernel, the function and the target.
"""

from .. import builder as B
from .. import expr as E
from .. import ir
from ..buffer import Buffer, Region
from ..dtypes import DType
from ..errors import error


def import_source(source=None):
    """upstream's T.import_source: device source for T.call_extern (None / "" import nothing:
    upstream's examples call it unconditionally)."""
    if source is None or source == "":
        return None
    if not isinstance(source, str):
        raise error(f"T.import_source: expected the source text as a str, got {type(source).__name__}")
    b = B.current()
    sources = b.__dict__.setdefault("sources", [])
    if source not in sources:
        sources.append(source)
    return None


def address_of(load):
    """TVM's T.address_of(buf[i, ...]): a pointer to that element (a T.call_extern argument)."""
    if not isinstance(load, E.Load):
        raise error("T.address_of: expected a buffer element such as B_local[0], got "
                    f"{E.format_expr(load) if isinstance(load, E.Expr) else type(load).__name__}")
    return ir.Address(load)


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """upstream's T.access_ptr(base, "r"|"w"|"rw", ...): a pointer to the first element of
    `base` (a buffer, a region such as B[0:4], or an element B[i]) plus `offset` elements
    along the last dimension. The extents and access mask are upstream's hints for its own
    passes; here the callee may read and write what follows."""
    if isinstance(access_type, str) and access_type not in ("r", "w", "rw"):
        raise error(f'T.access_ptr: access_type must be "r", "w" or "rw", got {access_type!r}')
    if isinstance(base, Buffer):
        buf, idx = base, [E.const(0, E.I32) for _ in base.shape]
    elif isinstance(base, Region):
        buf, idx = base.buffer, [E.as_expr(start) for start, _, _ in base.ranges]
    elif isinstance(base, E.Load):
        buf, idx = base.buffer, list(base.indices)
    else:
        raise error(f"T.access_ptr: expected a buffer, a buffer region or an element, got {type(base).__name__}")
    if ignore_last_ndim:
        raise error("unsupported feature: T.access_ptr(..., ignore_last_ndim=...) (pass the element instead)")
    if not isinstance(offset, int) or offset != 0:
        if not idx:
            raise error("T.access_ptr: an offset into a rank-0 buffer")
        idx[-1] = E.as_expr(idx[-1]) + offset
    load = E.Load(buf, idx)
    return ir.Address(load)


def _is_dtype(x):
    if isinstance(x, DType):
        return True
    if not isinstance(x, str):
        return False
    try:
        E.canonical(x)
        return True
    except Exception:  # noqa: BLE001 - any unknown name is "not a dtype"
        return x == "handle"


def call_extern(*args, dtype=None, span=None):
    """upstream's T.call_extern(func_name, *args, dtype=...) / TVM's
    T.call_extern(dtype, func_name, *args): a `call_extern` statement in the traced kernel."""
    args = list(args)
    if dtype is None:
        if len(args) < 2 or not _is_dtype(args[0]):
            raise error("T.call_extern: expected (dtype, func_name, *args) or (func_name, *args, dtype=...)")
        dtype = args.pop(0)
    if not args or not isinstance(args[0], str):
        raise error("T.call_extern: expected the extern function's name (a str) before its arguments")
    name = args.pop(0)
    if not name.isidentifier():
        raise error(f"T.call_extern: {name!r} is not a C identifier")
    b = B.current()
    if not b.__dict__.get("sources"):
        raise error(f"T.call_extern({name!r}): no device source was imported; call T.import_source(src) with "
                    f"the source that defines {name} first")
    # `handle` / void results are not values in Tile IR: the declared type is informational.
    rdt = E.canonical("int32") if dtype == "handle" else E.canonical(dtype)
    out = []
    for i, a in enumerate(args):
        if isinstance(a, ir.Address):
            if a.load.buffer.scope_name not in ("tensor", "shared", "fragment", "local"):
                raise error(f"T.call_extern({name!r}) argument {i}: a pointer into {a.load.buffer.name} "
                            f"({a.load.buffer.scope_name}); only tensor, shared, fragment and local buffer "
                            "elements can be passed")
            out.append(a)
        elif isinstance(a, (Buffer, Region)):
            raise error(f"T.call_extern({name!r}) argument {i}: a buffer; pass T.access_ptr(buf, \"r\") or "
                        "T.address_of(buf[i]) for a pointer")
        else:
            out.append(E.as_expr(a))
    b.emit(ir.CallExtern(rdt, name, out))
    return None
