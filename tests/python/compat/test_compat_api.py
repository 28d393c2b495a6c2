"""The upstream-compatibility API on the CPU: profiler, tilelang.testing, autotune,
pass_configs, unsupported-feature errors and the upstream runner (tools/compat).

Everything here runs with numpy on the CPU (torch is not installed on CI);
the torch/CUDA paths run on the GPU machine (tools/device/gpu_check.sh run-compat).
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.errors import display_path
from tilelang.profiler import do_bench
from tilelang.utils.tensor import TensorSupplyType, torch_assert_close

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools" / "compat"))
import compat_reason  # noqa: E402


def matmul(M, N, K, bm, bn, bk, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])
    return main


def ref_matmul(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


@pytest.fixture(scope="module")
def gemm_kernel():
    return tilelang.compile(matmul(96, 80, 72, 32, 32, 32), out_idx=[2], target="cpu")


def test_profiler_assert_allclose_passes_and_fails(gemm_kernel):
    prof = gemm_kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    prof.assert_allclose(ref_matmul, atol=1e-2, rtol=1e-2)
    with pytest.raises(AssertionError, match="Too many mismatched elements"):
        prof.assert_allclose(lambda a, b: ref_matmul(a, b) * 1.1 + 1.0, atol=1e-2, rtol=1e-2)


def test_profiler_inputs_follow_supply_type(gemm_kernel):
    ins = gemm_kernel.get_profiler(TensorSupplyType.Integer)._get_inputs()
    assert [a.shape for a in ins] == [(96, 72), (72, 80)] and all(a.dtype == np.float16 for a in ins)
    assert set(np.unique(ins[0])) <= {-2, -1, 0, 1, 2} and len(np.unique(ins[0])) > 1
    ones = gemm_kernel.get_profiler(TensorSupplyType.One)._get_inputs()
    assert all((a == 1).all() for a in ones)


def test_profiler_run_once_and_do_bench(gemm_kernel):
    prof = gemm_kernel.get_profiler()
    out = prof.run_once()
    assert out.shape == (96, 80) and out.dtype == np.float32 and np.abs(out).sum() > 0
    ms = prof.do_bench(warmup=1, rep=5)
    assert isinstance(ms, float) and 0 < ms < 5000
    lo, hi = prof.do_bench(ref_matmul, n_warmup=1, n_repeat=5, quantiles=[0.1, 0.9])
    assert 0 < lo <= hi
    with pytest.raises(tilelang.TileLangError, match="return_mode"):
        prof.do_bench(n_warmup=1, n_repeat=1, return_mode="average")


def test_standalone_do_bench_on_the_host_clock():
    calls = []
    ms = do_bench(lambda: calls.append(1), _n_warmup=3, _n_repeat=7, cuda=False)
    assert ms >= 0 and len(calls) == 1 + 5 + 3 + 7  # first call, estimate, warm-up, timed


def test_profiler_needs_constraints_for_dynamic_dims():
    m = T.dynamic("m")

    @T.prim_func
    def scale(A: T.Tensor((m, 64), "float32"), B: T.Tensor((m, 64), "float32")):
        with T.Kernel(T.ceildiv(m, 32), threads=32) as bx:
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = A[bx * 32 + i, j] * 2.0
    kernel = tilelang.compile(scale, out_idx=[1], target="cpu")
    prof = kernel.get_profiler()
    with pytest.raises(tilelang.TileLangError, match=r"dimension m is dynamic.*dynamic_symbolic_constraints"):
        prof.run_once()
    assert prof.do_bench(n_warmup=1, n_repeat=2, dynamic_symbolic_constraints={"m": 96}) > 0
    a = prof._get_inputs(dynamic_symbolic_constraints={"m": 64})[0]
    np.testing.assert_allclose(kernel(a), a.astype(np.float64) * 2.0)


def test_torch_assert_close_ratio_on_numpy():
    rng = np.random.default_rng(7)
    a = rng.standard_normal(1000).astype(np.float32)
    b = a.copy()
    b[:10] += 1.0  # 10 of 1000 mismatch
    assert torch_assert_close(a, b, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError, match=r"Too many mismatched elements: 10 > 9"):
        torch_assert_close(a, b, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.009)
    with pytest.raises(AssertionError, match="dtype"):
        torch_assert_close(a, b.astype(np.float64))
    with pytest.raises(AssertionError, match="shape"):
        torch_assert_close(a, b[:-1])
    assert tilelang.testing.torch_assert_close is torch_assert_close


def test_unknown_pass_configs_warn_once_naming_them():
    prim = matmul(32, 32, 32, 32, 32, 32)
    cfg = {tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True, "tl.compat_test_unknown_b": 1,
           "tl.compat_test_unknown_a": 2}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tilelang.compile(prim, out_idx=[2], target="cpu", pass_configs=cfg, execution_backend="tvm_ffi",
                         compile_flags=["-O3"], target_host="llvm")
        tilelang.compile(prim, out_idx=[2], target="cpu", pass_configs=cfg)
    msgs = [str(x.message) for x in w if "pass_configs" in str(x.message)]
    assert msgs == ["pass_configs: unknown key(s) tl.compat_test_unknown_a, tl.compat_test_unknown_b "
                    "accepted and ignored"]
    with pytest.raises(tilelang.TileLangError, match="execution_backend 'pybind'"):
        tilelang.compile(prim, target="cpu", execution_backend="pybind")


def test_jit_accepts_upstream_options_and_caches_per_arguments():
    @tilelang.jit(out_idx=[2], target="cpu", execution_backend="cython", pass_configs={"tl.disable_tma_lower": True})
    def factory(M, N, K):
        return matmul(M, N, K, 32, 32, 32)
    k1 = factory(64, 32, 32)
    assert factory(64, 32, 32) is k1 and factory(32, 32, 32) is not k1
    a = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((32, 32)).astype(np.float16)
    np.testing.assert_allclose(k1(a, b), ref_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_autotune_picks_a_config_and_skips_tuning_when_given():
    configs = [{"bm": 32, "bn": 32}, {"bm": 64, "bn": 32}]

    @tilelang.autotune(configs=configs, warmup=1, rep=3, ref_prog=ref_matmul)
    @tilelang.jit(out_idx=[2], target="cpu")
    def tuned(M, N, K, bm=16, bn=16):
        return matmul(M, N, K, bm, bn, 32)
    kernel = tuned(64, 64, 64)
    assert kernel.config in configs and kernel.latency > 0 and kernel.ref_latency > 0
    assert tuned(64, 64, 64) is kernel  # cached per argument tuple
    direct = tuned(64, 64, 64, bm=16, bn=16)  # every tuned parameter given: compiled as asked, no tuning
    assert not hasattr(direct, "config") and direct is not kernel
    assert isinstance(tuned.get_tir(64, 64, 64, bm=32, bn=32), tilelang.PrimFunc)


def test_autotune_reports_every_failing_config():
    @tilelang.autotune(configs=[{"bm": 32}], warmup=1, rep=1, ref_prog=lambda a, b: ref_matmul(a, b) + 5.0)
    @tilelang.jit(out_idx=[2], target="cpu")
    def bad(M, bm=16):
        return matmul(M, M, M, bm, 32, 32)
    with pytest.raises(tilelang.TileLangError, match=r"every configuration failed:\n  \{'bm': 32\}: AssertionError"):
        bad(32)


@tilelang.autotune(configs=[{"blk_m": 8}, {"blk_m": 16}, {"blk_m": 32}], warmup=1, rep=2)
@tilelang.jit(target="cpu")
def tuned_row_max(x, blk_m, threads=128):
    # example_topk's pattern: autotune over an eager function whose call passes tensors
    M, N = T.const("M, N")
    x: T.Tensor([M, N], "float32")
    out = T.empty([M], "float32")
    with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
        frag = T.alloc_fragment([blk_m, N], "float32")
        red = T.alloc_fragment([blk_m], "float32")
        T.copy(x[bx * blk_m, 0], frag)
        T.reduce_max(frag, red, dim=1, clear=True)
        T.copy(red, out[bx * blk_m])
    return out


def test_autotune_on_an_eager_function_returns_the_outputs(monkeypatch):
    compiled = []
    real = tilelang.compiler.compile

    def counting(*a, **k):
        compiled.append(1)
        return real(*a, **k)
    monkeypatch.setattr(tilelang.compiler, "compile", counting)
    x = np.random.default_rng(3).standard_normal((72, 40)).astype(np.float32)
    out = tuned_row_max(x)  # blk_m not given: each config compiled for (72, 40), timed; the best runs
    np.testing.assert_array_equal(out, x.astype(np.float64).max(axis=1))
    assert len(compiled) == 3
    out2 = tuned_row_max(x * 2)  # same shapes: the tuned configuration is reused, nothing compiled
    np.testing.assert_array_equal(out2, (x * 2).max(axis=1))
    assert len(compiled) == 3
    kernel = tuned_row_max.compile(x)
    assert kernel.params[0].shape[0] == 72 and len(compiled) == 3
    y = np.random.default_rng(4).standard_normal((20, 40)).astype(np.float32)
    np.testing.assert_array_equal(tuned_row_max(y), y.max(axis=1))  # new shapes: tuned again
    assert len(compiled) == 6
    np.testing.assert_array_equal(tuned_row_max(y, blk_m=8), y.max(axis=1))  # given: no tuning


class GradTensor:
    """A DLPack producer that behaves like a torch tensor with requires_grad=True: its own
    __dlpack__ raises torch's BufferError, .detach() is a view of the same memory."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.requires_grad = array, array.shape, array.dtype, True

    def __dlpack__(self, stream=None):
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def detach(self):
        return self.array


