"""Expression nodes of Tile IR, their operators, TileLang's promotion rules,
constant folding, and the printer for expressions.

Every node has one dtype. Binary operators convert both operands to one dtype
with explicit ``Cast`` nodes, because Tile IR requires equal operand dtypes.
"""

import math
import numbers

from . import dtypes as _dt
from .dtypes import DTYPES, canonical, promote
from .errors import error

BOOL, I32, I64, F32 = DTYPES["bool"], DTYPES["int32"], DTYPES["int64"], DTYPES["float32"]

# Binary operators: Tile IR token -> precedence (higher binds tighter).
PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
        "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
UNARY_PREC = 11
ATOM_PREC = 12
COMPARE = {"==", "!=", "<", "<=", ">", ">="}
LOGICAL = {"&&", "||"}
BITWISE = {"&", "|", "^", "<<", ">>"}


def is_python_scalar(v):
    return isinstance(v, (bool, numbers.Integral, numbers.Real)) and not isinstance(v, Expr)


class Expr:
    """A device value. Python operators on it build IR instead of computing."""

    dtype = None

    def __bool__(self):
        raise error("a device value cannot be used as a Python bool here; "
                    "use `if` on it inside the kernel, or T.if_then_else")

    __hash__ = object.__hash__

    # Arithmetic (Python semantics of the operator, TileLang's dtypes).
    def __add__(self, o): return binary("+", self, o)
    def __radd__(self, o): return binary("+", o, self)
    def __sub__(self, o): return binary("-", self, o)
    def __rsub__(self, o): return binary("-", o, self)
    def __mul__(self, o): return binary("*", self, o)
    def __rmul__(self, o): return binary("*", o, self)
    def __truediv__(self, o): return binary("/", self, o)
    def __rtruediv__(self, o): return binary("/", o, self)
    def __floordiv__(self, o): return floordiv(self, o)
    def __rfloordiv__(self, o): return floordiv(o, self)
    def __mod__(self, o): return floormod(self, o)
    def __rmod__(self, o): return floormod(o, self)
    def __pow__(self, o): return call("pow", self, o)
    def __rpow__(self, o): return call("pow", o, self)
    def __and__(self, o): return binary("&", self, o)
    def __rand__(self, o): return binary("&", o, self)
    def __or__(self, o): return binary("|", self, o)
    def __ror__(self, o): return binary("|", o, self)
    def __xor__(self, o): return binary("^", self, o)
    def __rxor__(self, o): return binary("^", o, self)
    def __lshift__(self, o): return binary("<<", self, o)
    def __rlshift__(self, o): return binary("<<", o, self)
    def __rshift__(self, o): return binary(">>", self, o)
    def __rrshift__(self, o): return binary(">>", o, self)
    def __lt__(self, o): return binary("<", self, o)
    def __le__(self, o): return binary("<=", self, o)
    def __gt__(self, o): return binary(">", self, o)
    def __ge__(self, o): return binary(">=", self, o)
    def __eq__(self, o): return binary("==", self, o)
    def __ne__(self, o): return binary("!=", self, o)
    def __neg__(self): return negate(self)
    def __pos__(self): return self
    def __invert__(self): return unary("~", self)
    def __abs__(self): return call("abs", self)

    def astype(self, dtype):
        return cast(self, dtype)


class Const(Expr):
    def __init__(self, value, dtype):
        self.value = value
        self.dtype = dtype


class Var(Expr):
    """A named value: block index, loop variable, let, scalar parameter, symbol."""

    def __init__(self, name, dtype, kind="let"):
        self.name = name
        self.dtype = dtype
        self.kind = kind

    def __repr__(self):
        return f"Var({self.name}: {self.dtype})"


class MutableVar(Var):
    """T.alloc_var: a per-thread mutable scalar; `x = v` in the program stores into it."""

    def __init__(self, name, dtype):
        super().__init__(name, dtype, "var")

    def __getitem__(self, index):
        return self  # upstream lets a var be read as x[0]

    def __setitem__(self, index, value):
        from . import builder
        builder.current().assign_var(self, value)


class Load(Expr):
    def __init__(self, buffer, indices):
        self.buffer = buffer
        self.indices = indices
        self.dtype = buffer.dtype


class Binary(Expr):
    def __init__(self, op, a, b, dtype):
        self.op, self.a, self.b, self.dtype = op, a, b, dtype


