"""Tensor edges through tilelang.compile on the CPU: programs written as upstream's examples
are (T.Parallel stores and loads straight into global tensors, no user guard) on dynamic and
static sizes that are not multiples of the tiles. Writes past a tensor are dropped and reads
past it give 0 (upstream's LegalizeSafeMemoryAccess); each output has a canary tail that must
survive, checked through a view into a larger array."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T

RNG = np.random.default_rng()


def with_tail(shape, dtype, fill):
    """An array of `shape` that is a view into a larger buffer whose tail holds `fill`."""
    n = int(np.prod(shape))
    base = np.full(n + 256, fill, dtype=dtype)
    return base, base[:n].reshape(shape)


def _scale_rows(block_M, block_N):
    M, N = T.dynamic("m"), T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                B[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] * 3.0 - 1.0
    return scale


@pytest.fixture(scope="module")
def scale_kernel():
    return tilelang.compile(_scale_rows(32, 32), target="cpu")


@pytest.mark.parametrize("m,n", [(100, 64), (100, 70), (33, 1), (1, 33), (31, 31), (257, 96)])
def test_parallel_store_past_a_dynamic_extent(scale_kernel, m, n):
    """The reported crash: m = 100 with 32-row tiles, T.Parallel writing B directly."""
    a = RNG.standard_normal((m, n)).astype(np.float32)
    base, b = with_tail((m, n), np.float32, 12.5)
    scale_kernel(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 3.0 - 1.0, rtol=1e-6, atol=1e-6)
    assert (base[m * n:] == 12.5).all(), "a write landed past the tensor"


def test_static_sizes_not_multiples_and_zero_reads():
    M, N, BM, BN = 77, 45, 32, 16

    @T.prim_func
    def shift(A: T.Tensor((M, N), "float32"), R: T.Tensor((N,), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM)) as (bx, by):
            for i, j in T.Parallel(BM, BN):
                # A[row, col + 2] reads past the last column for col >= N - 2: zero there.
                B[by * BM + i, bx * BN + j] = A[by * BM + i, bx * BN + j + 2] + R[bx * BN + j]

    kernel = tilelang.compile(shift, target="cpu")
    a = RNG.standard_normal((M, N)).astype(np.float32)
    r = RNG.standard_normal((N,)).astype(np.float32)
    base, b = with_tail((M, N), np.float32, -3.0)
    kernel(a, r, b)
    ref = np.zeros((M, N))
    ref[:, :-2] = a[:, 2:]
    ref += r
    np.testing.assert_allclose(b, ref, rtol=1e-6, atol=1e-6)
    assert (base[M * N:] == -3.0).all()


def _matmul_dynamic(block_M, block_N, block_K):
    """upstream's examples/dynamic_shape structure (fp32 here: numpy has no fast f16 GEMM to check)."""
    M, N, K = T.dynamic("m"), T.dynamic("n"), T.dynamic("k")

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float32")
            B_shared = T.alloc_shared((block_K, block_N), "float32")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            # Epilogue straight into C (upstream's examples often write T.Parallel epilogues).
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = T.max(C_local[i, j], 0.0)
    return main


@pytest.mark.parametrize("m,n,k", [(100, 70, 50), (129, 33, 200), (5, 64, 7)])
def test_dynamic_gemm_with_parallel_epilogue(m, n, k):
    kernel = tilelang.compile(_matmul_dynamic(64, 32, 32), target="cpu")
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    base, c = with_tail((m, n), np.float32, 7.0)
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a.astype(np.float64) @ b, 0.0), rtol=1e-4, atol=1e-4)
    assert (base[m * n:] == 7.0).all()


def test_scalar_atomic_add_and_gather_at_the_edges():
    N = T.dynamic("n")
    R = 64

    @T.prim_func
    def hist(X: T.Tensor((N,), "int32"), H: T.Tensor((R,), "int32"), G: T.Tensor((N,), "float32"),
             V: T.Tensor((R,), "float32")):
        with T.Kernel(T.ceildiv(N, 32)) as bx:
            for i in T.Parallel(32):
                T.atomic_add(H[X[bx * 32 + i]], 1)  # X's values may lie outside H: dropped
                G[bx * 32 + i] = V[X[bx * 32 + i]]  # gathered from outside V: 0

    kernel = tilelang.compile(hist, target="cpu")
    for n in (50, 7, 96):
        x = RNG.integers(-20, R + 20, size=n).astype(np.int32)
        base, h = with_tail((R,), np.int32, 99)
        h[:] = 0
        v = RNG.standard_normal(R).astype(np.float32)
        g = np.zeros(n, np.float32)
        kernel(x, h, g, v)
        inside = (x >= 0) & (x < R)
        ref_h = np.bincount(x[inside], minlength=R)
        # Lanes past n read X as 0 and count into H[0] (upstream's semantics: the read is zero).
        ref_h[0] += (-n) % 32
        np.testing.assert_array_equal(h, ref_h)
        np.testing.assert_array_equal(g, np.where(inside, v[np.clip(x, 0, R - 1)], 0.0).astype(np.float32))
        assert (base[R:] == 99).all()
