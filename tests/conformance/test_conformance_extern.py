"""Conformance: T.import_source + T.call_extern (upstream's fast-decoding dequantize examples) on
CUDA, against a numpy model of the decoder; every other target must refuse the kernel at compile
time naming the kernel, the extern function and the target.

The imported decoder is upstream's lop3 trick, written anew: one 32-bit word w of 8 unsigned
nibbles (4 int8 bytes, little-endian) becomes 8 halves, h[2i] = (w >> 4i) & 15 and
h[2i + 1] = (w >> (4i + 16)) & 15, through lop3.b32 (0x6400 | nibble: 1024 + nibble as f16) and
sub.f16x2 (minus 1024). Two ways a thread's buffers reach it: per-thread copies of thread-level
T.alloc_local buffers (the GEMV's; shared memory here) and local arrays allocated inside a loop
(the mxfp4 GEMM's; registers)."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
import tlc_util

DECODE = r"""
template <typename T1, typename T2>
__device__ void tlc_decode_u4(T1 *in, T2 *out) {
  uint *h = reinterpret_cast<uint *>(out);
  uint const w = *reinterpret_cast<uint *>(in);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    asm volatile("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(h[i]) : "r"(w >> (4 * i)), "n"(0x000f000f),
                 "n"(0x64006400), "n"((0xf0 & 0xcc) | 0xaa));
    asm volatile("sub.f16x2 %0, %1, %2;\n" : "=r"(h[i]) : "r"(h[i]), "r"(0x64006400));
  }
}
"""


def decode_thread_locals(N, threads=128):
    @T.prim_func
    def decode_locals(Q: T.Tensor((N, 4), "int8"), O: T.Tensor((N, 8), "float16")):
        with T.Kernel(N // threads, threads=threads) as bx:
            q = T.alloc_local((4,), "int8")
            d = T.alloc_local((8,), "float16")
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            T.import_source(DECODE)
            for v in T.vectorized(4):
                q[v] = Q[bx * threads + tx, v]
            T.call_extern("tlc_decode_u4", T.access_ptr(q, "r"), T.access_ptr(d, "w"), dtype="float16")
            for j in T.serial(8):
                O[bx * threads + tx, j] = d[j]
    return decode_locals


def decode_loop_registers(N, threads=128):
    @T.prim_func
    def decode_regs(Q: T.Tensor((N, 4), "int8"), O: T.Tensor((N, 8), "float16")):
        with T.Kernel(N // threads, threads=threads) as bx:
            Q_s = T.alloc_shared((threads, 4), "int8")
            tx = T.get_thread_binding()
            T.import_source(DECODE)
            for _ in T.serial(1):
                T.copy(Q[bx * threads, 0], Q_s)
                q = T.alloc_local((4,), "int8")
                d = T.alloc_local((8,), "float16")
                for v in T.serial(4):
                    q[v] = Q_s[tx, v]
                T.call_extern("tlc_decode_u4", T.address_of(q[0]), T.address_of(d[0]), dtype="float16")
                for j in T.serial(8):
                    O[bx * threads + tx, j] = d[j]
    return decode_regs


def reference(q):
    b = q.astype(np.uint8).astype(np.int64)
    w = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)
    out = np.empty((len(q), 8))
    for i in range(4):
        out[:, 2 * i] = (w >> (4 * i)) & 15
        out[:, 2 * i + 1] = (w >> (4 * i + 16)) & 15
    return out


@pytest.mark.parametrize("style", ["thread_locals", "loop_registers"])
def test_imported_lop3_decoder(target, rng, style):
    N = 512
    prog = (decode_thread_locals if style == "thread_locals" else decode_loop_registers)(N)
    if target != "cuda":
        with pytest.raises(tilelang.TileLangUnimplementedFeature,
                           match=r"T\.call_extern with imported CUDA source runs only on CUDA targets: kernel "
                                 rf"'\w+' calls extern function 'tlc_decode_u4', target {target}"):
            tilelang.compile(prog, out_idx=[1], target=target)
        return
    kernel = tlc_util.compile(prog, out_idx=[1], target=target)
    q = rng.integers(-128, 128, (N, 4)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(kernel(q)).astype(np.float64), reference(q))
