"""Thread-level TIR inside a T.Kernel: T.thread_binding, T.get_thread_binding, per-thread
T.alloc_local buffers, T.tvm_thread_allreduce (under T.attr(T.comm_reducer(...), "reduce_scope")),
T.dp4a.

Tile IR has no thread index: its scalar code runs once per block and T.Parallel spreads
iterations over the threads however a backend likes. So a kernel that names the thread index
is rewritten when its T.Kernel closes (lower_kernel):

* every T.alloc_local buffer L of shape S becomes a fragment L' of shape [Tz.., Ty, Tx] + S
  (one copy per thread: T.Kernel's `threads=(Tx, Ty, Tz)`, x fastest);
* each maximal run of kernel-level statements that touch the thread index or a local
  becomes one `T.Parallel(Tz.., Ty, Tx)` whose loop variables stand for the thread index,
  with L[i] read and written as L'[tz.., ty, tx, i]: the statements run once per thread,
  in order, as upstream's per-thread code does;
* a serial loop (or an `if` on a block-uniform condition) that holds both per-thread code and
  tile operations (T.Parallel, T.copy into shared memory, ...) stays a kernel-level loop and
  its body is split the same way; the boundaries between those statements are where the
  GPU lowering puts its barriers (upstream's code has T.sync_threads / its own barriers there);
* T.tvm_thread_allreduce(1, value, True, dst, *thread_vars) is a `reduce` over the reduced
  thread axes of a fragment holding each thread's value, then a T.Parallel that gives every
  thread the result;
* lets whose value depends on the thread index and that are used again after a tile
  operation are re-evaluated there when they read no buffer (index arithmetic), and kept per
  thread otherwise.

What is not supported fails with "unsupported feature: ..." and the line: a tile operation or
T.Parallel under an `if` on the thread index, a loop bound that depends on it, T.alloc_var
scalars in such a kernel, tile operations on local buffers other than T.clear / T.fill.
"""

import contextlib

from .. import builder as B
from .. import expr as E
from .. import ir
from ..buffer import Buffer, Region
from ..errors import error

AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


class ThreadAllReduce(ir.Stmt):
    """Marker left by T.tvm_thread_allreduce until lower_kernel replaces it."""

    def __init__(self, op, value, dst, axes):
        self.op, self.value, self.dst, self.axes = op, value, dst, axes


def _kernel_frame(what):
    b = B.current()
    for f in reversed(b.frames):
        if isinstance(f, ir.Kernel):
            return b, f
    raise error(f"{what} must be inside a T.Kernel")


def _thread_var(axis, what):
    b, k = _kernel_frame(what)
    if axis >= len(k.threads):
        raise error(f"{what}: {AXES[axis]} but T.Kernel has threads={tuple(k.threads)!r} "
                    f"({len(k.threads)} dimension{'s' if len(k.threads) > 1 else ''})")
    tv = k.__dict__.setdefault("thread_vars", {})
    if axis not in tv:
        tv[axis] = E.Var(b.fresh(("tx", "ty", "tz")[axis]), E.I32, "thread")
    return tv[axis]


def thread_binding(start, stop=None, thread="threadIdx.x", annotations=None, **kwargs):
    """TVM's `T.thread_binding(0, n, thread="threadIdx.x")` inside T.Kernel: the thread index."""
    if stop is None:
        start, stop = 0, start
    if thread not in AXES:
        raise error(f"unsupported feature: T.thread_binding(thread={thread!r}) (only threadIdx.x/y/z; "
                    "block indices come from T.Kernel)")
    axis = AXES.index(thread)
    _, k = _kernel_frame("T.thread_binding")
    lo, hi = E.const_int(start), E.const_int(stop)
    if lo != 0 or axis >= len(k.threads) or hi != k.threads[axis]:
        raise error(f"T.thread_binding({E.format_expr(E.as_expr(start))}, {E.format_expr(E.as_expr(stop))}, "
                    f"thread={thread!r}): expected 0 to the T.Kernel's thread extent along that axis, "
                    f"threads={tuple(k.threads)!r}")
    return _thread_var(axis, "T.thread_binding")


