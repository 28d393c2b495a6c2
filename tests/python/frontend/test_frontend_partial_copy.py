"""T.copy of part of a fragment (upstream's GQA decode: T.copy(acc_o[:valid_block_H, :], O_shared))
is a T.Parallel over the whole fragment, predicated on the part, so that the GPU layout inference keeps
the fragment in registers; the elements and values are those of the copy, checked on the CPU."""

import numpy as np

import tilelang
import tilelang.language as T


def decode_like(H, valid, D, N, dtype="float16"):
    # block_H rows computed (a gemm needs them), only `valid` of them are real heads
    @T.prim_func
    def main(Q: T.Tensor((valid, D), dtype), K: T.Tensor((N, D), dtype), O: T.Tensor((valid, N), dtype),
             P: T.Tensor((valid, 8), "float32")):
        with T.Kernel(1, threads=128) as bx:
            q_s = T.alloc_shared((H, D), dtype)
            k_s = T.alloc_shared((N, D), dtype)
            o_s = T.alloc_shared((valid, N), dtype)
            acc = T.alloc_fragment((H, N), "float32")
            part = T.alloc_fragment((H, 8), "float32")
            T.copy(Q[0:H, :], q_s)  # rows past `valid` read 0
            T.copy(K, k_s)
            T.clear(acc)
            T.gemm(q_s, k_s, acc, transpose_B=True)
            T.copy(acc[:valid, :], o_s)                   # fragment part -> shared
            T.copy(o_s, O)
            T.clear(part)
            T.copy(P[0:valid, 0:4], part[2:2 + valid, 4:8])  # global -> fragment part, offset
            for i, j in T.Parallel(H, 8):
                part[i, j] = part[i, j] * 2.0
            T.copy(part[2:2 + valid, 4:8], P[0:valid, 4:8])  # fragment part (offset) -> global
    return main


def test_partial_fragment_copies_match_numpy():
    rng = np.random.default_rng(31)
    H, valid, D, N = 16, 4, 32, 32
    kernel = tilelang.compile(decode_like(H, valid, D, N), target="cpu")
    q = rng.standard_normal((valid, D)).astype(np.float16)
    k = rng.standard_normal((N, D)).astype(np.float16)
    o = np.zeros((valid, N), np.float16)
    p = rng.standard_normal((valid, 8)).astype(np.float32)
    p0 = p.copy()
    kernel(q, k, o, p)
    np.testing.assert_allclose(o, q.astype(np.float64) @ k.astype(np.float64).T, rtol=2e-3, atol=2e-2)
    np.testing.assert_array_equal(p[:, :4], p0[:, :4])
    np.testing.assert_array_equal(p[:, 4:], p0[:, :4] * 2)


def test_partial_fragment_copy_is_a_predicated_parallel_loop():
    text = decode_like(16, 4, 32, 32).script()
    assert "copy acc" not in text and "copy part" not in text
    assert "parallel (i, j) in (16, 32)" in text and "if i < 4" in text
    assert "if i_1 >= 2 && i_1 < 6 && (j_1 >= 4 && j_1 < 8)" in text  # the offset part of `part`


def test_the_gemm_accumulator_stays_a_register_fragment_on_cuda():
    # before: "gemm: the accumulator must be a whole fragment in registers (it is not)", because the
    # partial copy made the GPU layout inference keep `acc` in shared memory
    from test_frontend_cuda import _cuda_toolkit_missing
    import pytest
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(f"CUDA compile path: {reason}")
    kernel = tilelang.compile(decode_like(16, 4, 32, 32), target="sm_90a")
    assert "acc" in kernel.get_kernel_source()
