"""tilelang.contrib: the helpers upstream programs import from here (nvcc's compute version)."""
