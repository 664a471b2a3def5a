package samba

/*
#include <stdlib.h>
#include "samba.h"

samba_status sambaGoProduce(void* user_data, int64_t index, samba_tensor** tensors, size_t n, int32_t* end);
void sambaGoDestroy(void* user_data);

static samba_status samba_go_loader_create(const char* const* names, size_t n_names, void* user_data,
                                           const samba_loader_options* opts, samba_loader** out) {
  return samba_loader_create(names, n_names, sambaGoProduce, user_data, sambaGoDestroy, opts, out);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"
	"unsafe"
)

// ProduceFunc makes batch index: one tensor per loader name, in order. It
// returns io.EOF at the end of the data. It runs on the loader's own thread
// and gets the loader's context: once that is cancelled the loader stops
// asking for batches.
type ProduceFunc func(ctx context.Context, index int64) ([]*Tensor, error)

// LoaderOptions are the loader's settings. The zero value is the library's
// defaults: 2 batches ahead, a 60 s timeout, batches until io.EOF.
type LoaderOptions struct {
	MaxPrefetch int           // batches prepared ahead (1..1024; 0: 2)
	Timeout     time.Duration // how long Next waits for a batch (0: 60 s)
	NumBatches  int64         // stop after this many batches (0: at io.EOF)
}

// Loader prepares batches ahead on a background thread, copying each into
// pinned memory while the consumer runs (SambaLoader). Use it from one
// goroutine.
type Loader struct {
	h     *C.samba_loader
	names int
}

type producer struct {
	ctx     context.Context
	produce ProduceFunc
	names   int
}

// NewLoader starts a loader producing tensors named names with produce.
// ctx bounds the loader's life: once it is cancelled the producer is not
// called again, and Next returns an error with status Cancelled after the
// batches already prepared. opts may be nil.
func NewLoader(ctx context.Context, names []string, produce ProduceFunc, opts *LoaderOptions) (*Loader, error) {
	defer pin()()
	if opts == nil {
		opts = &LoaderOptions{}
	}
	var o *C.samba_loader_options
	if err := check(C.samba_loader_options_create(&o)); err != nil {
		return nil, err
	}
	defer C.samba_loader_options_release(o)
	if opts.MaxPrefetch != 0 {
		if err := check(C.samba_loader_options_set_max_prefetch(o, C.int32_t(opts.MaxPrefetch))); err != nil {
			return nil, err
		}
	}
	if opts.Timeout != 0 {
		if err := check(C.samba_loader_options_set_timeout_ms(o, C.int64_t(opts.Timeout.Milliseconds()))); err != nil {
			return nil, err
		}
	}
	if opts.NumBatches != 0 {
		if err := check(C.samba_loader_options_set_num_batches(o, C.int64_t(opts.NumBatches))); err != nil {
			return nil, err
		}
	}
	cn, free := cstrings(names)
	defer free()
	arg := newCallbackArg(&producer{ctx: ctx, produce: produce, names: len(names)})
	var h *C.samba_loader
	// The library calls destroy (freeing arg) once it owns user_data; a
	// failed create never took it.
	if err := check(C.samba_go_loader_create(firstOrNil(cn), C.size_t(len(cn)), arg, o, &h)); err != nil {
		freeCallbackArg(arg)
		return nil, err
	}
	l := &Loader{h: h, names: len(names)}
	runtime.SetFinalizer(l, (*Loader).Close)
	return l, nil
}

// Next is the next batch (one tensor per name, named, in pinned memory), or
// io.EOF at the end of the data. A producer's error comes back here, and
// the loader stops: later calls return it again.
func (l *Loader) Next() ([]*Tensor, error) {
	defer pin()()
	batch := make([]*C.samba_tensor, l.names)
	var end C.int32_t
	err := check(C.samba_loader_next(l.h, &batch[0], C.size_t(len(batch)), &end))
	runtime.KeepAlive(l)
	if err != nil {
		return nil, err
	}
	if end != 0 {
		return nil, io.EOF
	}
	return ownAll(batch), nil
}

// Reset starts again from batch 0 (a new epoch), dropping prepared batches.
func (l *Loader) Reset() error {
	defer pin()()
	err := check(C.samba_loader_reset(l.h))
	runtime.KeepAlive(l)
	return err
}

// Close stops the loader's thread, waiting for a producer call in progress,
// and frees the prepared batches.
func (l *Loader) Close() error {
	if l.h != nil {
		C.samba_loader_release(l.h)
		l.h = nil
		runtime.SetFinalizer(l, nil)
	}
	return nil
}

//export sambaGoProduce
func sambaGoProduce(user unsafe.Pointer, index C.int64_t, tensors **C.samba_tensor, n C.size_t,
	end *C.int32_t) (status C.samba_status) {
	defer recovered(&status, "loader's producer")
	p := callbackValue(user).(*producer)
	if err := p.ctx.Err(); err != nil {
		return fail(&Error{Status: Cancelled, Message: "the loader's context is done: " + err.Error()})
	}
	batch, err := p.produce(p.ctx, int64(index))
	if errors.Is(err, io.EOF) {
		*end = 1
		return C.SAMBA_OK
	}
	if err == nil && len(batch) != int(n) {
		err = invalid(fmt.Sprintf("the producer returned %d tensors for batch %d; the loader has %d names",
			len(batch), index, n))
	}
	if err != nil {
		return fail(err)
	}
	dst := unsafe.Slice(tensors, int(n))
	for i, t := range batch {
		C.samba_tensor_retain(t.h) // the loader takes this reference
		dst[i] = t.h
	}
	return C.SAMBA_OK
}
