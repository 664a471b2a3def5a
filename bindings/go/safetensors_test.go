package samba

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeSafetensors writes tensors (float32, in the order given) as
// safetensors.torch.save_file lays them out: the header's length, the JSON
// header padded with spaces to 8 bytes, the data back to back.
func writeSafetensors(t *testing.T, path string, names []string, shapes [][]int64, values [][]float32) {
	t.Helper()
	header := map[string]any{}
	var data bytes.Buffer
	for i, name := range names {
		begin := data.Len()
		if err := binary.Write(&data, binary.LittleEndian, values[i]); err != nil {
			t.Fatal(err)
		}
		header[name] = map[string]any{"dtype": "F32", "shape": shapes[i], "data_offsets": []int{begin, data.Len()}}
	}
	h := must(json.Marshal(header))
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var file bytes.Buffer
	if err := binary.Write(&file, binary.LittleEndian, uint64(len(h))); err != nil {
		t.Fatal(err)
	}
	file.Write(h)
	file.Write(data.Bytes())
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func filled(n int, v float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestSafetensorsCarryWeightsOutAndIn(t *testing.T) {
	c := compileClassifier(t, false)
	dir := t.TempDir()
	saved := filepath.Join(dir, "saved.safetensors")
	if err := c.s.SaveSafetensors(saved, Parameters); err != nil {
		t.Fatal(err)
	}
	weights := c.weights(t)
	file := must(os.ReadFile(saved))
	headerLen := binary.LittleEndian.Uint64(file[:8])
	var header map[string]json.RawMessage
	if err := json.Unmarshal(file[8:8+headerLen], &header); err != nil {
		t.Fatalf("the saved header is not JSON: %v", err)
	}
	for _, name := range []string{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"} {
		if _, ok := header[name]; !ok {
			t.Fatalf("%s missing from the saved header %s", name, file[8:8+headerLen])
		}
	}
	// A training step moves the weights; the file brings them back.
	c.run(t, nil)
	if reflect.DeepEqual(c.weights(t), weights) {
		t.Fatal("training did not move the weights")
	}
	if err := c.s.LoadSafetensors(saved, Parameters, nil, true); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.weights(t), weights) {
		t.Fatal("loading the saved file did not restore the weights")
	}

	// Names with a prefix, as a Hugging Face checkpoint's: refused unmapped
	// when strict, loaded through the name map.
	prefixed := filepath.Join(dir, "prefixed.safetensors")
	names := []string{"model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias"}
	shapes := [][]int64{{6, 4}, {6}, {3, 6}, {3}}
	values := [][]float32{filled(24, 0.25), filled(6, 0.5), filled(18, -0.25), filled(3, 1)}
	writeSafetensors(t, prefixed, names, shapes, values)
	err := c.s.LoadSafetensors(prefixed, Parameters, nil, true)
	if !errors.Is(err, InvalidArgument) || !strings.Contains(err.Error(), "model.fc") {
		t.Fatalf("unmapped names: got %v, expected %v naming them", err, InvalidArgument)
	}
	if !reflect.DeepEqual(c.weights(t), weights) {
		t.Fatal("a refused load changed the weights")
	}
	if err := c.s.LoadSafetensors(prefixed, Parameters, map[string]string{"model.": ""}, true); err != nil {
		t.Fatal(err)
	}
	if got := c.weights(t); !reflect.DeepEqual(got, values) {
		t.Fatalf("loaded through the name map: %v, expected %v", got, values)
	}

	// A file cut short is refused and changes nothing.
	truncated := filepath.Join(dir, "truncated.safetensors")
	if err := os.WriteFile(truncated, file[:len(file)-4], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.s.LoadSafetensors(truncated, Parameters, nil, true); !errors.Is(err, CorruptFile) {
		t.Fatalf("truncated file: got %v, expected %v", err, CorruptFile)
	}
	if err := c.s.LoadSafetensors(filepath.Join(dir, "missing.safetensors"), Parameters, nil, true); !errors.Is(err, IOError) {
		t.Fatalf("missing file: got %v, expected %v", err, IOError)
	}
	if !reflect.DeepEqual(c.weights(t), values) {
		t.Fatal("a refused file changed the weights")
	}
}
