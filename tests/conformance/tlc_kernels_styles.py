"""Conformance tile programs in the other authoring styles: a @tilelang.jit
factory (closure style) and an eager-style @tilelang.jit function."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scaled_copy(N, block, factor, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            tile = T.alloc_fragment((block,), dtype)
            T.copy(X[bx * block], tile)
            for i in T.Parallel(block):
                tile[i] = tile[i] * factor
            T.copy(tile, Y[bx * block])

    return main


@tilelang.jit
def eager_add(A, B, block_M, block_N, dtype="float32"):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a = T.alloc_fragment((block_M, block_N), dtype)
        b = T.alloc_fragment((block_M, block_N), dtype)
        T.copy(A[by * block_M, bx * block_N], a)
        T.copy(B[by * block_M, bx * block_N], b)
        for i, j in T.Parallel(block_M, block_N):
            a[i, j] += b[i, j]
        T.copy(a, C[by * block_M, bx * block_N])
    return C
