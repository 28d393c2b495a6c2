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

/// Every enumerator and flag of the header against `sys` and the safe enums.
#[test]
fn constants_match_the_c_header() {
    use tilelang_runtime::{Backend, Code};
    let consts: Vec<(&str, i64)> = vec![
        ("TL_STATUS_OK", Code::Ok.raw() as i64),
        ("TL_STATUS_CANCELLED", Code::Cancelled.raw() as i64),
        ("TL_STATUS_UNKNOWN", Code::Unknown.raw() as i64),
        ("TL_STATUS_INVALID_ARGUMENT", Code::InvalidArgument.raw() as i64),
        ("TL_STATUS_DEADLINE_EXCEEDED", Code::DeadlineExceeded.raw() as i64),
        ("TL_STATUS_NOT_FOUND", Code::NotFound.raw() as i64),
        ("TL_STATUS_ALREADY_EXISTS", Code::AlreadyExists.raw() as i64),
        ("TL_STATUS_PERMISSION_DENIED", Code::PermissionDenied.raw() as i64),
        ("TL_STATUS_RESOURCE_EXHAUSTED", Code::ResourceExhausted.raw() as i64),
        ("TL_STATUS_FAILED_PRECONDITION", Code::FailedPrecondition.raw() as i64),
        ("TL_STATUS_ABORTED", Code::Aborted.raw() as i64),
        ("TL_STATUS_OUT_OF_RANGE", Code::OutOfRange.raw() as i64),
        ("TL_STATUS_UNIMPLEMENTED", Code::Unimplemented.raw() as i64),
        ("TL_STATUS_INTERNAL", Code::Internal.raw() as i64),
        ("TL_STATUS_UNAVAILABLE", Code::Unavailable.raw() as i64),
        ("TL_STATUS_DATA_LOSS", Code::DataLoss.raw() as i64),
        ("TL_STATUS_INCOMPATIBLE", Code::Incompatible.raw() as i64),
        ("TL_BACKEND_UNKNOWN", Backend::Unknown.raw() as i64),
        ("TL_BACKEND_CUDA", Backend::Cuda.raw() as i64),
        ("TL_BACKEND_HIP", Backend::Hip.raw() as i64),
        ("TL_BACKEND_VULKAN", Backend::Vulkan.raw() as i64),
        ("TL_BACKEND_CPU", Backend::Cpu.raw() as i64),
        ("TL_BACKEND_BIT(TL_BACKEND_VULKAN)", Backend::Vulkan.bit() as i64),
        ("TL_PARAM_BUFFER", TL_PARAM_BUFFER as i64),
        ("TL_PARAM_SCALAR", TL_PARAM_SCALAR as i64),
        ("TL_ACCESS_NONE", TL_ACCESS_NONE as i64),
        ("TL_ACCESS_READ", TL_ACCESS_READ as i64),
        ("TL_ACCESS_WRITE", TL_ACCESS_WRITE as i64),
        ("TL_ACCESS_READ_WRITE", TL_ACCESS_READ_WRITE as i64),
        ("TL_DTYPE_INT", TL_DTYPE_INT as i64),
        ("TL_DTYPE_UINT", TL_DTYPE_UINT as i64),
        ("TL_DTYPE_FLOAT", TL_DTYPE_FLOAT as i64),
        ("TL_DTYPE_BFLOAT", TL_DTYPE_BFLOAT as i64),
        ("TL_DTYPE_BOOL", TL_DTYPE_BOOL as i64),
        ("TL_RUNTIME_FLAG_DISABLE_JIT", TL_RUNTIME_FLAG_DISABLE_JIT as i64),
        ("TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT", TL_RUNTIME_FLAG_IGNORE_ENVIRONMENT as i64),
        ("TL_RUNTIME_FLAG_CPU_NO_MEMFD", TL_RUNTIME_FLAG_CPU_NO_MEMFD as i64),
        ("TL_DEVICE_FLAG_INTEGRATED", TL_DEVICE_FLAG_INTEGRATED as i64),
        ("TL_DEVICE_FLAG_SOFTWARE", TL_DEVICE_FLAG_SOFTWARE as i64),
        ("TL_DEVICE_FLAG_CAN_LAUNCH", TL_DEVICE_FLAG_CAN_LAUNCH as i64),
        ("TL_ARG_TENSOR", TL_ARG_TENSOR as i64),
        ("TL_ARG_SCALAR", TL_ARG_SCALAR as i64),
        ("TL_ABI_VERSION_MAJOR", TL_ABI_VERSION_MAJOR as i64),
        ("TL_ABI_VERSION_MINOR", TL_ABI_VERSION_MINOR as i64),
        ("TL_BACKEND_MASK_ALL", 0),
    ];
    let mut body = String::new();
    for (name, _) in &consts {
        body.push_str(&format!("  printf(\"%lld\\n\", (long long)({}));\n", name));
    }
    let program = format!("#include <stdio.h>\n#include \"tilelang/runtime.h\"\nint main(void) {{\n{}  return 0;\n}}\n", body);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("consts");
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("consts.c"), dir.join("consts"));
    std::fs::write(&src, program).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc).args(["-std=c99", "-Wall", "-Werror", "-I"]).arg(include_dir()).arg(&src).arg("-o").arg(&exe).status().unwrap();
    assert!(st.success());
    let out = String::from_utf8(Command::new(&exe).output().unwrap().stdout).unwrap();
    let values: Vec<i64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(values.len(), consts.len());
    let bad: Vec<String> = consts
        .iter()
        .zip(&values)
        .filter(|((_, r), c)| r != *c)
        .map(|((n, r), c)| format!("{}: C {}, Rust {}", n, c, r))
        .collect();
    assert!(bad.is_empty(), "constant mismatches:\n{}", bad.join("\n"));
    // The runtime's own names agree with the codes.
    assert_eq!(Code::InvalidArgument.name(), "INVALID_ARGUMENT");
    assert_eq!(Code::Incompatible.name(), "INCOMPATIBLE");
    assert_eq!(Code::Other(99).name(), "UNKNOWN_CODE");
    assert_eq!(Code::from_raw(18), Code::Incompatible);
}

#[test]
fn library_abi_major_matches_these_declarations() {
    assert_eq!(tilelang_runtime::abi_version() >> 16, TL_ABI_VERSION_MAJOR);
    assert!(!tilelang_runtime::runtime_version().is_empty());
}
