#!/usr/bin/env bash
# Issue #11's benchmarks (tools/bench/hopper_bench.py) on the H200 in ONE device call: built here, run there.
#
# Step 1, here (the build machine: nvcc/NVRTC in /usr/local/cuda, no GPU, no torch):
#     tools/device/hopper_bench.sh build
#   Reuses what `tools/device/gpu_check.sh build` staged in .gpu/ (bin/tl-pack, lib/, lib-fallback/,
#   python/tilelang_runtime) when it is there; otherwise (or with TL_HOPPER_RESTAGE=1) builds tl-pack
#   and the Python binding in $TL_GPU_BUILD_DIR (default build-cuda) and stages them in the same
#   layout. Then compiles every benchmark kernel (every tile config of every row) for sm_90a + PTX
#   into .gpu/tilelang-cache with that tl-pack (`hopper_bench.py --precompile`; the cache is keyed
#   by the tl-pack binary, so the device must run the same one: run this AFTER any
#   `gpu_check.sh build`, which empties .gpu/). Prints the size of .gpu (the carry limit is 64 MiB).
#   Exit status 1 when a kernel failed to compile (each is listed; the device run skips it).
#
# Step 2, the device call:
#     run(command="bash tools/device/hopper_bench.sh run", carry=[".gpu"], kind="nvidia-h200", timeout_s=600)
#   runs hopper_bench.py with a python3 that has torch (Triton when importable; its rows say n/a
#   otherwise) under a 540 s cap: copy bandwidth, GEMM bf16/fp16 x 5 shapes vs cuBLAS and Triton,
#   FlashAttention fwd bf16 x 8 vs SDPA cuDNN and flash, W4A16 x 3 vs fp16 cuBLAS on the dequantized
#   weights, RMSNorm and softmax vs torch. Writes $OUT/hopper_bench.{log,json,md}; the markdown table
#   is printed last. A kernel missing from the cache is compiled there when the machine has NVRTC
#   (its line then shows a load time of seconds, not milliseconds: "load_s" in the JSON).
#   Exit status: that of the script (0 unless it crashed; rows whose configs all failed are listed).
#   Arguments after `run` go to hopper_bench.py, e.g. `bash tools/device/hopper_bench.sh run --only w4a16`
#   (one group: copy bandwidth + the W4A16 rows, a fraction of the full run's device time). The W4A16 decode
#   rows also get their read floor (W and S only read, by read_floor.read_sum and torch; a second table after
#   the main one); `--w4-ms 1,16 --w4-kinds ldg,m16r` keeps just the decode rows' best kernels beside it.
#   TL_DEVICE_PRECOMPILE=16 bash tools/device/hopper_bench.sh run: compile the kernels on the device first
#   (hopper_bench.py --precompile --jobs 16 with the same arguments), so `build` here may skip its
#   precompile (the session-7 runs did exactly these two steps).
#
# ncu profiles (issue #11 asks what limits a missed target), after build, in a device call:
#     run(command="bash tools/device/hopper_bench.sh profile", carry=[".gpu"], timeout_s=600)
#   ncu on one launch each of the GEMM bf16 4096^3 and 8192x8192x1024 (128x128x64, 256 threads, 3
#   stages), FlashAttention bf16 D=128 (64x64, 128 threads, 2 stages), W4A16 M=1 w4a16_gemv (1x16x128,
#   4 stages, 64 threads), M=16 quant_matmul (16x32x512, 3 stages, staged scales) and M=16 w4a16_mma
#   (16x32x128, 4 stages), and the CUDA-only decode kernels (w4a16_gemv_h2 1x16x512 at M=1, w4a16_mma
#   h2 dequant with two groups per k-step 16x32x128 at M=16) through
#   tools/bench/profile_kernel.py; $OUT/ncu_*.txt, the key lines printed.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
stage=${TL_GPU_STAGE:-$repo/.gpu}

bench_env() {
  export PYTHONPATH=$stage/python:$repo/compiler/python
  export TL_PACK=$stage/bin/tl-pack TL_CACHE_DIR=$stage/tilelang-cache TL_CUDA_TARGET=sm_90a
  export PYTHONDONTWRITEBYTECODE=1
}

