"""tilelang_runtime: Python binding of the TileLang runtime (ctypes over the C
ABI of runtime/include/tilelang/runtime.h; nothing else).

    import numpy as np, tilelang_runtime as tlr
    rt = tlr.Runtime()
    bundle = rt.open_bundle("kernels.tlb")        # a path, or bytes
    k = bundle.kernel("gemm")
    k.params                                      # names, dtypes, shapes (ints / symbol names)
    p = k.prepare(rt.best_device())               # variant chosen, code loaded (cached per device)
    print(p.explain())
    C = p(A, B)                                   # outputs allocated per out_idx, returned

Arrays are numpy arrays, or any object with __dlpack__ (a CPU tensor for the
CPU device; a device tensor for GPU devices once their launch path exists).
Thread-safety follows the C ABI: Runtime, Bundle, Kernel and Prepared objects
may be used from many threads (calls release the GIL while in the runtime).
"""

import ctypes
import json
import threading

import numpy as np

from . import _ffi

__all__ = ["Runtime", "Device", "Bundle", "Kernel", "Param", "Prepared", "Stream", "TLError", "abi_version",
           "version", "library_path"]

_lib, library_path = _ffi.load()

# Tests set this to exercise the host <-> device staging of numpy arrays on the
# CPU device (where device memory is host memory).
_FORCE_STAGING = False


def abi_version():
    """(major, minor) of the C ABI the loaded library implements."""
    v = _lib.tl_abi_version()
    return (v >> 16, v & 0xFFFF)


def version():
    return _lib.tl_runtime_version_string().decode()


class TLError(RuntimeError):
    """A runtime status: .code (int), .code_name ("INVALID_ARGUMENT"), .message."""

    def __init__(self, code, message):
        self.code = code
        self.code_name = _ffi.STATUS_NAMES.get(code, f"CODE_{code}")
        self.message = message
        super().__init__(f"{self.code_name}: {message}")


def _check(status):
    if status:
        code = _lib.tl_status_code(status)
        message = _lib.tl_status_message(status).decode(errors="replace")
        _lib.tl_status_free(status)
        raise TLError(code, message)


# numpy dtype <-> DLPack (code, bits)
_NP_TO_DL = {
    np.dtype(np.float16): (2, 16), np.dtype(np.float32): (2, 32), np.dtype(np.float64): (2, 64),
    np.dtype(np.int8): (0, 8), np.dtype(np.int16): (0, 16), np.dtype(np.int32): (0, 32), np.dtype(np.int64): (0, 64),
    np.dtype(np.uint8): (1, 8), np.dtype(np.uint16): (1, 16), np.dtype(np.uint32): (1, 32),
    np.dtype(np.uint64): (1, 64), np.dtype(np.bool_): (6, 8),
}
_DL_TO_NP = {v: k for k, v in _NP_TO_DL.items()}
_DL_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 6: "bool"}


def _dtype_name(code, bits, lanes=1):
    if code == 6:
        return "bool"
    name = f"{_DL_CODE_NAMES.get(code, f'code{code}_')}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


class Device:
    """One device: .backend ("cpu", "cuda", ...), .name, .arch ("x86-64-v4",
    "sm_90"), .memory_bytes, .driver_version, .compute_units, .can_launch."""

    def __init__(self, runtime, handle):
        self._runtime = runtime
        self._handle = handle
        info = _ffi.DeviceInfo()
        info.struct_size = ctypes.sizeof(info)
        _check(_lib.tl_device_info(handle, ctypes.byref(info)))
        self.backend = _ffi.BACKENDS.get(info.backend, "unknown")
        self.ordinal = info.ordinal
        self.name = info.name.decode(errors="replace")
        self.arch = info.arch.decode(errors="replace")
        self.memory_bytes = info.memory_bytes
        self.driver_version = info.driver_version
        self.compute_units = info.compute_units
        self.flags = info.flags
        self.can_launch = bool(info.flags & _ffi.DEVICE_FLAG_CAN_LAUNCH)
        self.is_software = bool(info.flags & _ffi.DEVICE_FLAG_SOFTWARE)

    def describe(self):
        """The probed description selection runs on (dict; the golden format)."""
        return json.loads(_lib.tl_device_describe(self._handle).decode())

    def stream(self):
        """A new in-order queue on this device (see Stream)."""
        return Stream(self)

    def __del__(self):
        try:
            _lib.tl_device_release(self._handle)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return f"Device({self.backend}:{self.ordinal} {self.name!r} {self.arch})"


