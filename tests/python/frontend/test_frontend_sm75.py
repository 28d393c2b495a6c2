"""An explicit Turing target ({"kind": "cuda", "arch": "sm_75"}, as upstream's
testing/python/kernel/test_tilelang_kernel_sm75_gemm_fma.py compiles): f16 x f16 -> f32 and
int8 -> int32 gemms use Turing's mma.sync atoms, printed as upstream's tl::mma_sync<...> template
form; bf16, f32 and f64 stay SIMT FMA (no "tl::mma_sync" in the source). The numerics of the sm_75
lowering are checked in the SIMT interpreter (compiler.gpu Sm75.*); on a CUDA device the kernel also
runs here (an sm_90 device loads the bundle's PTX of the Turing kernel) against float64."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T

SM75 = {"kind": "cuda", "arch": "sm_75"}
F16_ATOM = "tl::mma_sync<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 16, 8, 8, false, true>"
I8_ATOM = "tl::mma_sync<tl::DataType::kInt8, tl::DataType::kInt8, tl::DataType::kInt32, 8, 8, 16, false, true>"


def ss_gemm(M, N, K, in_dtype, accum_dtype, threads=128):  # upstream's _make_ss_gemm
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((K, N), in_dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(1, threads=threads):
            A_shared = T.alloc_shared((M, K), in_dtype)
            B_shared = T.alloc_shared((K, N), in_dtype)
            C_local = T.alloc_fragment((M, N), accum_dtype)
            T.copy(A, A_shared)
            T.copy(B, B_shared)
            T.clear(C_local)
            T.gemm(A_shared, B_shared, C_local, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_local, C)

    return main


def nt_gemm(M, N, K, bm, bn, bk, in_dtype, out_dtype, accum_dtype):  # upstream's gemm_sm75 kernel
    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), in_dtype)
            B_shared = T.alloc_shared((bn, bk), in_dtype)
            C_local = T.alloc_fragment((bm, bn), accum_dtype)
            T.clear(C_local)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, ko * bk], A_shared)
                T.copy(B[bx * bn, ko * bk], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * bm, bx * bn])

    return main


@pytest.fixture(scope="module", autouse=True)
def toolkit():
    from test_frontend_cuda import _cuda_toolkit_missing
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(f"CUDA compile path: {reason}")


def test_f16_gemm_uses_turing_atoms():
    src = tilelang.compile(ss_gemm(64, 64, 32, "float16", "float32"), target=SM75, out_idx=[2]).get_kernel_source()
    body = src[src.index("__global__"):]  # the prelude declares every atom; the kernel calls one
    assert F16_ATOM in body
    assert "16, 8, 16, false, true>" not in body  # no sm_80 m16n8k16


def test_int8_nt_gemm_uses_m8n8k16():
    kernel = tilelang.compile(nt_gemm(128, 128, 128, 64, 64, 64, "int8", "int32", "int32"), target=SM75, out_idx=[2])
    assert I8_ATOM in kernel.get_kernel_source()


@pytest.mark.parametrize("dtype,acc", [("bfloat16", "float32"), ("float32", "float32"), ("float64", "float64")])
def test_other_dtypes_stay_simt(dtype, acc):
    src = tilelang.compile(ss_gemm(64, 64, 32, dtype, acc), target=SM75, out_idx=[2]).get_kernel_source()
    assert "tl::mma_sync" not in src


def test_sm80_keeps_m16n8k16():
    src = tilelang.compile(ss_gemm(64, 64, 32, "float16", "float32"), target="sm_80", out_idx=[2]).get_kernel_source()
    body = src[src.index("__global__"):]
    assert "tl::mma_sync<tl::DataType::kFloat16, tl::DataType::kFloat16, tl::DataType::kFloat32, 16, 8, 16, false, true>" in body
    assert F16_ATOM not in body


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_turing_kernel_runs_on_a_cuda_device(dtype):
    """On a CUDA device (the H200: the bundle's compute_80 PTX of the Turing kernel, JIT-compiled)
    against float64 / exact integers. Skips without torch or a device."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    acc = "int32" if dtype == "int8" else "float32"
    kernel = tilelang.compile(nt_gemm(192, 128, 160, 64, 64, 32, dtype, acc, acc), target=SM75, out_idx=[2])
    g = torch.Generator().manual_seed(0)
    if dtype == "int8":
        a = torch.randint(-128, 128, (192, 160), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (128, 160), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(192, 160, generator=g).half()
        b = torch.randn(128, 160, generator=g).half()
    c = kernel(a.cuda(), b.cuda()).cpu()
    want = a.double() @ b.double().T
    if dtype == "int8":
        assert torch.equal(c.long(), want.long())
    else:
        torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-4)
