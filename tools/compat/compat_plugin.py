"""pytest plugin of tools/compat/run_upstream.py (loaded with -p compat_plugin).

Replaces upstream's conftest.py files (the runner passes --noconftest: they put
upstream's own tilelang first on sys.path): seeds random, numpy and torch with
0 as they do, checks that `import tilelang` is this project's package, gives
each test a time limit ($TL_COMPAT_TEST_TIMEOUT seconds, SIGALRM), and writes
one JSON line per test to $TL_COMPAT_RESULTS: nodeid, outcome, reason. It
also appends reference_shims/ (torch references for flash_attn / fla) to the
end of sys.path and names the shims a test ran against in its reason.
"""

import json
import os
import random
import signal
import sys

import pytest

from compat_reason import reason_of

# Reference implementations of flash_attn / fla (reference_shims/README.md), at the END of sys.path:
# an installed package is always found first; a test that ran against a shim says so in its row.
SHIMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_shims")


def _shim_calls():
    mod = sys.modules.get("_tl_reference_calls")
    return mod.calls if mod is not None else None


def shim_note(calls):
    """The table's words for a test that ran against reference shims (empty when none ran)."""
    if not calls:
        return ""
    fns = ", ".join(f for f, _ in calls)
    pkgs = ", ".join(sorted({p for _, p in calls}))
    return (f"against the runner's torch reference for {fns} ({pkgs} not installed; "
            "tools/compat/reference_shims)")


def pytest_configure(config):
    if SHIMS not in sys.path:
        sys.path.append(SHIMS)
    random.seed(0)
    try:
        import numpy as np
        np.random.seed(0)
    except ImportError:
        pass
    try:
        import torch
        torch.manual_seed(0)
    except ImportError:
        pass
    want = os.environ.get("TL_COMPAT_EXPECT_TILELANG")
    if want:
        import tilelang
        got = os.path.realpath(os.path.dirname(tilelang.__file__))
        if not got.startswith(os.path.realpath(want)):
            raise pytest.UsageError(f"import tilelang resolved to {got}, not this project's {want}")


def _write(nodeid, outcome, reason=""):
    path = os.environ.get("TL_COMPAT_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"nodeid": nodeid, "outcome": outcome, "reason": reason}) + "\n")


class _Timeout(BaseException):
    pass


def pytest_runtest_setup(item):
    calls = _shim_calls()
    if calls is not None:
        del calls[:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = int(os.environ.get("TL_COMPAT_TEST_TIMEOUT", "0") or 0)
    if limit > 0:
        def on_alarm(signum, frame):
            raise _Timeout(f"test ran longer than {limit} s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(limit)
    try:
        yield
    finally:
        if limit > 0:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" or (rep.when == "setup" and (rep.failed or rep.skipped)):
        shims = shim_note(_shim_calls()) if rep.when == "call" else ""
        if rep.passed:
            _write(rep.nodeid, "passed", "passed " + shims if shims else "")
        elif rep.skipped:
            r = rep.longrepr
            msg = r[2] if isinstance(r, tuple) and len(r) == 3 else str(r)
            _write(rep.nodeid, "skipped", msg.replace("Skipped: ", ""))
        else:
            why = reason_of(call.excinfo.value if call.excinfo else None, str(rep.longrepr))
            _write(rep.nodeid, "failed", why + (f" (ran {shims})" if shims else ""))


def pytest_collectreport(report):
    if report.failed:
        exc = getattr(report, "_compat_exc", None)
        _write(report.nodeid or "<collection>", "error", reason_of(exc, str(report.longrepr)))


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        # re-import to capture the exception object (pytest keeps only its text)
        try:
            collector.collect()
        except BaseException as e:  # noqa: BLE001 - classified, then reported by pytest as usual
            cause = e
            while getattr(cause, "__cause__", None) is not None or getattr(cause, "__context__", None) is not None:
                nxt = cause.__cause__ or cause.__context__
                if nxt is cause:
                    break
                cause = nxt
            rep._compat_exc = cause
