"""tilelang.profiler: check a compiled kernel against a reference and time it.

    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(ref_program, atol=1e-2, rtol=1e-2, max_mismatched_ratio=0.01)
    ms = profiler.do_bench()                     # the kernel
    ms = profiler.do_bench(ref_program)          # any callable, on the same inputs

Inputs are generated per parameter (outputs excluded) by tilelang.utils.tensor:
torch tensors on the kernel's device when torch is importable (CUDA kernels
need it), numpy arrays on the CPU otherwise. Timing uses torch CUDA events on
the current stream for CUDA kernels and time.perf_counter() on the CPU; the
result is milliseconds per call (mean unless return_mode says otherwise).
"""

import time

from . import expr as E
from .buffer import Buffer
from .errors import TileLangError
from .utils.tensor import TensorSupplyType, get_tensor_supply, is_torch, torch_assert_close, torch_or_none


def _as_list(outs):
    if outs is None:
        return []
    if isinstance(outs, (list, tuple)):
        return list(outs)
    return [outs]


def _summarize(times, quantiles, return_mode):
    import numpy as np
    t = np.asarray(times, dtype=np.float64)
    if quantiles is not None:
        q = [float(x) for x in np.quantile(t, quantiles)]
        return q[0] if len(q) == 1 else q
    modes = {"mean": np.mean, "median": np.median, "min": np.min, "max": np.max}
    if return_mode not in modes:
        raise TileLangError(f"do_bench: return_mode {return_mode!r}; expected one of {', '.join(modes)}")
    return float(modes[return_mode](t))


def _uses_cuda(args):
    return any(is_torch(a) and getattr(a, "is_cuda", False) for a in args)


def do_bench(fn, warmup=25, rep=100, _n_warmup=0, _n_repeat=0, quantiles=None, return_mode="mean",
             backend="event", device=None, cuda=None, early_stop_baseline=None, **_ignored):
    """Milliseconds per call of fn().

    warmup/rep are time budgets in ms (as upstream) that size the numbers of
    warm-up and timed calls from one estimate; _n_warmup/_n_repeat fix them.
    cuda (None: torch with a CUDA device present) times with torch CUDA events
    on the current stream; otherwise with the host clock. backend "cupti" and
    "cudagraph" are timed like "event" (no CUPTI / graph capture here).
    """
    if backend not in ("event", "cupti", "cudagraph"):
        raise TileLangError(f"do_bench: unknown backend {backend!r}; expected event, cupti or cudagraph")
    torch = torch_or_none()
    if cuda is None:
        cuda = torch is not None and torch.cuda.is_available()
    if cuda:
        def timed(n):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        def one():
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e)
        fn()
        torch.cuda.synchronize()
    else:
        def timed(n):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            return (time.perf_counter() - t0) * 1e3

        def one():
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        fn()
    estimate = max(timed(5) / 5, 1e-4)
    n_warmup = _n_warmup if _n_warmup > 0 else max(1, int(warmup / estimate))
    n_repeat = _n_repeat if _n_repeat > 0 else max(1, int(rep / estimate))
    n_repeat = min(n_repeat, 10000)
    for _ in range(min(n_warmup, 10000)):
        fn()
    times = [one() for _ in range(n_repeat)]
    return _summarize(times, quantiles, return_mode)