class Unary(Expr):
    def __init__(self, op, a, dtype):
        self.op, self.a, self.dtype = op, a, dtype


class Call(Expr):
    def __init__(self, fn, args, dtype):
        self.fn, self.args, self.dtype = fn, args, dtype


class Select(Expr):
    def __init__(self, cond, a, b):
        self.cond, self.a, self.b, self.dtype = cond, a, b, a.dtype


class Cast(Expr):
    def __init__(self, dtype, x):
        self.dtype, self.x = dtype, x


# ---------------------------------------------------------------- constructors

def const(value, dtype=None):
    """A typed constant from a Python value (range-checked for integers)."""
    if isinstance(value, Expr):
        return cast(value, dtype) if dtype is not None else value
    if dtype is None:
        dtype = default_dtype(value)
    dtype = canonical(dtype)
    if dtype.is_bool:
        return Const(bool(value), dtype)
    if dtype.is_float:
        return Const(_dt.round_float(value, dtype), dtype)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise error(f"cannot convert {value} to {dtype}")
        value = int(value)  # float -> int truncates toward zero, as a cast does
    value = int(value)
    lo, hi = _dt.int_range(dtype)
    if not lo <= value <= hi:
        raise error(f"constant {value} does not fit in {dtype}")
    return Const(value, dtype)


def default_dtype(value):
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, numbers.Integral):
        return I32 if -(1 << 31) <= value < (1 << 31) else I64
    if isinstance(value, numbers.Real):
        return F32
    raise error(f"expected a number or a device value, got {type(value).__name__}")


def as_expr(value, dtype=None):
    if isinstance(value, Expr):
        return value
    if not is_python_scalar(value):
        raise error(f"expected a number or a device value, got {type(value).__name__}")
    return const(value, dtype)


def cast(value, dtype):
    dtype = canonical(dtype)
    if dtype.kind == "q":  # T.cast(x, T.float8_e4m3fn): x rounded to fp8, as a float32 value
        from . import fp8
        load = getattr(value, "_fp8_load", None)
        if load is not None and canonical(load.buffer.dtype) == dtype:
            return value
        return fp8.decode(fp8.encode(value, dtype), dtype)
    if not isinstance(value, Expr):
        return const(value, dtype)
    if value.dtype == dtype:
        return value
    if isinstance(value, Const):
        v = value.value
        if dtype.is_bool:
            return Const(bool(v), dtype)
        if dtype.is_float:
            return Const(_dt.round_float(v, dtype), dtype)
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return Cast(dtype, value)
        return Const(_wrap(int(v), dtype), dtype)
    return Cast(dtype, value)


def _wrap(v, dtype):
    lo, hi = _dt.int_range(dtype)
    span = hi - lo + 1
    return (v - lo) % span + lo


def _literal_dtype(lit, other):
    """The dtype a Python literal takes next to a device value (TVM's rule)."""
    if isinstance(lit, bool):
        return BOOL
    if isinstance(lit, numbers.Integral):
        return other if not other.is_bool else I32
    return other if other.is_float else F32  # float literal next to an int value: float32


