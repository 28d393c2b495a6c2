"""Row softmax over the last dimension, one block per group of rows."""
import numpy as np

import tilelang.language as T


def softmax(M, N, block_M=4, dtype="float32"):
    """Returns a prim_func computing Y[i, :] = softmax(X[i, :]) for X, Y of shape [M, N].

    The whole row lives in one fragment, so N is static; M may be a T.dynamic symbol name.
    """
    if isinstance(M, str):
        M = T.dynamic(M)
    scale = 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * scale)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def softmax_ref(X):
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
