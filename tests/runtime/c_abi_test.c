/* The C ABI from C99, using nothing but tilelang/runtime.h and the library:
 * open the standard test bundle (argv[1]), reflect, prepare, launch, check
 * numerics, and exercise error statuses. Exit status 0 on success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilelang/runtime.h"

static int g_failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                   \
    }                                                                 \
  } while (0)

static int ok(tl_status_t s, const char* what) {
  if (s == NULL) return 1;
  fprintf(stderr, "%s: %s: %s\n", what, tl_status_code_name(tl_status_code(s)), tl_status_message(s));
  tl_status_free(s);
  ++g_failures;
  return 0;
}

static int expect_error(tl_status_t s, tl_status_code_t code, const char* fragment) {
  int good = s != NULL && tl_status_code(s) == code && strstr(tl_status_message(s), fragment) != NULL;
  if (!good) {
    fprintf(stderr, "expected %s containing '%s', got %s: %s\n", tl_status_code_name(code), fragment,
            tl_status_code_name(tl_status_code(s)), tl_status_message(s));
    ++g_failures;
  }
  tl_status_free(s);
  return good;
}

int main(int argc, char** argv) {
  tl_runtime_options_t options;
  tl_runtime_t* runtime = NULL;
  tl_device_t* device = NULL;
  tl_bundle_t* bundle = NULL;
  tl_kernel_t* kernel = NULL;
  tl_prepared_t* prepared = NULL;
  tl_param_info_t param;
  tl_variant_info_t variant;
  tl_arg_t args[4];
  int64_t n = 3000;
  float* x;
  float* y;
  int64_t i;

  if (argc != 2) {
    fprintf(stderr, "usage: %s BUNDLE.tlb\n", argv[0]);
    return 2;
  }
  CHECK(tl_abi_version() == TL_ABI_VERSION);
  tl_runtime_options_init(&options);
  options.flags = TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
  options.backend_mask = TL_BACKEND_BIT(TL_BACKEND_CPU);
  if (!ok(tl_runtime_create(&options, &runtime), "tl_runtime_create")) return 1;
  if (!ok(tl_runtime_default_device(runtime, NULL, &device), "tl_runtime_default_device")) return 1;
  if (!ok(tl_bundle_open_file(runtime, argv[1], &bundle), "tl_bundle_open_file")) return 1;
  CHECK(tl_bundle_kernel_count(bundle) == 4);
  expect_error(tl_bundle_find_kernel(bundle, "nope", &kernel), TL_STATUS_NOT_FOUND, "no kernel 'nope'");
  CHECK(kernel == NULL);
  if (!ok(tl_bundle_find_kernel(bundle, "saxpy", &kernel), "tl_bundle_find_kernel")) return 1;
  CHECK(tl_kernel_param_count(kernel) == 4);
  param.struct_size = sizeof(param);
  if (ok(tl_kernel_param_info(kernel, 0, &param), "tl_kernel_param_info")) {
    CHECK(strcmp(param.name, "a") == 0);
    CHECK(param.kind == TL_PARAM_SCALAR);
  }
  if (!ok(tl_kernel_prepare(kernel, device, 0, &prepared), "tl_kernel_prepare")) return 1;
  variant.struct_size = sizeof(variant);
  if (ok(tl_prepared_variant_info(prepared, &variant), "tl_prepared_variant_info")) {
    CHECK(strncmp(variant.id, "cpu.x86-64-v", 12) == 0);
    CHECK(variant.code_kind == TL_CODE_ELF);
  }
  CHECK(strstr(tl_prepared_explain(prepared), "chosen: cpu.x86-64-v") != NULL);

  x = (float*)malloc(sizeof(float) * (size_t)n);
  y = (float*)malloc(sizeof(float) * (size_t)n);
  for (i = 0; i < n; ++i) {
    x[i] = (float)i;
    y[i] = 1.0f;
  }
  args[0] = tl_arg_f32(0.5f);
  args[1] = tl_arg_tensor(x, tl_dtype(TL_DTYPE_FLOAT, 32), 1, &n, NULL);
  args[2] = tl_arg_tensor(y, tl_dtype(TL_DTYPE_FLOAT, 32), 1, &n, NULL);
  args[3] = tl_arg_i32((int32_t)n);
  ok(tl_launch(prepared, NULL, 4, args, NULL), "tl_launch");
  for (i = 0; i < n; ++i) {
    if (y[i] != 0.5f * (float)i + 1.0f) {
      fprintf(stderr, "y[%lld] = %f\n", (long long)i, (double)y[i]);
      ++g_failures;
      break;
    }
  }
  args[3] = tl_arg_i64(n);
  expect_error(tl_launch(prepared, NULL, 4, args, NULL), TL_STATUS_INVALID_ARGUMENT,
               "kernel 'saxpy' argument 3 'n': dtype is int64, expected int32");

  free(x);
  free(y);
  tl_prepared_release(prepared);
  tl_kernel_release(kernel);
  tl_bundle_release(bundle);
  tl_device_release(device);
  tl_runtime_release(runtime);
  if (g_failures == 0) printf("c_abi_test: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
