/* The TileLang runtime C ABI.
 *
 * The one boundary between the runtime and everything that uses it (C and C++
 * programs, the Python, Rust and Go bindings). C99, no other header needed.
 *
 * Conventions (apply to every function below):
 *  - Every fallible function returns a tl_status_t: NULL means success; a
 *    non-NULL status carries a code and a message with the numbers in it and
 *    must be freed with tl_status_free(). Messages are English, one line.
 *  - Outputs are trailing `out_` parameters. They are set to a defined value
 *    (NULL / 0) on entry, so a failed call never leaves garbage behind.
 *  - Handles are opaque and reference counted. A function that returns a
 *    handle through `out_` gives the caller one reference, to be dropped with
 *    the matching *_release(). *_retain() adds a reference. Releasing NULL is
 *    a no-op. Objects keep what they need alive: a bundle keeps its runtime,
 *    a kernel keeps its bundle, a prepared kernel keeps its kernel, bundle and
 *    device, so handles may be released in any order.
 *  - Option and info structs start with `uint32_t struct_size`, which the
 *    caller sets to sizeof(the struct it was compiled with). Fields are only
 *    ever appended; the runtime reads and writes only the fields that fit.
 *  - Strings returned as `const char*` are NUL-terminated UTF-8 and stay valid
 *    as long as the handle they came from.
 *  - No C++ exception, abort() or exit() crosses this boundary; an internal
 *    failure comes back as a TL_STATUS_INTERNAL status.
 *  - ABI policy: a function, once published, never changes signature or
 *    meaning; a new behaviour gets a new function. TL_ABI_VERSION_MAJOR
 *    changes only if that policy is broken; runtime creation rejects a caller
 *    built against another major.
 *
 * Thread-safety, per type:
 *  - tl_runtime_t, tl_device_t, tl_bundle_t, tl_kernel_t, tl_prepared_t,
 *    tl_buffer_t: immutable after creation (apart from reference counts and
 *    internal caches, which are synchronized); every function taking them may
 *    be called from any number of threads at once. The *contents* of a buffer
 *    are the caller's to synchronize, as with any memory.
 *  - tl_stream_t: thread-compatible. Calls on one stream must not overlap
 *    (use one stream per thread, or a lock); different streams are
 *    independent.
 *  - tl_status_t: owned by the caller that received it; not shared.
 */
#ifndef TILELANG_RUNTIME_H_
#define TILELANG_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(TL_RUNTIME_BUILDING)
#define TL_API __declspec(dllexport)
#else
#define TL_API __declspec(dllimport)
#endif
#else
#define TL_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*/
/* Versions                                                                   */
/*===----------------------------------------------------------------------===*/

#define TL_ABI_VERSION_MAJOR 1u
#define TL_ABI_VERSION_MINOR 0u
#define TL_ABI_VERSION ((TL_ABI_VERSION_MAJOR << 16) | TL_ABI_VERSION_MINOR)

/* (major << 16) | minor of the ABI the library implements. */
TL_API uint32_t tl_abi_version(void);
/* "0.1.0" style version of the library; static storage. */
TL_API const char* tl_runtime_version_string(void);

/*===----------------------------------------------------------------------===*/
/* Status                                                                     */
/*===----------------------------------------------------------------------===*/

typedef struct tl_status_s* tl_status_t; /* NULL == success */

/* Values match tl::StatusCode (formats/include/tilelang/formats/status.h). */
typedef enum tl_status_code_e {
  TL_STATUS_OK = 0,
  TL_STATUS_CANCELLED = 1,
  TL_STATUS_UNKNOWN = 2,
  TL_STATUS_INVALID_ARGUMENT = 3,
  TL_STATUS_DEADLINE_EXCEEDED = 4,
  TL_STATUS_NOT_FOUND = 5,
  TL_STATUS_ALREADY_EXISTS = 6,
  TL_STATUS_PERMISSION_DENIED = 7,
  TL_STATUS_RESOURCE_EXHAUSTED = 8,
  TL_STATUS_FAILED_PRECONDITION = 9,
  TL_STATUS_ABORTED = 10,
  TL_STATUS_OUT_OF_RANGE = 11,
  TL_STATUS_UNIMPLEMENTED = 12,
  TL_STATUS_INTERNAL = 13,
  TL_STATUS_UNAVAILABLE = 14,
  TL_STATUS_DATA_LOSS = 15,
  TL_STATUS_INCOMPATIBLE = 18
} tl_status_code_t;

