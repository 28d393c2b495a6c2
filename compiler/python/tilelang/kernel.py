"""JITKernel: a compiled kernel callable with numpy arrays or DLPack tensors.

Arguments are the prim_func's parameters minus the outputs named by out_idx;
outputs are allocated here (shape from the signature, dynamic symbols bound
from the inputs) and returned. On the CPU tensors are passed without copies,
so a parameter that is not an output may be written in place (split-K's C).

target "cuda": the kernel is prepared on a CUDA device (TL_DEVICE picks one,
e.g. cuda:1; else cuda:0). numpy arrays are staged through device buffers by
the binding and copied back after the launch (numpy in -> numpy out); DLPack
tensors on the device (torch CUDA tensors) are passed as they are, and outputs
are then allocated with torch on the same device (torch in -> torch out).
"""

import os
import sys
import shutil
import tempfile

from . import expr as E
from .buffer import Buffer
from .errors import TileLangError, TileLangRuntimeError

# Tile IR dtype -> numpy dtype name. numpy has no bfloat16: bf16 tensors are uint16 bit patterns.
NUMPY_DTYPE = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
               "bf16": "uint16", "f32": "float32", "f64": "float64"}


class _BFloat16Tensor:
    """A uint16 numpy array presented to the runtime as bfloat16 through DLPack.

    numpy has no bfloat16, so bf16 data travels as uint16 bit patterns; the
    runtime checks dtypes exactly, so the array is described as DLPack
    bfloat16 (code 4, 16 bits) over the same memory, without a copy.
    """

    def __init__(self, array, ffi):
        import ctypes
        self.array = array
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self._managed = ffi.DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = array.ctypes.data
        t.device.device_type, t.device.device_id = ffi.DL_CPU, 0
        t.ndim = array.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 4, 16, 1
        t.shape = self._shape
        t.byte_offset = 0
        deleter_type = dict(ffi.DLManagedTensor._fields_)["deleter"]
        self._deleter = deleter_type(lambda managed: None)  # the array owns the memory
        self._managed.deleter = self._deleter

    def __dlpack__(self, stream=None):
        import ctypes
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


class _StagedBFloat16:
    """A uint16 numpy array copied into a device buffer and presented as bfloat16
    through DLPack (the binding stages numpy arrays only under their own dtype,
    and numpy has no bfloat16); copy_back() brings written data home."""

    def __init__(self, array, device, ffi):
        import ctypes
        import tilelang_runtime as tlr
        self.array = array
        self._lib, self._check = tlr._lib, tlr._check
        self._buf = ctypes.c_void_p()
        self._check(self._lib.tl_buffer_allocate(device._handle, array.nbytes, ctypes.byref(self._buf)))
        if array.nbytes:
            self._check(self._lib.tl_buffer_copy_from_host(self._buf, 0, array.ctypes.data, array.nbytes, None))
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self._managed = ffi.DLManagedTensor()
        t = self._managed.dl_tensor
        t.data = self._lib.tl_buffer_device_pointer(self._buf)
        dl_type = {"cuda": ffi.DL_CUDA, "hip": ffi.DL_ROCM, "vulkan": ffi.DL_VULKAN}.get(device.backend, ffi.DL_CPU)
        t.device.device_type, t.device.device_id = dl_type, device.ordinal
        self._dl_device = (dl_type, device.ordinal)
        t.ndim = array.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 4, 16, 1
        t.shape = self._shape
        t.byte_offset = 0
        deleter_type = dict(ffi.DLManagedTensor._fields_)["deleter"]
        self._deleter = deleter_type(lambda managed: None)  # the buffer is released in close()
        self._managed.deleter = self._deleter

    def __dlpack__(self, stream=None):
        import ctypes
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        return self._dl_device

    def copy_back(self):
        if self.array.nbytes:
            self._check(self._lib.tl_buffer_copy_to_host(self._buf, 0, self.array.ctypes.data, self.array.nbytes,
                                                         None))

    def close(self):
        if self._buf:
            self._lib.tl_buffer_release(self._buf)
            self._buf = None