def _match(a, b):
    """Convert operands to Exprs of one dtype; Python literals adopt the other side's dtype."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a, b = as_expr(a), as_expr(b)
    elif not isinstance(a, Expr):
        a = as_expr(a, _literal_dtype(a, b.dtype)) if is_python_scalar(a) else as_expr(a)
    elif not isinstance(b, Expr):
        b = as_expr(b, _literal_dtype(b, a.dtype)) if is_python_scalar(b) else as_expr(b)
    t = promote(a.dtype, b.dtype)
    return cast(a, t), cast(b, t)


def to_bool(x):
    x = as_expr(x)
    if x.dtype.is_bool:
        return x
    return binary("!=", x, 0)


def binary(op, a, b):
    if op in LOGICAL:
        a, b = to_bool(a), to_bool(b)
    else:
        a, b = _match(a, b)
        if op in BITWISE and a.dtype.is_float:
            raise error(f"operator {op} needs integer operands, got {a.dtype}")
    dtype = BOOL if op in COMPARE else a.dtype
    folded = _fold(op, a, b, dtype)
    return folded if folded is not None else Binary(op, a, b, dtype)


def _fold(op, a, b, dtype):
    ca, cb = isinstance(a, Const), isinstance(b, Const)
    if ca and cb:
        x, y = a.value, b.value
        try:
            if op == "+": r = x + y
            elif op == "-": r = x - y
            elif op == "*": r = x * y
            elif op == "/":
                if y == 0:
                    return None
                r = x / y if dtype.is_float else x // y
            elif op == "%":
                if y == 0:
                    return None
                r = x % y
            elif op == "&&": r = x and y
            elif op == "||": r = x or y
            elif op == "&": r = x & y
            elif op == "|": r = x | y
            elif op == "^": r = x ^ y
            elif op == "<<": r = x << y
            elif op == ">>": r = x >> y
            elif op == "==": r = x == y
            elif op == "!=": r = x != y
            elif op == "<": r = x < y
            elif op == "<=": r = x <= y
            elif op == ">": r = x > y
            elif op == ">=": r = x >= y
            else:
                return None
        except (OverflowError, ValueError):
            return None
        if dtype.is_bool:
            return Const(bool(r), dtype)
        if dtype.is_float:
            return Const(_dt.round_float(r, dtype), dtype)
        return Const(_wrap(int(r), dtype), dtype)
    # Identities that keep the value exactly (no float rounding involved).
    if op in ("+", "-") and cb and b.value == 0 and not dtype.is_bool:
        return a
    if op == "+" and ca and a.value == 0 and not dtype.is_bool:
        return b
    if op == "*" and cb and b.value == 1:
        return a
    if op == "*" and ca and a.value == 1:
        return b
    if op == "/" and cb and b.value == 1:
        return a
    if op == "&&":
        if ca:
            return b if a.value else a
        if cb:
            return a if b.value else b
    if op == "||":
        if ca:
            return a if a.value else b
        if cb:
            return b if b.value else a
    return None


def unary(op, a):
    a = as_expr(a)
    if op == "!":
        a = to_bool(a)
        if isinstance(a, Const):
            return Const(not a.value, BOOL)
    if op == "~":
        if not a.dtype.is_int:
            raise error(f"operator ~ needs an integer operand, got {a.dtype}")
        if isinstance(a, Const):
            return Const(_wrap(~a.value, a.dtype), a.dtype)
    return Unary(op, a, a.dtype)


def negate(a):
    if isinstance(a, Const) and not a.dtype.is_bool:
        return Const(-a.value, a.dtype) if a.dtype.is_float else Const(_wrap(-a.value, a.dtype), a.dtype)
    return Unary("-", a, a.dtype)


def floordiv(a, b):
    """Python `//`: integer floor division (IR `/` on ints); floor(a / b) on floats."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return a // b
    a, b = _match(a, b)
    if a.dtype.is_float:
        return call("floor", binary("/", a, b))
    return binary("/", a, b)


