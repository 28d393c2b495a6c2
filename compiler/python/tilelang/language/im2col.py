"""T.im2col: the image-to-column tile of a 2-D convolution, as upstream's tl.tileop.im2col.

`T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)` fills the
`[block_m, block_k]` tile `col` (the last two dims of a shared/fragment buffer or
region) from the NHWC tensor `img`:

    m = nhw_step * block_m + i      # output pixel: n = m // (OH * OW), (oh, ow) from m % (OH * OW)
    k = c_step * block_k + j        # column: (kh, kw, c) = (k // (kernel * C), k // C % kernel, k % C)
    h = oh * stride + kh * dilation - pad,  w = ow * stride + kw * dilation - pad
    col[i, j] = img[n, h, w, c] if 0 <= h < H and 0 <= w < W else 0

It is emitted as a T.Parallel loop with that select (only the chosen side is read);
pixels past the last image (n >= N) read 0 through the compiler's tensor-edge guards.
"""

import numbers

from .. import builder as B
from .. import expr as E
from ..buffer import Buffer, Region, as_region
from ..errors import error
from .loops import _ParallelLoop


def _int(v, what):
    """An integer constant, or an integer device value (a T.const / T.dynamic size)."""
    if isinstance(v, bool):
        raise error(f"T.im2col: {what} must be an integer, got {v!r}")
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, E.Expr) and v.dtype.is_int:
        n = E.const_int(v)
        return v if n is None else n
    raise error(f"T.im2col: {what} must be an integer, got {v!r}")


def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None, annotations=None):
    b = B.current()
    if not b.in_kernel:
        raise error("T.im2col must be inside a T.Kernel")
    if isinstance(img, Region):
        if not img.is_whole():
            raise error("T.im2col: the image must be a whole tensor")
        img = img.buffer
    if not isinstance(img, Buffer) or img.scope_name != "tensor" or img.ndim != 4:
        raise error("T.im2col: the image must be a rank-4 (N, H, W, C) tensor")
    kernel, stride = _int(kernel, "kernel"), _int(stride, "stride")
    dilation, pad = _int(dilation, "dilation"), _int(pad, "pad")
    consts = [E.const_int(x) for x in (kernel, stride, dilation, pad)]
    if any(c is not None and (c < 0 if n == 3 else c <= 0) for n, c in enumerate(consts)):
        raise error(f"T.im2col: kernel {kernel}, stride {stride}, dilation {dilation} must be positive "
                    f"and pad {pad} nonnegative")
    r = as_region(col, "T.im2col column tile")
    if r.head or len(r.ranges) < 2:
        raise error("T.im2col: the column tile must be a buffer or slice of rank >= 2")
    if r.buffer.dtype != img.dtype:
        raise error(f"T.im2col: column tile {r.buffer.name} is {r.buffer.dtype}, the image {img.dtype}")
    for start, ext, single in r.ranges[:-2]:
        if E.const_int(ext) != 1:
            raise error("T.im2col: the column tile's leading dims must be single indices")
    block_m, block_k = (E.const_int(x[1]) for x in r.ranges[-2:])
    if block_m is None or block_k is None:
        raise error("T.im2col: the column tile's last two extents must be constants")

    _, H, W, C = img.shape
    out_h = (H + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    out_w = (W + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    out_hw = out_h * out_w
    for i, j in _ParallelLoop([block_m, block_k]):
        m = nhw_step * block_m + i
        k = c_step * block_k + j
        h = (m % out_hw) // out_w * stride + k // (kernel * C) * dilation - pad
        w = m % out_w * stride + k // C % kernel * dilation - pad
        inside = E.binary("&&", E.binary("&&", h >= 0, w >= 0), E.binary("&&", h < H, w < W))
        value = E.select(inside, img[m // out_hw, h, w, k % C], E.const(0, img.dtype))
        idx = [start for start, _, _ in r.ranges[:-2]]
        idx += [r.ranges[-2][0] + i, r.ranges[-1][0] + j]
        b.store(r.buffer, idx, value)
