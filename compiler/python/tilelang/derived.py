"""Parameters a kernel call supplies itself: T.alloc_global workspaces and buffer views.

Tile IR has only tensor *parameters* in global memory, so both become extra
tensor parameters appended after the program's own (the bundle's signature shows
them; a C, Rust or Go caller passes them like any other tensor):

- ``T.alloc_global(shape, dtype)``: a global workspace. ``JITKernel`` allocates it
  zeroed for each call (numpy, or torch on the inputs' device) and does not return it.
- ``T.Tensor(shape, dtype, buf.data)`` / ``T.reshape(buf, shape)`` / ``T.view(buf, shape)``:
  another shape over the memory of tensor ``buf`` (a parameter, a ``T.empty`` output or a
  workspace). ``JITKernel`` passes ``buf``'s array reshaped (a view, no copy; the first
  ``prod(shape)`` elements when the view is smaller). Same dtype only. Writing through a
  view and touching its base (or another view of it) in one ``T.Kernel`` is rejected:
  backends assume tensor arguments do not alias.

A dimension that is neither a constant nor a ``T.dynamic`` symbol (``M * 2``) gets a
symbol of its own, computed at each call from the other symbols.
"""

import math
import numbers

from . import builder as B
from . import expr as E
from . import ir
from .buffer import Buffer, Region
from .dtypes import canonical
from .errors import error, user_location


class Derived:
    """One extra parameter: kind "workspace" or "view"."""

    def __init__(self, kind, buffer, base, symbols, loc):
        self.kind = kind
        self.buffer = buffer      # the Tile IR tensor parameter
        self.base = base          # views: the buffer whose memory it shows
        self.symbols = symbols    # [(symbol Var, expression over other symbols)]
        self.loc = loc

    def root(self):
        b = self.base
        while b is not None and getattr(b, "_derived", None) is not None and b._derived.kind == "view":
            b = b._derived.base
        return b


class BufferData:
    """What `buf.data` evaluates to while tracing: the memory of a tensor, for T.Tensor(..., data)."""

    def __init__(self, buffer):
        self.buffer = buffer

    def __repr__(self):
        return f"{self.buffer.name}.data"


def _builder(what):
    b = B.active()
    if b is None:
        raise error(f"{what} is only valid inside a T.prim_func being traced")
    if not hasattr(b, "derived"):
        b.derived = []
    return b


def _param_shape(b, shape, what):
    """Tile IR tensor dims for `shape`: ints, T.dynamic symbols, or fresh symbols for expressions."""
    if isinstance(shape, (numbers.Integral, E.Expr)):
        shape = (shape,)
    dims, fresh = [], []
    for d in shape:
        if isinstance(d, bool):
            raise error(f"{what}: dimension {d!r} must be an integer")
        n = E.const_int(d)
        if n is not None:
            if n <= 0:
                raise error(f"{what}: dimension {n} must be positive")
            dims.append(n)
        elif isinstance(d, E.Var) and d.kind == "sym":
            dims.append(d)
        elif isinstance(d, E.Expr) and d.dtype.is_int and symbolic_only(d):
            sym = E.Var(b.fresh("dim"), d.dtype, "sym")
            fresh.append((sym, d))
            dims.append(sym)
        else:
            raise error(f"{what}: dimension {E.format_expr(E.as_expr(d))} must be an integer, a T.dynamic "
                        "symbol or an integer expression of symbols")
    return dims, fresh


def symbolic_only(e):
    if isinstance(e, E.Const):
        return True
    if isinstance(e, E.Var):
        return e.kind == "sym"
    if isinstance(e, E.Binary):
        return e.op in ("+", "-", "*", "/", "%") and symbolic_only(e.a) and symbolic_only(e.b)
    if isinstance(e, E.Call):
        return e.fn in ("ceildiv", "max", "min", "truncdiv", "truncmod") and all(symbolic_only(a) for a in e.args)
    if isinstance(e, E.Cast):
        return e.dtype.is_int and symbolic_only(e.x)
    return False


