"""Tile operations: copy, fill/clear, gemm, reductions, cumsum, atomic_add.

Shapes are checked here so errors point at the user's line; edge guards for
tensors whose extents are not multiples of the tile are the compiler's job.
"""

import enum
import numbers

from .. import builder as _builder
from .. import expr as E
from .. import ir
from ..buffer import Buffer, Region, as_region, resolve_head
from ..errors import error


def _fmt_shape(shape):
    return "(" + ", ".join(E.format_expr(E.as_expr(d)) for d in shape) + (",)" if len(shape) == 1 else ")")


def _const_shape(shape):
    out = tuple(E.const_int(d) for d in shape)
    return None if any(d is None for d in out) else out


def _emit(stmt):
    b = _builder.current()
    if not b.in_kernel:
        raise error(f"{type(stmt).__name__.lower()} must be inside a T.Kernel")
    b.emit(stmt)


def _no_fp8(what, *regions):
    for r in regions:
        if r.buffer.dtype.kind == "q":
            raise error(f"unsupported feature: {what} on {r.buffer.dtype} buffer {r.name} (fp8 buffers take "
                        "element loads and stores, T.copy and T.fill; convert to float16/float32 first)")


def _converting_copy(s, d):
    """T.copy between an fp8 buffer and another dtype: a T.Parallel loop of loads and stores
    (fp8.py converts at each), over the tile's extents that are not 1."""
    from .loops import _ParallelLoop
    shape = _const_shape(s.squeezed_shape())
    if shape is None or not shape:
        raise error(f"T.copy: converting {s.dtype} to {d.dtype} needs a tile of constant shape, "
                    f"got {_fmt_shape(s.shape)}")

    def index(region, ivs):
        out, k = [], 0
        for start, ext, single in region.ranges:
            if E.const_int(ext) == 1:
                out.append(start)
            else:
                out.append(start + ivs[k])
                k += 1
        return out
    for ivs in _ParallelLoop(list(shape)):
        ivs = ivs if isinstance(ivs, tuple) else (ivs,)
        _builder.current().store(d.buffer, index(d, ivs), s.buffer[tuple(index(s, ivs))])


def _partial_fragment(s, d):
    """The fragment side of a copy that moves only part of a fragment to or from a non-fragment
    (T.copy(acc_o[:valid_block_H, :], O_shared)), or None."""
    for f, o in ((s, d), (d, s)):
        if f.buffer.scope_name == "fragment" and o.buffer.scope_name != "fragment" and not f.is_whole() \
                and _const_shape(f.buffer.shape) is not None:
            return f, o
    return None


def _predicated_fragment_copy(f, o, f_is_src):
    """The copy as a T.Parallel over the fragment's whole shape, predicated on the part. The GPU
    layout inference keeps a fragment in registers only when the T.Parallel loops touching it span
    it whole; a partial copy would move it to shared memory (and a gemm accumulating into it could
    not run). Same elements, same values on every backend."""
    from .loops import _ParallelLoop
    b = _builder.current()
    for ivs in _ParallelLoop(list(_const_shape(f.buffer.shape))):
        ivs = ivs if isinstance(ivs, tuple) else (ivs,)
        cond, offsets = None, []
        for (start, ext, single), iv, dim in zip(f.ranges, ivs, f.buffer.shape):
            first, n = E.const_int(start), E.const_int(ext)
            if single or n == 1:
                part = iv == start
            elif first == 0 and n == E.const_int(dim):
                part = None
                offsets.append(iv)
            else:
                part = iv < start + ext if first == 0 else E.binary("&&", iv >= start, iv < start + ext)
                offsets.append(iv - start if first != 0 else iv)
            if part is not None:
                cond = part if cond is None else E.binary("&&", cond, part)
        other, k = [], 0
        for start, ext, single in o.ranges:
            if single or E.const_int(ext) == 1:
                other.append(start)
            else:
                other.append(start + offsets[k])
                k += 1
        stmt = ir.If(E.to_bool(cond)) if cond is not None else None
        with (b.open(stmt, stmt.then) if stmt is not None else _nothing()):
            if f_is_src:
                b.store(o.buffer, other, f.buffer[tuple(iv for iv in ivs)])
            else:
                b.store(f.buffer, list(ivs), o.buffer[tuple(other)])


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def copy(src, dst, *, coalesced_width=None, disable_tma=False, eviction_policy=None,
         prefer_instruction=None, annotations=None, loop_layout=None):
    src_load, dst_load = (getattr(x, "_fp8_load", x) for x in (src, dst))  # fp8 element addresses
    if isinstance(src_load, E.Load) and isinstance(dst_load, E.Load):
        # Scalar-to-scalar copy is a plain store (with conversion), as upstream.
        _builder.current().store(dst_load.buffer, dst_load.indices, src)
        return
    dst = dst_load
    if isinstance(dst, E.Expr) and not isinstance(dst, E.Load):
        raise error("T.copy: the destination must be a buffer, a slice of one, or an element address")
    s = as_region(src, "T.copy source")
    d = as_region(dst, "T.copy destination")
    if s.head and d.head:
        raise error("T.copy: both operands are element addresses; give one of them as a buffer or slice")
    s = resolve_head(s, d.shape, "T.copy")
    d = resolve_head(d, s.shape, "T.copy")
    ss, ds = _const_shape(s.squeezed_shape()), _const_shape(d.squeezed_shape())
    if ss is not None and ds is not None and ss != ds:
        raise error(f"T.copy: source shape {_fmt_shape(s.shape)} does not match destination "
                    f"{_fmt_shape(d.shape)}")
    if (s.dtype.kind == "q" or d.dtype.kind == "q") and s.dtype != d.dtype:
        _converting_copy(s, d)
        return
    part = _partial_fragment(s, d)
    if part is not None and ss is not None and ds is not None:
        _predicated_fragment_copy(part[0], part[1], part[0] is s)
        return
    _emit(ir.Copy(s, d))


