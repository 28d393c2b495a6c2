"""Normalization: RMSNorm, LayerNorm forward (optionally saving mean and 1/std) and backward,
and row softmax. One block handles block_M whole rows (N is static: a row lives in one tile);
M may be a `T.dynamic` symbol name. Statistics are computed in float32.
"""
import numpy as np

import tilelang.language as T

from kernels.gemm import _dim


def rms_norm(M, N, eps=1e-6, dtype="float32", block_M=4, threads=128, stage="fragment", rows_per_block=8,
             num_stages=2, w_in_shared=True):
    """Y = X / sqrt(mean(X^2, axis=1) + eps) * W. Signature: (X [M, N], W [N], Y [M, N]).
    stage "fragment": rows load straight into registers (one element per load on CUDA);
    "shared": rows and W go through shared memory, so the GPU lowering moves them with 16-byte
    global loads and stores (what a bandwidth-bound kernel needs at large N; block_M * N * size +
    N * size bytes of shared memory); "pipelined": as "shared", but each block walks
    rows_per_block groups of block_M rows in a T.Pipelined loop (cp.async prefetch of the next
    rows while the current ones are reduced and stored; W loaded once per block).
    w_in_shared=False ("shared" only): W is read from global memory where it is used instead of
    being staged per block: on CUDA those are plain loads that the SM's L1 keeps for the next block
    on the same SM, while a shared-memory stage moves it with cp.async.cg (L2 only) — N * size
    bytes from L2 per block, as much as the block's own row at block_M = 1 — and doubles the
    block's shared memory (fewer blocks per SM)."""
    _check_stage(stage)
    M = _dim(M)
    rows = block_M * (rows_per_block if stage == "pipelined" else 1)

    @T.macro
    def normalize(x, sq, ss):
        for i, j in T.Parallel(block_M, N):
            sq[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(sq, ss, dim=1)
        for i in T.Parallel(block_M):
            ss[i] = T.rsqrt(ss[i] / N + eps)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            if stage == "pipelined":
                xs = T.alloc_shared((block_M, N), dtype)
                ys = T.alloc_shared((block_M, N), dtype)
                ws = T.alloc_shared((N,), dtype)
                T.copy(W[0], ws)
                for r in T.Pipelined(rows_per_block, num_stages=num_stages):
                    T.copy(X[(bx * rows_per_block + r) * block_M, 0], xs)
                    T.copy(xs, x)
                    normalize(x, sq, ss)
                    for i, j in T.Parallel(block_M, N):
                        ys[i, j] = x[i, j] * ss[i] * ws[j]
                    T.copy(ys, Y[(bx * rows_per_block + r) * block_M, 0])
            elif stage == "shared":
                xs = T.alloc_shared((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], xs)
                T.copy(xs, x)
                normalize(x, sq, ss)
                if w_in_shared:
                    ws = T.alloc_shared((N,), dtype)
                    T.copy(W[0], ws)
                    for i, j in T.Parallel(block_M, N):
                        xs[i, j] = x[i, j] * ss[i] * ws[j]
                else:
                    for i, j in T.Parallel(block_M, N):
                        xs[i, j] = x[i, j] * ss[i] * W[j]
                T.copy(xs, Y[bx * block_M, 0])
            else:
                T.copy(X[bx * block_M, 0], x)
                normalize(x, sq, ss)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * ss[i] * W[j]
                T.copy(x, Y[bx * block_M, 0])

    return main


def _check_stage(stage):
    if stage not in ("fragment", "shared", "pipelined"):
        raise ValueError(f"stage must be 'fragment', 'shared' or 'pipelined', got {stage!r}")


def layer_norm(M, N, eps=1e-5, dtype="float32", save_stats=False, block_M=4):
    """Y = (X - mean) / sqrt(var + eps) * Gamma + Beta over the last dim.
    Signature: (X [M, N], Gamma [N], Beta [N], Y [M, N][, Mean [M] f32, Rstd [M] f32])."""
    M = _dim(M)

    @T.macro
    def body(X, Gamma, Beta, Y, Mean, Rstd, bx):
        x = T.alloc_fragment((block_M, N), "float32")
        xc = T.alloc_fragment((block_M, N), "float32")
        mean = T.alloc_fragment((block_M,), "float32")
        rstd = T.alloc_fragment((block_M,), "float32")
        T.copy(X[bx * block_M, 0], x)
        T.reduce_sum(x, mean, dim=1)
        for i in T.Parallel(block_M):
            mean[i] = mean[i] / N
        for i, j in T.Parallel(block_M, N):
            xc[i, j] = (x[i, j] - mean[i]) * (x[i, j] - mean[i])
        T.reduce_sum(xc, rstd, dim=1)
        for i in T.Parallel(block_M):
            rstd[i] = T.rsqrt(rstd[i] / N + eps)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = (x[i, j] - mean[i]) * rstd[i] * Gamma[j] + Beta[j]
        T.copy(x, Y[bx * block_M, 0])
        if save_stats:
            T.copy(mean, Mean[bx * block_M])
            T.copy(rstd, Rstd[bx * block_M])

    if save_stats:
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype), Beta: T.Tensor((N,), dtype),
                 Y: T.Tensor((M, N), dtype), Mean: T.Tensor((M,), "float32"), Rstd: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                body(X, Gamma, Beta, Y, Mean, Rstd, bx)
        return main

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype), Beta: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            body(X, Gamma, Beta, Y, None, None, bx)

    return main


