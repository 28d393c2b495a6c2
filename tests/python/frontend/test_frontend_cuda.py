"""tilelang.compile(..., target="cuda") without a GPU: bundles with CUDA variants,
CUDA C++ source, target parsing, "auto", UNIMPLEMENTED features as clear errors,
and the bf16 staging wrapper (exercised on the CPU device).

The compile tests need the CUDA toolkit here (NVRTC or nvcc, where tl-pack's
CudaToolchain looks: /usr/local/cuda/{lib64,bin}, /usr/local/cuda-13.0/...);
they skip with the reason when it is missing. Running on a GPU is the
conformance suite's job (`-k cuda`, tools/device/gpu_check.sh).
"""

import ctypes
import json
import os
import subprocess

import pytest

import tilelang
import tilelang.language as T
from tilelang import compiler, toolchain

CUDA_ARCH_VARIANTS = {"cuda.sm_80", "cuda.sm_89", "cuda.sm_90a", "cuda.compute_80"}


def _cuda_toolkit_missing():
    try:
        tl_pack = toolchain.tl_pack_path()
    except tilelang.TileLangError as e:
        return str(e)
    if "compile" not in toolchain.tl_pack_verbs(tl_pack):
        return f"{tl_pack} has no `compile` verb"
    libs = ["/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13"]
    tools = ["/usr/local/cuda/bin/nvcc", "/usr/local/cuda-13.0/bin/nvcc"]
    if not any(os.path.exists(p) for p in libs + tools):
        return "no CUDA toolkit here (no libnvrtc.so.13 or nvcc under /usr/local/cuda or /usr/local/cuda-13.0)"
    return None


needs_toolkit = pytest.mark.skipif(_cuda_toolkit_missing() is not None,
                                   reason=f"CUDA compile path: {_cuda_toolkit_missing()}")


def _runtime():
    return pytest.importorskip("tilelang_runtime", reason="runtime binding tilelang_runtime not importable")


def add_one(n=200, block=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] + 1.0
    return main


