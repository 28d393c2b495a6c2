"""Upstream's eager authoring style under @tilelang.jit:

    @tilelang.jit
    def add(A, B, block):
        M, N = T.const("M, N")          # sizes bound from the arguments' shapes
        A: T.Tensor((M, N), "float32")  # declares parameter A
        B: T.Tensor((M, N), "float32")
        C = T.empty((M, N), "float32")  # an output the call allocates and returns
        with T.Kernel(...): ...
        return C

The function is traced twice: first until the tensor arguments are declared,
with placeholder symbols for the T.const sizes (to learn which tensor
dimension each names; the body may need them constant, e.g. a fragment of
[blk_m, N], so that trace stops before it), then with the sizes bound, giving
one prim_func per distinct (sizes, other arguments). Kernel parameters
are the declared tensors in signature order, then the T.empty outputs.
"""

import inspect
import numbers

from . import builder as B
from . import derived
from . import expr as E
from . import hooks
from . import ir
from .ast_transform import declared_names, transformed as _transformed
from .buffer import Buffer
from .dtypes import canonical, is_dtype
from .errors import TileLangError, TileLangSyntaxError, display_path, error
from .function import PrimFunc, symbols_of
from .language.proxy import TensorSpec


class EagerState:
    def __init__(self, const_values):
        self.const_values = dict(const_values)
        self.const_syms = {}      # name -> placeholder Var (first trace)
        self.declared = {}        # name -> Buffer or scalar Var
        self.outputs = []         # T.empty buffers, in creation order
        self.symbol_exprs = []    # (symbol, expression): T.empty dims computed from other symbols
        self.stop_after = None    # learning trace: stop once these parameters are declared


class _DeclarationsDone(Exception):
    """Ends a learning trace after the last declaration it needs (not an error)."""


class Placeholder:
    """Stands for a tensor argument while tracing; replaced by its declaration."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<tensor argument {self.name}>"


def const(names, dtype="int32"):
    """T.const("M, N"): sizes taken from the call's tensors (eager style only)."""
    import re
    b = B.active()
    if b is None or b.eager is None:
        raise error("T.const is only valid in an eager-style @tilelang.jit function")
    parts = [n for n in re.split(r"[,\s]+", names.strip()) if n]
    out = []
    for n in parts:
        if n in b.eager.const_values:
            out.append(int(b.eager.const_values[n]))
        else:
            sym = b.eager.const_syms.get(n)
            if sym is None:
                sym = b.eager.const_syms[n] = E.Var(n, canonical(dtype), "sym")
                b.names.add(n)  # keep other values from taking the symbol's name
            out.append(sym)
    return out[0] if len(out) == 1 else tuple(out)


def empty(*shape, dtype="float32"):
    """T.empty(shape, dtype) / T.empty(*dims, dtype=...): an output tensor of the kernel."""
    b = B.active()
    if b is None or b.eager is None:
        raise error("T.empty is only valid in an eager-style @tilelang.jit function")
    if len(shape) >= 1 and isinstance(shape[0], (list, tuple)):
        if len(shape) == 2:
            dtype = shape[1]
        shape = tuple(shape[0])
    elif len(shape) >= 2 and is_dtype(shape[-1]) and not isinstance(shape[-1], numbers.Integral):
        shape, dtype = shape[:-1], shape[-1]
    dims = []
    for d in (shape if isinstance(shape, (list, tuple)) else (shape,)):
        if isinstance(d, E.Expr) and E.const_int(d) is None and not (isinstance(d, E.Var) and d.kind == "sym"):
            # (H + 2 * P - K) // S + 1 over T.const / T.dynamic symbols: a symbol of its own,
            # computed at each call from the others (derived.evaluate).
            if not (d.dtype.is_int and derived.symbolic_only(d)):
                raise error(f"T.empty: dimension {E.format_expr(d)} must be an integer expression of symbols")
            sym = E.Var(b.fresh("dim"), d.dtype, "sym")
            b.eager.symbol_exprs.append((sym, d))
            d = sym
        dims.append(d)
    spec = TensorSpec(tuple(dims), dtype)
    buf = Buffer(None, spec.shape, spec.dtype, "tensor")
    b.eager.outputs.append(buf)
    b.pending.append(buf)
    return buf


