"""Loops: T.serial / range, T.unroll, T.Pipelined, T.Parallel.

Each is a frame the traced `for` iterates once: it opens the IR loop, yields
the loop variable(s) for the body to use, and closes the loop.
"""

import numbers

from .. import builder as B
from .. import expr as E
from .. import ir
from ..errors import error


class LoopFrame:
    names = None

    def __iter__(self):
        b = B.current()
        vars, stmt = self._make(b)
        with b.open(stmt, stmt.body):
            b.loops.append(("device", len(b.frames)))
            try:
                yield vars[0] if len(vars) == 1 else tuple(vars)
            finally:
                b.loops.pop()



class _RangeLoop(LoopFrame):
    def __init__(self, kind, start, stop, step, stages=None):
        if stop is None:
            start, stop = 0, start
        start, stop = E.as_expr(start), E.as_expr(stop)
        for what, v in (("start", start), ("stop", stop)):
            if not v.dtype.is_int:
                raise error(f"{self._what(kind)}: {what} must be an integer, got {v.dtype}")
        dtype = E.promote(start.dtype, stop.dtype) if isinstance(start, E.Const) else start.dtype
        self.start, self.stop = E.cast(start, dtype), E.cast(stop, dtype)
        self.step = None
        if step is not None:
            n = E.const_int(step)
            if n == 0:
                raise error(f"{self._what(kind)}: step must not be zero")
            if n != 1:
                self.step = E.cast(E.as_expr(step), dtype)
        self.kind, self.stages, self.dtype = kind, stages, dtype

    @staticmethod
    def _what(kind):
        return {"serial": "T.serial", "unroll": "T.unroll", "pipelined": "T.Pipelined"}[kind]

    def _make(self, b):
        names = self.names or ()
        name = names[0] if len(names) == 1 and names[0] else "k" if self.kind == "pipelined" else "i"
        var = E.Var(b.fresh(name), self.dtype, "loop")
        return [var], ir.For(var, self.kind, self.start, self.stop, self.step, self.stages)


def serial(start, stop=None, step=None, *, annotations=None):
    return _RangeLoop("serial", start, stop, step)


def unroll(start, stop=None, step=None, *, explicit=False, unroll_factor=None, annotations=None):
    return _RangeLoop("unroll", start, stop, step)


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None,
              annotations=None):
    if not isinstance(num_stages, numbers.Integral) or num_stages < 0:
        raise error(f"T.Pipelined: num_stages must be an integer >= 0, got {num_stages!r}")
    return _RangeLoop("pipelined", start, stop, None, int(num_stages))


class _ParallelLoop(LoopFrame):
    def __init__(self, extents):
        if not extents:
            raise error("T.Parallel needs at least one extent")
        out = []
        for e in extents:
            n = E.const_int(e)
            if n is None:
                raise error(f"T.Parallel: extents must be integer constants, got {E.format_expr(E.as_expr(e))}")
            if n <= 0:
                raise error(f"T.Parallel: extent must be positive, got {n}")
            out.append(n)
        self.extents = out

    def _make(self, b):
        names = list(self.names or ())
        if len(names) != len(self.extents):
            names = []
        defaults = ["i", "j", "k", "l", "m", "n"]
        vars = [E.Var(b.fresh(names[d] if names and names[d] else defaults[d % 6]), E.I32, "loop")
                for d in range(len(self.extents))]
        return vars, ir.Parallel(vars, self.extents)


def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=None, annotations=None):
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    return _ParallelLoop(extents)


def vectorized(start, stop=None, *, annotations=None):
    """Iterations are independent; as a loop of Tile IR it is a serial loop the backend may vectorize."""
    return _RangeLoop("serial", start, stop, None)


class _GridLoop:
    """T.grid(a, b, ...): nested serial loops, outermost first."""

    names = None

    def __init__(self, extents):
        if not extents:
            raise error("T.grid needs at least one extent")
        self.loops = [_RangeLoop("serial", e, None, None) for e in extents]

    def __iter__(self):
        b = B.current()
        names = list(self.names or ())
        opened = []
        vars = []
        try:
            for d, loop in enumerate(self.loops):
                loop.names = (names[d],) if len(names) == len(self.loops) and names[d] else ("ijklmn"[d % 6],)
                (var,), stmt = loop._make(b)
                ctx = b.open(stmt, stmt.body)
                ctx.__enter__()
                opened.append(ctx)
                b.loops.append(("device", len(b.frames)))
                vars.append(var)
            yield vars[0] if len(vars) == 1 else tuple(vars)
        finally:
            for ctx in reversed(opened):
                b.loops.pop()
                ctx.__exit__(None, None, None)


def grid(*extents, annotations=None):
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    return _GridLoop(extents)


Serial = serial
Unroll = unroll
Vectorized = vectorized
