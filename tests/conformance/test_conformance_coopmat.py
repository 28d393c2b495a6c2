"""Conformance: the cooperative-matrix (VK_KHR_cooperative_matrix) variant of T.gemm on Vulkan.

fp16 GEMMs get a "vulkan.spirv1.3.coopmat" variant that requires the device token
vk.coopmat.f16.f16.f32.f32.16x8x16 (compiler/codegen/spirv/README.md). Three tests, Vulkan only:

- selection: the bundle carries the variant; a device that reports the shape runs it, any other
  (lavapipe: no cooperative matrices) runs the plain variant, whose explain text names the missing
  token. Results are checked either way.
- emulated: the same code with the matrix instructions replaced by plain loops
  (TL_SPIRV_COOPMAT_EMULATED=1 at pack time; each lane holds 4 elements of an accumulator, the
  multiply-add reads its operands from shared memory, loops kept rolled so that a driver compiles
  it quickly), run on whatever Vulkan device there is (lavapipe in CI): checks operand addressing, the transposed 16x8x16 tiling, the 2-D warp grid's dropped
  columns and the accumulator conversions against float64, for several tiles, transposes, an
  edge-sized problem and an epilogue.
- on the device: the real cooperative-matrix variant against float64; skips unless the device
  reports the shape (runs on the H200's NVIDIA driver).
"""

import os
import re
import struct
import subprocess

import numpy as np
import pytest

import tlc_util
import tlc_kernels_gemm as KG
from tlc_util import assert_close, random

TOKEN = "vk.coopmat.f16.f16.f32.f32.16x8x16"

# (M, N, K, block_M, block_N, block_K, threads, trans_A, trans_B, out_dtype)
CASES = [
    (128, 128, 64, 64, 64, 32, 128, False, False, "float32"),    # 2x2 warp grid (dropped columns)
    (100, 72, 48, 64, 64, 32, 128, False, False, "float16"),     # edges, fp16 output
    (64, 64, 32, 64, 32, 32, 64, False, False, "float32"),       # 2 warps
    (96, 80, 64, 32, 32, 32, 32, False, False, "float32"),       # one warp: paired column tiles
    (128, 128, 64, 64, 64, 32, 128, True, False, "float32"),     # A stored K x M
    (256, 192, 96, 128, 128, 32, 256, False, False, "float16"),  # 8 warps
]


def _vulkan_only(target):
    if target != "vulkan":
        pytest.skip("cooperative matrices are a Vulkan variant")


def _runnable():
    why = "TL_CONFORMANCE_COMPILE_ONLY=1" if tlc_util.COMPILE_ONLY else tlc_util.cannot_run("vulkan")
    if why:
        pytest.skip(f"compiled only ({why})")


def _device_tokens(kernel):
    return set(kernel._prepare().device.describe().get("vk_features", []))


def _run(kernel, case, rng):
    M, N, K, _, _, _, _, ta, tb, out = case
    a, a64 = random(rng, (K, M) if ta else (M, K), "float16")
    b, b64 = random(rng, (N, K) if tb else (K, N), "float16")
    c = kernel(a, b)
    ref = (a64.T if ta else a64) @ (b64.T if tb else b64)
    assert_close(c, ref, out)


def _compile(case):
    M, N, K, bm, bn, bk, threads, ta, tb, out = case
    return tlc_util.compile(KG.matmul(M, N, K, bm, bn, bk, trans_A=ta, trans_B=tb, in_dtype="float16",
                                      out_dtype=out, threads=threads), out_idx=[2], target="vulkan")


def _variant_ids(kernel):
    import tilelang_runtime as trt
    rt = trt.Runtime(backends=["cpu"], ignore_environment=True)
    return [v["id"] for v in rt.open_bundle(kernel.bundle_path).kernel(kernel.kernel_name).variants]


