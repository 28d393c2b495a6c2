"""Reference stand-in for fla.ops.linear_attn (tools/compat/reference_shims/README.md).

Plain torch in float32 and differentiable (upstream's backward example calls .backward on the output).
"""

import torch

from _tl_reference_calls import note


def fused_chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True,
                            cu_seqlens=None):
    """Causal linear attention on [B, T, H, K] / [B, T, H, V] inputs:
    o_t = scale * q_t (S0 + sum_{s <= t} k_s^T v_s); with `normalize` divided by
    scale * q_t . (z0 + sum_{s <= t} k_s) + 1e-10. Returns (o in q's dtype, final state or None):
    the state is S [B, H, K, V] (f32), with `normalize` the pair (S, z [B, 1, H, K])."""
    note("fla.ops.linear_attn.fused_chunk_linear_attn", "fla")
    if cu_seqlens is not None:
        raise NotImplementedError("fla reference shim (tools/compat/reference_shims): fused_chunk_linear_attn with "
                                  "cu_seqlens is not implemented (install flash-linear-attention for it)")
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if normalize and isinstance(initial_state, tuple):
        s0, z0 = initial_state
    else:
        s0, z0 = initial_state, None
    qf, kf, vf = (x.float() for x in (q, k, v))
    T = q.shape[1]
    # [B, H, T, T]: scores of query t against key s <= t.
    scores = torch.einsum("bthk,bshk->bhts", qf * scale, kf)
    keep = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~keep, 0.0)
    o = torch.einsum("bhts,bshv->bthv", scores, vf)
    if s0 is not None:
        o = o + torch.einsum("bthk,bhkv->bthv", qf * scale, s0.float())
    state = torch.einsum("bshk,bshv->bhkv", kf, vf)
    if s0 is not None:
        state = state + s0.float()
    if normalize:
        k_cum = kf.cumsum(1)
        if z0 is not None:
            k_cum = k_cum + z0.float()
        o = o / ((qf * scale * k_cum).sum(-1, keepdim=True) + 1e-10)
        final = (state, k_cum[:, -1:]) if output_final_state else None
        return o.to(q.dtype), final
    return o.to(q.dtype), (state if output_final_state else None)


__all__ = ["fused_chunk_linear_attn"]