def test_tensors_that_require_grad_are_passed_detached(gemm_kernel):
    # upstream's varlen attention examples pass q/k/v made with requires_grad=True
    rng = np.random.default_rng(5)
    a = rng.standard_normal((96, 72)).astype(np.float16)
    b = rng.standard_normal((72, 80)).astype(np.float16)
    c = gemm_kernel(GradTensor(a), GradTensor(b))
    np.testing.assert_allclose(c, ref_matmul(a, b), rtol=1e-3, atol=1e-3)


def test_simplify_prim_func_returns_the_program_and_thread_level_tir_runs():
    # testing/python/kernel/test_tilelang_kernel_gemm_simt.py imports it; its kernel is thread-level TIR
    from tilelang.transform import simplify_prim_func

    @simplify_prim_func
    def gemm(M, N, K):
        return matmul(M, N, K, 32, 32, 32)
    kernel = tilelang.compile(gemm(64, 32, 32), out_idx=[2], target="cpu")
    a = np.random.default_rng(6).standard_normal((64, 32)).astype(np.float16)
    b = np.random.default_rng(7).standard_normal((32, 32)).astype(np.float16)
    np.testing.assert_allclose(kernel(a, b), ref_matmul(a, b), rtol=1e-3, atol=1e-3)

    @simplify_prim_func
    def simt(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=n) as bx:
                tid = T.get_thread_binding()  # per-thread code: language/threads.py
                A[tid] = A[tid] + T.cast(tid, "float32")
        return main
    a = np.ones(32, np.float32)
    tilelang.compile(simt(32), target="cpu")(a)
    np.testing.assert_array_equal(a, 1.0 + np.arange(32))


