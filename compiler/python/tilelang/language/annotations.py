"""Hints that never change results: T.use_swizzle, T.annotate_layout (with T.Layout or
make_swizzled_layout values); and T.sync_threads."""

import numbers

from .. import builder as _builder
from .. import ir
from ..buffer import Buffer
from ..errors import error


def _emit(stmt):
    b = _builder.current()
    if not b.in_kernel:
        raise error("hints must be inside a T.Kernel")
    b.emit(stmt)


def use_swizzle(panel_size=10, order="row", enable=True):
    if not enable:
        return
    if order not in ("row", "col", "column"):
        raise error(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    _emit(ir.Hint("use_swizzle", [int(panel_size)] + ([] if order == "row" else ["col"])))


def annotate_layout(layout_map):
    if not isinstance(layout_map, dict):
        raise error("T.annotate_layout takes a dict {buffer: layout}")
    for buf in layout_map:
        if not isinstance(buf, Buffer):
            raise error("T.annotate_layout: keys must be buffers")
        _emit(ir.Hint("annotate_layout", [buf]))


def wait_wgmma(id):
    """wgmma.wait_group.sync.aligned id: wait until at most `id` wgmma groups issued by T.gemm(...,
    wg_wait=-1) are in flight (Tile IR `hint wait_wgmma N`). A no-op where gemms are synchronous
    (every lowering but sm_90a's wgmma)."""
    if isinstance(id, bool) or not isinstance(id, numbers.Integral) or not 0 <= id <= 7:
        raise error(f"T.wait_wgmma: the number of groups left in flight must be 0..7, got {id!r}")
    _emit(ir.Hint("wait_wgmma", [int(id)]))


def warpgroup_pingpong():
    """The kernel's two consumer warpgroups take turns issuing their wgmma groups (FlashAttention-3's
    warp scheduler barriers; Tile IR `hint warpgroup_pingpong`): on sm_90a, where the k-loop is
    warp-specialized with exactly 256 consumer threads and its compute waits for its own wgmma groups,
    warpgroup 0 issues a k-step's first gemm(s) while warpgroup 1 waits on a named barrier, hands the
    turn over and runs its softmax while warpgroup 1 issues. Never changes results; elsewhere (or when
    the kernel does not have that form: the lowering's note says why) it is ignored."""
    _emit(ir.Hint("warpgroup_pingpong", []))


def sync_threads(barrier_id=None, arrive_count=None):
    _emit(ir.Sync())


def Layout(shape, forward_fn=None, *args, **kwargs):  # noqa: N802 - upstream's name
    """T.Layout(shape, forward_fn): a layout for T.annotate_layout; a hint like the others (the
    compiler picks its own layouts), so forward_fn is not called."""
    return ("layout", tuple(shape))


def make_swizzled_layout(buffer, *args, **kwargs):
    """Accepted so upstream programs run; the compiler picks its own layouts."""
    return ("swizzled", buffer)


def no_set_max_nreg():
    """Upstream: do not emit setmaxnreg in warp-specialized kernels. This compiler never emits it."""
    if not _builder.current().in_kernel:
        raise error("T.no_set_max_nreg must be inside a T.Kernel")


disable_warp_group_reg_alloc = no_set_max_nreg


def annotate_producer_reg_alloc(reg_count=24):
    """Upstream: setmaxnreg for producer warps. Accepted; this compiler does no warp specialization."""
    no_set_max_nreg()


def annotate_consumer_reg_alloc(reg_count=240):
    """Upstream: setmaxnreg for consumer warps. Accepted; this compiler does no warp specialization."""
    no_set_max_nreg()