/* TL_STATUS_OK for NULL. */
TL_API tl_status_code_t tl_status_code(tl_status_t status);
/* The message ("" for NULL); valid until tl_status_free(status). */
TL_API const char* tl_status_message(tl_status_t status);
/* "INVALID_ARGUMENT" etc.; static storage; "UNKNOWN_CODE" for other values. */
TL_API const char* tl_status_code_name(tl_status_code_t code);
TL_API void tl_status_free(tl_status_t status);

/*===----------------------------------------------------------------------===*/
/* Enumerations shared with the bundle manifest (formats/bundle.fbs)          */
/*===----------------------------------------------------------------------===*/

typedef enum tl_backend_e {
  TL_BACKEND_UNKNOWN = 0,
  TL_BACKEND_CUDA = 1,
  TL_BACKEND_HIP = 2,
  TL_BACKEND_VULKAN = 3,
  TL_BACKEND_CPU = 4
} tl_backend_t;
#define TL_BACKEND_BIT(backend) (1u << (unsigned)(backend))
#define TL_BACKEND_MASK_ALL 0u /* in tl_runtime_options_t.backend_mask: every backend */

typedef enum tl_code_kind_e {
  TL_CODE_UNKNOWN = 0,
  TL_CODE_CUBIN = 1,
  TL_CODE_PTX = 2,
  TL_CODE_HSACO = 3,
  TL_CODE_SPIRV = 4,
  TL_CODE_ELF = 5
} tl_code_kind_t;

typedef enum tl_param_kind_e { TL_PARAM_BUFFER = 0, TL_PARAM_SCALAR = 1 } tl_param_kind_t;

typedef enum tl_access_e {
  TL_ACCESS_NONE = 0,
  TL_ACCESS_READ = 1,
  TL_ACCESS_WRITE = 2,
  TL_ACCESS_READ_WRITE = 3
} tl_access_t;

/* DLPack-compatible element type. */
typedef enum tl_dtype_code_e {
  TL_DTYPE_INT = 0,
  TL_DTYPE_UINT = 1,
  TL_DTYPE_FLOAT = 2,
  TL_DTYPE_BFLOAT = 4,
  TL_DTYPE_BOOL = 6
} tl_dtype_code_t;
typedef struct tl_dtype_t {
  uint8_t code;   /* tl_dtype_code_t */
  uint8_t bits;   /* 8, 16, 32, 64 */
  uint16_t lanes; /* 1 for scalars of one element */
} tl_dtype_t;

/*===----------------------------------------------------------------------===*/
/* Runtime                                                                    */
/*===----------------------------------------------------------------------===*/

typedef struct tl_runtime_s tl_runtime_t;
typedef struct tl_device_s tl_device_t;
typedef struct tl_bundle_s tl_bundle_t;
typedef struct tl_kernel_s tl_kernel_t;
typedef struct tl_prepared_s tl_prepared_t;
typedef struct tl_buffer_s tl_buffer_t;
typedef struct tl_stream_s tl_stream_t;

/* Host memory used for runtime-owned host allocations (CPU device buffers,
 * copied bundles). All three NULL: the system allocator. `alloc` returns
 * memory aligned to `alignment` (a power of two, <= 4096) or NULL. Called
 * from any thread. */
typedef struct tl_allocator_t {
  void* self;
  void* (*alloc)(void* self, size_t size, size_t alignment);
  void (*free)(void* self, void* ptr);
} tl_allocator_t;

typedef enum tl_log_level_e {
  TL_LOG_ERROR = 0,
  TL_LOG_WARNING = 1,
  TL_LOG_INFO = 2,
  TL_LOG_DEBUG = 3
} tl_log_level_t;
/* Called from any thread, possibly concurrently; `message` is not
 * NUL-terminated beyond `length` bytes guaranteed, and valid during the call. */
