#!/bin/sh
# CLI tests of `tl-pack compile` and `tl-pack build` (ctest: compiler.cpu.cli.*).
# usage: cli_test.sh CASE TL_PACK DATA_DIR
set -eu
CASE=$1 TLPACK=$2 DATA=$3
WORK=$(mktemp -d /tmp/tl-cli-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
unset TL_CACHE_DIR
fail() { echo "FAIL: $*" >&2; exit 1; }

case "$CASE" in
  golden)
    # No cache: both runs compile from scratch; the bundles must be byte-identical.
    "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v2,x86-64-v3 -o "$WORK/a.tlb" -q
    "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v2,x86-64-v3 -o "$WORK/b.tlb" -q
    cmp "$WORK/a.tlb" "$WORK/b.tlb" || fail "two compiles differ"
    "$TLPACK" verify "$WORK/a.tlb" >/dev/null || fail "bundle does not verify"
    ;;
  cache)
    "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v3 -o "$WORK/a.tlb" --cache-dir "$WORK/c" 2>"$WORK/log1"
    grep -q "compiled in" "$WORK/log1" || fail "first build did not compile: $(cat "$WORK/log1")"
    TL_CACHE_DIR="$WORK/c" "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v3 -o "$WORK/b.tlb" 2>"$WORK/log2"
    grep -q "cached" "$WORK/log2" || fail "rebuild was not served from the cache: $(cat "$WORK/log2")"
    if grep -q "compiled in" "$WORK/log2"; then fail "rebuild compiled"; fi
    cmp "$WORK/a.tlb" "$WORK/b.tlb" || fail "cached rebuild differs"
    ;;
  bad_target)
    set +e
    "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v9 -o "$WORK/a.tlb" 2>"$WORK/err"
    rc=$?
    set -e
    [ "$rc" = 1 ] || fail "exit code $rc, want 1"
    grep -q "unknown target 'x86-64-v9'" "$WORK/err" || fail "message: $(cat "$WORK/err")"
    [ ! -e "$WORK/a.tlb" ] || fail "wrote a bundle"
    ;;
  compiler_error)
    cat >"$WORK/cc" <<'EOS'
#!/bin/sh
case "$1" in --version) echo "fakecc 1"; exit 0;; -dumpmachine) echo x86_64-linux-gnu; exit 0;; esac
echo "kernel.cc:42:1: error: fake compiler says no" >&2
exit 1
EOS
    chmod +x "$WORK/cc"
    set +e
    TL_HOST_CXX="$WORK/cc" "$TLPACK" compile "$DATA/gemm_relu.tir" --target x86-64-v4 -o "$WORK/a.tlb" 2>"$WORK/err"
    rc=$?
    set -e
    [ "$rc" = 70 ] || fail "exit code $rc, want 70"
    for want in "kernel 'gemm_relu'" "x86-64-v4" "tests/conformance/gemm.py:16" "fake compiler says no"; do
      grep -q "$want" "$WORK/err" || fail "message lacks '$want': $(cat "$WORK/err")"
    done
    ;;
  bad_ir)
    printf 'tileir 1\nfunc @f(A: tensor[4] f32) {\n  kernel grid(1) threads(1) -> (bx) {\n    A[0] = 1:i32 loc("f.py", 3)\n  }\n}\n' >"$WORK/bad.tir"
    set +e
    "$TLPACK" compile "$WORK/bad.tir" -o "$WORK/a.tlb" 2>"$WORK/err"
    rc=$?
    set -e
    [ "$rc" = 3 ] || fail "exit code $rc, want 3: $(cat "$WORK/err")"
    ;;
  build)
    cp "$DATA/manifest.json" "$DATA/scale.py" "$WORK/"
    (cd / && "$TLPACK" build "$WORK/manifest.json" -q --cache-dir "$WORK/c")
    [ -s "$WORK/scale.tlb" ] || fail "no bundle next to the manifest"
    "$TLPACK" inspect "$WORK/scale.tlb" >"$WORK/inspect"
    grep -q "scale_by_3(X: f32\[N\]" "$WORK/inspect" || fail "inspect: $(cat "$WORK/inspect")"
    grep -q "scale_1000(X: f32\[1000\]" "$WORK/inspect" || fail "inspect: $(cat "$WORK/inspect")"
    grep -q "cpu.x86-64-v3" "$WORK/inspect" || fail "no v3 variant"
    if grep -q "cpu.x86-64-v4" "$WORK/inspect"; then fail "targets not taken from the manifest"; fi
    # Reproducible: a second build (from the cache) gives the same bytes.
    "$TLPACK" build "$WORK/manifest.json" -q --cache-dir "$WORK/c" -o "$WORK/again.tlb"
    cmp "$WORK/scale.tlb" "$WORK/again.tlb" || fail "rebuild differs"
    ;;
  build_error)
    cp "$DATA/scale.py" "$WORK/"
    printf '{"kernels": [{"module": "scale", "factory": "scale", "kwargs": {"N": 64, "broken": true}, "name": "b"}]}' >"$WORK/m.json"
    set +e
    "$TLPACK" build "$WORK/m.json" -o "$WORK/a.tlb" 2>"$WORK/err"
    rc=$?
    set -e
    [ "$rc" = 3 ] || fail "exit code $rc, want 3"
    grep -q "kernel 'b' (scale.scale)" "$WORK/err" || fail "message: $(cat "$WORK/err")"
    grep -q "scale.py:7" "$WORK/err" || fail "no file:line: $(cat "$WORK/err")"
    printf '{"kernels": [{"module": "scale", "factory": "scale", "kwargs": {"N": 64}, "name": "d", "dynamic": ["M"]}]}' >"$WORK/m2.json"
    set +e
    "$TLPACK" build "$WORK/m2.json" -o "$WORK/a.tlb" 2>"$WORK/err2"
    rc=$?
    set -e
    [ "$rc" = 3 ] || fail "exit code $rc, want 3 for a wrong dynamic list"
    grep -q "'M' as dynamic" "$WORK/err2" || fail "message: $(cat "$WORK/err2")"
    ;;
  *) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
