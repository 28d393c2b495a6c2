/* Fake libamdhip64.so.6 builds.
 *
 * Default: lacks most of the HIP symbols the runtime needs; the HIP backend
 * must report itself unavailable, naming them.
 *
 * FAKE_HIP_NO_DEVICE: the whole API, but hipGetDeviceCount answers
 * hipErrorNoDevice (100), as ROCm does on a machine without an AMD GPU.
 *
 * FAKE_HIP_OK: one device (FAKE_HIP_ARCH, default "gfx942:sramecc+:xnack-",
 * 64 KiB LDS, wave64) backed by host memory. It checks what a driver would
 * be handed and records it for the test (fake_hip_last_*): the code object
 * must be an AMDGPU ELF and name the entry point, `extra` must be the
 * {0x01, buffer, 0x02, &size, 0x03} list with the size the launch says.
 * Kernels are not executed: there is no AMD GPU to run them on.
 */
#define EXPORT __attribute__((visibility("default")))

#if !defined(FAKE_HIP_OK) && !defined(FAKE_HIP_NO_DEVICE)
EXPORT int hipInit(unsigned int flags) {
  (void)flags;
  return 0;
}
#else
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

EXPORT int hipInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
EXPORT int hipDriverGetVersion(int* v) { *v = 60241134; return 0; }
EXPORT int hipRuntimeGetVersion(int* v) { *v = 60241134; return 0; }
EXPORT const char* hipGetErrorName(int e) {
  switch (e) {
    case 0: return "hipSuccess";
    case 1: return "hipErrorInvalidValue";
    case 2: return "hipErrorOutOfMemory";
    case 100: return "hipErrorNoDevice";
    case 200: return "hipErrorInvalidImage";
    case 500: return "hipErrorNotFound";
    default: return "hipErrorUnknown";
  }
}
EXPORT const char* hipGetErrorString(int e) {
  switch (e) {
    case 100: return "no ROCm-capable device is detected";
    case 200: return "device kernel image is invalid";
    case 500: return "named symbol not found";
    default: return "fake error";
  }
}

#ifdef FAKE_HIP_NO_DEVICE
EXPORT int hipGetDeviceCount(int* n) { *n = 0; return 100; }
#else
EXPORT int hipGetDeviceCount(int* n) { *n = 1; return 0; }
#endif

static int current_device = 0;
static const char* Arch(void) {
  const char* a = getenv("FAKE_HIP_ARCH");
  return a && *a ? a : "gfx942:sramecc+:xnack-";
}

EXPORT int hipDeviceGetName(char* name, int len, int dev) {
  if (dev != 0 || len < 2) return 1;
  strncpy(name, "Fake AMD Instinct", (size_t)len - 1);
  return 0;
}
EXPORT int hipDeviceTotalMem(size_t* bytes, int dev) { *bytes = (size_t)192 << 30; return dev == 0 ? 0 : 1; }
EXPORT int hipDeviceGetAttribute(int* v, int attr, int dev) {
  if (dev != 0) return 1;
  switch (attr) {
    case 16: *v = 0; return 0;                         /* integrated */
    case 26: case 27: case 28: *v = 1024; return 0;    /* block dims */
    case 29: *v = 2147483647; return 0;
    case 30: case 31: *v = 65535; return 0;
    case 56: *v = 1024; return 0;                      /* threads per block */
    case 63: *v = 304; return 0;                       /* CUs */
    case 74: *v = 65536; return 0;                     /* LDS per block */
    case 87: *v = strncmp(Arch(), "gfx11", 5) == 0 ? 32 : 64; return 0;
    default: return 1;
  }
}
/* ROCm 6 layout stand-in: name at 0, gcnArchName further in (its offset
 * differs between layouts; the runtime must not depend on it). */
EXPORT int hipGetDevicePropertiesR0600(void* props, int dev) {
  if (dev != 0) return 1;
  memset(props, 0, 1472);
  strcpy((char*)props, "Fake AMD Instinct");
  strcpy((char*)props + 1160, Arch());
  return 0;
}

