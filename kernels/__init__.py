"""The standard kernel library, written in the tile language.

Each module holds kernel factories (functions returning a `T.prim_func`) with
documented parameters, and a numpy reference beside each factory. The package
manifest `manifest.json` lists the instances that `tl-pack build` packs into
`tilelang-std.tlb`.
"""
