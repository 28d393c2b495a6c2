"""Golden Tile IR: each representative program and each conformance case must
emit exactly golden/<case>.tir (run with TL_UPDATE_GOLDEN=1 to rewrite them
after an intended change, then review the diff)."""

import os

import pytest

import fe_util

CASES = fe_util.golden_cases()


def test_case_names_are_unique():
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names))


def test_every_golden_file_has_a_case():
    names = {c[0] for c in CASES}
    stale = [p.name for p in fe_util.GOLDEN.glob("*.tir") if p.stem not in names]
    assert not stale, f"golden files without a case: {stale}"


@pytest.mark.parametrize("name,factory,kwargs", CASES, ids=[c[0] for c in CASES])
def test_golden(name, factory, kwargs, monkeypatch):
    monkeypatch.chdir(fe_util.REPO)  # locations are printed relative to the working directory
    text = factory(**kwargs).script()
    path = fe_util.GOLDEN / f"{name}.tir"
    if os.environ.get("TL_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with TL_UPDATE_GOLDEN=1"
    expected = path.read_text()
    assert text == expected, f"{name}: emitted Tile IR differs from {path}"


@pytest.mark.parametrize("name,factory,kwargs", CASES, ids=[c[0] for c in CASES])
def test_golden_is_well_formed(name, factory, kwargs):
    """Cheap structural checks the C++ parser relies on: version line, balanced braces,
    one function, a kernel statement at the top level of the function only."""
    text = (fe_util.GOLDEN / f"{name}.tir").read_text()
    lines = text.splitlines()
    assert lines[0] == "tileir 1"
    assert text.count("{") == text.count("}")
    assert sum(1 for l in lines if l.startswith("func @")) == 1
    for line in lines:
        if line.startswith("  ") and not line.startswith("    ") and line.strip() != "}":
            assert line.strip().startswith("kernel "), f"non-kernel statement at function level: {line}"
