#!/usr/bin/env python3
"""Run upstream TileLang's example tests, unchanged, against this project.

    tools/compat/run_upstream.py /path/to/tilelang-checkout --build-dir build --target cpu --out compat.md

Given a checkout of upstream TileLang (github.com/tile-ai/tilelang; nothing of
it is copied into this repository), runs the chosen example directories'
test_*.py files (and testing/python/kernel's GEMM tests) with pytest, with
`import tilelang` resolving to this project's package, and writes a markdown
table: directory, test, result, reason for each failure or skip. A directory
without a test_*.py file (dynamic_shape, online_softmax) gets a generated
test that calls its example's main() (or imports a script without one).

Upstream's conftest.py files are not loaded (--noconftest: they put upstream's
own package first on sys.path); tools/compat/compat_plugin.py seeds the RNGs as
they do, checks where tilelang comes from, limits each test's time and records
the results. Reasons come from compat_reason.py and name the missing feature.
Exit status: 0 when the table was written (whatever the results), 2 on bad
arguments.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# The list (#12). flash_attention: forward tests only.
DEFAULT_DIRS = ["elementwise", "gemm", "gemm_splitk", "dynamic_shape", "norm", "online_softmax", "cast",
                "flash_attention", "flash_decoding", "dequantize_gemm", "topk", "convolution", "linear_attention"]
DIR_FILTERS = {"flash_attention": "fwd"}
KERNEL_TESTS = "testing/python/kernel/test_tilelang_kernel_*gemm*.py"


def default_python():
    return "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def shim_for(example_dir, tmp):
    """A generated test file for a directory without test_*.py: main() of each example."""
    lines = ["import importlib, sys", f"sys.path.insert(0, {example_dir!r})", ""]
    for path in sorted(glob.glob(os.path.join(example_dir, "*.py"))):
        mod = os.path.splitext(os.path.basename(path))[0]
        if mod.startswith(("regression_", "test_")) or mod in ("__init__", "conftest"):
            continue
        with open(path, errors="replace") as f:
            has_main = "\ndef main(" in f.read()
        body = f"importlib.import_module({mod!r}).main()" if has_main else f"importlib.import_module({mod!r})"
        lines += [f"def test_{mod}():", f"    {body}", ""]
    name = f"test_{os.path.basename(example_dir)}_main.py"
    with open(os.path.join(tmp, name), "w") as f:
        f.write("\n".join(lines))
    return os.path.join(tmp, name)


def run_pytest(args, label, files, cwd, env, kfilter, results_path):
    cmd = [args.python, "-m", "pytest", "-q", "-rN", "--noconftest", "--continue-on-collection-errors", "-p", "no:cacheprovider", "-p", "compat_plugin",
           "--rootdir", cwd, "-c", os.devnull]
    if kfilter:
        cmd += ["-k", kfilter]
    cmd += files
    open(results_path, "w").close()
    env = dict(env, TL_COMPAT_RESULTS=results_path)
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=args.dir_timeout)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = "timeout"
    took = time.time() - t0
    rows = []
    with open(results_path) as f:
        for line in f:
            r = json.loads(line)
            rows.append((label, r["nodeid"], r["outcome"], r["reason"]))
    if rc == "timeout":
        rows.append((label, "(rest of the directory)", "failed", f"timeout: pytest ran past {args.dir_timeout} s"))
    elif not rows:
        tail = [ln for ln in out.splitlines() if ln.strip()][-3:]
        rows.append((label, "(no tests)", "error" if rc not in (0, 5) else "none", " / ".join(tail)[:300]))
    return rows, out, took


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("upstream", help="a checkout of upstream TileLang (its examples/ and testing/ are read)")
    ap.add_argument("--dirs", default=",".join(DEFAULT_DIRS), help="example directories (comma list)")
    ap.add_argument("--no-kernel-tests", action="store_true", help="skip testing/python/kernel's GEMM tests")
    ap.add_argument("--target", default=None, help="TILELANG_DEFAULT_TARGET for tilelang.compile: cpu, cuda, auto")
    ap.add_argument("--build-dir", default=None, help="this project's build dir (its python/ goes on PYTHONPATH)")
    ap.add_argument("--pythonpath", default=None, help="PYTHONPATH instead of BUILD/python (os.pathsep list)")
    ap.add_argument("--python", default=default_python(), help="interpreter that runs pytest")
    ap.add_argument("--out", default="compat_results.md", help="markdown table written here")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--log-dir", default=None, help="pytest output per directory goes here")
    ap.add_argument("--test-timeout", type=int, default=300, help="seconds per test")
    ap.add_argument("--dir-timeout", type=int, default=1800, help="seconds per directory")
    ap.add_argument("-k", dest="kfilter", default=None, help="pytest -k expression, for every directory")
    args = ap.parse_args(argv)

    upstream = os.path.abspath(args.upstream)
    if not os.path.isdir(os.path.join(upstream, "examples")):
        print(f"{upstream}: no examples/ directory; expected a checkout of upstream TileLang", file=sys.stderr)
        return 2
    if args.pythonpath:
        pythonpath = args.pythonpath
    else:
        bdir = os.path.abspath(args.build_dir or os.path.join(REPO, "build"))
        if not os.path.isdir(os.path.join(bdir, "python", "tilelang")):
            print(f"{bdir}/python/tilelang missing; build the project (or pass --pythonpath)", file=sys.stderr)
            return 2
        pythonpath = os.path.join(bdir, "python")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, pythonpath])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TL_COMPAT_TEST_TIMEOUT"] = str(args.test_timeout)
    if args.build_dir and "TL_BUILD_DIR" not in env:
        env["TL_BUILD_DIR"] = os.path.abspath(args.build_dir)
    if args.target:
        env["TILELANG_DEFAULT_TARGET"] = args.target
    probe = subprocess.run([args.python, "-c", "import os, tilelang; print(os.path.dirname(tilelang.__file__))"],
                           env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"import tilelang failed with PYTHONPATH={env['PYTHONPATH']}:\n{probe.stderr}", file=sys.stderr)
        return 2
    env["TL_COMPAT_EXPECT_TILELANG"] = probe.stdout.strip()

    rows, logs = [], {}
    tmp = tempfile.mkdtemp(prefix="tl-compat-")
    try:
        results = os.path.join(tmp, "results.jsonl")
        jobs = []
        for d in [x.strip() for x in args.dirs.split(",") if x.strip()]:
            edir = os.path.join(upstream, "examples", d)
            if not os.path.isdir(edir):
                rows.append((d, "-", "error", f"examples/{d} not in the checkout"))
                continue
            files = sorted(glob.glob(os.path.join(edir, "test_*.py")))
            kf = DIR_FILTERS.get(d)
            if not files:
                files = [shim_for(edir, tmp)]
            if args.kfilter:
                kf = f"({kf}) and ({args.kfilter})" if kf else args.kfilter
            jobs.append((d, files, edir, kf))
        if not args.no_kernel_tests:
            files = sorted(glob.glob(os.path.join(upstream, KERNEL_TESTS)))
            if files:
                jobs.append(("testing/python/kernel", files, os.path.dirname(files[0]), args.kfilter))
        for label, files, cwd, kf in jobs:
            print(f"== {label}: {len(files)} file(s)", flush=True)
            got, out, took = run_pytest(args, label, files, cwd, env, kf, results)
            logs[label] = out
            for r in got:
                print(f"   {r[2]:8} {r[1]}  {r[3]}", flush=True)
            print(f"   ({took:.0f} s)", flush=True)
            rows += got
            write_table(args, rows, upstream, quiet=True)  # a partial table survives a killed run
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    write_table(args, rows, upstream)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([dict(zip(("dir", "test", "result", "reason"), r)) for r in rows], f, indent=1)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
        for label, out in logs.items():
            with open(os.path.join(args.log_dir, label.replace("/", "_") + ".log"), "w") as f:
                f.write(out)
    return 0


def _short(nodeid):
    return nodeid.split("/")[-1]


def write_table(args, rows, upstream, quiet=False):
    rev = subprocess.run(["git", "-C", upstream, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    rev = rev.stdout.strip()
    stamp = os.path.join(upstream, "UPSTREAM_COMMIT")  # written by gpu_check.sh when it extracts a checkout
    if not rev and os.path.exists(stamp):
        with open(stamp) as f:
            rev = f.read().strip()[:12]
    rev = rev or "(not a git checkout)"
    counts = {}
    for d, _, res, _ in rows:
        c = counts.setdefault(d, {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "none": 0})
        c[res] = c.get(res, 0) + 1
    lines = [f"# Upstream TileLang examples against this project",
             "",
             f"upstream {rev}; target {args.target or 'auto'}; python {args.python}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "",
             "| directory | passed | failed | skipped |",
             "| --- | --- | --- | --- |"]
    for d, c in counts.items():
        lines.append(f"| {d} | {c['passed']} | {c['failed'] + c['error']} | {c['skipped']} |")
    tot = {k: sum(c[k] for c in counts.values()) for k in ("passed", "failed", "error", "skipped")}
    lines += [f"| **total** | {tot['passed']} | {tot['failed'] + tot['error']} | {tot['skipped']} |", "",
              "| directory | test | result | reason |", "| --- | --- | --- | --- |"]
    for d, t, res, reason in rows:
        reason = reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {d} | `{_short(t)}` | {res} | {reason} |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    if not quiet:
        print(f"wrote {args.out}: passed {tot['passed']}, failed {tot['failed'] + tot['error']}, "
              f"skipped {tot['skipped']}")


if __name__ == "__main__":
    sys.exit(main())
