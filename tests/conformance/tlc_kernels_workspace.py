"""Conformance tile programs: T.alloc_global workspaces shared by several T.Kernel blocks
(flash decoding's split + combine structure) and buffer views with T.im2col (the
convolution example's implicit GEMM)."""

import tilelang.language as T


def split_logsumexp(M, N, block_M, chunk):
    """Row logsumexp: per (row block, split) partial max and sum of exp into workspaces,
    then a combine kernel over every split."""
    splits = (N + chunk - 1) // chunk

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((M,), "float32")):
        part_max = T.alloc_global((splits, M), "float32")
        part_sum = T.alloc_global((splits, M), "float32")
        with T.Kernel(T.ceildiv(M, block_M), splits, threads=128) as (bx, bs):
            x = T.alloc_fragment((block_M, chunk), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            sm = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, bs * chunk], x)
            for i, j in T.Parallel(block_M, chunk):
                x[i, j] = T.if_then_else(bs * chunk + j < N, x[i, j], -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, chunk):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i in T.Parallel(block_M):
                part_max[bs, bx * block_M + i] = mx[i]
                part_sum[bs, bx * block_M + i] = sm[i]
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            g = T.alloc_fragment((block_M,), "float32")
            t = T.alloc_fragment((block_M,), "float32")
            T.fill(g, -T.infinity("float32"))
            T.clear(t)
            for s in T.serial(splits):
                for i in T.Parallel(block_M):
                    g[i] = T.max(g[i], part_max[s, bx * block_M + i])
            for s in T.serial(splits):
                for i in T.Parallel(block_M):
                    t[i] += part_sum[s, bx * block_M + i] * T.exp(part_max[s, bx * block_M + i] - g[i])
            for i in T.Parallel(block_M):
                Out[bx * block_M + i] = g[i] + T.log(t[i])

    return main


def conv2d_im2col(N, H, W, C, F, K, S, D, P, block_M, block_N, block_K, dtype="float16"):
    """NHWC convolution as an implicit GEMM: T.im2col tiles times a flat view of the filter,
    stored through a flat view of the output."""
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((K, K, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=128) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), "float32")
            kernel_flat = T.Tensor((K * K * C, F), dtype, kernel.data)
            out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K * K * C, block_K), num_stages=2):
                T.im2col(data, data_shared, by, k, K, S, D, P)
                T.copy(kernel_flat[k * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, acc)
            T.copy(acc, out_flat[by * block_M, bx * block_N])

    return main


GOLDEN_CASES = [
    ("workspace_split_logsumexp", split_logsumexp, dict(M=50, N=300, block_M=16, chunk=64)),
    ("workspace_conv2d_im2col", conv2d_im2col, dict(N=2, H=9, W=7, C=8, F=24, K=3, S=2, D=1, P=1,
                                                    block_M=64, block_N=32, block_K=32)),
]
