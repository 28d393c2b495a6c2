# shellcheck shell=bash
# Sourced by tools/device/gpu_check.sh and tools/device/vulkan_gpu.sh (not run on its own): what both
# need on either side of the device call.
#   stage_system_libs STAGE   here: the system libraries the staged binaries link, resolved from this
#                             Debian machine's ldconfig cache, into STAGE/lib (libtbb, libzstd) and
#                             STAGE/lib-fallback (libstdc++, libgcc_s: put on LD_LIBRARY_PATH there only
#                             when the device's own are too old for the binaries)
#   vulkan_env                there: the Vulkan loader, unpacked from the carried .gl/*.deb when the
#                             machine has no libvulkan.so.1 (the device image has none), and
#                             VK_DRIVER_FILES pointed at NVIDIA's ICD JSON when neither it nor
#                             VK_ICD_FILENAMES is set (first of /usr/local/nvidia/share/vulkan/icd.d,
#                             /usr/share/vulkan/icd.d, /etc/vulkan/icd.d)

tl_device_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

stage_system_libs() {
  local stage=$1 lib
  mkdir -p "$stage/lib" "$stage/lib-fallback"
  for lib in libtbb.so.12 libzstd.so.1; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$stage/lib/$lib"
  done
  for lib in libstdc++.so.6 libgcc_s.so.1; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$stage/lib-fallback/$lib"
  done
}

vulkan_env() {
  if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
    local f n=0
    for f in "$tl_device_repo"/.gl/*.deb; do
      [ -e "$f" ] || continue
      dpkg -x "$f" / && n=$((n + 1))
    done
    ldconfig 2>/dev/null || true
    echo "Vulkan loader: unpacked $n .deb(s) from .gl/"
  fi
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ]; then
    local d
    for d in /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d; do
      if [ -f "$d/nvidia_icd.json" ]; then export VK_DRIVER_FILES=$d/nvidia_icd.json; break; fi
    done
  fi
  echo "Vulkan: $(ldconfig -p 2>/dev/null | grep -m1 'libvulkan.so.1 ' | sed 's/.*=> //'), VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}"
}
