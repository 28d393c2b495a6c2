"""`from tilelang import tvm`: upstream re-exports Apache TVM (and makes `import tvm` work);
this project has no TVM.

tvm.DataType is this project's dtype (`.bits`, comparisons by name); `tvm.tirx`
(also `tvm.tir`) has const / reinterpret / Select / Cast / PrimExpr on this
project's expressions (tvm_tir.py). Every other name is an Unsupported stand-in: importing it works (upstream test files import
TVM-using examples at module level), using it raises TileLangUnsupportedAPI
("unsupported feature: tvm.tirx.reinterpret (...)"). When no real `tvm` package
is installed, `import tilelang` (which imports this module) also answers `import tvm` / `from tvm import X`,
as upstream's `from tilelang import tvm` does.
"""

import importlib.util
import sys

from ._unsupported import module_getattr
from .dtypes import canonical as DataType  # noqa: F401 - DataType("float16").bits
from . import tvm_tir as tirx
tir = tirx

__getattr__ = module_getattr("tvm", "TVM API; this project has no TVM")

if "tvm" not in sys.modules and importlib.util.find_spec("tvm") is None:
    sys.modules["tvm"] = sys.modules[__name__]
    sys.modules["tvm.tirx"] = sys.modules["tvm.tir"] = tirx