class Stream:
    """An in-order queue of launches on one device: p(*args, stream=s) returns
    once the launch is queued; s.synchronize() waits and raises the first
    failure of queued work. Arrays passed to queued launches must stay alive
    and unchanged until then (outputs cannot be allocated for queued launches).
    Use a stream from one thread at a time."""

    def __init__(self, device, native=None):
        """native: a queue the caller owns and keeps alive (CUstream as an int, e.g. torch's
        torch.cuda.current_stream().cuda_stream): launches are queued on it (tl_stream_wrap_native)."""
        self.device = device
        h = ctypes.c_void_p()
        if native is not None:
            _check(_lib.tl_stream_wrap_native(device._handle, ctypes.c_void_p(int(native)), ctypes.byref(h)))
        else:
            _check(_lib.tl_stream_create(device._handle, 0, ctypes.byref(h)))
        self._handle = h
        self._pending = []  # keeps argument arrays alive until synchronize

    def synchronize(self, timeout=None):
        """Waits for queued work; timeout in seconds (None: no limit).
        Raises TLError DEADLINE_EXCEEDED when it runs out."""
        ns = 2**64 - 1 if timeout is None else int(timeout * 1e9)
        try:
            _check(_lib.tl_stream_synchronize(self._handle, ns))
        except TLError as e:
            if e.code_name != "DEADLINE_EXCEEDED":
                self._pending.clear()
            raise
        self._pending.clear()

    def __del__(self):
        try:
            _lib.tl_stream_release(self._handle)  # waits for queued work
        except Exception:
            pass


class Runtime:
    """A runtime: loads the drivers of the enabled backends and probes devices.

    backends: iterable of "cuda", "hip", "vulkan", "cpu" (None: all).
    cpu_threads: size of the CPU task arena (0: all cores).
    disable_jit: treat PTX variants as unusable (also TL_DISABLE_JIT=1).
    ignore_environment: ignore TL_DEVICE / TL_FORCE_VARIANT / TL_DISABLE_JIT.
    driver_search_paths: directories to find GPU drivers in (only there).
    log: callable(level:int, message:str), called from any thread.
    """

    def __init__(self, backends=None, cpu_threads=0, disable_jit=False, ignore_environment=False,
                 driver_search_paths=None, log=None, log_level=2, cpu_cache_dir=None):
        opts = _ffi.RuntimeOptions()
        _lib.tl_runtime_options_init(ctypes.byref(opts))
        if backends is not None:
            mask = 0
            for b in backends:
                if b not in _ffi.BACKEND_IDS:
                    raise ValueError(f"unknown backend {b!r} (cuda, hip, vulkan, cpu)")
                mask |= 1 << _ffi.BACKEND_IDS[b]
            opts.backend_mask = mask
        opts.cpu_thread_count = cpu_threads
        opts.flags = (_ffi.FLAG_DISABLE_JIT if disable_jit else 0) | \
            (_ffi.FLAG_IGNORE_ENVIRONMENT if ignore_environment else 0)
        self._keep = []
        if log is not None:
            def _log(user, level, message, length):
                try:
                    log(level, ctypes.string_at(message, length).decode(errors="replace"))
                except Exception:  # never raise into C
                    pass
            self._log_fn = _ffi.LOG_FN(_log)
            opts.log = self._log_fn
            opts.log_level = log_level
        if driver_search_paths:
            arr = (ctypes.c_char_p * len(driver_search_paths))(*[p.encode() for p in driver_search_paths])
            self._keep.append(arr)
            opts.driver_search_paths = arr
            opts.driver_search_path_count = len(driver_search_paths)
        if cpu_cache_dir:
            opts.cpu_cache_dir = cpu_cache_dir.encode()
        handle = ctypes.c_void_p()
        _check(_lib.tl_runtime_create(ctypes.byref(opts), ctypes.byref(handle)))
        self._handle = handle

    def __del__(self):
        try:
            _lib.tl_runtime_release(self._handle)
        except Exception:
            pass

    def backend_status(self, backend):
        """None when `backend` is available, else the reason (str)."""
        try:
            _check(_lib.tl_runtime_backend_status(self._handle, _ffi.BACKEND_IDS[backend]))
        except TLError as e:
            return str(e)
        return None

    def devices(self):
        out = []
        for i in range(_lib.tl_runtime_device_count(self._handle)):
            h = ctypes.c_void_p()
            _check(_lib.tl_runtime_device_at(self._handle, i, ctypes.byref(h)))
            out.append(Device(self, h))
        return out

    def device(self, spec=None):
        """A device by spec ("cpu", "cuda:1", "2"); None: TL_DEVICE or the best."""
        h = ctypes.c_void_p()
        _check(_lib.tl_runtime_default_device(self._handle, spec.encode() if spec else None, ctypes.byref(h)))
        return Device(self, h)

    def best_device(self):
        return self.device(None)

    def open_bundle(self, source):
        """A bundle from a path (str / os.PathLike) or from bytes-like data (copied)."""
        h = ctypes.c_void_p()
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            buf = ctypes.create_string_buffer(data, len(data))
            _check(_lib.tl_bundle_open_memory(self._handle, buf, len(data), _ffi.RELEASE_FN(), None,
                                              ctypes.byref(h)))
        else:
            import os
            _check(_lib.tl_bundle_open_file(self._handle, os.fsencode(source), ctypes.byref(h)))
        return Bundle(self, h)

    def open_bundle_by_name(self, name):
        """An installed bundle by name ("tilelang-std"): NAME.tlb or NAME in each directory of
        $TILELANG_KERNEL_PATH, then <prefix>/share/tilelang (tl_bundle_open_by_name)."""
        h = ctypes.c_void_p()
        _check(_lib.tl_bundle_open_by_name(self._handle, name.encode(), ctypes.byref(h)))
        return Bundle(self, h)


