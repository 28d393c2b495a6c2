"""Functions the AST transform inserts into traced code (the `__tl` object).

Each one decides at trace time whether it is looking at a device value (build
IR) or at a Python value (behave as Python would).
"""

from . import builder as B
from . import expr as E
from . import ir
from .buffer import Buffer
from .errors import error


class _Unbound:
    pass


UNBOUND = _Unbound()


def is_device(value):
    return isinstance(value, E.Expr)


def if_then(cond):
    b = B.current()
    stmt = ir.If(E.to_bool(cond))
    return b.open(stmt, stmt.then)


class _Else:
    def __enter__(self):
        b = B.current()
        stmt = b.last_if()
        stmt.else_ = []
        b.frames.append(stmt)
        b.blocks.append(stmt.else_)

    def __exit__(self, *exc):
        b = B.current()
        b.blocks.pop()
        b.frames.pop()
        return False


def else_():
    return _Else()


def ifexp(cond, then, otherwise):
    if is_device(cond):
        return E.select(cond, then(), otherwise())
    return then() if cond else otherwise()


def and_(*thunks):
    value = thunks[0]()
    for thunk in thunks[1:]:
        if is_device(value):
            value = E.binary("&&", value, thunk())
        elif not value:
            return value
        else:
            value = thunk()
    return value


def or_(*thunks):
    value = thunks[0]()
    for thunk in thunks[1:]:
        if is_device(value):
            value = E.binary("||", value, thunk())
        elif value:
            return value
        else:
            value = thunk()
    return value


def not_(value):
    if is_device(value):
        return E.unary("!", value)
    return not value


def while_cond(value):
    if is_device(value):
        raise error("`while` on a device value is not supported; use T.serial with an `if`")
    return value


def for_(iterable, names):
    from .language.loops import LoopFrame, serial
    b = B.active()
    if isinstance(iterable, range) and b is not None and b.in_kernel:
        # Upstream maps a Python `range` inside a kernel to T.serial.
        iterable = serial(iterable.start, iterable.stop, iterable.step)
    if isinstance(iterable, LoopFrame):
        iterable.names = names
        return iterable
    if b is None:
        return iterable
    return _python_loop(b, iterable)


def _python_loop(b, iterable):
    # Marks a trace-time (unrolled) loop, so `break` in it is allowed; see check_jump.
    b.loops.append(("python", len(b.frames)))
    try:
        yield from iterable
    finally:
        b.loops.pop()


def check_jump(what):
    """`break`/`continue`/`return` cannot leave a device loop or branch: the body is traced once."""
    b = B.active()
    if b is None:
        return
    if what == "return":
        start = b.call_depths[-1] if b.call_depths else 0  # a macro returns from its own frames
        if any(isinstance(f, (ir.For, ir.Parallel, ir.If)) for f in b.frames[start:]):
            raise error("`return` inside a device loop or device `if` is not supported")
        return
    if not b.loops:
        return
    kind, depth = b.loops[-1]
    if kind == "device":
        raise error(f"`{what}` in a T.serial/T.Parallel/T.Pipelined loop is not supported")
    if any(isinstance(f, ir.If) for f in b.frames[depth:]):
        raise error(f"`{what}` under a device `if` is not supported")


def annotated(value, annotation):
    from .dtypes import is_dtype
    return E.cast(value, annotation) if is_dtype(annotation) else value


def with_(ctx, names):
    if hasattr(ctx, "names"):
        ctx.names = names
    return ctx


def prev(thunk):
    try:
        return thunk()
    except NameError:
        return UNBOUND


def assign(name, value, previous):
    """`name = value` in traced code; returns what the Python name should hold."""
    b = B.active()
    if b is None:
        return value
    if getattr(value, "name", 0) is None and isinstance(value, (Buffer, E.MutableVar)):
        b.name_pending(value, name)  # a fresh allocation takes the Python name
        return value
    if isinstance(previous, E.MutableVar) and previous is not value and b.in_kernel:
        b.assign_var(previous, value)
        return previous
    if isinstance(value, E.Expr) and b.in_kernel and (
            isinstance(value, E.MutableVar) or not isinstance(value, (E.Const, E.Var))):
        # Bind the value now: later writes to the buffers it reads must not change it.
        return b.let(name, value)
    return value


def declare(name, annotation, previous):
    from .eager import declare as _declare
    return _declare(name, annotation, previous)