typedef void (*tl_log_fn_t)(void* user, tl_log_level_t level, const char* message, size_t length);

/* Runtime flags. */
#define TL_RUNTIME_FLAG_DISABLE_JIT 0x1u /* treat PTX (driver JIT) variants as unusable */
/* Ignore TL_DEVICE / TL_FORCE_VARIANT / TL_DISABLE_JIT (tests, embedders). */
#define TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT 0x2u
/* CPU backend: never execute code from a memfd; always use the private cache
 * directory (for systems where vm.memfd_noexec or a policy forbids it). */
#define TL_RUNTIME_FLAG_CPU_NO_MEMFD 0x4u

typedef struct tl_runtime_options_t {
  uint32_t struct_size; /* sizeof(tl_runtime_options_t) */
  uint32_t abi_version; /* TL_ABI_VERSION; another major is rejected */
  uint32_t backend_mask; /* OR of TL_BACKEND_BIT(); 0 = all backends */
  uint32_t cpu_thread_count; /* CPU task arena size; 0 = all cores */
  uint64_t flags; /* TL_RUNTIME_FLAG_* */
  tl_log_fn_t log; /* NULL: no logging */
  void* log_user;
  uint32_t log_level; /* highest tl_log_level_t passed to `log` */
  uint32_t reserved0;
  tl_allocator_t host_allocator;
  /* GPU driver libraries: when driver_search_path_count > 0, each driver is
   * looked for as <dir>/<soname> in these directories only (in order), never
   * through the system search; otherwise the system loader's search is used.
   * The strings are copied. */
  const char* const* driver_search_paths;
  size_t driver_search_path_count;
  /* CPU backend fallback directory for kernel libraries when a memfd cannot
   * be executed. NULL: $XDG_CACHE_HOME/tilelang or $HOME/.cache/tilelang.
   * Created with mode 0700; refused if another user owns it or it is group-
   * or world-writable. Copied. */
  const char* cpu_cache_dir;
} tl_runtime_options_t;

/* Fills `options` with defaults (struct_size, abi_version set; all else 0). */
TL_API void tl_runtime_options_init(tl_runtime_options_t* options);

/* Creates a runtime: loads the drivers of the enabled backends (a missing or
 * broken driver makes that backend unavailable, never the call fail) and
 * probes every device once. `options` NULL: defaults.
 * Reads TL_DEVICE, TL_FORCE_VARIANT and TL_DISABLE_JIT from the environment
 * here, once, unless TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT is set:
 *  - TL_DEVICE=<spec>: the device tl_runtime_default_device() returns
 *    ("cpu", "cuda", "cuda:1", "vulkan:0", or a global index "2");
 *  - TL_FORCE_VARIANT=<id>[,<id>...]: for each kernel having a variant with
 *    one of these ids, only that variant is considered (its requirements are
 *    still checked);
 *  - TL_DISABLE_JIT=1: like TL_RUNTIME_FLAG_DISABLE_JIT. */
TL_API tl_status_t tl_runtime_create(const tl_runtime_options_t* options, tl_runtime_t** out_runtime);
TL_API void tl_runtime_retain(tl_runtime_t* runtime);
TL_API void tl_runtime_release(tl_runtime_t* runtime);

/* NULL when `backend` loaded and probed fine; otherwise why not (code
 * UNAVAILABLE with the driver paths tried and the loader's error, or
 * FAILED_PRECONDITION when excluded by backend_mask). The caller frees it. */
TL_API tl_status_t tl_runtime_backend_status(tl_runtime_t* runtime, tl_backend_t backend);

/*===----------------------------------------------------------------------===*/
/* Devices                                                                    */
/*===----------------------------------------------------------------------===*/

#define TL_DEVICE_FLAG_INTEGRATED 0x1u /* shares memory with the host */
#define TL_DEVICE_FLAG_SOFTWARE 0x2u   /* a CPU implementation of a GPU API (lavapipe) */
#define TL_DEVICE_FLAG_CAN_LAUNCH 0x4u /* this runtime version can launch on it */

