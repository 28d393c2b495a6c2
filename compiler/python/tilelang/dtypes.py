"""Data types: TileLang names, Tile IR names, and the promotion rules.

A dtype is a ``str`` subclass holding the TileLang name ("float16"), so that
``T.float16 == "float16"`` and ``buf.dtype == "float32"`` work as upstream.
Calling one builds a typed constant: ``T.float32(0.5)``.
"""

import math
import struct

from .errors import error

# TileLang name -> (Tile IR name, kind, bits). kind: 'b' bool, 'i' signed, 'u' unsigned, 'f' float.
_TABLE = {
    "bool": ("bool", "b", 1),
    "int8": ("i8", "i", 8),
    "int16": ("i16", "i", 16),
    "int32": ("i32", "i", 32),
    "int64": ("i64", "i", 64),
    "uint8": ("u8", "u", 8),
    "uint16": ("u16", "u", 16),
    "uint32": ("u32", "u", 32),
    "uint64": ("u64", "u", 64),
    "float16": ("f16", "f", 16),
    "bfloat16": ("bf16", "f", 16),
    "float32": ("f32", "f", 32),
    "float64": ("f64", "f", 64),
    # 8-bit floats: u8 bit patterns in Tile IR, converted at loads and stores (fp8.py)
    "float8_e4m3fn": ("u8", "q", 8),
    "float8_e5m2": ("u8", "q", 8),
}

# Other spellings accepted wherever a dtype is expected (upstream accepts these too).
_ALIASES = {
    "half": "float16", "float": "float32", "double": "float64", "int": "int32",
    "uint": "uint32", "short": "int16", "long": "int64", "bf16": "bfloat16",
    "f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
    "u64": "uint64",
    "tfloat32": "float32",  # float32 in memory; TF32 is a math-precision hint (our GEMMs are full fp32)
}

# Upstream dtypes Tile IR v1 has no representation for: named by T.<name> (so upstream code can
# compare with them) and rejected where a buffer or cast would need them.
UNSUPPORTED = ("float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz",
               "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "int4", "uint4", "int2",
               "uint2", "int1", "uint1")


class DType(str):
    """One scalar dtype. Compares equal to its TileLang name."""

    def __new__(cls, name):
        if name not in _TABLE:  # T.dtype("uint"), T.dtype(torch.float16), ...: as canonical() reads them
            return canonical(name)
        self = super().__new__(cls, name)
        self.ir, self.kind, self.bits = _TABLE[name]
        return self

    @property
    def is_float(self):
        return self.kind == "f"

    @property
    def is_int(self):
        return self.kind in ("i", "u")

    @property
    def is_signed(self):
        return self.kind == "i"

    @property
    def is_bool(self):
        return self.kind == "b"

    def __call__(self, value=None):
        # T.float32(0.5) -> constant; T.int32(x) -> cast of a device value.
        from . import ir
        if value is None:
            raise error(f"{self}() needs a value")
        return ir.cast(value, self)

    def as_torch(self):
        """The torch dtype of the same name (torch is optional; imported on use)."""
        import torch
        return getattr(torch, str(self) if str(self) != "bool" else "bool")

    def as_numpy(self):
        """numpy dtype; bfloat16 has none in numpy and maps to uint16 (its bit pattern)."""
        import numpy
        if self.kind == "q":  # fp8: its bit patterns
            return numpy.dtype("uint8")
        return numpy.dtype("uint16" if self == "bfloat16" else "bool" if self == "bool" else str(self))

    def __repr__(self):
        return f"T.{str(self)}"

    __hash__ = str.__hash__


DTYPES = {name: DType(name) for name in _TABLE}


def canonical(dtype):
    """Turn a DType, a string, or a numpy dtype into a DType; raise otherwise."""
    if isinstance(dtype, DType):
        return dtype
    name = dtype
    if not isinstance(dtype, str):
        # numpy dtypes have .name; torch dtypes print as "torch.float16".
        name = getattr(dtype, "name", None) or str(dtype).replace("torch.", "")
    if isinstance(name, str):
        name = _ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
        if name in UNSUPPORTED:
            raise error(f"unsupported feature: dtype {name} (an unknown dtype to Tile IR v1, which has bool, "
                        "int8-64, uint8-64, float16, bfloat16, float32, float64; float8_e4m3fn and float8_e5m2 "
                        "are stored as uint8)")
    raise error(f"unknown dtype {dtype!r}")


def is_dtype(obj):
    if isinstance(obj, DType):
        return True
    if isinstance(obj, str):
        return _ALIASES.get(obj, obj) in DTYPES
    return False


def promote(a, b):
    """The dtype both operands of a binary operator are converted to.

    TVM's rules as upstream TileLang applies them: floats win over integers;
    between floats or between integers the wider wins; float16 with bfloat16
    goes to float32; equal-width signed and unsigned go to unsigned.
    """
    if a == b:
        return a
    if a.is_bool:
        return b if not b.is_bool else a
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        if a.bits == b.bits:  # float16 vs bfloat16
            return DTYPES["float32"]
        return a if a.bits > b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if a.kind == "u" else b


def int_range(dtype):
    if dtype.is_bool:
        return 0, 1
    if dtype.kind == "u":
        return 0, (1 << dtype.bits) - 1
    return -(1 << (dtype.bits - 1)), (1 << (dtype.bits - 1)) - 1


def round_float(value, dtype):
    """Round a Python float to the nearest value representable in dtype."""
    value = float(value)
    if math.isnan(value) or math.isinf(value) or dtype.bits == 64:
        return value
    if dtype == "float32":
        try:
            return struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    if dtype == "float16":
        try:
            return struct.unpack("<e", struct.pack("<e", value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    # bfloat16: round-to-nearest-even on the top 16 bits of the float32 pattern.
    bits = struct.unpack("<I", struct.pack("<f", round_float(value, DTYPES["float32"])))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def format_float(value, dtype):
    """Shortest decimal that reads back as the same value in dtype (spec: printer form)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    for precision in range(1, 18):
        text = "%.*g" % (precision, value)
        if round_float(float(text), dtype) == value:
            break
    # repr of the decimal's double is no longer and uses fixed notation for ordinary
    # magnitudes (200.0, not 2e+02); exponents lose their padding (1e-6).
    text = repr(float(text))
    mantissa, _, exponent = text.partition("e")
    if exponent:
        sign = "-" if exponent[0] == "-" else ""
        return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return mantissa


globals().update(DTYPES)
