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


@tilelang.jit(target="cpu")
def eager_row_top2(logits, blk_m=16):
    # Upstream's example_topk shape: fragments whose width is a T.const size (constant only
    # once the call's arrays bind it), so the size-learning trace must stop before the body.
    M, N = T.const("M, N")
    logits: T.Tensor([M, N], "float32")
    gates = T.empty([M, 2], "float32")
    idx = T.empty([M, 2], "int32")
    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        frag = T.alloc_fragment([blk_m, N], "float32")
        cand = T.alloc_fragment([blk_m, N], "int32")
        best = T.alloc_fragment([blk_m], "float32")
        best_i = T.alloc_fragment([blk_m], "int32")
        T.copy(logits[bx * blk_m, 0], frag)
        for k in T.serial(2):
            T.fill(cand, -1)
            T.reduce_max(frag, best, dim=1, clear=True)
            for i, j in T.Parallel(blk_m, N):
                cand[i, j] = T.if_then_else(best[i] == frag[i, j], j, cand[i, j])
            T.reduce_max(cand, best_i, dim=1, clear=True)
            for i, j in T.Parallel(blk_m, N):
                frag[i, j] = T.if_then_else(best[i] == frag[i, j], -10000.0, frag[i, j])
            for i in T.Parallel(blk_m):
                gates[bx * blk_m + i, k] = best[i]
                idx[bx * blk_m + i, k] = best_i[i]
    return gates, idx


def test_const_sizes_bound_from_arrays_may_shape_fragments():
    x = np.random.default_rng(7).random((40, 24)).astype(np.float32)
    gates, idx = eager_row_top2(x, blk_m=16)
    ref = np.argsort(-x.astype(np.float64), axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_array_equal(gates, np.take_along_axis(x, ref, 1))
    # without arrays the sizes stay unbound, named as before
    with pytest.raises(tilelang.TileLangError, match="T.const M, N not bound"):
        eager_row_top2.get_tir(blk_m=16)
