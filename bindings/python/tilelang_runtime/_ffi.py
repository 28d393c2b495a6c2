"""ctypes declarations of runtime/include/tilelang/runtime.h (ABI 1.x).

Only this module knows the C layout; keep it in step with the header. The
struct layouts are checked against the library at import (struct_size fields
are what the runtime reads, so a mismatch would show up as wrong values, not
as a crash: fields are only ever appended)."""

import ctypes
import os

ABI_MAJOR = 1

# tl_status_code_t
STATUS_NAMES = {
    0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
    6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 10: "ABORTED",
    11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 18: "INCOMPATIBLE",
}
BACKENDS = {1: "cuda", 2: "hip", 3: "vulkan", 4: "cpu"}
BACKEND_IDS = {v: k for k, v in BACKENDS.items()}
CODE_KINDS = {0: "unknown", 1: "cubin", 2: "ptx", 3: "hsaco", 4: "spirv", 5: "elf"}
ACCESS = {0: "none", 1: "read", 2: "write", 3: "read_write"}

PARAM_BUFFER, PARAM_SCALAR = 0, 1
ARG_TENSOR, ARG_SCALAR = 0, 1

FLAG_DISABLE_JIT = 0x1
FLAG_IGNORE_ENVIRONMENT = 0x2
FLAG_CPU_NO_MEMFD = 0x4

DEVICE_FLAG_INTEGRATED = 0x1
DEVICE_FLAG_SOFTWARE = 0x2
DEVICE_FLAG_CAN_LAUNCH = 0x4

c_status = ctypes.c_void_p
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t)
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
RELEASE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class Allocator(ctypes.Structure):
    _fields_ = [("self", ctypes.c_void_p), ("alloc", ALLOC_FN), ("free", FREE_FN)]


class RuntimeOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("abi_version", ctypes.c_uint32), ("backend_mask", ctypes.c_uint32),
        ("cpu_thread_count", ctypes.c_uint32), ("flags", ctypes.c_uint64), ("log", LOG_FN),
        ("log_user", ctypes.c_void_p), ("log_level", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
        ("host_allocator", Allocator), ("driver_search_paths", ctypes.POINTER(ctypes.c_char_p)),
        ("driver_search_path_count", ctypes.c_size_t), ("cpu_cache_dir", ctypes.c_char_p),
    ]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("backend", ctypes.c_uint32), ("ordinal", ctypes.c_uint32),
        ("flags", ctypes.c_uint32), ("name", ctypes.c_char * 128), ("arch", ctypes.c_char * 64),
        ("memory_bytes", ctypes.c_uint64), ("driver_version", ctypes.c_uint32), ("compute_units", ctypes.c_uint32),
    ]


class ParamInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("kind", ctypes.c_uint32), ("name", ctypes.c_char_p), ("dtype", DType),
        ("access", ctypes.c_uint32), ("rank", ctypes.c_int32), ("ptr_alignment", ctypes.c_uint32),
        ("binds_symbol", ctypes.c_int32),
    ]


class DimInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("symbol", ctypes.c_int32), ("static_size", ctypes.c_int64),
        ("symbol_name", ctypes.c_char_p), ("divisible_by", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
    ]


class VariantInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("backend", ctypes.c_uint32), ("code_kind", ctypes.c_uint32),
        ("priority", ctypes.c_int32), ("id", ctypes.c_char_p), ("arch", ctypes.c_char_p),
        ("entry_point", ctypes.c_char_p), ("block", ctypes.c_uint32 * 3), ("jit", ctypes.c_uint32),
        ("shared_bytes", ctypes.c_uint64),
    ]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("rank", ctypes.c_int32), ("reserved", ctypes.c_uint32),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
    ]


class ScalarValue(ctypes.Union):
    _fields_ = [("i64", ctypes.c_int64), ("u64", ctypes.c_uint64), ("f64", ctypes.c_double),
                ("bytes", ctypes.c_uint8 * 8)]


class Arg(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_uint32), ("dtype", DType), ("scalar_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
        ("tensor", Tensor), ("value", ScalarValue),
    ]


class LaunchOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("grid", ctypes.c_uint32 * 3), ("flags", ctypes.c_uint32)]


# DLPack (dlpack.h v0.x/1.0 DLTensor and DLManagedTensor; the legacy
# "dltensor" capsule that every producer still offers).
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_ROCM = 1, 2, 3, 10
DL_VULKAN = 7  # kDLVulkan: Vulkan device addresses (tl_buffer_device_pointer on a Vulkan device)

