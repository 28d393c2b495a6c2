"""Which reference shims (tools/compat/reference_shims) ran during the current test.

compat_plugin.py clears `calls` before each test and reads it after: a test that used a shim is
reported with the shim's name, so a pass against our own reference is never mistaken for a pass
against the real package.
"""

calls = []


def note(function, package):
    """Records one call of shim `function` standing in for the missing `package`."""
    if (function, package) not in calls:
        calls.append((function, package))