build() {
  set -e
  local bdir=${TL_GPU_BUILD_DIR:-$repo/build-cuda}
  # git's exclude file (a linked worktree's .git is a file: ask git where it is).
  local exclude
  exclude=$(cd "$repo" && realpath -m "$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)")
  mkdir -p "$(dirname "$exclude")"
  grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
  if [ "${TL_HOPPER_RESTAGE:-0}" = 1 ] || [ ! -x "$stage/bin/tl-pack" ] || [ ! -d "$stage/python/tilelang_runtime" ] \
     || [ ! -f "$stage/lib/libtilelang_runtime.so" ]; then
    echo "=== staging tl-pack, the runtime and the Python binding from $bdir ==="
    if [ ! -f "$bdir/CMakeCache.txt" ]; then
      cmake -S "$repo" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
    fi
    ninja -C "$bdir" -j2 tl-pack tilelang_python tl_python_runtime
    mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback" "$stage/python"
    cp "$bdir/bin/tl-pack" "$stage/bin/"
    rm -rf "$stage/python/tilelang_runtime"
    cp -r "$bdir/python/tilelang_runtime" "$stage/python/"
    rm -rf "$stage/python/tilelang_runtime/__pycache__"
    cp "$bdir/lib/libtilelang_runtime.so" "$stage/lib/"
    strip --strip-debug "$stage/bin/tl-pack" "$stage/lib/libtilelang_runtime.so" \
      "$stage/python/tilelang_runtime/"*.so 2>/dev/null || true
    local lib
    for lib in libtbb.so.12 libzstd.so.1; do
      cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$stage/lib/$lib"
    done
    for lib in libstdc++.so.6 libgcc_s.so.1; do
      cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$stage/lib-fallback/$lib"
    done
  else
    echo "=== reusing .gpu/bin/tl-pack and .gpu/python (staged $(date -u -r "$stage/bin/tl-pack" '+%F %H:%M UTC')) ==="
  fi
  echo "=== compiling the benchmark kernels for CUDA (sm_90a + PTX) into .gpu/tilelang-cache ==="
  set +e
  (cd "$repo" && bench_env && /usr/bin/python3 tools/bench/hopper_bench.py --precompile --jobs "${TL_JOBS:-2}" 2>&1 \
    | grep -E '^(FAILED|precompile:)')
  local rc=$?
  local kib
  kib=$(du -sk "$stage" | cut -f1)
  echo ".gpu: $((kib / 1024)) MiB (the carry limit is 64 MiB)"
  if [ "$kib" -gt $((62 * 1024)) ]; then
    echo "WARNING: .gpu is too large to carry; remove what the call does not need (e.g. .gpu/upstream)" >&2
  fi
  if [ "$rc" -ne 0 ]; then
    echo "precompile: some kernels failed to compile (listed above); the device run reports them and goes on" >&2
  fi
  echo "staged; the device call: run(command=\"bash tools/device/hopper_bench.sh run\", carry=[\".gpu\"], timeout_s=600)"
  return "$rc"
}

