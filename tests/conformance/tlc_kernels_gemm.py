"""Conformance tile programs: GEMM (transposes x dtypes, dynamic M), fused
epilogue, split-K with atomic_add, and int4-weight dequantization GEMM."""

import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K, trans_A=False, trans_B=False, in_dtype="float16",
           out_dtype="float32", accum_dtype="float32", num_stages=2, threads=128):
    A_shape = (K, M) if trans_A else (M, K)
    B_shape = (N, K) if trans_B else (K, N)
    A_shared_shape = (block_K, block_M) if trans_A else (block_M, block_K)
    B_shared_shape = (block_N, block_K) if trans_B else (block_K, block_N)

    @T.prim_func
    def main(A: T.Tensor(A_shape, in_dtype), B: T.Tensor(B_shape, in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared(A_shared_shape, in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                if trans_A:
                    T.copy(A[k * block_K, by * block_M], A_shared)
                else:
                    T.copy(A[by * block_M, k * block_K], A_shared)
                if trans_B:
                    T.copy(B[bx * block_N, k * block_K], B_shared)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, trans_A, trans_B)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_dynamic_m(N, K, block_M, block_N, block_K, in_dtype="float16", out_dtype="float16",
                     accum_dtype="float32"):
    """M is a T.dynamic symbol: one kernel for every M, grid and edges computed at launch."""
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@T.macro
def _activation(x, act):
    if act == "relu":
        return T.max(x, 0)
    if act == "gelu":  # tanh approximation
        return 0.5 * x * (1.0 + T.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    if act == "silu":
        return x * T.sigmoid(x)
    return x


def matmul_bias_act(M, N, K, block_M, block_N, block_K, act="relu", in_dtype="float16",
                    out_dtype="float16", accum_dtype="float32"):
    """C = act(A @ B + bias), the epilogue fused on the accumulator fragment."""

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), Bias: T.Tensor((N,), in_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            bias_local = T.alloc_fragment((block_N,), accum_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(Bias[bx * block_N], bias_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = _activation(C_local[i, j] + bias_local[j], act)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def matmul_splitk(M, N, K, block_M, block_N, block_K, split_k, tile_atomic=False, in_dtype="float16",
                  accum_dtype="float32"):
    """Each of split_k blocks along z covers a K range; partial sums meet in C by atomic_add.

    C is an in-place argument the caller zeroes, as in upstream's example.
    """
    k_tiles = T.ceildiv(K, block_K)
    tiles_per_split = T.ceildiv(k_tiles, split_k)

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_K, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for ko in T.Pipelined(tiles_per_split, num_stages=0):
                k = bz * tiles_per_split + ko
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            if tile_atomic:
                T.atomic_add(C[by * block_M, bx * block_N], C_local)
            else:
                for i, j in T.Parallel(block_M, block_N):
                    if by * block_M + i < M and bx * block_N + j < N:
                        T.atomic_add(C[by * block_M + i, bx * block_N + j], C_local[i, j])

    return main


def dequant_gemm_int4(M, N, K, block_M, block_N, block_K, group_size, in_dtype="float16",
                      out_dtype="float32", accum_dtype="float32"):
    """C = A @ dequant(B)^T. B holds signed int4 weights, two per byte (low nibble first),
    shape (N, K/2); Scale holds one scale per (row of B, group of group_size along K)."""
    num_groups = T.ceildiv(K, group_size)
    half_K = block_K // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K // 2), "uint8"),
             Scale: T.Tensor((N, num_groups), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, half_K), "uint8")
            B_dequant = T.alloc_fragment((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * half_K], B_shared)
                for i, j in T.Parallel(block_N, block_K):
                    nibble = (B_shared[i, j // 2] >> ((j % 2) * 4)) & 0xF
                    value = T.if_then_else(nibble >= 8, nibble - 16, nibble)
                    n = bx * block_N + i
                    kk = k * block_K + j
                    scale = T.if_then_else(n < N and kk < K, Scale[n, kk // group_size], 0)
                    B_dequant[i, j] = T.cast(value, in_dtype) * scale
                T.gemm(A_shared, B_dequant, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


GEMM_SIZES = dict(M=100, N=72, K=80, block_M=64, block_N=64, block_K=32)

GOLDEN_CASES = [
    (f"gemm_{'t' if ta else 'n'}{'t' if tb else 'n'}_{dt}", matmul,
     dict(GEMM_SIZES, trans_A=ta, trans_B=tb, in_dtype=dt))
    for dt in ("float16", "bfloat16", "float32") for ta in (False, True) for tb in (False, True)
] + [
    ("gemm_dynamic_m", matmul_dynamic_m, dict(N=72, K=80, block_M=64, block_N=64, block_K=32)),
    ("gemm_bias_relu", matmul_bias_act, dict(GEMM_SIZES, act="relu")),
    ("gemm_bias_gelu", matmul_bias_act, dict(GEMM_SIZES, act="gelu")),
    ("gemm_bias_silu", matmul_bias_act, dict(GEMM_SIZES, act="silu")),
    ("gemm_splitk", matmul_splitk, dict(M=100, N=72, K=200, block_M=64, block_N=64, block_K=32, split_k=3)),
    ("gemm_splitk_tile_atomic", matmul_splitk,
     dict(M=100, N=72, K=200, block_M=64, block_N=64, block_K=32, split_k=3, tile_atomic=True)),
    ("dequant_gemm_int4", dequant_gemm_int4,
     dict(M=100, N=72, K=80, block_M=64, block_N=64, block_K=32, group_size=32)),
]
