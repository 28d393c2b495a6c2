"""T.Kernel: one launch over a 1-3 dimensional grid of blocks."""

import numbers

from .. import builder as B
from .. import expr as E
from .. import ir
from ..errors import error


def _cluster(cluster_dims):
    """upstream's T.Kernel(..., cluster_dims=...): an int or a 1-3 tuple of blocks per thread-block
    cluster. Here: 1 (none) or 2 along x, as `hint cluster 2` -- the sm_90a warp-specialized kernel
    becomes a 2-block cluster whose producers multicast the TMA tiles both blocks load
    (compiler/lowering/gpu cluster.cc); every other target and kernel form ignores the hint (the
    same results). The grid's x extent must then be static and even, or the hint is ignored too
    (the kernel's build notes say why)."""
    if cluster_dims is None:
        return 1
    dims = (cluster_dims,) if isinstance(cluster_dims, numbers.Integral) else tuple(cluster_dims)
    if (not 1 <= len(dims) <= 3 or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims)
            or tuple(dims[1:]) not in ((), (1,), (1, 1)) or dims[0] not in (1, 2)):
        raise error(f"T.Kernel: cluster_dims={cluster_dims!r} is not supported: 1 or 2 blocks along x "
                    f"(2, (2, 1) or (2, 1, 1)) -- clusters of 2 with TMA multicast on sm_90a")
    return int(dims[0])


class Kernel:
    def __init__(self, *blocks, threads=None, prelude=None, is_cpu=False, cluster_dims=None):
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
        self.cluster = _cluster(cluster_dims)
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
        if self.cluster > 1:
            b.emit(ir.Hint("cluster", [self.cluster]))
        return vars[0] if len(vars) == 1 else tuple(vars)

    def __exit__(self, *exc):
        r = self._ctx.__exit__(*exc)
        if exc[0] is None:  # per-thread code (T.thread_binding, T.get_thread_binding): threads.py
            from .threads import lower_kernel
            lower_kernel(B.current(), self._stmt)
        return r
