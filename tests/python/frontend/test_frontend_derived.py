"""T.alloc_global workspaces, several T.Kernel blocks in one function, buffer views
(T.Tensor(shape, dtype, buf.data), T.reshape, T.view) and T.im2col, on the CPU against numpy
on fresh random inputs whose sizes are not multiples of the tiles (upstream's flash_decoding
and convolution examples use all of them)."""

import numpy as np
import pytest

import fe_util
import tilelang
import tilelang.language as T
from tilelang.errors import display_path

THIS = display_path(__file__)
RNG = np.random.default_rng()


# ---------------------------------------------------------------- T.alloc_global

def copy_through_workspace(N, block):
    """upstream's testing/python/language alloc_global test, in our words: A -> C -> B."""
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        C = T.alloc_global((N,), "float32")
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            T.copy(A[bx * block:(bx + 1) * block], C[bx * block:(bx + 1) * block])
            T.copy(C[bx * block:(bx + 1) * block], B[bx * block:(bx + 1) * block])
    return main


def test_alloc_global_is_a_hidden_parameter():
    prog = copy_through_workspace(1000, 128)
    assert [p.name for p in prog.params] == ["A", "B"]  # what the caller passes
    assert "func @main(A: tensor[1000] f32, B: tensor[1000] f32, C: tensor[1000] f32)" in prog.script()
    kernel = tilelang.compile(prog, out_idx=[1], target="cpu")
    a = RNG.standard_normal(1000).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a)


