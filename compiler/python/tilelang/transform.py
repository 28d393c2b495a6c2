"""tilelang.transform: upstream's pass-configuration keys (the passes themselves are C++ here), and
upstream's `simplify_prim_func` / `apply_simplify`, which only simplify TIR arithmetic: the C++
compiler folds and simplifies every function anyway, so they return the function unchanged."""

import functools

from .pass_config import PassConfigKey  # noqa: F401


def apply_simplify(func, inline_let=False):
    return func


def simplify_prim_func(factory):
    """Decorates a factory returning a prim_func (upstream: runs tvm's Simplify on the result)."""
    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        return apply_simplify(factory(*args, **kwargs))
    return wrapper