def fill(buffer, value, annotations=None):
    r = as_region(buffer, "T.fill")
    if r.head:
        r = Region(r.buffer, r.ranges)
    if r.dtype.kind == "q":  # fp8: the encoded bits
        from .. import fp8
        _emit(ir.Fill(r, fp8.encode(value, r.dtype)))
        return
    _emit(ir.Fill(r, E.cast(value, r.dtype)))


def clear(buffer, annotations=None):
    fill(buffer, 0)


class GemmWarpPolicy(enum.IntEnum):
    Square = 0
    FullRow = 1
    FullCol = 2


_POLICY = {GemmWarpPolicy.Square: "square", GemmWarpPolicy.FullRow: "full_row",
           GemmWarpPolicy.FullCol: "full_col"}


def _2d(region, what):
    shape = region.squeezed_shape() if len(region.shape) > 2 else region.shape
    shape = _const_shape(shape)
    if shape is None or len(shape) != 2:
        raise error(f"T.gemm: {what} {region.name} must be a 2-D tile of constant shape, "
                    f"got {_fmt_shape(region.shape)}")
    return shape


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None, annotations=None):
    a, b, c = (as_region(x, "T.gemm") for x in (A, B, C))
    _no_fp8("T.gemm", a, b, c)
    for r, what in ((a, "A"), (b, "B")):
        if r.buffer.scope_name not in ("shared", "fragment", "local"):
            raise error(f"T.gemm: operand {what} ({r.name}) must be in shared memory or a fragment, "
                        f"not a global tensor; T.copy it first")
    if c.buffer.scope_name not in ("fragment", "local"):
        raise error(f"T.gemm: accumulator C ({c.name}) must be a fragment")
    (am, ak), (bk, bn), (cm, cn) = _2d(a, "A"), _2d(b, "B"), _2d(c, "C")
    if transpose_A:
        am, ak = ak, am
    if transpose_B:
        bk, bn = bn, bk
    if ak != bk:
        raise error(f"T.gemm: K of A ({ak}, shape {_fmt_shape(a.shape)}{', transposed' if transpose_A else ''}) "
                    f"does not match K of B ({bk}, shape {_fmt_shape(b.shape)}"
                    f"{', transposed' if transpose_B else ''})")
    if am != cm or bn != cn:
        raise error(f"T.gemm: C has shape {_fmt_shape(c.shape)} but op(A)·op(B) has shape ({am}, {bn})")
    try:
        pol = _POLICY[GemmWarpPolicy(policy)]
    except (ValueError, KeyError):
        raise error(f"T.gemm: unknown policy {policy!r}") from None
    if not isinstance(k_pack, numbers.Integral) or k_pack < 1:
        raise error(f"T.gemm: k_pack must be a positive integer, got {k_pack!r}")
    # wg_wait (upstream's): after issuing and committing a wgmma group, wait until at most wg_wait
    # groups are in flight; -1 leaves this one in flight until a T.wait_wgmma. Only a wgmma lowering
    # (sm_90a) uses it; every other gemm stays synchronous.
    if isinstance(wg_wait, bool) or not isinstance(wg_wait, numbers.Integral) or not -1 <= wg_wait <= 7:
        raise error(f"T.gemm: wg_wait must be -1 (leave the wgmma group in flight) or 0..7, got {wg_wait!r}")
    _emit(ir.Gemm(a, b, c, bool(transpose_A), bool(transpose_B), bool(clear_accum), pol, int(k_pack), int(wg_wait)))