def test_testing_gates_and_seed():
    reason = tilelang.testing.cuda_skip_reason()

    @tilelang.testing.requires_cuda
    def f():
        pass

    @tilelang.testing.requires_cuda_compute_version_ge(8, 0)
    def g():
        pass

    @tilelang.testing.requires_rocm
    def h():
        pass
    marks = {m.name: m for m in f.pytestmark}
    assert marks["skipif"].args == (reason is not None,)
    if reason is not None:  # no CUDA device here: the version gate skips too, naming the version
        assert any(m.args == (True,) and "compute version ge 8.0, have 0.0" in m.kwargs["reason"]
                   for m in g.pytestmark)
    assert h.pytestmark[0].args == (True,) and "ROCm" in h.pytestmark[0].kwargs["reason"]
    tilelang.testing.set_random_seed(5)
    x = np.random.rand(3)
    tilelang.testing.set_random_seed(5)
    assert (np.random.rand(3) == x).all()


def test_unsupported_upstream_names_say_which_feature():
    with pytest.raises(tilelang.TileLangNotImplementedError, match="unsupported feature: T.alloc_tmem"):
        T.alloc_tmem  # noqa: B018
    assert T.float8_e4m3fn == "float8_e4m3fn" and T.tfloat32 == "tfloat32" and T.tfloat32 != T.float32

    with pytest.raises(tilelang.TileLangSyntaxError, match="unsupported feature: dtype float4_e2m1fn"):
        @T.prim_func
        def fp8(A: T.Tensor((16,), T.float4_e2m1fn)):
            with T.Kernel(1, threads=32) as bx:
                pass

    @T.prim_func
    def tf32(A: T.Tensor((16,), T.tfloat32)):  # float32 memory, as upstream's tf32 tensors
        with T.Kernel(1, threads=32) as bx:
            pass
    assert tf32.params[0].dtype == "float32"
    assert not hasattr(T, "tcgen05_gemm")
    from tilelang import tvm
    assert tvm.DataType("float16").bits == 16
    with pytest.raises(tilelang.TileLangNotImplementedError, match=r"unsupported feature: tvm.tirx.call_intrin \(TVM"):
        tvm.tirx.call_intrin("handle", 0)
    # upstream test files import such names at module level: the import works, the use fails
    from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitterWithLadderTransform
    with pytest.raises(tilelang.TileLangNotImplementedError, match="unsupported feature: tilelang.cuda.intrinsics"):
        TensorCoreIntrinEmitterWithLadderTransform(a_dtype="float16")
    with pytest.raises(tilelang.TileLangNotImplementedError, match="TensorCoreIntrinEmitterWithLadderTransform"):
        class Sub(TensorCoreIntrinEmitterWithLadderTransform):
            pass


