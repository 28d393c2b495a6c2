"""Conformance tile programs: elementwise, softmax, norms, reductions, cumsum, top-k.

Written in upstream TileLang's closure style (a factory returning a
T.prim_func). Sizes in the tests are not multiples of the tiles, so every
program relies on the compiler's edge handling for T.copy and masks its own
padded lanes where they would change a reduction.
"""

import tilelang.language as T


def elementwise_add(M, N, block_M, block_N, in_dtype="float32", out_dtype="float32", threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), in_dtype), B: T.Tensor((M, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), in_dtype)
            B_shared = T.alloc_shared((block_M, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), out_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)
            T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(B[by * block_M, bx * block_N], B_shared)
            for local_y, local_x in T.Parallel(block_M, block_N):
                C_local[local_y, local_x] = A_shared[local_y, local_x] + B_shared[local_y, local_x]
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


def axpby_guarded(M, N, block_M, block_N, dtype="float32"):
    """Element-wise with explicit guards on global accesses and scalar parameters."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype),
             alpha: T.float32, beta: T.float32):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                if row < M and col < N:
                    v = alpha * X[row, col] + beta * Y[row, col]
                    Z[row, col] = v if v > 0 else v * 0.5

    return main


def softmax(M, N, block_M, BN, dtype="float32", accum_dtype="float32"):
    """Row softmax with the whole (padded) row in one tile; padded lanes are -inf."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, BN), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, BN):
                x[i, j] = T.if_then_else(j < N, x[i, j], -T.infinity(accum_dtype))
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, BN):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, BN):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def online_softmax(M, N, block_N, dtype="float32", accum_dtype="float32"):
    """Two passes over the row in chunks: running log-sum-exp in base 2, then exp2(x*s - lse)."""
    scale = 1.44269504  # log2(e)
    num_chunks = T.ceildiv(N, block_N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=128) as bx:
            x = T.alloc_fragment((block_N,), accum_dtype)
            y = T.alloc_fragment((block_N,), dtype)
            lse = T.alloc_fragment((1,), accum_dtype)
            max_x = T.alloc_fragment((1,), accum_dtype)
            exp_x = T.alloc_fragment((block_N,), accum_dtype)
            sum_exp_x = T.alloc_fragment((1,), accum_dtype)
            T.fill(lse, -T.infinity(accum_dtype))
            for k in T.Pipelined(num_chunks, num_stages=1):
                T.copy(X[bx, k * block_N], x)
                for j in T.Parallel(block_N):
                    x[j] = T.if_then_else(k * block_N + j < N, x[j], -T.infinity(accum_dtype))
                T.reduce_max(x, max_x, dim=0, clear=True)
                for j in T.Parallel(block_N):
                    exp_x[j] = T.exp2(x[j] * scale - max_x[0] * scale)
                T.reduce_sum(exp_x, sum_exp_x, dim=0, clear=True)
                lse[0] = max_x[0] * scale + T.log2(T.exp2(lse[0] - max_x[0] * scale) + sum_exp_x[0])
            for k in T.Pipelined(num_chunks, num_stages=1):
                T.copy(X[bx, k * block_N], x)
                for j in T.Parallel(block_N):
                    y[j] = T.exp2(x[j] * scale - lse[0])
                T.copy(y, Y[bx, k * block_N])

    return main


def rms_norm(M, N, blk_m, eps=1e-6, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_shared = T.alloc_shared((blk_m, N), dtype)
            A_local = T.alloc_fragment((blk_m, N), "float32")
            A_powsum = T.alloc_fragment((blk_m,), "float32")
            A_pow = T.alloc_fragment((blk_m, N), "float32")
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_shared)
            T.copy(A_shared, A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i] * W[j]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


def layer_norm(M, N, blk_m, eps=1e-5, dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype), Beta: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), accum_dtype)
            xc = T.alloc_fragment((blk_m, N), accum_dtype)
            mean = T.alloc_fragment((blk_m,), accum_dtype)
            var = T.alloc_fragment((blk_m,), accum_dtype)
            y = T.alloc_fragment((blk_m, N), dtype)
            T.copy(X[bx * blk_m, 0], x)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(blk_m):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(blk_m, N):
                xc[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
            T.reduce_sum(xc, var, dim=1)
            for i in T.Parallel(blk_m):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(blk_m, N):
                y[i, j] = (x[i, j] - mean[i]) * var[i] * Gamma[j] + Beta[j]
            T.copy(y, Y[bx * blk_m, 0])

    return main


_IDENTITY = {"sum": 0.0, "abssum": 0.0, "absmax": 0.0, "max": -float("inf"), "min": float("inf")}
_REDUCERS = {"sum": T.reduce_sum, "max": T.reduce_max, "min": T.reduce_min,
             "abssum": T.reduce_abssum, "absmax": T.reduce_absmax}


def row_reduce(M, N, block_M, block_N, op, dtype="float32"):
    """Out[i] = op over row i, accumulated chunk by chunk with clear=False."""
    ident = _IDENTITY[op]
    reducer = _REDUCERS[op]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M,), dtype)
            T.fill(acc, ident)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j], ident)
                reducer(x, acc, dim=1, clear=False)
            T.copy(acc, Out[bx * block_M])

    return main