def get_thread_binding(dim=0):
    """upstream's T.get_thread_binding(dim): threadIdx.x (dim 0), .y, .z."""
    if dim not in (0, 1, 2):
        raise error(f"T.get_thread_binding: dim must be 0, 1 or 2, got {dim!r}")
    return _thread_var(dim, "T.get_thread_binding")


def get_block_binding(dim=0):
    """upstream's T.get_block_binding(dim): the enclosing T.Kernel's block index along dim."""
    _, k = _kernel_frame("T.get_block_binding")
    if dim not in range(len(k.vars)):
        raise error(f"T.get_block_binding: dim {dim!r}, but T.Kernel has {len(k.vars)} block dimension(s)")
    return k.vars[dim]


def get_thread_bindings():
    _, k = _kernel_frame("T.get_thread_bindings")
    return [get_thread_binding(d) for d in range(len(k.threads))]


class CommReducer:
    """T.comm_reducer(fn, identity): which combination T.tvm_thread_allreduce performs."""

    def __init__(self, fn, identity):
        x, y = E.Var("x", E.F32, "let"), E.Var("y", E.F32, "let")
        r = fn(x, y)
        if isinstance(r, E.Binary) and r.op == "+":
            self.op = "sum"
        elif isinstance(r, E.Call) and r.fn in ("max", "min"):
            self.op = r.fn
        else:
            raise error("unsupported feature: T.comm_reducer other than x + y, T.max(x, y), T.min(x, y)")
        self.identity = identity


def comm_reducer(fn, identity, span=None):
    return CommReducer(fn, identity)


@contextlib.contextmanager
def attr(node, key, value, span=None):
    """TVM's T.attr: the "reduce_scope" of a comm_reducer sets what T.tvm_thread_allreduce
    combines with; other attributes are scheduling hints without effect here."""
    b = B.current()
    stack = b.__dict__.setdefault("reducers", [])
    pushed = key == "reduce_scope" and isinstance(node, CommReducer)
    if pushed:
        stack.append(node)
    try:
        yield
    finally:
        if pushed:
            stack.pop()


def evaluate(value, span=None):
    """T.evaluate(call): the calls this project knows emit their statements themselves."""
    return None


def tvm_thread_allreduce(size, *args, dtype=None):
    """TVM's builtin: tvm_thread_allreduce(1, value, cond, dst, *thread_vars)."""
    if E.const_int(size) != 1 or len(args) < 4:
        raise error("unsupported feature: T.tvm_thread_allreduce with more than one value "
                    "(expected (1, value, cond, dst, thread_var, ...))")
    value, cond, dst, axes = args[0], args[1], args[2], args[3:]
    if E.const_int(cond) != 1:
        raise error("unsupported feature: T.tvm_thread_allreduce with a condition other than True")
    b, k = _kernel_frame("T.tvm_thread_allreduce")
    tv = k.__dict__.get("thread_vars", {})
    red = []
    for a in axes:
        hit = [ax for ax, v in tv.items() if v is a]
        if not hit:
            raise error("T.tvm_thread_allreduce: reduce over thread variables from T.thread_binding / "
                        f"T.get_thread_binding, got {E.format_expr(E.as_expr(a))}")
        red.append(hit[0])
    if not isinstance(dst, E.Load) or dst.buffer.scope_name != "local":
        raise error("T.tvm_thread_allreduce: the destination must be an element of a T.alloc_local buffer")
    stack = b.__dict__.get("reducers") or []
    op = stack[-1].op if stack else "sum"
    b.emit(ThreadAllReduce(op, E.as_expr(value), dst, sorted(set(red))))


def dp4a(a, b, c):
    """c += a[0:4] . b[0:4] in int32 (a, b: element addresses of int8 buffers)."""
    for x, what in ((a, "A"), (b, "B"), (c, "C")):
        if not isinstance(x, E.Load):
            raise error(f"T.dp4a: {what} must be a buffer element, e.g. A_local[k]")
    acc = E.as_expr(c)
    for d in range(4):
        ia = list(a.indices[:-1]) + [a.indices[-1] + d]
        ib = list(b.indices[:-1]) + [b.indices[-1] + d]
        acc = acc + E.cast(a.buffer[tuple(ia)], E.I32) * E.cast(b.buffer[tuple(ib)], E.I32)
    B.current().store(c.buffer, list(c.indices), acc)


