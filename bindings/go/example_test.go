package samba_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	samba "github.com/sambaflow/samba/bindings/go"
)

// The workflow: lazy parameters, a model compiled into a PEF, loaded with
// trace_graph, trained on batches from a loader, evaluated, checkpointed.
func Example() {
	dir, err := os.MkdirTemp("", "samba-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := samba.NewSession(0)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	seed := uint64(7)
	if err := s.EnableLazyParams(&samba.LazyParamOptions{Seed: &seed}); err != nil {
		log.Fatal(err)
	}
	weightInit, _ := samba.NewMaterializer("linear_weight", nil)
	biasInit, _ := samba.NewMaterializer("zeros", nil)
	defer weightInit.Close()
	defer biasInit.Close()
	w, _ := s.CreateParameter("fc.weight", samba.Float32, []int64{2, 4}, weightInit)
	b, _ := s.CreateParameter("fc.bias", samba.Float32, []int64{2}, biasInit)

	model := func(in []*samba.Tensor) ([]*samba.Tensor, error) {
		logits, err := samba.Op1("linear", in[0], w, b)
		if err != nil {
			return nil, err
		}
		loss, err := samba.Op1("cross_entropy", logits, in[1])
		return []*samba.Tensor{loss}, err
	}
	// Batch i: four points whose class is the sign of their first feature.
	produce := func(ctx context.Context, i int64) ([]*samba.Tensor, error) {
		if i == 8 {
			return nil, io.EOF
		}
		v := float32(i%3) + 1
		x, err := samba.FromFloat32([]float32{v, 1, 0, 0, -v, 0, 1, 0, v, 0, 0, 1, -v, 1, 1, 1}, []int64{4, 4})
		if err != nil {
			return nil, err
		}
		y, err := samba.FromInt64([]int64{0, 1, 0, 1}, []int64{4})
		return []*samba.Tensor{x, y}, err
	}
	loader, err := samba.NewLoader(context.Background(), []string{"x", "y"}, produce, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer loader.Close()
	first, err := loader.Next()
	if err != nil {
		log.Fatal(err)
	}

	sgd, _ := samba.NewOptimizer("sgd", samba.Attrs{"lr": 0.5})
	defer sgd.Close()
	if err := sgd.AddParamGroup([]*samba.Tensor{w, b}, nil); err != nil {
		log.Fatal(err)
	}
	pef := filepath.Join(dir, "classifier.pef")
	opts := &samba.CompileOptions{Name: "classifier", PEFPath: pef}
	if err := s.Compile(model, first, []*samba.Optimizer{sgd}, opts); err != nil {
		log.Fatal(err)
	}
	outs, err := s.TraceGraph(model, first, []*samba.Optimizer{sgd}, pef, nil)
	if err != nil {
		log.Fatal(err)
	}
	sections, _ := s.Names(samba.SectionTypeNames)
	fmt.Println("sections:", sections)

	eval := &samba.RunOptions{SectionTypes: []string{"FWD"}, Eval: true}
	loss := func() float64 {
		res, err := s.Run(first, outs, eval)
		if err != nil {
			log.Fatal(err)
		}
		v, _ := res[0].Item()
		return v
	}
	before := loss()
	for batch := first; err == nil; batch, err = loader.Next() {
		if _, err := s.Run(batch, outs, nil); err != nil {
			log.Fatal(err)
		}
	}
	if !errors.Is(err, io.EOF) {
		log.Fatal(err)
	}
	trained := loss()
	fmt.Println("the loss fell:", trained < before/2)

	ckpt := filepath.Join(dir, "classifier.ckpt")
	if err := s.SaveCheckpoint(ckpt, samba.AllState); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Run(first, outs, &samba.RunOptions{Hyperparams: map[string]float64{"lr": 5}}); err != nil {
		log.Fatal(err)
	}
	if err := s.LoadCheckpoint(ckpt, samba.AllState, true); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the checkpoint restored the loss:", loss() == trained)
	// Output:
	// sections: [FWD BCKWD OPT]
	// the loss fell: true
	// the checkpoint restored the loss: true
}

// Failures are *samba.Error values carrying the library's status and
// message; errors.Is matches the status.
func ExampleError() {
	a, _ := samba.FromFloat32(make([]float32, 6), []int64{2, 3})
	defer a.Close()
	_, err := samba.Op1("matmul", a, a)
	var e *samba.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, errors.Is(err, samba.ShapeMismatch))
	}
	// Output: SAMBA_ERR_SHAPE_MISMATCH true
}