def col_reduce(M, N, block_M, block_N, op, dtype="float32"):
    """Out[j] = op over column j (reduction along dim 0)."""
    ident = _IDENTITY[op]
    reducer = _REDUCERS[op]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), dtype)
            part = T.alloc_fragment((block_N,), dtype)
            acc = T.alloc_fragment((block_N,), dtype)
            T.fill(acc, ident)
            for k in T.Pipelined(T.ceildiv(M, block_M), num_stages=2):
                T.copy(X[k * block_M, bx * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_M + i < M, x[i, j], ident)
                reducer(x, part, dim=0)
                for j in T.Parallel(block_N):
                    acc[j] = T.max(acc[j], part[j]) if op == "max" else acc[j] + part[j]
            T.copy(acc, Out[bx * block_N])

    return main


def cumsum_rows(M, N, block_M, reverse=False, dtype="float32"):
    """In-place inclusive scan of whole rows in shared memory."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            s = T.alloc_shared((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], s)
            T.cumsum(s, dim=1, reverse=reverse)
            T.copy(s, Y[bx * block_M, 0])

    return main


def cumsum_chunked(M, N, block_M, block_N, dtype="float32"):
    """Row scan in column chunks: a fragment cumsum per chunk plus a carried row total."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), dtype)
            y = T.alloc_fragment((block_M, block_N), dtype)
            carry = T.alloc_fragment((block_M,), dtype)
            T.clear(carry)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                T.cumsum(x, y, dim=1)
                for i, j in T.Parallel(block_M, block_N):
                    y[i, j] += carry[i]
                for i in T.Parallel(block_M):
                    carry[i] = y[i, block_N - 1]
                T.copy(y, Y[bx * block_M, k * block_N])

    return main


def topk(M, N, k, blk_m, dtype="float32"):
    """Top-k per row by repeated arg-max (largest index wins ties), as upstream's example."""

    @T.prim_func
    def main(logits: T.Tensor((M, N), dtype), topk_gates: T.Tensor((M, k), dtype),
             topk_indices: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            logits_frag = T.alloc_fragment((blk_m, N), dtype)
            max_val = T.alloc_fragment((blk_m,), dtype)
            expand_max_idx = T.alloc_fragment((blk_m, N), "int32")
            max_idx = T.alloc_fragment((blk_m,), "int32")
            T.copy(logits[bx * blk_m, 0], logits_frag)
            for t in T.serial(k):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j,
                                                          expand_max_idx[i, j])
                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(max_idx[i] == j, -T.infinity(dtype), logits_frag[i, j])
                for i in T.Parallel(blk_m):
                    if bx * blk_m + i < M:
                        topk_gates[bx * blk_m + i, t] = max_val[i]
                        topk_indices[bx * blk_m + i, t] = max_idx[i]

    return main


# (case name, factory, kwargs): the frontend's golden Tile IR tests emit each of these.
GOLDEN_CASES = [
    ("elementwise_add", elementwise_add, dict(M=100, N=70, block_M=32, block_N=32)),
    ("elementwise_add_f16_f32", elementwise_add,
     dict(M=100, N=70, block_M=32, block_N=32, in_dtype="float16", out_dtype="float32")),
    ("axpby_guarded", axpby_guarded, dict(M=100, N=70, block_M=32, block_N=32)),
    ("softmax", softmax, dict(M=50, N=100, block_M=8, BN=128)),
    ("online_softmax", online_softmax, dict(M=10, N=300, block_N=128)),
    ("rms_norm", rms_norm, dict(M=50, N=200, blk_m=4)),
    ("layer_norm", layer_norm, dict(M=50, N=200, blk_m=4)),
    ("row_reduce_sum", row_reduce, dict(M=50, N=150, block_M=8, block_N=64, op="sum")),
    ("row_reduce_max", row_reduce, dict(M=50, N=150, block_M=8, block_N=64, op="max")),
    ("row_reduce_min", row_reduce, dict(M=50, N=150, block_M=8, block_N=64, op="min")),
    ("row_reduce_abssum", row_reduce, dict(M=50, N=150, block_M=8, block_N=64, op="abssum")),
    ("row_reduce_absmax", row_reduce, dict(M=50, N=150, block_M=8, block_N=64, op="absmax")),
    ("col_reduce_sum", col_reduce, dict(M=150, N=50, block_M=32, block_N=16, op="sum")),
    ("col_reduce_max", col_reduce, dict(M=150, N=50, block_M=32, block_N=16, op="max")),
    ("cumsum_rows", cumsum_rows, dict(M=50, N=90, block_M=8)),
    ("cumsum_rows_reverse", cumsum_rows, dict(M=50, N=90, block_M=8, reverse=True)),
    ("cumsum_chunked", cumsum_chunked, dict(M=50, N=90, block_M=8, block_N=32)),
    ("topk", topk, dict(M=70, N=100, k=6, blk_m=16)),
]