def _runtime():
    try:
        import tilelang_runtime
    except ImportError as e:
        raise TileLangRuntimeError(f"the runtime binding tilelang_runtime is not importable ({e}); "
                                   "build the project and put build/python on PYTHONPATH") from None
    return tilelang_runtime


_SHARED_RUNTIME = None


def shared_runtime():
    """One runtime per process (one CUDA context per device, not one per kernel)."""
    global _SHARED_RUNTIME
    if _SHARED_RUNTIME is None:
        rt_mod = _runtime()
        try:
            _SHARED_RUNTIME = rt_mod.Runtime()
        except rt_mod.TLError as e:
            raise TileLangRuntimeError(f"cannot create the runtime: {e}") from None
    return _SHARED_RUNTIME


def _is_torch(a):
    return type(a).__module__.startswith("torch")


# Tile IR dtype -> torch dtype attribute name.
TORCH_DTYPE = {"bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
               "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16",
               "f32": "float32", "f64": "float64"}


class JITKernel:
    def __init__(self, prim_func, bundle_path, out_idx, target, isa, ir_text, kernel_name=None, kernel_names=None):
        self.prim_func = prim_func
        self.kernel_name = kernel_name or prim_func.name  # the bundle's (CUDA: `main` -> `main_kernel`)
        # A function with several T.Kernel blocks: one bundle kernel each, launched in order.
        self.kernel_names = list(kernel_names or [self.kernel_name])
        self._derived = prim_func.attrs.get("derived", [])  # workspaces and views (derived.py)
        self.bundle_path = bundle_path
        self.target = target
        self.isa = isa
        self.ir_text = ir_text
        self.params = prim_func.params
        n = len(self.params)
        if out_idx is None:
            out_idx = []
        elif isinstance(out_idx, int):
            out_idx = [out_idx]
        norm = []
        for i in out_idx:
            if not -n <= i < n:
                raise TileLangError(f"out_idx {i} out of range for {n} parameters")
            if not isinstance(self.params[i % n], Buffer):
                raise TileLangError(f"out_idx {i} names scalar parameter {self.params[i % n].name}")
            norm.append(i % n)
        self.out_idx = sorted(set(norm))
        self._source = None
        self._prepared = None
        self._rt = None

    # -- runtime
    def _prepare(self):
        if self._prepared is None:
            rt_mod = _runtime()
            self._rt = shared_runtime()
            # The bundle holds variants for this target only, so ask for its device kind.
            if self.target == "cpu":
                spec = "cpu"
            else:
                status = self._rt.backend_status(self.target)
                if status:
                    raise TileLangRuntimeError(f"target {self.target}: no device to run on: {status}")
                env = os.environ.get("TL_DEVICE", "")
                spec = env if env.split(":")[0] == self.target else self.target
            try:
                device = self._rt.device(spec)
                bundle = self._rt.open_bundle(self.bundle_path)
                self._prepared_all = [bundle.kernel(n).prepare(device) for n in self.kernel_names]
                self._prepared = self._prepared_all[0]
            except rt_mod.TLError as e:
                raise TileLangRuntimeError(f"target {self.target}: cannot prepare {', '.join(self.kernel_names)} "
                                           f"on {spec}: {e}") from None
        return self._prepared

    def explain(self):
        return self._prepare().explain()

    def __call__(self, *args):
        import numpy as np
        inputs = [i for i in range(len(self.params)) if i not in self.out_idx]
        if len(args) != len(inputs):
            names = ", ".join(self.params[i].name for i in inputs)
            raise TileLangError(f"{self.prim_func.name} takes {len(inputs)} arguments ({names}), got {len(args)}")
        full = [None] * len(self.params)
        env = {}
        torch_like = next((a for a in args if _is_torch(a)), None)
        for i, a in zip(inputs, args):
            p = self.params[i]
            if isinstance(p, Buffer):
                a = self._check_tensor(p, a, env, np)
            else:
                if not isinstance(a, (int, float, bool, np.generic)):
                    raise TileLangError(f"{p.name}: expected a scalar, got {type(a).__name__}")
            full[i] = a
        if self.prim_func.attrs.get("symbol_exprs"):  # output dims computed from other symbols
            from .derived import evaluate
            for sym, expr in self.prim_func.attrs["symbol_exprs"]:
                env[sym.name] = evaluate(expr, env)
        outs = []
        for i in self.out_idx:
            p = self.params[i]
            shape = []
            for d in p.shape:
                n = E.const_int(d)
                if n is None:
                    if d.name not in env:
                        raise TileLangError(f"output {p.name}: symbol {d.name} is not bound by any input")
                    n = env[d.name]
                shape.append(n)
            if torch_like is not None:  # torch in -> torch out, on the inputs' device
                import torch
                arr = torch.zeros(shape, dtype=getattr(torch, TORCH_DTYPE[p.dtype.ir]), device=torch_like.device)
            else:
                arr = np.zeros(shape, dtype=NUMPY_DTYPE[p.dtype.ir])
            full[i] = arr
            if torch_like is not None and p.dtype.kind == "q":  # fp8: bytes for the kernel, torch's fp8 out
                arr = arr.view(getattr(torch, str(p.dtype)))
            outs.append(arr)
        if self._derived:  # T.alloc_global workspaces and buffer views, after the program's own
            from .derived import call_arrays
            full = full + call_arrays(self._derived, self.params, full, env, torch_like)
        prepared = self._prepare()
        staged = []
        on_torch_cuda = torch_like is not None and getattr(torch_like, "is_cuda", False)
        stream = self._torch_stream(prepared, torch_like, full) if on_torch_cuda else None
        if on_torch_cuda and stream is None:  # torch's queued work (outputs' zeros, inputs) before our launch
            import torch
            torch.cuda.synchronize(torch_like.device)
        try:
            device = getattr(prepared, "device", None)
            args = [self._to_runtime(p, a, device, staged) for p, a in zip(self.prim_func.function.params, full)]
            # One per T.Kernel, in program order (one stream: ordered).
            for each in getattr(self, "_prepared_all", None) or [prepared]:
                if stream is not None:
                    stream._pending.clear()  # torch's allocator orders reuse on this stream; keep nothing
                    each(*args, stream=stream)
                else:
                    each(*args)
                for s in staged:
                    s.copy_back()
        finally:
            for s in staged:
                s.close()
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    _TORCH_STREAMS = {}

    @classmethod
    def _torch_stream(cls, prepared, torch_like, full):
        """A runtime stream over torch's current CUDA stream (launches queue after torch's work
        there, without a host synchronization), or None for the synchronous path: numpy
        arguments (staged through host copies), another device than the kernel's, or
        TL_TORCH_STREAM=0."""
        import numpy as np
        device = getattr(prepared, "device", None)
        if os.environ.get("TL_TORCH_STREAM", "1") == "0" or device is None or device.backend != "cuda":
            return None
        if any(isinstance(a, np.ndarray) for a in full) or torch_like.device.index != device.ordinal:
            return None
        import torch
        handle = int(torch.cuda.current_stream(torch_like.device).cuda_stream)
        key = (device.ordinal, handle)
        stream = cls._TORCH_STREAMS.get(key)
        if stream is None:
            import tilelang_runtime
            stream = cls._TORCH_STREAMS[key] = tilelang_runtime.Stream(device, native=handle)
        return stream

    def _to_runtime(self, p, a, device, staged):
        import numpy as np
        if isinstance(p, Buffer) and p.dtype.ir == "bf16" and isinstance(a, np.ndarray):
            from tilelang_runtime import _ffi
            if device is None or device.backend == "cpu":
                return _BFloat16Tensor(a, _ffi)
            s = _StagedBFloat16(a, device, _ffi)
            staged.append(s)
            return s
        return a

    def _check_tensor(self, p, a, env, np):
        if not isinstance(a, np.ndarray):
            if hasattr(a, "__dlpack__") and hasattr(a, "shape"):
                return self._check_dlpack(p, a, env)
            raise TileLangError(f"{p.name}: expected a numpy array or a DLPack tensor, got {type(a).__name__}")
        want = np.dtype(NUMPY_DTYPE[p.dtype.ir])
        if a.dtype != want:
            raise TileLangError(f"{p.name}: dtype {a.dtype} does not match {p.dtype} (numpy {want})")
        if a.ndim != len(p.shape):
            raise TileLangError(f"{p.name}: rank {a.ndim} does not match {len(p.shape)}")
        if not a.flags.c_contiguous:
            raise TileLangError(f"{p.name}: array must be C-contiguous (use np.ascontiguousarray)")
        for d, (dim, n) in enumerate(zip(p.shape, a.shape)):
            c = E.const_int(dim)
            if c is not None and c != n:
                raise TileLangError(f"{p.name}: dimension {d} is {n}, expected {c}")
            if c is None:
                if dim.name in env and env[dim.name] != n:
                    raise TileLangError(f"{p.name}: dimension {d} is {n}, but {dim.name} = {env[dim.name]}")
                env[dim.name] = n
        return a

    def _check_dlpack(self, p, a, env):
        """A DLPack tensor (torch, ...): rank, static dims and symbols here; dtype, strides
        and device are checked by the runtime, which names the argument."""
        shape = tuple(int(n) for n in a.shape)
        if _is_torch(a):
            if p.dtype.kind == "q" and str(a.dtype) == f"torch.{p.dtype}":
                a = a.view(getattr(sys.modules["torch"], "uint8"))  # fp8: its bytes (Tile IR holds u8 patterns)
            want = TORCH_DTYPE[p.dtype.ir]
            if str(a.dtype) != "torch." + want:
                raise TileLangError(f"{p.name}: dtype {a.dtype} does not match {p.dtype} (torch.{want})")
            if not a.is_contiguous():
                raise TileLangError(f"{p.name}: tensor must be contiguous (use .contiguous())")
        if len(shape) != len(p.shape):
            raise TileLangError(f"{p.name}: rank {len(shape)} does not match {len(p.shape)}")
        for d, (dim, n) in enumerate(zip(p.shape, shape)):
            c = E.const_int(dim)
            if c is not None and c != n:
                raise TileLangError(f"{p.name}: dimension {d} is {n}, expected {c}")
            if c is None:
                if dim.name in env and env[dim.name] != n:
                    raise TileLangError(f"{p.name}: dimension {d} is {n}, but {dim.name} = {env[dim.name]}")
                env[dim.name] = n
        return a

    # -- artefacts
    def get_kernel_source(self):
        """The code the backend generated (tl-pack compile --emit-source): C++ for the CPU,
        CUDA C++ for CUDA."""
        if self._source is None:
            from .compiler import compile_ir
            with tempfile.TemporaryDirectory(prefix="tilelang-src-") as d:
                compile_ir(self.ir_text, self.target, self.isa, emit_source_dir=d,
                           build_env=getattr(self, "build_env", None))
                parts = []
                want = (".cu",) if self.target == "cuda" else (".cc", ".cpp", ".c", ".h")
                for root, _, files in sorted(os.walk(d)):
                    files = [f for f in files if f.endswith(want)] or files
                    for f in sorted(files):
                        path = os.path.join(root, f)
                        with open(path, errors="replace") as fh:
                            parts.append(fh.read() if len(files) == 1 and root == d
                                         else f"// ---- {os.path.relpath(path, d)}\n{fh.read()}")
                self._source = "\n".join(parts)
        return self._source

    def get_profiler(self, tensor_supply_type=None):
        """A tilelang.profiler.Profiler over this kernel (inputs, reference checks, timing)."""
        from .profiler import Profiler, TensorSupplyType
        return Profiler(self, tensor_supply_type or TensorSupplyType.Auto)

    kernel_source = property(lambda self: self.get_kernel_source())

    def get_tile_ir(self):
        return self.ir_text

    def export_bundle(self, path):
        shutil.copyfile(self.bundle_path, path)
        return path
