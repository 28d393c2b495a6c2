//! Raw declarations of `tilelang/runtime.h` (ABI 1.0), written by hand.
//!
//! Field order, types and sizes follow the header exactly; `tests/layout.rs`
//! compiles a C program against the header and compares every size and
//! offset with these structs.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub const TL_ABI_VERSION_MAJOR: u32 = 1;
pub const TL_ABI_VERSION_MINOR: u32 = 0;
pub const TL_ABI_VERSION: u32 = (TL_ABI_VERSION_MAJOR << 16) | TL_ABI_VERSION_MINOR;

#[repr(C)]
pub struct tl_status_s {
    _opaque: [u8; 0],
}
pub type tl_status_t = *mut tl_status_s;
/// `tl_status_code_t` (a C enum: `int`).
pub type tl_status_code_t = c_int;

macro_rules! opaque {
    ($($name:ident),*) => {$(
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
            // Not Send/Sync/Unpin by default: the safe layer decides.
            _marker: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
        }
    )*};
}
opaque!(tl_runtime_t, tl_device_t, tl_bundle_t, tl_kernel_t, tl_prepared_t, tl_buffer_t, tl_stream_t);

pub const TL_BACKEND_UNKNOWN: u32 = 0;
pub const TL_BACKEND_CUDA: u32 = 1;
pub const TL_BACKEND_HIP: u32 = 2;
pub const TL_BACKEND_VULKAN: u32 = 3;
pub const TL_BACKEND_CPU: u32 = 4;

pub const TL_PARAM_BUFFER: u32 = 0;
pub const TL_PARAM_SCALAR: u32 = 1;
pub const TL_ACCESS_NONE: u32 = 0;
pub const TL_ACCESS_READ: u32 = 1;
pub const TL_ACCESS_WRITE: u32 = 2;
pub const TL_ACCESS_READ_WRITE: u32 = 3;

pub const TL_DTYPE_INT: u8 = 0;
pub const TL_DTYPE_UINT: u8 = 1;
pub const TL_DTYPE_FLOAT: u8 = 2;
pub const TL_DTYPE_BFLOAT: u8 = 4;
pub const TL_DTYPE_BOOL: u8 = 6;

pub const TL_RUNTIME_FLAG_DISABLE_JIT: u64 = 0x1;
pub const TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT: u64 = 0x2;
pub const TL_RUNTIME_FLAG_CPU_NO_MEMFD: u64 = 0x4;

pub const TL_DEVICE_FLAG_INTEGRATED: u32 = 0x1;
pub const TL_DEVICE_FLAG_SOFTWARE: u32 = 0x2;
pub const TL_DEVICE_FLAG_CAN_LAUNCH: u32 = 0x4;

