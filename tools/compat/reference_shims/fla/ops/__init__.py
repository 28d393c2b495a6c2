"""fla.ops of the reference stand-in (tools/compat/reference_shims/README.md)."""
