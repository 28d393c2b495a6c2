"""T.prim_func and T.macro.

A prim_func is traced as soon as it is defined: the factory that defines it has
already computed every Python value the body closes over, so the body can be
run once with IR-building parameters, giving one Tile IR function.
"""

import copy as _copy
import inspect

from . import builder as B
from . import derived
from . import expr as E
from . import hooks
from . import ir
from .ast_transform import transformed as _transformed
from .buffer import Buffer
from .dtypes import DType, is_dtype, canonical
from .errors import TileLangSyntaxError, display_path, error
from .language.proxy import TensorSpec


class PrimFunc:
    """A traced tile program: one Tile IR function."""

    def __init__(self, function, source_func):
        self.function = function
        self.source_func = source_func
        self.attrs = {}

    @property
    def name(self):
        return self.function.name

    @property
    def params(self):
        """The program's own parameters (T.alloc_global workspaces and buffer views, which the
        kernel call supplies itself, are in function.params after them: derived.py)."""
        params = list(self.function.params)
        n = len(self.attrs.get("derived", ()))
        return params[:len(params) - n] if n else params

    def with_name(self, name):
        clone = _copy.copy(self)
        clone.function = _copy.copy(self.function)
        clone.function.name = name
        return clone

    def script(self):
        return ir.print_module([self.function])

    def __repr__(self):
        return f"<T.prim_func {self.name}>"

    def __call__(self, *args, **kwargs):
        raise error(f"{self.name} is a tile program; compile it with tilelang.compile(...) to run it")


def _annotations(func):
    anns = dict(getattr(func, "__annotations__", {}))
    # DType is a str subclass: only plain strings are unevaluated annotations.
    if any(isinstance(v, str) and not isinstance(v, DType) for v in anns.values()):
        # `from __future__ import annotations`: evaluate in the function's scope.
        scope = dict(func.__globals__)
        scope.update(inspect.getclosurevars(func).nonlocals)
        for k, v in anns.items():
            if isinstance(v, str) and not isinstance(v, DType):
                try:
                    anns[k] = eval(v, scope)  # noqa: S307 - the user's own annotation text
                except NameError:
                    if not is_dtype(v):  # `n: "int32"` names a dtype directly
                        raise
    return anns


def trace(func, name=None):
    transformed = _transformed(func)
    file = display_path(func.__code__.co_filename)
    sig = inspect.signature(func)
    anns = _annotations(func)
    b = B.Builder()
    params, symbols, args = [], [], []
    with B.tracing(b):
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise TileLangSyntaxError(f"parameter {p.name}: *args, **kwargs and positional-only "
                                          "parameters are not supported in a T.prim_func",
                                          file, transformed.def_line)
            ann = anns.get(p.name, p.annotation)
            if isinstance(ann, TensorSpec):
                for d in ann.shape:
                    if isinstance(d, E.Var) and all(s is not d for s in symbols):
                        if any(s.name == d.name for s in symbols):
                            raise TileLangSyntaxError(f"two different T.dynamic symbols are named {d.name}",
                                                      file, transformed.def_line)
                        symbols.append(d)
                buf = Buffer(p.name, ann.shape, ann.dtype, "tensor")
                params.append(buf)
                args.append(buf)
            elif is_dtype(ann):
                v = E.Var(p.name, canonical(ann), "param")
                params.append(v)
                args.append(v)
            else:
                raise TileLangSyntaxError(f"parameter {p.name} needs an annotation: T.Tensor((...), dtype) "
                                          "or a scalar dtype such as T.int32", file, transformed.def_line)
        for p in params:
            p.name = b.claim(p.name)
        for s in symbols:
            if s.name in b.names:
                raise TileLangSyntaxError(f"T.dynamic symbol {s.name} has the name of a parameter",
                                          file, transformed.def_line)
            b.claim(s.name)  # symbols are shared between functions: never renamed (T.dynamic checks)
        b.declared = True  # parameters come from the signature, not from statements
        fn = transformed.instantiate(hooks, func)
        fn(*args)
        b.finish()
    if not b.body:
        raise TileLangSyntaxError(f"{func.__name__} has no T.Kernel", file, transformed.def_line)
    extra = derived.finish(b, params, symbols, b.body)
    function = ir.Function(name or func.__name__, params, symbols, b.body, (file, transformed.def_line),
                           b.__dict__.get("sources", ()))
    prim = PrimFunc(function, func)
    if extra:
        prim.attrs["derived"] = extra
    return prim


def symbols_of(params, file=None, line=None):
    """The T.dynamic symbols in parameter shapes, in order of first use; one object per name."""
    symbols = []
    for p in params:
        for d in getattr(p, "shape", ()):
            if isinstance(d, E.Var) and all(s is not d for s in symbols):
                if any(s.name == d.name for s in symbols):
                    raise TileLangSyntaxError(f"two different T.dynamic symbols are named {d.name}", file, line)
                symbols.append(d)
    return symbols


def prim_func(func=None, *, eager_jit=False):
    if eager_jit:
        raise error("T.prim_func(eager_jit=True) is not supported; use a factory with @tilelang.jit")
    if func is None:
        return lambda f: prim_func(f)
    return trace(func)


class Macro:
    """T.macro: a reusable piece of tile program, inlined where it is called."""

    def __init__(self, func):
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__

    def __call__(self, *args, **kwargs):
        if B.active() is None:
            raise error(f"macro {self.func.__name__} can only be called inside a T.prim_func")
        b = B.active()
        fn = _transformed(self.func).instantiate(hooks, self.func)
        b.call_depths.append(len(b.frames))
        saved_loops, b.loops = b.loops, []  # the macro's own loops decide what `break` means
        try:
            return fn(*args, **kwargs)
        finally:
            b.loops = saved_loops
            b.call_depths.pop()

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return lambda *a, **k: self(obj, *a, **k)


def macro(func=None, **kwargs):
    if func is None:
        return lambda f: Macro(f)
    return Macro(func)
