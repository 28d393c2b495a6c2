"""GEMM: C = act(op(A) @ op(B) + bias), optionally batched.

Factories return a `T.prim_func`; the numpy references beside them compute in float64.
Dtypes: float16, bfloat16 and float32 inputs accumulate in float32; int8 inputs accumulate
in int32 (exact). numpy has no bfloat16: bf16 tensors travel as uint16 bit patterns.
"""
import numpy as np

import tilelang.language as T

ACCUM = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "int8": "int32"}
ACTIVATIONS = ("none", "relu", "gelu", "silu")


def _dim(x):
    """A factory size: an int, or a str naming a `T.dynamic` symbol (one kernel for all sizes)."""
    return T.dynamic(x) if isinstance(x, str) else x


def activation(x, act):
    """The epilogue activation on one accumulator value (GELU is the tanh form)."""
    if act == "relu":
        return T.max(x, T.cast(0, x.dtype))
    if act == "gelu":
        return 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    if act == "silu":
        return x * T.sigmoid(x)
    return x


def _raster(pid, n_m, n_n, panel):
    """Block rasterization: a 1-D block id -> (column block, row block), walking panels of `panel`
    row blocks column by column, so the blocks running at once share A rows and B columns in the L2
    (the GROUP_M order of Triton's matmul tutorial)."""
    per = panel * n_n
    first_m = (pid // per) * panel
    size_m = T.min(n_m - first_m, panel)
    return (pid % per) // size_m, first_m + (pid % per) % size_m


def matmul(M, N, K, dtype="float32", out_dtype=None, trans_A=False, trans_B=False, bias=False,
           act="none", batch=None, block_M=64, block_N=64, block_K=32, num_stages=2, threads=128, raster=0,
           swap_ab=False, cluster=1):
    """GEMM with an optional fused epilogue.

    Parameters:
      M, N, K     sizes; each an int or a str naming a `T.dynamic` symbol (typically M).
      dtype       input dtype: float16 | bfloat16 | float32 | int8.
      out_dtype   C's dtype; default: the accumulator dtype (float32, or int32 for int8).
      trans_A     A is stored [K, M] (TN); trans_B: B is stored [N, K] (NT).
      bias        adds Bias[N] (in out_dtype) to every row before the activation.
      act         none | relu | gelu (tanh form) | silu, applied on the float32 accumulator.
      batch       None, or the batch size (int or symbol name): A, B and C get a leading batch dim.
      block_*     the tile: block_M x block_N outputs per block, K stepped by block_K.
      raster      0: a 2-D grid in row-major block order; P > 0: a 1-D grid walked in panels of P
                  row blocks (better L2 reuse at large M and N; static M and N, no batch).
      swap_ab     skinny M (decode, M = 16): each block computes its tile transposed, C^T = B^T A^T, so
                  block_N fills the MMA's M dimension (wgmma's 64-row tiles) and block_M (16) is its N;
                  A's tile is block_M rows (no rows of zeros), a pipeline stage is nearly all B, and more
                  stages fit; the tile is stored transposed. No transposes, bias, activation, batch or raster.
      cluster     1, or 2: T.Kernel(..., cluster_dims=2) -- on sm_90a the warp-specialized kernel runs as
                  clusters of 2 blocks along the grid's x (blocks 2j, 2j + 1; persistent: tiles 2j, 2j + 1)
                  whose producers each load half of a tile both blocks need and multicast it into both
                  (raster 0: the same A row block; raster P even: the same B column block), halving that
                  operand's L2 reads. Needs a static, even x extent (raster 0: ceildiv(N, block_N); raster P:
                  the tile count); elsewhere, and on every other target, the same kernel without a cluster.
    Signature: (A, B, [Bias,] C); C is written.
    """
    if dtype not in ACCUM:
        raise ValueError(f"matmul: dtype {dtype!r} not in {sorted(ACCUM)}")
    if cluster not in (1, 2) or isinstance(cluster, bool):
        raise ValueError(f"matmul: cluster={cluster!r} must be 1 or 2 (blocks per thread-block cluster)")
    if act not in ACTIVATIONS:
        raise ValueError(f"matmul: act {act!r} not in {ACTIVATIONS}")
    accum = ACCUM[dtype]
    out_dtype = out_dtype or accum
    if dtype == "int8" and (act != "none" or out_dtype != "int32"):
        raise ValueError("matmul: int8 GEMM writes int32 and takes no activation")
    if raster and (batch is not None or not isinstance(M, int) or not isinstance(N, int)):
        raise ValueError(f"matmul: raster={raster} needs static M and N and no batch, got M={M!r}, N={N!r}, "
                         f"batch={batch!r}")
    if swap_ab and (trans_A or trans_B or bias or act != "none" or batch is not None or raster):
        raise ValueError(f"matmul: swap_ab takes no trans_A/trans_B, bias, act, batch or raster, got trans_A={trans_A}, "
                         f"trans_B={trans_B}, bias={bias}, act={act!r}, batch={batch!r}, raster={raster}")
    n_m, n_n = (-(-M // block_M), -(-N // block_N)) if raster else (0, 0)
    M, N, K, B_ = _dim(M), _dim(N), _dim(K), _dim(batch)
    lead = () if batch is None else (B_,)
    A_shape = lead + ((K, M) if trans_A else (M, K))
    B_shape = lead + ((N, K) if trans_B else (K, N))
    A_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)
    grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M)) + (() if batch is None else (B_,))
    if raster:
        grid = (n_m * n_n,)

    def block_ids(ids):
        if raster:
            bx, by = _raster(ids, n_m, n_n, raster)
            return bx, by, 0
        return ids[0], ids[1], (ids[2] if batch is not None else 0)

    @T.macro
    def body_swapped(A, B, C, bx, by):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        Ct_f = T.alloc_fragment((block_N, block_M), accum)  # C^T: N rows, M columns
        T.clear(Ct_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_s)
            T.copy(B[k * block_K, bx * block_N], B_s)
            T.gemm(B_s, A_s, Ct_f, transpose_A=True, transpose_B=True)
        for n, m in T.Parallel(block_N, block_M):
            C[by * block_M + m, bx * block_N + n] = Ct_f[n, m]

    @T.macro
    def body(A, B, Bias, C, bx, by, bz):
        A_s = T.alloc_shared(A_tile, dtype)
        B_s = T.alloc_shared(B_tile, dtype)
        C_f = T.alloc_fragment((block_M, block_N), accum)
        T.clear(C_f)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            if batch is None:
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
            else:
                if trans_A:
                    T.copy(A[bz, k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[bz, by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bz, bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[bz, k * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B)
        if bias or act != "none":
            b_f = T.alloc_fragment((block_N,), accum)
            if bias:
                T.copy(Bias[bx * block_N], b_f)
            else:
                T.clear(b_f)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] = activation(C_f[i, j] + b_f[j], act)
        if batch is None:
            T.copy(C_f, C[by * block_M, bx * block_N])
        else:
            T.copy(C_f, C[bz, by * block_M, bx * block_N])

    C_shape = lead + (M, N)
    if bias:
        @T.prim_func
        def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), Bias: T.Tensor((N,), out_dtype),
                 C: T.Tensor(C_shape, out_dtype)):
            with T.Kernel(*grid, threads=threads, cluster_dims=cluster) as ids:
                body(A, B, Bias, C, *block_ids(ids))
        return main

    if swap_ab:
        @T.prim_func
        def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor(C_shape, out_dtype)):
            with T.Kernel(*grid, threads=threads, cluster_dims=cluster) as (bx, by):
                body_swapped(A, B, C, bx, by)
        return main

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor(C_shape, out_dtype)):
        with T.Kernel(*grid, threads=threads, cluster_dims=cluster) as ids:
            body(A, B, None, C, *block_ids(ids))

    return main