typedef struct tl_device_info_t {
  uint32_t struct_size; /* sizeof(tl_device_info_t), set by the caller */
  uint32_t backend;     /* tl_backend_t */
  uint32_t ordinal;     /* index among the devices of its backend */
  uint32_t flags;       /* TL_DEVICE_FLAG_* */
  char name[128];       /* "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)" */
  /* What variants are matched against: "sm_90", "gfx942:sramecc+:xnack-",
   * "x86-64-v3", "spirv1.6". */
  char arch[64];
  uint64_t memory_bytes;   /* device memory; host memory for the CPU */
  uint32_t driver_version; /* CUDA driver API version (13000), Vulkan apiVersion, 0 for CPU */
  uint32_t compute_units;  /* SMs, CUs, CPU threads of the task arena */
} tl_device_info_t;

TL_API size_t tl_runtime_device_count(tl_runtime_t* runtime);
/* A new reference to device `index` (0 <= index < count), in backend order
 * CUDA, HIP, Vulkan, CPU. */
TL_API tl_status_t tl_runtime_device_at(tl_runtime_t* runtime, size_t index, tl_device_t** out_device);
/* `spec` as for TL_DEVICE ("cpu", "cuda:1", "2"); NULL: TL_DEVICE if set,
 * else the best device (a GPU the runtime can launch on before the CPU). */
TL_API tl_status_t tl_runtime_default_device(tl_runtime_t* runtime, const char* spec, tl_device_t** out_device);
TL_API void tl_device_retain(tl_device_t* device);
TL_API void tl_device_release(tl_device_t* device);
TL_API tl_status_t tl_device_info(tl_device_t* device, tl_device_info_t* out_info);
/* The probed description that selection runs on, as JSON (the format of the
 * selection goldens in tests/runtime/goldens/). Valid while `device` lives. */
TL_API const char* tl_device_describe(tl_device_t* device);

/*===----------------------------------------------------------------------===*/
/* Bundles and kernels                                                        */
/*===----------------------------------------------------------------------===*/

/* Called exactly once when the runtime no longer reads `data`: when the last
 * reference to the bundle goes, or before tl_bundle_open_memory returns
 * failure. May be called from any thread. */
typedef void (*tl_release_fn_t)(void* user, const void* data, size_t size);

/* Opens a bundle file (read fully into runtime-owned memory). The header,
 * manifest checksum, flatbuffer and manifest semantics are verified here;
 * payloads are verified when first used (or by tl_bundle_verify). */
TL_API tl_status_t tl_bundle_open_file(tl_runtime_t* runtime, const char* path, tl_bundle_t** out_bundle);
/* Opens an installed bundle by name (e.g. "tilelang-std"): the first regular file
 * NAME.tlb, then NAME, in each directory of $TILELANG_KERNEL_PATH (colon-separated,
 * in order), then in <prefix>/share/tilelang: the nearest ancestor of this
 * library's directory holding share/tilelang (the library is in <prefix>/<libdir>,
 * or in the Python package below it; `cmake --install` puts the standard library
 * there). A name containing '/' is opened as a path. NOT_FOUND lists every path
 * looked at. Otherwise as tl_bundle_open_file. Thread-safe. */
TL_API tl_status_t tl_bundle_open_by_name(tl_runtime_t* runtime, const char* name, tl_bundle_t** out_bundle);
/* Opens a bundle from memory. `release` NULL: the bytes are copied and the
 * caller may free them on return. `release` non-NULL: the bytes are borrowed,
 * must stay valid and unchanged until `release` is called. */
TL_API tl_status_t tl_bundle_open_memory(tl_runtime_t* runtime, const void* data, size_t size,
                                         tl_release_fn_t release, void* release_user,
                                         tl_bundle_t** out_bundle);
/* Reads and checks every payload (CRCs, decompression, sizes). */
TL_API tl_status_t tl_bundle_verify(tl_bundle_t* bundle);
TL_API void tl_bundle_retain(tl_bundle_t* bundle);
TL_API void tl_bundle_release(tl_bundle_t* bundle);
TL_API size_t tl_bundle_kernel_count(tl_bundle_t* bundle);
/* New references to kernels; kernels are sorted by name. */
TL_API tl_status_t tl_bundle_kernel_at(tl_bundle_t* bundle, size_t index, tl_kernel_t** out_kernel);
/* NOT_FOUND names the kernel and lists the bundle's kernels. */
TL_API tl_status_t tl_bundle_find_kernel(tl_bundle_t* bundle, const char* name, tl_kernel_t** out_kernel);

