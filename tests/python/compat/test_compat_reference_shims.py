"""tools/compat/reference_shims: the torch stand-ins for flash_attn / fla that the compat runner uses
when those packages are missing, checked against straightforward per-sequence, per-row float64 numpy
implementations written here (random inputs, several sequence lengths, causal and not, GQA ratios,
windows, softcap, linear attention with and without normalization and initial state, l2norm).
The shims need torch (skipped without it); the runner's bookkeeping (where the shims go on sys.path,
what the table says) is tested without it."""

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COMPAT = os.path.join(REPO, "tools", "compat")
SHIMS = os.path.join(COMPAT, "reference_shims")


def np_attention(q, k, v, scale, causal=False, window=(-1, -1), softcap=0.0):
    """One sequence, row by row: q [sq, hq, d], k/v [sk, hk, d] float64."""
    sq, hq, _ = q.shape
    sk, hk, dv = v.shape
    out = np.zeros((sq, hq, dv))
    left, right = window
    if causal:
        right = 0
    for h in range(hq):
        kh = h // (hq // hk)
        for i in range(sq):
            keys = [j for j in range(sk)
                    if (right < 0 or j <= i + sk - sq + right) and (left < 0 or j >= i + sk - sq - left)]
            if not keys:
                continue
            s = np.array([float(np.dot(q[i, h], k[j, kh])) * scale for j in keys])
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            w = np.exp(s - s.max())
            w /= w.sum()
            out[i, h] = sum(wj * v[j, kh] for wj, j in zip(w, keys))
    return out


