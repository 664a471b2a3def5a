package samba

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// compiled is the small classifier of samba_test.go compiled with SGD and
// loaded, optionally with a dropout of rate 0.5 after its hidden layer.
type compiled struct {
	s    *Session
	p    []*Tensor
	x, y *Tensor
	outs []*Tensor
}

func compileClassifier(t *testing.T, dropout bool) *compiled {
	t.Helper()
	c := &compiled{p: params()}
	c.x, c.y = data()
	model := func(in []*Tensor) ([]*Tensor, error) {
		h, err := Op1("linear", in[0], c.p[0], c.p[1])
		if err != nil {
			return nil, err
		}
		if h, err = Op1("tanh", h); err != nil {
			return nil, err
		}
		if dropout {
			outs, err := Op("dropout", []*Tensor{h}, Attrs{"p": 0.5})
			if err != nil {
				return nil, err
			}
			h = outs[0]
		}
		logits, err := Op1("linear", h, c.p[2], c.p[3])
		if err != nil {
			return nil, err
		}
		loss, err := Op1("cross_entropy", logits, in[1])
		return []*Tensor{loss}, err
	}
	sgd := must(NewOptimizer("sgd", Attrs{"lr": lr, "momentum": momentum}))
	if err := sgd.AddParamGroup(c.p, nil); err != nil {
		t.Fatal(err)
	}
	c.s = must(NewSession(2))
	t.Cleanup(func() { c.s.Close() })
	pef := filepath.Join(t.TempDir(), "classifier.pef")
	in := []*Tensor{c.x, c.y}
	if err := c.s.Compile(model, in, []*Optimizer{sgd}, &CompileOptions{PEFPath: pef, Name: "classifier"}); err != nil {
		t.Fatal(err)
	}
	var err error
	if c.outs, err = c.s.TraceGraph(model, in, []*Optimizer{sgd}, pef, nil); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *compiled) run(t *testing.T, opts *RunOptions) float64 {
	t.Helper()
	outs, err := c.s.Run([]*Tensor{c.x, c.y}, c.outs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return must(outs[0].Item())
}

func (c *compiled) weights(t *testing.T) [][]float32 {
	t.Helper()
	var w [][]float32
	for _, p := range c.p {
		w = append(w, must(must(c.s.SnData(p)).Float32s()))
	}
	return w
}

func TestRunOptionsSelectWhatRuns(t *testing.T) {
	c := compileClassifier(t, false)
	types := must(c.s.Names(SectionTypeNames))
	if len(types) < 3 {
		t.Fatalf("section types %v: expected FWD, BCKWD and OPT", types)
	}
	if got := must(c.s.Argin("lr")); got != lr {
		t.Fatalf("argin lr is %v, compiled with %v", got, lr)
	}
	initial := eagerLosses(1)[0]

	// Forward only: the loss of the initial weights, and the weights stay.
	w0 := c.weights(t)
	for i := 0; i < 2; i++ {
		if got := c.run(t, &RunOptions{SectionTypes: []string{"FWD"}}); math.Abs(got-initial) > 1e-5 {
			t.Fatalf("FWD run %d: loss %v, expected the initial %v", i, got, initial)
		}
	}
	if !reflect.DeepEqual(c.weights(t), w0) {
		t.Fatal("a forward-only run changed the weights")
	}

	// A zero gradient of the loss leaves the weights as they are (the device
	// keeps that gradient for the runs after it until it is set again).
	zero := must(FromFloat32([]float32{0}, []int64{}))
	one := must(FromFloat32([]float32{1}, []int64{}))
	c.run(t, &RunOptions{GradOfOutputs: []*Tensor{zero}})
	c.run(t, nil)
	if !reflect.DeepEqual(c.weights(t), w0) {
		t.Fatal("runs from a zero output gradient changed the weights")
	}
	// So does lr 0, which stays set for the runs after it.
	c.run(t, &RunOptions{Hyperparams: map[string]float64{"lr": 0}, GradOfOutputs: []*Tensor{one}})
	c.run(t, nil)
	if !reflect.DeepEqual(c.weights(t), w0) || must(c.s.Argin("lr")) != 0 {
		t.Fatal("runs with lr 0 changed the weights")
	}
	if err := c.s.SetArgin("lr", lr); err != nil {
		t.Fatal(err)
	}

	// The whole schedule by call range and by section ids trains.
	c.run(t, &RunOptions{Calls: &CallRange{From: -1, Until: -1}})
	w1 := c.weights(t)
	if reflect.DeepEqual(w1, w0) {
		t.Fatal("a run of the whole call range did not train")
	}
	if got := c.run(t, &RunOptions{SectionIDs: []int32{0}}); got >= initial {
		t.Fatalf("section 0 (FWD) after a step: loss %v, not below the initial %v", got, initial)
	}
	if !reflect.DeepEqual(c.weights(t), w1) {
		t.Fatal("running section 0 alone changed the weights")
	}

	refused := []struct {
		opts *RunOptions
		want Status
	}{
		{&RunOptions{Hyperparams: map[string]float64{"lr": -1}}, InvalidArgument},
		{&RunOptions{Hyperparams: map[string]float64{"no_such_argin": 1}}, NotFound},
		{&RunOptions{SectionTypes: []string{"NOPE"}}, NotFound},
		{&RunOptions{SectionIDs: []int32{999}}, NotFound},
		{&RunOptions{Calls: &CallRange{From: -2, Until: -1}}, InvalidArgument},
		{&RunOptions{GraphName: "no_such_graph"}, NotFound},
		{&RunOptions{DataParallel: &DataParallel{Mode: "normal"}}, InvalidArgument}, // not compiled for data parallel
	}
	for _, r := range refused {
		_, err := c.s.Run([]*Tensor{c.x, c.y}, c.outs, r.opts)
		var e *Error
		if !errors.Is(err, r.want) || !errors.As(err, &e) || e.Message == "" {
			t.Errorf("%+v: got %v, expected %v with a message", r.opts, err, r.want)
		}
	}
	if !reflect.DeepEqual(c.weights(t), w1) || must(c.s.Argin("lr")) != lr {
		t.Fatal("refused runs changed the weights or the learning rate")
	}
}

func TestEvalRunsWithoutDropout(t *testing.T) {
	c := compileClassifier(t, true)
	initial := eagerLosses(1)[0]
	eval := &RunOptions{SectionTypes: []string{"FWD"}, Eval: true}
	if got := c.run(t, eval); math.Abs(got-initial) > 1e-5 {
		t.Fatalf("eval loss %v, expected the loss without dropout %v", got, initial)
	}
	train := c.run(t, &RunOptions{SectionTypes: []string{"FWD"}})
	if math.Abs(train-initial) < 1e-6 {
		t.Fatalf("the training loss %v equals the loss without dropout", train)
	}
	if got := must(c.s.Names(DropoutRateArginNames)); len(got) != 1 {
		t.Fatalf("dropout rate argins %v, expected one", got)
	}
}

func TestCheckpointRestoresTheTrainingState(t *testing.T) {
	c := compileClassifier(t, false)
	for i := 0; i < 3; i++ {
		c.run(t, nil)
	}
	path := filepath.Join(t.TempDir(), "classifier.ckpt")
	if err := c.s.SaveCheckpoint(path, AllState); err != nil {
		t.Fatal(err)
	}
	saved := c.weights(t)
	next := c.run(t, nil) // the loss of the saved weights, then a step with the saved momentum
	after := c.run(t, nil)
	c.run(t, nil)
	if reflect.DeepEqual(c.weights(t), saved) {
		t.Fatal("training did not move the weights")
	}
	if err := c.s.LoadCheckpoint(path, AllState, true); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.weights(t), saved) {
		t.Fatal("loading the checkpoint did not restore the weights")
	}
	// The momentum came back too: the two steps after the load repeat the
	// two steps after the save.
	if got := c.run(t, nil); got != next {
		t.Fatalf("loss after load %v, after save %v", got, next)
	}
	if got := c.run(t, nil); got != after {
		t.Fatalf("second loss after load %v, after save %v", got, after)
	}

	restored := c.weights(t)
	bytes := must(os.ReadFile(path))
	bytes[len(bytes)/2] ^= 0xff
	damaged := filepath.Join(t.TempDir(), "damaged.ckpt")
	if err := os.WriteFile(damaged, bytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.s.LoadCheckpoint(damaged, AllState, true); !errors.Is(err, CorruptFile) {
		t.Fatalf("damaged checkpoint: got %v, expected %v", err, CorruptFile)
	}
	if err := c.s.LoadCheckpoint(filepath.Join(t.TempDir(), "missing.ckpt"), AllState, true); !errors.Is(err, IOError) {
		t.Fatalf("missing checkpoint: got %v, expected %v", err, IOError)
	}
	if !reflect.DeepEqual(c.weights(t), restored) {
		t.Fatal("a refused checkpoint changed the weights")
	}
}

func TestDeviceTensorsAndTransfers(t *testing.T) {
	c := compileClassifier(t, false)
	c.run(t, nil)
	if inputs := must(c.s.Names(InputNames)); !reflect.DeepEqual(inputs, []string{"x", "y"}) {
		t.Fatalf("inputs %v", inputs)
	}
	device := must(must(c.s.SnData(c.p[0])).Float32s())
	byName := must(c.s.TensorsByName("fc1.weight", "fc2.bias"))
	if len(byName) != 2 || !reflect.DeepEqual(must(byName[0].Float32s()), device) {
		t.Fatal("TensorsByName differs from SnData")
	}
	grad := must(must(c.s.SnGrad(c.p[0])).Float32s())
	if reflect.DeepEqual(grad, make([]float32, len(grad))) {
		t.Fatal("no gradient on the device after a training run")
	}
	if reflect.DeepEqual(must(c.p[0].Float32s()), device) {
		t.Fatal("the host weights moved without ToCPU")
	}
	if err := c.s.ToCPU(Parameters); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(must(c.p[0].Float32s()), device) {
		t.Fatal("ToCPU did not copy the device weights to the host")
	}
	zeros := must(NewTensor(Float32, []int64{6, 4}))
	if err := c.s.SetSnData(c.p[0], zeros); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(must(must(c.s.SnData(c.p[0])).Float32s()), make([]float32, 24)) {
		t.Fatal("SetSnData did not set the device value")
	}
	if err := c.s.ToRDU(Parameters); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(must(must(c.s.SnData(c.p[0])).Float32s()), device) {
		t.Fatal("ToRDU did not copy the host weights to the device")
	}
	if _, err := c.s.TensorsByName("no_such_tensor"); !errors.Is(err, NotFound) {
		t.Fatalf("got %v, expected %v", err, NotFound)
	}
	if err := c.s.Unload(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.s.Run([]*Tensor{c.x, c.y}, c.outs, nil); !errors.Is(err, InvalidState) {
		t.Fatalf("run without a PEF: got %v, expected %v", err, InvalidState)
	}
}

func TestCompileOptions(t *testing.T) {
	p := params()
	x, y := data()
	model := func(in []*Tensor) ([]*Tensor, error) {
		loss, err := forward(p, in[0], in[1])
		return []*Tensor{loss}, err
	}
	s := must(NewSession(1))
	defer s.Close()
	dir := t.TempDir()
	pef := filepath.Join(dir, "inference.pef")
	opts := &CompileOptions{Name: "infer", PEFPath: pef, Inference: true, Unoptimized: true, NoLog: true,
		Metadata: map[string]string{"dataset": "synthetic"}}
	if err := s.Compile(model, []*Tensor{x, y}, nil, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pef + ".log"); !os.IsNotExist(err) {
		t.Fatalf("NoLog: the log exists (%v)", err)
	}
	// Loaded without re-tracing, as an inference app does.
	if err := s.LoadPEF(pef); err != nil {
		t.Fatal(err)
	}
	if types := must(s.Names(SectionTypeNames)); !reflect.DeepEqual(types, []string{"FWD"}) {
		t.Fatalf("an inference PEF has sections %v", types)
	}
	outs := must(s.Run([]*Tensor{x, y}, nil, nil))
	if got, want := must(outs[0].Item()), eagerLosses(1)[0]; math.Abs(got-want) > 1e-5 {
		t.Fatalf("inference loss %v, eager %v", got, want)
	}
	// TraceGraph without a model loads the PEF and names its outputs.
	traced := must(s.TraceGraph(nil, nil, nil, pef, nil))
	outs = must(s.Run([]*Tensor{x, y}, traced, nil))
	if len(traced) != 1 || len(outs) != 1 || math.Abs(must(outs[0].Item())-eagerLosses(1)[0]) > 1e-5 {
		t.Fatalf("TraceGraph without a model: %d outputs, run gave %d", len(traced), len(outs))
	}
	bad := []*CompileOptions{{PEFPath: pef, Mapping: "diagonal"}, {PEFPath: pef, BatchSize: -1},
		{PEFPath: pef, OutputGrads: []OutputGrad{{Index: 0, Mode: GradCustom}}},
		{PEFPath: pef, MixedPrecision: "fp16"}}
	for _, o := range bad {
		if err := s.Compile(model, []*Tensor{x, y}, nil, o); err == nil {
			t.Errorf("%+v: compiled", o)
		}
	}
}