/* A kernel reference keeps its bundle alive. */
TL_API void tl_kernel_retain(tl_kernel_t* kernel);
TL_API void tl_kernel_release(tl_kernel_t* kernel);
TL_API const char* tl_kernel_name(tl_kernel_t* kernel);
/* A kernel attribute from the manifest ("out_idx", ...); NULL when absent. */
TL_API const char* tl_kernel_attr(tl_kernel_t* kernel, const char* key);

TL_API size_t tl_kernel_param_count(tl_kernel_t* kernel);
typedef struct tl_param_info_t {
  uint32_t struct_size;  /* sizeof(tl_param_info_t), set by the caller */
  uint32_t kind;         /* tl_param_kind_t */
  const char* name;
  tl_dtype_t dtype;
  uint32_t access;       /* tl_access_t */
  int32_t rank;          /* buffers: number of dims; scalars: 0 */
  uint32_t ptr_alignment; /* bytes */
  int32_t binds_symbol;  /* scalars: symbol index this value must equal; -1 */
} tl_param_info_t;
TL_API tl_status_t tl_kernel_param_info(tl_kernel_t* kernel, size_t index, tl_param_info_t* out_info);

typedef struct tl_dim_info_t {
  uint32_t struct_size;  /* sizeof(tl_dim_info_t), set by the caller */
  int32_t symbol;        /* >= 0: index of the shape symbol; -1: none */
  int64_t static_size;   /* >= 0: the dimension must equal this; -1: dynamic */
  const char* symbol_name; /* NULL when symbol < 0 */
  uint32_t divisible_by;
  uint32_t reserved;
} tl_dim_info_t;
TL_API tl_status_t tl_kernel_param_dim(tl_kernel_t* kernel, size_t param_index, size_t dim_index,
                                       tl_dim_info_t* out_info);
TL_API size_t tl_kernel_symbol_count(tl_kernel_t* kernel);
/* NULL when out of range. */
TL_API const char* tl_kernel_symbol_name(tl_kernel_t* kernel, size_t index);

TL_API size_t tl_kernel_variant_count(tl_kernel_t* kernel);
typedef struct tl_variant_info_t {
  uint32_t struct_size;  /* sizeof(tl_variant_info_t), set by the caller */
  uint32_t backend;      /* tl_backend_t */
  uint32_t code_kind;    /* tl_code_kind_t */
  int32_t priority;
  const char* id;        /* "cpu.x86-64-v3" */
  const char* arch;      /* requirement: "sm_90a", "x86-64-v3" */
  const char* entry_point;
  uint32_t block[3];
  uint32_t jit;          /* prepared kernels: 1 when the driver compiles it (PTX) */
  uint64_t shared_bytes; /* static + dynamic shared memory (GPU) or per-thread scratch (CPU) */
} tl_variant_info_t;
TL_API tl_status_t tl_kernel_variant_info(tl_kernel_t* kernel, size_t index, tl_variant_info_t* out_info);

/*===----------------------------------------------------------------------===*/
/* Prepared kernels: kernel x device -> chosen variant, code loaded           */
/*===----------------------------------------------------------------------===*/

/* Selects the variant for `device` and loads its code once. Concurrent and
 * repeated calls with the same (kernel, device) return the same object while
 * it lives (one thread loads, the others wait). On failure to find a usable
 * variant: INCOMPATIBLE, with every variant and its rejection reason in the
 * message. `flags`: reserved, 0. */
TL_API tl_status_t tl_kernel_prepare(tl_kernel_t* kernel, tl_device_t* device, uint32_t flags,
                                     tl_prepared_t** out_prepared);
TL_API void tl_prepared_retain(tl_prepared_t* prepared);
TL_API void tl_prepared_release(tl_prepared_t* prepared);
/* The variant chosen before argument guards (launch may fall to the next
 * ranked variant whose guards hold). */
