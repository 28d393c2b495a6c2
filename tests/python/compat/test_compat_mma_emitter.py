"""upstream's TensorCoreIntrinEmitter (example_gemm_intrinsics.py) at tile level: ldmatrix_a/b pick the
k-step's shared slices, mma is T.gemm into the block's accumulator fragment, stmatrix writes upstream's
micro-tile layout. Checked on the CPU against numpy float64."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter


def intrinsics_gemm(M, N, K, in_dtype, out_dtype, accum_dtype, b_transposed=True, c_4d=True):
    # upstream's tl_matmul, with a smaller block (2x2 warps of 32x32)
    micro_k = 32 if accum_dtype == "int32" else 16
    block_M = block_N = 64
    block_K = 32
    emitter = TensorCoreIntrinEmitter(a_dtype=in_dtype, b_dtype=in_dtype, accum_dtype=accum_dtype,
                                      a_transposed=False, b_transposed=b_transposed, block_row_warps=2,
                                      block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32, chunk=block_K)
    local_c = (16 * 16 // 32) * 2 * 2  # local_size_c * warp_rows * warp_cols
    B_shape = (N, K) if b_transposed else (K, N)
    B_shared_shape = (block_N, block_K) if b_transposed else (block_K, block_N)
    C_shared_shape = (block_M // 16, block_N // 16, 16, 16) if c_4d else (block_M, block_N)

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor(B_shape, in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared(B_shared_shape, in_dtype)
            C_shared = T.alloc_shared(C_shared_shape, out_dtype)
            A_local = T.alloc_local((2 * 16 * micro_k // 32,), in_dtype)
            B_local = T.alloc_local((2 * 16 * micro_k // 32,), in_dtype)
            C_local = T.alloc_local((local_c,), accum_dtype)
            T.annotate_layout({A_shared: T.Layout(A_shared.shape, lambda i, j: (i, j))})
            T.clear(C_local)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                if b_transposed:
                    T.copy(B[bx * block_N, ko * block_K], B_shared)
                else:
                    T.copy(B[ko * block_K, bx * block_N], B_shared)
                for ki in T.serial(block_K // micro_k):
                    emitter.ldmatrix_a(A_local, A_shared, ki)
                    emitter.ldmatrix_b(B_local, B_shared, ki)
                    emitter.mma(A_local, B_local, C_local)
            emitter.stmatrix(C_local, C_shared)
            for i, j in T.Parallel(block_M, block_N):
                if c_4d:
                    C[by * block_M + i, bx * block_N + j] = C_shared[i // 16, j // 16, i % 16, j % 16]
                else:
                    C[by * block_M + i, bx * block_N + j] = C_shared[i, j]
    return main


@pytest.mark.parametrize("b_transposed,c_4d", [(True, True), (False, False)])
def test_f16_intrinsics_gemm_matches_numpy(b_transposed, c_4d):
    rng = np.random.default_rng(41)
    M, N, K = 128, 64, 96
    kernel = tilelang.compile(intrinsics_gemm(M, N, K, "float16", "float32", "float32", b_transposed, c_4d),
                              out_idx=[2], target="cpu")
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if b_transposed else (K, N)).astype(np.float16)
    bt = b.astype(np.float64).T if b_transposed else b.astype(np.float64)
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ bt, rtol=1e-4, atol=1e-3)


def test_int8_intrinsics_gemm_is_exact():
    rng = np.random.default_rng(42)
    M, N, K = 64, 128, 128
    kernel = tilelang.compile(intrinsics_gemm(M, N, K, "int8", "int32", "int32"), out_idx=[2], target="cpu")
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    np.testing.assert_array_equal(kernel(a, b), a.astype(np.int64) @ b.astype(np.int64).T)


def test_unsupported_uses_say_so():
    with pytest.raises(tilelang.TileLangError, match=r"unsupported feature: TensorCoreIntrinEmitter\(reduce_k > 1\)"):
        TensorCoreIntrinEmitter(reduce_k=2)

    emitter = TensorCoreIntrinEmitter(block_row_warps=2, block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32,
                                      chunk=32, b_transposed=True, accum_dtype="float32")

    def build():
        @T.prim_func
        def per_thread(A: T.Tensor((64, 32), "float16"), C: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 32), "float16")
                A_l = T.alloc_local((16,), "float16")
                C_l = T.alloc_local((32,), "float32")
                T.copy(A, A_s)
                C_l[0] = 1.0  # used per thread before the emitter takes it over
                emitter.ldmatrix_a(A_l, A_s, 0)
                emitter.ldmatrix_b(A_l, A_s, 0)
                emitter.mma(A_l, A_l, C_l)
        return per_thread
    with pytest.raises(tilelang.TileLangError, match="unsupported feature: C_l is used as a per-thread buffer"):
        build()