def scale_named(n=96):
    @T.prim_func
    def scale2(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < n:
                    B[bx * 32 + i] = A[bx * 32 + i] * 2.0
    return scale2


def _variant_ids(path, name):
    tlr = _runtime()
    rt = tlr.Runtime(backends=["cpu"])
    return {v["id"]: v for v in rt.open_bundle(path).kernel(name).variants}


@pytest.fixture(scope="module")
def cuda_kernel():
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(reason)
    return tilelang.compile(add_one(), out_idx=[1], target="cuda")


# -- target parsing (no toolkit needed)

@pytest.mark.parametrize("spec,want", [
    ("cpu", ("cpu", None)), ("cuda", ("cuda", "cuda")), ("sm_90a", ("cuda", "sm_90a")),
    ("sm_80,sm_90a", ("cuda", "sm_80,sm_90a")), ("cuda -arch=sm_89", ("cuda", "sm_89")),
    ({"kind": "cuda", "arch": "sm_90a"}, ("cuda", "sm_90a")), ({"kind": "cuda"}, ("cuda", "cuda")),
])
def test_target_specs(spec, want):
    assert compiler.resolve_target_spec(spec) == want


def test_bad_targets():
    with pytest.raises(tilelang.TileLangError, match="unknown target"):
        compiler.resolve_target_spec("opencl")
    with pytest.raises(tilelang.TileLangError, match="bad CUDA arch"):
        compiler.resolve_target_spec({"kind": "cuda", "arch": "gfx90a"})


def test_auto_picks_cuda_only_with_a_cuda_device():
    _runtime()
    status = compiler.cuda_device_status()
    assert compiler.resolve_target("auto") == ("cuda" if status is None else "cpu")
    if status is not None:
        assert "UNAVAILABLE" in status or "device" in status


def test_reserved_names_are_renamed_for_cuda_only():
    assert compiler.kernel_name_for("main", "cuda") == "main_kernel"
    assert compiler.kernel_name_for("main", "cpu") == "main"
    assert compiler.kernel_name_for("gemm", "cuda") == "gemm"


# -- compiling for CUDA (toolkit needed, no GPU)

@needs_toolkit
def test_cuda_bundle_has_cuda_variants(cuda_kernel, tmp_path):
    assert cuda_kernel.target == "cuda"
    assert cuda_kernel.kernel_name == "main_kernel"  # `main` cannot be a __global__ function
    path = cuda_kernel.export_bundle(str(tmp_path / "k.tlb"))
    ids = _variant_ids(path, "main_kernel")
    assert CUDA_ARCH_VARIANTS <= set(ids), ids
    assert ids["cuda.compute_80"]["jit"] or ids["cuda.compute_80"]["code_kind"] == "ptx"
    for i, v in ids.items():
        if i.startswith("cuda."):
            assert v["backend"] == "cuda"
            assert v["block"][0] == 128, v
    # and what tl-pack sees
    out = subprocess.run([toolchain.tl_pack_path(), "inspect", "--json", path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = json.dumps(json.loads(out.stdout))
    for arch in ("sm_80", "sm_89", "sm_90a"):
        assert arch in text
    ver = subprocess.run([toolchain.tl_pack_path(), "verify", path], capture_output=True, text=True)
    assert ver.returncode == 0, ver.stderr + ver.stdout


@needs_toolkit
def test_cuda_kernel_source_is_cuda(cuda_kernel):
    src = cuda_kernel.get_kernel_source()
    assert "__global__" in src
    assert "main_kernel(" in src
    assert cuda_kernel.get_tile_ir().splitlines()[2].startswith("func @main_kernel(")


@needs_toolkit
def test_cuda_arch_list_target(tmp_path):
    k = tilelang.compile(scale_named(), out_idx=[1], target="sm_90a")
    assert (k.target, k.kernel_name) == ("cuda", "scale2")
    ids = set(_variant_ids(k.export_bundle(str(tmp_path / "s.tlb")), "scale2"))
    assert "cuda.sm_90a" in ids and "cuda.sm_80" not in ids, ids
    assert not any(i.startswith("cpu.") for i in ids), ids  # --target sm_90a builds no CPU variants


@needs_toolkit
def test_dynamic_shapes_on_cuda_compile_with_symbol_slots(tmp_path):
    """Shape symbols reach CUDA kernels as parameters the runtime fills (ParamSlot.symbol)."""
    M = T.dynamic("M")

    @T.prim_func
    def dyn(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, 64)) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < M:
                    B[bx * 64 + i] = A[bx * 64 + i]
    k = tilelang.compile(dyn, out_idx=[1], target="cuda")
    path = k.export_bundle(str(tmp_path / "dyn.tlb"))
    ids = set(_variant_ids(path, "dyn"))
    assert {"cuda.sm_80", "cuda.sm_89", "cuda.sm_90a", "cuda.compute_80"} <= ids, ids
    assert ", int M)" in k.get_kernel_source()  # the symbol is the kernel's last parameter
    tlr = _runtime()
    kern = tlr.Runtime(backends=["cpu"]).open_bundle(path).kernel("dyn")
    assert [p.shape for p in kern.params] == [["M"], ["M"]]


@needs_toolkit
def test_several_kernels_per_function_on_cuda_are_one_bundle_kernel_each():
    @T.prim_func
    def two(A: T.Tensor((8,), "float32")):
        with T.Kernel(1) as bx:
            T.fill(A, 1)
        with T.Kernel(1) as bx:
            T.fill(A, 2)
    kernel = tilelang.compile(two, target="cuda")
    assert kernel.kernel_names == ["two_k0", "two_k1"]  # launched in program order
    source = kernel.get_kernel_source()
    assert "two_k0" in source and "two_k1" in source


@needs_toolkit
def test_calling_without_a_cuda_device_names_the_reason(cuda_kernel):
    import numpy as np
    status = compiler.cuda_device_status()
    if status is None:
        pytest.skip("a CUDA device is present (the conformance suite runs it)")
    with pytest.raises(tilelang.TileLangRuntimeError, match="target cuda: no device to run on"):
        cuda_kernel(np.zeros(200, np.float32))


# -- bf16 staging (the path numpy bf16 arrays take to a GPU), on the CPU device

def test_staged_bf16_round_trip_on_cpu_device():
    np = pytest.importorskip("numpy")
    tlr = _runtime()
    from tilelang.kernel import _StagedBFloat16
    rt = tlr.Runtime(backends=["cpu"])
    dev = rt.device("cpu")
    a = np.arange(12, dtype=np.uint16).reshape(3, 4)
    s = _StagedBFloat16(a, dev, tlr._ffi)
    try:
        t = s._managed.dl_tensor
        assert (t.dtype.code, t.dtype.bits, t.ndim) == (4, 16, 2)
        assert ctypes.string_at(t.data, a.nbytes) == a.tobytes()
        ctypes.memset(t.data, 0, a.nbytes)  # "the kernel wrote zeros"
        s.copy_back()
        assert not a.any()
        assert s.__dlpack_device__() == (tlr._ffi.DL_CPU, 0)
    finally:
        s.close()