def np_linear_attention(q, k, v, scale, s0=None, z0=None, normalize=False):
    """Recurrent form, step by step: q/k [B, T, H, K], v [B, T, H, V] float64."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    o = np.zeros((B, T, H, V))
    S = np.zeros((B, H, K, V)) if s0 is None else s0.copy()
    z = np.zeros((B, H, K)) if z0 is None else z0[:, 0].copy()
    for t in range(T):
        for b in range(B):
            for h in range(H):
                S[b, h] += np.outer(k[b, t, h], v[b, t, h])
                z[b, h] += k[b, t, h]
                o[b, t, h] = scale * q[b, t, h] @ S[b, h]
                if normalize:
                    o[b, t, h] /= scale * q[b, t, h] @ z[b, h] + 1e-10
    return o, S, z


@pytest.fixture(scope="module")
def shims():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, SHIMS)  # the shims themselves, even where the real packages are installed
    try:
        for m in [m for m in sys.modules if m.split(".")[0] in ("flash_attn", "fla", "_tl_reference_calls")]:
            del sys.modules[m]
        import flash_attn
        import fla.modules.l2norm
        import fla.ops.linear_attn
        import _tl_reference_calls
        assert flash_attn.TL_COMPAT_REFERENCE and fla.TL_COMPAT_REFERENCE
        yield torch, flash_attn, fla.ops.linear_attn, fla.modules.l2norm, _tl_reference_calls
    finally:
        sys.path.remove(SHIMS)
        for m in [m for m in sys.modules if m.split(".")[0] in ("flash_attn", "fla", "_tl_reference_calls")]:
            del sys.modules[m]


@pytest.mark.parametrize("hq,hk", [(4, 4), (8, 4), (8, 2), (6, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_per_sequence_numpy(shims, hq, hk, causal):
    torch, flash_attn, _, _, calls = shims
    rng = np.random.default_rng(hq * 10 + hk + causal)
    d = 16
    # lengths: q and k differ per sequence (q longer, shorter, equal; one empty query, single rows)
    lq = [7, 1, 12, 0, 5, 9]
    lk = [7, 4, 3, 6, 1, 16]
    cq, ck = np.concatenate([[0], np.cumsum(lq)]), np.concatenate([[0], np.cumsum(lk)])
    q = rng.standard_normal((cq[-1], hq, d))
    k = rng.standard_normal((ck[-1], hk, d))
    v = rng.standard_normal((ck[-1], hk, d))
    del calls.calls[:]
    got = flash_attn.flash_attn_varlen_func(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), torch.tensor(cq, dtype=torch.int32),
        torch.tensor(ck, dtype=torch.int32), max(lq), max(lk), 0.0, causal=causal).numpy()
    assert calls.calls == [("flash_attn.flash_attn_varlen_func", "flash_attn")]
    for b in range(len(lq)):
        want = np_attention(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]], d ** -0.5, causal)
        np.testing.assert_allclose(got[cq[b]:cq[b + 1]], want, rtol=1e-10, atol=1e-12, err_msg=f"sequence {b}")
    if causal:  # sequence 2 (12 queries, 3 keys, bottom-right aligned): the first 9 rows see nothing
        assert np.all(got[cq[2]:cq[2] + 9] == 0) and np.all(np.abs(got[cq[2] + 9:cq[3]]).sum(-1) > 0)


@pytest.mark.parametrize("window,softcap,scale", [((2, 1), 0.0, None), ((-1, 3), 0.0, 0.3), ((4, -1), 5.0, None)])
def test_varlen_windows_softcap_and_scale(shims, window, softcap, scale):
    torch, flash_attn, _, _, _ = shims
    rng = np.random.default_rng(3)
    lq, lk, d = [6, 10], [9, 4], 8
    cq, ck = np.concatenate([[0], np.cumsum(lq)]), np.concatenate([[0], np.cumsum(lk)])
    q, k, v = (rng.standard_normal((n, 4, d)) * 2 for n in (cq[-1], ck[-1], ck[-1]))
    got = flash_attn.flash_attn_varlen_func(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), torch.tensor(cq, dtype=torch.int32),
        torch.tensor(ck, dtype=torch.int32), max(lq), max(lk), softmax_scale=scale, window_size=window,
        softcap=softcap).numpy()
    for b in range(2):
        want = np_attention(q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]],
                            scale if scale is not None else d ** -0.5, False, window, softcap)
        np.testing.assert_allclose(got[cq[b]:cq[b + 1]], want, rtol=1e-10, atol=1e-12)


def test_varlen_f16_inputs_keep_dtype_and_match(shims):
    """The examples pass f16 tensors (and compare at 1e-2): the result is f16, the f64 answer rounded."""
    torch, flash_attn, _, _, _ = shims
    rng = np.random.default_rng(5)
    lq = [33, 17]
    cq = np.concatenate([[0], np.cumsum(lq)])
    q16, k16, v16 = (torch.from_numpy(rng.standard_normal((cq[-1], 4, 32))).half() for _ in range(3))
    cu = torch.tensor(cq, dtype=torch.int32)
    got = flash_attn.flash_attn_varlen_func(q16, k16, v16, cu, cu, 33, 33, 0.0, causal=True)
    assert got.dtype == torch.float16 and got.shape == q16.shape
    for b in range(2):
        s = slice(cq[b], cq[b + 1])
        want = np_attention(q16[s].double().numpy(), k16[s].double().numpy(), v16[s].double().numpy(), 32 ** -0.5, True)
        np.testing.assert_allclose(got[s].double().numpy(), want, rtol=1e-3, atol=1e-3)


def test_flash_attn_func_batches(shims):
    torch, flash_attn, _, _, _ = shims
    rng = np.random.default_rng(9)
    q = rng.standard_normal((2, 5, 4, 8))
    k = rng.standard_normal((2, 7, 2, 8))
    v = rng.standard_normal((2, 7, 2, 8))
    got = flash_attn.flash_attn_func(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), causal=True).numpy()
    for b in range(2):
        np.testing.assert_allclose(got[b], np_attention(q[b], k[b], v[b], 8 ** -0.5, True), rtol=1e-10, atol=1e-12)


def test_unsupported_arguments_are_named(shims):
    torch, flash_attn, lin, _, _ = shims
    x = torch.zeros(4, 2, 8)
    cu = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="flash_attn_varlen_func with dropout_p=0.1"):
        flash_attn.flash_attn_varlen_func(x, x, x, cu, cu, 4, 4, 0.1)
    with pytest.raises(NotImplementedError, match="return_attn_probs=True"):
        flash_attn.flash_attn_varlen_func(x, x, x, cu, cu, 4, 4, return_attn_probs=True)
    with pytest.raises(ValueError, match="3 query heads are not a multiple of 2"):
        flash_attn.flash_attn_varlen_func(torch.zeros(4, 3, 8), x, x, cu, cu, 4, 4)
    with pytest.raises(NotImplementedError, match="fused_chunk_linear_attn with cu_seqlens"):
        lin.fused_chunk_linear_attn(x[None], x[None], x[None], cu_seqlens=cu)


@pytest.mark.parametrize("normalize,initial", [(False, False), (False, True), (True, False), (True, True)])
def test_linear_attention_matches_recurrent_numpy(shims, normalize, initial):
    torch, _, lin, _, calls = shims
    rng = np.random.default_rng(11 + 2 * normalize + initial)
    B, T, H, K, V = 2, 37, 3, 8, 6
    q, k = (np.abs(rng.standard_normal((B, T, H, K))) for _ in range(2))  # positive: denominators away from 0
    v = rng.standard_normal((B, T, H, V))
    s0 = rng.standard_normal((B, H, K, V)) if initial else None
    z0 = np.abs(rng.standard_normal((B, 1, H, K))) if initial and normalize else None
    state = None
    if initial:
        state = (torch.from_numpy(s0), torch.from_numpy(z0)) if normalize else torch.from_numpy(s0)
    del calls.calls[:]
    o, final = lin.fused_chunk_linear_attn(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), scale=0.5,
                                           initial_state=state, output_final_state=True, normalize=normalize)
    assert calls.calls == [("fla.ops.linear_attn.fused_chunk_linear_attn", "fla")]
    want_o, want_s, want_z = np_linear_attention(q, k, v, 0.5, s0, z0, normalize)
    assert o.dtype == torch.float64  # q's dtype (computed in f32)
    np.testing.assert_allclose(o.numpy(), want_o, rtol=2e-5, atol=2e-5)
    s = final[0] if normalize else final
    np.testing.assert_allclose(s.numpy(), want_s, rtol=2e-5, atol=2e-5)
    if normalize:
        np.testing.assert_allclose(final[1].numpy()[:, 0], want_z, rtol=2e-5, atol=2e-5)


def test_linear_attention_default_scale_f16_and_backward(shims):
    """As upstream's examples call it: f16 [B, T, H, D], scale 1/sqrt(D), normalize=False, final state;
    the backward example calls .backward on the output, so it must carry gradients."""
    torch, _, lin, l2, _ = shims
    rng = np.random.default_rng(13)
    B, T, H, D = 1, 64, 2, 16
    q, k, v = (torch.from_numpy(rng.standard_normal((B, T, H, D))).half() for _ in range(3))
    q = l2.l2norm_fwd(q)[0].requires_grad_(True)
    k = l2.l2norm_fwd(k)[0].requires_grad_(True)
    v.requires_grad_(True)
    o, h = lin.fused_chunk_linear_attn(q, k, v, output_final_state=True, normalize=False)
    assert o.dtype == torch.float16 and h.dtype == torch.float32 and h.shape == (B, H, D, D)
    want_o, want_s, _ = np_linear_attention(q.detach().double().numpy(), k.detach().double().numpy(),
                                            v.detach().double().numpy(), D ** -0.5)
    np.testing.assert_allclose(o.detach().double().numpy(), want_o, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(h.detach().numpy(), want_s, rtol=1e-4, atol=1e-4)
    # d(sum o * do)/dv_s = sum_{t >= s} scale (q_t . k_s) do_t: checked against numpy for every s
    do = torch.from_numpy(rng.standard_normal((B, T, H, D))).half()
    o.backward(do)
    qn, kn, don = (x.detach().double().numpy() for x in (q, k, do))
    dv = np.zeros((B, T, H, D))
    for s in range(T):
        for t in range(s, T):
            dv[:, s] += D ** -0.5 * (qn[:, t] * kn[:, s]).sum(-1, keepdims=True) * don[:, t]
    np.testing.assert_allclose(v.grad.double().numpy(), dv, rtol=5e-3, atol=5e-3)


def test_l2norm_fwd(shims):
    torch, _, _, l2, calls = shims
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 5, 40)) * 3
    del calls.calls[:]
    y, rstd = l2.l2norm_fwd(torch.from_numpy(x))
    assert calls.calls == [("fla.modules.l2norm.l2norm_fwd", "fla")]
    want_r = 1.0 / np.sqrt((x * x).sum(-1) + 1e-6)
    np.testing.assert_allclose(rstd.numpy(), want_r, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), x * want_r[..., None], rtol=1e-6, atol=1e-7)
    assert y.dtype == torch.float64 and rstd.dtype == torch.float32 and not y.requires_grad
    y16, _ = l2.l2norm_fwd(torch.from_numpy(x).half(), output_dtype=torch.float32)
    assert y16.dtype == torch.float32


def test_runner_puts_shims_last_and_names_them():
    """compat_plugin appends the shims after site-packages (a real flash_attn wins) and the table names
    every shim a test ran against and the package it stands in for."""
    sys.path.insert(0, COMPAT)
    try:
        import compat_plugin
    finally:
        sys.path.remove(COMPAT)
    assert compat_plugin.SHIMS == SHIMS
    assert compat_plugin.shim_note([]) == ""
    note = compat_plugin.shim_note([("flash_attn.flash_attn_varlen_func", "flash_attn")])
    assert note == ("against the runner's torch reference for flash_attn.flash_attn_varlen_func (flash_attn not "
                    "installed; tools/compat/reference_shims)")
    two = compat_plugin.shim_note([("fla.modules.l2norm.l2norm_fwd", "fla"),
                                   ("fla.ops.linear_attn.fused_chunk_linear_attn", "fla")])
    assert "l2norm_fwd, fla.ops.linear_attn.fused_chunk_linear_attn (fla not installed" in two

    class Config:
        pass

    saved = list(sys.path)
    try:
        sys.path[:] = [p for p in sys.path if p != SHIMS]
        compat_plugin.pytest_configure(Config())
        assert sys.path[-1] == SHIMS
    finally:
        sys.path[:] = saved
