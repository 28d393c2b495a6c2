//! Checks every struct of `sys` against the C header: a C program compiled at
//! test time with `cc` prints sizeof/offsetof of each field, and the test
//! compares those numbers with the Rust declarations.
use std::collections::BTreeMap;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;
use tilelang_runtime::sys::*;

macro_rules! off {
    ($t:ty, $f:ident) => {{
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! on a field of an uninitialized value never reads it.
        let field = unsafe { std::ptr::addr_of!((*base).$f) };
        field as usize - base as usize
    }};
}

// (C type, [fields]) and the Rust numbers for each.
macro_rules! layouts {
    ($($t:ident { $($f:ident $(=> $cf:ident)?),* }),* $(,)?) => {{
        let mut c_lines = String::new();
        let mut rust = BTreeMap::new();
        $(
            c_lines.push_str(&format!("  printf(\"{0} size %zu\\n{0} align %zu\\n\", sizeof({0}), _Alignof({0}));\n", stringify!($t)));
            rust.insert(format!("{} size", stringify!($t)), size_of::<$t>());
            rust.insert(format!("{} align", stringify!($t)), align_of::<$t>());
            $(
                let cf = layouts!(@cname $f $(=> $cf)?);
                c_lines.push_str(&format!("  printf(\"{0}.{1} %zu\\n\", offsetof({0}, {1}));\n", stringify!($t), cf));
                rust.insert(format!("{}.{}", stringify!($t), cf), off!($t, $f));
            )*
        )*
        (c_lines, rust)
    }};
    (@cname $f:ident) => { stringify!($f) };
    (@cname $f:ident => $cf:ident) => { stringify!($cf) };
}

fn include_dir() -> PathBuf {
    PathBuf::from(env!("TL_RUNTIME_INCLUDE_DIR"))
}

#[test]
fn structs_match_the_c_header() {
    let (body, rust) = layouts!(
        tl_dtype_t { code, bits, lanes },
        tl_allocator_t { self_ => self, alloc, free },
        tl_runtime_options_t { struct_size, abi_version, backend_mask, cpu_thread_count, flags, log, log_user,
            log_level, reserved0, host_allocator, driver_search_paths, driver_search_path_count, cpu_cache_dir },
        tl_device_info_t { struct_size, backend, ordinal, flags, name, arch, memory_bytes, driver_version, compute_units },
        tl_param_info_t { struct_size, kind, name, dtype, access, rank, ptr_alignment, binds_symbol },
        tl_dim_info_t { struct_size, symbol, static_size, symbol_name, divisible_by, reserved },
        tl_variant_info_t { struct_size, backend, code_kind, priority, id, arch, entry_point, block, jit, shared_bytes },
        tl_tensor_t { data, rank, reserved, shape, strides },
        tl_arg_t { kind, dtype, scalar_size, reserved, tensor, value },
        tl_launch_options_t { struct_size, grid, flags },
    );
    let extra = "  printf(\"tl_status_code_t size %zu\\n\", sizeof(tl_status_code_t));\n\
                 printf(\"tl_arg_t.value.i32 %zu\\n\", offsetof(tl_arg_t, value.i32));\n\
                 printf(\"ABI %u\\n\", (unsigned)TL_ABI_VERSION);\n\
                 printf(\"TL_BACKEND_CPU %d\\nTL_STATUS_INCOMPATIBLE %d\\nTL_DTYPE_BFLOAT %d\\n\", TL_BACKEND_CPU, TL_STATUS_INCOMPATIBLE, TL_DTYPE_BFLOAT);\n\
                 printf(\"TL_RUNTIME_FLAG_CPU_NO_MEMFD %u\\nTL_DEVICE_FLAG_CAN_LAUNCH %u\\n\", TL_RUNTIME_FLAG_CPU_NO_MEMFD, TL_DEVICE_FLAG_CAN_LAUNCH);\n";
    let program = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"tilelang/runtime.h\"\nint main(void) {{\n{}{}  return 0;\n}}\n",
        body, extra
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("layout");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "{} failed on {}", cc, src.display());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut c: BTreeMap<String, usize> = BTreeMap::new();
    for line in text.lines() {
        let (k, v) = line.rsplit_once(' ').unwrap();
        c.insert(k.to_string(), v.parse().unwrap());
    }
    let mut mismatches = Vec::new();
    for (k, v) in &rust {
        match c.get(k) {
            Some(cv) if cv == v => {}
            other => mismatches.push(format!("{}: C {:?}, Rust {}", k, other, v)),
        }
    }
    assert!(mismatches.is_empty(), "layout mismatches:\n{}", mismatches.join("\n"));
    assert!(rust.len() > 60, "only {} layout facts compared", rust.len());
    assert_eq!(c["tl_status_code_t size"], size_of::<tl_status_code_t>());
    assert_eq!(c["tl_arg_t.value.i32"], off!(tl_arg_t, value));
    assert_eq!(c["ABI"] as u32, TL_ABI_VERSION);
    assert_eq!(c["TL_BACKEND_CPU"] as u32, TL_BACKEND_CPU);
    assert_eq!(c["TL_STATUS_INCOMPATIBLE"], 18);
    assert_eq!(c["TL_DTYPE_BFLOAT"] as u8, TL_DTYPE_BFLOAT);
    assert_eq!(c["TL_RUNTIME_FLAG_CPU_NO_MEMFD"] as u64, TL_RUNTIME_FLAG_CPU_NO_MEMFD);
    assert_eq!(c["TL_DEVICE_FLAG_CAN_LAUNCH"] as u32, TL_DEVICE_FLAG_CAN_LAUNCH);
}

#[test]
fn library_abi_major_matches_these_declarations() {
    assert_eq!(tilelang_runtime::abi_version() >> 16, TL_ABI_VERSION_MAJOR);
    assert!(!tilelang_runtime::runtime_version().is_empty());
}
