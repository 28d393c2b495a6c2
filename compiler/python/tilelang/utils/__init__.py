"""Helpers upstream TileLang programs import from `tilelang.utils` (tensor supply and comparison)."""

from .tensor import TensorSupplyType, get_tensor_supply, torch_assert_close  # noqa: F401