def evaluate(e, env):
    """The value of an integer expression of symbols (`env`: symbol name -> int)."""
    if isinstance(e, numbers.Integral):
        return int(e)
    if isinstance(e, E.Const):
        return int(e.value)
    if isinstance(e, E.Var):
        if e.name not in env:
            raise error(f"symbol {e.name} is not bound by any input")
        return int(env[e.name])
    if isinstance(e, E.Cast):
        return evaluate(e.x, env)
    if isinstance(e, E.Binary):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                "/": lambda: a // b, "%": lambda: a % b}[e.op]()
    if isinstance(e, E.Call):
        v = [evaluate(x, env) for x in e.args]
        return {"ceildiv": lambda: -(-v[0] // v[1]), "max": lambda: max(v), "min": lambda: min(v),
                "truncdiv": lambda: int(v[0] / v[1]), "truncmod": lambda: v[0] - int(v[0] / v[1]) * v[1]}[e.fn]()
    raise error(f"cannot evaluate {E.format_expr(E.as_expr(e))} at launch")


def _new_param(b, kind, shape, dtype, base, what):
    dims, fresh = _param_shape(b, shape, what)
    buf = Buffer(None, dims, canonical(dtype), "tensor")
    d = Derived(kind, buf, base, fresh, user_location())
    buf._derived = d
    b.derived.append(d)
    b.pending.append(buf)  # named by the assignment (`glse = T.alloc_global(...)`)
    return buf


def alloc_global(shape, dtype, scope="global"):
    """T.alloc_global: a global workspace, allocated (zeroed) by each call of the kernel."""
    b = _builder("T.alloc_global")
    if scope != "global":
        raise error(f"T.alloc_global: scope {scope!r}; only 'global' is supported")
    return _new_param(b, "workspace", shape, dtype, None, "T.alloc_global")


def view(base, shape, dtype=None, what="T.view"):
    """A buffer of `shape` over the memory of tensor `base`."""
    b = _builder(what)
    if isinstance(base, BufferData):
        base = base.buffer
    if isinstance(base, Region):
        raise error(f"{what}: give the whole buffer {base.buffer.name}, not a region of it")
    if not isinstance(base, Buffer):
        raise error(f"{what}: expected a buffer, got {type(base).__name__}")
    if base.scope_name != "tensor":
        raise error(f"unsupported feature: {what} of {base.scope_name} buffer {base.name} (views of shared, "
                    "fragment and local buffers); reshape global tensors only")
    dtype = canonical(dtype) if dtype is not None else base.dtype
    if dtype != base.dtype:
        raise error(f"unsupported feature: {what} reinterpreting {base.name} ({base.dtype}) as {dtype}; "
                    "a view keeps its buffer's dtype")
    buf = _new_param(b, "view", shape, dtype, base, what)
    # Static sizes: the view must fit in its buffer.
    n_view = _static_elements(buf.shape)
    n_base = _static_elements(base.shape)
    if n_view is not None and n_base is not None and n_view > n_base:
        raise error(f"{what}: shape {tuple(buf.shape)} has {n_view} elements, more than the "
                    f"{n_base} of {base.name}{tuple(base.shape)}")
    return buf


def _static_elements(shape):
    ns = [E.const_int(d) for d in shape]
    return None if any(n is None for n in ns) else math.prod(ns)


def reshape(src, shape):
    """upstream's T.reshape(src, shape): a view of `src` with another shape."""
    return view(src, shape, None, "T.reshape")


# ---------------------------------------------------------------- after tracing

def finish(b, params, symbols, kernels):
    """Appends the derived parameters (and their symbols) to `params`/`symbols`; checks aliasing.
    Returns the Derived records, in parameter order."""
    derived = list(getattr(b, "derived", []))
    for d in derived:
        params.append(d.buffer)
        for sym, _ in d.symbols:
            symbols.append(sym)
        for dim in d.buffer.shape:  # a symbol no parameter of the program names
            if isinstance(dim, E.Var) and all(s is not dim for s in symbols):
                symbols.append(dim)
    if any(d.kind == "view" for d in derived):
        _check_aliasing(derived, kernels)
    return derived


def _check_aliasing(derived, kernels):
    groups = {}
    for d in derived:
        if d.kind == "view":
            groups.setdefault(id(d.root()), {d.root()}).add(d.buffer)
    for k in kernels:
        touched, written = set(), set()
        _walk(k.body, touched, written)
        for members in groups.values():
            used = [m for m in members if id(m) in touched]
            if len(used) > 1 and any(id(m) in written for m in used):
                names = ", ".join(sorted(m.name for m in used))
                file, line = k.loc
                raise error(f"unsupported feature: {names} share memory (a buffer and its view) and one of "
                            f"them is written in the same T.Kernel at {file}:{line}; use one name for the memory "
                            "inside a kernel (backends assume tensor arguments do not alias)")


_WRITES = {ir.Store: ("buffer",), ir.Copy: ("dst",), ir.Fill: ("region",), ir.AtomicAdd: ("dst",),
           ir.Reduce: ("dst",), ir.Cumsum: ("dst",), ir.Gemm: ("c",)}


def _walk(block, touched, written):
    for s in block:
        for attr in _WRITES.get(type(s), ()):
            x = getattr(s, attr)
            buf = x.buffer if isinstance(x, Region) else x
            if isinstance(buf, Buffer):
                written.add(id(buf))
        _collect(s, touched, set())
        for name in s.blocks:
            _walk(getattr(s, name), touched, written)
        if isinstance(s, ir.If) and s.else_ is not None:
            _walk(s.else_, touched, written)


def _collect(x, touched, seen):
    if id(x) in seen:
        return
    seen.add(id(x))
    if isinstance(x, Buffer):
        touched.add(id(x))
        return
    if isinstance(x, (list, tuple)):
        for y in x:
            _collect(y, touched, seen)
        return
    if isinstance(x, (E.Expr, Region)) or (isinstance(x, ir.Stmt) and not x.blocks):
        for k, v in vars(x).items():
            if k not in ("dtype", "loc"):
                _collect(v, touched, seen)
    elif isinstance(x, ir.Stmt):  # statements with blocks: only their own expressions
        for k, v in vars(x).items():
            if k not in x.blocks and k not in ("else_", "loc", "blocks"):
                _collect(v, touched, seen)


# ---------------------------------------------------------------- at each call

def call_arrays(derived, params, full, env, like):
    """The arrays of the derived parameters for one call. `params`/`full`: the program's own
    parameters and their arrays (outputs allocated); `env`: symbol values bound so far (extended
    with the derived symbols); `like`: a torch tensor whose device workspaces go to, or None."""
    import numpy as np
    from .kernel import NUMPY_DTYPE, TORCH_DTYPE
    arrays = {id(p): a for p, a in zip(params, full)}
    out = []
    for d in derived:
        for sym, expr in d.symbols:
            env[sym.name] = evaluate(expr, env)
        shape = [evaluate(x, env) for x in d.buffer.shape]
        if d.kind == "workspace":
            if like is not None:
                import torch
                a = torch.zeros(shape, dtype=getattr(torch, TORCH_DTYPE[d.buffer.dtype.ir]), device=like.device)
            else:
                a = np.zeros(shape, dtype=NUMPY_DTYPE[d.buffer.dtype.ir])
        else:
            base = arrays.get(id(d.base))
            if base is None:
                raise error(f"view {d.buffer.name}: its buffer {d.base.name} has no array in this call")
            n = math.prod(shape)
            total = math.prod(base.shape)
            if n > total:
                raise error(f"view {d.buffer.name}{tuple(shape)} has {n} elements, more than the {total} of "
                            f"{d.base.name}{tuple(base.shape)}")
            a = base.reshape(-1)[:n].reshape(shape)
            if isinstance(base, np.ndarray) and not np.shares_memory(a, base):
                raise error(f"view {d.buffer.name}: {d.base.name} is not contiguous, so it cannot be viewed")
        arrays[id(d.buffer)] = a
        out.append(a)
    return out