# ---------------------------------------------------------------- the rewrite

def _map_expr(e, fn):
    """Rebuild `e` bottom-up; fn(node) returns a replacement or None."""
    if isinstance(e, E.Load):
        n = E.Load(e.buffer, [_map_expr(i, fn) for i in e.indices])
        n.dtype = e.dtype
    elif isinstance(e, E.Binary):
        n = E.Binary(e.op, _map_expr(e.a, fn), _map_expr(e.b, fn), e.dtype)
    elif isinstance(e, E.Unary):
        n = E.Unary(e.op, _map_expr(e.a, fn), e.dtype)
    elif isinstance(e, E.Call):
        n = E.Call(e.fn, [_map_expr(a, fn) for a in e.args], e.dtype)
    elif isinstance(e, E.Select):
        n = E.Select(_map_expr(e.cond, fn), _map_expr(e.a, fn), _map_expr(e.b, fn))
        n.dtype = e.dtype
    elif isinstance(e, E.Cast):
        n = E.Cast(e.dtype, _map_expr(e.x, fn))
    else:
        n = e
    r = fn(n)
    return n if r is None else r


def _walk(e, fn):
    _map_expr(e, lambda n: fn(n) and None)


def _stmt_exprs(s):
    """The expressions a statement holds directly (not those of nested statements)."""
    out = []
    if isinstance(s, (ir.Let,)):
        out.append(s.value)
    elif isinstance(s, ir.VarDecl):
        out += [s.init] if s.init is not None else []
    elif isinstance(s, ir.Store):
        out += list(s.indices) + [s.value]
    elif isinstance(s, ir.Assign):
        out.append(s.value)
    elif isinstance(s, ir.For):
        out += [s.start, s.stop] + ([s.step] if s.step is not None else [])
    elif isinstance(s, ir.If):
        out.append(s.cond)
    elif isinstance(s, ThreadAllReduce):
        out += [s.value, s.dst]
    elif isinstance(s, ir.Fill):
        out.append(s.value)
    elif isinstance(s, ir.AtomicAdd) and s.value is not None:
        out.append(s.value)
    elif isinstance(s, ir.CallExtern):  # pointers as their element loads: a local's makes it per-thread
        out += [a.load if isinstance(a, ir.Address) else a for a in s.args]
    for r in _regions(s):
        for start, ext, _ in r.ranges:
            out += [start, ext]
    return [E.as_expr(x) for x in out]


def _regions(s):
    if isinstance(s, ir.Copy):
        return [s.src, s.dst]
    if isinstance(s, ir.Fill):
        return [s.region]
    if isinstance(s, ir.Gemm):
        return [s.a, s.b, s.c]
    if isinstance(s, (ir.Reduce, ir.Cumsum)):
        return [s.src, s.dst]
    if isinstance(s, ir.AtomicAdd):
        return [s.dst] + ([s.src] if s.src is not None else [])
    return []


def _children(s):
    out = []
    for name in s.blocks:
        out += getattr(s, name)
    if isinstance(s, ir.If) and s.else_ is not None:
        out += s.else_
    return out


