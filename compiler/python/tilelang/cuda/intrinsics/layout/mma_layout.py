"""tilelang.cuda.intrinsics.layout.mma_layout: stand-ins (see tilelang._unsupported)."""

from tilelang._unsupported import module_getattr

__getattr__ = module_getattr("tilelang.cuda.intrinsics.layout.mma_layout", "upstream's PTX-level intrinsic helpers; use T.gemm")
