"""One-line reasons for failed upstream tests, naming the missing feature.

reason_of(exc, text) looks at the exception (when there is one) and at the
text pytest printed, most specific first:
  - this project's TileLangUnimplementedFeature / TileLangNotImplementedError:
    their message ("unsupported feature: ..."), which names the feature;
  - a missing module (torch, tilelang.carver, ...): "missing module X";
  - a missing T.* / tilelang.* attribute: "missing API T.name";
  - a TileLangSyntaxError / TileLangCompileError: its first line (file:line: ...);
  - an AssertionError from a comparison: "numerical mismatch: ...";
  - anything else: "ExceptionType: first line".
"""

import re

_MAX = 300


def _first(text):
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line[:_MAX]
    return ""


def _feature_line(text):
    m = re.search(r"unsupported feature: [^\n]*", text)
    if m:
        return m.group(0)[:_MAX]
    # T.import_source / T.call_extern on a target other than CUDA (kernel, function and target named)
    m = re.search(r"T\.call_extern with imported CUDA source runs only on CUDA targets[^\n]*", text)
    if m:
        return "backend UNIMPLEMENTED: " + m.group(0)[:_MAX]
    m = re.search(r"not implemented by the backend: [^\n]*", text)
    if m:
        return "backend UNIMPLEMENTED: " + m.group(0).split(": ", 1)[1][:_MAX]
    return None


def reason_of(exc, text=""):
    text = str(text or "")
    if exc is not None:
        name = type(exc).__name__
        msg = str(exc)
        if isinstance(exc, ModuleNotFoundError):
            return f"missing module {exc.name}" if exc.name else _first(msg)
        if name in ("TileLangUnimplementedFeature", "TileLangNotImplementedError", "TileLangUnsupportedAPI"):
            return _feature_line(msg) or f"not implemented: {_first(msg)}"
        if isinstance(exc, AttributeError):
            m = re.search(r"module '(tilelang(?:\.[\w.]+)?)' has no attribute '(\w+)'", msg)
            if m:
                mod = "T" if m.group(1) == "tilelang.language" else m.group(1)
                return f"missing API {mod}.{m.group(2)}"
        if name.startswith("TileLang"):
            return _feature_line(msg) or f"{name}: {_first(msg)}"
        if isinstance(exc, AssertionError):
            return f"numerical mismatch: {_first(msg)}" if "mismatch" in msg or "close" in msg.lower() \
                else f"AssertionError: {_first(msg)}"
        if name == "_Timeout":
            return f"timeout: {msg}"
        return f"{name}: {_first(msg)}"
    feature = _feature_line(text)
    if feature:
        return feature
    m = re.search(r"No module named '([\w.]+)'", text)
    if m:
        return f"missing module {m.group(1)}"
    m = re.search(r"module '(tilelang(?:\.[\w.]+)?)' has no attribute '(\w+)'", text)
    if m:
        mod = "T" if m.group(1) == "tilelang.language" else m.group(1)
        return f"missing API {mod}.{m.group(2)}"
    m = re.search(r"^E\s+(\w+(?:Error|Exception|Feature)\b.*)$", text, re.M)
    if m:
        return m.group(1)[:_MAX]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1].strip() if lines else "failed")[:_MAX]
