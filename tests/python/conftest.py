"""Fixtures shared by the tests in tests/python (helpers they import are in _helpers.py and _host_emulation.py
beside this file)."""
import os
import sys

import pytest

# the shared helper modules beside this file, whatever pytest's import mode
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def tl_pack_env():
    """tl-pack and its cache for tilelang.compile (see _helpers.use_tl_pack); skips the module's tests that use it
    where no tl-pack is built. A module whose every test compiles says `pytestmark =
    pytest.mark.usefixtures("tl_pack_env")`."""
    import _helpers
    return _helpers.use_tl_pack()
