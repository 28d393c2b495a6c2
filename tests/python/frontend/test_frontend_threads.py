"""Thread-level TIR in a T.Kernel (upstream's dequantize GEMV and SIMT GEMM style): T.thread_binding,
T.get_thread_binding, per-thread T.alloc_local buffers, T.tvm_thread_allreduce under
T.attr(T.comm_reducer(...), "reduce_scope"), T.dp4a, T.grid. The frontend turns the per-thread code
into T.Parallel loops over the threads with one copy of each local per thread (threads.py); these
tests check the numbers on the CPU against numpy float64, the Tile IR shape of the rewrite, the
sm_90a compile, and the errors for what is not supported."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangError


def gemv(N, K, reduce_thread=32, n_partition=4, micro_k=8, reducer="sum", dtype="float16",
         accum="float32"):
    """C[0, n] = sum_k A[0, k] * W[n, k], each row of W by reduce_thread threads (threadIdx.x),
    n_partition rows per block (threadIdx.y), combined with tvm_thread_allreduce."""
    block_K = reduce_thread * micro_k

    @T.prim_func
    def main(A: T.Tensor((1, K), dtype), W: T.Tensor((N, K), dtype), C: T.Tensor((1, N), accum)):
        with T.Kernel(T.ceildiv(N, n_partition), 1, threads=(reduce_thread, n_partition)) as (bx, by):
            a_local = T.alloc_local((micro_k,), dtype)
            w_local = T.alloc_local((micro_k,), dtype)
            acc = T.alloc_local((1,), accum)
            red = T.alloc_local((1,), accum)
            kr = T.thread_binding(0, reduce_thread, thread="threadIdx.x")
            ni = T.thread_binding(0, n_partition, thread="threadIdx.y")
            T.import_source(None)  # upstream calls it unconditionally
            T.clear(acc)
            for ko in T.serial(T.ceildiv(K, block_K)):
                for v in T.vectorized(micro_k):
                    a_local[v] = A[by, ko * block_K + kr * micro_k + v]
                for v in T.vectorized(micro_k):
                    w_local[v] = W[bx * n_partition + ni, ko * block_K + kr * micro_k + v]
                for ki in T.serial(micro_k):
                    if reducer == "max":
                        acc[0] = T.max(acc[0], T.cast(a_local[ki], accum) * T.cast(w_local[ki], accum))
                    else:
                        acc[0] += T.cast(a_local[ki], accum) * T.cast(w_local[ki], accum)
            fn = (lambda x, y: T.max(x, y)) if reducer == "max" else (lambda x, y: x + y)
            with T.attr(T.comm_reducer(fn, [T.cast(0, accum)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr, dtype="handle"))
            if kr == 0:
                C[by, bx * n_partition + ni] = red[0]

    return main


def simt_gemm(M, N, K, in_dtype, accum, tr=8, tc=8, rows=4, cols=4, chunk=16):
    """upstream's kernel/test_tilelang_kernel_gemm_simt.py structure, smaller: tile loads with
    T.Parallel into shared memory, per-thread sub-tiles through locals indexed by the thread id."""
    block_M, block_N = tr * rows, tc * cols
    mk = 4
    use_dp4a = in_dtype == "int8"

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=tr * tc) as (bx, by):
            A_s = T.alloc_shared((block_M, chunk), in_dtype)
            B_s = T.alloc_shared((block_N, chunk), in_dtype)
            a_l = T.alloc_local((rows, mk), in_dtype)
            b_l = T.alloc_local((cols, mk), in_dtype)
            c_l = T.alloc_local((rows * cols,), accum)
            tid = T.get_thread_binding()
            warp_m = tid % tr
            warp_n = tid // tr
            T.clear(c_l)
            for ko in T.serial(K // chunk):
                for i, k in T.Parallel(block_M, chunk):
                    A_s[i, k] = A[by * block_M + i, ko * chunk + k]
                for j, k in T.Parallel(block_N, chunk):
                    B_s[j, k] = B[bx * block_N + j, ko * chunk + k]
                for ki in T.serial(chunk // mk):
                    for i in T.serial(rows):
                        for m in T.vectorized(mk):
                            a_l[i, m] = A_s[warp_m * rows + i, ki * mk + m]
                    for j in T.serial(cols):
                        for m in T.vectorized(mk):
                            b_l[j, m] = B_s[warp_n * cols + j, ki * mk + m]
                    for i, j in T.grid(rows, cols):
                        if use_dp4a:
                            T.dp4a(a_l[i, 0], b_l[j, 0], c_l[i * cols + j])
                        else:
                            for m in T.serial(mk):
                                c_l[i * cols + j] += T.cast(a_l[i, m], accum) * T.cast(b_l[j, m], accum)
            for i, j in T.grid(rows, cols):
                C[by * block_M + warp_m * rows + i, bx * block_N + warp_n * cols + j] = c_l[i * cols + j]

    return main


def test_gemv_with_thread_allreduce_matches_numpy():
    rng = np.random.default_rng(41)
    N, K = 50, 512  # 50 rows: the last block's rows 50, 51 are past W (reads 0, stores dropped)
    kernel = tilelang.compile(gemv(N, K), out_idx=[2], target="cpu")
    a = rng.standard_normal((1, K)).astype(np.float16)
    w = rng.standard_normal((N, K)).astype(np.float16)
    c = kernel(a, w)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def test_allreduce_with_a_max_reducer():
    rng = np.random.default_rng(42)
    N, K = 8, 256
    kernel = tilelang.compile(gemv(N, K, reducer="max"), out_idx=[2], target="cpu")
    a = rng.standard_normal((1, K)).astype(np.float16)
    w = rng.standard_normal((N, K)).astype(np.float16)
    c = kernel(a, w)
    prod = a.astype(np.float64) * w.astype(np.float64)  # (N, K): each product once
    ref = np.maximum(prod.max(axis=1), 0.0)[None, :]    # acc starts at 0
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("in_dtype,accum", [("float16", "float32"), ("int8", "int32")])
def test_simt_gemm_with_get_thread_binding(in_dtype, accum):
    rng = np.random.default_rng(43)
    M, N, K = 64, 96, 48  # 2 x 3 blocks of 32 x 32, K in 3 chunks
    kernel = tilelang.compile(simt_gemm(M, N, K, in_dtype, accum), out_idx=[2], target="cpu")
    if in_dtype == "int8":
        a = rng.integers(-128, 128, (M, K)).astype(np.int8)
        b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    else:
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((N, K)).astype(np.float16)
    c = kernel(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    if in_dtype == "int8":
        np.testing.assert_array_equal(c, ref.astype(np.int64))  # dp4a in int32: exact
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-4)


def test_the_rewrite_is_parallel_loops_over_the_threads():
    text = gemv(64, 512).script()
    assert "threads(32, 4)" in text
    assert "alloc acc_t: fragment[4, 32, 1] f32" in text      # one copy per (threadIdx.y, threadIdx.x)
    assert "parallel (tx_1, ty_1)" not in text and "parallel (ty_1, tx_1) in (4, 32)" in text
    assert "reduce sum allreduce_src -> allreduce_dst dim=1 clear" in text
    assert "thread_binding" not in text and "tx " not in text.replace("tx_", "")
    simt = simt_gemm(64, 96, 48, "float16", "float32").script()
    assert "parallel (tx_1) in (64)" in simt  # 1-D threads: the thread id
    # the tile loads stay block-level T.Parallel loops between the per-thread regions
    assert simt.count("parallel (i, k) in (32, 16)") == 1


def test_thread_level_kernels_compile_for_sm90a():
    from test_frontend_cuda import _cuda_toolkit_missing
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(f"CUDA compile path: {reason}")
    for prim in (gemv(64, 512), simt_gemm(64, 96, 48, "int8", "int32")):
        assert tilelang.compile(prim, out_idx=[2], target="sm_90a").get_kernel_source()


def test_unsupported_thread_level_code_fails_with_the_line():
    with pytest.raises(TileLangError, match=r"unsupported feature: T\.Parallel that uses the thread index.*line \d+"):
        @T.prim_func
        def parallel_reads_tid(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tid = T.get_thread_binding()
                s = T.alloc_fragment((64,), "float32")
                for i in T.Parallel(64):
                    s[i] = A[i] + tid

    with pytest.raises(TileLangError, match=r"unsupported feature: a tile operation or T\.Parallel under "
                                            r"per-thread control flow.*\(line \d+\)"):
        @T.prim_func
        def tile_op_under_thread_if(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tid = T.get_thread_binding()
                s = T.alloc_shared((64,), "float32")
                if tid == 0:
                    T.copy(A, s)

    with pytest.raises(TileLangError, match=r"unsupported feature: T\.alloc_var in a kernel that uses "
                                            r"T\.thread_binding.*\(line \d+\)"):
        @T.prim_func
        def var_in_thread_kernel(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tid = T.get_thread_binding()
                x = T.alloc_var("float32")
                x = A[tid]
                A[tid] = x

    with pytest.raises(TileLangError, match=r"unsupported feature: the per-thread value v \(line \d+\) read after a "
                                            r"tile operation \(line \d+\); it reads a buffer"):
        @T.prim_func
        def let_across_a_tile_op(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                tid = T.get_thread_binding()
                s = T.alloc_shared((64,), "float32")
                v = A[tid] * 2.0  # a let that reads A
                T.copy(A, s)
                A[tid] = v + s[tid]

    with pytest.raises(TileLangError, match=r"expected 0 to the T\.Kernel's thread extent along that axis, "
                                            r"threads=\(64,\)"):
        @T.prim_func
        def bad_binding(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                T.thread_binding(0, 32, thread="threadIdx.x")
