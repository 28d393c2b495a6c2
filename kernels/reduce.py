"""Reductions and routing: row/column sum and max, row argmax, top-k, row cumsum, and MoE
token routing (softmax top-k gating, then expert counts and offsets).

Rows (M, tokens) may be `T.dynamic` symbol names; the reduced row length N is static when a
whole row lives in one tile (argmax, top-k, gating) and may be anything otherwise (row
reductions walk it in chunks of block_N; column reductions walk M in chunks of block_M).
"""
import numpy as np

import tilelang.language as T

from kernels.gemm import _dim

_IDENTITY = {"sum": 0.0, "max": -float("inf")}


def row_reduce(M, N, op="sum", dtype="float32", block_M=8, block_N=128):
    """Out[i] = op(X[i, :]), op in sum | max; accumulated in float32 chunk by chunk.
    Signature: (X [M, N], Out [M] f32)."""
    if op not in _IDENTITY:
        raise ValueError(f"row_reduce: op must be sum or max, got {op!r}")
    M, N = _dim(M), _dim(N)
    ident = _IDENTITY[op]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            acc = T.alloc_fragment((block_M,), "float32")
            T.fill(acc, ident)
            for k in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_N + j < N, x[i, j], ident)
                if op == "sum":
                    T.reduce_sum(x, acc, dim=1, clear=False)
                else:
                    T.reduce_max(x, acc, dim=1, clear=False)
            T.copy(acc, Out[bx * block_M])

    return main


def col_reduce(M, N, op="sum", dtype="float32", block_M=32, block_N=64):
    """Out[j] = op(X[:, j]), op in sum | max. Signature: (X [M, N], Out [N] f32)."""
    if op not in _IDENTITY:
        raise ValueError(f"col_reduce: op must be sum or max, got {op!r}")
    M, N = _dim(M), _dim(N)
    ident = _IDENTITY[op]

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Out: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            part = T.alloc_fragment((block_N,), "float32")
            acc = T.alloc_fragment((block_N,), "float32")
            T.fill(acc, ident)
            for k in T.serial(T.ceildiv(M, block_M)):
                T.copy(X[k * block_M, bx * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = T.if_then_else(k * block_M + i < M, x[i, j], ident)
                if op == "sum":
                    T.reduce_sum(x, part, dim=0)
                else:
                    T.reduce_max(x, part, dim=0)
                for j in T.Parallel(block_N):
                    acc[j] = T.max(acc[j], part[j]) if op == "max" else acc[j] + part[j]
            T.copy(acc, Out[bx * block_N])

    return main


def argmax(M, N, dtype="float32", block_M=8):
    """Index[i] = the first j with X[i, j] == max(X[i, :]); Value[i] = that maximum.
    Signature: (X [M, N], Value [M] (dtype), Index [M] int32)."""
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Value: T.Tensor((M,), dtype), Index: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            mx = T.alloc_fragment((block_M,), dtype)
            idx = T.alloc_fragment((block_M, N), "int32")
            first = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                idx[i, j] = T.if_then_else(x[i, j] == mx[i], j, N)
            T.reduce_min(idx, first, dim=1)
            T.copy(mx, Value[bx * block_M])
            T.copy(first, Index[bx * block_M])

    return main


def topk(M, N, k, dtype="float32", block_M=8):
    """The k largest values of each row, largest first, and their indices (the largest index
    wins ties). Signature: (X [M, N], Values [M, k] (dtype), Indices [M, k] int32)."""
    M = _dim(M)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Values: T.Tensor((M, k), dtype), Indices: T.Tensor((M, k), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), dtype)
            mx = T.alloc_fragment((block_M,), dtype)
            idx = T.alloc_fragment((block_M, N), "int32")
            arg = T.alloc_fragment((block_M,), "int32")
            T.copy(X[bx * block_M, 0], x)
            for t in T.serial(k):
                T.reduce_max(x, mx, dim=1)
                for i, j in T.Parallel(block_M, N):
                    idx[i, j] = T.if_then_else(x[i, j] == mx[i], j, -1)
                T.reduce_max(idx, arg, dim=1)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.if_then_else(arg[i] == j, -T.infinity(dtype), x[i, j])
                for i in T.Parallel(block_M):
                    if bx * block_M + i < M:
                        Values[bx * block_M + i, t] = mx[i]
                        Indices[bx * block_M + i, t] = arg[i]

    return main


def cumsum(M, N, dtype="float32", reverse=False, block_M=8, block_N=128):
    """Inclusive prefix sum along each row (suffix sum when reverse), in column chunks with a
    carried row total, so N may be anything. Signature: (X [M, N], Y [M, N])."""
    M, N = _dim(M), _dim(N)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), dtype)
            y = T.alloc_fragment((block_M, block_N), dtype)
            carry = T.alloc_fragment((block_M,), dtype)
            T.clear(carry)
            nk = T.ceildiv(N, block_N)
            for kk in T.serial(nk):
                k = nk - 1 - kk if reverse else kk
                T.copy(X[bx * block_M, k * block_N], x)  # columns past N read as 0
                T.cumsum(x, y, dim=1, reverse=reverse)
                for i, j in T.Parallel(block_M, block_N):
                    y[i, j] += carry[i]
                for i in T.Parallel(block_M):
                    carry[i] = y[i, 0] if reverse else y[i, block_N - 1]
                T.copy(y, Y[bx * block_M, k * block_N])

    return main


