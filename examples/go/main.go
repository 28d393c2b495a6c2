// Command run_bundle loads a TileLang bundle, runs GEMM and softmax on the
// best device present (falling back to the CPU when the bundle has no variant
// for it), checks the results against plain Go references on random inputs,
// and prints the runtime's explanation of each variant choice.
//
//	go run . BUNDLE.tlb [DEVICE]
//
// BUNDLE: e.g. `build/bin/tl-pack build kernels/manifest.json -o std.tlb`
// (kernels gemm_f32_nn and softmax_f32_1024) or the runtime's test bundle
// (kernel gemm; no softmax). DEVICE: "cpu", "cuda:0", ... (default: best).
// Build with PKG_CONFIG_PATH=<build>/lib/pkgconfig (or an install prefix's).
// For a bundle with CUDA variants (static shapes) see examples/rust/src/main.rs
// (tl-pack compile gemm.tir softmax.tir --target cpu,sm_90a -o gpu.tlb); on
// an H200 both kernels ran as cuda.sm_90a and matched the references.
package main

import (
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"strings"
	"time"

	"tilelang.org/go/tilelang"
)

// shapeOf gives concrete sizes for a buffer parameter: static dims as
// declared, symbols from syms (chosen once, rounded up to divisibility).
func shapeOf(p tilelang.Param, syms map[int]int, want func(string) int) []int {
	shape := make([]int, len(p.Dims))
	for i, d := range p.Dims {
		if d.StaticSize >= 0 {
			shape[i] = int(d.StaticSize)
			continue
		}
		v, ok := syms[d.Symbol]
		if !ok {
			div := int(d.DivisibleBy)
			if div < 1 {
				div = 1
			}
			v = (want(d.SymbolName) + div - 1) / div * div
			syms[d.Symbol] = v
		}
		shape[i] = v
	}
	return shape
}

func prepare(w io.Writer, rt *tilelang.Runtime, k *tilelang.Kernel, dev *tilelang.Device) (*tilelang.Prepared, error) {
	// On a GPU, when the bundle has no usable variant for it (INCOMPATIBLE)
	// or its code does not load, say why and use the CPU.
	p, err := k.Prepare(dev)
	if err != nil && dev.Info().Backend != tilelang.BackendCPU {
		fmt.Fprintf(w, "  '%s' cannot run on %s: %v\n  falling back to the CPU\n", k.Name(), dev.Info().Name, err)
		cpu, err := rt.DefaultDevice("cpu")
		if err != nil {
			return nil, err
		}
		defer cpu.Close()
		return k.Prepare(cpu)
	}
	return p, err
}

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

func maxRelError(got []float32, want []float64) float64 {
	m := 0.0
	for i := range got {
		m = math.Max(m, math.Abs(float64(got[i])-want[i])/(1+math.Abs(want[i])))
	}
	return m
}

func verdict(ok bool) string {
	if ok {
		return "OK"
	}
	return "MISMATCH"
}

func runGEMM(w io.Writer, rt *tilelang.Runtime, dev *tilelang.Device, k *tilelang.Kernel, r *rand.Rand) (bool, error) {
	params, err := k.Params()
	if err != nil {
		return false, err
	}
	if len(params) != 3 || len(params[0].Dims) != 2 || len(params[1].Dims) != 2 || len(params[2].Dims) != 2 {
		return false, fmt.Errorf("kernel '%s' is not gemm(A[M,K], B[K,N], C[M,N])", k.Name())
	}
	syms := map[int]int{}
	want := func(s string) int {
		if s == "M" {
			return 200
		}
		return 96
	}
	sa, sb, sc := shapeOf(params[0], syms, want), shapeOf(params[1], syms, want), shapeOf(params[2], syms, want)
	m, kk, n := sa[0], sa[1], sb[1]
	a, b, c := randVec(r, m*kk, 1), randVec(r, kk*n, 1), make([]float32, m*n)
	p, err := prepare(w, rt, k, dev)
	if err != nil {
		return false, err
	}
	defer p.Close()
	t := time.Now()
	if err := p.Launch(tilelang.Tensor(a, sa...), tilelang.Tensor(b, sb...), tilelang.Tensor(c, sc...)); err != nil {
		return false, err
	}
	dt := time.Since(t)
	ref := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for x := 0; x < kk; x++ {
			av := float64(a[i*kk+x])
			for j := 0; j < n; j++ {
				ref[i*n+j] += av * float64(b[x*n+j])
			}
		}
	}
	v, err := p.Variant()
	if err != nil {
		return false, err
	}
	e := maxRelError(c, ref)
	ok := e < 1e-4
	fmt.Fprintf(w, "%s: C[%dx%d] = A[%dx%d] @ B[%dx%d] in %v on '%s', max rel error %.2e -> %s\n",
		k.Name(), m, n, m, kk, kk, n, dt, v.ID, e, verdict(ok))
	fmt.Fprintln(w, p.Explain())
	return ok, nil
}

