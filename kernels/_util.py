"""Shared helpers for the kernel modules' test cases (inputs, dtypes, sizes).

A *case* is what the tests and the demo need to run one packed kernel instance and check
it: the arguments in parameter order, which of them the kernel writes and their float64
references, and the tolerance. Each kernel module maps its factory names to a case builder
`build(kwargs, rng) -> Case`, where kwargs are the instance's manifest kwargs; a size given
as a symbol name (a dynamic dim) gets a concrete test size that is not a multiple of the tile.
"""
import numpy as np

# Test sizes for dynamic dims, by symbol name (not multiples of any tile in the manifest).
DYNAMIC_TEST_SIZES = {"M": 77, "MD": 9, "BATCH": 2, "S": 93, "SQ": 37, "SKV": 93, "PAGES": 1, "TOKENS": 45, "T": 45, "N": 90, "K": 70}

# (rtol, atol) by the dtype in which a result is stored.
TOL = {"float32": (2e-4, 2e-4), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2),
       "int32": (0, 0), "int8": (0, 0), "uint8": (0, 0), "float64": (1e-9, 1e-9)}


class Case:
    """args: arrays/scalars in parameter order; outputs: {param index: float64 reference};
    dtypes: {param index: stored dtype name} (bf16 arrays are uint16 bit patterns);
    tol: {param index: (rtol, atol)} overriding TOL; flops: for the demo's rate."""

    def __init__(self, args, outputs, dtypes=None, tol=None, flops=0):
        self.args, self.outputs = args, outputs
        self.dtypes = dtypes or {}
        self.tol = tol or {}
        self.flops = flops


def size(kw, key, default=None):
    v = kw.get(key, default)
    if isinstance(v, str):
        return DYNAMIC_TEST_SIZES.get(v, 41)
    return v


def to_bf16_bits(x):
    """float -> bfloat16 bit patterns (uint16), round to nearest even."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def rand(rng, shape, dtype, scale=1.0):
    """(array to pass, its exact values as float64). int8: uniform in [-8, 8)."""
    if dtype == "int8":
        a = rng.integers(-8, 8, size=shape, dtype=np.int8)
        return a, a.astype(np.float64)
    x = rng.standard_normal(shape) * scale
    if dtype == "bfloat16":
        bits = to_bf16_bits(x)
        return bits, from_bf16_bits(bits).astype(np.float64)
    a = x.astype(dtype)
    return a, a.astype(np.float64)


def empty(shape, dtype):
    """An output array filled with NaN (floats) or a sentinel, so unwritten elements fail."""
    if dtype == "bfloat16":
        return np.full(shape, 0x7FC0, np.uint16)
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    return np.full(shape, -123456 if np.dtype(dtype).itemsize >= 4 else -77, dtype)


def as_f64(arr, dtype):
    if dtype == "bfloat16":
        return from_bf16_bits(arr).astype(np.float64)
    return np.asarray(arr).astype(np.float64)


def compare(case, i, actual):
    """max error normalized by the reference's scale, and whether it is within tolerance."""
    dtype = case.dtypes.get(i, "float32")
    rtol, atol = case.tol.get(i, TOL.get(dtype, TOL["float32"]))
    ref = np.asarray(case.outputs[i], np.float64)
    got = as_f64(actual, dtype)
    if got.shape != ref.shape:
        return float("inf"), False
    same = got == ref  # equal infinities (e.g. the LSE of an empty split) match
    with np.errstate(invalid="ignore"):
        diff = np.where(same, 0.0, np.abs(got - ref))
    ok = bool(np.all(diff <= atol + rtol * np.abs(np.where(same, 0.0, ref))))  # NaN fails
    finite = np.abs(ref[np.isfinite(ref)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    err = float(np.max(diff)) / scale if diff.size else 0.0
    if np.isnan(err):
        err = float("inf")
    return err, ok
