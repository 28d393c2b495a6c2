#!/bin/sh
# ctest driver of examples/c/run_cases.c (examples/c/CMakeLists.txt registers each step):
#   test_run_cases.sh export BUILD DIR TARGET [-k EXPR]   tests/conformance/export_cases.py into DIR
#   test_run_cases.sh run BUILD DIR DEVICE                 every exported case must pass
#   test_run_cases.sh corrupt BUILD DIR DEVICE             one expected file changed: exactly that case FAILs, by name
#   test_run_cases.sh malformed BUILD DIR                  a bad manifest line: exit 2 naming manifest.txt:LINE
#   test_run_cases.sh missing BUILD DIR                    a missing data file: exit 2 naming it and its line
#   test_run_cases.sh recording BUILD DIR                  the exporter's rules on tests written for it: what is
#                                                          exported, what is listed as not covered and why
# The negative steps work on copies (DIR.corrupt, ...), so they may run in parallel.
set -eu
step=$1 build=$2 dir=$3
shift 3
src=$(cd "$(dirname "$0")/../.." && pwd)
run_cases=$build/bin/tl_run_cases
fail() { echo "FAILED: $*" >&2; exit 1; }

copy() {  # a fresh copy of the export: $dir.$1
  rm -rf "$dir.$1"
  cp -r "$dir" "$dir.$1"
  echo "$dir.$1"
}

case $step in
  export)
    target=$1
    shift
    rm -rf "$dir"
    PYTHONPATH="$build/python" TL_BUILD_DIR="$build" /usr/bin/python3 "$src/tests/conformance/export_cases.py" \
      --target "$target" -o "$dir" "$@"
    ;;
  run)
    out=$("$run_cases" "$dir" "$1") || { echo "$out"; fail "run_cases $dir $1: exit $?"; }
    echo "$out"
    echo "$out" | grep -q '^ok ' || fail "no case ran"
    ;;
  corrupt)
    d=$(copy corrupt)
    # The first check of the first case: its first expected value becomes 1e30.
    line=$(grep -n -m1 '^check ' "$d/manifest.txt")
    name=$(sed -n "1,${line%%:*}p" "$d/manifest.txt" | grep '^case ' | tail -1 | cut -d' ' -f2)
    file=$(echo "${line#*:}" | cut -d' ' -f5)
    /usr/bin/python3 -c "import struct,sys; f=open(sys.argv[1],'r+b'); f.write(struct.pack('<d',1e30))" "$d/$file"
    set +e
    out=$("$run_cases" "$d" "$1")
    rc=$?
    set -e
    echo "$out"
    [ "$rc" = 1 ] || fail "exit $rc, expected 1"
    echo "$out" | grep -qF "FAIL $name " || fail "no FAIL line for $name"
    echo "$out" | grep -q "element 0 is .*expected 1e+30" || fail "the failure does not name element 0 and 1e+30"
    [ "$(echo "$out" | grep -c '^FAIL ')" = 1 ] || fail "more than one case failed"
    echo "$out" | grep -q ' 1 failed,' || fail "summary does not count 1 failure"
    ;;
  malformed)
    d=$(copy malformed)
    # Line 5 becomes a launch with a broken argument; the error must name the file and line 5.
    sed -i '5s/.*/launch k0_main t0:f32:4x/' "$d/manifest.txt"
    set +e
    err=$("$run_cases" "$d" cpu 2>&1)
    rc=$?
    set -e
    echo "$err"
    [ "$rc" = 2 ] || fail "exit $rc, expected 2"
    echo "$err" | grep -qF "$d/manifest.txt:5: " || fail "message does not name manifest.txt:5"
    # An unknown record, and a case left open
    printf 'tlcases 1 cpu 0\nbundle cases.tlb\ncase x\nbuffer 0 f99 1 data/x.bin\n' >"$d/manifest.txt"
    err=$("$run_cases" "$d" cpu 2>&1) && fail "accepted an unknown dtype"
    echo "$err" | grep -qF "manifest.txt:4: unknown dtype 'f99'" || fail "unknown dtype: $err"
    printf 'tlcases 1 cpu 0\nbundle cases.tlb\ncase x\n' >"$d/manifest.txt"
    err=$("$run_cases" "$d" cpu 2>&1) && fail "accepted a case without end"
    echo "$err" | grep -qF "manifest.txt:4: case 'x' (line 3) has no 'end'" || fail "open case: $err"
    echo "$err"
    ;;
  missing)
    d=$(copy missing)
    line=$(grep -n -m1 '^buffer ' "$d/manifest.txt")
    file=$(echo "${line#*:}" | cut -d' ' -f5)
    rm "$d/$file"
    set +e
    err=$("$run_cases" "$d" cpu 2>&1)
    rc=$?
    set -e
    echo "$err"
    [ "$rc" = 2 ] || fail "exit $rc, expected 2"
    echo "$err" | grep -qF "manifest.txt:${line%%:*}: cannot open data file $d/$file" || fail "message does not name the file and line"
    ;;
  recording)
    # The exporter's recording rules on tests written for this check (DIR: a scratch directory).
    rm -rf "$dir"
    mkdir -p "$dir/tests"
    cp "$src/tests/conformance/conftest.py" "$dir/tests/"
    cat >"$dir/tests/test_conformance_rules.py" <<'PY'