def layer_norm_bwd_dx(M, N, dtype="float32", block_M=4):
    """dX = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dY * Gamma, xhat = (X - mean) * rstd.
    Signature: (X, dY [M, N], Gamma [N], Mean, Rstd [M] f32 (from layer_norm save_stats), dX [M, N])."""
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), dY: T.Tensor((M, N), dtype), Gamma: T.Tensor((N,), dtype),
             Mean: T.Tensor((M,), "float32"), Rstd: T.Tensor((M,), "float32"), dX: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            xh = T.alloc_fragment((block_M, N), "float32")
            g = T.alloc_fragment((block_M, N), "float32")
            gx = T.alloc_fragment((block_M, N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            s1 = T.alloc_fragment((block_M,), "float32")
            s2 = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], xh)
            T.copy(dY[bx * block_M, 0], g)
            T.copy(Mean[bx * block_M], mean)
            T.copy(Rstd[bx * block_M], rstd)
            for i, j in T.Parallel(block_M, N):
                xh[i, j] = (xh[i, j] - mean[i]) * rstd[i]
                g[i, j] = g[i, j] * Gamma[j]
                gx[i, j] = g[i, j] * xh[i, j]
            T.reduce_sum(g, s1, dim=1)
            T.reduce_sum(gx, s2, dim=1)
            for i, j in T.Parallel(block_M, N):
                g[i, j] = rstd[i] * (g[i, j] - s1[i] / N - xh[i, j] * (s2[i] / N))
            T.copy(g, dX[bx * block_M, 0])

    return main


def layer_norm_bwd_dweight(M, N, dtype="float32", block_M=32, block_N=64):
    """dGamma[j] = sum_i dY[i, j] * xhat[i, j], dBeta[j] = sum_i dY[i, j]: one block per block_N
    columns walks all rows (deterministic, no atomics).
    Signature: (X, dY [M, N], Mean, Rstd [M] f32, dGamma [N] f32, dBeta [N] f32)."""
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), dY: T.Tensor((M, N), dtype), Mean: T.Tensor((M,), "float32"),
             Rstd: T.Tensor((M,), "float32"), dGamma: T.Tensor((N,), "float32"), dBeta: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            dy = T.alloc_fragment((block_M, block_N), "float32")
            mean = T.alloc_fragment((block_M,), "float32")
            rstd = T.alloc_fragment((block_M,), "float32")
            pg = T.alloc_fragment((block_N,), "float32")
            pb = T.alloc_fragment((block_N,), "float32")
            ag = T.alloc_fragment((block_N,), "float32")
            ab = T.alloc_fragment((block_N,), "float32")
            T.clear(ag)
            T.clear(ab)
            for k in T.serial(T.ceildiv(M, block_M)):
                T.copy(X[k * block_M, bx * block_N], x)
                T.copy(dY[k * block_M, bx * block_N], dy)
                T.copy(Mean[k * block_M], mean)
                T.copy(Rstd[k * block_M], rstd)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = (x[i, j] - mean[i]) * rstd[i] * dy[i, j]  # rows past M: dy is 0
                T.reduce_sum(x, pg, dim=0)
                T.reduce_sum(dy, pb, dim=0)
                for j in T.Parallel(block_N):
                    ag[j] += pg[j]
                    ab[j] += pb[j]
            T.copy(ag, dGamma[bx * block_N])
            T.copy(ab, dBeta[bx * block_N])

    return main


