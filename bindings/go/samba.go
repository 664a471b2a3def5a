// Package samba binds the Samba engine (libsamba, C header samba.h) for Go.
//
// It covers the training workflow of the C API: tensors, eager ops with
// autograd, optimizers, sessions that compile a Go model into a PEF
// (Session.Compile), load it after re-tracing the model (Session.TraceGraph)
// and run its sections with every run option (Session.Run), device tensors,
// checkpoints (Session.SaveCheckpoint, Session.LoadCheckpoint), safetensors
// files (Session.SaveSafetensors, Session.LoadSafetensors), lazy
// parameters with materializers (Session.EnableLazyParams,
// Session.CreateParameter) and the loader that prepares batches ahead
// (NewLoader).
//
// The library is found through pkg-config (`#cgo pkg-config: samba`): with
// Samba installed under PREFIX,
//
//	PKG_CONFIG_PATH=PREFIX/lib/pkgconfig go test ./...
//
// builds and runs; samba.pc carries an rpath to its libdir, so binaries find
// libsamba.so at run time without LD_LIBRARY_PATH.
//
// Every handle type has a Close method that releases it at once; a finalizer
// releases handles that were never closed, as a safety net only. Failed calls
// return *Error, which carries the library's status code and message and
// matches a Status with errors.Is.
package samba

/*
#cgo pkg-config: samba
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Status is a samba_status code (SAMBA_ERR_*). A Status is also an error, so
// that errors.Is(err, samba.NotFound) tells which kind of failure err is.
type Status int32

// The status codes of samba.h; the numbers never change.
const (
	OK              Status = C.SAMBA_OK
	InvalidArgument Status = C.SAMBA_ERR_INVALID_ARGUMENT
	NullPointer     Status = C.SAMBA_ERR_NULL_POINTER
	OutOfRange      Status = C.SAMBA_ERR_OUT_OF_RANGE
	ShapeMismatch   Status = C.SAMBA_ERR_SHAPE_MISMATCH
	DTypeMismatch   Status = C.SAMBA_ERR_DTYPE_MISMATCH
	NotFound        Status = C.SAMBA_ERR_NOT_FOUND
	OutOfMemory     Status = C.SAMBA_ERR_OUT_OF_MEMORY
	Unsupported     Status = C.SAMBA_ERR_UNSUPPORTED
	InvalidState    Status = C.SAMBA_ERR_INVALID_STATE
	IOError         Status = C.SAMBA_ERR_IO
	CorruptFile     Status = C.SAMBA_ERR_CORRUPT_FILE
	VersionMismatch Status = C.SAMBA_ERR_VERSION_MISMATCH
	Timeout         Status = C.SAMBA_ERR_TIMEOUT
	Cancelled       Status = C.SAMBA_ERR_CANCELLED
	InternalError   Status = C.SAMBA_ERR_INTERNAL
)

// String is the code's name in samba.h, such as "SAMBA_ERR_NOT_FOUND".
func (s Status) String() string { return C.GoString(C.samba_status_name(C.samba_status(s))) }

// Error makes a bare Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

// Error is a failed call: the library's status code and its message, which
// names what was wrong and what was expected.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Status.String() + ": " + e.Message }

// Is reports whether target is this error's Status, so that
// errors.Is(err, samba.ShapeMismatch) holds for a shape mismatch.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// pin keeps the goroutine on its OS thread until the returned function runs:
// the library keeps the last error message per thread, so a failed call and
// the read of its message must happen on one thread. Every function that
// calls check starts with `defer pin()()`.
func pin() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// check turns a status into an error with the calling thread's message.
func check(st C.samba_status) error {
	if st == C.SAMBA_OK {
		return nil
	}
	return &Error{Status: Status(st), Message: C.GoString(C.samba_last_error_message())}
}

func invalid(message string) error { return &Error{Status: InvalidArgument, Message: message} }

// Version is the library's version string, such as "0.1.0".
func Version() string { return C.GoString(C.samba_version()) }

// DType is a tensor element type (SAMBA_FLOAT32, ...).
type DType int32

// The element types of samba.h.
const (
	Float32  DType = C.SAMBA_FLOAT32
	BFloat16 DType = C.SAMBA_BFLOAT16
	Float16  DType = C.SAMBA_FLOAT16
	Float64  DType = C.SAMBA_FLOAT64
	Int64    DType = C.SAMBA_INT64
	Int32    DType = C.SAMBA_INT32
	Int16    DType = C.SAMBA_INT16
	Int8     DType = C.SAMBA_INT8
	Uint8    DType = C.SAMBA_UINT8
	Bool     DType = C.SAMBA_BOOL
)

// String is the dtype's name, such as "float32".
func (d DType) String() string { return C.GoString(C.samba_dtype_name(C.samba_dtype(d))) }

// Size is the size of one element in bytes (0 for an unknown dtype).
func (d DType) Size() int { return int(C.samba_dtype_size(C.samba_dtype(d))) }

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// cstrings copies strs into C strings; free releases them.
func cstrings(strs []string) (arr []*C.char, free func()) {
	arr = make([]*C.char, len(strs))
	for i, s := range strs {
		arr[i] = C.CString(s)
	}
	return arr, func() {
		for _, p := range arr {
			C.free(unsafe.Pointer(p))
		}
	}
}

func firstOrNil[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func int64s(s []int64) *C.int64_t { return (*C.int64_t)(unsafe.Pointer(firstOrNil(s))) }
