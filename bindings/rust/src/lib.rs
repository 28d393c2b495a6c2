//! Safe Rust binding of the TileLang runtime (`tilelang/runtime.h`).
//!
//! ```no_run
//! use tilelang_runtime::{Arg, Runtime};
//! let rt = Runtime::new()?;
//! let dev = rt.default_device(None)?;
//! let bundle = rt.open_bundle("kernels.tlb")?;
//! let prepared = bundle.kernel("vadd")?.prepare(&dev)?;
//! let (a, b) = (vec![1.0f32; 1000], vec![2.0f32; 1000]);
//! let mut c = vec![0.0f32; 1000];
//! prepared.launch(&[Arg::tensor(&a, &[1000]), Arg::tensor(&b, &[1000]), Arg::tensor_mut(&mut c, &[1000])])?;
//! println!("{}", prepared.explain());
//! # Ok::<(), tilelang_runtime::Error>(())
//! ```
//!
//! Every handle releases its reference on `Drop`; the runtime keeps what a
//! handle needs alive, so values may be dropped in any order. Thread safety
//! follows the header: all handles are `Send + Sync` except [`Stream`], which
//! is `Send` only (calls on one stream must not overlap).
//!
//! ```compile_fail
//! fn sync<T: Sync>() {}
//! sync::<tilelang_runtime::Stream>(); // thread-compatible only
//! ```
//! ```compile_fail
//! fn sync<T: Sync>() {}
//! sync::<tilelang_runtime::Arg<'static>>(); // may hold a &mut slice
//! ```
//! ```compile_fail
//! fn clone<T: Clone>() {}
//! clone::<tilelang_runtime::Stream>(); // one owner, so calls never overlap
//! ```
//!
//! Host slices passed to [`Prepared::launch`] are used in place on the CPU
//! device and staged through temporary device buffers on a GPU. Launches on a
//! [`Stream`] are asynchronous and take [`Buffer`] views only.

pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};
use std::time::Duration;

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Status codes of the C ABI (`tl_status_code_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    Ok,
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Incompatible,
    /// A code this binding does not know (a newer runtime).
    Other(i32),
}

impl Code {
    pub fn from_raw(v: i32) -> Code {
        match v {
            0 => Code::Ok,
            1 => Code::Cancelled,
            2 => Code::Unknown,
            3 => Code::InvalidArgument,
            4 => Code::DeadlineExceeded,
            5 => Code::NotFound,
            6 => Code::AlreadyExists,
            7 => Code::PermissionDenied,
            8 => Code::ResourceExhausted,
            9 => Code::FailedPrecondition,
            10 => Code::Aborted,
            11 => Code::OutOfRange,
            12 => Code::Unimplemented,
            13 => Code::Internal,
            14 => Code::Unavailable,
            15 => Code::DataLoss,
            18 => Code::Incompatible,
            other => Code::Other(other),
        }
    }
    pub fn raw(self) -> i32 {
        match self {
            Code::Ok => 0,
            Code::Cancelled => 1,
            Code::Unknown => 2,
            Code::InvalidArgument => 3,
            Code::DeadlineExceeded => 4,
            Code::NotFound => 5,
            Code::AlreadyExists => 6,
            Code::PermissionDenied => 7,
            Code::ResourceExhausted => 8,
            Code::FailedPrecondition => 9,
            Code::Aborted => 10,
            Code::OutOfRange => 11,
            Code::Unimplemented => 12,
            Code::Internal => 13,
            Code::Unavailable => 14,
            Code::DataLoss => 15,
            Code::Incompatible => 18,
            Code::Other(v) => v,
        }
    }
    /// "INVALID_ARGUMENT" etc., from the runtime.
    pub fn name(self) -> &'static str {
        // SAFETY: static storage per the header.
        unsafe { cstr_static(sys::tl_status_code_name(self.raw())) }
    }
}

/// A failed call: the runtime's status code and message (or, for checks made
/// by this binding before calling the runtime, a message in the same style).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: Code,
    message: String,
}

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }
    pub fn code(&self) -> Code {
        self.code
    }
    pub fn message(&self) -> &str {
        &self.message
    }
    fn invalid(message: String) -> Error {
        Error::new(Code::InvalidArgument, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Turns a status into a Result, freeing it.
fn check(status: sys::tl_status_t) -> Result<()> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a non-NULL status we own; freed exactly once here.
    unsafe {
        let code = Code::from_raw(sys::tl_status_code(status));
        let message = cstr_owned(sys::tl_status_message(status));
        sys::tl_status_free(status);
        Err(Error { code, message })
    }
}

unsafe fn cstr_static(p: *const c_char) -> &'static str {
    if p.is_null() {
        ""
    } else {
        CStr::from_ptr(p).to_str().unwrap_or("")
    }
}

unsafe fn cstr_owned(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

unsafe fn cstr_opt(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        Some(CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid(format!("{} contains a NUL byte", what)))
}

/// Calls `f(&mut out)` and wraps the returned handle.
fn out_handle<T>(f: impl FnOnce(*mut *mut T) -> sys::tl_status_t) -> Result<NonNull<T>> {
    let mut out: *mut T = ptr::null_mut();
    check(f(&mut out))?;
    NonNull::new(out).ok_or_else(|| Error::new(Code::Internal, "runtime returned success with a NULL handle"))
}

// ---------------------------------------------------------------------------
// Versions, enums
// ---------------------------------------------------------------------------

/// (major << 16) | minor of the ABI the loaded library implements.
pub fn abi_version() -> u32 {
    unsafe { sys::tl_abi_version() }
}

/// The library's version string ("0.1.0").
pub fn runtime_version() -> &'static str {
    unsafe { cstr_static(sys::tl_runtime_version_string()) }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Unknown,
    Cuda,
    Hip,
    Vulkan,
    Cpu,
}

impl Backend {
    pub fn from_raw(v: u32) -> Backend {
        match v {
            sys::TL_BACKEND_CUDA => Backend::Cuda,
            sys::TL_BACKEND_HIP => Backend::Hip,
            sys::TL_BACKEND_VULKAN => Backend::Vulkan,
            sys::TL_BACKEND_CPU => Backend::Cpu,
            _ => Backend::Unknown,
        }
    }
    pub fn raw(self) -> u32 {
        match self {
            Backend::Unknown => sys::TL_BACKEND_UNKNOWN,
            Backend::Cuda => sys::TL_BACKEND_CUDA,
            Backend::Hip => sys::TL_BACKEND_HIP,
            Backend::Vulkan => sys::TL_BACKEND_VULKAN,
            Backend::Cpu => sys::TL_BACKEND_CPU,
        }
    }
    /// The bit of this backend in [`RuntimeOptions::backend_mask`].
    pub fn bit(self) -> u32 {
        1u32 << self.raw()
    }
    pub fn name(self) -> &'static str {
        match self {
            Backend::Unknown => "unknown",
            Backend::Cuda => "cuda",
            Backend::Hip => "hip",
            Backend::Vulkan => "vulkan",
            Backend::Cpu => "cpu",
        }
    }
}

/// Element type (DLPack-compatible code, bits, lanes).
pub type DType = sys::tl_dtype_t;

pub mod dtype {
    use super::{sys, DType};
    pub const F16: DType = DType { code: sys::TL_DTYPE_FLOAT, bits: 16, lanes: 1 };
    pub const BF16: DType = DType { code: sys::TL_DTYPE_BFLOAT, bits: 16, lanes: 1 };
    pub const F32: DType = DType { code: sys::TL_DTYPE_FLOAT, bits: 32, lanes: 1 };
    pub const F64: DType = DType { code: sys::TL_DTYPE_FLOAT, bits: 64, lanes: 1 };
    pub const I8: DType = DType { code: sys::TL_DTYPE_INT, bits: 8, lanes: 1 };
    pub const I16: DType = DType { code: sys::TL_DTYPE_INT, bits: 16, lanes: 1 };
    pub const I32: DType = DType { code: sys::TL_DTYPE_INT, bits: 32, lanes: 1 };
    pub const I64: DType = DType { code: sys::TL_DTYPE_INT, bits: 64, lanes: 1 };
    pub const U8: DType = DType { code: sys::TL_DTYPE_UINT, bits: 8, lanes: 1 };
    pub const U16: DType = DType { code: sys::TL_DTYPE_UINT, bits: 16, lanes: 1 };
    pub const U32: DType = DType { code: sys::TL_DTYPE_UINT, bits: 32, lanes: 1 };
    pub const U64: DType = DType { code: sys::TL_DTYPE_UINT, bits: 64, lanes: 1 };
    pub const BOOL: DType = DType { code: sys::TL_DTYPE_BOOL, bits: 8, lanes: 1 };
}

/// A Rust type that is one element of a tensor or a scalar argument.
///
/// # Safety
/// `DTYPE.bits / 8 * DTYPE.lanes` must equal `size_of::<Self>()`, and every
/// bit pattern the kernel may write must be a valid `Self`.
pub unsafe trait Element: Copy + 'static {
    const DTYPE: DType;
}
macro_rules! element {
    ($($t:ty => $d:ident),*) => {$( unsafe impl Element for $t { const DTYPE: DType = dtype::$d; } )*};
}
element!(f32 => F32, f64 => F64, i8 => I8, i16 => I16, i32 => I32, i64 => I64,
         u8 => U8, u16 => U16, u32 => U32, u64 => U64);

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

macro_rules! handle {
    ($(#[$m:meta])* $name:ident, $raw:ty, $retain:path, $release:path, clone { $($f:ident),* }) => {
        handle!($(#[$m])* $name, $raw, $retain, $release);
        impl Clone for $name {
            /// Another reference to the same object.
            fn clone(&self) -> Self {
                unsafe { $retain(self.raw.as_ptr()) };
                $name { raw: self.raw, $($f: self.$f.clone()),* }
            }
        }
    };
    ($(#[$m:meta])* $name:ident, $raw:ty, $retain:path, $release:path) => {
        impl Drop for $name {
            fn drop(&mut self) {
                unsafe { $release(self.raw.as_ptr()) }
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:p})", stringify!($name), self.raw.as_ptr())
            }
        }
        impl $name {
            /// The raw handle, still owned by `self`.
            pub fn as_raw(&self) -> *mut $raw {
                self.raw.as_ptr()
            }
        }
    };
}

/// A runtime: the loaded drivers and the probed devices.
pub struct Runtime {
    raw: NonNull<sys::tl_runtime_t>,
}
handle!(Runtime, sys::tl_runtime_t, sys::tl_runtime_retain, sys::tl_runtime_release, clone {});

/// One device (a GPU or the CPU).
pub struct Device {
    raw: NonNull<sys::tl_device_t>,
    backend: Backend,
    ordinal: u32,
}
handle!(Device, sys::tl_device_t, sys::tl_device_retain, sys::tl_device_release, clone { backend, ordinal });

/// An opened bundle file.
pub struct Bundle {
    raw: NonNull<sys::tl_bundle_t>,
}
handle!(Bundle, sys::tl_bundle_t, sys::tl_bundle_retain, sys::tl_bundle_release, clone {});

/// One kernel of a bundle, with its signature and variants.
pub struct Kernel {
    raw: NonNull<sys::tl_kernel_t>,
}
handle!(Kernel, sys::tl_kernel_t, sys::tl_kernel_retain, sys::tl_kernel_release, clone {});

/// A kernel prepared for one device: variant chosen, code loaded.
pub struct Prepared {
    raw: NonNull<sys::tl_prepared_t>,
    device: Device,
    backend: Backend,
    ordinal: u32,
    // Per parameter: writes (WRITE or READ_WRITE access)?
    writes: std::sync::Arc<Vec<bool>>,
    name: std::sync::Arc<str>,
}
handle!(Prepared, sys::tl_prepared_t, sys::tl_prepared_retain, sys::tl_prepared_release, clone { device, backend, ordinal, writes, name });

/// Device memory (host memory on the CPU device).
pub struct Buffer {
    raw: NonNull<sys::tl_buffer_t>,
    backend: Backend,
    ordinal: u32,
}
handle!(Buffer, sys::tl_buffer_t, sys::tl_buffer_retain, sys::tl_buffer_release, clone { backend, ordinal });

/// An in-order queue of work on one device. `Send`, not `Sync`, not `Clone`:
/// calls on one stream never overlap.
pub struct Stream {
    raw: NonNull<sys::tl_stream_t>,
    backend: Backend,
    ordinal: u32,
    // Buffers used by queued work, kept alive until synchronize().
    in_flight: Vec<Buffer>,
}
handle!(Stream, sys::tl_stream_t, sys::tl_stream_retain, sys::tl_stream_release);

// SAFETY: the header declares these types immutable after creation, with
// synchronized reference counts and caches; any thread may call any function
// on them at once.
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}
unsafe impl Send for Device {}
unsafe impl Sync for Device {}
unsafe impl Send for Bundle {}
unsafe impl Sync for Bundle {}
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}
// Buffer contents are never borrowed as Rust memory; copies go through the
// runtime, so sharing a Buffer cannot create a Rust data race.
unsafe impl Send for Buffer {}
unsafe impl Sync for Buffer {}
// SAFETY: thread-compatible: may move between threads; `&mut self` on every
// call that touches the stream means calls never overlap.
unsafe impl Send for Stream {}

// ---------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------

/// Severity of a runtime log message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Error = 0,
    Warning = 1,
    Info = 2,
    Debug = 3,
}

impl LogLevel {
    fn from_raw(v: i32) -> LogLevel {
        match v {
            0 => LogLevel::Error,
            1 => LogLevel::Warning,
            2 => LogLevel::Info,
            _ => LogLevel::Debug,
        }
    }
}

type LogFn = dyn Fn(LogLevel, &str) + Send + Sync;

/// A log sink: messages up to `level` go to the function, from any thread.
#[derive(Clone)]
pub struct Logger {
    level: LogLevel,
    sink: std::sync::Arc<LogFn>,
}

impl Logger {
    pub fn new(level: LogLevel, sink: impl Fn(LogLevel, &str) + Send + Sync + 'static) -> Logger {
        Logger { level, sink: std::sync::Arc::new(sink) }
    }
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Logger({:?})", self.level)
    }
}

unsafe extern "C" fn log_trampoline(user: *mut c_void, level: std::os::raw::c_int, message: *const c_char, length: usize) {
    if user.is_null() || message.is_null() {
        return;
    }
    let sink = &*(user as *const std::sync::Arc<LogFn>);
    let bytes = std::slice::from_raw_parts(message as *const u8, length);
    let text = String::from_utf8_lossy(bytes);
    // A panicking sink must not unwind into C.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(LogLevel::from_raw(level), &text)));
}

/// Options of [`Runtime::with_options`]. Custom host allocators are not
/// exposed by this binding.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    /// OR of [`Backend::bit`]; 0 = every backend.
    pub backend_mask: u32,
    /// CPU task arena size; 0 = all cores.
    pub cpu_thread_count: u32,
    /// `sys::TL_RUNTIME_FLAG_*`.
    pub flags: u64,
    /// When non-empty, GPU drivers are looked for in these directories only.
    pub driver_search_paths: Vec<String>,
    /// CPU backend fallback directory for kernel libraries.
    pub cpu_cache_dir: Option<String>,
    /// Receives the runtime's log messages. The runtime may log from any of
    /// its objects for as long as any of them lives (C-side references
    /// included), so the sink given to a runtime that was created is kept for
    /// the rest of the process.
    pub logger: Option<Logger>,
}

impl RuntimeOptions {
    pub fn disable_jit(mut self) -> Self {
        self.flags |= sys::TL_RUNTIME_FLAG_DISABLE_JIT;
        self
    }
    pub fn ignore_environment(mut self) -> Self {
        self.flags |= sys::TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT;
        self
    }
    pub fn backends(mut self, backends: &[Backend]) -> Self {
        self.backend_mask = backends.iter().fold(0, |m, b| m | b.bit());
        self
    }
    pub fn log(mut self, level: LogLevel, sink: impl Fn(LogLevel, &str) + Send + Sync + 'static) -> Self {
        self.logger = Some(Logger::new(level, sink));
        self
    }
}

impl Runtime {
    /// A runtime with default options (reads TL_DEVICE, TL_FORCE_VARIANT,
    /// TL_DISABLE_JIT from the environment).
    pub fn new() -> Result<Runtime> {
        Runtime::with_options(&RuntimeOptions::default())
    }

    pub fn with_options(options: &RuntimeOptions) -> Result<Runtime> {
        let paths: Vec<CString> =
            options.driver_search_paths.iter().map(|p| c_string("driver search path", p)).collect::<Result<_>>()?;
        let path_ptrs: Vec<*const c_char> = paths.iter().map(|p| p.as_ptr()).collect();
        let cache = options.cpu_cache_dir.as_deref().map(|d| c_string("cpu_cache_dir", d)).transpose()?;
        // SAFETY: tl_runtime_options_init fills a zeroed struct of our size;
        // the strings outlive the call (the runtime copies them).
        unsafe {
            let mut o: sys::tl_runtime_options_t = std::mem::zeroed();
            sys::tl_runtime_options_init(&mut o);
            o.struct_size = std::mem::size_of::<sys::tl_runtime_options_t>() as u32;
            o.abi_version = sys::TL_ABI_VERSION;
            o.backend_mask = options.backend_mask;
            o.cpu_thread_count = options.cpu_thread_count;
            o.flags = options.flags;
            if !path_ptrs.is_empty() {
                o.driver_search_paths = path_ptrs.as_ptr();
                o.driver_search_path_count = path_ptrs.len();
            }
            if let Some(c) = &cache {
                o.cpu_cache_dir = c.as_ptr();
            }
            let mut user: *mut std::sync::Arc<LogFn> = ptr::null_mut();
            if let Some(l) = &options.logger {
                user = Box::into_raw(Box::new(l.sink.clone()));
                o.log = Some(log_trampoline);
                o.log_user = user as *mut c_void;
                o.log_level = l.level as u32;
            }
            match out_handle(|out| sys::tl_runtime_create(&o, out)) {
                // `user` is leaked on purpose: see RuntimeOptions::logger.
                Ok(raw) => Ok(Runtime { raw }),
                Err(e) => {
                    if !user.is_null() {
                        drop(Box::from_raw(user));
                    }
                    Err(e)
                }
            }
        }
    }

    /// Ok when `backend` loaded and probed fine; otherwise why not.
    pub fn backend_status(&self, backend: Backend) -> Result<()> {
        check(unsafe { sys::tl_runtime_backend_status(self.as_raw(), backend.raw()) })
    }

    pub fn device_count(&self) -> usize {
        unsafe { sys::tl_runtime_device_count(self.as_raw()) }
    }

    pub fn device(&self, index: usize) -> Result<Device> {
        let raw = out_handle(|out| unsafe { sys::tl_runtime_device_at(self.as_raw(), index, out) })?;
        Device::wrap(raw)
    }

    /// Every device, in backend order CUDA, HIP, Vulkan, CPU.
    pub fn devices(&self) -> Result<Vec<Device>> {
        (0..self.device_count()).map(|i| self.device(i)).collect()
    }

    /// `spec` as for TL_DEVICE ("cpu", "cuda:1", "2"); None: TL_DEVICE if
    /// set, else the best device.
    pub fn default_device(&self, spec: Option<&str>) -> Result<Device> {
        let spec = spec.map(|s| c_string("device spec", s)).transpose()?;
        let p = spec.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        let raw = out_handle(|out| unsafe { sys::tl_runtime_default_device(self.as_raw(), p, out) })?;
        Device::wrap(raw)
    }

    /// Opens a bundle file.
    pub fn open_bundle(&self, path: impl AsRef<Path>) -> Result<Bundle> {
        let path = path.as_ref();
        let s = path.to_str().ok_or_else(|| Error::invalid(format!("path {:?} is not UTF-8", path)))?;
        let c = c_string("bundle path", s)?;
        let raw = out_handle(|out| unsafe { sys::tl_bundle_open_file(self.as_raw(), c.as_ptr(), out) })?;
        Ok(Bundle { raw })
    }

    /// Opens an installed bundle by name ("tilelang-std"): NAME.tlb or NAME in each
    /// directory of $TILELANG_KERNEL_PATH, then <prefix>/share/tilelang (runtime.h,
    /// tl_bundle_open_by_name); a name containing '/' is a path.
    pub fn open_bundle_by_name(&self, name: &str) -> Result<Bundle> {
        let c = c_string("bundle name", name)?;
        let raw = out_handle(|out| unsafe { sys::tl_bundle_open_by_name(self.as_raw(), c.as_ptr(), out) })?;
        Ok(Bundle { raw })
    }

    /// Opens a bundle from bytes (copied by the runtime).
    pub fn open_bundle_bytes(&self, bytes: &[u8]) -> Result<Bundle> {
        let raw = out_handle(|out| unsafe {
            sys::tl_bundle_open_memory(self.as_raw(), bytes.as_ptr() as *const c_void, bytes.len(), None, ptr::null_mut(), out)
        })?;
        Ok(Bundle { raw })
    }

    /// Opens a bundle from bytes the runtime borrows without copying; the
    /// vector is dropped when the runtime no longer reads it.
    pub fn open_bundle_owned(&self, bytes: Vec<u8>) -> Result<Bundle> {
        unsafe extern "C" fn release(user: *mut c_void, _data: *const c_void, _size: usize) {
            drop(Box::from_raw(user as *mut Vec<u8>));
        }
        let boxed = Box::new(bytes);
        let (data, len) = (boxed.as_ptr() as *const c_void, boxed.len());
        let user = Box::into_raw(boxed) as *mut c_void;
        // The runtime calls `release` exactly once, on failure too.
        let raw = out_handle(|out| unsafe {
            sys::tl_bundle_open_memory(self.as_raw(), data, len, Some(release), user, out)
        })?;
        Ok(Bundle { raw })
    }
}

// ---------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------

/// `tl_device_info_t`, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub backend: Backend,
    pub ordinal: u32,
    pub flags: u32,
    pub name: String,
    pub arch: String,
    pub memory_bytes: u64,
    pub driver_version: u32,
    pub compute_units: u32,
}

impl DeviceInfo {
    pub fn can_launch(&self) -> bool {
        self.flags & sys::TL_DEVICE_FLAG_CAN_LAUNCH != 0
    }
}

fn char_array(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Device {
    fn wrap(raw: NonNull<sys::tl_device_t>) -> Result<Device> {
        let mut d = Device { raw, backend: Backend::Unknown, ordinal: 0 };
        let info = d.info()?;
        d.backend = info.backend;
        d.ordinal = info.ordinal;
        Ok(d)
    }

    pub fn info(&self) -> Result<DeviceInfo> {
        unsafe {
            let mut i: sys::tl_device_info_t = std::mem::zeroed();
            i.struct_size = std::mem::size_of::<sys::tl_device_info_t>() as u32;
            check(sys::tl_device_info(self.as_raw(), &mut i))?;
            Ok(DeviceInfo {
                backend: Backend::from_raw(i.backend),
                ordinal: i.ordinal,
                flags: i.flags,
                name: char_array(&i.name),
                arch: char_array(&i.arch),
                memory_bytes: i.memory_bytes,
                driver_version: i.driver_version,
                compute_units: i.compute_units,
            })
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The probed description selection runs on (JSON).
    pub fn describe(&self) -> &str {
        unsafe { cstr_borrowed(sys::tl_device_describe(self.as_raw())) }
    }

    /// Allocates `size` bytes of device memory.
    pub fn allocate(&self, size: usize) -> Result<Buffer> {
        let raw = out_handle(|out| unsafe { sys::tl_buffer_allocate(self.as_raw(), size, out) })?;
        Ok(Buffer { raw, backend: self.backend, ordinal: self.ordinal })
    }

    /// Allocates a buffer holding a copy of `data`.
    pub fn upload<T: Element>(&self, data: &[T]) -> Result<Buffer> {
        let b = self.allocate(std::mem::size_of_val(data))?;
        b.copy_from_host(0, data)?;
        Ok(b)
    }

    /// Wraps memory the caller owns as a buffer of `size` bytes (a
    /// `CUdeviceptr` on CUDA, a host pointer on the CPU); nothing is freed
    /// when the buffer goes.
    ///
    /// # Safety
    /// `pointer` must address `size` bytes of memory this device can use,
    /// valid (and not otherwise accessed while kernels use it) until every
    /// reference to the buffer, including those queued work holds, is gone.
    pub unsafe fn import(&self, pointer: *mut c_void, size: usize) -> Result<Buffer> {
        let raw = out_handle(|out| sys::tl_buffer_import(self.as_raw(), pointer, size, None, ptr::null_mut(), out))?;
        Ok(Buffer { raw, backend: self.backend, ordinal: self.ordinal })
    }

    /// Wraps a native queue (`CUstream`, `hipStream_t`, `tbb::task_arena*`).
    ///
    /// # Safety
    /// `native` must be a queue of this device's backend that outlives the
    /// stream and everything queued on it.
    pub unsafe fn wrap_stream(&self, native: *mut c_void) -> Result<Stream> {
        let raw = out_handle(|out| sys::tl_stream_wrap_native(self.as_raw(), native, out))?;
        Ok(Stream { raw, backend: self.backend, ordinal: self.ordinal, in_flight: Vec::new() })
    }

    /// A new stream on this device.
    pub fn create_stream(&self) -> Result<Stream> {
        let raw = out_handle(|out| unsafe { sys::tl_stream_create(self.as_raw(), 0, out) })?;
        Ok(Stream { raw, backend: self.backend, ordinal: self.ordinal, in_flight: Vec::new() })
    }
}

unsafe fn cstr_borrowed<'a>(p: *const c_char) -> &'a str {
    if p.is_null() {
        ""
    } else {
        CStr::from_ptr(p).to_str().unwrap_or("<non-UTF-8 text>")
    }
}

// ---------------------------------------------------------------------------
// Bundle, Kernel
// ---------------------------------------------------------------------------

impl Bundle {
    /// Reads and checks every payload.
    pub fn verify(&self) -> Result<()> {
        check(unsafe { sys::tl_bundle_verify(self.as_raw()) })
    }
    pub fn kernel_count(&self) -> usize {
        unsafe { sys::tl_bundle_kernel_count(self.as_raw()) }
    }
    /// Every kernel, sorted by name.
    pub fn kernels(&self) -> Result<Vec<Kernel>> {
        (0..self.kernel_count())
            .map(|i| {
                let raw = out_handle(|out| unsafe { sys::tl_bundle_kernel_at(self.as_raw(), i, out) })?;
                Ok(Kernel { raw })
            })
            .collect()
    }
    /// NOT_FOUND names the kernel and lists the bundle's kernels.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let c = c_string("kernel name", name)?;
        let raw = out_handle(|out| unsafe { sys::tl_bundle_find_kernel(self.as_raw(), c.as_ptr(), out) })?;
        Ok(Kernel { raw })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    Buffer,
    Scalar,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    None,
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn from_raw(v: u32) -> Access {
        match v {
            sys::TL_ACCESS_READ => Access::Read,
            sys::TL_ACCESS_WRITE => Access::Write,
            sys::TL_ACCESS_READ_WRITE => Access::ReadWrite,
            _ => Access::None,
        }
    }
    pub fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// One dimension of a buffer parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dim {
    /// Some(n): the dimension must equal n.
    pub static_size: Option<i64>,
    /// The shape symbol this dimension binds, by index and name.
    pub symbol: Option<(usize, String)>,
    pub divisible_by: u32,
}

/// One kernel parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub kind: ParamKind,
    pub name: String,
    pub dtype: DType,
    pub access: Access,
    pub ptr_alignment: u32,
    /// Scalars: the symbol this value must equal.
    pub binds_symbol: Option<usize>,
    /// Buffers: one entry per dimension.
    pub dims: Vec<Dim>,
}

/// One variant of a kernel (or the one a prepared kernel chose).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VariantInfo {
    pub backend: Backend,
    pub code_kind: u32,
    pub priority: i32,
    pub id: String,
    pub arch: String,
    pub entry_point: String,
    pub block: [u32; 3],
    pub jit: bool,
    pub shared_bytes: u64,
}

unsafe fn variant_info(f: impl FnOnce(*mut sys::tl_variant_info_t) -> sys::tl_status_t) -> Result<VariantInfo> {
    let mut v: sys::tl_variant_info_t = std::mem::zeroed();
    v.struct_size = std::mem::size_of::<sys::tl_variant_info_t>() as u32;
    check(f(&mut v))?;
    Ok(VariantInfo {
        backend: Backend::from_raw(v.backend),
        code_kind: v.code_kind,
        priority: v.priority,
        id: cstr_owned(v.id),
        arch: cstr_owned(v.arch),
        entry_point: cstr_owned(v.entry_point),
        block: v.block,
        jit: v.jit != 0,
        shared_bytes: v.shared_bytes,
    })
}

impl Kernel {
    pub fn name(&self) -> &str {
        unsafe { cstr_borrowed(sys::tl_kernel_name(self.as_raw())) }
    }
    /// A kernel attribute from the manifest ("out_idx", ...).
    pub fn attr(&self, key: &str) -> Option<String> {
        let c = CString::new(key).ok()?;
        unsafe { cstr_opt(sys::tl_kernel_attr(self.as_raw(), c.as_ptr())) }
    }
    pub fn symbols(&self) -> Vec<String> {
        let n = unsafe { sys::tl_kernel_symbol_count(self.as_raw()) };
        (0..n).map(|i| unsafe { cstr_owned(sys::tl_kernel_symbol_name(self.as_raw(), i)) }).collect()
    }
    pub fn params(&self) -> Result<Vec<Param>> {
        let n = unsafe { sys::tl_kernel_param_count(self.as_raw()) };
        (0..n).map(|i| self.param(i)).collect()
    }
    pub fn param(&self, index: usize) -> Result<Param> {
        unsafe {
            let mut p: sys::tl_param_info_t = std::mem::zeroed();
            p.struct_size = std::mem::size_of::<sys::tl_param_info_t>() as u32;
            check(sys::tl_kernel_param_info(self.as_raw(), index, &mut p))?;
            let mut dims = Vec::new();
            for d in 0..p.rank.max(0) as usize {
                let mut di: sys::tl_dim_info_t = std::mem::zeroed();
                di.struct_size = std::mem::size_of::<sys::tl_dim_info_t>() as u32;
                check(sys::tl_kernel_param_dim(self.as_raw(), index, d, &mut di))?;
                dims.push(Dim {
                    static_size: if di.static_size >= 0 { Some(di.static_size) } else { None },
                    symbol: if di.symbol >= 0 { Some((di.symbol as usize, cstr_owned(di.symbol_name))) } else { None },
                    divisible_by: di.divisible_by,
                });
            }
            Ok(Param {
                kind: if p.kind == sys::TL_PARAM_SCALAR { ParamKind::Scalar } else { ParamKind::Buffer },
                name: cstr_owned(p.name),
                dtype: p.dtype,
                access: Access::from_raw(p.access),
                ptr_alignment: p.ptr_alignment,
                binds_symbol: if p.binds_symbol >= 0 { Some(p.binds_symbol as usize) } else { None },
                dims,
            })
        }
    }
    pub fn variants(&self) -> Result<Vec<VariantInfo>> {
        let n = unsafe { sys::tl_kernel_variant_count(self.as_raw()) };
        (0..n).map(|i| unsafe { variant_info(|v| sys::tl_kernel_variant_info(self.as_raw(), i, v)) }).collect()
    }
    /// Selects the variant for `device` and loads its code. INCOMPATIBLE
    /// lists every variant and why it was rejected.
    pub fn prepare(&self, device: &Device) -> Result<Prepared> {
        let params = self.params()?;
        let raw = out_handle(|out| unsafe { sys::tl_kernel_prepare(self.as_raw(), device.as_raw(), 0, out) })?;
        Ok(Prepared {
            raw,
            device: device.clone(),
            backend: device.backend,
            ordinal: device.ordinal,
            writes: std::sync::Arc::new(params.iter().map(|p| p.access.writes()).collect()),
            name: self.name().into(),
        })
    }
}

// ---------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------

enum Data<'a> {
    HostRead(*const u8, usize),
    HostWrite(*mut u8, usize),
    Buffer(&'a Buffer),
    Scalar,
}

/// One launch argument: a typed tensor view (a host slice or a device buffer
/// with a shape, optionally strides) or a scalar.
pub struct Arg<'a> {
    raw: sys::tl_arg_t,
    data: Data<'a>,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    elem_size: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

// The raw pointers only mirror the borrow the Arg holds. Not Sync: two
// threads launching with one `&[Arg]` would both write a `tensor_mut` slice.
unsafe impl<'a> Send for Arg<'a> {}

impl<'a> Arg<'a> {
    fn tensor_raw(data: Data<'a>, dtype: DType, elem_size: usize, shape: &[usize]) -> Arg<'a> {
        let mut raw: sys::tl_arg_t = unsafe { std::mem::zeroed() };
        raw.kind = sys::TL_ARG_TENSOR;
        raw.dtype = dtype;
        Arg {
            raw,
            data,
            shape: shape.iter().map(|&d| d as i64).collect(),
            strides: None,
            elem_size,
            _borrow: PhantomData,
        }
    }

    /// A read-only tensor over a host slice (dense row-major unless
    /// [`Arg::strides`] says otherwise).
    pub fn tensor<T: Element>(data: &'a [T], shape: &[usize]) -> Arg<'a> {
        let d = Data::HostRead(data.as_ptr() as *const u8, data.len());
        Arg::tensor_raw(d, T::DTYPE, std::mem::size_of::<T>(), shape)
    }

    /// A tensor over a host slice the kernel may write.
    pub fn tensor_mut<T: Element>(data: &'a mut [T], shape: &[usize]) -> Arg<'a> {
        let d = Data::HostWrite(data.as_mut_ptr() as *mut u8, data.len());
        Arg::tensor_raw(d, T::DTYPE, std::mem::size_of::<T>(), shape)
    }

    /// A tensor of element type `T` over a device buffer.
    pub fn buffer<T: Element>(buffer: &'a Buffer, shape: &[usize]) -> Arg<'a> {
        Arg::tensor_raw(Data::Buffer(buffer), T::DTYPE, std::mem::size_of::<T>(), shape)
    }

    /// A tensor of any element type over a device buffer (f16, bf16, ...).
    pub fn buffer_dtype(buffer: &'a Buffer, dtype: DType, shape: &[usize]) -> Arg<'a> {
        let size = (dtype.bits as usize * dtype.lanes.max(1) as usize + 7) / 8;
        Arg::tensor_raw(Data::Buffer(buffer), dtype, size, shape)
    }

    /// Strides in elements, one per dimension (non-negative).
    pub fn strides(mut self, strides: &[isize]) -> Arg<'a> {
        self.strides = Some(strides.iter().map(|&s| s as i64).collect());
        self
    }

    /// A scalar of type `T`.
    pub fn scalar<T: Element>(value: T) -> Arg<'static> {
        let mut raw: sys::tl_arg_t = unsafe { std::mem::zeroed() };
        raw.kind = sys::TL_ARG_SCALAR;
        raw.dtype = T::DTYPE;
        raw.scalar_size = std::mem::size_of::<T>() as u32;
        // SAFETY: size_of::<T>() <= 8 for every Element with a scalar size
        // the runtime accepts; larger values are rejected below.
        unsafe {
            let n = std::mem::size_of::<T>().min(8);
            ptr::copy_nonoverlapping(&value as *const T as *const u8, raw.value.bytes.as_mut_ptr(), n);
        }
        Arg { raw, data: Data::Scalar, shape: Vec::new(), strides: None, elem_size: 0, _borrow: PhantomData }
    }
    pub fn i32(v: i32) -> Arg<'static> {
        Arg::scalar(v)
    }
    pub fn i64(v: i64) -> Arg<'static> {
        Arg::scalar(v)
    }
    pub fn f32(v: f32) -> Arg<'static> {
        Arg::scalar(v)
    }
    pub fn f64(v: f64) -> Arg<'static> {
        Arg::scalar(v)
    }

    /// Elements the view reaches (1 + the largest offset), checked.
    fn extent(&self, kernel: &str, index: usize) -> Result<usize> {
        let bad = |what: String| Error::invalid(format!("kernel '{}' argument {}: {}", kernel, index, what));
        if let Some(s) = &self.strides {
            if s.len() != self.shape.len() {
                return Err(bad(format!("{} strides for rank {}", s.len(), self.shape.len())));
            }
        }
        let mut end: i64 = 1;
        let mut dense: i64 = 1;
        for d in (0..self.shape.len()).rev() {
            let n = self.shape[d];
            if n < 0 {
                return Err(bad(format!("dim {} is negative ({})", d, n)));
            }
            if n == 0 {
                return Ok(0);
            }
            let stride = match &self.strides {
                Some(s) => s[d],
                None => dense,
            };
            if stride < 0 {
                return Err(bad(format!("stride {} is negative ({})", d, stride)));
            }
            end = (n - 1)
                .checked_mul(stride)
                .and_then(|x| x.checked_add(end))
                .ok_or_else(|| bad("shape overflows".into()))?;
            dense = dense.checked_mul(n).ok_or_else(|| bad("shape overflows".into()))?;
        }
        Ok(end as usize)
    }
}

// ---------------------------------------------------------------------------
// Prepared kernels and launches
// ---------------------------------------------------------------------------

/// Launch options: an explicit grid instead of the bundle's grid expressions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// [0, 0, 0]: evaluate the bundle's grid expressions; otherwise a 0
    /// reads as 1. (A grid expression evaluating to 0 launches nothing.)
    pub grid: [u32; 3],
}

struct Marshalled {
    raw: Vec<sys::tl_arg_t>,
    // Temporary device buffers for host slices on a GPU, copied back after.
    staged: Vec<(usize, Buffer)>,
}

impl Prepared {
    /// The variant chosen before argument guards.
    pub fn variant(&self) -> Result<VariantInfo> {
        unsafe { variant_info(|v| sys::tl_prepared_variant_info(self.as_raw(), v)) }
    }

    /// The decision in words: the device, the ranked candidates, every
    /// rejected variant and why.
    pub fn explain(&self) -> &str {
        unsafe { cstr_borrowed(sys::tl_prepared_explain(self.as_raw())) }
    }

    fn options(o: &LaunchOptions) -> sys::tl_launch_options_t {
        sys::tl_launch_options_t {
            struct_size: std::mem::size_of::<sys::tl_launch_options_t>() as u32,
            grid: o.grid,
            flags: 0,
        }
    }

    /// Builds the raw argument array. Host slices are checked against their
    /// view's extent; buffers against their size and device.
    fn marshal(&self, args: &[Arg<'_>], allow_host: bool, stage: bool) -> Result<Marshalled> {
        let mut m = Marshalled { raw: Vec::with_capacity(args.len()), staged: Vec::new() };
        for (i, a) in args.iter().enumerate() {
            let mut raw = a.raw;
            if let Data::Scalar = a.data {
                if raw.scalar_size > 8 {
                    return Err(Error::invalid(format!(
                        "kernel '{}' argument {}: scalar of {} bytes; at most 8",
                        self.name, i, raw.scalar_size
                    )));
                }
                m.raw.push(raw);
                continue;
            }
            let extent = a.extent(&self.name, i)?;
            let bytes = extent * a.elem_size;
            let writes = self.writes.get(i).copied().unwrap_or(false);
            let data: *mut c_void = match &a.data {
                Data::HostRead(p, len) => {
                    if !allow_host {
                        return Err(self.no_host(i));
                    }
                    self.check_len(i, extent, *len)?;
                    if writes {
                        return Err(Error::invalid(format!(
                            "kernel '{}' argument {}: the kernel writes this parameter; pass Arg::tensor_mut",
                            self.name, i
                        )));
                    }
                    if stage {
                        m.staged.push((i, self.stage(*p, bytes)?));
                        m.staged.last().unwrap().1.device_pointer()
                    } else {
                        *p as *mut c_void
                    }
                }
                Data::HostWrite(p, len) => {
                    if !allow_host {
                        return Err(self.no_host(i));
                    }
                    self.check_len(i, extent, *len)?;
                    if stage {
                        m.staged.push((i, self.stage(*p, bytes)?));
                        m.staged.last().unwrap().1.device_pointer()
                    } else {
                        *p as *mut c_void
                    }
                }
                Data::Buffer(b) => {
                    if b.backend != self.backend || b.ordinal != self.ordinal {
                        return Err(Error::invalid(format!(
                            "kernel '{}' argument {}: the buffer belongs to {}:{}, the kernel is prepared for {}:{}",
                            self.name,
                            i,
                            b.backend.name(),
                            b.ordinal,
                            self.backend.name(),
                            self.ordinal
                        )));
                    }
                    if bytes > b.size() {
                        return Err(Error::invalid(format!(
                            "kernel '{}' argument {}: the view reaches {} bytes, the buffer has {}",
                            self.name,
                            i,
                            bytes,
                            b.size()
                        )));
                    }
                    b.device_pointer()
                }
                Data::Scalar => unreachable!(),
            };
            raw.tensor.data = data;
            raw.tensor.rank = a.shape.len() as i32;
            raw.tensor.shape = a.shape.as_ptr();
            raw.tensor.strides = a.strides.as_ref().map_or(ptr::null(), |s| s.as_ptr());
            m.raw.push(raw);
        }
        Ok(m)
    }

    fn no_host(&self, i: usize) -> Error {
        Error::invalid(format!(
            "kernel '{}' argument {}: host slices cannot be used on a stream (asynchronous); use a Buffer",
            self.name, i
        ))
    }

    fn check_len(&self, i: usize, extent: usize, len: usize) -> Result<()> {
        if extent > len {
            return Err(Error::invalid(format!(
                "kernel '{}' argument {}: the view reaches {} elements, the slice has {}",
                self.name, i, extent, len
            )));
        }
        Ok(())
    }

    fn stage(&self, p: *const u8, bytes: usize) -> Result<Buffer> {
        let b = self.device.allocate(bytes.max(1))?;
        check(unsafe { sys::tl_buffer_copy_from_host(b.as_raw(), 0, p as *const c_void, bytes, ptr::null_mut()) })?;
        Ok(b)
    }

    /// Runs the kernel synchronously. Host slices are used in place on the
    /// CPU and staged through device buffers elsewhere.
    pub fn launch(&self, args: &[Arg<'_>]) -> Result<()> {
        self.launch_with(args, &LaunchOptions::default())
    }

    pub fn launch_with(&self, args: &[Arg<'_>], options: &LaunchOptions) -> Result<()> {
        self.launch_impl(args, options, self.backend != Backend::Cpu)
    }

    /// Launches with host slices always staged through device buffers (the
    /// GPU path), so that CPU-only machines test it too.
    #[doc(hidden)]
    pub fn launch_staged(&self, args: &[Arg<'_>]) -> Result<()> {
        self.launch_impl(args, &LaunchOptions::default(), true)
    }

    fn launch_impl(&self, args: &[Arg<'_>], options: &LaunchOptions, stage: bool) -> Result<()> {
        let m = self.marshal(args, true, stage)?;
        let o = Prepared::options(options);
        check(unsafe { sys::tl_launch(self.as_raw(), ptr::null_mut(), m.raw.len(), m.raw.as_ptr(), &o) })?;
        for (i, b) in &m.staged {
            if let Data::HostWrite(p, _) = args[*i].data {
                let bytes = args[*i].extent(&self.name, *i)? * args[*i].elem_size;
                check(unsafe { sys::tl_buffer_copy_to_host(b.as_raw(), 0, p as *mut c_void, bytes, ptr::null_mut()) })?;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Buffers and streams
// ---------------------------------------------------------------------------

impl Buffer {
    pub fn size(&self) -> usize {
        unsafe { sys::tl_buffer_size(self.as_raw()) }
    }

    /// The address kernels receive (device address, or host address on CPU).
    pub fn device_pointer(&self) -> *mut c_void {
        unsafe { sys::tl_buffer_device_pointer(self.as_raw()) }
    }

    /// Copies `data` to byte `offset` (synchronous). OUT_OF_RANGE names
    /// offset, size and buffer size.
    pub fn copy_from_host<T: Element>(&self, offset: usize, data: &[T]) -> Result<()> {
        check(unsafe {
            sys::tl_buffer_copy_from_host(
                self.as_raw(),
                offset,
                data.as_ptr() as *const c_void,
                std::mem::size_of_val(data),
                ptr::null_mut(),
            )
        })
    }

    /// Copies from byte `offset` into `out` (synchronous).
    pub fn copy_to_host<T: Element>(&self, offset: usize, out: &mut [T]) -> Result<()> {
        check(unsafe {
            sys::tl_buffer_copy_to_host(
                self.as_raw(),
                offset,
                out.as_mut_ptr() as *mut c_void,
                std::mem::size_of_val(out),
                ptr::null_mut(),
            )
        })
    }

    /// The whole buffer as a vector of `T` (trailing partial element dropped).
    pub fn to_vec<T: Element + Default>(&self) -> Result<Vec<T>> {
        let mut v = vec![T::default(); self.size() / std::mem::size_of::<T>()];
        self.copy_to_host(0, &mut v)?;
        Ok(v)
    }
}

impl Stream {
    /// Queues a launch. Tensor arguments must be [`Buffer`] views (host
    /// memory would have to outlive the call); the stream keeps those buffers
    /// alive until [`Stream::synchronize`].
    pub fn launch(&mut self, prepared: &Prepared, args: &[Arg<'_>]) -> Result<()> {
        self.launch_with(prepared, args, &LaunchOptions::default())
    }

    pub fn launch_with(&mut self, prepared: &Prepared, args: &[Arg<'_>], options: &LaunchOptions) -> Result<()> {
        if prepared.backend != self.backend || prepared.ordinal != self.ordinal {
            return Err(Error::invalid(format!(
                "kernel '{}': the stream belongs to another device",
                prepared.name
            )));
        }
        let m = prepared.marshal(args, false, false)?;
        let o = Prepared::options(options);
        check(unsafe { sys::tl_launch(prepared.as_raw(), self.as_raw(), m.raw.len(), m.raw.as_ptr(), &o) })?;
        for a in args {
            if let Data::Buffer(b) = a.data {
                self.in_flight.push(b.clone());
            }
        }
        Ok(())
    }

    /// Waits for all queued work; returns the first failure of queued work.
    /// `timeout` None: no limit (DEADLINE_EXCEEDED when it runs out).
    pub fn synchronize(&mut self, timeout: Option<Duration>) -> Result<()> {
        let ns = timeout.map_or(u64::MAX, |t| t.as_nanos().min(u64::MAX as u128 - 1) as u64);
        let r = check(unsafe { sys::tl_stream_synchronize(self.as_raw(), ns) });
        if !matches!(&r, Err(e) if e.code == Code::DeadlineExceeded) {
            self.in_flight.clear();
        }
        r
    }
}
