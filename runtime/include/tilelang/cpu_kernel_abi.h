/* The CPU kernel ABI: the contract between the compiler's x86-64 backend and
 * the runtime's CPU backend. Versioned like a schema: fields are only
 * appended, a breaking change bumps TL_CPU_ABI_VERSION_MAJOR.
 *
 * A CPU payload is a self-contained ELF shared object (one per ISA level:
 * x86-64-v2, v3, v4) that depends on nothing beyond libc and libm and exports
 * exactly one symbol, `tl_cpu_library_query`. The runtime calls it once after
 * loading and receives a read-only table of kernels; each kernel is a block
 * function run once per block of the grid. Blocks of one launch may run
 * concurrently on different threads and in any order; a block function must
 * not keep state between calls other than through its arguments.
 *
 * The compiler never simulates GPU threads: a block function computes the
 * whole tile of one block, with T.Parallel loops as (vectorized) loop nests.
 *
 * Pure C, no dependencies: included by generated kernels and by the runtime.
 */
#ifndef TILELANG_CPU_KERNEL_ABI_H_
#define TILELANG_CPU_KERNEL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TL_CPU_ABI_VERSION_MAJOR 1u
#define TL_CPU_ABI_VERSION_MINOR 0u
#define TL_CPU_ABI_VERSION ((TL_CPU_ABI_VERSION_MAJOR << 16) | TL_CPU_ABI_VERSION_MINOR)

/* What one block call receives. The runtime builds one per launch and shares
 * it (read-only) between all block calls of that launch. */
typedef struct tl_cpu_dispatch_t {
  uint32_t grid[3];          /* number of blocks along x, y, z */
  uint32_t arg_count;        /* == the kernel's parameter count */
  /* One entry per kernel parameter, in signature order:
   *  buffers: args[i] is the base pointer (void*) of a dense row-major tensor;
   *  scalars: args[i] points at the scalar value, stored with its own dtype. */
  void* const* args;
  /* Actual extents of every shape symbol, in Kernel.symbols order. */
  const int64_t* symbols;
  uint32_t symbol_count;
  uint32_t reserved;
} tl_cpu_dispatch_t;

/* Per-call block state. */
typedef struct tl_cpu_block_t {
  uint32_t block[3];         /* this block's index along x, y, z */
  uint32_t worker;           /* index of the worker thread running the call */
  void* scratch;             /* per-worker scratch, 64-byte aligned */
  size_t scratch_bytes;      /* >= the kernel's scratch_bytes */
} tl_cpu_block_t;

/* Returns 0 on success; nonzero is reported as a launch failure naming the
 * kernel, the block index and the value. */
typedef int (*tl_cpu_block_fn_t)(const tl_cpu_dispatch_t* dispatch, const tl_cpu_block_t* block);

typedef struct tl_cpu_kernel_t {
  const char* name;          /* the bundle's Variant.entry_point */
  tl_cpu_block_fn_t fn;
  size_t scratch_bytes;      /* per-worker scratch the block function needs */
  uint32_t param_count;
  uint32_t reserved;
} tl_cpu_kernel_t;

typedef struct tl_cpu_library_t {
  uint32_t abi_version;      /* TL_CPU_ABI_VERSION the library was built for */
  uint32_t kernel_count;
  const tl_cpu_kernel_t* kernels;
  const char* isa_level;     /* "x86-64-v2" | "x86-64-v3" | "x86-64-v4" */
} tl_cpu_library_t;

/* The one exported symbol. `max_abi_version` is the newest version the runtime
 * understands; a library returns NULL when it cannot serve that version. */
typedef const tl_cpu_library_t* (*tl_cpu_library_query_fn_t)(uint32_t max_abi_version);
#define TL_CPU_LIBRARY_QUERY_SYMBOL "tl_cpu_library_query"

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TILELANG_CPU_KERNEL_ABI_H_ */
