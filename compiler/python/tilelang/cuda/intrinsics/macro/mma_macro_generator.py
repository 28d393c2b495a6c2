"""tilelang.cuda.intrinsics.macro.mma_macro_generator: stand-ins (see tilelang._unsupported)."""

from tilelang._unsupported import module_getattr

__getattr__ = module_getattr("tilelang.cuda.intrinsics.macro.mma_macro_generator", "upstream's PTX-level intrinsic helpers; use T.gemm")
