package samba

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	lr       = 0.2
	momentum = 0.9
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func param(name string, shape []int64, phase float64) *Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(0.4 * math.Sin(1.3*float64(i)+phase))
	}
	t := must(FromFloat32(v, shape))
	if err := t.SetName(name); err != nil {
		panic(err)
	}
	if err := t.SetRequiresGrad(true); err != nil {
		panic(err)
	}
	return t
}

func params() []*Tensor {
	return []*Tensor{param("fc1.weight", []int64{6, 4}, 1), param("fc1.bias", []int64{6}, 2),
		param("fc2.weight", []int64{3, 6}, 3), param("fc2.bias", []int64{3}, 4)}
}

func data() (*Tensor, *Tensor) {
	xs := make([]float32, 32)
	for i := range xs {
		xs[i] = float32(math.Cos(0.9 * float64(i)))
	}
	x := must(FromFloat32(xs, []int64{8, 4}))
	y := must(FromInt64([]int64{0, 1, 2, 1, 0, 2, 2, 1}, []int64{8}))
	if err := x.SetName("x"); err != nil {
		panic(err)
	}
	if err := y.SetName("y"); err != nil {
		panic(err)
	}
	return x, y
}

func forward(p []*Tensor, x, y *Tensor) (*Tensor, error) {
	h, err := Op1("linear", x, p[0], p[1])
	if err != nil {
		return nil, err
	}
	if h, err = Op1("tanh", h); err != nil {
		return nil, err
	}
	logits, err := Op1("linear", h, p[2], p[3])
	if err != nil {
		return nil, err
	}
	return Op1("cross_entropy", logits, y)
}

// Training done eagerly through ops and autograd, SGD with momentum by hand
// as torch.optim.SGD does it.
func eagerLosses(steps int) []float64 {
	x, y := data()
	shapes := [][]int64{{6, 4}, {6}, {3, 6}, {3}}
	var w, velocity [][]float32
	for _, t := range params() {
		w = append(w, must(t.Float32s()))
	}
	var losses []float64
	for step := 0; step < steps; step++ {
		var p []*Tensor
		for k := range w {
			t := must(FromFloat32(w[k], shapes[k]))
			if err := t.SetRequiresGrad(true); err != nil {
				panic(err)
			}
			p = append(p, t)
		}
		loss := must(forward(p, x, y))
		losses = append(losses, must(loss.Item()))
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		for k, t := range p {
			g := must(must(t.Grad()).Float32s())
			if step == 0 {
				velocity = append(velocity, g)
			} else {
				for i := range g {
					velocity[k][i] = float32(momentum)*velocity[k][i] + g[i]
				}
			}
			for i := range w[k] {
				w[k][i] -= float32(lr) * velocity[k][i]
			}
		}
	}
	return losses
}

func TestCompiledTrainingMatchesEagerTraining(t *testing.T) {
	p := params()
	x, y := data()
	model := func(in []*Tensor) ([]*Tensor, error) {
		loss, err := forward(p, in[0], in[1])
		return []*Tensor{loss}, err
	}
	sgd := must(NewOptimizer("sgd", Attrs{"lr": lr, "momentum": momentum}))
	if err := sgd.AddParamGroup(p, nil); err != nil {
		t.Fatal(err)
	}
	s := must(NewSession(2))
	defer s.Close()
	pef := filepath.Join(t.TempDir(), "go_ffn.pef")
	if err := s.Compile(model, []*Tensor{x, y}, []*Optimizer{sgd}, &CompileOptions{PEFPath: pef, LossIndices: []int64{0}}); err != nil {
		t.Fatal(err)
	}
	outs, err := s.TraceGraph(model, []*Tensor{x, y}, []*Optimizer{sgd}, pef, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := eagerLosses(20)
	for step, w := range want {
		got := must(must(s.Run([]*Tensor{x, y}, outs, nil))[0].Item())
		if math.Abs(got-w) > 1e-5*math.Max(1, math.Abs(w)) {
			t.Fatalf("step %d: compiled %v, eager %v", step, got, w)
		}
	}
	if !(want[19] < 0.8*want[0]) {
		t.Fatalf("training did not lower the loss: %v", want)
	}
	dev := must(must(s.SnData(p[0])).Float32s())
	host := must(p[0].Float32s())
	if fmt.Sprint(dev) == fmt.Sprint(host) {
		t.Fatal("the device weights did not move")
	}
	if _, err := os.Stat(pef); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsCarryTheStatusAndMessage(t *testing.T) {
	a := must(FromFloat32(make([]float32, 6), []int64{2, 3}))
	_, err := Op1("matmul", a, a)
	var e *Error
	if !errors.As(err, &e) || e.Status != ShapeMismatch || !errors.Is(err, ShapeMismatch) || e.Status.String() != "SAMBA_ERR_SHAPE_MISMATCH" || !strings.Contains(e.Message, "matmul") {
		t.Fatalf("unexpected error %v", err)
	}
	s := must(NewSession(1))
	defer s.Close()
	broken := func([]*Tensor) ([]*Tensor, error) { return nil, errors.New("layer 3 is missing") }
	err = s.Compile(broken, []*Tensor{a}, nil, &CompileOptions{PEFPath: filepath.Join(t.TempDir(), "b.pef")})
	if err == nil || !strings.Contains(err.Error(), "layer 3 is missing") {
		t.Fatalf("unexpected error %v", err)
	}
	panics := func([]*Tensor) ([]*Tensor, error) { panic("boom") }
	err = s.Compile(panics, []*Tensor{a}, nil, &CompileOptions{PEFPath: filepath.Join(t.TempDir(), "b.pef")})
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("unexpected error %v", err)
	}
	if Version() == "" {
		t.Fatal("no version")
	}
}
