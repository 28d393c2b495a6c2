"""Conformance tile programs: FlashAttention forward (MHA/GQA, causal or not)
and flash decoding with a split-KV pass and a log-sum-exp combine pass."""

import tilelang.language as T


def flash_attention(batch, heads, kv_heads, seq_q, seq_kv, dim, is_causal, block_M, block_N,
                    num_stages=1, threads=128, dtype="float16", accum_dtype="float32"):
    """BHSD layout. Causal masking aligns the last query with the last key (past_len offset)."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # softmax scale folded into log2(e) for exp2
    groups = heads // kv_heads
    past_len = seq_kv - seq_q
    q_shape = (batch, heads, seq_q, dim)
    kv_shape = (batch, kv_heads, seq_kv, dim)

    @T.macro
    def softmax_update(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        T.copy(scores_max, scores_max_prev)
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        T.copy(acc_s, acc_s_cast)

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_q, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            O_shared = T.alloc_shared((block_M, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (T.min(T.ceildiv(seq_kv, block_N), T.ceildiv((bx + 1) * block_M + past_len, block_N))
                          if is_causal else T.ceildiv(seq_kv, block_N))

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, by // groups, k * block_N:(k + 1) * block_N, :], K_shared)
                for i, j in T.Parallel(block_M, block_N):
                    q_idx = bx * block_M + i + past_len
                    k_idx = k * block_N + j
                    if is_causal:
                        acc_s[i, j] = T.if_then_else(q_idx >= k_idx and k_idx < seq_kv, 0, -T.infinity(acc_s.dtype))
                    else:
                        acc_s[i, j] = T.if_then_else(k_idx < seq_kv, 0, -T.infinity(acc_s.dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                softmax_update(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, by // groups, k * block_N:(k + 1) * block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, by, bx * block_M:(bx + 1) * block_M, :])

    return main


def flash_decoding(batch, heads, kv_heads, seqlen_kv, dim, num_split, block_N, num_stages=1,
                   dtype="float16", accum_dtype="float32", part="both"):
    """One query token per (batch, head). Pass 1: each (batch, kv head, split) block runs the
    online softmax over its KV segment for the `groups` query heads sharing that KV head and
    writes a partial output and its log-sum-exp (base 2). Pass 2 merges the splits.
    part="both" gives one function with both launches (upstream's form); "split" and
    "combine" give each launch as its own function."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    groups = heads // kv_heads
    per_split = T.ceildiv(seqlen_kv, num_split)
    loop_range = T.ceildiv(per_split, block_N)

    q_shape, kv_shape = (batch, heads, dim), (batch, kv_heads, seqlen_kv, dim)
    lse_shape, part_shape = (batch, heads, num_split), (batch, heads, num_split, dim)

    @T.macro
    def split_kernel(Q, K, V, glse, Output_partial):
        with T.Kernel(batch, kv_heads, num_split, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared((groups, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            acc_s = T.alloc_fragment((groups, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((groups, block_N), dtype)
            acc_o = T.alloc_fragment((groups, dim), accum_dtype)
            scores_max = T.alloc_fragment((groups,), accum_dtype)
            scores_max_prev = T.alloc_fragment((groups,), accum_dtype)
            scores_scale = T.alloc_fragment((groups,), accum_dtype)
            scores_sum = T.alloc_fragment((groups,), accum_dtype)
            logsum = T.alloc_fragment((groups,), accum_dtype)

            T.copy(Q[bx, by * groups:(by + 1) * groups, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                start = bz * per_split + k * block_N
                T.copy(K[bx, by, start:start + block_N, :], K_shared)
                for i, j in T.Parallel(groups, block_N):
                    valid = k * block_N + j < per_split and start + j < seqlen_kv
                    acc_s[i, j] = T.if_then_else(valid, 0, -T.infinity(accum_dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(groups):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(groups, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(groups):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(groups, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bx, by, start:start + block_N, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
            for i, j in T.Parallel(groups, dim):
                acc_o[i, j] /= logsum[i]
            for i in T.Parallel(groups):
                logsum[i] = T.log2(logsum[i]) + scores_max[i] * scale
            T.copy(logsum, glse[bx, by * groups:(by + 1) * groups, bz])
            T.copy(acc_o, Output_partial[bx, by * groups:(by + 1) * groups, bz, :])

    @T.macro
    def combine_kernel(glse, Output_partial, Output):
        with T.Kernel(heads, batch, threads=128) as (hid, bid):
            po_local = T.alloc_fragment((dim,), accum_dtype)
            o_accum_local = T.alloc_fragment((dim,), accum_dtype)
            lse_local = T.alloc_fragment((num_split,), accum_dtype)
            lse_max = T.alloc_fragment((1,), accum_dtype)
            lse_logsum = T.alloc_var(accum_dtype)
            scale_local = T.alloc_var(accum_dtype)
            T.clear(o_accum_local)
            lse_logsum = 0
            T.copy(glse[bid, hid, :], lse_local)
            T.reduce_max(lse_local, lse_max, dim=0)
            for s in T.serial(num_split):
                lse_logsum += T.exp2(lse_local[s] - lse_max[0])
            lse_logsum = T.log2(lse_logsum) + lse_max[0]
            for s in T.serial(num_split):
                T.copy(Output_partial[bid, hid, s, :], po_local)
                scale_local = T.exp2(lse_local[s] - lse_logsum)
                for i in T.Parallel(dim):
                    o_accum_local[i] += po_local[i] * scale_local
            T.copy(o_accum_local, Output[bid, hid, :])

    if part == "split":
        @T.prim_func
        def split(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
                  glse: T.Tensor(lse_shape, accum_dtype), Output_partial: T.Tensor(part_shape, accum_dtype)):
            split_kernel(Q, K, V, glse, Output_partial)
        return split

    if part == "combine":
        @T.prim_func
        def combine(glse: T.Tensor(lse_shape, accum_dtype), Output_partial: T.Tensor(part_shape, accum_dtype),
                    Output: T.Tensor(q_shape, dtype)):
            combine_kernel(glse, Output_partial, Output)
        return combine

    # Both launches in one function, as upstream writes it.
    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             glse: T.Tensor(lse_shape, accum_dtype), Output_partial: T.Tensor(part_shape, accum_dtype),
             Output: T.Tensor(q_shape, dtype)):
        split_kernel(Q, K, V, glse, Output_partial)
        combine_kernel(glse, Output_partial, Output)

    return main


GOLDEN_CASES = [
    ("flash_attn_mha", flash_attention,
     dict(batch=2, heads=2, kv_heads=2, seq_q=100, seq_kv=100, dim=32, is_causal=False, block_M=64, block_N=32)),
    ("flash_attn_mha_causal", flash_attention,
     dict(batch=2, heads=2, kv_heads=2, seq_q=100, seq_kv=100, dim=32, is_causal=True, block_M=64, block_N=32)),
    ("flash_attn_gqa", flash_attention,
     dict(batch=1, heads=4, kv_heads=2, seq_q=70, seq_kv=90, dim=32, is_causal=False, block_M=64, block_N=32)),
    ("flash_attn_gqa_causal", flash_attention,
     dict(batch=1, heads=4, kv_heads=2, seq_q=70, seq_kv=90, dim=32, is_causal=True, block_M=64, block_N=32)),
    ("flash_decoding", flash_decoding,
     dict(batch=2, heads=8, kv_heads=2, seqlen_kv=300, dim=32, num_split=3, block_N=32)),
    ("flash_decoding_split", flash_decoding,
     dict(batch=2, heads=8, kv_heads=2, seqlen_kv=300, dim=32, num_split=3, block_N=32, part="split")),
    ("flash_decoding_combine", flash_decoding,
     dict(batch=2, heads=8, kv_heads=2, seqlen_kv=300, dim=32, num_split=3, block_N=32, part="combine")),
]
