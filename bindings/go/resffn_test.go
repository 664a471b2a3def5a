package samba

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The C example (examples/c/resffn_logreg.c) trains the seed's ResFFNLogReg
// for 20 steps and dumps its initial weights and each step's rows, learning
// rate and loss. This test builds the same model in Go, compiles it with the
// same SGD, feeds the same batches and checks every loss against the C
// example's. SAMBA_EXAMPLE and SAMBA_DIGITS name the example binary and the
// data set; without them the test is skipped.
func TestLossesMatchTheCExample(t *testing.T) {
	app, data := os.Getenv("SAMBA_EXAMPLE"), os.Getenv("SAMBA_DIGITS")
	if app == "" || data == "" {
		t.Skip("SAMBA_EXAMPLE and SAMBA_DIGITS are not set")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"compile", "-b", "64", "-p", filepath.Join(dir, "c.pef")},
		{"run", "-p", filepath.Join(dir, "c.pef"), "--data", data, "--steps", "20", "--dump",
			filepath.Join(dir, "steps.jsonl"), "--checkpoint", filepath.Join(dir, "w.ckpt")},
	} {
		if out, err := exec.Command(app, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", app, args, err, out)
		}
	}
	f, err := os.Open(filepath.Join(dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var config struct {
		Hidden      int64   `json:"hidden"`
		Batch       int64   `json:"batch"`
		Momentum    float64 `json:"momentum"`
		WeightDecay float64 `json:"weight_decay"`
	}
	type record struct {
		Param  string    `json:"param"`
		Values []float32 `json:"values"`
		Lr     float64   `json:"lr"`
		Loss   float64   `json:"loss"`
		Rows   []int     `json:"rows"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	sc.Scan()
	if err := json.Unmarshal(sc.Bytes(), &config); err != nil {
		t.Fatal(err)
	}
	weights := map[string][]float32{}
	var steps []record
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Param != "" {
			weights[r.Param] = r.Values
		} else {
			steps = append(steps, r)
		}
	}
	pixels, labels := loadDigits(t, data)

	h := config.Hidden
	shapes := map[string][]int64{"gemm1.weight": {h, 64}, "gemm1.bias": {h}, "gemm2.weight": {h, h}, "gemm2.bias": {h},
		"gemm3.weight": {10, h}, "gemm3.bias": {10}, "norm1.weight": {h}, "norm1.bias": {h}, "norm2.weight": {h},
		"norm2.bias": {h}}
	p := map[string]*Tensor{}
	var all []*Tensor
	for name, shape := range shapes {
		tensor := must(FromFloat32(weights[name], shape))
		if err := tensor.SetName(name); err != nil {
			t.Fatal(err)
		}
		if err := tensor.SetRequiresGrad(true); err != nil {
			t.Fatal(err)
		}
		p[name] = tensor
		all = append(all, tensor)
	}
	ln := Attrs{"normalized_shape": []int64{h}}
	model := func(in []*Tensor) ([]*Tensor, error) {
		out := must(Op1("linear", in[0], p["gemm1.weight"], p["gemm1.bias"]))
		out = must(Op("layer_norm", []*Tensor{out, p["norm1.weight"], p["norm1.bias"]}, ln))[0]
		out = must(Op1("tanh", out))
		residual := out
		out = must(Op1("linear", out, p["gemm2.weight"], p["gemm2.bias"]))
		out = must(Op("layer_norm", []*Tensor{out, p["norm2.weight"], p["norm2.bias"]}, ln))[0]
		out = must(Op1("add", out, residual))
		logits := must(Op1("linear", must(Op1("sigmoid", out)), p["gemm3.weight"], p["gemm3.bias"]))
		return []*Tensor{must(Op1("cross_entropy", logits, in[1])), logits}, nil
	}
	batch := func(rows []int) (*Tensor, *Tensor) {
		xs := make([]float32, 0, len(rows)*64)
		ys := make([]int64, 0, len(rows))
		for _, r := range rows {
			xs = append(xs, pixels[r]...)
			ys = append(ys, labels[r])
		}
		x := must(FromFloat32(xs, []int64{int64(len(rows)), 64}))
		y := must(FromInt64(ys, []int64{int64(len(rows))}))
		_ = x.SetName("x")
		_ = y.SetName("y")
		return x, y
	}
	sgd := must(NewOptimizer("sgd", Attrs{"lr": steps[0].Lr, "momentum": config.Momentum,
		"weight_decay": config.WeightDecay}))
	if err := sgd.AddParamGroup(all, nil); err != nil {
		t.Fatal(err)
	}
	s := must(NewSession(2))
	defer s.Close()
	pef := filepath.Join(dir, "go.pef")
	x0, y0 := batch(steps[0].Rows)
	if err := s.Compile(model, []*Tensor{x0, y0}, []*Optimizer{sgd}, &CompileOptions{PEFPath: pef, LossIndices: []int64{0}}); err != nil {
		t.Fatal(err)
	}
	outs := must(s.TraceGraph(model, []*Tensor{x0, y0}, []*Optimizer{sgd}, pef, nil))
	worst := 0.0
	for i, st := range steps {
		x, y := batch(st.Rows)
		got := must(must(s.Run([]*Tensor{x, y}, outs[:1], &RunOptions{Hyperparams: map[string]float64{"lr": st.Lr}}))[0].Item())
		diff := math.Abs(got - st.Loss)
		worst = math.Max(worst, diff)
		if diff > 1e-5*math.Max(1, math.Abs(st.Loss)) {
			t.Fatalf("step %d: Go %v, C example %v", i+1, got, st.Loss)
		}
	}
	t.Logf("%d steps, largest loss difference from the C example %.2e", len(steps), worst)
}

func loadDigits(t *testing.T, path string) ([][]float32, []int64) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var pixels [][]float32
	var labels []int64
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fields := strings.Split(line, ",")
		row := make([]float32, 64)
		for i := 0; i < 64; i++ {
			v, err := strconv.Atoi(fields[i])
			if err != nil {
				t.Fatal(err)
			}
			row[i] = float32(v) / 16
		}
		label, err := strconv.Atoi(fields[64])
		if err != nil {
			t.Fatal(err)
		}
		pixels = append(pixels, row)
		labels = append(labels, int64(label))
	}
	return pixels, labels
}
