#!/bin/sh
# compiler.hip.tl_pack_targets: `tl-pack compile --target hip|gfx942:xnack-|cpu,hip`
# end to end, inspect's hsaco lines, verify, extract + llvm-readelf on a payload,
# a bad target ID's exit code, and byte-identical rebuilds.
# Usage: tl_pack_hip.sh TL_PACK INPUT.tir OUTDIR. Exit 77 (ctest skip) without clang-19.
set -eu
tlp=$1 in=$2 out=$3
if ! command -v clang++-19 >/dev/null 2>&1 && [ ! -x /usr/lib/llvm-19/bin/clang++ ]; then
  echo "no clang-19 (apt-get install clang-19 lld-19): skipped"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
fail() { cat "$1"; echo "FAIL: $2"; exit 1; }
"$tlp" compile "$in" -o "$out/hip.tlb" --target hip -q
"$tlp" inspect "$out/hip.tlb" >"$out/hip.txt"
for v in hip.gfx90a hip.gfx942 hip.gfx1100; do grep -q "$v " "$out/hip.txt" || fail "$out/hip.txt" "missing $v"; done
grep -q "cpu\." "$out/hip.txt" && fail "$out/hip.txt" "unexpected CPU variant in --target hip"
[ "$(grep -c 'hsaco: cov5 wave64, kernarg 16 B (explicit 16 B), LDS 0 B, scratch 0 B' "$out/hip.txt")" = 2 ] ||
  fail "$out/hip.txt" "expected two wave64 hsaco lines"
grep -q 'hsaco: cov5 wave32, kernarg 16 B' "$out/hip.txt" || fail "$out/hip.txt" "expected a wave32 hsaco line"
"$tlp" inspect --json "$out/hip.tlb" | grep -q '"hsaco":{"agpr_count":"0","code_object_version":"5"' ||
  { "$tlp" inspect --json "$out/hip.tlb"; echo "FAIL: no hsaco facts in --json"; exit 1; }
"$tlp" verify "$out/hip.tlb" >/dev/null
"$tlp" extract "$out/hip.tlb" --kernel softmax --variant hip.gfx942 -o "$out/gfx942.hsaco"
readelf=$(command -v llvm-readelf-19 || echo /usr/lib/llvm-19/bin/llvm-readelf)
"$readelf" -h "$out/gfx942.hsaco" | grep -q "0x54C, gfx942, xnack, sramecc" || { "$readelf" -h "$out/gfx942.hsaco"; exit 1; }
"$readelf" --notes "$out/gfx942.hsaco" | grep -q "\.wavefront_size: *64"
# A pinned target ID and code object v4.
"$tlp" compile "$in" -o "$out/pinned.tlb" --target gfx942:xnack-,hip-cov4 -q
"$tlp" inspect "$out/pinned.tlb" >"$out/pinned.txt"
grep -q "hip.gfx942.xnack- .* gfx942:xnack- " "$out/pinned.txt" || fail "$out/pinned.txt" "missing the pinned variant"
grep -q "hsaco: cov4 wave64" "$out/pinned.txt" || fail "$out/pinned.txt" "not code object v4"
# Mixed with the CPU.
"$tlp" compile "$in" -o "$out/both.tlb" --target cpu,hip -q
"$tlp" inspect "$out/both.tlb" >"$out/both.txt"
for v in cpu.x86-64-v2 cpu.x86-64-v3 cpu.x86-64-v4 hip.gfx90a hip.gfx942 hip.gfx1100; do
  grep -q "$v " "$out/both.txt" || fail "$out/both.txt" "missing $v"
done
"$tlp" verify "$out/both.tlb" >/dev/null
# A bad target ID is a usage error (exit 1) naming the item.
set +e
"$tlp" compile "$in" -o "$out/bad.tlb" --target gfx90a:xnack 2>"$out/bad.txt"
rc=$?
set -e
[ "$rc" = 1 ] || fail "$out/bad.txt" "bad target ID: exit $rc, expected 1"
grep -q "bad AMDGPU target ID 'gfx90a:xnack'" "$out/bad.txt" || fail "$out/bad.txt" "message"
# Deterministic: the same input gives the same bytes.
"$tlp" compile "$in" -o "$out/hip2.tlb" --target hip -q
cmp "$out/hip.tlb" "$out/hip2.tlb"
echo "tl-pack compile --target hip, gfx942:xnack-,hip-cov4, cpu,hip: ok"