def softmax(M, N, dtype="float32", block_M=4, threads=128, stage="fragment", rows_per_block=8, num_stages=2):
    """Y[i, :] = softmax(X[i, :]). Signature: (X [M, N], Y [M, N]).
    stage, rows_per_block, num_stages: as for rms_norm ("shared": 16-byte global loads and stores
    through shared memory; "pipelined": also a cp.async pipeline over rows_per_block row groups)."""
    _check_stage(stage)
    M = _dim(M)
    scale = 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))
    rows = block_M * (rows_per_block if stage == "pipelined" else 1)

    @T.macro
    def exp_and_sum(x, row_max, row_sum):
        # exp(x - max) = exp2(x * log2(e) - max * log2(e)): one FMA per element; then row_sum holds
        # 1 / sum, so the normalization multiplies (an IEEE division per element is a multi-instruction
        # sequence with a slow path on CUDA: 32 div.rn.f32 per thread and row at N = 8192, 256 threads).
        T.reduce_max(x, row_max, dim=1)
        for i in T.Parallel(block_M):
            row_max[i] = row_max[i] * scale
        for i, j in T.Parallel(block_M, N):
            x[i, j] = T.exp2(x[i, j] * scale - row_max[i])
        T.reduce_sum(x, row_sum, dim=1)
        for i in T.Parallel(block_M):
            row_sum[i] = 1.0 / row_sum[i]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            if stage == "pipelined":
                xs = T.alloc_shared((block_M, N), dtype)
                ys = T.alloc_shared((block_M, N), dtype)
                for r in T.Pipelined(rows_per_block, num_stages=num_stages):
                    T.copy(X[(bx * rows_per_block + r) * block_M, 0], xs)
                    T.copy(xs, x)
                    exp_and_sum(x, row_max, row_sum)
                    for i, j in T.Parallel(block_M, N):
                        ys[i, j] = x[i, j] * row_sum[i]
                    T.copy(ys, Y[(bx * rows_per_block + r) * block_M, 0])
            elif stage == "shared":
                xs = T.alloc_shared((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], xs)
                T.copy(xs, x)
                exp_and_sum(x, row_max, row_sum)
                for i, j in T.Parallel(block_M, N):
                    xs[i, j] = x[i, j] * row_sum[i]
                T.copy(xs, Y[bx * block_M, 0])
            else:
                T.copy(X[bx * block_M, 0], x)
                exp_and_sum(x, row_max, row_sum)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = x[i, j] * row_sum[i]
                T.copy(x, Y[bx * block_M, 0])

    return main


# ---- references (float64) and cases ------------------------------------------------------

def rms_norm_ref(X, W, eps=1e-6):
    x = np.asarray(X, np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * np.asarray(W, np.float64)


def layer_norm_ref(X, G, B, eps=1e-5):
    x = np.asarray(X, np.float64)
    mean = x.mean(1)
    rstd = 1 / np.sqrt(x.var(1) + eps)
    return (x - mean[:, None]) * rstd[:, None] * G + B, mean, rstd


def layer_norm_bwd_ref(X, dY, G, eps=1e-5):
    x = np.asarray(X, np.float64)
    _, mean, rstd = layer_norm_ref(x, G, 0 * G, eps)
    xh = (x - mean[:, None]) * rstd[:, None]
    g = dY * G
    N = x.shape[1]
    dx = rstd[:, None] * (g - g.sum(1, keepdims=True) / N - xh * (g * xh).sum(1, keepdims=True) / N)
    return dx, (dY * xh).sum(0), dY.sum(0), mean, rstd


def softmax_ref(X):
    x = np.asarray(X, np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _mn(kw):
    from kernels._util import size
    return size(kw, "M"), kw["N"], kw.get("dtype", "float32")


def rms_norm_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _mn(kw)
    x, x64 = rand(rng, (M, N), dt)
    w, w64 = rand(rng, (N,), dt)
    return Case([x, w, empty((M, N), dt)], {2: rms_norm_ref(x64, w64, kw.get("eps", 1e-6))}, {2: dt})


def layer_norm_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _mn(kw)
    x, x64 = rand(rng, (M, N), dt, 2.0)
    g, g64 = rand(rng, (N,), dt)
    b, b64 = rand(rng, (N,), dt)
    y, mean, rstd = layer_norm_ref(x64, g64, b64, kw.get("eps", 1e-5))
    args, outs, dts = [x, g, b, empty((M, N), dt)], {3: y}, {3: dt}
    if kw.get("save_stats"):
        args += [empty((M,), "float32"), empty((M,), "float32")]
        outs.update({4: mean, 5: rstd})
    return Case(args, outs, dts)


def layer_norm_bwd_dx_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _mn(kw)
    x, x64 = rand(rng, (M, N), dt)
    dy, dy64 = rand(rng, (M, N), dt)
    g, g64 = rand(rng, (N,), dt)
    dx, _, _, mean, rstd = layer_norm_bwd_ref(x64, dy64, g64)
    return Case([x, dy, g, mean.astype(np.float32), rstd.astype(np.float32), empty((M, N), dt)], {5: dx}, {5: dt},
                {5: (1e-3, 1e-3)} if dt == "float32" else None)


def layer_norm_bwd_dweight_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _mn(kw)
    x, x64 = rand(rng, (M, N), dt)
    dy, dy64 = rand(rng, (M, N), dt)
    _, dg, db, mean, rstd = layer_norm_bwd_ref(x64, dy64, np.ones(N))
    return Case([x, dy, mean.astype(np.float32), rstd.astype(np.float32), empty((N,), "float32"),
                 empty((N,), "float32")], {4: dg, 5: db}, {4: "float32", 5: "float32"},
                {4: (1e-3, 1e-3), 5: (1e-3, 1e-3)})


def softmax_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _mn(kw)
    x, x64 = rand(rng, (M, N), dt, 4.0)
    return Case([x, empty((M, N), dt)], {1: softmax_ref(x64)}, {1: dt}, {1: (1e-4, 1e-5)} if dt == "float32" else None)


CASES = {"rms_norm": rms_norm_case, "layer_norm": layer_norm_case, "layer_norm_bwd_dx": layer_norm_bwd_dx_case,
         "layer_norm_bwd_dweight": layer_norm_bwd_dweight_case, "softmax": softmax_case}
