#!/bin/sh
# compiler.gpu.tl_pack_tma: `tl-pack compile --target sm_90a` of a GEMM whose
# pipelined copies become TMA: inspect names the must_understand token and
# each tensor map with its parameter slot (table and --json); verify accepts
# the bundle. Usage: tl_pack_tma.sh TL_PACK INPUT.tir OUTDIR. Exit 77 (ctest
# skip) without a CUDA compiler.
set -eu
tlp=$1 in=$2 out=$3
. "$(dirname "$0")/cuda_toolkit.sh"
mkdir -p "$out"
"$tlp" compile "$in" -o "$out/tma.tlb" --target sm_90a -q
"$tlp" inspect "$out/tma.tlb" >"$out/tma.txt"
"$tlp" inspect --json "$out/tma.tlb" >"$out/tma.json"
fail() { cat "$out/tma.txt"; echo "$1"; exit 1; }
grep -q "^requires   core.v1, launch.tensor_maps$" "$out/tma.txt" || fail "no launch.tensor_maps token"
# A's 64x32 f16 tile: a box as wide as its padded row (an mma.sync operand) or
# 64B-swizzled (a wgmma operand); B's 32x64: padded, or two 128B-swizzled panels.
grep -Eq "^      tensor map 0: A box 64x(40 swizzle none|32 swizzle 64B), param slot @48 \(128 B\)$" "$out/tma.txt" ||
  fail "no tensor map 0"
grep -Eq "^      tensor map 1: B box 32x(72 swizzle none|64 swizzle 128B), param slot @176 \(128 B\)$" "$out/tma.txt" ||
  fail "no tensor map 1"
[ "$(grep -c "tensor map" "$out/tma.txt")" = 2 ] || fail "tensor maps outside the sm_90a variant"
grep -Eq '"tensor_maps":\[\{"param":0,"box":\[64,(40|32)\],"swizzle":(0|2),"l2_promotion":0,"slot_offset":48\},\{"param":1,"box":\[32,(72|64)\],"swizzle":(0|3),"l2_promotion":0,"slot_offset":176\}\]' \
  "$out/tma.json" || { cat "$out/tma.json"; echo "no tensor_maps in --json"; exit 1; }
"$tlp" verify "$out/tma.tlb" >/dev/null
echo "tl-pack compile --target sm_90a with TMA: ok"
