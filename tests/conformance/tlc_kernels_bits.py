"""Conformance tile programs for what the frontend writes with Tile IR's integer and float32
expressions (issue #12, upstream's cast and dequantize examples): fp8 buffers, T.reinterpret /
tvm.tirx dequantization, and a partial copy out of a fragment."""

import tilelang
import tilelang.language as T
from tvm import tirx  # the frontend's stand-in (no TVM installed), as upstream's examples import it


def fp8_roundtrip(n, dtype):
    """float32 -> fp8 (stores encode) -> bytes (fp8 copy) -> float32 (loads decode)."""
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Q: T.Tensor((n,), dtype), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            q = T.alloc_fragment((128,), dtype)
            for i in T.Parallel(128):
                q[i] = X[bx * 128 + i]
            T.copy(q, Q[bx * 128])
            for i in T.Parallel(128):
                Y[bx * 128 + i] = Q[bx * 128 + i] * 1.0
    return main


def per_token_cast_to_fp8(M, N, blk_m, group=128):
    """upstream's example_per_token_cast_to_fp8 as a prim_func."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), X_fp8: T.Tensor((M, N), T.float8_e4m3fn),
             X_amax: T.Tensor((M, T.ceildiv(N, group)), "float32")):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, group), threads=128) as (bx, by):
            y = T.alloc_fragment((blk_m, group), "float32")
            amax = T.alloc_fragment((blk_m,), "float32")
            s = T.alloc_fragment((blk_m,), "float32")
            yq = T.alloc_fragment((blk_m, group), "float32")
            y8 = T.alloc_fragment((blk_m, group), T.float8_e4m3fn)
            T.copy(X[bx * blk_m:(bx + 1) * blk_m, by * group:(by + 1) * group], y)
            T.reduce_absmax(y, amax, dim=1)
            for i in T.Parallel(blk_m):
                amax[i] = T.max(amax[i], 1e-4)
                s[i] = amax[i] / 448.0
            for i, j in T.Parallel(blk_m, group):
                yq[i, j] = T.clamp(y[i, j] / s[i], -448.0, 448.0)
            T.copy(yq, y8)
            for i in T.Parallel(blk_m):
                X_amax[bx * blk_m + i, by] = s[i]
            T.copy(y8, X_fp8[bx * blk_m:(bx + 1) * blk_m, by * group:(by + 1) * group])
    return main


def u16_to_f16(n):
    @T.prim_func
    def main(X: T.Tensor((n,), "uint16"), Y: T.Tensor((n,), "float16")):
        with T.Kernel(T.ceildiv(n, 256), threads=128) as bx:
            for i in T.Parallel(256):
                Y[bx * 256 + i] = T.reinterpret("float16", X[bx * 256 + i])
    return main


def _u8_to_f4_to_f16(val, pos):  # upstream's example_dequant_gemm_fp4_hopper._tir_u8_to_f4_to_f16
    assert val.dtype == T.uint8  # a loaded byte keeps its dtype (the shifts below widen it to u16)
    f4 = (val >> (pos.astype(T.uint16) * tirx.const(4, T.uint16))) & tirx.const(15, T.uint16)
    s = f4 >> tirx.const(3, T.uint16)
    e_f16 = ((f4 & tirx.const(6, T.uint16)) >> tirx.const(1, T.uint16)) + tirx.const(14, T.uint16)
    m_f16 = f4 & tirx.const(1, T.uint16)
    return tirx.reinterpret(T.float16, ((e_f16 | (s << tirx.const(5, T.uint16))) << tirx.const(10, T.uint16)
                                        | m_f16 << tirx.const(9, T.uint16)).astype(T.uint16))


def _u8_to_i4_to_i8(val, pos):
    # upstream's example_dequant_gemm_w4a8._tir_u8_to_i4_to_i8
    i4 = (val >> (pos.astype(T.uint8) * tirx.const(4, T.uint8))) & tirx.const(15, T.uint8)
    return tirx.reinterpret(T.int8, i4 << tirx.const(4, T.uint8)) >> tirx.const(4, T.int8)


def dequant_gemm(M, N, K, kind, bm=32, bn=32, bk=64):
    """Ct = dequant(B) @ A^T with B packed two 4-bit values per byte (fp4 -> f16 or int4 -> int8)."""
    convert, in_dtype, acc = ((_u8_to_f4_to_f16, "float16", "float32") if kind == "fp4"
                              else (_u8_to_i4_to_i8, "int8", "int32"))

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K // 2), "uint8"), Ct: T.Tensor((N, M), acc)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), in_dtype)
            B_s = T.alloc_shared((bn, bk // 2), "uint8")
            B_l = T.alloc_fragment((bn, bk // 2), "uint8")
            B_dq = T.alloc_fragment((bn, bk), in_dtype)
            C_l = T.alloc_fragment((bn, bm), acc)
            T.annotate_layout({B_s: tilelang.layout.make_swizzled_layout(B_s)})
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk // 2], B_s)
                T.copy(B_s, B_l)
                for i, j in T.Parallel(bn, bk):
                    B_dq[i, j] = convert(B_l[i, j // 2], j % 2)
                T.gemm(B_dq, A_s, C_l, transpose_B=True)
            T.copy(C_l, Ct[bx * bn, by * bm])
    return main


def partial_head_gemm(H, valid, D, N):
    """upstream's GQA decode shape: an H-row gemm of which only `valid` rows are copied out
    (T.copy(acc[:valid, :], ...)); the accumulator must stay a register fragment on GPUs."""
    @T.prim_func
    def main(Q: T.Tensor((valid, D), "float16"), K: T.Tensor((N, D), "float16"), O: T.Tensor((valid, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            q_s = T.alloc_shared((H, D), "float16")
            k_s = T.alloc_shared((N, D), "float16")
            o_s = T.alloc_shared((valid, N), "float16")
            acc = T.alloc_fragment((H, N), "float32")
            T.copy(Q[0:H, :], q_s)
            T.copy(K, k_s)
            T.clear(acc)
            T.gemm(q_s, k_s, acc, transpose_B=True)
            T.copy(acc[:valid, :], o_s)
            T.copy(o_s, O)
    return main


GOLDEN_CASES = [
    ("bits_fp8_roundtrip_e4m3fn", fp8_roundtrip, dict(n=256, dtype="float8_e4m3fn")),
    ("bits_fp8_roundtrip_e5m2", fp8_roundtrip, dict(n=256, dtype="float8_e5m2")),
    ("bits_per_token_cast_to_fp8", per_token_cast_to_fp8, dict(M=24, N=256, blk_m=8)),
    ("bits_u16_to_f16", u16_to_f16, dict(n=512)),
    ("bits_dequant_gemm_fp4", dequant_gemm, dict(M=64, N=96, K=128, kind="fp4")),
    ("bits_dequant_gemm_int4", dequant_gemm, dict(M=64, N=96, K=128, kind="int4")),
    ("bits_partial_head_gemm", partial_head_gemm, dict(H=16, valid=4, D=32, N=32)),
]