def _module(kernel, variant, tmp_path):
    """The SPIR-V words of `variant` (tl-pack extract)."""
    from tilelang import toolchain
    out = tmp_path / (variant + ".spv")
    subprocess.run([toolchain.tl_pack_path(), "extract", kernel.bundle_path, "--kernel", kernel.kernel_name,
                    "--variant", variant, "-o", str(out)], check=True, capture_output=True)
    data = out.read_bytes()
    return out, list(struct.unpack(f"<{len(data) // 4}I", data))


def _instructions(words):
    """(opcode, operand words) of every instruction after the 5-word header."""
    i, out = 5, []
    while i < len(words):
        count, op = words[i] >> 16, words[i] & 0xFFFF
        assert count > 0, f"word {i}: zero word count"
        out.append((op, words[i + 1:i + count]))
        i += count
    return out


def _string(operands):
    return b"".join(struct.pack("<I", w) for w in operands).split(b"\0", 1)[0].decode()


def _private_arrays_and_loops(words):
    """(elements of all Function-storage array variables, loops, loops marked DontUnroll)."""
    consts, arrays, pointers, elements, loops, rolled = {}, {}, {}, 0, 0, 0
    for op, w in _instructions(words):
        if op == 43:  # OpConstant
            consts[w[1]] = w[2]
        elif op == 28:  # OpTypeArray
            arrays[w[0]] = consts[w[2]]
        elif op == 32:  # OpTypePointer
            pointers[w[0]] = w[2]
        elif op == 59 and w[2] == 7:  # OpVariable, Function storage
            elements += arrays.get(pointers[w[0]], 0)
        elif op == 246:  # OpLoopMerge
            loops += 1
            rolled += bool(w[2] & 2)
    return elements, loops, rolled


def _wide_loads(insts, storage_class=12):
    """OpLoads of a 4 x 32-bit unsigned vector (the wide copies' 16-byte words) through pointers of
    `storage_class` (12 StorageBuffer: from the tensors; 7 Function: from the prefetch registers)."""
    u32 = {w[0] for op, w in insts if op == 21 and w[1:] == [32, 0]}  # OpTypeInt 32 unsigned
    uvec4 = {w[0] for op, w in insts if op == 23 and w[1] in u32 and w[2] == 4}  # OpTypeVector
    pointers = {w[0]: w[1] for op, w in insts if op == 32}  # OpTypePointer: storage class
    ptr_class = {w[1]: pointers.get(w[0]) for op, w in insts if op == 65}  # OpAccessChain results
    return sum(1 for op, w in insts if op == 61 and w[0] in uvec4 and ptr_class.get(w[2]) == storage_class)


