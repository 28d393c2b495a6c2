//! The safe layer against a real bundle: the runtime tests' standard bundle
//! (kernels vadd, saxpy, gemm, fail_at; hand-written x86 payloads) found via
//! TL_TEST_BUNDLE, else $TL_BUILD_DIR/tests/runtime/data/standard.tlb, else
//! <repo>/build/tests/runtime/data/standard.tlb.
use std::path::PathBuf;
use tilelang_runtime::*;

fn bundle_path() -> PathBuf {
    if let Ok(p) = std::env::var("TL_TEST_BUNDLE") {
        return PathBuf::from(p);
    }
    let build = std::env::var("TL_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build"));
    let p = build.join("tests/runtime/data/standard.tlb");
    assert!(p.exists(), "test bundle {} missing: build target tl_rt_standard_bundle or set TL_TEST_BUNDLE", p.display());
    p
}

fn runtime() -> Runtime {
    Runtime::with_options(&RuntimeOptions::default().ignore_environment()).expect("runtime")
}

fn cpu(rt: &Runtime) -> Device {
    rt.default_device(Some("cpu")).expect("cpu device")
}

// Small deterministic generator (std only).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
}

#[test]
fn devices_and_kernels_are_described() {
    let rt = runtime();
    assert!(rt.device_count() >= 1);
    let devs = rt.devices().unwrap();
    let last = devs.last().unwrap().info().unwrap();
    assert_eq!(last.backend, Backend::Cpu);
    assert!(last.can_launch());
    assert!(last.arch.starts_with("x86-64"), "arch {}", last.arch);
    assert!(cpu(&rt).describe().contains('{'));
    rt.backend_status(Backend::Cpu).unwrap();

    let b = rt.open_bundle(bundle_path()).unwrap();
    b.verify().unwrap();
    let names: Vec<String> = b.kernels().unwrap().iter().map(|k| k.name().to_string()).collect();
    assert_eq!(names, ["fail_at", "gemm", "saxpy", "vadd"]);
    let gemm = b.kernel("gemm").unwrap();
    assert_eq!(gemm.symbols(), ["M", "N", "K"]);
    let params = gemm.params().unwrap();
    assert_eq!(params.len(), 3);
    assert_eq!(params[2].name, "C");
    assert_eq!(params[2].access, Access::Write);
    assert_eq!(params[0].dtype, dtype::F32);
    assert_eq!(params[0].dims[1].symbol, Some((2, "K".to_string())));
    assert!(gemm.variants().unwrap().iter().any(|v| v.id == "cpu.x86-64-v2"));
    assert_eq!(b.kernel("vadd").unwrap().attr("out_idx").as_deref(), Some("2"));
    assert_eq!(b.kernel("vadd").unwrap().attr("nope"), None);
}

#[test]
fn gemm_matches_reference_on_random_inputs() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("gemm").unwrap().prepare(&dev).unwrap();
    assert!(p.explain().contains("cpu.x86-64"), "{}", p.explain());
    assert_eq!(p.variant().unwrap().backend, Backend::Cpu);
    let mut g = Lcg(seed());
    let (m, n, k) = (37usize, 45usize, 29usize);
    let a = g.vec(m * k);
    let bm = g.vec(k * n);
    let mut c = vec![f32::NAN; m * n];
    p.launch(&[Arg::tensor(&a, &[m, k]), Arg::tensor(&bm, &[k, n]), Arg::tensor_mut(&mut c, &[m, n])]).unwrap();
    for i in 0..m {
        for j in 0..n {
            let r: f64 = (0..k).map(|x| a[i * k + x] as f64 * bm[x * n + j] as f64).sum();
            assert!((c[i * n + j] as f64 - r).abs() < 1e-4, "C[{},{}] = {} expected {}", i, j, c[i * n + j], r);
        }
    }
}

#[test]
fn buffers_and_streams() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("saxpy").unwrap().prepare(&dev).unwrap();
    let mut g = Lcg(seed());
    let n = 3000usize;
    let x = g.vec(n);
    let y = g.vec(n);
    let xb = dev.upload(&x).unwrap();
    let yb = dev.upload(&y).unwrap();
    let mut s = dev.create_stream().unwrap();
    for _ in 0..3 {
        s.launch(&p, &[Arg::f32(0.5), Arg::buffer::<f32>(&xb, &[n]), Arg::buffer::<f32>(&yb, &[n]), Arg::i32(n as i32)])
            .unwrap();
    }
    s.synchronize(None).unwrap();
    let out: Vec<f32> = yb.to_vec().unwrap();
    for i in 0..n {
        let r = y[i] + 1.5 * x[i];
        assert!((out[i] - r).abs() < 1e-5, "y[{}] = {} expected {}", i, out[i], r);
    }
    // Streams refuse host memory: it would have to outlive the call.
    let mut hx = x.clone();
    let e = s.launch(&p, &[Arg::f32(1.0), Arg::tensor(&x, &[n]), Arg::tensor_mut(&mut hx, &[n]), Arg::i32(n as i32)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("argument 1") && e.message().contains("use a Buffer"), "{}", e);
    // Buffer range checks come from the runtime.
    let e = xb.copy_from_host(4 * n - 4, &[1.0f32, 2.0]).unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange);
    assert!(e.message().contains(&(4 * n).to_string()), "{}", e);
}

