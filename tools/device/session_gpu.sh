#!/usr/bin/env bash
# Everything GPU-side in ONE device call: the validation of every CUDA / Vulkan path and issue #11's
# benchmark table, built here, run there. (The pieces are the scripts beside this one; this one only
# builds them in the right order and runs them in one call under one time budget, so a session that gets
# a device for a few minutes verifies all of it at once.)
#
# Step 1, here (Debian 12 build machine with nvcc/NVRTC in /usr/local/cuda, no GPU):
#     tools/device/session_gpu.sh build
#   = gpu_check.sh build (runtime / lowering tests, conformance kernels, tl-pack and the Python binding
#   staged in .gpu/), std_kernels_gpu.sh build (the standard library for host + sm_90a),
#   c_cases_gpu.sh build (the conformance cases exported for the C runner), and the Vulkan loader
#   packages in .gl/ (downloaded with apt-get once; NVIDIA's Vulkan driver needs the loader, the device
#   image has none). The benchmark kernels are compiled on the device (16 jobs), not here. TL_GPU_BUILD_DIR
#   picks the build directory (default build-cuda). Prints the size of .gpu and .gl (carry limit 64 MiB).
#
# Step 2, THE DEVICE CALL:
#     run(command="bash tools/device/session_gpu.sh run", carry=[".gpu", ".gl"], kind="nvidia-h200", timeout_s=600)
#   1. validation, four parts in parallel (each its own GPU work, none timed): gpu_check.sh run-core
#      (CUDA runtime tests, generated kernels, conformance on CUDA and on NVIDIA's Vulkan driver, Vulkan
#      runtime tests), std_kernels_gpu.sh run (the standard library vs numpy on cuda.sm_90a),
#      gpu_check.sh run-python under CUDA_FORCE_PTX_JIT=1 (conformance from the PTX), c_cases_gpu.sh run
#      (the cases from C, cubins and PTX JIT); then gpu_check.sh run-compat (upstream's examples, 200 s cap);
#   2. the benchmark table (hopper_bench.sh run, alone on the GPU: timings never overlap the validation)
#      with the time left (--budget-s: 570 s minus what step 1 took, at least 120); arguments after `run`
#      go to hopper_bench.py (e.g. `--only attention --fa-configs "..."` for a probe).
#   Logs under $OUT: val/<part>.log, hopper_bench.{log,json,md}; the summary lines of each part and the
#   table are printed last. Exit status: 1 when any validation part failed (the bench runs regardless).
#
# Measured 2026-12-04 (session 10, as separate calls): validation 260 s, full bench 198 s.
set -u -o pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$repo/tools/device

build() {
  set -e
  bash "$here/gpu_check.sh" build
  bash "$here/std_kernels_gpu.sh" build
  bash "$here/c_cases_gpu.sh" build
  if ! ls "$repo/.gl/"*.deb >/dev/null 2>&1; then
    mkdir -p "$repo/.gl"
    (cd "$repo/.gl" && apt-get download -o APT::Architecture=amd64 libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 \
      libglx0 libgles2)
  fi
  local exclude
  exclude=$(cd "$repo" && realpath -m "$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)")
  grep -qxF '/.gl/' "$exclude" 2>/dev/null || echo '/.gl/' >>"$exclude"
  du -sh "$repo/.gpu" "$repo/.gl"
}

run() {
  local out=${OUT:-/tmp/session-gpu} t0=$SECONDS status=0 part
  mkdir -p "$out/val"
  (OUT=$out/val/core bash "$here/gpu_check.sh" run-core >"$out/val/core.log" 2>&1; echo "core: exit $?" >>"$out/val/core.log") &
  (OUT=$out/val/std bash "$here/std_kernels_gpu.sh" run >"$out/val/std.log" 2>&1; echo "std: exit $?" >>"$out/val/std.log") &
  (OUT=$out/val/ptx CUDA_FORCE_PTX_JIT=1 bash "$here/gpu_check.sh" run-python >"$out/val/ptx.log" 2>&1
   echo "ptx-jit python: exit $?" >>"$out/val/ptx.log") &
  (OUT=$out/val/cc bash "$here/c_cases_gpu.sh" run >"$out/val/cc.log" 2>&1; echo "c cases: exit $?" >>"$out/val/cc.log") &
  wait
  OUT=$out/val/compat timeout 200 bash "$here/gpu_check.sh" run-compat >"$out/val/compat.log" 2>&1
  echo "compat: exit $?" >>"$out/val/compat.log"
  for part in core std ptx cc compat; do
    echo "##### $part"
    grep -E "exit [0-9]+$|passed|failed|skipped|^(ok|FAIL|PASS)|summary" "$out/val/$part.log" | tail -20
    tail -1 "$out/val/$part.log" | grep -q "exit 0$" || status=1
  done
  local left=$((570 - (SECONDS - t0)))
  [ "$left" -ge 120 ] || left=120
  echo "##### bench (validation took $((SECONDS - t0)) s; --budget-s $left)"
  OUT=$out TL_DEVICE_PRECOMPILE=16 bash "$here/hopper_bench.sh" run --budget-s "$left" "$@" >"$out/bench_stdout.log" 2>&1
  echo "hopper_bench: exit $?"
  sed -n '/=== hopper benchmark table ===/,$p' "$out/bench_stdout.log"
  return $status
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  *)
    echo "usage: $0 build                 (here: build and stage .gpu/ and .gl/)" >&2
    echo "       $0 run [bench args...]   (on the device, carry [\".gpu\", \".gl\"]: validation, then the bench)" >&2
    exit 2 ;;
esac
