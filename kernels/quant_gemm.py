"""Weight-only quantized GEMM / GEMV: C[M, N] = A[M, K] @ dequant(W)[N, K]^T (W4A16, W8A16).

Weights are symmetric (no zero point): w = q * scale, with q a signed int8, or a signed int4
stored two per byte along K (low nibble first, two's complement) in a uint8 tensor [N, K/2].
Scales are per output channel (Scales[N]) or per group of `group_size` along K
(Scales[N, ceil(K / group_size)]). Accumulation is float32. The same factory serves decode
(small M, e.g. 1..16: block_M=16) and prefill (block_M=64); M is usually dynamic.
"""
import numpy as np

import tilelang.language as T

from kernels.gemm import _dim


def quant_matmul(M, N, K, bits=4, group_size=128, dtype="float16", out_dtype=None, block_M=16,
                 block_N=64, block_K=64, num_stages=1, threads=128, stage_scales=False):
    """Parameters:
      M           rows of A (int or symbol name), N output channels, K the reduction size
                  (K even for bits=4; K a multiple of group_size when grouped).
      bits        4 (uint8 W[N, K/2], two signed nibbles per byte) or 8 (int8 W[N, K]).
      group_size  None: per-channel scales [N]; else scales [N, K / group_size].
      dtype       activation and scale dtype: float16 | bfloat16 | float32; out_dtype default dtype.
      block_M     16 for decode (M = 1..16), 64 for prefill.
      stage_scales  copy each k-step's scales into shared memory beside the weights (one tile copy
                  instead of a guarded global load per dequantized weight); needs per-group scales
                  with block_K a multiple of group_size. For the bandwidth-bound decode shapes
                  (large block_K, several pipeline stages).
    Signature: (A, W, Scales, C); C is written.
    """
    if bits not in (4, 8):
        raise ValueError(f"quant_matmul: bits must be 4 or 8, got {bits}")
    if bits == 4 and (K % 2 or block_K % 2):
        raise ValueError(f"quant_matmul: int4 needs even K and block_K, got K={K}, block_K={block_K}")
    if group_size is not None and K % group_size:
        raise ValueError(f"quant_matmul: K={K} is not a multiple of group_size={group_size}")
    if stage_scales and (group_size is None or block_K % group_size):
        raise ValueError(f"quant_matmul: stage_scales needs per-group scales with block_K a multiple of group_size, "
                         f"got block_K={block_K}, group_size={group_size}")
    out_dtype = out_dtype or dtype
    # Static N and K that the tiles divide need no bounds test on the scales.
    exact = isinstance(N, int) and isinstance(K, int) and N % block_N == 0 and K % block_K == 0
    M = _dim(M)
    w_shape = (N, K // 2) if bits == 4 else (N, K)
    w_dtype = "uint8" if bits == 4 else "int8"
    w_tile = (block_N, block_K // 2) if bits == 4 else (block_N, block_K)
    s_shape = (N,) if group_size is None else (N, K // group_size)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor(w_shape, w_dtype), Scales: T.Tensor(s_shape, dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            W_s = T.alloc_shared(w_tile, w_dtype)
            W_f = T.alloc_fragment((block_N, block_K), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            if stage_scales:
                S_s = T.alloc_shared((block_N, block_K // group_size), dtype)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                if bits == 4:
                    T.copy(W[bx * block_N, k * (block_K // 2)], W_s)
                else:
                    T.copy(W[bx * block_N, k * block_K], W_s)
                if stage_scales:
                    T.copy(Scales[bx * block_N, k * (block_K // group_size)], S_s)
                for i, j in T.Parallel(block_N, block_K):
                    n = bx * block_N + i
                    kk = k * block_K + j
                    if bits == 4:
                        nib = (W_s[i, j // 2] >> ((j % 2) * 4)) & 0xF
                        q = T.cast(T.if_then_else(nib >= 8, T.cast(nib, "int32") - 16, T.cast(nib, "int32")),
                                   "float32")
                    else:
                        q = T.cast(W_s[i, j], "float32")
                    if stage_scales:
                        s = T.cast(S_s[i, j // group_size], "float32")
                    elif group_size is None:
                        s = T.if_then_else(n < N, T.cast(Scales[n], "float32"), 0.0) if not exact else T.cast(
                            Scales[n], "float32")
                    elif exact:
                        s = T.cast(Scales[n, kk // group_size], "float32")
                    else:
                        s = T.if_then_else(n < N and kk < K, T.cast(Scales[n, kk // group_size], "float32"), 0.0)
                    W_f[i, j] = T.cast(q * s, dtype)
                T.gemm(A_s, W_f, C_f, transpose_B=True)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def w4_lut_matmul(M, N, K, group_size=128, dtype="float16", out_dtype=None, block_M=16, block_N=64, num_stages=4,
                  threads=128):
    """W4A16 with per-group scales, dequantized through a table. Same signature and packing as
    quant_matmul(bits=4) (A, W uint8 [N, K/2], Scales [N, K/group_size] (non-zero, as
    quantize_ref makes them), C), one group per k-step (block_K = group_size).

    Why: converting every int4 weight to a float costs an int->float conversion (a quarter-rate
    instruction on recent GPUs) plus the scale multiply. Here each weight byte indexes a 256 x 2
    table of its two signed nibble values (built once per block), the GEMM runs on the exact
    integers, and the scales act on the accumulator instead: before group g's product is added,
    the accumulator is multiplied by s[g-1] / s[g] per output column, and by the last group's
    scale at the end, so C = sum_g s[g] * (A_g @ Q_g^T) with block_M x block_N multiplies per group
    instead of block_N x group_size. The weights are not rounded through fp16 (quant_matmul
    rounds q * s to the activation dtype), so results differ from it by that rounding.
    """
    if K % group_size:
        raise ValueError(f"w4_lut_matmul: K={K} is not a multiple of group_size={group_size}")
    out_dtype = out_dtype or dtype
    block_K = group_size
    M = _dim(M)

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            lut = T.alloc_shared((256, 2), dtype)
            A_s = T.alloc_shared((block_M, block_K), dtype)
            W_s = T.alloc_shared((block_N, block_K // 2), "uint8")
            S_s = T.alloc_shared((block_N, 1), dtype)
            W_f = T.alloc_fragment((block_N, block_K), dtype)
            C_f = T.alloc_fragment((block_M, block_N), "float32")
            s_prev = T.alloc_fragment((block_N,), "float32")
            r = T.alloc_fragment((block_N,), "float32")
            for b, h in T.Parallel(256, 2):
                nib = (b >> (h * 4)) & 0xF
                lut[b, h] = T.cast(T.if_then_else(nib >= 8, nib - 16, nib), dtype)
            T.clear(C_f)
            T.fill(s_prev, 1.0)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(W[bx * block_N, k * (block_K // 2)], W_s)
                T.copy(Scales[bx * block_N, k], S_s)
                for i, j in T.Parallel(block_N, block_K):
                    W_f[i, j] = lut[W_s[i, j // 2], j % 2]
                for j in T.Parallel(block_N):
                    # columns past N have scale 0 (zero-filled tile): keep them finite
                    s = T.cast(S_s[j, 0], "float32")
                    r[j] = T.if_then_else(s != 0.0, s_prev[j] / s, 0.0)
                    s_prev[j] = s
                for i, j in T.Parallel(block_M, block_N):
                    C_f[i, j] *= r[j]
                T.gemm(A_s, W_f, C_f, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                C_f[i, j] *= s_prev[j]
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def w4a16_gemv(M, N, K, group_size=128, dtype="float16", out_dtype=None, block_M=1, block_N=16, block_K=256,
               num_stages=4, threads=128, magic_round=False):
    """W4A16 for decode (M = 1..4 rows of A per block): the same signature and packing as
    quant_matmul(bits=4) (A [M, K], W uint8 [N, K/2] two signed nibbles per byte, low first,
    Scales [N, K / group_size], C [M, N]), without tensor cores.

    Why: at M <= 4 a W4A16 GEMM is a stream of the packed weights; what limits it is the work per
    weight (every int4 -> float conversion is a quarter-rate instruction on NVIDIA GPUs, and
    quant_matmul converts each weight, scales and rounds it to fp16 and stores it to shared memory
    for the mma). Here each block owns `block_N` output channels and walks all of K in k-steps of
    `block_K` with a `num_stages` pipeline of the weight bytes, A and the scales (16-byte cp.async /
    TMA); each thread owns runs of 4 weight bytes (8 weights) of its rows, converts each byte ONCE
    (b ^ 0x08 read as int8 is u_lo + 16 q_hi, the low nibble in excess-8 form u_lo = q_lo + 8)
    and splits the float exactly (q_hi = floor(b / 16), or by rounding through the 1.5 * 2^23 magic
    constant), then accumulates s * (q_lo a_2j + q_hi a_2j+1) in float32 per byte slot; one
    cross-thread row sum (T.reduce_sum) per block at the end. No per-weight rounding to fp16:
    results match the float64 product of A and the dequantized weights (quant_matmul_ref without
    round_to) to float32 accuracy.

    Parameters: block_M rows of A per block (the thread holding a weight byte holds its products
    with all block_M rows; 1 for M = 1); block_N output channels per block (N / block_N blocks: 512
    at N = 8192, block_N = 16); block_K weights per k-step (a multiple of 8 and of group_size, or a
    divisor of it; block_K / 2 bytes per row and step, 4 per thread run); K a multiple of
    block_K. M may be dynamic. magic_round: split the nibbles with a rounding constant instead of
    floor (faster on CUDA; wrong where a compiler reassociates float additions, e.g. SPIR-V drivers).
    """
    if K % 2 or block_K % 8:
        raise ValueError(f"w4a16_gemv: K and block_K must be even and block_K a multiple of 8, got K={K}, "
                         f"block_K={block_K}")
    if K % group_size or K % block_K:
        raise ValueError(f"w4a16_gemv: K={K} must be a multiple of group_size={group_size} and block_K={block_K}")
    if block_K % group_size and group_size % block_K:
        raise ValueError(f"w4a16_gemv: block_K={block_K} and group_size={group_size}: one must divide the other")
    out_dtype = out_dtype or dtype
    M = _dim(M)
    nbytes = block_K // 2
    groups = max(1, block_K // group_size)  # scale columns (groups) per k-step
    gstep = nbytes // groups  # bytes of one group within a step

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            W_s = T.alloc_shared((block_N, nbytes), "uint8")
            # The block's scales for all of K, copied once before the k loop (block_N * K / group_size
            # elements, 2 KiB at 16 rows, K = 8192): a per-step copy of one scale column is strided, so it
            # was a synchronous global load inside the loop -- a DRAM round trip on every k-step's
            # critical path (its warp stalls, then every warp at the next barrier).
            S_all = T.alloc_shared((block_N, K // group_size), dtype)
            # Per byte j of the step: (a_2j, a_2j+1 - 16 a_2j, -8 a_2j, 0) in float32, and the scales in
            # float32: the per-byte loop then reads only float32 and the weight bytes, so nvcc merges
            # each thread's run of 4 bytes into one shared load (an fp16 conversion between the loads
            # keeps it from merging them), and the three A terms of a byte into one 16-byte load.
            A3 = T.alloc_shared((block_M, nbytes, 4), "float32")
            S32 = T.alloc_shared((block_N, groups), "float32")
            acc = T.alloc_fragment((block_M, block_N, groups, gstep) if block_M > 1 else (block_N, groups, gstep),
                                   "float32")
            if block_M > 1:
                out = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            T.copy(Scales[bx * block_N, 0], S_all)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(W[bx * block_N, k * nbytes], W_s)
                for m, j, t in T.Parallel(block_M, nbytes, 4):
                    a0 = T.cast(A_s[m, 2 * j], "float32")
                    a1 = T.cast(A_s[m, 2 * j + 1], "float32")
                    A3[m, j, t] = T.if_then_else(t == 0, a0, T.if_then_else(t == 1, a1 - a0 * 16.0,
                                                                             T.if_then_else(t == 2, a0 * -8.0, 0.0)))
                for n, g in T.Parallel(block_N, groups):
                    S32[n, g] = T.cast(S_all[n, k * groups + g if groups > 1 else k // (group_size // block_K)],
                                       "float32")

                def byte_dot(m, n, g, j):
                    jb = g * gstep + j  # byte within the step's row
                    # b ^ 0x08 read as int8 = u_lo + 16 q_hi = q_lo + 16 q_hi + 8 (u_lo = q_lo + 8, excess-8),
                    # exactly; one int -> float conversion per byte
                    b = T.cast(T.cast(W_s[n, jb] ^ 0x08, "int8"), "float32")
                    # q_hi = floor(b / 16) (u_lo / 16 < 1)
                    if magic_round:
                        # the same as round(b / 16 + 7.53125) - 8 (= q_hi + 8 + round(u_lo / 16 - 15/32) - 8):
                        # adding then subtracting 1.5 * 2^23 rounds to an integer with two full-rate adds,
                        # where floor is a quarter-rate instruction on NVIDIA GPUs. Only where the compiler
                        # keeps float additions in order (CUDA, the CPU); SPIR-V drivers fold them away.
                        hi = ((b * 0.0625 + 7.53125) + 12582912.0) - 12582920.0
                    else:
                        hi = T.floor(b * 0.0625)
                    # q_lo a0 + q_hi a1 with q_lo = b - 8 - 16 q_hi
                    return S32[n, g] * (b * A3[m, jb, 0] + A3[m, jb, 2] + hi * A3[m, jb, 1])

                if block_M > 1:
                    for m, n, g, j in T.Parallel(block_M, block_N, groups, gstep):
                        acc[m, n, g, j] += byte_dot(m, n, g, j)
                else:
                    for n, g, j in T.Parallel(block_N, groups, gstep):
                        acc[n, g, j] += byte_dot(0, n, g, j)
            if block_M > 1:
                part = T.alloc_fragment((block_M, block_N, groups), "float32")
                T.reduce_sum(acc, part, dim=3)
                T.reduce_sum(part, out, dim=2)
                T.copy(out, C[by * block_M, bx * block_N])
            else:
                part = T.alloc_fragment((block_N, groups), "float32")
                row = T.alloc_fragment((block_N,), "float32")
                T.reduce_sum(acc, part, dim=2)
                T.reduce_sum(part, row, dim=1)
                for n in T.Parallel(block_N):
                    C[by, bx * block_N + n] = T.cast(row[n], out_dtype)

    return main


def w4a16_mma(M, N, K, group_size=128, dtype="float16", out_dtype=None, block_M=16, block_N=32, num_stages=4,
              threads=128, magic_round=False, h2_dequant=False, groups_per_step=1, split_k=1, workspace=False,
              cast_block=(16, 128)):
    """W4A16 on tensor cores with w4a16_gemv's dequantization: the same signature and packing as
    quant_matmul(bits=4), one scale group per k-step (block_K = group_size). Each k-step turns the
    block's weight bytes (copied into registers first, 4 per thread load) into their exact signed
    integer values in an fp16 (dtype) tile in shared memory -- one int -> float conversion per byte,
    the two nibbles split exactly in float32 (floor, or with magic_round the rounding constant; see
    w4a16_gemv) -- then T.gemm(A_s, Q^T) into a per-step float32 accumulator, added to C scaled by
    the group scales of its columns (as w4_lut_matmul, the scales act on block_M x block_N products,
    not on every weight). For decode at M = 16 (block_M 16), where SIMT FMAs cannot keep up with
    the weight stream. The group scales of the block's rows are loaded once, before the k loop.
    M may be dynamic; K a multiple of group_size.
    h2_dequant (CUDA only, float16): the fp16 tile is made by imported CUDA source instead -- 16 weight
    bytes per call, the bit operations of w4a16_gemv_h2 (1024 + nibble as fp16, one fma.f16x2 per
    pair to the exact integer), 4 byte permutes per word into k order, 16-byte shared stores: ~3.5
    instructions per byte instead of ~10; block_N * group_size / 32 an even number of calls.
    groups_per_step G = 2: each k-step takes G groups (G tiles of A and W, one TMA copy each), turns
    them into G fp16 tiles and runs G independent T.gemm into G accumulators (G dependent mma chains
    of group_size / 16 instead of one, and 1/G of the per-step waits and barriers); K / group_size a
    multiple of G.
    split_k S > 1 (decode at M = 16, N = K = 8192: 128 blocks of 32 columns are 0.32 waves of the H200's
    132 SMs, and each k-step costs a fixed latency): the split-K form of kernels.gemm.matmul_splitk -- grid
    (N / block_N, M / block_M, S), block z takes groups [z G_s, (z + 1) G_s) with G_s = K / group_size / S
    (a whole number of groups, a multiple of groups_per_step) and adds its float32 tile into a float32
    workspace Wk [M, N] with float32 atomics; a second kernel rounds Wk into C once (tiles of cast_block
    rows x columns). workspace=False: Wk is a T.alloc_global allocated zeroed at every call;
    workspace=True: Wk is the caller's 5th argument, zero before the first call, and the cast kernel
    writes zeros back (every call leaves it zero). Signature with workspace=True: (A, W, Scales, C, Wk)."""
    if K % group_size or group_size % 8:
        raise ValueError(f"w4a16_mma: K={K} must be a multiple of group_size={group_size}, itself of 8")
    if h2_dequant and (dtype != "float16" or group_size % 32 or (block_N * group_size // 32) % 2):
        raise ValueError(f"w4a16_mma: h2_dequant needs float16 (got {dtype}), group_size a multiple of 32 (got "
                         f"{group_size}) and an even block_N * group_size / 32 (block_N={block_N})")
    gps = groups_per_step
    if gps not in (1, 2) or (K // group_size) % gps:
        raise ValueError(f"w4a16_mma: groups_per_step={gps} must be 1 or 2 and divide K / group_size = "
                         f"{K // group_size}")
    if not isinstance(split_k, int) or split_k < 1 or (K // group_size) % (split_k * gps):
        raise ValueError(f"w4a16_mma: split_k={split_k!r} must be a positive int with split_k * groups_per_step "
                         f"({split_k} * {gps}) dividing K / group_size = {K // group_size}")
    out_dtype = out_dtype or dtype
    M = _dim(M)
    block_K = group_size
    nbytes = block_K // 2
    groups = K // group_size // split_k  # the groups of one block (of its split)
    chunks = nbytes // 16  # h2_dequant: calls per row
    deq = "tl_w4h2_deq32"
    gsteps = tuple(range(gps))  # a tuple: the tracer unrolls it in Python (range() would be a device loop)

    @T.macro
    def tile(A, W, Scales, Out, bx, by, g0):
        # the block's product over groups [g0, g0 + groups): stored into C (split_k 1) or added into the
        # float32 workspace (split_k > 1)
        A_s1 = T.alloc_shared((block_M, block_K), dtype)
        W_s1 = T.alloc_shared((block_N, nbytes), "uint8")
        S_all = T.alloc_shared((block_N, groups), dtype)
        Q_s1 = T.alloc_shared((block_N, block_K), dtype)
        if not h2_dequant:
            W_r = T.alloc_fragment((block_N, nbytes), "uint8")
        C_k1 = T.alloc_fragment((block_M, block_N), "float32")
        A_s, W_s, Q_s, C_k = [A_s1], [W_s1], [Q_s1], [C_k1]  # one tile of each per group of the k-step
        if gps == 2:
            A_s2 = T.alloc_shared((block_M, block_K), dtype)
            W_s2 = T.alloc_shared((block_N, nbytes), "uint8")
            Q_s2 = T.alloc_shared((block_N, block_K), dtype)
            C_k2 = T.alloc_fragment((block_M, block_N), "float32")
            A_s, W_s, Q_s, C_k = [A_s1, A_s2], [W_s1, W_s2], [Q_s1, Q_s2], [C_k1, C_k2]
        C_f = T.alloc_fragment((block_M, block_N), "float32")
        if h2_dequant:
            T.import_source(_W4H2_DEQUANT)
        T.copy(Scales[bx * block_N, g0], S_all)
        T.clear(C_f)
        for k in T.Pipelined(groups // gps, num_stages=num_stages):
            for g in gsteps:
                T.copy(A[by * block_M, (g0 + k * gps + g) * block_K], A_s[g])
                T.copy(W[bx * block_N, (g0 + k * gps + g) * nbytes], W_s[g])
            for g in gsteps:
                if h2_dequant:
                    # call 2 p + h: row (2 p + h) // chunks, bytes 16 ((2 p + h) % chunks) (a (calls / 2, 2)
                    # loop: the default layout gives each thread one call per pass)
                    for p, h in T.Parallel(block_N * chunks // 2, 2):
                        T.call_extern(deq, T.address_of(W_s[g][(2 * p + h) // chunks, ((2 * p + h) % chunks) * 16]),
                                      T.address_of(Q_s[g][(2 * p + h) // chunks, ((2 * p + h) % chunks) * 32]),
                                      dtype="handle")
                else:
                    T.copy(W_s[g], W_r)
                    for n, j in T.Parallel(block_N, nbytes):
                        b = T.cast(T.cast(W_r[n, j] ^ 0x08, "int8"), "float32")  # q_lo + 16 q_hi + 8
                        if magic_round:
                            hi = ((b * 0.0625 + 7.53125) + 12582912.0) - 12582920.0
                        else:
                            hi = T.floor(b * 0.0625)
                        Q_s[g][n, 2 * j] = T.cast((b - hi * 16.0) - 8.0, dtype)
                        Q_s[g][n, 2 * j + 1] = T.cast(hi, dtype)
            for g in gsteps:
                T.clear(C_k[g])
            for g in gsteps:
                T.gemm(A_s[g], Q_s[g], C_k[g], transpose_B=True)
            for m, n in T.Parallel(block_M, block_N):
                upd = C_k[0][m, n] * T.cast(S_all[n, k * gps], "float32")
                for g in gsteps[1:]:
                    upd = upd + C_k[g][m, n] * T.cast(S_all[n, k * gps + g], "float32")
                C_f[m, n] += upd
        if split_k == 1:
            T.copy(C_f, Out[by * block_M, bx * block_N])
        else:
            T.atomic_add(Out[by * block_M, bx * block_N], C_f)

    grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M))
    if split_k == 1:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
                 Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(*grid, threads=threads) as (bx, by):
                tile(A, W, Scales, C, bx, by, 0)
        return main

    return _split_k_main(tile, M, N, K, group_size, dtype, out_dtype, grid, threads, split_k, groups, workspace,
                         cast_block)


def _split_k_main(tile, M, N, K, group_size, dtype, out_dtype, grid, threads, split_k, groups, workspace,
                  cast_block):
    """The split-K program of w4a16_mma / w4a16_wgmma: grid (*grid, split_k) blocks, block z running
    tile(A, W, Scales, Wk, bx, by, z * groups) (its float32 product added into the workspace Wk with
    float32 atomics), then a kernel rounding Wk into C in cast_block tiles (workspace=True: Wk is the
    caller's 5th argument and is written back to zero; else a T.alloc_global, zeroed at every call)."""
    cb_m, cb_n = cast_block

    @T.macro
    def cast(C, Wk, bx, by):
        # as matmul_splitk's: Wk read (and zeroed) in 16-byte accesses through shared memory, edges guarded
        w_s = T.alloc_shared((cb_m, cb_n), "float32")
        T.copy(Wk[by * cb_m, bx * cb_n], w_s)
        T.copy(w_s, C[by * cb_m, bx * cb_n])
        if workspace:
            z_s = T.alloc_shared((cb_m, cb_n), "float32")
            T.clear(z_s)
            T.copy(z_s, Wk[by * cb_m, bx * cb_n])

    cast_grid = (T.ceildiv(N, cb_n), T.ceildiv(M, cb_m))
    if workspace:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
                 Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype),
                 Wk: T.Tensor((M, N), "float32")):
            with T.Kernel(*grid, split_k, threads=threads) as (bx, by, bz):
                tile(A, W, Scales, Wk, bx, by, bz * groups)
            with T.Kernel(*cast_grid, threads=128) as (bx, by):
                cast(C, Wk, bx, by)
        return main

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype)):
        Wk = T.alloc_global((M, N), "float32")
        with T.Kernel(*grid, split_k, threads=threads) as (bx, by, bz):
            tile(A, W, Scales, Wk, bx, by, bz * groups)
        with T.Kernel(*cast_grid, threads=128) as (bx, by):
            cast(C, Wk, bx, by)

    return main


_W4H2_HELPERS = r"""
__device__ __forceinline__ unsigned tl_w4h2_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ float tl_w4h2_sum(unsigned h) {
  float lo, hi;
  asm("{ .reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h; }" : "=f"(lo), "=f"(hi) : "r"(h));
  return lo + hi;
}
__device__ __forceinline__ float tl_w4h2_h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
"""

# w4a16_mma(h2_dequant=True): 16 weight bytes (32 int4, k order) -> 32 exact fp16 integers in k order.
_W4H2_DEQUANT = _W4H2_HELPERS + r"""
__device__ __forceinline__ void tl_w4h2_deq32(const unsigned char* w, unsigned short* out) {
  const uint4 v = *reinterpret_cast<const uint4*>(w);
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned x = words[i], y = x >> 8;
    const unsigned q04 = tl_w4h2_fma((x & 0x000f000fu) ^ 0x64086408u, 0x3c003c00u, 0xe408e408u);  // (q0, q4)
    const unsigned q15 = tl_w4h2_fma((x & 0x00f000f0u) ^ 0x64806480u, 0x2c002c00u, 0xd480d480u);  // (q1, q5)
    const unsigned q26 = tl_w4h2_fma((y & 0x000f000fu) ^ 0x64086408u, 0x3c003c00u, 0xe408e408u);  // (q2, q6)
    const unsigned q37 = tl_w4h2_fma((y & 0x00f000f0u) ^ 0x64806480u, 0x2c002c00u, 0xd480d480u);  // (q3, q7)
    *reinterpret_cast<uint4*>(out + 8 * i) = make_uint4(__byte_perm(q04, q15, 0x5410), __byte_perm(q26, q37, 0x5410),
                                                        __byte_perm(q04, q15, 0x7632), __byte_perm(q26, q37, 0x7632));
  }
}
"""


def _w4h2_source(name, rows, wstride, sstride, astride):
    """CUDA C++ of one thread's k-step in w4a16_gemv_h2: 32 weights (16 bytes, 4 words of 8 nibbles)
    of each of `rows` rows (wstride bytes apart in the weight tile, their scales sstride halves apart,
    their float32 accumulators astride apart) against the same 32 activations. Per word x: (x & 0x000f000f) ^ 0x64086408 is the half2
    (1024 + (n0 ^ 8), 1024 + (n4 ^ 8)) -- n ^ 8 is the excess-8 form of the signed nibble q, so one
    fma (x * 1 - 1032) gives (q0, q4) exactly; the high nibbles give 1024 + 16 (n ^ 8), and
    x / 16 - 72 = q; x >> 8 gives (q2, q6), (q3, q7). The activations are paired to match with 4
    byte permutes per word (shared by all rows). Products accumulate in two half2 registers per row
    (8 products per half, |q| <= 8), converted to float32 once per 32 weights, times the group scale."""
    return _W4H2_HELPERS + f"""
__device__ __forceinline__ void {name}(const unsigned char* w, const unsigned short* a, const unsigned short* s,
                                        float* acc) {{
  const uint4* a4 = reinterpret_cast<const uint4*>(a);
  unsigned ap[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {{
    const uint4 v = a4[i];  // a[8i .. 8i+7]: pairs (a0, a4), (a1, a5), (a2, a6), (a3, a7)
    ap[i][0] = __byte_perm(v.x, v.z, 0x5410);
    ap[i][1] = __byte_perm(v.x, v.z, 0x7632);
    ap[i][2] = __byte_perm(v.y, v.w, 0x5410);
    ap[i][3] = __byte_perm(v.y, v.w, 0x7632);
  }}
#pragma unroll
  for (int r = 0; r < {rows}; ++r) {{
    const uint4 q = *reinterpret_cast<const uint4*>(w + r * {wstride});
    const unsigned words[4] = {{q.x, q.y, q.z, q.w}};
    unsigned h0 = 0u, h1 = 0u;
#pragma unroll
    for (int i = 0; i < 4; ++i) {{
      const unsigned x = words[i], y = x >> 8;
      const unsigned q0 = tl_w4h2_fma((x & 0x000f000fu) ^ 0x64086408u, 0x3c003c00u, 0xe408e408u);  // x - 1032
      const unsigned q1 = tl_w4h2_fma((x & 0x00f000f0u) ^ 0x64806480u, 0x2c002c00u, 0xd480d480u);  // x / 16 - 72
      const unsigned q2 = tl_w4h2_fma((y & 0x000f000fu) ^ 0x64086408u, 0x3c003c00u, 0xe408e408u);
      const unsigned q3 = tl_w4h2_fma((y & 0x00f000f0u) ^ 0x64806480u, 0x2c002c00u, 0xd480d480u);
      h0 = tl_w4h2_fma(q0, ap[i][0], h0);
      h1 = tl_w4h2_fma(q1, ap[i][1], h1);
      h0 = tl_w4h2_fma(q2, ap[i][2], h0);
      h1 = tl_w4h2_fma(q3, ap[i][3], h1);
    }}
    acc[r * {astride}] += tl_w4h2_h2f(s[r * {sstride}]) * (tl_w4h2_sum(h0) + tl_w4h2_sum(h1));
  }}
}}
"""


def w4a16_gemv_h2(M, N, K, group_size=128, out_dtype=None, block_N=16, block_K=256, num_stages=6, threads=128):
    """W4A16 decode for CUDA only (the dequantization is imported CUDA source: T.import_source +
    T.call_extern, which the CPU, HIP and Vulkan backends refuse naming the kernel): the same
    signature and packing as w4a16_gemv with fp16 activations and scales (A [M, K], W uint8 [N, K/2],
    Scales [N, K / group_size], C [M, N]).

    Why: w4a16_gemv spends ~10 instructions per weight byte in float32 (an int -> float conversion,
    the exact nibble split, FMAs) plus per-k-step overhead. Here each thread takes 16 weight bytes (32
    weights) of each of its rows per k-step in one 16-byte shared load and turns them into fp16 pairs
    with bit operations (0x6400 magic: 1024 + nibble), so a word of 8 weights costs 1 shift, 4 lop3,
    4 fma.f16x2 to exact integers and 4 fma.f16x2 of products: ~3.5 instructions per byte; A is
    paired once per k-step for all the thread's rows. Each block owns block_N rows, one row of A
    (grid.y = M: meant for M = 1..4) and walks K in k-steps of block_K with a num_stages pipeline of
    the weight bytes and A (TMA); the block's scales for all of K are staged once. Per 32 weights the
    products accumulate in fp16 (8 per half, |q| <= 8), then float32 times the group scale; the
    threads of one row (block_K / 32) are summed at the end.

    block_K: a multiple of 32 dividing K; group_size a multiple of 32; threads a multiple of
    block_K / 32 with block_N a multiple of threads / (block_K / 32) (rows per thread = block_N *
    (block_K / 32) / threads)."""
    if group_size % 32 or K % group_size:
        raise ValueError(f"w4a16_gemv_h2: group_size={group_size} must be a multiple of 32 dividing K={K}")
    if block_K % 32 or K % block_K:
        raise ValueError(f"w4a16_gemv_h2: block_K={block_K} must be a multiple of 32 dividing K={K}")
    chunks = block_K // 32  # threads per row
    if threads % chunks or block_N % (threads // chunks):
        raise ValueError(f"w4a16_gemv_h2: threads={threads} must be a multiple of block_K / 32 = {chunks} and "
                         f"block_N={block_N} a multiple of threads / {chunks} = {max(1, threads // chunks)}")
    out_dtype = out_dtype or "float16"
    M = _dim(M)
    nbytes = block_K // 2
    rstride = threads // chunks  # rows between one thread's rows
    rows = block_N // rstride
    groups = K // group_size
    name = f"tl_w4a16_h2_r{rows}_w{rstride * nbytes}_s{rstride * groups}_a{threads}"
    src = _w4h2_source(name, rows, rstride * nbytes, rstride * groups, threads)

    def group_of(k, c):  # the scale column of chunk c (32 weights) of k-step k
        if block_K % group_size == 0:  # k * block_K is a whole number of groups: no division per k-step
            return k * (block_K // group_size) + (c * 32) // group_size
        return (k * block_K + c * 32) // group_size

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, K // group_size), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), M, threads=threads) as (bx, by):
            A_s = T.alloc_shared((1, block_K), "float16")
            W_s = T.alloc_shared((block_N, nbytes), "uint8")
            S_all = T.alloc_shared((block_N, groups), "float16")
            # accumulator i of thread-slot t at [i, t]: the extern call of slot t owns column t
            acc = T.alloc_shared((rows, threads), "float32")
            red = T.alloc_fragment((block_N, chunks), "float32")
            row = T.alloc_fragment((block_N,), "float32")
            T.import_source(src)
            for i, t in T.Parallel(rows, threads):
                acc[i, t] = 0.0
            T.copy(Scales[bx * block_N, 0], S_all)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by, k * block_K], A_s)
                T.copy(W[bx * block_N, k * nbytes], W_s)
                # slot t = 2 p + h: chunk t % chunks of rows t // chunks + i * rstride (a (threads / 2, 2) loop:
                # the default layout gives each thread one slot)
                for p, h in T.Parallel(threads // 2, 2):
                    T.call_extern(name, T.address_of(W_s[(2 * p + h) // chunks, ((2 * p + h) % chunks) * 16]),
                                  T.address_of(A_s[0, ((2 * p + h) % chunks) * 32]),
                                  T.address_of(S_all[(2 * p + h) // chunks, group_of(k, (2 * p + h) % chunks)]),
                                  T.address_of(acc[0, 2 * p + h]), dtype="handle")
            for n, c in T.Parallel(block_N, chunks):
                red[n, c] = acc[n // rstride, (n % rstride) * chunks + c]
            T.reduce_sum(red, row, dim=1)
            for n in T.Parallel(block_N):
                C[by, bx * block_N + n] = T.cast(row[n], out_dtype)

    return main


# w4a16_gemv_ldg's memory helpers. The weights go global -> shared by cp.async (.cg: not into L1, where A
# stays for the block's warps; L2::256B: the whole 256-byte run), each thread into its own slots of a
# ring, so no block barrier: cp.async.wait_group makes a thread's own copies visible to it. Why not
# plain loads into a register ring: ptxas sinks them next to their use (SASS of the register version:
# the k-th weight load issued after ~k - 1 chunks were consumed, one or two 16-byte loads in flight per
# thread), while a cp.async cannot move below the wait_group that counts it. The scales: a 4-byte
# cp.async of the aligned pair holding the chunk's scale (cp.async has no 2-byte size). The lop3 of
# the decode in asm: ptxas splits (x & m) ^ c with two immediates into two LOP3s.
_W4L_HELPERS = r"""
__device__ __forceinline__ unsigned tl_w4l_saddr(const void* p) {  // generic -> shared window address
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
// dst / p: shared window addresses (one conversion of the ring's base, then constant offsets)
__device__ __forceinline__ void tl_w4l_cp16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void tl_w4l_cp4(unsigned dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void tl_w4l_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
#define TL_W4L_WAIT(n) asm volatile("cp.async.wait_group %0;" :: "n"(n) : "memory")
// a slot's 16 bytes in one load (NVVM splits some uint4 reads into v2 and scalar loads), after the wait
__device__ __forceinline__ uint4 tl_w4l_ldring(unsigned p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(p));
  return v;
}
__device__ __forceinline__ unsigned tl_w4l_ldring4(unsigned p) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(p));
  return v;
}
__device__ __forceinline__ uint4 tl_w4l_lda(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ unsigned tl_w4l_lo(unsigned x) {  // (x & 0x000f000fu) ^ 0x64086408u in one LOP3
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(x), "n"(0x000f000fu), "n"(0x64086408u));
  return r;
}
__device__ __forceinline__ unsigned tl_w4l_hi(unsigned x) {  // (x & 0x00f000f0u) ^ 0x64806480u
  unsigned r;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(r) : "r"(x), "n"(0x00f000f0u), "n"(0x64806480u));
  return r;
}
"""


def _w4ldg_source(name, K, group_size, rows, depth, prefetch, threads):
    """CUDA C++ of one thread of w4a16_gemv_ldg: lane l of warp w owns the 16-byte chunks (32 weights)
    l, l + 32, ... of each of the warp's `rows` rows, in units of `depth` chunks of one row (one slice of
    1024 depth weights); units run slice by slice, the rows inside. Each unit's chunks (and the 4-byte
    scale pairs holding their group scales) are copied global -> shared by cp.async `prefetch` units
    ahead of their use into the thread's own slots of a ring of prefetch + 1 units (one commit group per
    unit, wait_group(prefetch) before a unit is read; slot s, chunk d, thread t at ring[(s * depth + d) *
    threads + t]: a warp's 16-byte reads are consecutive, conflict-free). The lane's activations of a
    slice are loaded once (global, L1-cached: the block's warps share them) and paired as in
    _w4h2_source, then reused by all the rows. The per-chunk arithmetic is _w4h2_source's (the same bit
    operations, fp16 products 8 per half, float32 times the group scale). Writes the lane's float32
    partial sum of row r to part[r * threads + t]."""
    units = (K // (1024 * depth)) * rows
    ring = prefetch + 1
    kb, groups = K // 2, K // group_size
    return _W4H2_HELPERS + _W4L_HELPERS + f"""
__device__ __forceinline__ void {name}(const unsigned char* w, const unsigned short* a, const unsigned short* s,
                                        unsigned* ring, float* part, int t) {{
  const unsigned lane = t & 31, warp = t >> 5;
  w += warp * {rows * kb}u + lane * 16u;
  s += warp * {rows * groups}u;
  a += lane * 32u;
  const unsigned rw = tl_w4l_saddr(ring) + t * 16u;  // weights: [slot][d][thread] 16 bytes
  const unsigned rs = rw + {ring * depth * threads * 16}u - t * 12u;  // then scale pairs: [slot][d][thread] u32
  unsigned ap[{depth}][4][4];
  float acc[{rows}];
#pragma unroll
  for (int r = 0; r < {rows}; ++r) acc[r] = 0.f;
#pragma unroll
  for (int v = 0; v < {prefetch}; ++v) {{  // the first units: one commit group each (empty past the end)
    if (v < {units}) {{
#pragma unroll
      for (int d = 0; d < {depth}; ++d) {{
        const unsigned c = (v / {rows}) * {depth} + d;  // chunk column: lane l's chunk is 32 c + l
        tl_w4l_cp16(rw + (v * {depth} + d) * {threads * 16}u, w + (v % {rows}) * {kb}u + c * 512u);
        tl_w4l_cp4(rs + (v * {depth} + d) * {threads * 4}u,
                   s + (v % {rows}) * {groups}u + (((c * 1024u + lane * 32u) / {group_size}u) & ~1u));
      }}
    }}
    tl_w4l_commit();
  }}
#pragma unroll
  for (int u = 0; u < {units}; ++u) {{
    const int v = u + {prefetch};
    if (v < {units}) {{  // unit u + prefetch into the slot unit u - 1 freed
#pragma unroll
      for (int d = 0; d < {depth}; ++d) {{
        const unsigned c = (v / {rows}) * {depth} + d;
        tl_w4l_cp16(rw + ((v % {ring}) * {depth} + d) * {threads * 16}u, w + (v % {rows}) * {kb}u + c * 512u);
        tl_w4l_cp4(rs + ((v % {ring}) * {depth} + d) * {threads * 4}u,
                   s + (v % {rows}) * {groups}u + (((c * 1024u + lane * 32u) / {group_size}u) & ~1u));
      }}
    }}
    tl_w4l_commit();
    if (u % {rows} == 0) {{  // a new slice: this lane's 32 activations of each of its chunks, paired
#pragma unroll
      for (int d = 0; d < {depth}; ++d) {{
        const unsigned c = (u / {rows}) * {depth} + d;
#pragma unroll
        for (int i = 0; i < 4; ++i) {{
          const uint4 x = tl_w4l_lda(a + c * 1024u + 8 * i);  // (a0, a4), (a1, a5), (a2, a6), (a3, a7)
          ap[d][i][0] = __byte_perm(x.x, x.z, 0x5410);
          ap[d][i][1] = __byte_perm(x.x, x.z, 0x7632);
          ap[d][i][2] = __byte_perm(x.y, x.w, 0x5410);
          ap[d][i][3] = __byte_perm(x.y, x.w, 0x7632);
        }}
      }}
    }}
    TL_W4L_WAIT({prefetch});  // unit u's group is complete (prefetch newer ones may still fly)
#pragma unroll
    for (int d = 0; d < {depth}; ++d) {{
      const unsigned c = (u / {rows}) * {depth} + d;
      const uint4 qq = tl_w4l_ldring(rw + ((u % {ring}) * {depth} + d) * {threads * 16}u);
      const unsigned sp = tl_w4l_ldring4(rs + ((u % {ring}) * {depth} + d) * {threads * 4}u);
      const unsigned short sc = (unsigned short)(sp >> ((((c * 1024u + lane * 32u) / {group_size}u) & 1u) * 16u));
      const unsigned words[4] = {{qq.x, qq.y, qq.z, qq.w}};
      unsigned h0 = 0u, h1 = 0u;
#pragma unroll
      for (int i = 0; i < 4; ++i) {{
        const unsigned x = words[i], y = x >> 8;
        const unsigned q0 = tl_w4h2_fma(tl_w4l_lo(x), 0x3c003c00u, 0xe408e408u);  // x - 1032
        const unsigned q1 = tl_w4h2_fma(tl_w4l_hi(x), 0x2c002c00u, 0xd480d480u);  // x / 16 - 72
        const unsigned q2 = tl_w4h2_fma(tl_w4l_lo(y), 0x3c003c00u, 0xe408e408u);
        const unsigned q3 = tl_w4h2_fma(tl_w4l_hi(y), 0x2c002c00u, 0xd480d480u);
        h0 = tl_w4h2_fma(q0, ap[d][i][0], h0);
        h1 = tl_w4h2_fma(q1, ap[d][i][1], h1);
        h0 = tl_w4h2_fma(q2, ap[d][i][2], h0);
        h1 = tl_w4h2_fma(q3, ap[d][i][3], h1);
      }}
      acc[u % {rows}] += tl_w4h2_h2f(sc) * (tl_w4h2_sum(h0) + tl_w4h2_sum(h1));
    }}
  }}
#pragma unroll
  for (int r = 0; r < {rows}; ++r) part[r * {threads} + t] = acc[r];
}}
"""


def w4a16_gemv_ldg(M, N, K, group_size=128, out_dtype=None, rows=4, warps=4, depth=2, prefetch=4):
    """W4A16 decode for CUDA only (imported CUDA source, like w4a16_gemv_h2 and with its signature,
    packing and per-32-weight arithmetic), built to keep DRAM busy. Each warp owns `rows` rows
    (block_N = rows * warps); each lane copies its 16-byte chunks of them (512 contiguous bytes per
    warp and copy) with their group scales by cp.async into its own slots of a shared ring
    `prefetch` units of `depth` chunks ahead of their use: a lane has prefetch * depth * 16 weight
    bytes (plus prefetch * depth * 4 bytes of scale pairs) in flight whenever it computes, and no
    thread waits on another (no block barrier before the epilogue). The lane's activations (32 per
    chunk) are loaded per slice of 1024 * depth weights and reused by the warp's rows; the 32 lanes'
    partial sums of a row are added at the end (one shared write per row and thread, reduce_sum).

    Why (issue #11, ncu of w4a16_gemv_h2: DRAM ~29 % busy): its grid of a few hundred blocks staged
    small TMA tiles through a block-wide pipeline, so few bytes were in flight per SM.

    Shared memory: (prefetch + 1) * depth * 20 bytes per thread, + rows * 4 (the partial sums).
    K: a multiple of 1024 * depth (a slice: 32 lanes x depth chunks of 32 weights); group_size a
    multiple of 32 dividing K with K / group_size even (the 4-byte scale pairs); N a multiple of
    rows * warps."""
    if group_size % 32 or K % group_size or (K // group_size) % 2:
        raise ValueError(f"w4a16_gemv_ldg: group_size={group_size} must be a multiple of 32 dividing K={K} "
                         f"an even number of times")
    if depth < 1 or K % (1024 * depth):
        raise ValueError(f"w4a16_gemv_ldg: K={K} must be a multiple of 1024 * depth = {1024 * max(depth, 1)}")
    if rows < 1 or warps < 1 or prefetch < 1:
        raise ValueError(f"w4a16_gemv_ldg: rows={rows}, warps={warps}, prefetch={prefetch} must be >= 1")
    block_N = rows * warps
    if not isinstance(N, int) or N % block_N:
        raise ValueError(f"w4a16_gemv_ldg: N={N} must be a multiple of rows * warps = {block_N}")
    out_dtype = out_dtype or "float16"
    threads = 32 * warps
    M = _dim(M)
    name = f"tl_w4a16_ldg_k{K}_g{group_size}_r{rows}_d{depth}_p{prefetch}_t{threads}"
    src = _w4ldg_source(name, K, group_size, rows, depth, prefetch, threads)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K // 2), "uint8"),
             Scales: T.Tensor((N, K // group_size), "float16"), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(N // block_N, M, threads=threads) as (bx, by):
            # each thread's cp.async slots: weights [slot][d][t] uint4, then scale pairs [slot][d][t] u32
            ring = T.alloc_shared(((prefetch + 1) * depth * 5 * threads,), "uint32")
            part = T.alloc_shared((rows, threads), "float32")  # [r, t]: thread t's partial sum of its row r
            red = T.alloc_fragment((block_N, 32), "float32")
            row = T.alloc_fragment((block_N,), "float32")
            T.import_source(src)
            # one call per thread (slot t = 2 p + h: the default layout gives each thread one slot; the
            # function reads its warp and lane from t, so any slot order is correct, the identity coalesced)
            for p, h in T.Parallel(threads // 2, 2):
                T.call_extern(name, T.address_of(W[bx * block_N, 0]), T.address_of(A[by, 0]),
                              T.address_of(Scales[bx * block_N, 0]), T.address_of(ring[0]),
                              T.address_of(part[0, 0]), 2 * p + h, dtype="handle")
            for n, l in T.Parallel(block_N, 32):  # row n = warp * rows + r: lane l's sum is part[r, 32 warp + l]
                red[n, l] = part[n % rows, (n // rows) * 32 + l]
            T.reduce_sum(red, row, dim=1)
            for n in T.Parallel(block_N):
                C[by, bx * block_N + n] = T.cast(row[n], out_dtype)

    return main


def w4a16_wgmma(M, N, K, group_size=128, dtype="float16", out_dtype=None, block_M=16, block_N=64, num_stages=4,
                threads=None, magic_round=False, split_k=1, workspace=False, cast_block=(16, 128), permute_k=False,
                scale_weights=False, packed_k=False, pingpong=False):
    """W4A16 decode with the dequantized weights in REGISTERS as the wgmma A operand: the same signature
    and packing as quant_matmul(bits=4) / w4a16_mma (A [M, K], W uint8 [N, K/2] two signed nibbles per
    byte, low first, Scales [N, K / group_size], C [M, N]), one scale group per k-step.

    Why: w4a16_mma dequantizes each k-step into an fp16 tile in shared memory that its gemm reads back
    (ncu at M = 16 on the H200: shared memory 70 % busy, the limiter, and its size allows 3 blocks per
    SM). Here A and B swap: the block computes C^T tiles [block_N, block_M] = W_f [block_N, group] @
    A_s[block_M, group]^T, W_f an fp16 register fragment written by a T.Parallel and read by the gemm as
    wgmma's register operand A (m64nNk16 with N = block_M: 8 or 16 at decode). The lowering gives such
    a fragment the wgmma A register layout (a thread holds pairs of adjacent k of its rows), so each
    thread decodes exactly its own weights, one byte per pair: one int -> float conversion per byte
    (b ^ 0x08 read as int8 = q_lo + 16 q_hi + 8, split exactly as in w4a16_gemv: floor, or with
    magic_round the rounding constant), never a shared-memory store of a dequantized weight. The decode
    writes a float32 fragment W_q, copied to W_f for the gemm: on sm_90a the lowering drops the copy and
    packs W_q's slots into the wgmma's registers (ForwardCastIntoWgmmaA; the values are exact small
    integers, so no fp16 round trip per weight). Per group
    the accumulator C^T_k is scaled by the group's scales (per row n of C^T, staged once per block) into
    a float32 accumulator; C is stored transposed back at the end. The weight bytes and A go through a
    num_stages pipeline (TMA on sm_90a). Off sm_90a the same program runs (the gemm as mma.sync or on the
    CPU, W_f then through shared memory), only slower.

    Parameters: block_N output channels per block, 64 per warpgroup (threads = 2 * block_N by default;
    128 threads at 64); block_M rows of A per block (a multiple of 8 up to 256; 16 for M <= 16, 8 for
    M <= 8); group_size a multiple of 16 dividing K. split_k S > 1: as w4a16_mma's (grid z = S, block z
    takes K / group_size / S groups and adds its float32 tile into a float32 workspace with atomics; a
    second kernel rounds it into C; workspace=True: the caller's zeroed 5th argument Wk [M, N], written
    back to zero). M may be dynamic.
    permute_k: the thread's weights of a row are bytes t, t + 4, ... of the 64-byte row (the A fragment's
    column pairs): single-byte shared loads with 4-way bank conflicts. With permute_k the reduction order
    within each group is permuted (position 16 s + 8 h + 2 t + e of the fragment takes weight t * group / 4
    + 4 s + 2 h + e, and A's tile is permuted alike by a shared-to-shared copy per group), so a thread's
    weights of a row are one run of group / 8 bytes: one 16-byte load per row at group 128. Needs
    group_size a multiple of 32.

    scale_weights (prefill, M ~ 128; issue #11): the group scale is applied to the decoded weight, not to
    the accumulator: W_q = q * s in float32 (exact: a 4-bit integer times an fp16/bf16 scale), which the
    wgmma's pack rounds once to the activation dtype -- exactly the weight quant_matmul and the bench's
    reference dequantize (dtype(q * s)). So there is ONE accumulator, the gemm accumulates into it across
    the groups, and the per-group wait, clear and block_N x block_M rescale of C^T_k go (at block_M = 128:
    64 FMAs and 64 registers per thread and group). Why not the other way at prefill: at M = 128 the
    rescale is as many FMAs as the decode of the group, and with it every group ends in a wgmma drain
    before the next group's product can accumulate. Costs 1 FMUL per weight (the scales are read per row
    from the block's staged copy). Results match quant_matmul_ref with round_to (weights rounded to dtype).
    On sm_90a the k-loop (TMA copies, then the decode and the register-A wgmma, which write no shared
    memory) is warp-specialized like FlashAttention's (WarpSpecializeSyncLoop): a producer warpgroup issues
    the boxes, the consumer warpgroups wait on full barriers and release each stage after their decode and
    wgmma with no block barrier in the loop, so with two consumer warpgroups (block_N = 128) one's decode runs
    under the other's wgmma. pingpong=True (T.warpgroup_pingpong(); block_N = 128, i.e. two consumer
    warpgroups): the two take turns issuing their group's wgmmas on two named barriers (compiler/lowering/
    gpu/src/pingpong.cc, FlashAttention-3's warp scheduler barriers), so that order is enforced instead of
    left to drift: one decodes while the other's wgmmas hold the tensor cores.
    packed_k: W is not quant_matmul's packing but pack_w4a16_wgmma(W, group_size)'s (each group's 64-byte
    row permuted so a lane's weights of a row are one 16-byte run, the reduction order unchanged): the
    16-byte loads of permute_k without its shared-to-shared copy of A's tile per group (block_M x group
    elements: at block_M = 128 that copy costs as much as the decode). Needs group_size a multiple of 32;
    not with permute_k."""
    if K % group_size or group_size % 16:
        raise ValueError(f"w4a16_wgmma: K={K} must be a multiple of group_size={group_size}, itself of 16")
    if block_N % 64 or block_N <= 0:
        raise ValueError(f"w4a16_wgmma: block_N={block_N} must be a positive multiple of 64 (64 rows of the wgmma "
                         f"A operand per warpgroup)")
    threads = 2 * block_N if threads is None else threads
    if threads != 2 * block_N:
        raise ValueError(f"w4a16_wgmma: threads={threads} must be 2 * block_N = {2 * block_N} (one warpgroup per 64 "
                         f"weight rows)")
    if block_M % 8 or not 8 <= block_M <= 256:
        raise ValueError(f"w4a16_wgmma: block_M={block_M} must be a multiple of 8 in [8, 256] (the wgmma N)")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"w4a16_wgmma: dtype must be float16 or bfloat16 (a wgmma operand), got {dtype}")
    if not isinstance(split_k, int) or split_k < 1 or (K // group_size) % split_k:
        raise ValueError(f"w4a16_wgmma: split_k={split_k!r} must be a positive int dividing K / group_size = "
                         f"{K // group_size}")
    if permute_k and group_size % 32:
        raise ValueError(f"w4a16_wgmma: permute_k needs group_size a multiple of 32, got {group_size}")
    if pingpong and block_N != 128:
        raise ValueError(f"w4a16_wgmma: pingpong needs block_N=128 (two consumer warpgroups take turns), got "
                         f"block_N={block_N}")
    if packed_k and (group_size % 32 or permute_k):
        raise ValueError(f"w4a16_wgmma: packed_k needs group_size a multiple of 32 and no permute_k, got "
                         f"group_size={group_size}, permute_k={permute_k}")
    out_dtype = out_dtype or dtype
    M = _dim(M)
    block_K = group_size
    nbytes = block_K // 2
    groups = K // group_size // split_k  # the groups of one block (of its split)

    def perm(j):
        # permute_k: position j = 16 s + 8 h + 2 t + e of the wgmma A fragment (k-step s, lane t = l % 4)
        # takes weight (and activation) t * group / 4 + 4 s + 2 h + e of the group, so lane t's weights of a
        # row are one run of group / 8 bytes (16 at group 128: one 16-byte shared load)
        return ((j >> 1) & 3) * (block_K // 4) + (j >> 4) * 4 + ((j >> 3) & 1) * 2 + (j & 1)

    def byte(j):  # perm(j) >> 1, written so that nvcc sees one 16-byte run per lane and row
        return ((j >> 1) & 3) * (block_K // 8) + (j >> 4) * 2 + ((j >> 3) & 1)

    @T.macro
    def tile(A, W, Scales, Out, bx, by, g0):
        # C^T[bx * block_N + n, by * block_M + m] over groups [g0, g0 + groups): stored into C (split_k 1)
        # or added into the float32 workspace (split_k > 1)
        if pingpong:
            T.warpgroup_pingpong()
        A_s = T.alloc_shared((block_M, block_K), dtype)
        if permute_k:
            A_raw = T.alloc_shared((block_M, block_K), dtype)
        W_s = T.alloc_shared((block_N, nbytes), "uint8")
        S_all = T.alloc_shared((block_N, groups), dtype)
        W_q = T.alloc_fragment((block_N, block_K), "float32")
        W_f = T.alloc_fragment((block_N, block_K), dtype)
        if not scale_weights:
            Ct_k = T.alloc_fragment((block_N, block_M), "float32")
        Ct = T.alloc_fragment((block_N, block_M), "float32")
        T.copy(Scales[bx * block_N, g0], S_all)
        T.clear(Ct)
        for k in T.Pipelined(groups, num_stages=num_stages):
            if permute_k:
                T.copy(A[by * block_M, (g0 + k) * block_K], A_raw)
            else:
                T.copy(A[by * block_M, (g0 + k) * block_K], A_s)
            T.copy(W[bx * block_N, (g0 + k) * nbytes], W_s)
            if permute_k:
                for m, j in T.Parallel(block_M, block_K):
                    A_s[m, j] = A_raw[m, perm(j)]
            for n, j in T.Parallel(block_N, block_K):
                # b ^ 0x08 read as int8 = q_lo + 16 q_hi + 8 exactly (w4a16_gemv). Both weights of a byte are
                # the same thread's (the wgmma A register layout holds pairs of adjacent k): j >> 1 and j & 1
                # (not j // 2, j % 2: floor division of a signed int) let nvcc see that the pair's byte, its
                # conversion and its split are one, and which half each weight takes.
                b = T.cast(T.cast(W_s[n, byte(j) if (permute_k or packed_k) else j >> 1] ^ 0x08, "int8"), "float32")
                if magic_round:
                    hi = ((b * 0.0625 + 7.53125) + 12582912.0) - 12582920.0
                else:
                    hi = T.floor(b * 0.0625)
                if scale_weights:
                    # q * s is exact in float32 (4-bit times 11- or 8-bit significands); the pack into the
                    # wgmma's registers rounds it once: dtype(q * s), the dequantized weight itself. Written as
                    # two FMAs per low nibble, each exact (b s - 8 s = (q_lo + 16 q_hi) s: 8 + 11 bits; then
                    # - 16 q_hi s = q_lo s), instead of (b - 16 hi - 8) * s: 2 float ops per byte fewer
                    s = T.cast(S_all[n, k], "float32")
                    hs = hi * s
                    W_q[n, j] = T.if_then_else((j & 1) == 0, (b * s + s * -8.0) + hs * -16.0, hs)
                else:
                    W_q[n, j] = T.if_then_else((j & 1) == 0, (b - hi * 16.0) - 8.0, hi)
            # slot for slot (W_q takes W_f's layout); on sm_90a ForwardCastIntoWgmmaA drops this copy and the
            # wgmma packs W_q's float32 slots -- no f16 round trip per weight
            T.copy(W_q, W_f)
            if scale_weights:
                T.gemm(W_f, A_s, Ct, transpose_B=True)  # one accumulator over all groups
            else:
                T.gemm(W_f, A_s, Ct_k, transpose_B=True, clear_accum=True)
                for n, m in T.Parallel(block_N, block_M):
                    Ct[n, m] += Ct_k[n, m] * T.cast(S_all[n, k], "float32")
        if split_k == 1:
            for n, m in T.Parallel(block_N, block_M):
                Out[by * block_M + m, bx * block_N + n] = T.cast(Ct[n, m], out_dtype)
        else:
            for n, m in T.Parallel(block_N, block_M):
                T.atomic_add(Out[by * block_M + m, bx * block_N + n], Ct[n, m])

    grid = (T.ceildiv(N, block_N), T.ceildiv(M, block_M))
    if split_k == 1:
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), W: T.Tensor((N, K // 2), "uint8"),
                 Scales: T.Tensor((N, K // group_size), dtype), C: T.Tensor((M, N), out_dtype)):
            with T.Kernel(*grid, threads=threads) as (bx, by):
                tile(A, W, Scales, C, bx, by, 0)
        return main
    return _split_k_main(tile, M, N, K, group_size, dtype, out_dtype, grid, threads, split_k, groups, workspace,
                         cast_block)


def pack_w4a16_wgmma(W, group_size=128):
    """quant_matmul's int4 packing W [N, K/2] (uint8, two signed nibbles per byte, low first) -> the packing
    w4a16_wgmma(packed_k=True) reads: within each group's group_size / 2 bytes of a row, the byte holding
    weights (j, j + 1) (j even) moves to position byte(j) = ((j >> 1) & 3) * group / 8 + (j >> 4) * 2 +
    ((j >> 3) & 1), so lane t of the wgmma A fragment (which holds column pairs 2 t + 8 h + 16 s of each
    16-wide k-step s) finds its weights of a row in bytes [t * group / 8, (t + 1) * group / 8): one 16-byte
    shared load at group 128. A byte permutation (nibbles untouched), done once offline like
    pack_w4a16_m16; numpy uint8 in, numpy uint8 out."""
    W = np.asarray(W)
    if W.dtype != np.uint8 or W.ndim != 2:
        raise ValueError(f"pack_w4a16_wgmma: W must be a 2-D uint8 array [N, K/2], got {W.dtype} {W.shape}")
    if group_size % 32 or W.shape[1] % (group_size // 2):
        raise ValueError(f"pack_w4a16_wgmma: group_size={group_size} must be a multiple of 32 whose half divides "
                         f"W's {W.shape[1]} bytes per row")
    nb = group_size // 2
    j = np.arange(0, group_size, 2)
    dst = ((j >> 1) & 3) * (group_size // 8) + (j >> 4) * 2 + ((j >> 3) & 1)
    assert sorted(dst.tolist()) == list(range(nb)), "byte(j) is not a permutation"
    out = np.empty_like(W)
    rows = W.reshape(W.shape[0], -1, nb)
    out.reshape(W.shape[0], -1, nb)[:, :, dst] = rows  # byte j / 2 of the group -> position byte(j)
    return out


def quantize_ref(w, bits, group_size):
    """float weights [N, K] -> (packed W, scales, dequantized float64 weights), symmetric."""
    N, K = w.shape
    qmax = 7 if bits == 4 else 127
    g = K if group_size is None else group_size
    wg = w.reshape(N, K // g, g)
    scales = np.maximum(np.abs(wg).max(axis=2), 1e-8) / qmax
    q = np.clip(np.round(wg / scales[:, :, None]), -qmax - 1, qmax).astype(np.int32).reshape(N, K)
    if bits == 4:
        u = (q & 0xF).astype(np.uint8)
        packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    else:
        packed = q.astype(np.int8)
    return packed, (scales[:, 0] if group_size is None else scales), q


def quant_matmul_ref(A, q, scales, group_size, round_to=None):
    """A [M, K] float64, q [N, K] integer values, scales as stored (float64). round_to: a
    function rounding the dequantized weights to the activation dtype, as the kernel does."""
    N, K = q.shape
    s = np.repeat(scales[:, None] if group_size is None else scales, K if group_size is None else group_size, axis=1)
    w = q * s
    if round_to is not None:
        w = round_to(w)
    return np.asarray(A, np.float64) @ w.T


def quant_matmul_case(kw, rng, round_weights=True):
    from kernels._util import Case, as_f64, empty, rand, size, to_bf16_bits
    M, N, K = size(kw, "M"), kw["N"], kw["K"]
    if isinstance(kw.get("M"), str) and kw.get("block_M", 16) <= 16:
        M = 9  # decode: M in 1..16
    bits, group = kw.get("bits", 4), kw.get("group_size", 128)
    dtype = kw.get("dtype", "float16")
    out_dtype = kw.get("out_dtype") or dtype
    a, a64 = rand(rng, (M, K), dtype)
    packed, scales, q = quantize_ref(rng.standard_normal((N, K)), bits, group)
    s = to_bf16_bits(scales) if dtype == "bfloat16" else scales.astype(dtype)
    s64 = as_f64(s, dtype)
    if dtype == "bfloat16":
        def round_to(w):
            return as_f64(to_bf16_bits(w), dtype)
    else:
        def round_to(w):
            return w.astype(dtype).astype(np.float64)
    ref = quant_matmul_ref(a64, q, s64, group, round_to if round_weights else None)
    return Case([a, packed, s, empty((M, N), out_dtype)], {3: ref}, {3: out_dtype}, flops=2 * M * N * K)


def w4a16_gemv_case(kw, rng):
    """w4a16_gemv and w4a16_mma do not round the dequantized weights to the activation dtype."""
    return quant_matmul_case(dict(kw, bits=4), rng, round_weights=False)


CASES = {"quant_matmul": quant_matmul_case, "w4a16_gemv": w4a16_gemv_case, "w4a16_mma": w4a16_gemv_case,
         "w4a16_wgmma": w4a16_gemv_case}
