"""tilelang_runtime (the ctypes binding) on the runtime's standard test bundle
(tests/runtime: vadd, saxpy, gemm, fail_at; CPU kernels for x86-64-v2/v3/v4
plus CUDA and Vulkan variants that the CPU rejects).

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python/test_runtime_binding.py
"""
import os
import pathlib
import threading

import numpy as np
import pytest

import tilelang_runtime as tlr


def _build_dir():
    env = os.environ.get("TL_BUILD_DIR")
    if env:
        return pathlib.Path(env)
    # build/python/tilelang_runtime/__init__.py -> build
    return pathlib.Path(tlr.__file__).resolve().parents[2]


BUNDLE = _build_dir() / "tests" / "runtime" / "data" / "standard.tlb"


@pytest.fixture(scope="module")
def rt():
    return tlr.Runtime(backends=["cpu"], cpu_threads=2, ignore_environment=True)


@pytest.fixture(scope="module")
def bundle(rt):
    if not BUNDLE.exists():
        pytest.fail(f"{BUNDLE} missing: build the tl_rt_standard_bundle target")
    return rt.open_bundle(str(BUNDLE))


def test_versions():
    assert tlr.abi_version()[0] == 1
    assert tlr.version()
    assert tlr.library_path.endswith("libtilelang_runtime.so")


def test_devices(rt):
    devs = rt.devices()
    assert len(devs) == 1
    cpu = devs[0]
    assert cpu.backend == "cpu" and cpu.can_launch
    assert cpu.arch.startswith("x86-64")
    assert cpu.compute_units == 2
    desc = cpu.describe()
    assert desc["backend"] == "cpu" and desc["arch"] == cpu.arch
    assert rt.best_device().backend == "cpu"
    assert rt.backend_status("cpu") is None
    assert "excluded by backend_mask" in rt.backend_status("cuda")
    with pytest.raises(tlr.TLError) as e:
        rt.device("cuda:0")
    assert e.value.code_name == "NOT_FOUND"


def test_reflection(bundle):
    assert bundle.kernels == ["fail_at", "gemm", "saxpy", "vadd"]
    g = bundle.kernel("gemm")
    assert [p.name for p in g.params] == ["A", "B", "C"]
    assert g.params[0].shape == ["M", "K"]
    assert g.params[2].access == "write" and g.params[2].is_output
    assert g.out_idx == [2]
    assert g.symbols == ["M", "N", "K"]
    s = bundle.kernel("saxpy")
    assert s.params[0].kind == "scalar" and s.params[0].dtype == "float32"
    assert s.params[3].binds_symbol == "N"
    assert s.out_idx == []  # Y is read_write: the caller passes it
    assert bundle.kernel("vadd").attr("out_idx") == "2"
    ids = [v["id"] for v in g.variants]
    assert "cpu.x86-64-v2" in ids and "cuda.sm_90a" in ids
    with pytest.raises(tlr.TLError) as e:
        bundle.kernel("conv")
    assert e.value.code_name == "NOT_FOUND" and "no kernel 'conv'" in e.value.message
    bundle.verify()


def test_gemm_allocates_output_and_matches_numpy(rt, bundle):
    p = bundle.kernel("gemm").prepare(rt.best_device())
    assert p.variant["id"] == "cpu." + rt.best_device().arch
    assert "chosen: " + p.variant["id"] in p.explain()
    assert "cuda.sm_90a: backend cuda, device is cpu" in p.explain()
    rng = np.random.default_rng(0)
    for m, n, k in [(1, 1, 1), (16, 16, 16), (37, 53, 29), (64, 80, 100)]:
        A = rng.standard_normal((m, k), dtype=np.float32)
        B = rng.standard_normal((k, n), dtype=np.float32)
        C = p(A, B)
        assert C.shape == (m, n) and C.dtype == np.float32
        np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    # All arguments given: written in place, nothing returned.
    A = rng.standard_normal((37, 29), dtype=np.float32)
    B = rng.standard_normal((29, 53), dtype=np.float32)
    C = np.zeros((37, 53), np.float32)
    assert p(A, B, C) is None
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def test_prepare_is_cached(rt, bundle):
    k = bundle.kernel("vadd")
    assert k.prepare() is k.prepare(rt.best_device())


def test_vadd_and_saxpy(bundle):
    vadd = bundle.kernel("vadd")
    a = np.arange(1000, dtype=np.float32)
    b = np.ones(1000, np.float32)
    np.testing.assert_array_equal(vadd(a, b), a + b)
    saxpy = bundle.kernel("saxpy").prepare()
    x = np.linspace(-1, 1, 3000, dtype=np.float32)
    y = np.full(3000, 2.0, np.float32)
    saxpy(np.float32(0.5), x, y, 3000)
    np.testing.assert_allclose(y, 0.5 * x + 2.0, rtol=1e-6)
    saxpy(1.5, x, y, np.int32(3000))  # Python floats are converted to the parameter's dtype