def matmul_splitk(M, N, K, split_k, dtype="float16", out_dtype=None, block_M=128, block_N=128, block_K=64,
                  num_stages=3, threads=256, cast_block=(32, 128), workspace=False, reduce="atomic", swap_ab=False):
    """C = A @ B with K split over `split_k` blocks per output tile (skinny M: more blocks streaming B).

    Two kernels in one program, over a float32 workspace W [M, N] that is zero when kernel 1 starts:
      1. grid (N / block_N, M / block_M, split_k): block z accumulates its slice of
         ceil(K / block_K / split_k) k-steps in float32 registers and adds the tile into W with
         float32 atomics (a k-step past K reads zeros: any K works);
      2. W -> C, rounded once to out_dtype (the partial sums are never rounded to 16 bits).
    workspace=False: W is a T.alloc_global workspace, allocated zeroed at every call (one more
    device operation: the zeroing). workspace=True: W is the caller's 4th argument, which must be
    zero before the first call; kernel 2 writes zeros back after reading each element, so every
    call leaves it zero for the next (one workspace per concurrently running call).
    Numerics: float32 accumulation as `matmul`; the split sums add in an unspecified order.
    reduce="partials": W is [split_k, M, N] float32 and block z stores its tile into W[z] with plain
    stores (on sm_90a the staged 16-byte epilogue, no atomics at the end of the split kernel); kernel 2
    adds the split_k slices in order z = 0, 1, ... (deterministic) and rounds once. W needs no zeroing
    and is left as written (with workspace=True any contents will do; without, T.alloc_global's zeroing
    is still done per call): split_k x 4 bytes per output element are written and read back, all of it
    in the L2 at the skinny shapes (M = 128, N = 8192, split 4: 16 MiB), instead of atomics, the read and
    the write-back of zeros.
    swap_ab=True (skinny M): the split kernel computes the transposed tile C^T = B^T A^T, so N fills the
    MMA's M dimension (wgmma's 64-row tiles) and block_M (16 for M = 16) is its N; A's tile is block_M rows
    (no rows of zeros), so a stage is nearly all B and more of them fit in shared memory. The tile is
    stored (or added) transposed; kernel 2 is unchanged.
    Parameters as `matmul` (A [M, K], B [K, N], no transposes, no epilogue); M may be a str naming a
    `T.dynamic` symbol; N and K are ints. cast_block: the (rows, columns) tile of kernel 2.
    Signature: (A, B, C) or, with workspace=True, (A, B, C, W [M, N] float32; [split_k, M, N] with
    reduce="partials"); C is written."""
    if dtype not in ("float16", "bfloat16", "float32"):
        raise ValueError(f"matmul_splitk: dtype {dtype!r} not in ['bfloat16', 'float16', 'float32']")
    if not isinstance(N, int) or not isinstance(K, int):
        raise ValueError(f"matmul_splitk: N and K must be ints, got N={N!r}, K={K!r}")
    steps = -(-K // block_K)
    if not isinstance(split_k, int) or not 1 <= split_k <= steps:
        raise ValueError(f"matmul_splitk: split_k={split_k!r} must be an int in [1, {steps}] "
                         f"(K={K} is {steps} k-steps of block_K={block_K})")
    if reduce not in ("atomic", "partials"):
        raise ValueError(f"matmul_splitk: reduce={reduce!r} not in ['atomic', 'partials']")
    partials = reduce == "partials"
    accum = "float32"
    out_dtype = out_dtype or accum
    per_split = -(-steps // split_k)  # k-steps per split; the last split's tail past K reads zeros
    cb_m, cb_n = cast_block
    M = _dim(M)

    @T.macro
    def split(A, B, W, bx, by, bz):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        C_f = T.alloc_fragment((block_M, block_N), accum)
        T.clear(C_f)
        for k in T.Pipelined(per_split, num_stages=num_stages):
            T.copy(A[by * block_M, (bz * per_split + k) * block_K], A_s)
            T.copy(B[(bz * per_split + k) * block_K, bx * block_N], B_s)
            T.gemm(A_s, B_s, C_f)
        if partials:
            T.copy(C_f, W[bz, by * block_M, bx * block_N])
        else:
            T.atomic_add(W[by * block_M, bx * block_N], C_f)

    @T.macro
    def split_swapped(A, B, W, bx, by, bz):
        A_s = T.alloc_shared((block_M, block_K), dtype)
        B_s = T.alloc_shared((block_K, block_N), dtype)
        Ct_f = T.alloc_fragment((block_N, block_M), accum)  # C^T: N rows, M columns
        T.clear(Ct_f)
        for k in T.Pipelined(per_split, num_stages=num_stages):
            T.copy(A[by * block_M, (bz * per_split + k) * block_K], A_s)
            T.copy(B[(bz * per_split + k) * block_K, bx * block_N], B_s)
            T.gemm(B_s, A_s, Ct_f, transpose_A=True, transpose_B=True)
        if partials:
            for n, m in T.Parallel(block_N, block_M):
                W[bz, by * block_M + m, bx * block_N + n] = Ct_f[n, m]
        else:
            for n, m in T.Parallel(block_N, block_M):
                T.atomic_add(W[by * block_M + m, bx * block_N + n], Ct_f[n, m])

    @T.macro
    def sum_partials(C, W, bx, by):
        # the split_k slices of this tile through shared memory (16-byte reads), added in slice order
        w_s = T.alloc_shared((cb_m, cb_n), accum)
        acc = T.alloc_fragment((cb_m, cb_n), accum)
        T.clear(acc)
        for z in T.serial(split_k):
            T.copy(W[z, by * cb_m, bx * cb_n], w_s)
            for i, j in T.Parallel(cb_m, cb_n):
                acc[i, j] += w_s[i, j]
        T.copy(acc, C[by * cb_m, bx * cb_n])

    @T.macro
    def cast(C, W, bx, by):
        # through shared memory: W is read (and zeroed) in 16-byte accesses, C written in coalesced rows;
        # whole-tile copies, edges guarded by the copies
        w_s = T.alloc_shared((cb_m, cb_n), accum)
        T.copy(W[by * cb_m, bx * cb_n], w_s)
        T.copy(w_s, C[by * cb_m, bx * cb_n])
        if workspace:
            z_s = T.alloc_shared((cb_m, cb_n), accum)
            T.clear(z_s)
            T.copy(z_s, W[by * cb_m, bx * cb_n])

    grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k)
    cast_grid = (T.ceildiv(N, cb_n), T.ceildiv(M, cb_m))
    W_shape = (split_k, M, N) if partials else (M, N)
    finish = sum_partials if partials else cast
    if swap_ab:
        split = split_swapped  # noqa: F811 - the transposed form of the split kernel
    if workspace:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype),
                 W: T.Tensor(W_shape, accum)):
            with T.Kernel(*grid, threads=threads) as (bx, by, bz):
                split(A, B, W, bx, by, bz)
            with T.Kernel(*cast_grid, threads=128) as (bx, by):
                finish(C, W, bx, by)
        return main

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        W = T.alloc_global(W_shape, accum)
        with T.Kernel(*grid, threads=threads) as (bx, by, bz):
            split(A, B, W, bx, by, bz)
        with T.Kernel(*cast_grid, threads=128) as (bx, by):
            finish(C, W, bx, by)

    return main


