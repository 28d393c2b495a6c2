#!/usr/bin/env bash
# GPU-side checks of the project in ONE device call: build here, run there.
#
# THE DEVICE CALL (after `tools/device/gpu_check.sh build` here):
#     run(command="bash tools/device/gpu_check.sh run", carry=[".gpu"], kind="nvidia-h200", timeout_s=600)
#   (.gpu/ is the only ignored path it needs; the working tree -- tests/conformance,
#   compiler/python, kernels/ -- travels anyway.)
#
# The device machine (H200, through the session's device tool) is not Debian
# and has none of our build dependencies (oneTBB, zstd, flatbuffers,
# GoogleTest), so everything is built here and the binaries travel with the
# shared libraries they need.
#
# Step 1, here (Debian 12 build machine with nvcc in /usr/local/cuda/bin):
#     tools/device/gpu_check.sh build
#   configures and builds /work/main/build-cuda (RelWithDebInfo, -j2; never
#   touches build/), then stages into .gpu/ (ignored via .git/info/exclude):
#     .gpu/bin/   tl_runtime_cuda_tests, tl_gpu_lowering_tests (debug info stripped)
#     .gpu/bundles/  the compiler.gpu test kernels, compiled here (NVRTC) into
#                 bundles (cubins sm_80/sm_89/sm_90a + compute_80 PTX), so the
#                 GPU machine needs no CUDA compiler
#     .gpu/lib/   libtilelang_runtime.so, libtbb.so.12, libzstd.so.1
#     .gpu/lib-fallback/  libstdc++.so.6, libgcc_s.so.1 (used only when the
#                 device's own are too old for the binaries)
#   and prints its size (the tree that travels must stay under 64 MiB).
#
# Step 2, the device call (the device tool's `run`):
#     command:   bash tools/device/gpu_check.sh run
#     carry:     [".gpu"]
#     kind:      nvidia-h200        timeout_s: 600
#   Runs nvidia-smi, then the cuda.* GoogleTests twice: with the default
#   loader (cuLibraryLoadData; fresh JIT cache, so PTX timings are cold) and
#   with TL_CUDA_LOADER=module (cuModuleLoadDataEx; CUDA_CACHE_DISABLE=1).
#   Then the compiler.gpu run tests (tl_gpu_lowering_tests --gtest_filter='Exec/Run.*/Gpu:Timing.*':
#   generated kernels vs float64 host references, plus a 2048^3 GEMM timing).
#   Logs and GoogleTest XML go to $OUT; a summary table is printed last.
#   TL_GPU_BUILD_DIR overrides the build directory (default build-cuda).
#   Exit status: 0 when every test passed (skips count as failures there:
#   on the GPU machine nothing may skip).
#
# Python conformance on CUDA (added to both steps):
#   build also stages .gpu/bin/tl-pack, .gpu/python/tilelang_runtime (with
#   libtilelang_runtime.so) and fills .gpu/tilelang-cache by compiling every
#   conformance case for CUDA here (TL_CONFORMANCE_COMPILE_ONLY=1,
#   TL_CUDA_TARGET=sm_90a: an sm_90a cubin + compute_80 PTX per kernel), so the
#   GPU machine needs no CUDA compiler (a cache miss there uses its NVRTC/nvcc
#   if /usr/local/cuda* has one). TL_GPU_PRECOMPILE=0 skips the filling.
#   The frontend `tilelang` is the carried working tree's compiler/python.
#   run then runs `python3 -m pytest -q tests/conformance -k cuda` (cap 240 s)
#   with that PYTHONPATH / TL_PACK / TL_CACHE_DIR; results in
#   $OUT/conformance_cuda.{log,xml}. Expected failures (backend UNIMPLEMENTED)
#   are fine; failures and skips are not.
#   Not packed for CUDA here: kernels/manifest.json (its dynamic-M kernels
#   compile for CUDA since shape symbols became kernel parameters; not staged yet).
#
# Upstream TileLang's examples on CUDA (issue #12; tools/compat/README.md):
#   build also extracts upstream's examples/ (the directories run_upstream.py runs) and
#   testing/python/kernel from the fetched mirror ($TL_COMPAT_UPSTREAM_GIT, default
#   /work/.mirror/tile-ai+tilelang/repo; skipped with a note when absent) into
#   .gpu/upstream, and precompiles the kernels tools/compat/cpu_probe.py knows for CUDA
#   (sm_90a + PTX) into .gpu/tilelang-cache.
#   THE DEVICE CALL for it (torch must be importable by python3 there):
#     run(command="bash tools/device/gpu_check.sh run-compat", carry=[".gpu"], kind="nvidia-h200", timeout_s=600)
#   writes $OUT/compat_cuda.md (the table), compat_cuda.json and compat_logs/ (pytest output per directory).
#
# The standard kernel library on CUDA (issue #10; kernels/README.md):
#   after build:  tools/device/gpu_check.sh build-std   (packs kernels/ for host + sm_90a into .gpu/bundles)
#   THE DEVICE CALL:
#     run(command="bash tools/device/gpu_check.sh run-std", carry=[".gpu"], kind="nvidia-h200", timeout_s=600)
#   runs tests/python/test_std_kernels.py with TL_DEVICE=cuda and the demo table (--all).
#
# Vulkan on the NVIDIA driver (issue #5; runtime/README.md "Vulkan backend"):
#   build also builds tl_runtime_vulkan_tests (the SPIR-V kernels are assembled
#   and embedded here by spirv-as) and the Python test bundle, staging
#   .gpu/bin/tl_runtime_vulkan_tests and .gpu/tests/runtime_vulkan/data/vulkan.tlb.
#   run (and run-vulkan alone) makes the Vulkan loader available first: when
#   no libvulkan.so.1 is installed it unpacks the loader .debs carried in .gl/
#   (`for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig`; carry [".gpu", ".gl"]),
#   and points VK_DRIVER_FILES at NVIDIA's ICD JSON when unset (first of
#   /usr/local/nvidia/share/vulkan/icd.d, /usr/share/vulkan/icd.d, /etc/vulkan/icd.d).
#   Then the vulkan.* GoogleTests (nothing may skip: the device must be
#   NVIDIA's, launching, with the pipeline cache hit on the second runtime) and
#   tests/python/test_runtime_vulkan.py. Logs: $OUT/vulkan.{log,xml}, $OUT/vulkan_python.log.
#     run(command="bash tools/device/gpu_check.sh run-vulkan", carry=[".gpu", ".gl"], kind="nvidia-h200", timeout_s=300)
#   run (and run-vulkan-conformance alone) also runs tests/conformance -k vulkan on the NVIDIA
#   Vulkan driver (TL_DEVICE=vulkan:0; the staged tl-pack compiles the SPIR-V there, it needs no
#   toolchain). Log: $OUT/conformance_vulkan.log.
#     run(command="bash tools/device/gpu_check.sh run-vulkan-conformance", carry=[".gpu", ".gl"], kind="nvidia-h200", timeout_s=300)
#
# Later issues add their GPU steps (benchmarks) as more build_* / run_*
# functions below, so that one call still does all.
set -u -o pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
stage=${TL_GPU_STAGE:-$repo/.gpu}  # TL_GPU_STAGE: stage elsewhere (testing the script without touching .gpu/)
# stage_system_libs (here) and vulkan_env (there), shared with vulkan_gpu.sh.
# shellcheck source=tools/device/device_env.sh
source "$repo/tools/device/device_env.sh"

