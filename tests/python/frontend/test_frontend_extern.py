"""T.import_source + T.call_extern (upstream's fast-decoding dequantize examples: an imported
CUDA source with inline-PTX lop3 decode functions, called per thread with pointers to local
buffers). The Tile IR they trace to, the per-thread pointers of thread-level TIR, the CUDA
source (imported text verbatim before the kernel; sm_90a cubin and compute_80 PTX through
NVRTC, skipped without a CUDA toolkit), and the errors: no imported source, a name the source
does not define, a pointer into a tensor, and every non-CUDA target."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.errors import TileLangCompileError, TileLangError, TileLangUnimplementedFeature

# Upstream's decode_i4u_to_f16 in spirit (examples/dequantize_gemm/quantize/lop3.py), written
# anew: 8 unsigned 4-bit values of one 32-bit word to 8 halves with lop3 + sub.f16x2.
DECODE = r"""
template <typename T1, typename T2>
__device__ void decode_u4_to_f16(T1 *in, T2 *out, const int N = 8) {
  uint *h = reinterpret_cast<uint *>(out);
  uint const w = *reinterpret_cast<uint *>(in);
#pragma unroll
  for (int i = 0; i < N / 2; i++) {
    asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(h[i]) : "r"(w >> (4 * i)), "n"(0x000f000f),
                 "n"(0x64006400), "n"((0xf0 & 0xcc) | 0xaa));
    asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(h[i]) : "r"(h[i]), "r"(0x64006400));
  }
}
"""


def block_decode(name="decode_u4_to_f16", source=DECODE, tvm_order=False):
    """Every thread decodes row 0 of Q into a local array (no thread index: block-level code)."""

    @T.prim_func
    def k(Q: T.Tensor((4, 4), "int8"), O: T.Tensor((8,), "float16")):
        with T.Kernel(1, threads=32):
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((8,), "float16")
            T.import_source(source)
            T.import_source(source)  # the same text once
            for i in T.serial(4):
                q[i] = Q[0, i]
            if tvm_order:
                T.call_extern("handle", name, T.address_of(q[0]), T.access_ptr(d, "w"), 8)
            else:
                T.call_extern(name, T.access_ptr(q, "r"), T.access_ptr(d, "w"), dtype="float16")
            for j in T.Parallel(8):
                O[j] = d[j]
    return k


def gemv_decode(N=64, K=256, reduce_thread=8, n_partition=4):
    """upstream's dequant GEMV shape (fast_decoding=True): per-thread locals under T.thread_binding."""
    micro_k = 8
    block_K = reduce_thread * micro_k

    @T.prim_func
    def main(A: T.Tensor((1, K), "float16"), B: T.Tensor((N, K // 2), "int8"), C: T.Tensor((1, N), "float32")):
        with T.Kernel(T.ceildiv(N, n_partition), 1, threads=(reduce_thread, n_partition)) as (bx, by):
            a_local = T.alloc_local((micro_k,), "float16")
            q_local = T.alloc_local((micro_k // 2,), "int8")
            b_local = T.alloc_local((micro_k,), "float16")
            acc = T.alloc_local((1,), "float32")
            red = T.alloc_local((1,), "float32")
            kr = T.thread_binding(0, reduce_thread, thread="threadIdx.x")
            ni = T.thread_binding(0, n_partition, thread="threadIdx.y")
            T.import_source(DECODE)
            T.clear(acc)
            for ko in T.serial(T.ceildiv(K, block_K)):
                for v in T.vectorized(micro_k):
                    a_local[v] = A[by, ko * block_K + kr * micro_k + v]
                for v in T.vectorized(micro_k // 2):
                    q_local[v] = B[bx * n_partition + ni, ko * (block_K // 2) + kr * (micro_k // 2) + v]
                T.call_extern("decode_u4_to_f16", T.access_ptr(q_local, "r"), T.access_ptr(b_local, "w"),
                              dtype="float16")
                for ki in T.serial(micro_k):
                    acc[0] += T.cast(a_local[ki], "float32") * T.cast(b_local[ki], "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], kr, dtype="handle"))
            if kr == 0:
                C[by, bx * n_partition + ni] = red[0]
    return main


def _ir_quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def test_tile_ir_carries_the_source_and_the_call():
    text = block_decode().script()
    lines = text.splitlines()
    imports = [ln for ln in lines if ln.startswith("  import_source ")]
    assert imports == ["  import_source " + _ir_quoted(DECODE)]
    assert lines.index(imports[0]) < next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("kernel "))
    assert re.search(r"^    call_extern f16 decode_u4_to_f16\(&q\[0\], &d\[0\]\) loc\(", text, re.M), text
    # TVM's argument order; a `handle` result is no value (i32 in Tile IR); values pass as they are.
    text = block_decode(tvm_order=True).script()
    assert re.search(r"^    call_extern i32 decode_u4_to_f16\(&q\[0\], &d\[0\], 8\) loc\(", text, re.M), text


def test_thread_level_locals_are_passed_per_thread():
    text = gemv_decode().script()
    m = re.search(r"call_extern f16 decode_u4_to_f16\(&(\w+)\[(\w+), (\w+), 0\], &(\w+)\[(\w+), (\w+), 0\]\)", text)
    assert m, text
    # each thread's own copy: the thread indices of the T.Parallel over the threads
    par = re.search(r"parallel \((\w+), (\w+)\) in \(4, 8\)", text)
    assert par and m.group(2, 3) == par.group(1, 2) == m.group(5, 6), text
    assert m.group(1).startswith("q_local") and m.group(4).startswith("b_local")


def test_call_extern_needs_imported_source():
    with pytest.raises(TileLangError, match=r"T\.call_extern\('decode'\): no device source was imported; "
                                            r"call T\.import_source\(src\) with the source that defines decode first"):
        @T.prim_func
        def k(Q: T.Tensor((4,), "int8")):
            with T.Kernel(1, threads=32):
                q = T.alloc_local((4,), "int8")
                T.call_extern("decode", T.access_ptr(q, "rw"), dtype="handle")


def test_pointer_into_a_tensor_is_passed():
    # a tensor parameter's element (global memory): imported decode code may load its weights itself
    @T.prim_func
    def k(Q: T.Tensor((4,), "int8")):
        with T.Kernel(1, threads=32):
            T.import_source("__device__ void f(signed char* p) {}")
            T.call_extern("f", T.address_of(Q[2]), dtype="handle")

    text = k.script()
    assert re.search(r"^\s*call_extern i32 f\(&Q\[2\]\) loc\(", text, re.M), text


def test_name_missing_from_the_source_fails_at_verification():
    with pytest.raises(TileLangCompileError, match=r"call_extern decode_u8: expected a function named 'decode_u8' in "
                                                   r"the imported source \(T\.import_source\), found no such name"):
        tilelang.compile(block_decode(name="decode_u8"), target="cpu")


@pytest.mark.parametrize("target", ["cpu", "vulkan"])
def test_non_cuda_targets_name_kernel_function_and_target(target):
    with pytest.raises(TileLangUnimplementedFeature) as info:
        tilelang.compile(block_decode(), target=target)
    assert ("T.call_extern with imported CUDA source runs only on CUDA targets: kernel 'k' calls extern "
            f"function 'decode_u4_to_f16', target {target}") in str(info.value)
    assert info.value.target == target


def test_cuda_sm90a_and_ptx_compile_with_the_imported_source():
    from test_frontend_cuda import _cuda_toolkit_missing
    reason = _cuda_toolkit_missing()
    if reason:
        pytest.skip(reason)
    for prim in (block_decode(), gemv_decode()):
        src = tilelang.compile(prim, target="sm_90a,ptx").get_kernel_source()
        imported = src.find(DECODE)
        assert imported >= 0, src
        assert imported < src.find('extern "C" __global__')
        assert re.search(r"decode_u4_to_f16\(&\w+\[[^\]]*\], &\w+\[[^\]]*\]\);", src), src


def test_locals_of_a_nested_block_keep_the_call_with_their_per_thread_code():
    """upstream's mxfp4 macro: locals allocated inside the pipelined loop, a call between a load loop
    and a store loop that index by the thread: all three in one T.Parallel over the threads."""

    @T.prim_func
    def k(Q: T.Tensor((128, 4), "int8"), O: T.Tensor((128, 8), "float16")):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((128, 4), "int8")
            tx = T.get_thread_binding()
            T.import_source(DECODE)
            for _ in T.serial(1):
                T.copy(Q[0, 0], Q_s)
                q = T.alloc_local((4,), "int8")
                d = T.alloc_local((8,), "float16")
                for v in T.serial(4):
                    q[v] = Q_s[tx, v]
                T.call_extern("decode_u4_to_f16", T.address_of(q[0]), T.address_of(d[0]), dtype="float16")
                for j in T.serial(8):
                    O[tx, j] = d[j]

    text = k.script()
    par = re.search(r"parallel \((\w+)\) in \(128\)[^{]*\{\n(.*?)\n      \}\n", text, re.S)
    assert par, text
    var, body = par.group(1), par.group(2)
    assert f"q[v] = Q_s[{var}, v]" in body and "call_extern f16 decode_u4_to_f16(&q[0], &d[0])" in body, text
    assert f"O[{var}, j] = d[j]" in body, text
