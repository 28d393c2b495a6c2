"""tilelang.cuda.intrinsics.macro.mma_macro_generator: upstream's TensorCoreIntrinEmitter, at tile level.

Upstream's emitter writes a warp-level GEMM by hand: ldmatrix_a / ldmatrix_b load each warp's
operand registers from shared memory for one k-step, mma issues mma.sync on them, stmatrix writes
the accumulator registers back (example_gemm_intrinsics.py). This project has no thread-level
model, so the emitter keeps the meaning of the calls and lets the compiler choose the
instructions:

- ldmatrix_a(A_local, A_shared, ki, rk) remembers the k-slice [rk * chunk + ki * k_dim, +k_dim) of
  the block's A tile in shared memory (all block_row_warps * warp_row_tiles rows); ldmatrix_b the
  same for B; A_local / B_local are only handles;
- mma(A_local, B_local, C_local) is T.gemm of those two slices into C_local, which becomes the
  block's (block_M, block_N) accumulator fragment: the per-thread buffer upstream allocates
  (T.alloc_local of warp_rows * warp_cols * local_size) holds exactly the block tile spread over
  the threads, so it is re-declared as that fragment (a T.clear of it before stays a clear);
- stmatrix(C_local, C_buf, pid_m, pid_n) copies the fragment to C_buf with upstream's layouts:
  4-D [M // 16, N // 16, 16, 16] micro-tiles, 2-D, or global at block (pid_m, pid_n).

The results are those of upstream's kernel; the instruction choice is the compiler's (on CUDA,
mma.sync through T.gemm). Other names of this module are stand-ins that raise "unsupported
feature". Differences: reduce_k > 1 and the ladder-transform emitter are rejected.
"""

from tilelang import builder as _builder
from tilelang import expr as _E
from tilelang import ir as _ir
from tilelang._unsupported import module_getattr
from tilelang.buffer import Buffer, Region, as_region
from tilelang.dtypes import canonical
from tilelang.errors import error

__getattr__ = module_getattr("tilelang.cuda.intrinsics.macro.mma_macro_generator",
                             "upstream's PTX-level intrinsic helpers; use T.gemm")


