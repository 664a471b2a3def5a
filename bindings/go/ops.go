package samba

/*
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sort"
	"unsafe"
)

// Attrs are an op's, an optimizer's or a materializer's named arguments.
// Values are float64, int or int64, bool, string, []int64, []float64 or DType.
type Attrs map[string]any

// makeAttrs builds C attributes (nil for none); the caller releases them.
func makeAttrs(attrs Attrs) (*C.samba_attrs, error) {
	if len(attrs) == 0 {
		return nil, nil
	}
	var a *C.samba_attrs
	if err := check(C.samba_attrs_create(&a)); err != nil {
		return nil, err
	}
	// Sorted, so that the first bad attribute reported is always the same one.
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := setAttr(a, k, attrs[k]); err != nil {
			C.samba_attrs_release(a)
			return nil, err
		}
	}
	return a, nil
}

func setAttr(a *C.samba_attrs, key string, value any) error {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	switch x := value.(type) {
	case float64:
		return check(C.samba_attrs_set_float(a, ck, C.double(x)))
	case int:
		return check(C.samba_attrs_set_int(a, ck, C.int64_t(x)))
	case int64:
		return check(C.samba_attrs_set_int(a, ck, C.int64_t(x)))
	case bool:
		return check(C.samba_attrs_set_bool(a, ck, cbool(x)))
	case string:
		cv := C.CString(x)
		defer C.free(unsafe.Pointer(cv))
		return check(C.samba_attrs_set_string(a, ck, cv))
	case []int64:
		return check(C.samba_attrs_set_ints(a, ck, int64s(x), C.size_t(len(x))))
	case []float64:
		return check(C.samba_attrs_set_floats(a, ck, (*C.double)(unsafe.Pointer(firstOrNil(x))), C.size_t(len(x))))
	case DType:
		return check(C.samba_attrs_set_dtype(a, ck, C.samba_dtype(x)))
	}
	return invalid(fmt.Sprintf("attribute %q: a %T value; expected float64, int, int64, bool, string, []int64, "+
		"[]float64 or DType", key, value))
}

// Op runs the registry op name on inputs: eagerly on host tensors, or
// recorded when called from a model while it is traced.
func Op(name string, inputs []*Tensor, attrs Attrs) ([]*Tensor, error) {
	defer pin()()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	a, err := makeAttrs(attrs)
	if err != nil {
		return nil, err
	}
	defer C.samba_attrs_release(a)
	in := tensorHandles(inputs)
	outs, err := withOutputs(4, func(out **C.samba_tensor, capacity C.size_t, n *C.size_t) C.samba_status {
		return C.samba_op_call(nil, cname, firstOrNil(in), C.size_t(len(in)), a, out, capacity, n)
	})
	runtime.KeepAlive(inputs)
	return outs, err
}

// Op1 is Op for single-output ops without attributes.
func Op1(name string, inputs ...*Tensor) (*Tensor, error) {
	outs, err := Op(name, inputs, nil)
	if err != nil {
		return nil, err
	}
	if len(outs) != 1 {
		return nil, invalid(fmt.Sprintf("op %q returned %d outputs; Op1 expects one (use Op)", name, len(outs)))
	}
	return outs[0], nil
}

// Optimizer is an SGD or AdamW optimizer over parameter groups; compiling
// with it adds its update to the PEF's OPT section.
type Optimizer struct{ h *C.samba_optimizer }

// NewOptimizer creates "sgd" or "adamw" with hyperparameters such as "lr",
// "momentum", "weight_decay" or "max_grad_norm" (nil: the defaults).
func NewOptimizer(kind string, hyper Attrs) (*Optimizer, error) {
	defer pin()()
	a, err := makeAttrs(hyper)
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
	runtime.SetFinalizer(o, (*Optimizer).Close)
	return o, nil
}

// AddParamGroup adds parameters (tensors that require grad) with
// hyperparameter overrides (nil: the optimizer's).
func (o *Optimizer) AddParamGroup(params []*Tensor, hyper Attrs) error {
	defer pin()()
	a, err := makeAttrs(hyper)
	if err != nil {
		return err
	}
	defer C.samba_attrs_release(a)
	p := tensorHandles(params)
	err = check(C.samba_optimizer_add_param_group(o.h, firstOrNil(p), C.size_t(len(p)), a))
	runtime.KeepAlive(params)
	runtime.KeepAlive(o)
	return err
}

// SetArginPrefix sets the prefix of this optimizer's argin names ("enc."
// gives "enc.lr").
func (o *Optimizer) SetArginPrefix(prefix string) error {
	defer pin()()
	c := C.CString(prefix)
	defer C.free(unsafe.Pointer(c))
	err := check(C.samba_optimizer_set_argin_prefix(o.h, c))
	runtime.KeepAlive(o)
	return err
}

// Close frees the optimizer and its references to the parameters.
func (o *Optimizer) Close() error {
	if o.h != nil {
		C.samba_optimizer_release(o.h)
		o.h = nil
		runtime.SetFinalizer(o, nil)
	}
	return nil
}

func optimizerHandles(opts []*Optimizer) []*C.samba_optimizer {
	hs := make([]*C.samba_optimizer, len(opts))
	for i, o := range opts {
		hs[i] = o.h
	}
	return hs
}
