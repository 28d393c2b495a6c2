"""Every kernel of the standard library (kernels/manifest.json), packed once per session with
`tl-pack build`, run through the runtime's Python binding on fresh random inputs and compared
with the numpy reference beside its factory (kernels/*.py).

The bundle: $TL_STD_BUNDLE when set (tools/test packs it once and shares it), else packed here
into $TL_BUILD_DIR/kernels-test/ for the host's x86-64 level (content-addressed cache in
$TL_BUILD_DIR/tilelang-cache, so a second session compiles nothing).

The device: $TL_DEVICE (cpu, vulkan, cuda, cuda:1, ...; default cpu). A kernel the bundle has no
variant for on that device is skipped with the runtime's reasons, so the same file runs on
lavapipe (TL_DEVICE=vulkan) and CUDA once those backends can run the kernels.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

tlrt = pytest.importorskip("tilelang_runtime")
from kernels import checks  # noqa: E402

MANIFEST = checks.load_manifest()
ENTRIES = MANIFEST["kernels"]


def _tl_pack():
    build = os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build"))
    path = os.path.join(build, "bin", "tl-pack")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no tl-pack at {path} (build the project or set TL_BUILD_DIR)")
    return build, path


@pytest.fixture(scope="session")
def std_bundle():
    path = os.environ.get("TL_STD_BUNDLE")
    if not path:
        build, tl_pack = _tl_pack()
        from tilelang import toolchain
        out_dir = os.path.join(build, "kernels-test")
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "tilelang-std.tlb")
        cmd = [tl_pack, "build", os.path.join(ROOT, "kernels", "manifest.json"), "-o", path, "--target",
               toolchain.host_isa_level(), "--cache-dir", os.path.join(build, "tilelang-cache"), "-q"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}"
    rt = tlrt.Runtime()
    return rt, rt.open_bundle(path)


@pytest.fixture(scope="session")
def device(std_bundle):
    rt, _ = std_bundle
    return rt.device(os.environ.get("TL_DEVICE") or "cpu")


def test_bundle_holds_every_manifest_kernel(std_bundle):
    _, bundle = std_bundle
    assert sorted(bundle.kernels) == sorted(e["name"] for e in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_kernel_matches_reference(std_bundle, device, entry):
    _, bundle = std_bundle
    try:
        bundle.kernel(entry["name"]).prepare(device)
    except tlrt.TLError as e:
        if device.backend != "cpu" and e.code_name in ("INCOMPATIBLE", "UNIMPLEMENTED"):
            pytest.skip(f"{entry['name']} has no variant for {device.backend}: {e}")
        raise
    rng = np.random.default_rng(abs(hash(entry["name"])) % (1 << 32))
    result = checks.run_instance(bundle, entry, device, rng)
    assert result.ok, f"{entry['name']} on {result.device} [{result.variant}]: max error {result.err:.3e}"


def test_case_builders_cover_every_factory():
    """Every manifest entry has a test case whose outputs are distinct from its inputs."""
    rng = np.random.default_rng(1)
    for e in ENTRIES:
        case = checks.case_for(e, rng)
        assert case.outputs, e["name"]
        for i in case.outputs:
            assert 0 <= i < len(case.args), (e["name"], i)


def _catalogue_core(text):
    """The catalogue without what depends on the build machine's toolchains: the backends
    column of the summary and the per-kernel "Variants:" lines."""
    out = []
    for line in text.splitlines():
        if line.startswith("Variants: "):
            continue
        if line.startswith("| [`"):
            line = line.rsplit("|", 2)[0] + "|"
        out.append(line)
    return "\n".join(out)


def test_catalogue_matches_bundle(std_bundle):
    """kernels/CATALOGUE.md is `tl-pack inspect --markdown` of the manifest-built bundle; this
    fails when a kernel, parameter, dtype, shape or factory changes without regenerating it:
        tl-pack build kernels/manifest.json -o std.tlb && tl-pack inspect --markdown std.tlb > kernels/CATALOGUE.md"""
    _, tl_pack = _tl_pack()
    path = os.environ.get("TL_STD_BUNDLE") or os.path.join(os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build")),
                                                             "kernels-test", "tilelang-std.tlb")
    r = subprocess.run([tl_pack, "inspect", "--markdown", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(ROOT, "kernels", "CATALOGUE.md")) as f:
        committed = f.read()
    assert _catalogue_core(r.stdout) == _catalogue_core(committed), (
        "kernels/CATALOGUE.md is stale: regenerate it with tl-pack inspect --markdown (see this test's doc)")
    assert "| cpu" in committed or ", cpu" in committed


def test_open_by_name_along_kernel_path(std_bundle, tmp_path, monkeypatch):
    """tl_bundle_open_by_name: $TILELANG_KERNEL_PATH in order, NAME.tlb; NOT_FOUND lists every path."""
    import shutil
    rt, bundle = std_bundle
    path = os.environ.get("TL_STD_BUNDLE") or os.path.join(os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build")),
                                                             "kernels-test", "tilelang-std.tlb")
    shutil.copy(path, tmp_path / "tilelang-std.tlb")
    monkeypatch.setenv("TILELANG_KERNEL_PATH", f"{tmp_path / 'missing'}:{tmp_path}")
    by_name = rt.open_bundle_by_name("tilelang-std")
    assert sorted(by_name.kernels) == sorted(bundle.kernels)
    with pytest.raises(tlrt.TLError) as e:
        rt.open_bundle_by_name("no-such-bundle")
    assert e.value.code_name == "NOT_FOUND"
    assert f"{tmp_path}/no-such-bundle.tlb" in e.value.message and f"{tmp_path}/missing/no-such-bundle.tlb" in e.value.message
    # The C example runs a kernel of the library by name.
    exe = os.path.join(os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "tl_example_c")
    if os.access(exe, os.X_OK):
        r = subprocess.run([exe, "tilelang-std", "gemm_f32_nn"], capture_output=True, text=True,
                           env=dict(os.environ, TILELANG_KERNEL_PATH=str(tmp_path)))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "gemm_f32_nn 67x512x512: max |error|" in r.stdout


# Issue #9: one bundle, every device at once. Each device that can launch and has a variant gets
# its own thread, which prepares (per device) and runs several kernels again and again; every
# result is checked. On the H200 this is the CPU and the GPU together (the bundle packed with
# host + sm_90a); two GPUs (nvidia-h200-x2) would be covered the same way. Two CPU "devices" do
# not exist and would prove nothing about GPU ordinals: the CUDA side of that is
# tests/runtime_cuda (CudaMultiDevice).
CONCURRENT_KERNELS = ["gemm_f32_nn", "softmax_f32_1024", "rmsnorm_f32_1024", "flash_attn_fwd_mha_d64"]


def test_one_bundle_on_every_device_at_once(std_bundle):
    import threading
    rt, bundle = std_bundle
    entries = [e for e in ENTRIES if e["name"] in CONCURRENT_KERNELS]
    assert len(entries) == len(CONCURRENT_KERNELS), "a kernel of CONCURRENT_KERNELS left the manifest"
    devices, runnable = [], {}
    for dev in rt.devices():
        if not dev.can_launch:
            continue
        ok = []
        for e in entries:
            try:
                bundle.kernel(e["name"]).prepare(dev)
                ok.append(e)
            except tlrt.TLError:
                pass  # no variant for this device (or over its limits): the others still run
        if ok:
            devices.append(dev)
            runnable[id(dev)] = ok
    if len(devices) < 2:
        pytest.skip(f"needs two devices with variants in this bundle, found {[d.backend for d in devices]}")
    failures, results = [], {}

    def work(dev, seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(3):
                for e in runnable[id(dev)]:
                    r = checks.run_instance(bundle, e, dev, rng)
                    results.setdefault(f"{dev.backend}:{dev.ordinal}", set()).add(r.variant)
                    if not r.ok:
                        failures.append(f"{e['name']} on {r.device} [{r.variant}]: max error {r.err:.3e}")
        except Exception as ex:  # reported below, with the device
            failures.append(f"{dev.backend}:{dev.ordinal}: {type(ex).__name__}: {ex}")

    threads = [threading.Thread(target=work, args=(d, 1000 + i)) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, "\n".join(failures)
    # Each device ran its own variant family (no silent fallback to device 0 / the CPU).
    for dev in devices:
        variants = results[f"{dev.backend}:{dev.ordinal}"]
        assert all(v.startswith(dev.backend) for v in variants), (dev.backend, variants)


def test_pack_for_hip_targets(tmp_path):
    """`tl-pack build --target host,hip`: HSACO variants for gfx90a, gfx942 and gfx1100 beside the CPU
    ones (clang-19 at pack time; never executed here: no AMD GPU), with the code object's facts."""
    import json
    build, tl_pack = _tl_pack()
    names = ["softmax_f32_1024", "gemm_f32_nn"]
    manifest = dict(MANIFEST)
    manifest["kernels"] = [dict(e, module=e["module"]) for e in ENTRIES if e["name"] in names]
    mpath = tmp_path / "manifest.json"
    mpath.write_text(json.dumps(manifest))
    out = tmp_path / "hip.tlb"
    from tilelang import toolchain
    cmd = [tl_pack, "build", str(mpath), "-o", str(out), "--target", toolchain.host_isa_level() + ",hip",
           "--cache-dir", os.path.join(build, "tilelang-cache")]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(build, "python"), ROOT])))
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}"
    # The build cache is shared by the test stages (CPU, then lavapipe), so the second run of this test
    # finds the whole bundle cached; either way the bundle must hold the HSACO variants checked below.
    assert ("hip (hip): 2 of 2 kernels" in r.stderr or "nothing changed" in r.stderr), r.stderr
    info = json.loads(subprocess.run([tl_pack, "inspect", "--json", str(out)], capture_output=True, text=True,
                                     check=True).stdout)
    for k in info["kernels"]:
        ids = sorted(v["id"] for v in k["variants"])
        assert [i for i in ids if i.startswith("hip.")] == ["hip.gfx1100", "hip.gfx90a", "hip.gfx942"], (k["name"], ids)
