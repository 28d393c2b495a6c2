//! Runs the example on TL_EXAMPLE_BUNDLE (a bundle tl-pack built from
//! kernels/manifest.json; tools/test sets it) or else on the runtime test
//! bundle, and on a missing file.
use std::path::PathBuf;
use std::process::Command;

fn build_dir() -> PathBuf {
    std::env::var("TL_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../build"))
}

#[test]
fn example_runs_and_matches_references() {
    let bundle = std::env::var("TL_EXAMPLE_BUNDLE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| build_dir().join("tests/runtime/data/standard.tlb"));
    let out = Command::new(env!("CARGO_BIN_EXE_run_bundle")).arg(&bundle).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("-> OK"), "{}", stdout);
    assert!(!stdout.contains("MISMATCH"), "{}", stdout);
    assert!(stdout.contains("chosen:") || stdout.contains("cpu.x86-64"), "no explain text:\n{}", stdout);
    if std::env::var("TL_EXAMPLE_BUNDLE").is_ok() {
        assert!(stdout.contains("softmax") && stdout.matches("-> OK").count() == 2, "{}", stdout);
    }
}

#[test]
fn example_reports_a_missing_bundle() {
    let out = Command::new(env!("CARGO_BIN_EXE_run_bundle")).arg("/nonexistent/b.tlb").output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/b.tlb"), "{}", stderr);
}