class Bundle:
    def __init__(self, runtime, handle):
        self._runtime = runtime
        self._handle = handle
        self._kernels = {}
        self._lock = threading.Lock()

    def __del__(self):
        try:
            _lib.tl_bundle_release(self._handle)
        except Exception:
            pass

    @property
    def kernels(self):
        """Kernel names, sorted."""
        names = []
        for i in range(_lib.tl_bundle_kernel_count(self._handle)):
            h = ctypes.c_void_p()
            _check(_lib.tl_bundle_kernel_at(self._handle, i, ctypes.byref(h)))
            names.append(_lib.tl_kernel_name(h).decode())
            _lib.tl_kernel_release(h)
        return names

    def kernel(self, name):
        with self._lock:
            if name not in self._kernels:
                h = ctypes.c_void_p()
                _check(_lib.tl_bundle_find_kernel(self._handle, name.encode(), ctypes.byref(h)))
                self._kernels[name] = Kernel(self, h)
            return self._kernels[name]

    __getitem__ = kernel

    def verify(self):
        """Reads and checks every payload; raises TLError (DATA_LOSS, ...) on a defect."""
        _check(_lib.tl_bundle_verify(self._handle))


class Param:
    """A kernel parameter: .name, .kind ("buffer" | "scalar"), .dtype (str,
    e.g. "float32"), .np_dtype (numpy dtype or None), .access, .rank,
    .shape (list of int for static dims / str for symbols), .divisible_by,
    .ptr_alignment, .binds_symbol (str or None), .is_output."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        if self.kind == "scalar":
            return f"Param({self.name}: {self.dtype})"
        return f"Param({self.name}: {self.dtype}{self.shape}, {self.access})"


class Kernel:
    def __init__(self, bundle, handle):
        self._bundle = bundle
        self._handle = handle
        self.name = _lib.tl_kernel_name(handle).decode()
        self.symbols = [_lib.tl_kernel_symbol_name(handle, i).decode()
                        for i in range(_lib.tl_kernel_symbol_count(handle))]
        self.params = [self._param(i) for i in range(_lib.tl_kernel_param_count(handle))]
        self.out_idx = self._out_idx()
        for i in self.out_idx:
            self.params[i].is_output = True
        self._prepared = {}
        self._lock = threading.Lock()

    def __del__(self):
        try:
            _lib.tl_kernel_release(self._handle)
        except Exception:
            pass

    def _param(self, i):
        info = _ffi.ParamInfo()
        info.struct_size = ctypes.sizeof(info)
        _check(_lib.tl_kernel_param_info(self._handle, i, ctypes.byref(info)))
        shape, divisible = [], []
        for d in range(max(info.rank, 0)):
            dim = _ffi.DimInfo()
            dim.struct_size = ctypes.sizeof(dim)
            _check(_lib.tl_kernel_param_dim(self._handle, i, d, ctypes.byref(dim)))
            shape.append(dim.symbol_name.decode() if dim.symbol >= 0 else int(dim.static_size))
            divisible.append(dim.divisible_by)
        kind = "scalar" if info.kind == _ffi.PARAM_SCALAR else "buffer"
        return Param(
            index=i, name=info.name.decode(), kind=kind,
            dtype=_dtype_name(info.dtype.code, info.dtype.bits, info.dtype.lanes),
            dl_dtype=(info.dtype.code, info.dtype.bits, info.dtype.lanes),
            np_dtype=_DL_TO_NP.get((info.dtype.code, info.dtype.bits)) if info.dtype.lanes == 1 else None,
            access=_ffi.ACCESS.get(info.access, "read"), rank=info.rank, shape=shape, divisible_by=divisible,
            ptr_alignment=info.ptr_alignment,
            binds_symbol=self.symbols[info.binds_symbol] if info.binds_symbol >= 0 else None, is_output=False)

    def _out_idx(self):
        attr = self.attr("out_idx")
        if attr is not None:
            n = len(self.params)
            return sorted({int(x) % n for x in attr.replace(" ", "").split(",") if x})
        return [p.index for p in self.params if p.kind == "buffer" and p.access == "write"]

    def attr(self, key):
        v = _lib.tl_kernel_attr(self._handle, key.encode())
        return v.decode() if v is not None else None

    @property
    def variants(self):
        out = []
        for i in range(_lib.tl_kernel_variant_count(self._handle)):
            out.append(_variant_info(lambda vi, i=i: _lib.tl_kernel_variant_info(self._handle, i, vi)))
        return out

    def prepare(self, device=None):
        """The Prepared kernel for `device` (default: the runtime's best device)."""
        if device is None:
            device = self._bundle._runtime.best_device()
        key = (device.backend, device.ordinal)
        with self._lock:
            p = self._prepared.get(key)
            if p is None:
                h = ctypes.c_void_p()
                _check(_lib.tl_kernel_prepare(self._handle, device._handle, 0, ctypes.byref(h)))
                p = Prepared(self, device, h)
                self._prepared[key] = p
            return p

    def __call__(self, *args, device=None, grid=None):
        return self.prepare(device)(*args, grid=grid)

    def __repr__(self):
        return f"Kernel({self.name}({', '.join(p.name for p in self.params)}))"


def _variant_info(fill):
    vi = _ffi.VariantInfo()
    vi.struct_size = ctypes.sizeof(vi)
    _check(fill(ctypes.byref(vi)))
    return {"id": vi.id.decode(), "backend": _ffi.BACKENDS.get(vi.backend, "unknown"),
            "code_kind": _ffi.CODE_KINDS.get(vi.code_kind, "unknown"), "arch": vi.arch.decode(),
            "entry_point": vi.entry_point.decode(), "priority": vi.priority, "block": tuple(vi.block),
            "jit": bool(vi.jit), "shared_bytes": vi.shared_bytes}


def _is_host_dlpack(a):
    """A non-numpy __dlpack__ object whose memory is host memory (a torch CPU tensor)."""
    if isinstance(a, np.ndarray) or not hasattr(a, "__dlpack_device__"):
        return False
    try:
        return a.__dlpack_device__()[0] in (_ffi.DL_CPU, _ffi.DL_CUDA_HOST)
    except Exception:
        return False


class _DLPackView:
    """Borrowed view of a __dlpack__ producer's tensor; call close() after use."""

    def __init__(self, obj):
        if getattr(obj, "requires_grad", False) and hasattr(obj, "detach"):
            # torch refuses to export a tensor that requires grad; its detached view shares the
            # storage, so the kernel reads and writes the same memory (upstream passes data_ptr).
            obj = obj.detach()
        capsule = obj.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype = ctypes.c_void_p
        get.argtypes = [ctypes.py_object, ctypes.c_char_p]
        ptr = get(capsule, b"dltensor")
        self._capsule = capsule
        self._managed = ctypes.cast(ptr, ctypes.POINTER(_ffi.DLManagedTensor))
        # Consumed: the capsule's destructor must not free it; we call the
        # deleter ourselves in close().
        rename = ctypes.pythonapi.PyCapsule_SetName
        rename.restype = ctypes.c_int
        rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
        rename(capsule, b"used_dltensor")
        t = self._managed.contents.dl_tensor
        self.device_type = t.device.device_type
        self.data = (t.data or 0) + t.byte_offset
        self.dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.shape = [t.shape[i] for i in range(t.ndim)]
        self.strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None

    def close(self):
        m = self._managed.contents
        if m.deleter:
            m.deleter(self._managed)
        self._managed = None


class Prepared:
    """A kernel prepared for one device. Call it with arrays and scalars in
    parameter order; parameters listed in Kernel.out_idx may be omitted and
    are then allocated (numpy, on the CPU) and returned."""

    def __init__(self, kernel, device, handle):
        self.kernel = kernel
        self.device = device
        self._handle = handle
        self.variant = _variant_info(lambda vi: _lib.tl_prepared_variant_info(handle, vi))

    def __del__(self):
        try:
            _lib.tl_prepared_release(self._handle)
        except Exception:
            pass

    def explain(self):
        """Why this variant, and why each other one was rejected."""
        return _lib.tl_prepared_explain(self._handle).decode()

    def _bind(self, args):
        params = self.kernel.params
        n_out = len(self.kernel.out_idx)
        if len(args) == len(params):
            full, allocate = list(args), []
        elif len(args) == len(params) - n_out:
            it = iter(args)
            full = [None if p.index in self.kernel.out_idx else next(it) for p in params]
            allocate = list(self.kernel.out_idx)
        else:
            names = ", ".join(p.name for p in params)
            raise TypeError(f"kernel '{self.kernel.name}' takes {len(params)} arguments ({names}), or "
                            f"{len(params) - n_out} without its outputs {self.kernel.out_idx}; got {len(args)}")
        if allocate:
            symbols = {}
            for p, a in zip(params, full):
                if a is None:
                    continue
                if p.kind == "buffer":
                    shape = a.shape if hasattr(a, "shape") else None
                    if shape is not None and len(shape) == p.rank:
                        for dim, extent in zip(p.shape, shape):
                            if isinstance(dim, str):
                                symbols.setdefault(dim, int(extent))
                elif p.binds_symbol is not None and isinstance(a, (int, np.integer)):
                    symbols.setdefault(p.binds_symbol, int(a))
            for i in allocate:
                p = params[i]
                shape = []
                for dim in p.shape:
                    if isinstance(dim, str):
                        if dim not in symbols:
                            raise TypeError(f"kernel '{self.kernel.name}': cannot allocate output '{p.name}': "
                                            f"symbol '{dim}' is not bound by any input")
                        shape.append(symbols[dim])
                    else:
                        shape.append(dim)
                if p.np_dtype is None:
                    raise TypeError(f"kernel '{self.kernel.name}': cannot allocate output '{p.name}' of dtype "
                                    f"{p.dtype} with numpy")
                full[i] = np.empty(shape, dtype=p.np_dtype)
        return full, allocate

    def __call__(self, *args, grid=None, stream=None):
        full, allocated = self._bind(args)
        host_arrays = self.device.backend != "cpu" and any(isinstance(a, np.ndarray) for a in full)
        host_tensors = self.device.backend == "vulkan" and any(_is_host_dlpack(a) for a in full)
        if stream is not None and (allocated or host_arrays or host_tensors or _FORCE_STAGING):
            raise TypeError("queued launches take every argument, as device memory: outputs cannot be allocated "
                            "and numpy arrays cannot be staged for a stream (nor host DLPack tensors)")
        params = self.kernel.params
        c_args = (_ffi.Arg * len(full))()
        keep, views, staged = [], [], []
        try:
            for i, (p, a) in enumerate(zip(params, full)):
                c = c_args[i]
                if p.kind == "scalar":
                    self._scalar(c, p, a)
                else:
                    self._tensor(c, p, a, keep, views, staged)
            opts = None
            if grid is not None:
                g = list(grid) + [1] * (3 - len(grid))
                opts = _ffi.LaunchOptions()
                opts.struct_size = ctypes.sizeof(opts)
                for k in range(3):
                    opts.grid[k] = int(g[k])
                opts = ctypes.byref(opts)
            _check(_lib.tl_launch(self._handle, stream._handle if stream else None, len(full), c_args, opts))
            if stream is not None:
                stream._pending.append(keep)
            for p, array, buf, target in staged:  # results back into the host arrays and tensors
                if p.access in ("write", "read_write") and array.nbytes:
                    _check(_lib.tl_buffer_copy_to_host(buf, 0, array.ctypes.data, array.nbytes, None))
                    if target is not None and not np.shares_memory(target, array):
                        np.copyto(target, array)
        finally:
            for _, _, buf, _ in staged:
                _lib.tl_buffer_release(buf)
            for v in views:
                v.close()
        if not allocated:
            return None
        outs = [full[i] for i in allocated]
        return outs[0] if len(outs) == 1 else tuple(outs)

    @staticmethod
    def _scalar(c, p, a):
        code, bits, lanes = p.dl_dtype
        c.kind = _ffi.ARG_SCALAR
        c.dtype.code, c.dtype.bits, c.dtype.lanes = code, bits, lanes
        if isinstance(a, np.generic):
            dl = _NP_TO_DL.get(a.dtype)
            if dl is not None and dl != (code, bits):
                c.dtype.code, c.dtype.bits = dl  # let the runtime report the mismatch with numbers
            raw = a.tobytes()
        else:
            np_dtype = p.np_dtype
            if np_dtype is None:
                raise TypeError(f"parameter '{p.name}': no numpy type for {p.dtype}")
            raw = np.array(a, dtype=np_dtype).tobytes()
        c.scalar_size = len(raw)
        ctypes.memmove(c.value.bytes, raw, min(len(raw), 8))

    def _stage(self, p, a, staged, target=None):
        """Copies a host array into a new device buffer; returns its device pointer.
        Written parameters are copied back into `a`, then into `target` when given
        (the strided host tensor `a` is a contiguous copy of)."""
        if not a.flags.c_contiguous:
            raise TypeError(f"parameter '{p.name}': staging to device {self.device.backend} needs a C-contiguous "
                            f"array (strides {a.strides})")
        buf = ctypes.c_void_p()
        _check(_lib.tl_buffer_allocate(self.device._handle, a.nbytes, ctypes.byref(buf)))
        staged.append((p, a, buf, target))
        if a.nbytes:
            _check(_lib.tl_buffer_copy_from_host(buf, 0, a.ctypes.data, a.nbytes, None))
        return _lib.tl_buffer_device_pointer(buf)

    @staticmethod
    def _dlpack_host_array(p, v):
        """A numpy view of a host DLPack tensor's memory (strides honoured)."""
        code, bits, lanes = v.dtype
        np_dtype = _DL_TO_NP.get((code, bits)) if lanes == 1 else None
        if np_dtype is None and code == 4 and bits == 16 and lanes == 1:
            np_dtype = np.dtype(np.uint16)  # bfloat16: the bit patterns
        if np_dtype is None:
            raise TypeError(f"parameter '{p.name}': DLPack dtype {_dtype_name(code, bits, lanes)} cannot be staged "
                            f"from host memory")
        shape = [int(n) for n in v.shape]
        item = np_dtype.itemsize
        strides = [int(s) for s in v.strides] if v.strides is not None else None
        if strides is None:  # compact row-major
            strides, acc = [0] * len(shape), 1
            for i in range(len(shape) - 1, -1, -1):
                strides[i], acc = acc, acc * shape[i]
        if any(s < 0 for s in strides):
            raise TypeError(f"parameter '{p.name}': negative DLPack strides {strides} cannot be staged")
        count = 0 if any(n == 0 for n in shape) else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        if count == 0:
            return np.empty(shape, dtype=np_dtype)
        base = np.frombuffer((ctypes.c_char * (count * item)).from_address(v.data), dtype=np_dtype)
        return np.lib.stride_tricks.as_strided(base, shape=shape, strides=[s * item for s in strides])

    def _tensor(self, c, p, a, keep, views, staged):
        c.kind = _ffi.ARG_TENSOR
        if isinstance(a, np.ndarray):
            dl = _NP_TO_DL.get(a.dtype)
            if dl is None:
                raise TypeError(f"parameter '{p.name}': numpy dtype {a.dtype} has no runtime dtype")
            if self.device.backend != "cpu" or _FORCE_STAGING:
                # Host memory for a device: copied in, and written parameters
                # copied back after the (synchronous) launch.
                data = self._stage(p, a, staged)
            else:
                data = a.ctypes.data
            shape = list(a.shape)
            strides = [s // a.itemsize for s in a.strides] if a.itemsize else None
            if any(s % a.itemsize for s in a.strides):
                raise TypeError(f"parameter '{p.name}': strides {a.strides} are not multiples of the item size")
            code, bits, lanes = dl[0], dl[1], 1
            keep.append(a)
        elif hasattr(a, "__dlpack__"):
            v = _DLPackView(a)
            views.append(v)
            want = {"cpu": (_ffi.DL_CPU, _ffi.DL_CUDA_HOST), "cuda": (_ffi.DL_CUDA,), "hip": (_ffi.DL_ROCM,),
                    "vulkan": (_ffi.DL_VULKAN,)}
            backend = self.device.backend
            if backend == "vulkan" and v.device_type in (_ffi.DL_CPU, _ffi.DL_CUDA_HOST):
                # Host tensors (torch CPU tensors: torch has no Vulkan device) are staged
                # as numpy arrays are: copied into a device buffer, and written
                # parameters copied back into the tensor after the synchronous launch.
                host = self._dlpack_host_array(p, v)
                data = self._stage(p, np.ascontiguousarray(host), staged, host)
                shape, strides = list(host.shape), None
            elif v.device_type not in want.get(backend, ()):
                names = {_ffi.DL_CPU: "CPU", _ffi.DL_CUDA: "CUDA", _ffi.DL_CUDA_HOST: "CUDA host (pinned)",
                         _ffi.DL_ROCM: "ROCm", _ffi.DL_VULKAN: "Vulkan"}
                where = names.get(v.device_type, f"DLPack device type {v.device_type}")
                hint = (" (move it with .to('cuda') first, or pass a numpy array to have it copied)"
                        if backend in ("cuda", "hip") and v.device_type in (_ffi.DL_CPU, _ffi.DL_CUDA_HOST) else "")
                raise TypeError(f"parameter '{p.name}': a {where} tensor (DLPack device type {v.device_type}) "
                                f"cannot be used on device {backend}:{self.device.ordinal}{hint}")
            else:
                data, shape, strides = v.data, v.shape, v.strides
            code, bits, lanes = v.dtype
        else:
            raise TypeError(f"parameter '{p.name}': expected a numpy array or a __dlpack__ object, "
                            f"got {type(a).__name__}")
        c.dtype.code, c.dtype.bits, c.dtype.lanes = code, bits, lanes
        shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        keep.append(shape_arr)
        c.tensor.data = data
        c.tensor.rank = len(shape)
        c.tensor.shape = shape_arr
        if strides is not None:
            strides_arr = (ctypes.c_int64 * max(len(strides), 1))(*strides)
            keep.append(strides_arr)
            c.tensor.strides = strides_arr