def test_coopmat_module_structure(target, tmp_path):
    """Capabilities, extensions, memory model and the KHR opcodes (4456 type, 4457 load, 4458 store,
    4459 mul-add) are in the coopmat module and nowhere in the plain one. Debian's spirv-val predates
    SPV_KHR_cooperative_matrix (the module is recorded as not validated); $TL_SPIRV_VAL naming a newer
    spirv-val validates it here too."""
    _vulkan_only(target)
    kernel = _compile(CASES[0])
    path, words = _module(kernel, "vulkan.spirv1.3.coopmat", tmp_path)
    insts = _instructions(words)
    ops = [op for op, _ in insts]
    caps = {w[0] for op, w in insts if op == 17}
    exts = {_string(w) for op, w in insts if op == 10}
    assert {1, 9, 5345, 6022} <= caps, caps  # Shader, Float16, VulkanMemoryModel, CooperativeMatrixKHR
    assert {"SPV_KHR_cooperative_matrix", "SPV_KHR_vulkan_memory_model"} <= exts, exts
    assert [w for op, w in insts if op == 14] == [[0, 3]]  # OpMemoryModel Logical Vulkan
    types = [w for op, w in insts if op == 4456]
    assert len(types) == 3, types  # A 16x16 f16, B 16x8 f16, accumulator 16x8 f32
    for opcode in (4457, 4458, 4459):
        assert opcode in ops, opcode
    # The A and B tile copies read 16-byte words (8 halves) through a NonWritable uvec4 view of the
    # tensor's binding, into registers: before the k loop, and inside it for the next k tile before
    # the k-steps (register prefetch); the shared stores take them from the registers. The plain
    # variant copies element by element (no alignment guard needed).
    assert _wide_loads(insts) == 4, _wide_loads(insts)
    assert _wide_loads(insts, storage_class=7) == 2, _wide_loads(insts, storage_class=7)
    _, plain = _module(kernel, "vulkan.spirv1.3", tmp_path)
    plain_insts = _instructions(plain)
    plain_ops = {op for op, _ in plain_insts}
    assert not plain_ops & {4456, 4457, 4458, 4459}
    assert _wide_loads(plain_insts) == 0
    import tilelang_runtime as trt
    rt = trt.Runtime(backends=["cpu"], ignore_environment=True)
    v = next(v for v in rt.open_bundle(kernel.bundle_path).kernel(kernel.kernel_name).variants
             if v["id"] == "vulkan.spirv1.3.coopmat")
    assert v["priority"] == 2
    val = os.environ.get("TL_SPIRV_VAL")
    if val:
        r = subprocess.run([val, "--target-env", "vulkan1.1", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_coopmat_variant_selection(target, rng):
    _vulkan_only(target)
    case = CASES[0]
    kernel = _compile(case)
    assert _variant_ids(kernel) == ["vulkan.spirv1.3", "vulkan.spirv1.3.coopmat"]
    _runnable()
    p = kernel._prepare()
    if TOKEN in _device_tokens(kernel):
        assert p.variant["id"] == "vulkan.spirv1.3.coopmat", p.explain()
    else:
        assert p.variant["id"] == "vulkan.spirv1.3", p.explain()
        assert "vulkan.spirv1.3.coopmat" in p.explain() and TOKEN in p.explain(), p.explain()
    _run(kernel, case, rng)


def test_coopmat_not_built_for_other_operand_types(target):
    _vulkan_only(target)
    for dtype in ("bfloat16", "float32"):
        kernel = tlc_util.compile(KG.matmul(64, 64, 32, 64, 64, 32, in_dtype=dtype, out_dtype="float32"),
                                  out_idx=[2], target="vulkan")
        assert _variant_ids(kernel) == ["vulkan.spirv1.3"], dtype


def _epilogue(rng, variant):
    M, N, K = 96, 80, 64
    kernel = tlc_util.compile(KG.matmul_bias_act(M, N, K, 64, 64, 32, "relu"), out_idx=[3], target="vulkan")
    _runnable()
    assert kernel._prepare().variant["id"] == variant
    a, a64 = random(rng, (M, K), "float16")
    b, b64 = random(rng, (K, N), "float16")
    bias, bias64 = random(rng, (N,), "float16")
    c = kernel(a, b, bias)
    assert_close(c, np.maximum(a64 @ b64 + bias64, 0.0), "float16")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"_t{c[6]}" +
                         ("_tA" if c[7] else "") + ("_tB" if c[8] else "") + "_" + c[9])
def test_coopmat_on_device(target, rng, case):
    _vulkan_only(target)
    kernel = _compile(case)
    _runnable()
    if TOKEN not in _device_tokens(kernel):
        pytest.skip(f"the Vulkan device reports no {TOKEN} (lavapipe has no cooperative matrices)")
    assert kernel._prepare().variant["id"] == "vulkan.spirv1.3.coopmat"
    _run(kernel, case, rng)


def test_coopmat_on_device_with_epilogue(target, rng):
    _vulkan_only(target)
    kernel = tlc_util.compile(KG.matmul(64, 64, 32, 64, 64, 32), target="vulkan")
    _runnable()
    if TOKEN not in _device_tokens(kernel):
        pytest.skip(f"the Vulkan device reports no {TOKEN} (lavapipe has no cooperative matrices)")
    _epilogue(rng, "vulkan.spirv1.3.coopmat")


def _flash_attention(rng, variant):
    """FlashAttention's two gemms: S = QK^T (its accumulator is read by the softmax inside the kv loop,
    so the matrices live across the k-step loop only) and O += PV (O rescaled every kv block)."""
    import tlc_kernels_attention as KA
    from test_conformance_attention import _attention
    b, h, s, d = 2, 2, 100, 32
    kernel = tlc_util.compile(KA.flash_attention(b, h, h, s, s, d, True, block_M=64, block_N=32), out_idx=[3],
                              target="vulkan")
    _runnable()
    if variant.endswith(".coopmat") and TOKEN not in _device_tokens(kernel):
        pytest.skip(f"the Vulkan device reports no {TOKEN} (lavapipe has no cooperative matrices)")
    assert kernel._prepare().variant["id"] == variant
    q, q64 = random(rng, (b, h, s, d), "float16")
    k, k64 = random(rng, (b, h, s, d), "float16")
    v, v64 = random(rng, (b, h, s, d), "float16")
    assert_close(kernel(q, k, v), _attention(q64, k64, v64, True), "float16", rtol=1e-2, atol=1e-2)


def test_coopmat_on_device_flash_attention(target, rng):
    _vulkan_only(target)
    _flash_attention(rng, "vulkan.spirv1.3.coopmat")


# The emulated variant last: on a device with the real matrices, the real variant's results come first.
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"_t{c[6]}" +
                         ("_tA" if c[7] else "") + ("_tB" if c[8] else "") + "_" + c[9])
