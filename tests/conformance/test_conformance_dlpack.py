"""Conformance: DLPack tensors (torch) in, torch out, on the target's device;
numpy bf16 (uint16 bit patterns) staged to the device. Skips without torch.

Vulkan: torch has no Vulkan device, so CPU tensors are what torch users pass; they are staged
like numpy arrays (copied to device buffers, outputs copied back into the torch tensors).
CUDA: a CUDA tensor runs in place; a CPU tensor is refused naming the argument and the device
(torch refuses mixing devices too)."""

import os

import numpy as np
import pytest

import tlc_util
import tlc_kernels_basic as K
from tlc_util import assert_close, random


def test_torch_tensors_in_torch_out(target, rng):
    torch = pytest.importorskip("torch", reason="torch not installed")
    if target == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if target == "cuda" and os.environ.get("CUDA_FORCE_PTX_JIT") == "1":
        # torch's own kernels (the fill behind torch.zeros for our outputs) ship SASS and no PTX for
        # the H200, so under CUDA_FORCE_PTX_JIT=1 torch itself fails with "no kernel image is
        # available" before our kernel runs; probe it rather than assume.
        try:
            torch.zeros(4, device="cuda").add_(1).cpu()
        except Exception as e:  # torch.AcceleratorError (torch 2.6+) or RuntimeError
            pytest.skip(f"torch cannot run its own CUDA kernels under CUDA_FORCE_PTX_JIT=1: {str(e).splitlines()[0]}")
    M, N = 100, 70
    kernel = tlc_util.compile(K.elementwise_add(M, N, 32, 32, "float32", "float32"), out_idx=[2], target=target)
    a, a64 = random(rng, (M, N), "float32")
    b, b64 = random(rng, (M, N), "float32")
    dev = "cuda" if target == "cuda" else "cpu"
    c = kernel(torch.from_numpy(a).to(dev), torch.from_numpy(b).to(dev))
    assert isinstance(c, torch.Tensor) and c.device.type == dev and c.dtype == torch.float32
    assert_close(c.cpu().numpy(), a64 + b64, "float32")
    if target == "cuda":
        with pytest.raises(TypeError, match=r"parameter 'A': a CPU tensor .*cannot be used on device cuda:"):
            kernel(torch.from_numpy(a), torch.from_numpy(b))
    # numpy in -> numpy out on the same kernel
    assert isinstance(kernel(a, b), np.ndarray)


def test_numpy_bf16_in_and_out(target, rng):
    M, N = 64, 48
    kernel = tlc_util.compile(K.elementwise_add(M, N, 32, 32, "bfloat16", "bfloat16"), out_idx=[2], target=target)
    a, a64 = random(rng, (M, N), "bfloat16")
    b, b64 = random(rng, (M, N), "bfloat16")
    c = kernel(a, b)
    assert c.dtype == np.uint16
    assert_close(c, a64 + b64, "bfloat16")
