// Package tilelang is the Go binding of the TileLang runtime C ABI
// (tilelang/runtime.h): open a .tlb bundle, pick a device, prepare a kernel
// (the runtime selects the variant and can explain why) and launch it on Go
// slices or device buffers.
//
// The package links libtilelang_runtime through pkg-config
// (`#cgo pkg-config: tilelang-runtime`). Point PKG_CONFIG_PATH at an install
// prefix's lib/pkgconfig, or at <build>/lib/pkgconfig for a build tree (that
// file also adds an rpath to <build>/lib). At run time an installed library
// must be on the loader's path (LD_LIBRARY_PATH=<prefix>/lib or ldconfig).
//
// Every handle type has an explicit Close, which is idempotent; a finalizer
// calls it for values that become unreachable without one. Handles may be
// closed in any order: the runtime keeps what a handle needs alive.
//
// Concurrency follows the header: Runtime, Device, Bundle, Kernel, Prepared
// and Buffer are safe for concurrent use by many goroutines (Close excepted);
// a Stream must not be used by two goroutines at once.
//
// Tensors over Go slices: on the CPU device a synchronous launch passes up to
// eight slices in place (each pointer is a direct cgo argument, so the cgo
// pointer rules hold: C uses it only during the call). Elsewhere (GPUs, or
// more slices) they are staged through temporary device buffers around the
// launch: one copy in, and one copy out for parameters the kernel writes.
// Buffer tensors never copy, and are the only tensors a Stream accepts (Go
// memory cannot be handed to C beyond a call).
package tilelang