def declare(name, annotation, previous):
    """`NAME: T.Tensor(...)` as a statement: declares kernel parameter NAME."""
    b = B.active()
    if b is None or b.eager is None:
        return previous if previous is not hooks.UNBOUND else None
    if name in b.eager.declared:
        raise error(f"parameter {name} is declared twice")
    if isinstance(annotation, TensorSpec):
        for d in annotation.shape:
            if isinstance(d, E.Var):
                b.names.add(d.name)  # a T.dynamic symbol's name is taken from here on
        value = Buffer(b.claim(name), annotation.shape, annotation.dtype, "tensor")
    elif is_dtype(annotation):
        value = E.Var(b.claim(name), canonical(annotation), "param")
    else:
        raise error(f"declaration of {name}: expected T.Tensor((...), dtype) or a dtype")
    b.eager.declared[name] = value
    if b.eager.stop_after is not None and b.eager.stop_after <= set(b.eager.declared):
        raise _DeclarationsDone()
    return value


def learn_declarations(func, bound, const_values, names):
    """Trace func only until the parameters `names` are declared: returns ({name: Buffer or Var},
    {T.const name: placeholder Var}). A trace that ends first (a name never declared) returns what
    it saw; errors before the declarations propagate."""
    t = _transformed(func)
    b = B.Builder()
    b.eager = EagerState(const_values)
    b.eager.stop_after = set(names)
    b.declared = True
    sig = inspect.signature(func)
    with B.tracing(b):
        fn = t.instantiate(hooks, func)
        try:
            fn(**{k: v for k, v in bound.items() if k in sig.parameters})
        except _DeclarationsDone:
            pass
    return dict(b.eager.declared), dict(b.eager.const_syms)


def trace_eager(func, bound, const_values, name=None):
    """Trace func with `bound` (parameter name -> Python value or Placeholder).

    Returns (PrimFunc, placeholder symbols still unbound, return value of the trace).
    """
    t = _transformed(func)
    file = display_path(func.__code__.co_filename)
    b = B.Builder()
    b.eager = EagerState(const_values)
    b.declared = True
    sig = inspect.signature(func)
    with B.tracing(b):
        fn = t.instantiate(hooks, func)
        result = fn(**{k: v for k, v in bound.items() if k in sig.parameters})
        b.finish()
    if not b.body:
        raise TileLangSyntaxError(f"{func.__name__} has no T.Kernel", file, t.def_line)
    order = list(sig.parameters) + [n for n in b.eager.declared if n not in sig.parameters]
    params = [b.eager.declared[n] for n in order if n in b.eager.declared] + b.eager.outputs
    symbols = symbols_of(params, file, t.def_line)
    n_in = len(params) - len(b.eager.outputs)
    n_own = len(params)
    returns = _return_positions(result, params)
    extra = derived.finish(b, params, symbols, b.body)  # workspaces and views after the program's own
    function = ir.Function(name or func.__name__, params, symbols, b.body, (file, t.def_line),
                           b.__dict__.get("sources", ()))
    prim = PrimFunc(function, func)
    prim.attrs["out_idx"] = list(range(n_in, n_own))
    # Python names (a parameter named like a Tile IR keyword, `kernel`, is `kernel_` in the IR).
    prim.attrs["inputs"] = [n for n in order if n in b.eager.declared]
    prim.attrs["returns"] = returns
    if b.eager.symbol_exprs:
        prim.attrs["symbol_exprs"] = list(b.eager.symbol_exprs)
    if extra:
        prim.attrs["derived"] = extra
    return prim, dict(b.eager.const_syms)


def _return_positions(result, params):
    if result is None:
        return None
    single = not isinstance(result, (tuple, list))
    items = [result] if single else list(result)
    positions = []
    for r in items:
        idx = next((i for i, p in enumerate(params) if p is r), None)
        if idx is None:
            raise TileLangError("an eager-style function may only return tensors made by T.empty")
        positions.append(idx)
    return ("single", positions) if single else ("tuple", positions)


