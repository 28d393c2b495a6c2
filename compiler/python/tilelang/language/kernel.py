"""T.Kernel: one launch over a 1-3 dimensional grid of blocks."""

import numbers

from .. import builder as B
from .. import expr as E
from .. import ir
from ..errors import error


class Kernel:
    def __init__(self, *blocks, threads=None, prelude=None, is_cpu=False):
        if len(blocks) == 1 and isinstance(blocks[0], (list, tuple)):
            blocks = tuple(blocks[0])
        if not 1 <= len(blocks) <= 3:
            raise error(f"T.Kernel takes 1 to 3 grid extents, got {len(blocks)}")
        grid = []
        for g in blocks:
            g = E.as_expr(g)
            if not g.dtype.is_int:
                raise error(f"T.Kernel: grid extent must be an integer, got {g.dtype}")
            n = E.const_int(g)
            if n is not None and n <= 0:
                raise error(f"T.Kernel: grid extent must be positive, got {n}")
            grid.append(E.cast(g, E.I32))
        if threads is None:
            threads = (128,)
        elif isinstance(threads, numbers.Integral):
            threads = (int(threads),)
        else:
            threads = tuple(threads)
        if not 1 <= len(threads) <= 3 or not all(isinstance(t, numbers.Integral) and t > 0 for t in threads):
            raise error(f"T.Kernel: threads must be 1 to 3 positive integers, got {threads!r}")
        self.grid = grid
        self.threads = tuple(int(t) for t in threads)
        self.names = None
        self._ctx = None

    def __enter__(self):
        b = B.current()
        defaults = ["bx", "by", "bz"]
        names = list(self.names or ())
        if len(names) == 1 and len(self.grid) > 1:
            names = []  # `as blocks` bound to the tuple: use the default names
        names = [(names[i] if i < len(names) and names[i] else defaults[i]) for i in range(len(self.grid))]
        vars = [E.Var(b.fresh(n), E.I32, "block") for n in names]
        stmt = ir.Kernel(self.grid, self.threads, vars)
        self._stmt = stmt
        self._ctx = b.open(stmt, stmt.body)
        self._ctx.__enter__()
        return vars[0] if len(vars) == 1 else tuple(vars)

    def __exit__(self, *exc):
        r = self._ctx.__exit__(*exc)
        if exc[0] is None:  # per-thread code (T.thread_binding, T.get_thread_binding): threads.py
            from .threads import lower_kernel
            lower_kernel(B.current(), self._stmt)
        return r
