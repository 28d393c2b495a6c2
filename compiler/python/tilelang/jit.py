"""@tilelang.jit: a kernel factory whose calls return compiled kernels,
cached per argument tuple (upstream's lazy/closure authoring style)."""

import functools

from .errors import TileLangError
from .function import PrimFunc


def _key(args, kwargs):
    def freeze(v):
        if isinstance(v, (list, tuple)):
            return (type(v).__name__,) + tuple(freeze(x) for x in v)
        if isinstance(v, dict):
            return ("dict",) + tuple(sorted((k, freeze(x)) for k, x in v.items()))
        try:
            hash(v)
            return (type(v).__name__, v)
        except TypeError:
            return (type(v).__name__, repr(v))
    return freeze(args), freeze(kwargs)


class JITImpl:
    def __init__(self, factory, out_idx=None, target="auto", verbose=False, pass_configs=None,
                 compile_flags=None, execution_backend=None, target_host=None):
        if isinstance(factory, PrimFunc):
            raise TileLangError("@tilelang.jit decorates a factory that returns a T.prim_func; "
                                "to compile a prim_func directly use tilelang.compile(func, out_idx=...)")
        self.factory = factory
        self.out_idx = out_idx
        self.target = target
        self.options = dict(verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags,
                            execution_backend=execution_backend, target_host=target_host)
        self._cache = {}
        functools.update_wrapper(self, factory)

    def get_tir(self, *args, **kwargs):
        """The prim_func the factory builds for these arguments (traced, not compiled)."""
        func = self.factory(*args, **kwargs)
        if not isinstance(func, PrimFunc):
            raise TileLangError(f"{self.factory.__name__} returned {type(func).__name__}; "
                                "a @tilelang.jit factory must return a T.prim_func")
        return func

    def compile(self, *args, **kwargs):
        key = (self.target, _key(args, kwargs))
        kernel = self._cache.get(key)
        if kernel is None:
            from . import compiler
            _compile = compiler.compile  # looked up per call so tests can substitute it
            kernel = _compile(self.get_tir(*args, **kwargs), out_idx=self.out_idx, target=self.target,
                              **self.options)
            self._cache[key] = kernel
        return kernel

    __call__ = compile

    def get_kernel_source(self, *args, **kwargs):
        return self.compile(*args, **kwargs).get_kernel_source()


def jit(func=None, *, out_idx=None, target="auto", verbose=False, pass_configs=None, compile_flags=None,
        execution_backend=None, target_host=None, debug_root_path=None):
    """Upstream's decorator; execution_backend / target_host as in tilelang.compile,
    debug_root_path accepted and unused."""
    options = dict(verbose=verbose, pass_configs=pass_configs, compile_flags=compile_flags,
                   execution_backend=execution_backend, target_host=target_host)

    def wrap(f):
        from .ast_transform import eager_style
        if not isinstance(f, PrimFunc) and eager_style(f):
            from .eager import EagerJIT
            return EagerJIT(f, target=target, options=options)
        return JITImpl(f, out_idx=out_idx, target=target, **options)
    return wrap if func is None else wrap(func)
