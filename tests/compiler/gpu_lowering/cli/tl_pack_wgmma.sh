#!/bin/sh
# compiler.gpu.tl_pack_wgmma: `tl-pack compile --target cuda` of a 128x128x64 f16 GEMM over 256 threads:
# the sm_90a cubin is the wgmma lowering (inspect's `gemm:` line, from the variant's build attributes),
# sm_80/sm_89/compute_80 keep mma.sync. Usage: tl_pack_wgmma.sh TL_PACK INPUT.tir OUTDIR.
# Exit 77 (ctest skip) without a CUDA compiler (NVRTC or nvcc in /usr/local/cuda*).
set -eu
tlp=$1 in=$2 out=$3
. "$(dirname "$0")/cuda_toolkit.sh"
mkdir -p "$out"
"$tlp" compile "$in" -o "$out/wgmma.tlb" --target cuda -q
"$tlp" inspect "$out/wgmma.tlb" >"$out/wgmma.txt"
# The line after each variant's row.
gemm_of() { awk -v v="$1" '$1 == v { getline; while ($1 != "gemm:" && $1 !~ /^cuda\./ && NF) getline; print; exit }' "$out/wgmma.txt"; }
check() {
  line=$(gemm_of "$1")
  case "$line" in
    *"gemm: $2 (C_f: $3"*) ;;
    *) cat "$out/wgmma.txt"; echo "$1: expected 'gemm: $2 (C_f: $3 ...', got '$line'"; exit 1 ;;
  esac
}
check cuda.sm_90a wgmma wgmma
check cuda.sm_80 mma.sync mma.sync
check cuda.sm_89 mma.sync mma.sync
check cuda.compute_80 mma.sync mma.sync
"$tlp" inspect --json "$out/wgmma.tlb" | grep -q '"gemm":"wgmma (C_f: wgmma f16)"' || { echo "no gemm in --json"; exit 1; }
# TL_CUDA_WGMMA=0 (a build-time switch for bisecting on a device): sm_90a keeps mma.sync too.
TL_CUDA_WGMMA=0 "$tlp" compile "$in" -o "$out/nowgmma.tlb" --target sm_90a -q
"$tlp" inspect "$out/nowgmma.tlb" | grep -q "gemm: mma.sync (C_f: mma.sync f16)" || { echo "TL_CUDA_WGMMA=0 ignored"; exit 1; }
# The pipelined gemm keeps one wgmma group in flight (wait_group 1 per k-step, 0 after the loop);
# TL_CUDA_WGMMA_OVERLAP=0 (bisecting) waits for every group.
"$tlp" compile "$in" -o "$out/overlap.tlb" --target sm_90a --emit-source "$out/src" -q
grep -q "wgmma.wait_group.sync.aligned 1;" "$out/src/gemm_wgmma.sm_90a.cu" || { echo "no wgmma group in flight"; exit 1; }
TL_CUDA_WGMMA_OVERLAP=0 "$tlp" compile "$in" -o "$out/nooverlap.tlb" --target sm_90a --emit-source "$out/src0" -q
if grep -q "wgmma.wait_group.sync.aligned 1;" "$out/src0/gemm_wgmma.sm_90a.cu"; then echo "TL_CUDA_WGMMA_OVERLAP=0 ignored"; exit 1; fi
grep -q "wgmma.wait_group.sync.aligned 0;" "$out/src0/gemm_wgmma.sm_90a.cu" || { echo "TL_CUDA_WGMMA_OVERLAP=0: no wgmma"; exit 1; }
# The pipelined TMA gemm is warp-specialized (a producer warpgroup: 256 + 128 threads in the bundle's
# launch block, setmaxnreg in the source); TL_CUDA_WS=0 (bisecting) keeps the 256 threads.
grep -q "setmaxnreg.inc.sync.aligned.u32" "$out/src/gemm_wgmma.sm_90a.cu" || { echo "no warp specialization"; exit 1; }
"$tlp" inspect "$out/overlap.tlb" | grep -q "cuda.sm_90a .* 384x1x1" || { "$tlp" inspect "$out/overlap.tlb"; echo "sm_90a block is not 384x1x1"; exit 1; }
TL_CUDA_WS=0 "$tlp" compile "$in" -o "$out/nows.tlb" --target sm_90a --emit-source "$out/src_nows" -q
if grep -q "setmaxnreg" "$out/src_nows/gemm_wgmma.sm_90a.cu"; then echo "TL_CUDA_WS=0 ignored"; exit 1; fi
"$tlp" inspect "$out/nows.tlb" | grep -q "cuda.sm_90a .* 256x1x1" || { echo "TL_CUDA_WS=0: sm_90a block is not 256x1x1"; exit 1; }
echo "tl-pack compile --target cuda: sm_90a wgmma, the rest mma.sync; TL_CUDA_WGMMA=0; a wgmma group in flight, TL_CUDA_WGMMA_OVERLAP=0; warp-specialized, TL_CUDA_WS=0: ok"
