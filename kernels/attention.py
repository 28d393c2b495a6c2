"""Attention: FlashAttention forward (MHA / GQA / MQA, causal or not), decode with split-KV
(contiguous and paged KV cache) plus the log-sum-exp combine, and the backward pass (dQ, dK, dV).

Layouts: Q, O [batch, heads, seq_q, dim]; K, V [batch, kv_heads, seq_kv, dim] (BHSD).
heads must be a multiple of kv_heads (GQA; MQA is kv_heads=1). Causal masking aligns the last
query with the last key: query i sees keys j <= i + (seq_kv - seq_q). The softmax scale is
1/sqrt(dim). LSE outputs are base 2 over scores already multiplied by log2(e)/sqrt(dim)
(lse2 = log2(sum_j exp2(s_ij * scale))), the form the backward and the combine consume.
Sequence lengths may be `T.dynamic` symbol names. Functions hold one launch each; multi-pass
algorithms (split-KV decode, backward) are several kernels run in order.
"""
import numpy as np

import tilelang.language as T

LOG2E = 1.44269504
NEG = -1e30  # "minus infinity" that keeps exp2(NEG - NEG) finite for fully masked rows


def _dims(*names):
    """Each a size or a symbol name; equal names give one symbol."""
    syms = {}
    out = []
    for n in names:
        if isinstance(n, str):
            syms.setdefault(n, T.dynamic(n))
            out.append(syms[n])
        else:
            out.append(n)
    return out


