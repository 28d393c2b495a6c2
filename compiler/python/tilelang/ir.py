"""Tile IR statements, functions, and the text printer (formats/tile_ir.md).

Statements are plain records; ``print_module`` renders them in the printed
form of Tile IR v1 (one statement per line, two-space indentation, every
statement carrying ``loc("file.py", line)`` so compiler diagnostics can point
at the user's program).
"""

from .expr import cast, format_expr  # noqa: F401  (cast re-exported for dtypes.__call__)
from .expr import as_expr

VERSION = 1


class Stmt:
    loc = (None, None)
    blocks = ()


class Kernel(Stmt):
    def __init__(self, grid, threads, vars):
        self.grid, self.threads, self.vars, self.body = grid, threads, vars, []
        self.blocks = ("body",)


class Alloc(Stmt):
    def __init__(self, buffer):
        self.buffer = buffer


class VarDecl(Stmt):
    def __init__(self, var, init):
        self.var, self.init = var, init


class Let(Stmt):
    def __init__(self, var, value):
        self.var, self.value = var, value


class Store(Stmt):
    def __init__(self, buffer, indices, value):
        self.buffer, self.indices, self.value = buffer, indices, value


class Assign(Stmt):
    def __init__(self, var, value):
        self.var, self.value = var, value


class For(Stmt):
    def __init__(self, var, kind, start, stop, step=None, stages=None):
        self.var, self.kind, self.start, self.stop = var, kind, start, stop
        self.step, self.stages, self.body = step, stages, []
        self.blocks = ("body",)


class Parallel(Stmt):
    def __init__(self, vars, extents):
        self.vars, self.extents, self.body = vars, extents, []
        self.blocks = ("body",)


class If(Stmt):
    def __init__(self, cond):
        self.cond, self.then, self.else_ = cond, [], None
        self.blocks = ("then",)


class Copy(Stmt):
    def __init__(self, src, dst):
        self.src, self.dst = src, dst


class Fill(Stmt):
    def __init__(self, region, value):
        self.region, self.value = region, value


class Gemm(Stmt):
    def __init__(self, a, b, c, trans_a, trans_b, clear_accum, policy, k_pack, wg_wait=0):
        self.a, self.b, self.c = a, b, c
        self.trans_a, self.trans_b, self.clear_accum = trans_a, trans_b, clear_accum
        self.policy, self.k_pack, self.wg_wait = policy, k_pack, wg_wait


class Reduce(Stmt):
    def __init__(self, op, src, dst, dim, clear):
        self.op, self.src, self.dst, self.dim, self.clear = op, src, dst, dim, clear


class Cumsum(Stmt):
    def __init__(self, src, dst, dim, reverse):
        self.src, self.dst, self.dim, self.reverse = src, dst, dim, reverse


class AtomicAdd(Stmt):
    def __init__(self, dst, value=None, src=None):
        self.dst, self.value, self.src = dst, value, src


class Sync(Stmt):
    pass


class Hint(Stmt):
    def __init__(self, name, args):
        self.name, self.args = name, args


class CallExtern(Stmt):
    """T.call_extern: `args` holds expressions and Address(load) values (pointers)."""

    def __init__(self, dtype, name, args):
        self.dtype, self.name, self.args = dtype, name, args


class Address:
    """The address of one buffer element (T.address_of / T.access_ptr): only an
    argument of T.call_extern."""

    def __init__(self, load):
        self.load = load


class Function:
    """One Tile IR function: the result of tracing a T.prim_func. `sources`: the
    T.import_source texts, in order, each once."""

    def __init__(self, name, params, symbols, body, loc, sources=()):
        self.name, self.params, self.symbols, self.body, self.loc = name, params, symbols, body, loc
        self.sources = list(sources)


# ---------------------------------------------------------------- printer

