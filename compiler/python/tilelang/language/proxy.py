"""Parameter annotations: T.Tensor / T.Buffer (call and subscript forms) and
the typed-scope proxies used in macro signatures."""

import numbers

from .. import expr as E
from ..dtypes import canonical
from ..errors import error


class TensorSpec:
    """What `T.Tensor((M, K), dtype)` evaluates to: a parameter's shape and dtype."""

    def __init__(self, shape, dtype="float32", scope="global"):
        if isinstance(shape, (numbers.Integral, E.Expr)):
            shape = (shape,)
        shape = tuple(shape)
        for d in shape:
            if isinstance(d, bool) or not (isinstance(d, numbers.Integral) or
                                           (isinstance(d, E.Var) and d.kind == "sym")):
                raise error(f"T.Tensor: dimension {d!r} must be an integer or a T.dynamic symbol")
            if isinstance(d, numbers.Integral) and d <= 0:
                raise error(f"T.Tensor: dimension {d} must be positive")
        self.shape = shape
        self.dtype = canonical(dtype)
        self.scope = scope

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype})"


class _SpecMeta(type):
    def __getitem__(cls, key):
        # T.Tensor[(M, K), dtype]
        if isinstance(key, tuple) and len(key) == 2 and not isinstance(key[1], (numbers.Integral, E.Expr)):
            return cls(key[0], key[1])
        return cls(key)


def _view(shape, dtype, data, what):
    """T.Tensor(shape, dtype, buf.data): a view of tensor buf's memory (derived.py)."""
    from ..derived import BufferData, view
    if not isinstance(data, BufferData):
        raise error(f"unsupported feature: {what} with data={data!r}; only another tensor's memory "
                    "(buf.data) can be viewed")
    return view(data, shape, dtype, what)


class Tensor(TensorSpec, metaclass=_SpecMeta):
    def __new__(cls, shape=None, dtype="float32", data=None, scope=None):
        if data is not None:
            return _view(shape, dtype, data, "T.Tensor(shape, dtype, buf.data)")
        return super().__new__(cls)

    def __init__(self, shape, dtype="float32", data=None, scope=None):
        super().__init__(shape, dtype, "global")


class Buffer(TensorSpec, metaclass=_SpecMeta):
    def __new__(cls, shape=None, dtype="float32", data=None, strides=None, elem_offset=None,
                scope="global", **kwargs):
        if strides is not None or elem_offset is not None:
            raise error("unsupported feature: T.Buffer strides= and elem_offset= (strided buffers); use T.Tensor")
        if data is not None:
            return _view(shape, dtype, data, "T.Buffer(shape, dtype, buf.data)")
        return super().__new__(cls)

    def __init__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,
                 scope="global", **kwargs):
        super().__init__(shape, dtype, "global")


class SharedBuffer(TensorSpec, metaclass=_SpecMeta):
    pass


class FragmentBuffer(TensorSpec, metaclass=_SpecMeta):
    pass


class LocalBuffer(TensorSpec, metaclass=_SpecMeta):
    pass
