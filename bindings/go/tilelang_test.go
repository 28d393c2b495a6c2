package tilelang_test

import (
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"tilelang.org/go/tilelang"
)

// bundlePath is the runtime tests' standard bundle (kernels vadd, saxpy, gemm,
// fail_at on hand-written x86 payloads): TL_TEST_BUNDLE, else
// $TL_BUILD_DIR/tests/runtime/data/standard.tlb, else ../../build/....
func bundlePath(t *testing.T) string {
	if p := os.Getenv("TL_TEST_BUNDLE"); p != "" {
		return p
	}
	build := os.Getenv("TL_BUILD_DIR")
	if build == "" {
		build = "../../build"
	}
	p := filepath.Join(build, "tests/runtime/data/standard.tlb")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test bundle %s missing: build tl_rt_standard_bundle or set TL_TEST_BUNDLE", p)
	}
	return p
}

type env struct {
	rt     *tilelang.Runtime
	cpu    *tilelang.Device
	bundle *tilelang.Bundle
}

func setup(t *testing.T) *env {
	t.Helper()
	rt, err := tilelang.NewRuntime(&tilelang.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := rt.DefaultDevice("cpu")
	if err != nil {
		t.Fatal(err)
	}
	b, err := rt.OpenBundle(bundlePath(t))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{rt, cpu, b}
	t.Cleanup(func() { b.Close(); cpu.Close(); rt.Close() })
	return e
}

func (e *env) prepare(t *testing.T, name string) *tilelang.Prepared {
	t.Helper()
	k, err := e.bundle.Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	p, err := k.Prepare(e.cpu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

func expectErr(t *testing.T, err error, code tilelang.Code, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected %v, got success", code)
	}
	if tilelang.CodeOf(err) != code {
		t.Fatalf("expected %v, got %v", code, err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q lacks %q", err, f)
		}
	}
}

func TestVersionsAndDevices(t *testing.T) {
	if tilelang.ABIVersion()>>16 != tilelang.HeaderABIVersion>>16 {
		t.Fatalf("ABI %x vs header %x", tilelang.ABIVersion(), tilelang.HeaderABIVersion)
	}
	if tilelang.Version() == "" {
		t.Fatal("empty version")
	}
	e := setup(t)
	devs, err := e.rt.Devices()
	if err != nil || len(devs) == 0 {
		t.Fatal(devs, err)
	}
	last := devs[len(devs)-1].Info()
	if last.Backend != tilelang.BackendCPU || !last.CanLaunch() || !strings.HasPrefix(last.Arch, "x86-64") {
		t.Fatalf("last device %+v", last)
	}
	for _, d := range devs {
		d.Close()
		d.Close() // idempotent
	}
	if err := e.rt.BackendStatus(tilelang.BackendCPU); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.cpu.Describe(), "{") {
		t.Fatal("describe:", e.cpu.Describe())
	}
}

func TestKernelSignature(t *testing.T) {
	e := setup(t)
	if err := e.bundle.Verify(); err != nil {
		t.Fatal(err)
	}
	ks, err := e.bundle.Kernels()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range ks {
		names = append(names, k.Name())
		k.Close()
	}
	if strings.Join(names, ",") != "fail_at,gemm,saxpy,vadd" {
		t.Fatal(names)
	}
	k, _ := e.bundle.Kernel("gemm")
	defer k.Close()
	if strings.Join(k.Symbols(), ",") != "M,N,K" {
		t.Fatal(k.Symbols())
	}
	ps, err := k.Params()
	if err != nil || len(ps) != 3 || ps[2].Name != "C" || ps[2].Access != tilelang.AccessWrite ||
		ps[0].DType != tilelang.Float32 || ps[0].Dims[1].SymbolName != "K" || ps[0].Dims[1].StaticSize != -1 {
		t.Fatalf("%+v %v", ps, err)
	}
	vs, err := k.Variants()
	if err != nil || len(vs) == 0 || vs[0].ID == "" {
		t.Fatal(vs, err)
	}
	v, _ := e.bundle.Kernel("vadd")
	defer v.Close()
	if s, ok := v.Attr("out_idx"); !ok || s != "2" {
		t.Fatal(s, ok)
	}
	if _, ok := v.Attr("nope"); ok {
		t.Fatal("attr nope exists")
	}
	_, err = e.bundle.Kernel("nope")
	expectErr(t, err, tilelang.NotFound, "nope", "vadd")
	if !errors.Is(err, tilelang.ErrNotFound) || errors.Is(err, tilelang.ErrInvalidArgument) {
		t.Fatal("errors.Is on", err)
	}
}

func TestGEMMMatchesReference(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "gemm")
	if !strings.Contains(p.Explain(), "cpu.x86-64") {
		t.Fatal(p.Explain())
	}
	if v, err := p.Variant(); err != nil || v.Backend != tilelang.BackendCPU {
		t.Fatal(v, err)
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	M, N, K := 37, 45, 29
	a, b := randVec(r, M*K), randVec(r, K*N)
	c := make([]float32, M*N)
	for i := range c {
		c[i] = float32(math.NaN())
	}
	if err := p.Launch(tilelang.Tensor(a, M, K), tilelang.Tensor(b, K, N), tilelang.Tensor(c, M, N)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var ref float64
			for k := 0; k < K; k++ {
				ref += float64(a[i*K+k]) * float64(b[k*N+j])
			}
			if math.Abs(float64(c[i*N+j])-ref) > 1e-4 {
				t.Fatalf("C[%d,%d] = %v, expected %v", i, j, c[i*N+j], ref)
			}
		}
	}
	// Read-only parameters are not copied back: A is untouched by construction,
	// and a second launch with the same slices gives the same result.
	c2 := make([]float32, M*N)
	if err := p.Launch(tilelang.Tensor(a, M, K), tilelang.Tensor(b, K, N), tilelang.Tensor(c2, M, N)); err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if c[i] != c2[i] {
			t.Fatalf("launches differ at %d", i)
		}
	}
}

