"""Both authoring styles (factory returning a prim_func, @tilelang.jit), the
emit_ir entry point used by tl-pack build, tilelang.compile's targets, and the
compiled kernel's argument handling (with the runtime replaced by a fake)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilelang
import tilelang.language as T

PKG_PARENT = str(pathlib.Path(tilelang.__file__).resolve().parent.parent)


def scale(N, factor, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 64)) as bx:
            for i in T.Parallel(64):
                if bx * 64 + i < N:
                    Y[bx * 64 + i] = X[bx * 64 + i] * factor
    return main


def test_factory_style_gives_a_prim_func_per_call():
    f1, f2 = scale(100, 2.0), scale(200, 2.0)
    assert isinstance(f1, tilelang.PrimFunc) and f1.name == "main"
    assert "tensor[100] f32" in f1.script() and "tensor[200] f32" in f2.script()
    assert tilelang.emit(f1) == f1.script()
    renamed = tilelang.emit(f1, name="scale_100")
    assert renamed.splitlines()[2].startswith("func @scale_100(")
    assert f1.name == "main"  # renaming makes a copy


def test_jit_style_traces_without_compiling_and_caches_per_arguments(monkeypatch):
    compiled = []

    def fake_compile(func, out_idx=None, target="auto", **kw):
        compiled.append((func.script(), out_idx, target))
        return object()

    monkeypatch.setattr(tilelang.compiler, "compile", fake_compile)

    @tilelang.jit(out_idx=[-1])
    def jscale(N, factor=1.0):
        return scale(N, factor)

    assert isinstance(jscale.get_tir(128, factor=3.0), tilelang.PrimFunc)
    assert compiled == []
    k1 = jscale(128, factor=3.0)
    k2 = jscale(128, factor=3.0)
    k3 = jscale(128, factor=4.0)
    assert k1 is k2 and k1 is not k3
    assert len(compiled) == 2 and compiled[0][1] == [-1] and compiled[0][2] == "auto"
    assert "3.0:f32" in compiled[0][0] and "4.0:f32" in compiled[1][0]


def test_jit_without_parentheses_and_bad_factory():
    @tilelang.jit
    def not_a_factory(n):
        return n

    with pytest.raises(tilelang.TileLangError, match="must return a T.prim_func"):
        not_a_factory.get_tir(3)


def test_unknown_target_and_non_prim_func():
    with pytest.raises(tilelang.TileLangError, match="unknown target 'tpu'"):
        tilelang.compile(scale(100, 2.0), target="tpu")
    with pytest.raises(tilelang.TileLangError, match="expects a T.prim_func"):
        tilelang.compile(lambda: None)


def test_missing_tl_pack_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TL_PACK", str(tmp_path / "no-such-tl-pack"))
    with pytest.raises(tilelang.TileLangCompileError, match="TL_PACK=.*no-such-tl-pack is not an executable"):
        tilelang.compile(scale(100, 2.0), out_idx=[1], target="cpu")


def run_emit_ir(tmp_path, source, *args):
    (tmp_path / "user_kernels.py").write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=PKG_PARENT)
    return subprocess.run([sys.executable, "-m", "tilelang.emit_ir", "--module", "user_kernels", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True)


KERNELS = """\
import tilelang
import tilelang.language as T

def copy_kernel(M, N, block):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            s = T.alloc_shared((block, N), "float16")
            T.copy(A[bx * block, 0], s)
            T.copy(s, B[bx * block, 0])
    return main