class EagerJIT:
    """The eager half of @tilelang.jit: call with arrays to compile (cached) and run."""

    def __init__(self, func, out_idx=None, target="auto", options=None):
        self.func = func
        self.target = target
        self.options = options or {}
        self.sig = inspect.signature(func)
        self.tensor_names = [n for n in declared_names(func) if n in self.sig.parameters]
        self._kernels = {}

    def _bind(self, args, kwargs):
        params = self.sig.parameters
        consts = {k: v for k, v in kwargs.items() if k not in params}
        kwargs = {k: v for k, v in kwargs.items() if k in params}
        for n in self.tensor_names:
            if n not in kwargs and list(params).index(n) >= len(args):
                kwargs[n] = Placeholder(n)
        bound = self.sig.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments), consts

    @staticmethod
    def _key(bound, consts, tensor_names):
        from .jit import _key
        plain = {k: v for k, v in bound.items() if k not in tensor_names}
        return _key((), plain), tuple(sorted(consts.items()))

    def get_tir(self, *args, **kwargs):
        """The prim_func for these arguments; T.const sizes come from array arguments or kwargs."""
        bound, consts = self._bind(args, kwargs)
        consts = self._consts_from_arrays(bound, consts)
        # Sizes still unbound are named before the body, which may need them constant, is traced.
        _, unbound = learn_declarations(self.func, self._placeholders(bound), consts, self.tensor_names)
        if not unbound:
            prim, unbound = trace_eager(self.func, self._placeholders(bound), consts)
        if unbound:
            raise TileLangError(f"{self.func.__name__}: T.const {', '.join(unbound)} not bound; pass "
                                f"{', '.join(f'{n}=...' for n in unbound)} or call with arrays")
        return prim

    def _placeholders(self, bound):
        return {k: (Placeholder(k) if k in self.tensor_names else v) for k, v in bound.items()}

    def _consts_from_arrays(self, bound, consts):
        arrays = {n: bound[n] for n in self.tensor_names if hasattr(bound.get(n), "shape")
                  and not isinstance(bound.get(n), Placeholder)}
        if not arrays:
            return consts
        # First trace with placeholders, up to the declarations: which dimension each T.const names.
        declared, syms = learn_declarations(self.func, self._placeholders(bound), consts, arrays)
        consts = dict(consts)
        for py_name, p in declared.items():
            if py_name in arrays and isinstance(p, Buffer):
                shape = arrays[py_name].shape
                if len(shape) != len(p.shape):
                    raise TileLangError(f"{p.name}: rank {len(shape)} does not match {len(p.shape)}")
                for d, n in zip(p.shape, shape):
                    if isinstance(d, E.Var) and d.name in syms and syms[d.name] is d:
                        if consts.setdefault(d.name, int(n)) != int(n):
                            raise TileLangError(f"{p.name}: T.const {d.name} is {n} here but "
                                                f"{consts[d.name]} elsewhere")
        return consts

    def compile(self, *args, **kwargs):
        bound, consts = self._bind(args, kwargs)
        consts = self._consts_from_arrays(bound, consts)
        key = (self.target, self._key(bound, consts, self.tensor_names))
        kernel = self._kernels.get(key)
        if kernel is None:
            prim = self.get_tir(**{k: v for k, v in bound.items() if k not in self.tensor_names}, **consts)
            from . import compiler
            kernel = compiler.compile(prim, out_idx=prim.attrs["out_idx"], target=self.target, **self.options)
            self._kernels[key] = kernel
        return kernel

    def get_kernel_source(self, *args, **kwargs):
        return self.compile(*args, **kwargs).get_kernel_source()

    def __call__(self, *args, **kwargs):
        bound, _ = self._bind(args, kwargs)
        missing = [n for n in self.tensor_names if isinstance(bound.get(n), Placeholder)]
        if missing:
            raise TileLangError(f"{self.func.__name__}: missing tensor arguments {', '.join(missing)}; "
                                "use .compile(...) to compile without running")
        kernel = self.compile(*args, **kwargs)
        prim = kernel.prim_func
        outs = kernel(*[bound[n] for n in prim.attrs["inputs"]])
        returns = prim.attrs["returns"]
        if returns is None:
            return None
        out_list = outs if isinstance(outs, list) else [outs]
        by_param = dict(zip(prim.attrs["out_idx"], out_list))
        values = [by_param[i] for i in returns[1]]
        return values[0] if returns[0] == "single" else tuple(values)