P = ctypes.POINTER
_SIGNATURES = {
    "tl_abi_version": (ctypes.c_uint32, []),
    "tl_runtime_version_string": (ctypes.c_char_p, []),
    "tl_status_code": (ctypes.c_int, [c_status]),
    "tl_status_message": (ctypes.c_char_p, [c_status]),
    "tl_status_free": (None, [c_status]),
    "tl_runtime_options_init": (None, [P(RuntimeOptions)]),
    "tl_runtime_create": (c_status, [P(RuntimeOptions), P(ctypes.c_void_p)]),
    "tl_runtime_release": (None, [ctypes.c_void_p]),
    "tl_runtime_backend_status": (c_status, [ctypes.c_void_p, ctypes.c_int]),
    "tl_runtime_device_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "tl_runtime_device_at": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(ctypes.c_void_p)]),
    "tl_runtime_default_device": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(ctypes.c_void_p)]),
    "tl_device_release": (None, [ctypes.c_void_p]),
    "tl_device_info": (c_status, [ctypes.c_void_p, P(DeviceInfo)]),
    "tl_device_describe": (ctypes.c_char_p, [ctypes.c_void_p]),
    "tl_bundle_open_file": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(ctypes.c_void_p)]),
    "tl_bundle_open_by_name": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(ctypes.c_void_p)]),
    "tl_bundle_open_memory": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, RELEASE_FN,
                                         ctypes.c_void_p, P(ctypes.c_void_p)]),
    "tl_bundle_verify": (c_status, [ctypes.c_void_p]),
    "tl_bundle_release": (None, [ctypes.c_void_p]),
    "tl_bundle_kernel_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "tl_bundle_kernel_at": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(ctypes.c_void_p)]),
    "tl_bundle_find_kernel": (c_status, [ctypes.c_void_p, ctypes.c_char_p, P(ctypes.c_void_p)]),
    "tl_kernel_release": (None, [ctypes.c_void_p]),
    "tl_kernel_name": (ctypes.c_char_p, [ctypes.c_void_p]),
    "tl_kernel_attr": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_char_p]),
    "tl_kernel_param_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "tl_kernel_param_info": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(ParamInfo)]),
    "tl_kernel_param_dim": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, P(DimInfo)]),
    "tl_kernel_symbol_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "tl_kernel_symbol_name": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_size_t]),
    "tl_kernel_variant_count": (ctypes.c_size_t, [ctypes.c_void_p]),
    "tl_kernel_variant_info": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(VariantInfo)]),
    "tl_kernel_prepare": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, P(ctypes.c_void_p)]),
    "tl_prepared_release": (None, [ctypes.c_void_p]),
    "tl_prepared_variant_info": (c_status, [ctypes.c_void_p, P(VariantInfo)]),
    "tl_prepared_explain": (ctypes.c_char_p, [ctypes.c_void_p]),
    "tl_stream_create": (c_status, [ctypes.c_void_p, ctypes.c_uint32, P(ctypes.c_void_p)]),
    "tl_stream_wrap_native": (c_status, [ctypes.c_void_p, ctypes.c_void_p, P(ctypes.c_void_p)]),
    "tl_stream_synchronize": (c_status, [ctypes.c_void_p, ctypes.c_uint64]),
    "tl_stream_release": (None, [ctypes.c_void_p]),
    "tl_buffer_allocate": (c_status, [ctypes.c_void_p, ctypes.c_size_t, P(ctypes.c_void_p)]),
    "tl_buffer_release": (None, [ctypes.c_void_p]),
    "tl_buffer_device_pointer": (ctypes.c_void_p, [ctypes.c_void_p]),
    "tl_buffer_copy_from_host": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_void_p]),
    "tl_buffer_copy_to_host": (c_status, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                          ctypes.c_void_p]),
    "tl_launch": (c_status, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, P(Arg), P(LaunchOptions)]),
}


def _find_library():
    env = os.environ.get("TILELANG_RUNTIME_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "libtilelang_runtime.so")


def load():
    path = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"tilelang_runtime: cannot load the runtime library {path}: {e} "
                          "(build the project, or set TILELANG_RUNTIME_LIBRARY)") from e
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    major = lib.tl_abi_version() >> 16
    if major != ABI_MAJOR:
        raise ImportError(f"tilelang_runtime: {path} implements ABI {major}.x, this binding speaks {ABI_MAJOR}.x")
    return lib, path
