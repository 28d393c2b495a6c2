// The binding's build script found libtilelang_runtime.so (TL_RUNTIME_LIB_DIR
// or pkg-config) and tells dependents where through `links`: an rpath makes
// the example run without LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TILELANG_RUNTIME_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
