"""Tiled GEMM: C[M, N] = A[M, K] @ B[K, N] (optionally transposed operands)."""
import numpy as np

import tilelang.language as T


def matmul(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float32", accum_dtype="float32",
           trans_A=False, trans_B=False, num_stages=2, threads=128):
    """Returns a prim_func computing C = op(A) @ op(B) in `accum_dtype`.

    M may be a `T.dynamic` symbol name (str) so one kernel serves every M.
    A is [M, K] ([K, M] when trans_A); B is [K, N] ([N, K] when trans_B); C is [M, N] accum_dtype.
    """
    if isinstance(M, str):
        M = T.dynamic(M)
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_tile = (block_K, block_M) if trans_A else (block_M, block_K)
    B_tile = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, dtype), B: T.Tensor(B_shape, dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared(A_tile, dtype)
            B_s = T.alloc_shared(B_tile, dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_s)
                else:
                    T.copy(A[by * block_M, k * block_K], A_s)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def matmul_ref(A, B, trans_A=False, trans_B=False):
    a = A.astype(np.float64)
    b = B.astype(np.float64)
    return (a.T if trans_A else a) @ (b.T if trans_B else b)
