"""JITKernel: a compiled kernel callable with numpy arrays.

Arguments are the prim_func's parameters minus the outputs named by out_idx;
outputs are allocated here (shape from the signature, dynamic symbols bound
from the inputs) and returned. Tensors are passed without copies, so a
parameter that is not an output may be written in place (split-K's C).
"""

import os
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


def _runtime():
    try:
        import tilelang_runtime
    except ImportError as e:
        raise TileLangRuntimeError(f"the runtime binding tilelang_runtime is not importable ({e}); "
                                   "build the project and put build/python on PYTHONPATH") from None
    return tilelang_runtime


class JITKernel:
    def __init__(self, prim_func, bundle_path, out_idx, target, isa, ir_text):
        self.prim_func = prim_func
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
            self._rt = rt_mod.Runtime()
            bundle = self._rt.open_bundle(self.bundle_path)
            kernel = bundle.kernel(self.prim_func.name)
            # The bundle holds variants for this target only, so ask for its device kind.
            device = self._rt.device(self.target) if self.target == "cpu" else self._rt.best_device()
            self._prepared = kernel.prepare(device)
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
        for i, a in zip(inputs, args):
            p = self.params[i]
            if isinstance(p, Buffer):
                a = self._check_tensor(p, a, env, np)
            else:
                if not isinstance(a, (int, float, bool, np.generic)):
                    raise TileLangError(f"{p.name}: expected a scalar, got {type(a).__name__}")
            full[i] = a
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
            arr = np.zeros(shape, dtype=NUMPY_DTYPE[p.dtype.ir])
            full[i] = arr
            outs.append(arr)
        self._prepare()(*[self._to_runtime(p, a) for p, a in zip(self.params, full)])
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _to_runtime(self, p, a):
        if isinstance(p, Buffer) and p.dtype.ir == "bf16":
            from tilelang_runtime import _ffi
            return _BFloat16Tensor(a, _ffi)
        return a

    def _check_tensor(self, p, a, env, np):
        if not isinstance(a, np.ndarray):
            raise TileLangError(f"{p.name}: expected a numpy array, got {type(a).__name__}")
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

    # -- artefacts
    def get_kernel_source(self):
        """The code the backend generated (tl-pack compile --emit-source)."""
        if self._source is None:
            from .compiler import compile_ir
            with tempfile.TemporaryDirectory(prefix="tilelang-src-") as d:
                compile_ir(self.ir_text, self.target, self.isa, emit_source_dir=d)
                parts = []
                for root, _, files in sorted(os.walk(d)):
                    for f in sorted(files):
                        path = os.path.join(root, f)
                        with open(path, errors="replace") as fh:
                            parts.append(fh.read() if len(files) == 1 and root == d
                                         else f"// ---- {os.path.relpath(path, d)}\n{fh.read()}")
                self._source = "\n".join(parts)
        return self._source

    def get_tile_ir(self):
        return self.ir_text

    def export_bundle(self, path):
        shutil.copyfile(self.bundle_path, path)
        return path
