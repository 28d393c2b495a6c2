"""Shared helpers of the frontend tests: loading program modules by path and
finding the line of a marker comment in a source file."""

import importlib.util
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]
GOLDEN = HERE / "golden"
PROGRAM_FILES = [
    HERE / "fe_programs.py",
    REPO / "tests" / "conformance" / "tlc_kernels_basic.py",
    REPO / "tests" / "conformance" / "tlc_kernels_gemm.py",
    REPO / "tests" / "conformance" / "tlc_kernels_attention.py",
    REPO / "tests" / "conformance" / "tlc_kernels_edges.py",
    REPO / "tests" / "conformance" / "tlc_kernels_workspace.py",
    REPO / "tests" / "conformance" / "tlc_kernels_bits.py",
]


def load(path):
    """Import a file under a name of its own (no sys.path changes, no clashes)."""
    name = "tlfe_" + pathlib.Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def golden_cases():
    cases = []
    for path in PROGRAM_FILES:
        for name, factory, kwargs in load(path).GOLDEN_CASES:
            cases.append((name, factory, kwargs))
    return cases


def marker_line(path, marker):
    """1-based line of the first line containing `marker` in the file."""
    for n, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if marker in line:
            return n
    raise AssertionError(f"marker {marker!r} not found in {path}")
