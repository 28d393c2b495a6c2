// `tl-pack inspect --markdown`: a bundle's kernel catalogue as Markdown (kernels/CATALOGUE.md is
// this output for the standard library, so the documentation cannot drift from the bundle).
#pragma once

#include "verbs.h"

namespace tl::pack {

// Writes the catalogue of `b` to stdout: a summary table (kernel, factory, backends with a
// variant) and per kernel its parameters (name, dtype, shape with symbols, access), the shape
// rules (symbols, divisibility) and its variants. Deterministic: depends on the bundle only.
void PrintMarkdown(const LoadedBundle& b);

}  // namespace tl::pack