def test_reasons_name_the_feature():
    try:
        T.alloc_barrier  # noqa: B018
    except AttributeError as e:
        line = e.__traceback__.tb_lineno
        assert compat_reason.reason_of(e) == ("unsupported feature: T.alloc_barrier is not part of this "
                                              f"project's tile language (at {display_path(__file__)}:{line})")
    assert compat_reason.reason_of(ModuleNotFoundError("No module named 'fla'", name="fla")) == "missing module fla"
    assert compat_reason.reason_of(AssertionError("Too many mismatched elements: 3 > 1")).startswith(
        "numerical mismatch: Too many mismatched")
    err = tilelang.TileLangUnimplementedFeature("target cuda: not implemented by the backend: dynamic shapes\nmore")
    assert compat_reason.reason_of(err) == "backend UNIMPLEMENTED: dynamic shapes"
    assert compat_reason.reason_of(None, "E   ModuleNotFoundError: No module named 'torch'") == "missing module torch"
    err = tilelang.TileLangUnimplementedFeature(
        "target cpu: not implemented by the backend: @main: call_extern at ex.py:114: T.call_extern with imported "
        "CUDA source runs only on CUDA targets: kernel 'main' calls extern function 'decode_i4u_to_f16', target cpu")
    assert compat_reason.reason_of(err) == (
        "backend UNIMPLEMENTED: T.call_extern with imported CUDA source runs only on CUDA targets: kernel 'main' calls "
        "extern function 'decode_i4u_to_f16', target cpu")


UPSTREAM_STYLE_TEST = '''
import numpy as np
import tilelang
import tilelang.testing
import tilelang.language as T
import example_add


def test_example_add():
    example_add.main()


def test_tmem():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            t = T.alloc_tmem([16, 16], "float32")


@tilelang.testing.requires_cuda_compute_version_eq(7, 5)
def test_sm75_only():
    pass


if __name__ == "__main__":
    tilelang.testing.main()
'''

UPSTREAM_STYLE_EXAMPLE = '''
import numpy as np
import tilelang
import tilelang.language as T


@tilelang.jit
def add(A, B, block=32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
        for i, j in T.Parallel(block, block):
            C[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] + B[by * block + i, bx * block + j]
    return C


def main():
    a = np.random.randn(64, 96).astype(np.float32)
    b = np.random.randn(64, 96).astype(np.float32)
    tilelang.testing.torch_assert_close(add(a, b), a + b, rtol=1e-6, atol=1e-6)
'''


