"""fla.modules of the reference stand-in (tools/compat/reference_shims/README.md)."""
