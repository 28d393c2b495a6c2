"""Conformance tile programs: tensor edges without user guards.

Upstream's examples write T.Parallel epilogues straight into global tensors
(`C[by * bm + i, bx * bn + j] = ...`) and rely on the compiler's safe-memory
legalization: a store past the tensor's extent is dropped and a load past it
reads 0. Sizes in the tests are not multiples of the tiles, dynamic or static.
"""

import tilelang.language as T


def parallel_direct(M, N, block_M, block_N, dtype="float32"):
    """Y = 2 * X + X shifted one column left (column -1 reads as 0), no guard written."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = (X[by * block_M + i, bx * block_N + j] * 2.0
                                                         + X[by * block_M + i, bx * block_N + j - 1])

    return main


def parallel_direct_dynamic(N, block_M, block_N, dtype="float32"):
    """The reported crash's shape: rows a T.dynamic symbol (m = 100 with 32-row tiles)."""
    M = T.dynamic("m")
    return parallel_direct(M, N, block_M, block_N, dtype)


def gemm_parallel_epilogue(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float32"):
    """GEMM whose epilogue (bias + ReLU) is a T.Parallel loop storing into C directly."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), Bias: T.Tensor((N,), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = T.max(C_local[i, j] + Bias[bx * block_N + j], 0)

    return main


def scalar_read_modify_write(N, K, threads=128):
    """Scalar statements outside T.Parallel that read and write the same shared and global
    element (an accumulator): every thread runs them, so a GPU lowering that lets every thread
    store races (a fast warp's update is read and applied again by a slow one)."""

    @T.prim_func
    def main(X: T.Tensor((N, K), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=threads) as bx:
            acc = T.alloc_shared((1,), "float32")
            acc[0] = 0.0
            Y[bx] = 1.0
            for k in T.serial(K):
                acc[0] = acc[0] + X[bx, k]
                Y[bx] = Y[bx] * 0.5 + X[bx, k]
            Y[bx] = Y[bx] + acc[0]

    return main


GOLDEN_CASES = [
    ("edges_parallel_direct", parallel_direct, dict(M=77, N=45, block_M=32, block_N=16)),
    ("edges_parallel_direct_dynamic", parallel_direct_dynamic, dict(N=70, block_M=32, block_N=32)),
    ("edges_gemm_parallel_epilogue", gemm_parallel_epilogue,
     dict(M=100, N=70, K=50, block_M=64, block_N=64, block_K=32)),
]