TL_API tl_status_t tl_prepared_variant_info(tl_prepared_t* prepared, tl_variant_info_t* out_info);
/* Multi-line text: the device description, the ranked candidates and why,
 * every rejected variant and why. Valid while `prepared` lives. */
TL_API const char* tl_prepared_explain(tl_prepared_t* prepared);

/*===----------------------------------------------------------------------===*/
/* Buffers                                                                    */
/*===----------------------------------------------------------------------===*/

/* Device memory, 256-byte aligned. On the CPU device: host memory from the
 * runtime's host allocator. */
TL_API tl_status_t tl_buffer_allocate(tl_device_t* device, size_t size, tl_buffer_t** out_buffer);
/* Wraps memory the caller owns (a CUdeviceptr, a host pointer for the CPU).
 * `release` (may be NULL) is called once when the buffer is destroyed. */
TL_API tl_status_t tl_buffer_import(tl_device_t* device, void* device_pointer, size_t size,
                                    tl_release_fn_t release, void* release_user, tl_buffer_t** out_buffer);
TL_API void tl_buffer_retain(tl_buffer_t* buffer);
TL_API void tl_buffer_release(tl_buffer_t* buffer);
TL_API size_t tl_buffer_size(tl_buffer_t* buffer);
/* The pointer kernels receive (tl_tensor_t.data). */
TL_API void* tl_buffer_device_pointer(tl_buffer_t* buffer);
/* Copies; `stream` NULL: synchronous. With a stream the copy is ordered
 * after the stream's earlier work and the host memory must stay valid until
 * the stream is synchronized. Ranges are checked: OUT_OF_RANGE names offset,
 * size and buffer size. */
TL_API tl_status_t tl_buffer_copy_from_host(tl_buffer_t* buffer, size_t offset, const void* source, size_t size,
                                            tl_stream_t* stream);
TL_API tl_status_t tl_buffer_copy_to_host(tl_buffer_t* buffer, size_t offset, void* destination, size_t size,
                                          tl_stream_t* stream);

/*===----------------------------------------------------------------------===*/
/* Streams                                                                    */
/*===----------------------------------------------------------------------===*/

/* An in-order queue of work on one device. On the CPU, a stream runs its
 * work on a runtime thread that feeds the device's task arena. `flags`: 0. */
TL_API tl_status_t tl_stream_create(tl_device_t* device, uint32_t flags, tl_stream_t** out_stream);
/* Wraps a native queue the caller owns and keeps alive: CUstream (CUDA),
 * hipStream_t (HIP), a tbb::task_arena* (CPU: launches run synchronously in
 * that arena). */
TL_API tl_status_t tl_stream_wrap_native(tl_device_t* device, void* native_stream, tl_stream_t** out_stream);
/* Waits until all work queued so far is done. DEADLINE_EXCEEDED when it
 * takes longer than `timeout_ns` (UINT64_MAX: no limit). Returns the first
 * failure of queued work (and clears it). */
TL_API tl_status_t tl_stream_synchronize(tl_stream_t* stream, uint64_t timeout_ns);
TL_API void tl_stream_retain(tl_stream_t* stream);
/* The last release waits for queued work to finish. */
TL_API void tl_stream_release(tl_stream_t* stream);

/*===----------------------------------------------------------------------===*/
/* Launch                                                                     */
/*===----------------------------------------------------------------------===*/

typedef enum tl_arg_kind_e { TL_ARG_TENSOR = 0, TL_ARG_SCALAR = 1 } tl_arg_kind_t;

typedef struct tl_tensor_t {
  void* data;            /* base pointer: host memory (CPU) or device address */
  int32_t rank;
  uint32_t reserved;
  const int64_t* shape;  /* rank extents */
  const int64_t* strides; /* rank strides in elements; NULL: dense row-major */
} tl_tensor_t;

/* One launch argument. Scalars are stored in their own dtype at the start of
 * `value` (int32 in value.i32, float in value.f32, ...), with scalar_size
 * their byte size. */