def broken(M):
    @T.prim_func
    def main(A: T.Tensor((M, 64), "float16")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((16, 32), "float16")
            T.copy(A[0:16, 0:64], s)
    return main

@tilelang.jit(out_idx=[1])
def jitted(M):
    return copy_kernel(M, 32, 16)

def crashes(M):
    return {}[M]
"""


def test_emit_ir_prints_renamed_tile_ir(tmp_path):
    r = run_emit_ir(tmp_path, KERNELS, "--factory", "copy_kernel", "--kwargs",
                    json.dumps({"M": 100, "N": 32, "block": 16}), "--name", "copy_100")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tileir 1\n\nfunc @copy_100(A: tensor[100, 32] f16, B: tensor[100, 32] f16)")
    assert 'loc("user_kernels.py", 6)' in r.stdout
    assert "copy A[bx * 16:16, 0:32] -> s" in r.stdout


def test_emit_ir_accepts_a_jit_factory(tmp_path):
    r = run_emit_ir(tmp_path, KERNELS, "--factory", "jitted", "--kwargs", '{"M": 64}', "--name", "k")
    assert r.returncode == 0, r.stderr
    assert "func @k(A: tensor[64, 32] f16" in r.stdout


def test_emit_ir_reports_errors_with_file_and_line(tmp_path):
    r = run_emit_ir(tmp_path, KERNELS, "--factory", "broken", "--kwargs", '{"M": 64}', "--name", "b")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "user_kernels.py:18: T.copy: source shape (16, 64) does not match destination (16, 32)"


def test_emit_ir_reports_python_errors_with_location(tmp_path):
    r = run_emit_ir(tmp_path, KERNELS, "--factory", "crashes", "--kwargs", '{"M": 1}', "--name", "c")
    assert r.returncode == 1
    assert r.stderr.startswith("user_kernels.py:26: KeyError")


def test_emit_ir_bad_factory_name(tmp_path):
    r = run_emit_ir(tmp_path, KERNELS, "--factory", "nope", "--kwargs", "{}", "--name", "c")
    assert r.returncode == 1 and "no factory 'nope'" in r.stderr


class FakePrepared:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)
        args[-1][...] = 7  # "the kernel" writes its output


def make_kernel(func, out_idx):
    k = tilelang.JITKernel(func, "/nonexistent.tlb", out_idx, "cpu", "x86-64-v3", func.script())
    k._prepared = FakePrepared()
    return k


def dyn_copy():
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, 8), "bfloat16"), n: T.int32, B: T.Tensor((M, 8), "float16")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            T.fill(B[bx * 16:bx * 16 + 16, 0:8], n)
    return main


@pytest.fixture
def runtime_binding():
    """The bf16 wrapper needs the binding's DLPack structs; stand in when it is not built."""
    try:
        import tilelang_runtime  # noqa: F401
    except ImportError:
        pytest.skip("tilelang_runtime not importable")


def test_kernel_allocates_outputs_with_dynamic_dims_bound_from_inputs(runtime_binding):
    k = make_kernel(dyn_copy(), out_idx=[-1])
    a = np.zeros((37, 8), np.uint16)  # bfloat16 as bit patterns
    out = k(a, 5)
    assert out.shape == (37, 8) and out.dtype == np.float16 and (out == 7).all()
    args = k._prepared.calls[0]
    # bfloat16 travels as uint16 bits, described to the runtime as bf16 over the same memory
    assert getattr(args[0], "array", args[0]) is a and args[1] == 5


def test_kernel_checks_arguments():
    k = make_kernel(dyn_copy(), out_idx=[2])
    with pytest.raises(tilelang.TileLangError, match="takes 2 arguments"):
        k(np.zeros((4, 8), np.uint16))
    with pytest.raises(tilelang.TileLangError, match="dtype float32 does not match bfloat16"):
        k(np.zeros((4, 8), np.float32), 1)
    with pytest.raises(tilelang.TileLangError, match="dimension 1 is 9, expected 8"):
        k(np.zeros((4, 9), np.uint16), 1)
    with pytest.raises(tilelang.TileLangError, match="C-contiguous"):
        k(np.zeros((8, 4), np.uint16).T, 1)
    with pytest.raises(tilelang.TileLangError, match="scalar parameter n"):
        make_kernel(dyn_copy(), out_idx=[1])
    with pytest.raises(tilelang.TileLangError, match="out of range"):
        make_kernel(dyn_copy(), out_idx=[3])
