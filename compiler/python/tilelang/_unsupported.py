"""Import-time stand-ins for upstream APIs this project does not provide.

Upstream test files import every example at module level, so one import of an
API we lack (TVM, tilelang.cuda.intrinsics' PTX macro generators) would make
the whole file fail before any test runs. `from <module> import Name` of such a
name succeeds and gives an Unsupported object; using it (calling, subclassing,
iterating, indexing) raises TileLangUnsupportedAPI naming the API. Attribute
access gives another stand-in, so `tvm.tir.op.X(...)` names the whole path.
"""

from .errors import TileLangUnsupportedAPI, located


class Unsupported:
    def __init__(self, name, why="an upstream API this project does not provide"):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_why", why)

    def _fail(self, *args, **kwargs):
        raise TileLangUnsupportedAPI(located(f"unsupported feature: {self._name} ({self._why})"))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Unsupported(f"{self._name}.{name}", self._why)

    __call__ = __iter__ = __getitem__ = __bool__ = __len__ = _fail

    def __mro_entries__(self, bases):
        self._fail()

    def __repr__(self):
        return f"<unsupported {self._name}>"


def module_getattr(module_name, why="an upstream API this project does not provide"):
    """A module-level __getattr__ giving Unsupported stand-ins for every public name."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Unsupported(f"{module_name}.{name}", why)
    return __getattr__
