/* A deployment program in C99: open a TileLang bundle, list the devices,
 * run a GEMM on the CPU (or another device), check it against a plain C
 * reference, and print why the runtime chose the variant it chose.
 *
 *   run_bundle BUNDLE.tlb [KERNEL [DEVICE]]   DEVICE: "cpu" (default), "cuda",
 *                              "cuda:1", ...; on a GPU the inputs and the
 *                              output go through device buffers
 *   run_bundle --describe      print every device's description as JSON (the
 *                              format of tests/runtime/goldens/devices/)
 *
 * BUNDLE is a path or an installed bundle's name ("tilelang-std": see
 * tl_bundle_open_by_name). KERNEL (default "gemm") must have the signature gemm(A[M,K], B[K,N],
 * C[M,N]) in float32, as the runtime's test bundle and the standard kernel
 * library do. Only tilelang/runtime.h and libtilelang_runtime.so are used. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilelang/runtime.h"

/* Prints and frees a failed status; returns 1 on failure. */
static int failed(tl_status_t status, const char* what) {
  if (status == NULL) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, tl_status_code_name(tl_status_code(status)), tl_status_message(status));
  tl_status_free(status);
  return 1;
}

static const char* backend_name(uint32_t backend) {
  switch (backend) {
    case TL_BACKEND_CUDA: return "cuda";
    case TL_BACKEND_HIP: return "hip";
    case TL_BACKEND_VULKAN: return "vulkan";
    case TL_BACKEND_CPU: return "cpu";
    default: return "unknown";
  }
}

