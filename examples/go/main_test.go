package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TL_EXAMPLE_BUNDLE: a bundle tl-pack built from kernels/manifest.json
// (tools/test sets it); otherwise the runtime test bundle in TL_BUILD_DIR.
func TestRunBundle(t *testing.T) {
	path := os.Getenv("TL_EXAMPLE_BUNDLE")
	if path == "" {
		build := os.Getenv("TL_BUILD_DIR")
		if build == "" {
			build = "../../build"
		}
		path = filepath.Join(build, "tests/runtime/data/standard.tlb")
	}
	var out strings.Builder
	ok, err := run(&out, path, "")
	t.Log(out.String())
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	s := out.String()
	if strings.Contains(s, "MISMATCH") || !strings.Contains(s, "-> OK") || !strings.Contains(s, "chosen:") {
		t.Fatal("unexpected output")
	}
	if os.Getenv("TL_EXAMPLE_BUNDLE") != "" && strings.Count(s, "-> OK") != 2 {
		t.Fatal("expected GEMM and softmax to run")
	}
}

func TestMissingBundle(t *testing.T) {
	var out strings.Builder
	_, err := run(&out, "/nonexistent/b.tlb", "")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/b.tlb") {
		t.Fatal(err)
	}
}