def test_coopmat_emulated(target, rng, case, monkeypatch, tmp_path):
    _vulkan_only(target)
    monkeypatch.setenv("TL_SPIRV_COOPMAT_EMULATED", "1")
    monkeypatch.setenv("TL_CACHE_DIR", str(tmp_path))
    kernel = _compile(case)
    assert "vulkan.spirv1.3.coopmat_emulated" in _variant_ids(kernel)
    _, words = _module(kernel, "vulkan.spirv1.3.coopmat_emulated", tmp_path)
    elements, loops, rolled = _private_arrays_and_loops(words)
    # Each lane holds 4 elements per accumulator and no operand copies; loops stay rolled. The
    # emulation that kept whole matrices per lane (3584 private floats per thread for the first
    # case, 128-trip loops without DontUnroll) stalled NVIDIA's pipeline compiler for minutes.
    assert elements <= 512, f"{elements} Function-array elements per thread"
    assert rolled >= loops - 4, f"{rolled} of {loops} loops DontUnroll"
    _runnable()
    p = kernel._prepare()
    assert p.variant["id"] == "vulkan.spirv1.3.coopmat_emulated"
    created = re.search(r"pipeline created in ([0-9.]+) ms", p.explain())
    assert created and float(created.group(1)) < 20000, p.explain()  # the driver's compile, not a stall
    _run(kernel, case, rng)


def test_coopmat_emulated_with_epilogue(target, rng, monkeypatch, tmp_path):
    _vulkan_only(target)
    monkeypatch.setenv("TL_SPIRV_COOPMAT_EMULATED", "1")
    monkeypatch.setenv("TL_CACHE_DIR", str(tmp_path))
    _epilogue(rng, "vulkan.spirv1.3.coopmat_emulated")


def test_coopmat_emulated_flash_attention(target, rng, monkeypatch, tmp_path):
    _vulkan_only(target)
    monkeypatch.setenv("TL_SPIRV_COOPMAT_EMULATED", "1")
    monkeypatch.setenv("TL_CACHE_DIR", str(tmp_path))
    _flash_attention(rng, "vulkan.spirv1.3.coopmat_emulated")
