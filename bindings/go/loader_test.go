package samba

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// counting produces batches x = [index, index + 0.5], y = [index] until end.
func counting(end int64) ProduceFunc {
	return func(ctx context.Context, index int64) ([]*Tensor, error) {
		if index == end {
			return nil, io.EOF
		}
		x, err := FromFloat32([]float32{float32(index), float32(index) + 0.5}, []int64{1, 2})
		if err != nil {
			return nil, err
		}
		y, err := FromInt64([]int64{index}, []int64{1})
		return []*Tensor{x, y}, err
	}
}

func epoch(t *testing.T, l *Loader) []string {
	t.Helper()
	var seen []string
	for {
		batch, err := l.Next()
		if errors.Is(err, io.EOF) {
			return seen
		}
		if err != nil {
			t.Fatal(err)
		}
		x, y := must(batch[0].Float32s()), must(batch[1].Int64s())
		seen = append(seen, fmt.Sprintf("%s=%v %s=%v", must(batch[0].Name()), x, must(batch[1].Name()), y))
	}
}

func TestLoaderDeliversBatchesInOrder(t *testing.T) {
	l := must(NewLoader(context.Background(), []string{"x", "y"}, counting(3), &LoaderOptions{MaxPrefetch: 2}))
	defer l.Close()
	want := []string{"x=[0 0.5] y=[0]", "x=[1 1.5] y=[1]", "x=[2 2.5] y=[2]"}
	if got := epoch(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("first epoch %v, expected %v", got, want)
	}
	if err := l.Reset(); err != nil {
		t.Fatal(err)
	}
	if got := epoch(t, l); !reflect.DeepEqual(got, want) {
		t.Fatalf("after Reset %v, expected %v", got, want)
	}

	limited := must(NewLoader(context.Background(), []string{"x", "y"}, counting(100), &LoaderOptions{NumBatches: 2}))
	defer limited.Close()
	if got := epoch(t, limited); !reflect.DeepEqual(got, want[:2]) {
		t.Fatalf("NumBatches 2 gave %v", got)
	}
}

func TestLoaderReportsTheProducersErrors(t *testing.T) {
	broken := func(ctx context.Context, index int64) ([]*Tensor, error) {
		if index == 1 {
			return nil, &Error{Status: CorruptFile, Message: "shard 1 is damaged"}
		}
		return counting(10)(ctx, index)
	}
	l := must(NewLoader(context.Background(), []string{"x", "y"}, broken, nil))
	defer l.Close()
	if _, err := l.Next(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the loader stops and repeats the error
		if _, err := l.Next(); !errors.Is(err, CorruptFile) || !strings.Contains(err.Error(), "shard 1 is damaged") {
			t.Fatalf("got %v, expected the producer's error", err)
		}
	}

	short := func(ctx context.Context, index int64) ([]*Tensor, error) {
		batch, err := counting(10)(ctx, index)
		return batch[:1], err
	}
	l2 := must(NewLoader(context.Background(), []string{"x", "y"}, short, nil))
	defer l2.Close()
	if _, err := l2.Next(); !errors.Is(err, InvalidArgument) || !strings.Contains(err.Error(), "returned 1 tensors") {
		t.Fatalf("got %v, expected a count error", err)
	}

	slow := func(ctx context.Context, index int64) ([]*Tensor, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
			return nil, io.EOF
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l3 := must(NewLoader(ctx, []string{"x"}, slow, &LoaderOptions{Timeout: 50 * time.Millisecond}))
	defer l3.Close()
	defer cancel() // first: Close waits for the producer call in progress
	if _, err := l3.Next(); !errors.Is(err, Timeout) {
		t.Fatalf("got %v, expected %v", err, Timeout)
	}

	if _, err := NewLoader(context.Background(), []string{"x", "x"}, counting(1), nil); !errors.Is(err, InvalidArgument) {
		t.Fatalf("duplicate names: got %v", err)
	}
}

func TestLoaderStopsWhenItsContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	blocking := func(ctx context.Context, index int64) ([]*Tensor, error) {
		close(started)
		<-ctx.Done()
		return nil, &Error{Status: Cancelled, Message: ctx.Err().Error()}
	}
	l := must(NewLoader(ctx, []string{"x"}, blocking, nil))
	defer l.Close()
	<-started
	cancel()
	begin := time.Now()
	if _, err := l.Next(); !errors.Is(err, Cancelled) {
		t.Fatalf("got %v, expected %v", err, Cancelled)
	}
	if time.Since(begin) > 5*time.Second {
		t.Fatal("Next waited for its timeout instead of returning on cancellation")
	}
}
