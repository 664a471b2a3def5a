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

// CallRange runs the schedule's calls From (inclusive) up to Until
// (exclusive); -1 leaves a bound open.
type CallRange struct{ From, Until int64 }

// DataParallel are the data-parallel run arguments: the run all-reduces the
// gradients of a PEF compiled for data parallel over the ranks of an mpirun
// job (include/samba/dist.h, docs/distributed-runtime.md). Mode: "normal",
// "inorder" or "optimal".
type DataParallel struct {
	ReduceOnRDU bool
	Mode        string
}

// RunOptions select what a run runs. The zero value runs the whole
// schedule in training mode with the argins as they are.
type RunOptions struct {
	SectionTypes  []string           // run every section of these types, in order ("FWD", "BCKWD", "OPT")
	SectionIDs    []int32            // run these sections, in order
	Calls         *CallRange         // run this range of the schedule's calls
	GraphName     string             // run only this graph of a multigraph PEF
	Hyperparams   map[string]float64 // argins such as "lr" set for this run and the ones after it
	Eval          bool               // evaluation mode: dropout rates are 0 for this run
	GradOfOutputs []*Tensor          // per model output, the gradient BCKWD starts from (nil: the device's)
	DataParallel  *DataParallel
}

func (o *RunOptions) build() (*C.samba_run_options, error) {
	var ro *C.samba_run_options
	if err := check(C.samba_run_options_create(&ro)); err != nil {
		return nil, err
	}
	if err := o.fill(ro); err != nil {
		C.samba_run_options_release(ro)
		return nil, err
	}
	return ro, nil
}

func (o *RunOptions) fill(ro *C.samba_run_options) error {
	if len(o.SectionTypes) > 0 {
		types, free := cstrings(o.SectionTypes)
		defer free()
		if err := check(C.samba_run_options_set_section_types(ro, &types[0], C.size_t(len(types)))); err != nil {
			return err
		}
	}
	if len(o.SectionIDs) > 0 {
		ids := (*C.int32_t)(unsafe.Pointer(&o.SectionIDs[0]))
		if err := check(C.samba_run_options_set_section_ids(ro, ids, C.size_t(len(o.SectionIDs)))); err != nil {
			return err
		}
	}
	if o.Calls != nil {
		if err := check(C.samba_run_options_set_call_range(ro, C.int64_t(o.Calls.From), C.int64_t(o.Calls.Until))); err != nil {
			return err
		}
	}
	if o.GraphName != "" {
		if err := setString(func(c *C.char) C.samba_status { return C.samba_run_options_set_graph_name(ro, c) },
			o.GraphName); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(o.Hyperparams))
	for k := range o.Hyperparams {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := C.double(o.Hyperparams[k])
		if err := setString(func(c *C.char) C.samba_status { return C.samba_run_options_set_hyperparam(ro, c, v) },
			k); err != nil {
			return err
		}
	}
	if err := check(C.samba_run_options_set_train(ro, cbool(!o.Eval))); err != nil {
		return err
	}
	if len(o.GradOfOutputs) > 0 {
		grads := make([]*C.samba_tensor, len(o.GradOfOutputs))
		for i, g := range o.GradOfOutputs {
			if g != nil {
				grads[i] = g.h
			}
		}
		err := check(C.samba_run_options_set_grad_of_outputs(ro, &grads[0], C.size_t(len(grads))))
		runtime.KeepAlive(o.GradOfOutputs)
		if err != nil {
			return err
		}
	}
	if dp := o.DataParallel; dp != nil {
		mode := C.CString(dp.Mode)
		defer C.free(unsafe.Pointer(mode))
		if err := check(C.samba_run_options_set_data_parallel(ro, 1, cbool(dp.ReduceOnRDU), mode)); err != nil {
			return err
		}
	}
	return nil
}

// Run copies inputs (matched to the PEF's tensors by name) to the device,
// runs the sections opts selects (nil: the whole schedule) and returns the
// device values of outputs (such as TraceGraph's; none: every output of the
// graphs whose FWD section ran) as host tensors.
func (s *Session) Run(inputs []*Tensor, outputs []*Tensor, opts *RunOptions) ([]*Tensor, error) {
	defer pin()()
	if opts == nil {
		opts = &RunOptions{}
	}
	ro, err := opts.build()
	if err != nil {
		return nil, err
	}
	defer C.samba_run_options_release(ro)
	in, want := tensorHandles(inputs), tensorHandles(outputs)
	outs, err := withOutputs(len(outputs), func(out **C.samba_tensor, capacity C.size_t, n *C.size_t) C.samba_status {
		return C.samba_session_run(s.h, firstOrNil(in), C.size_t(len(in)), firstOrNil(want), C.size_t(len(want)), ro,
			out, capacity, n)
	})
	runtime.KeepAlive(inputs)
	runtime.KeepAlive(outputs)
	runtime.KeepAlive(s)
	return outs, err
}

// NameKind selects one of the name lists of the loaded PEF.
type NameKind int32

// The name lists of samba_session_name_count.
const (
	SectionTypeNames      NameKind = C.SAMBA_NAMES_SECTION_TYPES
	WeightNames           NameKind = C.SAMBA_NAMES_WEIGHTS
	ArginNames            NameKind = C.SAMBA_NAMES_ARGINS
	DropoutRateArginNames NameKind = C.SAMBA_NAMES_DROPOUT_RATE_ARGINS
	DropoutSeedArginNames NameKind = C.SAMBA_NAMES_DROPOUT_SEED_ARGINS
	OutputNames           NameKind = C.SAMBA_NAMES_OUTPUTS
	InputNames            NameKind = C.SAMBA_NAMES_INPUTS
)

