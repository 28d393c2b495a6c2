"""Representative tile programs for the frontend's golden Tile IR tests.

Each exercises a part of the language surface; the emitted IR is compared with
golden/<case>.tir.
"""

import tilelang
import tilelang.language as T


def control_flow(N, block):
    """Python control flow on device values and on Python values."""
    use_clamp = True

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32"), n_valid: T.int32):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            acc = T.alloc_var("float32")
            count = T.alloc_var(T.int32, 0)
            acc = 0.0
            for i in range(block):                      # range in a kernel: serial loop
                idx = bx * block + i
                if idx < n_valid and not (idx % 2 == 1):
                    acc += X[idx]
                    count += 1
                elif idx >= N:
                    pass
                else:
                    acc = acc - X[idx] if X[idx] > 0 else acc
            for s in range(3):                          # also a serial loop (not unrolled)
                acc = acc * 0.5
            for j in T.unroll(0, block, 2):
                if bx * block + j < N:
                    Y[bx * block + j] = T.clamp(acc, -1.0, 1.0) if use_clamp else acc
            for j in T.serial(1, block, 4):
                if 0 <= bx * block + j < N:
                    Y[bx * block + j] = T.cast(count, "float32")

    return main


def scalars_and_math(M, N):
    """Scalar parameters, every math function, integer ops, casts, conditional expressions."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float32"), I: T.Tensor((M, N), "int32"),
             alpha: T.float32, shift: T.int32):
        with T.Kernel(1, threads=128) as _:
            for i, j in T.Parallel(M, N):
                a = A[i, j]
                B[i, j] = (T.exp(a) + T.exp2(a) + T.log(T.abs(a) + 1) + T.log2(T.abs(a) + 1) + T.rsqrt(T.abs(a) + 1)
                           + T.sqrt(T.abs(a)) + T.tanh(a) + T.sigmoid(a) + T.max(a, 0) + T.min(a, 0)) * alpha
                I[i, j] = ((i * N + j) // 3 + (i - j) % 5 + T.ceildiv(j, 4) + (j << shift) + (i >> 1) + (i & 3)
                           + (i | 8) + (i ^ j))
                B[i, j] += T.if_then_else(i == j, 1.0, -1.0) + T.cast(I[i, j], "float32") + (2.0 if i > j else 3)

    return main


@T.macro
def scale_tile(buf, rows, cols, factor):
    for i, j in T.Parallel(rows, cols):
        buf[i, j] = buf[i, j] * factor


@T.macro
def load_scaled(src, dst, row0, factor):
    T.copy(src[row0, 0], dst)
    scale_tile(dst, dst.shape[0], dst.shape[1], factor)


def macros(M, N, block_M):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), "float32")
            load_scaled(X, tile, bx * block_M, 2.0)
            scale_tile(tile, block_M, N, 0.5)
            T.copy(tile, Y[bx * block_M, 0])

    return main


def dynamic_shapes(block_M, block_N):
    """Two dynamic symbols; a scalar-element copy; grid from symbols; a reduction keeping its dim."""
    M, N = T.dynamic("M, N")

    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), RowMax: T.Tensor((M, 1), "float32"), First: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            m = T.alloc_fragment((block_M, 1), "float32")
            T.fill(m, -T.infinity("float32"))
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M:bx * block_M + block_M, k * block_N:k * block_N + block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j], -T.infinity("float32"))
                T.reduce_max(x, m, dim=-1, clear=False)
            T.copy(m, RowMax[bx * block_M, 0])
            if bx * block_M < M:
                T.copy(X[bx * block_M, 0], First[bx * block_M])

    return main


def hints_and_tiles(M, N, K):
    """use_swizzle / annotate_layout hints, gemm options, region copies with conversion, atomics,
    reductions of every kind, cumsum, several kernels in one function."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), C: T.Tensor((M, N), "float32"),
             S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=(128, 1)) as (bx, by):
            A_s = T.alloc_shared((64, 32), "bfloat16")
            B_s = T.alloc_shared((64, 32), "bfloat16")
            A_f = T.alloc_fragment((64, 32), "bfloat16")
            C_f = T.alloc_fragment((64, 64), "float32")
            C_h = T.alloc_local((64, 64), "float16")
            r = T.alloc_fragment((64,), "float32")
            T.use_swizzle(panel_size=10)
            T.annotate_layout({A_s: T.make_swizzled_layout(A_s)})
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=0):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[bx * 64:bx * 64 + 64, k * 32:k * 32 + 32], B_s)
                T.copy(A_s, A_f)
                T.gemm(A_f, B_s, C_f, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullCol, k_pack=2)
            T.copy(C_f, C_h)
            T.reduce_sum(C_f, r, dim=1)
            T.reduce_abssum(C_f, r, dim=1, clear=False)
            T.reduce_absmax(C_f, r, dim=1)
            T.reduce_min(C_f, r)
            T.cumsum(C_f, dim=1, reverse=True)
            T.sync_threads()
            T.atomic_add(C[by * 64, bx * 64], C_f)
            T.atomic_add(S[by * 64], r)
        with T.Kernel(1) as bx:
            T.atomic_add(S[0], 1)

    return main


@tilelang.jit(out_idx=[-1])
def jit_scale(N, factor, dtype="float32"):
    @T.prim_func
    def scale(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128)) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    Y[bx * 128 + i] = X[bx * 128 + i] * factor

    return scale


@tilelang.jit
def eager_add_scale(A, B, block_M, block_N, factor=2.0, dtype="float32"):
    """Upstream's eager style: sizes from T.const, parameters declared by statements,
    the output made by T.empty and returned."""
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        tile = T.alloc_fragment((block_M, block_N), dtype)
        T.copy(A[by * block_M, bx * block_N], tile)
        for i, j in T.Parallel(block_M, block_N):
            tile[i, j] = tile[i, j] * factor + B[by * block_M + i, bx * block_N + j]
        T.copy(tile, C[by * block_M, bx * block_N])
    return C


GOLDEN_CASES = [
    ("fe_control_flow", control_flow, dict(N=100, block=16)),
    ("fe_scalars_and_math", scalars_and_math, dict(M=8, N=8)),
    ("fe_macros", macros, dict(M=50, N=64, block_M=16)),
    ("fe_dynamic_shapes", dynamic_shapes, dict(block_M=32, block_N=64)),
    ("fe_hints_and_tiles", hints_and_tiles, dict(M=100, N=72, K=80)),
    ("fe_jit_scale", jit_scale.get_tir, dict(N=1000, factor=3)),
    ("fe_eager_add_scale", eager_add_scale.get_tir, dict(M=100, N=70, block_M=32, block_N=32)),
]
