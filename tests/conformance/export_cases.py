"""Exports the conformance suite for a C caller: one bundle, inputs, float64 expected outputs.

    PYTHONPATH=build/python /usr/bin/python3 tests/conformance/export_cases.py --target cpu -o DIR [-k EXPR]

Runs the suite's own tests (tests/conformance/test_*.py, through pytest, so the cases, their
parameters, their random inputs and their numpy float64 references are exactly the suite's) in a
recording mode instead of launching kernels:

- tilelang.compile traces each program as usual, but its Tile IR is collected instead of compiled;
  every function is renamed `k<N>_<name>` (kernel names of different tests collide: most are `main`),
  and all of them are compiled by one `tl-pack compile --target T` into DIR/cases.tlb;
- each kernel launch (JITKernel's, one per T.Kernel block) records its arguments: every tensor's
  memory (outputs the call allocates are zeros, workspaces too, as JITKernel passes them) and every
  scalar in its parameter's dtype;
- the suite's comparisons (tlc_util.assert_close and assert_equal_nan, np.testing.assert_array_equal) record the expected
  values (float64) and tolerances of the output they are given, then write the expected values into
  that output, so that a test computing a later reference from an earlier output (fp8 scales) sees
  correct data.

A test that launches nothing, compares something that is not a kernel's output (a value derived
from one), is skipped for the target, or fails in recording mode is listed in the manifest as
`uncovered NAME REASON`: nothing is dropped silently.

DIR/manifest.txt, one record a line, fields separated by single spaces (examples/c/run_cases.c
reads it; `#` starts a comment line):

    tlcases 1 TARGET SEED               first line
    bundle FILE                         the bundle, relative to DIR
    case NAME                           starts a case (NAME has no spaces)
    buffer ID DTYPE COUNT FILE          device memory of COUNT elements, initial contents FILE (raw)
    launch KERNEL ARG...                ARG: tID:DTYPE:D0xD1x... (tensor over buffer ID, dense
                                        row-major from its start) or s:DTYPE:VALUE (scalar; floats in
                                        C99 hex notation)
    check ID DTYPE COUNT FILE RTOL ATOL after the launches, buffer ID's first COUNT elements read as
                                        DTYPE must match FILE (COUNT float64) within
                                        |actual - expected| <= ATOL + RTOL * |expected|;
                                        a NaN matches only an expected NaN;
    check ... ATOL signed_zeros         the same, and a zero's sign must match too
    end                                 ends the case
    uncovered NAME REASON...            a test not expressible here, and why

DTYPE is the Tile IR name (f16 bf16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool); raw files are
little-endian, bfloat16 as its 16-bit patterns. Launches of one case run in order on one device,
sharing buffers by ID (a split-K output accumulated in place, flash decoding's two passes).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
_FLOAT_IR = ("f16", "bf16", "f32", "f64")


def _root(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a):
    return a.__array_interface__["data"][0]


class Case:
    def __init__(self, name):
        self.name = name
        self.roots = []        # (root array, ir dtype, snapshot bytes)
        self.launches = []     # (kernel, [arg tokens])
        self.checks = []       # (buffer id, ir dtype, float64 expected, rtol, atol)
        self.problems = []
        self.sentinels = set()  # buffers of outputs the call allocated, holding sentinel values

    def fill_sentinel(self, i):
        """Distinct values (exact in every dtype, differing between buffers) in output buffer i after
        its snapshot, so that a test comparing an exact copy of it (`out.astype(np.float64)`) can be
        traced back to it by value."""
        r = self.roots[i][0]
        vals = (np.arange(r.size) * 7 + i * 13) % 97 + 2
        if self.roots[i][1] == "bf16":
            import tlc_util
            vals = tlc_util.to_bf16_bits(vals)
        elif r.dtype == np.bool_:
            return
        r.reshape(-1)[...] = vals.astype(r.dtype)
        self.sentinels.add(i)

    def traced(self, a):
        """The sentinel-filled output `a` holds exactly the values of (as float64), or None."""
        try:
            v = np.asarray(a, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            return None
        import tlc_util
        found = [i for i in self.sentinels if self.roots[i][0].size == v.size and
                 np.array_equal(tlc_util.as_f64(self.roots[i][0], "bfloat16" if self.roots[i][1] == "bf16"
                                                else None).ravel(), v)]
        return found[0] if len(found) == 1 else None

    def buffer_of(self, a, ir_dtype=None, snapshot=False):
        """Buffer id of the memory array `a` starts; a new buffer (its contents now) when `snapshot`."""
        r = _root(a)
        for i, (root, _, _) in enumerate(self.roots):
            if root is r:
                return i
        if not snapshot:
            return None
        self.roots.append((r, ir_dtype, np.ascontiguousarray(r).tobytes()))
        return len(self.roots) - 1


class Recorder:
    """The state of an export: kernels collected from tilelang.compile, cases from the tests."""

    def __init__(self):
        self.texts = {}        # renamed Tile IR text -> its index
        self.modules = []      # renamed Tile IR texts, in order
        self.prefix = {}       # fake bundle path -> kernel name prefix
        self.cases = []
        self.uncovered = []    # (name, reason)
        self.current = None

    # -- tilelang.compiler.compile_ir
    def compile_ir(self, text, target, isa, emit_source_dir=None, build_env=None):
        if emit_source_dir is not None:
            return _REAL_COMPILE_IR(text, target, isa, emit_source_dir, build_env=build_env)
        if build_env:  # one bundle holds every case: per-kernel tl-pack switches cannot be expressed in it
            raise NotImplementedError(f"tl-pack build switches {sorted(build_env)} (pass_configs) in an exported case")
        n = self.texts.get(text)
        if n is None:
            n = self.texts[text] = len(self.modules)
            self.modules.append(re.sub(r"(?m)^func @(\w+)\(", rf"func @k{n}_\1(", text))
        path = f"<export:{n}>"
        self.prefix[path] = f"k{n}_"
        return path

    # -- one launch of JITKernel (per T.Kernel block)
    def launch(self, jk, name, args):
        from tilelang.buffer import Buffer
        case = self.current
        if case is None:
            raise RuntimeError("a kernel launch outside a test")
        tokens = []
        for pi, (p, a) in enumerate(zip(jk.prim_func.function.params, args)):
            if isinstance(p, Buffer):
                if not isinstance(a, np.ndarray):
                    case.problems.append(f"argument {p.name} is a {type(a).__name__}, not a numpy array")
                    return
                r = _root(a)
                if _address(a) != _address(r) or not a.flags.c_contiguous:
                    case.problems.append(f"argument {p.name} is a view at an offset or with strides")
                    return
                known = len(case.roots)
                i = case.buffer_of(a, p.dtype.ir, snapshot=True)
                if i == known and pi in jk.out_idx:
                    case.fill_sentinel(i)
                dims = "x".join(str(int(d)) for d in a.shape)
                if not dims:
                    case.problems.append(f"argument {p.name} has rank 0")
                    return
                tokens.append(f"t{i}:{p.dtype.ir}:{dims}")
            else:
                ir = p.dtype.ir
                if ir in ("f16", "bf16"):  # no 16-bit float scalars in run_cases.c yet
                    case.problems.append(f"scalar {p.name} is {ir} (run_cases passes f32, f64 and integer scalars)")
                    return
                if ir in _FLOAT_IR:
                    value = float(np.asarray(a, dtype=np.float64))
                    # in the parameter's precision, as the runtime binding converts it
                    value = float(np.asarray(value, dtype=np.float32 if ir == "f32" else np.float64))
                    tokens.append(f"s:{ir}:{value.hex()}")
                else:
                    tokens.append(f"s:{ir}:{int(a)}")
        case.launches.append((self.prefix[jk.bundle_path] + name, tokens))

    # -- the suite's comparisons
    def check(self, actual, expected, ir_hint, rtol, atol, signed_zeros=False):
        import tlc_util
        case = self.current
        if case is None:
            return
        a = actual if isinstance(actual, np.ndarray) else None
        i = case.buffer_of(a) if a is not None else None
        if i is None or a.nbytes != case.roots[i][0].nbytes or _address(a) != _address(case.roots[i][0]):
            i = case.traced(actual)  # an exact copy of an output (astype, asarray with a dtype)
            if i is not None:
                a = case.roots[i][0]
        if i is None:
            case.problems.append(f"compares a value derived from the outputs ({type(actual).__name__}"
                                 f"{'' if a is None else ' ' + str(a.dtype) + str(list(a.shape))}), "
                                 "not a kernel output itself")
            return
        ir = case.roots[i][1]
        case.sentinels.discard(i)
        want = np.broadcast_to(np.asarray(expected, dtype=np.float64), a.shape)
        case.checks.append((i, ir, np.ascontiguousarray(want).ravel(), float(rtol), float(atol), signed_zeros))
        if a.flags.writeable:  # later references computed from this output see the right values
            with np.errstate(all="ignore"):
                if ir == "bf16":
                    a[...] = tlc_util.to_bf16_bits(want)
                else:
                    a[...] = want.astype(a.dtype)

    def assert_close(self, actual, expected, dtype="float32", rtol=None, atol=None, what=""):
        import tlc_util
        r, t = tlc_util.TOL[dtype]
        self.check(actual, expected, dtype, r if rtol is None else rtol, t if atol is None else atol)

    def assert_array_equal(self, actual, desired, *args, **kwargs):
        self.check(actual, desired, None, 0.0, 0.0)

    def assert_equal_nan(self, actual, expected, signed_zeros=False, what=""):
        self.check(actual, expected, None, 0.0, 0.0, signed_zeros)


_REAL_COMPILE_IR = None
REC = Recorder()

# Tests whose subject is not a kernel's numbers: listed, not run.
NOT_NUMERIC = {
    "test_artifacts": "checks the compiled artefacts (generated source, exported bundle), not a result",
}


class Plugin:
    """pytest plugin: recording mode for the conformance tests."""

    def pytest_configure(self, config):
        global _REAL_COMPILE_IR
        import tilelang
        import tilelang.compiler
        import tlc_util
        _REAL_COMPILE_IR = tilelang.compiler.compile_ir
        tilelang.compiler.compile_ir = REC.compile_ir
        tlc_util.pipeline_missing = lambda target: None   # compiled here; run by the C program
        tlc_util.cannot_run = lambda target: None
        tlc_util.assert_close = REC.assert_close
        tlc_util.assert_equal_nan = REC.assert_equal_nan
        np.testing.assert_array_equal = REC.assert_array_equal

        class _Launch:
            def __init__(self, jk, name):
                self.jk, self.name = jk, name

            def __call__(self, *args, stream=None):
                REC.launch(self.jk, self.name, args)

        def prepare(jk):
            if jk._prepared is None:
                jk._prepared_all = [_Launch(jk, n) for n in jk.kernel_names]
                jk._prepared = jk._prepared_all[0]
            return jk._prepared

        tilelang.JITKernel._prepare = prepare
        tilelang.JITKernel._to_runtime = lambda jk, p, a, device, staged: a  # bf16 stays uint16 bits

    @pytest.hookimpl(trylast=True)  # after -k
    def pytest_collection_modifyitems(self, config, items):
        keep = []
        for item in items:
            reason = NOT_NUMERIC.get(item.originalname)
            if reason:
                REC.uncovered.append((_name(item), reason))
            else:
                keep.append(item)
        items[:] = keep

    def pytest_runtest_setup(self, item):
        if hasattr(item.module, "assert_close"):
            item.module.assert_close = REC.assert_close
        REC.current = Case(_name(item))

    def pytest_runtest_logreport(self, report):
        case = REC.current
        if case is None or not (report.when == "call" or report.outcome != "passed"):
            return
        REC.current = None
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            REC.uncovered.append((case.name, "skipped: " + reason.replace("Skipped: ", "")))
        elif report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)  # the exception's own message
            last = crash.message if crash else str(report.longrepr).strip().splitlines()[-1]
            REC.uncovered.append((case.name, f"failed in recording mode ({report.when}): {last}"))
        elif case.problems:
            REC.uncovered.append((case.name, "; ".join(dict.fromkeys(case.problems))))
        elif not case.launches:
            REC.uncovered.append((case.name, "launches no kernel"))
        elif not case.checks:
            REC.uncovered.append((case.name, "compares no kernel output"))
        else:
            REC.cases.append(case)


def _name(item):
    return re.sub(r"[^A-Za-z0-9_.:,=+\-\[\]]", "_", item.nodeid.split("/")[-1])


def _one_line(text):
    return " ".join(str(text).split())


def compile_bundle(path, pack_target, jobs):
    """One `tl-pack compile` of every collected kernel into `path`. A kernel the backend reports as
    UNIMPLEMENTED for this target (pytest: an expected failure) is left out, and the cases that
    launch it are listed as not covered with the backend's message; any other failure stops."""
    from tilelang import toolchain
    dropped = {}  # module index -> the backend's message
    while True:
        with tempfile.TemporaryDirectory(prefix="tl-export-") as tmp:
            files = []
            for n, text in enumerate(REC.modules):
                if n not in dropped:
                    files.append(os.path.join(tmp, f"k{n}.tir"))
                    with open(files[-1], "w") as f:
                        f.write(text)
            cmd = [toolchain.tl_pack_path(), "compile", *files, "--target", pack_target, "-o", path,
                   "--cache-dir", toolchain.cache_dir(), "-q"]
            if jobs:
                cmd += ["-j", str(jobs)]
            proc = subprocess.run(cmd, capture_output=True, text=True) if files else None
        if proc is None or proc.returncode == 0:
            break
        err = proc.stderr or proc.stdout
        bad = {}
        for line in err.splitlines():
            m = re.search(r"UNIMPLEMENTED: @k(\d+)_\S*: (.*)", line)
            if m:
                bad.setdefault(int(m.group(1)), m.group(2))
        if not bad or set(bad) & set(dropped):
            sys.exit(f"export_cases: tl-pack compile failed (exit {proc.returncode}):\n{err}")
        dropped.update(bad)
    for case in list(REC.cases):
        why = [dropped[n] for n in (int(re.match(r"k(\d+)_", k).group(1)) for k, _ in case.launches) if n in dropped]
        if why:
            REC.cases.remove(case)
            REC.uncovered.append((case.name, f"not implemented by the backend for {pack_target}: {why[0]}"))
    return len(REC.modules) - len(dropped)