def test_runner_on_an_upstream_style_checkout(tmp_path):
    ex = tmp_path / "up" / "examples" / "elementwise"
    ex.mkdir(parents=True)
    (ex / "test_example_add.py").write_text(textwrap.dedent(UPSTREAM_STYLE_TEST))
    (ex / "example_add.py").write_text(textwrap.dedent(UPSTREAM_STYLE_EXAMPLE))
    (ex / "conftest.py").write_text("raise RuntimeError('upstream conftest must not be loaded')\n")
    shim = tmp_path / "up" / "examples" / "online_softmax"
    shim.mkdir()
    (shim / "online_softmax.py").write_text("import tilelang.language as T\nx = T.alloc_tmem\n")
    pythonpath = os.pathsep.join(p for p in sys.path if (pathlib.Path(p) / "tilelang").is_dir()
                                 or (pathlib.Path(p) / "tilelang_runtime").is_dir())
    out, js = tmp_path / "table.md", tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "compat" / "run_upstream.py"), str(tmp_path / "up"),
                           "--dirs", "elementwise,online_softmax,missing_dir", "--target", "cpu", "--python",
                           sys.executable, "--pythonpath", pythonpath, "--out", str(out), "--json", str(js)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r["test"].split("::")[-1]: r for r in json.loads(js.read_text())}
    assert rows["test_example_add"]["result"] == "passed", rows
    assert rows["test_tmem"]["result"] == "failed"
    assert "unsupported feature: T.alloc_tmem" in rows["test_tmem"]["reason"]
    assert rows["test_sm75_only"]["result"] == "skipped"
    assert rows["test_online_softmax"]["result"] == "failed"
    assert "unsupported feature: T.alloc_tmem" in rows["test_online_softmax"]["reason"]
    assert rows["-"]["reason"] == "examples/missing_dir not in the checkout"
    table = out.read_text()
    assert "| elementwise | 1 | 1 | 1 |" in table
    assert "| online_softmax | 0 | 1 | 0 |" in table


def test_native_stream_wrapping_checks_its_handle():
    import tilelang_runtime as tlr
    from tilelang.kernel import shared_runtime
    with pytest.raises(tlr.TLError, match="native stream .* is NULL"):
        tlr.Stream(shared_runtime().device("cpu"), native=0)


def test_cpu_kernels_never_take_the_torch_stream_path(gemm_kernel):
    prepared = gemm_kernel._prepare()
    assert gemm_kernel._torch_stream(prepared, object(), []) is None  # not a CUDA device: synchronous path


def test_contrib_nvcc_versions():
    from tilelang.contrib import nvcc
    assert nvcc.parse_compute_version("9.0") == (9, 0) and nvcc.parse_compute_version("12.1") == (12, 1)
    with pytest.raises(ValueError, match="not major.minor"):
        nvcc.parse_compute_version("sm_90")
    if tilelang.testing.cuda_skip_reason() is not None:
        with pytest.raises(ValueError, match="no CUDA device"):
            nvcc.get_target_compute_version()
    else:
        assert nvcc.parse_compute_version(nvcc.get_target_compute_version()) >= (7, 0)


def test_register_allocation_hints_change_nothing():
    def scale(hint):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(2, threads=32) as bx:
                if hint:
                    T.disable_warp_group_reg_alloc()
                    T.no_set_max_nreg()
                    T.annotate_consumer_reg_alloc(240)
                for i in T.Parallel(32):
                    B[bx * 32 + i] = A[bx * 32 + i] * 3.0
        return main
    assert scale(True).script() == scale(False).script()
    a = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(tilelang.compile(scale(True), out_idx=[1], target="cpu")(a), a * 3.0, rtol=1e-6)
    with pytest.raises(tilelang.TileLangSyntaxError, match="must be inside a T.Kernel"):
        @T.prim_func
        def outside(A: T.Tensor((64,), "float32")):
            T.no_set_max_nreg()


def test_dtype_constructors_read_upstream_spellings():
    assert T.dtype("uint") == "uint32" and T.uint == "uint32" and T.dtype("half").bits == 16
    assert tilelang.DataType("float16").bits == 16 and tilelang.DataType("tfloat32") == "float32"
    with pytest.raises(tilelang.TileLangError, match="unknown dtype 'float7'"):
        T.dtype("float7")
