"""tilelang_runtime (the ctypes binding) on a Vulkan device: the SPIR-V test
bundle of tests/runtime_vulkan (data/vulkan.tlb: vadd, rowsum, hand-written
SPIR-V laid out as VULKAN_CONTRACT.md says). numpy arrays are staged through
device buffers (Vulkan device pointers are virtual addresses, never host
pointers), launched, and copied back.

Runs on lavapipe in CI (VK_ICD_FILENAMES is pointed at it here unless a driver
is chosen already); skips when the Vulkan backend is unavailable.

Run: TL_BUILD_DIR=build PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/python/test_runtime_vulkan.py
"""
import os
import pathlib

import numpy as np
import pytest

_LVP = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
if not os.environ.get("VK_ICD_FILENAMES") and not os.environ.get("VK_DRIVER_FILES") and os.path.exists(_LVP):
    os.environ["VK_ICD_FILENAMES"] = _LVP  # read by the loader at vkCreateInstance

import tilelang_runtime as tlr  # noqa: E402


def _build_dir():
    env = os.environ.get("TL_BUILD_DIR")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(tlr.__file__).resolve().parents[2]


BUNDLE = _build_dir() / "tests" / "runtime_vulkan" / "data" / "vulkan.tlb"


@pytest.fixture(scope="module")
def rt(tmp_path_factory):
    return tlr.Runtime(backends=["vulkan", "cpu"], cpu_threads=2, ignore_environment=True,
                       cpu_cache_dir=str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="module")
def dev(rt):
    why = rt.backend_status("vulkan")
    if why is not None:
        pytest.skip(f"no Vulkan backend: {why}")
    devs = [d for d in rt.devices() if d.backend == "vulkan"]
    if not devs:
        pytest.skip("the Vulkan loader reports no devices")
    return devs[0]


@pytest.fixture(scope="module")
def bundle(rt):
    if not BUNDLE.exists():
        pytest.skip(f"{BUNDLE} missing: build the tl_vk_test_bundle target (needs spirv-as)")
    return rt.open_bundle(str(BUNDLE))


def test_device(rt, dev):
    assert dev.can_launch
    assert dev.arch.startswith("spirv1.")
    desc = dev.describe()
    assert desc["backend"] == "vulkan"
    assert rt.device("vulkan:0").name == dev.name
    if dev.is_software:  # lavapipe ranks below the native CPU backend
        assert rt.best_device().backend == "cpu"


def test_vadd_matches_numpy(bundle, dev):
    p = bundle.kernel("vadd").prepare(dev)
    assert p.variant["backend"] == "vulkan" and p.variant["id"] == "vulkan.spirv1.3"
    assert "SPIR-V compute pipeline created" in p.explain()
    rng = np.random.default_rng(7)
    for n in (1, 65, 3000):
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        out = np.full(n, np.nan, dtype=np.float32)
        alpha = np.float32(rng.standard_normal() * 3)
        p(x, y, out, alpha)
        ref = x.astype(np.float64) + np.float64(alpha) * y.astype(np.float64)
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_rowsum_matches_numpy(bundle, dev):
    p = bundle.kernel("rowsum").prepare(dev)
    rng = np.random.default_rng(8)
    for m, k in ((1, 1), (37, 1000), (130, 63)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        out = np.full(m, np.nan, dtype=np.float32)
        p(a, out)
        ref = a.astype(np.float64).sum(axis=1)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * k)


def test_bad_arguments_name_the_argument(bundle, dev):
    p = bundle.kernel("vadd").prepare(dev)
    x = np.zeros(8, dtype=np.float32)
    with pytest.raises(tlr.TLError) as e:
        p(x, np.zeros(9, dtype=np.float32), x.copy(), np.float32(1))
    assert e.value.code_name == "INVALID_ARGUMENT"
    assert "'y'" in str(e.value)


def test_queued_launch_needs_device_memory(bundle, dev):
    p = bundle.kernel("vadd").prepare(dev)
    s = dev.stream()
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(TypeError, match="numpy arrays cannot be staged for a stream"):
        p(x, x, x.copy(), np.float32(1), stream=s)
    s.synchronize(timeout=10)


def test_cpu_device_rejects_spirv(rt, bundle):
    with pytest.raises(tlr.TLError) as e:
        bundle.kernel("vadd").prepare(rt.device("cpu"))
    assert e.value.code_name == "INCOMPATIBLE"
    assert "vulkan.spirv1.3" in str(e.value)


class _HostTensor:
    """A DLPack producer of host memory that is not a numpy array, as a torch CPU tensor is
    (torch has no Vulkan device: CPU tensors are what torch users have to give)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_host_dlpack_tensors_are_staged(bundle, dev):
    p = bundle.kernel("vadd").prepare(dev)
    rng = np.random.default_rng(9)
    n = 777
    x = rng.standard_normal(n).astype(np.float32)
    y_store = rng.standard_normal(2 * n).astype(np.float32)
    y = y_store[::2]  # strided: staged through a contiguous copy
    out_store = np.full(3 * n, np.nan, dtype=np.float32)
    out = out_store[1::3]  # strided output: copied back element by element
    alpha = np.float32(0.75)
    p(_HostTensor(x), _HostTensor(y), _HostTensor(out), alpha)
    ref = x.astype(np.float64) + np.float64(alpha) * y.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert np.isnan(out_store[0::3]).all() and np.isnan(out_store[2::3]).all()  # nothing else written
    # Contiguous output: written back in place.
    out2 = np.full(n, np.nan, dtype=np.float32)
    p(_HostTensor(x), _HostTensor(y), _HostTensor(out2), alpha)
    np.testing.assert_allclose(out2, ref, rtol=1e-6, atol=1e-6)


def test_host_dlpack_tensors_cannot_be_staged_for_a_stream(bundle, dev):
    p = bundle.kernel("vadd").prepare(dev)
    s = dev.stream()
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(TypeError, match="host DLPack tensors"):
        p(_HostTensor(x), _HostTensor(x), _HostTensor(x.copy()), np.float32(1), stream=s)
    s.synchronize(timeout=10)
