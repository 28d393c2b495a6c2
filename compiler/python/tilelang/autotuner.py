"""tilelang.autotune / tilelang.autotuner: pick the fastest configuration of a @tilelang.jit factory.

    @tilelang.autotune(configs=[{"block_M": 64, ...}, ...], warmup=10, rep=10)
    @tilelang.jit(out_idx=[3])
    def flashattn(batch, heads, ..., block_M=64, block_N=64, num_stages=0, threads=128): ...

A call that gives every tuned parameter compiles that configuration directly
(what upstream's examples do unless asked to tune). Otherwise each
configuration is compiled, checked against ref_prog when given, and timed with
tilelang.profiler on generated inputs (or those of set_autotune_inputs); the
fastest kernel is returned with .config, .latency and .ref_latency set and is
cached per argument tuple. Configurations that fail to compile or to check are
skipped; when none is left, the error names each configuration's failure.

On an eager-style jit function (T.const / T.empty) a call runs: each
configuration is compiled for the call's shapes (`.compile`), tuned as above,
and the call returns the outputs of the fastest one, run on the call's
arguments (upstream's AutoTuneImpl does the same); the chosen configuration is
cached per (shapes, other arguments).
"""

import contextlib
import functools
import inspect

from .errors import TileLangError
from .utils.tensor import TensorSupplyType

_INPUTS = []


