// Finds libtilelang_runtime.so (std only, no crates):
//  1. TL_RUNTIME_LIB_DIR: the directory holding the library (e.g. build/lib);
//  2. otherwise pkg-config's `tilelang-runtime` (PKG_CONFIG_PATH may point at
//     an install prefix's lib/pkgconfig, or at build/lib/pkgconfig for the
//     build tree).
// The header directory (for the layout test) comes from TL_RUNTIME_INCLUDE_DIR,
// else pkg-config's cflags, else the repository's runtime/include.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(args)
        .arg("tilelang-runtime")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    for v in ["TL_RUNTIME_LIB_DIR", "TL_RUNTIME_INCLUDE_DIR", "PKG_CONFIG_PATH", "PKG_CONFIG"] {
        println!("cargo:rerun-if-env-changed={}", v);
    }
    let lib_dir = match env::var("TL_RUNTIME_LIB_DIR") {
        Ok(d) if !d.is_empty() => Some(d),
        _ => pkg_config(&["--variable=libdir"]).filter(|s| !s.is_empty()),
    };
    let lib_dir = match lib_dir {
        Some(d) => d,
        None => {
            let repo_lib = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../build/lib");
            if repo_lib.join("libtilelang_runtime.so").exists() {
                repo_lib.canonicalize().unwrap().to_string_lossy().into_owned()
            } else {
                panic!(
                    "libtilelang_runtime.so not found: set TL_RUNTIME_LIB_DIR to the directory holding it \
                     (e.g. <repo>/build/lib), or PKG_CONFIG_PATH so that `pkg-config tilelang-runtime` works"
                );
            }
        }
    };
    let include_dir = match env::var("TL_RUNTIME_INCLUDE_DIR") {
        Ok(d) if !d.is_empty() => d,
        _ => pkg_config(&["--variable=includedir"]).filter(|s| !s.is_empty()).unwrap_or_else(|| {
            let p = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../runtime/include");
            p.to_string_lossy().into_owned()
        }),
    };
    println!("cargo:rustc-link-search=native={}", lib_dir);
    println!("cargo:rustc-link-lib=dylib=tilelang_runtime");
    // This crate's own tests and examples run without LD_LIBRARY_PATH.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir);
    println!("cargo:rustc-env=TL_RUNTIME_INCLUDE_DIR={}", include_dir);
    println!("cargo:rustc-env=TL_RUNTIME_LIB_DIR={}", lib_dir);
    // Dependents (links = "tilelang_runtime") read DEP_TILELANG_RUNTIME_LIB_DIR.
    println!("cargo:lib_dir={}", lib_dir);
    println!("cargo:include_dir={}", include_dir);
}
