"""What the CUDA backend makes of the decode W4A16 kernels (kernels/quant_gemm.py w4a16_gemv and
w4a16_mma), checked on the generated CUDA source and, where nvcc is installed, on its PTX for sm_90a --
no GPU needed. The point of both kernels is few instructions per weight byte, which depends on nvcc
merging each thread's run of elements into one shared-memory access:

- the f16 conversions of the CUDA prelude go through libdevice, not inline asm (nvcc does not merge
  loads or stores across an asm statement): no f16 `asm("cvt...` in the source;
- a value cast to f16 and stored to an f16 buffer is converted once (no tl_f2h(tl_rh(...)));
- PTX: 4 weight bytes per thread in one ld.shared.v4.u8, the fp16 weight tile of w4a16_mma stored
  16 bytes at a time (st.shared.v4.u32), one int -> float conversion per weight byte.

Run: PYTHONPATH=build/python TL_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_w4a16_cuda_source.py
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)
try:
    import tilelang  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "compiler", "python"))
import tilelang  # noqa: E402
from tilelang import toolchain  # noqa: E402

NVCC = os.environ.get("TL_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


@pytest.fixture(scope="module", autouse=True)
def env():
    try:
        os.environ.setdefault("TL_PACK", toolchain.tl_pack_path())
    except Exception as e:  # noqa: BLE001 - no build: skip like the neighbours
        pytest.skip(f"no tl-pack ({e})")
    build = os.environ.get("TL_BUILD_DIR", os.path.join(ROOT, "build"))
    os.environ.setdefault("TL_CACHE_DIR", os.path.join(build, "tilelang-cache"))


def sm90a_source(prog):
    try:
        src = tilelang.compile(prog, target="cuda").get_kernel_source()
    except Exception as e:  # noqa: BLE001
        if "toolkit" in str(e).lower() or "nvrtc" in str(e).lower():
            pytest.skip(f"no CUDA toolchain: {e}")
        raise
    parts = src.split("// ---- ")
    sm90 = [p.split("\n", 1)[1] for p in parts if p.startswith("main_kernel.sm_90a.cu")]
    assert sm90, [p.split("\n", 1)[0] for p in parts]
    return sm90[0]


def ptx_of(source, tmp_path):
    if not os.access(NVCC, os.X_OK):
        pytest.skip(f"no nvcc at {NVCC}")
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    r = subprocess.run([NVCC, "-arch=sm_90a", "-ptx", "-o", str(tmp_path / "k.ptx"), str(cu)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return (tmp_path / "k.ptx").read_text()


def count(ptx, op):
    return len(re.findall(r"^\s*" + re.escape(op) + r"\s", ptx, re.M))


def test_gemv_source_and_ptx(tmp_path):
    from kernels import quant_gemm as qg
    # 64 threads, 16 rows, 128 weights (64 bytes) per k-step: 4 rows x 4 bytes per thread and step
    s = sm90a_source(qg.w4a16_gemv(1, 8192, 8192, block_N=16, block_K=128, threads=64, num_stages=4,
                                   magic_round=True))
    assert 'asm("cvt.f32.f16' not in s and 'asm("cvt.rn.f16.f32' not in s
    assert "12582912.0f" in s  # the rounding constant survives printing (the CPU and CUDA keep the adds)
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "ld.shared.v4.u8") >= 3, "weight bytes not loaded 4 at a time"
    assert count(ptx, "ld.shared.u8") <= 2
    assert count(ptx, "cvt.rn.f32.s16") == 16  # one int -> float conversion per byte (16 bytes per thread)
    assert count(ptx, "ld.shared.v4.f32") >= 4  # a byte's A terms (a0, a1 - 16 a0, -8 a0) in one load


def test_mma_source_and_ptx(tmp_path):
    from kernels import quant_gemm as qg
    s = sm90a_source(qg.w4a16_mma(16, 8192, 8192, block_N=32, num_stages=4, threads=128, magic_round=True))
    assert 'asm("cvt.f32.f16' not in s and 'asm("cvt.rn.f16.f32' not in s
    assert "tl_f2h(tl_rh(" not in s  # T.cast(x, f16) stored to an f16 tile: one conversion
    ptx = ptx_of(s, tmp_path)
    assert count(ptx, "ld.shared.v4.u8") == 4 and count(ptx, "ld.shared.u8") == 0
    assert count(ptx, "st.shared.v4.u32") >= 8 and count(ptx, "st.shared.u16") == 0
    assert count(ptx, "cvt.rn.f32.s16") == 16
    assert count(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") >= 8
