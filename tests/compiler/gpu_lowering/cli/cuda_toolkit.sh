# Sourced by the tl_pack_*.sh tests: exit 77 (ctest skip) unless a CUDA compiler
# (NVRTC or nvcc in /usr/local/cuda*) is installed.
if ! ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so* \
     /usr/local/cuda/bin/nvcc /usr/local/cuda-13.0/bin/nvcc >/dev/null 2>&1; then
  echo "no CUDA toolkit (NVRTC or nvcc): skipped"
  exit 77
fi
