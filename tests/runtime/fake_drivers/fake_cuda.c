/* A fake libcuda.so.1 for driver-loading tests, built in three flavours:
 *   FAKE_CUDA_OK              one "Fake H200" device, compute capability 9.0,
 *                             driver API 12040 (PTX ISA <= 8.4)
 *   FAKE_CUDA_MISSING_SYMBOL  like OK but without cuDeviceGetAttribute
 *   FAKE_CUDA_INIT_FAILS      cuInit returns CUDA_ERROR_NO_DEVICE (100)
 * The runtime finds it through tl_runtime_options_t.driver_search_paths. */
#include <stddef.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int cuInit(unsigned int flags) {
  (void)flags;
#ifdef FAKE_CUDA_INIT_FAILS
  return 100;
#else
  return 0;
#endif
}
EXPORT int cuDriverGetVersion(int* v) {
  *v = 12040;
  return 0;
}
EXPORT int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
EXPORT int cuDeviceGet(int* dev, int ordinal) {
  if (ordinal != 0) return 101; /* CUDA_ERROR_INVALID_DEVICE */
  *dev = 0;
  return 0;
}
EXPORT int cuDeviceGetName(char* name, int len, int dev) {
  (void)dev;
  strncpy(name, "Fake H200", (size_t)len);
  return 0;
}
#ifndef FAKE_CUDA_MISSING_SYMBOL
EXPORT int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  switch (attr) {
    case 1: *v = 1024; break;                /* max threads per block */
    case 2: case 3: *v = 1024; break;        /* max block x, y */
    case 4: *v = 64; break;                  /* max block z */
    case 5: *v = 2147483647; break;          /* max grid x */
    case 6: case 7: *v = 65535; break;       /* max grid y, z */
    case 16: *v = 132; break;                /* SMs */
    case 75: *v = 9; break;                  /* CC major */
    case 76: *v = 0; break;                  /* CC minor */
    case 97: *v = 232448; break;             /* opt-in shared memory */
    default: *v = 0; break;
  }
  return 0;
}
#endif
EXPORT int cuDeviceTotalMem_v2(size_t* bytes, int dev) {
  (void)dev;
  *bytes = (size_t)141 << 30;
  return 0;
}
EXPORT int cuGetErrorName(int rc, const char** name) {
  *name = rc == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
