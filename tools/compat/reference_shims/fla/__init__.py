"""Reference stand-in for the `fla` package (flash-linear-attention): only what upstream TileLang's
linear_attention examples import. See tools/compat/reference_shims/README.md."""

__version__ = "0.0.0+tl-compat-reference"
TL_COMPAT_REFERENCE = True
