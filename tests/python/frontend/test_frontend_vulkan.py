"""tilelang.compile(..., target="vulkan") on any machine: bundles with SPIR-V variants (validated by
spirv-val inside tl-pack), their contract fields, the disassembly as kernel source, and a shape
symbol in the push constants. Running on lavapipe is the conformance suite's job (`-k vulkan`)."""

import json
import subprocess

import tilelang
import tilelang.language as T
from tilelang import compiler, toolchain


def row_sum(m=70, n=50, block_m=4):
    @T.prim_func
    def main(X: T.Tensor((m, n), "float32"), Y: T.Tensor((m,), "float32")):
        with T.Kernel(T.ceildiv(m, block_m), threads=128) as bx:
            x = T.alloc_fragment((block_m, n), "float32")
            r = T.alloc_fragment((block_m,), "float32")
            T.copy(X[bx * block_m, 0], x)
            T.reduce_sum(x, r, dim=1)
            T.copy(r, Y[bx * block_m])
    return main


def scale_dyn(block=64):
    n = T.dynamic("n")

    @T.prim_func
    def scale(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float16"), s: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] * s
    return scale


def _variants(path, name):
    """The kernel's variants as `tl-pack inspect --json` shows them (with their feature tokens)."""
    out = subprocess.run([toolchain.tl_pack_path(), "inspect", "--json", path], capture_output=True, text=True,
                         check=True).stdout
    kernel = next(k for k in json.loads(out)["kernels"] if k["name"] == name)
    return {v["id"]: v for v in kernel["variants"]}


def test_vulkan_target_spec():
    assert compiler.resolve_target_spec("vulkan") == ("vulkan", "vulkan")
    assert compiler.resolve_target("vulkan") == "vulkan"


def test_vulkan_bundle_has_plain_and_subgroup_variants():
    kernel = tilelang.compile(row_sum(), out_idx=[1], target="vulkan")
    assert kernel.target == "vulkan" and kernel.kernel_name == "main"  # no CUDA renaming
    vs = _variants(kernel.bundle_path, "main")
    assert set(vs) == {"vulkan.spirv1.3", "vulkan.spirv1.3.subgroup"}, vs.keys()
    plain, sub = vs["vulkan.spirv1.3"], vs["vulkan.spirv1.3.subgroup"]
    assert plain["backend"] == "vulkan" and plain["arch"] == "spirv1.3"
    assert "vk.subgroup.shuffle" in sub["features"] and "vk.subgroup.shuffle" not in plain["features"]
    source = kernel.get_kernel_source()
    assert "OpEntryPoint GLCompute" in source and "OpControlBarrier" in source


def test_vulkan_fp16_and_symbols_and_scalars():
    kernel = tilelang.compile(scale_dyn(), out_idx=[1], target="vulkan")
    vs = _variants(kernel.bundle_path, "scale")
    assert set(vs) == {"vulkan.spirv1.3"}  # no lane reductions: one variant
    feats = set(vs["vulkan.spirv1.3"]["features"])
    assert {"vk.feature.shaderFloat16", "vk.feature.storageBuffer16BitAccess"} <= feats, feats