def test_errors_carry_names_and_numbers(bundle):
    g = bundle.kernel("gemm").prepare()
    A = np.zeros((8, 4), np.float32)
    B = np.zeros((5, 8), np.float32)
    with pytest.raises(tlr.TLError) as e:
        g(A, B)
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert "kernel 'gemm' argument 1 'B': dim 0 is 5, but symbol 'K' is 4 (from argument 0 'A' dim 1)" in str(e.value)
    with pytest.raises(tlr.TLError) as e:
        g(A.astype(np.float64), np.zeros((4, 8)))
    assert "argument 0 'A': dtype is float64, expected float32" in str(e.value)
    with pytest.raises(tlr.TLError) as e:
        g(np.zeros((8, 8), np.float32)[:, ::2], np.zeros((4, 8), np.float32))
    assert "argument 0 'A': not contiguous: dim 1 stride is 2, expected 1" in str(e.value)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        g(A)
    saxpy = bundle.kernel("saxpy").prepare()
    x = np.zeros(10, np.float32)
    with pytest.raises(tlr.TLError) as e:
        saxpy(np.float64(1.0), x, x, 10)
    assert "argument 0 'a': dtype is float64, expected float32" in str(e.value)
    with pytest.raises(tlr.TLError) as e:
        bundle.kernel("fail_at")(np.zeros(8, np.float32))
    assert e.value.code_name == "INTERNAL" and "block (3, 0, 0) returned 7" in str(e.value)


def test_explicit_grid(bundle):
    a = np.ones(1024, np.float32)
    c = np.zeros(1024, np.float32)
    bundle.kernel("vadd").prepare()(a, a, c, grid=(1,))
    assert c[255] == 2.0 and c[256] == 0.0


class _DLPackOnly:
    """Hides everything but the DLPack protocol of a numpy array."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()

    @property
    def shape(self):
        return self._a.shape


def test_dlpack_objects(bundle):
    a = np.arange(300, dtype=np.float32)
    b = np.full(300, 3.0, np.float32)
    c = np.zeros(300, np.float32)
    bundle.kernel("vadd").prepare()(_DLPackOnly(a), _DLPackOnly(b), _DLPackOnly(c))
    np.testing.assert_array_equal(c, a + 3.0)


def test_open_from_bytes_and_lifetime(rt):
    data = BUNDLE.read_bytes()
    b = rt.open_bundle(data)
    p = b.kernel("vadd").prepare()
    del b  # the prepared kernel keeps what it needs alive
    a = np.ones(10, np.float32)
    c = np.zeros(10, np.float32)
    p(a, a, c)
    assert (c == 2).all()
    with pytest.raises(tlr.TLError) as e:
        rt.open_bundle(b"not a bundle at all" * 10)
    assert "opening bundle from memory" in e.value.message


def test_threads_share_one_prepared_kernel(bundle):
    p = bundle.kernel("gemm").prepare()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(5):
            A = rng.standard_normal((20, 30), dtype=np.float32)
            B = rng.standard_normal((30, 10), dtype=np.float32)
            if not np.allclose(p(A, B), A @ B, atol=1e-4):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_log_callback_and_missing_drivers(tmp_path):
    lines = []
    rt = tlr.Runtime(backends=["cpu", "cuda"], ignore_environment=True, driver_search_paths=[str(tmp_path)],
                     log=lambda level, msg: lines.append(msg), log_level=3)
    assert "CUDA driver not found: tried " + str(tmp_path) + "/libcuda.so.1" in rt.backend_status("cuda")
    assert any("cuda backend unavailable" in m for m in lines)
    b = rt.open_bundle(str(BUNDLE))
    b.kernel("vadd").prepare()
    assert any("prepared kernel 'vadd'" in m for m in lines)


def test_numpy_arrays_are_staged_through_device_buffers(bundle, monkeypatch):
    # On a GPU, numpy arrays are copied into device buffers and written
    # parameters copied back; the CPU device exercises the same path here.
    monkeypatch.setattr(tlr, "_FORCE_STAGING", True)
    g = bundle.kernel("gemm").prepare()
    rng = np.random.default_rng(3)
    A = rng.standard_normal((19, 23), dtype=np.float32)
    B = rng.standard_normal((23, 7), dtype=np.float32)
    np.testing.assert_allclose(g(A, B), A @ B, rtol=1e-4, atol=1e-4)
    saxpy = bundle.kernel("saxpy").prepare()
    x = np.ones(100, np.float32)
    y = np.full(100, 2.0, np.float32)
    saxpy(3.0, x, y, 100)  # Y is read_write: copied back
    assert (y == 5.0).all()
    with pytest.raises(TypeError, match="needs a C-contiguous array"):
        g(np.zeros((19, 46), np.float32)[:, ::2], B)


def test_streams(rt, bundle):
    s = rt.best_device().stream()
    vadd = bundle.kernel("vadd").prepare()
    a = np.arange(5000, dtype=np.float32)
    c = np.zeros(5000, np.float32)
    vadd(a, a, c, stream=s)
    vadd(c, c, c, stream=s)  # in order after the first
    s.synchronize(timeout=30)
    np.testing.assert_array_equal(c, 4 * a)
    bundle.kernel("fail_at").prepare()(np.zeros(8, np.float32), stream=s)
    with pytest.raises(tlr.TLError) as e:
        s.synchronize()
    assert "block (3, 0, 0) returned 7" in str(e.value)
    s.synchronize()  # the failure was reported once
    with pytest.raises(TypeError, match="outputs cannot be allocated"):
        bundle.kernel("gemm").prepare()(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), stream=s)
