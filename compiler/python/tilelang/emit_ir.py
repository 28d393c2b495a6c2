"""Entry point used by `tl-pack build`:

    python3 -m tilelang.emit_ir --module M --factory F --kwargs JSON --name NAME

Imports module M (the working directory is on sys.path), calls F(**kwargs) to
get a prim_func (F may also be a @tilelang.jit factory, which is traced without
compiling), renames it NAME and prints its Tile IR on stdout. On an error in
the tile program it prints `file:line: message` on stderr and exits 1.
"""

import argparse
import importlib
import json
import os
import re
import sys
import traceback

from .errors import TileLangError, display_path
from .function import PrimFunc


def _frame_location(exc):
    """file:line of the innermost traceback frame outside this package (for non-TileLang errors)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    loc = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if not os.path.abspath(frame.filename).startswith(pkg + os.sep):
            loc = f"{display_path(frame.filename)}:{frame.lineno}"
    return loc


def build(module, factory, kwargs, name=None):
    mod = importlib.import_module(module)
    try:
        fn = getattr(mod, factory)
    except AttributeError:
        raise TileLangError(f"{display_path(getattr(mod, '__file__', module))}:1: module {module} has "
                            f"no factory {factory!r}") from None
    from .eager import EagerJIT
    from .jit import JITImpl
    if isinstance(fn, (JITImpl, EagerJIT)):
        func = fn.get_tir(**kwargs)
    elif isinstance(fn, PrimFunc):
        if kwargs:
            raise TileLangError(f"{factory} is a prim_func, not a factory; it takes no kwargs")
        func = fn
    else:
        func = fn(**kwargs)
        if isinstance(func, JITImpl):
            func = func.get_tir()
    if hasattr(func, "prim_func"):  # a compiled kernel object
        func = func.prim_func
    if not isinstance(func, PrimFunc):
        raise TileLangError(f"{module}.{factory}(**kwargs) returned {type(func).__name__}, not a T.prim_func")
    if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise TileLangError(f"--name {name!r} is not an identifier")
    return func.with_name(name) if name else func


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m tilelang.emit_ir", description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True)
    parser.add_argument("--factory", required=True)
    parser.add_argument("--kwargs", default="{}", help="JSON object of keyword arguments for the factory")
    parser.add_argument("--name", default=None, help="kernel name in the emitted function")
    args = parser.parse_args(argv)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--kwargs must be a JSON object")
    except ValueError as e:
        print(f"<kwargs>:1: invalid --kwargs: {e}", file=sys.stderr)
        return 1
    try:
        func = build(args.module, args.factory, kwargs, args.name)
        text = func.script()
    except TileLangError as e:
        print(str(e), file=sys.stderr)
        return 1
    except Exception as e:  # a Python error in the user's program: still say where
        loc = _frame_location(e) or f"{args.module}:1"
        print(f"{loc}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