# The device side's environment: $out, $py (a python3 with torch), LD_LIBRARY_PATH; 1 without torch.
device_env() {
  out=${OUT:-/tmp/hopper-bench-out} py=
  local d
  mkdir -p "$out"
  export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  # NVRTC for kernels missing from the cache (none when build ran with the staged tl-pack).
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    if [ -e "$d/libnvrtc.so.13" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break; fi
  done
  for d in python3 /usr/bin/python3 /usr/local/bin/python3; do
    if "$d" -c 'import torch, numpy' 2>/dev/null; then py=$(command -v "$d"); break; fi
  done
  if [ -z "$py" ]; then
    echo "no python3 with torch and numpy on this machine"; return 1
  fi
  if ! (bench_env && "$py" -c 'import tilelang_runtime as t; t.Runtime(backends=["cpu"])') 2>"$out/ldd_probe.txt"; then
    echo "the binding does not load with the device's libraries ($(head -c 300 "$out/ldd_probe.txt")); adding lib-fallback"
    export LD_LIBRARY_PATH=$stage/lib:$stage/lib-fallback:$LD_LIBRARY_PATH
  fi
}

# `precompile [args]`: only the on-device compile of every config (CPU work, no GPU: session_gpu.sh runs it
# beside the validation), TL_DEVICE_PRECOMPILE (default 16) jobs at a time.
precompile() {
  local out py
  device_env || return 1
  (cd "$repo" && bench_env && timeout 300 "$py" tools/bench/hopper_bench.py --precompile --jobs "${TL_DEVICE_PRECOMPILE:-16}" \
    "$@" 2>&1 | grep -E "^(FAILED|precompile:)")
}

run() {
  local out py
  device_env || return 1
  if [ -n "${TL_DEVICE_PRECOMPILE:-}" ]; then
    # Compile every config here, TL_DEVICE_PRECOMPILE jobs at a time (the device's 16 cores: ~15 s for all,
    # where `build` on a 2-core machine takes ~25 min); `build` then only needs to stage tl-pack and python.
    echo "=== compiling the benchmark kernels on this machine (--jobs $TL_DEVICE_PRECOMPILE) ==="
    (cd "$repo" && bench_env && timeout 300 "$py" tools/bench/hopper_bench.py --precompile --jobs "$TL_DEVICE_PRECOMPILE" \
      "$@" 2>&1 | grep -E "^(FAILED|precompile:)")
  fi
  echo "=== hopper benchmarks (tools/bench/hopper_bench.py, $py) ==="
  # TL_BENCH_TIMEOUT: the bench's wall-clock cap (session_gpu.sh sets it from the call's time left)
  (cd "$repo" && bench_env && PYTHONUNBUFFERED=1 timeout "${TL_BENCH_TIMEOUT:-540}" "$py" tools/bench/hopper_bench.py \
    --json "$out/hopper_bench.json" "$@") 2>&1 | tee "$out/hopper_bench.log"
  local rc=${PIPESTATUS[0]}
  sed -n '/^=== hopper benchmark table ===/,$p' "$out/hopper_bench.log" >"$out/hopper_bench.md"
  echo "hopper_bench: exit $rc; table in \$OUT/hopper_bench.md, every measurement in \$OUT/hopper_bench.json"
  return "$rc"
}

# ncu (Nsight Compute) on one launch of the best GEMM and FlashAttention configs of the last run
# (tools/bench/profile_kernel.py; the kernels are in the precompiled cache): speed of light, warp
# state (stall reasons), occupancy, launch stats. $OUT/ncu_<name>.txt; skipped with a note when the
# machine has no ncu.
profile() {
  local out py ncu=
  device_env || return 1
  if ! find_ncu; then
    echo "profile: no ncu on this machine (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"; return 0
  fi
  echo "=== ncu: $ncu ==="
  local name
  while read -r name args; do
    [ -n "$name" ] || continue
    echo "=== ncu $name: profile_kernel.py $args ==="
    (cd "$repo" && bench_env && timeout 150 "$ncu" --target-processes all -k regex:main --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      "$py" tools/bench/profile_kernel.py $args) >"$out/ncu_$name.txt" 2>&1
    echo "rc=$?" >>"$out/ncu_$name.txt"
    grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|Issued Warp|rc=|ERR|Error" \
      "$out/ncu_$name.txt" | head -40
  done <<'LIST'
gemm_bf16_4096 gemm 4096 4096 4096 bfloat16 128 256 64 256 3
gemm_bf16_k1024_persistent gemm 8192 8192 1024 bfloat16 128 256 64 256 3 0 1 persistent
fa_bf16_d128 attention 4 32 4096 128 0 64 64 128 2
fa_overlap_d128 attention 4 32 4096 128 0 128 64 256 2 overlap
fa_pingpong_d128 attention 4 32 4096 128 0 128 128 256 2 pingpong
w4a16_gemv_m1 w4a16 1 8192 8192 1 32 128 6 128 gemv
w4a16_mma_m1 w4a16 1 8192 8192 16 64 128 4 128 mma
w4a16_h2_m1 w4a16 1 8192 8192 1 16 512 6 128 h2
w4a16_mmah2g2_m16 w4a16 16 8192 8192 16 32 128 4 128 mma_h2g2
w4a16_m1mma_m1 w4a16 1 8192 8192 1 32 8 3 512 m1
w4a16_m16r_m16 w4a16 16 8192 8192 16 256 128 3 256 m16r 8 1
w4a16_wgmmasp_m128 w4a16 128 8192 8192 128 128 128 4 256 wgmma_sp 2
LIST
}

# ncu on the device: the first of PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute (sets $ncu; "" if none).
find_ncu() {
  ncu=
  local d
  for d in "$(command -v ncu 2>/dev/null)" /usr/local/cuda/bin/ncu /usr/local/cuda-13*/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    if [ -n "$d" ] && [ -x "$d" ]; then ncu=$d; return 0; fi
  done
  return 1
}

# ncu_spec NAME REGEX SPEC: one bench config, SPEC = '[label, cfg]' as hopper_bench.py --canary-one takes it (the
# bench's own program, pass_configs and inputs; the config must be in that row's list), under ncu on the second
# launch of the kernel REGEX matches; $out/ncu_NAME.txt and its key lines printed. TL_NCU_SASS=1: also the
# SourceCounters section (stall sampling) kept as $out/ncu_NAME.ncu-rep and exported per SASS instruction
# (`ncu -i ... --page source --csv --print-source sass`, gzipped: $out/ncu_NAME.sass.csv.gz; where that ncu
# has no --print-source, the page's default view): WHICH instruction the warps stall at, which the default
# sections do not say. TL_NCU_EXTRA: more ncu arguments, word-split.
ncu_spec() {
  local name=$1 regex=$2 spec=$3 rep=()
  [ "${TL_NCU_SASS:-0}" = 1 ] && rep=(--section SourceCounters --import-source yes -o "$out/ncu_$name" -f)
  echo "=== ncu $name: $spec ==="
  # shellcheck disable=SC2086
  (cd "$repo" && bench_env && timeout 150 "$ncu" --target-processes all -k "regex:$regex" --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats "${rep[@]}" ${TL_NCU_EXTRA:-} \
    "$py" tools/bench/hopper_bench.py --canary-one "$spec" --canary-reps 2) >"$out/ncu_$name.txt" 2>&1
  echo "rc=$?" >>"$out/ncu_$name.txt"
  if [ ${#rep[@]} -gt 0 ] && [ -e "$out/ncu_$name.ncu-rep" ]; then
    "$ncu" -i "$out/ncu_$name.ncu-rep" --page details >>"$out/ncu_$name.txt" 2>&1
    { "$ncu" -i "$out/ncu_$name.ncu-rep" --page source --csv --print-source sass 2>/dev/null ||
      "$ncu" -i "$out/ncu_$name.ncu-rep" --page source --csv; } 2>&1 | gzip >"$out/ncu_$name.sass.csv.gz"
    echo "per-instruction export: $out/ncu_$name.sass.csv.gz ($(zcat "$out/ncu_$name.sass.csv.gz" | wc -l) lines)"
  fi
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|L2 Hit Rate|Registers Per|Achieved Occupancy|Stall|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|rc=|ERR|Error" \
    "$out/ncu_$name.txt" | head -30
}

# `profile-best [JSON [N]]`: ncu on our best config of each GEMM / attention row of a bench JSON (default: this
# $OUT's hopper_bench.json) that missed its peer, slowest first, at most N (default 4): hopper_bench.py
# --profile-list picks them, each through ncu_spec (the second launch of `main_kernel`; of `main_k0`, the split
# kernel, for a split-K config). The issue asks, for every missed target, what the profile shows is the
# limiter. $OUT/ncu_<row>.txt.
profile_best() {
  local out py ncu json=${1:-} n=${2:-4}
  device_env || return 1
  json=${json:-$out/hopper_bench.json}
  if ! find_ncu; then
    echo "profile-best: no ncu on this machine (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"; return 0
  fi
  local name regex spec
  (cd "$repo" && bench_env && "$py" tools/bench/hopper_bench.py --profile-list "$json" --profile-max "$n") |
    while read -r name regex spec; do
      [ -n "$name" ] || continue
      ncu_spec "$name" "$regex" "$spec"
    done
}

# `profile-one SPEC [NAME]`: ncu on any one config of a row, e.g.
#   TL_NCU_SASS=1 bash tools/device/hopper_bench.sh profile-one \
#     '["GEMM bfloat16 8192x8192x1024", [128, 256, 64, 256, 3, 8, 1, "persistent", "tma_store"]]' k1024
# (the config must be in that row's list; the kernel profiled is hopper_bench.py --profile-regex's: a split-K GEMM
# config's main_k0, any other main_kernel).
profile_one() {
  local out py ncu spec=${1:-} name=${2:-one} regex
  if [ -z "$spec" ]; then echo "profile-one: expected SPEC ('[label, cfg]') [NAME]" >&2; return 2; fi
  device_env || return 1
  if ! find_ncu; then
    echo "profile-one: no ncu on this machine (PATH, /usr/local/cuda*/bin, /opt/nvidia/nsight-compute)"; return 0
  fi
  regex=$(cd "$repo" && bench_env && "$py" tools/bench/hopper_bench.py --profile-regex "$spec") || return 1
  ncu_spec "$name" "$regex" "$spec"
}

case "${1:-}" in
  build) build ;;
  profile) profile ;;
  profile-best) shift; profile_best "$@" ;;
  profile-one) shift; profile_one "$@" ;;
  run) shift; run "$@" ;;
  precompile) shift; precompile "$@" ;;
  *)
    echo "usage: $0 build   (here: stage .gpu/ and precompile the benchmark kernels)" >&2
    echo "       $0 run [hopper_bench.py args, e.g. --only w4a16]   (on the device machine, with .gpu carried)" >&2
    echo "       $0 profile (on the device machine: ncu on the best GEMM / FlashAttention configs)" >&2
    echo "       $0 profile-best [JSON [N]] (on the device machine: ncu on the best config of each missed row)" >&2
    echo "       $0 profile-one SPEC [NAME] (on the device machine: ncu on one '[label, cfg]'; TL_NCU_SASS=1: per SASS line)" >&2
    echo "       $0 precompile [args]   (on the device machine: only compile the configs into the cache)" >&2
    exit 2
    ;;
esac
