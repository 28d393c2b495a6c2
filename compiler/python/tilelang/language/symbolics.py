"""T.dynamic: shape symbols bound at launch from tensor dimensions."""

import re

from .. import expr as E
from ..dtypes import canonical
from ..errors import error


def dynamic(name, dtype="int32"):
    """`T.dynamic("M")` -> symbol; `T.dynamic("M, N")` or `"M N"` -> tuple of symbols."""
    names = [n for n in re.split(r"[,\s]+", name.strip()) if n]
    if not names:
        raise error("T.dynamic needs a name")
    from ..builder import RESERVED
    for n in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n):
            raise error(f"T.dynamic: {n!r} is not an identifier")
        if n in RESERVED:
            raise error(f"T.dynamic: {n!r} is a Tile IR keyword; choose another name")
    syms = tuple(E.Var(n, canonical(dtype), "sym") for n in names)
    for s in syms:
        if not s.dtype.is_int:
            raise error(f"T.dynamic: symbol dtype must be an integer type, got {s.dtype}")
    return syms[0] if len(syms) == 1 else syms


symbolic = dynamic  # deprecated upstream alias
