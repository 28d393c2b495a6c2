"""Buffers (tensor parameters and allocations) and regions of them.

Indexing a buffer with scalars gives a ``Load`` (an expression); indexing with
slices gives a ``Region`` (what tile operations take). Storing into an element
records a store statement in the function being traced.
"""

import numbers

from . import expr as E
from .errors import error

SCOPES = ("tensor", "shared", "fragment", "local")


class Buffer:
    """A global tensor parameter or an on-chip allocation."""

    def __init__(self, name, shape, dtype, scope):
        assert scope in SCOPES
        self.name = name          # None until the program assigns it to a Python name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.scope_name = scope

    @property
    def data(self):
        """The buffer's memory, for a view: T.Tensor(shape, dtype, buf.data) (derived.py)."""
        from .derived import BufferData
        return BufferData(self)

    @property
    def ndim(self):
        return len(self.shape)

    def scope(self):
        return {"tensor": "global", "shared": "shared.dyn", "fragment": "local.fragment",
                "local": "local"}[self.scope_name]

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope_name})"

    def __len__(self):
        return E.const_int(self.shape[0]) if self.shape else 0

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        if len(key) > self.ndim:
            raise error(f"{self.name}: {len(key)} indices for a buffer of rank {self.ndim}")
        if len(key) == self.ndim and not any(isinstance(k, slice) for k in key):
            load = E.Load(self, [self._index(d, k) for d, k in enumerate(key)])
            if self.dtype.kind == "q":  # fp8: the float32 value of the stored bits
                from . import fp8
                load.dtype = E.canonical("uint8")
                return fp8.decode(load, self.dtype)
            return load
        key = key + (slice(None),) * (self.ndim - len(key))
        return Region(self, [self._range(d, k) for d, k in enumerate(key)])

    def __setitem__(self, key, value):
        from . import builder
        target = getattr(self[key], "_fp8_load", self[key])
        if not isinstance(target, E.Load):
            raise error(f"{self.name}: storing into a slice is not supported; use T.fill or T.copy")
        builder.current().store(self, target.indices, value)

    def _index(self, d, k):
        if isinstance(k, bool) or not isinstance(k, (numbers.Integral, E.Expr)):
            raise error(f"{self.name}: index {k!r} must be an integer or a device integer value")
        if isinstance(k, E.Expr) and not k.dtype.is_int:
            raise error(f"{self.name}: index must be an integer, got {k.dtype}")
        dim = E.const_int(self.shape[d])
        if isinstance(k, numbers.Integral):
            if k < 0 and dim is not None:
                k += dim  # Python's negative indexing
            if k < 0 or (dim is not None and k >= dim):
                raise error(f"{self.name}: index {k} out of range for dimension {d} of extent {dim}")
        return E.as_expr(k)

    def _range(self, d, k):
        if not isinstance(k, slice):
            return (self._index(d, k), 1, True)
        if k.step is not None and E.const_int(k.step) != 1:
            raise error(f"{self.name}: slices with a step are not supported")
        start = 0 if k.start is None else k.start
        if isinstance(start, numbers.Integral) and start < 0:
            dim = E.const_int(self.shape[d])
            if dim is not None:
                start += dim
        stop = self.shape[d] if k.stop is None else k.stop
        if isinstance(stop, numbers.Integral) and stop < 0:
            dim = E.const_int(self.shape[d])
            if dim is not None:
                stop += dim
        extent = E.difference(stop, start)
        if extent is None:
            raise error(f"{self.name}: the extent of slice dimension {d} is not a constant "
                        f"({E.format_expr(E.as_expr(stop))} - {E.format_expr(E.as_expr(start))})")
        if extent <= 0:
            raise error(f"{self.name}: empty slice in dimension {d}")
        dim, first = E.const_int(self.shape[d]), E.const_int(start)
        # Tensors may be sliced past their edges (the compiler guards those accesses);
        # on-chip buffers have no edges to guard.
        if self.scope_name != "tensor" and first is not None and (first < 0 or first + extent > dim):
            raise error(f"{self.name}: slice {first}:{first + extent} out of range for dimension {d} "
                        f"of extent {dim}")
        return (E.as_expr(start), extent, False)

    def region(self):
        return Region(self, [(E.Const(0, E.I32), dim, False) for dim in self.shape])


class Region:
    """A box of a buffer: per dimension (start, extent, is_single_index)."""

    def __init__(self, buffer, ranges, head=False):
        self.buffer = buffer
        self.ranges = ranges
        self.head = head  # built from a Load: extents come from the other operand

    @property
    def shape(self):
        return tuple(r[1] for r in self.ranges)

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def name(self):
        return self.buffer.name

    def squeezed_shape(self):
        """Extents without the extent-1 dimensions (how T.copy compares shapes)."""
        return tuple(e for e in self.shape if E.const_int(e) != 1)

    def is_whole(self):
        return all(not single and E.const_int(start) == 0 and _same_dim(ext, dim)
                   for (start, ext, single), dim in zip(self.ranges, self.buffer.shape))

    def format(self):
        if self.is_whole():
            return self.buffer.name
        parts = []
        for start, extent, single in self.ranges:
            if single:
                parts.append(E.format_expr(start))
            else:
                parts.append(f"{E.format_expr(start)}:{E.format_expr(E.as_expr(extent))}")
        return f"{self.buffer.name}[{', '.join(parts)}]"


def _same_dim(a, b):
    if a is b:
        return True
    ca, cb = E.const_int(a), E.const_int(b)
    return ca is not None and ca == cb


def as_region(obj, what):
    """Buffer, Region or Load (head address) -> Region."""
    if isinstance(obj, Buffer):
        return obj.region()
    if isinstance(obj, Region):
        return obj
    obj = getattr(obj, "_fp8_load", obj)
    if isinstance(obj, E.Load):
        return Region(obj.buffer, [(i, 1, True) for i in obj.indices], head=True)
    raise error(f"{what}: expected a buffer, a slice of one, or an element address, "
                f"got {type(obj).__name__}")


def resolve_head(region, extents, what):
    """Expand a head-address region `A[i, j]` with the extents of the other operand.

    Upstream aligns the extents to the trailing dimensions; leading ones get extent 1.
    """
    if not region.head:
        return region
    extents = list(extents)
    if len(extents) > len(region.ranges):
        # Drop leading extent-1 dims of the other side until it fits.
        while len(extents) > len(region.ranges) and E.const_int(extents[0]) == 1:
            extents.pop(0)
        if len(extents) > len(region.ranges):
            raise error(f"{what}: {region.buffer.name} has rank {len(region.ranges)}, "
                        f"too small for a tile of shape {tuple(extents)}")
    extents = [1] * (len(region.ranges) - len(extents)) + extents
    ranges = []
    for (start, _, _), ext in zip(region.ranges, extents):
        n = E.const_int(ext)
        ranges.append((start, 1, True) if n == 1 else (start, ext, False))
    return Region(region.buffer, ranges)
