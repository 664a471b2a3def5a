// Package samba binds the Samba engine (libsamba.so) for Go: tensors with
// owned handles (finalizers plus explicit Release), eager ops, optimizers, and
// sessions that compile a Go model into a PEF, load it and run it. Failed
// calls return *Error with the status and the library's message.
package samba

/*
#cgo LDFLAGS: -lsamba
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Error is a failed call: the status code, its name and the library's message.
type Error struct {
	Status     int
	StatusName string
	Message    string
}

func (e *Error) Error() string { return e.StatusName + ": " + e.Message }

func check(st C.samba_status) error {
	if st == 0 {
		return nil
	}
	return &Error{Status: int(st), StatusName: C.GoString(C.samba_status_name(st)),
		Message: C.GoString(C.samba_last_error_message())}
}

// Version is the library's version string.
func Version() string { return C.GoString(C.samba_version()) }

// Tensor is a reference to a Samba tensor. Release drops it at once; a
// finalizer drops it otherwise.
type Tensor struct{ h *C.samba_tensor }

func own(h *C.samba_tensor) *Tensor {
	t := &Tensor{h}
	runtime.SetFinalizer(t, (*Tensor).Release)
	return t
}

func borrow(h *C.samba_tensor) *Tensor {
	C.samba_tensor_retain(h)
	return own(h)
}

// Release drops this reference; the tensor is unusable afterwards.
func (t *Tensor) Release() {
	if t.h != nil {
		C.samba_tensor_release(t.h)
		t.h = nil
	}
}

func create(dtype C.samba_dtype, shape []int64) (*Tensor, error) {
	var h *C.samba_tensor
	var p *C.int64_t
	if len(shape) > 0 {
		p = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	if err := check(C.samba_tensor_create(dtype, p, C.size_t(len(shape)), &h)); err != nil {
		return nil, err
	}
	return own(h), nil
}

// FromFloat32 is a float32 tensor of shape holding a copy of values.
func FromFloat32(values []float32, shape []int64) (*Tensor, error) {
	t, err := create(C.SAMBA_FLOAT32, shape)
	if err != nil {
		return nil, err
	}
	if len(values) > 0 {
		err = check(C.samba_tensor_copy_from(t.h, unsafe.Pointer(&values[0]), C.size_t(4*len(values))))
	}
	return t, err
}

// FromInt64 is an int64 tensor of shape holding a copy of values.
func FromInt64(values []int64, shape []int64) (*Tensor, error) {
	t, err := create(C.SAMBA_INT64, shape)
	if err != nil {
		return nil, err
	}
	if len(values) > 0 {
		err = check(C.samba_tensor_copy_from(t.h, unsafe.Pointer(&values[0]), C.size_t(8*len(values))))
	}
	return t, err
}

// Float32s is a copy of the values as float32.
func (t *Tensor) Float32s() ([]float32, error) {
	var c *C.samba_tensor
	if err := check(C.samba_tensor_to(t.h, C.SAMBA_FLOAT32, &c)); err != nil {
		return nil, err
	}
	defer C.samba_tensor_release(c)
	var n C.int64_t
	if err := check(C.samba_tensor_numel(c, &n)); err != nil {
		return nil, err
	}
	out := make([]float32, int(n))
	if n > 0 {
		if err := check(C.samba_tensor_copy_to(c, unsafe.Pointer(&out[0]), C.size_t(4*int(n)))); err != nil {
			return nil, err
		}
	}
	runtime.KeepAlive(t)
	return out, nil
}

// Item is the value of a one-element tensor.
func (t *Tensor) Item() (float64, error) {
	var v C.double
	err := check(C.samba_tensor_item(t.h, &v))
	runtime.KeepAlive(t)
	return float64(v), err
}

// SetName sets the tensor's sn_name.
func (t *Tensor) SetName(name string) error {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	return check(C.samba_tensor_set_name(t.h, c))
}

// SetRequiresGrad turns autograd recording on or off for this tensor.
func (t *Tensor) SetRequiresGrad(on bool) error {
	v := C.int32_t(0)
	if on {
		v = 1
	}
	return check(C.samba_tensor_set_requires_grad(t.h, v))
}

// Backward fills the gradients of the leaves this tensor depends on.
func (t *Tensor) Backward() error { return check(C.samba_tensor_backward(t.h, nil, 0)) }

// Grad is the accumulated gradient, or nil.
func (t *Tensor) Grad() (*Tensor, error) {
	var g *C.samba_tensor
	if err := check(C.samba_tensor_grad(t.h, &g)); err != nil || g == nil {
		return nil, err
	}
	return borrow(g), nil // the C call lends it
}

func handles(ts []*Tensor) (**C.samba_tensor, func()) {
	if len(ts) == 0 {
		return nil, func() {}
	}
	arr := (**C.samba_tensor)(C.malloc(C.size_t(len(ts)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(arr, len(ts))
	for i, t := range ts {
		s[i] = t.h
	}
	return arr, func() { C.free(unsafe.Pointer(arr)); runtime.KeepAlive(ts) }
}

func collect(arr **C.samba_tensor, n C.size_t) []*Tensor {
	s := unsafe.Slice(arr, int(n))
	out := make([]*Tensor, int(n))
	for i := range out {
		out[i] = own(s[i])
	}
	return out
}

const maxOutputs = 64

// Attrs are an op's attributes: float64, int64 or []int64 values.
type Attrs map[string]any

func makeAttrs(attrs Attrs) (*C.samba_attrs, error) {
	var a *C.samba_attrs
	if err := check(C.samba_attrs_create(&a)); err != nil {
		return nil, err
	}
	for k, v := range attrs {
		ck := C.CString(k)
		var err error
		switch x := v.(type) {
		case float64:
			err = check(C.samba_attrs_set_float(a, ck, C.double(x)))
		case int64:
			err = check(C.samba_attrs_set_int(a, ck, C.int64_t(x)))
		case int:
			err = check(C.samba_attrs_set_int(a, ck, C.int64_t(x)))
		case []int64:
			var p *C.int64_t
			if len(x) > 0 {
				p = (*C.int64_t)(unsafe.Pointer(&x[0]))
			}
			err = check(C.samba_attrs_set_ints(a, ck, p, C.size_t(len(x))))
		default:
			err = &Error{Status: 1, StatusName: "SAMBA_ERR_INVALID_ARGUMENT",
				Message: "attribute " + k + ": only float64, int64 and []int64 values are supported"}
		}
		C.free(unsafe.Pointer(ck))
		if err != nil {
			C.samba_attrs_release(a)
			return nil, err
		}
	}
	return a, nil
}

// Op runs registry op name on inputs (eagerly, or recorded while compiling).
func Op(name string, inputs []*Tensor, attrs Attrs) ([]*Tensor, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var a *C.samba_attrs
	if len(attrs) > 0 {
		var err error
		if a, err = makeAttrs(attrs); err != nil {
			return nil, err
		}
		defer C.samba_attrs_release(a)
	}
	in, done := handles(inputs)
	defer done()
	outs := (**C.samba_tensor)(C.malloc(maxOutputs * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(outs))
	var n C.size_t
	if err := check(C.samba_op_call(nil, cname, in, C.size_t(len(inputs)), a, outs, maxOutputs, &n)); err != nil {
		return nil, err
	}
	return collect(outs, n), nil
}

// Op1 is Op for single-output ops.
func Op1(name string, inputs ...*Tensor) (*Tensor, error) {
	outs, err := Op(name, inputs, nil)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// Optimizer is SGD or AdamW over parameter groups.
type Optimizer struct{ h *C.samba_optimizer }

// NewOptimizer creates "sgd" or "adamw" with float hyperparameters.
func NewOptimizer(kind string, hyper map[string]float64) (*Optimizer, error) {
	attrs := Attrs{}
	for k, v := range hyper {
		attrs[k] = v
	}
	a, err := makeAttrs(attrs)
	if err != nil {
		return nil, err
	}
	defer C.samba_attrs_release(a)
	ck := C.CString(kind)
	defer C.free(unsafe.Pointer(ck))
	var h *C.samba_optimizer
	if err := check(C.samba_optimizer_create(ck, a, &h)); err != nil {
		return nil, err
	}
	o := &Optimizer{h}
	runtime.SetFinalizer(o, (*Optimizer).Release)
	return o, nil
}

// AddParamGroup adds parameters with the optimizer's defaults.
func (o *Optimizer) AddParamGroup(params []*Tensor) error {
	p, done := handles(params)
	defer done()
	return check(C.samba_optimizer_add_param_group(o.h, p, C.size_t(len(params)), nil))
}

// Release frees the optimizer.
func (o *Optimizer) Release() {
	if o.h != nil {
		C.samba_optimizer_release(o.h)
		o.h = nil
	}
}

// Session compiles models into PEFs, loads and runs them.
type Session struct{ h *C.samba_session }

// NewSession is a session with threads threads (0: one per hardware thread).
func NewSession(threads int) (*Session, error) {
	var o *C.samba_session_options
	if err := check(C.samba_session_options_create(&o)); err != nil {
		return nil, err
	}
	defer C.samba_session_options_release(o)
	if err := check(C.samba_session_options_set_num_threads(o, C.int32_t(threads))); err != nil {
		return nil, err
	}
	var h *C.samba_session
	if err := check(C.samba_session_create(o, &h)); err != nil {
		return nil, err
	}
	s := &Session{h}
	runtime.SetFinalizer(s, (*Session).Release)
	return s, nil
}

// Release frees the session.
func (s *Session) Release() {
	if s.h != nil {
		C.samba_session_release(s.h)
		s.h = nil
	}
}

func optimizerHandles(opts []*Optimizer) (**C.samba_optimizer, func()) {
	if len(opts) == 0 {
		return nil, func() {}
	}
	arr := (**C.samba_optimizer)(C.malloc(C.size_t(len(opts)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	sl := unsafe.Slice(arr, len(opts))
	for i, o := range opts {
		sl[i] = o.h
	}
	return arr, func() { C.free(unsafe.Pointer(arr)); runtime.KeepAlive(opts) }
}

// Compile traces model on inputs with optimizers and writes the PEF to pefPath.
func (s *Session) Compile(model Model, inputs []*Tensor, opts []*Optimizer, pefPath string, lossIndices []int64) error {
	var co *C.samba_compile_options
	if err := check(C.samba_compile_options_create(&co)); err != nil {
		return err
	}
	defer C.samba_compile_options_release(co)
	cp := C.CString(pefPath)
	defer C.free(unsafe.Pointer(cp))
	if err := check(C.samba_compile_options_set_pef_path(co, cp)); err != nil {
		return err
	}
	if len(lossIndices) > 0 {
		if err := check(C.samba_compile_options_set_loss_indices(co, (*C.int64_t)(unsafe.Pointer(&lossIndices[0])),
			C.size_t(len(lossIndices)))); err != nil {
			return err
		}
	}
	in, done := handles(inputs)
	defer done()
	op, doneOpts := optimizerHandles(opts)
	defer doneOpts()
	arg := newModelArg(model)
	defer arg.free()
	return check(C.samba_session_compile(s.h, modelFn(), arg.ptr, in, C.size_t(len(inputs)), op, C.size_t(len(opts)), co))
}

// TraceGraph loads the PEF after checking model against it; it returns the model's outputs.
func (s *Session) TraceGraph(model Model, inputs []*Tensor, opts []*Optimizer, pefPath string) ([]*Tensor, error) {
	cp := C.CString(pefPath)
	defer C.free(unsafe.Pointer(cp))
	in, done := handles(inputs)
	defer done()
	op, doneOpts := optimizerHandles(opts)
	defer doneOpts()
	arg := newModelArg(model)
	defer arg.free()
	outs := (**C.samba_tensor)(C.malloc(maxOutputs * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(outs))
	var n C.size_t
	if err := check(C.samba_session_trace_graph(s.h, modelFn(), arg.ptr, in, C.size_t(len(inputs)), op,
		C.size_t(len(opts)), cp, nil, outs, maxOutputs, &n)); err != nil {
		return nil, err
	}
	return collect(outs, n), nil
}

// Run runs the whole schedule with inputs, after setting hyperparameters
// (argins such as "lr"; they persist), and returns the values of outputs.
func (s *Session) Run(inputs []*Tensor, outputs []*Tensor, hyper map[string]float64) ([]*Tensor, error) {
	var ro *C.samba_run_options
	if err := check(C.samba_run_options_create(&ro)); err != nil {
		return nil, err
	}
	defer C.samba_run_options_release(ro)
	for k, v := range hyper {
		ck := C.CString(k)
		err := check(C.samba_run_options_set_hyperparam(ro, ck, C.double(v)))
		C.free(unsafe.Pointer(ck))
		if err != nil {
			return nil, err
		}
	}
	in, done := handles(inputs)
	defer done()
	want, doneWant := handles(outputs)
	defer doneWant()
	outs := (**C.samba_tensor)(C.malloc(maxOutputs * C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(outs))
	var n C.size_t
	if err := check(C.samba_session_run(s.h, in, C.size_t(len(inputs)), want, C.size_t(len(outputs)), ro, outs,
		maxOutputs, &n)); err != nil {
		return nil, err
	}
	return collect(outs, n), nil
}

// SnData is the device value of t.
func (s *Session) SnData(t *Tensor) (*Tensor, error) {
	var v *C.samba_tensor
	if err := check(C.samba_tensor_sn_data(s.h, t.h, &v)); err != nil {
		return nil, err
	}
	return own(v), nil
}