import numpy as np
import pytest

import tlc_util
import tlc_kernels_basic as K


def _add(target, rng):
    kernel = tlc_util.compile(K.elementwise_add(20, 30, 32, 32, "float32", "float32"), out_idx=[2], target=target)
    a = rng.integers(-50, 50, (20, 30)).astype(np.float32)  # integers: every sum exact
    b = rng.integers(-50, 50, (20, 30)).astype(np.float32)
    return kernel, a, b


def test_direct(target, rng):
    kernel, a, b = _add(target, rng)
    tlc_util.assert_close(kernel(a, b), a.astype(np.float64) + b)


def test_exact_copy(target, rng):
    kernel, a, b = _add(target, rng)
    np.testing.assert_array_equal(np.asarray(kernel(a, b)).astype(np.float64), a.astype(np.float64) + b)


def test_derived(target, rng):
    kernel, a, b = _add(target, rng)
    tlc_util.assert_close(kernel(a, b) * 2, (a.astype(np.float64) + b) * 2)


def test_no_launch(target, rng):
    _add(target, rng)


def test_skipped(target):
    pytest.skip("not for this check")


def test_raises(target, rng):
    raise ValueError("boom")
PY
    PYTHONPATH="$build/python" TL_BUILD_DIR="$build" /usr/bin/python3 "$src/tests/conformance/export_cases.py" \
      --target cpu -o "$dir/out" --tests "$dir/tests" >"$dir/export.log" 2>&1 || { cat "$dir/export.log"; fail "export"; }
    m=$dir/out/manifest.txt
    cat "$m"
    expect() { grep -qF -- "$1" "$m" || fail "manifest lacks: $1"; }
    expect "case test_conformance_rules.py::test_direct[cpu]"
    expect "case test_conformance_rules.py::test_exact_copy[cpu]"
    expect "uncovered test_conformance_rules.py::test_derived[cpu] compares a value derived from the outputs (ndarray float32[20, 30])"
    expect "uncovered test_conformance_rules.py::test_no_launch[cpu] launches no kernel"
    expect "uncovered test_conformance_rules.py::test_skipped[cpu] skipped: not for this check"
    expect "uncovered test_conformance_rules.py::test_raises[cpu] failed in recording mode (call): ValueError: boom"
    [ "$(grep -c '^case ' "$m")" = 2 ] || fail "expected exactly 2 cases"
    out=$("$run_cases" "$dir/out" cpu) || { echo "$out"; fail "run_cases"; }
    echo "$out" | grep -q '^2 passed, 0 failed, 4 not covered' || fail "summary: $out"
    ;;
  *)
    echo "usage: $0 export|run|corrupt|malformed|missing|recording BUILD DIR ..." >&2
    exit 2
    ;;
esac
