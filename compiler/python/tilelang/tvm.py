"""`from tilelang import tvm`: upstream re-exports Apache TVM; this project has no TVM.

Importing it works (many upstream tests import it without using it); using any
attribute raises TileLangNotImplementedError naming the attribute.
"""

from .errors import TileLangNotImplementedError


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise TileLangNotImplementedError(f"unsupported feature: TVM API tvm.{name} (this project has no TVM)")
