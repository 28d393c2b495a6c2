"""Conformance: FlashAttention forward (MHA/GQA x causal) and split-KV flash decoding."""

import numpy as np
import pytest

import tlc_util
import tlc_kernels_attention as K
from tlc_util import assert_close, random


def _attention(q, k, v, causal):
    """Reference in float64. q: (B, H, Sq, D); k, v: (B, Hkv, Skv, D)."""
    groups = q.shape[1] // k.shape[1]
    k = np.repeat(k, groups, axis=1)
    v = np.repeat(v, groups, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        sq, skv = q.shape[2], k.shape[2]
        mask = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + (skv - sq)
        s = np.where(mask, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("batch,heads,kv_heads,seq_q,seq_kv", [(2, 2, 2, 100, 100), (1, 4, 2, 70, 90)],
                         ids=["mha", "gqa"])
def test_flash_attention(target, rng, batch, heads, kv_heads, seq_q, seq_kv, causal):
    dim = 32
    prog = K.flash_attention(batch, heads, kv_heads, seq_q, seq_kv, dim, causal, block_M=64, block_N=32)
    kernel = tlc_util.compile(prog, out_idx=[3], target=target)
    q, q64 = random(rng, (batch, heads, seq_q, dim), "float16")
    k, k64 = random(rng, (batch, kv_heads, seq_kv, dim), "float16")
    v, v64 = random(rng, (batch, kv_heads, seq_kv, dim), "float16")
    assert_close(kernel(q, k, v), _attention(q64, k64, v64, causal), "float16", rtol=1e-2, atol=1e-2)


def test_flash_decoding(target, rng):
    batch, heads, kv_heads, seqlen, dim, splits = 2, 8, 2, 300, 32, 3
    prog = K.flash_decoding(batch, heads, kv_heads, seqlen, dim, num_split=splits, block_N=32)
    kernel = tlc_util.compile(prog, out_idx=[5], target=target)
    q, q64 = random(rng, (batch, heads, dim), "float16")
    k, k64 = random(rng, (batch, kv_heads, seqlen, dim), "float16")
    v, v64 = random(rng, (batch, kv_heads, seqlen, dim), "float16")
    glse = np.zeros((batch, heads, splits), np.float32)
    partial = np.zeros((batch, heads, splits, dim), np.float32)
    out = kernel(q, k, v, glse, partial)
    ref = _attention(q64[:, :, None, :], k64, v64, causal=False)[:, :, 0, :]
    assert_close(out, ref, "float16", rtol=1e-2, atol=1e-2)


def test_flash_decoding_two_launches(target, rng):
    """The same two passes compiled as two functions and launched one after the other."""
    batch, heads, kv_heads, seqlen, dim, splits = 2, 8, 2, 300, 32, 3
    sizes = dict(batch=batch, heads=heads, kv_heads=kv_heads, seqlen_kv=seqlen, dim=dim, num_split=splits, block_N=32)
    split = tlc_util.compile(K.flash_decoding(**sizes, part="split"), target=target)
    combine = tlc_util.compile(K.flash_decoding(**sizes, part="combine"), out_idx=[2], target=target)
    q, q64 = random(rng, (batch, heads, dim), "float16")
    k, k64 = random(rng, (batch, kv_heads, seqlen, dim), "float16")
    v, v64 = random(rng, (batch, kv_heads, seqlen, dim), "float16")
    glse = np.zeros((batch, heads, splits), np.float32)
    partial = np.zeros((batch, heads, splits, dim), np.float32)
    split(q, k, v, glse, partial)
    out = combine(glse, partial)
    ref = _attention(q64[:, :, None, :], k64, v64, causal=False)[:, :, 0, :]
    assert_close(out, ref, "float16", rtol=1e-2, atol=1e-2)