#[test]
fn bad_arguments_give_exact_codes_and_messages() {
    let rt = runtime();
    let dev = cpu(&rt);
    let b = rt.open_bundle(bundle_path()).unwrap();
    let p = b.kernel("gemm").unwrap().prepare(&dev).unwrap();
    let a = vec![0f32; 16 * 8];
    let bb = vec![0f32; 8 * 16];
    let mut c = vec![0f32; 16 * 16];

    // Wrong dtype: i32 where f32 is declared.
    let ai = vec![0i32; 16 * 8];
    let e = p.launch(&[Arg::tensor(&ai, &[16, 8]), Arg::tensor(&bb, &[8, 16]), Arg::tensor_mut(&mut c, &[16, 16])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e);
    assert!(e.message().contains("'gemm'") && e.message().contains("argument 0"), "{}", e);
    assert!(e.message().contains("float32") || e.message().contains("dtype"), "{}", e);

    // Inconsistent shape symbol: K is 8 in A and 9 in B.
    let b9 = vec![0f32; 9 * 16];
    let e = p.launch(&[Arg::tensor(&a, &[16, 8]), Arg::tensor(&b9, &[9, 16]), Arg::tensor_mut(&mut c, &[16, 16])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e);
    assert!(e.message().contains("argument 1") && e.message().contains('9') && e.message().contains('8'), "{}", e);

    // Wrong rank and wrong count.
    let e = p.launch(&[Arg::tensor(&a, &[128]), Arg::tensor(&bb, &[8, 16]), Arg::tensor_mut(&mut c, &[16, 16])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("rank"), "{}", e);
    let e = p.launch(&[Arg::tensor(&a, &[16, 8])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains('1') && e.message().contains('3'), "{}", e);

    // Checked by the binding before the call: the view is larger than the slice.
    let e = p.launch(&[Arg::tensor(&a, &[16, 9]), Arg::tensor(&bb, &[9, 16]), Arg::tensor_mut(&mut c, &[16, 16])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(e.message(), "kernel 'gemm' argument 0: the view reaches 144 elements, the slice has 128");
    // A written parameter given as a read-only slice.
    let c2 = vec![0f32; 256];
    let e = p.launch(&[Arg::tensor(&a, &[16, 8]), Arg::tensor(&bb, &[8, 16]), Arg::tensor(&c2, &[16, 16])]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("argument 2") && e.message().contains("tensor_mut"), "{}", e);
    // Strides that reach past the slice.
    let e = p
        .launch(&[Arg::tensor(&a, &[16, 8]).strides(&[9, 1]), Arg::tensor(&bb, &[8, 16]), Arg::tensor_mut(&mut c, &[16, 16])])
        .unwrap_err();
    assert!(e.message().contains("reaches 143 elements"), "{}", e);

    // Kernel lookup and bundle errors.
    let e = b.kernel("nope").unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("nope") && e.message().contains("vadd"), "{}", e);
    let e = rt.open_bundle("/nonexistent/x.tlb").unwrap_err();
    assert!(e.message().contains("/nonexistent/x.tlb"), "{}", e);
    let e = rt.open_bundle_bytes(b"TLB\0garbage").unwrap_err();
    assert_ne!(e.code(), Code::Ok);
    let bytes = std::fs::read(bundle_path()).unwrap();
    let mut corrupt = bytes.clone();
    corrupt[70] ^= 0xFF;
    assert!(rt.open_bundle_owned(corrupt).is_err());
    let owned = rt.open_bundle_owned(bytes).unwrap();
    assert_eq!(owned.kernel_count(), 4);
    // Display shows the code name.
    assert!(format!("{}", e).contains(':'));
}

#[test]
fn kernel_failures_come_back_from_streams() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("fail_at").unwrap().prepare(&dev).unwrap();
    let x = vec![0f32; 16];
    let e = p.launch(&[Arg::tensor(&x, &[16])]).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("kernel 'fail_at'") && e.message().contains("block (3, 0, 0) returned 7"), "{}", e);
    let xb = dev.upload(&x).unwrap();
    let mut s = dev.create_stream().unwrap();
    s.launch(&p, &[Arg::buffer::<f32>(&xb, &[16])]).unwrap();
    let e = s.synchronize(None).unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert!(e.message().contains("block (3, 0, 0) returned 7"), "{}", e);
    // The failure was cleared.
    s.synchronize(None).unwrap();
}

#[test]
fn handles_are_shared_across_threads_and_dropped_in_any_order() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Runtime>();
    assert_send_sync::<Device>();
    assert_send_sync::<Bundle>();
    assert_send_sync::<Kernel>();
    assert_send_sync::<Prepared>();
    assert_send_sync::<Buffer>();
    assert_send_sync::<Error>();
    assert_send::<Stream>();

    let rt = runtime();
    let dev = cpu(&rt);
    let bundle = rt.open_bundle(bundle_path()).unwrap();
    let kernel = bundle.kernel("vadd").unwrap();
    drop(bundle);
    drop(rt);
    let p = std::sync::Arc::new(kernel.prepare(&dev).unwrap());
    drop(kernel);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let p = p.clone();
            let dev = dev.clone();
            std::thread::spawn(move || {
                let n = 1000 + t * 17;
                let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
                let b: Vec<f32> = (0..n).map(|i| (t * i) as f32).collect();
                let mut c = vec![0f32; n];
                p.launch(&[Arg::tensor(&a, &[n]), Arg::tensor(&b, &[n]), Arg::tensor_mut(&mut c, &[n])]).unwrap();
                assert!(c.iter().enumerate().all(|(i, &v)| v == (i + t * i) as f32));
                let mut s = dev.create_stream().unwrap(); // one stream per thread
                s.synchronize(Some(std::time::Duration::from_secs(5))).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn buffers_on_every_launchable_device() {
    let rt = runtime();
    let mut g = Lcg(seed());
    for d in rt.devices().unwrap() {
        let info = d.info().unwrap();
        if !info.can_launch() {
            continue;
        }
        let data = g.vec(4097);
        let b = d.upload(&data).unwrap();
        assert_eq!(b.size(), 4 * 4097, "{:?}", info);
        let back: Vec<f32> = b.to_vec().unwrap();
        assert_eq!(back, data, "{:?}", info);
        let mut part = [0f32; 2];
        b.copy_to_host(4 * 4095, &mut part).unwrap();
        assert_eq!(part, [data[4095], data[4096]]);
        let e = b.copy_to_host(4 * 4096, &mut part).unwrap_err();
        assert_eq!(e.code(), Code::OutOfRange);
        assert!(e.message().contains("16388"), "{}", e);
    }
}

#[test]
fn scalars_and_backend_masks_are_checked() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("saxpy").unwrap().prepare(&dev).unwrap();
    let x = vec![1f32; 8];
    let mut y = vec![1f32; 8];
    // A float64 scalar where float32 is declared.
    let e = p.launch(&[Arg::f64(2.0), Arg::tensor(&x, &[8]), Arg::tensor_mut(&mut y, &[8]), Arg::i32(8)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("argument 0") && e.message().contains("'a'"), "{}", e);
    // The scalar n binds N: 7 against a length of 8.
    let e = p.launch(&[Arg::f32(2.0), Arg::tensor(&x, &[8]), Arg::tensor_mut(&mut y, &[8]), Arg::i32(7)]).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("argument 3") && e.message().contains('7') && e.message().contains('8'), "{}", e);
    assert_eq!(y, vec![1f32; 8], "a failed launch wrote its output");
    p.launch(&[Arg::f32(2.0), Arg::tensor(&x, &[8]), Arg::tensor_mut(&mut y, &[8]), Arg::i32(8)]).unwrap();
    assert_eq!(y, vec![3f32; 8]);

    // A runtime without the CPU backend says why it is not there.
    let gpu_only = Runtime::with_options(&RuntimeOptions::default().ignore_environment().backends(&[Backend::Cuda])).unwrap();
    let e = gpu_only.backend_status(Backend::Cpu).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{}", e);
    assert!(gpu_only.devices().unwrap().iter().all(|d| d.backend() == Backend::Cuda));
    assert!(gpu_only.default_device(Some("cpu")).is_err());
}

#[test]
fn staged_host_slices_round_trip() {
    // The path GPUs take: slices copied into device buffers, outputs back.
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("saxpy").unwrap().prepare(&dev).unwrap();
    let mut g = Lcg(seed());
    let n = 2500;
    let x = g.vec(n);
    let y0 = g.vec(n);
    let mut y = y0.clone();
    p.launch_staged(&[Arg::f32(-1.5), Arg::tensor(&x, &[n]), Arg::tensor_mut(&mut y, &[n]), Arg::i32(n as i32)]).unwrap();
    for i in 0..n {
        assert!((y[i] - (y0[i] - 1.5 * x[i])).abs() < 1e-5, "y[{}]", i);
    }
    let e = p
        .launch_staged(&[Arg::f32(1.0), Arg::tensor(&x, &[n + 1]), Arg::tensor_mut(&mut y, &[n]), Arg::i32(n as i32)])
        .unwrap_err();
    assert_eq!(e.message(), format!("kernel 'saxpy' argument 1: the view reaches {} elements, the slice has {}", n + 1, n));
}

#[test]
fn logger_receives_runtime_messages() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<(LogLevel, String)>>> = Arc::default();
    let sink = seen.clone();
    let rt = Runtime::with_options(
        &RuntimeOptions::default().ignore_environment().log(LogLevel::Debug, move |l, m| sink.lock().unwrap().push((l, m.to_string()))),
    )
    .unwrap();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("vadd").unwrap().prepare(&dev).unwrap();
    let x = vec![1f32; 4];
    let mut y = vec![0f32; 4];
    p.launch(&[Arg::tensor(&x, &[4]), Arg::tensor(&x, &[4]), Arg::tensor_mut(&mut y, &[4])]).unwrap();
    assert_eq!(y, vec![2f32; 4]);
    let seen = seen.lock().unwrap();
    assert!(seen.iter().any(|(l, m)| *l == LogLevel::Info && m.contains("prepared kernel 'vadd'")), "{:?}", *seen);
    assert!(seen.iter().any(|(l, m)| *l == LogLevel::Debug && m.contains("launch kernel 'vadd'")), "{:?}", *seen);
    // A sink limited to warnings hears none of that.
    let quiet: Arc<Mutex<Vec<String>>> = Arc::default();
    let q = quiet.clone();
    let rt2 = Runtime::with_options(
        &RuntimeOptions::default().ignore_environment().log(LogLevel::Warning, move |_, m| q.lock().unwrap().push(m.into())),
    )
    .unwrap();
    let _ = rt2.open_bundle(bundle_path()).unwrap().kernel("vadd").unwrap().prepare(&cpu(&rt2)).unwrap();
    assert!(quiet.lock().unwrap().iter().all(|m| !m.contains("prepared kernel")), "{:?}", quiet.lock().unwrap());
}

#[test]
fn imported_host_memory_is_used_in_place() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("vadd").unwrap().prepare(&dev).unwrap();
    let n = 777usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut out = vec![0f32; n];
    {
        let ab = dev.upload(&a).unwrap();
        // SAFETY: `out` outlives the buffer and is not touched while it lives.
        let ob = unsafe { dev.import(out.as_mut_ptr() as *mut std::ffi::c_void, 4 * n) }.unwrap();
        assert_eq!(ob.size(), 4 * n);
        assert_eq!(ob.device_pointer() as usize, out.as_ptr() as usize);
        p.launch(&[Arg::buffer::<f32>(&ab, &[n]), Arg::buffer::<f32>(&ab, &[n]), Arg::buffer::<f32>(&ob, &[n])]).unwrap();
        // A view larger than the imported range is refused before the call.
        let e = p.launch(&[Arg::buffer::<f32>(&ab, &[n]), Arg::buffer::<f32>(&ab, &[n]), Arg::buffer::<f32>(&ob, &[n + 1])]);
        assert_eq!(e.unwrap_err().message(), format!("kernel 'vadd' argument 2: the view reaches {} bytes, the buffer has {}", 4 * (n + 1), 4 * n));
    }
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    // A NULL native stream is refused with a status, not a crash.
    assert!(unsafe { dev.wrap_stream(std::ptr::null_mut()) }.is_err());
}

#[test]
fn empty_problems_and_explicit_grids() {
    let rt = runtime();
    let dev = cpu(&rt);
    let p = rt.open_bundle(bundle_path()).unwrap().kernel("vadd").unwrap().prepare(&dev).unwrap();
    // N = 0: the grid evaluates to 0, nothing runs, the launch succeeds.
    let empty: [f32; 0] = [];
    let mut out: [f32; 0] = [];
    p.launch(&[Arg::tensor(&empty, &[0]), Arg::tensor(&empty, &[0]), Arg::tensor_mut(&mut out, &[0])]).unwrap();
    p.launch_staged(&[Arg::tensor(&empty, &[0]), Arg::tensor(&empty, &[0]), Arg::tensor_mut(&mut out, &[0])]).unwrap();
    // An explicit grid of one block covers the first 256 elements only.
    let n = 600;
    let a = vec![1f32; n];
    let mut c = vec![0f32; n];
    p.launch_with(&[Arg::tensor(&a, &[n]), Arg::tensor(&a, &[n]), Arg::tensor_mut(&mut c, &[n])], &LaunchOptions { grid: [1, 0, 0] })
        .unwrap();
    assert!(c[..256].iter().all(|&v| v == 2.0) && c[256..].iter().all(|&v| v == 0.0));
}
