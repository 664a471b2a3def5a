package samba

/*
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"runtime"
	"sort"
	"unsafe"
)

// Session compiles models into PEFs, loads a PEF on its emulated device and
// runs it. Runs that change model state are serialized by the library;
// inference runs may come from many goroutines at once.
type Session struct{ h *C.samba_session }

// NewSession is a session running on threads threads (0: one per hardware
// thread).
func NewSession(threads int) (*Session, error) {
	defer pin()()
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
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close frees the session, its loaded PEF and device memory.
func (s *Session) Close() error {
	if s.h != nil {
		C.samba_session_release(s.h)
		s.h = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// SetSeed sets the seed of the session's random generator (rand, dropout,
// lazy parameters without a seed of their own).
func (s *Session) SetSeed(seed uint64) error {
	defer pin()()
	err := check(C.samba_session_set_seed(s.h, C.uint64_t(seed)))
	runtime.KeepAlive(s)
	return err
}

// OutputGradMode says how the gradient fed to a model output starts.
type OutputGradMode int32

// The modes of samba_compile_options_set_output_grad.
const (
	GradOnes        OutputGradMode = C.SAMBA_OUTPUT_GRAD_ONES
	GradCustom      OutputGradMode = C.SAMBA_OUTPUT_GRAD_CUSTOM
	GradUnspecified OutputGradMode = C.SAMBA_OUTPUT_GRAD_UNSPECIFIED
)

// OutputGrad sets how the gradient of model output Index starts; Values is
// used with GradCustom.
type OutputGrad struct {
	Index  int
	Mode   OutputGradMode
	Values *Tensor
}

// CompileOptions are the compiler's arguments. The zero value is the
// library's defaults: optimized (o1), training, weights embedded, a .pef.log
// beside the PEF, every output a loss.
type CompileOptions struct {
	Name             string // program name (default "model")
	PEFPath          string // where the PEF is written (default "<Name>.pef")
	Unoptimized      bool   // o0: one op per kernel, no fusion passes
	Inference        bool   // forward only: no gradients, no optimizer
	BatchSize        int64  // -b (0: none)
	MicroBatchSize   int64  // -mb (0: none)
	Mapping          string // "section" (default) or "spatial"
	MixedPrecision   string // "none" (default) or "bf16": bf16 products, fp32 accumulation and master weights
	LossIndices      []int64
	OutputGrads      []OutputGrad
	IOHostMemory     bool
	GradAccumulation bool
	NoEmbedWeights   bool // the PEF holds no weight values
	NoLog            bool // no "<PEF>.log"
	Metadata         map[string]string
}

func setString(set func(*C.char) C.samba_status, v string) error {
	c := C.CString(v)
	defer C.free(unsafe.Pointer(c))
	return check(set(c))
}

// build makes the C options; the caller releases them.
func (o *CompileOptions) build() (*C.samba_compile_options, error) {
	var co *C.samba_compile_options
	if err := check(C.samba_compile_options_create(&co)); err != nil {
		return nil, err
	}
	steps := []func() error{
		func() error {
			if o.Name == "" {
				return nil
			}
			return setString(func(c *C.char) C.samba_status { return C.samba_compile_options_set_name(co, c) }, o.Name)
		},
		func() error {
			if o.PEFPath == "" {
				return nil
			}
			return setString(func(c *C.char) C.samba_status { return C.samba_compile_options_set_pef_path(co, c) }, o.PEFPath)
		},
		func() error {
			if !o.Unoptimized {
				return nil
			}
			return check(C.samba_compile_options_set_opt_level(co, 0))
		},
		func() error { return check(C.samba_compile_options_set_inference(co, cbool(o.Inference))) },
		func() error {
			if o.BatchSize == 0 {
				return nil
			}
			return check(C.samba_compile_options_set_batch_size(co, C.int64_t(o.BatchSize)))
		},
		func() error {
			if o.MicroBatchSize == 0 {
				return nil
			}
			return check(C.samba_compile_options_set_micro_batch_size(co, C.int64_t(o.MicroBatchSize)))
		},
		func() error {
			if o.Mapping == "" {
				return nil
			}
			return setString(func(c *C.char) C.samba_status { return C.samba_compile_options_set_mapping(co, c) }, o.Mapping)
		},
		func() error {
			if o.MixedPrecision == "" {
				return nil
			}
			return setString(func(c *C.char) C.samba_status { return C.samba_compile_options_set_mixed_precision(co, c) },
				o.MixedPrecision)
		},
		func() error {
			if len(o.LossIndices) == 0 {
				return nil
			}
			return check(C.samba_compile_options_set_loss_indices(co, int64s(o.LossIndices), C.size_t(len(o.LossIndices))))
		},
		func() error {
			for _, g := range o.OutputGrads {
				var v *C.samba_tensor
				if g.Values != nil {
					v = g.Values.h
				}
				if err := check(C.samba_compile_options_set_output_grad(co, C.size_t(g.Index),
					C.samba_output_grad_mode(g.Mode), v)); err != nil {
					return err
				}
				runtime.KeepAlive(g.Values)
			}
			return nil
		},
		func() error { return check(C.samba_compile_options_set_io_host_memory(co, cbool(o.IOHostMemory))) },
		func() error {
			return check(C.samba_compile_options_set_grad_accumulation(co, cbool(o.GradAccumulation)))
		},
		func() error { return check(C.samba_compile_options_set_embed_weights(co, cbool(!o.NoEmbedWeights))) },
		func() error { return check(C.samba_compile_options_set_write_log(co, cbool(!o.NoLog))) },
		func() error {
			keys := make([]string, 0, len(o.Metadata))
			for k := range o.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				kv, free := cstrings([]string{k, o.Metadata[k]})
				err := check(C.samba_compile_options_add_metadata(co, kv[0], kv[1]))
				free()
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			C.samba_compile_options_release(co)
			return nil, err
		}
	}
	return co, nil
}

// Compile traces model with symbolic stand-ins for inputs (their names,
// dtypes and shapes are used, never their data), adds the backward graph
// and the optimizers' updates, and writes the PEF to opts.PEFPath. opts may
// be nil for the defaults.
func (s *Session) Compile(model Model, inputs []*Tensor, optimizers []*Optimizer, opts *CompileOptions) error {
	defer pin()()
	if opts == nil {
		opts = &CompileOptions{}
	}
	co, err := opts.build()
	if err != nil {
		return err
	}
	defer C.samba_compile_options_release(co)
	in, op := tensorHandles(inputs), optimizerHandles(optimizers)
	arg := newModelArg(model)
	defer arg.free()
	err = check(C.samba_session_compile(s.h, modelFn(), arg.ptr, firstOrNil(in), C.size_t(len(in)), firstOrNil(op),
		C.size_t(len(op)), co))
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(optimizers)
	runtime.KeepAlive(s)
	return err
}

// TraceOptions are trace_graph's arguments. The zero value is the
// library's defaults: output gradients initialised, values transferred to
// the device.
type TraceOptions struct {
	NoInitOutputGrads bool               // leave output gradients as they are
	UnspecifiedGrads  []string           // outputs whose gradient the app sets
	CustomGrads       map[string]*Tensor // outputs whose gradient starts at these values
	NoTransferDevice  bool               // copy nothing to the device
	DataParallelMode  string             // "normal" (default)
}

func (o *TraceOptions) build() (*C.samba_trace_options, error) {
	var to *C.samba_trace_options
	if err := check(C.samba_trace_options_create(&to)); err != nil {
		return nil, err
	}
	err := func() error {
		if err := check(C.samba_trace_options_set_init_output_grads(to, cbool(!o.NoInitOutputGrads))); err != nil {
			return err
		}
		if err := check(C.samba_trace_options_set_transfer_device(to, cbool(!o.NoTransferDevice))); err != nil {
			return err
		}
		for _, name := range o.UnspecifiedGrads {
			err := setString(func(c *C.char) C.samba_status { return C.samba_trace_options_add_unspecified_grad(to, c) }, name)
			if err != nil {
				return err
			}
		}
		for name, values := range o.CustomGrads {
			err := setString(func(c *C.char) C.samba_status {
				return C.samba_trace_options_set_custom_grad(to, c, values.h)
			}, name)
			runtime.KeepAlive(values)
			if err != nil {
				return err
			}
		}
		if o.DataParallelMode != "" {
			return setString(func(c *C.char) C.samba_status {
				return C.samba_trace_options_set_data_parallel_mode(to, c)
			}, o.DataParallelMode)
		}
		return nil
	}()
	if err != nil {
		C.samba_trace_options_release(to)
		return nil, err
	}
	return to, nil
}

// TraceGraph loads the PEF at pefPath after re-tracing model on inputs and
// checking it against the graph the PEF was compiled from (model nil: load
// without re-tracing), registers the host tensors the trace met and, unless
// opts says otherwise, copies their values to the device. It returns the
// model's outputs, named as in the PEF, to pass to Run. opts may be nil.
func (s *Session) TraceGraph(model Model, inputs []*Tensor, optimizers []*Optimizer, pefPath string,
	opts *TraceOptions) ([]*Tensor, error) {
	defer pin()()
	if opts == nil {
		opts = &TraceOptions{}
	}
	to, err := opts.build()
	if err != nil {
		return nil, err
	}
	defer C.samba_trace_options_release(to)
	cp := C.CString(pefPath)
	defer C.free(unsafe.Pointer(cp))
	in, op := tensorHandles(inputs), optimizerHandles(optimizers)
	fn, ptr := C.samba_model_fn(nil), unsafe.Pointer(nil)
	if model != nil {
		arg := newModelArg(model)
		defer arg.free()
		fn, ptr = modelFn(), arg.ptr
	}
	outs, err := withOutputs(8, func(out **C.samba_tensor, capacity C.size_t, n *C.size_t) C.samba_status {
		return C.samba_session_trace_graph(s.h, fn, ptr, firstOrNil(in), C.size_t(len(in)), firstOrNil(op),
			C.size_t(len(op)), cp, to, out, capacity, n)
	})
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(optimizers)
	runtime.KeepAlive(s)
	return outs, err
}

// LoadPEF loads the PEF at path without a model (pure inference), replacing
// the program loaded before.
func (s *Session) LoadPEF(path string) error {
	defer pin()()
	err := setString(func(c *C.char) C.samba_status { return C.samba_session_load_pef(s.h, c) }, path)
	runtime.KeepAlive(s)
	return err
}

// Unload unloads the program.
func (s *Session) Unload() error {
	defer pin()()
	err := check(C.samba_session_unload(s.h))
	runtime.KeepAlive(s)
	return err
}
