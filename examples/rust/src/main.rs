//! Loads a TileLang bundle, runs GEMM and softmax on the best device present
//! (falling back to the CPU when the bundle has no variant for it), checks
//! the results against plain Rust references on random inputs, and prints
//! the runtime's explanation of each variant choice.
//!
//!   run_bundle BUNDLE.tlb [DEVICE]
//!
//! BUNDLE: e.g. `build/bin/tl-pack build kernels/manifest.json -o std.tlb`
//! (kernels gemm_f32_nn and softmax_f32_1024) or the runtime's test bundle
//! (kernel gemm; no softmax). DEVICE: "cpu", "cuda:0", ... (default: best).
//! Exit status 0 when every kernel run matched its reference.
//!
//! A bundle with CUDA variants too (the CUDA backend needs static shapes):
//!
//!   PYTHONPATH=build/python:. python3 -m tilelang.emit_ir --module kernels.gemm \
//!     --factory matmul --kwargs '{"M": 256, "N": 512, "K": 512}' --name gemm_f32_nn > gemm.tir
//!   (softmax likewise, with {"M": 64, "N": 1024})
//!   build/bin/tl-pack compile gemm.tir softmax.tir --target cpu,sm_90a -o gpu.tlb
//!
//! On an H200 both kernels ran as `cuda.sm_90a` (host slices staged through
//! device buffers) and matched the references.
use std::process::ExitCode;
use tilelang_runtime::{Arg, Bundle, Code, Device, Kernel, Param, Prepared, Runtime};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// xorshift64*, enough for test data without crates.
struct Rng(u64);
impl Rng {
    fn f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545F4914F6CDD1D);
        ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

/// Concrete sizes for a buffer parameter: static dims as declared, symbols
/// from `symbols` (rounded up to the dimension's divisibility).
fn shape_of(p: &Param, symbols: &mut Vec<Option<usize>>, want: &dyn Fn(&str) -> usize) -> Vec<usize> {
    p.dims
        .iter()
        .map(|d| {
            if let Some(s) = d.static_size {
                return s as usize;
            }
            let (idx, name) = d.symbol.clone().expect("a dynamic dim binds a symbol");
            if symbols.len() <= idx {
                symbols.resize(idx + 1, None);
            }
            *symbols[idx].get_or_insert_with(|| {
                let div = d.divisible_by.max(1) as usize;
                (want(&name) + div - 1) / div * div
            })
        })
        .collect()
}

/// Prepares on `dev`. On a GPU, when the bundle has no usable variant for it
/// (INCOMPATIBLE) or its code does not load, says why and uses the CPU.
fn prepare(rt: &Runtime, kernel: &Kernel, dev: &Device) -> BoxResult<Prepared> {
    match kernel.prepare(dev) {
        Ok(p) => Ok(p),
        Err(e) if dev.backend() != tilelang_runtime::Backend::Cpu => {
            println!("  '{}' cannot run on {}: {}", kernel.name(), dev.info()?.name, e);
            println!("  falling back to the CPU");
            Ok(kernel.prepare(&rt.default_device(Some("cpu"))?)?)
        }
        Err(e) => Err(e.into()),
    }
}

