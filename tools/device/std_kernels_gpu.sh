#!/usr/bin/env bash
# The standard kernel library (kernels/, issue #10) on the H200: packed here, run there.
#
# Step 1, here (the build machine, with nvcc/NVRTC in /usr/local/cuda):
#     tools/device/std_kernels_gpu.sh build
#   packs kernels/manifest.json for this CPU's level + sm_90a (cubin and compute_80 PTX) into
#   .gpu/bundles/tilelang-std.tlb with --keep-going (the report of packed/skipped/failed kernels
#   goes to .gpu/bundles/tilelang-std.report), using the tl-pack of $TL_GPU_BUILD_DIR (default
#   build-cuda, as gpu_check.sh builds it) or $TL_PACK. Needs .gpu/python and .gpu/lib staged by
#   `tools/device/gpu_check.sh build`.
#
# Step 2, the device call:
#     run(command="bash tools/device/std_kernels_gpu.sh run", carry=[".gpu"], kind="nvidia-h200", timeout_s=600)
#   runs tests/python/test_std_kernels.py with TL_DEVICE=cuda on that bundle (every kernel against
#   its numpy reference; kernels without a CUDA variant skip with the runtime's reasons), then the
#   demo table (tools/run_std_kernels.py --all) on the best device. Logs in $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
GPU="$ROOT/.gpu"
case "${1:-}" in
  build)
    BUILD=${TL_GPU_BUILD_DIR:-build-cuda}
    case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac  # relative to the repository, or absolute
    TLPACK="${TL_PACK:-$BUILD/bin/tl-pack}"
    mkdir -p "$GPU/bundles"
    PYTHONPATH="$BUILD/python" "$TLPACK" build kernels/manifest.json -o "$GPU/bundles/tilelang-std.tlb" \
      --target host,sm_90a --keep-going -q --cache-dir "$BUILD/tilelang-cache" 2>&1 | tee "$GPU/bundles/tilelang-std.report"
    ls -la "$GPU/bundles/tilelang-std.tlb"
    ;;
  run)
    OUT="${OUT:-/tmp/std-kernels-out}"
    mkdir -p "$OUT"
    py=python3
    if ! $py -c 'import numpy, pytest' 2>/dev/null; then py=/usr/bin/python3; fi
    export LD_LIBRARY_PATH="$GPU/lib:${LD_LIBRARY_PATH:-}"
    export PYTHONPATH="$GPU/python:$ROOT/compiler/python:$ROOT"
    nvidia-smi -L || true
    set +e
    TL_STD_BUNDLE="$GPU/bundles/tilelang-std.tlb" TL_DEVICE=cuda timeout 300 $py -m pytest -q -p no:cacheprovider \
      -rs tests/python/test_std_kernels.py --junitxml="$OUT/std_kernels_cuda.xml" 2>&1 | tee "$OUT/std_kernels_cuda.log" | tail -15
    rc=${PIPESTATUS[0]}
    timeout 200 $py tools/run_std_kernels.py "$GPU/bundles/tilelang-std.tlb" --all 2>&1 | tee "$OUT/std_kernels_demo.log" | tail -70
    rc2=${PIPESTATUS[0]}
    set -e
    echo "test_std_kernels (cuda): exit $rc; demo table: exit $rc2"
    [ "$rc" = 0 ] && [ "$rc2" = 0 ]
    ;;
  *)
    echo "usage: $0 build | run" >&2
    exit 2
    ;;
esac