def _str(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _loc(loc):
    file, line = loc
    return f" loc({_str(file)}, {line})" if file is not None else ""


def _e(x):
    return format_expr(as_expr(x))


def _dims(shape):
    return ", ".join(_e(d) for d in shape)


def _param(p):
    from .buffer import Buffer
    if isinstance(p, Buffer):
        return f"{p.name}: tensor[{_dims(p.shape)}] {p.dtype.ir}"
    return f"{p.name}: {p.dtype.ir}"


def print_module(functions):
    lines = [f"tileir {VERSION}", ""]
    for i, fn in enumerate(functions):
        if i:
            lines.append("")
        lines.extend(_function(fn))
    return "\n".join(lines) + "\n"


def _function(fn):
    head = f"func @{fn.name}({', '.join(_param(p) for p in fn.params)})"
    if fn.symbols:
        head += f" dynamic({', '.join(f'{s.name}: {s.dtype.ir}' for s in fn.symbols)})"
    out = [head + _loc(fn.loc) + " {"]
    out += [f"  import_source {_str(src)}" for src in getattr(fn, "sources", ())]
    _block(fn.body, 1, out)
    out.append("}")
    return out


def _block(stmts, depth, out):
    for s in stmts:
        _stmt(s, depth, out)


def _open(text, s, depth, body, out):
    pad = "  " * depth
    out.append(f"{pad}{text}{_loc(s.loc)} {{")
    _block(body, depth + 1, out)
    out.append(pad + "}")


def _stmt(s, depth, out):
    pad = "  " * depth
    if isinstance(s, Kernel):
        names = ", ".join(v.name for v in s.vars)
        text = (f"kernel grid({', '.join(_e(g) for g in s.grid)}) "
                f"threads({', '.join(str(t) for t in s.threads)}) -> ({names})")
        _open(text, s, depth, s.body, out)
        return
    if isinstance(s, For):
        if s.kind == "pipelined":
            rng = f"pipelined({_e(s.start)}, {_e(s.stop)}, stages={s.stages})"
        else:
            step = "" if s.step is None else f", {_e(s.step)}"
            rng = f"{s.kind}({_e(s.start)}, {_e(s.stop)}{step})"
        _open(f"for {s.var.name} in {rng}", s, depth, s.body, out)
        return
    if isinstance(s, Parallel):
        text = (f"parallel ({', '.join(v.name for v in s.vars)}) in "
                f"({', '.join(str(e) for e in s.extents)})")
        _open(text, s, depth, s.body, out)
        return
    if isinstance(s, If):
        out.append(f"{pad}if {_e(s.cond)}{_loc(s.loc)} {{")
        _block(s.then, depth + 1, out)
        if s.else_ is not None:
            out.append(pad + "} else {")
            _block(s.else_, depth + 1, out)
        out.append(pad + "}")
        return
    out.append(pad + _simple(s) + _loc(s.loc))


def _simple(s):
    if isinstance(s, Alloc):
        b = s.buffer
        return f"alloc {b.name}: {b.scope_name}[{_dims(b.shape)}] {b.dtype.ir}"
    if isinstance(s, VarDecl):
        init = "" if s.init is None else f" = {_e(s.init)}"
        return f"var {s.var.name}: {s.var.dtype.ir}{init}"
    if isinstance(s, Let):
        return f"let {s.var.name} = {_e(s.value)}"
    if isinstance(s, Store):
        return f"{s.buffer.name}[{', '.join(_e(i) for i in s.indices)}] = {_e(s.value)}"
    if isinstance(s, Assign):
        return f"{s.var.name} = {_e(s.value)}"
    if isinstance(s, Copy):
        return f"copy {s.src.format()} -> {s.dst.format()}"
    if isinstance(s, Fill):
        return f"fill {s.region.format()}, {_e(s.value)}"
    if isinstance(s, Gemm):
        text = f"gemm {s.a.format()}, {s.b.format()} -> {s.c.format()}"
        if s.trans_a:
            text += " trans_a"
        if s.trans_b:
            text += " trans_b"
        if s.clear_accum:
            text += " clear_accum"
        if s.policy != "square":
            text += f" policy={s.policy}"
        if s.k_pack != 1:
            text += f" k_pack={s.k_pack}"
        if s.wg_wait != 0:
            text += f" wg_wait={s.wg_wait}"
        return text
    if isinstance(s, Reduce):
        return f"reduce {s.op} {s.src.format()} -> {s.dst.format()} dim={s.dim}" + (" clear" if s.clear else "")
    if isinstance(s, Cumsum):
        return f"cumsum {s.src.format()} -> {s.dst.format()} dim={s.dim}" + (" reverse" if s.reverse else "")
    if isinstance(s, AtomicAdd):
        if s.src is not None:
            return f"atomic_add {s.src.format()} -> {s.dst.format()}"
        return f"atomic_add {s.dst.format()}, {_e(s.value)}"
    if isinstance(s, Sync):
        return "sync"
    if isinstance(s, CallExtern):
        args = ", ".join(f"&{_e(a.load)}" if isinstance(a, Address) else _e(a) for a in s.args)
        return f"call_extern {s.dtype.ir} {s.name}({args})"
    if isinstance(s, Hint):
        # Buffers print as their names, strings quoted, numbers as literals.
        args = ", ".join(a.name if hasattr(a, "scope_name") else _str(a) if isinstance(a, str) else str(a)
                         for a in s.args)
        return f"hint {s.name}" + (f" {args}" if args else "")
    raise TypeError(f"unknown statement {s!r}")
