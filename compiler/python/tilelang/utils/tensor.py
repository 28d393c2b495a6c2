"""Tensors for profiling and checking: generated inputs and a tolerant comparison.

Works with torch tensors when torch is importable (the GPU machine) and with
numpy arrays otherwise (the CPU), so the same upstream test code runs on both.
torch is imported lazily: nothing here needs it unless it is there.

- TensorSupplyType: how the profiler fills input tensors (upstream's names).
- get_tensor_supply(kind, device): a function param -> tensor for a kernel parameter.
- torch_assert_close(a, b, rtol, atol, max_mismatched_ratio): passes when at most
  that ratio of elements differ by more than atol + rtol * |b| (NaNs equal).
"""

import enum

from ..errors import TileLangError


class TensorSupplyType(enum.Enum):
    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def is_torch(a):
    return type(a).__module__.startswith("torch")


def _kind(ir):
    """'u' unsigned, 'i' signed, 'b' bool, 'f' float of a Tile IR dtype name."""
    if ir == "bool":
        return "b"
    return ir[0] if ir[0] in "uif" else "f"  # bf16 -> f


def get_tensor_supply(supply_type=TensorSupplyType.Auto, device=None):
    """A function (param) -> tensor for a kernel's Buffer parameter.

    device: None for numpy arrays on the host, else a torch device ("cuda",
    "cpu"): torch tensors. Shapes must be concrete (pass
    dynamic_symbolic_constraints to the profiler for symbols)."""
    if isinstance(supply_type, str):
        supply_type = TensorSupplyType[supply_type]
    if supply_type is None:
        supply_type = TensorSupplyType.Auto

    def values(kind, shape, rng):
        st = supply_type
        if st in (TensorSupplyType.Auto, TensorSupplyType.Integer) and kind in "ub":
            return rng.integers(0, 3 if kind == "u" else 2, size=shape)
        if st == TensorSupplyType.Auto and kind == "f":
            return rng.uniform(-1.0, 1.0, size=shape)
        if st in (TensorSupplyType.Auto, TensorSupplyType.Integer):
            return rng.integers(-2, 3, size=shape)
        if kind == "i" and st in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
            return rng.integers(1, 2, size=shape)  # upstream: ones for integer tensors
        if st == TensorSupplyType.Uniform:
            return rng.uniform(-1.0, 1.0, size=shape)
        if st == TensorSupplyType.Normal:
            return rng.normal(-1.0, 1.0, size=shape)
        if st == TensorSupplyType.Randn:
            return rng.standard_normal(size=shape)
        if st == TensorSupplyType.Zero:
            return rng.integers(0, 1, size=shape)
        if st == TensorSupplyType.One:
            return rng.integers(1, 2, size=shape)
        raise TileLangError(f"unknown tensor supply type {supply_type!r}")

    def supply(param, shape):
        import numpy as np
        from ..kernel import NUMPY_DTYPE, TORCH_DTYPE
        shape = list(shape)
        ir = param.dtype.ir
        if param.dtype.kind == "q":  # fp8: float values rounded to the format (torch fp8 / numpy bit patterns)
            data = np.asarray(values("f", shape, np.random.default_rng(np.random.randint(0, 2**31))), np.float32)
            if device is None:
                from ..fp8 import encode_numpy
                return encode_numpy(data, param.dtype)
            torch = torch_or_none()
            if torch is None:
                raise TileLangError("torch tensors were asked for but torch is not importable")
            return torch.from_numpy(data).to(device=device).to(getattr(torch, str(param.dtype))).contiguous()
        if ir not in NUMPY_DTYPE:
            raise TileLangError(f"{param.name}: cannot generate a tensor of dtype {param.dtype}")
        data = values(_kind(ir), shape, np.random.default_rng(np.random.randint(0, 2**31)))
        if device is None:
            if ir == "bf16":
                return bf16_from_float(np.asarray(data, dtype=np.float32))
            return np.asarray(data).astype(NUMPY_DTYPE[ir])
        torch = torch_or_none()
        if torch is None:
            raise TileLangError("torch tensors were asked for but torch is not importable")
        t = torch.from_numpy(np.ascontiguousarray(np.asarray(data, dtype=np.float64 if _kind(ir) == "f"
                                                             else np.int64)))
        return t.to(device=device, dtype=getattr(torch, TORCH_DTYPE[ir])).contiguous()

    return supply


def bf16_from_float(a):
    """float32 numpy array -> bfloat16 bit patterns (uint16), rounded to nearest even."""
    import numpy as np
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def to_float64(a, bf16=False):
    """A torch tensor, numpy array or scalar as a float64 numpy array (bf16: uint16 bit patterns)."""
    import numpy as np
    if is_torch(a):
        torch = torch_or_none()
        return a.detach().to("cpu").to(torch.float64).numpy()
    arr = np.asarray(a)
    if bf16 and arr.dtype == np.uint16:
        return (arr.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return arr.astype(np.float64)


def _dtype_name(a):
    return str(a.dtype).replace("torch.", "")


def torch_assert_close(tensor_a, tensor_b, rtol=1e-2, atol=1e-3, max_mismatched_ratio=0.001, verbose=False,
                       equal_nan=True, check_device=True, check_dtype=True, check_layout=True, check_stride=False,
                       base_name="LHS", ref_name="RHS"):
    """Assert that at most max_mismatched_ratio of the elements of a and b differ by more than
    atol + rtol * |b|. Accepts torch tensors and numpy arrays (compared in float64)."""
    import numpy as np
    shape_a, shape_b = tuple(tensor_a.shape), tuple(tensor_b.shape)
    if shape_a != shape_b:
        raise AssertionError(f"The values for attribute 'shape' do not match: {shape_a} != {shape_b}.")
    if check_dtype and _dtype_name(tensor_a) != _dtype_name(tensor_b):
        raise AssertionError(f"The values for attribute 'dtype' do not match: {tensor_a.dtype} != {tensor_b.dtype}.")
    if check_device and is_torch(tensor_a) and is_torch(tensor_b) and tensor_a.device != tensor_b.device:
        raise AssertionError(f"The values for attribute 'device' do not match: {tensor_a.device} != "
                             f"{tensor_b.device}.")
    a, b = to_float64(tensor_a), to_float64(tensor_b)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    mismatched = int((~close).sum())
    total = a.size
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"Number of mismatched elements: {mismatched} / {total} (allowed: {allowed})")
    if mismatched > allowed:
        flat = int(np.argmax((~close).reshape(-1)))
        idx = [int(i) for i in np.unravel_index(flat, a.shape)] if a.ndim else []
        av, bv = float(a.reshape(-1)[flat]), float(b.reshape(-1)[flat])
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - b)
            rel = diff / (np.abs(b) + 1e-12)
        raise AssertionError(
            f"Too many mismatched elements: {mismatched} > {allowed} ({max_mismatched_ratio * 100:.2f}% allowed, "
            f"but get {mismatched / max(total, 1) * 100:.2f}%).\nFirst mismatch at index {idx}: {base_name}={av:.6f}, "
            f"{ref_name}={bv:.6f}, abs_diff={abs(av - bv):.6f}\nGreatest absolute difference: {np.nanmax(diff)}, "
            f"Greatest relative difference: {np.nanmax(rel)}")
    return True