pub const TL_ARG_TENSOR: u32 = 0;
pub const TL_ARG_SCALAR: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct tl_dtype_t {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_allocator_t {
    pub self_: *mut c_void,
    pub alloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    pub free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
}

pub type tl_log_fn_t = Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_char, usize)>;
pub type tl_release_fn_t = Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize)>;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_runtime_options_t {
    pub struct_size: u32,
    pub abi_version: u32,
    pub backend_mask: u32,
    pub cpu_thread_count: u32,
    pub flags: u64,
    pub log: tl_log_fn_t,
    pub log_user: *mut c_void,
    pub log_level: u32,
    pub reserved0: u32,
    pub host_allocator: tl_allocator_t,
    pub driver_search_paths: *const *const c_char,
    pub driver_search_path_count: usize,
    pub cpu_cache_dir: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_device_info_t {
    pub struct_size: u32,
    pub backend: u32,
    pub ordinal: u32,
    pub flags: u32,
    pub name: [c_char; 128],
    pub arch: [c_char; 64],
    pub memory_bytes: u64,
    pub driver_version: u32,
    pub compute_units: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_param_info_t {
    pub struct_size: u32,
    pub kind: u32,
    pub name: *const c_char,
    pub dtype: tl_dtype_t,
    pub access: u32,
    pub rank: i32,
    pub ptr_alignment: u32,
    pub binds_symbol: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_dim_info_t {
    pub struct_size: u32,
    pub symbol: i32,
    pub static_size: i64,
    pub symbol_name: *const c_char,
    pub divisible_by: u32,
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_variant_info_t {
    pub struct_size: u32,
    pub backend: u32,
    pub code_kind: u32,
    pub priority: i32,
    pub id: *const c_char,
    pub arch: *const c_char,
    pub entry_point: *const c_char,
    pub block: [u32; 3],
    pub jit: u32,
    pub shared_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_tensor_t {
    pub data: *mut c_void,
    pub rank: i32,
    pub reserved: u32,
    pub shape: *const i64,
    pub strides: *const i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union tl_arg_value_t {
    pub i64_: i64,
    pub u64_: u64,
    pub f64_: f64,
    pub i32_: i32,
    pub u32_: u32,
    pub f32_: f32,
    pub bytes: [u8; 8],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct tl_arg_t {
    pub kind: u32,
    pub dtype: tl_dtype_t,
    pub scalar_size: u32,
    pub reserved: u32,
    pub tensor: tl_tensor_t,
    pub value: tl_arg_value_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct tl_launch_options_t {
    pub struct_size: u32,
    pub grid: [u32; 3],
    pub flags: u32,
}

extern "C" {
    pub fn tl_abi_version() -> u32;
    pub fn tl_runtime_version_string() -> *const c_char;

    pub fn tl_status_code(status: tl_status_t) -> tl_status_code_t;
    pub fn tl_status_message(status: tl_status_t) -> *const c_char;
    pub fn tl_status_code_name(code: tl_status_code_t) -> *const c_char;
    pub fn tl_status_free(status: tl_status_t);

    pub fn tl_runtime_options_init(options: *mut tl_runtime_options_t);
    pub fn tl_runtime_create(options: *const tl_runtime_options_t, out_runtime: *mut *mut tl_runtime_t) -> tl_status_t;
    pub fn tl_runtime_retain(runtime: *mut tl_runtime_t);
    pub fn tl_runtime_release(runtime: *mut tl_runtime_t);
    pub fn tl_runtime_backend_status(runtime: *mut tl_runtime_t, backend: u32) -> tl_status_t;

    pub fn tl_runtime_device_count(runtime: *mut tl_runtime_t) -> usize;
    pub fn tl_runtime_device_at(runtime: *mut tl_runtime_t, index: usize, out_device: *mut *mut tl_device_t) -> tl_status_t;
    pub fn tl_runtime_default_device(
        runtime: *mut tl_runtime_t,
        spec: *const c_char,
        out_device: *mut *mut tl_device_t,
    ) -> tl_status_t;
    pub fn tl_device_retain(device: *mut tl_device_t);
    pub fn tl_device_release(device: *mut tl_device_t);
    pub fn tl_device_info(device: *mut tl_device_t, out_info: *mut tl_device_info_t) -> tl_status_t;
    pub fn tl_device_describe(device: *mut tl_device_t) -> *const c_char;

    pub fn tl_bundle_open_file(runtime: *mut tl_runtime_t, path: *const c_char, out_bundle: *mut *mut tl_bundle_t) -> tl_status_t;
    pub fn tl_bundle_open_by_name(runtime: *mut tl_runtime_t, name: *const c_char, out_bundle: *mut *mut tl_bundle_t) -> tl_status_t;
    pub fn tl_bundle_open_memory(
        runtime: *mut tl_runtime_t,
        data: *const c_void,
        size: usize,
        release: tl_release_fn_t,
        release_user: *mut c_void,
        out_bundle: *mut *mut tl_bundle_t,
    ) -> tl_status_t;
    pub fn tl_bundle_verify(bundle: *mut tl_bundle_t) -> tl_status_t;
    pub fn tl_bundle_retain(bundle: *mut tl_bundle_t);
    pub fn tl_bundle_release(bundle: *mut tl_bundle_t);
    pub fn tl_bundle_kernel_count(bundle: *mut tl_bundle_t) -> usize;
    pub fn tl_bundle_kernel_at(bundle: *mut tl_bundle_t, index: usize, out_kernel: *mut *mut tl_kernel_t) -> tl_status_t;
    pub fn tl_bundle_find_kernel(bundle: *mut tl_bundle_t, name: *const c_char, out_kernel: *mut *mut tl_kernel_t) -> tl_status_t;

    pub fn tl_kernel_retain(kernel: *mut tl_kernel_t);
    pub fn tl_kernel_release(kernel: *mut tl_kernel_t);
    pub fn tl_kernel_name(kernel: *mut tl_kernel_t) -> *const c_char;
    pub fn tl_kernel_attr(kernel: *mut tl_kernel_t, key: *const c_char) -> *const c_char;
    pub fn tl_kernel_param_count(kernel: *mut tl_kernel_t) -> usize;
    pub fn tl_kernel_param_info(kernel: *mut tl_kernel_t, index: usize, out_info: *mut tl_param_info_t) -> tl_status_t;
    pub fn tl_kernel_param_dim(
        kernel: *mut tl_kernel_t,
        param_index: usize,
        dim_index: usize,
        out_info: *mut tl_dim_info_t,
    ) -> tl_status_t;
    pub fn tl_kernel_symbol_count(kernel: *mut tl_kernel_t) -> usize;
    pub fn tl_kernel_symbol_name(kernel: *mut tl_kernel_t, index: usize) -> *const c_char;
    pub fn tl_kernel_variant_count(kernel: *mut tl_kernel_t) -> usize;
    pub fn tl_kernel_variant_info(kernel: *mut tl_kernel_t, index: usize, out_info: *mut tl_variant_info_t) -> tl_status_t;

    pub fn tl_kernel_prepare(
        kernel: *mut tl_kernel_t,
        device: *mut tl_device_t,
        flags: u32,
        out_prepared: *mut *mut tl_prepared_t,
    ) -> tl_status_t;
    pub fn tl_prepared_retain(prepared: *mut tl_prepared_t);
    pub fn tl_prepared_release(prepared: *mut tl_prepared_t);
    pub fn tl_prepared_variant_info(prepared: *mut tl_prepared_t, out_info: *mut tl_variant_info_t) -> tl_status_t;
    pub fn tl_prepared_explain(prepared: *mut tl_prepared_t) -> *const c_char;

    pub fn tl_buffer_allocate(device: *mut tl_device_t, size: usize, out_buffer: *mut *mut tl_buffer_t) -> tl_status_t;
    pub fn tl_buffer_import(
        device: *mut tl_device_t,
        device_pointer: *mut c_void,
        size: usize,
        release: tl_release_fn_t,
        release_user: *mut c_void,
        out_buffer: *mut *mut tl_buffer_t,
    ) -> tl_status_t;
    pub fn tl_buffer_retain(buffer: *mut tl_buffer_t);
    pub fn tl_buffer_release(buffer: *mut tl_buffer_t);
    pub fn tl_buffer_size(buffer: *mut tl_buffer_t) -> usize;
    pub fn tl_buffer_device_pointer(buffer: *mut tl_buffer_t) -> *mut c_void;
    pub fn tl_buffer_copy_from_host(
        buffer: *mut tl_buffer_t,
        offset: usize,
        source: *const c_void,
        size: usize,
        stream: *mut tl_stream_t,
    ) -> tl_status_t;
    pub fn tl_buffer_copy_to_host(
        buffer: *mut tl_buffer_t,
        offset: usize,
        destination: *mut c_void,
        size: usize,
        stream: *mut tl_stream_t,
    ) -> tl_status_t;

    pub fn tl_stream_create(device: *mut tl_device_t, flags: u32, out_stream: *mut *mut tl_stream_t) -> tl_status_t;
    pub fn tl_stream_wrap_native(device: *mut tl_device_t, native_stream: *mut c_void, out_stream: *mut *mut tl_stream_t) -> tl_status_t;
    pub fn tl_stream_synchronize(stream: *mut tl_stream_t, timeout_ns: u64) -> tl_status_t;
    pub fn tl_stream_retain(stream: *mut tl_stream_t);
    pub fn tl_stream_release(stream: *mut tl_stream_t);

    pub fn tl_launch(
        prepared: *mut tl_prepared_t,
        stream: *mut tl_stream_t,
        arg_count: usize,
        args: *const tl_arg_t,
        options: *const tl_launch_options_t,
    ) -> tl_status_t;
}