fn find(bundle: &Bundle, prefer: &[&str]) -> BoxResult<Option<Kernel>> {
    for name in prefer {
        match bundle.kernel(name) {
            Ok(k) => return Ok(Some(k)),
            Err(e) if e.code() == Code::NotFound => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

fn max_rel_error(got: &[f32], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(&g, &w)| (g as f64 - w).abs() / (1.0 + w.abs())).fold(0.0, f64::max)
}

fn run_gemm(rt: &Runtime, dev: &Device, k: &Kernel, rng: &mut Rng) -> BoxResult<bool> {
    let params = k.params()?;
    if params.len() != 3 || params.iter().any(|p| p.dims.len() != 2) {
        return Err(format!("kernel '{}' is not gemm(A[M,K], B[K,N], C[M,N])", k.name()).into());
    }
    let mut syms = Vec::new();
    let want = |name: &str| if name == "M" { 200 } else { 96 };
    let sa = shape_of(&params[0], &mut syms, &want);
    let sb = shape_of(&params[1], &mut syms, &want);
    let sc = shape_of(&params[2], &mut syms, &want);
    let (m, kk, n) = (sa[0], sa[1], sb[1]);
    let a = rng.vec(m * kk);
    let b = rng.vec(kk * n);
    let mut c = vec![0f32; m * n];
    let p = prepare(rt, k, dev)?;
    let t = std::time::Instant::now();
    p.launch(&[Arg::tensor(&a, &sa), Arg::tensor(&b, &sb), Arg::tensor_mut(&mut c, &sc)])?;
    let dt = t.elapsed();
    let mut reference = vec![0f64; m * n];
    for i in 0..m {
        for x in 0..kk {
            let av = a[i * kk + x] as f64;
            for j in 0..n {
                reference[i * n + j] += av * b[x * n + j] as f64;
            }
        }
    }
    let err = max_rel_error(&c, &reference);
    let ok = err < 1e-4;
    println!(
        "{}: C[{}x{}] = A[{}x{}] @ B[{}x{}] in {:.2?} on '{}', max rel error {:.2e} -> {}",
        k.name(), m, n, m, kk, kk, n, dt, p.variant()?.id, err, if ok { "OK" } else { "MISMATCH" }
    );
    println!("{}", p.explain());
    Ok(ok)
}

fn run_softmax(rt: &Runtime, dev: &Device, k: &Kernel, rng: &mut Rng) -> BoxResult<bool> {
    let params = k.params()?;
    if params.len() != 2 || params.iter().any(|p| p.dims.len() != 2) {
        return Err(format!("kernel '{}' is not softmax(X[M,N], Y[M,N])", k.name()).into());
    }
    let mut syms = Vec::new();
    let want = |name: &str| if name == "M" { 50 } else { 256 };
    let sx = shape_of(&params[0], &mut syms, &want);
    let sy = shape_of(&params[1], &mut syms, &want);
    let (m, n) = (sx[0], sx[1]);
    let x: Vec<f32> = rng.vec(m * n).iter().map(|v| v * 8.0).collect();
    let mut y = vec![0f32; m * n];
    let p = prepare(rt, k, dev)?;
    p.launch(&[Arg::tensor(&x, &sx), Arg::tensor_mut(&mut y, &sy)])?;
    let mut reference = vec![0f64; m * n];
    for i in 0..m {
        let row = &x[i * n..(i + 1) * n];
        let mx = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for j in 0..n {
            reference[i * n + j] = (row[j] as f64 - mx).exp() / sum;
        }
    }
    let err = max_rel_error(&y, &reference);
    let ok = err < 1e-5;
    println!(
        "{}: Y[{}x{}] = softmax(X) on '{}', max rel error {:.2e} -> {}",
        k.name(), m, n, p.variant()?.id, err, if ok { "OK" } else { "MISMATCH" }
    );
    println!("{}", p.explain());
    Ok(ok)
}

fn run(path: &str, spec: Option<&str>) -> BoxResult<bool> {
    println!("TileLang runtime {} (ABI {:#x})", tilelang_runtime::runtime_version(), tilelang_runtime::abi_version());
    let rt = Runtime::new()?;
    for d in rt.devices()? {
        let i = d.info()?;
        println!("device {}:{} {} [{}]{}", i.backend.name(), i.ordinal, i.name, i.arch, if i.can_launch() { "" } else { " (cannot launch)" });
    }
    let dev = rt.default_device(spec)?;
    println!("using {} ({})", dev.info()?.name, dev.backend().name());
    let bundle = rt.open_bundle_by_name(path)?; // an installed name ("tilelang-std") or a path
    bundle.verify()?;
    let names: Vec<String> = bundle.kernels()?.iter().map(|k| k.name().to_string()).collect();
    println!("bundle {}: {}", path, names.join(", "));

    let mut rng = Rng(0x9E3779B97F4A7C15 ^ std::process::id() as u64);
    let mut ok = true;
    let mut ran = 0;
    if let Some(k) = find(&bundle, &["gemm_f32_nn", "gemm"])? {
        ok &= run_gemm(&rt, &dev, &k, &mut rng)?;
        ran += 1;
    } else {
        println!("no GEMM kernel (gemm_f32_nn or gemm) in the bundle");
    }
    // The float32 softmax (the standard library also has a float16 one, softmax_f16_4096).
    let kernels = bundle.kernels()?;
    let softmax = kernels.iter().position(|k| k.name() == "softmax_f32_1024")
        .or_else(|| kernels.iter().position(|k| k.name().starts_with("softmax")))
        .map(|i| kernels.into_iter().nth(i).unwrap());
    if let Some(k) = softmax {
        ok &= run_softmax(&rt, &dev, &k, &mut rng)?;
        ran += 1;
    } else {
        println!("no softmax kernel in the bundle; skipped");
    }
    Ok(ok && ran > 0)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 || args.len() > 3 {
        eprintln!("usage: {} BUNDLE.tlb [DEVICE]", args[0]);
        return ExitCode::from(2);
    }
    match run(&args[1], args.get(2).map(|s| s.as_str())) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAILED: a result did not match its reference");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {}", e);
            ExitCode::FAILURE
        }
    }
}