// Names is a name list of the loaded PEF (its section types, weights,
// argins, ...).
func (s *Session) Names(kind NameKind) ([]string, error) {
	defer pin()()
	defer runtime.KeepAlive(s)
	var n C.size_t
	if err := check(C.samba_session_name_count(s.h, C.samba_names_kind(kind), &n)); err != nil {
		return nil, err
	}
	names := make([]string, int(n))
	for i := range names {
		var p *C.char
		if err := check(C.samba_session_name_at(s.h, C.samba_names_kind(kind), C.size_t(i), &p)); err != nil {
			return nil, err
		}
		names[i] = C.GoString(p)
	}
	return names, nil
}

// Argin is the current value of argin name (such as "lr").
func (s *Session) Argin(name string) (float64, error) {
	defer pin()()
	var v C.double
	err := setString(func(c *C.char) C.samba_status { return C.samba_session_argin(s.h, c, &v) }, name)
	runtime.KeepAlive(s)
	return float64(v), err
}

// SetArgin sets argin name for the runs that follow.
func (s *Session) SetArgin(name string, value float64) error {
	defer pin()()
	err := setString(func(c *C.char) C.samba_status { return C.samba_session_set_argin(s.h, c, C.double(value)) }, name)
	runtime.KeepAlive(s)
	return err
}

func (s *Session) deviceCopy(t *Tensor, get func(*C.samba_session, *C.samba_tensor, **C.samba_tensor) C.samba_status) (*Tensor, error) {
	defer pin()()
	var v *C.samba_tensor
	err := check(get(s.h, t.h, &v))
	runtime.KeepAlive(t)
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return own(v), nil
}

// SnData is a host copy of t's device value (found by t's name).
func (s *Session) SnData(t *Tensor) (*Tensor, error) {
	return s.deviceCopy(t, func(s *C.samba_session, t *C.samba_tensor, out **C.samba_tensor) C.samba_status {
		return C.samba_tensor_sn_data(s, t, out)
	})
}

// SnGrad is a host copy of the device gradient of t (a trainable parameter
// of a training PEF).
func (s *Session) SnGrad(t *Tensor) (*Tensor, error) {
	return s.deviceCopy(t, func(s *C.samba_session, t *C.samba_tensor, out **C.samba_tensor) C.samba_status {
		return C.samba_tensor_sn_grad(s, t, out)
	})
}

// SetSnData copies values (t's shape) to t's device value.
func (s *Session) SetSnData(t, values *Tensor) error {
	defer pin()()
	err := check(C.samba_tensor_set_sn_data(s.h, t.h, values.h))
	runtime.KeepAlive(t)
	runtime.KeepAlive(values)
	runtime.KeepAlive(s)
	return err
}

// TensorsByName are host copies of the device values of the named tensors.
func (s *Session) TensorsByName(names ...string) ([]*Tensor, error) {
	defer pin()()
	if len(names) == 0 {
		return nil, nil
	}
	cn, free := cstrings(names)
	defer free()
	outs := make([]*C.samba_tensor, len(names))
	err := check(C.samba_session_get_tensors_by_name(s.h, &cn[0], C.size_t(len(cn)), &outs[0]))
	runtime.KeepAlive(s)
	if err != nil {
		return nil, err
	}
	return ownAll(outs), nil
}

// Transfer selects the registered tensors a bulk copy or a checkpoint moves.
type Transfer uint32

// The kinds of SAMBA_TRANSFER_*; combine them with |.
const (
	Parameters     Transfer = C.SAMBA_TRANSFER_PARAMETERS
	Buffers        Transfer = C.SAMBA_TRANSFER_BUFFERS
	OptimizerState Transfer = C.SAMBA_TRANSFER_OPTIMIZER_STATE
	AllState                = Parameters | Buffers | OptimizerState
)

// ToCPU copies the device values of the registered tensors of kinds what to
// their host tensors.
func (s *Session) ToCPU(what Transfer) error {
	defer pin()()
	err := check(C.samba_session_to_cpu(s.h, C.samba_transfer_kinds(what)))
	runtime.KeepAlive(s)
	return err
}

// ToRDU copies the host values of the registered tensors of kinds what to the
// device (materializing lazy parameters straight into device memory).
func (s *Session) ToRDU(what Transfer) error {
	defer pin()()
	err := check(C.samba_session_to_rdu(s.h, C.samba_transfer_kinds(what)))
	runtime.KeepAlive(s)
	return err
}

// SaveCheckpoint saves the device values of the loaded PEF's tensors of kinds
// what to path, atomically: once it returns nil, the checkpoint survives a
// crash, and a crash during the save leaves the previous file intact.
func (s *Session) SaveCheckpoint(path string, what Transfer) error {
	defer pin()()
	err := setString(func(c *C.char) C.samba_status {
		return C.samba_session_save_checkpoint(s.h, c, C.samba_transfer_kinds(what))
	}, path)
	runtime.KeepAlive(s)
	return err
}

// LoadCheckpoint loads the checkpoint at path into the device tensors of the
// same names, after verifying the whole file; on failure no tensor changes.
// With strict, every tensor of the file must be in the PEF and every tensor
// of kinds what in the file.
func (s *Session) LoadCheckpoint(path string, what Transfer, strict bool) error {
	defer pin()()
	err := setString(func(c *C.char) C.samba_status {
		return C.samba_session_load_checkpoint(s.h, c, C.samba_transfer_kinds(what), cbool(strict))
	}, path)
	runtime.KeepAlive(s)
	return err
}