class _Rewriter:
    def __init__(self, b, kernel):
        self.b = b
        self.k = kernel
        self.threads = list(kernel.threads)
        self.tvars = kernel.__dict__.get("thread_vars", {})
        self.locals = {}         # local Buffer -> promoted fragment Buffer
        self.tdep_lets = {}      # let Var -> value (thread-dependent)
        self.region_only = {}    # let Var -> line: per-thread lets that read buffers (one region only)

    # -- classification
    def _uses(self, s, deep=True):
        """(touches thread state, has tile-level statements) for statement s."""
        thread, tile = False, False

        def visit_expr(e):
            nonlocal thread

            def f(n):
                nonlocal thread
                if isinstance(n, E.Var) and n in self.region_only:
                    raise error(f"unsupported feature: the per-thread value {n.name} (line {self.region_only[n]}) "
                                f"read after a tile operation (line {s.loc[1]}); it reads a buffer, so it "
                                "cannot be recomputed there: keep it in a T.alloc_local((1,), dtype) buffer")
                if isinstance(n, E.Var) and (n.kind == "thread" or n in self.tdep_lets):
                    thread = True
                if isinstance(n, E.Load) and self._local(n.buffer):
                    thread = True
            _walk(e, f)

        for e in _stmt_exprs(s):
            visit_expr(e)
        if isinstance(s, ir.Store) and self._local(s.buffer):
            thread = True
        if isinstance(s, ir.CallExtern):  # upstream's per-thread call: with the per-thread code around it
            thread = True
        if isinstance(s, ThreadAllReduce):
            return True, True
        if isinstance(s, (ir.Parallel, ir.Copy, ir.Gemm, ir.Reduce, ir.Cumsum, ir.Sync)) or (
                isinstance(s, ir.AtomicAdd) and s.src is not None):
            tile = True
            if any(r.buffer in self.locals for r in _regions(s)):
                raise error(f"unsupported feature: {type(s).__name__.lower()} on a T.alloc_local buffer in a kernel "
                            f"that uses T.thread_binding / T.get_thread_binding (line {s.loc[1]})")
        if isinstance(s, ir.Fill):
            if self._local(s.region.buffer):
                thread = True
            else:
                tile = True
        if isinstance(s, ir.VarDecl) or isinstance(s, ir.Assign):
            raise error("unsupported feature: T.alloc_var in a kernel that uses T.thread_binding / "
                        f"T.get_thread_binding (line {s.loc[1]}); use a T.alloc_local((1,), dtype) buffer")
        if deep:
            for c in _children(s):
                t2, g2 = self._uses(c)
                thread, tile = thread or t2, tile or g2
        return thread, tile

    # -- rewriting
    def run(self):
        body = self.k.body
        for s in body:
            if isinstance(s, ir.Alloc) and s.buffer.scope_name == "local":
                buf = s.buffer
                dims = [self.threads[a] for a in reversed(range(len(self.threads)))]
                self.locals[buf] = Buffer(self.b.fresh((buf.name or "local") + "_t"), tuple(dims) + tuple(buf.shape),
                                          buf.dtype, "fragment")
        self.allocs = []
        body = self._block(body)
        n = 0
        while n < len(body) and isinstance(body[n], ir.Alloc):
            n += 1
        self.k.body = body[:n] + self.allocs + body[n:]

    def _block(self, stmts):
        """Kernel-level block: runs of per-thread statements become T.Parallel regions."""
        out, run = [], []

        def flush():
            if run:
                out.append(self._region(list(run)))
                run.clear()

        for s in stmts:
            if isinstance(s, ir.Alloc):
                if s.buffer in self.locals:
                    s.buffer = self.locals[s.buffer]
                out.append(s)
                continue
            if isinstance(s, ir.Let):
                thread, _ = self._uses(s)
                if thread:
                    self.tdep_lets[s.var] = s.value
                    run.append(s)
                else:
                    flush()
                    out.append(s)
                continue
            thread, tile = self._uses(s)
            if isinstance(s, ThreadAllReduce):
                flush()
                out += self._allreduce(s)
            elif isinstance(s, ir.Parallel) and thread:
                raise error("unsupported feature: T.Parallel that uses the thread index or a T.alloc_local buffer "
                            f"of a kernel with T.thread_binding / T.get_thread_binding (line {s.loc[1]})")
            elif not thread:
                flush()
                out.append(s)
            elif not tile:
                run.append(s)
            elif isinstance(s, ir.For):
                if self._expr_thread(s.start) or self._expr_thread(s.stop) or (
                        s.step is not None and self._expr_thread(s.step)):
                    raise error("unsupported feature: a loop bound that depends on the thread index around tile "
                                f"operations (line {s.loc[1]})")
                flush()
                s.body = self._block(s.body)
                out.append(s)
            elif isinstance(s, ir.If) and not self._expr_thread(s.cond):
                flush()
                s.then = self._block(s.then)
                if s.else_ is not None:
                    s.else_ = self._block(s.else_)
                out.append(s)
            else:
                raise error("unsupported feature: a tile operation or T.Parallel under per-thread control flow "
                            f"(an `if` on the thread index) (line {s.loc[1]})")
        flush()
        return out

    def _local(self, buf):
        """A per-thread buffer: a kernel-level local (promoted) or one allocated in a nested block
        (kept as it is: a per-thread array inside the T.Parallel region that uses it)."""
        return buf in self.locals or getattr(buf, "scope_name", None) == "local"

    def _expr_thread(self, e):
        hit = False

        def f(n):
            nonlocal hit
            if isinstance(n, E.Var) and (n.kind == "thread" or n in self.tdep_lets):
                hit = True
            if isinstance(n, E.Load) and self._local(n.buffer):
                hit = True
        _walk(E.as_expr(e), f)
        return hit

    def _region_vars(self):
        n = len(self.threads)
        vs = {}
        for a in range(n):
            v = self.tvars.get(a)
            vs[a] = E.Var(self.b.fresh((v.name if v is not None else ("tx", "ty", "tz")[a])), E.I32, "loop")
        return vs

    def _region(self, stmts):
        """One T.Parallel over the threads (z, y, x) running `stmts` per thread."""
        vs = self._region_vars()
        order = list(reversed(range(len(self.threads))))
        par = ir.Parallel([vs[a] for a in order], [self.threads[a] for a in order])
        par.loc = stmts[0].loc
        lets = {}  # defining let var -> this region's var (lets defined in this region)
        tids = [vs[a] for a in order]
        sub = self._substituter(vs, lets, tids)
        par.body = [self._stmt(s, sub, lets) for s in stmts]
        return par

    def _substituter(self, vs, lets, tids):
        def fn(n):
            if isinstance(n, E.Var) and n.kind == "thread":
                for a, v in self.tvars.items():
                    if v is n:
                        return vs[a]
            if isinstance(n, E.Var) and n in self.tdep_lets and n not in lets:
                # A per-thread let of an earlier region: re-evaluate (it reads no buffer:
                # checked where it is defined).
                return _map_expr(self.tdep_lets[n], fn)
            if isinstance(n, E.Load) and n.buffer in self.locals:
                ld = E.Load(self.locals[n.buffer], list(tids) + list(n.indices))
                ld.dtype = n.dtype
                return ld
            return None
        return lambda e: _map_expr(E.as_expr(e), fn)

    def _stmt(self, s, sub, lets):
        if isinstance(s, ir.Let):
            reads = []
            _walk(s.value, lambda n: reads.append(n) if isinstance(n, E.Load) else None)
            s.value = sub(s.value)
            lets[s.var] = True
            if reads:
                # Re-evaluated in a later region it could see changed buffers: only this region uses it.
                self.tdep_lets.pop(s.var, None)
                self.region_only[s.var] = s.loc[1]
            return s
        if isinstance(s, ir.Store):
            if s.buffer in self.locals:
                tids = sub(E.Load(s.buffer, [0] * len(s.buffer.shape))).indices[:len(self.threads)]
                s.buffer = self.locals[s.buffer]
                s.indices = list(tids) + [sub(i) for i in s.indices]
            else:
                s.indices = [sub(i) for i in s.indices]
            s.value = sub(s.value)
            return s
        if isinstance(s, ir.Fill):  # T.clear / T.fill of a local: this thread's copy
            buf = s.region.buffer
            if not s.region.is_whole():
                raise error(f"unsupported feature: T.fill of part of a T.alloc_local buffer (line {s.loc[1]})")
            body = []
            idx = []
            frame = body
            stmt = None
            for d in buf.shape:
                v = E.Var(self.b.fresh("e"), E.I32, "loop")
                f = ir.For(v, "serial", E.const(0, E.I32), E.const(E.const_int(d), E.I32))
                f.loc = s.loc
                frame.append(f)
                frame = f.body
                idx.append(v)
                stmt = stmt or f
            st = ir.Store(buf, idx, E.cast(s.value, buf.dtype))
            st.loc = s.loc
            frame.append(st)
            return self._stmt(stmt, sub, lets)
        if isinstance(s, ir.For):
            s.start, s.stop = sub(s.start), sub(s.stop)
            if s.step is not None:
                s.step = sub(s.step)
            s.body = [self._stmt(c, sub, lets) for c in s.body]
            return s
        if isinstance(s, ir.If):
            s.cond = sub(s.cond)
            s.then = [self._stmt(c, sub, lets) for c in s.then]
            if s.else_ is not None:
                s.else_ = [self._stmt(c, sub, lets) for c in s.else_]
            return s
        if isinstance(s, ir.AtomicAdd) and s.value is not None:
            s.dst = Region(s.dst.buffer, [(sub(a), sub(b_), single) for a, b_, single in s.dst.ranges])
            s.value = sub(s.value)
            return s
        if isinstance(s, ir.Hint):
            return s
        if isinstance(s, ir.CallExtern):  # each thread passes its own copy of a local
            s.args = [ir.Address(sub(a.load)) if isinstance(a, ir.Address) else sub(a) for a in s.args]
            return s
        raise error(f"unsupported feature: {type(s).__name__} in per-thread code (line {s.loc[1]})")

    def _allreduce(self, s):
        """reduce over the reduced thread axes, then every thread gets the result."""
        n = len(self.threads)
        kept = [a for a in reversed(range(n)) if a not in s.axes]
        red = [a for a in reversed(range(n)) if a in s.axes]
        ksize, rsize = 1, 1
        for a in kept:
            ksize *= self.threads[a]
        for a in red:
            rsize *= self.threads[a]

        def lin(axes, vs):
            e = E.const(0, E.I32)
            for a in axes:
                e = e * self.threads[a] + vs[a]
            return e

        dt = s.value.dtype
        src = Buffer(self.b.fresh("allreduce_src"), (ksize, rsize), dt, "fragment")
        dst = Buffer(self.b.fresh("allreduce_dst"), (ksize,), dt, "fragment")
        out = []
        for buf in (src, dst):  # with the kernel's other allocations (run() puts them first)
            a = ir.Alloc(buf)
            a.loc = s.loc
            self.allocs.append(a)
        st = ir.Store(src, [lin(kept, {a: E.Var(f"@{a}", E.I32) for a in range(n)}),
                            lin(red, {a: E.Var(f"@{a}", E.I32) for a in range(n)})], s.value)
        st.loc = s.loc
        p1 = self._region([st])
        # The placeholders @a are the region's thread variables.
        vs = {a: v for a, v in zip(reversed(range(n)), p1.vars)}
        fix = (lambda e: _map_expr(e, lambda m: vs[int(m.name[1:])]
                                   if isinstance(m, E.Var) and m.name.startswith("@") else None))
        p1.body[0].indices = [fix(i) for i in p1.body[0].indices]
        out.append(p1)
        r = ir.Reduce(s.op, Region(src, [(E.const(0, E.I32), ksize, False), (E.const(0, E.I32), rsize, False)]),
                      Region(dst, [(E.const(0, E.I32), ksize, False)]), 1, True)
        r.loc = s.loc
        out.append(r)
        back = ir.Store(s.dst.buffer, list(s.dst.indices), E.Load(dst, [lin(kept, {a: E.Var(f"@{a}", E.I32)
                                                                                     for a in range(n)})]))
        back.loc = s.loc
        p2 = self._region([back])
        vs = {a: v for a, v in zip(reversed(range(n)), p2.vars)}
        p2.body[0].value = fix(p2.body[0].value)
        out.append(p2)
        return out


def lower_kernel(b, kernel):
    """Called when a T.Kernel closes: rewrite per-thread code if the kernel named a thread index."""
    if not kernel.__dict__.get("thread_vars"):
        for s in _all_stmts(kernel.body):
            if isinstance(s, ThreadAllReduce):
                raise error("T.tvm_thread_allreduce needs the thread variables of T.thread_binding")
        return
    _Rewriter(b, kernel).run()


def _all_stmts(stmts):
    for s in stmts:
        yield s
        yield from _all_stmts(_children(s))
