"""The builder: records the statements of the function being traced.

Tracing runs the (transformed) Python body once; every tile operation, loop,
store and branch it executes appends a statement to the innermost open block.
Names are made unique per function here (`i`, `i_1`, ...), as Tile IR requires.
"""

import contextlib
import re
import threading

from . import expr as E
from . import ir
from .buffer import Buffer
from .errors import error, user_location

_local = threading.local()

# Words that start a Tile IR statement or are literals: never used as value names.
RESERVED = {"tileir", "func", "dynamic", "kernel", "alloc", "var", "let", "for", "in", "parallel",
            "if", "else", "copy", "fill", "gemm", "reduce", "cumsum", "atomic_add", "sync", "hint",
            "true", "false", "inf", "nan", "loc", "select", "cast", "grid", "threads", "serial",
            "unroll", "pipelined", "tensor", "shared", "fragment", "local"}
# C++ keywords (valid Python names such as `do`, `new`, `int`): the CUDA, HIP and CPU backends print
# value names as C++ identifiers, so such a buffer or parameter is renamed (`do_`) like a Tile IR word
# (upstream's linear attention backward names its shared dO tile `do`).
CXX_KEYWORDS = {
    "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char8_t", "char16_t", "char32_t", "compl", "concept", "const", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do",
    "double", "dynamic_cast", "enum", "explicit", "export", "extern", "float", "friend", "goto", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private",
    "protected", "public", "register", "reinterpret_cast", "requires", "restrict", "short", "signed", "sizeof",
    "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
    "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "xor_eq",
    "tl"}  # the CUDA prelude's namespace (tl::mma_sync): a local named `tl` would hide it


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def current():
    stack = _stack()
    if not stack:
        raise error("this operation is only valid inside a T.prim_func being traced")
    return stack[-1]


def active():
    stack = _stack()
    return stack[-1] if stack else None


class Builder:
    def __init__(self):
        self.names = set()
        self.body = []
        self.blocks = [self.body]
        self.frames = []      # open statements: Kernel, For, Parallel, If
        self.pending = []     # buffers/vars not yet given a name
        self.declared = False  # eager style: parameters are declared by statements (see eager.py)
        self.eager = None      # eager.EagerState while tracing an eager-style jit function
        self.call_depths = []  # len(frames) where each active T.macro call began
        self.loops = []       # (kind "python"/"device", len(frames) at its start) per open traced `for`

    # -- naming
    def fresh(self, hint):
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint or "v") or "v"
        if base[0].isdigit():
            base = "_" + base
        if base in RESERVED or base in CXX_KEYWORDS:
            base += "_"
        name, n = base, 0
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name

    def claim(self, name):
        """Register a parameter's or symbol's name; error if taken. A Tile IR keyword
        (`kernel`, `copy`, ...) or C++ keyword (`do`) is renamed (`kernel_`), as other values are."""
        if name in RESERVED or name in CXX_KEYWORDS:
            return self.fresh(name)
        if name in self.names:
            raise error(f"name {name!r} is used twice")
        self.names.add(name)
        return name

    def name_pending(self, obj, hint):
        if obj.name is None:
            obj.name = self.fresh(hint)

    def finish(self):
        for obj in self.pending:
            self.name_pending(obj, "buf" if isinstance(obj, Buffer) else "v")

    # -- structure
    @property
    def in_kernel(self):
        return any(isinstance(f, ir.Kernel) for f in self.frames)

    @property
    def in_parallel(self):
        return any(isinstance(f, ir.Parallel) for f in self.frames)

    def emit(self, stmt):
        if not isinstance(stmt, ir.Kernel) and not self.in_kernel:
            raise error("only T.Kernel blocks may appear at the top level of a prim_func; "
                        "this statement is outside any T.Kernel")
        if isinstance(stmt, ir.Kernel) and self.in_kernel:
            raise error("T.Kernel cannot be nested inside another T.Kernel")
        stmt.loc = user_location()
        self.blocks[-1].append(stmt)
        return stmt

    @contextlib.contextmanager
    def open(self, stmt, body):
        self.emit(stmt)
        self.frames.append(stmt)
        self.blocks.append(body)
        try:
            yield stmt
        finally:
            self.blocks.pop()
            self.frames.pop()

    def last_if(self):
        block = self.blocks[-1]
        if not block or not isinstance(block[-1], ir.If) or block[-1].else_ is not None:
            raise error("`else` without a matching device `if`")
        return block[-1]

    # -- statements used by several language modules
    def store(self, buffer, indices, value):
        self._require_kernel("a store")
        if buffer.dtype.kind == "q":  # fp8: the encoded bits (fp8.py)
            from . import fp8
            self.emit(ir.Store(buffer, indices, fp8.encode(value, buffer.dtype)))
            return
        self.emit(ir.Store(buffer, indices, E.cast(value, buffer.dtype)))

    def assign_var(self, var, value):
        self._require_kernel("an assignment to a T.alloc_var")
        self.emit(ir.Assign(var, E.cast(value, var.dtype)))

    def let(self, name, value):
        var = E.Var(self.fresh(name), value.dtype, "let")
        self.emit(ir.Let(var, value))
        return var

    def _require_kernel(self, what):
        if not self.in_kernel:
            raise error(f"{what} must be inside a T.Kernel")


@contextlib.contextmanager
def tracing(builder):
    _stack().append(builder)
    try:
        yield builder
    finally:
        _stack().pop()