func TestBadArguments(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "gemm")
	a, b, c := make([]float32, 16*8), make([]float32, 8*16), make([]float32, 16*16)

	ai := make([]int32, 16*8)
	err := p.Launch(tilelang.Tensor(ai, 16, 8), tilelang.Tensor(b, 8, 16), tilelang.Tensor(c, 16, 16))
	expectErr(t, err, tilelang.InvalidArgument, "'gemm'", "argument 0")

	b9 := make([]float32, 9*16)
	err = p.Launch(tilelang.Tensor(a, 16, 8), tilelang.Tensor(b9, 9, 16), tilelang.Tensor(c, 16, 16))
	expectErr(t, err, tilelang.InvalidArgument, "argument 1", "9", "8")

	err = p.Launch(tilelang.Tensor(a, 128), tilelang.Tensor(b, 8, 16), tilelang.Tensor(c, 16, 16))
	expectErr(t, err, tilelang.InvalidArgument, "rank")

	err = p.Launch(tilelang.Tensor(a, 16, 8))
	expectErr(t, err, tilelang.InvalidArgument, "1", "3")

	// Checked here, before the runtime: the view is larger than the slice.
	err = p.Launch(tilelang.Tensor(a, 16, 9), tilelang.Tensor(b, 9, 16), tilelang.Tensor(c, 16, 16))
	expectErr(t, err, tilelang.InvalidArgument)
	if want := "INVALID_ARGUMENT: kernel 'gemm' argument 0: the view reaches 144 elements, the slice has 128"; err.Error() != want {
		t.Fatalf("%q != %q", err.Error(), want)
	}
	err = p.Launch(tilelang.Tensor(a, 16, 8).WithStrides(9, 1), tilelang.Tensor(b, 8, 16), tilelang.Tensor(c, 16, 16))
	expectErr(t, err, tilelang.InvalidArgument, "reaches 143 elements")

	_, err = e.rt.OpenBundle("/nonexistent/x.tlb")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/x.tlb") {
		t.Fatal(err)
	}
	_, err = e.rt.OpenBundleBytes([]byte("TLB\x00garbage"))
	if tilelang.CodeOf(err) == tilelang.OK {
		t.Fatal("garbage bundle opened")
	}
	bytes, _ := os.ReadFile(bundlePath(t))
	bytes[70] ^= 0xFF
	if _, err := e.rt.OpenBundleBytes(bytes); err == nil {
		t.Fatal("corrupted bundle opened")
	}
	bytes[70] ^= 0xFF
	ob, err := e.rt.OpenBundleBytes(bytes)
	if err != nil {
		t.Fatal(err)
	}
	ob.Close()
	if _, err := ob.Kernel("vadd"); err != tilelang.ErrClosed {
		t.Fatal("closed bundle:", err)
	}
}