class TensorCoreIntrinEmitter:
    M_DIM = 16
    n_dim = 16
    WARP_SIZE = 32

    def __init__(self, a_dtype="float16", b_dtype="float16", accum_dtype="float16", a_transposed=False,
                 b_transposed=False, block_row_warps=2, block_col_warps=2, warp_row_tiles=8, warp_col_tiles=8,
                 chunk=16, reduce_k=1, num_elems_per_byte=1, is_m_first=False, thread_var=None):
        if reduce_k != 1:
            raise error("unsupported feature: TensorCoreIntrinEmitter(reduce_k > 1) (split-K across warps)")
        self.a_dtype, self.b_dtype, self.accum_dtype = canonical(a_dtype), canonical(b_dtype), canonical(accum_dtype)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = block_row_warps, block_col_warps
        self.warp_row_tiles, self.warp_col_tiles, self.chunk = warp_row_tiles, warp_col_tiles, chunk
        self.k_dim = 256 // self.a_dtype.bits  # upstream's mma k per instruction: f16 16, int8 32, tf32 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = self.M_DIM, self.n_dim, self.k_dim
        self.warp_rows = warp_row_tiles // self.M_DIM
        self.warp_cols = warp_col_tiles // self.n_dim
        if self.warp_rows == 0 or self.warp_cols == 0:
            raise error(f"TensorCoreIntrinEmitter: warp tiles {warp_row_tiles}x{warp_col_tiles} are smaller than "
                        f"one {self.M_DIM}x{self.n_dim} mma tile")
        self.local_size_a = self.M_DIM * self.k_dim // self.WARP_SIZE
        self.local_size_b = self.n_dim * self.k_dim // self.WARP_SIZE
        self.local_size_out = self.M_DIM * self.n_dim // self.WARP_SIZE
        self.block_M = block_row_warps * warp_row_tiles
        self.block_N = block_col_warps * warp_col_tiles
        self.threads = self.WARP_SIZE * block_row_warps * block_col_warps
        self._slices = {}  # id(A_local / B_local) -> Region of the shared tile for the current k-step

    # -- operand slices
    def _slice(self, shared, rows, k0, transposed, what):
        r = as_region(shared, f"TensorCoreIntrinEmitter.{what}")
        if len(r.ranges) < 2:
            raise error(f"TensorCoreIntrinEmitter.{what}: {r.name} must have rank >= 2")
        lead = [(start, 1, True) for start, _, _ in r.ranges[:-2]]
        (s0, _, _), (s1, _, _) = r.ranges[-2:]
        if transposed:  # [k, rows]
            tail = [(s0 + k0, self.k_dim, False), (s1, rows, False)]
        else:           # [rows, k]
            tail = [(s0, rows, False), (s1 + k0, self.k_dim, False)]
        return Region(r.buffer, lead + tail)

    def ldmatrix_a(self, A_local_buf, A_shared_buf, ki, rk=0):
        k0 = rk * self.chunk + ki * self.k_dim
        self._slices[id(A_local_buf)] = self._slice(A_shared_buf, self.block_M, k0, self.a_transposed, "ldmatrix_a")

    def ldmatrix_b(self, B_local_buf, B_shared_buf, ki, rk=0):
        k0 = rk * self.chunk + ki * self.k_dim
        # B is [N, K] when b_transposed (the example's layout), else [K, N]
        self._slices[id(B_local_buf)] = self._slice(B_shared_buf, self.block_N, k0, not self.b_transposed,
                                                    "ldmatrix_b")

    # -- the accumulator
    def _accumulator(self, C_local_buf):
        c = C_local_buf
        if not isinstance(c, Buffer):
            raise error("TensorCoreIntrinEmitter: the accumulator must be the buffer from T.alloc_local")
        if c.scope_name == "fragment" and tuple(_E.const_int(d) for d in c.shape) == (self.block_M, self.block_N):
            return c
        n = _E.const_int(c.shape[0]) if len(c.shape) == 1 else None
        if c.scope_name != "local" or n is None or n * self.threads != self.block_M * self.block_N:
            raise error(f"TensorCoreIntrinEmitter: accumulator {c.name} must be T.alloc_local(("
                        f"{self.block_M * self.block_N // self.threads},), ...) (this emitter's warp_rows * "
                        "warp_cols * local_size_out)")
        _redeclare_as_fragment(c, (self.block_M, self.block_N))
        return c

    def mma(self, A_local_buf, B_local_buf, C_local_buf, k_inner=0):
        from tilelang.language.tileops import gemm
        a, b = self._slices.get(id(A_local_buf)), self._slices.get(id(B_local_buf))
        if a is None or b is None:
            raise error("TensorCoreIntrinEmitter.mma: call ldmatrix_a and ldmatrix_b for these buffers first")
        gemm(a, b, self._accumulator(C_local_buf), transpose_A=self.a_transposed, transpose_B=self.b_transposed)

    def stmatrix(self, C_local_buf, C_buf, pid_m=None, pid_n=None):
        from tilelang.language.loops import _ParallelLoop
        c = self._accumulator(C_local_buf)
        dims = len(C_buf.shape)
        if dims not in (2, 4):
            raise error(f"TensorCoreIntrinEmitter.stmatrix: C_buf must be 2-D or 4-D, got rank {dims}")
        b = _builder.current()
        for i, j in _ParallelLoop([self.block_M, self.block_N]):
            if pid_m is not None and pid_n is not None:
                idx = [pid_m * self.block_M + i, pid_n * self.block_N + j]
            elif dims == 2:
                idx = [i, j]
            else:
                idx = [i // self.M_DIM, j // self.n_dim, i % self.M_DIM, j % self.n_dim]
            b.store(C_buf, idx, c[i, j])

    # upstream helpers some programs call; the layouts are the compiler's here
    def make_mma_load_layout(self, local_buf, matrix="A"):
        return ("mma_load_layout", local_buf, matrix)

    def make_mma_store_layout(self, local_buf):
        return ("mma_store_layout", local_buf)


def _redeclare_as_fragment(buf, shape):
    """T.alloc_local((n,)) holding a block tile spread over the threads -> the (M, N) fragment. Earlier
    statements may only have cleared or filled it whole (their regions are rebuilt)."""
    b = _builder.current()
    found = []

    def walk(block):
        for s in block:
            if isinstance(s, _ir.Fill) and s.region.buffer is buf:
                found.append(s)
            elif isinstance(s, _ir.Alloc):
                pass
            elif _mentions(s, buf):
                raise error(f"unsupported feature: {buf.name} is used as a per-thread buffer ({type(s).__name__.lower()}) before "
                            "TensorCoreIntrinEmitter.mma (only T.clear/T.fill of it is kept)")
            for name in getattr(s, "blocks", ()):
                walk(getattr(s, name) or [])
    walk(b.body)
    buf.shape = tuple(shape)
    buf.scope_name = "fragment"
    for s in found:
        s.region = buf.region()


def _mentions(stmt, buf):
    """Whether stmt itself (not its nested blocks) refers to buf."""
    nested = set(getattr(stmt, "blocks", ()))
    for name, v in vars(stmt).items():
        if name in nested or name == "blocks":
            continue
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if x is buf or (isinstance(x, Region) and x.buffer is buf):
                return True
            if getattr(x, "buffer", None) is buf:
                return True
            if isinstance(x, _E.Expr) and _reads(x, buf):
                return True
    return False


def _reads(e, buf):
    if isinstance(e, _E.Load) and e.buffer is buf:
        return True
    return any(_reads(x, buf) for x in vars(e).values() if isinstance(x, _E.Expr)) or any(
        _reads(x, buf) for v in vars(e).values() if isinstance(v, (list, tuple)) for x in v if isinstance(x, _E.Expr))
