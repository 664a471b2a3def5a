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
	"errors"
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// Model maps the model's inputs to its outputs with Op calls. While a model
// is compiled or traced, its inputs are symbolic and the ops are recorded.
// An error (or a panic) fails the compile with its message; an *Error keeps
// its status.
type Model func(inputs []*Tensor) ([]*Tensor, error)

// Go values handed to the library as user_data live behind a cgo.Handle
// stored in C memory: C may keep that pointer, which it may not do with a Go
// pointer.
func newCallbackArg(v any) unsafe.Pointer {
	p := C.malloc(C.size_t(unsafe.Sizeof(uintptr(0))))
	*(*uintptr)(p) = uintptr(cgo.NewHandle(v))
	return p
}

func callbackValue(p unsafe.Pointer) any { return cgo.Handle(*(*uintptr)(p)).Value() }

func freeCallbackArg(p unsafe.Pointer) {
	cgo.Handle(*(*uintptr)(p)).Delete()
	C.free(p)
}

//export sambaGoDestroy
func sambaGoDestroy(user unsafe.Pointer) { freeCallbackArg(user) }

// fail sets the calling thread's error message for the library to report
// and returns the status to give it.
func fail(err error) C.samba_status {
	code := C.samba_status(InvalidArgument)
	var e *Error
	msg := err.Error()
	if errors.As(err, &e) {
		code, msg = C.samba_status(e.Status), e.Message
	}
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	C.samba_set_error_message(code, cmsg)
	return code
}

// recovered turns a panic of a callback into a failing status: a panic
// must not unwind through the library's frames.
func recovered(status *C.samba_status, what string) {
	if r := recover(); r != nil {
		*status = fail(fmt.Errorf("the %s panicked: %v", what, r))
	}
}

//export sambaGoModel
func sambaGoModel(user unsafe.Pointer, inputs **C.samba_tensor, nInputs C.size_t, outputs **C.samba_tensor,
	capacity C.size_t, nOutputs *C.size_t) (status C.samba_status) {
	defer recovered(&status, "model")
	model := callbackValue(user).(Model)
	ts := make([]*Tensor, int(nInputs))
	for i, h := range unsafe.Slice(inputs, int(nInputs)) {
		ts[i] = borrow(h)
	}
	outs, err := model(ts)
	if err != nil {
		return fail(err)
	}
	if len(outs) > int(capacity) {
		return fail(invalid(fmt.Sprintf("the model returned %d outputs; at most %d are accepted", len(outs), capacity)))
	}
	dst := unsafe.Slice(outputs, int(capacity))
	for i, t := range outs {
		C.samba_tensor_retain(t.h) // the engine takes this reference
		dst[i] = t.h
	}
	*nOutputs = C.size_t(len(outs))
	return C.SAMBA_OK
}

//export sambaGoMaterialize
func sambaGoMaterialize(user unsafe.Pointer, out *C.samba_tensor, rng *C.samba_rng_stream) (status C.samba_status) {
	defer recovered(&status, "materializer")
	t := borrow(out)
	defer t.Close()
	if err := callbackValue(user).(MaterializeFunc)(t, &RNGStream{rng}); err != nil {
		return fail(err)
	}
	return C.SAMBA_OK
}

// modelArg holds a Model for the duration of one C call.
type modelArg struct{ ptr unsafe.Pointer }

func newModelArg(m Model) *modelArg { return &modelArg{newCallbackArg(m)} }

func (a *modelArg) free() { freeCallbackArg(a.ptr) }

func modelFn() C.samba_model_fn { return C.samba_go_model() }