func TestBuffersAndStreams(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "saxpy")
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	n := 3000
	x, y := randVec(r, n), randVec(r, n)
	xb, err := tilelang.Upload(e.cpu, x)
	if err != nil {
		t.Fatal(err)
	}
	defer xb.Close()
	yb, _ := tilelang.Upload(e.cpu, y)
	defer yb.Close()
	s, err := e.cpu.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 3; i++ {
		if err := s.Launch(p, tilelang.F32(0.5), tilelang.BufferTensor[float32](xb, n), tilelang.BufferTensor[float32](yb, n), tilelang.I32(int32(n))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(0); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	if err := tilelang.CopyToHost(yb, 0, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if ref := y[i] + 1.5*x[i]; math.Abs(float64(out[i]-ref)) > 1e-5 {
			t.Fatalf("y[%d] = %v, expected %v", i, out[i], ref)
		}
	}
	err = s.Launch(p, tilelang.F32(1), tilelang.Tensor(x, n), tilelang.BufferTensor[float32](yb, n), tilelang.I32(int32(n)))
	expectErr(t, err, tilelang.InvalidArgument, "argument 1", "use a Buffer")
	// The scalar n binds symbol N: a mismatch is the runtime's error.
	err = p.Launch(tilelang.F32(1), tilelang.Tensor(x, n), tilelang.Tensor(y, n), tilelang.I32(int32(n-1)))
	expectErr(t, err, tilelang.InvalidArgument, "argument 3")
	err = tilelang.CopyFromHost(xb, 4*n-4, []float32{1, 2})
	expectErr(t, err, tilelang.OutOfRange)
	if !strings.Contains(err.Error(), "12000") {
		t.Fatal(err)
	}
	// Slices on the synchronous path: written parameters come back.
	y2 := append([]float32(nil), y...)
	if err := p.Launch(tilelang.F32(2), tilelang.Tensor(x, n), tilelang.Tensor(y2, n), tilelang.I32(int32(n))); err != nil {
		t.Fatal(err)
	}
	for i := range y2 {
		if ref := y[i] + 2*x[i]; math.Abs(float64(y2[i]-ref)) > 1e-5 {
			t.Fatalf("y2[%d] = %v, expected %v", i, y2[i], ref)
		}
	}
}

func TestKernelFailureFromStream(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "fail_at")
	x := make([]float32, 16)
	expectErr(t, p.Launch(tilelang.Tensor(x, 16)), tilelang.Internal, "kernel 'fail_at'", "block (3, 0, 0) returned 7")
	xb, _ := tilelang.Upload(e.cpu, x)
	defer xb.Close()
	s, _ := e.cpu.NewStream()
	defer s.Close()
	if err := s.Launch(p, tilelang.BufferTensor[float32](xb, 16)); err != nil {
		t.Fatal(err)
	}
	expectErr(t, s.Synchronize(5*time.Second), tilelang.Internal, "block (3, 0, 0) returned 7")
	if err := s.Synchronize(0); err != nil {
		t.Fatal("failure not cleared:", err)
	}
}

