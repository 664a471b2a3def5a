package samba

/*
#include <stdlib.h>
#include "samba.h"

samba_status sambaGoModel(void* user_data, samba_tensor** inputs, size_t n_inputs, samba_tensor** outputs,
                          size_t capacity, size_t* n_outputs);

static samba_status samba_go_model_trampoline(void* user_data, samba_tensor* const* inputs, size_t n_inputs,
                                              samba_tensor** outputs, size_t capacity, size_t* n_outputs) {
  return sambaGoModel(user_data, (samba_tensor**)inputs, n_inputs, outputs, capacity, n_outputs);
}
static samba_model_fn samba_go_model(void) { return samba_go_model_trampoline; }
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// Model maps the model's inputs to its outputs with Op calls; an error (or a
// panic) fails the compile with its message.
type Model func(inputs []*Tensor) ([]*Tensor, error)

//export sambaGoModel
func sambaGoModel(user unsafe.Pointer, inputs **C.samba_tensor, nInputs C.size_t, outputs **C.samba_tensor,
	capacity C.size_t, nOutputs *C.size_t) (status C.samba_status) {
	fail := func(code C.samba_status, msg string) C.samba_status {
		cmsg := C.CString(msg)
		defer C.free(unsafe.Pointer(cmsg))
		C.samba_set_error_message(code, cmsg)
		return code
	}
	defer func() {
		if r := recover(); r != nil {
			status = fail(1, fmt.Sprintf("the model panicked: %v", r))
		}
	}()
	model := cgo.Handle(*(*uintptr)(user)).Value().(Model)
	in := unsafe.Slice(inputs, int(nInputs))
	ts := make([]*Tensor, len(in))
	for i, h := range in {
		ts[i] = borrow(h)
	}
	outs, err := model(ts)
	if err != nil {
		if e, ok := err.(*Error); ok {
			return fail(C.samba_status(e.Status), e.Message)
		}
		return fail(1, err.Error())
	}
	if len(outs) > int(capacity) {
		return fail(1, "the model returned too many outputs")
	}
	dst := unsafe.Slice(outputs, int(capacity))
	for i, t := range outs {
		C.samba_tensor_retain(t.h) // the engine takes this reference
		dst[i] = t.h
	}
	*nOutputs = C.size_t(len(outs))
	return 0
}

// modelArg pins a Model for the duration of one C call: the C side gets a
// pointer to C memory holding the handle, never a Go pointer.
type modelArg struct {
	h   cgo.Handle
	ptr unsafe.Pointer
}

func newModelArg(m Model) *modelArg {
	a := &modelArg{h: cgo.NewHandle(m)}
	a.ptr = C.malloc(C.size_t(unsafe.Sizeof(uintptr(0))))
	*(*uintptr)(a.ptr) = uintptr(a.h)
	return a
}

func (a *modelArg) free() {
	C.free(a.ptr)
	a.h.Delete()
}

func modelFn() C.samba_model_fn { return C.samba_go_model() }