def floormod(a, b):
    """Python `%`: integer floor modulo (IR `%`); a - floor(a / b) * b on floats."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        return a % b
    a, b = _match(a, b)
    if a.dtype.is_float:
        return a - call("floor", binary("/", a, b)) * b
    return binary("%", a, b)


FLOAT_UNARY = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "floor", "ceil",
               "round", "sin", "cos"}


def call(fn, *args):
    """A math call; float-only functions convert integer arguments to float32."""
    if fn in FLOAT_UNARY:
        (x,) = args
        x = as_expr(x)
        if not x.dtype.is_float:
            x = cast(x, F32)
        return Call(fn, [x], x.dtype)
    if fn == "abs":
        (x,) = args
        x = as_expr(x)
        if x.dtype.is_int:
            # Tile IR's abs is defined on floats; integers use max(x, -x).
            return call("max", x, negate(x)) if x.dtype.is_signed else x
        return Call("abs", [x], x.dtype)
    if fn in ("max", "min"):
        a, b = _match(*args)
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(max(a.value, b.value) if fn == "max" else min(a.value, b.value), a.dtype)
        return Call(fn, [a, b], a.dtype)
    if fn == "pow":
        a, b = _match(*args)
        if not a.dtype.is_float:
            a, b = cast(a, F32), cast(b, F32)
        return Call("pow", [a, b], a.dtype)
    if fn in ("ceildiv", "truncdiv", "truncmod"):
        a, b = _match(*args)
        if not a.dtype.is_int:
            raise error(f"{fn} needs integer operands, got {a.dtype}")
        return Call(fn, [a, b], a.dtype)
    raise error(f"unknown function {fn}")


def select(cond, a, b):
    cond = to_bool(cond)
    a, b = _match(a, b)
    if isinstance(cond, Const):
        return a if cond.value else b
    return Select(cond, a, b)


# ---------------------------------------------------------------- analysis

def const_int(e):
    """The integer value of e if it is a constant (Python int or Const), else None."""
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, numbers.Integral):
        return int(e)
    if isinstance(e, Const) and e.dtype.is_int:
        return int(e.value)
    lin = linear(e)
    if lin is not None and not lin[0]:
        return lin[1]
    return None


def linear(e):
    """e as ({atom text: coefficient}, constant) if it is affine in its atoms; else None.

    Used to see that `(k + 1) * 32 - k * 32` is 32, so slices written upstream's
    way (`A[k * bk:(k + 1) * bk]`) get the constant extent Tile IR needs.
    """
    if isinstance(e, numbers.Integral):
        return {}, int(e)
    if not isinstance(e, Expr) or not (e.dtype.is_int):
        return None
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, Binary) and e.op in ("+", "-"):
        la, lb = linear(e.a), linear(e.b)
        if la is None or lb is None:
            return None
        sign = 1 if e.op == "+" else -1
        terms = dict(la[0])
        for k, v in lb[0].items():
            terms[k] = terms.get(k, 0) + sign * v
        return {k: v for k, v in terms.items() if v != 0}, la[1] + sign * lb[1]
    if isinstance(e, Binary) and e.op == "*":
        la, lb = linear(e.a), linear(e.b)
        if la is not None and lb is not None:
            if not la[0]:
                la, lb = lb, la
            if not lb[0]:
                return {k: v * lb[1] for k, v in la[0].items() if v * lb[1] != 0}, la[1] * lb[1]
    if isinstance(e, Unary) and e.op == "-":
        la = linear(e.a)
        if la is not None:
            return {k: -v for k, v in la[0].items()}, -la[1]
    return {format_expr(e): 1}, 0


def difference(b, a):
    """b - a as an int when it is a constant, else None."""
    lb, la = linear(b), linear(a)
    if lb is None or la is None:
        return None
    terms = dict(lb[0])
    for k, v in la[0].items():
        terms[k] = terms.get(k, 0) - v
    if any(v != 0 for v in terms.values()):
        return None
    return lb[1] - la[1]


# ---------------------------------------------------------------- printing

def format_const(c):
    if c.dtype.is_bool:
        return "true" if c.value else "false"
    if c.dtype.is_float:
        return f"{_dt.format_float(c.value, c.dtype)}:{c.dtype.ir}"
    return str(c.value) if c.dtype == I32 else f"{c.value}:{c.dtype.ir}"


def _prec(e):
    if isinstance(e, Binary):
        return PREC[e.op]
    if isinstance(e, Unary):
        return UNARY_PREC
    if isinstance(e, Const) and (
            (not e.dtype.is_bool and not isinstance(e.value, bool) and e.value < 0)
            or (e.dtype.is_float and math.copysign(1.0, e.value) < 0)):
        return UNARY_PREC  # a negative literal reads like a unary minus
    return ATOM_PREC


def format_expr(e, parent=0, right=False):
    if isinstance(e, Const):
        text = format_const(e)
    elif isinstance(e, Var):
        text = e.name
    elif isinstance(e, Load):
        text = f"{e.buffer.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    elif isinstance(e, Binary):
        p = PREC[e.op]
        text = f"{format_expr(e.a, p)} {e.op} {format_expr(e.b, p, True)}"
    elif isinstance(e, Unary):
        text = f"{e.op}{format_expr(e.a, UNARY_PREC)}"
    elif isinstance(e, Call):
        text = f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    elif isinstance(e, Select):
        text = f"select({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    elif isinstance(e, Cast):
        text = f"cast<{e.dtype.ir}>({format_expr(e.x)})"
    else:
        raise TypeError(f"not an expression: {e!r}")
    p = _prec(e)
    # Left-associative: a child of equal precedence needs parentheses on the right only.
    if p < parent or (right and p == parent) or (p == UNARY_PREC and parent == UNARY_PREC):
        return f"({text})"
    return text