func TestConcurrentLaunchesAndFinalizers(t *testing.T) {
	e := setup(t)
	k, _ := e.bundle.Kernel("vadd")
	p, err := k.Prepare(e.cpu)
	if err != nil {
		t.Fatal(err)
	}
	k.Close() // the prepared kernel keeps what it needs
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			n := 1000 + 17*g
			a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = float32(i), float32(g*i)
			}
			if err := p.Launch(tilelang.Tensor(a, n), tilelang.Tensor(b, n), tilelang.Tensor(c, n)); err != nil {
				errs <- err
				return
			}
			for i := range c {
				if c[i] != float32(i+g*i) {
					errs <- errors.New("wrong sum")
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Handles dropped without Close are released by finalizers.
	for i := 0; i < 100; i++ {
		b, _ := tilelang.Upload(e.cpu, make([]float32, 1024))
		_ = b
	}
	runtime.GC()
	runtime.GC()
}

// Buffers on every device that can launch (the GPU too, where present):
// random data survives a round trip, and ranges are checked.
func TestBuffersOnEveryDevice(t *testing.T) {
	rt, err := tilelang.NewRuntime(&tilelang.Options{IgnoreEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	devs, err := rt.Devices()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for _, d := range devs {
		defer d.Close()
		if !d.Info().CanLaunch() {
			continue
		}
		t.Logf("device %v", d)
		data := randVec(r, 4097)
		b, err := tilelang.Upload(d, data)
		if err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if b.Size() != 4*4097 {
			t.Fatalf("%v: size %d", d, b.Size())
		}
		back := make([]float32, 4097)
		if err := tilelang.CopyToHost(b, 0, back); err != nil {
			t.Fatal(err)
		}
		for i := range back {
			if back[i] != data[i] {
				t.Fatalf("%v: element %d: %v != %v", d, i, back[i], data[i])
			}
		}
		part := make([]float32, 2)
		if err := tilelang.CopyToHost(b, 4*4095, part); err != nil || part[0] != data[4095] || part[1] != data[4096] {
			t.Fatalf("%v: tail %v %v", d, part, err)
		}
		expectErr(t, tilelang.CopyToHost(b, 4*4096, part), tilelang.OutOfRange, "16388")
		b.Close()
	}
}

func TestScalarsAndBackendMasks(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "saxpy")
	x, y := []float32{1, 1, 1, 1, 1, 1, 1, 1}, []float32{1, 1, 1, 1, 1, 1, 1, 1}
	err := p.Launch(tilelang.F64(2), tilelang.Tensor(x, 8), tilelang.Tensor(y, 8), tilelang.I32(8))
	expectErr(t, err, tilelang.InvalidArgument, "argument 0", "'a'")
	err = p.Launch(tilelang.F32(2), tilelang.Tensor(x, 8), tilelang.Tensor(y, 8), tilelang.I32(7))
	expectErr(t, err, tilelang.InvalidArgument, "argument 3", "7", "8")
	if y[0] != 1 {
		t.Fatal("a failed launch wrote its output")
	}
	if err := p.Launch(tilelang.F32(2), tilelang.Tensor(x, 8), tilelang.Tensor(y, 8), tilelang.I32(8)); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if y[i] != 3 {
			t.Fatalf("y[%d] = %v", i, y[i])
		}
	}

	rt, err := tilelang.NewRuntime(&tilelang.Options{IgnoreEnv: true, BackendMask: tilelang.BackendCUDA.Bit()})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := rt.BackendStatus(tilelang.BackendCPU); !errors.Is(err, tilelang.ErrFailedPrecondition) {
		t.Fatal("CPU backend status with a CUDA-only mask:", err)
	}
	if _, err := rt.DefaultDevice("cpu"); err == nil {
		t.Fatal("a CPU device without the CPU backend")
	}
}

// Slices staged through device buffers (the GPU path): inputs copied in,
// written parameters copied back, read-only ones left alone.
func TestStagedSlices(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "gemm")
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	M, N, K := 19, 33, 17
	a, b := randVec(r, M*K), randVec(r, K*N)
	a0 := append([]float32(nil), a...)
	c := make([]float32, M*N)
	if err := tilelang.LaunchStaged(p, tilelang.Tensor(a, M, K), tilelang.Tensor(b, K, N), tilelang.Tensor(c, M, N)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var ref float64
			for k := 0; k < K; k++ {
				ref += float64(a[i*K+k]) * float64(b[k*N+j])
			}
			if math.Abs(float64(c[i*N+j])-ref) > 1e-4 {
				t.Fatalf("C[%d,%d] = %v, expected %v", i, j, c[i*N+j], ref)
			}
		}
	}
	for i := range a {
		if a[i] != a0[i] {
			t.Fatal("a read-only input changed")
		}
	}
	err := tilelang.LaunchStaged(p, tilelang.Tensor(a, M, K+1), tilelang.Tensor(b, K, N), tilelang.Tensor(c, M, N))
	expectErr(t, err, tilelang.InvalidArgument, "argument 0", "the slice has")
}

