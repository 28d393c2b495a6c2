"""Reference stand-in for the `flash_attn` package (tools/compat/reference_shims/README.md).

Used only when flash-attention is not installed: compat_plugin.py appends this folder to the end of
sys.path. Plain torch, float64, one sequence at a time: a correctness reference, not a fast kernel.
"""

import math

import torch

from _tl_reference_calls import note

__version__ = "0.0.0+tl-compat-reference"
TL_COMPAT_REFERENCE = True


def _unsupported(function, what):
    raise NotImplementedError(f"flash_attn reference shim (tools/compat/reference_shims): {function} with {what} is "
                              "not implemented (install flash-attn for it)")


def _attend(q, k, v, scale, causal, window_size, softcap, slopes):
    """One sequence: q [sq, hq, d], k/v [sk, hk, d] (float64) -> [sq, hq, dv]."""
    sq, hq, _ = q.shape
    sk, hk, _ = k.shape
    if hq % hk != 0:
        raise ValueError(f"flash_attn reference: {hq} query heads are not a multiple of {hk} key/value heads")
    if hq != hk:  # GQA: query head h reads key/value head h // (hq / hk)
        k = k.repeat_interleave(hq // hk, dim=1)
        v = v.repeat_interleave(hq // hk, dim=1)
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(sq, device=q.device).view(sq, 1)
    j = torch.arange(sk, device=q.device).view(1, sk)
    diag = i + sk - sq  # the bottom-right-aligned diagonal
    if slopes is not None:
        s = s - slopes.view(hq, 1, 1) * (diag - j).abs().to(s.dtype)
    left, right = window_size
    if causal:
        right = 0
    allowed = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if right >= 0:
        allowed &= j <= diag + right
    if left >= 0:
        allowed &= j >= diag - left
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # a row that sees no key
    p = torch.exp(s - m)
    denom = p.sum(dim=-1, keepdim=True)
    p = torch.where(denom > 0, p / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.zeros_like(p))
    return torch.einsum("hqk,khd->qhd", p, v)


def _check(function, dropout_p, return_attn_probs, block_table=None):
    if dropout_p:
        _unsupported(function, f"dropout_p={dropout_p}")
    if return_attn_probs:
        _unsupported(function, "return_attn_probs=True")
    if block_table is not None:
        _unsupported(function, "block_table (paged KV cache)")


def _slopes(alibi_slopes, b, hq, device):
    if alibi_slopes is None:
        return None
    a = alibi_slopes.to(device=device, dtype=torch.float64)
    return (a[b] if a.dim() == 2 else a).reshape(hq)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func's forward: q [total_q, hq, d], k/v [total_k, hk, d], sequences
    delimited by the int32 cumulative lengths; returns [total_q, hq, dv] in q's dtype."""
    note("flash_attn.flash_attn_varlen_func", "flash_attn")
    _check("flash_attn_varlen_func", dropout_p, return_attn_probs, block_table)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    cq = [int(x) for x in cu_seqlens_q.tolist()]
    ck = [int(x) for x in cu_seqlens_k.tolist()]
    if len(cq) != len(ck):
        raise ValueError(f"flash_attn reference: cu_seqlens_q has {len(cq)} entries, cu_seqlens_k {len(ck)}")
    with torch.no_grad():
        out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64, device=q.device)
        for b in range(len(cq) - 1):
            if cq[b + 1] <= cq[b]:
                continue
            out[cq[b]:cq[b + 1]] = _attend(q[cq[b]:cq[b + 1]].double(), k[ck[b]:ck[b + 1]].double(),
                                           v[ck[b]:ck[b + 1]].double(), scale, causal, tuple(window_size), softcap,
                                           _slopes(alibi_slopes, b, q.shape[1], q.device))
    return out.to(q.dtype)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn.flash_attn_func's forward: q [b, sq, hq, d], k/v [b, sk, hk, d] -> [b, sq, hq, dv]."""
    note("flash_attn.flash_attn_func", "flash_attn")
    _check("flash_attn_func", dropout_p, return_attn_probs)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])
    with torch.no_grad():
        out = torch.stack([
            _attend(q[b].double(), k[b].double(), v[b].double(), scale, causal, tuple(window_size), softcap,
                    _slopes(alibi_slopes, b, q.shape[2], q.device)) for b in range(q.shape[0])])
    return out.to(q.dtype)