func runSoftmax(w io.Writer, rt *tilelang.Runtime, dev *tilelang.Device, k *tilelang.Kernel, r *rand.Rand) (bool, error) {
	params, err := k.Params()
	if err != nil {
		return false, err
	}
	if len(params) != 2 || len(params[0].Dims) != 2 || len(params[1].Dims) != 2 {
		return false, fmt.Errorf("kernel '%s' is not softmax(X[M,N], Y[M,N])", k.Name())
	}
	syms := map[int]int{}
	want := func(s string) int {
		if s == "M" {
			return 50
		}
		return 256
	}
	sx, sy := shapeOf(params[0], syms, want), shapeOf(params[1], syms, want)
	m, n := sx[0], sx[1]
	x, y := randVec(r, m*n, 8), make([]float32, m*n)
	p, err := prepare(w, rt, k, dev)
	if err != nil {
		return false, err
	}
	defer p.Close()
	if err := p.Launch(tilelang.Tensor(x, sx...), tilelang.Tensor(y, sy...)); err != nil {
		return false, err
	}
	ref := make([]float64, m*n)
	for i := 0; i < m; i++ {
		row := x[i*n : (i+1)*n]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		for j, v := range row {
			ref[i*n+j] = math.Exp(float64(v)-mx) / sum
		}
	}
	v, err := p.Variant()
	if err != nil {
		return false, err
	}
	e := maxRelError(y, ref)
	ok := e < 1e-5
	fmt.Fprintf(w, "%s: Y[%dx%d] = softmax(X) on '%s', max rel error %.2e -> %s\n", k.Name(), m, n, v.ID, e, verdict(ok))
	fmt.Fprintln(w, p.Explain())
	return ok, nil
}

// run returns whether every kernel it ran matched its reference.
func run(w io.Writer, path, spec string) (bool, error) {
	fmt.Fprintf(w, "TileLang runtime %s (ABI %#x)\n", tilelang.Version(), tilelang.ABIVersion())
	rt, err := tilelang.NewRuntime(nil)
	if err != nil {
		return false, err
	}
	defer rt.Close()
	devs, err := rt.Devices()
	if err != nil {
		return false, err
	}
	for _, d := range devs {
		note := ""
		if !d.Info().CanLaunch() {
			note = " (cannot launch)"
		}
		fmt.Fprintf(w, "device %s%s\n", d, note)
		d.Close()
	}
	dev, err := rt.DefaultDevice(spec)
	if err != nil {
		return false, err
	}
	defer dev.Close()
	fmt.Fprintf(w, "using %s\n", dev)
	bundle, err := rt.OpenBundleByName(path) // an installed name ("tilelang-std") or a path
	if err != nil {
		return false, err
	}
	defer bundle.Close()
	if err := bundle.Verify(); err != nil {
		return false, err
	}
	kernels, err := bundle.Kernels()
	if err != nil {
		return false, err
	}
	var names []string
	var gemm, softmax *tilelang.Kernel
	for _, k := range kernels {
		defer k.Close()
		names = append(names, k.Name())
		switch {
		case k.Name() == "gemm_f32_nn" || (k.Name() == "gemm" && gemm == nil):
			gemm = k
		case k.Name() == "softmax_f32_1024" || (strings.HasPrefix(k.Name(), "softmax") && softmax == nil):
			// The float32 softmax (the standard library also has softmax_f16_4096, sorted first).
			softmax = k
		}
	}
	fmt.Fprintf(w, "bundle %s: %s\n", path, strings.Join(names, ", "))
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	ok, ran := true, 0
	if gemm != nil {
		good, err := runGEMM(w, rt, dev, gemm, r)
		if err != nil {
			return false, err
		}
		ok, ran = ok && good, ran+1
	} else {
		fmt.Fprintln(w, "no GEMM kernel (gemm_f32_nn or gemm) in the bundle")
	}
	if softmax != nil {
		good, err := runSoftmax(w, rt, dev, softmax, r)
		if err != nil {
			return false, err
		}
		ok, ran = ok && good, ran+1
	} else {
		fmt.Fprintln(w, "no softmax kernel in the bundle; skipped")
	}
	return ok && ran > 0, nil
}

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintf(os.Stderr, "usage: %s BUNDLE.tlb [DEVICE]\n", os.Args[0])
		os.Exit(2)
	}
	spec := ""
	if len(os.Args) == 3 {
		spec = os.Args[2]
	}
	ok, err := run(os.Stdout, os.Args[1], spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "FAILED: a result did not match its reference")
		os.Exit(1)
	}
}
