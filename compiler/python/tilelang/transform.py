"""tilelang.transform: upstream's pass-configuration keys (the passes themselves are C++ here)."""

from .pass_config import PassConfigKey  # noqa: F401
