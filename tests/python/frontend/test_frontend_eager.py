"""Upstream's eager style under @tilelang.jit: T.const sizes bound from the
arguments, parameters declared by statements, T.empty outputs returned."""

import numpy as np
import pytest

import fe_util
import tilelang
import tilelang.language as T
from tilelang.eager import EagerJIT

P = fe_util.load(fe_util.HERE / "fe_programs.py")


def test_eager_function_is_detected():
    assert isinstance(P.eager_add_scale, EagerJIT)
    assert isinstance(P.jit_scale, tilelang.JITImpl)


def test_get_tir_with_sizes_as_keywords():
    f = P.eager_add_scale.get_tir(M=64, N=48, block_M=32, block_N=16, factor=0.5)
    assert f.name == "eager_add_scale"
    assert [p.name for p in f.params] == ["A", "B", "C"]
    assert f.attrs["out_idx"] == [2]
    head = f.script().splitlines()[2]
    assert head.startswith("func @eager_add_scale(A: tensor[64, 48] f32, B: tensor[64, 48] f32, C: tensor[64, 48] f32)")
    assert "0.5:f32" in f.script()


def test_unbound_sizes_are_reported():
    with pytest.raises(tilelang.TileLangError, match="T.const M, N not bound"):
        P.eager_add_scale.get_tir(block_M=32, block_N=16)


class FakeKernel:
    def __init__(self, prim):
        self.prim_func = prim
        self.calls = []

    def __call__(self, *arrays):
        self.calls.append(arrays)
        return np.full(arrays[0].shape, 5.0, np.float32)


def test_call_binds_sizes_from_arrays_compiles_once_per_shape_and_returns_outputs(monkeypatch):
    compiled = []

    def fake_compile(prim, out_idx=None, target="auto", **kw):
        compiled.append((prim, out_idx))
        return FakeKernel(prim)

    monkeypatch.setattr(tilelang.compiler, "compile", fake_compile)
    jit = P.eager_add_scale
    a = np.ones((40, 30), np.float32)
    b = np.ones((40, 30), np.float32)
    out = jit(a, b, 16, 16)
    assert out.shape == (40, 30) and (out == 5).all()
    jit(a, b, 16, 16)
    assert len(compiled) == 1
    prim, out_idx = compiled[0]
    assert out_idx == [2] and "tensor[40, 30] f32" in prim.script()
    jit(np.ones((8, 30), np.float32), np.ones((8, 30), np.float32), 16, 16)
    assert len(compiled) == 2
    with pytest.raises(tilelang.TileLangError, match="T.const N is 31 here but 30 elsewhere"):
        jit(a, np.ones((40, 31), np.float32), 16, 16)
    with pytest.raises(tilelang.TileLangError, match="missing tensor arguments B"):
        jit(a, block_M=16, block_N=16)


def test_const_and_empty_outside_eager_functions_are_errors():
    with pytest.raises(tilelang.TileLangError, match="T.const is only valid"):
        T.const("M")
    with pytest.raises(tilelang.TileLangError, match="T.empty is only valid"):
        T.empty((4,), "float32")
