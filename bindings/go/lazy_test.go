package samba

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// lazyClassifier creates the classifier's parameters through the session
// (lazily when lazy is set) with the seed given, compiles and loads it.
func lazyClassifier(t *testing.T, lazy bool, seed uint64) (*Session, []*Tensor) {
	t.Helper()
	s := must(NewSession(2))
	t.Cleanup(func() { s.Close() })
	if lazy {
		if err := s.EnableLazyParams(&LazyParamOptions{Seed: &seed}); err != nil {
			t.Fatal(err)
		}
	} else if err := s.SetSeed(seed); err != nil {
		t.Fatal(err)
	}
	weight := must(NewMaterializer("linear_weight", nil))
	bias := must(NewMaterializer("linear_bias", Attrs{"fan_in": int64(4)}))
	defer weight.Close()
	defer bias.Close()
	p := []*Tensor{
		must(s.CreateParameter("fc1.weight", Float32, []int64{6, 4}, weight)),
		must(s.CreateParameter("fc1.bias", Float32, []int64{6}, bias)),
		must(s.CreateParameter("fc2.weight", Float32, []int64{3, 6}, weight)),
		must(s.CreateParameter("fc2.bias", Float32, []int64{3}, bias)),
	}
	x, y := data()
	model := func(in []*Tensor) ([]*Tensor, error) {
		loss, err := forward(p, in[0], in[1])
		return []*Tensor{loss}, err
	}
	sgd := must(NewOptimizer("sgd", Attrs{"lr": lr}))
	if err := sgd.AddParamGroup(p, nil); err != nil {
		t.Fatal(err)
	}
	pef := filepath.Join(t.TempDir(), "lazy.pef")
	if err := s.Compile(model, []*Tensor{x, y}, []*Optimizer{sgd}, &CompileOptions{PEFPath: pef}); err != nil {
		t.Fatal(err)
	}
	if lazy && must(p[0].HasData()) {
		t.Fatal("compiling materialized a lazy parameter")
	}
	if _, err := s.TraceGraph(model, []*Tensor{x, y}, []*Optimizer{sgd}, pef, nil); err != nil {
		t.Fatal(err)
	}
	return s, p
}

func TestLazyParametersMaterializeOnTheDevice(t *testing.T) {
	s, p := lazyClassifier(t, true, 42)
	if !must(s.LazyParams()) {
		t.Fatal("the session is not in lazy mode")
	}
	if must(p[0].HasData()) {
		t.Fatal("loading materialized a lazy parameter on the host")
	}
	kind := must(must(p[0].Materializer()).Kind())
	if kind != "linear_weight" {
		t.Fatalf("materializer %q", kind)
	}
	device := must(must(s.SnData(p[0])).Float32s())

	// Eagerly made with the same seed, the values are the same.
	eager, q := lazyClassifier(t, false, 42)
	if !must(q[0].HasData()) {
		t.Fatal("a parameter made outside lazy mode has no data")
	}
	if host := must(q[0].Float32s()); !reflect.DeepEqual(host, device) {
		t.Fatalf("lazy values on the device %v, eager values %v", device, host)
	}
	if !reflect.DeepEqual(must(must(eager.SnData(q[0])).Float32s()), device) {
		t.Fatal("the eager session's device values differ")
	}
	// kaiming_uniform(a = sqrt 5) over fan_in 4 draws from +-1/sqrt(4).
	for _, v := range device {
		if math.Abs(float64(v)) > 0.5 {
			t.Fatalf("value %v outside the linear_weight bound 0.5", v)
		}
	}
	// Reading a placeholder on the host materializes it there, with the same values.
	if host := must(p[0].Float32s()); !reflect.DeepEqual(host, device) {
		t.Fatalf("host materialization %v, device %v", host, device)
	}

	other, _ := lazyClassifier(t, true, 43)
	if reflect.DeepEqual(must(must(other.SnData(p[0])).Float32s()), device) {
		t.Fatal("another seed gave the same values")
	}
}

func TestCustomMaterializer(t *testing.T) {
	var calls atomic.Int32
	m := must(NewCustomMaterializer(func(out *Tensor, rng *RNGStream) error {
		calls.Add(1)
		return rng.Normal(out, 3, 0.5)
	}))
	defer m.Close()
	if kind := must(m.Kind()); kind != "custom" {
		t.Fatalf("kind %q", kind)
	}
	values := func() []float32 {
		s := must(NewSession(1))
		defer s.Close()
		if err := s.EnableLazyParams(nil); err != nil {
			t.Fatal(err)
		}
		w := must(s.CreateParameter("w", Float32, []int64{1000}, m))
		if must(w.HasData()) {
			t.Fatal("a lazy parameter has data before it is read")
		}
		if err := w.Materialize(); err != nil {
			t.Fatal(err)
		}
		return must(w.Float32s())
	}
	first := values()
	if calls.Load() != 1 {
		t.Fatalf("the materializer ran %d times, expected once", calls.Load())
	}
	if !reflect.DeepEqual(values(), first) {
		t.Fatal("the stream of the same (seed, name) gave other values")
	}
	mean := 0.0
	for _, v := range first {
		mean += float64(v) / float64(len(first))
	}
	if math.Abs(mean-3) > 0.1 {
		t.Fatalf("mean %v of normal(3, 0.5) values", mean)
	}

	failing := must(NewCustomMaterializer(func(out *Tensor, rng *RNGStream) error {
		return &Error{Status: Unsupported, Message: "no initializer for this layer"}
	}))
	s := must(NewSession(1))
	defer s.Close()
	if err := s.EnableLazyParams(nil); err != nil {
		t.Fatal(err)
	}
	w := must(s.CreateParameter("w", Float32, []int64{4}, failing))
	err := w.Materialize()
	if !errors.Is(err, Unsupported) || !strings.Contains(err.Error(), "no initializer for this layer") {
		t.Fatalf("got %v, expected the materializer's error", err)
	}
	if must(w.HasData()) {
		t.Fatal("a failed materialization left data")
	}
	panics := must(NewCustomMaterializer(func(*Tensor, *RNGStream) error { panic("bad init") }))
	w = must(s.CreateParameter("v", Float32, []int64{4}, panics))
	if err := w.Materialize(); err == nil || !strings.Contains(err.Error(), "bad init") {
		t.Fatalf("got %v, expected the materializer's panic", err)
	}
}