def split_logsumexp(M, N, block_M, chunk, splits):
    """Two kernels, as flash decoding: per (row block, split) partial max and sum of exp into
    workspaces, then a combine kernel reading every split."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Out: T.Tensor((M,), "float32")):
        part_max = T.alloc_global((splits, M), "float32")
        part_sum = T.alloc_global((splits, M), "float32")
        with T.Kernel(T.ceildiv(M, block_M), splits) as (bx, bs):
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
        with T.Kernel(T.ceildiv(M, block_M)) as bx:
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


@pytest.mark.parametrize("M,N", [(50, 300), (7, 257), (64, 64)])
def test_split_and_combine_kernels_share_workspaces(M, N):
    chunk, splits = 64, -(-N // 64)
    prog = split_logsumexp(M, N, 16, chunk, splits)
    kernel = tilelang.compile(prog, out_idx=[1], target="cpu")
    assert kernel.kernel_names == ["main_k0", "main_k1"]
    x = (RNG.standard_normal((M, N)) * 3).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = x64.max(1) + np.log(np.exp(x64 - x64.max(1, keepdims=True)).sum(1))
    np.testing.assert_allclose(kernel(x), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kernel(x), ref, rtol=1e-5, atol=1e-5)  # workspaces are fresh per call


def test_alloc_global_in_eager_style():
    @tilelang.jit
    def twice(A, block):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        B = T.empty((N,), "float32")
        W = T.alloc_global((N,), "float32")
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                W[bx * block + i] = A[bx * block + i] * 2.0
        with T.Kernel(T.ceildiv(N, block)) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = W[bx * block + i] + 1.0
        return B

    a = RNG.standard_normal(333).astype(np.float32)
    np.testing.assert_allclose(twice(a, 64), a.astype(np.float64) * 2 + 1, rtol=1e-6)


# ---------------------------------------------------------------- views

def test_views_of_an_input_and_of_an_output_in_eager_style():
    """The convolution example's pattern: flat 2-D views of a rank-3 input and output."""
    @tilelang.jit
    def scale_rows(x, block_M, block_N):
        B, H, W = T.const("B, H, W")
        x: T.Tensor((B, H, W), "float32")
        out = T.empty((B, H, W), "float32")
        with T.Kernel(T.ceildiv(W, block_N), T.ceildiv(B * H, block_M)) as (bx, by):
            tile = T.alloc_shared((block_M, block_N), "float32")
            x_flat = T.Tensor((B * H, W), "float32", x.data)
            out_flat = T.reshape(out, (B * H, W))
            T.copy(x_flat[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = tile[i, j] * (by * block_M + i + 1)
            T.copy(tile, out_flat[by * block_M, bx * block_N])
        return out

    for shape in [(3, 5, 7), (2, 33, 40)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        rows = np.arange(1, shape[0] * shape[1] + 1, dtype=np.float64).reshape(shape[0], shape[1], 1)
        np.testing.assert_allclose(scale_rows(x, 16, 16), x * rows, rtol=1e-6)


def test_view_with_dynamic_dims_gets_its_own_symbol():
    M = T.dynamic("M")

    @T.prim_func
    def pairs(A: T.Tensor((M, 16), "float32"), B: T.Tensor((M, 8), "float32")):
        with T.Kernel(T.ceildiv(M * 2, 32)) as bx:
            halves = T.view(A, (M * 2, 8))  # row r of A is halves[2r] ++ halves[2r + 1]
            for i, j in T.Parallel(32, 8):
                if (bx * 32 + i) % 2 == 0:
                    B[(bx * 32 + i) // 2, j] = halves[bx * 32 + i, j] + halves[bx * 32 + i + 1, j]

    assert "dynamic(M: i32, dim: i32)" in pairs.script()
    kernel = tilelang.compile(pairs, out_idx=[1], target="cpu")
    for m in (1, 17, 40):
        a = RNG.standard_normal((m, 16)).astype(np.float32)
        np.testing.assert_allclose(kernel(a), a[:, :8] + a[:, 8:], rtol=1e-6)


def view_of_shared():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((64,), "float32")
            T.reshape(s, (8, 8))  # MARK-shared
    return main


def view_other_dtype():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(1) as bx:
            T.Tensor((64,), "int32", A.data)  # MARK-dtype
    return main


def view_too_large():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            T.view(A, (9, 8))  # MARK-large
    return main


def alloc_global_shared_scope():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        T.alloc_global((8,), "float32", scope="shared")  # MARK-scope
        with T.Kernel(1) as bx:
            T.fill(A, 0)
    return main


def view_and_base_written():
    @T.prim_func
    def main(A: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:  # MARK-alias
            flat = T.view(A, (64,))
            for i in T.Parallel(8):
                A[i, 0] = flat[i + 8]
    return main


@pytest.mark.parametrize("build,marker,message", [
    (view_of_shared, "# MARK-shared", "unsupported feature: T.reshape of shared buffer s (views of shared, "
                                      "fragment and local buffers); reshape global tensors only"),
    (view_other_dtype, "# MARK-dtype", "unsupported feature: T.Tensor(shape, dtype, buf.data) reinterpreting A "
                                       "(float32) as int32; a view keeps its buffer's dtype"),
    (view_too_large, "# MARK-large", "T.view: shape (9, 8) has 72 elements, more than the 64 of A(8, 8)"),
    (alloc_global_shared_scope, "# MARK-scope", "T.alloc_global: scope 'shared'; only 'global' is supported"),
])
def test_unsupported_views_name_the_feature_and_line(build, marker, message):
    with pytest.raises(tilelang.TileLangSyntaxError) as info:
        build()
    assert str(info.value) == f"{THIS}:{fe_util.marker_line(__file__, marker)}: {message}"


def test_writing_a_view_and_its_base_in_one_kernel_is_rejected():
    with pytest.raises(tilelang.TileLangSyntaxError) as info:
        view_and_base_written()
    line = fe_util.marker_line(__file__, "# MARK-alias")
    assert (f"unsupported feature: A, flat share memory (a buffer and its view) and one of them is written in "
            f"the same T.Kernel at {THIS}:{line}") in str(info.value)


# ---------------------------------------------------------------- T.im2col

def conv2d(N, H, W, C, F, K, S, D, P, block_M, block_N, block_K, dtype="float32"):
    """Implicit-GEMM convolution as upstream's example: im2col tiles x a flat view of the filter."""
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def main(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((K, K, C, F), dtype),
             out: T.Tensor((N, OH, OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M)) as (bx, by):
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


def conv_ref(x, w, S, D, P):
    N, H, W, C = x.shape
    K, F = w.shape[0], w.shape[3]
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (P, P), (P, P), (0, 0)))
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh * D:kh * D + S * (OH - 1) + 1:S, kw * D:kw * D + S * (OW - 1) + 1:S, :]
            out += np.einsum("nhwc,cf->nhwf", patch, w[kh, kw].astype(np.float64))
    return out


@pytest.mark.parametrize("N,H,W,C,F,K,S,D,P", [(2, 9, 7, 5, 12, 3, 1, 1, 1), (1, 11, 10, 8, 20, 3, 2, 2, 2),
                                               (3, 6, 6, 3, 7, 1, 1, 1, 0)])
def test_im2col_convolution(N, H, W, C, F, K, S, D, P):
    kernel = tilelang.compile(conv2d(N, H, W, C, F, K, S, D, P, 32, 16, 16), out_idx=[2], target="cpu")
    x = RNG.standard_normal((N, H, W, C)).astype(np.float32)
    w = RNG.standard_normal((K, K, C, F)).astype(np.float32)
    np.testing.assert_allclose(kernel(x, w), conv_ref(x, w, S, D, P), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- T.alloc_buffer

def test_alloc_buffer_global_and_on_chip_scopes():
    """TVM's T.alloc_buffer as upstream's dequantize examples use it: a global split-K buffer
    (a workspace) and a shared tile, then a second kernel summing the splits."""
    M, N, splits, block = 37, 45, 3, 16

    @T.prim_func
    def main(A: T.Tensor((splits, M, N), "float32"), Out: T.Tensor((M, N), "float32")):
        part = T.alloc_buffer([splits, M, N], "float32")
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), splits) as (bx, by, bz):
            tile = T.alloc_buffer((block, block), "float32", scope="shared.dyn")
            T.copy(A[bz, by * block, bx * block], tile)
            for i, j in T.Parallel(block, block):
                tile[i, j] = tile[i, j] * (bz + 1)
            T.copy(tile, part[bz, by * block, bx * block])
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)) as (bx, by):
            acc = T.alloc_buffer((block, block), "float32", scope="local.fragment")
            T.clear(acc)
            for s in T.serial(splits):
                for i, j in T.Parallel(block, block):
                    acc[i, j] += part[s, by * block + i, bx * block + j]
            T.copy(acc, Out[by * block, bx * block])

    kernel = tilelang.compile(main, out_idx=[1], target="cpu")
    a = RNG.standard_normal((splits, M, N)).astype(np.float32)
    ref = sum(a[s].astype(np.float64) * (s + 1) for s in range(splits))
    np.testing.assert_allclose(kernel(a), ref, rtol=1e-5, atol=1e-5)


def alloc_buffer_bad_scope():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.alloc_buffer((8,), "float32", scope="local.var")  # MARK-buffer-scope
    return main


def test_alloc_buffer_unknown_scope_names_it():
    with pytest.raises(tilelang.TileLangSyntaxError) as info:
        alloc_buffer_bad_scope()
    line = fe_util.marker_line(__file__, "# MARK-buffer-scope")
    assert str(info.value) == (f"{THIS}:{line}: unsupported feature: T.alloc_buffer scope 'local.var' "
                               "(supported: global, shared, shared.dyn, local.fragment, local)")