@contextlib.contextmanager
def set_autotune_inputs(*tensors):
    """Tune on these tensors instead of generated ones."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    _INPUTS.append(list(tensors))
    try:
        yield
    finally:
        _INPUTS.pop()


class AutoTuneResult:
    def __init__(self, kernel, config, latency, ref_latency):
        self.kernel, self.config, self.latency, self.ref_latency = kernel, config, latency, ref_latency


class AutoTuner:
    """Tunes one jit function over a list of configurations (dicts of keyword arguments)."""

    def __init__(self, fn, configs, warmup=25, rep=100, supply_type=TensorSupplyType.Auto, ref_prog=None,
                 rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False, manual_check_prog=None,
                 **_ignored):
        self.fn, self.configs = fn, configs
        self.warmup, self.rep = warmup, rep
        self.supply_type, self.ref_prog = supply_type, ref_prog
        self.rtol, self.atol, self.max_mismatched_ratio = rtol, atol, max_mismatched_ratio
        self.skip_check, self.manual_check_prog = skip_check, manual_check_prog

    @classmethod
    def from_kernel(cls, kernel, configs):
        return cls(kernel, configs)

    def set_compile_args(self, **kwargs):
        return self

    def set_profile_args(self, warmup=None, rep=None, supply_type=None, ref_prog=None, rtol=None, atol=None,
                         max_mismatched_ratio=None, skip_check=None, manual_check_prog=None, **_ignored):
        for k, v in dict(warmup=warmup, rep=rep, supply_type=supply_type, ref_prog=ref_prog, rtol=rtol, atol=atol,
                         max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                         manual_check_prog=manual_check_prog).items():
            if v is not None:
                setattr(self, k, v)
        return self

    def _configs(self, args, kwargs):
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        return list(configs)

    def run(self, *args, **kwargs):
        configs = self._configs(args, kwargs)
        if not configs:
            raise TileLangError("autotune: no configurations to try")
        best, failures = None, []
        for config in configs:
            try:
                compile_fn = self.fn.compile if _is_eager(self.fn) else self.fn
                kernel = compile_fn(*args, **{**kwargs, **config})
                profiler = kernel.get_profiler(self.supply_type)
                inputs = _INPUTS[-1] if _INPUTS else None
                if self.ref_prog is not None and not self.skip_check:
                    if self.manual_check_prog is not None:
                        profiler.manual_assert_close(self.ref_prog, inputs, self.manual_check_prog)
                    else:
                        profiler.assert_allclose(self.ref_prog, inputs, atol=self.atol, rtol=self.rtol,
                                                 max_mismatched_ratio=self.max_mismatched_ratio)
                latency = profiler.do_bench(warmup=self.warmup, rep=self.rep, input_tensors=inputs)
            except Exception as e:  # a configuration that does not compile or check is skipped
                failures.append(f"{config}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                continue
            if best is None or latency < best.latency:
                best = AutoTuneResult(kernel, config, latency, None)
        if best is None:
            raise TileLangError("autotune: every configuration failed:\n  " + "\n  ".join(failures))
        if self.ref_prog is not None:
            profiler = best.kernel.get_profiler(self.supply_type)
            best.ref_latency = profiler.do_bench(self.ref_prog, warmup=self.warmup, rep=self.rep,
                                                 input_tensors=_INPUTS[-1] if _INPUTS else None)
        return best


def _is_eager(fn):
    from .eager import EagerJIT
    return isinstance(fn, EagerJIT)


class AutoTuneImpl:
    def __init__(self, fn, tuner_kwargs):
        self.fn = fn
        self.tuner_kwargs = tuner_kwargs
        self._cache = {}
        functools.update_wrapper(self, getattr(fn, "factory", None) or getattr(fn, "func", None) or fn)

    def _tuned_keys(self, args, kwargs):
        configs = self.tuner_kwargs["configs"]
        configs = configs(*args, **kwargs) if callable(configs) else configs
        keys = set()
        for c in configs:
            keys.update(c)
        return keys

    def _given(self, args, kwargs):
        target = getattr(self.fn, "factory", None) or getattr(self.fn, "func", None)
        given = set(kwargs)
        if target is not None:
            try:
                given |= set(inspect.signature(target).bind_partial(*args, **kwargs).arguments)
            except TypeError:
                pass
        return given

    def __call__(self, *args, **kwargs):
        if self._tuned_keys(args, kwargs) <= self._given(args, kwargs):
            return self.fn(*args, **kwargs)
        if _is_eager(self.fn):
            return self._call_eager(args, kwargs)
        from .jit import _key
        key = _key(args, kwargs)
        if key not in self._cache:
            result = AutoTuner(self.fn, **self.tuner_kwargs).run(*args, **kwargs)
            kernel = result.kernel
            kernel.config, kernel.latency, kernel.ref_latency = result.config, result.latency, result.ref_latency
            self._cache[key] = kernel
        return self._cache[key]

    def _eager_config(self, args, kwargs):
        """The tuned configuration for an eager function's call (tuned on first use per shapes)."""
        fn = self.fn
        from .jit import _key
        bound = fn.sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in fn.sig.parameters})
        shapes = {k: (tuple(v.shape), str(v.dtype)) if hasattr(v, "shape") else v for k, v in bound.arguments.items()}
        key = ("eager", _key((), shapes), _key((), {k: v for k, v in kwargs.items() if k not in fn.sig.parameters}))
        if key not in self._cache:
            self._cache[key] = AutoTuner(fn, **self.tuner_kwargs).run(*args, **kwargs).config
        return self._cache[key]

    def _call_eager(self, args, kwargs):
        return self.fn(*args, **{**kwargs, **self._eager_config(args, kwargs)})

    def compile(self, *args, **kwargs):
        if not _is_eager(self.fn):
            return self(*args, **kwargs)
        if self._tuned_keys(args, kwargs) <= self._given(args, kwargs):
            return self.fn.compile(*args, **kwargs)
        return self.fn.compile(*args, **{**kwargs, **self._eager_config(args, kwargs)})

    def __getattr__(self, name):  # get_tir, get_kernel_source, ... of the jit function underneath
        fn = self.__dict__.get("fn")
        if fn is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(fn, name)


def autotune(func=None, *, configs=None, warmup=25, rep=100, timeout=100, supply_type=TensorSupplyType.Auto,
             ref_prog=None, supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01, skip_check=False,
             manual_check_prog=None, cache_input_tensors=False, **_ignored):
    if configs is None:
        raise TileLangError("autotune: configs= is required (a list of dicts or a function returning one)")
    tuner_kwargs = dict(configs=configs, warmup=warmup, rep=rep, supply_type=supply_type, ref_prog=ref_prog,
                        rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio, skip_check=skip_check,
                        manual_check_prog=manual_check_prog)

    def wrap(fn):
        return AutoTuneImpl(fn, tuner_kwargs)
    return wrap if func is None else wrap(func)


__all__ = ["autotune", "AutoTuner", "set_autotune_inputs"]
