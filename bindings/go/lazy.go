package samba

/*
#include <stdlib.h>
#include "samba.h"

samba_status sambaGoMaterialize(void* user_data, samba_tensor* out, samba_rng_stream* rng);
void sambaGoDestroy(void* user_data);

static samba_status samba_go_materialize_trampoline(void* user_data, samba_tensor* out,
                                                    const samba_rng_stream* rng) {
  return sambaGoMaterialize(user_data, out, (samba_rng_stream*)rng);
}
static samba_status samba_go_materializer_create(void* user_data, samba_materializer** out) {
  return samba_materializer_create_custom(samba_go_materialize_trampoline, user_data, sambaGoDestroy, out);
}
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// BF16Rounding says how random float32 values are rounded to bfloat16.
type BF16Rounding int32

// The roundings of SAMBA_BF16_*.
const (
	BF16NearestEven BF16Rounding = C.SAMBA_BF16_NEAREST_EVEN
	BF16Truncation  BF16Rounding = C.SAMBA_BF16_TRUNCATION
)

// LazyParamOptions are enable_lazy_param's arguments. The zero value is the
// library's defaults: the session's seed, 8 init threads, Box-Muller
// normals, nearest-even bfloat16 rounding.
type LazyParamOptions struct {
	Seed                     *uint64 // values depend only on (seed, tensor name, element index)
	InitThreads              int     // threads materializing one tensor (0: 8)
	InverseTransformSampling bool    // normals by inverse transform instead of Box-Muller
	BF16Rounding             BF16Rounding
}

// EnableLazyParams makes CreateParameter return placeholders without data:
// compiling never materializes them, loading (TraceGraph, ToRDU)
// materializes them straight into device memory, and reading their values
// on the host materializes them there. opts may be nil.
func (s *Session) EnableLazyParams(opts *LazyParamOptions) error {
	defer pin()()
	if opts == nil {
		opts = &LazyParamOptions{}
	}
	var o *C.samba_lazy_param_options
	if err := check(C.samba_lazy_param_options_create(&o)); err != nil {
		return err
	}
	defer C.samba_lazy_param_options_release(o)
	if opts.Seed != nil {
		if err := check(C.samba_lazy_param_options_set_seed(o, C.uint64_t(*opts.Seed))); err != nil {
			return err
		}
	}
	if opts.InitThreads != 0 {
		if err := check(C.samba_lazy_param_options_set_init_threads(o, C.int32_t(opts.InitThreads))); err != nil {
			return err
		}
	}
	if err := check(C.samba_lazy_param_options_set_inverse_transform_sampling(o,
		cbool(opts.InverseTransformSampling))); err != nil {
		return err
	}
	if err := check(C.samba_lazy_param_options_set_bf16_rounding(o, C.samba_bf16_rounding(opts.BF16Rounding))); err != nil {
		return err
	}
	err := check(C.samba_session_enable_lazy_param(s.h, o))
	runtime.KeepAlive(s)
	return err
}

// DisableLazyParams makes parameters created from now on materialized at
// once; placeholders already made stay lazy.
func (s *Session) DisableLazyParams() error {
	defer pin()()
	err := check(C.samba_session_disable_lazy_param(s.h))
	runtime.KeepAlive(s)
	return err
}

// LazyParams reports whether the session is in lazy parameter mode.
func (s *Session) LazyParams() (bool, error) {
	defer pin()()
	var v C.int32_t
	err := check(C.samba_session_use_lazy_param(s.h, &v))
	runtime.KeepAlive(s)
	return v != 0, err
}

// ResetRandomGenerator makes the session's random draws start again from
// the first stream of its seed.
func (s *Session) ResetRandomGenerator() error {
	defer pin()()
	err := check(C.samba_session_reset_random_generator(s.h))
	runtime.KeepAlive(s)
	return err
}

// Materializer fills a parameter with its initial values.
type Materializer struct{ h *C.samba_materializer }

func ownMaterializer(h *C.samba_materializer) *Materializer {
	m := &Materializer{h}
	runtime.SetFinalizer(m, (*Materializer).Close)
	return m
}

// NewMaterializer is a built-in materializer with torch.nn.init's formulas
// and parameter names: "uniform" (a, b), "normal" (mean, std), "zeros",
// "ones", "constant" (val), "xavier_uniform", "kaiming_uniform" (a, mode,
// nonlinearity), "trunc_normal", "linear_weight", "linear_bias", ... (see
// samba_materializer_create). params may be nil. Built-ins are stored in
// PEF files.
func NewMaterializer(kind string, params Attrs) (*Materializer, error) {
	defer pin()()
	a, err := makeAttrs(params)
	if err != nil {
		return nil, err
	}
	defer C.samba_attrs_release(a)
	ck := C.CString(kind)
	defer C.free(unsafe.Pointer(ck))
	var h *C.samba_materializer
	if err := check(C.samba_materializer_create(ck, a, &h)); err != nil {
		return nil, err
	}
	return ownMaterializer(h), nil
}

// MaterializeFunc fills out (contiguous, the parameter's shape and dtype)
// drawing from rng, which is valid only during the call. An error leaves
// the parameter unmaterialized and is returned by the call that
// materialized it.
type MaterializeFunc func(out *Tensor, rng *RNGStream) error

// NewCustomMaterializer wraps fn. Custom materializers are not stored in
// PEF files; fn is called on the goroutine or library thread that
// materializes, possibly several at once.
func NewCustomMaterializer(fn MaterializeFunc) (*Materializer, error) {
	defer pin()()
	arg := newCallbackArg(fn)
	var h *C.samba_materializer
	// On failure the library has not taken user_data, so it is freed here.
	if err := check(C.samba_go_materializer_create(arg, &h)); err != nil {
		freeCallbackArg(arg)
		return nil, err
	}
	return ownMaterializer(h), nil
}

// Kind is the materializer's kind ("kaiming_uniform", ..., "custom").
func (m *Materializer) Kind() (string, error) {
	defer pin()()
	var p *C.char
	if err := check(C.samba_materializer_kind(m.h, &p)); err != nil {
		return "", err
	}
	kind := C.GoString(p)
	runtime.KeepAlive(m)
	return kind, nil
}

// Close drops this reference; tensors using the materializer keep theirs.
func (m *Materializer) Close() error {
	if m.h != nil {
		C.samba_materializer_release(m.h)
		m.h = nil
		runtime.SetFinalizer(m, nil)
	}
	return nil
}

// RNGStream is the random stream a materializer draws from, keyed by (seed,
// tensor name); every fill starts at element 0.
type RNGStream struct{ h *C.samba_rng_stream }

// Uniform fills out with uniform values in [low, high).
func (r *RNGStream) Uniform(out *Tensor, low, high float64) error {
	defer pin()()
	err := check(C.samba_rng_stream_uniform(r.h, out.h, C.double(low), C.double(high)))
	runtime.KeepAlive(out)
	return err
}

// Normal fills out with normal values of mean and std.
func (r *RNGStream) Normal(out *Tensor, mean, std float64) error {
	defer pin()()
	err := check(C.samba_rng_stream_normal(r.h, out.h, C.double(mean), C.double(std)))
	runtime.KeepAlive(out)
	return err
}

// Integers fills out with integers in [low, high).
func (r *RNGStream) Integers(out *Tensor, low, high int64) error {
	defer pin()()
	err := check(C.samba_rng_stream_integers(r.h, out.h, C.int64_t(low), C.int64_t(high)))
	runtime.KeepAlive(out)
	return err
}

// CreateParameter is a parameter named name (requiring grad for floating
// dtypes) whose values come from m: a placeholder without data in lazy
// mode, materialized now otherwise, with the same values either way.
func (s *Session) CreateParameter(name string, dtype DType, shape []int64, m *Materializer) (*Tensor, error) {
	defer pin()()
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var h *C.samba_tensor
	err := check(C.samba_session_create_parameter(s.h, cn, C.samba_dtype(dtype), int64s(shape), C.size_t(len(shape)),
		m.h, &h))
	runtime.KeepAlive(m)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return own(h), nil
}

// SetMaterializer sets the tensor's materializer (nil removes it).
func (t *Tensor) SetMaterializer(m *Materializer) error {
	defer pin()()
	var h *C.samba_materializer
	if m != nil {
		h = m.h
	}
	err := check(C.samba_tensor_set_materializer(t.h, h))
	runtime.KeepAlive(m)
	runtime.KeepAlive(t)
	return err
}

// Materializer is the tensor's materializer, or nil when it has none.
func (t *Tensor) Materializer() (*Materializer, error) {
	defer pin()()
	var h *C.samba_materializer
	if err := check(C.samba_tensor_materializer(t.h, &h)); err != nil || h == nil {
		return nil, err
	}
	runtime.KeepAlive(t)
	return ownMaterializer(h), nil
}
