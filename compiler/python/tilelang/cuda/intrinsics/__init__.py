"""tilelang.cuda.intrinsics: upstream's CUDA intrinsic helpers (PTX ldmatrix/mma macro generators, MMA layouts) are not
part of this project; names imported from here are stand-ins that raise "unsupported feature" when used."""

from tilelang._unsupported import module_getattr

__getattr__ = module_getattr("tilelang.cuda.intrinsics", "upstream's PTX-level intrinsic helpers; use T.gemm")