int main(int argc, char** argv) {
  const char* kernel_name = argc > 2 ? argv[2] : "gemm";
  const char* device_spec = argc > 3 ? argv[3] : "cpu";
  tl_buffer_t* buffers[3] = {NULL, NULL, NULL};
  void* pointers[3];
  size_t bytes[3];
  int on_gpu = 0;
  int64_t M = 67, N = 45, K = 33;
  tl_runtime_options_t options;
  tl_runtime_t* runtime = NULL;
  tl_device_t* cpu = NULL;
  tl_bundle_t* bundle = NULL;
  tl_kernel_t* kernel = NULL;
  tl_prepared_t* prepared = NULL;
  tl_variant_info_t variant;
  tl_arg_t args[3];
  int64_t shape_a[2], shape_b[2], shape_c[2];
  float *a = NULL, *b = NULL, *c = NULL;
  double max_error = 0.0;
  size_t i, count;
  int64_t r, col, k;
  int rc = 1;

  if (argc < 2) {
    fprintf(stderr, "usage: %s BUNDLE.tlb [KERNEL [DEVICE]] | --describe\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "--describe") == 0) {
    tl_runtime_options_init(&options);
    if (failed(tl_runtime_create(&options, &runtime), "tl_runtime_create")) return 1;
    count = tl_runtime_device_count(runtime);
    for (i = 0; i < count; ++i) {
      tl_device_t* device = NULL;
      if (failed(tl_runtime_device_at(runtime, i, &device), "tl_runtime_device_at")) break;
      printf("%s", tl_device_describe(device));
      tl_device_release(device);
    }
    for (i = TL_BACKEND_CUDA; i <= TL_BACKEND_CPU; ++i) {
      tl_status_t status = tl_runtime_backend_status(runtime, (tl_backend_t)i);
      if (status) {
        printf("# %s: %s\n", backend_name((uint32_t)i), tl_status_message(status));
        tl_status_free(status);
      }
    }
    tl_runtime_release(runtime);
    return 0;
  }
  printf("tilelang runtime %s, ABI %u.%u\n", tl_runtime_version_string(), tl_abi_version() >> 16,
         tl_abi_version() & 0xFFFFu);

  tl_runtime_options_init(&options); /* all backends; missing GPU drivers are not errors */
  if (failed(tl_runtime_create(&options, &runtime), "tl_runtime_create")) return 1;

  count = tl_runtime_device_count(runtime);
  printf("%zu device(s):\n", count);
  for (i = 0; i < count; ++i) {
    tl_device_t* device = NULL;
    tl_device_info_t info;
    if (failed(tl_runtime_device_at(runtime, i, &device), "tl_runtime_device_at")) goto done;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (!failed(tl_device_info(device, &info), "tl_device_info")) {
      printf("  %zu: %s:%u '%s' arch %s, %.1f GiB%s\n", i, backend_name(info.backend), info.ordinal, info.name,
             info.arch, (double)info.memory_bytes / (1024.0 * 1024.0 * 1024.0),
             (info.flags & TL_DEVICE_FLAG_CAN_LAUNCH) ? "" : " (no launch path yet)");
    }
    tl_device_release(device);
  }

  if (failed(tl_runtime_default_device(runtime, device_spec, &cpu), "tl_runtime_default_device")) goto done;
  on_gpu = strcmp(device_spec, "cpu") != 0;
  /* An installed name ("tilelang-std", found along TILELANG_KERNEL_PATH and
   * <prefix>/share/tilelang) or a path. */
  if (failed(tl_bundle_open_by_name(runtime, argv[1], &bundle), "tl_bundle_open_by_name")) goto done;
  printf("bundle %s: %zu kernel(s)\n", argv[1], tl_bundle_kernel_count(bundle));
  if (failed(tl_bundle_find_kernel(bundle, kernel_name, &kernel), "tl_bundle_find_kernel")) goto done;
  /* B is [K, N]: take the static sizes the kernel was packed with (the standard
   * library's gemm_f32_nn has K = N = 512); dynamic dims keep the sizes above. */
  for (i = 0; i < 2; ++i) {
    tl_dim_info_t dim;
    tl_status_t st;
    memset(&dim, 0, sizeof(dim));
    dim.struct_size = sizeof(dim);
    st = tl_kernel_param_dim(kernel, 1, i, &dim);
    if (st != NULL) {
      tl_status_free(st);
    } else if (dim.static_size >= 0) {
      if (i == 0) K = dim.static_size;
      else N = dim.static_size;
    }
  }
  if (failed(tl_kernel_prepare(kernel, cpu, 0, &prepared), "tl_kernel_prepare")) goto done;
  memset(&variant, 0, sizeof(variant));
  variant.struct_size = sizeof(variant);
  if (failed(tl_prepared_variant_info(prepared, &variant), "tl_prepared_variant_info")) goto done;
  printf("variant: %s (arch %s)\n%s", variant.id, variant.arch, tl_prepared_explain(prepared));

  a = (float*)malloc(sizeof(float) * (size_t)(M * K));
  b = (float*)malloc(sizeof(float) * (size_t)(K * N));
  c = (float*)malloc(sizeof(float) * (size_t)(M * N));
  if (!a || !b || !c) goto done;
  srand(1);
  for (r = 0; r < M * K; ++r) a[r] = (float)rand() / (float)RAND_MAX - 0.5f;
  for (r = 0; r < K * N; ++r) b[r] = (float)rand() / (float)RAND_MAX - 0.5f;
  shape_a[0] = M;
  shape_a[1] = K;
  shape_b[0] = K;
  shape_b[1] = N;
  shape_c[0] = M;
  shape_c[1] = N;
  pointers[0] = a;
  pointers[1] = b;
  pointers[2] = c;
  bytes[0] = sizeof(float) * (size_t)(M * K);
  bytes[1] = sizeof(float) * (size_t)(K * N);
  bytes[2] = sizeof(float) * (size_t)(M * N);
  if (on_gpu) { /* device memory: the inputs copied in (the output is written whole) */
    for (i = 0; i < 3; ++i) {
      if (failed(tl_buffer_allocate(cpu, bytes[i], &buffers[i]), "tl_buffer_allocate")) goto done;
      if (i < 2 && failed(tl_buffer_copy_from_host(buffers[i], 0, pointers[i], bytes[i], NULL), "copy in")) goto done;
      pointers[i] = tl_buffer_device_pointer(buffers[i]);
    }
  }
  args[0] = tl_arg_tensor(pointers[0], tl_dtype(TL_DTYPE_FLOAT, 32), 2, shape_a, NULL);
  args[1] = tl_arg_tensor(pointers[1], tl_dtype(TL_DTYPE_FLOAT, 32), 2, shape_b, NULL);
  args[2] = tl_arg_tensor(pointers[2], tl_dtype(TL_DTYPE_FLOAT, 32), 2, shape_c, NULL);
  /* NULL stream: synchronous; NULL options: grid from the bundle. */
  if (failed(tl_launch(prepared, NULL, 3, args, NULL), "tl_launch")) goto done;
  if (on_gpu && failed(tl_buffer_copy_to_host(buffers[2], 0, c, bytes[2], NULL), "copy out")) goto done;

  for (r = 0; r < M; ++r) {
    for (col = 0; col < N; ++col) {
      double ref = 0.0, err;
      for (k = 0; k < K; ++k) ref += (double)a[r * K + k] * (double)b[k * N + col];
      err = fabs(ref - (double)c[r * N + col]);
      if (err > max_error) max_error = err;
    }
  }
  printf("%s %lldx%lldx%lld: max |error| vs reference = %.3g\n", kernel_name, (long long)M, (long long)N,
         (long long)K, max_error);
  rc = max_error < 1e-4 ? 0 : 1;
  if (rc) fprintf(stderr, "result does not match the reference\n");

done:
  for (i = 0; i < 3; ++i) tl_buffer_release(buffers[i]);
  free(a);
  free(b);
  free(c);
  tl_prepared_release(prepared);
  tl_kernel_release(kernel);
  tl_bundle_release(bundle);
  tl_device_release(cpu);
  tl_runtime_release(runtime);
  return rc;
}
