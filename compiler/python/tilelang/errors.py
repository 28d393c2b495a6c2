"""Errors raised by the frontend.

Every error about a tile program names the file and line of the user's code
that caused it (``gemm.py:23: T.copy: ...``), so the message is useful when it
reaches a terminal through ``tl-pack build``.
"""

import os
import sys
import sysconfig

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames of this package and of the standard library (contextlib, ...) are never the user's.
_SKIP = tuple(os.path.abspath(p) + os.sep for p in
              {_PKG_DIR, sysconfig.get_paths()["stdlib"], os.path.dirname(os.__file__)})


class TileLangError(Exception):
    """Base class of every error the tilelang package raises on purpose."""


class TileLangSyntaxError(TileLangError):
    """The tile program uses the language wrongly (shapes, dtypes, scopes)."""

    def __init__(self, message, file=None, line=None):
        self.file = file
        self.line = line
        self.message = message
        prefix = f"{file}:{line}: " if file is not None else ""
        super().__init__(prefix + message)


class TileLangCompileError(TileLangError):
    """The C++ compiler driver rejected the program or failed."""


class TileLangRuntimeError(TileLangError):
    """Loading or launching a compiled kernel failed."""


class TileLangNotImplementedError(TileLangError, NotImplementedError):
    """A feature or target exists in the language but not yet in this toolchain."""


class TileLangUnimplementedFeature(TileLangCompileError, TileLangNotImplementedError):
    """The backend of .target reported a feature as UNIMPLEMENTED (.feature: its message,
    with the tile program's file and line)."""

    def __init__(self, message, target=None, feature=None):
        super().__init__(message)
        self.target = target
        self.feature = feature


class TileLangUnsupportedAPI(TileLangNotImplementedError, AttributeError):
    """An upstream TileLang API this project does not provide (T.alloc_tmem, fp8 dtypes, ...);
    the message starts with "unsupported feature:" and names it. An AttributeError too, so
    hasattr() probes of upstream code keep working."""


def display_path(path):
    """Path as shown in locations: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def user_location():
    """(file, line) of the innermost frame that belongs to the user's program.

    Traced code keeps its original file name and line numbers (the AST
    transform preserves them), so walking the stack past this package's own
    frames finds the statement being traced.
    """
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_SKIP) and not filename.startswith("<"):
            return display_path(filename), frame.f_lineno
        frame = frame.f_back
    return None, None


def located(message):
    """message, then " (at FILE:LINE)" of the user's statement when one is on the stack (errors raised
    where a prefix would hide the "unsupported feature:" start that reasons are read from)."""
    file, line = user_location()
    return f"{message} (at {file}:{line})" if file is not None else message


def error(message):
    """Build a TileLangSyntaxError located at the user's current statement."""
    file, line = user_location()
    return TileLangSyntaxError(message, file, line)
