package samba

/*
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Tensor is one reference to a Samba tensor (host data, a lazy placeholder,
// or a symbolic tensor while a model is traced). Close drops it.
type Tensor struct{ h *C.samba_tensor }

// own wraps an OWNED reference.
func own(h *C.samba_tensor) *Tensor {
	t := &Tensor{h}
	runtime.SetFinalizer(t, (*Tensor).Close)
	return t
}

// borrow wraps a BORROWED reference, taking a reference of its own.
func borrow(h *C.samba_tensor) *Tensor {
	C.samba_tensor_retain(h)
	return own(h)
}

// Close drops this reference; the Tensor is unusable afterwards. The tensor
// itself lives on while other references (a session, an optimizer, another
// Tensor) hold it.
func (t *Tensor) Close() error {
	if t.h != nil {
		C.samba_tensor_release(t.h)
		t.h = nil
		runtime.SetFinalizer(t, nil)
	}
	return nil
}

// NewTensor is a zero-filled tensor of dtype and shape.
func NewTensor(dtype DType, shape []int64) (*Tensor, error) {
	defer pin()()
	var h *C.samba_tensor
	if err := check(C.samba_tensor_create(C.samba_dtype(dtype), int64s(shape), C.size_t(len(shape)), &h)); err != nil {
		return nil, err
	}
	return own(h), nil
}

func fromSlice[T any](dtype DType, values []T, shape []int64) (*Tensor, error) {
	t, err := NewTensor(dtype, shape)
	if err != nil {
		return nil, err
	}
	if err := t.copyFrom(unsafe.Pointer(firstOrNil(values)), len(values)*dtype.Size()); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// FromFloat32 is a float32 tensor of shape holding a copy of values.
func FromFloat32(values []float32, shape []int64) (*Tensor, error) {
	return fromSlice(Float32, values, shape)
}

// FromInt64 is an int64 tensor of shape holding a copy of values.
func FromInt64(values []int64, shape []int64) (*Tensor, error) {
	return fromSlice(Int64, values, shape)
}

func (t *Tensor) copyFrom(src unsafe.Pointer, nbytes int) error {
	defer pin()()
	if nbytes == 0 {
		return nil
	}
	err := check(C.samba_tensor_copy_from(t.h, src, C.size_t(nbytes)))
	runtime.KeepAlive(t)
	return err
}

// SetFloat32s overwrites the values of a float32 tensor (len(values) must be
// its element count), as a materializer fills its tensor.
func (t *Tensor) SetFloat32s(values []float32) error {
	return t.copyFrom(unsafe.Pointer(firstOrNil(values)), 4*len(values))
}

// toSlice copies the values converted to dtype.
func toSlice[T any](t *Tensor, dtype DType) ([]T, error) {
	defer pin()()
	var c *C.samba_tensor
	if err := check(C.samba_tensor_to(t.h, C.samba_dtype(dtype), &c)); err != nil {
		return nil, err
	}
	defer C.samba_tensor_release(c)
	var n C.int64_t
	if err := check(C.samba_tensor_numel(c, &n)); err != nil {
		return nil, err
	}
	out := make([]T, int(n))
	if n > 0 {
		if err := check(C.samba_tensor_copy_to(c, unsafe.Pointer(&out[0]), C.size_t(int(n)*dtype.Size()))); err != nil {
			return nil, err
		}
	}
	runtime.KeepAlive(t)
	return out, nil
}

// Float32s is a copy of the values as float32 (materializing a lazy
// parameter on the host).
func (t *Tensor) Float32s() ([]float32, error) { return toSlice[float32](t, Float32) }

// Int64s is a copy of the values as int64.
func (t *Tensor) Int64s() ([]int64, error) { return toSlice[int64](t, Int64) }

// Item is the value of a one-element tensor.
func (t *Tensor) Item() (float64, error) {
	defer pin()()
	var v C.double
	err := check(C.samba_tensor_item(t.h, &v))
	runtime.KeepAlive(t)
	return float64(v), err
}

// Shape is the tensor's shape.
func (t *Tensor) Shape() ([]int64, error) {
	defer pin()()
	var dims *C.int64_t
	var n C.size_t
	if err := check(C.samba_tensor_shape(t.h, &dims, &n)); err != nil {
		return nil, err
	}
	shape := make([]int64, int(n))
	copy(shape, unsafe.Slice((*int64)(unsafe.Pointer(dims)), int(n)))
	runtime.KeepAlive(t)
	return shape, nil
}

// DType is the tensor's element type.
func (t *Tensor) DType() (DType, error) {
	defer pin()()
	var d C.samba_dtype
	err := check(C.samba_tensor_dtype(t.h, &d))
	runtime.KeepAlive(t)
	return DType(d), err
}

// Name is the tensor's sn_name ("" when it has none).
func (t *Tensor) Name() (string, error) {
	defer pin()()
	var p *C.char
	if err := check(C.samba_tensor_name(t.h, &p)); err != nil {
		return "", err
	}
	name := C.GoString(p)
	runtime.KeepAlive(t)
	return name, nil
}

// SetName sets the tensor's sn_name, by which sessions match it to the
// PEF's tensors.
func (t *Tensor) SetName(name string) error {
	defer pin()()
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	err := check(C.samba_tensor_set_name(t.h, c))
	runtime.KeepAlive(t)
	return err
}

// SetRequiresGrad turns autograd recording on or off for this tensor.
func (t *Tensor) SetRequiresGrad(on bool) error {
	defer pin()()
	err := check(C.samba_tensor_set_requires_grad(t.h, cbool(on)))
	runtime.KeepAlive(t)
	return err
}

// Backward fills the gradients of the leaves this tensor depends on.
func (t *Tensor) Backward() error {
	defer pin()()
	err := check(C.samba_tensor_backward(t.h, nil, 0))
	runtime.KeepAlive(t)
	return err
}

// Grad is the accumulated gradient, or nil when there is none.
func (t *Tensor) Grad() (*Tensor, error) {
	defer pin()()
	var g *C.samba_tensor
	if err := check(C.samba_tensor_grad(t.h, &g)); err != nil || g == nil {
		return nil, err
	}
	runtime.KeepAlive(t)
	return borrow(g), nil
}

// HasData reports whether the tensor holds values (false for a lazy
// placeholder that was never materialized, and for a symbolic tensor).
func (t *Tensor) HasData() (bool, error) {
	defer pin()()
	var v C.int32_t
	err := check(C.samba_tensor_has_data(t.h, &v))
	runtime.KeepAlive(t)
	return v != 0, err
}

// Materialize gives a lazy placeholder its values from its materializer;
// a tensor with data is left as it is.
func (t *Tensor) Materialize() error {
	defer pin()()
	err := check(C.samba_tensor_materialize_(t.h))
	runtime.KeepAlive(t)
	return err
}

// tensorHandles is the C array of ts's handles; the caller keeps ts alive
// (runtime.KeepAlive) until the C call that reads it returns.
func tensorHandles(ts []*Tensor) []*C.samba_tensor {
	hs := make([]*C.samba_tensor, len(ts))
	for i, t := range ts {
		hs[i] = t.h
	}
	return hs
}

func ownAll(hs []*C.samba_tensor) []*Tensor {
	out := make([]*Tensor, len(hs))
	for i, h := range hs {
		out[i] = own(h)
	}
	return out
}

// withOutputs calls f with an output array of a first guess of capacity;
// when f reports OUT_OF_RANGE with the count it needs, it calls f again with
// that capacity. f must write nothing on that failure (the C functions
// that take a capacity promise it).
func withOutputs(guess int, f func(out **C.samba_tensor, capacity C.size_t, n *C.size_t) C.samba_status) ([]*Tensor, error) {
	if guess < 8 {
		guess = 8
	}
	for attempt := 0; ; attempt++ {
		outs := make([]*C.samba_tensor, guess)
		var n C.size_t
		st := f(&outs[0], C.size_t(len(outs)), &n)
		if st == C.SAMBA_ERR_OUT_OF_RANGE && int(n) > len(outs) && attempt == 0 {
			guess = int(n)
			continue
		}
		if err := check(st); err != nil {
			return nil, err
		}
		return ownAll(outs[:int(n)]), nil
	}
}
