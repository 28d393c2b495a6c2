#!/bin/sh
# compiler.gpu.tl_pack_*: `tl-pack compile --target cuda|sm_90a|cpu,cuda` end to end.
# Usage: tl_pack_cuda.sh TL_PACK INPUT.tir OUTDIR. Exit 77 (ctest skip) without
# a CUDA compiler (NVRTC or nvcc in /usr/local/cuda*).
set -eu
tlp=$1 in=$2 out=$3
. "$(dirname "$0")/cuda_toolkit.sh"
mkdir -p "$out"
"$tlp" compile "$in" -o "$out/cuda.tlb" --target cuda -q
"$tlp" inspect "$out/cuda.tlb" >"$out/cuda.txt"
for v in cuda.sm_80 cuda.sm_89 cuda.sm_90a cuda.compute_80; do grep -q "$v " "$out/cuda.txt" || { cat "$out/cuda.txt"; echo "missing $v"; exit 1; }; done
if grep -q "cpu\." "$out/cuda.txt"; then echo "unexpected CPU variant in --target cuda"; exit 1; fi
"$tlp" compile "$in" -o "$out/one.tlb" --target sm_90a -q
"$tlp" inspect "$out/one.tlb" >"$out/one.txt"
grep -q "cuda.sm_90a " "$out/one.txt" && grep -q "cuda.compute_80 " "$out/one.txt" && ! grep -q "cuda.sm_80 " "$out/one.txt"
"$tlp" compile "$in" -o "$out/both.tlb" --target cpu,cuda -q
"$tlp" inspect "$out/both.tlb" >"$out/both.txt"
for v in cpu.x86-64-v2 cpu.x86-64-v3 cpu.x86-64-v4 cuda.sm_80 cuda.sm_89 cuda.sm_90a cuda.compute_80; do
  grep -q "$v " "$out/both.txt" || { cat "$out/both.txt"; echo "missing $v"; exit 1; }
done
"$tlp" verify "$out/both.tlb" >/dev/null
# Deterministic: the same input gives the same bytes.
"$tlp" compile "$in" -o "$out/cuda2.tlb" --target cuda -q
cmp "$out/cuda.tlb" "$out/cuda2.tlb"
echo "tl-pack compile --target cuda, sm_90a, cpu,cuda: ok"