typedef struct tl_arg_t {
  uint32_t kind;         /* tl_arg_kind_t */
  tl_dtype_t dtype;      /* tensor element type or scalar type */
  uint32_t scalar_size;  /* scalars: bytes (1, 2, 4, 8) */
  uint32_t reserved;
  tl_tensor_t tensor;    /* TL_ARG_TENSOR */
  union {
    int64_t i64;
    uint64_t u64;
    double f64;
    int32_t i32;
    uint32_t u32;
    float f32;
    uint8_t bytes[8];
  } value;               /* TL_ARG_SCALAR */
} tl_arg_t;

typedef struct tl_launch_options_t {
  uint32_t struct_size;  /* sizeof(tl_launch_options_t) */
  uint32_t grid[3];      /* {0,0,0}: evaluate the bundle's grid expressions; else a 0 reads as 1 */
  uint32_t flags;        /* reserved, 0 */
} tl_launch_options_t;

/* Validates the arguments against the kernel's signature (count, kind, dtype,
 * scalar size, rank, static dims, one value per shape symbol, divisibility,
 * alignment, contiguity) and the launch against the device's limits (grid,
 * block, shared memory), picks the first ranked variant whose argument guards
 * hold, and runs it. INVALID_ARGUMENT messages name the kernel, the argument
 * index and name, and the numbers: "kernel 'gemm' argument 2 'C': dim 1 is
 * 100, expected 128". `stream` NULL: synchronous (returns when done).
 * `options` NULL: defaults. Argument arrays are copied; the memory they point
 * to must stay valid until the work is done. A grid expression that evaluates
 * to 0 (an empty problem) launches nothing and succeeds. */
TL_API tl_status_t tl_launch(tl_prepared_t* prepared, tl_stream_t* stream, size_t arg_count, const tl_arg_t* args,
                             const tl_launch_options_t* options);

/* Helpers to fill tl_arg_t (header-only). */
static inline tl_arg_t tl_arg_tensor(void* data, tl_dtype_t dtype, int32_t rank, const int64_t* shape,
                                     const int64_t* strides) {
  tl_arg_t arg;
  size_t i;
  for (i = 0; i < sizeof(arg); ++i) ((unsigned char*)&arg)[i] = 0;
  arg.kind = TL_ARG_TENSOR;
  arg.dtype = dtype;
  arg.tensor.data = data;
  arg.tensor.rank = rank;
  arg.tensor.shape = shape;
  arg.tensor.strides = strides;
  return arg;
}
static inline tl_dtype_t tl_dtype(uint8_t code, uint8_t bits) {
  tl_dtype_t dtype;
  dtype.code = code;
  dtype.bits = bits;
  dtype.lanes = 1;
  return dtype;
}
static inline tl_arg_t tl_arg_scalar_bits(tl_dtype_t dtype, uint32_t size, uint64_t bits) {
  tl_arg_t arg;
  size_t i;
  for (i = 0; i < sizeof(arg); ++i) ((unsigned char*)&arg)[i] = 0;
  arg.kind = TL_ARG_SCALAR;
  arg.dtype = dtype;
  arg.scalar_size = size;
  arg.value.u64 = bits;
  return arg;
}
static inline tl_arg_t tl_arg_i32(int32_t v) {
  tl_arg_t arg = tl_arg_scalar_bits(tl_dtype(TL_DTYPE_INT, 32), 4, 0);
  arg.value.i32 = v;
  return arg;
}
static inline tl_arg_t tl_arg_i64(int64_t v) {
  tl_arg_t arg = tl_arg_scalar_bits(tl_dtype(TL_DTYPE_INT, 64), 8, 0);
  arg.value.i64 = v;
  return arg;
}
static inline tl_arg_t tl_arg_f32(float v) {
  tl_arg_t arg = tl_arg_scalar_bits(tl_dtype(TL_DTYPE_FLOAT, 32), 4, 0);
  arg.value.f32 = v;
  return arg;
}
static inline tl_arg_t tl_arg_f64(double v) {
  tl_arg_t arg = tl_arg_scalar_bits(tl_dtype(TL_DTYPE_FLOAT, 64), 8, 0);
  arg.value.f64 = v;
  return arg;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TILELANG_RUNTIME_H_ */
