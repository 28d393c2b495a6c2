package tilelang

/*
#cgo pkg-config: tilelang-runtime
#include <stdlib.h>
#include <string.h>
#include <tilelang/runtime.h>

static void tlgo_set_scalar(tl_arg_t* a, uint64_t bits) { memcpy(a->value.bytes, &bits, 8); }

extern void tlgoLog(void* user, int level, char* message, size_t length);
static void tlgo_log_shim(void* user, tl_log_level_t level, const char* message, size_t length) {
  tlgoLog(user, (int)level, (char*)message, length);
}
static void tlgo_set_log(tl_runtime_options_t* o, void* user) { o->log = tlgo_log_shim; o->log_user = user; }

// A synchronous launch on Go memory without copies: each Go pointer is a
// direct cgo argument (pinned for this call only), written into the C argument
// array here and used by the runtime only until tl_launch returns.
static tl_status_t tlgo_launch_host(tl_prepared_t* prepared, size_t n, tl_arg_t* args,
                                    const tl_launch_options_t* options, const int* slots,
                                    void* p0, void* p1, void* p2, void* p3,
                                    void* p4, void* p5, void* p6, void* p7) {
  void* ptrs[8] = {p0, p1, p2, p3, p4, p5, p6, p7};
  for (int i = 0; i < 8; ++i) {
    if (slots[i] >= 0) args[slots[i]].tensor.data = ptrs[i];
  }
  tl_status_t s = tl_launch(prepared, NULL, n, args, options);
  for (int i = 0; i < 8; ++i) {
    if (slots[i] >= 0) args[slots[i]].tensor.data = NULL;
  }
  return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Code is a runtime status code (tl_status_code_t).
type Code int

const (
	OK                 Code = C.TL_STATUS_OK
	Cancelled          Code = C.TL_STATUS_CANCELLED
	Unknown            Code = C.TL_STATUS_UNKNOWN
	InvalidArgument    Code = C.TL_STATUS_INVALID_ARGUMENT
	DeadlineExceeded   Code = C.TL_STATUS_DEADLINE_EXCEEDED
	NotFound           Code = C.TL_STATUS_NOT_FOUND
	AlreadyExists      Code = C.TL_STATUS_ALREADY_EXISTS
	PermissionDenied   Code = C.TL_STATUS_PERMISSION_DENIED
	ResourceExhausted  Code = C.TL_STATUS_RESOURCE_EXHAUSTED
	FailedPrecondition Code = C.TL_STATUS_FAILED_PRECONDITION
	Aborted            Code = C.TL_STATUS_ABORTED
	OutOfRange         Code = C.TL_STATUS_OUT_OF_RANGE
	Unimplemented      Code = C.TL_STATUS_UNIMPLEMENTED
	Internal           Code = C.TL_STATUS_INTERNAL
	Unavailable        Code = C.TL_STATUS_UNAVAILABLE
	DataLoss           Code = C.TL_STATUS_DATA_LOSS
	Incompatible       Code = C.TL_STATUS_INCOMPATIBLE
)

// String is the runtime's name of the code ("INVALID_ARGUMENT").
func (c Code) String() string {
	return C.GoString(C.tl_status_code_name(C.tl_status_code_t(c)))
}

// Error is a failed runtime call: its status code and message. Checks this
// package makes before calling the runtime report InvalidArgument the same way.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// Is makes errors.Is(err, tilelang.ErrNotFound) match any error of that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument    = &Error{Code: InvalidArgument}
	ErrNotFound           = &Error{Code: NotFound}
	ErrOutOfRange         = &Error{Code: OutOfRange}
	ErrFailedPrecondition = &Error{Code: FailedPrecondition}
	ErrUnavailable        = &Error{Code: Unavailable}
	ErrDataLoss           = &Error{Code: DataLoss}
	ErrIncompatible       = &Error{Code: Incompatible}
	ErrDeadlineExceeded   = &Error{Code: DeadlineExceeded}
	ErrInternal           = &Error{Code: Internal}
	ErrClosed             = errors.New("tilelang: use of a closed handle")
)

// CodeOf returns the code of a *Error (OK for nil, Unknown for other errors).
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Unknown
}

func check(s C.tl_status_t) error {
	if s == nil {
		return nil
	}
	e := &Error{Code: Code(C.tl_status_code(s)), Message: C.GoString(C.tl_status_message(s))}
	C.tl_status_free(s)
	return e
}

func invalid(format string, args ...any) error {
	return &Error{Code: InvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// ABIVersion is (major << 16) | minor of the loaded library's ABI.
func ABIVersion() uint32 { return uint32(C.tl_abi_version()) }

// HeaderABIVersion is the ABI this package was compiled against.
const HeaderABIVersion = uint32(C.TL_ABI_VERSION_MAJOR<<16 | C.TL_ABI_VERSION_MINOR)

// Version is the library's version string ("0.1.0").
func Version() string { return C.GoString(C.tl_runtime_version_string()) }

// ---------------------------------------------------------------------------
// Enums
// ---------------------------------------------------------------------------

// Backend identifies a runtime backend.
type Backend uint32

const (
	BackendUnknown Backend = C.TL_BACKEND_UNKNOWN
	BackendCUDA    Backend = C.TL_BACKEND_CUDA
	BackendHIP     Backend = C.TL_BACKEND_HIP
	BackendVulkan  Backend = C.TL_BACKEND_VULKAN
	BackendCPU     Backend = C.TL_BACKEND_CPU
)

func (b Backend) String() string {
	switch b {
	case BackendCUDA:
		return "cuda"
	case BackendHIP:
		return "hip"
	case BackendVulkan:
		return "vulkan"
	case BackendCPU:
		return "cpu"
	}
	return "unknown"
}

// Bit is the backend's bit in Options.BackendMask.
func (b Backend) Bit() uint32 { return 1 << uint32(b) }

// DType is an element type (DLPack code, bits, lanes).
type DType struct {
	Code  uint8
	Bits  uint8
	Lanes uint16
}

var (
	Float16  = DType{C.TL_DTYPE_FLOAT, 16, 1}
	BFloat16 = DType{C.TL_DTYPE_BFLOAT, 16, 1}
	Float32  = DType{C.TL_DTYPE_FLOAT, 32, 1}
	Float64  = DType{C.TL_DTYPE_FLOAT, 64, 1}
	Int8     = DType{C.TL_DTYPE_INT, 8, 1}
	Int16    = DType{C.TL_DTYPE_INT, 16, 1}
	Int32    = DType{C.TL_DTYPE_INT, 32, 1}
	Int64    = DType{C.TL_DTYPE_INT, 64, 1}
	Uint8    = DType{C.TL_DTYPE_UINT, 8, 1}
	Uint16   = DType{C.TL_DTYPE_UINT, 16, 1}
	Uint32   = DType{C.TL_DTYPE_UINT, 32, 1}
	Uint64   = DType{C.TL_DTYPE_UINT, 64, 1}
)

func (d DType) String() string {
	names := map[uint8]string{C.TL_DTYPE_INT: "int", C.TL_DTYPE_UINT: "uint", C.TL_DTYPE_FLOAT: "float", C.TL_DTYPE_BFLOAT: "bfloat", C.TL_DTYPE_BOOL: "bool"}
	s := fmt.Sprintf("%s%d", names[d.Code], d.Bits)
	if d.Lanes > 1 {
		s += fmt.Sprintf("x%d", d.Lanes)
	}
	return s
}

func (d DType) c() C.tl_dtype_t {
	return C.tl_dtype_t{code: C.uint8_t(d.Code), bits: C.uint8_t(d.Bits), lanes: C.uint16_t(d.Lanes)}
}

func dtypeFromC(d C.tl_dtype_t) DType { return DType{uint8(d.code), uint8(d.bits), uint16(d.lanes)} }

// Element is a Go type usable as a tensor element or scalar.
type Element interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

func dtypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	}
	// Named types over a basic type: decide by size and kind.
	size := unsafe.Sizeof(z)
	var probe T = 1
	probe = probe / 2 * 2 // 0 for integers, 1 for floats
	if probe != 0 {
		if size == 4 {
			return Float32
		}
		return Float64
	}
	var neg T
	neg--
	if neg < 0 {
		return DType{C.TL_DTYPE_INT, uint8(size * 8), 1}
	}
	return DType{C.TL_DTYPE_UINT, uint8(size * 8), 1}
}

// ---------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------

// Options configures NewRuntime. The zero value is the default.
type Options struct {
	BackendMask      uint32 // OR of Backend.Bit(); 0 = every backend
	CPUThreadCount   uint32 // 0 = all cores
	DisableJIT       bool   // treat PTX variants as unusable
	IgnoreEnv        bool   // ignore TL_DEVICE, TL_FORCE_VARIANT, TL_DISABLE_JIT
	CPUNoMemfd       bool   // CPU kernels from the cache directory, never a memfd
	DriverSearchPath []string
	CPUCacheDir      string
	// Log receives the runtime's messages up to LogLevel, from any thread.
	// The runtime may log for as long as any of its objects lives, so a sink
	// given to a runtime that was created is kept for the rest of the process.
	Log      func(level LogLevel, message string)
	LogLevel LogLevel
}

// Runtime holds the loaded drivers and the probed devices.
type Runtime struct {
	mu sync.Mutex
	h  *C.tl_runtime_t
}

func (r *Runtime) handle() (*C.tl_runtime_t, error) {
	if r == nil || r.h == nil {
		return nil, ErrClosed
	}
	return r.h, nil
}

// NewRuntime creates a runtime; opts nil means defaults.
func NewRuntime(opts *Options) (*Runtime, error) {
	var o C.tl_runtime_options_t
	C.tl_runtime_options_init(&o)
	var toFree []unsafe.Pointer
	defer func() {
		for _, p := range toFree {
			C.free(p)
		}
	}()
	if opts != nil {
		o.backend_mask = C.uint32_t(opts.BackendMask)
		o.cpu_thread_count = C.uint32_t(opts.CPUThreadCount)
		if opts.DisableJIT {
			o.flags |= C.TL_RUNTIME_FLAG_DISABLE_JIT
		}
		if opts.IgnoreEnv {
			o.flags |= C.TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT
		}
		if opts.CPUNoMemfd {
			o.flags |= C.TL_RUNTIME_FLAG_CPU_NO_MEMFD
		}
		if n := len(opts.DriverSearchPath); n > 0 {
			arr := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0))))
			toFree = append(toFree, arr)
			ptrs := unsafe.Slice((**C.char)(arr), n)
			for i, p := range opts.DriverSearchPath {
				cs := C.CString(p)
				toFree = append(toFree, unsafe.Pointer(cs))
				ptrs[i] = cs
			}
			o.driver_search_paths = (**C.char)(arr)
			o.driver_search_path_count = C.size_t(n)
		}
		if opts.CPUCacheDir != "" {
			cs := C.CString(opts.CPUCacheDir)
			toFree = append(toFree, unsafe.Pointer(cs))
			o.cpu_cache_dir = cs
		}
	}
	var logHandle cgo.Handle
	if opts != nil && opts.Log != nil {
		logHandle = cgo.NewHandle(opts.Log)
		user := C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
		*(*C.uintptr_t)(user) = C.uintptr_t(logHandle)
		C.tlgo_set_log(&o, user)
		o.log_level = C.uint32_t(opts.LogLevel)
	}
	var h *C.tl_runtime_t
	if err := check(C.tl_runtime_create(&o, &h)); err != nil {
		if logHandle != 0 {
			logHandle.Delete()
			C.free(unsafe.Pointer(o.log_user))
		}
		return nil, err
	}
	r := &Runtime{h: h}
	runtime.SetFinalizer(r, (*Runtime).Close)
	return r, nil
}

// Close releases the runtime reference (idempotent). Objects opened from it
// keep the runtime alive until they are closed too.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h != nil {
		C.tl_runtime_release(r.h)
		r.h = nil
		runtime.SetFinalizer(r, nil)
	}
	return nil
}

// BackendStatus is nil when the backend loaded and probed fine, else why not.
func (r *Runtime) BackendStatus(b Backend) error {
	h, err := r.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(r)
	return check(C.tl_runtime_backend_status(h, C.tl_backend_t(b)))
}

// DeviceCount is the number of probed devices.
func (r *Runtime) DeviceCount() int {
	h, err := r.handle()
	if err != nil {
		return 0
	}
	defer runtime.KeepAlive(r)
	return int(C.tl_runtime_device_count(h))
}

// Device returns device i (backend order CUDA, HIP, Vulkan, CPU).
func (r *Runtime) Device(i int) (*Device, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(r)
	if i < 0 {
		return nil, invalid("device index %d is negative", i)
	}
	var d *C.tl_device_t
	if err := check(C.tl_runtime_device_at(h, C.size_t(i), &d)); err != nil {
		return nil, err
	}
	return wrapDevice(d)
}

// Devices returns every device.
func (r *Runtime) Devices() ([]*Device, error) {
	n := r.DeviceCount()
	out := make([]*Device, 0, n)
	for i := 0; i < n; i++ {
		d, err := r.Device(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DefaultDevice picks a device by spec ("cpu", "cuda:1", "2"); "" means
// TL_DEVICE if set, else the best device (a launchable GPU before the CPU).
func (r *Runtime) DefaultDevice(spec string) (*Device, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(r)
	var cs *C.char
	if spec != "" {
		cs = C.CString(spec)
		defer C.free(unsafe.Pointer(cs))
	}
	var d *C.tl_device_t
	if err := check(C.tl_runtime_default_device(h, cs, &d)); err != nil {
		return nil, err
	}
	return wrapDevice(d)
}

// OpenBundle opens a bundle file.
func (r *Runtime) OpenBundle(path string) (*Bundle, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(r)
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var b *C.tl_bundle_t
	if err := check(C.tl_bundle_open_file(h, cs, &b)); err != nil {
		return nil, err
	}
	return wrapBundle(b), nil
}

// OpenBundleByName opens an installed bundle by name ("tilelang-std"): NAME.tlb or
// NAME in each directory of $TILELANG_KERNEL_PATH, then <prefix>/share/tilelang
// (runtime.h, tl_bundle_open_by_name); a name containing '/' is a path.
func (r *Runtime) OpenBundleByName(name string) (*Bundle, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(r)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var b *C.tl_bundle_t
	if err := check(C.tl_bundle_open_by_name(h, cs, &b)); err != nil {
		return nil, err
	}
	return wrapBundle(b), nil
}

// OpenBundleBytes opens a bundle from memory (the runtime copies the bytes).
func (r *Runtime) OpenBundleBytes(data []byte) (*Bundle, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(r)
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	var b *C.tl_bundle_t
	if err := check(C.tl_bundle_open_memory(h, p, C.size_t(len(data)), nil, nil, &b)); err != nil {
		return nil, err
	}
	return wrapBundle(b), nil
}

// ---------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------

// Device flags (DeviceInfo.Flags).
const (
	DeviceIntegrated = C.TL_DEVICE_FLAG_INTEGRATED
	DeviceSoftware   = C.TL_DEVICE_FLAG_SOFTWARE
	DeviceCanLaunch  = C.TL_DEVICE_FLAG_CAN_LAUNCH
)

// DeviceInfo describes a device.
type DeviceInfo struct {
	Backend       Backend
	Ordinal       uint32
	Flags         uint32
	Name          string
	Arch          string // what variants are matched against: "sm_90", "x86-64-v3"
	MemoryBytes   uint64
	DriverVersion uint32
	ComputeUnits  uint32
}

// CanLaunch reports whether this runtime can launch kernels on the device.
func (i DeviceInfo) CanLaunch() bool { return i.Flags&DeviceCanLaunch != 0 }

// Device is one GPU or the CPU.
type Device struct {
	mu   sync.Mutex
	h    *C.tl_device_t
	info DeviceInfo
}

func wrapDevice(h *C.tl_device_t) (*Device, error) {
	d := &Device{h: h}
	runtime.SetFinalizer(d, (*Device).Close)
	var ci C.tl_device_info_t
	ci.struct_size = C.uint32_t(unsafe.Sizeof(ci))
	if err := check(C.tl_device_info(h, &ci)); err != nil {
		d.Close()
		return nil, err
	}
	d.info = DeviceInfo{
		Backend:       Backend(ci.backend),
		Ordinal:       uint32(ci.ordinal),
		Flags:         uint32(ci.flags),
		Name:          C.GoString(&ci.name[0]),
		Arch:          C.GoString(&ci.arch[0]),
		MemoryBytes:   uint64(ci.memory_bytes),
		DriverVersion: uint32(ci.driver_version),
		ComputeUnits:  uint32(ci.compute_units),
	}
	return d, nil
}

func (d *Device) handle() (*C.tl_device_t, error) {
	if d == nil || d.h == nil {
		return nil, ErrClosed
	}
	return d.h, nil
}

// Close releases the device reference (idempotent).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.h != nil {
		C.tl_device_release(d.h)
		d.h = nil
		runtime.SetFinalizer(d, nil)
	}
	return nil
}

// Info is the device's description (read once, when the Device was made).
func (d *Device) Info() DeviceInfo { return d.info }

func (d *Device) String() string {
	return fmt.Sprintf("%s:%d %q (%s)", d.info.Backend, d.info.Ordinal, d.info.Name, d.info.Arch)
}

// Describe is the probed description selection runs on (JSON).
func (d *Device) Describe() string {
	h, err := d.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(d)
	return C.GoString(C.tl_device_describe(h))
}

// Allocate allocates size bytes of device memory.
func (d *Device) Allocate(size int) (*Buffer, error) {
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(d)
	if size < 0 {
		return nil, invalid("buffer size %d is negative", size)
	}
	var b *C.tl_buffer_t
	if err := check(C.tl_buffer_allocate(h, C.size_t(size), &b)); err != nil {
		return nil, err
	}
	buf := &Buffer{h: b, backend: d.info.Backend, ordinal: d.info.Ordinal}
	runtime.SetFinalizer(buf, (*Buffer).Close)
	return buf, nil
}

// Upload allocates a buffer on d holding a copy of data.
func Upload[T Element](d *Device, data []T) (*Buffer, error) {
	var z T
	b, err := d.Allocate(len(data) * int(unsafe.Sizeof(z)))
	if err != nil {
		return nil, err
	}
	if err := CopyFromHost(b, 0, data); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// NewStream creates an in-order work queue on the device.
func (d *Device) NewStream() (*Stream, error) {
	h, err := d.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(d)
	var s *C.tl_stream_t
	if err := check(C.tl_stream_create(h, 0, &s)); err != nil {
		return nil, err
	}
	st := &Stream{h: s, backend: d.info.Backend, ordinal: d.info.Ordinal}
	runtime.SetFinalizer(st, (*Stream).Close)
	return st, nil
}

// ---------------------------------------------------------------------------
// Bundle and Kernel
// ---------------------------------------------------------------------------

// Bundle is an opened .tlb file.
type Bundle struct {
	mu sync.Mutex
	h  *C.tl_bundle_t
}

func wrapBundle(h *C.tl_bundle_t) *Bundle {
	b := &Bundle{h: h}
	runtime.SetFinalizer(b, (*Bundle).Close)
	return b
}

func (b *Bundle) handle() (*C.tl_bundle_t, error) {
	if b == nil || b.h == nil {
		return nil, ErrClosed
	}
	return b.h, nil
}

// Close releases the bundle reference (idempotent).
func (b *Bundle) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.h != nil {
		C.tl_bundle_release(b.h)
		b.h = nil
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

// Verify reads and checks every payload.
func (b *Bundle) Verify() error {
	h, err := b.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(b)
	return check(C.tl_bundle_verify(h))
}

// Kernels returns every kernel, sorted by name.
func (b *Bundle) Kernels() ([]*Kernel, error) {
	h, err := b.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(b)
	n := int(C.tl_bundle_kernel_count(h))
	out := make([]*Kernel, 0, n)
	for i := 0; i < n; i++ {
		var k *C.tl_kernel_t
		if err := check(C.tl_bundle_kernel_at(h, C.size_t(i), &k)); err != nil {
			return nil, err
		}
		out = append(out, wrapKernel(k))
	}
	return out, nil
}

// Kernel finds a kernel by name; NotFound lists the bundle's kernels.
func (b *Bundle) Kernel(name string) (*Kernel, error) {
	h, err := b.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(b)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var k *C.tl_kernel_t
	if err := check(C.tl_bundle_find_kernel(h, cs, &k)); err != nil {
		return nil, err
	}
	return wrapKernel(k), nil
}

// Access of a parameter.
type Access uint32

const (
	AccessNone      Access = C.TL_ACCESS_NONE
	AccessRead      Access = C.TL_ACCESS_READ
	AccessWrite     Access = C.TL_ACCESS_WRITE
	AccessReadWrite Access = C.TL_ACCESS_READ_WRITE
)

// Writes reports whether the kernel may write the parameter.
func (a Access) Writes() bool { return a == AccessWrite || a == AccessReadWrite }

// Dim is one dimension of a buffer parameter.
type Dim struct {
	StaticSize  int64  // >= 0: must equal; -1: dynamic
	Symbol      int    // shape symbol index, -1: none
	SymbolName  string // "" when none
	DivisibleBy uint32
}

// Param is one kernel parameter.
type Param struct {
	Scalar       bool
	Name         string
	DType        DType
	Access       Access
	PtrAlignment uint32
	BindsSymbol  int // scalars: symbol index this value must equal; -1
	Dims         []Dim
}

// Variant describes one variant of a kernel.
type Variant struct {
	Backend     Backend
	CodeKind    uint32
	Priority    int32
	ID          string
	Arch        string
	EntryPoint  string
	Block       [3]uint32
	JIT         bool
	SharedBytes uint64
}

// Kernel is one kernel of a bundle.
type Kernel struct {
	mu sync.Mutex
	h  *C.tl_kernel_t
}

func wrapKernel(h *C.tl_kernel_t) *Kernel {
	k := &Kernel{h: h}
	runtime.SetFinalizer(k, (*Kernel).Close)
	return k
}

func (k *Kernel) handle() (*C.tl_kernel_t, error) {
	if k == nil || k.h == nil {
		return nil, ErrClosed
	}
	return k.h, nil
}

// Close releases the kernel reference (idempotent).
func (k *Kernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.h != nil {
		C.tl_kernel_release(k.h)
		k.h = nil
		runtime.SetFinalizer(k, nil)
	}
	return nil
}

// Name is the kernel's name.
func (k *Kernel) Name() string {
	h, err := k.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(k)
	return C.GoString(C.tl_kernel_name(h))
}

// Attr returns a manifest attribute ("out_idx") and whether it exists.
func (k *Kernel) Attr(key string) (string, bool) {
	h, err := k.handle()
	if err != nil {
		return "", false
	}
	defer runtime.KeepAlive(k)
	cs := C.CString(key)
	defer C.free(unsafe.Pointer(cs))
	v := C.tl_kernel_attr(h, cs)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}

// Symbols returns the shape symbol names.
func (k *Kernel) Symbols() []string {
	h, err := k.handle()
	if err != nil {
		return nil
	}
	defer runtime.KeepAlive(k)
	n := int(C.tl_kernel_symbol_count(h))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.tl_kernel_symbol_name(h, C.size_t(i)))
	}
	return out
}

// Params returns the kernel's signature.
func (k *Kernel) Params() ([]Param, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(k)
	n := int(C.tl_kernel_param_count(h))
	out := make([]Param, n)
	for i := 0; i < n; i++ {
		var p C.tl_param_info_t
		p.struct_size = C.uint32_t(unsafe.Sizeof(p))
		if err := check(C.tl_kernel_param_info(h, C.size_t(i), &p)); err != nil {
			return nil, err
		}
		par := Param{
			Scalar:       p.kind == C.TL_PARAM_SCALAR,
			Name:         C.GoString(p.name),
			DType:        dtypeFromC(p.dtype),
			Access:       Access(p.access),
			PtrAlignment: uint32(p.ptr_alignment),
			BindsSymbol:  int(p.binds_symbol),
		}
		for d := 0; d < int(p.rank); d++ {
			var di C.tl_dim_info_t
			di.struct_size = C.uint32_t(unsafe.Sizeof(di))
			if err := check(C.tl_kernel_param_dim(h, C.size_t(i), C.size_t(d), &di)); err != nil {
				return nil, err
			}
			dim := Dim{StaticSize: int64(di.static_size), Symbol: int(di.symbol), DivisibleBy: uint32(di.divisible_by)}
			if di.symbol_name != nil {
				dim.SymbolName = C.GoString(di.symbol_name)
			}
			par.Dims = append(par.Dims, dim)
		}
		out[i] = par
	}
	return out, nil
}

func variantFromC(v *C.tl_variant_info_t) Variant {
	return Variant{
		Backend:     Backend(v.backend),
		CodeKind:    uint32(v.code_kind),
		Priority:    int32(v.priority),
		ID:          C.GoString(v.id),
		Arch:        C.GoString(v.arch),
		EntryPoint:  C.GoString(v.entry_point),
		Block:       [3]uint32{uint32(v.block[0]), uint32(v.block[1]), uint32(v.block[2])},
		JIT:         v.jit != 0,
		SharedBytes: uint64(v.shared_bytes),
	}
}

// Variants lists the kernel's variants.
func (k *Kernel) Variants() ([]Variant, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(k)
	n := int(C.tl_kernel_variant_count(h))
	out := make([]Variant, n)
	for i := range out {
		var v C.tl_variant_info_t
		v.struct_size = C.uint32_t(unsafe.Sizeof(v))
		if err := check(C.tl_kernel_variant_info(h, C.size_t(i), &v)); err != nil {
			return nil, err
		}
		out[i] = variantFromC(&v)
	}
	return out, nil
}

// Prepare selects the variant for the device and loads its code.
// Incompatible lists every variant and why it was rejected.
func (k *Kernel) Prepare(d *Device) (*Prepared, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	dh, err := d.handle()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(k)
	defer runtime.KeepAlive(d)
	params, err := k.Params()
	if err != nil {
		return nil, err
	}
	var p *C.tl_prepared_t
	if err := check(C.tl_kernel_prepare(h, dh, 0, &p)); err != nil {
		return nil, err
	}
	C.tl_device_retain(dh)
	pr := &Prepared{h: p, dev: dh, info: d.info, name: C.GoString(C.tl_kernel_name(h)), params: params}
	runtime.SetFinalizer(pr, (*Prepared).Close)
	return pr, nil
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

// Buffer is device memory (host memory on the CPU device).
type Buffer struct {
	mu      sync.Mutex
	h       *C.tl_buffer_t
	backend Backend
	ordinal uint32
}

func (b *Buffer) handle() (*C.tl_buffer_t, error) {
	if b == nil || b.h == nil {
		return nil, ErrClosed
	}
	return b.h, nil
}

// Close releases the buffer reference (idempotent).
func (b *Buffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.h != nil {
		C.tl_buffer_release(b.h)
		b.h = nil
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

// Size in bytes.
func (b *Buffer) Size() int {
	h, err := b.handle()
	if err != nil {
		return 0
	}
	defer runtime.KeepAlive(b)
	return int(C.tl_buffer_size(h))
}

func bytesOf[T Element](data []T) (unsafe.Pointer, int) {
	if len(data) == 0 {
		return nil, 0
	}
	var z T
	return unsafe.Pointer(&data[0]), len(data) * int(unsafe.Sizeof(z))
}

// CopyFromHost copies data into b at byte offset (synchronous). OutOfRange
// names offset, size and buffer size.
func CopyFromHost[T Element](b *Buffer, offset int, data []T) error {
	h, err := b.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(b)
	if offset < 0 {
		return invalid("offset %d is negative", offset)
	}
	p, n := bytesOf(data)
	return check(C.tl_buffer_copy_from_host(h, C.size_t(offset), p, C.size_t(n), nil))
}

// CopyToHost copies from b at byte offset into out (synchronous).
func CopyToHost[T Element](b *Buffer, offset int, out []T) error {
	h, err := b.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(b)
	if offset < 0 {
		return invalid("offset %d is negative", offset)
	}
	p, n := bytesOf(out)
	return check(C.tl_buffer_copy_to_host(h, C.size_t(offset), p, C.size_t(n), nil))
}

// ---------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------

type argKind int

const (
	argHost argKind = iota
	argBuffer
	argScalar
)

// Arg is one launch argument: a tensor over a Go slice or a Buffer, or a scalar.
type Arg struct {
	kind     argKind
	dtype    DType
	elemSize int
	host     unsafe.Pointer // first element of the slice (keeps it alive)
	hostLen  int            // elements
	buf      *Buffer
	shape    []int64
	strides  []int64
	bits     uint64
	size     uint32
}

func toI64(xs []int) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x)
	}
	return out
}

// Tensor is a tensor over a Go slice with the given shape (dense row-major).
func Tensor[T Element](data []T, shape ...int) Arg {
	var z T
	a := Arg{kind: argHost, dtype: dtypeOf[T](), elemSize: int(unsafe.Sizeof(z)), hostLen: len(data), shape: toI64(shape)}
	if len(data) > 0 {
		a.host = unsafe.Pointer(&data[0])
	}
	return a
}

// BufferTensor is a tensor of element type T over a device buffer.
func BufferTensor[T Element](b *Buffer, shape ...int) Arg {
	var z T
	return Arg{kind: argBuffer, dtype: dtypeOf[T](), elemSize: int(unsafe.Sizeof(z)), buf: b, shape: toI64(shape)}
}

// BufferTensorOf is a tensor of any element type (Float16, BFloat16, ...) over a buffer.
func BufferTensorOf(b *Buffer, dt DType, shape ...int) Arg {
	lanes := int(dt.Lanes)
	if lanes == 0 {
		lanes = 1
	}
	return Arg{kind: argBuffer, dtype: dt, elemSize: (int(dt.Bits)*lanes + 7) / 8, buf: b, shape: toI64(shape)}
}

// WithStrides sets strides in elements (one per dimension, non-negative).
func (a Arg) WithStrides(strides ...int) Arg {
	a.strides = toI64(strides)
	return a
}

// Scalar is a scalar argument of type T.
func Scalar[T Element](v T) Arg {
	a := Arg{kind: argScalar, dtype: dtypeOf[T](), size: uint32(unsafe.Sizeof(v))}
	*(*T)(unsafe.Pointer(&a.bits)) = v // little-endian: value at the start, as the ABI wants
	return a
}

// I32, I64, F32 and F64 are scalar arguments of those types.
func I32(v int32) Arg   { return Scalar(v) }
func I64(v int64) Arg   { return Scalar(v) }
func F32(v float32) Arg { return Scalar(v) }
func F64(v float64) Arg { return Scalar(v) }

// extent is 1 + the largest element offset the view reaches.
func (a *Arg) extent(kernel string, i int) (int, error) {
	if a.strides != nil && len(a.strides) != len(a.shape) {
		return 0, invalid("kernel '%s' argument %d: %d strides for rank %d", kernel, i, len(a.strides), len(a.shape))
	}
	end, dense := int64(1), int64(1)
	for d := len(a.shape) - 1; d >= 0; d-- {
		n := a.shape[d]
		if n < 0 {
			return 0, invalid("kernel '%s' argument %d: dim %d is negative (%d)", kernel, i, d, n)
		}
		if n == 0 {
			return 0, nil
		}
		stride := dense
		if a.strides != nil {
			stride = a.strides[d]
		}
		if stride < 0 {
			return 0, invalid("kernel '%s' argument %d: stride %d is negative (%d)", kernel, i, d, stride)
		}
		end += (n - 1) * stride
		dense *= n
		if end < 0 || dense < 0 || end > 1<<50 {
			return 0, invalid("kernel '%s' argument %d: shape overflows", kernel, i)
		}
	}
	return int(end), nil
}

// ---------------------------------------------------------------------------
// Prepared kernels and launches
// ---------------------------------------------------------------------------

// Prepared is a kernel prepared for one device.
type Prepared struct {
	mu     sync.Mutex
	h      *C.tl_prepared_t
	dev    *C.tl_device_t // for staging buffers
	info   DeviceInfo
	name   string
	params []Param
}

func (p *Prepared) handle() (*C.tl_prepared_t, error) {
	if p == nil || p.h == nil {
		return nil, ErrClosed
	}
	return p.h, nil
}

// Close releases the prepared kernel (idempotent).
func (p *Prepared) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h != nil {
		C.tl_prepared_release(p.h)
		C.tl_device_release(p.dev)
		p.h, p.dev = nil, nil
		runtime.SetFinalizer(p, nil)
	}
	return nil
}

// Name is the kernel's name.
func (p *Prepared) Name() string { return p.name }

// Params is the kernel's signature.
func (p *Prepared) Params() []Param { return p.params }

// Variant is the variant chosen before argument guards.
func (p *Prepared) Variant() (Variant, error) {
	h, err := p.handle()
	if err != nil {
		return Variant{}, err
	}
	defer runtime.KeepAlive(p)
	var v C.tl_variant_info_t
	v.struct_size = C.uint32_t(unsafe.Sizeof(v))
	if err := check(C.tl_prepared_variant_info(h, &v)); err != nil {
		return Variant{}, err
	}
	return variantFromC(&v), nil
}

// Explain describes the decision: the device, the ranked candidates and every
// rejected variant with its reason.
func (p *Prepared) Explain() string {
	h, err := p.handle()
	if err != nil {
		return ""
	}
	defer runtime.KeepAlive(p)
	return C.GoString(C.tl_prepared_explain(h))
}

// LaunchOptions: Grid {0,0,0} evaluates the bundle's grid expressions;
// otherwise a 0 reads as 1. A grid expression evaluating to 0 (an empty
// problem) launches nothing and succeeds.
type LaunchOptions struct {
	Grid [3]uint32
}

// cArgs is a tl_arg_t array and its shape arrays, in C memory.
type cArgs struct {
	args   *C.tl_arg_t
	n      int
	allocs []unsafe.Pointer
	staged []*Buffer
	direct []int // host tensors passed in place (CPU device), by argument index
}

// maxDirect is how many Go slices one launch can pass without copies.
const maxDirect = 8

type hostMode int

const (
	hostRefuse hostMode = iota // streams: Go memory cannot outlive the call
	hostStage                  // copy through temporary device buffers
	hostDirect                 // CPU device: pass the slices in place
)

func (c *cArgs) free() {
	for _, p := range c.allocs {
		C.free(p)
	}
	for _, b := range c.staged {
		b.Close()
	}
	c.allocs, c.staged = nil, nil
}

func (c *cArgs) int64s(xs []int64) *C.int64_t {
	if len(xs) == 0 {
		return nil
	}
	p := C.malloc(C.size_t(8 * len(xs)))
	c.allocs = append(c.allocs, p)
	copy(unsafe.Slice((*int64)(p), len(xs)), xs)
	return (*C.int64_t)(p)
}

// marshal builds the C argument array. Host tensors are staged through new
// device buffers (copied in); staged[i] is that buffer for argument i.
func (p *Prepared) marshal(args []Arg, mode hostMode) (*cArgs, map[int]*Buffer, error) {
	c := &cArgs{n: len(args)}
	if len(args) > 0 {
		mem := C.calloc(C.size_t(len(args)), C.size_t(unsafe.Sizeof(C.tl_arg_t{})))
		c.allocs = append(c.allocs, mem)
		c.args = (*C.tl_arg_t)(mem)
	}
	staged := map[int]*Buffer{}
	raw := unsafe.Slice(c.args, len(args))
	for i := range args {
		a := &args[i]
		r := &raw[i]
		r.dtype = a.dtype.c()
		if a.kind == argScalar {
			r.kind = C.TL_ARG_SCALAR
			r.scalar_size = C.uint32_t(a.size)
			C.tlgo_set_scalar(r, C.uint64_t(a.bits))
			continue
		}
		r.kind = C.TL_ARG_TENSOR
		ext, err := a.extent(p.name, i)
		if err != nil {
			c.free()
			return nil, nil, err
		}
		bytes := ext * a.elemSize
		var data unsafe.Pointer
		switch a.kind {
		case argHost:
			if mode == hostRefuse {
				c.free()
				return nil, nil, invalid("kernel '%s' argument %d: Go slices cannot be used on a stream (asynchronous); use a Buffer", p.name, i)
			}
			if ext > a.hostLen {
				c.free()
				return nil, nil, invalid("kernel '%s' argument %d: the view reaches %d elements, the slice has %d", p.name, i, ext, a.hostLen)
			}
			if mode == hostDirect {
				c.direct = append(c.direct, i) // data set by tlgo_launch_host
				break
			}
			var sb *C.tl_buffer_t
			n := bytes
			if n == 0 {
				n = 1
			}
			if err := check(C.tl_buffer_allocate(p.dev, C.size_t(n), &sb)); err != nil {
				c.free()
				return nil, nil, err
			}
			buf := &Buffer{h: sb, backend: p.info.Backend, ordinal: p.info.Ordinal}
			c.staged = append(c.staged, buf)
			if bytes > 0 {
				if err := check(C.tl_buffer_copy_from_host(sb, 0, a.host, C.size_t(bytes), nil)); err != nil {
					c.free()
					return nil, nil, err
				}
			}
			staged[i] = buf
			data = C.tl_buffer_device_pointer(sb)
		case argBuffer:
			bh, err := a.buf.handle()
			if err != nil {
				c.free()
				return nil, nil, err
			}
			if a.buf.backend != p.info.Backend || a.buf.ordinal != p.info.Ordinal {
				c.free()
				return nil, nil, invalid("kernel '%s' argument %d: the buffer belongs to %s:%d, the kernel is prepared for %s:%d",
					p.name, i, a.buf.backend, a.buf.ordinal, p.info.Backend, p.info.Ordinal)
			}
			if size := int(C.tl_buffer_size(bh)); bytes > size {
				c.free()
				return nil, nil, invalid("kernel '%s' argument %d: the view reaches %d bytes, the buffer has %d", p.name, i, bytes, size)
			}
			data = C.tl_buffer_device_pointer(bh)
		}
		r.tensor.data = data
		r.tensor.rank = C.int32_t(len(a.shape))
		r.tensor.shape = c.int64s(a.shape)
		if a.strides != nil {
			r.tensor.strides = c.int64s(a.strides)
		}
	}
	return c, staged, nil
}

func launchOpts(o *LaunchOptions) *C.tl_launch_options_t {
	var co C.tl_launch_options_t
	co.struct_size = C.uint32_t(unsafe.Sizeof(co))
	if o != nil {
		for i := 0; i < 3; i++ {
			co.grid[i] = C.uint32_t(o.Grid[i])
		}
	}
	return &co
}

// Launch runs the kernel synchronously on its device. Slice tensors are
// copied to device buffers and, for parameters the kernel writes, back.
func (p *Prepared) Launch(args ...Arg) error { return p.LaunchWith(nil, args...) }

// LaunchWith is Launch with options.
func (p *Prepared) LaunchWith(o *LaunchOptions, args ...Arg) error {
	mode := hostStage
	if p.info.Backend == BackendCPU {
		hosts := 0
		for i := range args {
			if args[i].kind == argHost {
				hosts++
			}
		}
		if hosts <= maxDirect {
			mode = hostDirect
		}
	}
	return p.launch(o, args, mode)
}

func (p *Prepared) launch(o *LaunchOptions, args []Arg, mode hostMode) error {
	h, err := p.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(p)
	defer runtime.KeepAlive(args)
	c, staged, err := p.marshal(args, mode)
	if err != nil {
		return err
	}
	defer c.free()
	if len(c.direct) > 0 {
		var ptrs [maxDirect]unsafe.Pointer
		slots := (*[maxDirect]C.int)(C.malloc(C.size_t(unsafe.Sizeof(C.int(0))) * maxDirect))
		c.allocs = append(c.allocs, unsafe.Pointer(slots))
		for j := range slots {
			slots[j] = -1
		}
		for j, i := range c.direct {
			ptrs[j], slots[j] = args[i].host, C.int(i)
		}
		err := check(C.tlgo_launch_host(h, C.size_t(c.n), c.args, launchOpts(o), &slots[0],
			ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5], ptrs[6], ptrs[7]))
		runtime.KeepAlive(args)
		return err
	}
	if err := check(C.tl_launch(h, nil, C.size_t(c.n), c.args, launchOpts(o))); err != nil {
		return err
	}
	for i, b := range staged {
		if i < len(p.params) && !p.params[i].Access.Writes() {
			continue
		}
		a := &args[i]
		ext, _ := a.extent(p.name, i)
		if n := ext * a.elemSize; n > 0 {
			if err := check(C.tl_buffer_copy_to_host(b.h, 0, a.host, C.size_t(n), nil)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

// Stream is an in-order queue of work on one device. Not safe for
// concurrent use: one goroutine at a time (use one stream per goroutine).
type Stream struct {
	h        *C.tl_stream_t
	backend  Backend
	ordinal  uint32
	inFlight []*Buffer // buffers queued work uses, kept until Synchronize
}

// Close waits for queued work and releases the stream (idempotent).
func (s *Stream) Close() error {
	if s.h != nil {
		C.tl_stream_release(s.h)
		s.h = nil
		s.inFlight = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// Launch queues a launch. Tensor arguments must be Buffer tensors.
func (s *Stream) Launch(p *Prepared, args ...Arg) error { return s.LaunchWith(p, nil, args...) }

// LaunchWith is Launch with options.
func (s *Stream) LaunchWith(p *Prepared, o *LaunchOptions, args ...Arg) error {
	if s.h == nil {
		return ErrClosed
	}
	h, err := p.handle()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(p)
	c, _, err := p.marshal(args, hostRefuse)
	if err != nil {
		return err
	}
	defer c.free()
	if err := check(C.tl_launch(h, s.h, C.size_t(c.n), c.args, launchOpts(o))); err != nil {
		return err
	}
	for _, a := range args {
		if a.kind == argBuffer {
			s.inFlight = append(s.inFlight, a.buf)
		}
	}
	return nil
}

// Synchronize waits for queued work; timeout <= 0 means no limit
// (DeadlineExceeded when it runs out). Returns the first failure of queued
// work, and clears it.
func (s *Stream) Synchronize(timeout time.Duration) error {
	if s.h == nil {
		return ErrClosed
	}
	ns := ^uint64(0)
	if timeout > 0 {
		ns = uint64(timeout.Nanoseconds())
	}
	err := check(C.tl_stream_synchronize(s.h, C.uint64_t(ns)))
	if CodeOf(err) != DeadlineExceeded {
		s.inFlight = nil
	}
	return err
}