build() {
  local bdir=${TL_GPU_BUILD_DIR:-$repo/build-cuda}
  set -e
  # git's exclude file (a linked worktree's .git is a file: ask git where it is).
  local exclude
  exclude=$(cd "$repo" && realpath -m "$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)")
  mkdir -p "$(dirname "$exclude")"
  grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
  if [ ! -f "$bdir/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  ninja -C "$bdir" -j2 tl_runtime_cuda_tests tl_gpu_lowering_tests
  rm -rf "$stage"
  mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback" "$stage/bundles"
  cp "$bdir/bin/tl_runtime_cuda_tests" "$bdir/bin/tl_gpu_lowering_tests" "$stage/bin/"
  TL_GPU_TEST_WRITE_BUNDLES=$stage/bundles "$bdir/bin/tl_gpu_lowering_tests" --gtest_filter='Kernels/Compile.*' \
    | grep -E '^\[  (PASSED|FAILED|SKIPPED) '
  cp "$bdir/lib/libtilelang_runtime.so" "$stage/lib/"
  strip --strip-debug "$stage/bin/"* "$stage/lib/"*.so
  # The system libraries the binaries link, resolved here (Debian paths).
  stage_system_libs "$stage"
  build_python "$bdir"
  build_bench
  build_vulkan "$bdir"
  build_compat
  du -sh "$stage"
  echo "staged; now the device call: command 'bash tools/device/gpu_check.sh run', carry ['.gpu']"
}

# The Python side: tl-pack, the runtime binding, and a CUDA compile cache of the conformance cases.
build_python() {
  local bdir=$1
  # tilelang_python too: std_kernels_gpu.sh build runs tl-pack with PYTHONPATH=$bdir/python, and a stale copy of
  # the frontend there fails on anything newer (session 9: `cluster_dims` unknown, the standard library not packed)
  ninja -C "$bdir" -j2 tl-pack tilelang_python tl_python_runtime
  mkdir -p "$stage/python"
  cp "$bdir/bin/tl-pack" "$stage/bin/"
  cp -r "$bdir/python/tilelang_runtime" "$stage/python/"
  rm -rf "$stage/python/tilelang_runtime/__pycache__"
  strip --strip-debug "$stage/bin/tl-pack" "$stage/python/tilelang_runtime/libtilelang_runtime.so"
  if [ "${TL_GPU_PRECOMPILE:-1}" = 1 ]; then
    echo "=== compiling the conformance cases for CUDA (sm_90a + PTX) into .gpu/tilelang-cache ==="
    (cd "$repo" && conformance_env && TL_CONFORMANCE_COMPILE_ONLY=1 \
      /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/conformance -k cuda 2>&1 | tail -3)
  fi
}

# The CUDA benchmarks (tools/bench/gpu_bench.py): compiled here into the same cache.
build_bench() {
  local bdir=${TL_GPU_BUILD_DIR:-$repo/build-cuda}
  ninja -C "$bdir" -j2 tl_example_c && mkdir -p "$stage/bin" && cp "$bdir/bin/tl_example_c" "$stage/bin/"
  echo "=== compiling the benchmark kernels for CUDA (sm_90a + PTX) into .gpu/tilelang-cache ==="
  (cd "$repo" && conformance_env && /usr/bin/python3 tools/bench/gpu_bench.py --precompile 2>&1 | tail -4)
}

# GEMM / FlashAttention / first-launch benchmarks on the device; results in $OUT/bench.{log,json}.
run_bench() {
  local log=${OUT:-/tmp}/bench.log
  echo "=== benchmarks (tools/bench/gpu_bench.py) ==="
  [ -x "$stage/bin/tl_example_c" ] && export TL_C_EXAMPLE=$stage/bin/tl_example_c  # examples/c on a CUDA bundle
  (cd "$repo" && conformance_env && PYTHONUNBUFFERED=1 timeout 300 python3 tools/bench/gpu_bench.py \
    --json "${OUT:-/tmp}/bench.json") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%s' "bench" "$rc")")
  if [ "$rc" -ne 0 ]; then status=1; fi
}

# The CUDA part of `run` alone: runtime + lowering tests, conformance (also under
# CUDA_FORCE_PTX_JIT=1), benchmarks.
run_cuda() {
  status=0
  summary=()
  export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  if ! "$stage/bin/tl_runtime_cuda_tests" --gtest_list_tests >/dev/null 2>&1; then
    export LD_LIBRARY_PATH=$stage/lib:$stage/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  local cache
  cache=$(mktemp -d)
  run_cuda_tests library CUDA_CACHE_PATH="$cache"
  rm -rf "$cache"
  run_gpu_lowering_tests
  run_conformance
  mv "${OUT:-/tmp}/conformance_cuda.log" "${OUT:-/tmp}/conformance_cuda_default.log"
  run_bench
  summary+=("(next: conformance with CUDA_FORCE_PTX_JIT=1 CUDA_CACHE_DISABLE=1)")
  CUDA_FORCE_PTX_JIT=1 CUDA_CACHE_DISABLE=1 run_conformance
  echo
  echo "=== summary ==="
  grep -h '^\[ gemm_big \]\|^\[ run ' "${OUT:-/tmp}"/gpu_lowering.log
  printf '%s\n' "${summary[@]}"
  return $status
}

# Environment of the conformance suite on CUDA (here and on the device).
conformance_env() {
  export PYTHONPATH=$stage/python:$repo/compiler/python
  export TL_PACK=$stage/bin/tl-pack TL_CACHE_DIR=$stage/tilelang-cache
  export TL_CUDA_TARGET=sm_90a TL_CONFORMANCE_TARGETS=cuda
  export PYTHONDONTWRITEBYTECODE=1
}

# tests/conformance -k cuda through tilelang.compile + the Python binding.
run_conformance() {
  local log=${OUT:-/tmp}/conformance_cuda.log
  echo "=== conformance (python, -k cuda) ==="
  local d py=python3
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    if [ -e "$d/libnvrtc.so.13" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break; fi
  done
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH=$PATH:$d; break; fi
  done
  if ! $py -c 'import numpy, pytest' 2>/dev/null; then py=/usr/bin/python3; fi
  (cd "$repo" && conformance_env && timeout 240 $py -m pytest -q -p no:cacheprovider -rsx tests/conformance -k "cuda and not coopmat" \
    --junitxml="${OUT:-/tmp}/conformance_cuda.xml") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local last passed skipped failed xfailed
  last=$(grep -E '[0-9]+ (passed|failed|skipped|error)' "$log" | tail -1)
  passed=$(echo "$last" | grep -o '[0-9]* passed' | cut -d' ' -f1)
  skipped=$(echo "$last" | grep -o '[0-9]* skipped' | cut -d' ' -f1)
  failed=0
  for n in $(echo "$last" | grep -oE '[0-9]+ (failed|errors?)' | cut -d' ' -f1); do failed=$((failed + n)); done
  xfailed=$(echo "$last" | grep -o '[0-9]* xfailed' | cut -d' ' -f1)
  summary+=("$(printf '%-22s rc=%-3s passed=%-3s skipped=%-3s failed=%-3s xfailed=%s' "conformance.cuda" "$rc" \
    "${passed:-0}" "${skipped:-0}" "${failed:-0}" "${xfailed:-0}")")
  # Nothing may skip on the GPU machine, except the torch case under CUDA_FORCE_PTX_JIT=1 (torch ships
  # no PTX for its own kernels; the skip reason says so). Cooperative-matrix cases are Vulkan-only and
  # are not collected (-k "... not coopmat").
  local expected=0
  if [ "${CUDA_FORCE_PTX_JIT:-0}" = 1 ]; then
    expected=$(sed -n 's/^SKIPPED \[\([0-9]*\)\].*CUDA_FORCE_PTX_JIT=1.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  fi
  if [ "$rc" -ne 0 ] || [ "${skipped:-0}" -ne "$expected" ]; then status=1; fi
}

# tests/conformance -k vulkan on the Vulkan device (the NVIDIA driver on the H200).
run_conformance_vulkan() {
  local log=${OUT:-/tmp}/conformance_vulkan.log py=python3
  echo "=== conformance (python, -k vulkan) ==="
  vulkan_env
  if ! $py -c 'import numpy, pytest' 2>/dev/null; then py=/usr/bin/python3; fi
  (cd "$repo" && conformance_env && export TL_CONFORMANCE_TARGETS=vulkan TL_DEVICE=${TL_DEVICE:-vulkan:0} &&
    timeout 270 $py -m pytest -q -p no:cacheprovider -rsx tests/conformance -k vulkan \
    --junitxml="${OUT:-/tmp}/conformance_vulkan.xml") 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%-3s %s' "conformance.vulkan" "$rc" "$(grep -E '[0-9]+ (passed|failed|skipped)' "$log" | tail -1)")")
  if [ "$rc" -ne 0 ] || grep -q 'compiled only' "$log"; then status=1; fi
}

# One pass of the CUDA tests; $1 name, then environment assignments.
run_cuda_tests() {
  local name=$1
  shift
  local log=${OUT:-/tmp}/cuda_$name.log
  echo "=== cuda tests: $name ($*) ==="
  # CudaMultiDevice.* (issue #9) needs two GPUs: excluded, and said so, on one.
  local filter='*' gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [ "${gpus:-0}" -lt 2 ]; then
    filter='-CudaMultiDevice.*'
    echo "(only ${gpus:-0} GPU: CudaMultiDevice.* not run; it needs nvidia-h200-x2)"
  fi
  env "$@" "$stage/bin/tl_runtime_cuda_tests" --gtest_filter="$filter" --gtest_output="xml:${OUT:-/tmp}/cuda_$name.xml" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  summary+=("$(printf '%-22s rc=%-3s passed=%-3s skipped=%-3s failed=%-3s' "cuda.$name" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
  if [ "$rc" -ne 0 ] || [ "${skipped:-0}" != 0 ]; then status=1; fi
}

# The generated kernels (compiler.gpu Exec/Run.*/Gpu, Timing.*) on prebuilt bundles.
run_gpu_lowering_tests() {
  local log=${OUT:-/tmp}/gpu_lowering.log
  echo "=== compiler.gpu run tests ==="
  TL_GPU_TEST_BUNDLES=$stage/bundles "$stage/bin/tl_gpu_lowering_tests" --gtest_filter='Exec/Run.*/Gpu:Timing.*' \
    --gtest_output="xml:${OUT:-/tmp}/gpu_lowering.xml" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  summary+=("$(printf '%-22s rc=%-3s passed=%-3s skipped=%-3s failed=%-3s' "compiler.gpu.Run" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
  if [ "$rc" -ne 0 ] || [ "${skipped:-0}" != 0 ]; then status=1; fi
}

# The Vulkan tests and the Python test bundle (see the header).
build_vulkan() {
  local bdir=$1
  ninja -C "$bdir" -j2 tl_runtime_vulkan_tests tl_vk_test_bundle
  mkdir -p "$stage/bin" "$stage/tests/runtime_vulkan/data"
  cp "$bdir/bin/tl_runtime_vulkan_tests" "$stage/bin/"
  strip --strip-debug "$stage/bin/tl_runtime_vulkan_tests"
  cp "$bdir/tests/runtime_vulkan/data/vulkan.tlb" "$stage/tests/runtime_vulkan/data/"
}

# vulkan.* GoogleTests and the Python binding on the NVIDIA Vulkan driver.
run_vulkan() {
  local out=${OUT:-/tmp}
  local log=$out/vulkan.log
  echo "=== vulkan tests ==="
  vulkan_env
  # XDG_CACHE_HOME: a fresh pipeline cache directory for the runtime's default.
  XDG_CACHE_HOME=$(mktemp -d) "$stage/bin/tl_runtime_vulkan_tests" --gtest_output="xml:$out/vulkan.xml" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  summary+=("$(printf '%-22s rc=%-3s passed=%-3s skipped=%-3s failed=%-3s' "vulkan" "$rc" "${passed:-0}" "${skipped:-0}" "${failed:-0}")")
  if [ "$rc" -ne 0 ] || [ "${skipped:-0}" != 0 ]; then status=1; fi
  local py=python3
  if ! $py -c 'import numpy, pytest' 2>/dev/null; then py=/usr/bin/python3; fi
  (cd "$repo" && PYTHONPATH=$stage/python TL_BUILD_DIR=$stage PYTHONDONTWRITEBYTECODE=1 \
    timeout 120 $py -m pytest -q -p no:cacheprovider -rs tests/python/test_runtime_vulkan.py) 2>&1 | tee "$out/vulkan_python.log"
  rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-22s rc=%-3s %s' "vulkan.python" "$rc" "$(grep -E '[0-9]+ (passed|failed|skipped)' "$out/vulkan_python.log" | tail -1)")")
  if [ "$rc" -ne 0 ] || grep -q ' skipped' "$out/vulkan_python.log"; then status=1; fi
}

# Upstream's examples for run-compat (see the header).
build_compat() {
  local git=${TL_COMPAT_UPSTREAM_GIT:-/work/.mirror/tile-ai+tilelang/repo}
  if ! git --git-dir="$git" rev-parse -q --verify HEAD >/dev/null 2>&1; then
    echo "no upstream TileLang mirror at $git (set TL_COMPAT_UPSTREAM_GIT); run-compat will have nothing to run"
    return 0
  fi
  rm -rf "$stage/upstream"
  mkdir -p "$stage/upstream"
  local dirs d paths=()
  dirs=$(cd "$repo" && /usr/bin/python3 -c 'import sys; sys.path.insert(0, "tools/compat"); import run_upstream; print(" ".join(run_upstream.DEFAULT_DIRS))')
  for d in $dirs; do paths+=("examples/$d"); done
  git --git-dir="$git" archive HEAD "${paths[@]}" testing/python/kernel | tar -x -C "$stage/upstream"
  git --git-dir="$git" rev-parse HEAD >"$stage/upstream/UPSTREAM_COMMIT"
  echo "upstream $(cat "$stage/upstream/UPSTREAM_COMMIT"): $(du -sh "$stage/upstream" | cut -f1) in .gpu/upstream"
  if [ "${TL_GPU_PRECOMPILE:-1}" = 1 ]; then
    echo "=== compiling upstream's example kernels for CUDA (sm_90a + PTX) into .gpu/tilelang-cache ==="
    (cd "$repo" && conformance_env && /usr/bin/python3 tools/compat/cpu_probe.py "$stage/upstream" --target cuda --tests 2>&1 | grep -E "^(ok|FAIL) |kernels compiled") || true
  fi
}

# tools/compat/run_upstream.py over .gpu/upstream with target cuda; table in $OUT/compat_cuda.md.
run_compat() {
  local out=${OUT:-/tmp} d py=
  for d in /usr/local/cuda/lib64 /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64; do
    if [ -e "$d/libnvrtc.so.13" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break; fi
  done
  for d in /usr/local/cuda/bin /usr/local/cuda-13*/bin; do
    if [ -x "$d/nvcc" ]; then export PATH=$PATH:$d; break; fi
  done
  for d in python3 /usr/bin/python3 /usr/local/bin/python3; do
    if "$d" -c 'import torch, numpy, pytest' 2>/dev/null; then py=$(command -v "$d"); break; fi
  done
  if [ -z "$py" ]; then
    echo "no python3 with torch, numpy and pytest on this machine"; status=1; return
  fi
  echo "=== upstream examples (tools/compat/run_upstream.py, target cuda, $py) ==="
  (cd "$repo" && conformance_env && timeout 570 "$py" tools/compat/run_upstream.py "$stage/upstream" --target cuda \
    --pythonpath "$PYTHONPATH" --python "$py" --out "$out/compat_cuda.md" --json "$out/compat_cuda.json" \
    --log-dir "$out/compat_logs" --test-timeout 120 --dir-timeout 240) 2>&1 | tee "$out/compat_cuda.log"
  local rc=${PIPESTATUS[0]}
  [ -f "$out/compat_cuda.md" ] && sed -n '1,30p' "$out/compat_cuda.md"
  summary+=("$(printf '%-22s rc=%-3s %s' "compat.cuda" "$rc" "$(grep -o 'passed [0-9]*, failed [0-9]*, skipped [0-9]*' "$out/compat_cuda.log" | tail -1)")")
  if [ "$rc" -ne 0 ]; then status=1; fi
}

run() {
  status=0
  summary=()
  export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "=== machine ==="
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
  ldd --version 2>&1 | head -1
  if ! "$stage/bin/tl_runtime_cuda_tests" --gtest_list_tests >/dev/null 2>"${OUT:-/tmp}/ldd_probe.txt"; then
    echo "binaries do not start with the device's libraries ($(head -c 300 "${OUT:-/tmp}/ldd_probe.txt")); adding lib-fallback"
    export LD_LIBRARY_PATH=$stage/lib:$stage/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
  local cache
  cache=$(mktemp -d)
  run_cuda_tests library CUDA_CACHE_PATH="$cache"
  run_cuda_tests module TL_CUDA_LOADER=module CUDA_CACHE_DISABLE=1
  rm -rf "$cache"
  run_gpu_lowering_tests
  run_conformance
  run_bench
  run_vulkan
  run_conformance_vulkan
  echo
  echo "=== summary ==="
  grep -h '^\[ gemm \].*TFLOP' "${OUT:-/tmp}"/cuda_*.log
  grep -h '^\[ gemm_big \]\|^\[ run ' "${OUT:-/tmp}"/gpu_lowering.log
  grep -ho 'PTX JIT-compiled by the driver ([a-zA-Z]*): [0-9.]* ms' "${OUT:-/tmp}"/cuda_*.log
  printf '%s\n' "${summary[@]}"
  return $status
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  build-python)  # only the Python conformance part (stage must exist: bin/, lib/)
    mkdir -p "$stage/bin" "$stage/lib"
    set -e; build_python "${TL_GPU_BUILD_DIR:-$repo/build-cuda}"; set +e; du -sh "$stage" ;;
  build-compat)  # only the upstream-examples part (after build or build-python)
    set -e; build_compat; set +e; du -sh "$stage" ;;
  run-compat)
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    run_compat; printf '%s\n' "${summary[@]}"; exit $status ;;
  build-vulkan)  # only the Vulkan part (stage must exist: lib/, python/)
    set -e; build_vulkan "${TL_GPU_BUILD_DIR:-$repo/build-cuda}"; set +e; du -sh "$stage" ;;
  run-vulkan)
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    run_vulkan; printf '%s\n' "${summary[@]}"; exit $status ;;
  run-vulkan-conformance)
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    run_conformance_vulkan; printf '%s\n' "${summary[@]}"; exit $status ;;
  build-bench)  # only the benchmark kernels (after build or build-python)
    set -e; build_bench; set +e; du -sh "$stage" ;;
  run-bench)
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    run_bench; printf '%s\n' "${summary[@]}"; exit $status ;;
  build-std)  # the standard kernel library (after build): tools/device/std_kernels_gpu.sh
    bash "$repo/tools/device/std_kernels_gpu.sh" build ;;
  run-std)
    bash "$repo/tools/device/std_kernels_gpu.sh" run ;;
  run-cuda) run_cuda ;;
  run-core)  # run without the benchmarks and the module-loader pass: CUDA tests, generated kernels,
             # conformance on CUDA and on NVIDIA's Vulkan driver, the Vulkan runtime tests
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    if ! "$stage/bin/tl_runtime_cuda_tests" --gtest_list_tests >/dev/null 2>&1; then
      export LD_LIBRARY_PATH=$stage/lib:$stage/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
    run_cuda_tests library CUDA_CACHE_PATH="$(mktemp -d)"
    run_gpu_lowering_tests
    run_conformance
    run_vulkan
    run_conformance_vulkan
    echo "=== summary ==="; printf '%s\n' "${summary[@]}"; exit $status ;;
  run-python)
    status=0; summary=()
    export LD_LIBRARY_PATH=$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    run_conformance; printf '%s\n' "${summary[@]}"; exit $status ;;
  *)
    echo "usage: $0 build   (here: build and stage into .gpu/)" >&2
    echo "       $0 run     (on the device machine, with .gpu carried)" >&2
    echo "       $0 build-python | run-python   (only the Python conformance part of each)" >&2
    echo "       $0 build-bench | run-bench     (tools/bench/gpu_bench.py: GEMM, FlashAttention, first launch)" >&2
    echo "       $0 run-cuda    (CUDA tests, conformance twice (default, CUDA_FORCE_PTX_JIT=1), benchmarks)" >&2
    echo "       $0 build-compat | run-compat   (upstream TileLang's examples, tools/compat)" >&2
    echo "       $0 build-vulkan | run-vulkan   (the Vulkan runtime tests on the NVIDIA driver)" >&2
    echo "       $0 run-vulkan-conformance      (tests/conformance -k vulkan on the NVIDIA driver)" >&2
    echo "       $0 build-std | run-std         (kernels/: every instance vs numpy on CUDA, demo table)" >&2
    exit 2
    ;;
esac