def flash_attention(batch, heads, kv_heads, seq_q, seq_kv, dim, is_causal=False, with_lse=False, block_M=64,
                    block_N=64, num_stages=1, threads=128, dtype="float16", overlap=False, pingpong=False,
                    own_o_tile=False, uniform_overlap_steps=None):
    """FlashAttention forward. Signature: (Q, K, V, O[, LSE]); LSE [batch, heads, seq_q] float32
    (base 2, see the module doc) when with_lse. batch/seq_q/seq_kv: ints or symbol names.

    The k-loop is one T.Pipelined loop that copies only the K and V tiles and otherwise computes on
    register fragments (the shape the sm_90a warp specialization takes apart into a TMA producer and
    wgmma consumers). Scores stay unscaled until the exponent: m is the raw row maximum and
    p = exp2(s * scale - m * scale) is one FMA and one exp2 per score, masked or not (a masked score is
    -inf and m starts finite, so fully masked rows get p = 0 without a select). The per-score mask
    runs only in KV blocks that need it: a block-uniform
    test on k picks blocks crossing the causal diagonal or the end of seq_kv; no block needs it
    without causality when seq_kv is a static multiple of block_N. Causal grids run the query blocks
    with the most KV blocks first (bx = 0 is the last query block) so the long blocks do not trail
    the wave. O leaves through Q_s's shared memory (dead after the loop) in 16-byte row stores.

    overlap=True is FlashAttention-3's intra-warpgroup overlap (on sm_90a; elsewhere the gemms are
    synchronous and the same numbers come out): the loop runs n_blocks + 1 steps, step k copying
    K_k and V_{k-1} (K_{n-1} and V_0 where those are past the ends; the last step issues only
    P_{n-1} V_{n-1}; with uniform_overlap_steps -- by default where pingpong is on -- every step issues S
    and the last one's is dropped, see _overlapped_k_loop); step k < n issues S_k = Q K_k^T and then
    O += P_{k-1} V_{k-1}, both left in flight (T.gemm(..., wg_wait=-1)), waits for S_k alone (T.wait_wgmma(1): groups retire in order), runs
    S_k's softmax while P V may still run on the tensor cores, waits for P V (T.wait_wgmma(0)),
    rescales O and casts P_k for the next step. Every group is retired within its step, so the
    warp-specialized form still releases each stage at the step's end.

    pingpong=True (T.warpgroup_pingpong(); sm_90a with threads=256 and block_M=128, i.e. two consumer
    warpgroups of 64 query rows): the warpgroups take turns issuing their k-step's first gemms --
    S = Q K^T in the plain loop, S_k and P_{k-1} V_{k-1} in the overlap loop -- on two named
    barriers, so one warpgroup's softmax runs while the other's gemms hold the tensor cores
    (FlashAttention-3's warp scheduler barriers; compiler/lowering/gpu/src/pingpong.cc). The numbers
    are those without it.

    own_o_tile=True stages O through a shared tile of its own instead of Q_s, where the shared memory
    allows it (Q, O and the K/V stages within 220 KiB: 128x128 D128 bf16 at 2 stages is 192 KiB; at 3 it
    does not fit and O stays in Q_s). For the persistent sm_90a kernel (pass_configs tl.persistent): its
    producer warpgroup then loads the next tile's Q into Q_s while the consumers still store this tile's
    O (warp_specialize.cc); without persistence it only costs shared memory. The numbers are the same."""
    if heads % kv_heads:
        raise ValueError(f"flash_attention: heads={heads} is not a multiple of kv_heads={kv_heads}")
    accum = "float32"
    scale = (1.0 / dim) ** 0.5 * LOG2E
    groups = heads // kv_heads
    static_kv_tail = not (isinstance(seq_kv, int) and seq_kv % block_N == 0)
    esize = 4 if dtype == "float32" else 2
    own_o_tile = own_o_tile and (2 * block_M + 2 * num_stages * block_N) * dim * esize + block_M * 16 <= 220 * 1024
    batch, seq_q, seq_kv = _dims(batch, seq_q, seq_kv)
    q_shape, kv_shape = (batch, heads, seq_q, dim), (batch, kv_heads, seq_kv, dim)

    @T.macro
    def body(Q, K, V, O, LSE, bx, by, bz):
        past_len = seq_kv - seq_q
        # Causal: longest query block first (it has the most KV blocks).
        bq = T.ceildiv(seq_q, block_M) - 1 - bx if is_causal else bx
        Q_s = T.alloc_shared((block_M, dim), dtype)
        K_s = T.alloc_shared((block_N, dim), dtype)
        V_s = T.alloc_shared((block_N, dim), dtype)
        acc_s = T.alloc_fragment((block_M, block_N), accum)
        acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
        acc_o = T.alloc_fragment((block_M, dim), accum)
        m = T.alloc_fragment((block_M,), accum)
        m_prev = T.alloc_fragment((block_M,), accum)
        r = T.alloc_fragment((block_M,), accum)
        m_s = T.alloc_fragment((block_M,), accum)
        row_sum = T.alloc_fragment((block_M,), accum)
        l = T.alloc_fragment((block_M,), accum)
        if pingpong:
            T.warpgroup_pingpong()
        T.copy(Q[bz, by, bq * block_M, 0], Q_s)
        T.fill(acc_o, 0)
        T.fill(l, 0)
        T.fill(m, NEG)
        if is_causal:
            n_blocks = T.max(0, T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bq + 1) * block_M + past_len, block_N)))
        else:
            n_blocks = T.ceildiv(seq_kv, block_N)
        if overlap:
            _overlapped_k_loop(K, V, Q_s, K_s, V_s, acc_s, acc_s_cast, acc_o, m, m_prev, r, m_s, row_sum, l,
                               n_blocks, bq, bz, by // groups, past_len, seq_kv, scale, is_causal, static_kv_tail,
                               block_M, block_N, dim, num_stages,
                               pingpong if uniform_overlap_steps is None else uniform_overlap_steps)
        else:
            for k in T.Pipelined(n_blocks, num_stages=num_stages):
                T.copy(K[bz, by // groups, k * block_N, 0], K_s)
                T.copy(V[bz, by // groups, k * block_N, 0], V_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                _masked_softmax_step(acc_s, m, m_prev, r, m_s, row_sum, l, k, bq, past_len, seq_kv, scale, is_causal,
                                     static_kv_tail, block_M, block_N)
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= r[i]
                T.gemm(acc_s_cast, V_s, acc_o)
        for i in T.Parallel(block_M):
            r[i] = T.if_then_else(l[i] > 0, 1.0 / l[i], 0.0)
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= r[i]
        if own_o_tile:
            # Straight to O: on sm_90a the lowering stages a wgmma accumulator's store through a shared tile
            # of its own (rows padded: conflict-free stmatrix), in a dead K/V stage's memory, which the
            # persistent warp specialization moves out of the stages (the producer refills them meanwhile).
            T.copy(acc_o, O[bz, by, bq * block_M, 0])
        else:
            # Q_s is dead after the loop: stage O there so its global stores are whole 16-byte rows.
            T.copy(acc_o, Q_s)
            T.copy(Q_s, O[bz, by, bq * block_M, 0])
        if with_lse:
            for i in T.Parallel(block_M):
                if bq * block_M + i < seq_q:
                    LSE[bz, by, bq * block_M + i] = T.log2(l[i]) + m[i] * scale

    if with_lse:
        @T.prim_func
        def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
                 O: T.Tensor(q_shape, dtype), LSE: T.Tensor((batch, heads, seq_q), accum)):
            with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
                body(Q, K, V, O, LSE, bx, by, bz)
        return main

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             O: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            body(Q, K, V, O, None, bx, by, bz)

    return main


@T.macro
def _masked_softmax_step(acc_s, m, m_prev, r, m_s, row_sum, l, k, bq, past_len, seq_kv, scale, is_causal,
                         static_kv_tail, block_M, block_N):
    """flash_attention's per-KV-block softmax statistics, shared by its plain and overlapped k-loops: the
    causal / seq_kv mask where the block needs it, the new row maximum m (m_prev keeps the old one),
    the rescale factor r = exp2((m_prev - m) * scale), p = exp2(s * scale - m * scale) in acc_s and
    l = l * r + rowsum(p).

    Masked scores are -inf while m starts at the finite NEG: a row with every key masked so far keeps
    m = NEG, so its p = exp2(-inf - NEG * scale) = 0 and r = exp2(0) = 1 come out of the plain formulas.
    (With NEG as the masked score such a row got exp2(0) = 1 and every p needed a select on s > NEG,
    which nvcc turned into a branch around each of the block's exp2 -- 64 per thread at 128 x 128.)"""
    T.copy(m, m_prev)
    if is_causal or static_kv_tail:
        # Block-uniform: some key of this block is past the first query row's diagonal or
        # past seq_kv. (For causal the diagonal test implies the seq_kv one for every row below
        # seq_q; rows past seq_q are computed but not stored.)
        if is_causal:
            masked = (k + 1) * block_N > bq * block_M + past_len + 1
        else:
            masked = (k + 1) * block_N > seq_kv
        if masked:
            for i, j in T.Parallel(block_M, block_N):
                # Causal: the diagonal test alone, as in the block test above: query row i < seq_q sees
                # keys j <= i + past_len < seq_kv (keys past seq_kv reach only rows that are not stored).
                if is_causal:
                    valid = bq * block_M + i + past_len >= k * block_N + j
                else:
                    valid = k * block_N + j < seq_kv
                acc_s[i, j] = T.if_then_else(valid, acc_s[i, j], -T.infinity("float32"))
    T.reduce_max(acc_s, m, dim=1, clear=False)
    for i in T.Parallel(block_M):
        r[i] = T.exp2((m_prev[i] - m[i]) * scale)
        m_s[i] = m[i] * scale
    for i, j in T.Parallel(block_M, block_N):
        acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m_s[i])
    T.reduce_sum(acc_s, row_sum, dim=1)
    for i in T.Parallel(block_M):
        l[i] = l[i] * r[i] + row_sum[i]


@T.macro
def _overlapped_k_loop(K, V, Q_s, K_s, V_s, acc_s, acc_s_cast, acc_o, m, m_prev, r, m_s, row_sum, l, n_blocks, bq,
                       bz, kv, past_len, seq_kv, scale, is_causal, static_kv_tail, block_M, block_N, dim,
                       num_stages, uniform_steps):
    """flash_attention(overlap=True)'s k-loop (see its doc): step k issues S_k and P_{k-1} V_{k-1}.

    uniform_steps (flash_attention's uniform_overlap_steps; by default the pingpong kernels): every
    step issues S, the last one's (on K_{n-1} again) is dropped -- one step body, no branch around the
    gemms. Measured on the H200 (2026-12-05, one call,
    both forms of 8 rows): with the warpgroup pingpong the branched form below was slower on 6 rows
    (up to 7 %, causal), without it faster on most (up to 19 % persistent D64) -- so each keeps its own."""
    for k in T.Pipelined(n_blocks + 1, num_stages=num_stages):
        T.copy(K[bz, kv, T.min(k, n_blocks - 1) * block_N, 0], K_s)
        T.copy(V[bz, kv, T.max(k - 1, 0) * block_N, 0], V_s)
        if uniform_steps:
            # S issued at every step, P V's issue and its wait in one branch: the step body is the same
            # for every k, so the pingpong's turn handover sits in one place (not in both step kinds).
            _issue_s_and_pv(Q_s, K_s, V_s, acc_s, acc_s_cast, acc_o, k)
            if k < n_blocks:
                _masked_softmax_step(acc_s, m, m_prev, r, m_s, row_sum, l, k, bq, past_len, seq_kv, scale,
                                     is_causal, static_kv_tail, block_M, block_N)
            T.wait_wgmma(0)  # P_{k-1} V_{k-1} retired: O and P may be touched again
            if k < n_blocks:
                _rescale_o_cast_p(acc_o, r, acc_s, acc_s_cast, block_M, dim)
        else:
            # One branch per step kind, each issuing and retiring its own groups: an accumulator whose
            # wgmma is issued under a condition and merged with its old value after the branch makes
            # ptxas serialize every wgmma (C7515), so the last step (P_{n-1} V_{n-1} alone) does not
            # issue S on K_{n-1} again, as it did when S was issued at every step (a wasted half k-step
            # per query block: 3 % of a causal S4096 tile's tensor work).
            if k < n_blocks:
                _issue_s_and_pv(Q_s, K_s, V_s, acc_s, acc_s_cast, acc_o, k)
                _masked_softmax_step(acc_s, m, m_prev, r, m_s, row_sum, l, k, bq, past_len, seq_kv, scale, is_causal,
                                     static_kv_tail, block_M, block_N)
                T.wait_wgmma(0)  # P_{k-1} V_{k-1} retired: O and P may be touched again
                _rescale_o_cast_p(acc_o, r, acc_s, acc_s_cast, block_M, dim)
            else:
                if k > 0:  # (n_blocks = 0: nothing to multiply)
                    T.gemm(acc_s_cast, V_s, acc_o, wg_wait=-1)
                    T.wait_wgmma(0)


@T.macro
def _issue_s_and_pv(Q_s, K_s, V_s, acc_s, acc_s_cast, acc_o, k):
    """The overlap step's issue: S_k = Q K_k^T, then (k > 0) O += P_{k-1} V_{k-1}, both left in flight;
    returns once S_k alone is retired (groups retire in order)."""
    T.clear(acc_s)
    T.gemm(Q_s, K_s, acc_s, transpose_B=True, wg_wait=-1)
    if k > 0:
        T.gemm(acc_s_cast, V_s, acc_o, wg_wait=-1)
        T.wait_wgmma(1)  # S_k retired; P_{k-1} V_{k-1}, issued after it, may still run
    else:
        T.wait_wgmma(0)  # S_0 alone is in flight


@T.macro
def _rescale_o_cast_p(acc_o, r, acc_s, acc_s_cast, block_M, dim):
    """After P_{k-1} V_{k-1} retired: O rescaled by the step's row factors, P_k cast for the next step's P V.
    (Not between S_k's issue and P V's, FA3's order above D 128: there ptxas injects a wait for S before
    P V's issue -- C7517, "warpgroup.wait is injected ... registers defined by GMMA" -- serializing the
    two gemms.)"""
    for i, j in T.Parallel(block_M, dim):
        acc_o[i, j] *= r[i]
    T.copy(acc_s, acc_s_cast)


@T.macro
def _online_softmax_block(acc_s, acc_s_cast, acc_o, m, m_prev, r, row_sum, l, rows, block_N, dim):
    """One KV block of the online softmax; acc_s holds scaled scores (NEG where masked)."""
    T.copy(m, m_prev)
    T.reduce_max(acc_s, m, dim=1, clear=False)
    for i in T.Parallel(rows):
        r[i] = T.exp2(m_prev[i] - m[i])
    for i, j in T.Parallel(rows, block_N):
        acc_s[i, j] = T.if_then_else(acc_s[i, j] > NEG, T.exp2(acc_s[i, j] - m[i]), 0.0)
    T.reduce_sum(acc_s, row_sum, dim=1)
    for i in T.Parallel(rows):
        l[i] = l[i] * r[i] + row_sum[i]
    T.copy(acc_s, acc_s_cast)
    for i, j in T.Parallel(rows, dim):
        acc_o[i, j] *= r[i]


def decode_split(batch, heads, kv_heads, seqlen_kv, dim, num_split=4, block_N=64, dtype="float16"):
    """Decode (one query token per sequence), pass 1 of 2: each (batch, kv head, split) block runs
    the online softmax over its slice of the KV sequence for the heads/kv_heads query heads that share
    that KV head. Signature: (Q [batch, heads, dim], K, V [batch, kv_heads, seqlen_kv, dim],
    LSE_part [batch, heads, num_split] f32, O_part [batch, heads, num_split, dim] f32).
    A split with no keys writes LSE -inf and zeros."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    groups = heads // kv_heads
    accum = "float32"
    batch, seqlen_kv = _dims(batch, seqlen_kv)
    per_split = T.ceildiv(seqlen_kv, num_split)
    kv_shape = (batch, kv_heads, seqlen_kv, dim)

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             LSE_part: T.Tensor((batch, heads, num_split), accum),
             O_part: T.Tensor((batch, heads, num_split, dim), accum)):
        with T.Kernel(batch, kv_heads, num_split, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((groups, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((groups, block_N), accum)
            acc_s_cast = T.alloc_fragment((groups, block_N), dtype)
            acc_o = T.alloc_fragment((groups, dim), accum)
            m = T.alloc_fragment((groups,), accum)
            m_prev = T.alloc_fragment((groups,), accum)
            r = T.alloc_fragment((groups,), accum)
            row_sum = T.alloc_fragment((groups,), accum)
            l = T.alloc_fragment((groups,), accum)
            T.copy(Q[bx, by * groups, 0], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, NEG)
            for k in T.Pipelined(T.ceildiv(per_split, block_N), num_stages=1):
                start = bz * per_split + k * block_N
                T.copy(K[bx, by, start, 0], K_s)
                T.copy(V[bx, by, start, 0], V_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                for i, j in T.Parallel(groups, block_N):
                    valid = k * block_N + j < per_split and start + j < seqlen_kv
                    acc_s[i, j] = T.if_then_else(valid, acc_s[i, j] * scale, NEG)
                _online_softmax_block(acc_s, acc_s_cast, acc_o, m, m_prev, r, row_sum, l, groups, block_N, dim)
                T.gemm(acc_s_cast, V_s, acc_o)
            for i, j in T.Parallel(groups, dim):
                acc_o[i, j] = T.if_then_else(l[i] > 0, acc_o[i, j] / l[i], 0.0)
            for i in T.Parallel(groups):
                l[i] = T.if_then_else(l[i] > 0, T.log2(l[i]) + m[i], -T.infinity(accum))
            T.copy(l, LSE_part[bx, by * groups:(by + 1) * groups, bz])
            T.copy(acc_o, O_part[bx, by * groups:(by + 1) * groups, bz, :])

    return main


def paged_decode_split(batch, heads, kv_heads, num_pages, page_size, max_pages, dim, num_split=4,
                       dtype="float16"):
    """Decode over a paged KV cache, pass 1 of 2 (pass 2 is decode_combine).
    Signature: (Q [batch, heads, dim], K_cache, V_cache [num_pages, page_size, kv_heads, dim],
    block_table [batch, max_pages] int32 (page of each sequence's i-th page), seq_lens [batch] int32,
    LSE_part [batch, heads, num_split] f32, O_part [batch, heads, num_split, dim] f32).
    Split s covers pages [s*P, (s+1)*P), P = ceil(max_pages / num_split); one page per step."""
    scale = (1.0 / dim) ** 0.5 * LOG2E
    groups = heads // kv_heads
    accum = "float32"
    block_N = page_size
    pages_per_split = -(-max_pages // num_split)
    batch, num_pages = _dims(batch, num_pages)
    cache_shape = (num_pages, page_size, kv_heads, dim)

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), dtype), K_cache: T.Tensor(cache_shape, dtype),
             V_cache: T.Tensor(cache_shape, dtype), block_table: T.Tensor((batch, max_pages), "int32"),
             seq_lens: T.Tensor((batch,), "int32"), LSE_part: T.Tensor((batch, heads, num_split), accum),
             O_part: T.Tensor((batch, heads, num_split, dim), accum)):
        with T.Kernel(batch, kv_heads, num_split, threads=128) as (bx, by, bz):
            Q_s = T.alloc_shared((groups, dim), dtype)
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((groups, block_N), accum)
            acc_s_cast = T.alloc_fragment((groups, block_N), dtype)
            acc_o = T.alloc_fragment((groups, dim), accum)
            m = T.alloc_fragment((groups,), accum)
            m_prev = T.alloc_fragment((groups,), accum)
            r = T.alloc_fragment((groups,), accum)
            row_sum = T.alloc_fragment((groups,), accum)
            l = T.alloc_fragment((groups,), accum)
            T.copy(Q[bx, by * groups, 0], Q_s)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, NEG)
            seq_len = seq_lens[bx]
            for p in T.serial(pages_per_split):
                page_idx = bz * pages_per_split + p
                if page_idx < max_pages and page_idx * page_size < seq_len:
                    page = block_table[bx, page_idx]
                    T.copy(K_cache[page, 0:page_size, by, :], K_s)
                    T.copy(V_cache[page, 0:page_size, by, :], V_s)
                    T.clear(acc_s)
                    T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                    for i, j in T.Parallel(groups, block_N):
                        acc_s[i, j] = T.if_then_else(page_idx * page_size + j < seq_len, acc_s[i, j] * scale, NEG)
                    _online_softmax_block(acc_s, acc_s_cast, acc_o, m, m_prev, r, row_sum, l, groups, block_N, dim)
                    T.gemm(acc_s_cast, V_s, acc_o)
            for i, j in T.Parallel(groups, dim):
                acc_o[i, j] = T.if_then_else(l[i] > 0, acc_o[i, j] / l[i], 0.0)
            for i in T.Parallel(groups):
                l[i] = T.if_then_else(l[i] > 0, T.log2(l[i]) + m[i], -T.infinity(accum))
            T.copy(l, LSE_part[bx, by * groups:(by + 1) * groups, bz])
            T.copy(acc_o, O_part[bx, by * groups:(by + 1) * groups, bz, :])

    return main


def decode_combine(batch, heads, num_split, dim, dtype="float16"):
    """Decode pass 2: O[b, h] = sum_s O_part[b, h, s] * 2^(LSE_part[b, h, s] - LSE[b, h]).
    Signature: (LSE_part [batch, heads, num_split] f32, O_part [batch, heads, num_split, dim] f32,
    O [batch, heads, dim])."""
    accum = "float32"
    (batch,) = _dims(batch)

    @T.prim_func
    def main(LSE_part: T.Tensor((batch, heads, num_split), accum),
             O_part: T.Tensor((batch, heads, num_split, dim), accum), O: T.Tensor((batch, heads, dim), dtype)):
        with T.Kernel(heads, batch, threads=128) as (hid, bid):
            po = T.alloc_fragment((dim,), accum)
            acc = T.alloc_fragment((dim,), accum)
            lse = T.alloc_fragment((num_split,), accum)
            lse_max = T.alloc_fragment((1,), accum)
            total = T.alloc_var(accum)
            w = T.alloc_var(accum)
            T.clear(acc)
            T.copy(LSE_part[bid, hid, 0], lse)
            T.reduce_max(lse, lse_max, dim=0)
            total = 0
            for s in T.serial(num_split):
                total += T.exp2(lse[s] - lse_max[0])
            total = T.log2(total) + lse_max[0]
            for s in T.serial(num_split):
                T.copy(O_part[bid, hid, s, 0], po)
                w = T.exp2(lse[s] - total)
                for i in T.Parallel(dim):
                    acc[i] += po[i] * w
            T.copy(acc, O[bid, hid, 0])

    return main


def attention_bwd_preprocess(batch, heads, seq_q, dim, block_M=64, dtype="float16"):
    """Backward pass 1: Delta[b, h, i] = sum_d O[b, h, i, d] * dO[b, h, i, d] (float32).
    Signature: (O, dO [batch, heads, seq_q, dim], Delta [batch, heads, seq_q] f32)."""
    accum = "float32"
    batch, seq_q = _dims(batch, seq_q)
    shape = (batch, heads, seq_q, dim)

    @T.prim_func
    def main(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype), Delta: T.Tensor((batch, heads, seq_q), accum)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=128) as (bx, by, bz):
            o = T.alloc_fragment((block_M, dim), accum)
            dout = T.alloc_fragment((block_M, dim), accum)  # not "do": a C++ keyword in the CUDA source
            d = T.alloc_fragment((block_M,), accum)
            T.copy(O[bz, by, bx * block_M, 0], o)
            T.copy(dO[bz, by, bx * block_M, 0], dout)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] = o[i, j] * dout[i, j]
            T.reduce_sum(o, d, dim=1)
            T.copy(d, Delta[bz, by, bx * block_M])

    return main


def attention_bwd(batch, heads, kv_heads, seq, dim, is_causal=False, block_M=32, block_N=32, dtype="float16"):
    """Backward pass 2 (self-attention, seq_q == seq_kv): one block per (KV block, query head, batch)
    walks the query blocks and accumulates dQ, dK, dV in float32 with atomic adds (so GQA heads
    sharing a KV head meet in dK/dV). The caller zeroes dQ, dK, dV and passes the forward's
    LSE (with_lse) and the preprocess' Delta.
    Signature: (Q, K, V, dO, LSE, Delta, dQ [batch, heads, seq, dim] f32,
    dK, dV [batch, kv_heads, seq, dim] f32)."""
    accum = "float32"
    scale = (1.0 / dim) ** 0.5 * LOG2E
    sm_scale = (1.0 / dim) ** 0.5
    groups = heads // kv_heads
    batch, seq = _dims(batch, seq)
    q_shape, kv_shape = (batch, heads, seq, dim), (batch, kv_heads, seq, dim)

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             dO: T.Tensor(q_shape, dtype), LSE: T.Tensor((batch, heads, seq), accum),
             Delta: T.Tensor((batch, heads, seq), accum), dQ: T.Tensor(q_shape, accum),
             dK: T.Tensor(kv_shape, accum), dV: T.Tensor(kv_shape, accum)):
        with T.Kernel(T.ceildiv(seq, block_N), heads, batch, threads=128) as (bx, by, bz):
            K_s = T.alloc_shared((block_N, dim), dtype)
            V_s = T.alloc_shared((block_N, dim), dtype)
            Q_s = T.alloc_shared((block_M, dim), dtype)
            dO_s = T.alloc_shared((block_M, dim), dtype)
            lse = T.alloc_fragment((block_M,), accum)
            delta = T.alloc_fragment((block_M,), accum)
            qkT = T.alloc_fragment((block_N, block_M), accum)
            dsT = T.alloc_fragment((block_N, block_M), accum)
            P_cast = T.alloc_shared((block_N, block_M), dtype)
            dS_cast = T.alloc_shared((block_N, block_M), dtype)
            dv = T.alloc_fragment((block_N, dim), accum)
            dk = T.alloc_fragment((block_N, dim), accum)
            dq = T.alloc_fragment((block_M, dim), accum)
            T.copy(K[bz, by // groups, bx * block_N, 0], K_s)
            T.copy(V[bz, by // groups, bx * block_N, 0], V_s)
            T.clear(dv)
            T.clear(dk)
            first = (bx * block_N) // block_M if is_causal else 0
            for kq in T.serial(first, T.ceildiv(seq, block_M)):
                T.copy(Q[bz, by, kq * block_M, 0], Q_s)
                T.copy(dO[bz, by, kq * block_M, 0], dO_s)
                T.copy(LSE[bz, by, kq * block_M], lse)
                T.copy(Delta[bz, by, kq * block_M], delta)
                T.clear(qkT)
                T.gemm(K_s, Q_s, qkT, transpose_B=True)
                for i, j in T.Parallel(block_N, block_M):
                    kv_i = bx * block_N + i
                    q_j = kq * block_M + j
                    if is_causal:
                        valid = q_j >= kv_i and q_j < seq and kv_i < seq
                    else:
                        valid = q_j < seq and kv_i < seq
                    qkT[i, j] = T.if_then_else(valid, T.exp2(qkT[i, j] * scale - lse[j]), 0.0)
                T.copy(qkT, P_cast)
                T.gemm(P_cast, dO_s, dv)
                T.clear(dsT)
                T.gemm(V_s, dO_s, dsT, transpose_B=True)
                for i, j in T.Parallel(block_N, block_M):
                    dsT[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * sm_scale
                T.copy(dsT, dS_cast)
                T.gemm(dS_cast, Q_s, dk)
                T.clear(dq)
                T.gemm(dS_cast, K_s, dq, transpose_A=True)
                T.atomic_add(dQ[bz, by, kq * block_M, 0], dq)
            T.atomic_add(dV[bz, by // groups, bx * block_N, 0], dv)
            T.atomic_add(dK[bz, by // groups, bx * block_N, 0], dk)

    return main


# ---- numpy references (float64) and test cases ------------------------------------------

def attention_ref(q, k, v, is_causal):
    """q [B, H, Sq, D], k/v [B, Hkv, Skv, D] -> (O, lse2) with lse2 as the kernels store it."""
    B, H, Sq, D = q.shape
    Hkv, Skv = k.shape[1], k.shape[2]
    k = np.repeat(k, H // Hkv, axis=1)
    v = np.repeat(v, H // Hkv, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(D)
    if is_causal:
        mask = np.arange(Skv)[None, :] <= np.arange(Sq)[:, None] + (Skv - Sq)
        s = np.where(mask, s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    p = np.exp(s - mx)
    den = p.sum(axis=-1, keepdims=True)
    lse2 = (np.log(den) + mx)[..., 0] * LOG2E
    return np.einsum("bhqk,bhkd->bhqd", p / den, v), lse2


def attention_bwd_ref(q, k, v, do, is_causal):
    """(dQ, dK, dV) in float64 for attention_ref's O."""
    B, H, S, D = q.shape
    Hkv = k.shape[1]
    g = H // Hkv
    kk = np.repeat(k, g, axis=1)
    vv = np.repeat(v, g, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) / np.sqrt(D)
    if is_causal:
        s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dv = np.einsum("bhqk,bhqd->bhkd", p, do)
    dp = np.einsum("bhqd,bhkd->bhqk", do, vv)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(D)
    dq = np.einsum("bhqk,bhkd->bhqd", ds, kk)
    dk = np.einsum("bhqk,bhqd->bhkd", ds, q)
    return dq, dk.reshape(B, Hkv, g, S, D).sum(2), dv.reshape(B, Hkv, g, S, D).sum(2)


def _f16(rng, shape, dtype, scale=1.0):
    from kernels._util import rand
    return rand(rng, shape, dtype, scale)


def flash_attention_case(kw, rng):
    from kernels._util import Case, empty, size
    B, H, Hkv, D = size(kw, "batch"), kw["heads"], kw["kv_heads"], kw["dim"]
    Sq, Skv = size(kw, "seq_q"), size(kw, "seq_kv")
    if isinstance(kw["seq_q"], str) and kw["seq_q"] == kw["seq_kv"]:
        Skv = Sq
    dtype = kw.get("dtype", "float16")
    q, q64 = _f16(rng, (B, H, Sq, D), dtype)
    k, k64 = _f16(rng, (B, Hkv, Skv, D), dtype)
    v, v64 = _f16(rng, (B, Hkv, Skv, D), dtype)
    o_ref, lse_ref = attention_ref(q64, k64, v64, kw.get("is_causal", False))
    args = [q, k, v, empty((B, H, Sq, D), dtype)]
    outs, dts = {3: o_ref}, {3: dtype}
    if kw.get("with_lse"):
        args.append(empty((B, H, Sq), "float32"))
        outs[4], dts[4] = lse_ref, "float32"
    return Case(args, outs, dts, {4: (1e-3, 1e-3)}, flops=4 * B * H * Sq * Skv * D)


def decode_case(kw, rng):
    """decode_split + decode_combine are checked together by the combine's case (see
    run_decode); a split alone is checked on its partial LSEs through the combine identity."""
    from kernels._util import Case, empty, size
    B, H, Hkv, D, S = size(kw, "batch"), kw["heads"], kw["kv_heads"], kw["dim"], size(kw, "seqlen_kv")
    ns = kw.get("num_split", 4)
    dtype = kw.get("dtype", "float16")
    q, q64 = _f16(rng, (B, H, D), dtype)
    k, k64 = _f16(rng, (B, Hkv, S, D), dtype)
    v, v64 = _f16(rng, (B, Hkv, S, D), dtype)
    lse_part = empty((B, H, ns), "float32")
    o_part = empty((B, H, ns, D), "float32")
    # References for each split's partial result.
    per = -(-S // ns)
    lref = np.full((B, H, ns), -np.inf)
    oref = np.zeros((B, H, ns, D))
    for s in range(ns):
        lo, hi = s * per, min(S, (s + 1) * per)
        if lo < hi:
            o, l = attention_ref(q64[:, :, None], k64[:, :, lo:hi], v64[:, :, lo:hi], False)
            oref[:, :, s], lref[:, :, s] = o[:, :, 0], l[:, :, 0]
    return Case([q, k, v, lse_part, o_part], {3: lref, 4: oref}, {3: "float32", 4: "float32"},
                {3: (1e-3, 1e-3), 4: (1e-3, 1e-3)}, flops=4 * B * H * S * D)


def paged_decode_case(kw, rng):
    from kernels._util import Case, empty, size
    B, H, Hkv, D = size(kw, "batch"), kw["heads"], kw["kv_heads"], kw["dim"]
    ps, mp, ns = kw["page_size"], kw["max_pages"], kw.get("num_split", 4)
    dtype = kw.get("dtype", "float16")
    lens = rng.integers(1, ps * mp + 1, size=B).astype(np.int32)
    lens[0] = ps * mp  # one full sequence
    npages = int(sum(-(-int(n) // ps) for n in lens)) + 3
    perm = rng.permutation(npages).astype(np.int32)
    table = np.full((B, mp), -1, np.int32)  # unused entries must not be read
    used = 0
    for b in range(B):
        n = -(-int(lens[b]) // ps)
        table[b, :n] = perm[used:used + n]
        used += n
    table = np.where(table < 0, 0, table).astype(np.int32)
    q, q64 = _f16(rng, (B, H, D), dtype)
    kc, kc64 = _f16(rng, (npages, ps, Hkv, D), dtype)
    vc, vc64 = _f16(rng, (npages, ps, Hkv, D), dtype)
    pps = -(-mp // ns)
    lref = np.full((B, H, ns), -np.inf)
    oref = np.zeros((B, H, ns, D))
    for b in range(B):
        kseq = kc64[table[b]].reshape(mp * ps, Hkv, D).transpose(1, 0, 2)
        vseq = vc64[table[b]].reshape(mp * ps, Hkv, D).transpose(1, 0, 2)
        for s in range(ns):
            lo, hi = s * pps * ps, min(int(lens[b]), (s + 1) * pps * ps)
            if lo < hi:
                o, l = attention_ref(q64[b][None, :, None], kseq[None, :, lo:hi], vseq[None, :, lo:hi], False)
                oref[b, :, s], lref[b, :, s] = o[0, :, 0], l[0, :, 0]
    return Case([q, kc, vc, table, lens, empty((B, H, ns), "float32"), empty((B, H, ns, D), "float32")],
                {5: lref, 6: oref}, {5: "float32", 6: "float32"}, {5: (1e-3, 1e-3), 6: (1e-3, 1e-3)},
                flops=4 * int(lens.sum()) * H * D)


def decode_combine_case(kw, rng):
    from kernels._util import Case, empty, size
    B, H, ns, D = size(kw, "batch"), kw["heads"], kw["num_split"], kw["dim"]
    dtype = kw.get("dtype", "float16")
    lse = (rng.standard_normal((B, H, ns)) * 3).astype(np.float32)
    lse[0, 0, -1] = -np.inf  # an empty split
    part = rng.standard_normal((B, H, ns, D)).astype(np.float32)
    l64 = lse.astype(np.float64)
    tot = np.log2(np.exp2(l64 - l64.max(-1, keepdims=True)).sum(-1, keepdims=True)) + l64.max(-1, keepdims=True)
    ref = (part * np.exp2(l64 - tot)[..., None]).sum(2)
    return Case([lse, part, empty((B, H, D), dtype)], {2: ref}, {2: dtype})


def attention_bwd_preprocess_case(kw, rng):
    from kernels._util import Case, empty, size
    B, H, S, D = size(kw, "batch"), kw["heads"], size(kw, "seq_q"), kw["dim"]
    dtype = kw.get("dtype", "float16")
    o, o64 = _f16(rng, (B, H, S, D), dtype)
    do, do64 = _f16(rng, (B, H, S, D), dtype)
    return Case([o, do, empty((B, H, S), "float32")], {2: (o64 * do64).sum(-1)}, {2: "float32"},
                {2: (1e-4, 1e-4)})


def attention_bwd_case(kw, rng):
    from kernels._util import Case, size
    B, H, Hkv, S, D = size(kw, "batch"), kw["heads"], kw["kv_heads"], size(kw, "seq"), kw["dim"]
    dtype = kw.get("dtype", "float16")
    causal = kw.get("is_causal", False)
    q, q64 = _f16(rng, (B, H, S, D), dtype)
    k, k64 = _f16(rng, (B, Hkv, S, D), dtype)
    v, v64 = _f16(rng, (B, Hkv, S, D), dtype)
    do, do64 = _f16(rng, (B, H, S, D), dtype)
    o64, lse = attention_ref(q64, k64, v64, causal)
    delta = (o64 * do64).sum(-1)
    dq, dk, dv = attention_bwd_ref(q64, k64, v64, do64, causal)
    z = np.zeros
    args = [q, k, v, do, lse.astype(np.float32), delta.astype(np.float32),
            z((B, H, S, D), np.float32), z((B, Hkv, S, D), np.float32), z((B, Hkv, S, D), np.float32)]
    tol = (2e-2, 2e-2)  # P and dS are rounded to fp16 before the GEMMs, as on GPUs
    return Case(args, {6: dq, 7: dk, 8: dv}, {6: "float32", 7: "float32", 8: "float32"},
                {6: tol, 7: tol, 8: tol}, flops=10 * B * H * S * S * D)


CASES = {"flash_attention": flash_attention_case, "decode_split": decode_case,
         "paged_decode_split": paged_decode_case, "decode_combine": decode_combine_case,
         "attention_bwd_preprocess": attention_bwd_preprocess_case, "attention_bwd": attention_bwd_case}
