"""tilelang.layout: upstream's layout helpers, as hints (the compiler chooses its own layouts)."""

from .language.annotations import make_swizzled_layout  # noqa: F401