def activation_ref(x, act):
    if act == "relu":
        return np.maximum(x, 0)
    if act == "gelu":
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    if act == "silu":
        return x / (1 + np.exp(-x))
    return x


def matmul_ref(A, B, trans_A=False, trans_B=False, bias=None, act="none"):
    """float64 reference; A, B as float64-convertible arrays (bf16 already decoded)."""
    a = np.asarray(A, np.float64)
    b = np.asarray(B, np.float64)
    if trans_A:
        a = np.swapaxes(a, -1, -2)
    if trans_B:
        b = np.swapaxes(b, -1, -2)
    c = a @ b
    if bias is not None:
        c = c + np.asarray(bias, np.float64)
    return activation_ref(c, act)


def matmul_case(kw, rng):
    """Test case for a `matmul` instance (kwargs as in the manifest)."""
    from kernels._util import Case, empty, rand, size
    M, N, K = size(kw, "M"), size(kw, "N"), size(kw, "K")
    batch = size(kw, "batch")
    dtype = kw.get("dtype", "float32")
    out_dtype = kw.get("out_dtype") or ACCUM[dtype]
    ta, tb = kw.get("trans_A", False), kw.get("trans_B", False)
    lead = () if batch is None else (batch,)
    a, a64 = rand(rng, lead + ((K, M) if ta else (M, K)), dtype)
    b, b64 = rand(rng, lead + ((N, K) if tb else (K, N)), dtype)
    args, bias64 = [a, b], None
    if kw.get("bias"):
        bias, bias64 = rand(rng, (N,), out_dtype)
        args.append(bias)
    args.append(empty(lead + (M, N), out_dtype))
    ref = matmul_ref(a64, b64, ta, tb, bias64, kw.get("act", "none"))
    tol = {}
    if out_dtype == "float32" and dtype != "float32":
        tol = {len(args) - 1: (1e-3, 1e-3)}
    return Case(args, {len(args) - 1: ref}, {len(args) - 1: out_dtype}, tol,
                flops=2 * M * N * K * (batch or 1))


CASES = {"matmul": matmul_case}