func TestCodeNames(t *testing.T) {
	for code, name := range map[tilelang.Code]string{
		tilelang.OK: "OK", tilelang.InvalidArgument: "INVALID_ARGUMENT", tilelang.NotFound: "NOT_FOUND",
		tilelang.OutOfRange: "OUT_OF_RANGE", tilelang.Internal: "INTERNAL", tilelang.Incompatible: "INCOMPATIBLE",
		tilelang.FailedPrecondition: "FAILED_PRECONDITION", tilelang.DataLoss: "DATA_LOSS", tilelang.Code(99): "UNKNOWN_CODE",
	} {
		if code.String() != name {
			t.Errorf("%d: %q, expected %q", int(code), code.String(), name)
		}
	}
	if tilelang.Incompatible != 18 || tilelang.InvalidArgument != 3 {
		t.Error("status code values moved")
	}
	if tilelang.CodeOf(nil) != tilelang.OK || tilelang.CodeOf(errors.New("x")) != tilelang.Unknown {
		t.Error("CodeOf")
	}
	if tilelang.Float32.String() != "float32" || tilelang.BFloat16.String() != "bfloat16" {
		t.Error("dtype names", tilelang.Float32, tilelang.BFloat16)
	}
}

func TestLogSink(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	rt, err := tilelang.NewRuntime(&tilelang.Options{IgnoreEnv: true, LogLevel: tilelang.LogDebug,
		Log: func(l tilelang.LogLevel, m string) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, l.String()+" "+m)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cpu, _ := rt.DefaultDevice("cpu")
	defer cpu.Close()
	b, err := rt.OpenBundle(bundlePath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k, _ := b.Kernel("vadd")
	defer k.Close()
	p, err := k.Prepare(cpu)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	x, y := []float32{1, 2}, []float32{0, 0}
	if err := p.Launch(tilelang.Tensor(x, 2), tilelang.Tensor(x, 2), tilelang.Tensor(y, 2)); err != nil || y[1] != 4 {
		t.Fatal(y, err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "info prepared kernel 'vadd'") || !strings.Contains(all, "debug launch kernel 'vadd'") {
		t.Fatalf("log:\n%s", all)
	}
}

func TestEmptyProblemsAndExplicitGrids(t *testing.T) {
	e := setup(t)
	p := e.prepare(t, "vadd")
	var empty []float32
	if err := p.Launch(tilelang.Tensor(empty, 0), tilelang.Tensor(empty, 0), tilelang.Tensor(empty, 0)); err != nil {
		t.Fatal("empty problem:", err)
	}
	if err := tilelang.LaunchStaged(p, tilelang.Tensor(empty, 0), tilelang.Tensor(empty, 0), tilelang.Tensor(empty, 0)); err != nil {
		t.Fatal("empty problem, staged:", err)
	}
	n := 600
	a, c := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = 1
	}
	if err := p.LaunchWith(&tilelang.LaunchOptions{Grid: [3]uint32{1, 0, 0}}, tilelang.Tensor(a, n), tilelang.Tensor(a, n), tilelang.Tensor(c, n)); err != nil {
		t.Fatal(err)
	}
	for i := range c {
		if want := float32(0); i < 256 && c[i] != 2 || i >= 256 && c[i] != want {
			t.Fatalf("c[%d] = %v", i, c[i])
		}
	}
}
