"""Reference stand-in for fla.modules.l2norm (tools/compat/reference_shims/README.md)."""

import torch

from _tl_reference_calls import note


def l2norm_fwd(x, eps=1e-6, output_dtype=None):
    """Each row over the last dim: y = x / sqrt(sum(x^2) + eps), computed in f32, stored in x's dtype
    (or output_dtype); returns (y, rstd) with rstd [x.shape[:-1]] f32. Not recorded by autograd (as
    fla's Triton kernel), so callers can make y a leaf with .requires_grad_()."""
    note("fla.modules.l2norm.l2norm_fwd", "fla")
    with torch.no_grad():
        xf = x.float()
        rstd = 1.0 / torch.sqrt((xf * xf).sum(-1) + eps)
        y = (xf * rstd.unsqueeze(-1)).to(output_dtype or x.dtype)
    return y, rstd