class Profiler:
    """Inputs, reference checks and timing for one JITKernel (see the module doc)."""

    def __init__(self, kernel, tensor_supply_type=TensorSupplyType.Auto):
        self.kernel = kernel
        self.params = kernel.params
        self.result_idx = list(kernel.out_idx)
        self.supply_type = tensor_supply_type
        self.device = self._device()
        self.supply = get_tensor_supply(tensor_supply_type, self.device)

    def _device(self):
        torch = torch_or_none()
        if self.kernel.target == "cpu":
            return "cpu" if torch is not None else None
        if torch is None:
            raise TileLangError(f"the profiler of a {self.kernel.target} kernel makes torch tensors on the "
                                "device, and torch is not importable")
        return "cuda"

    def _shape(self, p, constraints):
        shape = []
        for d in p.shape:
            n = E.const_int(d)
            if n is None:
                name = getattr(d, "name", str(d))
                if not constraints or name not in constraints:
                    raise TileLangError(f"{p.name}: dimension {name} is dynamic; pass "
                                        f"dynamic_symbolic_constraints={{'{name}': <size>}}")
                n = int(constraints[name])
            shape.append(n)
        return shape

    def _get_inputs(self, with_output=False, dynamic_symbolic_constraints=None):
        ins = []
        for i, p in enumerate(self.params):
            if not with_output and i in self.result_idx:
                continue
            if not isinstance(p, Buffer):
                if not dynamic_symbolic_constraints or p.name not in dynamic_symbolic_constraints:
                    raise TileLangError(f"the profiler cannot make a value for scalar parameter {p.name}; "
                                        "pass input_tensors=")
                ins.append(dynamic_symbolic_constraints[p.name])
                continue
            ins.append(self.supply(p, self._shape(p, dynamic_symbolic_constraints)))
        return ins

    def _sync(self, args):
        if _uses_cuda(args):
            torch_or_none().cuda.synchronize()

    def __call__(self, *args):
        return self.kernel(*args)

    func = property(lambda self: self.kernel)
    adapter = property(lambda self: self.kernel)

    def assert_allclose(self, reference_program, input_tensors=None, atol=1e-2, rtol=1e-2,
                        max_mismatched_ratio=0.01):
        """Run the kernel and reference_program on the same inputs; compare every output."""
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref_outs = _as_list(reference_program(*ins))
        self._sync(ins)
        lib_outs = _as_list(self.kernel(*ins))
        self._sync(ins)
        if len(lib_outs) != len(ref_outs):
            raise AssertionError(f"the kernel returned {len(lib_outs)} outputs, the reference {len(ref_outs)}")
        for i, (lhs, rhs) in enumerate(zip(lib_outs, ref_outs)):
            if lhs is None or rhs is None:
                continue
            bf16 = self.kernel.params[self.result_idx[i]].dtype.ir == "bf16" if i < len(self.result_idx) else False
            lhs, rhs = self._comparable(lhs, rhs, bf16)
            torch_assert_close(lhs, rhs, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                               check_dtype=False, check_device=False, base_name="tilelang", ref_name="ref")

    @staticmethod
    def _comparable(lhs, rhs, bf16):
        """numpy bf16 outputs are uint16 bit patterns: compare them as values."""
        if bf16 and not is_torch(lhs):
            from .utils.tensor import to_float64
            return to_float64(lhs, bf16=True), (rhs if is_torch(rhs) else to_float64(rhs))
        return lhs, rhs

    def manual_assert_close(self, reference_program, input_tensors=None, manual_check_prog=None):
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref_outs = _as_list(reference_program(*ins))
        lib_outs = _as_list(self.kernel(*ins))
        self._sync(ins)
        manual_check_prog(lib_outs, ref_outs)

    def assert_consistent(self, repeat=10):
        import numpy as np
        from .utils.tensor import to_float64
        ins = self._get_inputs()
        first = [to_float64(o) for o in _as_list(self.kernel(*ins))]
        for _ in range(repeat):
            for a, b in zip(first, _as_list(self.kernel(*ins))):
                if not np.array_equal(a, to_float64(b), equal_nan=True):
                    raise AssertionError("result is not consistent between runs")

    def run_once(self, func=None):
        ins = self._get_inputs()
        return (func or self.kernel)(*ins)

    def do_bench(self, func=None, warmup=25, rep=100, n_warmup=0, n_repeat=0, input_tensors=None,
                 backend="event", quantiles=None, return_mode="mean", dynamic_symbolic_constraints=None,
                 device=None, early_stop_baseline=None):
        """Milliseconds per call of func (default: the kernel) on generated inputs."""
        if input_tensors is not None:
            ins = list(input_tensors)
        else:
            ins = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        target = func or self.kernel
        cuda = self.kernel.target == "cuda" or _uses_cuda(ins)
        return do_bench(lambda: target(*ins), warmup=warmup, rep=rep, _n_warmup=n_warmup, _n_repeat=n_repeat,
                        quantiles=quantiles, return_mode=return_mode, backend=backend, cuda=cuda)


__all__ = ["Profiler", "do_bench", "TensorSupplyType"]