EXPORT int hipGetDevice(int* d) { *d = current_device; return 0; }
EXPORT int hipSetDevice(int d) {
  if (d != 0) return 1;
  current_device = d;
  return 0;
}
EXPORT int hipMalloc(void** p, size_t n) {
  *p = malloc(n);
  return *p ? 0 : 2;
}
EXPORT int hipFree(void* p) { free(p); return 0; }
EXPORT int hipMemGetInfo(size_t* free_bytes, size_t* total) { *free_bytes = 1; *total = 2; return 0; }
EXPORT int hipMemcpyHtoD(void* dst, void* src, size_t n) { memcpy(dst, src, n); return 0; }
EXPORT int hipMemcpyDtoH(void* dst, void* src, size_t n) { memcpy(dst, src, n); return 0; }
EXPORT int hipMemcpyHtoDAsync(void* dst, void* src, size_t n, void* s) { (void)s; memcpy(dst, src, n); return 0; }
EXPORT int hipMemcpyDtoHAsync(void* dst, void* src, size_t n, void* s) { (void)s; memcpy(dst, src, n); return 0; }
static int stream_token;
EXPORT int hipStreamCreate(void** s) { *s = &stream_token; return 0; }
EXPORT int hipStreamDestroy(void* s) { return s == &stream_token ? 0 : 1; }
EXPORT int hipStreamSynchronize(void* s) { (void)s; return 0; }
EXPORT int hipStreamQuery(void* s) { (void)s; return 0; }

/* Modules: the image pointer (no length: a real driver reads the ELF). */
struct FakeModule { const unsigned char* image; size_t size; };
EXPORT int hipModuleLoadData(void** module, const void* image) {
  const unsigned char* p = (const unsigned char*)image;
  if (memcmp(p, "\x7f" "ELF", 4) != 0 || p[18] != 224) return 200;
  /* e_shoff + e_shnum * 64: the end of the section headers, i.e. the image. */
  uint64_t shoff;
  memcpy(&shoff, p + 40, 8);
  uint16_t shnum;
  memcpy(&shnum, p + 60, 2);
  struct FakeModule* m = (struct FakeModule*)malloc(sizeof *m);
  m->image = p;
  m->size = (size_t)(shoff + (uint64_t)shnum * 64);
  *module = m;
  return 0;
}
EXPORT int hipModuleUnload(void* module) { free(module); return 0; }
EXPORT int hipModuleGetFunction(void** f, void* module, const char* name) {
  struct FakeModule* m = (struct FakeModule*)module;
  const size_t n = strlen(name);
  for (size_t i = 0; i + n + 1 <= m->size; ++i) {
    if (m->image[i] == (unsigned char)name[0] && memcmp(m->image + i, name, n) == 0 && m->image[i + n] == 0) {
      *f = module;
      return 0;
    }
  }
  return 500;
}

EXPORT unsigned char fake_hip_last_params[1024];
EXPORT size_t fake_hip_last_params_size;
EXPORT unsigned fake_hip_last_grid[3], fake_hip_last_block[3], fake_hip_last_shared;
EXPORT int fake_hip_launches;
EXPORT int hipModuleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                 unsigned shared, void* stream, void** params, void** extra) {
  (void)f;
  (void)stream;
  if (params) return 1; /* the runtime passes `extra` only */
  if (extra) {
    if (extra[0] != (void*)1 || extra[2] != (void*)2 || extra[4] != (void*)3) return 1;
    const size_t n = *(const size_t*)extra[3];
    if (n > sizeof fake_hip_last_params) return 1;
    memcpy(fake_hip_last_params, extra[1], n);
    fake_hip_last_params_size = n;
  } else {
    fake_hip_last_params_size = 0;
  }
  fake_hip_last_grid[0] = gx, fake_hip_last_grid[1] = gy, fake_hip_last_grid[2] = gz;
  fake_hip_last_block[0] = bx, fake_hip_last_block[1] = by, fake_hip_last_block[2] = bz;
  fake_hip_last_shared = shared;
  ++fake_hip_launches;
  return 0;
}
#endif
