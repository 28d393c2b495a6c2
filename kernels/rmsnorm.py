"""RMSNorm over the last dimension: Y = X / sqrt(mean(X^2) + eps) * W."""
import numpy as np

import tilelang.language as T


def rms_norm(M, N, block_M=4, eps=1e-6, dtype="float32"):
    """Returns a prim_func computing RMSNorm of X [M, N] with weight W [N] into Y [M, N]."""
    if isinstance(M, str):
        M = T.dynamic(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, ss, dim=1)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * ss[i] * W[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def rms_norm_ref(X, W, eps=1e-6):
    x = X.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * W.astype(np.float64)
