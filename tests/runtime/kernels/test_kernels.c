/* Hand-written CPU kernels following runtime/include/tilelang/cpu_kernel_abi.h,
 * standing in for compiler output until the code generator exists. Built by
 * the host compiler at build time once per ISA level (-march=x86-64-v2, -v3,
 * -v4) into self-contained shared objects that tests pack into bundles.
 *
 * Kernels (shape symbols in Kernel.symbols order):
 *   vadd(A[N], B[N], C[N])             f32, 256 elements per block, symbols {N}
 *   saxpy(a, X[N], Y[N], n)            Y = a*X + Y, 1024 per block, n binds N
 *   gemm(A[M,K], B[K,N], C[M,N])       16x16 tile per block, accumulator in
 *                                      the per-thread scratch, symbols {M,N,K}
 *   fail_at(X[N])                      returns 7 from block x == 3
 *
 * Variants for negative tests (compile definitions):
 *   TL_TEST_NO_QUERY     no tl_cpu_library_query export
 *   TL_TEST_QUERY_NULL   the query refuses every version
 *   TL_TEST_ABI_MAJOR    the table claims another ABI major
 */
#include <stddef.h>
#include <stdint.h>

#include "tilelang/cpu_kernel_abi.h"

#ifndef TL_ISA_LEVEL
#error "TL_ISA_LEVEL must name the ISA level"
#endif

#define EXPORT __attribute__((visibility("default")))

static int vadd(const tl_cpu_dispatch_t* d, const tl_cpu_block_t* b) {
  const float* a = (const float*)d->args[0];
  const float* bb = (const float*)d->args[1];
  float* c = (float*)d->args[2];
  int64_t n = d->symbols[0];
  int64_t begin = (int64_t)b->block[0] * 256;
  int64_t end = begin + 256 < n ? begin + 256 : n;
  for (int64_t i = begin; i < end; ++i) c[i] = a[i] + bb[i];
  return 0;
}

static int saxpy(const tl_cpu_dispatch_t* d, const tl_cpu_block_t* b) {
  float alpha = *(const float*)d->args[0];
  const float* x = (const float*)d->args[1];
  float* y = (float*)d->args[2];
  int32_t n = *(const int32_t*)d->args[3];
  int64_t begin = (int64_t)b->block[0] * 1024;
  int64_t end = begin + 1024 < n ? begin + 1024 : n;
  for (int64_t i = begin; i < end; ++i) y[i] = alpha * x[i] + y[i];
  return 0;
}

#define TILE 16
static int gemm(const tl_cpu_dispatch_t* d, const tl_cpu_block_t* b) {
  const float* A = (const float*)d->args[0];
  const float* B = (const float*)d->args[1];
  float* C = (float*)d->args[2];
  int64_t M = d->symbols[0], N = d->symbols[1], K = d->symbols[2];
  float* acc = (float*)b->scratch; /* TILE*TILE floats */
  if (!acc || b->scratch_bytes < sizeof(float) * TILE * TILE) return 2;
  int64_t row0 = (int64_t)b->block[1] * TILE, col0 = (int64_t)b->block[0] * TILE;
  for (int i = 0; i < TILE * TILE; ++i) acc[i] = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    for (int i = 0; i < TILE && row0 + i < M; ++i) {
      float a = A[(row0 + i) * K + k];
      for (int j = 0; j < TILE && col0 + j < N; ++j) acc[i * TILE + j] += a * B[k * N + col0 + j];
    }
  }
  for (int i = 0; i < TILE && row0 + i < M; ++i) {
    for (int j = 0; j < TILE && col0 + j < N; ++j) C[(row0 + i) * N + col0 + j] = acc[i * TILE + j];
  }
  return 0;
}

static int fail_at(const tl_cpu_dispatch_t* d, const tl_cpu_block_t* b) {
  (void)d;
  return b->block[0] == 3 ? 7 : 0;
}

static const tl_cpu_kernel_t kKernels[] = {
    {"vadd", vadd, 0, 3, 0},
    {"saxpy", saxpy, 0, 4, 0},
    {"gemm", gemm, sizeof(float) * TILE * TILE, 3, 0},
    {"fail_at", fail_at, 0, 1, 0},
};

static const tl_cpu_library_t kLibrary = {
#ifdef TL_TEST_ABI_MAJOR
    (TL_TEST_ABI_MAJOR << 16),
#else
    TL_CPU_ABI_VERSION,
#endif
    sizeof(kKernels) / sizeof(kKernels[0]), kKernels, TL_ISA_LEVEL};

#ifndef TL_TEST_NO_QUERY
EXPORT const tl_cpu_library_t* tl_cpu_library_query(uint32_t max_abi_version) {
#ifdef TL_TEST_QUERY_NULL
  (void)max_abi_version;
  (void)kLibrary;
  return NULL;
#else
  if ((max_abi_version >> 16) != TL_CPU_ABI_VERSION_MAJOR) return NULL;
  return &kLibrary;
#endif
}
#else
EXPORT const tl_cpu_library_t* not_the_query(void) { return &kLibrary; }
#endif