def write(out, target, pack_target, seed, jobs):
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    kernels = compile_bundle(os.path.join(out, "cases.tlb"), pack_target, jobs)
    lines = [f"tlcases 1 {target} {seed}", "bundle cases.tlb"]
    for c, case in enumerate(REC.cases):
        lines.append(f"case {case.name}")
        for i, (root, ir, data) in enumerate(case.roots):
            rel = f"data/c{c}_b{i}.bin"
            with open(os.path.join(out, rel), "wb") as f:
                f.write(data)
            lines.append(f"buffer {i} {ir} {root.size} {rel}")
        for kernel, tokens in case.launches:
            lines.append(" ".join(["launch", kernel] + tokens))
        for j, (i, ir, want, rtol, atol, signed_zeros) in enumerate(case.checks):
            rel = f"data/c{c}_e{j}.bin"
            want.astype("<f8").tofile(os.path.join(out, rel))
            lines.append(f"check {i} {ir} {want.size} {rel} {rtol!r} {atol!r}" + (" signed_zeros" if signed_zeros else ""))
        lines.append("end")
    for name, reason in REC.uncovered:
        lines.append(f"uncovered {name} {_one_line(reason)}")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return kernels


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="cpu, cuda, vulkan (as tilelang.compile's target)")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression selecting tests")
    ap.add_argument("--seed", type=int, help="TL_CONFORMANCE_SEED (default: fresh)")
    ap.add_argument("-j", dest="jobs", type=int, help="tl-pack compile -j")
    ap.add_argument("--tests", default=HERE, help="directory of test_conformance_*.py files (default: the suite's)")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else np.random.SeedSequence().entropy % (2 ** 32)
    os.environ["TL_CONFORMANCE_TARGETS"] = args.target
    os.environ["TL_CONFORMANCE_SEED"] = str(seed)
    os.environ.pop("TL_CONFORMANCE_COMPILE_ONLY", None)
    sys.path.insert(0, HERE)
    import tilelang.compiler
    from tilelang import toolchain
    kind, pack_target = tilelang.compiler.resolve_target_spec(args.target)
    pack_target = pack_target or toolchain.host_isa_level()
    pytest_args = [args.tests, "-q", "-p", "no:cacheprovider", "-o", "python_files=test_conformance_*.py"]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    rc = pytest.main(pytest_args, plugins=[Plugin()])
    if rc not in (0, 5):  # 5: nothing selected; failures are listed as uncovered
        print(f"export_cases: pytest exit {rc} (tests that failed in recording mode are listed as uncovered)",
              file=sys.stderr)
    kernels = write(args.out, kind, pack_target, seed, args.jobs)
    print(f"export_cases: {len(REC.cases)} case(s), {kernels} kernel module(s) for {pack_target} "
          f"in {args.out}; {len(REC.uncovered)} not covered:")
    for name, reason in REC.uncovered:
        print(f"  {name}: {_one_line(reason)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