def _reduce(op, buffer, out, dim, clear):
    s = as_region(buffer, f"T.reduce_{op}")
    d = as_region(out, f"T.reduce_{op}")
    _no_fp8(f"T.reduce_{op}", s, d)
    rank = len(s.shape)
    if not isinstance(dim, numbers.Integral) or not -rank <= dim < rank:
        raise error(f"T.reduce_{op}: dim {dim!r} out of range for a source of rank {rank}")
    dim = dim % rank
    src_shape, dst_shape = _const_shape(s.shape), _const_shape(d.shape)
    if src_shape is not None and dst_shape is not None:
        removed = src_shape[:dim] + src_shape[dim + 1:]
        kept = src_shape[:dim] + (1,) + src_shape[dim + 1:]
        if dst_shape not in (removed, kept) and not (removed == () and dst_shape == (1,)):
            raise error(f"T.reduce_{op}: destination shape {_fmt_shape(d.shape)} does not match source "
                        f"{_fmt_shape(s.shape)} reduced along dim {dim} (expected {_fmt_shape(removed)})")
    _emit(ir.Reduce(op, s, d, dim, bool(clear)))


def reduce_sum(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    _reduce("sum", buffer, out, dim, clear)


def reduce_max(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("max", buffer, out, dim, clear)


def reduce_min(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("min", buffer, out, dim, clear)


def reduce_abssum(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    _reduce("abssum", buffer, out, dim, clear)


def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("absmax", buffer, out, dim, clear)


def reduce(buffer, out, reduce_type, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    if reduce_type not in ("sum", "max", "min", "abssum", "absmax"):
        raise error(f"T.reduce: unsupported reduce_type {reduce_type!r}")
    _reduce(reduce_type, buffer, out, dim, clear)


def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    s = as_region(src, "T.cumsum")
    d = s if dst is None else as_region(dst, "T.cumsum")
    _no_fp8("T.cumsum", s, d)
    rank = len(s.shape)
    if not isinstance(dim, numbers.Integral) or not -rank <= dim < rank:
        raise error(f"T.cumsum: dim {dim!r} out of range for rank {rank}")
    ss, ds = _const_shape(s.squeezed_shape()), _const_shape(d.squeezed_shape())
    if ss is not None and ds is not None and ss != ds:
        raise error(f"T.cumsum: source shape {_fmt_shape(s.shape)} does not match destination "
                    f"{_fmt_shape(d.shape)}")
    _emit(ir.Cumsum(s, d, dim % rank, bool(reverse)))


def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, annotations=None):
    if return_prev:
        raise error("T.atomic_add(return_prev=True) is not supported")
    if isinstance(value, (Buffer, Region)) or (isinstance(value, E.Load) and not isinstance(dst, E.Load)):
        src = as_region(value, "T.atomic_add")
        d = as_region(dst, "T.atomic_add")
        d = resolve_head(d, src.shape, "T.atomic_add")
        src = resolve_head(src, d.shape, "T.atomic_add")
        _no_fp8("T.atomic_add", src, d)
        ss, ds = _const_shape(src.squeezed_shape()), _const_shape(d.squeezed_shape())
        if ss is not None and ds is not None and ss != ds:
            raise error(f"T.atomic_add: source shape {_fmt_shape(src.shape)} does not match destination "
                        f"{_fmt_shape(d.shape)}")
        _emit(ir.AtomicAdd(d, src=src))
        return
    if not isinstance(dst, E.Load):
        raise error("T.atomic_add: with a scalar value the destination must be one element, e.g. C[i, j]")
    d = Region(dst.buffer, [(i, 1, True) for i in dst.indices])
    _no_fp8("T.atomic_add", d)
    _emit(ir.AtomicAdd(d, value=E.cast(value, dst.dtype)))
