"""Elementwise activations and rotary position embedding.

All compute in float32 and store in the tensor dtype; M (rows / tokens) may be a `T.dynamic`
symbol name. GELU offers the tanh form and the exact erf form; Tile IR has no erf, so the exact
form uses the Abramowitz-Stegun 7.1.26 rational approximation (|error| < 1.5e-7).
"""
import math

import numpy as np

import tilelang.language as T

from kernels.gemm import _dim


def silu_and_mul(M, N, dtype="float32", block_M=4, block_N=256):
    """Y = silu(X[:, :N]) * X[:, N:] (the gated MLP activation). Signature: (X [M, 2N], Y [M, N])."""
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, 2 * N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            g = T.alloc_fragment((block_M, block_N), "float32")
            u = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[by * block_M, bx * block_N], g)
            T.copy(X[by * block_M, N + bx * block_N], u)
            for i, j in T.Parallel(block_M, block_N):
                g[i, j] = g[i, j] * T.sigmoid(g[i, j]) * u[i, j]
            T.copy(g, Y[by * block_M, bx * block_N])

    return main


def _erf(x):
    """erf(x) for a float32 value (Abramowitz-Stegun 7.1.26)."""
    a = T.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * T.exp(-a * a)
    return T.if_then_else(x < 0, -y, y)


def gelu(M, N, approximate="tanh", dtype="float32", block_M=4, block_N=256):
    """Y = gelu(X). approximate: "tanh" (0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))) or "none"
    (0.5x(1+erf(x/sqrt 2))). Signature: (X [M, N], Y [M, N])."""
    if approximate not in ("tanh", "none"):
        raise ValueError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[by * block_M, bx * block_N], x)
            for i, j in T.Parallel(block_M, block_N):
                v = x[i, j]
                if approximate == "tanh":
                    x[i, j] = 0.5 * v * (1.0 + T.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))
                else:
                    x[i, j] = 0.5 * v * (1.0 + _erf(v * 0.7071067811865476))
            T.copy(x, Y[by * block_M, bx * block_N])

    return main


def rotary(tokens, heads, dim, dtype="float32", block_T=8):
    """Rotary embedding (GPT-NeoX halves): for each token t, head h and i < dim/2,
    Y[t, h, i] = X1 cos - X2 sin, Y[t, h, i + dim/2] = X2 cos + X1 sin with X1 = X[t, h, i],
    X2 = X[t, h, i + dim/2], cos/sin = Cos/Sin[t, i] (float32, precomputed per position).
    Signature: (X [T, heads, dim], Cos [T, dim/2] f32, Sin [T, dim/2] f32, Y [T, heads, dim]).
    tokens (tokens) may be a symbol name."""
    if dim % 2:
        raise ValueError(f"rotary: dim must be even, got {dim}")
    tokens = _dim(tokens)
    half = dim // 2

    @T.prim_func
    def main(X: T.Tensor((tokens, heads, dim), dtype), Cos: T.Tensor((tokens, half), "float32"),
             Sin: T.Tensor((tokens, half), "float32"), Y: T.Tensor((tokens, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(tokens, block_T), heads, threads=128) as (bx, by):
            x = T.alloc_fragment((block_T, dim), "float32")
            y = T.alloc_fragment((block_T, dim), "float32")
            c = T.alloc_fragment((block_T, half), "float32")
            s = T.alloc_fragment((block_T, half), "float32")
            T.copy(X[bx * block_T:(bx + 1) * block_T, by, :], x)
            T.copy(Cos[bx * block_T, 0], c)
            T.copy(Sin[bx * block_T, 0], s)
            for t, i in T.Parallel(block_T, half):
                y[t, i] = x[t, i] * c[t, i] - x[t, i + half] * s[t, i]
                y[t, i + half] = x[t, i + half] * c[t, i] + x[t, i] * s[t, i]
            T.copy(y, Y[bx * block_T:(bx + 1) * block_T, by, :])

    return main


# ---- references and cases ----------------------------------------------------------------

def silu_and_mul_ref(X):
    x = np.asarray(X, np.float64)
    n = x.shape[1] // 2
    g = x[:, :n]
    return g / (1 + np.exp(-g)) * x[:, n:]


def gelu_ref(X, approximate="tanh"):
    x = np.asarray(X, np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def rotary_ref(X, cos, sin):
    x = np.asarray(X, np.float64)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def silu_and_mul_case(kw, rng):
    from kernels._util import Case, empty, rand, size
    M, N, dt = size(kw, "M"), kw["N"], kw.get("dtype", "float32")
    x, x64 = rand(rng, (M, 2 * N), dt, 2.0)
    return Case([x, empty((M, N), dt)], {1: silu_and_mul_ref(x64)}, {1: dt})


def gelu_case(kw, rng):
    from kernels._util import Case, empty, rand, size
    M, N, dt = size(kw, "M"), kw["N"], kw.get("dtype", "float32")
    x, x64 = rand(rng, (M, N), dt, 2.0)
    return Case([x, empty((M, N), dt)], {1: gelu_ref(x64, kw.get("approximate", "tanh"))}, {1: dt},
                {1: (1e-4, 1e-5)} if dt == "float32" else None)


def rotary_case(kw, rng):
    from kernels._util import Case, empty, rand, size
    tokens, H, D, dt = size(kw, "tokens"), kw["heads"], kw["dim"], kw.get("dtype", "float32")
    x, x64 = rand(rng, (tokens, H, D), dt)
    pos = np.arange(tokens)[:, None] + 5
    inv = 10000.0 ** (-np.arange(D // 2) / (D // 2))
    cos = np.cos(pos * inv).astype(np.float32)
    sin = np.sin(pos * inv).astype(np.float32)
    ref = rotary_ref(x64, cos.astype(np.float64), sin.astype(np.float64))
    return Case([x, cos, sin, empty((tokens, H, D), dt)], {3: ref}, {3: dt})


CASES = {"silu_and_mul": silu_and_mul_case, "gelu": gelu_case, "rotary": rotary_case}