def moe_gating(tokens, experts, k, renormalize=True, dtype="float32", block_M=8):
    """MoE top-k gating: p = softmax(Logits[t, :]); Weights[t, :] = the k largest p (divided by
    their sum when renormalize), Ids[t, :] their experts (largest first; the larger expert index
    wins ties). Signature: (Logits [tokens, experts], Weights [tokens, k] f32, Ids [tokens, k] int32)."""
    tokens = _dim(tokens)
    scale = 1.44269504

    @T.prim_func
    def main(Logits: T.Tensor((tokens, experts), dtype), Weights: T.Tensor((tokens, k), "float32"),
             Ids: T.Tensor((tokens, k), "int32")):
        with T.Kernel(T.ceildiv(tokens, block_M), threads=128) as bx:
            p = T.alloc_fragment((block_M, experts), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            idx = T.alloc_fragment((block_M, experts), "int32")
            arg = T.alloc_fragment((block_M,), "int32")
            w = T.alloc_fragment((block_M, k), "float32")
            ids = T.alloc_fragment((block_M, k), "int32")
            wsum = T.alloc_fragment((block_M,), "float32")
            T.copy(Logits[bx * block_M, 0], p)
            T.reduce_max(p, mx, dim=1)
            for i, j in T.Parallel(block_M, experts):
                p[i, j] = T.exp2((p[i, j] - mx[i]) * scale)
            T.reduce_sum(p, s, dim=1)
            for i, j in T.Parallel(block_M, experts):
                p[i, j] = p[i, j] / s[i]
            for t in T.serial(k):
                T.reduce_max(p, mx, dim=1)
                for i, j in T.Parallel(block_M, experts):
                    idx[i, j] = T.if_then_else(p[i, j] == mx[i], j, -1)
                T.reduce_max(idx, arg, dim=1)
                for i, j in T.Parallel(block_M, experts):
                    p[i, j] = T.if_then_else(arg[i] == j, -1.0, p[i, j])
                for i in T.Parallel(block_M):
                    w[i, t] = mx[i]
                    ids[i, t] = arg[i]
            if renormalize:
                T.reduce_sum(w, wsum, dim=1)
                for i, j in T.Parallel(block_M, k):
                    w[i, j] = w[i, j] / wsum[i]
            T.copy(w, Weights[bx * block_M, 0])
            T.copy(ids, Ids[bx * block_M, 0])

    return main


def moe_expert_offsets(tokens, k, experts, block_M=32):
    """Routing histogram: Counts[e] = how many (token, slot) pairs of Ids chose expert e;
    Offsets[0] = 0, Offsets[e + 1] = Counts[0] + ... + Counts[e] (where each expert's rows start
    in an expert-sorted layout). One block walks all tokens (deterministic; no atomics).
    Signature: (Ids [tokens, k] int32, Counts [experts] int32, Offsets [experts + 1] int32)."""
    tokens = _dim(tokens)

    @T.prim_func
    def main(Ids: T.Tensor((tokens, k), "int32"), Counts: T.Tensor((experts,), "int32"),
             Offsets: T.Tensor((experts + 1,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            ids = T.alloc_fragment((block_M, k), "int32")
            hot = T.alloc_fragment((block_M, experts), "int32")
            part = T.alloc_fragment((experts,), "int32")
            acc = T.alloc_fragment((experts,), "int32")
            incl = T.alloc_fragment((experts,), "int32")
            T.clear(acc)
            for c in T.serial(T.ceildiv(tokens, block_M)):
                T.copy(Ids[c * block_M, 0], ids)
                for i, e in T.Parallel(block_M, experts):
                    hot[i, e] = 0
                    for j in T.serial(k):
                        hot[i, e] += T.if_then_else(c * block_M + i < tokens and ids[i, j] == e, 1, 0)
                T.reduce_sum(hot, part, dim=0)
                for e in T.Parallel(experts):
                    acc[e] += part[e]
            T.cumsum(acc, incl, dim=0)
            T.copy(acc, Counts[0])
            Offsets[0] = 0
            for e in T.Parallel(experts):
                Offsets[e + 1] = incl[e]

    return main


# ---- references and cases ----------------------------------------------------------------

def topk_ref(x, k):
    """(values, indices), largest first; among equal values the larger index first."""
    order = np.lexsort((-np.arange(x.shape[1])[None, :].repeat(x.shape[0], 0), -x), axis=1)[:, :k]
    return np.take_along_axis(x, order, 1), order


def moe_gating_ref(logits, k, renormalize=True):
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    w, ids = topk_ref(p, k)
    if renormalize:
        w = w / w.sum(1, keepdims=True)
    return w, ids


def moe_expert_offsets_ref(ids, experts):
    counts = np.bincount(ids.reshape(-1), minlength=experts)
    return counts, np.concatenate([[0], np.cumsum(counts)])


def _rows(kw):
    from kernels._util import size
    return size(kw, "M"), size(kw, "N"), kw.get("dtype", "float32")


def row_reduce_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _rows(kw)
    x, x64 = rand(rng, (M, N), dt)
    ref = x64.sum(1) if kw.get("op", "sum") == "sum" else x64.max(1)
    return Case([x, empty((M,), "float32")], {1: ref}, {1: "float32"}, {1: (1e-4, 1e-4)})


def col_reduce_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _rows(kw)
    x, x64 = rand(rng, (M, N), dt)
    ref = x64.sum(0) if kw.get("op", "sum") == "sum" else x64.max(0)
    return Case([x, empty((N,), "float32")], {1: ref}, {1: "float32"}, {1: (1e-4, 1e-4)})


def argmax_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _rows(kw)
    x, x64 = rand(rng, (M, N), dt)
    x[:, 3] = x[:, 7] = x.max(1) + 1  # a tie: the first index wins
    x64 = x.astype(np.float64)
    return Case([x, empty((M,), dt), empty((M,), "int32")], {1: x64.max(1), 2: np.argmax(x64, 1)},
                {1: dt, 2: "int32"})


def topk_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _rows(kw)
    k = kw["k"]
    x, x64 = rand(rng, (M, N), dt)
    v, i = topk_ref(x64, k)
    return Case([x, empty((M, k), dt), empty((M, k), "int32")], {1: v, 2: i}, {1: dt, 2: "int32"})


def cumsum_case(kw, rng):
    from kernels._util import Case, empty, rand
    M, N, dt = _rows(kw)
    x, x64 = rand(rng, (M, N), dt)
    ref = np.cumsum(x64[:, ::-1], 1)[:, ::-1] if kw.get("reverse") else np.cumsum(x64, 1)
    return Case([x, empty((M, N), dt)], {1: ref}, {1: dt}, {1: (1e-4, 1e-4)} if dt == "float32" else None)


def moe_gating_case(kw, rng):
    from kernels._util import Case, empty, rand, size
    Tn, E, k, dt = size(kw, "tokens"), kw["experts"], kw["k"], kw.get("dtype", "float32")
    x, x64 = rand(rng, (Tn, E), dt, 2.0)
    w, ids = moe_gating_ref(x64, k, kw.get("renormalize", True))
    return Case([x, empty((Tn, k), "float32"), empty((Tn, k), "int32")], {1: w, 2: ids},
                {1: "float32", 2: "int32"}, {1: (1e-5, 1e-6)})


def moe_expert_offsets_case(kw, rng):
    from kernels._util import Case, empty, size
    Tn, k, E = size(kw, "tokens"), kw["k"], kw["experts"]
    ids = np.stack([rng.choice(E, size=k, replace=False) for _ in range(Tn)]).astype(np.int32)
    counts, offsets = moe_expert_offsets_ref(ids, E)
    return Case([ids, empty((E,), "int32"), empty((E + 1,), "int32")], {1: counts, 2: offsets},
                {1: "int32", 2: "int32"})


CASES = {"row_reduce": row_reduce_case, "col_reduce": col_reduce_case, "argmax": argmax_case, "topk": topk_case,
         "cumsum": cumsum_case, "moe_gating": moe_gating_case, "moe_expert_offsets": moe_expert_offsets_case}
