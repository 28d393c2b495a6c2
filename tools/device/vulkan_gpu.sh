#!/usr/bin/env bash
# Vulkan on the H200 (NVIDIA's Vulkan driver) in ONE device call (issue #5): build here, run there.
#
# Step 1, here (Debian 12 build machine; no GPU needed):
#     tools/device/vulkan_gpu.sh build
#   builds the Vulkan GoogleTests, tl-pack and the Python binding in $TL_VK_BUILD_DIR (default
#   build-vkcoop; RelWithDebInfo, -j2; never build/), stages them into .gpu-vk/ (ignored through
#   .git/info/exclude; separate from gpu_check.sh's .gpu/):
#     .gpu-vk/bin/             tl_runtime_vulkan_tests, tl-pack (debug info stripped)
#     .gpu-vk/lib/             libtilelang_runtime.so (the GoogleTests link it) and its dependencies
#                              libtbb.so.12, libzstd.so.1
#     .gpu-vk/lib-fallback/    libstdc++.so.6, libgcc_s.so.1 (used only when the device's own are
#                              too old for the binaries)
#     .gpu-vk/python/          tilelang_runtime (with libtilelang_runtime.so)
#     .gpu-vk/tests/runtime_vulkan/data/vulkan.tlb   the Python binding's Vulkan test bundle
#     .gpu-vk/tilelang-cache/  every conformance case and the benchmark's GEMMs compiled for
#                              Vulkan here (the staged tl-pack could compile SPIR-V there too: it
#                              needs no toolchain; this only saves device time)
#   and prints the size (the tree that travels must stay under 64 MiB).
#
# Step 2, the device call (the device tool's `run`):
#     command:   bash tools/device/vulkan_gpu.sh run
#     carry:     [".gpu-vk", ".gl"]          (.gl/: the Vulkan loader .debs, unpacked there when the
#                                             machine has no libvulkan.so.1)
#     kind:      nvidia-h200        timeout_s: 600
#   Runs, with VK_DRIVER_FILES pointed at NVIDIA's ICD JSON when unset:
#     1. the vulkan.* GoogleTests (tl_runtime_vulkan_tests; nothing may skip)   -> $OUT/vulkan.{log,xml}
#     2. tests/python/test_runtime_vulkan.py                                     -> $OUT/vulkan_python.log
#     3. tests/conformance -k vulkan with TL_DEVICE=vulkan:0                     -> $OUT/conformance_vulkan.{log,xml}
#     4. tools/bench/vulkan_gemm_bench.py: fp16 GEMM 4096^3 through Vulkan (each tile config with the
#        variant the runtime selects, and the plain SIMT variant forced) vs torch.matmul (cuBLAS) in
#        the same process                                                        -> $OUT/vulkan_bench.{log,json}
#   then a summary (one line per step, the benchmark table). Exit status 0 when every step passed
#   (skips count as failures: on the H200 everything must run).
#   Expected on the H200 (NVIDIA 580.x, VK_KHR_cooperative_matrix): vulkan.gtest passed=24 skipped=0
#   failed=0 (Vulkan.PipelineCachePersistsAcrossRuntimes and Vulkan.SeveralRuntimesInOneProcess
#   included); vulkan.python 8 passed; conformance.vulkan 85 passed, none skipped (the torch DLPack
#   case, and test_conformance_coopmat.py: the real cooperative-matrix variant chosen and checked
#   against float64); the table: per tile config a row "vulkan.spirv1.3.coopmat" and a row
#   "vulkan.spirv1.3" (plain, forced), "vs cuBLAS" ratios, and torch.matmul's TFLOP/s.
#   `run-tests` (1-3) and `run-bench` (4) run parts alone. Tested here on lavapipe (no GPU):
#     OUT=/tmp/o tools/device/vulkan_gpu.sh run-tests      (exit 1 only for the torch skip)
#     OUT=/tmp/o TL_VK_BENCH_ARGS="--n 256 --iters 2 --reps 1" tools/device/vulkan_gpu.sh run-bench
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# stage_system_libs (here) and vulkan_env (there: the loader from .gl/, NVIDIA's ICD), shared with gpu_check.sh.
# shellcheck source=tools/device/device_env.sh
source "$repo/tools/device/device_env.sh"
stage=${TL_VK_STAGE:-$repo/.gpu-vk}  # TL_VK_STAGE: stage elsewhere (testing this script)
out=${OUT:-/tmp/vulkan_gpu_out}

