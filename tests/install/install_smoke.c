/* Built against an installed tree only (tests/install/run_install_test.cmake):
 * opens the runtime test bundle given as argv[1], runs vadd and gemm on the
 * CPU with random inputs against a plain reference, and checks that a wrong
 * dtype and a wrong shape fail with INVALID_ARGUMENT and a message naming the
 * argument. Prints "install smoke: ok" on success. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tilelang/runtime.h>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    tl_status_t s_ = (call);                                                               \
    if (s_) {                                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tl_status_code_name(tl_status_code(s_)), \
              tl_status_message(s_));                                                      \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)
#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BUNDLE.tlb\n", argv[0]);
    return 2;
  }
  srand(12345u);
  EXPECT((tl_abi_version() >> 16) == TL_ABI_VERSION_MAJOR);
  tl_runtime_options_t opts;
  tl_runtime_options_init(&opts);
  opts.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  tl_runtime_t* rt = NULL;
  CHECK(tl_runtime_create(&opts, &rt));
  tl_device_t* cpu = NULL;
  CHECK(tl_runtime_default_device(rt, "cpu", &cpu));
  tl_bundle_t* bundle = NULL;
  CHECK(tl_bundle_open_file(rt, argv[1], &bundle));
  CHECK(tl_bundle_verify(bundle));

  /* vadd */
  tl_kernel_t* vadd = NULL;
  CHECK(tl_bundle_find_kernel(bundle, "vadd", &vadd));
  tl_prepared_t* pv = NULL;
  CHECK(tl_kernel_prepare(vadd, cpu, 0, &pv));
  enum { N = 1000 };
  static float a[N], b[N], c[N];
  for (int i = 0; i < N; ++i) a[i] = frand(), b[i] = frand(), c[i] = NAN;
  int64_t n = N;
  tl_dtype_t f32 = tl_dtype(TL_DTYPE_FLOAT, 32);
  tl_arg_t args[3] = {tl_arg_tensor(a, f32, 1, &n, NULL), tl_arg_tensor(b, f32, 1, &n, NULL),
                      tl_arg_tensor(c, f32, 1, &n, NULL)};
  CHECK(tl_launch(pv, NULL, 3, args, NULL));
  for (int i = 0; i < N; ++i) EXPECT(c[i] == a[i] + b[i]);

  /* wrong dtype */
  args[1].dtype = tl_dtype(TL_DTYPE_INT, 32);
  tl_status_t s = tl_launch(pv, NULL, 3, args, NULL);
  EXPECT(tl_status_code(s) == TL_STATUS_INVALID_ARGUMENT);
  EXPECT(strstr(tl_status_message(s), "argument 1") != NULL);
  tl_status_free(s);
  args[1].dtype = f32;

  /* gemm, odd sizes */
  tl_kernel_t* gemm = NULL;
  CHECK(tl_bundle_find_kernel(bundle, "gemm", &gemm));
  tl_prepared_t* pg = NULL;
  CHECK(tl_kernel_prepare(gemm, cpu, 0, &pg));
  enum { M = 33, K = 20, NN = 47 };
  static float A[M * K], B[K * NN], C[M * NN];
  for (int i = 0; i < M * K; ++i) A[i] = frand();
  for (int i = 0; i < K * NN; ++i) B[i] = frand();
  int64_t sa[2] = {M, K}, sb[2] = {K, NN}, sc[2] = {M, NN};
  tl_arg_t g[3] = {tl_arg_tensor(A, f32, 2, sa, NULL), tl_arg_tensor(B, f32, 2, sb, NULL),
                   tl_arg_tensor(C, f32, 2, sc, NULL)};
  CHECK(tl_launch(pg, NULL, 3, g, NULL));
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < NN; ++j) {
      double r = 0;
      for (int k = 0; k < K; ++k) r += (double)A[i * K + k] * B[k * NN + j];
      EXPECT(fabs(C[i * NN + j] - r) < 1e-4);
    }

  /* wrong shape: C has 46 columns, N is 47 from B */
  int64_t bad[2] = {M, NN - 1};
  g[2].tensor.shape = bad;
  s = tl_launch(pg, NULL, 3, g, NULL);
  EXPECT(tl_status_code(s) == TL_STATUS_INVALID_ARGUMENT);
  EXPECT(strstr(tl_status_message(s), "argument 2") != NULL);
  EXPECT(strstr(tl_status_message(s), "46") != NULL);
  tl_status_free(s);

  printf("%s\n", tl_prepared_explain(pg));
  tl_prepared_release(pg);
  tl_prepared_release(pv);
  tl_kernel_release(gemm);
  tl_kernel_release(vadd);
  tl_bundle_release(bundle);
  tl_device_release(cpu);
  tl_runtime_release(rt);
  printf("install smoke: ok (runtime %s)\n", tl_runtime_version_string());
  return 0;
}