# Environment of tilelang.compile + the binding (here and there).
py_env() {
  export PYTHONPATH=$stage/python:$repo/compiler/python
  export TL_PACK=$stage/bin/tl-pack TL_CACHE_DIR=$stage/tilelang-cache
  export PYTHONDONTWRITEBYTECODE=1
}

build() {
  local bdir=${TL_VK_BUILD_DIR:-$repo/build-vkcoop}
  set -e
  # git's exclude file (a linked worktree's .git is a file: ask git where it is).
  local exclude
  exclude=$(cd "$repo" && realpath -m "$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)")
  mkdir -p "$(dirname "$exclude")"
  grep -qxF '/.gpu-vk/' "$exclude" 2>/dev/null || echo '/.gpu-vk/' >>"$exclude"
  if [ ! -f "$bdir/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  ninja -C "$bdir" -j2 tl_runtime_vulkan_tests tl_vk_test_bundle tl-pack tl_python_runtime
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback" "$stage/python" "$stage/tests/runtime_vulkan/data"
  cp "$bdir/bin/tl_runtime_vulkan_tests" "$bdir/bin/tl-pack" "$stage/bin/"
  # The GoogleTests link libtilelang_runtime.so (RUNPATH names this machine's build dir only).
  cp "$bdir/lib/libtilelang_runtime.so" "$stage/lib/"
  cp -r "$bdir/python/tilelang_runtime" "$stage/python/"
  rm -rf "$stage/python/tilelang_runtime/__pycache__"
  cp "$bdir/tests/runtime_vulkan/data/vulkan.tlb" "$stage/tests/runtime_vulkan/data/"
  strip --strip-debug "$stage/bin/"* "$stage/lib/libtilelang_runtime.so" "$stage/python/tilelang_runtime/libtilelang_runtime.so"
  stage_system_libs "$stage"
  set +e
  echo "=== compiling the conformance cases for Vulkan into .gpu-vk/tilelang-cache ==="
  (cd "$repo" && py_env && TL_CONFORMANCE_COMPILE_ONLY=1 TL_CONFORMANCE_TARGETS=vulkan \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/conformance -k vulkan 2>&1 | tail -2)
  echo "=== compiling the benchmark's GEMMs (fp16 4096^3) for Vulkan ==="
  (cd "$repo" && py_env && /usr/bin/python3 tools/bench/vulkan_gemm_bench.py --precompile 2>&1 | tail -6) || {
    echo "benchmark precompile failed"; return 1; }
  du -sh "$stage" "$repo/.gl" 2>/dev/null
  echo "staged; now the device call: command 'bash tools/device/vulkan_gpu.sh run', carry ['.gpu-vk', '.gl']"
}

# LD_LIBRARY_PATH for the staged binaries (the fallback libstdc++ only when needed); a Python
# with numpy and pytest (torch for the benchmark's baseline).
setup() {
  mkdir -p "$out"
  export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! "$stage/bin/tl_runtime_vulkan_tests" --gtest_list_tests >/dev/null 2>"$out/ldd_probe.txt"; then
    echo "binaries do not start with the device's libraries ($(head -c 300 "$out/ldd_probe.txt")); adding lib-fallback"
    export LD_LIBRARY_PATH=$stage/lib:$stage/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  py=
  local d
  for d in python3 /usr/bin/python3 /usr/local/bin/python3; do
    if "$d" -c 'import torch, numpy, pytest' 2>/dev/null; then py=$(command -v "$d"); break; fi
  done
  if [ -z "$py" ]; then
    for d in python3 /usr/bin/python3; do
      if "$d" -c 'import numpy, pytest' 2>/dev/null; then py=$(command -v "$d"); break; fi
    done
    echo "no python3 with torch here: the benchmark has no cuBLAS baseline, the torch DLPack case skips"
  fi
  echo "python: ${py:-none}"
  vulkan_env
}

run_tests() {
  echo "=== vulkan.* GoogleTests ==="
  # A fresh pipeline cache directory for the runtime's default, a writable one for the tests'.
  XDG_CACHE_HOME=$(mktemp -d) TL_VK_TEST_TMP_DIR=$(mktemp -d) "$stage/bin/tl_runtime_vulkan_tests" \
    --gtest_output="xml:$out/vulkan.xml" 2>&1 | tee "$out/vulkan.log"
  local rc=${PIPESTATUS[0]} passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out/vulkan.log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out/vulkan.log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out/vulkan.log" | tail -1)
  summary+=("$(printf '%-22s rc=%-3s passed=%-3s skipped=%-3s failed=%-3s' "vulkan.gtest" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
  if [ "$rc" -ne 0 ] || [ "${skipped:-0}" != 0 ]; then status=1; fi

  echo "=== tests/python/test_runtime_vulkan.py ==="
  (cd "$repo" && PYTHONPATH=$stage/python TL_BUILD_DIR=$stage PYTHONDONTWRITEBYTECODE=1 \
    timeout 120 "$py" -m pytest -q -p no:cacheprovider -rs tests/python/test_runtime_vulkan.py) 2>&1 | tee "$out/vulkan_python.log"
  rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%-3s %s' "vulkan.python" "$rc" "$(grep -E '[0-9]+ (passed|failed|skipped)' "$out/vulkan_python.log" | tail -1)")")
  if [ "$rc" -ne 0 ] || grep -q ' skipped' "$out/vulkan_python.log"; then status=1; fi

  echo "=== tests/conformance -k vulkan (TL_DEVICE=vulkan:0) ==="
  (cd "$repo" && py_env && export TL_CONFORMANCE_TARGETS=vulkan TL_DEVICE=${TL_DEVICE:-vulkan:0} &&
    timeout 270 "$py" -m pytest -q -p no:cacheprovider -rsx tests/conformance -k vulkan \
    --junitxml="$out/conformance_vulkan.xml") 2>&1 | tee "$out/conformance_vulkan.log"
  rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%-3s %s' "conformance.vulkan" "$rc" "$(grep -E '[0-9]+ (passed|failed|skipped)' "$out/conformance_vulkan.log" | tail -1)")")
  if [ "$rc" -ne 0 ] || grep -qE 'compiled only| skipped' "$out/conformance_vulkan.log"; then status=1; fi
}

run_bench() {
  echo "=== fp16 GEMM 4096^3: Vulkan vs torch.matmul (tools/bench/vulkan_gemm_bench.py) ==="
  local extra=()
  "$py" -c 'import torch' 2>/dev/null || extra=(--no-torch)
  # TL_VK_BENCH_ARGS: more arguments (testing the script on lavapipe: "--n 256 --iters 2 --reps 1").
  # shellcheck disable=SC2206
  extra+=(${TL_VK_BENCH_ARGS:-})
  (cd "$repo" && py_env && PYTHONUNBUFFERED=1 timeout 300 "$py" tools/bench/vulkan_gemm_bench.py \
    --json "$out/vulkan_bench.json" "${extra[@]}") 2>&1 | tee "$out/vulkan_bench.log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%s' "vulkan.bench" "$rc")")
  if [ "$rc" -ne 0 ]; then status=1; fi
}

finish() {
  echo
  echo "=== summary ==="
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  [ -f "$out/vulkan_bench.log" ] && sed -n '/=== Vulkan GEMM benchmark table ===/,$p' "$out/vulkan_bench.log"
  printf '%s\n' "${summary[@]}"
  exit $status
}

status=0
summary=()
py=python3
case "${1:-}" in
  build) build ;;
  run) setup; run_tests; run_bench; finish ;;
  run-tests) setup; run_tests; finish ;;
  run-bench) setup; run_bench; finish ;;
  *)
    echo "usage: $0 build            (here: build and stage .gpu-vk/)" >&2
    echo "       $0 run              (there: GoogleTests, Python binding, conformance, GEMM benchmark)" >&2
    echo "       $0 run-tests | run-bench" >&2
    exit 2
    ;;
esac
